"""Feature dicts flattened as python-crfsuite flattens them; AttributeSpace's feature selection
(CRFsuite's per-feature min_freq) and encoding."""

import math

import numpy as np
import pytest

from crftk.errors import CrftkError
from crftk.features.attributes import MAX_DEPTH, AttributeSpace, flatten


def items(token):
    data = flatten([[token]])
    values = data.values.tolist() if data.values is not None else [1.0] * len(data.names)
    return list(zip(data.names, values))


@pytest.mark.parametrize("token, expected", [
    ({"w": "the"}, [("w:the", 1.0)]),
    ({"x": 1.5, "t": True, "f": False, "i": 3, "z": 0}, [("x", 1.5), ("t", 1.0), ("f", 0.0), ("i", 3.0), ("z", 0.0)]),
    ({"n": {"a": "b", "c": 2.0}}, [("n:a:b", 1.0), ("n:c", 2.0)]),
    ({"l": ["a", "b"]}, [("l:a", 1.0), ("l:b", 1.0)]),
    ({"s": {"only"}}, [("s:only", 1.0)]),
    ({"n": {"m": {"k": "v"}}}, [("n:m:k:v", 1.0)]),
    (["a", "b", "a"], [("a", 1.0), ("b", 1.0), ("a", 1.0)]),           # repeats are kept: they count twice
    ({"a": {"b": 1}, "a:b": 2}, [("a:b", 1.0), ("a:b", 2.0)]),
    ({b"k": b"v"}, [("k:v", 1.0)]),
    ({"np": np.float32(0.5), "nb": np.bool_(True)}, [("np", 0.5), ("nb", 1.0)]),
    ({}, []),
])
def test_flattening_follows_python_crfsuite(token, expected):
    assert items(token) == expected


def test_binary_data_store_no_values():
    assert flatten([[{"w": "a", "b": True}, ["x"]]]).values is None
    assert flatten([[{"w": "a", "b": False}]]).values.tolist() == [1.0, 0.0]


@pytest.mark.parametrize("X, y, message", [
    ([[None]], None, r"^X\[0\]\[0\]: the token is None"),
    ([[{"a": 1}, "word"]], None, r"^X\[0\]\[1\]: the token is a str"),
    ([[{1: "a"}]], None, r"^X\[0\]\[0\]: a feature name '1' is an int, not a str"),
    ([[{"a": None}]], None, r"^X\[0\]\[0\]: feature 'a' has the value None"),
    ([[{}], [{"a": float("nan")}]], None, r"^X\[1\]\[0\]: feature 'a' has the value nan; values are finite"),
    ([[{"a": np.float64("inf")}]], None, r"value inf; values are finite"),
    ([[{"a": [1]}]], None, r"an entry of the list or set of feature 'a' '1' is an int"),
    ([[["a", 2]]], None, r"an attribute of a token given as a list '2' is an int"),
    ([[{"a": {"b": "c"}}]], [["A", "B"]], r"^X\[0\] has 1 tokens but y\[0\] has 2 labels"),
    ([[{"a": 1}]], [["A"], ["B"]], r"^X has 1 sentences but y has 2 label sequences"),
    ([[{"a": 1}]], [[None]], r"^y\[0\]\[0\] is None"),
    ([[{"a": 1}]], [["B I"]], r"holds white space"),
])
def test_bad_input_is_one_clear_error(X, y, message):
    with pytest.raises(CrftkError, match=message):
        flatten(X, y)


def test_nesting_deeper_than_the_limit_is_refused():
    token = leaf = {}
    for _ in range(MAX_DEPTH):
        leaf["k"] = {}
        leaf = leaf["k"]
    leaf["k"] = "v"
    assert items(token) == [(":".join(["k"] * (MAX_DEPTH + 1)) + ":v", 1.0)]
    leaf["k"] = {"k": "v"}
    with pytest.raises(CrftkError, match=rf"deeper than {MAX_DEPTH} levels"):
        flatten([[token]])


def test_empty_sentences_are_left_out_with_their_index():
    data = flatten([[], [{"a": "b"}], []], [[], ["A"], []])
    assert data.n_sequences == 1 and data.index.tolist() == [1]


def fit(X, y, **kw):
    return AttributeSpace.fit(flatten(X, y), **kw)


def features(space):
    return {(space.attributes[a], space.labels[int(space.feat_label[f])])
            for a in range(space.n_attrs) for f in range(space.feat_ptr[a], space.feat_ptr[a + 1])}


def test_min_freq_is_crfsuites_per_feature_sum_of_values():
    X = [[{"a": 0.5, "b": 1.0, "c": 2.0}, {"a": 0.5, "b": 1.0}, {"c": -1.0, "d": 0.0}]]
    y = [["A", "A", "B"]]
    # (a,A) sums 1.0, (b,A) 2.0, (c,A) 2.0, (c,B) -1.0, (d,B) 0.0
    space, _ = fit(X, y, min_freq=1.0)
    assert features(space) == {("a", "A"), ("b", "A"), ("c", "A")}           # >=, not >
    assert space.attributes == ["a", "b", "c"]                               # d: no feature left, dropped
    space, _ = fit(X, y, min_freq=2.0)
    assert features(space) == {("b", "A"), ("c", "A")}
    space, _ = fit(X, y, min_freq=0.0)
    assert features(space) == {("a", "A"), ("b", "A"), ("c", "A"), ("d", "B")}   # a negative sum is below 0
    # possible states are pairs of frequency 0 (CRFsuite's, checked against it in tests/compat):
    # a positive threshold drops them, 0 keeps them for every attribute seen, but not a pair whose
    # values sum below 0
    space, _ = fit(X, y, min_freq=2.0, feature_set="complete")
    assert features(space) == {("b", "A"), ("c", "A")}
    space, _ = fit(X, y, min_freq=0.0, feature_set="complete")
    assert features(space) == {(a, lab) for a in "abcd" for lab in "AB"} - {("c", "B")}


def test_encoding_keeps_values_aligned_and_drops_unseen_attributes():
    X = [[{"w": "x", "v": 2.5}, ["q"]], [{"w": "y"}]]
    space, corpus = fit(X, [["A", "B"], ["A"]])
    names = space.attributes
    got = [[(names[a], v) for a, v in zip(corpus.attrs[corpus.attr_ptr[t]:corpus.attr_ptr[t + 1]],
                                          corpus.values[corpus.attr_ptr[t]:corpus.attr_ptr[t + 1]])]
           for t in range(corpus.n_tokens)]
    assert got == [[("w:x", 1.0), ("v", 2.5)], [("q", 1.0)], [("w:y", 1.0)]]
    assert corpus.labels.tolist() == [0, 1, 0] and corpus.sent_ptr.tolist() == [0, 2, 3]
    test = space.encode(flatten([[{"w": "new", "v": 1.0, "u": 3.0}, ["q", "q"]]], [["C", "B"]]))
    assert [names[a] for a in test.attrs] == ["v", "q", "q"] and test.attr_ptr.tolist() == [0, 1, 3]
    assert test.values is None                     # the only real value belonged to an unseen attribute
    assert test.labels.tolist() == [-1, 1]


def test_space_round_trips_through_its_arrays():
    space, _ = fit([[{"w": "a:b", "x": 1.5}]], [["A"]])
    meta, arrays = space.to_arrays()
    back = AttributeSpace.from_arrays(meta, arrays)
    assert back.attributes == space.attributes and back.labels == space.labels
    assert np.array_equal(back.feat_ptr, space.feat_ptr) and np.array_equal(back.feat_label, space.feat_label)
    assert math.isclose(float(np.asarray(arrays["feat_ptr"])[-1]), space.n_features)
