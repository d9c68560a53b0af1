"""crftk.CRF on feature dicts (template=None): training, decoding, model files, pickling, the
same model as a template expressing the same features, and the CRFsuite format on the CLI."""

import pickle

import numpy as np
import pytest
from click.testing import CliRunner

from crftk import CRF, CrftkError, Model
from crftk.cli import main
from crftk.io.crfsuite import write_crfsuite
from crftk.features.attributes import flatten

WORDS = [["the", "cat", "sat"], ["a", "dog", "ran", "home"], ["the", "dog", "sat"], ["a", "cat"]]
TAGS = [["D", "N", "V"], ["D", "N", "V", "N"], ["D", "N", "V"], ["D", "N"]]


def dicts(words):
    return [[{"U00": w} for w in s] for s in words]


def test_fit_predict_marginals_nbest_on_dicts():
    crf = CRF(max_iter=50, c2=0.1, threads=1).fit(dicts(WORDS), TAGS)
    assert crf.predict(dicts(WORDS)) == TAGS
    assert crf.classes_ == ["D", "N", "V"]
    marg = crf.predict_marginals([[{"U00": "dog"}], [], [["U00:dog"]]])
    assert marg[1] == [] and len(marg[0]) == 1 and abs(sum(marg[0][0].values()) - 1) < 1e-9
    assert marg[2] == marg[0]                      # a list of attribute strings is the same token
    best = crf.predict_nbest(dicts(WORDS[:1]), 2)[0]
    assert best[0][0] == TAGS[0] and best[0][1] > best[1][1]


def test_template_and_dicts_give_the_same_model():
    X = [[[w] for w in s] for s in WORDS]
    by_template = CRF("U00:%x[0,0]\nB\n", max_iter=30, threads=1).fit(X, TAGS)
    by_dicts = CRF(max_iter=30, threads=1).fit(dicts(WORDS), TAGS)
    st, sd = by_template.model_.space, by_dicts.model_.space
    assert sorted(st.attribute_strings()) == sorted(sd.attribute_strings())

    def weights(model):
        s, w = model.space, model.weights
        names = s.attribute_strings()
        return {(names[a], s.labels[s.feat_label[f]]): w[f]
                for a in range(s.n_attrs) for f in range(s.feat_ptr[a], s.feat_ptr[a + 1])}
    wt, wd = weights(by_template.model_), weights(by_dicts.model_)
    assert wt.keys() == wd.keys()
    assert np.allclose([wt[k] for k in wt], [wd[k] for k in wt], atol=1e-6)
    lay_t, lay_d = st.layout(), sd.layout()
    assert np.allclose(by_template.model_.weights[lay_t.trans], by_dicts.model_.weights[lay_d.trans], atol=1e-6)
    test = [["the", "dog"], ["a", "cat", "ran"]]
    assert by_template.predict([[[w] for w in s] for s in test]) == by_dicts.predict(dicts(test))


def test_model_file_pickling_and_load(tmp_path):
    crf = CRF(max_iter=20, threads=1).fit(dicts(WORDS), TAGS)
    path = tmp_path / "m.crftk"
    crf.save(path)
    loaded = CRF.load(path)
    assert loaded.template is None and loaded.predict(dicts(WORDS)) == crf.predict(dicts(WORDS))
    assert Model.load(path).space.attributes == crf.model_.space.attributes
    again = pickle.loads(pickle.dumps(crf))
    assert again.predict(dicts(WORDS)) == crf.predict(dicts(WORDS))
    data = path.read_bytes()
    (tmp_path / "cut.crftk").write_bytes(data[: len(data) // 2])
    with pytest.raises(CrftkError):
        Model.load(tmp_path / "cut.crftk")


@pytest.mark.parametrize("kw", [dict(order=2), dict(model_type="memm"), dict(algorithm="perceptron"),
                                dict(algorithm="sgd"), dict(c1=0.1), dict(feature_set="complete")])
def test_other_structures_and_algorithms_train_on_dicts(kw):
    crf = CRF(max_iter=30, threads=1, **kw).fit(dicts(WORDS), TAGS, dicts(WORDS[:2]), TAGS[:2])
    assert crf.predict(dicts(WORDS)) == TAGS


def test_transitions_seen_keeps_unseen_transitions_at_zero():
    crf = CRF(max_iter=30, threads=1, transitions="seen").fit(dicts(WORDS), TAGS)
    space = crf.model_.space
    trans = crf.model_.weights[space.layout().trans].reshape(3, 3)
    ix = space.label_index
    seen = {(ix[a], ix[b]) for s in TAGS for a, b in zip(s, s[1:])}
    for i in range(3):
        for j in range(3):
            assert (trans[i, j] == 0) == ((i, j) not in seen)


def test_dicts_with_a_template_and_bad_dicts_are_clear_errors():
    with pytest.raises(CrftkError, match=r"read without a template: CRF\(template=None\)"):
        CRF("U00:%x[0,0]\nB\n", max_iter=2).fit(dicts(WORDS), TAGS)
    with pytest.raises(CrftkError, match=r"^X\[1\]\[0\]: feature 'U00' has the value None"):
        CRF(max_iter=2).fit([[{"U00": "a"}], [{"U00": None}]], [["A"], ["B"]])
    with pytest.raises(CrftkError, match=r"^X\[0\] has 1 tokens but y\[0\] has 2 labels"):
        CRF(max_iter=2).fit([[{"U00": "a"}]], [["A", "B"]])
    with pytest.raises(CrftkError, match="feature dicts take none"):
        CRF(max_iter=2).fit(dicts(WORDS), TAGS, docs=[0, 0, 1, 1])


def test_train_and_tag_crfsuite_files(tmp_path):
    train, model, out = tmp_path / "train.crfsuite", tmp_path / "m.crftk", tmp_path / "out.txt"
    with open(train, "w") as f:
        write_crfsuite(flatten(dicts(WORDS), TAGS), f)
    runner = CliRunner()
    r = runner.invoke(main, ["train", "--format", "crfsuite", str(train), "-m", str(model), "--max-iter", "30",
                             "--dev", str(train), "-q"])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["tag", "--format", "crfsuite", "--reference", "-m", str(model), str(train),
                             "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text() == "".join("".join(f"{t}\t{t}\n" for t in s) + "\n" for s in TAGS)
    r = runner.invoke(main, ["eval", str(out)])
    assert r.exit_code == 0 and "accuracy: 100.00%" in r.output
    r = runner.invoke(main, ["train", "--format", "crfsuite", str(train), "-m", str(model), "-t", "x.tmpl"])
    assert r.exit_code == 2 and "drop --template" in r.output
    r = runner.invoke(main, ["tag", "-m", str(model), str(train)])
    assert r.exit_code != 0 and "tag CRFsuite data files with --format crfsuite" in r.output
    (tmp_path / "bad.crfsuite").write_text("A\tx:oops\n")
    r = runner.invoke(main, ["tag", "--format", "crfsuite", "-m", str(model), str(tmp_path / "bad.crfsuite")])
    assert r.exit_code == 1 and "bad.crfsuite:1: the value 'oops' is not a number" in r.output
    assert "Traceback" not in r.output
    r = runner.invoke(main, ["compose", "-m", str(model), "-m", str(model), "--feed", "0", "-o", str(tmp_path / "p")])
    assert r.exit_code == 1 and "was trained on attributes" in r.output


def test_info_dump_and_a_column_init_on_an_attribute_model_are_clean(tmp_path):
    model, conll = tmp_path / "m.crftk", tmp_path / "train.txt"
    CRF(max_iter=5).fit(dicts(WORDS), TAGS).save(model)
    conll.write_text("".join("".join(f"{w}\t{t}\n" for w, t in zip(s, y)) + "\n" for s, y in zip(WORDS, TAGS)))
    runner = CliRunner()
    r = runner.invoke(main, ["info", str(model)])
    assert r.exit_code == 0, r.output
    assert "attributes" in r.output and "vectors" not in r.output
    r = runner.invoke(main, ["info", "--json", str(model)])
    assert r.exit_code == 0, r.output
    r = runner.invoke(main, ["train", "--init", str(model), "-m", str(tmp_path / "x.crftk"), str(conll), "-q"])
    assert r.exit_code == 1 and "trained on attribute data" in r.output, r.output
    assert not (tmp_path / "x.crftk").exists()
