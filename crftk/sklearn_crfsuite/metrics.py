"""Token ("flat") and sentence metrics of label sequences, as sklearn-crfsuite's metrics module
names them.

The flat scores count every token of every sentence as one sample and give what scikit-learn's
``accuracy_score``, ``precision_score``, ``recall_score``, ``f1_score`` and ``fbeta_score`` give on
the flattened labels, computed here without scikit-learn for the arguments those take
(``labels``, ``pos_label``, ``average`` None/binary/micro/macro/weighted, ``sample_weight``,
``zero_division``); any other argument is passed to scikit-learn, which must then be installed.
``flat_classification_report`` is scikit-learn's report, so it needs scikit-learn.

``sequence_accuracy_score`` is the fraction of sentences labeled entirely right. (sklearn-crfsuite
compares numpy arrays of the sentences, which counts tokens instead when every sentence has the
same length; the two agree otherwise.)
"""

import warnings

import numpy as np

from crftk.sklearn_crfsuite.utils import flatten

__all__ = ["flat_accuracy_score", "flat_precision_score", "flat_recall_score", "flat_f1_score",
           "flat_fbeta_score", "flat_classification_report", "sequence_accuracy_score"]

AVERAGES = (None, "binary", "micro", "macro", "weighted")
_NATIVE = {"labels", "pos_label", "average", "sample_weight", "zero_division"}


class UndefinedMetricWarning(UserWarning):
    """A precision, recall or F-score with nothing to divide by (scikit-learn's warning, when it is
    installed, so that its filters apply)."""


def _warning_class():
    try:
        from sklearn.exceptions import UndefinedMetricWarning as theirs
        return theirs
    except ImportError:
        return UndefinedMetricWarning


def _flat(y_true, y_pred):
    true, pred = flatten(y_true), flatten(y_pred)
    if len(true) != len(pred):
        raise ValueError(f"y_true and y_pred hold different numbers of labels: {len(true)} and {len(pred)} "
                         f"(a sentence of one is longer than in the other)")
    return true, pred


def _weights(sample_weight, n):
    if sample_weight is None:
        return np.ones(n)
    w = np.asarray(flatten(sample_weight) if n and len(sample_weight) != n else sample_weight, dtype=float)
    if w.shape != (n,):
        raise ValueError(f"sample_weight has {w.size} weights for {n} tokens")
    return w


def flat_accuracy_score(y_true, y_pred):
    """The fraction of tokens whose predicted label is the true one."""
    true, pred = _flat(y_true, y_pred)
    if not true:
        return 0.0
    return float(np.mean([t == p for t, p in zip(true, pred)]))


def _divide(num, den, zero_division, what):
    """num / den per label; where den is 0 the zero_division value (with a warning for "warn")."""
    num, den = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    out = np.divide(num, den, out=np.zeros_like(num), where=den != 0)
    if np.any(den == 0):
        if zero_division == "warn":
            warnings.warn(f"{what} is ill-defined and being set to 0.0 for labels with no samples; use "
                          f"zero_division to control this", _warning_class(), stacklevel=4)
            fill = 0.0
        else:
            fill = float(zero_division)
        out[den == 0] = fill
    return out


def _scores(y_true, y_pred, beta, what, labels=None, pos_label=1, average="binary", sample_weight=None,
            zero_division="warn"):
    """Precision, recall or F-beta (``what``) per the scikit-learn arguments."""
    if average not in AVERAGES:
        raise ValueError(f"average has to be one of {AVERAGES} (samples averaging needs multilabel data)")
    if zero_division not in ("warn", 0, 1, 0.0, 1.0) and not (isinstance(zero_division, float)
                                                              and np.isnan(zero_division)):
        raise ValueError(f"zero_division must be 'warn', 0, 1 or nan, not {zero_division!r}")
    true, pred = _flat(y_true, y_pred)
    weight = _weights(sample_weight, len(true))
    present = sorted(set(true) | set(pred))
    if average == "binary":
        if len(present) > 2:
            raise ValueError("Target is multiclass but average='binary'. Please choose another average "
                             "setting, one of [None, 'micro', 'macro', 'weighted'].")
        if pos_label not in present and len(present) > 0:
            raise ValueError(f"pos_label={pos_label!r} is not a valid label. It should be one of {present}")
        chosen = [pos_label]
    else:
        chosen = present if labels is None else list(labels)
    index = {label: i for i, label in enumerate(chosen)}
    n = len(chosen)
    tp, pred_sum, true_sum = np.zeros(n), np.zeros(n), np.zeros(n)
    for t, p, w in zip(true, pred, weight):
        i, j = index.get(t), index.get(p)
        if i is not None:
            true_sum[i] += w
        if j is not None:
            pred_sum[j] += w
            if t == p:
                tp[j] += w
    if average == "micro":
        tp, pred_sum, true_sum = tp.sum(keepdims=True), pred_sum.sum(keepdims=True), true_sum.sum(keepdims=True)
    if what == "precision":
        score = _divide(tp, pred_sum, zero_division, "Precision")
    elif what == "recall":
        score = _divide(tp, true_sum, zero_division, "Recall")
    else:
        b2 = beta * beta
        score = _divide((1 + b2) * tp, (1 + b2) * tp + b2 * (true_sum - tp) + (pred_sum - tp),
                        zero_division, "F-score")
    if average is None:
        return score
    if average == "weighted":
        if true_sum.sum() == 0:
            return 0.0 if zero_division == "warn" else float(zero_division)
        return float(np.average(score, weights=true_sum))
    return float(np.nanmean(score)) if n else 0.0


def _native_or_sklearn(name, what, beta=None):
    def score(y_true, y_pred, **kwargs):
        if set(kwargs) - _NATIVE:
            return _sklearn(name)(flatten(y_true), flatten(y_pred), **({"beta": beta} if beta else {}), **kwargs)
        return _scores(y_true, y_pred, beta or 1.0, what, **kwargs)
    return score


def _sklearn(name):
    try:
        from sklearn import metrics
    except ImportError:
        raise ImportError(f"this call of flat metrics needs scikit-learn's {name} (pip install scikit-learn); "
                          f"without it they take labels, pos_label, average, sample_weight and "
                          f"zero_division") from None
    return getattr(metrics, name)


def flat_precision_score(y_true, y_pred, **kwargs):
    """Token precision: scikit-learn's ``precision_score`` over the flattened labels."""
    return _native_or_sklearn("precision_score", "precision")(y_true, y_pred, **kwargs)


def flat_recall_score(y_true, y_pred, **kwargs):
    """Token recall: scikit-learn's ``recall_score`` over the flattened labels."""
    return _native_or_sklearn("recall_score", "recall")(y_true, y_pred, **kwargs)


def flat_f1_score(y_true, y_pred, **kwargs):
    """Token F1: scikit-learn's ``f1_score`` over the flattened labels."""
    return _native_or_sklearn("fbeta_score", "f", 1.0)(y_true, y_pred, **kwargs)


def flat_fbeta_score(y_true, y_pred, beta, **kwargs):
    """Token F-beta: scikit-learn's ``fbeta_score`` over the flattened labels."""
    return _native_or_sklearn("fbeta_score", "f", float(beta))(y_true, y_pred, **kwargs)


def flat_classification_report(y_true, y_pred, labels=None, **kwargs):
    """scikit-learn's ``classification_report`` of the flattened labels (needs scikit-learn)."""
    true, pred = _flat(y_true, y_pred)
    return _sklearn("classification_report")(true, pred, labels=labels, **kwargs)


def sequence_accuracy_score(y_true, y_pred):
    """The fraction of sentences whose every label is right (0 for no sentences)."""
    true, pred = list(y_true), list(y_pred)
    if len(true) != len(pred):
        raise ValueError(f"y_true has {len(true)} sentences but y_pred {len(pred)}")
    if not true:
        return 0
    return sum(list(t) == list(p) for t, p in zip(true, pred)) / len(true)
