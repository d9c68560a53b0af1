"""Helpers shared by the benchmark scripts: running crftk, finding the shared corpora."""

import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(REPO, "..", "shared", "data")


def load_build(name, path):
    """The extension module ``name`` (e.g. crftk._product) from the built file ``path``, loaded
    beside any other build of it: for timing builds of one kernel in one process."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def crftk_run(args, log, mode="a"):
    """Run `python -m crftk.cli ARGS` from the repository, its stderr written to ``log`` (appended,
    or ``mode`` "w"); exits with the command and the log's name when it fails; returns (wall
    seconds, CPU seconds of the process)."""
    wall, usage = crftk_usage(args, log, mode)
    return wall, usage.ru_utime + usage.ru_stime


def crftk_usage(args, log, mode="a", env=None):
    """crftk_run's process: (wall seconds, its resource usage from wait4: ru_maxrss is its peak
    resident memory in KiB); ``env``: its environment (default this one's)."""
    args = [str(a) for a in args]
    print("+ crftk " + " ".join(args), flush=True)
    t0 = time.perf_counter()
    with open(log, mode) as err:
        proc = subprocess.Popen([sys.executable, "-m", "crftk.cli", *args], stderr=err, stdout=subprocess.DEVNULL,
                                cwd=REPO, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"crftk {' '.join(args)} failed (exit {code}); see {log}")
    return wall, usage


def crftk_timed(args, log):
    """crftk_run's wall seconds."""
    return crftk_run(args, log)[0]


def data_arguments(ap):
    """The corpus options of a script that reads CoNLL-2000 and CoNLL-2003 (resolved by data_folders)."""
    ap.add_argument("--data-dir", default=os.environ.get("DATA", DATA),
                    help="folder of conll2000/ and conll2003/ (default ../shared/data)")
    ap.add_argument("--conll2000", help="CoNLL-2000 folder (default DATA_DIR/conll2000)")
    ap.add_argument("--conll2003", help="CoNLL-2003 folder (default DATA_DIR/conll2003)")


def data_folders(a):
    """Fill in the parsed arguments' --conll2000 and --conll2003 from --data-dir where not given."""
    a.conll2000 = a.conll2000 or os.path.join(a.data_dir, "conll2000")
    a.conll2003 = a.conll2003 or os.path.join(a.data_dir, "conll2003")
    return a


def eval_json(tagged, other=None):
    """`crftk eval --json` of a tagged file, with McNemar's test (tokens) against ``other``."""
    args = ["eval", "--json", tagged] + (["--mcnemar", other] if other is not None else [])
    p = subprocess.run([sys.executable, "-m", "crftk.cli", *map(str, args)], stdout=subprocess.PIPE, text=True,
                       cwd=REPO, check=True)
    return json.loads(p.stdout)
