"""Real-valued template macros (%num, %vec): parsing, the encoding of both read paths against a
small Python reference, word vector files, and the model round trip of their tables."""

import random
import re

import numpy as np
import pytest

from crftk.errors import CrftkError, UsageError
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.features.vectors import VectorTable, attach_vectors
from crftk.io.conll import iter_corpus, read_batches, read_corpus

WORDS = ["the", "The", "cat", "Cat", "sat", "é", "Éa", "naïve", "unk", "1997"]
VECTOR_WORDS = ["the", "cat", "sat", "é", "éa", "1997", "Naïve"]

TEMPLATE = """U00:%x[0,0]
U01:%num[0,1]
U02:%x[-1,0]/%x[0,2]
U03:%vec[0,0,emb]
U04:%num[-1,1]
U05:%vec[1,0,emb]
U06:%shape[0,0]
B
"""


def _corpus(rng, n_sents):
    lines = []
    for _ in range(n_sents):
        for _ in range(rng.randint(1, 6)):
            num = rng.choice(["0", "1.5", "-2", "3e-1", ".25", "+7.", "1E2", "-0.0"])
            lines.append(f"{rng.choice(WORDS)} {num} {rng.choice(['NN', 'VB'])} {rng.choice(['B-NP', 'O'])}")
        lines.append("")
    return "\n".join(lines) + "\n"


def _vector_file(path, dim=3, header=True, seed=0):
    rng = np.random.default_rng(seed)
    table = rng.normal(size=(len(VECTOR_WORDS), dim)).astype(np.float32)
    rows = [f"{len(VECTOR_WORDS)} {dim}"] if header else []
    rows += [w + " " + " ".join(repr(float(v)) for v in row) for w, row in zip(VECTOR_WORDS, table)]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return table


def _reference(space, sentences, table, lookup):
    """{token: {attribute id: value}} of the real-valued lines, from the sentences' strings."""
    index = {w: i for i, w in enumerate(VECTOR_WORDS)}
    out, t = {}, 0
    lines = {cl.line.text: cl for cl in space.unigram_lines}
    for s in sentences:
        n = len(s.rows)
        for i in range(n):
            got = {}
            for text, cl in lines.items():
                m = cl.line.real
                if m is None or not 0 <= i + m.row < n:
                    continue
                value = s.rows[i + m.row][m.col]
                if m.kind == "num":
                    vals = {0: float(value)}
                else:
                    row = index.get(value, index.get(value.lower()) if lookup == "lowercase" else None)
                    if row is None:
                        continue
                    vals = dict(enumerate(table[row].astype(np.float64)))
                for k, v in vals.items():
                    rank = np.searchsorted(cl.keys, k)
                    if rank < cl.keys.size and cl.keys[rank] == k:
                        got[cl.offset + int(rank)] = v
            out[t] = got
            t += 1
    return out


def _real_entries(space, corpus):
    """{token: {attribute id: value}} of the corpus's real-valued attributes."""
    real_ids = set()
    for cl in space.unigram_lines:
        if cl.line.real is not None:
            real_ids.update(range(cl.offset, cl.offset + cl.size))
    out = {}
    for t in range(corpus.n_tokens):
        a, b = corpus.attr_ptr[t], corpus.attr_ptr[t + 1]
        out[t] = {int(k): float(v) for k, v in zip(corpus.attrs[a:b], corpus.values[a:b]) if k in real_ids}
    return out


@pytest.fixture
def data(tmp_path):
    rng = random.Random(3)
    train = tmp_path / "train.txt"
    train.write_text(_corpus(rng, 40), encoding="utf-8")
    test = tmp_path / "test.txt"
    test.write_text(_corpus(rng, 15), encoding="utf-8")
    vec = tmp_path / "emb.txt"
    table = _vector_file(vec)
    return train, test, vec, table


@pytest.mark.parametrize("lookup", ["exact", "lowercase"])
def test_both_read_paths_encode_as_the_reference(data, lookup):
    train, test, vec, table = data
    template = attach_vectors(parse_template(TEMPLATE), {"emb": str(vec)}, lookup)
    sents = list(iter_corpus(str(train)))
    space, corpus = FeatureSpace.fit(iter_corpus(str(train)), template)        # compiled batches
    space_s, corpus_s = FeatureSpace.fit(sents, template)                      # Sentence objects
    for name in ("attr_ptr", "attrs", "values", "eattrs", "labels"):
        assert np.array_equal(getattr(corpus, name), getattr(corpus_s, name)), name
    assert corpus.values.dtype == np.float64 and corpus.values.shape == corpus.attrs.shape
    assert _real_entries(space, corpus) == _reference(space, sents, table, lookup)
    # binary attributes keep the value 1
    binary = np.ones(corpus.attrs.size, bool)
    for cl in space.unigram_lines:
        if cl.line.real is not None:
            binary &= ~((corpus.attrs >= cl.offset) & (corpus.attrs < cl.offset + cl.size))
    assert np.all(corpus.values[binary] == 1) and binary.sum() > 0

    # tagging: the compiled batch encoder, the values path and the Sentence path agree
    test_sents = read_corpus(str(test))
    enc = space.encode(test_sents)
    assert _real_entries(space, enc) == _reference(space, test_sents, table, lookup)
    assert space.raw_readable()
    batches = list(read_batches(str(test)))
    raw = [space.encode_raw(b) for b in batches]
    assert np.array_equal(np.concatenate([r.attrs for r in raw]), enc.attrs)
    assert np.array_equal(np.concatenate([r.values for r in raw]), enc.values)
    vals = space.raw_values(batches[0])
    from crftk.features.space import Positions
    via_values = space.encode_values(vals, Positions(vals.lengths))
    assert np.array_equal(via_values.values, raw[0].values) and np.array_equal(via_values.attrs, raw[0].attrs)


def test_vec_words_unseen_in_training_get_their_vectors(data, tmp_path):
    train, _, vec, table = data
    template = attach_vectors(parse_template("U:%vec[0,0,emb]\nU1:%x[0,0]\n"), {"emb": str(vec)})
    space, _ = FeatureSpace.fit(iter_corpus(str(train)), template)
    new = tmp_path / "new.txt"
    new.write_text("Naïve 1 NN O\nzzz 1 NN O\n", encoding="utf-8")
    enc = space.encode(read_corpus(str(new)))
    assert np.allclose(enc.values[:enc.attr_ptr[1]], table[VECTOR_WORDS.index("Naïve")])
    assert enc.attr_ptr[2] - enc.attr_ptr[1] == 0          # no vector, unseen word: nothing
    raw = space.encode_raw(next(read_batches(str(new))))
    assert np.array_equal(raw.values, enc.values) and np.array_equal(raw.attrs, enc.attrs)


def test_binary_templates_store_no_values(data):
    train = data[0]
    space, corpus = FeatureSpace.fit(iter_corpus(str(train)), parse_template("U:%x[0,0]\nU2:%shape[0,0]\nB\n"))
    assert corpus.values is None
    assert space.encode(read_corpus(str(train))).values is None
    assert space.raw_readable() and space.encode_raw(next(read_batches(str(train)))).values is None
    meta, arrays = space.to_arrays()
    assert "vectors" not in meta and not any(k.startswith("vectors.") for k in arrays)


def test_min_freq_counts_real_attributes(data):
    train = data[0]
    template = parse_template("U:%num[0,1]\nU2:%num[-3,1]\n")
    n = sum(1 for _ in open(train) if _.strip())
    space, corpus = FeatureSpace.fit(iter_corpus(str(train)), template, min_freq=n)
    assert space.n_attrs == 1            # %num[0,1] fires on every token, %num[-3,1] on fewer
    assert np.array_equal(np.diff(corpus.attr_ptr), np.ones(corpus.n_tokens))


@pytest.mark.parametrize("text,message", [
    ("B01:%num[0,1]\n", "belongs on a U line"),
    ("*01:%num[0,1]\n", "belongs on a U line"),
    ("U01:%num[0,1]/%x[0,0]\n", "the only macro"),
    ("U01:%^num[0,1]\n", "first-mention"),
    ("U01:%vec[0,0]\n", "expected %vec[row,col,NAME]"),
    ("U01:%num[0,1,2]\n", "expected %num[row,col]"),
    ("U01:%vec[0,0,\"emb\"]\n", "expected %vec[row,col,NAME]"),
])
def test_template_errors(text, message):
    with pytest.raises(CrftkError, match=re.escape(message)) as e:
        parse_template("U00:%x[0,0]\n" + text, "t.tmpl")
    assert e.value.line == 2


def test_macro_text_and_dump_names(data):
    train, _, vec, _ = data
    t = parse_template("U1:%num[-1,1]\nU2:%vec[2,0,emb]\n")
    assert [str(m) for m in t.macros] == ["%num[-1,1]", "%vec[2,0,emb]"]
    assert t.columns == [0, 1] and t.vocab_columns == [] and t.vector_lines == {"emb": 2}
    attach_vectors(t, {"emb": str(vec)})
    space, _ = FeatureSpace.fit(iter_corpus(str(train)), t)
    assert space.attribute_strings() == ["U1:%num[-1,1]"] + [f"U2:%vec[2,0,emb][{d}]" for d in range(3)]


def test_not_a_number_names_file_and_line(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("a 1 O\nb 2 O\n\nc nan O\n", encoding="utf-8")
    t = parse_template("U:%num[0,1]\n")
    for sentences in (iter_corpus(str(p)), list(iter_corpus(str(p)))):
        with pytest.raises(CrftkError, match="'nan' is not a finite decimal number") as e:
            FeatureSpace.fit(sentences, t)
        assert (e.value.path, e.value.line) == (str(p), 4)
    space, _ = FeatureSpace.fit(iter_corpus(_write(tmp_path / "ok.txt", "a 1 O\n")), t)
    for encode in (lambda: space.encode(read_corpus(str(p))),
                   lambda: [space.encode_raw(b) for b in read_batches(str(p))]):
        with pytest.raises(CrftkError, match="is not a finite") as e:
            encode()
        assert (e.value.path, e.value.line) == (str(p), 4)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("content,message,line", [
    ("2 3\na 1 2 3\nb 1 2\n", "2 values where the vectors have 3", 3),
    ("a 1 2 3\nb 1 2 3 4\n", "4 values where the vectors have 3", 2),
    ("3 2\na 1 2\nb 1 2\n", "the header says 3 vectors, the file has 2", None),
    ("a 1 x\n", "'x' is not a number", 1),
    ("a 1 inf\n", "not finite", 1),
    ("", "has no vectors", None),
])
def test_vector_file_errors(tmp_path, content, message, line):
    p = tmp_path / "v.txt"
    p.write_text(content, encoding="utf-8")
    with pytest.raises(CrftkError, match=message) as e:
        VectorTable.read(str(p), "emb")
    assert (e.value.path, e.value.line) == (str(p), line)


def test_vector_file_without_header_and_duplicates(tmp_path):
    p = tmp_path / "v.txt"
    p.write_text("a 1 2\nb 3 4\na 5 6\n", encoding="utf-8")
    vt = VectorTable.read(str(p), "emb")
    assert vt.dim == 2 and vt.words == ["a", "b", "a"]
    assert np.array_equal(vt.table[vt.rows(["a", "b", "c"])[:2]], [[1, 2], [3, 4]])   # the first 'a' wins
    assert vt.rows(["c"])[0] == -1


def test_attach_vectors_errors_and_warning(tmp_path, data):
    vec = data[2]
    t = parse_template("U:%vec[0,0,emb]\n", "t.tmpl")
    with pytest.raises(CrftkError, match="vectors emb, which are not given") as e:
        attach_vectors(t, {})
    assert (e.value.path, e.value.line) == ("t.tmpl", 1)
    with pytest.raises(CrftkError, match="no such file"):
        attach_vectors(t, {"emb": str(tmp_path / "missing.txt")})
    with pytest.raises(UsageError, match="NAME=FILE"):
        attach_vectors(t, ["emb"])
    logged = []
    attach_vectors(t, [f"emb={vec}", f"other={vec}"], log=logged.append)
    assert len(logged) == 1 and "--vectors other is not read" in logged[0]
    assert set(t.vectors) == {"emb"}
    with pytest.raises(CrftkError, match="vectors emb, which are not given"):
        FeatureSpace.fit(list(iter_corpus(str(data[0]))), parse_template("U:%vec[0,0,emb]\n"))


def test_model_round_trip_of_vector_tables(data, tmp_path):
    train, test, vec, table = data
    template = attach_vectors(parse_template(TEMPLATE), {"emb": str(vec)}, "lowercase")
    space, _ = FeatureSpace.fit(iter_corpus(str(train)), template)
    meta, arrays = space.to_arrays()
    assert meta["vectors"] == {"emb": {"dim": 3, "lookup": "lowercase"}}
    assert arrays["vectors.emb.table"].dtype == np.float32 and arrays["vectors.emb.table"].ndim == 1
    loaded = FeatureSpace.from_arrays(meta, arrays)
    vt = loaded.extractor.vectors["emb"]
    assert vt.words == VECTOR_WORDS and np.array_equal(vt.table, table) and vt.lookup == "lowercase"
    sents = read_corpus(str(test))
    a, b = space.encode(sents), loaded.encode(sents)
    assert np.array_equal(a.attrs, b.attrs) and np.array_equal(a.values, b.values)
    # a file whose template reads vectors it does not hold, or with a table of the wrong shape
    bad = dict(meta)
    bad["vectors"] = {}
    with pytest.raises(CrftkError, match="uses vectors 'emb', which the file does not hold"):
        FeatureSpace.from_arrays(bad, arrays, "m")
    bad_arrays = dict(arrays)
    bad_arrays["vectors.emb.table"] = table[:, :2].reshape(-1).copy()
    with pytest.raises(CrftkError, match="not 7 finite float32 rows of 3"):
        FeatureSpace.from_arrays(meta, bad_arrays, "m")


def test_api_trains_and_tags_with_vectors(data, tmp_path):
    import pickle

    import crftk
    train, test, vec, _ = data
    sents = read_corpus(str(train))
    X = [[row[:-1] for row in s.rows] for s in sents]
    y = [[row[-1] for row in s.rows] for s in sents]
    crf = crftk.CRF(TEMPLATE, vectors={"emb": str(vec)}, max_iter=3, threads=1).fit(X, y)
    assert "vectors" in crf.model_.summary()
    pred = crf.predict(X)
    path = tmp_path / "m.model"
    crf.save(str(path))
    again = crftk.CRF.load(str(path))
    assert again.predict(X) == pred
    assert pickle.loads(pickle.dumps(crf)).predict(X) == pred
    with pytest.raises(CrftkError, match="vectors emb, which are not given"):
        crftk.CRF(TEMPLATE, max_iter=1).fit(X, y)
    with pytest.raises(CrftkError, match="vectors_lookup must be one of"):
        crftk.CRF(TEMPLATE, vectors={"emb": str(vec)}, vectors_lookup="fuzzy", max_iter=1).fit(X, y)


@pytest.mark.parametrize("text", ["1", "-2.5", ".5", "5.", "+3e-2", "1E5", "00012", "-0", "0.1", "123456789.123456789e-3",
                                  "9" * 80 + ".5", "nan", "inf", "-Infinity", "1_0", "0x10", "1e", "e5", ".", "-", "+.e1",
                                  "1,5", "\u0661", "1e400", "1.5.2", "--1", "1e+", "1e-7x"])
def test_compiled_numbers_agree_with_python(text):
    from crftk import _encode
    from crftk.features.extract import NUMBER
    data = f"{text} O".encode("utf-8")
    got, bad = _encode.parse_numbers(np.frombuffer(data, dtype=np.uint8), np.array([0], dtype=np.int64),
                                     np.array([len(data)], dtype=np.int64), 0)
    ok = NUMBER.fullmatch(text) is not None and np.isfinite(float(text))
    assert (bad == -1) == ok
    if ok:
        assert got[0] == float(text)


def test_vector_file_with_a_byte_order_mark_reads_its_header(tmp_path):
    p = tmp_path / "v.txt"
    p.write_bytes("\ufeff2 3\na 1 2 3\nb 4 5 6\n".encode("utf-8"))      # the header was a 1-d vector before
    vt = VectorTable.read(str(p), "emb")
    assert vt.words == ["a", "b"] and vt.table.tolist() == [[1, 2, 3], [4, 5, 6]]


def test_vector_file_read_in_blocks_keeps_rows_and_lines(tmp_path, monkeypatch):
    from crftk.features import vectors
    monkeypatch.setattr(vectors._Rows, "BLOCK_VALUES", 6)         # a block every 2 rows of 3
    rows = [[i, -i / 4, 1e3 * i] for i in range(7)]
    p = tmp_path / "v.txt"
    p.write_text("".join(f"w{i}\t{a} {b}  {c}\n" for i, (a, b, c) in enumerate(rows)) + "\n")
    vt = VectorTable.read(str(p), "emb")
    assert vt.words == [f"w{i}" for i in range(7)] and vt.table.dtype == np.float32
    assert vt.table.tolist() == rows
    for bad, message in (("1_x", "'1_x' is not a number"), ("nan", "not finite"), ("1e39", "beyond float32")):
        p.write_text("".join(f"w{i} 1 2 {bad if i == 4 else 3}\n" for i in range(7)))
        with pytest.raises(CrftkError, match=message) as e:
            VectorTable.read(str(p), "emb")
        assert e.value.line == 5
    p.write_text("a 1_0 2 3\n")                                  # float() takes it, strtod does not
    assert VectorTable.read(str(p), "emb").table.tolist() == [[10, 2, 3]]
