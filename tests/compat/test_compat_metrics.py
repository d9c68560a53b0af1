"""crftk.sklearn_crfsuite.metrics, scorers and utils without scikit-learn: values counted by hand."""

import sys
import warnings

import numpy as np
import pytest

from crftk.sklearn_crfsuite import metrics, utils

Y_TRUE = [["B", "I", "O"], ["O", "B"]]
Y_PRED = [["B", "O", "O"], ["B", "B"]]
# per label:   B: tp 2, predicted 3, true 2;  I: tp 0, predicted 0, true 1;  O: tp 1, predicted 2, true 2


@pytest.fixture
def no_sklearn(monkeypatch):
    """scikit-learn made unimportable, whether installed or not."""
    for name in list(sys.modules):
        if name == "sklearn" or name.startswith("sklearn."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "sklearn", None)


def test_flatten():
    assert utils.flatten([[1, 2], [], [3]]) == [1, 2, 3]
    assert utils.flatten(np.array([["a", "b"], ["c", "d"]], dtype=object)) == ["a", "b", "c", "d"]


def test_accuracy_and_sequence_accuracy(no_sklearn):
    assert metrics.flat_accuracy_score(Y_TRUE, Y_PRED) == pytest.approx(3 / 5)
    assert metrics.sequence_accuracy_score(Y_TRUE, Y_PRED) == 0
    assert metrics.sequence_accuracy_score(Y_TRUE, [Y_TRUE[0], Y_PRED[1]]) == 0.5
    # sentences of one length: whole sentences are counted, not tokens
    assert metrics.sequence_accuracy_score([["A", "B"], ["A", "B"]], [["A", "B"], ["A", "A"]]) == 0.5
    assert metrics.sequence_accuracy_score([], []) == 0
    with pytest.raises(ValueError, match="different numbers of labels"):
        metrics.flat_accuracy_score(Y_TRUE, [["B"], ["O", "B"]])


def test_averages_counted_by_hand(no_sklearn):
    p = {"B": 2 / 3, "I": 0.0, "O": 1 / 2}
    r = {"B": 1.0, "I": 0.0, "O": 1 / 2}
    f = {k: (2 * p[k] * r[k] / (p[k] + r[k]) if p[k] + r[k] else 0.0) for k in p}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert list(metrics.flat_precision_score(Y_TRUE, Y_PRED, average=None)) == pytest.approx([p["B"], 0, p["O"]])
        assert metrics.flat_recall_score(Y_TRUE, Y_PRED, average="macro") == pytest.approx(sum(r.values()) / 3)
        assert metrics.flat_f1_score(Y_TRUE, Y_PRED, average="weighted") == pytest.approx(
            (2 * f["B"] + 1 * f["I"] + 2 * f["O"]) / 5)
        assert metrics.flat_f1_score(Y_TRUE, Y_PRED, average="micro") == pytest.approx(3 / 5)
        # labels chosen: O left out, as the tutorial scores
        assert metrics.flat_f1_score(Y_TRUE, Y_PRED, average="micro", labels=["B", "I"]) == pytest.approx(
            2 * (2 / 3) * (2 / 3) / (4 / 3))
        b = 0.5
        fb = (1 + b * b) * p["B"] * r["B"] / (b * b * p["B"] + r["B"])
        assert metrics.flat_fbeta_score(Y_TRUE, Y_PRED, beta=b, average=None)[0] == pytest.approx(fb)
    # I is never predicted: its precision is ill-defined, 0 with a warning, or zero_division's value
    with pytest.warns(UserWarning, match="ill-defined"):
        metrics.flat_precision_score(Y_TRUE, Y_PRED, average="macro")
    assert metrics.flat_precision_score(Y_TRUE, Y_PRED, average="macro", zero_division=1) == pytest.approx(
        (p["B"] + 1 + p["O"]) / 3)


def test_binary_average(no_sklearn):
    true, pred = [["O", "B"], ["B"]], [["O", "O"], ["B"]]
    assert metrics.flat_recall_score(true, pred, pos_label="B") == pytest.approx(0.5)
    with pytest.raises(ValueError, match="pos_label=1 is not a valid label"):
        metrics.flat_f1_score(true, pred)
    with pytest.raises(ValueError, match="multiclass"):
        metrics.flat_f1_score(Y_TRUE, Y_PRED)


def test_without_sklearn_the_report_and_scorers_say_so(no_sklearn):
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        metrics.flat_classification_report(Y_TRUE, Y_PRED)
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        metrics.flat_f1_score(Y_TRUE, Y_PRED, average="macro", some_other_argument=1)
    from crftk.sklearn_crfsuite import scorers
    with pytest.raises(ImportError, match="scikit-learn scorer"):
        scorers.flat_accuracy
