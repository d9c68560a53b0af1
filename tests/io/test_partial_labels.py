"""Parsing partial annotation (crftk.io.partial): unknown markers, label sets, pair cells."""

import numpy as np
import pytest

from crftk.errors import CrftkError
from crftk.io.partial import AnnotationError, cell_set, is_partial, pair_cell, resolve


def test_cells():
    assert is_partial("?", "?") and is_partial("B-PER|I-PER", "?")
    assert not is_partial("B-PER", "?")
    assert not is_partial("?", None) and not is_partial("A|B", "")      # partial labels off
    assert cell_set("?", "?") is None
    assert cell_set("A|B", "?") == ("A", "B")
    with pytest.raises(CrftkError, match="empty element"):
        cell_set("B-PER|", "?")
    with pytest.raises(CrftkError, match="unknown marker"):
        cell_set("B-PER|?", "?")


def test_resolve_first_order():
    strings = ["O", "?", "B|O", "B"]
    ids = np.array([0, 1, 2, 3, 0, 1])
    r = resolve(strings, ids, "?")
    assert r.labels == ["B", "O"]
    assert r.gold.tolist() == [1, -1, -1, 0, 1, -1]
    assert r.allowed.tolist() == [[0, 1], [1, 1], [1, 1], [1, 0], [0, 1], [1, 1]]
    assert r.allowed.dtype == np.uint8 and r.allowed.flags.c_contiguous
    assert r.n_partial == 3


def test_resolve_fully_labeled_has_no_mask():
    r = resolve(["O", "B"], np.array([0, 1, 0]), "?")
    assert r.allowed is None and r.gold.tolist() == [1, 0, 1]


@pytest.mark.parametrize("strings, ids, message, token", [
    (["O", "B-PER|B-LOC", "B-PER"], [0, 2, 1], "never has the label 'B-LOC'", 2),
    (["O", "O|"], [0, 1], "empty element", 1),
    (["O", "?|O"], [0, 0, 1], "unknown marker", 2),
])
def test_resolve_errors_name_the_token(strings, ids, message, token):
    with pytest.raises(AnnotationError, match=message) as e:
        resolve(strings, np.array(ids), "?")
    assert e.value.token == token


def test_every_token_unknown():
    with pytest.raises(CrftkError, match="no token of the training data has a known label"):
        resolve(["?", "?"], np.array([0, 1]), "?")


def test_fixed_labels_of_an_init_model():
    r = resolve(["?", "A|C"], np.array([0, 1]), "?", fixed=["A", "B", "C"])
    assert r.allowed.tolist() == [[1, 1, 1], [1, 0, 1]]
    with pytest.raises(AnnotationError, match="--init model has no label 'D'"):
        resolve(["A|D"], np.array([0]), "?", fixed=["A", "B"])
    with pytest.raises(CrftkError, match="is a label of the --init"):
        resolve(["A|B"], np.array([0]), "?", fixed=["A", "?"])


def test_pair_cells_allow_pairs_of_allowed_tags():
    # tags A and B; a token '?' after A, then 'A|B' after '?'
    strings = ["<s>|A", "A|B", "B|B", pair_cell("A", "?"), pair_cell("?", "A|B")]
    r = resolve(strings, np.arange(len(strings)), "?", pairs=True)
    labels = r.labels
    # with partial tags every pair of tags is a label, and <s> before each
    assert labels == ["<s>|A", "<s>|B", "A|A", "A|B", "B|A", "B|B"]
    assert {lab for j, lab in enumerate(labels) if r.allowed[3, j]} == {"A|A", "A|B"}
    assert {lab for j, lab in enumerate(labels) if r.allowed[4, j]} == {"A|A", "A|B", "B|A", "B|B"}
    assert r.gold[3] == -1 and labels[r.gold[0]] == "<s>|A"


def test_pair_cells_name_known_tags():
    with pytest.raises(AnnotationError, match="never has the label 'C'") as e:
        resolve(["<s>|A", "A|A", pair_cell("A", "A|C")], np.arange(3), "?", pairs=True)
    assert e.value.token == 2
    with pytest.raises(AnnotationError, match="no pair of labels"):
        resolve(["<s>|A", "A|A", pair_cell("A", "B")], np.arange(3), "?", pairs=True)
