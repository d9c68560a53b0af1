# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Exact inference on products of label chains, from tables given as arrays (crftk._product).

A batch of product chains (product.pxd describes the model) is

- ``sizes``: the number of labels of each chain (C of them; joint labels are numbered
  row-major, chain 0 outermost: ``np.ravel_multi_index(labels, sizes)``);
- ``sent_ptr[S+1]``: the positions of each product chain;
- ``state[N, prod(sizes)]``: log potentials of the joint labels;
- ``trans``: one log transition matrix per chain, each ``[n_c, n_c]`` (every position)
  or ``[N, n_c, n_c]`` (row n: the matrix into position n).

The kernels run over the product chains in parallel.
"""

import numpy as np
from cython.parallel cimport prange, parallel, threadid
from libc.stdlib cimport malloc, free

from chain cimport exp_shifted
from product cimport (Shape, shape_init, product_forward_backward, product_node_marginals,
                      product_edge_marginals, product_viterbi)


class ProductTables:
    """A batch of product chains, checked and made contiguous."""

    def __init__(self, sizes, sent_ptr, state, trans):
        self.sizes = np.ascontiguousarray(sizes, dtype=np.int32)
        C = self.sizes.size
        if not 1 <= C <= 8 or (self.sizes < 1).any():
            raise ValueError("between 1 and 8 chains, each with at least one label")
        S = int(np.prod(self.sizes.astype(np.int64)))
        self.sent_ptr = np.ascontiguousarray(sent_ptr, dtype=np.int64)
        self.state = np.ascontiguousarray(state, dtype=np.float64)
        if self.state.ndim != 2 or self.state.shape[1] != S:
            raise ValueError(f"state must be [N, {S}]")
        N = self.state.shape[0]
        sp = self.sent_ptr
        if sp.ndim != 1 or sp.size < 1 or sp[0] != 0 or sp[-1] != N or (np.diff(sp) < 1).any():
            raise ValueError("sent_ptr must rise from 0 to N in steps of at least 1")
        if len(trans) != C:
            raise ValueError(f"one transition table per chain: {C}, not {len(trans)}")
        self.trans = []
        self.shared = []
        for n, m in zip(self.sizes.tolist(), trans):
            m = np.ascontiguousarray(m, dtype=np.float64)
            if m.shape not in ((n, n), (N, n, n)):
                raise ValueError(f"a chain of {n} labels needs trans [{n}, {n}] or [N, {n}, {n}], not {m.shape}")
            self.shared.append(m.ndim == 2)
            self.trans.append(m.reshape(-1, n * n))
        self.n_states = S
        self.max_len = int(np.diff(sp).max()) if sp.size > 1 else 0


cdef void _pointers(const double** table, Py_ssize_t t0, int T, int C, const double** chains,
                    const long* rows, Py_ssize_t* widths) noexcept nogil:
    """table[t*C + c]: the row of chain c's matrix into position t (row 0 when shared)."""
    cdef int t, c
    for t in range(1, T):
        for c in range(C):
            table[t * C + c] = chains[c] + (0 if rows[c] == 1 else (t0 + t) * widths[c])


def forward_backward(sizes, sent_ptr, state, trans, int n_threads=1):
    """(log Z [S], joint node marginals [N, prod(sizes)], per chain edge marginals
    [N, n_c, n_c] (row n: chain c's labels at n-1 and n; first rows 0))."""
    tab = ProductTables(sizes, sent_ptr, state, trans)
    cdef Shape sh
    cdef int C = tab.sizes.size
    cdef int[::1] nsz = tab.sizes
    shape_init(&sh, C, &nsz[0])
    cdef int S = sh.S, max_len = tab.max_len, nt = max(1, n_threads)
    cdef Py_ssize_t N = tab.state.shape[0], n_sent = tab.sent_ptr.size - 1
    cdef const long[::1] sp = tab.sent_ptr
    cdef const double[:, ::1] st = tab.state
    # exponentiated transitions: shared matrices once, per-position ones here too
    exp_tables = []
    shifts = []
    for m in tab.trans:
        mx = m.max(axis=1)
        exp_tables.append(np.ascontiguousarray(np.exp(m - mx[:, None])))
        shifts.append(np.ascontiguousarray(mx))
    cdef const double** chains = <const double**> malloc(C * sizeof(double*))
    cdef const double** shift_rows = <const double**> malloc(C * sizeof(double*))
    cdef long* rows = <long*> malloc(C * sizeof(long))
    cdef Py_ssize_t* widths = <Py_ssize_t*> malloc(C * sizeof(Py_ssize_t))
    cdef double[:, ::1] ev
    cdef double[::1] sv
    for c_ in range(C):
        ev = exp_tables[c_]
        sv = shifts[c_]
        chains[c_] = &ev[0, 0]
        shift_rows[c_] = &sv[0]
        rows[c_] = exp_tables[c_].shape[0]
        widths[c_] = exp_tables[c_].shape[1]
    logz_np = np.zeros(n_sent)
    node_np = np.zeros((N, S))
    edges_np = [np.zeros((N, n, n)) for n in tab.sizes.tolist()]
    cdef double[::1] logz = logz_np
    cdef double[:, ::1] node = node_np
    cdef double** edge_out = <double**> malloc(C * sizeof(double*))
    cdef double[:, :, ::1] edv
    for c_ in range(C):
        edv = edges_np[c_]
        edge_out[c_] = &edv[0, 0, 0] if N else NULL
    flags_np = np.zeros(nt, dtype=np.int32)
    cdef int[::1] flags = flags_np
    cdef double* q
    cdef double* alpha
    cdef double* beta
    cdef double* scale
    cdef double* shift
    cdef double* tmp
    cdef const double** E
    cdef Py_ssize_t s, t0
    cdef int T, t, c, k, L
    cdef Py_ssize_t cells = <Py_ssize_t> max(1, max_len) * S
    try:
        if n_sent:
            with nogil, parallel(num_threads=nt):
                q = <double*> malloc(cells * sizeof(double))
                alpha = <double*> malloc(cells * sizeof(double))
                beta = <double*> malloc(cells * sizeof(double))
                scale = <double*> malloc(max(1, max_len) * sizeof(double))
                shift = <double*> malloc(max(1, max_len) * C * sizeof(double))
                tmp = <double*> malloc(2 * S * sizeof(double))
                E = <const double**> malloc(max(1, max_len) * C * sizeof(double*))
                if q == NULL or alpha == NULL or beta == NULL or scale == NULL or shift == NULL \
                        or tmp == NULL or E == NULL:
                    flags[threadid()] = 1
                for s in prange(n_sent, schedule="dynamic", chunksize=4):
                    if flags[threadid()] == 0:
                        t0 = sp[s]
                        T = <int> (sp[s + 1] - t0)
                        _pointers(E, t0, T, C, chains, rows, widths)
                        for t in range(1, T):
                            for c in range(C):
                                shift[t * C + c] = shift_rows[c][0 if rows[c] == 1 else t0 + t]
                        logz[s] = product_forward_backward(&sh, T, &st[t0, 0], E, shift, q, alpha, beta,
                                                           scale, tmp)
                        for t in range(1, T):
                            for c in range(C):
                                L = sh.n[c]
                                product_edge_marginals(&sh, c, alpha + (t - 1) * S, E + t * C, q + t * S,
                                                       tmp, edge_out[c] + (t0 + t) * L * L)
                        product_node_marginals(T, S, alpha, beta)
                        for k in range(T * S):
                            node[t0 + k // S, k % S] = alpha[k]
                free(q)
                free(alpha)
                free(beta)
                free(scale)
                free(shift)
                free(tmp)
                free(E)
    finally:
        free(chains)
        free(shift_rows)
        free(rows)
        free(widths)
        free(edge_out)
    if flags_np.any():
        raise MemoryError("cannot allocate product chain buffers")
    return logz_np, node_np, edges_np


def viterbi(sizes, sent_ptr, state, trans, int n_threads=1):
    """(best joint labels [N], their scores [S]); np.unravel_index(labels, sizes) splits them."""
    tab = ProductTables(sizes, sent_ptr, state, trans)
    cdef Shape sh
    cdef int C = tab.sizes.size
    cdef int[::1] nsz = tab.sizes
    shape_init(&sh, C, &nsz[0])
    cdef int S = sh.S, max_len = tab.max_len, nt = max(1, n_threads)
    cdef Py_ssize_t N = tab.state.shape[0], n_sent = tab.sent_ptr.size - 1
    cdef const long[::1] sp = tab.sent_ptr
    cdef const double[:, ::1] st = tab.state
    cdef const double** chains = <const double**> malloc(C * sizeof(double*))
    cdef long* rows = <long*> malloc(C * sizeof(long))
    cdef Py_ssize_t* widths = <Py_ssize_t*> malloc(C * sizeof(Py_ssize_t))
    cdef const double[:, ::1] mv
    for c_ in range(C):
        mv = tab.trans[c_]
        chains[c_] = &mv[0, 0]
        rows[c_] = tab.trans[c_].shape[0]
        widths[c_] = tab.trans[c_].shape[1]
    out_np = np.zeros(N, dtype=np.int32)
    score_np = np.zeros(n_sent)
    cdef int[::1] out = out_np
    cdef double[::1] score = score_np
    flags_np = np.zeros(nt, dtype=np.int32)
    cdef int[::1] flags = flags_np
    cdef double* delta
    cdef double* tmp
    cdef int* bp
    cdef const double** Tr
    cdef Py_ssize_t s, t0
    cdef int T
    cdef Py_ssize_t cells = <Py_ssize_t> max(1, max_len) * S
    try:
        if n_sent:
            with nogil, parallel(num_threads=nt):
                delta = <double*> malloc(cells * sizeof(double))
                tmp = <double*> malloc(2 * S * sizeof(double))
                bp = <int*> malloc(cells * C * sizeof(int))
                Tr = <const double**> malloc(max(1, max_len) * C * sizeof(double*))
                if delta == NULL or tmp == NULL or bp == NULL or Tr == NULL:
                    flags[threadid()] = 1
                for s in prange(n_sent, schedule="dynamic", chunksize=4):
                    if flags[threadid()] == 0:
                        t0 = sp[s]
                        T = <int> (sp[s + 1] - t0)
                        _pointers(Tr, t0, T, C, chains, rows, widths)
                        product_viterbi(&sh, T, &st[t0, 0], Tr, delta, tmp, bp, &out[t0], &score[s])
                free(delta)
                free(tmp)
                free(bp)
                free(Tr)
    finally:
        free(chains)
        free(rows)
        free(widths)
    if flags_np.any():
        raise MemoryError("cannot allocate product chain buffers")
    return out_np, score_np
