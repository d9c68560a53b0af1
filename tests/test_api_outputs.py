"""The Python API's writes never replace the files its estimators were given: a save, an export,
a trace or a checkpoint onto a template, an init model or a stage model is refused (CrftkError
naming both), the file left as it was."""

import shutil

import pytest

from crftk import CRF, Bag, CrftkError, FactorialCRF, Pipeline

TEMPLATE = "U00:%x[0,0]\nU01:%x[0,1]\nB\n"
X = [[["The", "DT"], ["cat", "NN"], ["sat", "VBD"]], [["A", "DT"], ["dog", "NN"], ["barked", "VBD"]]]
Y = [["B-NP", "I-NP", "B-VP"], ["B-NP", "I-NP", "B-VP"]]
FAST = dict(max_iter=3, threads=1)


@pytest.fixture
def files(tmp_path):
    (tmp_path / "t.tmpl").write_text(TEMPLATE)
    (tmp_path / "words.tmpl").write_text("U00:%x[0,0]\nB\n")
    return tmp_path


def refused(call, path, words):
    before = path.read_bytes()
    with pytest.raises(CrftkError) as info:
        call()
    assert words in str(info.value) and str(path) in str(info.value), str(info.value)
    assert path.read_bytes() == before


def test_crf_save_onto_its_template_or_init_model_is_refused(files):
    tmpl = files / "t.tmpl"
    crf = CRF(str(tmpl), **FAST).fit(X, Y)
    refused(lambda: crf.save(tmpl), tmpl, "the model would overwrite the template")
    crf.save(files / "m.model")
    again = CRF(init=str(files / "m.model"), **FAST).fit(X, Y)
    refused(lambda: again.save(files / "m.model"), files / "m.model", "the model would overwrite the init model")


def test_crf_trace_or_checkpoint_onto_its_template_is_refused_before_fitting(files):
    tmpl = files / "t.tmpl"
    refused(lambda: CRF(str(tmpl), trace=str(tmpl), **FAST).fit(X, Y), tmpl,
            "the trace would overwrite the template")
    refused(lambda: CRF(str(tmpl), checkpoint=str(tmpl), checkpoint_every=1, **FAST).fit(X, Y), tmpl,
            "the checkpoint would overwrite the template")


def test_crf_fitting_from_a_checkpoint_may_update_it(files):
    CRF(str(files / "t.tmpl"), **FAST).fit(X, Y).save(files / "c.checkpoint")
    CRF(init=str(files / "c.checkpoint"), checkpoint=str(files / "c.checkpoint"), checkpoint_every=1,
        **FAST).fit(X, Y)


def test_bag_save_and_export_onto_a_template_are_refused(files):
    bag = Bag([str(files / "t.tmpl"), str(files / "words.tmpl")], **FAST).fit(X, Y)
    refused(lambda: bag.save(files / "words.tmpl"), files / "words.tmpl", "the model would overwrite the template")
    refused(lambda: bag.export(files / "t.tmpl"), files / "t.tmpl",
            "the exported model would overwrite the template")


def test_pipeline_save_onto_a_stage_model_is_refused(files):
    pos = CRF("U00:%x[0,0]\nB\n", label_col=1, **FAST).fit([[[w, c] for (w, _), c in zip(s, ys)]
                                                             for s, ys in zip(X, Y)], [[r[1] for r in s] for s in X])
    pos.save(files / "pos.model")
    CRF(str(files / "t.tmpl"), **FAST).fit(X, Y).save(files / "chunk.model")
    shutil.copy(files / "chunk.model", files / "chunk.copy")
    pipeline = Pipeline([str(files / "pos.model"), str(files / "chunk.model")], [1])
    refused(lambda: pipeline.save(files / "chunk.model"), files / "chunk.model",
            "the pipeline would overwrite the stage model")
    pipeline.save(files / "chunk.copy")              # another file: written


def test_factorial_save_onto_its_template_is_refused(files):
    (files / "f.tmpl").write_text("U00:%x[0,0]\nB\n")
    model = FactorialCRF(str(files / "f.tmpl"), **FAST).fit([[[r[0]] for r in s] for s in X],
                                                           [[[r[1] for r in s] for s in X], Y])
    refused(lambda: model.save(files / "f.tmpl"), files / "f.tmpl", "the model would overwrite the template")
