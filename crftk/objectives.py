"""Training objectives over an encoded corpus, as (value, gradient) functions of the weights."""

import numpy as np

from crftk.errors import CrftkError


class LogLikelihood:
    """Negative log-likelihood plus ``c2 * ||w||^2`` (CRFsuite's L2 convention).

    Calling it returns (value, gradient); ``n_evals`` counts forward-backward
    passes over the corpus. ``frozen`` marks parameters held at zero (the
    transitions of a template without a label bigram).
    """

    def __init__(self, space, corpus, *, c2=1.0, n_threads=1, frozen=None):
        if corpus.labels is None:
            raise CrftkError("training data has no gold label column")
        if (corpus.labels < 0).any():
            raise CrftkError("training data has labels outside the label set")
        self.lattices = space.lattices(corpus)
        self.labels = corpus.labels
        self.c2 = float(c2)
        self.n_threads = int(n_threads)
        self.frozen = frozen
        self.n_params = space.n_params
        self.n_evals = 0

    def __call__(self, w):
        loss, grad = self.lattices.loglik(w, self.labels, self.n_threads)
        self.n_evals += 1
        if self.c2 > 0:
            loss += self.c2 * float(w @ w)
            grad += (2.0 * self.c2) * w
        if self.frozen is not None:
            grad[self.frozen] = 0.0
        return loss, grad
