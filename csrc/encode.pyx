# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The feature encoder in compiled code (crftk._encode): CoNLL token lines (the batches of
textio.pyx's Reader) to the ids crftk.features.space works with.

``ColumnIds`` maps column values (UTF-8 bytes) to a vocabulary's ids; ``Encoder`` turns
the column ids of a batch into the attribute ids of crftk.features.space (the same keys:
``prefix * radix + value``, looked up in hash tables built from the sorted key arrays).
For training, ``Interner`` and ``column_ids`` grow the vocabularies as batches are read,
``unique_inverse`` and ``shift_values`` make the template keys, ``dense_csr`` and
``merge_csr`` the attribute arrays (with the real values of %num/%vec lines);
``parse_numbers`` reads the numbers of a %num column, ``append_real_lines`` appends the real-valued
lines' attributes to a batch's binary ones at tagging.
"""

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t, int32_t, uint64_t, uint8_t
from libc.stdlib cimport malloc, free, realloc, strtod
from libc.math cimport isfinite
from libc.string cimport memcpy, memcmp

from fields cimport split_fields

cnp.import_array()


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
    indices, any number of them, each >= 0): looked up in the matching :class:`ColumnIds` (-1:
    not there, or the line has no such column), or interned in the matching :class:`Interner`
    (new values get new ids)."""
    cdef Py_ssize_t N = tok_start.shape[0], C = len(columns), t, i
    out_np = np.empty((N, max(C, 1)), dtype=np.int64)
    cdef int64_t[:, ::1] out = out_np
    cdef int cap = 0, nf
    cdef const uint8_t* line
    cdef int64_t v
    cdef bint failed = False
    if len(tables) != C:
        raise ValueError("column_ids takes one table per column")
    for i in range(C):
        if not isinstance(tables[i], (ColumnIds, Interner)):
            raise TypeError("column_ids takes a ColumnIds or an Interner per column")
        if not 0 <= columns[i] < 2**31 - 1:
            raise ValueError(f"column_ids: column {columns[i]!r} is not a column index")
        cap = max(cap, columns[i] + 1)
    if N == 0 or C == 0:
        return out_np[:, :C]
    # the bounds of the first cap fields of a line, and per column its index, table and kind
    cdef Py_ssize_t* starts = <Py_ssize_t*> malloc(cap * sizeof(Py_ssize_t))
    cdef Py_ssize_t* ends = <Py_ssize_t*> malloc(cap * sizeof(Py_ssize_t))
    cdef int32_t* col = <int32_t*> malloc(C * sizeof(int32_t))
    cdef void** found = <void**> malloc(C * sizeof(void*))
    cdef bint* grows = <bint*> malloc(C * sizeof(bint))
    try:
        if starts == NULL or ends == NULL or col == NULL or found == NULL or grows == NULL:
            raise MemoryError()
        for i in range(C):
            col[i] = columns[i]
            found[i] = <void*> tables[i]
            grows[i] = isinstance(tables[i], Interner)
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
    finally:
        free(starts)
        free(ends)
        free(col)
        free(found)
        free(grows)
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


def merge_csr(const int64_t[::1] dense_counts, const int32_t[::1] dense_ids, owners, extras,
              extra_values=None):
    """(ptr int32 [n+1], ids int32) of n tokens: each token's dense ids (``dense_counts[t]`` of
    them, in order in ``dense_ids``), then the extra ids it owns: ``extras[i][k]`` belongs to
    token ``owners[i][k]``, taken list by list, in order (a stable counting sort by owner).
    With ``extra_values`` (one float64 array per list, or None for values of 1): also the
    float64 value of every id, 1 for the dense ones, as a third array."""
    cdef Py_ssize_t n = dense_counts.shape[0], t, k, total = dense_ids.shape[0], c, i
    owner_arrays = [np.ascontiguousarray(o, dtype=np.int64) for o in owners]
    extra_arrays = [np.ascontiguousarray(e, dtype=np.int32) for e in extras]
    value_arrays = None
    if extra_values is not None:
        value_arrays = [np.ones(len(e), dtype=np.float64) if v is None else np.ascontiguousarray(v, dtype=np.float64)
                        for e, v in zip(extras, extra_values)]
    pos_np = np.zeros(n + 1, dtype=np.int64)
    cdef int64_t[::1] pos = pos_np
    cdef const int64_t[::1] own
    cdef const int32_t[::1] ext
    cdef const double[::1] val
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
    vals_np = np.ones(total if value_arrays is not None else 0, dtype=np.float64)
    cdef int32_t[::1] ptr = ptr_np, out = out_np
    cdef double[::1] vals = vals_np
    cdef bint with_values = value_arrays is not None
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
        if with_values:
            val = value_arrays[i]
            if val.shape[0] != own.shape[0]:
                raise ValueError("extras and their values differ in length")
            with nogil:
                for k in range(own.shape[0]):
                    vals[pos[own[k]]] = val[k]
                    out[pos[own[k]]] = ext[k]
                    pos[own[k]] += 1
        else:
            with nogil:
                for k in range(own.shape[0]):
                    out[pos[own[k]]] = ext[k]
                    pos[own[k]] += 1
    if with_values:
        return ptr_np, out_np, vals_np
    return ptr_np, out_np


# ------------------------------------------------------------------ real values: %num

cdef inline bint _digit(uint8_t c) noexcept nogil:
    return c >= 48 and c <= 57


cdef inline Py_ssize_t _after_sign(const uint8_t* p, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    return i + 1 if i < n and (p[i] == 43 or p[i] == 45) else i


cdef inline Py_ssize_t _after_digits(const uint8_t* p, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    while i < n and _digit(p[i]):
        i += 1
    return i


cdef bint _is_decimal(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Whether p[:n] is [+-]?(D+.?D*|.D+)([eE][+-]?D+)? (no inf, nan, hex or '_'): the numbers
    crftk.features.extract.NUMBER accepts, so both readers agree."""
    cdef Py_ssize_t i = _after_sign(p, n, 0), j
    j = _after_digits(p, n, i)
    cdef Py_ssize_t digits = j - i
    i = j
    if i < n and p[i] == 46:
        j = _after_digits(p, n, i + 1)
        digits += j - i - 1
        i = j
    if digits == 0:
        return False
    if i < n and (p[i] == 101 or p[i] == 69):
        i = _after_sign(p, n, i + 1)
        j = _after_digits(p, n, i)
        if j == i:
            return False
        i = j
    return i == n


def parse_numbers(const uint8_t[::1] block, const int64_t[::1] tok_start, const int64_t[::1] tok_end, int col):
    """(float64 [N], first bad token or -1): file column ``col`` of each token line read as a
    decimal number (strtod, correctly rounded as Python's float()); a token whose field is not a
    finite decimal number, or that lacks the column, stops the reading and is returned."""
    cdef Py_ssize_t N = tok_start.shape[0], t, n, bad = -1
    if not 0 <= col < 2**31 - 1:
        raise ValueError(f"parse_numbers: column {col} is not a column index")
    out_np = np.zeros(N, dtype=np.float64)
    cdef double[::1] out = out_np
    cdef Py_ssize_t* starts = <Py_ssize_t*> malloc((col + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t* ends = <Py_ssize_t*> malloc((col + 1) * sizeof(Py_ssize_t))
    cdef char buf[64]
    cdef char* text
    cdef const uint8_t* line
    cdef int nf
    cdef double x
    if starts == NULL or ends == NULL:
        free(starts)
        free(ends)
        raise MemoryError()
    try:
        with nogil:
            for t in range(N):
                line = &block[0] + tok_start[t]
                nf = split_fields(line, tok_end[t] - tok_start[t], starts, ends, col + 1)
                n = ends[col] - starts[col] if col < nf else 0
                if col >= nf or not _is_decimal(line + starts[col], n):
                    bad = t
                    break
                if n < 64:
                    text = &buf[0]
                else:
                    text = <char*> malloc(n + 1)
                if text == NULL:
                    bad = -2
                    break
                memcpy(text, line + starts[col], n)
                text[n] = 0
                x = strtod(text, NULL)      # the grammar is checked: all of it is read
                if n >= 64:
                    free(text)
                if not isfinite(x):
                    bad = t
                    break
                out[t] = x
    finally:
        free(starts)
        free(ends)
    if bad == -2:
        raise MemoryError()
    return out_np, bad


# ------------------------------------------------------------------ real values: appending lines

cdef struct RealLine:
    const int64_t* owner      # the tokens with an occurrence, increasing
    Py_ssize_t m
    int32_t offset
    const int64_t* ranks      # rank of each attribute key among the line's (-1: not kept)
    int width
    const double* numbers     # %num: the value of each occurrence
    const int64_t* rows       # %vec: the vector row of each occurrence
    const float* table        # %vec: [rows, width]


def append_real_lines(const int32_t[::1] ptr, const int32_t[::1] ids, lines):
    """(ptr int32, ids int32, values float64) of the tokens of CSR (ptr, ids), each token's ids
    (value 1) followed by the attributes of each real-valued line in turn, in one pass with no
    temporaries per occurrence. ``lines``: per line (owner int64, offset, ranks int64 [width],
    numbers float64 or None, rows int64 or None, table float32 [_, width] or None): %num gives
    one number per owner (key 0), %vec a table row per owner (keys 0..width-1)."""
    cdef Py_ssize_t n = ptr.shape[0] - 1, L = len(lines), l, total = ids.shape[0]
    keep = []                 # the arrays the pointers point into, alive until the pass is done
    cdef RealLine* spec = <RealLine*> malloc(max(1, L) * sizeof(RealLine))
    cdef Py_ssize_t* cursor = <Py_ssize_t*> malloc(max(1, L) * sizeof(Py_ssize_t))
    if spec == NULL or cursor == NULL:
        free(spec)
        free(cursor)
        raise MemoryError()
    try:
        for l in range(L):
            owner, offset, ranks, numbers, rows, table = lines[l]
            owner = np.ascontiguousarray(owner, dtype=np.int64)
            ranks = np.ascontiguousarray(ranks, dtype=np.int64)
            keep += [owner, ranks]
            spec[l].owner = <const int64_t*> cnp.PyArray_DATA(owner)
            spec[l].m = owner.shape[0]
            spec[l].offset = offset
            spec[l].ranks = <const int64_t*> cnp.PyArray_DATA(ranks)
            spec[l].width = ranks.shape[0]
            spec[l].numbers = NULL
            spec[l].rows = NULL
            spec[l].table = NULL
            if spec[l].m and (owner[0] < 0 or owner[-1] >= n or np.any(np.diff(owner) <= 0)):
                raise ValueError("owners must be increasing tokens")
            if numbers is not None:
                numbers = np.ascontiguousarray(numbers, dtype=np.float64)
                if numbers.shape[0] != spec[l].m or spec[l].width != 1:
                    raise ValueError("a number per owner, one attribute")
                keep.append(numbers)
                spec[l].numbers = <const double*> cnp.PyArray_DATA(numbers)
            else:
                rows = np.ascontiguousarray(rows, dtype=np.int64)
                table = np.ascontiguousarray(table, dtype=np.float32)
                if rows.shape[0] != spec[l].m or table.ndim != 2 or table.shape[1] != spec[l].width:
                    raise ValueError("a row per owner, of the table's width")
                if spec[l].m and (rows.min() < 0 or rows.max() >= table.shape[0]):
                    raise ValueError("a row outside the table")
                keep += [rows, table]
                spec[l].rows = <const int64_t*> cnp.PyArray_DATA(rows)
                spec[l].table = <const float*> cnp.PyArray_DATA(table)
            total += spec[l].m * int(np.count_nonzero(ranks >= 0))
            cursor[l] = 0
        if total >= 2**31:
            raise ValueError("too many attribute occurrences for int32 offsets")
        out_ptr_np = np.empty(n + 1, dtype=np.int32)
        out_np = np.empty(total, dtype=np.int32)
        vals_np = np.empty(total, dtype=np.float64)
        _append_real(&ptr[0], &ids[0] if ids.shape[0] else NULL, n, spec, L, cursor,
                     <int32_t*> cnp.PyArray_DATA(out_ptr_np), <int32_t*> cnp.PyArray_DATA(out_np),
                     <double*> cnp.PyArray_DATA(vals_np))
    finally:
        free(spec)
        free(cursor)
    return out_ptr_np, out_np, vals_np


cdef void _append_real(const int32_t* ptr, const int32_t* ids, Py_ssize_t n, const RealLine* spec, Py_ssize_t L,
                       Py_ssize_t* cursor, int32_t* out_ptr, int32_t* out, double* vals) noexcept nogil:
    cdef Py_ssize_t t, c, l, k = 0, i
    cdef int d
    cdef int64_t r
    cdef const RealLine* s
    out_ptr[0] = 0
    for t in range(n):
        for c in range(ptr[t], ptr[t + 1]):
            out[k] = ids[c]
            vals[k] = 1.0
            k += 1
        for l in range(L):
            s = &spec[l]
            i = cursor[l]
            if i >= s.m or s.owner[i] != t:
                continue
            cursor[l] = i + 1
            for d in range(s.width):
                r = s.ranks[d]
                if r < 0:
                    continue
                out[k] = <int32_t> (s.offset + r)
                vals[k] = s.numbers[i] if s.numbers != NULL else s.table[s.rows[i] * s.width + d]
                k += 1
        out_ptr[t + 1] = <int32_t> k


# ------------------------------------------------------------------ feature dicts

def flatten_plain(dict token, list names, list values):
    """Flatten a plain feature dict as crftk.features.attributes does (``k:v`` for a str value,
    ``k`` with the value of a finite float, an int or a bool), appending to names and values;
    True when done. Anything else (a non-str key, a nested or other value, a value that is not
    finite) rolls back what this token appended and returns False: the Python flattener then
    takes the token, with its errors. The compiled loop is 3x faster on python-crfsuite's dicts."""
    cdef Py_ssize_t start = len(names)
    cdef double x
    for k, v in token.items():
        if type(k) is not str:
            break
        tv = type(v)
        if tv is str:
            names.append(<str> k + ":" + <str> v)
            values.append(1.0)
            continue
        if tv is float:
            x = v
        elif tv is bool:
            x = 1.0 if v else 0.0
        elif tv is int:
            try:
                x = float(v)
            except OverflowError:
                break
        else:
            break
        if not isfinite(x):
            break
        names.append(k)
        values.append(x)
    else:
        return True
    del names[start:]
    del values[start:]
    return False
