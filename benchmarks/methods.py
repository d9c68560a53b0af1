"""Training methods of Sha & Pereira (2003) side by side on CoNLL-2000.

For each method: train with a trace, tag dev.txt, score it; then McNemar's test
(token level) between the best model and each other, and the convergence
figures (penalized log-likelihood and dev F1 against forward-backward passes).

    python benchmarks/methods.py --data ../shared/data/conll2000 --task np --out out/methods-np
    python benchmarks/methods.py --data ../shared/data/conll2000 --task all --out out/methods-all

--task np keeps only NP chunks (every other chunk tag becomes O), as Sha & Pereira.
"""

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> extra `crftk train` options; the batch methods stop by the usual rule (relative
# improvement below 1e-5 over 10 iterations), GIS at 500 iterations (it never gets there:
# Sha & Pereira stopped it at 3,700), the online methods after 20 epochs
METHODS = {
    "lbfgs": ["--algorithm", "lbfgs"],
    "pcg": ["--algorithm", "pcg"],
    "mixed-cg": ["--algorithm", "mixed-cg"],
    "cg": ["--algorithm", "cg"],
    "gis": ["--algorithm", "gis", "--max-iter", "500"],
    "perceptron": ["--algorithm", "perceptron", "--max-iter", "20"],
    "sgd": ["--algorithm", "sgd", "--max-iter", "20"],
    "memm": ["--model-type", "memm"],
    "order2": ["--order", "2"],
}
# the target objective of the "passes to target" column: within this fraction of the best
# objective any first-order CRF method reached (Sha & Pereira's Table 3)
TARGET = 1e-3


def note(msg):
    print(f"[methods {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def np_only(src, dst):
    """Copy a CoNLL-2000 file keeping only NP chunk tags."""
    with open(src, encoding="utf-8") as fin, open(dst, "w", encoding="utf-8") as fout:
        for line in fin:
            cols = line.split()
            if cols and cols[-1] not in ("B-NP", "I-NP"):
                cols[-1] = "O"
            fout.write(" ".join(cols) + "\n" if cols else "\n")


def crftk(*args, capture=False):
    cmd = [sys.executable, "-m", "crftk", *args]
    return subprocess.run(cmd, check=True, text=True, capture_output=capture, cwd=REPO)


def read_trace(path):
    with open(path, encoding="utf-8") as fh:
        rows = [line.rstrip("\n").split("\t") for line in fh][1:]
    return [(int(r[1]), float(r[2]), float(r[3])) for r in rows]     # passes, seconds, objective


def reach_target(out, results):
    """Passes and seconds each first-order CRF batch method needed to come within TARGET
    of the best objective any of them reached ("never" when it did not)."""
    batch = [n for n in ("lbfgs", "pcg", "mixed-cg", "cg", "gis") if n in results]
    traces = {n: read_trace(os.path.join(out, n + ".trace.tsv")) for n in batch}
    if not traces:
        return
    best = min(min(f for _, _, f in t) for t in traces.values())
    target = best + TARGET * abs(best)
    for name, rows in traces.items():
        hit = next(((p, s) for p, s, f in rows if f <= target), None)
        results[name]["target_objective"] = target
        results[name]["target_passes"] = hit[0] if hit else "never"
        results[name]["target_seconds"] = hit[1] if hit else None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=os.environ.get("CONLL2000", os.path.join(REPO, "..", "shared", "data",
                                                                             "conll2000")))
    ap.add_argument("--task", choices=("np", "all"), default="np")
    ap.add_argument("--template", default=os.path.join(REPO, "templates", "chunking-crfpp.tmpl"))
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ", ".join(METHODS))
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--c2", default="1.0")
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    train, dev = (os.path.join(args.data, f) for f in ("train.txt", "dev.txt"))
    if args.task == "np":
        for f in ("train", "dev"):
            np_only(os.path.join(args.data, f + ".txt"), os.path.join(args.out, f + ".txt"))
        train, dev = (os.path.join(args.out, f) for f in ("train.txt", "dev.txt"))

    results = {}
    for name in args.methods.split(","):
        model, trace, tagged = (os.path.join(args.out, name + ext) for ext in (".model", ".trace.tsv", ".dev.tagged"))
        note(f"{args.task}: training {name}")
        start = time.perf_counter()
        crftk("train", "-q", "-t", args.template, "-m", model, "--dev", dev, "--trace", trace, "--c2", args.c2,
              *METHODS[name], train)
        seconds = time.perf_counter() - start
        crftk("tag", "-m", model, "-o", tagged, dev)
        score = json.loads(crftk("eval", "--json", tagged, capture=True).stdout)
        info = json.loads(crftk("info", "--json", model, capture=True).stdout)["training"]
        history = info["history"]
        results[name] = {"f1": score["overall"]["f1"], "token_accuracy": score["token_accuracy"],
                         "f1_last": history[-1].get("dev_f1") if history else None,
                         "sentence_accuracy": score["sentence_accuracy"], "seconds": seconds,
                         "iterations": info["iterations"], "evaluations": info["evaluations"],
                         "chosen_iteration": info["chosen_iteration"], "objective": info["objective"],
                         "stop_reason": info["stop_reason"]}
        note(f"{name}: dev F1 {results[name]['f1']:.2f}, {seconds:.0f}s, {info['iterations']} iterations")
    reach_target(args.out, results)
    best = max(results, key=lambda n: results[n]["f1"])
    for name in results:
        if name != best:
            test = json.loads(crftk("eval", "--json", os.path.join(args.out, best + ".dev.tagged"),
                                    "--mcnemar", os.path.join(args.out, name + ".dev.tagged"),
                                    capture=True).stdout)["mcnemar"]
            results[name]["mcnemar_vs_best"] = test
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as fh:
        json.dump({"task": args.task, "best": best, "results": results}, fh, indent=2)

    print(f"| method ({args.task}) | dev F1 (chosen it.) | dev F1 (last it.) | token acc. | iterations | "
          f"passes | seconds | passes to target | seconds to target | McNemar p vs {best} |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        p = r.get("mcnemar_vs_best", {}).get("p_value")
        last = "-" if r["f1_last"] is None else f"{r['f1_last']:.2f}"
        tp, ts = r.get("target_passes"), r.get("target_seconds")
        print(f"| {name} | {r['f1']:.2f} | {last} | {100 * r['token_accuracy']:.2f} | {r['iterations']} | "
              f"{r['evaluations']} | {r['seconds']:.0f} | {'-' if tp is None else tp} | "
              f"{'-' if ts is None else f'{ts:.0f}'} | {'-' if p is None else f'{p:.3g}'} |")
    batch = [n for n in results if n in ("lbfgs", "pcg", "mixed-cg", "cg", "gis")]
    if batch:
        subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "plot_convergence.py"),
                        "-o", os.path.join(args.out, "convergence"), "--title", f"CoNLL-2000 {args.task}",
                        *[f"{n}={os.path.join(args.out, n + '.trace.tsv')}" for n in batch]], check=False)


if __name__ == "__main__":
    main()
