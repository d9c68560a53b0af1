# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""CoNLL text in compiled code: reading lines into sentences, and writing rows.

crftk.io.conll's pure-Python reader is the reference: ``Reader`` applies the same rules
(see that module's docstring) to bytes, a block at a time, and keeps for each token only
where its line is in the block. Columns are split again where they are needed (the
vocabulary lookup and the output row), which costs less than keeping them.

``field_strings`` reads one column of given token lines; ``format_rows`` writes a batch back
with one or more appended label columns. The feature encoder (the column ids of a batch
turned into attribute ids, and training's vocabularies and keys) is crftk._encode
(encode.pyx).
"""

import numpy as np
from libc.stdint cimport int64_t, int32_t, uint64_t, uint8_t
from libc.stdlib cimport malloc, free, realloc
from libc.string cimport memcpy, memcmp, memchr
from libc.math cimport exp, fabs, isnan, signbit
from libc.stdio cimport snprintf

from fields cimport WS, split_fields


# Line-level outcomes of Reader.parse besides success (crftk.io.conll words the messages).
ERR_NONE = 0
ERR_UTF8 = 1
ERR_COLUMNS = 2
ERR_TOO_LONG = 3
ERR_LINE_TOO_LONG = 4      # a line of more than max_line bytes (or that many without a line end yet)
ERR_CR_ONLY = 5            # line 1 goes on past a CR: the file's line ends are CR alone


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


cdef inline bint text_after_cr(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Whether p[:n] holds a CR followed, later, by something other than white space (a CR that
    ends a line of a file with CR-only line ends; a CRLF line end leaves only white space)."""
    cdef const uint8_t* cr = <const uint8_t*> memchr(p, 13, n)
    cdef Py_ssize_t i
    if cr == NULL:
        return False
    for i in range(cr - p, n):
        if not WS[p[i]]:
            return True
    return False


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

    cdef public Py_ssize_t lineno, doc, fixed, fixed_at, limit, max_line, error_line, error_found, error_start
    cdef public int error
    cdef public bint doc_used, after_kept, started
    cdef public object separator, allowed
    cdef uint8_t allowed_mask[64]
    cdef bint any_count
    cdef Py_ssize_t min_columns

    def __init__(self, allowed, min_columns=1, first_doc=0, limit=None, max_line=None):
        """allowed: a set of column counts or None (any); limit: longest sentence or None;
        max_line: longest line in bytes, without its end, or None."""
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
        self.max_line = -1 if max_line is None else max_line
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
                    if 0 <= self.max_line < n - pos:     # an endless line (/dev/zero): stop waiting
                        self.error, self.error_line = ERR_LINE_TOO_LONG, lineno + 1
                        if lineno == 0 and text_after_cr(p + pos, n - pos):
                            self.error = ERR_CR_ONLY
                        return 0, None
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
            if lineno == 1 and text_after_cr(p + line_start, line_end - line_start):
                self.error, self.error_line = ERR_CR_ONLY, lineno
                return 0, None
            if 0 <= self.max_line < line_end - line_start:
                self.error, self.error_line = ERR_LINE_TOO_LONG, lineno
                return 0, None
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


def field_strings(const uint8_t[::1] block, const int64_t[::1] tok_start, const int64_t[::1] tok_end, int col,
                  const int64_t[::1] tokens):
    """The value of file column ``col`` (>= 0) on each of the given token lines, as str."""
    cdef Py_ssize_t k, t
    cdef const uint8_t* line
    cdef char* base = <char*> &block[0] if block.shape[0] else NULL
    if not 0 <= col < 2**31 - 1:
        raise ValueError(f"field_strings: column {col} is not a column index")
    cdef Py_ssize_t* starts = <Py_ssize_t*> malloc((col + 1) * sizeof(Py_ssize_t))
    cdef Py_ssize_t* ends = <Py_ssize_t*> malloc((col + 1) * sizeof(Py_ssize_t))
    out = []
    try:
        if starts == NULL or ends == NULL:
            raise MemoryError()
        for k in range(tokens.shape[0]):
            t = tokens[k]
            if not 0 <= t < tok_start.shape[0]:
                raise ValueError(f"field_strings: no token line {t}")
            line = &block[0] + tok_start[t]
            if split_fields(line, tok_end[t] - tok_start[t], starts, ends, col + 1) <= col:
                raise ValueError(f"token line {t} has no column {col}")
            out.append(base[tok_start[t] + starts[col]:tok_start[t] + ends[col]].decode("utf-8", "surrogatepass"))
    finally:
        free(starts)
        free(ends)
    return out


# ------------------------------------------------------------------ writing

cdef inline Py_ssize_t copy_columns(uint8_t* o, const uint8_t* p, Py_ssize_t i, Py_ssize_t e,
                                    uint8_t sepc) noexcept nogil:
    """Writes the fields of the line p[i:e] to o, each followed by sepc; returns the bytes written
    (at most e - i + 1)."""
    cdef Py_ssize_t pos = 0
    cdef bint inside = False
    for i in range(i, e):
        if not WS[p[i]]:
            o[pos] = p[i]
            pos += 1
            inside = True
        elif inside:                # the end of a field
            o[pos] = sepc
            pos += 1
            inside = False
    if inside:
        o[pos] = sepc
        pos += 1
    return pos


cdef inline Py_ssize_t copy_line(uint8_t* o, const uint8_t* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    """Writes p[a:b] and a line end to o; returns the bytes written."""
    memcpy(o, p + a, b - a)
    o[b - a] = 10
    return b - a + 1


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
    lab_blob, lab_off_np = _strings_blob([lab for col in labels for lab in col])
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
    cdef int64_t y
    with nogil:
        for it in range(I):
            k = items[it]
            if k < 0:
                k = -1 - k
                pos += copy_line(o + pos, p, pt_start[k], pt_end[k])
                continue
            for t in range(sent_ptr[k], sent_ptr[k + 1]):
                pos += copy_columns(o + pos, p, tok_start[t], tok_end[t], sepc)
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


# -- rows with probabilities (crftk tag -v, -n) -----------------------------------------------

cdef enum:
    FIXED_MAX = 330       # "%.6f" of any double (DBL_MAX has 309 digits), its sign and a NUL


cdef struct Buffer:
    uint8_t* data
    Py_ssize_t n, cap


cdef inline int reserve(Buffer* b, Py_ssize_t more) noexcept nogil:
    """Room for ``more`` bytes after b.n; 0, or -1 when memory is short."""
    cdef Py_ssize_t cap
    cdef uint8_t* d
    if b.n + more <= b.cap:
        return 0
    cap = max(2 * b.cap, b.n + more)
    d = <uint8_t*> realloc(b.data, cap)
    if d == NULL:
        return -1
    b.data, b.cap = d, cap
    return 0


cdef inline Py_ssize_t put_fixed6(uint8_t* o, double x) noexcept nogil:
    """Writes x as Python's format(x, ".6f") does (correctly rounded, half to even; "nan" without a
    sign); returns the bytes written (< FIXED_MAX). A probability away from a tie of its 7th
    decimal is round(x * 1e6), exact there (x * 1e6 < 2e6 is off by < 1e-9); the rest is printf's."""
    cdef double r, f
    cdef int64_t n, fp
    cdef int k
    if isnan(x):
        memcpy(o, b"nan", 3)
        return 3
    if not signbit(x) and x < 2.0:
        r = x * 1e6
        n = <int64_t> r
        f = r - <double> n
        if fabs(f - 0.5) > 1e-6:
            if f > 0.5:
                n += 1
            fp = n % 1000000
            o[0] = 48 + <uint8_t> (n // 1000000)
            o[1] = 46
            for k in range(7, 1, -1):
                o[k] = 48 + <uint8_t> (fp % 10)
                fp = fp // 10
            return 8
    return snprintf(<char*> o, FIXED_MAX, "%.6f", x)


cdef inline void put_bytes(Buffer* b, const uint8_t* src, Py_ssize_t n) noexcept nogil:
    memcpy(b.data + b.n, src, n)
    b.n += n


def _strings_blob(list strings):
    """(UTF-8 bytes of the strings one after another, int64 offsets [len + 1])."""
    encoded = [x.encode("utf-8") for x in strings]
    off = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum([len(x) for x in encoded], out=off[1:])
    return b"".join(encoded), off


def format_scored_rows(const uint8_t[::1] block, const int64_t[::1] tok_start, const int64_t[::1] tok_end,
                       const int32_t[::1] sent_ptr, const int64_t[::1] items, const int64_t[::1] pt_start,
                       const int64_t[::1] pt_end, const int32_t[:, ::1] pred, const int32_t[::1] n_blocks,
                       const double[:, ::1] logp, const double[:, ::1] marg, const int32_t[:, ::1] col,
                       bint every, list labels, list names, bytes sep, bint nbest, int per_row=1):
    """The output bytes of a batch with probabilities (crftk tag -v / -n): each sentence as
    ``n_blocks[s]`` blocks k, each a header line, its tokens' rows and a blank line. A header is
    ``# nbest k P`` (``nbest``) or ``# prob P``, P = exp(logp[s, k]); a row is the token's columns,
    each followed by sep, then labels[pred[k, t]], then (``col`` has rows) sep and marg[t, col[k, t]],
    then (``every``) sep and ``names[j]/marg[t, j]`` for every column j of marg. Numbers as
    format(x, ".6f"). The pass-through lines in place, as format_rows writes them. With ``per_row``
    R > 1 (a pipeline's stages), block k's row t holds R labels pred[k*R + r, t], separated by sep,
    each followed by its probability when ``col`` has rows (marg[t, col[k*R + r, t]])."""
    cdef Py_ssize_t N = tok_start.shape[0], I = items.shape[0], S = sent_ptr.shape[0] - 1
    cdef Py_ssize_t R = per_row, K = pred.shape[0] // max(1, per_row), M = marg.shape[1], L = len(labels)
    cdef Py_ssize_t q
    cdef bint with_prob = col.shape[0] > 0
    if sep is None or len(sep) != 1:
        raise ValueError("format_scored_rows: sep must be one byte")
    if per_row < 1 or pred.shape[0] % per_row or (per_row > 1 and every):
        raise ValueError(f"format_scored_rows: {pred.shape[0]} label rows in rows of {per_row} labels")
    if pred.shape[1] != N or n_blocks.shape[0] != S or logp.shape[0] != S or logp.shape[1] != K \
            or tok_end.shape[0] != N or S < 0 or (S > 0 and sent_ptr[S] != N):
        raise ValueError(f"format_scored_rows: pred ({K}, {pred.shape[1]}), n_blocks {n_blocks.shape[0]}, "
                         f"logp ({logp.shape[0]}, {logp.shape[1]}) for {S} sentences of {N} tokens")
    if (with_prob or every) and marg.shape[0] != N:
        raise ValueError(f"format_scored_rows: marginals of {marg.shape[0]} tokens for {N}")
    if with_prob and (col.shape[0] != K * R or col.shape[1] != N):
        raise ValueError(f"format_scored_rows: columns ({col.shape[0]}, {col.shape[1]}) for pred ({K}, {N})")
    if every and len(names) != M:
        raise ValueError(f"format_scored_rows: {len(names)} names for {M} marginal columns")
    lab_blob, lab_off_np = _strings_blob(labels)
    name_blob, name_off_np = _strings_blob(names if every else [])
    cdef int64_t[::1] lab_off = lab_off_np
    cdef int64_t[::1] name_off = name_off_np
    cdef const uint8_t* lb = <const uint8_t*> (<char*> lab_blob)
    cdef const uint8_t* nb = <const uint8_t*> (<char*> name_blob)
    cdef const uint8_t* p = &block[0] if block.shape[0] else NULL
    cdef uint8_t sepc = sep[0]
    cdef Py_ssize_t it, k, s, t, j, a, row_max, widest = 0, names_len = 0
    cdef int32_t y, c
    cdef int bad = 0
    cdef char head[64]
    cdef Buffer out
    for j in range(L):
        widest = max(widest, lab_off[j + 1] - lab_off[j])
    if every:
        names_len = name_off[M]
    # the bytes a row adds to its line: label, probabilities (each checked again if longer)
    row_max = R * (widest + 2 + (10 if with_prob else 0)) + ((names_len + M * 11) if every else 0)
    with nogil:
        for s in range(S):              # every index is checked before any is read
            if n_blocks[s] < 0 or n_blocks[s] > K or sent_ptr[s] < 0 or sent_ptr[s] > sent_ptr[s + 1]:
                bad = 1
        for k in range(K * R):
            for t in range(N):
                if pred[k, t] < 0 or pred[k, t] >= L or (with_prob and not 0 <= col[k, t] < M):
                    bad = 1
        for it in range(I):
            k = items[it]
            if (k >= S) or (k < 0 and -1 - k >= pt_start.shape[0]):
                bad = 1
    if bad:
        raise ValueError("format_scored_rows: an index out of range")
    out.n = 0
    out.cap = N * (row_max + 16) + 64 * S + 64
    for t in range(N):
        out.cap += tok_end[t] - tok_start[t]
    out.data = <uint8_t*> malloc(out.cap)
    if out.data == NULL:
        raise MemoryError()
    try:
        with nogil:
            for it in range(I):
                k = items[it]
                if k < 0:
                    k = -1 - k
                    if reserve(&out, pt_end[k] - pt_start[k] + 1) < 0:
                        bad = 2
                        break
                    out.n += copy_line(out.data + out.n, p, pt_start[k], pt_end[k])
                    continue
                s = k
                for k in range(n_blocks[s]):
                    if nbest:
                        a = snprintf(head, 64, "# nbest %d ", <int> k)
                    else:
                        a = snprintf(head, 64, "# prob ")
                    if reserve(&out, a + FIXED_MAX + 1) < 0:
                        bad = 2
                        break
                    put_bytes(&out, <const uint8_t*> head, a)
                    out.n += put_fixed6(out.data + out.n, exp(logp[s, k]))
                    out.data[out.n] = 10
                    out.n += 1
                    for t in range(sent_ptr[s], sent_ptr[s + 1]):
                        if reserve(&out, tok_end[t] - tok_start[t] + 1 + row_max + (R + 1) * FIXED_MAX) < 0:
                            bad = 2
                            break
                        out.n += copy_columns(out.data + out.n, p, tok_start[t], tok_end[t], sepc)
                        for q in range(k * R, k * R + R):
                            if q > k * R:
                                out.data[out.n] = sepc
                                out.n += 1
                            y = pred[q, t]
                            put_bytes(&out, lb + lab_off[y], lab_off[y + 1] - lab_off[y])
                            if with_prob:
                                out.data[out.n] = sepc
                                out.n += 1
                                out.n += put_fixed6(out.data + out.n, marg[t, col[q, t]])
                        if every:
                            for c in range(M):
                                if reserve(&out, name_off[c + 1] - name_off[c] + 2 + FIXED_MAX) < 0:
                                    bad = 2
                                    break
                                out.data[out.n] = sepc
                                out.n += 1
                                put_bytes(&out, nb + name_off[c], name_off[c + 1] - name_off[c])
                                out.data[out.n] = 47
                                out.n += 1
                                out.n += put_fixed6(out.data + out.n, marg[t, c])
                            if bad:
                                break
                        out.data[out.n] = 10
                        out.n += 1
                    if bad or reserve(&out, 1) < 0:
                        bad = 2
                        break
                    out.data[out.n] = 10
                    out.n += 1
                if bad:
                    break
        if bad:
            raise MemoryError()
        return (<char*> out.data)[:out.n]
    finally:
        free(out.data)
