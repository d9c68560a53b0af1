"""Each combination of a bag equals its definition (Sutton, Sindelar & McCallum 2006, section 4)
computed by enumerating every labeling of tiny chains."""

import itertools

import numpy as np
import pytest

from crftk.ensemble.combine import Evidence, combine

L = 3
LENGTHS = [3, 1, 4]


def random_tables(rng, per_token):
    N = sum(LENGTHS)
    state = rng.normal(0, 1.5, (N, L))
    trans = rng.normal(0, 1.5, (N, L, L) if per_token else (L, L))
    return state, trans


def sent_ptr():
    return np.concatenate([[0], np.cumsum(LENGTHS)])


def labelings(T):
    return [np.array(y) for y in itertools.product(range(L), repeat=T)]


def sequence_probs(state, trans, t0, T):
    """p(y | x) of every labeling of the chain at t0 (in labelings(T) order), by enumeration."""
    scores = []
    for y in labelings(T):
        s = sum(state[t0 + t, y[t]] for t in range(T))
        for t in range(1, T):
            s += trans[y[t - 1], y[t]] if trans.ndim == 2 else trans[t0 + t, y[t - 1], y[t]]
        scores.append(s)
    scores = np.array(scores)
    p = np.exp(scores - scores.max())
    return p / p.sum()


def node_and_pair(p, T):
    """Node marginals [T, L] and pairwise marginals [T, L, L] (row t: y_{t-1}, y_t) of p over labelings(T)."""
    node, pair = np.zeros((T, L)), np.zeros((T, L, L))
    for q, y in zip(p, labelings(T)):
        for t in range(T):
            node[t, y[t]] += q
            if t:
                pair[t, y[t - 1], y[t]] += q
    return node, pair


def local_chain_probs(init, cond, T):
    """p(y) = init[y0] prod_t cond[t, y_{t-1}, y_t] over labelings(T)."""
    out = []
    for y in labelings(T):
        q = init[y[0]]
        for t in range(1, T):
            q *= cond[t, y[t - 1], y[t]]
        out.append(q)
    return np.array(out)


def reference(method, members, lam, t0, T):
    """The combined distribution over labelings(T) of one sentence, by its definition."""
    ps = [sequence_probs(s, t, t0, T) for s, t in members]
    if method == "seq-poe":
        logp = sum(l * np.log(p) for l, p in zip(lam, ps))
        q = np.exp(logp - logp.max())
        return q / q.sum()
    if method == "seq-mixture":
        mix = sum(l * p for l, p in zip(lam, ps))
        node, pair = node_and_pair(mix, T)
        cond = np.zeros((T, L, L))
        cond[1:] = pair[1:] / node[:-1, :, None]
        return local_chain_probs(node[0], cond, T)       # p_APPX
    conds, inits = [], []
    for p in ps:
        node, pair = node_and_pair(p, T)
        c = np.zeros((T, L, L))
        c[1:] = pair[1:] / node[:-1, :, None]
        conds.append(c)
        inits.append(node[0])
    if method == "trans-mixture":
        return local_chain_probs(sum(l * i for l, i in zip(lam, inits)),
                                 sum(l * c for l, c in zip(lam, conds)), T)
    init = np.exp(sum(l * np.log(i) for l, i in zip(lam, inits)))
    cond = np.exp(sum(l * np.log(c[1:]) for l, c in zip(lam, conds)))
    cond = np.concatenate([np.zeros((1, L, L)), cond / cond.sum(axis=2, keepdims=True)])
    return local_chain_probs(init / init.sum(), cond, T)


@pytest.mark.parametrize("method", ["seq-poe", "seq-mixture", "trans-mixture", "trans-poe"])
@pytest.mark.parametrize("per_token", [False, True])
@pytest.mark.parametrize("n_members", [2, 3])
def test_combination_equals_its_definition(method, per_token, n_members):
    rng = np.random.default_rng(hash((method, per_token, n_members)) % 2**32)
    members = [random_tables(rng, per_token and i != 1) for i in range(n_members)]   # mixed shapes
    lam = rng.dirichlet(np.ones(n_members))
    ev = Evidence(sent_ptr(), members)
    comb = combine(ev, method, lam)
    best, score = comb.best()
    marg, logz = comb.marginals()
    sp = sent_ptr()
    for s, T in enumerate(LENGTHS):
        t0 = sp[s]
        p = reference(method, members, lam, t0, T)
        assert p.sum() == pytest.approx(1.0)
        ys = labelings(T)
        assert np.array_equal(best[t0:t0 + T], ys[int(np.argmax(p))])
        node, _ = node_and_pair(p, T)
        np.testing.assert_allclose(marg[t0:t0 + T], node, atol=1e-10)
        # the chain's normalized score of its best labeling is that labeling's probability
        assert np.exp(score[s] - logz[s]) == pytest.approx(p.max(), rel=1e-9)


def test_seq_mixture_max_marginal_decoding_maximizes_the_mixed_node_marginals():
    rng = np.random.default_rng(7)
    members = [random_tables(rng, True) for _ in range(2)]
    lam = np.array([0.3, 0.7])
    best, _ = combine(Evidence(sent_ptr(), members), "seq-mixture", lam, decode="max-marginal").best()
    sp = sent_ptr()
    for s, T in enumerate(LENGTHS):
        t0 = sp[s]
        mix = sum(l * sequence_probs(st, tr, t0, T) for l, (st, tr) in zip(lam, members))
        node, _ = node_and_pair(mix, T)
        assert np.array_equal(best[t0:t0 + T], node.argmax(axis=1))


def test_member_conditionals_are_the_chain_transition_distributions():
    rng = np.random.default_rng(3)
    st, tr = random_tables(rng, True)
    logz, node, cond = Evidence(sent_ptr(), [(st, tr)]).conditionals()
    sp = sent_ptr()
    for s, T in enumerate(LENGTHS):
        t0 = sp[s]
        p = sequence_probs(st, tr, t0, T)
        n, pair = node_and_pair(p, T)
        np.testing.assert_allclose(node[0, t0:t0 + T], n, atol=1e-12)
        np.testing.assert_allclose(cond[0, t0 + 1:t0 + T], pair[1:] / n[:-1, :, None], atol=1e-10)
        np.testing.assert_allclose(cond[0, t0], np.broadcast_to(n[0], (L, L)), atol=1e-12)


def test_weights_that_do_not_fit_are_refused():
    from crftk.errors import CrftkError
    rng = np.random.default_rng(1)
    ev = Evidence(sent_ptr(), [random_tables(rng, False) for _ in range(2)])
    with pytest.raises(CrftkError, match="3 weights for 2 bags"):
        combine(ev, "seq-poe", [0.2, 0.3, 0.5])
    with pytest.raises(CrftkError, match="non-negative"):
        combine(ev, "trans-poe", [-0.5, 1.5])
    with pytest.raises(CrftkError, match="seq-mixture only"):
        combine(ev, "trans-poe", [0.5, 0.5], decode="max-marginal")


@pytest.mark.parametrize("weights, expected", [
    ([1e308, 1e308], [0.5, 0.5]),             # their sum overflows
    ([1.7e308, 0.0, 1.7e308], [0.5, 0.0, 0.5]),
    ([5e-324, 1e-323], [1 / 3, 2 / 3]),        # subnormal
])
def test_weights_near_the_float_limits_normalize_without_a_warning(weights, expected):
    import warnings
    from crftk.ensemble.combine import check_weights
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(check_weights(weights, len(weights)), expected)


def test_a_weight_file_of_huge_weights_tags_as_equal_weights(tmp_path):
    import warnings
    from crftk.ensemble.weights import read_weight_file
    path = tmp_path / "w"
    path.write_text("a 1e308\nb 1e308\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_allclose(read_weight_file(path, ["a", "b"])[None], [0.5, 0.5])
