"""Feature templates: the CRF++ template language.

A template file has one template per line; ``#`` starts a comment line and
blank lines are ignored. A line starting with ``U`` makes state (unigram)
attributes, one starting with ``B`` makes transition (bigram) attributes, and
``*`` both. ``%x[row,col]`` is replaced by the value in column ``col`` of the
token ``row`` positions away; outside the sentence CRF++'s padding values
``_B-1``, ``_B-2``, ... (before) and ``_B+1``, ... (after) are used. Text around
the macros is kept, so ``U01:%x[-1,0]/%x[0,0]`` yields ``U01:the/cat``. A ``B``
line without macros is the plain label bigram (the transition matrix).
"""

import re
from dataclasses import dataclass, field

from crftk.errors import CrftkError

MACRO = re.compile(r"%([A-Za-z])\[([^\]]*)\]")
ARGS = re.compile(r"^\s*([+-]?\d+)\s*,\s*(\d+)\s*$")


@dataclass(frozen=True)
class Macro:
    """One ``%x[row,col]`` reference."""

    row: int
    col: int

    def __str__(self):
        return f"%x[{self.row},{self.col}]"


@dataclass
class TemplateLine:
    """One U or B template: literal text and macros, in order."""

    kind: str                  # "U" or "B"
    text: str                  # the line as written (for the B/U '*' case, with that prefix)
    parts: list                # str literals and Macro objects
    lineno: int

    @property
    def macros(self):
        return [p for p in self.parts if isinstance(p, Macro)]

    def render(self, values):
        """The attribute string for the given macro values (CRF++'s feature string)."""
        it = iter(values)
        return "".join(p if isinstance(p, str) else next(it) for p in self.parts)


@dataclass
class Template:
    """A parsed template file."""

    text: str
    path: str
    unigrams: list = field(default_factory=list)   # TemplateLine, kind U, any macros
    bigrams: list = field(default_factory=list)    # TemplateLine, kind B, with macros
    label_bigram: bool = False                     # a B line without macros

    @property
    def lines(self):
        return self.unigrams + self.bigrams

    @property
    def columns(self):
        """Sorted column indices the templates read."""
        return sorted({m.col for line in self.lines for m in line.macros})

    @property
    def max_offset(self):
        return max((abs(m.row) for line in self.lines for m in line.macros), default=0)

    def check_columns(self, n_columns, label_col, path=None):
        """Reject macros that read a missing column or the gold label column."""
        for line in self.lines:
            for m in line.macros:
                if m.col >= n_columns:
                    raise CrftkError(
                        f"template reads column {m.col} but the data {('in ' + str(path) + ' ') if path else ''}"
                        f"has {n_columns} columns (numbered from 0)", self.path, line.lineno)
                if m.col == label_col:
                    raise CrftkError(
                        f"template reads column {m.col}, the gold label column; "
                        f"features must not see the answer", self.path, line.lineno)


def parse_template(text, path="<template>"):
    """Parse template text; raises CrftkError with the line number on bad input."""
    tmpl = Template(text=text, path=str(path))
    seen = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kind = line[0]
        if kind not in "UB*":
            raise CrftkError(
                f"template line must start with U (state), B (transition) or * (both), "
                f"found {line[:20]!r}", path, lineno)
        parts = _parse_parts(line, path, lineno)
        kinds = "UB" if kind == "*" else kind
        for k in kinds:
            text_k = k + line[1:] if kind == "*" else line
            tl = TemplateLine(kind=k, text=text_k, parts=_with_prefix(parts, k, kind), lineno=lineno)
            if k == "B" and not tl.macros:
                tmpl.label_bigram = True
                continue
            if text_k in seen:   # CRF++ merges identical templates: same strings, same features
                continue
            seen[text_k] = lineno
            (tmpl.unigrams if k == "U" else tmpl.bigrams).append(tl)
    return tmpl


def _with_prefix(parts, k, kind):
    """Parts of a ``*`` line re-labelled with its U or B prefix, so the two do not collide."""
    if kind != "*":
        return parts
    return [k + parts[0][1:]] + parts[1:]   # parts[0] is the literal that starts with '*'


def _parse_parts(line, path, lineno):
    parts = []
    pos = 0
    for m in MACRO.finditer(line):
        if m.start() > pos:
            parts.append(line[pos:m.start()])
        name, args = m.group(1), m.group(2)
        if name != "x":
            raise CrftkError(f"unknown macro %{name}[...]: this version reads %x[row,col]", path, lineno)
        a = ARGS.match(args)
        if not a:
            raise CrftkError(f"bad macro %x[{args}]: expected %x[row,col] with integers, col >= 0", path, lineno)
        parts.append(Macro(int(a.group(1)), int(a.group(2))))
        pos = m.end()
    rest = line[pos:]
    if "%x" in rest or "%X" in rest:
        raise CrftkError(f"malformed macro in {rest!r}: expected %x[row,col]", path, lineno)
    if rest:
        parts.append(rest)
    return parts


def read_template(path):
    """Read and parse a template file (UTF-8)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise CrftkError("cannot open template: no such file", path) from None
    except IsADirectoryError:
        raise CrftkError("cannot open template: is a directory", path) from None
    except UnicodeDecodeError as e:
        raise CrftkError(f"template is not valid UTF-8 (byte {e.start})", path) from None
    except OSError as e:
        raise CrftkError(f"cannot open template: {e.strerror}", path) from None
    return parse_template(text, path)


def padding_value(distance):
    """CRF++'s out-of-sentence value: ``_B-k`` before the sentence (distance -k), ``_B+k`` after."""
    return f"_B-{-distance}" if distance < 0 else f"_B+{distance}"
