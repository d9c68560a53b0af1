# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Inference on a linear chain, given its potential tables (no features, no weights).

A chain of T positions and L labels is given by

- ``s[t*L + y]``: the log state potential of label y at position t;
- ``Tr[t]`` (t >= 1): the log transition matrix into position t, ``Tr[t][i*L + j]``
  for label i at t-1 followed by j at t (positions may share one matrix);

or, for the sum-product kernels, by the exponentiated transition matrices
``E[t] = exp(Tr[t] - shift[t])`` with their log shifts, so that a matrix shared by
every position is exponentiated once per corpus, not once per position.

Forward-backward works on exponentiated potentials with per-position scaling (no
overflow on long sentences, no logsumexp in the inner loop); Viterbi and n-best
work in log space. Everything here is nogil and allocation-free: callers own the
buffers (one set per thread).

Structures built on chains cimport this header: the linear-chain CRF (crftk._lattice)
and, with tables that carry messages, the exact passes of tree-based
reparameterization.
"""

from libc.math cimport exp, log, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memset, memcpy

from sentences cimport Workspaces, workspaces_new, workspaces_free, run_sentences
from vecmath cimport exp_array, vec_mat_rect, outer_acc


cdef struct ChainBuffers:
    # one thread's workspace for chains of up to max_T positions, n states (labels, or joint
    # labels of a product of chains) and F transition factors per position (1 for a chain)
    double* s          # T*n log state potentials, for callers that build them (crftk._lattice)
    double* q          # T*n exp state potentials, then exp-state * beta / scale
    double* alpha      # T*n scaled forward, then node marginals (Viterbi: the delta scores)
    double* beta       # T*n scaled backward
    double* scale      # T
    double* shift      # T*F log shifts of the exp transition matrices
    double* tmp        # 2*n scratch
    double* ebuf       # T*n*n matrices of positions that have their own (NULL unless asked for)
    double* mat        # n*n scratch for building one such matrix (NULL unless asked for)
    const double** E   # T*F pointers to the transition matrices into each position
    int* bp            # T*F*n Viterbi back-pointers
    # chain_nbest's lists for K best labelings (NULL unless asked for): see there
    double* sc         # T*n*K
    int* py            # T*n*K
    int* pk            # T*n*K
    int* cnt           # T*n
    int* ptr           # n


cdef inline int chain_buffers_init(ChainBuffers* b, int max_T, int n, int F, bint own_matrices,
                                   int K) noexcept nogil:
    """Allocates the arrays of a zeroed workspace (own_matrices: with ebuf and mat; K > 0: with
    the lists of the K best labelings); 0, or -1 (nothing left allocated) when out of memory."""
    if max_T < 1:
        max_T = 1
    cdef Py_ssize_t cells = <Py_ssize_t> max_T * n
    cdef bint failed
    b.s = <double*> malloc(cells * sizeof(double))
    b.q = <double*> malloc(cells * sizeof(double))
    b.alpha = <double*> malloc(cells * sizeof(double))
    b.beta = <double*> malloc(cells * sizeof(double))
    b.scale = <double*> malloc(max_T * sizeof(double))
    b.shift = <double*> malloc(max_T * F * sizeof(double))
    b.tmp = <double*> malloc(2 * n * sizeof(double))
    b.E = <const double**> malloc(max_T * F * sizeof(double*))
    b.bp = <int*> malloc(cells * F * sizeof(int))
    failed = (b.s == NULL or b.q == NULL or b.alpha == NULL or b.beta == NULL or b.scale == NULL or b.shift == NULL
              or b.tmp == NULL or b.E == NULL or b.bp == NULL)
    if own_matrices:
        b.ebuf = <double*> malloc(cells * n * sizeof(double))
        b.mat = <double*> malloc(<Py_ssize_t> n * n * sizeof(double))
        failed = failed or b.ebuf == NULL or b.mat == NULL
    if K > 0:
        b.sc = <double*> malloc(cells * K * sizeof(double))
        b.py = <int*> malloc(cells * K * sizeof(int))
        b.pk = <int*> malloc(cells * K * sizeof(int))
        b.cnt = <int*> malloc(cells * sizeof(int))
        b.ptr = <int*> malloc(n * sizeof(int))
        failed = failed or b.sc == NULL or b.py == NULL or b.pk == NULL or b.cnt == NULL or b.ptr == NULL
    if failed:
        chain_buffers_release(b)
        return -1
    return 0


cdef inline void chain_buffers_release(ChainBuffers* b) noexcept nogil:
    """Frees the arrays of a workspace (not the struct)."""
    free(b.s)
    free(b.q)
    free(b.alpha)
    free(b.beta)
    free(b.scale)
    free(b.shift)
    free(b.tmp)
    free(b.ebuf)
    free(b.mat)
    free(b.E)
    free(b.bp)
    free(b.sc)
    free(b.py)
    free(b.pk)
    free(b.cnt)
    free(b.ptr)
    memset(b, 0, sizeof(ChainBuffers))


cdef struct ChainSizes:
    # what chain_buffers_init takes: a workspace's sizes
    int max_T, n, F, K
    bint own_matrices


cdef inline int chain_work_init(void* spec, void* work, int i) noexcept nogil:
    cdef const ChainSizes* z = <const ChainSizes*> spec
    return chain_buffers_init(<ChainBuffers*> work, z.max_T, z.n, z.F, z.own_matrices, z.K)


cdef inline void chain_work_release(void* spec, void* work) noexcept nogil:
    chain_buffers_release(<ChainBuffers*> work)


cdef inline Workspaces chain_workspaces(ChainSizes* sizes) noexcept nogil:
    """ChainBuffers as the workspaces of sentences.pxd (sizes: NULL to free only)."""
    return Workspaces(size=sizeof(ChainBuffers), init=chain_work_init, release=chain_work_release, spec=sizes)


cdef inline ChainBuffers* chain_pool_new(int n_threads, int max_T, int n, int F, bint own_matrices,
                                         int K) except NULL:
    """One workspace per thread (see chain_buffers_init), made before a parallel block so that
    running out of memory raises MemoryError here; thread i uses pool[i]. Free with
    chain_pool_free."""
    cdef ChainSizes sizes = ChainSizes(max_T=max_T, n=n, F=F, K=K, own_matrices=own_matrices)
    cdef Workspaces ws = chain_workspaces(&sizes)
    return <ChainBuffers*> workspaces_new(&ws, n_threads, "cannot allocate chain buffers")


cdef inline void chain_pool_free(ChainBuffers* pool, int n_threads) noexcept nogil:
    """Frees the first n_threads workspaces of a pool and the pool."""
    cdef Workspaces ws = chain_workspaces(NULL)
    workspaces_free(&ws, <char*> pool, n_threads)


# One sentence's work in a parallel kernel on chains: job is the kernel's own struct of inputs
# and outputs, s the sentence, b the thread's workspace, tid the thread (for per-thread sums).
ctypedef void (*ChainTask)(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil


cdef struct ChainJob:
    ChainTask task
    void* job


cdef inline void chain_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    cdef const ChainJob* cj = <const ChainJob*> job
    cj.task(cj.job, s, <ChainBuffers*> work, tid)


cdef inline int run_chains(Py_ssize_t n, int n_threads, int chunk, int max_T, int states, int F,
                           bint own_matrices, int K, ChainTask task, void* job) except -1:
    """task(job, s, ...) for every s < n through sentences.pxd's run_sentences (dynamic
    schedule, chunks of chunk sentences), each thread with a workspace of chain_pool_new(max_T,
    states, F, own_matrices, K)."""
    cdef ChainSizes sizes = ChainSizes(max_T=max_T, n=states, F=F, K=K, own_matrices=own_matrices)
    cdef Workspaces ws = chain_workspaces(&sizes)
    cdef ChainJob cj = ChainJob(task=task, job=job)
    return run_sentences(n, n_threads, chunk, &ws, "cannot allocate chain buffers", chain_task, &cj)


cdef inline void vec_mat(const double* x, const double* M, int n, double* y) noexcept nogil:
    """y[j] = sum_i x[i] M[i*n + j]: a forward step through an n x n matrix (summed over i in
    order, starting from 0.0). vecmath.h's register-blocked product: the same sums in the same
    order as the plain loop (y[j] = 0, then y[j] += x[i] M[i, j] for each i), without storing
    and reloading y for every row."""
    vec_mat_rect(x, M, n, n, y)


cdef inline void mat_vec(const double* M, const double* x, int n, double* y) noexcept nogil:
    """y[i] = sum_j M[i*n + j] x[j]: a backward step through an n x n matrix.

    Each y[i] is one chain of dependent adds (summed over j in order; GCC does not reorder a
    floating-point sum), so four rows go side by side: four independent chains hide the add
    latency, about 1.5x faster at n = 23 with the same bits. mat_vec_transposed is faster."""
    cdef int i = 0, j
    cdef double acc, a0, a1, a2, a3, xj
    cdef const double* r0
    cdef const double* r1
    cdef const double* r2
    cdef const double* r3
    while i + 4 <= n:
        r0 = M + <Py_ssize_t> i * n
        r1 = r0 + n
        r2 = r1 + n
        r3 = r2 + n
        a0 = a1 = a2 = a3 = 0.0
        for j in range(n):
            xj = x[j]
            a0 += r0[j] * xj
            a1 += r1[j] * xj
            a2 += r2[j] * xj
            a3 += r3[j] * xj
        y[i] = a0
        y[i + 1] = a1
        y[i + 2] = a2
        y[i + 3] = a3
        i += 4
    while i < n:
        acc = 0.0
        for j in range(n):
            acc += M[i * n + j] * x[j]
        y[i] = acc
        i += 1


cdef inline void transpose(const double* M, int n, double* out) noexcept nogil:
    """out[j*n + i] = M[i*n + j]: the matrix that mat_vec_transposed reads."""
    cdef int i, j
    for i in range(n):
        for j in range(n):
            out[j * n + i] = M[i * n + j]


cdef inline void mat_vec_transposed(const double* MT, const double* x, int n, double* y) noexcept nogil:
    """mat_vec(M, x, n, y) given MT, M's transpose: y[i] = sum_j x[j] MT[j*n + i] is the same
    sum in the same order (products commute exactly), as the vector-matrix product of
    vecmath.h, which runs it four columns to a register (about 3x faster than mat_vec at
    n = 23). The same bits as mat_vec."""
    vec_mat_rect(x, MT, n, n, y)


cdef inline int argmax(const double* x, int n, double* best) noexcept nogil:
    """The first index of the largest of x[0:n]; that value into best[0]."""
    cdef int i, k = 0
    cdef double m = x[0]
    for i in range(1, n):
        if x[i] > m:
            m = x[i]
            k = i
    best[0] = m
    return k


cdef inline double array_max(const double* x, int n) noexcept nogil:
    """The largest of x[0:n] (n >= 1)."""
    cdef int i
    cdef double m = x[0]
    for i in range(1, n):
        if x[i] > m:
            m = x[i]
    return m


cdef inline double exp_shifted(const double* src, double* dst, int n) noexcept nogil:
    """dst = exp(src - max(src)); returns the max."""
    cdef int i
    cdef double m = array_max(src, n)
    for i in range(n):
        dst[i] = exp(src[i] - m)
    return m


cdef inline double exp_shifted_fast(const double* src, double* dst, int n) noexcept nogil:
    """exp_shifted through exp_array (within 3 ulps, 0 below -708 nats): dst = exp(src -
    max(src)); returns the max."""
    cdef int i
    cdef double m = array_max(src, n)
    for i in range(n):
        dst[i] = src[i] - m
    exp_array(dst, dst, n)
    return m


cdef inline double scaled_start(const double* s, double* alpha, double* scale, int n) noexcept nogil:
    """The first step of a scaled forward pass: alpha = exp(s) / its sum, the sum (of
    exp(s - max s)) into scale[0]; returns log(sum exp(s))."""
    cdef int k
    cdef double m = exp_shifted(s, alpha, n)
    cdef double z = 0.0
    for k in range(n):
        z += alpha[k]
    for k in range(n):
        alpha[k] /= z
    scale[0] = z
    return m + log(z)


cdef inline double scaled_step(const double* x, const double* q, double* alpha, double* scale,
                               int n) noexcept nogil:
    """A step of a scaled forward pass: alpha = x * q / its sum (x may be alpha), the sum into
    scale[0]; returns its log."""
    cdef int k
    cdef double z = 0.0, inv
    for k in range(n):
        alpha[k] = x[k] * q[k]
        z += alpha[k]
    inv = 1.0 / z
    for k in range(n):
        alpha[k] *= inv
    scale[0] = z
    return log(z)


cdef inline void scaled_backward_start(double* beta, int T, int n) noexcept nogil:
    """The first step of a scaled backward pass: beta at the last position is 1."""
    cdef int k
    beta += (T - 1) * n
    for k in range(n):
        beta[k] = 1.0


cdef inline void backward_weights(double* q, const double* beta, double scale, int n) noexcept nogil:
    """q = q * beta / scale: what a backward step sends through the transitions."""
    cdef int k
    cdef double inv = 1.0 / scale
    for k in range(n):
        q[k] = q[k] * beta[k] * inv


cdef inline double chain_forward_backward(int T, int L, const double* s, const double** E,
                                          const double* shift, double* q, double* alpha,
                                          double* beta, double* scale, double* tacc,
                                          const double* E_shared) noexcept nogil:
    """Scaled forward-backward over one chain; returns log Z (see chain_sum_product)."""
    return chain_sum_product(T, L, s, E, shift, q, alpha, beta, scale, tacc, E_shared, NULL, NULL)


cdef inline double chain_sum_product(int T, int L, const double* s, const double** E,
                                     const double* shift, double* q, double* alpha,
                                     double* beta, double* scale, double* tacc,
                                     const double* E_shared, double* kept_q,
                                     double* kept_max) noexcept nogil:
    """Scaled forward-backward over one chain; returns log Z (chain_sum_product_shared without
    the shared matrix's transpose)."""
    return chain_sum_product_shared(T, L, s, E, shift, q, alpha, beta, scale, tacc, E_shared, NULL,
                                    kept_q, kept_max)


cdef inline double chain_sum_product_shared(int T, int L, const double* s, const double** E,
                                            const double* shift, double* q, double* alpha,
                                            double* beta, double* scale, double* tacc,
                                            const double* E_shared, const double* ET_shared,
                                            double* kept_q, double* kept_max) noexcept nogil:
    """Scaled forward-backward over one chain; returns log Z.

    Afterwards ``alpha[t]*beta[t]`` are the node marginals (see chain_node_marginals)
    and ``alpha[t-1,i]*E[t][i,j]*q[t,j]`` the edge marginals (chain_edge_marginals):
    the backward sweep leaves ``q[t] = exp-state(t) * beta[t] / scale[t]``. When
    ``tacc`` is given, ``alpha[t-1,i]*q[t,j]`` is added to it for every position whose
    matrix is ``E_shared`` (times that matrix once at the end, these are the expected
    counts of the shared transitions), by vecmath.h's outer_acc after the backward sweep.
    With kept_q [T*L] and kept_max [T], the exp-states exp(s[t] - kept_max[t]) are kept there
    (the backward sweep overwrites q): chain_restricted_forward_backward reuses them.
    ET_shared (or NULL): the transpose of E_shared (see transpose), which makes the backward
    steps through it mat_vec_transposed's: the same bits, faster.
    """
    cdef int t, j
    cdef double logz, m
    cdef double* at
    cdef const double* ap
    cdef const double* Et
    cdef double* qt
    cdef double* bt

    # forward
    logz = scaled_start(s, alpha, scale, L)
    if kept_q != NULL:
        kept_max[0] = logz - log(scale[0])
        for j in range(L):
            kept_q[j] = alpha[j] * scale[0]
    for t in range(1, T):
        logz += shift[t]
        m = exp_shifted(s + t * L, q + t * L, L)
        logz += m
        if kept_q != NULL:
            kept_max[t] = m
            memcpy(kept_q + t * L, q + t * L, L * sizeof(double))
        at = alpha + t * L
        ap = alpha + (t - 1) * L
        vec_mat(ap, E[t], L, at)
        logz += scaled_step(at, q + t * L, at, scale + t, L)

    # backward
    scaled_backward_start(beta, T, L)
    for t in range(T - 1, 0, -1):
        qt = q + t * L
        backward_weights(qt, beta + t * L, scale[t], L)
        Et = E[t]
        bt = beta + (t - 1) * L
        if ET_shared != NULL and Et == E_shared:
            mat_vec_transposed(ET_shared, qt, L, bt)
        else:
            mat_vec(Et, qt, L, bt)
    if tacc != NULL:
        # after the sweep (which leaves q[t] as the step at t used it), each entry summed over the
        # positions in the sweep's order in a register
        outer_acc(alpha, q, T, L, E, E_shared, tacc)
    return logz


cdef inline void chain_edge_marginals(int L, const double* alpha_prev, const double* Et,
                                      const double* qt, double factor, double* out) noexcept nogil:
    """out[i*L+j] = factor * p(y_{t-1}=i, y_t=j), after chain_forward_backward (alpha_prev:
    alpha[t-1], still the forward scores: call before chain_node_marginals)."""
    cdef int i, j
    cdef double ai
    for i in range(L):
        ai = alpha_prev[i]
        for j in range(L):
            out[i * L + j] = factor * ai * Et[i * L + j] * qt[j]


cdef inline void chain_node_marginals(int T, int L, double* alpha, const double* beta) noexcept nogil:
    """Turns alpha into the node marginals p(y_t = j), in place (after forward-backward)."""
    cdef int i
    for i in range(T * L):
        alpha[i] *= beta[i]


cdef inline void chain_viterbi(int T, int L, const double* s, const double** Tr, double* delta,
                               int* bp, int* out, double* score) noexcept nogil:
    """Best labeling into out[0:T], its score into score[0]; delta [T*L], bp [T*L] scratch.

    Each label j takes the best of its predecessors in registers (the first i of the
    highest score, as a scan of i in order finds it) with selects instead of branches:
    the column of Tr[t] it reads is strided, but the matrix stays in L1. Without stores
    and mispredicted branches in the inner loop it runs about twice as fast as a scan
    that updates delta for every (i, j).
    """
    cdef int t, i, j, bi
    cdef double v, best
    cdef bint better
    cdef const double* Tt
    cdef const double* col
    cdef double* cur
    cdef double* prev
    prev = delta
    for j in range(L):
        prev[j] = s[j]
    for t in range(1, T):
        Tt = Tr[t]
        cur = delta + t * L
        for j in range(L):
            col = Tt + j
            best = -INFINITY
            bi = 0
            for i in range(L):
                v = prev[i] + col[i * L]
                better = v > best
                bi = i if better else bi
                best = v if better else best
            cur[j] = best + s[t * L + j]
            bp[t * L + j] = bi
        prev = cur
    out[T - 1] = argmax(prev, L, score)
    for t in range(T - 1, 0, -1):
        out[t - 1] = bp[t * L + out[t]]


cdef inline int _best_head(const double* sc, const int* cnt, const int* ptr, int L, int K,
                           const double* Tt, int j, double* best) noexcept nogil:
    """The list i whose next unused entry (sc[i*K + ptr[i]], plus Tt[i*L+j] when Tt is
    given) scores highest, its score in best[0]; -1 when every list is used up.

    The lists hold, best first, the partial paths ending in label i at one
    position; merging them gives the best paths one position further.
    """
    cdef int i, bi = -1
    cdef double v, top = -INFINITY
    for i in range(L):
        if ptr[i] < cnt[i]:
            v = sc[<Py_ssize_t> i * K + ptr[i]]
            if Tt != NULL:
                v += Tt[i * L + j]
            if bi < 0 or v > top:
                top = v
                bi = i
    best[0] = top
    return bi


cdef inline int chain_nbest(int T, int L, int K, const double* s, const double** Tr,
                            double* sc, int* py, int* pk, int* cnt, int* ptr,
                            int* out, Py_ssize_t out_stride, double* out_score) noexcept nogil:
    """Exact K best labelings (list Viterbi); returns how many were found.

    sc/py/pk[(t*L+y)*K+r]: score, previous label and previous rank of the r-th
    best partial path ending in label y at t; cnt[t*L+y] how many; ptr [L] scratch
    (the ChainBuffers of chain_pool_new with K hold them). Labeling n goes
    to out[n*out_stride : n*out_stride + T], its score to out_score[n].
    """
    cdef int t, i, j, r, bi, n
    cdef double best
    cdef Py_ssize_t base, pbase
    for j in range(L):
        sc[j * K] = s[j]
        cnt[j] = 1
    for t in range(1, T):
        for j in range(L):
            base = (<Py_ssize_t> t * L + j) * K
            for i in range(L):
                ptr[i] = 0
            n = 0
            while n < K:
                bi = _best_head(sc + (<Py_ssize_t> t - 1) * L * K, cnt + (t - 1) * L, ptr, L, K, Tr[t], j, &best)
                if bi < 0:
                    break
                sc[base + n] = best + s[t * L + j]
                py[base + n] = bi
                pk[base + n] = ptr[bi]
                ptr[bi] += 1
                n += 1
            cnt[t * L + j] = n
    # merge the final lists and trace back
    for i in range(L):
        ptr[i] = 0
    n = 0
    while n < K:
        bi = _best_head(sc + (<Py_ssize_t> T - 1) * L * K, cnt + (T - 1) * L, ptr, L, K, NULL, 0, &best)
        if bi < 0:
            break
        out_score[n] = best
        j = bi
        r = ptr[bi]
        ptr[bi] += 1
        for t in range(T - 1, -1, -1):
            out[n * out_stride + t] = j
            if t > 0:
                pbase = (<Py_ssize_t> t * L + j) * K + r
                j = py[pbase]
                r = pk[pbase]
        n += 1
    return n


cdef inline void chain_max_scores(int T, int L, const double* s, const double** Tr, double* fwd,
                                  double* bwd) noexcept nogil:
    """Forward and backward Viterbi scores [T*L] (max-product messages).

    fwd[t, y]: best score of a labeling of positions ..t ending in y at t;
    bwd[t, y]: best score of the rest of the chain after t given y at t, so
    fwd + bwd is the best score of a labeling through (t, y).
    """
    cdef int t, i, j
    cdef double v, best
    cdef const double* Tt
    for j in range(L):
        fwd[j] = s[j]
        bwd[(T - 1) * L + j] = 0.0
    for t in range(1, T):
        Tt = Tr[t]
        for j in range(L):
            best = -INFINITY
            for i in range(L):
                v = fwd[(t - 1) * L + i] + Tt[i * L + j]
                if v > best:
                    best = v
            fwd[t * L + j] = best + s[t * L + j]
    for t in range(T - 1, 0, -1):
        Tt = Tr[t]
        for i in range(L):
            best = -INFINITY
            for j in range(L):
                v = Tt[i * L + j] + s[t * L + j] + bwd[t * L + j]
                if v > best:
                    best = v
            bwd[(t - 1) * L + i] = best


cdef inline void chain_restrict(double* s, const unsigned char* allowed, Py_ssize_t n) noexcept nogil:
    """s[i] = -inf where allowed[i] is 0: the state table of the lattice of the labelings a
    partial annotation (or a forced decoding) allows. Exponentiated, a removed state is exactly
    zero, so the sum- and max-product passes above run on the restricted lattice unchanged."""
    cdef Py_ssize_t i
    for i in range(n):
        if not allowed[i]:
            s[i] = -INFINITY


cdef inline bint dense_step(int n, int n_prev, int L) noexcept nogil:
    """Whether a restricted step between n_prev and n allowed labels is cheaper as the full
    matrix product (vectorized) than through the label lists (gathers)."""
    return 4 * n * n_prev > L * L


cdef inline double chain_restricted_forward_backward(int T, int L, const double* s,
                                                     const unsigned char* allowed, const double** E,
                                                     const double* shift, const double* kept_q,
                                                     const double* kept_max, double* q, double* alpha,
                                                     double* beta, double* scale, int* idx, int* cnt,
                                                     double* tacc, const double* E_shared) noexcept nogil:
    """chain_forward_backward over the labelings ``allowed`` [T*L] keeps (a partial annotation's):
    the same outputs (zero at the removed labels) and log Z of the restricted lattice, -inf when it
    has no labeling. It visits only the allowed labels (their lists into idx [T*L], cnt [T]): two
    labeled neighbours cost one product, so a mostly labeled sentence costs a fraction of the
    full pass that precedes it in training, whose exp-states it reuses (kept_q, kept_max of
    chain_sum_product; NULL: computed here). A position whose allowed states all underflow
    against the full pass's largest one is recomputed with its own."""
    cdef int t, j, k, r, n, n_prev
    cdef double logz = 0.0, m, z, acc, a, inv
    cdef bint own
    cdef const int* ids
    cdef const int* prev
    cdef const double* Et
    cdef double* qt
    cdef double* at
    cdef double* row
    cdef bint gather
    for t in range(T):
        n = 0
        for j in range(L):
            if allowed[t * L + j]:
                idx[t * L + n] = j
                n += 1
        cnt[t] = n
    memset(q, 0, <Py_ssize_t> T * L * sizeof(double))
    memset(alpha, 0, <Py_ssize_t> T * L * sizeof(double))
    memset(beta, 0, <Py_ssize_t> T * L * sizeof(double))
    for t in range(T):
        ids, n = idx + t * L, cnt[t]
        qt, at = q + t * L, alpha + t * L
        own = kept_q == NULL
        while True:
            if own:
                m = -INFINITY
                for k in range(n):
                    if s[t * L + ids[k]] > m:
                        m = s[t * L + ids[k]]
                if not (m > -INFINITY):
                    return -INFINITY
                for k in range(n):
                    qt[ids[k]] = exp(s[t * L + ids[k]] - m)
            else:
                m = kept_max[t]
                for k in range(n):
                    qt[ids[k]] = kept_q[t * L + ids[k]]
            if t == 0:
                for k in range(n):
                    at[ids[k]] = qt[ids[k]]
            elif dense_step(n, cnt[t - 1], L):
                # alpha[t-1] and q[t] are zero at the removed labels
                vec_mat(alpha + (t - 1) * L, E[t], L, at)
                for j in range(L):
                    at[j] *= qt[j]
            else:
                Et, prev, n_prev = E[t], idx + (t - 1) * L, cnt[t - 1]
                for k in range(n):
                    j = ids[k]
                    acc = 0.0
                    for r in range(n_prev):
                        acc += alpha[(t - 1) * L + prev[r]] * Et[prev[r] * L + j]
                    at[j] = acc * qt[j]
            z = 0.0
            for k in range(n):
                z += at[ids[k]]
            if z > 0.0 or own:
                break
            own = True
        if not (z > 0.0):
            return -INFINITY
        if t > 0:
            logz += shift[t]
        inv = 1.0 / z
        for k in range(n):
            at[ids[k]] *= inv
        scale[t] = z
        logz += m + log(z)
    ids = idx + (T - 1) * L
    for k in range(cnt[T - 1]):
        beta[(T - 1) * L + ids[k]] = 1.0
    for t in range(T - 1, 0, -1):
        ids, n, qt = idx + t * L, cnt[t], q + t * L
        inv = 1.0 / scale[t]
        for k in range(n):
            qt[ids[k]] *= beta[t * L + ids[k]] * inv
        Et, prev, n_prev = E[t], idx + (t - 1) * L, cnt[t - 1]
        gather = tacc != NULL and Et == E_shared
        if dense_step(n, n_prev, L):
            # beta at a removed label is not zero then, but nothing reads it: its alpha is
            mat_vec(Et, qt, L, beta + (t - 1) * L)
            if gather:
                for r in range(n_prev):
                    a = alpha[(t - 1) * L + prev[r]]
                    row = tacc + prev[r] * L
                    for j in range(L):
                        row[j] += a * qt[j]
            continue
        for r in range(n_prev):
            j = prev[r]
            acc = 0.0
            for k in range(n):
                acc += Et[j * L + ids[k]] * qt[ids[k]]
            beta[(t - 1) * L + j] = acc
            if gather:
                a = alpha[(t - 1) * L + j]
                row = tacc + j * L
                for k in range(n):
                    row[ids[k]] += a * qt[ids[k]]
    return logz


cdef struct Moments:
    # one thread's workspace and results of chain_count_moments for chains of up to T positions
    double* q          # T*n exp state potentials (as the forward pass makes them)
    double* A          # T*n forward sums weighted by the count of the prefix
    double* B          # T*n backward sums weighted by the count of the suffix
    double* node       # T*n out: Cov(G, [y_t = j])
    double* tmp        # n
    double expected    # out: E[G]


cdef inline double chain_count_moments(int T, int L, const double* s, const double** E,
                                       const double* alpha, const double* beta, const double* scale,
                                       const double* g, Moments* m) noexcept nogil:
    """Covariances of G = sum_t g[y_t] (e.g. the number of entity tokens) with each node of the
    chain, after chain_forward_backward on the same tables (alpha: its scaled forward scores,
    before chain_node_marginals; beta and scale as it leaves them). Returns E[G]; m.node[t*L + j]
    gets E[G [y_t = j]] - E[G] p(y_t = j), and chain_count_edge_moments gives the same of an edge.

    The expectation semiring on the scaled passes: A[t, j] sums over the labelings of positions
    ..t ending in j their weight times their count so far, B[t, i] the same over the rest of the
    chain after t, both divided by the forward pass's scales, so A[t] beta[t] + alpha[t] B[t]
    is E[G [y_t = j]] without a division by Z. The gradient of E[G] with respect to a weight is
    its feature's covariance with G: these node and edge covariances scattered like marginals.
    """
    cdef int t, j
    cdef double inv, eg = 0.0
    cdef double* At
    cdef double* qt
    cdef const double* at
    for t in range(T):
        exp_shifted(s + t * L, m.q + t * L, L)
    for j in range(L):
        m.A[j] = alpha[j] * g[j]
    for t in range(1, T):
        At = m.A + t * L
        qt = m.q + t * L
        at = alpha + t * L
        vec_mat(m.A + (t - 1) * L, E[t], L, m.tmp)
        inv = 1.0 / scale[t]
        for j in range(L):
            At[j] = m.tmp[j] * qt[j] * inv + at[j] * g[j]
    for j in range(L):
        eg += m.A[(T - 1) * L + j]
        m.B[(T - 1) * L + j] = 0.0
    for t in range(T - 1, 0, -1):
        inv = 1.0 / scale[t]
        for j in range(L):
            m.tmp[j] = m.q[t * L + j] * (m.B[t * L + j] + g[j] * beta[t * L + j]) * inv
        mat_vec(E[t], m.tmp, L, m.B + (t - 1) * L)
    for t in range(T * L):
        m.node[t] = m.A[t] * beta[t] + alpha[t] * m.B[t] - eg * alpha[t] * beta[t]
    m.expected = eg
    return eg


cdef inline void chain_count_edge_moments(int L, int t, const double* Et, const double* alpha,
                                          const double* beta, const double* scale, const double* g,
                                          const Moments* m, bint with_matrix,
                                          double* out) noexcept nogil:
    """out[i*L + j] += E[G [y_{t-1} = i, y_t = j]] - E[G] p(y_{t-1} = i, y_t = j), after
    chain_count_moments; without with_matrix, the same divided by Et[i*L + j] (how
    chain_forward_backward's tacc gathers the positions that share one matrix)."""
    cdef int i, j
    cdef double inv = 1.0 / scale[t], a, c, e
    cdef const double* ap = alpha + (t - 1) * L
    cdef const double* Ap = m.A + (t - 1) * L
    cdef const double* qt = m.q + t * L
    cdef const double* bt = beta + t * L
    cdef const double* Bt = m.B + t * L
    for j in range(L):
        m.tmp[j] = qt[j] * inv
    for i in range(L):
        a = ap[i]
        c = Ap[i] - m.expected * a
        for j in range(L):
            e = m.tmp[j] * (c * bt[j] + a * (Bt[j] + g[j] * bt[j]))
            out[i * L + j] += e * Et[i * L + j] if with_matrix else e
