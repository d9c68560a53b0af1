# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Inference on factorial grids: C label chains over the same T tokens, coupled at every token.

Chain c has n[c] labels; variable (c, t) is chain c's label at token t. A grid is given
by log potentials (a Grid):

- ``node[c][t*n[c] + i]``: label i of chain c at token t;
- ``trans[c][i*n[c] + j]``: chain c has i at t-1 and j at t (the same at every t);
- ``pair[c][(t*n[c] + a)*n[c+1] + b]`` (c < C-1): chain c has a and chain c+1 has b at t.

Edges of the unrolled grid are numbered (grid_edge_count): the chain edges first,
``c*(T-1) + t-1`` for (c, t-1)-(c, t), then the cotemporal ones, ``C*(T-1) + c*T + t``
for (c, t)-(c+1, t).

- grid_exact / grid_exact_viterbi: exact inference through the product kernels
  (product.pxd: one chain over the joint labels, with the factorized recursion);
  the cost grows with prod n[c].
- grid_bp / grid_bp_max: loopy sum- and max-product with messages in log space,
  with a tree schedule (TRP over "combs", each pass run by the chain kernels of
  chain.pxd) or a random asynchronous one (GRID_TRP, GRID_RANDOM).

Everything is nogil and allocation-free; a GridWork (grid_work_init) is one thread's
workspace for grids of one shape (C, n) up to max_T tokens.
"""

from libc.math cimport exp, log, fabs, INFINITY
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memset

from chain cimport (ChainBuffers, chain_buffers_init, chain_buffers_release, exp_shifted,
                    chain_forward_backward, chain_max_scores)
from product cimport (Shape, shape_init, product_forward_backward, product_node_marginals,
                      product_edge_marginals, product_viterbi)


cdef enum:
    GRID_MAX_CHAINS = 8
    GRID_TRP = 0              # tree-based reparameterization over combs
    GRID_RANDOM = 1           # random asynchronous schedule
    GRID_WANT_EXACT = 1       # grid_work_init: buffers for grid_exact(_viterbi)
    GRID_WANT_BP = 2          # ... for grid_bp(_max)


cdef struct Grid:
    int C, T
    const int* n             # labels per chain
    const double** node      # node[c]: T*n[c]
    const double** trans     # trans[c]: n[c]*n[c]
    const double** pair      # pair[c], c < C-1: T*n[c]*n[c+1]


cdef struct GridOut:
    # marginals (or beliefs) to fill; a NULL array is not computed
    double** node            # node[c]: T*n[c], p(chain c has i at t)
    double** edge            # edge[c]: n[c]*n[c], sum over t of p(i at t-1, j at t); ADDED to
    double** pair            # pair[c]: T*n[c]*n[c+1], p(chain c has a, chain c+1 has b, at t)


cdef struct GridWork:
    int max_T, C, want
    int n[8]
    int max_n
    Py_ssize_t S             # joint labels (prod n), 0 unless GRID_WANT_EXACT
    ChainBuffers cb          # exact: max_T x S x C factors; BP only: the spine, max_T x max_n x 1
    double* etrans           # exp(trans[c] - tshift[c]) at toff[c]
    Py_ssize_t toff[8]
    double tshift[8]
    double* edge_tmp         # max_n^2
    int* joint               # max_T joint labels (exact Viterbi)
    # BP: messages into each variable, four slots (fwd from t-1, bwd from t+1, above from
    # chain c-1, below from chain c+1), each N = max_T * sum n doubles, variable (c, t) at
    # vbase[c] + t*n[c]; absent neighbours keep a message of 0 (log 1)
    double* msg
    Py_ssize_t N
    Py_ssize_t vbase[8]
    double* epair            # exp(pair - pshift), chain c's at pbase[c] + t*n[c]*n[c+1]
    double* pshift           # [c*max_T + t]
    Py_ssize_t pbase[8]
    double* scratch          # 8 * max_n
    int* perm                # the edges of a max_T grid (random schedule)
    int* visits              # NULL, or 2 counters per edge: messages sent each way (tests)


cdef inline Py_ssize_t grid_joint_labels(int C, const int* n) noexcept nogil:
    """prod n[c], or -1 when C is outside 1..8, a chain has no label or the product passes 2^31."""
    cdef Py_ssize_t S = 1
    cdef int c
    if C < 1 or C > GRID_MAX_CHAINS:
        return -1
    for c in range(C):
        if n[c] < 1:
            return -1
        S *= n[c]
        if S > 2147483647:
            return -1
    return S


cdef inline Py_ssize_t grid_edge_count(int C, int T) noexcept nogil:
    """Edges of the unrolled grid: C*(T-1) chain edges and (C-1)*T cotemporal ones."""
    return <Py_ssize_t> C * (T - 1) + <Py_ssize_t> (C - 1) * T


cdef inline Py_ssize_t grid_work_doubles(int max_T, int C, const int* n, int want) noexcept nogil:
    """Doubles a workspace holds (grid_work_init), for callers that budget memory: exact
    inference ~ max_T * prod n * 4, BP ~ max_T * (5 * sum n + 2 * sum n[c] n[c+1])."""
    cdef Py_ssize_t S = grid_joint_labels(C, n), sn = 0, sp = 0, sq = 0, tot = 0
    cdef int c, mx = 1
    if S < 0:
        return -1
    for c in range(C):
        sn += n[c]
        sq += <Py_ssize_t> n[c] * n[c]
        mx = n[c] if n[c] > mx else mx
        if c < C - 1:
            sp += <Py_ssize_t> n[c] * n[c + 1]
    if want & GRID_WANT_EXACT:
        tot += <Py_ssize_t> max_T * S * 4 + <Py_ssize_t> max_T * C + 2 * S
    else:
        tot += <Py_ssize_t> max_T * mx * 4 + <Py_ssize_t> max_T * 2 + 2 * mx
    tot += sq + <Py_ssize_t> mx * mx
    if want & GRID_WANT_BP:
        tot += <Py_ssize_t> 4 * max_T * sn + <Py_ssize_t> max_T * sp + <Py_ssize_t> max_T * C + 8 * mx
    return tot


cdef inline void grid_work_release(GridWork* w) noexcept nogil:
    """Frees the arrays of a workspace (not the struct)."""
    chain_buffers_release(&w.cb)
    free(w.etrans)
    free(w.edge_tmp)
    free(w.joint)
    free(w.msg)
    free(w.epair)
    free(w.pshift)
    free(w.scratch)
    free(w.perm)
    free(w.visits)
    memset(w, 0, sizeof(GridWork))


cdef inline int grid_work_init(GridWork* w, int max_T, int C, const int* n, int want) noexcept nogil:
    """A zeroed workspace's arrays for grids of chains n[0..C-1] and up to max_T tokens, for
    what ``want`` says (GRID_WANT_EXACT | GRID_WANT_BP); 0, or -1 (nothing left allocated)
    when out of memory or the shape is not allowed (grid_joint_labels)."""
    cdef Py_ssize_t S = grid_joint_labels(C, n), sq = 0, sn = 0, sp = 0, E
    cdef int c
    cdef bint failed
    memset(w, 0, sizeof(GridWork))
    if S < 0:
        return -1
    if max_T < 1:
        max_T = 1
    w.max_T = max_T
    w.C = C
    w.want = want
    w.max_n = 1
    for c in range(C):
        w.n[c] = n[c]
        w.toff[c] = sq
        w.vbase[c] = sn * max_T
        w.pbase[c] = sp * max_T
        sq += <Py_ssize_t> n[c] * n[c]
        sn += n[c]
        if c < C - 1:
            sp += <Py_ssize_t> n[c] * n[c + 1]
        w.max_n = n[c] if n[c] > w.max_n else w.max_n
    if want & GRID_WANT_EXACT:
        w.S = S
        failed = chain_buffers_init(&w.cb, max_T, <int> S, C, False, 0) < 0
    else:
        failed = chain_buffers_init(&w.cb, max_T, w.max_n, 1, False, 0) < 0
    w.etrans = <double*> malloc(sq * sizeof(double))
    w.edge_tmp = <double*> malloc(<Py_ssize_t> w.max_n * w.max_n * sizeof(double))
    w.joint = <int*> malloc(max_T * sizeof(int))
    failed = failed or w.etrans == NULL or w.edge_tmp == NULL or w.joint == NULL
    if want & GRID_WANT_BP:
        w.N = sn * max_T
        E = grid_edge_count(C, max_T)
        w.msg = <double*> malloc(4 * w.N * sizeof(double))
        w.epair = <double*> malloc((sp * max_T + 1) * sizeof(double))
        w.pshift = <double*> malloc(<Py_ssize_t> max_T * C * sizeof(double))
        w.scratch = <double*> malloc(8 * w.max_n * sizeof(double))
        w.perm = <int*> malloc((E + 1) * sizeof(int))
        failed = failed or w.msg == NULL or w.epair == NULL or w.pshift == NULL or w.scratch == NULL \
            or w.perm == NULL
    if failed:
        grid_work_release(w)
        return -1
    return 0


cdef inline void grid_exp_trans(const Grid* g, GridWork* w) noexcept nogil:
    """w.etrans = exp(trans - max), chain by chain (shared by every token)."""
    cdef int c
    for c in range(g.C):
        w.tshift[c] = exp_shifted(g.trans[c], w.etrans + w.toff[c], g.n[c] * g.n[c])


# ---------------------------------------------------------------------------------------------
# exact inference over the joint labels

cdef inline void grid_joint_states(const Grid* g, Py_ssize_t S, double* s) noexcept nogil:
    """s[t*S + y] = sum_c node[c](t, y_c) + sum_c pair[c](t, y_c, y_c+1) for every joint label
    y (chain 0 outermost), built chain by chain in place: the table over chains 0..c extends
    to chain c+1 from its last entry down, so no entry is overwritten before it is read."""
    cdef int t, c, a, b, nc, npv
    cdef Py_ssize_t P, p
    cdef double v
    cdef double* st
    cdef const double* nd
    cdef const double* pr
    for t in range(g.T):
        st = s + t * S
        nc = g.n[0]
        nd = g.node[0] + t * nc
        for a in range(nc):
            st[a] = nd[a]
        P = nc
        for c in range(1, g.C):
            npv = g.n[c - 1]
            nc = g.n[c]
            nd = g.node[c] + t * nc
            pr = g.pair[c - 1] + <Py_ssize_t> t * npv * nc
            p = P - 1
            while p >= 0:
                v = st[p]
                a = <int> (p % npv)
                for b in range(nc - 1, -1, -1):
                    st[p * nc + b] = v + nd[b] + pr[a * nc + b]
                p -= 1
            P *= nc


cdef inline double grid_exact(const Grid* g, GridWork* w, const GridOut* out) noexcept nogil:
    """Exact log Z; the marginals out asks for (node, edge sums, pairs). w: GRID_WANT_EXACT."""
    cdef Shape sh
    cdef ChainBuffers* b = &w.cb
    cdef int T = g.T, C = g.C, t, c, i, nc
    cdef Py_ssize_t S, y, k
    cdef double logz, p
    cdef int lab[8]
    if shape_init(&sh, C, g.n) < 0:
        return INFINITY
    S = sh.S
    grid_joint_states(g, S, b.s)
    grid_exp_trans(g, w)
    for t in range(1, T):
        for c in range(C):
            b.E[t * C + c] = w.etrans + w.toff[c]
            b.shift[t * C + c] = w.tshift[c]
    logz = product_forward_backward(&sh, T, b.s, b.E, b.shift, b.q, b.alpha, b.beta, b.scale, b.tmp)
    if out.edge != NULL:
        for t in range(1, T):
            for c in range(C):
                nc = g.n[c]
                product_edge_marginals(&sh, c, b.alpha + (t - 1) * S, b.E + t * C, b.q + t * S, b.tmp,
                                       w.edge_tmp)
                for i in range(nc * nc):
                    out.edge[c][i] += w.edge_tmp[i]
    if out.node == NULL and out.pair == NULL:
        return logz
    product_node_marginals(T, S, b.alpha, b.beta)
    for c in range(C):
        if out.node != NULL:
            memset(out.node[c], 0, <Py_ssize_t> T * g.n[c] * sizeof(double))
        if out.pair != NULL and c < C - 1:
            memset(out.pair[c], 0, <Py_ssize_t> T * g.n[c] * g.n[c + 1] * sizeof(double))
    for t in range(T):
        for y in range(S):
            p = b.alpha[t * S + y]
            for c in range(C):
                lab[c] = <int> ((y // sh.stride[c]) % sh.n[c])
            if out.node != NULL:
                for c in range(C):
                    out.node[c][t * g.n[c] + lab[c]] += p
            if out.pair != NULL:
                for c in range(C - 1):
                    k = (<Py_ssize_t> t * g.n[c] + lab[c]) * g.n[c + 1] + lab[c + 1]
                    out.pair[c][k] += p
    return logz


cdef inline double grid_exact_viterbi(const Grid* g, GridWork* w, int** labels) noexcept nogil:
    """The best labeling, labels[c][t], and its score (product_viterbi's ties: the lowest label
    of each chain, the last chain decided first). w: GRID_WANT_EXACT."""
    cdef Shape sh
    cdef ChainBuffers* b = &w.cb
    cdef int T = g.T, C = g.C, t, c
    cdef double score
    if shape_init(&sh, C, g.n) < 0:
        return INFINITY
    grid_joint_states(g, sh.S, b.s)
    for t in range(1, T):
        for c in range(C):
            b.E[t * C + c] = g.trans[c]
    product_viterbi(&sh, T, b.s, b.E, b.alpha, b.tmp, b.bp, w.joint, &score)
    for t in range(T):
        for c in range(C):
            labels[c][t] = (w.joint[t] // sh.stride[c]) % sh.n[c]
    return score
