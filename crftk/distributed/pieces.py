"""Cutting CoNLL files into pieces at sentence boundaries, so that each piece is a task.

A cut falls at the start of a token line whose previous line is blank: there the
streaming reader (:func:`crftk.io.conll.read_sentences`) holds nothing (no open
sentence, no pass-through line waiting), so a reader started at the cut yields
exactly what the reader of the whole file yields from there on. With
``by_document`` (templates with first-mention features, which look back within a
document) a cut falls only at a ``-DOCSTART-`` line, so that each piece holds whole
documents. Cuts are found by seeking near each target offset and reading forward
a few lines: the driver never reads a whole file.
"""

import os
from dataclasses import dataclass

from crftk.errors import CrftkError
from crftk.io.conll import bounded_lines

_DOCSTART = "-DOCSTART-"
_ANNOTATIONS = ("prob", "nbest")
_ASCII_WS = {c: " " for c in range(128) if chr(c).isspace()}

BLANK, TOKEN, DOCSTART, ANNOTATION = "blank", "token", "docstart", "annotation"


@dataclass(frozen=True)
class Piece:
    """Bytes ``start`` to ``end`` of the ``file``-th input, its ``index``-th piece: ``path`` is
    where to read it, ``name`` what messages call it (the path as the user gave it)."""

    file: int
    index: int
    path: str
    start: int
    end: int
    name: str = None

    @property
    def size(self):
        return self.end - self.start


def line_kind(raw):
    """What the reader makes of a line (bytes): blank, token, docstart or annotation."""
    s = raw.decode("utf-8", "replace")
    fields = s.split() if s.isascii() else [x for x in s.translate(_ASCII_WS).split(" ") if x]
    if not fields:
        return BLANK
    c = s[0]
    if c == "#" or c == "-" or c.isspace():
        if fields[0].startswith(_DOCSTART):
            return DOCSTART
        if s.startswith("# ") and len(fields) > 1 and fields[1] in _ANNOTATIONS:
            return ANNOTATION
    return TOKEN


def first_token_line(path, name=None):
    """The first token line of a file (which fixes its separator and column count for the reader):
    (column separator, column count, the line's bytes, its line number), or Nones."""
    with _open(path, name) as f:
        for lineno, raw in enumerate(bounded_lines(f, name or path), 1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            if line_kind(raw) == TOKEN:
                s = raw.decode("utf-8", "replace")
                n = len(s.split() if s.isascii() else [x for x in s.translate(_ASCII_WS).split(" ") if x])
                return ("\t" if "\t" in s else " "), n, raw.rstrip(b"\r\n") + b"\n", lineno
    return None, None, None, None


def cut(path, target_bytes, *, file=0, by_document=False, name=None, crfsuite=False):
    """The pieces of a file, in order: each about ``target_bytes`` long, cut as the module says
    (``crfsuite``: a CRFsuite data file, cut after an empty line, which alone ends a sequence there)."""
    name = path if name is None else name
    if target_bytes < 1:
        raise ValueError(f"target_bytes must be positive, not {target_bytes!r}")
    pieces = []
    start = 0
    with _open(path, name) as f:
        size = os.fstat(f.fileno()).st_size
        while start < size:
            end = _next_cut(f, start + target_bytes, size, by_document, crfsuite)
            pieces.append(Piece(file, len(pieces), path, start, end, name))
            start = end
    if not pieces:      # an empty file is one (empty) piece, so that it has an output too
        pieces.append(Piece(file, 0, path, 0, 0, name))
    return pieces


def _next_cut(f, offset, size, by_document, crfsuite=False):
    """The first cut at or after ``offset`` (past the line under it), or ``size``."""
    if offset >= size:
        return size
    f.seek(offset)
    f.readline()                  # the rest of the line under the offset; its kind is unknown
    pos = f.tell()
    previous = None               # the kind of the line before, once known
    for raw in f:
        if crfsuite:              # (a line of tabs alone is no token there, and ends nothing)
            kind = BLANK if raw in (b"\n", b"\r\n") else TOKEN
        else:
            kind = line_kind(raw)
        if by_document:
            if kind == DOCSTART:
                return pos
        elif kind == TOKEN and previous == BLANK:
            return pos
        previous = kind
        pos += len(raw)
    return size


def lines_before(path, offset):
    """Newlines in the first ``offset`` bytes (to turn a piece's line numbers into the file's)."""
    n = 0
    with _open(path) as f:
        left = offset
        while left > 0:
            block = f.read(min(left, 1 << 20))
            if not block:
                break
            n += block.count(b"\n")
            left -= len(block)
    return n


def _open(path, name=None):
    try:
        return open(path, "rb", buffering=1 << 16)
    except OSError as e:
        raise CrftkError(f"cannot open for reading ({e.strerror or e})", path if name is None else name) from None
