"""The estimators of crftk/api.py (CRF, Bag, FactorialCRF, Pipeline) as scikit-learn, joblib and
multiprocessing use them: parameters, pickling, clone, cross_val_predict; and how their errors
name options and refuse feature-dict input.

Small models: a slice of the demo corpus, a few iterations, one thread.
"""

import multiprocessing
import pickle
import pickletools

import numpy as np
import pytest

import crftk
from crftk import CRF, Bag, CrftkError, FactorialCRF, Pipeline, read_conll
from crftk.api import BAG_PARAMS, FACTORIAL_PARAMS, PARAMS, Labelings
from crftk.params import Integer, Real
from corpora import REPO

# string tests with arguments (%suf, %t, %ngram): what made a fitted model unpicklable
WORDS = 'U00:%x[0,0]\nU01:%suf[0,0,2]\nU02:%t[0,0,"^[A-Z]"]\nU03:%x[-1,0]\nB\n'
TAGS = "U00:%x[0,1]\nU01:%x[-1,1]/%x[0,1]\nU02:%ngram[0,0,2,2]\nB\n"
CHUNKER = "U00:%x[0,0]\nU01:%x[0,1]\nU02:%x[-1,1]/%x[0,1]\nU03:%x[1,1]\nB\n"
TAGGER = 'U00:%x[0,0]\nU01:%suf[0,0,3]\nU02:%T[0,0,"^[a-z]+$"]\nU03:%x[1,0]\nB\n'
FACTORIAL = "U00:%x[0,0]\nU01:%suf[0,0,2]\nU02:%x[-1,0]\nB\nP00:%x[0,0]\n"
FAST = dict(max_iter=8, threads=1)


@pytest.fixture(scope="module")
def data():
    X, y = read_conll(REPO / "data" / "demo.train", label_col=-1)
    Xt, yt = read_conll(REPO / "data" / "demo.test", label_col=-1)
    return X[:90], y[:90], Xt[:30], yt[:30]


@pytest.fixture(scope="module")
def bag(data):
    X, y, _, _ = data
    return Bag([WORDS, TAGS], c2=0.5, **FAST).fit(X, y)


@pytest.fixture(scope="module")
def factorial(data):
    X, y, _, _ = data
    return FactorialCRF(FACTORIAL, c2=0.5, **FAST).fit(*factorial_data(X, y))


@pytest.fixture(scope="module")
def pipeline(data):
    X, y, _, _ = data
    pos = [[row[1] for row in s] for s in X]
    tagger = CRF(TAGGER, label_col=1, **FAST).fit([[[row[0], c] for row, c in zip(s, ys)] for s, ys in zip(X, y)],
                                                   pos)
    chunker = CRF(CHUNKER, **FAST).fit(X, y)
    return Pipeline.compose([tagger, chunker], [1], names=["pos", "chunk"])


def factorial_data(X, y):
    """Words as X, and the (POS, chunk) chains as Y."""
    return [[[row[0]] for row in s] for s in X], [[[row[1] for row in s] for s in X], y]


def predictions(est, X):
    if isinstance(est, FactorialCRF):
        return est.predict(factorial_data(X, [[]] * len(X))[0])
    return est.predict(X)


def crftk_names(blob):
    """The modules of the classes and functions a pickle names (crftk, numpy, builtins ones)."""
    names = {arg for _, arg, _ in pickletools.genops(blob) if isinstance(arg, str)}
    return {n for n in names if n.startswith(("crftk.", "numpy", "builtins"))}


# pickling ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["bag", "factorial", "pipeline"])
def test_a_fitted_estimator_pickles_as_its_model_bytes_and_predicts_the_same(kind, request, data):
    est = request.getfixturevalue(kind)
    _, _, Xt, _ = data
    blob = pickle.dumps(est)
    # the only crftk module named in the stream is the API's: the model travels as its file's bytes
    assert crftk_names(blob) == {"crftk.api"}
    model_bytes = (est.pipeline_.to_model() if kind == "pipeline" else est.model_).to_bytes()
    assert model_bytes in blob
    restored = pickle.loads(blob)
    assert predictions(restored, Xt) == predictions(est, Xt)
    assert restored.get_params().keys() == est.get_params().keys()
    if kind == "pipeline":
        # the stages' models, stored once (as the pipeline file's stages, without training history)
        assert [m.weights.tobytes() for m in restored.models] == [m.weights.tobytes() for m in est.models]
        assert all(m is s.model for m, s in zip(restored.models, restored.pipeline_.stages))
        assert restored.stage_labels == est.stage_labels
        assert {k: v for k, v in restored.get_params().items() if k != "models"} == \
               {k: v for k, v in est.get_params().items() if k != "models"}
    else:
        assert restored.get_params() == est.get_params() and restored.classes_ == est.classes_


@pytest.mark.parametrize("make", [lambda: Bag([WORDS, TAGS], c2=3.0, combine="seq-mixture"),
                                  lambda: FactorialCRF(FACTORIAL, c2=3.0, inference="trp", warm_start=True)])
def test_an_unfitted_estimator_pickles_with_its_parameters(make):
    est = make()
    restored = pickle.loads(pickle.dumps(est))
    assert restored.get_params() == est.get_params() and not hasattr(restored, "model_")
    assert restored.c2 == 3.0


@pytest.mark.parametrize("kind", ["Bag", "FactorialCRF", "Pipeline"])
def test_unpickling_checks_the_state(kind, bag, factorial, pipeline):
    est = {"Bag": bag, "FactorialCRF": factorial, "Pipeline": pipeline}[kind]
    state = est.__getstate__()
    key = "pipeline" if kind == "Pipeline" else "model"
    state[key] = state[key][:-10]
    with pytest.raises(CrftkError, match=f"pickled {kind}"):
        type(est).__new__(type(est)).__setstate__(state)
    with pytest.raises(CrftkError, match=f"not the pickled state of a crftk {kind}"):
        type(est).__new__(type(est)).__setstate__({"params": {}})


def _predict_pickled(blob_and_X):
    blob, X = blob_and_X
    return pickle.loads(blob).predict(X)


def test_another_process_predicts_with_a_pickled_bag_and_pipeline(bag, pipeline, data):
    # what multiprocessing and joblib do: pickle here, unpickle in a fresh interpreter
    _, _, Xt, _ = data
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        got = pool.map(_predict_pickled, [(pickle.dumps(bag), Xt), (pickle.dumps(pipeline), Xt)])
    assert got == [bag.predict(Xt), pipeline.predict(Xt)]


# parameters and clone --------------------------------------------------------------------
@pytest.mark.parametrize("est", [Bag([WORDS, TAGS], c2=0.5, random_bags=0, verbose=False),
                                 FactorialCRF(FACTORIAL, inference="bp", max_sweeps=7, c1=0.0)],
                         ids=["Bag", "FactorialCRF"])
def test_get_params_follow_init_and_set_params_sets_them(est):
    params = est.get_params()
    assert list(params) == [p.name for p in type(est)._PARAMS]
    again = type(est)(**params)              # what sklearn.base.clone does
    assert again.get_params() == params and all(again.get_params()[k] is v for k, v in params.items())
    assert type(est)(params[type(est)._PARAMS[0].name]).get_params() == {
        p.name: params[p.name] if i == 0 else p.default for i, p in enumerate(type(est)._PARAMS)}
    assert again.set_params(c2=4.0) is again and again.c2 == 4.0 and again.get_params()["c2"] == 4.0
    with pytest.raises(ValueError, match="invalid parameter 'c3'"):
        again.set_params(c3=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'c3'"):
        type(est)(params[type(est)._PARAMS[0].name], c3=1)


def test_factorial_crf_takes_no_label_col():
    with pytest.raises(TypeError, match="label_col"):
        FactorialCRF(FACTORIAL, label_col=1)


def test_pipeline_parameters_rebuild_it(pipeline, data):
    _, _, Xt, _ = data
    params = pipeline.get_params()
    assert list(params) == ["models", "feeds", "names", "threads"] and params["feeds"] == [1]
    again = Pipeline(**params)
    assert again.get_params() == params and again.predict(Xt) == pipeline.predict(Xt)
    assert again.set_params(names=["a", "b"]) is again and [s.name for s in again.pipeline_.stages] == ["a", "b"]
    with pytest.raises(CrftkError, match=r"^feeds 5: .* has columns 0\.\.2"):
        again.set_params(feeds=[5])
    assert again.feeds == [1] and again.predict(Xt) == pipeline.predict(Xt)     # left as it was


def test_a_loaded_pipeline_has_its_stages_as_parameters(pipeline, data, tmp_path):
    _, _, Xt, _ = data
    pipeline.save(tmp_path / "p.pipeline")
    loaded = Pipeline.load(tmp_path / "p.pipeline")
    assert loaded.feeds == [1] and loaded.names == ["pos", "chunk"]
    assert [m.to_bytes() for m in loaded.models] == [s.model.to_bytes() for s in loaded.pipeline_.stages]
    rebuilt = Pipeline(**loaded.get_params())
    assert rebuilt.predict(Xt) == loaded.predict(Xt) == pipeline.predict(Xt)


@pytest.mark.parametrize("kind", ["bag", "factorial", "pipeline"])
def test_scikit_learn_clone(kind, request, data):
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    est = request.getfixturevalue(kind)
    copy = clone(est)
    if kind == "pipeline":     # its stages come trained: the copy holds copies of their models
        _, _, Xt, _ = data
        assert copy.feeds == est.feeds and copy.predict(Xt) == est.predict(Xt)
    else:                      # an unfitted copy with the same parameters
        assert copy.get_params() == est.get_params() and not hasattr(copy, "model_")


# cross_val_predict -------------------------------------------------------------------------
def test_predict_returns_labelings_numpy_sees_as_sentences(data, bag):
    _, _, Xt, _ = data
    pred = bag.predict(Xt[:3])
    assert isinstance(pred, Labelings) and isinstance(pred, list) and pred == [list(p) for p in pred]
    as_array = np.asarray(pred)
    assert as_array.shape == (3,) and as_array.dtype == object and as_array[1] == pred[1]
    same_length = Labelings([["O", "O"], ["B-NP", "I-NP"]])
    assert np.asarray(same_length).shape == (2,)


@pytest.mark.parametrize("make", [lambda: CRF(WORDS, c2=0.5, **FAST), lambda: Bag([WORDS, TAGS], c2=0.5, **FAST)],
                         ids=["CRF", "Bag"])
def test_cross_val_predict_gives_each_sentence_its_out_of_fold_labels(make, data):
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import KFold, cross_val_predict
    X, y, _, _ = data
    X, y = X[:60], y[:60]
    est = make()
    got = cross_val_predict(est, X, y, cv=3)
    assert got.shape == (len(X),) and [len(p) for p in got] == [len(s) for s in X]
    want = [None] * len(X)
    for train, test in KFold(3).split(X):
        fold = clone(est).fit([X[i] for i in train], [y[i] for i in train])
        for i, labels in zip(test, fold.predict([X[i] for i in test])):
            want[i] = labels
    assert list(got) == want
    assert crftk.evaluate(y, got).overall.f1 > 30


def test_factorial_cross_validation_recipe(data):
    # Y is chain-major, which cross_val_predict cannot split: the README's KFold loop
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import KFold
    X, y, _, _ = data
    words, Y = factorial_data(X[:40], y[:40])
    est = FactorialCRF(FACTORIAL, **FAST)
    pred = [[None] * len(words) for _ in Y]
    for train, test in KFold(2).split(words):
        fold = clone(est).fit([words[i] for i in train], [[chain[i] for i in train] for chain in Y])
        for c, labels in enumerate(fold.predict([words[i] for i in test])):
            for i, sent in zip(test, labels):
                pred[c][i] = sent
    assert all(len(p) == len(w) for chain in pred for p, w in zip(chain, words))


# errors name options as Python keywords ----------------------------------------------------
def _bad_value(p):
    """A value the declaration refuses."""
    if p.choices:
        return "no-such-choice"
    t = p.type
    if t.min is not None:
        return t.min if isinstance(t, Real) and t.min_open else t.min - 1
    return t.max + 1


def _checked(params):
    return [p for p in params if p.choices or isinstance(p.type, (Integer, Real))]


TINY_X = [[["The", "DT"], ["cat", "NN"]], [["A", "DT"], ["dog", "NN"], ["sat", "VBD"]]]
TINY_Y = [["B-NP", "I-NP"], ["B-NP", "I-NP", "B-VP"]]


@pytest.mark.parametrize("p", _checked(PARAMS), ids=lambda p: p.name)
def test_crf_errors_name_every_parameter_by_its_keyword(p):
    with pytest.raises(CrftkError, match=rf"^{p.name} must be ") as e:
        CRF("U00:%x[0,0]\nB\n", **{"max_iter": 2, p.name: _bad_value(p)}).fit(TINY_X, TINY_Y)
    assert "--" not in str(e.value)


@pytest.mark.parametrize("p", _checked(BAG_PARAMS), ids=lambda p: p.name)
def test_bag_errors_name_every_parameter_by_its_keyword(p):
    with pytest.raises(CrftkError, match=rf"^{p.name} must be ") as e:
        Bag(["U00:%x[0,0]\nB\n", "U00:%x[0,1]\nB\n"], **{"max_iter": 2, p.name: _bad_value(p)}).fit(TINY_X, TINY_Y)
    assert "--" not in str(e.value)


@pytest.mark.parametrize("p", _checked(FACTORIAL_PARAMS), ids=lambda p: p.name)
def test_factorial_errors_name_every_parameter_by_its_keyword(p):
    words, Y = [[[r[0]] for r in s] for s in TINY_X], [[[r[1] for r in s] for s in TINY_X], TINY_Y]
    with pytest.raises(CrftkError, match=rf"^{p.name} must be ") as e:
        FactorialCRF("U00:%x[0,0]\nB\n", **{"max_iter": 2, p.name: _bad_value(p)}).fit(words, Y)
    assert "--" not in str(e.value)


def test_options_that_do_not_go_together_are_named_by_keyword_too(pipeline, data):
    cases = [(dict(algorithm="sgd", c2=0.0), "^algorithm sgd needs c2 > 0"),
             (dict(algorithm="cg", c1=1.0), "use lbfgs .* for c1$"),
             (dict(order=2, algorithm="gis"), "^order 2 trains with algorithm lbfgs")]
    for options, message in cases:
        with pytest.raises(CrftkError, match=message):
            CRF("U00:%x[0,0]\nB\n", **options).fit(TINY_X, TINY_Y)
    with pytest.raises(CrftkError, match="^threads must be"):
        Pipeline(pipeline.models, [1], threads=-1)
    with pytest.raises(CrftkError, match="^threads must be"):
        CRF(threads=-2).set_params(threads=-2).fit(TINY_X, TINY_Y)
    # the command line keeps its spelling
    from crftk.commands.train import check_options
    with pytest.raises(CrftkError, match="^--algorithm sgd needs --c2 > 0"):
        check_options(dict(algorithm="sgd", c2=0.0))
    with pytest.raises(CrftkError, match="^--max-iter must be"):
        check_options(dict(max_iter=0))


def test_python_warnings_name_options_by_keyword():
    from crftk.params import thread_cap
    with pytest.warns(UserWarning, match=r"^threads \d"):
        CRF("U00:%x[0,0]\nB\n", max_iter=2, threads=thread_cap() + 1).fit(TINY_X, TINY_Y)


# feature-dict input ----------------------------------------------------------------------
@pytest.mark.parametrize("X", [
    [[{"word.lower()": "the", "bias": 1.0}, {"word.lower()": "cat", "bias": 1.0}]],   # python-crfsuite dicts
    [[["bias", "word.lower=the", "BOS"], ["bias", "word.lower=cat"]]],                # its feature lists
], ids=["dicts", "lists"])
def test_feature_dicts_with_a_template_are_refused_with_a_pointer_to_template_none(X):
    message = r"feature dicts and feature lists are read without a template: CRF\(template=None\)"
    with pytest.raises(CrftkError, match=message):
        CRF("U00:%x[0,0]\nB\n", max_iter=2).fit(X, [["B-NP", "I-NP"]])
    fitted = CRF("U00:%x[0,0]\nB\n", max_iter=2).fit(TINY_X, TINY_Y)
    with pytest.raises(CrftkError, match=message):
        fitted.predict(X)


TWO_BAGS = ["U00:%x[0,0]\nB\n", "U00:%x[0,1]\nB\n"]


@pytest.mark.parametrize("label, message", [("", "is an empty label"), ("I NP", r"\('I NP'\) holds white space")])
def test_bag_and_factorial_fit_refuse_a_label_no_model_file_can_hold(label, message):
    # issue 31: fit took it, save wrote a model that nothing could load
    y = [list(TINY_Y[0]), [TINY_Y[1][0], label, TINY_Y[1][2]]]
    with pytest.raises(CrftkError, match=rf"y\[1\]\[1\] {message}"):
        Bag(TWO_BAGS, max_iter=2, threads=1).fit(TINY_X, y)
    words = [[[r[0]] for r in s] for s in TINY_X]
    tags = [[r[1] for r in s] for s in TINY_X]
    with pytest.raises(CrftkError, match=rf"Y\[1\]\[1\]\[1\] {message}"):
        FactorialCRF("U00:%x[0,0]\nB\n", max_iter=2, threads=1).fit(words, [tags, y])


@pytest.mark.parametrize("X, message", [
    ([None, TINY_X[1]], r"X\[0\] is None: a sentence is a list of token rows"),
    ([[None, ["cat", "NN"]], TINY_X[1]], r"X\[0\]\[0\] is None: a token row is a list"),
    ([1, 2], r"X\[0\] is an int"),
    ({"a": 1, "b": 2}, "X is a dict"),
])
def test_bag_and_factorial_refuse_input_of_the_wrong_shape(X, message):
    # raw TypeErrors (or a KeyError) before
    with pytest.raises(CrftkError, match=message):
        Bag(TWO_BAGS, max_iter=2, threads=1).fit(X, TINY_Y)
    with pytest.raises(CrftkError, match=message):
        FactorialCRF("U00:%x[0,0]\nB\n", max_iter=2, threads=1).fit(X, [TINY_Y, TINY_Y])
    with pytest.raises(CrftkError, match="Y must be a list with one entry per sentence, not an int"):
        FactorialCRF("U00:%x[0,0]\nB\n", max_iter=2, threads=1).fit(TINY_X, 5)
    with pytest.raises(CrftkError, match=r"Y\[0\] must be a list with one entry per sentence, not None"):
        FactorialCRF("U00:%x[0,0]\nB\n", max_iter=2, threads=1).fit(TINY_X, [None, TINY_Y])


def test_bag_and_factorial_predict_refuse_input_of_the_wrong_shape():
    bag = Bag(TWO_BAGS, max_iter=2, threads=1).fit(TINY_X, TINY_Y)
    words = [[[r[0]] for r in s] for s in TINY_X]
    fcrf = FactorialCRF("U00:%x[0,0]\nB\n", max_iter=2, threads=1).fit(words, [TINY_Y, TINY_Y])
    for est in (bag, fcrf):
        for X, message in [([None], r"X\[0\] is None"), ([[None]], r"X\[0\]\[0\] is None"), ([3], r"X\[0\] is an int"),
                           ({"a": 1}, "X is a dict")]:
            with pytest.raises(CrftkError, match=message):
                est.predict(X)
