"""Time (and fingerprint) the lattice kernels on one encoded corpus.

Encodes a CoNLL file with a template once, then times one likelihood-and-gradient
pass, Viterbi, marginals and 5-best over the whole corpus at the given thread
counts (median of --repeats runs each), and prints a SHA-256 of every output so
that two builds (PYTHONPATH pointing at each) can be compared for identical
arithmetic:

    python benchmarks/kernels.py --data ../shared/data/conll2000/train.txt \\
        --template templates/chunking-crfpp.tmpl --threads 1,2 --repeats 5
"""

import argparse
import hashlib
import json
import statistics
import sys
import time

import numpy as np


def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True)
    ap.add_argument("--template", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    import crftk
    from crftk.io.conll import read_corpus
    from crftk.features.space import FeatureSpace
    from crftk.features.templates import read_template
    from crftk.structures.chain import chain_lattices
    sents = read_corpus(a.data)
    space, corpus = FeatureSpace.fit(sents, read_template(a.template))
    lat = chain_lattices(space, corpus)
    w = np.random.default_rng(a.seed).normal(scale=0.3, size=space.n_params)
    out = {"crftk": crftk.__file__, "tokens": corpus.n_tokens, "params": space.n_params, "timings": {}}
    for nt in [int(x) for x in a.threads.split(",")]:
        kernels = {
            "loglik": lambda: lat.loglik(w, corpus.labels, nt),
            "viterbi": lambda: lat.viterbi(w, nt),
            "marginals": lambda: lat.marginals(w, nt),
            "nbest5": lambda: lat.nbest(w, 5, nt),
        }
        for name, run in kernels.items():
            times = []
            for _ in range(a.repeats):
                t = time.perf_counter()
                res = run()
                times.append(time.perf_counter() - t)
            out["timings"][f"{name}@{nt}"] = statistics.median(times)
            if nt == 1:
                out[f"sha_{name}"] = digest(*(r for r in (res if isinstance(res, tuple) else (res,))
                                               if isinstance(r, np.ndarray)),
                                            np.array([r for r in (res if isinstance(res, tuple) else (res,))
                                                      if not isinstance(r, np.ndarray)], dtype=float))
    fwd, bwd = lat.viterbi_scores(w)
    out["sha_viterbi_scores"] = digest(fwd, bwd)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
