"""Aggregates of a first stage's labels (%doc, %corpus) against brute force on small documents."""

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from crftk.evaluation.conlleval import chunks
from crftk.features.aggregates import KINDS, aggregate, majority
from crftk.features.templates import parse_template
from crftk.io.conll import Sentence

WORDS = ["A", "B", "C", "the"]
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG"]


def _brute(words, labels, lengths, docs, scope, kind):
    """Each token's value, straight from the definitions: every other token and entity compared."""
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    tokens = []             # (group, word, type of the entity it is in or None), in reading order
    entities = []           # (group, words tuple, type, first token, end token)
    for k, (n, doc) in enumerate(zip(lengths, docs)):
        group = doc if scope == "doc" else 0
        a0 = starts[k]
        inside = [None] * n
        for typ, a, b in chunks(labels[a0:a0 + n]):
            entities.append((group, tuple(words[a0 + a:a0 + b]), typ, a0 + a, a0 + b))
            for t in range(a, b):
                inside[t] = typ
        tokens += [(group, words[a0 + t], inside[t]) for t in range(n)]
    out = [None] * len(words)
    for i, (g, w, _) in enumerate(tokens):
        if kind in ("token", "hist"):
            pool = tokens if kind == "token" else tokens[:i]
            out[i] = majority(Counter(t for gg, ww, t in pool if gg == g and ww == w and t is not None))
    for g, run, typ, a, b in entities:
        if kind == "entity":
            value = majority(Counter(t for gg, r, t, _, _ in entities if gg == g and r == run))
        elif kind == "super":
            value = majority(Counter(t for gg, r, t, _, _ in entities if gg == g and len(r) > len(run)
                                     and any(r[i:i + len(run)] == run for i in range(len(r) - len(run) + 1))))
        else:
            continue
        for t in range(a, b):
            out[t] = value
    return out


@st.composite
def corpora(draw):
    n_sent = draw(st.integers(1, 8))
    lengths = [draw(st.integers(1, 6)) for _ in range(n_sent)]
    docs = sorted(draw(st.lists(st.integers(0, 2), min_size=n_sent, max_size=n_sent)))
    n = sum(lengths)
    words = draw(st.lists(st.sampled_from(WORDS), min_size=n, max_size=n))
    labels = draw(st.lists(st.sampled_from(LABELS), min_size=n, max_size=n))
    return words, labels, lengths, docs


@settings(max_examples=300, deadline=None)
@given(corpora())
def test_every_aggregate_matches_brute_force(corpus):
    words, labels, lengths, docs = corpus
    keys = [(s, k) for s in ("doc", "corpus") for k in KINDS]
    got = aggregate(words, labels, lengths, docs, keys)
    for scope, kind in keys:
        assert got[scope, kind] == _brute(words, labels, lengths, docs, scope, kind), (scope, kind)


def test_worked_example():
    # doc 0: "Bank of Australia" ORG twice, "Australia" LOC once; doc 1: "Australia" PER
    words = ["Bank", "of", "Australia", "Bank", "of", "Australia", "Australia", "Australia"]
    labels = ["B-ORG", "I-ORG", "I-ORG", "B-ORG", "I-ORG", "I-ORG", "B-LOC", "B-PER"]
    got = aggregate(words, labels, [3, 3, 1, 1], [0, 0, 0, 1],
                    [("doc", "token"), ("doc", "super"), ("corpus", "token"), ("doc", "hist"), ("doc", "entity")])
    assert got["doc", "token"][6] == "ORG"          # Australia: ORG twice, LOC once in doc 0
    assert got["doc", "token"][7] == "PER"          # doc 1 sees only itself
    assert got["corpus", "token"][7] == "ORG"       # ORG 2, LOC 1, PER 1 over the corpus
    assert got["doc", "super"][6] == "ORG"          # Australia inside Bank of Australia
    assert got["doc", "super"][0] is None           # nothing contains Bank of Australia
    assert got["doc", "hist"][2] is None and got["doc", "hist"][5] == "ORG"
    assert got["doc", "entity"][6] == "LOC"
    # ties go to the first type in alphabetical order
    assert majority(Counter({"PER": 1, "LOC": 1})) == "LOC"


def test_macros_in_a_trained_model_read_the_document():
    """A CRF whose only feature is %doc[0,1,token] learns the document's majority for a word whose
    own first-stage label says nothing (O)."""
    from crftk.features.space import FeatureSpace
    template = parse_template("U0:%doc[0,1,token]\n")
    sents = [Sentence([["Smith", "B-PER", "B-PER"], ["x", "O", "O"]], doc=0),
             Sentence([["Smith", "O", "B-PER"]], doc=0),
             Sentence([["Paris", "B-LOC", "B-LOC"]], doc=1),
             Sentence([["Paris", "O", "B-LOC"]], doc=1)]
    space, corpus = FeatureSpace.fit(sents, template)
    strings = space.attribute_strings()
    assert "U0:PER" in strings and "U0:LOC" in strings
    # the same values at tagging time (Extractor.values), for a sentence read alone in its document
    enc = space.encode([Sentence([["Smith", "O"]], doc=0)])
    assert enc.attr_ptr[-1] == 0                 # alone, Smith was never in an entity: no attribute
    enc = space.encode([Sentence([["Smith", "B-PER"]], doc=0), Sentence([["Smith", "O"]], doc=0)])
    assert enc.attr_ptr[-1] == 2                 # both occurrences now read PER


@settings(max_examples=200, deadline=None)
@given(corpora(), st.integers(1, 2))
def test_context_aggregation_matches_brute_force(corpus, width):
    from crftk.features.aggregates import contexts
    words, labels, lengths, docs = corpus
    got = contexts(words, labels, lengths, docs, width)
    starts = np.concatenate([[0], np.cumsum(lengths)]).tolist()
    sent_of = np.repeat(np.arange(len(lengths)), lengths).tolist()
    for t, w in enumerate(words):
        want = set()
        if w[0].isupper():
            for u, v in enumerate(words):
                if u != t and v == w and docs[sent_of[u]] == docs[sent_of[t]]:
                    a, b = starts[sent_of[u]], starts[sent_of[u] + 1]
                    want |= {f"{d:+d}:{labels[u + d]}" for d in range(-width, width + 1) if d and a <= u + d < b}
        assert got[t] == sorted(want)


def test_a_context_template_trains_and_encodes_the_same_at_tagging_time():
    from crftk.features.space import FeatureSpace
    template = parse_template("U0:%ctx[0,0,1]\nU1:%x[0,0]\n")
    sents = [Sentence([["Bank", "B-ORG"], ["of", "O"], ["Paris", "B-LOC"]], doc=0),
             Sentence([["said", "O"], ["Bank", "B-ORG"], ["today", "O"]], doc=0)]
    space, corpus = FeatureSpace.fit(sents, template)
    assert {"U0:+1:today", "U0:-1:said", "U0:+1:of"} <= set(space.attribute_strings())
    again = space.encode(sents)
    assert (again.attrs == corpus.attrs).all() and (again.attr_ptr == corpus.attr_ptr).all()


def test_aggregates_beside_first_mentions_encode_unseen_words():
    """Tagging reads both from whole documents; an unseen word once broke the first-mention ids."""
    from crftk.features.space import FeatureSpace
    template = parse_template("U0:%doc[0,1,token]\nU1:%^X[-1,0]\nU2:%x[0,0]\n")
    sents = [Sentence([["Smith", "B-PER", "B-PER"], ["said", "O", "O"]], doc=0),
             Sentence([["the", "O", "O"], ["Smith", "O", "B-PER"]], doc=0)]
    space, corpus = FeatureSpace.fit(sents, template)
    enc = space.encode([Sentence([["Zed", "B-PER"], ["Zed", "O"], ["Smith", "B-PER"]], doc=0)])
    assert enc.n_tokens == 3
