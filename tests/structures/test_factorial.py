"""Factorial CRFs: exact inference through the potentials path against brute-force enumeration,
the gradient against finite differences, templates with P lines."""

import itertools

import numpy as np
import pytest

from corpora import factorial_sentences
from crftk.errors import CrftkError, UsageError
from crftk.features.templates import parse_template
from crftk.structures.chain import Chain
from crftk.structures.factorial import Factorial, fit_spaces

TEMPLATE = """
U00:%x[-1,0]
U01:%x[0,0]
U02:%x[0,0]/%x[1,0]
B
P00:%x[0,0]
"""

EDGE_TEMPLATE = TEMPLATE + "B01:%x[0,0]\n"



def build(n_chains, template=TEMPLATE, seed=0, **kw):
    sents = factorial_sentences(n_chains, seed=seed, **kw)
    tmpl = parse_template(template)
    chains, pairs, corpus = fit_spaces(sents, tmpl, list(range(1, n_chains + 1)))
    st = Factorial(chains, pairs)
    rng = np.random.default_rng(seed)
    w = rng.normal(scale=0.7, size=st.n_params)
    return sents, st, corpus, w


def brute_force(st, corpus, w, sentence):
    """(log Z, node marginals per chain, pair marginals per adjacent pair, best labeling) of one
    sentence, enumerating every joint labeling; potentials from the chain kernel's state tables,
    the chain inference's transition scores and the pair features read in Python."""
    C = st.n_chains
    parts = st.split(w)
    sl = corpus.sentence_slices()[sentence]
    toks = np.arange(sl.start, sl.stop)
    T = toks.size
    node, trans = [], []
    for c in range(C):
        inf = Chain(st.chains[c]).bind(corpus.chains[c])
        node.append(inf.state_matrix(parts[c])[sl])
        L = st.chains[c].n_labels

        def tr(t, i, j, inf=inf, wc=parts[c]):
            return float(inf.transition_scores(wc, np.array([t]), np.array([i]), np.array([j]))[0])
        trans.append({(t, i, j): tr(toks[t], i, j) for t in range(1, T) for i in range(L) for j in range(L)})
    pair = []
    for c in range(C - 1):
        p, enc, wp = st.pairs[c], corpus.pairs[c], parts[C + c]
        table = np.zeros((T, p.n_labels))
        for t, tok in enumerate(toks):
            for a in enc.attrs[enc.attr_ptr[tok]:enc.attr_ptr[tok + 1]]:
                for f in range(p.feat_ptr[a], p.feat_ptr[a + 1]):
                    table[t, p.feat_label[f]] += wp[f]
        pair.append(table.reshape(T, st.chains[c].n_labels, st.chains[c + 1].n_labels))
    sizes = [s.n_labels for s in st.chains]
    scores = {}
    for ys in itertools.product(*[itertools.product(range(n), repeat=T) for n in sizes]):
        s = 0.0
        for c in range(C):
            s += sum(node[c][t, ys[c][t]] for t in range(T))
            s += sum(trans[c][(t, ys[c][t - 1], ys[c][t])] for t in range(1, T))
        for c in range(C - 1):
            s += sum(pair[c][t, ys[c][t], ys[c + 1][t]] for t in range(T))
        scores[ys] = s
    vals = np.array(list(scores.values()))
    logz = np.logaddexp.reduce(vals)
    nodes = [np.zeros((T, n)) for n in sizes]
    pairs = [np.zeros((T, sizes[c], sizes[c + 1])) for c in range(C - 1)]
    for ys, s in scores.items():
        p = np.exp(s - logz)
        for c in range(C):
            nodes[c][np.arange(T), list(ys[c])] += p
        for c in range(C - 1):
            pairs[c][np.arange(T), list(ys[c]), list(ys[c + 1])] += p
    best = max(scores, key=scores.get)
    return logz, nodes, pairs, best, scores


@pytest.mark.parametrize("n_chains,template", [(2, TEMPLATE), (3, TEMPLATE), (2, EDGE_TEMPLATE)])
def test_exact_inference_equals_brute_force(n_chains, template):
    sents, st, corpus, w = build(n_chains, template)
    inf = st.bind(corpus)
    nodes, pairs, logz = inf.marginals(w)
    labels, vscore = inf.best(w)
    gold = corpus.labels
    loss, _ = inf.loglik(w, gold)
    total_gold = 0.0
    for s, sl in enumerate(corpus.sentence_slices()):
        bz, bn, bp, bbest, scores = brute_force(st, corpus, w, s)
        assert logz[s] == pytest.approx(bz, abs=1e-9)
        for c in range(n_chains):
            np.testing.assert_allclose(nodes[c][sl], bn[c], atol=1e-9)
            assert labels[c, sl].tolist() == list(bbest[c])
        for c in range(n_chains - 1):
            np.testing.assert_allclose(pairs[c][sl], bp[c], atol=1e-9)
        assert vscore[s] == pytest.approx(scores[bbest], abs=1e-9)
        total_gold += bz - scores[tuple(tuple(gold[c, sl].tolist()) for c in range(n_chains))]
    assert loss == pytest.approx(total_gold, abs=1e-8)


@pytest.mark.parametrize("n_chains,template", [(2, TEMPLATE), (3, TEMPLATE), (2, EDGE_TEMPLATE)])
def test_gradient_matches_finite_differences(n_chains, template):
    sents, st, corpus, w = build(n_chains, template, seed=3)
    inf = st.bind(corpus, n_threads=2)
    gold = corpus.labels
    f0, g = inf.loglik(w, gold)
    rng = np.random.default_rng(1)
    idx = np.concatenate([rng.choice(st.n_params, size=40, replace=False),
                          [st.offsets[-2], st.offsets[-1] - 1]])        # pair weights too
    h = 1e-6
    for i in idx:
        wp, wm = w.copy(), w.copy()
        wp[i] += h
        wm[i] -= h
        fd = (inf.loglik(wp, gold)[0] - inf.loglik(wm, gold)[0]) / (2 * h)
        assert g[i] == pytest.approx(fd, abs=1e-5), i


def test_threads_give_the_same_result():
    sents, st, corpus, w = build(2, n_sentences=40, max_len=6)
    one = st.bind(corpus, n_threads=1).loglik(w, corpus.labels)
    two = st.bind(corpus, n_threads=2).loglik(w, corpus.labels)
    assert one[0] == pytest.approx(two[0], rel=1e-12)
    np.testing.assert_allclose(one[1], two[1], atol=1e-10)


def test_pair_space_has_the_plain_factor_and_seen_pairs():
    sents, st, corpus, w = build(2, n_sentences=30)
    p = st.pairs[0]
    assert st.chains[0].labels == ["A", "B"] and st.chains[1].labels == ["x", "y", "z"]
    assert p.n_labels == 2 * 3
    assert p.labels[:4] == ["A|x", "A|y", "A|z", "B|x"]
    # attribute 0 (the plain pair factor) has every label pair
    assert p.feat_label[p.feat_ptr[0]:p.feat_ptr[1]].tolist() == list(range(6))
    # a P00 attribute (one per word) has the pairs seen with its word only
    assert p.n_attrs == 1 + 4
    seen = {(r[0], r[1] + "|" + r[2]) for s in sents for r in s.rows}
    assert p.n_features == 6 + len(seen)


def test_template_p_lines():
    t = parse_template("U00:%x[0,0]\nB\nP\nP01:%x[0,0]\nP01:%x[0,0]\n")
    assert t.pair_plain and len(t.pairs) == 1 and t.pairs[0].kind == "P"
    assert [ln.text for ln in t.lines] == ["U00:%x[0,0]"]


def test_template_reading_a_label_column_names_the_line():
    sents = factorial_sentences(2)
    with pytest.raises(CrftkError) as e:
        fit_spaces(sents, parse_template("U00:%x[0,0]\nP01:%x[0,2]\n", "t.tmpl"), [1, 2])
    assert e.value.line == 2 and "label column of chain 2" in e.value.message
    with pytest.raises(CrftkError, match="does not exist"):
        fit_spaces(sents, parse_template("U00:%x[0,0]\n"), [1, 5])
    with pytest.raises(UsageError, match="twice"):
        fit_spaces(sents, parse_template("U00:%x[0,0]\n"), [1, -2])


@pytest.mark.parametrize("method", ["trp", "bp"])
def test_message_passing_is_exact_on_one_token_sentences(method):
    """Sentences of one token: the grid is a tree (the chains joined by pair edges), so loopy
    BP's beliefs, Bethe log Z, gradient and max-product labels are exact."""
    sents, st, corpus, w = build(3, n_sentences=8, max_len=1)
    exact = st.bind(corpus)
    bp = st.bind(corpus, inference=method)
    en, ep, ez = exact.marginals(w)
    bn, bpair, bz = bp.marginals(w)
    np.testing.assert_allclose(bz, ez, atol=1e-9)
    for a, b in zip(en + ep, bn + bpair):
        np.testing.assert_allclose(a, b, atol=1e-9)
    fe, ge = exact.loglik(w, corpus.labels)
    fb, gb = bp.loglik(w, corpus.labels)
    assert fb == pytest.approx(fe, abs=1e-8)
    np.testing.assert_allclose(gb, ge, atol=1e-8)
    assert bp.last_stats[0] == corpus.n_sentences
    np.testing.assert_array_equal(bp.best(w)[0], exact.best(w)[0])


@pytest.mark.parametrize("method", ["trp", "bp"])
def test_loopy_beliefs_and_gradient_are_close_to_exact(method):
    """Loopy grids (two chains over several tokens), random weights: beliefs within 0.02 of the
    exact marginals (measured on seeds 4-6: at most 0.0064, mean 0.0008) and the Bethe objective
    within 0.1% (measured: at most 2e-4), yet not equal (1e-9: BP really ran)."""
    sents, st, corpus, w = build(2, n_sentences=20, max_len=6, seed=4)
    w = w * 0.5
    exact, bp = st.bind(corpus), st.bind(corpus, inference=method, tolerance=1e-8, max_sweeps=500)
    en, ep, ez = exact.marginals(w)
    bn, bpair, bz = bp.marginals(w)
    dist = max(np.abs(a - b).max() for a, b in zip(en + ep, bn + bpair))
    assert 1e-9 < dist < 0.02
    assert bp.last_stats[0] == corpus.n_sentences
    fe, ge = exact.loglik(w, corpus.labels)
    fb, gb = bp.loglik(w, corpus.labels)
    assert fb == pytest.approx(fe, rel=1e-3)
    assert np.corrcoef(ge, gb)[0, 1] > 0.99


def test_message_passing_refuses_transition_templates_with_macros():
    sents, st, corpus, w = build(2, EDGE_TEMPLATE)
    with pytest.raises(CrftkError, match="B lines with macros"):
        st.bind(corpus, inference="trp")


@pytest.mark.parametrize("n_chains", [2, 3])
def test_warm_start_reaches_the_cold_fixed_point(n_chains):
    """trp with warm starts: the first loglik is the cold one; later ones start from the last
    messages and, at tight tolerance, end at the fixed point a cold start finds (the state is
    float32, so within ~1e-7); at the same weights one sweep is enough."""
    sents, st, corpus, w = build(n_chains, n_sentences=30, max_len=7, seed=3)
    w = w * 0.5
    kw = dict(inference="trp", tolerance=1e-9, max_sweeps=1000)
    cold, warm = st.bind(corpus, **kw), st.bind(corpus, warm_start=True, **kw)
    assert warm.grids.warm_floats == 2 * sum(s.n_labels for s in st.chains[1:])
    f0, g0 = cold.loglik(w, corpus.labels)
    f1, g1 = warm.loglik(w, corpus.labels)
    assert f1 == f0
    np.testing.assert_array_equal(g1, g0)
    assert warm.last_stats == cold.last_stats
    rng = np.random.default_rng(1)
    for step in (0.0, 1e-3, 1e-1):
        v = w + step * rng.normal(size=w.size)
        fc, gc = cold.loglik(v, corpus.labels)
        fw, gw = warm.loglik(v, corpus.labels)
        assert warm.last_stats[0] == corpus.n_sentences
        assert fw == pytest.approx(fc, rel=1e-7)
        np.testing.assert_allclose(gw, gc, atol=1e-6)
        assert warm.last_stats[1] < cold.last_stats[1]
    loose = st.bind(corpus, inference="trp", tolerance=1e-3, warm_start=True)
    loose.loglik(w, corpus.labels)
    loose.loglik(w, corpus.labels)
    assert loose.last_stats == (corpus.n_sentences, 1.0)


def test_warm_start_is_per_sentence_and_resets():
    """The state is kept per sentence: 1 and 2 threads give the same sequence of results;
    warm_reset makes the next loglik a cold one."""
    sents, st, corpus, w = build(2, n_sentences=40, max_len=6, seed=5)
    a = st.bind(corpus, n_threads=1, inference="trp", warm_start=True)
    b = st.bind(corpus, n_threads=2, inference="trp", warm_start=True)
    rng = np.random.default_rng(2)
    for _ in range(3):
        v = w + 0.05 * rng.normal(size=w.size)
        fa, ga = a.loglik(v, corpus.labels)
        fb, gb = b.loglik(v, corpus.labels)
        assert fa == pytest.approx(fb, rel=1e-12)
        np.testing.assert_allclose(ga, gb, atol=1e-10)
        assert a.last_stats == b.last_stats
    cold = st.bind(corpus, inference="trp")
    a.grids.warm_reset()
    assert a.loglik(w, corpus.labels)[0] == cold.loglik(w, corpus.labels)[0]
    assert a.last_stats == cold.last_stats
    # marginals and max-product do not touch the state: the next loglik is warm
    a.marginals(w)
    a.best(w)
    a.loglik(w, corpus.labels)
    assert a.last_stats[1] < cold.last_stats[1]


@pytest.mark.parametrize("method", ["exact", "bp"])
def test_warm_start_is_for_trp_only(method):
    sents, st, corpus, w = build(2)
    with pytest.raises(CrftkError, match="warm starts are for --inference trp"):
        st.bind(corpus, inference=method, warm_start=True)


def reversed_feature_runs(space):
    """The permutation that reverses each attribute's run of features (labels out of order)."""
    perm = np.arange(space.feat_label.size)
    ptr = space.feat_ptr
    for a in range(ptr.size - 1):
        perm[ptr[a]:ptr[a + 1]] = perm[ptr[a]:ptr[a + 1]][::-1]
    return perm


@pytest.mark.parametrize("method", ["exact", "trp", "bp"])
def test_dense_attribute_rows_equal_the_feature_walk(method):
    # attributes whose features are every label in order are added and scattered as whole rows;
    # with each attribute's features reversed none is, and every result must be the same bits
    import copy
    sents, st, corpus, w = build(2, n_sentences=40, max_len=6)
    spaces = st.chains + st.pairs
    dense = sum(int(np.array_equal(s.feat_label[s.feat_ptr[a]:s.feat_ptr[a + 1]], np.arange(s.n_labels)))
                for s in spaces for a in range(s.feat_ptr.size - 1))
    assert dense >= 3                       # the pair factor's plain attribute at least
    flipped = copy.deepcopy(st)
    perm = np.arange(st.n_params)
    fspaces = flipped.chains + flipped.pairs
    offsets = [st.offsets[c] for c in range(len(st.chains))] + [st.offsets[len(st.chains) + c]
                                                               for c in range(len(st.pairs))]
    for s, fs, off in zip(spaces, fspaces, offsets):
        p = reversed_feature_runs(s)
        fs.feat_label = np.ascontiguousarray(s.feat_label[p])
        perm[off:off + p.size] = off + p
    wf = w[perm]
    a = st.bind(corpus, inference=method)
    b = flipped.bind(corpus, inference=method)
    fa, ga = a.loglik(w, corpus.labels)
    fb, gb = b.loglik(wf, corpus.labels)
    assert fa == fb
    np.testing.assert_array_equal(ga[perm], gb)
    for x, y in zip(a.marginals(w), b.marginals(wf)):
        for u, v in zip(x, y):
            np.testing.assert_array_equal(u, v)
    la, sa = a.best(w)
    lb, sb = b.best(wf)
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(sa, sb)


@pytest.mark.parametrize("n_chains,template", [(2, TEMPLATE), (3, TEMPLATE), (2, EDGE_TEMPLATE)])
def test_counts_are_what_the_loglik_differences_weigh(n_chains, template):
    """loglik(w, y1) - loglik(w, y2) = w . (counts(y2) - counts(y1)): log Z cancels, each
    labeling's score is linear in w with its counts (what GIS and pcg read)."""
    _, st, corpus, w = build(n_chains, template, n_sentences=6)
    inf = st.bind(corpus)
    gold = st.gold(corpus)
    rng = np.random.default_rng(3)
    other = np.stack([rng.integers(0, s.n_labels, size=gold.shape[1]) for s in st.chains]).astype(np.int32)
    diff = inf.loglik(w, gold)[0] - inf.loglik(w, other)[0]
    assert diff == pytest.approx(float(w @ (inf.counts(other) - inf.counts(gold))), rel=1e-9, abs=1e-9)
    assert not np.array_equal(inf.counts(other), inf.counts(gold))
    # the gradient is expected minus empirical counts: the expected ones are never negative
    expected = inf.loglik(w, gold)[1] + inf.counts(gold)
    assert expected.min() > -1e-9 and expected.sum() > 0


def test_max_active_bounds_every_labelings_feature_count():
    sents, st, corpus, w = build(2, n_sentences=8)
    inf = st.bind(corpus)
    C = inf.max_active()
    rng = np.random.default_rng(0)
    for _ in range(5):
        y = np.stack([rng.integers(0, s.n_labels, size=corpus.n_tokens) for s in st.chains]).astype(np.int32)
        for k, sl in enumerate(corpus.sentence_slices()):
            sub = corpus.subset([k])
            assert inf.structure.bind(sub).counts(y[:, sl]).sum() <= C


def test_subset_keeps_each_chains_encoding_and_gold():
    _, st, corpus, w = build(2, n_sentences=6)
    sub = corpus.subset([1, 3])
    toks = corpus.chains[0].tokens_of([1, 3])
    assert np.array_equal(sub.labels, corpus.labels[:, toks]) and sub.n_sentences == 2
    whole = st.bind(corpus).best(w)[0][:, toks]
    assert np.array_equal(st.bind(sub).best(w)[0], whole)


def test_gold_refuses_missing_and_unknown_labels():
    _, st, corpus, _ = build(2)
    corpus.labels[1, 0] = -1
    with pytest.raises(CrftkError, match="outside the label set"):
        st.gold(corpus)
    corpus.labels = None
    with pytest.raises(CrftkError, match="no gold label column"):
        st.gold(corpus)


def test_variance_sums_p_times_one_minus_p_where_each_feature_fires():
    """pcg's diagonal for a factorial CRF, feature by feature in Python from the marginals."""
    _, st, corpus, w = build(2, n_sentences=6)
    inf = st.bind(corpus)
    expected = inf.loglik(w, st.gold(corpus))[1] + inf.counts(st.gold(corpus))
    h = inf.variance(w, expected)
    nodes, pairs, _ = inf.marginals(w)
    for c, (s, enc) in enumerate(zip(st.chains, corpus.chains)):
        v = nodes[c] * (1 - nodes[c])
        part, lay = h[st.offsets[c]:st.offsets[c + 1]], s.layout()
        for a in range(s.n_attrs):
            toks = [t for t in range(corpus.n_tokens) if a in enc.attrs[enc.attr_ptr[t]:enc.attr_ptr[t + 1]]]
            for f in range(s.feat_ptr[a], s.feat_ptr[a + 1]):
                assert part[f] == pytest.approx(v[toks, s.feat_label[f]].sum())
        assert np.array_equal(part[lay.trans], expected[st.offsets[c]:st.offsets[c + 1]][lay.trans])
        firsts = corpus.sent_ptr[:-1]
        assert part[lay.start] == pytest.approx(v[firsts].sum(axis=0))
    p, enc = st.pairs[0], corpus.pairs[0]
    q = pairs[0].reshape(corpus.n_tokens, -1)
    part = h[st.offsets[2]:st.offsets[3]]
    for a in range(p.n_attrs):
        toks = [t for t in range(corpus.n_tokens) if a in enc.attrs[enc.attr_ptr[t]:enc.attr_ptr[t + 1]]]
        for f in range(p.feat_ptr[a], p.feat_ptr[a + 1]):
            lab = p.feat_label[f]
            assert part[f] == pytest.approx((q[toks, lab] * (1 - q[toks, lab])).sum())


def test_chains_fitted_with_one_template_share_their_encoding():
    import copy

    from crftk.structures.factorial import _encode
    sents, st, _, w = build(3, n_sentences=8)
    assert all(s.encodes_like(st.chains[0]) for s in st.chains)
    corpus = st.encode(sents)
    assert corpus.chains[1].attrs is corpus.chains[0].attrs and corpus.chains[2].attrs is corpus.chains[0].attrs
    for c, s in enumerate(st.chains):
        own = _encode(s, sents)
        assert np.array_equal(corpus.chains[c].attrs, own.attrs) and np.array_equal(corpus.chains[c].attr_ptr,
                                                                                    own.attr_ptr)
    # chain 2 with an attribute less in one line: it encodes apart, with its own ids
    changed = copy.deepcopy(st.chains[1])
    line = next(cl for cl in changed.unigram_lines if cl.size > 2)
    line.keys = line.keys[1:]
    line.table = None
    changed._number(changed.unigram_lines)
    for cache in ("_column_tables", "_raw_encoder"):
        changed.__dict__.pop(cache, None)
    assert not changed.encodes_like(st.chains[0])
    other = Factorial([st.chains[0], changed, st.chains[2]], st.pairs)
    apart = other.encode(sents)
    assert apart.chains[1].attrs is not apart.chains[0].attrs
    assert np.array_equal(apart.chains[1].attrs, _encode(changed, sents).attrs)
    assert not np.array_equal(apart.chains[1].attrs, apart.chains[0].attrs)
    assert apart.chains[2].attrs is apart.chains[0].attrs
    # a vocabulary with another string, or another template, is not alike either
    vocab = copy.deepcopy(st.chains[1])
    key = next(iter(vocab.vocabs))
    vocab.vocabs[key].strings = vocab.vocabs[key].strings[::-1]
    assert not vocab.encodes_like(st.chains[0])
    assert not st.pairs[0].encodes_like(st.chains[0])


def test_spaces_whose_lexicons_differ_do_not_encode_alike(tmp_path):
    # the lexicon's entries are in neither the template nor the vocabulary of its values
    from crftk.features.space import FeatureSpace
    from crftk.structures.factorial import _encode
    sents = factorial_sentences(2, n_sentences=8, seed=3)
    words = sorted({row[0] for s in sents for row in s.rows})
    lex = tmp_path / "A.lex"
    tmpl = parse_template(f"@lexicon A {lex}\nU0:%x[0,0]\nU1:%lex[0,A]\n", str(tmp_path / "t.tmpl"))
    lex.write_text("\n".join(words[: len(words) // 2]) + "\n")
    a, _ = FeatureSpace.fit(sents, tmpl, label_col=1)
    again, _ = FeatureSpace.fit(sents, tmpl, label_col=2)
    lex.write_text("\n".join(words[len(words) // 2:]) + "\n")
    b, _ = FeatureSpace.fit(sents, tmpl, label_col=2)
    assert a.encodes_like(again)            # the same entries, read twice
    assert not np.array_equal(_encode(a, sents).attrs, _encode(b, sents).attrs)
    assert not a.encodes_like(b) and not b.encodes_like(a)

