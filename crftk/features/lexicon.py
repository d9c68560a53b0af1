"""Lexicons (gazetteers) for CRF features, and building them from labeled data.

A lexicon is a set of phrases, each a sequence of one or more tokens: lists
of people, places, organizations and so on (McCallum & Li, 2003).  A feature
template refers to a lexicon by name; for each token the feature's value is
the token's position in the longest lexicon phrase matching there, ``"B"``
for the phrase's first token and ``"I"`` for the following ones, or nothing
when no phrase covers the token (see :meth:`Lexicon.match`).

Lexicons can be seeded from the gold chunks of a training set
(:func:`build_lexicons`, one lexicon per chunk type).  Used as they are, such
lexicons would let every training entity find itself in the lexicon, so the
model would learn to trust them far more than they deserve on new text.  A
*jackknife* lexicon avoids that: the documents are split into ``K`` folds
(round robin, :func:`fold_of`), each entry records the folds it was seen in,
and a token of a fold-``f`` document only matches entries also seen in some
other fold.  At test time (no fold) every entry matches.

File format
-----------
A lexicon file is UTF-8 text (a leading byte order mark is ignored), one
entry per line::

    # crftk-lexicon folds=4
    # people seen in the CoNLL-2003 training set
    John Smith	0,3
    Smith	1

* An entry's tokens are separated by spaces (one space is written; runs of
  spaces are accepted).  Tokens never contain ASCII whitespace, as in CoNLL
  files; other characters, non-ASCII spaces included, are part of a token.
* A TAB after the tokens is followed by a comma-separated list of fold
  numbers, the folds of the documents the entry was seen in (``0,3``).  Fold
  lists are only allowed in a jackknife lexicon.  An entry without a fold
  list (or with an empty one) matches in every fold.
* Blank lines are ignored.  Lines starting with ``#`` are comments, except
  the header ``# crftk-lexicon folds=K`` (``K`` >= 2), which declares a
  jackknife lexicon with ``K`` folds; it must come before the first entry,
  and a comment whose second word is ``crftk-lexicon`` must be a well-formed
  header.
* Escape: a line starting with a backslash is an entry with that one
  backslash removed, so that an entry whose first token starts with ``#`` or
  ``\\`` can be written (``\\#hashtag``).  :meth:`Lexicon.write` escapes such
  entries.
* An entry listed twice is one entry; its fold sets are merged (an entry
  without folds anywhere matches in every fold).
* Errors (a bad fold list, a fold number >= K, a fold list in a lexicon
  without header, a malformed or misplaced header, invalid UTF-8) raise
  :class:`~crftk.errors.CrftkError` naming the file and the 1-based line.

Lines end in ``"\\n"`` (a ``"\\r"`` before it is dropped).  Entries are
written sorted, with sorted fold lists, so a file's content only depends on
the lexicon.
"""

import os

from crftk.errors import CrftkError
from crftk.evaluation.conlleval import chunks
from crftk.io.atomic import AtomicWriter
from crftk.io.conll import check_inputs, codec, iter_corpus
from crftk.io.outputs import check_apart
from crftk.progress import status

__all__ = [
    "Lexicon",
    "fold_of",
    "build_lexicons",
    "write_lexicons",
    "check_lexicon_directory",
    "lexicon_command",
    "LEXICON_SUFFIX",
]

LEXICON_SUFFIX = ".lex"

_HEADER_WORD = "crftk-lexicon"
_ALL_FOLDS = frozenset()  # an entry usable in every fold

# ASCII whitespace other than TAB (which separates the fold list) becomes a
# plain space for splitting the tokens of an entry; see crftk.io.conll.
_ENTRY_WS = {c: " " for c in range(128) if chr(c).isspace() and c != 9}
_ASCII_WS = frozenset(chr(c) for c in range(128) if chr(c).isspace())


def _split_entry(text):
    if text.isascii():
        return text.split()
    return [t for t in text.translate(_ENTRY_WS).split(" ") if t]


def _merge(old, new):
    """Folds of an entry seen with fold sets ``old`` and ``new``."""
    if old is None:
        return new
    if not old or not new:
        return _ALL_FOLDS
    return old | new


def _check_n_folds(n_folds):
    if not isinstance(n_folds, int) or isinstance(n_folds, bool) or n_folds < 0 or n_folds == 1:
        raise ValueError(f"n_folds must be 0 (no jackknife) or an int >= 2, not {n_folds!r}")


class Lexicon:
    """A named set of token sequences, optionally with jackknife folds.

    ``entries`` maps each entry, a tuple of tokens (lower-cased when
    ``ignore_case``), to the frozenset of folds it was seen in; the empty set
    means the entry matches in every fold (always the case when ``n_folds``
    is 0, a lexicon without jackknife).  ``max_len`` is the length in tokens
    of the longest entry (0 when empty).  Add entries with :meth:`add` (the
    constructor's ``entries`` goes through it), not by changing ``entries``
    directly: matching uses an index that :meth:`add` keeps up to date.
    """

    def __init__(self, name, entries=None, *, ignore_case=False, n_folds=0):
        _check_n_folds(n_folds)
        self.name = str(name)
        self.ignore_case = bool(ignore_case)
        self.n_folds = n_folds
        self.entries = {}
        self.max_len = 0
        self._index = None
        if entries is not None:
            items = entries.items() if hasattr(entries, "items") else ((e, ()) for e in entries)
            for tokens, folds in items:
                self.add(tokens, folds)

    # -- building ------------------------------------------------------

    def add(self, tokens, folds=()):
        """Add an entry: a sequence of tokens (or one string of space-separated
        tokens) seen in ``folds`` (empty: matches in every fold).

        Raises ValueError for an empty entry, a token that is empty or holds
        ASCII whitespace, or a fold outside ``range(n_folds)`` (any fold when
        the lexicon has no folds).  Adding an existing entry merges the folds.
        """
        if isinstance(tokens, str):
            tokens = tokens.split(" ")
        key = tuple(tokens)
        if not key:
            raise ValueError("a lexicon entry needs at least one token")
        for t in key:
            if not isinstance(t, str) or not t or not _ASCII_WS.isdisjoint(t):
                raise ValueError(f"bad token {t!r} in lexicon entry {key!r}")
        if self.ignore_case:
            key = tuple(t.lower() for t in key)
        folds = frozenset(folds) if folds else _ALL_FOLDS
        for f in folds:
            if not isinstance(f, int) or isinstance(f, bool) or not 0 <= f < self.n_folds:
                if self.n_folds:
                    raise ValueError(f"fold {f!r} out of range for {self.n_folds} folds")
                raise ValueError("folds given for an entry of a lexicon without folds")
        self.entries[key] = _merge(self.entries.get(key), folds)
        if len(key) > self.max_len:
            self.max_len = len(key)
        self._index = None

    def __len__(self):
        return len(self.entries)

    def __contains__(self, tokens):
        key = (tokens,) if isinstance(tokens, str) else tuple(tokens)
        if self.ignore_case:
            key = tuple(t.lower() for t in key)
        return key in self.entries

    def __repr__(self):
        jk = f", n_folds={self.n_folds}" if self.n_folds else ""
        return (f"<Lexicon {self.name!r}: {len(self.entries)} entries, "
                f"max_len={self.max_len}{jk}, ignore_case={self.ignore_case}>")

    # -- matching ------------------------------------------------------

    def _build_index(self):
        # first token -> lengths of the entries starting with it, longest first
        lengths = {}
        # fold -> entries seen in that fold only (the ones a token of that fold must not match)
        own = {}
        for key, folds in self.entries.items():
            lengths.setdefault(key[0], set()).add(len(key))
            if len(folds) == 1:
                (f,) = folds
                own.setdefault(f, set()).add(key)
        starts = {tok: tuple(sorted(ls, reverse=True)) for tok, ls in lengths.items()}
        self._index = (starts, {f: frozenset(keys) for f, keys in own.items()})
        return self._index

    def match(self, tokens, fold=None):
        """Lexicon feature values of a sentence: one ``"B"``, ``"I"`` or None per token.

        Scanning left to right, at each position the longest usable entry
        starting there is taken: its first token gets ``"B"``, the others
        ``"I"``, and the scan goes on after it (matches never overlap); a
        position where no entry starts gets None and the scan moves one token.
        With ``fold`` None (test time) every entry is usable; with a fold
        ``f`` of a jackknife lexicon, only entries seen in some fold other
        than ``f`` (or without a fold list) are.  ``fold`` is ignored by a
        lexicon without folds.
        """
        n = len(tokens)
        out = [None] * n
        if n == 0 or not self.entries:
            return out
        index = self._index or self._build_index()
        starts = index[0]
        excluded = None
        if fold is not None and self.n_folds:
            if not isinstance(fold, int) or isinstance(fold, bool) or not 0 <= fold < self.n_folds:
                raise ValueError(f"fold {fold!r} out of range for {self.n_folds} folds")
            excluded = index[1].get(fold)
        toks = [t.lower() for t in tokens] if self.ignore_case else tokens
        entries = self.entries
        get = starts.get
        i = 0
        while i < n:
            lens = get(toks[i])
            if lens is None:
                i += 1
                continue
            for length in lens:
                j = i + length
                if j > n:
                    continue
                key = tuple(toks[i:j])
                if key in entries and (excluded is None or key not in excluded):
                    out[i] = "B"
                    for k in range(i + 1, j):
                        out[k] = "I"
                    i = j
                    break
            else:
                i += 1
        return out

    # -- reading and writing -------------------------------------------

    def to_lines(self):
        """The lexicon in file format, one string per line without line ends."""
        lines = []
        if self.n_folds:
            lines.append(f"# {_HEADER_WORD} folds={self.n_folds}")
        for key in sorted(self.entries):
            line = " ".join(key)
            if line[0] in "#\\":
                line = "\\" + line
            folds = self.entries[key]
            if folds:
                line += "\t" + ",".join(map(str, sorted(folds)))
            lines.append(line)
        return lines

    def write(self, path):
        """Write the lexicon to ``path`` atomically (temporary file, then rename)."""

        with AtomicWriter(path) as f:
            for line in self.to_lines():
                f.write(line + "\n")

    @classmethod
    def from_lines(cls, lines, name, ignore_case=False, path="<model>"):
        """Parse a lexicon from an iterable of lines (str, or UTF-8 bytes), as
        stored in a model file; ``path`` names the source in errors."""
        return cls._parse(lines, name, ignore_case, path)

    @classmethod
    def read(cls, path, name=None, ignore_case=False):
        """Read a lexicon file; ``name`` defaults to the file name without ``.lex``."""
        fspath = os.fsdecode(os.fspath(path))
        if name is None:
            name = os.path.basename(fspath)
            if name.endswith(LEXICON_SUFFIX) and len(name) > len(LEXICON_SUFFIX):
                name = name[: -len(LEXICON_SUFFIX)]
        try:
            f = open(fspath, "rb")
        except OSError as e:
            raise CrftkError(f"cannot open for reading ({e.strerror or e})", fspath) from None
        from crftk.io.conll import bounded_lines
        with f:
            return cls._parse(bounded_lines(f, fspath), name, ignore_case, fspath)

    @classmethod
    def _parse(cls, lines, name, ignore_case, path):
        lex = cls(name, ignore_case=ignore_case)
        seen_entry = False
        lineno = 0
        for raw in lines:
            lineno += 1
            if isinstance(raw, bytes):
                if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    raw = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise CrftkError(f"not valid UTF-8 (byte {e.start + 1} of the line): lexicon files are UTF-8 "
                                     f"whatever the data's encoding (convert it, e.g. iconv -f latin1 -t utf-8)",
                                     path, lineno) from None
            elif lineno == 1 and raw.startswith("\ufeff"):
                raw = raw[1:]
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            if line[0] == "#":
                fields = line.split()
                if len(fields) > 1 and fields[0] == "#" and fields[1] == _HEADER_WORD:
                    lex._header(fields, seen_entry, path, lineno)
                continue
            if line[0] == "\\":
                line = line[1:]
            text, tab, fold_text = line.partition("\t")
            tokens = _split_entry(text)
            if not tokens:
                raise CrftkError("entry without tokens", path, lineno)
            folds = _ALL_FOLDS
            fold_text = fold_text.strip()
            if fold_text:
                folds = _parse_folds(fold_text, lex.n_folds, path, lineno)
            lex.add(tokens, folds)
            seen_entry = True
        return lex

    def _header(self, fields, seen_entry, path, lineno):
        k = None
        if len(fields) == 3 and fields[2].startswith("folds="):
            value = fields[2][len("folds="):]
            if value.isascii() and value.isdigit():
                k = int(value)
        if k is None:
            raise CrftkError(f"malformed header (expected '# {_HEADER_WORD} folds=K')",
                             path, lineno)
        if k < 2:
            raise CrftkError(f"a jackknife lexicon needs at least 2 folds, not {k}", path, lineno)
        if seen_entry:
            raise CrftkError("the header must come before the first entry", path, lineno)
        if self.n_folds:
            raise CrftkError("second header", path, lineno)
        self.n_folds = k


def _parse_folds(text, n_folds, path, lineno):
    if not n_folds:
        raise CrftkError(
            f"fold list {text!r} in a lexicon without folds "
            f"(a jackknife lexicon starts with '# {_HEADER_WORD} folds=K')", path, lineno)
    folds = set()
    for item in text.split(","):
        item = item.strip()
        if not (item.isascii() and item.isdigit()):
            raise CrftkError(f"bad fold list {text!r} (expected numbers separated by commas)",
                             path, lineno)
        f = int(item)
        if f >= n_folds:
            raise CrftkError(f"fold {f} out of range (the lexicon has {n_folds} folds: "
                             f"0 to {n_folds - 1})", path, lineno)
        folds.add(f)
    return frozenset(folds)


# ---------------------------------------------------------------------------
# building lexicons from labeled data


def fold_of(doc_index, n_folds):
    """The jackknife fold of a document: documents go to folds round robin."""
    if n_folds < 1:
        raise ValueError(f"n_folds must be at least 1, not {n_folds!r}")
    if doc_index < 0:
        raise ValueError(f"document index must not be negative, not {doc_index!r}")
    return doc_index % n_folds


def _check_build_options(n_folds, min_count):
    if not isinstance(n_folds, int) or isinstance(n_folds, bool) or n_folds < 0:
        raise CrftkError(f"the number of folds must be 0 or at least 2, not {n_folds!r}")
    if n_folds == 1:
        raise CrftkError("with 1 fold no entry could ever match a training token: "
                         "use 0 folds (no jackknife) or at least 2")
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 1:
        raise CrftkError(f"the minimum count must be a positive integer, not {min_count!r}")


def _label_min_columns(label_col):
    """Columns a token line needs: the word (column 0) and the label column."""
    need = label_col + 1 if label_col >= 0 else -label_col
    return max(2, need)


def build_lexicons(sentences, *, label_col=-1, scheme="auto", n_folds=0, ignore_case=False,
                   min_count=1):
    """One lexicon per chunk type of the gold labels of ``sentences``.

    The chunks of each sentence's label column (``label_col``, read with
    :func:`crftk.evaluation.conlleval.chunks` under ``scheme``) give the entries: the
    words (column 0) of each chunk.  With ``n_folds`` > 0 (at least 2) the
    lexicons are jackknife lexicons and each entry records the folds
    (:func:`fold_of` of the sentence's document) it occurred in.  Entries
    occurring fewer than ``min_count`` times (counted after lower-casing with
    ``ignore_case``) are dropped; a type keeps its (possibly empty) lexicon.
    Returns ``{type: Lexicon}`` with each lexicon named after its type.
    """

    _check_build_options(n_folds, min_count)
    counts = {}  # type -> {key: count}
    folds = {}  # type -> {key: set of folds}
    for s in sentences:
        try:
            words = [row[0] for row in s.rows]
            tags = [row[label_col] for row in s.rows]
        except IndexError:
            raise CrftkError(f"a token has no label column {label_col}",
                             line=s.line or None) from None
        try:
            found = chunks(tags, scheme)
        except CrftkError as e:
            raise CrftkError(e.message, e.path, _bad_tag_line(s, tags, scheme)) from None
        if not found:
            continue
        if ignore_case:
            words = [w.lower() for w in words]
        fold = fold_of(s.doc, n_folds) if n_folds else None
        for typ, start, end in found:
            key = tuple(words[start:end])
            if typ not in counts:      # a type names its lexicon file: refuse it where it first occurs
                try:
                    _file_name(typ)
                except CrftkError as e:
                    raise CrftkError(e.message, getattr(s, "source", None),
                                     s.line + start if s.line else None) from None
            c = counts.setdefault(typ, {})
            c[key] = c.get(key, 0) + 1
            if fold is not None:
                folds.setdefault(typ, {}).setdefault(key, set()).add(fold)
    lexicons = {}
    for typ in sorted(counts):
        lex = Lexicon(typ, ignore_case=ignore_case, n_folds=n_folds)
        type_folds = folds.get(typ, {})
        for key, count in counts[typ].items():
            if count >= min_count:
                lex.add(key, type_folds.get(key, ()))
        lexicons[typ] = lex
    return lexicons


def _bad_tag_line(sentence, tags, scheme):
    """File line of the first tag of ``sentence`` not valid under ``scheme``
    (the sentence's first line if none is found alone; None in memory)."""

    if not sentence.line:
        return None
    for k, tag in enumerate(tags):
        try:
            chunks([tag], scheme)
        except CrftkError:
            return sentence.line + k
    return sentence.line


def _file_name(name):
    bad = (not name or name in (".", "..") or "/" in name or "\0" in name
           or (os.sep != "/" and os.sep in name) or (os.altsep and os.altsep in name))
    if bad:
        raise CrftkError(f"chunk type {name!r} cannot name a lexicon file")
    return name + LEXICON_SUFFIX


def check_lexicon_directory(out_dir):
    """Raise CrftkError unless ``out_dir`` is a directory the lexicons can be written to, or can
    be made one: as for every crftk output, its parent directory must exist (a mistyped path
    is refused, not created)."""
    out_dir = os.fsdecode(os.fspath(out_dir))
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise CrftkError("cannot write the lexicons: not a directory", out_dir)
    where = out_dir if os.path.isdir(out_dir) else os.path.dirname(os.path.normpath(out_dir)) or "."
    if not os.path.isdir(where):
        raise CrftkError(f"cannot write the lexicons: directory {where} does not exist", out_dir)
    if not os.access(where, os.W_OK | os.X_OK):
        raise CrftkError(f"cannot write the lexicons: no permission to write in {where}", out_dir)


def write_lexicons(lexicons, out_dir):
    """Write each lexicon to ``out_dir/<name>.lex`` (atomically; ``out_dir`` is
    created if missing, its parent must exist).  ``lexicons`` is a dict ``{name: Lexicon}``
    (the file is named after the key).  Returns the paths written, in key order."""
    out_dir = os.fsdecode(os.fspath(out_dir))
    names = sorted(lexicons)
    files = [_file_name(n) for n in names]  # check every name before writing anything
    check_lexicon_directory(out_dir)
    try:
        os.mkdir(out_dir)
    except FileExistsError:
        pass
    except OSError as e:
        raise CrftkError(f"cannot create directory ({e.strerror or e})", out_dir) from None
    paths = []
    for name, file in zip(names, files):
        path = os.path.join(out_dir, file)
        lexicons[name].write(path)
        paths.append(path)
    return paths


def _corpus_with_paths(inputs, min_columns, where, encoding="utf-8"):
    """Sentences of several CoNLL files (numbered as by conll.iter_corpus);
    ``where[0]`` holds the path of the file being read."""

    doc = 0
    n_columns = None
    for path in inputs:
        if isinstance(path, (str, bytes, os.PathLike)):
            name = os.fsdecode(os.fspath(path))
            where[0] = "<stdin>" if name == "-" else name
        else:
            name = getattr(path, "name", None)
            where[0] = name if isinstance(name, str) else None
        last = None
        for last in iter_corpus(path, first_doc=doc, n_columns=n_columns,
                                min_columns=min_columns, encoding=encoding):
            yield last
        if last is not None:
            doc = last.doc + 1
            if n_columns is None:
                n_columns = len(last.rows[0])


def lexicon_command(inputs, out_dir, *, label_col=-1, scheme="auto", folds=0, ignore_case=False,
                    min_count=1, log=None, encoding="utf-8"):
    """Build one lexicon per chunk type from CoNLL files and write them to ``out_dir``.

    ``inputs`` is a list of CoNLL files (``"-"``: standard input) in ``encoding``, read as one
    corpus (documents numbered across files, as in training); the lexicon files are
    UTF-8, as every lexicon a template reads.  Logs one line
    per type through ``log`` (a callable taking a string; None: silent) and
    returns a summary::

        {"out_dir": ..., "sentences": S, "documents": D, "n_folds": K,
         "lexicons": {type: {"entries": N, "max_len": L, "path": ...}}}
    """
    if isinstance(inputs, (str, bytes, os.PathLike)):
        inputs = [inputs]
    inputs = list(inputs)
    if not inputs:
        raise CrftkError("no input files")
    _check_build_options(folds, min_count)
    check_lexicon_directory(out_dir)
    check_inputs(inputs)
    where = [None]
    stats = {"sentences": 0, "docs": set()}

    def counted(sentences):
        for s in sentences:
            stats["sentences"] += 1
            stats["docs"].add(s.doc)
            if log is not None and stats["sentences"] % 1000 == 0:
                status(log, f"reading {where[0] or 'the input'}: {stats['sentences']:,} sentences, "
                            f"{len(stats['docs']):,} documents")
            yield s

    sentences = counted(_corpus_with_paths(inputs, _label_min_columns(label_col), where, codec(encoding)))
    try:
        lexicons = build_lexicons(sentences, label_col=label_col, scheme=scheme, n_folds=folds,
                                  ignore_case=ignore_case, min_count=min_count)
    except CrftkError as e:
        if e.path is None and where[0] is not None:
            raise CrftkError(e.message, where[0], e.line) from None
        raise
    if not lexicons:        # nothing to write: the output folder is not created either
        if log is not None:
            log(f"crftk: warning: no chunks found in {stats['sentences']} sentences: no lexicon written")
        paths = []
    else:
        # the files' names come from the entity types read: known only now, before any is written
        check_apart([("lexicon", [os.path.join(out_dir, _file_name(n)) for n in lexicons])], [("input", inputs)])
        if log is not None:
            status(log, f"writing {len(lexicons)} lexicons to {os.fsdecode(os.fspath(out_dir))} ...")
        paths = write_lexicons(lexicons, out_dir)
    summary = {
        "out_dir": os.fsdecode(os.fspath(out_dir)),
        "sentences": stats["sentences"],
        "documents": len(stats["docs"]),
        "n_folds": folds,
        "lexicons": {},
    }
    for path, (typ, lex) in zip(paths, sorted(lexicons.items())):
        summary["lexicons"][typ] = {"entries": len(lex), "max_len": lex.max_len, "path": path}
        if log is not None:
            jk = f", {folds} folds" if folds else ""
            log(f"{typ}: {len(lex)} entries (longest {lex.max_len} tokens{jk}) -> {path}")
    return summary
