"""Word vectors from the training text alone, for `%vec` lines without outside data.

Lower-cased words of the given CoNLL files (first column; -DOCSTART- lines skipped), counts of
the words within WINDOW tokens of each other in a sentence, positive pointwise mutual
information, and a truncated SVD (scipy): each word of at least --min-count occurrences gets a
DIM-dimensional vector (U * sqrt(S), rows scaled to unit length), written in word2vec's text
format for `crftk train --vectors NAME=FILE --vectors-lookup lowercase`.

    python benchmarks/svd_vectors.py -o out/ner.vec ../shared/data/conll2003/eng.train
"""

import argparse
from collections import Counter

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.linalg import svds


def sentences(paths):
    for path in paths:
        words = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                fields = line.split()
                if not fields or fields[0] == "-DOCSTART-":
                    if words:
                        yield words
                        words = []
                    continue
                words.append(fields[0].lower())
        if words:
            yield words


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("-o", "--out", required=True)
    ap.add_argument("--dim", type=int, default=50)
    ap.add_argument("--window", type=int, default=2)
    ap.add_argument("--min-count", type=int, default=2)
    args = ap.parse_args()
    sents = list(sentences(args.files))
    counts = Counter(w for s in sents for w in s)
    vocab = sorted(w for w, c in counts.items() if c >= args.min_count)
    index = {w: i for i, w in enumerate(vocab)}
    rows, cols = [], []
    for s in sents:
        ids = [index.get(w, -1) for w in s]
        for i, a in enumerate(ids):
            if a < 0:
                continue
            for j in range(max(0, i - args.window), min(len(ids), i + args.window + 1)):
                if j != i and ids[j] >= 0:
                    rows.append(a)
                    cols.append(ids[j])
    n = len(vocab)
    cooc = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n, n)).tocsr()
    cooc.sum_duplicates()
    total = cooc.sum()
    row = np.asarray(cooc.sum(axis=1)).ravel()
    col = np.asarray(cooc.sum(axis=0)).ravel() ** 0.75          # context smoothing
    col = col / col.sum()
    coo = cooc.tocoo()
    pmi = np.log(coo.data * 1.0 / total) - np.log(row[coo.row] / total) - np.log(col[coo.col])
    keep = pmi > 0
    ppmi = coo_matrix((pmi[keep], (coo.row[keep], coo.col[keep])), shape=(n, n)).tocsr()
    u, s, _ = svds(ppmi, k=args.dim, random_state=0)
    vectors = u * np.sqrt(s)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    with open(args.out, "w", encoding="utf-8") as out:
        out.write(f"{n} {args.dim}\n")
        for w, v in zip(vocab, vectors):
            out.write(w + " " + " ".join(f"{x:.5f}" for x in v) + "\n")
    print(f"{n} words x {args.dim} from {sum(map(len, sents)):,} tokens -> {args.out}")


if __name__ == "__main__":
    main()
