"""What the fuzz properties share: Hypothesis strategies, a tiny corpus, checks, counters.

Budgets: the Hypothesis profile (tests/conftest.py: "ci" by default, "fuzz" for
``make fuzz``) gives the fuzz suite a total number of examples, spread over the
collected properties by their weight (``@pytest.mark.fuzz(weight=W)``).
``counted`` counts the examples a property's body actually ran, and how many of
them failed; tests/conftest.py prints the counts at the end of a run.
"""

import collections
import contextlib
import functools
import os
import tempfile
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.errors import StopTest, UnsatisfiedAssumption

from crftk.errors import CrftkError

#: Overrides the profile's total number of examples (e.g. for a medium-length run).
ENV_EXAMPLES = "CRFTK_FUZZ_EXAMPLES"

#: nodeid -> examples run, examples that failed, examples rejected by assume();
#: ``CURRENT`` is the nodeid of the test running now (set by conftest).
COUNTS = collections.Counter()
FAILURES = collections.Counter()
REJECTED = collections.Counter()
CURRENT = [None]


def counted(fn):
    """Count each run of a property's body (innermost decorator, under @given).

    An example that assume() rejects is not a case (Hypothesis draws another);
    shrinking a failure runs the body again, so a failed property counts its
    shrinking attempts as cases too, and each failing one as a failure.
    """
    @functools.wraps(fn)
    def body(*args, **kwargs):
        key = CURRENT[0] or fn.__name__
        try:
            result = fn(*args, **kwargs)
        except (UnsatisfiedAssumption, StopTest):     # not a case: Hypothesis draws another
            REJECTED[key] += 1
            raise
        except BaseException:
            COUNTS[key] += 1
            FAILURES[key] += 1
            raise
        COUNTS[key] += 1
        return result
    return body


# ---------------------------------------------------------------------------
# a tiny corpus (word, POS, chunk) that the models of the properties are trained on

TRAIN = [
    [("The", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sat", "VBD", "B-VP"), ("on", "IN", "B-PP"),
     ("the", "DT", "B-NP"), ("mat", "NN", "I-NP"), (".", ".", "O")],
    [("A", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("has", "VBZ", "B-VP"), ("barked", "VBN", "I-VP"),
     (".", ".", "O")],
    [("the", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("sat", "VBD", "B-VP"), ("near", "IN", "B-PP"),
     ("a", "DT", "B-NP"), ("tree", "NN", "I-NP"), (".", ".", "O")],
    [("Zürich", "NNP", "B-NP"), ("is", "VBZ", "B-VP"), ("in", "IN", "B-PP"), ("Switzerland", "NNP", "B-NP"),
     (",", ",", "O"), ("1,000", "CD", "B-NP"), ("km", "NNS", "I-NP"), (".", ".", "O")],
    [("Birds", "NNS", "B-NP"), ("sing", "VBP", "B-VP"), ("in", "IN", "B-PP"), ("the", "DT", "B-NP"),
     ("garden", "NN", "I-NP"), (",", ",", "O"), ("and", "CC", "O"), ("cats", "NNS", "B-NP"),
     ("sleep", "VBP", "B-VP"), (".", ".", "O")],
]
LABELS = sorted({row[2] for s in TRAIN for row in s})
WORDS = sorted({row[0] for s in TRAIN for row in s})
TAGS = sorted({row[1] for s in TRAIN for row in s})

#: Templates of the session's models: first mentions make tagging batch by document,
#: B01 adds observation-conditioned transitions, shape and n-grams are multi-valued.
RICH_TEMPLATE = """\
# fuzz model
Uw0:%x[0,0]
Uw-1w0:%x[-1,0]/%x[0,0]
Up0:%x[0,1]
Up-1p+1:%x[-1,1]/%x[1,1]
Us:%shape[0,0]
Usuf:%suf[0,0,2]
Ung:%ngram[0,0,1,2]
Ut:%t[0,0,"^[A-Z]"]
Ufm:%^x[-1,1]
@lexicon CITY city.lex
Ulex:%lex[0,CITY]
B
B01:%x[0,1]
"""
PLAIN_TEMPLATE = "U00:%x[0,0]\nU01:%x[-1,1]/%x[0,1]\nB\n"
#: The newer kinds' templates: a POS stage reads words only, a chunk stage words and tags.
POS_TEMPLATE = "U0:%x[0,0]\nU1:%x[-1,0]\nB\n"
CHUNK_TEMPLATE = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]/%x[0,1]\nB\n"
CITY_LEXICON = "Zürich\nSwitzerland\nNew York\n"


class TrainedModel:
    """A session model: its name, the Model, its file and its bytes."""

    def __init__(self, name, model, path, data):
        self.name, self.model, self.path, self.data = name, model, path, data

    def __repr__(self):
        return f"<{self.name} model>"


@contextlib.contextmanager
def scratch(parent):
    """A fresh empty directory under ``parent`` for one example, removed after it."""
    with tempfile.TemporaryDirectory(dir=parent) as d:
        yield Path(d)


def conll_text(sentences, sep=" ", columns=None):
    out = []
    for s in sentences:
        for row in s:
            out.append(sep.join(row if columns is None else [row[c] for c in columns]) + "\n")
        out.append("\n")
    return "".join(out)


def write(path, data):
    path = Path(path)
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------
# CoNLL files

#: ASCII whitespace that separates columns, and characters that look like it but do not.
SEPARATORS = [" ", "\t", "  ", " \t ", "\x0b", "\x0c", "\x1c", "\x1f"]
LOOKALIKES = ["\u00a0", "\u2003", "\u3000", "\u200b", "\ufeff", "\x85", "\u2028"]
LINE_ENDS = ["\n", "\r\n", "\r", ""]

words = st.one_of(
    st.sampled_from(WORDS + TAGS + LABELS + ["B-X", "I-", "-", "#", "_B-1", "-X-", "0.5", "B-NP/0.25"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters=" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"),
            min_size=1, max_size=8),
    st.builds(lambda w, c: w + c, st.sampled_from(WORDS), st.sampled_from(LOOKALIKES)),
    st.just("x" * 300),
)


@st.composite
def token_lines(draw, n_columns=None):
    n = draw(st.sampled_from([1, 2, 3, 3, 3, 4])) if n_columns is None else n_columns
    fields = draw(st.lists(words, min_size=n, max_size=n))
    seps = draw(st.lists(st.sampled_from(SEPARATORS), min_size=n - 1, max_size=n - 1))
    line = fields[0] + "".join(s + f for s, f in zip(seps, fields[1:]))
    if draw(st.booleans()):
        line = draw(st.sampled_from(["", " ", "\t"])) + line + draw(st.sampled_from(["", " ", "\t "]))
    return line


special_lines = st.sampled_from([
    "", "", "", " ", "\t", "-DOCSTART- -X- -X- O", "-DOCSTART-", "-DOCSTART- -X- O", "# prob 0.5",
    "# nbest 0 0.25", "# nbest 1", "# # O", "#", "# prob", "  -DOCSTART-", "-DOCSTARTX y z",
    "\ufeffThe DT B-NP",
])


@st.composite
def conll_files(draw, n_columns=None, max_lines=25):
    """The bytes of a CoNLL-like file: token lines (mostly of one column count), blank,
    document and annotation lines, odd separators and line ends, BOMs, invalid UTF-8."""
    width = draw(st.sampled_from([2, 3, 3, 3])) if n_columns is None else n_columns
    line = st.one_of(token_lines(width), token_lines(width), token_lines(width), special_lines,
                     token_lines())
    lines = draw(st.lists(line, max_size=max_lines))
    ends = draw(st.lists(st.sampled_from(LINE_ENDS[:2]), min_size=len(lines), max_size=len(lines)))
    if lines and draw(st.booleans()):
        ends[-1] = draw(st.sampled_from(LINE_ENDS))
    data = "".join(a + b for a, b in zip(lines, ends)).encode("utf-8")
    if draw(st.integers(0, 4)) == 0:
        data = b"\xef\xbb\xbf" + data
    for _ in range(draw(st.sampled_from([0, 0, 0, 1, 2]))):
        at = draw(st.integers(0, len(data)))
        junk = draw(st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\xed\xa0\x80", b"\x00", b"\r", b"\n\n",
                                     b"\xef\xbb\xbf"]))
        data = data[:at] + junk + data[at:]
    return data


_ASCII_SPACE = {c: " " for c in range(128) if chr(c).isspace()}


def fields(text):
    """The columns of a line as crftk splits it: on ASCII whitespace only."""
    return [x for x in text.translate(_ASCII_SPACE).split(" ") if x]


def reference_tokens(data):
    """The token lines of a file as crftk reads it (no errors expected): lists of fields."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    out = []
    for raw in data.split(b"\n"):
        text = raw.decode("utf-8")
        row = fields(text)
        if not row or row[0].startswith("-DOCSTART-"):
            continue
        if text.startswith("# ") and len(row) > 1 and row[1] in ("prob", "nbest"):
            continue
        out.append(row)
    return out


# ---------------------------------------------------------------------------
# templates

#: Numbers as a template may spell them: ordinary, signed, huge, non-ASCII digits.
ASCII_NUMBERS = ["0", "1", "2", "-1", "-2", "+1", "3", "00", "-0", "7"]
ODD_NUMBERS = ["10" * 15, "-" + "9" * 30, str(2**31), str(2**63), str(-2**63 - 1), "\u00b2", "\u2460", "\u0663",
               "\uff11", "1\u00b2", "\u00b9\u2070"]
BROKEN_NUMBERS = ["", " ", "1.5", "0x1", "a", "1 2", "--1", "1_0", "1e3", "[", "]", '"1"']

REGEXES = ['"^[A-Z]"', '"[0-9]+"', '"a,b"', '"\\\\d"', '"x\\"y"', '"["', '"("', '"a{1,2}"', '"(?i)x"',
           '"]"', '"\\\\"', '""', "noquote", '"unterminated', '"(?P<n>a)"', '"a{99999999999999999}"']
NAMES = ["CITY", "city", "X", "A.b-c", "1bad", "", "CITY2"]


@st.composite
def macros(draw, numbers):
    name = draw(st.sampled_from(["x", "x", "X", "t", "T", "m", "M", "shape", "fshape", "cshape", "pre", "suf",
                                 "ngram", "lex", "y", "xx"]))
    row = draw(numbers)
    col = draw(numbers)
    args = [row]
    if name == "lex":
        args.append(draw(st.sampled_from(NAMES)))
    else:
        args.append(col)
    if name in ("t", "T", "m", "M"):
        args.append(draw(st.sampled_from(REGEXES)))
    elif name in ("pre", "suf"):
        args.append(draw(numbers))
    elif name == "ngram":
        args += [draw(numbers), draw(numbers)]
    if draw(st.integers(0, 9)) == 0:          # a wrong number of arguments
        args = args[:-1] if draw(st.booleans()) else args + [draw(numbers)]
    anchor = "^" if draw(st.integers(0, 5)) == 0 else ""
    sep = draw(st.sampled_from([",", ",", ", ", " ,"]))
    close = draw(st.sampled_from(["]", "]", "]", "", "]]"]))
    return f"%{anchor}{name}[{sep.join(args)}{close}"


@st.composite
def template_lines(draw, numbers):
    kind = draw(st.sampled_from(["U", "U", "U", "B", "*", "X", "u"]))
    ident = draw(st.sampled_from(["", "00", "01:", "w", "p-1:", "é", "%"]))
    parts = draw(st.lists(st.one_of(macros(numbers), st.sampled_from(["/", ":", "-", "%", "[", "]", "\"", "x", "%x",
                                                                        "%x[", "é", " "])),
                          min_size=0, max_size=4))
    return kind + ident + "".join(parts)


other_template_lines = st.sampled_from([
    "", "# comment", "B", "B", "   ", "@lexicon CITY city.lex", "@lexicon CITY city.lex icase",
    "@lexicon CITY missing.lex", "@lexicon city city.lex", "@lexicon", "@lexicon 1bad city.lex",
    "@foo bar", "U", "*", "U:%x[0,0]", "\ufeffU:%x[0,0]",
])


@st.composite
def template_texts(draw, numbers=st.sampled_from(ASCII_NUMBERS), bom=False):
    lines = draw(st.lists(st.one_of(template_lines(numbers), other_template_lines), min_size=1, max_size=8))
    end = draw(st.sampled_from(["\n", "\r\n"]))
    text = end.join(lines) + draw(st.sampled_from([end, ""]))
    if bom:
        text = "\ufeff" + text
    return text


# ---------------------------------------------------------------------------
# option values

NASTY_VALUES = ["nan", "NaN", "inf", "-inf", "+inf", "Infinity", "1e308", "-1e308", "1e309", "1e-320",
                "-1", "-0", "0", "1", "2", "100000", "1" + "0" * 20, "-1" + "0" * 20, str(2**31),
                str(2**63), "", " ", "abc", "1.5", "0x10", "1_000", "\u0663", "\u00b2"]

option_strings = st.one_of(
    st.sampled_from(NASTY_VALUES),
    st.integers(-2**70, 2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


def option_value(text):
    """The Python value a library caller might pass for a CLI string: int, float or the str."""
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


library_values = st.one_of(
    st.sampled_from(NASTY_VALUES).map(option_value),
    st.integers(-2**70, 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([None, True, "", "abc", [], 1.5]),
)


# ---------------------------------------------------------------------------
# checks


def assert_names(error, path, line=True):
    """A CrftkError from reading ``path`` names it, and its line when ``line``."""
    assert isinstance(error, CrftkError)
    assert error.path == os.fsdecode(os.fspath(path)), (str(error), path)
    if line:
        assert isinstance(error.line, int) and error.line >= 1, str(error)


def listing(directory):
    return sorted(p.name for p in Path(directory).iterdir())


def check_cli(result, out_dir=None, before=None):
    """A command ended cleanly: exit 0, or 1/2 with one 'crftk: error:' line and no traceback;
    after a failure ``out_dir`` holds no file it did not hold ``before``."""
    assert result["traceback"] is None, result["traceback"]
    code = result["exit_code"]
    stderr = result["stderr"]
    assert "Traceback" not in stderr, stderr
    if code == 0:
        return
    assert code in (1, 2), (code, stderr)
    errors = [line for line in stderr.splitlines() if line.startswith("crftk: error:")]
    assert len(errors) == 1, stderr
    assert stderr.splitlines()[-1] == errors[0], stderr
    if out_dir is not None:
        assert listing(out_dir) == before, (stderr, listing(out_dir), before)
