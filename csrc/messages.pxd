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
- grid_bp / grid_bp_max: loopy sum-product (messages normalized, in probability) and
  max-product (in log space), with a tree schedule (TRP over "combs", each pass run by the chain kernels of
  chain.pxd) or a random asynchronous one (GRID_TRP, GRID_RANDOM).

Everything is nogil and allocation-free; a GridWork (grid_work_init) is one thread's
workspace for grids of one shape (C, n) up to max_T tokens.
"""

from libc.math cimport exp, log, fabs, INFINITY
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memset, memcpy, memcmp

from chain cimport (ChainBuffers, chain_buffers_init, chain_buffers_release, chain_max_scores, argmax,
                    exp_shifted_fast)
from vecmath cimport vec_mat_rect, exp_array, log_array
from maxplus cimport maxplus, max_of
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
    # NULL, or the transition tables grid_shared_trans made from trans, for grids that share
    # them (made once instead of for every grid)
    const double* etrans
    const double* etransT
    const double* tshift
    # max-product: NULL, or the log transition matrices transposed (chain c's at the sum of the
    # earlier chains' n^2), made once for grids that share them
    const double* ltransT


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
    ChainBuffers cb          # exact: max_T x S x C factors; BP only: sum-product's spine, max_T x max_n x 1
    double* etrans           # exp(trans[c] - tshift[c]) at toff[c]
    double* etransT          # the same, transposed (backward steps as row sums, which vectorize)
    Py_ssize_t toff[8]
    double tshift[8]
    # the transition tables in use (grid_exp_trans): these three, or the grid's shared ones
    const double* et
    const double* etT
    const double* tsh
    double* edge_tmp         # max_n^2
    int* joint               # max_T joint labels (exact Viterbi)
    # BP: messages into each variable, four slots (fwd from t-1, bwd from t+1, above from
    # chain c-1, below from chain c+1), each N = max_T * sum n doubles, variable (c, t) at
    # vbase[c] + t*n[c]; absent neighbours keep a message of 0 (log 1). Then the same four
    # slots again in probability (4*N on), where sum-product sweeps work and every change of a
    # message is measured; sum-product fills the log slots once, after its sweeps
    double* msg
    Py_ssize_t N
    Py_ssize_t vbase[8]
    double* epair            # exp(pair - pshift), chain c's at pbase[c] + t*n[c]*n[c+1]; max-product:
                             # the log pair tables transposed (n[c+1] x n[c] per token)
    double* enode            # sum-product: exp(node - its max per variable), laid out as a message slot
    double* pshift           # [c*max_T + t]
    Py_ssize_t pbase[8]
    double* scratch          # 9 * max_n
    double* ucols            # max_n * max_T: a chain's scaled edge cavities, one column per edge (grid_beliefs)
    double* vrows            # max_T * max_n: the other ends', one row per edge
    int* perm                # the edges of a max_T grid (random schedule)
    int* visits              # NULL, or 2 counters per edge: messages sent each way (tests)
    # max-product (grid_max_run): each chain's log transitions transposed (at toff[c]), and the
    # measuring of changes: the sweep's tolerance, half of it (a message entry that moved by
    # less changed by less than tol in probability), and whether a message of the sweep has
    # already changed by more (nothing more to measure)
    double* ltransT
    const double* lT         # the transposed log transitions in use: ltransT, or the grid's shared ones
    double max_tol
    double max_near
    bint max_failed
    # grid_max_run: whether the spine passes of chains 1..C-1 are watched (max_replay; max_watch
    # during those passes) and whether one of their messages has changed a bit this sweep
    bint max_replay
    bint max_watch
    bint max_moved
    # grid_comb: whether this message passing has run the last comb (whose teeth send every
    # cotemporal message up), so that comb 0 need not send its teeth in
    bint teeth_sent
    # grid_max_spine: each chain's last spine pass in this message passing (spine_kept[c]): its
    # rows, forward and backward scores, three N-double slots laid out as the messages
    double* spine
    bint spine_kept[8]
    # grid_max_send (same_cavity): each variable's cavity at its last cotemporal send down and
    # up (two N-double slots laid out as the messages), and whether it has one this passing
    # (2 x C x max_T flags)
    double* sent_cav
    unsigned char* sent_kept


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
    inference ~ max_T * prod n * 4, BP ~ max_T * (14 * sum n + sum n[c] n[c+1] + 4 * max n)."""
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
    tot += 2 * sq + <Py_ssize_t> mx * mx
    if want & GRID_WANT_BP:
        tot += <Py_ssize_t> 14 * max_T * sn + <Py_ssize_t> max_T * sp + <Py_ssize_t> max_T * C + 9 * mx
        tot += <Py_ssize_t> 2 * max_T * mx + sq
    return tot


cdef inline void grid_work_release(GridWork* w) noexcept nogil:
    """Frees the arrays of a workspace (not the struct)."""
    chain_buffers_release(&w.cb)
    free(w.etrans)
    free(w.etransT)
    free(w.edge_tmp)
    free(w.joint)
    free(w.msg)
    free(w.epair)
    free(w.enode)
    free(w.pshift)
    free(w.scratch)
    free(w.ucols)
    free(w.vrows)
    free(w.perm)
    free(w.visits)
    free(w.ltransT)
    free(w.spine)
    free(w.sent_cav)
    free(w.sent_kept)
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
    w.etransT = <double*> malloc(sq * sizeof(double))
    w.edge_tmp = <double*> malloc(<Py_ssize_t> w.max_n * w.max_n * sizeof(double))
    w.joint = <int*> malloc(max_T * sizeof(int))
    failed = failed or w.etrans == NULL or w.etransT == NULL or w.edge_tmp == NULL or w.joint == NULL
    if want & GRID_WANT_BP:
        w.N = sn * max_T
        E = grid_edge_count(C, max_T)
        w.msg = <double*> malloc(8 * w.N * sizeof(double))
        w.epair = <double*> malloc((sp * max_T + 1) * sizeof(double))
        w.enode = <double*> malloc(w.N * sizeof(double))
        w.pshift = <double*> malloc(<Py_ssize_t> max_T * C * sizeof(double))
        w.scratch = <double*> malloc(9 * w.max_n * sizeof(double))
        w.ucols = <double*> malloc(<Py_ssize_t> max_T * w.max_n * sizeof(double))
        w.vrows = <double*> malloc(<Py_ssize_t> max_T * w.max_n * sizeof(double))
        w.perm = <int*> malloc((E + 1) * sizeof(int))
        w.ltransT = <double*> malloc(sq * sizeof(double))
        w.spine = <double*> malloc(3 * w.N * sizeof(double))
        w.sent_cav = <double*> malloc(2 * w.N * sizeof(double))
        w.sent_kept = <unsigned char*> malloc(<Py_ssize_t> 2 * C * max_T)
        failed = failed or w.msg == NULL or w.epair == NULL or w.pshift == NULL or w.scratch == NULL \
            or w.ucols == NULL or w.vrows == NULL or w.perm == NULL or w.enode == NULL \
            or w.ltransT == NULL or w.spine == NULL or w.sent_cav == NULL or w.sent_kept == NULL
    if failed:
        grid_work_release(w)
        return -1
    return 0


cdef inline Py_ssize_t grid_trans_doubles(int C, const int* n) noexcept nogil:
    """Doubles of etrans (and of etransT): sum of n[c]^2."""
    cdef Py_ssize_t sq = 0
    cdef int c
    for c in range(C):
        sq += <Py_ssize_t> n[c] * n[c]
    return sq


cdef inline void transpose(const double* src, int rows, int cols, double* dst) noexcept nogil:
    """dst[j * rows + i] = src[i * cols + j]: a rows x cols table transposed."""
    cdef int i, j
    cdef const double* col
    cdef double* out
    # a column at a time: contiguous stores in runs of rows (a pair table has 3 columns)
    for j in range(cols):
        col = src + j
        out = dst + <Py_ssize_t> j * rows
        for i in range(rows):
            out[i] = col[<Py_ssize_t> i * cols]


cdef inline void grid_log_trans_T(int C, const int* n, const double** trans, double* out) noexcept nogil:
    """Chain by chain, at sum of n[d]^2 (d < c): the log transition matrix transposed (max-product's
    backward steps over rows)."""
    cdef int c
    cdef Py_ssize_t o = 0
    for c in range(C):
        transpose(trans[c], n[c], n[c], out + o)
        o += <Py_ssize_t> n[c] * n[c]


cdef inline void grid_shared_trans(int C, const int* n, const double** trans, double* etrans, double* etransT,
                                   double* tshift) noexcept nogil:
    """Chain by chain, at sum of n[d]^2 (d < c): etrans = exp(trans - max), its shift (the max)
    into tshift[c], and etransT, the same transposed (backward steps as row sums, which
    vectorize)."""
    cdef int c, nc
    cdef Py_ssize_t o = 0
    for c in range(C):
        nc = n[c]
        tshift[c] = exp_shifted_fast(trans[c], etrans + o, nc * nc)
        transpose(etrans + o, nc, nc, etransT + o)
        o += <Py_ssize_t> nc * nc


cdef inline void grid_exp_trans(const Grid* g, GridWork* w) noexcept nogil:
    """Points w.et, w.etT, w.tsh at the grid's transition tables (grid_shared_trans): its
    shared ones, or ones made here in w.etrans, w.etransT, w.tshift."""
    if g.etrans != NULL:
        w.et, w.etT, w.tsh = g.etrans, g.etransT, g.tshift
        return
    grid_shared_trans(g.C, g.n, g.trans, w.etrans, w.etransT, w.tshift)
    w.et, w.etT, w.tsh = w.etrans, w.etransT, w.tshift


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
            b.E[t * C + c] = w.et + w.toff[c]
            b.shift[t * C + c] = w.tsh[c]
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


cdef inline double grid_labeling_score(const Grid* g, int** labels) noexcept nogil:
    """The log potential of the labeling labels[c][t]."""
    cdef int c, t, nc
    cdef double s = 0.0
    for c in range(g.C):
        nc = g.n[c]
        for t in range(g.T):
            s += g.node[c][t * nc + labels[c][t]]
            if t > 0:
                s += g.trans[c][labels[c][t - 1] * nc + labels[c][t]]
            if c < g.C - 1:
                s += g.pair[c][(<Py_ssize_t> t * nc + labels[c][t]) * g.n[c + 1] + labels[c + 1][t]]
    return s


# ---------------------------------------------------------------------------------------------
# loopy belief propagation

cdef enum:
    SLOT_FWD = 0             # message from (c, t-1)
    SLOT_BWD = 1             # from (c, t+1)
    SLOT_ABOVE = 2           # from (c-1, t)
    SLOT_BELOW = 3           # from (c+1, t)
    SKIP_FWD = 1             # grid_cavity: leave out that slot's message
    SKIP_BWD = 2
    SKIP_ABOVE = 4
    SKIP_BELOW = 8


cdef inline Py_ssize_t grid_comb_edges(int C, int T, int spine, int* out) noexcept nogil:
    """The edges of the comb whose spine is chain ``spine`` (its chain edges, and the
    cotemporal edges that hang every other chain's variables from it: C*T - 1 edges, a spanning
    tree of the grid) into out; returns how many. The combs of every spine cover every edge."""
    cdef Py_ssize_t k = 0, base = <Py_ssize_t> C * (T - 1)
    cdef int t, c
    for t in range(1, T):
        out[k] = spine * (T - 1) + t - 1
        k += 1
    for c in range(C - 1):
        for t in range(T):
            out[k] = <int> (base + <Py_ssize_t> c * T + t)
            k += 1
    return k


cdef inline unsigned long long grid_rng_next(unsigned long long* state) noexcept nogil:
    """splitmix64: the next 64 random bits of a seeded stream."""
    cdef unsigned long long z
    state[0] += 0x9E3779B97F4A7C15ULL
    z = state[0]
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline double* grid_msg(GridWork* w, int slot, int c, int t) noexcept nogil:
    """The message in ``slot`` into variable (c, t)."""
    return w.msg + slot * w.N + w.vbase[c] + <Py_ssize_t> t * w.n[c]


cdef inline double* grid_prob(GridWork* w, int slot, int c, int t) noexcept nogil:
    """The same message in probability (exp of grid_msg's)."""
    return w.msg + (slot + 4) * w.N + w.vbase[c] + <Py_ssize_t> t * w.n[c]


cdef inline int absent_chain_slots(const Grid* g, int c) noexcept nogil:
    """The slots no edge sends into at any token of chain c, as SKIP_ bits (bit k: slot k): chain 0
    has no message from above and chain C-1 none from below, a quarter of a two-chain grid's slots."""
    return (SKIP_ABOVE if c == 0 else 0) | (SKIP_BELOW if c == g.C - 1 else 0)


cdef inline int absent_slots(const Grid* g, int c, int t) noexcept nogil:
    """The slots of (c, t) that no edge sends into, as SKIP_ bits: the chain's (absent_chain_slots)
    and its ends'. Their messages stay uniform (1 in probability, 0 in log), so a cavity without
    them has the same values (x * 1 is x; x + 0 is x but for x = -0, a node score of -0 then keeping
    its sign, which only the sign of a zero downstream could show: beliefs, messages and log Z came
    out the same bits on grids of -0 tables)."""
    return ((SKIP_FWD if t == 0 else 0) | (SKIP_BWD if t == g.T - 1 else 0)) | absent_chain_slots(g, c)


cdef inline void grid_cavity(const Grid* g, GridWork* w, int c, int t, int skip, double* out,
                             bint from_prob=False) noexcept nogil:
    """out = node potential of (c, t) plus its incoming messages except those whose slot bit is
    set in ``skip`` (SKIP_FWD | ...; 0: all of them, the belief up to a constant). from_prob: the
    logs of the messages in probability (the sum-product sweeps keep no log messages)."""
    cdef int n = g.n[c], i, k
    cdef const double* nd = g.node[c] + <Py_ssize_t> t * n
    cdef const double* m
    skip |= absent_slots(g, c, t)
    for i in range(n):
        out[i] = nd[i]
    for k in range(4):
        if not (skip >> k) & 1:
            if from_prob:
                m = grid_prob(w, k, c, t)
                for i in range(n):
                    out[i] += log(m[i])
            else:
                m = grid_msg(w, k, c, t)
                for i in range(n):
                    out[i] += m[i]


cdef inline double set_log_message(double* msg, double* prob, double* v, int n) noexcept nogil:
    """msg = v normalized in log space (logsumexp 0), prob = exp(msg); uniform when v is all
    -inf. Returns the largest change of prob."""
    cdef int i
    cdef double m = -INFINITY, z = 0.0, d, change = 0.0, e
    for i in range(n):
        m = v[i] if v[i] > m else m
    if m == -INFINITY:
        for i in range(n):
            v[i] = -log(<double> n)
    else:
        for i in range(n):
            z += exp(v[i] - m)
        m += log(z)
        for i in range(n):
            v[i] -= m
    for i in range(n):
        e = exp(v[i])
        d = fabs(e - prob[i])
        change = d if d > change else change
        prob[i] = e
        msg[i] = v[i]
    return change


cdef inline double send_message(const double* cav, const double* logM, int na, int nb, bint col_sender,
                                double* msg, double* prob, double* tmp) noexcept nogil:
    """A sum-product message in log space across a factor over (a, b) with log potential
    logM[a*nb + b]: from the a side, msg[b] = log sum_a exp(cav[a]) psi(a, b) (col_sender: from
    the b side, msg[a] = log sum_b psi(a, b) exp(cav[b])), for sums whose terms underflow in
    probability (send_prob; max-product has its own, grid_max_send). Normalized, its exp into
    prob; returns the largest change of prob. tmp: max(na, nb)."""
    cdef int nu = nb if col_sender else na, nv = na if col_sender else nb
    cdef int a, b
    cdef double x, acc, best
    cdef double* out = tmp
    for a in range(nv):
        best = -INFINITY
        for b in range(nu):
            x = cav[b] + (logM[a * nb + b] if col_sender else logM[b * nb + a])
            best = x if x > best else best
        out[a] = best
        if best > -INFINITY:
            acc = 0.0
            for b in range(nu):
                x = cav[b] + (logM[a * nb + b] if col_sender else logM[b * nb + a])
                acc += exp(x - best)
            out[a] = best + log(acc)
    return set_log_message(msg, prob, out, nv)


cdef inline void count_spine(GridWork* w, int c, int T) noexcept nogil:
    """A spine pass sends every message along chain c both ways (the tests' counters)."""
    cdef int t
    if w.visits != NULL:
        for t in range(1, T):
            w.visits[2 * (c * (T - 1) + t - 1)] += 1
            w.visits[2 * (c * (T - 1) + t - 1) + 1] += 1


# Sum-product sweeps run in probability: a cavity is the product of the variable's
# exponentiated potential and its incoming messages (no exp per label), a message is stored
# normalized (no log per label); the logs are taken once, after the sweeps, for the beliefs
# (grid_log_messages). Max-product stays in log space (grid_send, grid_spine with maxp).

cdef inline double prob_sum(const double* p, int n) noexcept nogil:
    """sum p, added from the first entry to the last (normalize_prob's order)."""
    cdef int i
    cdef double z = 0.0
    for i in range(n):
        z += p[i]
    return z


cdef inline void normalize_summed(double* p, int n, double z) noexcept nogil:
    """p /= z, z = prob_sum(p, n) (one a caller already has); uniform when z is 0 (the evidence
    contradicts itself) or not finite."""
    cdef int i
    if not (z > 0.0) or z == INFINITY:
        for i in range(n):
            p[i] = 1.0 / n
    else:
        z = 1.0 / z
        for i in range(n):
            p[i] *= z


cdef inline void normalize_prob(double* p, int n) noexcept nogil:
    """p /= sum p for p >= 0; uniform when p is all zero or its sum is not finite."""
    normalize_summed(p, n, prob_sum(p, n))


cdef inline double largest(const double* x, int n, double m) noexcept nogil:
    """max(m, x[0], ..., x[n-1]), NaN entries skipped, in four running maxima: one dependent chain
    of n compares took most of a message's time (the value is the same whatever the order, but
    for the sign of a zero maximum, which callers of non-negative x do not see)."""
    cdef int i = 0
    cdef double m1 = m, m2 = m, m3 = m
    while i + 4 <= n:
        m = x[i] if x[i] > m else m
        m1 = x[i + 1] if x[i + 1] > m1 else m1
        m2 = x[i + 2] if x[i + 2] > m2 else m2
        m3 = x[i + 3] if x[i + 3] > m3 else m3
        i += 4
    while i < n:
        m = x[i] if x[i] > m else m
        i += 1
    m = m1 if m1 > m else m
    m = m2 if m2 > m else m
    return m3 if m3 > m else m


cdef inline double replace_prob(double* prob, const double* p, int n) noexcept nogil:
    """prob = p; returns the largest |p - prob| (four running maxima, as largest)."""
    cdef int i = 0
    cdef double c0 = 0.0, c1 = 0.0, c2 = 0.0, c3 = 0.0, d0, d1, d2, d3
    while i + 4 <= n:
        d0 = fabs(p[i] - prob[i])
        d1 = fabs(p[i + 1] - prob[i + 1])
        d2 = fabs(p[i + 2] - prob[i + 2])
        d3 = fabs(p[i + 3] - prob[i + 3])
        c0 = d0 if d0 > c0 else c0
        c1 = d1 if d1 > c1 else c1
        c2 = d2 if d2 > c2 else c2
        c3 = d3 if d3 > c3 else c3
        prob[i] = p[i]
        prob[i + 1] = p[i + 1]
        prob[i + 2] = p[i + 2]
        prob[i + 3] = p[i + 3]
        i += 4
    while i < n:
        d0 = fabs(p[i] - prob[i])
        c0 = d0 if d0 > c0 else c0
        prob[i] = p[i]
        i += 1
    c0 = c1 if c1 > c0 else c0
    c0 = c2 if c2 > c0 else c0
    return c3 if c3 > c0 else c0


cdef inline double set_prob_message(double* prob, double* p, int n) noexcept nogil:
    """prob = p / sum p for p >= 0 (normalize_prob; p is scaled in place). Returns the largest
    change of prob."""
    normalize_prob(p, n)
    return replace_prob(prob, p, n)


cdef inline bint grid_prob_cavity(const Grid* g, GridWork* w, int c, int t, int skip,
                                  double* out) noexcept nogil:
    """out = exp(cavity - max cavity) (grid_cavity's, same skip), a product of probabilities;
    False when the cavity is zero everywhere (out is then all 0). A product too small to
    scale (factors that disagree by more than ~640 nats) is redone in log space; within one
    message, entries ~700 nats below its largest are 0, as in the chain kernels."""
    cdef int n = g.n[c], i, k
    cdef const double* e = w.enode + w.vbase[c] + <Py_ssize_t> t * n
    cdef const double* p
    cdef double m = 0.0, inv
    skip |= absent_slots(g, c, t)
    for i in range(n):
        out[i] = e[i]
    for k in range(4):
        if not (skip >> k) & 1:
            p = grid_prob(w, k, c, t)
            for i in range(n):
                out[i] *= p[i]
    m = largest(out, n, 0.0)
    if m > 1e-280:
        inv = 1.0 / m
        for i in range(n):
            out[i] *= inv
        return True
    grid_cavity(g, w, c, t, skip, out, True)
    m = -INFINITY
    for i in range(n):
        m = out[i] if out[i] > m else m
    if m == -INFINITY:
        for i in range(n):
            out[i] = 0.0
        return False
    for i in range(n):
        out[i] = exp(out[i] - m)
    return True


cdef inline double send_prob(const Grid* g, GridWork* w, int c, int t, int skip, const double* M,
                             const double* logM, int na, int nb, bint col_sender, int to_slot, int to_c,
                             int to_t) noexcept nogil:
    """Sum-product message from variable (c, t) (its cavity: skip) across a factor over (a, b)
    (M = exp(logM - shift)) to (to_c, to_t)'s slot, as send_message but in probability.
    Returns the largest change."""
    cdef int nu = nb if col_sender else na, nv = na if col_sender else nb
    cdef int a, b
    cdef double x, acc
    cdef double* wgt = w.scratch
    cdef double* out = w.scratch + w.max_n
    cdef double* cav = w.scratch + 2 * w.max_n
    cdef double* tmp = w.scratch + 3 * w.max_n
    cdef double* prob = grid_prob(w, to_slot, to_c, to_t)
    cdef const double* row
    if not grid_prob_cavity(g, w, c, t, skip, wgt):
        for a in range(nv):
            out[a] = 0.0
        return set_prob_message(prob, out, nv)
    if not col_sender:
        vec_mat_rect(wgt, M, na, nb, out)
    else:
        for a in range(na):
            row = M + a * nb
            acc = 0.0
            for b in range(nb):
                acc += row[b] * wgt[b]
            out[a] = acc
    acc = prob_sum(out, nv)
    if not (acc > 0.0):
        # the exponentiated terms underflow: the sums in log space
        grid_cavity(g, w, c, t, skip, cav, True)
        return send_message(cav, logM, na, nb, col_sender, grid_msg(w, to_slot, to_c, to_t), prob, tmp)
    # set_prob_message with the sum just taken (the same additions in the same order)
    normalize_summed(out, nv, acc)
    return replace_prob(prob, out, nv)


cdef inline double grid_send_sum(const Grid* g, GridWork* w, Py_ssize_t e, int way) noexcept nogil:
    """grid_send for sum-product, in probability."""
    cdef int T = g.T, C = g.C, c, t, n, na, nb
    cdef Py_ssize_t nchain = <Py_ssize_t> C * (T - 1), k
    cdef const double* M
    if e < nchain:
        c = <int> (e // (T - 1))
        t = <int> (e % (T - 1)) + 1
        n = g.n[c]
        M = w.et + w.toff[c]
        if way == 0:
            return send_prob(g, w, c, t - 1, SKIP_BWD, M, g.trans[c], n, n, False, SLOT_FWD, c, t)
        return send_prob(g, w, c, t, SKIP_FWD, M, g.trans[c], n, n, True, SLOT_BWD, c, t - 1)
    k = e - nchain
    c = <int> (k // T)
    t = <int> (k % T)
    na = g.n[c]
    nb = g.n[c + 1]
    M = w.epair + w.pbase[c] + <Py_ssize_t> t * na * nb
    if way == 0:
        return send_prob(g, w, c, t, SKIP_BELOW, M, g.pair[c] + <Py_ssize_t> t * na * nb, na, nb, False,
                         SLOT_ABOVE, c + 1, t)
    return send_prob(g, w, c + 1, t, SKIP_ABOVE, M, g.pair[c] + <Py_ssize_t> t * na * nb, na, nb, True,
                     SLOT_BELOW, c, t)


cdef inline double grid_spine_sum(const Grid* g, GridWork* w, int c) noexcept nogil:
    """grid_spine for sum-product, in probability: a scaled forward pass whose step before the
    token's own potential is the forward message, and a backward pass whose normalized beta is
    the backward message."""
    cdef ChainBuffers* b = &w.cb
    cdef int T = g.T, n = g.n[c], t, i
    cdef double change = 0.0, ch
    cdef const double* E = w.et + w.toff[c]
    cdef const double* ET = w.etT + w.toff[c]
    cdef double* qt
    cdef double* at
    cdef double* bt
    cdef double* r = w.scratch
    for t in range(T):
        qt = b.q + t * n
        if not grid_prob_cavity(g, w, c, t, SKIP_FWD | SKIP_BWD, qt):
            for i in range(n):
                qt[i] = 1.0
    # forward: alpha[t] = normalized(fwd message into t * q[t])
    for t in range(T):
        at = b.alpha + t * n
        qt = b.q + t * n
        if t == 0:
            for i in range(n):
                at[i] = qt[i]
        else:
            vec_mat_rect(b.alpha + (t - 1) * n, E, n, n, at)
            ch = set_prob_message(grid_prob(w, SLOT_FWD, c, t), at, n)
            change = ch if ch > change else change
            for i in range(n):
                at[i] *= qt[i]
        normalize_prob(at, n)
    # backward: beta[t-1] = normalized(E (q[t] * beta[t])), the backward message into t-1
    bt = b.beta + (T - 1) * n
    for i in range(n):
        bt[i] = 1.0
    for t in range(T - 1, 0, -1):
        qt = b.q + t * n
        bt = b.beta + t * n
        for i in range(n):
            r[i] = qt[i] * bt[i]
        bt = b.beta + (t - 1) * n
        vec_mat_rect(r, ET, n, n, bt)
        ch = set_prob_message(grid_prob(w, SLOT_BWD, c, t - 1), bt, n)
        change = ch if ch > change else change
    count_spine(w, c, T)
    return change


cdef inline void grid_log_messages(const Grid* g, GridWork* w) noexcept nogil:
    """The log messages of the sentence's variables from those in probability (after sum-product)."""
    cdef int k, c
    cdef Py_ssize_t o
    for k in range(4):
        for c in range(g.C):
            if (absent_chain_slots(g, c) >> k) & 1:
                continue        # no edge sends these: their logs keep the 0 grid_bp_run gave them
            o = k * w.N + w.vbase[c]
            log_array(w.msg + 4 * w.N + o, w.msg + o, g.T * g.n[c])


# Max-product runs in log space and takes no exp in its sweeps but to measure a change: a
# message is normalized to max 0, and its change is set_log_message's, the largest
# |exp(new) - exp(old)| of an entry, measured only while the sweep can still converge (no
# message of it has yet changed by more than the tolerance: GridWork.max_failed) and only for
# entries that moved by more than half the tolerance (below 0, exp is 1-Lipschitz: the others
# changed by less than tol, rounding included). The messages in probability are not kept. The
# products are max-plus ones (maxplus.h), vector over the output label: the same sums as
# chain.pxd's chain_max_scores and send_message, and max, which is exact, in another order.

cdef inline double set_max_message(GridWork* w, double* msg, const double* v, int n) noexcept nogil:
    """msg = v normalized to max 0 (all 0 when v is all -inf), as set_log_message with maxp, in
    one pass that measures the change and, while the spine passes are watched, whether a bit
    moved. Returns its change when the sweep had not failed and it exceeds w.max_tol (the
    sweep has then failed), else 0."""
    cdef int i
    cdef double m = max_of(v, n), d, a, o, ch = 0.0
    cdef bint none = m == -INFINITY
    cdef bint measure = not w.max_failed
    cdef bint watch = w.max_watch and not w.max_moved
    if not (measure or watch):
        # nothing to measure (the sweep has failed): a loop that vectorizes
        if none:
            memset(msg, 0, n * sizeof(double))
        else:
            for i in range(n):
                msg[i] = v[i] - m
        return 0.0
    for i in range(n):
        a = 0.0 if none else v[i] - m
        o = msg[i]
        if watch and memcmp(&a, &o, sizeof(double)) != 0:
            w.max_moved = True
            watch = False
        if measure and not (a == o or fabs(a - o) <= w.max_near):
            d = fabs(exp(a) - exp(o))
            if d > w.max_tol:
                w.max_failed = True
                ch = d
                measure = False
        msg[i] = a
    return ch


cdef inline bint kept_as(bint had, const double* x, double* kept, int n) noexcept nogil:
    """Whether x is, bit for bit, what kept holds (when it holds something: had); else x is
    copied there. The test of the max-product caches: work whose inputs are the bits of its
    last run gives the bits that run gave."""
    if had and memcmp(x, kept, n * sizeof(double)) == 0:
        return True
    memcpy(kept, x, n * sizeof(double))
    return False


cdef inline bint same_cavity(GridWork* w, int way, int c, int t, const double* cav, int n) noexcept nogil:
    """Whether variable (c, t)'s last cotemporal send this way (0 down, 1 up) in this message
    passing was from this cavity, bit for bit: its message would then be set to the bits it
    holds (the pair table is the passing's), a change of 0. Else keeps the cavity."""
    cdef unsigned char* flag = w.sent_kept + (way * w.C + c) * w.max_T + t
    cdef bint same = kept_as(flag[0], cav, w.sent_cav + way * w.N + w.vbase[c] + <Py_ssize_t> t * w.n[c], n)
    flag[0] = 1
    return same


cdef inline double grid_max_send(const Grid* g, GridWork* w, Py_ssize_t e, int way) noexcept nogil:
    """grid_send for max-product: the message from the sender's cavity maximized over the factor."""
    cdef int T = g.T, C = g.C, c, t, n, na, nb
    cdef Py_ssize_t nchain = <Py_ssize_t> C * (T - 1), k
    cdef double* cav = w.scratch
    cdef double* out = w.scratch + w.max_n
    cdef const double* logM
    if e < nchain:
        c = <int> (e // (T - 1))
        t = <int> (e % (T - 1)) + 1
        n = g.n[c]
        if way == 0:
            grid_cavity(g, w, c, t - 1, SKIP_BWD, cav)
            maxplus(cav, NULL, g.trans[c], n, n, out)
            return set_max_message(w, grid_msg(w, SLOT_FWD, c, t), out, n)
        grid_cavity(g, w, c, t, SKIP_FWD, cav)
        maxplus(cav, NULL, w.lT + w.toff[c], n, n, out)
        return set_max_message(w, grid_msg(w, SLOT_BWD, c, t - 1), out, n)
    k = e - nchain
    c = <int> (k // T)
    t = <int> (k % T)
    na = g.n[c]
    nb = g.n[c + 1]
    logM = g.pair[c] + <Py_ssize_t> t * na * nb
    if way == 0:
        grid_cavity(g, w, c, t, SKIP_BELOW, cav)
        if same_cavity(w, 0, c, t, cav, na):
            return 0.0
        maxplus(cav, NULL, logM, na, nb, out)
        return set_max_message(w, grid_msg(w, SLOT_ABOVE, c + 1, t), out, nb)
    grid_cavity(g, w, c + 1, t, SKIP_ABOVE, cav)
    if same_cavity(w, 1, c + 1, t, cav, nb):
        return 0.0
    # out[i] = max over j of cav[j] + logM[i, j], as a vector-matrix product on the table
    # transposed (grid_max_run's): each output's maximum of the same sums, in the same order
    maxplus(cav, NULL, w.epair + w.pbase[c] + <Py_ssize_t> t * na * nb, nb, na, out)
    return set_max_message(w, grid_msg(w, SLOT_BELOW, c, t), out, na)


cdef inline double grid_max_spine(const Grid* g, GridWork* w, int c) noexcept nogil:
    """grid_spine for max-product: chain_max_scores's passes, whose forward step's max before
    the token's own scores is the forward message and whose backward scores are the backward
    messages (up to shifts).

    Each chain keeps its last pass of the message passing (w.spine): its rows (node potential
    plus the messages from the other chains) and its forward and backward scores. The forward
    scores at t are a function of rows 0..t only, the backward ones at t - 1 of rows t..T-1
    only: where those rows are the last pass's bit for bit, so are the scores and the messages
    they set (a change of 0), and they are kept instead of computed again."""
    cdef int T = g.T, n = g.n[c], t, i, first, end
    cdef double change = 0.0, ch
    cdef const double* nd = g.node[c]
    cdef const double* up
    cdef const double* dn
    cdef double* s = w.spine + w.vbase[c]
    cdef double* fwd = w.spine + w.N + w.vbase[c]
    cdef double* bwd = w.spine + 2 * w.N + w.vbase[c]
    cdef double* acc = w.scratch
    cdef double* row
    cdef const double* nd_t
    cdef bint kept = w.spine_kept[c]
    w.max_watch = w.max_replay and c > 0
    # rows [first, end) hold every row that differs from the last pass's (all of them when
    # there is none); the row loops run through local pointers, which vectorize
    first = T if kept else 0
    end = 0 if kept else T
    for t in range(T):
        up = grid_msg(w, SLOT_ABOVE, c, t)
        dn = grid_msg(w, SLOT_BELOW, c, t)
        row = s + <Py_ssize_t> t * n
        nd_t = nd + <Py_ssize_t> t * n
        for i in range(n):
            acc[i] = nd_t[i] + up[i] + dn[i]
        if not kept_as(kept, acc, row, n):
            first = t if t < first else first
            end = t + 1
    if first == 0:
        for i in range(n):
            fwd[i] = s[i]
    if not kept:
        for i in range(n):
            bwd[(T - 1) * n + i] = 0.0
    for t in range(first if first > 1 else 1, T):
        maxplus(fwd + (t - 1) * n, NULL, g.trans[c], n, n, acc)
        row = fwd + <Py_ssize_t> t * n
        nd_t = s + <Py_ssize_t> t * n
        for i in range(n):
            row[i] = acc[i] + nd_t[i]
        ch = set_max_message(w, grid_msg(w, SLOT_FWD, c, t), acc, n)
        change = ch if ch > change else change
    for t in range(end - 1 if end < T else T - 1, 0, -1):
        maxplus(s + t * n, bwd + t * n, w.lT + w.toff[c], n, n, bwd + (t - 1) * n)
        ch = set_max_message(w, grid_msg(w, SLOT_BWD, c, t - 1), bwd + (t - 1) * n, n)
        change = ch if ch > change else change
    w.spine_kept[c] = True
    w.max_watch = False
    count_spine(w, c, T)
    return change


cdef inline double grid_send(const Grid* g, GridWork* w, Py_ssize_t e, int way, bint maxp) noexcept nogil:
    """Sends the message across edge e (numbered as in messages.pxd's docstring) one way:
    way 0 forward in time or down to chain c+1, way 1 back. Returns its largest change
    (grid_max_send, grid_send_sum)."""
    if w.visits != NULL:
        w.visits[2 * e + way] += 1
    if not maxp:
        return grid_send_sum(g, w, e, way)
    return grid_max_send(g, w, e, way)


cdef inline double grid_spine(const Grid* g, GridWork* w, int c, bint maxp) noexcept nogil:
    """Exact two-way pass along chain c, its variables' potentials including the messages from
    the other chains: sets chain c's forward and backward messages; returns their largest
    change (grid_max_spine, grid_spine_sum)."""
    if not maxp:
        return grid_spine_sum(g, w, c)
    return grid_max_spine(g, w, c)


cdef inline double grid_comb(const Grid* g, GridWork* w, int c, bint maxp) noexcept nogil:
    """One TRP step: exact two-way passes on the comb with spine c (grid_comb_edges). The teeth
    (the cotemporal paths) send their messages in to the spine, the spine runs the chain
    kernel, and the teeth get the messages back out. Returns the largest change.

    Teeth are sent in only by comb 0 of a message passing's first sweep: every other would send
    what the comb before it last sent on that edge, from the same messages, so it would leave
    the message as it is, a change of 0. Comb c-1 sends the cotemporal messages down from
    chains < c and up from chains > c-1, and then changes only chain c-1's chain messages and
    the cotemporal messages into chains whose cavities those senders do not read; the last comb
    sends every message up, and the sweep ends, before comb 0 of the next sweep sends them up
    again. (Tests that count the messages sent, w.visits, still get them all.)"""
    cdef int T = g.T, C = g.C, t, d
    cdef Py_ssize_t base = <Py_ssize_t> C * (T - 1)
    cdef double change = 0.0, ch
    cdef bint resend = w.visits != NULL or (c == 0 and not w.teeth_sent)
    for t in range(T if resend else 0):
        for d in range(c):
            ch = grid_send(g, w, base + <Py_ssize_t> d * T + t, 0, maxp)
            change = ch if ch > change else change
        for d in range(C - 1, c, -1):
            ch = grid_send(g, w, base + <Py_ssize_t> (d - 1) * T + t, 1, maxp)
            change = ch if ch > change else change
    ch = grid_spine(g, w, c, maxp)
    change = ch if ch > change else change
    for t in range(T):
        for d in range(c, 0, -1):
            ch = grid_send(g, w, base + <Py_ssize_t> (d - 1) * T + t, 1, maxp)
            change = ch if ch > change else change
        for d in range(c, C - 1):
            ch = grid_send(g, w, base + <Py_ssize_t> d * T + t, 0, maxp)
            change = ch if ch > change else change
    if c == C - 1:
        w.teeth_sent = True
    return change


cdef inline double grid_random_sweep(const Grid* g, GridWork* w, unsigned long long* rng,
                                     bint maxp) noexcept nogil:
    """Every edge in a fresh random order, all messages one way (forward, down) before any the
    other way. Returns the largest change."""
    cdef Py_ssize_t E = grid_edge_count(g.C, g.T), i, j
    cdef int way, tmp
    cdef double change = 0.0, ch
    for i in range(E):
        w.perm[i] = <int> i
    i = E - 1
    while i > 0:
        j = <Py_ssize_t> (grid_rng_next(rng) % <unsigned long long> (i + 1))
        tmp = w.perm[i]
        w.perm[i] = w.perm[j]
        w.perm[j] = tmp
        i -= 1
    for way in range(2):
        for i in range(E):
            ch = grid_send(g, w, w.perm[i], way, maxp)
            change = ch if ch > change else change
    return change


cdef inline void grid_max_sweep(const Grid* g, GridWork* w, int schedule, int combs,
                                unsigned long long* rng) noexcept nogil:
    """One max-product sweep (grid_bp_run's)."""
    cdef int c
    if schedule == GRID_TRP:
        for c in range(combs):
            grid_comb(g, w, c, True)
    else:
        grid_random_sweep(g, w, rng, True)


cdef inline void grid_max_state(const Grid* g, GridWork* w, bint save, bint* same) noexcept nogil:
    """The sentence's log messages (every slot, the whole state of a max-product sweep) copied
    to the probability slots, which max-product leaves unused (save), or compared bit for bit
    with the copy there (same)."""
    cdef int k, c
    cdef Py_ssize_t o, m
    same[0] = True
    for k in range(4):
        for c in range(g.C):
            o = k * w.N + w.vbase[c]
            m = <Py_ssize_t> g.T * g.n[c] * sizeof(double)
            if save:
                memcpy(w.msg + 4 * w.N + o, w.msg + o, m)
            elif memcmp(w.msg + 4 * w.N + o, w.msg + o, m) != 0:
                same[0] = False
                return


cdef enum:
    MAX_RING = 32            # grid_max_run: the sweeps back a repeat of the messages is looked for


cdef inline unsigned long long grid_max_hash(const Grid* g, GridWork* w) noexcept nogil:
    """A hash of the sentence's forward messages (FNV-1a over their bits, four streams): equal
    messages hash alike, so an equal hash proposes a repeat that grid_max_state then checks."""
    cdef unsigned long long h[4]
    cdef unsigned long long h0, h1, h2, h3
    cdef const unsigned long long* x
    cdef Py_ssize_t j, m
    cdef int c
    h[0] = h[1] = h[2] = h[3] = 14695981039346656037ULL
    for c in range(g.C):
        x = <const unsigned long long*> (w.msg + SLOT_FWD * w.N + w.vbase[c])
        m = <Py_ssize_t> g.T * g.n[c]
        # four interleaved streams, which do not wait on each other's multiplies (in registers:
        # h[j & 3] in a loop kept them in memory, each multiply waiting on a store)
        h0 = h[0]
        h1 = h[1]
        h2 = h[2]
        h3 = h[3]
        j = 0
        while j + 4 <= m:
            h0 = (h0 ^ x[j]) * 1099511628211ULL
            h1 = (h1 ^ x[j + 1]) * 1099511628211ULL
            h2 = (h2 ^ x[j + 2]) * 1099511628211ULL
            h3 = (h3 ^ x[j + 3]) * 1099511628211ULL
            j += 4
        h[0] = h0
        h[1] = h1
        h[2] = h2
        h[3] = h3
        while j < m:
            h[j & 3] = (h[j & 3] ^ x[j]) * 1099511628211ULL
            j += 1
    return ((h[0] * 31 + h[1]) * 31 + h[2]) * 31 + h[3]


cdef inline int grid_max_run(const Grid* g, GridWork* w, int schedule, double tol, int max_sweeps,
                             unsigned long long seed, int* converged) noexcept nogil:
    """grid_bp_run for max-product. A TRP sweep is a function of the messages before it only, so
    when they repeat bit for bit those of an earlier sweep, the sweeps since, none of which
    converged, repeat forever: the passing cannot converge, and its messages after max_sweeps
    sweeps are those the cycle reaches after the remaining ones modulo its length, which are
    run alone. A repeat is proposed by a hash equal to one of the last MAX_RING sweeps' (p
    sweeps back), and checked by saving the messages and comparing them p sweeps later.

    What a TRP sweep reads before it writes is chains 1..C-1's forward and backward messages
    only: the teeth into comb 0's spine read them (in the first sweep by sending; after it,
    the last comb of the sweep before has just sent those teeth from them: grid_comb), and
    every other message is sent before it is read. So when a sweep leaves those messages as
    they were, bit for bit, the next sweep would replay it: every message it sends is the one
    already there, a change of 0, and it converges. That sweep is counted, not run: the same
    messages, sweeps and convergence flag.

    Within the passing, the spines (w.spine) and the cotemporal sends (w.sent_cav) skip work whose
    inputs are the bits of their last run, which gives the bits already held; both are reset here,
    so nothing carries over from another sentence."""
    cdef int C = g.C, T = g.T, c, k, i, t, na, nb, sweeps = 0, check_at = 0, period = 0, extra
    cdef unsigned long long rng = seed, h
    cdef unsigned long long ring[MAX_RING]
    cdef bint tree = C == 1 or T == 1, same
    cdef bint detect = schedule == GRID_TRP and not tree and w.visits == NULL
    # a replayed sweep converges only where a change of 0 can (tol >= 0)
    cdef bint replay = detect and tol >= 0.0
    cdef int combs = 1 if tree else C
    for k in range(4):
        for c in range(C):
            memset(w.msg + k * w.N + w.vbase[c], 0, <Py_ssize_t> T * g.n[c] * sizeof(double))
    if g.ltransT != NULL:
        w.lT = g.ltransT
    else:
        grid_log_trans_T(C, g.n, g.trans, w.ltransT)
        w.lT = w.ltransT
    for c in range(C - 1):
        na = g.n[c]
        nb = g.n[c + 1]
        for t in range(T):
            transpose(g.pair[c] + <Py_ssize_t> t * na * nb, na, nb, w.epair + w.pbase[c] + <Py_ssize_t> t * na * nb)
    w.max_tol = tol
    w.max_near = 0.5 * tol if tol >= 1e-12 else 0.0
    w.max_replay = replay
    w.teeth_sent = False
    for c in range(C):
        w.spine_kept[c] = False
    memset(w.sent_kept, 0, <Py_ssize_t> 2 * w.C * w.max_T)
    converged[0] = 0
    while sweeps < max_sweeps:
        # grid_bp_run's test, change <= tol from a change of 0 (never when tol < 0 or NaN)
        w.max_failed = not (tol >= 0.0)
        w.max_moved = False
        grid_max_sweep(g, w, schedule, combs, &rng)
        sweeps += 1
        if not w.max_failed or (tree and schedule == GRID_TRP):
            converged[0] = 1
            break
        if not detect:
            continue
        if replay and not w.max_moved and sweeps < max_sweeps:
            sweeps += 1
            converged[0] = 1
            break
        if sweeps == check_at:
            check_at = 0
            grid_max_state(g, w, False, &same)
            if same:
                extra = (max_sweeps - sweeps) % period
                w.max_failed = True
                for i in range(extra):
                    grid_max_sweep(g, w, schedule, combs, &rng)
                sweeps = max_sweeps
                break
        h = grid_max_hash(g, w)
        if check_at == 0:
            for period in range(1, min(sweeps, MAX_RING + 1)):
                if ring[(sweeps - period) % MAX_RING] == h:
                    grid_max_state(g, w, True, &same)
                    check_at = sweeps + period
                    break
        ring[sweeps % MAX_RING] = h
    w.max_failed = False
    w.max_replay = False
    return sweeps


# Warm starts (sum-product TRP only). A TRP sweep runs comb 0 first: its teeth send every
# cotemporal message (in a passing's first sweep; after it, the last comb of the sweep before
# has sent them from the same messages) and its spine rewrites chain 0's forward and backward
# messages, all before anything reads them. What a sweep reads before writing is only the
# forward and backward messages of chains 1..C-1, so those (in probability, as float) are a sentence's
# whole state between two message passings on it: grid_warm_floats per token, chain c's
# forward then backward messages [T, n[c]] for c = 1..C-1, one sentence after another.
# Restored, the first sweep's comb 0 overwrites messages whose old values are not known: its
# changes are not counted, and the sweep converges when combs 1..C-1 change no message by
# more than tol. Every message is then within tol of its update from the current others:
# combs 1..C-1 compute theirs from the current ones, and the spine messages of comb 0 (and
# of every comb) were computed from cotemporal messages that the later combs resend and
# measure. A cold start measures more: the first sweep from uniform messages always
# changes them, so it never converges in fewer than 2 sweeps.

cdef inline int grid_warm_floats(int C, const int* n) noexcept nogil:
    """Floats of a warm-start state per token: 2 * (n[1] + ... + n[C-1])."""
    cdef int c, k = 0
    for c in range(1, C):
        k += 2 * n[c]
    return k


cdef inline void grid_warm_restore(const Grid* g, GridWork* w, const float* state) noexcept nogil:
    """Chains 1..C-1's forward and backward messages in probability from state."""
    cdef int c, slot
    cdef Py_ssize_t j, m, o = 0
    cdef double* dst
    for c in range(1, g.C):
        m = <Py_ssize_t> g.T * g.n[c]
        for slot in range(2):
            dst = grid_prob(w, SLOT_FWD + slot, c, 0)
            for j in range(m):
                dst[j] = state[o + j]
            o += m


cdef inline void grid_warm_save(const Grid* g, GridWork* w, float* state) noexcept nogil:
    """state = chains 1..C-1's forward and backward messages in probability, each entry at
    least 1e-37 (a float's normal range; an entry that small only ever starts a sweep, whose
    spine passes recompute it)."""
    cdef int c, slot
    cdef Py_ssize_t j, m, o = 0
    cdef const double* src
    cdef double x
    for c in range(1, g.C):
        m = <Py_ssize_t> g.T * g.n[c]
        for slot in range(2):
            src = grid_prob(w, SLOT_FWD + slot, c, 0)
            for j in range(m):
                x = src[j]
                state[o + j] = <float> (x if x > 1e-37 else 1e-37)
            o += m


cdef inline int grid_bp_run(const Grid* g, GridWork* w, int schedule, double tol, int max_sweeps,
                            unsigned long long seed, bint maxp, int* converged, float* warm=NULL,
                            bint restore=False) noexcept nogil:
    """Message passing from uniform messages until no message changes by more than tol (in
    probability, the messages normalized) or max_sweeps sweeps; returns the sweeps run. A TRP
    sweep runs the comb of every chain in turn, so every edge is updated each sweep; on a grid
    that is a tree (one chain, or one token) its one comb is exact and one sweep is enough.
    warm (sum-product TRP only, else ignored): the sentence's warm-start state
    (grid_warm_floats per token), which the messages start from when restore and which gets
    the messages of the last sweep."""
    cdef int C = g.C, T = g.T, c, t, i, sweeps = 0, combs
    cdef Py_ssize_t k, j
    cdef double change, ch
    cdef unsigned long long rng = seed
    cdef bint tree = C == 1 or T == 1
    if maxp:
        return grid_max_run(g, w, schedule, tol, max_sweeps, seed, converged)
    # the sentence's messages (t < T) start uniform: 0 in log, 1 in probability
    for i in range(4):
        for c in range(C):
            k = i * w.N + w.vbase[c]
            memset(w.msg + k, 0, <Py_ssize_t> T * g.n[c] * sizeof(double))
            for j in range(<Py_ssize_t> T * g.n[c]):
                w.msg[4 * w.N + k + j] = 1.0
    # sum-product from here on
    grid_exp_trans(g, w)
    for c in range(C):
        for t in range(T):
            exp_shifted_fast(g.node[c] + <Py_ssize_t> t * g.n[c], w.enode + w.vbase[c] + <Py_ssize_t> t * g.n[c],
                             g.n[c])
    for c in range(C - 1):
        k = <Py_ssize_t> g.n[c] * g.n[c + 1]
        for t in range(T):
            w.pshift[c * w.max_T + t] = exp_shifted_fast(g.pair[c] + t * k, w.epair + w.pbase[c] + t * k,
                                                         <int> k)
    if schedule != GRID_TRP:
        warm = NULL
    restore = restore and warm != NULL and not tree
    if restore:
        grid_warm_restore(g, w, warm)
    w.teeth_sent = False
    converged[0] = 0
    combs = 1 if tree else C
    while sweeps < max_sweeps:
        change = 0.0
        if schedule == GRID_TRP:
            for c in range(combs):
                ch = grid_comb(g, w, c, False)
                if not (restore and sweeps == 0 and c == 0):
                    change = max(change, ch)
        else:
            change = grid_random_sweep(g, w, &rng, False)
        sweeps += 1
        if change <= tol or (tree and schedule == GRID_TRP):
            converged[0] = 1
            break
    if warm != NULL:
        grid_warm_save(g, w, warm)
    grid_log_messages(g, w)
    return sweeps


cdef inline double grid_beliefs(const Grid* g, GridWork* w, const GridOut* out) noexcept nogil:
    """Beliefs from the current (sum-product) messages into out, and the Bethe approximation
    of log Z, which is exact on a tree:
    sum over edges of E_b[log psi - log b] + sum over variables of E_b[log phi] + (degree - 1) E_b[log b]."""
    cdef int C = g.C, T = g.T, c, t, i, na, nb, deg
    cdef double total = 0.0, mu, z, wi, lz
    cdef double* cu = w.scratch
    cdef double* cv = w.scratch + w.max_n
    cdef double* bu = w.scratch + 2 * w.max_n
    cdef double* tmp = w.scratch + 4 * w.max_n
    cdef double* esum = w.edge_tmp
    cdef double* dst
    cdef const double* M
    cdef const double* nd
    # variables
    for c in range(C):
        na = g.n[c]
        for t in range(T):
            grid_cavity(g, w, c, t, 0, cu)
            mu = -INFINITY
            for i in range(na):
                mu = cu[i] if cu[i] > mu else mu
            z = 0.0
            for i in range(na):
                bu[i] = cu[i] - mu
            exp_array(bu, bu, na)
            for i in range(na):
                z += bu[i]
            lz = mu + log(z)
            deg = (t > 0) + (t < T - 1) + (c > 0) + (c < C - 1)
            nd = g.node[c] + <Py_ssize_t> t * na
            dst = out.node[c] + <Py_ssize_t> t * na if out.node != NULL else NULL
            for i in range(na):
                wi = bu[i] / z
                if dst != NULL:
                    dst[i] = wi
                if wi > 0.0:
                    total += wi * (nd[i] + (deg - 1) * (cu[i] - lz))
    # chain edges: their beliefs summed over the tokens, M * (sum over t of the outer products
    # of the scaled cavities), multiplied by M once per chain; the sum is one product of the
    # cavities' columns (ucols, na x (T-1)) by their rows (vrows, (T-1) x na)
    for c in range(C):
        na = g.n[c]
        M = w.et + w.toff[c]
        for t in range(1, T):
            grid_cavity(g, w, c, t - 1, SKIP_BWD, cu)
            grid_cavity(g, w, c, t, SKIP_FWD, cv)
            total += edge_belief(cu, cv, M, g.trans[c], w.tsh[c], na, na, tmp,
                                 w.ucols + (t - 1), T - 1, w.vrows + <Py_ssize_t> (t - 1) * na,
                                 out.edge[c] if out.edge != NULL else NULL, True)
        if out.edge != NULL and T > 1:
            dst = out.edge[c]
            for i in range(na):
                vec_mat_rect(w.ucols + <Py_ssize_t> i * (T - 1), w.vrows, T - 1, na, esum + i * na)
            for i in range(na * na):
                dst[i] += M[i] * esum[i]
    # cotemporal edges: a belief per token
    for c in range(C - 1):
        na = g.n[c]
        nb = g.n[c + 1]
        for t in range(T):
            grid_cavity(g, w, c, t, SKIP_BELOW, cu)
            grid_cavity(g, w, c + 1, t, SKIP_ABOVE, cv)
            M = w.epair + w.pbase[c] + <Py_ssize_t> t * na * nb
            dst = out.pair[c] + <Py_ssize_t> t * na * nb if out.pair != NULL else NULL
            total += edge_belief(cu, cv, M, g.pair[c] + <Py_ssize_t> t * na * nb, w.pshift[c * w.max_T + t],
                                 na, nb, tmp, NULL, 0, NULL, dst, False)
    return total


cdef inline double edge_belief(double* cu, double* cv, const double* M, const double* logM, double shift,
                               int na, int nb, double* tmp, double* ucol, Py_ssize_t ustride, double* vrow,
                               double* dst, bint add) noexcept nogil:
    """One edge's belief b(a, b) = xu[a] M[a, b] xv[b] / z, xu = exp(cu - max cu), xv likewise
    (M = exp(logM - shift)): its term of the Bethe log Z, E_b[log psi - log b] =
    log z + shift - E_b[cu - max] - E_b[cv - max], returned; with ucol, xu[a] / z goes to
    ucol[a * ustride] and xv to vrow (the belief but for M, as two factors), else with dst,
    the belief is written there. When z underflows, the edge is redone in log space
    (edge_belief_log): its belief goes to dst, added to it with add (the chain edges' sums), and
    ucol, vrow get zeros. cu, cv: the cavities of its ends (shifted to max 0); tmp: 2 * na + 3 * nb
    doubles."""
    cdef int a, b
    cdef double mu = -INFINITY, mv = -INFINITY, z = 0.0, x, term, inv, eu = 0.0, ev = 0.0
    cdef double* xv = tmp
    cdef double* s = tmp + nb             # xu^T M
    cdef double* su = tmp + 2 * nb        # (xu * cu)^T M, over the labels xu does not zero
    cdef double* xu = tmp + 3 * nb
    cdef double* wu = tmp + 3 * nb + na   # xu * cu, 0 where xu is
    cdef const double* row
    cdef double* orow
    for a in range(na):
        mu = cu[a] if cu[a] > mu else mu
    for b in range(nb):
        mv = cv[b] if cv[b] > mv else mv
    for b in range(nb):
        cv[b] -= mv
    exp_array(cv, xv, nb)
    for a in range(na):
        cu[a] -= mu
    exp_array(cu, xu, na)
    for a in range(na):
        x = xu[a]
        wu[a] = x * cu[a] if x > 0.0 else 0.0
    vec_mat_rect(xu, M, na, nb, s)
    vec_mat_rect(wu, M, na, nb, su)
    for b in range(nb):
        z += s[b] * xv[b]
        eu += su[b] * xv[b]
    if not (z > 1e-280):
        if ucol != NULL:
            for a in range(na):
                ucol[a * ustride] = 0.0
            for b in range(nb):
                vrow[b] = 0.0
        return edge_belief_log(cu, cv, logM, na, nb, tmp, dst, add)
    inv = 1.0 / z
    # E_b[cu - max] = sum_ab xu cu M xv / z; E_b[cv - max] = sum_b (xu^T M)[b] xv[b] cv[b] / z
    for b in range(nb):
        x = s[b] * xv[b]
        if x > 0.0:
            ev += x * cv[b]
    term = log(z) + shift - (eu + ev) * inv
    if ucol != NULL:
        for a in range(na):
            ucol[a * ustride] = xu[a] * inv
        for b in range(nb):
            vrow[b] = xv[b]
    elif dst != NULL:
        # through row pointers: GCC does not vectorize dst[a * nb + b] (int index arithmetic)
        for a in range(na):
            x = xu[a] * inv
            orow = dst + a * nb
            row = M + a * nb
            for b in range(nb):
                orow[b] = x * row[b] * xv[b]
    return term


cdef inline double edge_belief_log(const double* cu, const double* cv, const double* logM, int na, int nb,
                                   double* tmp, double* dst, bint add) noexcept nogil:
    """edge_belief in log space, for an edge whose terms exp(cu + log M + cv) underflow: with
    cu, cv shifted to max 0, its Bethe term is m + log sum exp(cu + logM + cv - m), m the max.
    tmp: na + nb doubles."""
    cdef int a, b
    cdef double m = -INFINITY, z = 0.0, x, inv, term
    cdef double* bu = tmp
    cdef double* bv = tmp + na
    for a in range(na):
        for b in range(nb):
            x = cu[a] + logM[a * nb + b] + cv[b]
            m = x if x > m else m
    if m == -INFINITY:
        return -INFINITY
    for a in range(na):
        for b in range(nb):
            z += exp(cu[a] + logM[a * nb + b] + cv[b] - m)
    inv = 1.0 / z
    for a in range(na):
        bu[a] = 0.0
    for b in range(nb):
        bv[b] = 0.0
    for a in range(na):
        for b in range(nb):
            x = exp(cu[a] + logM[a * nb + b] + cv[b] - m) * inv
            bu[a] += x
            bv[b] += x
            if dst != NULL:
                if add:
                    dst[a * nb + b] += x
                else:
                    dst[a * nb + b] = x
    term = m + log(z)
    for a in range(na):
        if bu[a] > 0.0:
            term -= bu[a] * cu[a]
    for b in range(nb):
        if bv[b] > 0.0:
            term -= bv[b] * cv[b]
    return term


cdef inline double grid_bp(const Grid* g, GridWork* w, int schedule, double tol, int max_sweeps,
                           unsigned long long seed, const GridOut* out, int* sweeps,
                           int* converged, float* warm=NULL, bint restore=False) noexcept nogil:
    """Loopy sum-product (schedule GRID_TRP or GRID_RANDOM, the random order drawn from seed):
    beliefs into out as grid_exact's marginals, the sweeps run and whether it converged;
    returns the Bethe approximation of log Z. w: GRID_WANT_BP. warm, restore: a warm-start
    state (GRID_TRP; grid_bp_run)."""
    sweeps[0] = grid_bp_run(g, w, schedule, tol, max_sweeps, seed, False, converged, warm, restore)
    return grid_beliefs(g, w, out)


cdef inline double grid_bp_max(const Grid* g, GridWork* w, int schedule, double tol, int max_sweeps,
                               unsigned long long seed, int** labels, int* sweeps,
                               int* converged) noexcept nogil:
    """Loopy max-product with grid_bp's schedules, then decoding: token by token from the last,
    chain by chain from the first, each variable takes the first label maximizing its
    max-marginal belief with the messages of its already decoded neighbours (the next token,
    the chain above) replaced by their potentials at the decoded labels. On a tree (one chain,
    one token) that is an exact best labeling: on a chain, the one Viterbi (chain.pxd) finds.
    Returns the labeling's score."""
    cdef int C = g.C, T = g.T, c, t, i, n
    cdef double best, v
    cdef double* cav = w.scratch
    cdef const double* tr
    cdef const double* pr
    sweeps[0] = grid_bp_run(g, w, schedule, tol, max_sweeps, seed, True, converged)
    for t in range(T - 1, -1, -1):
        for c in range(C):
            n = g.n[c]
            grid_cavity(g, w, c, t, (SKIP_BWD if t < T - 1 else 0) | (SKIP_ABOVE if c > 0 else 0), cav)
            if c > 0:
                pr = g.pair[c - 1] + (<Py_ssize_t> t * g.n[c - 1] + labels[c - 1][t]) * n
                for i in range(n):
                    cav[i] += pr[i]
            if t < T - 1:
                tr = g.trans[c]
                for i in range(n):
                    cav[i] += tr[i * n + labels[c][t + 1]]
            labels[c][t] = argmax(cav, n, &best)
    return grid_labeling_score(g, labels)
