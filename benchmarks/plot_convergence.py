"""Convergence figures in the style of Sha & Pereira (2003), Figures 2 and 3.

Reads `crftk train --trace` files and draws (1) the penalized log-likelihood
against forward-backward passes and (2) dev F1 against passes, one curve per
training method. Needs matplotlib (pip install 'crftk[plot]'); crftk itself
does not.

    python benchmarks/plot_convergence.py -o docs/convergence LABEL=TRACE.tsv ...
"""

import argparse
import csv
import itertools
import sys


def read_trace(path):
    with open(path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    passes = [int(r["passes"]) for r in rows]
    objective = [float(r["objective"]) for r in rows]
    f1 = [float(r["dev_f1"]) if r.get("dev_f1") else None for r in rows]
    return passes, objective, f1


def save(fig, ax, args, title, suffix):
    """The finish both figures share: x range, title, legend, PNG file."""
    if args.max_passes:
        ax.set_xlim(0, args.max_passes)
    ax.set_title((args.title + ": " if args.title else "") + title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.output + suffix, dpi=120)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("traces", nargs="+", metavar="LABEL=FILE", help="a trace file and its curve label")
    ap.add_argument("-o", "--output", required=True, help="prefix of the PNG files (-objective.png, -f1.png)")
    ap.add_argument("--title", default="", help="title prefix")
    ap.add_argument("--max-passes", type=int, default=None, help="cut the x axis here")
    args = ap.parse_args(argv)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot_convergence: matplotlib is needed for the figures (pip install matplotlib)")

    curves = []
    for spec in args.traces:
        label, _, path = spec.partition("=")
        if not path:
            label, path = spec, spec
        curves.append((label, *read_trace(path)))

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    starts, tops = [], []
    for label, passes, objective, _ in curves:
        # the best value reached so far: line-search trials that overshoot are not progress
        best = [-f for f in itertools.accumulate(objective, min)]
        ax.plot(passes, best, label=label)
        starts.append(best[0])
        tops.append(best[-1])
    ax.set_xlabel("forward-backward passes")
    ax.set_ylabel("penalized log-likelihood (best so far)")
    if starts:
        top = max(tops)
        ax.set_ylim(min(starts), top + 0.02 * (top - min(starts)))
    save(fig, ax, args, "convergence", "-objective.png")

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    best_f1 = None
    for label, passes, _, f1 in curves:
        pts = [(p, f) for p, f in zip(passes, f1) if f is not None]
        if pts:
            ax.plot([p for p, _ in pts], [f for _, f in pts], label=label)
            best_f1 = max([f for _, f in pts] + ([best_f1] if best_f1 is not None else []))
    ax.set_xlabel("forward-backward passes")
    ax.set_ylabel("dev F1")
    if best_f1 is not None:
        ax.set_ylim(best_f1 - 10.0, best_f1 + 0.5)     # the first passes score near zero
    save(fig, ax, args, "F1 during training", "-f1.png")
    print(f"wrote {args.output}-objective.png and {args.output}-f1.png")


if __name__ == "__main__":
    main()
