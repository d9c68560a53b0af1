"""What a fitted space keeps in memory: each line's counts in the narrowest type that holds them
(the union still sums them exactly), its keys in uint32 where they fit (the model file still holds
int64), vocabularies whose value -> id dict is made when asked for, what settling a trained space
drops, and np.unique's work done without numpy.ma."""

import numpy as np
import pytest

from corpora import random_corpus, sentences
from crftk.features.extract import Vocab
from crftk.features.space import FeatureSpace, _distinct, _lookup, _narrow, _narrow_keys
from crftk.features.templates import parse_template
from crftk.features.union import union_spaces
from crftk.training import fit

TEMPLATE = parse_template("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]/%x[1,0]\nB\n")


@pytest.mark.parametrize("top, dtype", [(0, np.uint8), (255, np.uint8), (256, np.uint16), (65_535, np.uint16),
                                        (65_536, np.uint32), (2**32 - 1, np.uint32), (2**32, np.int64)])
def test_counts_take_the_narrowest_type(top, dtype):
    counts = np.array([1, top], dtype=np.int64)
    narrow = _narrow(counts)
    assert narrow.dtype == dtype and narrow.tolist() == counts.tolist()


def test_distinct_is_np_unique():
    rng = np.random.default_rng(0)
    for a in (np.zeros(0, np.int64), np.array([5]), rng.integers(-50, 50, 1000), rng.integers(0, 2**40, 300)):
        np.testing.assert_array_equal(_distinct(a), np.unique(a))


def test_a_union_sums_narrow_counts_exactly():
    frequent = [[["a", "X"], ["b", "Y"]]] * 300            # "a" 300 times: a uint16 count
    rare = [[["a", "X"], ["c", "Y"]]] * 2
    spaces = [FeatureSpace.fit(sentences(rows), TEMPLATE, label_col=1)[0] for rows in (frequent, rare)]
    first = spaces[0].unigram_lines[0]
    assert first.counts.dtype == np.uint16 and sorted(first.counts.tolist()) == [300, 300]
    union = union_spaces(spaces, min_freq=1)[0]
    whole = FeatureSpace.fit(sentences(frequent + rare), TEMPLATE, label_col=1)[0]
    for mine, theirs in zip(union.unigram_lines, whole.unigram_lines):
        np.testing.assert_array_equal(mine.keys, theirs.keys)
        assert mine.keys.dtype == theirs.keys.dtype == np.uint32
        assert np.asarray(mine.counts, np.int64).tolist() == np.asarray(theirs.counts, np.int64).tolist()


@pytest.mark.parametrize("top, dtype", [(0, np.uint32), (2**32 - 1, np.uint32), (2**32, np.int64)])
def test_keys_are_uint32_where_they_fit(top, dtype):
    keys = np.array([0, top], dtype=np.int64)
    narrow = _narrow_keys(keys)
    assert narrow.dtype == dtype and narrow.tolist() == keys.tolist()


def test_no_keys_stay_int64():
    assert _narrow_keys(np.zeros(0, np.int64)).dtype == np.int64


@pytest.mark.parametrize("seed", range(4))
def test_lookup_in_uint32_keys_is_lookup_in_int64_keys(seed):
    # queries below 0 and beyond uint32 are absent, whatever the keys' type
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, 2**32 if seed % 2 else 60, 6000))
    query = np.concatenate([rng.choice(keys, 2000), rng.integers(-2**40, 2**40, 2000),
                            [-1, 0, 2**32 - 1, 2**32, 2**32 + int(keys[0])]]).astype(np.int64)
    for q in (query, query[:300]):          # the sorted-query path and the direct one
        want = _lookup(keys.astype(np.int64), q)
        got = _lookup(keys.astype(np.uint32), q)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()
        assert (want >= 0).sum() >= q.size // 8


def test_narrow_keys_encode_as_the_model_files_int64_keys():
    template = parse_template("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nU02:%x[-1,1]/%x[0,1]/%x[1,1]\nB\nB03:%x[0,1]\n")
    space, _ = FeatureSpace.fit(random_corpus(60, seed=4), template, min_freq=2)
    assert {cl.keys.dtype for cl in space.unigram_lines + space.bigram_lines} == {np.dtype(np.uint32)}
    meta, arrays = space.to_arrays()
    keys = [a for name, a in arrays.items() if name.endswith(".keys")]
    assert len(keys) == 4 and {a.dtype for a in keys} == {np.dtype(np.int64)}
    back = FeatureSpace.from_arrays(meta, arrays)
    test = random_corpus(15, seed=5, vocab=20)
    a, b = space.encode(test), back.encode(test)
    for name in ("attr_ptr", "attrs", "eattr_ptr", "eattrs"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.attrs.size > 0 and back.attribute_strings() == space.attribute_strings()


def test_a_released_vocabulary_index_is_made_again_alike():
    vocab = Vocab(["<s>", "a", "b"])
    assert vocab._index is None                     # not made until asked for
    assert vocab.ids(["b", "x", None, "a"]).tolist() == [2, -1, -1, 1]
    vocab.release_index()
    assert vocab._index is None and vocab.add_ids(["c", "a", None]) == [3, 1, -1]
    vocab.release_index()
    assert vocab.index == {"<s>": 0, "a": 1, "b": 2, "c": 3} and len(vocab) == 4


def test_settling_keeps_the_encoding_and_drops_what_only_fitting_reads():
    template = parse_template("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nU02:%x[1,1]\nB\nB03:%x[0,1]/%x[1,1]\n")
    space, _ = FeatureSpace.fit(random_corpus(40, seed=6), template)
    test = random_corpus(12, seed=7, vocab=20)
    before = space.encode(test)
    assert all(cl.counts is not None for cl in space.unigram_lines)
    space.settle()
    assert all(cl.counts is None for cl in space.unigram_lines + space.bigram_lines)
    assert all(v._index is None for v in space.vocabs.values())
    after = space.encode(test)
    for name in ("attr_ptr", "attrs", "eattr_ptr", "eattrs"):
        np.testing.assert_array_equal(getattr(before, name), getattr(after, name))
    assert before.eattrs.size > 0


def test_a_trained_space_is_settled_and_unions_like_a_loaded_one():
    # fit() settles the space before the optimizer starts: no counts, as a model file has none, so
    # a union at --min-freq 2 keeps its attributes as it keeps a loaded model's
    rows = [[["a", "X"], ["b", "Y"]], [["c", "X"], ["a", "Y"]]]
    model = fit(sentences(rows), TEMPLATE, log=lambda m: None, max_iter=2, c2=1.0)
    assert all(cl.counts is None for cl in model.space.unigram_lines)
    meta, arrays = model.space.to_arrays()
    loaded = FeatureSpace.from_arrays(meta, arrays)
    other = FeatureSpace.fit(sentences([[["d", "X"]]]), TEMPLATE, label_col=1)[0]
    trained_union = union_spaces([model.space, other], min_freq=2)[0]
    loaded_union = union_spaces([loaded, other], min_freq=2)[0]
    assert trained_union.attribute_strings() == loaded_union.attribute_strings()
    assert "U00:c" in trained_union.attribute_strings() and "U00:d" not in trained_union.attribute_strings()
