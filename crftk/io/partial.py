"""Partial annotation in a label column (Tsuboi et al. 2008): unknown tokens and label sets.

A label cell equal to the unknown marker (``--unknown-label``, default ``?``) allows every
label; a cell ``A|B`` allows A and B. :func:`resolve` turns the distinct label strings of a
corpus into its real labels, each token's gold label id (-1 where the token is partial) and
the mask of allowed labels the lattice kernels read (``EncodedCorpus.allowed``).

A second-order model's labels are pairs ``prev|cur`` (crftk.structures.pairs), so a partial
tag there is carried as a *pair cell* ``\\t<prev cell>\\t<cur cell>`` (:func:`pair_cell`; a tab
never occurs in a cell, which ASCII whitespace splits): never read as a set of pairs, it
allows the pairs (a, b) of the data with a allowed by the previous cell and b by the current.
"""

import numpy as np

from crftk.errors import CrftkError, UsageError, shown

DEFAULT_MARKER = "?"
SET_SEP = "|"
#: the tag before a sentence of a second-order model (crftk.structures.pairs)
BOS = "<s>"
_PAIR = "\t"


class AnnotationError(CrftkError):
    """A mistake in the annotation at one token: ``token`` (its index in the corpus) lets the
    caller, who knows where each sentence came from, name its file and line."""

    def __init__(self, message, token):
        super().__init__(message)
        self.token = int(token)
        self.where = None          # (sentence, position in it), once located

    def locate_in(self, lengths):
        """Set ``where`` from the corpus's sentence lengths."""
        ends = np.cumsum(np.asarray(lengths, dtype=np.int64))
        k = int(np.searchsorted(ends, self.token, side="right"))
        self.where = (k, self.token - (int(ends[k - 1]) if k else 0))


def check_marker(marker):
    """Refuse an unknown marker holding the separator of label sets (no cell could be it alone)."""
    if SET_SEP in marker:
        raise UsageError(f"--unknown-label {shown(marker)} must be one label cell, without {SET_SEP!r} (which "
                         "joins a label set)")
    return marker


def is_partial(cell, marker):
    """Whether a label cell is partial (unknown or a set); never with partial labels off (no marker)."""
    return bool(marker) and (cell == marker or SET_SEP in cell)


def pair_cell(prev, cur):
    """The pseudo pair label of a token whose tag or previous tag is partial."""
    return f"{_PAIR}{prev}{_PAIR}{cur}"


def is_pair_cell(label):
    return label.startswith(_PAIR)


def cell_set(cell, marker):
    """None (any label) for the marker, else the tuple of labels a cell allows; raises
    CrftkError on an empty element or the marker inside a set."""
    if cell == marker:
        return None
    parts = tuple(cell.split(SET_SEP))
    if len(parts) > 1:
        if any(not p for p in parts):
            raise CrftkError(f"label set {shown(cell)} has an empty element")
        if marker in parts:
            raise CrftkError(f"label set {shown(cell)} holds the unknown marker {shown(marker)} "
                             "(--unknown-label); the marker stands alone")
    return parts


class Resolved:
    """The labels, gold ids and allowed mask of a corpus's label column.

    ``labels``: the real labels, sorted; ``gold``: int32 [N] label id, -1 for partial tokens;
    ``allowed``: uint8 [N, L] (one-hot on labeled tokens) or None when every token is labeled;
    ``patterns``: {distinct label string id: label ids it allows} of the partial strings and
    ``string_ids``: the string id of each token (the fit's supported features read them).
    """

    def __init__(self, labels, gold, allowed, patterns, string_ids):
        self.labels, self.gold, self.allowed = labels, gold, allowed
        self.patterns, self.string_ids = patterns, string_ids

    @property
    def n_partial(self):
        return 0 if self.allowed is None else int((self.gold < 0).sum())


def partial_strings(strings, marker, pairs=False):
    """Which label strings are partial: pair cells for a corpus of label pairs (``pairs``, whose
    real labels hold ``|``), else the marker and sets."""
    return [is_pair_cell(s) if pairs else is_partial(s, marker) for s in strings]


def resolve(strings, ids, marker, fixed=None, pairs=False, extra=()):
    """Resolve label strings ``strings`` (distinct) and each token's index among them ``ids``;
    ``pairs``: they are label pairs of a second-order model, partial where they are pair cells;
    ``extra``: labels (tags) the model has even where no token has them as known labels (the
    outside label of the expected entity ratio, when every O is unknown).

    ``fixed``: the labels of an existing model (--init): every real label and set element must
    be one of them; else the labels are the distinct real (not partial) strings. Errors are
    AnnotationError at the first token of the offending string.
    """
    strings = list(strings)
    ids = np.asarray(ids, dtype=np.int64)
    partial = partial_strings(strings, marker, pairs)

    def first(i):
        return int(np.flatnonzero(ids == i)[0])

    if fixed is not None:
        labels = list(fixed)
        if marker and marker in labels:
            raise CrftkError(f"the unknown marker {shown(marker)} (--unknown-label) is a label of the --init "
                             "model; choose another marker")
    else:
        labels = sorted(s for s, p in zip(strings, partial) if not p)
        if pairs and any(partial):
            labels = _all_pairs(labels, extra)
        elif labels:
            labels = sorted(set(labels) | set(extra))
    index = {s: j for j, s in enumerate(labels)}
    used = np.zeros(len(strings), dtype=bool)
    used[np.unique(ids)] = True
    pairs = _Pairs(labels) if pairs else None
    string_label = np.full(len(strings), -1, dtype=np.int64)
    patterns = {}
    for i, s in enumerate(strings):
        if not used[i]:
            continue
        try:
            if not partial[i]:
                if s not in index:
                    raise CrftkError(f"label {shown(s)} is not one of the --init model's labels")
                string_label[i] = index[s]
            elif pairs is not None:
                patterns[i] = pairs.allowed(s, marker)
            else:
                patterns[i] = _set_ids(s, marker, index, fixed is not None)
        except AnnotationError:
            raise
        except CrftkError as e:
            raise AnnotationError(e.message, first(i)) from None
    if fixed is None and not labels:        # after the cells' own mistakes, which say more
        raise CrftkError("no token of the training data has a known label (every one is unknown or a set): "
                         "there is nothing to learn from")
    gold = string_label[ids].astype(np.int32)
    if not patterns:
        return Resolved(labels, gold, None, {}, ids)
    rows = np.zeros((len(strings), len(labels)), dtype=np.uint8)
    known = string_label >= 0
    rows[np.flatnonzero(known), string_label[known]] = 1
    for i, allowed_ids in patterns.items():
        rows[i, allowed_ids] = 1
    return Resolved(labels, gold, np.ascontiguousarray(rows[ids]), patterns, ids)


def _set_ids(cell, marker, index, fixed):
    """The label ids a partial cell of a first-order label column allows."""
    parts = cell_set(cell, marker)
    if parts is None:
        return np.arange(len(index), dtype=np.int64)
    for p in parts:
        if p not in index:
            whose = "the --init model has no label" if fixed else "the training data never has the label"
            raise CrftkError(f"label set {shown(cell)}: {whose} {shown(p)}")
    return np.array(sorted({index[p] for p in parts}), dtype=np.int64)


def _all_pairs(labels, extra=()):
    """Every pair of the tags of pair labels (and ``extra`` tags), and <s> before each: with
    partial tags a model of only the pairs seen fully labeled could leave a sentence no labeling
    (X ? Y needs some b with X|b and b|Y)."""
    tags = sorted({p.split(SET_SEP, 1)[1] for p in labels} | set(extra)) if labels else []
    return sorted(set(labels) | {f"{a}{SET_SEP}{b}" for a in [BOS] + tags for b in tags})


class _Pairs:
    """The pair labels ``prev|cur`` of a second-order corpus, for its pair cells."""

    def __init__(self, labels):
        split = [p.split(SET_SEP, 1) for p in labels]
        self.prev = np.array([a for a, _ in split], dtype=object)
        self.cur = np.array([b for _, b in split], dtype=object)
        self.tags = set(self.cur.tolist())

    def _mask(self, side, cell, marker):
        parts = cell_set(cell, marker)
        if parts is None:       # any tag: never <s>, which only the first token's cell names
            return side != BOS
        if is_partial(cell, marker):        # a set: of tags the data has (a single tag or <s> need no check)
            for p in parts:
                if p not in self.tags:       # a tag with "|" is no pair label either
                    raise CrftkError(f"label {shown(cell)} cannot be used with --order 2 but as a label set, and "
                                     f"the training data never has the label {shown(p)}")
        return np.isin(side, list(parts))

    def allowed(self, s, marker):
        """The pair ids a pair cell allows; CrftkError when the data has none of them."""
        _, prev, cur = s.split(_PAIR)
        ok = self._mask(self.prev, prev, marker) & self._mask(self.cur, cur, marker)
        if not ok.any() and self.prev.size:
            raise CrftkError(f"with --order 2, no pair of labels the training data has fits a tag "
                             f"{shown(cur)} after {shown(prev)}: annotate more, or train with --order 1")
        return np.flatnonzero(ok)
