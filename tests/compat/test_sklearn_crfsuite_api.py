"""crftk.sklearn_crfsuite.CRF: parameters, fitted attributes, tagging, files and pickling."""

import os
import pickle

import numpy as np
import pytest

import crftk.pycrfsuite as pycrfsuite
import crftk.sklearn_crfsuite as sklearn_crfsuite
from crftk.sklearn_crfsuite import metrics
from feature_dicts import demo_dicts

PARAMS = dict(c1=0.0, c2=0.1, max_iterations=20)


@pytest.fixture(scope="module")
def data():
    X, y = demo_dicts(limit=200)
    X_test, y_test = demo_dicts("demo.test", limit=50)
    return X, y, X_test, y_test


@pytest.fixture(scope="module")
def fitted(data):
    X, y, _, _ = data
    return sklearn_crfsuite.CRF(**PARAMS).fit(X, y)


def test_constructor_parameters_as_sklearn_crfsuite():
    crf = sklearn_crfsuite.CRF(c1=0.1)
    params = crf.get_params()
    assert params["c1"] == 0.1 and params["algorithm"] is None and params["verbose"] is False
    assert params["n_threads"] == 0 and params["keep_tempfiles"] is False
    assert set(params) >= {"min_freq", "all_possible_states", "all_possible_transitions", "num_memories",
                           "linesearch", "calibration_eta", "pa_type", "variance", "gamma", "trainer_cls"}
    same = sklearn_crfsuite.CRF(**params)
    assert same.get_params() == params and repr(same) == "CRF(c1=0.1)"
    assert crf.set_params(c2=3.0) is crf and crf.c2 == 3.0
    with pytest.raises(ValueError, match="invalid parameter"):
        crf.set_params(iterations=3)


def test_unfitted(data):
    X = data[0]
    crf = sklearn_crfsuite.CRF()
    assert crf.classes_ is None and crf.tagger_ is None and crf.state_features_ is None
    assert crf.size_ is None and crf.num_attributes_ is None and crf.training_log_ is None
    with pytest.raises(sklearn_crfsuite.NotFittedError):
        crf.predict(X[:1])
    # sklearn-crfsuite's unfitted CRF raises AttributeError; crftk's error is both
    with pytest.raises(AttributeError):
        crf.predict_single(X[0])
    with pytest.raises(ValueError):
        crf.predict_marginals(X[:1])


def test_fitted_attributes(fitted, data):
    X, y, _, _ = data
    crf = fitted
    assert sorted(crf.classes_) == sorted({t for s in y for t in s})
    model = crf.model_
    layout = model.space.layout()
    state = model.weights[layout.state]
    # c1 = 0: a weight stays exactly zero only where the attribute never fires with a non-zero
    # value (CRFsuite's min_freq 0 keeps such features; its model file drops them, and so do we)
    fires = {model.space.attributes[a] for s in X for token in s for a in _nonzero_attributes(token, model)}
    listed = [(model.space.attributes[a], k) for a in range(model.space.n_attrs)
              for k in range(model.space.feat_ptr[a], model.space.feat_ptr[a + 1]) if state[k] != 0]
    assert len(crf.state_features_) == np.count_nonzero(state) == len(listed) > 0.99 * model.space.n_features
    assert {a for a, _ in listed} == set(crf.attributes_) == fires
    assert crf.num_attributes_ == len(crf.attributes_)
    assert set(crf.attributes_) == {a for a, _ in crf.state_features_}
    seen = {(s[i], s[i + 1]) for s in y for i in range(len(s) - 1)}
    assert set(crf.transition_features_) == seen        # all_possible_transitions=False
    attr, label = next(iter(crf.state_features_))
    k = model.space.attribute_index[attr]
    ks = range(model.space.feat_ptr[k], model.space.feat_ptr[k + 1])
    assert crf.state_features_[(attr, label)] == next(
        state[j] for j in ks if model.space.labels[model.space.feat_label[j]] == label)
    assert crf.size_ == len(model.to_bytes())
    log = crf.training_log_
    assert 1 <= len(log.iterations) <= 20 and log.last_iteration["num"] == len(log.iterations)


def _nonzero_attributes(token, model):
    """Ids of the model's attributes that fire with a non-zero value on a token."""
    from crftk.pycrfsuite import ItemSequence
    index = model.space.attribute_index
    return [index[a] for a, v in ItemSequence([token]).items()[0].items() if v != 0 and a in index]


def test_all_possible_transitions_and_states(data):
    X, y, _, _ = data
    crf = sklearn_crfsuite.CRF(c2=0.1, max_iterations=5, all_possible_transitions=True,
                               all_possible_states=True).fit(X[:50], y[:50])
    L = len(crf.classes_)
    assert len(crf.transition_features_) == L * L
    assert len(crf.state_features_) == crf.num_attributes_ * L


def test_prediction(fitted, data):
    _, _, X_test, y_test = data
    crf = fitted
    pred = crf.predict(X_test)
    assert isinstance(pred, np.ndarray) and pred.dtype == object and len(pred) == len(X_test)
    assert [list(p) for p in pred] == [crf.predict_single(x) for x in X_test]
    assert all(len(p) == len(x) for p, x in zip(pred, X_test))
    assert crf.score(X_test, y_test) == metrics.flat_accuracy_score(y_test, pred) > 0.7
    marg = crf.predict_marginals(X_test[:3])
    assert marg[0] == crf.predict_marginals_single(X_test[0])
    for token in crf.predict_marginals_single(X_test[1]):
        assert set(token) == set(crf.classes_) and sum(token.values()) == pytest.approx(1.0)
    # sentences of one length: a two-dimensional object array, as numpy makes it for theirs
    same = [X_test[0], X_test[0]]
    assert crf.predict(same).shape == (2, len(X_test[0]))


def test_pickle_and_files(fitted, data, tmp_path):
    X_test = data[2]
    copy = pickle.loads(pickle.dumps(fitted))
    assert copy.get_params() == fitted.get_params()
    assert [list(p) for p in copy.predict(X_test)] == [list(p) for p in fitted.predict(X_test)]
    assert copy.state_features_ == fitted.state_features_
    assert len(copy.training_log_.iterations) == len(fitted.training_log_.iterations)
    path = tmp_path / "named.crftk"
    X, y = data[0][:30], data[1][:30]
    crf = sklearn_crfsuite.CRF(max_iterations=3, model_filename=str(path)).fit(X, y)
    assert path.exists() and crf.modelfile.name == str(path)
    loaded = sklearn_crfsuite.CRF(model_filename=str(path))        # unfitted, tagging with the file
    assert [list(p) for p in loaded.predict(X)] == [list(p) for p in crf.predict(X)]
    kept = sklearn_crfsuite.CRF(max_iterations=3, keep_tempfiles=True).fit(X, y)
    try:
        assert os.path.exists(kept.modelfile.name)
    finally:
        os.unlink(kept.modelfile.name)
    assert sklearn_crfsuite.CRF(max_iterations=3).fit(X, y).modelfile.name is None


def test_bad_input(data):
    X, y = data[0][:20], data[1][:20]
    with pytest.raises(ValueError, match="20 sentences but y has 19"):
        sklearn_crfsuite.CRF().fit(X, y[:19])
    with pytest.raises(ValueError, match="both X_dev and y_dev"):
        sklearn_crfsuite.CRF().fit(X, y, X_dev=X)
    with pytest.raises(ValueError, match="c1=0.1 is not a parameter of algorithm l2sgd"):
        sklearn_crfsuite.CRF(algorithm="l2sgd", c1=0.1).fit(X, y)
    with pytest.raises(ValueError, match="Bad arguments"):
        sklearn_crfsuite.CRF(algorithm="newton").fit(X, y)
    with pytest.raises(TypeError, match="trainer_cls"):
        sklearn_crfsuite.CRF(trainer_cls=dict).fit(X, y)
    bad = [list(s) for s in X]
    bad[3] = bad[3][:-1] + [None]
    with pytest.raises(Exception, match=r"X\[3\]"):
        sklearn_crfsuite.CRF(max_iterations=2).fit(bad, y)


def test_trainer_cls_and_dev_set(data):
    X, y = data[0][:60], data[1][:60]
    seen = []

    class Recording(pycrfsuite.Trainer):
        def on_iteration(self, log, info):
            seen.append(info["num"])

    crf = sklearn_crfsuite.CRF(max_iterations=4, trainer_cls=Recording, verbose=True)
    crf.fit(X[:40], y[:40], X[40:], y[40:])
    assert seen == [it["num"] for it in crf.training_log_.iterations]
    assert "avg_f1" in crf.training_log_.last_iteration


def test_sklearn_tools(data):
    pytest.importorskip("sklearn")
    from sklearn.base import clone
    from sklearn.model_selection import cross_val_score
    from crftk.sklearn_crfsuite import scorers
    X, y = data[0][:60], data[1][:60]
    crf = sklearn_crfsuite.CRF(max_iterations=3, n_threads=1)
    assert clone(crf).get_params() == crf.get_params()
    scores = cross_val_score(crf, X, y, cv=2, scoring=scorers.flat_accuracy)
    assert len(scores) == 2 and all(0 < s <= 1 for s in scores)
