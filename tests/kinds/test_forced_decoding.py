"""Constrained decoding (crftk tag --force-col, CRF.predict(constraints=...)): forced tokens keep
their label, sets restrict, free tokens are decoded; Viterbi, n-best and marginals equal brute force
over the labelings the constraints allow (every labeling of tiny sentences, from the unconstrained
n-best list), for orders 1 and 2; all-free is plain tagging byte for byte; bad input one line."""

import random

import numpy as np
import pytest

import crftk
from corpora import cli, error_line, random_corpus, sentences, write_conll
from crftk.errors import CrftkError

TEMPLATE = "U00:%x[0,0]\nU01:%x[0,1]\nU02:%x[-1,0]\nB\n"


def rows_and_labels(sents):
    return [[r[:-1] for r in s.rows] for s in sents], [[r[-1] for r in s.rows] for s in sents]


@pytest.fixture(scope="module")
def data():
    return rows_and_labels(random_corpus(80, seed=4, max_len=4))


@pytest.fixture(scope="module", params=[1, 2], ids=["order1", "order2"])
def crf(request, data):
    X, y = data
    # few iterations: a model far from the data's labels, so that constraints change its choices
    return crftk.CRF(TEMPLATE, max_iter=4, order=request.param, c2=1.0, threads=1).fit(X, y)


def random_constraints(y, labels, seed):
    """Per token: the gold label forced, a set of two labels, or free (None)."""
    rng = random.Random(seed)
    out = []
    for sent in y:
        row = []
        for gold in sent:
            r = rng.random()
            row.append(gold if r < 0.3 else frozenset(rng.sample(labels, 2)) if r < 0.5 else None)
        out.append(row)
    return out


def fits(labeling, constraint):
    return all(c is None or (y == c if isinstance(c, str) else y in c) for y, c in zip(labeling, constraint))


def brute_force(crf, X, constraints):
    """Per sentence: [(labels, probability)] of every labeling the constraints allow, best first,
    probabilities renormalized over them (from the unconstrained n-best list of all labelings)."""
    L = len(crf.classes_)
    out = []
    for x, c in zip(X, constraints):
        every = crf.predict_nbest([x], L ** len(x))[0]
        assert len(every) == L ** len(x)
        kept = [(labels, p) for labels, p in every if fits(labels, c)]
        z = sum(p for _, p in kept)
        out.append([(labels, p / z) for labels, p in kept])
    return out


def test_viterbi_nbest_and_marginals_equal_brute_force(crf, data):
    X, y = data
    X, y = X[:30], y[:30]
    constraints = random_constraints(y, crf.classes_, seed=1)
    truth = brute_force(crf, X, constraints)
    best = crf.predict(X, constraints=constraints)
    nbest = crf.predict_nbest(X, 3, constraints=constraints)
    marginals = crf.predict_marginals(X, constraints=constraints)
    changed = 0
    for i, allowed in enumerate(truth):
        assert best[i] == allowed[0][0]
        assert fits(best[i], constraints[i])
        assert [labels for labels, _ in nbest[i]] == [labels for labels, _ in allowed[:3]]
        assert np.allclose([p for _, p in nbest[i]], [p for _, p in allowed[:3]], atol=1e-9)
        for t in range(len(X[i])):
            want = {lab: sum(p for labels, p in allowed if labels[t] == lab) for lab in crf.classes_}
            assert marginals[i][t] == pytest.approx(want, abs=1e-9)
        changed += best[i] != crf.predict([X[i]])[0]
    assert changed > 0          # the constraints did change some labelings


def test_forced_tokens_keep_their_label_and_free_tokens_are_decoded(crf, data):
    X, y = data
    every = [[lab for lab in sent] for sent in y]
    assert crf.predict(X, constraints=every) == y
    free = [[None] * len(sent) for sent in y]
    assert crf.predict(X, constraints=free) == crf.predict(X)
    assert np.allclose(np.concatenate(crf.predict_marginals(X, as_arrays=True, constraints=free)),
                       np.concatenate(crf.predict_marginals(X, as_arrays=True)))


def test_api_errors(crf, data):
    X, y = data
    with pytest.raises(CrftkError, match=r"constraints\[0\]\[0\]: forced label 'NOPE' is not one of the model's"):
        crf.predict(X[:1], constraints=[["NOPE"] + [None] * (len(X[0]) - 1)])
    with pytest.raises(CrftkError, match=r"the set 'O\|NOPE' names 'NOPE'"):
        crf.predict(X[:1], constraints=[[("O", "NOPE")] + [None] * (len(X[0]) - 1)])
    with pytest.raises(CrftkError, match="X has 2 sentences but constraints has 1"):
        crf.predict(X[:2], constraints=[[None] * len(X[0])])
    with pytest.raises(CrftkError, match=r"constraints\[0\] has"):
        crf.predict(X[:1], constraints=[[None] * (len(X[0]) + 1)])
    with pytest.raises(CrftkError, match=r"constraints\[0\]\[0\] is an int"):
        crf.predict(X[:1], constraints=[[3] + [None] * (len(X[0]) - 1)])


# -- the command line -------------------------------------------------------------------------------

def chunk_corpus(n, seed):
    """word, tag-like column, IOB2 label: 'big cat' is a two-token X chunk, 'dog' a one-token Y."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(1, 5)):
            r = rng.random()
            if r < 0.25:
                rows += [["big", "A", "B-X"], ["cat", "B", "I-X"]]
            elif r < 0.45:
                rows.append(["dog", "B", "B-Y"])
            else:
                rows.append([rng.choice(["the", "a", "ran", "in"]), "C", "O"])
        out.append(rows)
    return sentences(out)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("forced")
    (d / "t.tmpl").write_text(TEMPLATE)
    write_conll(d / "train.txt", chunk_corpus(120, seed=0))
    test = chunk_corpus(40, seed=1)
    write_conll(d / "test.txt", test)
    # the label column to force: the gold label on every third token, else the unknown marker
    rows = [[r[:2] + [r[2] if k % 3 == 0 else "?"] for k, r in enumerate(s.rows)] for s in test]
    write_conll(d / "forced.txt", sentences(rows))
    write_conll(d / "free.txt", sentences([[r[:2] + ["?"] for r in s.rows] for s in test]))
    for name, extra in (("plain", []), ("iob2", ["--constraints", "iob2"])):
        p = cli("train", "-t", d / "t.tmpl", "--max-iter", "5", "-p", "1", *extra, "-m", d / f"{name}.model",
                d / "train.txt")
        assert p.returncode == 0, p.stderr
    return d


def tag(files, *args, model="plain.model"):
    p = cli("tag", "-m", files / model, "-p", "1", *[str(a) for a in args])
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("flags", [[], ["-v"], ["-vv"], ["-n", "3"], ["-n", "2", "-v"]])
def test_all_free_tags_as_without_constraints_byte_for_byte(files, flags):
    assert tag(files, "--force-col", "2", *flags, files / "free.txt") == tag(files, *flags, files / "free.txt")


def test_cli_forced_tokens_keep_their_label(files):
    out = tag(files, "--force-col", "-1", files / "forced.txt")
    lines = [line.split() for line in out.splitlines() if line]
    assert all(len(r) == 4 for r in lines)
    forced = [r for r in lines if r[2] != "?"]
    assert forced and all(r[3] == r[2] for r in forced)
    assert any(r[3] != "O" for r in lines if r[2] == "?")
    # the gold column itself, forced everywhere: the output is the gold labels
    out = tag(files, "--force-col", "2", files / "test.txt")
    assert all(r[2] == r[3] for r in (line.split() for line in out.splitlines() if line))


def test_cli_errors_one_line_nothing_written(files, tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_text("the C O\nbig A B-X\n\ndog B B-Z\n\n")
    out = tmp_path / "out.txt"
    p = cli("tag", "-m", files / "plain.model", "--force-col", "2", "-o", out, bad)
    assert "bad.txt:4: forced label 'B-Z' is not one of the model's 4 labels" in error_line(p)
    assert not out.exists()
    bad.write_text("the C O\nbig A B-X|B-Q\n\n")
    assert "bad.txt:2: the set 'B-X|B-Q' names 'B-Q'" in error_line(cli(
        "tag", "-m", files / "plain.model", "--force-col", "2", "-o", out, bad))
    assert "bad.txt:1: --force-col 7 is not a column of this line (3 columns)" in error_line(cli(
        "tag", "-m", files / "plain.model", "--force-col", "7", "-o", out, bad))
    # I-X right after O: no IOB2 labeling has it
    bad.write_text("the C O\nbig A B-X\n\nthe C O\ncat B I-X\n\n")
    p = cli("tag", "-m", files / "iob2.model", "--force-col", "2", "-o", out, bad)
    assert ("bad.txt:4: the forced labels of the sentence starting here admit no labeling under the model's iob2 "
            "constraints") in error_line(p)
    assert not out.exists()
    assert "--unknown-label is the marker" in error_line(cli(
        "tag", "-m", files / "plain.model", "--unknown-label", "_", bad), status=2)


def test_unknown_label_marker_and_sets(files, tmp_path):
    f = tmp_path / "sets.txt"
    f.write_text("big A _\ncat B I-X|O\nthe C B-Y|O\n\n")
    out = tag(files, "--force-col", "2", "--unknown-label", "_", f)
    labels = [line.split()[-1] for line in out.splitlines() if line]
    assert labels[1] in ("I-X", "O") and labels[2] in ("B-Y", "O")


def test_no_marker_reads_every_cell_as_one_label(files, tmp_path):
    """--unknown-label '' is no marker, as in training: ? and A|B are labels (here not the
    model's), never a free token or a set; a marker holding | is refused as in training."""
    f = tmp_path / "cells.txt"
    f.write_text("big A O\ncat B ?\n\n")
    out = tmp_path / "out.txt"
    line = error_line(cli("tag", "-m", files / "plain.model", "--force-col", "2", "--unknown-label", "", "-o", out, f))
    assert "cells.txt:2: forced label '?' is not one of the model's" in line
    f.write_text("big A O\ncat B I-X|O\n\n")
    line = error_line(cli("tag", "-m", files / "plain.model", "--force-col", "2", "--unknown-label", "", "-o", out, f))
    assert "cells.txt:2: forced label 'I-X|O' is not one of the model's" in line
    line = error_line(cli("tag", "-m", files / "plain.model", "--force-col", "2", "--unknown-label", "a|b", "-o", out,
                          f), status=2)
    assert "--unknown-label 'a|b' must be one label cell" in line
    assert not out.exists()


def test_other_kinds_refused_in_one_line(files, tmp_path):
    bag = tmp_path / "bag.model"
    p = cli("bag", "-t", files / "t.tmpl", "-t", files / "t.tmpl", "--max-iter", "2", "-p", "1", "-m", bag,
            files / "train.txt")
    assert p.returncode == 0, p.stderr
    assert "--force-col: " in error_line(cli("tag", "-m", bag, "--force-col", "2", files / "test.txt"))


def test_memm_refused_in_one_line_from_python_and_the_cli(data, files, tmp_path):
    X, y = data
    memm = crftk.CRF(TEMPLATE, model_type="memm", max_iter=2, threads=1).fit(X[:20], y[:20])
    # predict(constraints=...) reached the MEMM's inference with the mask (a TypeError) before
    with pytest.raises(CrftkError, match="an MEMM decodes by its local probabilities"):
        memm.predict(X[:1], constraints=[[y[0][0]] + [None] * (len(X[0]) - 1)])
    path = tmp_path / "memm.model"
    memm.save(path)
    assert "an MEMM decodes by its local probabilities" in error_line(
        cli("tag", "-m", path, "--force-col", "2", files / "test.txt"))
