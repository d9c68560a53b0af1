"""Segment features of a semi-Markov CRF (S lines, crftk.features.segments) on hand-worked spans."""

import os
import subprocess
import sys

import numpy as np
import pytest

from corpora import REPO, sentences
from crftk.errors import CrftkError
from crftk.features.segments import SegmentSpace
from crftk.features.templates import parse_template

# He/S-NP reckons/S-VP [the current deficit]/NP ./O, in IOBES position tags
ROWS = [["He", "PRP", "S-NP"], ["reckons", "VBZ", "S-VP"], ["the", "DT", "B-NP"], ["current", "JJ", "I-NP"],
        ["deficit", "NN", "E-NP"], [".", ".", "O"]]
LONGEST = {"NP": 3, "VP": 1}


def fit(template_text, rows_list=(ROWS,), min_freq=1, path="<template>", feature_set="supported"):
    return SegmentSpace.fit(sentences(rows_list), parse_template(template_text, path), labels=["NP", "VP"],
                            max_len=LONGEST, min_freq=min_freq, feature_set=feature_set)


def span(space, corpus, t, length):
    """The attribute strings of the span of ``length`` tokens at token t."""
    names = space.attribute_strings()
    row = t * corpus.longest + length - 1
    return sorted(names[a] for a in corpus.seg_attrs[corpus.seg_ptr[row]:corpus.seg_ptr[row + 1]])


@pytest.mark.parametrize("line, t, length, expected", [
    ("S:%seg[0]", 2, 3, ["S:the current deficit"]),
    ("S:%Seg[0]", 0, 1, ["S:he"]),
    ("S:%seg[1]", 2, 3, ["S:DT JJ NN"]),
    ("S:%first[0]/%last[1]", 2, 3, ["S:the/NN"]),
    ("S:%inside[0]", 2, 3, ["S:current"]),
    ("S:%before[1,0]", 2, 3, ["S:reckons"]),
    ("S:%before[2,1]", 0, 1, ["S:_B-2"]),            # CRF++'s padding before the sentence
    ("S:%after[1,1]", 2, 3, ["S:."]),
    ("S:%after[2,0]", 5, 1, ["S:_B+2"]),              # and after it
    ("S:%len", 2, 3, ["S:3"]),
    ("S:%segshape[0]", 0, 1, ["S:Xx"]),
    ("S:%segshape[0]", 2, 3, ["S:x x x"]),
    ("S:%len-%first[1]", 1, 1, ["S:1-VBZ"]),
])
def test_each_macro_on_a_gold_segment(line, t, length, expected):
    space, corpus = fit(line + "\n")
    assert span(space, corpus, t, length) == expected


def test_inside_is_empty_for_two_tokens_and_counts_a_value_once():
    rows = [["a", "B-NP"], ["x", "I-NP"], ["x", "I-NP"], ["b", "E-NP"], ["c", "B-NP"], ["d", "E-NP"]]
    space, corpus = SegmentSpace.fit(sentences([rows]), parse_template("S:%inside[0]/%len\n"), labels=["NP"],
                                     max_len={"NP": 4})
    assert span(space, corpus, 0, 4) == ["S:x/4"]
    assert span(space, corpus, 4, 2) == []
    assert span(space, corpus, 0, 3) == []        # x/3 was never seen in a gold segment


def test_seglex_matches_the_whole_segment(tmp_path):
    (tmp_path / "np.lex").write_text("the current deficit\nHe\ncurrent\n")
    path = tmp_path / "t.tmpl"
    text = "@lexicon NP np.lex\nS:%seglex[NP]\n"
    space, corpus = fit(text, path=str(path))
    assert span(space, corpus, 2, 3) == ["S:1"]
    assert span(space, corpus, 0, 1) == ["S:1"]
    assert span(space, corpus, 3, 1) == ["S:1"]      # a span the lexicon holds, though not gold
    assert span(space, corpus, 2, 2) == []           # "the current": a prefix only
    assert span(space, corpus, 1, 1) == []


def test_encode_layout():
    space, corpus = fit("S:%len\nS:%first[0]\n")
    n = len(ROWS)
    assert space.labels == ["NP", "O", "VP"] and space.max_len.tolist() == [3, 1, 1]
    assert space.longest == corpus.longest == 3
    assert corpus.seg_ptr.dtype == np.int64 and corpus.seg_attrs.dtype == np.int32
    assert corpus.seg_ptr.size == n * 3 + 1 and corpus.n_tokens == n
    # the supported set: each attribute with the labels of the gold segments it was seen on
    names = space.attribute_strings()
    pairs = {(names[a], space.labels[space.feat_label[f]]) for a in range(space.n_attrs)
             for f in range(space.feat_ptr[a], space.feat_ptr[a + 1])}
    assert pairs == {("S:1", "NP"), ("S:1", "VP"), ("S:1", "O"), ("S:3", "NP"), ("S:He", "NP"),
                     ("S:reckons", "VP"), ("S:the", "NP"), ("S:.", "O")}
    assert space.n_params == len(pairs) and space.feature_set == "supported"
    complete, _ = fit("S:%len\nS:%first[0]\n", feature_set="complete")
    assert complete.n_params == complete.n_attrs * 3
    np.testing.assert_array_equal(complete.feat_label, np.tile(np.arange(3), complete.n_attrs))
    assert span(space, corpus, 3, 1) == ["S:1"]                    # not gold, but %len 1 is known
    assert span(space, corpus, 1, 3) == ["S:3", "S:reckons"]       # row 1 * 3 + 2
    assert span(space, corpus, 0, 2) == ["S:He"]                   # %len 2 never seen
    for t, length in ((4, 3), (5, 2), (5, 3)):                    # past the sentence's end
        row = t * 3 + length - 1
        assert corpus.seg_ptr[row] == corpus.seg_ptr[row + 1]
    # a second sentence's spans start at its first token; none crosses the boundary
    two = space.encode(sentences([ROWS, ROWS[:2]]))
    assert two.seg_ptr.size == (n + 2) * 3 + 1
    assert span(space, two, n, 1) == ["S:1", "S:He"]
    assert span(space, two, n, 3) == []
    assert span(space, two, n - 1, 2) == []
    np.testing.assert_array_equal(two.seg_ptr[:n * 3 + 1], corpus.seg_ptr)


def test_min_freq_prunes_rare_attributes():
    other = [["She", "PRP", "S-NP"], ["reckons", "VBZ", "S-VP"], [".", ".", "O"]]
    once, _ = fit("S:%first[0]\n", (ROWS, other))
    twice, _ = fit("S:%first[0]\n", (ROWS, other), min_freq=2)
    assert set(once.attribute_strings()) == {"S:He", "S:She", "S:reckons", "S:the", "S:."}
    assert set(twice.attribute_strings()) == {"S:reckons", "S:."}


TEMPLATE = "U:%x[0,0]\nB\nS1:%seg[0]\nS2:%first[1]/%last[0]/%len\nS3:%before[1,0]\nS4:%inside[1]\n"


@pytest.mark.parametrize("feature_set", ["supported", "complete"])
def test_arrays_round_trip(feature_set):
    space, corpus = fit(TEMPLATE, feature_set=feature_set)
    meta, arrays = space.to_arrays()
    back = SegmentSpace.from_arrays(meta, arrays, "m.crf")
    assert back.labels == space.labels and back.attribute_strings() == space.attribute_strings()
    assert back.feature_set == feature_set
    np.testing.assert_array_equal(back.feat_ptr, space.feat_ptr)
    np.testing.assert_array_equal(back.feat_label, space.feat_label)
    np.testing.assert_array_equal(back.max_len, space.max_len)
    again = back.encode(sentences([ROWS]))
    np.testing.assert_array_equal(again.seg_ptr, corpus.seg_ptr)
    np.testing.assert_array_equal(again.seg_attrs, corpus.seg_attrs)


def _forge(meta, arrays, key, value):
    if key in meta:
        return {**meta, key: value}, arrays
    return meta, {**arrays, key: value}


@pytest.mark.parametrize("key, value", [
    ("max_len", np.array([3, 0, 1], dtype=np.int32)),            # a label with no segment
    ("max_len", np.array([3, 2, 1], dtype=np.int32)),            # O longer than one token
    ("max_len", np.array([3, 1], dtype=np.int32)),               # not one per label
    ("line_ptr", np.array([0, 1, 2, 3, 99], dtype=np.int64)),    # past the attributes
    ("n_lines", 3),
    ("label_col", 7),
    ("template", "U:%x[0,0]\nS1:%foo[0]\n"),
    ("template", 5),
    ("feature_set", "dense"),
    ("feat_label", np.array([0, 0, 1], dtype=np.int32)),             # not one per feature
    ("feat_ptr", np.array([0, 2, 1, 3], dtype=np.int32)),             # decreasing
])
def test_forged_arrays_are_refused(key, value):
    space, _ = fit(TEMPLATE)
    meta, arrays = _forge(*space.to_arrays(), key, value)
    with pytest.raises(CrftkError) as e:
        SegmentSpace.from_arrays(meta, arrays, "m.crf")
    assert e.value.path == "m.crf"


def test_forged_labels_and_keys_are_refused():
    from crftk.io.container import pack_strings
    space, _ = fit(TEMPLATE)
    meta, arrays = space.to_arrays()
    for strings, name in ((["VP", "NP", "O"], "labels"), (["NP", "VP"], "labels")):
        forged = dict(arrays)
        forged[f"{name}.offsets"], forged[f"{name}.blob"] = pack_strings(strings)
        with pytest.raises(CrftkError, match="labels"):
            SegmentSpace.from_arrays(meta, forged, "m.crf")
    keys = [k for keys in space.line_keys for k in keys]
    forged = dict(arrays)
    forged["keys.offsets"], forged["keys.blob"] = pack_strings([keys[0]] * len(keys))
    with pytest.raises(CrftkError, match="repeated or malformed"):
        SegmentSpace.from_arrays(meta, forged, "m.crf")


def test_fit_refuses_the_label_column_and_too_long_segments():
    with pytest.raises(CrftkError, match="gold label column") as e:
        fit("U:%x[0,0]\n\nS:%first[2]\n")
    assert e.value.line == 3
    with pytest.raises(CrftkError, match="longer than its longest"):
        SegmentSpace.fit(sentences([ROWS]), parse_template("S:%len\n"), labels=["NP", "VP"],
                         max_len={"NP": 2, "VP": 1})


@pytest.mark.parametrize("line, fragment", [
    ("S:%x[0,0]", "%x reads one token"),
    ("S:%num[0,1]", "real-valued"),
    ("S:%foo[0]", "unknown macro %foo"),
    ("S:%before[0,0]", "distance must be an integer from 1"),
    ("S:%len[1]", "takes no arguments"),
])
def test_bad_s_lines_name_their_line(line, fragment):
    with pytest.raises(CrftkError, match=fragment) as e:
        parse_template(f"U:%x[0,0]\n{line}\n", "t.tmpl")
    assert (e.value.path, e.value.line) == ("t.tmpl", 2)


def test_the_chain_trainer_refuses_s_lines_in_one_line(tmp_path):
    (tmp_path / "t.tmpl").write_text("U:%x[0,0]\nB\n# segments\nS:%seg[0]\n")
    (tmp_path / "train.txt").write_text("".join(" ".join(r) + "\n" for r in ROWS) + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    model = tmp_path / "m.crf"
    proc = subprocess.run([sys.executable, "-m", "crftk.cli", "train", "-t", str(tmp_path / "t.tmpl"),
                           str(tmp_path / "train.txt"), "-m", str(model)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode != 0
    assert proc.stderr.splitlines() == [f"crftk: error: {tmp_path / 't.tmpl'}:4: an S line is a segment feature "
                                        "of a semi-Markov CRF: train with --model-type semimarkov"]
    assert not model.exists()


@pytest.mark.parametrize("name", ["semimarkov-chunking.tmpl", "semimarkov-np.tmpl", "semimarkov-ner.tmpl"])
def test_shipped_templates_keep_the_token_templates_lines(name):
    token = {"semimarkov-ner.tmpl": "conll2003-ner.tmpl"}.get(name, "chunking-crfpp.tmpl")

    def lines(n, kinds):
        return [ln for ln in (REPO / "templates" / n).read_text().splitlines() if ln and ln[0] in kinds]
    assert lines(name, "UB") == lines(token, "UB")
    assert parse_template((REPO / "templates" / name).read_text(), name).segments


def test_a_line_without_macros_is_one_attribute_on_every_span():
    space, corpus = fit("S:%len\nSbias\n")
    assert "Sbias" in space.attribute_strings()
    assert span(space, corpus, 3, 1) == ["S:1", "Sbias"]
    assert span(space, corpus, 1, 3) == ["S:3", "Sbias"]
    assert span(space, corpus, 4, 3) == []                        # past the sentence's end


def test_a_line_whose_attributes_were_all_pruned_encodes_none(tmp_path):
    (tmp_path / "x.lex").write_text("no such words\n")
    text = "@lexicon X x.lex\nS:%len\nS:%seglex[X]/%len/%first[0]\nS:%first[0]/%last[0]/%len\n"
    space, corpus = fit(text, path=str(tmp_path / "t.tmpl"), min_freq=2)
    assert space.line_keys[1] == [] and space.line_keys[2] == []
    assert span(space, corpus, 2, 3) == []                         # %len 3 seen once
    assert span(space, corpus, 0, 1) == ["S:1"]


def test_a_value_with_a_tab_is_refused_at_fit():
    rows = [list(r) for r in ROWS]
    rows[3][0] = "cur\trent"            # a Python caller's token; no CoNLL field holds a tab
    with pytest.raises(CrftkError, match="cannot hold a tab"):
        fit("S:%seg[0]/%len\n", (rows,))
    fit("S:%seg[1]/%len\n", (rows,))    # a column no S line reads may hold one
