"""crftk train --train-scheme: labels trained in another chunk scheme, predictions written back in
the corpus's own scheme on every tagging path; models without it unchanged; bad combinations refused."""

import random

import numpy as np
import pytest

import crftk
from corpora import cli, error_line, sentences, write_conll
from crftk.evaluation.conlleval import chunks
from crftk.io.schemes import detect
from crftk.model import Model

TEMPLATE = "U00:%x[0,0]\nU01:%x[-1,0]\nU02:%x[1,0]\nU03:%x[-1,0]/%x[0,0]\nB\n"
NAMES = {"john": "PER", "mary": "PER", "paris": "LOC", "rome": "LOC", "acme": "ORG"}


def iob1_corpus(n, seed=0):
    """Sentences of words and IOB1 tags: names are one-token chunks, "john mary" two adjacent PER
    chunks (so B-PER), "new paris" one LOC chunk of two tokens."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(2, 6)):
            r = rng.random()
            if r < 0.15:
                rows += [["john", "I-PER"], ["mary", "B-PER"]]
            elif r < 0.3:
                rows += [["new", "I-LOC"], ["paris", "I-LOC"]]
            elif r < 0.55:
                w = rng.choice(sorted(NAMES))
                rows.append([w, f"I-{NAMES[w]}"])
            else:
                rows.append([rng.choice(["the", "in", "said", "of", "a"]), "O"])
        out.append(rows)
    return sentences(out)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("scheme")
    (d / "t.tmpl").write_text(TEMPLATE)
    write_conll(d / "train.txt", iob1_corpus(150))
    write_conll(d / "test.txt", iob1_corpus(40, seed=1))
    return d


@pytest.fixture(scope="module")
def bilou(files):
    p = cli("train", "-t", files / "t.tmpl", "--c2", "0.1", "--train-scheme", "bilou", "--constraints", "bilou",
            "--dev", files / "test.txt", "-m", files / "bilou.model", files / "train.txt")
    assert p.returncode == 0, p.stderr
    assert "labels: iob1 in " in p.stderr and "trained as bilou (12 labels)" in p.stderr
    return files / "bilou.model"


def columns(path):
    """(words, tags) of each sentence of a two-column file."""
    blocks = [[ln.split() for ln in b.splitlines()] for b in path.read_text().strip().split("\n\n")]
    return [([r[0] for r in b], [r[1] for r in b]) for b in blocks]


def labels_of(text):
    return [[line.split()[-1] for line in block.splitlines() if not line.startswith("#")]
            for block in text.strip().split("\n\n")]


def test_a_bilou_model_tags_in_the_corpus_scheme_and_eval_scores_it(files, bilou):
    model = Model.load(bilou)
    assert model.info["train_scheme"] == "bilou" and model.info["corpus_scheme"] == "iob1"
    assert any(lab.startswith(("L-", "U-")) for lab in model.output_labels)
    out = cli("tag", "-m", bilou, files / "test.txt")                 # the compiled path
    assert out.returncode == 0, out.stderr
    pred = labels_of(out.stdout)
    tags = {t for s in pred for t in s}
    assert tags <= {"O", "I-PER", "B-PER", "I-LOC", "I-ORG"} and "B-PER" in tags
    assert detect(pred) == "iob1"
    gold = [t for _, t in columns(files / "test.txt")]
    assert [chunks(p) for p in pred] == [chunks(g) for g in gold]      # learned exactly, scored as such
    ev = cli("eval", "-", input=out.stdout)
    assert "FB1: 100.00" in ev.stdout, ev.stdout + ev.stderr
    # the Python Tagger, -v and -n 1 write the same labels
    for flag in ("-v", "-n1"):
        slow = cli("tag", "-m", bilou, flag, files / "test.txt")
        lines = [ln for ln in slow.stdout.splitlines() if ln and not ln.startswith("#")]
        got = [ln.split()[2] for ln in lines]
        assert got == [t for s in pred for t in s], flag
    crf = crftk.CRF.load(bilou)
    sents = [[[w] for w in ws] for ws, _ in columns(files / "test.txt")]
    assert crf.predict(sents) == pred
    assert [b[0][0] for b in crf.predict_nbest(sents, 2)] == pred
    info = cli("info", bilou)
    assert "bilou" in info.stdout and "iob1" in info.stdout


def test_iob2_iobes_order_2_memm_and_bags_convert_back(files):
    gold = [t for _, t in columns(files / "test.txt")]
    x = [[[w] for w in ws] for ws, _ in columns(files / "test.txt")]
    X, y = [[[w] for w in ws] for ws, _ in columns(files / "train.txt")], [t for _, t in columns(files / "train.txt")]
    for opts in ({"train_scheme": "iobes"}, {"train_scheme": "iob2", "constraints": "iob2"},
                 {"train_scheme": "bilou", "order": 2}, {"train_scheme": "bilou", "model_type": "memm"}):
        crf = crftk.CRF(TEMPLATE, c2=0.1, **opts).fit(X, y)
        pred = crf.predict(x)
        assert {t for s in pred for t in s} <= {"O", "I-PER", "B-PER", "I-LOC", "I-ORG"}, opts
        assert crf.score(x, gold) > 90, opts
    bag = crftk.Bag([TEMPLATE, "U00:%x[0,0]\nU01:%x[-1,0]\nB\n"], c2=0.1, train_scheme="bilou").fit(X, y)
    assert bag.model_.info["train_scheme"] == "bilou"
    assert bag.score(x, gold) > 90


def test_without_train_scheme_the_record_is_as_before(files):
    X, y = [[[w] for w in ws] for ws, _ in columns(files / "train.txt")], [t for _, t in columns(files / "train.txt")]
    crf = crftk.CRF(TEMPLATE, c2=0.1, max_iter=5).fit(X, y)
    info = crf.model_.info
    assert "train_scheme" not in info and "train_scheme" not in info["options"]
    assert "corpus_scheme" not in info


@pytest.mark.parametrize("args, says", [
    (["--train-scheme", "bilou", "--constraints", "iob2"], "--constraints iob2 contradicts --train-scheme bilou"),
    (["--train-scheme", "bilou", "--label-col", "0", "--label-col", "1"], "factorial CRF"),
])
def test_contradictory_options_are_refused_in_one_line(files, args, says):
    p = cli("train", "-t", files / "t.tmpl", *args, "-m", files / "x.model", files / "train.txt")
    assert says in error_line(p, p.returncode) and p.returncode != 0
    assert not (files / "x.model").exists()


def test_a_column_that_is_not_chunk_tags_is_refused(tmp_path, files):
    write_conll(tmp_path / "pos.txt", sentences([[["the", "DT"], ["dog", "NN"]], [["a", "DT"], ["''", "''"]]]))
    p = cli("train", "-t", files / "t.tmpl", "--train-scheme", "iobes", "-m", tmp_path / "m", tmp_path / "pos.txt")
    line = error_line(p, p.returncode)
    assert "pos.txt:1:" in line and "'DT' is not one" in line and "without --train-scheme" in line


def test_a_pipeline_of_scheme_trained_stages_is_refused(files, bilou, tmp_path):
    p = cli("compose", "-m", bilou, "-m", bilou, "--feed", "0", "-o", tmp_path / "p.model")
    assert p.returncode != 0 and "--train-scheme" in p.stderr


def test_the_recoder_keeps_up_with_a_batch(bilou):
    model = Model.load(bilou)
    from crftk.kinds.chain import recoder_of
    r = recoder_of(model)
    pred = np.zeros(10, dtype=np.int64)
    assert r.tags(pred, np.array([0, 4, 10])).shape == (10,)
