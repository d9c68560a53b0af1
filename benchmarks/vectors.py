"""The cost of real-valued template lines (%num, %vec) on the compiled read/encode path.

On CoNLL-2000 (train.txt, dev.txt x 5) with templates/chunking-crfpp.tmpl, the same template
plus one %num line, and plus one %vec line: `crftk tag` tokens/s, whole process (best of
--repeats, the three interleaved), and the seconds of FeatureSpace.fit + encode on train.txt.

Everything it makes goes to --work (never into the repository): the corpus with a numeric
column inserted before the label (column 2: the word's length / 10, so that the three
templates read the same files), the dev set five times, and a vector file of random vectors
(dimension 50, seed 0, word2vec text format with its header) for the 20,000 most frequent
words of train.txt, deterministic: the same bytes on every run.

    python benchmarks/vectors.py --work /tmp/vectors-bench [--data DIR] [--repeats 3]
"""

import argparse
import collections
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, corpus_files, note, publish  # noqa: E402

N_WORDS = 20_000
DIM = 50


def with_number(src, dst, copies=1):
    """The CoNLL file with a numeric column before the label (len(word) / 10), ``copies`` times."""
    out = []
    with open(src, encoding="utf-8") as fh:
        for line in fh:
            f = line.split()
            out.append(" ".join(f[:-1] + [f"{len(f[0]) / 10:g}", f[-1]]) + "\n" if f else "\n")
    with open(dst, "w", encoding="utf-8") as fh:
        for _ in range(copies):
            fh.writelines(out)


def make_vectors(train, path, n_words=N_WORDS, dim=DIM, seed=0):
    """Random vectors for the n_words most frequent words of train (ties: first seen first)."""
    counts = collections.Counter()
    with open(train, encoding="utf-8") as fh:
        for line in fh:
            f = line.split()
            if f:
                counts[f[0]] += 1
    words = [w for w, _ in counts.most_common(n_words)]
    table = np.random.default_rng(seed).normal(scale=0.5, size=(len(words), dim)).astype(np.float32)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(f"{len(words)} {dim}\n")
        for w, row in zip(words, table):
            fh.write(w + " " + " ".join(f"{v:.5f}" for v in row) + "\n")
    return len(words)


def run(args, env):
    subprocess.run([sys.executable, "-m", "crftk", *args], check=True, cwd=REPO, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="folder for the generated files and models")
    ap.add_argument("--data", help="folder of train.txt and dev.txt (default $CONLL2000 or ../shared/data/conll2000)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    train_src, dev_src = corpus_files("CONLL2000", ["train.txt", "dev.txt"], a.data, "vectors")
    os.makedirs(a.work, exist_ok=True)
    train, dev5, vec = (os.path.join(a.work, n) for n in ("train.txt", "dev5.txt", "vectors.txt"))
    with_number(train_src, train)
    with_number(dev_src, dev5, copies=5)
    n_vec = make_vectors(train_src, vec)
    base = open(os.path.join(REPO, "templates", "chunking-crfpp.tmpl"), encoding="utf-8").read()
    templates = {"crfpp": base, "crfpp+num": base + "Un0:%num[0,2]\n", "crfpp+vec": base + "Uv0:%vec[0,0,emb]\n"}
    env = dict(os.environ, PYTHONPATH=REPO)
    models = {}
    for name, text in templates.items():
        tpath = os.path.join(a.work, name + ".tmpl")
        with open(tpath, "w", encoding="utf-8") as fh:
            fh.write(text)
        models[name] = os.path.join(a.work, name + ".model")
        note("vectors", f"training {name} (5 iterations)")
        run(["train", "-t", tpath, "-m", models[name], "--max-iter", "5", "-p", str(a.threads),
             *(["--vectors", f"emb={vec}"] if "vec" in name else []), train], env)

    # fit + encode of train.txt, in this process
    sys.path.insert(0, REPO)
    from crftk.features.space import FeatureSpace
    from crftk.features.templates import parse_template
    from crftk.features.vectors import attach_vectors
    from crftk.io.conll import iter_corpus
    fit_s = {}
    for name, text in templates.items():
        t = attach_vectors(parse_template(text), {"emb": vec} if "vec" in name else {})
        best = None
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            space, corpus = FeatureSpace.fit(iter_corpus(train), t)
            best = min(best or 1e9, time.perf_counter() - t0)
        fit_s[name] = (best, corpus.n_tokens, int(corpus.attrs.size))

    n_tokens = sum(1 for line in open(dev5, encoding="utf-8") if line.strip())
    tag_s = {name: [] for name in templates}
    for _ in range(a.repeats):              # interleaved: the machine's load hits all alike
        for name in templates:
            t0 = time.perf_counter()
            run(["tag", "-m", models[name], "-p", str(a.threads), "-o", os.devnull, dev5], env)
            tag_s[name].append(time.perf_counter() - t0)

    rows = [f"vectors: {n_vec:,} words x {DIM} (random, seed 0); tag input: dev.txt x 5 = {n_tokens:,} tokens, "
            f"{a.threads} threads, best of {a.repeats}",
            "",
            "| template | tag tokens/s (whole process) | tag s | fit+encode train.txt s | attribute occurrences (train) |",
            "|---|---|---|---|---|"]
    for name in templates:
        s = min(tag_s[name])
        fs, _, occ = fit_s[name]
        rows.append(f"| {name} | {n_tokens / s:,.0f} | {s:.2f} | {fs:.2f} | {occ:,} |")
    publish("\n".join(rows), os.path.join(REPO, "benchmarks", "results", "vectors.md"))


if __name__ == "__main__":
    main()
