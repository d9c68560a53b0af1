"""The feature-induction gain kernel (crftk._induce) against its definition.

gain(lam) = lam * n_y - sum_t log(1 + p_t(y) (e^lam - 1)) - lam^2 inv_var / 2 over
the error tokens t where the predicate fires; checked against a bounded scalar
maximiser, and against the exact log-likelihood change of a CRF without
transitions (where the mean-field approximation is exact).
"""

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from crftk._induce import label_gains, predicate_gains

I32, I64 = np.int32, np.int64


def softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def random_case(rng, E=30, L=3, C=10, scale=1.5):
    """Softmax marginals, gold labels, and C predicates on random token subsets."""
    logits = rng.normal(scale=scale, size=(E, L))
    gold = rng.integers(0, L, size=E).astype(I32)
    sets = [np.sort(rng.choice(E, size=rng.integers(1, E // 2), replace=False)) for _ in range(C)]
    ptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(I64)
    tok = np.concatenate(sets).astype(I32)
    return logits, softmax(logits), gold, ptr, tok


def formula(lam, p, n_y, inv_var):
    """The gain in plain NumPy.

    1 + p (e^lam - 1) is summed as (1 - p) + p e^lam: two positive terms, so
    no cancellation when p is near 1 and lam far below 0 (where
    log1p(p * expm1(lam)) is off by ~1e-9 and the comparisons below fail).
    """
    return lam * n_y - np.log((1.0 - p) + p * np.exp(lam)).sum() - 0.5 * inv_var * lam * lam


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("L", [2, 3, 5])
@pytest.mark.parametrize("inv_var", [0.1, 1.0])
def test_label_gains_match_brute_force(seed, L, inv_var):
    rng = np.random.default_rng(seed)
    _, m, gold, ptr, tok = random_case(rng, L=L)
    W = 60.0
    gain, lam = label_gains(m, gold, ptr, tok, inv_var=inv_var, max_weight=W, tol=1e-10)
    for c in range(len(ptr) - 1):
        t = tok[ptr[c]:ptr[c + 1]]
        for y in range(L):
            p, n_y = m[t, y], np.sum(gold[t] == y)
            res = minimize_scalar(lambda x: -formula(x, p, n_y, inv_var), bounds=(-W, W),
                                  method="bounded", options={"xatol": 1e-10})
            assert abs(res.x) < W - 1  # an interior optimum: the prior keeps it finite
            assert gain[c, y] == pytest.approx(-res.fun, abs=1e-9)
            assert lam[c, y] == pytest.approx(res.x, abs=1e-6)


@pytest.mark.parametrize("seed", [7, 8, 9, 10])
@pytest.mark.parametrize("inv_var", [0.0, 0.01])
def test_peaked_marginals_default_settings(seed, inv_var):
    # confident marginals put the optimum far from 0, where the curvature is
    # nearly flat and the Newton steps must be safeguarded; with a weak prior
    # the optimum can sit at the cap, so compare the gains only
    rng = np.random.default_rng(seed)
    L = 3
    _, m, gold, ptr, tok = random_case(rng, L=L, C=15, scale=8.0)
    gain, lam = label_gains(m, gold, ptr, tok, inv_var=inv_var)
    assert (np.abs(lam) <= 20.0).all()
    for c in range(len(ptr) - 1):
        t = tok[ptr[c]:ptr[c + 1]]
        for y in range(L):
            p, n_y = m[t, y], np.sum(gold[t] == y)
            assert gain[c, y] == pytest.approx(formula(lam[c, y], p, n_y, inv_var), abs=1e-10)
            res = minimize_scalar(lambda x: -formula(x, p, n_y, inv_var), bounds=(-20.0, 20.0),
                                  method="bounded", options={"xatol": 1e-10})
            assert gain[c, y] >= -res.fun - 1e-10


def test_newton_does_not_cycle():
    # two tokens with p = sigmoid(12.5), one of them gold: the optimum is at
    # lambda = -12.5, and clipped Newton steps from 0 go 0, -5, -10, -15, -10, ...
    p = 1.0 / (1.0 + np.exp(-12.5))
    m = np.array([[p, 1.0 - p], [p, 1.0 - p]])
    gold = np.array([0, 1], dtype=I32)
    gain, lam = label_gains(m, gold, np.array([0, 2], dtype=I64), np.array([0, 1], dtype=I32))
    np.testing.assert_allclose(lam[0], [-12.5, 12.5], atol=1e-9)
    np.testing.assert_allclose(gain[0], 12.5 - 2 * np.log(2 / (1 + np.exp(-12.5))), rtol=1e-12)


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("inv_var", [0.5, 1.0])
def test_gain_is_exact_without_transitions(seed, inv_var):
    rng = np.random.default_rng(seed)
    L = 4
    s, m, gold, ptr, tok = random_case(rng, E=40, L=L, C=8)
    gain, lam = label_gains(m, gold, ptr, tok, inv_var=inv_var, tol=1e-12)

    def objective(t, y, x):
        """Exact change of the gold log-likelihood of tokens t when x is added to label y."""
        s2 = s[t].copy()
        s2[:, y] += x
        ll = lambda z: np.sum(z[np.arange(len(t)), gold[t]] - np.log(np.exp(z).sum(axis=1)))
        return ll(s2) - ll(s[t]) - 0.5 * inv_var * x * x

    for c in range(len(ptr) - 1):
        t = tok[ptr[c]:ptr[c + 1]]
        for y in range(L):
            x = lam[c, y]
            best = objective(t, y, x)
            assert gain[c, y] == pytest.approx(best, abs=1e-10)
            assert objective(t, y, x - 1e-3) <= best + 1e-12
            assert objective(t, y, x + 1e-3) <= best + 1e-12


def test_predicate_gains_is_argmax_of_label_gains():
    rng = np.random.default_rng(5)
    _, m, gold, ptr, tok = random_case(rng, E=50, L=4, C=20)
    # an empty predicate, and one where labels 1 and 2 tie exactly at the top
    # (same p on every token, same n_y; p = 0 makes them the best labels)
    m = np.vstack([m, np.tile([0.5, 0.0, 0.0, 0.5], (4, 1))])
    gold = np.concatenate([gold, [1, 2, 0, 3]]).astype(I32)
    tok = np.concatenate([tok, [50, 51, 52, 53]]).astype(I32)
    ptr = np.concatenate([ptr, [ptr[-1], ptr[-1] + 4]]).astype(I64)
    C = len(ptr) - 1
    for inv_var in (0.0, 0.3):
        gain, lam = label_gains(m, gold, ptr, tok, inv_var=inv_var)
        bg, bl, bw = predicate_gains(m, gold, ptr, tok, inv_var=inv_var)
        assert bl.dtype == I32 and bg.shape == bl.shape == bw.shape == (C,)
        assert (bg[20], bl[20], bw[20]) == (0.0, -1, 0.0)
        assert gain[-1, 1] == gain[-1, 2] > max(gain[-1, 0], gain[-1, 3])
        assert bl[-1] == 1
        full = np.r_[0:20, C - 1]
        np.testing.assert_array_equal(bl[full], gain[full].argmax(axis=1))
        np.testing.assert_allclose(bg[full], gain[full].max(axis=1), rtol=1e-13, atol=0)
        np.testing.assert_allclose(bw[full], lam[full, bl[full]], rtol=1e-13, atol=0)


def test_degenerate_marginals_stay_finite():
    # L = 2, marginals exactly 0/1, no prior: the second derivative vanishes
    m = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    gold = np.array([0, 0, 0, 1], dtype=I32)
    # predicate 0: tokens 0, 1 (gold 0 at p=1): nothing to gain
    # predicate 1: token 2 (gold 0, p(0)=0): lambda -> +cap on label 0
    # predicate 2: token 3 (gold 1, p(1)=0): +cap on label 1, or -cap on label 0
    ptr = np.array([0, 2, 3, 4], dtype=I64)
    tok = np.array([0, 1, 2, 3], dtype=I32)
    gain, lam = label_gains(m, gold, ptr, tok, inv_var=0.0, max_weight=20.0)
    assert np.isfinite(gain).all() and np.isfinite(lam).all()
    np.testing.assert_array_equal(gain[0], [0.0, 0.0])
    np.testing.assert_array_equal(lam[0], [0.0, 0.0])
    # exact at the cap: log(1 + p (e^lam - 1)) is lam for p = 1 and 0 for p = 0
    np.testing.assert_array_equal(lam[1:], [[20.0, -20.0], [-20.0, 20.0]])
    np.testing.assert_allclose(gain[1:], 20.0, rtol=1e-15)
    bg, bl, bw = predicate_gains(m, gold, ptr, tok, inv_var=0.0, max_weight=20.0)
    np.testing.assert_array_equal(bl, [0, 0, 0])
    np.testing.assert_array_equal(bw, [0.0, 20.0, -20.0])
    assert np.isfinite(bg).all()
    # a prior makes the same optimum interior and the second derivative nonzero
    gain, lam = label_gains(m, gold, ptr, tok, inv_var=1.0)
    np.testing.assert_allclose(lam[1, 0], 1.0, rtol=1e-9)  # n_y - lam inv_var = 0
    np.testing.assert_allclose(gain[1, 0], 0.5, rtol=1e-9)


def test_large_weights_keep_precision():
    # p(y) near 1 on a non-gold token drives lambda far negative, where the
    # naive log1p(p * expm1(lam)) loses digits; the kernel must not.
    p = 1.0 - 1e-12
    m = np.array([[p, 1.0 - p]])
    gold = np.array([1], dtype=I32)
    gain, lam = label_gains(m, gold, np.array([0, 1], dtype=I64), np.array([0], dtype=I32),
                            inv_var=0.01, max_weight=100.0, max_newton=100, tol=1e-12)
    x = lam[0, 0]
    assert -60.0 < x < -20.0
    # 1 - p is exact here, and a sum of two positive terms loses nothing
    exact = -np.log((1.0 - p) + p * np.exp(x)) - 0.005 * x * x
    assert gain[0, 0] == pytest.approx(exact, rel=1e-13)
    q = p / (p + (1.0 - p) * np.exp(-x))  # the reweighted marginal balances the prior
    assert q == pytest.approx(0.01 * -x, rel=1e-9)


def test_threads_give_identical_results():
    rng = np.random.default_rng(6)
    _, m, gold, ptr, tok = random_case(rng, E=300, L=5, C=400)
    for f in (label_gains, predicate_gains):
        one = f(m, gold, ptr, tok, inv_var=0.2, n_threads=1)
        two = f(m, gold, ptr, tok, inv_var=0.2, n_threads=2)
        for a, b in zip(one, two):
            np.testing.assert_array_equal(a, b)


def test_no_predicates():
    m = np.full((3, 2), 0.5)
    gold = np.zeros(3, dtype=I32)
    bg, bl, bw = predicate_gains(m, gold, np.zeros(1, dtype=I64), np.zeros(0, dtype=I32))
    assert bg.shape == bl.shape == bw.shape == (0,)
    gain, lam = label_gains(m, gold, np.zeros(1, dtype=I64), np.zeros(0, dtype=I32))
    assert gain.shape == lam.shape == (0, 2)


@pytest.mark.parametrize("f", [label_gains, predicate_gains])
def test_bad_input_raises(f):
    m = np.full((4, 3), 1 / 3)
    gold = np.zeros(4, dtype=I32)
    ptr = np.array([0, 2, 4], dtype=I64)
    tok = np.array([0, 1, 2, 3], dtype=I32)
    f(m, gold, ptr, tok)  # the valid baseline
    with pytest.raises(ValueError, match="gold has 3 entries"):
        f(m, gold[:3], ptr, tok)
    with pytest.raises(ValueError, match="token index out of range"):
        f(m, gold, ptr, np.array([0, 1, 2, 4], dtype=I32))
    with pytest.raises(ValueError, match="token index out of range"):
        f(m, gold, ptr, np.array([0, 1, -1, 3], dtype=I32))
    with pytest.raises(ValueError, match="non-decreasing"):
        f(m, gold, np.array([0, 3, 2, 4], dtype=I64), tok)
    with pytest.raises(ValueError, match="ptr must start at 0"):
        f(m, gold, np.array([0, 2, 3], dtype=I64), tok)
    with pytest.raises(ValueError, match="dimensions"):
        f(m[:, 0].copy(), gold, ptr, tok)
    with pytest.raises(ValueError, match="gold label out of range"):
        f(m, np.array([0, 3, 0, 0], dtype=I32), ptr, tok)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        f(np.full((4, 3), 1.5), gold, ptr, tok)
    with pytest.raises(ValueError, match="dtype mismatch"):
        f(m, gold.astype(np.int64), ptr, tok)
    with pytest.raises(ValueError, match="inv_var"):
        f(m, gold, ptr, tok, inv_var=-1.0)
    with pytest.raises(ValueError, match="max_weight"):
        f(m, gold, ptr, tok, max_weight=np.inf)


def test_conjunction_gains_build_the_token_sets_of_the_conjunctions():
    """Over all tokens: each candidate fires where all its tests do; its gains are
    predicate_gains on that token set, found by brute force."""
    from crftk._induce import conjunction_gains
    rng = np.random.default_rng(11)
    N, L, n_lines, vals = 300, 4, 3, 4
    m = softmax(rng.normal(scale=1.5, size=(N, L)))
    gold = rng.integers(0, L, size=N).astype(I32)
    # line l holds test l * vals + v on a token, or none (-1) one time in ten
    test_at = (np.arange(n_lines) * vals + rng.integers(0, vals, size=(N, n_lines))).astype(I32)
    test_at[rng.random((N, n_lines)) < 0.1] = -1
    line_of = np.repeat(np.arange(n_lines), vals).astype(I32)
    X = n_lines * vals
    post = [np.flatnonzero((test_at == x).any(axis=1)) for x in range(X)]
    post_ptr = np.concatenate([[0], np.cumsum([len(p) for p in post])]).astype(I64)
    post_tok = np.concatenate(post).astype(I32)
    cands = [(0,), (5,), (1, 6), (2, 7, 9), (4, 11), (0, 1)]   # (0, 1): one line twice, never fires
    c_ptr = np.concatenate([[0], np.cumsum([len(c) for c in cands])]).astype(I64)
    c_test = np.concatenate(cands).astype(I32)
    sets = [np.flatnonzero(np.all([(test_at == x).any(axis=1) for x in c], axis=0)) for c in cands]
    ptr = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(I64)
    want = predicate_gains(m, gold, ptr, np.concatenate(sets).astype(I32), inv_var=0.5)
    for threads in (1, 2):
        got = conjunction_gains(m, gold, test_at, line_of, post_ptr, post_tok, c_ptr, c_test,
                                inv_var=0.5, n_threads=threads)
        np.testing.assert_array_equal(got[3], [len(s) for s in sets])
        assert got[3][-1] == 0 and got[3][:-1].min() > 0
        for g, w in zip(got[:3], want):
            np.testing.assert_array_equal(g, w)
    with pytest.raises(ValueError, match="test_at"):
        conjunction_gains(m, gold, test_at[1:], line_of, post_ptr, post_tok, c_ptr, c_test)
    with pytest.raises(ValueError, match="candidate test"):
        conjunction_gains(m, gold, test_at, line_of, post_ptr, post_tok, c_ptr, c_test + X)
