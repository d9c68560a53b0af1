"""Fuzz: partial annotation and constrained decoding on random tiny corpora and random masks.

The chain kernels' marginal likelihood of a partial annotation (Tsuboi et al. 2008), its
gradient and the expected label count, and decoding restricted to a mask (Viterbi, n-best,
marginals), against brute-force enumeration of every labeling (tests/lattice_reference.py);
the reachability check that refuses an infeasible annotation against enumeration too; and,
from the command line, that a fully labeled file trains to the same weights whether partial
labels are on (the default ``?`` marker) or off (``--unknown-label ''``).
"""

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import fuzz_strategies as fz
import lattice_reference as ref
from crftk._lattice import Lattices
from crftk.structures.constraints import first_infeasible

I32 = np.int32


@st.composite
def partial_corpora(draw, max_labels=4, max_len=4):
    """(corpus, weights, labels, allowed, threads): a random corpus of 1-4 sentences of 1-4
    tokens, each token labeled (one-hot, its label id), unknown (every label, -1) or a set
    (a non-empty subset, -1; a set of one label is partial too)."""
    L = draw(st.integers(1, max_labels))
    lengths = draw(st.lists(st.integers(1, max_len), min_size=1, max_size=4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    c = ref.random_corpus(rng, L, lengths, complete=draw(st.booleans()),
                          n_eattrs=draw(st.sampled_from([0, 2])), valued=draw(st.booleans()))
    scale = draw(st.sampled_from([0.1, 1.0, 5.0]))
    w = rng.normal(0.0, scale, c.P)
    labels = np.zeros(c.N, dtype=I32)
    allowed = np.zeros((c.N, L), dtype=np.uint8)
    for t in range(c.N):
        kind = draw(st.sampled_from(["label", "unknown", "set"]))
        if kind == "label":
            labels[t] = draw(st.integers(0, L - 1))
            allowed[t, labels[t]] = 1
        else:
            labels[t] = -1
            if kind == "unknown":
                allowed[t] = 1
            else:
                allowed[t, draw(st.lists(st.integers(0, L - 1), min_size=1, max_size=L, unique=True))] = 1
    return c, w, labels, allowed, draw(st.sampled_from([1, 2]))


def _allowed_labelings(e, allowed, t0):
    return allowed[t0 + np.arange(e.T), e.Y].all(axis=1).astype(bool)


@pytest.mark.fuzz(weight=1)
@given(case=partial_corpora(), counted_labels=st.integers(0, 2**4 - 1))
@fz.counted
def test_partial_likelihood_matches_enumeration(case, counted_labels):
    c, w, labels, allowed, threads = case
    entity = np.array([(counted_labels >> j) & 1 for j in range(c.L)], dtype=np.uint8)
    loss, grad, expected, grad_e = 0.0, np.zeros(c.P), 0.0, np.zeros(c.P)
    for _, t0, T in c.sentences():
        e = ref.Enumeration(c, t0, T)
        scores = e.scores(w)
        p = np.exp(scores - ref.logsumexp(scores))
        if (labels[t0:t0 + T] < 0).any():
            keep = _allowed_labelings(e, allowed, t0)
            q = np.where(keep, np.exp(scores - ref.logsumexp(scores[keep])), 0.0)
            loss += ref.logsumexp(scores) - ref.logsumexp(scores[keep])
        else:       # a fully labeled sentence: today's term, log Z - score(gold)
            q = np.zeros(len(scores))
            q[ref.labeling_index(labels[t0:t0 + T], c.L)] = 1.0
            loss += ref.logsumexp(scores) - ref.ref_score(c, w, t0, labels[t0:t0 + T])
        grad += (p - q) @ e.phi
        G = entity[e.Y].sum(axis=1)
        expected += p @ G
        grad_e += (p * G) @ (e.phi - p @ e.phi)
    lat = Lattices(*c.arrays())
    got = lat.loglik(w, labels, threads, allowed=allowed, entity=entity)
    assert got[0] == pytest.approx(loss, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(got[1], grad, rtol=1e-8, atol=1e-9)
    assert got[2] == pytest.approx(expected, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(got[3], grad_e, rtol=1e-8, atol=1e-9)
    # the moments change nothing of the likelihood
    plain = lat.loglik(w, labels, threads, allowed=allowed)
    assert plain[0] == got[0]
    np.testing.assert_array_equal(plain[1], got[1])
    if (labels >= 0).all():         # every token labeled: exactly the pass without a mask
        today = lat.loglik(w, labels, threads)
        assert today[0] == got[0]
        np.testing.assert_array_equal(today[1], got[1])


@pytest.mark.fuzz(weight=1)
@given(case=partial_corpora(), k=st.integers(1, 5))
@fz.counted
def test_forced_decoding_matches_enumeration(case, k):
    c, w, _, allowed, threads = case
    lat = Lattices(*c.arrays())
    best, best_scores = lat.viterbi(w, threads, allowed=allowed)
    marg, logz = lat.marginals(w, threads, allowed=allowed)
    paths, nscores, counts = lat.nbest(w, k, threads, allowed=allowed)
    for s, t0, T in c.sentences():
        e = ref.Enumeration(c, t0, T)
        scores = e.scores(w)
        keep = _allowed_labelings(e, allowed, t0)
        top = np.sort(scores[keep])[::-1]
        assert allowed[t0 + np.arange(T), best[t0:t0 + T]].all()      # never leaves the mask
        assert best_scores[s] == pytest.approx(top[0], rel=1e-9, abs=1e-9)
        assert ref.ref_score(c, w, t0, best[t0:t0 + T]) == pytest.approx(top[0], rel=1e-9, abs=1e-9)
        assert logz[s] == pytest.approx(ref.logsumexp(scores[keep]), rel=1e-9, abs=1e-9)
        q = np.where(keep, np.exp(scores - logz[s]), 0.0)
        for t in range(T):
            np.testing.assert_allclose(marg[t0 + t], np.bincount(e.Y[:, t], weights=q, minlength=c.L),
                                       atol=1e-9)
        n = min(k, int(keep.sum()))
        assert counts[s] == n
        np.testing.assert_allclose(nscores[s, :n], top[:n], rtol=1e-9, atol=1e-9)
        found = [ref.labeling_index(paths[r, t0:t0 + T], c.L) for r in range(n)]
        assert all(keep[i] for i in found) and len(set(found)) == n      # distinct allowed labelings


@pytest.mark.fuzz(weight=0.5)
@given(L=st.integers(1, 3), lengths=st.lists(st.integers(1, 4), min_size=1, max_size=4),
       seed=st.integers(0, 2**32 - 1), p_pinned=st.sampled_from([0.2, 0.5, 0.8]))
@fz.counted
def test_feasibility_check_matches_enumeration(L, lengths, seed, p_pinned):
    """first_infeasible (what refuses an annotation with file:line before the kernels would)
    names the first sentence with no labeling that the mask and the permitted transitions,
    starts and ends allow, and the token there is inside it."""
    rng = np.random.default_rng(seed)
    sent_ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    N = int(sent_ptr[-1])
    trans, starts, ends = (rng.random((L, L)) > p_pinned, rng.random(L) > p_pinned / 2,
                           rng.random(L) > p_pinned / 2)
    allowed = (rng.random((N, L)) < 0.6).astype(np.uint8)
    allowed[np.arange(N), rng.integers(0, L, N)] = 1
    want = None
    for s, T in enumerate(lengths):
        t0 = int(sent_ptr[s])
        Y = ref.all_labelings(L, T)
        ok = allowed[t0 + np.arange(T), Y].all(axis=1) & starts[Y[:, 0]] & ends[Y[:, -1]]
        for t in range(1, T):
            ok &= trans[Y[:, t - 1], Y[:, t]]
        if not ok.any():
            want = s
            break
    got = first_infeasible(trans, starts, ends, allowed, sent_ptr)
    if want is None:
        assert got is None
    else:
        assert got is not None and got[0] == want
        assert sent_ptr[want] <= got[1] < sent_ptr[want + 1]


# -- the command line ----------------------------------------------------------------------

_LABELS = ["B-NP", "I-NP", "O", "B-VP"]
_WORDS = ["the", "cat", "sat", "on", "a", "mat", "."]


@st.composite
def labeled_files(draw):
    """The text of a fully labeled two-column file (no cell is the ? marker or holds a |)."""
    sentences = draw(st.lists(st.lists(st.tuples(st.sampled_from(_WORDS), st.sampled_from(_LABELS)),
                                       min_size=1, max_size=5), min_size=1, max_size=5))
    return "\n\n".join("\n".join(f"{w} {lab}" for w, lab in s) for s in sentences) + "\n"


def _train(args):
    from crftk.cli import main
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=True)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


@pytest.mark.fuzz(weight=0.5, cap=20)
@given(text=labeled_files(), order=st.sampled_from([1, 2]), constraints=st.sampled_from(["none", "iob2"]))
@fz.counted
def test_fully_labeled_file_trains_alike_with_partial_labels_on_and_off(fuzz_dir, text, order, constraints):
    from crftk.model import Model
    with fz.scratch(fuzz_dir) as d:
        data = fz.write(d / "train.txt", text)
        tmpl = fz.write(d / "t.tmpl", "U0:%x[0,0]\nU1:%x[-1,0]\nB\n")
        runs = []
        for marker in (None, ""):
            model = d / f"m{len(runs)}.crf"
            args = ["train", "-t", tmpl, "-m", model, "--order", order, "--constraints", constraints,
                    "--max-iter", 30, "-p", 1, data]
            result = _train(args + ([] if marker is None else ["--unknown-label", marker]))
            runs.append((result.exit_code, result.stderr.splitlines()[-1:] if result.exit_code else None,
                         Model.load(model) if result.exit_code == 0 else None))
        (code_on, err_on, on), (code_off, err_off, off) = runs
        assert (code_on, err_on) == (code_off, err_off)
        if on is not None:
            assert on.labels == off.labels
            assert on.weights.tobytes() == off.weights.tobytes()
