"""L-BFGS with its correction pairs stored in float32 (--history-precision float32)."""

import numpy as np
import pytest

from crftk.optimize import lbfgs
from crftk.optimize.common import axpy, dot64
from crftk.optimize.quasi_newton import _History


def rosenbrock(x):
    a, b = x[:-1], x[1:]
    f = float(np.sum(100.0 * (b - a * a) ** 2 + (1.0 - a) ** 2))
    g = np.zeros_like(x)
    g[:-1] = -400.0 * a * (b - a * a) - 2.0 * (1.0 - a)
    g[1:] += 200.0 * (b - a * a)
    return f, g


def test_float32_history_reaches_the_same_minimum():
    x0 = np.full(200, -1.2)
    r64 = lbfgs(rosenbrock, x0, gtol=1e-8, epsilon=0.0, max_iter=5000)
    r32 = lbfgs(rosenbrock, x0, gtol=1e-8, epsilon=0.0, max_iter=5000, history_dtype="float32")
    assert r64.converged and r32.converged
    np.testing.assert_allclose(r32.x, np.ones_like(x0), atol=1e-6)
    np.testing.assert_allclose(r64.x, r32.x, atol=1e-6)
    assert r32.x.dtype == np.float64


def test_pairs_are_stored_in_float32_and_their_products_in_float64():
    rng = np.random.default_rng(0)
    h = _History(3, "float32")
    s, y = rng.standard_normal(1000), rng.standard_normal(1000)
    y += 3 * s                                    # positive curvature
    assert h.push(s, y)
    assert h.s[0].dtype == np.float32 and h.y[0].dtype == np.float32
    s32, y32 = s.astype(np.float32), y.astype(np.float32)
    assert h.rho[0] == pytest.approx(1.0 / float(s32.astype(np.float64) @ y32.astype(np.float64)), rel=1e-15)
    d = h.direction(np.ones(1000))
    assert d.dtype == np.float64


def test_mixed_precision_blocks_match_float64():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(200_001).astype(np.float32)      # more than one block, a ragged last one
    y = rng.standard_normal(200_001)
    assert dot64(x, y) == pytest.approx(float(x.astype(np.float64) @ y), rel=1e-12)
    expected = y + 0.5 * x.astype(np.float64)
    axpy(0.5, x, y)
    np.testing.assert_array_equal(y, expected)


def test_float64_history_is_unchanged_by_default():
    x0 = np.full(50, -1.2)
    a = lbfgs(rosenbrock, x0, max_iter=30)
    b = lbfgs(rosenbrock, x0, max_iter=30, history_dtype="float64")
    np.testing.assert_array_equal(a.x, b.x)
