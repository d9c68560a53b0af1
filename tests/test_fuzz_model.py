"""Fuzz: the model loader on damaged and on forged model files.

A damaged file (bytes cut, flipped or appended) and a forged one (checksums
right, contents wrong: what an older version, a bug or a hand edit could write)
either fail to load with a CrftkError naming the file, or load as a model that
tags; nothing else, in particular no crash of the Cython kernels, which trust
the arrays they are given. The commands that read a model end in one line and
leave no output behind.
"""

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import fuzz_strategies as fz
import pytest
from crftk.io import container
from crftk.errors import CrftkError
from crftk.model import Model

#: The model-integrity branch (container format 2) validates what it loads.

TAG_INPUT = fz.conll_text(fz.TRAIN[:2]) + "Unseen NN B-NP\nwords VBZ B-VP\n\n"
WHICH = st.sampled_from(["crf", "crf", "order2", "memm"])


@st.composite
def damage(draw, data):
    """The bytes of a model file, damaged: cut, bytes changed, inserted or appended."""
    kind = draw(st.sampled_from(["cut", "flip", "flip", "insert", "append", "header"]))
    if kind == "cut":
        return data[:draw(st.integers(0, len(data) - 1))]
    if kind == "append":
        return data + draw(st.binary(min_size=1, max_size=64))
    # the first 20 bytes are the preamble, then the JSON header: aim there as often as anywhere
    end = len(data) if kind != "header" else min(len(data), 20 + int.from_bytes(data[12:20], "little"))
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, end - 1))
        if kind == "insert":
            out[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            out[at] = draw(st.integers(0, 255).filter(lambda b, a=at: b != out[a]))
    return bytes(out)


@pytest.mark.fuzz(weight=2)
@given(which=WHICH, data=st.data())
@fz.counted
def test_damaged_model_fails_to_load_naming_the_file(models, sandbox, fuzz_dir, which, data):
    damaged = data.draw(damage(models[which].data), label="damaged")
    with fz.scratch(fuzz_dir) as d:
        path = fz.write(d / "m.model", damaged)
        text = fz.write(d / "in.txt", TAG_INPUT)
        try:
            out = sandbox.call("tag", path, [str(text)], threads=1)
        except CrftkError as e:
            fz.assert_names(e, path, line=False)
            return
        # what still loads tags: the input comes back with one more column
        rows = [fz.fields(l) for l in out.splitlines() if l.strip()]
        assert [r[:-1] for r in rows] == fz.reference_tokens(TAG_INPUT.encode())


#: JSON values a forged header might hold in place of the right one.
json_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 2, 3, -1, 2**31, 2**63]),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8), st.sampled_from(["", "crf", "memm"]),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)

_INT_EDGES = [-1, 0, 1, 2, 3, 7, 50, 2**31 - 1, -2**31, 2**40]
_FLOAT_EDGES = [np.nan, np.inf, -np.inf, 1e308, -1e308, 0.0]


@st.composite
def forged(draw, data):
    """A model file whose checksums are right but whose contents are not."""
    meta, arrays = container.loads(data)
    arrays = dict(arrays)
    for _ in range(draw(st.integers(1, 3))):
        target = draw(st.sampled_from(["meta", "template", "array", "array", "array"]))
        # the file's own fields, or those of its (first) part's feature space
        space = meta["parts"][0]["space"] if isinstance(meta.get("parts"), list) and meta["parts"] \
            and isinstance(meta["parts"][0], dict) and isinstance(meta["parts"][0].get("space"), dict) else meta
        if target == "meta":
            fields = draw(st.sampled_from([meta, space]))
            if not fields:
                continue
            key = draw(st.sampled_from(sorted(fields)))
            if draw(st.integers(0, 5)) == 0:
                del fields[key]
            else:
                fields[key] = draw(json_values)
        elif target == "template":
            space["template"] = draw(fz.template_texts())
        else:
            name = draw(st.sampled_from(sorted(arrays)))
            a = arrays[name].copy()
            how = draw(st.sampled_from(["value", "value", "shorter", "longer", "empty", "2d", "dtype", "drop"]))
            if how == "value" and a.size:
                at = draw(st.integers(0, a.size - 1))
                if a.dtype.kind == "f":
                    edges = _FLOAT_EDGES
                else:
                    info = np.iinfo(a.dtype)
                    edges = [v for v in _INT_EDGES if info.min <= v <= info.max]
                a.flat[at] = draw(st.sampled_from(edges))
            elif how == "shorter" and a.size:
                a = a[:draw(st.integers(0, a.size - 1))]
            elif how == "longer":
                a = np.concatenate([a, a[-1:] if len(a) else np.zeros((1,) + a.shape[1:], a.dtype)])   # 2-D too
            elif how == "empty":
                a = a[:0]
            elif how == "2d" and a.size % 2 == 0:
                a = a.reshape(2, -1)
            elif how == "dtype":
                a = a.astype(draw(st.sampled_from(["<i4", "<i8", "<u8", "<f8", "|u1"])))
            elif how == "drop":
                del arrays[name]
                continue
            arrays[name] = np.ascontiguousarray(a)
    return container.dumps(meta, arrays)


@pytest.mark.fuzz(weight=3)
@given(which=WHICH, data=st.data())
@example(which="crf", data=None)
@fz.counted
def test_forged_model_fails_to_load_or_tags(models, sandbox, fuzz_dir, which, data):
    if data is None:     # the explicit example: a weight index past the weights (the kernels read it)
        meta, arrays = container.loads(models[which].data)
        arrays = dict(arrays)
        arrays["0:feat_ptr"] = arrays["0:feat_ptr"].copy()
        arrays["0:feat_ptr"][-1] = 2**31 - 1
        forged_bytes = container.dumps(meta, arrays)
    else:
        forged_bytes = data.draw(forged(models[which].data), label="forged")
    with fz.scratch(fuzz_dir) as d:
        path = fz.write(d / "m.model", forged_bytes)
        text = fz.write(d / "in.txt", TAG_INPUT)
        try:
            out = sandbox.call("tag", path, [str(text)], threads=1, time_limit=60)
        except CrftkError as e:
            if e.path == str(text):
                # a forged header can be a consistent model of another column count (crftk trains
                # such models with --label-col): then the input is at fault, and the error says so
                assert "column" in e.message, str(e)
                space = Model.from_bytes(forged_bytes).space
                allowed = {space.n_columns} | ({space.n_columns - 1}
                                              if space.label_col == space.n_columns - 1 else set())
                assert len(fz.reference_tokens(TAG_INPUT.encode())[0]) not in allowed, str(e)
                return
            fz.assert_names(e, path, line=False)
            return
        rows = [fz.fields(l) for l in out.splitlines() if l.strip()]
        assert [r[:-1] for r in rows] == fz.reference_tokens(TAG_INPUT.encode())


MODEL_COMMANDS = ["tag", "info", "info-json", "dump", "train-init"]


@pytest.mark.fuzz(weight=0.5)
@given(which=WHICH, command=st.sampled_from(MODEL_COMMANDS), data=st.data())
@fz.counted
def test_commands_on_a_damaged_model_end_in_one_line(models, sandbox, fuzz_dir, which, command, data):
    damaged = data.draw(damage(models[which].data), label="damaged")
    with fz.scratch(fuzz_dir) as d:
        model = fz.write(d / "m.model", damaged)
        text = fz.write(d / "in.txt", TAG_INPUT)
        out = d / "out"
        out.mkdir()
        args = {"tag": ["tag", "-m", model, "-o", out / "t.txt", text],
                "info": ["info", model], "info-json": ["info", "--json", model],
                "dump": ["dump", "-o", out / "dump.txt", model],
                "train-init": ["train", "-q", "--init", model, "-m", out / "m2.model", "--max-iter", 2, "-p", 1,
                               text]}[command]
        result = sandbox.call("cli", args)
        fz.check_cli(result, out, [])
        if result["exit_code"] != 0:
            assert result["exit_code"] == 1, result["stderr"]
            assert f"crftk: error: {model}" in result["stderr"], result["stderr"]


def test_make_fuzz_model_script_starts():
    # make fuzz-model runs this script outside pytest: an import it lost went unnoticed once
    import subprocess
    import sys
    from corpora import REPO
    run = subprocess.run([sys.executable, str(REPO / "fuzz" / "model_bitflips.py"), "--help"],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "--cases" in run.stdout
