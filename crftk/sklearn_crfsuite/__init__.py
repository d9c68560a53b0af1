"""sklearn-crfsuite's API on crftk: change one line of a script,

    import crftk.sklearn_crfsuite as sklearn_crfsuite
    from crftk.sklearn_crfsuite import metrics, scorers

and ``sklearn_crfsuite.CRF(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100,
all_possible_transitions=True).fit(X_train, y_train)`` trains with crftk on the same feature dicts,
with the same parameters and fitted attributes (see :mod:`crftk.sklearn_crfsuite.estimator`), in
crftk's threads (``n_threads``). scikit-learn is needed only by ``scorers`` and
``metrics.flat_classification_report``.
"""

# scorers builds its scikit-learn objects when first asked for one
from crftk.sklearn_crfsuite import metrics, scorers, utils
from crftk.sklearn_crfsuite.estimator import CRF, NotFittedError

__all__ = ["CRF", "NotFittedError", "metrics", "scorers", "utils"]
