"""Reading and writing CoNLL column files.

A CoNLL file holds one token per line, its columns separated by whitespace
(spaces or tabs, any amount), with a blank line (or a line of only
whitespace) between sentences.  Details of the format as crftk reads it:

* Files are UTF-8 unless the reader is given another ``encoding`` (see
  :func:`codec`).  A UTF-8 byte order mark at the start is ignored, and a
  line that is not valid in the file's encoding is a
  :class:`~crftk.errors.CrftkError` naming the file and the 1-based line.
  A file in another encoding is decoded a block of whole lines at a time and
  handed to the readers as UTF-8 (:class:`_Transcoder`), so everything past
  the opening of a file works on UTF-8 bytes, the compiled reader included.
* Lines end in ``"\\n"``; a ``"\\r"`` before it (CRLF files) is dropped along
  with the other whitespace.
* Column separators are the ASCII whitespace characters (space, tab, vertical
  tab, form feed, carriage return and the ASCII separators 0x1C-0x1F, which
  is what ``str.split()`` counts as whitespace in ASCII).  Non-ASCII spaces
  such as U+00A0 NO-BREAK SPACE are ordinary characters and stay inside a
  column, so a token like ``"1\\u00a0000"`` is one column.
* A line whose first column starts with ``-DOCSTART-`` marks a document
  boundary.  It is not a token, it ends the current sentence and it starts a
  new document.  Document numbers are 0-based and dense: a ``-DOCSTART-`` only
  opens a new number when the current document already has a sentence, so a
  file that begins with ``-DOCSTART-`` (as CoNLL-2003 files do) numbers its
  first document 0, and repeated markers do not create empty documents.
* A line starting with ``"# "`` whose second field is ``prob`` or ``nbest``
  is one of crftk's own tag annotations (written by the tagger) and is
  skipped; it neither ends a sentence nor counts as a token.  Any other line
  whose word is ``#`` (for instance ``"# # O"``) is an ordinary token.
* ``"-"`` as a path means standard input when reading and standard output
  when writing.

Reading streams: :func:`read_sentences` reads one line at a time and yields
each sentence as soon as it ends, so files larger than memory can be tagged
sentence by sentence (see :func:`chunked` for batching).
"""

import bisect
import codecs
import errno
import gc
import hashlib
import io
import itertools
import os
import re
import secrets
import socket
import stat
import sys
from array import array
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Sequence

from crftk.errors import CrftkError, shown
from crftk.io.outputs import check_special_output, open_direct, output_target

__all__ = [
    "Layout",
    "Origins",
    "CorpusStream",
    "Sentence",
    "read_sentences",
    "read_batches",
    "RawBatch",
    "read_corpus",
    "chunked",
    "AtomicWriter",
    "check_output",
    "format_sentence",
    "codec",
]

STDIN_NAME = "<stdin>"
STDOUT_NAME = "<stdout>"

_DOCSTART = "-DOCSTART-"

#: Longest sentence read by default. CoNLL sentences are tens of tokens; a "sentence"
#: of 100,000 is a file with its blank lines missing, whose lattice would take gigabytes.
MAX_SENTENCE_TOKENS = 100_000
#: Longest line (bytes, without its line end) the readers take unless told otherwise: past it a
#: stream without line ends (/dev/zero, a binary file) is an error, not a read that never ends.
MAX_LINE_BYTES = 1 << 20
_max_line_bytes = MAX_LINE_BYTES


def max_line_bytes():
    """The longest line every reader of text files takes now (bytes, without its line end)."""
    return _max_line_bytes


def set_max_line_bytes(n):
    """Set the longest line every reader of text files takes (``--max-line-bytes``); returns the
    value it replaces."""
    global _max_line_bytes
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"max_line_bytes must be a positive int, not {n!r}")
    previous, _max_line_bytes = _max_line_bytes, n
    return previous


def line_too_long(name, lineno, limit=None):
    """The CrftkError of a line longer than the limit (or as long without a line end yet)."""
    limit = _max_line_bytes if limit is None else limit
    return CrftkError(f"a line of more than {limit:,} bytes: is this a text file with line ends? "
                      f"(--max-line-bytes raises the limit)", name, lineno)


def bounded_lines(lines, name, limit=None):
    """The lines of a binary file object (or of any iterable of lines), each checked against the
    line limit as it is read: a file object's endless line is never read whole."""
    limit = _max_line_bytes if limit is None else limit
    readline = getattr(lines, "readline", None)
    if readline is None or isinstance(lines, io.TextIOBase):
        for lineno, line in enumerate(lines, 1):
            if len(line) > limit + 1 or len(line) == limit + 1 and line[-1:] not in (b"\n", "\n"):
                raise _overlong(line, name, lineno, limit)
            yield line
        return
    lineno = 0
    while True:
        line = readline(limit + 1)
        if not line:
            return
        lineno += 1
        if len(line) > limit and line[-1:] != b"\n":
            raise _overlong(line, name, lineno, limit)
        yield line


def _overlong(line, name, lineno, limit):
    """The error of a line past the limit: a CR-only file's first line is one when long."""
    if lineno == 1 and text_after_cr(line if isinstance(line, bytes) else line.encode("utf-8", "replace")):
        return cr_only(name)
    return line_too_long(name, lineno, limit)


def text_after_cr(line):
    """Whether a (first) line goes on past a CR: the file's line ends are CR alone."""
    i = line.find(b"\r")
    return i >= 0 and bool(line[i:].strip())


def cr_only(name):
    return CrftkError("the line ends are CR (\\r) only, as in old Mac files: convert them to \\n "
                      "(tr '\\r' '\\n' < FILE > NEW)", name, 1)
_ANNOTATIONS = ("prob", "nbest")

# Every ASCII character str.split() treats as whitespace becomes a plain
# space; used to split lines with non-ASCII characters without splitting on
# non-ASCII whitespace.
_ASCII_WS = {c: " " for c in range(128) if chr(c).isspace()}


@dataclass
class Sentence:
    """One sentence of a CoNLL file.

    ``rows`` holds one list of column strings per token; ``doc`` is the
    0-based index of the document the sentence belongs to; ``line`` is the
    1-based line number of its first token in the file it was read from
    (0 for sentences built in memory) and ``source`` the name of that file
    (None in memory), for error messages.
    """

    rows: List[List[str]]
    doc: int = 0
    line: int = 0
    source: Optional[str] = None

    def __len__(self):
        return len(self.rows)

    def column(self, j):
        """The ``j``-th column of every token, as a list of strings."""
        return [row[j] for row in self.rows]


class Widths(frozenset):
    """Column counts a reader accepts, with ``needs``: what the model reading the file needs of
    it, said by the error for a line with too few columns."""

    def __new__(cls, counts, needs=""):
        self = super().__new__(cls, counts)
        self.needs = needs
        return self

    def __reduce__(self):
        return Widths, (frozenset(self), self.needs)


def _column_list(cols):
    cols = [str(c) for c in cols]
    return f"column {cols[0]}" if len(cols) == 1 else f"columns {', '.join(cols[:-1])} and {cols[-1]}"


def model_widths(reads, n_columns, who="the model", of="the {n} it was trained on", filled=()):
    """The Widths of the input of a model that reads columns ``reads`` of rows of ``n_columns``:
    every count from its last column read to ``n_columns`` (the columns after the ones it reads,
    gold labels among them, may be left out). ``filled``: the columns it makes itself (a
    pipeline's fed columns)."""
    reads = sorted(set(reads))
    needs = (f"{who} reads {_column_list(reads)} of {of.format(n=n_columns)}" if reads
             else f"{who} reads no column")
    if filled:
        needs += f"; its stages fill {_column_list(sorted(filled))}"
    return Widths(range(max(reads, default=0) + 1, n_columns + 1), needs)


def describe_widths(widths):
    """'N columns' or 'N, M or K columns', as the readers' errors say it."""
    return _describe_counts(widths)


def _allowed_counts(n_columns, min_columns):
    """Normalize ``n_columns`` to a frozenset of counts (or None)."""
    if not isinstance(min_columns, int) or isinstance(min_columns, bool) or min_columns < 1:
        raise ValueError(f"min_columns must be a positive int, not {min_columns!r}")
    if n_columns is None:
        return None
    if isinstance(n_columns, int) and not isinstance(n_columns, bool):
        counts = [n_columns]
    else:
        try:
            counts = list(n_columns)
        except TypeError:
            raise TypeError(
                f"n_columns must be None, an int or a collection of ints, not {n_columns!r}"
            ) from None
    for k in counts:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ValueError(f"column counts must be positive ints, not {k!r}")
    allowed = frozenset(k for k in counts if k >= min_columns)
    if not allowed:
        raise ValueError(
            f"no allowed column count in {sorted(counts)} is at least min_columns={min_columns}"
        )
    return Widths(allowed, n_columns.needs) if isinstance(n_columns, Widths) else allowed


def _describe_counts(counts):
    counts = sorted(counts)
    if len(counts) == 1:
        text = str(counts[0])
    elif len(counts) > 3 and counts[-1] - counts[0] == len(counts) - 1:
        text = f"{counts[0]} to {counts[-1]}"
    else:
        text = ", ".join(map(str, counts[:-1])) + " or " + str(counts[-1])
    noun = "column" if counts == [1] else "columns"
    return f"{text} {noun}"


def _column_error(name, lineno, found, allowed, min_columns):
    if found < min_columns:
        noun = "column" if min_columns == 1 else "columns"
        message = f"expected at least {min_columns} {noun}, found {found}"
    elif getattr(allowed, "needs", "") and found < min(allowed):
        message = f"expected at least {_describe_counts((min(allowed),))}, found {found}: {allowed.needs}"
    else:
        message = f"expected {_describe_counts(allowed)}, found {found}"
    return CrftkError(message, name, lineno)


#: The encoding of CoNLL files unless a reader is told another.
DEFAULT_ENCODING = "utf-8"

#: Said after "not valid UTF-8": a Latin-1 file (CoNLL-2002 Spanish and Dutch) fails so.
_OTHER_ENCODING = "; a file in another encoding needs --encoding NAME (Python: encoding=NAME), e.g. latin-1"


def codec(encoding):
    """The codec name of an encoding crftk can read CoNLL files in ("utf-8", "iso8859-1", ...).

    CrftkError for a name Python does not know, for codecs that are not text encodings,
    and for encodings that do not write every ASCII character as that one ASCII byte
    (UTF-16, UTF-32, UTF-7, EBCDIC, ISO-2022): lines are cut at the newline byte and
    columns at ASCII whitespace before decoding. "utf-8-sig" is UTF-8 (a BOM is skipped
    anyway).
    """
    if not isinstance(encoding, str):
        raise CrftkError(f"the encoding must be a name such as 'utf-8' or 'latin-1', not {type(encoding).__name__}")
    try:
        name = codecs.lookup(encoding).name
    except LookupError:
        raise CrftkError(f"unknown encoding {shown(encoding)} (examples: utf-8, latin-1, cp1252, "
                         f"iso-8859-15)") from None
    try:
        "".encode(name)
    except LookupError:                          # a bytes-to-bytes codec (base64, zlib)
        raise CrftkError(f"{shown(encoding)} is not a text encoding (examples: utf-8, latin-1, cp1252, "
                         f"iso-8859-15)") from None
    if name == "utf-8-sig":
        return "utf-8"
    if name != "utf-8" and not _ascii_compatible(name):
        raise CrftkError(f"the encoding {shown(encoding)} is not supported: crftk reads encodings that write "
                         f"ASCII characters as single ASCII bytes (utf-8, latin-1, cp1252, iso-8859-15, ...); "
                         f"convert the file to UTF-8 first (e.g. iconv -f {encoding} -t UTF-8)")
    return name


def _ascii_compatible(name):
    for b in range(128):
        try:
            if bytes([b]).decode(name) != chr(b) or chr(b).encode(name) != bytes([b]):
                return False
        except (UnicodeError, ValueError):
            return False
    return True


def _decode_error(name, lineno, err, encoding="utf-8"):
    if encoding == "utf-8":
        return CrftkError(f"not valid UTF-8 (byte {err.start + 1} of the line){_OTHER_ENCODING}", name, lineno)
    return CrftkError(f"not valid {encoding} (byte {err.start + 1} of the line)", name, lineno)


def _utf8_error(name, lineno, err):
    return _decode_error(name, lineno, err)


def _text_stream_lines(stream, name, encoding="utf-8"):
    """Bytes lines from a text stream (or an iterable of lines, str or bytes; bytes lines
    in ``encoding``), turning decode errors into CrftkError."""
    if encoding != "utf-8":
        stream = _str_lines(stream, name, encoding)
    lineno = 0
    readline = getattr(stream, "readline", None)
    limit = _max_line_bytes
    if readline is not None:            # a line longer than the limit is never read whole
        it = iter(lambda: readline(limit + 1) or None, None)
    else:
        it = iter(stream)
    while True:
        try:
            line = next(it)
        except StopIteration:
            return
        except UnicodeDecodeError:
            raise CrftkError("not valid UTF-8", name, lineno + 1) from None
        lineno += 1
        if isinstance(line, bytes):
            yield line
            continue
        try:
            # surrogateescape gives back the original bytes of a stream opened
            # with errors="surrogateescape", which then fail decoding below.
            yield line.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            raise CrftkError("not valid UTF-8", name, lineno) from None


def _str_lines(lines, name, encoding):
    """An iterable of lines with its bytes lines decoded from ``encoding`` (str lines as they are)."""
    for lineno, line in enumerate(lines, 1):
        if isinstance(line, (bytes, bytearray)):
            try:
                line = bytes(line).decode(encoding)
            except UnicodeDecodeError as e:
                raise _decode_error(name, lineno, e, encoding) from None
        yield line


def _raw_stream_lines(raw, name):
    """Lines of an unbuffered binary stream, read through a buffer that is
    detached at the end so that the caller's stream is not closed."""
    buffered = io.BufferedReader(raw, 1 << 16)
    try:
        # Not "yield from": closing this generator would then close the stream.
        for line in bounded_lines(buffered, name):
            yield line
    finally:
        buffered.detach()


def _open_input(path, encoding="utf-8"):
    """Return ``(lines, name, close)`` for a path, "-" or a file object.

    ``lines`` iterates over UTF-8 bytes lines (a binary file, or lines made from a text
    stream); with another ``encoding`` (a :func:`codec` name), bytes are transcoded to
    UTF-8 as they are read. A text stream has been decoded by its owner: the encoding
    does not apply to it.
    """
    if isinstance(path, (str, bytes, os.PathLike)):
        fspath = os.fsdecode(os.fspath(path))
        if fspath == "-":
            stream = sys.stdin
            buffer = getattr(stream, "buffer", None)
            if buffer is not None:
                return _transcoded(buffer, STDIN_NAME, encoding), STDIN_NAME, None
            return _text_stream_lines(stream, STDIN_NAME), STDIN_NAME, None
        try:
            f = open(fspath, "rb", buffering=1 << 16)
        except OSError as e:
            reason = e.strerror or str(e)
            raise CrftkError(f"cannot open for reading ({reason})", fspath) from None
        return _transcoded(f, fspath, encoding), fspath, f.close
    if hasattr(path, "read") or hasattr(path, "__iter__"):
        name = getattr(path, "name", None)
        name = name if isinstance(name, str) else "<stream>"
        if isinstance(path, io.TextIOBase):
            return _text_stream_lines(path, name), name, None
        # Binary file objects are iterated directly; anything else (an iterable
        # of lines, str or bytes) goes through the converting wrapper.
        if isinstance(path, io.RawIOBase):
            return _transcoded(_raw_stream_lines(path, name), name, encoding), name, None
        if isinstance(path, io.BufferedIOBase):
            return _transcoded(path, name, encoding), name, None
        return _text_stream_lines(path, name, encoding), name, None
    raise TypeError(f"expected a path, '-' or a file object, not {type(path).__name__}")


def _transcoded(lines, name, encoding):
    """``lines`` (a binary stream or an iterator of bytes) as UTF-8 bytes: itself for UTF-8."""
    if encoding == "utf-8":
        return lines
    return io.BufferedReader(_Transcoder(lines, name, encoding), 1 << 16)


class _Transcoder(io.RawIOBase):
    """The UTF-8 bytes of a binary stream in another (ASCII-compatible) encoding.

    The source is decoded a block of whole lines at a time (memory stays bounded by
    the block and the longest line); an undecodable byte is a CrftkError naming the
    line. The source is not closed.
    """

    BLOCK = 1 << 16

    def __init__(self, source, name, encoding):
        super().__init__()
        read = getattr(source, "read", None)
        self._read = read if read is not None else _chunks_reader(source)
        self._name, self._encoding = name, encoding
        self._decoder = codecs.getincrementaldecoder(encoding)()
        self._pending = []         # the bytes after the last newline read so far
        self._pending_size = 0
        self._out = b""
        self._at = 0
        self._line = 1             # line number of the first line in _pending
        self._eof = False

    def readable(self):
        return True

    def readinto(self, buffer):
        while self._at >= len(self._out) and not self._eof:
            self._fill()
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = self._out[self._at:self._at + n]
        self._at += n
        return n

    def _fill(self):
        block = self._read(self.BLOCK)
        if block:
            block = bytes(block)
            cut = block.rfind(b"\n") + 1
            if not cut:                # inside a line: joined once its end comes (linear time)
                self._pending.append(block)
                self._pending_size += len(block)
                # An ASCII-compatible encoding's line is no shorter in UTF-8: past the limit here,
                # it is past it for the readers too, and an endless line (/dev/zero) stops now.
                if self._pending_size > max_line_bytes():
                    raise _overlong(b"".join(self._pending), self._name, self._line, max_line_bytes())
                return
            chunk = b"".join([*self._pending, block[:cut]])
            self._pending = [block[cut:]]
            self._pending_size = len(self._pending[0])
        else:
            self._eof = True
            chunk, self._pending, self._pending_size = b"".join(self._pending), [], 0
        try:
            text = self._decoder.decode(chunk, final=self._eof)
        except UnicodeDecodeError:
            raise self._locate(chunk) from None
        self._out, self._at = text.encode("utf-8"), 0
        self._line += chunk.count(b"\n")

    def _locate(self, chunk):
        """The error of the first line of ``chunk`` that does not decode."""
        for i, line in enumerate(chunk.split(b"\n")):
            try:
                line.decode(self._encoding)
            except UnicodeDecodeError as e:
                return _decode_error(self._name, self._line + i, e, self._encoding)
        return CrftkError(f"not valid {self._encoding}", self._name, self._line)


def _chunks_reader(chunks):
    """A read(size) over an iterator of bytes (a size is only a hint: one item per call)."""
    it = iter(chunks)
    return lambda size: next(it, b"")


class Layout:
    """What a reader learns about a file's layout as it reads (for writing it back alike).

    ``separator``: ``"\t"`` when the first token line has a tab, else ``" "``;
    None until a token line has been read.
    """

    def __init__(self):
        self.separator = None


def read_sentences(path, *, n_columns=None, min_columns=1, first_doc=0, passthrough=False,
                   layout=None, max_sentence_tokens=MAX_SENTENCE_TOKENS,
                   encoding=DEFAULT_ENCODING) -> Iterator[Sentence]:
    """Yield the sentences of a CoNLL file one at a time.

    ``path`` is a file path, ``"-"`` for standard input, or an open file
    object (binary or text; it is not closed).  The file is opened straight
    away, so a missing file raises here; the lines are then read lazily as
    the iterator advances and errors on a line are raised when the iteration
    reaches it.

    ``n_columns`` is an int or a collection of allowed column counts; the
    first token line fixes the count for the rest of the file (with ``None``,
    any count), so a file never mixes rows with and without a column.  A
    token line with fewer than ``min_columns`` columns is always an error.
    ``first_doc`` is the document number of the first document (used by
    :func:`read_corpus` to number across files).  Empty sentences are never
    yielded.

    With ``passthrough``, the lines that are not tokens (``-DOCSTART-`` lines,
    crftk's ``# prob``/``# nbest`` annotations, and a blank line right after
    one of those) are yielded too, in place, as str (their text without the
    line end), so that a writer can copy them to its output; an annotation
    met inside a sentence comes just before that sentence, which it does not
    split.  ``layout``, a
    :class:`Layout`, receives the file's column separator. A sentence longer
    than ``max_sentence_tokens`` is an error (None: no limit). ``encoding``: the
    file's (see :func:`codec`; it does not apply to a text stream).
    """
    allowed = _allowed_counts(n_columns, min_columns)
    limit = max_sentence_tokens
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"max_sentence_tokens must be a positive int or None, not {limit!r}")
    lines, name, close = _open_input(path, codec(encoding))
    return _iter_sentences(lines, name, close, allowed, min_columns, first_doc, passthrough, layout, limit)


def _finished(held, rows, doc, start, name):
    """The pass-through lines met inside a sentence (emptied), then the sentence."""
    yield from held
    held.clear()
    yield Sentence(rows, doc, start, name)


def _iter_sentences(lines, name, close, allowed, min_columns, doc, passthrough=False, layout=None,
                    max_sentence_tokens=None):
    try:
        it = bounded_lines(lines, name)
        first = next(it, None)
        if first is None:
            return
        if first.startswith(b"\xef\xbb\xbf"):
            first = first[3:]
        if text_after_cr(first):
            raise cr_only(name)
        rows = []
        start = 0
        doc_used = False  # does document `doc` have a sentence yet?
        after_kept = False  # was the last line one passed through?
        held = []         # pass-through lines met inside the current sentence
        fixed = None      # the column count of the file, once a token line fixed it
        fixed_at = 0
        lineno = 0
        # chain(), unlike "yield from", never closes a caller's file object.
        for raw in itertools.chain((first,), it):
            lineno += 1
            try:
                s = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise _utf8_error(name, lineno, e) from None
            if s.isascii():
                fields = s.split()
            else:
                fields = [x for x in s.translate(_ASCII_WS).split(" ") if x]
            if not fields:
                if rows:
                    yield from _finished(held, rows, doc, start, name)
                    rows = []
                    doc_used = True
                elif passthrough and after_kept:
                    yield ""
                after_kept = False
                continue
            c = s[0]
            if c == "#" or c == "-" or c.isspace():
                word = fields[0]
                keep = False
                if word.startswith(_DOCSTART):
                    if rows:
                        yield from _finished(held, rows, doc, start, name)
                        rows = []
                        doc_used = True
                    if doc_used:
                        doc += 1
                        doc_used = False
                    keep = True
                elif s.startswith("# ") and len(fields) > 1 and fields[1] in _ANNOTATIONS:
                    keep = True
                if keep:
                    if passthrough:
                        if rows:      # inside a sentence: it goes before the sentence, unsplit
                            held.append(s.rstrip("\r\n"))
                        else:
                            yield s.rstrip("\r\n")
                            after_kept = True
                    continue
            after_kept = False
            n = len(fields)
            if fixed is None:
                if n < min_columns:
                    raise _column_error(name, lineno, n, (), min_columns)
                if allowed is not None and n not in allowed:
                    raise _column_error(name, lineno, n, allowed, min_columns)
                fixed, fixed_at = n, lineno
                if layout is not None:
                    layout.separator = "\t" if "\t" in s else " "
            elif n != fixed:
                if allowed is not None and len(allowed) > 1 and n in allowed:
                    raise CrftkError(f"expected {_describe_counts((fixed,))} as on line {fixed_at} "
                                     f"(a file keeps one column count), found {n}", name, lineno)
                raise _column_error(name, lineno, n, allowed or (fixed,), min_columns)
            if not rows:
                start = lineno
            elif max_sentence_tokens is not None and len(rows) >= max_sentence_tokens:
                raise CrftkError(f"a sentence of more than {max_sentence_tokens:,} tokens (from line {start}): is a "
                                 f"blank line missing between sentences? (--max-sentence-tokens raises "
                                 f"the limit)", name, lineno)
            rows.append(fields)
        if rows:
            yield from _finished(held, rows, doc, start, name)
    finally:
        if close is not None:
            close()


#: Bytes read at a time by :func:`read_batches`.
BLOCK_SIZE = 1 << 20


class RawBatch:
    """Complete sentences of a CoNLL file as places in a block of its bytes (:func:`read_batches`).

    ``block``: the bytes; per token ``tok_start``/``tok_end``: its line (without the line
    end); ``sent_ptr``: the first token of each sentence, ``sent_line``/``sent_doc`` its
    first line and document; ``items``: in file order, a sentence index (>= 0) or ``-1 - k``
    for the k-th pass-through line, ``block[pt_start[k]:pt_end[k]]``; ``source``: the
    file's name.
    """

    __slots__ = ("block", "tok_start", "tok_end", "sent_ptr", "sent_line", "sent_doc", "items",
                 "pt_start", "pt_end", "source")

    def __init__(self, block, arrays, source):
        self.block = block
        self.source = source
        for key, value in arrays.items():
            setattr(self, key, value)

    @property
    def n_sentences(self):
        return self.sent_ptr.size - 1

    @property
    def n_tokens(self):
        return int(self.tok_start.size)

    def sentence_lengths(self):
        return self.sent_ptr[1:] - self.sent_ptr[:-1]

    @property
    def n_columns(self):
        """The column count of its token lines (the reader keeps one per file); 0 without tokens."""
        if not self.n_tokens:
            return 0
        return len(_split_columns(self.block[self.tok_start[0]:self.tok_end[0]].decode("utf-8")))

    def entries(self):
        """The batch as :func:`read_sentences` with ``passthrough`` yields it: str and Sentence."""
        block, out = self.block, []
        for k in self.items.tolist():
            if k < 0:
                out.append(block[self.pt_start[-1 - k]:self.pt_end[-1 - k]].decode("utf-8"))
                continue
            a, b = int(self.sent_ptr[k]), int(self.sent_ptr[k + 1])
            rows = [_split_columns(block[i:j].decode("utf-8"))
                    for i, j in zip(self.tok_start[a:b].tolist(), self.tok_end[a:b].tolist())]
            out.append(Sentence(rows, int(self.sent_doc[k]), int(self.sent_line[k]), self.source))
        return out


def _split_columns(s):
    """The columns of a decoded line, as the reader splits them."""
    if s.isascii():
        return s.split()
    return [x for x in s.translate(_ASCII_WS).split(" ") if x]


def _byte_blocks(lines, size, name):
    """Blocks of about ``size`` bytes of whole lines or more, from a binary file or the line
    iterator of :func:`_open_input`; a block may end inside a line."""
    read = getattr(lines, "read", None)
    if read is not None and not isinstance(lines, io.TextIOBase):
        while True:
            block = read(size)
            if not block:
                return
            yield bytes(block)
    parts, n = [], 0
    for line in bounded_lines(lines, name):
        parts.append(line)
        n += len(line)
        if n >= size:
            yield b"".join(parts)
            parts, n = [], 0
    if parts:
        yield b"".join(parts)


def read_batches(path, *, n_columns=None, min_columns=1, first_doc=0, layout=None,
                 max_sentence_tokens=MAX_SENTENCE_TOKENS, batch_tokens=50_000, max_sentences=5_000,
                 block_size=BLOCK_SIZE, encoding=DEFAULT_ENCODING) -> Iterator[RawBatch]:
    """The sentences of a CoNLL file in batches of :class:`RawBatch`, read in compiled code.

    The same rules, pass-through lines and errors as ``read_sentences(path,
    passthrough=True, ...)`` (the same arguments), whose stream :func:`chunked` would
    group; a batch closes at a sentence end once it holds ``batch_tokens`` tokens or
    ``max_sentences`` sentences (a longer sentence makes a batch of its own). A file in
    another ``encoding`` is transcoded: a batch's ``block`` is always UTF-8.
    """
    from crftk import _textio
    allowed = _allowed_counts(n_columns, min_columns)
    limit = max_sentence_tokens
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
        raise ValueError(f"max_sentence_tokens must be a positive int or None, not {limit!r}")
    for label, value in (("batch_tokens", batch_tokens), ("max_sentences", max_sentences)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} must be a positive int, not {value!r}")
    lines, name, close = _open_input(path, codec(encoding))
    reader = _textio.Reader(allowed, min_columns, first_doc, limit, _max_line_bytes)
    return _iter_batches(reader, _byte_blocks(lines, block_size, name), name, close, allowed, min_columns,
                         layout, batch_tokens, max_sentences, limit)


def _iter_batches(reader, blocks, name, close, allowed, min_columns, layout, batch_tokens, max_sentences,
                  limit):
    try:
        data, eof = b"", False
        while True:
            used, arrays = reader.parse(data, eof, batch_tokens, max_sentences)
            if arrays is None:
                raise _reader_error(reader, data, name, allowed, min_columns, limit)
            if layout is not None and layout.separator is None:
                layout.separator = reader.separator
            if arrays["items"].size:
                yield RawBatch(data, arrays, name)
            data = data[used:]
            if arrays["items"].size and data:
                continue              # the batch was full: the rest may hold more
            if eof:
                return
            block = next(blocks, None)
            if block is None:
                eof = True
            else:
                data += block
    finally:
        if close is not None:
            close()


def _reader_error(reader, data, name, allowed, min_columns, limit):
    """The CrftkError of the line the compiled reader stopped at, worded as read_sentences words it."""
    from crftk import _textio
    lineno, kind = reader.error_line, reader.error
    if kind == _textio.ERR_UTF8:
        return CrftkError(f"not valid UTF-8 (byte {reader.error_start + 1} of the line){_OTHER_ENCODING}", name,
                          lineno)
    if kind == _textio.ERR_LINE_TOO_LONG:
        return line_too_long(name, lineno, reader.max_line)
    if kind == _textio.ERR_CR_ONLY:
        return cr_only(name)
    if kind == _textio.ERR_TOO_LONG:
        return CrftkError(f"a sentence of more than {limit:,} tokens (from line {reader.error_start}): is a "
                          f"blank line missing between sentences? (--max-sentence-tokens raises "
                          f"the limit)", name, lineno)
    n, fixed = reader.error_found, reader.fixed
    if fixed < 0:
        return _column_error(name, lineno, n, () if n < min_columns else allowed, min_columns)
    if allowed is not None and len(allowed) > 1 and n in allowed:
        return CrftkError(f"expected {_describe_counts((fixed,))} as on line {reader.fixed_at} "
                          f"(a file keeps one column count), found {n}", name, lineno)
    return _column_error(name, lineno, n, allowed or (fixed,), min_columns)


class Origins:
    """Where each sentence of a stream came from, kept compactly (an int per sentence).

    ``record(stream)`` passes the sentences through; ``locate(k, token)`` then
    gives the (file, line) of a token of the k-th sentence for an error message.
    A :class:`CorpusStream` is returned as it is, recording whichever way it is read.
    """

    def __init__(self):
        self.lines = array("q")
        self.starts = []          # first sentence index of each run of one source
        self.sources = []

    def record(self, sentences):
        if isinstance(sentences, CorpusStream):
            sentences.origins.append(self)
            return sentences
        return self._record(sentences)

    def _record(self, sentences):
        for s in sentences:
            self.add(s.source, (s.line,))
            yield s

    def add(self, source, lines):
        """Record sentences of one source starting at the given lines."""
        if not self.sources or self.sources[-1] != source:
            self.starts.append(len(self.lines))
            self.sources.append(source)
        self.lines.extend(lines)

    def locate(self, k, token=0):
        if not 0 <= k < len(self.lines):
            return None, None
        source = self.sources[bisect.bisect_right(self.starts, k) - 1]
        line = self.lines[k]
        return source, (line + token if line else None)


class CorpusStream:
    """The sentences of one CoNLL file, or several concatenated, read once (:func:`iter_corpus`).

    Iterating yields :class:`Sentence` objects; :meth:`batches` instead yields the same
    sentences as :class:`RawBatch` bytes read in compiled code (training's fast path), with
    the same document numbers, column-count rules and errors. Either way, the stream can
    be read only once. The :class:`Origins` in ``origins`` record each sentence read.
    """

    def __init__(self, paths, kw):
        self.paths, self.kw = paths, kw
        self.origins = []
        self._it = None

    def __iter__(self):
        return self

    def __next__(self):
        if self._it is None:
            self._it = self._sentences()
        return next(self._it)

    def _sentences(self):
        kw = dict(self.kw)
        doc = kw.pop("first_doc", 0)
        for p in self.paths:
            last = None
            for last in read_sentences(p, first_doc=doc, **kw):
                if isinstance(last, Sentence):
                    for origins in self.origins:
                        origins.add(last.source, (last.line,))
                yield last
            if last is not None:
                doc = last.doc + 1
                if kw.get("n_columns") is None:
                    kw["n_columns"] = len(last.rows[0])

    def batches(self, **batch_kw):
        """The sentences as :class:`RawBatch` (``batch_kw``: read_batches's batch_tokens,
        max_sentences, block_size); pass-through lines are not kept."""
        if self._it is not None:
            raise RuntimeError("the corpus stream has been read already")
        self._it = iter(())
        kw = dict(self.kw)
        if kw.pop("passthrough", False):
            raise ValueError("batches() of a stream with passthrough")
        doc = kw.pop("first_doc", 0)
        for p in self.paths:
            last = None
            for batch in read_batches(p, first_doc=doc, **kw, **batch_kw):
                if batch.n_sentences == 0:
                    continue
                for origins in self.origins:
                    origins.add(batch.source, batch.sent_line.tolist())
                last = batch
                yield batch
            if last is not None:
                doc = int(last.sent_doc[-1]) + 1
                if kw.get("n_columns") is None:
                    row = last.block[last.tok_start[0]:last.tok_end[0]].decode("utf-8")
                    kw["n_columns"] = len(_split_columns(row))


def iter_corpus(path_or_paths, **kw) -> "CorpusStream":
    """Stream the sentences of one file, or several concatenated (a :class:`CorpusStream`).

    Same conventions as :func:`read_corpus`, without holding the corpus:
    training reads its data through this, so the rows of every token never
    sit in memory at once.
    """
    if isinstance(path_or_paths, (str, bytes, os.PathLike)) or hasattr(path_or_paths, "read"):
        paths = [path_or_paths]
    else:
        paths = list(path_or_paths)
    return CorpusStream(paths, dict(kw))


def read_corpus(path_or_paths, **kw) -> List[Sentence]:
    """Read one file, or several concatenated, into a list of sentences.

    Keyword arguments are those of :func:`read_sentences`.  Document numbers
    continue across files (each file starts a new document), and when
    ``n_columns`` is not given the first token line of the first file fixes
    the column count for all the files.
    """
    # Building many small lists makes the cyclic garbage collector rescan the
    # growing corpus over and over (it more than doubles the reading time);
    # reading creates no reference cycles, so it is paused meanwhile.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return list(iter_corpus(path_or_paths, **kw))
    finally:
        if gc_was_enabled:
            gc.enable()


def chunked(items: Iterable, max_tokens=50_000, max_sentences=5_000, *, by_document=False) -> Iterator[list]:
    """Group a stream of sentences into batches, lazily and in order.

    A batch holds at most ``max_sentences`` sentences and at most
    ``max_tokens`` tokens, except that a single sentence longer than
    ``max_tokens`` forms a batch of its own; sentences are never split.  A
    batch is yielded as soon as it is full, without reading ahead.  With
    ``by_document`` a batch holds whole documents instead (first-mention
    features look back within a document): it closes at the first document
    boundary after it is full.  Pass-through lines (str items of
    ``read_sentences(..., passthrough=True)``) ride along in place and count
    as nothing.
    """
    for label, value in (("max_tokens", max_tokens), ("max_sentences", max_sentences)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{label} must be a positive int, not {value!r}")
    batch = []
    tokens = sentences = 0
    doc = None
    for item in items:
        if isinstance(item, str):
            batch.append(item)
            continue
        n = len(item)
        if sentences and (item.doc != doc and (tokens >= max_tokens or sentences >= max_sentences)
                          if by_document else tokens + n > max_tokens):
            yield batch
            batch = []
            tokens = sentences = 0
        batch.append(item)
        doc = item.doc
        tokens += n
        sentences += 1
        if not by_document and (sentences >= max_sentences or tokens >= max_tokens):
            yield batch
            batch = []
            tokens = sentences = 0
    if batch:
        yield batch


def check_inputs(paths):
    """Raise CrftkError unless every path can be opened for reading: run before any long work,
    so that a missing second file is not found after the first one's work. ``"-"`` (standard
    input), None and file objects pass."""
    for path in paths:
        if path is None or not isinstance(path, (str, bytes, os.PathLike)):
            continue
        fspath = os.fsdecode(os.fspath(path))
        if fspath == "-":
            continue
        try:
            if stat.S_ISFIFO(os.stat(fspath).st_mode):
                # Opening a FIFO waits for its writer, and closing it again would leave the writer
                # writing to nobody: the real read would then wait for ever. Permission is all.
                if not os.access(fspath, os.R_OK):
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))
                continue
            open(fspath, "rb").close()
        except OSError as e:
            raise CrftkError(f"cannot open for reading ({e.strerror or e})", fspath) from None


def check_output(path, what="output"):
    """Raise CrftkError unless ``path`` can be written: run before any long work.

    ``"-"`` (standard output) always can. A regular file's directory must exist and be
    writable (the file itself is replaced atomically, so its own permissions do not matter);
    a FIFO or character device must be writable itself (it is written directly, never
    replaced: see crftk.io.outputs); a directory, a block device or a socket is refused.
    """
    if path is None:
        return
    path = os.fsdecode(os.fspath(path))
    if path == "-":
        return
    target = output_target(path, what)
    if not target.atomic:
        check_special_output(target, path, what)
        return
    directory = os.path.dirname(target.where) or "."
    if not os.path.isdir(directory):
        raise CrftkError(f"cannot write the {what}: directory {directory} does not exist", path)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CrftkError(f"cannot write the {what}: no permission to write in {directory}", path)


class AtomicWriter:
    """Write a file so that readers see either the old or the whole new one.

    ``with AtomicWriter(path) as f: f.write(...)`` writes into a temporary
    file in the same directory as ``path`` (text with ``"\\n"`` line ends in
    ``encoding``, UTF-8 by default, or bytes with ``binary=True``).  On a clean exit the data is
    flushed, fsynced and the temporary file is renamed onto ``path`` with
    ``os.replace``; if the block raises, the temporary file is removed and an
    existing file at ``path`` is left untouched.  A new file gets the usual
    permissions (0666 minus the umask); a replaced file keeps its mode.  If
    ``path`` is a symbolic link, the file it points to is replaced.  A FIFO, a
    character device or an open descriptor's name (``/dev/stdout``) is written
    directly and never replaced (crftk.io.outputs); a failure can then leave
    part of the output there, as on standard output.

    ``path`` ``"-"`` writes to ``sys.stdout`` (``sys.stdout.buffer`` with
    ``binary=True``, or through a wrapper of it when stdout has another
    encoding) without atomicity; the stream is flushed at the end and
    not closed.  Problems opening or committing the file, and text that the
    encoding cannot write, raise :class:`CrftkError`.
    """

    def __init__(self, path, binary=False, encoding=DEFAULT_ENCODING):
        self.path = os.fsdecode(os.fspath(path))
        self.binary = binary
        self.encoding = codec(encoding)
        self._stdout = None         # the wrapper of sys.stdout.buffer in another encoding
        self._file = None
        self._tmp = None
        self._target = None
        self._direct = False
        #: Path of the temporary file while the ``with`` block runs, else None.
        self.temp_path = None

    def __enter__(self):
        if self._file is not None:
            raise RuntimeError("AtomicWriter is not reentrant")
        if self.path == "-":
            self._file = sys.stdout.buffer if self.binary else sys.stdout
            if (not self.binary and getattr(sys.stdout, "buffer", None) is not None
                    and _codec_of(sys.stdout) != self.encoding):
                sys.stdout.flush()
                self._stdout = self._file = io.TextIOWrapper(sys.stdout.buffer, encoding=self.encoding,
                                                             newline="\n")
            return self._file
        if os.path.isdir(self.path):
            raise CrftkError("cannot open for writing (is a directory)", self.path)
        where = output_target(self.path)
        if not where.atomic:        # a FIFO, a device, /dev/stdout: written directly, never replaced
            try:
                self._file = open_direct(where, self.binary, encoding=self.encoding)
            except OSError as e:
                raise CrftkError(f"cannot open for writing ({e.strerror or e})", self.path) from None
            self._direct = True
            return self._file
        target = where.where
        old_mode = None
        try:
            old_mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            pass
        try:
            tmp, fd = open_temp_beside(target)
        except OSError as e:
            reason = e.strerror or str(e)
            raise CrftkError(f"cannot open for writing ({reason})", self.path) from None
        try:
            if old_mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, old_mode)
            if self.binary:
                f = os.fdopen(fd, "wb")
            else:
                f = os.fdopen(fd, "w", encoding=self.encoding, newline="\n")
            fd = None
            # within the try: a signal (SIGTERM is a KeyboardInterrupt) before __enter__ returns
            # means no __exit__, so the file would be left behind
            self._file, self._tmp, self._target = f, tmp, target
            self.temp_path = tmp
        except BaseException:
            if fd is not None:
                os.close(fd)
            else:
                f.close()
            self._file = self._tmp = self._target = self.temp_path = None
            _unlink_quietly(tmp)
            raise
        return f

    def __exit__(self, exc_type, exc, tb):
        f, tmp, target = self._file, self._tmp, self._target
        self._file = self._tmp = self._target = self.temp_path = None
        if tmp is None:  # standard output, or an output written directly
            if f is None:
                return False
            direct, self._direct = self._direct, False
            if not direct:
                wrapper, self._stdout = self._stdout, None
                try:
                    f.flush()
                finally:
                    if wrapper is not None:
                        wrapper.detach()
                return self._unwritable(exc)
            try:
                f.close()           # flushes
            except OSError as e:
                if exc_type is None:
                    raise CrftkError(f"cannot write ({e.strerror or e})", self.path) from None
            self._raise_if_full(exc)
            return self._unwritable(exc)
        if exc_type is not None:
            try:
                f.close()
            except Exception:
                pass
            _unlink_quietly(tmp)
            self._raise_if_full(exc)
            return self._unwritable(exc)
        try:
            if not f.closed:
                f.flush()
                os.fsync(f.fileno())
                f.close()
            os.replace(tmp, target)
        except OSError as e:
            try:
                f.close()
            except Exception:
                pass
            _unlink_quietly(tmp)
            reason = e.strerror or str(e)
            raise CrftkError(f"cannot write ({reason})", self.path) from None
        fsync_directory(os.path.dirname(target))
        return False

    def _unwritable(self, exc):
        """Text the encoding cannot write (a model's label, in tag's output) as a CrftkError."""
        if isinstance(exc, UnicodeEncodeError) and _codec_of(exc) == self.encoding:
            text = exc.object[exc.start:exc.end]
            raise CrftkError(f"cannot write {shown(text)} in {self.encoding}, the output's encoding",
                             STDOUT_NAME if self.path == "-" else self.path) from None
        return False

    def _raise_if_full(self, exc):
        raise_if_full(exc, self.path)


def raise_if_full(exc, path):
    """A write of output ``path`` that failed for want of room (a full disk, /dev/full) is one line,
    not a traceback."""
    if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
        raise CrftkError(f"cannot write ({exc.strerror})", path) from None


def _codec_of(x):
    """The codec name of a stream's or a UnicodeError's encoding (None if it has none)."""
    try:
        return codecs.lookup(x.encoding).name
    except (AttributeError, LookupError, TypeError):
        return None


#: errors of a write that found no room: only writing the output raises them
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


def directory_outputs(inputs, out_dir):
    """The output path of each input file in directory ``out_dir`` (``-o DIR``): the input's
    file name in ``out_dir``. Raises CrftkError before any work for standard input (no name),
    two inputs of one name, an output that would replace its input, or one that cannot be written
    (a directory, a block device or a socket of that name, a FIFO without write permission)."""
    targets, seen = [], {}
    for path in inputs:
        if not isinstance(path, (str, bytes, os.PathLike)) or os.fsdecode(os.fspath(path)) == "-":
            raise CrftkError("standard input has no file name to give its output in the output directory "
                             "(-o DIR): tag it to -o FILE or stdout", out_dir)
        path = os.fsdecode(os.fspath(path))
        target = os.path.join(out_dir, os.path.basename(path))
        if target in seen:
            raise CrftkError(f"{seen[target]} and {path} would both be written to {target}: "
                             "give inputs distinct file names", path)
        if os.path.exists(target) and os.path.samefile(target, path):
            raise CrftkError(f"the output {target} would replace its input", path)
        where = output_target(target)       # a directory, a socket there: refused now, not once
        if not where.atomic:                # the inputs before it are tagged
            check_special_output(where, target)
        seen[target] = path
        targets.append(target)
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise CrftkError("cannot write the outputs: no permission to write in the directory", out_dir)
    return targets


class AtomicFiles:
    """Several outputs, each written to a temporary file beside it (as by AtomicWriter) and all
    renamed into place when the ``with`` block ends cleanly: a failure leaves none of them.

    ``with AtomicFiles(paths) as files: f = files.open(i); f.write(...)``; opening the next
    file closes the one before (one file open at a time, however many outputs). The files are
    text in ``encoding`` (UTF-8 by default); text it cannot write is a CrftkError.
    """

    def __init__(self, paths, encoding=DEFAULT_ENCODING):
        self.paths = [os.fsdecode(os.fspath(p)) for p in paths]
        self.encoding = codec(encoding)
        self._temps = {}        # output number: (temporary file, the file it replaces)
        self._file = None
        self._file_is_temp = False
        self._current = 0       # the output being written

    def __enter__(self):
        return self

    def open(self, i):
        self._close()
        self._current = i
        where = output_target(self.paths[i])
        try:
            if not where.atomic:        # a FIFO or device: written directly, never replaced
                self._file = open_direct(where, encoding=self.encoding)
                self._file_is_temp = False
                return self._file
            tmp, fd = open_temp_beside(where.where)
        except OSError as e:
            raise CrftkError(f"cannot open for writing ({e.strerror or e})", self.paths[i]) from None
        self._temps[i] = (tmp, where.where)
        self._file = os.fdopen(fd, "w", encoding=self.encoding, newline="\n")
        self._file_is_temp = True
        return self._file

    def _close(self):
        f, self._file = self._file, None
        if f is not None:
            f.flush()
            if self._file_is_temp:
                os.fsync(f.fileno())
            f.close()

    def __exit__(self, exc_type, exc, tb):
        failed = self.paths[self._current]      # the output an error names
        try:
            if exc_type is None:
                self._close()
                for i, (tmp, target) in sorted(self._temps.items()):
                    failed = self.paths[i]
                    os.replace(tmp, target)
                for directory in {os.path.dirname(target) for _, target in self._temps.values()}:
                    fsync_directory(directory)
                self._temps = {}
        except OSError as e:
            raise CrftkError(f"cannot write ({e.strerror or e})", failed) from None
        finally:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError:
                    pass
                self._file = None
            for tmp, _ in self._temps.values():
                _unlink_quietly(tmp)
            self._temps = {}
        raise_if_full(exc, self.paths[self._current])
        if isinstance(exc, UnicodeEncodeError) and _codec_of(exc) == self.encoding:
            text = exc.object[exc.start:exc.end]
            raise CrftkError(f"cannot write {shown(text)} in {self.encoding}, the output's encoding",
                             self.paths[self._current]) from None
        return False


def _host_tag():
    """8 hex digits naming this machine, so that a pid in a temp name is only ever
    checked on the host that wrote it (directories can be shared over a network)."""
    return hashlib.sha256(socket.gethostname().encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _temp_name_pattern(base):
    """Matches the temp names :func:`open_temp_beside` gives for ``base``: (pid, host tag)."""
    return re.compile(re.escape(f".{base}.") + r"([1-9][0-9]{0,9})-([0-9a-f]{8})-[0-9a-f]{8}\.tmp")


def _process_is_gone(pid):
    """True only when no process ``pid`` exists; any doubt counts as alive."""
    if os.name != "posix":      # os.kill(pid, 0) would terminate the process on Windows
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):   # PermissionError: alive, another user's
        return False
    return False


def remove_stale_temps(target):
    """Remove the temp files that killed writers (``kill -9``, a crash) left for ``target``.

    Only files named as :func:`open_temp_beside` names them for this target, written
    on this host by a process that no longer exists, are removed; a running writer's
    file, another program's files and anything that is not a regular file stay.
    """
    if os.name != "posix":
        return
    directory, base = os.path.split(target)
    pattern = _temp_name_pattern(base)
    host = _host_tag()
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or m.group(2) != host:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or not _process_is_gone(pid):
            continue
        path = os.path.join(directory, name)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def open_temp_beside(target):
    """Create a new temporary file next to ``target``: returns (path, fd open for writing).

    Its name is ``.{base}.{pid}-{host}-{random}.tmp``, so that a later writer can
    tell whether the process that made it is still alive; stale ones for the same
    target are removed first (:func:`remove_stale_temps`). Raises OSError.
    """
    remove_stale_temps(target)
    directory, base = os.path.split(target)
    prefix = f".{base}.{os.getpid()}-{_host_tag()}-"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    for _ in range(100):
        tmp = os.path.join(directory, f"{prefix}{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)  # umask applies, like open()
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", target)


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def fsync_directory(directory):
    """Make a rename durable; best effort (not possible on every platform)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def format_sentence(rows: Sequence[Sequence[str]], extra_columns: Optional[Sequence] = None,
                    sep: str = "\t") -> str:
    """Format a sentence as CoNLL lines followed by a blank line.

    Each row's columns are joined with ``sep``; ``extra_columns``, if given,
    holds one entry per row whose columns are appended to that row (a list of
    strings, or a single string for one extra column).  Every line ends in
    ``"\\n"`` and the sentence is followed by a blank line; an empty sentence
    gives the empty string.  Fields are not checked for whitespace.
    """
    if not rows:
        if extra_columns:
            raise ValueError(f"extra_columns has {len(extra_columns)} entries for 0 rows")
        return ""
    if extra_columns is None:
        lines = [sep.join(row) for row in rows]
    else:
        if len(extra_columns) != len(rows):
            raise ValueError(
                f"extra_columns has {len(extra_columns)} entries for {len(rows)} rows"
            )
        lines = []
        for row, extra in zip(rows, extra_columns):
            line = sep.join(row)
            if isinstance(extra, str):
                line = line + sep + extra
            elif extra:
                line = line + sep + sep.join(extra)
            lines.append(line)
    lines.append("\n")
    return "\n".join(lines)


def input_batches(inputs, allowed, batch_tokens, *, by_document=False, max_sentence_tokens=MAX_SENTENCE_TOKENS,
                  progress=None, log=None, counts=None, encoding=DEFAULT_ENCODING):
    """(batch, column separator) of the CoNLL files (in ``encoding``) in turn, pass-through lines in place.

    ``allowed``: the column counts accepted; ``counts`` (a list [sentences, tokens]) is kept
    up to date and reported to ``progress`` after each batch; ``log`` receives a warning for
    an input without sentences.
    """
    counts = [0, 0] if counts is None else counts
    for path in inputs:
        layout = Layout()
        stream = read_sentences(path, n_columns=allowed, passthrough=True, layout=layout,
                                max_sentence_tokens=max_sentence_tokens, encoding=encoding)
        before = counts[0]
        for batch in chunked(stream, batch_tokens, by_document=by_document):
            yield batch, layout.separator or "\t"
            sents = [s for s in batch if not isinstance(s, str)]
            counts[0] += len(sents)
            counts[1] += sum(len(s) for s in sents)
            if progress:
                progress(*counts)
        if counts[0] == before and log is not None:
            log(f"crftk: warning: {'standard input' if path == '-' else path} has no sentences to tag")
