"""A training corpus k times CoNLL-2000's train.txt whose vocabulary keeps growing (seeded).

    python benchmarks/scale_corpus.py --source train.txt --copies 20 --out train-x20.txt

Copy 0 is train.txt as it is. Every later copy c rewrites the word forms of a set of
rare word types (seen at most --rare times in train.txt, with a letter in them) into a
variant of its own (the word with a suffix unique to the copy, capitalization kept), so
each copy brings new types the way more real text does: the number of word types after
c + 1 copies is about V * (c + 1) ** HEAPS (Heaps' law; V: the types of train.txt),
until the rare types run out. A type is rewritten in every one of its occurrences in the
copy, so the variants keep the word's frequency and context; the POS and chunk columns
are left as they are. The output is written line by line as train.txt is read again for
each copy (never the corpus in memory) to a temporary file renamed at the end.
"""

import argparse
import os
import random
import string
import sys
from collections import Counter

SEED = 37
HEAPS = 0.6         # Heaps' exponent of word types against tokens in English text: 0.4-0.6
RARE = 10           # the most occurrences in train.txt of a type that may be rewritten


def word_counts(source):
    counts = Counter()
    with open(source, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                counts[line.split(" ", 1)[0]] += 1
    return counts


def copy_suffixes(copies, seed):
    """One distinct lowercase suffix per copy after the first."""
    rng = random.Random(seed)
    seen = set()
    out = [""]
    while len(out) < copies:
        s = "".join(rng.choice(string.ascii_lowercase) for _ in range(3))
        if s not in seen:
            seen.add(s)
            out.append(s)
    return out


def rewrite_plan(counts, copies, heaps=HEAPS, rare=RARE, seed=SEED):
    """For each copy, the set of word types it rewrites (copy 0: none)."""
    candidates = sorted(w for w, n in counts.items() if n <= rare and any(ch.isalpha() for ch in w))
    v0 = len(counts)
    plan = [frozenset()]
    for c in range(1, copies):
        new_types = v0 * ((c + 1) ** heaps - c ** heaps)
        share = min(1.0, new_types / max(1, len(candidates)))
        rng = random.Random(f"{seed}:{c}")
        plan.append(frozenset(w for w in candidates if rng.random() < share))
    return plan


def write_corpus(source, copies, out, *, heaps=HEAPS, rare=RARE, seed=SEED):
    """Write the corpus; returns (sentences, tokens, word types)."""
    counts = word_counts(source)
    plan = rewrite_plan(counts, copies, heaps, rare, seed)
    suffixes = copy_suffixes(copies, seed)
    sentences = tokens = 0
    tmp = out + ".part"
    with open(tmp, "w", encoding="utf-8") as dst:
        for c in range(copies):
            rewrite, suffix = plan[c], suffixes[c]
            open_sentence = False
            with open(source, encoding="utf-8") as src:
                for line in src:
                    if not line.strip():
                        if open_sentence:
                            dst.write("\n")
                            sentences += 1
                        open_sentence = False
                        continue
                    word, rest = line.split(" ", 1)
                    if word in rewrite:
                        word += suffix
                    dst.write(f"{word} {rest}" if rest.endswith("\n") else f"{word} {rest}\n")
                    tokens += 1
                    open_sentence = True
            if open_sentence:
                dst.write("\n")
                sentences += 1
    os.replace(tmp, out)
    return sentences, tokens, len(counts) + sum(len(p) for p in plan)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="CoNLL-2000 train.txt (word POS chunk per line)")
    ap.add_argument("--copies", type=int, required=True, help="k: the corpus is k copies of the source")
    ap.add_argument("--out", required=True, help="the corpus file to write")
    ap.add_argument("--heaps", type=float, default=HEAPS, help=f"Heaps' exponent of word types (default {HEAPS})")
    ap.add_argument("--rare", type=int, default=RARE,
                    help=f"rewrite only types seen at most this many times in the source (default {RARE})")
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args()
    if a.copies < 1:
        sys.exit("scale_corpus: --copies must be at least 1")
    n_sent, n_tok, n_types = write_corpus(a.source, a.copies, a.out, heaps=a.heaps, rare=a.rare, seed=a.seed)
    print(f"{a.out}: {a.copies} copies, {n_sent:,} sentences, {n_tok:,} tokens, {n_types:,} word types")


if __name__ == "__main__":
    main()
