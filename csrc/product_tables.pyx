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
from libc.stdlib cimport malloc, free
from cython.parallel cimport prange, parallel, threadid

from chain cimport ChainBuffers, chain_pool_new, chain_pool_free
from product cimport (Shape, shape_init, product_forward_backward, product_node_marginals,
                      product_edge_marginals, product_viterbi, product_nbest)


cdef struct Factors:
    # each chain's transition matrices as [1 or N, n*n] rows (1: shared by every position),
    # and for the exponentiated ones their log shifts [1 or N]
    const double* rows[8]
    const double* shifts[8]
    Py_ssize_t n_rows[8]
    Py_ssize_t width[8]


cdef void factors_init(Factors* f, matrices, shifts) except *:
    """Fill f from contiguous [rows, n*n] arrays (and [rows] shifts, or None); the caller keeps them."""
    cdef const double[:, ::1] m
    cdef const double[::1] v
    for c in range(len(matrices)):
        m = matrices[c]
        f.rows[c] = &m[0, 0] if m.shape[0] else NULL
        f.n_rows[c] = m.shape[0]
        f.width[c] = m.shape[1]
        f.shifts[c] = NULL
        if shifts is not None:
            v = shifts[c]
            f.shifts[c] = &v[0] if v.shape[0] else NULL


cdef inline void factors_at(const Factors* f, int C, Py_ssize_t t0, int T, const double** table,
                            double* shift) noexcept nogil:
    """table[t*C + c]: chain c's matrix into position t of the product chain starting at t0,
    and when shift is given, its log shift into shift[t*C + c]."""
    cdef int t, c
    cdef Py_ssize_t row
    for t in range(1, T):
        for c in range(C):
            row = 0 if f.n_rows[c] == 1 else t0 + t
            table[t * C + c] = f.rows[c] + row * f.width[c]
            if shift != NULL:
                shift[t * C + c] = f.shifts[c][row]


cdef class ProductTables:
    """A batch of product chains, checked and made contiguous."""

    cdef readonly object sizes, sent_ptr, state, trans, shared
    cdef readonly int n_states, max_len
    cdef readonly Py_ssize_t n_tokens, n_chains
    cdef Shape shape
    cdef const long[::1] sp
    cdef const double[:, ::1] st

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
        self.n_tokens = N
        self.n_chains = sp.size - 1
        self.max_len = int(np.diff(sp).max()) if sp.size > 1 else 0
        cdef int[::1] n_labels = self.sizes
        shape_init(&self.shape, C, &n_labels[0])
        self.sp = self.sent_ptr
        self.st = self.state


def forward_backward(sizes, sent_ptr, state, trans, int n_threads=1, bint edges=True):
    """(log Z [S], joint node marginals [N, prod(sizes)], per chain edge marginals
    [N, n_c, n_c] (row n: chain c's labels at n-1 and n; first rows 0), or None for them
    when ``edges`` is false (they cost more than the rest)."""
    cdef ProductTables tab = ProductTables(sizes, sent_ptr, state, trans)
    cdef const Shape* sh = &tab.shape
    cdef int S = sh.S, C = sh.C, nt = max(1, n_threads)
    # exponentiated transitions: shared matrices once, per-position ones here too
    exp_tables = []
    shifts = []
    for m in tab.trans:
        mx = m.max(axis=1)
        exp_tables.append(np.ascontiguousarray(np.exp(m - mx[:, None])))
        shifts.append(np.ascontiguousarray(mx))
    cdef Factors factors
    factors_init(&factors, exp_tables, shifts)
    logz_np = np.zeros(tab.n_chains)
    node_np = np.zeros((tab.n_tokens, S))
    edges_np = [np.zeros((tab.n_tokens if edges else 0, n, n)) for n in tab.sizes.tolist()]
    cdef double[::1] logz = logz_np
    cdef double[:, ::1] node = node_np
    cdef double* edge_out[8]
    cdef double[:, :, ::1] edv
    for c_ in range(C):
        edv = edges_np[c_]
        edge_out[c_] = &edv[0, 0, 0] if tab.n_tokens and edges else NULL
    cdef ChainBuffers* b = NULL
    cdef Py_ssize_t s, t0
    cdef int T, t, c, k, L
    if tab.n_chains == 0:
        return logz_np, node_np, edges_np if edges else None
    cdef ChainBuffers* pool = chain_pool_new(nt, tab.max_len, S, C, False, 0)
    try:
        with nogil, parallel(num_threads=nt):
            b = &pool[threadid()]
            for s in prange(tab.n_chains, schedule="dynamic", chunksize=4):
                t0 = tab.sp[s]
                T = <int> (tab.sp[s + 1] - t0)
                factors_at(&factors, C, t0, T, b.E, b.shift)
                logz[s] = product_forward_backward(sh, T, &tab.st[t0, 0], b.E, b.shift, b.q, b.alpha, b.beta,
                                                   b.scale, b.tmp)
                for t in range(1, T if edges else 1):
                    for c in range(C):
                        L = sh.n[c]
                        product_edge_marginals(sh, c, b.alpha + (t - 1) * S, b.E + t * C, b.q + t * S,
                                               b.tmp, edge_out[c] + (t0 + t) * L * L)
                product_node_marginals(T, S, b.alpha, b.beta)
                for k in range(T * S):
                    node[t0 + k // S, k % S] = b.alpha[k]
    finally:
        chain_pool_free(pool, nt)
    return logz_np, node_np, edges_np if edges else None


def viterbi(sizes, sent_ptr, state, trans, int n_threads=1):
    """(best joint labels [N], their scores [S]); np.unravel_index(labels, sizes) splits them."""
    cdef ProductTables tab = ProductTables(sizes, sent_ptr, state, trans)
    cdef const Shape* sh = &tab.shape
    cdef int S = sh.S, C = sh.C, nt = max(1, n_threads)
    cdef Factors factors
    factors_init(&factors, tab.trans, None)
    out_np = np.zeros(tab.n_tokens, dtype=np.int32)
    score_np = np.zeros(tab.n_chains)
    cdef int[::1] out = out_np
    cdef double[::1] score = score_np
    cdef ChainBuffers* b = NULL
    cdef Py_ssize_t s, t0
    cdef int T
    if tab.n_chains == 0:
        return out_np, score_np
    cdef ChainBuffers* pool = chain_pool_new(nt, tab.max_len, S, C, False, 0)
    try:
        with nogil, parallel(num_threads=nt):
            b = &pool[threadid()]
            for s in prange(tab.n_chains, schedule="dynamic", chunksize=4):
                t0 = tab.sp[s]
                T = <int> (tab.sp[s + 1] - t0)
                factors_at(&factors, C, t0, T, b.E, NULL)
                product_viterbi(sh, T, &tab.st[t0, 0], b.E, b.alpha, b.tmp, b.bp, &out[t0], &score[s])
    finally:
        chain_pool_free(pool, nt)
    return out_np, score_np


def add_rows(double[:, ::1] out, const long[::1] at, const double[:, ::1] table, const long[::1] rows):
    """out[at[k]] += table[rows[k]] for every k (indices checked; repeats add up): the sparse
    part of a product chain's state table, e.g. the features a composed model's downstream stage
    has for one (token, upstream label) pair."""
    cdef Py_ssize_t k, i, K = at.shape[0], W = out.shape[1]
    if rows.shape[0] != K or table.shape[1] != W:
        raise ValueError("add_rows: at and rows must have one entry each, table rows the width of out")
    if K and (np.asarray(at).min() < 0 or np.asarray(at).max() >= out.shape[0]
              or np.asarray(rows).min() < 0 or np.asarray(rows).max() >= table.shape[0]):
        raise ValueError("add_rows: an index is out of range")
    cdef double* o
    cdef const double* t
    with nogil:
        for k in range(K):
            o = &out[at[k], 0]
            t = &table[rows[k], 0]
            for i in range(W):
                o[i] += t[i]


def nbest(sizes, sent_ptr, state, trans, int k, int n_threads=1):
    """The k best joint labelings of each product chain: (paths [k, N] of joint labels, their
    scores [S, k], counts [S]: how many each chain has, at most k)."""
    cdef ProductTables tab = ProductTables(sizes, sent_ptr, state, trans)
    cdef const Shape* sh = &tab.shape
    cdef int S = sh.S, C = sh.C, nt = max(1, n_threads), K = k
    if K < 1:
        raise ValueError("k must be at least 1")
    cdef Factors factors
    factors_init(&factors, tab.trans, None)
    paths_np = np.zeros((K, tab.n_tokens), dtype=np.int32)
    scores_np = np.full((tab.n_chains, K), -np.inf)
    counts_np = np.zeros(tab.n_chains, dtype=np.int32)
    cdef int[:, ::1] paths = paths_np
    cdef double[:, ::1] scores = scores_np
    cdef int[::1] counts = counts_np
    if tab.n_chains == 0:
        return paths_np, scores_np, counts_np
    cdef Py_ssize_t cells = <Py_ssize_t> max(1, tab.max_len) * C * S * K
    cdef Py_ssize_t s, t0
    cdef int T, o, t
    cdef ChainBuffers* b = NULL
    cdef double* score = NULL
    cdef int* back = NULL
    cdef int* rank = NULL
    cdef int* out = NULL
    cdef int* heads = NULL
    cdef ChainBuffers* pool = chain_pool_new(nt, tab.max_len, S, C, False, 0)
    try:
        with nogil, parallel(num_threads=nt):
            b = &pool[threadid()]
            score = <double*> malloc(cells * sizeof(double))
            back = <int*> malloc(cells * sizeof(int))
            rank = <int*> malloc(cells * sizeof(int))
            out = <int*> malloc(<Py_ssize_t> K * max(1, tab.max_len) * sizeof(int))
            heads = <int*> malloc(max(S, 8) * sizeof(int))
            for s in prange(tab.n_chains, schedule="dynamic", chunksize=4):
                if score == NULL or back == NULL or rank == NULL or out == NULL or heads == NULL:
                    counts[s] = -1
                    continue
                t0 = tab.sp[s]
                T = <int> (tab.sp[s + 1] - t0)
                factors_at(&factors, C, t0, T, b.E, NULL)
                product_nbest(sh, T, K, &tab.st[t0, 0], b.E, score, back, rank, out, &scores[s, 0],
                              heads, &counts[s])
                for o in range(counts[s]):
                    for t in range(T):
                        paths[o, t0 + t] = out[o * T + t]
            free(score)
            free(back)
            free(rank)
            free(out)
            free(heads)
    finally:
        chain_pool_free(pool, nt)
    if (counts_np < 0).any():
        raise MemoryError()
    return paths_np, scores_np, counts_np
