"""Constrained decoding on CoNLL-2000 dev.txt: a share of the gold labels (random tokens, fixed seed)
forced with `crftk tag --force-col`, the rest decoded under them, against plain tagging.

    python benchmarks/forced_decoding.py --model M [--data-dir DIR] [--seed 0] [--fractions 0.1,0.3]

The model is trained once if --model does not exist (`crftk train -t templates/chunking-crfpp.tmpl`).
For each fraction the script writes dev.txt with its label column replaced (the gold label on the
forced tokens, `?` elsewhere), tags it with `--force-col -1` and scores: chunk F1 on all tokens (conlleval's), and on
the free tokens only: token accuracy and the F1 of the chunks (gold or predicted) that lie wholly on
free tokens, so that the forced labels themselves count for nothing. Unforced tagging is scored on
the same tokens. The table goes to stdout and --out.
"""

import argparse
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import REPO, corpus_files, crftk, note, publish  # noqa: E402
from crftk.evaluation.conlleval import chunks, evaluate  # noqa: E402


def read_sentences(path):
    """Sentences as lists of column lists."""
    out, rows = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            cols = line.split()
            if cols:
                rows.append(cols)
            elif rows:
                out.append(rows)
                rows = []
    if rows:
        out.append(rows)
    return out


def write_sentences(path, sents):
    with open(path, "w", encoding="utf-8") as fh:
        for s in sents:
            fh.write("".join(" ".join(r) + "\n" for r in s) + "\n")


def forced_mask(sents, fraction, seed):
    """Per sentence, per token: whether it is forced (a random ``fraction`` of all tokens)."""
    n = sum(len(s) for s in sents)
    chosen = set(random.Random(seed).sample(range(n), round(fraction * n)))
    out, k = [], 0
    for s in sents:
        out.append([k + t in chosen for t in range(len(s))])
        k += len(s)
    return out


def free_scores(gold, pred, forced):
    """(token accuracy, chunk F1) over the free tokens: chunks counted only if wholly free."""
    right = total = tp = n_gold = n_pred = 0
    for g, p, f in zip(gold, pred, forced):
        for gt, pt, ft in zip(g, p, f):
            if not ft:
                total += 1
                right += gt == pt
        free = [c for c in chunks(g) if not any(f[c[1]:c[2]])]
        guess = [c for c in chunks(p) if not any(f[c[1]:c[2]])]
        n_gold, n_pred = n_gold + len(free), n_pred + len(guess)
        tp += len(set(free) & set(guess))
    prec, rec = tp / max(n_pred, 1), tp / max(n_gold, 1)
    return 100 * right / total, 100 * (2 * prec * rec / (prec + rec) if prec + rec else 0.0)


def tag(model, path, out, threads, *extra):
    t0 = time.perf_counter()
    crftk("tag", "-m", model, "-p", str(threads), "-o", out, *extra, path)
    return time.perf_counter() - t0, [[r[-1] for r in s] for s in read_sentences(out)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", help="folder of train.txt and dev.txt (default $CONLL2000 or ../shared/data)")
    ap.add_argument("--model", required=True, help="the chunking model (trained here if it does not exist)")
    ap.add_argument("--template", default=os.path.join(REPO, "templates", "chunking-crfpp.tmpl"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fractions", default="0.1,0.3")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(REPO, "benchmarks", "results", "forced-decoding.md"))
    args = ap.parse_args(argv)
    train, dev = corpus_files("CONLL2000", ["train.txt", "dev.txt"], args.data_dir, "forced_decoding")
    if not os.path.exists(args.model):
        note("forced", f"training {args.model}")
        crftk("train", "-t", args.template, "--threads", str(args.threads), "-m", args.model, train,
              log=args.model + ".log")
    sents = read_sentences(dev)
    gold = [[r[-1] for r in s] for s in sents]
    with tempfile.TemporaryDirectory() as tmp:
        plain_s, plain = tag(args.model, dev, os.path.join(tmp, "plain"), args.threads)
        rows = [("0% (plain tag)", evaluate(gold, plain).overall.f1, None, None, None, None, plain_s)]
        for fraction in (float(x) for x in args.fractions.split(",")):
            forced = forced_mask(sents, fraction, args.seed)
            path = os.path.join(tmp, "forced.txt")
            write_sentences(path, [[r[:-1] + [r[-1] if f else "?"] for r, f in zip(s, fs)]
                                   for s, fs in zip(sents, forced)])
            seconds, pred = tag(args.model, path, os.path.join(tmp, "tagged"), args.threads, "--force-col", "-1")
            kept = all(p == g for ps, gs, fs in zip(pred, gold, forced) for p, g, f in zip(ps, gs, fs) if f)
            assert kept, "a forced token lost its label"
            rows.append((f"{100 * fraction:g}%", evaluate(gold, pred).overall.f1, *free_scores(gold, pred, forced),
                         *free_scores(gold, plain, forced), seconds))
            note("forced", f"{fraction}: {rows[-1]}")

    def cell(x, fmt="{:.2f}"):
        return "-" if x is None else fmt.format(x)

    lines = [
        "# Constrained decoding (`crftk tag --force-col`)",
        "",
        f"CoNLL-2000 chunking, `crftk train -t templates/chunking-crfpp.tmpl` (c2 1, to convergence) on train.txt, "
        f"tagged on dev.txt ({sum(map(len, gold)):,} tokens) with a random share of the gold labels forced "
        f"(seed {args.seed}; `?` elsewhere). F1: conlleval's chunk F1 on all tokens. Free tokens: accuracy on the "
        "tokens not forced, and the chunk F1 of the chunks (gold or predicted) that lie wholly on them, for the "
        "forced tagging and for plain tagging of the same tokens. Seconds: the whole `crftk tag` command "
        f"({args.threads} threads; plain tagging runs on the compiled byte path, forced tagging through the "
        "Tagger). Made by `make forced-decoding` (`benchmarks/forced_decoding.py`).",
        "",
        "| forced | F1 (all tokens) | free-token accuracy | free-chunk F1 | plain: free-token accuracy | "
        "plain: free-chunk F1 | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, f1, acc, cf1, pacc, pcf1, seconds in rows:
        lines.append(f"| {name} | {f1:.2f} | {cell(acc)} | {cell(cf1)} | {cell(pacc)} | {cell(pcf1)} | "
                     f"{seconds:.1f} |")
    publish("\n".join(lines), args.out)


if __name__ == "__main__":
    main()
