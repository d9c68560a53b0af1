"""crftk.params: one declaration of each option, whose bounds hold for Python callers too."""

import math

import numpy as np
import pytest

from crftk import params
from crftk.errors import CrftkError
from crftk.features.space import FEATURE_SETS
from crftk.commands.induce import check_options as check_induce
from crftk.commands.train import check_options as check_train
from crftk.commands.train import fit, train

TEMPLATE = "U00:%x[0,0]\nU01:%x[-1,0]\nB\n"
DATA = "a DT B-NP\nb NN I-NP\nc VBZ B-VP\n\nd DT B-NP\ne NN I-NP\n\n"


def quiet(msg):
    pass


@pytest.fixture
def files(tmp_path):
    (tmp_path / "t.tmpl").write_text(TEMPLATE)
    (tmp_path / "d.txt").write_text(DATA)
    return tmp_path


def test_the_declarations_are_ordered_named_and_documented():
    names = [p.name for p in params.TRAIN]
    assert names[0] == "algorithm" and names[-1] == "threads" and len(set(names)) == len(names)
    assert {"c1", "c2", "max_iter", "epsilon", "period", "history", "min_freq", "label_col"} <= set(names)
    assert all(p.help and p.option == "--" + p.name.replace("_", "-") for p in (*params.TRAIN, *params.INDUCE))
    assert params.find("feature_set").choices == FEATURE_SETS      # declared in params, used by features
    with pytest.raises(KeyError):
        params.find("no_such_option")


def test_defaults_are_the_declared_ones_and_pass_their_own_checks():
    for declarations in (params.TRAIN, params.INDUCE):
        d = params.defaults(declarations)
        assert list(d) == [p.name for p in declarations]
        assert params.check_params(declarations, {}, "test") == d
    assert params.defaults()["c2"] == 1.0 and params.defaults(params.INDUCE)["rounds"] == 20
    for p in (params.CHECKPOINT_EVERY, params.MAX_SENTENCE_TOKENS):
        assert p.check(p.default) == p.default


@pytest.mark.parametrize("name, value, message", [
    ("c2", math.inf, r"--c2 must be a number from 0 to 1,000,000 \(got inf\)"),
    ("c1", math.nan, r"--c1 must be a number from 0 to 1,000,000 \(got nan\)"),
    ("epsilon", math.nan, r"--epsilon must be a number from 0 to 1 \(got nan\)"),
    ("epsilon", math.inf, r"--epsilon must be"),
    ("c2", -1, r"--c2 must be .* \(got -1\)"),
    ("c2", "1.0", r"--c2 must be .* \(got '1.0'\)"),        # a string is not a number in Python
    ("c2", True, r"--c2 must be"),                            # nor is a bool
    ("max_iter", 2.5, r"--max-iter must be an integer from 1 to 1,000,000 \(got 2.5\)"),
    ("max_iter", 10**20, r"--max-iter must be an integer .* \(got 100000000000000000000\)"),
    ("history", 0, r"--history must be an integer from 1 to 100"),
    ("first_step", 0.0, r"--first-step must be a number > 0 and <= 1,000"),
    ("label_col", 10**6, r"--label-col must be an integer from -10,000 to 9,999"),
    ("algorithm", "adam", r"--algorithm must be one of lbfgs, cg, .* \(got 'adam'\)"),
    ("threads", -1, r"--threads must be an integer >= 0 \(got -1\)"),
])
def test_check_refuses_what_the_cli_refuses(name, value, message):
    with pytest.raises(CrftkError, match=message):
        params.check(name, value)


def test_check_accepts_numpy_numbers_and_the_bounds_themselves():
    assert params.check("c2", np.float32(0.5)) == 0.5 and type(params.check("c2", np.float32(0.5))) is float
    assert params.check("max_iter", np.int64(7)) == 7 and type(params.check("max_iter", np.int64(7))) is int
    assert params.check("c2", 0) == 0.0 and params.check("c2", 1e6) == 1e6
    assert params.check("label_col", -10_000) == -10_000


def test_thread_counts_above_the_cap_are_cut_with_a_warning():
    said = []
    assert params.check("threads", 10**9, warn=said.append) == params.thread_cap()
    assert len(said) == 1 and said[0].startswith("crftk: warning: --threads 1,000,000,000 is more than")
    assert params.check("threads", 1, warn=said.append) == 1 and len(said) == 1
    assert params.resolve_threads(10**9) == params.thread_cap()


def test_library_train_and_fit_check_the_same_bounds(files):
    for bad in ({"c2": math.inf}, {"epsilon": math.nan}, {"max_iter": 0}, {"algorithm": "sgd", "c2": 0}):
        with pytest.raises(CrftkError):
            train([files / "d.txt"], files / "t.tmpl", files / "m.model", log=quiet, **bad)
        with pytest.raises(CrftkError):
            check_train(bad, quiet)
    with pytest.raises(CrftkError, match="--c2 must be"):
        fit([], None, log=quiet, c2=math.nan)
    with pytest.raises(TypeError, match="unknown training options"):
        check_train({"c3": 1}, quiet)
    assert not (files / "m.model").exists()


@pytest.mark.parametrize("option, value, message", [
    ("checkpoint_every", -1, "--checkpoint-every must be an integer from 0 to 1,000,000"),
    ("checkpoint_every", 10**20, "--checkpoint-every must be an integer"),
    ("checkpoint_every", 1.5, "--checkpoint-every must be an integer"),
    ("max_sentence_tokens", 0, "--max-sentence-tokens must be an integer from 1 to 1,000,000,000"),
])
def test_train_checks_its_file_options(files, option, value, message):
    with pytest.raises(CrftkError, match=message):
        train([files / "d.txt"], files / "t.tmpl", files / "m.model", log=quiet, **{option: value})
    assert not (files / "m.model").exists()


def test_induce_options_are_checked_against_their_declarations():
    with pytest.raises(CrftkError, match="--gain-folds must be 0 or an integer from 2 to 100"):
        check_induce({"gain_folds": 1}, quiet)
    with pytest.raises(CrftkError, match="--error-below must be a number from 0 to 1"):
        check_induce({"error_below": math.nan}, quiet)
    with pytest.raises(CrftkError, match="--gain-threshold must be a finite number"):
        check_induce({"gain_threshold": -math.inf}, quiet)
    assert check_induce({"gain_folds": 0}, quiet)["gain_folds"] == 0
