"""Limited-memory quasi-Newton minimisation: L-BFGS and OWL-QN.

:func:`lbfgs` minimises ``f(x) + c1 * sum_{i in mask} |x_i|`` where ``f`` is
smooth and supplied, together with its gradient, by a callable.  With
``c1 == 0`` it is plain L-BFGS (Nocedal 1980; Liu & Nocedal 1989) with a
line search satisfying the strong Wolfe conditions; with ``c1 > 0`` it is
OWL-QN (Andrew & Gao 2007), the orthant-wise variant for L1 penalties.

The code is written for objectives that are expensive to evaluate (a CRF
objective is a forward-backward pass over a whole corpus) and have millions of
parameters:

* every evaluation is counted, no point is evaluated twice in a row, and the
  first trial step of an iteration is 1 (``1/|g|`` after a start or restart),
  which the quasi-Newton scaling usually makes acceptable at once;
* per iteration the vector work is O(m*n) numpy operations, with no Python
  loop over parameters.

The arrays passed to ``fun`` are never modified afterwards, and the gradient
returned by ``fun`` is copied, so ``fun`` may reuse its output buffer.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from crftk._vector import axpy as _kernel_axpy

__all__ = ["IterationInfo", "OptimizeResult", "lbfgs"]

# Sufficient-decrease (Armijo) and curvature constants of the line searches.
_ARMIJO = 1e-4
_CURVATURE = 0.9
# A pair (s, y) enters the history only if s'y > _CURVATURE_SKIP * |s| * |y|.
_CURVATURE_SKIP = 1e-10
# Bounds on the growth of the step while bracketing (relative to the last
# increase), as in the Moré–Thuente extrapolation rule.
_EXTRAPOLATE_MIN = 1.1
_EXTRAPOLATE_MAX = 4.0
# In zoom, an interpolated step is kept at least this fraction of the interval
# away from either end.
_ZOOM_SAFEGUARD = 0.1
# After a non-finite trial the next one is this fraction of the way from the
# last good step towards the bad one.
_NONFINITE_SHRINK = 0.25
# OWL-QN backtracking factor.
_BACKTRACK = 0.5
_MAX_STEP = 1e20


@dataclass
class OptimizeResult:
    """Outcome of :func:`lbfgs`.

    ``x`` is the last accepted point (every accepted step decreases the
    objective, so it is also the best), ``f`` the objective there including
    the L1 term, ``reason`` a sentence saying why the minimiser stopped.
    """

    x: np.ndarray
    f: float
    n_iter: int
    n_evals: int
    converged: bool
    reason: str


@dataclass
class IterationInfo:
    """Progress report passed to the callback after every iteration.

    ``f`` includes the L1 term, ``gnorm`` is the norm of the gradient (of the
    pseudo-gradient for OWL-QN), ``step`` the accepted step length along the
    search direction, ``n_evals`` the evaluations so far and ``n_active`` the
    number of nonzero parameters.
    """

    iteration: int
    x: np.ndarray
    f: float
    gnorm: float
    xnorm: float
    step: float
    n_evals: int
    n_active: int


class _LineSearchFailed(Exception):
    """Raised by the line searches; the message is the stop reason."""


class _Objective:
    """Wraps ``fun``: counts evaluations, copies gradients, checks shapes.

    It also remembers the last point so that asking for the same point twice
    in a row returns the stored values instead of calling ``fun`` again.
    """

    def __init__(self, fun, shape):
        self.fun = fun
        self.shape = shape
        self.n_evals = 0
        self._last_x = None
        self._last_value = None

    def __call__(self, x):
        if self._last_x is not None and np.array_equal(x, self._last_x):
            return self._last_value
        f, g = self.fun(x.reshape(self.shape))
        self.n_evals += 1
        f = float(f)
        g = np.array(g, dtype=np.float64)  # a copy: fun may reuse its buffer
        if g.size != x.size:
            raise ValueError(
                f"the gradient returned by fun has {g.size} elements, "
                f"expected {x.size}"
            )
        g = g.reshape(-1)
        self._last_x = x
        self._last_value = (f, g)
        return f, g


def _is_finite(f, g):
    return math.isfinite(f) and bool(np.isfinite(g).all())


class _History:
    """The last ``m`` correction pairs and the two-loop recursion."""

    def __init__(self, m):
        self.m = m
        self.s = deque()
        self.y = deque()
        self.rho = deque()
        self.gamma = 1.0

    def __len__(self):
        return len(self.s)

    def clear(self):
        self.s.clear()
        self.y.clear()
        self.rho.clear()
        self.gamma = 1.0

    def push(self, s, y):
        """Add a pair unless its curvature s'y is too small; return whether added."""
        sy = float(s @ y)
        yy = float(y @ y)
        if not (sy > _CURVATURE_SKIP * math.sqrt(float(s @ s) * yy)):
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
        """Return -H g, H the L-BFGS inverse-Hessian approximation."""
        q = np.negative(g)
        alphas = []
        for s, y, rho in zip(reversed(self.s), reversed(self.y), reversed(self.rho)):
            a = rho * float(s @ q)
            alphas.append(a)
            _axpy(-a, y, q)
        q *= self.gamma
        for s, y, rho, a in zip(self.s, self.y, self.rho, reversed(alphas)):
            b = rho * float(y @ q)
            _axpy(a - b, s, q)
        return q


def _axpy(a, x, y):
    """y += a * x in place, without a temporary for contiguous float64 vectors."""
    if (y.flags.c_contiguous and x.flags.c_contiguous and y.dtype == np.float64
            and x.dtype == np.float64 and y.ndim == 1 and x.ndim == 1):
        _kernel_axpy(a, x, y)
        return
    y += a * x


# ---------------------------------------------------------------- interpolation


def _cubic_minimizer(a, fa, da, b, fb, db):
    """Minimiser of the cubic matching values and slopes at a and b, or None."""
    d1 = da + db - 3.0 * (fa - fb) / (a - b)
    disc = d1 * d1 - da * db
    if not (disc >= 0.0) or not math.isfinite(disc):
        return None
    d2 = math.copysign(math.sqrt(disc), b - a)
    denom = db - da + 2.0 * d2
    if denom == 0.0:
        return None
    t = b - (b - a) * (db + d2 - d1) / denom
    return t if math.isfinite(t) else None


def _quadratic_minimizer(a, fa, da, b, fb):
    """Minimiser of the quadratic matching f and f' at a and f at b, or None."""
    w = b - a
    curv = (fb - fa - da * w) / (w * w)
    if not (curv > 0.0) or not math.isfinite(curv):
        return None
    t = a - da / (2.0 * curv)
    return t if math.isfinite(t) else None


class _Trial:
    """One evaluated step of the line search."""

    __slots__ = ("step", "x", "f", "g", "slope")

    def __init__(self, step, x, f, g, slope):
        self.step = step
        self.x = x
        self.f = f  # math.inf when the evaluation was not finite
        self.g = g
        self.slope = slope  # g'd, None when not finite


def _zoom_step(lo, hi):
    """Next trial strictly inside the bracket (lo, hi), safeguarded."""
    width = hi.step - lo.step
    if not math.isfinite(hi.f):
        t = _NONFINITE_SHRINK
    else:
        c = _cubic_minimizer(lo.step, lo.f, lo.slope, hi.step, hi.f, hi.slope)
        if c is None:
            c = _quadratic_minimizer(lo.step, lo.f, lo.slope, hi.step, hi.f)
        t = 0.5 if c is None else (c - lo.step) / width
        if not math.isfinite(t):
            t = 0.5
        t = min(max(t, _ZOOM_SAFEGUARD), 1.0 - _ZOOM_SAFEGUARD)
    return lo.step + t * width


def _extrapolate_step(prev, cur):
    """Next (larger) trial while bracketing: cubic extrapolation, clamped."""
    lower = cur.step + _EXTRAPOLATE_MIN * (cur.step - prev.step)
    upper = cur.step + _EXTRAPOLATE_MAX * (cur.step - prev.step)
    c = _cubic_minimizer(prev.step, prev.f, prev.slope, cur.step, cur.f, cur.slope)
    if c is None or c <= cur.step:
        c = upper
    return min(max(c, lower), upper, _MAX_STEP)


# ---------------------------------------------------------------- line searches


def _strong_wolfe_search(obj, x, f0, d, slope0, step, max_trials):
    """Find a step satisfying the strong Wolfe conditions along d.

    Bracketing phase followed by zoom (Nocedal & Wright, Algorithms 3.5/3.6),
    with safeguarded cubic/quadratic interpolation.  Returns the accepted
    :class:`_Trial`; raises :class:`_LineSearchFailed`.
    """
    armijo_seen = False
    trials = 0
    wolfe_slope = -_CURVATURE * slope0  # |phi'(a)| must not exceed this

    def evaluate(a, *known):
        nonlocal trials
        if trials >= max_trials:
            _fail_exhausted(trials, armijo_seen)
        xt = x + a * d
        for p in known:
            if np.array_equal(xt, p):
                raise _LineSearchFailed(
                    f"line search failed: the step interval shrank to machine "
                    f"precision after {trials} trials (the objective or its "
                    f"gradient may be inaccurate)"
                )
        f, g = obj(xt)
        trials += 1
        if not _is_finite(f, g):
            return _Trial(a, xt, math.inf, None, None)
        return _Trial(a, xt, f, g, float(g @ d))

    def sufficient(t):
        return t.f <= f0 + _ARMIJO * t.step * slope0

    def zoom(lo, hi):
        nonlocal armijo_seen
        while True:
            t = evaluate(_zoom_step(lo, hi), lo.x, hi.x)
            if not math.isfinite(t.f) or not sufficient(t) or t.f >= lo.f:
                hi = t
                continue
            armijo_seen = True
            if abs(t.slope) <= wolfe_slope:
                return t
            if t.slope * (hi.step - lo.step) >= 0.0:
                hi = lo
            lo = t

    prev = _Trial(0.0, x, f0, None, slope0)
    a = step
    while True:
        t = evaluate(a, prev.x)
        if not math.isfinite(t.f):
            return zoom(prev, t)
        if not sufficient(t) or t.f >= prev.f:
            return zoom(prev, t)
        armijo_seen = True
        if abs(t.slope) <= wolfe_slope:
            return t
        if t.slope >= 0.0:
            return zoom(t, prev)
        if t.step >= _MAX_STEP:
            raise _LineSearchFailed(
                f"line search failed: the step grew to {t.step:.2g} without "
                f"meeting the curvature condition (is the objective bounded "
                f"below?)"
            )
        a = _extrapolate_step(prev, t)
        prev = t


def _fail_exhausted(trials, armijo_seen):
    if armijo_seen:
        raise _LineSearchFailed(
            f"line search failed to find a step satisfying the strong Wolfe "
            f"conditions after {trials} trials"
        )
    raise _LineSearchFailed(
        f"line search failed to find a sufficient decrease after {trials} trials"
    )


def _orthant_search(obj, x, F0, pg, d, step, max_trials, c1, mask):
    """OWL-QN backtracking search with projection onto the orthant of x.

    The orthant is sign(x_i), or sign(-pg_i) where x_i = 0; penalised
    coordinates of a trial point that leave it are set to zero.  Accepts the
    first trial with F(x') <= F(x) + c * pg'(x' - x).  Returns
    ``(trial, F)``; raises :class:`_LineSearchFailed`.
    """
    orthant = np.sign(x)
    np.copyto(orthant, np.negative(np.sign(pg)), where=x == 0.0)
    last = x
    a = step
    for trial in range(max_trials):
        xt = d * a
        xt += x
        leaves = np.less_equal(xt * orthant, 0.0)
        if mask is not None:
            leaves &= mask
        np.copyto(xt, 0.0, where=leaves)
        if np.array_equal(xt, x) or np.array_equal(xt, last):
            raise _LineSearchFailed(
                f"line search failed: the step became too small to change x "
                f"after {trial} trials"
            )
        f, g = obj(xt)
        last = xt
        if _is_finite(f, g):
            F = f + _l1(xt, c1, mask)
            if F <= F0 + _ARMIJO * float(pg @ (xt - x)):
                return _Trial(a, xt, f, g, None), F
        a *= _BACKTRACK
    raise _LineSearchFailed(
        f"line search failed to find a sufficient decrease after {max_trials} trials"
    )


# ---------------------------------------------------------------- L1 helpers


def _l1(x, c1, mask):
    if mask is None:
        return c1 * float(np.abs(x).sum())
    return c1 * float(np.abs(x).sum(where=mask))


def _pseudo_gradient(x, g, c1, unpenalised):
    """Minimum-norm subgradient of f + c1*|x|_1 (Andrew & Gao 2007).

    Where x_i != 0 it is g_i + c1*sign(x_i); where x_i == 0 it is g_i moved
    towards zero by c1 (zero if |g_i| <= c1).  Coordinates flagged in
    ``unpenalised`` (None: none) keep g_i.
    """
    pg = np.clip(g, -c1, c1)
    np.subtract(g, pg, out=pg)
    shifted = np.copysign(c1, x)
    shifted += g
    np.copyto(pg, shifted, where=x != 0.0)
    if unpenalised is not None:
        np.copyto(pg, g, where=unpenalised)
    return pg


# ---------------------------------------------------------------- driver


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
    if int(max_iter) != max_iter or max_iter < 0:
        raise ValueError(f"max_iter must be an integer >= 0, got {max_iter}")
    if int(period) != period or period < 0:
        raise ValueError(f"period must be an integer >= 0, got {period}")
    if int(max_linesearch) != max_linesearch or max_linesearch < 1:
        raise ValueError(
            f"max_linesearch must be a positive integer, got {max_linesearch}"
        )
    if not (epsilon >= 0.0) or not (gtol >= 0.0):
        raise ValueError("epsilon and gtol must be numbers >= 0")
    m, max_iter, period, max_linesearch = (
        int(m), int(max_iter), int(period), int(max_linesearch)
    )

    x0 = np.asarray(x0, dtype=np.float64)
    shape = x0.shape
    if np.isnan(x0).any():
        raise ValueError("x0 contains NaN")
    if not np.isfinite(x0).all():
        raise ValueError("x0 contains infinite values")
    x = x0.reshape(-1).copy()

    mask = None
    if l1_mask is not None:
        mask = np.asarray(l1_mask)
        if mask.dtype != np.bool_:
            raise ValueError(f"l1_mask must be a boolean array, got dtype {mask.dtype}")
        if mask.shape != shape:
            raise ValueError(
                f"l1_mask has shape {mask.shape}, expected {shape} (the shape of x0)"
            )
        mask = mask.reshape(-1)
        if mask.all():
            mask = None
    owlqn = c1 > 0.0 and (mask is None or bool(mask.any()))

    obj = _Objective(fun, shape)
    f, g = obj(x)
    if not _is_finite(f, g):
        raise ValueError("fun returned a non-finite value or gradient at x0")

    def total(x, f):
        return f + _l1(x, c1, mask) if owlqn else f

    unpenalised = None if mask is None else ~mask

    def steepest(x, g):
        return _pseudo_gradient(x, g, c1, unpenalised) if owlqn else g

    F = total(x, f)
    pg = steepest(x, g)
    history = _History(m)
    recent = deque([F], maxlen=period + 1)
    n_iter = 0

    def finish(converged, reason):
        return OptimizeResult(
            x=x.reshape(shape), f=F, n_iter=n_iter, n_evals=obj.n_evals,
            converged=converged, reason=reason,
        )

    def gradient_small():
        gnorm = float(np.linalg.norm(pg))
        rel = gnorm / max(1.0, float(np.linalg.norm(x)))
        if gnorm == 0.0:
            return "converged: the gradient is exactly zero"
        if rel < gtol:
            return (
                f"converged: gradient norm {rel:.2g} (relative to max(1, |x|)) "
                f"is below tolerance {gtol:g}"
            )
        return None

    reason = gradient_small()
    if reason is not None:
        return finish(True, reason)
    if max_iter == 0:
        return finish(False, "reached the iteration limit (0) before converging")

    while True:
        # Search direction; one restart from steepest descent if it is not
        # a descent direction.
        while True:
            if len(history) == 0:
                d = -pg
                step = 1.0 / float(np.linalg.norm(pg))
            else:
                d = history.direction(pg)
                step = 1.0
            if owlqn:
                # keep only components that move against the pseudo-gradient
                np.copyto(d, 0.0, where=np.greater_equal(d * pg, 0.0))
            slope = float(d @ pg)
            if slope < 0.0:
                break
            if len(history) == 0:
                return finish(
                    False,
                    f"line search failed: the search direction is not a "
                    f"descent direction even for steepest descent "
                    f"(directional derivative {slope:.2g})",
                )
            history.clear()

        try:
            if owlqn:
                t, F_new = _orthant_search(
                    obj, x, F, pg, d, step, max_linesearch, c1, mask
                )
            else:
                t = _strong_wolfe_search(obj, x, f, d, slope, step, max_linesearch)
                F_new = t.f
        except _LineSearchFailed as exc:
            return finish(False, str(exc))

        history.push(t.x - x, t.g - g)
        x, f, g, F = t.x, t.f, t.g, F_new
        pg = steepest(x, g)
        n_iter += 1
        recent.append(F)

        stop = False
        if callback is not None:
            info = IterationInfo(
                iteration=n_iter,
                x=x.reshape(shape),
                f=F,
                gnorm=float(np.linalg.norm(pg)),
                xnorm=float(np.linalg.norm(x)),
                step=t.step,
                n_evals=obj.n_evals,
                n_active=int(np.count_nonzero(x)),
            )
            stop = bool(callback(info))

        reason = gradient_small()
        if reason is not None:
            return finish(True, reason)
        if period > 0 and n_iter >= period:
            rate = (recent[0] - F) / max(abs(F), 1e-300)
            if rate < epsilon:
                return finish(
                    True,
                    f"converged: relative improvement {rate:.3e} over the last "
                    f"{period} iterations is below epsilon {epsilon:g}",
                )
        if n_iter >= max_iter:
            return finish(
                False, f"reached the iteration limit ({max_iter}) before converging"
            )
        if stop:
            return finish(False, "stopped by callback")
