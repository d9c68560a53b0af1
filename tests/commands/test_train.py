import numpy as np
import pytest

from corpora import random_corpus
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.model import Model
from crftk.objectives import Likelihood
from crftk.structures.chain import Chain, chain_lattices
from crftk.features.templates import parse_template
from crftk.commands.train import TRAIN_PARAMS, train

TEMPLATE = "U00:%x[0,0]\nU01:%x[0,1]\nU02:%x[-1,0]/%x[0,1]\nB\n"


def write_corpus(path, sents):
    path.write_text("".join("\n".join(" ".join(r) for r in s.rows) + "\n\n" for s in sents))
    return path


def test_objective_gradient_matches_finite_differences():
    space, corpus = FeatureSpace.fit(random_corpus(8, seed=1, max_len=4), parse_template(TEMPLATE))
    obj = Likelihood.chain(space, corpus, c2=0.7)
    w = np.random.default_rng(0).normal(scale=0.5, size=space.n_params)
    f, g = obj(w)
    eps = 1e-6
    for i in np.random.default_rng(1).choice(space.n_params, size=25, replace=False):
        e = np.zeros_like(w)
        e[i] = eps
        num = (obj(w + e)[0] - obj(w - e)[0]) / (2 * eps)
        assert num == pytest.approx(g[i], rel=1e-5, abs=1e-6)
    lat = chain_lattices(space, corpus)
    _, logz = lat.marginals(w)
    gold = lat.sequence_scores(w, corpus.labels)
    assert f == pytest.approx(np.sum(logz - gold) + 0.7 * w @ w)


def test_training_fits_a_learnable_corpus(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(200, seed=2))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    model = train([data], tmpl, tmp_path / "m", log=lambda m: None, c2=0.01, threads=1)
    corpus = model.space.encode(random_corpus(200, seed=2))
    pred, _ = chain_lattices(model.space, corpus).viterbi(model.weights)
    assert (pred == corpus.labels).mean() == 1.0
    assert Model.load(tmp_path / "m").info["iterations"] == model.info["iterations"]


def test_threads_do_not_change_the_result(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(150, seed=3))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    a = train([data], tmpl, log=lambda m: None, threads=1, max_iter=15)
    b = train([data], tmpl, log=lambda m: None, threads=2, max_iter=15)
    assert np.allclose(a.weights, b.weights, rtol=1e-6, atol=1e-8)


def test_l1_gives_sparse_weights(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(150, seed=4))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    dense = train([data], tmpl, log=lambda m: None, c2=0.1, max_iter=60)
    sparse = train([data], tmpl, log=lambda m: None, c1=2.0, c2=0.0, max_iter=60)
    assert np.count_nonzero(dense.weights) > 0.9 * dense.weights.size
    assert np.count_nonzero(sparse.weights) < 0.5 * sparse.weights.size


@pytest.mark.parametrize("algorithm", ["lbfgs", "cg"])
def test_dev_set_keeps_the_best_iteration(tmp_path, algorithm):
    data = write_corpus(tmp_path / "train.txt", random_corpus(120, seed=5))
    dev = write_corpus(tmp_path / "dev.txt", random_corpus(60, seed=6))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    logs = []
    model = train([data], tmpl, dev_file=dev, log=logs.append, max_iter=25, algorithm=algorithm)
    hist = model.info["history"]
    best = max(hist, key=lambda h: h["dev_f1"])
    assert model.info["chosen_iteration"] == best["iteration"]
    assert model.info["best_dev_f1"] == best["dev_f1"]
    assert sum(line.startswith("iter ") and "dev F1" in line for line in logs) == len(hist)
    assert len(hist) == model.info["iterations"]
    assert len({h["dev_f1"] for h in hist}) > 1     # the choice is not trivial
    assert any(line.startswith("keeping the weights of iteration") for line in logs)


def test_stop_reason_is_logged(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(50, seed=7))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    logs = []
    model = train([data], tmpl, log=logs.append, max_iter=3)
    assert not model.info["converged"]
    assert any("stopped before convergence" in l and "iteration limit" in l for l in logs)


def test_template_without_label_bigram_keeps_transitions_zero(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(50, seed=8))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text("U00:%x[0,0]\n")
    model = train([data], tmpl, log=lambda m: None, max_iter=20)
    lay = model.space.layout()
    assert not model.weights[lay["trans"]].any()
    assert model.weights[lay["state"]].any()


def test_option_checks(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(5))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    with pytest.raises(CrftkError, match=r"--c2 must be a number from 0 to .* \(got -1\)"):
        train([data], tmpl, log=lambda m: None, c2=-1)
    with pytest.raises(CrftkError, match="feature-set"):
        train([data], tmpl, log=lambda m: None, feature_set="all")
    with pytest.raises(TypeError):
        train([data], tmpl, log=lambda m: None, sigma=1)
    assert {p.name for p in TRAIN_PARAMS} >= {"c1", "c2", "max_iter", "epsilon", "min_freq", "threads"}
    assert all(p.help for p in TRAIN_PARAMS)


def test_empirical_and_expected_counts_make_the_gradient():
    tmpl = parse_template(TEMPLATE + "B1:%x[0,1]\n")
    space, corpus = FeatureSpace.fit(random_corpus(20, seed=11, max_len=5), tmpl)
    obj = Likelihood.chain(space, corpus, c2=0.0)
    w = np.random.default_rng(2).normal(scale=0.3, size=space.n_params)
    _, grad = obj(w)
    emp = obj.empirical_counts()
    assert np.allclose(obj.expected_counts(w) - emp, grad)
    # every attribute occurrence, start, end, transition and edge attribute of the gold labels
    assert emp.sum() == pytest.approx(
        corpus.attrs.size + 2 * corpus.n_sentences + (corpus.n_tokens - corpus.n_sentences)
        + sum(1 for i in range(corpus.n_tokens) if i not in set(corpus.sent_ptr[:-1].tolist())
              for _ in range(corpus.eattr_ptr[i + 1] - corpus.eattr_ptr[i])))
    assert obj.max_active() >= 3


def test_trace_has_one_line_per_evaluation(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(60, seed=12))
    dev = write_corpus(tmp_path / "dev.txt", random_corpus(20, seed=13))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    model = train([data], tmpl, dev_file=dev, log=lambda m: None, max_iter=8, trace_file=tmp_path / "tr.tsv")
    lines = (tmp_path / "tr.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["evaluation", "passes", "seconds", "objective", "dev_f1"]
    rows = [l.split("\t") for l in lines[1:]]
    assert len(rows) == model.info["evaluations"]
    assert [int(r[0]) for r in rows] == list(range(1, len(rows) + 1))
    assert [int(r[1]) for r in rows] == list(range(1, len(rows) + 1))
    seconds = [float(r[2]) for r in rows]
    assert seconds == sorted(seconds)
    assert float(rows[-1][3]) == pytest.approx(model.info["objective"], rel=1e-6) or \
        min(float(r[3]) for r in rows) == pytest.approx(model.info["objective"], rel=1e-6)
    assert all(0 <= float(r[4]) <= 100 for r in rows)


def test_averaged_perceptron_training(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(200, seed=14))
    dev = write_corpus(tmp_path / "dev.txt", random_corpus(60, seed=15))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    logs = []
    model = train([data], tmpl, tmp_path / "p.model", dev_file=dev, log=logs.append,
                  algorithm="perceptron", max_iter=20)
    assert Model.load(tmp_path / "p.model").info["options"]["algorithm"] == "perceptron"
    assert any(l.startswith("epoch    1  mislabeled tokens") for l in logs)
    corpus = model.space.encode(random_corpus(200, seed=14))
    pred, _ = chain_lattices(model.space, corpus).viterbi(model.weights)
    assert (pred == corpus.labels).mean() > 0.98
    assert model.info["converged"] and "no training sentence mislabeled" in model.info["stop_reason"]
    hist = model.info["history"]
    assert model.info["chosen_iteration"] == max(hist, key=lambda h: h["dev_f1"])["iteration"]


def test_sgd_approaches_the_lbfgs_optimum(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(150, seed=16))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    exact = train([data], tmpl, log=lambda m: None, c2=0.5)
    logs = []
    approx = train([data], tmpl, tmp_path / "s.model", log=logs.append, algorithm="sgd", c2=0.5,
                   max_iter=30)
    space, corpus = exact.space, exact.space.encode(random_corpus(150, seed=16))
    obj = Likelihood.chain(space, corpus, c2=0.5)
    f_exact, f_sgd = obj(exact.weights)[0], obj(approx.weights)[0]
    f_zero = obj(np.zeros(space.n_params))[0]
    assert f_exact <= f_sgd < f_exact + 0.02 * (f_zero - f_exact)
    assert any(l.startswith("sgd calibration: eta0") for l in logs)
    with pytest.raises(CrftkError, match="L2 only"):
        train([data], tmpl, log=lambda m: None, algorithm="sgd", c1=1.0)


@pytest.mark.parametrize("algorithm", ["cg", "pcg", "mixed-cg", "gis"])
def test_batch_algorithms_approach_the_same_optimum(tmp_path, algorithm):
    data = write_corpus(tmp_path / "train.txt", random_corpus(120, seed=17))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    exact = train([data], tmpl, log=lambda m: None, c2=0.5)
    trace = tmp_path / "tr.tsv"
    model = train([data], tmpl, tmp_path / "m.model", log=lambda m: None, c2=0.5, algorithm=algorithm,
                  mixed_after=3, max_iter=200 if algorithm == "gis" else 300, trace_file=trace)
    obj = Likelihood.chain(exact.space, exact.space.encode(random_corpus(120, seed=17)), c2=0.5)
    f_exact, f_alg, f_zero = obj(exact.weights)[0], obj(model.weights)[0], obj(np.zeros(obj.n_params))[0]
    gap = 0.5 if algorithm == "gis" else 1e-3            # GIS is slow: Sha & Pereira's point
    assert f_exact - 1e-6 * abs(f_exact) <= f_alg < f_exact + gap * (f_zero - f_exact)
    rows = (tmp_path / "tr.tsv").read_text().splitlines()[1:]
    # preconditioners and GIS reuse the pass of the point just evaluated: no hidden passes
    assert int(rows[-1].split("\t")[1]) == model.info["evaluations"]


def test_mce_from_map_weights_does_not_add_training_errors(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(150, seed=18))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    train([data], tmpl, tmp_path / "map.model", log=lambda m: None, c2=1.0, max_iter=15)
    base = Model.load(tmp_path / "map.model")
    logs = []
    model = train([data], None, tmp_path / "mce.model", log=logs.append, init_model=tmp_path / "map.model",
                  objective="mce", c2=5e-4, max_iter=20)
    assert model.space.n_params == base.space.n_params
    assert model.info["init_model"] == str(tmp_path / "map.model")
    corpus = base.space.encode(random_corpus(150, seed=18))
    lat = chain_lattices(base.space, corpus)
    errors = [int((lat.viterbi(m.weights)[0] != corpus.labels).sum()) for m in (base, model)]
    assert errors[1] <= errors[0]
    assert not np.array_equal(model.weights, base.weights)
    with pytest.raises(CrftkError, match="objective mce"):
        train([data], tmpl, log=lambda m: None, objective="mce", algorithm="perceptron")


def test_mce_f_with_quickprop_from_map_lowers_its_objective(tmp_path):
    from crftk.objectives.mce import MCEF
    sents = random_corpus(150, seed=21)
    data = write_corpus(tmp_path / "train.txt", sents)
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    train([data], tmpl, tmp_path / "map.model", log=lambda m: None, c2=1.0, max_iter=8)
    base = Model.load(tmp_path / "map.model")
    logs = []
    model = train([data], None, tmp_path / "mcef.model", log=logs.append, init_model=tmp_path / "map.model",
                  objective="mce-f", algorithm="quickprop", c2=5e-6, max_iter=15, first_step=0.05)
    assert model.info["options"]["objective"] == "mce-f"
    corpus = base.space.encode(sents)
    obj = MCEF(Chain(base.space).bind(corpus), c2=5e-6)
    # the weights kept are the best point QuickProp met: never worse than the start
    assert obj(model.weights)[0] < obj(base.weights)[0]
    assert sum(line.startswith("iter") for line in logs) == len(model.info["history"])


@pytest.mark.parametrize("options, message", [
    (dict(objective="mce-f"), "use --algorithm quickprop"),
    (dict(objective="mce-f", algorithm="cg"), "objective mce-f"),
    (dict(algorithm="quickprop", first_step=0.0), "--first-step"),
    (dict(algorithm="quickprop", gpd_iter=-1), "--gpd-iter"),
])
def test_quickprop_and_mce_f_option_errors(tmp_path, options, message):
    data = write_corpus(tmp_path / "train.txt", random_corpus(20, seed=3))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    with pytest.raises(CrftkError, match=message):
        train([data], tmpl, log=lambda m: None, **options)


def test_quickprop_trains_a_map_model(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(120, seed=5))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    model = train([data], tmpl, log=lambda m: None, algorithm="quickprop", first_step=0.5, max_iter=60)
    obj = Likelihood.chain(model.space, model.space.encode(random_corpus(120, seed=5)), c2=1.0)
    assert obj(model.weights)[0] < 0.5 * obj(np.zeros(obj.n_params))[0]


def test_an_interrupt_keeps_the_weights_of_the_last_iteration(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(80, seed=4))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)

    def log(line):
        if line.startswith("iter    4"):
            raise KeyboardInterrupt

    path = tmp_path / "m.model"
    with pytest.raises(KeyboardInterrupt):
        train([data], tmpl, path, log=log, max_iter=50, threads=1)
    model = Model.load(path)
    assert model.info["interrupted"] and model.info["iterations"] == model.info["chosen_iteration"] == 4
    assert model.info["stop_reason"] == "interrupted after iteration 4"
    again = train([data], tmpl, log=lambda m: None, max_iter=4, threads=1)
    assert np.array_equal(model.weights, again.weights)
    # without a model path to save to (the Python API) the interrupt is the caller's
    with pytest.raises(KeyboardInterrupt):
        train([data], tmpl, log=log, max_iter=50, threads=1)


def test_checkpoints_let_a_crashed_run_resume(tmp_path):
    data = write_corpus(tmp_path / "train.txt", random_corpus(80, seed=4))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    path = tmp_path / "m.model"
    checkpoint = tmp_path / "m.model.checkpoint"

    class Crash(Exception):
        pass

    def log(line):
        if line.startswith("iter    5"):
            raise Crash        # as if killed: nothing is saved at the end

    with pytest.raises(Crash):
        train([data], tmpl, path, log=log, max_iter=50, threads=1, checkpoint_every=2)
    assert not path.exists()
    saved = Model.load(checkpoint)
    assert saved.info["checkpoint"] and saved.info["iterations"] == 4
    assert np.array_equal(saved.weights, train([data], tmpl, log=lambda m: None, max_iter=4, threads=1).weights)
    logs = []
    resumed = train([data], None, path, log=logs.append, init_model=checkpoint, max_iter=30, threads=1,
                    checkpoint_every=2)
    assert resumed.info["objective"] < saved.info["objective"]
    assert not checkpoint.exists()                 # finished: the model supersedes it
    assert any(line.startswith("checkpoint: iteration 2 saved") for line in logs)
    with pytest.raises(CrftkError, match="needs a model path"):
        train([data], tmpl, log=lambda m: None, checkpoint_every=2)
