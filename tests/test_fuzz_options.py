"""Fuzz: option values, from the command line and from Python callers.

Whatever the value (nan, inf, huge, negative, not a number), a command exits
0, 1 or 2 with at most one error line, never a traceback, and leaves nothing in
its output directory when it fails; `fit` raises CrftkError or trains finite
weights. A small sample runs the real command in a subprocess.
"""

import os
import subprocess
import sys

from hypothesis import example, given
from hypothesis import strategies as st

import fuzz_sandbox
import fuzz_strategies as fz
import pytest
from crftk.errors import CrftkError
from crftk.commands.train import TRAIN_PARAMS

#: Long runs a user may ask for are not failures: a time-out with these options is accepted.
LONG_RUN_OPTIONS = {"max_iter", "period", "rounds", "round_iter", "final_iter", "newton_iter"}

NUMERIC = [p.name for p in TRAIN_PARAMS if p.type in (int, float)]
CHOICES = {p.name: p.choices for p in TRAIN_PARAMS if p.choices}

COMMAND_OPTIONS = {
    "train": ["--" + n.replace("_", "-") for n in NUMERIC if n != "threads"]
             + ["--checkpoint-every", "--max-sentence-tokens", "-p"],
    "tag": ["-n", "--batch-tokens", "--max-sentence-tokens", "-p"],
    "eval": ["--gold-col", "--pred-col", "--nbest-rank"],
    "lexicon": ["--folds", "--label-col", "--min-count"],
    "dump": ["--min-abs"],
}
choice_values = st.one_of(st.sampled_from(sorted({str(v) for c in CHOICES.values() for v in c})),
                          st.sampled_from(["", "LBFGS", "none", "2", "nan"]))


@st.composite
def command_lines(draw):
    """(command, [(option, value), ...]): one to three options of one command, odd values."""
    command = draw(st.sampled_from(sorted(COMMAND_OPTIONS)))
    names = COMMAND_OPTIONS[command]
    chosen = []
    for _ in range(draw(st.integers(1, 3))):
        if command == "train" and draw(st.integers(0, 3)) == 0:
            name = draw(st.sampled_from(sorted(CHOICES)))
            chosen.append(("--" + name.replace("_", "-"), draw(choice_values)))
        else:
            chosen.append((draw(st.sampled_from(names)), draw(fz.option_strings)))
    return command, chosen


def _argv(command, chosen, d, models):
    train = fz.write(d / "train.txt", fz.conll_text(fz.TRAIN))
    out = d / "out"
    opts = [x for pair in chosen for x in pair]
    if command == "train":
        return ["train", "-q", "-t", models["crf"].path.parent / "plain.tmpl", "-m", out / "m.model",
                "--max-iter", 3, "-p", 1, *opts, train]
    if command == "tag":
        return ["tag", "-m", models["crf"].path, "-o", out / "t.txt", "-p", 1, *opts, train]
    if command == "eval":
        tagged = fz.write(d / "tagged.txt", fz.conll_text([[r + (r[2],) for r in s] for s in fz.TRAIN]))
        return ["eval", *opts, tagged]
    if command == "lexicon":
        return ["lexicon", "-o", out / "lex", *opts, train]
    return ["dump", "-o", out / "dump.txt", *opts, models["crf"].path]


def _timed_out_on_a_long_run(failure, chosen):
    return (isinstance(failure, fuzz_sandbox.WorkerFailure) and type(failure).__name__ == "WorkerHung"
            and any(o.lstrip("-").replace("-", "_") in LONG_RUN_OPTIONS for o, _ in chosen))


@pytest.mark.fuzz(weight=2)
@given(case=command_lines())
@example(case=("train", [("--c2", "nan")]))
@fz.counted
def test_command_options_end_in_one_line(models, sandbox, fuzz_dir, case):
    command, chosen = case
    with fz.scratch(fuzz_dir) as d:
        (d / "out").mkdir()
        args = _argv(command, chosen, d, models)
        try:
            result = sandbox.call("cli", args, time_limit=60)
        except AssertionError as e:
            if _timed_out_on_a_long_run(e, chosen):
                return
            raise
        fz.check_cli(result, d / "out", [])


@pytest.mark.fuzz(weight=0.2)
@given(case=command_lines())
@example(case=("train", [("--c2", "nan")]))
@fz.counted
def test_command_options_in_a_real_process(models, fuzz_dir, case):
    """The installed entry point as a user runs it: exit status and stderr of a real process."""
    command, chosen = case
    with fz.scratch(fuzz_dir) as d:
        (d / "out").mkdir()
        args = [str(a) for a in _argv(command, chosen, d, models)]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fuzz_sandbox.REPO), os.environ.get("PYTHONPATH", "")]))
        try:
            proc = subprocess.run([sys.executable, "-m", "crftk", *args], capture_output=True, text=True,
                                  timeout=120, env=env, cwd=d)
        except subprocess.TimeoutExpired:
            assert any(o.lstrip("-").replace("-", "_") in LONG_RUN_OPTIONS for o, _ in chosen), args
            return
        fz.check_cli({"exit_code": proc.returncode, "stderr": proc.stderr, "traceback": None}, d / "out", [])


library_options = st.dictionaries(st.sampled_from(NUMERIC + sorted(CHOICES)),
                                  st.one_of(fz.library_values, choice_values), min_size=1, max_size=3)


@pytest.mark.fuzz(weight=2)
@given(options=library_options)
@example(options={"c2": "abc"})
@fz.counted
def test_fit_options_raise_crftk_error_or_train(sandbox, options):
    rows = [list(s) for s in fz.TRAIN]
    options = {"max_iter": 3, "threads": 1, **options}
    try:
        size, finite = sandbox.call("fit", rows, fz.PLAIN_TEMPLATE, time_limit=60, **options)
    except CrftkError as e:
        assert e.message and "\n" not in str(e)
        return
    except AssertionError as e:
        if _timed_out_on_a_long_run(e, [(k, None) for k in options]):
            return
        raise
    assert finite, options
