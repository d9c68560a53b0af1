"""scikit-learn scorers of the drop-in's metrics, for ``cross_val_score``, ``GridSearchCV`` and the
like: ``flat_accuracy`` (token accuracy) and ``sequence_accuracy`` (whole sentences right).

They are scikit-learn objects, so this module needs scikit-learn (``pip install
scikit-learn``); they are made when first used, and the rest of the drop-in works without it.
"""

from crftk.sklearn_crfsuite import metrics

_METRICS = {"flat_accuracy": metrics.flat_accuracy_score, "sequence_accuracy": metrics.sequence_accuracy_score}

__all__ = sorted(_METRICS)


def __getattr__(name):
    metric = _METRICS.get(name)
    if metric is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        from sklearn.metrics import make_scorer
    except ImportError:
        raise ImportError(f"crftk.sklearn_crfsuite.scorers.{name} is a scikit-learn scorer: "
                          f"pip install scikit-learn (the metrics themselves do not need it)") from None
    scorer = make_scorer(metric)
    globals()[name] = scorer
    return scorer
