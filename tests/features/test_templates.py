import pytest

from crftk.errors import CrftkError
from crftk.features.templates import MAX_COLUMNS, MAX_LENGTH, MAX_ROW, Macro, parse_template, padding_value, read_template
from corpora import REPO

CRFPP = """# Unigram
U00:%x[-2,0]
U01:%x[0,0]/%x[1,1]

U02:pre-%x[0,0]-mid-%x[-1,1]-post

# Bigram
B
B01:%x[0,1]
"""


def test_parses_crfpp_lines_macros_and_literals():
    t = parse_template(CRFPP)
    assert [l.text for l in t.unigrams] == ["U00:%x[-2,0]", "U01:%x[0,0]/%x[1,1]",
                                           "U02:pre-%x[0,0]-mid-%x[-1,1]-post"]
    assert t.unigrams[1].macros == [Macro(0, 0), Macro(1, 1)]
    assert t.unigrams[2].parts == ["U02:pre-", Macro(0, 0), "-mid-", Macro(-1, 1), "-post"]
    assert t.label_bigram
    assert [l.text for l in t.bigrams] == ["B01:%x[0,1]"]
    assert t.columns == [0, 1]
    assert t.max_offset == 2


def test_render_builds_crfpp_feature_strings():
    line = parse_template("U02:pre-%x[0,0]-mid-%x[-1,1]-post").unigrams[0]
    assert line.render(["cat", "DT"]) == "U02:pre-cat-mid-DT-post"


def test_line_numbers_counted_with_comments_and_blanks():
    t = parse_template(CRFPP)
    assert [l.lineno for l in t.unigrams] == [2, 3, 5]
    assert t.bigrams[0].lineno == 9


def test_no_b_line_means_no_label_bigram():
    assert not parse_template("U00:%x[0,0]\n").label_bigram


def test_star_line_makes_both_kinds():
    t = parse_template("*:%x[0,0]\n")
    assert [l.text for l in t.unigrams] == ["U:%x[0,0]"]
    assert [l.text for l in t.bigrams] == ["B:%x[0,0]"]
    assert t.unigrams[0].render(["a"]) == "U:a"


def test_literal_only_unigram_is_a_constant_attribute():
    t = parse_template("U99:bias\n")
    assert t.unigrams[0].macros == []
    assert t.unigrams[0].render([]) == "U99:bias"


def test_duplicate_lines_are_merged_like_crfpp():
    t = parse_template("U00:%x[0,0]\nU00:%x[0,0]\n")
    assert len(t.unigrams) == 1


def test_whitespace_inside_macro_and_plus_sign_accepted():
    t = parse_template("U00:%x[ +1 , 2 ]\n")
    assert t.unigrams[0].macros == [Macro(1, 2)]


@pytest.mark.parametrize("text,line,needle", [
    ("U00:%x[0,0]\nU01:%x[0]\n", 2, "bad macro"),
    ("U00:%x[a,0]\n", 1, "bad macro"),
    ("U00:%x[0,-1]\n", 1, "bad macro"),
    ("\n\nU00:%y[0,0]\n", 3, "unknown macro"),
    ("U00:%x[0,0]\nX00:%x[0,0]\n", 2, "must start with U"),
    ("U00:%x[0,0\n", 1, "malformed macro"),
])
def test_bad_lines_name_the_line(text, line, needle):
    with pytest.raises(CrftkError) as e:
        parse_template(text, "t.tmpl")
    assert str(e.value).startswith(f"t.tmpl:{line}: ")
    assert needle in str(e.value)


def test_check_columns_rejects_missing_and_label_columns():
    t = parse_template("U00:%x[0,0]\nU01:%x[0,3]\n", "t.tmpl")
    with pytest.raises(CrftkError, match=r"t.tmpl:2: template reads column 3 but the data"):
        t.check_columns(3, 2)
    t = parse_template("U00:%x[0,2]\n", "t.tmpl")
    with pytest.raises(CrftkError, match="gold label column"):
        t.check_columns(3, 2)
    parse_template("U00:%x[0,1]\n").check_columns(3, 2)


def test_padding_values_are_crfpp_strings():
    assert padding_value(-1) == "_B-1"
    assert padding_value(-3) == "_B-3"
    assert padding_value(2) == "_B+2"


def test_read_template_errors(tmp_path):
    with pytest.raises(CrftkError, match="no such file"):
        read_template(tmp_path / "missing.tmpl")
    bad = tmp_path / "bad.tmpl"
    bad.write_bytes(b"U00:%x[0,0]\xff\n")
    with pytest.raises(CrftkError, match="not valid UTF-8"):
        read_template(bad)


def test_shipped_chunking_template_parses():
    t = read_template(REPO / "templates" / "chunking-crfpp.tmpl")
    assert len(t.unigrams) == 19 and t.label_bigram and not t.bigrams
    assert t.columns == [0, 1]


# Found by fuzzing: str.isdigit() accepts these, int() does not (a ValueError traceback).
@pytest.mark.parametrize("macro", [
    "%x[0,\u00b2]",            # superscript two
    "%x[0,\u2460]",            # circled digit one
    "%pre[0,0,\u00b2]",
    "%ngram[0,0,1,\u00b2]",
    "%x[\u00b2,0]",
    "%x[\u0661,0]",            # Arabic-Indic one: int() takes it; only ASCII digits are allowed
])
def test_non_ascii_digits_are_a_bad_macro_on_its_line(macro):
    with pytest.raises(CrftkError) as e:
        parse_template(f"U00:%x[0,0]\nU01:{macro}\n", "t.tmpl")
    assert str(e.value).startswith("t.tmpl:2: bad macro")


@pytest.mark.parametrize("macro, needle", [
    ("%x[10000000,0]", "row must be an integer from -100 to 100"),     # 3.6 GB of padding values
    ("%x[-101,0]", "row must be an integer from -100 to 100"),
    ("%x[101,0]", "row must be an integer from -100 to 100"),
    ("%x[" + "9" * 5000 + ",0]", "row must be"),     # more digits than int() converts
    ("%x[0,10000]", "column must be an integer from 0 to 9,999"),
    ("%x[0,99999999999999999999]", "column must be"),
    ("%pre[0,0,0]", "lengths must be integers from 1 to 100"),
    ("%suf[0,0,101]", "lengths must be integers from 1 to 100"),
    ("%ngram[0,0,1,100000000]", "lengths must be integers from 1 to 100"),   # hung
    ("%ngram[0,0,0,3]", "lengths must be integers from 1 to 100"),
    ("%^x[-300000000,0]", "row must be"),
])
def test_macro_numbers_are_bounded(macro, needle):
    with pytest.raises(CrftkError) as e:
        parse_template(f"# comment\nU01:{macro}\n", "t.tmpl")
    assert str(e.value).startswith("t.tmpl:2: bad macro")
    assert needle in str(e.value)
    assert len(str(e.value)) < 200


def test_macro_numbers_at_their_bounds_parse():
    t = parse_template(f"U00:%x[{-MAX_ROW},{MAX_COLUMNS - 1}]\nU01:%x[+{MAX_ROW},0]\n"
                       f"U02:%pre[0,0,{MAX_LENGTH}]\nU03:%ngram[0,0,1,{MAX_LENGTH}]\n")
    assert t.max_offset == MAX_ROW == 100
    assert t.macros[0] == Macro(-100, MAX_COLUMNS - 1)
    assert t.macros[3].args == (1, MAX_LENGTH)


def test_a_byte_order_mark_is_accepted_like_in_conll_files(tmp_path):
    path = tmp_path / "bom.tmpl"
    path.write_bytes("\ufeff".encode("utf-8") + CRFPP.encode("utf-8"))
    plain = parse_template(CRFPP)
    for t in (read_template(path), parse_template("\ufeff" + CRFPP)):
        assert [tl.text for tl in t.lines] == [tl.text for tl in plain.lines]
        assert t.label_bigram and t.text == CRFPP
    # only at the start: anywhere else it is still an error
    with pytest.raises(CrftkError, match="must start with U"):
        parse_template("U00:%x[0,0]\n\ufeffU01:%x[0,1]\n")


def test_a_lone_carriage_return_does_not_end_a_line(tmp_path):
    # found by the fuzz suite: b"\r\x00U" was reported at line 2 of a file of one line
    path = tmp_path / "t.tmpl"
    path.write_bytes(b"U00:%x[0,0]\r\nU01:%x[1,0]\r\n\r\x00U\n")
    with pytest.raises(CrftkError) as info:
        read_template(path)
    assert info.value.line == 3
    path.write_bytes(b"U00:%x[0,0]\r\nB\r\n")
    assert [str(line) for line in read_template(path).lines] == [
        str(line) for line in parse_template("U00:%x[0,0]\nB\n").lines]
