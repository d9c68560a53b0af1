"""Feature templates: the CRF++ template language, with crftk's extensions.

A template file has one template per line; ``#`` starts a comment line and
blank lines are ignored. A line starting with ``U`` makes state (unigram)
attributes, one starting with ``B`` makes transition (bigram) attributes, and
``*`` both. ``%x[row,col]`` is replaced by the value in column ``col`` of the
token ``row`` positions away; outside the sentence CRF++'s padding values
``_B-1``, ``_B-2``, ... (before) and ``_B+1``, ... (after) are used. Text around
the macros is kept, so ``U01:%x[-1,0]/%x[0,0]`` yields ``U01:the/cat``. A ``B``
line without macros is the plain label bigram (the transition matrix).

Extensions (a CRF++ file never uses them, so it reads unchanged):

====================================  ===============================================
``%X[r,c]``                           the value lower-cased
``%t[r,c,"re"]``, ``%T[...]``         ``true``/``false``: does the regex match (T: ignoring case)
``%m[r,c,"re"]``, ``%M[...]``         the text the regex matches (no attribute if none)
``%shape[r,c]``                       the word classes of McCallum & Li that hold (A, A+, Aa+, ...)
``%fshape[r,c]``, ``%cshape[r,c]``    full shape ``Xxxx-dd``; collapsed shape ``Xx-d``
``%pre[r,c,n]``, ``%suf[r,c,n]``      prefix / suffix of n characters (none if shorter)
``%ngram[r,c,lo,hi]``                 character n-grams of lengths lo..hi of ``<word>``
``%lex[r,NAME]``                      B/I: position in the longest match of lexicon NAME (column 0)
``%^x[r,c]`` (``^`` before any name)  the same test at the first earlier mention of this
                                      (capitalized) word in the document, shifted by r
``@lexicon NAME FILE [icase]``        declares a lexicon (path relative to the template)
``%num[r,c]``                         real-valued: one attribute whose value is the number in the column
``%vec[r,c,NAME]``                    real-valued: one attribute per dimension of the word vector of the
                                      column's word in table NAME (``crftk train --vectors NAME=FILE``)
``%doc[r,c,KIND]``, ``%corpus[...]``  what a first stage's labels in column c say elsewhere in the
                                      document / corpus: KIND token, entity, super or hist
                                      (crftk.features.aggregates; crftk train --first-stage)
``%ctx[r,c,W]``                       column c's values within W tokens of the other occurrences of
                                      this capitalized word in the document (context aggregation)
====================================  ===============================================

A real-valued macro stands alone on a ``U`` line (its attributes are the line's, with the
number or the vector as their values; a string macro beside it, a ``B``/``*``/``P`` line or a
first-mention ``^`` are errors). Out of the sentence, and for a word without a vector, the
line has no occurrence.

A line starting with ``P`` is a pair template of a factorial CRF (``crftk train`` with
several ``--label-col``): its attributes condition the factor on the label pair of two
adjacent chains at one token (``P01:%x[0,0]``: the word with each (POS, chunk) pair). The
plain pair factor is always there; a ``P`` line without macros says so and adds nothing.
A linear chain (one label column) refuses ``P`` lines.

A line starting with ``S`` is a segment template of a semi-Markov CRF (``crftk train
--model-type semimarkov``; crftk.features.segments): its macros read a candidate segment, not
a token, and its attributes pair with the segment's label. Every other kind of model refuses
``S`` lines.

====================================  ===============================================
``%seg[c]``, ``%Seg[c]``              column c of the segment's tokens joined by a space (Seg: lower-cased)
``%first[c]``, ``%last[c]``           column c at the segment's first / last token
``%inside[c]``                        column c of each token strictly inside (multi-valued)
``%before[r,c]``, ``%after[r,c]``     column c r tokens before the start / after the end (CRF++ padding)
``%len``                              the segment's length in tokens
``%segshape[c]``                      the collapsed shapes (``%cshape``) of its tokens joined by a space
``%seglex[NAME]``                     ``1`` when the segment's words (column 0) are an entry of lexicon NAME
====================================  ===============================================

Multi-valued tests (shape, ngram) give one attribute per value; a line with
several macros makes every combination, so conjunctions across offsets are
written as several macros on one line.
"""

import os
import re
from dataclasses import dataclass, field

from crftk.errors import CrftkError, shown

# name -> (argument kinds after the row, multi-valued)
MACROS = {
    "x": (("col",), False), "X": (("col",), False),
    "t": (("col", "regex"), False), "T": (("col", "regex"), False),
    "m": (("col", "regex"), False), "M": (("col", "regex"), False),
    "shape": (("col",), True), "fshape": (("col",), False), "cshape": (("col",), False),
    "pre": (("col", "int"), False), "suf": (("col", "int"), False),
    "ngram": (("col", "int", "int"), True),
    "lex": (("name",), False),
    "num": (("col",), False), "vec": (("col", "name"), False),
    "doc": (("col", "name"), False), "corpus": (("col", "name"), False),
    "ctx": (("col", "int"), True),
}
#: Macros of S lines (segment templates of a semi-Markov CRF): name -> (argument kinds, multi-valued);
#: %before/%after take the distance first, %len no argument (and no brackets)
SEGMENT_MACROS = {
    "seg": (("col",), False), "Seg": (("col",), False),
    "first": (("col",), False), "last": (("col",), False), "inside": (("col",), True),
    "before": (("int", "col"), False), "after": (("int", "col"), False),
    "len": ((), False), "segshape": (("col",), False), "seglex": (("name",), False),
}
SEGMENT_MACRO_START = re.compile(r"%(\^?)([A-Za-z]+)(\[?)")
#: What an S line is, said when a kind of model other than the semi-Markov CRF is given one.
SEGMENT_LINE = "an S line is a segment feature of a semi-Markov CRF: train with --model-type semimarkov"
#: Macros whose attributes carry real values (EncodedCorpus.values) instead of naming strings.
REAL = ("num", "vec")
#: Macros that read a first stage's labels aggregated over the document or the corpus
#: (crftk.features.aggregates computes them).
AGGREGATES = ("doc", "corpus")
#: The aggregations such a macro names as its third argument.
AGGREGATE_KINDS = ("token", "entity", "super", "hist")
#: Macros computed over whole documents (first-stage aggregates, context aggregation)
DOCUMENT_MACROS = AGGREGATES + ("ctx",)
#: How a %vec line's word finds its vector (crftk.features.vectors): as written, or as written
#: then lower-cased.
VECTOR_LOOKUPS = ("exact", "lowercase")
MACRO_START = re.compile(r"%(\^?)([A-Za-z]+)\[")
# ASCII digits only: str.isdigit() and \d also accept '²' or '①', which int() refuses
INT = re.compile(r"^[+-]?[0-9]{1,12}$")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")

# Bounds of a macro's numbers, far beyond real templates (offsets within +-5, n-grams up to 6
# or so). They also guard model loading, which parses the template the model stores: each
# unit of row offset adds two padding values to every vocabulary (%x[10000000,0] took 3.6 GB),
# and each unit of n-gram length a pass over every word (%ngram[0,0,1,100000000] hung).
#: Largest row offset, either way: past the length of nearly every sentence, where only
#: padding values are left.
MAX_ROW = 100
#: Columns a template (or --label-col) may name: 0 .. MAX_COLUMNS - 1.
MAX_COLUMNS = 10_000
#: Longest %pre/%suf length and %ngram bound, in characters: a longer "word" is not one.
MAX_LENGTH = 100


@dataclass(frozen=True)
class Macro:
    """One macro: a test of column ``col`` at offset ``row`` (``%x[row,col]`` in CRF++)."""

    row: int
    col: int
    kind: str = "x"
    args: tuple = ()
    anchored: bool = False

    @property
    def multi(self):
        return (MACROS.get(self.kind) or SEGMENT_MACROS[self.kind])[1]

    @property
    def segment(self):
        """Whether it reads a segment (an S line's macro) rather than a token."""
        return self.kind in SEGMENT_MACROS

    @property
    def source(self):
        """What the test reads: a column number for %x, else (kind, col, args)."""
        return self.col if self.kind == "x" else (self.kind, self.col, self.args)

    @property
    def real(self):
        """Whether it makes real-valued attributes (%num, %vec) rather than strings."""
        return self.kind in REAL

    def __str__(self):
        if self.kind == "len":
            return "%len"
        if self.segment:
            args = {"before": [-self.row, self.col], "after": [self.row, self.col]}.get(
                self.kind, list(self.args) if self.kind == "seglex" else [self.col])
            return f"%{self.kind}[{','.join(map(str, args))}]"
        parts = [str(self.row)] + ([self.args[0]] if self.kind == "lex" else [str(self.col)])
        if self.kind == "vec" or self.kind in AGGREGATES:
            parts.append(self.args[0])
        elif self.kind != "lex":
            parts += [f'"{a}"' if isinstance(a, str) else str(a) for a in self.args]
        return f"%{'^' if self.anchored else ''}{self.kind}[{','.join(parts)}]"


@dataclass
class TemplateLine:
    """One U, B, P or S template: literal text and macros, in order."""

    kind: str                  # "U", "B", "P" or "S"
    text: str                  # the line as written (for the B/U '*' case, with that prefix)
    parts: list                # str literals and Macro objects
    lineno: int

    @property
    def macros(self):
        return [p for p in self.parts if isinstance(p, Macro)]

    @property
    def real(self):
        """The line's real-valued macro (%num, %vec: then its only one), or None."""
        macros = self.macros
        return macros[0] if len(macros) == 1 and macros[0].real else None

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
    lexicons: dict = field(default_factory=dict)   # name -> (path, ignore_case)
    lexicon_lines: dict = field(default_factory=dict)  # name -> line of its @lexicon directive
    pairs: list = field(default_factory=list)      # TemplateLine, kind P: factorial pair factors
    pair_plain: int = 0                            # line number of a P line without macros (0: none)
    segments: list = field(default_factory=list)   # TemplateLine, kind S: semi-Markov segment features
    # name -> crftk.features.vectors.VectorTable: the word vectors %vec lines read, attached by
    # attach_vectors (crftk train --vectors) or restored from a model file
    vectors: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def lines(self):
        return self.unigrams + self.bigrams

    @property
    def macros(self):
        return [m for line in self.lines for m in line.macros]

    @property
    def columns(self):
        """Sorted column indices the templates read (column 0 for lexicons, first mentions and
        aggregates)."""
        cols = {m.col for m in self.macros}
        if any(m.anchored or m.kind in DOCUMENT_MACROS for m in self.macros):
            cols.add(0)
        return sorted(cols)

    @property
    def vocab_columns(self):
        """Sorted columns whose values get a vocabulary: those a string macro reads (column 0 for
        lexicons and first mentions); a column read only by %num or %vec has none."""
        cols = {m.col for m in self.macros if not m.real}
        if any(m.anchored for m in self.macros):
            cols.add(0)
        return sorted(cols)

    @property
    def vector_lines(self):
        """{vector table name: line number of the first %vec line reading it}."""
        out = {}
        for line in self.unigrams:
            m = line.real
            if m is not None and m.kind == "vec":
                out.setdefault(m.args[0], line.lineno)
        return out

    @property
    def sources(self):
        """The distinct tests the macros read (columns and derived values), in a stable order."""
        seen = {}
        for m in self.macros:
            seen.setdefault(m.source, None)
        return list(seen)

    @property
    def anchored(self):
        return any(m.anchored for m in self.macros)

    @property
    def aggregates(self):
        """Whether a macro reads other sentences of the document or corpus (%doc, %corpus, %ctx)."""
        return any(m.kind in DOCUMENT_MACROS for m in self.macros)

    @property
    def max_offset(self):
        return max((abs(m.row) for line in self.lines for m in line.macros), default=0)

    @property
    def segment_columns(self):
        """Sorted columns the S lines read (column 0 for %seglex)."""
        return sorted({m.col for line in self.segments for m in line.macros if m.col >= 0})

    def refuse_segments(self, what=SEGMENT_LINE):
        """Raise at the first S line: the kinds of model other than the semi-Markov CRF call it."""
        if self.segments:
            raise CrftkError(what, self.path, self.segments[0].lineno)

    def check_columns(self, n_columns, label_col, path=None):
        """Reject macros that read a missing column or the gold label column."""
        for line in self.lines + self.segments:
            for m in line.macros:
                if m.col < 0:       # %len reads no column
                    continue
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
    if text.startswith("\ufeff"):     # a UTF-8 byte order mark, as CoNLL files may have too
        text = text[1:]
    tmpl = Template(text=text, path=str(path))
    seen = {}
    # lines end at \n (a \r before it is stripped with the line's white space), as in CoNLL
    # files and for grep -n: not at a lone \r, nor at the form feeds and separators
    # str.splitlines() also breaks at, which would make error line numbers disagree
    lines = text.split("\n")
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            _directive(tmpl, line, path, lineno)
            continue
        kind = line[0]
        if kind not in "UBP*S":
            raise CrftkError(
                f"template line must start with U (state), B (transition), * (both), P (pair "
                f"factor of a factorial CRF) or S (segment of a semi-Markov CRF), found {line[:20]!r}",
                path, lineno)
        if kind == "S":
            tl = TemplateLine(kind="S", text=line, parts=_parse_segment_parts(line, path, lineno), lineno=lineno)
            if line not in seen:
                seen[line] = lineno
                tmpl.segments.append(tl)
            continue
        parts = _parse_parts(line, path, lineno)
        if kind == "P":
            tl = TemplateLine(kind="P", text=line, parts=parts, lineno=lineno)
            if not tl.macros:
                tmpl.pair_plain = tmpl.pair_plain or lineno
            elif line not in seen:
                seen[line] = lineno
                tmpl.pairs.append(tl)
            continue
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
    for line in tmpl.lines + tmpl.pairs + tmpl.segments:
        _check_real(line, path)
        for m in line.macros:
            if m.kind in ("lex", "seglex") and m.args[0] not in tmpl.lexicons:
                raise CrftkError(f"lexicon {m.args[0]!r} is not declared (add: @lexicon {m.args[0]} FILE)",
                                 path, line.lineno)
    return tmpl


def _check_real(line, path):
    """A real-valued macro alone on a U line: its attributes are the line's, the value theirs."""
    real = [m for m in line.macros if m.real]
    if not real:
        return
    name = f"%{real[0].kind}"
    if line.kind != "U":
        raise CrftkError(f"{name} makes real-valued state attributes: it belongs on a U line "
                         f"(transitions and pair factors are binary)", path, line.lineno)
    if len(line.macros) > 1:
        raise CrftkError(f"{name} must be the only macro of its line (its attributes are the line's, "
                         f"the values the macro's)", path, line.lineno)
    if real[0].anchored:
        raise CrftkError(f"{name} takes no first-mention '^'", path, line.lineno)


def _directive(tmpl, line, path, lineno):
    words = line.split()
    if words[0] != "@lexicon":
        raise CrftkError(f"unknown directive {words[0]!r}: crftk knows @lexicon", path, lineno)
    if len(words) not in (3, 4) or (len(words) == 4 and words[3] != "icase"):
        raise CrftkError("expected: @lexicon NAME FILE [icase]", path, lineno)
    name, file = words[1], words[2]
    if not NAME.match(name):
        raise CrftkError(f"bad lexicon name {name!r}", path, lineno)
    if name in tmpl.lexicons:
        raise CrftkError(f"lexicon {name!r} declared twice", path, lineno)
    base = os.path.dirname(str(path)) if path and not str(path).startswith("<") else ""
    tmpl.lexicons[name] = (os.path.join(base, file), len(words) == 4)
    tmpl.lexicon_lines[name] = lineno


def _with_prefix(parts, k, kind):
    """Parts of a ``*`` line re-labelled with its U or B prefix, so the two do not collide."""
    if kind != "*":
        return parts
    return [k + parts[0][1:]] + parts[1:]   # parts[0] is the literal that starts with '*'


def _parse_parts(line, path, lineno):
    parts = []
    pos = 0
    while True:
        m = MACRO_START.search(line, pos)
        if not m:
            break
        if m.start() > pos:
            parts.append(line[pos:m.start()])
        anchored, name = m.group(1) == "^", m.group(2)
        if name not in MACROS:
            raise CrftkError(f"unknown macro %{name}[...]; known: "
                             + ", ".join("%" + k for k in MACROS), path, lineno)
        args, pos = _macro_args(line, m.end(), path, lineno)
        parts.append(_make_macro(name, args, anchored, path, lineno))
    rest = line[pos:]
    if re.search(r"%\^?[A-Za-z]+\[", rest) or re.search(r"%[xX]\b", rest):
        raise CrftkError(f"malformed macro in {rest!r}", path, lineno)
    if rest:
        parts.append(rest)
    return parts


def _parse_segment_parts(line, path, lineno):
    """The parts of an S line: literal text and segment macros (SEGMENT_MACROS)."""
    known = ", ".join("%" + k for k in SEGMENT_MACROS)
    parts = []
    pos = 0
    for m in SEGMENT_MACRO_START.finditer(line):
        if m.start() < pos:
            continue
        anchored, name, bracket = m.group(1) == "^", m.group(2), m.group(3)
        if name in MACROS:
            what = ("makes real-valued attributes of a token" if name in REAL else "reads one token")
            raise CrftkError(f"%{name} {what}: an S line reads segments ({known}); put token features on "
                             "U lines", path, lineno)
        if name not in SEGMENT_MACROS:
            raise CrftkError(f"unknown macro %{name} on an S line; known: {known}", path, lineno)
        if anchored:
            raise CrftkError(f"%^{name}: segment macros take no first-mention '^'", path, lineno)
        if m.start() > pos:
            parts.append(line[pos:m.start()])
        if name == "len":
            if bracket:
                raise CrftkError("bad macro %len: it takes no arguments (write %len)", path, lineno)
            parts.append(Macro(0, -1, "len"))
            pos = m.end()
            continue
        if not bracket:
            raise CrftkError(f"malformed macro %{name}: expected '[' after it", path, lineno)
        args, pos = _macro_args(line, m.end(), path, lineno)
        parts.append(_make_segment_macro(name, args, path, lineno))
    if line[pos:]:
        parts.append(line[pos:])
    return parts


def _make_segment_macro(name, args, path, lineno):
    kinds = SEGMENT_MACROS[name][0]
    usage = f"%{name}[" + ",".join({"col": "col", "int": "r", "name": "NAME"}[k] for k in kinds) + "]"
    if len(args) != len(kinds):
        raise CrftkError(f"bad macro %{name}[...]: expected {usage}", path, lineno)
    if name == "seglex":
        how, text = args[0]
        if how != "raw" or not NAME.match(text):
            raise CrftkError(f"bad macro %{name}[...]: expected {usage}", path, lineno)
        return Macro(0, 0, name, (text,))
    row = 0
    if kinds[0] == "int":
        row = _integer(*args[0], 1, MAX_ROW)
        if row is None:
            raise CrftkError(f"bad macro %{name}[...]: the distance must be an integer from 1 to {MAX_ROW}, "
                             f"not {shown(args[0][1], 24)} ({usage})", path, lineno)
        row = -row if name == "before" else row
    col = _integer(*args[-1], 0, MAX_COLUMNS - 1)
    if col is None:
        raise CrftkError(f"bad macro %{name}[...]: the column must be an integer from 0 to {MAX_COLUMNS - 1:,}, "
                         f"not {shown(args[-1][1], 24)} ({usage})", path, lineno)
    return Macro(row, col, name)


def _macro_args(line, i, path, lineno):
    """Split the arguments of a macro whose '[' ends at line[i]; returns (args, end).

    Arguments are separated by commas; a quoted one ("...") may hold commas and
    brackets, with \\" and \\\\ as its only escapes. Each argument comes back as
    ("str", text) when quoted, else ("raw", stripped text).
    """
    def fail(what):
        return CrftkError(f"malformed macro: {what}", path, lineno)

    args, n = [], len(line)
    while True:
        while i < n and line[i] == " ":
            i += 1
        if i < n and line[i] == '"':
            buf, i = [], i + 1
            while i < n and line[i] != '"':
                if line[i] == "\\" and i + 1 < n and line[i + 1] in '"\\':
                    i += 1
                buf.append(line[i])
                i += 1
            if i >= n:
                raise fail("missing closing quote")
            args.append(("str", "".join(buf)))
            i += 1
            while i < n and line[i] == " ":
                i += 1
        else:
            j = i
            while j < n and line[j] not in ",]":
                j += 1
            args.append(("raw", line[i:j].strip()))
            i = j
        if i >= n:
            raise fail("missing ']'")
        if line[i] == "]":
            return args, i + 1
        if line[i] != ",":
            raise fail(f"unexpected {line[i]!r} after an argument")
        i += 1


def _integer(how, text, lo, hi):
    """The argument as an int in lo..hi, or None."""
    if how != "raw" or not INT.match(text):
        return None
    n = int(text)
    return n if lo <= n <= hi else None


def _make_macro(name, args, anchored, path, lineno):
    kinds, _ = MACROS[name]
    usage = f"%{name}[row," + ",".join({"col": "col", "regex": '"regex"', "int": "n", "name": "NAME"}[k]
                                       for k in kinds) + "]"
    if name in AGGREGATES:
        usage = f"%{name}[row,col,{'|'.join(AGGREGATE_KINDS)}]"

    def bad(what, arg=None):
        got = f", not {shown(arg[1], 24)}" if arg is not None else ""
        return CrftkError(f"bad macro %{name}[...]: {what}{got} ({usage})", path, lineno)

    if len(args) != 1 + len(kinds):
        raise CrftkError(f"bad macro %{name}[...]: expected {usage}", path, lineno)
    row = _integer(*args[0], -MAX_ROW, MAX_ROW)
    if row is None:
        raise bad(f"the row must be an integer from {-MAX_ROW} to {MAX_ROW}", args[0])
    col, extra = 0, []
    for kind, (how, text) in zip(kinds, args[1:]):
        if kind == "col":
            col = _integer(how, text, 0, MAX_COLUMNS - 1)
            if col is None:
                raise bad(f"the column must be an integer from 0 to {MAX_COLUMNS - 1:,}", (how, text))
        elif kind == "int":
            n = _integer(how, text, 1, MAX_LENGTH)
            if n is None:
                raise bad(f"lengths must be integers from 1 to {MAX_LENGTH}", (how, text))
            extra.append(n)
        elif kind == "regex":
            if how != "str":
                raise CrftkError(f'bad macro %{name}[...]: the regex must be quoted ({usage})', path, lineno)
            try:
                re.compile(text)
            except (re.error, OverflowError) as e:     # a{99999999999999999}: OverflowError
                raise CrftkError(f"bad regex {text!r} in %{name}: {e}", path, lineno) from None
            extra.append(text)
        else:  # lexicon name
            if how != "raw" or not NAME.match(text):
                raise CrftkError(f"bad macro %{name}[...]: expected {usage}", path, lineno)
            extra.append(text)
    if name in DOCUMENT_MACROS and anchored:
        raise CrftkError(f"%^{name}: an aggregate is the same at every mention of a word; drop the ^",
                         path, lineno)
    if name in AGGREGATES and extra[0] not in AGGREGATE_KINDS:
        raise CrftkError(f"bad macro %{name}[...]: the aggregate must be one of {', '.join(AGGREGATE_KINDS)}, "
                         f"not {shown(extra[0], 24)} ({usage})", path, lineno)
    if name == "ngram" and extra[0] > extra[1]:
        raise CrftkError("bad macro %ngram[...]: lo must not exceed hi", path, lineno)
    return Macro(row, col, name, tuple(extra), anchored)


def read_template(path):
    from crftk.io.conll import bounded_lines
    """Read and parse a template file (UTF-8)."""
    try:
        with open(path, "rb") as fh:
            data = b"".join(bounded_lines(fh, path))      # /dev/zero: an error, not a hang
        # decoded whole (not by a text-mode file) so that an undecodable byte has a line
        text = data.decode("utf-8").replace("\r\n", "\n")
    except FileNotFoundError:
        raise CrftkError("cannot open template: no such file", path) from None
    except IsADirectoryError:
        raise CrftkError("cannot open template: is a directory", path) from None
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise CrftkError(f"template is not valid UTF-8 (byte {e.start})", path, line) from None
    except OSError as e:
        raise CrftkError(f"cannot open template: {e.strerror}", path) from None
    return parse_template(text, path)


def template_difference(given, own):
    """How template ``given`` differs from ``own`` in the attributes it makes, or None when it
    makes the same ones (comments, line order, repeated lines and lexicon paths aside): a pair
    (what differs, the line of ``given`` that shows it, or None)."""
    def lines(t):
        return {line.text: line.lineno for line in t.unigrams + t.bigrams + t.pairs + t.segments}

    mine, theirs = lines(given), lines(own)
    for text, lineno in sorted(mine.items(), key=lambda kv: kv[1]):
        if text not in theirs:
            return f"line {shown(text)} is not in the model's template", lineno
    for text in sorted(theirs, key=theirs.get):
        if text not in mine:
            return f"the model's template line {shown(text)} is missing", None
    if given.label_bigram != own.label_bigram:
        return (f"the model's template {'has' if own.label_bigram else 'has no'} plain B line "
                "(label bigram)"), None
    if bool(given.pair_plain) != bool(own.pair_plain):
        return f"the model's template {'has' if own.pair_plain else 'has no'} plain P line", None
    for name in sorted(set(given.lexicons) | set(own.lexicons)):
        if name not in own.lexicons:
            return f"the model's template declares no lexicon {name}", given.lexicon_lines.get(name)
        if name not in given.lexicons:
            return f"the model's template declares lexicon {name}", None
        if given.lexicons[name][1] != own.lexicons[name][1]:
            return (f"the model's template matches lexicon {name} "
                    f"{'ignoring' if own.lexicons[name][1] else 'respecting'} case"), given.lexicon_lines[name]
    return None


def padding_value(distance):
    """CRF++'s out-of-sentence value: ``_B-k`` before the sentence (distance -k), ``_B+k`` after."""
    return f"_B-{-distance}" if distance < 0 else f"_B+{distance}"
