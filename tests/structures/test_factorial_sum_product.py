"""Sum-product TRP on factorial grids whose chains have more labels than the vector loops take at
a time (9 and 2, so the messages' maxima and changes run their four-at-a-time loops and their
tails): the Bethe gradient against finite differences, the beliefs against exact inference
(itself proven against brute force in test_factorial.py)."""

import random

import numpy as np
import pytest

from corpora import sentences
from crftk.features.templates import parse_template
from crftk.structures.factorial import Factorial, fit_spaces

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nB\nP00:%x[0,0]\n"


def grid_corpus(seed, n_sentences=12, max_len=7, n_big=9):
    rng = random.Random(seed)
    rows_list = []
    for _ in range(n_sentences):
        rows = []
        for _ in range(rng.randint(1, max_len)):
            w = rng.randrange(6)
            rows.append([f"w{w}", f"L{(w + rng.randrange(3)) % n_big}", "ab"[(w + rng.randrange(2)) % 2]])
        rows_list.append(rows)
    sents = sentences(rows_list)
    chains, pairs, corpus = fit_spaces(sents, parse_template(TEMPLATE), [1, 2])
    st = Factorial(chains, pairs)
    w = np.random.default_rng(seed).normal(scale=0.5, size=st.n_params)
    return st, corpus, w


@pytest.mark.parametrize("seed", [0, 1])
def test_trp_gradient_matches_finite_differences(seed):
    """At converged messages the Bethe log Z's gradient is the beliefs: the objective's finite
    differences (messages run to 1e-12) agree with loglik's gradient."""
    st, corpus, w = grid_corpus(seed)
    assert st.chains[0].n_labels >= 8
    inf = st.bind(corpus, n_threads=2, inference="trp", tolerance=1e-12, max_sweeps=5000)
    f0, g = inf.loglik(w, corpus.labels)
    assert inf.last_stats[0] == corpus.n_sentences
    rng = np.random.default_rng(seed)
    idx = np.concatenate([rng.choice(st.n_params, size=30, replace=False), [st.offsets[-2], st.offsets[-1] - 1]])
    h = 1e-6
    for i in idx:
        wp, wm = w.copy(), w.copy()
        wp[i] += h
        wm[i] -= h
        fd = (inf.loglik(wp, corpus.labels)[0] - inf.loglik(wm, corpus.labels)[0]) / (2 * h)
        assert g[i] == pytest.approx(fd, abs=2e-5), i


def test_trp_beliefs_are_near_exact_and_thread_independent():
    st, corpus, w = grid_corpus(2)
    exact = st.bind(corpus)
    en, ep, ez = exact.marginals(w * 0.5)
    trp = st.bind(corpus, inference="trp", tolerance=1e-10, max_sweeps=2000)
    bn, bp, bz = trp.marginals(w * 0.5)
    dist = max(np.abs(a - b).max() for a, b in zip(en + ep, bn + bp))
    assert 1e-9 < dist < 0.05
    one = st.bind(corpus, n_threads=1, inference="trp").loglik(w, corpus.labels)
    two = st.bind(corpus, n_threads=2, inference="trp").loglik(w, corpus.labels)
    assert one[0] == pytest.approx(two[0], rel=1e-12)
    np.testing.assert_allclose(one[1], two[1], rtol=0, atol=1e-10)
