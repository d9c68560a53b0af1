"""Fuzz: the model loader on damaged and on forged model files.

A damaged file (bytes cut, flipped or appended) and a forged one (checksums
right, contents wrong: what an older version, a bug or a hand edit could write)
either fail to load with a CrftkError naming the file, or load as a model that
tags; nothing else, in particular no crash of the Cython kernels, which trust
the arrays they are given. The commands that read a model end in one line and
leave no output behind. Every kind of model file is drawn from: the CRFs (first
and second order, MEMM), a pipeline, a bag and a factorial CRF; consistent
forgeries rewrite what ties the parts together (structure names, label columns,
a bag's weights table, a pipeline's feeds, part names and counts).
"""

import json
import os
import subprocess
import sys

import numpy as np
from hypothesis import example, given
from hypothesis import strategies as st

import fuzz_strategies as fz
import pytest
from crftk.io import container
from crftk.errors import CrftkError
from crftk.model import Model
from crftk.structures import STRUCTURES
from crftk.ensemble.combine import DECODINGS, METHODS

#: The model-integrity branch (container format 2) validates what it loads.

TAG_INPUT = fz.conll_text(fz.TRAIN[:2]) + "Unseen NN B-NP\nwords VBZ B-VP\n\n"
#: The model kinds of the session's models (conftest.models); the CRFs keep half of the draws.
CRF_KINDS = ["crf", "order2", "memm"]
NEW_KINDS = ["pipeline", "bag", "factorial", "semimarkov"]
WHICH = st.sampled_from(["crf", "crf", "order2", "memm", "pipeline", "bag", "factorial", "semimarkov"])
INPUT_ROWS = fz.reference_tokens(TAG_INPUT.encode())


def tag_any(sandbox, path, d, time_limit=60):
    """Tag TAG_INPUT with the model file ``path`` (any kind) in the sandbox, as crftk tag does:
    the output text; a CrftkError is raised as it came."""
    text = fz.write(d / "in.txt", TAG_INPUT)
    return sandbox.call("tag_run", str(path), [str(text)], str(d / "tagged.txt"), threads=1,
                        time_limit=time_limit)


def check_tagged(out):
    """What still loads tags: the input comes back, each token with the same (one or more)
    predicted columns added."""
    rows = [fz.fields(l) for l in out.splitlines() if l.strip()]
    width = len(INPUT_ROWS[0])
    assert [r[:width] for r in rows] == INPUT_ROWS, out
    assert len({len(r) for r in rows}) == 1 and len(rows[0]) > width, out


def check_refused(error, model_path, d, model_bytes, which):
    """A CrftkError of one line naming the model file; or naming the input, when the forged
    model is consistent but reads other columns than the input has."""
    assert isinstance(error, CrftkError)
    assert len(str(error).splitlines()) == 1, str(error)
    if error.path == str(d / "in.txt"):
        assert "column" in error.message, str(error)
        if which in CRF_KINDS:      # (crftk trains such models with --label-col)
            space = Model.from_bytes(model_bytes).space
            allowed = {space.n_columns} | ({space.n_columns - 1}
                                          if space.label_col == space.n_columns - 1 else set())
            assert len(INPUT_ROWS[0]) not in allowed, str(error)
        return
    fz.assert_names(error, model_path, line=False)


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
        try:
            out = tag_any(sandbox, path, d)
        except CrftkError as e:
            fz.assert_names(e, path, line=False)
            assert len(str(e).splitlines()) == 1, str(e)
            return
        check_tagged(out)


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
        # the file's own fields, or those of one of its parts' feature spaces
        parts = [p for p in meta.get("parts", []) if isinstance(p, dict) and isinstance(p.get("space"), dict)] \
            if isinstance(meta.get("parts"), list) else []
        space = draw(st.sampled_from(parts))["space"] if parts else meta
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
    refused_or_tagged(sandbox, fuzz_dir, forged_bytes, which)


# ---------------------------------------------------------------------------
# consistent forgeries: what ties a file's parts together, rewritten as a program other than
# crftk (or an edit by hand) could write it, checksums recomputed

STRUCTURE_NAMES = sorted(STRUCTURES)
LABEL_COLS = [-3, -2, -1, 0, 1, 2, 3, 4, 64, 2**31, -2**31, 2**63 - 1]
PART_NAMES = ["", "main", "stage0", "stage1", "stage2", "chain0", "chain1", "chain2", "pair0", "pair1",
              "<template>", "<template>-2", "x\ny"]
#: Values of a bag's combination weights; NaN and infinities are JSON another writer may emit.
BAG_WEIGHTS = [0.0, 0.5, 1.0, -1.0, -0.5, 1e308, -1e308, 1e-320, 2**70, float("nan"), float("inf"),
               True, None, "0.5", [0.5]]
FEEDS = [None, -3, -2, -1, 0, 1, 2, 3, 64, 2**31, 2**63 - 1, "1", 1.5, True, [1]]


class _JsonWithNan:
    """json whose dumps writes NaN and Infinity, as a writer other than crftk's may."""

    def __getattr__(self, name):
        return getattr(json, name)

    @staticmethod
    def dumps(obj, **kw):
        return json.dumps(obj, **dict(kw, allow_nan=True))


def dumps_any(meta, arrays):
    """container.dumps, but NaN and infinities in the header are written (as JSON's NaN/Infinity)."""
    real_json, real_check = container.json, container._check_json_value
    container.json, container._check_json_value = _JsonWithNan(), lambda *args: None
    try:
        return container.dumps(meta, arrays)
    finally:
        container.json, container._check_json_value = real_json, real_check


def _reorder_parts(meta, arrays, order):
    """Parts (header entries and arrays) in ``order`` (old indices; one may repeat or be missing)."""
    old_parts = meta["parts"]
    new_arrays = {}
    for new, old in enumerate(order):
        prefix = f"{old}:"
        for key, value in arrays.items():
            if key.startswith(prefix):
                new_arrays[f"{new}:{key[len(prefix):]}"] = value
    meta["parts"] = [json.loads(json.dumps(old_parts[old])) for old in order]
    arrays.clear()
    arrays.update(new_arrays)


def _bag_record(meta):
    return meta["info"].get("bag") if isinstance(meta["info"].get("bag"), dict) else None


def _stages(meta):
    spec = meta["info"].get("pipeline")
    return spec.get("stages") if isinstance(spec, dict) and isinstance(spec.get("stages"), list) else None


@st.composite
def consistent_forgery(draw, trained):
    """A model file of any kind whose checksums are right and whose arrays are crftk's, but whose
    header ties them together otherwise: another structure name (and the record that goes with
    it), other label columns or column counts, a bag's weights table emptied, partial, huge or
    NaN, a pipeline's feeds changed, parts renamed, dropped, repeated or swapped."""
    meta, arrays = container.loads(trained.data)     # (a TrainedModel: a short repr in reports)
    meta = json.loads(json.dumps(meta))
    arrays = dict(arrays)
    for _ in range(draw(st.integers(1, 2))):
        n = len(meta["parts"])
        if not n:             # its only part dropped: nothing left to edit
            break
        edits = ["structure", "label_col", "label_col", "n_columns", "part_name", "drop_part", "repeat_part",
                 "swap_parts", "record"]
        if _bag_record(meta) is not None:
            edits += ["bag_weights", "bag_weights", "bag_choice", "bag_members", "drop_bag"]
        else:
            edits += ["add_bag"]
        if _stages(meta):         # (a stage list emptied by an earlier edit has none to change)
            edits += ["feed", "feed", "stages"]
        if isinstance(meta["info"].get("factorial"), dict):
            edits += ["factorial_record"]
        edit = draw(st.sampled_from(edits))
        part = draw(st.integers(0, n - 1)) if n else 0
        if edit == "structure":
            name = draw(st.sampled_from(STRUCTURE_NAMES))
            meta["structure"] = name
            if name in ("chain", "pairs", "memm") and draw(st.booleans()):     # with the record that fits
                meta["info"].update(order=2 if name == "pairs" else 1,
                                    model_type="memm" if name == "memm" else "crf")
        elif edit == "label_col":
            space = meta["parts"][part]["space"]
            space["label_col"] = draw(st.sampled_from(LABEL_COLS + [space.get("n_columns", 3) - 1,
                                                                    space.get("n_columns", 3)]))
        elif edit == "n_columns":
            space = meta["parts"][part]["space"]
            space["n_columns"] = draw(st.sampled_from([0, 1, 2, 3, 4, 64, 65, 2**31, -1]))
            if draw(st.booleans()):
                space["label_col"] = space["n_columns"] - 1
        elif edit == "part_name":
            names = [p["name"] for p in meta["parts"]]
            new = draw(st.sampled_from(PART_NAMES + names))
            meta["parts"][part]["name"] = new
            bag = _bag_record(meta)
            if bag is not None and isinstance(bag.get("members"), list) and draw(st.booleans()) \
                    and part < len(bag["members"]):
                bag["members"][part] = new      # the record follows
        elif edit in ("drop_part", "repeat_part", "swap_parts"):
            order = list(range(n))
            if edit == "drop_part":
                del order[part]
            elif edit == "repeat_part":
                order.insert(draw(st.integers(0, n)), part)
            else:
                other = draw(st.integers(0, n - 1))
                order[part], order[other] = order[other], order[part]
            _reorder_parts(meta, arrays, order)
            if edit == "repeat_part" and draw(st.booleans()):      # under a name of its own
                meta["parts"][order.index(part, 0)]["name"] += "-again"
            if draw(st.booleans()):           # the records follow the parts
                names = [p["name"] for p in meta["parts"]]
                bag, stages = _bag_record(meta), _stages(meta)
                if bag is not None:
                    bag["members"] = names
                    if isinstance(bag.get("weights"), dict):
                        bag["weights"] = {k: [1.0 / max(1, len(names))] * len(names) for k in bag["weights"]}
                if stages:
                    meta["info"]["pipeline"]["stages"] = [json.loads(json.dumps(stages[min(i, len(stages) - 1)]))
                                                          for i in order]
                if isinstance(meta["info"].get("factorial"), dict):
                    meta["info"]["factorial"]["chains"] = sum(x.startswith("chain") for x in names)
        elif edit == "record":
            key = draw(st.sampled_from(["order", "model_type"]))
            meta["info"][key] = draw(st.sampled_from([1, 2, 3, 0, "crf", "memm", None]))
        elif edit == "bag_weights":
            bag = _bag_record(meta)
            table = bag.get("weights") if isinstance(bag.get("weights"), dict) else {}
            how = draw(st.sampled_from(["empty", "partial", "value", "value", "all", "length", "extra",
                                        "not a table"]))
            if how == "empty":
                bag["weights"] = {}
            elif how == "partial" and table:
                for method in draw(st.lists(st.sampled_from(sorted(table)), min_size=1, unique=True)):
                    del table[method]
            elif how in ("value", "all") and table:
                method = draw(st.sampled_from(sorted(table)))
                w = table[method]
                if isinstance(w, list) and w:
                    if how == "value":
                        w[draw(st.integers(0, len(w) - 1))] = draw(st.sampled_from(BAG_WEIGHTS))
                    else:
                        table[method] = [draw(st.sampled_from(BAG_WEIGHTS))] * len(w)
            elif how == "length" and table:
                method = draw(st.sampled_from(sorted(table)))
                table[method] = [0.5] * draw(st.sampled_from([0, 1, 3, 100]))
            elif how == "extra":
                table[draw(st.sampled_from(["seq-poe ", "SEQ-POE", "vote", ""]))] = [0.5, 0.5]
            elif how == "not a table":
                bag["weights"] = draw(st.sampled_from([None, [], [0.5, 0.5], "seq-poe", 1]))
        elif edit == "bag_choice":
            bag = _bag_record(meta)
            key = draw(st.sampled_from(["combine", "decode"]))
            bag[key] = draw(st.sampled_from(list(METHODS) + list(DECODINGS) + ["", "auto", None, 1, "vote"]))
        elif edit == "bag_members":
            bag = _bag_record(meta)
            members = bag.get("members") if isinstance(bag.get("members"), list) else []
            bag["members"] = draw(st.sampled_from([[], members[:1], members + members[:1], members[::-1],
                                                   None, "members", [1, 2]]))
        elif edit == "drop_bag":
            del meta["info"]["bag"]
        elif edit == "add_bag":
            names = [p["name"] for p in meta["parts"]]
            meta["info"]["bag"] = {"members": names, "combine": "seq-poe", "decode": "viterbi",
                                   "weights": {m: [1.0 / len(names)] * len(names) for m in METHODS}}
        elif edit == "feed":
            stages = _stages(meta)
            if stages:
                stage = stages[draw(st.integers(0, len(stages) - 1))]
                stage["feed"] = draw(st.sampled_from(FEEDS))
        elif edit == "stages":
            stages = _stages(meta)
            how = draw(st.sampled_from(["fewer", "more", "none", "structure", "not a list"]))
            if how == "fewer":
                del stages[draw(st.integers(0, len(stages) - 1))]
            elif how == "more":
                stages.append(json.loads(json.dumps(stages[-1])))
            elif how == "none":
                stages.clear()
            elif how == "structure":
                stages[draw(st.integers(0, len(stages) - 1))]["structure"] = draw(st.sampled_from(
                    STRUCTURE_NAMES + ["", None]))
            else:
                meta["info"]["pipeline"]["stages"] = draw(st.sampled_from([None, {}, "stages", 2]))
        elif edit == "factorial_record":
            record = meta["info"]["factorial"]
            key = draw(st.sampled_from(["label_cols", "chains", "inference", "tolerance", "max_sweeps"]))
            record[key] = draw(st.sampled_from([[1, 2], [2, 1], [1, 1], [-1, 2], [1, 2, 3], [], 0, 1, 2, 3, -1,
                                                2**31, "exact", "trp", "bp", "nope", 1e-308, float("nan"),
                                                None]))
    return dumps_any(meta, arrays)


def _forge(which_data, edit):
    meta, arrays = container.loads(which_data)
    meta = json.loads(json.dumps(meta))
    arrays = dict(arrays)
    edit(meta, arrays)
    return dumps_any(meta, arrays)


#: The issue's reproducers (issue 31, items 3 and 4), each checked by every run.
FIXED_FORGERIES = {
    "pipeline stage label column -1": ("pipeline", lambda m, a: m["parts"][1]["space"].update(label_col=-1)),
    "pipeline stage label column -2": ("pipeline", lambda m, a: m["parts"][0]["space"].update(label_col=-2)),
    "pairs on a bag": ("bag", lambda m, a: m.update(structure="pairs")),
    "pairs on a pipeline": ("pipeline", lambda m, a: m.update(structure="pairs")),
    "bag weights emptied": ("bag", lambda m, a: m["info"]["bag"].update(weights={})),
    "bag weights NaN": ("bag", lambda m, a: m["info"]["bag"]["weights"].update({"seq-poe": [float("nan")] * 2})),
    "bag weights huge": ("bag", lambda m, a: m["info"]["bag"]["weights"].update({"seq-poe": [1e308, 1e308]})),
    "factorial chain label column -1": ("factorial", lambda m, a: m["parts"][1]["space"].update(label_col=-1)),
    "pipeline feed -1": ("pipeline", lambda m, a: m["info"]["pipeline"]["stages"][1].update(feed=-1)),
    "chain on a factorial file": ("factorial", lambda m, a: m.update(structure="chain")),
}


@pytest.mark.fuzz(weight=3)
@given(which=WHICH, fixed=st.just(None), data=st.data())
@example(which=None, fixed="pipeline stage label column -1", data=None)
@example(which=None, fixed="pipeline stage label column -2", data=None)
@example(which=None, fixed="pairs on a bag", data=None)
@example(which=None, fixed="pairs on a pipeline", data=None)
@example(which=None, fixed="bag weights emptied", data=None)
@example(which=None, fixed="bag weights NaN", data=None)
@example(which=None, fixed="bag weights huge", data=None)
@example(which=None, fixed="factorial chain label column -1", data=None)
@example(which=None, fixed="pipeline feed -1", data=None)
@example(which=None, fixed="chain on a factorial file", data=None)
@fz.counted
def test_consistent_forgery_fails_in_one_line_or_tags(models, sandbox, fuzz_dir, which, fixed, data):
    if fixed is not None:
        which, edit = FIXED_FORGERIES[fixed]
        forged_bytes = _forge(models[which].data, edit)
    else:
        forged_bytes = data.draw(consistent_forgery(models[which]), label="forged")
    refused_or_tagged(sandbox, fuzz_dir, forged_bytes, which)


def refused_or_tagged(sandbox, fuzz_dir, forged_bytes, which):
    """A forged model file is refused in one line naming it, or tags the input."""
    with fz.scratch(fuzz_dir) as d:
        path = fz.write(d / "m.model", forged_bytes)
        try:
            out = tag_any(sandbox, path, d)
        except CrftkError as e:
            # a forged header can be a consistent model of another column count: then the
            # input is at fault, and the error says so
            check_refused(e, path, d, forged_bytes, which)
            return
        check_tagged(out)


def run_cli(args, cwd, timeout=120):
    """crftk's command line in a real process: exit status, stderr (a signal is a negative status)."""
    proc = subprocess.run([sys.executable, "-m", "crftk.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env=dict(os.environ))
    return {"exit_code": proc.returncode, "stderr": proc.stderr, "stdout": proc.stdout, "traceback": None}


@pytest.mark.fuzz(weight=0.3)
@given(which=WHICH, command=st.sampled_from(["tag", "info", "dump"]), data=st.data())
@fz.counted
def test_forged_model_in_a_real_process_ends_in_one_line(models, fuzz_dir, which, command, data):
    """crftk as a user runs it, on a consistent forgery: exit 0, or 1 with one line; never a
    signal (a crash of a kernel) or a traceback."""
    forged_bytes = data.draw(consistent_forgery(models[which]), label="forged")
    with fz.scratch(fuzz_dir) as d:
        model = fz.write(d / "m.model", forged_bytes)
        text = fz.write(d / "in.txt", TAG_INPUT)
        out = d / "out"
        out.mkdir()
        args = {"tag": ["tag", "-p", 1, "-m", model, "-o", out / "t.txt", text], "info": ["info", model],
                "dump": ["dump", "-o", out / "dump.txt", model]}[command]
        result = run_cli(args, d)
        assert result["exit_code"] >= 0, f"killed by signal {-result['exit_code']}: {result['stderr'][-2000:]}"
        fz.check_cli(result, out, [])
        if result["exit_code"]:
            assert result["exit_code"] == 1, result["stderr"]


MODEL_COMMANDS = ["tag", "info", "info-json", "dump", "train-init", "compose"]


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
                               text],
                # the model as a pipeline's upstream stage, feeding the chunk stage's tag column
                "compose": ["compose", "-m", model, "-m", models["chunk_stage"].path, "--feed", 1,
                            "-o", out / "p.model"]}[command]
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
