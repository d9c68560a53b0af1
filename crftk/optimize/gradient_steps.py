"""QuickProp (Fahlman 1988) after optional plain gradient (GPD) steps, for discontinuous objectives."""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from crftk.optimize.common import (evaluate_start, IterationInfo, OptimizeResult, StoppingRules, check_options,
                                   is_finite, norm, start_point)

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
    max_iter, period, _ = check_options(max_iter, epsilon, period, gtol)
    first_step, growth = float(first_step), float(growth)
    if not (math.isfinite(first_step) and first_step > 0.0):
        raise ValueError(f"first_step must be a finite number > 0, got {first_step}")
    if not (math.isfinite(growth) and growth > 0.0):
        raise ValueError(f"growth must be a finite number > 0, got {growth}")
    if int(gpd_iter) != gpd_iter or gpd_iter < 0:
        raise ValueError(f"gpd_iter must be an integer >= 0, got {gpd_iter}")
    shape, x = start_point(x0)
    obj, f, g = evaluate_start(fun, shape, x)
    rules = StoppingRules(max_iter=max_iter, epsilon=epsilon, period=period, gtol=gtol, f0=f, shape=shape)
    best_x, best_f = x, f
    n_iter = 0

    if (result := rules.result_at_start(g, x, f, obj.n_evals)) is not None:
        return result
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
        if not is_finite(f, g):
            return rules.result(best_x, best_f, n_iter, obj.n_evals, False,
                                f"the objective is not finite after iteration {n_iter + 1}")
        prev_dx, prev_slope = dx, slope
        n_iter += 1
        if f < best_f:
            best_x, best_f = x, f
        gnorm = norm(g)
        if (result := rules.end_of_iteration(callback, iteration=n_iter, x=x, f=f, gnorm=gnorm,
                                             step=norm(dx), n_evals=obj.n_evals,
                                             best=(best_x, best_f))) is not None:
            return result

