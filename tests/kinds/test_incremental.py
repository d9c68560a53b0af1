"""Incremental training (crftk train --init MODEL NEW_DATA, crftk.kinds.incremental): --init-space
grow adds the new data's attributes, state features and labels to the model's space and starts
from its weights (every new one 0); keep trains the old space; what cannot grow keeps it, saying
so in one line."""

import numpy as np
import pytest

from corpora import cli, error_line, random_corpus, sentences, write_conll
from crftk import CRF
from crftk.commands.train import train
from crftk.errors import CrftkError
from crftk.features.attributes import flatten
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.kinds.chain import ChainTrainer
from crftk.kinds.incremental import why_kept
from crftk.model import Model
from crftk.training import check_options, fit

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[0,1]\nU03:%x[0,0]/%x[0,1]\nB\n"
OPTIONS = dict(threads=1, max_iter=8)


def quiet(msg):
    pass


def first_half():
    return random_corpus(60, seed=1, vocab=10)


def new_data():
    """Words beyond the first half's vocabulary, and a label (B-Z) it never had."""
    out = []
    for s in random_corpus(60, seed=2, vocab=20):
        out.append([[w, p, "B-Z" if w in ("w14", "w17") else y] for w, p, y in s.rows])
    return sentences(out)


def base_model(**options):
    return fit(first_half(), parse_template(TEMPLATE), log=quiet, **{**OPTIONS, **options})


def by_name(space, weights):
    """{(attribute string, label): weight} of the state features, {(label, label): weight} of the
    transitions."""
    lay = space.layout()
    names = space.attribute_strings()
    attr = np.repeat(np.arange(space.n_attrs), np.diff(space.feat_ptr))
    state = {(names[a], space.labels[y]): w for a, y, w in zip(attr, space.feat_label, weights[lay.state])}
    trans = lay.transitions(np.asarray(weights))
    pairs = {(a, b): trans[i, j] for i, a in enumerate(space.labels) for j, b in enumerate(space.labels)}
    return state, pairs


def started(model, data, init_space="grow", **options):
    """(job, first point, log lines) of training ``model`` further on ``data``, as the driver starts."""
    lines = []
    opt = check_options({**OPTIONS, **options})
    trainer = ChainTrainer()
    job = trainer.prepare(data, model.space.template, opt, init=model, log=lines.append, source=None,
                          n_threads=1, init_space=init_space)
    _, w0 = trainer.start(job, model.space.template, opt, model)
    return job, w0, lines


def test_grow_keeps_every_old_weight_and_starts_the_new_ones_at_zero():
    model = base_model()
    job, w0, lines = started(model, new_data())
    old, new = model.space, job.structure.space
    assert "B-Z" in new.labels and "B-Z" not in old.labels
    assert new.n_attrs > old.n_attrs and new.n_features > old.n_features
    old_state, old_trans = by_name(old, model.weights)
    new_state, new_trans = by_name(new, w0)
    assert set(old_state) < set(new_state)
    for key, w in new_state.items():
        assert w == old_state.get(key, 0.0)
    for (a, b), w in new_trans.items():
        assert w == old_trans.get((a, b), 0.0)          # a label never seen: zero transitions
    assert all(new_trans[("B-Z", b)] == 0 == new_trans[(b, "B-Z")] for b in new.labels)
    added = [line for line in lines if line.startswith("--init-space grow: the training data adds")]
    assert len(added) == 1
    assert (f"1 label ({old.n_labels} -> {new.n_labels}): B-Z" in added[0]
            and f"({old.n_attrs:,} -> {new.n_attrs:,})" in added[0]
            and f"({old.n_features:,} -> {new.n_features:,})" in added[0]
            and f"({old.n_params:,} -> {new.n_params:,})" in added[0])


def test_the_same_data_adds_nothing_and_trains_as_keep(tmp_path):
    """A checkpoint resumed with its own data: the union adds nothing, so grow is today's --init."""
    for min_freq in (1, 2):
        model = base_model(min_freq=min_freq)
        runs = {}
        for mode in ("grow", "keep"):
            lines = []
            runs[mode] = fit(first_half(), None, init=model, init_space=mode, log=lines.append,
                             min_freq=min_freq, **OPTIONS), lines
        (grown, glines), (kept, klines) = runs["grow"], runs["keep"]
        assert grown.space is model.space is kept.space
        np.testing.assert_array_equal(grown.weights, kept.weights)
        assert not any("--init-space" in line for line in glines)
        strip = [line.rsplit("  ", 1)[0].split(" (")[0] for line in glines]     # the seconds differ
        assert strip == [line.rsplit("  ", 1)[0].split(" (")[0] for line in klines]


def test_min_freq_prunes_the_new_attributes_only():
    model = base_model()                                # min_freq 1: its rare attributes too
    data = new_data()
    job, _, _ = started(model, data, min_freq=3)
    names = set(job.structure.space.attribute_strings())
    old = set(model.space.attribute_strings())
    frequent = set(FeatureSpace.fit(data, parse_template(TEMPLATE), min_freq=3)[0].attribute_strings())
    assert old <= names
    assert names == old | frequent
    assert names - old and not (names - old) - frequent


def test_keep_trains_the_old_space_and_refuses_an_unknown_label():
    model = base_model()
    kept = fit(first_half(), None, init=model, init_space="keep", log=quiet, **OPTIONS)
    assert kept.space is model.space
    data = [s for s in new_data() if all(y != "B-Z" for _, _, y in s.rows)]
    unseen = fit(data, None, init=model, init_space="keep", log=quiet, **OPTIONS)   # new words ignored
    assert unseen.space.n_params == model.space.n_params
    with pytest.raises(CrftkError, match="not one of the --init model's"):
        fit(new_data(), None, init=model, init_space="keep", log=quiet, **OPTIONS)
    with pytest.raises(CrftkError, match="init.space must be one of grow, keep"):
        fit(new_data(), None, init=model, init_space="more", log=quiet, **OPTIONS)


def test_a_grown_model_tags_the_new_label_and_keeps_the_old_ones():
    model = base_model(max_iter=30)
    grown = CRF(init=model, max_iter=30, threads=1).fit(
        [[r[:2] for r in s.rows] for s in new_data()], [[r[2] for r in s.rows] for s in new_data()])
    predicted = grown.predict([[["w14", "A"], ["w3", "A"], ["w1", "A"]]])[0]
    assert predicted[0] == "B-Z" and predicted[1] == "B-X"


def test_partial_labels_keep_the_space_in_one_line_and_a_refusal_prints_its_own_alone():
    model = base_model()
    data = [list(map(list, s.rows)) for s in first_half()]
    data[0][0][2] = "?"
    lines = []
    out = fit(sentences(data), None, init=model, log=lines.append, **OPTIONS)
    said = [line for line in lines if line.startswith("--init-space grow:")]
    assert said == ["--init-space grow: partial labels are resolved against the --init model's labels: the --init "
                    "model's space is kept (as --init-space keep)"]
    assert out.space is model.space
    lines = []        # order 2 reads the first-order model's labels as pairs: refused, with no line before
    with pytest.raises(CrftkError):
        fit(first_half(), None, init=model, log=lines.append, order=2, **OPTIONS)
    assert not any(line.startswith("--init-space") for line in lines)
    assert "--order 2" in why_kept(model.space.template, check_options({}), True)


def test_feature_dicts_factorial_and_semimarkov_keep_their_space_in_one_line():
    X = [[{"w": "a"}, {"w": "b"}], [{"w": "c"}]]
    y = [["N", "V"], ["N"]]
    dicts = CRF(max_iter=3, threads=1).fit(X, y)
    lines = []
    more = fit(flatten([[{"w": "zz"}]], [["N"]]), None, init=dicts.model_, log=lines.append, **OPTIONS)
    assert more.space.n_params == dicts.model_.space.n_params
    assert sum(line.startswith("--init-space grow: feature dicts") for line in lines) == 1

    rows = [[["w1", "A", "x"], ["w2", "B", "y"]], [["w3", "A", "x"]]]
    fcrf = fit(sentences(rows), parse_template("U00:%x[0,0]\nB\n"), label_col=[1, 2], log=quiet, **OPTIONS)
    lines = []
    fit(sentences(rows), None, init=fcrf, label_col=[1, 2], log=lines.append, **OPTIONS)
    assert sum(line.startswith("--init-space grow: a factorial CRF") for line in lines) == 1

    chunks = [[["w1", "B-X"], ["w2", "I-X"], ["w3", "O"]], [["w4", "B-Y"]]]
    semi = fit(sentences(chunks), parse_template("U00:%x[0,0]\nB\n"), model_type="semimarkov", log=quiet,
               **OPTIONS)
    lines = []
    fit(sentences(chunks), None, init=semi, model_type="semimarkov", log=lines.append, **OPTIONS)
    assert sum(line.startswith("--init-space grow: a semi-Markov CRF") for line in lines) == 1


def test_cli_grows_by_default_and_refuses_a_bad_init_space(tmp_path):
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text(TEMPLATE)
    first, second = write_conll(tmp_path / "a.txt", first_half()), write_conll(tmp_path / "b.txt", new_data())
    train([first], tmpl, tmp_path / "a.model", log=quiet, **OPTIONS)
    proc = cli("train", "--init", tmp_path / "a.model", "-m", tmp_path / "b.model", "--max-iter", 3, "-p", 1,
               second)
    assert proc.returncode == 0, proc.stderr
    assert sum("the training data adds" in line for line in proc.stderr.splitlines()) == 1
    assert "B-Z" in Model.load(tmp_path / "b.model").labels
    line = error_line(cli("train", "--init", tmp_path / "a.model", "-m", tmp_path / "c.model",
                          "--init-space", "more", second), status=2)
    assert "--init-space" in line
    line = error_line(cli("train", "--init", tmp_path / "a.model", "-m", tmp_path / "c.model",
                          "--init-space", "keep", second))
    assert "B-Z" in line and "not one of the --init model's" in line and str(second) in line
    assert not (tmp_path / "c.model").exists()


@pytest.mark.parametrize("marker", ["?", ""])
def test_grow_refuses_data_without_the_label_column_as_keep_does(marker):
    """Rows one column short: the label column is missing (grow read it for partial labels first,
    an IndexError)."""
    model = base_model()
    short = sentences([[row[:2] for row in s.rows] for s in new_data()])
    for init_space in ("grow", "keep"):
        with pytest.raises(CrftkError, match="the training data has no gold label column"):
            fit(short, None, init=model, init_space=init_space, unknown_label=marker, log=quiet, **OPTIONS)
