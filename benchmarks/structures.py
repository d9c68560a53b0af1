#!/usr/bin/env python
"""Whole-process `crftk tag` speed of the structures beyond one CRF (issue 19, goal 4).

On CoNLL-2000 dev.txt with the chunk column reduced to B-NP/I-NP/O (as in make fcrf-table1),
concatenated ``--copies`` times (20: 887k tokens), ``crftk tag -m MODEL -p T -o OUT BIG`` as a
user runs it, for:

* **factorial**: a factorial CRF of POS and NP chunks (templates/fcrf-np.tmpl), tagged with
  exact inference (its own) and with ``--inference trp``;
* **bag**: the bag of templates/conll2000-np-bag-base.tmpl and conll2000-np-bag-pos.tmpl (words,
  tags, spelling tests and word classes: multi-valued ``%shape``), tagged with seq-poe;
* **pipeline**: a POS CRF (templates/fcrf-pos.tmpl) feeding an NP CRF
  (templates/fcrf-np-cascade.tmpl), ``crftk compose``, tagged with ``--decode cascade`` and
  ``--decode joint`` (the NP CRF reads the POS tags at offsets -3..3: joint decoding rescores
  the 20 best POS labelings, in Python);
* **pipeline, exact joint**: the same POS CRF feeding an NP CRF that reads the POS tag at offset 0
  only (templates/chunking-pos0.tmpl, trained here), ``--decode joint``: exact, over the product
  of the label sets.

The factorial model and the pipeline are those ``make fcrf-table1`` trains on all of train.txt
(``--fcrf-model``, ``--pipeline``: by default out/fcrf/8936/fcrf.model and cascade.pipeline);
when they are missing they are trained here with ``--iterations`` L-BFGS iterations, as is the
bag, and kept in ``--out``. Use trained models: max-product TRP on a model after 30 iterations
needs 5x the sweeps (dev.txt: 5.3 s against 1.1 s). Each command runs at 1 and 2 threads,
``--repeats`` times, interleaved with the same command on the ``--baseline`` checkout (built in
place) when one is given; medians, peak RSS, and the SHA-256 of each output (all must agree between checkouts and thread counts).
The machine's 1-minute load is recorded with each run: compare figures of one run only.

Usage::

    python benchmarks/structures.py [--data DIR] [--out out/structures] [--copies 20]
        [--repeats 3] [--iterations 100] [--fcrf-model M] [--pipeline P] [--baseline DIR]
        [--results benchmarks/results/structures]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from compose import step                    # a crftk command, logged, skipped when its output exists
from fcrf import TEMPLATES, np_reduce
from pipeline import loadavg, make_big, time_tag

REPO = Path(__file__).resolve().parents[1]

CASES = [  # name, model, extra tag options
    ("factorial, exact", "fcrf", []),
    ("factorial, trp", "fcrf", ["--inference", "trp"]),
    ("bag of 2, seq-poe", "bag", []),
    ("pipeline, cascade", "pipeline", ["--decode", "cascade"]),
    ("pipeline, joint", "pipeline", ["--decode", "joint"]),
    ("pipeline (POS at offset 0), exact joint", "pipeline0", ["--decode", "joint"]),
]


def models(data, out, iterations, fcrf_model, pipeline):
    """The models: the given ones where they exist, the others trained (skipped when present)."""
    out.mkdir(parents=True, exist_ok=True)
    train = np_reduce(data / "train.txt", out / "train.np.txt")
    log = out / "train.log"
    common = ["--max-iter", iterations, "--c2", 0.05]
    paths = {k: out / f"{k}.model" for k in ("fcrf", "bag", "pos", "np", "pipeline", "np0", "pipeline0")}
    if Path(fcrf_model).exists():
        paths["fcrf"] = Path(fcrf_model)
    step(paths["fcrf"], ["train", "-t", TEMPLATES["fcrf"], "-m", paths["fcrf"], "--label-col", 1, "--label-col", 2,
                         *common, train], log)
    step(paths["bag"], ["bag", "-t", "templates/conll2000-np-bag-base.tmpl", "-t",
                        "templates/conll2000-np-bag-pos.tmpl", "-m", paths["bag"], "--max-iter", iterations, train],
         log)
    given = Path(pipeline).exists()
    if given:                           # make fcrf-table1 keeps its stages beside it
        paths["pipeline"] = Path(pipeline)
        paths["pos"] = Path(pipeline).parent / "pos.model"
    step(paths["pos"], ["train", "-t", TEMPLATES["pos"], "-m", paths["pos"], "--label-col", 1, *common, train], log)
    if not given:
        step(paths["np"], ["train", "-t", TEMPLATES["np"], "-m", paths["np"], "--label-col", 2, *common, train], log)
        step(paths["pipeline"], ["compose", "-m", paths["pos"], "-m", paths["np"], "--feed", 1, "-o",
                                 paths["pipeline"]], log)
    step(paths["np0"], ["train", "-t", "templates/chunking-pos0.tmpl", "-m", paths["np0"], *common, train], log)
    step(paths["pipeline0"], ["compose", "-m", paths["pos"], "-m", paths["np0"], "--feed", 1, "-o",
                              paths["pipeline0"]], log)
    return paths


def run(args):
    out = Path(args.out)
    cases = [c for c in CASES if args.cases is None or c[0] in args.cases]
    paths = models(Path(args.data), out, args.iterations, args.fcrf_model, args.pipeline)
    work = Path(tempfile.mkdtemp(prefix="crftk-structures-"))
    big = work / "big.txt"
    make_big(np_reduce(Path(args.data) / "dev.txt", out / "dev.np.txt"), args.copies, big)
    n_tokens = sum(1 for line in open(big, "rb") if line.strip())
    repos = {"after": str(REPO)}
    if args.baseline:
        repos["before"] = args.baseline
    res = {"config": {"copies": args.copies, "tokens": n_tokens, "repeats": args.repeats,
                      "iterations": args.iterations, "baseline": args.baseline, "cpus": os.cpu_count(),
                      "models": {model: str(paths[model]) for _, model, _ in cases},
                      "started": time.strftime("%Y-%m-%d %H:%M:%S")}, "runs": {}}
    try:
        for rep in range(args.repeats):
            for name, model, extra in cases:
                for threads in (1, 2):
                    for which, repo in repos.items():
                        la = loadavg()
                        s, peak, digest, cpu = time_tag(paths[model], big, work / "out.txt", threads, repo, extra)
                        key = f"{name}|{which}|{threads}"
                        res["runs"].setdefault(key, []).append({"seconds": s, "peak_mb": peak, "sha256": digest,
                                                                "cpu_seconds": cpu, "load": la})
                        print(f"{rep} {key}: {s:.2f} s ({n_tokens / s / 1000:.0f}k tok/s), peak {peak:.0f} MB, "
                              f"load {la}", flush=True)
    finally:
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    for name, _, _ in cases:
        digests = {r["sha256"] for k, runs in res["runs"].items() if k.startswith(name + "|") for r in runs}
        res.setdefault("identical", {})[name] = len(digests) == 1
    Path(args.results).parent.mkdir(parents=True, exist_ok=True)
    Path(args.results + ".json").write_text(json.dumps(res, indent=1) + "\n")
    Path(args.results + ".md").write_text(table(res))
    print(table(res))


def table(res):
    cfg = res["config"]
    n = cfg["tokens"]
    both = cfg["baseline"] is not None
    lines = [f"# Tagging speed of factorial models, bags and pipelines ({time.strftime('%Y-%m-%d')})", "",
             f"`crftk tag` whole process on CoNLL-2000 dev.txt (NP chunks) x {cfg['copies']} = {n:,} tokens; "
             f"median of {cfg['repeats']} runs{', interleaved with the baseline checkout' if both else ''}; "
             f"models: {', '.join(sorted(set(cfg['models'].values())))} (`python benchmarks/structures.py`). "
             "Seconds (thousand tokens/s), peak RSS.", ""]
    head = "| model, decoding | threads | " + ("before: s (k tok/s), MB | " if both else "") + \
        "s (k tok/s), MB | outputs identical |"
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    for name in res["identical"]:
        for threads in (1, 2):
            cells = []
            for which in (["before"] if both else []) + ["after"]:
                runs = res["runs"].get(f"{name}|{which}|{threads}", [])
                s = statistics.median(r["seconds"] for r in runs)
                peak = statistics.median(r["peak_mb"] for r in runs)
                cells.append(f"{s:.2f} ({n / s / 1000:.0f}k), {peak:.0f}")
            lines.append(f"| {name} | {threads} | " + " | ".join(cells) +
                         f" | {'yes' if res['identical'][name] else 'NO'} |")
    loads = [r["load"] for runs in res["runs"].values() for r in runs]
    lines += ["", f"1-minute load during the runs: {min(loads):.2f} to {max(loads):.2f}.", ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=str(REPO.parent / "shared" / "data" / "conll2000"))
    p.add_argument("--out", default=str(REPO / "out" / "structures"))
    p.add_argument("--copies", type=int, default=20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--iterations", type=int, default=100, help="L-BFGS iterations of the models trained here")
    p.add_argument("--fcrf-model", default=str(REPO / "out" / "fcrf" / "8936" / "fcrf.model"))
    p.add_argument("--pipeline", default=str(REPO / "out" / "fcrf" / "8936" / "cascade.pipeline"))
    p.add_argument("--baseline", default=None, help="another crftk checkout, built in place: the 'before' column")
    p.add_argument("--results", default=str(REPO / "benchmarks" / "results" / "structures"))
    p.add_argument("--cases", type=lambda x: x.split(";"), default=None,
                   help="the cases to run, by name, separated by ';' (default: all)")
    args = p.parse_args(argv)
    unknown = set(args.cases or ()) - {c[0] for c in CASES}
    if unknown:
        p.error(f"unknown cases {sorted(unknown)}: choose from {'; '.join(c[0] for c in CASES)}")
    if not (Path(args.data) / "train.txt").exists():
        sys.exit(f"CoNLL-2000 not found in {args.data}: give --data DIR")
    run(args)


if __name__ == "__main__":
    main()
