import io

import numpy as np
import pytest

from corpora import random_corpus
from crftk.commands.tag import Tagger, tag_files
from crftk.features.space import FeatureSpace
from crftk.model import Model
from crftk.features.templates import parse_template
from crftk.structures.chain import chain_lattices


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
    marg, logz = chain_lattices(model.space, corpus).marginals(model.weights)
    pred, score = chain_lattices(model.space, corpus).viterbi(model.weights)
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
    marg, _ = chain_lattices(model.space, corpus).marginals(model.weights)
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


# A POS tagger trained on `word tag label` with the tag (column 1) as its label reads column 0
# only: it tags the words alone, or the words and the gold tag, as it tags the training layout.
WORDS_TEMPLATE = "U:%x[0,0]\nU1:%x[-1,0]/%x[0,0]\nUs:%shape[0,0]\nUp:%suf[0,0,1]\nB\n"


@pytest.fixture(scope="module")
def words_tagger():
    space, _ = FeatureSpace.fit(random_corpus(60, seed=11), parse_template(WORDS_TEMPLATE), label_col=1)
    return Model(space, np.random.default_rng(3).normal(size=space.n_params))


def _labels(text):
    """The appended label of every token line (the last column, or the one before a -v probability)."""
    rows = [line.split() for line in text.splitlines() if line and not line.startswith("#")]
    return [r[-2] if r[-1][0].isdigit() else r[-1] for r in rows], {len(r) for r in rows}


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("opts", [{}, {"marginals": 1}, {"nbest": 2}], ids=["labels", "-v", "-n"])
def test_a_model_that_reads_the_words_only_tags_the_words_alone(words_tagger, tmp_path, monkeypatch, compiled,
                                                               opts):
    from crftk.kinds import chain as tag_module
    sents = random_corpus(15, seed=12)
    paths = {}
    for width in (1, 2, 3):
        paths[width] = tmp_path / f"w{width}.txt"
        paths[width].write_text("".join("\n".join(" ".join(r[:width]) for r in s.rows) + "\n\n" for s in sents))
    outputs = {}
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(tag_module, "_compiled_path", lambda tagger: False)
        for width, path in paths.items():
            out = io.StringIO()
            assert tag_files(words_tagger, [str(path)], out, **opts)[0] == 15
            outputs[width] = out.getvalue()
    want = [x for labels in Tagger(words_tagger).tag(sents) for x in labels]
    for width, text in outputs.items():
        labels, widths = _labels(text)
        assert widths == {width + 1 + ("marginals" in opts)}
        if "nbest" not in opts:
            assert labels == want
    assert outputs[1].count("# ") == outputs[3].count("# ")
    assert _labels(outputs[1])[0] == _labels(outputs[2])[0] == _labels(outputs[3])[0]


def test_too_few_columns_say_which_columns_the_model_reads(model, tmp_path, monkeypatch):
    from crftk.kinds import chain as tag_module
    from crftk.errors import CrftkError
    path = tmp_path / "words.txt"
    path.write_text("w1\nw2\n\n")
    for compiled in (True, False):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(tag_module, "_compiled_path", lambda tagger: False)
            with pytest.raises(CrftkError) as e:
                tag_files(model, [str(path)], io.StringIO())
        assert (e.value.path, e.value.line) == (str(path), 1)
        assert e.value.message == ("expected at least 2 columns, found 1: the model reads columns 0 and 1 of "
                                   "the 3 it was trained on")


def test_a_bag_reads_the_columns_its_members_read(words_tagger, tmp_path):
    from crftk.ensemble.bag import Bag
    from crftk.errors import CrftkError
    sents = random_corpus(60, seed=11)
    members = [words_tagger]
    for i, text in enumerate(["U:%x[0,0]\nB\n", "U:%x[0,0]\nU2:%x[0,2]\nB\n"]):
        space, _ = FeatureSpace.fit(sents, parse_template(text), label_col=1)
        members.append(Model(space, np.random.default_rng(i).normal(size=space.n_params)))
    record = {"members": ["a", "b"], "combine": "seq-poe", "decode": "viterbi",
              "weights": {m: [0.6, 0.4] for m in ("seq-poe", "seq-mixture", "trans-mixture", "trans-poe")}}
    words = tmp_path / "words.txt"
    words.write_text("w1\nw2\n\n")
    bag = Bag(members[:2], ["a", "b"], record).to_model()
    out, probs = io.StringIO(), io.StringIO()
    tag_files(bag, [str(words)], out)                       # the compiled path
    tag_files(bag, [str(words)], probs, marginals=1)        # the Python path
    assert [len(line.split()) for line in out.getvalue().splitlines() if line] == [2, 2]
    assert _labels(out.getvalue())[0] == _labels(probs.getvalue())[0]
    with pytest.raises(CrftkError, match=r"expected at least 3 columns, found 1: the bag reads columns "
                                         r"0 and 2 of the 3 it was trained on"):
        tag_files(Bag([members[0], members[2]], ["a", "b"], record).to_model(), [str(words)], io.StringIO())


def test_a_fifo_input_is_read_once_not_consumed_by_the_checks(tmp_path):
    # the inputs are checked before any work; opening a FIFO for that took its writer's data
    # away, and the real read then waited for ever
    import os
    import subprocess
    import sys
    import threading
    from corpora import REPO
    model = tmp_path / "m.model"
    train = subprocess.run([sys.executable, "-m", "crftk.cli", "train", "-q", "-t",
                            str(REPO / "templates" / "chunking-pos0.tmpl"), "-m", str(model), "--max-iter", "3",
                            "-p", "1", str(REPO / "data" / "demo.test")], capture_output=True, text=True)
    assert train.returncode == 0, train.stderr
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    text = (REPO / "data" / "demo.test").read_text()[:5000].rsplit("\n\n", 1)[0] + "\n\n"

    def feed():
        with open(fifo, "w") as f:
            f.write(text)

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    out = tmp_path / "out.txt"
    try:
        run = subprocess.run([sys.executable, "-m", "crftk.cli", "tag", "-m", str(model), "-o", str(out), str(fifo)],
                             capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        with open(fifo, "rb"):          # let the writer thread finish
            pass
        raise AssertionError("tag waited for ever on a FIFO input") from None
    assert run.returncode == 0, run.stderr
    assert out.read_text().count("\n") == text.count("\n")
