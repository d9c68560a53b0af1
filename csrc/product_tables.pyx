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

from chain cimport ChainBuffers, ChainTask, run_chains
from product cimport (Shape, shape_init, product_forward, product_forward_backward, product_node_marginals,
                      product_edge_marginals, product_viterbi, product_nbest, nbest_ints)


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


cdef struct Batch:
    # a checked batch of product chains as C pointers, and what each kernel writes
    Shape shape
    const long* sp
    const double* st             # [N, S]
    Factors factors              # the transition matrices (log, or exp with their shifts)
    bint exp_factors             # factors hold exponentiated matrices and shifts
    double* logz                 # [n_chains]
    double* node                 # [N, S]
    double* edge[8]              # chain c's edge marginals [N, n_c * n_c], or NULL for none
    int* labels                  # [N]
    double* score                # [n_chains] (n-best: [n_chains, K])
    int K
    int* paths                   # [K, N]
    int* counts                  # [n_chains]
    Py_ssize_t N
    # n-best lists, per thread (product_nbest): [threads, cells] and [threads, K * max_len]
    double* nb_score
    int* nb_back
    int* nb_rank
    int* nb_out
    int* nb_ints
    double* nb_work
    Py_ssize_t cells, out_len, ints_len, work_len


cdef class ProductTables:
    """A batch of product chains, checked and made contiguous."""

    cdef readonly object sizes, sent_ptr, state, trans, shared
    cdef readonly int n_states, max_len
    cdef readonly Py_ssize_t n_tokens, n_chains
    cdef Shape shape
    cdef const long[::1] sp
    cdef const double[:, ::1] st
    cdef Batch batch

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
        self.batch.shape = self.shape
        self.batch.sp = &self.sp[0]
        self.batch.st = &self.st[0, 0] if N else NULL
        self.batch.N = N

    cdef int run(self, ChainTask task, int n_threads, int chunk) except -1:
        return run_chains(self.n_chains, max(1, n_threads), chunk, self.max_len, self.shape.S, self.shape.C,
                          False, 0, task, &self.batch)


cdef inline int span(const Batch* j, Py_ssize_t s, Py_ssize_t* t0) noexcept nogil:
    """The first position of product chain s (into t0) and its length."""
    t0[0] = j.sp[s]
    return <int> (j.sp[s + 1] - t0[0])


cdef void marginals_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Batch* j = <const Batch*> job
    cdef const Shape* sh = &j.shape
    cdef int S = sh.S, C = sh.C, t, c, L
    cdef Py_ssize_t t0, k
    cdef int T = span(j, s, &t0)
    factors_at(&j.factors, C, t0, T, b.E, b.shift)
    j.logz[s] = product_forward_backward(sh, T, j.st + t0 * S, b.E, b.shift, b.q, b.alpha, b.beta,
                                         b.scale, b.tmp)
    for t in range(1, T if j.edge[0] != NULL else 1):
        for c in range(C):
            L = sh.n[c]
            product_edge_marginals(sh, c, b.alpha + (t - 1) * S, b.E + t * C, b.q + t * S,
                                   b.tmp, j.edge[c] + (t0 + t) * L * L)
    product_node_marginals(T, S, b.alpha, b.beta)
    for k in range(<Py_ssize_t> T * S):
        j.node[t0 * S + k] = b.alpha[k]


cdef void log_partition_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Batch* j = <const Batch*> job
    cdef Py_ssize_t t0
    cdef int T = span(j, s, &t0)
    factors_at(&j.factors, j.shape.C, t0, T, b.E, b.shift)
    j.logz[s] = product_forward(&j.shape, T, j.st + t0 * j.shape.S, b.E, b.shift, b.q, b.alpha, b.scale, b.tmp)


cdef void viterbi_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Batch* j = <const Batch*> job
    cdef Py_ssize_t t0
    cdef int T = span(j, s, &t0)
    factors_at(&j.factors, j.shape.C, t0, T, b.E, NULL)
    product_viterbi(&j.shape, T, j.st + t0 * j.shape.S, b.E, b.alpha, b.tmp, b.bp, j.labels + t0, j.score + s)


cdef void nbest_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Batch* j = <const Batch*> job
    cdef const Shape* sh = &j.shape
    cdef Py_ssize_t t0, N = j.N
    cdef int T = span(j, s, &t0), o, t, count = 0
    cdef int* out = j.nb_out + tid * j.out_len
    cdef int* paths = j.paths
    factors_at(&j.factors, sh.C, t0, T, b.E, NULL)
    count = product_nbest(sh, T, j.K, j.st + t0 * sh.S, b.E, j.nb_score + tid * j.cells,
                          j.nb_back + tid * j.cells, j.nb_rank + tid * j.cells, j.nb_ints + tid * j.ints_len,
                          j.nb_work + tid * j.work_len, out, j.score + s * j.K)
    j.counts[s] = count
    for o in range(count):
        for t in range(T):
            paths[o * N + t0 + t] = out[o * T + t]


def exp_rows(m):
    """(exp(m - each row's maximum), the maxima) of transition rows [rows, n*n]: how
    forward_backward exponentiates them (crftk.structures.beam shares them with its kernel)."""
    mx = m.max(axis=1)
    return np.ascontiguousarray(np.exp(m - mx[:, None])), np.ascontiguousarray(mx)


cdef list exp_factors(ProductTables tab):
    """tab's transitions exponentiated (exp_rows: shared matrices once, per-position ones too) into
    its factors; the caller keeps the returned arrays alive while the factors are read."""
    exp_tables, shifts = [], []
    for m in tab.trans:
        e, mx = exp_rows(m)
        exp_tables.append(e)
        shifts.append(mx)
    factors_init(&tab.batch.factors, exp_tables, shifts)
    return [exp_tables, shifts]


def forward_backward(sizes, sent_ptr, state, trans, int n_threads=1, bint edges=True):
    """(log Z [S], joint node marginals [N, prod(sizes)], per chain edge marginals
    [N, n_c, n_c] (row n: chain c's labels at n-1 and n; first rows 0), or None for them
    when ``edges`` is false (they cost more than the rest)."""
    cdef ProductTables tab = ProductTables(sizes, sent_ptr, state, trans)
    cdef int S = tab.shape.S, C = tab.shape.C
    kept = exp_factors(tab)
    logz_np = np.zeros(tab.n_chains)
    node_np = np.zeros((tab.n_tokens, S))
    edges_np = [np.zeros((tab.n_tokens if edges else 0, n, n)) for n in tab.sizes.tolist()]
    cdef double[::1] logz = logz_np
    cdef double[:, ::1] node = node_np
    cdef double[:, :, ::1] edv
    if tab.n_chains:
        tab.batch.logz, tab.batch.node = &logz[0], &node[0, 0]
        for c in range(C):
            edv = edges_np[c]
            tab.batch.edge[c] = &edv[0, 0, 0] if edges else NULL
        tab.run(marginals_task, n_threads, 4)
    return logz_np, node_np, edges_np if edges else None


def log_partition(sizes, sent_ptr, state, trans, int n_threads=1):
    """log Z [S]: forward_backward's, from its forward pass alone (the same bits)."""
    cdef ProductTables tab = ProductTables(sizes, sent_ptr, state, trans)
    kept = exp_factors(tab)
    logz_np = np.zeros(tab.n_chains)
    cdef double[::1] logz = logz_np
    if tab.n_chains:
        tab.batch.logz = &logz[0]
        tab.run(log_partition_task, n_threads, 4)
    return logz_np


def viterbi(sizes, sent_ptr, state, trans, int n_threads=1):
    """(best joint labels [N], their scores [S]); np.unravel_index(labels, sizes) splits them."""
    cdef ProductTables tab = ProductTables(sizes, sent_ptr, state, trans)
    factors_init(&tab.batch.factors, tab.trans, None)
    out_np = np.zeros(tab.n_tokens, dtype=np.int32)
    score_np = np.zeros(tab.n_chains)
    cdef int[::1] out = out_np
    cdef double[::1] score = score_np
    if tab.n_chains:
        tab.batch.labels, tab.batch.score = &out[0], &score[0]
        tab.run(viterbi_task, n_threads, 4)
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
    cdef int S = tab.shape.S, C = tab.shape.C, nt = max(1, n_threads)
    if k < 1:
        raise ValueError("k must be at least 1")
    factors_init(&tab.batch.factors, tab.trans, None)
    paths_np = np.zeros((k, tab.n_tokens), dtype=np.int32)
    scores_np = np.full((tab.n_chains, k), -np.inf)
    counts_np = np.zeros(tab.n_chains, dtype=np.int32)
    if tab.n_chains == 0:
        return paths_np, scores_np, counts_np
    cdef int[:, ::1] paths = paths_np
    cdef double[:, ::1] scores = scores_np
    cdef int[::1] counts = counts_np
    cdef Py_ssize_t cells = <Py_ssize_t> max(1, tab.max_len) * C * S * k
    # each thread's lists (product_nbest); numpy raises MemoryError before any thread starts
    nb_score_np = np.empty(nt * cells)
    nb_int_np = np.empty((2, nt * cells), dtype=np.int32)
    nb_out_np = np.empty(nt * k * max(1, tab.max_len), dtype=np.int32)
    W = int(tab.sizes.max())
    ints_len = nbest_ints(C, S, max(1, tab.max_len), k, W)     # nbest.h's node counts and frontiers
    nb_ints_np = np.empty(nt * ints_len, dtype=np.int32)
    work_len = 2 * W
    nb_work_np = np.empty(nt * work_len)
    cdef double[::1] nb_score = nb_score_np
    cdef int[:, ::1] nb_int = nb_int_np
    cdef int[::1] nb_out = nb_out_np, nb_ints = nb_ints_np
    cdef double[::1] nb_work = nb_work_np
    cdef Batch* j = &tab.batch
    j.paths, j.score, j.counts, j.K = &paths[0, 0], &scores[0, 0], &counts[0], k
    j.nb_score, j.nb_back, j.nb_rank = &nb_score[0], &nb_int[0, 0], &nb_int[1, 0]
    j.nb_out, j.nb_ints, j.nb_work = &nb_out[0], &nb_ints[0], &nb_work[0]
    j.cells, j.out_len, j.ints_len, j.work_len = cells, k * max(1, tab.max_len), ints_len, work_len
    tab.run(nbest_task, nt, 4)
    return paths_np, scores_np, counts_np
