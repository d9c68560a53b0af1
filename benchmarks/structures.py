#!/usr/bin/env python
"""Whole-process `crftk tag` speed of every model kind and decoding mode, before and after (issues 19, 38).

On CoNLL-2000 dev.txt with the chunk column reduced to B-NP/I-NP/O (as in make fcrf-table1),
concatenated ``--copies`` times (20: 887k tokens), ``crftk tag -m MODEL -p T [OPTIONS] -o OUT BIG``
as a user runs it, at 1 and 2 threads, for each case of CASES:

* **chain**: one CRF of templates/chunking-crfpp.tmpl (Viterbi, ``-v``, ``-vv``, ``-n 5``), the
  same at ``--order 2``, a MEMM, a semi-Markov CRF (templates/semimarkov-np.tmpl);
* **factorial**: a factorial CRF of POS and NP chunks (templates/fcrf-np.tmpl) tagged with exact
  inference, ``--inference trp`` and ``--inference bp`` (max-product);
* **bag**: templates/conll2000-np-bag-base.tmpl and -pos.tmpl, each ``--combine`` (and
  seq-mixture's ``--decode max-marginal``);
* **pipeline**: a POS CRF (templates/fcrf-pos.tmpl) feeding an NP CRF, ``crftk compose``:
  pipeline.model (the NP CRF reads POS at offsets -3..3: joint decoding rescores the
  ``--nbest-upstream`` best POS labelings) and pipeline0.model (POS at offset 0 only:
  exact joint), with ``--decode cascade``, ``joint``, ``normalized``, and ``-v`` / ``-n 5``.

Models: ``--models-from DIR`` (for instance the main checkout's out/structures) is copied into
``--out`` file by file where ``--out`` lacks one; ``--fcrf-model`` and ``--pipeline`` (make
fcrf-table1's, full size, when they exist) are used as they are; every other model is trained
here once, with ``--iterations`` L-BFGS iterations (small counts are fine for speed, but say so:
max-product TRP on an undertrained factorial model needs more sweeps), by the ``--baseline``
checkout when one is given, so that both checkouts read it, and kept in ``--out``.

Before timing, each checkout's modules are compiled to bytecode (``--bytecode compiled``, as an
installed package has them; ``source`` removes it, so that every start compiles them, as on a
machine with PYTHONDONTWRITEBYTECODE set and an editable install).

Each command runs ``--repeats`` times, interleaved with the same command on the ``--baseline``
checkout (built in place) when one is given: medians, peak RSS (GNU time), CPU seconds, the
1-minute load. A case whose one-copy probe projects a run longer than ``--max-run-seconds``
in a checkout is timed on fewer copies in both (the table gives the tokens; the probe includes the
process's start, so it overestimates). "Outputs identical":
every output of a case, of both checkouts and thread counts, is byte-identical (an output of k
copies to the first k/K of one of K copies). A case a checkout cannot run (an option it lacks)
is reported as such. Each case has a goal (issue 38: 100k tokens/s at 2 threads, factorial trp
300k); the targets table says whether the "after" median meets it.

Usage::

    python benchmarks/structures.py [--data DIR] [--out out/structures] [--copies 20] [--repeats 3]
        [--iterations 100] [--models-from DIR] [--fcrf-model M] [--pipeline P] [--baseline DIR]
        [--cases 'NAME;NAME'] [--max-run-seconds 60] [--results benchmarks/results/structures]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fcrf import TEMPLATES, np_reduce
from pipeline import env_with_repo, loadavg, make_big, time_tag

REPO = Path(__file__).resolve().parents[1]
GOAL = 100_000          # tokens/s at 2 threads, every kind and mode (issue 38)
GOAL_TRP = 300_000      # factorial TRP
NBEST = ["-n", "5"]

# name, model, extra tag options, goal in tokens/s at 2 threads
CASES = [
    ("chain", "chain", [], GOAL),
    ("chain -v", "chain", ["-v"], GOAL),
    ("chain -vv", "chain", ["-vv"], GOAL),
    ("chain -n 5", "chain", NBEST, GOAL),
    ("chain, order 2", "chain2", [], GOAL),
    ("MEMM", "memm", [], GOAL),
    ("semi-Markov", "semi", [], GOAL),
    ("factorial, exact", "fcrf", [], GOAL),
    ("factorial, trp", "fcrf", ["--inference", "trp"], GOAL_TRP),
    ("factorial, bp", "fcrf", ["--inference", "bp"], GOAL),
    ("bag of 2, seq-poe", "bag", ["--combine", "seq-poe"], GOAL),
    ("bag of 2, seq-mixture", "bag", ["--combine", "seq-mixture"], GOAL),
    ("bag of 2, seq-mixture max-marginal", "bag", ["--combine", "seq-mixture", "--decode", "max-marginal"], GOAL),
    ("bag of 2, trans-mixture", "bag", ["--combine", "trans-mixture"], GOAL),
    ("bag of 2, trans-poe", "bag", ["--combine", "trans-poe"], GOAL),
    ("pipeline, cascade", "pipeline", ["--decode", "cascade"], GOAL),
    ("pipeline, joint (20-best)", "pipeline", ["--decode", "joint"], GOAL),
    ("pipeline, normalized (20-best)", "pipeline", ["--decode", "normalized"], GOAL),
    ("pipeline0, exact joint", "pipeline0", ["--decode", "joint"], GOAL),
    ("pipeline0, normalized (20-best)", "pipeline0", ["--decode", "normalized"], GOAL),
    ("pipeline0, exact joint -v", "pipeline0", ["--decode", "joint", "-v"], GOAL),
    ("pipeline0, exact joint -n 5", "pipeline0", ["--decode", "joint", *NBEST], GOAL),
]
CASE_NAMES = [c[0] for c in CASES]


def note(msg):
    print(f"[structures {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def crftk(args, repo, log):
    """Run a crftk command of the checkout repo (niced), its stderr appended to log."""
    args = [str(a) for a in args]
    note(f"+ crftk {' '.join(args)} ({repo})")
    with open(log, "a") as err:
        p = subprocess.run(["nice", "-n", "5", sys.executable, "-m", "crftk.cli", *args], stderr=err,
                           stdout=subprocess.DEVNULL, env=env_with_repo(str(repo)), cwd=repo)
    if p.returncode != 0:
        sys.exit(f"crftk {' '.join(args)} failed (exit {p.returncode}); see {log}")


def models(args, needed):
    """Paths of the needed models: copied from --models-from, given, or trained once into --out."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.models_from and Path(args.models_from).resolve() != out.resolve():
        for src in sorted(Path(args.models_from).glob("*")):
            if src.is_file() and not (out / src.name).exists() and src.suffix in (".model", ".txt"):
                note(f"copying {src} into {out}")
                shutil.copyfile(src, str(out / src.name) + ".tmp")
                os.replace(str(out / src.name) + ".tmp", out / src.name)
    trainer = args.baseline or str(REPO)   # both checkouts must read what it writes
    log = out / "train.log"
    train = np_reduce(Path(args.data) / "train.txt", out / "train.np.txt")
    paths = {k: out / f"{k}.model" for k in ("chain", "chain2", "memm", "semi", "fcrf", "bag", "pos", "np",
                                              "pipeline", "np0", "pipeline0")}
    if Path(args.fcrf_model).exists():
        paths["fcrf"] = Path(args.fcrf_model)
    if Path(args.pipeline).exists():        # make fcrf-table1 keeps its stages beside it
        paths["pipeline"] = Path(args.pipeline)
        paths["pos"] = Path(args.pipeline).parent / "pos.model"
    common = ["--max-iter", args.iterations, "--c2", 0.05]
    crfpp = "templates/chunking-crfpp.tmpl"
    recipes = {
        "chain": ["train", "-t", crfpp, *common],
        "chain2": ["train", "-t", crfpp, "--order", 2, *common],
        "memm": ["train", "-t", crfpp, "--model-type", "memm", *common],
        "semi": ["train", "-t", "templates/semimarkov-np.tmpl", "--model-type", "semimarkov", *common],
        "fcrf": ["train", "-t", TEMPLATES["fcrf"], "--label-col", 1, "--label-col", 2, *common],
        "bag": ["bag", "-t", "templates/conll2000-np-bag-base.tmpl", "-t", "templates/conll2000-np-bag-pos.tmpl",
                "--max-iter", args.iterations],
        "pos": ["train", "-t", TEMPLATES["pos"], "--label-col", 1, *common],
        "np": ["train", "-t", TEMPLATES["np"], "--label-col", 2, *common],
        "np0": ["train", "-t", "templates/chunking-pos0.tmpl", *common],
    }
    stages = {"pipeline": ("pos", "np"), "pipeline0": ("pos", "np0")}
    want = set(needed)
    for m in needed:
        if m in stages and not paths[m].exists():
            want.update(stages[m])
    for m in sorted(want, key=lambda m: m in stages):       # the stages before their pipelines
        if paths[m].exists():
            continue
        if m in stages:
            a, b = stages[m]
            crftk(["compose", "-m", paths[a], "-m", paths[b], "--feed", 1, "-o", paths[m]], trainer, log)
        else:
            cmd = recipes[m]
            crftk([cmd[0], "-m", paths[m], *cmd[1:], train], trainer, log)
    return {m: paths[m] for m in want}


def repeats(path, ref, copies):
    """Whether file path is file ref repeated copies times (the output of dev.txt x copies)."""
    size = os.path.getsize(ref)
    if os.path.getsize(path) != size * copies:
        return False
    want = Path(ref).read_bytes()
    with open(path, "rb") as fh:
        return all(fh.read(size) == want for _ in range(copies))


class Outputs:
    """Checks every output of one case against its first one-copy output (a probe's)."""

    def __init__(self, work, idx):
        self.ref, self.identical, self.seen = work / f"ref-{idx}.txt", True, False

    def check(self, path, copies):
        if not self.ref.exists():
            if copies != 1:
                raise ValueError("the first output of a case must be of one copy")
            os.replace(path, self.ref)
            self.seen = True
        else:
            self.identical = self.identical and repeats(path, self.ref, copies)


def bytecode(package, how):
    """Each checkout's Python modules compiled to bytecode before timing ("compiled", as an
    installed package has them, and as Python writes them on a first run unless
    PYTHONDONTWRITEBYTECODE is set), or their bytecode removed ("source": every start compiles
    them, ~0.35 s here)."""
    if how == "compiled":
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(package)], check=True,
                       stdout=subprocess.DEVNULL)
    else:
        for cache in package.rglob("__pycache__"):
            shutil.rmtree(cache)


def run(args):
    out = Path(args.out)
    cases = [c for c in CASES if args.cases is None or c[0] in args.cases]
    paths = models(args, sorted({c[1] for c in cases}))
    work = Path(tempfile.mkdtemp(prefix="crftk-structures-"))
    dev = np_reduce(Path(args.data) / "dev.txt", out / "dev.np.txt")
    n_dev = sum(1 for line in open(dev, "rb") if line.strip())
    inputs = {}

    def big(copies):
        if copies not in inputs:
            inputs[copies] = work / f"dev.x{copies}.txt"
            make_big(dev, copies, inputs[copies])
        return inputs[copies]

    repos = {"after": str(REPO)}
    if args.baseline:
        repos = {"before": args.baseline, "after": str(REPO)}
    for repo in repos.values():
        bytecode(Path(repo) / "crftk", args.bytecode)
    res = {"config": {"copies": args.copies, "dev_tokens": n_dev, "tokens": n_dev * args.copies,
                      "repeats": args.repeats, "iterations": args.iterations, "baseline": args.baseline,
                      "bytecode": args.bytecode,
                      "max_run_seconds": args.max_run_seconds, "cpus": os.cpu_count(),
                      "models": {m: str(paths[m]) for m in sorted({c[1] for c in cases})},
                      "commits": {w: git_head(r) for w, r in repos.items()},
                      "started": time.strftime("%Y-%m-%d %H:%M:%S"), "load_start": loadavg()},
           "cases": {}, "runs": {}}
    outputs = {name: Outputs(work, i) for i, (name, _, _, _) in enumerate(cases)}
    try:
        # a probe of one copy at 2 threads per case and checkout: does it run, how many copies fit
        for name, model, extra, goal in cases:
            info = res["cases"].setdefault(name, {"model": model, "options": extra, "goal": goal,
                                                  "copies": {}, "failed": {}})
            for which, repo in repos.items():
                o = work / "out.txt"
                try:
                    s, _, _, _ = time_tag(paths[model], big(1), o, 2, repo, extra)
                except SystemExit as e:
                    info["failed"][which] = failure(e)
                    note(f"{name}|{which}: fails: {info['failed'][which]}")
                    continue
                outputs[name].check(o, 1)
                fit = int(args.max_run_seconds // s) if s * args.copies > args.max_run_seconds else args.copies
                info["copies"][which] = max(1, min(args.copies, fit))
                note(f"probe {name}|{which}: {s:.2f} s for {n_dev:,} tokens -> {info['copies'][which]} copies")
            if info["copies"]:     # both checkouts on the same input: comparable figures
                fewest = min(info["copies"].values())
                info["copies"] = dict.fromkeys(info["copies"], fewest)
        for rep in range(args.repeats):
            for name, model, extra, _ in cases:
                info = res["cases"][name]
                for threads in (1, 2):
                    for which, repo in repos.items():
                        if which in info["failed"]:
                            continue
                        copies = info["copies"][which]
                        o = work / "out.txt"
                        la = loadavg()
                        try:
                            s, peak, digest, cpu = time_tag(paths[model], big(copies), o, threads, repo, extra)
                        except SystemExit as e:
                            info["failed"][which] = failure(e)
                            note(f"{name}|{which}|{threads}: fails: {info['failed'][which]}")
                            continue
                        outputs[name].check(o, copies)
                        key = f"{name}|{which}|{threads}"
                        n = n_dev * copies
                        res["runs"].setdefault(key, []).append({"seconds": s, "tokens": n, "peak_mb": peak,
                                                                "sha256": digest, "cpu_seconds": cpu, "load": la})
                        note(f"{rep} {key}: {s:.2f} s ({n / s / 1000:.0f}k tok/s), peak {peak:.0f} MB, load {la}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for name in res["cases"]:
        res["cases"][name]["identical"] = outputs[name].identical and outputs[name].seen
    res["config"]["load_end"] = loadavg()
    write_results(res, args.results)
    print(table(res))


def failure(e):
    """The error line of a failed `crftk tag` (time_tag's exit message ends with GNU time's figures)."""
    lines = [x for x in str(e).strip().splitlines() if x.strip() and not x.replace(".", "").replace(" ", "").isdigit()
             and "Command exited with" not in x]
    return (lines[-1] if lines else str(e))[:300]


def git_head(repo):
    p = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=repo, capture_output=True, text=True)
    return p.stdout.strip() or None


def medians(res, name, which, threads):
    """(seconds, tokens/s, peak MB, tokens) medians of one case, checkout and thread count, or None."""
    runs = res["runs"].get(f"{name}|{which}|{threads}")
    if not runs:
        return None
    s = statistics.median(r["seconds"] for r in runs)
    peaks = [r["peak_mb"] for r in runs if r["peak_mb"] is not None]
    return s, runs[0]["tokens"] / s, statistics.median(peaks) if peaks else None, runs[0]["tokens"]


def cell(m, full, failed):
    if m is None:
        return f"fails ({failed})" if failed else "n/a"
    s, tps, peak, tokens = m
    few = "" if tokens == full else f" on {tokens:,} tokens"
    return f"{s:.2f} ({tps / 1000:.0f}k), {peak:.0f}{few}" if peak is not None else f"{s:.2f} ({tps / 1000:.0f}k){few}"


def table(res):
    cfg = res["config"]
    n = cfg["tokens"]
    both = cfg["baseline"] is not None
    commits = cfg.get("commits", {})
    lines = [f"## Run of {cfg['started']}: every kind and decoding mode", "",
             f"`crftk tag` whole process on CoNLL-2000 dev.txt (NP chunks) x {cfg['copies']} = {n:,} tokens "
             f"(a case whose run would exceed {cfg['max_run_seconds']:.0f} s: fewer copies, tokens given); "
             f"median of {cfg['repeats']} runs"
             + {"compiled": ", modules compiled to bytecode beforehand (as installed)",
                "source": ", no bytecode (every start compiles the modules)"}.get(cfg.get("bytecode"), "")
             + (f", interleaved with the baseline checkout {cfg['baseline']} ({commits.get('before')})" if both else "")
             + f"; after: {commits.get('after')}. Models: "
             + ", ".join(f"{k} = {v}" for k, v in cfg["models"].items())
             + f" (a model missing from the output directory is trained there with {cfg['iterations']} L-BFGS iterations). Cells: seconds (thousand tokens/s), "
             "peak RSS MB. `python benchmarks/structures.py`.", ""]
    head = "| model, decoding | threads | " + ("before | " if both else "") + "after | " + \
        ("after / before | " if both else "") + "outputs identical |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for name, info in res["cases"].items():
        for threads in (1, 2):
            row = []
            ms = {}
            for which in (["before"] if both else []) + ["after"]:
                ms[which] = medians(res, name, which, threads)
                row.append(cell(ms[which], n, info["failed"].get(which)))
            if both:
                b, a = ms["before"], ms["after"]
                row.append(f"{a[1] / b[1]:.2f}x" if a and b else "")
            lines.append(f"| {name} | {threads} | " + " | ".join(row) +
                         f" | {'yes' if info['identical'] else 'NO'} |")
    lines += ["", "### Targets (issue 38): tokens/s at 2 threads", "",
              "| model, decoding | goal | " + ("before | " if both else "") + "after | met |",
              "|---|---|" + ("---|" if both else "") + "---|---|"]
    for name, info in res["cases"].items():
        ms = {w: medians(res, name, w, 2) for w in ("before", "after")}
        a = ms["after"]
        met = "n/a" if a is None else ("yes" if a[1] >= info["goal"] else "no")
        lines.append(f"| {name} | >= {info['goal'] / 1000:.0f}k | "
                     + (f"{ms['before'][1] / 1000:.0f}k | " if both and ms["before"] else ("n/a | " if both else ""))
                     + (f"{a[1] / 1000:.0f}k" if a else "n/a") + f" | {met} |")
    loads = [r["load"] for runs in res["runs"].values() for r in runs if r["load"] is not None]
    if loads:
        lines += ["", f"1-minute load during the runs: {min(loads):.2f} to {max(loads):.2f} "
                  f"(2-core machine shared with other jobs: compare within this table only).", ""]
    if cfg.get("note"):
        lines += [cfg["note"] + ".", ""]
    return "\n".join(lines)


HISTORY = "\n## History\n"


def write_results(res, results):
    """RESULTS.json: this run; RESULTS.md: its table above the file's History section (kept)."""
    md, js = Path(results + ".md"), Path(results + ".json")
    md.parent.mkdir(parents=True, exist_ok=True)
    history = ""
    if md.exists():
        old = md.read_text()
        history = old[old.index(HISTORY):] if HISTORY in old else HISTORY + "\n" + old
    title = ("# Tagging speed of every model kind and decoding mode\n\n`make bench-structures CONLL2000=... "
             "BASELINE=DIR` (`benchmarks/structures.py`). The newest run is written\nabove the History section, "
             "which keeps the earlier runs.\n\n")
    js.write_text(json.dumps(res, indent=1) + "\n")
    md.write_text(title + table(res) + history)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.environ.get("CONLL2000") or str(REPO.parent / "shared" / "data" / "conll2000"))
    p.add_argument("--out", default=str(REPO / "out" / "structures"))
    p.add_argument("--copies", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--iterations", type=int, default=100, help="L-BFGS iterations of the models trained here")
    p.add_argument("--models-from", default=None, help="copy the models this directory has and --out lacks")
    p.add_argument("--fcrf-model", default=str(REPO / "out" / "fcrf" / "8936" / "fcrf.model"))
    p.add_argument("--pipeline", default=str(REPO / "out" / "fcrf" / "8936" / "cascade.pipeline"))
    p.add_argument("--baseline", default=None, help="another crftk checkout, built in place: the 'before' column")
    p.add_argument("--max-run-seconds", type=float, default=60.0,
                   help="a case whose one-copy probe projects a longer run is timed on fewer copies")
    p.add_argument("--results", default=str(REPO / "benchmarks" / "results" / "structures"))
    p.add_argument("--cases", type=lambda x: [c.strip() for c in x.split(";") if c.strip()], default=None,
                   help="the cases to run, by name, separated by ';' (default: all): " + "; ".join(CASE_NAMES))
    p.add_argument("--summarize", metavar="JSON", help="print the table of a results file")
    p.add_argument("--bytecode", choices=("compiled", "source"), default="compiled",
                   help="compile both checkouts' modules to bytecode before timing (default, as an installed "
                        "package has them), or remove it so that every start compiles them")
    args = p.parse_args(argv)
    if args.summarize:
        print(table(json.loads(Path(args.summarize).read_text())))
        return
    unknown = set(args.cases or ()) - set(CASE_NAMES)
    if unknown:
        p.error(f"unknown cases {sorted(unknown)}: choose from {'; '.join(CASE_NAMES)}")
    if args.baseline and not (Path(args.baseline) / "crftk").is_dir():
        p.error(f"--baseline {args.baseline}: no crftk checkout there")
    if not (Path(args.data) / "train.txt").exists():
        sys.exit(f"CoNLL-2000 not found in {args.data}: give --data DIR")
    run(args)


if __name__ == "__main__":
    main()
