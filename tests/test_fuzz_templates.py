"""Fuzz: the template parser, and training with what it accepts.

Whatever the text, parsing raises nothing but CrftkError naming the template
file and the line at fault; what it accepts holds only numbers within the
documented bounds, reads the same with a byte order mark, and trains (or fails
with a CrftkError); `crftk train` with any template ends in one line and leaves
no model behind.
"""

from hypothesis import assume, example, given
from hypothesis import strategies as st

import crftk.features.templates
import fuzz_strategies as fz
import pytest
from crftk.errors import CrftkError
from crftk.features.templates import parse_template, read_template

MAX_ROW = crftk.features.templates.MAX_ROW
MAX_COLUMNS = crftk.features.templates.MAX_COLUMNS
MAX_LENGTH = getattr(crftk.features.templates, "MAX_LENGTH", 100)

ordinary_numbers = st.sampled_from(fz.ASCII_NUMBERS + fz.BROKEN_NUMBERS + [str(MAX_ROW), str(-MAX_ROW)])
any_numbers = st.sampled_from(fz.ASCII_NUMBERS + fz.BROKEN_NUMBERS + fz.ODD_NUMBERS)


def _lines(text):
    """Lines of a template as a text editor counts them (\n, \r\n or \r ends one)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").count("\n") + 1


def _parse(text, path):
    try:
        return parse_template(text, path), None
    except CrftkError as e:
        return None, e


def _shape(tmpl):
    """What a template says, as comparable values."""
    return ([(l.kind, l.text, tuple(map(str, l.parts))) for l in tmpl.lines], tmpl.label_bigram,
            sorted(tmpl.lexicons))


@pytest.mark.fuzz(weight=3)
@given(text=fz.template_texts(ordinary_numbers), as_bytes=st.booleans())
@example(text='U%t[0,0,"a{99999999999999999}"]\n', as_bytes=False)    # re.compile: OverflowError
@example(text="U\x0b\x00\n", as_bytes=True)                          # \x0b is no line break
@fz.counted
def test_parser_raises_only_crftk_errors_naming_the_line(fuzz_dir, text, as_bytes):
    path = fuzz_dir / "t.tmpl"
    if as_bytes:     # through the file: encoding and line ends as a user's file has them
        fz.write(path, text)
        try:
            tmpl = read_template(path)
        except CrftkError as e:
            fz.assert_names(e, path)
            assert e.line <= _lines(text), (str(e), text)
            return
    else:
        tmpl, e = _parse(text, str(path))
        if e is not None:
            fz.assert_names(e, path)
            assert e.line <= _lines(text), (str(e), text)
            return
    for line in tmpl.lines:
        assert line.kind in "UB" and 1 <= line.lineno <= _lines(text)
    if tmpl.lines:
        assert str(tmpl.lines[0].parts[0])[:1] in "UB"


@pytest.mark.fuzz(weight=2)
@given(text=fz.template_texts(any_numbers))
@example(text="U:%x[0,\u00b2]\n")              # int() refuses what str.isdigit() accepts
@example(text="U:%x[100000000,0]\n")            # 2 x 10^8 padding values per vocabulary
@example(text="U:%ngram[0,0,1,100000000]\n")    # a pass over every word per length
@fz.counted
def test_odd_numbers_are_rejected_with_the_line_or_bounded(fuzz_dir, text):
    path = str(fuzz_dir / "t.tmpl")
    try:
        tmpl = parse_template(text, path)
    except CrftkError as e:
        fz.assert_names(e, path)
        assert e.line <= _lines(text), (str(e), text)
        return
    for m in tmpl.macros:
        assert -MAX_ROW <= m.row <= MAX_ROW, (m, text)
        assert 0 <= m.col < MAX_COLUMNS, (m, text)
        if m.kind in ("pre", "suf", "ngram"):
            assert all(1 <= n <= MAX_LENGTH for n in m.args), (m, text)


@pytest.mark.fuzz(weight=1)
@given(text=fz.template_texts(ordinary_numbers))
@example(text="U00:%x[0,0]\nB\n")
@fz.counted
def test_a_byte_order_mark_changes_nothing(fuzz_dir, text):
    assume(not text.startswith("\ufeff"))     # a second mark is text, and an error
    plain, plain_error = _parse(text, "t.tmpl")
    marked, marked_error = _parse("\ufeff" + text, "t.tmpl")
    if plain_error is not None or marked_error is not None:
        assert str(marked_error) == str(plain_error)
    else:
        assert _shape(marked) == _shape(plain)


@pytest.mark.fuzz(weight=1)
@given(data=st.binary(max_size=40), text=fz.template_texts(ordinary_numbers), at=st.integers(0, 400),
       bom=st.booleans())
@example(data=b"\xff", text="U00:%x[0,0]\nU01:%x[1,0]\n", at=14, bom=False)
@fz.counted
def test_undecodable_template_names_the_line(fuzz_dir, data, text, at, bom):
    raw = text.encode("utf-8")
    at = min(at, len(raw))
    raw = (b"\xef\xbb\xbf" if bom else b"") + raw[:at] + data + raw[at:]
    path = fz.write(fuzz_dir / "t.tmpl", raw)
    try:
        read_template(path)
    except CrftkError as e:
        fz.assert_names(e, path)
        assert e.line <= raw.count(b"\n") + 1, str(e)


@pytest.mark.fuzz(weight=1)
@given(text=fz.template_texts(ordinary_numbers), width=st.sampled_from([2, 3]),
       options=st.fixed_dictionaries({}, optional={"min_freq": st.integers(1, 3),
                                                   "feature_set": st.sampled_from(["supported", "complete"]),
                                                   "order": st.sampled_from([1, 2]),
                                                   "model_type": st.sampled_from(["crf", "memm"])}))
@fz.counted
def test_what_the_parser_accepts_trains(sandbox, fuzz_dir, text, width, options):
    with fz.scratch(fuzz_dir) as d:
        fz.write(d / "city.lex", fz.CITY_LEXICON)
        path = fz.write(d / "t.tmpl", text)
        try:
            read_template(path)
        except CrftkError:
            return      # the parser's errors: the properties above
        if options.get("order") == 2 and options.get("model_type") == "memm":
            options.pop("model_type")
        rows = [[row[:width] for row in s] for s in fz.TRAIN]
        try:
            size, finite = sandbox.call("fit", rows, path, max_iter=3, threads=1, **options)
        except CrftkError as e:
            if e.path is not None and e.path.endswith(".lex"):     # a declared lexicon missing
                assert e.path.startswith(str(d)), str(e)
                return
            # a macro reading a column the data lacks, or the label column: the template's line
            fz.assert_names(e, path)
            return
        assert finite and size >= 0


@pytest.mark.fuzz(weight=0.5)
@given(text=fz.template_texts(ordinary_numbers), with_lexicon=st.booleans())
@fz.counted
def test_train_command_with_any_template_ends_in_one_line(sandbox, fuzz_dir, text, with_lexicon):
    with fz.scratch(fuzz_dir) as d:
        if with_lexicon:
            fz.write(d / "city.lex", fz.CITY_LEXICON)
        template = fz.write(d / "t.tmpl", text)
        train = fz.write(d / "train.txt", fz.conll_text(fz.TRAIN))
        out = d / "out"
        out.mkdir()
        result = sandbox.call("cli", ["train", "-q", "-t", template, "-m", out / "m.model", "--max-iter", 2,
                                      "-p", 1, train])
        fz.check_cli(result, out, [])
        if result["exit_code"] == 0:
            assert fz.listing(out) == ["m.model"]
        else:
            assert result["exit_code"] == 1, result["stderr"]
            # the template's line, or a lexicon it declares that cannot be read
            assert (f"crftk: error: {template}:" in result["stderr"]
                    or f"crftk: error: {d}/" in result["stderr"] and ".lex: " in result["stderr"]), result["stderr"]
