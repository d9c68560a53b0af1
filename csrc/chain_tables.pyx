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

from chain cimport (ChainBuffers, ChainTask, run_chains, exp_shifted, chain_forward_backward,
                    chain_edge_marginals, chain_node_marginals, chain_viterbi, chain_nbest)


cdef struct Batch:
    # a checked batch of chains as C pointers, and what each kernel writes
    const long* sp
    const double* st          # [N, L]
    const double* tr          # [1 or N, L*L]
    bint shared
    int L
    Py_ssize_t N
    const double* E_shared    # exp(tr - shift_shared) when shared
    double shift_shared
    double* logz              # [S]
    double* node              # [N, L]
    double* edge              # [N, L*L]
    int* labels               # [N]
    double* score             # [S] (n-best: [S, K])
    int* paths                # [K, N]
    int* counts               # [S]
    int K


cdef class ChainTables:
    """A batch of chains: sent_ptr, state [N, L], trans [L, L] or [N, L, L] (checked, contiguous)."""

    cdef readonly object sent_ptr, state, trans
    cdef readonly int n_labels, max_len
    cdef readonly Py_ssize_t n_tokens, n_chains
    cdef readonly bint shared
    cdef Batch batch

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
        cdef const long[::1] spv = self.sent_ptr
        cdef const double[::1] stv = self.state.reshape(-1)
        cdef const double[::1] trv = self.trans.reshape(-1)
        self.batch.sp = &spv[0]
        self.batch.st = &stv[0] if stv.shape[0] else NULL
        self.batch.tr = &trv[0] if trv.shape[0] else NULL
        self.batch.shared = self.shared
        self.batch.L = L
        self.batch.N = N

    cdef int run(self, ChainTask task, int n_threads, int chunk, bint own_matrices, int K) except -1:
        return run_chains(self.n_chains, max(1, n_threads), chunk, self.max_len, self.n_labels, 1,
                          own_matrices, K, task, &self.batch)


cdef inline int log_tables(const Batch* j, Py_ssize_t s, ChainBuffers* b) noexcept nogil:
    """Points b.E at the log transition matrices of chain s; returns its length."""
    cdef Py_ssize_t t0 = j.sp[s]
    cdef int t, T = <int> (j.sp[s + 1] - t0), LL = j.L * j.L
    for t in range(1, T):
        b.E[t] = j.tr if j.shared else j.tr + (t0 + t) * LL
    return T


cdef inline int exp_tables(const Batch* j, Py_ssize_t s, ChainBuffers* b) noexcept nogil:
    """Points b.E at the exponentiated transition matrices of chain s (the shared one, or its
    own built in b.ebuf), their log shifts in b.shift; returns its length."""
    cdef Py_ssize_t t0 = j.sp[s]
    cdef int t, T = <int> (j.sp[s + 1] - t0), LL = j.L * j.L
    for t in range(1, T):
        if j.shared:
            b.E[t] = j.E_shared
            b.shift[t] = j.shift_shared
        else:
            b.shift[t] = exp_shifted(j.tr + (t0 + t) * LL, b.ebuf + t * LL, LL)
            b.E[t] = b.ebuf + t * LL
    return T


cdef void marginals_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Batch* j = <const Batch*> job
    cdef int L = j.L, t, i
    cdef Py_ssize_t t0 = j.sp[s]
    cdef int T = exp_tables(j, s, b)
    j.logz[s] = chain_forward_backward(T, L, j.st + t0 * L, b.E, b.shift, b.q, b.alpha, b.beta,
                                       b.scale, NULL, NULL)
    for t in range(1, T):
        chain_edge_marginals(L, b.alpha + (t - 1) * L, b.E[t], b.q + t * L, 1.0, j.edge + (t0 + t) * L * L)
    chain_node_marginals(T, L, b.alpha, b.beta)
    for i in range(T * L):
        j.node[t0 * L + i] = b.alpha[i]


cdef void viterbi_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Batch* j = <const Batch*> job
    cdef Py_ssize_t t0 = j.sp[s]
    cdef int T = log_tables(j, s, b)
    chain_viterbi(T, j.L, j.st + t0 * j.L, b.E, b.alpha, b.bp, j.labels + t0, j.score + s)


cdef void nbest_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Batch* j = <const Batch*> job
    cdef Py_ssize_t t0 = j.sp[s]
    cdef int T = log_tables(j, s, b)
    if tid >= 0:        # always true: see nbest_task in lattice.pyx
        j.counts[s] = chain_nbest(T, j.L, j.K, j.st + t0 * j.L, b.E, b.sc, b.py, b.pk, b.cnt, b.ptr,
                                  j.paths + t0, j.N, j.score + s * j.K)


def forward_backward(sent_ptr, state, trans, int n_threads=1):
    """(log Z [S], node marginals [N, L], edge marginals [N, L, L]) of every chain.

    Row n of the edge marginals is p(y_{n-1} = i, y_n = j); rows of first positions are 0.
    """
    cdef ChainTables tab = ChainTables(sent_ptr, state, trans)
    cdef int L = tab.n_labels
    logz_np = np.zeros(tab.n_chains)
    node_np = np.zeros((tab.n_tokens, L))
    edge_np = np.zeros((tab.n_tokens, L, L))
    cdef double[::1] logz = logz_np
    cdef double[::1] node = node_np.reshape(-1)
    cdef double[::1] edge = edge_np.reshape(-1)
    cdef double[::1] E_shared = np.empty(L * L)
    if tab.shared:
        tab.batch.shift_shared = exp_shifted(tab.batch.tr, &E_shared[0], L * L)
    tab.batch.E_shared = &E_shared[0]
    if tab.n_chains:
        tab.batch.logz = &logz[0]
        tab.batch.node = &node[0]
        tab.batch.edge = &edge[0]
    tab.run(marginals_task, n_threads, 8, not tab.shared, 0)
    return logz_np, node_np, edge_np


def viterbi(sent_ptr, state, trans, int n_threads=1):
    """(best labels [N], their scores [S]) of every chain."""
    cdef ChainTables tab = ChainTables(sent_ptr, state, trans)
    out_np = np.zeros(tab.n_tokens, dtype=np.int32)
    score_np = np.zeros(tab.n_chains)
    cdef int[::1] out = out_np
    cdef double[::1] score = score_np
    if tab.n_chains:
        tab.batch.labels = &out[0]
        tab.batch.score = &score[0]
    tab.run(viterbi_task, n_threads, 16, False, 0)
    return out_np, score_np


def nbest(sent_ptr, state, trans, int k, int n_threads=1):
    """(paths [k, N], scores [S, k], counts [S]): the k best labelings of every chain
    (a chain with fewer than k labelings has counts < k; the other rows are -1)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    cdef ChainTables tab = ChainTables(sent_ptr, state, trans)
    paths_np = np.full((k, tab.n_tokens), -1, dtype=np.int32)
    scores_np = np.full((tab.n_chains, k), -np.inf)
    counts_np = np.zeros(tab.n_chains, dtype=np.int32)
    cdef int[::1] paths = paths_np.reshape(-1)
    cdef double[::1] scores = scores_np.reshape(-1)
    cdef int[::1] counts = counts_np
    if tab.n_chains:
        tab.batch.paths = &paths[0]
        tab.batch.score = &scores[0]
        tab.batch.counts = &counts[0]
        tab.batch.K = k
    tab.run(nbest_task, n_threads, 4, False, k)
    return paths_np, scores_np, counts_np
