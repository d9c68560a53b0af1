"""crftk compose, tag --decode, train --cross-predict and crftk.Pipeline, on small models."""

import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

import crftk
from corpora import REPO
from crftk.cli import main
from crftk.commands.compose import Pipeline
from crftk.commands.train import fit
from crftk.errors import CrftkError
from crftk.features.templates import parse_template
from crftk.io.conll import read_corpus
from crftk.model import Model

POS_TEMPLATE = "U0:%x[0,0]\nU1:%x[-1,0]\nU2:%suf[0,0,2]\nU3:%x[1,0]\nB\n"
CHUNK0_TEMPLATE = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,0]/%x[0,1]\nU3:%X[0,1]\nU4:%x[1,0]\nB\n"
CHUNK_WINDOW_TEMPLATE = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]\nU3:%x[1,1]/%x[0,1]\nB\n"


def head(path, n, out):
    """The first n sentences of a CoNLL file, written to out."""
    text = path.read_text().split("\n\n")[:n]
    out.write_text("\n\n".join(text) + "\n\n")
    return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("compose")
    train = head(REPO / "data" / "demo.train", 300, d / "train.txt")
    test = head(REPO / "data" / "demo.test", 60, d / "test.txt")
    sents = read_corpus(train)
    models = {}
    for name, text, col in (("pos", POS_TEMPLATE, 1), ("chunk0", CHUNK0_TEMPLATE, -1),
                            ("window", CHUNK_WINDOW_TEMPLATE, -1)):
        m = fit(sents, parse_template(text), label_col=col, max_iter=25, log=lambda m: None)
        m.save(d / f"{name}.model")
        models[name] = d / f"{name}.model"
    return d, train, test, models


def cli(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def compose_file(files, down="chunk0", name="p.pipeline"):
    d, _, _, m = files
    code, _, err = cli("compose", "-m", m["pos"], "-m", m[down], "--feed", 1, "-o", d / name)
    assert code == 0, err
    return d / name


def columns(text):
    return [line.split() for line in text.splitlines() if line.strip()]


def test_cascade_output_is_each_stage_tagged_with_the_labels_before(files):
    d, _, test, m = files
    pipe = compose_file(files)
    code, out, err = cli("tag", "-m", pipe, "--decode", "cascade", test)
    assert code == 0 and "cascade decoding" in err and "all stages together" in err
    rows = columns(out)
    assert all(len(r) == 5 for r in rows)            # word POS chunk + POS' + chunk'
    # by hand: the POS tagger, then the chunker on the predicted POS column
    pos = Model.load(m["pos"])
    sents = read_corpus(test)
    from crftk.commands.tag import Tagger
    tags = Tagger(pos).tag(sents)
    for s, t in zip(sents, tags):
        for row, lab in zip(s.rows, t):
            row[1] = lab
    chunks = Tagger(Model.load(m["chunk0"])).tag(sents)
    assert [r[3] for r in rows] == [x for t in tags for x in t]
    assert [r[4] for r in rows] == [x for t in chunks for x in t]


def test_joint_output_and_log_say_which_mode_ran(files):
    _, _, test, _ = files
    exact = compose_file(files, "chunk0", "exact.pipeline")
    kbest = compose_file(files, "window", "kbest.pipeline")
    code, out, err = cli("tag", "-m", exact, test)           # joint is the default for a pipeline
    assert code == 0 and "joint decoding: exact" in err and "22" not in err.split("(")[0]
    assert all(len(r) == 5 for r in columns(out))
    code, out2, err = cli("tag", "-m", kbest, "--decode", "joint", "--nbest-upstream", 5, test)
    assert code == 0 and "rescoring the 5 best labelings" in err and "offsets -1, 1" in err
    # the input may lack the last stage's gold column
    no_gold = test.parent / "nogold.txt"
    no_gold.write_text("\n".join(" ".join(line.split()[:2]) for line in test.read_text().splitlines()) + "\n")
    code, out3, err = cli("tag", "-m", exact, no_gold)
    assert code == 0 and "all stages together" not in err
    assert [r[2:] for r in columns(out3)] == [r[3:] for r in columns(out)]


def test_the_shipped_pos_words_template_upstream_tags_with_the_default_decoding(files, tmp_path):
    # pos-words.tmpl reads %shape, a multi-valued test: the compiled exact joint path lost its values
    _, train, test, _ = files
    pos, chunk, pipe = tmp_path / "pos.model", tmp_path / "chunk.model", tmp_path / "p.pipeline"
    for args in (["-t", REPO / "templates" / "pos-words.tmpl", "--label-col", 1, "-m", pos],
                 ["-t", REPO / "templates" / "chunking-pos0.tmpl", "-m", chunk]):
        code, _, err = cli("train", "-q", "--max-iter", 3, "-p", 1, *args, train)
        assert code == 0, err
    assert cli("compose", "-m", pos, "-m", chunk, "--feed", 1, "-o", pipe)[0] == 0
    code, out, err = cli("tag", "-m", pipe, test)
    assert code == 0 and "joint decoding: exact" in err, err
    assert len(columns(out)) == sum(1 for line in test.read_text().splitlines() if line.strip())
    code, out_v, err = cli("tag", "-m", pipe, "-v", test)        # the Python path: the same labels
    assert code == 0, err
    assert [r[-4::2] for r in columns(out_v) if r[0] != "#"] == [r[-2:] for r in columns(out)]


def test_normalized_decoding_from_the_command_line_and_python(files):
    _, _, test, m = files
    kbest = compose_file(files, "window", "kbest.pipeline")
    code, out, err = cli("tag", "-m", kbest, "--decode", "normalized", "--nbest-upstream", 5, test)
    assert code == 0 and "normalized decoding: the 5 best labelings" in err and "all stages together" in err
    rows = columns(out)
    sents = read_corpus(test)
    pipe = Pipeline.load(kbest)
    tags = pipe.tag(sents, "normalized", 5)
    assert [r[3:] for r in rows] == [[p, c] for t in tags for p, c in zip(*t)]
    assert tags != pipe.tag(sents, "joint", 5)          # not eq. 7's answer
    X, _ = crftk.read_conll(test, label_col=-1)
    api = crftk.Pipeline.compose([m["pos"], m["window"]], [1])
    assert api.predict(X, decode="normalized", nbest_upstream=5) == [t[-1] for t in tags]


def test_joint_can_overrule_the_upstream_stage(files):
    _, _, test, _ = files
    pipe = Pipeline.load(compose_file(files))
    sents = read_corpus(test)
    cascade, joint = pipe.decode(sents, "cascade"), pipe.decode(sents, "joint")
    assert any((a != b).any() for a, b in zip(cascade[0], joint[0]))


def test_cross_predict_writes_out_of_fold_predictions_in_place(files, tmp_path):
    _, train, _, _ = files
    tmpl = tmp_path / "pos.tmpl"
    tmpl.write_text(POS_TEMPLATE)
    out = tmp_path / "pred.txt"
    code, _, err = cli("train", "-t", tmpl, "-m", tmp_path / "pos.model", "--label-col", 1, "--max-iter", 15,
                       "--cross-predict", 3, "--cross-output", out, train)
    assert code == 0, err
    assert "cross-prediction fold 3/3" in err
    gold, pred = read_corpus(train), read_corpus(out)
    assert [[r[0], r[2]] for s in gold for r in s.rows] == [[r[0], r[2]] for s in pred for r in s.rows]
    # fold 0 (sentences 0, 3, 6, ...) is tagged by a model trained on the other folds
    model = fit([s for i, s in enumerate(gold) if i % 3], parse_template(POS_TEMPLATE), label_col=1,
                max_iter=15, log=lambda m: None)
    from crftk.commands.tag import Tagger
    held = [s for i, s in enumerate(gold) if i % 3 == 0]
    expect = Tagger(model).tag(held)
    assert expect == [[r[1] for r in s.rows] for i, s in enumerate(pred) if i % 3 == 0]
    full = Tagger(Model.load(tmp_path / "pos.model")).tag(gold)
    assert full != [[r[1] for r in s.rows] for s in pred]      # not the full model's own predictions


@pytest.mark.parametrize("args, message, status", [
    (["--cross-predict", 3], "needs --cross-output", 2),
    (["--cross-output", "{d}/x.txt"], "needs --cross-predict", 2),
    (["--cross-predict", 3, "--cross-output", "{d}/nodir/x.txt"], "directory", 1),
])
def test_cross_predict_errors_write_nothing(files, tmp_path, args, message, status):
    _, train, _, _ = files
    tmpl = tmp_path / "pos.tmpl"
    tmpl.write_text(POS_TEMPLATE)
    args = [str(a).format(d=tmp_path) for a in args]
    code, _, err = cli("train", "-t", tmpl, "-m", tmp_path / "m.model", "--label-col", 1, *args, train)
    assert code == status and message in err and err.count("\n") == 1 and err.startswith("crftk: error: ")
    assert not (tmp_path / "m.model").exists() and not (tmp_path / "x.txt").exists()


def test_cross_predict_bounds(files, tmp_path):
    _, train, _, _ = files
    code, _, err = cli("train", "-t", "t", "-m", tmp_path / "m", "--cross-predict", 1, train)
    assert code == 2 and "--cross-predict" in err


@pytest.mark.parametrize("models, feeds, message", [
    (["pos"], [], "at least two models"),
    (["pos", "chunk0"], [], "need 1 --feed column"),
    (["pos", "chunk0"], [7], "has columns 0..2"),
    (["pos", "chunk0"], [2], "gold label column"),
    (["chunk0", "chunk0"], [1], "the label sets cannot combine"),
    (["pos", "chunk0", "chunk0"], [1], "need 2 --feed columns"),
])
def test_compose_refuses_models_that_do_not_chain(files, models, feeds, message):
    d, _, _, m = files
    out = d / "bad.pipeline"
    args = [x for name in models for x in ("-m", m[name])] + [x for f in feeds for x in ("--feed", f)]
    code, _, err = cli("compose", *args, "-o", out)
    if not feeds:
        assert code == 2 and "--feed" in err          # click: a required option
        return
    usage = message in ("at least two models", "need 2 --feed columns")      # the command line itself
    assert code == (2 if usage else 1) and message in err and err.count("\n") == 1, err
    assert not out.exists()


def test_compose_refuses_a_feed_the_template_never_reads(files, tmp_path):
    d, train, _, m = files
    words = fit(read_corpus(train), parse_template("U0:%x[0,0]\nB\n"), max_iter=3, log=lambda x: None)
    words.save(tmp_path / "words.model")
    code, _, err = cli("compose", "-m", m["pos"], "-m", tmp_path / "words.model", "--feed", 1, "-o",
                       tmp_path / "p")
    assert code == 1 and "never reads column 1" in err and not (tmp_path / "p").exists()


def test_compose_refuses_a_factorial_crf_or_a_bag_in_one_line(files, tmp_path):
    # a factorial model upstream was a TypeError (its labels are a list per chain)
    d, train, _, m = files
    (tmp_path / "a.tmpl").write_text("U0:%x[0,0]\nB\n")
    (tmp_path / "b.tmpl").write_text("U0:%x[0,0]\nU1:%x[1,0]\nB\n")
    code, _, err = cli("train", "-t", tmp_path / "a.tmpl", "-m", tmp_path / "f.model", "--label-col", 1,
                       "--label-col", 2, "--max-iter", 2, "-q", "-p", 1, train)
    assert code == 0, err
    code, _, err = cli("bag", "-t", tmp_path / "a.tmpl", "-t", tmp_path / "b.tmpl", "-m", tmp_path / "b.bag",
                       "--weights-by", "uniform", "--max-iter", 2, "-q", train)
    assert code == 0, err
    for kind, models in (("a factorial CRF (2 chains)", [tmp_path / "f.model", m["chunk0"]]),
                         ("a factorial CRF (2 chains)", [m["pos"], tmp_path / "f.model"]),
                         ("a feature bag (2 members)", [tmp_path / "b.bag", m["chunk0"]])):
        code, _, err = cli("compose", "-m", models[0], "-m", models[1], "--feed", 1, "-o", tmp_path / "p")
        odd = next(x for x in models if x.parent == tmp_path)
        assert (code, err.count("\n")) == (1, 1) and err.startswith(f"crftk: error: {odd} is {kind}; "), err
        assert not (tmp_path / "p").exists()


def test_compose_bounds_the_joint_label_set(files, tmp_path):
    d, _, _, m = files
    n_pos, n_chunk = (len(Model.load(m[x]).output_labels) for x in ("pos", "chunk0"))
    joint = n_pos * n_chunk
    code, _, err = cli("compose", "-m", m["pos"], "-m", m["chunk0"], "--feed", 1, "--max-joint-labels", joint - 1,
                       "-o", tmp_path / "p")
    assert (code, err.count("\n")) == (1, 1) and not (tmp_path / "p").exists()
    assert err.startswith(f"crftk: error: the joint label set has {joint:,} labels ({n_pos} x {n_chunk}), more "
                          f"than --max-joint-labels {joint - 1:,}: ")
    code, _, err = cli("compose", "-m", m["pos"], "-m", m["chunk0"], "--feed", 1, "--max-joint-labels", joint,
                       "-o", tmp_path / "p")
    assert code == 0 and (tmp_path / "p").exists()


def test_tag_errors_write_nothing(files):
    d, _, test, m = files
    pipe = compose_file(files)
    out = d / "out.txt"
    kbest = compose_file(files, "window", "kbest.pipeline")
    for args, message in ((["-m", pipe, "-n", 2, "-v"], "n-best lists with --decode joint and without -v"),
                          (["-m", kbest, "-n", 2], "need exact joint decoding"),
                          (["-m", pipe, "-v", "--decode", "cascade"], "-v and --decode joint only"),
                          (["-m", pipe, "-vv"], "-v and --decode joint only"),
                          (["-m", kbest, "-v"], "need exact joint decoding"),
                          (["-m", m["pos"], "--decode", "joint"], "--decode joint applies to pipelines"),
                          (["-m", pipe, "-v", "--decode", "normalized"], "-v and --decode joint only"),
                          (["-m", pipe, "-n", 2, "--decode", "normalized"], "n-best lists with --decode joint"),
                          (["-m", m["pos"], "--decode", "normalized"], "--decode normalized applies to pipelines"),
                          (["-m", pipe, "--nbest-upstream", 0], "--nbest-upstream"),
                          (["-m", pipe, "--combine", "seq-poe"], "--combine and --weights are for bags"),
                          (["-m", pipe, "--weights", test], "--combine and --weights are for bags")):
        code, _, err = cli("tag", *args, "-o", out, test)
        assert code in (1, 2) and message in err and err.count("\n") == 1, err
        assert not out.exists()
    wide = d / "wide.txt"
    wide.write_text("a b c d\n\n")
    code, _, err = cli("tag", "-m", pipe, "-o", out, wide)
    assert code == 1 and err.splitlines()[-1].endswith("wide.txt:1: expected 1, 2 or 3 columns, found 4")
    assert err.count("crftk: error") == 1 and not out.exists()


def test_a_pipeline_is_not_a_model_to_tag_or_train_from(files):
    pipe = compose_file(files)
    model = Model.load(pipe)
    from crftk.commands.tag import Tagger
    with pytest.raises(CrftkError, match="decodes through its stages"):
        Tagger(model).tag(read_corpus(files[2])[:1])


def test_pipeline_file_without_its_links_is_refused(files, tmp_path):
    pipe = Model.load(compose_file(files))
    pipe.info.pop("pipeline")
    pipe.save(tmp_path / "broken")
    with pytest.raises(CrftkError, match="does not describe its stages"):
        Pipeline.load(tmp_path / "broken")
    code, _, err = cli("tag", "-m", tmp_path / "broken", files[2])
    assert code == 1 and "inconsistent" in err


def test_python_api_matches_the_command_line(files, tmp_path):
    d, _, test, m = files
    pipe = compose_file(files)
    X, y = crftk.read_conll(test, label_col=-1)
    api = crftk.Pipeline.compose([crftk.CRF.load(m["pos"]), m["chunk0"]], [1])
    assert api.joint_mode == "exact"
    code, out, _ = cli("tag", "-m", pipe, "--decode", "joint", test)
    rows = columns(out)
    assert [x for s in api.predict(X) for x in s] == [r[4] for r in rows]
    both = api.predict(X, stages=True, decode="cascade")
    assert len(both) == len(X) and len(both[0]) == 2 and len(both[0][0]) == len(X[0])
    marg, logz = api.predict_marginals(X[:5])
    assert all(np.allclose(p.sum(axis=1), 1) for sent in marg for p in sent) and np.isfinite(logz).all()
    lists = api.predict_nbest(X[:3], 4)
    assert [x[0] for x in lists[0][0][0]] and lists[0][0][0][1] == api.predict(X[:1])[0]
    assert all(a[1] >= b[1] for sent in lists for a, b in zip(sent, sent[1:]))
    api.save(tmp_path / "api.pipeline")
    again = crftk.Pipeline.load(tmp_path / "api.pipeline")
    assert again.predict(X) == api.predict(X)
    assert again.stage_labels == api.stage_labels


def test_compose_help_runs():
    p = subprocess.run([sys.executable, "-m", "crftk", "compose", "--help"], capture_output=True, text=True,
                       cwd=REPO)
    assert p.returncode == 0 and "--feed" in p.stdout


def test_info_summarises_a_pipeline(files):
    pipe = compose_file(files)
    code, out, err = cli("info", "--json", pipe)
    assert code == 0, err
    import json
    d = json.loads(out)
    assert d["structure"] == "composed" and d["joint_decoding"] == "exact"
    assert d["stages"]["stage2"]["fed_column"] == 1 and d["stages"]["stage1"]["fed_column"] is None
    assert d["joint_labels"] == d["stages"]["stage1"]["n_labels"] * d["stages"]["stage2"]["n_labels"]


def test_v_adds_each_stages_joint_marginal_and_the_labeling_probability(files):
    _, _, test, _ = files
    pipe = compose_file(files)
    code, plain, _ = cli("tag", "-m", pipe, test)
    code, out, err = cli("tag", "-m", pipe, "-v", test)
    assert code == 0, err
    probs = [float(line.split()[2]) for line in out.splitlines() if line.startswith("# prob")]
    rows = [r for r in columns(out) if r[0] != "#"]
    assert len(probs) == len(read_corpus(test)) and all(0 < p <= 1 for p in probs)
    assert [r[3::2] for r in rows] == [r[3:] for r in columns(plain)]       # the same labels
    marg = [float(x) for r in rows for x in r[4::2]]
    assert all(0 < m <= 1 for m in marg)
    # a token's marginal is at least the probability of the whole labeling through it
    first = [r for r in rows][:len(read_corpus(test)[0])]
    assert all(float(x) >= probs[0] - 1e-6 for r in first for x in r[4::2])


def test_other_structures_decode_in_cascade_only(files, tmp_path):
    d, train, test, m = files
    memm = fit(read_corpus(train), parse_template(CHUNK0_TEMPLATE), model_type="memm", max_iter=10,
               log=lambda x: None)
    pipe = Pipeline.from_models([Model.load(m["pos"]), memm], [1])
    assert pipe.joint_mode() is None
    sents = read_corpus(test)[:5]
    assert len(pipe.tag(sents, "cascade")) == 5
    with pytest.raises(CrftkError, match="first-order CRF stages.*memm.*--decode cascade"):
        pipe.decode(sents, "joint")
    with pytest.raises(CrftkError, match="normalized decoding needs first-order CRF stages"):
        pipe.decode(sents, "normalized")


def test_n_prints_the_k_best_joint_labelings(files):
    _, _, test, _ = files
    pipe = compose_file(files)
    code, plain, _ = cli("tag", "-m", pipe, test)
    code, out, err = cli("tag", "-m", pipe, "-n", 3, test)
    assert code == 0, err
    heads = [line.split() for line in out.splitlines() if line.startswith("# nbest")]
    n = len(read_corpus(test))
    assert len(heads) == 3 * n and [int(h[2]) for h in heads[:3]] == [0, 1, 2]
    probs = [float(h[3]) for h in heads]
    assert all(probs[i] >= probs[i + 1] for i in range(0, len(probs), 3) for i in (i, i + 1))
    # the best of each list is the joint Viterbi labeling
    blocks = out.split("# nbest ")[1:]
    best = [b for b in blocks if b.startswith("0 ")]
    rows = [r for b in best for r in columns(b)[1:]]
    assert [r[3:] for r in rows] == [r[3:] for r in columns(plain)]


@pytest.mark.parametrize("decode", ["cascade", "joint"])
@pytest.mark.parametrize("gold", [True, False])
@pytest.mark.parametrize("threads,batch", [(1, 50_000), (2, 7)])
def test_the_compiled_path_writes_and_scores_as_the_python_path(files, tmp_path, monkeypatch, decode, gold, threads,
                                                                batch):
    import io
    from crftk.commands import compose
    d, _, test, _ = files
    pipeline = Pipeline.load(compose_file(files), threads=threads)
    assert pipeline.raw_decodable(decode)
    text = test.read_text()
    if not gold:                    # the last stage's label column dropped
        text = "\n".join(" ".join(line.split()[:-1]) for line in text.splitlines()) + "\n"
    path = tmp_path / "in.txt"
    path.write_text("-DOCSTART- -X- O\n\n" + text)
    results = []
    for compiled in (False, True):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(compose.Pipeline, "raw_decodable", lambda self, mode: False)
            out, logged = io.StringIO(), []
            n_sent, n_tok, (correct, scored) = compose.tag_pipeline(pipeline, [str(path)], out, decode=decode,
                                                                   batch_tokens=batch, log=logged.append)
            results.append((out.getvalue(), n_sent, n_tok, correct.tolist(), scored, logged))
    assert results[0] == results[1]
    assert (results[0][4] > 0) == gold and results[0][1] == 60 and "-DOCSTART-" in results[0][0]


def _words(text, n=1):
    """The first n columns of every line of a CoNLL text."""
    return "\n".join(" ".join(line.split()[:n]) for line in text.splitlines()) + "\n"


@pytest.mark.parametrize("args", [[], ["--decode", "cascade"], ["--decode", "normalized"], ["-v"], ["-n", 2]],
                         ids=["joint", "cascade", "normalized", "-v", "-n"])
@pytest.mark.parametrize("compiled", [True, False])
def test_a_pipeline_tags_the_words_alone(files, monkeypatch, args, compiled):
    # POS tagger -> chunker: every column the pipeline reads after the words is made by its stages
    from crftk.commands import compose
    _, _, test, _ = files
    pipe = compose_file(files)
    full = test.read_text()
    outputs = {}
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(compose.Pipeline, "raw_decodable", lambda self, mode: False)
        for n in (1, 2, 3):
            r = CliRunner().invoke(main, ["tag", "-m", str(pipe), *map(str, args), "-"], input=_words(full, n))
            assert r.exit_code == 0, r.stderr
            outputs[n] = [row for row in columns(r.stdout)]
    stages = 4 if "-v" in args else 2
    for n, rows in outputs.items():
        assert {len(r) for r in rows if r[0] != "#"} == {n + stages}
        assert [r[n:] for r in rows if r[0] != "#"] == [r[3:] for r in outputs[3] if r[0] != "#"]
        assert [r for r in rows if r[0] == "#"] == [r for r in outputs[3] if r[0] == "#"]


def test_pipeline_predict_takes_the_words_alone(files):
    _, _, test, m = files
    pipeline = crftk.Pipeline.compose([m["pos"], m["chunk0"]], [1])
    X = crftk.read_conll(test, label_col=-1)[0]
    words = [[[r[0]] for r in s] for s in X]
    for decode in ("joint", "cascade", "normalized"):
        assert pipeline.predict(words, decode=decode, stages=True) == pipeline.predict(X, decode=decode, stages=True)
    assert pipeline.predict_nbest(words[:5], 2) == pipeline.predict_nbest(X[:5], 2)
    marg, logz = pipeline.predict_marginals(words[:5])
    want, want_logz = pipeline.predict_marginals(X[:5])
    assert np.array_equal(logz, want_logz) and all(np.array_equal(a, b) for x, y in zip(marg, want)
                                                   for a, b in zip(x, y))
    with pytest.raises(CrftkError, match=r"X\[0\]\[0\] has 3 columns, rows of 1 or 2 columns are expected: the "
                                         r"pipeline reads column 0 of the last model's 3; its stages fill column 1"):
        pipeline.predict([[[*X[0][0], "B-NP"]]])


def test_too_few_columns_for_a_pipeline_say_which_columns_it_reads(tmp_path):
    # word, tag, a column the first stage fills, the label: the stages read the words and the tags
    sents = []
    for s in read_corpus(REPO / "data" / "demo.train")[:80]:
        for r in s.rows:
            r.insert(2, "Y" if r[1].startswith("N") else "Z")
        sents.append(s)
    up = fit(sents, parse_template("U0:%x[0,0]\nU1:%x[0,1]\nB\n"), label_col=2, max_iter=3, log=lambda m: None)
    down = fit(sents, parse_template("U0:%x[0,0]/%x[0,2]\nU1:%x[0,1]\nB\n"), max_iter=3, log=lambda m: None)
    pipeline = Pipeline.from_models([up, down], [2])
    with pytest.raises(CrftkError, match="layout: 2, 3 or 4 columns, found 1: the pipeline reads columns 0 and 1 "
                                         "of the last model's 4; its stages fill column 2$"):
        pipeline.input_columns(1)
    path = tmp_path / "words.txt"
    path.write_text("The\ncat\n\n")
    pipeline.save(tmp_path / "p.pipeline")
    code, _, err = cli("tag", "-m", tmp_path / "p.pipeline", "-o", tmp_path / "out.txt", path)
    assert code == 1 and err.splitlines()[-1] == (f"crftk: error: {path}:1: expected at least 2 columns, found 1: "
                                                  f"the pipeline reads columns 0 and 1 of the last model's 4; its "
                                                  f"stages fill column 2")
    assert not (tmp_path / "out.txt").exists()
    path.write_text("The DT\ncat NN\n\n")
    code, out, err = cli("tag", "-m", tmp_path / "p.pipeline", path)
    assert code == 0 and [len(r) for r in columns(out)] == [4, 4]


def test_a_feed_into_a_column_read_as_real_values_is_refused(files, tmp_path):
    # found in review: a fed column read by %num ended compose in a traceback (it has no
    # vocabulary); joint decoding would have read the input's column, not the fed labels
    d, train, _, m = files
    text = train.read_text()
    numbered = "\n".join(line if not line.strip() else f"{line.split()[0]}\t{len(line.split()[0])}\t"
                         + "\t".join(line.split()[1:]) for line in text.split("\n"))
    (tmp_path / "num.txt").write_text(numbered)
    down = fit(read_corpus(tmp_path / "num.txt"), parse_template("U0:%x[0,0]\nU1:%num[0,1]\nU2:%x[0,2]\nB\n"),
               max_iter=3, log=lambda m: None)
    down.save(tmp_path / "down.model")
    code, _, err = cli("compose", "-m", m["pos"], "-m", tmp_path / "down.model", "--feed", 1,
                       "-o", tmp_path / "p.pipeline")
    assert code == 1 and "reads column 1 with %num (real values)" in err, err
    assert "Traceback" not in err and not (tmp_path / "p.pipeline").exists()
