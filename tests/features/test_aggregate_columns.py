"""Aggregate macros as the extractor computes them: several macros reading one column each see
that column's labels once per token (they were read once per macro, shifting every sentence after
the first), so the values match brute force and do not depend on what else is in the batch."""

from hypothesis import given, settings

from crftk.features.aggregates import KINDS
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.io.conll import Sentence
from features.test_aggregates import _brute, corpora

KEYS = [(scope, kind) for scope in ("doc", "corpus") for kind in KINDS]
TEMPLATE = parse_template("".join(f"U{i}:%{scope}[0,1,{kind}]\n" for i, (scope, kind) in enumerate(KEYS))
                          + "U9:%ctx[0,1,1]\nU10:%x[0,0]\n")


def _sentences(words, labels, lengths, docs):
    out, start = [], 0
    for n, doc in zip(lengths, docs):
        out.append(Sentence([[w, lab, "O"] for w, lab in zip(words[start:start + n], labels[start:start + n])],
                            doc=doc))
        start += n
    return out


@settings(max_examples=150, deadline=None)
@given(corpora())
def test_every_macro_on_one_column_matches_brute_force(corpus):
    words, labels, lengths, docs = corpus
    sents = _sentences(words, labels, lengths, docs)
    space, _ = FeatureSpace.fit(sents, TEMPLATE)
    ex = space.extractor
    values = ex.values(sents)
    for scope, kind in KEYS:
        vocab = ex.vocabs[scope, 1, (kind,)]
        got = [None if i < 0 else vocab.strings[i] for i in values.single[scope, 1, (kind,)].tolist()]
        assert got == _brute(words, labels, lengths, docs, scope, kind), (scope, kind)
    # a document's %doc values are its own, whatever the batch holds besides it
    doc_keys = [k for k in KEYS if k[0] == "doc"]
    start = 0
    for doc in sorted(set(docs)):
        part = [s for s in sents if s.doc == doc]
        alone = ex.values(part)
        n = sum(len(s) for s in part)
        for scope, kind in doc_keys:
            key = (scope, 1, (kind,))
            assert alone.single[key].tolist() == values.single[key][start:start + n].tolist()
        start += n
