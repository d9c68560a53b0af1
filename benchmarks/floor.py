#!/usr/bin/env python
"""The memory-traffic floor of chain CRF training, per layout (issue 38, item 4).

One objective evaluation of a chain CRF gathers, for every token, the weights of its state
attribute occurrences' features (32M feature occurrences on CoNLL-2000 with the CRF++
template) and scatters the marginals back onto the gradient. ``crftk._floor.gather_scatter``
does exactly that traffic with no inference, for each layout:

* weights and gradient in float64 (today's) or float32;
* attribute and feature ids int32 (today's) or int64; labels int32 (today's) or uint16
  (uint16 attribute ids need fewer than 65,536 attributes: listed as skipped otherwise);
* attributes in the file's order (first seen in the training data, today's), renumbered
  by frequency (the most frequent first, so that the hot weights share cache lines and
  pages), or at random (the worst locality, for scale).

Beside them, the rest of a training iteration's floor, so that the whole can be compared with
crftk's: the forward-backward alone (``Lattices.loglik`` on the same sentences with no state
attributes: the lattices' arithmetic, the transitions' counts and the labels' scores, with no
gather or scatter) and the optimizer's vector work of one L-BFGS iteration at that many weights
(crftk's own code: the two-loop direction with six float32 pairs, a trial point, its slope, the
penalty, the new pair), which run between evaluations.

For each: the logical bytes one evaluation moves (each occurrence's id and feature range,
each feature occurrence's label and weight in the gather, its label and the read and write of
its gradient entry in the scatter), the median seconds of the bare kernel and the GB/s
it achieves, at 1 and 2 threads; beside it crftk's real evaluation (``Lattices.loglik``,
gather + forward-backward + scatter, today's layout), its ratio to the floor of its layout,
and a stream copy's GB/s for scale. The weights are random (the traffic does not depend on
them); each kernel's gradient buffer is zeroed inside its timing, as the real pass does.

Usage::

    python benchmarks/floor.py [--data DIR] [--template FILE] [--repeats 5] [--threads 1,2]
        [--out benchmarks/results/floor]
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from crftk._floor import gather_scatter                      # noqa: E402
from crftk._lattice import Lattices                          # noqa: E402
from crftk.features.space import FeatureSpace                 # noqa: E402
from crftk.features.templates import read_template            # noqa: E402
from crftk.io.conll import iter_corpus                        # noqa: E402
from crftk.objectives.penalty import Penalty                 # noqa: E402
from crftk.optimize.quasi_newton import _History              # noqa: E402
from crftk.structures.chain import chain_lattices, ranges     # noqa: E402

SHARED = os.path.join(REPO, "..", "shared", "data")
TEMPLATE = os.path.join(REPO, "templates", "chunking-crfpp.tmpl")

# name, weights/gradient, ids, labels, attribute order
LAYOUTS = [
    ("today: float64, int32 ids, file order", np.float64, np.int32, np.int32, "file"),
    ("float64, int64 ids", np.float64, np.int64, np.int32, "file"),
    ("float64, attributes by frequency", np.float64, np.int32, np.int32, "frequency"),
    ("float64, attributes at random", np.float64, np.int32, np.int32, "random"),
    ("float32, int32 ids", np.float32, np.int32, np.int32, "file"),
    ("float32, int32 ids, uint16 labels", np.float32, np.int32, np.uint16, "file"),
    ("float32, uint16 labels, by frequency", np.float32, np.int32, np.uint16, "frequency"),
]


def loadavg():
    return round(os.getloadavg()[0], 2)


def median_seconds(fn, repeats):
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def renumbered(attrs, feat_ptr, feat_label, n_attrs, order_kind, seed=0):
    """The corpus's attribute ids and the feature tables with the attributes renumbered: the
    new attribute i is the old ``order[i]``; the features follow their attribute."""
    if order_kind == "file":
        return attrs, feat_ptr, feat_label, None
    if order_kind == "frequency":
        order = np.argsort(-np.bincount(attrs, minlength=n_attrs), kind="stable")
    else:
        order = np.random.default_rng(seed).permutation(n_attrs)
    new_of_old = np.empty(n_attrs, dtype=np.int64)
    new_of_old[order] = np.arange(n_attrs)
    sizes = np.diff(feat_ptr)[order]
    ptr = np.concatenate([[0], np.cumsum(sizes)])
    perm = ranges(feat_ptr[:-1][order], sizes)       # old feature index of each new one
    return new_of_old[attrs], ptr, feat_label[perm], perm


def layout_bytes(n_tokens, n_occ, n_feat_occ, real, ids, labels):
    """Logical bytes of one gather + one scatter: per token its attribute range (twice), per
    occurrence its id and feature range (twice), per feature occurrence its label (twice), its
    weight (gather) and its gradient entry read and written (scatter)."""
    r, i, b = np.dtype(real).itemsize, np.dtype(ids).itemsize, np.dtype(labels).itemsize
    return 2 * n_tokens * 4 + 2 * n_occ * 3 * i + n_feat_occ * (2 * b + r + 2 * r)


def bare_lattices(corpus, n_labels, n_edge_attrs):
    """The chain kernel over the corpus's sentences with no state attributes: its loglik pass is the
    forward-backward, the transitions' expected counts and the gold labels' scores alone."""
    n = corpus.n_tokens
    return Lattices(corpus.sent_ptr, np.zeros(n + 1, np.int32), np.zeros(0, np.int32), corpus.eattr_ptr,
                    corpus.eattrs, np.zeros(1, np.int32), np.zeros(0, np.int32), n_labels, n_edge_attrs)


class OptimizerStep:
    """The vector work of one L-BFGS iteration at n weights, by crftk's own code: the direction
    from six float32 pairs, a trial point and its slope, the penalty's value and gradient, the new
    pair and the gradient's norm (the evaluation between them left out)."""

    def __init__(self, n, seed=4):
        rng = np.random.default_rng(seed)
        self.history = _History(6, "float32")
        self.x, self.g = rng.standard_normal(n), rng.standard_normal(n)
        for _ in range(6):
            s = 0.01 * rng.standard_normal(n)
            self.history.push_step(self.x + s, self.x, self.g + 2.0 * s, self.g)
        self.penalty = Penalty(1.0)

    def __call__(self):
        d = self.history.direction(self.g)
        xt = d * 1e-3                     # the line search's trial point: x + a d in one array
        xt += self.x
        g = self.g + 2e-3 * d             # (a new array, as the kernel's gradient is)
        value, g = self.penalty(xt, 0.0, g)
        slope = float(g @ d)
        self.history.push_step(xt, self.x, g, self.g)
        return value + slope + float(np.linalg.norm(g))


def measure(args):
    train = os.path.join(args.data, "train.txt")
    space, corpus = FeatureSpace.fit(iter_corpus(train), read_template(args.template))
    lat = chain_lattices(space, corpus)
    L, A, P = space.n_labels, space.n_attrs, lat.n_params
    attrs = np.asarray(corpus.attrs, dtype=np.int64)
    feat_ptr = np.asarray(space.feat_ptr, dtype=np.int64)
    feat_label = np.asarray(space.feat_label, dtype=np.int64)
    n_feat_occ = int((feat_ptr[attrs + 1] - feat_ptr[attrs]).sum())
    sent_ptr = np.asarray(corpus.sent_ptr, dtype=np.int32)
    attr_ptr = np.asarray(corpus.attr_ptr, dtype=np.int32)
    max_len = int(np.diff(sent_ptr).max())
    w64 = np.random.default_rng(1).standard_normal(P) * 0.1
    labels = np.asarray(corpus.labels, dtype=np.int32)
    threads = [int(t) for t in args.threads.split(",")]
    res = {"tokens": corpus.n_tokens, "attributes": A, "labels": L, "params": P,
           "attribute_occurrences": int(attrs.size), "feature_occurrences": n_feat_occ,
           "repeats": args.repeats, "threads": threads, "rows": [], "load": []}
    big = np.ones(1 << 25)
    res["stream_copy_gb_s"] = 2 * big.nbytes / median_seconds(big.copy, args.repeats) / 1e9
    del big
    today_bytes = layout_bytes(corpus.n_tokens, attrs.size, n_feat_occ, np.float64, np.int32, np.int32)
    # every kernel of a repeat runs before the next repeat starts: on a shared machine each
    # median then sees the same spread of load
    runs = []
    for name, rdt, idt, ldt, order_kind in LAYOUTS:
        if idt == np.uint16 and A >= 1 << 16:
            res["rows"].append({"layout": name, "skipped": f"{A} attributes do not fit in uint16"})
            continue
        a2, fp2, fl2, perm = renumbered(attrs, feat_ptr, feat_label, A, order_kind)
        w = (w64[:feat_ptr[-1]] if perm is None else w64[perm]).astype(rdt)
        arrays = (sent_ptr, attr_ptr, a2.astype(idt), fp2.astype(idt), fl2.astype(ldt), w)
        row = {"layout": name, "bytes": layout_bytes(corpus.n_tokens, attrs.size, n_feat_occ, rdt, idt, ldt),
               "times": {n: [] for n in threads}}
        res["rows"].append(row)
        runs.append((row, arrays))
    real_times = {n: [] for n in threads}
    bare = bare_lattices(corpus, L, space.n_edge_attrs)
    w_bare = w64[-bare.n_params:] if bare.n_params else w64[:0]
    bare_times = {n: [] for n in threads}
    step = OptimizerStep(P)
    step_times = []
    lat.loglik(w64, labels, 1)
    for _ in range(args.repeats):
        res["load"].append(loadavg())
        step_times.append(median_seconds(step, 1))
        for n in threads:
            real_times[n].append(median_seconds(lambda: lat.loglik(w64, labels, n), 1))
            bare_times[n].append(median_seconds(lambda: bare.loglik(w_bare, labels, n), 1))
            for row, arrays in runs:
                grad = np.zeros((n, arrays[-1].size), dtype=arrays[-1].dtype)

                def run():
                    grad.fill(0)
                    gather_scatter(*arrays, grad, L, max_len, n)
                row["times"][n].append(median_seconds(run, 1))
    res["crftk_loglik_seconds"] = {n: statistics.median(v) for n, v in real_times.items()}
    res["forward_backward_seconds"] = {n: statistics.median(v) for n, v in bare_times.items()}
    res["optimizer_step_seconds"] = statistics.median(step_times)
    for row, _ in runs:
        row["seconds"] = {n: statistics.median(v) for n, v in row.pop("times").items()}
    res["today_bytes"] = today_bytes
    return res


def table(res):
    threads = res["threads"]
    lines = [f"CoNLL-2000 train.txt: {res['tokens']:,} tokens, {res['attributes']:,} attributes, "
             f"{res['labels']} labels, {res['params']:,} parameters; {res['attribute_occurrences']:,} "
             f"attribute occurrences, {res['feature_occurrences']:,} feature occurrences per evaluation. "
             f"Median of {res['repeats']}; load average {res['load']}; a stream copy (numpy, 1 thread) "
             f"{res['stream_copy_gb_s']:.1f} GB/s.", ""]
    head = "| layout | MB moved per evaluation | " + " | ".join(
        f"{n} thr: s | {n} thr: GB/s" for n in threads) + " |"
    lines += [head, "|---|---:|" + "---:|---:|" * len(threads)]
    for row in res["rows"]:
        if "skipped" in row:
            lines.append(f"| {row['layout']} | skipped: {row['skipped']} |" + " |" * (2 * len(threads) - 1))
            continue
        cells = []
        for n in threads:
            s = row["seconds"][str(n)] if str(n) in row["seconds"] else row["seconds"][n]
            cells += [f"{s:.3f}", f"{row['bytes'] / s / 1e9:.1f}"]
        lines.append(f"| {row['layout']} | {row['bytes'] / 1e6:.0f} | " + " | ".join(cells) + " |")
    cells = []
    real = res["crftk_loglik_seconds"]
    for n in threads:
        s = real[str(n)] if str(n) in real else real[n]
        cells += [f"{s:.3f}", f"{res['today_bytes'] / s / 1e9:.1f}"]
    lines.append(f"| crftk's evaluation (loglik, today's layout: gather + forward-backward + scatter) | "
                 f"{res['today_bytes'] / 1e6:.0f} | " + " | ".join(cells) + " |")
    today = res["rows"][0]["seconds"]
    ratios = ", ".join(f"{(real[n] / today[n]):.2f}x at {n} thread{'s' if n > 1 else ''}" for n in real)
    lines += ["", f"crftk's evaluation against the bare gather + scatter of its layout: {ratios}."]
    if "forward_backward_seconds" in res:
        lines += ["", whole_floor(res, real, today)]
    return "\n".join(lines)


def whole_floor(res, real, today):
    """The floor of a whole training iteration: the bare gather + scatter, the forward-backward
    alone and the optimizer's vector work, beside crftk's evaluation plus that same optimizer work."""
    fb = res["forward_backward_seconds"]
    opt = res["optimizer_step_seconds"]
    lines = ["| threads | bare gather + scatter, s | forward-backward alone, s | optimizer's vector work, s "
             "| floor of an iteration, s | crftk's evaluation + the optimizer's work, s | crftk / floor |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for n in res["threads"]:
        get = (lambda d: d[str(n)] if str(n) in d else d[n])
        floor = get(today) + get(fb) + opt
        crftk = get(real) + opt
        lines.append(f"| {n} | {get(today):.3f} | {get(fb):.3f} | {opt:.3f} | {floor:.3f} | {crftk:.3f} | "
                     f"{crftk / floor:.2f}x |")
    return "\n".join(["The floor of a whole training iteration (the optimizer's work runs on one thread):", ""] + lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=os.path.join(SHARED, "conll2000"))
    ap.add_argument("--template", default=TEMPLATE)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "floor"))
    args = ap.parse_args(argv)
    if not os.path.exists(os.path.join(args.data, "train.txt")):
        sys.exit(f"floor.py: no train.txt in {args.data} (set --data, or CONLL2000= for make)")
    res = measure(args)
    text = table(res)
    print(text)
    if args.out:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out + ".json", "w") as fh:
            json.dump(res, fh, indent=1)
        with open(args.out + ".md", "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
