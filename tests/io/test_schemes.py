"""Chunk scheme conversions (crftk.io.schemes): any scheme to any scheme keeps conlleval's chunks,
the vectorized Recoder agrees with the per-sentence conversion, and a corpus's scheme is detected."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crftk.evaluation.conlleval import chunks
from crftk.io import schemes
from crftk.io.schemes import Recoder, chunks_of, convert, detect, not_chunk_tag

ALL = schemes.SCHEMES + ("bilou",)
TAG = st.sampled_from(["O"] + [f"{p}-{t}" for p in "BIES" for t in ("X", "Y")])
SENTENCE = st.lists(TAG, max_size=12)


@settings(max_examples=300, deadline=None)
@given(SENTENCE, st.sampled_from(ALL), st.sampled_from(ALL))
def test_any_scheme_to_any_scheme_keeps_the_chunks(tags, first, second):
    gold = chunks(tags)
    once = convert(tags, first)
    assert all(schemes.is_chunk_tag(t, first) for t in once)
    assert chunks_of(once, first) == gold
    twice = convert(once, second, source=first)
    assert chunks_of(twice, second) == gold
    if second != "bilou":                 # conlleval itself reads every scheme but bilou
        assert chunks(twice) == gold


@settings(max_examples=200, deadline=None)
@given(st.lists(SENTENCE, min_size=1, max_size=5), st.sampled_from(("iob2", "iobes", "bilou")),
       st.sampled_from(ALL))
def test_the_recoder_converts_label_ids_as_convert_converts_tags(sentences, source, target):
    encoded = [convert(s, source) for s in sentences]
    labels = sorted({t for s in encoded for t in s} | {"O", "B-X"})
    ids = np.array([labels.index(t) for s in encoded for t in s], dtype=np.int64)
    sent_ptr = np.cumsum([0] + [len(s) for s in encoded])
    got = Recoder(labels, source, target).tags(ids, sent_ptr).tolist()
    assert got == [t for s in encoded for t in convert(s, target, source=source)]


def test_conversion_examples():
    tags = ["I-PER", "I-PER", "B-PER", "O", "I-LOC", "I-ORG"]
    assert convert(tags, "iob2") == ["B-PER", "I-PER", "B-PER", "O", "B-LOC", "B-ORG"]
    assert convert(tags, "bilou") == ["B-PER", "L-PER", "U-PER", "O", "U-LOC", "U-ORG"]
    assert convert(tags, "ioe1") == ["I-PER", "E-PER", "I-PER", "O", "I-LOC", "I-ORG"]
    # ill-formed sequences are read as conlleval reads them: I-X after O starts a chunk
    assert convert(["O", "I-X", "E-X", "I-X"], "iobes") == ["O", "B-X", "E-X", "S-X"]


@pytest.mark.parametrize("scheme", schemes.SCHEMES)
def test_a_corpus_written_in_a_scheme_is_detected_as_it(scheme):
    corpus = [["I-A", "I-A", "I-A", "O", "I-B"], ["B-A", "I-A", "B-A", "O"], ["I-B", "I-B", "I-A"]]
    assert detect(convert(s, scheme) for s in corpus) == scheme


def test_ambiguous_corpora_are_given_the_documented_schemes():
    assert detect([["O", "O"]]) == "iob2"
    assert detect([["I-A", "O", "I-B", "I-B"]]) == "iob1"


def test_labels_that_are_not_chunk_tags_are_named():
    assert not_chunk_tag(["B-NP", "O", "I-VP"]) is None
    assert not_chunk_tag(["NN", "B-NP", "''", "-"]) == "''"
    assert not_chunk_tag(["L-X"]) == "L-X" and not_chunk_tag(["L-X"], "bilou") is None
