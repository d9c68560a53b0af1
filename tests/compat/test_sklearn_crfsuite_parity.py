"""The same scripts with the real sklearn-crfsuite / python-crfsuite and with crftk's drop-ins:
the same labels, attribute and feature counts, API behaviour and metric values, and predictions
that agree on at least AGREEMENT of the tokens. Skipped unless both real packages are installed
(pip install -e '.[compat]')."""

import warnings

import numpy as np
import pytest

sklearn_crfsuite = pytest.importorskip("sklearn_crfsuite", reason="the real sklearn-crfsuite is not installed "
                                       "(pip install -e '.[compat]'): the parity suite compares against it")
pycrfsuite = pytest.importorskip("pycrfsuite", reason="the real python-crfsuite is not installed "
                                 "(pip install -e '.[compat]'): the parity suite compares against it")

import crftk.pycrfsuite as crftk_pycrfsuite  # noqa: E402
import crftk.sklearn_crfsuite as crftk_sklearn_crfsuite  # noqa: E402
from feature_dicts import demo_dicts  # noqa: E402

#: Fewest tokens of the test sentences on which both systems' predictions agree.
AGREEMENT = 0.97
BOTH = {"real": sklearn_crfsuite, "crftk": crftk_sklearn_crfsuite}


@pytest.fixture(scope="module")
def data():
    X, y = demo_dicts(limit=300)
    X_test, y_test = demo_dicts("demo.test", limit=100)
    return X, y, X_test, y_test


def script(module, data, **params):
    """A user's script: fit, then everything a fitted CRF tells."""
    X, y, X_test, y_test = data
    crf = module.CRF(**params).fit(X, y)
    pred = crf.predict(X_test)
    return {
        "crf": crf,
        "classes": sorted(crf.classes_),
        "num_attributes": crf.num_attributes_,
        "attributes": set(crf.attributes_),
        "state_features": set(crf.state_features_),
        "transitions": set(crf.transition_features_),
        "pred": [list(p) for p in pred],
        "pred_type": (type(pred), pred.dtype, pred.ndim),
        "single": type(crf.predict_single(X_test[0])),
        "marginals": crf.predict_marginals_single(X_test[0]),
        "score": crf.score(X_test, y_test),
        "log_keys": set(crf.training_log_.last_iteration),
    }


@pytest.fixture(scope="module", params=[dict(c1=0.0, c2=0.1, max_iterations=60),
                                        dict(c1=0.0, c2=0.1, max_iterations=60, all_possible_transitions=True),
                                        dict(c2=0.5, max_iterations=40, all_possible_transitions=True,
                                             all_possible_states=True)],
                ids=["default-features", "all-transitions", "all-states"])
def runs(request, data):
    return {name: script(module, data, **request.param) for name, module in BOTH.items()}


def test_same_labels_attributes_and_features(runs):
    real, ours = runs["real"], runs["crftk"]
    assert ours["classes"] == real["classes"]
    assert ours["num_attributes"] == real["num_attributes"]
    assert ours["attributes"] == real["attributes"]
    assert ours["state_features"] == real["state_features"]
    assert ours["transitions"] == real["transitions"]


def test_same_api_behaviour(runs, data):
    real, ours = runs["real"], runs["crftk"]
    assert ours["pred_type"] == real["pred_type"]
    assert ours["single"] is real["single"] is list
    assert [sorted(t) for t in ours["marginals"]] == [sorted(t) for t in real["marginals"]]
    assert ours["log_keys"] >= {"num", "loss", "active_features", "time", "scores"}
    # sentences of one length: both give a two-dimensional object array
    X_test = data[2]
    assert runs["crftk"]["crf"].predict([X_test[0]] * 2).shape == runs["real"]["crf"].predict([X_test[0]] * 2).shape


def test_predictions_agree(runs, data):
    real, ours = runs["real"], runs["crftk"]
    flat_real = [t for s in real["pred"] for t in s]
    flat_ours = [t for s in ours["pred"] for t in s]
    agree = np.mean([a == b for a, b in zip(flat_real, flat_ours)])
    assert agree >= AGREEMENT, f"the predictions agree on {agree:.3f} of the tokens"
    assert abs(ours["score"] - real["score"]) < 0.02
    for a, b in zip(ours["marginals"], real["marginals"]):
        for label in a:
            assert a[label] == pytest.approx(b[label], abs=0.1)


@pytest.mark.parametrize("name", BOTH)
def test_unfitted_and_bad_arguments(name, data):
    module = BOTH[name]
    crf = module.CRF()
    assert crf.classes_ is None and crf.training_log_ is None
    with pytest.raises(AttributeError):
        crf.predict(data[2][:1])
    with pytest.raises(ValueError):
        module.CRF().fit(data[0][:5], data[1][:5], X_dev=data[0][:5])
    with pytest.raises(ValueError):
        module.CRF(algorithm="l2sgd", c1=0.1).fit(data[0][:5], data[1][:5])


def test_metrics_equal(runs, data):
    y_test, pred = data[3], runs["crftk"]["pred"]
    labels = [c for c in runs["crftk"]["classes"] if c != "O"]
    theirs, ours = sklearn_crfsuite.metrics, crftk_sklearn_crfsuite.metrics
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in ("micro", "macro", "weighted", None):
            for f in ("flat_precision_score", "flat_recall_score", "flat_f1_score"):
                a = getattr(theirs, f)(y_test, pred, average=average, labels=labels)
                b = getattr(ours, f)(y_test, pred, average=average, labels=labels)
                assert np.allclose(a, b), (f, average)
        assert ours.flat_fbeta_score(y_test, pred, beta=2, average="macro") == pytest.approx(
            theirs.flat_fbeta_score(y_test, pred, beta=2, average="macro"))
        assert ours.flat_accuracy_score(y_test, pred) == pytest.approx(theirs.flat_accuracy_score(y_test, pred))
        assert ours.flat_classification_report(y_test, pred, labels=labels, digits=3) == \
            theirs.flat_classification_report(y_test, pred, labels=labels, digits=3)
        # sentences of different lengths (theirs counts tokens when all have one length)
        assert ours.sequence_accuracy_score(y_test, pred) == theirs.sequence_accuracy_score(y_test, pred)


# python-crfsuite ------------------------------------------------------------------------

@pytest.mark.parametrize("algorithm", ["lbfgs", "l2sgd", "ap", "pa", "arow"])
def test_trainer_parameters_equal(algorithm):
    real = pycrfsuite.Trainer(algorithm, verbose=False)
    ours = crftk_pycrfsuite.Trainer(algorithm, verbose=False)
    assert ours.params() == real.params()
    assert ours.get_params() == real.get_params()
    real.set("max_iterations", "7")
    ours.set("max_iterations", "7")
    assert ours.get("max_iterations") == real.get("max_iterations") == 7
    for trainer in (real, ours):
        with pytest.raises(ValueError):
            trainer.set("no.such.parameter", 1)


def test_item_sequence_equal():
    seq = [["foo", "bar"], {"w": "x", "n": 2, "t": True, "f": False, "nest": {"a": "b", "c": 0.5}},
           {"l": ["p", "q"], "s": {"r"}}, {"u": "é", b"k": b"v"}]
    assert crftk_pycrfsuite.ItemSequence(seq).items() == pycrfsuite.ItemSequence(seq).items()


def test_tagger_equal_counts(data, tmp_path):
    X, y, X_test, _ = data
    info = {}
    for name, module in (("real", pycrfsuite), ("crftk", crftk_pycrfsuite)):
        trainer = module.Trainer("lbfgs", {"c2": 0.1, "max_iterations": 40}, verbose=False)
        for xseq, yseq in zip(X, y):
            trainer.append(xseq, yseq)
        path = str(tmp_path / name)
        trainer.train(path)
        tagger = module.Tagger()
        tagger.open(path)
        info[name] = tagger.info()
        assert len(tagger.tag(X_test[0])) == len(X_test[0])
        tagger.set(X_test[0])
        assert 0 < tagger.probability(tagger.tag()) <= 1
        assert tagger.marginal(tagger.labels()[0], 0) >= 0
        assert {"iterations", "last_iteration", "training_seconds", "featgen_num_features", "log",
                "events"} <= set(vars(trainer.logparser))
    real, ours = info["real"], info["crftk"]
    assert set(ours.labels) == set(real.labels)
    assert set(ours.attributes) == set(real.attributes)
    assert set(ours.state_features) == set(real.state_features)
    assert set(ours.transitions) == set(real.transitions)
    assert ours.header["num_attrs"] == real.header["num_attrs"]
    assert ours.header["num_labels"] == real.header["num_labels"]


@pytest.mark.parametrize("possible_states", [True, False])
@pytest.mark.parametrize("min_freq", [0, 1, 2])
def test_the_same_features_with_negative_and_zero_values(min_freq, possible_states):
    """CRFsuite's frequency sums values: a pair whose values sum below min_freq is dropped, and
    possible states are pairs of frequency 0, of every attribute seen."""
    X = [[{"a": -1.0, "w": "x"}, {"a": 2.0, "w": "y", "z": 0.0}], [{"a": -0.5, "b": 1.5}, {"a": 0.0, "w": "x", "c": -3.0}],
         [{"b": 2.0, "w": "y"}, {"c": 0.5, "a": 1.0}]]
    y = [["N", "P"], ["N", "Q"], ["P", "Q"]]
    feats = {}
    for name, module in BOTH.items():
        crf = module.CRF(min_freq=min_freq, all_possible_states=possible_states, c1=0, c2=0.1,
                         max_iterations=5).fit(X, y)
        feats[name] = (set(crf.state_features_), crf.num_attributes_)
    assert feats["crftk"] == feats["real"]
