"""FeatureSpace.fit on partially labeled data (crftk.io.partial): gold -1, the allowed mask, the
supported features of partial tokens, both reading paths alike, subset slicing the mask."""

import numpy as np
import pytest

from corpora import sentences
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.io.conll import iter_corpus
from crftk.io.partial import AnnotationError

TEMPLATE = parse_template("U00:%x[0,0]\nU01:%x[-1,0]\nB\n")


def _features(space):
    """{(attribute string, label)} of the state features."""
    names = space.attribute_strings()
    attr = np.repeat(np.arange(space.n_attrs), np.diff(space.feat_ptr))
    return {(names[a], space.labels[j]) for a, j in zip(attr.tolist(), space.feat_label.tolist())}


DATA = [[("a", "B"), ("b", "?"), ("c", "O")], [("d", "B|O"), ("a", "O")]]


def test_partial_tokens_get_a_mask_and_their_features():
    space, corpus = FeatureSpace.fit(sentences(DATA), TEMPLATE, unknown_label="?")
    assert space.labels == ["B", "O"]
    assert corpus.labels.tolist() == [0, -1, 1, -1, 1]
    assert corpus.allowed.tolist() == [[1, 0], [1, 1], [0, 1], [1, 1], [0, 1]]
    feats = _features(space)
    # the unknown token 'b' and the set 'd': their attributes with every label they allow
    assert {("U00:b", "B"), ("U00:b", "O"), ("U00:d", "B"), ("U00:d", "O"), ("U01:a", "B")} <= feats
    # a labeled token's attributes only with its label
    assert ("U00:c", "B") not in feats and ("U00:c", "O") in feats


def test_fully_labeled_fit_is_unchanged():
    data = [[("a", "B"), ("b", "O")], [("c", "O")]]
    a_space, a = FeatureSpace.fit(sentences(data), TEMPLATE)
    b_space, b = FeatureSpace.fit(sentences(data), TEMPLATE, unknown_label="?")
    assert b.allowed is None
    assert np.array_equal(a.labels, b.labels) and np.array_equal(a_space.feat_label, b_space.feat_label)


def test_marker_off_reads_cells_as_labels():
    space, corpus = FeatureSpace.fit(sentences(DATA), TEMPLATE, unknown_label=None)
    assert "?" in space.labels and "B|O" in space.labels and corpus.allowed is None


def test_batch_path_equals_sentence_path(tmp_path):
    p = tmp_path / "t.txt"
    p.write_text("\n\n".join("\n".join(f"{w}\t{y}" for w, y in s) for s in DATA) + "\n")
    ref_space, ref = FeatureSpace.fit(list(iter_corpus([str(p)])), TEMPLATE, unknown_label="?")
    space, got = FeatureSpace.fit(iter_corpus([str(p)]), TEMPLATE, unknown_label="?")
    assert np.array_equal(ref.allowed, got.allowed) and np.array_equal(ref.labels, got.labels)
    assert np.array_equal(ref_space.feat_label, space.feat_label)


def test_subset_slices_the_mask():
    _, corpus = FeatureSpace.fit(sentences(DATA), TEMPLATE, unknown_label="?")
    sub = corpus.subset([1])
    assert sub.allowed.tolist() == [[1, 1], [0, 1]] and sub.labels.tolist() == [-1, 1]


def test_errors_are_located():
    data = [[("a", "B"), ("b", "O")], [("c", "O"), ("d", "B|X")]]
    with pytest.raises(AnnotationError, match="never has the label 'X'") as e:
        FeatureSpace.fit(sentences(data), TEMPLATE, unknown_label="?")
    assert e.value.where == (1, 1)
    with pytest.raises(CrftkError, match="nothing to learn"):
        FeatureSpace.fit(sentences([[("a", "?"), ("b", "?")]]), TEMPLATE, unknown_label="?")
