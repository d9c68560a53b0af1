"""Line searches: strong Wolfe (bracketing and zoom) and OWL-QN's orthant-projected backtracking."""

from __future__ import annotations

import math

import numpy as np

from crftk.optimize.common import ARMIJO, dot64, is_finite, same_point, seal

# The curvature constant of quasi-Newton methods (CG passes its own, 0.1).
CURVATURE = 0.9
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
MAX_STEP = 1e20
# Where phi(a) and phi(0) differ by less than this fraction of |phi(0)|, their
# difference is rounding noise (a sum over a corpus, a BLAS kernel's order of
# operations) and sufficient decrease is judged from the slopes instead: Hager
# and Zhang's approximate Wolfe conditions.
FLAT_OBJECTIVE = 1e-12


class LineSearchFailed(Exception):
    """Raised by the line searches; the message is the stop reason."""


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
    return min(max(c, lower), upper, MAX_STEP)


# ---------------------------------------------------------------- line searches


def strong_wolfe_search(obj, x, f0, d, slope0, step, max_trials, curvature=CURVATURE):
    """Find a step satisfying the strong Wolfe conditions along d.

    Bracketing phase followed by zoom (Nocedal & Wright, Algorithms 3.5/3.6),
    with safeguarded cubic/quadratic interpolation.  ``curvature`` is the
    constant of the curvature condition |phi'(a)| <= curvature * |phi'(0)|
    (0.9 for quasi-Newton methods, 0.1 for conjugate gradient).  Returns the
    accepted :class:`_Trial`; raises :class:`LineSearchFailed`.
    """
    armijo_seen = False
    trials = 0
    wolfe_slope = -curvature * slope0  # |phi'(a)| must not exceed this
    flat_tolerance = FLAT_OBJECTIVE * max(1.0, abs(f0))

    def evaluate(a, *known):
        nonlocal trials
        if trials >= max_trials:
            _fail_exhausted(trials, armijo_seen)
        xt = d * a          # x + a * d with one new array instead of two: the same two
        xt += x             # roundings (a product and a sum, both commutative)
        seal(xt)
        for p in known:
            if same_point(xt, p):
                raise LineSearchFailed(
                    f"line search failed: the step interval shrank to machine "
                    f"precision after {trials} trials (the objective or its "
                    f"gradient may be inaccurate)"
                )
        f, g = obj(xt)
        trials += 1
        if not is_finite(f, g):
            return _Trial(a, xt, math.inf, None, None)
        return _Trial(a, xt, f, g, dot64(g, d))

    def sufficient(t):
        return t.f <= f0 + ARMIJO * t.step * slope0

    def flat(t, best):
        # The values no longer resolve the decrease (neither t's nor that of the best point so far,
        # which a real decrease would put below f0 by more): only the slopes, which stay accurate,
        # can say on which side of the step the minimum lies.
        return (math.isfinite(t.f) and abs(t.f - f0) <= flat_tolerance
                and abs(best.f - f0) <= flat_tolerance)

    def approximate_wolfe(t, best):
        # phi'(a) <= (2*ARMIJO - 1) * phi'(0) is sufficient decrease for a quadratic, read off the
        # gradients.
        return flat(t, best) and t.slope <= (2.0 * ARMIJO - 1.0) * slope0 and abs(t.slope) <= wolfe_slope

    def zoom(lo, hi):
        nonlocal armijo_seen
        while True:
            t = evaluate(_zoom_step(lo, hi), lo.x, hi.x)
            if approximate_wolfe(t, lo):
                return t
            if not math.isfinite(t.f) or not (flat(t, lo) or sufficient(t) and t.f < lo.f):
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
        if approximate_wolfe(t, prev):
            return t
        if not math.isfinite(t.f):
            return zoom(prev, t)
        if not (flat(t, prev) or sufficient(t) and t.f < prev.f):
            return zoom(prev, t)
        armijo_seen = True
        if abs(t.slope) <= wolfe_slope:
            return t
        if t.slope >= 0.0:
            return zoom(t, prev)
        if t.step >= MAX_STEP:
            raise LineSearchFailed(
                f"line search failed: the step grew to {t.step:.2g} without "
                f"meeting the curvature condition (is the objective bounded "
                f"below?)"
            )
        a = _extrapolate_step(prev, t)
        prev = t


def _fail_exhausted(trials, armijo_seen):
    if armijo_seen:
        raise LineSearchFailed(
            f"line search failed to find a step satisfying the strong Wolfe "
            f"conditions after {trials} trials"
        )
    raise LineSearchFailed(
        f"line search failed to find a sufficient decrease after {trials} trials"
    )


def orthant_search(obj, x, F0, pg, d, step, max_trials, c1, mask):
    """OWL-QN backtracking search with projection onto the orthant of x.

    The orthant is sign(x_i), or sign(-pg_i) where x_i = 0; penalised
    coordinates of a trial point that leave it are set to zero.  Accepts the
    first trial with F(x') <= F(x) + c * pg'(x' - x).  Returns
    ``(trial, F)``; raises :class:`LineSearchFailed`.
    """
    orthant = np.sign(x)
    np.copyto(orthant, np.negative(np.sign(pg)), where=x == 0.0)
    flat_tolerance = FLAT_OBJECTIVE * max(1.0, abs(F0))
    last = x
    a = step
    for trial in range(max_trials):
        xt = d * a
        xt += x
        leaves = np.less_equal(xt * orthant, 0.0)
        if mask is not None:
            leaves &= mask
        np.copyto(xt, 0.0, where=leaves)
        seal(xt)
        if same_point(xt, x) or same_point(xt, last):
            raise LineSearchFailed(
                f"line search failed: the step became too small to change x "
                f"after {trial} trials"
            )
        f, g = obj(xt)
        last = xt
        if is_finite(f, g):
            F = f + l1(xt, c1, mask)
            step = xt - x
            decrease = dot64(pg, step)
            if F <= F0 + ARMIJO * decrease or (abs(F - F0) <= flat_tolerance
                                               and _orthant_slope(g, step, orthant, c1, mask)
                                               <= (2.0 * ARMIJO - 1.0) * decrease):
                return _Trial(a, xt, f, g, None), F
        a *= _BACKTRACK
    raise LineSearchFailed(
        f"line search failed to find a sufficient decrease after {max_trials} trials"
    )


def _orthant_slope(g, step, orthant, c1, mask):
    """Slope of f + c1*|x|_1 along step at its end, within the orthant (approximate Wolfe)."""
    along = orthant * step
    return dot64(g, step) + c1 * float(along.sum() if mask is None else along.sum(where=mask))


def l1(x, c1, mask):
    if mask is None:
        return c1 * float(np.abs(x).sum())
    return c1 * float(np.abs(x).sum(where=mask))


def pseudo_gradient(x, g, c1, unpenalised):
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


