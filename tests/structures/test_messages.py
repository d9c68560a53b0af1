"""Inference on factorial grids (crftk._messages, crftk.structures.grid): exact inference against
brute-force enumeration; loopy BP (TRP and random schedules) against forward-backward, Viterbi
and exact inference."""

import itertools

import numpy as np
import pytest

from crftk import _chain, _messages
from crftk.structures import grid


def random_grid(seed, sizes, T, scale=1.0):
    """node, trans, pair of one random grid."""
    rng = np.random.default_rng(seed)
    node = [rng.normal(scale=scale, size=(T, n)) for n in sizes]
    trans = [rng.normal(scale=scale, size=(n, n)) for n in sizes]
    pair = [rng.normal(scale=scale, size=(T, sizes[c], sizes[c + 1])) for c in range(len(sizes) - 1)]
    return node, trans, pair


def labeling_score(node, trans, pair, y):
    """Log potential of a labeling y[c][t]."""
    C, T = len(node), len(node[0])
    s = 0.0
    for c in range(C):
        for t in range(T):
            s += node[c][t, y[c][t]]
            if t:
                s += trans[c][y[c][t - 1], y[c][t]]
            if c < C - 1:
                s += pair[c][t, y[c][t], y[c + 1][t]]
    return s


def enumerate_grid(node, trans, pair):
    """log Z, node, edge-sum and pair marginals, best labeling and score, by enumeration."""
    C, T = len(node), len(node[0])
    sizes = [a.shape[1] for a in node]
    configs = list(itertools.product(*[range(n) for n in sizes for _ in range(T)]))
    ys = [np.array(cfg).reshape(C, T) for cfg in configs]
    scores = np.array([labeling_score(node, trans, pair, y) for y in ys])
    logz = np.logaddexp.reduce(scores)
    p = np.exp(scores - logz)
    nm = [np.zeros((T, n)) for n in sizes]
    em = [np.zeros((n, n)) for n in sizes]
    pm = [np.zeros((T, sizes[c], sizes[c + 1])) for c in range(C - 1)]
    for w, y in zip(p, ys):
        for c in range(C):
            for t in range(T):
                nm[c][t, y[c][t]] += w
                if t:
                    em[c][y[c][t - 1], y[c][t]] += w
                if c < C - 1:
                    pm[c][t, y[c][t], y[c + 1][t]] += w
    best = int(np.argmax(scores))
    return logz, nm, em, pm, ys[best], scores[best]


EXACT_CASES = [(0, (2, 3), 3), (1, (3, 2), 4), (2, (2, 2, 2), 3), (3, (3, 2, 2), 2), (4, (2, 3), 1),
               (5, (4,), 4)]


@pytest.mark.parametrize("seed,sizes,T", EXACT_CASES)
def test_exact_equals_enumeration(seed, sizes, T):
    node, trans, pair = random_grid(seed, sizes, T, scale=1.5)
    m, labels, score = grid.exact(node, trans, pair)
    logz, nm, em, pm, best, best_score = enumerate_grid(node, trans, pair)
    assert m.logz == pytest.approx(logz, abs=1e-10)
    for c in range(len(sizes)):
        np.testing.assert_allclose(m.node[c], nm[c], atol=1e-12)
        np.testing.assert_allclose(m.edge[c], em[c], atol=1e-12)
    for c in range(len(sizes) - 1):
        np.testing.assert_allclose(m.pair[c], pm[c], atol=1e-12)
    np.testing.assert_array_equal(np.array(labels), best)
    assert score == pytest.approx(best_score, abs=1e-10)


@pytest.mark.parametrize("threads", [1, 2])
def test_exact_batch_equals_grids_one_by_one(threads):
    sizes, lengths = (3, 2, 2), [2, 5, 1, 3]
    grids = [random_grid(10 + i, sizes, T) for i, T in enumerate(lengths)]
    node = [np.concatenate([g[0][c] for g in grids]) for c in range(3)]
    pair = [np.concatenate([g[2][c] for g in grids]) for c in range(2)]
    trans = grids[0][1]
    sp = np.concatenate([[0], np.cumsum(lengths)])
    m, labels, score = grid.exact_batch(sp, node, trans, pair, n_threads=threads)
    edge_total = [np.zeros((n, n)) for n in sizes]
    for i, (g_node, _, g_pair) in enumerate(grids):
        one, one_labels, one_score = grid.exact(g_node, trans, g_pair)
        sl = slice(sp[i], sp[i + 1])
        assert m.logz[i] == pytest.approx(one.logz, abs=1e-12)
        assert score[i] == pytest.approx(one_score, abs=1e-12)
        for c in range(3):
            np.testing.assert_allclose(m.node[c][sl], one.node[c], atol=1e-14)
            np.testing.assert_array_equal(labels[c][sl], one_labels[c])
            edge_total[c] += one.edge[c]
        for c in range(2):
            np.testing.assert_allclose(m.pair[c][sl], one.pair[c], atol=1e-14)
    for c in range(3):
        np.testing.assert_allclose(m.edge[c], edge_total[c], atol=1e-12)


def test_exact_one_chain_equals_chain_kernel():
    node, trans, _ = random_grid(7, (5,), 30)
    m, labels, score = grid.exact(node, trans, [])
    logz, node_m = _chain.forward_backward(np.array([0, 30]), node[0], trans[0])[:2]
    assert m.logz == pytest.approx(float(logz[0]), abs=1e-9)
    np.testing.assert_allclose(m.node[0], node_m, atol=1e-12)


def test_exact_with_forbidden_transitions():
    node, trans, pair = random_grid(8, (3, 2), 3)
    trans[0][0, 1] = -np.inf          # a constraint: label 0 never followed by 1 on chain 0
    pair[0][:, 2, 0] = -np.inf
    m, labels, score = grid.exact(node, trans, pair)
    logz, nm, em, pm, best, best_score = enumerate_grid(node, trans, pair)
    assert m.logz == pytest.approx(logz, abs=1e-10)
    assert m.edge[0][0, 1] == 0.0 and (m.pair[0][:, 2, 0] == 0.0).all()
    np.testing.assert_allclose(m.edge[0], em[0], atol=1e-12)
    np.testing.assert_array_equal(np.array(labels), best)


def test_bad_shapes_are_refused():
    node, trans, pair = random_grid(0, (2, 3), 3)
    with pytest.raises(ValueError):
        grid.exact(node, trans, [])
    with pytest.raises(ValueError):
        grid.exact(node, trans, [pair[0][:, :, :2]])
    with pytest.raises(ValueError):
        grid.exact([node[0], node[1][:2]], trans, pair)
    node[0][1, 1] = np.nan
    with pytest.raises(ValueError):
        grid.exact(node, trans, pair)


def test_edge_list_numbering():
    e = _messages.edge_list(3, 4)
    assert len(e) == 3 * 3 + 2 * 4
    assert tuple(e[0]) == (0, 0, 0, 1) and tuple(e[3]) == (1, 0, 1, 1) and tuple(e[9]) == (0, 0, 1, 0)
