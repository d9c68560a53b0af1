"""crftk._floor.gather_scatter (benchmarks/floor.py's bare pass) against a brute force on a tiny corpus."""

import numpy as np
import pytest

from crftk._floor import gather_scatter


@pytest.mark.parametrize("real", [np.float64, np.float32])
@pytest.mark.parametrize("ids", [np.int32, np.int64])
@pytest.mark.parametrize("labels", [np.int32, np.uint16])
@pytest.mark.parametrize("threads", [1, 2])
def test_gather_scatter_is_the_brute_force(real, ids, labels, threads):
    rng = np.random.default_rng(3)
    L, A = 3, 5
    feat_ptr = np.array([0, 2, 5, 5, 6, 8])                 # attribute 2 has no feature
    feat_label = np.array([0, 2, 0, 1, 2, 1, 0, 2])
    sent_ptr = np.array([0, 2, 5, 6], dtype=np.int32)
    attr_ptr = np.array([0, 2, 3, 6, 7, 9, 11], dtype=np.int32)
    attrs = rng.integers(0, A, attr_ptr[-1])
    w = rng.standard_normal(feat_ptr[-1]).astype(real)
    scores = np.zeros((attr_ptr.size - 1, L))
    for t in range(attr_ptr.size - 1):
        for a in attrs[attr_ptr[t]:attr_ptr[t + 1]]:
            for f in range(feat_ptr[a], feat_ptr[a + 1]):
                scores[t, feat_label[f]] += w[f]
    grad_expected = np.zeros(w.size)
    for t in range(attr_ptr.size - 1):
        for a in attrs[attr_ptr[t]:attr_ptr[t + 1]]:
            for f in range(feat_ptr[a], feat_ptr[a + 1]):
                grad_expected[f] += scores[t, feat_label[f]]
    grad = np.zeros((threads, w.size), dtype=real)
    total = gather_scatter(sent_ptr, attr_ptr, attrs.astype(ids), feat_ptr.astype(ids), feat_label.astype(labels),
                           w, grad, L, 3, threads)
    tol = 1e-5 if real == np.float32 else 1e-12
    np.testing.assert_allclose(grad.sum(axis=0), grad_expected, rtol=tol, atol=tol)
    assert total == pytest.approx(scores[:, 0].sum(), rel=tol, abs=tol)
