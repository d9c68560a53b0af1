"""Helpers shared by the benchmark scripts: running crftk, finding the shared corpora."""

import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "..", "shared", "data")


def note(tag, msg):
    print(f"[{tag} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def crftk(*args, log=None):
    """Run `python -m crftk ARGS` from the repository; its stderr goes to log (a path) or
    nowhere; returns its stdout."""
    cmd = [sys.executable, "-m", "crftk", *args]
    with open(log, "w") if log else open(os.devnull, "w") as err:
        out = subprocess.run(cmd, check=True, text=True, stdout=subprocess.PIPE, stderr=err, cwd=REPO)
    return out.stdout


def corpus_files(variable, names, data=None, script="benchmark"):
    """Paths of the named files in --data, $VARIABLE or ../shared/data/<variable>; exits
    with a message when one is missing."""
    folder = data or os.environ.get(variable) or os.path.join(DATA, variable.lower())
    paths = [os.path.join(folder, name) for name in names]
    for path in paths:
        if not os.path.exists(path):
            sys.exit(f"{script}: {path} not found (set --data or ${variable})")
    return paths


def publish(text, path):
    """Print a result table and keep it in a file."""
    print(text)
    with open(path, "w") as fh:
        fh.write(text + "\n")
