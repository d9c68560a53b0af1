#!/usr/bin/env python
"""CoNLL-2003 English NER: crftk against a python-crfsuite baseline.

Modes (all read ``eng.train`` and ``eng.testa`` from ``--data`` or $CONLL2003):

``baseline``
    python-crfsuite with the classic hand-written per-token features of the
    sklearn-crfsuite tutorial, computed in Python (see :func:`token_features`),
    trained with the tutorial's settings (L-BFGS, c1=0.1, c2=0.1, 100
    iterations, all possible transitions). eng.testa is scored with
    ``crftk.evaluation.conlleval.evaluate`` (conlleval chunk rules; labels are IOB1).
``crftk``
    crftk trained in-process (``crftk.commands.train.train``) with a template (default
    ``templates/conll2003-ner.tmpl``) and the given options, without a
    development set unless ``--dev`` is given; eng.testa scored the same way.
``throughput``
    (a) crftk feature extraction: ``FeatureSpace.encode`` and ``FeatureSpace.fit``
    on the already-read eng.train sentences (tokens/s, median of ``--repeats``),
    next to reading the file and to the Python tutorial features;
    (b) end-to-end tagging of eng.testa (read the CoNLL file, extract, Viterbi,
    write input columns + label to an ``io.StringIO``): crftk ``tag_files`` at 1
    and 2 threads against python-crfsuite (Python reader, Python features,
    ``Tagger.tag``), with the models saved by the two modes above;
    (c) the stages of both tagging pipelines timed one by one (reading,
    feature extraction, lattices and Viterbi or ``Tagger.tag``, writing).
    Every timed group starts with ``--warmup`` untimed runs.
``all``
    the three in turn.

Timings: before each timed group the script waits (up to ``--max-wait``
seconds, polling every 30 s) until the 1-minute load average is at most
``--max-load`` (1.2), and records ``os.getloadavg()`` at the start and end of
the group and the process CPU time / wall time of each run. A group started
above the threshold is flagged ``"load_ok": false``; measure it again.

Output: a markdown table on stdout, progress on stderr, every number in
``--out FILE.json`` (sections of other modes already in the file are kept).

python-crfsuite is a benchmark reference only; the crftk package never imports it.

Usage::

    python benchmarks/bench_ner.py baseline   --out out/bench-ner.json
    python benchmarks/bench_ner.py crftk      --max-iter 300 --out out/bench-ner.json
    python benchmarks/bench_ner.py throughput --out out/bench-ner.json
"""

import argparse
import gc
import io
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

DEFAULT_DATA = os.environ.get("CONLL2003", str(REPO.parent / "shared" / "data" / "conll2003"))
DEFAULT_TEMPLATE = str(REPO / "templates" / "conll2003-ner.tmpl")
DEFAULT_WORKDIR = "/tmp/crftk-bench-ner"
TYPES = ("LOC", "MISC", "ORG", "PER")

# the sklearn-crfsuite tutorial's training settings
BASELINE_PARAMS = {"c1": 0.1, "c2": 0.1, "max_iterations": 100, "feature.possible_transitions": True}


# ----------------------------------------------------------------- helpers

def note(msg):
    print(f"[bench-ner {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg():
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def wait_for_quiet(max_load, max_wait, poll=30.0):
    """Sleep until the 1-minute load is at most max_load (or max_wait passed); returns the load."""
    waited = 0.0
    load = loadavg()
    while load is not None and load[0] > max_load and waited < max_wait:
        note(f"1-minute load {load[0]:.2f} > {max_load}: waiting ({waited:.0f}s so far)")
        time.sleep(poll)
        waited += poll
        load = loadavg()
    return load


def timed(name, fn, repeats, n_tokens, args, setup=None):
    """Run fn() `repeats` times after waiting for a quiet machine; tokens/s of the median run."""
    load_start = wait_for_quiet(args.max_load, args.max_wait)
    for _ in range(args.warmup):       # untimed: first-call costs (imports, caches, page faults)
        if setup is not None:
            setup()
        fn()
    runs = []
    result = None
    for r in range(repeats):
        if setup is not None:
            setup()
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        result = fn()
        wall = time.perf_counter() - t0
        cpu = time.process_time() - c0
        runs.append({"seconds": wall, "cpu_seconds": cpu, "cpu_per_wall": cpu / wall if wall else None,
                     "loadavg": loadavg()})
        note(f"{name}: run {r + 1}/{repeats} {wall:.3f}s ({n_tokens / wall:,.0f} tokens/s, "
             f"cpu/wall {cpu / wall:.2f}, load {runs[-1]['loadavg']})")
    med = statistics.median(r["seconds"] for r in runs)
    out = {
        "name": name,
        "tokens": n_tokens,
        "repeats": repeats,
        "median_seconds": med,
        "tokens_per_second": n_tokens / med,
        "warmup_runs": args.warmup,
        "runs": runs,
        "loadavg_start": load_start,
        "loadavg_end": loadavg(),
        "load_ok": load_start is None or load_start[0] <= args.max_load,
    }
    if not out["load_ok"]:
        note(f"WARNING: {name} started with 1-minute load {load_start[0]:.2f} > {args.max_load}; "
             f"measure it again on a quieter machine")
    return out, result


def timed_rounds(systems, repeats, n_tokens, args):
    """Time several (key, name, fn, threads) systems in `repeats` interleaved rounds.

    Returns ({key: result like timed()'s}, [{key: seconds} per round]).
    """
    load_start = wait_for_quiet(args.max_load, args.max_wait)
    for _ in range(args.warmup):
        for _key, _name, fn, _th in systems:
            fn()
    runs = {key: [] for key, *_ in systems}
    rounds = []
    for r in range(repeats):
        order = systems[r % len(systems):] + systems[:r % len(systems)]
        times = {}
        for key, name, fn, _th in order:
            gc.collect()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall = time.perf_counter() - t0
            cpu = time.process_time() - c0
            times[key] = wall
            runs[key].append({"seconds": wall, "cpu_seconds": cpu, "cpu_per_wall": cpu / wall,
                              "round": r, "loadavg": loadavg()})
            note(f"{name}: round {r + 1}/{repeats} {wall:.3f}s ({n_tokens / wall:,.0f} tokens/s, "
                 f"cpu/wall {cpu / wall:.2f}, load {runs[key][-1]['loadavg']})")
        rounds.append(times)
    load_end = loadavg()
    ok = load_start is None or load_start[0] <= args.max_load
    if not ok:
        note(f"WARNING: tagging rounds started with 1-minute load {load_start[0]:.2f} > {args.max_load}; "
             f"measure them again on a quieter machine")
    out = {}
    for key, name, _fn, th in systems:
        med = statistics.median(x["seconds"] for x in runs[key])
        out[key] = {"name": name, "threads": th, "tokens": n_tokens, "repeats": repeats,
                    "median_seconds": med, "tokens_per_second": n_tokens / med,
                    "warmup_runs": args.warmup, "runs": runs[key], "interleaved": True,
                    "loadavg_start": load_start, "loadavg_end": load_end, "load_ok": ok}
    return out, rounds


def git_state():
    def run(*cmd):
        try:
            return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None
    status = run("git", "status", "--porcelain")
    return {"commit": run("git", "rev-parse", "HEAD"),
            "tree_dirty": None if status is None else bool(status)}


def dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None


def data_paths(args):
    d = Path(args.data)
    train, testa = d / "eng.train", d / "eng.testa"
    for p in (train, testa):
        if not p.is_file():
            sys.exit(f"bench_ner: {p} not found; pass --data DIR or set CONLL2003=DIR")
    return str(train), str(testa)


def scores(evaluation):
    d = evaluation.to_dict()
    return {
        "precision": d["overall"]["precision"],
        "recall": d["overall"]["recall"],
        "f1": d["overall"]["f1"],
        "token_accuracy": evaluation.token_accuracy,          # fractions, as in the stored results
        "sentence_accuracy": evaluation.sentence_accuracy,
        "n_sentences": d["n_sentences"],
        "n_tokens": d["n_tokens"],
        "overall": d["overall"],
        "per_type": d["per_type"],
    }


# ------------------------------------------------------ baseline features

def token_features(rows, i):
    """Hand-written features of token i (rows: [word, POS, chunk, ...]) in the style of the
    sklearn-crfsuite tutorial: string values become ``key:value`` attributes, booleans
    attributes of weight 1 or 0."""
    word, pos = rows[i][0], rows[i][1]
    f = {
        "bias": 1.0,
        "w.lower": word.lower(),
        "w.suffix3": word[-3:],
        "w.suffix2": word[-2:],
        "w.isupper": word.isupper(),
        "w.istitle": word.istitle(),
        "w.isdigit": word.isdigit(),
        "pos": pos,
        "pos.head2": pos[:2],
    }
    if i > 0:
        pword, ppos = rows[i - 1][0], rows[i - 1][1]
        f["prev.w.lower"] = pword.lower()
        f["prev.w.istitle"] = pword.istitle()
        f["prev.w.isupper"] = pword.isupper()
        f["prev.pos"] = ppos
        f["prev.pos.head2"] = ppos[:2]
    else:
        f["sentence.start"] = True
    if i + 1 < len(rows):
        nword, npos = rows[i + 1][0], rows[i + 1][1]
        f["next.w.lower"] = nword.lower()
        f["next.w.istitle"] = nword.istitle()
        f["next.w.isupper"] = nword.isupper()
        f["next.pos"] = npos
        f["next.pos.head2"] = npos[:2]
    else:
        f["sentence.end"] = True
    return f


def sentence_features(rows):
    return [token_features(rows, i) for i in range(len(rows))]


def python_conll_sentences(path):
    """A plain Python CoNLL reader (the python-crfsuite side of the tagging benchmark):
    lists of column lists, -DOCSTART- lines and blank lines end sentences."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            fields = line.split()
            if not fields or fields[0].startswith("-DOCSTART-"):
                if rows:
                    yield rows
                    rows = []
                continue
            rows.append(fields)
    if rows:
        yield rows


def pycrfsuite_tag_file(tagger, path, out):
    """Read a CoNLL file, compute the tutorial features, tag, write columns + label."""
    n_sent = n_tok = 0
    for rows in python_conll_sentences(path):
        labels = tagger.tag(sentence_features(rows))
        out.write("".join("\t".join(r) + "\t" + lab + "\n" for r, lab in zip(rows, labels)))
        out.write("\n")
        n_sent += 1
        n_tok += len(rows)
    return n_sent, n_tok


def pycrfsuite_tag_file_staged(tagger, path, out):
    """pycrfsuite_tag_file with the seconds spent in each stage added up."""
    pc = time.perf_counter
    st = {"read": 0.0, "features": 0.0, "tag": 0.0, "write": 0.0}
    it = python_conll_sentences(path)
    while True:
        t0 = pc()
        rows = next(it, None)
        t1 = pc()
        st["read"] += t1 - t0
        if rows is None:
            return st
        x = sentence_features(rows)
        t2 = pc()
        labels = tagger.tag(x)
        t3 = pc()
        out.write("".join("\t".join(r) + "\t" + lab + "\n" for r, lab in zip(rows, labels)))
        out.write("\n")
        t4 = pc()
        st["features"] += t2 - t1
        st["tag"] += t3 - t2
        st["write"] += t4 - t3


def score_tagged_text(text):
    """F1 of a tagged output (gold label second to last column, prediction last)."""
    from crftk.evaluation.conlleval import evaluate
    gold, pred, g, p = [], [], [], []
    for line in text.splitlines():
        fields = line.split()
        if not fields:
            if g:
                gold.append(g)
                pred.append(p)
                g, p = [], []
            continue
        g.append(fields[-2])
        p.append(fields[-1])
    if g:
        gold.append(g)
        pred.append(p)
    return evaluate(gold, pred, scheme="iob1").overall.f1, sum(len(s) for s in gold)


# ------------------------------------------------------------------ modes

def run_baseline(args):
    import pycrfsuite
    from crftk.io.conll import read_corpus
    from crftk.evaluation.conlleval import evaluate

    train_path, testa_path = data_paths(args)
    os.makedirs(args.workdir, exist_ok=True)
    model_path = args.crfsuite_model
    note(f"baseline: reading {train_path}")
    train = read_corpus(train_path)
    n_tokens = sum(len(s) for s in train)

    t0 = time.perf_counter()
    trainer = pycrfsuite.Trainer(verbose=False)
    for s in train:
        trainer.append(sentence_features(s.rows), [r[-1] for r in s.rows])
    append_seconds = time.perf_counter() - t0
    trainer.set_params(BASELINE_PARAMS)
    note(f"baseline: {len(train)} sentences, {n_tokens} tokens appended in {append_seconds:.1f}s; "
         f"training python-crfsuite {BASELINE_PARAMS}")
    load_start = loadavg()
    t0 = time.perf_counter()
    trainer.train(model_path)
    train_seconds = time.perf_counter() - t0
    lp = trainer.logparser
    last = lp.last_iteration or {}
    note(f"baseline: trained in {train_seconds:.1f}s, {len(lp.iterations)} iterations, "
         f"{lp.featgen_num_features} features generated; model {model_path}")

    tagger = pycrfsuite.Tagger()
    tagger.open(model_path)
    info = tagger.info()
    testa = read_corpus(testa_path, n_columns=4)
    t0 = time.perf_counter()
    pred = [tagger.tag(sentence_features(s.rows)) for s in testa]
    tag_seconds = time.perf_counter() - t0
    gold = [[r[-1] for r in s.rows] for s in testa]
    ev = evaluate(gold, pred, scheme="iob1")
    tagger.close()
    note(f"baseline: eng.testa F1 {ev.overall.f1:.2f}")
    return {
        "system": "python-crfsuite, tutorial features",
        "params": dict(BASELINE_PARAMS, algorithm="lbfgs"),
        "model": model_path,
        "train_sentences": len(train),
        "train_tokens": n_tokens,
        "features_generated": lp.featgen_num_features,
        "features_active_last_iteration": last.get("active_features"),
        "model_state_features": len(info.state_features),
        "model_attributes": len(info.attributes),
        "model_transitions": len(info.transitions),
        "labels": sorted(info.labels),
        "iterations": len(lp.iterations),
        "final_loss": last.get("loss"),
        "feature_and_append_seconds": append_seconds,
        "featgen_seconds": lp.featgen_seconds,
        "train_seconds": train_seconds,
        "loadavg_train_start": load_start,
        "loadavg_train_end": loadavg(),
        "tag_seconds_testa_in_memory": tag_seconds,
        "testa": scores(ev),
    }


def run_crftk(args):
    from crftk.io.conll import read_corpus
    from crftk.commands.tag import Tagger
    from crftk.evaluation.conlleval import evaluate
    from crftk.commands.train import DEFAULTS, train

    train_path, testa_path = data_paths(args)
    os.makedirs(args.workdir, exist_ok=True)
    options = {"c1": args.c1, "c2": args.c2, "min_freq": args.min_freq, "threads": args.threads}
    for key in ("max_iter", "epsilon", "feature_set"):
        if getattr(args, key) is not None:
            options[key] = getattr(args, key)
    if args.dev:
        note(f"crftk: --dev {args.dev}: keeping the iteration with the best F1 on it")
    note(f"crftk: training on {train_path} with {args.template}, options {options}")
    load_start = loadavg()
    t0 = time.perf_counter()
    model = train([train_path], args.template, args.crftk_model, dev_file=args.dev,
                  log=lambda m: print(f"  {m}", file=sys.stderr, flush=True), **options)
    total_seconds = time.perf_counter() - t0
    info = model.info
    summary = model.summary()

    testa = read_corpus(testa_path, n_columns=model.space.n_columns)
    tagger = Tagger(model, threads=args.threads)
    t0 = time.perf_counter()
    pred = tagger.tag(testa)
    tag_seconds = time.perf_counter() - t0
    gold = [[r[model.space.label_col] for r in s.rows] for s in testa]
    ev = evaluate(gold, pred, scheme="iob1")
    note(f"crftk: eng.testa F1 {ev.overall.f1:.2f}")
    return {
        "system": "crftk",
        "template": str(args.template),
        "options": {**DEFAULTS, **options},
        "dev_file": args.dev,
        "model": args.crftk_model,
        "threads": info["threads"],
        "train_sentences": info["sentences"],
        "train_tokens": info["tokens"],
        "attributes": summary["attributes"],
        "state_features": summary["state_features"],
        "edge_attributes": summary["edge_attributes"],
        "parameters": summary["parameters"],
        "nonzero_parameters": summary["nonzero_parameters"],
        "nonzero_state_features": summary["nonzero_state_features"],
        "iterations": info["iterations"],
        "evaluations": info["evaluations"],
        "chosen_iteration": info["chosen_iteration"],
        "converged": info["converged"],
        "stop_reason": info["stop_reason"],
        "final_objective": info["objective"],
        "optimizer_seconds": info["seconds"],
        "train_seconds": total_seconds,
        "loadavg_train_start": load_start,
        "loadavg_train_end": loadavg(),
        "tag_seconds_testa_in_memory": tag_seconds,
        "testa": scores(ev),
    }


def run_throughput(args):
    import pycrfsuite
    from crftk.io.conll import read_corpus
    from crftk.commands.tag import tag_files
    from crftk.features.space import FeatureSpace
    from crftk.model import Model
    from crftk.features.templates import read_template

    train_path, testa_path = data_paths(args)
    for p, mode in ((args.crftk_model, "crftk"), (args.crfsuite_model, "baseline")):
        if not os.path.isfile(p):
            sys.exit(f"bench_ner: model {p} not found: run the {mode!r} mode first (or pass its path)")
    R = args.repeats
    res = {"repeats": R, "max_load": args.max_load, "extraction": {}, "tagging": {}}

    # (a) feature extraction on eng.train -----------------------------------
    template = read_template(args.template)
    n_train = sum(len(s) for s in read_corpus(train_path))
    n_test = sum(len(s) for s in read_corpus(testa_path))
    t, train = timed("read eng.train (crftk read_corpus)", lambda: read_corpus(train_path), R, n_train,
                     args)
    res["extraction"]["read"] = t
    note(f"throughput: eng.train {len(train)} sentences, {n_train} tokens; fitting the space once")
    space, _ = FeatureSpace.fit(train, template)
    res["extraction"]["space"] = {"template": str(args.template), "attributes": space.n_attrs,
                                  "state_features": space.n_features}
    t, corpus = timed("crftk encode eng.train", lambda: space.encode(train), R, n_train, args)
    t["attribute_occurrences"] = int(corpus.attrs.size)
    t["attributes_per_second"] = corpus.attrs.size / t["median_seconds"]
    res["extraction"]["encode"] = t
    del corpus
    if not args.skip_fit:
        t, _ = timed("crftk fit eng.train", lambda: FeatureSpace.fit(train, template)[0].n_attrs,
                     R, n_train, args)
        res["extraction"]["fit"] = t
    # streamed, as the baseline feeds Trainer.append: holding every feature dict at once
    # would mostly time the garbage collector rescanning them
    def python_features_stream():
        for s in train:
            sentence_features(s.rows)
    t, _ = timed("Python tutorial features eng.train (streamed)", python_features_stream, R, n_train, args)
    t["attribute_occurrences"] = sum(len(d) for s in train for d in sentence_features(s.rows))
    t["attributes_per_second"] = t["attribute_occurrences"] / t["median_seconds"]
    res["extraction"]["python_tutorial_features"] = t
    del train

    # (b) end-to-end tagging of eng.testa -----------------------------------
    # The systems take turns within each round (the order rotating from round to
    # round), so a slow spell of the machine hits all of them, not one.
    model = Model.load(args.crftk_model)
    tagger = pycrfsuite.Tagger()
    tagger.open(args.crfsuite_model)
    outputs = {}

    def crftk_tagging(th):
        def run():
            out = io.StringIO()
            counts = tag_files(model, [testa_path], out, threads=th)
            outputs[f"crftk_t{th}"] = out
            return counts
        return run

    def pycrfsuite_tagging():
        out = io.StringIO()
        counts = pycrfsuite_tag_file(tagger, testa_path, out)
        outputs["pycrfsuite"] = out
        return counts

    systems = [(f"crftk_t{th}", f"crftk tag_files eng.testa, {th} thread(s)", crftk_tagging(th), th)
               for th in args.tag_threads]
    systems.append(("pycrfsuite", "python-crfsuite tag eng.testa (Python reader + features)",
                    pycrfsuite_tagging, 1))
    res["tagging"], rounds = timed_rounds(systems, R, n_test, args)
    tagger.close()
    for key, t in res["tagging"].items():
        f1, n = score_tagged_text(outputs[key].getvalue())
        if n != n_test:
            note(f"WARNING: {key} wrote {n} tokens, expected {n_test}")
        t["f1_of_output"] = f1

    # (c) where the tagging time goes ---------------------------------------
    if not args.skip_breakdown:
        res["breakdown"] = tagging_breakdown(model, args.crfsuite_model, testa_path, n_test, args)

    base = res["tagging"]["pycrfsuite"]["tokens_per_second"]
    res["ratios"] = {f"{k}_vs_pycrfsuite": v["tokens_per_second"] / base
                     for k, v in res["tagging"].items() if k != "pycrfsuite"}
    # the same ratios from each round's own times (pycrfsuite seconds / crftk seconds)
    res["ratios_median_of_rounds"] = {
        f"{k}_vs_pycrfsuite": statistics.median(r["pycrfsuite"] / r[k] for r in rounds)
        for k in res["tagging"] if k != "pycrfsuite"}
    ext = res["extraction"]
    pyf = ext["python_tutorial_features"]["tokens_per_second"]
    res["ratios"]["encode_vs_python_tutorial_features"] = ext["encode"]["tokens_per_second"] / pyf
    if "fit" in ext:
        res["ratios"]["fit_vs_python_tutorial_features"] = ext["fit"]["tokens_per_second"] / pyf
    # per attribute occurrence: the NER template makes several times more attributes per token
    res["ratios"]["encode_vs_python_tutorial_features_per_attribute"] = (
        ext["encode"]["attributes_per_second"] / ext["python_tutorial_features"]["attributes_per_second"])
    res["models"] = {"crftk": args.crftk_model, "crfsuite": args.crfsuite_model}
    return res


def tagging_breakdown(model, crfsuite_model, testa_path, n_test, args):
    """Stages of the two tagging pipelines timed separately on eng.testa (median of --repeats)."""
    import pycrfsuite
    from crftk.io.conll import read_corpus
    from crftk.commands.tag import Tagger
    from crftk.structures.chain import chain_lattices

    R = args.repeats
    out = {}
    out["crftk_read"], sents = timed("breakdown: crftk read_corpus eng.testa",
                                     lambda: read_corpus(testa_path, n_columns={3, 4}), R, n_test, args)
    space = model.space
    out["crftk_encode"], corpus = timed("breakdown: crftk encode eng.testa", lambda: space.encode(sents),
                                        R, n_test, args)
    out["crftk_lattices"], lat = timed("breakdown: crftk lattices", lambda: chain_lattices(space, corpus),
                                       R, n_test, args)
    for th in args.tag_threads:
        out[f"crftk_viterbi_t{th}"], _ = timed(f"breakdown: crftk Viterbi, {th} thread(s)",
                                               lambda th=th: lat.viterbi(model.weights, th), R, n_test, args)
    tagger = Tagger(model, threads=1)
    pred = tagger.tag(sents)
    crftk_rows = [s.rows for s in sents]
    out["crftk_write"], _ = timed("breakdown: crftk write rows + labels",
                                  lambda: _write_tagged(crftk_rows, pred), R, n_test, args)
    # The python-crfsuite pipeline is timed stage by stage inside its streaming loop: run
    # on whole-corpus lists instead, its stages would pay for the garbage collector
    # rescanning tens of thousands of live feature dicts, which the stream never holds.
    ptagger = pycrfsuite.Tagger()
    ptagger.open(crfsuite_model)
    load_start = wait_for_quiet(args.max_load, args.max_wait)
    for _ in range(args.warmup):
        pycrfsuite_tag_file_staged(ptagger, testa_path, io.StringIO())
    runs = []
    for r in range(R):
        gc.collect()
        runs.append(pycrfsuite_tag_file_staged(ptagger, testa_path, io.StringIO()))
        note(f"breakdown: python-crfsuite stages, run {r + 1}/{R}: "
             + ", ".join(f"{k} {v:.3f}s" for k, v in runs[-1].items()))
    ptagger.close()
    names = {"read": "Python reader", "features": "Python tutorial features",
             "tag": "python-crfsuite Tagger.tag (dict items)", "write": "Python write rows + labels"}
    for stage, name in names.items():
        med = statistics.median(run[stage] for run in runs)
        out[f"pycrfsuite_stage_{stage}"] = {
            "name": f"breakdown: {name} (in the stream)", "tokens": n_test, "repeats": R,
            "median_seconds": med, "tokens_per_second": n_test / med,
            "runs": [{"seconds": run[stage], "cpu_per_wall": None} for run in runs],
            "loadavg_start": load_start, "loadavg_end": loadavg(),
            "load_ok": load_start is None or load_start[0] <= args.max_load,
        }
    return out


def _write_tagged(sentence_rows, labels):
    """Columns + label per token, a blank line after each sentence (the format of tag_files)."""
    out = io.StringIO()
    for rows, labs in zip(sentence_rows, labels):
        out.write("".join("\t".join(r) + "\t" + lab + "\n" for r, lab in zip(rows, labs)))
        out.write("\n")
    return out


# ------------------------------------------------------------- reporting

def fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def print_scores_table(results):
    rows = [(k, results[k]) for k in ("baseline", "crftk") if k in results]
    if not rows:
        return
    print("\n### eng.train -> eng.testa (conlleval chunk scores, IOB1)\n")
    print("| system | P | R | F1 | " + " | ".join(f"F1 {t}" for t in TYPES)
          + " | sent. acc. | features | iterations | train s |")
    print("|---" * (8 + len(TYPES)) + "|")
    for key, r in rows:
        te = r["testa"]
        per = [fmt(te["per_type"].get(t, {}).get("f1")) for t in TYPES]
        if key == "baseline":
            name = "python-crfsuite, tutorial features (c1=0.1, c2=0.1)"
            feats = r["features_generated"]
        else:
            o = r["options"]
            name = (f"crftk {Path(r['template']).name} (c1={o['c1']:g}, c2={o['c2']:g}, "
                    f"min-freq {o['min_freq']})")
            feats = r["state_features"]
        print(f"| {name} | {te['precision']:.2f} | {te['recall']:.2f} | {te['f1']:.2f} | "
              + " | ".join(per)
              + f" | {100 * te['sentence_accuracy']:.2f} | {feats:,} | {r['iterations']} | "
              f"{r['train_seconds']:.1f} |")


def print_throughput_table(res):
    print("\n### Throughput (tokens/s, median of %d runs)\n" % res["repeats"])
    print("| measurement | tokens | median s | tokens/s | load (1 min) at start | cpu/wall | F1 of output |")
    print("|---|---|---|---|---|---|---|")
    for group in ("extraction", "tagging", "breakdown"):
        for key, t in res.get(group, {}).items():
            if "median_seconds" not in t:
                continue
            cpus = [r["cpu_per_wall"] for r in t["runs"] if r.get("cpu_per_wall") is not None]
            cpu = statistics.median(cpus) if cpus else None
            load = t["loadavg_start"][0] if t["loadavg_start"] else None
            flag = "" if t["load_ok"] else " (high)"
            print(f"| {t['name']} | {t['tokens']:,} | {t['median_seconds']:.3f} | "
                  f"{t['tokens_per_second']:,.0f} | {fmt(load)}{flag} | {fmt(cpu)} | "
                  f"{fmt(t.get('f1_of_output'))} |")
    ext = res["extraction"]
    print(f"\nAttributes per token: crftk template "
          f"{ext['encode']['attribute_occurrences'] / ext['encode']['tokens']:.1f}, tutorial features "
          f"{ext['python_tutorial_features']['attribute_occurrences'] / ext['encode']['tokens']:.1f}; "
          f"attribute occurrences/s: crftk encode {ext['encode']['attributes_per_second']:,.0f}, "
          f"Python {ext['python_tutorial_features']['attributes_per_second']:,.0f}.")
    print("\n| ratio | tokens/s ratio (medians) | median of per-round ratios |")
    print("|---|---|---|")
    per_round = res.get("ratios_median_of_rounds", {})
    for k, v in res["ratios"].items():
        print(f"| {k} | {v:.2f}x | {fmt(per_round.get(k))}{'x' if k in per_round else ''} |")


# ------------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("baseline", "crftk", "throughput", "all"))
    ap.add_argument("--data", default=DEFAULT_DATA, help="directory with eng.train and eng.testa")
    ap.add_argument("--out", help="write (merge) all numbers into this JSON file")
    ap.add_argument("--workdir", default=DEFAULT_WORKDIR, help="where models are saved")
    ap.add_argument("--crfsuite-model", help="python-crfsuite model (default WORKDIR/baseline.crfsuite)")
    ap.add_argument("--crftk-model", help="crftk model (default WORKDIR/crftk-ner.model)")
    ap.add_argument("--template", default=DEFAULT_TEMPLATE)
    ap.add_argument("--c1", type=float, default=0.0)
    ap.add_argument("--c2", type=float, default=1.0)
    ap.add_argument("--max-iter", type=int, default=None, help="default: crftk's default")
    ap.add_argument("--min-freq", type=int, default=1)
    ap.add_argument("--epsilon", type=float, default=None)
    ap.add_argument("--feature-set", default=None, choices=("supported", "complete"))
    ap.add_argument("--threads", type=int, default=0, help="crftk training threads (0: all cores)")
    ap.add_argument("--dev", default=None,
                    help="crftk: pick the iteration with the best F1 on this file (off by default)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per throughput measurement")
    ap.add_argument("--tag-threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs before each timed group")
    ap.add_argument("--skip-fit", action="store_true", help="throughput: do not time FeatureSpace.fit")
    ap.add_argument("--skip-breakdown", action="store_true",
                    help="throughput: do not time the tagging stages separately")
    ap.add_argument("--max-load", type=float, default=1.2,
                    help="wait for a 1-minute load average at most this before each timing")
    ap.add_argument("--max-wait", type=float, default=900.0, help="give up waiting after this many s")
    args = ap.parse_args(argv)
    args.crfsuite_model = args.crfsuite_model or os.path.join(args.workdir, "baseline.crfsuite")
    args.crftk_model = args.crftk_model or os.path.join(args.workdir, "crftk-ner.model")

    results = {}
    if args.out and os.path.isfile(args.out):
        try:
            with open(args.out, encoding="utf-8") as fh:
                results = json.load(fh)
        except (OSError, ValueError):
            note(f"{args.out} is not readable JSON: overwriting it")
            results = {}
    modes = ("baseline", "crftk", "throughput") if args.mode == "all" else (args.mode,)
    meta = {
        "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "data": str(Path(args.data).resolve()),
        "python": platform.python_version(),
        "pycrfsuite": dist_version("python-crfsuite"),
        "cpus": os.cpu_count(),
        "loadavg_start": loadavg(),
        **{f"crftk_{k}": v for k, v in git_state().items()},
    }
    runners = {"baseline": run_baseline, "crftk": run_crftk, "throughput": run_throughput}
    for mode in modes:
        res = runners[mode](args)
        res["meta"] = dict(meta, finished=time.strftime("%Y-%m-%d %H:%M:%S"), loadavg_end=loadavg())
        results[mode] = res
        if args.out:
            os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
            with open(args.out, "w", encoding="utf-8") as fh:
                json.dump(results, fh, indent=1)
            note(f"wrote {args.out}")
    print_scores_table({k: results[k] for k in modes if k in ("baseline", "crftk")})
    if "throughput" in modes:
        print_throughput_table(results["throughput"])


if __name__ == "__main__":
    main()
