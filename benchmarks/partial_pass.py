"""Cost of one training evaluation with partial labels against the same evaluation fully labeled.

The likelihood pass (value and gradient, what every batch optimizer calls once or more per
iteration) on the encoded training corpus, at the same weights: fully labeled, then with a share
of the labels unknown (the partial annotation's marginal likelihood: a second, restricted
forward-backward per partial sentence), then with the expected entity ratio's moments too.
Runs are interleaved (full, partial, ratio, full, ...) and the median of each is reported, as
seconds of CPU time of the process at one thread (steady on a shared machine) and wall time at
the asked threads.

    python3 benchmarks/partial_pass.py --data ../shared/data [--repeats 7] [--threads 2]
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import DATA, publish  # noqa: E402
from crftk.features.space import FeatureSpace  # noqa: E402
from crftk.features.templates import parse_template  # noqa: E402
from crftk.io.conll import iter_corpus  # noqa: E402
from crftk.structures.chain import chain_lattices  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TASKS = [("CoNLL-2000, chunking-crfpp.tmpl", "conll2000/train.txt", "templates/chunking-crfpp.tmpl"),
         ("CoNLL-2003, conll2003-ner.tmpl", "conll2003/eng.train", "templates/conll2003-ner.tmpl")]


def masks(gold, L, outside, rng):
    """(name, labels, allowed) of each partial annotation measured."""
    N = gold.size
    out = []
    for share in (0.1, 0.5, 0.8):
        hide = rng.random(N) < share
        out.append((f"{share:.0%} of the tokens unknown", hide))
    if outside is not None:
        entity = gold != outside
        out.append(("every O token and half the entity tokens unknown (setting d)",
                    ~entity | (entity & (rng.random(N) < 0.5))))
    result = []
    for name, hide in out:
        labels = gold.copy()
        labels[hide] = -1
        allowed = np.zeros((N, L), np.uint8)
        allowed[np.arange(N), gold] = 1
        allowed[hide] = 1
        result.append((name, labels, allowed))
    return result


def timed(fn, clock):
    t = clock()
    fn()
    return clock() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DATA, help="folder holding conll2000/ and conll2003/ (default ../shared/data)")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "partial-pass.md"))
    args = ap.parse_args()
    rng = np.random.default_rng(35)
    rows = ["| corpus | annotation | full s (CPU, 1 thread) | partial | ratio | + entity ratio moments | "
            f"wall s at {args.threads} threads: full / partial |", "|---|---|---|---|---|---|---|"]
    for title, rel, template in TASKS:
        path = os.path.join(args.data, rel)
        if not os.path.exists(path):
            sys.exit(f"partial_pass: {path} not found (set --data)")
        with open(os.path.join(REPO, template)) as fh:
            tmpl = parse_template(fh.read(), template)
        space, corpus = FeatureSpace.fit(iter_corpus(path), tmpl)
        lat = chain_lattices(space, corpus)
        L = space.n_labels
        gold = corpus.labels.astype(np.int32)
        w = rng.normal(0.0, 0.1, lat.n_params)
        outside = space.labels.index("O") if "O" in space.labels else None
        entity = np.array([lab != "O" for lab in space.labels], dtype=np.float64)
        for name, labels, allowed in masks(gold, L, outside, rng):
            runs = {"full": (lambda: lat.loglik(w, gold, 1)),
                    "partial": (lambda: lat.loglik(w, labels, 1, allowed=allowed)),
                    "ratio": (lambda: lat.loglik(w, labels, 1, allowed=allowed, entity=entity)),
                    "full_mt": (lambda: lat.loglik(w, gold, args.threads)),
                    "partial_mt": (lambda: lat.loglik(w, labels, args.threads, allowed=allowed))}
            times = {k: [] for k in runs}
            for _ in range(args.repeats):
                for key, fn in runs.items():
                    clock = time.perf_counter if key.endswith("_mt") else time.process_time
                    times[key].append(timed(fn, clock))
            med = {k: float(np.median(v)) for k, v in times.items()}
            rows.append(f"| {title} | {name} | {med['full']:.3f} | {med['partial']:.3f} | "
                        f"{med['partial'] / med['full']:.2f}x | {med['ratio']:.3f} ({med['ratio'] / med['full']:.2f}x) | "
                        f"{med['full_mt']:.3f} / {med['partial_mt']:.3f} |")
            print(rows[-1], file=sys.stderr, flush=True)
    publish("\n".join(rows), args.out)


if __name__ == "__main__":
    main()
