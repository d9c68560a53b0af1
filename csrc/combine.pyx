# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Combinations of chains that label the same tokens (crftk._combine): feature bagging.

Each member of a bag is a chain given by its tables (as in crftk._chain: sent_ptr,
log state potentials [N, L], log transitions [L, L] or [N, L, L]). ``conditionals``
runs forward-backward on a member and returns its node marginals p_i(y_t | x) and
its transition distributions p_i(y_t | y_{t-1}, x), which the combinations of
Sutton, Sindelar & McCallum (2006) mix:

- SEQ_MIXTURE: the per-sequence mixture's pairwise marginals sum_i l_i p_i(y_{t-1}, y_t | x)
  divided by its node marginals (their eq. 4: p_APPX's transitions);
- TRANS_MIXTURE: sum_i l_i p_i(y_t | y_{t-1}, x);
- TRANS_POE: prod_i p_i(y_t | y_{t-1}, x)^l_i, renormalized over y_t.

``combine`` writes each as a locally normalized chain (log state: the initial
distribution at first positions, 0 elsewhere; log transitions [N, L, L]) that
crftk._chain decodes and marginalizes. (The per-sequence product of experts is a
weighted sum of the members' own tables: no kernel needed.)
"""

import numpy as np
from cython.parallel cimport prange, parallel, threadid
from libc.math cimport exp, log, INFINITY

from chain cimport ChainBuffers, chain_pool_new, chain_pool_free, exp_shifted, chain_forward_backward, \
    chain_node_marginals

cdef enum:
    SEQ_MIX = 0
    TRANS_MIX = 1
    TRANS_PRODUCT = 2

SEQ_MIXTURE = SEQ_MIX
TRANS_MIXTURE = TRANS_MIX
TRANS_POE = TRANS_PRODUCT


def conditionals(sent_ptr, state, trans, int n_threads=1):
    """(log Z [S], node marginals [N, L], transition distributions [N, L, L]) of every chain.

    cond[n, i, j] = p(y_n = j | y_{n-1} = i, x); at a chain's first position every
    row is the node marginal p(y_n | x) (the initial distribution).
    """
    from crftk._chain import ChainTables
    sp_np = np.ascontiguousarray(sent_ptr, dtype=np.int64)
    st_np = np.ascontiguousarray(state, dtype=np.float64)
    tr_np = np.ascontiguousarray(trans, dtype=np.float64)
    tab = ChainTables(sp_np, st_np, tr_np)        # the shape checks of crftk._chain
    cdef int L = tab.n_labels, LL = L * L, nt = max(1, n_threads)
    cdef Py_ssize_t S = tab.n_chains, N = tab.n_tokens
    cdef bint shared = tab.shared
    logz_np = np.zeros(S)
    node_np = np.zeros((N, L))
    cond_np = np.zeros((N, L, L))
    cdef double[::1] logz = logz_np
    cdef double[:, ::1] node = node_np
    cdef double[:, ::1] cond = cond_np.reshape(N, LL)
    cdef const long[::1] sp = sp_np
    cdef const double[:, ::1] st = st_np
    cdef const double[:, ::1] tr = tr_np.reshape(-1, LL)
    cdef ChainBuffers* b = NULL
    cdef Py_ssize_t s, t0
    cdef int T, t, i, j
    cdef double z, v
    cdef double shift_shared = 0.0
    E_np = np.empty(LL)
    cdef double[::1] E_shared = E_np
    if shared:
        shift_shared = exp_shifted(&tr[0, 0], &E_shared[0], LL)
    if S == 0:
        return logz_np, node_np, cond_np
    cdef ChainBuffers* pool = chain_pool_new(nt, tab.max_len, L, 1, not shared, 0)
    try:
        with nogil, parallel(num_threads=nt):
            b = &pool[threadid()]
            for s in prange(S, schedule="dynamic", chunksize=8):
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
                # p(j | i) is proportional to E[t][i, j] * q[t, j] (q: exp-state * beta / scale)
                for t in range(1, T):
                    for i in range(L):
                        z = 0.0
                        for j in range(L):
                            v = b.E[t][i * L + j] * b.q[t * L + j]
                            cond[t0 + t, i * L + j] = v
                            z = z + v
                        if z > 0.0:
                            for j in range(L):
                                cond[t0 + t, i * L + j] = cond[t0 + t, i * L + j] / z
                chain_node_marginals(T, L, b.alpha, b.beta)
                for t in range(T):
                    for j in range(L):
                        node[t0 + t, j] = b.alpha[t * L + j]
                for i in range(L):
                    for j in range(L):
                        cond[t0, i * L + j] = b.alpha[j]
    finally:
        chain_pool_free(pool, nt)
    return logz_np, node_np, cond_np


cdef inline double _log(double x) noexcept nogil:
    return log(x) if x > 0.0 else -INFINITY


cdef void _mixture_row(int method, int M, int L, Py_ssize_t n, int i, const double[:, :, ::1] node,
                       const double[:, :, ::1] cond, const double* lam, bint first, double* out) noexcept nogil:
    """out[j] = log of the combined p(y_n = j | y_{n-1} = i) (first: of p(y_n = j)) for the mixtures."""
    cdef int m, j
    cdef double c, z = 0.0
    for j in range(L):
        out[j] = 0.0
    if method == SEQ_MIX and not first:
        # mixed pairwise marginals over the mixed node marginal of the previous label
        for m in range(M):
            z = z + lam[m] * node[m, n - 1, i]
        for m in range(M):
            c = lam[m] * node[m, n - 1, i] / z if z > 0.0 else lam[m]
            for j in range(L):
                out[j] = out[j] + c * cond[m, n, i * L + j]
    else:
        for m in range(M):
            for j in range(L):
                out[j] = out[j] + lam[m] * cond[m, n, i * L + j]
    for j in range(L):
        out[j] = _log(out[j])


cdef void _product_row(int M, int L, Py_ssize_t n, int i, const double[:, :, ::1] cond, const double* lam,
                       double* out) noexcept nogil:
    """out[j] = log of prod_m cond_m[n, i, j]^lam_m renormalized over j."""
    cdef int m, j
    cdef double top = -INFINITY, z = 0.0, c
    for j in range(L):
        out[j] = 0.0
        for m in range(M):
            if lam[m] > 0.0:
                out[j] = out[j] + lam[m] * _log(cond[m, n, i * L + j])
        if out[j] > top:
            top = out[j]
    if top == -INFINITY:
        return          # every label is impossible after i for some member: the row stays -inf
    for j in range(L):
        z = z + exp(out[j] - top)
    c = top + log(z)
    for j in range(L):
        out[j] = out[j] - c


def combine(sent_ptr, node, cond, weights, int method, int n_threads=1):
    """(log state [N, L], log transitions [N, L, L]): the locally normalized chain of a mixture
    or transition product (method SEQ_MIXTURE, TRANS_MIXTURE, TRANS_POE) of M members given
    by node [M, N, L] and cond [M, N, L, L] (as ``conditionals`` returns them) with weights [M]."""
    sp_np = np.ascontiguousarray(sent_ptr, dtype=np.int64)
    node_np = np.ascontiguousarray(node, dtype=np.float64)
    cond_np = np.ascontiguousarray(cond, dtype=np.float64)
    lam_np = np.ascontiguousarray(weights, dtype=np.float64)
    if node_np.ndim != 3 or cond_np.ndim != 4 or cond_np.shape[:3] != node_np.shape \
            or cond_np.shape[3] != node_np.shape[2]:
        raise ValueError("node must be [M, N, L] and cond [M, N, L, L]")
    if lam_np.shape != (node_np.shape[0],):
        raise ValueError("one weight per member")
    if method not in (SEQ_MIXTURE, TRANS_MIXTURE, TRANS_POE):
        raise ValueError(f"unknown method {method}")
    cdef int M = node_np.shape[0], L = node_np.shape[2], LL = L * L, nt = max(1, n_threads)
    cdef Py_ssize_t N = node_np.shape[1]
    if sp_np.ndim != 1 or sp_np.size < 1 or sp_np[0] != 0 or sp_np[sp_np.size - 1] != N or (np.diff(sp_np) < 1).any():
        raise ValueError("sent_ptr must rise from 0 to N in steps of at least 1")
    first_np = np.zeros(N, dtype=np.uint8)
    first_np[sp_np[:sp_np.size - 1]] = 1
    state_np = np.zeros((N, L))
    trans_np = np.zeros((N, L, L))
    cdef const unsigned char[::1] first = first_np
    cdef const double[:, :, ::1] nd = node_np
    cdef const double[:, :, ::1] cd = cond_np.reshape(M, N, LL)
    cdef const double[::1] lam = lam_np
    cdef double[:, ::1] st = state_np
    cdef double[:, ::1] tr = trans_np.reshape(N, LL)
    cdef Py_ssize_t n
    cdef int i
    if N == 0:
        return state_np, trans_np
    with nogil:
        for n in prange(N, num_threads=nt, schedule="static"):
            if first[n]:
                # the initial distribution (every row of cond holds it), in the state table
                if method == TRANS_PRODUCT:
                    _product_row(M, L, n, 0, cd, &lam[0], &st[n, 0])
                else:
                    _mixture_row(method, M, L, n, 0, nd, cd, &lam[0], True, &st[n, 0])
            else:
                for i in range(L):
                    if method == TRANS_PRODUCT:
                        _product_row(M, L, n, i, cd, &lam[0], &tr[n, i * L])
                    else:
                        _mixture_row(method, M, L, n, i, nd, cd, &lam[0], False, &tr[n, i * L])
    return state_np, trans_np
