"""Real-valued attributes in the chain and factorial kernels (issue 33, item 1).

A state attribute occurrence carries a value v (EncodedCorpus.values; None: all 1): its
features add v * weight to the potentials and v * (marginal - observed) to the gradient. The
references (tests/lattice_reference.py) enumerate every labeling of tiny sentences, with the
values, and share no code with the kernels.
"""

import dataclasses
import itertools

import numpy as np
import pytest

import lattice_reference as ref
from corpora import factorial_sentences, random_corpus, with_random_values
from crftk._factorial import Grids
from crftk._lattice import Lattices
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.structures.chain import Chain
from crftk.structures.factorial import Factorial, fit_spaces

CASES = [(2, 0, False), (3, 0, False), (3, 2, False), (4, 3, True)]   # (labels, edge attrs, complete)


def valued(seed, L=3, E=0, complete=False, lengths=(1, 2, 3, 4)):
    rng = np.random.default_rng(seed)
    c = ref.random_corpus(rng, L, lengths, complete=complete, n_eattrs=E, valued=True)
    w = rng.normal(scale=0.8, size=c.P)
    gold = np.concatenate([rng.integers(0, L, T) for _, _, T in c.sentences()]).astype(np.int32)
    return c, w, gold


def binary_copy(c, values=None):
    """The corpus c with other values (None: binary)."""
    out = dataclasses.replace(c) if dataclasses.is_dataclass(c) else ref.Corpus(*c.arrays()[:9])
    out.values = values
    return out


def test_values_are_read_and_zero_and_negative_ones_count():
    c, w, _ = valued(0)
    assert c.values is not None and (c.values < 0).any() and (c.values == 0).any()
    lat = Lattices(*c.arrays())
    assert lat.valued and not Lattices(*binary_copy(c).arrays()).valued


@pytest.mark.parametrize("L,E,complete", CASES)
@pytest.mark.parametrize("seed", [1, 2])
def test_kernels_against_enumeration(L, E, complete, seed):
    c, w, gold = valued(seed, L, E, complete)
    lat = Lattices(*c.arrays())
    curvature = np.empty(c.P)
    loss, grad = lat.loglik(w, gold, 2, curvature)
    marg, logz = lat.marginals(w)
    labels, vscore = lat.viterbi(w)
    K = 4
    paths, nscores, counts = lat.nbest(w, K)
    states = lat.state_matrix(w)
    seq = lat.sequence_scores(w, gold)
    want_loss, want_grad, want_curv = 0.0, np.zeros(c.P), np.zeros(c.P)
    for s, t0, T in c.sentences():
        en = ref.Enumeration(c, t0, T)
        sc = en.scores(w)
        assert logz[s] == pytest.approx(en.logz(w), abs=1e-10)
        node = en.node_marginals(w, L)
        np.testing.assert_allclose(marg[t0:t0 + T], node, atol=1e-10)
        best = int(np.argmax(sc))
        assert labels[t0:t0 + T].tolist() == en.Y[best].tolist()
        assert vscore[s] == pytest.approx(sc[best], abs=1e-10)
        top = np.sort(sc)[::-1][:K]
        assert counts[s] == min(K, sc.size)
        np.testing.assert_allclose(nscores[s, :counts[s]], top, atol=1e-10)
        for k in range(counts[s]):
            assert ref.ref_score(c, w, t0, paths[k, t0:t0 + T]) == pytest.approx(nscores[s, k], abs=1e-10)
        state, _ = ref.log_potentials(c, w, t0, T)
        np.testing.assert_allclose(states[t0:t0 + T], state, atol=1e-12)
        gold_score = ref.ref_score(c, w, t0, gold[t0:t0 + T])
        assert seq[s] == pytest.approx(gold_score, abs=1e-10)
        want_loss += en.logz(w) - gold_score
        want_grad += en.expected_counts(w) - ref.feature_counts(c, t0, gold[None, t0:t0 + T])[0]
        for t in range(T):
            q = node[t] * (1.0 - node[t])
            for a, v in c.token_occurrences(t0 + t):
                for f, lab in c.features(a):
                    want_curv[f] += v * v * q[lab]
        want_curv[c.off_start:c.off_start + L] += node[0] * (1 - node[0])
        want_curv[c.off_end:c.off_end + L] += node[T - 1] * (1 - node[T - 1])
    assert loss == pytest.approx(want_loss, abs=1e-9)
    np.testing.assert_allclose(grad, want_grad, atol=1e-9)
    np.testing.assert_allclose(curvature[:c.off_trans], want_curv[:c.off_trans], atol=1e-10)
    np.testing.assert_allclose(curvature[c.off_start:c.off_edge], want_curv[c.off_start:c.off_edge], atol=1e-10)


def all_outputs(lat, w, gold):
    curvature = np.empty(w.size)
    loss, grad = lat.loglik(w, gold, 1, curvature)
    return [loss, grad, curvature, *lat.marginals(w), lat.viterbi(w)[1], lat.nbest(w, 3)[1],
            lat.state_matrix(w), lat.sequence_scores(w, gold)], lat.viterbi(w)[0], lat.nbest(w, 3)[0]


@pytest.mark.parametrize("L,E,complete", CASES)
def test_all_ones_values_give_the_binary_result(L, E, complete):
    c, w, gold = valued(5, L, E, complete, lengths=(3, 1, 6, 2, 5))
    ones = Lattices(*binary_copy(c, np.ones(c.attrs.size)).arrays())
    binary = Lattices(*binary_copy(c).arrays())
    got, got_path, got_nbest = all_outputs(ones, w, gold)
    want, want_path, want_nbest = all_outputs(binary, w, gold)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(got_path, want_path)
    np.testing.assert_array_equal(got_nbest, want_nbest)


@pytest.mark.parametrize("L,E,complete", CASES)
def test_doubled_values_are_doubled_state_weights(L, E, complete):
    c, w, gold = valued(6, L, E, complete, lengths=(3, 1, 6, 2, 5))
    doubled = Lattices(*binary_copy(c, 2.0 * c.values).arrays())
    w2 = w.copy()
    w2[:c.F] *= 2.0
    lat = Lattices(*c.arrays())
    got, got_path, _ = all_outputs(doubled, w, gold)
    want, want_path, _ = all_outputs(lat, w2, gold)
    # the state gradient and curvature are per unit of weight: scaled by the value's factor
    got[1][:c.F] /= 2.0
    got[2][:c.F] /= 4.0
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(got_path, want_path)


def test_bad_values_are_refused():
    c, _, _ = valued(0)
    args = list(c.arrays())
    with pytest.raises(ValueError, match="one entry per attribute occurrence"):
        Lattices(*args[:-1], np.ones(c.attrs.size + 1))
    for bad in (np.nan, np.inf):
        v = np.ones(c.attrs.size)
        v[0] = bad
        with pytest.raises(ValueError, match="not finite"):
            Lattices(*args[:-1], v)


# -- the online epochs against a plain numpy step -----------------------------------------------

def ref_viterbi(c, w, t0, T):
    en = ref.Enumeration(c, t0, T)
    return en.Y[int(np.argmax(en.scores(w)))]


@pytest.mark.parametrize("E", [0, 2])
def test_perceptron_epoch_with_values(E):
    c, w0, gold = valued(7, 3, E, lengths=(3, 2, 4, 1, 3, 2))
    order = np.array([3, 0, 5, 1, 4, 2, 0], dtype=np.int32)
    w, u = w0.copy(), np.zeros(c.P)
    n_sent, n_tok, cnt = Lattices(*c.arrays()).perceptron_epoch(w, u, gold, order, 1.0)
    rw, ru, rc, wrong_s, wrong_t = w0.copy(), np.zeros(c.P), 1.0, 0, 0
    spans = list(c.sentences())
    for s in order:
        _, t0, T = spans[s]
        pred = ref_viterbi(c, rw, t0, T)
        y = gold[t0:t0 + T]
        if (pred != y).any():
            wrong_s += 1
            wrong_t += int((pred != y).sum())
            step = ref.feature_counts(c, t0, np.stack([y, pred]))
            delta = step[0] - step[1]
            rw += delta
            ru += rc * delta
        rc += 1.0
    assert wrong_s > 0 and (n_sent, n_tok, cnt) == (wrong_s, wrong_t, rc)
    np.testing.assert_allclose(w, rw, atol=1e-12)
    np.testing.assert_allclose(u, ru, atol=1e-12)


@pytest.mark.parametrize("E", [0, 2])
def test_sgd_epoch_with_values(E):
    c, w0, gold = valued(8, 3, E, lengths=(3, 2, 4, 1, 3, 2))
    order = np.array([2, 5, 0, 1, 4, 3], dtype=np.int32)
    lam, t0_rate = 0.05, 20.0
    v = w0.copy()
    a, t, total = Lattices(*c.arrays()).sgd_epoch(v, 1.0, gold, order, lam, t0_rate, 0.0, 1)
    rw, rt, rtotal = w0.copy(), 0.0, 0.0
    spans = list(c.sentences())
    for s in order:
        _, t0, T = spans[s]
        en = ref.Enumeration(c, t0, T)
        y = gold[t0:t0 + T]
        observed = ref.feature_counts(c, t0, y[None])[0]
        rtotal += en.logz(rw) - observed @ rw
        g = en.expected_counts(rw) - observed
        eta = 1.0 / (lam * (t0_rate + rt))
        rw = (1.0 - eta * lam) * rw - eta * g
        rt += 1.0
    assert t == rt and total == pytest.approx(rtotal, abs=1e-9)
    np.testing.assert_allclose(a * v, rw, atol=1e-10)


# -- structures over a FeatureSpace's corpus -----------------------------------------------------

def test_chain_counts_and_active_totals_count_the_values():
    space, corpus = FeatureSpace.fit(random_corpus(12, seed=3, max_len=5),
                                     parse_template("U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]\nB\n"))
    corpus = with_random_values(corpus, 3, low=0.0, high=2.0)
    inf = Chain(space).bind(corpus)
    c = ref.Corpus(corpus.sent_ptr, corpus.attr_ptr, corpus.attrs, corpus.eattr_ptr, corpus.eattrs,
                   space.feat_ptr, space.feat_label, space.n_labels, space.n_edge_attrs, corpus.values)
    want = sum(ref.feature_counts(c, t0, corpus.labels[None, t0:t0 + T])[0] for _, t0, T in c.sentences())
    np.testing.assert_allclose(inf.counts(corpus.labels), want, atol=1e-12)
    per_sentence = [corpus.values[corpus.attr_ptr[t0]:corpus.attr_ptr[t0 + T]].sum() + T + 1
                    for _, t0, T in c.sentences()]
    assert inf.max_active() == pytest.approx(max(per_sentence), abs=1e-12)


FACTORIAL_TEMPLATE = "U00:%x[0,0]\nU01:%x[-1,0]\nB\nP00:%x[0,0]\n"


def factorial(n_chains, seed, template=FACTORIAL_TEMPLATE, max_len=3, n_sentences=5):
    chains, pairs, corpus = fit_spaces(factorial_sentences(n_chains, n_sentences, seed, max_len),
                                       parse_template(template), list(range(1, n_chains + 1)))
    st = Factorial(chains, pairs)
    w = np.random.default_rng(seed).normal(scale=0.7, size=st.n_params)
    return st, with_random_values(corpus, seed), w


def occurrences(enc, tok):
    lo, hi = enc.attr_ptr[tok], enc.attr_ptr[tok + 1]
    return zip(enc.attrs[lo:hi].tolist(), enc.values[lo:hi].tolist())


def factorial_scores(st, corpus, w, s):
    """Every joint labeling of sentence s with its score, from the definitions (values included)."""
    C, parts = st.n_chains, st.split(w)
    sl = corpus.sentence_slices()[s]
    toks = list(range(sl.start, sl.stop))
    T = len(toks)
    sizes = [ch.n_labels for ch in st.chains]
    node, pair = [], []
    for c in range(C):
        sp, enc, wc, L = st.chains[c], corpus.chains[c], parts[c], sizes[c]
        lay = sp.layout()
        table = np.zeros((T, L))
        for t, tok in enumerate(toks):
            for a, v in occurrences(enc, tok):
                for f in range(sp.feat_ptr[a], sp.feat_ptr[a + 1]):
                    table[t, sp.feat_label[f]] += v * wc[f]
        table[0] += wc[lay.start]
        table[T - 1] += wc[lay.end]
        node.append((table, wc[lay.trans].reshape(L, L)))
    for c in range(C - 1):
        p, enc, wp = st.pairs[c], corpus.pairs[c], parts[C + c]
        table = np.zeros((T, p.n_labels))
        for t, tok in enumerate(toks):
            for a, v in occurrences(enc, tok):
                for f in range(p.feat_ptr[a], p.feat_ptr[a + 1]):
                    table[t, p.feat_label[f]] += v * wp[f]
        pair.append(table.reshape(T, sizes[c], sizes[c + 1]))
    scores = {}
    for ys in itertools.product(*[itertools.product(range(n), repeat=T) for n in sizes]):
        total = 0.0
        for c in range(C):
            table, trans = node[c]
            total += sum(table[t, ys[c][t]] for t in range(T))
            total += sum(trans[ys[c][t - 1], ys[c][t]] for t in range(1, T))
        for c in range(C - 1):
            total += sum(pair[c][t, ys[c][t], ys[c + 1][t]] for t in range(T))
        scores[ys] = total
    return scores


@pytest.mark.parametrize("n_chains", [2, 3])
def test_factorial_exact_inference_with_values_equals_enumeration(n_chains):
    st, corpus, w = factorial(n_chains, 4)
    inf = st.bind(corpus)
    nodes, _, logz = inf.marginals(w)
    labels, vscore = inf.best(w)
    loss, _ = inf.loglik(w, corpus.labels)
    want_loss = 0.0
    for s, sl in enumerate(corpus.sentence_slices()):
        scores = factorial_scores(st, corpus, w, s)
        vals = np.array(list(scores.values()))
        z = np.logaddexp.reduce(vals)
        assert logz[s] == pytest.approx(z, abs=1e-9)
        best = max(scores, key=scores.get)
        assert vscore[s] == pytest.approx(scores[best], abs=1e-9)
        for c in range(n_chains):
            assert labels[c, sl].tolist() == list(best[c])
            want = np.zeros((sl.stop - sl.start, st.chains[c].n_labels))
            for ys, sc in scores.items():
                want[np.arange(want.shape[0]), list(ys[c])] += np.exp(sc - z)
            np.testing.assert_allclose(nodes[c][sl], want, atol=1e-9)
        gold = tuple(tuple(corpus.labels[c, sl].tolist()) for c in range(n_chains))
        want_loss += z - scores[gold]
        # the counts of a labeling are its score's coefficients
    assert loss == pytest.approx(want_loss, abs=1e-8)
    gold_scores = sum(factorial_scores(st, corpus, w, s)[tuple(tuple(corpus.labels[c, sl].tolist())
                                                               for c in range(n_chains))]
                      for s, sl in enumerate(corpus.sentence_slices()))
    assert inf.counts(corpus.labels) @ w == pytest.approx(gold_scores, abs=1e-9)


@pytest.mark.parametrize("method", ["trp", "bp"])
def test_factorial_message_passing_with_values_is_exact_on_trees(method):
    """One-token sentences: the grid is a tree, so loopy BP is exact, values or not."""
    st, corpus, w = factorial(3, 5, max_len=1, n_sentences=8)
    exact, bp = st.bind(corpus), st.bind(corpus, inference=method)
    fe, ge = exact.loglik(w, corpus.labels)
    fb, gb = bp.loglik(w, corpus.labels)
    assert fb == pytest.approx(fe, abs=1e-8)
    np.testing.assert_allclose(gb, ge, atol=1e-8)
    np.testing.assert_array_equal(bp.best(w)[0], exact.best(w)[0])


def test_factorial_one_chain_equals_the_chain_kernel_with_values():
    c, w, gold = valued(9, 3, 0, lengths=(3, 1, 4, 2))
    sp, ap, at, ep, ea, fp, fl, L, E, offsets, values = c.arrays()
    grids = Grids(sp, [(ap, at, ep, ea, fp, fl, L, E, 0)], [], c.P, values=[values])
    lat = Lattices(*c.arrays())
    f1, g1 = grids.loglik(w, gold[None, :], 1)
    f2, g2 = lat.loglik(w, gold)
    assert f1 == pytest.approx(f2, abs=1e-10)
    np.testing.assert_allclose(g1, g2, atol=1e-10)
    with pytest.raises(ValueError, match="values"):
        Grids(sp, [(ap, at, ep, ea, fp, fl, L, E, 0)], [], c.P, values=[values[:-1]])


def test_factorial_variance_and_active_totals_with_values():
    st, corpus, w = factorial(2, 6)
    inf = st.bind(corpus)
    nodes, pairs, _ = inf.marginals(w)
    h = inf.variance(w, np.zeros(st.n_params))
    for c in range(2):
        sp, enc = st.chains[c], corpus.chains[c]
        want = np.zeros(sp.n_features)
        for tok in range(corpus.n_tokens):
            q = nodes[c][tok] * (1 - nodes[c][tok])
            for a, v in occurrences(enc, tok):
                for f in range(sp.feat_ptr[a], sp.feat_ptr[a + 1]):
                    want[f] += v * v * q[sp.feat_label[f]]
        np.testing.assert_allclose(h[st.offsets[c]:st.offsets[c] + sp.n_features], want, atol=1e-12)
    with pytest.raises(Exception, match="non-negative"):
        inf.max_active()
    positive = with_random_values(factorial(2, 6)[1], 6, low=0.0, high=1.5)
    total = st.bind(positive).max_active()
    per_sentence = np.zeros(corpus.n_sentences)
    for s, sl in enumerate(corpus.sentence_slices()):
        for enc in list(positive.chains) + list(positive.pairs):
            per_sentence[s] += enc.values[enc.attr_ptr[sl.start]:enc.attr_ptr[sl.stop]].sum()
        per_sentence[s] += 2 * ((sl.stop - sl.start) + 1)       # each chain: transitions, start, end
    assert total == pytest.approx(per_sentence.max(), abs=1e-12)
