#!/usr/bin/env python
"""Whole-pipeline speed: `crftk tag` and training as a user runs them, beside python-crfsuite.

Measured in one run on one machine (issue 19):

* **tag**: ``python -m crftk.cli tag -m MODEL -p T -o OUT BIG`` as a whole process, where BIG
  is CoNLL-2000 dev.txt concatenated ``--copies`` times (20: 887k tokens; made in a temporary
  directory, never kept) and MODEL is trained on train.txt with the CRF++ chunking template.
  Median of ``--repeats`` runs at 1 and 2 threads, the runs interleaved. Beside it,
  python-crfsuite's ``Tagger.tag`` on the same attributes already extracted (prebuilt
  ``ItemSequence`` objects of the same tokens), in its own process, median of the same repeats.
  Peak RSS of each tag process (``/usr/bin/time``'s child, or ``wait4``). The outputs of all
  runs must be byte-identical (their SHA-256 is recorded).
* **profile**: the stages of the tagging pipeline in one process at 1 thread: read, extract
  (encode), decode (Viterbi), write (format the output), in seconds.
* **train**: reading + encoding of train.txt (``FeatureSpace.fit`` over ``iter_corpus``, as training reads)
  in seconds and its peak RSS; then L-BFGS training at 2 threads for ``--iterations``
  iterations, crftk (whole process from the CoNLL file) against python-crfsuite (on the
  attribute strings of crftk's feature space), seconds per iteration and peak RSS,
  ``--train-repeats`` runs each, interleaved.
* **bandwidth**: one gather of every active state weight (and start/end weights) of the
  training corpus with crftk's Cython ``Lattices.state_matrix`` kernel, and, in numpy, one
  gather ``np.take(w, idx)`` plus one scatter ``g[idx] += v`` over the same feature indices
  (in chunks that stay in cache); the bytes they move and the seconds: the floor of one
  training pass's memory traffic.
* **ner** (``--ner``): the same training figures for CoNLL-2003 eng.train with
  templates/conll2003-ner.tmpl.

* **before/after** (``--baseline DIR``): another crftk checkout, built in place (for
  instance the main branch's), measured interleaved with this one in every crftk figure
  (tag, profile, read + encode, training, NER), as "before"; the tag outputs of both must
  be byte-identical.

The machine's 1-minute load average is recorded before each group: timings on a shared
machine are noisy, compare figures from the same run only.

Usage::

    python benchmarks/pipeline.py [--data DIR] [--ner-data DIR] [--repeats 5] [--iterations 30]
        [--sections tag,profile,train,bandwidth] [--ner] [--baseline DIR]
        [--out benchmarks/results/pipeline]
"""

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from bench_crfsuite import read_attr_file     # the same attribute files as that benchmark

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(REPO, "..", "shared", "data")
CHUNK_TEMPLATE = os.path.join(REPO, "templates", "chunking-crfpp.tmpl")
NER_TEMPLATE = os.path.join(REPO, "templates", "conll2003-ner.tmpl")
SECTIONS = ("tag", "profile", "train", "bandwidth")


def note(msg):
    print(f"[pipeline {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def loadavg():
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def hwm_mb():
    """This process's peak RSS (VmHWM) in MB."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def env_with_repo(repo=REPO):
    """The environment of a child that imports crftk from repo (this checkout, or --baseline's)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = repo + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


# ----------------------------------------------------------------- workers (child processes)

def worker_prepare(job):
    """crftk's feature space on the training file; its attribute strings for CRFsuite."""
    from crftk.features.space import FeatureSpace
    from crftk.features.templates import read_template
    from crftk.io.conll import iter_corpus, read_corpus

    template = read_template(job["template"])
    space, corpus = FeatureSpace.fit(iter_corpus(job["train"]), template)
    strings = space.attribute_strings()

    def write(path, corp, sentences):
        ptr, attrs = corp.attr_ptr, corp.attrs
        with open(path, "w", encoding="utf-8") as out:
            for k, sl in enumerate(corp.sentence_slices()):
                gold = [row[space.label_col] for row in sentences[k].rows] if sentences else None
                for i, t in enumerate(range(sl.start, sl.stop)):
                    label = gold[i] if gold else space.labels[corp.labels[t]]
                    out.write(label + "\t" + "\t".join(strings[a] for a in attrs[ptr[t]:ptr[t + 1]]) + "\n")
                out.write("\n")

    write(job["train_attrs"], corpus, None)
    if job.get("dev"):
        dev = read_corpus(job["dev"])
        write(job["dev_attrs"], space.encode(dev), dev)
    return {"attributes": space.n_attrs, "state_features": space.n_features, "labels": space.n_labels,
            "params": space.n_params, "tokens": corpus.n_tokens, "sentences": corpus.n_sentences}


def worker_encode(job):
    """Reading + encoding of a training file, as training does it: seconds and peak RSS."""
    t0 = time.perf_counter()
    from crftk.features.space import FeatureSpace
    from crftk.features.templates import read_template
    from crftk.io.conll import iter_corpus
    t_import = time.perf_counter() - t0
    rss_import = hwm_mb()
    template = read_template(job["template"])
    t = time.perf_counter()
    space, corpus = FeatureSpace.fit(iter_corpus(job["train"]), template)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "import_seconds": t_import, "peak_mb": hwm_mb(), "import_mb": rss_import,
            "tokens": corpus.n_tokens, "attributes": space.n_attrs, "features": space.n_features}


def worker_train_crftk(job):
    from crftk.commands.train import train
    marks = {}
    t0 = time.perf_counter()

    def log(msg):
        marks.setdefault("first", time.perf_counter() - t0)

    model = train([job["train"]], job["template"], job["model"], log=log, threads=job["threads"],
                  max_iter=job["iterations"], c1=0.0, c2=1.0, epsilon=0.0, period=10, history=6,
                  min_freq=1, feature_set="supported")
    info = model.info
    return {"iterations": info["iterations"], "evaluations": info["evaluations"],
            "optimizer_seconds": info["seconds"], "s_per_iter": info["seconds"] / max(1, info["iterations"]),
            "load_seconds": marks.get("first"), "whole_seconds": time.perf_counter() - t0,
            "objective": info["objective"], "peak_mb": hwm_mb()}


def worker_train_crfsuite(job):
    import pycrfsuite
    marks = {"featgen_end": None, "iterations": []}

    class Timed(pycrfsuite.Trainer):
        def message(self, message):
            event = self.logparser.feed(message)
            if event == "featgen_end":
                marks["featgen_end"] = time.perf_counter()
            elif event == "iteration":
                marks["iterations"].append(time.perf_counter())

    trainer = Timed(algorithm="lbfgs", verbose=False)
    trainer.set_params({"c1": 0.0, "c2": 1.0, "max_iterations": job["iterations"], "num_memories": 6,
                        "epsilon": 0.0, "delta": 0.0, "period": 10, "feature.possible_transitions": True,
                        "feature.possible_states": False, "feature.minfreq": 0.0})
    t0 = time.perf_counter()
    for xseq, yseq in read_attr_file(job["train_attrs"]):
        trainer.append(xseq, yseq)
    load = time.perf_counter() - t0
    trainer.train(job["model"])
    its = marks["iterations"]
    opt = its[-1] - marks["featgen_end"] if its and marks["featgen_end"] else None
    lp = trainer.logparser
    return {"iterations": len(its), "evaluations": 1 + sum(it.get("linesearch_trials", 0) for it in lp.iterations),
            "optimizer_seconds": opt, "s_per_iter": opt / len(its) if opt else None, "load_seconds": load,
            "objective": lp.iterations[-1]["loss"] if lp.iterations else None, "peak_mb": hwm_mb()}


def worker_tag_crfsuite(job):
    """python-crfsuite's Tagger.tag on attributes already extracted, copies x dev."""
    import pycrfsuite
    xseqs = [x for x, _ in read_attr_file(job["dev_attrs"])]
    items = [pycrfsuite.ItemSequence(x) for x in xseqs] * job["copies"]
    tokens = sum(len(x) for x in xseqs) * job["copies"]
    tagger = pycrfsuite.Tagger()
    tagger.open(job["model"])
    tag = tagger.tag
    t, cpu = time.perf_counter(), time.process_time()
    for x in items:
        tag(x)
    seconds = time.perf_counter() - t
    return {"seconds": seconds, "tokens": tokens, "tokens_per_s": tokens / seconds, "peak_mb": hwm_mb(),
            "cpu_seconds": time.process_time() - cpu}


def worker_profile(job):
    """Seconds of each stage of tagging BIG at 1 thread, in one process."""
    from crftk.model import Model
    model = Model.load(job["model"])
    try:
        from crftk.io.conll import read_batches         # noqa: F401 (the compiled pipeline, when present)
        profile_stages = compiled_profile_stages
    except ImportError:
        profile_stages = legacy_profile_stages
    return profile_stages(model, job["input"], threads=job.get("threads", 1))


def compiled_profile_stages(model, path, threads=1):
    """The stages of the compiled pipeline (read_batches, encode_raw, Viterbi, format_rows), one thread."""
    from crftk.commands.tag import Tagger, format_batch
    from crftk.io.conll import Layout, read_batches
    space = model.space
    tagger = Tagger(model, threads=threads)
    labels = tagger.labels.tolist()
    seconds = dict.fromkeys(("read", "extract", "decode", "write"), 0.0)
    layout = Layout()
    batches = read_batches(path, n_columns={space.n_columns, space.n_columns - 1}, layout=layout)
    clock = time.perf_counter
    t_all = clock()
    space.raw_encoder()
    with open(os.devnull, "wb") as out:
        while True:
            t = clock()
            b = next(batches, None)
            seconds["read"] += clock() - t
            if b is None:
                break
            t = clock()
            corpus = space.encode_raw(b)
            seconds["extract"] += clock() - t
            t = clock()
            pred, _ = tagger.structure.bind(corpus, threads).best(tagger.weights)
            seconds["decode"] += clock() - t
            t = clock()
            out.write(format_batch(b, pred, [labels], layout.separator))
            seconds["write"] += clock() - t
    return {"stages": list(seconds), "seconds": seconds, "total": clock() - t_all}


def legacy_profile_stages(model, path, threads=1):
    """The stages of the pure-Python pipeline (read_sentences, encode, Viterbi, write_batch's text)."""
    from crftk.commands.tag import Tagger, _rows_text
    from crftk.io.conll import Layout, chunked, read_sentences
    space = model.space
    allowed = {space.n_columns, space.n_columns - 1}
    tagger = Tagger(model, threads=threads)
    seconds = dict.fromkeys(("read", "extract", "decode", "write"), 0.0)
    layout = Layout()
    batches = chunked(read_sentences(path, n_columns=allowed, passthrough=True, layout=layout), 50_000)
    clock = time.perf_counter
    t_all = clock()
    with open(os.devnull, "w") as out:
        while True:
            t = clock()
            batch = next(batches, None)
            seconds["read"] += clock() - t
            if batch is None:
                break
            sents = [s for s in batch if not isinstance(s, str)]
            t = clock()
            corpus = space.encode(sents)
            seconds["extract"] += clock() - t
            t = clock()
            inf = tagger.structure.bind(corpus, threads)
            pred, _ = inf.best(tagger.weights)
            seconds["decode"] += clock() - t
            t = clock()
            labels = tagger.labels
            for s, sl in zip(sents, corpus.sentence_slices()):
                out.write(_rows_text(s.rows, [[lab] for lab in labels[pred[sl]].tolist()], layout.separator))
            seconds["write"] += clock() - t
    return {"stages": list(seconds), "seconds": seconds, "total": clock() - t_all}


def worker_bandwidth(job):
    """One gather of the active weights (Cython) and a numpy gather + scatter over them."""
    import numpy as np
    from crftk.model import Model
    from crftk.io.conll import read_corpus
    from crftk.structures.chain import chain_lattices
    model = Model.load(job["model"])
    space = model.space
    corpus = space.encode(read_corpus(job["train"]))
    lat = chain_lattices(space, corpus)
    w = np.ascontiguousarray(model.weights, dtype=np.float64)
    if w.size != lat.n_params:
        w = np.random.default_rng(0).standard_normal(lat.n_params)
    res = {"tokens": corpus.n_tokens, "attribute_occurrences": int(corpus.attrs.size),
           "params": int(lat.n_params)}
    fp = np.asarray(space.feat_ptr, dtype=np.int64)
    a = np.asarray(corpus.attrs, dtype=np.int64)
    counts = fp[a + 1] - fp[a]
    starts = np.repeat(fp[a] - (np.cumsum(counts) - counts), counts)
    idx = (starts + np.arange(int(counts.sum()))).astype(np.int64)
    res["feature_occurrences"] = int(idx.size)
    # bytes a pass must move at least: per occurrence an 8-byte weight (gather) or a
    # read-modify-write of an 8-byte gradient (scatter), a 4-byte label and index each
    res["gather_bytes"] = int(idx.size * (8 + 4 + 4))
    res["scatter_bytes"] = int(idx.size * (16 + 4 + 4))

    def best(fn, reps=5):
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    res["cython_state_matrix_seconds"] = best(lambda: lat.state_matrix(w))
    chunk = 1 << 16
    buf = np.empty(chunk)
    g = np.zeros_like(w)

    def gather():
        for i in range(0, idx.size, chunk):
            part = idx[i:i + chunk]
            np.take(w, part, out=buf[:part.size])

    def scatter():
        for i in range(0, idx.size, chunk):
            part = idx[i:i + chunk]
            g[part] += buf[:part.size]     # duplicates collapse: the traffic is the same

    res["numpy_gather_seconds"] = best(gather)
    res["numpy_scatter_seconds"] = best(scatter)
    big = np.ones(1 << 25)
    res["numpy_stream_copy_gb_s"] = 2 * big.nbytes / best(lambda: big.copy()) / 1e9
    return res


WORKERS = {name[len("worker_"):]: fn for name, fn in globals().items() if name.startswith("worker_")}


def spawn(kind, job, workdir, repo=REPO):
    """Run a worker of this file in a fresh interpreter importing crftk from repo; returns its result."""
    tag = f"{kind}-{len(os.listdir(workdir))}"
    job_path, result_path = os.path.join(workdir, f"{tag}.job"), os.path.join(workdir, f"{tag}.json")
    with open(job_path, "w") as fh:
        json.dump(job, fh)
    t = time.perf_counter()
    subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", kind, "--job", job_path,
                    "--result", result_path], check=True, env=env_with_repo(repo), cwd=REPO)
    with open(result_path) as fh:
        res = json.load(fh)
    res["child_seconds"] = time.perf_counter() - t
    return res


# ----------------------------------------------------------------- whole-process tagging

def time_tag(model, inp, out, threads, repo=REPO, extra=()):
    """Run `crftk tag` as a user does (with ``extra`` options); (wall seconds, peak RSS MB, sha256 of
    the output, CPU seconds)."""
    cmd = [sys.executable, "-m", "crftk.cli", "tag", "-m", str(model), "-p", str(threads), *extra, "-o", str(out),
           str(inp)]
    gnu_time = shutil.which("time") if os.path.exists("/usr/bin/time") else None
    if gnu_time:
        cmd = [gnu_time, "-f", "%M %U %S"] + cmd
    t = time.perf_counter()
    # cwd: `python -m` puts the working directory first on sys.path, before PYTHONPATH
    proc = subprocess.run(cmd, env=env_with_repo(repo), cwd=repo, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"crftk tag failed: {proc.stderr}")
    peak = cpu = None
    if gnu_time:
        kb, user, system = proc.stderr.strip().splitlines()[-1].split()
        peak, cpu = int(kb) / 1024, float(user) + float(system)
    with open(out, "rb") as fh:
        digest = hashlib.sha256(fh.read()).hexdigest()
    return seconds, peak, digest, cpu


# ----------------------------------------------------------------- parent

def make_big(dev, copies, path):
    with open(dev, "rb") as fh:
        data = fh.read()
    with open(path, "wb") as out:
        for _ in range(copies):
            out.write(data)


def run(args):
    workdir = tempfile.mkdtemp(prefix="crftk-pipeline-")
    res = {"config": {"copies": args.copies, "repeats": args.repeats, "iterations": args.iterations,
                      "train_repeats": args.train_repeats, "sections": args.sections, "cpus": os.cpu_count(),
                      "python": sys.version.split()[0], "started": time.strftime("%Y-%m-%d %H:%M:%S")}}
    try:
        git = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
        res["config"]["commit"] = git.stdout.strip()
    except OSError:
        pass
    try:
        train, dev = (os.path.join(args.data, f) for f in ("train.txt", "dev.txt"))
        big = os.path.join(workdir, "big.txt")
        make_big(dev, args.copies, big)
        files = {"train": train, "template": CHUNK_TEMPLATE, "dev": dev,
                 "train_attrs": os.path.join(workdir, "train.attrs"), "dev_attrs": os.path.join(workdir, "dev.attrs")}
        note(f"preparing CRFsuite attributes (load {loadavg()})")
        res["data"] = spawn("prepare", files, workdir)
        res["load_start"] = loadavg()
        models = {"crftk": os.path.join(workdir, "crftk.model"), "crfsuite": os.path.join(workdir, "crfsuite.model")}

        # crftk-base: the --baseline checkout, run interleaved with this one
        base = args.baseline
        res["config"]["baseline"] = base
        repo_of = {"crftk": REPO, "crftk-base": base}
        crftks = ["crftk"] + (["crftk-base"] if base else [])
        models["crftk-base"] = os.path.join(workdir, "crftk-base.model")
        res["train"] = {k: [] for k in ["crfsuite"] + crftks}
        reps = args.train_repeats if "train" in args.sections else 1
        iters = args.iterations if "train" in args.sections else min(args.iterations, 30)
        for rep in range(reps):
            for system in ["crfsuite"] + crftks:
                job = dict(files, iterations=iters, threads=2, model=models[system])
                note(f"training {system} ({iters} iterations, load {loadavg()})")
                r = spawn("train_crfsuite" if system == "crfsuite" else "train_crftk", job, workdir,
                          repo_of.get(system, REPO))
                r["load"] = loadavg()
                res["train"][system].append(r)
                note(f"  {system}: {r['s_per_iter']:.3f} s/iter, peak {r['peak_mb']:.0f} MB")
        if "train" in args.sections:
            res["encode"] = []
            res["encode_base"] = []
            for rep in range(args.train_repeats):
                for system in crftks:
                    r = spawn("encode", files, workdir, repo_of[system])
                    r["load"] = loadavg()
                    res["encode" if system == "crftk" else "encode_base"].append(r)
                    note(f"{system} read+encode train.txt: {r['seconds']:.2f} s, peak {r['peak_mb']:.0f} MB")

        if "tag" in args.sections:
            res["tag"] = {"crftk-t1": [], "crftk-t2": [], "crfsuite": []}
            res["tag"].update({f"crftk-base-t{t}": [] for t in (1, 2) if base})
            for rep in range(args.repeats):
                for t in (1, 2):
                    for system in crftks:
                        la = loadavg()
                        # one model for both checkouts: the kernels, not the weights, differ
                        s, peak, digest, cpu = time_tag(models["crftk"], big, os.path.join(workdir, "out.txt"), t,
                                                        repo_of[system])
                        res["tag"][f"{system}-t{t}"].append({"seconds": s, "peak_mb": peak, "sha256": digest,
                                                             "load": la, "cpu_seconds": cpu})
                        note(f"{system} tag -p {t}: {s:.2f} s, CPU {cpu} s (load {la})")
                la = loadavg()
                r = spawn("tag_crfsuite", {"dev_attrs": files["dev_attrs"], "copies": args.copies,
                                           "model": models["crfsuite"]}, workdir)
                r["load"] = la
                res["tag"]["crfsuite"].append(r)
                note(f"crfsuite Tagger.tag: {r['seconds']:.2f} s")
            res["tag_tokens"] = res["tag"]["crfsuite"][0]["tokens"]
            digests = {r["sha256"] for k in res["tag"] if k.startswith("crftk") for r in res["tag"][k]}
            res["tag_outputs_identical"] = len(digests) == 1
            res["tag_output_sha256"] = sorted(digests)
        if "profile" in args.sections:
            res["profile"] = spawn("profile", {"model": models["crftk"], "input": big}, workdir)
            res["profile"]["load"] = loadavg()
            if base:
                res["profile_base"] = spawn("profile", {"model": models["crftk"], "input": big}, workdir, base)
        if "bandwidth" in args.sections:
            res["bandwidth"] = spawn("bandwidth", {"model": models["crftk"], "train": train}, workdir)
        if args.ner:
            ner_train = os.path.join(args.ner_data, "eng.train")
            nfiles = {"train": ner_train, "template": NER_TEMPLATE,
                      "train_attrs": os.path.join(workdir, "ner.attrs"), "dev": None}
            note("NER: preparing CRFsuite attributes")
            res["ner_data"] = spawn("prepare", nfiles, workdir)
            res["ner_encode"] = spawn("encode", nfiles, workdir)
            if base:
                res["ner_encode_base"] = spawn("encode", nfiles, workdir, base)
            res["ner_train"] = {k: [] for k in ["crfsuite"] + crftks}
            for system in ["crfsuite"] + crftks:
                job = dict(nfiles, iterations=args.ner_iterations, threads=2,
                           model=os.path.join(workdir, f"ner.{system}"))
                note(f"NER: training {system} (load {loadavg()})")
                r = spawn("train_crfsuite" if system == "crfsuite" else "train_crftk", job, workdir,
                          repo_of.get(system, REPO))
                r["load"] = loadavg()
                res["ner_train"][system].append(r)
                note(f"  {system}: {r['s_per_iter']:.3f} s/iter, peak {r['peak_mb']:.0f} MB")
        res["load_end"] = loadavg()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return res


def fmt(x, spec=".2f"):
    return "n/a" if x is None else format(x, spec)


def table(res):
    """The results as markdown."""
    c = res["config"]
    lines = [f"Commit {c.get('commit')}, {c['started']}, {c['cpus']} CPUs; 1-minute load average "
             f"{res.get('load_start')} at the start, {res.get('load_end')} at the end (a shared machine: "
             f"compare figures of one run only).", ""]
    base = c.get("baseline")
    if base:
        lines += [f"'before': the checkout {base}, run interleaved with this one.", ""]
    if "tag" in res:
        n = res["tag_tokens"]
        lines += [f"### Tagging {n:,} tokens (dev.txt x {c['copies']}), whole process, median of {c['repeats']}", "",
                  "| system | seconds | tokens/s | CPU seconds (user + sys) | tokens per CPU second | peak RSS MB "
                  "| load |", "|---|---|---|---|---|---|---|"]
        for key, label in (("crftk-base-t1", "before: crftk tag -o, 1 thread"),
                           ("crftk-t1", "crftk tag -o, 1 thread"),
                           ("crftk-base-t2", "before: crftk tag -o, 2 threads"),
                           ("crftk-t2", "crftk tag -o, 2 threads"),
                           ("crfsuite", "python-crfsuite Tagger.tag, features already extracted")):
            runs = res["tag"].get(key)
            if not runs:
                continue
            s = median([r["seconds"] for r in runs])
            cpu = median([r.get("cpu_seconds") for r in runs])
            lines.append(f"| {label} | {fmt(s)} | {n / s:,.0f} | {fmt(cpu)} | {fmt(n / cpu if cpu else None, ',.0f')} "
                         f"| {fmt(median([r.get('peak_mb') for r in runs]), '.0f')} "
                         f"| {fmt(median([r['load'] for r in runs]))} |")
        lines += ["", f"Outputs of all crftk runs byte-identical: {res['tag_outputs_identical']}."]
    if "profile" in res:
        p = res["profile"]
        lines += ["", "### Where tagging spends its time (1 thread, one process, seconds)", "",
                  "| | " + " | ".join(p["stages"]) + " | total |", "|---|" + "---|" * (len(p["stages"]) + 1)]
        for label, q in (("before", res.get("profile_base")), ("after", p)):
            if q:
                lines.append(f"| {label} | " + " | ".join(fmt(q["seconds"].get(k)) for k in p["stages"])
                             + f" | {fmt(q['total'])} |")
    tr = res.get("train", {})
    if "encode" in res:
        enc, encb = res["encode"], res.get("encode_base") or []
        trb = tr.get("crftk-base") or []

        def before(x, spec=".2f"):
            return f" {fmt(x, spec)} |" if base else ""

        lines += ["", f"### Training, CoNLL-2000 train.txt, CRF++ template ({res['data']['params']:,} parameters)", "",
                  "| |" + (" crftk before |" if base else "") + " crftk | python-crfsuite | crftk / crfsuite |",
                  "|---|" + ("---|" if base else "") + "---|---|---|",
                  f"| read + encode seconds (crftk: FeatureSpace.fit over iter_corpus; crfsuite: Trainer.append "
                  f"of prepared attributes) |{before(median([r['seconds'] for r in encb]))} "
                  f"{fmt(median([r['seconds'] for r in enc]))} | "
                  f"{fmt(median([r['load_seconds'] for r in tr['crfsuite']]))} | |",
                  f"| peak RSS MB of reading + encoding |{before(median([r['peak_mb'] for r in encb]), '.0f')} "
                  f"{fmt(median([r['peak_mb'] for r in enc]), '.0f')} | | |"]
        a = median([r["s_per_iter"] for r in tr["crftk"]])
        b = median([r["s_per_iter"] for r in tr["crfsuite"]])
        lines.append(f"| seconds / L-BFGS iteration, 2 threads ({c['iterations']} iterations, median of "
                     f"{c['train_repeats']}) |{before(median([r['s_per_iter'] for r in trb]), '.3f')} "
                     f"{fmt(a, '.3f')} | {fmt(b, '.3f')} | {fmt(a / b if a and b else None)} |")
        pa = median([r["peak_mb"] for r in tr["crftk"]])
        pb = median([r["peak_mb"] for r in tr["crfsuite"]])
        lines.append(f"| peak RSS MB, training process |{before(median([r['peak_mb'] for r in trb]), '.0f')} "
                     f"{fmt(pa, '.0f')} | {fmt(pb, '.0f')} | {fmt(pa / pb)} |")
    if "bandwidth" in res:
        bw = res["bandwidth"]
        occ = bw["feature_occurrences"]
        lines += ["", f"### Memory traffic of one pass ({occ:,} active state-feature occurrences in train.txt)", "",
                  "| pass | seconds | GB/s |", "|---|---|---|",
                  f"| gather, Cython (Lattices.state_matrix) | {fmt(bw['cython_state_matrix_seconds'], '.3f')} | "
                  f"{bw['gather_bytes'] / bw['cython_state_matrix_seconds'] / 1e9:.1f} |",
                  f"| gather, numpy take | {fmt(bw['numpy_gather_seconds'], '.3f')} | "
                  f"{bw['gather_bytes'] / bw['numpy_gather_seconds'] / 1e9:.1f} |",
                  f"| scatter, numpy g[idx] += v | {fmt(bw['numpy_scatter_seconds'], '.3f')} | "
                  f"{bw['scatter_bytes'] / bw['numpy_scatter_seconds'] / 1e9:.1f} |",
                  f"| stream copy (numpy, 256 MB) | | {bw['numpy_stream_copy_gb_s']:.1f} |"]
        lim = bw["cython_state_matrix_seconds"] + bw["numpy_scatter_seconds"]
        if tr.get("crftk"):
            ev = median([r["optimizer_seconds"] / r["evaluations"] for r in tr["crftk"]])
            lines.append(f"\nOne gather + one scatter: {lim:.3f} s; crftk's seconds per objective evaluation at "
                         f"2 threads: {ev:.3f} ({ev / lim:.1f}x that floor; one thread's floor, both threads "
                         f"share the memory bus).")
    if "ner_train" in res:
        nt = res["ner_train"]
        a, b = nt["crftk"][0], nt["crfsuite"][0]
        ab = (nt.get("crftk-base") or [None])[0]
        eb = res.get("ner_encode_base")
        nb = bool(base and ab and eb)

        def nbefore(x, spec=".2f"):
            return f" {fmt(x, spec)} |" if nb else ""

        lines += ["", f"### NER, CoNLL-2003 eng.train ({res['ner_data']['state_features']:,} state features)", "",
                  "| |" + (" crftk before |" if nb else "") + " crftk | python-crfsuite |",
                  "|---|" + ("---|" if nb else "") + "---|---|",
                  f"| read + encode seconds |{nbefore(eb and eb['seconds'])} {fmt(res['ner_encode']['seconds'])} "
                  f"| {fmt(b['load_seconds'])} |",
                  f"| peak RSS MB of reading + encoding |{nbefore(eb and eb['peak_mb'], '.0f')} "
                  f"{fmt(res['ner_encode']['peak_mb'], '.0f')} | |",
                  f"| seconds / iteration, 2 threads |{nbefore(ab and ab['s_per_iter'], '.3f')} "
                  f"{fmt(a['s_per_iter'], '.3f')} | {fmt(b['s_per_iter'], '.3f')} |",
                  f"| peak RSS MB, training |{nbefore(ab and ab['peak_mb'], '.0f')} {fmt(a['peak_mb'], '.0f')} "
                  f"| {fmt(b['peak_mb'], '.0f')} |"]
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.environ.get("CONLL2000") or os.path.join(SHARED, "conll2000"))
    p.add_argument("--ner-data", default=os.environ.get("CONLL2003") or os.path.join(SHARED, "conll2003"))
    p.add_argument("--copies", type=int, default=20)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--ner-iterations", type=int, default=10)
    p.add_argument("--train-repeats", type=int, default=3)
    p.add_argument("--sections", default=",".join(SECTIONS), type=lambda s: [x for x in s.split(",") if x])
    p.add_argument("--ner", action="store_true", help="also the NER training figures (CoNLL-2003)")
    p.add_argument("--out", default=None, help="write OUT.md and OUT.json")
    p.add_argument("--baseline", metavar="DIR", help="another crftk checkout (built in place) measured "
                   "interleaved with this one, as 'before'")
    p.add_argument("--summarize", metavar="JSON", help="print the table of a results file")
    p.add_argument("--worker", choices=sorted(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--job", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        with open(args.job) as fh:
            out = WORKERS[args.worker](json.load(fh))
        with open(args.result, "w") as fh:
            json.dump(out, fh)
        return 0
    if args.summarize:
        with open(args.summarize) as fh:
            print(table(json.load(fh)))
        return 0
    bad = [s for s in args.sections if s not in SECTIONS]
    if bad:
        p.error(f"unknown sections {bad}: choose from {', '.join(SECTIONS)}")
    for f in ("train.txt", "dev.txt"):
        if not os.path.isfile(os.path.join(args.data, f)):
            p.error(f"{os.path.join(args.data, f)} not found (--data or CONLL2000)")
    res = run(args)
    text = table(res)
    print(text)
    if args.out:
        with open(args.out + ".json", "w") as fh:
            json.dump(res, fh, indent=1)
        with open(args.out + ".md", "w") as fh:
            fh.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
