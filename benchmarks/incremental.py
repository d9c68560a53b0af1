"""Incremental training on CoNLL-2000 (make incremental): a model trained on the first half of
train.txt, continued with --init on the second half (--init-space grow, and keep), against one
trained on all of train.txt at once; dev.txt chunk F1 of each, per algorithm.

    python benchmarks/incremental.py [--data CONLL2000_DIR] [--out out/incremental]
                                     [--algorithms lbfgs perceptron] [--max-iter 500] [--epochs 10]

Writes benchmarks/results/incremental.md (and .json) unless --no-publish.
"""

import argparse
import json
import os
import re
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(_HERE))
sys.path.insert(0, _HERE)

from common import REPO, corpus_files, crftk_run, eval_json, note, publish  # noqa: E402
from crftk.model import Model  # noqa: E402

TEMPLATE = os.path.join(REPO, "templates", "chunking-crfpp.tmpl")
RESULTS = os.path.join(REPO, "benchmarks", "results")


def split_halves(train, out):
    """The first and second half of train.txt's sentences, as two files."""
    with open(train, encoding="utf-8") as fh:
        blocks = [b for b in fh.read().split("\n\n") if b.strip()]
    half = len(blocks) // 2
    labels = {line.split()[-1] for b in blocks[:half] for line in b.splitlines() if line.strip()}
    # keep refuses a label its model lacks: its second half leaves out the sentences holding one
    known = [b for b in blocks[half:] if all(line.split()[-1] in labels for line in b.splitlines() if line.strip())]
    paths = []
    for name, part in (("first.txt", blocks[:half]), ("second.txt", blocks[half:]), ("second-known.txt", known)):
        path = os.path.join(out, name)
        with open(path, "w", encoding="utf-8") as fh:
            fh.write("\n\n".join(b.strip("\n") for b in part) + "\n\n")
        paths.append(path)
    return paths, half, len(blocks) - half, len(blocks) - half - len(known)


def run(name, args, dev, out, reuse=False):
    """Train (args), tag dev.txt, score it: a row of the results. ``reuse``: a run whose model and
    tagged dev.txt are already in ``out`` (from the same arguments) is read, not trained again."""
    model = os.path.join(out, name + ".model")
    log = os.path.join(out, name + ".log")
    tagged = os.path.join(out, name + ".dev")
    wall = None
    if not (reuse and os.path.exists(model) and os.path.exists(tagged)):
        wall, _ = crftk_run(["train", "-m", model, *args], log, mode="w")
        crftk_run(["tag", "-m", model, "-o", tagged, dev], log)
    score = eval_json(tagged)["overall"]
    info = Model.load(model).info
    with open(log, encoding="utf-8") as fh:
        added = [line.strip() for line in fh if line.startswith("--init-space")]
    n_params = Model.load(model).space.n_params
    note("incremental", f"{name}: F1 {score['f1']:.2f}, {n_params:,} parameters, {info['iterations']} iterations")
    return {"name": name, "f1": score["f1"], "precision": score["precision"], "recall": score["recall"],
            "params": n_params, "iterations": info["iterations"], "converged": info["converged"],
            "seconds": info["seconds"], "wall": wall, "added": added}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="CoNLL-2000 folder (default $CONLL2000 or ../shared/data/conll2000)")
    ap.add_argument("--out", default=os.path.join(REPO, "out", "incremental"))
    ap.add_argument("--algorithms", nargs="+", default=["lbfgs", "perceptron"], choices=["lbfgs", "perceptron"])
    ap.add_argument("--max-iter", type=int, default=500, help="L-BFGS: most iterations of each run")
    ap.add_argument("--epochs", type=int, default=10, help="perceptron: epochs of each run")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reuse", action="store_true",
                    help="read the runs already in --out (same options) instead of training them again")
    ap.add_argument("--no-publish", action="store_true", help="do not write benchmarks/results/incremental.*")
    a = ap.parse_args()
    train, dev = corpus_files("CONLL2000", ["train.txt", "dev.txt"], a.data, "incremental")
    os.makedirs(a.out, exist_ok=True)
    (first, second, known), n_first, n_second, n_dropped = split_halves(train, a.out)
    rows = {}
    for algorithm in a.algorithms:
        common = ["--algorithm", algorithm, "-p", str(a.threads)]
        common += ["--max-iter", str(a.max_iter if algorithm == "lbfgs" else a.epochs)]
        runs = [("half", ["-t", TEMPLATE, *common, first]),
                ("grow", ["--init", os.path.join(a.out, f"{algorithm}-half.model"), *common, second]),
                ("keep", ["--init", os.path.join(a.out, f"{algorithm}-half.model"), "--init-space", "keep",
                          *common, known]),
                ("second", ["-t", TEMPLATE, *common, second]),
                ("all", ["-t", TEMPLATE, *common, train])]
        rows[algorithm] = [run(f"{algorithm}-{name}", args, dev, a.out, a.reuse) for name, args in runs]
    text = report(rows, n_first, n_second, n_dropped, a)
    if not a.no_publish:
        publish(text, os.path.join(RESULTS, "incremental.md"))
        with open(os.path.join(RESULTS, "incremental.json"), "w") as fh:
            json.dump({"first_sentences": n_first, "second_sentences": n_second, "keep_dropped": n_dropped,
                       "runs": rows}, fh, indent=1)
    else:
        print(text)


ROWS = {"half": "first half only", "grow": "first half, then --init on the second (grow)",
        "keep": "first half, then --init on the second (keep, known labels)",
        "second": "second half only (from the template)", "all": "all of train.txt at once"}


def report(rows, n_first, n_second, n_dropped, a):
    lines = ["# Incremental training: --init on new data (CoNLL-2000)", "",
             f"`make incremental` = `python benchmarks/incremental.py --max-iter {a.max_iter} --epochs {a.epochs} "
             f"--threads {a.threads}`: `templates/chunking-crfpp.tmpl`, c2=1 for L-BFGS; train.txt cut in two "
             f"halves by sentences ({n_first:,} and {n_second:,}). Each continued model starts from the first "
             "half's weights; grow adds the second half's attributes, state features and labels (every new "
             "weight 0), keep trains the first half's space only, and refuses the second half's labels the first "
             f"lacks (B-UCP, I-UCP): its run leaves out the {n_dropped} sentences holding one. Chunk F1 on "
             "dev.txt; seconds are the optimizer's of that run alone (the continued runs do not count the "
             "first half's).", ""]
    for algorithm, runs in rows.items():
        what = "L-BFGS" if algorithm == "lbfgs" else "averaged perceptron"
        unit = "iterations" if algorithm == "lbfgs" else "epochs"
        lines += [f"## {what}", "", f"| model | dev F1 | P | R | parameters | {unit} | seconds |",
                  "|---|---|---|---|---|---|---|"]
        for r in runs:
            it = f"{r['iterations']}{'' if r['converged'] or algorithm != 'lbfgs' else ' (cap)'}"
            lines.append(f"| {ROWS[r['name'].split('-', 1)[1]]} | {r['f1']:.2f} | {r['precision']:.2f} | "
                         f"{r['recall']:.2f} | {r['params']:,} | {it} | {r['seconds']:.0f} |")
        by = {r["name"].split("-", 1)[1]: r for r in runs}
        lines += [""] + [f"Log of the grow run: `{re.sub(r'`', '', line)}`" for line in by["grow"]["added"]]
        gap = {other: by["grow"]["f1"] - by[other]["f1"] for other in ("all", "second", "keep")}
        lines += ["", f"grow - all at once: {gap['all']:+.2f} F1; grow - second half only: {gap['second']:+.2f}; "
                  f"grow - keep: {gap['keep']:+.2f}.", ""]
    lines += ["With c2 > 0 the L-BFGS objective is strictly convex: run to convergence, a continued model "
              "reaches the optimum of the second half's objective over its space whatever its starting "
              "weights (the first half's attributes that the second lacks decay to 0 under L2); it differs "
              "from the second half's own model by the state features the first half adds on shared "
              "attributes and by the stopping rule (--epsilon); the start only changes how many "
              "iterations it takes. What the first half contributes then is the vocabulary "
              "of the space (keep) and nothing of its weights; an online "
              "method (the perceptron) or a capped --max-iter keeps part of them.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
