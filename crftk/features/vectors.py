"""Word vectors for ``%vec[r,c,NAME]`` template lines: tables read from word2vec/GloVe text files.

A file holds an optional header line ``count dim`` (word2vec), then one line per word:
``word v1 ... vD``, fields split at ASCII white space (so a word never holds a space). Every
row must have the same dimension (the header's, else the first row's) and finite values;
a word given twice keeps its first vector. A table is kept as float32 [words, D] and stored
in the model file with its words, so that tagging needs the model alone.

Lookup: ``exact`` finds the word as written; ``lowercase`` also tries the word lower-cased
when it has no vector as written (for tables of lower-cased words such as GloVe's).
"""

import warnings

import numpy as np

from crftk.errors import CrftkError, UsageError, shown
from crftk.features.templates import NAME
from crftk.features.templates import VECTOR_LOOKUPS as LOOKUPS
#: Largest dimension of a vector table: word2vec and GloVe use 50-1000.
MAX_DIM = 10_000


class VectorTable:
    """One table of word vectors: ``words`` (list of str), ``table`` float32 [len(words), dim]."""

    def __init__(self, name, words, table, lookup="exact"):
        if lookup not in LOOKUPS:
            raise CrftkError(f"vector lookup must be one of {', '.join(LOOKUPS)} (got {shown(lookup)})")
        self.name = name
        self.words = list(words)
        self.table = np.ascontiguousarray(table, dtype=np.float32)
        self.lookup = lookup
        self.index = {}
        for i, w in enumerate(self.words):
            self.index.setdefault(w, i)
        self._ids = None

    @property
    def dim(self):
        return int(self.table.shape[1])

    @property
    def nbytes(self):
        return int(self.table.nbytes) + sum(len(w.encode("utf-8", "surrogatepass")) + 8 for w in self.words)

    def describe(self):
        """One line for crftk info: its size and lookup."""
        return (f"{len(self.words):,} words x {self.dim} dimensions, float32, "
                f"{self.nbytes / 2**20:.1f} MiB, lookup {self.lookup}")

    # lookup ------------------------------------------------------------------
    def rows(self, strings):
        """The row of each word (int64; -1: no vector)."""
        get = self.index.get
        out = np.fromiter((get(s, -1) for s in strings), dtype=np.int64, count=len(strings))
        if self.lookup == "lowercase":
            self._lowered(out, np.flatnonzero(out < 0), [strings[i] for i in np.flatnonzero(out < 0).tolist()])
        return out

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_ids"] = None        # the compiled lookup is rebuilt on demand: it does not pickle
        return state

    def column_ids(self):
        """The compiled lookup of the words' bytes (crftk._encode.ColumnIds), built once: call it
        before threads share the table."""
        if self._ids is None:
            from crftk import _encode
            self._ids = _encode.ColumnIds(self.words)
        return self._ids

    def batch_rows(self, batch, col):
        """The row of the word in file column ``col`` of each token of a RawBatch (int64; -1: none):
        the exact lookup in compiled code, the lower-cased one for the words it misses."""
        from crftk import _encode, _textio
        out = np.ascontiguousarray(_encode.column_ids(batch.block, batch.tok_start, batch.tok_end, [col],
                                                      [self.column_ids()])[:, 0])
        if self.lookup == "lowercase":
            missed = np.flatnonzero(out < 0)
            if missed.size:
                self._lowered(out, missed, _textio.field_strings(batch.block, batch.tok_start, batch.tok_end,
                                                                 col, missed))
        return out

    def _lowered(self, out, where, strings):
        """Fill ``out[where]`` with the rows of the lower-cased ``strings`` (one lookup per distinct word)."""
        if not strings:
            return
        distinct, inverse = np.unique(np.asarray(strings, dtype=object), return_inverse=True)
        get = self.index.get
        found = np.fromiter((get(w.lower(), -1) for w in distinct.tolist()), dtype=np.int64, count=distinct.size)
        out[where] = found[inverse.reshape(-1)]

    # files -------------------------------------------------------------------
    @classmethod
    def read(cls, path, name, lookup="exact"):
        """Read a word2vec/GloVe text file; one-line errors name the file and line.

        The numbers are parsed a block of lines at a time into float32 arrays (a 400k x 300
        table is 460 MiB, as stored; a Python float per value would take 3.8 GB)."""
        from crftk.io.conll import bounded_lines
        words, blocks = [], []
        reader = _Rows(path)
        try:
            with open(path, "rb") as fh:
                for lineno, raw in enumerate(bounded_lines(fh, path), 1):
                    if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                        raw = raw[3:]                  # a UTF-8 byte order mark
                    fields = raw.split()
                    if not fields:
                        continue
                    if lineno == 1 and len(fields) == 2 and all(f.isdigit() for f in fields):
                        reader.header(int(fields[0]), int(fields[1]), lineno)
                        continue
                    try:
                        words.append(fields[0].decode("utf-8"))
                    except UnicodeDecodeError:
                        raise CrftkError("not valid UTF-8", path, lineno) from None
                    if reader.add(raw, fields, lineno):
                        blocks.append(reader.flush())
        except FileNotFoundError:
            raise CrftkError(f"cannot open vectors {name}: no such file", path) from None
        except IsADirectoryError:
            raise CrftkError(f"cannot open vectors {name}: is a directory", path) from None
        except OSError as e:
            raise CrftkError(f"cannot open vectors {name}: {e.strerror or e}", path) from None
        blocks.append(reader.flush())
        if not words:
            raise CrftkError(f"vectors {name}: the file has no vectors", path)
        if reader.expected is not None and reader.expected != len(words):
            raise CrftkError(f"vectors {name}: the header says {reader.expected:,} vectors, the file has "
                             f"{len(words):,} (truncated?)", path)
        table = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
        return cls(name, words, table.reshape(len(words), reader.dim), lookup)


class _Rows:
    """The value fields of a vector file's lines, checked for their count as they come and
    parsed a block at a time into float32."""

    BLOCK_VALUES = 1 << 18

    def __init__(self, path):
        self.path = path
        self.dim = self.expected = None
        self.pending, self.lines = [], []

    def header(self, expected, dim, lineno):
        if not 1 <= dim <= MAX_DIM:
            raise CrftkError(f"vector dimension {dim} in the header is not from 1 to {MAX_DIM:,}", self.path, lineno)
        self.expected, self.dim = expected, dim

    def add(self, raw, fields, lineno):
        """Take a line (its bytes and fields, word first); True when a block is ready to flush."""
        if self.dim is None:
            self.dim = len(fields) - 1
            if not 1 <= self.dim <= MAX_DIM:
                raise CrftkError(f"a vector line is 'word v1 ... vD' with D from 1 to {MAX_DIM:,}; "
                                 f"this one has {self.dim} values", self.path, lineno)
        if len(fields) != self.dim + 1:
            raise CrftkError(f"{len(fields) - 1} values where the vectors have {self.dim} (the "
                             f"{'header' if self.expected is not None else 'first line'} says)", self.path, lineno)
        self.pending.append(raw[raw.index(fields[0]) + len(fields[0]):])     # the values' text
        self.lines.append(lineno)
        return len(self.pending) * self.dim >= self.BLOCK_VALUES

    def flush(self):
        """The pending rows as a flat float32 array; a bad value is an error at its line."""
        pending, lines = self.pending, self.lines
        self.pending, self.lines = [], []
        if not pending:
            return np.zeros(0, dtype=np.float32)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)     # "could not be read to its end"
                values = np.fromstring(b" ".join(pending), dtype=np.float64, sep=" ")
        except ValueError:                    # the same, as newer numpy says it
            values = None
        if values is None or values.size != len(pending) * self.dim:
            # a text C's strtod stops at: float() decides, each line's fields in turn
            fields = [v for text in pending for v in text.split()]
            k = next((k for k, v in enumerate(fields) if not _is_float(v)), None)
            if k is not None:
                raise CrftkError(f"{shown(fields[k].decode('utf-8', 'replace'))} is not a number", self.path,
                                 lines[k // self.dim])
            values = np.array([float(v) for v in fields], dtype=np.float64)
        if not np.isfinite(values).all():
            k = int(np.flatnonzero(~np.isfinite(values))[0])
            raise CrftkError("a vector value is not finite", self.path, lines[k // self.dim])
        if values.size and np.abs(values).max() > np.finfo(np.float32).max:
            k = int(np.flatnonzero(np.abs(values) > np.finfo(np.float32).max)[0])
            raise CrftkError("a vector value is beyond float32's range", self.path, lines[k // self.dim])
        return values.astype(np.float32)


def _is_float(text):
    try:
        float(text)
        return True
    except ValueError:
        return False


def parse_specs(specs):
    """{NAME: path} of the --vectors NAME=FILE options (a dict, as the API takes, passes through)."""
    if specs is None:
        return {}
    if isinstance(specs, dict):
        items = list(specs.items())
    else:
        if isinstance(specs, str):
            specs = [specs]
        items = []
        for spec in specs:
            name, sep, path = str(spec).partition("=")
            if not sep or not path:
                raise UsageError(f"--vectors takes NAME=FILE, not {shown(spec)}")
            items.append((name, path))
    out = {}
    for name, path in items:
        if not isinstance(name, str) or not NAME.match(name):
            raise UsageError(f"bad vector table name {shown(name)} (letters, digits, '_', '.', '-')")
        if name in out:
            raise UsageError(f"vectors {name} given twice")
        out[name] = path
    return out


def attach_vectors(template, specs, lookup="exact", log=None):
    """Read the vector tables ``specs`` names ({NAME: path} or NAME=FILE strings) that the
    template's %vec lines use, onto ``template.vectors``; a table the template uses and the
    specs lack is an error at its line, one given but unused a warning (through ``log``)."""
    specs = parse_specs(specs)
    if lookup not in LOOKUPS:
        raise UsageError(f"--vectors-lookup must be one of {', '.join(LOOKUPS)} (got {shown(lookup)})")
    used = template.vector_lines
    for name, lineno in used.items():
        if name not in specs:
            raise CrftkError(f"%vec reads vectors {name}, which are not given (crftk train --vectors "
                             f"{name}=FILE; crftk.CRF(vectors={{{name!r}: FILE}}))", template.path, lineno)
    for name in specs:
        if name not in used and log is not None:
            log(f"crftk: warning: --vectors {name} is not read by any %vec line of the template; it is not used")
    template.vectors = {name: VectorTable.read(specs[name], name, lookup) for name in used}
    return template


def vectors_to_arrays(vectors):
    """(meta, arrays) of the vector tables a feature space holds, for the model file."""
    from crftk.io.container import pack_strings
    meta, arrays = {}, {}
    for name, vt in vectors.items():
        arrays[f"vectors.{name}.offsets"], arrays[f"vectors.{name}.blob"] = pack_strings(vt.words)
        arrays[f"vectors.{name}.table"] = vt.table.reshape(-1)      # model files hold flat arrays
        meta[name] = {"dim": vt.dim, "lookup": vt.lookup}
    return meta, arrays


def vectors_from_arrays(meta, arrays, path=None):
    """The vector tables of a model file; an inconsistent one is a one-line error naming it."""
    from crftk.io.container import unpack_strings
    out = {}
    if not isinstance(meta, dict):
        raise CrftkError("model file is inconsistent: its vectors are not a table", path)
    for name, opts in meta.items():
        if not isinstance(opts, dict) or opts.get("lookup") not in LOOKUPS or not isinstance(opts.get("dim"), int):
            raise CrftkError(f"model file is inconsistent: vectors {shown(name)} have no dimension or lookup", path)
        words = unpack_strings(arrays[f"vectors.{name}.offsets"], arrays[f"vectors.{name}.blob"], path=path)
        table = np.asarray(arrays[f"vectors.{name}.table"])
        if (table.dtype != np.float32 or table.ndim != 1 or not 1 <= opts["dim"] <= MAX_DIM
                or table.size != len(words) * opts["dim"] or not np.isfinite(table).all()):
            raise CrftkError(f"model file is inconsistent: vectors {shown(name)} are not {len(words)} finite "
                             f"float32 rows of {opts['dim']}", path)
        out[name] = VectorTable(name, words, table.reshape(len(words), opts["dim"]), opts["lookup"])
    return out
