"""chain.pxd's matrix steps (vec_mat, mat_vec, mat_vec_transposed) against the plain loops
they replace, bit for bit: each output summed from 0.0 in index order."""

import numpy as np
import pytest

from crftk._lattice import chain_products


def plain_sums(M, x):
    """(x M, M x) as the plain loops summed them, one float at a time in Python."""
    n = len(x)
    xm = [0.0] * n
    mx = [0.0] * n
    for j in range(n):
        acc = 0.0
        for i in range(n):
            acc += float(x[i]) * float(M[i, j])
        xm[j] = acc
    for i in range(n):
        acc = 0.0
        for j in range(n):
            acc += float(M[i, j]) * float(x[j])
        mx[i] = acc
    return np.array(xm), np.array(mx)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 23, 31, 33, 45, 64, 70])
@pytest.mark.parametrize("seed", [0, 1])
def test_matrix_steps_give_the_plain_loops_bits(n, seed):
    rng = np.random.default_rng(seed * 100 + n)
    # a wide spread of magnitudes, so that a different order of the sums would show in the bits
    M = rng.uniform(0, 1, (n, n)) * np.exp(rng.uniform(-30, 5, (n, n)))
    x = rng.uniform(0, 1, n) * np.exp(rng.uniform(-30, 5, n))
    xm, mx_rows, mx_transposed = chain_products(M, x)
    want_xm, want_mx = plain_sums(M, x)
    assert xm.tobytes() == want_xm.tobytes()
    assert mx_rows.tobytes() == want_mx.tobytes()
    assert mx_transposed.tobytes() == want_mx.tobytes()


def test_matrix_steps_keep_zeros_and_signs():
    M = np.array([[0.0, -0.0, 1e-300], [2.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    x = np.array([-0.0, 0.0, 1e-10])
    xm, mx_rows, mx_transposed = chain_products(M, x)
    want_xm, want_mx = plain_sums(M, x)
    assert xm.tobytes() == want_xm.tobytes()
    assert mx_rows.tobytes() == want_mx.tobytes() == mx_transposed.tobytes()


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        chain_products(np.zeros((2, 3)), np.zeros(2))
    with pytest.raises(ValueError):
        chain_products(np.zeros((0, 0)), np.zeros(0))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gradient_with_a_label_twice_in_an_attributes_run(seed):
    # scatter_attribute subtracts the observed count after its loop; a feature map whose run
    # holds the gold label twice (not one crftk builds) must still get it at both features
    import lattice_reference as ref
    from crftk._lattice import Lattices
    rng = np.random.default_rng(seed)
    L = 3
    c = ref.random_corpus(rng, L, [1, 4, 3, 5], n_attrs=4, complete=True)
    fl = c.feat_label.copy()
    fl[c.feat_ptr[1] + 1] = fl[c.feat_ptr[1]]           # attribute 1: its first label twice
    c = ref.Corpus(c.sent_ptr, c.attr_ptr, c.attrs, c.eattr_ptr, c.eattrs, c.feat_ptr, fl, L, 0)
    w = rng.normal(0.0, 1.0, c.P)
    gold = rng.integers(0, L, c.N).astype(np.int32)
    occurrences = np.flatnonzero(np.asarray(c.attrs) == 1)
    assert occurrences.size
    tokens = np.searchsorted(np.asarray(c.attr_ptr), occurrences, side="right") - 1
    gold[tokens] = fl[c.feat_ptr[1]]                     # ... and that label observed there
    loss, grad = Lattices(*c.arrays()).loglik(w, gold)
    want = np.zeros(c.P)
    for _, t0, T in c.sentences():
        en = ref.Enumeration(c, t0, T)
        want += en.expected_counts(w) - en.phi[ref.labeling_index(gold[t0:t0 + T], L)]
    np.testing.assert_allclose(grad, want, rtol=0, atol=1e-11)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 13, 23, 33, 45])
@pytest.mark.parametrize("T", [1, 2, 7])
def test_transition_counts_give_the_backward_sweeps_bits(n, T):
    # chain_sum_product_shared's expected transition counts, added after its sweep: per entry the
    # same products in the same order (t from T-1 down) as the sweep added them one at a time
    from crftk._lattice import shared_transition_counts
    rng = np.random.default_rng(n * 10 + T)
    alpha = rng.uniform(0, 1, (T, n)) * np.exp(rng.uniform(-30, 5, (T, n)))
    q = rng.uniform(0, 1, (T, n)) * np.exp(rng.uniform(-30, 5, (T, n)))
    acc = rng.uniform(0, 1, (n, n)) * np.exp(rng.uniform(-30, 5, (n, n)))
    shared = [bool(x) for x in rng.integers(0, 4, T) > 0]
    got = shared_transition_counts(alpha, q, shared, acc)
    want = acc.copy()
    for t in range(T - 1, 0, -1):
        if shared[t]:
            for i in range(n):
                for j in range(n):
                    want[i, j] = float(want[i, j]) + float(alpha[t - 1, i]) * float(q[t, j])
    assert got.tobytes() == want.tobytes()
