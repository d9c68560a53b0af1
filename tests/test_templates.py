import pytest

from crftk.errors import CrftkError
from crftk.templates import Macro, parse_template, padding_value, read_template

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
    from pathlib import Path
    t = read_template(Path(__file__).parent.parent / "templates" / "chunking-crfpp.tmpl")
    assert len(t.unigrams) == 19 and t.label_bigram and not t.bigrams
    assert t.columns == [0, 1]
