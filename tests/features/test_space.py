from collections import Counter

import numpy as np
import pytest

from corpora import random_corpus, reference_strings, sentences
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template

TEMPLATE = """U00:%x[-3,0]
U01:%x[0,0]
U02:%x[1,1]
U03:%x[-1,0]/%x[0,0]
U04:%x[-1,1]/%x[0,1]/%x[1,1]
U05:%x[-2,0]/%x[-1,1]/%x[0,0]/%x[2,1]
U06:const
B
B07:%x[0,1]
"""


def token_strings(space, corpus):
    names = space.attribute_strings()
    p = corpus.attr_ptr
    return [sorted(names[a] for a in corpus.attrs[p[i]:p[i + 1]]) for i in range(corpus.n_tokens)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expansion_matches_string_reference(seed):
    tmpl = parse_template(TEMPLATE)
    train = random_corpus(40, seed=seed)
    space, corpus = FeatureSpace.fit(train, tmpl)
    ref = [sorted(x) for s in train for x in reference_strings(tmpl, s)]
    assert token_strings(space, corpus) == ref
    assert space.n_attrs == len({x for tok in ref for x in tok})


@pytest.mark.parametrize("min_freq", [2, 3, 5])
def test_min_freq_keeps_attributes_seen_often_enough(min_freq):
    tmpl = parse_template(TEMPLATE)
    train = random_corpus(60, seed=7)
    space, corpus = FeatureSpace.fit(train, tmpl, min_freq=min_freq)
    counts = Counter(x for s in train for tok in reference_strings(tmpl, s) for x in tok)
    kept = {x for x, c in counts.items() if c >= min_freq}
    assert set(space.attribute_strings()) == kept
    ref = [sorted(x for x in tok if x in kept) for s in train for tok in reference_strings(tmpl, s)]
    assert token_strings(space, corpus) == ref


def test_encoding_new_data_drops_unseen_attributes():
    tmpl = parse_template(TEMPLATE)
    train = random_corpus(30, seed=3, vocab=8)
    space, _ = FeatureSpace.fit(train, tmpl)
    test = random_corpus(20, seed=4, vocab=20)
    enc = space.encode(test)
    known = set(space.attribute_strings())
    ref = [sorted(x for x in tok if x in known) for s in test for tok in reference_strings(tmpl, s)]
    assert token_strings(space, enc) == ref
    assert any(len(r) < len(tmpl.unigrams) for r in ref)   # the test does exercise unseen values


def test_refit_encoding_equals_frozen_encoding():
    tmpl = parse_template(TEMPLATE)
    train = random_corpus(50, seed=5)
    space, corpus = FeatureSpace.fit(train, tmpl, min_freq=2)
    again = space.encode(train)
    for name in ("sent_ptr", "attr_ptr", "attrs", "eattr_ptr", "eattrs", "labels"):
        assert np.array_equal(getattr(corpus, name), getattr(again, name)), name


def test_subset_of_an_encoding_is_the_encoding_of_those_sentences():
    sents = random_corpus(30, seed=3)
    space, corpus = FeatureSpace.fit(sents, parse_template(TEMPLATE))
    chosen = [0, 4, 5, 17, 29]
    sub, ref = corpus.subset(chosen), space.encode([sents[i] for i in chosen])
    for name in ("sent_ptr", "attr_ptr", "attrs", "eattr_ptr", "eattrs", "labels"):
        assert np.array_equal(getattr(sub, name), getattr(ref, name)), name
    tokens = corpus.tokens_of(chosen)
    assert np.array_equal(corpus.labels[tokens], ref.labels) and tokens.size == ref.n_tokens


def test_edge_attributes_from_b_lines_with_macros():
    tmpl = parse_template(TEMPLATE)
    train = random_corpus(20, seed=6)
    space, corpus = FeatureSpace.fit(train, tmpl)
    names = space.attribute_strings(edge=True)
    assert set(names) == {f"B07:{row[1]}" for s in train for row in s.rows}
    p = corpus.eattr_ptr
    toks = [row for s in train for row in s.rows]
    assert [names[corpus.eattrs[p[i]]] for i in range(len(toks))] == [f"B07:{r[1]}" for r in toks]


def test_supported_features_are_observed_pairs_and_complete_are_all():
    tmpl = parse_template(TEMPLATE)
    train = random_corpus(30, seed=8)
    space, corpus = FeatureSpace.fit(train, tmpl)
    names = space.attribute_strings()
    got = {(names[a], space.labels[space.feat_label[f]])
           for a in range(space.n_attrs) for f in range(space.feat_ptr[a], space.feat_ptr[a + 1])}
    want = {(x, row[2]) for s in train for row, tok in zip(s.rows, reference_strings(tmpl, s)) for x in tok}
    assert got == want
    full, _ = FeatureSpace.fit(train, tmpl, feature_set="complete")
    assert full.n_features == full.n_attrs * full.n_labels
    assert full.n_params == full.n_features + 3 * 3 + 2 * 3 + full.n_edge_attrs * 9


def test_labels_sorted_and_label_column_in_the_middle():
    rows = [[["a", "L2", "x"], ["b", "L1", "y"]], [["c", "L3", "x"]]]
    space, corpus = FeatureSpace.fit(sentences(rows), parse_template("U:%x[0,0]/%x[0,2]\nB\n"), label_col=1)
    assert space.labels == ["L1", "L2", "L3"]
    assert corpus.labels.tolist() == [1, 0, 2]
    with pytest.raises(CrftkError, match="gold label column"):
        FeatureSpace.fit(sentences(rows), parse_template("U:%x[0,1]\n"), label_col=1)


def test_tag_time_column_counts():
    rows = [[["a", "P", "x"], ["b", "Q", "y"]]]
    space, _ = FeatureSpace.fit(sentences(rows), parse_template("U:%x[0,0]\nB\n"))
    assert space.encode(sentences([[["a", "P"]]])).labels is None
    assert space.encode(sentences([[["a", "P", "y"]]])).labels.tolist() == [1]
    assert space.encode(sentences([[["a", "P", "zz"]]])).labels.tolist() == [-1]
    # the template reads column 0 only: the words alone will do
    assert space.encode(sentences([[["a"]]])).labels is None
    assert space.encode(sentences([[["a"]]])).attrs.tolist() == space.encode(sentences([[["a", "P"]]])).attrs.tolist()
    space, _ = FeatureSpace.fit(sentences(rows), parse_template("U:%x[0,1]\nB\n"))
    with pytest.raises(CrftkError, match="expects 2 or 3 columns, found 1: the model reads column 1 of the 3 it"):
        space.encode(sentences([[["a"]]]))
    with pytest.raises(CrftkError, match="expects 2 or 3 columns, found 4"):
        space.encode(sentences([[["a", "P", "x", "z"]]]))


def test_bad_options():
    train = random_corpus(5)
    tmpl = parse_template("U:%x[0,0]\n")
    with pytest.raises(CrftkError, match="feature set"):
        FeatureSpace.fit(train, tmpl, feature_set="everything")
    with pytest.raises(CrftkError, match="min-freq"):
        FeatureSpace.fit(train, tmpl, min_freq=0)
    with pytest.raises(CrftkError, match="label column"):
        FeatureSpace.fit(train, tmpl, label_col=5)


def test_arrays_round_trip_preserves_encoding():
    tmpl = parse_template(TEMPLATE)
    train = random_corpus(40, seed=9)
    space, corpus = FeatureSpace.fit(train, tmpl, min_freq=2)
    meta, arrays = space.to_arrays()
    back = FeatureSpace.from_arrays(meta, arrays)
    test = random_corpus(10, seed=10, vocab=20)
    a, b = space.encode(test), back.encode(test)
    assert np.array_equal(a.attrs, b.attrs) and np.array_equal(a.attr_ptr, b.attr_ptr)
    assert np.array_equal(a.eattrs, b.eattrs)
    assert back.attribute_strings() == space.attribute_strings()
    assert back.labels == space.labels and back.n_params == space.n_params


EXTENDED = r"""U00:%x[0,0]
U01:%X[-1,0]/%t[0,0,"^[A-Z]"]
U02:%T[1,0,"^new$"]/%m[0,0,"[0-9]+"]
U03:%M[0,0,"C[A-Z]*"]
U04:%shape[0,0]
U05:%shape[-1,0]/%cshape[0,0]/%fshape[1,0]
U06:%pre[0,0,2]/%suf[0,0,3]
U07:%ngram[0,0,2,3]
U08:%ngram[-1,0,1,2]/%shape[0,0]/%x[0,1]
U09:%^x[0,0]/%^x[-1,0]
U10:%^shape[0,0]/%x[1,1]
B
"""


def test_extended_macros_match_the_reference():
    from corpora import random_docs, reference_attributes
    tmpl = parse_template(EXTENDED)
    train = random_docs(12, seed=1)
    space, corpus = FeatureSpace.fit(train, tmpl)
    assert token_strings(space, corpus) == reference_attributes(tmpl, train)
    # tagging-time encoding: unseen words still get their shape, affix and n-gram attributes
    test = random_docs(6, seed=2, words=["Xerxes", "1997", "quux", "Bush", "ZZ-Top", "said"])
    known = set(space.attribute_strings())
    ref = [sorted(a for a in tok if a in known) for tok in reference_attributes(tmpl, test)]
    assert token_strings(space, space.encode(test)) == ref
    assert any(a.startswith("U04:") for tok in ref for a in tok)   # exercised on unseen words


def test_first_mention_reads_the_earlier_occurrence_in_the_document():
    rows = [[["Bush", "A", "B-X"], ["said", "B", "O"]],
            [["then", "C", "O"], ["Bush", "A", "B-X"]],
            [["said", "B", "O"], ["said", "B", "O"]]]
    sents = sentences(rows)
    space, corpus = FeatureSpace.fit(sents, parse_template("U:%^x[1,0]\nB\n"))
    got = token_strings(space, corpus)
    # only the second "Bush" has an earlier capitalized mention; its next word there is "said"
    assert got == [[], [], [], ["U:said"], [], []]
    # a new document forgets the earlier mentions
    sents[1].doc = 1
    space, corpus = FeatureSpace.fit(sents, parse_template("U:%^x[1,0]\nB\n"))
    assert token_strings(space, corpus) == [[]] * 6


def test_multi_valued_counts_and_duplicates():
    sents = sentences([[["abab", "A", "O"]]])
    space, corpus = FeatureSpace.fit(sents, parse_template("U:%ngram[0,0,2,2]\n"))
    # <a ab ba ab b> : "ab" twice
    assert token_strings(space, corpus) == [sorted(["U:<a", "U:ab", "U:ba", "U:ab", "U:b>"])]


def test_extended_space_round_trips_through_arrays():
    from corpora import random_docs
    tmpl = parse_template(EXTENDED)
    space, _ = FeatureSpace.fit(random_docs(8, seed=3), tmpl, min_freq=2)
    meta, arrays = space.to_arrays()
    back = FeatureSpace.from_arrays(meta, arrays)
    test = random_docs(5, seed=4, words=["Xerxes", "1997", "quux", "Bush", "ZZ-Top", "said"])
    a, b = space.encode(test), back.encode(test)
    assert np.array_equal(a.attrs, b.attrs) and np.array_equal(a.attr_ptr, b.attr_ptr)
    assert back.attribute_strings() == space.attribute_strings()


def test_lexicon_macro_with_jackknife_folds_and_embedding(tmp_path):
    from crftk.features.lexicon import Lexicon, fold_of
    from corpora import reference_attributes
    lex = tmp_path / "loc.lex"
    lex.write_text("# crftk-lexicon folds=2\nNew York\t0\nYork\t0,1\nParis\t1\n")
    tmpl_path = tmp_path / "t.tmpl"
    tmpl_path.write_text("@lexicon LOC loc.lex\nU0:%lex[0,LOC]\nU1:%lex[-1,LOC]/%x[0,0]\nB\n")
    from crftk.features.templates import read_template
    tmpl = read_template(tmpl_path)
    rows = [["New", "O"], ["York", "O"], ["and", "O"], ["Paris", "O"], ["York", "O"]]
    train = sentences([rows, rows])
    train[1].doc = 1                       # document 1 is in fold 1
    space, corpus = FeatureSpace.fit(train, tmpl)
    lexicons = {"LOC": Lexicon.read(lex, name="LOC")}
    ref = reference_attributes(tmpl, train, lexicons, folds=lambda doc, lx: fold_of(doc, lx.n_folds))
    assert token_strings(space, corpus) == ref
    # fold 0 cannot see "New York" (only seen in fold 0) but sees Paris (fold 1) and York (0,1)
    assert "U0:B" not in ref[0] and "U0:B" in ref[3] and "U0:B" in ref[1]
    # fold 1 sees "New York" as one phrase, not Paris
    assert "U0:B" in ref[5] and "U0:I" in ref[6] and "U0:B" not in ref[8]
    # tagging (no fold) sees every entry, from the copy stored in the model
    meta, arrays = space.to_arrays()
    lex.unlink()
    back = FeatureSpace.from_arrays(meta, arrays)
    test = sentences([rows])
    known = set(space.attribute_strings())
    want = [[a for a in tok if a in known] for tok in reference_attributes(tmpl, test, lexicons)]
    assert token_strings(back, back.encode(test)) == want
    assert want[0][0] == "U0:B" and "U0:I" in want[1]      # "New York" as one phrase


def test_undeclared_or_missing_lexicon(tmp_path):
    from crftk.features.templates import read_template
    p = tmp_path / "t.tmpl"
    p.write_text("U0:%lex[0,LOC]\n")
    with pytest.raises(CrftkError, match="not declared"):
        read_template(p)
    p.write_text("@lexicon LOC missing.lex\nU0:%lex[0,LOC]\n")
    with pytest.raises(CrftkError, match="missing.lex"):
        FeatureSpace.fit(sentences([[["a", "O"]]]), read_template(p))


def test_a_space_of_every_string_test_pickles_and_encodes_the_same():
    # a compiled template's string tests are module functions or partials of them, never
    # closures: the space pickles (as joblib and multiprocessing need) and is rebuilt from them
    import pickle
    from corpora import random_docs
    from crftk.features.extract import string_test
    tmpl = parse_template(EXTENDED)
    space, _ = FeatureSpace.fit(random_docs(8, seed=3), tmpl)
    test = random_docs(5, seed=4, words=["Xerxes", "1997", "quux", "Bush", "ZZ-Top", "said"])
    before = space.encode(test)               # the lookup tables are built: they travel too
    back = pickle.loads(pickle.dumps(space))
    after = back.encode(test)
    assert np.array_equal(before.attrs, after.attrs) and np.array_equal(before.attr_ptr, after.attr_ptr)
    kinds = {k[0] for k in space.extractor.tests}
    assert {"t", "T", "m", "M", "pre", "suf", "ngram", "shape", "fshape", "cshape", "X"} <= kinds
    for kind, args in [("t", ("^[A-Z]",)), ("M", ("[0-9]+",)), ("pre", (2,)), ("suf", (3,)),
                       ("ngram", (1, 2))]:
        test_fn = pickle.loads(pickle.dumps(string_test(kind, args)))
        assert test_fn("Abc12") == string_test(kind, args)("Abc12")


def test_a_space_that_encoded_bytes_pickles_and_encodes_alike(tmp_path):
    """Dask sends spaces between workers: the compiled tables encode_raw caches must not stop it."""
    import pickle

    from corpora import write_conll
    from crftk.io.conll import iter_corpus, read_batches
    path = tmp_path / "c.txt"
    write_conll(path, random_corpus(30, seed=5))
    template = parse_template("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nB\n", "<t>")
    space, _ = FeatureSpace.fit(iter_corpus([str(path)]), template)
    batch = next(iter(read_batches(str(path))))
    assert space.raw_readable()
    first = space.encode_raw(batch)
    copy = pickle.loads(pickle.dumps(space))
    again = copy.encode_raw(batch)
    for name in ("sent_ptr", "attr_ptr", "attrs", "eattr_ptr", "eattrs"):
        assert np.array_equal(getattr(first, name), getattr(again, name)), name
