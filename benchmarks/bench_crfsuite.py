#!/usr/bin/env python
"""crftk against CRFsuite (python-crfsuite), side by side in one run.

Both systems train a linear-chain CRF on CoNLL-2000 ``train.txt`` with the
same attributes (crftk's feature space built from a template), the same L2
weight (c2=1, c1=0, CRFsuite's ``c2*||w||^2`` convention in both) and the same
number of L-BFGS iterations, and tag ``dev.txt``. Measured:

* training: seconds per iteration and per objective evaluation, final
  objective, iterations actually run (median over ``--repeats``);
* memory: peak RSS of each training process, and RSS right after the data is
  loaded (each system trains in a fresh child process);
* tagging throughput on dev.txt (tokens/s, median over ``--tag-repeats``);
* chunk F1 on dev.txt (crftk.evaluation.conlleval).

How the attributes are made identical: the parent builds the crftk
FeatureSpace on train.txt (min_freq=1) and writes, for each token, the label and
``space.attribute_strings()[id]`` for the token's attribute ids to a temporary
text file (``label TAB attr TAB attr ...``, a blank line between sentences;
attribute strings never contain tabs). The CRFsuite child streams that file
sentence by sentence into ``Trainer.append``. Dev is encoded with the same
space, so attributes unseen in training are dropped for both systems; a
second CRFsuite tagging measurement uses the raw CRF++ template strings
(unseen ones included), which is what a CRFsuite user would feed.
The crftk child runs the whole crftk pipeline from the CoNLL file (read,
template expansion, training, saving), so its peak memory includes all of it.

python-crfsuite is a benchmark reference only; the crftk package never imports it.

Usage::

    python benchmarks/bench_crfsuite.py --data DIR --iterations 100 --repeats 3 \\
        --out benchmarks/results.json
    python benchmarks/bench_crfsuite.py --quick          # 1,000 sentences, 10 iterations
"""

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The crftk-tN-blas1 systems run crftk with BLAS single-threaded: numpy's OpenBLAS otherwise
# starts its own threads for the optimizer's vector operations, beside the kernels' OpenMP threads.
BLAS1_ENV = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "BLIS_NUM_THREADS": "1"}

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = os.environ.get("CONLL2000", str(REPO.parent / "shared" / "data" / "conll2000"))
DEFAULT_TEMPLATE = str(REPO / "templates" / "chunking-crfpp.tmpl")
DEFAULT_NER_DATA = os.environ.get("CONLL2003", str(REPO.parent / "shared" / "data" / "conll2003"))
NER_TEMPLATE = str(REPO / "templates" / "conll2003-ner.tmpl")


# ----------------------------------------------------------------- helpers

def note(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def proc_status_mb():
    """Current RSS and high-water mark (MB) from /proc/self/status; None where unavailable."""
    out = {"rss_mb": None, "hwm_mb": None}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    out["rss_mb"] = int(line.split()[1]) / 1024
                elif line.startswith("VmHWM:"):
                    out["hwm_mb"] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out


def maxrss_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024   # KB on Linux


def loadavg():
    try:
        return list(os.getloadavg())
    except OSError:
        return None


def _dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:          # not installed as a distribution
        return None


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def read_attr_file(path):
    """Yield (attribute lists, labels) per sentence from a ``label TAB attr ...`` file."""
    xseq, yseq = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line:
                if xseq:
                    yield xseq, yseq
                    xseq, yseq = [], []
                continue
            fields = line.split("\t")
            yseq.append(fields[0])
            xseq.append(fields[1:])
    if xseq:
        yield xseq, yseq


def crfpp_strings(rows, template):
    """The CRF++ attribute strings of every token of a sentence (unigram templates only)."""
    from crftk.features.templates import padding_value
    n = len(rows)
    out = []
    for t in range(n):
        attrs = []
        for line in template.unigrams:
            vals = []
            for m in line.macros:
                k = t + m.row
                if k < 0:
                    vals.append(padding_value(k))              # k = -1 -> _B-1
                elif k >= n:
                    vals.append(padding_value(k - n + 1))      # k = n -> _B+1
                else:
                    vals.append(rows[k][m.col])
            attrs.append(line.render(vals))
        out.append(attrs)
    return out


# ----------------------------------------------------------------- workers (child processes)

def worker_train_crfsuite(job):
    import pycrfsuite
    res = {"system": "crfsuite", "rss_start": proc_status_mb()}
    marks = {"featgen_end": None, "iterations": [], "optimization_end": None}

    class TimedTrainer(pycrfsuite.Trainer):
        """Timestamps CRFsuite's log events (wall clock; CRFsuite's own times are CPU clock())."""

        def message(self, message):
            event = self.logparser.feed(message)
            now = time.perf_counter()
            if event == "featgen_end":
                marks["featgen_end"] = now
            elif event == "iteration":
                marks["iterations"].append(now)
            elif event == "optimization_end":
                marks["optimization_end"] = now

    trainer = TimedTrainer(algorithm="lbfgs", verbose=False)
    params = {
        "c1": 0.0, "c2": job["c2"], "max_iterations": job["iterations"], "num_memories": 6,
        "epsilon": job["crfsuite_epsilon"], "delta": job["crfsuite_delta"], "period": 10,
        "feature.possible_transitions": True, "feature.possible_states": False,
        "feature.minfreq": 0.0,
    }
    trainer.set_params(params)
    res["params"] = trainer.get_params()

    t0 = time.perf_counter()
    n_sent = n_tok = 0
    for xseq, yseq in read_attr_file(job["train_attrs"]):
        trainer.append(xseq, yseq)
        n_sent += 1
        n_tok += len(yseq)
    res["load_seconds"] = time.perf_counter() - t0
    res["rss_after_load"] = proc_status_mb()
    res["sentences"], res["tokens"] = n_sent, n_tok
    note(f"crfsuite: appended {n_sent} sentences, {n_tok} tokens "
         f"(RSS {res['rss_after_load']['rss_mb']:.0f} MB); training")

    t1 = time.perf_counter()
    trainer.train(job["model_path"])
    t2 = time.perf_counter()
    lp = trainer.logparser
    its = lp.iterations
    res["train_call_seconds"] = t2 - t1
    res["featgen_seconds_cpu"] = lp.featgen_seconds
    res["n_features_crfsuite"] = lp.featgen_num_features
    res["training_seconds_cpu"] = lp.training_seconds
    res["optimizer_cpu_seconds"] = lp.training_seconds      # CRFsuite times itself with clock(): CPU
    res["storing_seconds_cpu"] = lp.storing_seconds
    res["iterations"] = len(its)
    res["last_iteration_num"] = lp.last_iteration["num"] if lp.last_iteration else None
    res["evaluations"] = 1 + sum(it.get("linesearch_trials", 0) for it in its)
    res["objective"] = its[-1]["loss"] if its else None
    res["objective_history"] = [it.get("loss") for it in its]
    res["iteration_seconds_cpu"] = [it.get("time") for it in its]
    res["active_features"] = its[-1].get("active_features") if its else None
    if marks["featgen_end"] is not None and marks["iterations"]:
        res["optimizer_seconds"] = marks["iterations"][-1] - marks["featgen_end"]
        prev = marks["featgen_end"]
        walls = []
        for t in marks["iterations"]:
            walls.append(t - prev)
            prev = t
        res["iteration_seconds_wall"] = walls
    else:   # fall back on CRFsuite's CPU-clock total
        res["optimizer_seconds"] = lp.training_seconds
    res["crfsuite_log_tail"] = "".join(lp.log[-12:])
    res["rss_end"] = proc_status_mb()
    res["maxrss_self_mb"] = maxrss_mb()
    note(f"crfsuite: {res['iterations']} iterations, {res['evaluations']} evaluations, "
         f"{res['optimizer_seconds']:.1f}s, loss {res['objective']}")
    return res


def worker_train_crftk(job):
    res = {"system": f"crftk-t{job['threads']}", "rss_start": proc_status_mb(),
           "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS")}
    from crftk.commands.train import train
    res["rss_after_import"] = proc_status_mb()
    state = {"first": True, "t_load": None, "cpu_load": None, "cpu_opt_end": None}
    t0 = time.perf_counter()

    def log(msg):
        if state["first"]:           # the first message comes right after reading + feature space
            state["first"] = False
            state["t_load"] = time.perf_counter() - t0
            state["cpu_load"] = time.process_time()
            res["rss_after_load"] = proc_status_mb()
            note(f"crftk t{job['threads']}: {msg} (RSS {res['rss_after_load']['rss_mb']:.0f} MB)")
        elif msg.startswith("iter"):
            it = int(msg.split()[1])
            if it % 25 == 0:
                note(f"crftk t{job['threads']}: {msg}")
        else:
            if state["cpu_opt_end"] is None and ("converge" in msg or "stopped" in msg):
                state["cpu_opt_end"] = time.process_time()     # right after the optimizer returns
            note(f"crftk t{job['threads']}: {msg}")

    model = train([job["train_conll"]], job["template"], job["model_path"], log=log,
                  threads=job["threads"], max_iter=job["iterations"], c1=0.0, c2=job["c2"],
                  epsilon=job["crftk_epsilon"], period=10, history=6, min_freq=1,
                  feature_set="supported")
    res["pipeline_seconds"] = time.perf_counter() - t0
    res["load_seconds"] = state["t_load"]
    info = model.info
    res["iterations"] = info["iterations"]
    res["evaluations"] = info["evaluations"]
    res["objective"] = info["objective"]
    res["optimizer_seconds"] = info["seconds"]
    # process CPU time (all threads) from the feature space to the optimizer's return: includes
    # building the lattices (small); robust to other processes competing for the cores
    if state["cpu_load"] is not None and state["cpu_opt_end"] is not None:
        res["optimizer_cpu_seconds"] = state["cpu_opt_end"] - state["cpu_load"]
    res["stop_reason"] = info["stop_reason"]
    res["threads"] = info["threads"]
    res["objective_history"] = [h["objective"] for h in info["history"]]
    res["iteration_seconds_wall"] = [h["seconds"] for h in info["history"]]
    s = model.space
    res["n_params"] = s.n_params
    res["n_state_features"] = s.n_features
    res["n_attrs"] = s.n_attrs
    res["n_labels"] = s.n_labels
    res["sentences"], res["tokens"] = info["sentences"], info["tokens"]
    res["rss_end"] = proc_status_mb()
    res["maxrss_self_mb"] = maxrss_mb()
    return res


def _time_reps(fn, reps):
    fn()                                            # warm-up, not counted
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return times


def worker_tag_crfsuite(job):
    import pycrfsuite
    from crftk.io.conll import read_corpus
    from crftk.evaluation.conlleval import evaluate
    from crftk.features.templates import read_template

    sents = list(read_attr_file(job["dev_attrs"]))
    xseqs = [x for x, _ in sents]
    gold = [y for _, y in sents]
    n_tok = sum(len(y) for y in gold)
    template = read_template(job["template"])
    try:
        raw = [crfpp_strings(s.rows, template) for s in read_corpus(job["dev_conll"])]
        assert len(raw) == len(xseqs)
    except Exception:          # a template beyond CRF++'s macros: no raw-string measurement
        raw = None
    items = [pycrfsuite.ItemSequence(x) for x in xseqs]
    tagger = pycrfsuite.Tagger()
    tagger.open(job["model_path"])
    tag = tagger.tag
    res = {"system": "crfsuite", "tokens": n_tok, "sentences": len(xseqs)}

    def run(seqs):
        return [tag(x) for x in seqs]

    pred = run(xseqs)
    res["f1"] = evaluate(gold, pred).overall.f1
    res["f1_raw_strings"] = evaluate(gold, run(raw)).overall.f1 if raw is not None else None
    res["token_accuracy"] = evaluate(gold, pred).token_accuracy
    for key, seqs in (("attr_lists", xseqs), ("item_sequences", items), ("raw_strings", raw)):
        if seqs is None:
            continue
        la0 = loadavg()
        times = _time_reps(lambda: run(seqs), job["tag_repeats"])
        res[key] = {"seconds": times, "tokens_per_s": n_tok / statistics.median(times),
                    "loadavg": [la0, loadavg()]}
        note(f"crfsuite tag ({key}): {res[key]['tokens_per_s']:.0f} tokens/s")
    res["maxrss_self_mb"] = maxrss_mb()
    return res


def worker_tag_crftk(job):
    from crftk.io.conll import read_corpus
    from crftk.commands.tag import Tagger
    from crftk.evaluation.conlleval import evaluate
    from crftk.model import Model
    from crftk.structures.chain import chain_lattices

    sents = read_corpus(job["dev_conll"])
    res = {"system": "crftk", "sentences": len(sents), "f1": {}, "token_accuracy": {}}
    timed = None
    for name, path in job["models"].items():
        model = Model.load(path)
        space = model.space
        gold = [[row[space.label_col] for row in s.rows] for s in sents]
        pred = Tagger(model, threads=1).tag(sents)
        ev = evaluate(gold, pred)
        res["f1"][name], res["token_accuracy"][name] = ev.overall.f1, ev.token_accuracy
        if timed is None:
            timed = name, model
    name, model = timed
    res["timed_model"] = name
    space, w = model.space, model.weights
    corpus = space.encode(sents)
    n_tok = corpus.n_tokens
    res["tokens"] = n_tok
    t = time.perf_counter()
    lat = chain_lattices(space, corpus)
    res["lattice_build_seconds"] = time.perf_counter() - t
    for nt in job["threads"]:
        la0 = loadavg()
        times = _time_reps(lambda: lat.viterbi(w, nt), job["tag_repeats"])
        res[f"viterbi_t{nt}"] = {"seconds": times, "tokens_per_s": n_tok / statistics.median(times),
                                 "loadavg": [la0, loadavg()]}
        tagger = Tagger(model, threads=nt)
        la0 = loadavg()
        times = _time_reps(lambda: tagger.tag(sents), job["tag_repeats"])
        res[f"end_to_end_t{nt}"] = {"seconds": times, "tokens_per_s": n_tok / statistics.median(times),
                                    "loadavg": [la0, loadavg()]}
        note(f"crftk tag t{nt}: viterbi {res[f'viterbi_t{nt}']['tokens_per_s']:.0f} tokens/s, "
             f"end to end {res[f'end_to_end_t{nt}']['tokens_per_s']:.0f} tokens/s")
    res["maxrss_self_mb"] = maxrss_mb()
    return res


WORKERS = {
    "train-crfsuite": worker_train_crfsuite,
    "train-crftk": worker_train_crftk,
    "tag-crfsuite": worker_tag_crfsuite,
    "tag-crftk": worker_tag_crftk,
}


def run_worker(kind, job_path, result_path):
    with open(job_path) as fh:
        job = json.load(fh)
    res = WORKERS[kind](job)
    with open(result_path, "w") as fh:
        json.dump(res, fh)


# ----------------------------------------------------------------- parent

def spawn(kind, job, workdir, tag, extra_env=None, repo=REPO):
    """Run a worker in a fresh interpreter importing crftk from repo (this checkout or --baseline's);
    returns its result plus the parent's view of it."""
    job_path = os.path.join(workdir, f"job-{tag}.json")
    result_path = os.path.join(workdir, f"result-{tag}.json")
    with open(job_path, "w") as fh:
        json.dump(job, fh)
    env = dict(os.environ)
    env.update(extra_env or {})
    env["PYTHONPATH"] = str(repo) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    la0 = loadavg()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", kind,
                             "--job", job_path, "--result", result_path], env=env, cwd=str(REPO))
    _, status, ru = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"worker {kind} ({tag}) failed with exit code {proc.returncode}")
    with open(result_path) as fh:
        res = json.load(fh)
    res["child_wall_seconds"] = wall
    # wait4's ru_maxrss: includes the parent's RSS carried over the fork+exec (see summarize)
    res["child_maxrss_mb"] = ru.ru_maxrss / 1024
    res["child_user_seconds"] = ru.ru_utime
    res["child_sys_seconds"] = ru.ru_stime
    res["loadavg_start"], res["loadavg_end"] = la0, loadavg()
    res["extra_env"] = extra_env or {}
    return res


def write_subset(src, dst, max_sentences):
    """Copy the first max_sentences sentences of a CoNLL file (to a temp file, never the repo)."""
    from crftk.io.conll import read_sentences
    with open(dst, "w", encoding="utf-8") as out:
        for i, s in enumerate(read_sentences(src)):
            if i >= max_sentences:
                break
            out.write("".join(" ".join(r) + "\n" for r in s.rows) + "\n")


def prepare(args, workdir, train_conll, dev_conll, template_path):
    """Build the crftk feature space in the parent; write CRFsuite attribute files (into workdir)."""
    import numpy as np
    from crftk.io.conll import read_corpus
    from crftk.features.space import FeatureSpace
    from crftk.features.templates import read_template

    if args.max_sentences:
        sub = os.path.join(workdir, "train.subset.txt")
        write_subset(train_conll, sub, args.max_sentences)
        train_conll = sub
    if args.max_dev_sentences:
        sub = os.path.join(workdir, "dev.subset.txt")
        write_subset(dev_conll, sub, args.max_dev_sentences)
        dev_conll = sub

    t0 = time.perf_counter()
    template = read_template(template_path)
    sents = read_corpus(train_conll)
    space, corpus = FeatureSpace.fit(sents, template, min_freq=1, feature_set="supported")
    strings = space.attribute_strings()
    info = {"train_conll": train_conll, "dev_conll": dev_conll, "template": template_path,
            "train_sentences": len(sents), "train_tokens": corpus.n_tokens,
            "labels": space.n_labels, "attributes": space.n_attrs,
            "state_features": space.n_features, "crftk_params": space.n_params,
            "transition_params": space.n_labels ** 2,
            "start_end_params": 2 * space.n_labels,
            "duplicate_attribute_strings": len(strings) - len(set(strings))}
    if info["duplicate_attribute_strings"]:
        note(f"WARNING: {info['duplicate_attribute_strings']} attribute strings are not unique: "
             "CRFsuite merges them, crftk does not")

    def write(path, corp, sentences):
        ptr, attrs = corp.attr_ptr, corp.attrs
        with open(path, "w", encoding="utf-8") as out:
            for s, sl in zip(sentences, corp.sentence_slices()):
                gold = [row[space.label_col] for row in s.rows]
                for k, t in enumerate(range(sl.start, sl.stop)):
                    out.write(gold[k] + "\t" + "\t".join(strings[a] for a in attrs[ptr[t]:ptr[t + 1]]) + "\n")
                out.write("\n")

    # consistency check: the encoded attributes are exactly the CRF++ template strings
    mismatched = 0
    ptr, attrs = corpus.attr_ptr, corpus.attrs
    for s, sl in zip(sents, corpus.sentence_slices()):
        for k, raw in enumerate(crfpp_strings(s.rows, template)):
            t = sl.start + k
            if sorted(raw) != sorted(strings[a] for a in attrs[ptr[t]:ptr[t + 1]]):
                mismatched += 1
    info["train_tokens_whose_attributes_differ_from_crfpp_strings"] = mismatched
    if mismatched:
        note(f"WARNING: {mismatched} training tokens have crftk attributes different from the "
             "CRF++ template strings")

    train_attrs = os.path.join(workdir, "train.crfsuite.tsv")
    write(train_attrs, corpus, sents)
    dev_sents = read_corpus(dev_conll)
    dev_corpus = space.encode(dev_sents)
    dev_attrs = os.path.join(workdir, "dev.crfsuite.tsv")
    write(dev_attrs, dev_corpus, dev_sents)
    try:
        n_raw = sum(len(t) for s in dev_sents for t in crfpp_strings(s.rows, template))
    except Exception:          # a template beyond CRF++'s macros (the NER template's first mentions)
        n_raw = None
    info["dev_sentences"], info["dev_tokens"] = len(dev_sents), dev_corpus.n_tokens
    info["dev_attributes_kept"] = int(dev_corpus.attrs.size)
    info["dev_attributes_raw"] = n_raw
    info["prepare_seconds"] = time.perf_counter() - t0
    note(f"prepared: {info['train_sentences']} sentences, {info['train_tokens']} tokens, "
         f"{info['attributes']} attributes, {info['state_features']} state features, "
         f"{info['labels']} labels; dev {info['dev_tokens']} tokens "
         f"({info['dev_attributes_kept']} of {n_raw} attribute occurrences seen in training)")
    return info, space, corpus, train_attrs, dev_attrs


def crftk_objective_at_crfsuite_weights(space, corpus, model_path, c2, threads):
    """crftk's objective evaluated at the CRFsuite model's weights (start/end weights 0).

    If the objectives (features, L2 convention) agree, this equals CRFsuite's
    final logged loss up to the 6 decimals of CRFsuite's dump.
    """
    import numpy as np
    import pycrfsuite
    from crftk.objectives import Likelihood

    tagger = pycrfsuite.Tagger()
    tagger.open(model_path)
    dump = tagger.info()
    L = space.n_labels
    attr_index = {s: i for i, s in enumerate(space.attribute_strings())}
    lab = space.label_index
    keys = (np.repeat(np.arange(space.n_attrs, dtype=np.int64), np.diff(space.feat_ptr)) * L
            + space.feat_label)
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    w = np.zeros(space.n_params)
    lay = space.layout()
    missing = 0
    q_keys, q_vals = [], []
    for (attr, label), val in dump.state_features.items():
        a = attr_index.get(attr)
        if a is None or label not in lab:
            missing += 1
            continue
        q_keys.append(a * L + lab[label])
        q_vals.append(val)
    q = np.asarray(q_keys, dtype=np.int64)
    pos = np.searchsorted(sorted_keys, q)
    pos = np.minimum(pos, sorted_keys.size - 1)
    found = sorted_keys[pos] == q
    missing += int((~found).sum())
    w[order[pos[found]]] = np.asarray(q_vals)[found]
    t0 = lay["trans"].start
    for (a, b), val in dump.transitions.items():
        w[t0 + lab[a] * L + lab[b]] = val
    value, _ = Likelihood.chain(space, corpus, c2=c2, n_threads=threads)(w)
    return {"crftk_objective_at_crfsuite_weights": float(value),
            "crfsuite_state_features_nonzero": len(dump.state_features),
            "crfsuite_state_features_missing_in_crftk": missing,
            "crfsuite_transitions": len(dump.transitions)}


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def summarize(results):
    tr = results["training"]
    systems = results["systems"]
    med = {}
    for sysname in systems:
        runs = tr[sysname]
        def hwm_minus_import(r):
            hwm = (r.get("rss_end") or {}).get("hwm_mb")
            imp = (r.get("rss_after_import") or r.get("rss_start") or {}).get("rss_mb")
            return None if hwm is None or imp is None else hwm - imp

        med[sysname] = {
            "peak_minus_import": median([hwm_minus_import(r) for r in runs]),
            "iterations": median([r["iterations"] for r in runs]),
            "evaluations": median([r["evaluations"] for r in runs]),
            "s_per_iter": median([r["optimizer_seconds"] / r["iterations"] for r in runs]),
            "s_per_eval": median([r["optimizer_seconds"] / r["evaluations"] for r in runs]),
            "optimizer_seconds": median([r["optimizer_seconds"] for r in runs]),
            "cpu_s_per_iter": median([r["optimizer_cpu_seconds"] / r["iterations"]
                                      if r.get("optimizer_cpu_seconds") else None for r in runs]),
            "load1_start": median([(r.get("loadavg_start") or [None])[0] for r in runs]),
            "objective": median([r["objective"] for r in runs]),
            "child_wall": median([r["child_wall_seconds"] for r in runs]),
            # VmHWM of the child's own address space at its end. ru_maxrss (getrusage or wait4)
            # is not used: Linux carries the forking parent's high-water mark over exec, so it
            # reports at least the parent's RSS.
            "peak_rss": median([(r.get("rss_end") or {}).get("hwm_mb") or r["child_maxrss_mb"]
                                for r in runs]),
            "rss_after_load": median([(r.get("rss_after_load") or {}).get("rss_mb") for r in runs]),
            "rss_after_import": median([(r.get("rss_after_import") or r.get("rss_start") or {}).get("rss_mb")
                                        for r in runs]),
        }
    results["medians"] = med
    base = med["crfsuite"]
    crftk = [s for s in systems if s != "crfsuite"]
    tag = results["tagging"]
    f1 = {"crfsuite": tag["crfsuite"]["f1"]}
    for s in crftk:    # crftk tag + crftk eval of each checkout (older results: the tag worker's F1)
        f1[s] = (results.get("f1") or {}).get(s, {}).get("f1") or (tag.get("crftk") or {}).get("f1", {}).get(s)

    lines = []
    head = "| training (median of %d) | crfsuite | " % results["config"]["repeats"]
    head += " | ".join(crftk) + " | " + " | ".join(f"{s} / crfsuite" for s in crftk) + " |"
    lines.append(head)
    lines.append("|" + "---|" * (2 + 2 * len(crftk)))

    def row(label, key, spec, with_ratio):
        cells = [fmt(base[key], spec)] + [fmt(med[s][key], spec) for s in crftk]
        rs = [fmt(ratio(med[s][key], base[key]), ".2f") if with_ratio else "" for s in crftk]
        lines.append(f"| {label} | " + " | ".join(cells + rs) + " |")

    row("L-BFGS iterations run", "iterations", ".0f", False)
    row("objective evaluations", "evaluations", ".0f", True)
    row("seconds / iteration", "s_per_iter", ".3f", True)
    row("seconds / evaluation", "s_per_eval", ".3f", True)
    row("CPU seconds / iteration (all threads)", "cpu_s_per_iter", ".3f", True)
    row("optimizer seconds", "optimizer_seconds", ".1f", True)
    row("final objective", "objective", ".3f", True)
    row("child wall seconds (whole process)", "child_wall", ".1f", True)
    row("peak RSS MB (child's VmHWM)", "peak_rss", ".0f", True)
    row("peak RSS MB minus RSS after imports", "peak_minus_import", ".0f", True)
    row("RSS MB after data loading", "rss_after_load", ".0f", True)
    row("RSS MB after imports", "rss_after_import", ".0f", False)
    row("1-min load average at start", "load1_start", ".2f", False)
    cells = [fmt(f1["crfsuite"], ".2f")] + [fmt(f1[s], ".2f") for s in crftk]
    rs = [fmt(f1[s] - f1["crfsuite"] if f1[s] is not None and f1["crfsuite"] is not None else None, "+.2f")
          for s in crftk]
    lines.append(f"| {results.get('dev_name', 'dev')} chunk F1 (after: minus crfsuite's) | " + " | ".join(cells + rs)
                 + " |")

    lines.append("")
    lines.append("| tagging %s (median of %d) | tokens/s | crfsuite / this (< 1: this is faster) |"
                 % (results.get("dev_name", "dev.txt"), results["config"]["tag_repeats"]))
    lines.append("|---|---|---|")
    cs = tag["crfsuite"]
    base_tps = cs["attr_lists"]["tokens_per_s"]
    lines.append(f"| crfsuite Tagger.tag, attribute lists (unseen dropped) | {base_tps:,.0f} | 1.00 |")
    for key, label in (("item_sequences", "crfsuite Tagger.tag, pre-built ItemSequence"),
                       ("raw_strings", "crfsuite Tagger.tag, raw CRF++ strings (unseen kept)")):
        if key not in cs:
            continue
        tps = cs[key]["tokens_per_s"]
        lines.append(f"| {label} | {tps:,.0f} | {base_tps / tps:.2f} |")
    ck = tag.get("crftk") or {}
    for nt in results["config"]["threads"] if ck else ():
        for key, label in ((f"viterbi_t{nt}", f"crftk Viterbi on pre-encoded dev, {nt} thread(s)"),
                           (f"end_to_end_t{nt}", f"crftk Tagger.tag from sentences (encode + Viterbi), "
                                                 f"{nt} thread(s)")):
            tps = ck[key]["tokens_per_s"]
            lines.append(f"| {label} | {tps:,.0f} | {base_tps / tps:.2f} |")
    return "\n".join(lines)


CORPORA = {  # name: (data option, training file, development file, template, dev name)
    "conll2000": ("data", "train.txt", "dev.txt", DEFAULT_TEMPLATE, "dev.txt"),
    "conll2003": ("ner_data", "eng.train", "eng.testa", NER_TEMPLATE, "eng.testa"),
}


def cli_f1(repo, model, dev, workdir, tag):
    """F1 and token accuracy of a model on dev through `crftk tag` and `crftk eval` of the checkout repo
    (the CLI rather than internal APIs, which a newer checkout may change)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(repo) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    tagged = os.path.join(workdir, f"{tag}.tagged")
    cli = [sys.executable, "-m", "crftk.cli"]
    subprocess.run(cli + ["tag", "-m", model, "-p", "2", "-o", tagged, dev], env=env, cwd=str(repo), check=True)
    out = subprocess.run(cli + ["eval", "--json", tagged], env=env, cwd=str(repo), check=True,
                         capture_output=True, text=True).stdout
    d = json.loads(out)
    return {"f1": d["overall"]["f1"], "token_accuracy": d["token_accuracy"]}


def bench_corpus(args, name, workdir, threads):
    """Train every system on one corpus (interleaved repeats); tag its development file; F1."""
    opt, train_file, dev_file, template, dev_name = CORPORA[name]
    data = getattr(args, opt)
    workdir = os.path.join(workdir, name)
    os.makedirs(workdir)
    note(f"{name}: preparing (load {loadavg()})")
    info, space, corpus, train_attrs, dev_attrs = prepare(args, workdir, os.path.join(data, train_file),
                                                          os.path.join(data, dev_file), template)
    results = {"config": dict(args.config, template=template, data=data), "data": info, "dev_name": dev_name,
               "loadavg_start": loadavg()}
    repo_of = {"crftk": REPO, "crftk-base": args.baseline}
    systems = ["crfsuite"] + [f"crftk-t{nt}" for nt in threads]
    if args.baseline:
        systems += [f"crftk-base-t{nt}" for nt in threads]
    if args.blas1:
        systems += [f"crftk-t{nt}-blas1" for nt in threads]
    results["systems"] = systems
    results["training"] = {s: [] for s in systems}
    models = {}
    common = {"iterations": args.iterations, "c2": args.c2, "template": template,
              "crfsuite_epsilon": args.epsilon, "crfsuite_delta": args.epsilon, "crftk_epsilon": args.epsilon}
    for rep in range(args.repeats):
        for s in systems:
            model_path = os.path.join(workdir, f"{s}-{rep}.model")
            note(f"{name} repeat {rep + 1}/{args.repeats}: training {s} (load {loadavg()})")
            if s == "crfsuite":
                res = spawn("train-crfsuite", dict(common, train_attrs=train_attrs, model_path=model_path),
                            workdir, f"{s}-{rep}")
            else:
                job = dict(common, train_conll=info["train_conll"], model_path=model_path,
                           threads=int(s.split("-t")[1].split("-")[0]))
                env = BLAS1_ENV if s.endswith("-blas1") else None
                res = spawn("train-crftk", job, workdir, f"{s}-{rep}", env,
                            repo_of["crftk-base" if s.startswith("crftk-base") else "crftk"])
            res["repeat"] = rep
            results["training"][s].append(res)
            models.setdefault(s, model_path)
            note(f"  {s}: {res['iterations']} iterations, {res['evaluations']} evaluations, "
                 f"{res['optimizer_seconds'] / res['iterations']:.3f} s/iter, objective "
                 f"{res['objective']:.4f}, peak RSS {(res.get('rss_end') or {}).get('hwm_mb') or 0:.0f} MB")

    try:
        note("objective cross-check: crftk's objective at CRFsuite's final weights")
        check = crftk_objective_at_crfsuite_weights(space, corpus, models["crfsuite"], args.c2, max(threads))
        check["crfsuite_final_loss"] = results["training"]["crfsuite"][0]["objective"]
        check["crfsuite_n_features"] = results["training"]["crfsuite"][0].get("n_features_crfsuite")
        check["crftk_state_plus_transition_features"] = info["state_features"] + info["transition_params"]
        results["objective_check"] = check
    except Exception as e:      # internal APIs this checkout may have changed: the check is optional
        results["objective_check"] = {"error": repr(e)}
    note(f"{name}: F1 of each crftk model on {dev_name} (crftk tag + crftk eval of its checkout)")
    results["f1"] = {s: cli_f1(repo_of["crftk-base" if s.startswith("crftk-base") else "crftk"], models[s],
                               info["dev_conll"], workdir, s) for s in systems if s != "crfsuite"}
    results["tagging"] = {}
    results["tagging"]["crfsuite"] = spawn(
        "tag-crfsuite", {"dev_attrs": dev_attrs, "dev_conll": info["dev_conll"], "template": template,
                         "model_path": models["crfsuite"], "tag_repeats": args.tag_repeats}, workdir, "tag-crfsuite")
    if args.tag_speed:
        try:
            results["tagging"]["crftk"] = spawn(
                "tag-crftk", {"dev_conll": info["dev_conll"], "models": {f"crftk-t{threads[0]}": models[
                    f"crftk-t{threads[0]}"]}, "threads": threads, "tag_repeats": args.tag_repeats}, workdir, "tag-crftk")
        except SystemExit as e:    # in-process tag timing uses internal APIs: optional
            note(f"crftk tag timing skipped: {e}")
    results["loadavg_end"] = loadavg()
    results["table_markdown"] = summarize(results)
    return results


def report(all_results):
    """Markdown of a run over the corpora: per corpus the training table, then the before/after summary."""
    cfg = all_results["config"]
    lines = [f"# crftk against python-crfsuite ({cfg['started']})", "",
             f"`{cfg['command']}`; {cfg['iterations']} L-BFGS iterations"
             + (" (to convergence: epsilon 1e-5, --converge)" if cfg.get("converge") else "")
             + f", c2={cfg['c2']}, medians of {cfg['repeats']} runs, interleaved; {cfg['cpus']} CPUs; python-crfsuite "
             f"{cfg['pycrfsuite']}; commit {cfg.get('crftk_commit', '')[:10]}"
             + (f"; before: {cfg['baseline']} ({cfg.get('baseline_commit', '')[:10]})" if cfg.get("baseline") else "")
             + ". Load: the 1-minute average at each run's start is in the tables.", ""]
    summary = ["| corpus | threads | s/iter crfsuite | s/iter before | s/iter after | after / crfsuite (goal <= 0.30) "
               "| peak MB crfsuite | peak MB before | peak MB after (goal <= 100, CoNLL-2000) | F1 crfsuite "
               "| F1 before | F1 after | after - before, points (issue: within 0.02) |",
               "|" + "---|" * 13]
    for name, res in all_results["corpora"].items():
        lines += [f"## {name}: {res['data']['train_sentences']:,} sentences, {res['data']['train_tokens']:,} tokens, "
                  f"{res['data']['crftk_params']:,} parameters ({os.path.basename(res['config']['template'])}); "
                  f"F1 on {res['dev_name']}", "", res["table_markdown"], ""]
        med, f1 = res["medians"], res.get("f1", {})
        crf = med["crfsuite"]
        for nt in cfg["threads"]:
            a, b = med.get(f"crftk-t{nt}"), med.get(f"crftk-base-t{nt}")
            fa, fb = (f1.get(f"crftk-t{nt}") or {}).get("f1"), (f1.get(f"crftk-base-t{nt}") or {}).get("f1")
            fc = res["tagging"]["crfsuite"]["f1"]
            summary.append(" | ".join([
                f"| {name}", str(nt), fmt(crf["s_per_iter"], ".3f"), fmt(b and b["s_per_iter"], ".3f"),
                fmt(a["s_per_iter"], ".3f"), fmt(ratio(a["s_per_iter"], crf["s_per_iter"]), ".2f"),
                fmt(crf["peak_rss"], ".0f"), fmt(b and b["peak_rss"], ".0f"), fmt(a["peak_rss"], ".0f"),
                fmt(fc, ".2f"), fmt(fb, ".2f"), fmt(fa, ".2f"),
                fmt(fa - fb if fa is not None and fb is not None else None, "+.2f")]) + " |")
    lines += ["## Summary", ""] + summary + [""]
    if all_results.get("floor"):
        lines += ["## Memory-traffic floor (benchmarks/floor.py)", "", all_results["floor"], ""]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="CoNLL-2000 directory with train.txt and dev.txt (env CONLL2000; "
                        "default ../shared/data/conll2000 from the repo root)")
    p.add_argument("--ner-data", default=DEFAULT_NER_DATA,
                   help="CoNLL-2003 directory with eng.train and eng.testa (env CONLL2003)")
    p.add_argument("--corpora", default="conll2000", type=lambda x: [c for c in x.split(",") if c],
                   help="comma-separated: conll2000 (CRF++ template, dev.txt), conll2003 (NER template, eng.testa)")
    p.add_argument("--template", default=DEFAULT_TEMPLATE, help="CoNLL-2000's template")
    p.add_argument("--iterations", type=int, default=100)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tag-repeats", type=int, default=5)
    p.add_argument("--threads", default="1,2", help="crftk thread counts, comma-separated")
    p.add_argument("--c2", type=float, default=1.0)
    p.add_argument("--max-sentences", type=int, default=0, help="train on the first N sentences only")
    p.add_argument("--max-dev-sentences", type=int, default=0)
    p.add_argument("--baseline", metavar="DIR", help="another crftk checkout (built in place) trained "
                   "interleaved with this one: the 'before' columns (s/iter, peak RSS, F1)")
    p.add_argument("--converge", action="store_true",
                   help="train to convergence (epsilon 1e-5 for both, at most --iterations, default then 1000; "
                        "one repeat, 2 threads): the F1 within 0.02 check")
    p.add_argument("--no-tag-speed", dest="tag_speed", action="store_false",
                   help="skip crftk's in-process tagging timings")
    p.add_argument("--out", default=None, help="JSON file for all raw numbers")
    p.add_argument("--md", default=None, help="markdown file for the tables")
    p.add_argument("--quick", action="store_true",
                   help="smoke test: 1,000 training sentences, 300 dev, 10 iterations, 1 repeat")
    p.add_argument("--no-blas1", dest="blas1", action="store_false",
                   help="skip the crftk runs with OPENBLAS_NUM_THREADS=1 (and the other BLAS "
                        "thread variables) set to 1")
    p.add_argument("--keep-tmp", action="store_true", help="keep the temporary directory")
    p.add_argument("--summarize", metavar="JSON",
                   help="print (and store in the file) the table of an existing results file")
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--job", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        run_worker(args.worker, args.job, args.result)
        return 0

    if args.summarize:
        with open(args.summarize) as fh:
            results = json.load(fh)
        if "corpora" in results:
            for res in results["corpora"].values():
                res["table_markdown"] = summarize(res)
            text = report(results)
        else:
            text = results["table_markdown"] = summarize(results)
        with open(args.summarize, "w") as fh:
            json.dump(results, fh, indent=1)
        print(text)
        return 0

    if args.quick:
        args.iterations, args.repeats, args.tag_repeats = 10, 1, 2
        args.max_sentences = args.max_sentences or 1000
        args.max_dev_sentences = args.max_dev_sentences or 300
    args.epsilon = 0.0
    if args.converge:
        args.epsilon, args.repeats, args.blas1, args.tag_speed = 1e-5, 1, False, False
        if "--iterations" not in " ".join(argv if argv is not None else sys.argv):
            args.iterations = 1000
        args.threads = "2"
    threads = [int(x) for x in args.threads.split(",") if x]
    bad = [c for c in args.corpora if c not in CORPORA]
    if bad:
        p.error(f"unknown corpora {bad}: choose from {', '.join(CORPORA)}")
    for c in args.corpora:
        opt, train_file, dev_file = CORPORA[c][:3]
        setattr(args, opt, os.path.abspath(getattr(args, opt)))
        for f in (train_file, dev_file):
            if not os.path.isfile(os.path.join(getattr(args, opt), f)):
                p.error(f"{os.path.join(getattr(args, opt), f)} not found (--data/CONLL2000, --ner-data/CONLL2003)")
    if args.baseline and not os.path.isdir(os.path.join(args.baseline, "crftk")):
        p.error(f"--baseline {args.baseline}: no crftk checkout there")
    CORPORA["conll2000"] = CORPORA["conll2000"][:3] + (args.template,) + CORPORA["conll2000"][4:]

    import pycrfsuite  # noqa: F401 (fail early when the reference is missing)
    sys.path.insert(0, str(REPO))
    workdir = tempfile.mkdtemp(prefix="crftk-bench-")
    note(f"work directory {workdir}; load average {loadavg()}")
    args.config = {"iterations": args.iterations, "repeats": args.repeats, "tag_repeats": args.tag_repeats,
                   "threads": threads, "c1": 0.0, "c2": args.c2, "quick": args.quick, "converge": args.converge,
                   "max_sentences": args.max_sentences, "max_dev_sentences": args.max_dev_sentences,
                   "crfsuite_epsilon": args.epsilon, "crfsuite_delta": args.epsilon, "crftk_epsilon": args.epsilon,
                   "python": sys.version.split()[0], "pycrfsuite": _dist_version("python-crfsuite"),
                   "cpus": os.cpu_count(), "command": " ".join([os.path.basename(sys.executable)] + sys.argv),
                   "baseline": args.baseline, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    for key, repo in (("crftk_commit", REPO), ("baseline_commit", args.baseline)):
        if repo:
            git = subprocess.run(["git", "rev-parse", "HEAD"], cwd=str(repo), capture_output=True, text=True)
            args.config[key] = git.stdout.strip() or None
    all_results = {"config": args.config, "loadavg_start": loadavg(), "corpora": {}}
    try:
        for name in args.corpora:
            all_results["corpora"][name] = bench_corpus(args, name, workdir, threads)
            print(all_results["corpora"][name]["table_markdown"], flush=True)
        all_results["loadavg_end"] = loadavg()
        text = report(all_results)
        if args.out:
            with open(args.out, "w") as fh:
                json.dump(all_results, fh, indent=1)
            note(f"wrote {args.out}")
        if args.md:
            with open(args.md, "w") as fh:
                fh.write(text + "\n")
        print(text)
        note(f"load average at the end {loadavg()}")
    finally:
        if args.keep_tmp:
            note(f"kept {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
