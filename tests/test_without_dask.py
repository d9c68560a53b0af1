"""Without the dask extra: the Dask tests skip (tests/distributed must not pass for the Dask
package it shadows; test_pieces needs no Dask and runs) and the commands say in one line what to install."""

import os
import subprocess
import sys
import textwrap

from corpora import REPO

# A plugin that hides the installed dask and distributed packages, as if the extra were not installed.
HIDE_DASK = textwrap.dedent("""
    import sys
    from importlib.machinery import PathFinder

    class HideDask:
        @staticmethod
        def find_spec(name, path=None, target=None):
            top = name.partition(".")[0]
            if top not in ("dask", "distributed"):
                return None
            if path is None:
                path = [p for p in sys.path if "-packages" not in p]
            spec = PathFinder.find_spec(name, path, target)
            if spec is None:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return spec

    sys.meta_path.insert(0, HideDask)
""")


def test_distributed_tests_skip_without_dask(tmp_path):
    (tmp_path / "hide_dask.py").write_text(HIDE_DASK)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "hide_dask", "-q", "-p", "no:cacheprovider",
                          "tests/distributed"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    tail = run.stdout.strip().splitlines()[-1]
    assert run.returncode == 0, run.stdout[-3000:]
    assert "skipped" in tail and "error" not in tail and "failed" not in tail, tail   # the cluster tests


def test_cluster_options_without_dask_say_what_to_install(tmp_path):
    (tmp_path / "hide_dask.py").write_text(HIDE_DASK)
    (tmp_path / "distributed").mkdir()      # a folder of that name in the working directory
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), str(REPO)]))
    run = subprocess.run([sys.executable, "-c", "import hide_dask, sys; from crftk.cli import main; "
                          "sys.argv[0] = 'crftk'; main()", "tag", "-m", "nothing.model", "--workers", "2",
                          str(REPO / "data" / "demo.test")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "pip install crftk[dask]" in lines[0], run.stderr
