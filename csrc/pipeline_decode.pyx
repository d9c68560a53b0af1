# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The kernels of a pipeline's K-best and normalized decoding (crftk._pipeline).

- :func:`nbest`: the K best labelings of a chain CRF over an encoded corpus, the same lists
  (labels, scores, order) as crftk._lattice's n-best, with the lists that cannot reach a
  position's K best left out of its merge (see ``pruned_nbest``);
- :func:`fed_options`: a downstream stage given one upstream hypothesis per sentence: its
  state potentials are the sum, in the corpus's order, of each token's attributes, of which
  those before the first line that reads the fed column are the same for every hypothesis
  (``prefix``, summed once per batch) and the rest (``rows``: the rank of each later line's
  attribute, -1 for none) differ; then its Viterbi labeling or K best, and its log Z. The sums
  and passes are those of crftk._lattice's kernels, in the same order, so the scores are the
  same bits as the stage's own Viterbi, n-best and marginals on the hypothesis's encoding.
"""

import numpy as np

from crftk._lattice import check_chain_arrays
from chain cimport (ChainBuffers, run_chains, chain_viterbi, exp_shifted, scaled_start, scaled_step, vec_mat,
                   transpose, _best_head)
from product cimport Shape, shape_init, product_viterbi, product_forward_backward
from potentials cimport Features, state_scores, gather_attribute, log_transitions, exp_transitions
from maxplus cimport maxplus
from libc.math cimport INFINITY
from libc.string cimport memset, memcpy


cdef inline int pruned_nbest(int T, int L, int K, const double* s, const double** Tr,
                             double* sc, int* py, int* pk, int* cnt, int* ptr, int* keep,
                             double* heads, int* out, Py_ssize_t out_stride, double* out_score) noexcept nogil:
    """chain.pxd's chain_nbest (the same lists in the same order), merging at each (t, j) only the
    lists that can reach its K best: when the list of the best head holds K entries, its K-th
    (plus its transition) bounds the K-th best from below, and a list whose head is below that
    bound has no entry among the K best. The kept lists are merged in label order with the same
    choice (highest, then lowest label), so ties break as in chain_nbest. keep: [2L] and heads:
    [2L] scratch."""
    cdef int t, i, j, r, bi, n, m, top_i, q, n_prev
    cdef int* prev_ids = keep + L
    cdef double* nxt = heads + L
    cdef double best, v, top, bound
    cdef Py_ssize_t base, pbase
    cdef const double* Tt
    cdef const double* psc
    cdef const int* pcnt
    for j in range(L):
        sc[j * K] = s[j]
        cnt[j] = 1 if cnt[j] else 0
    for t in range(1, T):
        Tt = Tr[t]
        psc = sc + (<Py_ssize_t> t - 1) * L * K
        pcnt = cnt + (t - 1) * L
        n_prev = 0
        for i in range(L):
            if pcnt[i] > 0:
                prev_ids[n_prev] = i
                n_prev += 1
        for j in range(L):
            if cnt[t * L + j] == 0:
                continue
            base = (<Py_ssize_t> t * L + j) * K
            top_i = -1
            top = -INFINITY
            for q in range(n_prev):
                i = prev_ids[q]
                v = psc[<Py_ssize_t> i * K]
                v += Tt[i * L + j]
                heads[q] = v
                if top_i < 0 or v > top:
                    top, top_i = v, i
            bound = -INFINITY
            if top_i >= 0 and pcnt[top_i] >= K:
                bound = psc[<Py_ssize_t> top_i * K + K - 1]
                bound += Tt[top_i * L + j]
            m = 0
            for q in range(n_prev):
                if not (heads[q] < bound):
                    keep[m] = prev_ids[q]
                    nxt[m] = heads[q]
                    ptr[m] = 0
                    m += 1
            # nxt[q]: the next unused entry of kept list q plus its transition, the same sum as
            # chain_nbest's, made once per entry instead of once per scan
            n = 0
            while n < K:
                bi = -1
                best = -INFINITY
                for q in range(m):
                    if ptr[q] < pcnt[keep[q]]:
                        v = nxt[q]
                        if bi < 0 or v > best:
                            best = v
                            bi = q
                if bi < 0:
                    break
                i = keep[bi]
                sc[base + n] = best + s[t * L + j]
                py[base + n] = i
                pk[base + n] = ptr[bi]
                ptr[bi] += 1
                n += 1
                if ptr[bi] < pcnt[i]:
                    v = psc[<Py_ssize_t> i * K + ptr[bi]]
                    v += Tt[i * L + j]
                    nxt[bi] = v
            cnt[t * L + j] = n
    # merge the final lists (chain_nbest's choice of head) and follow each labeling back
    memset(ptr, 0, L * sizeof(int))
    n = 0
    bi = _best_head(sc + (<Py_ssize_t> T - 1) * L * K, cnt + (T - 1) * L, ptr, L, K, NULL, 0, &best)
    while n < K and bi >= 0:
        out_score[n] = best
        j, r = bi, ptr[bi]
        ptr[bi] += 1
        t = T - 1
        while True:
            out[n * out_stride + t] = j
            if t == 0:
                break
            pbase = (<Py_ssize_t> t * L + j) * K + r
            j, r = py[pbase], pk[pbase]
            t -= 1
        n += 1
        bi = _best_head(sc + (<Py_ssize_t> T - 1) * L * K, cnt + (T - 1) * L, ptr, L, K, NULL, 0, &best)
    return n


cdef inline double kth_largest(double* x, int n, int k) noexcept nogil:
    """The k-th largest of x[0:n] (1 <= k <= n), reordering x (quickselect)."""
    cdef int lo = 0, hi = n - 1, i, j, want = k - 1
    cdef double pivot, tmp
    while lo < hi:
        pivot = x[(lo + hi) >> 1]
        i, j = lo, hi
        while i <= j:
            while x[i] > pivot:
                i += 1
            while x[j] < pivot:
                j -= 1
            if i <= j:
                tmp = x[i]
                x[i] = x[j]
                x[j] = tmp
                i += 1
                j -= 1
        if want <= j:
            hi = j
        elif want >= i:
            lo = i
        else:
            break
    return x[want]


cdef inline void max_scores(int T, int L, const double* s, const double** Tr, const double* shared,
                            const double* sharedT, double* matT, double* fwd, double* bwd) noexcept nogil:
    """chain.pxd's chain_max_scores (the same sums; max is exact, so the same values but for the
    sign of a zero) through maxplus.h's vector products: a forward step reads Tr[t] by rows, a
    backward step the transpose: sharedT [L*L] for the shared matrix, else Tr[t] transposed into
    matT [L*L] (positions with edge attributes)."""
    cdef int t, j
    cdef const double* M
    for j in range(L):
        fwd[j] = s[j]
        bwd[(T - 1) * L + j] = 0.0
    for t in range(1, T):
        maxplus(fwd + (t - 1) * L, NULL, Tr[t], L, L, fwd + t * L)
        for j in range(L):
            fwd[t * L + j] += s[t * L + j]
    for t in range(T - 1, 0, -1):
        M = sharedT
        if Tr[t] != shared:
            transpose(Tr[t], L, matT)
            M = matT
        maxplus(s + t * L, bwd + t * L, M, L, L, bwd + (t - 1) * L)


cdef inline void prune_states(int T, int L, int K, const double* s, const double** Tr, const double* shared,
                              const double* sharedT, double* matT, double* fwd, double* bwd, double* scratch,
                              int* cnt) noexcept nogil:
    """cnt[t*L+j] = 0 (no list) where no labeling through label j at t can be among the K best, else
    -1: the best labeling through (t, j) (max-product messages) scores below a lower bound of the
    K-th best, the K-th best over j of those at some t (K distinct labelings). A margin far above
    the rounding of the two ways of summing a score keeps every state that could tie; the lists
    of the kept states are then the lists of chain_nbest without the labelings through removed
    states, none of which is among the K best, in the same order."""
    cdef int t, j
    cdef double bound = -INFINITY, b, v
    cdef Py_ssize_t TL = <Py_ssize_t> T * L
    if K > L:
        for j in range(TL):
            cnt[j] = -1
        return
    max_scores(T, L, s, Tr, shared, sharedT, matT, fwd, bwd)
    for j in range(TL):
        fwd[j] += bwd[j]
    for t in range(T):
        memcpy(scratch, fwd + t * L, L * sizeof(double))
        b = kth_largest(scratch, L, K)
        if b > bound:
            bound = b
    bound -= 1e-6 * (1.0 + (bound if bound > 0 else -bound))
    for j in range(TL):
        v = fwd[j]
        cnt[j] = 0 if v < bound else -1


cdef struct Kept:
    # hypothesis 0's passes over a batch (one labeling per sentence), token by token, from which a
    # later hypothesis resumes at the first token whose state potentials differ from them
    double* state                # [N*L] state potentials (fed_options)
    double* delta                # [N*L] Viterbi scores
    double* alpha                # [N*L] scaled forward scores (with log Z)
    double* logz                 # [N] log Z of the positions up to each token
    int* path                    # [N] Viterbi labeling
    double* score                # [S] its score
    double* total                # [S] log Z
    const unsigned char* changed # [N] NULL: store hypothesis 0's passes; else resume from them,
                                 # recomputing the tokens marked (and every one after the first)


cdef inline int first_changed(const Kept* k, Py_ssize_t t0, int T) noexcept nogil:
    """The first position of the sentence at t0 marked changed; 0 when storing (no resumption)."""
    cdef int t
    if k == NULL or k.changed == NULL:
        return 0
    for t in range(T):
        if k.changed[t0 + t]:
            return t
    return T


cdef inline void resumed_viterbi(const Kept* k, Py_ssize_t t0, int T, int L, int t1, double* s,
                                 const double** E, double* delta, int* bp, double* saved, int* out,
                                 double* score) noexcept nogil:
    """chain_viterbi of the sentence at t0 (state potentials s), from position t1 - 1 on when t1 >= 2
    (resuming): hypothesis 0's Viterbi scores there stand in for the state row (the scores of
    positions >= t1 are then the same sums as a full pass) and the labels before it are traced
    back through hypothesis 0's scores (the first best predecessor, as chain_viterbi's back
    pointers). Storing (k.changed NULL), the scores, labeling and score go to k."""
    cdef int t, i, j, bi
    cdef double v, best
    cdef const double* prev
    if t1 < 2:
        chain_viterbi(T, L, s, E, delta, bp, out, score)
        if k != NULL and k.changed == NULL:
            memcpy(k.delta + t0 * L, delta, <Py_ssize_t> T * L * sizeof(double))
            memcpy(k.path + t0, out, T * sizeof(int))
        return
    memcpy(saved, s + (t1 - 1) * L, L * sizeof(double))
    memcpy(s + (t1 - 1) * L, k.delta + (t0 + t1 - 1) * L, L * sizeof(double))
    chain_viterbi(T - t1 + 1, L, s + (t1 - 1) * L, E + t1 - 1, delta + (t1 - 1) * L, bp + (t1 - 1) * L,
                  out + t1 - 1, score)
    memcpy(s + (t1 - 1) * L, saved, L * sizeof(double))
    for t in range(t1 - 1, 0, -1):
        j = out[t]
        prev = k.delta + (t0 + t - 1) * L
        best = -INFINITY
        bi = 0
        for i in range(L):
            v = prev[i] + E[t][i * L + j]
            if v > best:
                best, bi = v, i
        out[t - 1] = bi


cdef inline double forward_log_z(const Kept* k, Py_ssize_t t0, int T, int L, int t1, const double* s,
                                 const double** E, const double* shift, double* q, double* alpha,
                                 double* scale) noexcept nogil:
    """log Z of the sentence at t0 by chain_sum_product's forward sweep (its backward sweep only
    makes marginals), the same sums in the same order, which are also those of
    product_forward_backward on one chain; resumed after position t1 - 1 from hypothesis 0's
    forward scores and partial log Z when t1 >= 1, stored into k when storing. q: [L] scratch."""
    cdef int t = t1
    cdef double logz, m
    cdef bint store = k != NULL and k.changed == NULL
    if t1 < 1:
        logz = scaled_start(s, alpha, scale, L)
        t = 1
        if store:
            memcpy(k.alpha + t0 * L, alpha, L * sizeof(double))
            k.logz[t0] = logz
    else:
        memcpy(alpha + (t1 - 1) * L, k.alpha + (t0 + t1 - 1) * L, L * sizeof(double))
        logz = k.logz[t0 + t1 - 1]
    while t < T:
        logz += shift[t]
        m = exp_shifted(s + t * L, q, L)
        logz += m
        vec_mat(alpha + (t - 1) * L, E[t], L, alpha + t * L)
        logz += scaled_step(alpha + t * L, q, alpha + t * L, scale + t, L)
        if store:
            memcpy(k.alpha + (t0 + t) * L, alpha + t * L, L * sizeof(double))
            k.logz[t0 + t] = logz
        t += 1
    return logz


cdef inline bint kept_outputs(const Kept* k, Py_ssize_t s, Py_ssize_t t0, int T, int t1, int* out,
                              double* score, double* logz) noexcept nogil:
    """Hypothesis 0's outputs when no position of the sentence changed (t1 == T): True."""
    if k == NULL or k.changed == NULL or t1 < T:
        return False
    memcpy(out, k.path + t0, T * sizeof(int))
    score[0] = k.score[s]
    logz[0] = k.total[s]
    return True


cdef struct Job:
    const Features* d            # the stage's feature map and layout (and edge attributes)
    const long* sent_ptr         # [S + 1]
    const double* w              # its weights
    # fed_options: the shared part of each token's state potentials [N, L], and per later line
    # its attribute offset and the rank of its attribute at each token [lines, N] (-1: none)
    const double* prefix
    const long* line_offset
    const int* rows
    int n_lines
    const int* active            # [S] 1: decode the sentence (it has this hypothesis)
    const double* E_shared       # exp(transitions - shift), NULL: no log Z
    double shift
    int K                        # 1: Viterbi; more: the K best
    const double* transT         # K > 1: the shared transition matrix transposed [L*L]
    Py_ssize_t N
    int* paths                   # [K, N]
    double* score                # [S, K]
    int* counts                  # [S]
    double* logz                 # [S]
    Kept* kept                   # K = 1: hypothesis 0's passes (NULL: none)


cdef inline void decode_tables(const Job* p, Py_ssize_t s, Py_ssize_t t0, int T, int t1,
                               ChainBuffers* b) noexcept nogil:
    """From b.s (the sentence's state potentials): its Viterbi labeling or K best, and log Z (K = 1
    with p.kept: resumed from position t1, see Kept)."""
    cdef int L = p.d.L
    p.counts[s] = 1
    if p.K == 1 and kept_outputs(p.kept, s, t0, T, t1, p.paths + t0, p.score + s, p.logz + s):
        return
    log_transitions(p.d, p.w, t0, T, b.ebuf, b.E)
    if p.K == 1:
        resumed_viterbi(p.kept, t0, T, L, t1, b.s, b.E, b.alpha, b.bp, b.tmp, p.paths + t0, p.score + s)
    else:
        prune_states(T, L, p.K, b.s, b.E, p.w + p.d.off_trans, p.transT, b.mat, b.alpha, b.beta, b.q,
                     b.cnt)
        p.counts[s] = pruned_nbest(T, L, p.K, b.s, b.E, b.sc, b.py, b.pk, b.cnt, b.ptr, b.bp, b.tmp,
                                   p.paths + t0, p.N, p.score + s * p.K)
    if p.E_shared != NULL:
        exp_transitions(p.d, p.w, 1.0, t0, T, p.E_shared, p.shift, b.mat, b.ebuf, b.E, b.shift)
        p.logz[s] = forward_log_z(p.kept if p.K == 1 else NULL, t0, T, L, t1, b.s, b.E, b.shift, b.q, b.alpha,
                                  b.scale)
    if p.K == 1 and p.kept != NULL and p.kept.changed == NULL:
        p.kept.score[s] = p.score[s]
        p.kept.total[s] = p.logz[s]


cdef void corpus_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Job* p = <const Job*> job
    cdef Py_ssize_t t0 = p.sent_ptr[s]
    cdef int T = <int> (p.sent_ptr[s + 1] - t0)
    state_scores(p.d, p.w, t0, T, b.s)
    decode_tables(p, s, t0, T, 0, b)


cdef void fed_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Job* p = <const Job*> job
    cdef Py_ssize_t t0 = p.sent_ptr[s], tok
    cdef int T = <int> (p.sent_ptr[s + 1] - t0), L = p.d.L, t, l, r, y, t1
    cdef double* row
    cdef const Kept* k = p.kept if p.K == 1 else NULL
    if not p.active[s]:
        return
    t1 = first_changed(k, t0, T)
    if t1 == T:
        decode_tables(p, s, t0, T, t1, b)
        return
    # state_scores' sums: the attributes in order (the prefix holds the first ones), then the
    # start and end weights; a resumed hypothesis copies hypothesis 0's rows where they are the same
    for t in range(max(t1 - 1, 0), T):         # resumed: the rows before t1 - 1 are not read
        tok = t0 + t
        row = b.s + t * L
        if k != NULL and k.changed != NULL and not k.changed[tok]:
            memcpy(row, k.state + tok * L, L * sizeof(double))
            continue
        memcpy(row, p.prefix + tok * L, L * sizeof(double))
        for l in range(p.n_lines):
            r = p.rows[<Py_ssize_t> l * p.N + tok]
            if r >= 0:
                gather_attribute(p.d, p.w, <int> (p.line_offset[l] + r), row)
        if t == 0:
            for y in range(L):
                row[y] += p.w[p.d.off_start + y]
        if t == T - 1:
            for y in range(L):
                row[y] += p.w[p.d.off_end + y]
    if k != NULL and k.changed == NULL:
        memcpy(k.state + t0 * L, b.s, <Py_ssize_t> T * L * sizeof(double))
    decode_tables(p, s, t0, T, t1, b)


cdef inline const int* head(const int[::1] a):
    """The first entry of an array as potentials.pxd reads it (NULL when empty)."""
    return &a[0] if a.shape[0] else NULL


cdef class Passes:
    """Hypothesis 0's passes over a batch for the later hypotheses of a k = 1 stage to resume from
    (fed_options, table_options): the first call given it (``changed`` None) stores them, later
    calls pass ``changed`` [N] (uint8): the tokens whose state potentials may differ from
    hypothesis 0's (a marked token's row is recomputed, the others copied; each sentence's passes
    resume at its first marked token, and a sentence with none takes hypothesis 0's outputs)."""

    cdef Kept k
    cdef Py_ssize_t n_tokens, n_sentences
    cdef int n_labels
    cdef bint stored, with_logz
    cdef object arrays
    cdef const unsigned char[::1] changed

    def __init__(self, Py_ssize_t n_tokens, Py_ssize_t n_sentences, int n_labels):
        self.n_tokens, self.n_sentences, self.n_labels = n_tokens, n_sentences, n_labels
        cells = max(1, n_tokens * n_labels)
        self.arrays = [np.zeros(cells), np.zeros(cells), np.zeros(cells), np.zeros(max(1, n_tokens)),
                       np.zeros(max(1, n_tokens), dtype=np.int32), np.zeros(max(1, n_sentences)),
                       np.zeros(max(1, n_sentences))]
        cdef double[::1] state = self.arrays[0], delta = self.arrays[1], alpha = self.arrays[2]
        cdef double[::1] logz = self.arrays[3], score = self.arrays[5], total = self.arrays[6]
        cdef int[::1] path = self.arrays[4]
        self.k.state, self.k.delta, self.k.alpha, self.k.logz = &state[0], &delta[0], &alpha[0], &logz[0]
        self.k.path, self.k.score, self.k.total = &path[0], &score[0], &total[0]

    cdef Kept* bind(self, changed, Py_ssize_t n_tokens, Py_ssize_t n_sentences, int n_labels,
                    bint logz) except NULL:
        """The Kept of one call (checked against the batch); stores when changed is None."""
        if (n_tokens, n_sentences, n_labels) != (self.n_tokens, self.n_sentences, self.n_labels):
            raise ValueError("the passes were made for another batch or stage")
        if changed is None:
            self.stored, self.with_logz = True, logz
            self.k.changed = NULL
            return &self.k
        if not self.stored or logz and not self.with_logz:
            raise ValueError("no passes stored to resume from (with log Z when asked for)")
        self.changed = np.ascontiguousarray(changed, dtype=np.uint8)
        if self.changed.shape[0] != n_tokens:
            raise ValueError("changed must have one entry per token")
        self.k.changed = &self.changed[0] if n_tokens else NULL
        return &self.k


cdef class Stage:
    """A chain stage's weights and feature map, and the edge attributes of a batch."""

    cdef Features d
    cdef readonly int n_labels
    cdef const double[::1] w
    cdef const int[::1] feat_ptr, feat_label, attr_ptr, attrs, eattr_ptr, eattrs
    cdef const long[::1] sent_ptr
    cdef const double[::1] values
    cdef Py_ssize_t n_tokens, n_sentences
    cdef int max_len

    def __init__(self, const double[::1] w, const int[::1] feat_ptr, const int[::1] feat_label, int n_labels,
                 int n_edge_attrs, offsets, sent_ptr, const int[::1] attr_ptr, const int[::1] attrs,
                 const int[::1] eattr_ptr, const int[::1] eattrs, values=None):
        sp32 = np.ascontiguousarray(sent_ptr, dtype=np.int32)
        lengths, offs = check_chain_arrays(sp32, attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label,
                                           n_labels, n_edge_attrs, offsets)
        if w.shape[0] != offs[4]:
            raise ValueError(f"weight vector has {w.shape[0]} entries, expected {offs[4]}")
        self.w = w
        self.feat_ptr, self.feat_label = feat_ptr, feat_label
        self.attr_ptr, self.attrs, self.eattr_ptr, self.eattrs = attr_ptr, attrs, eattr_ptr, eattrs
        self.sent_ptr = np.ascontiguousarray(sent_ptr, dtype=np.int64)
        self.n_sentences = self.sent_ptr.shape[0] - 1
        self.n_tokens = attr_ptr.shape[0] - 1
        self.max_len = int(lengths.max()) if lengths.size else 0
        self.n_labels = n_labels
        memset(&self.d, 0, sizeof(Features))
        cdef Features* d = &self.d
        d.attr_ptr, d.attrs, d.eattr_ptr, d.eattrs = head(attr_ptr), head(attrs), head(eattr_ptr), head(eattrs)
        d.attrs24 = NULL
        d.feat_ptr, d.feat_label, d.L = head(feat_ptr), head(feat_label), n_labels
        d.has_edges = 1 if eattrs.shape[0] > 0 else 0
        d.off_trans, d.off_start, d.off_end, d.off_edge = offs[0], offs[1], offs[2], offs[3]
        if values is not None:
            self.values = np.ascontiguousarray(values, dtype=np.float64)
            if self.values.shape[0] != attrs.shape[0]:
                raise ValueError("values must have one entry per attribute occurrence")
            if self.values.shape[0]:
                self.d.values = &self.values[0]

    cdef object _run(self, Job* p, int K, bint logz, int n_threads, bint fed):
        cdef int S = <int> self.n_sentences
        paths_np = np.full((K, self.n_tokens), -1, dtype=np.int32)
        score_np = np.full((S, K), -np.inf)
        counts_np = np.zeros(S, dtype=np.int32)
        logz_np = np.zeros(S)
        E_np = np.empty(self.n_labels * self.n_labels)
        L = self.n_labels
        transT_np = np.ascontiguousarray(np.asarray(self.w)[self.d.off_trans:self.d.off_trans + L * L]
                                         .reshape(L, L).T).ravel()
        cdef const double[::1] transT = transT_np
        cdef int[:, ::1] paths = paths_np
        cdef double[:, ::1] score = score_np
        cdef int[::1] counts = counts_np
        cdef double[::1] lz = logz_np, E = E_np
        if K < 1:
            raise ValueError("k must be at least 1")
        if S == 0:
            return paths_np, score_np, counts_np, logz_np
        p.d = &self.d
        p.sent_ptr = &self.sent_ptr[0]
        p.w = &self.w[0]
        p.K, p.N = K, self.n_tokens
        p.transT = &transT[0]
        p.paths, p.score, p.counts, p.logz = &paths[0, 0], &score[0, 0], &counts[0], &lz[0]
        if logz:
            p.E_shared = &E[0]
            p.shift = exp_shifted(p.w + self.d.off_trans, &E[0], self.n_labels * self.n_labels)
        run_chains(S, max(1, n_threads), 4, self.max_len, self.n_labels, 1, self.d.has_edges or logz,
                   K if K > 1 else 0, fed_task if fed else corpus_task, p)
        return paths_np, score_np, counts_np, logz_np

    def nbest(self, int k, int n_threads=1):
        """The k best labelings of every sentence from its own attributes: (paths [k, N], scores
        [S, k], counts [S]), as crftk._lattice.Lattices.nbest gives them."""
        cdef Job p
        memset(&p, 0, sizeof(Job))
        paths, score, counts, _ = self._run(&p, k, False, n_threads, False)
        return paths, score, counts

    def fed_options(self, const double[:, ::1] prefix, const long[::1] line_offset, const int[:, ::1] rows,
                    const int[::1] active, int k, bint logz, int n_threads=1, Passes passes=None, changed=None):
        """Each active sentence's Viterbi labeling (k = 1) or k best, and with ``logz`` its log Z,
        from state potentials ``prefix`` [N, L] plus, line by line, the attribute of rank
        ``rows[l, t]`` of the line at ``line_offset[l]``: (paths [k, N], scores [S, k], counts
        [S], log Z [S]); inactive sentences are left out (count 0). k = 1 with ``passes``: stored
        into or resumed from them (see Passes), the same outputs."""
        cdef Py_ssize_t N = self.n_tokens
        if prefix.shape[0] != N or prefix.shape[1] != self.n_labels:
            raise ValueError("prefix must be [tokens, labels]")
        if rows.shape[0] != line_offset.shape[0] or (rows.shape[0] and rows.shape[1] != N):
            raise ValueError("rows must be [lines, tokens]")
        if active.shape[0] != self.n_sentences:
            raise ValueError("active must have one entry per sentence")
        n_attrs = self.feat_ptr.shape[0] - 1
        for l in range(rows.shape[0]):
            r = np.asarray(rows[l])
            if r.size and (r.max() + line_offset[l] >= n_attrs or (r >= 0).any() and line_offset[l] < 0):
                raise ValueError("an attribute rank is out of range")
        cdef Job p
        memset(&p, 0, sizeof(Job))
        cdef int dummy = -1
        p.prefix = &prefix[0, 0] if N else NULL
        p.line_offset = &line_offset[0] if line_offset.shape[0] else NULL
        p.rows = &rows[0, 0] if rows.shape[0] and N else &dummy
        p.n_lines = <int> rows.shape[0]
        p.active = &active[0] if active.shape[0] else NULL
        if passes is not None and k == 1:
            p.kept = passes.bind(changed, N, self.n_sentences, self.n_labels, logz)
        return self._run(&p, k, logz, n_threads, True)


def prefix_scores(const double[::1] w, const int[::1] feat_ptr, const int[::1] feat_label, int n_labels,
                  const long[::1] line_offset, const int[:, ::1] rows, Py_ssize_t n_tokens):
    """[N, L]: per token, the summed weights of the attributes of the given lines (rank rows[l, t]
    of the line at line_offset[l], -1: none), in line order: the start of state_scores' sums."""
    cdef Py_ssize_t N = n_tokens, t
    if rows.shape[0] != line_offset.shape[0] or (rows.shape[0] and rows.shape[1] != N):
        raise ValueError("rows must be [lines, tokens]")
    cdef int l, r, L = n_labels
    cdef Features d
    memset(&d, 0, sizeof(Features))
    d.feat_ptr = &feat_ptr[0]
    d.feat_label = &feat_label[0] if feat_label.shape[0] else NULL
    d.L = L
    n_attrs = feat_ptr.shape[0] - 1
    for l in range(rows.shape[0]):
        a = np.asarray(rows[l])
        if a.size and a.max() + line_offset[l] >= n_attrs:
            raise ValueError("an attribute rank is out of range")
    if feat_label.shape[0] and (np.asarray(feat_label).max() >= L or np.asarray(feat_label).min() < 0):
        raise ValueError("feature label out of range")
    out_np = np.zeros((N, L))
    cdef double[:, ::1] out = out_np
    with nogil:
        for t in range(N):
            for l in range(rows.shape[0]):
                r = rows[l, t]
                if r >= 0:
                    gather_attribute(&d, &w[0], <int> (line_offset[l] + r), &out[t, 0])
    return out_np


cdef struct TableJob:
    # a stage read through its state table for every fed label (crftk.structures.joint.FedLink)
    Shape shape                  # one chain of L labels
    const long* sent_ptr
    const double* table          # [N, V, L]
    int V
    const int* fed               # [N] the fed label of each token
    const int* active            # [S]
    const double* trans          # [rows, L*L] log transitions (rows 1: every position)
    const double* etrans         # [rows, L*L] exp(trans - shift), NULL: no log Z
    const double* shifts         # [rows]
    Py_ssize_t trans_rows
    int* paths                   # [N]
    double* score                # [S]
    double* logz                 # [S]
    Kept* kept                   # hypothesis 0's passes (NULL: none; with them, chain.pxd's passes)


cdef void table_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    """crftk._product's viterbi and forward_backward (log Z) of one chain on the rows of the
    table that the sentence's fed labels pick; with p.kept, chain.pxd's Viterbi and forward sweep
    (on one chain, the same sums and choices), resumed from hypothesis 0's (see Kept)."""
    cdef const TableJob* p = <const TableJob*> job
    cdef Py_ssize_t t0 = p.sent_ptr[s], row
    cdef int T = <int> (p.sent_ptr[s + 1] - t0), L = p.shape.S, t, t1
    cdef Py_ssize_t LL = <Py_ssize_t> L * L
    cdef const Kept* k = p.kept
    if not p.active[s]:
        return
    t1 = first_changed(k, t0, T)
    if kept_outputs(k, s, t0, T, t1, p.paths + t0, p.score + s, p.logz + s):
        return
    for t in range(max(t1 - 1, 0), T):
        memcpy(b.s + t * L, p.table + ((t0 + t) * p.V + p.fed[t0 + t]) * L, L * sizeof(double))
    for t in range(1, T):
        row = 0 if p.trans_rows == 1 else t0 + t
        b.E[t] = p.trans + row * LL
    if k != NULL:
        resumed_viterbi(k, t0, T, L, t1, b.s, b.E, b.alpha, b.bp, b.tmp, p.paths + t0, p.score + s)
    else:
        product_viterbi(&p.shape, T, b.s, b.E, b.alpha, b.tmp, b.bp, p.paths + t0, p.score + s)
    if p.etrans != NULL:
        for t in range(1, T):
            row = 0 if p.trans_rows == 1 else t0 + t
            b.E[t] = p.etrans + row * LL
            b.shift[t] = p.shifts[row]
        if k != NULL:
            p.logz[s] = forward_log_z(k, t0, T, L, t1, b.s, b.E, b.shift, b.q, b.alpha, b.scale)
        else:
            p.logz[s] = product_forward_backward(&p.shape, T, b.s, b.E, b.shift, b.q, b.alpha, b.beta, b.scale,
                                                 b.tmp)
    if k != NULL and k.changed == NULL:
        k.score[s] = p.score[s]
        k.total[s] = p.logz[s]


def table_options(sent_ptr, const double[:, :, ::1] table, const int[::1] fed, const int[::1] active,
                  const double[:, ::1] trans, const double[:, ::1] etrans=None, const double[::1] shifts=None,
                  int n_threads=1, Passes passes=None, changed=None):
    """Each active sentence's best labeling and score, and with ``etrans`` its log Z, when each token
    takes the row of ``table`` [N, V, L] its fed label picks: crftk._product's viterbi and
    forward_backward on those rows (trans [1 or N, L*L]; etrans, shifts: its exponentiated rows as
    forward_backward makes them). Returns (labels [N], scores [S], log Z [S]). With ``passes``:
    stored into or resumed from them (see Passes), the same outputs."""
    cdef const long[::1] sp = np.ascontiguousarray(sent_ptr, dtype=np.int64)
    cdef Py_ssize_t N = table.shape[0], S = sp.shape[0] - 1
    cdef int L = <int> table.shape[2]
    lengths = np.diff(np.asarray(sp))
    if S < 0 or sp[0] != 0 or sp[S] != N or (lengths < 1).any():
        raise ValueError("sent_ptr must rise from 0 to N in steps of at least 1")
    if fed.shape[0] != N or active.shape[0] != S:
        raise ValueError("one fed label per token, one active flag per sentence")
    if N and (np.asarray(fed).min() < 0 or np.asarray(fed).max() >= table.shape[1]):
        raise ValueError("a fed label is out of range")
    if trans.shape[1] != L * L or trans.shape[0] not in (1, N):
        raise ValueError("trans must be [1 or N, L*L]")
    if etrans is not None and (etrans.shape[0] != trans.shape[0] or etrans.shape[1] != L * L
                               or shifts is None or shifts.shape[0] != trans.shape[0]):
        raise ValueError("etrans and shifts must match trans")
    labels_np = np.zeros(N, dtype=np.int32)
    score_np = np.zeros(S)
    logz_np = np.zeros(S)
    cdef int[::1] labels = labels_np
    cdef double[::1] score = score_np, lz = logz_np
    cdef TableJob p
    memset(&p, 0, sizeof(TableJob))
    if S == 0:
        return labels_np, score_np, logz_np
    shape_init(&p.shape, 1, &L)
    p.sent_ptr, p.table, p.V, p.fed, p.active = &sp[0], &table[0, 0, 0], <int> table.shape[1], &fed[0], &active[0]
    p.trans, p.trans_rows = &trans[0, 0], trans.shape[0]
    if etrans is not None:
        p.etrans, p.shifts = &etrans[0, 0], &shifts[0]
    p.paths, p.score, p.logz = &labels[0], &score[0], &lz[0]
    if passes is not None:
        p.kept = passes.bind(changed, N, S, L, etrans is not None)
    run_chains(S, max(1, n_threads), 4, int(lengths.max()), L, 1, False, 0, table_task, &p)
    return labels_np, score_np, logz_np


def fed_table(double[:, :, ::1] out, const double[:, ::1] base, const double[:, ::1] constant,
              const long[:, ::1] ids, const long[::1] uniq, const long[::1] uniq_off, const long[::1] ptr,
              const long[::1] ptr_off, const long[::1] value_of, const long[::1] row, const double[:, ::1] dense):
    """A stage's state table for every fed value (joint.FedLink.tables_of), written token by token:
    out[t, j] = base[t] + constant[j], then for each pair line p in order, the row of the attribute
    that fires at t when the fed column holds value j. Line p: ids[p, t] the other macro's value id
    at t (-1: none); uniq[uniq_off[p]:uniq_off[p+1]] its sorted values seen in training, each with
    entries ptr[ptr_off[p] + a] .. ptr[ptr_off[p] + a + 1] into value_of (the fed value index, -1
    none) and row (the row of dense). Each cell gets its lines' rows in line order, as the numpy
    path adds them, so the sums are the same bits."""
    cdef Py_ssize_t N = out.shape[0], V = out.shape[1], L = out.shape[2], P = ids.shape[0]
    cdef Py_ssize_t t, j, l, p, e, lo, hi, mid, a, r
    cdef long x
    cdef double* o
    cdef const double* d
    if base.shape[0] != N or base.shape[1] != L or constant.shape[0] != V or constant.shape[1] != L:
        raise ValueError("fed_table: out must be [N, V, L], base [N, L], constant [V, L]")
    if ids.shape[1] != N or uniq_off.shape[0] != P + 1 or ptr_off.shape[0] != P + 1 or dense.shape[1] != L:
        raise ValueError("fed_table: ids must be [lines, N], offsets one per line and one more")
    if row.shape[0] != value_of.shape[0] or uniq_off[P] != uniq.shape[0] or ptr_off[P] != ptr.shape[0]:
        raise ValueError("fed_table: inconsistent line arrays")
    if row.shape[0] and (np.asarray(row).min() < 0 or np.asarray(row).max() >= dense.shape[0]
                         or np.asarray(value_of).max() >= V):
        raise ValueError("fed_table: a row or value index is out of range")
    if ptr.shape[0] and (np.asarray(ptr).min() < 0 or np.asarray(ptr).max() > row.shape[0]):
        raise ValueError("fed_table: an entry pointer is out of range")
    for p in range(P):
        if ptr_off[p + 1] - ptr_off[p] != uniq_off[p + 1] - uniq_off[p] + 1:
            raise ValueError("fed_table: each line needs one entry pointer per value and one more")
    with nogil:
        for t in range(N):
            for j in range(V):
                for l in range(L):
                    out[t, j, l] = base[t, l] + constant[j, l]
            for p in range(P):
                x = ids[p, t]
                lo, hi = uniq_off[p], uniq_off[p + 1]
                if x < 0 or lo == hi:
                    continue
                while lo < hi:          # the first value >= x
                    mid = (lo + hi) >> 1
                    if uniq[mid] < x:
                        lo = mid + 1
                    else:
                        hi = mid
                if lo == uniq_off[p + 1] or uniq[lo] != x:
                    continue
                a = ptr_off[p] + lo - uniq_off[p]
                for e in range(ptr[a], ptr[a + 1]):
                    j = value_of[e]
                    if j < 0:
                        continue
                    o = &out[t, j, 0]
                    d = &dense[row[e], 0]
                    for l in range(L):
                        o[l] += d[l]
