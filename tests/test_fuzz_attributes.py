"""Fuzz: the inputs of issue 33. Random CRFsuite data files train (and tag) or fail in one line
naming the file; random feature dicts train to finite weights or fail with a CrftkError; model files
of attributes and of %vec templates, damaged or forged, are refused in one line or tag."""

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import fuzz_strategies as fz
from crftk import CRF
from crftk.errors import CrftkError
from crftk.io.crfsuite import escape
from test_fuzz_model import damage, forged

NAMES = st.text(st.sampled_from("ab=:\\\\ \t\u00e9x1"), min_size=0, max_size=5)
VALUES = st.one_of(st.sampled_from(["", ":1", ":0", ":-2.5", ":1e308", ":-1e308", ":1e-320", ":nan", ":inf", ":x",
                                    ":1:2", ":0x10", ":1_0"]),
                   st.floats(allow_nan=False, width=32).map(lambda v: f":{v!r}"))


@st.composite
def crfsuite_files(draw):
    """Bytes of a CRFsuite data file, mostly well formed: labels, attributes with values and
    escapes, sequence ends of every kind, now and then a declaration or stray bytes."""
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["token"] * 6 + ["blank", "crlf", "tabs", "weight", "junk"]))
        if kind == "token":
            label = draw(st.sampled_from(["A", "B", "C", "B-NP", "l\\:1", "A B", ""]))
            attrs = [draw(NAMES) + draw(VALUES) for _ in range(draw(st.integers(0, 4)))]
            lines.append("\t".join([label, *attrs]).encode("utf-8"))
        elif kind == "blank":
            lines.append(b"")
        elif kind == "crlf":
            lines.append(b"\r")
        elif kind == "tabs":
            lines.append(b"\t\t")
        elif kind == "weight":
            lines.append(draw(st.sampled_from([b"@weight:1\tA\tx", b"@weight:2\tA\tx", b"@other\tA"])))
        else:
            lines.append(draw(st.binary(max_size=6)))
    return b"\n".join(lines) + draw(st.sampled_from([b"\n", b"", b"\n\n"]))


def ends_in_one_line(result, path):
    assert result["traceback"] is None, result["traceback"]
    if result["exit_code"] == 0:
        return True
    message = result["stderr"] or result["stdout"]
    assert result["exit_code"] in (1, 2) and len(message.strip().splitlines()) == 1, message
    assert message.startswith("crftk: error:"), message
    return False


@pytest.mark.fuzz(weight=2)
@given(data=crfsuite_files(), algorithm=st.sampled_from(["lbfgs", "lbfgs", "sgd", "pa", "arow", "perceptron"]))
@fz.counted
def test_crfsuite_files_train_and_tag_or_fail_in_one_line(sandbox, fuzz_dir, data, algorithm):
    with fz.scratch(fuzz_dir) as d:
        path = fz.write(d / "data.crfsuite", data)
        model = d / "m.crftk"
        trained = sandbox.call("cli", ["train", "--format", "crfsuite", path, "-m", model, "--algorithm", algorithm,
                                       "--max-iter", "5", "-p", "1", "-q"])
        event(f"trained: {trained['exit_code'] == 0}")
        if not ends_in_one_line(trained, path):
            assert not model.exists()
            return
        out = d / "out.txt"
        tagged = sandbox.call("cli", ["tag", "--format", "crfsuite", "-m", model, path, "-o", out])
        assert ends_in_one_line(tagged, path) and out.exists()      # it trained on this file: it tags it
        labels = [l for l in out.read_text().split("\n\n") if l]
        assert sum(len(s.splitlines()) for s in labels) == Model_tokens(path)


def Model_tokens(path):
    from crftk.io.crfsuite import read_crfsuite
    return read_crfsuite(path).n_tokens


VALUE = st.one_of(st.text(max_size=3), st.booleans(), st.integers(-2**70, 2**70),
                  st.floats(allow_nan=True, allow_infinity=True), st.none(), st.binary(max_size=3),
                  st.lists(st.text(max_size=2), max_size=2), st.sampled_from([1e200, -1e300, 5e-324]))
TOKEN = st.one_of(st.dictionaries(st.text(max_size=3), st.one_of(VALUE, st.dictionaries(st.text(max_size=2), VALUE,
                                                                                          max_size=2)), max_size=4),
                  st.lists(st.text(max_size=3), max_size=3), st.none())


@pytest.mark.fuzz(weight=2)
@given(X=st.lists(st.lists(TOKEN, max_size=4), max_size=4), labels=st.data(),
       algorithm=st.sampled_from(["lbfgs", "sgd", "pa", "arow"]))
@fz.counted
def test_feature_dicts_train_to_finite_weights_or_fail_with_a_crftk_error(sandbox, X, labels, algorithm):
    y = [labels.draw(st.lists(st.sampled_from(["A", "B", "C"]), min_size=len(s), max_size=len(s))) for s in X]
    try:
        size, finite, predicted = sandbox.call("fit_dicts", X, y, algorithm=algorithm, max_iter=5, threads=1)
    except CrftkError as e:
        assert len(str(e).splitlines()) == 1, str(e)
        return
    event("dicts trained")
    assert finite and size > 0
    assert [len(p) for p in predicted] == [len(s) for s in X]


@pytest.fixture(scope="module")
def new_models(fuzz_dir):
    """A model of attributes (with real values) and a %vec template's model, files and bytes."""
    out = {}
    X = [[{"w": w, "len": len(w) / 3.0, "up": w.istitle()} for w, _, _ in s] for s in fz.TRAIN]
    y = [[r[2] for r in s] for s in fz.TRAIN]
    path = fuzz_dir / "attributes.model"
    CRF(max_iter=10, threads=1).fit(X, y).save(path)
    out["attributes"] = path
    vectors = fz.write(fuzz_dir / "vec.txt", "".join(f"{w} {i / 7:.3f} {-i / 5:.3f}\n" for i, w in enumerate(
        sorted({r[0] for s in fz.TRAIN for r in s}))))
    path = fuzz_dir / "vec.model"
    CRF("U00:%x[0,0]\nU10:%vec[0,0,emb]\nU11:%vec[1,0,emb]\nB\n", vectors={"emb": str(vectors)}, max_iter=10,
        threads=1).fit([[list(r) for r in s] for s in fz.TRAIN], y).save(path)
    out["vec"] = path
    crfsuite = fuzz_dir / "tag.crfsuite"
    crfsuite.write_text("".join("".join(f"{r[2]}\t{escape('w:' + r[0])}\tlen:{len(r[0]) / 3.0!r}\n" for r in s) + "\n"
                                for s in fz.TRAIN[:2]))
    out["crfsuite_input"] = crfsuite
    return out


def tag_or_refuse(sandbox, d, models, which, model_bytes):
    path = fz.write(d / "m.model", model_bytes)
    try:
        if which == "attributes":
            out = sandbox.call("tag_run", str(path), [str(models["crfsuite_input"])], str(d / "o.txt"),
                               data_format="crfsuite", threads=1, time_limit=60)
            assert len(out.split()) == Model_tokens(models["crfsuite_input"])
        else:
            text = fz.write(d / "in.txt", fz.conll_text(fz.TRAIN[:2]))
            out = sandbox.call("tag_run", str(path), [str(text)], str(d / "o.txt"), threads=1, time_limit=60)
            assert len([l for l in out.splitlines() if l.strip()]) == sum(len(s) for s in fz.TRAIN[:2])
    except CrftkError as e:
        assert len(str(e).splitlines()) == 1, str(e)
        if e.path != str(d / "in.txt"):
            fz.assert_names(e, path, line=False)


@pytest.mark.fuzz(weight=2)
@given(which=st.sampled_from(["attributes", "vec"]), data=st.data(), how=st.sampled_from(["damage", "forge"]))
@fz.counted
def test_damaged_or_forged_attribute_and_vector_models_are_refused_or_tag(new_models, sandbox, fuzz_dir, which,
                                                                          data, how):
    original = new_models[which].read_bytes()
    model_bytes = data.draw(damage(original) if how == "damage" else forged(original), label=how)
    with fz.scratch(fuzz_dir) as d:
        tag_or_refuse(sandbox, d, new_models, which, model_bytes)


def test_vector_and_attribute_arrays_cut_short_are_refused_in_one_line(new_models, sandbox, fuzz_dir):
    """Every array of the two kinds, truncated by one element and emptied: refused in one line, or tags."""
    from crftk.io import container
    for which in ("attributes", "vec"):
        meta, arrays = container.loads(new_models[which].read_bytes())
        for name in sorted(arrays):
            for cut in (-1, 0):
                forged_arrays = dict(arrays)
                a = arrays[name]
                forged_arrays[name] = np.ascontiguousarray(a[:cut] if cut else a[:0])
                with fz.scratch(fuzz_dir) as d:
                    tag_or_refuse(sandbox, d, new_models, which, container.dumps(meta, forged_arrays))
