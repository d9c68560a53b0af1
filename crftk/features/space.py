"""Feature space: dictionaries of column values, attributes and labels; corpus encoding.

Templates are expanded without building a string per token: every value of a
column read by the templates gets an integer id (the CRF++ padding values
``_B-k``/``_B+k`` included), a macro's values are gathered for all tokens at
once, and a template with several macros combines them pairwise into exact
integer keys (``prefix * radix + value``, where ``prefix`` is the id of the
combination so far). The sorted key arrays are the attribute dictionary; a key
missing from them is an attribute unseen in training, which has no weight.
Strings are made only for the dump, from the keys.

Attribute ids are numbered template by template. A state feature is an
(attribute, label) pair: "supported" keeps the pairs seen in training,
"complete" every attribute with every label (Sha & Pereira 2003).
"""

from dataclasses import dataclass

import itertools

import numpy as np

from crftk import _encode, _textio
from crftk.errors import CrftkError, shown
from crftk.features.extract import Extractor, Vocab, load_lexicons
from crftk.features.layout import ChainLayout, PairLayout
from crftk.features.lexicon import Lexicon
from crftk.features.templates import MAX_COLUMNS, padding_value, parse_template
from crftk.features.vectors import vectors_from_arrays, vectors_to_arrays
from crftk.io.conll import _split_columns, describe_widths, model_widths
from crftk.io.container import pack_strings, unpack_strings
from crftk.io.partial import AnnotationError, partial_strings, resolve

FEATURE_SETS = ("supported", "complete")


def _lookup(sorted_keys, query):
    """Index of each query in sorted_keys, -1 where absent (negative queries are absent)."""
    if sorted_keys.size == 0:
        return np.full(query.shape, -1, dtype=np.int64)
    probe = query
    if sorted_keys.dtype == np.uint32:
        # searched in the keys' own type (int64 queries would have numpy copy the whole key array
        # to int64 on every call); a query outside uint32 is absent, and clipped it still finds
        # an index that the test below rejects
        probe = np.clip(query, 0, np.iinfo(np.uint32).max).astype(np.uint32)
    if query.size > 1024 and sorted_keys.size > 4096:
        # numpy narrows each binary search with the previous answer when the queries
        # are sorted: sorting first is 3-4x faster on large dictionaries
        order = np.argsort(probe)
        idx = np.empty(query.size, dtype=np.intp)
        idx[order] = np.searchsorted(sorted_keys, probe[order])
    else:
        idx = np.searchsorted(sorted_keys, probe)
    np.minimum(idx, sorted_keys.size - 1, out=idx)
    found = (sorted_keys[idx] == query) & (query >= 0)
    return np.where(found, idx, -1)


@dataclass
class CompiledLine:
    """A template line with its dictionaries.

    ``steps[i]`` holds the sorted packed keys of the combinations of macros
    0..i+1 (for lines of three macros or more); ``keys`` the sorted final keys
    of the attributes kept (uint32 when fitted and they fit, else int64); attribute
    ids are ``offset + rank in keys``.
    """

    line: object
    steps: list
    keys: np.ndarray
    offset: int = 0
    table: object = None      # single-macro lines: rank of every value id (-1: not kept)
    counts: object = None     # occurrences of each kept key in the data fitted, in the narrowest
                              # unsigned type that holds them (None: loaded from a file);
                              # crftk.features.union sums them in int64

    @property
    def size(self):
        return int(self.keys.size)


class PackedIds:
    """int32 ids held in 3 bytes each (little-endian, one byte of padding: what
    crftk._lattice.Lattices.pack_attributes makes), read as an array: ``np.asarray``, slices and
    index arrays give int32. A training corpus's attribute ids while its kernels read them packed."""

    dtype = np.dtype(np.int32)
    ndim = 1

    def __init__(self, packed):
        self.packed = packed
        self.size = max(0, (packed.size - 1) // 3)
        self.shape = (self.size,)

    def __len__(self):
        return self.size

    def _unpack(self, start, stop):
        out = np.zeros((max(0, stop - start), 4), dtype=np.uint8)
        out[:, :3] = self.packed[3 * start:3 * max(start, stop)].reshape(-1, 3)
        return out.view("<u4").ravel().astype(np.int32)

    def __array__(self, dtype=None, copy=None):
        ids = self._unpack(0, self.size)
        return ids if dtype is None else ids.astype(dtype)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            k = int(key) + self.size if key < 0 else int(key)
            if not 0 <= k < self.size:
                raise IndexError(f"index {int(key)} is out of bounds for {self.size} ids")
            return self._unpack(k, k + 1)[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(self.size)
            if step == 1:
                return self._unpack(start, stop)
        return np.asarray(self)[key]


@dataclass
class EncodedCorpus:
    """Sentences as flat arrays, ready for the lattice kernels."""

    sent_ptr: np.ndarray
    attr_ptr: np.ndarray
    attrs: np.ndarray
    eattr_ptr: np.ndarray
    eattrs: np.ndarray
    labels: object          # int32 gold label ids (-1: unknown label) or None
    values: object = None   # float64, one per entry of attrs: the occurrence's real value;
                            # None when every value is 1 (binary corpora store none)
    allowed: object = None  # uint8 [N, L]: the labels each token allows (partial annotation,
                            # crftk.io.partial; one-hot where labeled), or None: every token labeled

    @property
    def n_sentences(self):
        return self.sent_ptr.size - 1

    @property
    def n_tokens(self):
        return int(self.sent_ptr[-1])

    def sentence_slices(self):
        p = self.sent_ptr
        return [slice(int(p[i]), int(p[i + 1])) for i in range(p.size - 1)]

    def position(self, token):
        """(sentence, position in it) of a token id."""
        k = int(np.searchsorted(self.sent_ptr, token, side="right")) - 1
        return k, int(token - self.sent_ptr[k])

    def tokens_of(self, sentences):
        """Token ids of the given sentences, in order."""
        sentences = np.asarray(sentences, dtype=np.int64)
        starts = self.sent_ptr[sentences].astype(np.int64)
        return _slots(starts, self.sent_ptr[sentences + 1] - starts)

    def transitions_seen(self, n_labels):
        """bool [labels * labels]: the transitions (previous label * labels + label) that two
        adjacent tokens' gold labels show (partial tokens, -1, show none)."""
        L = n_labels
        y = np.asarray(self.labels, dtype=np.int64)
        follows = np.ones(y.size, dtype=bool)
        follows[self.sent_ptr[:-1]] = False            # a sentence's first token follows nothing
        seen = np.zeros(L * L, dtype=bool)
        t = np.flatnonzero(follows)
        t = t[(y[t - 1] >= 0) & (y[t] >= 0)]
        seen[y[t - 1] * L + y[t]] = True
        return seen

    def subset(self, sentences):
        """The given sentences (ids in increasing order) as a corpus of their own."""
        sentences = np.asarray(sentences, dtype=np.int64)
        tokens = self.tokens_of(sentences)

        def rows(ptr, ids):
            starts = ptr[tokens].astype(np.int64)
            counts = ptr[tokens + 1] - starts
            new_ptr = np.zeros(tokens.size + 1, dtype=np.int32)
            np.cumsum(counts, out=new_ptr[1:])
            return new_ptr, ids[_slots(starts, counts)]

        lengths = np.diff(self.sent_ptr)[sentences]
        sent_ptr = np.zeros(sentences.size + 1, dtype=np.int32)
        np.cumsum(lengths, out=sent_ptr[1:])
        attr_ptr, attrs = rows(self.attr_ptr, self.attrs)
        eattr_ptr, eattrs = rows(self.eattr_ptr, self.eattrs)
        labels = None if self.labels is None else self.labels[tokens]
        values = None
        if self.values is not None:
            values = rows(self.attr_ptr, self.values)[1]
        allowed = None if self.allowed is None else np.ascontiguousarray(self.allowed[tokens])
        return EncodedCorpus(sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, labels, values, allowed)


def _see_partial(seen, corpus, resolved, L):
    """Mark in ``seen`` (a bitmap over attribute x label) every attribute of a partial token with
    every label it allows: once per distinct partial label string, on the distinct attributes of
    its tokens."""
    ptr = corpus.attr_ptr
    for i, label_ids in resolved.patterns.items():
        tokens = np.flatnonzero(resolved.string_ids == i)
        starts = ptr[tokens].astype(np.int64)
        attrs = np.unique(corpus.attrs[_slots(starts, ptr[tokens + 1] - starts)]).astype(np.int64)
        attrs *= L
        for j in label_ids.tolist():        # a label at a time: no [attributes, labels] temporary
            seen[attrs + j] = True


class Positions:
    """Where each token of a batch sits in its sentence (and its first-mention anchor)."""

    def __init__(self, lengths, anchor=None):
        self.anchor = anchor
        lengths = np.asarray(lengths, dtype=np.int64)
        self.sent_ptr = np.zeros(lengths.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.sent_ptr[1:])
        n = int(self.sent_ptr[-1])
        self.token = np.arange(n, dtype=np.int64)
        sid = np.repeat(np.arange(lengths.size), lengths)
        self.start = self.sent_ptr[sid]
        self.end = self.sent_ptr[sid + 1]

    @property
    def n_tokens(self):
        return self.token.size


class ChainSpace:
    """What a feature space of a chain CRF derives from its labels, its state feature table
    (``feat_ptr``, ``feat_label``) and its count of edge attributes."""

    @property
    def n_labels(self):
        return len(self.labels)

    @property
    def n_features(self):
        return int(self.feat_label.size)

    @property
    def n_params(self):
        return self.layout().n_params

    def layout(self):
        """The parameter layout of a chain CRF on this space (crftk.features.layout)."""
        return ChainLayout(self.n_features, self.n_labels, self.n_edge_attrs)


class FeatureSpace(ChainSpace):
    """Labels, column vocabularies, attribute dictionaries and the state features."""

    def __init__(self, template, n_columns, label_col, labels, extractor, unigram_lines,
                 bigram_lines, feat_ptr, feat_label, feature_set):
        self.template = template
        self.n_columns = n_columns
        self.label_col = label_col
        self.labels = list(labels)
        self.label_index = {s: i for i, s in enumerate(self.labels)}
        self.extractor = extractor                # vocabularies of the macros' sources
        self.vocabs = extractor.vocabs            # source key -> Vocab
        self.unigram_lines = unigram_lines        # CompiledLine list, state attributes
        self.bigram_lines = bigram_lines          # CompiledLine list, edge attributes
        self.feat_ptr = np.ascontiguousarray(feat_ptr, dtype=np.int32)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=np.int32)
        self.feature_set = feature_set
        self._number(unigram_lines)
        self._number(bigram_lines)

    def settle(self):
        """Drop what only fitting and the unions of fitted spaces read: the lines' key counts and
        the vocabularies' value -> id dicts (made again when next asked for). A trained space then
        holds what its model file holds; the training driver settles it before the optimizer
        starts (on CoNLL-2000, ~1 MB of a training run's peak)."""
        for cl in self.unigram_lines + self.bigram_lines:
            cl.counts = None
        for vocab in self.vocabs.values():
            vocab.release_index()

    def encodes_like(self, other):
        """Whether ``other`` gives every sentence the same attribute ids as this space: the same
        template, columns, lexicon entries, vector tables, vocabularies and kept keys (a factorial
        CRF's chains, fitted on the same sentences with one template, do; their labels and
        features may differ)."""
        if other is self:
            return True
        if type(other) is not type(self) or other.template != self.template or other.n_columns != self.n_columns \
                or other.extractor.columns != self.extractor.columns or other.vocabs.keys() != self.vocabs.keys():
            return False
        # a lexicon's or a vector table's contents are not in the template (nor in its vocabulary's
        # values): spaces that read them are alike only with the same lexicon entries and the same tables
        mine, theirs = self.extractor.lexicons or {}, other.extractor.lexicons or {}
        if mine.keys() != theirs.keys() or any(mine[k] is not theirs[k] and mine[k].to_lines() != theirs[k].to_lines()
                                               for k in mine):
            return False
        mine, theirs = self.extractor.vectors, other.extractor.vectors
        if mine.keys() != theirs.keys() or any(mine[k] is not theirs[k] for k in mine):
            return False
        if any(other.vocabs[k].strings != v.strings for k, v in self.vocabs.items()):
            return False
        for mine, theirs in ((self.unigram_lines, other.unigram_lines), (self.bigram_lines, other.bigram_lines)):
            if len(mine) != len(theirs):
                return False
            for a, b in zip(mine, theirs):
                if a.line != b.line or a.offset != b.offset or not np.array_equal(a.keys, b.keys) \
                        or len(a.steps) != len(b.steps) or not all(map(np.array_equal, a.steps, b.steps)):
                    return False
        return True

    def __getstate__(self):
        # the compiled tables of encode_raw are rebuilt on demand: they do not pickle (Dask sends
        # spaces between workers)
        state = dict(self.__dict__)
        for cache in ("_column_tables", "_raw_encoder", "_label_table"):
            state.pop(cache, None)
        return state

    @staticmethod
    def _number(lines):
        offset = 0
        for cl in lines:
            cl.offset = offset
            offset += cl.size

    # sizes ---------------------------------------------------------------
    @property
    def n_attrs(self):
        return sum(cl.size for cl in self.unigram_lines)

    @property
    def n_edge_attrs(self):
        return sum(cl.size for cl in self.bigram_lines)

    # building ------------------------------------------------------------
    @classmethod
    def fit(cls, sentences, template, *, label_col=-1, min_freq=1, feature_set="supported",
            path=None, unknown_label=None, pairs=False, extra_labels=()):
        """Build the feature space from training sentences; returns (space, encoded corpus).

        ``sentences`` may be any iterable (a stream from the reader): it is read
        once, straight into integer arrays, so the corpus's rows are never all
        held as strings. A stream that also offers ``batches()`` (the
        :class:`crftk.io.conll.CorpusStream` of ``iter_corpus``) is read as
        :class:`~crftk.io.conll.RawBatch` bytes in compiled code instead, unless
        the template reads lexicons; both give the same space and encoding.
        ``unknown_label``: the marker of partial labels (crftk.io.partial; None: off; ``pairs``:
        the labels are tag pairs, partial where crftk.structures.pairs made pair cells); then
        the corpus's ``allowed`` masks the partial tokens' labels, and the supported features
        pair their attributes with every label they allow (``extra_labels``: labels to have even
        if no token has them as known labels). Annotation mistakes raise
        crftk.io.partial.AnnotationError (its ``token`` locates them).
        """
        if feature_set not in FEATURE_SETS:
            raise CrftkError(f"unknown feature set {feature_set!r}: choose supported or complete")
        if min_freq < 1:
            raise CrftkError("--min-freq must be at least 1")
        batches = getattr(sentences, "batches", None)
        if batches is not None and Extractor(template, {}).can_fit_batches():
            values, n_columns, label_col, extractor = cls._fit_batches(batches(), template, label_col, path)
        else:
            values, n_columns, label_col, extractor = cls._fit_sentences(sentences, template, label_col, path)
        label_strings, label_ids = values.labels
        values.labels = None
        resolved = None
        if unknown_label and any(partial_strings(label_strings, unknown_label, pairs)):
            # partial tokens: gold -1 and a mask of their allowed labels (crftk.io.partial)
            try:
                resolved = resolve(label_strings, label_ids, unknown_label, pairs=pairs, extra=extra_labels)
            except AnnotationError as e:
                e.locate_in(values.lengths)
                raise
            except CrftkError as e:         # about the whole data (no known label): the data's file
                raise CrftkError(e.message, e.path or path, e.line) from None
            labels, gold = resolved.labels, resolved.gold
        else:
            labels = sorted(label_strings)
            rank = np.argsort(np.argsort(np.array(label_strings, dtype=object)))
            gold = rank[label_ids].astype(np.int32)
        del label_ids
        pos = Positions(values.lengths, values.anchor)

        space = cls(template, n_columns, label_col, labels, extractor, [], [],
                    np.zeros(1, np.int32), np.zeros(0, np.int32), feature_set)
        # each line's attribute ranks come out of fitting it: no second pass to encode
        fitted = [space._fit_line(tl, values, pos, min_freq) for tl in template.unigrams]
        efitted = [space._fit_line(tl, values, pos, min_freq) for tl in template.bigrams]
        space.unigram_lines = [cl for cl, _ in fitted]
        space.bigram_lines = [cl for cl, _ in efitted]
        cls._number(space.unigram_lines)
        cls._number(space.bigram_lines)
        n, sent_ptr = pos.n_tokens, pos.sent_ptr.astype(np.int32)
        del values, pos
        attr_ptr, attrs, reals = space._assemble(space.unigram_lines, [part for _, part in fitted], n)
        del fitted
        eattr_ptr, eattrs, _ = space._assemble(space.bigram_lines, [part for _, part in efitted], n)
        del efitted
        corpus = EncodedCorpus(sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, gold, reals,
                               None if resolved is None else resolved.allowed)
        L, A = space.n_labels, space.n_attrs
        if A * L >= 2**31:
            raise CrftkError(f"{A} attributes x {L} labels: too many for this version; raise --min-freq")
        if feature_set == "complete":
            space.feat_ptr = (np.arange(A + 1, dtype=np.int64) * L).astype(np.int32)
            space.feat_label = np.tile(np.arange(L, dtype=np.int32), A)
        else:
            # (attribute, label) pairs seen: a bitmap over all pairs is smaller and
            # faster than sorting one entry per attribute occurrence
            seen = np.zeros(A * L, dtype=bool)
            ptr = corpus.attr_ptr
            for a in range(0, n, 1 << 16):        # by blocks of tokens: no corpus-sized temporaries
                b = min(n, a + (1 << 16))
                keys = corpus.attrs[ptr[a]:ptr[b]] * np.int32(L) + np.repeat(gold[a:b], np.diff(ptr[a:b + 1]))
                if resolved is not None:       # a partial token's (-1) pairs: _see_partial
                    keys = keys[np.repeat(gold[a:b] >= 0, np.diff(ptr[a:b + 1]))]
                seen[keys] = True
            if resolved is not None:
                _see_partial(seen, corpus, resolved, L)
            pairs = np.flatnonzero(seen)
            del seen
            space.feat_label = (pairs % L).astype(np.int32)
            counts = np.bincount(pairs // L, minlength=A)
            space.feat_ptr = np.zeros(A + 1, dtype=np.int32)
            np.cumsum(counts, out=space.feat_ptr[1:])
        if space.n_params >= 2**31:
            raise CrftkError(f"{space.n_params} parameters: too many for this version; "
                             f"raise --min-freq or use the supported feature set")
        return space, corpus

    @staticmethod
    def _check_first(n_columns, label_col, template, path, line):
        """The label column of training data of n_columns columns; raise when they do not fit."""
        if n_columns < 2:
            raise CrftkError("training data needs at least two columns: an input and the gold label",
                             path, line)
        label_col = _normalize_col(label_col, n_columns, path)
        template.check_columns(n_columns, label_col, path)
        return label_col

    @classmethod
    def _fit_sentences(cls, sentences, template, label_col, path):
        """(values, n_columns, label_col, extractor) of training Sentence objects."""
        it = iter(sentences)
        first = next(it, None)
        if first is None:
            raise CrftkError("no training sentences", path)
        n_columns = len(first.rows[0])
        label_col = cls._check_first(n_columns, label_col, template, path, first.line)
        extractor = Extractor(template, load_lexicons(template))
        return extractor.fit(itertools.chain((first,), it), label_col), n_columns, label_col, extractor

    @classmethod
    def _fit_batches(cls, batches, template, label_col, path):
        """(values, n_columns, label_col, extractor) of training RawBatch batches."""
        first = next(batches, None)
        while first is not None and first.n_tokens == 0:     # a batch of pass-through lines only
            first = next(batches, None)
        if first is None:
            raise CrftkError("no training sentences", path)
        row = first.block[first.tok_start[0]:first.tok_end[0]].decode("utf-8")
        n_columns = len(_split_columns(row))
        label_col = cls._check_first(n_columns, label_col, template, path, int(first.sent_line[0]))
        extractor = Extractor(template, {})
        values = extractor.fit_batches(itertools.chain((first,), batches), label_col)
        return values, n_columns, label_col, extractor

    @classmethod
    def from_predicates(cls, atomic, predicates, labels):
        """A feature space whose attributes are the given conjunctions of atomic attributes.

        ``atomic`` is fitted on a template with one macro per U line, so its
        attributes are atomic tests; each predicate is a tuple of them (from
        distinct lines) and ``labels[j]`` the sorted label ids of predicate j's
        state features. Single tests stay on their atomic lines; each set of
        lines that predicates combine becomes one U line appended to the
        template, the atomic texts joined by "/" (``U01:%x[-1,0]/U05:%x[0,1]``).
        No data is read. Returns (space, attr_of), attr_of[j] the attribute id
        of predicate j.
        """
        lines = atomic.unigram_lines
        path = atomic.template.path
        if any(len(cl.line.macros) != 1 for cl in lines):
            raise CrftkError("conjunctions need an atomic template: exactly one macro per U line", path)
        if len(labels) != len(predicates):
            raise ValueError(f"{len(predicates)} predicates but {len(labels)} label sets")
        n_atoms = atomic.n_attrs
        line_of = np.repeat(np.arange(len(lines)), [cl.size for cl in lines]).tolist()
        value_of = np.concatenate([np.zeros(0, np.int64)] + [cl.keys for cl in lines]).tolist()
        groups = {}       # signature (sorted atomic line indices) -> ([predicate], [value ids])
        seen = set()
        for j, pred in enumerate(predicates):
            tests = tuple(sorted(int(a) for a in pred))
            if not tests or tests[0] < 0 or tests[-1] >= n_atoms:
                raise ValueError(f"predicate {j}: {tests} is empty or not in 0..{n_atoms - 1}")
            sig = tuple(line_of[a] for a in tests)     # ids are numbered line by line: sig is sorted
            if len(set(sig)) != len(sig):
                raise ValueError(f"predicate {j}: {tests} has two tests of one template line")
            if tests in seen:
                raise ValueError(f"predicate {j}: {tests} is given twice")
            seen.add(tests)
            group = groups.setdefault(sig, ([], []))
            group[0].append(j)
            group[1].append([value_of[a] for a in tests])
        label_arrays = [np.asarray(lab, dtype=np.int64).reshape(-1) for lab in labels]
        for j, lab in enumerate(label_arrays):
            if lab.size == 0 or lab[0] < 0 or lab[-1] >= atomic.n_labels or np.any(np.diff(lab) <= 0):
                raise ValueError(f"predicate {j}: labels must be sorted, unique, non-empty label ids")

        conj = sorted(sig for sig in groups if len(sig) > 1)
        generated = ["/".join(lines[i].line.text for i in sig) for sig in conj]
        text = atomic.template.text
        if text and not text.endswith("\n"):
            text += "\n"
        template = parse_template(text + "".join(g + "\n" for g in generated), path)
        # the parser merges identical lines: two signatures can only join into one text when
        # atomic literals hold "/U...", and the merged line would misnumber the attributes
        if [tl.text for tl in template.unigrams[len(lines):]] != generated:
            raise CrftkError("generated conjunction lines collide; avoid '/' in the atomic lines' text", path)
        extractor = Extractor(template, atomic.extractor.lexicons, atomic.vocabs)
        if extractor.keys != atomic.extractor.keys:   # the same macros: the same sources, in the same order
            raise CrftkError("conjunction template reads other sources than the atomic one", path)

        sigs = [(i,) for i in range(len(lines))] + conj
        unigram, row_keys = [], []       # row_keys: the final key of each predicate of a line
        for tl, sig in zip(template.unigrams, sigs):
            vals = groups[sig][1] if sig in groups else []
            radices = [atomic._radix(lines[i].line.macros[0]) for i in sig]
            steps, key = pack_rows(np.array(vals, dtype=np.int64).reshape(-1, len(sig)), radices)
            unigram.append(CompiledLine(tl, steps, np.unique(key)))
            row_keys.append(key)
        bigram = [CompiledLine(tl, list(cl.steps), cl.keys)
                  for tl, cl in zip(template.bigrams, atomic.bigram_lines)]
        cls._number(unigram)

        attr_of = np.zeros(len(predicates), dtype=np.int64)
        for sig, cl, key in zip(sigs, unigram, row_keys):
            if sig in groups:
                attr_of[groups[sig][0]] = cl.offset + np.searchsorted(cl.keys, key)
        order = np.argsort(attr_of)         # a bijection: one attribute per predicate
        feat_ptr = np.zeros(len(predicates) + 1, dtype=np.int64)
        np.cumsum(np.array([label_arrays[j].size for j in order], dtype=np.int64), out=feat_ptr[1:])
        feat_label = np.concatenate([np.zeros(0, np.int64)] + [label_arrays[j] for j in order])
        space = cls(template, atomic.n_columns, atomic.label_col, atomic.labels, extractor, unigram,
                    bigram, feat_ptr, feat_label, atomic.feature_set)
        return space, attr_of

    def _radix(self, macro):
        return len(self.vocabs[macro.source])

    def radix(self, macro):
        """How many values a macro's keys range over: its vocabulary's size, or for a real-valued
        macro its attributes (1 for %num, the vector dimension for %vec)."""
        return self._real_width(macro) if macro.real else self._radix(macro)

    def macro_values(self, macro, values, pos):
        """The value ids one template macro reads at every token of ``values``
        (crftk.features.extract.Values) at positions ``pos`` (:class:`Positions`): int64 [N], or
        CSR (ptr, ids) if it is multi-valued; -1 where it reads no known value."""
        src = values.get(macro.source)
        if macro.row != 0 and not macro.multi and not macro.anchored:
            index = self.vocabs[macro.source].index
            # a model file always holds its padding values; a forged one may not: then no value (-1)
            pads = [np.array([index.get(padding_value(sign * k), -1) for k in range(1, abs(macro.row) + 1)],
                             dtype=np.int64) for sign in (-1, 1)]
            return _encode.shift_values(src, pos.sent_ptr, macro.row, pads[0], pads[1])
        base = pos.token
        start, end = pos.start, pos.end
        valid = None
        if macro.anchored:
            valid = pos.anchor >= 0
            base = np.where(valid, pos.anchor, 0)
            start, end = pos.start[base], pos.end[base]
        if macro.row == 0 and valid is None:
            return src
        target = base + macro.row
        inside = (target >= start) & (target < end)
        dist = np.where(target < start, target - start, target - end + 1)  # 0 inside
        outside = ~inside
        if valid is not None:
            outside &= valid
            inside &= valid
        pad = np.full(pos.n_tokens, -1, dtype=np.int64)
        if outside.any():
            vocab = self.vocabs[macro.source]
            # a model file always holds its padding values; a forged one may not: then no value (-1)
            lut = {d: vocab.index.get(padding_value(d), -1) for d in np.unique(dist[outside]).tolist()}
            keys = np.array(sorted(lut), dtype=np.int64)
            pad[outside] = np.array([lut[k] for k in keys.tolist()], dtype=np.int64)[
                np.searchsorted(keys, dist[outside])]
        if not macro.multi:
            out = pad
            out[inside] = src[target[inside]]
            return out
        ptr, vals = src
        tgt = np.where(inside, target, 0)
        counts = np.where(inside, ptr[tgt + 1] - ptr[tgt], outside.astype(np.int64))
        out_ptr = np.zeros(pos.n_tokens + 1, dtype=np.int64)
        np.cumsum(counts, out=out_ptr[1:])
        out = np.repeat(pad, counts)
        take = np.repeat(inside, counts)
        idx = np.repeat(ptr[tgt] - out_ptr[:-1], counts) + np.arange(out.size)
        out[take] = vals[idx[take]]
        return out_ptr, out

    def _keys(self, cl, values, pos, grow=False):
        """Final keys of one line: (owner token of each key, or None for one per token; keys).

        -1 marks a key that is not in the dictionary. Multi-valued macros make
        one key per combination of their values.
        """
        macros = cl.line.macros
        if not macros:
            return None, np.zeros(pos.n_tokens, dtype=np.int64)
        own, key = _items(self.macro_values(macros[0], values, pos), None)
        for i in range(1, len(macros)):
            own, key, vals = _cross(own, key, self.macro_values(macros[i], values, pos))
            bad = (key < 0) | (vals < 0)
            packed = np.where(bad, -1, key * self._radix(macros[i]) + vals)
            if i == len(macros) - 1:
                return own, packed
            if grow:
                uniq, key, _ = _unique_inverse(packed)
                cl.steps.append(uniq)
            else:
                key = _lookup(cl.steps[i - 1], packed)
        return own, key

    def _fit_line(self, tl, values, pos, min_freq):
        """(the compiled line, (owner token of each key or None, the rank of each key among
        the kept ones, -1 for none)): the line's dictionaries and its encoding of the corpus;
        a real-valued line's encoding also has the value of each occurrence."""
        if tl.real is not None:
            return self._fit_real_line(tl, values, pos, min_freq)
        cl = CompiledLine(line=tl, steps=[], keys=np.zeros(0, np.int64))
        own, keys = self._keys(cl, values, pos, grow=True)
        uniq, inverse, counts = _unique_inverse(keys)
        del keys
        keep = counts >= min_freq
        kept = uniq[keep]
        # pruning renumbers the keys monotonically: a key's rank among the kept ones stays
        # the last entry, -1, is what a key of no attribute (inverse -1) reads
        rank_of = np.append(np.where(keep, np.cumsum(keep) - 1, -1), -1).astype(np.int32)
        rank = rank_of[inverse]
        del inverse
        cl.keys = _narrow_keys(self._prune(cl, kept))
        cl.counts = _narrow(counts[keep])
        return cl, (own, rank)

    # real-valued lines (%num, %vec) -------------------------------------------
    def _real_width(self, macro):
        """The attributes of a real-valued line: 1 for %num, the vector dimension for %vec."""
        return 1 if macro.kind == "num" else self.extractor.vectors[macro.args[0]].dim

    def _real_sources(self, line, values, pos):
        """(tokens, what each reads) of a real-valued line's occurrences, tokens increasing: %num's
        number, %vec's vector row; none out of the sentence or for a word without a vector."""
        m = line.real
        src = values.reals[m.source]
        if m.row == 0:
            tok, got = pos.token, src
        else:
            target = pos.token + m.row
            tok = np.flatnonzero((target >= pos.start) & (target < pos.end))
            got = src[target[tok]]
        if m.kind == "vec":
            has = got >= 0
            tok, got = tok[has], got[has]
        return tok, got

    def _real_occurrences(self, line, values, pos):
        """(owner token, attribute key, value) of each occurrence of a real-valued line: %num's one
        key 0 with the number, %vec's keys 0..D-1 with the vector."""
        m = line.real
        tok, got = self._real_sources(line, values, pos)
        if m.kind == "num":
            return tok, np.zeros(tok.size, dtype=np.int64), got
        rows = got
        table = self.extractor.vectors[m.args[0]].table
        dim = table.shape[1]
        return (np.repeat(tok, dim), np.tile(np.arange(dim, dtype=np.int64), tok.size),
                table[rows].reshape(-1).astype(np.float64))

    def _fit_real_line(self, tl, values, pos, min_freq):
        """:meth:`_fit_line` of a real-valued line: its keys are the attributes that occur at least
        ``min_freq`` times."""
        tok, key, val = self._real_occurrences(tl, values, pos)
        counts = np.bincount(key, minlength=self._real_width(tl.real))
        keep = counts >= min_freq
        cl = CompiledLine(line=tl, steps=[], keys=np.flatnonzero(keep).astype(np.int64),
                          counts=_narrow(counts[keep]))
        rank = np.where(keep, np.cumsum(keep) - 1, -1)[key]
        kept = rank >= 0
        return cl, (tok[kept], rank[kept].astype(np.int32), val[kept])

    def _real_ranks(self, cl, values, pos):
        """(owner token, rank among the line's attributes, value) of a real-valued line's
        occurrences with an attribute."""
        tok, key, val = self._real_occurrences(cl.line, values, pos)
        rank = self._real_rank_table(cl)[key]
        kept = rank >= 0
        return tok[kept], rank[kept].astype(np.int32), val[kept]

    def _real_rank_table(self, cl):
        """The rank of each attribute key of a real-valued line among its kept ones (-1: dropped)."""
        table = np.full(self._real_width(cl.line.real), -1, dtype=np.int64)
        table[cl.keys] = np.arange(cl.keys.size)
        return table

    def _append_real_lines(self, attr_ptr, attrs, values, pos):
        """(attr_ptr, attrs, values) of a batch's binary attributes (attr_ptr, attrs) followed, token
        by token, by those of the real-valued lines, in compiled code (as encode_values orders them
        when no line is multi-valued)."""
        specs = []
        for cl in self.unigram_lines:
            m = cl.line.real
            if m is None:
                continue
            tok, got = self._real_sources(cl.line, values, pos)
            table = None if m.kind == "num" else self.extractor.vectors[m.args[0]].table
            specs.append((tok, cl.offset, self._real_rank_table(cl), got if table is None else None,
                          got if table is not None else None, table))
        return _encode.append_real_lines(attr_ptr, attrs, specs)

    def _prune(self, cl, kept):
        """Drop the combinations that no kept attribute uses; returns the re-keyed kept keys.

        Walking down from the final keys, each level keeps only the prefixes
        the level above uses and renumbers them (monotonically, so every key
        array stays sorted).
        """
        macros = cl.line.macros
        upper = kept
        for i in range(len(cl.steps) - 1, -1, -1):
            radix = self._radix(macros[i + 2])
            prefix, value = np.divmod(upper, radix)
            used = _distinct(prefix)
            rekeyed = np.searchsorted(used, prefix) * radix + value
            if i == len(cl.steps) - 1:
                kept = rekeyed
            else:
                cl.steps[i + 1] = rekeyed
            cl.steps[i] = cl.steps[i][used]
            upper = cl.steps[i]
        return kept

    # encoding ------------------------------------------------------------
    def _rank(self, cl, keys):
        """Rank of each key among the line's kept keys (-1: absent)."""
        if len(cl.line.macros) != 1:
            return _lookup(cl.keys, keys)
        table = cl.table
        if table is None:           # the key is the value id itself: a direct table
            table = np.full(self._radix(cl.line.macros[0]) + 1, -1, dtype=np.int64)
            table[cl.keys] = np.arange(cl.keys.size)
            # published only when complete: threads tagging with one model share it
            cl.table = table
        return table[keys]          # key -1 reads the extra last entry, which is -1

    def attribute_ranks(self, cl, values, pos):
        """The attributes one compiled line (:class:`CompiledLine`) fires on ``values`` at
        positions ``pos``: (owner token of each, or None for one per token; its rank among the
        line's attributes, whose id is ``cl.offset + rank``, -1 for none)."""
        own, keys = self._keys(cl, values, pos)
        return own, self._rank(cl, keys)

    def _attribute_csr(self, lines, values, pos):
        """Attribute ids of each token (CSR): one column per single-valued line, plus the
        variable-length contributions of lines with multi-valued macros."""
        parts = [self.attribute_ranks(cl, values, pos) if cl.line.real is None else self._real_ranks(cl, values, pos)
                 for cl in lines]
        return self._assemble(lines, parts, pos.n_tokens)

    @staticmethod
    def _assemble(lines, parts, n):
        """(ptr, ids, values) of n tokens, CSR, from each line's (owner or None, rank) (-1: none), or
        (owner, rank, value) of a real-valued line; values None when no line is real-valued."""
        if not lines:
            # (a template without B lines with macros: no edge attributes) zeros never written, so
            # that the pages of the pointers stay untouched and cost no resident memory
            return np.zeros(n + 1, dtype=np.int32), np.zeros(0, dtype=np.int32), None
        dense, offsets, owners, extra, reals = [], [], [], [], []
        for cl, part in zip(lines, parts):
            own, rank = part[:2]
            if own is None:
                dense.append(rank)
                offsets.append(cl.offset)
            else:
                keep = rank >= 0
                owners.append(own[keep])
                extra.append((rank[keep] + cl.offset).astype(np.int32))
                reals.append(part[2][keep] if len(part) > 2 else None)
        dense_counts, dense_ids = _encode.dense_csr(dense, offsets, n)
        del dense
        if not owners:
            ptr = np.zeros(n + 1, dtype=np.int32)
            np.cumsum(dense_counts, out=ptr[1:])
            return ptr, dense_ids, None
        # each token's dense ids, then its extra ids line by line (a stable sort by owner),
        # in one compiled pass: no temporaries of the corpus's size
        if any(r is not None for r in reals):
            return _encode.merge_csr(dense_counts, dense_ids, owners, extra, reals)
        return (*_encode.merge_csr(dense_counts, dense_ids, owners, extra), None)

    def encode_values(self, values, pos, gold=None):
        """Encode the value ids of a batch (crftk.features.extract.Values) at positions ``pos``
        (:class:`Positions`) as :meth:`encode` encodes sentences; ``gold``: the label strings of
        its tokens, or None."""
        attr_ptr, attrs, reals = self._attribute_csr(self.unigram_lines, values, pos)
        eattr_ptr, eattrs, _ = self._attribute_csr(self.bigram_lines, values, pos)
        labels = None
        if gold is not None:
            get = self.label_index.get
            labels = np.fromiter((get(v, -1) for v in gold), dtype=np.int32, count=len(gold))
        return EncodedCorpus(pos.sent_ptr.astype(np.int32), attr_ptr, attrs, eattr_ptr, eattrs, labels, reals)

    def raw_readable(self, whole_documents=False):
        """Whether batches of bytes (:class:`crftk.io.conll.RawBatch`) can be encoded in compiled
        code (:meth:`encode_raw`, :meth:`raw_values`): every macro reads a column or a test of
        one (lexicons and aggregates are read from sentences by :meth:`encode`), and first
        mentions only where the caller's batches hold whole documents
        (:func:`crftk.io.conll.whole_documents`). Builds what encoding batches needs, so call it
        before worker threads encode."""
        if self._raw_tables() is None or (self.template.anchored and not whole_documents):
            return False
        self.raw_encoder()
        return True

    def _raw_tables(self):
        """The ColumnIds of the template's columns, built once (None when not raw_readable)."""
        if getattr(self, "_column_tables", False) is not False:
            return self._column_tables
        macros = self.template.macros
        if any(m.kind != "x" and not m.real and m.source not in self.extractor.tests for m in macros) \
                or self.n_columns > 64:
            self._column_tables = None
            return None
        self._derived = [k for k in self.extractor.keys if not isinstance(k, int)]
        for k in self._derived:          # the tables over the vocabularies, before any thread reads them
            self.extractor.test_table(k)
        for table in self.extractor.vectors.values():
            table.column_ids()
        self._column_tables = {c: _encode.ColumnIds(self.vocabs[c].strings) for c in self.extractor.columns}
        return self._column_tables

    def raw_encoder(self):
        """The compiled encoder of :meth:`encode_raw` (crftk._encode.Encoder) when every macro
        reads a column or a single-valued test of one, else None (multi-valued tests and first
        mentions are encoded from :meth:`raw_values`). Built once; safe to share between threads."""
        if getattr(self, "_raw_encoder", False) is not False:
            return self._raw_encoder
        if self._raw_tables() is None or any(m.multi or m.anchored for m in self.template.macros):
            self._raw_encoder = None
            return None
        columns = self.extractor.columns

        def spec(cl):
            ms = []
            for m in cl.line.macros:
                index = self.vocabs[m.source].index
                before = [index.get(padding_value(-k), -1) for k in range(1, abs(m.row) + 1)]
                after = [index.get(padding_value(k), -1) for k in range(1, abs(m.row) + 1)]
                ms.append((m.row, m.source, self._radix(m), before, after))
            if len(ms) == 1:
                table = np.full(self._radix(cl.line.macros[0]) + 1, -1, dtype=np.int64)
                table[cl.keys] = np.arange(cl.keys.size)
                return {"macros": ms, "kind": "direct", "tables": table, "offset": cl.offset}
            return {"macros": ms, "kind": "maps", "tables": list(cl.steps) + [cl.keys], "offset": cl.offset}

        self._raw_encoder = _encode.Encoder(list(columns) + self._derived,
                                            [self._column_tables[c] for c in columns],
                                            [spec(cl) for cl in self.unigram_lines if cl.line.real is None],
                                            [spec(cl) for cl in self.bigram_lines])
        return self._raw_encoder

    def raw_gold(self, batch):
        """The gold label id of each token of a RawBatch (int32; -1: a label this space lacks), read
        from its label column in compiled code."""
        table = getattr(self, "_label_table", None)
        if table is None:
            table = self._label_table = _encode.ColumnIds(self.labels)
        ids = _encode.column_ids(batch.block, batch.tok_start, batch.tok_end, [self.label_col], [table])
        return ids[:, 0].astype(np.int32)

    def encode_raw(self, batch):
        """Encode a :class:`crftk.io.conll.RawBatch` in compiled code, as :meth:`encode` encodes
        its sentences (gold labels left out); needs :meth:`raw_readable`."""
        if self.raw_encoder() is None:
            v = self.raw_values(batch)
            return self.encode_values(v, Positions(v.lengths, v.anchor))
        columns = self.extractor.columns

        def fill(ids):               # the derived tests: [tokens, columns + derived] of column ids
            tests = self._raw_tests(batch, {c: ids[:, i] for i, c in enumerate(columns)})
            for j, key in enumerate(self._derived, start=len(columns)):
                ids[:, j] = tests[key]

        attr_ptr, attrs, eattr_ptr, eattrs = self.raw_encoder().encode(batch.block, batch.tok_start,
                                                                       batch.tok_end, batch.sent_ptr, fill)
        reals = None
        if self.extractor.reals:       # the binary lines' ids first, then each real-valued line's
            from crftk.features.extract import Values
            v = Values({}, {}, None, batch.sentence_lengths(), None, self.extractor.batch_reals(batch))
            attr_ptr, attrs, reals = self._append_real_lines(attr_ptr, attrs, v, Positions(v.lengths))
        return EncodedCorpus(batch.sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, None, reals)

    def raw_values(self, batch, fed=None):
        """The value ids (crftk.features.extract.Values) of a RawBatch, as ``extractor.values``
        gives them for its sentences; ``fed`` (column, label strings, label id per token): that
        column holds those labels instead of the batch's; columns the batch lacks have no value
        (-1). Needs :meth:`raw_readable`."""
        from crftk.features.extract import MULTI, Values
        self._raw_tables()
        fed_col = None if fed is None else fed[0]
        columns = [c for c in self.extractor.columns if c < batch.n_columns and c != fed_col]
        ids = _encode.column_ids(batch.block, batch.tok_start, batch.tok_end, columns,
                                 [self._column_tables[c] for c in columns])
        n = batch.n_tokens
        single = {c: np.full(n, -1, dtype=np.int64) for c in self.extractor.columns}
        single.update({c: np.ascontiguousarray(ids[:, i]) for i, c in enumerate(columns)})
        if fed is not None and fed_col in single:
            single[fed_col] = self.vocabs[fed_col].ids(list(fed[1]))[fed[2]]
        multi = {}
        for key, ids in self._raw_tests(batch, single, fed).items():
            (multi if key[0] in MULTI else single)[key] = ids
        lengths = batch.sentence_lengths().astype(np.int64)
        anchor = None
        if self.template.anchored:        # whole documents (raw_readable(whole_documents=True))
            unseen = np.flatnonzero(single[0] < 0)
            anchor = self.extractor.token_anchors(single[0], unseen, self._strings(batch, 0, unseen, fed),
                                                  np.repeat(batch.sent_doc.astype(np.int64), lengths))
        return Values(single, multi, anchor, lengths, None, self.extractor.batch_reals(batch) or None)

    @staticmethod
    def _strings(batch, column, tokens, fed=None):
        """The strings of a column at some tokens of a RawBatch: from ``fed``'s labels for the fed
        column, none for a column the batch lacks."""
        if fed is not None and column == fed[0]:
            return np.asarray(fed[1], dtype=object)[fed[2][tokens]].tolist()
        if column < batch.n_columns:
            return _textio.field_strings(batch.block, batch.tok_start, batch.tok_end, column, tokens)
        return []

    def _raw_tests(self, batch, single, fed=None):
        """{derived source: value ids} of a RawBatch from its columns' ids ``single`` (column ->
        ids, -1: unseen); each test runs on the distinct unseen values only, their strings from the
        batch bytes, from ``fed``'s labels for the fed column, none for a column the batch lacks."""
        out = {}
        for c in dict.fromkeys(k[1] for k in self._derived):
            unseen = np.flatnonzero(single[c] < 0)
            strings = self._strings(batch, c, unseen, fed)
            if not strings:                 # a column the batch lacks: no value, nothing unseen
                unseen = unseen[:0]
            out.update(self.extractor.column_tests(c, single[c], unseen, strings))
        return out

    def input_widths(self):
        """The column counts of rows this space encodes (crftk.io.conll.Widths): from the last
        column its template reads to its training width; the gold label is there when its
        column is (a POS tagger trained on ``word POS chunk`` tags the words alone)."""
        return model_widths(self.template.columns, self.n_columns)

    def input_columns(self, n):
        """True when rows of n columns carry the gold label, False when they lack it; else raise."""
        widths = self.input_widths()
        if n in widths:
            return self.label_col < n
        raise CrftkError(f"the model expects {describe_widths(widths)}, found {n}: {widths.needs}")

    def encode(self, sentences):
        """Encode sentences with the frozen dictionaries (gold labels kept when present)."""
        if not sentences:
            return EncodedCorpus(np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(0, np.int32),
                                 np.zeros(1, np.int32), np.zeros(0, np.int32), None)
        has_gold = self.input_columns(len(sentences[0].rows[0]))
        values = self.extractor.values(sentences, self.label_col if has_gold else None)
        return self.encode_values(values, Positions(values.lengths, values.anchor), values.labels)

    # strings (dump) ------------------------------------------------------
    def value_ids(self, cl, keys):
        """[n_keys, n_macros] macro value ids of each packed key of a line (the inverse of _keys)."""
        macros = cl.line.macros
        key = np.asarray(keys, dtype=np.int64)
        cols = []
        for i in range(len(macros) - 1, -1, -1):
            if i == 0:
                vals = key
            else:
                key, vals = np.divmod(key, self._radix(macros[i]))
                if i >= 2:
                    key = np.asarray(cl.steps[i - 2], dtype=np.int64)[key]
            cols.append(vals)
        cols.reverse()
        return np.stack(cols, axis=1) if cols else np.zeros((key.size, 0), dtype=np.int64)

    def _values(self, cl, keys):
        """Macro value strings of each key of a line (a real-valued line's: the macro, with the
        dimension for %vec: ``U20:%vec[0,0,emb][7]``)."""
        m = cl.line.real
        if m is not None:
            return [(str(m) if m.kind == "num" else f"{m}[{k}]",) for k in np.asarray(keys).tolist()]
        ids = self.value_ids(cl, keys)
        cols = [[self.vocabs[m.source].strings[v] for v in ids[:, j].tolist()]
                for j, m in enumerate(cl.line.macros)]
        return list(zip(*cols)) if cols else [()] * ids.shape[0]

    def attribute_strings(self, edge=False):
        """The CRF++ feature string of every attribute, in id order."""
        out = []
        for cl in (self.bigram_lines if edge else self.unigram_lines):
            out.extend(cl.line.render(v) for v in self._values(cl, cl.keys))
        return out

    # serialization -------------------------------------------------------
    def to_arrays(self):
        """(meta, arrays) for the model file."""
        arrays = {"feat_ptr": self.feat_ptr, "feat_label": self.feat_label}
        offsets, blob = pack_strings(self.labels)
        arrays["labels.offsets"], arrays["labels.blob"] = offsets, blob
        for i, key in enumerate(self.extractor.keys):
            arrays[f"vocab{i}.offsets"], arrays[f"vocab{i}.blob"] = pack_strings(self.vocabs[key].strings)
        lexicons = {}
        for name, lex in self.extractor.lexicons.items():
            arrays[f"lexicon.{name}.offsets"], arrays[f"lexicon.{name}.blob"] = pack_strings(lex.to_lines())
            lexicons[name] = {"ignore_case": lex.ignore_case}
        for prefix, lines in (("u", self.unigram_lines), ("b", self.bigram_lines)):
            for i, cl in enumerate(lines):
                arrays[f"{prefix}{i}.keys"] = np.asarray(cl.keys, dtype=np.int64)
                for j, st in enumerate(cl.steps):
                    arrays[f"{prefix}{i}.step{j}"] = st
        meta = {"template": self.template.text, "template_path": self.template.path,
                "n_columns": self.n_columns, "label_col": self.label_col,
                "feature_set": self.feature_set, "n_sources": len(self.extractor.keys),
                "lexicons": lexicons}
        if self.extractor.vectors:       # only then: a binary template's model is byte for byte as before
            meta["vectors"], vector_arrays = vectors_to_arrays(self.extractor.vectors)
            arrays.update(vector_arrays)
        return meta, arrays

    @classmethod
    def from_arrays(cls, meta, arrays, path=None):
        _check_meta_types(meta, path)
        try:
            try:
                template = parse_template(meta["template"], meta.get("template_path", "<model>"))
            except CrftkError as e:     # the fault is in the model file, not in that template file
                raise CrftkError(f"the model's template ({e.path}, line {e.line}): {e.message}", path) from None
            _check_columns(meta, template, path)
            labels = unpack_strings(arrays["labels.offsets"], arrays["labels.blob"], path=path)
            lexicons = {name: _lexicon_from_lines(unpack_strings(arrays[f"lexicon.{name}.offsets"],
                                                                arrays[f"lexicon.{name}.blob"], path=path),
                                                 name, opts["ignore_case"])
                        for name, opts in meta.get("lexicons", {}).items()}
            template.vectors = vectors_from_arrays(meta.get("vectors", {}), arrays, path)
            keys = Extractor(template, lexicons).keys
            if len(keys) != meta["n_sources"]:
                raise ValueError("template and vocabularies disagree")
            vocabs = {k: Vocab(unpack_strings(arrays[f"vocab{i}.offsets"], arrays[f"vocab{i}.blob"], path=path))
                      for i, k in enumerate(keys)}
            extractor = Extractor(template, lexicons, vocabs)

            def lines(prefix, tls):
                out = []
                for i, tl in enumerate(tls):
                    n_steps = max(0, len(tl.macros) - 2)
                    steps = [np.asarray(arrays[f"{prefix}{i}.step{j}"], dtype=np.int64) for j in range(n_steps)]
                    out.append(CompiledLine(tl, steps, np.asarray(arrays[f"{prefix}{i}.keys"], dtype=np.int64)))
                return out

            return cls(template, int(meta["n_columns"]), int(meta["label_col"]), labels, extractor,
                       lines("u", template.unigrams), lines("b", template.bigrams),
                       arrays["feat_ptr"], arrays["feat_label"], meta["feature_set"])
        except (KeyError, ValueError, TypeError) as e:
            raise CrftkError(f"model file is incomplete or inconsistent ({e})", path) from None


class PairSpace(FeatureSpace):
    """The features of a factorial CRF's pair factor between chains c and c+1
    (crftk.structures.factorial): its labels are the label pairs ``a|b``, numbered
    a * n_{c+1} + b, and its parameters are its feature weights alone."""

    def layout(self):
        return PairLayout(self.n_features)


#: the type of each field a model file's feature space records
_META_TYPES = {"template": str, "template_path": str, "n_columns": int, "label_col": int,
               "feature_set": str, "n_sources": int, "lexicons": dict, "vectors": dict}


def _check_meta_types(meta, path):
    """Refuse a model header whose fields have the wrong types (a file crftk did not write)."""
    for key, kind in _META_TYPES.items():
        if key in ("template_path", "lexicons", "vectors") and key not in meta:     # absent in older files
            continue
        value = meta[key] if key in meta else None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise CrftkError(f"model file is inconsistent: its field {key!r} is not a {kind.__name__}", path)
    for name, opts in meta.get("lexicons", {}).items():
        if not isinstance(opts, dict) or not isinstance(opts.get("ignore_case"), bool):
            raise CrftkError(f"model file is inconsistent: lexicon {shown(name)} has no ignore_case flag", path)


def _check_columns(meta, template, path):
    """Refuse a header whose column count, label column or lexicons do not fit its template."""
    n, label_col = meta["n_columns"], meta["label_col"]
    # crftk writes the label column counted from 0; the compiled readers index rows with it unchecked
    if not 1 <= n <= MAX_COLUMNS or not 0 <= label_col < n:
        raise CrftkError(f"model file is inconsistent: label column {label_col} of {n} columns", path)
    if template.columns and max(template.columns) >= n:
        raise CrftkError(f"model file is inconsistent: its template reads column {max(template.columns)} "
                         f"of {n} columns", path)
    if any(m.col == label_col for m in template.macros):     # as Template.check_columns refuses at training
        raise CrftkError(f"model file is inconsistent: its template reads column {label_col}, its label column",
                         path)
    missing = sorted(set(template.lexicons) - set(meta.get("lexicons", {})))
    if missing:
        raise CrftkError(f"model file is inconsistent: its template uses lexicon {shown(missing[0])}, "
                         "which the file does not hold", path)
    missing = sorted(set(template.vector_lines) - set(meta.get("vectors", {})))
    if missing:
        raise CrftkError(f"model file is inconsistent: its template uses vectors {shown(missing[0])}, "
                         "which the file does not hold", path)


def _lexicon_from_lines(lines, name, ignore_case):
    return Lexicon.from_lines(lines, name, ignore_case)


def pack_rows(values, radices):
    """(steps, final key of each row) for rows of macro value ids (one column per macro of a
    line, ``radices`` the sizes of their vocabularies), packed as encoding packs them: the
    dictionaries of a :class:`CompiledLine` built from its attributes' values.

    Each row is one kept combination, so every prefix is used and, unlike
    ``_fit_line``, nothing needs pruning.
    """
    key = values[:, 0]
    steps = []
    for i in range(1, values.shape[1]):
        key = key * radices[i] + values[:, i]
        if i < values.shape[1] - 1:
            uniq, inv = np.unique(key, return_inverse=True)
            steps.append(uniq)
            key = inv.reshape(-1)
    return steps, key


def _distinct(a):
    """np.unique(a) of a 1-d integer array (sorted distinct values), without np.unique, which
    imports numpy.ma (over 1 MB resident) into every training process."""
    a = np.sort(a)
    if a.size:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a


def _narrow(counts):
    """Counts (>= 0) in the narrowest unsigned integer type that holds the largest: they stay in
    memory with the space for crftk.features.union, and are mostly small."""
    top = int(counts.max()) if counts.size else 0
    for dtype in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dtype).max:
            return counts.astype(dtype)
    return counts.astype(np.int64)


def _narrow_keys(keys):
    """A fitted line's sorted keys (>= 0) as uint32 when they fit: a word-pair line of a large
    corpus holds ~10^5 keys through the whole of training. Readers take them as int64 where
    they need to (model files, the compiled encoder's tables)."""
    if keys.size and int(keys[-1]) <= np.iinfo(np.uint32).max:
        return keys.astype(np.uint32)
    return keys


def _unique_inverse(keys):
    """(sorted distinct keys >= 0, index of each key among them or -1, count of each)."""
    return _encode.unique_inverse(np.ascontiguousarray(keys, dtype=np.int64))


def _items(vals, own):
    """(owner, values) of a macro's ids: owner None when there is one value per token."""
    if isinstance(vals, tuple):
        ptr, flat = vals
        return np.repeat(np.arange(ptr.size - 1), np.diff(ptr)), flat
    return own, vals


def _cross(own, key, vals):
    """Pair every current key with every value of its token: (owner, keys, values)."""
    if not isinstance(vals, tuple):
        return own, key, (vals if own is None else vals[own])
    ptr, flat = vals
    if own is None:
        own = np.arange(ptr.size - 1)
    counts = (ptr[1:] - ptr[:-1])[own]
    new_own = np.repeat(own, counts)
    first = np.repeat(ptr[own], counts)
    return new_own, np.repeat(key, counts), flat[first + _ranks(counts)]


def _ranks(counts):
    """0..c-1 for each group of c items, concatenated."""
    total = int(counts.sum())
    starts = np.cumsum(counts) - counts
    return np.arange(total) - np.repeat(starts, counts)


def _slots(starts, counts):
    """Positions starts[i] .. starts[i]+counts[i]-1 for every i, concatenated."""
    return np.repeat(starts, counts) + _ranks(counts)


def _normalize_col(col, n_columns, path=None):
    c = col + n_columns if col < 0 else col
    if not 0 <= c < n_columns:
        raise CrftkError(f"label column {col} does not exist in data of {n_columns} columns", path)
    return c
