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
        values = [test(s) for s in self.vocabs[key[1]].strings]
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

    @staticmethod
    def unseen_words(unseen, strings):
        """(unseen, distinct words, the word of each unseen token) of a column's value
        ``strings`` at its ``unseen`` tokens: what :meth:`test_ids` takes."""
        local = Vocab()
        return unseen, local.strings, np.array(local.add_ids(strings), dtype=np.int64)

    def test_ids(self, key, col_ids, unseen):
        """Value ids of a derived source: ``col_ids`` the column's ids per token (-1: unseen),
        ``unseen`` its :meth:`unseen_words`; (ptr, ids) CSR arrays for a multi-valued test."""
        if key[0] in MULTI:
            return self._multi_test_ids(key, col_ids, *unseen)
        return self._single_test_ids(key, col_ids, *unseen)

    def _multi_test_ids(self, key, col_ids, where, words, inverse):
        """(ptr, ids) of a multi-valued test: the lists of the table over the vocabulary for the
        known words, the test's on the distinct unseen ``words``, in token order."""
        test, vocab, (ptr, vals) = self.tests[key], self.vocabs[key], self._table(key)
        known = col_ids >= 0
        safe = np.where(known, col_ids, 0)
        w_ptr, w_vals = _csr([[i for i in vocab.ids(test(w)).tolist() if i >= 0] for w in words])
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

    def _single_test_ids(self, key, col_ids, where, words, inverse):
        """Ids of a single-valued test: the table over the vocabulary for the known words, the
        test itself on the distinct unseen ``words`` (inverse: the word of each unseen token)."""
        known = col_ids >= 0
        out = np.where(known, self._table(key)[np.where(known, col_ids, 0)], -1)
        if where.size:
            out[where] = self.vocabs[key].ids([self.tests[key](w) for w in words])[inverse]
        return out

    def values(self, sentences, label_col=None):
        """Value ids of a batch with the frozen vocabularies (unseen values are -1)."""
        lengths = np.fromiter((len(s.rows) for s in sentences), dtype=np.int64, count=len(sentences))
        strings = {c: [row[c] for s in sentences for row in s.rows] for c in self.columns}
        single = {c: self.vocabs[c].ids(strings[c]) for c in self.columns}
        multi = {}
        unseen = {}       # column -> (unseen token positions, their distinct words, word of each)
        for k in self.tests:
            c = k[1]
            if c not in unseen:
                where = np.flatnonzero(single[c] < 0)
                unseen[c] = self.unseen_words(where, [strings[c][i] for i in where.tolist()])
            (multi if k[0] in MULTI else single)[k] = self.test_ids(k, single[c], unseen[c])
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
            # words: the vocabulary's ids, and new ids past its end for unseen words
            vocab = self.vocabs[0]
            word_ids = single[0].copy()
            unseen = np.flatnonzero(word_ids < 0)
            local = Vocab()
            word_ids[unseen] = len(vocab) + np.array(local.add_ids([strings[0][i] for i in unseen.tolist()]),
                                                     dtype=np.int64)
            if "capitalized" not in self._tables:
                self._tables["capitalized"] = _capitalized(vocab.strings)
            capitalized = np.concatenate([self._tables["capitalized"], _capitalized(local.strings)])
            docs = np.repeat(np.fromiter((s.doc for s in sentences), dtype=np.int64,
                                         count=len(sentences)), lengths)
            anchor = anchors(word_ids, docs, capitalized[word_ids])
        labels = None
        if label_col is not None:
            labels = [row[label_col] for s in sentences for row in s.rows]
        reals = {k: self.sentence_reals(k, sentences) for k in self.reals} or None
        return Values(single, multi, anchor, lengths, labels, reals)


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
