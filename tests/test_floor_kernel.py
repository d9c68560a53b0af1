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


def _floor_script():
    import importlib.util
    import sys
    from tests.corpora import REPO
    spec = importlib.util.spec_from_file_location("floor_bench", REPO / "benchmarks" / "floor.py")
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    spec.loader.exec_module(module)        # puts the repository first on sys.path for its own imports
    sys.path[:] = path
    return module


@pytest.mark.parametrize("threads", [1, 2])
def test_forward_backward_alone_is_the_pass_with_zero_state_weights(threads):
    # floor.py's "forward-backward alone": the same sentences with no state attributes give, bit for bit,
    # the loss and the transition/start/end gradient of the real pass whose state weights are all 0
    from crftk.features.space import FeatureSpace
    from crftk.features.templates import parse_template
    from crftk.structures.chain import chain_lattices
    from tests.corpora import random_corpus
    floor = _floor_script()
    space, corpus = FeatureSpace.fit(random_corpus(30, seed=5), parse_template("U00:%x[0,0]\nU01:%x[-1,0]\nB\n"))
    lat = chain_lattices(space, corpus)
    bare = floor.bare_lattices(corpus, space.n_labels, space.n_edge_attrs)
    n_state = lat.n_params - bare.n_params
    assert n_state > 0
    w = np.random.default_rng(2).standard_normal(lat.n_params)
    w[:n_state] = 0.0
    labels = np.asarray(corpus.labels, dtype=np.int32)
    loss, grad = lat.loglik(w, labels, threads)
    bare_loss, bare_grad = bare.loglik(np.ascontiguousarray(w[n_state:]), labels, threads)
    assert bare_loss == loss
    np.testing.assert_array_equal(bare_grad, grad[n_state:])
    assert np.isfinite(floor.OptimizerStep(1000)())
