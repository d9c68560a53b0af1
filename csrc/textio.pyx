# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CoNLL text in compiled code: reading lines into sentences, template keys, writing rows.

crftk.io.conll's pure-Python reader is the reference: ``Reader`` applies the same rules
(see that module's docstring) to bytes, a block at a time, and keeps for each token only
where its line is in the block. Columns are split again where they are needed (the
vocabulary lookup and the output row), which costs less than keeping them.

``ColumnIds`` maps column values (UTF-8 bytes) to a vocabulary's ids; ``Encoder`` turns
the column ids of a batch into the attribute ids of crftk.features.space (the same keys:
``prefix * radix + value``, looked up in hash tables built from the sorted key arrays);
``format_rows`` writes a batch back with one or more appended label columns.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t, uint64_t, uint8_t
from libc.stdlib cimport malloc, free, realloc
from libc.string cimport memcpy, memcmp, memchr

cnp.import_array()

# Line-level outcomes of Reader.parse besides success (crftk.io.conll words the messages).
ERR_NONE = 0
ERR_UTF8 = 1
ERR_COLUMNS = 2
ERR_TOO_LONG = 3

cdef uint8_t WS[256]
for _c in range(256):
    WS[_c] = 1 if _c in (0x20, 0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F) else 0


cdef inline Py_ssize_t utf8_invalid(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Offset of the first byte of p[:n] that is not valid UTF-8 (as Python decodes it), or -1."""
    cdef Py_ssize_t i = 0
    cdef uint8_t c, c1
    cdef int need
    while i < n:
        c = p[i]
        if c < 0x80:
            i += 1
            continue
        if c < 0xC2:
            return i
        if c < 0xE0:
            need = 1
        elif c < 0xF0:
            need = 2
        elif c < 0xF5:
            need = 3
        else:
            return i
        if i + 1 >= n:
            return i
        c1 = p[i + 1]
        if (c1 & 0xC0) != 0x80:
            return i
        if c == 0xE0 and c1 < 0xA0:
            return i
        if c == 0xED and c1 >= 0xA0:       # surrogates
            return i
        if c == 0xF0 and c1 < 0x90:
            return i
        if c == 0xF4 and c1 >= 0x90:
            return i
        if need >= 2:
            if i + 2 >= n or (p[i + 2] & 0xC0) != 0x80:
                return i
        if need == 3:
            if i + 3 >= n or (p[i + 3] & 0xC0) != 0x80:
                return i
        i += need + 1
    return -1


cdef inline int split_fields(const uint8_t* p, Py_ssize_t n, Py_ssize_t* starts, Py_ssize_t* ends,
                             int cap) noexcept nogil:
    """Split p[:n] at ASCII white space; the first cap fields' bounds; returns the field count."""
    cdef Py_ssize_t i = 0, j
    cdef int k = 0
    while True:
        while i < n and WS[p[i]]:
            i += 1
        if i >= n:
            return k
        j = i
        while j < n and not WS[p[j]]:
            j += 1
        if k < cap:
            starts[k] = i
            ends[k] = j
        k += 1
        i = j


cdef class Grow:
    """A growable int64 array."""
    cdef int64_t* data
    cdef Py_ssize_t n, cap

    def __cinit__(self):
        self.cap = 1024
        self.n = 0
        self.data = <int64_t*> malloc(self.cap * sizeof(int64_t))
        if self.data == NULL:
            raise MemoryError()

    def __dealloc__(self):
        free(self.data)

    cdef int push(self, int64_t v) except -1:
        cdef int64_t* d
        if self.n == self.cap:
            d = <int64_t*> realloc(self.data, 2 * self.cap * sizeof(int64_t))
            if d == NULL:
                raise MemoryError()
            self.data, self.cap = d, 2 * self.cap
        self.data[self.n] = v
        self.n += 1
        return 0

    cdef array(self):
        out = np.empty(self.n, dtype=np.int64)
        cdef int64_t[::1] o = out
        if self.n:
            memcpy(&o[0], self.data, self.n * sizeof(int64_t))
        return out


cdef class Reader:
    """The state of reading one CoNLL file: line number, document, column count, separator.

    ``parse(block, eof, max_tokens, max_sentences)`` reads the complete sentences at the
    start of ``block`` (bytes: whole lines; with ``eof`` the rest of the file) until the
    batch holds ``max_tokens`` tokens or ``max_sentences`` sentences, and returns the batch
    arrays and how many bytes it used; the caller passes the rest again with more bytes.
    On a bad line it returns None and sets ``error`` (ERR_*), ``error_line`` and the
    figures the message needs.
    """

    cdef public Py_ssize_t lineno, doc, fixed, fixed_at, limit, error_line, error_found, error_start
    cdef public int error
    cdef public bint doc_used, after_kept, started
    cdef public object separator, allowed
    cdef uint8_t allowed_mask[64]
    cdef bint any_count
    cdef Py_ssize_t min_columns

    def __init__(self, allowed, min_columns=1, first_doc=0, limit=None):
        """allowed: a set of column counts or None (any); limit: longest sentence or None."""
        cdef int k
        self.lineno = 0
        self.doc = first_doc
        self.doc_used = False
        self.after_kept = False
        self.started = False
        self.fixed = -1
        self.fixed_at = 0
        self.min_columns = min_columns
        self.limit = -1 if limit is None else limit
        self.separator = None
        self.allowed = allowed
        self.any_count = allowed is None
        for k in range(64):
            self.allowed_mask[k] = 0
        if allowed is not None:
            for k in allowed:
                if k < 64:
                    self.allowed_mask[k] = 1
        self.error = ERR_NONE

    def parse(self, const uint8_t[::1] block, bint eof, Py_ssize_t max_tokens, Py_ssize_t max_sentences):
        """(used bytes, batch) or (0, None) on an error; batch: a dict of arrays (see conll.RawBatch)."""
        cdef Py_ssize_t n = block.shape[0]
        cdef const uint8_t* p = &block[0] if n else NULL
        cdef Py_ssize_t pos = 0, line_start, line_end, nl, body_end, bad, k
        cdef Py_ssize_t starts[3]
        cdef Py_ssize_t ends[3]
        cdef Py_ssize_t nf, rows = 0, sent_line = 0, tokens = 0, sentences = 0
        cdef Py_ssize_t rollback_pos = 0, rollback_line = 0, rollback_pt = 0, rollback_items = 0
        cdef Py_ssize_t rollback_tokens = 0
        cdef bint keep
        cdef const uint8_t* nl_ptr
        tok_start, tok_end = Grow(), Grow()
        sent_ptr, sent_lines, sent_docs = Grow(), Grow(), Grow()
        items, pt_start, pt_end = Grow(), Grow(), Grow()
        held = Grow()                   # pass-through lines inside the current sentence
        sent_ptr.push(0)
        cdef Py_ssize_t lineno = self.lineno
        while pos < n:
            if rows == 0 and (tokens >= max_tokens or sentences >= max_sentences):
                break
            nl_ptr = <const uint8_t*> memchr(p + pos, 10, n - pos)
            if nl_ptr == NULL:
                if not eof:
                    break                # an incomplete line: wait for more bytes
                nl = n
            else:
                nl = nl_ptr - p
            line_start = pos
            line_end = nl                # without the "\n"
            if not self.started:
                self.started = True
                if line_end - line_start >= 3 and p[line_start] == 0xEF and p[line_start + 1] == 0xBB \
                        and p[line_start + 2] == 0xBF:
                    line_start += 3
            lineno += 1
            pos = nl + 1 if nl < n else n
            bad = utf8_invalid(p + line_start, line_end - line_start)
            if bad >= 0:
                self.error, self.error_line, self.error_start = ERR_UTF8, lineno, bad
                return 0, None
            nf = split_fields(p + line_start, line_end - line_start, starts, ends, 2)
            if nf == 0:
                if rows:
                    sentences += self._finish(held, items, pt_start, pt_end, sent_ptr, sent_lines, sent_docs,
                                              tokens, sent_line)
                    rows = 0
                elif self.after_kept:
                    items.push(-1 - pt_start.n)
                    pt_start.push(line_start)
                    pt_end.push(line_start)
                self.after_kept = False
                continue
            keep = False
            if ends[0] - starts[0] >= 10 and memcmp(p + line_start + starts[0], b"-DOCSTART-", 10) == 0:
                if rows:
                    sentences += self._finish(held, items, pt_start, pt_end, sent_ptr, sent_lines, sent_docs,
                                              tokens, sent_line)
                    rows = 0
                if self.doc_used:
                    self.doc += 1
                    self.doc_used = False
                keep = True
            elif (nf > 1 and line_end - line_start >= 2 and p[line_start] == 35 and p[line_start + 1] == 32
                  and ((ends[1] - starts[1] == 4 and memcmp(p + line_start + starts[1], b"prob", 4) == 0)
                       or (ends[1] - starts[1] == 5 and memcmp(p + line_start + starts[1], b"nbest", 5) == 0))):
                keep = True
            if keep:
                body_end = line_end
                while body_end > line_start and (p[body_end - 1] == 13 or p[body_end - 1] == 10):
                    body_end -= 1
                if rows:
                    held.push(line_start)
                    held.push(body_end)
                else:
                    items.push(-1 - pt_start.n)
                    pt_start.push(line_start)
                    pt_end.push(body_end)
                    self.after_kept = True
                continue
            self.after_kept = False
            if self.fixed < 0:
                if nf < self.min_columns or not (self.any_count or (nf < 64 and self.allowed_mask[nf])
                                                 or (nf >= 64 and nf in self.allowed)):
                    self.error, self.error_line, self.error_found = ERR_COLUMNS, lineno, nf
                    return 0, None
                self.fixed, self.fixed_at = nf, lineno
                self.separator = "\t" if memchr(p + line_start, 9, line_end - line_start) != NULL else " "
            elif nf != self.fixed:
                self.error, self.error_line, self.error_found = ERR_COLUMNS, lineno, nf
                return 0, None
            if rows == 0:
                sent_line = lineno
                rollback_pos, rollback_line = line_start, lineno - 1
                if rollback_line == 0:
                    rollback_pos = 0         # the BOM is skipped again
                rollback_items, rollback_pt = items.n, pt_start.n
                rollback_tokens = tok_start.n
            elif self.limit >= 0 and rows >= self.limit:
                self.error, self.error_line, self.error_start = ERR_TOO_LONG, lineno, sent_line
                return 0, None
            tok_start.push(line_start)
            tok_end.push(line_end)
            rows += 1
            tokens += 1
        if rows:
            if eof and pos >= n:
                self._finish(held, items, pt_start, pt_end, sent_ptr, sent_lines, sent_docs, tokens, sent_line)
            else:                        # the sentence goes on past the block: read it again
                if rollback_line == 0:
                    self.started = False
                pos, lineno = rollback_pos, rollback_line
                items.n, pt_start.n, pt_end.n, tok_start.n = rollback_items, rollback_pt, rollback_pt, rollback_tokens
                tok_end.n = rollback_tokens
                self.after_kept = False
        self.lineno = lineno
        return pos, {"tok_start": tok_start.array(), "tok_end": tok_end.array(),
                     "sent_ptr": sent_ptr.array().astype(np.int32), "sent_line": sent_lines.array(),
                     "sent_doc": sent_docs.array(), "items": items.array(),
                     "pt_start": pt_start.array(), "pt_end": pt_end.array()}

    cdef int _finish(self, Grow held, Grow items, Grow pt_start, Grow pt_end, Grow sent_ptr,
                     Grow sent_lines, Grow sent_docs, Py_ssize_t tokens, Py_ssize_t line) except -1:
        """Ends the sentence being read (its pass-through lines, then its entry); returns 1, the
        sentences it ended."""
        cdef Py_ssize_t k
        for k in range(0, held.n, 2):
            items.push(-1 - pt_start.n)
            pt_start.push(held.data[k])
            pt_end.push(held.data[k + 1])
        held.n = 0
        items.push(sent_ptr.n - 1)
        sent_ptr.push(tokens)
        sent_lines.push(line)
        sent_docs.push(self.doc)
        self.doc_used = True
        return 1


# ------------------------------------------------------------------ hash tables

cdef inline uint64_t hash_bytes(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    cdef uint64_t h = 1469598103934665603ULL
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ p[i]) * 1099511628211ULL
    return h ^ (h >> 29)


cdef inline uint64_t hash_int(int64_t k) noexcept nogil:
    cdef uint64_t h = <uint64_t> k * 0x9E3779B97F4A7C15ULL
    return h ^ (h >> 31)


cdef class ColumnIds:
    """The ids of a vocabulary's strings, looked up by their UTF-8 bytes."""
    cdef bytes blob
    cdef const uint8_t* blobp
    cdef int64_t[::1] offs
    cdef int32_t[::1] slots
    cdef uint64_t mask

    def __init__(self, strings):
        encoded = [s.encode("utf-8", "surrogatepass") for s in strings]
        self.blob = b"".join(encoded)
        self.blobp = <const uint8_t*> (<char*> self.blob)
        offs = np.zeros(len(encoded) + 1, dtype=np.int64)
        if encoded:
            np.cumsum([len(e) for e in encoded], out=offs[1:])
        self.offs = offs
        cdef Py_ssize_t n = len(encoded), i
        cdef uint64_t size = 16, h
        while size < <uint64_t> (2 * n + 2):
            size *= 2
        self.mask = size - 1
        self.slots = np.full(size, -1, dtype=np.int32)
        with nogil:
            for i in range(n):
                if self._find(self.blobp + self.offs[i], self.offs[i + 1] - self.offs[i]) >= 0:
                    continue           # a vocabulary has no duplicates; keep the first anyway
                h = hash_bytes(self.blobp + self.offs[i], self.offs[i + 1] - self.offs[i]) & self.mask
                while self.slots[h] >= 0:
                    h = (h + 1) & self.mask
                self.slots[h] = <int32_t> i

    cdef inline int32_t _find(self, const uint8_t* p, Py_ssize_t n) noexcept nogil:
        cdef uint64_t h = hash_bytes(p, n) & self.mask
        cdef int32_t i
        cdef const uint8_t* b = self.blobp
        while True:
            i = self.slots[h]
            if i < 0:
                return -1
            if self.offs[i + 1] - self.offs[i] == n and memcmp(b + self.offs[i], p, n) == 0:
                return i
            h = (h + 1) & self.mask

    def lookup(self, bytes value):
        return self._find(<const uint8_t*> (<char*> value), len(value))


cdef class KeyIndex:
    """Index of each key of a sorted int64 array (a hash table in place of a binary search).

    Each slot holds the key and its index side by side: a lookup touches one cache line.
    """
    cdef int64_t[::1] slots       # key, index, key, index ...; key -1: empty
    cdef uint64_t mask

    def __init__(self, keys):
        cdef const int64_t[::1] k = np.ascontiguousarray(keys, dtype=np.int64)
        cdef Py_ssize_t n = k.shape[0], i
        cdef uint64_t size = 16, h
        while size < <uint64_t> (2 * n + 2):
            size *= 2
        self.mask = size - 1
        self.slots = np.full(2 * size, -1, dtype=np.int64)
        with nogil:
            for i in range(n):
                h = hash_int(k[i]) & self.mask
                while self.slots[2 * h] >= 0:
                    h = (h + 1) & self.mask
                self.slots[2 * h] = k[i]
                self.slots[2 * h + 1] = i

    cdef inline int64_t find(self, int64_t key) noexcept nogil:
        cdef uint64_t h
        cdef int64_t k
        if key < 0:
            return -1
        h = hash_int(key) & self.mask
        while True:
            k = self.slots[2 * h]
            if k == key:
                return self.slots[2 * h + 1]
            if k < 0:
                return -1
            h = (h + 1) & self.mask

    def lookup(self, int64_t key):
        return self.find(key)


# ------------------------------------------------------------------ encoding

cdef struct Macro:
    int row
    int column            # index among the encoder's columns
    int64_t radix
    Py_ssize_t pad        # pads[pad + k - 1]: the value k before the sentence; pads[pad + |row| + k - 1]: after


cdef struct Line:
    int first, n          # its macros: macros[first .. first + n - 1]
    int32_t offset
    const int64_t* direct     # one macro: rank of each value id (radix + 1 entries, the last -1)
    int map_first         # several: maps[map_first + i], i = 0..n-2 (the steps, then the final keys)


cdef class Encoder:
    """Attribute ids of batches of token lines, for the templates of a feature space whose
    macros read plain columns (%x), or values that a callback derives from them per batch."""
    cdef list columns_py, tables_py, maps_py, keep
    cdef Py_ssize_t n_columns_used, n_read
    cdef int max_column
    cdef Macro* macros
    cdef Line* lines
    cdef int n_lines[2]
    cdef int line_base[2]
    cdef int64_t* pads
    cdef void** maps
    cdef int32_t* column_of       # file column of each used column
    cdef void** tables            # ColumnIds of each used column

    def __init__(self, columns, vocabs, unigram, bigram):
        """columns: the values the macros read: first the file columns read from the bytes,
        one per ColumnIds in vocabs, then keys of the values :meth:`encode`'s callback fills in;
        unigram, bigram: per line a list of macros (row, column (one of columns), radix, pads
        before, pads after) and its tables: ("direct", int64 ranks) or ("maps", [sorted int64
        arrays]), offset."""
        cdef int i, j, m = 0, nm = 0, npad = 0, nmap = 0
        self.keep = []
        self.columns_py = list(columns)
        self.tables_py = list(vocabs)
        self.n_columns_used = len(columns)
        self.n_read = len(vocabs)
        self.max_column = max(columns[:self.n_read]) if self.n_read else 0
        self.column_of = <int32_t*> malloc(max(1, self.n_read) * sizeof(int32_t))
        self.tables = <void**> malloc(max(1, self.n_read) * sizeof(void*))
        for i in range(self.n_read):
            self.column_of[i] = columns[i]
            self.tables[i] = <void*> vocabs[i]
        all_lines = list(unigram) + list(bigram)
        self.n_lines[0], self.n_lines[1] = len(unigram), len(bigram)
        self.line_base[0], self.line_base[1] = 0, len(unigram)
        for spec in all_lines:
            nm += len(spec["macros"])
            npad += sum(2 * abs(mc[0]) for mc in spec["macros"])
            if spec["kind"] == "maps":
                nmap += len(spec["tables"])
        self.macros = <Macro*> malloc(max(1, nm) * sizeof(Macro))
        self.lines = <Line*> malloc(max(1, len(all_lines)) * sizeof(Line))
        self.pads = <int64_t*> malloc(max(1, npad) * sizeof(int64_t))
        self.maps = <void**> malloc(max(1, nmap) * sizeof(void*))
        self.maps_py = []
        npad = 0
        for i, spec in enumerate(all_lines):
            self.lines[i].first = m
            self.lines[i].n = len(spec["macros"])
            self.lines[i].offset = spec["offset"]
            self.lines[i].direct = NULL
            self.lines[i].map_first = len(self.maps_py)
            for row, col, radix, before, after in spec["macros"]:
                self.macros[m].row = row
                self.macros[m].column = self.columns_py.index(col)
                self.macros[m].radix = radix
                self.macros[m].pad = npad
                for j in range(abs(row)):
                    self.pads[npad + j] = before[j]
                    self.pads[npad + abs(row) + j] = after[j]
                npad += 2 * abs(row)
                m += 1
            if spec["kind"] == "direct":
                arr = np.ascontiguousarray(spec["tables"], dtype=np.int64)
                self.keep.append(arr)
                self.lines[i].direct = <const int64_t*> cnp.PyArray_DATA(arr)
            else:
                for keys in spec["tables"]:
                    idx = KeyIndex(keys)
                    self.maps[len(self.maps_py)] = <void*> idx
                    self.maps_py.append(idx)

    def __dealloc__(self):
        free(self.macros)
        free(self.lines)
        free(self.pads)
        free(self.maps)
        free(self.column_of)
        free(self.tables)

    def encode(self, const uint8_t[::1] block, const int64_t[::1] tok_start, const int64_t[::1] tok_end,
               const int32_t[::1] sent_ptr, fill=None):
        """(attr_ptr, attrs, eattr_ptr, eattrs) of the tokens: int32 CSR arrays. ``fill(ids)``
        writes the derived values into ids [tokens, columns] once the file columns are read."""
        cdef Py_ssize_t N = tok_start.shape[0], S = sent_ptr.shape[0] - 1
        cdef Py_ssize_t C = self.n_columns_used
        ids_np = np.empty((N, max(1, C)), dtype=np.int64)
        cdef int64_t[:, ::1] ids = ids_np
        cdef int nu = self.n_lines[0], nb = self.n_lines[1]
        aptr_np = np.empty(N + 1, dtype=np.int32)
        attrs_np = np.empty(max(1, N * nu), dtype=np.int32)
        eptr_np = np.empty(N + 1, dtype=np.int32)
        eattrs_np = np.empty(max(1, N * nb), dtype=np.int32)
        cdef int32_t[::1] aptr = aptr_np, attrs = attrs_np, eptr = eptr_np, eattrs = eattrs_np
        cdef Py_ssize_t na = 0, ne = 0
        if N:
            with nogil:
                self._column_ids(&block[0], &tok_start[0], &tok_end[0], N, ids)
            if C > self.n_read:
                fill(ids_np)
            with nogil:
                na = self._attributes(ids, &sent_ptr[0], S, 0, &aptr[0], &attrs[0])
                ne = self._attributes(ids, &sent_ptr[0], S, 1, &eptr[0], &eattrs[0])
        else:
            aptr[0] = 0
            eptr[0] = 0
        return aptr_np, attrs_np[:na].copy(), eptr_np, eattrs_np[:ne].copy()

    cdef void _column_ids(self, const uint8_t* block, const int64_t* ts, const int64_t* te, Py_ssize_t N,
                          int64_t[:, ::1] ids) noexcept nogil:
        cdef Py_ssize_t t, i
        cdef Py_ssize_t starts[64]
        cdef Py_ssize_t ends[64]
        cdef Py_ssize_t C = self.n_read
        cdef int cap = self.max_column + 1
        cdef int col
        cdef const uint8_t* line
        if cap > 64:
            cap = 64
        for t in range(N):
            line = block + ts[t]
            split_fields(line, te[t] - ts[t], starts, ends, cap)
            for i in range(C):
                col = self.column_of[i]
                ids[t, i] = (<ColumnIds> self.tables[i])._find(line + starts[col], ends[col] - starts[col])

    cdef Py_ssize_t _attributes(self, int64_t[:, ::1] ids, const int32_t* sent_ptr, Py_ssize_t S, int which,
                                int32_t* ptr, int32_t* out) noexcept nogil:
        cdef Py_ssize_t s, t, s0, s1, tgt, n = 0
        cdef int l, i, nl = self.n_lines[which], base = self.line_base[which]
        cdef const Line* ln
        cdef const Macro* mc
        cdef int64_t key, v, r
        ptr[0] = 0
        for s in range(S):
            s0, s1 = sent_ptr[s], sent_ptr[s + 1]
            for t in range(s0, s1):
                for l in range(nl):
                    ln = &self.lines[base + l]
                    key = -1
                    for i in range(ln.n):
                        mc = &self.macros[ln.first + i]
                        tgt = t + mc.row
                        if tgt < s0:
                            v = self.pads[mc.pad + (s0 - tgt) - 1]
                        elif tgt >= s1:
                            v = self.pads[mc.pad + (-mc.row if mc.row < 0 else mc.row) + (tgt - s1)]
                        else:
                            v = ids[tgt, mc.column]
                        if i == 0:
                            key = v
                        elif key < 0 or v < 0:
                            key = -1
                            break
                        else:
                            key = (<KeyIndex> self.maps[ln.map_first + i - 1]).find(key * mc.radix + v)
                    if ln.n == 0:         # a line without macros: one key, 0, for every token
                        r = (<KeyIndex> self.maps[ln.map_first]).find(0)
                    elif ln.n == 1:
                        r = ln.direct[key] if key >= 0 else -1
                    else:
                        r = key
                    if r >= 0:
                        out[n] = <int32_t> (r + ln.offset)
                        n += 1
                ptr[t + 1] = <int32_t> n
        return n


def field_strings(const uint8_t[::1] block, const int64_t[::1] tok_start, const int64_t[::1] tok_end, int col,
                  const int64_t[::1] tokens):
    """The value of file column ``col`` on each of the given token lines, as str."""
    cdef Py_ssize_t starts[64]
    cdef Py_ssize_t ends[64]
    cdef Py_ssize_t k, t
    cdef const uint8_t* line
    cdef char* base = <char*> &block[0] if block.shape[0] else NULL
    if not 0 <= col < 64:
        raise ValueError("field_strings reads one of the first 64 columns")
    out = []
    for k in range(tokens.shape[0]):
        t = tokens[k]
        line = &block[0] + tok_start[t]
        if split_fields(line, tok_end[t] - tok_start[t], starts, ends, col + 1) <= col:
            raise ValueError(f"token line {t} has no column {col}")
        out.append(base[tok_start[t] + starts[col]:tok_start[t] + ends[col]].decode("utf-8", "surrogatepass"))
    return out


# ------------------------------------------------------------------ writing

def format_rows(const uint8_t[::1] block, const int64_t[::1] tok_start, const int64_t[::1] tok_end,
                const int32_t[::1] sent_ptr, const int64_t[::1] items, const int64_t[::1] pt_start,
                const int64_t[::1] pt_end, const int32_t[:, ::1] pred, list labels, bytes sep):
    """The output bytes of a batch: each token's columns, each followed by sep, then its
    labels of every appended column (pred[c, token] indexes labels[c]) joined by sep; a blank
    line after each sentence; the pass-through lines in place."""
    cdef Py_ssize_t N = tok_start.shape[0], I = items.shape[0], C = pred.shape[0]
    if C != len(labels) or C < 1 or pred.shape[1] != N:
        raise ValueError(f"format_rows: pred of shape ({C}, {pred.shape[1]}) for {len(labels)} label "
                         f"lists and {N} tokens")
    encoded = [lab.encode("utf-8") for col in labels for lab in col]
    lab_blob = b"".join(encoded)
    lab_off_np = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in encoded], out=lab_off_np[1:])
    base_np = np.zeros(C, dtype=np.int64)           # the first label of column c among all
    np.cumsum([len(col) for col in labels[:-1]], out=base_np[1:])
    cdef int64_t[::1] lab_off = lab_off_np
    cdef int64_t[::1] base = base_np
    cdef const uint8_t* lb = <const uint8_t*> (<char*> lab_blob)
    cdef Py_ssize_t size = 0, t, k, it, s, pos = 0, j, c
    cdef uint8_t sepc = sep[0]
    cdef Py_ssize_t max_labels = 0, widest
    for c in range(C):
        widest = 0
        for k in range(len(labels[c])):
            widest = max(widest, lab_off[base[c] + k + 1] - lab_off[base[c] + k])
        max_labels += widest + 1
    for t in range(N):
        size += tok_end[t] - tok_start[t] + 1 + max_labels
    for k in range(pt_start.shape[0]):
        size += pt_end[k] - pt_start[k] + 1
    size += sent_ptr.shape[0]
    out = bytearray(size)
    cdef char* ob = out
    cdef uint8_t* o = <uint8_t*> ob
    cdef const uint8_t* p = &block[0] if block.shape[0] else NULL
    cdef Py_ssize_t i, e, a, b
    cdef int64_t y
    with nogil:
        for it in range(I):
            k = items[it]
            if k < 0:
                k = -1 - k
                a, b = pt_start[k], pt_end[k]
                memcpy(o + pos, p + a, b - a)
                pos += b - a
                o[pos] = 10
                pos += 1
                continue
            for t in range(sent_ptr[k], sent_ptr[k + 1]):
                i, e = tok_start[t], tok_end[t]
                while True:            # the columns, each followed by sep
                    while i < e and WS[p[i]]:
                        i += 1
                    if i >= e:
                        break
                    j = i
                    while j < e and not WS[p[j]]:
                        j += 1
                    memcpy(o + pos, p + i, j - i)
                    pos += j - i
                    o[pos] = sepc
                    pos += 1
                    i = j
                for c in range(C):
                    y = base[c] + pred[c, t]
                    memcpy(o + pos, lb + lab_off[y], lab_off[y + 1] - lab_off[y])
                    pos += lab_off[y + 1] - lab_off[y]
                    o[pos] = sepc if c + 1 < C else 10
                    pos += 1
            o[pos] = 10
            pos += 1
    del out[pos:]
    return out


# ------------------------------------------------------------------ training: vocabularies and keys

cdef class Interner:
    """Ids of byte strings in order of first appearance (a vocabulary growing as training reads).

    Seeded with a vocabulary's strings (the padding values), it numbers new values as
    ``crftk.features.extract.Vocab.add_ids`` does; ``strings()`` decodes them back.
    """
    cdef uint8_t* blob
    cdef Py_ssize_t blob_n, blob_cap
    cdef int64_t* offs            # n + 1 offsets into blob
    cdef Py_ssize_t n, offs_cap
    cdef int32_t* slots           # -1: empty
    cdef uint64_t mask

    def __cinit__(self):
        self.blob_cap, self.offs_cap = 1 << 16, 1 << 12
        self.blob = <uint8_t*> malloc(self.blob_cap)
        self.offs = <int64_t*> malloc(self.offs_cap * sizeof(int64_t))
        self.mask = (1 << 13) - 1
        self.slots = <int32_t*> malloc((self.mask + 1) * sizeof(int32_t))
        if self.blob == NULL or self.offs == NULL or self.slots == NULL:
            raise MemoryError()
        self.n, self.blob_n = 0, 0
        self.offs[0] = 0
        cdef uint64_t i
        for i in range(self.mask + 1):
            self.slots[i] = -1

    def __dealloc__(self):
        free(self.blob)
        free(self.offs)
        free(self.slots)

    def __init__(self, strings=()):
        cdef bytes b
        for s in strings:
            b = s.encode("utf-8", "surrogatepass")
            if self.intern(<const uint8_t*> (<char*> b), len(b)) < 0:
                raise MemoryError()

    def __len__(self):
        return self.n

    cdef int _grow_table(self) noexcept nogil:
        cdef uint64_t size = 2 * (self.mask + 1), h, i
        cdef int32_t* s = <int32_t*> malloc(size * sizeof(int32_t))
        cdef Py_ssize_t k
        if s == NULL:
            return -1
        for i in range(size):
            s[i] = -1
        for k in range(self.n):
            h = hash_bytes(self.blob + self.offs[k], self.offs[k + 1] - self.offs[k]) & (size - 1)
            while s[h] >= 0:
                h = (h + 1) & (size - 1)
            s[h] = <int32_t> k
        free(self.slots)
        self.slots, self.mask = s, size - 1
        return 0

    cdef inline int64_t intern(self, const uint8_t* p, Py_ssize_t n) noexcept nogil:
        """The id of p[:n], added when new; -1 when memory runs out."""
        cdef uint64_t h = hash_bytes(p, n) & self.mask
        cdef int32_t i
        cdef void* q
        while True:
            i = self.slots[h]
            if i < 0:
                break
            if self.offs[i + 1] - self.offs[i] == n and memcmp(self.blob + self.offs[i], p, n) == 0:
                return i
            h = (h + 1) & self.mask
        while self.blob_n + n > self.blob_cap:
            q = realloc(self.blob, 2 * self.blob_cap)
            if q == NULL:
                return -1
            self.blob, self.blob_cap = <uint8_t*> q, 2 * self.blob_cap
        if self.n + 2 > self.offs_cap:
            q = realloc(self.offs, 2 * self.offs_cap * sizeof(int64_t))
            if q == NULL:
                return -1
            self.offs, self.offs_cap = <int64_t*> q, 2 * self.offs_cap
        if n:
            memcpy(self.blob + self.blob_n, p, n)
        self.blob_n += n
        self.slots[h] = <int32_t> self.n
        self.n += 1
        self.offs[self.n] = self.blob_n
        if <uint64_t> (2 * self.n) > self.mask:          # keep the load under one half
            if self._grow_table() < 0:
                return -1
        return self.n - 1

    def strings(self):
        """Every string, in id order."""
        cdef Py_ssize_t k
        return [(<char*> self.blob)[self.offs[k]:self.offs[k + 1]].decode("utf-8", "surrogatepass")
                for k in range(self.n)]


def column_ids(const uint8_t[::1] block, const int64_t[::1] tok_start, const int64_t[::1] tok_end,
               columns, tables):
    """int64 [N, C]: for each token line, the id of its value in each of ``columns`` (file column
    indices): looked up in the matching :class:`ColumnIds` (-1: not there), or interned in the
    matching :class:`Interner` (new values get new ids)."""
    cdef Py_ssize_t N = tok_start.shape[0], C = len(columns), t, i
    out_np = np.empty((N, max(C, 1)), dtype=np.int64)
    cdef int64_t[:, ::1] out = out_np
    cdef Py_ssize_t starts[64]
    cdef Py_ssize_t ends[64]
    cdef int32_t col[64]
    cdef void* found[64]
    cdef bint grows[64]
    cdef int cap = 0, nf
    cdef const uint8_t* line
    cdef int64_t v
    cdef bint failed = False
    if C > 64 or (C and max(columns) >= 64):
        raise ValueError("column_ids reads at most 64 columns")
    for i in range(C):
        if not isinstance(tables[i], (ColumnIds, Interner)):
            raise TypeError("column_ids takes a ColumnIds or an Interner per column")
        col[i] = columns[i]
        if col[i] < 0:      # counted from 0: rows are split into fields 0..cap-1 only
            raise ValueError(f"column_ids reads columns from 0, not {col[i]}")
        found[i] = <void*> tables[i]
        grows[i] = isinstance(tables[i], Interner)
        cap = max(cap, col[i] + 1)
    if N == 0 or C == 0:
        return out_np[:, :C]
    with nogil:
        for t in range(N):
            line = &block[0] + tok_start[t]
            nf = split_fields(line, tok_end[t] - tok_start[t], starts, ends, cap)
            for i in range(C):
                if col[i] >= nf:        # a column the batch's rows lack
                    v = -1
                elif grows[i]:
                    v = (<Interner> found[i]).intern(line + starts[col[i]], ends[col[i]] - starts[col[i]])
                    if v < 0:
                        failed = True
                else:
                    v = (<ColumnIds> found[i])._find(line + starts[col[i]], ends[col[i]] - starts[col[i]])
                out[t, i] = v
    if failed:
        raise MemoryError()
    return out_np[:, :C]


def unique_inverse(const int64_t[::1] keys):
    """(uniq, inverse, counts) of the keys >= 0, as ``np.unique(keys[keys >= 0],
    return_inverse=True, return_counts=True)`` gives them, with inverse -1 where a key is
    negative; by hashing (linear time) and sorting only the distinct keys."""
    cdef Py_ssize_t N = keys.shape[0], t, u = 0
    cdef uint64_t size = 16, h, mask
    while size < <uint64_t> (2 * N + 2):
        size *= 2
    mask = size - 1
    slots_np = np.full(2 * size, -1, dtype=np.int64)      # key, first-seen id; key -1: empty
    first_np = np.empty(N, dtype=np.int64)
    occ_np = np.empty(N, dtype=np.int64)
    cdef int64_t[::1] slots = slots_np, first = first_np, occ = occ_np
    cdef int64_t k
    with nogil:
        for t in range(N):
            k = keys[t]
            if k < 0:
                occ[t] = -1
                continue
            h = hash_int(k) & mask
            while True:
                if slots[2 * h] == k:
                    occ[t] = slots[2 * h + 1]
                    break
                if slots[2 * h] < 0:
                    slots[2 * h] = k
                    slots[2 * h + 1] = u
                    first[u] = k
                    occ[t] = u
                    u += 1
                    break
                h = (h + 1) & mask
    del slots_np, slots
    order = np.argsort(first_np[:u], kind="stable")
    uniq = first_np[:u][order]
    rank_np = np.empty(u, dtype=np.int64)
    rank_np[order] = np.arange(u, dtype=np.int64)
    counts_np = np.zeros(u, dtype=np.int64)
    cdef int64_t[::1] rank = rank_np, counts = counts_np
    with nogil:
        for t in range(N):
            if occ[t] >= 0:
                occ[t] = rank[occ[t]]
                counts[occ[t]] += 1
    return uniq, occ_np, counts_np


def shift_values(const int64_t[::1] src, const int64_t[::1] sent_ptr, int row, const int64_t[::1] before,
                 const int64_t[::1] after):
    """The value of each token's neighbour ``row`` tokens away in its sentence (int64 [N]); past
    the sentence, the padding values: ``before[k - 1]`` k tokens before its start,
    ``after[k - 1]`` k tokens after its end."""
    cdef Py_ssize_t S = sent_ptr.shape[0] - 1, s, t, s0, s1, tgt
    out_np = np.empty(src.shape[0], dtype=np.int64)
    cdef int64_t[::1] out = out_np
    with nogil:
        for s in range(S):
            s0, s1 = sent_ptr[s], sent_ptr[s + 1]
            for t in range(s0, s1):
                tgt = t + row
                if tgt < s0:
                    out[t] = before[s0 - tgt - 1]
                elif tgt >= s1:
                    out[t] = after[tgt - s1]
                else:
                    out[t] = src[tgt]
    return out_np


def dense_csr(ranks, offsets, Py_ssize_t n):
    """(counts int64 [n], ids int32) of n tokens from one rank array per template line (int32 [n],
    -1: no attribute): each token's ``rank + offsets[line]``, line by line, without a matrix."""
    cdef Py_ssize_t L = len(ranks), l, t, k = 0
    arrays = [np.ascontiguousarray(r, dtype=np.int32) for r in ranks]
    for r in arrays:
        if r.shape[0] != n:
            raise ValueError("a rank array of the wrong length")
    cdef const int32_t** rp = <const int32_t**> malloc(max(1, L) * sizeof(int32_t*))
    cdef int32_t* off = <int32_t*> malloc(max(1, L) * sizeof(int32_t))
    if rp == NULL or off == NULL:
        free(rp)
        free(off)
        raise MemoryError()
    for l in range(L):
        rp[l] = <const int32_t*> cnp.PyArray_DATA(arrays[l])
        off[l] = offsets[l]
    counts_np = np.zeros(n, dtype=np.int64)
    cdef int64_t[::1] counts = counts_np
    cdef Py_ssize_t total = 0
    try:
        with nogil:
            for t in range(n):
                for l in range(L):
                    if rp[l][t] >= 0:
                        counts[t] += 1
                total += counts[t]
        ids_np = np.empty(total, dtype=np.int32)
        if total:
            _fill_dense(rp, off, L, n, <int32_t*> cnp.PyArray_DATA(ids_np))
    finally:
        free(rp)
        free(off)
    return counts_np, ids_np


cdef void _fill_dense(const int32_t** rp, const int32_t* off, Py_ssize_t L, Py_ssize_t n,
                      int32_t* out) noexcept nogil:
    cdef Py_ssize_t t, l, k = 0
    cdef int32_t r
    for t in range(n):
        for l in range(L):
            r = rp[l][t]
            if r >= 0:
                out[k] = r + off[l]
                k += 1


def merge_csr(const int64_t[::1] dense_counts, const int32_t[::1] dense_ids, owners, extras):
    """(ptr int32 [n+1], ids int32) of n tokens: each token's dense ids (``dense_counts[t]`` of
    them, in order in ``dense_ids``), then the extra ids it owns: ``extras[i][k]`` belongs to
    token ``owners[i][k]``, taken list by list, in order (a stable counting sort by owner)."""
    cdef Py_ssize_t n = dense_counts.shape[0], t, k, total = dense_ids.shape[0], c, i
    owner_arrays = [np.ascontiguousarray(o, dtype=np.int64) for o in owners]
    extra_arrays = [np.ascontiguousarray(e, dtype=np.int32) for e in extras]
    pos_np = np.zeros(n + 1, dtype=np.int64)
    cdef int64_t[::1] pos = pos_np
    cdef const int64_t[::1] own
    cdef const int32_t[::1] ext
    for o in owner_arrays:
        own = o
        total += own.shape[0]
        for k in range(own.shape[0]):
            if own[k] < 0 or own[k] >= n:
                raise ValueError("an owner outside the tokens")
            pos[own[k] + 1] += 1
    if total >= 2**31:
        raise ValueError("too many attribute occurrences for int32 offsets")
    ptr_np = np.empty(n + 1, dtype=np.int32)
    out_np = np.empty(total, dtype=np.int32)
    cdef int32_t[::1] ptr = ptr_np, out = out_np
    cdef int64_t acc = 0, extra
    k = 0
    with nogil:
        for t in range(n):
            extra = pos[t + 1]
            ptr[t] = <int32_t> acc
            for c in range(dense_counts[t]):
                out[acc] = dense_ids[k]
                acc += 1
                k += 1
            pos[t] = acc              # where the token's extra ids go
            acc += extra
        ptr[n] = <int32_t> acc
    for i in range(len(owner_arrays)):
        own = owner_arrays[i]
        ext = extra_arrays[i]
        if ext.shape[0] != own.shape[0]:
            raise ValueError("owners and extras differ in length")
        with nogil:
            for k in range(own.shape[0]):
                out[pos[own[k]]] = ext[k]
                pos[own[k]] += 1
    return ptr_np, out_np
