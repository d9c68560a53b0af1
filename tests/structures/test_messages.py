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


def max_diff(a, b):
    return max(float(np.abs(x - y).max()) for x, y in zip(a, b)) if len(a) else 0.0


@pytest.mark.parametrize("schedule", ["trp", "random"])
# 44, 37, 27, 22 and 19 labels take every path of the blocked vector mat-vec (columns by 32, 16,
# 12, 8 and 4, the last 1-3)
@pytest.mark.parametrize("seed,n,T", [(0, 5, 12), (1, 3, 1), (2, 7, 30), (3, 37, 9), (4, 22, 6), (5, 19, 5),
                                      (6, 44, 4), (7, 27, 5)])
def test_bp_on_one_chain_equals_forward_backward(schedule, seed, n, T):
    node, trans, _ = random_grid(seed, (n,), T, scale=2.0)
    sp = np.array([0, T])
    logz, node_m = _chain.forward_backward(sp, node[0], trans[0])[:2]
    m = grid.bp(node, trans, [], schedule=schedule, tol=0.0, max_sweeps=2 * T + 2, seed=seed)
    assert m.converged
    assert m.logz == pytest.approx(float(logz[0]), abs=1e-10)
    np.testing.assert_allclose(m.node[0], node_m, atol=1e-10)
    ex, labels, score = grid.exact(node, trans, [])
    np.testing.assert_allclose(m.edge[0], ex.edge[0], atol=1e-10)
    vit, vscore = _chain.viterbi(sp, node[0], trans[0])[:2]
    b_labels, b_score, sweeps, conv = grid.bp_max(node, trans, [], schedule=schedule, tol=0.0,
                                                  max_sweeps=2 * T + 2, seed=seed)
    assert conv
    np.testing.assert_array_equal(b_labels[0], vit)
    assert b_score == pytest.approx(float(vscore[0]), abs=1e-10)


@pytest.mark.parametrize("schedule", ["trp", "random"])
def test_sum_product_survives_products_that_underflow(schedule):
    # one token, three chains (a path, so BP is exact): the middle variable's potential wants
    # label 0 and the message from above wants 1, each against the other by 660 nats. Their
    # product (the cavity) and the edge belief's sum fall below 1e-280, where the kernels stop
    # scaling in probability and redo them in log space; the distribution itself is plain (both
    # labels of the middle chain score -660). (Within one factor, entries more than ~700 nats
    # below its largest underflow to 0 in every kernel, exact ones included.)
    node = [np.zeros((1, 2)), np.array([[0.0, -660.0]]), np.array([[0.3, -0.2]])]
    trans = [np.zeros((2, 2))] * 3
    pair = [np.array([[[-660.0, 0.0], [-660.0, 0.0]]]), np.array([[[0.5, 0.0], [0.0, 0.5]]])]
    ex = grid.exact(node, trans, pair)[0]
    m = grid.bp(node, trans, pair, schedule=schedule, tol=0.0, max_sweeps=10, seed=3)
    assert m.converged
    assert m.logz == pytest.approx(ex.logz, abs=1e-9)
    assert max_diff(m.node, ex.node) < 1e-12 and max_diff(m.pair, ex.pair) < 1e-12
    assert 0.1 < ex.node[1][0, 0] < 0.9          # both labels of the middle chain stay likely


@pytest.mark.parametrize("schedule", ["trp", "random"])
def test_max_product_breaks_ties_as_viterbi(schedule):
    # weights of -1/0/1: many labelings tie, and both decoders must take the same one
    rng = np.random.default_rng(3)
    sp = np.array([0, 20])
    for _ in range(20):
        node = [rng.integers(-1, 2, size=(20, 4)).astype(float)]
        trans = [rng.integers(-1, 2, size=(4, 4)).astype(float)]
        vit = _chain.viterbi(sp, node[0], trans[0])[0]
        labels = grid.bp_max(node, trans, [], schedule=schedule, tol=0.0, max_sweeps=50)[0]
        np.testing.assert_array_equal(labels[0], vit)


@pytest.mark.parametrize("schedule", ["trp", "random"])
@pytest.mark.parametrize("sizes", [(3, 4, 2), (2, 5), (18, 5), (3, 21, 2)])
def test_bp_is_exact_on_one_token(schedule, sizes):
    # one token: the grid is a path across the chains, a tree
    node, trans, pair = random_grid(4, sizes, 1, scale=2.0)
    ex, labels, score = grid.exact(node, trans, pair)
    m = grid.bp(node, trans, pair, schedule=schedule, tol=0.0, max_sweeps=20)
    assert m.converged
    assert m.logz == pytest.approx(ex.logz, abs=1e-10)
    assert max_diff(m.node, ex.node) < 1e-10 and max_diff(m.pair, ex.pair) < 1e-10
    b_labels, b_score = grid.bp_max(node, trans, pair, schedule=schedule, tol=0.0, max_sweeps=20)[:2]
    np.testing.assert_array_equal(np.array(b_labels), np.array(labels))
    assert b_score == pytest.approx(score, abs=1e-12)


def loopy_distances(sizes, T, schedule, n_models=20, scale=1.0):
    """Max and mean (over models) of the largest node- and pair-belief error, and the largest
    |Bethe log Z - log Z|, of converged BP against exact inference on random grids."""
    node_err, pair_err, logz_err = [], [], []
    for seed in range(n_models):
        node, trans, pair = random_grid(100 + seed, sizes, T, scale)
        ex = grid.exact(node, trans, pair)[0]
        m = grid.bp(node, trans, pair, schedule=schedule, tol=1e-8, max_sweeps=500, seed=seed)
        assert m.converged
        node_err.append(max_diff(m.node, ex.node))
        pair_err.append(max_diff(m.pair, ex.pair))
        logz_err.append(abs(m.logz - ex.logz))
    return (max(node_err), np.mean(node_err)), (max(pair_err), np.mean(pair_err)), (max(logz_err), np.mean(logz_err))


@pytest.mark.parametrize("schedule", ["trp", "random"])
@pytest.mark.parametrize("sizes,T,bounds", [((3, 2), 8, (0.06, 0.08, 0.15)), ((2, 3, 2), 6, (0.07, 0.09, 0.25))])
def test_loopy_beliefs_are_near_exact(schedule, sizes, T, bounds):
    # 20 random grids (potentials ~ N(0, 1)), BP run to tol 1e-8: the largest errors measured are
    # node 0.0511 / 0.0625, pair 0.0705 / 0.0818, |Bethe log Z - log Z| 0.135 / 0.241 (both
    # schedules reach the same fixed point); the bounds are those, rounded up
    (nmax, nmean), (pmax, pmean), (zmax, zmean) = loopy_distances(sizes, T, schedule)
    print(f"\n{sizes} T={T} {schedule}: node max {nmax:.4f} mean {nmean:.4f}; pair max {pmax:.4f} "
          f"mean {pmean:.4f}; |logZ| max {zmax:.4f} mean {zmean:.4f}")
    assert nmax < bounds[0] and pmax < bounds[1] and zmax < bounds[2]
    assert nmean > 1e-6          # the graph has loops: BP is not exact


def test_both_schedules_reach_the_same_fixed_point():
    node, trans, pair = random_grid(11, (3, 3), 10)
    a = grid.bp(node, trans, pair, schedule="trp", tol=1e-10, max_sweeps=500)
    b = grid.bp(node, trans, pair, schedule="random", tol=1e-10, max_sweeps=500, seed=5)
    assert a.converged and b.converged
    assert max_diff(a.node, b.node) < 1e-8 and abs(a.logz - b.logz) < 1e-8


def test_long_sentence_is_finite_and_converges():
    # potentials shifted by constants far beyond what exp() can take over 10,000 tokens: the
    # distribution is the same, so the beliefs must be too, and log Z moves by the shifts
    sizes, T = (4, 3), 10000
    node, trans, pair = random_grid(12, sizes, T, scale=2.0)
    big = ([node[0] + 300.0, node[1] - 200.0], [trans[0] + 50.0, trans[1]], [pair[0] - 400.0])
    shift = T * (300.0 - 200.0 - 400.0) + (T - 1) * 50.0
    ex, best_labels, best = grid.exact(node, trans, pair)
    for schedule in ("trp", "random"):
        m = grid.bp(*big, schedule=schedule, tol=1e-3, max_sweeps=100)
        assert m.converged and m.sweeps < 40
        assert np.isfinite(m.logz)
        assert all(np.isfinite(a).all() for a in m.node + m.pair + m.edge)
        np.testing.assert_allclose(m.node[0].sum(axis=1), 1.0, atol=1e-12)
        np.testing.assert_allclose(m.edge[1].sum(), T - 1, rtol=1e-12)
        plain = grid.bp(node, trans, pair, schedule=schedule, tol=1e-3, max_sweeps=100)
        assert max_diff(m.node, plain.node) < 1e-9 and max_diff(m.pair, plain.pair) < 1e-9
        assert m.logz - shift == pytest.approx(plain.logz, rel=1e-9)
        assert abs(plain.logz - ex.logz) < 0.02 * T          # per token, like short grids
        # max-product does not converge here (somewhere in 10,000 tokens it oscillates, as on ~10%
        # of small random grids): measured 1.3-1.5% of labels off Viterbi, score 0.1-0.2% below
        labels, score, sweeps, conv = grid.bp_max(*big, schedule=schedule, tol=1e-3, max_sweeps=30)
        assert np.isfinite(score) and labels[0].shape == (T,)
        assert score - shift > best - 0.005 * abs(best)
        assert (np.array(labels) != np.array(best_labels)).mean() < 0.03


@pytest.mark.parametrize("C,T", [(1, 5), (2, 4), (3, 3), (4, 1)])
def test_combs_are_spanning_trees_that_cover_every_edge(C, T):
    edges = _messages.edge_list(C, T)
    covered = set()
    for spine in range(C):
        tree = _messages.comb_edges(C, T, spine)
        assert len(tree) == C * T - 1 == len(set(tree.tolist()))
        # connected with V - 1 edges: a spanning tree (union-find)
        parent = list(range(C * T))

        def find(v):
            while parent[v] != v:
                v = parent[v]
            return v
        for e in tree:
            c1, t1, c2, t2 = edges[e]
            a, b = find(c1 * T + t1), find(c2 * T + t2)
            assert a != b                      # no cycle
            parent[a] = b
        covered |= set(tree.tolist())
    assert covered == set(range(len(edges)))


@pytest.mark.parametrize("maxp", [False, True])
def test_a_sweep_sends_every_message(maxp):
    C, T = 3, 4
    node, trans, pair = random_grid(1, (2, 3, 2), T)
    edges = _messages.edge_list(C, T)
    chain = edges[:, 0] == edges[:, 2]
    trp = _messages.message_counts((2, 3, 2), node, trans, pair, 0, 1, maxp)
    # TRP: every chain edge once each way (on its own comb), every cotemporal edge on each comb
    assert (trp[chain] == 1).all() and (trp[~chain] == C).all()
    rnd = _messages.message_counts((2, 3, 2), node, trans, pair, 1, 2, maxp, seed=3)
    assert (rnd == 2).all()


def test_random_schedule_is_reproducible_and_seeded():
    node, trans, pair = random_grid(2, (3, 3), 12)
    a = grid.bp(node, trans, pair, schedule="random", tol=1e-3, seed=1)
    b = grid.bp(node, trans, pair, schedule="random", tol=1e-3, seed=1)
    c = grid.bp(node, trans, pair, schedule="random", tol=1e-3, seed=2)
    assert max_diff(a.node, b.node) == 0.0 and a.sweeps == b.sweeps
    assert max_diff(a.node, c.node) > 0.0


@pytest.mark.parametrize("threads", [1, 2])
def test_bp_batch_equals_grids_one_by_one(threads):
    sizes, lengths = (3, 2), [4, 1, 7, 3, 5]
    grids = [random_grid(20 + i, sizes, T) for i, T in enumerate(lengths)]
    node = [np.concatenate([g[0][c] for g in grids]) for c in range(2)]
    pair = [np.concatenate([g[2][0] for g in grids])]
    trans = grids[0][1]
    sp = np.concatenate([[0], np.cumsum(lengths)])
    for schedule in ("trp", "random"):
        m = grid.bp_batch(sp, node, trans, pair, schedule=schedule, seed=7, n_threads=threads)
        labels = grid.bp_max_batch(sp, node, trans, pair, schedule=schedule, seed=7, n_threads=threads)[0]
        edge = [np.zeros((n, n)) for n in sizes]
        for i, (g_node, _, g_pair) in enumerate(grids):
            one = grid.bp(g_node, trans, g_pair, schedule=schedule, seed=7 + i)
            sl = slice(sp[i], sp[i + 1])
            assert m.logz[i] == one.logz and m.sweeps[i] == one.sweeps
            np.testing.assert_array_equal(m.node[1][sl], one.node[1])
            np.testing.assert_array_equal(m.pair[0][sl], one.pair[0])
            one_labels = grid.bp_max(g_node, trans, g_pair, schedule=schedule, seed=7 + i)[0]
            np.testing.assert_array_equal(labels[0][sl], one_labels[0])
            for c in range(2):
                edge[c] += one.edge[c]
        np.testing.assert_allclose(m.edge[0], edge[0], atol=1e-12)


def test_bad_bp_options_are_refused():
    node, trans, pair = random_grid(0, (2, 3), 3)
    with pytest.raises(ValueError):
        grid.bp(node, trans, pair, schedule="tree")
    with pytest.raises(ValueError):
        grid.bp(node, trans, pair, max_sweeps=0)
    with pytest.raises(ValueError):
        grid.bp(node, trans, pair, tol=-1.0)


def test_vector_exp_is_within_3_ulps_and_the_same_anywhere_in_an_array():
    # the kernels' exp (chain.pxd's exp_array): 4 values at a time, the rest one by one
    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.uniform(0, 708, 200_000), -rng.uniform(0, 1, 100_000),
                        -rng.exponential(1e-3, 10_000), [0.0, -0.0, -1e-300, -707.9, -708.0]])
    y = _messages.vector_exp(x)
    e = np.exp(x)
    assert (np.abs(y - e) <= 3 * np.spacing(e)).all()
    assert y[-5] == 1.0 and y[-4] == 1.0
    special = _messages.vector_exp(np.array([-708.01, -745.0, -np.inf, np.nan]))
    assert special[:3].tolist() == [0.0, 0.0, 0.0] and np.isnan(special[3])
    one_by_one = np.array([_messages.vector_exp(x[i:i + 1])[0] for i in range(0, 1003)])
    np.testing.assert_array_equal(y[:1003], one_by_one)
    np.testing.assert_array_equal(_messages.vector_exp(x[1:8]), y[1:8])


def test_vector_log_is_within_3_ulps_and_hands_other_values_to_the_c_library():
    # the kernels' log (chain.pxd's log_array), for the messages' logs after sum-product
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.uniform(0, 1, 200_000), np.exp(-rng.uniform(0, 700, 100_000)),
                        1 + rng.normal(0, 1e-3, 10_000), [1.0, 0.5, 2.0, np.sqrt(2), np.sqrt(0.5)]])
    y = _messages.vector_log(x)
    e = np.log(x)
    assert (np.abs(y - e) <= 3 * np.spacing(np.abs(e))).all()
    assert y[-5] == 0.0
    special = np.array([0.0, 1e-310, 5e-324, np.inf, 1.0, 2.0, 3.0, 4.0])   # the library takes the first 4
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(_messages.vector_log(special)[:4], np.log(special[:4]))
    one_by_one = np.array([_messages.vector_log(x[i:i + 1])[0] for i in range(0, 1003)])
    np.testing.assert_array_equal(y[:1003], one_by_one)
    # a zero beside them does not change the others' results
    mixed = x[:1000].copy()
    mixed[::4] = 0.0
    with np.errstate(divide="ignore"):
        got = _messages.vector_log(mixed)
    np.testing.assert_array_equal(np.delete(got, np.s_[::4]), np.delete(y[:1000], np.s_[::4]))


def plain_max_plus(x1, M, x2=None):
    """maxplus.h's plain loop in Python floats: rows in order, each column keeping the first
    larger value (so a zero maximum keeps the sign of the first row that reaches it)."""
    m, n = M.shape
    y = [-np.inf] * n
    for i in range(m):
        for j in range(n):
            v = float(x1[i]) + float(M[i, j]) if x2 is None else (float(M[i, j]) + float(x1[i])) + float(x2[i])
            y[j] = v if v > y[j] else y[j]
    return np.array(y)


def same_bits(a, b):
    return np.array_equal(np.asarray(a).view(np.int64), np.asarray(b).view(np.int64))


@pytest.mark.parametrize("backward", [False, True])
def test_max_plus_equals_the_plain_loop_bit_for_bit(backward):
    # every shape the kernel splits differently: 0-60 rows, 1-100 columns (one vector or fewer,
    # blocks of 48, a ragged last vector), with -inf rows and columns and ties
    rng = np.random.default_rng(7 + backward)
    for case in range(400):
        m, n = int(rng.integers(0, 61)), int(rng.integers(1, 101))
        M = np.round(rng.normal(size=(m, n)), int(rng.integers(1, 4)))
        x1 = np.round(rng.normal(size=m), 1)
        x2 = np.round(rng.normal(size=m), 1) if backward else None
        if m and case % 5 == 0:
            M[rng.integers(0, m)] = -np.inf
            M[:, rng.integers(0, n)] = -np.inf
        got = _messages.max_plus(x1, M, x2)
        assert same_bits(got, plain_max_plus(x1, M, x2)), (case, m, n)


@pytest.mark.parametrize("n", [1, 3, 8, 50])
def test_max_plus_zero_maximum_keeps_the_first_rows_sign(n):
    # a column whose maximum is 0 reached as -0 by row 1 and as +0 by row 4: the plain loop keeps
    # -0, the first; a kernel whose rows go to several accumulators in turn finds row 4's +0 in
    # the first of them, so it must fall back to the plain order for such a block
    m = 6
    M = np.full((m, n), -3.0)
    x1 = np.array([-1.0, -0.0, -5.0, -5.0, 0.0, -7.0])
    M[1, :] = -0.0
    M[4, :] = 0.0
    for x2 in (None, np.array([0.0, -0.0, 0.0, 0.0, 0.0, 0.0])):
        got = _messages.max_plus(x1, M, x2)
        want = plain_max_plus(x1, M, x2)
        assert (want == 0).all() and np.signbit(want).all()
        assert same_bits(got, want), (n, got, want)
