"""Nonlinear conjugate gradient (Polak-Ribière+), preconditioned and mixed (Sha & Pereira 2003)."""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from crftk.optimize.common import (evaluate_start, ARMIJO, dot64, norm, IterationInfo, OptimizeResult, StoppingRules,
                                   check_options, not_descent, start_point)
from crftk.optimize.linesearch import MAX_STEP, LineSearchFailed, strong_wolfe_search


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
    max_iter, period, max_linesearch = check_options(
        max_iter, epsilon, period, gtol, max_linesearch
    )
    curvature = float(curvature)
    if not (ARMIJO < curvature < 1.0):
        raise ValueError(
            f"curvature must lie strictly between {ARMIJO:g} and 1, got {curvature}"
        )
    if precondition is not None and not callable(precondition):
        raise ValueError("precondition must be a callable or None")
    if mixed_after is not None:
        if precondition is None:
            raise ValueError("mixed_after needs a preconditioner (precondition=...)")
        if int(mixed_after) != mixed_after or mixed_after < 0:
            raise ValueError(f"mixed_after must be an integer >= 0, got {mixed_after}")
        mixed_after = int(mixed_after)
    shape, x = start_point(x0)
    if restart is None:
        restart = x.size
    elif int(restart) != restart or restart < 0:
        raise ValueError(f"restart must be an integer >= 0 or None, got {restart}")
    restart = int(restart)

    obj, f, g = evaluate_start(fun, shape, x)
    rules = StoppingRules(max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=f, shape=shape)
    n_iter = 0

    if (result := rules.result_at_start(g, x, f, obj.n_evals)) is not None:
        return result

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
        gz = dot64(g, z)

        steepest = p is None or (restart > 0 and since_restart >= restart)
        if not steepest:
            beta = max(0.0, (gz - dot64(g, z_prev)) / gz_prev)
            if beta == 0.0:
                steepest = True
            else:
                d = beta * p
                d -= z
                slope = dot64(g, d)
                steepest = not slope < 0.0
        if steepest:
            d = -z
            slope = -gz
            since_restart = 0
            if not slope < 0.0:
                return rules.result(x, f, n_iter, obj.n_evals, False, not_descent(slope))

        if prev_step is None:
            step = 1.0 if preconditioned else 1.0 / norm(d)
        else:
            step = prev_step * (prev_slope / slope)
            if not (math.isfinite(step) and step > 0.0):
                step = 1.0
            step = min(step, MAX_STEP)

        try:
            t = strong_wolfe_search(
                obj, x, f, d, slope, step, max_linesearch, curvature
            )
        except LineSearchFailed as exc:
            return rules.result(x, f, n_iter, obj.n_evals, False, str(exc))

        x, f, g = t.x, t.f, t.g
        p, z_prev, gz_prev = d, z, gz
        prev_step, prev_slope = t.step, slope
        n_iter += 1
        since_restart += 1

        gnorm = norm(g)
        if (result := rules.end_of_iteration(callback, iteration=n_iter, x=x, f=f, gnorm=gnorm, step=t.step,
                                             n_evals=obj.n_evals)) is not None:
            return result


