"""Factorial CRFs from the command line: train with several --label-col, info, dump, tag, eval,
the Python API, and bad input as one line (exit 1, or 2 for options that do not go together)."""

import json
import random

import numpy as np
import pytest
from click.testing import CliRunner

from crftk.cli import main
from crftk.model import Model

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[1,0]\nB\nP00:%x[0,0]\n"


def write_corpus(path, n=60, seed=0):
    """word POS NP: the POS follows the word, the NP label follows the POS (and the previous one)."""
    rng = random.Random(seed)
    pos_of = {f"w{i}": ["DT", "NN", "VB", "JJ", "NN", "IN"][i % 6] for i in range(12)}
    lines = []
    for _ in range(n):
        prev = "O"
        for _ in range(rng.randint(2, 8)):
            w = f"w{rng.randrange(12)}"
            p = pos_of[w] if rng.random() > 0.1 else "NN"
            np_ = "O" if p in ("VB", "IN") else ("I-NP" if prev != "O" else "B-NP")
            prev = np_
            lines.append(f"{w} {p} {np_}")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.fixture()
def files(tmp_path):
    tmpl = tmp_path / "f.tmpl"
    tmpl.write_text(TEMPLATE)
    return {"tmpl": str(tmpl), "train": write_corpus(tmp_path / "train.txt"),
            "dev": write_corpus(tmp_path / "dev.txt", n=20, seed=1), "dir": tmp_path}


def invoke(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def train_fcrf(files, *extra):
    model = files["dir"] / "f.model"
    r = invoke(["train", "-t", files["tmpl"], "-m", model, "--label-col", 1, "--label-col", 2, "--max-iter", 40,
                "--dev", files["dev"], *extra, files["train"]])
    assert r.exit_code == 0, r.output
    return model, r.output


def test_train_info_dump_tag_eval(files):
    model, log = train_fcrf(files)
    assert "factorial CRF" in log and "converged" in log and "joint acc" in log
    m = Model.load(model)
    assert m.structure_name == "factorial" and [p.name for p in m.parts] == ["chain0", "chain1", "pair0"]
    assert m.structure.label_cols == [1, 2]
    info = json.loads(invoke(["info", "--json", model]).output)
    assert info["structure"] == "factorial" and info["parts"]["pair0"]["observation_templates"] == 1
    dump = invoke(["dump", model]).output
    assert "[chain 0] label column 1" in dump and "[pair 0 1]" in dump and "(plain)\tDT|B-NP" in dump
    out = files["dir"] / "tagged.txt"
    r = invoke(["tag", "-m", model, "-o", out, files["dev"]])
    assert r.exit_code == 0, r.output
    rows = [ln.split() for ln in out.read_text().splitlines() if ln]
    assert all(len(r) == 5 for r in rows)
    acc_pos = np.mean([r[1] == r[3] for r in rows])
    acc_np = np.mean([r[2] == r[4] for r in rows])
    assert acc_pos > 0.85 and acc_np > 0.85
    ev = json.loads(invoke(["eval", "--json", out, "--gold-col", 1, "--gold-col", 2, "--pred-col", -2,
                            "--pred-col", -1]).output)
    assert ev["columns"][0]["token_accuracy"] == pytest.approx(100 * acc_pos)
    joint = np.mean([r[1] == r[3] and r[2] == r[4] for r in rows])
    assert ev["joint_accuracy"] == pytest.approx(100 * joint)
    # input without the (trailing) label columns
    words = files["dir"] / "words.txt"
    words.write_text("\n".join(ln.split()[0] if ln else "" for ln in open(files["dev"]).read().split("\n")))
    r = invoke(["tag", "-m", model, words])
    assert r.exit_code == 0, r.output
    assert [ln.split()[1:] for ln in r.output.splitlines() if ln][:3] == [x[3:] for x in rows[:3]]


def test_python_api_trains_a_factorial_crf(files):
    from crftk.commands.train import train
    m = train([files["train"]], files["tmpl"], label_col=[1, 2], max_iter=5, log=lambda msg: None)
    assert m.structure_name == "factorial" and len(m.parts) == 3


@pytest.mark.parametrize("args,code,message", [
    (["--label-col", 1, "--label-col", 7], 1, "label column 7 does not exist"),
    (["--label-col", 1, "--label-col", 1], 2, "twice"),
    (["--label-col", 2, "--inference", "trp"], 1, "--inference is an option of factorial CRFs"),
    (["--label-col", 1, "--label-col", 2, "--algorithm", "sgd"], 2, "sentence by sentence"),
        (["--label-col", 1, "--label-col", 2, "--algorithm", "perceptron"], 2, "sentence by sentence"),
        (["--label-col", 1, "--label-col", 2, "--objective", "mce", "--init", "x.model"], 2, "--objective map"),
    (["--label-col", 1, "--label-col", 2, "--constraints", "iob2"], 2, "drop --constraints iob2"),
    (["--label-col", 1, "--label-col", 2, "--cross-predict", 2, "--cross-output", "x"], 2,
         "replaces one label column"),
])
def test_bad_options_are_one_line(files, args, code, message):
    model = files["dir"] / "bad.model"
    r = invoke(["train", "-t", files["tmpl"], "-m", model, "--max-iter", 2, *args, files["train"]])
    assert r.exit_code == code, r.output
    assert message in r.output and r.output.count("\n") == 1 and "Traceback" not in r.output
    assert not model.exists()


def test_p_line_without_a_second_chain(files):
    model = files["dir"] / "one.model"
    r = invoke(["train", "-t", files["tmpl"], "-m", model, "--label-col", 2, "--max-iter", 2, files["train"]])
    assert r.exit_code == 1 and f"{files['tmpl']}:5:" in r.output and "needs a second chain" in r.output
    assert not model.exists()


def test_template_reading_a_label_column(files):
    tmpl = files["dir"] / "reads.tmpl"
    tmpl.write_text("U00:%x[0,0]\nU01:%x[0,1]\n")
    r = invoke(["train", "-t", tmpl, "-m", files["dir"] / "x.model", "--label-col", 1, "--label-col", 2,
                files["train"]])
    assert r.exit_code == 1 and f"{tmpl}:2:" in r.output and "chain 1" in r.output


def test_tag_options_for_factorial_models_only(files, tmp_path):
    plain = tmp_path / "plain.model"
    tmpl = tmp_path / "plain.tmpl"
    tmpl.write_text("U00:%x[0,0]\nB\n")
    assert invoke(["train", "-t", tmpl, "-m", plain, "--max-iter", 3, files["train"]]).exit_code == 0
    r = invoke(["tag", "-m", plain, "--inference", "exact", files["dev"]])
    assert r.exit_code == 1 and "factorial models" in r.output     # bad input (issue 16): exit 1
    model, _ = train_fcrf(files)
    r = invoke(["tag", "-m", model, "-v", files["dev"]])
    assert r.exit_code == 2 and "best joint labeling only" in r.output


def test_eval_needs_pairs_of_columns(files):
    model, _ = train_fcrf(files)
    out = files["dir"] / "t.txt"
    invoke(["tag", "-m", model, "-o", out, files["dev"]])
    r = invoke(["eval", out, "--gold-col", 1, "--gold-col", 2, "--pred-col", -1])
    assert r.exit_code == 2 and "as many --gold-col as --pred-col" in r.output


def test_old_single_chain_files_still_load(files, tmp_path):
    """A linear chain trained and saved as before loads and tags as before (no factorial parts)."""
    tmpl = tmp_path / "plain.tmpl"
    tmpl.write_text("U00:%x[0,0]\nB\n")
    path = tmp_path / "plain.model"
    assert invoke(["train", "-t", tmpl, "-m", path, "--label-col", 2, "--max-iter", 3, files["train"]]).exit_code == 0
    m = Model.load(path)
    assert m.structure_name == "chain" and len(m.parts) == 1


def test_forged_factorial_parts_are_refused(files, tmp_path):
    model, _ = train_fcrf(files)
    m = Model.load(model)
    from crftk.model import Part
    bad = Model(m.parts[0].space, m.parts[0].weights, m.info, structure="factorial",
                more_parts=[Part(m.parts[1].space, m.parts[1].weights, "chain1")], name="chain0")
    path = tmp_path / "forged.model"
    bad.save(path)
    r = invoke(["info", path])
    assert r.exit_code == 1 and "inconsistent" in r.output and "pair" in r.output


def test_factorial_estimator(files, tmp_path):
    import crftk
    from crftk.api import read_conll
    X, y = read_conll(files["train"], label_col=-1)
    pos = [[row[1] for row in s] for s in X]
    words = [[row[0] for row in s] for s in X]
    est = crftk.FactorialCRF(TEMPLATE, max_iter=30, threads=1).fit(words, [pos, y])
    pred = est.predict(words)
    assert len(pred) == 2 and [len(s) for s in pred[0]] == [len(s) for s in words]
    assert est.score(words, [pos, y]) > 85
    path = tmp_path / "api.model"
    est.save(path)
    again = crftk.FactorialCRF.load(path)
    assert again.predict(words) == pred
    with pytest.raises(crftk.CrftkError, match="two or more"):
        crftk.FactorialCRF(TEMPLATE).fit(words, [pos])
    warm = crftk.FactorialCRF(TEMPLATE, inference="trp", warm_start=True, max_iter=30, threads=1).fit(words, [pos, y])
    assert warm.model_.info["factorial"]["warm_start"] is True and warm.score(words, [pos, y]) > 85
    with pytest.raises(crftk.CrftkError, match="^warm_start is for inference trp"):   # the keywords
        crftk.FactorialCRF(TEMPLATE, warm_start=True).fit(words, [pos, y])


@pytest.mark.parametrize("method", ["trp", "bp"])
def test_train_and_tag_with_message_passing(files, method):
    model, log = train_fcrf(files, "--inference", method, "--max-sweeps", 50)
    assert "converged 60/60" in log and "sweeps" in log
    m = Model.load(model)
    assert m.info["factorial"]["inference"] == method
    exact, bp = files["dir"] / "exact.txt", files["dir"] / "bp.txt"
    r = invoke(["tag", "-m", model, "--inference", "exact", "-o", exact, files["dev"]])
    assert r.exit_code == 0 and "max-product" not in r.output
    r = invoke(["tag", "-m", model, "-o", bp, files["dev"]])           # the model's own: max-product
    assert r.exit_code == 0 and "decoding with max-product" in r.output
    rows_exact = [ln.split() for ln in exact.read_text().splitlines() if ln]
    rows_bp = [ln.split() for ln in bp.read_text().splitlines() if ln]
    assert len(rows_bp) == len(rows_exact) > 50
    agree = np.mean([a == b for a, b in zip(rows_exact, rows_bp)])
    assert agree > 0.95


def test_message_passing_refuses_b_lines_with_macros(files):
    tmpl = files["dir"] / "edge.tmpl"
    tmpl.write_text(TEMPLATE + "B01:%x[0,0]\n")
    model = files["dir"] / "edge.model"
    r = invoke(["train", "-t", tmpl, "-m", model, "--label-col", 1, "--label-col", 2, "--inference", "bp",
                files["train"]])
    assert r.exit_code == 1 and "B lines with macros" in r.output and r.output.count("\n") == 1
    assert not model.exists()


def test_warm_start_trains_with_trp_only(files, tmp_path):
    model, log = train_fcrf(files, "--inference", "trp", "--warm-start")
    assert "with warm starts" in log
    assert Model.load(model).info["factorial"]["warm_start"] is True
    for extra, message in ((["--label-col", 1, "--label-col", 2], "--warm-start is for --inference trp, not exact"),
                           (["--label-col", 2], "--warm-start is an option of factorial CRFs")):
        out = tmp_path / "w.model"
        r = invoke(["train", "-t", files["tmpl"], "-m", out, *extra, "--warm-start", files["train"]])
        assert r.exit_code == 1 and message in r.output and not out.exists()


def test_random_schedule_tags_a_sentence_alike_in_any_batch(files):
    # one sweep of the random schedule: the order matters, and was drawn from the sentence's place
    # in its batch, so --batch-tokens (or a cluster's pieces) changed the labels of some sentences
    model, _ = train_fcrf(files, "--inference", "bp", "--max-sweeps", 50)
    dev = write_corpus(files["dir"] / "big-dev.txt", n=200, seed=3)
    outputs = []
    for batch in (1_000_000, 7, 23):
        out = files["dir"] / f"bp-{batch}.txt"
        r = invoke(["tag", "-m", model, "--max-sweeps", 1, "--tolerance", 1e-12, "--batch-tokens", batch, "-p", 1,
                    "-o", out, dev])
        assert r.exit_code == 0, r.output
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1] == outputs[2]
    exact = files["dir"] / "exact-big.txt"
    assert invoke(["tag", "-m", model, "--inference", "exact", "-o", exact, dev]).exit_code == 0
    assert exact.read_text() != outputs[0]        # one sweep is not the exact answer: the schedule mattered


def test_trace_checkpoints_and_init_from_the_command_line(files):
    """What the training driver gives every kind: --trace, --checkpoint-every, --init, any batch method."""
    trace = files["dir"] / "trace.tsv"
    model, log = train_fcrf(files, "--algorithm", "pcg", "--trace", trace, "--max-iter", 4, "--checkpoint-every", 2)
    assert "checkpoint: iteration 2 saved" in log
    assert not (files["dir"] / "f.model.checkpoint").exists()       # the finished model supersedes it
    rows = trace.read_text().splitlines()
    assert rows[0].startswith("evaluation\tpasses") and len(rows) > 4 and all(r.count("\t") == 4 for r in rows)
    more, more_trace = files["dir"] / "more.model", files["dir"] / "more.tsv"
    r = invoke(["train", "--init", model, "-m", more, "--label-col", 1, "--label-col", 2, "--max-iter", 3,
                "--algorithm", "quickprop", "--trace", more_trace, files["train"]])
    assert r.exit_code == 0, r.output
    m = Model.load(more)
    assert m.kind == "factorial" and m.info["init_model"] == str(model)
    # the first evaluation is at the --init model's weights, far below the zero weights' objective
    at_zero = float(rows[1].split("\t")[3])
    at_init = float(more_trace.read_text().splitlines()[1].split("\t")[3])
    assert at_init < 0.8 * at_zero
    r = invoke(["train", "--init", model, "-m", more, "--label-col", 2, "--label-col", 1, files["train"]])
    assert r.exit_code == 1 and "label columns [1, 2], not [2, 1]" in r.output and r.output.count("\n") == 1
