"""crftk train on partial labels (crftk.io.partial): training end to end, the log, dev scoring,
and every refusal and annotation error in one line."""

import json
import random

import numpy as np
import pytest

from corpora import REPO, cli, error_line
from crftk.model import Model

TEMPLATE = "U00:%x[0,0]\nU01:%x[0,1]\nU02:%x[-1,1]\nB\n"


def _demo(n):
    """The first n sentences of the demo corpus, as lists of rows."""
    out, sent = [], []
    for line in (REPO / "data" / "demo.train").read_text().splitlines():
        if line.strip():
            sent.append(line.split("\t"))
        elif sent:
            out.append(sent)
            sent = []
            if len(out) == n:
                break
    return out


def _write(path, sents):
    path.write_text("".join("".join("\t".join(r) + "\n" for r in s) + "\n" for s in sents))
    return path


def _hide(sents, share, seed=0, sets=False):
    """Each label unknown with probability ``share`` (or, with ``sets``, a set of it and O)."""
    rng = random.Random(seed)
    out = []
    for s in sents:
        rows = []
        for r in s:
            r = list(r)
            if rng.random() < share:
                r[-1] = f"{r[-1]}|O" if sets and r[-1] != "O" else "?"
            rows.append(r)
        out.append(rows)
    return out


@pytest.fixture
def files(tmp_path):
    sents = _demo(150)
    (tmp_path / "t.tmpl").write_text(TEMPLATE)
    return {"dir": tmp_path, "tmpl": tmp_path / "t.tmpl", "full": _write(tmp_path / "full.txt", sents),
            "partial": _write(tmp_path / "partial.txt", _hide(sents, 0.3)),
            "sets": _write(tmp_path / "sets.txt", _hide(sents, 0.3, sets=True)),
            "dev": _write(tmp_path / "dev.txt", _hide(_demo(200)[150:], 0.2, seed=1))}


def _train(files, data, *extra, model="m.crf"):
    path = files["dir"] / model
    return cli("train", "-t", files["tmpl"], "-m", path, "--max-iter", "15", "-p", "1", *extra, files[data]), path


def test_fully_labeled_training_is_unchanged_by_the_marker(files):
    """--unknown-label (on by default) changes nothing on a fully labeled corpus: the same weights
    to the bit as with partial labels off."""
    (a, pa), (b, pb) = _train(files, "full"), _train(files, "full", "--unknown-label", "", model="off.crf")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    assert np.array_equal(Model.load(pa).weights, Model.load(pb).weights)
    assert "partial labels" not in a.stderr
    assert "unknown_label" not in Model.load(pa).info["options"]       # records of before, unchanged


@pytest.mark.parametrize("data, order", [("partial", 1), ("sets", 1), ("partial", 2)])
def test_partial_training_end_to_end(files, data, order):
    proc, path = _train(files, data, "--order", str(order), "--dev", files["dev"])
    assert proc.returncode == 0, proc.stderr
    assert "partial labels: " in proc.stderr and "tokens with unknown gold labels not scored" in proc.stderr
    model = Model.load(path)
    assert model.info["partial_tokens"] > 0
    assert "?" not in model.output_labels and not any("|?" in x for x in model.space.labels)
    out = files["dir"] / "out.txt"
    tagged = cli("tag", "-m", path, "-o", out, files["full"])
    assert tagged.returncode == 0, tagged.stderr
    score = cli("eval", "--json", out)
    assert json.loads(score.stdout)["overall"]["f1"] > 50


def test_partial_training_with_constraints(files):
    proc, _ = _train(files, "partial", "--constraints", "iob2")
    assert proc.returncode == 0, proc.stderr


def test_infeasible_sentence_under_constraints(files):
    # an I-NP that can only follow O (a set {O} before it): no IOB2 labeling exists
    bad = files["dir"] / "bad.txt"
    text = files["partial"].read_text() + "x\tDT\tO|B-PP\ny\tNN\tI-NP\n\n"
    bad.write_text(text)
    files["bad"] = bad
    proc, _ = _train(files, "bad", "--constraints", "iob2", "-q")
    line = error_line(proc)
    assert f"bad.txt:{len(text.splitlines()) - 1}:" in line and "admit no labeling" in line


@pytest.mark.parametrize("options, fragment", [
    (("--algorithm", "perceptron"), "--algorithm perceptron updates towards one gold labeling"),
    (("--algorithm", "sgd"), "--algorithm sgd"),
    (("--algorithm", "pa"), "--algorithm pa"),
    (("--algorithm", "arow"), "--algorithm arow"),
    (("--algorithm", "gis"), "feature counts of one gold labeling"),
    (("--model-type", "memm"), "an MEMM normalizes each token"),
])
def test_refusals_at_the_first_partial_token(files, options, fragment):
    proc, path = _train(files, "partial", *options)
    line = error_line(proc)
    assert "partial.txt:" in line and fragment in line
    assert not path.exists()


def test_refused_objectives_and_schemes(files):
    init, ipath = _train(files, "full", model="init.crf")
    assert init.returncode == 0
    line = error_line(_train(files, "partial", "--objective", "mce", "--init", ipath)[0])
    assert "--objective mce compares" in line
    line = error_line(_train(files, "partial", "--train-scheme", "iobes")[0])
    assert "--train-scheme iobes converts whole chunks" in line and "partial.txt:" in line


def test_init_model_resolves_sets_against_its_labels(files):
    init, ipath = _train(files, "full", model="init.crf")
    proc, _ = _train(files, "sets", "--init", ipath, model="cont.crf")
    assert proc.returncode == 0, proc.stderr
    bad = _write(files["dir"] / "unk.txt", [[["w", "NN", "B-NP|B-ZZ"]], *_demo(3)])
    files["unk"] = bad
    line = error_line(_train(files, "unk", "--init", ipath, model="c2.crf")[0])
    assert "unk.txt:1:" in line and "--init model has no label 'B-ZZ'" in line


@pytest.mark.parametrize("cell, fragment", [
    ("B-NP|B-ZZ", "never has the label 'B-ZZ'"),
    ("B-NP|", "empty element"),
    ("B-NP|?", "holds the unknown marker"),
])
def test_annotation_errors_name_file_and_line(files, cell, fragment):
    sents = _demo(5)
    sents[2][1][-1] = cell
    files["bad"] = _write(files["dir"] / "bad.txt", sents)
    line = error_line(_train(files, "bad")[0])
    assert f"bad.txt:{len(sents[0]) + len(sents[1]) + 2 + 2}:" in line and fragment in line


def test_every_token_unknown(files):
    files["none"] = _write(files["dir"] / "none.txt", [[[r[0], r[1], "?"] for r in s] for s in _demo(3)])
    line = error_line(_train(files, "none")[0])
    assert "none.txt: " in line and "nothing to learn from" in line


def test_every_token_unknown_continuing_an_init_model(files):
    """With --init the labels are the model's, but an annotation that allows every labeling
    gives a likelihood of 0 whatever the weights: training would only shrink them (c2)."""
    init, ipath = _train(files, "full", model="init.crf")
    assert init.returncode == 0, init.stderr
    files["none"] = _write(files["dir"] / "none.txt", [[[r[0], r[1], "?"] for r in s] for s in _demo(3)])
    proc, path = _train(files, "none", "--init", ipath, "-q", model="cont.crf")
    line = error_line(proc)
    assert "none.txt: " in line and "nothing to learn from" in line
    assert not path.exists()


@pytest.mark.parametrize("options, fragment", [
    (("--unknown-label", "O", "--constraints", "iob2"), "is a label of the --constraints iob2 scheme"),
    (("--unknown-label", "a|b"), "must be one label cell"),
    (("--entity-ratio", "0.2", "--objective", "mce"), "--entity-ratio adds to the likelihood"),
    (("--entity-ratio", "0.2", "--algorithm", "perceptron"), "--entity-ratio trains a CRF"),
    (("--entity-ratio", "1.5"), "--entity-ratio"),
])
def test_option_errors(files, options, fragment):
    proc, _ = _train(files, "partial", *options)
    assert proc.returncode == 2 and fragment in proc.stderr and "Traceback" not in proc.stderr


def test_factorial_induce_and_bag_refuse(files):
    sents = [[[r[0], r[1], r[2], r[2]] for r in s] for s in _demo(5)]
    sents[1][0][2] = "?"
    files["fact"] = _write(files["dir"] / "fact.txt", sents)
    proc, _ = _train(files, "fact", "--label-col", "2", "--label-col", "3")
    line = error_line(proc)
    assert "fact.txt:" in line and "a factorial CRF cannot train on partial labels" in line
    atomic = files["dir"] / "a.tmpl"
    atomic.write_text("U00:%x[0,0]\nU01:%x[0,1]\nB\n")
    line = error_line(cli("induce", "-t", atomic, "-m", files["dir"] / "i.crf", "--rounds", "1", files["partial"]))
    assert "induce scores features" in line and "unknown marker" in line
    # a label holding | stays a label for induce, as before partial labels (it has no --unknown-label)
    piped = [[list(r) for r in s] for s in _demo(8)]
    piped[2][1][-1] = "NN|JJ"
    files["piped"] = _write(files["dir"] / "piped.txt", piped)
    proc = cli("induce", "-t", atomic, "-m", files["dir"] / "p.crf", "--rounds", "1", files["piped"])
    assert proc.returncode == 0, proc.stderr
    line = error_line(cli("bag", "-t", atomic, "-t", files["tmpl"], "-m", files["dir"] / "b.crf", files["partial"]))
    assert "partial.txt:" in line and "a bag's combination weights" in line


def test_entity_ratio_with_every_outside_token_unknown(files):
    """Effland & Collins's setting: some entities marked, every O unknown. The outside label is a
    label though no token has it; the ratio is recorded; it beats the likelihood alone."""
    sents = [[[r[0], r[1], "?" if r[2] == "O" or i % 2 else r[2]] for i, r in enumerate(s)] for s in _demo(300)]
    files["ent"] = _write(files["dir"] / "ent.txt", sents)
    shares = []
    for extra in ((), ("--entity-ratio", "0.6", "--entity-ratio-margin", "0.02")):
        proc, path = _train(files, "ent", "--max-iter", "60", *extra, model=f"e{len(extra)}.crf")
        assert proc.returncode == 0, proc.stderr
        assert ("no token has --outside-label 'O' as its known label" in proc.stderr) == bool(extra)
        out = files["dir"] / "e.out"
        assert cli("tag", "-m", path, "-o", out, files["ent"]).returncode == 0
        tags = [line.split("\t")[-1] for line in out.read_text().splitlines() if line]
        shares.append(sum(t != "O" for t in tags) / len(tags))
    model = Model.load(path)
    assert "O" in model.output_labels and model.info["options"]["entity_ratio"] == 0.6
    # the likelihood alone labels (nearly) every unknown token an entity; the hinge pulls the
    # share of entity tokens towards 0.6
    assert shares[0] > 0.95 and abs(shares[1] - 0.6) < 0.15, shares


def test_dask_training_carries_the_mask(files):
    pytest.importorskip("dask.distributed")
    (a, pa), (b, pb) = _train(files, "partial"), _train(files, "partial", "--workers", "2", model="d.crf")
    assert a.returncode == 0 and b.returncode == 0, b.stderr
    assert np.allclose(Model.load(pa).weights, Model.load(pb).weights, atol=1e-8)


def test_dev_set_without_a_known_gold_label_is_refused(files):
    """Every dev score would be 0, and --keep best would silently keep the first iteration."""
    files["devq"] = _write(files["dir"] / "devq.txt", [[[r[0], r[1], "?"] for r in s] for s in _demo(3)])
    proc, path = _train(files, "partial", "--dev", files["devq"], "-q")
    line = error_line(proc)
    assert "devq.txt:" in line and "no token of the development set has a known gold label" in line
    assert not path.exists()
