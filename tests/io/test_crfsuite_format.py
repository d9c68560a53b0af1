"""CRFsuite's data files: its frontend's rules (tab fields, escapes, NAME:VALUE, blank lines), and
one-line errors naming the file and line."""

import io

import pytest

from crftk.errors import CrftkError
from crftk.features.attributes import flatten
from crftk.io.crfsuite import read_crfsuite, write_crfsuite


def read(tmp_path, text):
    path = tmp_path / "data.crfsuite"
    path.write_text(text, encoding="utf-8")
    return read_crfsuite(path)


def tokens(data):
    values = data.values.tolist() if data.values is not None else [1.0] * len(data.names)
    return [(data.labels[t], list(zip(data.names[data.tok_ptr[t]:data.tok_ptr[t + 1]],
                                      values[data.tok_ptr[t]:data.tok_ptr[t + 1]])))
            for t in range(data.n_tokens)]


def test_fields_values_escapes_and_sequences(tmp_path):
    text = ("B-NP\tw=He\tlen:2\tpos\\:PRP\tempty:\n"
            "I-NP\t\tx\\\\y\ta\\\\:0.5\tb\\x:3\n"
            "\n\n"
            "O\n"
            "\t\t\n"                                  # tabs alone: no token
            "O\tz\r\n")
    data = read(tmp_path, text)
    assert data.sent_ptr.tolist() == [0, 2, 4]
    assert tokens(data) == [
        ("B-NP", [("w=He", 1.0), ("len", 2.0), ("pos:PRP", 1.0), ("empty", 1.0)]),
        ("I-NP", [("x\\y", 1.0), ("a\\", 0.5), ("b\\x", 3.0)]),
        ("O", []),
        ("O", [("z", 1.0)]),
    ]
    assert data.lines.tolist() == [1, 2, 5, 7]


def test_binary_files_store_no_values(tmp_path):
    assert read(tmp_path, "A\tx\ty:1\tz:1.0\n").values is None


def test_weight_declarations_of_one_are_taken(tmp_path):
    assert tokens(read(tmp_path, "@weight:1\tA\tx\n")) == [("A", [("x", 1.0)])]


@pytest.mark.parametrize("text, line, message", [
    ("A\tx\n\nB\tx:abc\n", 3, "the value 'abc' is not a number"),
    ("A\tx:nan\n", 1, "is not a finite number"),
    ("A\tx\nB\tx:1:2\n", 2, "two unescaped colons"),
    ("@weight:2\tA\tx\n", 1, "sequence weights"),
    ("@group:1\tA\tx\n", 1, "unknown declaration '@group'"),
])
def test_bad_lines_are_one_line_errors_with_file_and_line(tmp_path, text, line, message):
    with pytest.raises(CrftkError, match=message) as e:
        read(tmp_path, text)
    assert e.value.line == line and e.value.path.endswith("data.crfsuite")


def test_not_utf8_names_the_line(tmp_path):
    path = tmp_path / "bad.crfsuite"
    path.write_bytes(b"A\tx\n\nB\t\xff\n")
    with pytest.raises(CrftkError, match="not valid utf-8") as e:
        read_crfsuite(path)
    assert e.value.line == 3


def test_writing_and_reading_back_gives_the_same_attributes(tmp_path):
    data = flatten([[{"w": "a:b", "back": "c\\", "v": 0.25, "f": False}, ["plain"]]], [["A:1", "B"]])
    out = io.StringIO()
    write_crfsuite(data, out)
    back = read(tmp_path, out.getvalue())
    assert tokens(back) == tokens(data)


def test_a_line_past_the_limit_is_an_error_not_an_endless_read(tmp_path):
    from crftk.io.conll import set_max_line_bytes
    path = tmp_path / "zeros.crfsuite"
    path.write_bytes(b"A\tx\n" + b"\0" * 5000)       # as /dev/zero: a line that never ends
    previous = set_max_line_bytes(1000)
    try:
        with pytest.raises(CrftkError, match="a line of more than 1,000 bytes") as e:
            read_crfsuite(path)
    finally:
        set_max_line_bytes(previous)
    assert e.value.line == 2


@pytest.mark.parametrize("text, line, message", [
    ("Confidence NN B-NP\nin IN B-PP\n", 1, "holds white space .* is this a CoNLL file"),
    ("A\tx\n:B\ty\n", 2, "an empty label"),
])
def test_labels_of_another_format_are_refused_at_their_line(tmp_path, text, line, message):
    with pytest.raises(CrftkError, match=message) as e:
        read(tmp_path, text)
    assert e.value.line == line
