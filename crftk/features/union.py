"""The union of feature spaces: the dictionary of several pieces of data, built from theirs.

Fitting pieces of a corpus one by one and taking the union of their spaces, in the
pieces' order, gives the space that fitting the whole corpus gives, id for id: the
vocabularies are merged in order of first appearance (as fitting numbers them), the
labels sorted, each line's attributes are the union of the pieces' (their value ids
re-read over the merged vocabularies and packed as fitting packs them), with their
occurrences summed and the rare ones dropped (``min_freq``) only then, and the
supported state features are the pairs any piece saw on a kept attribute. So the
workers of a cluster, a stream of batches and an old model with new data all build
their dictionary from parts (crftk.distributed.encoding, crftk.training.streaming,
incremental ``--init``), and ``maps`` say where each part's attributes, edge
attributes and labels went.
"""

from dataclasses import dataclass

import numpy as np

from crftk.errors import CrftkError
from crftk.features.extract import Extractor, Vocab
from crftk.features.space import CompiledLine, FeatureSpace, _narrow_keys, pack_rows
from crftk.features.templates import padding_value

#: A count that means "always kept" (an attribute of a loaded model or of a ``keep`` space);
#: sums saturate here, far above any corpus's occurrences.
ALWAYS = np.int64(1) << 48


@dataclass
class SpaceMap:
    """Where one space's state attributes, edge attributes and labels are in the union (-1: dropped)."""

    attrs: np.ndarray
    edge_attrs: np.ndarray
    labels: np.ndarray


def union_vocabs(spaces, template, keys):
    """{source: Vocab}: the template's padding values, then each source's values of every space,
    in the spaces' order."""
    pads = [padding_value(d) for k in range(1, template.max_offset + 1) for d in (-k, k)]
    vocabs = {}
    for key in keys:
        v = Vocab(pads)
        for s in spaces:
            if key in s.vocabs:
                v.add_ids(s.vocabs[key].strings)
        vocabs[key] = v
    return vocabs


def _radices(template, vocabs):
    radix = {key: len(v) for key, v in vocabs.items()}
    # a real-valued line (%num, %vec) has no vocabulary: its keys number its attributes
    radix.update({m.source: 1 if m.kind == "num" else template.vectors[m.args[0]].dim
                  for m in template.macros if m.real})
    return radix


def _rows(space, cl, to_union):
    """A line's attributes as rows of value ids over the union's vocabularies (a real-valued
    line's: its keys); ``to_union(source)``: the union's id of each of the space's values."""
    if cl.line.real is not None:
        return np.asarray(cl.keys, dtype=np.int64)[:, None]
    rows = space.value_ids(cl, cl.keys)
    for j, m in enumerate(cl.line.macros):
        rows[:, j] = to_union(m.source)[rows[:, j]]
    return rows


def _counts(cl, always):
    if always or cl.counts is None:
        return np.full(cl.size, ALWAYS, dtype=np.int64)
    return np.asarray(cl.counts, dtype=np.int64)


def _union_line(tl, owned, radices, min_freq):
    """(the union's CompiledLine of template line ``tl``, [each owner's map to its ranks]) from
    ``owned``: (rows, counts) of each space that has the line."""
    rows = np.concatenate([r for r, _ in owned])
    counts = np.concatenate([c for _, c in owned])
    width = rows.shape[1]
    if rows.shape[0] == 0:
        group = np.zeros(0, dtype=np.int64)
        uniq, summed = rows, counts
    else:
        order = np.lexsort(rows.T[::-1]) if width else np.arange(rows.shape[0])
        ordered = rows[order]
        starts = np.ones(rows.shape[0], dtype=bool)
        if width:
            starts[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
        else:
            starts[1:] = False
        first = np.flatnonzero(starts)
        group = np.empty(rows.shape[0], dtype=np.int64)
        group[order] = np.cumsum(starts) - 1
        uniq = ordered[first]
        summed = np.minimum(np.add.reduceat(np.minimum(counts[order], ALWAYS), first), ALWAYS)
    keep = summed >= min_freq
    rank_of = np.where(keep, np.cumsum(keep) - 1, -1)
    kept = uniq[keep]
    if width:
        steps, key = pack_rows(kept, [radices[m.source] for m in tl.macros] if tl.real is None else [1])
    else:
        steps, key = [], np.zeros(kept.shape[0], dtype=np.int64)
    key = key.astype(np.int64)
    line = CompiledLine(tl, steps, key if tl.real is not None else _narrow_keys(key), counts=summed[keep])
    maps, at = [], 0
    for r, _ in owned:
        maps.append(rank_of[group[at:at + r.shape[0]]])
        at += r.shape[0]
    return line, maps


def _check_alike(spaces):
    first = spaces[0]
    for s in spaces[1:]:
        for what in ("n_columns", "label_col", "feature_set"):
            if getattr(s, what) != getattr(first, what):
                raise CrftkError(f"feature spaces of different {what.replace('_', ' ')} cannot be merged")
        if s.template.text != first.template.text:
            raise CrftkError("feature spaces of different templates cannot be merged")


def union_spaces(spaces, *, min_freq=1, keep=(), template=None, lexicons=None, labels=None,
                 feature_set=None, features=True):
    """(the union FeatureSpace, [a SpaceMap per space]).

    Attributes seen fewer than ``min_freq`` times in all are dropped, except those of the
    spaces whose index is in ``keep`` or that have no counts (loaded from a file). The spaces
    share their template, unless ``template`` (a template holding every space's lines,
    matched by text, with ``lexicons``) is given; ``labels``: the union's labels (default: all,
    sorted); ``feature_set``: the union's (default: the first space's); ``features``: False
    leaves the state feature table empty (the caller fills it).
    """
    spaces = list(spaces)
    if not spaces:
        raise ValueError("no feature spaces to merge")
    if min_freq < 1:
        raise CrftkError("--min-freq must be at least 1")
    first = spaces[0]
    if template is None:
        _check_alike(spaces)
        template = first.template
        lexicons = first.extractor.lexicons
    elif lexicons is None:
        lexicons = {}
        for s in spaces:
            lexicons.update(s.extractor.lexicons)
    keys = Extractor(template, lexicons, {}).keys
    vocabs = union_vocabs(spaces, template, keys)
    extractor = Extractor(template, lexicons, vocabs)
    radices = _radices(template, vocabs)
    keep = set(keep)
    id_maps = {}

    def to_union(i, source):
        """The union's id of each value of space i's source (each source looked up once)."""
        if (i, source) not in id_maps:
            id_maps[i, source] = vocabs[source].ids(spaces[i].vocabs[source].strings)
        return id_maps[i, source]

    def lines(kind):
        out, maps = [], [[] for _ in spaces]
        for tl in (template.unigrams if kind == "u" else template.bigrams):
            owned, owners = [], []
            for i, s in enumerate(spaces):
                for cl in (s.unigram_lines if kind == "u" else s.bigram_lines):
                    if cl.line.text == tl.text:
                        owned.append((_rows(s, cl, lambda source: to_union(i, source)), _counts(cl, i in keep)))
                        owners.append((i, cl))
            if not owned:
                out.append(CompiledLine(tl, [], np.zeros(0, np.int64), counts=np.zeros(0, np.int64)))
                continue
            line, ranks = _union_line(tl, owned, radices, min_freq)
            out.append(line)
            for (i, cl), rank in zip(owners, ranks):
                maps[i].append((cl, line, rank))
        return out, maps

    unigram, umaps = lines("u")
    bigram, bmaps = lines("b")
    if labels is None:
        labels = sorted(set().union(*(s.labels for s in spaces)))
    union = FeatureSpace(template, first.n_columns, first.label_col, labels, extractor, unigram, bigram,
                         np.zeros(1, np.int32), np.zeros(0, np.int32), feature_set or first.feature_set)

    def id_map(maps, n):
        out = np.full(n, -1, dtype=np.int64)
        for cl, ucl, rank in maps:
            out[cl.offset:cl.offset + cl.size] = np.where(rank >= 0, ucl.offset + rank, -1)
        return out

    index = {s: j for j, s in enumerate(union.labels)}
    smaps = [SpaceMap(id_map(umaps[i], s.n_attrs), id_map(bmaps[i], s.n_edge_attrs),
                      np.array([index.get(y, -1) for y in s.labels], dtype=np.int64))
             for i, s in enumerate(spaces)]
    if features:
        _union_features(union, spaces, smaps)
    return union, smaps


def _union_features(union, spaces, smaps):
    """The union's state features: every label with every attribute (complete), or the pairs a
    space had on an attribute the union kept (supported)."""
    A, L = union.n_attrs, union.n_labels
    if A * L >= 2**31:
        raise CrftkError(f"{A} attributes x {L} labels: too many for this version; raise --min-freq")
    if union.feature_set == "complete":
        union.feat_ptr = (np.arange(A + 1, dtype=np.int64) * L).astype(np.int32)
        union.feat_label = np.tile(np.arange(L, dtype=np.int32), A)
        return
    seen = np.zeros(A * L, dtype=bool)
    for s, m in zip(spaces, smaps):
        attr = m.attrs[np.repeat(np.arange(s.n_attrs, dtype=np.int64), np.diff(s.feat_ptr))]
        label = m.labels[s.feat_label]
        ok = (attr >= 0) & (label >= 0)
        seen[attr[ok] * L + label[ok]] = True
    pairs = np.flatnonzero(seen)
    union.feat_label = (pairs % L).astype(np.int32)
    union.feat_ptr = np.zeros(A + 1, dtype=np.int32)
    np.cumsum(np.bincount(pairs // L, minlength=A), out=union.feat_ptr[1:])
    if union.n_params >= 2**31:
        raise CrftkError(f"{union.n_params} parameters: too many for this version; "
                         f"raise --min-freq or use the supported feature set")


def map_chain_weights(old_space, weights, new_space, smap):
    """A first-order chain CRF's weights on ``old_space`` placed in ``new_space``'s layout (the
    union ``smap`` maps it into); the parameters the new space adds are 0."""
    old, new = old_space.layout(), new_space.layout()
    weights = np.asarray(weights, dtype=np.float64)
    out = np.zeros(new.n_params)
    L = new_space.n_labels
    attr = smap.attrs[np.repeat(np.arange(old_space.n_attrs, dtype=np.int64), np.diff(old_space.feat_ptr))]
    label = smap.labels[old_space.feat_label]
    new_keys = (np.repeat(np.arange(new_space.n_attrs, dtype=np.int64), np.diff(new_space.feat_ptr)) * L
                + new_space.feat_label)         # increasing: attributes in order, labels sorted in each
    key = np.where((attr >= 0) & (label >= 0), attr * L + label, -1)
    at = np.minimum(np.searchsorted(new_keys, key), max(new_keys.size - 1, 0))
    found = (key >= 0) & (new_keys.size > 0)
    if new_keys.size:
        found &= new_keys[at] == key
    out[new.state][at[found]] = weights[old.state][found]
    lab = smap.labels
    has = lab >= 0
    old_trans, new_trans = old.transitions(weights), new.transitions(out)
    new_trans[np.ix_(lab[has], lab[has])] = old_trans[np.ix_(has, has)]
    out[new.start][lab[has]] = weights[old.start][has]
    out[new.end][lab[has]] = weights[old.end][has]
    if old_space.n_edge_attrs:          # every kept edge attribute's block at once
        kept = np.flatnonzero(smap.edge_attrs >= 0)
        rows = np.flatnonzero(has)
        new.edge_blocks(out)[np.ix_(smap.edge_attrs[kept], lab[has], lab[has])] = \
            old.edge_blocks(weights)[np.ix_(kept, rows, rows)]
    return out


def same_space(a, b):
    """(True, "") when two feature spaces are equal array by array, else (False, the first difference)."""
    for what in ("n_columns", "label_col", "feature_set", "labels"):
        if getattr(a, what) != getattr(b, what):
            return False, f"{what}: {getattr(a, what)!r} != {getattr(b, what)!r}"
    if a.template.text != b.template.text:
        return False, "template text"
    if list(a.extractor.keys) != list(b.extractor.keys):
        return False, "sources"
    for key in a.extractor.keys:
        if a.vocabs[key].strings != b.vocabs[key].strings:
            return False, f"vocabulary of {key!r}"
    for kind, la, lb in (("U", a.unigram_lines, b.unigram_lines), ("B", a.bigram_lines, b.bigram_lines)):
        if len(la) != len(lb):
            return False, f"{kind} line count"
        for i, (x, y) in enumerate(zip(la, lb)):
            if not np.array_equal(x.keys, y.keys):
                return False, f"{kind} line {i} keys"
            if len(x.steps) != len(y.steps) or any(not np.array_equal(p, q) for p, q in zip(x.steps, y.steps)):
                return False, f"{kind} line {i} steps"
    for what in ("feat_ptr", "feat_label"):
        if not np.array_equal(getattr(a, what), getattr(b, what)):
            return False, what
    return True, ""
