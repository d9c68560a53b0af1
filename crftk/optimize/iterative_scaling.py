"""Generalized iterative scaling (Darroch & Ratcliff 1972), with a Gaussian prior."""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from crftk.optimize.common import (norm, IterationInfo, OptimizeResult, StoppingRules, bool_mask, check_options,
                                   start_point)

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
    max_iter, period, _ = check_options(max_iter, epsilon, period, gtol)
    C = float(C)
    if not (math.isfinite(C) and C > 0.0):
        raise ValueError(f"C must be a finite number > 0, got {C}")
    c2 = float(c2)
    if not (math.isfinite(c2) and c2 >= 0.0):
        raise ValueError(f"c2 must be a finite number >= 0, got {c2}")
    shape, x = start_point(x0)
    emp = np.array(empirical, dtype=np.float64)
    if emp.size != x.size:
        raise ValueError(f"empirical has {emp.size} elements, expected {x.size}")
    emp = emp.reshape(-1)
    if not (np.isfinite(emp).all() and (emp >= 0.0).all()):
        raise ValueError("empirical counts must be finite and >= 0")
    frozen = None
    if fixed is not None:
        frozen = bool_mask(fixed, shape, "fixed")
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
        gnorm = norm(grad)
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
    rules = StoppingRules(max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=F, shape=shape)
    n_iter = 0

    if (result := rules.result_at_start(np.array([gnorm]), x, F, n_evals)) is not None:   # gnorm: of the free weights
        return result

    while True:
        delta = _gis_step(emp, E, x, C, c2)
        if frozen is not None:
            delta[frozen] = 0.0
        if not delta.any():
            return rules.result(x, F, n_iter, n_evals, True, "converged: the GIS update is zero (a fixed point)")
        x_new = x + delta
        state = evaluate(x_new)
        if state is None:
            return rules.result(
                x, F, n_iter, n_evals, False,
                f"stopped: expected(x) or objective(x) was not finite after the "
                f"update of iteration {n_iter + 1}; returning the previous point",
            )
        x = x_new
        E, F, gnorm = state
        n_iter += 1

        if (result := rules.end_of_iteration(callback, iteration=n_iter, x=x, f=F, gnorm=gnorm,
                                             step=norm(delta), n_evals=n_evals)) is not None:
            return result


