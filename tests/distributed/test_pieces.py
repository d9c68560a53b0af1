"""Cutting files at sentence boundaries: pieces tile the file, and each reads as the whole does there."""

import pytest

from corpora import REPO
from crftk.distributed.pieces import BLANK, DOCSTART, TOKEN, ANNOTATION, cut, first_token_line, line_kind
from crftk.io.conll import read_sentences

DEMO = str(REPO / "data" / "demo.train")


def read_piece(path, piece):
    import io
    with open(path, "rb") as f:
        f.seek(piece.start)
        data = io.BytesIO(f.read(piece.size))
    return list(read_sentences(data, passthrough=True))


def rows(items):
    return [it if isinstance(it, str) else it.rows for it in items]


def test_line_kinds_follow_the_reader():
    assert line_kind(b"\n") == BLANK and line_kind(b" \t\x1c\r\n") == BLANK
    assert line_kind(b"-DOCSTART- -X- O\n") == DOCSTART
    assert line_kind(b"# prob 0.5\n") == ANNOTATION and line_kind(b"# nbest 0 0.5\n") == ANNOTATION
    assert line_kind(b"# # O\n") == TOKEN and line_kind(b"word NN B-NP\n") == TOKEN


@pytest.mark.parametrize("size", [1, 500, 4096, 10**9])
def test_pieces_tile_the_file_and_read_as_the_whole_file(size):
    pieces = cut(DEMO, size)
    data = open(DEMO, "rb").read()
    assert pieces[0].start == 0 and pieces[-1].end == len(data)
    assert all(a.end == b.start for a, b in zip(pieces, pieces[1:]))
    if size == 10**9:
        assert len(pieces) == 1
    elif size == 500:
        assert len(pieces) > 100
    for p in pieces[1:]:
        # every cut is the first token line of a sentence: the line before it is blank
        assert data[:p.start].endswith(b"\n\n") and data[p.start:p.start + 1] not in (b"\n", b"")
    whole = rows(read_sentences(DEMO, passthrough=True))
    assert [r for p in pieces for r in rows(read_piece(DEMO, p))] == whole


def test_annotations_and_docstarts_stay_with_their_sentences(tmp_path):
    text = ("-DOCSTART- X O\n\na b O\nc d O\n\n# prob 0.5\ne f O\n# nbest 0 0.1\ng h O\n\n"
            "-DOCSTART- X O\n\ni j O\n\n\n\nk l O\n")
    path = tmp_path / "a.txt"
    path.write_text(text)
    whole = rows(read_sentences(str(path), passthrough=True))
    for by_document in (False, True):
        pieces = cut(str(path), 1, by_document=by_document)
        assert [r for p in pieces for r in rows(read_piece(str(path), p))] == whole
        starts = [text.encode()[p.start:].split(b"\n", 1)[0] for p in pieces]
        if by_document:
            assert starts == [b"-DOCSTART- X O", b"-DOCSTART- X O"]
        else:
            # not before "e f O": the annotation line before it belongs to it
            assert starts == [b"-DOCSTART- X O", b"a b O", b"i j O", b"k l O"]


def test_a_file_without_documents_is_one_piece_for_document_templates():
    assert len(cut(DEMO, 100, by_document=True)) == 1


def test_empty_file_is_one_empty_piece(tmp_path):
    path = tmp_path / "e.txt"
    path.write_text("")
    assert [(p.start, p.end) for p in cut(str(path), 10)] == [(0, 0)]
    assert first_token_line(str(path)) == (None, None, None, None)


def test_first_token_line_gives_the_separator_and_columns(tmp_path):
    path = tmp_path / "s.txt"
    path.write_bytes(b"\xef\xbb\xbf-DOCSTART- X\n\na b\tc\n\nd e f\n")
    assert first_token_line(str(path)) == ("\t", 3, b"a b\tc\n", 3)
    assert first_token_line(DEMO)[:2] == ("\t", 3)
