"""python-crfsuite's peak memory training on the scale corpora, beside crftk's (make scale-crfsuite).

    python benchmarks/crfsuite_memory.py --work out/scale --sizes 1,5,20,50 --heaps 0.6 \
        --out benchmarks/results/scale-crfsuite

For each train.txt x k of benchmarks/scale_corpus.py (the corpora `make scale` trains on), in a
process of its own: the CRF++ chunking template's attribute strings of each sentence, appended to
a pycrfsuite.Trainer one sentence at a time (the file is read as a stream, so what the process
holds is CRFsuite's own copy of the data), then one epoch of its averaged perceptron ("ap"), as
`make scale` runs `crftk train --algorithm perceptron --max-iter 1` in memory and with
--stream. Peak RSS by wait4, with crftk's rows of benchmarks/results/scale.json beside it.
"""

import argparse
import json
import os
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from bench_crfsuite import crfpp_strings  # noqa: E402
from common import corpus_files, note  # noqa: E402
from scale import scale_corpus  # noqa: E402

TEMPLATE = os.path.join(REPO, "templates", "chunking-crfpp.tmpl")


def child(path, model):
    """In the measured process: stream the file into a Trainer, train one perceptron epoch."""
    import pycrfsuite
    from crftk.features.templates import read_template
    from crftk.io.conll import read_sentences, Sentence
    template = read_template(TEMPLATE)
    trainer = pycrfsuite.Trainer(algorithm="ap", verbose=False)
    for s in read_sentences(path):
        if isinstance(s, Sentence):
            trainer.append(crfpp_strings(s.rows, template), [row[-1] for row in s.rows])
    trainer.set_params({"max_iterations": 1})
    trainer.train(model)


def measure(path, work):
    model = os.path.join(work, "crfsuite-memory.model")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", path, model], cwd=REPO)
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"python-crfsuite failed on {path}")
    os.remove(model)
    return usage.ru_maxrss * 1024, time.perf_counter() - t0


def main():
    if sys.argv[1:2] == ["--child"]:
        return child(*sys.argv[2:4])
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="CoNLL-2000 folder (default: $CONLL2000 or ../shared/data/conll2000)")
    ap.add_argument("--work", required=True, help="folder of the scale corpora (made here when missing)")
    ap.add_argument("--sizes", default="1,5,20,50", help="copies of train.txt, comma-separated")
    ap.add_argument("--heaps", type=float, default=0.6, help="as make scale's: 0 for plain copies")
    ap.add_argument("--out", required=True, help="results prefix: PREFIX.md and PREFIX.json")
    args = ap.parse_args()
    try:
        import pycrfsuite  # noqa: F401
    except ImportError:
        sys.exit("crfsuite_memory: python-crfsuite is not installed (pip install python-crfsuite)")
    train_file, = corpus_files("CONLL2000", ["train.txt"], args.data, "crfsuite_memory")
    os.makedirs(args.work, exist_ok=True)
    scale = os.path.join(REPO, "benchmarks", "results", "scale.json")
    crftk_rows = json.load(open(scale)).get("train_memory", []) if os.path.exists(scale) else []
    rows = []
    for k in [int(x) for x in args.sizes.split(",")]:
        path, _, n_tokens, _ = scale_corpus(train_file, k, args.work, args.heaps)
        peak, wall = measure(path, args.work)
        mine = {r["label"]: r for r in crftk_rows if r["copies"] == k and r["heaps"] == args.heaps}
        rows.append({"copies": k, "tokens": n_tokens, "crfsuite_peak": peak, "crfsuite_wall": wall,
                     "crftk": {label: {key: r.get(key) for key in ("memory_peak", "stream_peak", "driver_peak")}
                               for label, r in mine.items()}})
        note("crfsuite_memory", f"x{k}: python-crfsuite {peak / 2**20:,.0f} MiB, {wall:.1f} s")
    with open(args.out + ".json", "w") as fh:
        json.dump({"date": time.strftime("%Y-%m-%d"), "heaps": args.heaps, "rows": rows}, fh, indent=2)
    lines = [f"# Peak memory of one perceptron epoch: python-crfsuite beside crftk (Heaps {args.heaps})", "",
             f"{time.strftime('%Y-%m-%d')}; `python benchmarks/crfsuite_memory.py --sizes {args.sizes} "
             f"--heaps {args.heaps}`; crftk's columns from benchmarks/results/scale.json (make scale).", "",
             "| k | tokens | python-crfsuite MiB | crftk in memory MiB | crftk --stream MiB |", "|---:|---:|---:|---:|---:|"]

    def mib(rows_by_label, key):
        got = [v[key] for v in rows_by_label.values() if v.get(key)]
        return f"{got[-1] / 2**20:,.0f}" if got else "-"
    for r in rows:
        lines.append(f"| {r['copies']} | {r['tokens']:,} | {r['crfsuite_peak'] / 2**20:,.0f} | "
                     f"{mib(r['crftk'], 'memory_peak')} | {mib(r['crftk'], 'stream_peak')} |")
    with open(args.out + ".md", "w") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
