"""Minimum classification error (MCE) training of linear-chain CRFs.

After Suzuki, McDermott & Isozaki (2006), "Training Conditional Random Fields
with Multivariate Evaluation Measures". Two objectives, each a callable
``(w) -> (value, gradient)`` like :class:`crftk.objectives.Likelihood`, to
be minimised (for instance with :func:`crftk.optimize.lbfgs`, best started from
MAP weights, as the paper's Table 2 does):

* :class:`MCE` — the smoothed count of misclassified sentences (eqs. 5, 8-10);
* :class:`MCEF` — the smoothed segmentation F-score loss (eqs. 13-16).

Notation: ``g(y) = w . F(y)`` is the score of a labeling y of a sentence (the
unnormalised log potential; ``log p(y|x)`` differs by ``log Z`` only, which
cancels in every difference below, eq. 11); ``y*`` is the gold labeling.

The maximum incorrect labeling
------------------------------
Both objectives use the misclassification measure with ``psi = infinity``
(eq. 7 becomes eq. 5), for which only one competitor matters: the best
labeling other than the gold one,

    y~ = argmax over y != y* of g(y).

It is the Viterbi labeling when that differs from y*, else the second entry
of the exact 2-best list (the paper uses A* search for it; crftk's n-best
kernel with k = 2 gives the same labeling). Both cases are served by one
``nbest(w, 2)`` pass. A sentence with no incorrect labeling at all (a label
set of one label) contributes nothing.

MCE (sentence error rate)
-------------------------
    d   = g(y~) - g(y*)                          (eq. 5: d >= 0 <=> the sentence is wrong)
    l   = 1 / (1 + exp(-(alpha d + beta)))      ("sigmoid", eq. 8)
    l   = log(1 + exp(alpha d + beta)) / alpha   ("logistic", eq. 8; a convex upper bound)
    L(w) = sum over sentences of l  +  c2 ||w||^2      (eqs. 9, 10 without the constant 1/N)
    grad = sum over sentences of l'(d) (F(y~) - F(y*))  +  2 c2 w

with ``l' = alpha l (1 - l)`` (sigmoid) and ``l' = sigmoid(alpha d + beta)``
(logistic).

MCE-F (segmentation F-score)
----------------------------
Segments are the chunks of :func:`crftk.evaluation.conlleval.chunks` (conlleval rules), so
only target segments are ever formed (``delta(s) = 1``; "O" runs are not
segments). For a segment s covering the positions a..b (inclusive) and a
labeling y, the segment-wise discriminant (eq. 15) is the best score of a
labeling that agrees with y on a..b:

    g(y, s) = max over y' with y'[a..b] = y[a..b] of g(y')
            = fwd[a, y_a] + sum_{t=a+1..b} (trans_t(y_{t-1}, y_t) + state_t(y_t)) + bwd[b, y_b]

where fwd and bwd are the forward and backward Viterbi scores
(``Lattices.viterbi_scores``: fwd[t, y] is the best score of a prefix ending
in y at t, bwd[t, y] the best score of the rest of the sentence given y at t).

The segments scored are the gold segments S* (for TP and FN) and, for FP,
the segments of the maximum incorrect output y~ that are not gold segments
(the paper's reduction, with psi = infinity, of FP's sum over all possible
segments). Each gets a misclassification measure d(s), positive when the
decision about s is wrong; two readings of the paper's "eq. 7 with the
segment-wise g" are implemented (``measure=``):

* ``"segment"`` (default): eq. 7 with psi = infinity over the segment's own
  alternatives. With z the segment's labels (y* on a..b for a gold segment,
  y~ on a..b for a false-positive candidate), G = g(z, s) of eq. 15 and G'
  the best score of a labeling that differs from z somewhere on a..b:

      d(s) = G' - G  for a gold segment        (> 0: the best labeling misses it)
      d(s) = G - G'  for a false-positive one  (> 0: the best labeling outputs it)

  G' is found by the position r of the first difference: the best labeling
  agreeing with z on a..r-1 and taking a label u != z_r at r is
  ``fwd[a, z_a] + (sum along z up to r-1) + trans_r(z_{r-1}, u) + state_r(u) + bwd[r, u]``
  (``fwd[a, u] + bwd[a, u]`` for r = a), maximised over r and u.
  At the MAP weights the smoothed counts track the true ones closely.
* ``"competitor"``: the maximum over the competitors is evaluated at y~
  itself (the psi = infinity shortcut applied to every segment), for every
  segment ``d(s) = g(y~, s) - g(y*, s)``. A segment on whose positions y~ and
  y* agree then has d = 0 exactly, a constant ``l = sigmoid(beta)`` (0.5 for
  beta = 0) and no gradient, so the smoothed F-score sits far below the true
  one; only the segments where y~ departs from y* move the weights.

With ``l(s) = sigmoid(alpha d(s) + beta)`` (the paper requires the sigmoid so
that TP stays non-negative) the smoothed counts are

    TP = sum over gold segments of (1 - l(s)),   FN = sum over gold segments of l(s),
    FP = sum over the false-positive candidates of l(s),

and the objective is eq. 16 plus the penalty:

    L(w) = (gamma^2 FN + FP) / ((gamma^2 + 1) TP)  +  c2 ||w||^2

Its derivative in l(s) is ``gamma^2 / Z_D + (gamma^2 + 1) Z_N / Z_D^2`` for a
gold segment and ``1 / Z_D`` for a false-positive candidate (Z_N, Z_D the
numerator and denominator of eq. 16), as in the paper. The derivative of each
max (eq. 15, G') is the feature count vector of the labeling attaining it:
Viterbi prefix, the labels fixed on the segment, Viterbi suffix, whose paths
are recovered by following back-pointers recomputed from fwd/bwd. They are
followed for all sentences at once, one sentence position at a time (a Python
loop over positions, not tokens), merging the masses of paths that join (the
two labelings of a difference cancel once their paths meet).

Approximations and caveats (MCE-F):

* FP sums over the segments of y~ only, not over all possible segments.
* Eq. 15 constrains the labels of the segment's positions only, not the
  chunk's boundaries: a labeling that extends a chunk (B-X I-X followed by
  I-X) agrees with it on its positions.
* The objective is a ratio over the whole corpus, not a per-sentence sum.
* It is discontinuous: when y~ changes (the best incorrect labeling of a
  sentence switches between two labelings of equal score), the set of
  false-positive candidates changes, and with ``"competitor"`` the measures of
  the gold segments jump too. Value and gradient are exact wherever y~ and
  the maximisers stay put; on a large corpus the jumps are dense (on
  CoNLL-2000, every ~1e-4 along the gradient from MAP weights), so
  line-search methods (L-BFGS with strong Wolfe) stop at once, while
  fixed-step gradient descent, like the paper's QuickProp/GPD, makes
  progress. MCE (sentence level) is continuous (piecewise smooth).

Both objectives
---------------
The regulariser is ``c2 ||w||^2`` (crftk's L2 convention, the paper's
``||w||^2 / (2C)`` with ``c2 = 1/(2C)``); ``frozen`` parameters get a zero
gradient and are left out of the penalty, as in Likelihood (objectives.penalty). ``n_evals``
counts decoding passes over the corpus: one per MCE evaluation (the 2-best
pass), two per MCE-F evaluation (2-best and forward/backward Viterbi).
``n_threads`` goes to the 2-best kernel (the forward/backward Viterbi and
state-matrix kernels run on one thread). ``errors(w)`` counts the sentences
and tokens that Viterbi gets wrong; after each call, ``last`` holds a few
statistics of the evaluation (see the classes).

The MCE gradient weights each sentence's count difference F(y~) - F(y*) by
its l'(d), touching only the tokens and transitions where y~ and y* differ.

Edge attributes (``B`` templates with macros) are supported: every score and
count goes through kernels that handle them (``nbest``, ``sequence_scores``,
``viterbi_scores``, ``state_matrix``) or through this module's own feature
counting, which follows the parameter layout of csrc/lattice.pyx (and is
tested against :func:`crftk.objectives.label_counts`).

Paper settings: alpha = 1, beta = 0, gamma = 1 (F1) throughout; C was tuned
on development data over 10^-5..10^5, and the best were C = 10^3 for MCE (both
smoothings) and C = 10^5 (chunking) / 10^4 (NER) for MCE-F, i.e. c2 = 5e-4 and
5e-6 / 5e-5 here (the defaults: 5e-4 and 5e-6). MCE-F's loss is a ratio of
order one for the whole corpus, so its c2 must be far smaller than MCE's
(at MAP weights of CoNLL-2000 chunking, c2 = 5e-5 already makes the penalty
ten times the loss).
"""

import math

import numpy as np

from crftk.errors import CrftkError
from crftk.evaluation.conlleval import chunks as _chunks
from crftk.objectives.penalty import Penalty
from crftk.structures.chain import ranges

__all__ = ["MCE", "MCEF", "SMOOTHINGS", "MEASURES", "chunk_table", "labeling_chunks"]

SMOOTHINGS = ("sigmoid", "logistic")
MEASURES = ("segment", "competitor")

_CONTINUE, _CLOSE, _OPEN = 0, 1, 2


# ---------------------------------------------------------------------------
# small vectorized helpers


def _sigmoid(z):
    """1 / (1 + exp(-z)) without overflow (z = -inf gives 0)."""
    z = np.asarray(z, dtype=np.float64)
    out = np.empty_like(z)
    pos = z >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    e = np.exp(z[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _check_float(name, value, positive=False, nonneg=False):
    v = float(value)
    if not math.isfinite(v) or (positive and v <= 0) or (nonneg and v < 0):
        need = "> 0" if positive else (">= 0" if nonneg else "finite")
        raise CrftkError(f"{name} must be a finite number {need}, got {value!r}")
    return v


# ---------------------------------------------------------------------------
# chunks of whole-corpus labelings, vectorized


def chunk_table(labels):
    """Chunking rules of :func:`crftk.evaluation.conlleval.chunks` as a table over label pairs.

    Returns ``(act, ctype)``: ``act[p, t]`` is what label t does after label p
    (row ``len(labels)``: at the start of a sentence): 2 starts a chunk
    (closing any open one), 1 closes an open chunk before t, 0 continues it
    (or stays outside); ``ctype[t]`` is the type of a chunk starting at t
    (``None`` if t never starts one). Derived by running ``chunks`` on short
    label sequences, so it follows evaluate's rules whatever they are, as long
    as they depend on adjacent pairs only.
    """
    labels = list(labels)
    L = len(labels)
    act = np.full((L + 1, L), _CLOSE, dtype=np.int8)
    ctype = [None] * L

    def opened_last(seq):
        """Whether a chunk is still open at the last label of seq (it runs to the end)."""
        ch = _chunks([labels[i] for i in seq])
        return bool(ch) and ch[-1][2] == len(seq)

    for t in range(L):
        ch = _chunks([labels[t]])
        if ch:
            act[L, t] = _OPEN
            ctype[t] = ch[0][0]
    for p in range(L):
        for t in range(L):
            ch = _chunks([labels[p], labels[t]])
            if ch and ch[-1][1] == 1:
                act[p, t] = _OPEN
                ctype[t] = ch[-1][0]
    # a history after which a chunk is open at label p (if there is one): p opens
    # it, or continues one open at the label before
    witness = {}
    for p in range(L):
        if act[L, p] == _OPEN:
            witness[p] = [p]
        else:
            q = next((q for q in range(L) if act[q, p] == _OPEN), None)
            if q is not None:
                witness[p] = [q, p]
    grew = True
    while grew:
        grew = False
        for q in list(witness):
            for p in range(L):
                if p not in witness and opened_last(witness[q] + [p]):
                    witness[p] = witness[q] + [p]
                    grew = True
    for p, seq in witness.items():
        for t in range(L):
            if act[p, t] != _OPEN and opened_last(seq + [t]):
                act[p, t] = _CONTINUE
    return act, ctype


def labeling_chunks(act, sent_ptr, y):
    """Chunks of a whole-corpus labeling: (start, end_exclusive, first label) arrays.

    ``act`` from :func:`chunk_table`; token indices are corpus-wide; the chunk
    type is ``ctype[first label]``.
    """
    y = np.asarray(y, dtype=np.int64)
    N = y.size
    L = act.shape[1]
    sp = np.asarray(sent_ptr, dtype=np.int64)
    prev = np.empty(N, dtype=np.int64)
    prev[1:] = y[:-1]
    prev[sp[:-1][sp[:-1] < N]] = L
    a = act[prev, y]
    starts = np.flatnonzero(a == _OPEN)
    stops = np.union1d(np.flatnonzero(a != _CONTINUE), sp)
    ends = stops[np.searchsorted(stops, starts, side="right")]
    return starts, ends, y[starts]


# ---------------------------------------------------------------------------
# objectives


class _Base:
    """What MCE and MCE-F share: the corpus, the competitor search, the penalty."""

    def __init__(self, inference, *, c2, frozen):
        self.inference = inference
        self.space = space = inference.space
        self.corpus = inference.corpus
        self.labels = inference.structure.gold(self.corpus)
        self.penalty = Penalty(c2, frozen)
        self.c2 = self.penalty.c2
        self.n_threads = inference.n_threads
        self.n_params = space.n_params
        self.n_evals = 0
        self.last = {}

        self.L = space.n_labels
        self._lay = space.layout()
        idx = inference.index
        self._sent_ptr, self._lengths = idx["sent_ptr"], idx["lengths"]
        self.N = int(self._sent_ptr[-1])
        self.S = self._lengths.size
        self._sid, self._first, self._last, self._pos = idx["sid"], idx["first"], idx["last"], idx["pos"]

    # -- helpers -----------------------------------------------------------

    def _per_sentence_any(self, mask):
        return np.bincount(self._sid, weights=mask, minlength=self.S) > 0

    def _competitor(self, w):
        """The best incorrect labeling y~ (one 2-best pass).

        Returns (y~ for the whole corpus, with the gold labels in sentences that
        have no incorrect labeling; which sentences have one; which sentences
        the Viterbi labeling gets right, so that y~ is the second best).
        """
        paths, _, counts = self.inference.nbest(w, 2)
        self.n_evals += 1
        y = self.labels
        first_wrong = self._per_sentence_any(paths[0] != y)
        exists = first_wrong | (counts >= 2)
        take_first = np.repeat(first_wrong, self._lengths)
        bad = np.where(take_first, paths[0], paths[1])
        bad = np.where(np.repeat(exists, self._lengths), bad, y).astype(np.int32)
        exists &= self._per_sentence_any(bad != y)
        return bad, exists, ~first_wrong

    def errors(self, w):
        """Sentences and tokens the Viterbi labeling gets wrong (one decoding pass)."""
        pred, _ = self.inference.best(w)
        wrong = pred != self.labels
        return int(self._per_sentence_any(wrong).sum()), int(wrong.sum())


class MCE(_Base):
    """Smoothed sentence error count (MCE criterion, psi = infinity) plus ``c2 * ||w||^2``.

    ``MCE(inference, alpha=1.0, beta=0.0, smoothing="sigmoid", c2=5e-4,
    frozen=None)`` over a chain bound to the training corpus``; calling it with weights returns (value,
    gradient). See the module docstring for the equations. After a call,
    ``last`` holds the number of sentences with ``d >= 0`` ("n_wrong", i.e.
    misclassified or tied) and the sentences whose competitor was the second
    best ("n_second_best").
    """

    def __init__(self, inference, *, alpha=1.0, beta=0.0, smoothing="sigmoid", c2=5e-4, frozen=None):
        if smoothing not in SMOOTHINGS:
            raise CrftkError(f"unknown MCE smoothing {smoothing!r}: choose sigmoid or logistic")
        self.alpha = _check_float("alpha", alpha, positive=True)
        self.beta = _check_float("beta", beta)
        self.smoothing = smoothing
        super().__init__(inference, c2=c2, frozen=frozen)

    def margins(self, w):
        """(d per sentence, best incorrect labeling, has-competitor mask): d = -inf without one."""
        bad, exists, second = self._competitor(w)
        d = self.inference.sequence_scores(w, bad) - self.inference.sequence_scores(w, self.labels)
        d[~exists] = -np.inf
        return d, bad, exists, second

    def __call__(self, w):
        w = np.ascontiguousarray(w, dtype=np.float64)
        d, bad, exists, second = self.margins(w)
        z = self.alpha * d + self.beta
        if self.smoothing == "sigmoid":
            loss = _sigmoid(z)
            slope = self.alpha * loss * _sigmoid(-z)
        else:
            loss = np.where(np.isneginf(z), 0.0, np.logaddexp(0.0, z)) / self.alpha
            slope = _sigmoid(z)
        value = float(loss.sum())
        grad = self.inference.labeling_difference(bad, self.labels, np.repeat(slope, self._lengths))
        self.last = {"n_wrong": int((d >= 0).sum()), "n_second_best": int((second & exists).sum())}
        return self.penalty(w, value, grad)


class MCEF(_Base):
    """Smoothed segmentation F-score loss (eq. 16) plus ``c2 * ||w||^2``.

    ``MCEF(inference, alpha=1.0, beta=0.0, gamma=1.0, measure="segment",
    c2=5e-6, frozen=None, tags=None)``; calling it with weights
    returns (value, gradient). The loss part of the value is
    ``(gamma^2 FN + FP) / ((gamma^2 + 1) TP)`` over the smoothed counts, i.e.
    ``1/F_gamma - 1`` of the smoothed F-score. ``measure`` picks the segment
    misclassification measure ("segment" or "competitor"); see the module
    docstring for the equations and the reading of the paper. Chunks follow
    :func:`crftk.evaluation.conlleval.chunks` applied to ``tags[label id]`` (default: the
    label names; for order-2 pair labels pass the current tag of each pair);
    the gold labels must contain at least one. After a call, ``last`` holds
    the smoothed TP, FN, FP and F-score.
    """

    def __init__(self, inference, *, alpha=1.0, beta=0.0, gamma=1.0, measure="segment", c2=5e-6,
                 frozen=None, tags=None):
        if measure not in MEASURES:
            raise CrftkError(f"unknown MCE-F measure {measure!r}: choose segment or competitor")
        self.measure = measure
        self.alpha = _check_float("alpha", alpha, positive=True)
        self.beta = _check_float("beta", beta)
        self.gamma = _check_float("gamma", gamma, positive=True)
        super().__init__(inference, c2=c2, frozen=frozen)
        tags = self.space.labels if tags is None else list(tags)
        if len(tags) != self.L:
            raise CrftkError(f"MCE-F: {len(tags)} tag names for {self.L} labels")
        self._act, ctype = chunk_table(tags)
        names = sorted({c for c in ctype if c is not None})
        self._type_id = np.array([-1 if c is None else names.index(c) for c in ctype], dtype=np.int64)
        self._n_types = max(len(names), 1)
        a, b, first = labeling_chunks(self._act, self._sent_ptr, self.labels)
        if a.size == 0:
            raise CrftkError("MCE-F needs chunks (target segments) in the gold labels; found none")
        self._gold_a, self._gold_b = a, b
        self._gold_keys = np.sort(self._chunk_keys(a, b, first))

    def _chunk_keys(self, a, b, first):
        return (a * (self.N + 1) + b) * self._n_types + self._type_id[first]

    # -- scores ---------------------------------------------------------------

    def _path_cumsum(self, w, state, y):
        """Running sum over tokens of trans_t(y_{t-1}, y_t) + state_t(y_t) (0 at sentence starts)."""
        inc = np.zeros(self.N)
        t = np.flatnonzero(~self._first)
        inc[t] = state[t, y[t]] + self.inference.transition_scores(w, t, y[t - 1], y[t])
        return np.cumsum(inc)

    def _walk(self, w, fwd, bwd, state, tok, lab, mass, backward):
        """Counts of the Viterbi prefixes into (or suffixes out of) nodes, weighted by mass.

        The prefix into (t, y) is the best labeling of the tokens before t given
        y at t: it includes the transition into t, not the state at t. The
        suffix out of (t, y) is the best labeling of the tokens after t given y
        at t. Paths are followed one sentence position at a time, for all
        sentences at once, merging the masses of nodes where paths join.
        Returns node and edge lists for :meth:`_counts`.
        """
        L = self.L
        nodes, edges = [], []
        keep = mass != 0
        tok, lab, mass = tok[keep], lab[keep], mass[keep]
        if tok.size == 0:
            return nodes, edges
        pos = self._pos[tok]
        order = np.argsort(pos, kind="stable")
        tok, lab, mass, pos = tok[order], lab[order], mass[order], pos[order]
        ct = np.zeros(0, dtype=np.int64)
        cy = np.zeros(0, dtype=np.int64)
        cm = np.zeros(0)
        step = -1 if backward else 1
        p = int(pos.max()) if backward else int(pos.min())
        while not (backward and p < 1):
            lo, hi = np.searchsorted(pos, [p, p + 1])
            t = np.concatenate([ct, tok[lo:hi]])
            y = np.concatenate([cy, lab[lo:hi]])
            m = np.concatenate([cm, mass[lo:hi]])
            ahead = hi < pos.size            # forward: deposits further on
            if t.size:
                key, inv = np.unique(t * L + y, return_inverse=True)
                m = np.bincount(inv.ravel(), weights=m, minlength=key.size)
                t, y = key // L, key % L
                nz = m != 0
                if not backward:
                    nz &= ~self._last[t]
                t, y, m = t[nz], y[nz], m[nz]
            if t.size and backward:
                # back-pointer of (t, y): argmax over i of fwd[t-1, i] + trans_t(i, y)
                i = np.argmax(fwd[t - 1] + self.inference.transition_vectors(w, t, y, column=True), axis=1)
                edges.append((t, i, y, m))
                nodes.append((t - 1, i, m))
                ct, cy, cm = t - 1, i, m
            elif t.size:
                # forward pointer of (t, y): argmax over j of trans_{t+1}(y, j) + state + bwd at t+1
                v = t + 1
                j = np.argmax(self.inference.transition_vectors(w, v, y, column=False) + state[v] + bwd[v], axis=1)
                edges.append((v, y, j, m))
                nodes.append((v, j, m))
                ct, cy, cm = v, j, m
            else:
                ct, cy, cm = t, y, m
                if not (ahead if not backward else lo > 0):
                    break                    # nothing left to follow
            p += step
        return nodes, edges

    # -- objective --------------------------------------------------------------

    def _deviations(self, w, fwd, bwd, state, y, bad, cy, cb, a, b, is_gold):
        """Per segment, the best labeling that differs from its reference somewhere on a..b-1.

        The reference is y* for gold segments and y~ for the others. The best
        such labeling agrees with the reference on a..r-1 and takes a label
        u != reference at r, for the best (r, u); returns (its score, r, u).
        """
        L = self.L
        n = b - a
        seg = np.repeat(np.arange(a.size), n)
        tok = ranges(a, n)
        g = is_gold[seg]
        z = np.where(g, y[tok], bad[tok]).astype(np.int64)
        first = tok == a[seg]
        vec = np.empty((tok.size, L))
        f = np.flatnonzero(first)
        vec[f] = fwd[tok[f]] + bwd[tok[f]]              # any prefix and suffix through (a, u)
        o = np.flatnonzero(~first)
        if o.size:
            to = tok[o]
            aa = a[seg[o]]
            go = g[o]
            za = np.where(go, y[aa], bad[aa])
            run = np.where(go, cy[to - 1] - cy[aa], cb[to - 1] - cb[aa])
            # the reference on a..t-1, then u at t, then the best suffix
            vec[o] = ((fwd[aa, za] + run)[:, None] + self.inference.transition_vectors(w, to, z[o - 1], column=False)
                      + state[to] + bwd[to])
        rows = np.arange(tok.size)
        vec[rows, z] = -np.inf
        u = np.argmax(vec, axis=1)
        cand = vec[rows, u]
        best = np.maximum.reduceat(cand, np.cumsum(n) - n)
        hit = np.flatnonzero(cand == best[seg])
        _, first_hit = np.unique(seg[hit], return_index=True)
        pick = hit[first_hit]
        return best, tok[pick], u[pick]

    def _evaluate(self, w):
        """Segments, their measures d, and what the gradient needs."""
        bad, exists, _ = self._competitor(w)
        fwd, bwd = self.inference.max_scores(w)
        self.n_evals += 1
        state = self.inference.state_matrix(w)
        y = self.labels
        ba, bb, bfirst = labeling_chunks(self._act, self._sent_ptr, bad)
        wrong = ~np.isin(self._chunk_keys(ba, bb, bfirst), self._gold_keys)
        a = np.concatenate([self._gold_a, ba[wrong]])
        b = np.concatenate([self._gold_b, bb[wrong]])
        is_gold = np.zeros(a.size, dtype=bool)
        is_gold[:self._gold_a.size] = True
        e = b - 1
        cy = self._path_cumsum(w, state, y)
        cb = self._path_cumsum(w, state, bad)
        g_gold = fwd[a, y[a]] + (cy[e] - cy[a]) + bwd[e, y[e]]       # eq. 15 for y*
        g_bad = fwd[a, bad[a]] + (cb[e] - cb[a]) + bwd[e, bad[e]]     # eq. 15 for y~
        ev = {"a": a, "b": b, "is_gold": is_gold, "bad": bad, "exists": exists,
              "fwd": fwd, "bwd": bwd, "state": state}
        if self.measure == "competitor":
            d = g_bad - g_gold
        else:
            g_alt, ev["r"], ev["u"] = self._deviations(w, fwd, bwd, state, y, bad, cy, cb, a, b, is_gold)
            margin = np.where(is_gold, g_gold, g_bad) - g_alt    # > 0: the segment is output
            d = np.where(is_gold, -margin, margin)
        d[~exists[self._sid[a]]] = -np.inf
        ev["d"] = d
        return ev

    def segment_margins(self, w):
        """Per segment (gold ones first, then the false-positive candidates of y~).

        Returns (start, end_exclusive, is_gold, d, bad, exists): corpus-wide
        token offsets, d as in the module docstring (-inf in sentences without
        an incorrect labeling), the best incorrect labeling y~ and the sentences
        that have one.
        """
        ev = self._evaluate(w)
        return ev["a"], ev["b"], ev["is_gold"], ev["d"], ev["bad"], ev["exists"]

    def __call__(self, w):
        w = np.ascontiguousarray(w, dtype=np.float64)
        ev = self._evaluate(w)
        is_gold = ev["is_gold"]
        z = self.alpha * ev["d"] + self.beta
        loss = _sigmoid(z)
        keep = _sigmoid(-z)                          # 1 - loss, without cancellation
        g2 = self.gamma ** 2
        tp = float(keep[is_gold].sum())
        fn = float(loss[is_gold].sum())
        fp = float(loss[~is_gold].sum())
        zn = g2 * fn + fp
        zd = (g2 + 1.0) * tp
        if zd <= 0.0:
            zd = np.finfo(float).tiny
        value = zn / zd
        dfdl = np.where(is_gold, g2 / zd + (g2 + 1.0) * zn / zd ** 2, 1.0 / zd)
        coef = dfdl * self.alpha * loss * keep       # dL/dd of every segment
        if self.measure == "competitor":
            parts = self._parts_competitor(ev, coef)
        else:
            parts = self._parts_segment(ev, coef)
        grad = self._gradient(w, ev, *parts)
        self.last = {"tp": tp, "fn": fn, "fp": fp, "f": 1.0 / (1.0 + value)}
        return self.penalty(w, value, grad)

    def _parts_competitor(self, ev, coef):
        """d = g(y~, s) - g(y*, s): coef * (F(maximiser for y~) - F(maximiser for y*)).

        Returns node and edge lists and the prefix and suffix deposits for the walks.
        """
        y, bad = self.labels, ev["bad"]
        nz = coef != 0
        a, b, coef = ev["a"][nz], ev["b"][nz], coef[nz]
        n = b - a
        tok = ranges(a, n)
        c = np.repeat(coef, n)
        # inside the segment: the two labelings themselves
        diff = bad[tok] != y[tok]
        nt, nc = tok[diff], c[diff]
        inner = tok != np.repeat(a, n)
        pd = inner & (diff | (bad[tok - 1] != y[tok - 1]))
        et, ec = tok[pd], c[pd]
        nodes = [(nt, bad[nt], nc), (nt, y[nt], -nc)]
        edges = [(et, bad[et - 1], bad[et], ec), (et, y[et - 1], y[et], -ec)]
        # the Viterbi prefixes into the first tokens and suffixes out of the last ones
        deposits = []
        for t in (a, b - 1):
            sel = bad[t] != y[t]
            t, m = t[sel], coef[sel]
            deposits.append((np.concatenate([t, t]), np.concatenate([bad[t], y[t]]),
                             np.concatenate([m, -m])))
        return nodes, edges, deposits[0], deposits[1]

    def _parts_segment(self, ev, coef):
        """d = +-(G - G'): k * (F(best deviating labeling) - F(maximiser of eq. 15)).

        k = coef for gold segments (d = G' - G), -coef for the others
        (d = G - G'); the deviating labeling restarts at r with label u.
        """
        y, bad = self.labels, ev["bad"]
        nz = coef != 0
        a, b, r, u = ev["a"][nz], ev["b"][nz], ev["r"][nz], ev["u"][nz]
        is_gold = ev["is_gold"][nz]
        k = np.where(is_gold, coef[nz], -coef[nz])
        ref = lambda t, g: np.where(g, y[t], bad[t]).astype(np.int64)  # noqa: E731
        # minus: the reference labeling on r..b-1 (and the transitions into r+1.., into r if r > a)
        n = b - r
        seg = np.repeat(np.arange(a.size), n)
        tok = ranges(r, n)
        g, kk = is_gold[seg], k[seg]
        nodes = [(tok, ref(tok, g), -kk), (r, u, k)]
        inner = tok > a[seg]
        et, eg, ek = tok[inner], g[inner], kk[inner]
        edges = [(et, ref(et - 1, eg), ref(et, eg), -ek)]
        # plus: the transition into the new label at r
        late = r > a
        edges.append((r[late], ref(r[late] - 1, is_gold[late]), u[late], k[late]))
        # the prefix changes only when the deviation is at the first position
        at_a = ~late
        pre = (np.concatenate([a[at_a], a[at_a]]),
               np.concatenate([u[at_a], ref(a[at_a], is_gold[at_a])]),
               np.concatenate([k[at_a], -k[at_a]]))
        e = b - 1
        suf = (np.concatenate([r, e]), np.concatenate([u, ref(e, is_gold)]), np.concatenate([k, -k]))
        return nodes, edges, pre, suf

    def _gradient(self, w, ev, nodes, edges, pre, suf):
        """Counts of the node and edge lists plus those of the walks from the deposits."""
        fwd, bwd, state = ev["fwd"], ev["bwd"], ev["state"]
        for (tok, lab, mass), back in ((pre, True), (suf, False)):
            n2, e2 = self._walk(w, fwd, bwd, state, np.asarray(tok, dtype=np.int64),
                                np.asarray(lab, dtype=np.int64), np.asarray(mass, dtype=np.float64),
                                backward=back)
            nodes = nodes + n2
            edges = edges + e2
        cat = lambda parts, k: np.concatenate([p[k] for p in parts]) if parts else np.zeros(0)  # noqa: E731
        return self.inference.weighted_counts(cat(nodes, 0), cat(nodes, 1), cat(nodes, 2),
                            cat(edges, 0), cat(edges, 1), cat(edges, 2), cat(edges, 3))
