"""Online training: Collins' averaged (voted) perceptron, SGD with L2 (l2sgd), and the
large-margin learners of CRFsuite, passive-aggressive (pa) and AROW (arow).

Each epoch visits the sentences in a new random order (seeded), decodes each
with the current weights and, on a mistake, adds the gold labeling's features
and subtracts the predicted one's (Collins 2002). The averaged weights, which
Sha & Pereira (2003) found to overfit much less, are what the callback sees and
what training returns. Progress is reported as the batch optimizers do: one
IterationInfo per epoch, whose objective is the number of mislabeled tokens.

The sentences come in batches (:class:`Batches`): in memory, one batch holding the whole
corpus (:class:`InMemory`); streamed from files (crftk.training.streaming), a batch at a time,
each visited in its own random order, the learner's state carried from batch to batch. With
one batch the two are the same computation.
"""

import numpy as np

from crftk.optimize.common import dot64, norm, OptimizeResult, StoppingRules, report


class Batches:
    """The training sentences of an online learner as batches, read once per epoch.

    ``n_sentences``: in all batches; ``batches()``: (model, labels) of each batch in turn, the
    model running the kernel epochs (``n_sentences``, ``perceptron_epoch``, ``sgd_epoch``,
    ``pa_epoch``, ``arow_epoch``: crftk._lattice.Lattices) over that batch alone; ``first()``:
    (model, labels) of the first batch, on which sgd calibrates its rate.
    """

    n_sentences = 0

    def batches(self):
        raise NotImplementedError

    def first(self):
        return next(iter(self.batches()))


class InMemory(Batches):
    """The whole corpus as one batch: ``model`` bound to it, ``labels`` its gold label ids."""

    def __init__(self, model, labels):
        self.model, self.labels = model, labels
        self.n_sentences = model.n_sentences

    def batches(self):
        return ((self.model, self.labels),)


def _batches_of(model, labels):
    """A Batches as given (``labels`` None), or the in-memory corpus of ``model`` and ``labels``."""
    if isinstance(model, Batches):
        if labels is not None:
            raise ValueError("batches carry their own labels: pass labels=None")
        return model
    return InMemory(model, labels)


def _orders(rng, data):
    """(model, labels, order) of each batch of an epoch, each batch in a new random order."""
    for model, labels in data.batches():
        yield model, labels, rng.permutation(model.n_sentences).astype(np.int32)
        del model, labels       # a streamed batch is not held while the next one is read


def _rules(max_iter, epsilon, period):
    """The batch minimisers' stopping rules, on the per-epoch objective; no gradient test
    (there is no gradient), and epsilon 0 disables the improvement test."""
    return StoppingRules(max_iter=max_iter, epsilon=epsilon, period=period if epsilon > 0 else 0,
                         gtol=0.0, f0=np.inf)


def _epochs(epoch_pass, x0, *, max_iter, epsilon, period, callback, seed, data):
    """The epochs of a mistake-driven learner: ``epoch_pass(batches)`` runs one over the
    (model, labels, order) of each batch of ``data`` and returns (mislabeled sentences, the epoch's objective, the
    weights to report, its mislabeled tokens for the callback or None). Training has
    converged when an epoch mislabels no sentence; else the batch minimisers' rules apply
    to the objective."""
    rng = np.random.default_rng(seed)
    rules = _rules(max_iter, epsilon, period)
    x, f, epoch = x0, float("nan"), 0
    outcome = (False, f"reached the iteration limit ({max_iter}) before converging")
    for epoch in range(1, max_iter + 1):
        n_sent, f, x, mislabeled = epoch_pass(_orders(rng, data))
        stop = report(callback, iteration=epoch, x=x, shape=x.shape, f=float(f), gnorm=float("nan"),
                      xnorm=norm(x), step=1.0, n_evals=epoch, mislabeled=mislabeled)
        if n_sent == 0:
            outcome = (True, f"converged: no training sentence mislabeled in epoch {epoch}")
            break
        found = rules.after_iteration(epoch, float(f), float("nan"), 0.0, stop)
        if found is not None:
            outcome = found
            break
    return OptimizeResult(x=x, f=float(f), n_iter=epoch, n_evals=epoch, converged=outcome[0], reason=outcome[1])


def averaged_perceptron(model, labels, w0, *, max_iter=50, epsilon=0.0, period=10, frozen=None,
                        callback=None, seed=0):
    """Train by the averaged perceptron; returns an OptimizeResult whose x is the average.

    ``model`` runs the epochs: ``n_sentences`` and ``perceptron_epoch(w, u, labels,
    order, c)`` (crftk._lattice.Lattices); or ``model`` is a :class:`Batches` and ``labels``
    None. The objective an epoch reports is its number of mislabeled tokens.
    """
    data = _batches_of(model, labels)
    w = np.array(w0, dtype=np.float64)
    u = np.zeros_like(w)
    state = {"c": 1.0}

    def step(part, y, order):
        n_sent, n_tok, state["c"] = part.perceptron_epoch(w, u, y, order, state["c"])
        return n_sent, n_tok, 0.0

    def epoch_pass(batches):
        n_sent, n_tok, _ = _summed(step, batches)
        if frozen is not None:
            w[frozen] = w0[frozen]
            u[frozen] = 0.0
        return n_sent, float(n_tok), w - u / state["c"], None

    return _epochs(epoch_pass, w.copy(), max_iter=max_iter, epsilon=epsilon, period=period, callback=callback,
                   seed=seed, data=data)


def sgd(model, labels, w0, *, c2, max_iter=50, epsilon=1e-6, period=10, frozen=None,
        learn_transitions=True, callback=None, seed=0, eta0=None, calibration_sentences=1000,
        log=None):
    """Stochastic gradient descent on the L2-penalized likelihood, as CRFsuite's l2sgd.

    The rate decays as eta = 1 / (lam * (t0 + t)) with lam = 2*c2/n (n
    sentences, t sentences seen); t0 comes from the initial rate eta0, which,
    unless given, is calibrated: each candidate rate runs one epoch on a sample
    of sentences and the one with the lowest loss wins. The objective reported
    per epoch is the sum of the sentences' losses during the pass plus the
    penalty at its end (an estimate: each sentence is scored before its step). ``model``
    and ``labels`` as :func:`averaged_perceptron`'s; over batches, n counts all of them and
    the calibration sample is drawn from the first.
    """
    data = _batches_of(model, labels)
    n = data.n_sentences
    if not c2 > 0:
        raise ValueError("sgd needs an L2 coefficient c2 > 0 (its rate schedule depends on it)")
    lam = 2.0 * c2 / n
    rng = np.random.default_rng(seed)
    w0 = np.array(w0, dtype=np.float64)
    trans = int(bool(learn_transitions))
    if eta0 is None:
        first, first_labels = data.first()
        sample = rng.permutation(first.n_sentences)[:calibration_sentences].astype(np.int32)
        best = None
        for eta in 0.1 * 2.0 ** -np.arange(-2, 8):          # 0.4 down to 0.00078
            v = w0.copy()
            _, _, loss = first.sgd_epoch(v, 1.0, first_labels, sample, lam, 1.0 / (lam * eta), 0.0, trans)
            if log is not None:
                log(f"sgd calibration: eta0 {eta:.4g}, loss {loss:.6g} on {sample.size} sentences")
            if np.isfinite(loss) and (best is None or loss < best[1]):
                best = (eta, loss)
        eta0 = best[0] if best is not None else 0.01
        del first, first_labels
    t0_rate = 1.0 / (lam * eta0)
    v, a, t = w0.copy(), 1.0, 0.0
    rules = _rules(max_iter, epsilon, period)
    value = float("nan")
    w = w0
    epoch = 0
    outcome = (False, f"reached the iteration limit ({max_iter}) before converging")

    def step(part, y, order):
        nonlocal a, t
        a, t, loss = part.sgd_epoch(v, a, y, order, lam, t0_rate, t, trans)
        return 0, 0, loss

    for epoch in range(1, max_iter + 1):
        loss = _summed(step, _orders(rng, data))[2]
        w = a * v
        if frozen is not None:
            w[frozen] = w0[frozen]
            v[frozen] = w0[frozen] / a
        value = loss + c2 * (dot64(w[~frozen], w[~frozen]) if frozen is not None else dot64(w, w))
        stop = report(callback, iteration=epoch, x=w, shape=w.shape, f=value, gnorm=float("nan"),
                      xnorm=norm(w), step=1.0 / (lam * (t0_rate + t)), n_evals=epoch)
        if not np.isfinite(value):
            outcome = (False, "the objective became infinite: the learning rate is too large")
            break
        found = rules.after_iteration(epoch, value, float("nan"), 0.0, stop)
        if found is not None:
            outcome = found
            break
    return OptimizeResult(x=w, f=value, n_iter=epoch, n_evals=epoch, converged=outcome[0], reason=outcome[1])


def _summed(step, batches):
    """(mislabeled sentences, mislabeled tokens, loss) of a margin learner's epoch, summed over
    its batches; ``step(model, labels, order)`` runs one batch's."""
    n_sent = n_tok = 0
    loss = 0.0
    for part, y, order in batches:
        s, t, part_loss = step(part, y, order)
        n_sent, n_tok, loss = n_sent + s, n_tok + int(t), loss + part_loss
        del part, y, order      # (the next batch is read in the loop's next step)
    return n_sent, n_tok, loss


def _frozen_flags(frozen, n):
    return None if frozen is None else np.asarray(frozen, dtype=bool).reshape(n)


def passive_aggressive(model, labels, w0, *, pa_type=1, c=1.0, error_sensitive=True, averaging=True,
                       max_iter=50, epsilon=0.0, period=10, frozen=None, callback=None, seed=0):
    """Train by passive-aggressive updates (Crammer et al. 2006, as CRFsuite's pa); returns an
    OptimizeResult whose x is the average of the weights over every sentence seen (averaging)
    or the last weights.

    ``model`` runs the epochs: ``n_sentences`` and ``pa_epoch`` (crftk._lattice.Lattices,
    where the loss and the three step sizes of ``pa_type`` are described); or it is a
    :class:`Batches` and ``labels`` None. Each epoch's
    objective is the sum of its losses; the callback's ``mislabeled`` its mislabeled tokens.
    ``frozen`` parameters keep their starting values.
    """
    data = _batches_of(model, labels)
    w = np.array(w0, dtype=np.float64)
    u = np.zeros_like(w)
    flags = _frozen_flags(frozen, w.size)
    state = {"c": 1.0}

    def step(part, y, order):
        n_sent, n_tok, loss, state["c"] = part.pa_epoch(w, u, y, order, state["c"], pa_type, c,
                                                        error_sensitive, flags)
        return n_sent, n_tok, loss

    def epoch_pass(batches):
        n_sent, n_tok, loss = _summed(step, batches)
        return n_sent, loss, (w - u / state["c"] if averaging else w.copy()), n_tok

    return _epochs(epoch_pass, w.copy(), max_iter=max_iter, epsilon=epsilon, period=period,
                   callback=callback, seed=seed, data=data)


def arow(model, labels, w0, *, variance=1.0, gamma=1.0, max_iter=50, epsilon=0.0, period=10, frozen=None,
         callback=None, seed=0):
    """Train by AROW (Mejer & Crammer 2010, as CRFsuite's arow: a diagonal covariance, every
    weight's variance starting at ``variance``); returns an OptimizeResult whose x is the
    mean weights (not averaged, as CRFsuite).

    ``model`` runs the epochs: ``n_sentences`` and ``arow_epoch`` (crftk._lattice.Lattices);
    or it is a :class:`Batches` and ``labels`` None. Each epoch's objective is the sum of its
    losses; the callback's ``mislabeled`` its mislabeled tokens. ``frozen`` parameters keep their starting values.
    """
    data = _batches_of(model, labels)
    mean = np.array(w0, dtype=np.float64)
    cov = np.full_like(mean, float(variance))
    flags = _frozen_flags(frozen, mean.size)

    def epoch_pass(batches):
        n_sent, n_tok, loss = _summed(lambda part, y, order: part.arow_epoch(mean, cov, y, order, gamma, flags),
                                      batches)
        return n_sent, loss, mean.copy(), n_tok

    return _epochs(epoch_pass, mean.copy(), max_iter=max_iter, epsilon=epsilon, period=period,
                   callback=callback, seed=seed, data=data)
