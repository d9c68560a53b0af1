"""Composition of CRFs (Sutton & McCallum 2005): cascade against joint decoding, and its speed.

Two experiments, each a chain of `crftk` commands (every step is skipped when its output
exists, so an interrupted run resumes):

- ``conll2000``: a POS tagger from the words alone (templates/pos-words.tmpl) trained on
  train.txt, its out-of-fold predictions (``train --cross-predict``) replacing the POS column
  the chunkers train on; a chunker that reads the POS tag at offset 0 only
  (templates/chunking-pos0.tmpl: exact joint decoding) and the CRF++ one
  (templates/chunking-crfpp.tmpl: joint decoding by K-best upstream rescoring). On dev.txt:
  POS accuracy, chunk F1 with the corpus POS column, cascade, joint (eq. 7) and normalized
  (K-best upstream labelings rescored by the sum of the stages' log-probabilities); McNemar
  joint and normalized vs cascade; tokens/s of each decoding at 1 and 2 threads.
- ``ner``: transfer from CoNLL-2000 to CoNLL-2003. The CRF++ chunker above tags eng.train's
  words and POS tags; an NER tagger (templates/conll2003-ner-chunk0.tmpl, chunk tag at offset
  0) trains on eng.train with that predicted chunk column; on eng.testa, NER F1 without chunk
  features (the same template without its chunk lines), cascade, joint and normalized.

    python benchmarks/compose.py conll2000 --data ../shared/data/conll2000 --out out/compose
    python benchmarks/compose.py ner --data ../shared/data/conll2003 --chunker out/compose/chunk-crfpp.model \
        --out out/compose
    python benchmarks/compose.py respeed --data ../shared/data/conll2000 --ner-data ../shared/data/conll2003 \
        --out out/compose            # the speeds again, on a quieter machine
    python benchmarks/compose.py weights --data ../shared/data/conll2000 --ner-data ../shared/data/conll2003 \
        --out out/compose            # a weight on the upstream stage's score, tried on dev/testa
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

import numpy as np

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


#: The pipeline decodings compared (crftk tag --decode).
DECODES = ("cascade", "joint", "normalized")


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


def speeds(pipe, data, k, old=None):
    """tokens/s of every decoding at 1 and 2 threads; figures in ``old`` are kept (respeed
    measures all again)."""
    old = old or {}
    return {key: old[key] if key in old else speed(pipe, data, d, t, k)
            for d in DECODES for t in (1, 2) for key in [f"{d}-{t}"]}


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
        r["cascade"] = scores(cascade, 2, -1)
        r["cascade"]["pos_accuracy"] = scores(cascade, 1, 3)["accuracy"]
        for d in ("joint", "normalized"):
            tagged = tagged_pipeline(out, f"pos-{name}", pipe, dev, d, log, a.nbest_upstream)
            r[d] = scores(tagged, 2, -1, other=cascade)
            r[d]["pos_accuracy"] = scores(tagged, 1, 3)["accuracy"]
        r["joint_mode"] = f"{a.nbest_upstream}-best upstream" if name == "chunk-crfpp" else "exact"
        r["normalized_mode"] = f"{a.nbest_upstream}-best upstream"
        if name == "chunk-pos0-gold":
            continue            # decodes as fast as chunk-pos0
        before = old.get(name, {}).get("speed", {})
        r["speed"] = speeds(pipe, dev, a.nbest_upstream, before)
        if len(before) < len(r["speed"]) or "load" not in old:
            results["load"] = round(os.getloadavg()[0], 1)
        else:
            results["load"] = old["load"]
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
    old = json.loads((out / "ner.json").read_text()) if (out / "ner.json").exists() else {}
    results = {"max_iter": a.max_iter}
    step(out / "ner-nochunk.testa.tagged", ["tag", "-m", out / "ner-nochunk.model", "-o",
                                            out / "ner-nochunk.testa.tagged", testa], log)
    results["no_chunk"] = scores(out / "ner-nochunk.testa.tagged", 3, -1)
    cascade = tagged_pipeline(out, "chunk-ner", pipe, testa, "cascade", log)
    results["cascade"] = scores(cascade, 3, -1)
    for d in ("joint", "normalized"):
        results[d] = scores(tagged_pipeline(out, "chunk-ner", pipe, testa, d, log, a.nbest_upstream), 3, -1,
                            other=cascade)
    before = old.get("speed", {})
    results["speed"] = speeds(pipe, testa, a.nbest_upstream, before)
    measured = len(before) < len(results["speed"]) or "load" not in old
    results["load"] = round(os.getloadavg()[0], 1) if measured else old["load"]
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
            r["speed"] = speeds(out / pipe, data, a.nbest_upstream)
            print(name, key or "", {k: round(v) for k, v in r["speed"].items()}, flush=True)
        results["load"] = round(os.getloadavg()[0], 1)
        path.write_text(json.dumps(results, indent=2))


#: Weights of the upstream stage tried by ``weights``.
STAGE_WEIGHTS = (0.5, 0.75, 1, 1.5, 2, 3, 4)


def candidates(pipe, sents, k):
    """Per sentence, its k best upstream labelings as (s1, s2*, log Z2, upstream ids, downstream
    ids): the upstream Viterbi score, the downstream stage's best score given it and its log Z."""
    up = pipe.stages[0]
    beams = [[(0.0, [])] for _ in sents]
    first = [[] for _ in sents]
    for h, owners, options in pipe._stage_options(up, sents, beams, None, k, False):
        for s, opts in zip(owners, options):
            first[s] = [(sc, [path]) for sc, path in opts]
    out = [[] for _ in sents]
    links = pipe.links()[0] is None
    for normalized in (False, True):
        if links:
            gen = pipe._table_options(1, sents, first, 1, normalized)
        else:
            names = np.asarray(up.labels, dtype=object)
            gen = pipe._stage_options(pipe.stages[1], sents, first, names, 1, normalized)
        for h, owners, options in gen:
            for s, ((sc, path),) in zip(owners, options):
                if normalized:
                    out[s][h][2] = out[s][h][1] - sc
                else:
                    out[s].append([first[s][h][0], sc, None, first[s][h][1][0], path])
    return out


def weights(a):
    """Chunk (NER) F1 when the upstream stage's score is weighted, over the same K best upstream
    labelings: w*s1 + s2 (eq. 7 with a stage weight) and w*log p1 + log p2 (normalized with one);
    on dev.txt / eng.testa themselves, so the best weight is chosen on the figures it reports."""
    from crftk.commands.compose import Pipeline
    from crftk.evaluation.conlleval import evaluate
    from crftk.io.conll import read_corpus
    out = Path(a.out)
    runs = [("chunk-pos0", out / "pos-chunk-pos0.pipeline", Path(a.data or "") / "dev.txt"),
            ("chunk-crfpp", out / "pos-chunk-crfpp.pipeline", Path(a.data or "") / "dev.txt"),
            ("ner", out / "chunk-ner.pipeline", Path(a.ner_data or "") / "eng.testa")]
    results = {}
    for name, pipe_path, data in runs:
        if not pipe_path.exists() or not data.exists():
            continue
        pipe = Pipeline.load(pipe_path, threads=a.threads)
        sents = read_corpus(data)
        cands = candidates(pipe, sents, a.nbest_upstream)
        gold = [[r[-1] for r in s.rows] for s in sents]
        names = np.asarray(pipe.stages[1].labels, dtype=object)

        def f1(objective):
            pred = [names[max(c, key=objective)[4]].tolist() for c in cands]
            return evaluate(gold, pred).overall.f1

        # the first candidate is the upstream Viterbi labeling: the cascade
        r = results[name] = {"cascade": evaluate(gold, [names[c[0][4]].tolist() for c in cands]).overall.f1,
                             "weights": {}}
        for w in STAGE_WEIGHTS:
            r["weights"][str(w)] = {"eq7": f1(lambda c: w * c[0] + c[1]),
                                    "normalized": f1(lambda c: w * c[0] + c[1] - c[2])}
        print(name, json.dumps(r), flush=True)
    (out / "weights.json").write_text(json.dumps({"nbest_upstream": a.nbest_upstream, **results}, indent=2))


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
        for d in DECODES:
            r[d]["np_f1"] = np_f1(out / f"pos-{name}.{d}.tagged", 2, -1)
    n = json.loads((out / "ner.json").read_text()) if (out / "ner.json").exists() else None
    doc = {"conll2000": c, "ner": n}
    Path(a.results + ".json").write_text(json.dumps(doc, indent=2) + "\n")
    K = c["chunk-pos0"].get("normalized_mode", "?")
    lines = ["# Composition of CRFs: cascade, joint and normalized decoding", "",
             "Made by `make compose-conll2000 compose-ner` (benchmarks/compose.py; the last table by its "
             "`weights` task). Every model is trained "
             f"with L-BFGS, c2=1, at most {c['max_iter']} iterations (not to convergence: an iteration of the POS tagger, "
             f"44 labels, takes 2-3 s on the shared 2 cores); the chunkers train on {c['folds']}-fold out-of-fold "
             "predicted POS tags (`train --cross-predict`). Scores on CoNLL-2000 dev.txt and CoNLL-2003 "
             "eng.testa; the test sets are not used. Nothing is tuned on them either: the decodings "
             f"have no weights, and K = {K.split('-')[0]} upstream labelings is the default of `--nbest-upstream`.", "",
             "Decodings (`crftk tag --decode`): **cascade**, each stage's Viterbi labels feed the next; "
             "**joint**, the paper's eq. 7, the best labeling of both stages under the sum of their "
             "unnormalized scores s1(y1) + s2(y1, y2) (exact over the product of the label sets when the "
             "chunker reads POS at offset 0 only, else by rescoring the K best POS labelings); "
             "**normalized**, the K best POS labelings, each with the chunker's best labeling given it, "
             "rescored by log p(y1|x) + log p(y2|y1,x) = s1(y1) - log Z1 + s2(y1, y2) - log Z2(y1).", "",
             "## CoNLL-2000: POS -> chunking", "",
             f"POS tagger from the words alone (templates/pos-words.tmpl): **{c['pos_accuracy']:.2f}%** "
             "token accuracy on dev.txt.", "",
             "Chunk F1 (NP F1) on dev.txt:", "",
             f"| chunker (template) | corpus POS | cascade | joint | normalized ({K}) |", "|---|---|---|---|---|"]
    names = (("chunk-pos0", "chunking-pos0.tmpl"), ("chunk-crfpp", "chunking-crfpp.tmpl"),
             ("chunk-pos0-gold", "chunking-pos0.tmpl, trained on the corpus POS"))
    for name, tmpl in names:
        if name not in c:
            continue
        r = c[name]
        f1 = {k: f"{r[k]['f1']:.2f} ({r[k]['np_f1']:.2f})" for k in ("corpus_pos",) + DECODES}
        lines.append(f"| {tmpl} | {f1['corpus_pos']} | {f1['cascade']} | {f1['joint']}, {r['joint_mode']} | "
                     f"{f1['normalized']} |")
    lines += ["", "POS accuracy of each decoding, and McNemar's test on chunk tags against the cascade (tokens "
              "only this decoding gets right / only the cascade gets right, p):", "",
              "| chunker (template) | POS acc. cascade | joint | normalized | McNemar joint vs cascade | "
              "McNemar normalized vs cascade |", "|---|---|---|---|---|---|"]
    for name, tmpl in names:
        if name not in c:
            continue
        r = c[name]
        m = {d: r[d]["mcnemar"] for d in ("joint", "normalized")}
        lines.append(f"| {tmpl} | {r['cascade']['pos_accuracy']:.2f} | {r['joint']['pos_accuracy']:.2f} | "
                     f"{r['normalized']['pos_accuracy']:.2f} | "
                     + " | ".join(f"{m[d]['n_a_only']} / {m[d]['n_b_only']}, p = {m[d]['p_value']:.3g}"
                                  for d in ("joint", "normalized")) + " |")
    if "chunk-pos0-gold" in c:
        lines += ["", f"Training the chunker on out-of-fold predicted POS tags rather than the corpus column "
                  f"raises its cascade F1 from {c['chunk-pos0-gold']['cascade']['f1']:.2f} to "
                  f"{c['chunk-pos0']['cascade']['f1']:.2f}: it learns how far to trust the tagger."]
    lines += ["", "For reference, the DCRF paper's cascade of two CRFs (Brill-tagger POS in training) reaches 93.10 "
              "NP F1 on the CoNLL-2000 test set, which is not used here.", "",
              "Joint decoding sums the stages' unnormalized scores (eq. 7) and so leaves out the chunker's "
              "log Z2(y1): POS tags under which the chunker scores every chunk labeling higher (NN rather than "
              "JJ before a noun, inside a noun phrase) win, though they make no chunk labeling more probable. "
              "That costs more POS accuracy than it gains chunks (JJ -> NN is the most frequent change joint "
              "decoding makes). Normalized decoding subtracts log Z2(y1), so the chunker moves a POS tag only "
              "by how much more probable its own labeling becomes given it; it raises POS accuracy and "
              "chunk F1 over the cascade with both chunkers. It cannot be exact (log Z2(y1) does not "
              "factorize over positions); K = 1 is the cascade.", "",
              f"Decoding speed on dev.txt ({c['chunk-pos0']['cascade']['tokens']:,} tokens; tokens/s of "
              "`Pipeline.decode`, input read and the model loaded beforehand, best of 2 runs; on 2 cores "
              f"shared with other jobs, load average {c.get('load', '?')}: read these as lower bounds):", "",
              "| pipeline | cascade, 1 thread | cascade, 2 | joint, 1 thread | joint, 2 | normalized, 1 thread | "
              "normalized, 2 |", "|---|---|---|---|---|---|---|"]
    for name, label in (("chunk-pos0", "POS x chunking-pos0 (joint exact, 44 x 22 joint labels)"),
                        ("chunk-crfpp", f"POS x chunking-crfpp (joint {c['chunk-crfpp']['joint_mode']})")):
        s = c[name]["speed"]
        lines.append(f"| {label} | " + " | ".join(f"{s.get(f'{d}-{t}', float('nan')):,.0f}"
                                                  for d in DECODES for t in (1, 2)) + " |")
    if n:
        s = n["speed"]
        lines += ["", "## Transfer: CoNLL-2000 chunker -> CoNLL-2003 NER", "",
                  "The CRF++ chunker above (trained on CoNLL-2000 with predicted POS) fills eng.train's chunk "
                  "column for training and eng.testa's at test time; the NER tagger "
                  "(templates/conll2003-ner-chunk0.tmpl) reads it at offset 0, so joint decoding is exact.", "",
                  "| NER on eng.testa | F1 | token accuracy | McNemar vs cascade (tokens) |", "|---|---|---|---|",
                  f"| no chunk features | {n['no_chunk']['f1']:.2f} | {n['no_chunk']['accuracy']:.2f} | |",
                  f"| cascade | {n['cascade']['f1']:.2f} | {n['cascade']['accuracy']:.2f} | |"]
        for d in ("joint", "normalized"):
            m = n[d]["mcnemar"]
            lines.append(f"| {d} | {n[d]['f1']:.2f} | {n[d]['accuracy']:.2f} | {d} only right {m['n_a_only']}, "
                         f"cascade only {m['n_b_only']}, p = {m['p_value']:.3g} |")
        lines += ["", "Decoding speed on eng.testa (tokens/s, 1 thread / 2): " + ", ".join(
            f"{d} {s.get(f'{d}-1', float('nan')):,.0f} / {s.get(f'{d}-2', float('nan')):,.0f}" for d in DECODES)
            + f" (load average {n.get('load', '?')})."]
    wpath = out / "weights.json"
    if wpath.exists():
        wt = json.loads(wpath.read_text())
        doc["weights"] = wt
        Path(a.results + ".json").write_text(json.dumps(doc, indent=2) + "\n")
        lines += ["", "## A weight on the upstream stage", "",
                  f"Over the same {wt['nbest_upstream']} best upstream labelings, each with the downstream stage's "
                  "best labeling given it: F1 when the upstream score is weighted, w*s1 + s2 (eq. 7 with a stage "
                  "weight) and w*log p1 + log p2 (normalized with one). `benchmarks/compose.py weights`; the "
                  "weights are tried on dev.txt / eng.testa themselves (allowed by the project's rules, but "
                  "the best of them is then chosen on the figures it reports; none was tuned on training "
                  "data). w = 1 is joint (over these K) and normalized decoding.", "",
                  "| pipeline | cascade | " + " | ".join(f"w = {w}" for w in STAGE_WEIGHTS) + " |",
                  "|---|---|" + "---|" * len(STAGE_WEIGHTS)]
        for name, label in (("chunk-pos0", "POS -> chunking-pos0"), ("chunk-crfpp", "POS -> chunking-crfpp"),
                            ("ner", "chunk -> NER")):
            if name not in wt:
                continue
            r = wt[name]
            for kind in ("eq7", "normalized"):
                what = "w*s1 + s2" if kind == "eq7" else "w*log p1 + log p2"
                lines.append(f"| {label}, {what} | {r['cascade']:.2f} | " + " | ".join(
                    f"{r['weights'][str(w)][kind]:.2f}" for w in STAGE_WEIGHTS) + " |")
    Path(a.results + ".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("task", choices=["conll2000", "ner", "respeed", "weights", "report"])
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
    {"conll2000": conll2000, "ner": ner, "respeed": respeed, "weights": weights, "report": report}[a.task](a)


if __name__ == "__main__":
    main()
