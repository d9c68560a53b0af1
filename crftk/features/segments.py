"""Segment features of a semi-Markov CRF: the attributes a template's S lines make of spans.

A span is (t, len): ``len`` tokens starting at token t of a sentence. Each S line gives a span
the attributes its macros' values render (crftk.features.templates.SEGMENT_MACROS; several
macros make every combination). An attribute is kept by its *key*, the macro values joined by
a tab (no CoNLL field holds one), per line, as the token feature space keeps its attributes
by their values: two lines that render the same string are two attributes.

Values are computed for all spans of one length at once on object arrays of column strings
(gathers, concatenations and a dictionary lookup per span and line): the joined words of the
spans of length ``len`` are those of length ``len - 1`` with one more word.

:class:`SegmentSpace` holds the dictionaries (``fit`` on the gold segments of training
sentences whose label column holds IOBES position tags, crftk.io.segments); ``encode`` gives a
:class:`SegmentCorpus`, the attributes of every candidate span in CSR rows
``t * longest + len - 1`` (empty for spans past their sentence's end).
"""

import itertools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.features.extract import load_lexicons
from crftk.features.lexicon import Lexicon
from crftk.features.observations import collapsed_shape
from crftk.features.space import _lookup, _ranks, _slots, pack_rows
from crftk.features.templates import MAX_COLUMNS, parse_template
from crftk.io.container import pack_strings, unpack_strings
from crftk.io.segments import OUTSIDE, gold_segments

#: between the macro values of an attribute's key (no CoNLL field, joined or not, holds a tab)
SEP = "\t"
#: the longest segment a model may allow (far beyond any chunk or name; bounds a forged file's tables)
MAX_SEGMENT = 1000


@dataclass
class SegmentCorpus:
    """The attributes of every candidate span of a corpus of N tokens: row ``t * longest + len - 1``
    of ``seg_ptr`` (int64 [N * longest + 1]) is the span of ``len`` tokens starting at token t,
    its attribute ids ``seg_attrs[seg_ptr[row]:seg_ptr[row + 1]]`` (int32; none past the sentence)."""

    seg_ptr: np.ndarray
    seg_attrs: np.ndarray
    longest: int

    @property
    def n_tokens(self):
        return (self.seg_ptr.size - 1) // self.longest

    def subset(self, sent_ptr, sentences):
        """The spans of the given sentences (ids in increasing order; ``sent_ptr`` the corpus's
        sentence starts), as a corpus of their own."""
        sent_ptr = np.asarray(sent_ptr, dtype=np.int64)
        sentences = np.asarray(sentences, dtype=np.int64)
        counts = (sent_ptr[sentences + 1] - sent_ptr[sentences]) * self.longest
        rows = _slots(sent_ptr[sentences] * self.longest, counts)
        starts = self.seg_ptr[rows]
        sizes = self.seg_ptr[rows + 1] - starts
        ptr = np.zeros(rows.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=ptr[1:])
        return SegmentCorpus(ptr, self.seg_attrs[_slots(starts, sizes)], self.longest)


class _Tokens:
    """The columns of a batch of sentences as object arrays over its tokens, with each token's
    sentence bounds and the derived arrays (lower-cased, shapes) made when first asked for."""

    def __init__(self, sentences, columns):
        lengths = np.fromiter((len(s.rows) for s in sentences), dtype=np.int64, count=len(sentences))
        self.sent_ptr = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.sent_ptr[1:])
        self.n = int(self.sent_ptr[-1])
        sid = np.repeat(np.arange(lengths.size), lengths)
        self.start, self.end = self.sent_ptr[sid], self.sent_ptr[sid + 1]
        self.columns = {}
        for c in columns:
            try:
                self.columns[c] = _objects([row[c] for s in sentences for row in s.rows])
            except IndexError:
                s, t = next((s, t) for s in sentences for t, row in enumerate(s.rows) if len(row) <= c)
                raise CrftkError(f"the segment features read column {c}, and this line has "
                                 f"{len(s.rows[t])} columns", s.source, s.line + t if s.line else None) from None
        self._derived = {}

    def source(self, kind, col):
        """The token strings a macro reads: column ``col`` as it is ("x"), lower-cased ("lower")
        or as collapsed shapes ("shape")."""
        if kind == "x":
            return self.columns[col]
        key = (kind, col)
        if key not in self._derived:
            words = self.columns[col].tolist()
            if kind == "lower":
                self._derived[key] = _objects([w.lower() for w in words])
            else:
                shapes = {w: collapsed_shape(w) for w in set(words)}
                self._derived[key] = _objects([shapes[w] for w in words])
        return self._derived[key]


class _Spans:
    """The values of segment macros on spans of one length at a time."""

    def __init__(self, tokens, lexicons):
        self.tokens = tokens
        self.lexicons = lexicons        # name -> (set of entries joined by spaces, ignore_case)
        self._joins = {}                # source -> (length, starts, joined strings)

    def joined(self, kind, col, ts, length):
        """The strings of ``kind``/``col`` of spans (ts, length) joined by spaces; from the spans one
        token shorter when they were the last asked for (all spans, by increasing length)."""
        src = self.tokens.source(kind, col)
        cached = self._joins.get((kind, col))
        if length == 1:
            out = src[ts]
        elif cached is not None and cached[0] == length - 1 and _covers(cached[1], ts):
            out = cached[2][np.searchsorted(cached[1], ts)] + " " + src[ts + length - 1]
        else:
            out = src[ts]
            for k in range(1, length):
                out = out + " " + src[ts + k]
        self._joins[(kind, col)] = (length, ts, out)
        return out

    def values(self, m, ts, length):
        """The macro's values on spans (ts, length): an object array (one value per span), or
        (span index, values) for a macro that may give a span none or several."""
        tok = self.tokens
        kind = m.kind
        if kind == "first":
            return tok.columns[m.col][ts]
        if kind == "last":
            return tok.columns[m.col][ts + length - 1]
        if kind in ("seg", "Seg", "segshape"):
            return self.joined({"seg": "x", "Seg": "lower", "segshape": "shape"}[kind], m.col, ts, length)
        if kind == "len":
            return np.full(ts.size, str(length), dtype=object)
        if kind in ("before", "after"):
            pos = ts + m.row if kind == "before" else ts + length - 1 + m.row
            lo, hi = tok.start[ts], tok.end[ts]
            out = tok.columns[m.col][np.clip(pos, lo, hi - 1)]
            outside = (pos < lo) | (pos >= hi)
            if outside.any():
                # CRF++'s padding: _B-k k tokens before the sentence, _B+k after it
                dist = np.where(pos < lo, pos - lo, pos - hi + 1)[outside]
                out = out.copy()
                out[outside] = [f"_B-{-d}" if d < 0 else f"_B+{d}" for d in dist.tolist()]
            return out
        if kind == "inside":
            k = max(length - 2, 0)
            owner = np.repeat(np.arange(ts.size), k)
            return owner, tok.columns[m.col][ts[owner] + 1 + np.tile(np.arange(k), ts.size)]
        if kind == "seglex":
            entries, icase = self.lexicons[m.args[0]]
            words = self.joined("lower" if icase else "x", 0, ts, length)
            hit = np.fromiter(map(entries.__contains__, words), dtype=bool, count=words.size)
            owner = np.flatnonzero(hit)
            return owner, np.full(owner.size, "1", dtype=object)
        raise ValueError(kind)

    def keys(self, line, ts, length):
        """(span index, key) of every attribute the line makes of spans (ts, length), by span."""
        owner, keys = np.arange(ts.size), None
        for m in line.macros:
            vals = self.values(m, ts, length)
            if isinstance(vals, tuple):
                of, flat = vals
                # every current key of a span with every value of that span
                counts = np.bincount(of, minlength=ts.size)
                first = np.cumsum(counts) - counts
                per = counts[owner]
                idx = np.repeat(first[owner], per) + _ranks(per)
                keys = flat[idx] if keys is None else np.repeat(keys, per) + SEP + flat[idx]
                owner = np.repeat(owner, per)
            else:
                keys = vals[owner] if keys is None else keys + SEP + vals[owner]
        if keys is None:            # a line without macros: one attribute, on every span
            keys = np.full(ts.size, "", dtype=object)
        return owner, keys


#: the macros whose values are the strings of spans joined (the rest read one token or the length)
JOINED = {"seg": "x", "Seg": "lower", "segshape": "shape"}


class _LineCode:
    """A line's attribute dictionary as integers, for encoding: each macro's values numbered
    (``vocabs``), keys packed as the token feature space packs them (``steps``, ``final``)."""

    def __init__(self, line, keys):
        self.macros = line.macros
        n = len(self.macros)
        rows = [k.split(SEP) for k in keys] if n else []
        self.vocabs = [{v: i for i, v in enumerate(sorted({r[j] for r in rows}))} for j in range(n)]
        self.radices = [len(v) for v in self.vocabs]
        if n and keys:
            values = np.array([[self.vocabs[j][r[j]] for j in range(n)] for r in rows], dtype=np.int64)
            self.steps, final = pack_rows(values, self.radices)
        else:
            self.steps, final = [], np.zeros(len(keys), dtype=np.int64)
        self.order = np.argsort(final, kind="stable")
        self.final = final[self.order]
        # each packing step (and the last) as a dense table over its key space when that is
        # small, as it is for all but lines of several word-valued macros: a gather, not a search
        self.tables = []              # step j - 1's table, for macros j = 1 .. n - 2
        self.final_table = None
        if not (n and keys):          # no macros (one attribute, every span's) or none kept: no lookups
            return
        for j in range(1, n - 1):
            space = (self.steps[j - 2].size if j >= 2 else self.radices[0]) * self.radices[j]
            self.tables.append(_dense(self.steps[j - 1], space))
        last = (self.steps[-1].size if self.steps else self.radices[0]) * self.radices[-1] if n > 1 else \
            self.radices[0]
        self.final_table = _dense(self.final, last, self.order)


class _Encoder:
    """Value ids of segment macros on all spans of one length at a time (lengths in increasing
    order). A joined source keeps only the spans whose joined strings begin some value a line
    knows (or a lexicon entry): the others cannot grow into one."""

    def __init__(self, space, tokens):
        self.space, self.tokens = space, tokens
        self.codes = space.codes
        self.token_ids = {}                        # (line, macro) -> id of each token's value
        factor = {}
        for i, code in enumerate(self.codes):
            for j, m in enumerate(code.macros):
                if m.kind in ("first", "last", "before", "after", "inside"):
                    if m.col not in factor:
                        words = tokens.columns[m.col].tolist()
                        number = {w: k for k, w in enumerate(dict.fromkeys(words))}
                        factor[m.col] = (list(number), np.fromiter(map(number.__getitem__, words), dtype=np.int64,
                                                                   count=tokens.n))
                    words, dense = factor[m.col]
                    vocab = code.vocabs[j]
                    table = np.fromiter((vocab.get(w, -1) for w in words), dtype=np.int64, count=len(words))
                    self.token_ids[i, j] = table[dense]
        self.prefixes = space.prefixes
        self.alive = {}                            # joined source -> (starts, joined strings)

    def grow(self, length):
        """Extend the joined sources to the spans of ``length`` tokens."""
        tok = self.tokens
        for src, prefixes in self.prefixes.items():
            strings = tok.source(*src)
            if length == 1:
                ts, joined = np.arange(tok.n), strings
            else:
                ts, joined = self.alive[src]
                room = tok.end[ts] - ts >= length
                ts = ts[room]
                joined = joined[room] + " " + strings[ts + length - 1]
            keep = np.fromiter(map(prefixes.__contains__, joined.tolist()), dtype=bool, count=ts.size)
            self.alive[src] = (ts[keep], joined[keep])

    def _joined_ids(self, vocab, src, ts, lookup):
        alive_ts, joined = self.alive[src]
        out = np.full(ts.size, -1, dtype=np.int64)
        if alive_ts.size:
            out[np.searchsorted(ts, alive_ts)] = lookup(joined)
        return out

    def values(self, i, j, m, ts, length):
        """Value ids (-1: none) of macro j of line i on spans (ts, length), or (span, ids) of a
        macro with several values per span."""
        vocab = self.codes[i].vocabs[j]
        kind = m.kind
        if kind == "len":
            return np.full(ts.size, vocab.get(str(length), -1), dtype=np.int64)
        if kind in JOINED:
            return self._joined_ids(vocab, (JOINED[kind], m.col), ts, lambda joined: np.fromiter(
                map(vocab.get, joined.tolist(), itertools.repeat(-1)), dtype=np.int64, count=joined.size))
        if kind == "seglex":
            entries, icase = self.space.entries[m.args[0]]
            hit = vocab.get("1", -1)
            return self._joined_ids(vocab, ("lower" if icase else "x", 0), ts, lambda joined: np.where(
                np.fromiter(map(entries.__contains__, joined.tolist()), dtype=bool, count=joined.size), hit, -1))
        ids = self.token_ids[i, j]
        if kind == "first":
            return ids[ts]
        if kind == "last":
            return ids[ts + length - 1]
        if kind == "inside":
            k = max(length - 2, 0)
            owner = np.repeat(np.arange(ts.size), k)
            return owner, ids[ts[owner] + 1 + np.tile(np.arange(k), ts.size)]
        tok = self.tokens
        pos = ts + m.row if kind == "before" else ts + length - 1 + m.row
        lo, hi = tok.start[ts], tok.end[ts]
        out = ids[np.clip(pos, lo, hi - 1)]
        outside = (pos < lo) | (pos >= hi)
        if outside.any():
            dist = np.where(pos < lo, pos - lo, pos - hi + 1)[outside]
            pads = {d: vocab.get(f"_B-{-d}" if d < 0 else f"_B+{d}", -1) for d in np.unique(dist).tolist()}
            out[outside] = [pads[d] for d in dist.tolist()]
        return out

    def attributes(self, i, ts, length):
        """(span index, attribute id in line i) of every attribute line i gives spans (ts, length)."""
        code = self.codes[i]
        owner = key = None
        for j, m in enumerate(code.macros):
            vals = self.values(i, j, m, ts, length)
            if isinstance(vals, tuple):
                of, flat = vals
                if owner is None:
                    owner, v = of, flat
                else:
                    counts = np.bincount(of, minlength=ts.size)
                    first = np.cumsum(counts) - counts
                    per = counts[owner]
                    v = flat[np.repeat(first[owner], per) + _ranks(per)]
                    owner, key = np.repeat(owner, per), np.repeat(key, per)
            elif owner is None:
                owner, v = np.arange(ts.size), vals
            else:
                v = vals[owner]
            keep = v >= 0
            owner, v = owner[keep], v[keep]
            if key is None:
                key = v
            else:
                key = key[keep] * code.radices[j] + v
                if j < len(code.macros) - 1:
                    table = code.tables[j - 1]
                    key = _lookup(code.steps[j - 1], key) if table is None else table[key]
                    keep = key >= 0
                    owner, key = owner[keep], key[keep]
        if owner is None:                      # a line without macros: its one attribute, on every span
            return np.arange(ts.size), np.zeros(ts.size, dtype=np.int64)
        if code.final_table is not None:
            local = code.final_table[key]
            keep = local >= 0
            return owner[keep], local[keep]
        idx = _lookup(code.final, key)
        keep = idx >= 0
        return owner[keep], code.order[idx[keep]]


class SegmentSpace:
    """Segment labels, their longest segments and the attribute dictionaries of S lines.

    ``labels``: segment labels, sorted, ``O`` among them; ``max_len`` (int32, per label): the
    longest segment of each (``O``: 1). Attribute a's features are ``feat_ptr[a] .. feat_ptr[a + 1]``,
    each with one label ``feat_label[f]`` and weight f: the (attribute, label) pairs of the gold
    segments (``feature_set`` "supported"), or every label in order ("complete", weight a * Y + y).
    """

    def __init__(self, template, n_columns, label_col, labels, max_len, line_keys, lexicons, features=None):
        self.template = template
        self.lines = list(template.segments)
        self.n_columns, self.label_col = n_columns, label_col
        self.labels = list(labels)
        self.max_len = np.ascontiguousarray(max_len, dtype=np.int32)
        self.line_keys = [list(k) for k in line_keys]   # per line: its attribute keys, in id order
        self.lexicons = lexicons                          # name -> Lexicon (the %seglex ones)
        self.offsets = np.zeros(len(self.line_keys) + 1, dtype=np.int64)
        np.cumsum([len(k) for k in self.line_keys], out=self.offsets[1:])
        self.n_labels, self.n_attrs = len(self.labels), int(self.offsets[-1])
        if features is None:
            self.feature_set = "complete"
            self.feat_ptr = np.arange(self.n_attrs + 1, dtype=np.int32) * self.n_labels
            self.feat_label = np.tile(np.arange(self.n_labels, dtype=np.int32), self.n_attrs)
        else:
            self.feature_set = "supported"
            self.feat_ptr, self.feat_label = (np.ascontiguousarray(a, dtype=np.int32) for a in features)
        self.longest = int(self.max_len.max())
        self.entries = {name: ({" ".join(e) for e in lex.entries}, lex.ignore_case)
                        for name, lex in lexicons.items()}
        self._codes = self._prefixes = None

    @property
    def prefixes(self):
        """{joined source (kind, col): the strings a span's joined words may begin and still grow
        into a value of a line (or a %seglex entry)}, made when first encoding."""
        if self._prefixes is None:
            self._prefixes = {}
            for code in self.codes:
                for j, m in enumerate(code.macros):
                    if m.kind in JOINED:
                        src, values = (JOINED[m.kind], m.col), code.vocabs[j]
                    elif m.kind == "seglex":
                        values, icase = self.entries[m.args[0]]
                        src = ("lower" if icase else "x", 0)
                    else:
                        continue
                    into = self._prefixes.setdefault(src, set())
                    for v in values:
                        words = v.split(" ")
                        into.update(" ".join(words[:k]) for k in range(1, len(words) + 1))
        return self._prefixes

    @property
    def codes(self):
        """The lines' dictionaries as integers (_LineCode), made when first encoding."""
        if self._codes is None:
            self._codes = [_LineCode(line, keys) for line, keys in zip(self.lines, self.line_keys)]
        return self._codes

    @property
    def n_params(self):
        return int(self.feat_label.size)

    # building ------------------------------------------------------------
    @classmethod
    def fit(cls, sentences, template, *, labels, max_len, min_freq=1, label_col=-1, feature_set="supported"):
        """(space, SegmentCorpus of ``sentences``): the attributes of the gold segments (read from
        the label column, IOBES position tags) seen ``min_freq`` times or more; with ``feature_set``
        "supported" each paired with the labels of the gold segments it was seen on, with
        "complete" with every label.

        ``labels``: the segment labels (``O`` is added); ``max_len``: the longest segment of each, a
        dict (crftk.io.segments.SegmentConversion.longest) or a sequence in the order of ``labels``.
        """
        sentences = list(sentences)
        if not sentences or not sentences[0].rows:
            raise CrftkError("no training sentences")
        if min_freq < 1:
            raise CrftkError("--min-freq must be at least 1")
        labels, max_len = _label_table(labels, max_len)
        n_columns = len(sentences[0].rows[0])
        label_col = label_col + n_columns if label_col < 0 else label_col
        _check_columns(template, n_columns, label_col)
        lexicons = _lexicons_of(template, load_lexicons(template))
        space = cls(template, n_columns, label_col, labels, max_len, [[] for _ in template.segments], lexicons)
        spans = space._spans(sentences)
        _refuse_separator(sentences, spans.tokens)
        gold = space._gold(sentences, spans.tokens)
        counts = [Counter() for _ in space.lines]
        for length, ts, _ in gold:
            for i, line in enumerate(space.lines):
                owner, keys = spans.keys(line, ts, length)
                if any(m.multi for m in line.macros):       # an attribute counts once per segment
                    keys = list({(o, k) for o, k in zip(owner.tolist(), keys.tolist())})
                    counts[i].update(k for _, k in keys)
                else:
                    counts[i].update(keys.tolist())
        keys = [sorted(k for k, n in c.items() if n >= min_freq) for c in counts]
        space = cls(template, n_columns, label_col, labels, max_len, keys, lexicons)
        if space.n_attrs * space.n_labels >= 2**31:
            raise CrftkError(f"{space.n_attrs} segment attributes x {space.n_labels} labels: too many for this "
                             "version; raise --min-freq")
        corpus = space.encode(sentences)
        if feature_set == "supported":
            space = cls(template, n_columns, label_col, labels, max_len, keys, lexicons,
                        features=space._supported(corpus, gold))
        return space, corpus

    def _supported(self, corpus, gold):
        """(feat_ptr, feat_label) of the (attribute, label) pairs of the gold segments."""
        Y, R = self.n_labels, corpus.longest
        pairs = []
        for length, ts, ys in gold:
            rows = ts * R + (length - 1)
            counts = corpus.seg_ptr[rows + 1] - corpus.seg_ptr[rows]
            occ = np.repeat(corpus.seg_ptr[rows] - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) \
                + np.arange(int(counts.sum()))
            pairs.append(corpus.seg_attrs[occ].astype(np.int64) * Y + np.repeat(ys, counts))
        keys = np.unique(np.concatenate(pairs)) if pairs else np.zeros(0, np.int64)
        feat_ptr = np.zeros(self.n_attrs + 1, dtype=np.int32)
        np.cumsum(np.bincount(keys // Y, minlength=self.n_attrs), out=feat_ptr[1:])
        return feat_ptr, (keys % Y).astype(np.int32)

    def _gold(self, sentences, tokens):
        """[(length, starts, label ids)] of the gold segments, by length; each checked against the
        labels."""
        c = self.label_col
        index = {y: i for i, y in enumerate(self.labels)}
        starts = {}
        for k, s in enumerate(sentences):
            base = int(tokens.sent_ptr[k])
            for start, end, label in gold_segments([row[c] for row in s.rows]):
                y = index.get(label)
                where = (s.source, s.line + start if s.line else None)
                if y is None:
                    raise CrftkError(f"segment label {shown(label)} is not one of the {len(self.labels)} "
                                     "segment labels given", *where)
                if end - start > self.max_len[y]:
                    raise CrftkError(f"a {label} segment of {end - start} tokens: longer than its longest "
                                     f"({self.max_len[y]})", *where)
                starts.setdefault(end - start, []).append((base + start, y))
        return [(n, np.array([t for t, _ in ts], dtype=np.int64), np.array([y for _, y in ts], dtype=np.int64))
                for n, ts in sorted(starts.items())]

    def _spans(self, sentences):
        cols = sorted({m.col for line in self.lines for m in line.macros if m.col >= 0 and m.kind != "seglex"}
                      | ({0} if any(m.kind == "seglex" for line in self.lines for m in line.macros) else set()))
        return _Spans(_Tokens(sentences, cols), self.entries)

    # encoding ------------------------------------------------------------
    def encode(self, sentences):
        """The SegmentCorpus of every span (t, len <= longest) of the sentences."""
        sentences = list(sentences)
        longest = self.longest
        tok = self._spans(sentences).tokens
        enc = _Encoder(self, tok)
        n_rows = tok.n * longest
        blocks, sizes = [], np.zeros(n_rows, dtype=np.int64)
        room = tok.end - np.arange(tok.n)             # tokens from each one to its sentence's end
        for length in range(1, longest + 1):
            ts = np.flatnonzero(room >= length)
            if not ts.size:
                break
            enc.grow(length)
            for i, line in enumerate(self.lines):
                if not self.line_keys[i]:
                    continue
                owner, local = enc.attributes(i, ts, length)
                rows = ts[owner] * longest + (length - 1)
                if any(m.multi for m in line.macros):     # an attribute once per span
                    both = np.sort(rows * len(self.line_keys[i]) + local)
                    both = both[np.concatenate(([True], both[1:] != both[:-1]))] if both.size else both
                    rows, local = np.divmod(both, len(self.line_keys[i]))
                first, counts = _runs(rows)
                sizes[rows[first]] += counts
                blocks.append((rows, (local + self.offsets[i]).astype(np.int32), first, counts))
        seg_ptr = np.zeros(n_rows + 1, dtype=np.int64)
        np.cumsum(sizes, out=seg_ptr[1:])
        seg_attrs = np.empty(int(seg_ptr[-1]), dtype=np.int32)
        # each row's attributes line by line: a row has one length, the blocks come by length
        # then line, each sorted by row (a counting sort; an argsort of them all is 4x slower)
        filled = seg_ptr[:-1].copy()
        for rows, ids, first, counts in blocks:
            if first.size == rows.size:                 # one attribute per row
                seg_attrs[filled[rows]] = ids
                filled[rows] += 1
            else:
                seg_attrs[filled[rows] + (np.arange(rows.size) - np.repeat(first, counts))] = ids
                filled[rows[first]] += counts
        return SegmentCorpus(seg_ptr, seg_attrs, longest)

    # strings -------------------------------------------------------------
    def attribute_strings(self):
        """The string of every attribute, in id order (the line rendered with its values)."""
        out = []
        for line, keys in zip(self.lines, self.line_keys):
            n = len(line.macros)
            out.extend(line.render(k.split(SEP) if n else ()) for k in keys)
        return out

    # serialization -------------------------------------------------------
    def to_arrays(self):
        """(meta, arrays) for the model file."""
        arrays = {"max_len": self.max_len, "line_ptr": self.offsets}
        arrays["labels.offsets"], arrays["labels.blob"] = pack_strings(self.labels)
        arrays["keys.offsets"], arrays["keys.blob"] = pack_strings(k for keys in self.line_keys for k in keys)
        lexicons = {}
        for name, lex in self.lexicons.items():
            arrays[f"lexicon.{name}.offsets"], arrays[f"lexicon.{name}.blob"] = pack_strings(lex.to_lines())
            lexicons[name] = {"ignore_case": lex.ignore_case}
        meta = {"template": self.template.text, "template_path": self.template.path, "n_columns": self.n_columns,
                "label_col": self.label_col, "n_lines": len(self.lines), "lexicons": lexicons,
                "feature_set": self.feature_set}
        if self.feature_set == "supported":
            arrays["feat_ptr"], arrays["feat_label"] = self.feat_ptr, self.feat_label
        return meta, arrays

    @classmethod
    def from_arrays(cls, meta, arrays, path=None):
        """The space a model file's part holds; a file crftk did not write refused in one line."""
        def bad(what):
            return CrftkError(f"model file is inconsistent: its segment features' {what}", path)

        for key, kind in (("template", str), ("template_path", str), ("n_columns", int), ("label_col", int),
                          ("n_lines", int), ("lexicons", dict)):
            if not isinstance(meta.get(key), kind) or isinstance(meta.get(key), bool):
                raise bad(f"field {key!r} is not a {kind.__name__}")
        try:
            try:
                template = parse_template(meta["template"], meta["template_path"])
            except CrftkError as e:
                raise CrftkError(f"the model's template ({e.path}, line {e.line}): {e.message}", path) from None
            n_columns, label_col = meta["n_columns"], meta["label_col"]
            if not 1 <= n_columns <= MAX_COLUMNS or not 0 <= label_col < n_columns:
                raise bad(f"label column {label_col} of {n_columns} columns")
            if meta["n_lines"] != len(template.segments):
                raise bad(f"{meta['n_lines']} lines are not its template's {len(template.segments)} S lines")
            cols = template.segment_columns
            if cols and (cols[-1] >= n_columns or label_col in cols):
                raise bad(f"template reads column {cols[-1] if cols[-1] >= n_columns else label_col} of "
                          f"{n_columns} (label column {label_col})")
            labels = unpack_strings(arrays["labels.offsets"], arrays["labels.blob"], path=path)
            if OUTSIDE not in labels or labels != sorted(set(labels)):
                raise bad("labels are not sorted, distinct and with O")
            max_len = np.asarray(arrays["max_len"])
            if (max_len.ndim != 1 or max_len.dtype.kind not in "iu" or max_len.size != len(labels)
                    or max_len.min() < 1 or max_len.max() > MAX_SEGMENT or max_len[labels.index(OUTSIDE)] != 1):
                raise bad(f"longest segments are not one per label from 1 to {MAX_SEGMENT} (O: 1)")
            keys = unpack_strings(arrays["keys.offsets"], arrays["keys.blob"], path=path)
            ptr = np.asarray(arrays["line_ptr"])
            if (ptr.ndim != 1 or ptr.dtype.kind not in "iu" or ptr.size != len(template.segments) + 1
                    or ptr[0] != 0 or ptr[-1] != len(keys) or np.any(np.diff(ptr.astype(np.int64)) < 0)):
                raise bad("line offsets do not cut its attributes into its lines")
            line_keys = [keys[int(a):int(b)] for a, b in zip(ptr[:-1], ptr[1:])]
            for line, lk in zip(template.segments, line_keys):
                tabs = max(len(line.macros) - 1, 0)
                if len(set(lk)) != len(lk) or any(k.count(SEP) != tabs for k in lk) or (not line.macros and lk != [""][:len(lk)]):
                    raise bad(f"attributes of line {shown(line.text)} are repeated or malformed")
            if len(keys) * len(labels) >= 2**31:
                raise bad("parameters are too many")
            used = {m.args[0] for line in template.segments for m in line.macros if m.kind == "seglex"}
            if used - set(meta["lexicons"]):
                raise bad(f"template uses lexicon {shown(sorted(used - set(meta['lexicons']))[0])}, which the "
                          "file does not hold")
            lexicons = {}
            for name in sorted(used):
                opts = meta["lexicons"][name]
                if not isinstance(opts, dict) or not isinstance(opts.get("ignore_case"), bool):
                    raise bad(f"lexicon {shown(name)} has no ignore_case flag")
                lines = unpack_strings(arrays[f"lexicon.{name}.offsets"], arrays[f"lexicon.{name}.blob"], path=path)
                lexicons[name] = Lexicon.from_lines(lines, name, opts["ignore_case"])
            features = None
            if meta.get("feature_set", "complete") not in ("complete", "supported"):
                raise bad(f"feature set {shown(meta.get('feature_set'))} is neither complete nor supported")
            if meta.get("feature_set") == "supported":
                features = _checked_features(arrays["feat_ptr"], arrays["feat_label"], len(keys), len(labels), bad)
            return cls(template, n_columns, label_col, labels, max_len.astype(np.int32), line_keys, lexicons,
                       features)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise CrftkError(f"model file is incomplete or inconsistent ({e})", path) from None


def _checked_features(feat_ptr, feat_label, n_attrs, n_labels, bad):
    """A model file's (feat_ptr, feat_label), refused unless each attribute lists distinct labels
    in increasing order."""
    ptr, lab = np.asarray(feat_ptr), np.asarray(feat_label)
    if (ptr.ndim != 1 or lab.ndim != 1 or ptr.dtype.kind not in "iu" or lab.dtype.kind not in "iu"
            or ptr.size != n_attrs + 1 or ptr[0] != 0 or ptr[-1] != lab.size
            or np.any(np.diff(ptr.astype(np.int64)) < 0)):
        raise bad("feature offsets do not cut its features into its attributes")
    if lab.size and (lab.min() < 0 or lab.max() >= n_labels):
        raise bad("feature labels are out of range")
    owner = np.repeat(np.arange(n_attrs), np.diff(ptr.astype(np.int64)))
    key = owner.astype(np.int64) * n_labels + lab
    if key.size > 1 and np.any(np.diff(key) <= 0):
        raise bad("features repeat a label or are out of order")
    return ptr, lab


def _refuse_separator(sentences, tokens):
    """Refuse, at its line, a value an S line reads that holds SEP (a Python caller's token: no
    CoNLL field does), which would split its attribute's key on saving."""
    for col, values in tokens.columns.items():
        hit = next((k for k, v in enumerate(values.tolist()) if SEP in v), None)
        if hit is not None:
            k = int(np.searchsorted(tokens.sent_ptr, hit, side="right")) - 1
            s, t = sentences[k], hit - int(tokens.sent_ptr[k])
            raise CrftkError(f"column {col} holds {shown(values[hit])}: a value that segment features read "
                             "cannot hold a tab", s.source, s.line + t if s.line else None)


def _label_table(labels, max_len):
    """(sorted labels with O, int32 longest segment of each) of fit's arguments."""
    labels = list(labels)
    if isinstance(max_len, dict):
        table = {y: int(max_len.get(y, 1)) for y in labels}
        table.update({y: int(n) for y, n in max_len.items()})
    else:
        max_len = [int(n) for n in max_len]
        if len(max_len) != len(labels):
            raise ValueError(f"{len(max_len)} longest segments for {len(labels)} labels")
        table = dict(zip(labels, max_len))
    table[OUTSIDE] = 1
    bad = [y for y, n in table.items() if not 1 <= n <= MAX_SEGMENT]
    if bad:
        raise CrftkError(f"the longest {bad[0]} segment must be from 1 to {MAX_SEGMENT} tokens, "
                         f"not {table[bad[0]]}")
    names = sorted(table)
    return names, np.array([table[y] for y in names], dtype=np.int32)


def _check_columns(template, n_columns, label_col):
    """Refuse an S line that reads a missing column or the label column, at its line."""
    for line in template.segments:
        for m in line.macros:
            col = m.col
            if col < 0:         # %len
                continue
            if col >= n_columns:
                raise CrftkError(f"template reads column {col} but the data has {n_columns} columns "
                                 "(numbered from 0)", template.path, line.lineno)
            if col == label_col:
                raise CrftkError(f"template reads column {col}, the gold label column; features must not "
                                 "see the answer", template.path, line.lineno)


def _lexicons_of(template, lexicons):
    """The lexicons the S lines' %seglex read."""
    return {m.args[0]: lexicons[m.args[0]] for line in template.segments for m in line.macros
            if m.kind == "seglex"}


#: the largest key space a line's packing step looks up in a dense table (int64 entries)
DENSE_TABLE = 1 << 21


def _dense(sorted_keys, space, values=None):
    """A table over keys 0..space-1: the index of each among ``sorted_keys`` (or ``values`` at
    that index), -1 where absent; None when the key space is too large."""
    if space > DENSE_TABLE:
        return None
    table = np.full(space, -1, dtype=np.int64)
    table[sorted_keys] = np.arange(sorted_keys.size) if values is None else values
    return table


def _objects(strings):
    out = np.empty(len(strings), dtype=object)
    out[:] = strings
    return out


def _covers(sorted_starts, ts):
    """Whether every start in ``ts`` is among ``sorted_starts``."""
    idx = np.searchsorted(sorted_starts, ts)
    return bool(np.all(idx < sorted_starts.size)) and bool(np.array_equal(sorted_starts[np.minimum(
        idx, sorted_starts.size - 1)], ts))


def _runs(rows):
    """(index of the first entry of each run of equal rows, length of each run) of sorted rows."""
    if not rows.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    first = np.flatnonzero(np.concatenate(([True], rows[1:] != rows[:-1])))
    return first, np.diff(np.append(first, rows.size))


class RawSegments:
    """The SegmentCorpus of a RawBatch (crftk.io.conll) in compiled code
    (crftk._semimarkov.span_attributes), as SegmentSpace.encode gives it for the batch's
    sentences: the joined sources walk a trie of the prefixes' words, the token values come from
    the batch's distinct strings (each looked up once, then remembered, up to CACHE_LIMIT strings
    per column: a stream's vocabulary has no bound). For spaces whose lines hold single-valued
    macros only (no %inside, no %seglex); safe to share between threads."""

    CACHE_LIMIT = 1 << 20

    def __init__(self, space):
        self.space = space
        self.longest = space.longest
        self.columns = sorted({m.col for line in space.lines for m in line.macros if m.col >= 0})
        words, self.alphabet = {}, {}          # alphabet: word of a joined source -> id
        self.joined = sorted(space.prefixes)   # joined sources (kind, col)
        node_of, tr = {}, {}
        for k, src in enumerate(self.joined):
            node_of[k, ""] = len(node_of)
            for p in sorted(space.prefixes[src], key=lambda p: p.count(" ")):
                head, _, last = p.rpartition(" ") if " " in p else ("", "", p)
                a = self.alphabet.setdefault(last, len(self.alphabet))
                node_of[k, p] = len(node_of)
                tr[node_of[k, head], a] = node_of[k, p]
        self.roots = np.array([node_of[k, ""] for k in range(len(self.joined))], dtype=np.int64)
        n_alpha = max(len(self.alphabet), 1)
        keys = np.array([n * n_alpha + a for n, a in tr], dtype=np.int64)
        order = np.argsort(keys)
        self.tr_key, self.tr_child = keys[order], np.array(list(tr.values()), dtype=np.int64)[order]
        self.n_alpha = n_alpha
        # each node's children: a run of the sorted keys (node * n_alpha + word)
        self.child_ptr = np.searchsorted(self.tr_key, np.arange(len(node_of) + 1, dtype=np.int64) * n_alpha)
        node_strings = [None] * len(node_of)
        for (k, p), n in node_of.items():
            node_strings[n] = p
        # the macros: per line its value sources and packing lookups, lines without attributes left out
        self.token_uses = []                   # (col, vocab, kind, row) of each by_start / by_end row
        by_len, node_rows = [], []
        lk_keys, lk_vals, lk_dense, lk_ptr = [], [], [], [0]
        kinds, srcs, tries, radices, lookups, line_ptr, offsets = [], [], [], [], [], [0], []

        def lookup(keys, vals, dense):
            # lk_vals runs beside lk_keys: a dense table's entries are its values (no copy of
            # them there, only placeholders), a sorted table's are the values of its keys
            lk_keys.append(keys)
            lk_vals.append(np.zeros(keys.size, dtype=np.int64) if dense else
                           np.arange(keys.size, dtype=np.int64) if vals is None else vals)
            lk_dense.append(dense)
            lk_ptr.append(lk_ptr[-1] + keys.size)
            return len(lk_dense) - 1

        for i, (line, code) in enumerate(zip(space.lines, space.codes)):
            if not space.line_keys[i]:
                continue
            n = len(code.macros)
            for j, m in enumerate(code.macros):
                vocab = code.vocabs[j]
                if m.kind in JOINED:
                    kinds.append(3)
                    tries.append(self.joined.index((JOINED[m.kind], m.col)))
                    srcs.append(len(node_rows))
                    node_rows.append([vocab.get(p, -1) if p is not None else -1 for p in node_strings])
                elif m.kind == "len":
                    kinds.append(2)
                    tries.append(0)
                    srcs.append(len(by_len))
                    by_len.append([vocab.get(str(x), -1) for x in range(self.longest + 1)])
                else:
                    kinds.append(0 if m.kind in ("first", "before") else 1)
                    tries.append(0)
                    srcs.append(sum(1 for u in self.token_uses if (u[2] in ("first", "before")) ==
                                    (m.kind in ("first", "before"))))
                    self.token_uses.append((m.col, vocab, m.kind, m.row))
                radices.append(code.radices[j])
                if j == 0 and n > 1:
                    lookups.append(-1)
                elif j < n - 1:
                    table = code.tables[j - 1]
                    lookups.append(lookup(code.steps[j - 1], None, False) if table is None else
                                   lookup(table, None, True))
                elif code.final_table is not None:
                    lookups.append(lookup(code.final_table, None, True))
                else:
                    lookups.append(lookup(code.final, np.asarray(code.order, dtype=np.int64), False))
            line_ptr.append(len(kinds))
            offsets.append(int(space.offsets[i]))
        L1 = self.longest + 1
        self.by_len = np.array(by_len, dtype=np.int64).reshape(len(by_len), L1)
        self.node_vals = np.array(node_rows, dtype=np.int64).reshape(len(node_rows), len(node_of))
        self.lines = (np.array(line_ptr, dtype=np.int64), np.array(offsets, dtype=np.int64),
                      np.array(kinds, dtype=np.int32), np.array(srcs, dtype=np.int32),
                      np.array(tries, dtype=np.int32), np.array(radices, dtype=np.int64),
                      np.array(lookups, dtype=np.int64))
        self.lookups = (np.array(lk_ptr, dtype=np.int64), np.array(lk_dense, dtype=np.int8),
                        np.concatenate(lk_keys).astype(np.int64) if lk_keys else np.zeros(0, np.int64),
                        np.concatenate(lk_vals).astype(np.int64) if lk_vals else np.zeros(0, np.int64))
        self._cache = {c: {} for c in self.columns}    # column -> {string: its ids (tuple)}
        self._uses = {c: [u for u in self.token_uses if u[0] == c] for c in self.columns}
        self._sources = {c: [src for src in self.joined if src[1] == c] for c in self.columns}

    def _row(self, col, word):
        """The ids of a token string of column ``col``: in each token use's vocabulary, then in
        the alphabet as each joined source derives it (-1: not there)."""
        ids = [vocab.get(word, -1) for _, vocab, _, _ in self._uses[col]]
        for kind, _ in self._sources[col]:
            w = word if kind == "x" else word.lower() if kind == "lower" else collapsed_shape(word)
            ids.append(self.alphabet.get(w, -1))
        return tuple(ids)

    def encode(self, batch):
        """The SegmentCorpus of a RawBatch. (The trie's words are the joined strings split at
        spaces, which no token holds: the reader splits its lines at whitespace.)"""
        from crftk import _encode
        from crftk._semimarkov import span_attributes
        N = batch.n_tokens
        sent_ptr = np.ascontiguousarray(batch.sent_ptr, dtype=np.int64)
        interners = [_encode.Interner([]) for _ in self.columns]
        ids = _encode.column_ids(batch.block, batch.tok_start, batch.tok_end, self.columns, interners)
        per_col = {}
        for i, (c, interner) in enumerate(zip(self.columns, interners)):
            cache = self._cache[c]
            strings = interner.strings()
            if len(cache) + len(strings) > self.CACHE_LIMIT:
                cache.clear()       # forget the oldest batches' strings rather than grow with the stream
            rows = []
            for w in strings:
                r = cache.get(w)
                if r is None:
                    r = cache[w] = self._row(c, w)
                rows.append(r)
            width = len(self._uses[c]) + len(self._sources[c])
            table = np.array(rows, dtype=np.int64).reshape(len(rows), width)
            per_col[c] = table[ids[:, i]] if N else np.zeros((0, width), dtype=np.int64)
        lengths = np.diff(sent_ptr)
        sid = np.repeat(np.arange(lengths.size), lengths)
        lo, hi = sent_ptr[sid], sent_ptr[sid + 1]
        starts, ends = [], []
        used = {c: 0 for c in self.columns}
        for col, vocab, kind, row in self.token_uses:
            v = per_col[col][:, used[col]]
            used[col] += 1
            if kind in ("before", "after"):
                pos = np.arange(N) + row
                out = v[np.clip(pos, lo, np.maximum(hi - 1, lo))] if N else v
                outside = (pos < lo) | (pos >= hi)
                if outside.any():
                    dist = np.where(pos < lo, pos - lo, pos - hi + 1)[outside]
                    pads = {d: vocab.get(f"_B-{-d}" if d < 0 else f"_B+{d}", -1) for d in np.unique(dist).tolist()}
                    out = out.copy()
                    out[outside] = [pads[d] for d in dist.tolist()]
                v = out
            (starts if kind in ("first", "before") else ends).append(v)
        alpha = []
        for c in self.columns:
            for k in range(len(self._sources[c])):
                alpha.append(per_col[c][:, len(self._uses[c]) + k])
        # alpha in the order of self.joined (sorted (kind, col)); built by column above
        order = [self.joined.index(src) for c in self.columns for src in self._sources[c]]
        alpha = [a for _, a in sorted(zip(order, alpha), key=lambda x: x[0])]

        def mat(rows):
            return np.ascontiguousarray(np.array(rows, dtype=np.int64).reshape(len(rows), N))

        seg_ptr, seg_attrs = span_attributes(sent_ptr, self.longest, mat(starts), mat(ends), self.by_len, mat(alpha),
                                             self.roots, self.tr_key, self.tr_child, self.child_ptr, self.n_alpha, self.node_vals,
                                             *self.lines, *self.lookups)
        return SegmentCorpus(seg_ptr, seg_attrs, self.longest)


def raw_segments(space):
    """A RawSegments of the space when its lines can be encoded from raw batches, else None."""
    if any(m.kind in ("inside", "seglex") for line in space.lines for m in line.macros):
        return None
    return RawSegments(space)
