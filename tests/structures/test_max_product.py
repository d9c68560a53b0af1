"""Max-product decoding of factorial grids (crftk._messages.bp_max, the kernel of factorial
tagging with --inference trp/bp) against the previous kernel, operation for operation in plain
Python (tests/maxproduct_reference.py), and against brute force where max-product is exact."""

import numpy as np
import pytest

from crftk.structures import grid
from maxproduct_reference import MaxProduct, bp_max as reference_bp_max
from test_messages import enumerate_grid, random_grid


def grid_case(seed):
    """A random tiny grid: 1-3 chains of 1-4 labels, 1-5 tokens (lengths 1 and 2 included),
    potentials of one of three scales (the larger ones make the passing cycle)."""
    rng = np.random.default_rng(seed)
    C = int(rng.integers(1, 4))
    T = int(rng.integers(1, 6)) if seed % 3 else 1 + seed % 2
    sizes = [int(x) for x in rng.integers(1, 5, size=C)]
    return random_grid(seed, sizes, T, scale=float(rng.choice([0.5, 2.0, 5.0])))


@pytest.mark.parametrize("schedule", ["trp", "random"])
def test_max_product_equals_the_previous_kernel(schedule):
    # labels, score, sweeps and convergence, bit for bit, with max_sweeps of every residue
    # modulo the cycles' lengths; some grids do not converge, and some of those cycle
    not_converged = 0
    for seed in range(150):
        node, trans, pair = grid_case(seed)
        max_sweeps = 1 + seed % 40
        labels, score, sweeps, conv = grid.bp_max(node, trans, pair, schedule=schedule, tol=1e-3,
                                                   max_sweeps=max_sweeps, seed=seed)
        r_labels, r_score, r_sweeps, r_conv = reference_bp_max(node, trans, pair, 0 if schedule == "trp" else 1,
                                                               1e-3, max_sweeps, seed)
        np.testing.assert_array_equal(np.array(labels), np.array(r_labels), err_msg=f"seed {seed}")
        assert (score, sweeps, conv) == (r_score, r_sweeps, r_conv), f"seed {seed}"
        not_converged += not conv
    assert not_converged >= 5


def cycling_grid():
    """A grid whose TRP passing repeats its messages bit for bit without converging, and the
    cycle's first sweep and length (from the reference's history)."""
    for seed in range(200):
        node, trans, pair = random_grid(seed, (3, 4), 5, scale=5.0)
        history = []
        if MaxProduct(node, trans, pair).run(0, 1e-3, 60, 0, history)[1]:
            continue
        seen = {}
        for k, (_, state) in enumerate(history):
            if state in seen:
                return (node, trans, pair), seen[state] + 1, k - seen[state]
            seen[state] = k
    raise AssertionError("no cycling grid found")


def test_a_cycle_is_skipped_to_where_it_ends():
    # the kernel stops sweeping a cycle once it has seen it, and must still end where all the
    # sweeps would have: each max_sweeps across two cycle lengths past its start
    (node, trans, pair), start, length = cycling_grid()
    for max_sweeps in range(start, start + 2 * length + 3):
        labels, score, sweeps, conv = grid.bp_max(node, trans, pair, tol=1e-3, max_sweeps=max_sweeps)
        r = reference_bp_max(node, trans, pair, 0, 1e-3, max_sweeps)
        assert not conv and sweeps == max_sweeps
        np.testing.assert_array_equal(np.array(labels), np.array(r[0]))
        assert score == r[1]


@pytest.mark.parametrize("schedule", ["trp", "random"])
@pytest.mark.parametrize("T", [1, 2, 3])
def test_max_product_on_one_chain_is_the_best_labeling(schedule, T):
    # one chain is a tree: max-product finds the brute-force best labeling, for lengths 1 to 3
    for seed in range(10):
        node, trans, pair = random_grid(300 + seed, (4,), T, scale=2.0)
        best, best_score = enumerate_grid(node, trans, pair)[4:]
        labels, score, _, conv = grid.bp_max(node, trans, pair, schedule=schedule, tol=0.0, max_sweeps=30)
        assert conv or schedule == "random"
        np.testing.assert_array_equal(np.array(labels), best)
        assert score == pytest.approx(best_score, abs=1e-12)


@pytest.mark.parametrize("sizes", [(3, 2), (2, 3, 2)])
def test_max_product_on_two_tokens_scores_near_the_best_labeling(sizes):
    # two tokens of 2-3 chains hold loops: max-product's labeling is a labeling whose score is
    # its own (the kernel's score is the labeling's), and with weak couplings the best one
    for seed in range(10):
        node, trans, pair = random_grid(400 + seed, sizes, 2, scale=0.3)
        pair = [0.05 * p for p in pair]
        best, best_score = enumerate_grid(node, trans, pair)[4:]
        labels, score, _, _ = grid.bp_max(node, trans, pair, tol=1e-9, max_sweeps=100)
        lab = np.array(labels)
        assert score == pytest.approx(MaxProduct(node, trans, pair).score(lab.tolist()), abs=1e-12)
        np.testing.assert_array_equal(lab, best)
        assert score == pytest.approx(best_score, abs=1e-12)


def _sweep_inputs(mp):
    """What a TRP sweep reads before it writes: chains 1..C-1's forward and backward messages."""
    from maxproduct_reference import BWD, FWD
    return tuple(x for k in (FWD, BWD) for ch in mp.msg[k][1:] for row in ch for x in np.asarray(row).view(np.int64))


def replaying_grids(n):
    """Grids whose TRP sweep k (not converged) leaves the sweep inputs as they were, bit for bit:
    (grid, k) with the reference's sweep k + 1 a replay that changes no message."""
    found = []
    for seed in range(400):
        rng = np.random.default_rng(seed)
        sizes = [int(x) for x in rng.integers(2, 5, size=int(rng.integers(2, 4)))]
        node, trans, pair = random_grid(seed, sizes, int(rng.integers(2, 6)), scale=float(rng.choice([0.5, 2.0])))
        mp = MaxProduct(node, trans, pair)
        before = _sweep_inputs(mp)
        for k in range(1, 30):
            change = mp.sweep(0, [0])
            after = _sweep_inputs(mp)
            if change <= 1e-3:
                break
            if after == before:
                state = mp.state()
                assert mp.sweep(0, [0]) == 0.0 and mp.state() == state     # the replay
                found.append(((node, trans, pair), k))
                break
            before = after
        if len(found) == n:
            break
    return found


def test_a_sweep_that_leaves_its_inputs_is_replayed_without_running():
    # the kernel counts the replaying sweep k + 1 as converged without running it: the same labels,
    # score, sweeps and convergence as the reference's every sweep, for every max_sweeps around k
    grids = replaying_grids(12)
    assert len(grids) >= 8
    for (node, trans, pair), k in grids:
        for max_sweeps in range(max(1, k - 1), k + 3):
            labels, score, sweeps, conv = grid.bp_max(node, trans, pair, tol=1e-3, max_sweeps=max_sweeps)
            r = reference_bp_max(node, trans, pair, 0, 1e-3, max_sweeps)
            np.testing.assert_array_equal(np.array(labels), np.array(r[0]))
            assert (score, sweeps, conv) == (r[1], r[2], r[3])
            assert conv == (max_sweeps > k)


@pytest.mark.parametrize("sizes", [(4, 3), (5, 2, 3)])
def test_spine_passes_keep_what_their_unchanged_rows_give(sizes):
    # longer grids, where a sweep changes the messages into a spine at some tokens only: the
    # spine keeps its forward scores before the first changed row and its backward scores
    # after the last one. Bit for bit the reference's labels, score, sweeps and convergence at
    # every max_sweeps up to where it converges
    for seed in range(40):
        rng = np.random.default_rng(1000 + seed)
        T = int(rng.integers(6, 13))
        node, trans, pair = random_grid(1000 + seed, sizes, T, scale=float(rng.choice([0.5, 1.0, 2.0])))
        for max_sweeps in range(1, 9):
            got = grid.bp_max(node, trans, pair, tol=1e-3, max_sweeps=max_sweeps)
            want = reference_bp_max(node, trans, pair, 0, 1e-3, max_sweeps)
            np.testing.assert_array_equal(np.array(got[0]), np.array(want[0]), err_msg=f"seed {seed}")
            assert tuple(got[1:]) == tuple(want[1:]), (seed, max_sweeps)
            if got[3]:
                break
