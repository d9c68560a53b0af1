"""The semi-Markov kernels (crftk._semimarkov) against brute-force enumeration of segmentations.

A segmentation's feature counts are the chain features (lattice_reference.feature_counts) of the
position tags it implies plus one count per (segment attribute of each segment, its label), so
log Z, marginals, Viterbi, n-best and the gradient all follow from enumerating segmentations.
"""

import itertools

import numpy as np
import pytest

from crftk._lattice import Lattices
from crftk._semimarkov import Segments
from lattice_reference import feature_counts, logsumexp, random_corpus

S, B, I, E = range(4)


def random_labels(rng, Y):
    """A random segment label set: seg_map [Y, 4] of token label ids (-1 absent), seg_max [Y],
    and the number of token labels. Label 0 is like O: one-token segments only."""
    rows, k = [], 0
    smax = []
    for y in range(Y):
        if y == 0:
            rows.append([k, -1, -1, -1])
            k += 1
            smax.append(1)
            continue
        kind = rng.integers(0, 3)       # 0: S B I E, 1: B E (two tokens at most) and S, 2: B I E only
        row = [-1, -1, -1, -1]
        for pos in ((S, B, I, E), (S, B, E), (B, I, E))[kind]:
            row[pos] = k
            k += 1
        rows.append(row)
        smax.append(int(rng.integers(2, 5)) if kind != 1 else 2)
    perm = rng.permutation(k)           # token label ids in no particular order
    smap = np.array([[perm[x] if x >= 0 else -1 for x in r] for r in rows], dtype=np.int32)
    return smap, np.array(smax, dtype=np.int32), k


def segmentations(T, smap, smax):
    """Every segmentation of T tokens: lists of (start, length, label)."""
    Y = smap.shape[0]

    def lengths(y):
        out = []
        if smap[y, S] >= 0:
            out.append(1)
        if smap[y, B] >= 0 and smap[y, E] >= 0:
            top = smax[y] if smap[y, I] >= 0 else min(smax[y], 2)
            out.extend(range(2, top + 1))
        return out

    def rec(t):
        if t == T:
            yield []
            return
        for y in range(Y):
            for n in lengths(y):
                if t + n <= T:
                    for rest in rec(t + n):
                        yield [(t, n, y)] + rest
    return list(rec(0))


def position_tags(seg, smap, T):
    tags = np.zeros(T, dtype=np.int64)
    for t, n, y in seg:
        if n == 1:
            tags[t] = smap[y, S]
        else:
            tags[t] = smap[y, B]
            tags[t + 1:t + n - 1] = smap[y, I]
            tags[t + n - 1] = smap[y, E]
    return tags


class Setup:
    def __init__(self, seed, lengths=(3, 1, 4, 2), Y=3, n_seg_attrs=5, stride=None, smap=None, smax=None,
                 valued=False):
        rng = np.random.default_rng(seed)
        if smap is None:
            smap, smax, K = random_labels(rng, Y)
        else:
            K = int(smap.max()) + 1
        self.smap, self.smax, self.K, self.Y = smap, smax, K, smap.shape[0]
        self.c = random_corpus(rng, K, lengths, valued=valued)
        self.stride = stride or int(max(smax.max(), 1))
        N = self.c.N
        counts = rng.integers(0, 3, N * self.stride)
        counts[rng.random(N * self.stride) < 0.3] = 0
        if n_seg_attrs == 0:
            counts[:] = 0
        self.seg_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.seg_attrs = rng.integers(0, max(n_seg_attrs, 1), int(counts.sum())).astype(np.int32)
        self.A = n_seg_attrs
        self.P = self.c.P + n_seg_attrs * self.Y
        self.kernel = Segments(self.c.sent_ptr, self.c.attr_ptr, self.c.attrs, self.c.feat_ptr, self.c.feat_label,
                               K, self.c.layout.offsets(), smap, smax, self.seg_ptr, self.seg_attrs, n_seg_attrs,
                               self.c.P, values=self.c.values)
        self.w = rng.normal(0, 0.7, self.P)

    def enumerate(self, t0, T):
        segs = segmentations(T, self.smap, self.smax)
        tags = np.array([position_tags(g, self.smap, T) for g in segs])
        phi = np.zeros((len(segs), self.P))
        phi[:, :self.c.P] = feature_counts(self.c, t0, tags)
        for m, g in enumerate(segs):
            for t, n, y in g:
                r = (t0 + t) * self.stride + n - 1
                for a in self.seg_attrs[self.seg_ptr[r]:self.seg_ptr[r + 1]]:
                    phi[m, self.c.P + a * self.Y + y] += 1
        return segs, tags, phi


SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_log_z_and_marginals_match_enumeration(seed):
    st = Setup(seed, valued=seed % 2 == 1)
    marg, logz = st.kernel.marginals(st.w, 2)
    for s, t0, T in st.c.sentences():
        _, tags, phi = st.enumerate(t0, T)
        scores = phi @ st.w
        z = logsumexp(scores)
        assert logz[s] == pytest.approx(z, abs=1e-10)
        p = np.exp(scores - z)
        for t in range(T):
            expected = np.bincount(tags[:, t], weights=p, minlength=st.K)
            np.testing.assert_allclose(marg[t0 + t], expected, atol=1e-10)


@pytest.mark.parametrize("seed", SEEDS)
def test_viterbi_and_nbest_match_enumeration(seed):
    st = Setup(seed)
    best, best_scores = st.kernel.viterbi(st.w, 2)
    k = 5
    paths, nscores, counts = st.kernel.nbest(st.w, k, 2)
    for s, t0, T in st.c.sentences():
        _, tags, phi = st.enumerate(t0, T)
        scores = phi @ st.w
        order = np.argsort(-scores, kind="stable")
        assert best_scores[s] == pytest.approx(scores[order[0]], abs=1e-10)
        np.testing.assert_array_equal(best[t0:t0 + T], tags[order[0]])
        n = min(k, len(scores))
        assert counts[s] == n
        np.testing.assert_allclose(nscores[s, :n], scores[order[:n]], atol=1e-10)
        for r in range(n):      # each listed path has its listed score (ties may reorder paths)
            row = [i for i in range(len(tags)) if np.array_equal(tags[i], paths[r, t0:t0 + T])]
            assert len(row) == 1 and scores[row[0]] == pytest.approx(nscores[s, r], abs=1e-10)
        assert len({tuple(paths[r, t0:t0 + T]) for r in range(n)}) == n


@pytest.mark.parametrize("seed", SEEDS)
def test_loglik_gradient_counts_and_scores(seed):
    st = Setup(seed, valued=seed % 3 == 0)
    rng = np.random.default_rng(100 + seed)
    gold = np.zeros(st.c.N, dtype=np.int32)
    nll, grad_expected = 0.0, np.zeros(st.P)
    counts_expected = np.zeros(st.P)
    sent_w = rng.random(st.c.S)
    score_expected = []
    for s, t0, T in st.c.sentences():
        _, tags, phi = st.enumerate(t0, T)
        g = int(rng.integers(0, len(tags)))
        gold[t0:t0 + T] = tags[g]
        scores = phi @ st.w
        z = logsumexp(scores)
        nll += z - scores[g]
        grad_expected += np.exp(scores - z) @ phi - phi[g]
        counts_expected += sent_w[s] * phi[g]
        score_expected.append(scores[g])
    for threads in (1, 3):
        value, grad = st.kernel.loglik(st.w, gold, threads)
        assert value == pytest.approx(nll, abs=1e-9)
        np.testing.assert_allclose(grad, grad_expected, atol=1e-9)
    np.testing.assert_allclose(st.kernel.counts(gold, sent_w, 2), counts_expected, atol=1e-12)
    np.testing.assert_allclose(st.kernel.scores(st.w, gold), score_expected, atol=1e-10)
    # finite differences of the value along a random direction
    d = rng.normal(size=st.P)
    h = 1e-6
    fd = (st.kernel.loglik(st.w + h * d, gold)[0] - st.kernel.loglik(st.w - h * d, gold)[0]) / (2 * h)
    assert fd == pytest.approx(grad_expected @ d, rel=1e-5, abs=1e-6)


def test_single_token_segments_are_the_token_crf():
    """Every segment label with one-token segments only: the chain CRF over their tags."""
    rng = np.random.default_rng(7)
    L = 4
    smap = np.full((L, 4), -1, dtype=np.int32)
    smap[:, S] = rng.permutation(L)
    smax = np.ones(L, dtype=np.int32)
    st = Setup(3, lengths=(5, 1, 7, 3), smap=smap, smax=smax, n_seg_attrs=0, stride=1)
    c = st.c
    chain = Lattices(*c.arrays()[:-1], values=c.values)
    w = st.w
    y = rng.integers(0, L, c.N).astype(np.int32)
    v1, g1 = st.kernel.loglik(w, y)
    v2, g2 = chain.loglik(w, y)
    assert v1 == pytest.approx(v2, rel=1e-12)
    np.testing.assert_allclose(g1, g2, atol=1e-10)
    m1, z1 = st.kernel.marginals(w)
    m2, z2 = chain.marginals(w)
    np.testing.assert_allclose(z1, z2, rtol=1e-12)
    np.testing.assert_allclose(m1, m2, atol=1e-10)
    np.testing.assert_array_equal(st.kernel.viterbi(w)[0], chain.viterbi(w)[0])
    p1, s1, n1 = st.kernel.nbest(w, 4)
    p2, s2, n2 = chain.nbest(w, 4)
    np.testing.assert_array_equal(n1, n2)
    np.testing.assert_allclose(s1, s2, atol=1e-10)


def test_unbounded_segments_without_segment_features_are_the_iobes_crf():
    """Segments as long as the sentence and no segment attributes: the token CRF over the
    position tags, restricted to the labelings that are segmentations (brute force over tags)."""
    smap = np.array([[0, -1, -1, -1], [1, 2, 3, 4], [5, 6, 7, 8]], dtype=np.int32)
    T = 5
    smax = np.full(3, T, dtype=np.int32)
    st = Setup(11, lengths=(T,), smap=smap, smax=smax, n_seg_attrs=0, stride=T)
    K = st.K
    valid = []
    for tags in itertools.product(range(K), repeat=T):
        ok, inside = True, None
        for t, k in enumerate(tags):
            y = int(np.flatnonzero((smap == k).any(axis=1))[0])
            pos = int(np.flatnonzero(smap[y] == k)[0])
            if pos in (S, B):
                ok &= inside is None
                inside = y if pos == B else None
            else:
                ok &= inside == y
                inside = None if pos == E else inside
        if ok and inside is None:
            valid.append(tags)
    phi = feature_counts(st.c, 0, np.array(valid))
    scores = phi @ st.w[:st.c.P]
    _, logz = st.kernel.marginals(st.w)
    assert logz[0] == pytest.approx(logsumexp(scores), abs=1e-10)
    assert len(valid) == len(segmentations(T, smap, smax))


def test_bad_gold_labels_are_refused():
    smap = np.array([[0, -1, -1, -1], [1, 2, 3, 4]], dtype=np.int32)
    st = Setup(2, lengths=(3,), smap=smap, smax=np.array([1, 3], dtype=np.int32), n_seg_attrs=2)
    with pytest.raises(ValueError, match="no segmentation"):
        st.kernel.loglik(st.w, np.array([3, 0, 0], dtype=np.int32))      # I-y after nothing
    with pytest.raises(ValueError, match="no segmentation"):
        st.kernel.loglik(st.w, np.array([2, 0, 4], dtype=np.int32))      # B-y then O
    with pytest.raises(ValueError, match="out of range"):
        st.kernel.loglik(st.w, np.array([9, 0, 0], dtype=np.int32))
    with pytest.raises(ValueError, match="weight vector"):
        st.kernel.viterbi(st.w[:-1])
