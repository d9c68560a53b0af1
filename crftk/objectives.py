"""Training objectives over an encoded corpus, as (value, gradient) functions of the weights."""

import numpy as np

from crftk.errors import CrftkError


class LogLikelihood:
    """Negative log-likelihood plus ``c2 * ||w||^2`` (CRFsuite's L2 convention).

    Calling it returns (value, gradient); ``n_evals`` counts forward-backward
    passes over the corpus. ``frozen`` marks parameters held at their starting
    value and left out of the penalty (the transitions of a template without a
    label bigram, at zero; the pinned weights of hard constraints).
    """

    def __init__(self, space, corpus, *, c2=1.0, n_threads=1, frozen=None):
        if corpus.labels is None:
            raise CrftkError("training data has no gold label column")
        if (corpus.labels < 0).any():
            raise CrftkError("training data has labels outside the label set")
        self.space = space
        self.corpus = corpus
        self._empirical = None
        self._last = None
        self.lattices = space.lattices(corpus)
        self.labels = corpus.labels
        self.c2 = float(c2)
        self.n_threads = int(n_threads)
        self.frozen = frozen
        self.n_params = space.n_params
        self.n_evals = 0
        self.track_curvature = False

    def empirical_counts(self):
        """How often each parameter's feature fires on the gold labels (cached)."""
        if self._empirical is None:
            self._empirical = empirical_counts(self.space, self.corpus)
        return self._empirical

    def _loglik(self, w, need_curvature=False):
        """Unpenalized (loss, gradient), reusing the last pass when w is the same point."""
        last = self._last
        if (last is not None and last[0].shape == w.shape and np.array_equal(last[0], w)
                and (last[3] is not None or not need_curvature)):
            return last[1], last[2]
        # once asked for, the curvature rides along every pass (pcg asks at each iterate)
        self.track_curvature |= need_curvature
        h = np.empty(self.n_params) if self.track_curvature else None
        loss, grad = self.lattices.loglik(w, self.labels, self.n_threads, h)
        self.n_evals += 1
        self._last = (np.array(w, copy=True), loss, grad, h)
        return loss, grad

    def curvature(self, w):
        """Sha & Pereira's diagonal approximation of the Hessian of the unpenalized loss at w.

        Each feature taken as independent of the others and each token of the others:
        sum over tokens of p(1 - p) for the state features, start and end weights (the
        per-sentence E[sum_t f_t^2] - E[F]^2 of Sha & Pereira when a feature fires at
        most once in a sentence, and never negative); the expected counts for the
        transitions. Computed in the pass of w.
        """
        self._loglik(w, need_curvature=True)
        h = self._last[3].copy()
        E = self.expected_counts(w)
        lay = self.space.layout()
        for part in ("trans", "edge"):
            h[lay[part]] = E[lay[part]]
        return h

    def expected_counts(self, w):
        """Model expectation of each feature's count (of the unpenalized likelihood)."""
        return self._loglik(w)[1] + self.empirical_counts()

    def max_active(self):
        """Most features that can fire on one sentence's labeling (GIS's constant C)."""
        c = self.corpus
        per_token = np.diff(c.attr_ptr) + np.diff(c.eattr_ptr) + 1
        sums = np.add.reduceat(per_token, c.sent_ptr[:-1]) + 1     # + start, end, - first transition
        return float(sums.max())

    def __call__(self, w):
        loss, grad = self._loglik(w)
        grad = grad.copy()
        if self.c2 > 0:
            loss += self.c2 * float(w @ w)
            grad += (2.0 * self.c2) * w
        if self.frozen is not None:
            grad[self.frozen] = 0.0
            if self.c2 > 0:
                fixed = w[self.frozen]
                loss -= self.c2 * float(fixed @ fixed)
        return loss, grad


def empirical_counts(space, corpus):
    """Feature counts of the gold labeling, laid out like the parameter vector."""
    return label_counts(space, corpus, corpus.labels)


def label_counts(space, corpus, labels):
    """Feature counts of a labeling of the corpus (one label id per token), like the parameters."""
    L = space.n_labels
    lay = space.layout()
    counts = np.zeros(space.n_params)
    y = np.asarray(labels).astype(np.int64)
    # state features: the (attribute, gold label) pair of every attribute occurrence
    tok = np.repeat(np.arange(corpus.n_tokens), np.diff(corpus.attr_ptr))
    attr_of_feat = np.repeat(np.arange(space.n_attrs), np.diff(space.feat_ptr))
    feat_keys = attr_of_feat * L + space.feat_label          # sorted: features are ordered by (attr, label)
    occ = corpus.attrs.astype(np.int64) * L + y[tok]
    f = np.searchsorted(feat_keys, occ)
    f = np.minimum(f, max(feat_keys.size - 1, 0))
    hit = feat_keys.size > 0
    if hit:
        found = feat_keys[f] == occ
        np.add.at(counts, f[found], 1.0)
    starts, ends = corpus.sent_ptr[:-1], corpus.sent_ptr[1:] - 1
    np.add.at(counts, lay["start"].start + y[starts], 1.0)
    np.add.at(counts, lay["end"].start + y[ends], 1.0)
    inner = np.ones(corpus.n_tokens, dtype=bool)
    inner[starts] = False                                     # no transition into a first token
    t = np.flatnonzero(inner)
    np.add.at(counts, lay["trans"].start + y[t - 1] * L + y[t], 1.0)
    etok = np.repeat(np.arange(corpus.n_tokens), np.diff(corpus.eattr_ptr))
    keep = inner[etok]
    etok = etok[keep]
    e = corpus.eattrs[keep].astype(np.int64)
    np.add.at(counts, lay["edge"].start + e * L * L + y[etok - 1] * L + y[etok], 1.0)
    return counts
