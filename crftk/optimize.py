"""Minimisers for training: L-BFGS / OWL-QN, conjugate gradient, GIS.

:func:`lbfgs` minimises ``f(x) + c1 * sum_{i in mask} |x_i|`` where ``f`` is
smooth and supplied, together with its gradient, by a callable.  With
``c1 == 0`` it is plain L-BFGS (Nocedal 1980; Liu & Nocedal 1989) with a
line search satisfying the strong Wolfe conditions; with ``c1 > 0`` it is
OWL-QN (Andrew & Gao 2007), the orthant-wise variant for L1 penalties.

:func:`cg` is nonlinear conjugate gradient (Polak–Ribière+), optionally with
a diagonal preconditioner, and Sha & Pereira's (2003) mixed CG, which drops
the preconditioner after a number of iterations.  :func:`gis` is generalized
iterative scaling (Darroch & Ratcliff 1972) for log-linear models, with an
optional Gaussian prior.  All three share the stopping rules, the progress
report (:class:`IterationInfo`) and the result (:class:`OptimizeResult`).

The code is written for objectives that are expensive to evaluate (a CRF
objective is a forward-backward pass over a whole corpus) and have millions of
parameters:

* every evaluation is counted, no point is evaluated twice in a row, and (for
  L-BFGS) the first trial step of an iteration is 1 (``1/|g|`` after a start
  or restart), which the quasi-Newton scaling usually makes acceptable at once;
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

__all__ = ["IterationInfo", "OptimizeResult", "cg", "gis", "lbfgs", "quickprop"]

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
    """Outcome of :func:`lbfgs`, :func:`cg` or :func:`gis`.

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
    number of nonzero parameters.  For :func:`gis`, ``f`` is the value of
    ``objective`` (the gradient norm without one), ``step`` the norm of the
    update and ``n_evals`` counts calls of ``expected``.
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


def _strong_wolfe_search(obj, x, f0, d, slope0, step, max_trials, curvature=_CURVATURE):
    """Find a step satisfying the strong Wolfe conditions along d.

    Bracketing phase followed by zoom (Nocedal & Wright, Algorithms 3.5/3.6),
    with safeguarded cubic/quadratic interpolation.  ``curvature`` is the
    constant of the curvature condition |phi'(a)| <= curvature * |phi'(0)|
    (0.9 for quasi-Newton methods, 0.1 for conjugate gradient).  Returns the
    accepted :class:`_Trial`; raises :class:`_LineSearchFailed`.
    """
    armijo_seen = False
    trials = 0
    wolfe_slope = -curvature * slope0  # |phi'(a)| must not exceed this

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


# ---------------------------------------------------------------- shared driver pieces


def _check_options(max_iter, epsilon, period, gtol, max_linesearch=1):
    """Validate the options every minimiser shares; return the integer ones."""
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
    return int(max_iter), int(period), int(max_linesearch)


def _start_point(x0):
    """Return ``(shape, x)``: x0's shape and a flat float64 copy; x0 must be finite."""
    x0 = np.asarray(x0, dtype=np.float64)
    if np.isnan(x0).any():
        raise ValueError("x0 contains NaN")
    if not np.isfinite(x0).all():
        raise ValueError("x0 contains infinite values")
    return x0.shape, x0.reshape(-1).copy()


def _bool_mask(mask, shape, name):
    """Validate a boolean mask of x0's shape; return it flat."""
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(f"{name} must be a boolean array, got dtype {mask.dtype}")
    if mask.shape != shape:
        raise ValueError(
            f"{name} has shape {mask.shape}, expected {shape} (the shape of x0)"
        )
    return mask.reshape(-1)


class _StoppingRules:
    """The stopping rules shared by the minimisers.

    Before the first iteration: the gradient test, then ``max_iter == 0``.
    After each iteration, in this order: the gradient test and the
    relative-improvement test (both: converged), the iteration limit, a stop
    requested by the callback (not converged).
    """

    def __init__(self, *, max_iter, epsilon, period, gtol, f0):
        self.max_iter = max_iter
        self.epsilon = epsilon
        self.period = period
        self.gtol = gtol
        self.recent = deque([f0], maxlen=period + 1)

    def _gradient_small(self, gnorm, xnorm):
        rel = gnorm / max(1.0, xnorm)
        if gnorm == 0.0:
            return "converged: the gradient is exactly zero"
        if rel < self.gtol:
            return (
                f"converged: gradient norm {rel:.2g} (relative to max(1, |x|)) "
                f"is below tolerance {self.gtol:g}"
            )
        return None

    def at_start(self, gnorm, xnorm):
        """``(converged, reason)`` if the minimiser should not start, else None."""
        reason = self._gradient_small(gnorm, xnorm)
        if reason is not None:
            return True, reason
        if self.max_iter == 0:
            return False, "reached the iteration limit (0) before converging"
        return None

    def after_iteration(self, n_iter, f, gnorm, xnorm, stop_requested):
        """``(converged, reason)`` if the minimiser should stop, else None."""
        self.recent.append(f)
        reason = self._gradient_small(gnorm, xnorm)
        if reason is not None:
            return True, reason
        if self.period > 0 and n_iter >= self.period:
            rate = (self.recent[0] - f) / max(abs(f), 1e-300)
            if rate < self.epsilon:
                return (
                    True,
                    f"converged: relative improvement {rate:.3e} over the last "
                    f"{self.period} iterations is below epsilon {self.epsilon:g}",
                )
        if n_iter >= self.max_iter:
            return (
                False,
                f"reached the iteration limit ({self.max_iter}) before converging",
            )
        if stop_requested:
            return False, "stopped by callback"
        return None


def _report(callback, *, iteration, x, shape, f, gnorm, xnorm, step, n_evals):
    """Call the callback (if any) with an :class:`IterationInfo`; return its stop request."""
    if callback is None:
        return False
    info = IterationInfo(
        iteration=iteration,
        x=x.reshape(shape),
        f=f,
        gnorm=gnorm,
        xnorm=xnorm,
        step=step,
        n_evals=n_evals,
        n_active=int(np.count_nonzero(x)),
    )
    return bool(callback(info))


# ---------------------------------------------------------------- L-BFGS / OWL-QN


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
    m = int(m)
    max_iter, period, max_linesearch = _check_options(
        max_iter, epsilon, period, gtol, max_linesearch
    )
    shape, x = _start_point(x0)

    mask = None
    if l1_mask is not None:
        mask = _bool_mask(l1_mask, shape, "l1_mask")
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
    rules = _StoppingRules(
        max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=F
    )
    n_iter = 0

    def finish(converged, reason):
        return OptimizeResult(
            x=x.reshape(shape), f=F, n_iter=n_iter, n_evals=obj.n_evals,
            converged=converged, reason=reason,
        )

    outcome = rules.at_start(float(np.linalg.norm(pg)), float(np.linalg.norm(x)))
    if outcome is not None:
        return finish(*outcome)

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
                return finish(False, _not_descent(slope))
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

        gnorm = float(np.linalg.norm(pg))
        xnorm = float(np.linalg.norm(x))
        stop = _report(
            callback, iteration=n_iter, x=x, shape=shape, f=F, gnorm=gnorm,
            xnorm=xnorm, step=t.step, n_evals=obj.n_evals,
        )
        outcome = rules.after_iteration(n_iter, F, gnorm, xnorm, stop)
        if outcome is not None:
            return finish(*outcome)


def _not_descent(slope):
    return (
        f"line search failed: the search direction is not a descent direction "
        f"even for steepest descent (directional derivative {slope:.2g})"
    )


# ---------------------------------------------------------------- conjugate gradient


def _diagonal(precondition, x, shape, iteration):
    """Call ``precondition`` at x and check that the diagonal is finite and > 0."""
    d = np.array(precondition(x.reshape(shape)), dtype=np.float64)
    if d.size != x.size:
        raise ValueError(
            f"precondition(x) returned {d.size} elements, expected {x.size}"
        )
    d = d.reshape(-1)
    bad = ~(np.isfinite(d) & (d > 0.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"precondition(x) returned an unusable Hessian diagonal for iteration "
            f"{iteration}: {int(np.count_nonzero(bad))} of {d.size} entries are not "
            f"finite and > 0 (the first, at index {i}, is {float(d[i])!r}); the diagonal "
            f"must be positive everywhere, e.g. add a positive constant such as 2*c2"
        )
    return d


def cg(
    fun: Callable[[np.ndarray], tuple],
    x0,
    *,
    precondition: Optional[Callable[[np.ndarray], np.ndarray]] = None,
    mixed_after: Optional[int] = None,
    max_iter: int = 1000,
    epsilon: float = 1e-5,
    period: int = 10,
    gtol: float = 1e-5,
    max_linesearch: int = 20,
    restart: Optional[int] = None,
    curvature: float = 0.1,
    callback: Optional[Callable[[IterationInfo], object]] = None,
) -> OptimizeResult:
    """Minimise ``fun(x)[0]`` by nonlinear conjugate gradient (Polak–Ribière+).

    The search direction is ``p = -z + beta * p_prev`` with ``z = M^-1 g``
    and ``beta = max(0, g'(z - z_prev) / (g_prev' z_prev))`` (Nocedal &
    Wright 2006, section 5.2; preconditioning as in Shewchuk 1994, B5).
    Without a preconditioner ``M = I`` and ``z = g``.  With one, ``M`` is the
    diagonal ``precondition(x)``, recomputed at every iterate: Sha & Pereira
    (2003) use the expected feature counts plus ``2*c2`` for a CRF.

    The steps satisfy the strong Wolfe conditions with curvature constant
    ``curvature``.  The first trial step of the first iteration is
    ``1/|g|`` (a step of length 1) without a preconditioner and ``1`` with one
    (the diagonal-Newton step); later first trials are the previous step
    scaled by the ratio of the previous to the current directional
    derivative (Nocedal & Wright, eq. 3.60), or 1 if that is not a finite
    positive number.

    The direction is reset to steepest descent ``-z`` at the start, when the
    PR+ direction is not a descent direction, every ``restart`` iterations
    (counted from the last steepest-descent direction; a zero beta counts as
    one), and when the preconditioner is dropped.

    Parameters
    ----------
    fun : callable
        ``fun(x) -> (f, g)``: objective value and gradient (shape of ``x``).
    x0 : array_like
        Starting point (float64; any shape).  Must be finite.
    precondition : callable, optional
        ``precondition(x) -> d``, the diagonal of an approximate Hessian at
        ``x`` (shape or size of ``x``).  It is called once per iteration,
        at the current point, which is always the point of the latest call of
        ``fun`` (so it may reuse what that call computed, e.g. the expected
        counts of the same forward-backward pass); it is not counted in
        ``n_evals``.  Every entry must be finite and ``> 0``: otherwise
        :func:`cg` raises ``ValueError`` (there is no silent flooring; a
        caller whose diagonal may have zeros, e.g. expected counts with
        ``c2 == 0``, should add a small positive constant itself).
    mixed_after : int, optional
        Mixed CG (Sha & Pereira 2003): use the preconditioner for the first
        ``mixed_after`` iterations only, then continue with plain CG from
        the current point, restarting the direction.  Needs
        ``precondition``; ``None`` keeps the preconditioner throughout, ``0``
        never uses it.
    max_iter, epsilon, period, gtol, max_linesearch, callback
        As for :func:`lbfgs`, with the same stopping rules and reasons;
        ``gtol`` applies to the unpreconditioned gradient.
    restart : int, optional
        Restart period; ``None`` (default) means ``n`` (the number of
        parameters), ``0`` never restarts periodically.
    curvature : float
        Curvature constant of the strong Wolfe conditions, in
        ``(1e-4, 1)``; 0.1 is usual for CG.

    Returns
    -------
    OptimizeResult
        As for :func:`lbfgs`.

    Raises
    ------
    ValueError
        For invalid arguments, a non-finite ``x0``, a non-finite value or
        gradient at ``x0``, or a preconditioner diagonal that is not finite
        and positive (at any iteration).
    """
    max_iter, period, max_linesearch = _check_options(
        max_iter, epsilon, period, gtol, max_linesearch
    )
    curvature = float(curvature)
    if not (_ARMIJO < curvature < 1.0):
        raise ValueError(
            f"curvature must lie strictly between {_ARMIJO:g} and 1, got {curvature}"
        )
    if precondition is not None and not callable(precondition):
        raise ValueError("precondition must be a callable or None")
    if mixed_after is not None:
        if precondition is None:
            raise ValueError("mixed_after needs a preconditioner (precondition=...)")
        if int(mixed_after) != mixed_after or mixed_after < 0:
            raise ValueError(f"mixed_after must be an integer >= 0, got {mixed_after}")
        mixed_after = int(mixed_after)
    shape, x = _start_point(x0)
    if restart is None:
        restart = x.size
    elif int(restart) != restart or restart < 0:
        raise ValueError(f"restart must be an integer >= 0 or None, got {restart}")
    restart = int(restart)

    obj = _Objective(fun, shape)
    f, g = obj(x)
    if not _is_finite(f, g):
        raise ValueError("fun returned a non-finite value or gradient at x0")
    rules = _StoppingRules(
        max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=f
    )
    n_iter = 0

    def finish(converged, reason):
        return OptimizeResult(
            x=x.reshape(shape), f=f, n_iter=n_iter, n_evals=obj.n_evals,
            converged=converged, reason=reason,
        )

    outcome = rules.at_start(float(np.linalg.norm(g)), float(np.linalg.norm(x)))
    if outcome is not None:
        return finish(*outcome)

    preconditioned = precondition is not None and mixed_after != 0
    p = None  # previous direction; None forces steepest descent
    z_prev = gz_prev = None
    prev_step = prev_slope = None
    since_restart = 0
    while True:
        if preconditioned and mixed_after is not None and n_iter >= mixed_after:
            preconditioned = False  # mixed CG: plain CG from here on
            p = None
        z = g / _diagonal(precondition, x, shape, n_iter + 1) if preconditioned else g
        gz = float(g @ z)

        steepest = p is None or (restart > 0 and since_restart >= restart)
        if not steepest:
            beta = max(0.0, (gz - float(g @ z_prev)) / gz_prev)
            if beta == 0.0:
                steepest = True
            else:
                d = beta * p
                d -= z
                slope = float(g @ d)
                steepest = not slope < 0.0
        if steepest:
            d = -z
            slope = -gz
            since_restart = 0
            if not slope < 0.0:
                return finish(False, _not_descent(slope))

        if prev_step is None:
            step = 1.0 if preconditioned else 1.0 / float(np.linalg.norm(d))
        else:
            step = prev_step * (prev_slope / slope)
            if not (math.isfinite(step) and step > 0.0):
                step = 1.0
            step = min(step, _MAX_STEP)

        try:
            t = _strong_wolfe_search(
                obj, x, f, d, slope, step, max_linesearch, curvature
            )
        except _LineSearchFailed as exc:
            return finish(False, str(exc))

        x, f, g = t.x, t.f, t.g
        p, z_prev, gz_prev = d, z, gz
        prev_step, prev_slope = t.step, slope
        n_iter += 1
        since_restart += 1

        gnorm = float(np.linalg.norm(g))
        xnorm = float(np.linalg.norm(x))
        stop = _report(
            callback, iteration=n_iter, x=x, shape=shape, f=f, gnorm=gnorm,
            xnorm=xnorm, step=t.step, n_evals=obj.n_evals,
        )
        outcome = rules.after_iteration(n_iter, f, gnorm, xnorm, stop)
        if outcome is not None:
            return finish(*outcome)


# ---------------------------------------------------------------- iterative scaling

# Cap on the Newton iterations of the per-feature GIS step with a prior (they
# converge quadratically and monotonically; the cap is a safety net).
_GIS_NEWTON_MAX = 100
_EPS = float(np.finfo(np.float64).eps)


def _log_ratio(a, b):
    """log(a / b) for positive arrays: accurate when a ~ b, no overflow otherwise."""
    with np.errstate(over="ignore", under="ignore"):
        ratio = a / b
    far = ~(ratio >= np.finfo(np.float64).tiny) | ~np.isfinite(ratio)
    ratio[far] = 1.0
    out = np.log(ratio)
    if far.any():
        out[far] = np.log(a[far]) - np.log(b[far])
    return out


def _gis_step(emp, E, x, C, c2):
    """The GIS update ``delta`` for every feature (see :func:`gis`).

    Each delta_i maximises the per-feature lower bound on the decrease of the
    objective,

        h_i(d) = emp_i d - E_i (exp(C d) - 1) / C - c2 (2 x_i d + d^2),

    which is concave with h_i(0) = 0, so the update never increases the
    objective.  With c2 == 0 the maximiser is log(emp/E)/C; features with
    emp == 0 or E == 0 (no finite maximiser) get delta 0.  With c2 > 0 it
    is the root of h_i'(d) = emp - E exp(C d) - 2 c2 (x + d), found by Newton's
    method on the equivalent increasing convex equation

        psi(d) = C d + log E - log(emp - 2 c2 (x + d)) = 0

    (no overflow of exp(C d), and nearly linear far from the root) started
    to the right of the root, from where the iterates decrease monotonically
    to it.  Where E == 0 the root is emp/(2 c2) - x exactly.
    """
    delta = np.zeros(x.size)
    if c2 == 0.0:
        ok = np.flatnonzero((emp > 0.0) & (E > 0.0))
        delta[ok] = _log_ratio(emp[ok], E[ok]) / C
        return delta

    b = 2.0 * c2
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        logE = np.log(E)  # -inf where E == 0
        bound = emp / b - x  # the root lies below: h' < 0 from there on
        # psi(bound - t) >= 0 when log(b t) + C t <= C bound + log E, which
        # holds for t = min(1/C, exp(C bound + log E - 1) / b).
        t = np.minimum(1.0 / C, np.exp(C * bound + logE - 1.0) / b)
        start = bound - t
        # With emp > 0 the root lies between log(emp/E)/C and -x: the larger
        # of the two is a (usually much closer) right start too.
        pos = np.flatnonzero((emp > 0.0) & (E > 0.0))
        if pos.size:
            right = np.maximum(_log_ratio(emp[pos], E[pos]) / C, -x[pos])
            start[pos] = np.minimum(start[pos], right)
        delta[:] = start
        # E == 0: start == bound is the exact root; where rounding put the
        # start on the boundary of psi's domain, the root is within rounding.
        r = emp - b * (x + start)
        idx = np.flatnonzero((r > 0.0) & (E > 0.0))
        for _ in range(_GIS_NEWTON_MAX):
            if idx.size == 0:
                break
            d = delta[idx]
            xi = x[idx]
            r = emp[idx] - b * (xi + d)
            log_r = np.log(r)
            le = logE[idx]
            slope = C + b / r
            step = (C * d + le - log_r) / slope
            # the steps are >= 0 in exact arithmetic; stop at rounding level
            noise = (1.0 + C * np.abs(d) + np.abs(le) + np.abs(log_r)) / slope
            tol = 4.0 * _EPS * (np.abs(xi) + np.abs(d) + noise)
            move = step > tol
            delta[idx[move]] = d[move] - step[move]
            idx = idx[move]

        # Safety net (rounding, or the cap above): keep only steps that do
        # not decrease the bound, so the objective cannot increase.
        scaled = E * np.expm1(C * delta) / C
        scaled[E == 0.0] = 0.0  # not 0 * inf
        h = emp * delta - scaled - c2 * delta * (2.0 * x + delta)
        delta[~(h >= 0.0) | ~np.isfinite(delta)] = 0.0
    return delta


def gis(
    expected: Callable[[np.ndarray], np.ndarray],
    empirical,
    x0,
    *,
    C: float,
    c2: float = 0.0,
    max_iter: int = 1000,
    epsilon: float = 1e-5,
    period: int = 10,
    gtol: float = 1e-5,
    objective: Optional[Callable[[np.ndarray], float]] = None,
    fixed=None,
    callback: Optional[Callable[[IterationInfo], object]] = None,
) -> OptimizeResult:
    """Fit a log-linear model by generalized iterative scaling.

    GIS (Darroch & Ratcliff 1972) minimises the negative log-likelihood
    plus ``c2 * |x|^2`` of a log-linear (e.g. maximum-entropy or CRF) model
    whose features are nonnegative and sum to at most ``C`` on every
    configuration (the missing mass is an implicit slack feature of weight
    0).  Each iteration moves every feature by the maximiser of a separable
    lower bound on the improvement, so the objective never increases
    (for ``c2 == 0`` and ``c2 > 0`` alike):

    * ``c2 == 0``: ``delta = log(emp / E) / C``.  Features with ``emp == 0``
      (whose optimum is at minus infinity) and features with ``E == 0`` are
      kept at their current value.
    * ``c2 > 0``: ``delta`` solves ``emp - E exp(C delta) - 2 c2 (x + delta)
      = 0``, by a few vectorised Newton iterations on all features at once;
      this works for ``emp == 0`` and ``E == 0`` too.

    Parameters
    ----------
    expected : callable
        ``expected(x) -> E``, the model's expected feature counts at ``x``
        (summed over the training set; size of ``x``).  One call per
        iterate, counted in ``n_evals``.  Entries must be finite; tiny
        negative entries (rounding) are treated as 0, clearly negative ones
        raise ``ValueError``.
    empirical : array_like
        Observed feature counts (finite, ``>= 0``; size of ``x0``).
    x0 : array_like
        Starting weights (any shape; finite).
    C : float
        Maximum total feature count of any configuration (``> 0``).
    c2 : float
        Coefficient of the Gaussian prior ``c2 * |x|^2``.
    max_iter, epsilon, period, gtol, callback
        As for :func:`lbfgs`, with the same stopping rules and reasons.  The
        gradient is ``E - emp + 2 c2 x`` (zero on ``fixed`` parameters; it
        stays nonzero on features with ``emp == 0`` when ``c2 == 0``, as
        their optimum is at minus infinity).  ``IterationInfo.step`` is the
        norm of the update.
    objective : callable, optional
        ``objective(x) -> f``, the value to report and to use in the
        relative-improvement rule; it is called right after ``expected`` at
        the same point (so a caller can compute both in one pass) and is not
        counted in ``n_evals``.  Without it the progress measure (reported
        as ``f``) is the gradient norm.
    fixed : bool array of the shape of ``x0``, optional
        Parameters held at their starting value.

    Returns
    -------
    OptimizeResult
        As for :func:`lbfgs`.  If ``expected`` or ``objective`` returns a
        non-finite value after an update, GIS stops (not converged) and
        returns the previous point.  If the update is zero for every
        parameter, GIS stops (converged: a fixed point).

    Raises
    ------
    ValueError
        For invalid arguments, or non-finite counts or objective at ``x0``.
    """
    max_iter, period, _ = _check_options(max_iter, epsilon, period, gtol)
    C = float(C)
    if not (math.isfinite(C) and C > 0.0):
        raise ValueError(f"C must be a finite number > 0, got {C}")
    c2 = float(c2)
    if not (math.isfinite(c2) and c2 >= 0.0):
        raise ValueError(f"c2 must be a finite number >= 0, got {c2}")
    shape, x = _start_point(x0)
    emp = np.array(empirical, dtype=np.float64)
    if emp.size != x.size:
        raise ValueError(f"empirical has {emp.size} elements, expected {x.size}")
    emp = emp.reshape(-1)
    if not (np.isfinite(emp).all() and (emp >= 0.0).all()):
        raise ValueError("empirical counts must be finite and >= 0")
    frozen = None
    if fixed is not None:
        frozen = _bool_mask(fixed, shape, "fixed")
        if not frozen.any():
            frozen = None

    n_evals = 0

    def evaluate(x):
        """``(E, F, gnorm)`` at x, or None if something is not finite."""
        nonlocal n_evals
        E = np.array(expected(x.reshape(shape)), dtype=np.float64)
        n_evals += 1
        if E.size != x.size:
            raise ValueError(
                f"expected(x) returned {E.size} elements, expected {x.size}"
            )
        E = E.reshape(-1)
        if not np.isfinite(E).all():
            return None
        if (E < -1e-8 * (1.0 + emp)).any():
            raise ValueError("expected(x) returned negative expected counts")
        np.maximum(E, 0.0, out=E)
        grad = E - emp
        if c2 > 0.0:
            grad += (2.0 * c2) * x
        if frozen is not None:
            grad[frozen] = 0.0
        gnorm = float(np.linalg.norm(grad))
        if objective is None:
            F = gnorm
        else:
            F = float(objective(x.reshape(shape)))
            if not math.isfinite(F):
                return None
        return E, F, gnorm

    state = evaluate(x)
    if state is None:
        raise ValueError("expected(x0) or objective(x0) is not finite")
    E, F, gnorm = state
    rules = _StoppingRules(
        max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=F
    )
    n_iter = 0

    def finish(converged, reason):
        return OptimizeResult(
            x=x.reshape(shape), f=F, n_iter=n_iter, n_evals=n_evals,
            converged=converged, reason=reason,
        )

    outcome = rules.at_start(gnorm, float(np.linalg.norm(x)))
    if outcome is not None:
        return finish(*outcome)

    while True:
        delta = _gis_step(emp, E, x, C, c2)
        if frozen is not None:
            delta[frozen] = 0.0
        if not delta.any():
            return finish(True, "converged: the GIS update is zero (a fixed point)")
        x_new = x + delta
        state = evaluate(x_new)
        if state is None:
            return finish(
                False,
                f"stopped: expected(x) or objective(x) was not finite after the "
                f"update of iteration {n_iter + 1}; returning the previous point",
            )
        x = x_new
        E, F, gnorm = state
        n_iter += 1

        xnorm = float(np.linalg.norm(x))
        stop = _report(
            callback, iteration=n_iter, x=x, shape=shape, f=F, gnorm=gnorm,
            xnorm=xnorm, step=float(np.linalg.norm(delta)), n_evals=n_evals,
        )
        outcome = rules.after_iteration(n_iter, F, gnorm, xnorm, stop)
        if outcome is not None:
            return finish(*outcome)


# ---------------------------------------------------------------- QuickProp / GPD

# Fahlman's maximum growth factor: no weight's step may exceed mu times its previous step.
_QP_GROWTH = 1.75


def _quickprop_step(slope, prev_slope, prev_dx, rate, growth):
    """Fahlman's (1988) per-weight step from the downhill slopes ``-g`` now and before."""
    shrink = growth / (1.0 + growth)
    up = prev_dx > 0.0
    down = prev_dx < 0.0
    # the gradient term only while the slope still points the way the weight moved
    dx = np.where((up & (slope > 0.0)) | (down & (slope < 0.0)) | ~(up | down), rate * slope, 0.0)
    # the secant (parabola) step, or the largest growth when the parabola is too flat
    # or opens the wrong way
    grows = np.where(up, slope > shrink * prev_slope, slope < shrink * prev_slope)
    with np.errstate(divide="ignore", invalid="ignore"):
        secant = prev_dx * slope / (prev_slope - slope)
    dx += np.where(up | down, np.where(grows, growth * prev_dx, secant), 0.0)
    return dx


def quickprop(
    fun: Callable[[np.ndarray], tuple],
    x0,
    *,
    first_step: float = 0.1,
    growth: float = _QP_GROWTH,
    gpd_iter: int = 0,
    max_iter: int = 1000,
    epsilon: float = 1e-5,
    period: int = 10,
    gtol: float = 1e-5,
    callback: Optional[Callable[[IterationInfo], object]] = None,
) -> OptimizeResult:
    """Minimise ``fun(x)[0]`` by QuickProp (Fahlman 1988), after optional GPD steps.

    Every iteration is one evaluation and a fixed-rule step, with no line
    search: the method for objectives that are not continuous, such as the
    MCE-F loss of Suzuki et al. (2006), who train with QuickProp after ten GPD
    (gradient descent) iterations. Each weight takes the minimum of the
    parabola through its last two slopes, limited to ``growth`` times its last
    step, plus a gradient step ``-rate * g`` while its slope keeps its sign.

    ``rate`` is set once, at x0, so that the first step moves no weight by more
    than ``first_step``. The first ``gpd_iter`` iterations are plain gradient
    steps with that rate. The objective need not decrease; the result is the
    best point seen, and the relative-improvement rule uses the best value so
    far. Other options and the result are as for :func:`lbfgs`.
    """
    max_iter, period, _ = _check_options(max_iter, epsilon, period, gtol)
    first_step, growth = float(first_step), float(growth)
    if not (math.isfinite(first_step) and first_step > 0.0):
        raise ValueError(f"first_step must be a finite number > 0, got {first_step}")
    if not (math.isfinite(growth) and growth > 0.0):
        raise ValueError(f"growth must be a finite number > 0, got {growth}")
    if int(gpd_iter) != gpd_iter or gpd_iter < 0:
        raise ValueError(f"gpd_iter must be an integer >= 0, got {gpd_iter}")
    shape, x = _start_point(x0)
    obj = _Objective(fun, shape)
    f, g = obj(x)
    if not _is_finite(f, g):
        raise ValueError("fun returned a non-finite value or gradient at x0")
    rules = _StoppingRules(max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=f)
    best_x, best_f = x, f
    n_iter = 0

    def finish(converged, reason):
        return OptimizeResult(
            x=best_x.reshape(shape), f=best_f, n_iter=n_iter, n_evals=obj.n_evals,
            converged=converged, reason=reason,
        )

    outcome = rules.at_start(float(np.linalg.norm(g)), float(np.linalg.norm(x)))
    if outcome is not None:
        return finish(*outcome)
    rate = first_step / float(np.max(np.abs(g)))
    prev_dx = prev_slope = None
    while True:
        slope = -g
        if prev_dx is None or n_iter < gpd_iter:
            dx = rate * slope
        else:
            dx = _quickprop_step(slope, prev_slope, prev_dx, rate, growth)
            dx[~np.isfinite(dx)] = 0.0
        x = x + dx
        f, g = obj(x)
        if not _is_finite(f, g):
            return finish(False, f"the objective is not finite after iteration {n_iter + 1}")
        prev_dx, prev_slope = dx, slope
        n_iter += 1
        if f < best_f:
            best_x, best_f = x, f
        gnorm = float(np.linalg.norm(g))
        xnorm = float(np.linalg.norm(x))
        stop = _report(
            callback, iteration=n_iter, x=x, shape=shape, f=f, gnorm=gnorm,
            xnorm=xnorm, step=float(np.linalg.norm(dx)), n_evals=obj.n_evals,
        )
        outcome = rules.after_iteration(n_iter, best_f, gnorm, xnorm, stop)
        if outcome is not None:
            return finish(*outcome)
