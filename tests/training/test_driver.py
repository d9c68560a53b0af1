"""The training driver (crftk.training): every kind trains through one loop, so a factorial CRF
takes every batch optimizer, --init, --trace, checkpoints and the interrupt save as a chain does."""

import numpy as np
import pytest

from corpora import sentences
from crftk.errors import CrftkError
from crftk.features.templates import parse_template
from crftk.model import Model
from crftk.training import fit

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[1,0]\nB\nP00:%x[0,0]\n"


def corpus(n=40, seed=0):
    """word POS NP rows: the POS follows the word, the NP label the POS."""
    rng = np.random.default_rng(seed)
    pos_of = ["DT", "NN", "VB", "JJ", "NN", "IN"]
    rows_list = []
    for _ in range(n):
        rows, prev = [], "O"
        for _ in range(int(rng.integers(2, 7))):
            w = int(rng.integers(12))
            p = pos_of[w % 6] if rng.random() > 0.1 else "NN"
            np_ = "O" if p in ("VB", "IN") else ("I-NP" if prev != "O" else "B-NP")
            prev = np_
            rows.append([f"w{w}", p, np_])
        rows_list.append(rows)
    return sentences(rows_list)


def quiet(msg):
    pass


def fit_fcrf(**options):
    lines = []
    model = fit(corpus(), parse_template(TEMPLATE), log=lines.append, label_col=[1, 2], threads=1,
                **{"max_iter": 6, **options})
    return model, lines


@pytest.mark.parametrize("options", [{}, {"c1": 0.05}, {"algorithm": "cg"}, {"algorithm": "pcg"},
                                     {"algorithm": "mixed-cg", "mixed_after": 2}, {"algorithm": "quickprop"},
                                     {"algorithm": "gis"}],
                         ids=["lbfgs", "owlqn", "cg", "pcg", "mixed-cg", "quickprop", "gis"])
def test_a_factorial_crf_trains_with_every_batch_optimizer(options):
    model, lines = fit_fcrf(**options)
    history = model.info["history"]
    assert model.structure_name == "factorial" and model.info["options"]["algorithm"] == options.get(
        "algorithm", "lbfgs")
    assert len(history) >= 2 and history[-1]["objective"] < history[0]["objective"]
    assert all(np.isfinite(p.weights).all() for p in model.parts)
    assert any(line.startswith("iter") and "converged" in line for line in lines)
    if "c1" in options:       # OWL-QN zeroes weights
        assert sum(int((p.weights == 0).sum()) for p in model.parts) > 0


def test_the_l_bfgs_memory_is_the_kinds_own_unless_given():
    # a factorial CRF keeps 50 pairs, a chain 6; a given --history is kept; the model records it
    assert fit_fcrf(max_iter=2)[0].info["options"]["history"] == 50
    assert fit_fcrf(max_iter=2, history=6)[0].info["options"]["history"] == 6
    chain = fit(corpus(), parse_template(TEMPLATE.replace("P00:%x[0,0]\n", "")), log=quiet, label_col=2,
                threads=1, max_iter=2)
    assert chain.info["options"]["history"] == 6


def test_a_factorial_crf_continues_from_init_and_saves_checkpoints(tmp_path):
    first, _ = fit_fcrf(max_iter=5)
    path = tmp_path / "f.model"
    more, lines = fit_fcrf(init=first, max_iter=4, checkpoint=(str(path), 2))
    # training goes on where the first model stopped: its first iterate is at most that objective
    assert more.info["history"][0]["objective"] <= first.info["objective"] + 1e-9
    saved = Model.load(path)
    assert saved.kind == "factorial" and saved.info["checkpoint"] and saved.info["iterations"] == 4
    assert any(line.startswith("checkpoint: iteration 2") for line in lines)
    with pytest.raises(CrftkError, match="label columns"):
        fit(corpus(), None, init=first, log=quiet, label_col=[2, 1], max_iter=2)
    with pytest.raises(CrftkError, match="a factorial CRF"):
        fit(corpus(), None, init=first, log=quiet, max_iter=2)      # one chain from a factorial file


def test_a_factorial_crf_writes_a_trace_and_keeps_the_last_iteration_on_interrupt():
    import io
    trace = io.StringIO()
    calls = []

    def log(msg):
        calls.append(msg)
        if msg.startswith("iter    3"):
            raise KeyboardInterrupt
    model = fit(corpus(), parse_template(TEMPLATE), log=log, trace=trace, keep_on_interrupt=True,
                label_col=[1, 2], max_iter=20, threads=1)
    assert model.info["interrupted"] and model.info["iterations"] == 3     # recorded before its log line
    rows = trace.getvalue().splitlines()
    assert rows[0].split("\t")[0] == "evaluation" and len(rows) >= 4


def test_the_chain_and_the_factorial_crf_log_the_same_way_to_the_end():
    """One loop: the keep-best line and the stop line come from it for both kinds."""
    dev = corpus(10, seed=1)
    chain = []
    fit(corpus(), parse_template(TEMPLATE.replace("P00:%x[0,0]\n", "")), dev=dev, log=chain.append,
        max_iter=3, threads=1)
    fcrf = []
    fit(corpus(), parse_template(TEMPLATE), dev=dev, log=fcrf.append, label_col=[1, 2], max_iter=3, threads=1)
    for lines in (chain, fcrf):
        assert lines[-2].startswith("stopped before convergence") and lines[-1].startswith("keeping the weights")
