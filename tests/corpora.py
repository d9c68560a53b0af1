"""Small corpora and a string-based reference of CRF++ template expansion, for the tests."""

import os
import random
import subprocess
import sys
from pathlib import Path

from crftk.io.conll import Sentence
from crftk.features.templates import padding_value

#: the repository's root (templates/, data/)
REPO = Path(__file__).resolve().parents[1]
# the shared corpora sit beside the repository (../shared/data), or where CONLL2000/CONLL2003 say
CONLL2000 = Path(os.environ.get("CONLL2000", REPO.parent / "shared" / "data" / "conll2000"))
CONLL2003 = Path(os.environ.get("CONLL2003", REPO.parent / "shared" / "data" / "conll2003"))


def sentences(rows_list):
    return [Sentence(rows=[list(r) for r in rows], doc=0, line=1) for rows in rows_list]


def factorial_sentences(n_chains, n_sentences=5, seed=0, max_len=4):
    """Sentences of a word column and n_chains label columns that depend on the word (the tiny
    corpora of the factorial CRF's tests)."""
    rng = random.Random(seed)
    label_sets = [("A", "B"), ("x", "y", "z"), ("P", "Q")][:n_chains]
    rows_list = []
    for _ in range(n_sentences):
        rows = []
        for _ in range(rng.randint(1, max_len)):
            w = rng.randrange(4)
            labs = [labels[(w + rng.randrange(2)) % len(labels)] for labels in label_sets]
            rows.append([f"w{w}"] + labs)
        rows_list.append(rows)
    return sentences(rows_list)


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


WORDS = ["Bush", "said", "U.S.", "McDonald", "1996", "12", "Rolls-Royce", "the", "IBM", "eBay",
         "well-known", "3:1", "B52", ".", "Zürich", "a", "Inc", "New", "York", "1,000.5"]


def random_docs(n_docs, seed=0, words=WORDS, sents_per_doc=3, max_len=6):
    """Sentences grouped in documents; column 0 words with varied shapes, 1 a tag, 2 a label."""
    rng = random.Random(seed)
    out = []
    for d in range(n_docs):
        for _ in range(sents_per_doc):
            rows = []
            for _ in range(rng.randint(1, max_len)):
                w = rng.choice(words)
                rows.append([w, rng.choice("ABC"), "B-X" if w[0].isupper() else "O"])
            out.append(Sentence(rows=rows, doc=d, line=1))
    return out


def reference_attributes(template, sents, lexicons=None, folds=None):
    """Every token's attribute strings (a sorted list, repeats kept), straight from the definitions."""
    import itertools
    from crftk.features.extract import string_test

    tokens = [(si, ti) for si, s in enumerate(sents) for ti in range(len(s.rows))]
    anchor = {}
    first = {}
    for si, ti in tokens:
        s = sents[si]
        w = s.rows[ti][0]
        k = (s.doc, w)
        if k in first and w[:1].isupper():
            anchor[(si, ti)] = first[k]
        first.setdefault(k, (si, ti))
    lex_tags = {}
    for name, lex in (lexicons or {}).items():
        for si, s in enumerate(sents):
            fold = None if folds is None else folds(s.doc, lex)
            lex_tags[(name, si)] = lex.match([r[0] for r in s.rows], fold)

    def values(si, ti, m):
        if m.anchored:
            if (si, ti) not in anchor:
                return []
            si, ti = anchor[(si, ti)]
        rows = sents[si].rows
        j = ti + m.row
        if j < 0:
            return [padding_value(j)]
        if j >= len(rows):
            return [padding_value(j - len(rows) + 1)]
        if m.kind == "x":
            return [rows[j][m.col]]
        if m.kind == "lex":
            v = lex_tags[(m.args[0], si)][j]
            return [] if v is None else [v]
        v = string_test(m.kind, m.args)(rows[j][m.col])
        return [] if v is None else (v if isinstance(v, list) else [v])

    out = []
    for si, ti in tokens:
        attrs = []
        for line in template.unigrams:
            for combo in itertools.product(*[values(si, ti, m) for m in line.macros]):
                attrs.append(line.render(list(combo)))
        out.append(sorted(attrs))
    return out


# ---- the command line in a process of its own (tests of exit codes, stderr, files left) ----

#: This checkout's crftk first on the path of a child process.
CLI_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}


def cli(*args, cwd=None, **kw):
    """``python -m crftk.cli ARGS`` in a process of its own: the CompletedProcess (text)."""
    return subprocess.run([sys.executable, "-m", "crftk.cli", *[str(a) for a in args]], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=CLI_ENV, **kw)


def error_line(proc, status=1):
    """The one line a command printed as it failed with ``status``."""
    assert proc.returncode == status, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crftk: error: "), proc.stderr
    return lines[0]


def write_conll(path, sents):
    """Sentences as a CoNLL file (space-separated columns, a blank line after each)."""
    path.write_text("".join("".join(" ".join(r) + "\n" for r in s.rows) + "\n" for s in sents))
    return path


def with_random_values(corpus, seed=0, low=-2.0, high=2.0, chains_only=False):
    """The encoded corpus with a random real value on every state attribute occurrence (about a
    tenth exactly 0, a tenth exactly 1; the rest uniform in [low, high)): an EncodedCorpus, or a
    factorial one (each chain's and, unless chains_only, each pair space's encoding)."""
    import dataclasses

    import numpy as np

    if hasattr(corpus, "chains"):
        from crftk.structures.factorial import FactorialCorpus
        chains = [with_random_values(c, seed + i, low, high) for i, c in enumerate(corpus.chains)]
        pairs = corpus.pairs if chains_only else [with_random_values(p, seed + 100 + i, low, high)
                                                  for i, p in enumerate(corpus.pairs)]
        return FactorialCorpus(chains, pairs, corpus.labels)
    rng = np.random.default_rng(seed)
    n = corpus.attrs.size
    values = rng.uniform(low, high, n)
    kind = rng.random(n)
    values[kind < 0.1] = 0.0
    values[(kind >= 0.1) & (kind < 0.2)] = 1.0
    return dataclasses.replace(corpus, values=values)
