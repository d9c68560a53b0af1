"""Objectives over real-valued attributes (issue 33, item 1): their gradients against central
finite differences, for every structure that trains, and what GIS and induce do with values."""

import numpy as np
import pytest

from corpora import random_corpus, sentences, with_random_values
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.objectives import Likelihood
from crftk.objectives.mce import MCE, MCEF
from crftk.optimize import gis
from crftk.structures.chain import Chain
from crftk.structures.factorial import Factorial, fit_spaces
from crftk.structures.memm import MEMM
from crftk.structures.pairs import Pairs, pair_sentences
from finite_differences import fd_check_piecewise

PLAIN = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]\nB\n"
EDGES = "U0:%x[0,0]\nU1:%x[0,1]\nB\nB1:%x[0,1]\n"


def encoded(template, seed, n=12, max_len=5, sents=None, **kw):
    sents = sents if sents is not None else random_corpus(n, seed=seed, max_len=max_len)
    space, corpus = FeatureSpace.fit(sents, parse_template(template))
    return space, with_random_values(corpus, seed, **kw)


def central_differences(obj, x, coords, eps=1e-6):
    out = []
    for i in coords:
        e = np.zeros_like(x)
        e[i] = eps
        out.append((obj(x + e)[0] - obj(x - e)[0]) / (2 * eps))
    return np.array(out)


def check_gradient(obj, x, n_coords=40, seed=0, free=None):
    rng = np.random.default_rng(seed)
    pool = np.arange(x.size) if free is None else np.flatnonzero(free)
    coords = rng.choice(pool, min(n_coords, pool.size), replace=False)
    _, g = obj(x)
    np.testing.assert_allclose(central_differences(obj, x, coords), g[coords], rtol=1e-5, atol=1e-6)
    return g


@pytest.mark.parametrize("template", [PLAIN, EDGES])
def test_chain_likelihood_gradient(template):
    space, corpus = encoded(template, 1)
    obj = Likelihood(Chain(space).bind(corpus, 2), c2=0.1)
    x = np.random.default_rng(1).normal(scale=0.5, size=space.n_params)
    g = check_gradient(obj, x, n_coords=60)
    assert np.abs(g[:space.n_features]).max() > 0


def test_second_order_likelihood_gradient():
    sents = list(pair_sentences(random_corpus(10, seed=2, max_len=4), -1))
    space, corpus = encoded("U:%x[0,0]\nU1:%x[0,1]\nB\n", 2, sents=sents)
    structure = Pairs(space)
    frozen, value = structure.pinned("none")
    obj = Likelihood(structure.bind(corpus), c2=0.3, frozen=frozen)
    theta = np.random.default_rng(0).normal(scale=0.3, size=structure.n_params)
    theta[frozen] = value
    check_gradient(obj, theta, free=~frozen)


def test_memm_likelihood_gradient():
    space, corpus = encoded(PLAIN, 3)
    obj = Likelihood(MEMM(space).bind(corpus), c2=0.2)
    x = np.random.default_rng(3).normal(scale=0.5, size=space.n_params)
    check_gradient(obj, x)



def chunky(n, seed, max_len=6):
    import random
    rng = random.Random(seed)
    rows_list = []
    for _ in range(n):
        labs = []
        T = rng.randint(2, max_len)
        while len(labs) < T:
            kind, k = rng.choice("XYO"), rng.randint(1, 3)
            labs += ["O"] * k if kind == "O" else [f"B-{kind}"] + [f"I-{kind}"] * (k - 1)
        rows_list.append([[f"w{rng.randrange(6)}", rng.choice("ABC"), lab] for lab in labs[:T]])
    return sentences(rows_list)


@pytest.mark.parametrize("template", [PLAIN, EDGES])
def test_mce_gradient(template):
    space, corpus = encoded(template, 5, sents=chunky(14, 5))
    inf = Chain(space).bind(corpus)
    m = MCE(inf, c2=0.1)
    w = np.random.default_rng(5).normal(size=space.n_params) + 1.5 * (inf.counts(corpus.labels) > 0)
    fd_check_piecewise(m, w, lambda v: m.margins(v)[1])


@pytest.mark.parametrize("measure", ["segment", "competitor"])
@pytest.mark.parametrize("template", [PLAIN, EDGES])
def test_mce_f_gradient(template, measure):
    space, corpus = encoded(template, 6, sents=chunky(14, 6))
    inf = Chain(space).bind(corpus)
    f = MCEF(inf, measure=measure, c2=0.1)
    w = np.random.default_rng(6).normal(size=space.n_params) + 1.5 * (inf.counts(corpus.labels) > 0)
    fd_check_piecewise(f, w, lambda v: f.segment_margins(v)[4])


@pytest.mark.parametrize("template,n_chains", [("U00:%x[0,0]\nU01:%x[-1,0]\nB\nP00:%x[0,0]\n", 2),
                                                ("U00:%x[0,0]\nB\nB01:%x[0,0]\nP00:%x[0,0]\n", 2),
                                                ("U00:%x[0,0]\nB\nP00:%x[0,0]\n", 3)])
def test_factorial_likelihood_gradient(template, n_chains):
    import random
    rng = random.Random(7)
    label_sets = [("A", "B"), ("x", "y", "z"), ("P", "Q")][:n_chains]
    rows_list = [[[f"w{(w := rng.randrange(4))}"] + [labs[(w + rng.randrange(2)) % len(labs)] for labs in label_sets]
                  for _ in range(rng.randint(1, 4))] for _ in range(6)]
    chains, pairs, corpus = fit_spaces(sentences(rows_list), parse_template(template), list(range(1, n_chains + 1)))
    st = Factorial(chains, pairs)
    corpus = with_random_values(corpus, 7)
    obj = Likelihood(st.bind(corpus, n_threads=2), c2=0.1)
    x = np.random.default_rng(7).normal(scale=0.6, size=st.n_params)
    coords = np.concatenate([np.random.default_rng(1).choice(st.n_params, 40, replace=False),
                             [st.offsets[-2], st.offsets[-1] - 1]])          # pair weights too
    _, g = obj(x)
    np.testing.assert_allclose(central_differences(obj, x, coords), g[coords], rtol=1e-5, atol=1e-6)


# -- GIS and induce --------------------------------------------------------------------------------

def test_gis_with_non_negative_values_decreases_the_objective():
    space, corpus = encoded(PLAIN, 8, low=0.0, high=2.0)
    obj = Likelihood(Chain(space).bind(corpus), c2=0.1)
    x0 = np.zeros(space.n_params)
    np.testing.assert_allclose(obj.expected_counts(x0) - obj.empirical_counts(), obj._loglik(x0)[1], atol=1e-12)
    trace = []
    result = gis(obj.expected_counts, obj.empirical_counts(), x0, C=obj.max_active(), c2=0.1,
                 objective=lambda x: obj(x)[0], max_iter=15, callback=lambda info: trace.append(info.f))
    assert result.f < obj(x0)[0] and all(b <= a + 1e-12 for a, b in zip(trace, trace[1:]))


def test_gis_refuses_negative_values():
    space, corpus = encoded(PLAIN, 9)
    obj = Likelihood(Chain(space).bind(corpus), c2=0.1)
    with pytest.raises(CrftkError, match="GIS needs non-negative feature values.*another --algorithm"):
        obj.max_active()


def test_induce_refuses_a_real_valued_corpus(monkeypatch):
    from crftk.commands.induce import DEFAULTS
    from crftk.training import induction

    fit = FeatureSpace.fit

    def valued_fit(*args, **kw):
        space, corpus = fit(*args, **kw)
        return space, with_random_values(corpus, 0)

    monkeypatch.setattr(induction.FeatureSpace, "fit", valued_fit)
    with pytest.raises(CrftkError, match="induce conjoins binary tests"):
        induction.Inducer(random_corpus(5, seed=1), parse_template("U0:%x[0,0]\nB\n"),
                          {**DEFAULTS, "threads": 1}, lambda message: None)
