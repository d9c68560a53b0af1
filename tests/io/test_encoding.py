"""Reading CoNLL files in another encoding than UTF-8 (encoding=, crftk --encoding).

A file in Latin-1 read with encoding="latin-1" gives exactly the sentences of the same
text in UTF-8, through the streaming reader and the compiled batch reader alike; an
undecodable byte names the file and line; encodings whose ASCII bytes are not ASCII
(UTF-16) are refused.
"""

import io
import sys

import pytest

from crftk.api import evaluate, read_conll
from crftk.errors import CrftkError
from crftk.io import conll
from crftk.io.atomic import AtomicWriter
from crftk.io.conll import codec, read_batches, read_corpus, read_sentences

TEXT = ("-DOCSTART- -X- O\n\n"
        "José NP B-PER\nNúñez NP I-PER\ncomió V O\nen P O\nCórdoba NP B-LOC\n\n"
        "El D O\nniño N O\nsegún P O\nBegoña NP B-PER\n\n"
        "-DOCSTART- -X- O\n\n"
        "Así A O\nestá V O\nÁvila NP B-LOC\n")


@pytest.fixture
def files(tmp_path):
    utf8, latin1 = tmp_path / "es.utf8", tmp_path / "es.latin1"
    utf8.write_bytes(TEXT.encode("utf-8"))
    latin1.write_bytes(TEXT.encode("latin-1"))
    return str(utf8), str(latin1)


def _same(a, b):
    """Sentences equal but for the file they came from."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        if isinstance(x, str):
            assert x == y
        else:
            assert (x.rows, x.doc, x.line) == (y.rows, y.doc, y.line)


def test_latin1_reads_as_the_same_text_in_utf8(files):
    utf8, latin1 = files
    want = list(read_sentences(utf8, passthrough=True))
    assert want[2].rows[1] == ["Núñez", "NP", "I-PER"]
    _same(list(read_sentences(latin1, passthrough=True, encoding="latin-1")), want)
    batches = [e for b in read_batches(latin1, encoding="latin-1") for e in b.entries()]
    _same(batches, list(read_sentences(utf8, passthrough=True)))
    _same(read_corpus([latin1, latin1], encoding="latin-1"), read_corpus([utf8, utf8]))


def test_small_blocks_cut_lines_anywhere(files, monkeypatch):
    """The transcoder decodes whole lines whatever the size of the blocks it reads."""
    utf8, latin1 = files
    monkeypatch.setattr(conll._Transcoder, "BLOCK", 3)
    _same(list(read_sentences(latin1, passthrough=True, encoding="latin-1")),
          list(read_sentences(utf8, passthrough=True)))
    got = [e for b in read_batches(latin1, encoding="latin-1", block_size=5, batch_tokens=2) for e in b.entries()]
    _same(got, list(read_sentences(utf8, passthrough=True)))


def test_streams_and_stdin(files, monkeypatch):
    utf8, latin1 = files
    data = TEXT.encode("latin-1")
    want = read_corpus(utf8)
    _same(list(read_sentences(io.BytesIO(data), encoding="latin-1")), want)
    _same(list(read_sentences(data.splitlines(keepends=True), encoding="latin-1")), want)
    # a text stream was decoded by its owner: the encoding does not apply to it
    _same(list(read_sentences(io.StringIO(TEXT), encoding="latin-1")), want)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    _same(list(read_sentences("-", encoding="latin-1")), want)


@pytest.mark.parametrize("reader", [read_sentences, read_batches])
def test_latin1_without_the_encoding_names_file_line_and_the_option(files, reader):
    _, latin1 = files
    with pytest.raises(CrftkError) as info:
        list(reader(latin1))
    message = str(info.value)
    assert message.startswith(f"{latin1}:3: not valid UTF-8 (byte 4 of the line)")
    assert "--encoding" in message and "encoding=" in message and "\n" not in message


@pytest.mark.parametrize("reader", [read_sentences, read_batches])
def test_an_undecodable_byte_names_its_line(tmp_path, reader, monkeypatch):
    """cp1252 leaves 0x81 undefined; the bad line is found inside a block of many lines."""
    monkeypatch.setattr(conll._Transcoder, "BLOCK", 1000)
    path = tmp_path / "bad"
    path.write_bytes(b"a O\n" * 700 + b"\n" + b"caf\xe9 O\nb\x81 O\n")
    with pytest.raises(CrftkError) as info:
        list(reader(str(path), encoding="cp1252"))
    assert str(info.value) == f"{path}:703: not valid cp1252 (byte 2 of the line)"


def test_codec_names():
    assert codec("latin-1") == codec("latin1") == codec("ISO-8859-1") == "iso8859-1"
    assert codec("UTF8") == codec("utf-8-sig") == "utf-8"
    assert codec("cp1252") == "cp1252"


@pytest.mark.parametrize("name, says", [
    ("latin-9x", "unknown encoding 'latin-9x'"),
    ("base64", "'base64' is not a text encoding"),
    ("utf-16", "the encoding 'utf-16' is not supported"),
    ("utf-32-le", "is not supported"),
    ("cp037", "is not supported"),         # EBCDIC
    (None, "must be a name"),
])
def test_bad_encodings_are_refused(files, name, says):
    with pytest.raises(CrftkError, match=says):
        codec(name)
    with pytest.raises(CrftkError, match=says):
        read_sentences(files[0], encoding=name)


def test_atomic_writer_in_another_encoding(tmp_path):
    path = tmp_path / "out"
    with AtomicWriter(str(path), encoding="latin-1") as f:
        f.write("Núñez\n")
    assert path.read_bytes() == "Núñez\n".encode("latin-1")
    with pytest.raises(CrftkError) as info:
        with AtomicWriter(str(path), encoding="latin-1") as f:
            f.write("100 €\n")
    assert str(info.value) == f"{path}: cannot write '€' in iso8859-1, the output's encoding"
    assert path.read_bytes() == "Núñez\n".encode("latin-1")     # the old file, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_atomic_writer_to_stdout_in_another_encoding(monkeypatch):
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="utf-8"))
    with AtomicWriter("-", encoding="latin-1") as f:
        f.write("Ávila\n")
    sys.stdout.write("ok\n")        # stdout itself is still usable
    sys.stdout.flush()
    assert raw.getvalue() == "Ávila\n".encode("latin-1") + b"ok\n"


def test_python_api_read_conll_and_evaluate(files, tmp_path):
    utf8, latin1 = files
    assert read_conll(latin1, -1, docs=True, encoding="latin-1") == read_conll(utf8, -1, docs=True)
    with pytest.raises(CrftkError, match="not valid UTF-8"):
        read_conll(latin1)
    text = "".join(line + (" B-PER" if line and not line.startswith("-DOC") else "") + "\n"
                   for line in TEXT.split("\n"))
    tagged, tagged_utf8 = tmp_path / "tagged", tmp_path / "tagged.utf8"
    tagged.write_bytes(text.encode("latin-1"))
    tagged_utf8.write_bytes(text.encode("utf-8"))
    score = evaluate(str(tagged), encoding="latin-1")
    assert score.overall.n_gold == 4 and score.to_dict() == evaluate(str(tagged_utf8)).to_dict()
    with pytest.raises(CrftkError, match="not valid UTF-8"):
        evaluate(str(tagged))
