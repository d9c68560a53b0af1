"""The semimarkov kind from the CLI and the Python API: trained on a tiny CoNLL chunking corpus,
it tags in the corpus's own scheme (IOB1 and IOB2 round trip through crftk eval), its files load
and tag identically, forged files and options it does not take are refused in one line, and -v/-n
write marginals and n-best lists."""

import io
import random

import pytest
from click.testing import CliRunner

import crftk
from crftk.cli import main
from crftk.io.schemes import convert, read_chunks
from crftk.kinds import KINDS, kind_of, semimarkov
from crftk.model import Model
from forged import forge

TEMPLATE = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]\nB\nS0:%len\nS1:%seg[1]\nS2:%before[1,1]\n"
NOUNS = ["dog", "cat", "man", "car"]
VERBS = ["runs", "sees", "likes"]


def _sentence(rnd):
    """(rows of word, POS; IOB2 chunk tags): NP VP NP? and a full stop."""
    rows, tags = [], []

    def np_chunk():
        words = [("the", "DT")] + ([("big", "JJ")] if rnd.random() < 0.4 else []) + [(rnd.choice(NOUNS), "NN")]
        for i, w in enumerate(words):
            rows.append(list(w))
            tags.append(("B-" if i == 0 else "I-") + "NP")

    np_chunk()
    rows.append([rnd.choice(VERBS), "VBZ"])
    tags.append("B-VP")
    if rnd.random() < 0.5:
        np_chunk()
    rows.append([".", "."])
    tags.append("O")
    return rows, tags


def corpus(n, seed):
    rnd = random.Random(seed)
    return [_sentence(rnd) for _ in range(n)]


def write(path, sentences, scheme="iob2"):
    text = "".join("".join(f"{w} {p} {t}\n" for (w, p), t in zip(rows, convert(tags, scheme))) + "\n"
                   for rows, tags in sentences)
    path.write_text(text)
    return str(path)


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def ok(*args):
    r = run(*args)
    assert r.exit_code == 0, r.output
    return r.output


def one_line_error(*args, fragment=""):
    r = run(*args)
    assert r.exit_code != 0
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.output, r.output
    assert fragment in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("semimarkov")
    (d / "t.tmpl").write_text(TEMPLATE)
    train, test = corpus(40, 1), corpus(10, 2)
    paths = {"dir": d, "template": str(d / "t.tmpl")}
    for scheme in ("iob2", "iob1"):
        paths[f"train-{scheme}"] = write(d / f"train-{scheme}.txt", train, scheme)
        paths[f"test-{scheme}"] = write(d / f"test-{scheme}.txt", test, scheme)
        paths[f"model-{scheme}"] = str(d / f"{scheme}.model")
        ok("train", "-q", "--model-type", "semimarkov", "-t", paths["template"], "--max-iter", "30",
           "--threads", "1", "-m", paths[f"model-{scheme}"], paths[f"train-{scheme}"])
    return paths


def predicted(text):
    return [[ln.split()[-1] for ln in block.splitlines()] for block in text.strip().split("\n\n")]


@pytest.mark.parametrize("scheme", ["iob2", "iob1"])
def test_tags_in_the_corpus_scheme_and_eval_reads_them(data, scheme):
    out = ok("tag", "-m", data[f"model-{scheme}"], data[f"test-{scheme}"])
    gold_text = open(data[f"test-{scheme}"]).read()
    gold, pred = predicted(gold_text), predicted(out)
    assert len(pred) == len(gold)
    for tags in pred:
        assert convert(tags, scheme) == tags         # already in the corpus's scheme
        assert not any(t[:2] in ("E-", "S-") for t in tags)
    # the same chunks as the gold ones (the data is regular enough to learn exactly)
    assert [read_chunks(p) for p in pred] == [read_chunks(g) for g in gold]
    tagged = data["dir"] / f"tagged-{scheme}.txt"
    tagged.write_text(out)
    assert "100.00" in ok("eval", tagged)


def test_the_model_is_of_its_kind_and_info_and_dump_describe_it(data):
    model = Model.load(data["model-iob1"])
    assert model.kind == "semimarkov" and kind_of(model) is semimarkov and KINDS["semimarkov"] is semimarkov
    assert [p.name for p in model.parts] == ["tokens", "segments"]
    assert model.info["train_scheme"] == "iobes" and model.info["corpus_scheme"] == "iob1"
    info = ok("info", data["model-iob1"])
    assert "semimarkov" in info and "max_segment.NP" in info and "schemes.corpus" in info
    dumped = ok("dump", data["model-iob1"])
    assert "[segment lengths]" in dumped and "B-NP\tE-NP" in dumped


def test_marginals_and_nbest_lists(data):
    out = ok("tag", "-v", "-m", data["model-iob2"], data["test-iob2"])
    blocks = out.strip().split("\n\n")
    assert all(b.startswith("# prob ") for b in blocks)
    rows = [ln.split() for b in blocks for ln in b.splitlines()[1:]]
    assert all(len(r) == 5 and 0.0 <= float(r[4]) <= 1.0 for r in rows)
    assert all(r[3] == "O" or r[3][:2] in ("B-", "I-") for r in rows)
    plain = predicted(ok("tag", "-m", data["model-iob2"], data["test-iob2"]))
    assert [[r[3] for r in (ln.split() for ln in b.splitlines()[1:])] for b in blocks] == plain
    nbest = ok("tag", "-n", "2", "-m", data["model-iob2"], data["test-iob2"])
    heads = [ln for ln in nbest.splitlines() if ln.startswith("# nbest")]
    assert heads and heads[0].startswith("# nbest 0 ")
    probs = [float(h.split()[3]) for h in heads]
    assert all(0.0 < p <= 1.0 for p in probs)
    first = nbest.split("# nbest 0 ")[1].split("\n", 1)[1].split("\n\n")[0]
    assert [ln.split()[-1] for ln in first.splitlines()] == plain[0]


def test_python_api_fits_predicts_and_round_trips(data, tmp_path):
    sents = corpus(40, 1)
    X, y = [rows for rows, _ in sents], [convert(tags, "iob1") for _, tags in sents]
    crf = crftk.CRF(TEMPLATE, model_type="semimarkov", max_segment=3, max_iter=30, threads=1).fit(X, y)
    pred = crf.predict(X)
    assert [read_chunks(p) for p in pred] == [read_chunks(t) for t in y]
    assert all(convert(p, "iob1") == p for p in pred)
    marg = crf.predict_marginals(X[:2], as_arrays=True)
    assert marg[0].shape == (len(X[0]), len(crf.classes_))
    assert abs(marg[0].sum(axis=1) - 1).max() < 1e-9
    crf.save(tmp_path / "api.model")
    again = crftk.CRF.load(tmp_path / "api.model")
    assert again.predict(X) == pred and again.max_segment == 3 and again.model_type == "semimarkov"
    # the CLI tags the API's file as the API does
    text = tmp_path / "x.txt"
    text.write_text("".join("".join(f"{w} {p}\n" for w, p in rows) + "\n" for rows in X))
    assert predicted(ok("tag", "-m", tmp_path / "api.model", text)) == pred
    with pytest.raises(crftk.errors.CrftkError, match="segment lattice"):
        crf.predict(X[:1], constraints=[[None] * len(X[0])])


@pytest.mark.parametrize("edit, fragment", [
    (lambda m: m["info"].update(train_scheme="iob2"), "training scheme 'iob2'"),
    (lambda m: m["info"].update(corpus_scheme="bogus"), "corpus scheme 'bogus'"),
    (lambda m: m["info"].update(model_type="crf"), "model type 'crf'"),
    (lambda m: m["parts"][0].update(name="main"), "parts are tokens and segments"),
    (lambda m: m.update(structure="chain"), "model file is inconsistent"),
])
def test_forged_files_are_refused_in_one_line(data, tmp_path, edit, fragment):
    bad = forge(data["model-iob2"], tmp_path / "bad.model", edit)
    line = one_line_error("tag", "-m", bad, data["test-iob2"], fragment=fragment)
    assert str(bad) in line


@pytest.mark.parametrize("args, fragment", [
    (["--order", "2"], "drop --order 2"),
    (["--train-scheme", "iobes"], "drop --train-scheme iobes"),
    (["--constraints", "iob2"], "drop --constraints iob2"),
    (["--algorithm", "sgd"], "--algorithm sgd"),
    (["--algorithm", "gis"], "--algorithm gis"),
    (["--objective", "mce-f", "--algorithm", "quickprop"], "--objective mce-f"),
    (["--entity-ratio", "0.2"], "--entity-ratio"),
    (["--max-segment", "-1"], "max-segment"),
    (["--inference", "trp"], "factorial"),
])
def test_options_it_does_not_take_are_refused_in_one_line(data, tmp_path, args, fragment):
    one_line_error("train", "--model-type", "semimarkov", "-t", data["template"], *args, "-m",
                   tmp_path / "x.model", data["train-iob2"], fragment=fragment)
    assert not (tmp_path / "x.model").exists()


def test_max_segment_needs_the_semimarkov_model_type(data, tmp_path):
    one_line_error("train", "-t", data["template"], "--max-segment", "3", "-m", tmp_path / "x.model",
                   data["train-iob2"], fragment="--model-type semimarkov")


def test_data_and_templates_it_cannot_train_on_are_refused_in_one_line(data, tmp_path):
    (tmp_path / "edge.tmpl").write_text("U0:%x[0,0]\nB0:%x[0,1]\n")
    one_line_error("train", "--model-type", "semimarkov", "-t", tmp_path / "edge.tmpl", "-m", tmp_path / "x.model",
                   data["train-iob2"], fragment="B lines with macros")
    partial = tmp_path / "partial.txt"
    partial.write_text(open(data["train-iob2"]).read().replace(" B-VP\n", " ?\n", 1))
    line = one_line_error("train", "--model-type", "semimarkov", "-t", data["template"], "-m", tmp_path / "x.model",
                          partial, fragment="partial")
    assert str(partial) in line
    words = tmp_path / "words.txt"
    words.write_text("a DT X\nb NN Y\n\n")
    one_line_error("train", "--model-type", "semimarkov", "-t", data["template"], "-m", tmp_path / "x.model",
                   words, fragment="not one")


def test_tag_options_it_does_not_take_are_refused_in_one_line(data):
    one_line_error("tag", "--force-col", "2", "-m", data["model-iob2"], data["test-iob2"], fragment="segment lattice")
    one_line_error("tag", "--combine", "seq-poe", "-m", data["model-iob2"], data["test-iob2"], fragment="bags")


def test_init_continues_a_semimarkov_model_only(data, tmp_path):
    ok("train", "-q", "--model-type", "semimarkov", "--init", data["model-iob2"], "--max-iter", "2", "--threads", "1",
       "-m", tmp_path / "more.model", data["train-iob2"])
    assert Model.load(tmp_path / "more.model").kind == "semimarkov"
    one_line_error("train", "--init", data["model-iob2"], "--max-iter", "2", "-m", tmp_path / "x.model",
                   data["train-iob2"], fragment="a semi-Markov CRF")


def test_dask_tagging_writes_the_same_bytes(data):
    pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")
    from crftk.distributed import Cluster
    from crftk.distributed.tagging import tag_files
    model = Model.load(data["model-iob1"])
    local = ok("tag", "-m", data["model-iob1"], data["test-iob1"], data["train-iob1"])
    out = io.StringIO()
    with Cluster(workers=2, threads=1) as cluster:
        tag_files(cluster, model, [data["test-iob1"], data["train-iob1"]], out, piece_bytes=300)
    assert out.getvalue() == local


def test_dask_training_gives_the_weights_of_one_machine():
    pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")
    sents = corpus(40, 1)
    X, y = [rows for rows, _ in sents], [tags for _, tags in sents]
    fits = [crftk.CRF(TEMPLATE, model_type="semimarkov", max_iter=5, threads=1, workers=workers).fit(X, y)
            for workers in (0, 2)]
    here, there = ([p.weights for p in f.model_.parts] for f in fits)
    assert all(abs(a - b).max() < 1e-9 for a, b in zip(here, there))
    assert fits[1].model_.info["cluster"]["shards"] == 2


def test_compose_refuses_it_as_a_semi_markov_crf(data, tmp_path):
    line = one_line_error("compose", "-m", data["model-iob2"], "-m", data["model-iob1"], "--feed", "1", "-o",
                          tmp_path / "p.model", fragment="a semi-Markov CRF")
    assert "--train-scheme" not in line          # it was given none: it converts its labels itself
    assert not (tmp_path / "p.model").exists()


def test_input_lacking_a_column_only_s_lines_read_is_refused_before_tagging(tmp_path):
    sents = corpus(20, 1)
    X, y = [rows for rows, _ in sents], [tags for _, tags in sents]
    crf = crftk.CRF("U0:%x[0,0]\nB\nS0:%seg[1]\n", model_type="semimarkov", max_iter=5, threads=1).fit(X, y)
    crf.save(tmp_path / "m.model")
    words = tmp_path / "words.txt"
    words.write_text("the\ndog\nruns\n\n")
    line = one_line_error("tag", "-m", tmp_path / "m.model", words, fragment="reads columns 0 and 1")
    assert f"{words}:1" in line
    with pytest.raises(crftk.errors.CrftkError, match="reads columns 0 and 1"):
        crf.predict([[["the"], ["dog"]]])


def test_a_two_stage_model_refuses_a_semi_markov_second_stage(data, tmp_path):
    first = tmp_path / "first.model"
    (tmp_path / "u.tmpl").write_text("U0:%x[0,0]\nU1:%x[0,1]\nB\n")
    ok("train", "-q", "-t", tmp_path / "u.tmpl", "--max-iter", "3", "-m", first, data["train-iob2"])
    out = tmp_path / "two.model"
    one_line_error("train", "--model-type", "semimarkov", "--first-stage", first, "--first-stage-folds", "2", "-t",
                   tmp_path / "u.tmpl", "--max-iter", "2", "-m", out, data["train-iob2"], fragment="--model-type semimarkov")
    assert not out.exists()


def test_cross_predictions_of_a_semi_markov_crf(data, tmp_path):
    out = tmp_path / "oof.txt"
    ok("train", "-q", "--model-type", "semimarkov", "-t", data["template"], "--max-iter", "30", "--threads", "1",
       "--cross-predict", "2", "--cross-output", out, "-m", tmp_path / "m.model", data["train-iob1"])
    gold, pred = predicted(open(data["train-iob1"]).read()), predicted(out.read_text())
    # as --train-scheme's, the labels as trained (IOBES position tags), with the gold chunks
    assert any(t[:2] in ("E-", "S-") for tags in pred for t in tags)
    assert [read_chunks(p) for p in pred] == [read_chunks(g) for g in gold]
