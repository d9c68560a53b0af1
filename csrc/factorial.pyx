# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Factorial CRF kernels (Sutton, Rohanimanesh & McCallum 2004, eq. 4): C label chains over the
same tokens, each with its own state features and transitions, adjacent chains coupled at
every token by a factor on their cotemporal label pair.

Per sentence, the potentials are built from features and weights (potentials.pxd) as the
tables of a factorial grid:

- ``node[c][t*n_c + i]``: chain c's log state potential (its state features, start and end);
- chain c's log transition matrix into t: the shared one, or one built where B lines with
  macros fire (``edge_scores``);
- ``pair[c][(t*n_c + a)*n_{c+1} + b]``: the pair factor between chain c and c+1 at t: the
  weights of the pair features (attribute, label pair) of the token's pair attributes. The
  pair space's first attribute fires at every token: its features are the plain pair factor.

Exact inference runs the product kernel (product.pxd) on the joint table
``s[t, y] = sum_c node[c][t, y_c] + sum_c pair[c][t, y_c, y_{c+1}]`` with the chains'
transitions applied one axis at a time (the factorized recursion). The marginals go back
onto the parameters with potentials.pxd's scatters (chains) and a pair scatter here.

The weight vector is the concatenation of the chains' layouts (features/layout.py) and the
pair spaces' feature weights; ``chain_offset[c]`` and ``pair_offset[c]`` say where each starts.
"""

import numpy as np
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memcpy, memset

from chain cimport ChainBuffers, chain_buffers_init, chain_buffers_release, exp_shifted
from sentences cimport Workspaces, workspaces_new, workspaces_free, run_sentences
from potentials cimport (Features, state_scores, state_scores_cached, has_edge_attributes, edge_scores, labeling_score,
                         scatter_edge, scatter_nodes, gather_tokens, scatter_token, dense_attributes)
from product cimport (Shape, shape_init, product_forward_backward, product_node_marginals,
                      product_edge_marginals, product_viterbi)
from messages cimport (Grid, GridOut, GridWork, grid_work_init, grid_work_release, grid_bp, grid_bp_max,
                       grid_warm_floats, grid_trans_doubles, grid_shared_trans, grid_log_trans_T, GRID_TRP,
                       GRID_RANDOM, GRID_WANT_BP)

cdef enum:
    MAX_CHAINS = 8
    EXACT = 0
    TRP = 1
    RANDOM_BP = 2

#: the inference methods by name, as crftk train --inference spells them
METHODS = {"exact": EXACT, "trp": TRP, "bp": RANDOM_BP}


cdef struct Model:
    int C
    Shape sh
    int n[MAX_CHAINS]
    Features chain[MAX_CHAINS]
    Features pair[MAX_CHAINS]
    Py_ssize_t chain_off[MAX_CHAINS]
    Py_ssize_t pair_off[MAX_CHAINS]
    const int* sent_ptr
    Py_ssize_t N
    int method                    # EXACT, TRP or RANDOM_BP
    double tol                    # message passing: convergence tolerance
    int max_sweeps


cdef struct Work:
    # one thread's workspace for sentences of up to max_T tokens
    double* node[MAX_CHAINS]      # T*n_c
    double* pair[MAX_CHAINS]      # T*n_c*n_{c+1}
    double* lmat[MAX_CHAINS]      # T*n_c^2 log matrices of tokens with edge attributes
    double* emat[MAX_CHAINS]      # T*n_c^2 their exponentials
    double* nmarg[MAX_CHAINS]     # T*n_c node marginals
    double* pmarg[MAX_CHAINS]     # T*n_c*n_{c+1} pair marginals
    ChainBuffers cb               # the product chain (joint labels; C matrices into each token)
    double* build                 # S
    double* emarg                 # max n_c^2
    const double** Tr             # T*C
    int* joint                    # T
    GridWork gw                   # message passing (TRP, BP)
    double* esum[MAX_CHAINS]      # n_c^2: chain-edge beliefs summed over the tokens
    int* lab[MAX_CHAINS]          # T: max-product labels
    Py_ssize_t sweeps             # sweeps run, over the sentences this thread did
    Py_ssize_t converged          # sentences whose messages converged


cdef int work_init(Work* b, const Model* m, int T) noexcept nogil:
    cdef int c, C = m.C, nn = 0
    cdef Py_ssize_t S = m.sh.S if m.method == EXACT else 1
    memset(b, 0, sizeof(Work))
    if T < 1:
        T = 1
    if m.method != EXACT:
        if grid_work_init(&b.gw, T, C, m.n, GRID_WANT_BP) != 0:
            return -1
        for c in range(C):
            b.esum[c] = <double*> malloc(m.n[c] * m.n[c] * sizeof(double))
            b.lab[c] = <int*> malloc(T * sizeof(int))
            if b.esum[c] == NULL or b.lab[c] == NULL:
                return -1
    for c in range(C):
        b.node[c] = <double*> malloc(T * m.n[c] * sizeof(double))
        b.lmat[c] = <double*> malloc(T * m.n[c] * m.n[c] * sizeof(double))
        b.emat[c] = <double*> malloc(T * m.n[c] * m.n[c] * sizeof(double))
        b.nmarg[c] = <double*> malloc(T * m.n[c] * sizeof(double))
        if c + 1 < C:
            b.pair[c] = <double*> malloc(T * m.n[c] * m.n[c + 1] * sizeof(double))
            b.pmarg[c] = <double*> malloc(T * m.n[c] * m.n[c + 1] * sizeof(double))
        if m.n[c] * m.n[c] > nn:
            nn = m.n[c] * m.n[c]
    if chain_buffers_init(&b.cb, T, <int> S, C, False, 0) != 0:
        return -1
    b.build = <double*> malloc(S * sizeof(double))
    b.emarg = <double*> malloc(nn * sizeof(double))
    b.Tr = <const double**> calloc(T * C, sizeof(double*))
    b.joint = <int*> malloc(T * sizeof(int))
    if b.build == NULL or b.emarg == NULL or b.Tr == NULL or b.joint == NULL:
        return -1
    for c in range(C):
        if b.node[c] == NULL or b.lmat[c] == NULL or b.emat[c] == NULL or b.nmarg[c] == NULL:
            return -1
        if c + 1 < C and (b.pair[c] == NULL or b.pmarg[c] == NULL):
            return -1
    return 0


cdef void work_free(Work* b) noexcept nogil:
    cdef int c
    if b.gw.max_T:
        grid_work_release(&b.gw)
    for c in range(MAX_CHAINS):
        free(b.esum[c])
        free(b.lab[c])
        free(b.node[c])
        free(b.pair[c])
        free(b.lmat[c])
        free(b.emat[c])
        free(b.nmarg[c])
        free(b.pmarg[c])
    chain_buffers_release(&b.cb)
    free(b.build)
    free(b.emarg)
    free(b.Tr)
    free(b.joint)


cdef struct WorkSpec:
    # a Grids kernel's workspaces: made for sentences of up to max_T tokens; released, they add
    # their counts of sweeps and converged sentences here
    const Model* m
    int max_T
    Py_ssize_t sweeps
    Py_ssize_t converged


cdef int work_spec_init(void* spec, void* work, int i) noexcept nogil:
    cdef const WorkSpec* ws = <const WorkSpec*> spec
    if work_init(<Work*> work, ws.m, ws.max_T) != 0:
        work_free(<Work*> work)
        return -1
    return 0


cdef void work_spec_release(void* spec, void* work) noexcept nogil:
    cdef WorkSpec* ws = <WorkSpec*> spec
    cdef Work* b = <Work*> work
    ws.sweeps += b.sweeps
    ws.converged += b.converged
    work_free(b)


cdef inline Workspaces grid_workspaces(WorkSpec* spec) noexcept nogil:
    return Workspaces(size=sizeof(Work), init=work_spec_init, release=work_spec_release, spec=spec)


cdef inline void pair_scores(const Features* d, const double* w, Py_ssize_t t0, int T,
                             double* p) noexcept nogil:
    """p[t*L + k]: the summed weights of the pair features (attribute, label pair k) of the
    token's pair attributes; no start or end weights (a pair factor has none)."""
    gather_tokens(d, w, t0, T, p, False)


cdef inline void scatter_pairs(const Features* d, Py_ssize_t t0, int T, const double* marg,
                               const int* ya, const int* yb, int nb, double* g) noexcept nogil:
    """g += expected - observed counts of the pair features, from pair marginals marg[t*L + k]
    and the observed pairs (ya[t], yb[t])."""
    cdef int t
    for t in range(T):
        scatter_token(d, t0 + t, marg + t * d.L, ya[t] * nb + yb[t], 1.0, g)


cdef void grid_tables(const Model* m, const double* w, Py_ssize_t t0, int T, Work* b,
                      const double** E_shared, const double* shift_shared, bint want_exp) noexcept nogil:
    """The sentence's node and pair tables, and each chain's matrices into every token: log
    (b.Tr) and, with want_exp, exponentiated with their shifts (b.cb.E, b.cb.shift)."""
    cdef int C = m.C, c, t, nn
    cdef const Features* d
    for c in range(C):
        d = &m.chain[c]
        nn = m.n[c] * m.n[c]
        # a chain of a few labels has feature tables (attributes x its labels) that stay in
        # cache, as the pair tables do: prefetching them only costs (3% of a TRP decoding with a
        # 3-label chain of 131k attributes, measured; the threshold is a speed choice only)
        if m.n[c] > 8:
            state_scores(d, w + m.chain_off[c], t0, T, b.node[c])
        else:
            state_scores_cached(d, w + m.chain_off[c], t0, T, b.node[c])
        if c + 1 < C:
            pair_scores(&m.pair[c], w + m.pair_off[c], t0, T, b.pair[c])
        for t in range(1, T):
            if edge_scores(d, w + m.chain_off[c], t0 + t, b.lmat[c] + t * nn):
                b.Tr[t * C + c] = b.lmat[c] + t * nn
                if want_exp:
                    b.cb.shift[t * C + c] = exp_shifted(b.lmat[c] + t * nn, b.emat[c] + t * nn, nn)
                    b.cb.E[t * C + c] = b.emat[c] + t * nn
            else:
                b.Tr[t * C + c] = w + m.chain_off[c] + d.off_trans
                if want_exp:
                    b.cb.E[t * C + c] = E_shared[c]
                    b.cb.shift[t * C + c] = shift_shared[c]


cdef void joint_state(const Model* m, int T, Work* b) noexcept nogil:
    """b.cb.s[t*S + y] = sum_c node[c][t, y_c] + sum_c pair[c][t, y_c, y_{c+1}] (chain 0 outermost)."""
    cdef int C = m.C, S = m.sh.S, t, c, a, j, na, nb
    cdef Py_ssize_t o, outer
    cdef double* cur
    cdef double* nxt
    cdef double* dst
    cdef const double* P
    cdef const double* nd
    for t in range(T):
        dst = b.cb.s + <Py_ssize_t> t * S
        cur = dst if C == 1 else b.build
        nd = b.node[0] + t * m.n[0]
        for j in range(m.n[0]):
            cur[j] = nd[j]
        outer = m.n[0]
        for c in range(1, C):
            na = m.n[c - 1]
            nb = m.n[c]
            nxt = dst if c == C - 1 else (b.cb.tmp if cur == b.build else b.build)
            P = b.pair[c - 1] + t * na * nb
            nd = b.node[c] + t * nb
            # cur is indexed [o] with o % na the label of chain c-1; the new axis is chain c
            for o in range(outer):
                a = <int> (o % na)
                for j in range(nb):
                    nxt[o * nb + j] = cur[o] + P[a * nb + j] + nd[j]
            outer *= nb
            cur = nxt


cdef inline int joint_label(const Model* m, const int* gold, Py_ssize_t tok) noexcept nogil:
    cdef int c, y = 0
    for c in range(m.C):
        y += gold[c * m.N + tok] * m.sh.stride[c]
    return y


cdef void split_marginals(const Model* m, int T, Work* b) noexcept nogil:
    """Per chain node marginals and per adjacent pair the pair marginals, from the joint node
    marginals in b.cb.alpha."""
    cdef int C = m.C, S = m.sh.S, t, c, y, yc, yn
    cdef double p
    cdef const double* mu
    for c in range(C):
        memset(b.nmarg[c], 0, T * m.n[c] * sizeof(double))
        if c + 1 < C:
            memset(b.pmarg[c], 0, T * m.n[c] * m.n[c + 1] * sizeof(double))
    for t in range(T):
        mu = b.cb.alpha + <Py_ssize_t> t * S
        for y in range(S):
            p = mu[y]
            yc = (y // m.sh.stride[0]) % m.n[0]
            for c in range(C):
                b.nmarg[c][t * m.n[c] + yc] += p
                if c + 1 < C:
                    yn = (y // m.sh.stride[c + 1]) % m.n[c + 1]
                    b.pmarg[c][(t * m.n[c] + yc) * m.n[c + 1] + yn] += p
                    yc = yn


cdef double gold_score(const Model* m, const double* w, Py_ssize_t t0, int T, Work* b,
                       const int* gold) noexcept nogil:
    """score(gold) of one sentence, from the tables grid_tables built."""
    cdef int c, t, nc
    cdef double score = 0.0
    for c in range(m.C):
        nc = m.n[c]
        score += labeling_score(&m.chain[c], w + m.chain_off[c], b.node[c], t0, T, gold + c * m.N + t0, 1.0)
        if c + 1 < m.C:
            for t in range(T):
                score += b.pair[c][(t * nc + gold[c * m.N + t0 + t]) * m.n[c + 1] + gold[(c + 1) * m.N + t0 + t]]
    return score


cdef void scatter_beliefs(const Model* m, Py_ssize_t t0, int T, Work* b, const int* gold,
                          double* g) noexcept nogil:
    """g += expected - observed counts of the state and pair features, from b.nmarg, b.pmarg."""
    cdef int c
    for c in range(m.C):
        scatter_nodes(&m.chain[c], t0, T, b.nmarg[c], gold + c * m.N + t0, g + m.chain_off[c], 1.0)
        if c + 1 < m.C:
            scatter_pairs(&m.pair[c], t0, T, b.pmarg[c], gold + c * m.N + t0, gold + (c + 1) * m.N + t0,
                          m.n[c + 1], g + m.pair_off[c])


cdef double gold_terms(const Model* m, const double* w, Py_ssize_t t0, int T, Work* b, const int* gold,
                       double* g) noexcept nogil:
    """score(gold) of one sentence; adds its state and pair features' expected (the beliefs in
    b.nmarg, b.pmarg) minus observed counts to g (each inference adds the transitions' own)."""
    scatter_beliefs(m, t0, T, b, gold, g)
    return gold_score(m, w, t0, T, b, gold)


cdef double exact_sentence(const Model* m, const double* w, Py_ssize_t t0, int T, Work* b,
                           const double** E_shared, const double* shift_shared, const int* gold,
                           double* g) noexcept nogil:
    """Exact inference on one sentence; returns log Z. With gold, returns log Z - score(gold)
    and adds expected - observed counts to g; the marginals are left in b.nmarg, b.pmarg."""
    cdef int C = m.C, S = m.sh.S, c, t, i, nc, prev, cur
    cdef double logz
    cdef const Features* d
    grid_tables(m, w, t0, T, b, E_shared, shift_shared, True)
    joint_state(m, T, b)
    logz = product_forward_backward(&m.sh, T, b.cb.s, b.cb.E, b.cb.shift, b.cb.q, b.cb.alpha, b.cb.beta,
                                    b.cb.scale, b.cb.tmp)
    if gold != NULL:
        for c in range(C):
            d = &m.chain[c]
            nc = m.n[c]
            for t in range(1, T):
                product_edge_marginals(&m.sh, c, b.cb.alpha + <Py_ssize_t> (t - 1) * S, b.cb.E + t * C,
                                       b.cb.q + <Py_ssize_t> t * S, b.cb.tmp, b.emarg)
                prev = gold[c * m.N + t0 + t - 1]
                cur = gold[c * m.N + t0 + t]
                if has_edge_attributes(d, t0 + t):
                    scatter_edge(d, t0 + t, b.emarg, prev, cur, g + m.chain_off[c], 1.0)
                else:
                    for i in range(nc * nc):
                        g[m.chain_off[c] + d.off_trans + i] += b.emarg[i]
                g[m.chain_off[c] + d.off_trans + prev * nc + cur] -= 1.0
    product_node_marginals(T, S, b.cb.alpha, b.cb.beta)
    split_marginals(m, T, b)
    if gold != NULL:
        logz -= gold_terms(m, w, t0, T, b, gold, g)
    return logz


cdef struct Job


# One sentence (s, its first token t0, its length T) of a Grids kernel, on thread tid's Work.
ctypedef void (*GridTask)(Job* job, const Model* m, Py_ssize_t s, Py_ssize_t t0, int T, Work* b,
                          int tid) noexcept nogil


cdef struct Job:
    # a Grids kernel's inputs and outputs, shared by its threads
    const Model* m
    GridTask task                 # the kernel's work on one sentence (see grid_task)
    const double* w
    const double* E[MAX_CHAINS]   # each chain's shared transition matrix, exponentiated
    const double* shift           # and its shift, per chain
    const int* gold               # loglik: gold labels [C, N]
    double* grad                  # loglik: one gradient of n_params per thread
    Py_ssize_t n_params
    double* out                   # loglik: a sum per thread; marginals: log Z, viterbi: score per sentence
    double* nodes[MAX_CHAINS]     # marginals: [N, n_c] per chain
    double* pairs[MAX_CHAINS]     # marginals: [N, n_c*n_{c+1}] per adjacent pair
    int* labels                   # viterbi: [C, N]
    float* warm                   # loglik with warm starts: the state, warm_k floats per token; or NULL
    Py_ssize_t warm_k
    bint restore                  # the state holds every sentence's messages of the last pass
    const double* etrans          # message passing: messages.pxd's grid_shared_trans of the weights, or NULL
    const double* etransT
    const double* tshift
    const double* ltransT         # max-product: the log transition matrices transposed (Grid.ltransT), or NULL


cdef inline void make_grid(const Model* m, const double* w, int T, Work* b, Grid* g, const double** node,
                           const double** trans, const double** pair, const Job* j=NULL) noexcept nogil:
    """The Grid (messages.pxd) of the tables grid_tables built; shared transition matrices only,
    exponentiated once per pass in j (else by every grid)."""
    cdef int c
    g.etrans = j.etrans if j != NULL else NULL
    g.etransT = j.etransT if j != NULL else NULL
    g.tshift = j.tshift if j != NULL else NULL
    g.ltransT = j.ltransT if j != NULL else NULL
    for c in range(m.C):
        node[c] = b.node[c]
        trans[c] = w + m.chain_off[c] + m.chain[c].off_trans
        pair[c] = b.pair[c]
    g.C = m.C
    g.T = T
    g.n = m.n
    g.node = node
    g.trans = trans
    g.pair = pair


cdef double bp_sentence(const Model* m, const double* w, Py_ssize_t s, Py_ssize_t t0, int T, Work* b,
                        const int* gold, double* g, float* warm=NULL, bint restore=False,
                        const Job* j=NULL) noexcept nogil:
    """Loopy sum-product on one sentence (TRP or random schedule); returns the Bethe log Z, or
    with gold, it minus score(gold), adding the beliefs' expected - observed counts to g; the
    beliefs are left in b.nmarg, b.pmarg. warm (TRP): the sentence's warm-start state
    (messages.pxd's grid_warm_floats per token), started from when restore, then updated."""
    cdef int C = m.C, c, t, i, nc, sweeps = 0, conv = 0
    cdef double logz
    cdef Grid grid
    cdef GridOut out
    cdef const double* node[MAX_CHAINS]
    cdef const double* trans[MAX_CHAINS]
    cdef const double* pair[MAX_CHAINS]
    cdef const Features* d
    grid_tables(m, w, t0, T, b, NULL, NULL, False)
    make_grid(m, w, T, b, &grid, node, trans, pair, j)
    for c in range(C):
        memset(b.esum[c], 0, m.n[c] * m.n[c] * sizeof(double))
    out.node = b.nmarg
    out.edge = b.esum
    out.pair = b.pmarg
    logz = grid_bp(&grid, &b.gw, GRID_TRP if m.method == TRP else GRID_RANDOM, m.tol, m.max_sweeps,
                   <unsigned long long> (s + 1), &out, &sweeps, &conv, warm, restore)
    b.sweeps += sweeps
    b.converged += conv
    if gold != NULL:
        for c in range(C):
            d = &m.chain[c]
            nc = m.n[c]
            for i in range(nc * nc):
                g[m.chain_off[c] + d.off_trans + i] += b.esum[c][i]
            for t in range(1, T):
                g[m.chain_off[c] + d.off_trans + gold[c * m.N + t0 + t - 1] * nc + gold[c * m.N + t0 + t]] -= 1.0
        logz -= gold_terms(m, w, t0, T, b, gold, g)
    return logz


cdef inline unsigned long long sentence_seed(const Features* d, Py_ssize_t t0, int T) noexcept nogil:
    """The random schedule's seed of a sentence in tagging, from what it holds (FNV-1a over its
    length and its tokens' attribute ids): the same wherever the sentence falls in a batch, a
    piece of a file or a cluster's task, so that a sentence whose messages do not converge
    decodes alike on every path."""
    cdef unsigned long long h = 14695981039346656037ULL
    cdef Py_ssize_t k
    h = (h ^ <unsigned long long> T) * 1099511628211ULL
    for k in range(d.attr_ptr[t0], d.attr_ptr[t0 + T]):
        h = (h ^ <unsigned long long> d.attrs[k]) * 1099511628211ULL
    return h


cdef double bp_max_sentence(const Model* m, const double* w, Py_ssize_t s, Py_ssize_t t0, int T,
                            Work* b, const Job* j) noexcept nogil:
    """Loopy max-product on one sentence; the labels into b.lab; returns their score."""
    cdef int sweeps = 0, conv = 0
    cdef double score
    cdef Grid grid
    cdef const double* node[MAX_CHAINS]
    cdef const double* trans[MAX_CHAINS]
    cdef const double* pair[MAX_CHAINS]
    grid_tables(m, w, t0, T, b, NULL, NULL, False)
    make_grid(m, w, T, b, &grid, node, trans, pair, j)
    # the seed draws a random schedule's edge order; TRP's is fixed
    score = grid_bp_max(&grid, &b.gw, GRID_TRP if m.method == TRP else GRID_RANDOM, m.tol, m.max_sweeps,
                        sentence_seed(&m.chain[0], t0, T) if m.method != TRP else 0, b.lab, &sweeps, &conv)
    b.sweeps += sweeps
    b.converged += conv
    return score


cdef inline double infer_sentence(const Model* m, const Job* j, Py_ssize_t s, Py_ssize_t t0, int T,
                                  Work* b, const int* gold, double* g, float* warm=NULL,
                                  bint restore=False) noexcept nogil:
    if m.method == EXACT:
        b.sweeps += 1
        b.converged += 1
        return exact_sentence(m, j.w, t0, T, b, j.E, j.shift, gold, g)
    return bp_sentence(m, j.w, s, t0, T, b, gold, g, warm, restore, j)


cdef void grid_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    """A Grids kernel's task for sentences.pxd's run_sentences: its job's task on sentence s."""
    cdef Job* j = <Job*> job
    cdef Py_ssize_t t0 = j.m.sent_ptr[s]
    j.task(j, j.m, s, t0, <int> (j.m.sent_ptr[s + 1] - t0), <Work*> work, tid)


cdef void loglik_task(Job* j, const Model* m, Py_ssize_t s, Py_ssize_t t0, int T, Work* b,
                      int tid) noexcept nogil:
    j.out[tid] += infer_sentence(m, j, s, t0, T, b, j.gold, j.grad + tid * j.n_params,
                                 j.warm + t0 * j.warm_k if j.warm != NULL else NULL, j.restore)


cdef void marginals_task(Job* j, const Model* m, Py_ssize_t s, Py_ssize_t t0, int T, Work* b,
                         int tid) noexcept nogil:
    cdef int c, nk
    cdef Py_ssize_t i
    j.out[s] = infer_sentence(m, j, s, t0, T, b, NULL, NULL)
    for c in range(m.C):
        nk = m.n[c]
        memcpy(j.nodes[c] + t0 * nk, b.nmarg[c], T * nk * sizeof(double))
        if c + 1 < m.C:
            nk = m.n[c] * m.n[c + 1]
            memcpy(j.pairs[c] + t0 * nk, b.pmarg[c], T * nk * sizeof(double))


cdef void viterbi_task(Job* j, const Model* m, Py_ssize_t s, Py_ssize_t t0, int T, Work* b,
                       int tid) noexcept nogil:
    cdef int c, t, y
    if m.method != EXACT:
        j.out[s] = bp_max_sentence(m, j.w, s, t0, T, b, j)
        for c in range(m.C):
            memcpy(j.labels + c * m.N + t0, b.lab[c], T * sizeof(int))
        return
    b.sweeps += 1
    b.converged += 1
    grid_tables(m, j.w, t0, T, b, NULL, NULL, False)
    joint_state(m, T, b)
    product_viterbi(&m.sh, T, b.cb.s, b.Tr, b.cb.alpha, b.cb.tmp, NULL, b.joint, &j.out[s])
    for t in range(T):
        y = b.joint[t]
        for c in range(m.C):
            j.labels[c * m.N + t0 + t] = (y // m.sh.stride[c]) % m.n[c]


cdef void fill_features(Features* d, arrays, int L, Py_ssize_t off_trans) except *:
    """A Features struct over (attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label, dense
    [, values]) arrays; dense (uint8, one per attribute) is filled here; values (float64, one per
    attribute occurrence) when the encoding has them."""
    cdef unsigned char[::1] dense = arrays[6]
    cdef const int[::1] attr_ptr = arrays[0]
    cdef const int[::1] attrs = arrays[1]
    cdef const int[::1] eattr_ptr = arrays[2]
    cdef const int[::1] eattrs = arrays[3]
    cdef const int[::1] feat_ptr = arrays[4]
    cdef const int[::1] feat_label = arrays[5]
    d.attr_ptr = &attr_ptr[0]
    d.attrs = &attrs[0] if attrs.shape[0] else NULL
    d.attrs24 = NULL
    d.eattr_ptr = &eattr_ptr[0]
    d.eattrs = &eattrs[0] if eattrs.shape[0] else NULL
    d.feat_ptr = &feat_ptr[0]
    d.feat_label = &feat_label[0] if feat_label.shape[0] else NULL
    d.dense = &dense[0] if dense.shape[0] else NULL
    cdef const double[::1] values
    d.values = NULL
    if len(arrays) > 7:
        values = arrays[7]
        d.values = &values[0] if values.shape[0] else NULL
    if dense.shape[0]:
        dense_attributes(d.feat_ptr, d.feat_label, dense.shape[0], L, &dense[0])
    d.L = L
    d.has_edges = 1 if eattrs.shape[0] > 0 else 0
    d.off_trans = off_trans
    d.off_start = off_trans + <Py_ssize_t> L * L
    d.off_end = d.off_start + L
    d.off_edge = d.off_end + L


def _check_csr(name, ptr, ids, n_tokens, n_ids):
    ptr = np.asarray(ptr)
    ids = np.asarray(ids)
    if ptr.shape != (n_tokens + 1,) or ptr[0] != 0 or ptr[ptr.size - 1] != ids.size or (np.diff(ptr) < 0).any():
        raise ValueError(f"{name}: the pointers do not span the tokens")
    if ids.size and (ids.min() < 0 or ids.max() >= n_ids):
        raise ValueError(f"{name}: an id is out of range")


cdef class Grids:
    """The factorial grids of an encoded corpus (one encoding per chain and per pair space)."""

    cdef Model m
    cdef WorkSpec spec
    cdef readonly int n_chains, n_sentences, max_len, n_states
    cdef readonly Py_ssize_t n_tokens, n_params
    cdef object keep
    cdef readonly object sizes
    #: of the last pass: (sentences whose messages converged, mean sweeps per sentence)
    cdef public object last_stats
    #: warm starts (trp): floats of state per token; the state (float32 [tokens * warm_floats],
    #: None until the first loglik); whether it holds the messages of a whole loglik pass
    cdef readonly bint warm_start
    cdef readonly int warm_floats
    cdef object warm_state
    cdef bint warm_valid

    def __init__(self, sent_ptr, chains, pairs, Py_ssize_t n_params, method="exact", double tolerance=1e-3,
                 int max_sweeps=100, bint warm_start=False, values=None):
        """chains[c]: (attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label, n_labels,
        n_edge_attrs, offset); pairs[c] (between chain c and c+1): (attr_ptr, attrs, feat_ptr,
        feat_label, offset), its labels the pairs a * n_{c+1} + b. All int32, contiguous.
        method: exact, trp or bp (message passing: tolerance, max_sweeps; shared transition
        matrices only, no B lines with macros). warm_start (trp only): loglik keeps each
        sentence's messages (chains 1..C-1's forward and backward ones, float32) and starts the
        next loglik's message passing from them (messages.pxd, grid_warm_floats). values: None
        (every encoding binary) or one entry per chain, then per pair space: None or the real
        value of each of its attribute occurrences (float64 aligned with its attrs)."""
        from crftk._lattice import occurrence_values
        cdef int C = len(chains), c
        cdef int n[MAX_CHAINS]
        if not 1 <= C <= MAX_CHAINS:
            raise ValueError(f"a factorial CRF has 1 to {MAX_CHAINS} chains")
        if len(pairs) != C - 1:
            raise ValueError("one pair space per adjacent pair of chains")
        if values is None:
            values = [None] * (2 * C - 1)
        if len(values) != 2 * C - 1:
            raise ValueError("values: one entry per chain and per pair space")
        sp = np.ascontiguousarray(sent_ptr, dtype=np.int32)
        N = int(sp[sp.size - 1]) if sp.size else 0
        if sp.size < 1 or sp[0] != 0 or (np.diff(sp) < 1).any():
            raise ValueError("sent_ptr must start at 0 and hold no empty sentence")
        keep = [sp]
        self.m.C = C
        self.m.N = N
        self.m.sent_ptr = <const int*> (<Py_ssize_t> sp.ctypes.data)
        sizes = []
        total = 0
        for c, ch in enumerate(chains):
            attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label, L, E, off = ch
            arrays = [np.ascontiguousarray(a, dtype=np.int32) for a in
                      (attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label)]
            F = arrays[5].size
            _check_csr(f"chain {c} attributes", arrays[0], arrays[1], N, arrays[4].size - 1)
            _check_csr(f"chain {c} edge attributes", arrays[2], arrays[3], N, E)
            _check_csr(f"chain {c} features", arrays[4], arrays[5], arrays[4].size - 1, L)
            if off != total:
                raise ValueError("chain offsets must follow each other")
            total += F + L * L + 2 * L + E * L * L
            arrays.append(np.zeros(arrays[4].size - 1, dtype=np.uint8))
            if values[c] is not None:
                arrays.append(occurrence_values(values[c], arrays[1].size, f"chain {c} values"))
            keep.extend(arrays)
            fill_features(&self.m.chain[c], arrays, L, F)
            self.m.chain_off[c] = off
            n[c] = L
            self.m.n[c] = L
            sizes.append(L)
        for c, pr in enumerate(pairs):
            attr_ptr, attrs, feat_ptr, feat_label, off = pr
            arrays = [np.ascontiguousarray(a, dtype=np.int32) for a in
                      (attr_ptr, attrs, np.zeros(N + 1, np.int32), np.zeros(0, np.int32), feat_ptr, feat_label)]
            L = n[c] * n[c + 1]
            _check_csr(f"pair {c} attributes", arrays[0], arrays[1], N, arrays[4].size - 1)
            _check_csr(f"pair {c} features", arrays[4], arrays[5], arrays[4].size - 1, L)
            if off != total:
                raise ValueError("pair offsets must follow the chains'")
            total += arrays[5].size
            arrays.append(np.zeros(arrays[4].size - 1, dtype=np.uint8))
            if values[C + c] is not None:
                arrays.append(occurrence_values(values[C + c], arrays[1].size, f"pair {c} values"))
            keep.extend(arrays)
            fill_features(&self.m.pair[c], arrays, L, 0)
            self.m.pair_off[c] = off
        if total != n_params:
            raise ValueError(f"the parts hold {total} parameters, not {n_params}")
        if shape_init(&self.m.sh, C, n) != 0:
            raise ValueError("bad label counts")
        if method not in METHODS:
            raise ValueError(f"unknown inference method {method!r}")
        self.m.method = METHODS[method]
        if self.m.method != EXACT:
            if any(ch[7] for ch in chains):
                raise ValueError("message passing needs shared transition matrices (no B lines with macros)")
            if not (tolerance > 0 and max_sweeps >= 1):
                raise ValueError("tolerance must be > 0 and max_sweeps >= 1")
        self.m.tol = tolerance
        self.m.max_sweeps = max_sweeps
        if warm_start and self.m.method != TRP:
            raise ValueError("warm starts are for trp inference only")
        self.warm_start = warm_start
        self.warm_floats = grid_warm_floats(C, n) if warm_start else 0
        self.warm_state = None
        self.warm_valid = False
        self.keep = keep
        self.sizes = tuple(sizes)
        self.n_chains = C
        self.n_states = self.m.sh.S
        self.n_tokens = N
        self.n_params = n_params
        self.n_sentences = sp.size - 1
        self.max_len = int(np.diff(sp).max()) if sp.size > 1 else 0

    cdef Workspaces _workspaces(self):
        """Work for this corpus's sentences, its counts zeroed (released, each Work adds its own)."""
        self.spec.m = &self.m
        self.spec.max_T = self.max_len
        self.spec.sweeps = 0
        self.spec.converged = 0
        return grid_workspaces(&self.spec)

    cdef str _oom(self):
        return f"factorial inference: {self.max_len} tokens x {self.n_states} joint labels"

    cdef void _count(self):
        """last_stats from the counts of the workspaces released since _workspaces."""
        self.last_stats = (self.spec.converged,
                           <double> self.spec.sweeps / self.n_sentences if self.n_sentences else 0.0)

    def _shared(self, const double[::1] w):
        """Each chain's shared transition matrix exponentiated, and its shift."""
        mats, shifts = [], np.zeros(self.n_chains)
        for c in range(self.n_chains):
            L = self.m.n[c]
            o = self.m.chain_off[c] + self.m.chain[c].off_trans
            t = np.asarray(w[o:o + L * L])
            shifts[c] = t.max()
            mats.append(np.ascontiguousarray(np.exp(t - shifts[c])))
        return mats, shifts

    def _check(self, w, labels=None):
        if w.shape[0] != self.n_params:
            raise ValueError(f"weight vector has {w.shape[0]} entries, expected {self.n_params}")
        if labels is not None:
            lab = np.asarray(labels)
            if lab.shape != (self.n_chains, self.n_tokens):
                raise ValueError("labels must be [chains, tokens]")
            for c in range(self.n_chains):
                if lab[c].size and (lab[c].min() < 0 or lab[c].max() >= self.m.n[c]):
                    raise ValueError("label out of range")

    cdef int _run(self, int n_threads, GridTask task, Job* job) except -1:
        """task(job, ...) for every sentence over n_threads threads, each with its own Work."""
        cdef Workspaces ws = self._workspaces()
        job.m = &self.m
        job.task = task
        run_sentences(self.n_sentences, n_threads, 4, &ws, self._oom(), grid_task, job)
        self._count()
        return 0

    cdef object _job(self, const double[::1] w, Job* job, bint want_exp=True):
        """Points job at the weights and, with want_exp, each chain's shared transition matrix,
        exponentiated (Viterbi reads the log matrices only); returns what must stay alive while
        the job runs."""
        cdef double[::1] v
        cdef const double* trans[MAX_CHAINS]
        cdef Py_ssize_t sq
        memset(job, 0, sizeof(Job))
        job.w = &w[0]
        if not want_exp:
            return None
        if self.m.method != EXACT:
            # message passing: every grid's transition tables, made once
            for c in range(self.n_chains):
                trans[c] = &w[0] + self.m.chain_off[c] + self.m.chain[c].off_trans
            sq = grid_trans_doubles(self.m.C, self.m.n)
            tables = np.empty(2 * sq + self.n_chains)
            v = tables
            grid_shared_trans(self.m.C, self.m.n, trans, &v[0], &v[sq], &v[2 * sq])
            job.etrans = &v[0]
            job.etransT = &v[sq]
            job.tshift = &v[2 * sq]
            return tables
        mats, shifts = self._shared(w)
        for c in range(self.n_chains):
            v = mats[c]
            job.E[c] = &v[0]
        v = shifts
        job.shift = &v[0]
        return mats, shifts

    def loglik(self, const double[::1] w, labels, int n_threads=1):
        """(sum over sentences of log Z - score(gold), its gradient) with exact inference.
        labels: int32 [chains, tokens]. With warm_start, message passing starts from the
        messages of the previous call (from uniform ones at the first call, or after
        warm_reset) and leaves its own for the next."""
        self._check(w, labels)
        n_threads = max(1, n_threads)
        cdef Job job
        keep = self._job(w, &job)
        gold_np = np.ascontiguousarray(labels, dtype=np.int32)
        cdef const int[:, ::1] gold = gold_np
        gbuf_np = np.zeros((n_threads, self.n_params), dtype=np.float64)
        cdef double[:, ::1] gbuf = gbuf_np
        totals_np = np.zeros(n_threads)
        cdef double[::1] totals = totals_np
        job.gold = &gold[0, 0] if self.n_tokens else NULL
        job.grad = &gbuf[0, 0]
        job.n_params = self.n_params
        job.out = &totals[0]
        cdef float[::1] state
        if self.warm_start and self.warm_floats and self.n_tokens:
            if self.warm_state is None:
                self.warm_state = np.empty(self.n_tokens * self.warm_floats, dtype=np.float32)
            state = self.warm_state
            job.warm = &state[0]
            job.warm_k = self.warm_floats
            job.restore = self.warm_valid
            self.warm_valid = False
        self._run(n_threads, loglik_task, &job)
        if job.warm != NULL:
            self.warm_valid = True
        grad = gbuf_np.sum(axis=0) if n_threads > 1 else gbuf_np[0]
        return float(totals_np.sum()), grad

    def warm_reset(self):
        """Forget the warm-start state: the next loglik starts from uniform messages."""
        self.warm_valid = False

    @property
    def warm_bytes(self):
        """Bytes the warm-start state takes (allocated at the first loglik)."""
        return self.n_tokens * self.warm_floats * 4

    def marginals(self, const double[::1] w, int n_threads=1):
        """Exact marginals: ([node marginals [N, n_c] per chain], [pair marginals [N, n_c, n_{c+1}]
        per adjacent pair], log Z per sentence)."""
        self._check(w)
        n_threads = max(1, n_threads)
        cdef Job job
        keep = self._job(w, &job)
        C = self.n_chains
        nodes = [np.zeros((self.n_tokens, self.m.n[c])) for c in range(C)]
        pairs = [np.zeros((self.n_tokens, self.m.n[c] * self.m.n[c + 1])) for c in range(C - 1)]
        logz_np = np.zeros(self.n_sentences)
        cdef double[::1] logz = logz_np
        cdef double[:, ::1] mv
        if self.n_tokens:
            for c in range(C):
                mv = nodes[c]
                job.nodes[c] = &mv[0, 0]
                if c + 1 < C:
                    mv = pairs[c]
                    job.pairs[c] = &mv[0, 0]
            job.out = &logz[0]
        self._run(n_threads, marginals_task, &job)
        pairs = [p.reshape(self.n_tokens, self.m.n[c], self.m.n[c + 1]) for c, p in enumerate(pairs)]
        return nodes, pairs, logz_np

    def viterbi(self, const double[::1] w, int n_threads=1):
        """The best joint labeling: (labels int32 [chains, tokens], score per sentence)."""
        self._check(w)
        n_threads = max(1, n_threads)
        cdef Job job
        self._job(w, &job, False)
        cdef double[::1] lt
        cdef const double* trans[MAX_CHAINS]
        if self.m.method != EXACT:
            # every grid's transposed log transitions, made once (max-product's backward steps)
            for c in range(self.n_chains):
                trans[c] = &w[0] + self.m.chain_off[c] + self.m.chain[c].off_trans
            shared = np.empty(grid_trans_doubles(self.m.C, self.m.n))
            lt = shared
            grid_log_trans_T(self.m.C, self.m.n, trans, &lt[0])
            job.ltransT = &lt[0]
        out_np = np.zeros((self.n_chains, self.n_tokens), dtype=np.int32)
        score_np = np.zeros(self.n_sentences)
        cdef int[:, ::1] out = out_np
        cdef double[::1] score = score_np
        if self.n_tokens:
            job.labels = &out[0, 0]
            job.out = &score[0]
        self._run(n_threads, viterbi_task, &job)
        return out_np, score_np

    def tables(self, const double[::1] w, Py_ssize_t sentence):
        """One sentence's grid tables, for tests and for other inference: ([node [T, n_c]],
        [log transition [T, n_c, n_c] (row 0 unused)], [pair [T, n_c, n_{c+1}]])."""
        self._check(w)
        if not 0 <= sentence < self.n_sentences:
            raise IndexError("sentence out of range")
        cdef Py_ssize_t t0 = self.m.sent_ptr[sentence]
        cdef int T = <int> (self.m.sent_ptr[sentence + 1] - t0)
        cdef Workspaces ws = self._workspaces()
        cdef Work* pool = <Work*> workspaces_new(&ws, 1, self._oom())
        C = self.n_chains
        cdef int c, t, i, n
        try:
            grid_tables(&self.m, &w[0], t0, T, pool, NULL, NULL, False)
            node, trans, pair = [], [], []
            for c in range(C):
                n = self.m.n[c]
                node.append(np.array(<double[:T * n]> pool.node[c]).reshape(T, n))
                tr = np.zeros((T, n, n))
                for t in range(1, T):
                    for i in range(n * n):
                        tr[t, i // n, i % n] = pool.Tr[t * C + c][i]
                trans.append(tr)
                if c + 1 < C:
                    pair.append(np.array(<double[:T * n * self.m.n[c + 1]]> pool.pair[c]).reshape(
                        T, n, self.m.n[c + 1]))
        finally:
            workspaces_free(&ws, <char*> pool, 1)
            self._count()
        return node, trans, pair
