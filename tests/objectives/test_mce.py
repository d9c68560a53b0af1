"""MCE and MCE-F objectives (crftk.objectives.mce) against references written from the paper.

The references enumerate every labeling of tiny sentences (tests/lattice_reference.py
scores a labeling straight from the parameter layout): the best incorrect
labeling is the best row other than the gold one, and the segment-wise
discriminant of eq. 15 is a max over the rows that agree with a labeling on
the segment's positions.
"""

import dataclasses
import math
import random

import numpy as np
import pytest

from crftk.io.conll import Sentence
from crftk.errors import CrftkError
from crftk.evaluation.conlleval import chunks
from crftk.features.space import FeatureSpace
from crftk.objectives.mce import MCE, MCEF, chunk_table, labeling_chunks
from crftk.structures.chain import Chain, ChainInference
from crftk.objectives import Likelihood, label_counts
from crftk.optimize import lbfgs
from crftk.features.templates import parse_template


def bound(space, corpus):
    """A first-order chain on the space, bound to the corpus (what the MCE objectives take)."""
    return Chain(space).bind(corpus)

import lattice_reference as ref  # noqa: E402
from finite_differences import fd_check_piecewise  # noqa: E402

IOB = ("B-X", "I-X", "B-Y", "I-Y", "O")
TEMPLATES = {
    "plain": "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]\nB\n",
    "edges": "U0:%x[0,0]\nU1:%x[0,1]\nB\nB1:%x[0,1]\nB2:%x[-1,0]\n",
}


def make_sentences(n, seed, labels=IOB, max_len=4, vocab=6, noise=0.3):
    """Random sentences: a word, a tag column and a label loosely tied to them."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(1, max_len)):
            word = rng.randrange(vocab)
            tag = rng.choice("ABC")
            if rng.random() < noise:
                lab = rng.choice(labels)
            else:
                lab = labels[(word + "ABC".index(tag)) % len(labels)]
            rows.append([f"w{word}", tag, lab])
        out.append(Sentence(rows=rows, doc=0, line=1))
    return out


def make_chunky(n, seed, max_len=6, vocab=6):
    """Random sentences of long chunks (B-T I-T I-T ...) and O runs: y~ has long segments too."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        labs = []
        T = rng.randint(3, max_len)
        while len(labs) < T:
            kind = rng.choice("XYO")
            k = rng.randint(1, 4)
            labs += ["O"] * k if kind == "O" else [f"B-{kind}"] + [f"I-{kind}"] * (k - 1)
        rows = [[f"w{rng.randrange(vocab)}", rng.choice("ABC"), lab] for lab in labs[:T]]
        out.append(Sentence(rows=rows, doc=0, line=1))
    return out


def build(template, seed, n=9, chunky=False, **kw):
    sents = make_chunky(n, seed, **kw) if chunky else make_sentences(n, seed, **kw)
    space, corpus = FeatureSpace.fit(sents, parse_template(TEMPLATES[template]))
    c = ref.Corpus(corpus.sent_ptr, corpus.attr_ptr, corpus.attrs, corpus.eattr_ptr, corpus.eattrs,
                   space.feat_ptr, space.feat_label, space.n_labels, space.n_edge_attrs)
    assert c.P == space.n_params
    return space, corpus, c


def test_weights(space, corpus, seed, scale=1.0, lean=1.5):
    """Random weights leaning towards the gold labels, so that some sentences are right."""
    rng = np.random.default_rng(seed)
    emp = label_counts(space, corpus, corpus.labels)
    return scale * rng.normal(0.0, 1.0, space.n_params) + lean * (emp > 0)


test_weights.__test__ = False


def sigmoid(z):
    return 1.0 / (1.0 + math.exp(-z)) if z > -700 else 0.0


class Sent:
    """One sentence enumerated: all rows, their scores, the gold row and the best other row."""

    def __init__(self, c, corpus, t0, T, w):
        en = ref.Enumeration(c, t0, T)
        self.Y = en.Y
        self.sc = en.scores(w)
        self.gold = tuple(int(v) for v in corpus.labels[t0:t0 + T])
        gi = ref.labeling_index(self.gold, c.L)
        others = [k for k in range(len(self.sc)) if k != gi]
        self.g_gold = self.sc[gi]
        self.bad = None
        if others:
            k = max(others, key=lambda k: self.sc[k])
            self.bad = tuple(int(v) for v in self.Y[k])
            self.g_bad = self.sc[k]
            self.second = int(np.argmax(self.sc)) == gi

    def agree(self, y, a, b):
        """Which rows agree with y on positions a..b-1."""
        return (self.Y[:, a:b] == np.asarray(y[a:b])).all(axis=1)

    def seg_score(self, y, a, b):
        """Eq. 15: the best score of a labeling that agrees with y on positions a..b-1."""
        return self.sc[self.agree(y, a, b)].max()


def ref_mce(c, corpus, w, alpha, beta, smoothing, c2):
    total, second = 0.0, 0
    for _, t0, T in c.sentences():
        s = Sent(c, corpus, t0, T, w)
        if s.bad is None:
            continue
        second += s.second
        z = alpha * (s.g_bad - s.g_gold) + beta
        total += sigmoid(z) if smoothing == "sigmoid" else math.log1p(math.exp(z)) / alpha
    return total + c2 * float(w @ w), second


def ref_mcef(space, c, corpus, w, alpha, beta, gamma, c2, tags=None, measure="segment"):
    """Eq. 16 over the segments of y* (TP, FN) and the other segments of y~ (FP).

    measure "competitor": d(s) = g(y~, s) - g(y*, s), with g of eq. 15.
    measure "segment": d(s) = g' - g for a gold segment and g - g' for the
    others, where g is eq. 15 for the segment's own labels (gold, or y~'s) and
    g' the best score of a labeling that differs from them on the segment.
    """
    tags = space.labels if tags is None else tags
    tp = fn = fp = 0.0
    for _, t0, T in c.sentences():
        s = Sent(c, corpus, t0, T, w)

        def d(a, b, gold):
            if measure == "competitor":
                return s.seg_score(s.bad, a, b) - s.seg_score(s.gold, a, b)
            z = s.gold if gold else s.bad
            other = s.sc[~s.agree(z, a, b)].max()
            return (other - s.seg_score(z, a, b)) * (1 if gold else -1)

        gold_chunks = chunks([tags[i] for i in s.gold])
        for _, a, b in gold_chunks:
            lv = 0.0 if s.bad is None else sigmoid(alpha * d(a, b, True) + beta)
            tp += 1.0 - lv
            fn += lv
        if s.bad is not None:
            for ch in chunks([tags[i] for i in s.bad]):
                if ch not in gold_chunks:
                    fp += sigmoid(alpha * d(ch[1], ch[2], False) + beta)
    g2 = gamma * gamma
    return (g2 * fn + fp) / ((g2 + 1.0) * tp) + c2 * float(w @ w)


# ---------------------------------------------------------------------------
# pieces


@pytest.mark.parametrize("labels", [
    IOB,
    ("B-X", "I-X", "E-X", "S-X", "O", "S-Y"),
    ("I-X", "E-X", "I-Y", "O"),
    ("X", "B", "I", "O", "B-X-Y", "[", "]", "I-X", "E-"),
])
def test_vectorized_chunks_match_evaluate(labels):
    act, ctype = chunk_table(labels)
    rng = random.Random(len(labels))
    lengths = [rng.randint(1, 9) for _ in range(300)]
    y = np.array([rng.randrange(len(labels)) for _ in range(sum(lengths))])
    sp = np.concatenate([[0], np.cumsum(lengths)])
    a, b, first = labeling_chunks(act, sp, y)
    got = sorted((int(s), int(e), ctype[f]) for s, e, f in zip(a, b, first))
    want = []
    for s in range(len(lengths)):
        t0 = int(sp[s])
        for typ, cs, ce in chunks([labels[i] for i in y[t0:sp[s + 1]]]):
            want.append((t0 + cs, t0 + ce, typ))
    assert got == sorted(want)
    assert len(want) > 100


@pytest.mark.parametrize("merge", [False, True])
@pytest.mark.parametrize("lookup", ["table", "search", "complete"])
@pytest.mark.parametrize("template", list(TEMPLATES))
def test_feature_counts_match_label_counts(template, lookup, merge, monkeypatch):
    if lookup == "complete":
        space, corpus = FeatureSpace.fit(make_sentences(20, 3), parse_template(TEMPLATES[template]),
                                         feature_set="complete")
    else:
        space, corpus, _ = build(template, 3, n=20)
    if lookup == "search":
        monkeypatch.setattr(ChainInference, "TABLE_LIMIT", 0)
    monkeypatch.setattr(ChainInference, "MERGE_NODES", 0 if merge else 10**9)
    m = MCE(bound(space, corpus))
    m.inference._state_features(np.zeros(1, dtype=np.int64))
    assert m.inference._features.how[0] == lookup.replace("search", "sorted")
    rng = np.random.default_rng(0)
    N = corpus.n_tokens
    y = rng.integers(0, space.n_labels, N)
    other = rng.integers(0, space.n_labels, N)
    inner = np.flatnonzero(~m._first)
    # every node twice at half weight, plus pairs that cancel
    tok = np.concatenate([np.arange(N), np.arange(N), np.arange(N), np.arange(N)])
    lab = np.concatenate([y, y, other, other])
    mass = np.concatenate([np.full(N, 0.5), np.full(N, 0.5), np.ones(N), -np.ones(N)])
    got = m.inference.weighted_counts(tok, lab, mass, inner, y[inner - 1], y[inner], np.ones(inner.size))
    np.testing.assert_allclose(got, label_counts(space, corpus, y), rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------
# MCE


MCE_CASES = [("plain", "sigmoid", 1.0, 0.0), ("edges", "sigmoid", 0.7, 0.5),
             ("plain", "logistic", 1.0, 0.0), ("edges", "logistic", 2.0, -0.3)]


@pytest.mark.parametrize("template,smoothing,alpha,beta", MCE_CASES)
@pytest.mark.parametrize("seed", [0, 1])
def test_mce_value_brute_force(template, smoothing, alpha, beta, seed):
    space, corpus, c = build(template, seed, n=12)
    w = test_weights(space, corpus, seed)
    m = MCE(bound(space, corpus), alpha=alpha, beta=beta, smoothing=smoothing, c2=0.05)
    value, grad = m(w)
    want, second = ref_mce(c, corpus, w, alpha, beta, smoothing, 0.05)
    assert value == pytest.approx(want, rel=1e-10, abs=1e-10)
    assert grad.shape == (space.n_params,)
    assert m.last["n_second_best"] == second
    # both competitor cases occur: Viterbi wrong, and Viterbi right (second best)
    assert 0 < second < corpus.n_sentences



@pytest.mark.parametrize("template,smoothing,alpha,beta", MCE_CASES)
def test_mce_gradient_finite_differences(template, smoothing, alpha, beta):
    space, corpus, _ = build(template, 5, n=15)
    w = test_weights(space, corpus, 5)
    m = MCE(bound(space, corpus), alpha=alpha, beta=beta, smoothing=smoothing, c2=0.1)
    fd_check_piecewise(m, w, lambda v: m.margins(v)[1])


def test_mce_frozen_and_counters():
    space, corpus, _ = build("edges", 2)
    w = test_weights(space, corpus, 2)
    frozen = np.zeros(space.n_params, dtype=bool)
    frozen[space.layout()["edge"]] = True
    frozen[:3] = True
    free = MCE(bound(space, corpus), c2=0.3)
    held = MCE(bound(space, corpus), c2=0.3, frozen=frozen)
    v0, g0 = free(w)
    v1, g1 = held(w)
    assert v0 - v1 == pytest.approx(0.3 * float(w[frozen] @ w[frozen]))
    assert (g1[frozen] == 0).all() and frozen.any()
    np.testing.assert_allclose(g1[~frozen], g0[~frozen])
    assert free.n_evals == 1
    free(w)
    assert free.n_evals == 2


def test_single_label_has_no_competitor():
    rows = [[["a", "A", "O"], ["b", "B", "O"]], [["c", "A", "O"]]]
    space, corpus = FeatureSpace.fit([Sentence(rows=r, doc=0, line=1) for r in rows],
                                     parse_template(TEMPLATES["plain"]))
    w = np.linspace(-1, 1, space.n_params)
    for smoothing in ("sigmoid", "logistic"):
        value, grad = MCE(bound(space, corpus), smoothing=smoothing, c2=0.5)(w)
        assert value == pytest.approx(0.5 * float(w @ w))
        np.testing.assert_allclose(grad, w)
    with pytest.raises(CrftkError, match="chunks"):
        MCEF(bound(space, corpus))
    rows = [[["a", "A", "B-X"], ["b", "B", "B-X"]]]
    space, corpus = FeatureSpace.fit([Sentence(rows=r, doc=0, line=1) for r in rows],
                                     parse_template(TEMPLATES["plain"]))
    value, grad = MCEF(bound(space, corpus), c2=0.0)(np.ones(space.n_params))
    assert value == 0.0 and not grad.any()


def test_errors():
    space, corpus, _ = build("plain", 0)
    unlabeled = dataclasses.replace(corpus, labels=None)
    for cls in (MCE, MCEF):
        with pytest.raises(CrftkError, match="no gold label"):
            cls(bound(space, unlabeled))
    with pytest.raises(CrftkError, match="smoothing"):
        MCE(bound(space, corpus), smoothing="hinge")
    with pytest.raises(CrftkError, match="alpha"):
        MCE(bound(space, corpus), alpha=0.0)
    with pytest.raises(CrftkError, match="gamma"):
        MCEF(bound(space, corpus), gamma=-1.0)
    with pytest.raises(CrftkError, match="c2"):
        MCEF(bound(space, corpus), c2=-1.0)
    with pytest.raises(CrftkError, match="measure"):
        MCEF(bound(space, corpus), measure="max")


# ---------------------------------------------------------------------------
# MCE-F


MCEF_CASES = [("plain", 1.0, 0.0, 1.0), ("edges", 1.0, 0.0, 1.0), ("edges", 0.6, 0.4, 2.0),
              ("plain", 1.5, -0.5, 0.5)]
MEASURES = ["segment", "competitor"]


@pytest.mark.parametrize("measure", MEASURES)
@pytest.mark.parametrize("template,alpha,beta,gamma", MCEF_CASES)
@pytest.mark.parametrize("seed", [0, 1, "chunky"])
def test_mcef_value_matches_paper_reference(template, alpha, beta, gamma, seed, measure):
    if seed == "chunky":
        space, corpus, c = build(template, 2, chunky=True)
        seed = 2
    else:
        space, corpus, c = build(template, seed)
    w = test_weights(space, corpus, seed + 10)
    f = MCEF(bound(space, corpus), alpha=alpha, beta=beta, gamma=gamma, measure=measure, c2=0.02)
    value, grad = f(w)
    want = ref_mcef(space, c, corpus, w, alpha, beta, gamma, 0.02, measure=measure)
    assert value == pytest.approx(want, rel=1e-10)
    assert f.n_evals == 2
    assert f.last["fp"] > 0 and f.last["fn"] > 0


@pytest.mark.parametrize("measure", MEASURES)
def test_mcef_tag_names(measure):
    # chunks are read from the given tag names: here Y segments count as X segments
    space, corpus, c = build("plain", 4)
    tags = [lab.replace("Y", "X") for lab in space.labels]
    w = test_weights(space, corpus, 4)
    value, _ = MCEF(bound(space, corpus), tags=tags, measure=measure, c2=0.0)(w)
    ref = lambda tags: ref_mcef(space, c, corpus, w, 1.0, 0.0, 1.0, 0.0, tags, measure)  # noqa: E731
    assert value == pytest.approx(ref(tags), rel=1e-10)
    assert value != pytest.approx(ref(None), rel=1e-6)
    with pytest.raises(CrftkError, match="tag names"):
        MCEF(bound(space, corpus), tags=tags[:-1])


@pytest.mark.parametrize("chunky", [False, True])
@pytest.mark.parametrize("measure", MEASURES)
@pytest.mark.parametrize("template,alpha,beta,gamma", MCEF_CASES)
def test_mcef_gradient_finite_differences(template, alpha, beta, gamma, measure, chunky):
    space, corpus, _ = build(template, 7, n=15, max_len=7, chunky=chunky)
    w = test_weights(space, corpus, 7)
    f = MCEF(bound(space, corpus), alpha=alpha, beta=beta, gamma=gamma, measure=measure, c2=0.1)
    fd_check_piecewise(f, w, lambda v: f.segment_margins(v)[4])


@pytest.mark.parametrize("measure", MEASURES)
def test_mcef_gradient_on_long_sentences_touches_prefixes_and_suffixes(measure):
    # long sentences: the maximisers of eq. 15 extend far beyond the segments
    space, corpus, _ = build("edges", 11, n=12, max_len=12)
    w = test_weights(space, corpus, 11, scale=0.7)
    f = MCEF(bound(space, corpus), measure=measure, c2=0.0)
    fd_check_piecewise(f, w, lambda v: f.segment_margins(v)[4], n_coords=80)


@pytest.mark.parametrize("template", list(TEMPLATES))
def test_best_deviating_labeling_brute_force(template):
    # G' of arbitrary spans and reference labelings (gold, or any labeling) by enumeration
    space, corpus, c = build(template, 6, n=10, chunky=True)
    f = MCEF(bound(space, corpus))
    rng = np.random.default_rng(6)
    w = test_weights(space, corpus, 6, lean=0.0)
    fwd, bwd = f.inference.max_scores(w)
    state = f.inference.state_matrix(w)
    # the Viterbi labeling with a few random changes: the best deviation is often late
    alt = f.inference.best(w)[0]
    change = rng.random(corpus.n_tokens) < 0.2
    alt[change] = rng.integers(0, space.n_labels, int(change.sum()))
    y = f.labels
    a, b, want = [], [], []
    is_gold = []
    for _, t0, T in c.sentences():
        s = Sent(c, corpus, t0, T, w)
        for _ in range(3):
            lo = int(rng.integers(0, T))
            hi = int(rng.integers(lo + 1, T + 1))
            g = bool(rng.integers(0, 2))
            z = (y if g else alt)[t0:t0 + T]
            a.append(t0 + lo)
            b.append(t0 + hi)
            is_gold.append(g)
            want.append(s.sc[~s.agree(z, lo, hi)].max())
    got, r, u = f._deviations(w, fwd, bwd, state, y, alt, f._path_cumsum(w, state, y),
                              f._path_cumsum(w, state, alt), np.array(a), np.array(b),
                              np.array(is_gold))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert ((np.array(a) <= r) & (r < np.array(b))).all()
    ref_lab = np.where(np.array(is_gold), y[r], alt[r])
    assert (u != ref_lab).all()


def test_walks_continue_past_cancelled_masses():
    # masses that cancel leave no path to follow; later deposits must still be walked
    space, corpus, _ = build("edges", 11, n=12, max_len=12)
    f = MCEF(bound(space, corpus))
    w = test_weights(space, corpus, 3)
    fwd, bwd = f.inference.max_scores(w)
    state = f.inference.state_matrix(w)
    s = int(np.argmax(np.diff(corpus.sent_ptr)))
    t0, T = int(corpus.sent_ptr[s]), int(np.diff(corpus.sent_ptr)[s])
    assert T >= 6

    def counts(tok, lab, mass, backward):
        nodes, edges = f._walk(w, fwd, bwd, state, np.array(tok), np.array(lab), np.array(mass),
                               backward)
        cat = lambda parts, k: np.concatenate([p[k] for p in parts])  # noqa: E731
        return f.inference.weighted_counts(cat(nodes, 0), cat(nodes, 1), cat(nodes, 2),
                         cat(edges, 0), cat(edges, 1), cat(edges, 2), cat(edges, 3))

    for backward, cancelled, real in ((False, t0, t0 + 3), (True, t0 + T - 1, t0 + T - 4)):
        alone = counts([real], [1], [0.7], backward)
        assert alone.any()
        both = counts([cancelled, cancelled, real], [2, 2, 1], [0.5, -0.5, 0.7], backward)
        np.testing.assert_array_equal(both, alone)


# ---------------------------------------------------------------------------
# training from MAP weights


def test_training_from_map_does_not_increase_errors():
    # labels follow the word, with a few random ones: MAP gets most sentences right
    rng = random.Random(21)
    sents = []
    for _ in range(100):
        rows = []
        for _ in range(rng.randint(1, 5)):
            word = rng.randrange(10)
            lab = rng.choice(IOB) if rng.random() < 0.05 else IOB[word % 5]
            rows.append([f"w{word}", rng.choice("ABC"), lab])
        sents.append(Sentence(rows=rows, doc=0, line=1))
    space, corpus = FeatureSpace.fit(sents, parse_template(TEMPLATES["plain"]))
    map_w = lbfgs(Likelihood.chain(space, corpus, c2=1.0), np.zeros(space.n_params), max_iter=200).x
    m = MCE(bound(space, corpus), c2=1e-3)
    before = m.errors(map_w)
    f_map = m(map_w)[0]
    res = lbfgs(m, map_w, max_iter=60)
    after = m.errors(res.x)
    assert 0 < before[0] < corpus.n_sentences // 2
    assert res.f < f_map
    assert after[0] <= before[0] and after[1] <= before[1]

    f = MCEF(bound(space, corpus), c2=1e-4)
    f_map = f(map_w)[0]
    res = lbfgs(f, map_w, max_iter=40)
    assert res.f < f_map
    assert f.errors(res.x)[0] <= before[0]
