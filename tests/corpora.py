"""Small corpora and a string-based reference of CRF++ template expansion, for the tests."""

import random

from crftk.conll import Sentence
from crftk.templates import padding_value


def sentences(rows_list):
    return [Sentence(rows=[list(r) for r in rows], doc=0, line=1) for rows in rows_list]


def random_corpus(n_sentences, seed=0, vocab=12, tags=("A", "B", "C"), max_len=7):
    """Random 3-column sentences: word, a tag-like column, and a label that depends on them."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_sentences):
        n = rng.randint(1, max_len)
        rows = []
        for _ in range(n):
            w = f"w{rng.randrange(vocab)}"
            p = rng.choice(tags)
            label = "B-X" if (int(w[1:]) % 3 == 0) else ("B-Y" if p == "A" else "O")
            rows.append([w, p, label])
        out.append(rows)
    return sentences(out)


def reference_strings(template, sent):
    """CRF++'s feature strings of each token of one sentence, built the obvious way."""
    rows = sent.rows
    n = len(rows)

    def value(i, macro):
        j = i + macro.row
        if j < 0:
            return padding_value(j)
        if j >= n:
            return padding_value(j - n + 1)
        return rows[j][macro.col]

    per_token = []
    for i in range(n):
        per_token.append([line.render([value(i, m) for m in line.macros]) for line in template.unigrams])
    return per_token
