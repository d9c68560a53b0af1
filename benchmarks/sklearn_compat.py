"""sklearn-crfsuite against crftk's drop-in (crftk.sklearn_crfsuite) on CoNLL-2003 NER.

The script of sklearn-crfsuite's tutorial: its word2features (the word lowercased, its last 3
and 2 characters, isupper, istitle, isdigit, the POS tag and its first 2 characters, the same of
the neighbours, BOS/EOS; bench_ner.sentence_features), trained on eng.train and scored on
eng.testa with the same parameters (c1=0.1, c2=0.1, max_iterations=100,
all_possible_transitions=True) by the real ``sklearn_crfsuite.CRF`` and by
``crftk.sklearn_crfsuite.CRF`` at 1 and 2 threads. Each run times ``fit`` (the data handed over
and training) and ``predict`` on eng.testa; the systems take turns, run after run, and the
table gives the medians. Scores: crftk's conlleval chunk F1, and the tutorial's flat F1
(weighted over the labels other than O, ``metrics.flat_f1_score``).

    python benchmarks/sklearn_compat.py --data ../shared/data/conll2003 --runs 3
(make bench-compat CONLL2003=DIR); writes benchmarks/results/sklearn_compat.md.
"""

import argparse
import gc
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench_ner import sentence_features  # noqa: E402  (the tutorial's word2features)
from common import corpus_files, note, publish  # noqa: E402

import crftk  # noqa: E402  (before numpy: one BLAS thread)
import crftk.sklearn_crfsuite as crftk_sklearn_crfsuite  # noqa: E402
from crftk.sklearn_crfsuite import metrics  # noqa: E402

PARAMS = dict(algorithm="lbfgs", c1=0.1, c2=0.1, max_iterations=100, all_possible_transitions=True)


def read(path, limit=None):
    """(rows per sentence, NER labels per sentence) of a CoNLL-2003 file, -DOCSTART- left out."""
    sentences, labels, rows = [], [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if not fields or fields[0] == "-DOCSTART-":
                if rows:
                    sentences.append(rows)
                    labels.append([r[-1] for r in rows])
                    rows = []
                continue
            rows.append(fields)
    if rows:
        sentences.append(rows)
        labels.append([r[-1] for r in rows])
    if limit:
        sentences, labels = sentences[:limit], labels[:limit]
    return sentences, labels


def run(make, X, y, X_test, y_test):
    """(fit seconds, predict seconds, conlleval F1, flat F1 over non-O labels, iterations)."""
    gc.collect()
    crf = make()
    t0 = time.perf_counter()
    crf.fit(X, y)
    fit_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = [list(p) for p in crf.predict(X_test)]
    predict_seconds = time.perf_counter() - t0
    labels = [label for label in crf.classes_ if label != "O"]
    flat = metrics.flat_f1_score(y_test, pred, average="weighted", labels=labels)
    chunk = crftk.evaluate(y_test, pred).overall.f1
    log = crf.training_log_
    iterations = len(log.iterations) if log is not None and log.iterations else None
    return fit_seconds, predict_seconds, chunk, 100 * flat, iterations


def table(results, runs, n_train, n_test):
    base = statistics.median(r[0] for r in results["sklearn-crfsuite"])
    lines = [
        "# sklearn-crfsuite against crftk.sklearn_crfsuite (CoNLL-2003 NER, tutorial features)",
        "",
        f"eng.train ({n_train:,} sentences) -> eng.testa ({n_test:,} sentences); "
        f"`CRF({', '.join(f'{k}={v!r}' for k, v in PARAMS.items())})`; medians of {runs} runs, taken in turns; "
        f"fit = handing the feature dicts over + training. {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}.",
        "",
        "| system | threads | fit (s) | fit runs (s) | predict (s) | iterations | chunk F1 (conlleval) | "
        "flat F1, non-O (tutorial) | fit time / sklearn-crfsuite's |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        fit = statistics.median(r[0] for r in rows)
        threads = "1 (CRFsuite)" if name == "sklearn-crfsuite" else name.rsplit(" ", 1)[-1]
        system = "sklearn-crfsuite" if name == "sklearn-crfsuite" else "crftk.sklearn_crfsuite"
        lines.append(f"| {system} | {threads} | {fit:.1f} | {', '.join(f'{r[0]:.1f}' for r in rows)} | "
                     f"{statistics.median(r[1] for r in rows):.2f} | {rows[0][4]} | {rows[0][2]:.2f} | "
                     f"{rows[0][3]:.2f} | {fit / base:.2f} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="folder of eng.train and eng.testa (or $CONLL2003)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threads", default="1,2", help="crftk's thread counts, comma-separated")
    parser.add_argument("--limit", type=int, default=None, help="first N sentences of each file (a quick try)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results",
                                                      "sklearn_compat.md"))
    args = parser.parse_args()
    try:
        import sklearn_crfsuite
    except ImportError:
        sys.exit("sklearn_compat: the real sklearn-crfsuite is not installed (pip install -e '.[compat]')")
    train_path, test_path = corpus_files("CONLL2003", ["eng.train", "eng.testa"], args.data, "sklearn_compat")
    rows, y = read(train_path, args.limit)
    rows_test, y_test = read(test_path, args.limit)
    X = [sentence_features(r) for r in rows]
    X_test = [sentence_features(r) for r in rows_test]
    note("compat", f"{len(X):,} training sentences, {len(X_test):,} test sentences")
    systems = {"sklearn-crfsuite": lambda: sklearn_crfsuite.CRF(**PARAMS)}
    for t in (int(x) for x in args.threads.split(",")):
        systems[f"crftk {t}"] = lambda t=t: crftk_sklearn_crfsuite.CRF(**PARAMS, n_threads=t)
    results = {name: [] for name in systems}
    for r in range(args.runs):
        for name, make in systems.items():
            results[name].append(run(make, X, y, X_test, y_test))
            fit, predict, chunk, flat, iterations = results[name][-1]
            note("compat", f"run {r + 1} {name}: fit {fit:.1f}s, predict {predict:.2f}s, {iterations} iterations, "
                           f"chunk F1 {chunk:.2f}, flat F1 {flat:.2f}")
    publish(table(results, args.runs, len(X), len(X_test)), args.out)


if __name__ == "__main__":
    main()
