"""Training's compiled read (FeatureSpace.fit over iter_corpus's RawBatch batches) against the
Sentence path: the same vocabularies, dictionaries, encoding and error messages."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crftk import _encode
from crftk.errors import CrftkError
from crftk.features import extract
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.io.conll import CorpusStream, Origins, iter_corpus

PLAIN = """U00:%x[-3,0]
U01:%x[0,0]
U02:%x[1,1]
U03:%x[-1,0]/%x[0,0]
U04:%x[-1,1]/%x[0,1]/%x[1,1]
U05:%x[-2,0]/%x[-1,1]/%x[0,0]/%x[2,1]
U06:const
B
B07:%x[0,1]/%x[-1,0]
"""

DERIVED = """U00:%X[0,0]/%x[1,1]
U01:%shape[0,0]
U02:%suf[0,0,2]/%x[-1,1]
U03:%ngram[-1,0,1,2]/%x[0,1]
U04:%^x[0,0]
U05:%^shape[1,0]/%x[0,1]
U06:%t[0,0,"^[A-Z]"]
B
"""

WORDS = ["the", "The", "Bush", "said", "1997", "ZZ-Top", "quux", "é", "naïve", "日本", "a\u00a0b", "#", "x_B-1",
         "_B-1", "_B+2", "-DOCSTART-x"]


def _corpus_text(rng, n_sents, n_columns=3, label_col=-1, crlf=False, bom=False, docstart=True):
    out = ["\ufeff" if bom else ""]
    for k in range(n_sents):
        if docstart and rng.random() < 0.15:
            out.append("-DOCSTART- -X- O\n\n")
        for _ in range(rng.randint(1, 8)):
            cols = [rng.choice(WORDS), rng.choice(["NN", "VB", "DT", "É"])]
            cols += [f"c{rng.randrange(3)}" for _ in range(n_columns - 3)]
            label = rng.choice(["B-NP", "I-NP", "O", "B-VP"])
            cols.insert(label_col % n_columns if label_col >= 0 else n_columns - 1, label)
            sep = rng.choice([" ", "\t", "  ", " \t"])
            out.append(sep.join(cols) + ("\r\n" if crlf else "\n"))
        out.append("\n" if rng.random() < 0.9 else " \t\n")
    return "".join(out)


def _arrays(space, corpus):
    meta, arrays = space.to_arrays()
    for name in ("sent_ptr", "attr_ptr", "attrs", "eattr_ptr", "eattrs", "labels"):
        arrays["corpus." + name] = getattr(corpus, name)
    return meta, arrays


def _assert_same(a, b):
    (meta_a, arr_a), (meta_b, arr_b) = a, b
    assert meta_a == meta_b
    assert sorted(arr_a) == sorted(arr_b)
    for key in arr_a:
        assert arr_a[key].dtype == arr_b[key].dtype, key
        assert np.array_equal(arr_a[key], arr_b[key]), key


def _both(paths, template, **kw):
    """(Sentence path, batch path) results; the batch path is checked to be the one taken."""
    ref = _arrays(*FeatureSpace.fit(list(iter_corpus(paths)), template, **kw))
    stream = iter_corpus(paths)
    assert isinstance(stream, CorpusStream)
    got = _arrays(*FeatureSpace.fit(stream, template, **kw))
    return ref, got


@pytest.fixture
def no_sentence_fit(monkeypatch):
    """Make the Sentence path fail, so that a test proves the batch path ran."""
    def refuse(self, sentences, label_col):
        raise AssertionError("the Sentence path ran")
    monkeypatch.setattr(extract.Extractor, "fit", refuse)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("text", [PLAIN, DERIVED])
def test_batch_fit_equals_sentence_fit(tmp_path, seed, text):
    rng = random.Random(seed)
    paths = []
    for i in range(1 + seed % 3):          # several files: documents numbered across them
        p = tmp_path / f"train{i}.txt"
        p.write_bytes(_corpus_text(rng, rng.randint(1, 40), crlf=seed == 1, bom=seed == 2).encode("utf-8"))
        paths.append(str(p))
    template = parse_template(text)
    for kw in ({}, {"min_freq": 2}, {"feature_set": "complete"}):
        ref, got = _both(paths, template, **kw)
        _assert_same(ref, got)


def test_batch_path_is_taken_and_label_column_in_the_middle(tmp_path, no_sentence_fit):
    rng = random.Random(5)
    p = tmp_path / "t.txt"
    p.write_text(_corpus_text(rng, 30, n_columns=4, label_col=1), encoding="utf-8")
    template = parse_template("U0:%x[0,0]/%x[1,2]\nU1:%x[-1,3]\nB\n")
    space, corpus = FeatureSpace.fit(iter_corpus(str(p)), template, label_col=1)
    assert space.label_col == 1 and space.n_columns == 4
    with pytest.raises(AssertionError, match="Sentence path"):
        FeatureSpace.fit(list(iter_corpus(str(p))), template, label_col=1)


def test_the_two_paths_agree_with_the_label_column_in_the_middle(tmp_path):
    rng = random.Random(6)
    p = tmp_path / "t.txt"
    p.write_text(_corpus_text(rng, 30, n_columns=4, label_col=1), encoding="utf-8")
    template = parse_template("U0:%x[0,0]/%x[1,2]\nU1:%x[-1,3]\nU2:%x[1,0]/%x[0,2]/%x[-1,3]\nB\n")
    ref, got = _both([str(p)], template, label_col=1)
    _assert_same(ref, got)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 25), block=st.sampled_from([PLAIN, DERIVED]))
def test_fuzzed_corpora_fit_alike(tmp_path_factory, seed, n, block):
    rng = random.Random(seed)
    p = tmp_path_factory.mktemp("fit") / "t.txt"
    p.write_bytes(_corpus_text(rng, n, crlf=rng.random() < 0.3, bom=rng.random() < 0.3).encode("utf-8"))
    ref, got = _both([str(p)], parse_template(block), min_freq=rng.choice([1, 1, 2]))
    _assert_same(ref, got)


def test_lexicon_templates_read_sentences(tmp_path, monkeypatch):
    lex = tmp_path / "lex.txt"
    lex.write_text("Bush\n", encoding="utf-8")
    template = parse_template(f"@lexicon L {lex}\nU0:%lex[0,L]\nU1:%x[0,0]\nB\n")
    assert not extract.Extractor(template, {}).can_fit_batches()
    p = tmp_path / "t.txt"
    p.write_text("Bush NN B-NP\nsaid VB O\n\n", encoding="utf-8")
    called = []
    monkeypatch.setattr(extract.Extractor, "fit_batches", lambda *a: called.append(1))
    space, corpus = FeatureSpace.fit(iter_corpus(str(p)), template)
    assert not called and corpus.n_tokens == 2


@pytest.mark.parametrize("data, message, line", [
    (b"a NN B\nb NN\n\n", "expected 3 columns", 2),
    (b"a NN B\n\xff NN B\n\n", "not valid UTF-8", 2),
    (b"a\n\n", "at least two columns", 1),
    (b"-DOCSTART- -X- O\n\n", "no training sentences", None),
    (b"", "no training sentences", None),
])
def test_errors_name_file_and_line_as_the_sentence_path_does(tmp_path, data, message, line):
    p = tmp_path / "t.txt"
    p.write_bytes(data)
    template = parse_template("U0:%x[0,0]\nB\n")
    errors = []
    for corpus in (list, lambda s: s):
        with pytest.raises(CrftkError) as e:
            FeatureSpace.fit(corpus(iter_corpus(str(p))), template, path=str(p))
        errors.append((e.value.message, e.value.path, e.value.line))
    assert errors[0] == errors[1]
    assert message in errors[0][0] and errors[0][2] == line


def test_origins_locate_the_same_lines_either_way(tmp_path):
    rng = random.Random(3)
    paths = []
    for i in range(2):
        p = tmp_path / f"t{i}.txt"
        p.write_text(_corpus_text(rng, 12), encoding="utf-8")
        paths.append(str(p))
    by_sentence, by_batch = Origins(), Origins()
    n = sum(1 for _ in by_sentence.record(list(iter_corpus(paths))))
    stream = by_batch.record(iter_corpus(paths))
    assert sum(b.n_sentences for b in stream.batches(batch_tokens=7)) == n
    for k in range(n):
        assert by_sentence.locate(k, 1) == by_batch.locate(k, 1)
    assert by_batch.locate(n - 1)[0] == paths[1]


def test_a_stream_is_read_once(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("a NN B\n\n", encoding="utf-8")
    stream = iter_corpus(str(p))
    assert [s.rows for s in stream] == [[["a", "NN", "B"]]]
    with pytest.raises(RuntimeError):
        next(stream.batches())


def test_trained_weights_are_identical_either_way(tmp_path):
    from crftk.commands.train import fit
    rng = random.Random(11)
    p = tmp_path / "t.txt"
    p.write_text(_corpus_text(rng, 60), encoding="utf-8")
    template = parse_template(PLAIN)
    models = [fit(read(iter_corpus(str(p))), template, max_iter=8, threads=1, log=lambda m: None)
              for read in (list, lambda s: s)]
    assert models[0].weights.tobytes() == models[1].weights.tobytes()
    _assert_same(models[0].space.to_arrays() + (), models[1].space.to_arrays())


def test_unique_inverse_is_numpy_unique():
    rng = np.random.default_rng(0)
    for n, hi in ((0, 5), (1, 5), (1000, 7), (5000, 10**12), (3000, 2)):
        keys = rng.integers(-3, hi, size=n).astype(np.int64)
        uniq, inverse, counts = _encode.unique_inverse(keys)
        ref_u, ref_i, ref_c = np.unique(keys[keys >= 0], return_inverse=True, return_counts=True)
        assert np.array_equal(uniq, ref_u) and np.array_equal(counts, ref_c)
        assert np.array_equal(inverse[keys >= 0], ref_i.reshape(-1)) and np.all(inverse[keys < 0] == -1)


def test_interner_numbers_by_first_appearance_after_its_seeds():
    words = ["b", "a", "b", "日本", "", "c", "a"] + [f"w{i}" for i in range(20000)]
    seeded = _encode.Interner(["_B-1", "a"])
    block = "\n".join(f"{w} x" if w else "x" for w in words).encode("utf-8")
    starts, ends, pos = [], [], 0
    for line in block.split(b"\n"):
        starts.append(pos)
        ends.append(pos + len(line))
        pos += len(line) + 1
    ids = _encode.column_ids(block, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64),
                                 [0], [seeded])
    vocab = extract.Vocab(["_B-1", "a"])
    expect = vocab.add_ids([w if w else "x" for w in words])
    assert ids[:, 0].tolist() == expect
    assert seeded.strings() == vocab.strings and len(seeded) == len(vocab)


def test_merge_csr_puts_dense_ids_then_extras_in_line_order():
    rng = np.random.default_rng(1)
    for n in (0, 1, 7, 300):
        dense_counts = rng.integers(0, 4, n).astype(np.int64)
        dense_ids = rng.integers(0, 1000, int(dense_counts.sum())).astype(np.int32)
        owners = [rng.integers(0, max(n, 1), rng.integers(0, 3 * n + 1)) if n else np.zeros(0, np.int64)
                  for _ in range(3)]
        extras = [rng.integers(0, 1000, o.size).astype(np.int32) for o in owners]
        ptr, ids = _encode.merge_csr(dense_counts, dense_ids, owners, extras)
        expect, k = [], 0
        for t in range(n):
            row = dense_ids[k:k + dense_counts[t]].tolist()
            k += int(dense_counts[t])
            for own, ext in zip(owners, extras):
                row += ext[own == t].tolist()
            expect.append(row)
        assert [ids[ptr[t]:ptr[t + 1]].tolist() for t in range(n)] == expect
        assert ptr.dtype == np.int32 and ptr[0] == 0 and ptr[-1] == ids.size
