"""Behaviour hashes: a fixed list of crftk runs on small fixed corpora, each reduced to SHA-256 hashes.

For a refactoring that must change no behaviour (issue 32): trained weights, tagged outputs,
logs and `crftk info --json` identical before and after, old model files still load.

    python benchmarks/behaviour.py [--out FILE.json] [--work DIR] [--only SUBSTRING ...]
    python benchmarks/behaviour.py --compare REV [--out FILE.json]     (make behaviour BASE=REV)

Every case runs the CLI (`python -m crftk.cli`, one thread, a few iterations) in a fresh work
directory holding the same inputs (slices of data/demo.train and data/demo.test, templates copied
from this checkout), with relative paths, so that logs name the same files on both sides. Per case
and step the JSON records the hash of:

* `log`: stderr with what varies from run to run normalised away (seconds, rates, timestamps,
  absolute paths: see normalise_log);
* `out`: stdout (the tagged output, `info --json`, ...);
* `trace`: a --trace file without its seconds column;
* for each model file written: `arrays` (every array of the container: weights, label and
  attribute tables, read with crftk.io.container.read_container), `meta` (the container's
  metadata without the training record), `labels` (Model.load, each part's labels) and `info`
  (`crftk info --json` without timing fields).

--compare REV builds REV in a temporary git worktree (build_ext --inplace), runs every case with
REV's code and with this checkout's, alternating, prints the steps whose hashes differ and exits
1 if any does. It then loads the model files REV wrote with this checkout's code (`info --json`,
plain `tag`) and checks the output against this checkout's own models.
"""

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN_SENTENCES = 300
TEST_SENTENCES = 60
ITER = "8"

# --- normalisation ------------------------------------------------------------------------------

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([+-]\d{2}:?\d{2}|Z)?")
_RATE = re.compile(r"\d[\d,]*(\.\d+)?\s*(k|M)?\s*(tokens|sentences|sent|tok|lines|iterations|it)/s\b")
_DURATION = re.compile(r"(?<![\w.])\d+(\.\d+)?(e[+-]?\d+)?\s?(ms|us|µs|s|sec|seconds|min|h)\b")
_CLOCK = re.compile(r"\b\d+:\d{2}(:\d{2})?(\.\d+)?\b")


def normalise_log(text, paths=()):
    """The text of a log with what changes between two identical runs replaced by a placeholder:
    timestamps, rates, durations ("0.01s", "3 ms"), clock times ("1:02") and the given
    absolute paths (longest first, so a work directory inside a temporary one is named as such)."""
    for i, p in sorted(enumerate(paths), key=lambda ip: -len(str(ip[1]))):
        if str(p):
            text = text.replace(str(p), f"<path{i}>")
    text = _TIMESTAMP.sub("<timestamp>", text)
    text = _RATE.sub("<rate>", text)
    text = _DURATION.sub("<seconds>", text)
    return _CLOCK.sub("<clock>", text)


_TIMING_KEY = re.compile(r"seconds|time|elapsed|date|clock|started|finished|host|pid", re.I)


def without_timings(value):
    """A JSON value with every key that names a time (seconds, *_time, ...) removed, recursively."""
    if isinstance(value, dict):
        return {k: without_timings(v) for k, v in value.items() if not _TIMING_KEY.search(k)}
    if isinstance(value, list):
        return [without_timings(v) for v in value]
    return value


def without_trace_seconds(text):
    """A --trace TSV without its seconds column."""
    rows = [line.split("\t") for line in text.splitlines()]
    if not rows or "seconds" not in rows[0]:
        return text
    col = rows[0].index("seconds")
    return "\n".join("\t".join(r[:col] + r[col + 1:]) for r in rows) + "\n"


def sha(data):
    return hashlib.sha256(data if isinstance(data, bytes) else data.encode("utf-8")).hexdigest()


# --- the cases ----------------------------------------------------------------------------------
# A case is a list of steps; a step is (key, argv after `crftk`, files it writes: {role: file}).
# Roles: "model" (hashed as a model, and loaded by the other side under --compare), "trace",
# "report"; "expect": the exit status the step must end with when it is not 0 (a refusal, whose
# one-line message is behaviour too and is hashed like any log).

TRAIN, TEST = "train.txt", "test.txt"
CHUNK_T = "templates/chunking-crfpp.tmpl"
P = ["-p", "1"]


def train(model, *args, data=TRAIN, trace=None):
    argv = ["train", "-m", model, "--max-iter", ITER, *P, *args]
    if trace:
        argv += ["--trace", trace]
    files = {"model": model, **({"trace": trace} if trace else {})}
    return (f"train {model} " + " ".join(args), argv + [data], files)


def tag(model, *args):
    return (f"tag {model} " + " ".join(args), ["tag", "-m", model, *P, *args, TEST], {})


def refused(step, status=2):
    """``step``, which crftk refuses (exit ``status``, one line): the refusal is checked too."""
    key, argv, files = step
    return (key, argv, {k: v for k, v in files.items() if k != "model"} | {"expect": status})


def tags(model, *extra):
    """tag with each verbosity: plain, -v (marginals), -vv, -n 3 (3 best)."""
    return [tag(model, *extra), tag(model, *extra, "-v"), tag(model, *extra, "-vv"), tag(model, *extra, "-n", "3")]


def chain_cases():
    cases = {}
    for order in ("1", "2"):
        # order 2 trains with lbfgs and quickprop only; the others are refused (checked once, below)
        algos = ("lbfgs", "cg", "pcg", "mixed-cg", "gis", "sgd", "perceptron", "quickprop") if order == "1" \
            else ("lbfgs", "quickprop")
        for algo in algos:
            extra = ["--mixed-after", "3"] if algo == "mixed-cg" else []
            m = f"o{order}-{algo}.model"
            cases[f"chain-o{order}-{algo}"] = [train(m, "-t", CHUNK_T, "--order", order, "--algorithm", algo,
                                                     *extra), *tags(m)]
    cases["chain-o2-refusals"] = [refused(train(f"o2-{algo}.model", "-t", CHUNK_T, "--order", "2", "--algorithm", algo))
                                  for algo in ("cg", "pcg", "mixed-cg", "gis", "sgd", "perceptron")]
    for order in ("1", "2"):
        m = f"o{order}-owlqn.model"
        cases[f"chain-o{order}-owlqn"] = [train(m, "-t", CHUNK_T, "--order", order, "--c1", "0.5"), *tags(m)]
        m = f"o{order}-iob2.model"
        cases[f"chain-o{order}-iob2"] = [train(m, "-t", CHUNK_T, "--order", order, "--constraints", "iob2"),
                                         *tags(m)]
    for keep in ("best", "last"):
        m = f"dev-{keep}.model"
        cases[f"chain-dev-{keep}"] = [train(m, "-t", CHUNK_T, "--dev", TEST, "--keep", keep,
                                            trace=f"dev-{keep}.trace"), tag(m)]
    cases["chain-min-freq-complete"] = [train("mf.model", "-t", CHUNK_T, "--min-freq", "2", "--feature-set",
                                              "complete"), tag("mf.model")]
    for algo in ("lbfgs", "quickprop"):
        m = f"memm-{algo}.model"
        # an MEMM tags with its best labeling only: -v and -n are refused
        cases[f"memm-{algo}"] = [train(m, "-t", CHUNK_T, "--model-type", "memm", "--algorithm", algo), tag(m),
                                 refused(tag(m, "-v"), 1), refused(tag(m, "-n", "3"), 1)]
    # MCE / MCE-F from a MAP model
    cases["mce-f-quickprop"] = [train("map.model", "-t", CHUNK_T),
                                train("mcef.model", "--init", "map.model", "--objective", "mce-f",
                                      "--algorithm", "quickprop", "--dev", TEST), *tags("mcef.model")]
    cases["mce-lbfgs"] = [train("map.model", "-t", CHUNK_T),
                          train("mce.model", "--init", "map.model", "--objective", "mce", "--c2", "0.0005"),
                          tag("mce.model")]
    cases["mce-f-lbfgs-refused"] = [train("map.model", "-t", CHUNK_T),
                                    refused(train("mcef.model", "--init", "map.model", "--objective", "mce-f"))]
    cases["resume-init"] = [train("map.model", "-t", CHUNK_T),
                            train("more.model", "--init", "map.model", "--checkpoint-every", "2"),
                            tag("more.model")]
    return cases


def structure_cases():
    cases = {}
    cases["induce"] = [("induce", ["induce", "-t", "templates/chunking-atomic.tmpl", "-m", "induce.model", *P,
                                   "--rounds", "2", "--per-round", "50", "--round-iter", "4", "--final-iter", "6",
                                   "--dev", TEST, "--report", "induce.report", TRAIN],
                        {"model": "induce.model", "report": "induce.report"}), *tags("induce.model")]
    bag = ("bag", ["bag", "-t", "templates/conll2000-np-bag-pos.tmpl", "-t", CHUNK_T, "-m", "bag.model",
                   "--max-iter", ITER, *P, "--parallel", "threads", "--dev", TEST, TRAIN], {"model": "bag.model"})
    cases["bag"] = [bag, tag("bag.model")]
    for combine in ("chosen", "seq-poe", "seq-mixture", "trans-mixture", "trans-poe"):
        cases[f"bag-{combine}"] = [bag, *tags("bag.model", "--combine", combine)]
    cases["bag-random"] = [("bag random", ["bag", "-t", CHUNK_T, "--random-bags", "3", "--seed", "7",
                                           "-m", "rbag.model", "--max-iter", ITER, *P, "--weights-by", "uniform",
                                           TRAIN], {"model": "rbag.model"}), tag("rbag.model")]
    # POS tagger (label column 1, words only) -> chunker fed its POS column
    pipe = [train("pos.model", "-t", "templates/pos-words.tmpl", "--label-col", "1"),
            train("chunk.model", "-t", "templates/chunking-pos0.tmpl"),
            ("compose", ["compose", "-m", "pos.model", "-m", "chunk.model", "--feed", "1", "-o", "pipe.model"],
             {"model": "pipe.model"})]
    # -v and -n 3 with joint decoding only (-vv refused); cascade and normalized refuse both
    cases["pipeline-joint"] = [*pipe, tag("pipe.model", "--decode", "joint"),
                               tag("pipe.model", "--decode", "joint", "-v"),
                               tag("pipe.model", "--decode", "joint", "-n", "3"),
                               refused(tag("pipe.model", "--decode", "joint", "-vv"))]
    for decode in ("cascade", "normalized"):
        cases[f"pipeline-{decode}"] = [*pipe, tag("pipe.model", "--decode", decode),
                                       refused(tag("pipe.model", "--decode", decode, "-v")),
                                       refused(tag("pipe.model", "--decode", decode, "-n", "3"))]
    for inference in ("exact", "trp", "bp"):
        m = f"fcrf-{inference}.model"
        cases[f"factorial-{inference}"] = [train(m, "-t", "templates/fcrf-np.tmpl", "--label-col", "1",
                                                 "--label-col", "2", "--inference", inference),
                                           tag(m, "--inference", inference)]
    # a factorial model tags with its best joint labeling only
    cases["factorial-exact"] += [refused(tag("fcrf-exact.model", "-v")), refused(tag("fcrf-exact.model", "-n", "3"))]
    return cases


def all_cases():
    return {**chain_cases(), **structure_cases()}


# --- running ------------------------------------------------------------------------------------

def prepare_inputs(work):
    """The corpora slices and templates every case reads, in ``work`` (the same bytes every time)."""
    work.mkdir(parents=True, exist_ok=True)
    for src, dst, n in ((REPO / "data" / "demo.train", TRAIN, TRAIN_SENTENCES),
                        (REPO / "data" / "demo.test", TEST, TEST_SENTENCES)):
        blocks = src.read_text(encoding="utf-8").strip("\n").split("\n\n")[:n]
        (work / dst).write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    shutil.copytree(REPO / "templates", work / "templates", dirs_exist_ok=True)


def side_env(code):
    env = dict(os.environ, PYTHONPATH=str(code), PYTHONHASHSEED="0", OMP_NUM_THREADS="1",
               OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1", LC_ALL="C.UTF-8", COLUMNS="100")
    env.pop("PYTHONSTARTUP", None)
    return env


def check_imports(code):
    """Stop unless the crftk imported with ``code`` on PYTHONPATH is ``code``'s (not an installed one)."""
    r = subprocess.run([sys.executable, "-c", "import crftk._lattice as m; print(m.__file__)"],
                       cwd=tempfile.gettempdir(), env=side_env(code), capture_output=True, text=True)
    where = Path(r.stdout.strip() or "?").resolve()
    if r.returncode != 0 or Path(code).resolve() not in where.parents:
        sys.exit(f"PYTHONPATH={code} imports crftk from {where} (build its kernels in place: "
                 f"python3 setup.py build_ext --inplace){': ' + r.stderr.strip() if r.returncode else ''}")


def run_crftk(code, work, argv):
    return subprocess.run([sys.executable, "-m", "crftk.cli", *argv], cwd=work, env=side_env(code),
                          capture_output=True, stdin=subprocess.DEVNULL)


def model_hashes(code, work, files):
    """Hashes of model files read by the crftk of ``code`` (in a process of its own)."""
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--hash-models", *files], cwd=work,
                         env=side_env(code), capture_output=True, text=True)
    if out.returncode != 0:
        return {f: {"load": "error: " + (out.stderr.strip().splitlines() or ["?"])[-1]} for f in files}
    return json.loads(out.stdout)


def _hash_models(files):
    """(run under the code being checked) arrays, meta and labels of each model file."""
    import numpy as np
    from crftk.io.container import read_container
    from crftk.model import Model
    result = {}
    for f in files:
        meta, arrays = read_container(f)
        h = hashlib.sha256()
        for name in sorted(arrays):
            a = np.ascontiguousarray(arrays[name])
            h.update(f"{name}\0{a.dtype.str}\0{a.shape}\0".encode())
            h.update(a.tobytes())
        meta = {k: v for k, v in meta.items() if k != "info"}
        model = Model.load(f)
        labels = [list(map(str, p.space.labels)) for p in model.parts]
        result[f] = {"arrays": h.hexdigest(), "meta": sha(json.dumps(meta, sort_keys=True, default=str)),
                     "labels": sha(json.dumps(labels))}
    json.dump(result, sys.stdout)


def run_case(code, work, steps):
    """Run one case's steps in ``work`` with the crftk of ``code``: {step key: {what: hash}}."""
    hashes = {}
    models = []
    for key, argv, files in steps:
        r = run_crftk(code, work, argv)
        log = normalise_log(r.stderr.decode("utf-8", "replace"), (work, code, Path(tempfile.gettempdir())))
        entry = {"status": str(r.returncode), "log": sha(log), "out": sha(r.stdout)}
        if r.returncode != files.get("expect", 0):
            entry["unexpected"] = f"exit {r.returncode}, expected {files.get('expect', 0)}"
        if r.returncode != 0:
            entry["error"] = log.strip().splitlines()[-1:] or [""]
        if "trace" in files and (work / files["trace"]).exists():
            entry["trace"] = sha(without_trace_seconds((work / files["trace"]).read_text(encoding="utf-8")))
        if "report" in files and (work / files["report"]).exists():
            entry["report"] = sha(normalise_log((work / files["report"]).read_text(encoding="utf-8")))
        if "model" in files and r.returncode == 0:
            models.append(files["model"])
        hashes[key] = entry
    if models:
        for f, h in model_hashes(code, work, models).items():
            info = run_crftk(code, work, ["info", "--json", f])
            try:
                h["info"] = sha(json.dumps(without_timings(json.loads(info.stdout)), sort_keys=True))
            except ValueError:
                h["info"] = "error: " + info.stderr.decode("utf-8", "replace").strip()
            hashes[f"model {f}"] = h
    return hashes


def cross_load(code, base_work, head_work, steps):
    """Load the model files another revision wrote in ``base_work`` with the crftk of ``code``
    (`info --json`, a plain tag): each must load and tag as the same code's own file in
    ``head_work`` does."""
    diffs = []
    for f in dict.fromkeys(files["model"] for _, _, files in steps if "model" in files):
        if not (base_work / f).exists():
            continue
        for argv in (["tag", "-m", f, *P, TEST], ["info", "--json", f]):
            old, new = run_crftk(code, base_work, argv), run_crftk(code, head_work, argv)
            what = f"{argv[0]} of {f}"
            if old.returncode != 0:
                diffs.append((what, "fails on the base's file: " + old.stderr.decode("utf-8", "replace").strip()))
            elif argv[0] == "tag" and old.stdout != new.stdout:
                diffs.append((what, "the base's file tags differently from this checkout's own"))
            elif argv[0] == "info" and (json.dumps(without_timings(json.loads(old.stdout)), sort_keys=True)
                                        != json.dumps(without_timings(json.loads(new.stdout)), sort_keys=True)):
                diffs.append((what, "the base's file is summarised differently from this checkout's own"))
    return diffs


def run_all(code, work_root, cases, log=print):
    results = {}
    for name, steps in cases.items():
        work = work_root / name
        prepare_inputs(work)
        t0 = time.perf_counter()
        results[name] = run_case(code, work, steps)
        log(f"{name}: {time.perf_counter() - t0:.1f}s")
    return results


def differences(a, b):
    rows = []
    for case in sorted(set(a) | set(b)):
        sa, sb = a.get(case, {}), b.get(case, {})
        for step in sorted(set(sa) | set(sb)):
            ha, hb = sa.get(step, {}), sb.get(step, {})
            for what in sorted(set(ha) | set(hb)):
                if ha.get(what) != hb.get(what):
                    rows.append((case, step, what, str(ha.get(what, "-"))[:12], str(hb.get(what, "-"))[:12]))
    return rows


def build_rev(rev, where):
    """A worktree of ``rev`` in ``where`` with its kernels built in place."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), rev], check=True,
                   stdout=subprocess.DEVNULL)
    built = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace", "-j", "2"], cwd=where,
                           capture_output=True, text=True)
    if built.returncode != 0:       # the compiler's warnings only when the build fails
        sys.exit(f"building {rev} failed:\n" + "\n".join(built.stderr.splitlines()[-30:]))


def compare(rev, cases, work_root, keep):
    base_code = work_root / "base-code"
    print(f"building {rev} in {base_code} ...", file=sys.stderr)
    t0 = time.perf_counter()
    try:
        build_rev(rev, base_code)
        print(f"built in {time.perf_counter() - t0:.0f}s", file=sys.stderr)
        check_imports(base_code)
        check_imports(REPO)
        base, head, load_diffs = {}, {}, []
        for i, (name, steps) in enumerate(cases.items()):
            t0 = time.perf_counter()
            # alternate which side goes first, so that a slow moment of the machine hits both
            order = [("base", base_code, base), ("head", REPO, head)]
            for side, code, results in (order if i % 2 == 0 else order[::-1]):
                work = work_root / side / name
                prepare_inputs(work)
                results[name] = run_case(code, work, steps)
            load_diffs += [(name, *d) for d in cross_load(REPO, work_root / "base" / name, work_root / "head" / name,
                                                          steps)]
            print(f"{name}: {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        return base, head, load_diffs
    finally:
        if not keep:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base_code)],
                           stdout=subprocess.DEVNULL)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, help="write the hashes as JSON ({case: {step: {what: hash}}})")
    ap.add_argument("--work", type=Path, help="work directory (default: a temporary one, removed)")
    ap.add_argument("--only", nargs="+", metavar="SUBSTRING", help="only the cases whose name contains one")
    ap.add_argument("--list", action="store_true", help="print the cases and their commands")
    ap.add_argument("--compare", metavar="REV", help="build REV in a git worktree and compare its hashes")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (and REV's worktree)")
    ap.add_argument("--hash-models", nargs="+", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.hash_models:
        _hash_models(args.hash_models)
        return 0
    cases = all_cases()
    if args.only:
        cases = {k: v for k, v in cases.items() if any(s in k for s in args.only)}
    if args.list:
        for name, steps in cases.items():
            print(name)
            for _, argv_, _ in steps:
                print("    crftk " + " ".join(argv_))
        return 0
    work_root = args.work or Path(tempfile.mkdtemp(prefix="crftk-behaviour-"))
    work_root = work_root.resolve()
    t0 = time.perf_counter()
    try:
        if not args.compare:
            check_imports(REPO)
            results = run_all(REPO, work_root, cases, log=lambda s: print(s, file=sys.stderr))
            failed = [f"{c}: {k}: {h['unexpected']}: {h.get('error', [''])[0]}" for c, steps in results.items()
                      for k, h in steps.items() if "unexpected" in h]
            text = json.dumps(results, indent=1, sort_keys=True) + "\n"
            if args.out:
                args.out.write_text(text)
            else:
                sys.stdout.write(text)
            print(f"{len(results)} cases in {time.perf_counter() - t0:.0f}s; digest {sha(text)[:16]}",
                  file=sys.stderr)
            for f in failed:
                print(f"step failed: {f}", file=sys.stderr)
            return 1 if failed else 0
        base, head, load_diffs = compare(args.compare, cases, work_root, args.keep)
        if args.out:
            args.out.write_text(json.dumps({"base": base, "head": head}, indent=1, sort_keys=True) + "\n")
        rows = differences(base, head)
        print(f"{len(cases)} cases, {args.compare} against this checkout, {time.perf_counter() - t0:.0f}s")
        if rows:
            print(f"\n{'case':28} {'step':44} {'what':8} {'base':12} {'head':12}")
            for case, step, what, ha, hb in rows:
                print(f"{case:28} {step[:44]:44} {what:8} {ha:12} {hb:12}")
        for case, what, why in load_diffs:
            print(f"{case}: {what}: {why}")
        if not rows and not load_diffs:
            print("every hash equal; every model file of the base loads and tags the same")
        return 1 if rows or load_diffs else 0
    finally:
        if not args.keep:
            shutil.rmtree(work_root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
