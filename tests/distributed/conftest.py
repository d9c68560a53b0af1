"""A real Dask cluster for the tests: a LocalCluster of 2 worker processes (shared by the
tests), and a scheduler with one worker in processes of their own, for a test to kill."""

import os
import subprocess
import sys

import pytest

from corpora import REPO

# The modules that need a cluster skip themselves without Dask (test_pieces.py needs none); a skip
# here, in the conftest, would be a collection error.


@pytest.fixture(scope="session")
def cluster():
    from crftk.distributed import Cluster
    with Cluster(workers=2, threads=1) as c:
        yield c


@pytest.fixture
def worker_killer(cluster):
    """``worker_killer(trigger, pick)`` -> (log, lines, killed): a training log that records every
    line and, at the first line ``trigger`` accepts, SIGKILLs the shared cluster's worker whose pid
    ``pick`` (min or max) chooses; ``killed`` then holds that pid."""
    import signal
    client = cluster.client
    client.wait_for_workers(2, timeout=60)
    pids = client.run(os.getpid)

    def make(trigger, pick):
        lines, killed = [], []

        def log(message):
            lines.append(message)
            if trigger(message) and not killed:
                killed.append(pick(pids.values()))
                os.kill(killed[0], signal.SIGKILL)
        return log, lines, killed
    return make


# A scheduler and its worker in one process of their own (threads), so that killing it loses both.
_SERVE = """
import sys, time
from distributed import LocalCluster
cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://", host="127.0.0.1",
                       scheduler_port=0, dashboard_address=None)
print(cluster.scheduler_address, flush=True)
time.sleep(3600)
"""


@pytest.fixture
def external():
    """(address, process) of a scheduler with one worker, started for one test (which may kill it)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    process = subprocess.Popen([sys.executable, "-c", _SERVE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                               env=env, cwd=REPO, text=True)
    try:
        address = process.stdout.readline().strip()
        assert address.startswith("tcp://"), "the scheduler did not start"
        yield address, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
