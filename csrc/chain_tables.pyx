# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Chain inference on potential tables given as arrays (crftk._chain).

For structures whose potentials do not come from one feature space (a mixture of
models' local distributions, a chain carrying messages from other chains) and for
tests: a batch of chains is

- ``sent_ptr[S+1]``: the positions of each chain;
- ``state[N, L]``: log state potentials;
- ``trans``: log transition matrices, either one ``[L, L]`` for every position or
  ``[N, L, L]`` (row n: the matrix into position n; rows of first positions unused).

The kernels are those of chain.pxd, run over the chains in parallel.
"""

import numpy as np
from cython.parallel cimport prange, parallel, threadid
from libc.stdlib cimport malloc, free
from libc.math cimport INFINITY

from chain cimport (exp_shifted, chain_forward_backward, chain_edge_marginals, chain_node_marginals,
                    chain_viterbi, chain_nbest)


cdef struct Buffers:
    double* q
    double* alpha
    double* beta
    double* scale
    double* shift
    double* ebuf
    const double** E
    int* bp


cdef Buffers* buffers_new(int max_T, int L) noexcept nogil:
    cdef Buffers* b = <Buffers*> malloc(sizeof(Buffers))
    if b == NULL:
        return NULL
    if max_T < 1:
        max_T = 1
    b.q = <double*> malloc(max_T * L * sizeof(double))
    b.alpha = <double*> malloc(max_T * L * sizeof(double))
    b.beta = <double*> malloc(max_T * L * sizeof(double))
    b.scale = <double*> malloc(max_T * sizeof(double))
    b.shift = <double*> malloc(max_T * sizeof(double))
    b.ebuf = <double*> malloc(<Py_ssize_t> max_T * L * L * sizeof(double))
    b.E = <const double**> malloc(max_T * sizeof(double*))
    b.bp = <int*> malloc(max_T * L * sizeof(int))
    if (b.q == NULL or b.alpha == NULL or b.beta == NULL or b.scale == NULL or b.shift == NULL
            or b.ebuf == NULL or b.E == NULL or b.bp == NULL):
        buffers_free(b)
        return NULL
    return b


cdef void buffers_free(Buffers* b) noexcept nogil:
    if b == NULL:
        return
    free(b.q)
    free(b.alpha)
    free(b.beta)
    free(b.scale)
    free(b.shift)
    free(b.ebuf)
    free(b.E)
    free(b.bp)
    free(b)


class ChainTables:
    """A batch of chains: sent_ptr, state [N, L], trans [L, L] or [N, L, L] (checked, contiguous)."""

    def __init__(self, sent_ptr, state, trans):
        self.sent_ptr = np.ascontiguousarray(sent_ptr, dtype=np.int64)
        self.state = np.ascontiguousarray(state, dtype=np.float64)
        self.trans = np.ascontiguousarray(trans, dtype=np.float64)
        if self.state.ndim != 2:
            raise ValueError("state must be [N, L]")
        N, L = self.state.shape
        if L < 1:
            raise ValueError("need at least one label")
        sp = self.sent_ptr
        if sp.ndim != 1 or sp.size < 1 or sp[0] != 0 or sp[-1] != N or (np.diff(sp) < 1).any():
            raise ValueError("sent_ptr must rise from 0 to N in steps of at least 1")
        if self.trans.shape not in ((L, L), (N, L, L)):
            raise ValueError(f"trans must be [L, L] or [N, L, L], not {self.trans.shape}")
        self.shared = self.trans.ndim == 2
        self.n_labels = L
        self.max_len = int(np.diff(sp).max()) if sp.size > 1 else 0


def _pointers(tables):
    return tables.sent_ptr, tables.state, tables.trans.reshape(-1, tables.n_labels * tables.n_labels)


def forward_backward(sent_ptr, state, trans, int n_threads=1):
    """(log Z [S], node marginals [N, L], edge marginals [N, L, L]) of every chain.

    Row n of the edge marginals is p(y_{n-1} = i, y_n = j); rows of first positions are 0.
    """
    tab = ChainTables(sent_ptr, state, trans)
    cdef int L = tab.n_labels
    cdef Py_ssize_t N = tab.state.shape[0], S = tab.sent_ptr.size - 1
    cdef const long[::1] sp = tab.sent_ptr
    cdef const double[:, ::1] st = tab.state
    cdef const double[:, ::1] tr = tab.trans.reshape(-1, L * L)
    cdef bint shared = tab.shared
    cdef int max_len = tab.max_len, nt = max(1, n_threads)
    logz_np = np.zeros(S)
    node_np = np.zeros((N, L))
    edge_np = np.zeros((N, L, L))
    cdef double[::1] logz = logz_np
    cdef double[:, ::1] node = node_np
    cdef double[:, ::1] edge = edge_np.reshape(N, L * L)
    flags_np = np.zeros(max(1, n_threads), dtype=np.int32)
    cdef int[::1] flags = flags_np
    cdef Buffers* b
    cdef Py_ssize_t s, t0, t
    cdef int T, i, LL = L * L
    cdef double shift_shared = 0.0
    E_np = np.empty(LL)
    cdef double[::1] E_shared = E_np
    if shared:
        shift_shared = exp_shifted(&tr[0, 0], &E_shared[0], LL)
    if S == 0:
        return logz_np, node_np, edge_np
    with nogil, parallel(num_threads=nt):
        b = buffers_new(max_len, L)
        if b == NULL:
            flags[threadid()] = 1
        for s in prange(S, schedule="dynamic", chunksize=8):
            if b != NULL:
                t0 = sp[s]
                T = <int> (sp[s + 1] - t0)
                for t in range(1, T):
                    if shared:
                        b.E[t] = &E_shared[0]
                        b.shift[t] = shift_shared
                    else:
                        b.shift[t] = exp_shifted(&tr[t0 + t, 0], b.ebuf + t * LL, LL)
                        b.E[t] = b.ebuf + t * LL
                logz[s] = chain_forward_backward(T, L, &st[t0, 0], b.E, b.shift, b.q, b.alpha, b.beta,
                                                 b.scale, NULL, NULL)
                for t in range(1, T):
                    chain_edge_marginals(L, b.alpha + (t - 1) * L, b.E[t], b.q + t * L, 1.0, &edge[t0 + t, 0])
                chain_node_marginals(T, L, b.alpha, b.beta)
                for t in range(T):
                    for i in range(L):
                        node[t0 + t, i] = b.alpha[t * L + i]
        buffers_free(b)
    if flags_np.any():
        raise MemoryError("cannot allocate chain buffers")
    return logz_np, node_np, edge_np


def viterbi(sent_ptr, state, trans, int n_threads=1):
    """(best labels [N], their scores [S]) of every chain."""
    tab = ChainTables(sent_ptr, state, trans)
    cdef int L = tab.n_labels
    cdef Py_ssize_t N = tab.state.shape[0], S = tab.sent_ptr.size - 1
    cdef const long[::1] sp = tab.sent_ptr
    cdef const double[:, ::1] st = tab.state
    cdef const double[:, ::1] tr = tab.trans.reshape(-1, L * L)
    cdef bint shared = tab.shared
    cdef int max_len = tab.max_len, nt = max(1, n_threads)
    out_np = np.zeros(N, dtype=np.int32)
    score_np = np.zeros(S)
    cdef int[::1] out = out_np
    cdef double[::1] score = score_np
    flags_np = np.zeros(max(1, n_threads), dtype=np.int32)
    cdef int[::1] flags = flags_np
    cdef Buffers* b
    cdef Py_ssize_t s, t0, t
    cdef int T
    if S == 0:
        return out_np, score_np
    with nogil, parallel(num_threads=nt):
        b = buffers_new(max_len, L)
        if b == NULL:
            flags[threadid()] = 1
        for s in prange(S, schedule="dynamic", chunksize=16):
            if b != NULL:
                t0 = sp[s]
                T = <int> (sp[s + 1] - t0)
                for t in range(1, T):
                    b.E[t] = &tr[0, 0] if shared else &tr[t0 + t, 0]
                chain_viterbi(T, L, &st[t0, 0], b.E, b.alpha, b.bp, &out[t0], &score[s])
        buffers_free(b)
    if flags_np.any():
        raise MemoryError("cannot allocate chain buffers")
    return out_np, score_np


def nbest(sent_ptr, state, trans, int k, int n_threads=1):
    """(paths [k, N], scores [S, k], counts [S]): the k best labelings of every chain
    (a chain with fewer than k labelings has counts < k; the other rows are -1)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    tab = ChainTables(sent_ptr, state, trans)
    cdef int L = tab.n_labels, K = k
    cdef Py_ssize_t N = tab.state.shape[0], S = tab.sent_ptr.size - 1
    cdef const long[::1] sp = tab.sent_ptr
    cdef const double[:, ::1] st = tab.state
    cdef const double[:, ::1] tr = tab.trans.reshape(-1, L * L)
    cdef bint shared = tab.shared
    cdef int max_len = tab.max_len, nt = max(1, n_threads)
    paths_np = np.full((k, N), -1, dtype=np.int32)
    scores_np = np.full((S, k), -np.inf)
    counts_np = np.zeros(S, dtype=np.int32)
    cdef int[:, ::1] paths = paths_np
    cdef double[:, ::1] scores = scores_np
    cdef int[::1] counts = counts_np
    flags_np = np.zeros(max(1, n_threads), dtype=np.int32)
    cdef int[::1] flags = flags_np
    cdef Py_ssize_t cells = <Py_ssize_t> max(1, tab.max_len) * L * K
    cdef Buffers* b
    cdef double* sc
    cdef int* py
    cdef int* pk
    cdef int* cnt
    cdef int* ptr
    cdef Py_ssize_t s, t0, t
    cdef int T
    if S == 0:
        return paths_np, scores_np, counts_np
    with nogil, parallel(num_threads=nt):
        b = buffers_new(max_len, L)
        sc = <double*> malloc(cells * sizeof(double))
        py = <int*> malloc(cells * sizeof(int))
        pk = <int*> malloc(cells * sizeof(int))
        cnt = <int*> malloc(<Py_ssize_t> max(1, max_len) * L * sizeof(int))
        ptr = <int*> malloc(L * sizeof(int))
        if b == NULL or sc == NULL or py == NULL or pk == NULL or cnt == NULL or ptr == NULL:
            flags[threadid()] = 1
        for s in prange(S, schedule="dynamic", chunksize=4):
            if flags[threadid()] == 0:
                t0 = sp[s]
                T = <int> (sp[s + 1] - t0)
                for t in range(1, T):
                    b.E[t] = &tr[0, 0] if shared else &tr[t0 + t, 0]
                counts[s] = chain_nbest(T, L, K, &st[t0, 0], b.E, sc, py, pk, cnt, ptr,
                                        &paths[0, t0], N, &scores[s, 0])
        buffers_free(b)
        free(sc)
        free(py)
        free(pk)
        free(cnt)
        free(ptr)
    if flags_np.any():
        raise MemoryError("cannot allocate chain buffers")
    return paths_np, scores_np, counts_np
