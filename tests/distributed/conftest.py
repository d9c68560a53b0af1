"""A real Dask cluster for the tests: a LocalCluster of 2 worker processes (shared by the
tests), and a scheduler with one worker in processes of their own, for a test to kill."""

import json
import os
import subprocess
import sys
import time

import pytest

from corpora import REPO

pytest.importorskip("distributed")


@pytest.fixture(scope="session")
def cluster():
    from crftk.distributed import Cluster
    with Cluster(workers=2, threads=1) as c:
        yield c


@pytest.fixture
def external(tmp_path):
    """(address, scheduler process) of a scheduler started for one test, with one worker."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    info = tmp_path / "scheduler.json"
    quiet = dict(stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=REPO)
    scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                  "--port", "0", "--no-dashboard", "--scheduler-file", str(info)], **quiet)
    worker = None
    try:
        deadline = time.monotonic() + 60
        while not info.exists() or not info.read_text().strip():
            assert time.monotonic() < deadline and scheduler.poll() is None, "the scheduler did not start"
            time.sleep(0.1)
        time.sleep(0.2)
        address = json.loads(info.read_text())["address"]
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nworkers", "1",
                                   "--nthreads", "1", "--no-dashboard"], **quiet)
        yield address, scheduler
    finally:
        for p in (worker, scheduler):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
