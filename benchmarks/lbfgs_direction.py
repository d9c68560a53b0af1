#!/usr/bin/env python
"""Time L-BFGS's two-loop recursion (``_History.direction``) alone, against the recursion as it was
before crftk summed its own products (4acffda: each product a block at a time through numpy's BLAS
ddot, each update a separate pass), written out below. Same pairs, same gradient, alternated,
medians of repeated calls; random pairs of the given size in float32, as crftk keeps them.

Usage::

    python benchmarks/lbfgs_direction.py [--size 670448] [--pairs 50] [--repeats 7] [--rounds 3]

670,448 weights and 50 pairs are the factorial CRF of ``make fcrf-speed``; 456,766 and 6 the chain
CRF of ``make bench`` on CoNLL-2000.
"""

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from crftk.optimize.common import BLOCK, as_block, axpy, scratch   # noqa: E402
from crftk.optimize.quasi_newton import _History                   # noqa: E402


def blas_dot(x, y):
    """4acffda's dot64: float64 blocks (float32 ones cast into scratch) through numpy's BLAS."""
    a, b = scratch(np.float64), scratch(np.float64, 1)
    total = 0
    for i in range(0, x.size, BLOCK):
        xb = x[i:i + BLOCK] if x.dtype == np.float64 else as_block(x, i, a)
        yb = y[i:i + BLOCK] if y.dtype == np.float64 else as_block(y, i, b)
        total += float(xb @ yb)
    return total


def unfused_direction(history, g, out):
    """4acffda's two-loop recursion: a product, then an update, each its own pass."""
    q = np.negative(g, out=out)
    alphas = []
    for s, y, rho in zip(reversed(history.s), reversed(history.y), reversed(history.rho)):
        a = rho * blas_dot(s, q)
        alphas.append(a)
        axpy(-a, y, q)
    q *= history.gamma
    for s, y, rho, a in zip(history.s, history.y, history.rho, reversed(alphas)):
        b = rho * blas_dot(y, q)
        axpy(a - b, s, q)
    return q


def positive(text):
    """argparse type: an integer >= 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text}")
    return value


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=positive, default=670_448, help="weights per vector (default: the factorial CRF's)")
    ap.add_argument("--pairs", type=positive, default=50, help="L-BFGS pairs (default: a factorial CRF's 50)")
    ap.add_argument("--repeats", type=positive, default=7, help="calls per round and version (median)")
    ap.add_argument("--rounds", type=positive, default=3, help="alternations of the two versions")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    history = _History(args.pairs, "float32")
    for _ in range(args.pairs):
        s = rng.standard_normal(args.size)
        history.push(s, 2.0 * s + 0.1 * rng.standard_normal(args.size))
    g = rng.standard_normal(args.size)
    out = np.empty_like(g)
    versions = {"before (BLAS products, unfused)": lambda: unfused_direction(history, g, out),
                "now (crftk's products, fused)": lambda: history.direction(g)}
    times = {name: [] for name in versions}
    for _ in range(args.rounds):
        for name, run in versions.items():
            for _ in range(args.repeats):
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    print(f"{args.size:,} weights, {args.pairs} float32 pairs; median of {args.repeats} x {args.rounds} "
          "alternated calls")
    for name, ts in times.items():
        print(f"  {name}: {statistics.median(ts) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
