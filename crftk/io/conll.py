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
sentence by sentence (see :func:`chunked` for batching). Output files are written by
crftk.io.atomic (atomically) and checked by crftk.io.outputs (before any work).
"""

import bisect
import codecs
import errno
import gc
import io
import itertools
import os
import stat
import sys
from array import array
from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Sequence

from crftk.errors import CrftkError, shown

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
    "format_sentence",
    "codec",
]

STDIN_NAME = "<stdin>"

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


def whole_documents(batches):
    """The RawBatches of one file regrouped so that no document (``-DOCSTART-`` to the next) is
    split between two, as first-mention macros need: the sentences of a document that goes on in
    the next batch, and the lines after them, move to the next batch."""
    import numpy as np
    # the pieces read since the last batch out, each with only its own bytes (a reader's batch
    # holds the rest of its block: a document over many small batches would hold many blocks)
    held, open_doc = [], None
    for batch in batches:
        items = batch.items
        sentences = items[items >= 0]
        if not sentences.size:
            held.append(_joined([batch], own=True))
            continue
        docs = batch.sent_doc
        if open_doc is not None and docs[sentences[0]] != open_doc:
            yield _joined(held)          # the open document ended with the batch before
            held = []
        open_doc = docs[sentences[-1]]
        # from just after the last sentence of an earlier document on, the items stay open
        earlier = np.flatnonzero((items >= 0) & (docs[np.maximum(items, 0)] != open_doc))
        if earlier.size:
            cut = int(earlier[-1]) + 1
            yield _joined(held + [_items_of(batch, 0, cut)])
            held = [_joined([_items_of(batch, cut, items.size)], own=True)]
        else:
            held.append(_joined([batch], own=True))
        if len(held) >= 64:                # a long document: its pieces as one, each batch's arrays are not free
            held = [_joined(held)]
    last = _joined(held)
    if last is not None:
        yield last


def _items_of(batch, lo, hi):
    """A RawBatch of the items lo..hi-1 of ``batch`` (on the same bytes)."""
    import numpy as np
    items = batch.items[lo:hi]
    sent = items[items >= 0]
    passed = -1 - items[items < 0]
    before = batch.items[:lo]           # the items number sentences and lines in file order
    s0, p0 = int((before >= 0).sum()), int((before < 0).sum())
    s1, p1 = s0 + sent.size, p0 + passed.size
    t0, t1 = int(batch.sent_ptr[s0]), int(batch.sent_ptr[s1])
    return RawBatch(batch.block, {
        "tok_start": batch.tok_start[t0:t1], "tok_end": batch.tok_end[t0:t1],
        "sent_ptr": (batch.sent_ptr[s0:s1 + 1] - t0).astype(np.int32), "sent_line": batch.sent_line[s0:s1],
        "sent_doc": batch.sent_doc[s0:s1], "items": np.where(items >= 0, items - s0, items + p0),
        "pt_start": batch.pt_start[p0:p1], "pt_end": batch.pt_end[p0:p1]}, batch.source)


def _joined(pieces, own=False):
    """One RawBatch of RawBatches in order (their bytes copied into one block; ``own``: even of
    one, which then keeps only its own bytes); None for none."""
    import numpy as np
    pieces = [b for b in pieces if b is not None and b.items.size]
    if not pieces or (len(pieces) == 1 and not own):
        return pieces[0] if pieces else None
    blocks, arrays = [], {k: [] for k in ("tok_start", "tok_end", "sent_ptr", "sent_line", "sent_doc", "items",
                                          "pt_start", "pt_end")}
    offset = n_tok = n_sent = n_pt = 0
    arrays["sent_ptr"].append(np.zeros(1, dtype=np.int32))
    for b in pieces:
        # its bytes: from its first line to the end of its last (a piece has a token or a line)
        lo = min(int(x[0]) for x in (b.tok_start, b.pt_start) if x.size)
        hi = max(int(x[-1]) for x in (b.tok_end, b.pt_end) if x.size)
        blocks.append(b.block[lo:hi])
        shift = offset - lo
        arrays["tok_start"].append(b.tok_start + shift)
        arrays["tok_end"].append(b.tok_end + shift)
        arrays["pt_start"].append(b.pt_start + shift)
        arrays["pt_end"].append(b.pt_end + shift)
        arrays["sent_ptr"].append((b.sent_ptr[1:] + n_tok).astype(np.int32))
        arrays["sent_line"].append(b.sent_line)
        arrays["sent_doc"].append(b.sent_doc)
        arrays["items"].append(np.where(b.items >= 0, b.items + n_sent, b.items - n_pt))
        offset += hi - lo
        n_tok, n_sent, n_pt = n_tok + b.n_tokens, n_sent + b.n_sentences, n_pt + b.pt_start.size
    return RawBatch(b"".join(blocks), {k: np.concatenate(v) for k, v in arrays.items()}, pieces[0].source)


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
                 block_size=BLOCK_SIZE, encoding=DEFAULT_ENCODING, read_ahead=False) -> Iterator[RawBatch]:
    """The sentences of a CoNLL file in batches of :class:`RawBatch`, read in compiled code.

    The same rules, pass-through lines and errors as ``read_sentences(path,
    passthrough=True, ...)`` (the same arguments), whose stream :func:`chunked` would
    group; a batch closes at a sentence end once it holds ``batch_tokens`` tokens or
    ``max_sentences`` sentences (a longer sentence makes a batch of its own). A file in
    another ``encoding`` is transcoded: a batch's ``block`` is always UTF-8. ``read_ahead``
    reads a block beyond the one parsed, so that the last block is parsed knowing it ends the
    file: a final sentence without a blank line after it then joins the batch before it instead
    of making one of its own (batches are where --stream shuffles; tagging needs no read-ahead).
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
                         layout, batch_tokens, max_sentences, limit, read_ahead)


def _iter_batches(reader, blocks, name, close, allowed, min_columns, layout, batch_tokens, max_sentences,
                  limit, read_ahead):
    try:
        data, ahead, eof = b"", b"", False
        if read_ahead:
            ahead = next(blocks, None)
            eof = ahead is None
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
            if read_ahead:
                data, ahead = data + ahead, block
                eof = ahead is None
            elif block is None:
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


def input_batches(inputs, allowed, batch_tokens, *, by_document=False, whole_files=False,
                  max_sentence_tokens=MAX_SENTENCE_TOKENS, progress=None, log=None, counts=None,
                  encoding=DEFAULT_ENCODING):
    """(batch, column separator) of the CoNLL files (in ``encoding``) in turn, pass-through lines in place;
    with ``whole_files`` each file is one batch (a template's %corpus features read the whole file).

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
        if whole_files:
            items = list(stream)
            batches = [items] if items else []
        else:
            batches = chunked(stream, batch_tokens, by_document=by_document)
        for batch in batches:
            yield batch, layout.separator or "\t"
            sents = [s for s in batch if not isinstance(s, str)]
            counts[0] += len(sents)
            counts[1] += sum(len(s) for s in sents)
            if progress:
                progress(*counts)
        if counts[0] == before and log is not None:
            log(f"crftk: warning: {'standard input' if path == '-' else path} has no sentences to tag")
