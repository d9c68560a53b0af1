"""CRFsuite's data: sequences of items, an item a list of (attribute, value) with a label.

:class:`AttributeSequences` holds them flat in memory, however they came (python-crfsuite's
feature dicts flattened by crftk.features.attributes, or a CRFsuite data file read here).
"""

import math
import os
import sys
from dataclasses import dataclass

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.io.conll import line_too_long, max_line_bytes


@dataclass
class AttributeSequences:
    """Sequences of tokens, each token a run of attribute occurrences.

    ``sent_ptr`` (n_sequences + 1) and ``tok_ptr`` (n_tokens + 1) are int64 offsets into the
    tokens and into ``names`` (one attribute string per occurrence); ``values`` the float64
    value of each occurrence, None when every one is 1; ``labels`` one label string per token,
    or None. ``source`` and ``lines`` (the file line of each token) place a token in errors;
    in memory ``name`` and ``index`` (each sequence's number in the caller's list) do.
    """

    sent_ptr: np.ndarray
    tok_ptr: np.ndarray
    names: list
    values: object = None
    labels: object = None
    source: object = None
    lines: object = None
    name: str = "X"
    index: object = None

    def __len__(self):
        return self.sent_ptr.size - 1

    n_sequences = property(__len__)

    @property
    def n_tokens(self):
        return int(self.sent_ptr[-1])

    def locate(self, k, t):
        """(path, line) of token t of sequence k for an error: the file and line it was read from,
        or, in memory, ``X[i][t]`` as the path."""
        if self.lines is not None:
            return self.source, int(self.lines[int(self.sent_ptr[k]) + t])
        i = k if self.index is None else int(self.index[k])
        return f"{self.name}[{i}][{t}]", None

    def error(self, message, token):
        """A CrftkError about a token (its id among all tokens), placed where it came from."""
        k = int(np.searchsorted(self.sent_ptr, token, side="right")) - 1
        return CrftkError(message, *self.locate(k, int(token - self.sent_ptr[k])))

    def gold(self):
        """The labels as one list per sequence."""
        p = self.sent_ptr.tolist()
        return [self.labels[p[k]:p[k + 1]] for k in range(len(p) - 1)]

    def slice(self, k0, k1):
        """Sequences k0 .. k1-1 as data of their own."""
        t0, t1 = int(self.sent_ptr[k0]), int(self.sent_ptr[k1])
        o0, o1 = int(self.tok_ptr[t0]), int(self.tok_ptr[t1])
        return AttributeSequences(self.sent_ptr[k0:k1 + 1] - t0, self.tok_ptr[t0:t1 + 1] - o0, self.names[o0:o1],
                                  None if self.values is None else self.values[o0:o1],
                                  None if self.labels is None else self.labels[t0:t1], self.source,
                                  None if self.lines is None else self.lines[t0:t1], self.name,
                                  None if self.index is None else self.index[k0:k1])

    def with_labels(self, labels):
        """The same tokens with other labels (one string per token)."""
        return AttributeSequences(self.sent_ptr, self.tok_ptr, self.names, self.values, list(labels),
                                  self.source, self.lines, self.name, self.index)


# CRFsuite's data files (its frontend's reader): one token a line, fields separated by tabs (empty
# fields, so runs of tabs, are skipped), the label first, then attributes NAME or NAME:VALUE (no
# value or an empty one: 1); "\:" and "\\" escape a colon and a backslash, any other backslash
# is itself; a blank line ends a sequence; "@weight:W" before the label weights the sequence.
# Unlike CRFsuite, which reads "1x" as 1 and "x" as 0, a value that is not a number is an error,
# and so is a second unescaped colon in a field (CRFsuite makes a nameless attribute of what
# follows it); a line's "\r" before its "\n" is dropped.

def _number(text, locate):
    try:
        v = float(text)
    except ValueError:
        raise CrftkError(f"the value {shown(text)} is not a number", *locate()) from None
    if not math.isfinite(v):
        raise CrftkError(f"the value {shown(text)} is not a finite number", *locate())
    return v


def _declarations(fields, path, lineno):
    """The fields after the "@" declarations that may come before the label."""
    while fields and fields[0].startswith("@"):
        name, _, value = fields[0].partition(":")
        if name != "@weight":
            raise CrftkError(f"unknown declaration {shown(name)} (CRFsuite's data files declare @weight only)",
                             path, lineno)
        if _number(value, lambda: (path, lineno)) != 1.0:
            raise CrftkError("sequence weights (@weight) other than 1 are not supported", path, lineno)
        fields = fields[1:]
    return fields


def read_crfsuite(path, *, encoding="utf-8", max_sequence_tokens=None):
    """The AttributeSequences of a CRFsuite data file (``-``: stdin, or a binary file object, named
    by its ``name``); errors name the file and line."""
    if hasattr(path, "read"):
        name = getattr(path, "name", None)
        return _parse(_bounded_read(path, name), name if isinstance(name, str) else "<stream>", encoding,
                      max_sequence_tokens)
    name = os.fsdecode(os.fspath(path))
    try:
        if name == "-":
            name = "<stdin>"
            raw = _bounded_read(sys.stdin.buffer, name)
        else:
            with open(name, "rb") as f:
                raw = _bounded_read(f, name)
    except OSError as e:
        raise CrftkError(f"cannot open for reading ({e.strerror or e})", name) from None
    return _parse(raw, name, encoding, max_sequence_tokens)


def _parse(raw, name, encoding, max_sequence_tokens):
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as e:
        column = e.start - raw.rfind(b"\n", 0, e.start)
        raise CrftkError(f"not valid {encoding} (byte {column} of the line)", name,
                         raw.count(b"\n", 0, e.start) + 1) from None
    del raw
    # escapes out of the way at once (as CRFsuite's left-to-right scan takes them): the colons
    # left separate values; the escaped characters come back in the names at the end
    escaped = "\\" in text
    if escaped:
        if "\x00" in text or "\x01" in text:
            bad = text.find("\x00") if "\x00" in text else text.find("\x01")
            raise CrftkError("a control character \\x00 or \\x01 in a file with escapes", name,
                             text.count("\n", 0, bad) + 1)
        text = text.replace("\\\\", "\x01").replace("\\:", "\x00")
    names, value_at, value_text, tok_ptr, sent_ptr, labels, lines = [], [], [], [0], [0], [], []
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        if not line:
            if sent_ptr[-1] != len(labels):
                sent_ptr.append(len(labels))
            continue
        fields = line.split("\t")
        if "" in fields:
            fields = [f for f in fields if f]
        if fields and fields[0][0] == "@":
            fields = _declarations(fields, name, lineno)
        if not fields:
            continue              # tabs alone: no item (as CRFsuite)
        label, attrs = fields[0].partition(":")[0], fields[1:]
        if ":" in line[len(fields[0]):]:
            for i, field in enumerate(attrs):
                if ":" in field:
                    attrs[i], _, value = field.partition(":")
                    if ":" in value:
                        raise CrftkError(f"the field {shown(field)} has two unescaped colons (write a colon in a "
                                         "name as \\:)", name, lineno)
                    if value:
                        value_at.append(len(names) + i)
                        value_text.append(value)
        names.extend(attrs)
        labels.append(label)
        lines.append(lineno)
        tok_ptr.append(len(names))
        if max_sequence_tokens is not None and len(labels) - sent_ptr[-1] > max_sequence_tokens:
            raise CrftkError(f"a sequence longer than {max_sequence_tokens:,} tokens (a file whose blank lines "
                             "between sequences are missing?)", name, lineno)
    del text
    _check_labels(labels, lines, name)
    if sent_ptr[-1] != len(labels):
        sent_ptr.append(len(labels))
    tok_ptr = np.array(tok_ptr, dtype=np.int64)
    lines = np.array(lines, dtype=np.int64)
    if escaped:
        names, labels = _restored(names), _restored(labels)
    values = None
    if value_at:
        values = np.ones(len(names), dtype=np.float64)
        values[value_at] = _values(value_text, lambda k: (name, int(lines[np.searchsorted(
            tok_ptr, value_at[k], side="right") - 1])))
        if np.all(values == 1.0):
            values = None
    return AttributeSequences(np.array(sent_ptr, dtype=np.int64), tok_ptr, names, values, labels, name, lines)


def _bounded_read(f, name):
    """The bytes of a binary file, read in blocks: a line longer than --max-line-bytes (a stream
    without line ends such as /dev/zero, a binary file) is an error, not a read that never ends."""
    limit = max_line_bytes()
    blocks, size, line_start, n_lines = [], 0, 0, 0
    while True:
        block = f.read(1 << 20)
        if not block:
            return b"".join(blocks)
        last = block.rfind(b"\n")
        if last >= 0:
            n_lines += block.count(b"\n")
            line_start = size + last + 1
        size += len(block)
        blocks.append(block)
        if size - line_start > limit:
            raise line_too_long(name, n_lines + 1, limit)


def _check_labels(labels, lines, name):
    """Each distinct label checked once: one holding white space is a line of another format
    (CoNLL's columns are split at spaces, CRFsuite's fields at tabs only)."""
    bad = [label for label in set(labels) if label.split() != [label]]
    if bad:
        t = min(labels.index(label) for label in bad)
        if not labels[t]:
            raise CrftkError("an empty label (the line starts with a colon)", name, int(lines[t]))
        raise CrftkError(f"the label {shown(labels[t])} holds white space (a CRFsuite data file separates the "
                         "label and the attributes by tabs: is this a CoNLL file? then drop --format crfsuite)",
                         name, int(lines[t]))


def _restored(strings):
    """The strings with the escaped colons and backslashes that read_crfsuite set aside."""
    if not strings:
        return strings
    return "\t".join(strings).replace("\x00", ":").replace("\x01", "\\").split("\t")


def _values(texts, locate):
    """The float64 values of value texts; ``locate(k)``: (path, line) of text k, for the error."""
    try:
        out = np.array(texts).astype(np.float64)
        if np.isfinite(out).all():
            return out
    except ValueError:
        pass
    return np.array([_number(text, lambda: locate(k)) for k, text in enumerate(texts)], dtype=np.float64)


def escape(text):
    """A name or label as CRFsuite's data files write it: backslashes and colons escaped."""
    return text.replace("\\", "\\\\").replace(":", "\\:")


def write_crfsuite(data, out):
    """Write AttributeSequences (with labels) as a CRFsuite data file to the text stream ``out``."""
    p, q = data.sent_ptr.tolist(), data.tok_ptr.tolist()
    values = None if data.values is None else data.values.tolist()
    for k in range(len(p) - 1):
        for t in range(p[k], p[k + 1]):
            fields = [escape(data.labels[t])]
            for o in range(q[t], q[t + 1]):
                attr = escape(data.names[o])
                fields.append(attr if values is None or values[o] == 1.0 else f"{attr}:{values[o]!r}")
            out.write("\t".join(fields) + "\n")
        out.write("\n")
