"""Tests for crftk.features.lexicon: file format, matching, jackknife folds, building."""

import os

import pytest

from crftk.io.conll import Sentence, read_corpus
from crftk.errors import CrftkError
from crftk.features.lexicon import (
    Lexicon,
    build_lexicons,
    fold_of,
    lexicon_command,
    write_lexicons,
)


def write(tmp_path, text, name="x.lex"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return str(path)


def lex_of(*entries, ignore_case=False, n_folds=0):
    """A lexicon from entries given as strings "tok tok" or (string, folds)."""
    lex = Lexicon("T", ignore_case=ignore_case, n_folds=n_folds)
    for e in entries:
        if isinstance(e, tuple):
            lex.add(e[0].split(), e[1])
        else:
            lex.add(e.split())
    return lex


def error_of(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(CrftkError) as info:
        Lexicon.read(path)
    return path, info.value


# ---------------------------------------------------------------------------
# file format


def test_read_plain_file(tmp_path):
    path = write(tmp_path, "# places\n\nNew York\nParis\n  \nSão Paulo\n", name="LOC.lex")
    lex = Lexicon.read(path)
    assert lex.name == "LOC"
    assert lex.n_folds == 0
    assert lex.entries == {
        ("New", "York"): frozenset(),
        ("Paris",): frozenset(),
        ("São", "Paulo"): frozenset(),
    }
    assert lex.max_len == 2
    assert Lexicon.read(path, name="places").name == "places"


def test_read_jackknife_file(tmp_path):
    text = ("# crftk-lexicon folds=4\n"
            "# a comment\n"
            "New York\t0,3\n"
            "New York City\t2\n"
            "Köln\t1\n"
            "Paris\n")
    lex = Lexicon.read(write(tmp_path, text))
    assert lex.n_folds == 4
    assert lex.entries == {
        ("New", "York"): frozenset({0, 3}),
        ("New", "York", "City"): frozenset({2}),
        ("Köln",): frozenset({1}),
        ("Paris",): frozenset(),
    }
    assert lex.max_len == 3


def test_round_trip_jackknife(tmp_path):
    lex = lex_of(("New York", {3, 0}), ("New York City", {2}), ("Zürich", {1}),
                 "Paris", ("#hashtag", {1}), ("\\back", {0}), ("a\u00a0b c", {2}), n_folds=4)
    path = str(tmp_path / "out" / "LOC.lex")
    os.makedirs(os.path.dirname(path))
    lex.write(path)
    text = open(path, encoding="utf-8").read()
    assert text.splitlines()[0] == "# crftk-lexicon folds=4"
    assert "New York\t0,3\n" in text
    assert "\\#hashtag\t1\n" in text  # escaped, or it would read as a comment
    back = Lexicon.read(path)
    assert back.name == "LOC"
    assert back.n_folds == 4
    assert back.entries == lex.entries
    assert back.max_len == 3
    # the same through lines, as a model file stores it
    again = Lexicon.from_lines(lex.to_lines(), "LOC", ignore_case=False)
    assert again.entries == lex.entries and again.n_folds == 4
    # writing is deterministic and leaves no temporary file behind
    lex.write(path)
    assert open(path, encoding="utf-8").read() == text
    assert os.listdir(os.path.dirname(path)) == ["LOC.lex"]


def test_round_trip_plain_and_lines_with_newlines():
    lex = lex_of("New York", "Paris")
    lines = lex.to_lines()
    assert lines == ["New York", "Paris"]  # no header, no folds
    back = Lexicon.from_lines([line + "\r\n" for line in lines], "LOC")
    assert back.entries == lex.entries and back.n_folds == 0


def test_read_bytes_lines_bom_and_duplicates(tmp_path):
    text = ("\ufeff# crftk-lexicon folds=3\n"
            "Paris\t1\nParis\t2\nRome\t0\nRome\nOslo  Fjord\t 1 , 2 \n")
    lex = Lexicon.read(write(tmp_path, text))
    assert lex.n_folds == 3
    assert lex.entries[("Paris",)] == frozenset({1, 2})   # merged
    assert lex.entries[("Rome",)] == frozenset()          # no folds anywhere wins
    assert lex.entries[("Oslo", "Fjord")] == frozenset({1, 2})


def test_read_ignore_case(tmp_path):
    path = write(tmp_path, "# crftk-lexicon folds=2\nNEW York\t0\nnew YORK\t1\n")
    lex = Lexicon.read(path, ignore_case=True)
    assert lex.entries == {("new", "york"): frozenset({0, 1})}
    assert Lexicon.read(path).entries == {("NEW", "York"): frozenset({0}),
                                          ("new", "YORK"): frozenset({1})}


@pytest.mark.parametrize("text, line, words", [
    ("Paris\t1\n", 1, "without folds"),                                   # folds, no header
    ("# crftk-lexicon folds=3\nParis\t3\n", 2, "out of range"),            # fold >= K
    ("# crftk-lexicon folds=3\n\nParis\t1,x\n", 3, "bad fold list"),
    ("# crftk-lexicon folds=3\nParis\t1,,2\n", 2, "bad fold list"),
    ("# crftk-lexicon folds=3\nParis\t-1\n", 2, "bad fold list"),
    ("# crftk-lexicon folds=3\nParis\t1;2\n", 2, "bad fold list"),
    ("Paris\n# crftk-lexicon folds=3\n", 2, "before the first entry"),
    ("# crftk-lexicon fold=3\n", 1, "malformed header"),
    ("# crftk-lexicon folds=1\n", 1, "at least 2 folds"),
    ("# crftk-lexicon folds=2\n# crftk-lexicon folds=2\n", 2, "second header"),
    ("Paris\n\t1\n", 2, "without tokens"),
    (b"Paris\nK\xf6ln\n", 2, "UTF-8"),
])
def test_read_errors_name_path_and_line(tmp_path, text, line, words):
    path, err = error_of(tmp_path, text)
    assert err.path == path
    assert err.line == line
    assert words in err.message
    assert str(err).startswith(f"{path}:{line}: ")


def test_from_lines_errors_name_the_source():
    with pytest.raises(CrftkError) as info:
        Lexicon.from_lines(["# crftk-lexicon folds=2", "Paris\t5"], "LOC", path="m.model")
    assert (info.value.path, info.value.line) == ("m.model", 2)


def test_read_missing_file(tmp_path):
    with pytest.raises(CrftkError) as info:
        Lexicon.read(tmp_path / "nope.lex")
    assert info.value.path.endswith("nope.lex")


def test_add_rejects_bad_entries():
    lex = Lexicon("T", n_folds=3)
    for bad in [(), ("New York",), ("",), ("a\tb",)]:
        with pytest.raises(ValueError):
            lex.add(bad)
    with pytest.raises(ValueError):
        lex.add(("Paris",), {3})
    with pytest.raises(ValueError):
        Lexicon("T").add(("Paris",), {0})  # folds in a lexicon without folds
    with pytest.raises(ValueError):
        Lexicon("T", n_folds=1)
    assert len(lex) == 0


# ---------------------------------------------------------------------------
# matching


def test_longest_match_wins():
    lex = lex_of("New York", "New York City", "York")
    toks = "I love New York City and New York".split()
    assert lex.match(toks) == [None, None, "B", "I", "I", None, "B", "I"]
    # the shorter entry is used where the longer one does not fit
    assert lex.match("New York Times".split()) == ["B", "I", None]
    # a lone "York" matches on its own, but not inside the "New York" match
    assert lex.match("York".split()) == ["B"]


def test_adjacent_matches_and_no_overlap():
    lex = lex_of("a b", "b c", "c", "d")
    # "a b" is taken first; "b c" would overlap it, so "c" starts a new match
    assert lex.match(["a", "b", "c", "d"]) == ["B", "I", "B", "B"]
    assert lex.match(["b", "c", "c"]) == ["B", "I", "B"]
    assert lex.match(["d", "d"]) == ["B", "B"]


def test_entry_at_sentence_end_and_max_len():
    lex = lex_of("x y z w", "y z")
    assert lex.max_len == 4
    # the 4-token entry does not fit at the end: fall back to the 2-token one
    assert lex.match(["x", "y", "z"]) == [None, "B", "I"]
    assert lex.match(["q", "x", "y", "z", "w"]) == [None, "B", "I", "I", "I"]
    assert lex.match(["y", "z"]) == ["B", "I"]
    assert lex.match(["z"]) == [None]
    assert lex.match([]) == []
    assert Lexicon("empty").match(["a", "b"]) == [None, None]


def test_partial_prefix_does_not_match():
    lex = lex_of("New York City")
    assert lex.match("New York".split()) == [None, None]
    assert lex.match("New York Town City".split()) == [None, None, None, None]


def test_case_sensitivity():
    sensitive = lex_of("New York")
    assert sensitive.match(["new", "york"]) == [None, None]
    assert sensitive.match(["New", "York"]) == ["B", "I"]
    insensitive = lex_of("New York", ignore_case=True)
    assert insensitive.entries == {("new", "york"): frozenset()}
    assert insensitive.match(["NEW", "york"]) == ["B", "I"]
    assert insensitive.match(["New", "York"]) == ["B", "I"]
    assert ["NEW", "YORK"] in insensitive and ["NEW", "YORK"] not in sensitive


def test_match_after_add_updates_index():
    lex = lex_of("a")
    assert lex.match(["a", "b"]) == ["B", None]
    lex.add(["a", "b"])
    assert lex.match(["a", "b"]) == ["B", "I"]
    assert lex.max_len == 2


def test_match_accepts_tuples_and_leaves_input_alone():
    lex = lex_of("New York", ignore_case=True)
    toks = ["NEW", "York"]
    assert lex.match(tuple(toks)) == ["B", "I"]
    assert toks == ["NEW", "York"]


# ---------------------------------------------------------------------------
# jackknife


def test_jackknife_own_fold_does_not_match():
    lex = lex_of(("Oslo", {2}), ("Rome", {1, 2}), "Paris", n_folds=3)
    toks = ["Oslo", "Rome", "Paris"]
    assert lex.match(toks, fold=2) == [None, "B", "B"]   # Oslo only seen in fold 2
    assert lex.match(toks, fold=1) == ["B", "B", "B"]    # Rome also seen in fold 2
    assert lex.match(toks, fold=0) == ["B", "B", "B"]
    assert lex.match(toks) == ["B", "B", "B"]            # test time: everything


def test_jackknife_falls_back_to_shorter_usable_entry():
    lex = lex_of(("New York City", {0}), ("New York", {1}), ("New", {0, 1}), n_folds=2)
    toks = "New York City".split()
    assert lex.match(toks) == ["B", "I", "I"]
    assert lex.match(toks, fold=1) == ["B", "I", "I"]   # the 3-token entry is from fold 0
    assert lex.match(toks, fold=0) == ["B", "I", None]  # 3 tokens: own fold; 2 tokens: fold 1


def test_jackknife_fold_checks_and_plain_lexicon_ignores_fold():
    lex = lex_of(("a", {0}), n_folds=2)
    with pytest.raises(ValueError):
        lex.match(["a"], fold=2)
    with pytest.raises(ValueError):
        lex.match(["a"], fold=-1)
    assert lex_of("a").match(["a"], fold=5) == ["B"]


def test_fold_of_round_robin():
    assert [fold_of(d, 3) for d in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    with pytest.raises(ValueError):
        fold_of(1, 0)


# ---------------------------------------------------------------------------
# building from labeled data

# IOB1 (CoNLL-2003 style): I- inside a chunk, B- only between two adjacent
# chunks of the same type.  Documents: 0 (two sentences), 1, 2, 3.
IOB1 = """\
-DOCSTART- -X- O O

John NNP I-NP I-PER
Smith NNP I-NP I-PER
visited VBD I-VP O
New NNP I-NP I-LOC
York NNP I-NP I-LOC
. . O O

Paris NNP I-NP I-LOC
Berlin NNP I-NP B-LOC
. . O O

-DOCSTART- -X- O O

Paris NNP I-NP I-LOC
and CC O O
IBM NNP I-NP I-ORG
. . O O

-DOCSTART- -X- O O

New NNP I-NP I-LOC
York NNP I-NP I-LOC
City NNP I-NP I-LOC

-DOCSTART- -X- O O

paris NNP I-NP I-LOC
john NNP I-NP I-PER
smith NNP I-NP B-PER
"""

# The same text in IOB2, only token and tag columns.
IOB2 = """\
-DOCSTART- O

John B-PER
Smith I-PER
visited O
New B-LOC
York I-LOC
. O

Paris B-LOC
Berlin B-LOC
. O

-DOCSTART- O

Paris B-LOC
and O
IBM B-ORG
. O

-DOCSTART- O

New B-LOC
York I-LOC
City I-LOC

-DOCSTART- O

paris B-LOC
john B-PER
smith B-PER
"""


def corpus(tmp_path, text, name="train.txt"):
    return read_corpus(write(tmp_path, text, name))


def keys(lex):
    return {" ".join(k) for k in lex.entries}


@pytest.mark.parametrize("text, scheme", [(IOB1, "iob1"), (IOB1, "auto"),
                                          (IOB2, "iob2"), (IOB2, "auto")],
                         ids=["iob1", "iob1-auto", "iob2", "iob2-auto"])
def test_build_types_and_entries(tmp_path, text, scheme):
    sentences = corpus(tmp_path, text)
    assert [s.doc for s in sentences] == [0, 0, 1, 2, 3]
    lexicons = build_lexicons(sentences, scheme=scheme)
    assert sorted(lexicons) == ["LOC", "ORG", "PER"]
    assert all(lex.name == t and lex.n_folds == 0 for t, lex in lexicons.items())
    assert keys(lexicons["LOC"]) == {"New York", "Paris", "Berlin", "New York City", "paris"}
    assert keys(lexicons["PER"]) == {"John Smith", "john", "smith"}
    assert keys(lexicons["ORG"]) == {"IBM"}
    assert lexicons["LOC"].max_len == 3
    assert all(f == frozenset() for f in lexicons["LOC"].entries.values())


def test_build_wrong_scheme_is_an_error(tmp_path):
    with pytest.raises(CrftkError) as info:
        build_lexicons(corpus(tmp_path, IOB2.replace("B-ORG", "E-ORG")), scheme="iob2")
    assert info.value.line == 18  # "IBM E-ORG" in the sentence starting on line 16


def test_build_folds_by_document(tmp_path):
    sentences = corpus(tmp_path, IOB1)
    lexicons = build_lexicons(sentences, label_col=3, n_folds=2)
    loc = lexicons["LOC"]
    assert loc.n_folds == 2
    # documents 0, 1, 2, 3 -> folds 0, 1, 0, 1
    assert loc.entries == {
        ("New", "York"): frozenset({0}),
        ("Paris",): frozenset({0, 1}),
        ("Berlin",): frozenset({0}),
        ("New", "York", "City"): frozenset({0}),
        ("paris",): frozenset({1}),
    }
    assert lexicons["ORG"].entries == {("IBM",): frozenset({1})}
    # a fold-0 document does not see its own New York, a fold-1 one does
    assert loc.match("New York".split(), fold=0) == [None, None]
    assert loc.match("New York".split(), fold=1) == ["B", "I"]
    assert loc.match(["Paris"], fold=0) == ["B"]


def test_build_ignore_case_and_min_count(tmp_path):
    sentences = corpus(tmp_path, IOB2)
    lexicons = build_lexicons(sentences, ignore_case=True, min_count=2, n_folds=3)
    # paris x3 (docs 0, 1, 3 -> folds 0, 1, 0); "new york" x1, "new york city" x1 dropped
    assert lexicons["LOC"].entries == {("paris",): frozenset({0, 1})}
    assert lexicons["LOC"].ignore_case
    assert lexicons["PER"].entries == {}   # the type stays, with no entries
    assert lexicons["ORG"].entries == {}
    plain = build_lexicons(sentences, min_count=2)
    assert keys(plain["LOC"]) == {"Paris"}  # case-sensitive: "paris" counted apart


def test_build_option_errors(tmp_path):
    sentences = corpus(tmp_path, IOB2)
    for kw in [{"n_folds": 1}, {"n_folds": -1}, {"min_count": 0}]:
        with pytest.raises(CrftkError):
            build_lexicons(sentences, **kw)
    with pytest.raises(CrftkError) as info:
        build_lexicons(sentences, label_col=5)
    assert info.value.line == 3


def test_build_in_memory_sentences():
    sentences = [Sentence([["A", "B-X"], ["b", "I-X"]], doc=0),
                 Sentence([["A", "B-X"], ["b", "I-X"]], doc=1)]
    lex = build_lexicons(sentences, n_folds=2)["X"]
    assert lex.entries == {("A", "b"): frozenset({0, 1})}
    assert lex.match(["A", "b"], fold=0) == ["B", "I"]


def test_write_lexicons_and_read_back(tmp_path):
    lexicons = build_lexicons(corpus(tmp_path, IOB1), n_folds=2)
    out = tmp_path / "lex"              # made: its parent exists
    paths = write_lexicons(lexicons, out)
    assert paths == [str(out / "LOC.lex"), str(out / "ORG.lex"), str(out / "PER.lex")]
    for path in paths:
        back = Lexicon.read(path)
        assert back.name == os.path.basename(path)[:-4]
        assert back.entries == lexicons[back.name].entries
        assert back.n_folds == 2
    with pytest.raises(CrftkError):
        write_lexicons({"A/B": Lexicon("A/B")}, out)
    with pytest.raises(CrftkError):
        write_lexicons({"": Lexicon("")}, out)


def test_lexicon_command(tmp_path):
    a = write(tmp_path, IOB2, "a.txt")
    b = write(tmp_path, "Oslo B-LOC\n", "b.txt")
    logged = []
    summary = lexicon_command([a, b], tmp_path / "out", label_col=-1, scheme="iob2", folds=2,
                              ignore_case=False, min_count=1, log=logged.append)
    assert summary["sentences"] == 6
    assert summary["documents"] == 5  # b.txt is a document of its own
    assert summary["lexicons"]["LOC"]["entries"] == 6
    assert summary["lexicons"]["ORG"]["entries"] == 1
    assert len(logged) == 3 and logged[0].startswith("LOC: 6 entries")
    loc = Lexicon.read(summary["lexicons"]["LOC"]["path"])
    assert loc.entries[("Oslo",)] == frozenset({0})  # document 4 -> fold 0


def test_a_missing_parent_directory_is_refused_not_created(tmp_path):
    # as every other output: the directory must exist (here: the output directory's parent),
    # refused before any input is read
    a = write(tmp_path, IOB2, "a.txt")
    with pytest.raises(CrftkError, match=r"lex/sub: cannot write the lexicons: directory .*lex does not exist"):
        lexicon_command([a, tmp_path / "missing.txt"], tmp_path / "lex" / "sub")
    with pytest.raises(CrftkError, match="cannot write the lexicons: directory"):
        write_lexicons(build_lexicons(corpus(tmp_path, IOB1)), tmp_path / "lex" / "sub")
    assert not (tmp_path / "lex").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(CrftkError, match="file: cannot write the lexicons: not a directory"):
        lexicon_command([a], tmp_path / "file")


def test_lexicon_command_errors_name_the_file(tmp_path):
    a = write(tmp_path, IOB2, "a.txt")
    b = write(tmp_path, "Oslo E-LOC\n", "b.txt")
    with pytest.raises(CrftkError) as info:
        lexicon_command([a, b], tmp_path / "out", scheme="iob2", log=None)
    assert (info.value.path, info.value.line) == (b, 1)
    with pytest.raises(CrftkError):
        lexicon_command([], tmp_path / "out")
    one_column = write(tmp_path, "Oslo\n", "c.txt")
    with pytest.raises(CrftkError) as info:
        lexicon_command([one_column], tmp_path / "out")
    assert info.value.path == one_column


def test_a_chunk_type_that_cannot_name_a_file_is_refused_at_its_line(tmp_path):
    # found by the fuzz suite: the error named neither file nor line, and came after reading all
    a = write(tmp_path, "the B-NP\nfox I-NP\n\nOslo B-LOC/0.25\n", "a.txt")
    with pytest.raises(CrftkError, match="cannot name a lexicon file") as info:
        lexicon_command([a], tmp_path / "out", log=None)
    assert (info.value.path, info.value.line) == (a, 4)
    assert not (tmp_path / "out").exists()


def test_input_without_chunks_warns_and_creates_nothing(tmp_path):
    empty = write(tmp_path, "", "empty.txt")
    outside = write(tmp_path, "the O\nfox O\n", "outside.txt")
    for path in (empty, outside):
        logged = []
        summary = lexicon_command([path], tmp_path / "out", log=logged.append)
        assert summary["lexicons"] == {}
        assert logged[-1].startswith("crftk: warning: no chunks found in")
        assert not (tmp_path / "out").exists()
