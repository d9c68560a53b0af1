"""Passive-aggressive and AROW training (CRFsuite's pa and arow): the kernels' epochs against a
plain NumPy reference built from brute-force feature vectors (every labeling of tiny sentences,
binary and real-valued attributes, edge attributes, frozen parameters), the optimizers'
averaging and stopping, and training end to end through the command line and the Python API."""

import dataclasses
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from corpora import REPO, random_corpus as random_sentences
from crftk import CRF, CrftkError, read_conll
from crftk._lattice import Lattices
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.optimize.online import arow, passive_aggressive
from crftk.structures.chain import Chain
from lattice_reference import Corpus, all_labelings, feature_counts, random_corpus

I32 = np.int32
DEMO_TRAIN = REPO / "data" / "demo.train"
DEMO_TEST = REPO / "data" / "demo.test"
CHUNKING = REPO / "templates" / "chunking-crfpp.tmpl"
# subprocesses run this checkout's crftk, whatever their working directory (not an installed one)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


# ---- the reference: one pass, straight from the definitions ------------------------------------

def best_and_difference(c, w, t0, gold, frozen):
    """(mislabeled tokens, score(best) - score(gold), F(gold) - F(best) without frozen entries)
    by enumerating every labeling; ties go to the first maximum, as the kernel's Viterbi."""
    T = gold.size
    Y = all_labelings(c.L, T)
    phi = feature_counts(c, t0, Y)
    scores = phi @ w
    best = Y[int(np.argmax(scores))]
    wrong = int((best != gold).sum())
    gold_phi = feature_counts(c, t0, gold[None, :])[0]
    delta = gold_phi - phi[int(np.argmax(scores))]
    if frozen is not None:
        delta[frozen] = 0.0
    return wrong, float(scores.max() - gold_phi @ w), delta


def reference_pa(c, w, u, y, order, cc, pa_type, C, error_sensitive, frozen=None):
    n_sent = n_tok = 0
    total = 0.0
    for s in order:
        t0, T = int(c.sent_ptr[s]), int(c.sent_ptr[s + 1] - c.sent_ptr[s])
        wrong, margin, delta = best_and_difference(c, w, t0, y[t0:t0 + T], frozen)
        if wrong:
            n_sent += 1
            n_tok += wrong
            loss = margin + (np.sqrt(wrong) if error_sensitive else 1.0)
            total += loss
            norm2 = delta @ delta
            if norm2 > 0:
                tau = [loss / norm2, min(C, loss / norm2), loss / (norm2 + 0.5 / C)][pa_type]
                w += tau * delta
                u += cc * tau * delta
        cc += 1.0
    return n_sent, n_tok, total, cc


def reference_arow(c, mean, cov, y, order, gamma, frozen=None):
    n_sent = n_tok = 0
    total = 0.0
    for s in order:
        t0, T = int(c.sent_ptr[s]), int(c.sent_ptr[s + 1] - c.sent_ptr[s])
        wrong, margin, delta = best_and_difference(c, mean, t0, y[t0:t0 + T], frozen)
        if wrong:
            n_sent += 1
            n_tok += wrong
            loss = margin + wrong
            total += loss
            alpha = loss / (gamma + cov @ (delta * delta))
            mean += alpha * cov * delta
            cov[:] = 1.0 / (1.0 / cov + delta * delta / gamma)
    return n_sent, n_tok, total


def corpus_and_start(seed, edges, valued, complete=False):
    rng = np.random.default_rng(seed)
    c = random_corpus(rng, 3, [1, 3, 4, 2, 3, 4], n_eattrs=edges, valued=valued, complete=complete)
    y = rng.integers(0, c.L, size=c.N).astype(I32)
    order = rng.permutation(c.S).astype(I32)
    w = rng.normal(scale=0.7, size=c.P)
    return c, y, order, w


CASES = [(0, 0, False), (1, 2, False), (2, 0, True), (3, 2, True)]


# ---- the kernels ------------------------------------------------------------------------------

@pytest.mark.parametrize("seed, edges, valued", CASES)
@pytest.mark.parametrize("pa_type", [0, 1, 2])
@pytest.mark.parametrize("error_sensitive", [True, False])
def test_pa_epoch_matches_the_brute_force_reference(seed, edges, valued, pa_type, error_sensitive):
    c, y, order, w = corpus_and_start(seed, edges, valued)
    C = 0.3                                   # small enough that PA-I's cap binds on some sentences
    u = np.zeros(c.P)
    w_ref, u_ref = w.copy(), u.copy()
    expected = reference_pa(c, w_ref, u_ref, y, order, 1.0, pa_type, C, error_sensitive)
    got = Lattices(*c.arrays()).pa_epoch(w, u, y, order, 1.0, pa_type, C, error_sensitive)
    assert expected[0] > 1                    # the case tests updates, not a quiet pass
    assert got[:2] == expected[:2] and got[3] == expected[3]
    assert got[2] == pytest.approx(expected[2], rel=1e-12)
    np.testing.assert_allclose(w, w_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(u, u_ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed, edges, valued", CASES)
@pytest.mark.parametrize("gamma", [1.0, 0.25])
def test_arow_epoch_matches_the_brute_force_reference(seed, edges, valued, gamma):
    c, y, order, w = corpus_and_start(seed, edges, valued)
    cov = np.full(c.P, 0.8)
    w_ref, cov_ref = w.copy(), cov.copy()
    expected = reference_arow(c, w_ref, cov_ref, y, order, gamma)
    got = Lattices(*c.arrays()).arow_epoch(w, cov, y, order, gamma)
    assert expected[0] > 1
    assert got[:2] == expected[:2]
    assert got[2] == pytest.approx(expected[2], rel=1e-12)
    np.testing.assert_allclose(w, w_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cov, cov_ref, rtol=1e-12, atol=1e-12)
    assert (cov <= 0.8).all() and (cov < 0.8).any()


def test_real_values_weight_the_difference():
    """A one-token sentence whose attribute has value 2.5: PA's step along d = 2.5 on the gold
    feature and -2.5 on the predicted one (start and end weights move by 1)."""
    c = Corpus([0, 1], [0, 1], [0], [0, 0], [], [0, 2], [0, 1], 2, 0, values=[2.5])
    lat = Lattices(*c.arrays())
    w, u = np.zeros(c.P), np.zeros(c.P)
    w[0] = 1.0                                # predicts label 0; gold is 1
    lat.pa_epoch(w, u, np.array([1], I32), np.array([0], I32), 1.0, 0, 1.0, True)
    norm2 = 2 * 2.5 ** 2 + 4                  # state features, start and end of both labels
    tau = (2.5 + 1.0) / norm2                 # margin 2.5 * 1.0, plus sqrt(1)
    np.testing.assert_allclose(w[:2], [1.0 - 2.5 * tau, 2.5 * tau])
    np.testing.assert_allclose(w[c.off_start:c.off_start + 2], [-tau, tau])


@pytest.mark.parametrize("algorithm", ["pa", "arow"])
def test_frozen_parameters_stay_and_leave_the_norm(algorithm):
    c, y, order, w = corpus_and_start(4, 2, True)
    frozen = np.zeros(c.P, dtype=bool)
    frozen[c.off_trans:c.off_start] = True      # as a template without a B line
    frozen[::5] = True
    w0 = w.copy()
    lat = Lattices(*c.arrays())
    second = np.zeros(c.P) if algorithm == "pa" else np.full(c.P, 1.0)
    w_ref, second_ref = w.copy(), second.copy()
    if algorithm == "pa":
        expected = reference_pa(c, w_ref, second_ref, y, order, 1.0, 2, 0.5, True, frozen)
        got = lat.pa_epoch(w, second, y, order, 1.0, 2, 0.5, True, frozen)
    else:
        expected = reference_arow(c, w_ref, second_ref, y, order, 1.0, frozen)
        got = lat.arow_epoch(w, second, y, order, 1.0, frozen)
    assert got[0] == expected[0] > 1
    np.testing.assert_allclose(w, w_ref, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, second_ref, rtol=1e-12, atol=1e-12)
    assert np.array_equal(w[frozen], w0[frozen]) and not np.array_equal(w, w0)


def test_epochs_check_their_arguments():
    c, y, order, w = corpus_and_start(0, 0, False)
    lat = Lattices(*c.arrays())
    with pytest.raises(ValueError, match="second weight vector"):
        lat.pa_epoch(w, np.zeros(3), y, order, 1.0)
    with pytest.raises(ValueError, match="pa_type"):
        lat.pa_epoch(w, np.zeros_like(w), y, order, 1.0, 3)
    with pytest.raises(ValueError, match="frozen"):
        lat.arow_epoch(w, np.ones_like(w), y, order, 1.0, np.zeros(2, dtype=bool))
    with pytest.raises(ValueError, match="gamma"):
        lat.arow_epoch(w, np.ones_like(w), y, order, 0.0)
    with pytest.raises(ValueError, match="sentence index"):
        lat.arow_epoch(w, np.ones_like(w), y, np.array([c.S], I32), 1.0)


# ---- the optimizers ---------------------------------------------------------------------------

def valued_inference(seed):
    """A chain's inference over a corpus encoded by a fitted space, given real values by hand."""
    space, corpus = FeatureSpace.fit(random_sentences(12, seed=seed, max_len=5),
                                     parse_template("U00:%x[0,0]\nU01:%x[-1,0]\nB\n"))
    values = np.random.default_rng(seed).uniform(-1.5, 2.0, corpus.attrs.size)
    corpus = dataclasses.replace(corpus, values=values)
    ref = Corpus(corpus.sent_ptr, corpus.attr_ptr, corpus.attrs, corpus.eattr_ptr, corpus.eattrs, space.feat_ptr,
                 space.feat_label, space.n_labels, space.n_edge_attrs, values=values)
    return Chain(space).bind(corpus), corpus.labels.astype(I32), ref


@pytest.mark.parametrize("averaging", [True, False])
def test_passive_aggressive_returns_the_average_or_the_last_weights(averaging):
    inference, y, c = valued_inference(5)
    w0 = np.random.default_rng(1).normal(scale=0.3, size=c.P)
    infos = []
    result = passive_aggressive(inference, y, w0, pa_type=1, c=0.5, averaging=averaging, max_iter=2,
                                callback=infos.append, seed=7)
    w, u, cc = w0.copy(), np.zeros(c.P), 1.0
    rng = np.random.default_rng(7)
    for info in infos:
        n_sent, n_tok, loss, cc = reference_pa(c, w, u, y, rng.permutation(c.S), cc, 1, 0.5, True)
        assert info.mislabeled == n_tok and info.f == pytest.approx(loss, rel=1e-12)
    assert len(infos) == 2 and infos[0].mislabeled > 0
    np.testing.assert_allclose(result.x, w - u / cc if averaging else w, rtol=1e-10, atol=1e-12)
    assert result.f == infos[-1].f and result.n_iter == 2


def test_arow_returns_the_mean_weights():
    inference, y, c = valued_inference(6)
    w0 = np.zeros(c.P)
    result = arow(inference, y, w0, variance=0.5, gamma=2.0, max_iter=1, seed=3)
    mean, cov = w0.copy(), np.full(c.P, 0.5)
    _, _, loss = reference_arow(c, mean, cov, y, np.random.default_rng(3).permutation(c.S), 2.0)
    np.testing.assert_allclose(result.x, mean, rtol=1e-10, atol=1e-12)
    assert result.f == pytest.approx(loss, rel=1e-12)


def separable_lattices(seed=0, n_sentences=40, L=4):
    """Each token's first attribute is its label (plus two noise attributes): separable."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 8, n_sentences)
    N = int(lengths.sum())
    y = rng.integers(0, L, N).astype(I32)
    n_attrs = L + 6
    attrs = np.stack([y, L + rng.integers(0, 6, N), L + rng.integers(0, 6, N)], axis=1).ravel()
    feat_ptr = np.arange(n_attrs + 1) * L
    feat_label = np.tile(np.arange(L), n_attrs)
    c = Corpus(np.concatenate([[0], np.cumsum(lengths)]), np.arange(N + 1) * 3, attrs, np.zeros(N + 1), [],
               feat_ptr, feat_label, L, 0)
    return Lattices(*c.arrays()), y


@pytest.mark.parametrize("train", [
    lambda lat, y: passive_aggressive(lat, y, np.zeros(lat.n_params), pa_type=0, max_iter=50),
    lambda lat, y: passive_aggressive(lat, y, np.zeros(lat.n_params), pa_type=1, c=0.1, max_iter=50),
    lambda lat, y: passive_aggressive(lat, y, np.zeros(lat.n_params), pa_type=2, error_sensitive=False,
                                      averaging=False, max_iter=50),
    lambda lat, y: arow(lat, y, np.zeros(lat.n_params), max_iter=50),
], ids=["pa0", "pa1", "pa2-plain", "arow"])
def test_a_separable_corpus_is_learned_without_mistakes(train):
    lat, y = separable_lattices()
    result = train(lat, y)
    assert result.converged and "no training sentence mislabeled" in result.reason
    assert result.f == 0.0 and result.n_iter < 50
    assert np.array_equal(lat.viterbi(result.x)[0], y)


# ---- training from the command line and Python -------------------------------------------------

def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "crftk.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=300, env=ENV)


@pytest.mark.parametrize("options", [
    ["--algorithm", "pa", "--pa-type", "2", "--pa-c", "0.5", "--no-averaging"],
    ["--algorithm", "pa", "--no-error-sensitive"],
    ["--algorithm", "arow", "--arow-variance", "0.5", "--arow-gamma", "2"],
], ids=["pa2", "pa1-insensitive", "arow"])
def test_train_tag_and_eval_the_demo_corpus(tmp_path, options):
    model, tagged = tmp_path / "m.model", tmp_path / "tagged.txt"
    p = cli("train", "-t", CHUNKING, "-m", model, "--max-iter", 4, "-p", 1, "--dev", DEMO_TEST, *options, DEMO_TRAIN)
    assert p.returncode == 0, p.stderr
    epochs = [line for line in p.stderr.splitlines() if line.startswith("epoch ")]
    assert epochs and all("mislabeled tokens" in line and "  loss " in line for line in epochs), p.stderr
    assert cli("tag", "-m", model, "-o", tagged, DEMO_TEST).returncode == 0
    p = cli("eval", "--json", tagged)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["overall"]["f1"] > 90
    info = json.loads(cli("info", "--json", model).stdout)
    assert info["training"]["options"]["algorithm"] == options[1]


def test_the_help_explains_each_option():
    p = cli("train", "--help")
    for option in ("--pa-type", "--pa-c", "--error-sensitive / --no-error-sensitive",
                   "--averaging / --no-averaging", "--arow-variance", "--arow-gamma"):
        assert option in p.stdout


@pytest.mark.parametrize("options, message", [
    (["--label-col", 1, "--label-col", 2, "--algorithm", "pa"],
     "--algorithm pa updates the weights sentence by sentence through the linear chain's kernel"),
    (["--algorithm", "arow", "--order", 2], "--order 2 trains with --algorithm lbfgs or quickprop only"),
    (["--algorithm", "pa", "--model-type", "memm"], "--model-type memm trains with --algorithm lbfgs or quickprop"),
    (["--algorithm", "arow", "--c1", 1], "--algorithm arow supports L2 only"),
    (["--algorithm", "pa", "--objective", "mce"], "--objective mce trains a first-order CRF or a semi-Markov CRF with --algorithm lbfgs"),
    (["--algorithm", "pa", "--pa-type", 3], "invalid value for '--pa-type'"),
    (["--algorithm", "pa", "--pa-c", 0], "invalid value for '--pa-c'"),
    (["--algorithm", "arow", "--arow-gamma", -1], "invalid value for '--arow-gamma'"),
])
def test_refusals_are_one_line(tmp_path, options, message):
    p = cli("train", "-t", CHUNKING, "-m", tmp_path / "m.model", *options, DEMO_TRAIN)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crftk: error:") and message in lines[0], p.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_python_api_takes_the_options():
    X, y = read_conll(DEMO_TRAIN, label_col=-1)
    X, y = X[:200], y[:200]
    crf = CRF(CHUNKING, algorithm="pa", pa_type=2, pa_c=0.1, error_sensitive=False, averaging=False,
              max_iter=3, threads=1)
    assert crf.get_params()["pa_c"] == 0.1 and crf.get_params()["arow_gamma"] == 1.0
    crf.fit(X, y)
    assert crf.model_.info["options"]["pa_type"] == 2 and crf.model_.info["options"]["averaging"] is False
    assert len(crf.predict(X[:3])) == 3
    with pytest.raises(CrftkError, match=r"^averaging must be True or False \(got 'yes'\)"):
        CRF(CHUNKING, algorithm="pa", averaging="yes").fit(X, y)
    with pytest.raises(CrftkError, match=r"^arow_variance must be a number > 0"):
        CRF(CHUNKING, algorithm="arow", arow_variance=0).fit(X, y)
