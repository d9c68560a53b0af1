"""Ctrl-C during the commands that train several models: they stop at once and keep what train
keeps (issue 31: bag's members trained on for 10-12 s and nothing was saved; --cross-predict
dropped the folds' predictions when the final model was interrupted)."""

import json
import signal
import subprocess
import sys
import time

import pytest

from corpora import REPO

TEMPLATES = REPO / "templates"
DEMO_TRAIN = REPO / "data" / "demo.train"


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupt_after(args, marker, cwd, count=1):
    """Runs crftk with args, sends SIGINT once `marker` has shown `count` times on stderr; returns
    (exit status, seconds from the signal to the exit, stderr after the signal)."""
    proc = subprocess.Popen([sys.executable, "-m", "crftk.cli", *map(str, args)], cwd=cwd, text=True,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, preexec_fn=_default_sigint)
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if sum(marker in s for s in seen) >= count:
            break
    else:
        proc.wait()
        raise AssertionError("never saw " + marker + ":\n" + "".join(seen))
    start = time.monotonic()
    proc.send_signal(signal.SIGINT)
    try:
        rest = proc.stderr.read()
        status = proc.wait(timeout=60)
    finally:
        proc.kill()
    return status, time.monotonic() - start, rest


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """Enough data that training never ends by itself (--epsilon 0): only the signal stops it."""
    path = tmp_path_factory.mktemp("interrupts") / "big.train"
    path.write_text(DEMO_TRAIN.read_text() * 4)
    return path


def bag_args(big, mode):
    return ["bag", "-t", TEMPLATES / "chunking-crfpp.tmpl", "-t", TEMPLATES / "chunking-pos0.tmpl",
            "-m", "b.model", "--parallel", mode, "--epsilon", 0, "--max-iter", 100000, "-p", 2, big]


def info(path):
    run = subprocess.run([sys.executable, "-m", "crftk.cli", "info", "--json", str(path)], capture_output=True,
                         text=True, cwd=REPO)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


def tags(model, cwd):
    run = subprocess.run([sys.executable, "-m", "crftk.cli", "tag", "-m", str(model), str(REPO / "data" / "demo.test")],
                         capture_output=True, text=True, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_bag_in_parallel_stops_every_member_and_saves_the_bag(big, tmp_path):
    # both members are training in threads of their own; Ctrl-C reaches only the main thread
    status, seconds, rest = interrupt_after(bag_args(big, "bags"), "iter    2", tmp_path, count=2)
    assert status == 130, rest
    assert seconds < 10, f"{seconds:.1f} s from Ctrl-C to the exit"
    assert rest.count("interrupted after iteration") == 2, rest
    assert "saved b.model" in rest and rest.rstrip().endswith("crftk: interrupted")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.model"]
    assert info(tmp_path / "b.model")["training"]["bag"]["interrupted"] is True
    assert tags(tmp_path / "b.model", tmp_path).count("\n") > 100


def test_bag_one_member_after_another_saves_the_members_it_has(big, tmp_path):
    status, seconds, rest = interrupt_after(bag_args(big, "threads"), "iter    2", tmp_path)
    assert status == 130, rest
    assert seconds < 10
    member = tmp_path / "b.model.chunking-crfpp.model"
    assert "no bag saved" in rest and str(member.name) in rest
    assert sorted(p.name for p in tmp_path.iterdir()) == [member.name]     # no bag: a member has no weights
    assert info(member)["training"]["interrupted"] is True
    assert tags(member, tmp_path).count("\n") > 100


def test_cross_predict_keeps_the_folds_predictions_when_the_final_model_is_interrupted(tmp_path):
    out = tmp_path / "cross.txt"
    # the folds log no iterations: the first iteration line is the final model's
    status, _, rest = interrupt_after(["train", "-t", TEMPLATES / "chunking-crfpp.tmpl", "-m", "m.model",
                                       "--max-iter", 100, "--cross-predict", 2, "--cross-output", out,
                                       "--epsilon", 0, "-p", 2, DEMO_TRAIN], "iter    1", tmp_path)
    assert status == 130, rest
    assert "interrupted after iteration" in rest
    assert f"wrote the out-of-fold predictions of 2 folds to {out}" in rest
    lines = [line for line in out.read_text().splitlines() if line]
    assert len(lines) == len([line for line in DEMO_TRAIN.read_text().splitlines() if line])
