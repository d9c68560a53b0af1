"""Exact inference on products of chains (crftk._product) against enumeration of the cross
product and against the plain chain kernel on the explicit cross-product lattice."""

import itertools

import numpy as np
import pytest

from crftk import _chain, _product
from product_reference import assert_nbest_is_the_merge


def random_product(seed, lengths, sizes, shared):
    rng = np.random.default_rng(seed)
    sp = np.concatenate([[0], np.cumsum(lengths)])
    N = int(sp[-1])
    S = int(np.prod(sizes))
    state = rng.normal(scale=1.2, size=(N, S))
    trans = [rng.normal(scale=1.2, size=(n, n) if shared else (N, n, n)) for n in sizes]
    return sp, state, trans


def joint_transition(trans, sizes, n=None):
    """The explicit S x S log transition matrix: sum of the chains' transitions."""
    S = int(np.prod(sizes))
    M = np.zeros((S, S))
    for a in range(S):
        ya = np.unravel_index(a, sizes)
        for b in range(S):
            yb = np.unravel_index(b, sizes)
            M[a, b] = sum((m if m.ndim == 2 else m[n])[ya[c], yb[c]] for c, m in enumerate(trans))
    return M


def enumerate_product(sp, state, trans, sizes, s):
    """Every joint labeling of product chain s with its score."""
    t0, T = sp[s], sp[s + 1] - sp[s]
    out = []
    for y in itertools.product(range(state.shape[1]), repeat=T):
        labels = [np.unravel_index(v, sizes) for v in y]
        score = sum(state[t0 + t, y[t]] for t in range(T))
        for t in range(1, T):
            for c, m in enumerate(trans):
                score += (m if m.ndim == 2 else m[t0 + t])[labels[t - 1][c], labels[t][c]]
        out.append((score, y))
    return out


# (66, 2): a chain of more labels than product.pxd gathers a column of (its plain loop)
CASES = [(0, [1, 3, 2], (2, 3), True), (1, [3, 2], (3, 2), False), (2, [2, 3], (2, 2, 2), False),
         (3, [2, 1], (66, 2), False)]


@pytest.mark.parametrize("seed,lengths,sizes,shared", CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_product_forward_backward_equals_enumeration(seed, lengths, sizes, shared, threads):
    sp, state, trans = random_product(seed, lengths, sizes, shared)
    logz, node, edges = _product.forward_backward(sizes, sp, state, trans, threads)
    for s in range(len(lengths)):
        t0, T = sp[s], lengths[s]
        all_y = enumerate_product(sp, state, trans, sizes, s)
        scores = np.array([a for a, _ in all_y])
        z = np.logaddexp.reduce(scores)
        assert logz[s] == pytest.approx(z, abs=1e-10)
        p = np.exp(scores - z)
        want = np.zeros((T, state.shape[1]))
        want_edges = [np.zeros((T, n, n)) for n in sizes]
        for prob, (_, y) in zip(p, all_y):
            for t in range(T):
                want[t, y[t]] += prob
                if t:
                    prev, cur = np.unravel_index(y[t - 1], sizes), np.unravel_index(y[t], sizes)
                    for c in range(len(sizes)):
                        want_edges[c][t, prev[c], cur[c]] += prob
        np.testing.assert_allclose(node[t0:t0 + T], want, atol=1e-10)
        for c in range(len(sizes)):
            np.testing.assert_allclose(edges[c][t0:t0 + T], want_edges[c], atol=1e-10)


@pytest.mark.parametrize("seed,lengths,sizes,shared", CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_product_viterbi_equals_the_explicit_cross_product_lattice(seed, lengths, sizes, shared, threads):
    sp, state, trans = random_product(seed, lengths, sizes, shared)
    best, score = _product.viterbi(sizes, sp, state, trans, threads)
    N = state.shape[0]
    explicit = np.stack([joint_transition(trans, sizes, n) for n in range(N)])
    want, want_score = _chain.viterbi(sp, state, explicit)
    np.testing.assert_allclose(score, want_score, atol=1e-10)
    for s in range(len(lengths)):
        ranked = sorted(enumerate_product(sp, state, trans, sizes, s), key=lambda a: -a[0])
        assert score[s] == pytest.approx(ranked[0][0], abs=1e-10)
        t0, T = sp[s], lengths[s]
        y = tuple(best[t0:t0 + T])
        assert dict((b, a) for a, b in ranked)[y] == pytest.approx(score[s], abs=1e-10)
    logz, _, _ = _chain.forward_backward(sp, state, explicit)
    np.testing.assert_allclose(_product.forward_backward(sizes, sp, state, trans)[0], logz, atol=1e-10)


def test_one_chain_is_the_chain_kernel():
    sp, state, trans = random_product(5, [4, 6, 1], (5,), False)
    a = _product.forward_backward((5,), sp, state, trans)
    b = _chain.forward_backward(sp, state, trans[0])
    np.testing.assert_allclose(a[0], b[0], rtol=1e-13)
    np.testing.assert_allclose(a[1], b[1], atol=1e-13)
    np.testing.assert_allclose(a[2][0], b[2], atol=1e-13)
    assert np.array_equal(_product.viterbi((5,), sp, state, trans)[0], _chain.viterbi(sp, state, trans[0])[0])


def test_long_product_chains_stay_finite():
    sp, state, trans = random_product(7, [5000], (4, 3), True)
    state *= 25
    logz, node, edges = _product.forward_backward((4, 3), sp, state, trans)
    assert np.isfinite(logz).all() and np.allclose(node.sum(axis=1), 1.0)
    assert np.allclose(edges[0][1:].sum(axis=(1, 2)), 1.0) and np.allclose(edges[1][1:].sum(axis=(1, 2)), 1.0)


def test_bad_product_tables_are_refused():
    with pytest.raises(ValueError):
        _product.viterbi((2, 3), [0, 2], np.zeros((2, 5)), [np.zeros((2, 2)), np.zeros((3, 3))])
    with pytest.raises(ValueError):
        _product.viterbi((2, 3), [0, 2], np.zeros((2, 6)), [np.zeros((2, 2))])
    with pytest.raises(ValueError):
        _product.viterbi((2, 0), [0, 2], np.zeros((2, 0)), [np.zeros((2, 2)), np.zeros((0, 0))])


NBEST_CASES = [((9, 3), 3, True, False), ((9, 3), 5, False, True), ((3, 9), 4, True, True),
               ((7, 2, 3), 5, False, False), ((12,), 3, True, True), ((4, 3), 20, True, False),
               ((6, 2), 1, False, True)]


@pytest.mark.parametrize("sizes,K,shared,ties", NBEST_CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_product_nbest_is_the_merge_by_heads_bit_for_bit(sizes, K, shared, ties, threads):
    # chains of more labels than K and of fewer, integer potentials (ties everywhere), impossible
    # transitions (-inf) and lists shorter than K
    sp, state, trans = nbest_case(sum(sizes) + K, [1, 2, 4, 3], sizes, shared, ties, inf_trans=0.15)
    assert_nbest_is_the_merge(sizes, sp, state, trans, K, threads)


def nbest_case(seed, lengths, sizes, shared, ties, inf_trans, inf_state=0.0):
    """random_product's potentials, rounded to integers with ties, and a share of -inf."""
    rng = np.random.default_rng(seed)
    sp, state, trans = random_product(int(rng.integers(1000)), lengths, sizes, shared)
    if ties:
        state = np.round(state)
        trans = [np.round(m) for m in trans]
    for m in trans:
        m[rng.random(m.shape) < inf_trans] = -np.inf
    if inf_state:
        state[rng.random(state.shape) < inf_state] = -np.inf
    return sp, state, trans


@pytest.mark.parametrize("seed,lengths,sizes,shared", CASES)
def test_log_partition_is_forward_backwards_bit_for_bit(seed, lengths, sizes, shared):
    sp, state, trans = random_product(seed, lengths, sizes, shared)
    logz = _product.forward_backward(sizes, sp, state, trans, edges=False)[0]
    assert _product.log_partition(sizes, sp, state, trans, 2).tobytes() == logz.tobytes()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("sizes,K", [((20, 3), 5), ((44, 3), 5), ((30,), 2), ((16, 2), 3)])
def test_product_nbest_with_many_ties_and_more_lists_than_K(seed, sizes, K):
    # potentials of a few half-integer values: candidates tie across lists everywhere, and on every
    # tie the lower label must come first, as in the merge by heads
    rng = np.random.default_rng(seed)
    lengths = [5, 1, 9, 3]
    sp, state, trans = random_product(int(rng.integers(1000)), lengths, sizes, bool(seed % 2))
    state = np.round(state * 1.5) / 2
    trans = [np.round(m * 1.5) / 2 for m in trans]
    for m in trans:
        m[rng.random(m.shape) < 0.1] = -np.inf
    assert_nbest_is_the_merge(sizes, sp, state, trans, K, 2)


@pytest.mark.parametrize("sizes,K,lengths", [((3, 2), 30, [20, 1, 9]), ((2, 2), 100, [12, 2, 16]),
                                             ((5, 3), 12, [14, 6]), ((2, 3, 2), 40, [11, 3])])
@pytest.mark.parametrize("ties", [False, True])
def test_product_nbest_deep_into_long_lists(sizes, K, lengths, ties):
    # long chains and large K (above the number of labelings for the chains of 1-2 positions):
    # nbest.h makes a list's later entries only on demand, and the K-th labeling then needs
    # entries far down the lists of many stages; every one must be the one the full merge makes
    sp, state, trans = nbest_case(K + len(lengths), lengths, sizes, ties, ties, inf_trans=0.1, inf_state=0.05)
    for threads in (1, 2):
        assert_nbest_is_the_merge(sizes, sp, state, trans, K, threads)


@pytest.mark.parametrize("state,K,count", [([[0.0, 0.0], [0.0, -np.inf]], 4, 2),
                                           ([[0.0, -np.inf], [0.0, 0.0], [-np.inf, 0.0]], 8, 2),
                                           ([[-np.inf, -np.inf], [0.0, 0.0]], 3, 0)])
def test_product_nbest_stops_at_impossible_states(state, K, count):
    # a -inf state closes its node's list in the forward pass: fewer labelings than K, none
    # through it, and none at all when a position has no possible label
    state = np.array(state)
    sp = np.array([0, len(state)])
    trans = [np.zeros((2, 2))]
    assert_nbest_is_the_merge((2,), sp, state, trans, K, 1)
    assert _product.nbest(np.array([2], dtype=np.int32), sp, state, trans, K, 1)[2][0] == count
