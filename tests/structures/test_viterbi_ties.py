"""Viterbi's choice among equally good labelings: the first predecessor of the highest score,
scanning labels in order, and the first best final label (the labels crftk has always output)."""

import numpy as np
import pytest

from crftk._lattice import Lattices

import lattice_reference as ref


def scan_viterbi(c, w, state, t0, T):
    """Viterbi written plainly, with the tie rule: a later label replaces the best so far
    only when strictly better."""
    L = c.L
    delta = state[t0].copy()
    back = np.zeros((T, L), dtype=np.int64)
    for t in range(1, T):
        M = w[c.off_trans:c.off_trans + L * L].reshape(L, L).copy()
        for a in c.token_eattrs(t0 + t):
            M += w[c.off_edge + a * L * L:c.off_edge + (a + 1) * L * L].reshape(L, L)
        new = np.empty(L)
        for j in range(L):
            best, bi = -np.inf, 0
            for i in range(L):
                v = delta[i] + M[i, j]
                if v > best:
                    best, bi = v, i
            new[j] = best + state[t0 + t, j]
            back[t, j] = bi
        delta = new
    y = [int(np.argmax(delta))]
    for t in range(T - 1, 0, -1):
        y.append(int(back[t, y[-1]]))
    return y[::-1], float(delta.max())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("L", [2, 3, 6])
@pytest.mark.parametrize("edges", [0, 3])
@pytest.mark.parametrize("threads", [1, 2])
def test_ties_resolve_to_the_first_best_predecessor(seed, L, edges, threads):
    rng = np.random.default_rng([seed, L, edges])
    lengths = [int(x) for x in rng.integers(1, 9, size=12)]
    c = ref.random_corpus(rng, L, lengths, n_attrs=5, n_eattrs=edges)
    # weights of -1, 0 and 1: the sums are exact and many labelings tie
    w = rng.integers(-1, 2, c.P).astype(np.float64)
    lat = Lattices(*c.arrays())
    labels, scores = lat.viterbi(w, threads)
    state = lat.state_matrix(w)
    for s, t0, T in c.sentences():
        y, best = scan_viterbi(c, w, state, t0, T)
        assert labels[t0:t0 + T].tolist() == y
        assert scores[s] == best


def test_all_zero_weights_give_label_zero_everywhere():
    rng = np.random.default_rng(0)
    c = ref.random_corpus(rng, 4, [1, 3, 7], n_attrs=5, n_eattrs=2)
    labels, scores = Lattices(*c.arrays()).viterbi(np.zeros(c.P))
    assert labels.tolist() == [0] * c.N and scores.tolist() == [0.0] * c.S
