"""Feature induction (crftk.commands.induce): the gain against exact likelihood changes, a
conjunction that only induction can express, the model file and the command line."""

import random
import subprocess
import sys

import numpy as np
import pytest

from crftk.io.conll import Sentence
from crftk.errors import CrftkError
from crftk.evaluation.conlleval import evaluate
from crftk.commands.induce import DEFAULTS, induce
from crftk.training.induction import Inducer
from crftk.model import Model
from crftk.features.templates import parse_template
from crftk.structures.chain import chain_lattices

ATOMIC = """\
Ua0:%x[0,1]
Ub0:%x[0,2]
Un0:%x[0,3]
Ua-1:%x[-1,1]
B
"""


def xor_corpus(n, seed):
    """Columns: word, a in {x,y}, b in {p,q}, noise, label; the label is T when exactly
    one of a=x, b=p holds: no weighted sum of the atomic tests separates it."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        rows = []
        for _ in range(rng.randint(2, 6)):
            a, b = rng.choice("xy"), rng.choice("pq")
            label = "T" if (a == "x") != (b == "p") else "O"
            rows.append([f"w{rng.randrange(50)}", a, b, f"n{rng.randrange(4)}", label])
        out.append(Sentence(rows, i + 1))
    return out


def write(path, sents):
    path.write_text("".join("\n".join(" ".join(r) for r in s.rows) + "\n\n" for s in sents))
    return path


def quiet(msg):
    pass


def test_gain_equals_the_exact_likelihood_change_without_transition_weights():
    """With zero transition weights the tokens of a CRF are independent, so the
    mean-field gain over the error tokens is the exact change of their log-likelihood."""
    sents = xor_corpus(40, seed=1)
    opt = {**DEFAULTS, "threads": 1, "c2": 0.5}
    ind = Inducer(sents, parse_template(ATOMIC), opt, quiet)
    # one feature already in the model, with a weight, so that the marginals are not uniform
    ind.labels[ind.add_predicate((0,))].add(1)
    ind.weight = {((0,), 1): 0.8}
    space, corpus, w, attr_of, pred_of = ind.build()
    assert not w[space.n_features:].any()            # no transition, start or end weight
    (gain, label, mu, _, tuple_of), stats = ind.candidates(space, corpus, w, pred_of)
    lat = chain_lattices(space, corpus)
    errors = np.flatnonzero(lat.viterbi(w)[0] != corpus.labels)
    assert stats["errors"] == errors.size > 0

    def exact(pred, y, m):
        """Log-likelihood change of the error tokens when (pred, y) gets weight m, minus c2 m^2."""
        trial = Inducer(sents, parse_template(ATOMIC), opt, quiet)
        for p in [p for p in ind.predicates if p != pred] + [pred]:
            trial.labels[trial.add_predicate(p)].update(ind.labels[ind.index[p]] if p in ind.index else ())
        trial.labels[trial.index[pred]].add(y)
        trial.weight = dict(ind.weight)
        trial.weight[(pred, y)] = trial.weight.get((pred, y), 0.0) + m
        sp, co, w2, _, _ = trial.build()
        before = lat.marginals(w)[0][errors, corpus.labels[errors]]
        after = chain_lattices(sp, co).marginals(w2)[0][errors, co.labels[errors]]
        return float(np.sum(np.log(after) - np.log(before))) - opt["c2"] * m * m

    checked = 0
    for i in np.argsort(-gain)[:40].tolist():
        pred = tuple_of(i)
        if len(pred) == 1 and pred[0] != 0 and np.isfinite(gain[i]):
            y, m = int(label[i]), float(mu[i])
            assert gain[i] == pytest.approx(exact(pred, y, m), rel=1e-9, abs=1e-9)
            # Newton's weight is the maximum of the exact change
            assert exact(pred, y, m + 1e-3) <= gain[i] + 1e-9
            assert exact(pred, y, m - 1e-3) <= gain[i] + 1e-9
            checked += 1
        if checked == 3:
            break
    assert checked == 3


def test_induction_finds_the_conjunction_that_decides_the_label(tmp_path):
    train = xor_corpus(300, seed=2)
    test = xor_corpus(100, seed=3)
    report = tmp_path / "report.tsv"
    (tmp_path / "t.tmpl").write_text(ATOMIC)
    model = induce([str(write(tmp_path / "train.txt", train))], str(tmp_path / "t.tmpl"), None,
                   log=quiet, report_path=report, rounds=5, threads=1)
    # a predicate joining a test of column a with a test of column b
    strings = model.space.attribute_strings()
    conj = [s for s in strings if s.startswith("Ua0:") and "/Ub0:" in s]
    assert conj, strings
    gold = [[r[-1] for r in s.rows] for s in test]
    pred = model_tags(model, test)
    assert evaluate(gold, pred).token_accuracy == 1.0
    assert "Ua0:" in report.read_text() and " & " in report.read_text()
    added = [line for line in report.read_text().splitlines() if not line.startswith("#")]
    assert model.info["rounds"] >= 1 and model.info["features"] >= len(added)


@pytest.mark.parametrize("expand", ["labels", "none"])
def test_selected_predicates_are_expanded_to_the_labels_they_occur_with(tmp_path, expand):
    train = xor_corpus(200, seed=8)
    (tmp_path / "t.tmpl").write_text(ATOMIC)
    report = tmp_path / "r.tsv"
    model = induce([str(write(tmp_path / "train.txt", train))], str(tmp_path / "t.tmpl"), None, log=quiet,
                   report_path=report, rounds=2, threads=1, expand=expand)
    space = model.space
    corpus = space.encode(train)
    tok = np.repeat(np.arange(corpus.n_tokens), np.diff(corpus.attr_ptr))
    seen = {(int(a), int(y)) for a, y in zip(corpus.attrs, corpus.labels[tok])}
    have = {(a, int(space.feat_label[f])) for a in range(space.n_attrs)
            for f in range(space.feat_ptr[a], space.feat_ptr[a + 1])}
    added = [line for line in report.read_text().splitlines() if not line.startswith("#")]
    if expand == "labels":
        # every label seen with a predicate, plus the selected (negative) ones never seen with it
        assert seen <= have and len(have - seen) <= len(added)
        assert len(have) > len(added)
    else:
        assert len(have) == len(added)


def model_tags(model, sents):
    from crftk.commands.tag import Tagger
    tagger = Tagger(model, threads=1)
    names = np.asarray(model.labels, dtype=object)
    return [names[p].tolist() for p in tagger.viterbi(sents)]


def test_atomic_tests_alone_cannot_learn_the_xor(tmp_path):
    """The contrast for the test above: a CRF on the atomic tests mislabels many tokens."""
    from crftk.commands.train import train
    (tmp_path / "t.tmpl").write_text(ATOMIC)
    model = train([str(write(tmp_path / "train.txt", xor_corpus(300, seed=2)))], str(tmp_path / "t.tmpl"),
                  log=quiet, threads=1)
    test = xor_corpus(100, seed=3)
    gold = [[r[-1] for r in s.rows] for s in test]
    assert evaluate(gold, model_tags(model, test)).token_accuracy < 0.85


def test_induced_model_file_tags_through_the_cli(tmp_path):
    write(tmp_path / "train.txt", xor_corpus(200, seed=4))
    write(tmp_path / "test.txt", xor_corpus(50, seed=5))
    (tmp_path / "t.tmpl").write_text(ATOMIC)
    run = lambda *a: subprocess.run([sys.executable, "-m", "crftk.cli", *a], capture_output=True,  # noqa: E731
                                    text=True, cwd=tmp_path)
    r = run("induce", "-t", "t.tmpl", "-m", "m.model", "--report", "r.tsv", "--dev", "test.txt",
            "--rounds", "4", "train.txt")
    assert r.returncode == 0, r.stderr
    assert "round 1:" in r.stderr and "dev F1" in r.stderr and "added" in r.stderr
    assert (tmp_path / "r.tsv").read_text().startswith("# gain")
    r = run("tag", "-m", "m.model", "-o", "out.txt", "test.txt")
    assert r.returncode == 0, r.stderr
    r = run("eval", "out.txt")
    assert r.returncode == 0 and "accuracy: 100.00%" in r.stdout
    assert Model.load(tmp_path / "m.model").info["induced"] is True


@pytest.mark.parametrize("template, message", [
    ("U1:%x[0,1]/%x[0,2]\nB\n", "one macro per U line"),
    ("U1:%x[0,1]\n", "label bigram"),
])
def test_bad_templates_are_one_line_errors(tmp_path, template, message):
    write(tmp_path / "train.txt", xor_corpus(20, seed=6))
    (tmp_path / "t.tmpl").write_text(template)
    with pytest.raises(CrftkError, match=message):
        induce([str(tmp_path / "train.txt")], str(tmp_path / "t.tmpl"), log=quiet)
    r = subprocess.run([sys.executable, "-m", "crftk.cli", "induce", "-t", "t.tmpl", "-m", "m.model",
                        "train.txt"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "m.model").exists()


@pytest.mark.parametrize("option", ["rounds", "per_round", "conjoin_top", "rescore"])
def test_option_checks(tmp_path, option):
    write(tmp_path / "train.txt", xor_corpus(5, seed=7))
    (tmp_path / "t.tmpl").write_text(ATOMIC)
    with pytest.raises(CrftkError, match=option.replace("_", "-")):
        induce([str(tmp_path / "train.txt")], str(tmp_path / "t.tmpl"), log=quiet, **{option: 0})


def test_atomic_start_keeps_every_atomic_feature_and_adds_the_conjunction(tmp_path):
    from crftk.features.space import FeatureSpace
    train = xor_corpus(300, seed=2)
    (tmp_path / "t.tmpl").write_text(ATOMIC)
    model = induce([str(write(tmp_path / "train.txt", train))], str(tmp_path / "t.tmpl"), None,
                   log=quiet, rounds=3, threads=1, start="atomic")
    atomic, _ = FeatureSpace.fit(train, parse_template(ATOMIC))

    def features(space):
        names = space.attribute_strings()
        return {(names[a], space.labels[space.feat_label[f]]) for a in range(space.n_attrs)
                for f in range(space.feat_ptr[a], space.feat_ptr[a + 1])}

    have = features(model.space)
    assert features(atomic) < have
    assert any("/" in name for name, _ in have - features(atomic))
    test = xor_corpus(100, seed=3)
    gold = [[r[-1] for r in s.rows] for s in test]
    assert evaluate(gold, model_tags(model, test)).token_accuracy == 1.0


def test_gains_over_all_tokens_are_the_mean_field_gains_of_every_token_that_fires():
    from scipy.optimize import minimize_scalar
    sents = xor_corpus(60, seed=9)
    opt = {**DEFAULTS, "threads": 1, "c2": 0.5, "gain_tokens": "all", "rescore": 10}
    ind = Inducer(sents, parse_template(ATOMIC), opt, quiet)
    ind.labels[ind.add_predicate((0,))].add(1)
    ind.weight = {((0,), 1): 0.8}
    space, corpus, w, attr_of, pred_of = ind.build()
    (gain, label, mu, _, tuple_of), stats = ind.candidates(space, corpus, w, pred_of)
    marg = chain_lattices(space, corpus).marginals(w)[0]
    gold = corpus.labels
    fires = np.zeros((gold.size, ind.n_tests), dtype=bool)
    fires[np.repeat(np.arange(gold.size), np.diff(ind.tests.ptr)), ind.tests.ids] = True
    scored = np.flatnonzero(np.isfinite(gain))
    assert stats["errors"] < gold.size and 0 < scored.size == stats["rescored"] < gain.size
    conjunctions = 0
    for i in scored.tolist():
        pred = tuple_of(i)
        conjunctions += len(pred) > 1
        t = np.flatnonzero(fires[:, list(pred)].all(axis=1))
        y = int(label[i])

        def value(x):
            return x * np.sum(gold[t] == y) - np.log(1 + marg[t, y] * np.expm1(x)).sum() - 0.5 * x * x

        assert gain[i] == pytest.approx(value(mu[i]), rel=1e-9, abs=1e-9)
        best = minimize_scalar(lambda x: -value(x), bounds=(-20, 20), method="bounded")
        assert gain[i] >= -best.fun - 1e-6
    assert conjunctions > 0


def test_error_below_counts_uncertain_tokens_as_errors():
    sents = xor_corpus(30, seed=4)
    n_tokens = sum(len(s.rows) for s in sents)
    counts = []
    for below in (0.0, 1.0):
        ind = Inducer(sents, parse_template(ATOMIC), {**DEFAULTS, "threads": 1, "error_below": below}, quiet)
        space, corpus, w, attr_of, pred_of = ind.build()
        counts.append(ind.candidates(space, corpus, w, pred_of)[1]["errors"])
    assert counts[0] < counts[1] == n_tokens


def test_cross_fit_posteriors_come_from_models_trained_without_the_token():
    from crftk.training.induction import CrossFit
    from crftk.objectives import Likelihood
    from crftk.optimize import lbfgs
    sents = xor_corpus(41, seed=11)
    ind = Inducer(sents, parse_template(ATOMIC), {**DEFAULTS, "threads": 1}, quiet)
    ind.seed_atomic()
    space, corpus, w, attr_of, pred_of = ind.build()

    def fit(c, v, k=None):
        return lbfgs(Likelihood.chain(space, c, c2=1.0), v, max_iter=200, epsilon=1e-8).x

    cross = CrossFit(len(sents), 3)
    pred, marg = cross.posteriors(ind, space, corpus, attr_of, fit)
    own = chain_lattices(space, corpus).marginals(fit(corpus, w))[0]
    assert not np.allclose(marg, own, atol=1e-3)
    for k in range(3):
        held = [s for i, s in enumerate(sents) if i % 3 == k]
        rest = [s for i, s in enumerate(sents) if i % 3 != k]
        v = fit(space.encode(rest), np.zeros(space.n_params))
        lat = chain_lattices(space, space.encode(held))
        tokens = corpus.tokens_of(np.arange(k, len(sents), 3))
        np.testing.assert_allclose(marg[tokens], lat.marginals(v)[0], atol=1e-5)
        assert np.array_equal(pred[tokens], lat.viterbi(v)[0])
    # each fold's model keeps its own weights for the next round
    assert len({tuple(sorted(weight.items())) for weight, _ in cross.state}) == 3


def test_induction_with_held_out_gains_finds_the_conjunction(tmp_path):
    train = xor_corpus(300, seed=2)
    (tmp_path / "t.tmpl").write_text(ATOMIC)
    lines = []
    model = induce([str(write(tmp_path / "train.txt", train))], str(tmp_path / "t.tmpl"), None,
                   log=lines.append, rounds=3, threads=1, gain_folds=2)
    assert any("held-out error tokens" in line for line in lines)
    test = xor_corpus(100, seed=3)
    gold = [[r[-1] for r in s.rows] for s in test]
    assert evaluate(gold, model_tags(model, test)).token_accuracy == 1.0
    with pytest.raises(CrftkError, match="gain-folds"):
        induce([str(tmp_path / "train.txt")], str(tmp_path / "t.tmpl"), log=quiet, gain_folds=1)
