"""Real values too large for float64 arithmetic: training fails in one line, never with a model of
NaN weights (sgd and the perceptron went NaN at 1e160..1e308; L-BFGS raised a bare ValueError)."""

import numpy as np
import pytest
from click.testing import CliRunner

from crftk import CRF, CrftkError
from crftk.cli import main


def data(v):
    return [[{"w": "a", "v": v}, {"w": "b", "v": -v}], [{"w": "b", "v": v / 2}]] * 5, [["A", "B"], ["B"]] * 5


@pytest.mark.parametrize("algorithm, v", [("sgd", 1e200), ("perceptron", 1e308), ("lbfgs", 1e308), ("cg", 1e308)])
def test_overflowing_values_fail_in_one_line(algorithm, v):
    X, y = data(v)
    with pytest.raises(CrftkError, match="training failed: .* finite .*no model written"):
        CRF(algorithm=algorithm, max_iter=20, threads=1).fit(X, y)


@pytest.mark.parametrize("algorithm", ["lbfgs", "sgd", "perceptron", "pa", "arow"])
def test_large_but_sane_values_still_train(algorithm):
    X, y = data(1e6)
    crf = CRF(algorithm=algorithm, max_iter=20, threads=1).fit(X, y)
    assert np.isfinite(crf.model_.weights).all()


def test_the_cli_writes_no_model(tmp_path):
    train, model = tmp_path / "huge.crfsuite", tmp_path / "m.crftk"
    train.write_text("A\tx:1e308\ty\nB\tx:-1e308\n\n")
    r = CliRunner().invoke(main, ["train", "--format", "crfsuite", str(train), "-m", str(model), "-q"])
    assert r.exit_code == 1 and "training failed" in r.output and "Traceback" not in r.output
    assert not model.exists()
