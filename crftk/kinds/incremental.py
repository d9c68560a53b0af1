"""Incremental training of a chain (crftk train --init MODEL NEW_DATA, --init-space grow): the new
data's attributes, state features and labels added to the --init model's feature space, its
weights carried over and every new parameter starting at 0; or why the space is kept."""

from dataclasses import dataclass

import numpy as np

from crftk.features.space import FeatureSpace
from crftk.features.union import map_chain_weights, union_spaces
from crftk.io.partial import partial_strings
from crftk.progress import plural

#: New labels named in the log line, at most (a corpus of new labels would flood it).
NAMED_LABELS = 10


@dataclass
class Growth:
    """The grown space, the --init weights placed in it, and the line saying what was added (no
    space or weights: the line says why the space is kept)."""

    space: object
    weights: np.ndarray
    line: str


def kept(why):
    """The Growth of a space that cannot grow: its line says ``why``."""
    return Growth(None, None, f"--init-space grow: {why}: the --init model's space is kept (as --init-space keep)")


def why_kept(template, opt, order2):
    """Why --init-space grow cannot grow a chain's space for these options (None: it can)."""
    if order2:
        return "--order 2 trains label pairs, whose backoff features the union does not map"
    if template.lexicons:
        return ("the template reads lexicons, which fitting new data would read from their files (and "
                "match per fold), not from the model")
    if opt["entity_ratio"]:
        return "--entity-ratio adds its outside label to the fitted labels"
    return None


def has_partial_labels(sentences, label_col, marker):
    """Whether a label cell of the sentences is the unknown marker or a set (crftk.io.partial)."""
    if not marker:
        return False
    cells = {row[label_col] for s in sentences for row in s.rows}
    return any(partial_strings(sorted(cells), marker))


def grow(init, sentences, min_freq, source=None):
    """The Growth of ``init``'s space by ``sentences`` (read with its template), their attributes
    pruned at ``min_freq`` (the model's own are always kept); None when they add nothing, so that
    training goes on in the model's space exactly as --init-space keep would."""
    old = init.space
    new, _ = FeatureSpace.fit(sentences, old.template, label_col=old.label_col, min_freq=1,
                              feature_set=old.feature_set, path=source)
    return grow_by(init, new, min_freq)


def grow_by(init, new, min_freq):
    """:func:`grow` by the space ``new`` already fitted to the data with the model's template,
    label column and feature set, unpruned (min_freq 1: its counts are pruned here)."""
    old = init.space
    space, maps = union_spaces([old, new], min_freq=min_freq, keep=(0,))
    sizes = [(s.n_labels, s.n_attrs, s.n_edge_attrs, s.n_features) for s in (old, space)]
    if sizes[0] == sizes[1]:        # the old ids are kept in order: the same space
        return None
    weights = map_chain_weights(old, init.weights, space, maps[0])
    return Growth(space, weights, added_line(old, space, maps[0]))


def added_line(old, new, smap):
    """'--init-space grow: the training data adds 2 labels (B-X, I-X), 1,204 attributes (...)'."""
    fresh = [new.labels[j] for j in sorted(set(range(new.n_labels)) - set(smap.labels.tolist()))]
    parts = []

    def count(noun, a, b, plural_noun=None):
        parts.append(f"{plural(b - a, noun, plural_noun)} ({a:,} -> {b:,})")

    count("label", old.n_labels, new.n_labels)
    if fresh:
        shown = ", ".join(fresh[:NAMED_LABELS]) + (", ..." if len(fresh) > NAMED_LABELS else "")
        parts[-1] += f": {shown}"
    count("attribute", old.n_attrs, new.n_attrs)
    if old.n_edge_attrs or new.n_edge_attrs:
        count("transition attribute", old.n_edge_attrs, new.n_edge_attrs)
    count("state feature", old.n_features, new.n_features)
    count("parameter", old.n_params, new.n_params)
    return "--init-space grow: the training data adds " + "; ".join(parts) + "; the new weights start at 0"
