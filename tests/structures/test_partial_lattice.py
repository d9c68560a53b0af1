"""The chain kernels on partially annotated sentences and on restricted lattices, against
brute-force enumeration (tests/lattice_reference.py): the marginal likelihood of a partial
annotation (Tsuboi et al. 2008) and its gradient, the moments of a label count (the expected
entity ratio's), and Viterbi, n-best and marginals over the labelings a mask allows."""

import numpy as np
import pytest

from crftk._lattice import Lattices

import lattice_reference as ref  # noqa: E402

I32 = np.int32
CASES = [(seed, L, complete, edges, valued)
         for seed in (0, 1) for L in (2, 3) for complete in (False, True)
         for edges in (0, 2) for valued in (False, True)]
# five labels: restricted steps through the label lists and through the full matrix both occur
CASES += [(2, 5, complete, edges, False) for complete in (False, True) for edges in (0, 2)]


def case(seed, L, complete, edges, valued):
    rng = np.random.default_rng([seed, L, complete, edges, valued])
    lengths = [1, 4, 3, 2, 4, 1, 3]
    c = ref.random_corpus(rng, L, lengths, complete=complete, n_eattrs=edges, valued=valued)
    w = rng.normal(0.0, 1.0, c.P)
    gold = rng.integers(0, L, c.N).astype(I32)
    allowed = np.zeros((c.N, L), dtype=np.uint8)
    allowed[np.arange(c.N), gold] = 1
    kind = rng.integers(0, 3, c.N)          # 0 labeled, 1 unknown, 2 a random set
    allowed[kind == 1] = 1
    for t in np.flatnonzero(kind == 2):
        allowed[t, rng.random(L) < 0.5] = 1
    labels = gold.copy()
    labels[allowed.sum(axis=1) > 1] = -1
    labels[0:1] = gold[0:1]                 # the first sentence (one token) stays labeled
    allowed[0] = 0
    allowed[0, gold[0]] = 1
    return c, w, labels, allowed


def consistent(enum, allowed, t0):
    rows = np.arange(enum.T)
    return allowed[t0 + rows, enum.Y].all(axis=1)


def reference(c, w, labels, allowed, counted=None):
    loss, grad, expected, grad_e = 0.0, np.zeros(c.P), 0.0, np.zeros(c.P)
    for _, t0, T in c.sentences():
        e = ref.Enumeration(c, t0, T)
        scores = e.scores(w)
        p = np.exp(scores - ref.logsumexp(scores))
        keep = consistent(e, allowed, t0)
        q = np.where(keep, np.exp(scores - ref.logsumexp(scores[keep])), 0.0)
        loss += ref.logsumexp(scores) - ref.logsumexp(scores[keep])
        grad += p @ e.phi - q @ e.phi
        if counted is not None:
            G = counted[e.Y].sum(axis=1)
            expected += p @ G
            grad_e += (p * G) @ (e.phi - p @ e.phi)
    return loss, grad, expected, grad_e


@pytest.mark.parametrize("seed,L,complete,edges,valued", CASES)
def test_partial_likelihood_and_moments_match_enumeration(seed, L, complete, edges, valued):
    c, w, labels, allowed = case(seed, L, complete, edges, valued)
    lat = Lattices(*c.arrays())
    counted = np.zeros(L)
    counted[1:] = 1.0
    want = reference(c, w, labels, allowed, counted)
    for threads in (1, 2):
        loss, grad, expected, grad_e = lat.loglik(w, labels, threads, allowed=allowed, entity=counted)
        assert loss == pytest.approx(want[0], rel=1e-10, abs=1e-10)
        np.testing.assert_allclose(grad, want[1], rtol=1e-9, atol=1e-10)
        assert expected == pytest.approx(want[2], rel=1e-10)
        np.testing.assert_allclose(grad_e, want[3], rtol=1e-9, atol=1e-10)
    # without the moments, the same likelihood
    loss2, grad2 = lat.loglik(w, labels, 1, allowed=allowed)
    assert loss2 == loss
    np.testing.assert_array_equal(grad2, lat.loglik(w, labels, 1, allowed=allowed, entity=counted)[1])


def test_partial_gradient_matches_finite_differences():
    c, w, labels, allowed = case(3, 3, False, 2, True)
    lat = Lattices(*c.arrays())
    _, grad = lat.loglik(w, labels, allowed=allowed)
    rng = np.random.default_rng(0)
    for k in rng.choice(c.P, 12, replace=False):
        h = 1e-5
        up, down = w.copy(), w.copy()
        up[k] += h
        down[k] -= h
        fd = (lat.loglik(up, labels, allowed=allowed)[0] - lat.loglik(down, labels, allowed=allowed)[0]) / (2 * h)
        assert grad[k] == pytest.approx(fd, rel=1e-5, abs=1e-7)


def test_fully_labeled_corpus_gives_todays_pass_exactly():
    c, w, labels, allowed = case(0, 3, False, 2, False)
    gold = np.where(labels < 0, allowed.argmax(axis=1), labels).astype(I32)
    onehot = np.zeros_like(allowed)
    onehot[np.arange(c.N), gold] = 1
    lat = Lattices(*c.arrays())
    loss, grad = lat.loglik(w, gold, 2)
    loss2, grad2 = lat.loglik(w, gold, 2, allowed=onehot)
    assert loss == loss2
    np.testing.assert_array_equal(grad, grad2)


def test_every_token_unknown_gives_zero_loss():
    c, w, labels, allowed = case(1, 2, True, 0, False)
    free = np.ones_like(allowed)
    loss, grad = Lattices(*c.arrays()).loglik(w, np.full(c.N, -1, I32), allowed=free)
    assert loss == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(grad, 0.0, atol=1e-12)


@pytest.mark.parametrize("seed,L,complete,edges,valued", CASES[:8])
def test_decoding_over_the_allowed_labelings(seed, L, complete, edges, valued):
    c, w, _, allowed = case(seed, L, complete, edges, valued)
    lat = Lattices(*c.arrays())
    best, best_scores = lat.viterbi(w, 2, allowed=allowed)
    marg, logz = lat.marginals(w, 2, allowed=allowed)
    k = 4
    paths, nscores, counts = lat.nbest(w, k, 2, allowed=allowed)
    for s, t0, T in c.sentences():
        e = ref.Enumeration(c, t0, T)
        scores = e.scores(w)
        keep = consistent(e, allowed, t0)
        top = np.sort(scores[keep])[::-1]
        assert best_scores[s] == pytest.approx(top[0], abs=1e-9)
        assert keep[ref.labeling_index(best[t0:t0 + T], L)]
        assert logz[s] == pytest.approx(ref.logsumexp(scores[keep]), abs=1e-9)
        q = np.where(keep, np.exp(scores - logz[s]), 0.0)
        for t in range(T):
            np.testing.assert_allclose(marg[t0 + t], np.bincount(e.Y[:, t], weights=q, minlength=L), atol=1e-10)
        n = min(k, int(keep.sum()))
        assert counts[s] == n
        np.testing.assert_allclose(nscores[s, :n], top[:n], atol=1e-9)
        assert (paths[n:, t0:t0 + T] == -1).all()
        for r in range(n):
            assert keep[ref.labeling_index(paths[r, t0:t0 + T], L)]


def test_infeasible_annotation_is_refused():
    c, w, labels, allowed = case(0, 2, True, 0, False)
    w = np.zeros(c.P)
    w[c.off_trans:c.off_trans + 4] = [0.0, -1e4, -1e4, 0.0]     # the label never changes
    s, t0, T = next((s, t0, T) for s, t0, T in c.sentences() if T >= 2)
    labels, allowed = np.zeros(c.N, I32), np.zeros((c.N, 2), np.uint8)
    allowed[:, 0] = 1
    labels[t0 + 1] = -1
    allowed[t0 + 1] = [0, 1]          # a set of one label, written as a set: first 0, then 1
    with pytest.raises(ValueError, match=f"sentence {s}: no labeling"):
        Lattices(*c.arrays()).loglik(w, labels, allowed=allowed)


def test_mask_checks():
    c, w, labels, allowed = case(0, 2, False, 0, False)
    lat = Lattices(*c.arrays())
    with pytest.raises(ValueError, match="need the allowed mask"):
        lat.loglik(w, labels)
    with pytest.raises(ValueError, match="tokens x labels"):
        lat.viterbi(w, allowed=allowed[:-1])
    empty = allowed.copy()
    empty[2] = 0
    with pytest.raises(ValueError, match="allows no label"):
        lat.marginals(w, allowed=empty)
    wrong = allowed.copy()
    wrong[0] = 1 - wrong[0]
    with pytest.raises(ValueError, match="does not allow its own label"):
        lat.loglik(w, labels, allowed=wrong)
    for bad in (-2, 2):
        with pytest.raises(ValueError, match="label out of range"):
            lat.loglik(w, np.where(labels < 0, bad, labels).astype(I32), allowed=allowed)


def test_pair_states_follow_the_tags_each_token_allows():
    from corpora import random_corpus as conll_corpus
    from crftk.features.space import FeatureSpace
    from crftk.features.templates import parse_template
    from crftk.structures.pairs import BOS, Pairs, pair_sentences

    sents = list(pair_sentences(conll_corpus(6, seed=4, max_len=4), -1))
    space, corpus = FeatureSpace.fit(sents, parse_template("U:%x[0,0]\nB\n"))
    structure = Pairs(space)
    tags = structure.output_names
    rng = np.random.default_rng(1)
    tag_allowed = (rng.random((corpus.n_tokens, len(tags))) < 0.6).astype(np.uint8)
    tag_allowed[np.arange(corpus.n_tokens), rng.integers(0, len(tags), corpus.n_tokens)] = 1
    got = structure.state_allowed(corpus, tag_allowed)
    starts = set(corpus.sent_ptr[:-1].tolist())
    for t in range(corpus.n_tokens):
        for j, pair in enumerate(space.labels):
            a, b = pair.split("|")
            ok = tag_allowed[t, tags.index(b)] == 1
            ok &= (a == BOS) if t in starts else (a != BOS and tag_allowed[t - 1, tags.index(a)] == 1)
            assert got[t, j] == ok, (t, pair)
    with pytest.raises(ValueError, match="tag mask"):
        structure.state_allowed(corpus, tag_allowed[:, 1:])


@pytest.mark.parametrize("L", [3, 5])
def test_allowed_labels_far_below_the_best_one(L):
    """Where every allowed label's potential underflows against the full pass's largest
    (exp(-800)), the restricted pass recomputes the position with its own maximum: the loss and
    gradient stay those of enumeration (in log space), finite."""
    c, _, labels, allowed = case(1, L, True, 0, False)
    w = np.zeros(c.P)
    w[c.off_start:c.off_start + L] = 0.1 * np.arange(L)
    w[c.off_end:c.off_end + L] = -0.1 * np.arange(L)
    w[c.off_trans:c.off_trans + L * L] = np.random.default_rng(L).normal(0.0, 0.5, L * L)
    # a sentence starting with label 0 scores 800 more: a partial first token that excludes it has
    # all its allowed states at exp(-800) against the full pass's maximum (0: the pass gave up)
    w[c.off_start] = 800.0
    allowed[:, 0] = np.where(labels < 0, 0, allowed[:, 0])
    allowed[allowed.sum(axis=1) == 0, 1] = 1
    assert (labels[c.sent_ptr[:-1]] < 0).any()
    with np.errstate(over="ignore"):
        want = reference(c, w, labels, allowed)
    loss, grad = Lattices(*c.arrays()).loglik(w, labels, 1, allowed=allowed)
    assert np.isfinite(loss) and loss == pytest.approx(want[0], rel=1e-9)
    np.testing.assert_allclose(grad, want[1], rtol=1e-8, atol=1e-9)
