"""Real values end to end: through feature dicts, a %num template line and a CRFsuite data
file, a value reaches the kernels (the model learns from its size, not from its presence), and
the three front ends give the same model for the same data."""

import numpy as np
import pytest
from click.testing import CliRunner

from crftk import CRF, Model
from crftk.cli import main

RNG = np.random.default_rng(7)
# one attribute "x" on every token; its sign alone says the label (P above 0, N below)
XS = [np.round(RNG.uniform(-2, 2, size=n), 3) for n in RNG.integers(2, 7, size=40)]
XS = [np.where(np.abs(x) < 0.05, 0.5, x) for x in XS]
TAGS = [["P" if v > 0 else "N" for v in x] for x in XS]


def as_dicts(xs):
    return [[{"x": float(v), "bias": 1.0} for v in x] for x in xs]


def weight_of(model, attribute, label):
    space = model.space
    a = space.attribute_strings().index(attribute)
    y = space.labels.index(label)
    f = np.flatnonzero(space.feat_label[space.feat_ptr[a]:space.feat_ptr[a + 1]] == y)
    return float(model.weights[space.feat_ptr[a] + f[0]])


def test_a_real_valued_dict_feature_is_learnt_from_its_value():
    crf = CRF(max_iter=200, c2=0.01, threads=1).fit(as_dicts(XS), TAGS)
    assert crf.predict(as_dicts(XS)) == TAGS
    # presence alone (every token has x) could not separate the labels: the weights use the value
    assert weight_of(crf.model_, "x", "P") - weight_of(crf.model_, "x", "N") > 1.0
    marg = crf.predict_marginals([[{"x": 3.0, "bias": 1.0}], [{"x": -3.0, "bias": 1.0}]])
    assert marg[0][0]["P"] > 0.9 and marg[1][0]["N"] > 0.9


def test_dicts_template_num_line_and_crfsuite_file_give_one_model(tmp_path):
    by_dicts = CRF(max_iter=60, c2=0.1, threads=1).fit(as_dicts(XS), TAGS).model_
    conll = tmp_path / "train.conll"
    conll.write_text("".join("".join(f"{v}\t{t}\n" for v, t in zip(x, tags)) + "\n" for x, tags in zip(XS, TAGS)))
    template = tmp_path / "num.tmpl"
    template.write_text("U00:%num[0,0]\nB\n")
    crfsuite = tmp_path / "train.crfsuite"
    crfsuite.write_text("".join("".join(f"{t}\tx:{v}\tbias\n" for v, t in zip(x, tags)) + "\n"
                                for x, tags in zip(XS, TAGS)))
    runner = CliRunner()
    for args in (["-t", str(template), "-m", str(tmp_path / "num.model"), str(conll)],
                 ["--format", "crfsuite", "-m", str(tmp_path / "cs.model"), str(crfsuite)]):
        r = runner.invoke(main, ["train", "--max-iter", "60", "--c2", "0.1", "-p", "1", "-q", *args])
        assert r.exit_code == 0, r.output
    by_file = Model.load(tmp_path / "cs.model")
    assert by_file.space.attribute_strings() == by_dicts.space.attribute_strings()
    np.testing.assert_allclose(by_file.weights, by_dicts.weights, rtol=1e-9, atol=1e-12)
    # the template has no bias line, so compare what it learns of the value: it tags the same
    r = runner.invoke(main, ["tag", "-m", str(tmp_path / "num.model"), str(conll)])
    assert r.exit_code == 0, r.output
    predicted = [line.split("\t")[-1] for line in r.output.splitlines() if line]
    assert predicted == [t for tags in TAGS for t in tags]


@pytest.mark.parametrize("algorithm", ["lbfgs", "sgd", "perceptron", "pa", "arow", "pcg"])
def test_every_chain_algorithm_learns_from_values(algorithm):
    options = {"c2": 0.01} if algorithm in ("lbfgs", "sgd", "pcg") else {}
    crf = CRF(algorithm=algorithm, max_iter=100, threads=1, **options).fit(as_dicts(XS), TAGS)
    tagged = crf.predict(as_dicts(XS))
    right = sum(a == b for s, g in zip(tagged, TAGS) for a, b in zip(s, g))
    assert right / sum(map(len, TAGS)) > 0.95
