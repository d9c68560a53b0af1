"""Composition of CRFs (Sutton & McCallum 2005): cascade against joint decoding, and its speed.

Two experiments, each a chain of `crftk` commands (every step is skipped when its output
exists, so an interrupted run resumes):

- ``conll2000``: a POS tagger from the words alone (templates/pos-words.tmpl) trained on
  train.txt, its out-of-fold predictions (``train --cross-predict``) replacing the POS column
  the chunkers train on; a chunker that reads the POS tag at offset 0 only
  (templates/chunking-pos0.tmpl: exact joint decoding) and the CRF++ one
  (templates/chunking-crfpp.tmpl: joint decoding by K-best upstream rescoring). On dev.txt:
  POS accuracy, chunk F1 with the corpus POS column, cascade, joint; McNemar joint vs cascade;
  tokens/s of cascade and joint decoding at 1 and 2 threads.
- ``ner``: transfer from CoNLL-2000 to CoNLL-2003. The CRF++ chunker above tags eng.train's
  words and POS tags; an NER tagger (templates/conll2003-ner-chunk0.tmpl, chunk tag at offset
  0) trains on eng.train with that predicted chunk column; on eng.testa, NER F1 without chunk
  features (the same template without its chunk lines), cascade and joint.

    python benchmarks/compose.py conll2000 --data ../shared/data/conll2000 --out out/compose
    python benchmarks/compose.py ner --data ../shared/data/conll2003 --chunker out/compose/chunk-crfpp.model \
        --out out/compose
    python benchmarks/compose.py respeed --data ../shared/data/conll2000 --ner-data ../shared/data/conll2003 \
        --out out/compose            # the speeds again, on a quieter machine
    python benchmarks/compose.py report --out out/compose --results benchmarks/results/compose

Training is capped at --max-iter iterations (stated in the results); the test sets are never read.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CRFTK = [sys.executable, "-m", "crftk.cli"]
NICE = ["nice", "-n", "5"]


def run(args, log=None, quiet=False):
    """Run a crftk command (niced); its stderr goes to ``log`` (appended)."""
    args = [str(a) for a in args]
    print("+ crftk " + " ".join(args), flush=True)
    with open(log, "a") if log else open(os.devnull, "w") as err:
        p = subprocess.run(NICE + CRFTK + args, stderr=err, stdout=subprocess.PIPE, text=True, cwd=REPO)
    if p.returncode != 0:
        sys.exit(f"crftk {' '.join(args)} failed (exit {p.returncode}); see {log}")
    return p.stdout


def step(output, args, log):
    """Run the command unless its output exists."""
    if Path(output).exists():
        print(f"= {output} exists, skipped", flush=True)
        return
    run(args, log)


def scores(tagged, gold_col, pred_col, other=None):
    args = ["eval", "--json", "--gold-col", gold_col, "--pred-col", pred_col, tagged]
    if other is not None:
        args += ["--mcnemar", other]
    d = json.loads(run(args))
    out = {"f1": d["overall"]["f1"], "accuracy": d["token_accuracy"],
           "sentence_accuracy": d["sentence_accuracy"], "tokens": d["n_tokens"]}
    if "mcnemar" in d:
        out["mcnemar"] = d["mcnemar"]
    return out


def tagged_pipeline(out, name, pipeline, data, decode, log, k=20):
    path = out / f"{name}.{decode}.tagged"
    step(path, ["tag", "-m", pipeline, "--decode", decode, "--nbest-upstream", k, "-o", path, data], log)
    return path


def speed(pipeline, data, decode, threads, k=20, repeats=2):
    """Tokens per second of Pipeline.decode over the whole file (read and split in batches
    beforehand; the model loaded once), best of ``repeats``."""
    from crftk.commands.compose import Pipeline
    from crftk.io.conll import chunked, read_corpus
    pipe = Pipeline.load(pipeline, threads=threads)
    sents = read_corpus(data)
    batches = list(chunked(sents, 50_000))
    n = sum(len(s) for s in sents)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for b in batches:
            pipe.decode(b, decode, k)
        best = min(best, time.perf_counter() - t0)
    return n / best


def conll2000(a):
    out, data = Path(a.out), Path(a.data)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "conll2000.log"
    train, dev = data / "train.txt", data / "dev.txt"
    it = ["--max-iter", a.max_iter, "--threads", a.threads]
    step(out / "pos.model", ["train", "-t", REPO / "templates/pos-words.tmpl", "-m", out / "pos.model",
                             "--label-col", 1, "--cross-predict", a.folds, "--cross-output",
                             out / "train.predpos.txt", *it, train], log)
    # the chunkers train on the out-of-fold POS tags; chunk-pos0-gold on the corpus POS column, for comparison
    for name, tmpl, data in (("chunk-pos0", "chunking-pos0.tmpl", out / "train.predpos.txt"),
                             ("chunk-crfpp", "chunking-crfpp.tmpl", out / "train.predpos.txt"),
                             ("chunk-pos0-gold", "chunking-pos0.tmpl", train)):
        step(out / f"{name}.model", ["train", "-t", REPO / "templates" / tmpl, "-m", out / f"{name}.model",
                                     *it, data], log)
        step(out / f"pos-{name}.pipeline", ["compose", "-m", out / "pos.model", "-m", out / f"{name}.model",
                                            "--feed", 1, "-o", out / f"pos-{name}.pipeline"], log)
    old = json.loads((out / "conll2000.json").read_text()) if (out / "conll2000.json").exists() else {}
    results = {"max_iter": a.max_iter, "folds": a.folds}
    step(out / "pos.dev.tagged", ["tag", "-m", out / "pos.model", "-o", out / "pos.dev.tagged", dev], log)
    results["pos_accuracy"] = scores(out / "pos.dev.tagged", 1, -1)["accuracy"]
    for name in ("chunk-pos0", "chunk-crfpp", "chunk-pos0-gold"):
        r = results[name] = {}
        step(out / f"{name}.dev.tagged", ["tag", "-m", out / f"{name}.model", "-o", out / f"{name}.dev.tagged",
                                          dev], log)
        r["corpus_pos"] = scores(out / f"{name}.dev.tagged", 2, -1)
        pipe = out / f"pos-{name}.pipeline"
        cascade = tagged_pipeline(out, f"pos-{name}", pipe, dev, "cascade", log)
        joint = tagged_pipeline(out, f"pos-{name}", pipe, dev, "joint", log, a.nbest_upstream)
        r["cascade"] = scores(cascade, 2, -1)
        r["cascade"]["pos_accuracy"] = scores(cascade, 1, 3)["accuracy"]
        r["joint"] = scores(joint, 2, -1, other=cascade)
        r["joint"]["pos_accuracy"] = scores(joint, 1, 3)["accuracy"]
        r["joint_mode"] = f"{a.nbest_upstream}-best upstream" if name == "chunk-crfpp" else "exact"
        if name == "chunk-pos0-gold":
            continue            # decodes as fast as chunk-pos0
        if "speed" in old.get(name, {}):
            r["speed"] = old[name]["speed"]         # measured before (respeed measures again)
            results["load"] = old.get("load")
        else:
            r["speed"] = {f"{d}-{t}": speed(pipe, dev, d, t, a.nbest_upstream) for d in ("cascade", "joint")
                          for t in (1, 2)}
            results["load"] = round(os.getloadavg()[0], 1)
        print(name, json.dumps(r, indent=1), flush=True)
    (out / "conll2000.json").write_text(json.dumps(results, indent=2))


def ner(a):
    from crftk.commands.tag import Tagger
    from crftk.io.conll import Layout, Sentence, format_sentence, read_sentences
    from crftk.model import Model
    out, data = Path(a.out), Path(a.data)
    log = out / "ner.log"
    train, testa = data / "eng.train", data / "eng.testa"
    it = ["--max-iter", a.max_iter, "--threads", a.threads]
    predicted = out / "eng.train.predchunk"
    if not predicted.exists():
        # the CoNLL-2000 chunker reads eng.train's words and POS tags; its labels replace column 2
        chunker = Tagger(Model.load(a.chunker))
        layout = Layout()
        items = list(read_sentences(train, passthrough=True, layout=layout))
        sents = [s for s in items if not isinstance(s, str)]
        tags = chunker.tag([Sentence([r[:2] for r in s.rows], s.doc) for s in sents])
        parts, i = [], 0
        for item in items:
            if isinstance(item, str):
                parts.append(item + "\n")
                continue
            parts.append(format_sentence([r[:2] + [c] + r[3:] for r, c in zip(item.rows, tags[i])],
                                         sep=layout.separator))
            i += 1
        predicted.write_text("".join(parts))
    nochunk = out / "conll2003-ner-nochunk.tmpl"
    if not nochunk.exists():
        text = (REPO / "templates/conll2003-ner-chunk0.tmpl").read_text().splitlines()
        nochunk.write_text("# conll2003-ner-chunk0.tmpl without its chunk lines (made by benchmarks/compose.py)\n"
                           + "\n".join(x for x in text if ",2]" not in x) + "\n")
    step(out / "ner-nochunk.model", ["train", "-t", nochunk, "-m", out / "ner-nochunk.model", *it, train], log)
    step(out / "ner-chunk0.model", ["train", "-t", REPO / "templates/conll2003-ner-chunk0.tmpl", "-m",
                                    out / "ner-chunk0.model", *it, predicted], log)
    pipe = out / "chunk-ner.pipeline"
    step(pipe, ["compose", "-m", a.chunker, "-m", out / "ner-chunk0.model", "--feed", 2, "-o", pipe], log)
    results = {"max_iter": a.max_iter}
    step(out / "ner-nochunk.testa.tagged", ["tag", "-m", out / "ner-nochunk.model", "-o",
                                            out / "ner-nochunk.testa.tagged", testa], log)
    results["no_chunk"] = scores(out / "ner-nochunk.testa.tagged", 3, -1)
    cascade = tagged_pipeline(out, "chunk-ner", pipe, testa, "cascade", log)
    joint = tagged_pipeline(out, "chunk-ner", pipe, testa, "joint", log)
    results["cascade"] = scores(cascade, 3, -1)
    results["joint"] = scores(joint, 3, -1, other=cascade)
    results["speed"] = {f"{d}-{t}": speed(pipe, testa, d, t) for d in ("cascade", "joint") for t in (1, 2)}
    results["load"] = round(os.getloadavg()[0], 1)
    print(json.dumps(results, indent=1), flush=True)
    (out / "ner.json").write_text(json.dumps(results, indent=2))


def respeed(a):
    """Measure the decoding speeds again (e.g. on a quieter machine) into the experiments' JSON."""
    out = Path(a.out)
    for name, data, pipes in (("conll2000", Path(a.data or "") / "dev.txt",
                               [("chunk-pos0", "pos-chunk-pos0.pipeline"), ("chunk-crfpp", "pos-chunk-crfpp.pipeline")]),
                              ("ner", Path(a.ner_data or "") / "eng.testa", [(None, "chunk-ner.pipeline")])):
        path = out / f"{name}.json"
        if not path.exists() or not data.exists():
            continue
        results = json.loads(path.read_text())
        for key, pipe in pipes:
            r = results[key] if key else results
            r["speed"] = {f"{d}-{t}": speed(out / pipe, data, d, t, a.nbest_upstream) for d in ("cascade", "joint")
                          for t in (1, 2)}
            print(name, key or "", {k: round(v) for k, v in r["speed"].items()}, flush=True)
        results["load"] = round(os.getloadavg()[0], 1)
        path.write_text(json.dumps(results, indent=2))


def np_f1(path, gold_col, pred_col):
    """NP chunk F1 of a tagged file (the DCRF paper reports NP chunking)."""
    from crftk.evaluation.conlleval import evaluate, read_labels
    labels = read_labels(str(path), gold_col=gold_col, pred_col=pred_col)
    return evaluate(labels.gold, labels.pred).per_type["NP"].f1


def report(a):
    out = Path(a.out)
    c = json.loads((out / "conll2000.json").read_text())
    for name in ("chunk-pos0", "chunk-crfpp", "chunk-pos0-gold"):
        if name not in c:
            continue
        r = c[name]
        r["corpus_pos"]["np_f1"] = np_f1(out / f"{name}.dev.tagged", 2, -1)
        for d in ("cascade", "joint"):
            r[d]["np_f1"] = np_f1(out / f"pos-{name}.{d}.tagged", 2, -1)
    n = json.loads((out / "ner.json").read_text()) if (out / "ner.json").exists() else None
    doc = {"conll2000": c, "ner": n}
    Path(a.results + ".json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = ["# Composition of CRFs: cascade against joint decoding", "",
             "Made by `make compose-conll2000 compose-ner` (benchmarks/compose.py). Every model is trained "
             f"with L-BFGS, c2=1, at most {c['max_iter']} iterations (not to convergence: an iteration of the POS tagger, "
             f"44 labels, takes 2-3 s on the shared 2 cores); the chunkers train on {c['folds']}-fold out-of-fold "
             "predicted POS tags (`train --cross-predict`). Scores on CoNLL-2000 dev.txt and CoNLL-2003 "
             "eng.testa; the test sets are not used.", "",
             "## CoNLL-2000: POS -> chunking", "",
             f"POS tagger from the words alone (templates/pos-words.tmpl): **{c['pos_accuracy']:.2f}%** "
             "token accuracy on dev.txt.", "",
             "| chunker (template) | joint mode | chunk F1 (NP F1), corpus POS | cascade | joint | POS acc. "
             "cascade | POS acc. joint | McNemar joint vs cascade (tokens) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, tmpl in (("chunk-pos0", "chunking-pos0.tmpl"), ("chunk-crfpp", "chunking-crfpp.tmpl"),
                       ("chunk-pos0-gold", "chunking-pos0.tmpl, trained on the corpus POS")):
        if name not in c:
            continue
        r = c[name]
        m = r["joint"]["mcnemar"]
        f1 = {k: f"{r[k]['f1']:.2f} ({r[k]['np_f1']:.2f})" for k in ("corpus_pos", "cascade", "joint")}
        lines.append(f"| {tmpl} | {r['joint_mode']} | {f1['corpus_pos']} | {f1['cascade']} | "
                     f"{f1['joint']} | {r['cascade']['pos_accuracy']:.2f} | "
                     f"{r['joint']['pos_accuracy']:.2f} | joint only right {m['n_a_only']}, cascade only "
                     f"{m['n_b_only']}, p = {m['p_value']:.3g} |")
    if "chunk-pos0-gold" in c:
        lines += ["", f"Training the chunker on out-of-fold predicted POS tags rather than the corpus column "
                  f"raises its cascade F1 from {c['chunk-pos0-gold']['cascade']['f1']:.2f} to "
                  f"{c['chunk-pos0']['cascade']['f1']:.2f}: it learns how far to trust the tagger."]
    lines += ["", "For reference, the DCRF paper's cascade of two CRFs (Brill-tagger POS in training) reaches 93.10 "
              "NP F1 on the CoNLL-2000 test set, which is not used here.", "",
              "Joint decoding sums the stages' unnormalized scores (eq. 7): where the chunker's weights "
              "favour a POS tag (NN inside noun phrases above all), the sum moves the tagger to it, and "
              "here that costs more POS accuracy than it gains chunks (JJ -> NN is the most frequent change "
              "joint decoding makes).", "",
              f"Decoding speed on dev.txt ({c['chunk-pos0']['cascade']['tokens']:,} tokens; tokens/s of "
              "`Pipeline.decode`, input read and the model loaded beforehand, best of 2 runs; on 2 cores "
              f"shared with other jobs, load average {c.get('load', '?')}: read these as lower bounds):", "",
              "| pipeline | cascade, 1 thread | cascade, 2 | joint, 1 thread | joint, 2 |", "|---|---|---|---|---|"]
    for name, label in (("chunk-pos0", "POS x chunking-pos0 (exact, 44 x 22 joint labels)"),
                        ("chunk-crfpp", f"POS x chunking-crfpp ({c['chunk-crfpp']['joint_mode']})")):
        s = c[name]["speed"]
        lines.append(f"| {label} | {s['cascade-1']:,.0f} | {s['cascade-2']:,.0f} | {s['joint-1']:,.0f} | "
                     f"{s['joint-2']:,.0f} |")
    if n:
        m = n["joint"]["mcnemar"]
        s = n["speed"]
        lines += ["", "## Transfer: CoNLL-2000 chunker -> CoNLL-2003 NER", "",
                  "The CRF++ chunker above (trained on CoNLL-2000 with predicted POS) fills eng.train's chunk "
                  "column for training and eng.testa's at test time; the NER tagger "
                  "(templates/conll2003-ner-chunk0.tmpl) reads it at offset 0, so joint decoding is exact.", "",
                  "| NER on eng.testa | F1 | token accuracy |", "|---|---|---|",
                  f"| no chunk features | {n['no_chunk']['f1']:.2f} | {n['no_chunk']['accuracy']:.2f} |",
                  f"| cascade | {n['cascade']['f1']:.2f} | {n['cascade']['accuracy']:.2f} |",
                  f"| joint | {n['joint']['f1']:.2f} | {n['joint']['accuracy']:.2f} |", "",
                  f"McNemar joint vs cascade (tokens): joint only right {m['n_a_only']}, cascade only "
                  f"{m['n_b_only']}, p = {m['p_value']:.3g}. Decoding speed on eng.testa (tokens/s): cascade "
                  f"{s['cascade-1']:,.0f} (1 thread) / {s['cascade-2']:,.0f} (2), joint {s['joint-1']:,.0f} / "
                  f"{s['joint-2']:,.0f} (load average {n.get('load', '?')})."]
    Path(a.results + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", choices=["conll2000", "ner", "respeed", "report"])
    ap.add_argument("--data", default=None)
    ap.add_argument("--ner-data", default=None, help="respeed: the CoNLL-2003 folder")
    ap.add_argument("--out", default="out/compose")
    ap.add_argument("--chunker", default="out/compose/chunk-crfpp.model")
    ap.add_argument("--results", default="benchmarks/results/compose")
    ap.add_argument("--max-iter", type=int, default=100)
    ap.add_argument("--folds", type=int, default=4)
    ap.add_argument("--nbest-upstream", type=int, default=20)
    ap.add_argument("--threads", type=int, default=0)
    a = ap.parse_args()
    {"conll2000": conll2000, "ner": ner, "respeed": respeed, "report": report}[a.task](a)


if __name__ == "__main__":
    main()
