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
"""

import argparse
import filecmp
import io
import json
import os
import resource
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
sys.path.insert(0, os.path.join(REPO, "benchmarks"))

from common import corpus_files, note, publish  # noqa: E402

TEMPLATE = os.path.join(REPO, "templates", "chunking-crfpp.tmpl")
SIZES = (1, 5, 20)

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


def estimate(train_rows, n_tokens):
    """Seconds per iteration on M machines for a corpus GROWTH times larger (the stated model)."""
    one_core = train_rows[0]
    evals = one_core["evaluations"] / one_core["iterations"]
    compute_1 = one_core["seconds_per_iteration"] / evals          # one core, one evaluation, CoNLL-2000
    params = one_core["parameters"] * GROWTH ** HEAPS
    vector = 8 * params
    rows = []
    for machines in (10, 100):
        compute = compute_1 * GROWTH / (machines * CORES * EFFICIENCY)
        # the parameters go to one worker and the others fetch them from it (a star), the
        # gradients are summed pairwise (log2 M levels, one vector per level on the critical path)
        levels = max(1, (machines - 1).bit_length())
        broadcast = (machines - 1) * vector / BANDWIDTH
        reduce = (levels + 1) * vector / BANDWIDTH
        latency = (levels + 2) * LATENCY
        per_eval = compute + broadcast + reduce + latency
        rows.append({"machines": machines, "tokens": n_tokens * GROWTH, "parameters": params,
                     "compute": compute * evals, "broadcast": broadcast * evals, "reduce": reduce * evals,
                     "latency": latency * evals, "seconds_per_iteration": per_eval * evals,
                     "bytes_per_iteration": evals * 2 * machines * vector})
    return {"evaluations_per_iteration": evals, "one_core_seconds_per_evaluation": compute_1, "rows": rows,
            "assumptions": {"growth": GROWTH, "heaps": HEAPS, "cores": CORES, "efficiency": EFFICIENCY,
                            "bandwidth": BANDWIDTH, "latency": LATENCY}}


def table(results):
    t, m, tr, est = results["tagging"], results["memory"], results["training"], results["estimate"]
    mib = lambda b: f"{b / 2**20:,.0f}"  # noqa: E731
    lines = [
        "# Scale-out on Dask (`make scale`)",
        "",
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
    lines += ["", f"## Estimate: a corpus {a['growth']}x larger on 10 and 100 machines "
              "(docs/scale-estimate.md)", "",
              f"Assumptions: parameters x {a['growth']}^{a['heaps']}; {a['cores']} cores per machine at "
              f"{a['efficiency']:.0%} efficiency, each as fast as one core here "
              f"({est['one_core_seconds_per_evaluation']:.3f} s per evaluation of CoNLL-2000); "
              f"{a['bandwidth'] * 8 / 1e9:g} Gbit/s per machine; {a['latency'] * 1e3:g} ms per level of tasks; "
              f"{est['evaluations_per_iteration']:.2f} evaluations per iteration (as measured).", "",
              "| machines | tokens | parameters | compute s | broadcast s | reduce s | latency s | s/iteration | "
              "bytes sent/iteration |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in est["rows"]:
        lines.append(f"| {r['machines']} | {r['tokens']:,} | {r['parameters']:,.0f} | {r['compute']:.2f} | "
                     f"{r['broadcast']:.2f} | {r['reduce']:.2f} | {r['latency']:.2f} | "
                     f"{r['seconds_per_iteration']:.2f} | {r['bytes_per_iteration'] / 2**30:.1f} GiB |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="CoNLL-2000 folder (default: $CONLL2000 or ../shared/data/conll2000)")
    ap.add_argument("--work", required=True, help="folder for the concatenated corpora, model and outputs")
    ap.add_argument("--out", required=True, help="results prefix: writes PREFIX.md and PREFIX.json")
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--piece-bytes", type=int, default=1 << 20)
    args = ap.parse_args()
    train_file, dev = corpus_files("CONLL2000", ["train.txt", "dev.txt"], args.data, "scale")
    os.makedirs(args.work, exist_ok=True)
    model = the_model(train_file, args.work, threads=2)
    results = {"date": time.strftime("%Y-%m-%d"), "cores": os.cpu_count(), "piece_bytes": args.piece_bytes,
               "load": [os.getloadavg()[0]]}
    results["tagging"] = tagging(model, dev, args.work, args.piece_bytes)
    results["memory"] = memory(model, dev, args.work, args.piece_bytes)
    results["training"] = training(train_file, args.iterations)
    n_tokens = sum(1 for line in open(train_file, encoding="utf-8") if line.strip())
    results["estimate"] = estimate(results["training"], n_tokens)
    results["load"].append(os.getloadavg()[0])
    with open(args.out + ".json", "w") as fh:
        json.dump(results, fh, indent=2)
    publish(table(results), args.out + ".md")


if __name__ == "__main__":
    main()
