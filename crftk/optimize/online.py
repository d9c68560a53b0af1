"""Online training: Collins' averaged (voted) perceptron, SGD with L2 (l2sgd), and the
large-margin learners of CRFsuite, passive-aggressive (pa) and AROW (arow).

Each epoch visits the sentences in a new random order (seeded), decodes each
with the current weights and, on a mistake, adds the gold labeling's features
and subtracts the predicted one's (Collins 2002). The averaged weights, which
Sha & Pereira (2003) found to overfit much less, are what the callback sees and
what training returns. Progress is reported as the batch optimizers do: one
IterationInfo per epoch, whose objective is the number of mislabeled tokens.
"""

import numpy as np

from crftk.optimize.common import OptimizeResult, StoppingRules, report


def _rules(max_iter, epsilon, period):
    """The batch minimisers' stopping rules, on the per-epoch objective; no gradient test
    (there is no gradient), and epsilon 0 disables the improvement test."""
    return StoppingRules(max_iter=max_iter, epsilon=epsilon, period=period if epsilon > 0 else 0,
                         gtol=0.0, f0=np.inf)


def averaged_perceptron(model, labels, w0, *, max_iter=50, epsilon=0.0, period=10, frozen=None,
                        callback=None, seed=0):
    """Train by the averaged perceptron; returns an OptimizeResult whose x is the average.

    ``model`` runs the epochs: ``n_sentences`` and ``perceptron_epoch(w, u, labels,
    order, c)`` (crftk._lattice.Lattices). The objective an epoch reports is its
    number of mislabeled tokens.
    """
    rng = np.random.default_rng(seed)
    w = np.array(w0, dtype=np.float64)
    u = np.zeros_like(w)
    c = 1.0
    rules = _rules(max_iter, epsilon, period)
    avg = w.copy()
    n_tok = float("nan")
    epoch = 0
    outcome = (False, f"reached the iteration limit ({max_iter}) before converging")
    for epoch in range(1, max_iter + 1):
        order = rng.permutation(model.n_sentences).astype(np.int32)
        n_sent, n_tok, c = model.perceptron_epoch(w, u, labels, order, c)
        if frozen is not None:
            w[frozen] = w0[frozen]
            u[frozen] = 0.0
        avg = w - u / c
        stop = report(callback, iteration=epoch, x=avg, shape=avg.shape, f=float(n_tok), gnorm=float("nan"),
                      xnorm=float(np.linalg.norm(avg)), step=1.0, n_evals=epoch)
        if n_sent == 0:
            outcome = (True, f"converged: no training sentence mislabeled in epoch {epoch}")
            break
        found = rules.after_iteration(epoch, float(n_tok), float("nan"), 0.0, stop)
        if found is not None:
            outcome = found
            break
    return OptimizeResult(x=avg, f=float(n_tok), n_iter=epoch, n_evals=epoch, converged=outcome[0],
                          reason=outcome[1])


def sgd(model, labels, w0, *, c2, max_iter=50, epsilon=1e-6, period=10, frozen=None,
        learn_transitions=True, callback=None, seed=0, eta0=None, calibration_sentences=1000,
        log=None):
    """Stochastic gradient descent on the L2-penalized likelihood, as CRFsuite's l2sgd.

    The rate decays as eta = 1 / (lam * (t0 + t)) with lam = 2*c2/n (n
    sentences, t sentences seen); t0 comes from the initial rate eta0, which,
    unless given, is calibrated: each candidate rate runs one epoch on a sample
    of sentences and the one with the lowest loss wins. The objective reported
    per epoch is the sum of the sentences' losses during the pass plus the
    penalty at its end (an estimate: each sentence is scored before its step).
    """
    n = model.n_sentences
    if not c2 > 0:
        raise ValueError("sgd needs an L2 coefficient c2 > 0 (its rate schedule depends on it)")
    lam = 2.0 * c2 / n
    rng = np.random.default_rng(seed)
    w0 = np.array(w0, dtype=np.float64)
    trans = int(bool(learn_transitions))
    if eta0 is None:
        sample = rng.permutation(n)[:calibration_sentences].astype(np.int32)
        best = None
        for eta in 0.1 * 2.0 ** -np.arange(-2, 8):          # 0.4 down to 0.00078
            v = w0.copy()
            _, _, loss = model.sgd_epoch(v, 1.0, labels, sample, lam, 1.0 / (lam * eta), 0.0, trans)
            if log is not None:
                log(f"sgd calibration: eta0 {eta:.4g}, loss {loss:.6g} on {sample.size} sentences")
            if np.isfinite(loss) and (best is None or loss < best[1]):
                best = (eta, loss)
        eta0 = best[0] if best is not None else 0.01
    t0_rate = 1.0 / (lam * eta0)
    v, a, t = w0.copy(), 1.0, 0.0
    rules = _rules(max_iter, epsilon, period)
    value = float("nan")
    w = w0
    epoch = 0
    outcome = (False, f"reached the iteration limit ({max_iter}) before converging")
    for epoch in range(1, max_iter + 1):
        order = rng.permutation(n).astype(np.int32)
        a, t, loss = model.sgd_epoch(v, a, labels, order, lam, t0_rate, t, trans)
        w = a * v
        if frozen is not None:
            w[frozen] = w0[frozen]
            v[frozen] = w0[frozen] / a
        value = loss + c2 * float(w[~frozen] @ w[~frozen] if frozen is not None else w @ w)
        stop = report(callback, iteration=epoch, x=w, shape=w.shape, f=value, gnorm=float("nan"),
                      xnorm=float(np.linalg.norm(w)), step=1.0 / (lam * (t0_rate + t)), n_evals=epoch)
        if not np.isfinite(value):
            outcome = (False, "the objective became infinite: the learning rate is too large")
            break
        found = rules.after_iteration(epoch, value, float("nan"), 0.0, stop)
        if found is not None:
            outcome = found
            break
    return OptimizeResult(x=w, f=value, n_iter=epoch, n_evals=epoch, converged=outcome[0], reason=outcome[1])


def _frozen_flags(frozen, n):
    return None if frozen is None else np.asarray(frozen, dtype=bool).reshape(n)


def _margin_epochs(epoch_pass, x0_report, *, max_iter, epsilon, period, callback, seed, n_sentences):
    """The epochs of a large-margin learner: ``epoch_pass(order)`` runs one and returns
    (mislabeled sentences, mislabeled tokens, loss sum, the weights to report). The
    objective of an epoch is its loss sum (0 exactly when no sentence was mislabeled:
    converged); the stopping rules are the perceptron's."""
    rng = np.random.default_rng(seed)
    rules = _rules(max_iter, epsilon, period)
    x, loss, epoch = x0_report, float("nan"), 0
    outcome = (False, f"reached the iteration limit ({max_iter}) before converging")
    for epoch in range(1, max_iter + 1):
        order = rng.permutation(n_sentences).astype(np.int32)
        n_sent, n_tok, loss, x = epoch_pass(order)
        stop = report(callback, iteration=epoch, x=x, shape=x.shape, f=float(loss), gnorm=float("nan"),
                      xnorm=float(np.linalg.norm(x)), step=1.0, n_evals=epoch, mislabeled=int(n_tok))
        if n_sent == 0:
            outcome = (True, f"converged: no training sentence mislabeled in epoch {epoch}")
            break
        found = rules.after_iteration(epoch, float(loss), float("nan"), 0.0, stop)
        if found is not None:
            outcome = found
            break
    return OptimizeResult(x=x, f=float(loss), n_iter=epoch, n_evals=epoch, converged=outcome[0],
                          reason=outcome[1])


def passive_aggressive(model, labels, w0, *, pa_type=1, c=1.0, error_sensitive=True, averaging=True,
                       max_iter=50, epsilon=0.0, period=10, frozen=None, callback=None, seed=0):
    """Train by passive-aggressive updates (Crammer et al. 2006, as CRFsuite's pa); returns an
    OptimizeResult whose x is the average of the weights over every sentence seen (averaging)
    or the last weights.

    ``model`` runs the epochs: ``n_sentences`` and ``pa_epoch`` (crftk._lattice.Lattices,
    where the loss and the three step sizes of ``pa_type`` are described). Each epoch's
    objective is the sum of its losses; the callback's ``mislabeled`` its mislabeled tokens.
    ``frozen`` parameters keep their starting values.
    """
    w = np.array(w0, dtype=np.float64)
    u = np.zeros_like(w)
    flags = _frozen_flags(frozen, w.size)
    state = {"c": 1.0}

    def epoch_pass(order):
        n_sent, n_tok, loss, state["c"] = model.pa_epoch(w, u, labels, order, state["c"], pa_type, c,
                                                         error_sensitive, flags)
        return n_sent, n_tok, loss, (w - u / state["c"] if averaging else w.copy())

    return _margin_epochs(epoch_pass, w.copy(), max_iter=max_iter, epsilon=epsilon, period=period,
                          callback=callback, seed=seed, n_sentences=model.n_sentences)


def arow(model, labels, w0, *, variance=1.0, gamma=1.0, max_iter=50, epsilon=0.0, period=10, frozen=None,
         callback=None, seed=0):
    """Train by AROW (Mejer & Crammer 2010, as CRFsuite's arow: a diagonal covariance, every
    weight's variance starting at ``variance``); returns an OptimizeResult whose x is the
    mean weights (not averaged, as CRFsuite).

    ``model`` runs the epochs: ``n_sentences`` and ``arow_epoch`` (crftk._lattice.Lattices).
    Each epoch's objective is the sum of its losses; the callback's ``mislabeled`` its
    mislabeled tokens. ``frozen`` parameters keep their starting values.
    """
    mean = np.array(w0, dtype=np.float64)
    cov = np.full_like(mean, float(variance))
    flags = _frozen_flags(frozen, mean.size)

    def epoch_pass(order):
        n_sent, n_tok, loss = model.arow_epoch(mean, cov, labels, order, gamma, flags)
        return n_sent, n_tok, loss, mean.copy()

    return _margin_epochs(epoch_pass, mean.copy(), max_iter=max_iter, epsilon=epsilon, period=period,
                          callback=callback, seed=seed, n_sentences=model.n_sentences)
