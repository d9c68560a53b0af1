"""crftk train --stream (crftk.training.streaming): the dictionary pass gives FeatureSpace.fit's
space, one batch holding the whole corpus trains exactly as in memory for every online learner,
several batches train as well, and what it cannot train is refused in one line."""

import subprocess
import sys

import numpy as np
import pytest

from corpora import CONLL2000, REPO, random_corpus
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.features.union import same_space
from crftk.io.conll import iter_corpus, read_corpus
from crftk.model import Model
from crftk.training import fit
from crftk.training.driver import check_options
from crftk.training.streaming import dictionary

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[1,0]\nU03:%x[0,1]/%x[0,0]\nU04:%x[0,0]/%x[1,0]\nB\nB01:%x[0,1]\n"
#: every online learner, with options that exercise its state (the pa average, sgd's rate)
LEARNERS = [dict(algorithm="perceptron"), dict(algorithm="sgd", c2=0.5),
            dict(algorithm="pa", pa_type=2, pa_c=0.5), dict(algorithm="arow", arow_gamma=0.5)]


def quiet(msg):
    pass


def write(path, sents):
    path.write_text("".join("".join(" ".join(r) + "\n" for r in s.rows) + "\n" for s in sents))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("stream")
    return (write(root / "a.txt", random_corpus(150, seed=1, vocab=40)),
            write(root / "b.txt", random_corpus(90, seed=2, vocab=60)))


def train(files, *, stream, batch_tokens=10**6, **options):
    return fit(iter_corpus(list(files)), parse_template(TEMPLATE), log=quiet, threads=1, stream=stream,
               stream_batch_tokens=batch_tokens, **{"max_iter": 4, "epsilon": 0.0, **options})


@pytest.mark.parametrize("options", LEARNERS, ids=lambda o: o["algorithm"])
@pytest.mark.parametrize("min_freq", [1, 2])
def test_one_batch_of_the_whole_corpus_trains_the_in_memory_weights(data, options, min_freq):
    a, _ = data
    memory = train([a], stream=False, min_freq=min_freq, **options)
    streamed = train([a], stream=True, min_freq=min_freq, **options)
    assert streamed.info["stream"] == {"batch_tokens": 10**6, "batches": 1}
    assert same_space(memory.space, streamed.space) == (True, "")
    np.testing.assert_array_equal(streamed.weights, memory.weights)
    assert streamed.info["sentences"] == memory.info["sentences"] == 150


@pytest.mark.parametrize("batch_tokens", [7, 40, 333])
@pytest.mark.parametrize("min_freq", [1, 3])
def test_the_dictionary_pass_is_the_fit_of_the_whole_corpus(data, batch_tokens, min_freq):
    template = parse_template(TEMPLATE)
    opt = check_options({"min_freq": min_freq}, quiet)
    space, n_sentences, n_tokens, n_batches = dictionary(iter_corpus(list(data)), template, opt, batch_tokens,
                                                         quiet)
    whole, corpus = FeatureSpace.fit(iter_corpus(list(data)), template, min_freq=min_freq)
    assert same_space(space, whole) == (True, "")
    assert (n_sentences, n_tokens) == (corpus.n_sentences, corpus.n_tokens)
    assert n_batches >= corpus.n_tokens // (batch_tokens + 7)     # a batch closes at a sentence's end


@pytest.mark.parametrize("options", LEARNERS, ids=lambda o: o["algorithm"])
def test_several_batches_carry_the_learner_across_them(data, options):
    """Small batches of two files: each batch is visited once per epoch, the state carried."""
    streamed = train(data, stream=True, batch_tokens=60, **options)
    memory = train(data, stream=False, **options)
    assert streamed.info["stream"]["batches"] > 10
    assert streamed.info["tokens"] == memory.info["tokens"]
    assert not np.array_equal(streamed.weights, memory.weights)      # another order of sentences
    dev = read_corpus(data[1])
    from crftk.kinds.chain import Tagger
    gold = [[r[-1] for r in s.rows] for s in dev]
    for model in (streamed, memory):
        pred = Tagger(model).tag(dev)
        accuracy = np.mean([p == g for ps, gs in zip(pred, gold) for p, g in zip(ps, gs)])
        assert accuracy > 0.97, (options, accuracy)


def test_dev_scoring_and_checkpoints_work_through_the_driver(data, tmp_path):
    lines = []
    checkpoint = tmp_path / "m.checkpoint"
    model = fit(iter_corpus([data[0]]), parse_template(TEMPLATE), dev=read_corpus(data[1]), log=lines.append,
                algorithm="perceptron", max_iter=3, stream=True, stream_batch_tokens=100,
                checkpoint=(str(checkpoint), 2))
    assert sum(line.startswith("epoch") and "dev F1" in line for line in lines) == 3
    assert any(line.startswith("read 150 sentences") and "streamed in" in line for line in lines)
    assert checkpoint.exists() and model.info["best_dev_f1"] > 50


@pytest.mark.skipif(not (CONLL2000 / "train.txt").exists(), reason="CoNLL-2000 is not on this machine")
def test_conll2000_batches_train_as_well_as_the_corpus_in_memory(tmp_path):
    """A tenth of CoNLL-2000's training data in batches of 2,000 tokens (about 12 of them)."""
    text = (CONLL2000 / "train.txt").read_text().split("\n\n")
    train_file = tmp_path / "train.txt"
    train_file.write_text("\n\n".join(text[:900]) + "\n\n")
    dev = read_corpus(CONLL2000 / "dev.txt")[:500]
    template = parse_template((REPO / "templates" / "chunking-crfpp.tmpl").read_text())
    scores = {}
    for stream in (False, True):
        model = fit(iter_corpus([train_file]), template, dev=dev, log=quiet, algorithm="perceptron", max_iter=5,
                    stream=stream, stream_batch_tokens=2000, keep="last")
        scores[stream] = model.info["history"][-1]["dev_f1"]
    assert scores[True] > 85 and abs(scores[True] - scores[False]) < 1.5, scores


def _cli(tmp_path, *args):
    model = tmp_path / "m.crf"
    run = subprocess.run([sys.executable, "-m", "crftk.cli", "train", *args, "-m", str(model)],
                         capture_output=True, text=True, cwd=tmp_path)
    return run, model


@pytest.mark.parametrize("extra, message", [
    (["--algorithm", "lbfgs"], "--stream trains with --algorithm sgd, perceptron, pa, arow: --algorithm lbfgs"),
    (["--algorithm", "sgd", "--workers", "2"], "--stream trains on one machine: drop --scheduler/--workers"),
    (["--algorithm", "sgd", "--scheduler", "tcp://127.0.0.1:1"], "--stream trains on one machine"),
    (["--algorithm", "pa", "--constraints", "iob2"], "drop --constraints iob2"),
    (["--algorithm", "pa", "--train-scheme", "iobes"], "drop --train-scheme iobes"),
    (["--algorithm", "pa", "--transitions", "seen"], "drop --transitions seen"),
    (["--algorithm", "pa", "--cross-predict", "2", "--cross-output", "x"], "--cross-predict trains its folds"),
])
def test_refusals_of_the_command_line(data, tmp_path, extra, message):
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    run, model = _cli(tmp_path, str(data[0]), "-t", str(tmpl), "--stream", *extra)
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert message in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert not model.exists()


def test_refusals_of_data_and_templates(data, tmp_path):
    a = str(data[0])
    partial = tmp_path / "partial.txt"
    partial.write_text("w1 A O\nw2 B B-X\n\nw3 A ?\n\n")
    with pytest.raises(CrftkError, match=r"--stream trains on fully labeled data") as e:
        train([partial], stream=True, algorithm="sgd")
    assert (e.value.path, e.value.line) == (str(partial), 4)
    for text, what in [("U0:%^x[-1,0]\nU1:%x[0,0]\n", "first-mention"),
                       (f"@lexicon L {partial}\nU0:%lex[0,L]\nU1:%x[0,0]\n", "lexicon macros")]:
        with pytest.raises(CrftkError, match=what):
            fit(iter_corpus([a]), parse_template(text), log=quiet, algorithm="sgd", stream=True)
    with pytest.raises(CrftkError, match="in-memory sentences are trained without it"):
        fit(read_corpus(a), parse_template(TEMPLATE), log=quiet, algorithm="sgd", stream=True)
    crfsuite = tmp_path / "data.crfsuite"
    crfsuite.write_text("A\tw=1\nB\tw=2\n\n")
    run, model = _cli(tmp_path, str(crfsuite), "--format", "crfsuite", "--algorithm", "sgd", "--stream")
    assert run.returncode != 0 and "--stream reads CoNLL files with a template" in run.stderr
    assert "Traceback" not in run.stderr and not model.exists()


def test_crf_fit_files_streams_and_gives_the_in_memory_weights(data):
    import crftk
    a, b = data
    kw = dict(template=TEMPLATE, algorithm="perceptron", max_iter=3, threads=1)
    memory = crftk.CRF(**kw).fit_files([a], dev=b)
    streamed = crftk.CRF(**kw, stream=True, stream_batch_tokens=10**6).fit_files(a, dev=b)
    fitted = crftk.CRF(**kw).fit(*_xy(read_corpus(a)))
    np.testing.assert_array_equal(streamed.model_.weights, memory.model_.weights)
    np.testing.assert_array_equal(fitted.model_.weights, memory.model_.weights)
    assert memory.model_.info["best_dev_f1"] is not None
    with pytest.raises(CrftkError, match=r"^stream trains with algorithm sgd"):
        crftk.CRF(template=TEMPLATE, stream=True).fit_files([a])


def _xy(sents):
    return [[r[:-1] for r in s.rows] for s in sents], [[r[-1] for r in s.rows] for s in sents]


@pytest.mark.parametrize("init_space", ["grow", "keep"])
def test_init_continues_a_model_on_streamed_files_as_in_memory(data, tmp_path, init_space):
    """--init with --stream: a streamed run's checkpoint resumed, or a model continued on new
    files; one batch gives the weights of --init in memory, grown (or kept) alike."""
    a, b = data
    checkpoint = tmp_path / "m.checkpoint"
    train([a], stream=True, batch_tokens=100, checkpoint=(str(checkpoint), 2), algorithm="perceptron")
    init = Model.load(checkpoint)
    kw = dict(init=init, init_space=init_space, algorithm="perceptron", max_iter=3, epsilon=0.0, threads=1)
    resumed = []
    fit(iter_corpus([a]), None, log=resumed.append, stream=True, stream_batch_tokens=100, **kw)
    assert not any(line.startswith("--init-space") for line in resumed)      # its own data adds nothing
    lines = {True: [], False: []}
    models = {stream: fit(iter_corpus([b]), None, log=lines[stream].append, stream=stream,
                          stream_batch_tokens=10**6, **kw) for stream in (True, False)}
    assert same_space(models[True].space, models[False].space) == (True, "")
    np.testing.assert_array_equal(models[True].weights, models[False].weights)
    grown = [line for line in lines[True] if line.startswith("--init-space grow: the training data adds")]
    assert grown == [line for line in lines[False] if line.startswith("--init-space grow: the training data adds")]
    assert len(grown) == (init_space == "grow")
    assert (models[True].space is init.space) == (init_space == "keep")


def test_init_keep_refuses_a_label_of_the_streamed_files_at_its_line(data, tmp_path):
    init = train([data[0]], stream=False, algorithm="perceptron", max_iter=1)
    sents = read_corpus(data[1])
    rows = [list(map(list, s.rows)) for s in sents]
    rows[3][1][-1] = "B-NEW"
    path = tmp_path / "new.txt"
    path.write_text("".join("".join(" ".join(r) + "\n" for r in s) + "\n" for s in rows))
    with pytest.raises(CrftkError, match=r"label 'B-NEW' is not one of the --init model's \d+ labels") as e:
        fit(iter_corpus([path]), None, init=init, init_space="keep", log=quiet, algorithm="perceptron",
            stream=True, stream_batch_tokens=50)
    assert (e.value.path, e.value.line) == (str(path), sents[3].line + 1)
    crfsuite = dicts_model()
    with pytest.raises(CrftkError, match="an --init model of feature dicts"):
        fit(iter_corpus([data[0]]), None, init=crfsuite, log=quiet, algorithm="sgd", stream=True)


def dicts_model():
    import crftk
    return crftk.CRF(max_iter=1, threads=1).fit([[{"w": "a"}]], [["N"]]).model_
