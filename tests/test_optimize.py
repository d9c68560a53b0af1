"""Tests for crftk.optimize (L-BFGS and OWL-QN)."""

import numpy as np
import pytest
import scipy.optimize

from crftk.optimize import IterationInfo, OptimizeResult, lbfgs


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


def test_convex_quadratic_matches_linear_solve():
    A, b, fun = quadratic_problem()
    rec = Recorder(fun)
    res = lbfgs(rec, np.zeros(50), gtol=1e-7, epsilon=0.0)
    assert isinstance(res, OptimizeResult)
    assert res.converged, res.reason
    assert "gradient" in res.reason
    np.testing.assert_allclose(res.x, np.linalg.solve(A, b), atol=1e-6, rtol=0)
    assert res.f == pytest.approx(fun(res.x)[0], rel=1e-14)
    assert res.n_evals == rec.calls
    assert_no_repeated_calls(rec)
    assert_inputs_untouched(rec)


@pytest.mark.parametrize("n", [2, 10])
def test_rosenbrock_reaches_minimum(n):
    rec = Recorder(rosenbrock)
    res = lbfgs(rec, rosenbrock_start(n), gtol=1e-10, epsilon=0.0, max_iter=2000)
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
    crossed = 0
    for xa, xb in zip(accepted, accepted[1:]):
        pg = reference_pseudo_gradient(xa, rec.lookup(xa)[1], lam_vec)
        # every coordinate moves against the pseudo-gradient (or not at all)
        assert np.all((xb - xa) * pg <= 0.0)
        # penalised coordinates never change sign within one step
        assert np.all(xa[mask] * xb[mask] >= 0.0)
        crossed += np.count_nonzero((xa != 0) & (xb == 0))
        # the objective decreases at every step
        Fa = fun(xa)[0] + lam * np.abs(xa[mask]).sum()
        Fb = fun(xb)[0] + lam * np.abs(xb[mask]).sum()
        assert Fb < Fa
    assert crossed > 0  # the orthant projection was exercised


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
