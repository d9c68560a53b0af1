"""Tests for the Python API (crftk/api.py): the CRF estimator, read_conll and evaluate.

The estimator is trained on a slice of the demo corpus (data/demo.*) with few
iterations, once per module; the tests that need another model train their own
on a few sentences.
"""

import inspect
import io
import pickle
import pickletools
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from crftk import CRF, CrftkError, Model, NotFittedError, evaluate, read_conll
from crftk.api import BATCH_TOKENS
from crftk.io.conll import read_corpus
from crftk.commands.tag import Tagger
from crftk.params import TRAIN as TRAIN_PARAMS
from crftk.commands.train import train as train_files
from corpora import REPO

DEMO_TRAIN = REPO / "data" / "demo.train"
DEMO_TEST = REPO / "data" / "demo.test"
TEMPLATE = REPO / "templates" / "chunking-crfpp.tmpl"
SMALL_TEMPLATE = "U00:%x[0,0]\nU01:%x[0,1]\nU02:%x[-1,1]/%x[0,1]\nB\n"
OPTIONS = dict(max_iter=25, threads=1)

# a tiny corpus (word, POS; chunk labels apart), as read_conll returns it
TINY_X = [[["The", "DT"], ["cat", "NN"], ["sat", "VBD"], [".", "."]],
          [["A", "DT"], ["dog", "NN"], ["barked", "VBD"], [".", "."]],
          [["the", "DT"], ["dog", "NN"], ["sat", "VBD"]]]
TINY_Y = [["B-NP", "I-NP", "B-VP", "O"], ["B-NP", "I-NP", "B-VP", "O"], ["B-NP", "I-NP", "B-VP"]]


@pytest.fixture(scope="module")
def data():
    X, y = read_conll(DEMO_TRAIN, label_col=-1)
    Xt, yt = read_conll(DEMO_TEST, label_col=-1)
    return X[:400], y[:400], Xt[:100], yt[:100]


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _, _ = data
    return CRF(str(TEMPLATE), **OPTIONS).fit(X, y)


def write_conll(path, X, y):
    with open(path, "w") as f:
        for rows, labels in zip(X, y):
            for row, label in zip(rows, labels):
                f.write("\t".join([*row, label]) + "\n")
            f.write("\n")
    return path


# package exports ----------------------------------------------------------------
def test_import_crftk_stays_cheap_and_exports_the_api_lazily():
    code = ("import sys, crftk; assert 'numpy' not in sys.modules and 'crftk.api' not in sys.modules; "
            "print(crftk.evaluate.__module__, crftk.CRF.__name__, crftk.Model.__module__, "
            "'numpy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["crftk.api", "CRF", "crftk.model", "True"]


def test_evaluate_is_the_function_even_after_the_evaluation_module_is_imported():
    import crftk.evaluation.conlleval  # noqa: F401  (as train and the CLI do)
    assert callable(crftk.evaluate) and crftk.evaluate is evaluate
    assert crftk.evaluate([["B-NP", "I-NP"]], [["B-NP", "I-NP"]]).overall.f1 == 100.0
    assert {"CRF", "evaluate", "read_conll", "Model", "NotFittedError"} <= set(dir(crftk))
    with pytest.raises(AttributeError):
        crftk.no_such_name


# read_conll ---------------------------------------------------------------------
def test_read_conll_splits_the_label_column(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("-DOCSTART- -X- O\n\nThe DT B-NP\ncat NN I-NP\n\n-DOCSTART- -X- O\n\nA DT B-NP\n\n")
    assert read_conll(path) == [[["The", "DT", "B-NP"], ["cat", "NN", "I-NP"]], [["A", "DT", "B-NP"]]]
    X, y = read_conll(path, label_col=-1)
    assert X == [[["The", "DT"], ["cat", "NN"]], [["A", "DT"]]] and y == [["B-NP", "I-NP"], ["B-NP"]]
    X, y, docs = read_conll(str(path), label_col=0, docs=True)
    assert X == [[["DT", "B-NP"], ["NN", "I-NP"]], [["DT", "B-NP"]]] and y == [["The", "cat"], ["A"]]
    assert docs == [0, 1]


def test_read_conll_reads_several_files_and_reports_errors_with_their_place(tmp_path):
    a = write_conll(tmp_path / "a.txt", TINY_X[:1], TINY_Y[:1])
    b = write_conll(tmp_path / "b.txt", TINY_X[1:], TINY_Y[1:])
    assert read_conll([a, b], label_col=-1) == (TINY_X, TINY_Y)
    with pytest.raises(CrftkError) as e:
        read_conll(a, label_col=3)
    assert "label column 3" in str(e.value) and e.value.path == str(a)
    (tmp_path / "bad.txt").write_text("a b O\nc O\n")
    with pytest.raises(CrftkError) as e:
        read_conll(tmp_path / "bad.txt", label_col=-1)
    assert e.value.line == 2


# fit and the command line's training ------------------------------------------------
def test_fit_gives_the_model_crftk_train_gives(tmp_path, data, fitted):
    X, y, _, _ = data
    model = train_files([write_conll(tmp_path / "train.txt", X, y)], TEMPLATE, log=lambda m: None, **OPTIONS)
    np.testing.assert_array_equal(fitted.model_.weights, model.weights)
    assert fitted.model_.labels == model.labels == fitted.classes_
    assert fitted.model_.info["options"] == model.info["options"]


def test_template_as_path_text_or_lines_gives_the_same_model(tmp_path):
    path = tmp_path / "t.tmpl"
    path.write_text(SMALL_TEMPLATE)
    weights = [CRF(t, **OPTIONS).fit(TINY_X, TINY_Y).model_.weights
               for t in (path, str(path), SMALL_TEMPLATE, SMALL_TEMPLATE.splitlines(),
                         [line + "\n" for line in SMALL_TEMPLATE.splitlines()])]
    for w in weights[1:]:
        np.testing.assert_array_equal(w, weights[0])
    one_line = CRF("U00:%x[0,0]", **OPTIONS).fit(TINY_X, TINY_Y)
    assert one_line.model_.space.template.text.strip() == "U00:%x[0,0]"


def test_template_errors():
    with pytest.raises(CrftkError, match="no such file") as e:
        CRF("missing.tmpl").fit(TINY_X, TINY_Y)
    assert e.value.path == "missing.tmpl"
    with pytest.raises(CrftkError, match="<template>"):
        CRF("U00:%x[0,9]\n").fit(TINY_X, TINY_Y)
    with pytest.raises(TypeError, match="template must be"):
        CRF(3).fit(TINY_X, TINY_Y)
    # without a template, a row of strings is a list of attributes (python-crfsuite's input)
    plain = CRF(max_iter=2, threads=1).fit(TINY_X, TINY_Y)
    assert set(plain.model_.space.attributes) == {x for s in TINY_X for row in s for x in row}


def test_fit_with_a_development_set_keeps_the_best_iteration(data):
    X, y, Xt, yt = data
    crf = CRF(TEMPLATE, max_iter=8, threads=1).fit(X[:100], y[:100], Xt, yt)
    history = crf.model_.info["history"]
    f1 = [h["dev_f1"] for h in history]
    assert len(f1) == 8 and crf.model_.info["chosen_iteration"] == history[int(np.argmax(f1))]["iteration"]
    assert crf.score(Xt, yt) == pytest.approx(max(f1)) == crf.model_.info["best_dev_f1"]
    last = CRF(TEMPLATE, max_iter=8, threads=1, keep="last").fit(X[:100], y[:100], Xt, yt)
    assert last.model_.info["chosen_iteration"] == 8 and last.score(Xt, yt) == pytest.approx(f1[-1])
    with pytest.raises(CrftkError, match="both X_dev and y_dev"):
        crf.fit(X, y, Xt)


def test_label_column_first(tmp_path):
    # labels in column 0: the template numbers the columns of the full row, label included
    X = [[row[::-1] for row in rows] for rows in TINY_X]        # (POS, word)
    crf = CRF("U00:%x[0,2]\nU01:%x[0,1]\nB\n", label_col=0, **OPTIONS).fit(X, TINY_Y)
    reference = CRF("U00:%x[0,0]\nU01:%x[0,1]\nB\n", **OPTIONS).fit(TINY_X, TINY_Y)
    np.testing.assert_array_equal(crf.model_.weights, reference.model_.weights)
    assert crf.predict(X) == reference.predict(TINY_X) == TINY_Y


def test_fit_from_init_model(tmp_path, fitted, data):
    X, y, _, _ = data
    more = CRF(init=fitted.model_, max_iter=2, threads=1).fit(X[:50], y[:50])
    assert more.model_.labels == fitted.model_.labels
    assert more.model_.weights.shape == fitted.model_.weights.shape
    path = tmp_path / "m.crftk"
    fitted.save(path)
    again = CRF(init=str(path), max_iter=2, threads=1).fit(X[:50], y[:50])
    np.testing.assert_array_equal(again.model_.weights, more.model_.weights)
    with pytest.raises(CrftkError, match="leave template=None"):
        CRF(TEMPLATE, init=fitted.model_).fit(X, y)
    with pytest.raises(CrftkError, match="not one of"):     # the old space alone: an unknown label
        CRF(init=fitted.model_, init_space="keep", max_iter=2).fit([[["x", "NN"]]], [["B-NEW"]])
    grown = CRF(init=fitted.model_, max_iter=2).fit([[["x", "NN"]]], [["B-NEW"]])     # grow (the default)
    assert grown.model_.labels == sorted(fitted.model_.labels + ["B-NEW"])


def test_bad_data_and_options_are_crftk_errors():
    crf = CRF(SMALL_TEMPLATE, **OPTIONS)
    cases = [
        ((TINY_X, TINY_Y[:2]), "3 sentences but y has 2"),
        ((TINY_X, [TINY_Y[0], TINY_Y[1], ["O"]]), r"X\[2\] has 3 tokens but y\[2\] has 1"),
        ((TINY_X, [TINY_Y[0], TINY_Y[1], [1, 2, 3]]), r"^y\[2\] holds an int \('1'\); labels are strings$"),
        # None is an unknown label (partial labels, tests/test_api_partial.py); a set holds strings
        ((TINY_X, [TINY_Y[0], TINY_Y[1], [{1}, "O", "O"]]), r"^y\[2\]\[0\] is a label set holding an int"),
        ((TINY_X, ["B-NP"] * 3), r"y\[0\] is a str"),
        ((DEMO_TRAIN, TINY_Y), "read_conll"),
        ((["a sentence"], [["O"]]), r"X\[0\] is a str"),
        (([[["a", "b"], ["c"]]], [["O", "O"]]), r"X\[0\]\[1\] has 1 columns but X\[0\]\[0\] has 2"),
        (([[["a", 1]]], [["O"]]), r"^X\[0\]\[0\] holds an int \('1'\); columns are strings"),
        (([[["a", None]]], [["O"]]), r"^X\[0\]\[0\] holds None; columns are strings"),
        (([[]], [[]]), "no training sentences"),
    ]
    for args, message in cases:
        with pytest.raises(CrftkError, match=message):
            crf.fit(*args)
    for name, value in [("c2", -1), ("algorithm", "newton"), ("max_iter", 0)]:
        with pytest.raises(CrftkError, match=rf"^{name} must be"):     # the keyword, not --max-iter
            CRF(SMALL_TEMPLATE, **{name: value}).fit(TINY_X, TINY_Y)
    with pytest.raises(TypeError, match="unexpected keyword argument 'c3'"):
        CRF(SMALL_TEMPLATE, c3=1)


@pytest.mark.parametrize("label, message", [
    ("", r"y\[1\]\[2\] is an empty label"),
    ("B NP", r"y\[1\]\[2\] \('B NP'\) holds white space"),
    ("O\t", r"y\[1\]\[2\] \('O\\t'\) holds white space"),
    ("\u2003", r"y\[1\]\[2\] .* holds white space"),
])
def test_fit_refuses_a_label_that_no_model_file_can_hold(tmp_path, label, message):
    # issue 31: fit took it and save wrote the model, which CRF.load, crftk tag and pickle refused
    y = [list(TINY_Y[0]), list(TINY_Y[1]), list(TINY_Y[2])]
    y[1][2] = label
    with pytest.raises(CrftkError, match=message):
        CRF(SMALL_TEMPLATE, **OPTIONS).fit(TINY_X, y)
    with pytest.raises(CrftkError, match=message.replace("y", "y_dev", 1)):
        CRF(SMALL_TEMPLATE, **OPTIONS).fit(TINY_X, TINY_Y, TINY_X, y)


@pytest.mark.parametrize("X, y, message", [
    # each was a raw TypeError (or KeyError) from inside the estimator
    ([None, TINY_X[1]], TINY_Y[:2], r"X\[0\] is None: a sentence is a list of token rows"),
    ([[None, ["cat", "NN"]]], [["B-NP", "I-NP"]], r"X\[0\]\[0\] is None: a token row is a list"),
    ([[["The", "DT"], 7]], [["B-NP", "I-NP"]], r"X\[0\]\[1\] is an int: a token row is a list"),
    ([1, 2], [["O"], ["O"]], r"X\[0\] is an int: a sentence is a list of token rows"),
    ({"a": 1, "b": 2}, [["O"], ["O"]], "X is a dict: it must be a list with one entry per sentence"),
    ({0: TINY_X[0], 1: TINY_X[1]}, TINY_Y[:2], "X is a dict"),
    (7, TINY_Y, "X must be a list with one entry per sentence, not an int"),
    (TINY_X, [None, TINY_Y[1], TINY_Y[2]], r"y\[0\] is None: y holds one sequence of labels"),
    (TINY_X, {0: TINY_Y[0]}, "y is a dict"),
])
def test_input_of_the_wrong_shape_is_a_crftk_error(X, y, message):
    with pytest.raises(CrftkError, match=message):
        CRF(SMALL_TEMPLATE, **OPTIONS).fit(X, y)


def test_predict_and_score_refuse_input_of_the_wrong_shape(fitted_tiny):
    for X, message in [([None], r"X\[0\] is None"), ([[None]], r"X\[0\]\[0\] is None"), ([3], r"X\[0\] is an int"),
                       ({"a": 1}, "X is a dict")]:
        with pytest.raises(CrftkError, match=message):
            fitted_tiny.predict(X)
    with pytest.raises(CrftkError, match=r"y\[0\] is None"):
        fitted_tiny.score(TINY_X, [None, TINY_Y[1], TINY_Y[2]])


@pytest.fixture(scope="module")
def fitted_tiny():
    return CRF(SMALL_TEMPLATE, **OPTIONS).fit(TINY_X, TINY_Y)


def test_training_warnings_are_python_warnings_and_verbose_logs(capsys):
    with pytest.warns(UserWarning, match="no U lines"):
        CRF("B\n", **OPTIONS).fit(TINY_X, TINY_Y)
    assert capsys.readouterr().err == ""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        crf = CRF(SMALL_TEMPLATE, max_iter=2, threads=10**6).fit(TINY_X, TINY_Y)
        crf.predict(TINY_X)
    assert [str(w.message).count("threads per core") for w in caught] == [1, 1]    # once per call
    assert capsys.readouterr().err == ""
    CRF(SMALL_TEMPLATE, verbose=True, **OPTIONS).fit(TINY_X, TINY_Y)
    err = capsys.readouterr().err
    assert "read 3 sentences, 11 tokens" in err and "iter" in err


def test_trace_and_checkpoint_files(tmp_path):
    trace = tmp_path / "trace.tsv"
    checkpoint = tmp_path / "ck.crftk"
    CRF(SMALL_TEMPLATE, max_iter=4, threads=1, trace=trace, checkpoint=checkpoint,
        checkpoint_every=2).fit(TINY_X, TINY_Y)
    assert len(trace.read_text().splitlines()) >= 4
    assert Model.load(checkpoint).info["iterations"] in (2, 4)
    out = io.StringIO()
    CRF(SMALL_TEMPLATE, max_iter=4, threads=1, trace=out).fit(TINY_X, TINY_Y)
    objectives = [line.split("\t")[3] for line in trace.read_text().splitlines()]
    assert [line.split("\t")[3] for line in out.getvalue().splitlines()] == objectives
    with pytest.raises(CrftkError, match="directory .* does not exist"):
        CRF(SMALL_TEMPLATE, trace=tmp_path / "no" / "t.tsv").fit(TINY_X, TINY_Y)
    with pytest.raises(CrftkError, match="needs checkpoint"):
        CRF(SMALL_TEMPLATE, checkpoint_every=2).fit(TINY_X, TINY_Y)
    with pytest.raises(CrftkError, match="^checkpoint_every must be an integer from 0"):
        CRF(SMALL_TEMPLATE, checkpoint_every=-1, checkpoint=checkpoint).fit(TINY_X, TINY_Y)


# predict, marginals, n-best, score ----------------------------------------------
def test_predict_gives_what_the_tagger_gives(fitted, data):
    _, _, Xt, _ = data
    sentences = read_corpus(DEMO_TEST)[:100]
    expected = Tagger(fitted.model_).tag(sentences)
    assert fitted.predict(Xt) == expected
    # empty sentences keep their place
    assert fitted.predict([[], Xt[0], []]) == [[], expected[0], []]
    assert fitted.predict([]) == []


def test_predict_in_batches_equals_one_batch(fitted, data, monkeypatch):
    _, _, Xt, _ = data
    whole = fitted.predict(Xt)
    monkeypatch.setattr("crftk.api.BATCH_TOKENS", 50)
    assert BATCH_TOKENS > sum(map(len, Xt)) and fitted.predict(Xt) == whole
    assert fitted.predict_marginals(Xt, as_arrays=True)[-1].shape == (len(Xt[-1]), len(fitted.classes_))


def test_predict_marginals(fitted, data):
    _, _, Xt, _ = data
    arrays = fitted.predict_marginals(Xt, as_arrays=True)
    dicts = fitted.predict_marginals(Xt)
    predicted = fitted.predict(Xt)
    assert len(arrays) == len(dicts) == len(Xt)
    agree = total = 0
    for a, d, x, p in zip(arrays, dicts, Xt, predicted):
        assert a.shape == (len(x), len(fitted.classes_))
        np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-9)
        assert [list(row) for row in d] == [fitted.classes_] * len(x)
        np.testing.assert_allclose([[row[c] for c in fitted.classes_] for row in d], a)
        best = [fitted.classes_[j] for j in a.argmax(axis=1)]
        agree += sum(b == q for b, q in zip(best, p))
        total += len(p)
    assert agree / total > 0.98       # max-marginal and Viterbi labels rarely differ
    assert fitted.predict_marginals([[]], as_arrays=True)[0].shape == (0, len(fitted.classes_))


def test_predict_nbest(fitted, data):
    _, _, Xt, _ = data
    nbest = fitted.predict_nbest(Xt[:20], 5)
    for lists, best, x in zip(nbest, fitted.predict(Xt[:20]), Xt):
        assert len(lists) == 5 and lists[0][0] == best
        probs = [p for _, p in lists]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-9
        assert len({tuple(labels) for labels, _ in lists}) == 5
        assert all(len(labels) == len(x) for labels, _ in lists)
    # a one-token sentence of L labels has L labelings, whose probabilities are its marginals
    one = [[Xt[0][0]]]
    lists = fitted.predict_nbest(one, 100)[0]
    marg = fitted.predict_marginals(one)[0][0]
    assert len(lists) == len(fitted.classes_)
    assert {labels[0]: p for labels, p in lists} == pytest.approx(marg)
    assert fitted.predict_nbest([[]], 3) == [[([], 1.0)]]
    for k in (0, -1, 2.5, True):
        with pytest.raises(CrftkError, match="positive number"):
            fitted.predict_nbest(Xt, k)


def test_score_is_conlleval_chunk_f1(fitted, data):
    _, _, Xt, yt = data
    score = fitted.score(Xt, yt)
    assert score == evaluate(yt, fitted.predict(Xt)).overall.f1
    assert 80 < score < 100
    assert fitted.score(Xt[:5], fitted.predict(Xt[:5])) == 100.0
    with pytest.raises(CrftkError, match="100 sentences but y has 99"):
        fitted.score(Xt, yt[:99])


def test_predict_errors(fitted, data):
    X, _, _, _ = data
    with pytest.raises(CrftkError, match=r"has 3 columns, rows of 2 columns are expected: the model reads "
                                         r"columns 0 and 1 of the 3 it was trained on; rows hold the input"):
        fitted.predict([[[*X[0][0], "B-NP"]]])
    with pytest.raises(CrftkError, match=r"X\[0\]\[0\] has 1 columns, rows of 2 columns are expected: the "
                                         r"model reads columns 0 and 1"):
        fitted.predict([["word"]])
    for method in ("predict", "predict_marginals", "score"):
        with pytest.raises(NotFittedError, match="not fitted") as e:
            getattr(CRF(TEMPLATE), method)(*((X, X) if method == "score" else (X,)))
        assert isinstance(e.value, ValueError) and isinstance(e.value, CrftkError)
    with pytest.raises(NotFittedError):
        CRF(TEMPLATE).save("never-written.crftk")
    assert not Path("never-written.crftk").exists()


def test_one_column_rows_may_be_bare_strings():
    X = [[row[0] for row in rows] for rows in TINY_X]
    crf = CRF("U00:%x[0,0]\nB\n", **OPTIONS).fit(X, TINY_Y)
    assert crf.predict(X) == crf.predict([[[w] for w in x] for x in X]) == TINY_Y


def test_memm_predicts_but_has_no_marginals():
    crf = CRF(SMALL_TEMPLATE, model_type="memm", **OPTIONS).fit(TINY_X, TINY_Y)
    assert crf.predict(TINY_X) == TINY_Y
    with pytest.raises(CrftkError, match="CRFs only"):
        crf.predict_marginals(TINY_X)
    with pytest.raises(CrftkError, match="CRFs only"):
        crf.predict_nbest(TINY_X, 2)


def test_second_order_marginals_are_over_tags():
    crf = CRF(SMALL_TEMPLATE, order=2, **OPTIONS).fit(TINY_X, TINY_Y)
    assert crf.classes_ == ["B-NP", "B-VP", "I-NP", "O"]
    assert crf.predict(TINY_X) == TINY_Y
    marg = crf.predict_marginals(TINY_X, as_arrays=True)
    assert all(m.shape[1] == 4 for m in marg)
    np.testing.assert_allclose(np.concatenate(marg).sum(axis=1), 1.0)
    assert crf.predict_nbest(TINY_X, 2)[0][0][0] == TINY_Y[0]


def test_documents_for_first_mention_features():
    # %^x: the first mention of a word in its document; docs numbers the documents of X
    X = [[["Smith", "NNP"], ["spoke", "VBD"]], [["Smith", "NNP"], ["left", "VBD"]]]
    y = [["B-PER", "O"], ["I-PER", "O"]]      # a second mention labeled apart
    crf = CRF("U00:%x[0,0]\nU01:%^x[0,1]\nB\n", **OPTIONS).fit(X, y, docs=[0, 0])
    assert crf.predict(X, docs=[0, 0]) == y and crf.predict(X, docs=[0, 1])[1][0] != "I-PER"
    same = crf.predict_marginals(X, docs=[0, 0], as_arrays=True)
    apart = crf.predict_marginals(X, docs=[0, 1], as_arrays=True)
    np.testing.assert_array_equal(same[0], apart[0])
    assert not np.array_equal(same[1], apart[1])
    with pytest.raises(CrftkError, match="docs has 1 entries"):
        crf.predict(X, docs=[0])
    with pytest.raises(CrftkError, match="non-negative ints"):
        crf.predict(X, docs=[0, -1])


# parameters: scikit-learn's protocol, without scikit-learn -------------------------
def test_signature_and_get_params_follow_the_training_options():
    signature = inspect.signature(CRF)
    names = list(signature.parameters)
    assert names[0] == "template"
    train_names = [p.name for p in TRAIN_PARAMS]
    assert names[1:1 + len(train_names)] == train_names
    assert {p.name: p.default for p in TRAIN_PARAMS} == \
        {n: signature.parameters[n].default for n in train_names}
    assert set(names) == set(CRF().get_params())
    assert CRF().get_params() == {n: p.default for n, p in signature.parameters.items()}
    for p in TRAIN_PARAMS:
        assert f"{p.name} = {p.default!r}" in CRF.__doc__


def test_get_params_set_params_and_clone_semantics():
    crf = CRF(SMALL_TEMPLATE, c2=0.5, algorithm="cg")
    params = crf.get_params()
    assert params["template"] is SMALL_TEMPLATE and params["c2"] == 0.5 and params["algorithm"] == "cg"
    clone = type(crf)(**params)             # what sklearn.base.clone does
    assert clone.get_params() == params and all(clone.get_params()[k] is v for k, v in params.items())
    assert crf.set_params(c2=2.0, max_iter=3) is crf and crf.c2 == 2.0 and crf.max_iter == 3
    assert crf.get_params(deep=False)["c2"] == 2.0
    with pytest.raises(ValueError, match="invalid parameter 'c3'"):
        crf.set_params(c3=1)
    assert repr(crf) == f"CRF(template={SMALL_TEMPLATE!r}, algorithm='cg', c2=2.0, max_iter=3)"
    # values are stored as given and checked when fitting (sklearn's rule)
    assert CRF(c2="x").c2 == "x"


def test_fit_resets_the_model_and_set_params_takes_effect():
    crf = CRF(SMALL_TEMPLATE, max_iter=1, threads=1).fit(TINY_X, TINY_Y)
    first = crf.model_
    crf.set_params(max_iter=20).fit(TINY_X, TINY_Y)
    assert crf.model_ is not first and crf.model_.info["iterations"] > 1


# save, load, pickle -------------------------------------------------------------
def test_save_and_load(tmp_path, fitted, data):
    _, _, Xt, _ = data
    path = tmp_path / "demo.crftk"
    fitted.save(path)
    loaded = CRF.load(path)
    assert loaded.predict(Xt) == fitted.predict(Xt)
    np.testing.assert_array_equal(loaded.predict_marginals(Xt[:3], as_arrays=True)[2],
                                  fitted.predict_marginals(Xt[:3], as_arrays=True)[2])
    assert loaded.get_params()["c2"] == fitted.c2 and loaded.max_iter == fitted.max_iter
    assert loaded.template == fitted.model_.space.template.text
    assert Model.load(path).weights.tobytes() == fitted.model_.weights.tobytes()


def test_load_a_model_of_the_command_line(tmp_path):
    from click.testing import CliRunner
    from crftk.cli import main
    train = write_conll(tmp_path / "t.txt", TINY_X, TINY_Y)
    (tmp_path / "t.tmpl").write_text(SMALL_TEMPLATE)
    result = CliRunner().invoke(main, ["train", "-t", str(tmp_path / "t.tmpl"), "-m", str(tmp_path / "m"),
                                       "--c2", "0.25", "--max-iter", "30", str(train)])
    assert result.exit_code == 0, result.output
    crf = CRF.load(tmp_path / "m")
    assert crf.c2 == 0.25 and crf.predict(TINY_X) == TINY_Y
    # refitting the loaded estimator trains from the stored template text and options
    again = CRF(**crf.get_params()).fit(TINY_X, TINY_Y)
    np.testing.assert_array_equal(again.model_.weights, crf.model_.weights)


def test_pickle_goes_through_the_model_bytes(fitted, data):
    _, _, Xt, _ = data
    blob = pickle.dumps(fitted)
    # the only class named in the stream is CRF itself: the model travels as its file's bytes
    names = {arg for _, arg, _ in pickletools.genops(blob) if isinstance(arg, str)}
    assert {n for n in names if n.startswith(("crftk.", "numpy", "builtins"))} == {"crftk.api"}
    assert fitted.model_.to_bytes() in blob
    restored = pickle.loads(blob)
    assert restored.predict(Xt) == fitted.predict(Xt)
    assert restored.get_params() == fitted.get_params() and restored.classes_ == fitted.classes_
    unfitted = pickle.loads(pickle.dumps(CRF(SMALL_TEMPLATE, c2=3.0)))
    assert unfitted.c2 == 3.0 and not hasattr(unfitted, "model_")
    with_init = pickle.loads(pickle.dumps(CRF(init=fitted.model_)))
    np.testing.assert_array_equal(with_init.init.weights, fitted.model_.weights)


def test_unpickling_checks_the_model(fitted):
    state = fitted.__getstate__()
    state["model"] = state["model"][:-10]
    with pytest.raises(CrftkError, match="pickled CRF"):
        CRF().__setstate__(state)
    with pytest.raises(CrftkError, match="not the pickled state"):
        CRF().__setstate__({"params": {}})


# thread safety ------------------------------------------------------------------
def test_threads_tagging_one_model_at_once_agree_with_tagging_alone(fitted, data):
    _, _, Xt, _ = data
    blob = fitted.model_.to_bytes()
    reference = CRF._from_model(Model.from_bytes(blob))
    expected = (reference.predict(Xt), reference.predict_marginals(Xt, as_arrays=True))
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)            # switch threads often: races show up if there are any
    try:
        for _ in range(3):
            # a model fresh from its bytes: the lazy lookup tables are built by the threads
            shared = CRF._from_model(Model.from_bytes(blob))
            shared.threads = 1
            start = threading.Barrier(8)
            results, errors = [None] * 8, []

            def work(i):
                try:
                    start.wait()
                    results[i] = (shared.predict(Xt), shared.predict_marginals(Xt, as_arrays=True))
                except Exception as e:      # reported below: a thread's exception is otherwise lost
                    errors.append(e)

            threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors
            for labels, marginals in results:
                assert labels == expected[0]
                for a, b in zip(marginals, expected[1]):
                    np.testing.assert_array_equal(a, b)
    finally:
        sys.setswitchinterval(old)


def test_lookup_tables_are_published_only_when_complete(fitted, data):
    # another thread may read a line's lazy table as soon as it is set: it must be whole then
    from crftk.features.space import CompiledLine

    published = []

    class Watched(CompiledLine):
        def __setattr__(self, name, value):
            if name == "table" and value is not None:
                published.append((self, value.copy()))
            super().__setattr__(name, value)

    model = Model.from_bytes(fitted.model_.to_bytes())
    for cl in model.space.unigram_lines:
        cl.__class__ = Watched
    CRF._from_model(model).predict(data[2])
    assert published
    for cl, seen in published:
        assert (seen >= 0).sum() == cl.keys.size
        np.testing.assert_array_equal(seen, cl.table)


# evaluate -----------------------------------------------------------------------
def test_evaluate_lists_and_files(tmp_path):
    gold = [["B-NP", "I-NP", "O", "B-VP"], ["B-NP"]]
    pred = [["B-NP", "I-NP", "O", "B-NP"], ["B-NP"]]
    e = evaluate(gold, pred)
    assert (e.overall.n_correct, e.overall.n_gold, e.overall.n_pred) == (2, 3, 3)
    assert e.overall.f1 == pytest.approx(200 / 3)
    one = tmp_path / "tagged.txt"
    one.write_text("".join("".join(f"w {g} {p}\n" for g, p in zip(gs, ps)) + "\n" for gs, ps in zip(gold, pred)))
    assert evaluate(one).to_dict() == e.to_dict()
    assert evaluate(str(one), gold_col=1, pred_col=2).to_dict() == e.to_dict()
    g = write_conll(tmp_path / "g.txt", [[["w"]] * len(s) for s in gold], gold)
    p = write_conll(tmp_path / "p.txt", [[["w"]] * len(s) for s in pred], pred)
    assert evaluate(g, p).to_dict() == e.to_dict()
    with pytest.raises(TypeError, match="mixture"):
        evaluate(g, pred)
    with pytest.raises(TypeError, match="two label lists"):
        evaluate(gold)
    with pytest.raises(CrftkError, match=r"pred\[0\] holds an int"):
        evaluate(gold, [[1, 2, 3, 4], ["O"]])
    with pytest.raises(CrftkError, match="scheme|iob"):
        evaluate([["I-NP", "B-X"]], [["I-NP", "B-X"]], scheme="bilou")


# scikit-learn, when it is installed ----------------------------------------------
def test_scikit_learn_clone_cross_validation_and_grid_search(data):
    sklearn = pytest.importorskip("sklearn")  # noqa: F841
    from sklearn.base import clone
    from sklearn.model_selection import GridSearchCV, cross_val_score
    from sklearn.utils.validation import check_is_fitted

    X, y, _, _ = data
    crf = CRF(TEMPLATE, max_iter=10, threads=1)
    copy = clone(crf)
    assert copy is not crf and copy.get_params() == crf.get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("error")      # no deprecation or tag warnings from sklearn
        scores = cross_val_score(crf, X[:150], y[:150], cv=3)
        assert scores.shape == (3,) and all(50 < s <= 100 for s in scores)
        search = GridSearchCV(crf, {"c2": [0.1, 10.0]}, cv=2).fit(X[:100], y[:100])
    assert search.best_params_["c2"] in (0.1, 10.0)
    check_is_fitted(search.best_estimator_)
    with pytest.raises(sklearn.exceptions.NotFittedError):
        check_is_fitted(CRF(TEMPLATE))


def test_a_crf_that_reads_the_words_only_predicts_from_the_words_alone():
    # a POS tagger trained on `word POS chunk` rows (the POS tag its label, column 1)
    X = [[[w, c] for (w, _), c in zip(rows, chunks)] for rows, chunks in zip(TINY_X, TINY_Y)]
    y = [[p for _, p in rows] for rows in TINY_X]
    crf = CRF("U0:%x[0,0]\nU1:%x[-1,0]\nB\n", label_col=1, **OPTIONS).fit(X, y)
    words = [[[w] for w, _ in rows] for rows in X]
    assert crf.predict(words) == crf.predict(X) == y
    assert crf.predict([["The", "dog"]]) == [["DT", "NN"]]
    marg, want = crf.predict_marginals(words, as_arrays=True), crf.predict_marginals(X, as_arrays=True)
    assert all(np.array_equal(a, b) for a, b in zip(marg, want))
    with pytest.raises(CrftkError, match=r"X\[0\]\[0\] has 3 columns, rows of 1 or 2 columns are expected: the "
                                         r"model reads column 0 of the 3 it was trained on; rows hold the input"):
        crf.predict([[["The", "DT", "B-NP"]]])
