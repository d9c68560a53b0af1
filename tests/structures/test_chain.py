"""Chain inference on given tables (crftk._chain) against brute-force enumeration."""

import itertools

import numpy as np
import pytest

from crftk import _chain


def random_tables(seed, lengths, L, shared):
    rng = np.random.default_rng(seed)
    sent_ptr = np.concatenate([[0], np.cumsum(lengths)])
    N = int(sent_ptr[-1])
    state = rng.normal(scale=1.5, size=(N, L))
    trans = rng.normal(scale=1.5, size=(L, L) if shared else (N, L, L))
    return sent_ptr, state, trans


def labelings(state, trans, t0, T):
    """Every labeling of one chain with its score, by enumeration."""
    L = state.shape[1]
    out = []
    for y in itertools.product(range(L), repeat=T):
        score = sum(state[t0 + t, y[t]] for t in range(T))
        for t in range(1, T):
            m = trans if trans.ndim == 2 else trans[t0 + t]
            score += m[y[t - 1], y[t]]
        out.append((score, y))
    return out


CASES = [(0, [1, 2, 3, 4], 3, True), (1, [4, 1, 3], 3, False), (2, [2, 5], 2, False), (3, [3, 3], 4, True)]


@pytest.mark.parametrize("seed,lengths,L,shared", CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_forward_backward_equals_enumeration(seed, lengths, L, shared, threads):
    sp, state, trans = random_tables(seed, lengths, L, shared)
    logz, node, edge = _chain.forward_backward(sp, state, trans, threads)
    for s in range(len(lengths)):
        t0, T = sp[s], lengths[s]
        all_y = labelings(state, trans, t0, T)
        scores = np.array([a for a, _ in all_y])
        z = np.logaddexp.reduce(scores)
        assert logz[s] == pytest.approx(z, rel=1e-12, abs=1e-12)
        p = np.exp(scores - z)
        want_node = np.zeros((T, L))
        want_edge = np.zeros((T, L, L))
        for prob, (_, y) in zip(p, all_y):
            for t in range(T):
                want_node[t, y[t]] += prob
                if t:
                    want_edge[t, y[t - 1], y[t]] += prob
        np.testing.assert_allclose(node[t0:t0 + T], want_node, atol=1e-12)
        np.testing.assert_allclose(edge[t0:t0 + T], want_edge, atol=1e-12)


@pytest.mark.parametrize("seed,lengths,L,shared", CASES)
@pytest.mark.parametrize("threads", [1, 2])
def test_viterbi_and_nbest_equal_enumeration(seed, lengths, L, shared, threads):
    sp, state, trans = random_tables(seed, lengths, L, shared)
    best, score = _chain.viterbi(sp, state, trans, threads)
    k = 7
    paths, scores, counts = _chain.nbest(sp, state, trans, k, threads)
    for s in range(len(lengths)):
        t0, T = sp[s], lengths[s]
        ranked = sorted(labelings(state, trans, t0, T), key=lambda a: -a[0])
        assert tuple(best[t0:t0 + T]) == ranked[0][1]
        assert score[s] == pytest.approx(ranked[0][0], abs=1e-12)
        n = min(k, L ** T)
        assert counts[s] == n
        np.testing.assert_allclose(scores[s, :n], [a for a, _ in ranked[:n]], atol=1e-12)
        got = {tuple(paths[r, t0:t0 + T]) for r in range(n)}
        assert len(got) == n
        for r in range(n):          # ties may swap places; each path must carry its own score
            y = tuple(paths[r, t0:t0 + T])
            assert dict((b, a) for a, b in ranked)[y] == pytest.approx(scores[s, r], abs=1e-12)


def test_long_chains_neither_overflow_nor_underflow():
    T, L = 20000, 5
    sp, state, trans = random_tables(9, [T], L, False)
    state *= 30                            # potentials far outside exp's range when summed
    logz, node, edge = _chain.forward_backward(sp, state, trans)
    assert np.isfinite(logz).all() and np.allclose(node.sum(axis=1), 1.0)
    np.testing.assert_allclose(edge[1:].sum(axis=(1, 2)), 1.0)


def test_bad_tables_are_refused():
    with pytest.raises(ValueError):
        _chain.viterbi([0, 2], np.zeros((2, 3)), np.zeros((2, 2)))
    with pytest.raises(ValueError):
        _chain.viterbi([0, 0, 2], np.zeros((2, 3)), np.zeros((3, 3)))
    with pytest.raises(ValueError):
        _chain.nbest([0, 2], np.zeros((2, 3)), np.zeros((3, 3)), 0)
