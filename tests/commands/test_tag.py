import io

import numpy as np
import pytest

from corpora import random_corpus
from crftk.commands.tag import Tagger, tag_files
from crftk.features.space import FeatureSpace
from crftk.model import Model
from crftk.features.templates import parse_template


@pytest.fixture(scope="module")
def model():
    space, corpus = FeatureSpace.fit(random_corpus(60, seed=1), parse_template("U:%x[0,0]\nU1:%x[0,1]\nB\n"))
    w = np.random.default_rng(0).normal(size=space.n_params)
    return Model(space, w)


def write(path, sents, drop_label=False):
    path.write_text("".join("\n".join(" ".join(r[:-1] if drop_label else r) for r in s.rows) + "\n\n"
                            for s in sents))
    return str(path)


def blocks(text):
    return [b.splitlines() for b in text.strip("\n").split("\n\n")]


def test_tag_appends_viterbi_labels(model, tmp_path):
    sents = random_corpus(25, seed=2)
    out = io.StringIO()
    n_sent, n_tok = tag_files(model, [write(tmp_path / "t", sents)], out)
    assert (n_sent, n_tok) == (25, sum(len(s) for s in sents))
    want = Tagger(model, threads=1).tag(sents)
    got = [[line.split()[-1] for line in b] for b in blocks(out.getvalue())]
    assert got == want
    first = blocks(out.getvalue())[0][0].split()
    assert first[:3] == sents[0].rows[0]


def test_small_batches_give_the_same_output(model, tmp_path):
    path = write(tmp_path / "t", random_corpus(40, seed=3))
    a, b = io.StringIO(), io.StringIO()
    tag_files(model, [path], a)
    tag_files(model, [path], b, batch_tokens=5)
    assert a.getvalue() == b.getvalue()


def test_input_without_gold_column(model, tmp_path):
    sents = random_corpus(10, seed=4)
    out = io.StringIO()
    tag_files(model, [write(tmp_path / "t", sents, drop_label=True)], out)
    rows = [line.split() for b in blocks(out.getvalue()) for line in b]
    assert all(len(r) == 3 for r in rows)


def test_marginals_output(model, tmp_path):
    sents = random_corpus(10, seed=5)
    out = io.StringIO()
    tag_files(model, [write(tmp_path / "t", sents)], out, marginals=2)
    corpus = model.space.encode(sents)
    marg, logz = model.space.lattices(corpus).marginals(model.weights)
    pred, score = model.space.lattices(corpus).viterbi(model.weights)
    k = 0
    for i, b in enumerate(blocks(out.getvalue())):
        assert b[0].startswith("# prob ")
        assert float(b[0].split()[2]) == pytest.approx(np.exp(score[i] - logz[i]), abs=1e-6)
        for line in b[1:]:
            cols = line.split()
            assert cols[3] == model.labels[pred[k]]
            assert float(cols[4]) == pytest.approx(marg[k, pred[k]], abs=1e-6)
            probs = [float(c.split("/")[-1]) for c in cols[5:]]
            assert sum(probs) == pytest.approx(1.0, abs=1e-5)
            k += 1


def test_nbest_output(model, tmp_path):
    sents = random_corpus(6, seed=6, max_len=3)
    out = io.StringIO()
    tag_files(model, [write(tmp_path / "t", sents)], out, nbest=4)
    bl = blocks(out.getvalue())
    probs = [float(b[0].split()[3]) for b in bl]
    heads = [b[0].split()[:3] for b in bl]
    assert heads[:2] == [["#", "nbest", "0"], ["#", "nbest", "1"]]
    # within each sentence probabilities do not increase and the first labeling is Viterbi's
    first = Tagger(model).tag(sents)
    i = 0
    for s, labels in zip(sents, first):
        n = min(4, 3 ** len(s))
        assert probs[i:i + n] == sorted(probs[i:i + n], reverse=True)
        assert [line.split()[-1] for line in bl[i][1:]] == labels
        i += n
    assert i == len(bl)


def test_nbest_with_marginals_adds_each_labels_marginal(model, tmp_path):
    sents = random_corpus(4, seed=7, max_len=4)
    out = io.StringIO()
    tag_files(model, [write(tmp_path / "t", sents)], out, nbest=2, marginals=1)
    corpus = model.space.encode(sents)
    marg, _ = model.space.lattices(corpus).marginals(model.weights)
    index = {lab: i for i, lab in enumerate(model.labels)}
    bl = blocks(out.getvalue())
    start = 0
    for s in sents:
        for b in bl[:2]:
            for t, line in enumerate(b[1:]):
                cols = line.split()
                assert float(cols[4]) == pytest.approx(marg[start + t, index[cols[3]]], abs=1e-6)
        bl = bl[min(2, 3 ** len(s)):]
        start += len(s)


def test_first_mention_templates_tag_whole_documents_per_batch(tmp_path):
    from corpora import random_docs
    from crftk.io.conll import chunked
    docs = random_docs(6, seed=3, sents_per_doc=4)
    batches = list(chunked(iter(docs), max_tokens=5, by_document=True))
    assert [s for b in batches for s in b] == docs
    for b in batches[:-1]:
        assert b[-1].doc != batches[batches.index(b) + 1][0].doc
    space, _ = FeatureSpace.fit(docs, parse_template("U:%^x[-1,0]\nU1:%x[0,0]\nB\n"))
    m = Model(space, np.random.default_rng(1).normal(size=space.n_params))
    path = tmp_path / "d.txt"
    text = ""
    for i, s in enumerate(docs):
        if i == 0 or s.doc != docs[i - 1].doc:
            text += "-DOCSTART- X O\n\n"
        text += "\n".join(" ".join(r) for r in s.rows) + "\n\n"
    path.write_text(text)
    small, big = io.StringIO(), io.StringIO()
    tag_files(m, [str(path)], small, batch_tokens=3)
    tag_files(m, [str(path)], big)
    assert small.getvalue() == big.getvalue()
