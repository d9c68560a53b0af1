"""The penalized negative log-likelihood (MAP training) of a structure's inference."""

import numpy as np

from crftk.objectives.penalty import Penalty


class Likelihood:
    """Negative log-likelihood of the gold labels plus ``c2 * ||params||^2``.

    ``inference`` is a structure bound to the training corpus
    (``structure.bind(corpus, n_threads)``); the objective is a function of the
    structure's training parameters, which it maps to kernel weights and back
    (the identity for a chain, tied parameters for label pairs). Calling it
    returns (value, gradient); ``n_evals`` counts passes over the corpus.

    It remembers its last pass, so that the expected counts or the curvature at the point just
    evaluated cost no second pass (pcg, GIS). ``remember = False`` (the driver's choice for
    minimisers that only call it, which remember their last point themselves) keeps no copy of
    the point and of its gradient: two weight-sized vectors fewer.
    """

    #: each gradient returned is a new array no one else holds (crftk.optimize.common.Objective
    #: then takes it without a copy)
    fresh_gradients = True

    def __init__(self, inference, *, c2=1.0, frozen=None):
        self.inference = inference
        self.structure = inference.structure
        self.corpus = inference.corpus
        self.labels = self.structure.gold(self.corpus)
        # partial annotation (crftk.io.partial): the labels each token allows, None when all are known
        self.allowed = getattr(self.corpus, "allowed", None)
        self.penalty = Penalty(c2, frozen)
        self.n_params = self.structure.n_params
        self.n_evals = 0
        self.track_curvature = False
        self.remember = True
        self._empirical = None
        self._last = None

    @classmethod
    def chain(cls, space, corpus, *, c2=1.0, n_threads=1, frozen=None):
        """The likelihood of a first-order chain CRF on this feature space."""
        from crftk.structures.chain import Chain
        return cls(Chain(space).bind(corpus, n_threads), c2=c2, frozen=frozen)

    @property
    def c2(self):
        return self.penalty.c2

    def _loglik(self, params, need_curvature=False):
        """Unpenalized (loss, gradient), reusing the last pass when params are the same point."""
        last = self._last
        if (last is not None and last[0].shape == params.shape and np.array_equal(last[0], params)
                and (last[3] is not None or not need_curvature)):
            return last[1], last[2]
        # once asked for, the curvature rides along every pass (pcg asks at each iterate)
        self.track_curvature |= need_curvature
        w = self.structure.weights(params)
        h = np.empty(w.size) if self.track_curvature and self.inference.curvature_in_pass else None
        loss, grad = self._pass(w, h)
        self.n_evals += 1
        if not self.remember and not need_curvature:     # (the curvature is read from the remembered pass)
            self._last = None
            return loss, self.structure.pullback(grad)
        self._last = (np.array(params, copy=True), loss, self.structure.pullback(grad), h)
        return self._last[1], self._last[2]

    def _pass(self, w, h):
        """(loss, gradient with respect to the weights) of one pass over the corpus at weights w."""
        if self.allowed is None:       # exactly the pass of a fully labeled corpus
            return self.inference.loglik(w, self.labels, h)
        return self.inference.loglik(w, self.labels, h, allowed=self.allowed)

    def __call__(self, params):
        loss, grad = self._loglik(params)
        # a remembered gradient stays unpenalized; else the pass's own array takes the penalty
        return self.penalty(params, loss, grad.copy() if self.remember else grad)

    # -- what GIS and the preconditioned CG ask of a chain's likelihood ------
    def empirical_counts(self):
        """How often each parameter's feature fires on the gold labels (cached)."""
        if self._empirical is None:
            self._empirical = self.inference.counts(self.labels)
        return self._empirical

    def expected_counts(self, w):
        """Model expectation of each feature's count (of the unpenalized likelihood)."""
        return self._loglik(w)[1] + self.empirical_counts()

    def curvature(self, w):
        """Sha & Pereira's diagonal approximation of the Hessian of the unpenalized loss at w.

        Each feature taken as independent of the others and each token of the others:
        sum over tokens of p(1 - p) for the state features, start and end weights (the
        per-sentence E[sum_t f_t^2] - E[F]^2 of Sha & Pereira when a feature fires at
        most once in a sentence, and never negative); the expected counts for the
        transitions. Computed in the pass of w (or from the marginals at w, for a structure whose
        kernel does not carry it).
        """
        if not self.inference.curvature_in_pass:
            return self.inference.variance(self.structure.weights(w), self.expected_counts(w))
        self._loglik(w, need_curvature=True)
        h = self._last[3].copy()
        E = self.expected_counts(w)
        lay = self.structure.layout
        for part in ("trans", "edge"):
            h[lay[part]] = E[lay[part]]
        return h

    def max_active(self):
        """Most features that can fire on one sentence's labeling (GIS's constant C)."""
        return self.inference.max_active()


def label_counts(space, corpus, labels):
    """Feature counts of a labeling of the corpus (one label id per token), like the parameters."""
    from crftk.structures.chain import Chain
    return Chain(space).bind(corpus).counts(labels)
