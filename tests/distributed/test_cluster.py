"""Scheduler addresses that Dask cannot use: one line, exit status 2, at once."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")

from corpora import REPO

DEMO_TEST = str(REPO / "data" / "demo.test")


@pytest.mark.parametrize("address, says", [
    ("garbage!!", "has no valid port"),
    ("127.0.0.1", "has no valid port"),
    ("tcp://localhost", "has no valid port"),
    ("udp://127.0.0.1:8786", "Dask knows no scheme 'udp'"),
    ("tcp://127.0.0.1:99999", "a port from 1 to 65535"),
])
def test_a_malformed_scheduler_address_is_one_line_and_no_wait(address, says, tmp_path):
    # Before the check, Dask's half-made client blocked the exit for 40 s and printed a traceback of
    # Client.__del__: the timeout makes that a failure rather than a hang.
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for command in (["tag", "-m", str(REPO / "tests" / "data" / "model-v1.crftk")],
                    ["train", "-t", str(REPO / "templates" / "chunking-crfpp.tmpl"), "-m", str(tmp_path / "m")]):
        run = subprocess.run([sys.executable, "-m", "crftk.cli", *command, "--scheduler", address, DEMO_TEST],
                             capture_output=True, text=True, timeout=30, env=env, cwd=tmp_path)
        assert run.returncode == 2, run.stderr
        assert run.stderr.count("\n") == 1, run.stderr
        assert run.stderr.startswith(f"crftk: error: --scheduler '{address}'") and says in run.stderr
        assert os.listdir(tmp_path) == []


def test_tag_checks_the_cluster_options_before_the_model_as_train_does(tmp_path):
    # tag checked the address only once the model was loaded (its errors came first): train checks
    # the cluster options before reading anything
    from click.testing import CliRunner
    from crftk.cli import main
    missing = str(tmp_path / "missing")
    for cluster, status, says in ((["--scheduler", "garbage!!"], 2, "--scheduler 'garbage!!' has no valid port"),
                                  (["--scheduler", "tcp://127.0.0.1:1", "--workers", "2"], 1,
                                   "give either --scheduler ADDRESS or --workers N, not both")):
        for command in (["tag", "-m", missing], ["train", "-t", missing, "-m", str(tmp_path / "m")]):
            result = CliRunner().invoke(main, [*command, *cluster, missing])
            assert (result.exit_code, result.output.count("\n")) == (status, 1), (command, result.output)
            assert result.output.startswith(f"crftk: error: {says}"), (command, result.output)
    assert os.listdir(tmp_path) == []


def test_a_local_cluster_says_nothing_when_the_dask_http_port_is_taken(tmp_path):
    # another cluster on the machine holds 8787: Dask's 4-line warning about moving to another port
    # reached stderr
    import socket
    holder = socket.socket()
    try:
        holder.bind(("", 8787))
        holder.listen()
    except OSError:
        pass            # already in use: as wanted
    try:
        env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        run = subprocess.run([sys.executable, "-m", "crftk.cli", "tag", "-m", str(REPO / "tests" / "data" /
                              "model-v1.crftk"), "--workers", "1", "-o", str(tmp_path / "out"), DEMO_TEST],
                             capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    finally:
        holder.close()
    assert (run.returncode, run.stderr) == (0, "")
    assert os.listdir(tmp_path) == ["out"]
