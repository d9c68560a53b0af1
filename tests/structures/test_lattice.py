"""Correctness of the lattice kernels (crftk._lattice) against NumPy references.

The references (tests/lattice_reference.py) are written from the definitions:
brute-force enumeration of every labeling for tiny sentences, log-space
forward-backward / Viterbi for long ones, central finite differences for the
gradient.
"""

import functools

import numpy as np
import pytest

from crftk._lattice import Lattices, openmp_enabled

import lattice_reference as ref  # noqa: E402

I32 = np.int32

# ---------------------------------------------------------------------------
# tiny random corpora, enumerated


SEEDS = [0, 1, 2]
LABELS = [1, 2, 3, 4]
FEATS = ["supported", "complete"]
EDGES = ["no_edges", "edges"]


class Case:
    def __init__(self, corpus, w, gold, enums):
        self.c = corpus
        self.w = w
        self.gold = gold
        self.enums = enums
        self.lat = Lattices(*corpus.arrays())


@functools.lru_cache(maxsize=None)
def small_case(seed, L, feats, edges):
    rng = np.random.default_rng([seed, L, FEATS.index(feats), EDGES.index(edges)])
    # always a length-1 and a length-5 sentence, then random lengths 1..5
    lengths = [1, 5] + [int(x) for x in rng.integers(1, 6, size=8)]
    rng.shuffle(lengths)
    c = ref.random_corpus(rng, L, lengths, n_attrs=7, complete=(feats == "complete"),
                          n_eattrs=3 if edges == "edges" else 0)
    w = rng.normal(0.0, 1.0, c.P)
    gold = rng.integers(0, L, c.N).astype(I32)
    enums = [ref.Enumeration(c, t0, T) for _, t0, T in c.sentences()]
    case = Case(c, w, gold, enums)
    assert case.lat.n_params == c.P
    return case


CASES = [pytest.param(s, L, f, e, id=f"seed{s}-L{L}-{f}-{e}")
         for s in SEEDS for L in LABELS for f in FEATS for e in EDGES]
case_params = pytest.mark.parametrize("seed,L,feats,edges", CASES)


@case_params
def test_logz_and_node_marginals(seed, L, feats, edges):
    k = small_case(seed, L, feats, edges)
    marg, logz = k.lat.marginals(k.w)
    assert marg.shape == (k.c.N, L) and logz.shape == (k.c.S,)
    for (s, t0, T), en in zip(k.c.sentences(), k.enums):
        np.testing.assert_allclose(logz[s], en.logz(k.w), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(marg[t0:t0 + T], en.node_marginals(k.w, L),
                                   rtol=0, atol=1e-12)


@case_params
def test_viterbi(seed, L, feats, edges):
    k = small_case(seed, L, feats, edges)
    labels, scores = k.lat.viterbi(k.w)
    assert labels.shape == (k.c.N,) and scores.shape == (k.c.S,)
    for (s, t0, T), en in zip(k.c.sentences(), k.enums):
        sc = en.scores(k.w)
        best = sc.max()
        y = labels[t0:t0 + T]
        assert ((y >= 0) & (y < L)).all()
        np.testing.assert_allclose(scores[s], best, rtol=0, atol=1e-12)
        np.testing.assert_allclose(sc[ref.labeling_index(y, L)], best, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ref.ref_score(k.c, k.w, t0, y), best, rtol=0, atol=1e-12)
        top2 = np.sort(sc)[::-1][:2]
        if len(top2) == 1 or top2[0] - top2[1] > 1e-9:  # unique argmax: the path itself
            np.testing.assert_array_equal(y, en.Y[np.argmax(sc)])


@case_params
@pytest.mark.parametrize("k_best", [1, 3, 7, "all"])
def test_nbest(seed, L, feats, edges, k_best):
    k = small_case(seed, L, feats, edges)
    n_max = max(len(en.Y) for en in k.enums)
    # "all": more than every sentence has, so all lists come back short
    K = n_max + 2 if k_best == "all" else k_best
    paths, scores, counts = k.lat.nbest(k.w, K)
    assert paths.shape == (K, k.c.N) and scores.shape == (k.c.S, K) and counts.shape == (k.c.S,)
    for (s, t0, T), en in zip(k.c.sentences(), k.enums):
        sc = en.scores(k.w)
        top = np.sort(sc)[::-1]
        n = min(K, L ** T)
        assert counts[s] == n
        np.testing.assert_allclose(scores[s, :n], top[:n], rtol=0, atol=1e-12)
        assert np.all(np.diff(scores[s, :n]) <= 0)
        assert np.all(np.isneginf(scores[s, n:]))
        seg = paths[:, t0:t0 + T]
        assert (seg[n:] == -1).all()
        got = seg[:n]
        assert ((got >= 0) & (got < L)).all()
        assert len({tuple(r) for r in got.tolist()}) == n, "n-best paths are not distinct"
        for r in range(n):
            np.testing.assert_allclose(sc[ref.labeling_index(got[r], L)], scores[s, r],
                                       rtol=0, atol=1e-12)
        # the first path is a Viterbi path
        np.testing.assert_allclose(scores[s, 0], k.lat.viterbi(k.w)[1][s], rtol=0, atol=1e-12)


@case_params
def test_sequence_scores(seed, L, feats, edges):
    k = small_case(seed, L, feats, edges)
    rng = np.random.default_rng(seed + 100)
    for labels in (k.gold, rng.integers(0, L, k.c.N).astype(I32)):
        got = k.lat.sequence_scores(k.w, labels)
        assert got.shape == (k.c.S,)
        for (s, t0, T), en in zip(k.c.sentences(), k.enums):
            y = labels[t0:t0 + T]
            np.testing.assert_allclose(got[s], ref.ref_score(k.c, k.w, t0, y), rtol=0, atol=1e-12)
            np.testing.assert_allclose(got[s], en.scores(k.w)[ref.labeling_index(y, L)],
                                       rtol=0, atol=1e-12)


@case_params
def test_loglik_vs_enumeration(seed, L, feats, edges):
    k = small_case(seed, L, feats, edges)
    loss, grad = k.lat.loglik(k.w, k.gold)
    want_loss = 0.0
    want_grad = np.zeros(k.c.P)
    for (s, t0, T), en in zip(k.c.sentences(), k.enums):
        gi = ref.labeling_index(k.gold[t0:t0 + T], L)
        want_loss += en.logz(k.w) - en.scores(k.w)[gi]
        want_grad += en.expected_counts(k.w) - en.phi[gi]
    assert grad.shape == (k.c.P,)
    np.testing.assert_allclose(loss, want_loss, rtol=1e-12, atol=1e-11)
    np.testing.assert_allclose(grad, want_grad, rtol=0, atol=1e-11)
    # the weights were not touched
    assert np.isfinite(k.w).all()


# ---------------------------------------------------------------------------
# gradient vs central finite differences of the kernel's own loss


@pytest.mark.parametrize("seed,L,complete,n_eattrs,max_eattrs", [
    (10, 3, False, 0, 0),
    (11, 3, False, 3, 2),
    (12, 4, True, 2, 3),
    (13, 2, True, 0, 0),
    (14, 1, False, 2, 2),
    (15, 3, False, 2, 0),  # edge blocks in the layout, but no token uses them
])
def test_gradient_finite_differences(seed, L, complete, n_eattrs, max_eattrs):
    rng = np.random.default_rng(seed)
    lengths = [1] + [int(x) for x in rng.integers(1, 9, size=6)]
    c = ref.random_corpus(rng, L, lengths, n_attrs=6, complete=complete, n_eattrs=n_eattrs,
                          max_eattrs=max_eattrs)
    lat = Lattices(*c.arrays())
    w = rng.normal(0.0, 1.0, c.P)
    gold = rng.integers(0, L, c.N).astype(I32)
    _, grad = lat.loglik(w, gold)
    eps = 1e-6
    fd = np.empty(c.P)
    for p in range(c.P):
        wp = w.copy()
        wp[p] += eps
        wm = w.copy()
        wm[p] -= eps
        fd[p] = (lat.loglik(wp, gold)[0] - lat.loglik(wm, gold)[0]) / (2 * eps)
    err = np.abs(fd - grad) / np.maximum(1.0, np.abs(grad))
    assert err.max() < 1e-6, (int(err.argmax()), fd[err.argmax()], grad[err.argmax()])


# ---------------------------------------------------------------------------
# threads


@functools.lru_cache(maxsize=None)
def medium_case():
    rng = np.random.default_rng(2024)
    L = 9
    lengths = rng.integers(1, 41, size=300)
    c = ref.random_corpus(rng, L, lengths, n_attrs=150, complete=False, n_eattrs=5,
                          max_attrs=4)
    w = rng.normal(0.0, 1.0, c.P)
    gold = rng.integers(0, L, c.N).astype(I32)
    return c, Lattices(*c.arrays()), w, gold


def test_openmp_flag_is_bool():
    assert isinstance(openmp_enabled(), bool)


def test_medium_corpus_matches_log_space_reference():
    c, lat, w, gold = medium_case()
    loss, grad = lat.loglik(w, gold, 1)
    marg, logz = lat.marginals(w, 1)
    _, vscores = lat.viterbi(w, 1)
    want_loss = 0.0
    want_grad = np.zeros(c.P)
    for s, t0, T in c.sentences():
        state, trans = ref.log_potentials(c, w, t0, T)
        lz, m, xi = ref.log_forward_backward(state, trans)
        np.testing.assert_allclose(logz[s], lz, rtol=1e-10)
        np.testing.assert_allclose(marg[t0:t0 + T], m, rtol=0, atol=1e-10)
        np.testing.assert_allclose(vscores[s], ref.log_viterbi_score(state, trans), rtol=1e-12)
        y = gold[t0:t0 + T]
        want_loss += lz - ref.ref_score(c, w, t0, y)
        want_grad += (ref.expected_counts_from_marginals(c, t0, T, m, xi)
                      - ref.feature_counts(c, t0, y[None, :])[0])
    np.testing.assert_allclose(loss, want_loss, rtol=1e-10)
    np.testing.assert_allclose(grad, want_grad, rtol=0, atol=1e-8)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_threads_agree(n_threads):
    c, lat, w, gold = medium_case()
    loss1, grad1 = lat.loglik(w, gold, 1)
    lossn, gradn = lat.loglik(w, gold, n_threads)
    np.testing.assert_allclose(lossn, loss1, rtol=1e-12)
    np.testing.assert_allclose(gradn, grad1, rtol=1e-10, atol=1e-10)

    marg1, logz1 = lat.marginals(w, 1)
    margn, logzn = lat.marginals(w, n_threads)
    np.testing.assert_allclose(margn, marg1, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(logzn, logz1, rtol=1e-12)

    lab1, vs1 = lat.viterbi(w, 1)
    labn, vsn = lat.viterbi(w, n_threads)
    np.testing.assert_array_equal(labn, lab1)
    np.testing.assert_allclose(vsn, vs1, rtol=1e-12)

    p1, s1, c1 = lat.nbest(w, 4, 1)
    pn, sn, cn = lat.nbest(w, 4, n_threads)
    np.testing.assert_array_equal(pn, p1)
    np.testing.assert_array_equal(cn, c1)
    np.testing.assert_allclose(sn, s1, rtol=1e-12)
    # Viterbi and 1-best agree; the n-best paths score what they claim
    np.testing.assert_array_equal(p1[0], lab1)
    for s, t0, T in list(c.sentences())[:40]:
        for r in range(c1[s]):
            np.testing.assert_allclose(ref.ref_score(c, w, t0, p1[r, t0:t0 + T]), s1[s, r],
                                       rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------------------
# numerical stability on a long sentence with large weights


@functools.lru_cache(maxsize=None)
def long_case():
    rng = np.random.default_rng(77)
    L = 6
    c = ref.random_corpus(rng, L, [5000], n_attrs=40, complete=False, n_eattrs=4,
                          max_attrs=3, max_eattrs=2)
    w = rng.uniform(-20.0, 20.0, c.P)
    gold = rng.integers(0, L, c.N).astype(I32)
    return c, Lattices(*c.arrays()), w, gold


def test_long_sentence_marginals_and_logz():
    c, lat, w, gold = long_case()
    marg, logz = lat.marginals(w)
    assert np.isfinite(marg).all() and np.isfinite(logz).all()
    np.testing.assert_allclose(marg.sum(axis=1), 1.0, rtol=0, atol=1e-9)
    state, trans = ref.log_potentials(c, w, 0, c.N)
    lz, m, xi = ref.log_forward_backward(state, trans)
    assert abs(logz[0] - lz) <= 1e-6 * abs(lz)
    np.testing.assert_allclose(marg, m, rtol=0, atol=1e-7)


def test_long_sentence_loglik():
    c, lat, w, gold = long_case()
    loss, grad = lat.loglik(w, gold)
    assert np.isfinite(loss) and np.isfinite(grad).all()
    state, trans = ref.log_potentials(c, w, 0, c.N)
    lz, m, xi = ref.log_forward_backward(state, trans)
    want = lz - ref.ref_score(c, w, 0, gold)
    assert abs(loss - want) <= 1e-6 * abs(want)
    want_grad = (ref.expected_counts_from_marginals(c, 0, c.N, m, xi)
                 - ref.feature_counts(c, 0, gold[None, :])[0])
    np.testing.assert_allclose(grad, want_grad, rtol=1e-7, atol=1e-6)


def test_long_sentence_viterbi():
    c, lat, w, gold = long_case()
    labels, scores = lat.viterbi(w)
    assert np.isfinite(scores).all()
    np.testing.assert_allclose(scores, lat.sequence_scores(w, labels), rtol=1e-12)
    np.testing.assert_allclose(scores[0], ref.ref_score(c, w, 0, labels), rtol=1e-12)
    state, trans = ref.log_potentials(c, w, 0, c.N)
    np.testing.assert_allclose(scores[0], ref.log_viterbi_score(state, trans), rtol=1e-12)
    paths, nscores, counts = lat.nbest(w, 3)
    assert counts[0] == 3
    np.testing.assert_array_equal(paths[0], labels)
    np.testing.assert_allclose(nscores[0, 0], scores[0], rtol=1e-12)
    for r in range(3):
        np.testing.assert_allclose(nscores[0, r], ref.ref_score(c, w, 0, paths[r]), rtol=1e-12)


# ---------------------------------------------------------------------------
# input validation


def tiny_corpus():
    # 2 sentences (lengths 2, 1), 3 attributes, L = 2, 1 edge attribute
    return dict(
        sent_ptr=np.array([0, 2, 3], I32),
        attr_ptr=np.array([0, 1, 3, 3], I32),
        attrs=np.array([0, 1, 2], I32),
        eattr_ptr=np.array([0, 0, 1, 1], I32),
        eattrs=np.array([0], I32),
        feat_ptr=np.array([0, 2, 3, 4], I32),
        feat_label=np.array([0, 1, 1, 0], I32),
        n_labels=2,
        n_edge_attrs=1,
    )


def build(**overrides):
    kw = tiny_corpus()
    kw.update(overrides)
    return Lattices(kw["sent_ptr"], kw["attr_ptr"], kw["attrs"], kw["eattr_ptr"], kw["eattrs"],
                    kw["feat_ptr"], kw["feat_label"], kw["n_labels"], kw["n_edge_attrs"])


def test_valid_tiny_corpus_builds():
    lat = build()
    assert lat.n_params == 4 + 4 + 2 + 2 + 4
    w = np.zeros(lat.n_params)
    # all-zero weights: uniform distribution over 2**2 and 2**1 labelings
    loss, _ = lat.loglik(w, np.zeros(3, I32))
    np.testing.assert_allclose(loss, 3 * np.log(2), rtol=1e-14)


@pytest.mark.parametrize("delta", [-1, 1])
def test_weight_length_mismatch(delta):
    lat = build()
    w = np.zeros(lat.n_params + delta)
    labels = np.zeros(3, I32)
    with pytest.raises(ValueError):
        lat.loglik(w, labels)
    with pytest.raises(ValueError):
        lat.viterbi(w)
    with pytest.raises(ValueError):
        lat.marginals(w)
    with pytest.raises(ValueError):
        lat.nbest(w, 2)
    with pytest.raises(ValueError):
        lat.sequence_scores(w, labels)


@pytest.mark.parametrize("bad", [-1, 3, 1000])
def test_attribute_id_out_of_range(bad):
    with pytest.raises(ValueError):
        build(attrs=np.array([0, bad, 2], I32))


@pytest.mark.parametrize("bad", [-1, 1])
def test_edge_attribute_id_out_of_range(bad):
    with pytest.raises(ValueError):
        build(eattrs=np.array([bad], I32))


@pytest.mark.parametrize("bad", [-1, 2])
def test_feature_label_out_of_range(bad):
    with pytest.raises(ValueError):
        build(feat_label=np.array([0, 1, bad, 0], I32))


@pytest.mark.parametrize("bad", [-1, 2])
def test_gold_label_out_of_range(bad):
    lat = build()
    with pytest.raises(ValueError):
        lat.loglik(np.zeros(lat.n_params), np.array([0, bad, 0], I32))


def test_label_count_mismatch():
    lat = build()
    w = np.zeros(lat.n_params)
    with pytest.raises(ValueError):
        lat.loglik(w, np.zeros(2, I32))
    with pytest.raises(ValueError):
        lat.sequence_scores(w, np.zeros(4, I32))


def test_sequence_scores_label_out_of_range():
    # The bad label sits in the first (shorter) sentence, so the unchecked
    # reads stay inside the kernel's buffers while this is unfixed.
    lat = Lattices(np.array([0, 2, 5], I32), np.zeros(6, I32), np.zeros(0, I32),
                   np.zeros(6, I32), np.zeros(0, I32), np.array([0], I32),
                   np.zeros(0, I32), 2, 0)
    with pytest.raises(ValueError):
        lat.sequence_scores(np.zeros(lat.n_params), np.array([0, 2, 0, 0, 0], I32))


def test_pointer_arrays_must_be_monotone():
    with pytest.raises(ValueError, match="non-decreasing"):
        Lattices(np.array([0, 2], I32), np.array([0, 3, 1], I32), np.zeros(1, I32),
                 np.zeros(3, I32), np.zeros(0, I32), np.array([0, 1], I32),
                 np.zeros(1, I32), 2, 0)
    with pytest.raises(ValueError):
        Lattices(np.array([0, 2], I32), np.zeros(3, I32), np.zeros(0, I32),
                 np.zeros(3, I32), np.zeros(0, I32), np.zeros(0, I32),
                 np.zeros(0, I32), 2, 0)


def test_empty_sentence():
    with pytest.raises(ValueError):
        build(sent_ptr=np.array([0, 2, 2, 3], I32))
    with pytest.raises(ValueError):
        build(sent_ptr=np.array([0, 0, 3], I32))


def test_nbest_k_must_be_positive():
    lat = build()
    with pytest.raises(ValueError):
        lat.nbest(np.zeros(lat.n_params), 0)


@pytest.mark.parametrize("seed,edges", [(0, 0), (1, 2), (2, 0)])
def test_perceptron_epoch_matches_a_plain_reference(seed, edges):
    from lattice_reference import all_labelings, feature_counts, random_corpus
    rng = np.random.default_rng(seed)
    c = random_corpus(rng, 3, [1, 3, 4, 2, 3], n_eattrs=edges)
    lat = Lattices(*c.arrays())
    y = rng.integers(0, c.L, size=c.N).astype(I32)
    order = rng.permutation(c.S).astype(I32)
    w = rng.normal(size=c.P)
    u = np.zeros(c.P)
    w_ref, u_ref, cc = w.copy(), u.copy(), 1.0
    mistakes = 0
    for s in order:
        t0, T = int(c.sent_ptr[s]), int(c.sent_ptr[s + 1] - c.sent_ptr[s])
        Y = all_labelings(c.L, T)
        phi = feature_counts(c, t0, Y)
        best = Y[int(np.argmax(phi @ w_ref))]          # ties: first maximum, as the kernel
        gold = y[t0:t0 + T]
        if not np.array_equal(best, gold):
            mistakes += 1
            delta = feature_counts(c, t0, gold[None, :])[0] - feature_counts(c, t0, best[None, :])[0]
            w_ref += delta
            u_ref += cc * delta
        cc += 1.0
    n_sent, _, c_end = lat.perceptron_epoch(w, u, y, order, 1.0)
    assert n_sent == mistakes and c_end == cc
    assert np.allclose(w, w_ref) and np.allclose(u, u_ref)


def test_perceptron_epoch_validates():
    lat = build()
    w = np.zeros(lat.n_params)
    with pytest.raises(ValueError):
        lat.perceptron_epoch(w, np.zeros(3), np.zeros(lat.n_tokens, I32), np.zeros(1, I32), 1.0)
    with pytest.raises(ValueError):
        lat.perceptron_epoch(w, np.zeros_like(w), np.zeros(lat.n_tokens, I32),
                             np.array([lat.n_sentences], I32), 1.0)


@pytest.mark.parametrize("seed,edges", [(3, 0), (4, 2)])
def test_state_matrix_and_viterbi_scores_against_enumeration(seed, edges):
    from lattice_reference import all_labelings, feature_counts, random_corpus
    rng = np.random.default_rng(seed)
    c = random_corpus(rng, 3, [1, 4, 3], n_eattrs=edges)
    lat = Lattices(*c.arrays())
    w = rng.normal(size=c.P)
    S = lat.state_matrix(w)
    fwd, bwd = lat.viterbi_scores(w)
    for s, t0, T in c.sentences():
        Y = all_labelings(c.L, T)
        scores = feature_counts(c, t0, Y) @ w
        for t in range(T):
            for y in range(c.L):
                through = scores[Y[:, t] == y].max()
                assert fwd[t0 + t, y] + bwd[t0 + t, y] == pytest.approx(through)
                # one-token labelings isolate the state potential (with start and end weights)
        if T == 1:
            assert np.allclose(S[t0], scores)
    assert np.allclose(fwd[c.sent_ptr[:-1]], S[c.sent_ptr[:-1]])


@pytest.mark.parametrize("seed,edges", [(5, 0), (6, 2)])
def test_sgd_epoch_matches_dense_updates(seed, edges):
    from lattice_reference import all_labelings, feature_counts, random_corpus
    rng = np.random.default_rng(seed)
    c = random_corpus(rng, 3, [2, 3, 1, 4], n_eattrs=edges)
    lat = Lattices(*c.arrays())
    y = rng.integers(0, c.L, size=c.N).astype(I32)
    order = rng.permutation(c.S).astype(I32)
    lam, t0_rate = 0.3, 5.0
    v = rng.normal(size=c.P)
    a = 0.8
    w_ref = a * v
    loss_ref, t = 0.0, 2.0
    for s in order:
        t0, T = int(c.sent_ptr[s]), int(c.sent_ptr[s + 1] - c.sent_ptr[s])
        phi = feature_counts(c, t0, all_labelings(c.L, T))
        scores = phi @ w_ref
        logz = np.logaddexp.reduce(scores)
        gold = feature_counts(c, t0, y[None, t0:t0 + T])[0]
        loss_ref += logz - gold @ w_ref
        grad = np.exp(scores - logz) @ phi - gold
        eta = 1.0 / (lam * (t0_rate + t))
        w_ref = (1 - eta * lam) * w_ref - eta * grad
        t += 1
    a_end, t_end, loss = lat.sgd_epoch(v, a, y, order, lam, t0_rate, 2.0)
    assert t_end == t
    assert loss == pytest.approx(loss_ref)
    assert np.allclose(a_end * v, w_ref)


@case_params
def test_loglik_curvature_is_the_independent_token_variance(seed, L, feats, edges):
    """The curvature output: sum over tokens of p(1-p) for each state feature (with the
    enumerated marginals), start and end; zero elsewhere; loss and gradient unchanged."""
    k = small_case(seed, L, feats, edges)
    c = k.c
    h = np.full(c.P, np.nan)
    loss, grad = k.lat.loglik(k.w, k.gold, 2, h)
    loss1, grad1 = k.lat.loglik(k.w, k.gold, 1)
    assert loss == pytest.approx(loss1, rel=1e-12)
    np.testing.assert_allclose(grad, grad1, rtol=1e-12, atol=1e-12)
    expect = np.zeros(c.P)
    for (s, t0, T), en in zip(c.sentences(), k.enums):
        m = en.node_marginals(k.w, L)
        v = m * (1.0 - m)
        expect[c.off_start:c.off_start + L] += v[0]
        expect[c.off_end:c.off_end + L] += v[T - 1]
        for t in range(T):
            for a in c.token_attrs(t0 + t):
                for f, y in c.features(a):
                    expect[f] += v[t, y]
    np.testing.assert_allclose(h, expect, rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="curvature"):
        k.lat.loglik(k.w, k.gold, 1, np.zeros(c.P + 1))
