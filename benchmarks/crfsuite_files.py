"""`crftk train --format crfsuite` against python-crfsuite on the same CRFsuite data files.

The files are made by CRFsuite's own attribute extractor for chunking (example/chunking.py of
the CRFsuite sources, which python-crfsuite's sdist bundles; `make bench-crfsuite-files` fetches
it with pip, nothing of it is kept in the repository) from CoNLL-2000 train.txt and dev.txt.
Both trainers read the same file with the same settings (L-BFGS, c2=1, 100 iterations, every
transition): python-crfsuite's Trainer (one thread, as CRFsuite has) and `crftk train --format
crfsuite` at 1 and 2 threads; `crftk tag --format crfsuite --reference` and a python-crfsuite
Tagger tag dev, and `crftk eval` scores both. Runs take turns; the table gives medians.

    python benchmarks/crfsuite_files.py --extractor DIR/example/chunking.py --data ../shared/data/conll2000
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import REPO, corpus_files, crftk, note, publish  # noqa: E402

SETTINGS = ["--c2", "1", "--max-iter", "100", "--epsilon", "0"]


def extract(extractor, conll, out):
    with open(conll, "rb") as src, open(out, "wb") as dst:
        subprocess.run([sys.executable, extractor], stdin=src, stdout=dst, check=True)


def read_items(path):
    """(attribute lists, labels) per sequence of a CRFsuite data file without escapes."""
    xs, ys, x, y = [], [], [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                if x:
                    xs.append(x)
                    ys.append(y)
                    x, y = [], []
                continue
            fields = line.split("\t")
            y.append(fields[0])
            x.append([a for a in fields[1:] if a])
    if x:
        xs.append(x)
        ys.append(y)
    return xs, ys


def run_pycrfsuite(train, dev, work):
    import pycrfsuite
    X, Y = read_items(train)
    t0 = time.perf_counter()
    trainer = pycrfsuite.Trainer(verbose=False)
    for x, y in zip(X, Y):
        trainer.append(x, y)
    trainer.set_params({"c1": 0.0, "c2": 1.0, "max_iterations": 100, "feature.possible_transitions": True})
    model = os.path.join(work, "pycrfsuite.model")
    trainer.train(model)
    seconds = time.perf_counter() - t0
    tagger = pycrfsuite.Tagger()
    tagger.open(model)
    out = os.path.join(work, "pycrfsuite.tagged")
    Xd, Yd = read_items(dev)
    with open(out, "w", encoding="utf-8") as fh:
        for x, y in zip(Xd, Yd):
            fh.write("".join(f"{g}\t{p}\n" for g, p in zip(y, tagger.tag(x))) + "\n")
    return seconds, out


def run_crftk(train, dev, work, threads):
    model = os.path.join(work, f"crftk-{threads}.model")
    t0 = time.perf_counter()
    crftk("train", "--format", "crfsuite", "-m", model, "-p", str(threads), "--transitions", "all",
          *SETTINGS, train)
    seconds = time.perf_counter() - t0
    out = os.path.join(work, f"crftk-{threads}.tagged")
    crftk("tag", "--format", "crfsuite", "--reference", "-m", model, "-o", out, dev)
    return seconds, out


def f1(tagged):
    text = crftk("eval", tagged)
    return float(text.split("FB1:")[1].split()[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--extractor", required=True, help="CRFsuite's example/chunking.py")
    ap.add_argument("--data", help="folder of CoNLL-2000 train.txt and dev.txt")
    ap.add_argument("--work", default=os.path.join(REPO, "out", "crfsuite-files"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "crfsuite_files.md"))
    args = ap.parse_args()
    train_txt, dev_txt = corpus_files("CONLL2000", ["train.txt", "dev.txt"], args.data, "crfsuite_files")
    os.makedirs(args.work, exist_ok=True)
    train = os.path.join(args.work, "train.crfsuite")
    dev = os.path.join(args.work, "dev.crfsuite")
    note("files", "extracting CRFsuite's chunking attributes")
    extract(args.extractor, train_txt, train)
    extract(args.extractor, dev_txt, dev)
    systems = [("python-crfsuite", lambda: run_pycrfsuite(train, dev, args.work)),
               ("crftk, 1 thread", lambda: run_crftk(train, dev, args.work, 1)),
               ("crftk, 2 threads", lambda: run_crftk(train, dev, args.work, 2))]
    times = {name: [] for name, _ in systems}
    scores = {}
    for run in range(args.runs):
        for name, go in systems:
            seconds, tagged = go()
            times[name].append(seconds)
            scores[name] = f1(tagged)
            note("files", f"run {run + 1} {name}: {seconds:.1f}s, dev F1 {scores[name]:.2f}")
    base = statistics.median(times["python-crfsuite"])
    n_tokens = sum(1 for line in open(train, encoding="utf-8") if line.strip())
    lines = ["# CRFsuite data files: crftk train --format crfsuite against python-crfsuite", "",
             f"CoNLL-2000 train.txt ({n_tokens:,} tokens) -> dev.txt, attributes from CRFsuite's own "
             "example/chunking.py; L-BFGS, c2=1, 100 iterations, every transition; training time "
             f"(reading the file included), medians of {args.runs} runs taken in turns; 2 cores.", "",
             "| system | train (s) | runs (s) | / python-crfsuite | dev chunk F1 |", "|---|---|---|---|---|"]
    for name, _ in systems:
        med = statistics.median(times[name])
        lines.append(f"| {name} | {med:.1f} | {', '.join(f'{t:.1f}' for t in times[name])} | "
                     f"{med / base:.2f} | {scores[name]:.2f} |")
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
