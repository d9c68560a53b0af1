"""L-BFGS (Nocedal 1980; Liu & Nocedal 1989) and OWL-QN (Andrew & Gao 2007).

:func:`lbfgs` minimises ``f(x) + c1 * sum_{i in mask} |x_i|`` where ``f`` is
smooth and supplied, together with its gradient, by a callable. With
``c1 == 0`` it is plain L-BFGS with a line search satisfying the strong Wolfe
conditions; with ``c1 > 0`` it is OWL-QN, the orthant-wise variant for L1
penalties. The first trial step of an iteration is 1 (``1/|g|`` after a start
or restart), which the quasi-Newton scaling usually makes acceptable at once.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable, Optional

import numpy as np

from crftk._vector import rounded_difference, single_difference
from crftk.optimize.common import (BLOCK, evaluate_start, IterationInfo, OptimizeResult, StoppingRules, axpy, axpy_dot,
                                   dot64, map_large_blocks, bool_mask, check_options, norm, not_descent,
                                   release_scratch, scale_dot, scratch, seal, start_point)
from crftk.optimize.linesearch import LineSearchFailed, l1, orthant_search, pseudo_gradient, strong_wolfe_search

# A pair (s, y) enters the history only if s'y > _CURVATURE_SKIP * |s| * |y|.
_CURVATURE_SKIP = 1e-10


class _History:
    """The last ``m`` correction pairs and the two-loop recursion.

    ``dtype`` float32 stores the pairs in half the memory; their products with the float64
    direction are then summed in float64 (dot64), and s'y, y'y are those of the
    stored pairs, so that the recursion's H stays positive definite."""

    def __init__(self, m, dtype=np.float64):
        self.m = m
        self.dtype = np.dtype(dtype)
        self.s = deque()
        self.y = deque()
        self.rho = deque()
        self.gamma = 1.0
        self._direction = None

    def __len__(self):
        return len(self.s)

    def clear(self):
        self.s.clear()
        self.y.clear()
        self.rho.clear()
        self.gamma = 1.0

    def push(self, s, y):
        """Add a pair unless its curvature s'y is too small; return whether added."""
        if self.dtype != s.dtype:
            s, y = s.astype(self.dtype), y.astype(self.dtype)
            # the stored pairs' own products, summed in float64
            sy, yy, ss = dot64(s, y), dot64(y, y), dot64(s, s)
            return self._keep(s, y, sy, yy, ss)
        return self._keep(s, y, dot64(s, y), dot64(y, y), None)

    def park(self, g):
        """g, or a :class:`_Parked` copy of it in the bytes of the pair the next :meth:`push_step`
        displaces when the history is full of float32 pairs: those pairs are dead once the
        direction is made, so the line search runs with one weight-sized vector fewer alive."""
        if self.dtype != np.float32 or len(self.s) < self.m or g.size < 2:
            return g
        return _Parked(g, self.s[0], self.y[0])

    def push_step(self, x_new, x, g_new, g):
        """:meth:`push` of the pair (x_new - x, g_new - g).

        In float32 the products are those :meth:`push` takes of the rounded pair (the same blocks,
        summed in the same order), each block's differences made and rounded in scratch, so no
        float64 vector of the whole size is made; the pair itself is written in one compiled pass
        (``single_difference``), only once it passes the curvature test, into the buffers of the
        pair it displaces when the history is full: the history never holds m + 1 pairs.

        ``g`` may be :meth:`park`'s copy in the oldest pair: it is read a block at a time, y is
        written over it first (each block of y lands on bytes whose entries are already read) and s
        last. A pair that fails the curvature test then costs the history its oldest pair, whose
        bytes held g: L-BFGS parks only under the strong Wolfe search, whose curvature condition
        makes s'y >= 0.1 |g'd| t > 0 for any objective, so only the float32 rounding of a pair
        with cos(s, y) below ~1e-7 could be refused there (OWL-QN's backtracking search, which
        has no curvature condition, does not park)."""
        if self.dtype == np.float64:
            return self.push(x_new - x, g_new - g)
        sy = yy = ss = 0
        s64, y64 = self._scratch()
        for i in range(0, x.size, BLOCK):
            s = self._rounded(x_new, x, i, s64)
            y = self._rounded(g_new, g, i, y64)
            sy += dot64(s, y)
            yy += dot64(y, y)
            ss += dot64(s, s)
        parked = isinstance(g, _Parked)
        if not (sy > _CURVATURE_SKIP * math.sqrt(ss * yy)):
            if parked:
                self.s.popleft()
                self.y.popleft()
                self.rho.popleft()
            return False
        if len(self.s) == self.m:
            s, y = self.s.popleft(), self.y.popleft()
            self.rho.popleft()
        else:
            s, y = self._new_pair(x.size)
        if parked:
            for i in range(0, x.size, BLOCK):
                n = min(BLOCK, x.size - i)
                single_difference(g_new[i:i + n], g.block(i, n, y64), y[i:i + n])
        else:
            single_difference(g_new, g, y)
        single_difference(x_new, x, s)
        return self._keep(s, y, sy, yy, ss)

    def _scratch(self):
        """Two float64 blocks for :meth:`push_step`: in the last direction's bytes when it has room
        (the direction is dead by then, and a new pair takes its bytes only after the blocks are
        read), else this thread's scratch."""
        d = self._direction
        if d is not None and d.size >= 2 * BLOCK:
            flat = d.reshape(-1)
            return flat[:BLOCK], flat[BLOCK:2 * BLOCK]
        return scratch(np.float64), scratch(np.float64, 1)

    def _new_pair(self, n):
        """Buffers for one more float32 pair: the bytes of the last direction when there is one
        (dead once the line search is over; :meth:`direction` makes a new one), which keep one
        weight-sized vector off the peak while the history fills."""
        direction, self._direction = self._direction, None
        if direction is not None and direction.size == n:
            both = direction.reshape(-1).view(np.float32)
            return both[:n], both[n:]
        return np.empty(n, self.dtype), np.empty(n, self.dtype)

    @staticmethod
    def _rounded(a, b, i, out):
        """Block i of a - b, computed in float64, rounded to the pairs' precision and read back in
        float64 (in out): the block of the stored pair as the products read it."""
        n = min(BLOCK, a.size - i)
        out = out[:n]
        if isinstance(b, _Parked):
            rounded_difference(a[i:i + n], b.block(i, n, out), out)     # elementwise in place
        else:
            rounded_difference(a[i:i + n], b[i:i + n], out)
        return out

    def _keep(self, s, y, sy, yy, ss):
        if ss is None:
            ss = dot64(s, s)
        if not (sy > _CURVATURE_SKIP * math.sqrt(ss * yy)):
            return False
        if len(self.s) == self.m:
            self.s.popleft()
            self.y.popleft()
            self.rho.popleft()
        self.s.append(s)
        self.y.append(y)
        self.rho.append(1.0 / sy)
        self.gamma = sy / yy
        return True

    def direction(self, g):
        """Return -H g, H the L-BFGS inverse-Hessian approximation, in a buffer of the history's that
        the next call overwrites or the next new pair takes (an iteration's direction is dead once its
        line search is over, and before the next pair is pushed): a new weight-sized array
        each iteration is a fresh mapping whose pages are faulted in again (map_large_blocks)."""
        if self._direction is None or self._direction.shape != g.shape:
            self._direction = np.empty_like(g, dtype=np.float64)
        q = np.negative(g, out=self._direction)
        s, y, rho = self.s, self.y, self.rho
        n = len(s)
        if n == 0:
            q *= self.gamma
            return q
        # each update of q is fused with the product the next step takes with it (axpy_dot): one
        # pass over q per pair and loop instead of two, the same numbers as the steps one by one
        alphas = [0.0] * n
        product = dot64(s[n - 1], q)
        for k in range(n - 1, -1, -1):
            alphas[k] = a = rho[k] * product
            if k:
                product = axpy_dot(-a, y[k], q, s[k - 1])
            else:
                axpy(-a, y[k], q)
        product = scale_dot(self.gamma, q, y[0])
        for k in range(n):
            b = rho[k] * product
            if k + 1 < n:
                product = axpy_dot(alphas[k] - b, s[k], q, y[k + 1])
            else:
                axpy(alphas[k] - b, s[k], q)
        return q


class _Parked:
    """A float64 vector kept in the bytes of a float32 pair (s, y) of its length: its first half in
    y's bytes, the rest in s's, an odd last entry as a Python float. Read with :meth:`block`."""

    def __init__(self, v, s, y):
        n = v.size
        half = n // 2
        self.size = n
        self._low = y[:2 * half].view(np.float64)
        self._high = s[:2 * half].view(np.float64)
        self._half = half
        np.copyto(self._low, v[:half])
        np.copyto(self._high, v[half:2 * half])
        self._tail = float(v[-1]) if n % 2 else None

    def block(self, i, n, out):
        """Entries i .. i + n of the vector, copied into out[:n]; returns out[:n]."""
        out = out[:n]
        half, end = self._half, i + n
        if i < half:
            out[:min(end, half) - i] = self._low[i:end]
        if end > half:
            lo = max(i, half)
            top = min(end, 2 * half)
            if top > lo:
                out[lo - i:top - i] = self._high[lo - half:top - half]
            if end > 2 * half:
                out[-1] = self._tail
        return out


def lbfgs(
    fun: Callable[[np.ndarray], tuple],
    x0,
    *,
    c1: float = 0.0,
    l1_mask=None,
    m: int = 6,
    max_iter: int = 1000,
    epsilon: float = 1e-5,
    period: int = 10,
    gtol: float = 1e-5,
    max_linesearch: int = 20,
    callback: Optional[Callable[[IterationInfo], object]] = None,
    history_dtype="float64",
) -> OptimizeResult:
    """Minimise ``fun(x)[0] + c1 * sum_{i in l1_mask} |x_i|``.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (f, g)``, the smooth part of the objective (including any
        L2 term) and its gradient, an array of the shape of ``x``.
    x0 : array_like
        Starting point (float64; any shape).  Must be finite.
    c1 : float
        L1 coefficient; ``0`` gives L-BFGS, ``> 0`` OWL-QN.
    l1_mask : bool array of the shape of ``x0``, optional
        Which parameters the L1 term penalises; ``None`` means all.
    m : int
        Number of correction pairs kept.
    max_iter : int
        Iteration limit.
    epsilon, period : float, int
        Stop when the objective improved by less than ``epsilon`` (relative)
        over the last ``period`` iterations.  ``period = 0`` disables the rule.
    gtol : float
        Stop when ``|g| / max(1, |x|) < gtol`` (pseudo-gradient for OWL-QN).
    max_linesearch : int
        Evaluations allowed per line search.
    callback : callable, optional
        Called with an :class:`IterationInfo` after every iteration; returning
        True stops the minimiser.
    history_dtype : "float64" or "float32"
        The precision the correction pairs are stored in (see ``_History``); crftk's
        training passes ``--history-precision``, float32 by default.

    Returns
    -------
    OptimizeResult
        After each iteration the rules are checked in this order: the
        gradient test, the relative-improvement test (both: converged), the
        iteration limit, the callback (not converged).  If a line search finds
        no acceptable step, the minimiser stops (not converged) and returns
        the last accepted point, which is the best one found.  ``reason``
        says which rule stopped it.

    Raises
    ------
    ValueError
        For invalid arguments, a non-finite ``x0``, or a non-finite value or
        gradient at ``x0``.
    """
    c1 = float(c1)
    if not math.isfinite(c1) or c1 < 0.0:
        raise ValueError(f"c1 must be a finite number >= 0, got {c1}")
    if int(m) != m or m < 1:
        raise ValueError(f"m must be a positive integer, got {m}")
    m = int(m)
    max_iter, period, max_linesearch = check_options(
        max_iter, epsilon, period, gtol, max_linesearch
    )
    if history_dtype not in ("float64", "float32"):
        raise ValueError(f"history_dtype must be 'float64' or 'float32', got {history_dtype!r}")
    map_large_blocks()
    shape, x = start_point(x0)
    seal(x)

    mask = None
    if l1_mask is not None:
        mask = bool_mask(l1_mask, shape, "l1_mask")
        if mask.all():
            mask = None
    owlqn = c1 > 0.0 and (mask is None or bool(mask.any()))

    obj, f, g = evaluate_start(fun, shape, x)

    def total(x, f):
        return f + l1(x, c1, mask) if owlqn else f

    unpenalised = None if mask is None else ~mask

    def steepest(x, g):
        return pseudo_gradient(x, g, c1, unpenalised) if owlqn else g

    F = total(x, f)
    pg = steepest(x, g)
    history = _History(m, history_dtype)
    rules = StoppingRules(max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=F, shape=shape)
    n_iter = 0

    if (result := rules.result_at_start(pg, x, F, obj.n_evals)) is not None:
        return result

    while True:
        # Search direction; one restart from steepest descent if it is not
        # a descent direction.
        while True:
            if len(history) == 0:
                d = -pg
                step = 1.0 / norm(pg)
            else:
                d = history.direction(pg)
                step = 1.0
            if owlqn:
                # keep only components that move against the pseudo-gradient
                np.copyto(d, 0.0, where=np.greater_equal(d * pg, 0.0))
            slope = dot64(d, pg)
            if slope < 0.0:
                break
            if len(history) == 0:
                return rules.result(x, F, n_iter, obj.n_evals, False, not_descent(slope))
            history.clear()

        # Until the search ends g is wanted only for the next pair: park it in the bytes of the
        # pair that pair displaces and drop every other reference (the objective's memory of the
        # last evaluation, L-BFGS's pseudo-gradient, which is g itself), one vector off the peak;
        # the block operations' scratch is idle until then too. Not under OWL-QN: its search has
        # no curvature condition, so a pair can be refused, and a refused pair must leave the
        # history as it was (push_step).
        if not owlqn:
            g = history.park(g)
            if isinstance(g, _Parked):
                obj.forget()
                pg = None
        release_scratch()

        try:
            if owlqn:
                t, F_new = orthant_search(
                    obj, x, F, pg, d, step, max_linesearch, c1, mask
                )
            else:
                t = strong_wolfe_search(obj, x, f, d, slope, step, max_linesearch)
                F_new = t.f
        except LineSearchFailed as exc:
            return rules.result(x, F, n_iter, obj.n_evals, False, str(exc))

        history.push_step(t.x, x, t.g, g)
        x, f, g, F, accepted = t.x, t.f, t.g, F_new, t.step
        del t
        pg = steepest(x, g)
        n_iter += 1

        gnorm = norm(pg)
        if (result := rules.end_of_iteration(callback, iteration=n_iter, x=x, f=F, gnorm=gnorm, step=accepted,
                                             n_evals=obj.n_evals)) is not None:
            return result


