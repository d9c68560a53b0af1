"""Tests for crftk.io.conll: reading, batching and writing CoNLL column files (the atomic writer: test_atomic.py)."""

import io
import itertools
import os
import sys
import threading

import pytest

from crftk.io.atomic import AtomicWriter
from crftk.io.conll import (
    Layout,
    Sentence,
    chunked,
    format_sentence,
    read_corpus,
    read_sentences,
)
from crftk.errors import CrftkError
from corpora import REPO

# the shared corpora sit beside the repository (../shared/data), or where CONLL2000 says
CONLL2000_TRAIN = os.path.join(
    os.environ.get("CONLL2000", os.path.join(REPO, "..", "shared", "data",
                                             "conll2000")), "train.txt")


def write(tmp_path, content, name="in.txt"):
    path = tmp_path / name
    if isinstance(content, str):
        content = content.encode("utf-8")
    path.write_bytes(content)
    return str(path)


def read(path, **kw):
    return list(read_sentences(path, **kw))


def words(sentences):
    return [s.column(0) for s in sentences]


# --- sentence splitting ---------------------------------------------------


def test_blank_lines_split_sentences(tmp_path):
    path = write(tmp_path, "a A\nb B\n\nc C\n\n\n\nd D\ne E\n")
    sents = read(path)
    assert words(sents) == [["a", "b"], ["c"], ["d", "e"]]
    assert [s.rows for s in sents][0] == [["a", "A"], ["b", "B"]]
    assert [s.line for s in sents] == [1, 4, 8]
    assert all(isinstance(s, Sentence) for s in sents)


def test_whitespace_only_lines_split_sentences(tmp_path):
    path = write(tmp_path, "a A\n   \nb B\n\t \t\nc C\n")
    assert words(read(path)) == [["a"], ["b"], ["c"]]


def test_leading_blank_lines_and_line_numbers(tmp_path):
    path = write(tmp_path, "\n\n  \na A\n")
    (s,) = read(path)
    assert s.line == 4 and s.rows == [["a", "A"]]


def test_tabs_and_mixed_whitespace(tmp_path):
    path = write(tmp_path, "a\tA\t\tX\n  b   B \t Y  \n\t\tc\tC X\n")
    (s,) = read(path)
    assert s.rows == [["a", "A", "X"], ["b", "B", "Y"], ["c", "C", "X"]]


def test_last_sentence_without_trailing_newline(tmp_path):
    path = write(tmp_path, "a A\n\nb B\nc C")
    assert [s.rows for s in read(path)] == [[["a", "A"]], [["b", "B"], ["c", "C"]]]


def test_crlf_line_ends(tmp_path):
    path = write(tmp_path, b"a A\r\nb B\r\n\r\nc C\r\n")
    sents = read(path)
    assert [s.rows for s in sents] == [[["a", "A"], ["b", "B"]], [["c", "C"]]]
    assert sents[1].line == 4


def test_bom_is_ignored(tmp_path):
    path = write(tmp_path, b"\xef\xbb\xbfa A\nb B\n")
    (s,) = read(path)
    assert s.rows == [["a", "A"], ["b", "B"]]


def test_bom_before_docstart(tmp_path):
    path = write(tmp_path, b"\xef\xbb\xbf-DOCSTART- O\n\na A\n")
    (s,) = read(path)
    assert s.rows == [["a", "A"]] and s.doc == 0


def test_empty_file_and_only_blank_lines(tmp_path):
    assert read(write(tmp_path, b"", "e1")) == []
    assert read(write(tmp_path, "\n \n\t\n", "e2")) == []


def test_non_ascii_text_and_non_ascii_spaces(tmp_path):
    # U+00A0 NO-BREAK SPACE and U+3000 are not column separators.
    path = write(tmp_path, "Müller NE\n1\u00a0000 CD\n東京\u3000都 NN\n")
    (s,) = read(path)
    assert s.rows == [["Müller", "NE"], ["1\u00a0000", "CD"], ["東京\u3000都", "NN"]]


def test_sentence_len_and_column(tmp_path):
    (s,) = read(write(tmp_path, "a A x\nb B y\n"))
    assert len(s) == 2
    assert s.column(0) == ["a", "b"]
    assert s.column(2) == ["x", "y"]


# --- documents ------------------------------------------------------------


def test_docstart_documents(tmp_path):
    text = (
        "-DOCSTART- -X- O\n\n"
        "a A O\nb B O\n\n"
        "c C O\n\n"
        "-DOCSTART- -X- O\n\n"
        "d D O\n"
        "-DOCSTART- -X- O\n"  # ends the sentence without a blank line
        "e E O\n\n"
    )
    sents = read(write(tmp_path, text))
    assert words(sents) == [["a", "b"], ["c"], ["d"], ["e"]]
    assert [s.doc for s in sents] == [0, 0, 1, 2]
    assert all("-DOCSTART-" not in s.column(0) for s in sents)
    assert [s.line for s in sents] == [3, 6, 10, 12]


def test_docs_start_at_zero_without_docstart(tmp_path):
    sents = read(write(tmp_path, "a A\n\nb B\n\n-DOCSTART- X\nc C\n"))
    assert [s.doc for s in sents] == [0, 0, 1]


def test_repeated_docstart_makes_no_empty_documents(tmp_path):
    sents = read(write(tmp_path, "-DOCSTART- O\n\n-DOCSTART- O\na A\n\n-DOCSTART- O\n\n-DOCSTART- O\nb B\n"))
    assert [s.doc for s in sents] == [0, 1]


def test_docstart_is_not_checked_for_columns(tmp_path):
    sents = read(write(tmp_path, "-DOCSTART-\n\na A O\n"), n_columns=3)
    assert sents[0].rows == [["a", "A", "O"]]


# --- annotations ----------------------------------------------------------


def test_annotation_lines_are_skipped(tmp_path):
    text = "# prob 0.5\na A O\nb B O\n\n# nbest 1 0.25\n# prob 0.9\nc C O\n"
    sents = read(write(tmp_path, text))
    assert [s.rows for s in sents] == [[["a", "A", "O"], ["b", "B", "O"]], [["c", "C", "O"]]]
    assert [s.line for s in sents] == [2, 7]


def test_annotation_inside_sentence_does_not_split_it(tmp_path):
    (s,) = read(write(tmp_path, "a A O\n# prob 0.5\nb B O\n"))
    assert s.column(0) == ["a", "b"]


def test_hash_word_tokens_are_not_skipped(tmp_path):
    text = "# # O\n#\t#\tO\n#\tprob\tO\nx X O\n"
    (s,) = read(write(tmp_path, text))
    assert s.rows == [["#", "#", "O"], ["#", "#", "O"], ["#", "prob", "O"], ["x", "X", "O"]]


# --- column counts --------------------------------------------------------


def test_first_line_fixes_column_count(tmp_path):
    path = write(tmp_path, "a A O\nb B O\n\nc C\n")
    with pytest.raises(CrftkError) as info:
        read(path)
    assert str(info.value) == f"{path}:4: expected 3 columns, found 2"
    assert info.value.path == path and info.value.line == 4


def test_n_columns_int(tmp_path):
    path = write(tmp_path, "a A\nb B\nc C\n\nd D X\n")
    assert len(read(write(tmp_path, "a A\n", "ok.txt"), n_columns=2)) == 1
    with pytest.raises(CrftkError) as info:
        read(path, n_columns=2)
    assert str(info.value) == f"{path}:5: expected 2 columns, found 3"
    with pytest.raises(CrftkError) as info:
        read(path, n_columns=3)
    assert str(info.value) == f"{path}:1: expected 3 columns, found 2"


def test_n_columns_set_allows_several_counts_one_per_file(tmp_path):
    with pytest.raises(CrftkError) as info:
        read(write(tmp_path, "a A\nb B\n\nc\n"), n_columns={2, 3})
    assert str(info.value).endswith(":4: expected 2 or 3 columns, found 1")
    assert [s.rows for s in read(write(tmp_path, "a A X\n", "3.txt"), n_columns={2, 3})] == [[["a", "A", "X"]]]
    # the first token line fixes the count for the file: no rows with and without a column
    mixed = write(tmp_path, "a A\nb B X\n\nc\n", "mixed.txt")
    with pytest.raises(CrftkError) as info:
        read(mixed, n_columns=(1, 2, 3))
    assert str(info.value) == f"{mixed}:2: expected 2 columns as on line 1 (a file keeps one column count), found 3"
    gold_then_none = write(tmp_path, "a NN O\nb NN\n", "g.txt")
    with pytest.raises(CrftkError) as info:
        read(gold_then_none, n_columns={2, 3})
    assert info.value.line == 2 and "as on line 1" in str(info.value)


def test_passthrough_yields_document_and_annotation_lines_in_place(tmp_path):
    text = ("-DOCSTART- -X- O O\n\nEU NNP B-NP I-ORG\nrejects VBZ B-VP O\n\n"
            "# prob 0.5\nPeter NNP B-NP I-PER\n\n\n-DOCSTART- -X- O O\n\nx NN B-NP O\n-DOCSTART- -X- O O\n")
    path = write(tmp_path, text)
    layout = Layout()
    items = list(read_sentences(path, passthrough=True, layout=layout))
    kinds = [it if isinstance(it, str) else [r[0] for r in it.rows] for it in items]
    assert kinds == ["-DOCSTART- -X- O O", "", ["EU", "rejects"], "# prob 0.5", ["Peter"],
                     "-DOCSTART- -X- O O", "", ["x"], "-DOCSTART- -X- O O"]
    assert layout.separator == " "
    assert [it.doc for it in items if not isinstance(it, str)] == [0, 0, 1]
    # without passthrough the same file gives the sentences only
    assert [[r[0] for r in s.rows] for s in read(path)] == [["EU", "rejects"], ["Peter"], ["x"]]
    tabbed = Layout()
    list(read_sentences(write(tmp_path, "a\tA\n", "t.txt"), layout=tabbed))
    assert tabbed.separator == "\t"


def test_min_columns(tmp_path):
    path = write(tmp_path, "a\nb\n")
    with pytest.raises(CrftkError) as info:
        read(path, min_columns=2)
    assert str(info.value) == f"{path}:1: expected at least 2 columns, found 1"
    with pytest.raises(CrftkError) as info:
        read(write(tmp_path, "a A\nb\n", "m.txt"), n_columns=(1, 2), min_columns=2)
    assert info.value.line == 2 and "expected at least 2 columns, found 1" in str(info.value)


@pytest.mark.parametrize("reader", ["sentences", "batches"])
def test_model_widths_say_what_a_model_reads_when_a_line_has_too_few_columns(tmp_path, reader):
    from crftk.io.conll import model_widths, read_batches
    widths = model_widths([0, 2], 4)
    assert sorted(widths) == [3, 4]

    def run(text, name):
        path = write(tmp_path, text, name)
        if reader == "sentences":
            return list(read_sentences(path, n_columns=widths))
        return list(read_batches(path, n_columns=widths))
    needs = "the model reads columns 0 and 2 of the 4 it was trained on"
    for text, line in (("a b\n", 1), ("a b c\n\nd e\n", 3)):
        with pytest.raises(CrftkError) as info:
            run(text, "few.txt")
        assert (info.value.line, info.value.message) == (line, f"expected at least 3 columns, found 2: {needs}")
    with pytest.raises(CrftkError) as info:
        run("a b c\n\nd e f g\n", "mixed.txt")
    assert info.value.message == "expected 3 columns as on line 1 (a file keeps one column count), found 4"
    with pytest.raises(CrftkError) as info:
        run("a b c d e\n", "wide.txt")
    assert info.value.message == "expected 3 or 4 columns, found 5"
    assert len(run("a b c\n\nd e f\n", "ok.txt")) == 2
    widths = model_widths([], 6)           # a template of label bigrams only reads no column
    assert sorted(widths) == [1, 2, 3, 4, 5, 6]
    with pytest.raises(CrftkError) as info:
        run("a b c d e f g\n", "seven.txt")
    assert info.value.message == "expected 1 to 6 columns, found 7"


def test_bad_column_arguments_are_programming_errors(tmp_path):
    path = write(tmp_path, "a A\n")
    with pytest.raises(ValueError):
        read_sentences(path, n_columns=0)
    with pytest.raises(ValueError):
        read_sentences(path, n_columns=2, min_columns=3)
    with pytest.raises(ValueError):
        read_sentences(path, min_columns=0)


# --- encoding, opening, stdin -----------------------------------------------


def test_invalid_utf8_names_the_line(tmp_path):
    path = write(tmp_path, b"a A\nb B\n\nc \xff\xfe\nd D\n")
    with pytest.raises(CrftkError) as info:
        read(path)
    assert str(info.value).startswith(f"{path}:4: not valid UTF-8")
    assert info.value.line == 4


def test_truncated_multibyte_character(tmp_path):
    path = write(tmp_path, "a A\n".encode() + "é B\n".encode()[:1] + b" B\n")
    with pytest.raises(CrftkError) as info:
        read(path)
    assert info.value.line == 2 and "not valid UTF-8" in str(info.value)


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.txt")
    with pytest.raises(CrftkError) as info:
        read_sentences(path)
    assert str(info.value).startswith(f"{path}: cannot open")
    assert info.value.path == path


def test_directory_cannot_be_opened(tmp_path):
    with pytest.raises(CrftkError) as info:
        read(str(tmp_path))
    assert "cannot open" in str(info.value) and info.value.path == str(tmp_path)


def test_pathlib_path(tmp_path):
    path = tmp_path / "p.txt"
    path.write_text("a A\n")
    assert read(path)[0].rows == [["a", "A"]]


def test_stdin(monkeypatch):
    data = "\ufeffa A\r\nb B\r\n\r\n-DOCSTART- X\r\nc C".encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    sents = read("-")
    assert [s.rows for s in sents] == [[["a", "A"], ["b", "B"]], [["c", "C"]]]
    assert [s.doc for s in sents] == [0, 1]


def test_stdin_errors_name_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a A\nb B C\n")))
    with pytest.raises(CrftkError) as info:
        read("-")
    assert str(info.value) == "<stdin>:2: expected 2 columns, found 3"


def test_text_stream_without_buffer(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("a A\n\nb B\n"))
    assert words(read("-")) == [["a"], ["b"]]


def test_binary_and_text_file_objects():
    assert words(read(io.BytesIO(b"a A\n\nb B\n"))) == [["a"], ["b"]]
    assert words(read(io.StringIO("a A\n\nb B\n"))) == [["a"], ["b"]]


@pytest.mark.parametrize("make", [io.BytesIO, lambda b: io.StringIO(b.decode())])
def test_abandoned_iteration_leaves_caller_stream_open(make):
    stream = make(b"a A\n\nb B\n\nc C\n")
    it = read_sentences(stream)
    assert next(it).rows == [["a", "A"]]
    it.close()
    del it
    assert not stream.closed
    rest = stream.readline()
    assert (rest.decode() if isinstance(rest, bytes) else rest) == "b B\n"  # still readable


# --- streaming ------------------------------------------------------------


class EndlessCorpus(io.RawIOBase):
    """A binary stream of practically unlimited sentences, made on demand."""

    def __init__(self):
        self.made = 0
        self.pending = b""

    def readable(self):
        return True

    def readinto(self, buf):
        while len(self.pending) < len(buf):
            self.made += 1
            self.pending += b"w%d A O\nx X O\n\n" % self.made
        n = len(buf)
        buf[:n] = self.pending[:n]
        self.pending = self.pending[n:]
        return n


def test_reading_is_lazy_on_an_endless_stream():
    stream = EndlessCorpus()
    first = list(itertools.islice(read_sentences(stream), 3))
    assert [s.rows[0][0] for s in first] == ["w1", "w2", "w3"]
    assert [s.line for s in first] == [1, 4, 7]
    # Only a buffer's worth was produced, not the whole (endless) stream.
    assert stream.made < 100_000


def test_error_on_late_line_fires_only_when_reached(tmp_path):
    lines = "".join(f"w{i} A O\n\n" for i in range(1000)) + "bad line\n"
    path = write(tmp_path, lines)
    it = read_sentences(path)
    assert next(it).rows == [["w0", "A", "O"]]
    got = list(itertools.islice(it, 998))
    assert len(got) == 998
    assert next(it).rows == [["w999", "A", "O"]]
    with pytest.raises(CrftkError) as info:
        next(it)
    assert info.value.line == 2001


def test_first_sentence_from_a_pipe_before_the_writer_finishes():
    r, w = os.pipe()
    reader = os.fdopen(r, "rb", buffering=0)
    writer = os.fdopen(w, "wb", buffering=0)
    try:
        writer.write(b"a A\nb B\n\n")
        result = {}

        def take_first():
            result["s"] = next(read_sentences(reader))

        t = threading.Thread(target=take_first, daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), "read_sentences waited for the end of the pipe"
        assert result["s"].rows == [["a", "A"], ["b", "B"]]
        assert not reader.closed
    finally:
        writer.close()
        reader.close()


# --- read_corpus ----------------------------------------------------------


def test_read_corpus_one_and_several_files(tmp_path):
    p1 = write(tmp_path, "a A\n\n-DOCSTART- X\nb B\n", "1.txt")
    p2 = write(tmp_path, "c C\n\n-DOCSTART- X\n\nd D\n", "2.txt")
    p3 = write(tmp_path, "\n", "3.txt")
    p4 = write(tmp_path, "-DOCSTART- X\n\ne E\n", "4.txt")
    one = read_corpus(p1)
    assert words(one) == [["a"], ["b"]] and [s.doc for s in one] == [0, 1]
    many = read_corpus([p1, p2, p3, p4])
    assert words(many) == [["a"], ["b"], ["c"], ["d"], ["e"]]
    assert [s.doc for s in many] == [0, 1, 2, 3, 4]
    assert [s.line for s in many] == [1, 4, 1, 5, 3]


def test_read_corpus_column_count_is_shared_across_files(tmp_path):
    p1 = write(tmp_path, "a A\n", "1.txt")
    p2 = write(tmp_path, "b B X\n", "2.txt")
    with pytest.raises(CrftkError) as info:
        read_corpus([p1, p2])
    assert str(info.value) == f"{p2}:1: expected 2 columns, found 3"
    assert len(read_corpus([p1, p2], n_columns={2, 3})) == 2


def test_read_corpus_passes_options(tmp_path):
    path = write(tmp_path, "a A\n")
    with pytest.raises(CrftkError):
        read_corpus(path, n_columns=3)


# --- chunked --------------------------------------------------------------


def sizes(*lengths):
    return [Sentence([["w"]] * n, 0, 0) for n in lengths]


def test_chunked_respects_both_limits_and_never_splits():
    sents = sizes(3, 4, 2, 5, 1, 1, 1, 1, 6, 2)
    batches = list(chunked(sents, max_tokens=7, max_sentences=3))
    assert [[len(s) for s in b] for b in batches] == [[3, 4], [2, 5], [1, 1, 1], [1, 6], [2]]
    assert [s for b in batches for s in b] == sents
    for b in batches:
        assert sum(map(len, b)) <= 7 and len(b) <= 3


def test_chunked_long_sentence_gets_its_own_batch():
    batches = list(chunked(sizes(2, 50, 2), max_tokens=10, max_sentences=10))
    assert [[len(s) for s in b] for b in batches] == [[2], [50], [2]]


def test_chunked_sentence_limit():
    batches = list(chunked(sizes(*[1] * 10), max_tokens=1000, max_sentences=4))
    assert [len(b) for b in batches] == [4, 4, 2]


def test_chunked_edge_cases():
    assert list(chunked([])) == []
    assert list(chunked(sizes(2, 2), max_tokens=4, max_sentences=2)) == [sizes(2, 2)]
    with pytest.raises(ValueError):
        list(chunked([], max_tokens=0))
    with pytest.raises(ValueError):
        list(chunked([], max_sentences=0))


def test_chunked_is_lazy():
    endless = (Sentence([["w"]], 0, 0) for _ in itertools.count())
    first = next(chunked(endless, max_tokens=5, max_sentences=100))
    assert len(first) == 5


def test_chunked_on_read_sentences(tmp_path):
    path = write(tmp_path, "".join("a A\nb B\n\n" for _ in range(10)))
    batches = list(chunked(read_sentences(path), max_tokens=5, max_sentences=100))
    assert [len(b) for b in batches] == [2, 2, 2, 2, 2]


# --- format_sentence ------------------------------------------------------


def test_format_sentence():
    rows = [["a", "A"], ["b", "B"]]
    assert format_sentence(rows) == "a\tA\nb\tB\n\n"
    assert format_sentence(rows, sep=" ") == "a A\nb B\n\n"
    assert format_sentence(rows, [["X", "0.5"], ["Y", "0.9"]]) == "a\tA\tX\t0.5\nb\tB\tY\t0.9\n\n"
    assert format_sentence(rows, ["X", "Y"]) == "a\tA\tX\nb\tB\tY\n\n"
    assert format_sentence(rows, [[], []]) == "a\tA\nb\tB\n\n"
    assert format_sentence([("a", "A")]) == "a\tA\n\n"
    assert format_sentence([]) == ""


def test_format_sentence_length_mismatch():
    with pytest.raises(ValueError):
        format_sentence([["a"], ["b"]], [["X"]])


def test_format_and_read_round_trip(tmp_path):
    sents = [[["Hé", "NN", "B"], ["#", "#", "O"]], [["x", "Y", "Z"]]]
    path = tmp_path / "rt.txt"
    with AtomicWriter(str(path)) as f:
        for rows in sents:
            f.write(format_sentence([r[:2] for r in rows], [r[2:] for r in rows]))
    assert [s.rows for s in read_sentences(str(path))] == sents


# --- real data ------------------------------------------------------------


def test_conll2000_train():
    if not os.path.exists(CONLL2000_TRAIN):
        pytest.skip(f"CoNLL-2000 data not found at {CONLL2000_TRAIN}")
    sents = read_corpus(CONLL2000_TRAIN)
    assert len(sents) == 8936
    assert all(len(row) == 3 for s in sents for row in s.rows)
    assert sents[0].line == 1
    assert sum(1 for _ in read_sentences(CONLL2000_TRAIN, n_columns=3)) == 8936


def test_a_sentence_longer_than_the_limit_is_an_error(tmp_path):
    path = write(tmp_path, "a\nb\nc\n\nd\ne\nf\ng\n")
    with pytest.raises(CrftkError) as info:
        read(path, max_sentence_tokens=3)
    assert str(info.value) == (f"{path}:8: a sentence of more than 3 tokens (from line 5): is a blank line "
                               "missing between sentences? (--max-sentence-tokens raises the limit)")
    assert [len(s) for s in read(path, max_sentence_tokens=4)] == [3, 4]
    assert [len(s) for s in read(path, max_sentence_tokens=None)] == [3, 4]
    with pytest.raises(ValueError):
        read(path, max_sentence_tokens=0)
