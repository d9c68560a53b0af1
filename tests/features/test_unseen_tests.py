"""The string tests of words outside the vocabulary, kept across a tagging run's batches
(crftk.features.extract.UnseenTests): the same ids as testing every word afresh."""

import pickle
import threading

import numpy as np
import pytest

from corpora import random_docs, reference_attributes, write_conll
from crftk.features.extract import MULTI, UnseenTests
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template

TEMPLATE = r"""U00:%x[0,0]
U01:%X[-1,0]/%t[0,0,"^[A-Z]"]
U02:%T[1,0,"^new$"]/%m[0,0,"[0-9]+"]
U03:%suf[0,0,2]/%pre[0,0,1]/%x[0,1]
U04:%shape[0,0]/%cshape[0,0]
U05:%t[0,1,"A"]
U06:%ngram[0,1,1,2]
B
"""

TRAIN_WORDS = ["Paris", "said", "the", "1997", "Bush", "new", "co"]
NEW_WORDS = ["Xerxes", "1997", "quux", "ZZ-Top", "said", "C3PO", "new", "Newer", "x12", "Co", "quuz"]


def reference(extractor, column, col_ids, where, strings):
    """Every test of a column as it was computed before the cache: the table over the vocabulary for
    known values, the test itself on each unseen value, -1 without a value."""
    out = {}
    distinct = list(dict.fromkeys(strings))
    inverse = np.array([distinct.index(s) for s in strings], dtype=np.int64)
    for key, test in extractor.tests.items():
        if key[1] != column:
            continue
        if key[0] in MULTI:
            lists = [[i for i in extractor.vocabs[key].ids(test(w)).tolist() if i >= 0] for w in distinct]
            out[key] = extractor._multi_test_ids(key, col_ids, where, lists, inverse)
            continue
        ids = np.where(col_ids >= 0, extractor.test_table(key)[np.where(col_ids >= 0, col_ids, 0)], -1)
        ids[where] = extractor.vocabs[key].ids([test(s) for s in strings])
        out[key] = ids
    return out


def same(a, b):
    if isinstance(a, tuple):
        return all(np.array_equal(x, y) for x, y in zip(a, b))
    return np.array_equal(a, b)


def fitted():
    space, _ = FeatureSpace.fit(random_docs(10, seed=1, words=TRAIN_WORDS), parse_template(TEMPLATE))
    return space.extractor


def batches(extractor, n, seed):
    """n batches of (column, column ids, unseen positions, their strings), words mostly unseen."""
    out = []
    for b in range(n):
        docs = random_docs(3, seed=seed + b, words=NEW_WORDS)
        for column in (0, 1):
            strings = [row[column] for s in docs for row in s.rows]
            ids = extractor.vocabs[column].ids(strings)
            where = np.flatnonzero(ids < 0)
            out.append((column, ids, where, [strings[i] for i in where.tolist()]))
    return out


@pytest.mark.parametrize("limit", [1 << 15, 3, 0])
def test_kept_tests_give_the_ids_of_testing_afresh(monkeypatch, limit):
    monkeypatch.setattr(UnseenTests, "limit", limit)
    extractor = fitted()
    for column, ids, where, strings in batches(extractor, 12, seed=5) * 2:
        got = extractor.column_tests(column, ids, where, strings)
        want = reference(extractor, column, ids, where, strings)
        assert want and set(want) == set(got)
        for key, value in want.items():
            assert same(got[key], value), key
    kept = extractor._unseen[0]
    distinct = len({w for c, _, _, s in batches(extractor, 12, 5) if c == 0 for w in s})
    assert len(kept.row) == min(limit, distinct)
    assert kept.multi_keys and all(len(lists) == min(limit, distinct) for lists, _, _ in kept._lists.values())


def test_a_column_that_the_batch_lacks_has_no_values():
    extractor = fitted()
    ids = np.full(5, -1, dtype=np.int64)
    got = extractor.column_tests(0, ids, ids[:0], [])
    assert all(np.array_equal(v, np.full(5, -1)) for k, v in got.items() if k[0] not in MULTI)
    want = reference(extractor, 0, ids, ids[:0], [])
    assert set(got) == set(want) and all(same(got[k], v) for k, v in want.items())


def test_a_vocabulary_that_grows_is_read_again():
    extractor = fitted()
    key = next(k for k in extractor.tests if k[0] == "suf")
    ids = np.array([-1], dtype=np.int64)
    before = extractor.column_tests(0, ids, np.array([0]), ["quux"])[key]
    assert before[0] == -1                            # "ux" was never a suffix in training
    extractor.vocabs[key].add_ids(["ux"])
    after = extractor.column_tests(0, ids, np.array([0]), ["quux"])[key]
    assert after[0] == extractor.vocabs[key].index["ux"]


def test_threads_sharing_the_kept_tests_agree_with_one_thread():
    extractor = fitted()
    work = batches(extractor, 40, seed=9)
    want = [reference(extractor, *w) for w in work]
    errors = []

    def run(order):
        for i in order:
            got = extractor.column_tests(*work[i])
            if any(not same(got[k], v) for k, v in want[i].items()):
                errors.append(i)

    threads = [threading.Thread(target=run, args=(list(range(len(work)))[::step],)) for step in (1, -1, 2, -2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_a_space_that_kept_tests_pickles_and_encodes_alike(tmp_path):
    from crftk.io.conll import read_batches
    path = tmp_path / "t.txt"
    write_conll(path, random_docs(6, seed=2, words=NEW_WORDS))
    space, _ = FeatureSpace.fit(random_docs(10, seed=1, words=TRAIN_WORDS), parse_template(TEMPLATE))
    batch = next(iter(read_batches(str(path))))
    assert space.raw_readable()
    first = space.encode_raw(batch)
    assert space.extractor._unseen                    # the cache holds a lock: it must not travel
    copy = pickle.loads(pickle.dumps(space))
    again = copy.encode_raw(batch)
    for name in ("attr_ptr", "attrs"):
        assert np.array_equal(getattr(first, name), getattr(again, name)), name
    # and encoding the bytes twice, the second time from the kept tests, is the sentence path's
    test = random_docs(6, seed=2, words=NEW_WORDS)
    known = set(space.attribute_strings())
    ref = [sorted(a for a in tok if a in known) for tok in reference_attributes(parse_template(TEMPLATE), test)]
    names = space.attribute_strings()
    p, attrs = first.attr_ptr, first.attrs
    assert [sorted(names[a] for a in attrs[p[i]:p[i + 1]]) for i in range(len(p) - 1)] == ref
    second = space.encode_raw(batch)
    assert np.array_equal(second.attrs, first.attrs)


def test_apply_gives_each_tests_own_values():
    import random

    from crftk.features import observations as obs
    from crftk.features.extract import string_test
    rng = random.Random(7)
    alphabet = "aZ9-.é Ü_"
    words = ["", "a", "Ab", "ABC", "McDonald", "1997", "x12", "ÉCOLE", "naïve"] + \
        ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))) for _ in range(300)]
    tests = [string_test(kind, args) for kind, args in
             [("t", ("^[A-Z][a-z]+$",)), ("T", ("^é",)), ("t", ("[0-9]",)), ("m", ("[0-9]+",)),
              ("pre", (0,)), ("pre", (2,)), ("suf", (1,)), ("suf", (3,)), ("fshape", ()), ("X", ())]]
    for test in tests:
        assert obs.apply(test, words) == [test(w) for w in words], test
