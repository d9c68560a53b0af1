"""L-BFGS's memory savings leave every number as it was: pairs made a block at a time, points
held without copies, the likelihood's pass taken without a second copy."""

import numpy as np
import pytest

from crftk.objectives.penalty import Penalty
from crftk.optimize import lbfgs
from crftk.optimize.common import BLOCK, Objective, axpy, dot64, is_finite, kept, seal
from crftk.optimize.quasi_newton import _History


def _pairs(rng, n, count):
    """count steps (x_new, x, g_new, g) with positive curvature."""
    out = []
    for _ in range(count):
        x, g = rng.standard_normal(n), rng.standard_normal(n)
        s = rng.standard_normal(n)
        out.append((x + s, x, g + 3.0 * s + 0.1 * rng.standard_normal(n), g))
    return out


@pytest.mark.parametrize("n", [1000, 2 * BLOCK + 17])          # one block; several, a ragged last one
def test_push_step_is_push_of_the_differences_bit_for_bit(n):
    rng = np.random.default_rng(n)
    a, b = _History(3, "float32"), _History(3, "float32")
    for x_new, x, g_new, g in _pairs(rng, n, 5):                  # past m: the oldest pairs displaced
        assert a.push(x_new - x, g_new - g) == b.push_step(x_new, x, g_new, g)
        assert len(a) == len(b)
        for p, q in zip([*a.s, *a.y], [*b.s, *b.y]):
            assert p.dtype == q.dtype == np.float32
            np.testing.assert_array_equal(p, q)
        assert list(a.rho) == list(b.rho) and a.gamma == b.gamma
    direction = rng.standard_normal(n)
    np.testing.assert_array_equal(a.direction(direction), b.direction(direction))


def test_a_refused_pair_leaves_a_full_history_untouched():
    rng = np.random.default_rng(3)
    h = _History(2, "float32")
    for step in _pairs(rng, 500, 2):
        assert h.push_step(*step)
    before = [p.copy() for p in (*h.s, *h.y)], list(h.rho), h.gamma
    x, g = rng.standard_normal(500), rng.standard_normal(500)
    assert not h.push_step(x + 1.0, x, g - 1.0, g)                # s'y < 0: refused
    assert [p.tolist() for p in (*h.s, *h.y)] == [p.tolist() for p in before[0]]
    assert list(h.rho) == before[1] and h.gamma == before[2]


def test_float64_pairs_are_the_differences():
    rng = np.random.default_rng(4)
    h = _History(2)
    x_new, x, g_new, g = _pairs(rng, 300, 1)[0]
    assert h.push_step(x_new, x, g_new, g)
    np.testing.assert_array_equal(h.s[0], x_new - x)
    np.testing.assert_array_equal(h.y[0], g_new - g)


def test_kept_holds_sealed_points_and_copies_the_rest():
    x = seal(np.arange(5.0))
    assert kept(x) is x
    view = x.reshape(5, 1)
    assert kept(view) is view                                   # a read-only view of a sealed point
    w = np.arange(5.0)
    k = kept(w)
    assert k is not w and np.array_equal(k, w)
    ro_view = w[:]
    ro_view.flags.writeable = False                             # its base can still change
    assert kept(ro_view) is not ro_view


def test_lbfgs_points_are_sealed_and_its_result_is_the_callers():
    seen = []

    def quadratic(x):
        return float(x @ x), 2.0 * x

    res = lbfgs(quadratic, np.full(10, 3.0), max_iter=5, epsilon=0.0, gtol=0.0,
                callback=lambda info: seen.append(info.x) and False)
    assert seen and all(not x.flags.writeable for x in seen)
    assert all(kept(x) is x for x in seen)
    res.x[0] = 1.0                                              # an ordinary array again


class _Fresh:
    fresh_gradients = True

    def __init__(self):
        self.last = None

    def __call__(self, x):
        self.last = np.asarray(2.0 * x)
        return float(x @ x), self.last


def test_objective_copies_a_gradient_unless_it_is_fresh():
    fresh = _Fresh()
    f, g = Objective(fresh, (4,))(np.ones(4))
    assert np.shares_memory(g, fresh.last)
    reused = np.zeros(4)

    def reusing(x):
        reused[:] = 2.0 * x
        return float(x @ x), reused

    f, g = Objective(reusing, (4,))(np.ones(4))
    assert not np.shares_memory(g, reused) and np.array_equal(g, reused)


def test_penalty_by_blocks_is_the_whole_vector_expression():
    rng = np.random.default_rng(5)
    w = rng.standard_normal(3 * BLOCK + 5)
    grad = rng.standard_normal(w.size)
    expected = grad + (2.0 * 0.7) * w
    value, out = Penalty(0.7)(w, 1.5, grad)
    assert out is grad
    np.testing.assert_array_equal(out, expected)
    assert value == 1.5 + 0.7 * dot64(w, w)


def test_block_products_are_the_whole_array_formulas_bit_for_bit():
    # dot64 of a whole vector is its blocks' dot64 added in turn (what push_step sums a block at
    # a time), and the mixed axpy is the per-block expression (a new float64 copy of each block)
    rng = np.random.default_rng(6)
    x = rng.standard_normal(3 * BLOCK + 11).astype(np.float32)
    y = rng.standard_normal(x.size)
    expected = 0
    for i in range(0, x.size, BLOCK):
        expected += dot64(x[i:i + BLOCK].astype(np.float64), y[i:i + BLOCK])
    assert dot64(x, y) == expected and dot64(y, x) == expected
    z = y.copy()
    for i in range(0, x.size, BLOCK):
        z[i:i + BLOCK] += -0.37 * x[i:i + BLOCK].astype(np.float64)
    axpy(-0.37, x, y)
    np.testing.assert_array_equal(y, z)


@pytest.mark.parametrize("where", [0, BLOCK - 1, BLOCK, 2 * BLOCK + 16])   # first, last of a block, the ragged end
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("layout", ["float64", "column", "strided", "float32"])   # compiled loop, then numpy's
def test_is_finite_finds_a_non_finite_entry_anywhere(where, bad, layout):
    base = np.ones(2 * (2 * BLOCK + 17))
    views = {"float64": lambda b: b[:2 * BLOCK + 17], "column": lambda b: b[:2 * BLOCK + 17].reshape(-1, 1),
             "strided": lambda b: b[::2], "float32": lambda b: b[:2 * BLOCK + 17].astype(np.float32)}
    assert is_finite(0.0, views[layout](base))
    base[2 * where if layout == "strided" else where] = bad
    assert not is_finite(0.0, views[layout](base))


def test_is_finite_tests_the_value():
    assert not is_finite(np.nan, np.ones(3)) and not is_finite(np.inf, np.ones(3))
    assert is_finite(0.0, np.zeros(0))


def test_mixed_precision_kernels_are_numpys_casts_bit_for_bit():
    # the compiled one-pass kernels against the numpy operations they replace, on values that
    # round, overflow float32 (inf), fall below its normal range, and NaN
    from crftk._vector import axpy, rounded_difference, single_difference
    rng = np.random.default_rng(7)
    n = 1001
    a = rng.standard_normal(n) * np.logspace(-45, 40, n)
    b = rng.standard_normal(n)
    a[:3] = [np.nan, np.inf, -3.5e38]
    b[:3] = [0.0, 1.0, 3.5e38]
    with np.errstate(over="ignore", invalid="ignore"):
        diff32 = (a - b).astype(np.float32)
        out32 = np.empty(n, np.float32)
        single_difference(a, b, out32)
        np.testing.assert_array_equal(out32.view(np.uint32), diff32.view(np.uint32))
        out64 = np.empty(n)
        rounded_difference(a, b, out64)
        np.testing.assert_array_equal(out64.view(np.uint64), diff32.astype(np.float64).view(np.uint64))
        y = rng.standard_normal(n)
        expected = y + diff32.astype(np.float64) * 0.3
        axpy(0.3, diff32, y)
        np.testing.assert_array_equal(y.view(np.uint64), expected.view(np.uint64))
    with pytest.raises(ValueError):
        single_difference(a, b[:-1], out32)


def test_same_point_and_is_finite_are_numpys_answers():
    from crftk.optimize.common import is_finite, same_point
    rng = np.random.default_rng(8)
    x = rng.standard_normal(50)
    cases = [x.copy(), x[:-1].copy(), x.reshape(5, 10).copy(), x.astype(np.float32), None]
    for i in (0, 25, 49):
        for v in (np.nan, -x[i] if x[i] else 1.0, np.nextafter(x[i], np.inf)):
            y = x.copy()
            y[i] = v
            cases.append(y)
    z, nz = np.zeros(4), np.zeros(4)
    nz[2] = -0.0
    nan = np.full(3, np.nan)
    for a, b in [(x, c) for c in cases] + [(z, nz), (nan, nan.copy()), (x.reshape(5, 10), cases[2])]:
        assert same_point(a, b) == bool(np.array_equal(a, b))
    for g in cases[:4] + cases[5:]:
        assert is_finite(1.0, g) == bool(np.isfinite(g).all())
        assert not is_finite(np.inf, g)


@pytest.mark.parametrize("n", [2, 3, 1001, 2 * BLOCK + 17, 2 * BLOCK + 18])   # odd and even, several blocks
def test_a_parked_gradient_reads_back_and_makes_the_same_pair(n):
    # park() copies g into the bytes of the oldest pair; push_step then writes y over it and s
    # last: the pairs, products and directions are those of the unparked g, bit for bit
    rng = np.random.default_rng(n)
    a, b = _History(2, "float32"), _History(2, "float32")
    for step in _pairs(rng, n, 2):
        assert a.push_step(*step) and b.push_step(*step)
    for x_new, x, g_new, g in _pairs(rng, n, 3):
        parked = b.park(g)
        assert np.shares_memory(parked._low, b.y[0]) and np.shares_memory(parked._high, b.s[0])
        out = np.empty(n)
        np.testing.assert_array_equal(parked.block(0, n, out), g)
        for i, k in [(0, 1), (n // 2 - 1, 2), (n - 1, 1), (n // 3, n - n // 3)]:   # across the halves, the tail
            np.testing.assert_array_equal(parked.block(i, k, out), g[i:i + k])
        assert a.push_step(x_new, x, g_new, g) and b.push_step(x_new, x, g_new, parked)
        for p, q in zip([*a.s, *a.y], [*b.s, *b.y]):
            np.testing.assert_array_equal(p.view(np.uint32), q.view(np.uint32))
        assert list(a.rho) == list(b.rho) and a.gamma == b.gamma
        q = rng.standard_normal(n)
        np.testing.assert_array_equal(a.direction(q), b.direction(q))


def test_only_a_full_float32_history_parks_and_a_refused_pair_drops_the_oldest():
    rng = np.random.default_rng(11)
    g = rng.standard_normal(500)
    h = _History(2, "float32")
    assert h.park(g) is g                                         # empty: no pair to lend its bytes
    assert _History(2).park(g) is g                               # float64 pairs: not parked
    for step in _pairs(rng, 500, 2):
        assert h.push_step(*step)
    newest = h.s[1].copy(), h.y[1].copy()
    x = rng.standard_normal(500)
    assert not h.push_step(x + 1.0, x, g - 1.0, h.park(g))       # s'y < 0: refused
    assert len(h) == 1                                            # the oldest pair held g
    np.testing.assert_array_equal(h.s[0], newest[0])
    np.testing.assert_array_equal(h.y[0], newest[1])


def test_lbfgs_with_a_parked_gradient_drops_it_during_the_search(monkeypatch):
    # the line search runs with the previous gradient held only in the pair it will displace:
    # numpy's allocations (traced by tracemalloc) at each evaluation are one vector fewer than
    # with parking turned off, and the iterates are the same bits
    import tracemalloc
    n = 3 * BLOCK + 7
    hess = np.linspace(1.0, 50.0, n)

    def run():
        traced = []

        def quadratic(x):
            traced.append(tracemalloc.get_traced_memory()[0])
            return float(0.5 * x @ (hess * x)), hess * x

        tracemalloc.start()
        try:
            res = lbfgs(quadratic, np.ones(n), m=2, max_iter=12, epsilon=0.0, gtol=0.0,
                        history_dtype="float32")
        finally:
            tracemalloc.stop()
        return res, traced

    parked, with_park = run()
    monkeypatch.setattr(_History, "park", lambda self, g: g)
    plain, without = run()
    assert parked.n_iter == plain.n_iter == 12 and len(with_park) == len(without)
    np.testing.assert_array_equal(parked.x, plain.x)
    saved = [b - a for a, b in zip(with_park, without)]
    assert all(abs(v) < 0.1 * 8 * n for v in saved[:4])          # the history fills in 3 iterations
    assert all(0.9 * 8 * n < v < 1.1 * 8 * n for v in saved[-6:])


@pytest.mark.parametrize("n", [2 * BLOCK + 1, 2 * BLOCK + 18])      # y at a 4-byte offset in the direction's bytes
def test_pairs_in_the_last_directions_bytes_are_the_plain_pairs(n):
    # while the history fills, a new pair takes the bytes of the last direction, and push_step's
    # blocks are read in them: the pairs, parked gradients and directions are those of a history
    # that allocates every pair, bit for bit
    rng = np.random.default_rng(n)
    a, b = _History(2, "float32"), _History(2, "float32")
    q = rng.standard_normal(n)
    for x_new, x, g_new, g in _pairs(rng, n, 4):
        da, db = a.direction(q).copy(), b.direction(q)
        np.testing.assert_array_equal(da, db)
        a._direction = None                                        # a: a fresh pair every time
        assert a.push_step(x_new, x, g_new, g) == b.push_step(x_new, x, g_new, b.park(g))
        for p, r in zip([*a.s, *a.y], [*b.s, *b.y]):
            np.testing.assert_array_equal(p.view(np.uint32), r.view(np.uint32))
    assert all(s.base is not None and s.base is y.base for s, y in zip(b.s, b.y))   # in directions' bytes
    assert all(s.base is None for s in a.s)


def test_owlqn_does_not_park_and_keeps_a_refused_pairs_history(monkeypatch):
    # OWL-QN's backtracking search has no curvature condition, so on a non-convex objective pairs
    # are refused; they must leave the history as it was: the iterates are those of a run with
    # parking turned off (a parked gradient would have cost the oldest pair)
    def wavy(x):
        return float(np.sum(np.sin(3.0 * x) + 0.05 * x * x)), 3.0 * np.cos(3.0 * x) + 0.1 * x

    refused = []
    push = _History.push_step

    def counting(self, *args):
        kept = push(self, *args)
        refused.append(not kept)
        return kept

    monkeypatch.setattr(_History, "push_step", counting)
    x0 = np.random.default_rng(23).standard_normal(4)
    a = lbfgs(wavy, x0, m=2, c1=0.05, history_dtype="float32", max_iter=60, epsilon=0.0, gtol=0.0)
    assert any(refused)                                           # the case this test is about
    monkeypatch.setattr(_History, "park", lambda self, g: g)
    b = lbfgs(wavy, x0, m=2, c1=0.05, history_dtype="float32", max_iter=60, epsilon=0.0, gtol=0.0)
    assert a.n_iter == b.n_iter
    np.testing.assert_array_equal(a.x, b.x)
