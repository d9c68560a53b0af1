#!/usr/bin/env python
"""Before/after speed of crftk itself, the two revisions interleaved in one run.

For a refactoring that must keep speed (issue 32: "within 3% of before"). `make bench` compares
crftk with python-crfsuite only; this compares crftk with crftk:

    python benchmarks/speed_change.py --baseline DIR [options]    (DIR: the old revision, built in place)
    python benchmarks/speed_change.py --compare REV [options]     (make speed-change BASE=REV)

--compare REV builds REV in a temporary git worktree (benchmarks/behaviour.py's build_rev) and
removes it afterwards (``--keep``: leaves it, and prints its path). "head" is this checkout, whose
kernels must be built in place too. Every run is ``python -m crftk.cli ...`` in a fresh process,
as a user runs it, with PYTHONPATH and the working directory set to the side's checkout
(benchmarks/pipeline.py's ``time_tag``); both sides read the same inputs and this checkout's
templates, so only the code differs. The cases, on CoNLL-2000 (``--data``):

* **chain train** (``-p 1``, ``-p 2``): train.txt, templates/chunking-crfpp.tmpl, ``--max-iter``
  L-BFGS iterations (30). The figure is the median seconds of an iteration in the saved model's
  training record (``crftk info --json``: ``training.history[].seconds``), the first iteration
  left out; reading and encoding are in the second figure, the whole process's wall seconds.
* **order-2 train**: the same with ``--order 2`` and ``--order2-iter`` iterations (10).
* **chain tag** (``-p 1``, ``-p 2``): ``crftk tag`` of dev.txt concatenated ``--copies`` times
  (10), whole-process wall seconds; both sides tag the model the base trained in the first case
  (``-p 1``), so only the code differs.
* **factorial train** (exact, trp; ``-p --fcrf-threads``): ``--label-col 1 --label-col 2 -t
  templates/fcrf-np.tmpl`` on the first ``--fcrf-sentences`` (2000) sentences of train.txt with
  the chunk column reduced to B-NP/I-NP/O (benchmarks/fcrf.py's np_reduce), ``--fcrf-iter`` (10)
  iterations: seconds per iteration and whole-process seconds.

Each case runs ``--repeats`` (3) times on each side, alternating (base, head, head, base, base,
head, ...: who goes first swaps each repeat). Per figure: the medians, and the ratio head / base.
The 1-minute load average is recorded before every run. Outputs are hashed (SHA-256): the tagged
files, and the ``crftk dump`` of every trained model (dumped by this checkout's code, so that only
the weights can differ); a case whose hashes differ between the sides is flagged. A table goes
to stdout, everything to ``--out FILE.json``; exit status 1 when a ratio exceeds
1 + ``--tolerance`` (0.03) or an output differs.

Smoke test with small inputs: ``--max-sentences 300 --copies 1 --fcrf-sentences 300 --repeats 1
--max-iter 5 --order2-iter 3 --fcrf-iter 3``. ``--cases`` picks cases (chain, order2, tag, fcrf).

The tagging speed of the other structures (factorial models, bags, pipelines) is not measured
here: ``make bench-structures STRUCTURES_BASELINE=DIR`` measures it interleaved with DIR, a
checkout of the old revision built in place (``--compare REV --keep`` leaves one behind).
Timings on a shared machine are noisy: compare figures of one run only, at a low load.
"""

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))     # benchmarks/: the helpers below

from behaviour import build_rev, check_imports                     # noqa: E402
from fcrf import np_reduce                                         # noqa: E402
from pipeline import env_with_repo, loadavg, make_big, median, time_tag   # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = os.environ.get("CONLL2000") or str(REPO.parent / "shared" / "data" / "conll2000")
CHUNK_TEMPLATE = REPO / "templates" / "chunking-crfpp.tmpl"
FCRF_TEMPLATE = REPO / "templates" / "fcrf-np.tmpl"
CASES = ("chain", "order2", "tag", "fcrf")
SIDES = ("base", "head")


def note(msg):
    print(f"[speed-change {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --- pure functions -------------------------------------------------------------------------------

def sides_in_order(rep):
    """Who runs first in repeat ``rep``: base in even repeats, head in odd ones (ABBAAB...)."""
    return SIDES if rep % 2 == 0 else SIDES[::-1]


def per_iteration(history):
    """The median seconds of an iteration of a training record's history, the first iteration
    (which warms caches and allocates) left out unless it is the only one."""
    seconds = [h["seconds"] for h in history if h.get("seconds") is not None]
    return median(seconds[1:] or seconds)


def ratio(base, head):
    """head / base, None when either is missing or base is 0."""
    if base is None or head is None or base <= 0:
        return None
    return head / base


def verdict(rows, tolerance):
    """The failures of a run's rows ({name, measure, ratio, identical}): ratios above 1 + tolerance
    and outputs that differ between the sides, one line each (an empty list: the change holds)."""
    failures = []
    for r in rows:
        if r.get("ratio") is not None and r["ratio"] > 1 + tolerance:
            failures.append(f"{r['name']}, {r['measure']}: head/base {r['ratio']:.3f} > {1 + tolerance:.3f}")
    for name in dict.fromkeys(r["name"] for r in rows if r.get("identical") is False):
        failures.append(f"{name}: the outputs differ (between base and head, or from one repeat to the next)")
    return failures


def summarise(runs, measures):
    """Per measure, the base and head medians of ``runs`` ([{side, measure: value, ...}]) and their
    ratio; and whether every output hash of the runs (``sha256``) is the same."""
    figures = {}
    for m in measures:
        b = median([r.get(m) for r in runs if r["side"] == "base"])
        h = median([r.get(m) for r in runs if r["side"] == "head"])
        figures[m] = {"base": b, "head": h, "ratio": ratio(b, h)}
    hashes = {side: sorted({r["sha256"] for r in runs if r["side"] == side and r.get("sha256")}) for side in SIDES}
    identical = None
    if hashes["base"] and hashes["head"]:
        every = set(hashes["base"]) | set(hashes["head"])
        identical = len(every) == 1 and not any(h.startswith("dump failed") for h in every)
    return figures, hashes, identical


def table(cases):
    """The text table of the summarised cases."""
    lines = [f"{'case':34} {'figure':20} {'base':>9} {'head':>9} {'ratio':>7}  outputs"]
    for name, c in cases.items():
        same = {True: "same", False: "DIFFER", None: "-"}[c["identical"]]
        for m, f in c["figures"].items():
            fmt = (lambda x: "-" if x is None else f"{x:9.4f}")
            r = "-" if f["ratio"] is None else f"{f['ratio']:7.3f}"
            lines.append(f"{name:34} {m:20} {fmt(f['base']):>9} {fmt(f['head']):>9} {r:>7}  {same}")
    return "\n".join(lines)


def first_sentences(src, n, dst):
    """The first ``n`` sentences of a CoNLL file (all with n=None) written to ``dst``."""
    with open(src, encoding="utf-8") as fin, open(dst, "w", encoding="utf-8") as fout:
        count, inside = 0, False
        for line in fin:
            if line.strip():
                if not inside:
                    if n is not None and count >= n:
                        break
                    count += 1
                inside = True
            else:
                inside = False
            fout.write(line)
    return dst


# --- runs ---------------------------------------------------------------------------------------

def crftk(repo, argv, **kw):
    """``python -m crftk.cli ARGV`` with the crftk of ``repo`` (PYTHONPATH and cwd, as time_tag)."""
    return subprocess.run([sys.executable, "-m", "crftk.cli", *map(str, argv)], env=env_with_repo(str(repo)),
                          cwd=repo, **kw)


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dump_sha256(model, workdir):
    """SHA-256 of ``crftk dump MODEL`` by this checkout's code (the weights, whoever trained them)."""
    out = Path(workdir) / "dump.txt"
    r = crftk(REPO, ["dump", "-o", out, model], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        return "dump failed: " + (r.stderr.strip().splitlines() or ["?"])[-1]
    digest = file_sha256(out)
    out.unlink()
    return digest


def time_train(repo, argv, model, workdir):
    """``crftk train ARGV -m MODEL`` as a whole process: wall seconds, the median seconds per
    iteration of its training record, and the SHA-256 of the model's dump."""
    t = time.perf_counter()
    r = crftk(repo, ["train", *argv, "-m", model], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t
    if r.returncode != 0:
        raise SystemExit(f"crftk train failed ({repo}): " + "\n".join(r.stderr.splitlines()[-5:]))
    info = crftk(repo, ["info", "--json", model], capture_output=True, text=True, check=True)
    training = json.loads(info.stdout)["training"]
    return {"process_s": seconds, "s_per_iter": per_iteration(training["history"]),
            "iterations": training["iterations"], "optimizer_s": training["seconds"],
            "sha256": dump_sha256(model, workdir)}


def interleave(name, repos, repeats, run_one, measures, log):
    """Run ``run_one(side, repo, rep)`` for each repeat on both sides, alternating; the case's runs
    with their load averages, and its summary."""
    runs = []
    for rep in range(repeats):
        for side in sides_in_order(rep):
            load = loadavg()
            r = dict(run_one(side, repos[side], rep), side=side, rep=rep, load=load)
            runs.append(r)
            log(f"{name} {side}: " + ", ".join(f"{m} {r[m]:.4f}" for m in measures if r.get(m) is not None)
                + f" (load {load})")
    figures, hashes, identical = summarise(runs, measures)
    return {"runs": runs, "figures": figures, "sha256": hashes, "identical": identical}


def run(args, repos, workdir):
    workdir = Path(workdir)
    train = first_sentences(Path(args.data) / "train.txt", args.max_sentences, workdir / "train.txt")
    cases = {}
    train_measures = ("s_per_iter", "process_s")
    trainings = []
    if "chain" in args.cases:
        trainings += [(f"chain train -p {p}", ["-p", p, "-t", CHUNK_TEMPLATE, "--max-iter", args.max_iter, train],
                       f"chain-p{p}") for p in (1, 2)]
    if "order2" in args.cases:
        trainings += [(f"order-2 train -p {p}", ["-p", p, "-t", CHUNK_TEMPLATE, "--order", 2,
                                                 "--max-iter", args.order2_iter, train], f"order2-p{p}")
                      for p in (1, 2)]
    if "fcrf" in args.cases:
        n = args.fcrf_sentences if args.max_sentences is None else min(args.fcrf_sentences, args.max_sentences)
        fcrf_train = np_reduce(first_sentences(Path(args.data) / "train.txt", n, workdir / "fcrf-train.txt"),
                               workdir / "fcrf-train.np.txt")
    tag_model = workdir / "tag.model"
    for name, argv, stem in trainings:
        def one(side, repo, rep, argv=argv, stem=stem):
            model = workdir / f"{stem}-{side}.model"
            r = time_train(repo, argv, model, workdir)
            if stem == "chain-p1" and side == "base" and not tag_model.exists():
                shutil.copyfile(model, tag_model)
            return r
        cases[name] = interleave(name, repos, args.repeats, one, train_measures, note)

    if "tag" in args.cases:
        if not tag_model.exists():
            note("training the model to tag (base side, -p 1, not timed)")
            time_train(repos["base"], ["-p", 1, "-t", CHUNK_TEMPLATE, "--max-iter", args.max_iter, train],
                       tag_model, workdir)
        big = workdir / "big.txt"
        make_big(Path(args.data) / "dev.txt", args.copies, big)
        for p in (1, 2):
            def one(side, repo, rep, p=p):
                seconds, peak, digest, cpu = time_tag(tag_model, big, workdir / f"tagged-{side}.txt", p, str(repo))
                return {"process_s": seconds, "peak_mb": peak, "cpu_s": cpu, "sha256": digest}
            name = f"chain tag -p {p}"
            cases[name] = interleave(name, repos, args.repeats, one, ("process_s",), note)

    if "fcrf" in args.cases:
        for inference in ("exact", "trp"):
            argv = ["-p", args.fcrf_threads, "--label-col", 1, "--label-col", 2, "-t", FCRF_TEMPLATE,
                    "--inference", inference, "--max-iter", args.fcrf_iter, fcrf_train]
            name = f"factorial {inference} train -p {args.fcrf_threads}"

            def one(side, repo, rep, argv=argv, inference=inference):
                return time_train(repo, argv, workdir / f"fcrf-{inference}-{side}.model", workdir)
            cases[name] = interleave(name, repos, args.repeats, one, train_measures, note)
    return cases


def rows_of(cases):
    return [{"name": name, "measure": m, "ratio": f["ratio"], "identical": c["identical"]}
            for name, c in cases.items() for m, f in c["figures"].items()]


def git_head(repo):
    r = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--baseline", metavar="DIR", help="a checkout of the old revision, kernels built in place")
    which.add_argument("--compare", metavar="REV", help="build REV in a temporary git worktree as the base")
    ap.add_argument("--keep", action="store_true", help="with --compare: keep REV's worktree (for bench-structures)")
    ap.add_argument("--data", default=DEFAULT_DATA, help="CoNLL-2000 folder (train.txt, dev.txt)")
    ap.add_argument("--cases", default=",".join(CASES), type=lambda s: [x for x in s.split(",") if x],
                    help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-iter", type=int, default=30, help="iterations of the chain training")
    ap.add_argument("--order2-iter", type=int, default=10)
    ap.add_argument("--fcrf-iter", type=int, default=10)
    ap.add_argument("--fcrf-sentences", type=int, default=2000)
    ap.add_argument("--fcrf-threads", type=int, default=2)
    ap.add_argument("--copies", type=int, default=10, help="copies of dev.txt tagged")
    ap.add_argument("--max-sentences", type=int, default=None, help="only the first N sentences of train.txt")
    ap.add_argument("--tolerance", type=float, default=0.03)
    ap.add_argument("--out", type=Path, help="write everything as JSON")
    args = ap.parse_args(argv)
    bad = [c for c in args.cases if c not in CASES]
    if bad:
        ap.error(f"unknown cases {bad}: choose from {', '.join(CASES)}")
    for f in ("train.txt", "dev.txt"):
        if not (Path(args.data) / f).is_file():
            ap.error(f"{Path(args.data) / f} not found (--data or CONLL2000)")
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")

    tmp = Path(tempfile.mkdtemp(prefix="crftk-speed-change-"))
    base = Path(args.baseline).resolve() if args.baseline else tmp / "base-code"
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        if args.compare:
            note(f"building {args.compare} in {base} ...")
            t = time.perf_counter()
            build_rev(args.compare, base)
            note(f"built in {time.perf_counter() - t:.0f}s")
        check_imports(base)
        check_imports(REPO)
        base_commit = git_head(base)
        repos = {"base": base, "head": REPO}
        work = tmp / "work"
        work.mkdir()
        load_start = loadavg()
        cases = run(args, repos, work)
        load_end = loadavg()
    finally:
        if args.compare and not args.keep:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(base)],
                           stdout=subprocess.DEVNULL)
        shutil.rmtree(tmp / "work", ignore_errors=True)
        if not (args.compare and args.keep):
            shutil.rmtree(tmp, ignore_errors=True)

    failures = verdict(rows_of(cases), args.tolerance)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    result = {"config": config, "base": str(base), "base_commit": base_commit,
              "head": str(REPO), "head_commit": git_head(REPO), "started": started, "cpus": os.cpu_count(),
              "load_start": load_start, "load_end": load_end, "cases": cases, "failures": failures}
    print(f"base {result['base_commit']} ({base}), head {result['head_commit']}; median of {args.repeats}, "
          f"seconds; load {load_start} -> {load_end}")
    print(table(cases))
    for f in failures:
        print("FAIL " + f)
    if not failures:
        print(f"every ratio within {1 + args.tolerance:.2f}; every output the same on both sides")
    if args.compare and args.keep:
        print(f"kept {args.compare}'s worktree in {base}: make bench-structures STRUCTURES_BASELINE={base}; "
              f"then git worktree remove --force {base}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
