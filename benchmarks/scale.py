"""Scale-out on Dask: tagging throughput and worker memory, data-parallel training.

    python benchmarks/scale.py --data ../shared/data/conll2000 --work out/scale --out benchmarks/results/scale

Tagging: a corpus of dev.txt concatenated 20 times, tagged by local threads (1 and 2)
and by local Dask clusters of 1 and 2 worker processes (one kernel thread each); the
outputs are checked to be identical. Peak memory (max RSS) of each worker tagging dev.txt
x 1, 5 and 20, each in a fresh cluster, after a warm-up that loads the model.
Training: seconds per iteration on train.txt with local threads (1 and 2) and with 1
and 2 workers, the objective after the same iterations (relative difference to local),
and the bytes the driver and workers send per iteration (from the protocol: the
parameters to each worker, each shard's gradient once). From these, the iteration time
on 10 and 100 machines for a corpus 100 times larger, under the assumptions printed
with it (docs/scale-estimate.md explains them).
Training memory (--sections train-memory): corpora of train.txt x k (--sizes, written by
scale_corpus.py with growing vocabulary); for each, a Dask scheduler and 2 workers started as
processes of their own and `crftk train --scheduler` run for a few L-BFGS iterations: the
driver's peak RSS (wait4), each worker's (VmHWM before it stops), seconds per iteration,
parameters and bytes sent per evaluation; then `crftk train --algorithm perceptron --max-iter 1`
on one machine with --stream (when this checkout has it) and in memory: their peak RSS. Rows
are kept per --label (default: the commit), so a run of older code stays as the comparison.
"""

import argparse
import filecmp
import io
import json
import os
import resource
import signal
import subprocess
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from common import corpus_files, crftk_usage, note, publish  # noqa: E402
from scale_corpus import HEAPS as CORPUS_HEAPS, write_corpus  # noqa: E402

TEMPLATE = os.path.join(REPO, "templates", "chunking-crfpp.tmpl")
SIZES = (1, 5, 20)
SECTIONS = ("tagging", "memory", "training", "train-memory")
TRAIN_SIZES = (1, 5, 20, 50)
WORKERS = 2
#: The driver's and --stream's peak is called flat when the largest is within this of the smallest
#: over the sizes from FLAT_FROM copies up.
FLAT = 0.20
FLAT_FROM = 5

# The estimate's assumptions (docs/scale-estimate.md).
GROWTH = 100                 # the corpus is this many times CoNLL-2000's training set
HEAPS = 0.6                  # parameters grow as (corpus size) ** HEAPS (distinct feature strings)
CORES = 8                    # cores per machine
EFFICIENCY = 0.8             # the kernels' speed-up on a machine's cores, per core
BANDWIDTH = 1.25e9           # bytes/s per machine (10 Gbit/s Ethernet)
LATENCY = 0.005              # seconds of scheduling per level of tasks (submit, run, report)


def peak_rss():
    """This process's peak resident memory, bytes (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def concatenated(dev, k, work):
    path = os.path.join(work, f"dev-x{k}.txt")
    if not os.path.exists(path):
        text = open(dev, encoding="utf-8").read()
        if not text.endswith("\n\n"):
            text = text.rstrip("\n") + "\n\n"
        with open(path, "w", encoding="utf-8") as out:
            for _ in range(k):
                out.write(text)
    return path


def the_model(train_file, work, threads):
    from crftk.commands.train import train
    from crftk.model import Model
    path = os.path.join(work, "chunk.crftk")
    if not os.path.exists(path):
        note("scale", "training the tagging model (30 iterations)")
        train([train_file], TEMPLATE, path, max_iter=30, threads=threads, log=lambda m: None)
    return Model.load(path)


def tagging(model, dev, work, piece_bytes):
    from crftk.commands.tag import tag_files as tag_locally
    from crftk.distributed import Cluster
    from crftk.distributed.tagging import tag_files

    corpus = concatenated(dev, 20, work)
    rows = []
    reference = None
    for threads in (1, 2):
        out_path = os.path.join(work, f"local-{threads}.tagged")
        start = time.perf_counter()
        with open(out_path, "w", encoding="utf-8") as out:
            n_sent, n_tok = tag_locally(model, [corpus], out, threads=threads)
        seconds = time.perf_counter() - start
        reference = reference or out_path
        rows.append({"how": f"local, {threads} thread{'s' if threads > 1 else ''}", "tokens": n_tok,
                     "seconds": seconds, "tokens_per_s": n_tok / seconds, "startup": 0.0, "same": True})
        note("scale", f"{rows[-1]['how']}: {rows[-1]['tokens_per_s']:,.0f} tokens/s")
    for workers in (1, 2):
        out_path = os.path.join(work, f"dask-{workers}.tagged")
        start = time.perf_counter()
        with Cluster(workers=workers, threads=1) as cluster:
            up = time.perf_counter() - start
            start = time.perf_counter()
            with open(out_path, "w", encoding="utf-8") as out:
                n_sent, n_tok = tag_files(cluster, model, [corpus], out, piece_bytes=piece_bytes)
            seconds = time.perf_counter() - start
        rows.append({"how": f"Dask, {workers} worker{'s' if workers > 1 else ''} x 1 thread", "tokens": n_tok,
                     "seconds": seconds, "tokens_per_s": n_tok / seconds, "startup": up,
                     "same": filecmp.cmp(out_path, reference, shallow=False)})
        note("scale", f"{rows[-1]['how']}: {rows[-1]['tokens_per_s']:,.0f} tokens/s (output identical: "
                      f"{rows[-1]['same']})")
    return rows


def memory(model, dev, work, piece_bytes):
    from crftk.distributed import Cluster
    from crftk.distributed.tagging import tag_files

    small = concatenated(dev, 1, work)
    rows = []
    for k in SIZES:
        corpus = concatenated(dev, k, work)
        with Cluster(workers=2, threads=1) as cluster:
            tag_files(cluster, model, [small], io.StringIO(), piece_bytes=piece_bytes)     # loads the model
            warm = max(cluster.client.run(peak_rss).values())
            start = time.perf_counter()
            with open(os.path.join(work, "memory.tagged"), "w", encoding="utf-8") as out:
                _, n_tok = tag_files(cluster, model, [corpus], out, piece_bytes=piece_bytes)
            seconds = time.perf_counter() - start
            peaks = sorted(cluster.client.run(peak_rss).values())
        rows.append({"copies": k, "bytes": os.path.getsize(corpus), "tokens": n_tok, "seconds": seconds,
                     "after_warm_up": warm, "peaks": peaks})
        note("scale", f"x{k}: worker peaks {[round(p / 2**20) for p in peaks]} MiB (warm-up {warm / 2**20:.0f})")
    return rows


def training(train_file, iterations):
    from crftk.commands.train import fit
    from crftk.features.templates import read_template
    from crftk.io.conll import read_corpus

    data = read_corpus(train_file)
    template = read_template(TEMPLATE)
    rows = []
    reference = None
    runs = [("local, 1 thread", {"threads": 1}), ("local, 2 threads", {"threads": 2}),
            ("Dask, 1 worker x 2 threads", {"threads": 2, "workers": 1}),
            ("Dask, 2 workers x 1 thread", {"threads": 1, "workers": 2})]
    for how, kw in runs:
        model = fit(data, template, log=lambda m: None, max_iter=iterations, **kw)
        info = model.info
        per_iter = [h["seconds"] for h in info["history"]]
        row = {"how": how, "iterations": info["iterations"], "evaluations": info["evaluations"],
               "seconds_per_iteration": sum(per_iter) / len(per_iter), "objective": info["objective"],
               "parameters": int(model.weights.size)}
        if reference is None:
            reference = info["objective"]
        row["relative_difference"] = abs(info["objective"] - reference) / abs(reference)
        cluster = info.get("cluster")
        if cluster:
            row["bytes_per_iteration"] = cluster["bytes_per_evaluation"] * info["evaluations"] / info["iterations"]
            row["shards"] = cluster["shards"]
        rows.append(row)
        note("scale", f"{how}: {row['seconds_per_iteration']:.3f} s/iteration, objective {info['objective']:.6e}")
    return rows


def available_bytes():
    """MemAvailable of /proc/meminfo, bytes."""
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_of(pid):
    """A running process's peak resident memory (VmHWM), bytes."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def code_label():
    out = subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h"], stdout=subprocess.PIPE, text=True)
    return out.stdout.strip() or "unknown"


def scale_corpus(train_file, k, work, heaps):
    """train.txt x k with vocabulary growing as tokens ** heaps (scale_corpus.py), written once;
    (path, sentences, tokens, word types)."""
    path = os.path.join(work, f"train-x{k}-h{heaps:g}.txt")
    stats = path + ".json"
    if not (os.path.exists(path) and os.path.exists(stats)):
        note("scale", f"writing {path}")
        json.dump(write_corpus(train_file, k, path, heaps=heaps), open(stats, "w"))
    return (path, *json.load(open(stats)))


class DaskProcesses:
    """`with DaskProcesses(work, n) as d`: a scheduler and n single-thread workers (no nanny: the
    worker is the process started), each a process of its own running this checkout;
    ``d.address``; ``d.peaks()`` their VmHWM while they run."""

    def __init__(self, work, workers):
        self.work, self.n = work, workers
        self.env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
        self.file = os.path.join(work, "scheduler.json")
        self.scheduler, self.workers = None, []

    def _start(self, module, *args):
        log = open(os.path.join(self.work, f"dask-{len(self.workers) if self.scheduler else 'scheduler'}.log"), "w")
        return subprocess.Popen([sys.executable, "-m", module, "--scheduler-file", self.file, *args],
                                cwd=REPO, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def __enter__(self):
        import distributed
        if os.path.exists(self.file):
            os.remove(self.file)
        self.scheduler = self._start("distributed.cli.dask_scheduler", "--port", "0", "--no-dashboard")
        for _ in range(self.n):
            self.workers.append(self._start("distributed.cli.dask_worker", "--no-nanny", "--nthreads", "1",
                                            "--memory-limit", "0", "--no-dashboard",
                                            "--local-directory", os.path.join(self.work, "dask-space")))
        deadline = time.time() + 120
        while not os.path.exists(self.file) and time.time() < deadline:
            time.sleep(0.2)
        with distributed.Client(scheduler_file=self.file, timeout=60) as client:
            client.wait_for_workers(self.n, timeout=120)
            self.address = client.scheduler.address
        return self

    def peaks(self):
        return [peak_of(p.pid) for p in self.workers], peak_of(self.scheduler.pid)

    def __exit__(self, *exc):
        for p in self.workers + [self.scheduler]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.workers + [self.scheduler]:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        return False


def has_stream():
    out = subprocess.run([sys.executable, "-m", "crftk.cli", "train", "--help"], cwd=REPO, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    return "--stream" in out.stdout


def model_summary(model_path):
    """`crftk info --json MODEL`: parameters, and the training record under "training"."""
    out = subprocess.run([sys.executable, "-m", "crftk.cli", "info", "--json", model_path], cwd=REPO, text=True,
                         stdout=subprocess.PIPE, check=True)
    return json.loads(out.stdout)


def cluster_run(path, k, work, iterations):
    """`crftk train --scheduler` on a scheduler and WORKERS workers of their own: the row's cluster figures."""
    model = os.path.join(work, f"dist-x{k}.crftk")
    log = os.path.join(work, f"dist-x{k}.log")
    with DaskProcesses(work, WORKERS) as dask:
        wall, usage = crftk_usage(["train", "-t", TEMPLATE, "-m", model, "--scheduler", dask.address,
                                   "--threads", 1, "--max-iter", iterations, path], log, "w")
        worker_peaks, scheduler_peak = dask.peaks()
    summary = model_summary(model)
    rec = summary["training"]
    per_iter = [h["seconds"] for h in rec.get("history", [])]
    os.remove(model)
    row = {"worker_peaks": worker_peaks, "scheduler_peak": scheduler_peak, "driver_peak": usage.ru_maxrss * 1024,
           "wall": wall, "iterations": len(per_iter), "seconds_per_iteration": sum(per_iter) / max(1, len(per_iter)),
           "seconds_per_evaluation": sum(per_iter) / max(1, rec.get("evaluations") or 1),
           "before_first_iteration": wall - sum(per_iter), "parameters": summary["parameters"],
           "evaluations": rec.get("evaluations"), "cluster": rec.get("cluster", {}),
           "log_tail": open(log).read().splitlines()[-12:]}
    note("scale", f"x{k}: driver {row['driver_peak'] / 2**20:,.0f} MiB, workers "
                  f"{[round(p / 2**20) for p in worker_peaks]} MiB, "
                  f"{row['seconds_per_evaluation']:.2f} s/evaluation, {row['parameters']:,} parameters")
    return row


def train_memory(train_file, work, sizes, iterations, label, runs, heaps):
    """Peak memory of distributed training (driver, workers) and of one-machine training per size;
    ``runs``: of cluster, stream, memory."""
    rows = []
    stream = has_stream()
    for k in sizes:
        path, n_sent, n_tok, n_types = scale_corpus(train_file, k, work, heaps)
        need = (1 << 30) + k * (150 << 20)
        free = available_bytes()
        if free < need:
            note("scale", f"x{k}: skipped, {free / 2**30:.1f} GiB available, {need / 2**30:.1f} wanted")
            continue
        row = {"label": label, "heaps": heaps, "copies": k, "sentences": n_sent, "tokens": n_tok, "word_types": n_types,
               "bytes": os.path.getsize(path), "available_before": free}
        if "cluster" in runs:
            row.update(cluster_run(path, k, work, iterations))
        for how in ("stream", "memory"):
            if how not in runs or how == "stream" and not stream:
                continue
            model = os.path.join(work, f"{how}-x{k}.crftk")
            args = ["train", "-t", TEMPLATE, "-m", model, "--algorithm", "perceptron", "--max-iter", 1,
                    "--threads", 1, path] + (["--stream"] if how == "stream" else [])
            wall, usage = crftk_usage(args, os.path.join(work, f"{how}-x{k}.log"), "w")
            row[f"{how}_peak"], row[f"{how}_wall"] = usage.ru_maxrss * 1024, wall
            row[f"{how}_parameters"] = row.setdefault("parameters", model_summary(model)["parameters"])
            os.remove(model)
            note("scale", f"x{k}: perceptron, {how}: {row[f'{how}_peak'] / 2**20:,.0f} MiB, {wall:.1f} s")
        rows.append(row)
    return rows


def flatness(rows, key):
    """(flat?, smallest, largest, sizes) of ``key`` over the rows from FLAT_FROM copies up; None if
    fewer than two sizes have it."""
    got = [(r["copies"], r[key]) for r in rows if r["copies"] >= FLAT_FROM and r.get(key)]
    if len(got) < 2:
        return None
    values = [v for _, v in got]
    return max(values) <= (1 + FLAT) * min(values), min(values), max(values), [k for k, _ in got]


def flat_checks(rows):
    lines = []
    for key, what in (("driver_peak", "driver peak RSS (crftk train --scheduler)"),
                      ("stream_peak", "--stream peak RSS (perceptron, one machine)")):
        f = flatness(rows, key)
        if f is None:
            lines.append(f"{what}: not measured at two sizes from {FLAT_FROM}x up")
            continue
        ok, lo, hi, ks = f
        params = {r["copies"]: r["parameters"] for r in rows}
        lines.append(f"{what} from {ks[0]}x to {ks[-1]}x: {lo / 2**20:,.0f} to {hi / 2**20:,.0f} MiB "
                     f"({hi / lo - 1:+.0%}; parameters x{params[ks[-1]] / params[ks[0]]:.2f}): "
                     f"{'FLAT' if ok else 'NOT flat'} within {FLAT:.0%}")
    return lines


def measured_growth(memory_rows):
    """From the newest code's train-memory rows on the Heaps-like corpus: (exponent of parameters
    in corpus size fitted through the 1x row, the row of the largest size); None without two sizes."""
    rows = [r for r in memory_rows if r["heaps"] == CORPUS_HEAPS and r.get("cluster")]
    if not rows:
        return None
    rows = [r for r in rows if r["label"] == rows[-1]["label"]]
    base = [r for r in rows if r["copies"] == 1]
    more = [r for r in rows if r["copies"] > 1]
    if not base or not more:
        return None
    xs = np.log([r["copies"] for r in more])
    ys = np.log([r["parameters"] / base[0]["parameters"] for r in more])
    return float(xs @ ys / (xs @ xs)), max(rows, key=lambda r: r["copies"])


def estimate(train_rows, n_tokens, memory_rows=()):
    """Seconds per iteration on M machines for a corpus GROWTH times larger (the stated model);
    the parameters' growth and the bytes sent per parameter from the train-memory rows when there."""
    one_core = train_rows[0]
    evals = one_core["evaluations"] / one_core["iterations"]
    compute_1 = one_core["seconds_per_iteration"] / evals          # one core, one evaluation, CoNLL-2000
    growth = measured_growth(memory_rows)
    exponent, source = (growth[0], f"fitted on train.txt x 1..{growth[1]['copies']}") if growth else (HEAPS, "assumed")
    down = up = 8.0             # bytes per parameter, each way, per worker
    prepare = None
    if growth:
        big = growth[1]
        c = big["cluster"]
        if "broadcast_bytes_per_evaluation" in c:
            down = c["broadcast_bytes_per_evaluation"] / (c["workers"] * big["parameters"])
            up = c["reduce_bytes_per_evaluation"] / (c["shards"] * big["parameters"])
        # worker seconds per token before the first iteration (reading, fitting, merging, encoding)
        prepare = big["before_first_iteration"] * c["workers"] / big["tokens"]
    params = one_core["parameters"] * GROWTH ** exponent
    rows = []
    for machines in (1, 10, 100):
        compute = compute_1 * GROWTH / (machines * CORES * EFFICIENCY)
        # a tree broadcast (holders double each round) and a tree reduction: ceil(log2 M) levels,
        # one vector per level on the critical path, plus the root's to the driver
        levels = (machines - 1).bit_length()
        broadcast = levels * down * params / BANDWIDTH
        reduce = (levels + 1) * up * params / BANDWIDTH if machines > 1 else 0.0
        latency = (levels + 2) * LATENCY if machines > 1 else 0.0
        per_eval = compute + broadcast + reduce + latency
        rows.append({"machines": machines, "tokens": n_tokens * GROWTH, "parameters": params,
                     "compute": compute * evals, "broadcast": broadcast * evals, "reduce": reduce * evals,
                     "latency": latency * evals, "seconds_per_iteration": per_eval * evals,
                     "bytes_per_iteration": evals * machines * (down + up) * params if machines > 1 else 0,
                     "prepare": None if prepare is None else
                     prepare * n_tokens * GROWTH / (machines * CORES * EFFICIENCY)})
    return {"evaluations_per_iteration": evals, "one_core_seconds_per_evaluation": compute_1, "rows": rows,
            "worker_seconds_per_token_before_iteration_1": prepare,
            "assumptions": {"growth": GROWTH, "heaps": round(exponent, 3), "heaps_source": source,
                            "cores": CORES, "efficiency": EFFICIENCY, "bandwidth": BANDWIDTH, "latency": LATENCY,
                            "bytes_per_parameter_down": down, "bytes_per_parameter_up": up}}


def mib(b):
    return f"{b / 2**20:,.0f}"


def train_memory_table(rows):
    lines = ["## Training memory: train.txt x k with growing vocabulary (scale_corpus.py), chunking-crfpp template",
             "",
             f"`crftk train --scheduler` with a scheduler and {WORKERS} workers (1 thread each) started as processes "
             "of their own, a few L-BFGS iterations: peak resident memory of the driver (the crftk process, "
             "wait4) and of each worker (VmHWM), seconds per evaluation of the objective, seconds from start "
             "to the first iteration, bytes sent per evaluation (the run's record). Then `crftk train --algorithm perceptron --max-iter 1` on one machine, "
             "streamed and in memory: peak RSS. Rows are grouped by the code measured.", "",
             "| code | Heaps | k | tokens | word types | parameters | driver MiB | worker MiB | s/evaluation | "
             "before 1st iteration s | sent/evaluation MiB | --stream MiB | in memory MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        cluster = r.get("cluster") or {}
        sent = cluster.get("bytes_per_evaluation")
        one = [mib(r[key]) if r.get(key) else "-" for key in ("stream_peak", "memory_peak")]
        if "driver_peak" in r:
            dist = (f"{mib(r['driver_peak'])} | {', '.join(mib(p) for p in r['worker_peaks'])} | "
                    f"{r['seconds_per_evaluation']:.2f} | {r['before_first_iteration']:.1f} | "
                    f"{'-' if sent is None else f'{sent / 2**20:.1f}'}")
        else:
            dist = "- | - | - | - | -"
        lines.append(f"| {r['label']} | {r['heaps']:g} | {r['copies']} | {r['tokens']:,} | {r['word_types']:,} | "
                     f"{r['parameters']:,} | {dist} | {one[0]} | {one[1]} |")
    lines += [""]
    for label, heaps in dict.fromkeys((r["label"], r["heaps"]) for r in rows):
        mine = [r for r in rows if r["label"] == label and r["heaps"] == heaps]
        lines += [f"- {label}, Heaps {heaps:g} ({mine[0]['date']}, load {mine[0]['load'][0]:.1f}-{mine[-1]['load'][1]:.1f}): "
                  + "; ".join(flat_checks(mine))]
    return lines


def table(results):
    lines = ["# Scale-out on Dask (`make scale`)", ""]
    if "tagging" in results:
        lines += old_tables(results)
    if results.get("train_memory"):
        lines += [""] + train_memory_table(results["train_memory"])
    return "\n".join(lines)


def old_tables(results):
    t, m, tr, est = results["tagging"], results["memory"], results["training"], results["estimate"]
    lines = [
        f"Measured {results['date']} on {results['cores']} cores shared with other jobs (load average "
        f"{results['load'][0]:.1f} at the start, {results['load'][1]:.1f} at the end): the figures were taken "
        "under load and vary by tens of percent between runs; compare rows within a table, not with "
        "other tables.",
        "",
        f"## Tagging: CoNLL-2000 dev.txt x 20 ({t[0]['tokens']:,} tokens), pieces of "
        f"{results['piece_bytes'] / 2**20:g} MiB",
        "",
        "| run | tokens/s | seconds | cluster start (s) | output = local |",
        "|---|---:|---:|---:|---|",
    ]
    for r in t:
        lines.append(f"| {r['how']} | {r['tokens_per_s']:,.0f} | {r['seconds']:.2f} | {r['startup']:.1f} | "
                     f"{'yes' if r['same'] else 'NO'} |")
    lines += ["", "## Peak memory per worker (2 workers), tagging dev.txt x k", "",
              "| k | input MiB | tokens | worker peaks MiB | after warm-up MiB | seconds |",
              "|---:|---:|---:|---|---:|---:|"]
    for r in m:
        lines.append(f"| {r['copies']} | {r['bytes'] / 2**20:.1f} | {r['tokens']:,} | "
                     f"{', '.join(mib(p) for p in r['peaks'])} | {mib(r['after_warm_up'])} | {r['seconds']:.1f} |")
    lines += ["", f"## Training: CoNLL-2000 train.txt, {tr[0]['parameters']:,} parameters, "
              f"{tr[0]['iterations']} L-BFGS iterations", "",
              "| run | s/iteration | evaluations | objective | rel. difference | bytes sent/iteration |",
              "|---|---:|---:|---:|---:|---:|"]
    for r in tr:
        sent = f"{r['bytes_per_iteration'] / 2**20:.1f} MiB" if "bytes_per_iteration" in r else "-"
        lines.append(f"| {r['how']} | {r['seconds_per_iteration']:.3f} | {r['evaluations']} | "
                     f"{r['objective']:.6e} | {r['relative_difference']:.1e} | {sent} |")
    a = est["assumptions"]
    lines += ["", f"## Estimate: a corpus {a['growth']}x larger on 1, 10 and 100 machines "
              "(docs/scale-estimate.md)", "",
              f"Parameters x {a['growth']}^{a['heaps']:.2f} ({a.get('heaps_source', 'assumed')}); {a['cores']} cores "
              f"per machine at {a['efficiency']:.0%} efficiency, each as fast as one core here "
              f"({est['one_core_seconds_per_evaluation']:.3f} s per evaluation of CoNLL-2000); "
              f"{a['bandwidth'] * 8 / 1e9:g} Gbit/s per machine; {a['latency'] * 1e3:g} ms per level of tasks; "
              f"{est['evaluations_per_iteration']:.2f} evaluations per iteration (as measured); parameters sent "
              f"down a tree ({a.get('bytes_per_parameter_down', 8):g} bytes each per worker) and gradients summed "
              f"up one ({a.get('bytes_per_parameter_up', 8):g} bytes), both as the run records; before the first "
              "iteration, the workers' measured seconds per token (reading, fitting, merging, encoding) "
              "spread over the cores.", "",
              "| machines | tokens | parameters | compute s | broadcast s | reduce s | latency s | s/iteration | "
              "bytes sent/iteration | before 1st iteration s |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in est["rows"]:
        prep = "-" if r.get("prepare") is None else f"{r['prepare']:.0f}"
        lines.append(f"| {r['machines']} | {r['tokens']:,} | {r['parameters']:,.0f} | {r['compute']:.2f} | "
                     f"{r['broadcast']:.2f} | {r['reduce']:.2f} | {r['latency']:.2f} | "
                     f"{r['seconds_per_iteration']:.2f} | {r['bytes_per_iteration'] / 2**30:.1f} GiB | {prep} |")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="CoNLL-2000 folder (default: $CONLL2000 or ../shared/data/conll2000)")
    ap.add_argument("--work", required=True, help="folder for the concatenated corpora, model and outputs")
    ap.add_argument("--out", required=True, help="results prefix: writes PREFIX.md and PREFIX.json (the sections "
                    "not run this time are kept from PREFIX.json)")
    ap.add_argument("--sections", default=",".join(SECTIONS),
                    help=f"comma-separated, of {', '.join(SECTIONS)} (training includes the estimate)")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--piece-bytes", type=int, default=1 << 20)
    ap.add_argument("--sizes", default=",".join(map(str, TRAIN_SIZES)),
                    help="train-memory: copies of train.txt, comma-separated")
    ap.add_argument("--memory-iterations", type=int, default=3, help="train-memory: L-BFGS iterations")
    ap.add_argument("--heaps", type=float, default=CORPUS_HEAPS,
                    help="train-memory: the corpus's word types grow as tokens ** HEAPS (0: plain copies)")
    ap.add_argument("--runs", default="cluster,stream,memory",
                    help="train-memory: of cluster (train --scheduler), stream and memory (perceptron on one "
                    "machine, --stream and in memory); a row's other figures are kept from PREFIX.json")
    ap.add_argument("--label", help="train-memory: the rows' label (default: this checkout's commit); rows of "
                    "other labels, corpora or sizes in PREFIX.json are kept")
    args = ap.parse_args()
    sections = [x for x in args.sections.split(",") if x]
    bad = [x for x in sections if x not in SECTIONS]
    if bad:
        sys.exit(f"scale: unknown section {bad[0]} (of {', '.join(SECTIONS)})")
    train_file, dev = corpus_files("CONLL2000", ["train.txt", "dev.txt"], args.data, "scale")
    os.makedirs(args.work, exist_ok=True)
    results = {}
    if os.path.exists(args.out + ".json"):
        results = json.load(open(args.out + ".json"))
    if any(x in sections for x in ("tagging", "memory", "training")):
        results.update({"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "piece_bytes": args.piece_bytes,
                        "load": [os.getloadavg()[0]]})
        if "tagging" in sections or "memory" in sections:
            model = the_model(train_file, args.work, threads=2)
        if "tagging" in sections:
            results["tagging"] = tagging(model, dev, args.work, args.piece_bytes)
        if "memory" in sections:
            results["memory"] = memory(model, dev, args.work, args.piece_bytes)
        if "training" in sections:
            results["training"] = training(train_file, args.iterations)
        results["load"].append(os.getloadavg()[0])
    if "train-memory" in sections:
        label = args.label or code_label()
        load = os.getloadavg()[0]
        runs = [x for x in args.runs.split(",") if x in ("cluster", "stream", "memory")]
        rows = train_memory(train_file, args.work, [int(k) for k in args.sizes.split(",")],
                            args.memory_iterations, label, runs, args.heaps)
        for r in rows:
            r.update(date=time.strftime("%Y-%m-%d"), load=[load, os.getloadavg()[0]])
        old = results.get("train_memory", [])
        before = {(r["label"], r["heaps"], r["copies"]): r for r in old}
        rows = [{**before.get((r["label"], r["heaps"], r["copies"]), {}), **r} for r in rows]
        new = {(r["label"], r["heaps"], r["copies"]) for r in rows}
        results["train_memory"] = sorted([r for r in old if (r["label"], r["heaps"], r["copies"]) not in new] + rows,
                                         key=lambda r: ([x["label"] for x in old + rows].index(r["label"]),
                                                        -r["heaps"], r["copies"]))
        for line in flat_checks([r for r in results["train_memory"] if r["label"] == label
                                 and r["heaps"] == args.heaps]):
            print(line)
    if "training" in results:
        n_tokens = sum(1 for line in open(train_file, encoding="utf-8") if line.strip())
        results["estimate"] = estimate(results["training"], n_tokens, results.get("train_memory", ()))
    with open(args.out + ".json", "w") as fh:
        json.dump(results, fh, indent=2)
    publish(table(results), args.out + ".md")


if __name__ == "__main__":
    main()
