"""Non-local features from a first stage's labels (Krishnan & Manning 2006; Ratinov & Roth 2009).

A two-stage model (crftk.kinds.twostage) tags its input with a first CRF, puts the labels in a
column, and lets the second CRF's template read what the first one said elsewhere in the
document or the corpus through the macros ``%doc[r,c,KIND]`` and ``%corpus[r,c,KIND]`` (``c``:
the column of the first stage's labels; words are read from column 0). The *entities* are the
chunks of those labels (conlleval's rules); a value is an entity type, the one given most often
(ties: the first in alphabetical order), or none.

====================  ======================================================================
``token``             the majority type of the entities that contain this word, over all its
                      occurrences in the document (corpus); none if it is never in one
``entity``            inside an entity: the majority type given to the same entity string
``super``             inside an entity: the majority type of the longer entities whose word
                      string contains this one's as a contiguous run of tokens
``hist``              the majority type of the entities containing this word at its earlier
                      occurrences (Ratinov & Roth's prediction history, of the first stage)
====================  ======================================================================

``%ctx[r,c,W]`` (Ratinov & Roth's context aggregation; no first stage): for a capitalized word, the
values of column c at offsets -W..-1 and 1..W (``-1:the``; within their sentences) around its other
occurrences in the document, one attribute each.
"""

from collections import Counter, defaultdict
from itertools import accumulate

from crftk.evaluation.conlleval import chunks
# the macros (what each aggregates over) and the aggregations they name, declared with their syntax
from crftk.features.templates import AGGREGATE_KINDS as KINDS
from crftk.features.templates import AGGREGATES as SCOPES


def majority(counts):
    """The most frequent type of a Counter (ties: the first in alphabetical order), or None."""
    if not counts:
        return None
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def aggregate(words, labels, lengths, docs, keys):
    """{key: one value (str or None) per token} for each key ``(scope, kind)``.

    ``words``/``labels``: the word and the first stage's label of every token in order;
    ``lengths``/``docs``: tokens and document number of each sentence.
    """
    keys = list(dict.fromkeys(keys))
    out = {}
    if not keys:
        return out
    sentences = _sentences(words, labels, lengths, docs)
    for scope in SCOPES:
        kinds = [k for s, k in keys if s == scope]
        if kinds:
            values = _aggregate(sentences, len(words), scope, kinds)
            out.update({(scope, k): values[k] for k in kinds})
    return out


def _sentences(words, labels, lengths, docs):
    """(doc, first token, words, entities [(type, start, end)]) of each sentence."""
    out, start = [], 0
    for n, doc in zip(lengths, docs):
        n = int(n)
        ws = words[start:start + n]
        out.append((int(doc), start, ws, chunks(labels[start:start + n])))
        start += n
    return out


def _aggregate(sentences, n_tokens, scope, kinds):
    group_of = (lambda doc: doc) if scope == "doc" else (lambda doc: 0)
    by_word = defaultdict(Counter)        # (group, word) -> types of its occurrences in entities
    by_entity = defaultdict(Counter)      # (group, entity words) -> types given to it
    by_part = defaultdict(Counter)        # (group, proper run of an entity's words) -> its types
    hist = [None] * n_tokens if "hist" in kinds else None
    for doc, first, ws, ents in sentences:
        g = group_of(doc)
        inside = [None] * len(ws)
        for kind, a, b in ents:
            for t in range(a, b):
                inside[t] = kind
            run = tuple(ws[a:b])
            by_entity[g, run][kind] += 1
            parts = {run[i:j] for i in range(len(run)) for j in range(i + 1, len(run) + 1)} - {run}
            for p in parts:
                by_part[g, p][kind] += 1
        for t, w in enumerate(ws):
            if hist is not None:          # before this token's own label is counted
                hist[first + t] = majority(by_word.get((g, w)))
            if inside[t] is not None:
                by_word[g, w][inside[t]] += 1
    out = {k: [None] * n_tokens for k in kinds if k != "hist"}
    if hist is not None:
        out["hist"] = hist
    token, entity, sup = out.get("token"), out.get("entity"), out.get("super")
    for doc, first, ws, ents in sentences:
        g = group_of(doc)
        if token is not None:
            for t, w in enumerate(ws):
                token[first + t] = majority(by_word.get((g, w)))
        for kind, a, b in ents:
            run = tuple(ws[a:b])
            if entity is not None:
                value = majority(by_entity[g, run])
                for t in range(a, b):
                    entity[first + t] = value
            if sup is not None:
                value = majority(by_part.get((g, run)))
                for t in range(a, b):
                    sup[first + t] = value
    return out


def contexts(words, values, lengths, docs, width):
    """Per token, the sorted distinct ``offset:value`` strings of column values (``values``) around
    the other occurrences of its word in its document, for capitalized words; [] for the others."""
    starts = [0, *accumulate(int(n) for n in lengths)]
    around = defaultdict(list)       # (doc, word) -> (token, its context strings) of each occurrence
    for k, doc in enumerate(docs):
        a, b = starts[k], starts[k + 1]
        for t in range(a, b):
            w = words[t]
            if w[:1].isupper():
                ctx = {f"{d:+d}:{values[t + d]}" for d in range(-width, width + 1) if d and a <= t + d < b}
                around[int(doc), w].append((t, ctx))
    out = [[] for _ in words]
    for occurrences in around.values():
        if len(occurrences) < 2:
            continue
        for t, _ in occurrences:
            out[t] = sorted(set().union(*(ctx for u, ctx in occurrences if u != t)))
    return out
