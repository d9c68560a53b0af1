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

from chain cimport (ChainBuffers, chain_pool_new, chain_pool_free, exp_shifted, chain_forward_backward, chain_edge_marginals,
                    chain_node_marginals, chain_viterbi, chain_nbest)


cdef class ChainTables:
    """A batch of chains: sent_ptr, state [N, L], trans [L, L] or [N, L, L] (checked, contiguous)."""

    cdef readonly object sent_ptr, state, trans
    cdef readonly int n_labels, max_len
    cdef readonly Py_ssize_t n_tokens, n_chains
    cdef readonly bint shared
    cdef const long[::1] sp
    cdef const double[:, ::1] st
    cdef const double[:, ::1] tr     # [1 or N, L*L]

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
        self.n_tokens = N
        self.n_chains = sp.size - 1
        self.max_len = int(np.diff(sp).max()) if sp.size > 1 else 0
        self.sp = self.sent_ptr
        self.st = self.state
        self.tr = self.trans.reshape(-1, L * L)

    cdef int log_tables(self, Py_ssize_t s, ChainBuffers* b) noexcept nogil:
        """Points b.E at the log transition matrices of chain s; returns its length."""
        cdef Py_ssize_t t0 = self.sp[s]
        cdef int t, T = <int> (self.sp[s + 1] - t0)
        for t in range(1, T):
            b.E[t] = &self.tr[0, 0] if self.shared else &self.tr[t0 + t, 0]
        return T

    cdef int exp_tables(self, Py_ssize_t s, const double* E_shared, double shift_shared,
                        ChainBuffers* b) noexcept nogil:
        """Points b.E at the exponentiated transition matrices of chain s (E_shared, or its own
        built in b.ebuf), their log shifts in b.shift; returns its length."""
        cdef Py_ssize_t t0 = self.sp[s]
        cdef int t, T = <int> (self.sp[s + 1] - t0), LL = self.n_labels * self.n_labels
        for t in range(1, T):
            if self.shared:
                b.E[t] = E_shared
                b.shift[t] = shift_shared
            else:
                b.shift[t] = exp_shifted(&self.tr[t0 + t, 0], b.ebuf + t * LL, LL)
                b.E[t] = b.ebuf + t * LL
        return T


def forward_backward(sent_ptr, state, trans, int n_threads=1):
    """(log Z [S], node marginals [N, L], edge marginals [N, L, L]) of every chain.

    Row n of the edge marginals is p(y_{n-1} = i, y_n = j); rows of first positions are 0.
    """
    cdef ChainTables tab = ChainTables(sent_ptr, state, trans)
    cdef int L = tab.n_labels, LL = L * L, nt = max(1, n_threads)
    logz_np = np.zeros(tab.n_chains)
    node_np = np.zeros((tab.n_tokens, L))
    edge_np = np.zeros((tab.n_tokens, L, L))
    cdef double[::1] logz = logz_np
    cdef double[:, ::1] node = node_np
    cdef double[:, ::1] edge = edge_np.reshape(tab.n_tokens, LL)
    cdef ChainBuffers* b = NULL
    cdef Py_ssize_t s, t0
    cdef int T, t, i
    cdef double shift_shared = 0.0
    E_np = np.empty(LL)
    cdef double[::1] E_shared = E_np
    if tab.shared:
        shift_shared = exp_shifted(&tab.tr[0, 0], &E_shared[0], LL)
    if tab.n_chains == 0:
        return logz_np, node_np, edge_np
    cdef ChainBuffers* pool = chain_pool_new(nt, tab.max_len, L, 1, not tab.shared, 0)
    try:
        with nogil, parallel(num_threads=nt):
            b = &pool[threadid()]
            for s in prange(tab.n_chains, schedule="dynamic", chunksize=8):
                t0 = tab.sp[s]
                T = tab.exp_tables(s, &E_shared[0], shift_shared, b)
                logz[s] = chain_forward_backward(T, L, &tab.st[t0, 0], b.E, b.shift, b.q, b.alpha, b.beta,
                                                 b.scale, NULL, NULL)
                for t in range(1, T):
                    chain_edge_marginals(L, b.alpha + (t - 1) * L, b.E[t], b.q + t * L, 1.0, &edge[t0 + t, 0])
                chain_node_marginals(T, L, b.alpha, b.beta)
                for t in range(T):
                    for i in range(L):
                        node[t0 + t, i] = b.alpha[t * L + i]
    finally:
        chain_pool_free(pool, nt)
    return logz_np, node_np, edge_np


def viterbi(sent_ptr, state, trans, int n_threads=1):
    """(best labels [N], their scores [S]) of every chain."""
    cdef ChainTables tab = ChainTables(sent_ptr, state, trans)
    cdef int L = tab.n_labels, nt = max(1, n_threads)
    out_np = np.zeros(tab.n_tokens, dtype=np.int32)
    score_np = np.zeros(tab.n_chains)
    cdef int[::1] out = out_np
    cdef double[::1] score = score_np
    cdef ChainBuffers* b = NULL
    cdef Py_ssize_t s, t0
    cdef int T
    if tab.n_chains == 0:
        return out_np, score_np
    cdef ChainBuffers* pool = chain_pool_new(nt, tab.max_len, L, 1, False, 0)
    try:
        with nogil, parallel(num_threads=nt):
            b = &pool[threadid()]
            for s in prange(tab.n_chains, schedule="dynamic", chunksize=16):
                t0 = tab.sp[s]
                T = tab.log_tables(s, b)
                chain_viterbi(T, L, &tab.st[t0, 0], b.E, b.alpha, b.bp, &out[t0], &score[s])
    finally:
        chain_pool_free(pool, nt)
    return out_np, score_np


def nbest(sent_ptr, state, trans, int k, int n_threads=1):
    """(paths [k, N], scores [S, k], counts [S]): the k best labelings of every chain
    (a chain with fewer than k labelings has counts < k; the other rows are -1)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    cdef ChainTables tab = ChainTables(sent_ptr, state, trans)
    cdef int L = tab.n_labels, K = k, nt = max(1, n_threads)
    paths_np = np.full((k, tab.n_tokens), -1, dtype=np.int32)
    scores_np = np.full((tab.n_chains, k), -np.inf)
    counts_np = np.zeros(tab.n_chains, dtype=np.int32)
    cdef int[:, ::1] paths = paths_np
    cdef double[:, ::1] scores = scores_np
    cdef int[::1] counts = counts_np
    cdef ChainBuffers* b = NULL
    cdef Py_ssize_t s, t0
    cdef int T
    if tab.n_chains == 0:
        return paths_np, scores_np, counts_np
    cdef ChainBuffers* pool = chain_pool_new(nt, tab.max_len, L, 1, False, K)
    try:
        with nogil, parallel(num_threads=nt):
            b = &pool[threadid()]
            for s in prange(tab.n_chains, schedule="dynamic", chunksize=4):
                if threadid() >= 0:     # always true: see Lattices.nbest
                    t0 = tab.sp[s]
                    T = tab.log_tables(s, b)
                    counts[s] = chain_nbest(T, L, K, &tab.st[t0, 0], b.E, b.sc, b.py, b.pk, b.cnt, b.ptr,
                                            &paths[0, t0], tab.n_tokens, &scores[s, 0])
    finally:
        chain_pool_free(pool, nt)
    return paths_np, scores_np, counts_np
