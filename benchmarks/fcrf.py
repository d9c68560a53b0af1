"""Factorial CRFs (Sutton, Rohanimanesh & McCallum 2004): their Tables 1 and 3, three chains on
CoNLL-2003, and training speed by inference method.

Every experiment is a chain of `crftk` commands; a step is skipped when its output exists, so an
interrupted run resumes. The chunk column is reduced to B-NP/I-NP/O (as in the paper) in
OUT/data; the corpora themselves are only read.

- ``table1``: CoNLL-2000, train on train.txt (or random subsets of it), score dev.txt:
  the FCRF (templates/fcrf-np.tmpl, chains POS and NP) against CRF+CRF (a POS CRF from the
  words, templates/fcrf-pos.tmpl, feeding an NP CRF, templates/fcrf-np-cascade.tmpl, through
  `crftk compose` and cascade decoding) and against the NP CRF on the corpus POS column. POS
  accuracy, NP F1, joint accuracy (POS and NP both right).
- ``table3``: exact vs TRP vs random-schedule BP, run to convergence and cut at 3 sweeps, on
  random 5% subsets: training time, L-BFGS iterations, NP F1.
- ``ner``: CoNLL-2003 eng.train, three chains (POS, chunk, NER) against the NER CRF alone, on
  eng.testa.
- ``speed``: seconds per training iteration and to convergence on the full CoNLL-2000 training
  set for each inference method.
- ``evaluation``: seconds (wall and CPU, medians) of one training evaluation (objective and
  gradient) of a factorial model at its own weights, on the sentences of a file, in process; with
  ``--kernel`` given several times, those builds of crftk._factorial interleaved, before and after.

    python benchmarks/fcrf.py table1 --data ../shared/data/conll2000 --out out/fcrf --sizes 8936
    python benchmarks/fcrf.py report --out out/fcrf --results benchmarks/results/fcrf
"""

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

from common import load_build
from compose import run, step     # benchmarks/compose.py: a crftk command, logged, skipped when done

REPO = Path(__file__).resolve().parents[1]
CRFTK = [sys.executable, "-m", "crftk.cli"]
FULL = 8936
TEMPLATES = {"fcrf": "templates/fcrf-np.tmpl", "pos": "templates/fcrf-pos.tmpl",
             "np": "templates/fcrf-np-cascade.tmpl"}
# options given to every factorial training (--history)
FCRF_OPTIONS = []


def load():
    return os.getloadavg()


def np_reduce(src, dst):
    """The CoNLL-2000 file with its chunk column reduced to B-NP/I-NP/O."""
    if Path(dst).exists():
        return dst
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    with open(src) as fin, open(str(dst) + ".tmp", "w") as fout:
        for line in fin:
            cols = line.split()
            if len(cols) == 3:
                tag = cols[2] if cols[2] in ("B-NP", "I-NP") else "O"
                line = f"{cols[0]} {cols[1]} {tag}\n"
            fout.write(line)
    os.replace(str(dst) + ".tmp", dst)
    return dst


def sentences_of(path):
    blocks, cur = [], []
    for line in open(path):
        if line.strip():
            cur.append(line)
        elif cur:
            blocks.append("".join(cur))
            cur = []
    if cur:
        blocks.append("".join(cur))
    return blocks


def subset(train, size, rep, out):
    """A random subset of ``size`` training sentences (seed = size * 100 + rep)."""
    dst = out / "data" / f"train.{size}.{rep}.txt"
    if size == FULL or dst.exists():
        return train if size == FULL else dst
    blocks = sentences_of(train)
    rng = random.Random(size * 100 + rep)
    chosen = sorted(rng.sample(range(len(blocks)), size))
    with open(dst, "w") as fh:
        fh.write("\n".join(blocks[i] for i in chosen) + "\n")
    return dst


def model_info(path):
    return json.loads(run(["info", "--json", path]))["training"]


def last_sweeps(train_log):
    """(sentences converged, sentences, mean sweeps) of the last iteration a train log reports."""
    last = None
    for line in open(train_log):
        words = line.split()
        if words[:1] == ["iter"] and "converged" in words:
            done, total = words[words.index("converged") + 1].split("/")
            last = (int(done), int(total), float(words[words.index("sweeps") + 1]))
    return last


def chains_eval(tagged, gold_cols, pred_cols):
    args = ["eval", "--json", tagged]
    for g, p in zip(gold_cols, pred_cols):
        args += ["--gold-col", g, "--pred-col", p]
    d = json.loads(run(args))
    if "columns" not in d:          # one pair: eval's plain report
        d = {"columns": [d], "joint_accuracy": d["token_accuracy"]}
    return d


def table1_run(train, dev, out, c2, max_iter, threads, record):
    """One training set: the three systems, each trained and scored on dev."""
    out.mkdir(parents=True, exist_ok=True)
    log = out / "log.txt"
    common = ["--c2", c2, "--max-iter", max_iter, "-p", threads]
    rows = {}
    # FCRF
    fcrf = out / "fcrf.model"
    t = time.time()
    step(fcrf, ["train", "-t", TEMPLATES["fcrf"], "-m", fcrf, "--label-col", 1, "--label-col", 2, *common, *FCRF_OPTIONS,
                train],
         out / "fcrf.train.log")
    tagged = out / "fcrf.tagged"
    step(tagged, ["tag", "-m", fcrf, "-p", threads, "-o", tagged, dev], log)
    d = chains_eval(tagged, [1, 2], [-2, -1])
    info = model_info(fcrf)
    rows["FCRF"] = {"pos_accuracy": d["columns"][0]["token_accuracy"], "np_f1": d["columns"][1]["overall"]["f1"],
                    "np_accuracy": d["columns"][1]["token_accuracy"], "joint_accuracy": d["joint_accuracy"],
                    "train_seconds": info["seconds"], "iterations": info["iterations"],
                    "converged": info["converged"]}
    # CRF+CRF: POS CRF from the words, NP CRF on the corpus POS, composed and decoded in cascade
    pos = out / "pos.model"
    step(pos, ["train", "-t", TEMPLATES["pos"], "-m", pos, "--label-col", 1, *common, train], out / "pos.train.log")
    npm = out / "np.model"
    step(npm, ["train", "-t", TEMPLATES["np"], "-m", npm, "--label-col", 2, *common, train], out / "np.train.log")
    pipe = out / "cascade.pipeline"
    step(pipe, ["compose", "-m", pos, "-m", npm, "--feed", 1, "-o", pipe], log)
    tagged = out / "cascade.tagged"
    step(tagged, ["tag", "-m", pipe, "--decode", "cascade", "-p", threads, "-o", tagged, dev], log)
    d = chains_eval(tagged, [1, 2], [-2, -1])
    ip, inp = model_info(pos), model_info(npm)
    rows["CRF+CRF"] = {"pos_accuracy": d["columns"][0]["token_accuracy"], "np_f1": d["columns"][1]["overall"]["f1"],
                       "np_accuracy": d["columns"][1]["token_accuracy"], "joint_accuracy": d["joint_accuracy"],
                       "train_seconds": ip["seconds"] + inp["seconds"],
                       "iterations": [ip["iterations"], inp["iterations"]]}
    # the NP CRF given the corpus POS column (the paper's Brill+CRF: the POS column here is
    # the corpus's own, from the Brill tagger)
    tagged = out / "np-corpus-pos.tagged"
    step(tagged, ["tag", "-m", npm, "-p", threads, "-o", tagged, dev], log)
    d = chains_eval(tagged, [2], [-1])
    rows["NP CRF on corpus POS"] = {"np_f1": d["columns"][0]["overall"]["f1"],
                                    "np_accuracy": d["columns"][0]["token_accuracy"]}
    record.update(rows=rows, load_after=load())
    return record


def table1(args):
    out = Path(args.out)
    train = np_reduce(Path(args.data) / "train.txt", out / "data" / "train.np.txt")
    dev = np_reduce(Path(args.data) / "dev.txt", out / "data" / "dev.np.txt")
    results = out / "table1.json"
    done = json.loads(results.read_text()) if results.exists() else []
    for size in args.sizes:
        for rep in range(1 if size == FULL else args.reps):
            if any(r["size"] == size and r["rep"] == rep for r in done):
                continue
            data = subset(train, size, rep, out)
            record = {"size": size, "rep": rep, "c2": args.c2, "max_iter": args.max_iter, "threads": args.threads,
                      "load_before": load()}
            table1_run(data, dev, out / f"{size}.{rep}" if size != FULL else out / str(size), args.c2,
                       args.max_iter, args.threads, record)
            done.append(record)
            results.write_text(json.dumps(done, indent=1))
            print(json.dumps(record["rows"], indent=1), flush=True)


def methods_run(train, dev, out, method, sweeps, c2, max_iter, threads):
    """Train one FCRF with an inference method (sweeps: the --max-sweeps cut), score dev."""
    out.mkdir(parents=True, exist_ok=True)
    name = f"{method}-{sweeps}"
    model = out / f"{name}.model"
    # trp-warm: trp with --warm-start
    args = ["train", "-t", TEMPLATES["fcrf"], "-m", model, "--label-col", 1, "--label-col", 2, "--c2", c2,
            "--max-iter", max_iter, "-p", threads, "--inference", method.replace("-warm", ""), *FCRF_OPTIONS]
    if method == "trp-warm":
        args.append("--warm-start")
    if method != "exact":
        args += ["--max-sweeps", sweeps]
    step(model, args + [train], out / f"{name}.train.log")
    tagged = out / f"{name}.tagged"
    step(tagged, ["tag", "-m", model, "-p", threads, "-o", tagged, dev], out / "log.txt")
    d = chains_eval(tagged, [1, 2], [-2, -1])
    info = model_info(model)
    converged, sentences, mean_sweeps = last_sweeps(out / f"{name}.train.log")
    return {"method": method, "max_sweeps": sweeps, "converged": converged, "sentences": sentences,
            "mean_sweeps": mean_sweeps, "np_f1": d["columns"][1]["overall"]["f1"],
            "pos_accuracy": d["columns"][0]["token_accuracy"], "joint_accuracy": d["joint_accuracy"],
            "train_seconds": info["seconds"], "iterations": info["iterations"],
            "seconds_per_iteration": info["seconds"] / max(1, info["iterations"]), "load": load()}


def table3(args):
    out = Path(args.out)
    train = np_reduce(Path(args.data) / "train.txt", out / "data" / "train.np.txt")
    dev = np_reduce(Path(args.data) / "dev.txt", out / "data" / "dev.np.txt")
    size = int(round(FULL * 0.05))
    rows = []
    for rep in range(args.reps):
        data = subset(train, size, rep, out)
        for method, sweeps in (("exact", 0), ("trp", 3), ("trp", args.max_sweeps), ("bp", 3), ("bp", args.max_sweeps)):
            rows.append({"rep": rep, **methods_run(data, dev, out / f"table3.{rep}", method, sweeps, args.c2,
                                                   args.max_iter, args.threads)})
            (out / "table3.json").write_text(json.dumps(rows, indent=1))


def speed(args):
    """Each method on all of train.txt at --max-iter (20: seconds per iteration; 2000: to
    convergence); rows of earlier runs at other caps are kept (speed.json)."""
    out = Path(args.out)
    train = np_reduce(Path(args.data) / "train.txt", out / "data" / "train.np.txt")
    dev = np_reduce(Path(args.data) / "dev.txt", out / "data" / "dev.np.txt")
    path = out / "speed.json"
    rows = json.loads(path.read_text()) if path.exists() else []
    for method in args.methods:
        row = {"max_iter": args.max_iter, "threads": args.threads,
               **methods_run(train, dev, out / f"speed-{args.max_iter}", method, args.max_sweeps, args.c2,
                             args.max_iter, args.threads)}
        rows = [r for r in rows if (r["method"], r.get("max_iter")) != (method, args.max_iter)] + [row]
        path.write_text(json.dumps(rows, indent=1))


def ner(args):
    """Three chains on CoNLL-2003 (POS, chunk, NER) against the NER CRF alone."""
    out = Path(args.out) / "ner"
    out.mkdir(parents=True, exist_ok=True)
    train, testa = Path(args.data) / "eng.train", Path(args.data) / "eng.testa"
    common = ["--c2", args.c2, "--max-iter", args.max_iter, "-p", args.threads]
    rows = {}
    crf = out / "ner.model"
    step(crf, ["train", "-t", TEMPLATES["pos"], "-m", crf, "--label-col", 3, *common, train], out / "ner.train.log")
    tagged = out / "ner.tagged"
    step(tagged, ["tag", "-m", crf, "-p", args.threads, "-o", tagged, testa], out / "log.txt")
    d = chains_eval(tagged, [3], [-1])
    rows["NER CRF"] = {"ner_f1": d["columns"][0]["overall"]["f1"], "train_seconds": model_info(crf)["seconds"]}
    fcrf = out / f"fcrf3-{args.inference}.model"
    step(fcrf, ["train", "-t", TEMPLATES["fcrf"], "-m", fcrf, "--label-col", 1, "--label-col", 2, "--label-col", 3,
                *FCRF_OPTIONS,
                "--inference", args.inference, *common, train], out / "fcrf3.train.log")
    tagged = out / f"fcrf3-{args.inference}.tagged"
    step(tagged, ["tag", "-m", fcrf, "-p", args.threads, "-o", tagged, testa], out / "log.txt")
    d = chains_eval(tagged, [1, 2, 3], [-3, -2, -1])
    rows[f"FCRF POS+chunk+NER ({args.inference})"] = {
        "pos_accuracy": d["columns"][0]["token_accuracy"], "chunk_f1": d["columns"][1]["overall"]["f1"],
        "ner_f1": d["columns"][2]["overall"]["f1"], "joint_accuracy": d["joint_accuracy"],
        "train_seconds": model_info(fcrf)["seconds"]}
    (Path(args.out) / "ner.json").write_text(json.dumps(rows, indent=1))


def _mean(xs):
    return sum(xs) / len(xs) if xs else float("nan")


def _table(parts, title, header):
    """A markdown table's title and head onto parts."""
    parts += [title + "\n", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]


def report(args):
    out = Path(args.out)
    parts = ["# Factorial CRFs (Sutton et al. 2004): results\n",
             "Produced by `benchmarks/fcrf.py` (make fcrf-table1, fcrf-table3, fcrf-ner, fcrf-speed). The machine "
             "has 2 cores shared with other jobs: one training at a time, the 1-minute load average is given; "
             "times are wall-clock and depend on that load.\n"]
    everything = {}
    t1 = out / "table1.json"
    if t1.exists():
        recs = json.loads(t1.read_text())
        everything["table1"] = recs
        _table(parts, "## Table 1: POS + NP chunking, CoNLL-2000 dev.txt (chunks reduced to B-NP/I-NP/O)",
               ["training sentences", "system", "POS acc", "NP F1", "joint acc", "training s", "iterations (cap)",
                "load"])
        for size in sorted({r["size"] for r in recs}):
            rs = [r for r in recs if r["size"] == size]
            for system in ("FCRF", "CRF+CRF", "NP CRF on corpus POS"):
                vals = [r["rows"][system] for r in rs if system in r["rows"]]
                if not vals:
                    continue

                def col(key, fmt="{:.2f}"):
                    xs = [v[key] for v in vals if key in v]
                    return fmt.format(_mean(xs)) if xs else "-"
                its = [v.get("iterations") for v in vals]
                parts.append(f"| {size}{' (' + str(len(rs)) + ' reps)' if len(rs) > 1 else ''} | {system} | "
                             f"{col('pos_accuracy')} | {col('np_f1')} | {col('joint_accuracy')} | "
                             f"{col('train_seconds', '{:.0f}')} | {its[0] if len(its) == 1 else its} "
                             f"({rs[0]['max_iter']}) | "
                             f"{rs[0]['load_before'][0]:.1f} |")
        parts.append("")
    t3 = out / "table3.json"
    if t3.exists():
        rows = json.loads(t3.read_text())
        everything["table3"] = rows
        reps = len({r["rep"] for r in rows})
        _table(parts, f"## Table 3: inference methods, {round(FULL * 0.05)}-sentence subsets of train.txt, "
                      f"dev.txt (mean of {reps} repetition{'s' if reps > 1 else ''})",
               ["method", "sweeps cap", "NP F1", "POS acc", "joint acc", "training s", "iterations", "s/iteration",
                "mean sweeps (last iteration)", "sentences converged", "load"])
        for key in dict.fromkeys((r["method"], r["max_sweeps"]) for r in rows):
            rs = [r for r in rows if (r["method"], r["max_sweeps"]) == key]

            def mean(field, fmt="{:.2f}"):
                xs = [r[field] for r in rs if r.get(field) is not None]
                return fmt.format(_mean(xs)) if xs else "-"
            conv = (f"{_mean([r['converged'] / r['sentences'] for r in rs]) * 100:.1f}%"
                    if all(r.get("sentences") for r in rs) else "-")
            parts.append(f"| {key[0]} | {'-' if key[0] == 'exact' else key[1]} | {mean('np_f1')} | "
                         f"{mean('pos_accuracy')} | {mean('joint_accuracy')} | {mean('train_seconds', '{:.0f}')} | "
                         f"{mean('iterations', '{:.0f}')} | {mean('seconds_per_iteration')} | "
                         f"{mean('mean_sweeps')} | {conv} | {_mean([r['load'][0] for r in rs]):.1f} |")
        parts.append("")
    sp = out / "speed.json"
    if sp.exists():
        rows = json.loads(sp.read_text())
        everything["speed"] = rows
        _table(parts, "## Speed: all of train.txt (8936 sentences), dev.txt scores",
               ["method", "iteration cap", "iterations", "training s", "s/iteration", "mean sweeps (last iteration)",
                "NP F1", "POS acc", "joint acc", "threads", "load"])
        for r in sorted(rows, key=lambda r: (r["max_iter"], r["method"])):
            parts.append(f"| {r['method']} | {r['max_iter']} | {r['iterations']} | {r['train_seconds']:.0f} | "
                         f"{r['seconds_per_iteration']:.2f} | {r['mean_sweeps']} | {r['np_f1']:.2f} | "
                         f"{r['pos_accuracy']:.2f} | {r['joint_accuracy']:.2f} | {r['threads']} | "
                         f"{r['load'][0]:.1f} |")
        parts.append("")
    nj = out / "ner.json"
    if nj.exists():
        rows = json.loads(nj.read_text())
        everything["ner"] = rows
        _table(parts, "## CoNLL-2003 eng.testa: three chains (POS, chunk, NER) against the NER CRF",
               ["system", "NER F1", "chunk F1", "POS acc", "joint acc", "training s"])
        for system, r in rows.items():
            cells = [f"{r[k]:.2f}" if k in r else "-" for k in ("ner_f1", "chunk_f1", "pos_accuracy", "joint_accuracy")]
            parts.append(f"| {system} | {' | '.join(cells)} | {r['train_seconds']:.0f} |")
        parts.append("")
    notes = out / "notes.md"
    if notes.exists():          # what the run's operator observed (interruptions, load), kept with the figures
        parts.append("## Notes\n\n" + notes.read_text())
    text = "\n".join(parts)
    Path(args.results + ".md").write_text(text + "\n")
    Path(args.results + ".json").write_text(json.dumps(everything, indent=1) + "\n")
    print(text)


def evaluation(args):
    """Time Grids.loglik at a model's weights (what one L-BFGS evaluation costs, without the
    optimizer), each --kernel build of crftk._factorial in turn, --reps rounds."""
    import numpy as np
    sys.path.insert(0, str(REPO))
    import crftk.structures.factorial as sf
    from crftk.io.conll import read_sentences
    from crftk.model import Model
    model = Model.load(args.model)
    st = model.structure
    corpus = st.encode(list(read_sentences(args.data))[:args.sentences or None])
    w = np.concatenate([p.weights for p in model.parts]).astype(np.float64)
    builds = []
    for path in args.kernel or [None]:
        if path is not None:
            sf._factorial = load_build("crftk._factorial", path)
        builds.append((path or "this checkout", st.bind(corpus, args.threads, inference=args.inference,
                                                       tolerance=1e-3, max_sweeps=args.max_sweeps)))
    wall, cpu, result = ([[] for _ in builds] for _ in range(3))
    for _ in range(args.reps):
        for i, (_, inf) in enumerate(builds):
            t, c = time.perf_counter(), time.process_time()
            f, g = inf.loglik(w, corpus.labels)
            wall[i].append(time.perf_counter() - t)
            cpu[i].append(time.process_time() - c)
            result[i] = (repr(f), repr(float(np.abs(g).sum())), inf.last_stats)
    for (name, _), wl, cp, r in zip(builds, wall, cpu, result):
        print(json.dumps({"kernel": name, "wall_median": float(np.median(wl)), "cpu_median": float(np.median(cp)),
                          "wall_min": min(wl), "objective": r[0], "gradient_abs_sum": r[1],
                          "converged": r[2][0], "mean_sweeps": r[2][1], "threads": args.threads, "load": load()}))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("table1", "table3", "speed", "ner"):
        p = sub.add_parser(name)
        p.add_argument("--data", required=True)
        p.add_argument("--out", default="out/fcrf")
        p.add_argument("--c2", type=float, default=0.05, help="L2 coefficient (the paper's prior variance 10)")
        p.add_argument("--max-iter", type=int, default=200)
        p.add_argument("--threads", type=int, default=2)
        p.add_argument("--reps", type=int, default=3 if name == "table1" else 5)
        p.add_argument("--max-sweeps", type=int, default=100)
        if name == "table1":
            p.add_argument("--sizes", type=int, nargs="+", default=[FULL])
        if name == "speed":
            p.add_argument("--methods", nargs="+", default=["exact", "trp", "bp"],
                           choices=["exact", "trp", "bp", "trp-warm"])
        if name == "ner":
            p.add_argument("--inference", default="trp")
        p.add_argument("--history", type=int, help="L-BFGS pairs of the factorial CRFs' training (crftk train "
                       "--history; unset: the factorial default, 50; the tables before it was made were run "
                       "with 6)")
    p = sub.add_parser("evaluation")
    p.add_argument("--model", required=True, help="a factorial model (its weights and feature spaces)")
    p.add_argument("--data", required=True, help="sentences with the model's label columns")
    p.add_argument("--sentences", type=int, default=0, help="the first N sentences only (0: all)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--inference", default="trp", choices=["exact", "trp", "bp"])
    p.add_argument("--max-sweeps", type=int, default=100)
    p.add_argument("--kernel", action="append", help="a built crftk/_factorial*.so to time (repeatable)")
    p = sub.add_parser("report")
    p.add_argument("--out", default="out/fcrf")
    p.add_argument("--results", default="benchmarks/results/fcrf")
    args = ap.parse_args()
    if getattr(args, "history", None) is not None:
        FCRF_OPTIONS.extend(["--history", args.history])
    {"table1": table1, "table3": table3, "speed": speed, "ner": ner, "evaluation": evaluation,
     "report": report}[args.cmd](args)


if __name__ == "__main__":
    main()
