"""Online training: Collins' averaged (voted) perceptron.

Each epoch visits the sentences in a new random order (seeded), decodes each
with the current weights and, on a mistake, adds the gold labeling's features
and subtracts the predicted one's (Collins 2002). The averaged weights, which
Sha & Pereira (2003) found to overfit much less, are what the callback sees and
what training returns. Progress is reported as the batch optimizers do: one
IterationInfo per epoch, whose objective is the number of mislabeled tokens.
"""

import numpy as np

from crftk.optimize import IterationInfo, OptimizeResult


def averaged_perceptron(lattices, labels, w0, *, max_iter=50, epsilon=0.0, period=10, frozen=None,
                        callback=None, seed=0):
    """Train by the averaged perceptron; returns an OptimizeResult whose x is the average."""
    rng = np.random.default_rng(seed)
    w = np.array(w0, dtype=np.float64)
    u = np.zeros_like(w)
    c = 1.0
    errors = []
    avg = w.copy()
    reason, converged = f"reached the iteration limit ({max_iter}) before converging", False
    epoch = 0
    for epoch in range(1, max_iter + 1):
        order = rng.permutation(lattices.n_sentences).astype(np.int32)
        n_sent, n_tok, c = lattices.perceptron_epoch(w, u, labels, order, c)
        if frozen is not None:
            w[frozen] = w0[frozen]
            u[frozen] = 0.0
        avg = w - u / c
        errors.append(n_tok)
        info = IterationInfo(iteration=epoch, x=avg, f=float(n_tok), gnorm=float("nan"),
                             xnorm=float(np.linalg.norm(avg)), step=1.0, n_evals=epoch,
                             n_active=int(np.count_nonzero(avg)))
        if callback is not None and callback(info):
            reason = "stopped by callback"
            break
        if n_sent == 0:
            reason, converged = f"converged: no training sentence mislabeled in epoch {epoch}", True
            break
        if epsilon > 0 and epoch > period:
            before = errors[-1 - period]
            if before > 0 and (before - n_tok) / before < epsilon:
                reason = (f"converged: mislabeled tokens fell by less than epsilon {epsilon:g} over the "
                          f"last {period} epochs ({before} to {n_tok})")
                converged = True
                break
    return OptimizeResult(x=avg, f=float(errors[-1]) if errors else float("nan"), n_iter=epoch,
                          n_evals=epoch, converged=converged, reason=reason)
