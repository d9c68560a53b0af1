"""The values template macros read: columns, tests derived from them, lexicons, first mentions.

Every distinct thing a macro reads is a *source*: a column (``%x``) or a test
of one (``%X``, ``%t``, ``%shape``, ``%suf`` ...; see crftk/features/templates.py).
Each source has a vocabulary of its values; a sentence batch becomes, per
source, an integer id per token (-1: no value, or a value unseen in training)
or, for multi-valued tests, a list of ids per token (CSR arrays).

A test of a string is computed once per distinct string: over the column's
vocabulary (a lookup table, then one numpy gather for all tokens), and at
tagging time only for the words training never saw. Lexicon tests run per
sentence. First-mention macros read the token's *anchor*: the first earlier
token of the same document with the same word (column 0), for capitalized
words (McCallum & Li's "firstmention" tests).
"""

import itertools
import math
import os
import re
import threading
from functools import partial
from array import array
from dataclasses import dataclass

import numpy as np

from crftk.errors import CrftkError
from crftk.features import observations as obs
from crftk.features.aggregates import aggregate, contexts
from crftk.features.lexicon import Lexicon, fold_of
from crftk.features.templates import DOCUMENT_MACROS, REAL, padding_value

MULTI = {"shape", "ngram"}
#: sources read from whole sentences (lexicons) or documents (aggregates), not from one string
SENTENCE_SOURCES = ("lex",) + DOCUMENT_MACROS
#: The numbers %num reads: decimal, no inf, nan, hex or '_' (as _encode.parse_numbers).
NUMBER = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def string_test(kind, args):
    """The function of one string a derived source computes: a module function or a partial
    of one (no closures), so that it pickles by name and arguments."""
    if kind == "X":
        return str.lower
    if kind in "tTmM":
        rx = re.compile(args[0], re.IGNORECASE if kind.isupper() else 0)
        return obs.regex_test(rx) if kind in "tT" else obs.regex_match(rx)
    if kind == "shape":
        return obs.word_classes
    if kind == "fshape":
        return obs.full_shape
    if kind == "cshape":
        return obs.collapsed_shape
    if kind == "pre":
        return partial(obs.prefix, n=args[0])
    if kind == "suf":
        return partial(obs.suffix, n=args[0])
    if kind == "ngram":
        return partial(obs.char_ngrams, lo=args[0], hi=args[1])
    raise ValueError(kind)


class Vocab:
    """The values of one source, each with an integer id."""

    def __init__(self, strings=()):
        self.strings = list(strings)
        self._index = None

    @property
    def index(self):
        """value -> id, made when first asked for (threads that race here make equal dicts)."""
        index = self._index
        if index is None:
            index = self._index = {s: i for i, s in enumerate(self.strings)}
        return index

    def release_index(self):
        """Drop the value -> id dict until it is next asked for: a training process keeps its
        vocabularies through the whole of training and reads them again only to save them."""
        self._index = None

    def __len__(self):
        return len(self.strings)

    def ids(self, values):
        """Ids of values; -1 for unknown values and None."""
        return np.fromiter(map(self.index.get, values, itertools.repeat(-1)), dtype=np.int64,
                           count=len(values))

    def add_ids(self, values):
        """Ids of values, adding the new ones; None gives -1."""
        index, strings = self.index, self.strings
        out = []
        for v in values:
            if v is None:
                out.append(-1)
                continue
            i = index.get(v)
            if i is None:
                i = index[v] = len(strings)
                strings.append(v)
            out.append(i)
        return out


@dataclass
class Values:
    """Per-source value ids of a batch of sentences."""

    single: dict          # source key -> int64 [N]
    multi: dict           # source key -> (ptr int64 [N+1], vals int64)
    anchor: object        # int64 [N] first-mention token (-1: none), or None
    lengths: np.ndarray   # tokens per sentence
    labels: object        # gold label strings per token, or None; fit: (label strings, id per token)
    reals: dict = None    # real-valued source -> per token: float64 number (%num), int64 vector row (%vec, -1 none)

    def get(self, key):
        return self.multi[key] if key in self.multi else self.single[key]

    def sentences(self, a, b):
        """The values of sentences a..b-1 (without anchors: first mentions may lie before a)."""
        ptr = np.concatenate([[0], np.cumsum(self.lengths)])
        lo, hi = int(ptr[a]), int(ptr[b])
        multi = {}
        for k, (vptr, vals) in self.multi.items():
            multi[k] = (vptr[lo:hi + 1] - vptr[lo], vals[vptr[lo]:vptr[hi]])
        reals = None if self.reals is None else {k: v[lo:hi] for k, v in self.reals.items()}
        return Values({k: v[lo:hi] for k, v in self.single.items()}, multi, None, self.lengths[a:b], None, reals)


def _csr(lists):
    counts = np.fromiter((len(x) for x in lists), dtype=np.int64, count=len(lists))
    ptr = np.zeros(len(lists) + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    vals = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(ptr[-1]))
    return ptr, vals


def _ranks(counts):
    """0..c-1 for each group of c items, concatenated."""
    return np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)


def anchors(word_ids, docs, capitalized):
    """First earlier token of the same document with the same word, for capitalized tokens."""
    n = word_ids.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    width = int(word_ids.max()) + 1
    key = docs.astype(np.int64) * width + word_ids
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    first = first[inverse.reshape(-1)]
    return np.where((first < np.arange(n)) & capitalized, first, -1)


def _capitalized(strings):
    return np.fromiter((bool(s) and s[0].isupper() for s in strings), dtype=bool, count=len(strings))


class Extractor:
    """Vocabularies of every source; turns sentences into value ids."""

    def __init__(self, template, lexicons, vocabs=None):
        self.template = template
        self.lexicons = lexicons                      # name -> crftk.features.lexicon.Lexicon
        derived = [k for k in template.sources if not isinstance(k, int) and k[0] not in REAL]
        self.reals = [k for k in template.sources if not isinstance(k, int) and k[0] in REAL]
        self.columns = template.vocab_columns
        self.keys = list(self.columns) + derived
        self.vectors = {}                             # name -> crftk.features.vectors.VectorTable
        for name, lineno in template.vector_lines.items():
            if name not in template.vectors:
                raise CrftkError(f"%vec reads vectors {name}, which are not given (crftk train --vectors "
                                 f"{name}=FILE; crftk.CRF(vectors={{{name!r}: FILE}}))", template.path, lineno)
            self.vectors[name] = template.vectors[name]
        pads = [padding_value(d) for k in range(1, template.max_offset + 1) for d in (-k, k)]
        self.vocabs = vocabs if vocabs is not None else {k: Vocab(pads) for k in self.keys}
        self.tests = {k: string_test(k[0], k[2]) for k in derived if k[0] not in SENTENCE_SOURCES}
        self.aggregates = [k for k in derived if k[0] in DOCUMENT_MACROS]
        self._tables = {}                             # key -> lookup table over the column vocab

    # training ---------------------------------------------------------------
    def fit(self, sentences, label_col):
        """Read training sentences once, growing the vocabularies; returns Values whose
        ``labels`` are (label strings in order of first appearance, int64 label id per token).

        Jackknife lexicons are matched per fold: a training token sees only the
        entries seen in other folds of documents.
        """
        cols = {c: array("q") for c in self.columns}
        lex_keys = [k for k in self.keys if not isinstance(k, int) and k[0] == "lex"]
        lex_vals = {k: array("q") for k in lex_keys}
        label_vocab, labels = Vocab(), array("q")
        lengths, docs = array("q"), array("q")
        reals = {k: [] for k in self.reals}
        read = _AggregateReader(self.aggregates)
        for s in sentences:
            rows = s.rows
            lengths.append(len(rows))
            docs.append(s.doc)
            read.add(rows)
            for k, parts in reals.items():
                parts.append(self.sentence_reals(k, [s]))
            for c in self.columns:
                cols[c].extend(self.vocabs[c].add_ids([row[c] for row in rows]))
            if lex_keys:
                words = [row[0] for row in rows]
                for k in lex_keys:
                    lex = self.lexicons[k[2][0]]
                    fold = fold_of(s.doc, lex.n_folds) if lex.n_folds else None
                    lex_vals[k].extend(self.vocabs[k].add_ids(lex.match(words, fold)))
            labels.extend(label_vocab.add_ids([row[label_col] for row in rows]))
        single = {c: np.frombuffer(a, dtype=np.int64) for c, a in cols.items()}
        single.update({k: np.frombuffer(a, dtype=np.int64) for k, a in lex_vals.items()})
        multi = {}
        for k, strings in read.values(lengths, docs).items():
            if k[0] == "ctx":
                multi[k] = _csr([[i for i in self.vocabs[k].add_ids(x)] for x in strings])
            else:
                single[k] = np.array(self.vocabs[k].add_ids(strings), dtype=np.int64)
        values = self._derive(single, np.frombuffer(lengths, dtype=np.int64), np.frombuffer(docs, dtype=np.int64),
                              (label_vocab.strings, np.frombuffer(labels, dtype=np.int64)))
        values.reals = _joined(reals)
        values.multi.update(multi)
        return values

    def can_fit_batches(self):
        """Whether :meth:`fit_batches` can read this template's sources (all but lexicons)."""
        return not any(not isinstance(k, int) and k[0] in SENTENCE_SOURCES for k in self.keys)

    def fit_batches(self, batches, label_col):
        """:meth:`fit` over :class:`crftk.io.conll.RawBatch` batches: the column values are
        numbered in compiled code, straight from the bytes (the same ids, in the same order)."""
        from crftk import _encode
        interners = [_encode.Interner(self.vocabs[c].strings) for c in self.columns]
        interners.append(_encode.Interner())
        wanted = list(self.columns) + [label_col]
        parts, lengths, docs = [], [], []
        reals = {k: [] for k in self.reals}
        for b in batches:
            parts.append(_encode.column_ids(b.block, b.tok_start, b.tok_end, wanted, interners))
            for k, v in self.batch_reals(b).items():
                reals[k].append(v)
            lengths.append(np.diff(b.sent_ptr).astype(np.int64))
            docs.append(b.sent_doc)
        ids = np.concatenate(parts) if parts else np.zeros((0, len(wanted)), dtype=np.int64)
        del parts
        single = {}
        for i, c in enumerate(self.columns):
            single[c] = np.ascontiguousarray(ids[:, i])
            self.vocabs[c] = Vocab(interners[i].strings())
        labels = (interners[-1].strings(), np.ascontiguousarray(ids[:, -1]))
        del ids
        values = self._derive(single, np.concatenate(lengths) if lengths else np.zeros(0, np.int64),
                              np.concatenate(docs) if docs else np.zeros(0, np.int64), labels)
        values.reals = _joined(reals)
        return values

    # real values (%num, %vec) -----------------------------------------------
    def sentence_reals(self, key, sentences):
        """The per-token values of a real-valued source over Sentence objects: numbers (%num,
        float64; a field that is not one is an error at its file and line) or vector rows
        (%vec, int64, -1: no vector)."""
        kind, col, args = key
        strings = [row[col] for s in sentences for row in s.rows]
        if kind == "vec":
            return self.vectors[args[0]].rows(strings)
        out = np.array([float(x) if NUMBER.fullmatch(x) else math.nan for x in strings], dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(out))
        if bad.size:
            b = int(bad[0])
            for k, s in enumerate(sentences):
                if b < len(s.rows):
                    where = (s.source, s.line + b) if s.source is not None else (f"sentence {k + 1}, token {b + 1}",)
                    raise not_a_number(key, strings[int(bad[0])], *where)
                b -= len(s.rows)
        return out

    def batch_reals(self, batch, columns=None):
        """{real-valued source: per-token values} of a RawBatch, as :meth:`sentence_reals` gives
        them, read in compiled code from its bytes; ``columns``: the sources to read (all)."""
        from crftk import _encode, _textio
        out = {}
        for key in (self.reals if columns is None else columns):
            kind, col, args = key
            if kind == "vec":
                out[key] = self.vectors[args[0]].batch_rows(batch, col)
                continue
            numbers, bad = _encode.parse_numbers(batch.block, batch.tok_start, batch.tok_end, col)
            if bad >= 0:
                k = int(np.searchsorted(batch.sent_ptr, bad, side="right")) - 1
                line = int(batch.sent_line[k]) + bad - int(batch.sent_ptr[k])
                text = _textio.field_strings(batch.block, batch.tok_start, batch.tok_end, col,
                                             np.array([bad], dtype=np.int64))
                raise not_a_number(key, text[0] if text else None, batch.source, line)
            out[key] = numbers
        return out

    def _derive(self, single, lengths, docs, labels):
        """Values of the training corpus from its column (and lexicon) ids: the derived
        sources through lookup tables over the column vocabularies, and the anchors."""
        multi = {}
        for k, test in self.tests.items():
            table = self._table(k, grow=True)
            col_ids = single[k[1]]
            if k[0] in MULTI:
                ptr, vals = table
                counts = ptr[1:] - ptr[:-1]
                c = counts[col_ids]
                out_ptr = np.zeros(col_ids.size + 1, dtype=np.int64)
                np.cumsum(c, out=out_ptr[1:])
                idx = np.repeat(ptr[col_ids] - out_ptr[:-1], c) + np.arange(out_ptr[-1])
                multi[k] = (out_ptr, vals[idx])
            else:
                single[k] = table[col_ids]
        anchor = None
        if self.template.anchored:
            tok_docs = np.repeat(docs, lengths)
            anchor = anchors(single[0], tok_docs, _capitalized(self.vocabs[0].strings)[single[0]])
        return Values(single, multi, anchor, lengths, labels)

    def _table(self, key, grow=False):
        """Test values of every string of the column vocabulary (ids; CSR for multi-valued)."""
        if key in self._tables and not grow:
            return self._tables[key]
        test, vocab = self.tests[key], self.vocabs[key]
        values = obs.apply(test, self.vocabs[key[1]].strings)
        if key[0] in MULTI:
            lists = [vocab.add_ids(v) if grow else vocab.ids(v).tolist() for v in values]
            lists = [[i for i in x if i >= 0] for x in lists]
            table = _csr(lists)
        else:
            table = np.array(vocab.add_ids(values), dtype=np.int64) if grow else vocab.ids(values)
        self._tables[key] = table
        return table

    # tagging ----------------------------------------------------------------
    def test_table(self, key):
        """The lookup table of a derived source over its column's vocabulary (built once)."""
        return self._table(key)

    def column_tests(self, column, col_ids, where, strings):
        """{test: value ids} of every test of a column: ``col_ids`` its ids per token (-1: no
        value or unseen), ``where`` the unseen tokens and ``strings`` their values; a
        multi-valued test's ids as (ptr, ids) CSR arrays."""
        kept = self._unseen_tests(column)
        out = kept.token_ids(col_ids, where, strings)
        if kept.multi_keys:
            local = Vocab()
            inverse = np.array(local.add_ids(strings), dtype=np.int64)
            for k in kept.multi_keys:
                out[k] = self._multi_test_ids(k, col_ids, where, kept.id_lists(k, local.strings), inverse)
        return out

    def _multi_test_ids(self, key, col_ids, where, lists, inverse):
        """(ptr, ids) of a multi-valued test: the lists of the table over the vocabulary for the
        known words, ``lists`` (the test's ids) for the distinct unseen words, in token order."""
        ptr, vals = self._table(key)
        known = col_ids >= 0
        safe = np.where(known, col_ids, 0)
        w_ptr, w_vals = _csr(lists)
        counts = np.where(known, (ptr[1:] - ptr[:-1])[safe], 0)
        counts[where] = (w_ptr[1:] - w_ptr[:-1])[inverse]
        out_ptr = np.zeros(col_ids.size + 1, dtype=np.int64)
        np.cumsum(counts, out=out_ptr[1:])
        rank = _ranks(counts)
        tok_known = np.repeat(known, counts)
        first = np.where(known, ptr[safe], 0)
        if where.size:
            first[where] = w_ptr[inverse]
        src = np.repeat(first, counts) + rank
        out = np.where(tok_known, vals[np.where(tok_known, src, 0)],
                       w_vals[np.where(tok_known, 0, src)] if w_vals.size else -1)
        return out_ptr, out

    def token_anchors(self, word_ids, unseen, strings, docs):
        """Each token's first mention (:func:`anchors`), -1 for none: ``word_ids`` the word column's
        ids (-1: unseen), ``unseen`` those tokens and ``strings`` their words, ``docs`` each
        token's document. A batch must hold its documents whole."""
        vocab = self.vocabs[0]
        word_ids = word_ids.copy()
        local = Vocab()              # unseen words: new ids past the vocabulary's end
        word_ids[unseen] = len(vocab) + np.array(local.add_ids(strings), dtype=np.int64)
        if "capitalized" not in self._tables:
            self._tables["capitalized"] = _capitalized(vocab.strings)
        capitalized = np.concatenate([self._tables["capitalized"], _capitalized(local.strings)])
        return anchors(word_ids, docs, capitalized[word_ids])

    def _unseen_tests(self, column):
        """The column's UnseenTests, made when first asked for, and made anew when a vocabulary
        its ids read has changed since."""
        kept = self.__dict__.setdefault("_unseen", {})
        tests = kept.get(column)
        if tests is None or not tests.current(self):
            with _UNSEEN_LOCK:
                tests = kept.get(column)
                if tests is None or not tests.current(self):
                    tests = kept[column] = UnseenTests(self, column)
        return tests

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_unseen", None)        # a cache, and its lock does not pickle
        return state

    def values(self, sentences, label_col=None):
        """Value ids of a batch with the frozen vocabularies (unseen values are -1)."""
        lengths = np.fromiter((len(s.rows) for s in sentences), dtype=np.int64, count=len(sentences))
        strings = {c: [row[c] for s in sentences for row in s.rows] for c in self.columns}
        single = {c: self.vocabs[c].ids(strings[c]) for c in self.columns}
        multi = {}
        tests = {}
        for c in dict.fromkeys(k[1] for k in self.tests):
            where = np.flatnonzero(single[c] < 0)
            tests.update(self.column_tests(c, single[c], where, [strings[c][i] for i in where.tolist()]))
        for k in self.tests:
            (multi if k[0] in MULTI else single)[k] = tests[k]
        for k in self.keys:
            if not isinstance(k, int) and k[0] == "lex":
                lex = self.lexicons[k[2][0]]
                single[k] = self.vocabs[k].ids([v for s in sentences
                                                for v in lex.match([row[0] for row in s.rows], None)])
        read = _AggregateReader(self.aggregates)
        for s in sentences:
            read.add(s.rows)
        for k, found in read.values(lengths, [s.doc for s in sentences]).items():
            if k[0] == "ctx":
                multi[k] = _csr([[i for i in self.vocabs[k].ids(x).tolist() if i >= 0] for x in found])
            else:
                single[k] = self.vocabs[k].ids(found)
        anchor = None
        if self.template.anchored:
            unseen = np.flatnonzero(single[0] < 0)
            docs = np.fromiter((s.doc for s in sentences), dtype=np.int64, count=len(sentences))
            anchor = self.token_anchors(single[0], unseen, [strings[0][i] for i in unseen.tolist()],
                                        np.repeat(docs, lengths))
        labels = None
        if label_col is not None:
            labels = [row[label_col] for s in sentences for row in s.rows]
        reals = {k: self.sentence_reals(k, sentences) for k in self.reals} or None
        return Values(single, multi, anchor, lengths, labels, reals)


_UNSEEN_LOCK = threading.Lock()


class UnseenTests:
    """The tests of one column, per token: over the column's vocabulary from the lookup tables,
    and for the values outside it from the tests' ids kept across the batches of a tagging run (a
    corpus meets its unknown words again and again, and a test is a Python call per word): an id
    per value for the single-valued tests (:meth:`token_ids`), a list of ids for the multi-valued
    ones (:meth:`id_lists`). Keeps the first ``limit`` distinct unseen values; later ones are
    tested at each meeting. Safe to share between threads."""

    limit = 1 << 15

    def __init__(self, extractor, column):
        self.column = column
        self.keys = [k for k in extractor.tests if k[1] == column and k[0] not in MULTI]
        self._tests = [extractor.tests[k] for k in self.keys]
        self._vocabs = [extractor.vocabs[k] for k in self.keys]
        self.multi_keys = [k for k in extractor.tests if k[1] == column and k[0] in MULTI]
        self._lists = {k: ({}, extractor.tests[k], extractor.vocabs[k]) for k in self.multi_keys}
        # what the ids depend on: which values are unseen, and the test values' ids
        self._read = [extractor.vocabs[k] for k in [column] + self.keys + self.multi_keys]
        self._sizes = [len(v) for v in self._read]
        # [tests, vocabulary + 1]: the last entry is a token without a value's
        n = len(extractor.vocabs[column])
        self.known = np.full((len(self.keys), n + 1), -1, dtype=np.int64)
        for j, k in enumerate(self.keys):
            self.known[j, :n] = extractor.test_table(k)
        self.row = {}                                   # unseen value -> column of kept
        self.kept = np.empty((len(self.keys), 64), dtype=np.int64)
        self._lock = threading.Lock()

    def current(self, extractor):
        """Whether the vocabularies the ids were read from are the extractor's, unchanged."""
        now = [extractor.vocabs[k] for k in [self.column] + self.keys + self.multi_keys]
        return all(a is b and len(a) == n for a, b, n in zip(now, self._read, self._sizes))

    def token_ids(self, col_ids, where, strings):
        """{test: ids per token} of tokens whose column ids are ``col_ids`` (-1: no value or
        unseen), ``where`` the unseen ones and ``strings`` their values."""
        out = self.known.take(np.where(col_ids >= 0, col_ids, self.known.shape[1] - 1), axis=1)
        if len(strings) and self.keys:
            out[:, where] = self._unseen_ids(strings)
        return dict(zip(self.keys, out))

    def _unseen_ids(self, strings):
        """[tests, len(strings)] ids of unseen values, as ``vocab.ids([test(v) for v in strings])``."""
        with self._lock:
            rows = self._rows(strings)
            miss = np.flatnonzero(rows < 0)
            if miss.size and len(self.row) < self.limit:
                new = list(dict.fromkeys([strings[i] for i in miss.tolist()]))
                self._add(new[:self.limit - len(self.row)])
                rows = self._rows(strings)
                miss = np.flatnonzero(rows < 0)
            out = self.kept[:, rows]
        if miss.size:                     # no room left: tested here, once per distinct value
            local = {}
            inverse = np.fromiter((local.setdefault(strings[i], len(local)) for i in miss.tolist()),
                                  dtype=np.int64, count=miss.size)
            out[:, miss] = self._test(list(local))[:, inverse]
        return out

    def id_lists(self, key, words):
        """The ids of multi-valued test ``key`` of each of the distinct unseen ``words`` (lists, to
        be read only), as ``[i for i in vocab.ids(test(w)).tolist() if i >= 0]`` gives them."""
        kept, test, vocab = self._lists[key]
        with self._lock:
            out = list(map(kept.get, words))
            new = [w for w, x in zip(words, out) if x is None]
            if new:
                made = {w: [i for i in vocab.ids(test(w)).tolist() if i >= 0] for w in new}
                room = self.limit - len(kept)
                if room > 0:
                    kept.update(itertools.islice(made.items(), room))
                out = [made[w] if x is None else x for w, x in zip(words, out)]
        return out

    def _rows(self, strings):
        return np.fromiter(map(self.row.get, strings, itertools.repeat(-1)), dtype=np.int64, count=len(strings))

    def _test(self, values):
        out = np.empty((len(self.keys), len(values)), dtype=np.int64)
        for j, (test, vocab) in enumerate(zip(self._tests, self._vocabs)):
            out[j] = vocab.ids(obs.apply(test, values))
        return out

    def _add(self, values):
        n, m = len(self.row), len(values)
        if n + m > self.kept.shape[1]:
            grown = np.empty((len(self.keys), max(2 * self.kept.shape[1], n + m)), dtype=np.int64)
            grown[:, :n] = self.kept[:, :n]
            self.kept = grown
        self.kept[:, n:n + m] = self._test(values)
        self.row.update(zip(values, range(n, n + m)))


class _AggregateReader:
    """The words and first-stage labels that aggregate macros read, gathered sentence by sentence."""

    def __init__(self, keys):
        self.keys = keys
        self.words = []
        # one list per column read, however many macros read it (each token's value once)
        self.labels = {c: [] for c in dict.fromkeys(k[1] for k in keys)}

    def add(self, rows):
        if self.keys:
            self.words.extend(row[0] for row in rows)
            for c, values in self.labels.items():
                values.extend(row[c] for row in rows)

    def values(self, lengths, docs):
        """{key: value string or None per token; for %ctx a list of strings per token}."""
        out = {}
        for k in self.keys:
            if k[0] == "ctx":
                out[k] = contexts(self.words, self.labels[k[1]], lengths, docs, k[2][0])
        for col in {k[1] for k in self.keys if k[0] != "ctx"}:
            keys = [k for k in self.keys if k[1] == col and k[0] != "ctx"]
            got = aggregate(self.words, self.labels[col], lengths, docs, [(k[0], k[2][0]) for k in keys])
            out.update({k: got[k[0], k[2][0]] for k in keys})
        return out


def not_a_number(key, text, source, line=None):
    """The error of a %num field that is not a finite decimal number, at its file and line."""
    from crftk.errors import shown
    what = "the line has no such column" if text is None else f"{shown(text)} is not a finite decimal number"
    return CrftkError(f"%num reads column {key[1]}: {what}", source, line)


def _joined(parts):
    """{key: the arrays of each part concatenated}, or None without keys."""
    return {k: np.concatenate(v) if v else np.zeros(0, np.int64 if k[0] == "vec" else np.float64)
            for k, v in parts.items()} or None


def load_lexicons(template):
    """Read the lexicon files a template declares; a file that cannot be opened is an error at
    the template's @lexicon line (commands call this before any work, so that a missing
    lexicon is not found after minutes of training)."""
    out = {}
    for name, (path, icase) in template.lexicons.items():
        try:
            open(path, "rb").close()
        except OSError as e:
            shown_path = os.path.normpath(path)    # templates/../lex/X.lex as lex/X.lex, unless a link
            if os.path.realpath(shown_path) != os.path.realpath(path):     # makes them differ
                shown_path = path
            if isinstance(e, FileNotFoundError):
                what = (f"lexicon {name}: {shown_path} not found (build it from labeled data with "
                        f"crftk lexicon -o {os.path.dirname(shown_path) or '.'} LABELED_FILE...)")
            else:
                what = f"lexicon {name}: cannot open {shown_path} ({e.strerror or e})"
            raise CrftkError(what, template.path, template.lexicon_lines.get(name)) from None
        out[name] = Lexicon.read(path, name=name, ignore_case=icase)
    return out
