"""Gold segmentations of label columns (crftk.io.segments), against hand-worked cases."""

import pytest

from corpora import sentences
from crftk.errors import CrftkError
from crftk.io.schemes import convert
from crftk.io.segments import OUTSIDE, SegmentConversion, gold_segments, position_tags, split_long

# one sentence's chunks: NP(0-2) O(2) VP(3) VP(4) NP(5-8) -- two adjacent VPs, a three-token NP
SEGMENTS = [(0, 2, "NP"), (2, 3, OUTSIDE), (3, 4, "VP"), (4, 5, "VP"), (5, 8, "NP")]
WRITTEN = {
    "iob1": ["I-NP", "I-NP", "O", "I-VP", "B-VP", "I-NP", "I-NP", "I-NP"],
    "iob2": ["B-NP", "I-NP", "O", "B-VP", "B-VP", "B-NP", "I-NP", "I-NP"],
    "ioe1": ["I-NP", "I-NP", "O", "E-VP", "I-VP", "I-NP", "I-NP", "I-NP"],
    "ioe2": ["I-NP", "E-NP", "O", "E-VP", "E-VP", "I-NP", "I-NP", "E-NP"],
    "iobes": ["B-NP", "E-NP", "O", "S-VP", "S-VP", "B-NP", "I-NP", "E-NP"],
}


@pytest.mark.parametrize("scheme", sorted(WRITTEN))
def test_gold_segments_in_every_scheme(scheme):
    assert gold_segments(WRITTEN[scheme]) == SEGMENTS


def test_outside_tokens_are_one_token_segments():
    assert gold_segments(["O", "O", "B-PER", "O"]) == [(0, 1, "O"), (1, 2, "O"), (2, 3, "PER"), (3, 4, "O")]
    assert gold_segments([]) == []


def test_position_tags():
    assert position_tags(SEGMENTS) == WRITTEN["iobes"]
    assert position_tags([(0, 2, OUTSIDE)]) == ["O", "O"]


def test_split_long():
    assert split_long(SEGMENTS, None) == (SEGMENTS, 0)
    assert split_long(SEGMENTS, 3) == (SEGMENTS, 0)
    pieces, n = split_long(SEGMENTS, 2)
    assert n == 1
    assert pieces == SEGMENTS[:4] + [(5, 7, "NP"), (7, 8, "NP")]
    pieces, n = split_long([(0, 7, "NP")], 3)
    assert (pieces, n) == ([(0, 3, "NP"), (3, 6, "NP"), (6, 7, "NP")], 1)


@pytest.mark.parametrize("scheme", sorted(WRITTEN))
def test_position_tags_convert_back_to_the_corpus_scheme(scheme):
    """The IOBES tags of the segmentation, read back through crftk.io.schemes, give the column."""
    tags = position_tags(gold_segments(WRITTEN[scheme]))
    assert convert(tags, scheme) == WRITTEN[scheme]


def test_conversion_rewrites_the_label_column_and_learns_lengths():
    conv = SegmentConversion(-1, cap=2)
    rows = [[str(i), tag] for i, tag in enumerate(WRITTEN["iob1"])]
    (out,) = conv.sentences(sentences([rows]))
    assert [r[1] for r in out.rows] == ["B-NP", "E-NP", "O", "S-VP", "S-VP", "B-NP", "E-NP", "S-NP"]
    assert [r[0] for r in out.rows] == [str(i) for i in range(8)]
    assert conv.detector.scheme == "iob1"
    assert conv.n_split == 1
    assert conv.longest == {"NP": 2, OUTSIDE: 1, "VP": 1}
    list(conv.sentences(sentences([rows]), detect=False))      # development data: not counted
    assert conv.n_split == 1


def test_conversion_refuses_other_labels_and_partial_ones_at_their_line():
    bad = sentences([[["a", "B-NP"], ["b", "NN"]]])
    bad[0].source, bad[0].line = "train.txt", 10
    with pytest.raises(CrftkError) as e:
        list(SegmentConversion(-1).sentences(bad))
    assert (e.value.path, e.value.line) == ("train.txt", 11)
    assert "'NN' is not one" in e.value.message
    unknown = sentences([[["a", "?"]]])
    with pytest.raises(CrftkError, match="partial"):
        list(SegmentConversion(-1, marker="?").sentences(unknown))
