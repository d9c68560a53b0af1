"""Feature bagging (Sutton, Sindelar & McCallum 2006) on CoNLL-2003 NER and CoNLL-2000 NP chunking.

For a task: build the lexicons the lexicon bag reads (``crftk lexicon --folds 10`` on
the training data; for NP chunking also the data with NP labels only and coarse-POS
word lists), train the two baselines (base features; the union of both bags) with
``crftk train``, train the bag with ``crftk bag --dev`` (weights chosen on the
development set; for NP also ``--cv 2`` on the training data, as the paper), tag
the development set with every bag alone, every combination (weights chosen, and
uniform), and score each with chunk F1 and McNemar's test (tokens) against the
union CRF. Times: training (bag against union) and tagging.

    python benchmarks/bag.py --task ner --out out/bag    # eng.train -> eng.testa
    python benchmarks/bag.py --task np --out out/bag     # train.txt -> dev.txt (NP chunks)

Models that exist are reused (delete them to retrain). The lexicon templates read
their lexicons from out/bag/<task>/ of the repository, whatever --out is.
"""

import argparse
import json
import os
import time

from common import REPO, corpus_files, crftk, note as _note

TASKS = {
    # task: (data variable, train file, dev file, bag templates, baselines)
    "ner": ("CONLL2003", "eng.train", "eng.testa", ["conll2003-bag-ngram", "conll2003-bag-lexicon"],
            ["conll2003-bag-base", "conll2003-bag-union"]),
    "np": ("CONLL2000", "train.txt", "dev.txt", ["conll2000-np-bag-pos", "conll2000-np-bag-lexicon"],
           ["conll2000-np-bag-base", "conll2000-np-bag-union"]),
}
COMBINATIONS = ["seq-poe", "seq-mixture", "trans-mixture", "trans-poe"]


def note(msg):
    _note("bag", msg)


def np_data(train, dev, folder):
    """NP-only labels (every other chunk tag becomes O); training sentences in pseudo-documents
    of 20 sentences (the lexicon jackknife's folds are documents); a file of coarse POS
    classes as one-token chunks, from which the POS word lists are built."""
    os.makedirs(folder, exist_ok=True)
    out_train, out_dev, out_pos = (os.path.join(folder, n) for n in ("train.txt", "dev.txt", "train.pos.txt"))

    def rows(path):
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                yield line.split()

    def np_only(words):
        return words[:2] + [words[2] if words[2].endswith("NP") else "O"]

    with open(out_train, "w") as ft, open(out_pos, "w") as fp:
        n = 0
        for w in rows(train):
            if not w:
                ft.write("\n")
                fp.write("\n")
                n += 1
                if n % 20 == 0:
                    ft.write("-DOCSTART- -X- O\n\n")
                    fp.write("-DOCSTART- O\n\n")
                continue
            ft.write(" ".join(np_only(w)) + "\n")
            c = w[1][:1]
            fp.write(f"{w[0]} {'B-' + c if c in 'NVJRDPICW' else 'O'}\n")
    with open(out_dev, "w") as fd:
        for w in rows(dev):
            fd.write(" ".join(np_only(w)) + "\n" if w else "\n")
    return out_train, out_dev, out_pos


def scores(tagged, other=None):
    args = ["eval", "--json", tagged] + (["--mcnemar", other] if other else [])
    return json.loads(crftk(*args))


def timed(*args, log=None):
    t0 = time.perf_counter()
    crftk(*args, log=log)
    return time.perf_counter() - t0


TITLES = {"ner": "CoNLL-2003 NER, eng.train -> eng.testa", "np": "CoNLL-2000 NP chunking, train.txt -> dev.txt"}


NOTES = [
    "Notes:",
    "- Every CRF here stopped at the 400-iteration cap except where the log says it converged "
    "(the cap keeps the runs within the shared machine's time; the bags' members and the union "
    "CRF are capped alike).",
    "- With the paper's prior (c2 = 0.05) the bagged NER model beats the union CRF significantly "
    "with every combination, also with untuned uniform weights; the order seq-poe > trans-poe > "
    "mixtures is the paper's (Table 1), and grid search chose the paper's weights (0.45 n-gram, "
    "0.55 lexicon). With c2 = 1 the union CRF is regularized enough that bagging gains less "
    "(not significant).",
    "- Tagging times are whole `crftk tag` processes on the development set (start-up included). "
    "A bag tags its members on every batch, so it costs about the sum of its CRFs; the seq-poe "
    "model exported by `bag --export` tags like one CRF.",
    "- NP chunking: the weights chosen on dev.txt give +0.15 to +0.19 F1 over the union CRF "
    "(p < 0.05), uniform weights do not (the lexicon bag alone is 4 points below the POS bag). "
    "Weights by 2-fold cross-validation on train.txt are much worse: the lexicons are built "
    "from all of train.txt (jackknifed by document only for the training tokens), so on a "
    "held-out fold the lexicon bag matches the fold's own chunks and looks far better than "
    "it is on new text; cross-validation with training-data lexicons would need the lexicons "
    "rebuilt per fold.",
]


def report(paths, results):
    """benchmarks/results/bag.md and bag.json from the tasks' bag.json files."""
    docs = [json.load(open(p)) for p in paths]
    lines = ["# Feature bagging (Sutton, Sindelar & McCallum 2006)", "",
             "`make bag` (`benchmarks/bag.py --task ner|np`). Every CRF: L-BFGS, c2 as given per table, "
             "to convergence or the iteration cap, no dev-set iteration choice (the last weights are "
             "kept). The bag's weights are chosen on the development set (grid, step 0.05) - the set "
             "the table scores, so the 'chosen' rows are optimistic by one tuned number; 'uniform' "
             "rows use 0.5/0.5 and are not tuned; 'cv2' rows choose by 2-fold cross-validation on the "
             "training data. McNemar's test is token level against the union CRF (p < 0.05: "
             "significant).", ""]
    for d in docs:
        sys_ = d["systems"]
        bag = d["bag"]
        names = bag["members"]
        lines += [f"## {TITLES[d['task']]}", "",
                  f"c2 = {d.get('c2', 1.0):g}, iteration cap {d['max_iter']}, {d['threads']} threads. Bags: "
                  + ", ".join(f"`templates/{n}.tmpl`" for n in names) + "; baselines "
                  + f"`templates/{names[0].rsplit('-', 1)[0]}-base.tmpl` and `-union.tmpl`.", "",
                  "| system | weights | F1 | P | R | McNemar p vs union | tokens only it / only union gets right |",
                  "|---|---|---|---|---|---|---|"]

        def row(name, label, weights=""):
            if name not in sys_:
                return
            s = sys_[name]
            m = s["mcnemar_vs_union"]
            p = f"{m['p_value']:.3g}" if m else "-"
            ab = f"{m['n_a_only']} / {m['n_b_only']}" if m else "-"
            lines.append(f"| {label} | {weights} | {s['f1']:.2f} | {s['precision']:.2f} | {s['recall']:.2f} "
                         f"| {p} | {ab} |")

        def w(ws):
            return " / ".join(f"{x:.2f}" for x in ws)

        row("base", "single CRF, base features")
        row("union", "single CRF, union of the bags")
        for n in names:
            row(n, f"bag {n} alone")
        for m in COMBINATIONS:
            row(m, f"{m} (weights chosen on dev)", w(bag["weights"][m]))
        row("seq-mixture max-marginal", "seq-mixture, max-marginal decoding", w(bag["weights"]["seq-mixture"]))
        row("seq-poe exported", "seq-poe exported as one model", w(bag["weights"]["seq-poe"]))
        for m in COMBINATIONS:
            row(f"{m} uniform", f"{m} (uniform weights)", "0.50 / 0.50")
        if "bag_cv" in d:
            for m in COMBINATIONS:
                row(f"{m} cv2", f"{m} (weights by 2-fold CV)", w(d["bag_cv"]["weights"][m]))
        sec = d["seconds"]
        lines += ["", "| time | seconds |", "|---|---|"]
        lines += [f"| {k} | {v:.1f} |" for k, v in sec.items()]
        lines.append("")
    lines += NOTES
    parallel = os.path.join(os.path.dirname(paths[0]), "..", "parallel.json")
    if os.path.exists(parallel):
        p = json.load(open(parallel))
        lines += ["", "Training the bags one after another with 2 threads each (`--parallel threads`) against "
                  "both at once with 1 thread each (`--parallel bags`): NP bags, 60 iterations each, "
                  "3 alternating runs on the shared 2-core machine (`benchmarks/bag.py --parallel`): "
                  + "; ".join(f"{m}: " + ", ".join(f"{x:.0f}" for x in v) + f" s (mean {sum(v) / len(v):.0f})"
                              for m, v in p.items())
                  + ": within the noise of a machine shared with other jobs; `--parallel auto` takes bags."]
    text = "\n".join(lines)
    with open(results + ".md", "w") as fh:
        fh.write(text + "\n")
    with open(results + ".json", "w") as fh:
        json.dump({d["task"]: d for d in docs}, fh, indent=2)
    print(text)


def time_parallel(out, threads):
    """Seconds of training the NP bags one after another with threads and both at once."""
    import sys
    sys.path.insert(0, REPO)
    from crftk.training.bagging import fit_bag
    from crftk.features.templates import read_template
    from crftk.io.conll import read_corpus
    sents = read_corpus(os.path.join(REPO, "out", "bag", "np", "train.txt"))
    templates = [read_template(os.path.join(REPO, "templates", f"{t}.tmpl")) for t in TASKS["np"][3]]
    res = {"threads": [], "bags": []}
    for rep in range(3):
        for mode in ("threads", "bags") if rep % 2 == 0 else ("bags", "threads"):
            m = fit_bag(sents, templates, parallel=mode, max_iter=60, threads=int(threads), log=None)
            res[mode].append(m.info["bag"]["train_seconds"])
            note(f"{mode}: {res[mode][-1]:.1f} s")
    with open(os.path.join(out, "parallel.json"), "w") as fh:
        json.dump(res, fh, indent=2)
    return res


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", nargs="+", metavar="BAG_JSON",
                    help="only write the results table (--results) from the tasks' bag.json files")
    ap.add_argument("--results", default="benchmarks/results/bag")
    ap.add_argument("--parallel", action="store_true",
                    help="only time --parallel threads against bags (NP bags, 60 iterations, 3 runs each) "
                         "into OUT/parallel.json")
    ap.add_argument("--task", choices=sorted(TASKS))
    ap.add_argument("--data", help="folder of the task's data (default: $CONLL2000 / $CONLL2003 or ../shared/data/...)")
    ap.add_argument("--out", default="out/bag")
    ap.add_argument("--max-iter", default="400", help="iteration cap of every training (default 400)")
    ap.add_argument("--threads", default="2")
    ap.add_argument("--c2", default="0.05", help="L2 coefficient of every CRF (default 0.05: the paper's "
                                                 "Gaussian prior of variance 10)")
    ap.add_argument("--cv", default=None, help="also choose weights by K-fold cross-validation (np: 2)")
    args = ap.parse_args(argv)
    if args.report:
        return report(args.report, args.results)
    if args.parallel:
        return time_parallel(args.out, args.threads)
    if args.task is None:
        ap.error("--task is required (or --report)")
    var, train_name, dev_name, bags, baselines = TASKS[args.task]
    train, dev = corpus_files(var, [train_name, dev_name], args.data, "bag")
    lexdir = os.path.join(REPO, "out", "bag", args.task)
    out = os.path.join(args.out, args.task)
    os.makedirs(out, exist_ok=True)
    os.makedirs(lexdir, exist_ok=True)      # crftk lexicon -o makes only the last directory
    if args.task == "np":
        train, dev, pos = np_data(train, dev, lexdir)
        crftk("lexicon", "-o", os.path.join(lexdir, "lex"), "--folds", "10", train)
        crftk("lexicon", "-o", os.path.join(lexdir, "poslex"), "--folds", "10", pos)
    else:
        crftk("lexicon", "-o", os.path.join(lexdir, "lex"), "--folds", "10", train)
    common = ["--max-iter", args.max_iter, "--threads", args.threads, "--c2", args.c2]
    result = {"task": args.task, "train": train, "dev": dev, "max_iter": int(args.max_iter),
              "c2": float(args.c2), "threads": int(args.threads), "systems": {}, "seconds": {}}
    tagged = {}

    def tag(name, model, *extra):
        path = os.path.join(out, name.replace(" ", "-") + ".dev.tagged")
        result["seconds"][f"tag {name}"] = timed("tag", "-m", model, "-o", path, "--threads", args.threads,
                                                 *extra, dev)
        tagged[name] = path

    # baselines
    for b in baselines:
        name = b.rsplit("-", 1)[1]
        model = os.path.join(out, f"{name}.model")
        if not os.path.exists(model):
            note(f"training the {name} CRF")
            crftk("train", "-t", f"templates/{b}.tmpl", "-m", model, *common, train, log=model + ".log")
        info = json.loads(crftk("info", "--json", model))["training"]
        result["seconds"][f"train {name}"] = info["seconds_in_all"]
        result[f"{name}_iterations"] = info["iterations"]
        tag(name, model)
    # the bag, weights chosen on the development set
    bag = os.path.join(out, "bag.model")
    if not os.path.exists(bag):
        note("training the bag")
        crftk("bag", *[x for t in bags for x in ("-t", f"templates/{t}.tmpl")], "-m", bag, "--dev", dev,
              "--export", os.path.join(out, "seq-poe.model"), *common, train, log=bag + ".log")
    info = json.loads(crftk("info", "--json", bag))["training"]
    result["seconds"]["train bag (members)"] = info["bag"]["train_seconds"]
    result["seconds"]["bag in all (weights on dev included)"] = info["seconds"]
    record = info["bag"]
    result["bag"] = {k: record[k] for k in ("members", "weights", "weights_by", "dev_f1", "member_dev_f1",
                                            "combine", "train_seconds")}
    result["bag"]["member_iterations"] = info.get("member_iterations")
    names = record["members"]
    for i, member in enumerate(names):
        wf = os.path.join(out, f"alone-{member}.weights")
        with open(wf, "w") as fh:
            fh.write("".join(f"{n} {int(j == i)}\n" for j, n in enumerate(names)))
        tag(member, bag, "--combine", "seq-poe", "--weights", wf)
    uniform = os.path.join(out, "uniform.weights")
    with open(uniform, "w") as fh:
        fh.write("".join(f"{n} 1\n" for n in names))
    for method in COMBINATIONS:
        tag(method, bag, "--combine", method)
        tag(f"{method} uniform", bag, "--combine", method, "--weights", uniform)
    tag("seq-mixture max-marginal", bag, "--combine", "seq-mixture", "--decode", "max-marginal")
    tag("seq-poe exported", os.path.join(out, "seq-poe.model"))
    if args.cv:
        cvbag = os.path.join(out, f"bag-cv{args.cv}.model")
        if not os.path.exists(cvbag):
            note(f"training the bag with weights by {args.cv}-fold cross-validation")
            crftk("bag", *[x for t in bags for x in ("-t", f"templates/{t}.tmpl")], "-m", cvbag, "--cv", args.cv,
                  *common, train, log=cvbag + ".log")
        cvinfo = json.loads(crftk("info", "--json", cvbag))["training"]
        cvrec = cvinfo["bag"]
        result["seconds"][f"bag cv{args.cv} in all"] = cvinfo["seconds"]
        result["bag_cv"] = {k: cvrec[k] for k in ("weights", "dev_f1", "combine")}
        for method in COMBINATIONS:
            tag(f"{method} cv{args.cv}", cvbag, "--combine", method)
    for name, path in tagged.items():
        s = scores(path, None if name == "union" else tagged["union"])
        result["systems"][name] = {"f1": s["overall"]["f1"], "precision": s["overall"]["precision"],
                                   "recall": s["overall"]["recall"], "token_accuracy": s["token_accuracy"],
                                   "mcnemar_vs_union": s.get("mcnemar")}
    with open(os.path.join(out, "bag.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    for name, s in result["systems"].items():
        p = s["mcnemar_vs_union"]["p_value"] if s["mcnemar_vs_union"] else None
        print(f"{name:32s} F1 {s['f1']:6.2f}  " + (f"McNemar p vs union {p:.3g}" if p is not None else ""))
    return result


if __name__ == "__main__":
    main()
