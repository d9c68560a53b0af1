"""Time the product-chain n-best kernel (crftk._product.nbest) of several builds, interleaved.

Each --kernel is a built crftk/_product*.so (a checkout built in place); every build is loaded
into this one process and run in turn on the same tables, --repeats rounds: medians and minima of
the wall time, tokens per second, and whether every build's paths, scores and counts are the same
bytes. The tables are random but shaped like the exact joint decoding of a pipeline (chains of 44
and 3 labels, sentences of 5-44 tokens, one impossible transition):

    python benchmarks/product_nbest.py --kernel OLD/crftk/_product.cpython-311-x86_64-linux-gnu.so \\
        --kernel crftk/_product.cpython-311-x86_64-linux-gnu.so --k 5 --threads 1,2
"""

import argparse
import hashlib
import statistics
import time

import numpy as np

from common import load_build


def tables(sentences, sizes, seed):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(5, 45, size=sentences)
    sp = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    S = int(np.prod(sizes))
    state = rng.normal(scale=2.0, size=(int(sp[-1]), S))
    trans = [rng.normal(scale=2.0, size=(n, n)) for n in sizes]
    trans[-1][0, -1] = -np.inf
    return sp, state, trans


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernel", action="append", required=True, help="a built _product .so (repeatable)")
    ap.add_argument("--sizes", default="44,3", help="labels of each chain")
    ap.add_argument("--sentences", type=int, default=3000)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--threads", default="1,2", help="thread counts, each timed in turn")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sizes = np.array([int(n) for n in a.sizes.split(",")], dtype=np.int32)
    sp, state, trans = tables(a.sentences, sizes, a.seed)
    builds = [load_build("crftk._product", p) for p in a.kernel]
    n = int(sp[-1])
    for threads in [int(t) for t in a.threads.split(",")]:
        seconds = [[] for _ in builds]
        digests = []
        for rep in range(a.repeats):
            for b, module in enumerate(builds):
                t = time.perf_counter()
                out = module.nbest(sizes, sp, state, trans, a.k, threads)
                seconds[b].append(time.perf_counter() - t)
                if rep == 0:
                    digests.append(hashlib.sha256(b"".join(np.ascontiguousarray(x).tobytes() for x in out)).hexdigest())
        print(f"{n} tokens, chains {a.sizes}, K={a.k}, {threads} thread(s), {a.repeats} rounds")
        for path, s in zip(a.kernel, seconds):
            med = statistics.median(s)
            print(f"  {med:.3f} s median, {min(s):.3f} min, {n / med:,.0f} tokens/s  {path}")
        print("outputs identical" if len(set(digests)) == 1 else "OUTPUTS DIFFER")


if __name__ == "__main__":
    main()
