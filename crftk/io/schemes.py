"""Chunk tagging schemes of CoNLL label columns: their names, the prefixes each allows, and
conversions between them.

A tag is ``PREFIX-TYPE`` split on its first dash (``B-NP``: prefix ``B``, type
``NP``), or the bare ``O``. Evaluation (conlleval's chunk rules) and the hard
constraints of training and decoding read tags through this module.

Chunks are read by conlleval's rules (:func:`boundary`, :func:`read_chunks`, which
``crftk.evaluation.conlleval`` scores with) and written in any scheme (:func:`write_chunks`),
so a column converts from any scheme to any other with the same chunks (:func:`convert`);
``crftk train --train-scheme`` trains on a converted column and :class:`Recoder` converts a
model's predictions back, on label ids, vectorized.
"""

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.io.partial import is_partial

SCHEMES = ("iob1", "iob2", "ioe1", "ioe2", "iobes")
#: schemes a model may be trained in (crftk train --train-scheme); bilou is IOBES spelled
#: B, I, L (last), U (unit), as Ratinov & Roth name it; conlleval does not read it
TRAINING_SCHEMES = ("iob2", "iobes", "bilou")
#: other spellings of a scheme ("bioes" is how --constraints first named IOBES)
ALIASES = {"bioes": "iobes"}
#: the chunk prefixes each scheme allows besides the bare "O" (one letter each)
PREFIXES = {"iob1": "BI", "iob2": "BI", "ioe1": "IE", "ioe2": "IE", "iobes": "BIES", "bilou": "BILU"}
#: a bilou tag read as the IOBES tag conlleval's rules know
_BILOU_READ = {"L": "E", "U": "S"}


def canonical(scheme, choices=SCHEMES, what="tagging scheme"):
    """The scheme's own name (an alias resolved), refused unless it is one of ``choices``."""
    name = ALIASES.get(scheme, scheme)
    if name not in choices:
        raise CrftkError(f"unknown {what} {scheme!r} (choose from {', '.join(choices)})")
    return name


def allows(scheme, prefix):
    """Whether the scheme has this chunk prefix (one of its letters, not "" or "BI")."""
    return len(prefix) == 1 and prefix in PREFIXES[scheme]


def split(tag):
    """(prefix, type) of a tag: "B-NP" -> ("B", "NP"), "O" -> ("O", "")."""
    prefix, _, kind = tag.partition("-")
    return prefix, kind


# -- reading chunks (conlleval's rules) ---------------------------------------------------------

CONTINUE, CLOSE, OPEN = 0, 1, 2


def boundary(prev, tag):
    """Action at the boundary between ``prev`` and ``tag`` (conlleval's rules, with S for IOBES).

    ``OPEN``: a chunk starts at ``tag`` (closing any open chunk first); ``CLOSE``: an open
    chunk ends with ``prev``; ``CONTINUE``: neither. Returned with the type of ``tag``.
    """
    pp, pt = split(prev)
    cp, ct = split(tag)

    starts = (
        cp in ("B", "S", "[", "]")
        or (cp in ("I", "E") and pp in ("O", "E", "S"))
        or (cp != "O" and pt != ct)
    )
    if starts:
        return OPEN, ct
    ends = (
        pp in ("E", "S", "[", "]")
        or (pp in ("B", "I") and cp in ("B", "S", "O"))
        or (pp != "O" and pt != ct)
        or cp == "O"
    )
    return (CLOSE if ends else CONTINUE), ct


# (previous tag, tag) -> boundary(previous tag, tag). Grows with the number of distinct tag
# pairs seen, which is small for any real tag set; cleared if it ever gets large.
_BOUNDARIES = {}
_MAX_BOUNDARIES = 200_000


def _boundary(prev, tag):
    if len(_BOUNDARIES) >= _MAX_BOUNDARIES:
        _BOUNDARIES.clear()
    r = _BOUNDARIES[(prev, tag)] = boundary(prev, tag)
    return r


def read_chunks(tags):
    """Chunks of one sentence as ``(type, start, end_exclusive)`` by conlleval's rules; no checks."""
    get = _BOUNDARIES.get
    out = []
    prev = "O"
    start = -1
    ctype = ""
    i = 0
    for tag in tags:
        r = get((prev, tag))
        if r is None:
            r = _boundary(prev, tag)
        action = r[0]
        if action:
            if start >= 0:
                out.append((ctype, start, i))
                start = -1
            if action == OPEN:
                start = i
                ctype = r[1]
        prev = tag
        i += 1
    if start >= 0:  # the sentence boundary acts as "O", which closes any chunk
        out.append((ctype, start, i))
    return out


def readable(tag, scheme=None):
    """The tag as conlleval's rules read it: a bilou tag (``scheme`` "bilou") as its IOBES tag."""
    if scheme != "bilou":
        return tag
    prefix, kind = split(tag)
    return f"{_BILOU_READ[prefix]}-{kind}" if prefix in _BILOU_READ else tag


def chunks_of(tags, scheme=None):
    """Chunks of one sentence whose tags are in ``scheme`` (None: any conlleval reads)."""
    return read_chunks([readable(t, scheme) for t in tags] if scheme == "bilou" else tags)


# -- writing chunks -----------------------------------------------------------------------------

def _prefix(scheme, starts, ends, joined_before, joined_after):
    """The prefix of a chunk token in ``scheme``: whether the chunk starts or ends at it, and
    whether a chunk of its type ends right before it / starts right after it."""
    if scheme == "iob1":
        return "B" if starts and joined_before else "I"
    if scheme == "iob2":
        return "B" if starts else "I"
    if scheme == "ioe1":
        return "E" if ends and joined_after else "I"
    if scheme == "ioe2":
        return "E" if ends else "I"
    b, i, e, s = ("B", "I", "L", "U") if scheme == "bilou" else ("B", "I", "E", "S")
    if starts:
        return s if ends else b
    return e if ends else i


def write_chunks(chunks, n, scheme):
    """The ``n`` tags in ``scheme`` of a sentence with these chunks ((type, start, end), in order,
    not overlapping); tokens in no chunk are ``O``."""
    tags = ["O"] * n
    for k, (kind, start, end) in enumerate(chunks):
        before = k > 0 and chunks[k - 1][2] == start and chunks[k - 1][0] == kind
        after = k + 1 < len(chunks) and chunks[k + 1][1] == end and chunks[k + 1][0] == kind
        for t in range(start, end):
            tags[t] = f"{_prefix(scheme, t == start, t == end - 1, before, after)}-{kind}"
    return tags


def convert(tags, scheme, source=None):
    """A sentence's tags (in ``source``, None: any scheme conlleval reads) written in ``scheme``,
    with the same chunks."""
    return write_chunks(chunks_of(tags, source), len(tags), scheme)


def is_chunk_tag(tag, scheme=None):
    """Whether a label is a chunk tag that conversions keep: ``O``, or a prefix of the scheme
    (None: of any scheme conlleval reads, B/I/E/S) and a type."""
    if tag == "O":
        return True
    prefix, kind = split(tag)
    return bool(kind) and len(prefix) == 1 and prefix in PREFIXES[scheme or "iobes"]


def not_chunk_tag(labels, scheme=None):
    """The first label (sorted) that is not a chunk tag, or None when all are."""
    bad = sorted(lab for lab in set(labels) if not is_chunk_tag(lab, scheme))
    return bad[0] if bad else None


def check_chunk_tags(sentence, tags, marker, partial, other):
    """Refuse, at its line, the first of a sentence's tags that is partial (with the unknown
    ``marker`` of partial labels; None: none is) or not a chunk tag; ``partial`` and ``other``
    are the messages, with ``{label}`` where the tag goes."""
    for t, tag in enumerate(tags):
        if is_partial(tag, marker) or not is_chunk_tag(tag):
            why = partial if is_partial(tag, marker) else other
            raise CrftkError(why.format(label=shown(tag)), sentence.source,
                             sentence.line + t if sentence.line else None)


# -- the scheme of a corpus ---------------------------------------------------------------------

class Detector:
    """The scheme of a corpus's label column, from its sentences' tags given one at a time.

    ``S``, or both ``B`` and ``E``: iobes. Else ``E``: ioe1 when every ``E`` ends a chunk
    followed at once by one of its type and some chunk ends with ``I``; else ioe2. Else iob1
    when every ``B`` starts a chunk right after one of its type and some chunk starts with ``I``;
    else iob2. Ambiguous, and so chosen: a column of ``O`` alone or of chunks all written alike
    under two schemes (no chunk at all: iob2; chunks of ``I`` alone, which IOB1 and IOE1 both
    write so, are iob1; chunks all adjacent to one of their type are iob2/ioe2).
    """

    def __init__(self):
        self.prefixes = set()
        self.b_separates = self.e_separates = True
        self.start_not_b = self.end_not_e = False

    def add(self, tags):
        found = read_chunks(tags)
        for k, (kind, start, end) in enumerate(found):
            before = k > 0 and found[k - 1][2] == start and found[k - 1][0] == kind
            after = k + 1 < len(found) and found[k + 1][1] == end and found[k + 1][0] == kind
            first, last = split(tags[start])[0], split(tags[end - 1])[0]
            if first == "B":
                self.b_separates &= before
            else:
                self.start_not_b = True
            if last == "E":
                self.e_separates &= after
            else:
                self.end_not_e = True
        for tag in tags:
            self.prefixes.add(split(tag)[0])

    @property
    def scheme(self):
        p = self.prefixes
        if "S" in p or {"B", "E"} <= p:
            return "iobes"
        if "E" in p:
            return "ioe1" if self.e_separates and self.end_not_e else "ioe2"
        return "iob1" if self.b_separates and self.start_not_b else "iob2"


def detect(sequences):
    """The scheme of a corpus's tag sequences (see :class:`Detector` for what is ambiguous)."""
    d = Detector()
    for tags in sequences:
        d.add(list(tags))
    return d.scheme


# -- predictions converted back, on label ids ---------------------------------------------------

class Recoder:
    """Converts a model's predicted label ids (tags in ``source``) to tags in ``target``.

    A token's tag in any scheme depends only on its own tag and its neighbours' (conlleval's
    rules decide a chunk start from the previous tag, an end from the next, and IOB1/IOE1 ask
    whether the adjacent chunk has the same type), so one lookup table on (previous, current,
    next) label ids converts whole batches at once. ``names`` are the output labels: ``O`` and
    every prefix of ``target`` with every type.
    """

    def __init__(self, labels, source, target):
        labels = list(labels)
        read = [readable(lab, source) for lab in labels]
        L = len(labels)
        types = sorted({split(lab)[1] for lab in read if lab != "O"})
        letters = PREFIXES[target]
        self.names = ["O"] + [f"{p}-{kind}" for kind in types for p in letters]
        self.boundary_id = L                          # the sentence boundary acts as "O"
        padded = read + ["O"]
        starts = np.zeros((L + 1, L), dtype=bool)     # [previous, current]
        joined = np.zeros((L + 1, L), dtype=bool)     # previous is in a chunk of the current's type
        for a, prev in enumerate(padded):
            for c, cur in enumerate(read):
                starts[a, c] = boundary(prev, cur)[0] == OPEN
                joined[a, c] = prev != "O" and split(prev)[1] == split(cur)[1]
        ends = np.zeros((L, L + 1), dtype=bool)       # [current, next]
        for c, cur in enumerate(read):
            for b, nxt in enumerate(padded):
                ends[c, b] = boundary(cur, nxt)[0] != CONTINUE
        after = np.zeros((L, L + 1), dtype=bool)      # [current, next]: next starts a chunk of its type
        after[:, :L] = joined[:L, :] & starts[:L, :]
        s = starts[:, :, None]
        e = ends[None, :, :]
        before = (joined & starts)[:, :, None]
        a = after[None, :, :]
        shape = (L + 1, L, L + 1)
        code = np.zeros(shape, dtype=np.int64)
        for k, p in enumerate(letters):
            hit = np.zeros(shape, dtype=bool)
            for sv in (False, True):
                for ev in (False, True):
                    for bv in (False, True):
                        for av in (False, True):
                            if _prefix(target, sv, ev, bv, av) == p:
                                hit |= (s == sv) & (e == ev) & (before == bv) & (a == av)
            code[hit] = k
        kind_index = np.array([-1 if lab == "O" else types.index(split(lab)[1]) for lab in read], dtype=np.int64)
        table = 1 + kind_index[None, :, None] * len(letters) + code
        table[:, kind_index < 0, :] = 0
        self.table = table.astype(np.int32)

    def __call__(self, pred, sent_ptr):
        """The output label ids of label ids ``pred`` of sentences starting at ``sent_ptr`` (and its end)."""
        pred = np.asarray(pred, dtype=np.int64)
        n = pred.size
        if not n:
            return pred
        firsts = np.asarray(sent_ptr[:-1], dtype=np.int64)
        lasts = np.asarray(sent_ptr[1:], dtype=np.int64) - 1
        firsts, lasts = firsts[firsts < n], lasts[lasts >= 0]
        prev = np.empty(n, dtype=np.int64)
        prev[1:] = pred[:-1]
        prev[firsts] = self.boundary_id
        nxt = np.empty(n, dtype=np.int64)
        nxt[:-1] = pred[1:]
        nxt[lasts] = self.boundary_id
        return self.table[prev, pred, nxt]

    def tags(self, pred, sent_ptr):
        """The output tags (strings) of label ids."""
        return np.asarray(self.names, dtype=object)[self(pred, sent_ptr)]
