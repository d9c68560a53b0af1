"""Tests for crftk.optimize (L-BFGS, OWL-QN, conjugate gradient, GIS, QuickProp)."""

import numpy as np
import pytest
import scipy.optimize

from crftk.optimize import IterationInfo, OptimizeResult, cg, gis, lbfgs, quickprop
from crftk.optimize.iterative_scaling import _gis_step


# ---------------------------------------------------------------- helpers


class Recorder:
    """Wraps an objective and records every call (x is copied)."""

    def __init__(self, fun):
        self.fun = fun
        self.xs = []
        self.fs = []
        self.gs = []
        self.passed = []  # the arrays exactly as passed, to detect mutation

    def __call__(self, x):
        self.passed.append(x)
        self.xs.append(np.array(x, copy=True))
        f, g = self.fun(np.array(x, copy=True))
        self.fs.append(f)
        self.gs.append(np.array(g, copy=True))
        return f, g

    @property
    def calls(self):
        return len(self.xs)

    def lookup(self, x):
        for xi, fi, gi in zip(self.xs, self.fs, self.gs):
            if np.array_equal(xi, x):
                return fi, gi
        raise AssertionError("point was never evaluated")


def assert_no_repeated_calls(rec):
    for a, b in zip(rec.xs, rec.xs[1:]):
        assert not np.array_equal(a, b), "fun called twice in a row at the same x"


def assert_inputs_untouched(rec):
    for passed, copy in zip(rec.passed, rec.xs):
        assert np.array_equal(passed, copy), "an x passed to fun was modified later"


def quadratic_problem(n=50, seed=0):
    rng = np.random.default_rng(seed)
    Q = rng.standard_normal((n, n))
    A = Q @ Q.T / n + 0.5 * np.eye(n)
    b = rng.standard_normal(n)

    def fun(x):
        Ax = A @ x
        return 0.5 * x @ Ax - b @ x, Ax - b

    return A, b, fun


def rosenbrock(x):
    x = np.asarray(x, dtype=float)
    a = x[1:] - x[:-1] ** 2
    c = 1.0 - x[:-1]
    f = float(np.sum(100.0 * a**2 + c**2))
    g = np.zeros_like(x)
    g[:-1] = -400.0 * x[:-1] * a - 2.0 * c
    g[1:] += 200.0 * a
    return f, g


def rosenbrock_start(n):
    x0 = np.ones(n)
    x0[::2] = -1.2
    return x0


def logistic_problem(seed=1, n_samples=300, n_features=12, lam=0.7):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))
    w_true = rng.standard_normal(n_features)
    p = 1.0 / (1.0 + np.exp(-X @ w_true))
    y = np.where(rng.random(n_samples) < p, 1.0, -1.0)

    def fun(w):
        z = y * (X @ w)
        loss = np.logaddexp(0.0, -z).sum() + 0.5 * lam * w @ w
        sig = np.exp(-np.logaddexp(0.0, z))  # 1 / (1 + exp(z))
        grad = -(X.T @ (y * sig)) + lam * w
        return float(loss), grad

    return fun, n_features


def lasso_problem(seed=2, n_samples=80, n_features=30):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n_samples, n_features))
    x_true = np.zeros(n_features)
    x_true[[1, 4, 9, 17, 25]] = [3.0, -2.0, 1.5, -4.0, 2.5]
    b = A @ x_true + 0.1 * rng.standard_normal(n_samples)

    def fun(x):
        r = A @ x - b
        return 0.5 * float(r @ r), A.T @ r

    return A, b, fun


def lasso_coordinate_descent(A, b, lam, sweeps=20000, tol=1e-15):
    """Reference lasso solver: cyclic coordinate descent with soft thresholding.

    Minimises 0.5 |Ax - b|^2 + sum_i lam_i |x_i| (lam may be a vector).
    """
    n = A.shape[1]
    lam = np.broadcast_to(np.asarray(lam, dtype=float), (n,))
    col_sq = (A * A).sum(axis=0)
    x = np.zeros(n)
    r = b - A @ x
    for _ in range(sweeps):
        max_change = 0.0
        for j in range(n):
            rho = A[:, j] @ r + col_sq[j] * x[j]
            new = np.sign(rho) * max(abs(rho) - lam[j], 0.0) / col_sq[j]
            change = new - x[j]
            if change != 0.0:
                r -= change * A[:, j]
                x[j] = new
                max_change = max(max_change, abs(change))
        if max_change < tol:
            break
    return x


# ---------------------------------------------------------------- L-BFGS


@pytest.mark.parametrize("minimise, gtol", [(lbfgs, 1e-7), (cg, 1e-8)], ids=["lbfgs", "cg"])
def test_convex_quadratic_matches_linear_solve(minimise, gtol):
    A, b, fun = quadratic_problem()
    rec = Recorder(fun)
    res = minimise(rec, np.zeros(50), gtol=gtol, epsilon=0.0)
    assert isinstance(res, OptimizeResult)
    assert res.converged, res.reason
    assert "gradient" in res.reason
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), atol=1e-6, rtol=0)
    assert res.f == pytest.approx(fun(res.x)[0], rel=1e-14)
    assert res.n_evals == rec.calls
    if minimise is cg:
        assert res.n_iter <= 50  # conjugacy: no slower than exact-arithmetic linear CG
    assert_no_repeated_calls(rec)
    assert_inputs_untouched(rec)


def noisy_values(fun, ulps=8, seed=1):
    """fun with its values off by up to ``ulps`` units in the last place (exact gradients), as a
    sum computed in another order (another BLAS kernel, another thread count) gives them."""
    rng = np.random.default_rng(seed)

    def noisy(x):
        f, g = fun(x)
        return f + float(rng.integers(-ulps, ulps + 1)) * np.spacing(f), g

    return noisy


@pytest.mark.parametrize("minimise", [lbfgs, cg], ids=["lbfgs", "cg"])
def test_tight_gradient_tolerance_reached_through_rounding_noise(minimise):
    # Near the minimum the decrease along a step falls below the rounding of f; the line search
    # then judges sufficient decrease from the slopes (approximate Wolfe) instead of failing.
    A, b, fun = quadratic_problem()
    res = minimise(noisy_values(fun), np.zeros(50), gtol=1e-8, epsilon=0.0, max_iter=500)
    assert res.converged, res.reason
    assert "gradient" in res.reason
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), atol=1e-7, rtol=0)


def test_approximate_wolfe_needs_a_flat_objective():
    # A trial whose value is clearly worse is never accepted on its slopes alone.
    from crftk.optimize.linesearch import LineSearchFailed, strong_wolfe_search

    def rises(x):      # the slopes of a minimum at 1, but every trial value is higher by 1e-6
        return (0.0 if x[0] == 0.0 else 1e-6), np.array([x[0] - 1.0])

    with pytest.raises(LineSearchFailed):
        strong_wolfe_search(rises, np.zeros(1), 0.0, np.ones(1), -1.0, 1.0, max_trials=20)

    # Nor does a trial within rounding of f0 win over an earlier trial that really decreased f.
    def dips(x):       # f -1 at 1 (slope still steep: not accepted), then 0 with a rising slope
        return (-1.0, np.array([-0.95])) if x[0] == 1.0 else (0.0, np.array([0.5]))

    try:
        t = strong_wolfe_search(dips, np.zeros(1), 0.0, np.ones(1), -1.0, 1.0, max_trials=20)
    except LineSearchFailed:
        return
    assert t.f <= -1.0, f"returned step {t.step} with f {t.f}, though step 1 had f -1"


@pytest.mark.parametrize("minimise", [lbfgs, cg], ids=["lbfgs", "cg"])
@pytest.mark.parametrize("n", [2, 10])
def test_rosenbrock_reaches_minimum(minimise, n):
    rec = Recorder(rosenbrock)
    res = minimise(rec, rosenbrock_start(n), gtol=1e-10, epsilon=0.0, max_iter=2000)
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, np.ones(n), atol=1e-4, rtol=0)
    assert res.n_evals == rec.calls
    assert_no_repeated_calls(rec)
    assert_inputs_untouched(rec)


def test_strong_wolfe_conditions_at_every_accepted_step():
    rec = Recorder(rosenbrock)
    x0 = rosenbrock_start(10)
    accepted = [x0]
    res = lbfgs(
        rec,
        x0,
        gtol=1e-8,
        epsilon=0.0,
        callback=lambda info: accepted.append(np.array(info.x, copy=True)),
    )
    assert res.converged, res.reason
    assert len(accepted) == res.n_iter + 1 > 10
    for k, (xa, xb) in enumerate(zip(accepted, accepted[1:])):
        fa, ga = rec.lookup(xa)
        fb, gb = rec.lookup(xb)
        s = xb - xa
        slope_a = ga @ s  # = step * g'd
        slope_b = gb @ s
        assert slope_a < 0, f"iteration {k + 1}: not a descent step"
        assert fb <= fa + 1e-4 * slope_a, f"iteration {k + 1}: Armijo fails"
        assert abs(slope_b) <= 0.9 * abs(slope_a), f"iteration {k + 1}: curvature fails"


def flat_trap(x):
    """1-D quartic with f(0) = 0, f'(0) = -1, a stationary point at 1 where
    f(1) = -1e-5 (too little decrease for the Armijo condition from 0) and the
    minimum near 0.25."""
    a, b = 3.0 - 3e-5, -3.0 + 2e-5
    t = x[0]
    f = -t + a * t**2 + b * t**3 + t**4
    g = -1.0 + 2 * a * t + 3 * b * t**2 + 4 * t**3
    return float(f), np.array([g])


def test_armijo_condition_rejects_tiny_decrease():
    # the first trial (step 1/|g| = 1) lands on x = 1, where the curvature
    # condition holds but the decrease is insufficient
    rec = Recorder(flat_trap)
    x0 = np.zeros(1)
    res = lbfgs(rec, x0, gtol=1e-9, epsilon=0.0)
    assert rec.xs[1][0] == 1.0
    assert res.converged, res.reason
    x_min = scipy.optimize.brentq(lambda t: flat_trap([t])[1][0], 0.0, 0.5)
    assert x_min == pytest.approx(0.25, abs=1e-4)
    assert res.x[0] == pytest.approx(x_min, abs=1e-7)

    # OWL-QN: at x = 1 the L1 term makes the objective larger than at 0
    c1 = 1e-3
    infos = []
    rec = Recorder(flat_trap)
    res = lbfgs(rec, x0, c1=c1, gtol=1e-9, epsilon=0.0, callback=infos.append)
    assert rec.xs[1][0] == pytest.approx(1.0, rel=1e-12)
    assert res.converged, res.reason
    fs = [0.0] + [i.f for i in infos]
    assert all(b < a for a, b in zip(fs, fs[1:]))
    assert 0.0 < res.x[0] < 0.25
    assert flat_trap(res.x)[1][0] + c1 == pytest.approx(0.0, abs=1e-8)


def test_first_step_is_normalised_steepest_descent():
    A, b, fun = quadratic_problem(n=20)
    rec = Recorder(fun)
    x0 = np.full(20, 0.3)
    lbfgs(rec, x0, max_iter=3)
    g0 = rec.gs[0]
    expected = x0 - g0 / np.linalg.norm(g0)
    np.testing.assert_allclose(rec.xs[1], expected, rtol=0, atol=1e-15)


def test_l2_logistic_regression_matches_scipy():
    fun, n = logistic_problem()
    ref = scipy.optimize.minimize(
        fun,
        np.zeros(n),
        jac=True,
        method="L-BFGS-B",
        options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10000},
    )
    assert ref.success
    rec = Recorder(fun)
    res = lbfgs(rec, np.zeros(n), gtol=1e-6, epsilon=0.0)
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, ref.x, atol=1e-5, rtol=0)
    assert res.f <= ref.fun + 1e-9
    assert_no_repeated_calls(rec)


def test_multidimensional_x0_keeps_shape():
    A, b, fun = quadratic_problem(n=12)

    def fun2d(x):
        assert x.shape == (3, 4)
        f, g = fun(x.reshape(-1))
        return f, g.reshape(3, 4)

    res = lbfgs(fun2d, np.zeros((3, 4)), gtol=1e-7, epsilon=0.0)
    assert res.x.shape == (3, 4)
    np.testing.assert_allclose(res.x.reshape(-1), np.linalg.solve(A, b), atol=1e-6)


def test_gradient_buffer_reuse_by_fun_is_safe():
    A, b, fun = quadratic_problem(n=30)
    buf = np.empty(30)

    def fun_reusing(x):
        f, g = fun(x)
        buf[:] = g
        return f, buf

    res = lbfgs(fun_reusing, np.zeros(30), gtol=1e-7, epsilon=0.0)
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), atol=1e-6)


# ---------------------------------------------------------------- OWL-QN


def test_owlqn_lasso_matches_coordinate_descent():
    A, b, fun = lasso_problem()
    lam = 8.0
    ref = lasso_coordinate_descent(A, b, lam)
    support = ref != 0.0
    assert 0 < support.sum() < len(ref)  # the test problem is really sparse
    rec = Recorder(fun)
    res = lbfgs(rec, np.zeros(A.shape[1]), c1=lam, gtol=1e-7, epsilon=0.0)
    assert res.converged, res.reason
    np.testing.assert_array_equal(res.x != 0.0, support)
    assert np.count_nonzero(res.x) == support.sum()  # exact zeros
    np.testing.assert_allclose(res.x, ref, atol=1e-4, rtol=0)
    expected_f = fun(res.x)[0] + lam * np.abs(res.x).sum()
    assert res.f == pytest.approx(expected_f, rel=1e-12)
    assert res.n_evals == rec.calls
    assert_no_repeated_calls(rec)
    assert_inputs_untouched(rec)


def test_owlqn_mask_leaves_coordinates_unpenalised():
    A, b, fun = lasso_problem(seed=3)
    n = A.shape[1]
    lam = 25.0
    mask = np.ones(n, dtype=bool)
    mask[[0, 1, 2, 3]] = False  # coordinate 0, 2, 3 are zero in x_true
    ref = lasso_coordinate_descent(A, b, np.where(mask, lam, 0.0))
    ref_all = lasso_coordinate_descent(A, b, lam)
    # the mask matters: unpenalised coordinates are nonzero here but the
    # fully penalised solution differs
    assert np.all(ref[~mask] != 0.0)
    assert np.abs(ref - ref_all).max() > 1e-2
    rec = Recorder(fun)
    res = lbfgs(rec, np.zeros(n), c1=lam, l1_mask=mask, gtol=1e-7, epsilon=0.0)
    assert res.converged, res.reason
    np.testing.assert_array_equal(res.x != 0.0, ref != 0.0)
    np.testing.assert_allclose(res.x, ref, atol=1e-4, rtol=0)
    expected_f = fun(res.x)[0] + lam * np.abs(res.x[mask]).sum()
    assert res.f == pytest.approx(expected_f, rel=1e-12)
    assert_no_repeated_calls(rec)


def test_owlqn_callback_counts_active_parameters():
    A, b, fun = lasso_problem()
    infos = []
    res = lbfgs(fun, np.zeros(A.shape[1]), c1=8.0, gtol=1e-9, epsilon=0.0,
                callback=infos.append)
    assert infos and all(isinstance(i, IterationInfo) for i in infos)
    assert infos[-1].n_active == np.count_nonzero(res.x)
    for info in infos:
        assert info.n_active == np.count_nonzero(info.x)
        assert info.xnorm == pytest.approx(np.linalg.norm(info.x))
        assert info.f == pytest.approx(fun(info.x)[0] + 8.0 * np.abs(info.x).sum())


def reference_pseudo_gradient(x, g, lam):
    """Pseudo-gradient written out case by case (lam: per-coordinate)."""
    pg = np.empty_like(g)
    for i in range(len(x)):
        if x[i] > 0:
            pg[i] = g[i] + lam[i]
        elif x[i] < 0:
            pg[i] = g[i] - lam[i]
        elif g[i] + lam[i] < 0:
            pg[i] = g[i] + lam[i]
        elif g[i] - lam[i] > 0:
            pg[i] = g[i] - lam[i]
        else:
            pg[i] = 0.0
    return pg


@pytest.mark.parametrize("masked", [False, True])
def test_owlqn_steps_follow_the_pseudo_gradient_orthant(masked):
    A, b, fun = lasso_problem(seed=4)
    n = A.shape[1]
    lam = 6.0
    mask = np.ones(n, dtype=bool)
    if masked:
        mask[:5] = False
    lam_vec = np.where(mask, lam, 0.0)
    rec = Recorder(fun)
    x0 = np.zeros(n)
    accepted = [x0]
    res = lbfgs(rec, x0, c1=lam, l1_mask=mask if masked else None, gtol=1e-7,
                epsilon=0.0, callback=lambda info: accepted.append(info.x.copy()))
    assert res.converged, res.reason
    assert len(accepted) > 5
    crossed = decreases = 0
    for xa, xb in zip(accepted, accepted[1:]):
        pg = reference_pseudo_gradient(xa, rec.lookup(xa)[1], lam_vec)
        # every coordinate moves against the pseudo-gradient (or not at all)
        assert np.all((xb - xa) * pg <= 0.0)
        # penalised coordinates never change sign within one step
        assert np.all(xa[mask] * xb[mask] >= 0.0)
        crossed += np.count_nonzero((xa != 0) & (xb == 0))
        # the objective decreases at every step (to the last few bits, which depend on the BLAS
        # kernel: near the end the Armijo decrease is below the rounding of F)
        Fa = fun(xa)[0] + lam * np.abs(xa[mask]).sum()
        Fb = fun(xb)[0] + lam * np.abs(xb[mask]).sum()
        assert Fb <= Fa + 8 * np.spacing(Fa)
        decreases += Fb < Fa
    assert crossed > 0  # the orthant projection was exercised
    assert decreases >= len(accepted) - 3


# ---------------------------------------------------------------- stopping rules


def test_relative_improvement_rule():
    rec = Recorder(rosenbrock)
    x0 = rosenbrock_start(10)
    fs = [rosenbrock(x0)[0]]
    period, eps = 3, 1e-2
    res = lbfgs(
        rec, x0, epsilon=eps, period=period, gtol=0.0,
        callback=lambda info: fs.append(info.f),
    )
    assert res.converged
    assert res.reason.startswith("converged: relative improvement")
    assert f"over the last {period} iterations" in res.reason
    assert res.n_iter == len(fs) - 1
    k = res.n_iter
    assert k >= period
    assert (fs[k - period] - fs[k]) / abs(fs[k]) < eps
    for j in range(period, k):  # the rule did not fire earlier
        assert (fs[j - period] - fs[j]) / abs(fs[j]) >= eps
    # without the rule the minimiser goes on
    res2 = lbfgs(rosenbrock, x0, epsilon=0.0, period=period, gtol=0.0, max_iter=k + 5)
    assert res2.n_iter == k + 5


def test_max_iter_rule():
    rec = Recorder(rosenbrock)
    res = lbfgs(rec, rosenbrock_start(10), max_iter=5, gtol=0.0, epsilon=0.0)
    assert res.n_iter == 5
    assert not res.converged
    assert "iteration limit (5)" in res.reason
    assert res.n_evals == rec.calls
    assert res.f == rec.lookup(res.x)[0]


def test_callback_stop_and_eval_counts():
    rec = Recorder(rosenbrock)
    infos = []

    def callback(info):
        infos.append(info)
        assert info.n_evals == rec.calls  # counted when the callback runs
        return info.iteration == 4

    res = lbfgs(rec, rosenbrock_start(10), callback=callback, gtol=0.0, epsilon=0.0)
    assert not res.converged
    assert res.reason == "stopped by callback"
    assert res.n_iter == 4
    assert [i.iteration for i in infos] == [1, 2, 3, 4]
    assert res.n_evals == rec.calls
    assert np.array_equal(res.x, infos[-1].x)
    f_last, g_last = rec.lookup(infos[-1].x)
    assert infos[-1].f == f_last
    assert infos[-1].gnorm == pytest.approx(np.linalg.norm(g_last))
    assert all(i.step > 0 for i in infos)


def test_gradient_rule_at_start_uses_one_evaluation():
    A, b, fun = quadratic_problem(n=10)
    rec = Recorder(fun)
    res = lbfgs(rec, np.linalg.solve(A, b), gtol=1e-6)
    assert res.converged and res.n_iter == 0
    assert res.n_evals == rec.calls == 1


def test_line_search_failure_returns_best_point():
    # the gradient has the wrong sign: no step along -g decreases f
    def bad(x):
        return float(x @ x), -2.0 * x

    rec = Recorder(bad)
    x0 = np.array([1.0, -2.0, 0.5])
    res = lbfgs(rec, x0, max_linesearch=7)
    assert not res.converged
    assert "line search failed" in res.reason
    assert "7 trials" in res.reason
    np.testing.assert_array_equal(res.x, x0)
    assert res.f == bad(x0)[0]
    assert res.n_evals == rec.calls == 8
    assert_no_repeated_calls(rec)


def test_non_finite_values_shrink_the_step():
    # f is infinite outside |x|_inf < 1.2; the minimum (at 1) is inside, and
    # the first step (length 1 along -g from 0.9) lands outside
    def fun(x):
        if np.abs(x).max() >= 1.2:
            return np.inf, np.full_like(x, np.nan)
        return float(np.sum((x - 1.0) ** 2)), 2.0 * (x - 1.0)

    rec = Recorder(fun)
    res = lbfgs(rec, np.full(3, 0.9), gtol=1e-10, epsilon=0.0)
    assert not np.isfinite(rec.fs[1])  # the guard is exercised
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, np.ones(3), atol=1e-8)
    assert_no_repeated_calls(rec)

    # a finite value with a NaN gradient counts as a failed trial as well
    def fun_nan_grad(x):
        if np.abs(x).max() >= 1.2:
            return -1e6, np.full_like(x, np.nan)
        return fun(x)

    rec = Recorder(fun_nan_grad)
    res = lbfgs(rec, np.full(3, 0.9), gtol=1e-10, epsilon=0.0)
    assert np.isnan(rec.gs[1]).all()
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, np.ones(3), atol=1e-8)

    # the same for OWL-QN
    rec = Recorder(fun)
    res = lbfgs(rec, np.full(3, 0.9), c1=0.01, gtol=1e-10, epsilon=0.0)
    assert not np.isfinite(rec.fs[1])
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, np.full(3, 0.995), atol=1e-8)
    assert_no_repeated_calls(rec)


def test_invalid_inputs():
    with pytest.raises(ValueError):
        lbfgs(rosenbrock, np.array([1.0, np.nan]))
    with pytest.raises(ValueError):
        lbfgs(rosenbrock, np.zeros(3), c1=-1.0)
    with pytest.raises(ValueError):
        lbfgs(rosenbrock, np.zeros(3), c1=1.0, l1_mask=np.ones(2, dtype=bool))


def test_never_called_twice_in_a_row_with_tight_tolerances():
    # run far into machine precision so the line search has to give up
    for fun, x0, c1 in [
        (rosenbrock, rosenbrock_start(10), 0.0),
        (quadratic_problem()[2], np.zeros(50), 0.0),
        (lasso_problem()[2], np.zeros(30), 8.0),
    ]:
        rec = Recorder(fun)
        res = lbfgs(rec, x0, c1=c1, gtol=0.0, epsilon=0.0, max_iter=3000)
        assert res.n_evals == rec.calls
        assert_no_repeated_calls(rec)
        assert_inputs_untouched(rec)
        # evaluations per iteration stay small
        assert res.n_evals <= 3 * res.n_iter + 25


# ---------------------------------------------------------------- conjugate gradient


def diagonal_quadratic(n=100, cond=1e4, seed=0):
    """0.5 x'Hx - c'x with H = diag(h), eigenvalues spread over [1, cond]."""
    rng = np.random.default_rng(seed)
    h = np.logspace(0.0, np.log10(cond), n)
    rng.shuffle(h)
    c = rng.standard_normal(n)

    def fun(x):
        return 0.5 * float(h @ (x * x)) - float(c @ x), h * x - c

    return h, c, fun


def logistic_hessian_diagonal(seed=1, n_samples=300, n_features=12, lam=0.7):
    """The exact Hessian diagonal of logistic_problem (same data)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_samples, n_features))

    def diag(w):
        s = 1.0 / (1.0 + np.exp(-(X @ w)))
        return (X * X).T @ (s * (1.0 - s)) + lam

    return diag


class Diagonal:
    """Wraps a preconditioner and records the points it is called at."""

    def __init__(self, fun):
        self.fun = fun
        self.xs = []

    def __call__(self, x):
        self.xs.append(np.array(x, copy=True))
        return self.fun(x)

    @property
    def calls(self):
        return len(self.xs)


def precise_minimum(fun, x0, gtol=1e-6):
    """L-BFGS run to the limit of floating point (it stops when the line search
    can no longer make progress); checks that the gradient is tiny there."""
    res = lbfgs(fun, x0, gtol=0.0, epsilon=0.0)
    g = fun(res.x)[1]
    assert np.linalg.norm(g) / max(1.0, np.linalg.norm(res.x)) < gtol, res.reason
    return res


def run_recorded(minimiser, fun, x0, **kw):
    """Run with a Recorder; return (result, recorder, accepted points, infos)."""
    rec = Recorder(fun)
    infos = []
    user_callback = kw.pop("callback", None)

    def callback(info):
        infos.append(info)
        return user_callback(info) if user_callback else None

    res = minimiser(rec, x0, callback=callback, **kw)
    accepted = [np.asarray(x0, dtype=float)] + [np.array(i.x, copy=True) for i in infos]
    return res, rec, accepted, infos


def check_pr_plus_directions(accepted, infos, grad_at, diag_at=None, restart=None,
                             mixed_after=None):
    """Rebuild every search direction from the accepted points and steps and
    compare it with preconditioned Polak-Ribiere+ written out here; return the
    kind of each direction: 'cg', 'start' (first / periodic / mixed restart),
    'beta0' (PR+ clipped beta to 0) or 'nondescent' (restart)."""
    n = accepted[0].size
    restart = n if restart is None else restart
    kinds = []
    p_prev = z_prev = g_prev = None
    since = 0
    for k, info in enumerate(infos):
        g = grad_at(accepted[k])
        pre = diag_at is not None and (mixed_after is None or k < mixed_after)
        z = g / diag_at(accepted[k]) if pre else g
        kind = "start"
        forced = (p_prev is None or (restart > 0 and since >= restart)
                  or (mixed_after is not None and k == mixed_after))
        if not forced:
            beta = max(0.0, g @ (z - z_prev) / (g_prev @ z_prev))
            if beta == 0.0:
                kind = "beta0"
            else:
                candidate = beta * p_prev - z
                kind = "cg" if candidate @ g < 0 else "nondescent"
        expected = candidate if kind == "cg" else -z
        actual = (accepted[k + 1] - accepted[k]) / info.step
        np.testing.assert_allclose(
            actual, expected, rtol=0, atol=1e-6 * np.linalg.norm(expected),
            err_msg=f"iteration {k + 1} ({kind})",
        )
        since = since + 1 if kind == "cg" else 1
        p_prev, z_prev, g_prev = expected, z, g
        kinds.append(kind)
    return kinds


def test_cg_strong_wolfe_with_its_curvature_constant():
    fun, n = logistic_problem()

    def violations(curvature):
        res, rec, accepted, _ = run_recorded(
            cg, fun, np.zeros(n), gtol=1e-6, epsilon=0.0, curvature=curvature,
        )
        assert res.converged, res.reason
        loose = 0
        for k, (xa, xb) in enumerate(zip(accepted, accepted[1:])):
            fa, ga = rec.lookup(xa)
            fb, gb = rec.lookup(xb)
            s = xb - xa
            assert ga @ s < 0, f"iteration {k + 1}: not a descent step"
            assert fb <= fa + 1e-4 * (ga @ s), f"iteration {k + 1}: Armijo fails"
            assert abs(gb @ s) <= curvature * abs(ga @ s), f"iteration {k + 1}"
            loose += abs(gb @ s) > 0.1 * abs(ga @ s)
        return loose

    assert violations(0.1) == 0
    assert violations(0.9) > 0  # the constant really is passed to the search


def test_cg_directions_are_polak_ribiere_plus():
    # Rosenbrock in 2-D: periodic restarts every 2 iterations, clipped betas
    # and a PR+ direction that is not a descent direction all occur
    res, rec, accepted, infos = run_recorded(
        cg, rosenbrock, rosenbrock_start(2), gtol=1e-8, epsilon=0.0
    )
    assert res.converged, res.reason
    kinds = check_pr_plus_directions(accepted, infos, lambda x: rec.lookup(x)[1])
    assert kinds[0] == "start"
    assert {"cg", "nondescent"} <= set(kinds)
    # logistic regression: a negative PR beta is clipped to 0
    fun, n = logistic_problem()
    res, rec, accepted, infos = run_recorded(cg, fun, np.zeros(n), gtol=1e-6, epsilon=0.0)
    assert res.converged, res.reason
    kinds = check_pr_plus_directions(accepted, infos, lambda x: rec.lookup(x)[1])
    assert "beta0" in kinds and "cg" in kinds

    # restart=3 on a quadratic in 50-D: steepest descent every third iteration
    A, b, fun = quadratic_problem()
    res, rec, accepted, infos = run_recorded(
        cg, fun, np.zeros(50), gtol=1e-8, epsilon=0.0, restart=3
    )
    kinds = check_pr_plus_directions(accepted, infos, lambda x: rec.lookup(x)[1], restart=3)
    assert kinds[:7] == ["start", "cg", "cg", "start", "cg", "cg", "start"]
    # restart=0: never periodically
    res, rec, accepted, infos = run_recorded(
        cg, fun, np.zeros(50), gtol=1e-8, epsilon=0.0, restart=0
    )
    kinds = check_pr_plus_directions(accepted, infos, lambda x: rec.lookup(x)[1], restart=0)
    assert kinds.count("start") == 1 and len(kinds) > 10


def test_preconditioned_cg_directions():
    fun, n = logistic_problem()
    exact = logistic_hessian_diagonal()
    rec = Recorder(fun)

    def at_latest_point(x):  # always called where fun was called last
        assert np.array_equal(x, rec.xs[-1])
        return exact(x)

    diag = Diagonal(at_latest_point)
    res, rec, accepted, infos = run_recorded(
        cg, rec, np.zeros(n), precondition=diag, gtol=1e-6, epsilon=0.0
    )
    assert res.converged, res.reason
    # called once per iteration, at the accepted points
    assert diag.calls == res.n_iter
    for xd, xa in zip(diag.xs, accepted):
        np.testing.assert_array_equal(xd, xa)
    kinds = check_pr_plus_directions(
        accepted, infos, lambda x: rec.lookup(x)[1], diag_at=exact
    )
    assert "cg" in kinds


def test_cg_initial_trial_steps():
    # plain: the first trial has length 1 along -g; later trials follow
    # Nocedal & Wright (3.60): alpha0 = alpha_prev * g_prev'p_prev / g'p
    A, b, fun = quadratic_problem(n=20)
    x0 = np.full(20, 0.3)
    for precondition in [None, lambda x: np.diag(A)]:
        res, rec, accepted, infos = run_recorded(
            cg, fun, x0, precondition=precondition, max_iter=6, gtol=0.0, epsilon=0.0
        )
        g0 = rec.gs[0]
        if precondition is None:
            first = x0 - g0 / np.linalg.norm(g0)
        else:
            first = x0 - g0 / np.diag(A)  # step 1 along -M^-1 g
        np.testing.assert_allclose(rec.xs[1], first, rtol=0, atol=1e-15)
        for k in range(1, len(infos)):
            x_k, x_next = accepted[k], accepted[k + 1]
            p_k = (x_next - x_k) / infos[k].step
            p_prev = (x_k - accepted[k - 1]) / infos[k - 1].step
            g_prev, g_k = rec.lookup(accepted[k - 1])[1], rec.lookup(x_k)[1]
            alpha0 = infos[k - 1].step * (g_prev @ p_prev) / (g_k @ p_k)
            i = next(j for j, x in enumerate(rec.xs) if np.array_equal(x, x_k))
            trial = rec.xs[i + 1]  # the first evaluation after x_k was accepted
            np.testing.assert_allclose(trial, x_k + alpha0 * p_k, rtol=1e-10, atol=1e-12)


def test_preconditioning_speeds_up_an_ill_conditioned_quadratic():
    h, c, fun = diagonal_quadratic()
    x_star = c / h
    plain = cg(fun, np.zeros(h.size), gtol=1e-4, epsilon=0.0, max_iter=5000)
    assert plain.converged, plain.reason
    exact = cg(fun, np.zeros(h.size), precondition=lambda x: h, gtol=1e-4, epsilon=0.0)
    assert exact.converged, exact.reason
    # with the exact diagonal the problem is perfectly conditioned
    assert exact.n_iter <= 2
    assert plain.n_iter >= 50 * exact.n_iter
    assert plain.n_evals >= 50 * exact.n_evals
    # an approximate diagonal (off by up to a factor 2) still helps a lot
    rough = h * np.random.default_rng(1).uniform(0.5, 2.0, h.size)
    approx = cg(fun, np.zeros(h.size), precondition=lambda x: rough, gtol=1e-4,
                epsilon=0.0)
    assert approx.converged, approx.reason
    assert plain.n_iter >= 5 * approx.n_iter
    for res in (plain, exact, approx):
        np.testing.assert_allclose(res.x, x_star, rtol=0, atol=1e-4)


def test_mixed_cg_drops_the_preconditioner():
    h, c, fun = diagonal_quadratic()
    rough = h * np.random.default_rng(1).uniform(0.5, 2.0, h.size)
    diag = Diagonal(lambda x: rough)
    k = 4
    res, rec, accepted, infos = run_recorded(
        cg, fun, np.zeros(h.size), precondition=diag, mixed_after=k, gtol=1e-4,
        epsilon=0.0, max_iter=5000,
    )
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, c / h, rtol=0, atol=1e-4)
    assert res.n_iter > k
    assert diag.calls == k  # iterations 1..k only
    kinds = check_pr_plus_directions(
        accepted, infos, lambda x: rec.lookup(x)[1], diag_at=diag.fun, mixed_after=k
    )
    assert kinds[k] == "start" and "cg" in kinds[k + 1:]
    # step k+1 is plain steepest descent from x_k
    g_k = rec.lookup(accepted[k])[1]
    s = accepted[k + 1] - accepted[k]
    assert s @ -g_k == pytest.approx(np.linalg.norm(s) * np.linalg.norm(g_k), rel=1e-10)

    # mixed_after=0 is plain CG, and the preconditioner is never called
    diag = Diagonal(lambda x: rough)
    a = cg(fun, np.zeros(h.size), precondition=diag, mixed_after=0, max_iter=30)
    b = cg(fun, np.zeros(h.size), max_iter=30)
    assert diag.calls == 0
    np.testing.assert_array_equal(a.x, b.x)
    assert (a.n_evals, a.reason) == (b.n_evals, b.reason)


@pytest.mark.parametrize(
    "bad, what",
    [(0.0, "0.0"), (-1.0, "-1.0"), (np.nan, "nan"), (np.inf, "inf")],
)
def test_bad_preconditioner_raises(bad, what):
    h, c, fun = diagonal_quadratic(n=10)
    d = h.copy()
    d[3] = bad
    rec = Recorder(fun)
    with pytest.raises(ValueError, match=r"1 of 10 entries are not finite and > 0") as exc:
        cg(rec, np.zeros(10), precondition=lambda x: d)
    assert f"index 3, is {what}" in str(exc.value)
    assert "iteration 1" in str(exc.value)

    # good at first, bad later: raised at the iteration that would use it
    calls = []

    def turns_bad(x):
        calls.append(1)
        return d if len(calls) == 3 else h * (1.0 + 0.1 * len(calls))

    with pytest.raises(ValueError, match="for iteration 3"):
        cg(fun, np.zeros(10), precondition=turns_bad, gtol=0.0, epsilon=0.0)


def test_preconditioner_shape_and_argument_checks():
    h, c, fun = diagonal_quadratic(n=12)

    def fun2d(x):
        assert x.shape == (3, 4)
        f, g = fun(x.reshape(-1))
        return f, g.reshape(3, 4)

    seen = []

    def diag2d(x):
        seen.append(x.shape)
        return h.reshape(3, 4)

    res = cg(fun2d, np.zeros((3, 4)), precondition=diag2d, gtol=1e-8)
    assert res.converged, res.reason
    assert res.x.shape == (3, 4) and set(seen) == {(3, 4)}
    np.testing.assert_allclose(res.x.reshape(-1), c / h, atol=1e-7)

    with pytest.raises(ValueError, match="returned 11 elements, expected 12"):
        cg(fun, np.zeros(12), precondition=lambda x: h[:11])
    with pytest.raises(ValueError, match="mixed_after needs a preconditioner"):
        cg(fun, np.zeros(12), mixed_after=3)
    with pytest.raises(ValueError):
        cg(fun, np.zeros(12), precondition=lambda x: h, mixed_after=-1)
    with pytest.raises(ValueError):
        cg(fun, np.zeros(12), curvature=1.0)
    with pytest.raises(ValueError):
        cg(fun, np.zeros(12), restart=-2)
    with pytest.raises(ValueError):
        cg(fun, np.array([np.nan] * 12))
    with pytest.raises(ValueError):
        cg(fun, np.zeros(12), max_iter=-1)


@pytest.mark.parametrize("variant", ["plain", "preconditioned", "mixed"])
def test_cg_l2_logistic_regression_matches_lbfgs(variant):
    fun, n = logistic_problem()
    ref = precise_minimum(fun, np.zeros(n))
    kw = {}
    if variant != "plain":
        kw["precondition"] = logistic_hessian_diagonal()
    if variant == "mixed":
        kw["mixed_after"] = 3
    rec = Recorder(fun)
    res = cg(rec, np.zeros(n), gtol=1e-6, epsilon=0.0, **kw)
    assert res.converged, res.reason
    np.testing.assert_allclose(res.x, ref.x, atol=1e-5, rtol=0)
    assert res.f <= ref.f + 1e-9
    assert res.n_evals == rec.calls
    assert_no_repeated_calls(rec)


def test_cg_relative_improvement_rule():
    fun, n = logistic_problem()
    x0 = np.zeros(n)
    fs = [fun(x0)[0]]
    period, eps = 3, 1e-6
    res = cg(fun, x0, epsilon=eps, period=period, gtol=0.0,
             callback=lambda info: fs.append(info.f))
    assert res.converged
    assert res.reason.startswith("converged: relative improvement")
    assert f"over the last {period} iterations" in res.reason
    assert res.n_iter == len(fs) - 1
    k = res.n_iter
    assert k >= period
    assert (fs[k - period] - fs[k]) / abs(fs[k]) < eps
    for j in range(period, k):
        assert (fs[j - period] - fs[j]) / abs(fs[j]) >= eps
    res2 = cg(fun, x0, epsilon=0.0, period=period, gtol=0.0, max_iter=k + 2)
    assert res2.n_iter == k + 2


@pytest.mark.parametrize("precondition", [None, lambda x: np.full(x.shape, 50.0)])
def test_cg_max_iter_callback_and_eval_counts(precondition):
    rec = Recorder(rosenbrock)
    res = cg(rec, rosenbrock_start(10), precondition=precondition, max_iter=5,
             gtol=0.0, epsilon=0.0)
    assert res.n_iter == 5 and not res.converged
    assert "iteration limit (5)" in res.reason
    assert res.n_evals == rec.calls
    assert res.f == rec.lookup(res.x)[0]

    rec = Recorder(rosenbrock)
    infos = []

    def callback(info):
        infos.append(info)
        assert info.n_evals == rec.calls  # counted when the callback runs
        return info.iteration == 4

    res = cg(rec, rosenbrock_start(10), precondition=precondition, callback=callback,
             gtol=0.0, epsilon=0.0)
    assert not res.converged
    assert res.reason == "stopped by callback"
    assert res.n_iter == 4
    assert [i.iteration for i in infos] == [1, 2, 3, 4]
    assert res.n_evals == rec.calls
    assert np.array_equal(res.x, infos[-1].x)
    for info in infos:
        assert isinstance(info, IterationInfo)
        f, g = rec.lookup(info.x)
        assert info.f == f
        assert info.gnorm == pytest.approx(np.linalg.norm(g))
        assert info.xnorm == pytest.approx(np.linalg.norm(info.x))
        assert info.n_active == np.count_nonzero(info.x)
        assert info.step > 0


def test_cg_gradient_rule_at_start_and_line_search_failure():
    A, b, fun = quadratic_problem(n=10)
    rec = Recorder(fun)
    calls = []
    res = cg(rec, np.linalg.solve(A, b), gtol=1e-6,
             precondition=lambda x: calls.append(1) or np.ones(10))
    assert res.converged and res.n_iter == 0
    assert res.n_evals == rec.calls == 1
    assert not calls

    def bad(x):  # the gradient has the wrong sign
        return float(x @ x), -2.0 * x

    rec = Recorder(bad)
    x0 = np.array([1.0, -2.0, 0.5])
    res = cg(rec, x0, max_linesearch=7)
    assert not res.converged
    assert "line search failed" in res.reason and "7 trials" in res.reason
    np.testing.assert_array_equal(res.x, x0)
    assert res.f == bad(x0)[0]
    assert res.n_evals == rec.calls == 8


def test_cg_never_called_twice_in_a_row_with_tight_tolerances():
    for fun, x0, kw in [
        (rosenbrock, rosenbrock_start(10), {}),
        (quadratic_problem()[2], np.zeros(50), {}),
        (logistic_problem()[0], np.zeros(12), {"precondition": logistic_hessian_diagonal()}),
    ]:
        rec = Recorder(fun)
        res = cg(rec, x0, gtol=0.0, epsilon=0.0, max_iter=3000, **kw)
        # it stops where the objective no longer improves: the line search gives up, or (values
        # flat to rounding, steps chosen on slopes) ten iterations bring no improvement at all
        assert not res.converged or "relative improvement -" in res.reason, res.reason
        assert res.n_iter < 3000
        assert res.n_evals == rec.calls
        assert_no_repeated_calls(rec)
        assert_inputs_untouched(rec)
        # evaluations per iteration stay bounded (below the rounding of f, the line search
        # brackets on the slopes, which noise makes longer than a line search ever is in use)
        assert res.n_evals <= 6 * res.n_iter + 25


# ---------------------------------------------------------------- GIS


def maxent_problem(seed=5, n=200, m=8, K=3, rare_input=False):
    """Conditional maxent (multinomial logistic regression) with binary inputs.

    Parameter (j, k) is the feature "input j is on and the label is k"; the
    last input is a bias that is always on.  Returns a dict with exact
    expected and empirical counts, GIS's C (most inputs on in one example),
    the penalised negative log-likelihood and a (value, gradient) function.
    With ``rare_input`` input 0 is on only in examples of label 0, so the
    features (0, 1) and (0, 2) are never observed.
    """
    rng = np.random.default_rng(seed)
    Phi = (rng.random((n, m)) < 0.4).astype(float)
    Phi = np.hstack([Phi, np.ones((n, 1))])
    W = rng.standard_normal((m + 1, K))
    S = Phi @ W
    P = np.exp(S - S.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(K, p=p) for p in P])
    if rare_input:
        Phi[:, 0] = np.where(y == 0, Phi[:, 0], 0.0)
    Y = np.eye(K)[y]
    shape = (m + 1, K)
    emp = Phi.T @ Y

    def probs(w):
        S = Phi @ w.reshape(shape)
        P = np.exp(S - S.max(axis=1, keepdims=True))
        return P / P.sum(axis=1, keepdims=True)

    def expected(w):
        return Phi.T @ probs(w)

    def objective(w, c2):
        S = Phi @ w.reshape(shape)
        lse = np.logaddexp.reduce(S, axis=1)
        return float(lse.sum() - (S * Y).sum() + c2 * np.sum(w * w))

    def fun(w, c2):
        return objective(w, c2), expected(w) - emp + 2.0 * c2 * w

    return dict(emp=emp, C=float(Phi.sum(axis=1).max()), expected=expected,
                objective=objective, fun=fun, probs=probs, shape=shape)


def bisection_root(emp, E, x, C, c2):
    """Reference for the GIS step with a prior: bisection on the sign of
    emp - E exp(C d) - 2 c2 (x + d), compared in logs (no overflow)."""
    b = 2.0 * c2

    def positive(d):
        r = emp - b * (x + d)
        with np.errstate(divide="ignore"):
            return (r > 0) & (np.log(np.where(r > 0, r, 1.0)) > np.log(E) + C * d)

    hi = emp / b - x  # the left-hand side is < 0 here
    width = np.ones_like(x)
    while True:
        lo = hi - width
        p = positive(lo)
        if p.all():
            break
        width = np.where(p, width, 2.0 * width)
    while True:
        mid = 0.5 * (lo + hi)
        done = (mid == lo) | (mid == hi)
        if done.all():
            return 0.5 * (lo + hi), hi - lo
        p = positive(mid) & ~done
        lo = np.where(p, mid, lo)
        hi = np.where(~p & ~done, mid, hi)


def test_gis_step_solves_the_per_feature_equation():
    rng = np.random.default_rng(0)
    N = 3000
    emp = np.where(rng.random(N) < 0.3, 0.0, 10 ** rng.uniform(-3, 4, N))
    E = 10 ** rng.uniform(-30, 5, N)
    E[:10] = 0.0
    x = rng.standard_normal(N) * 10 ** rng.uniform(-3, 2.5, N)
    for C in [1.0, 37.0, 1500.0]:
        # no prior: the closed form, and 0 where emp == 0 or E == 0
        d = _gis_step(emp, E, x, C, 0.0)
        ok = (emp > 0) & (E > 0)
        np.testing.assert_allclose(d[ok], np.log(emp[ok] / E[ok]) / C, rtol=1e-13)
        assert np.all(d[~ok] == 0.0)
        for c2 in [1e-12, 1e-4, 0.5, 100.0]:
            d = _gis_step(emp, E, x, C, c2)
            ref, width = bisection_root(emp, E, x, C, c2)
            tol = 1e-9 * np.abs(ref) + 1e-14 * np.abs(x) + width
            worst = np.argmax(np.abs(d - ref) - tol)
            assert np.all(np.abs(d - ref) <= tol), (C, c2, emp[worst], E[worst], x[worst])
            # E == 0: the weight moves to emp / (2 c2) exactly
            np.testing.assert_allclose((x + d)[:10], emp[:10] / (2 * c2), rtol=1e-12,
                                       atol=1e-14 * np.abs(x[:10]).max())


def test_gis_step_never_decreases_the_bound(monkeypatch):
    # Cut Newton's method short: the iterates are then to the right of the
    # root, where the per-feature bound can be negative; those features must
    # not move (the objective could increase otherwise).
    import crftk.optimize.iterative_scaling as optimize

    rng = np.random.default_rng(3)
    N = 2000
    emp = np.where(rng.random(N) < 0.3, 0.0, 10 ** rng.uniform(-3, 4, N))
    E = 10 ** rng.uniform(-10, 5, N)
    x = rng.standard_normal(N) * 10 ** rng.uniform(-3, 2, N)
    C, c2 = 20.0, 1e-3

    def bound(d):
        return emp * d - E * np.expm1(C * d) / C - c2 * d * (2 * x + d)

    full = _gis_step(emp, E, x, C, c2)
    monkeypatch.setattr(optimize, "_GIS_NEWTON_MAX", 1)
    short = _gis_step(emp, E, x, C, c2)
    assert np.all(bound(full) >= 0.0)
    assert np.all(bound(short) >= 0.0)
    moved = short != 0.0
    assert 0 < np.count_nonzero(full != short) and moved.sum() > N // 4
    assert np.all(bound(short) <= bound(full) * (1 + 1e-12) + 1e-300)


def gis_trajectory(prob, c2, n_iter, **kw):
    infos = []
    res = gis(prob["expected"], prob["emp"], np.zeros(prob["shape"]), C=prob["C"],
              c2=c2, objective=lambda w: prob["objective"](w, c2), max_iter=n_iter,
              epsilon=0.0, gtol=0.0, callback=infos.append, **kw)
    return res, infos


@pytest.mark.parametrize("c2", [0.0, 0.3])
def test_gis_decreases_the_objective_and_approaches_the_optimum(c2):
    prob = maxent_problem()
    fun = lambda w: prob["fun"](w, c2)  # noqa: E731
    ref = precise_minimum(fun, np.zeros(prob["shape"]))
    res, infos = gis_trajectory(prob, c2, 300)
    assert res.n_iter == 300 and res.n_evals == 301
    f0 = prob["objective"](np.zeros(prob["shape"]), c2)
    fs = [f0] + [i.f for i in infos]
    for k, (a, b) in enumerate(zip(fs, fs[1:])):
        assert b <= a + 1e-12 * abs(a), f"objective increased at iteration {k + 1}"
    for i in infos:
        assert i.f == pytest.approx(prob["objective"](i.x, c2), rel=1e-13)
    gap = [f - ref.f for f in fs]
    assert gap[20] < 0.5 * gap[0]
    assert gap[100] < 0.5 * gap[20]
    assert gap[300] < 0.2 * gap[100]
    # slow, as Sha & Pereira found: far from converged after as many
    # evaluations as L-BFGS needed to converge
    assert gap[ref.n_evals] > 1e-3
    # the distance to the optimum shrinks too (in probabilities: with c2 == 0
    # the weights are determined only up to a constant per input)
    P_ref = prob["probs"](ref.x)
    dist = [np.abs(prob["probs"](infos[k - 1].x) - P_ref).max() for k in (20, 100, 300)]
    assert dist[0] > dist[1] > dist[2]
    if c2 > 0:
        err = [np.abs(infos[k - 1].x - ref.x).max() for k in (20, 100, 300)]
        assert err[0] > err[1] > err[2]


def test_gis_fixed_point_is_the_optimum():
    prob = maxent_problem()
    c2 = 0.3
    ref = precise_minimum(lambda w: prob["fun"](w, c2), np.zeros(prob["shape"]))
    calls = []

    def expected(w):
        calls.append(1)
        return prob["expected"](w)

    res = gis(expected, prob["emp"], ref.x, C=prob["C"], c2=c2, max_iter=1, gtol=0.0)
    assert res.n_iter == 1 and res.n_evals == len(calls) == 2
    np.testing.assert_allclose(res.x, ref.x, rtol=0, atol=1e-8)
    # and the gradient rule stops it before any iteration
    calls.clear()
    res = gis(expected, prob["emp"], ref.x, C=prob["C"], c2=c2, gtol=1e-6)
    assert res.converged and res.n_iter == 0 and res.n_evals == len(calls) == 1
    assert "gradient" in res.reason


def test_gis_unobserved_features():
    prob = maxent_problem(rare_input=True)
    unseen = prob["emp"] == 0.0
    assert unseen.sum() == 2 and unseen[0, 1] and unseen[0, 2]
    x0 = np.full(prob["shape"], 0.25)
    # c2 == 0: their optimum is at -infinity; GIS keeps them where they are
    res = gis(prob["expected"], prob["emp"], x0, C=prob["C"], max_iter=50,
              objective=lambda w: prob["objective"](w, 0.0))
    assert res.n_iter == 50
    np.testing.assert_array_equal(res.x[unseen], x0[unseen])
    assert np.all(res.x[~unseen] != x0[~unseen])
    # c2 > 0: they move down, towards a finite optimum
    c2 = 0.3
    res, infos = gis_trajectory(prob, c2, 50)
    assert np.all(res.x[unseen] < 0.0)
    fs = [i.f for i in infos]
    assert all(b <= a for a, b in zip(fs, fs[1:]))


def test_gis_fixed_mask_and_gradient_measure_without_objective():
    prob = maxent_problem()
    c2 = 0.3
    fixed = np.zeros(prob["shape"], dtype=bool)
    fixed[2, :] = True
    x0 = np.full(prob["shape"], -0.5)
    infos = []
    res = gis(prob["expected"], prob["emp"], x0, C=prob["C"], c2=c2, fixed=fixed,
              max_iter=30, epsilon=0.0, gtol=0.0, callback=infos.append)
    np.testing.assert_array_equal(res.x[fixed], x0[fixed])
    assert np.all(res.x[~fixed] != x0[~fixed])
    # without objective the reported value is the gradient norm (zero on
    # fixed parameters)
    for info in infos:
        grad = prob["expected"](info.x) - prob["emp"] + 2 * c2 * info.x
        grad[fixed] = 0.0
        assert info.f == info.gnorm == pytest.approx(np.linalg.norm(grad), rel=1e-12)
        assert info.n_active == np.count_nonzero(info.x)
        assert info.xnorm == pytest.approx(np.linalg.norm(info.x))
    assert res.f == infos[-1].f
    steps = [np.linalg.norm(b.x - a.x) for a, b in zip(infos, infos[1:])]
    assert [i.step for i in infos[1:]] == pytest.approx(steps, rel=1e-12)
    # relative-improvement rule on the gradient norm
    res = gis(prob["expected"], prob["emp"], x0, C=prob["C"], c2=c2, epsilon=0.05,
              period=5, gtol=0.0)
    assert res.converged and "relative improvement" in res.reason


def test_gis_stopping_rules_and_callback():
    prob = maxent_problem()
    calls = []

    def expected(w):
        calls.append(np.array(w, copy=True))
        return prob["expected"](w)

    def callback(info):
        assert info.n_evals == len(calls)
        return info.iteration == 4

    obj = lambda w: prob["objective"](w, 0.0)  # noqa: E731
    res = gis(expected, prob["emp"], np.zeros(prob["shape"]), C=prob["C"], objective=obj,
              callback=callback, gtol=0.0, epsilon=0.0)
    assert res.reason == "stopped by callback" and not res.converged
    assert res.n_iter == 4 and res.n_evals == len(calls) == 5
    assert res.f == obj(res.x)

    calls.clear()
    res = gis(expected, prob["emp"], np.zeros(prob["shape"]), C=prob["C"], objective=obj,
              max_iter=7, gtol=0.0, epsilon=0.0)
    assert res.n_iter == 7 and "iteration limit (7)" in res.reason
    assert res.n_evals == len(calls) == 8

    res = gis(expected, prob["emp"], np.zeros(prob["shape"]), C=prob["C"], objective=obj,
              epsilon=1e-3, period=4, gtol=0.0)
    assert res.converged and res.reason.startswith("converged: relative improvement")

    # a non-finite result after an update stops GIS at the previous point
    calls.clear()

    def fragile(w):  # fails on the 5th call
        return np.full(w.shape, np.nan) if len(calls) == 4 else expected(w)

    infos = []
    res = gis(fragile, prob["emp"], np.zeros(prob["shape"]), C=prob["C"], objective=obj,
              callback=infos.append)
    assert not res.converged
    assert "not finite after the update of iteration 4" in res.reason
    assert res.n_iter == len(infos) == 3 and res.n_evals == 5
    np.testing.assert_array_equal(res.x, infos[-1].x)
    assert res.f == infos[-1].f


def test_gis_invalid_inputs():
    prob = maxent_problem()
    e, emp, x0, C = prob["expected"], prob["emp"], np.zeros(prob["shape"]), prob["C"]
    with pytest.raises(ValueError, match="C must be"):
        gis(e, emp, x0, C=0.0)
    with pytest.raises(ValueError, match="c2 must be"):
        gis(e, emp, x0, C=C, c2=-1.0)
    with pytest.raises(ValueError, match="empirical counts"):
        gis(e, -emp, x0, C=C)
    with pytest.raises(ValueError, match="empirical has"):
        gis(e, emp[:-1], x0, C=C)
    with pytest.raises(ValueError, match="not finite"):
        gis(lambda w: np.full(w.shape, np.inf), emp, x0, C=C)
    with pytest.raises(ValueError, match="negative expected counts"):
        gis(lambda w: e(w) - 1000.0, emp, x0, C=C)
    with pytest.raises(ValueError, match="fixed"):
        gis(e, emp, x0, C=C, fixed=np.zeros(3, dtype=bool))


# ---------------------------------------------------------------- QuickProp


def reference_quickprop(fun, x0, first_step, growth, gpd_iter, n_iter):
    """Fahlman's rules written per weight with plain Python branches."""
    x = np.array(x0, dtype=float)
    f, g = fun(x)
    rate = first_step / np.max(np.abs(g))
    shrink = growth / (1.0 + growth)
    prev_dx = prev_s = None
    xs = []
    for it in range(n_iter):
        s = -g
        if prev_dx is None or it < gpd_iter:
            dx = rate * s
        else:
            dx = np.zeros_like(x)
            for i in range(x.size):
                if prev_dx[i] > 0:
                    step = rate * s[i] if s[i] > 0 else 0.0
                    step += growth * prev_dx[i] if s[i] > shrink * prev_s[i] else prev_dx[i] * s[i] / (prev_s[i] - s[i])
                elif prev_dx[i] < 0:
                    step = rate * s[i] if s[i] < 0 else 0.0
                    step += growth * prev_dx[i] if s[i] < shrink * prev_s[i] else prev_dx[i] * s[i] / (prev_s[i] - s[i])
                else:
                    step = rate * s[i]
                dx[i] = step
        x = x + dx
        f, g = fun(x)
        prev_dx, prev_s = dx, s
        xs.append(x)
    return xs


@pytest.mark.parametrize("gpd_iter", [0, 3])
def test_quickprop_steps_follow_fahlmans_rules(gpd_iter):
    fun, n = logistic_problem()
    x0 = np.full(n, 0.1)
    res, rec, accepted, infos = run_recorded(
        quickprop, fun, x0, first_step=0.05, gpd_iter=gpd_iter, max_iter=12, epsilon=0.0, gtol=0.0)
    expected = reference_quickprop(fun, x0, 0.05, 1.75, gpd_iter, 12)
    assert len(infos) == 12 and rec.calls == 13
    for info, x in zip(infos, expected):
        np.testing.assert_allclose(info.x, x, rtol=1e-12, atol=1e-14)
    # the first step moves the largest-gradient weight by exactly first_step
    assert np.max(np.abs(accepted[1] - x0)) == pytest.approx(0.05)
    assert_inputs_untouched(rec)


def test_quickprop_solves_a_separable_quadratic_exactly():
    h, c, fun = diagonal_quadratic(n=20, cond=100.0)
    res = quickprop(fun, np.zeros(20), first_step=0.01, max_iter=50, epsilon=0.0, gtol=1e-12)
    # the secant through two gradients of a parabola lands on its minimum
    np.testing.assert_allclose(res.x, c / h, rtol=1e-9)
    assert res.converged


def test_quickprop_minimises_logistic_regression():
    fun, n = logistic_problem()
    ref = precise_minimum(fun, np.zeros(n))
    res = quickprop(fun, np.zeros(n), first_step=0.01, max_iter=2000, epsilon=0.0, gtol=1e-7)
    assert res.converged
    assert res.f == pytest.approx(ref.f, rel=1e-10)


def test_quickprop_returns_the_best_point_of_a_rising_objective():
    # a step too large for a steep bowl: QuickProp's first steps overshoot
    fun = lambda x: (float(50.0 * x @ x), 100.0 * x)  # noqa: E731
    calls = Recorder(fun)
    res = quickprop(calls, np.ones(3), first_step=5.0, max_iter=4, epsilon=0.0, gtol=0.0)
    assert res.f == min(calls.fs)
    np.testing.assert_array_equal(res.x, calls.xs[int(np.argmin(calls.fs))])


def test_quickprop_relative_rule_uses_the_best_value():
    values = iter([10.0, 9.0, 12.0, 11.0, 13.0, 14.0, 15.0])
    fun = lambda x: (next(values), np.ones_like(x))  # noqa: E731
    res = quickprop(fun, np.zeros(2), first_step=0.1, max_iter=100, epsilon=1e-3, period=3)
    # the best value stayed 9 over the last 3 iterations
    assert res.converged and res.n_iter == 4 and res.f == 9.0
    assert "relative improvement" in res.reason


@pytest.mark.parametrize("kw", [dict(first_step=0.0), dict(first_step=np.inf), dict(growth=-1.0),
                                dict(gpd_iter=-1), dict(gpd_iter=1.5)])
def test_quickprop_invalid_options(kw):
    fun, n = logistic_problem()
    with pytest.raises(ValueError):
        quickprop(fun, np.zeros(n), **kw)
