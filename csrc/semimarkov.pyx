# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Semi-Markov CRF kernels (Sarawagi & Cohen 2004) over an encoded corpus: likelihood and
gradient, Viterbi, marginals and n-best over segmentations.

A segmentation of a sentence is a run of segments (start, length, segment label y). Its score
is the score of the token chain CRF over position tags (S-y for a one-token segment, B-y I-y ...
E-y for a longer one; potentials.pxd's tables and layout) of the labeling it implies, plus,
for each segment, the weights of its segment attributes with its label. A segment of label y
is at most ``seg_max[y]`` tokens long. Inside a segment the position tags are fixed, so the
lattice keeps one state per segment end (S-y or E-y) and one per segment start (S-y or B-y):

    inn[t, k]   = log-sum over segmentations of tokens < t ending in state k' of
                  alpha[t-1, k'] + trans[k', k]                            (k a start state)
    alpha[t, k] = log-sum over segments ending at t in end state k of
                  inn[start, its start state] + its score
    out / beta  the same from the right.

A segment's token score is O(1) from per-label prefix sums of the I-y potentials, so a pass
costs O(T (Y L + K_end K_start)) per sentence of T tokens. Everything runs in log space,
nogil, with threads over sentences (sentences.pxd).

The segment attributes of the span of ``n`` tokens starting at global token t are
``seg_attrs[seg_ptr[r]:seg_ptr[r + 1]]`` with ``r = t * stride + n - 1``. Segment attribute a
has the features ``f`` in ``seg_feat_ptr[a] .. seg_feat_ptr[a + 1]``, each with one label
``seg_feat_label[f]`` and the weight ``w[off_seg + f]`` (with every label in order, the
complete set, a whole row is added at once).
"""

import numpy as np
cimport numpy as cnp
from libc.math cimport exp, log, INFINITY
from libc.stdlib cimport malloc, free, realloc
from libc.string cimport memset, memcpy

from potentials cimport Features, state_scores, labeling_score, scatter_nodes
from crftk._lattice import check_chain_arrays, occurrence_values
from vecmath cimport vec_mat_rect, exp_array, log_array
from sentences cimport Workspaces, SentenceTask, run_sentences

cnp.import_array()

cdef enum:
    POS_S = 0
    POS_B = 1
    POS_I = 2
    POS_E = 3


cdef struct Model:
    const Features* d
    const double* w
    int K                     # token (position) labels
    int Y                     # segment labels
    int stride                # the segment rows of a token (the longest segment)
    const int* smap           # [Y * 4]: token label of (S, B, I, E), -1 if absent
    const int* single         # [Y]: one-token segments allowed
    const int* multi          # [Y]: the longest segment of two tokens or more (0: none)
    const int* ends           # end states (S-y, E-y) [n_ends]
    int n_ends
    const int* starts         # start states (S-y, B-y) [n_starts]
    int n_starts
    const int* seg_of         # [K] the segment label of a token label (-1: none)
    const int* pos_of         # [K] its position (POS_*)
    const long long* seg_ptr
    const int* seg_attrs
    const int* seg_fptr       # [A + 1] segment attribute -> its features
    const int* seg_flab       # [F] each feature's segment label
    bint seg_dense            # every attribute has every label in order: feature a * Y + y
    Py_ssize_t off_seg
    const double* tr          # the K x K log transitions (w + d.off_trans)
    const double* ef          # [n_ends, n_starts]: exp(trans(end -> start) - trmax)
    const double* eb          # [n_starts, n_ends]: its transpose
    double trmax
    const int* sent_ptr
    Py_ssize_t n_params
    Py_ssize_t N
    # outputs
    const int* y              # gold token labels [N]
    double* total             # [threads]
    double* grad              # [threads, n_params]
    double* tacc              # [threads, K * K]
    unsigned char* bad        # [S] 1: the gold labeling is no segmentation the lattice has
    int* labels               # [N]
    double* score             # [S] (n-best [S, KB])
    double* marg              # [N, K]
    double* logz              # [S]
    double* weights           # [S] counts: each sentence's weight
    int* paths                # [KB, N]
    int* counts               # [S]
    int KB


cdef struct Work:
    double* s                 # [T * K] node log potentials
    double* cum               # [(T + 1) * Y] prefix sums of the I-y potentials
    double* sig               # [T * stride * Y] segment attribute scores
    double* alpha             # [T * K]
    double* inn               # [T * K]
    double* beta              # [T * K]
    double* out               # [T * K]
    double* mu                # [T * K] node marginals
    double* run               # [(T + 1) * Y]
    double* segp              # [T * stride * Y] segment marginals
    double* tmp               # [3 * K + 4 * Y * (stride + 1)]
    int* ibp                  # [T * K] Viterbi: the best end state before a start state
    int* lbp                  # [T * K] Viterbi: the best length into an end state
    # n-best: lists of KB entries per (token, state)
    double* nsc               # alpha lists [T * K * KB]
    int* nlen                 # their segment lengths
    int* nrank                # their inn entries' ranks
    int* ncnt                 # [T * K]
    double* isc               # inn lists [T * K * KB]
    int* iprev                # their end states before
    int* irank                # their alpha entries' ranks
    int* icnt                 # [T * K]
    double* csc               # candidates [cand]
    int* ca                   # their first and second keys
    int* cb
    int max_T


cdef struct Spec:
    int max_T, K, Y, stride, KB


cdef int work_init(void* spec, void* work, int i) noexcept nogil:
    cdef Spec* sp = <Spec*> spec
    cdef Work* b = <Work*> work
    cdef Py_ssize_t T = sp.max_T, K = sp.K, Y = sp.Y, R = sp.stride, KB = sp.KB
    cdef Py_ssize_t cand = (K + R + 1) * (KB if KB > 0 else 1)
    b.max_T = sp.max_T
    b.s = <double*> malloc(T * K * sizeof(double))
    b.cum = <double*> malloc((T + 1) * Y * sizeof(double))
    b.sig = <double*> malloc(T * R * Y * sizeof(double))
    b.alpha = <double*> malloc(T * K * sizeof(double))
    b.inn = <double*> malloc(T * K * sizeof(double))
    b.beta = <double*> malloc(T * K * sizeof(double))
    b.out = <double*> malloc(T * K * sizeof(double))
    b.mu = <double*> malloc(T * K * sizeof(double))
    b.run = <double*> malloc((T + 1) * Y * sizeof(double))
    b.segp = <double*> malloc(T * R * Y * sizeof(double))
    b.tmp = <double*> malloc((3 * K + 4 * Y * (R + 1)) * sizeof(double))
    b.ibp = <int*> malloc(T * K * sizeof(int))
    b.lbp = <int*> malloc(T * K * sizeof(int))
    if (b.s == NULL or b.cum == NULL or b.sig == NULL or b.alpha == NULL or b.inn == NULL or b.beta == NULL
            or b.out == NULL or b.mu == NULL or b.run == NULL or b.segp == NULL or b.tmp == NULL
            or b.ibp == NULL or b.lbp == NULL):
        work_release(spec, work)
        return -1
    if KB > 0:
        b.nsc = <double*> malloc(T * K * KB * sizeof(double))
        b.nlen = <int*> malloc(T * K * KB * sizeof(int))
        b.nrank = <int*> malloc(T * K * KB * sizeof(int))
        b.ncnt = <int*> malloc(T * K * sizeof(int))
        b.isc = <double*> malloc(T * K * KB * sizeof(double))
        b.iprev = <int*> malloc(T * K * KB * sizeof(int))
        b.irank = <int*> malloc(T * K * KB * sizeof(int))
        b.icnt = <int*> malloc(T * K * sizeof(int))
        b.csc = <double*> malloc(cand * sizeof(double))
        b.ca = <int*> malloc(cand * sizeof(int))
        b.cb = <int*> malloc(cand * sizeof(int))
        if (b.nsc == NULL or b.nlen == NULL or b.nrank == NULL or b.ncnt == NULL or b.isc == NULL
                or b.iprev == NULL or b.irank == NULL or b.icnt == NULL or b.csc == NULL or b.ca == NULL
                or b.cb == NULL):
            work_release(spec, work)
            return -1
    return 0


cdef void work_release(void* spec, void* work) noexcept nogil:
    cdef Work* b = <Work*> work
    free(b.s); free(b.cum); free(b.sig); free(b.alpha); free(b.inn); free(b.beta); free(b.out)
    free(b.mu); free(b.run); free(b.segp); free(b.tmp); free(b.ibp); free(b.lbp)
    free(b.nsc); free(b.nlen); free(b.nrank); free(b.ncnt); free(b.isc); free(b.iprev); free(b.irank)
    free(b.icnt); free(b.csc); free(b.ca); free(b.cb)
    memset(b, 0, sizeof(Work))


# -- the tables of a sentence ------------------------------------------------------------

cdef void build_tables(const Model* m, Py_ssize_t t0, int T, Work* b) noexcept nogil:
    """b.s (node potentials with start/end), b.cum (prefix sums of the I-y potentials) and b.sig
    (each span's segment attribute scores per label: segment_scores turns them into the spans'
    whole scores)."""
    cdef int K = m.K, Y = m.Y, R = m.stride
    cdef int t, n, y, ki, a, f
    cdef long long k, r
    cdef double* row
    cdef const double* wv
    state_scores(m.d, m.w, t0, T, b.s)
    for y in range(Y):
        b.cum[y] = 0.0
    for t in range(T):
        for y in range(Y):
            ki = m.smap[4 * y + POS_I]
            b.cum[(t + 1) * Y + y] = b.cum[t * Y + y] + (b.s[t * K + ki] if ki >= 0 else 0.0)
    memset(b.sig, 0, <size_t> T * R * Y * sizeof(double))
    for t in range(T):
        for n in range(1, min(R, T - t) + 1):
            r = (t0 + t) * R + n - 1
            row = b.sig + (t * R + n - 1) * Y
            if m.seg_dense:
                for k in range(m.seg_ptr[r], m.seg_ptr[r + 1]):
                    wv = m.w + m.off_seg + <Py_ssize_t> m.seg_attrs[k] * Y
                    for y in range(Y):
                        row[y] += wv[y]
                continue
            for k in range(m.seg_ptr[r], m.seg_ptr[r + 1]):
                a = m.seg_attrs[k]
                for f in range(m.seg_fptr[a], m.seg_fptr[a + 1]):
                    row[m.seg_flab[f]] += m.w[m.off_seg + f]


cdef void segment_scores(const Model* m, int T, Work* b) noexcept nogil:
    """b.sig[(t * stride + n - 1) * Y + y] += the token score of the segment of label y over tokens
    t .. t+n-1 (its position tags' potentials and the transitions inside it); -inf where label y
    has no segment of n tokens."""
    cdef int K = m.K, Y = m.Y, R = m.stride
    cdef int t, n, y
    cdef const int* q
    cdef double* row
    for t in range(T):
        for n in range(1, min(R, T - t) + 1):
            row = b.sig + (t * R + n - 1) * Y
            for y in range(Y):
                q = m.smap + 4 * y
                if n == 1:
                    row[y] = row[y] + b.s[t * K + q[POS_S]] if m.single[y] else -INFINITY
                elif n > m.multi[y]:
                    row[y] = -INFINITY
                elif n == 2:
                    row[y] += b.s[t * K + q[POS_B]] + b.s[(t + 1) * K + q[POS_E]] + m.tr[q[POS_B] * K + q[POS_E]]
                else:
                    row[y] += (b.s[t * K + q[POS_B]] + b.s[(t + n - 1) * K + q[POS_E]]
                               + b.cum[(t + n - 1) * Y + y] - b.cum[(t + 1) * Y + y]
                               + m.tr[q[POS_B] * K + q[POS_I]] + m.tr[q[POS_I] * K + q[POS_E]]
                               + (n - 3) * m.tr[q[POS_I] * K + q[POS_I]])


cdef inline double seg_score(const Model* m, const Work* b, int t, int n, int y) noexcept nogil:
    """Score of the segment of label y over tokens t .. t+n-1 (after segment_scores)."""
    return b.sig[(t * m.stride + n - 1) * m.Y + y]


cdef inline double log_sum(const double* v, int n) noexcept nogil:
    cdef int i
    cdef double mx = -INFINITY, acc = 0.0
    for i in range(n):
        if v[i] > mx:
            mx = v[i]
    if mx == -INFINITY:
        return -INFINITY
    for i in range(n):
        acc += exp(v[i] - mx)
    return mx + log(acc)


cdef void boundary(const Model* m, const double* src, const int* src_states, int n_src,
                   const int* dst_states, int n_dst, const double* M, double* dst, double* tmp) noexcept nogil:
    """dst[k] = log sum over k' of src[k'] + trans between k' and k, for k in dst_states, k' in
    src_states (rows of K entries); M [n_src, n_dst] the exp(transitions - trmax) between them
    (ef forward, eb backward); tmp holds 2 (n_src + n_dst) doubles."""
    cdef int i, j
    cdef double mx = -INFINITY
    cdef double* x = tmp
    cdef double* y = tmp + n_src
    for i in range(n_src):
        x[i] = src[src_states[i]]
        if x[i] > mx:
            mx = x[i]
    if mx == -INFINITY:
        for j in range(n_dst):
            dst[dst_states[j]] = -INFINITY
        return
    for i in range(n_src):
        x[i] -= mx
    exp_array(x, x, n_src)
    vec_mat_rect(x, M, n_src, n_dst, y)
    log_array(y, y, n_dst)
    for j in range(n_dst):
        dst[dst_states[j]] = mx + m.trmax + y[j]


cdef int length_sums(const Model* m, double* v, const int* group, int n_groups, double* out,
                     double* mx) noexcept nogil:
    """out[g] = log sum of v over group g (v[group[g] .. group[g+1]]), exps in one vector call;
    mx holds n_groups doubles."""
    cdef int g, i
    cdef double top
    for g in range(n_groups):
        top = -INFINITY
        for i in range(group[g], group[g + 1]):
            if v[i] > top:
                top = v[i]
        mx[g] = top
        for i in range(group[g], group[g + 1]):
            v[i] = v[i] - top if top > -INFINITY else -INFINITY
    exp_array(v, v, group[n_groups])
    for g in range(n_groups):
        out[g] = 0.0
        for i in range(group[g], group[g + 1]):
            out[g] += v[i]
    log_array(out, out, n_groups)
    for g in range(n_groups):
        out[g] = mx[g] + out[g] if mx[g] > -INFINITY else -INFINITY
    return 0


cdef double forward_backward(const Model* m, int T, Work* b, bint backward) noexcept nogil:
    """alpha and inn (and beta and out when backward) of the sentence whose tables b holds;
    returns log Z."""
    cdef int K = m.K, Y = m.Y, R = m.stride
    cdef int t, y, n, j, hi, nv, ng
    cdef const int* q
    cdef double* v = b.tmp + 2 * K
    cdef double* sums = v + Y * (R + 1)
    cdef double* mx = sums + Y + 1
    cdef int* group = <int*> (mx + Y + 1)
    cdef int* label = group + Y + 1
    for t in range(T):
        for j in range(K):
            b.alpha[t * K + j] = -INFINITY
            b.inn[t * K + j] = -INFINITY
        if t == 0:
            for j in range(m.n_starts):
                b.inn[m.starts[j]] = 0.0
        else:
            boundary(m, b.alpha + (t - 1) * K, m.ends, m.n_ends, m.starts, m.n_starts, m.ef, b.inn + t * K, b.tmp)
        nv, ng = 0, 0
        for y in range(Y):
            q = m.smap + 4 * y
            if m.single[y]:
                b.alpha[t * K + q[POS_S]] = b.inn[t * K + q[POS_S]] + seg_score(m, b, t, 1, y)
            hi = min(m.multi[y], t + 1)
            if hi >= 2:
                group[ng], label[ng] = nv, y
                ng += 1
                for n in range(2, hi + 1):
                    v[nv] = b.inn[(t - n + 1) * K + q[POS_B]] + seg_score(m, b, t - n + 1, n, y)
                    nv += 1
        if ng:
            group[ng] = nv
            length_sums(m, v, group, ng, sums, mx)
            for j in range(ng):
                b.alpha[t * K + m.smap[4 * label[j] + POS_E]] = sums[j]
    for j in range(m.n_ends):
        v[j] = b.alpha[(T - 1) * K + m.ends[j]]
    group[0], group[1] = 0, m.n_ends
    length_sums(m, v, group, 1, sums, mx)
    cdef double logz = sums[0]
    if not backward:
        return logz
    for t in range(T - 1, -1, -1):
        for j in range(K):
            b.beta[t * K + j] = -INFINITY
            b.out[t * K + j] = -INFINITY
        if t == T - 1:
            for j in range(m.n_ends):
                b.beta[t * K + m.ends[j]] = 0.0
        else:
            boundary(m, b.out + (t + 1) * K, m.starts, m.n_starts, m.ends, m.n_ends, m.eb, b.beta + t * K, b.tmp)
        nv, ng = 0, 0
        for y in range(Y):
            q = m.smap + 4 * y
            if m.single[y]:
                b.out[t * K + q[POS_S]] = seg_score(m, b, t, 1, y) + b.beta[t * K + q[POS_S]]
            hi = min(m.multi[y], T - t)
            if hi >= 2:
                group[ng], label[ng] = nv, y
                ng += 1
                for n in range(2, hi + 1):
                    v[nv] = seg_score(m, b, t, n, y) + b.beta[(t + n - 1) * K + q[POS_E]]
                    nv += 1
        if ng:
            group[ng] = nv
            length_sums(m, v, group, ng, sums, mx)
            for j in range(ng):
                b.out[t * K + m.smap[4 * label[j] + POS_B]] = sums[j]
    return logz


cdef void expected_counts(const Model* m, int T, Work* b, double logz, double* tacc) noexcept nogil:
    """After forward_backward: node marginals into b.mu, segment marginals into b.segp, and the
    expected transition counts added to tacc."""
    cdef int K = m.K, Y = m.Y, R = m.stride
    cdef int t, y, n, e, i, j, ks, kd, hi, nv
    cdef const int* q
    cdef double p, m1, m2, c, run, a
    cdef double* ea = b.tmp
    cdef double* eo = b.tmp + K
    cdef double* v = b.tmp + 2 * K
    memset(b.mu, 0, <size_t> T * K * sizeof(double))
    memset(b.run, 0, <size_t> (T + 1) * Y * sizeof(double))
    for t in range(T):
        # every segment starting at t, its log marginal in v (-inf where none), then exp at once
        hi = min(R, T - t)
        nv = 0
        for n in range(1, hi + 1):
            e = t + n - 1
            for y in range(Y):
                q = m.smap + 4 * y
                # a segment the lattice lacks has marginal 0 whatever log Z is (-inf - -inf would be
                # NaN, and its position tags are -1: scattering it would write outside the tables)
                if n == 1:
                    a = b.inn[t * K + q[POS_S]] + b.beta[t * K + q[POS_S]] if m.single[y] else -INFINITY
                else:
                    a = b.inn[t * K + q[POS_B]] + b.beta[e * K + q[POS_E]] if n <= m.multi[y] else -INFINITY
                v[nv] = a + seg_score(m, b, t, n, y) - logz if a > -INFINITY else -INFINITY
                nv += 1
        exp_array(v, b.segp + t * R * Y, nv)
        for n in range(1, hi + 1):
            e = t + n - 1
            for y in range(Y):
                p = b.segp[(t * R + n - 1) * Y + y]
                if p == 0.0:
                    continue
                q = m.smap + 4 * y
                if n == 1:
                    b.mu[t * K + q[POS_S]] += p
                    continue
                b.mu[t * K + q[POS_B]] += p
                b.mu[e * K + q[POS_E]] += p
                if n == 2:
                    tacc[q[POS_B] * K + q[POS_E]] += p
                else:
                    b.run[(t + 1) * Y + y] += p
                    b.run[e * Y + y] -= p
                    tacc[q[POS_B] * K + q[POS_I]] += p
                    tacc[q[POS_I] * K + q[POS_E]] += p
                    tacc[q[POS_I] * K + q[POS_I]] += (n - 3) * p
        for n in range(hi + 1, R + 1):
            for y in range(Y):
                b.segp[(t * R + n - 1) * Y + y] = 0.0
    for y in range(Y):
        i = m.smap[4 * y + POS_I]
        if i < 0:
            continue
        run = 0.0
        for t in range(T):
            run += b.run[t * Y + y]
            b.mu[t * K + i] += run
    for t in range(1, T):
        m1 = -INFINITY
        for i in range(m.n_ends):
            ea[i] = b.alpha[(t - 1) * K + m.ends[i]]
            if ea[i] > m1:
                m1 = ea[i]
        m2 = -INFINITY
        for j in range(m.n_starts):
            eo[j] = b.out[t * K + m.starts[j]]
            if eo[j] > m2:
                m2 = eo[j]
        if m1 == -INFINITY or m2 == -INFINITY:
            continue
        for i in range(m.n_ends):
            ea[i] -= m1
        for j in range(m.n_starts):
            eo[j] -= m2
        exp_array(ea, ea, m.n_ends)
        exp_array(eo, eo, m.n_starts)
        c = exp(m1 + m2 + m.trmax - logz)
        for i in range(m.n_ends):
            ks = m.ends[i]
            a = c * ea[i]
            for j in range(m.n_starts):
                tacc[ks * K + m.starts[j]] += a * m.ef[i * m.n_starts + j] * eo[j]


cdef void scatter_segments(const Model* m, Py_ssize_t t0, int T, const double* segp, double factor,
                           double* g) noexcept nogil:
    """g[segment weights] += factor * segp (a marginal per span and label)."""
    cdef int Y = m.Y, R = m.stride
    cdef int t, n, y, a, f
    cdef long long k, r
    cdef const double* row
    cdef double* gr
    for t in range(T):
        for n in range(1, min(R, T - t) + 1):
            r = (t0 + t) * R + n - 1
            row = segp + (t * R + n - 1) * Y
            if m.seg_dense:
                for k in range(m.seg_ptr[r], m.seg_ptr[r + 1]):
                    gr = g + m.off_seg + <Py_ssize_t> m.seg_attrs[k] * Y
                    for y in range(Y):
                        gr[y] += factor * row[y]
                continue
            for k in range(m.seg_ptr[r], m.seg_ptr[r + 1]):
                a = m.seg_attrs[k]
                for f in range(m.seg_fptr[a], m.seg_fptr[a + 1]):
                    g[m.off_seg + f] += factor * row[m.seg_flab[f]]


cdef int gold_segments(const Model* m, const int* y, int T, int* seg_start, int* seg_len) noexcept nogil:
    """The segments of a labeling of position tags into seg_start/seg_len (by their last token:
    seg_len[e] > 0 at each segment's end e); returns 0, or -1 when it is no segmentation the
    lattice has (a tag out of place, a segment longer than its label allows)."""
    cdef int t, k, sy, pos, start = -1, label = -1
    for t in range(T):
        seg_len[t] = 0
        k = y[t]
        if k < 0 or k >= m.K:
            return -1
        sy, pos = m.seg_of[k], m.pos_of[k]
        if sy < 0:
            return -1
        if pos == POS_S or pos == POS_B:
            if start >= 0:
                return -1
            if pos == POS_S:
                if not m.single[sy]:
                    return -1
                seg_start[t], seg_len[t] = t, 1
            else:
                start, label = t, sy
        else:
            if start < 0 or sy != label:
                return -1
            if pos == POS_E:
                if t - start + 1 > m.multi[sy]:
                    return -1
                seg_start[t], seg_len[t] = start, t - start + 1
                start = -1
    return -1 if start >= 0 else 0


cdef double gold_segment_score(const Model* m, const Work* b, const int* y, int T, const int* seg_start,
                               const int* seg_len) noexcept nogil:
    """The summed segment attribute scores of the labeling's segments."""
    cdef int e, t, n, sy, Y = m.Y, R = m.stride
    cdef double total = 0.0
    for e in range(T):
        n = seg_len[e]
        if n == 0:
            continue
        t = seg_start[e]
        sy = m.seg_of[y[e]]
        if n <= R:
            total += b.sig[(t * R + n - 1) * Y + sy]
    return total


cdef void scatter_gold_segments(const Model* m, Py_ssize_t t0, const int* y, int T, const int* seg_start,
                                const int* seg_len, double* g, double factor) noexcept nogil:
    """g[the weights of the labeling's segment attributes] -= factor."""
    cdef int e, t, n, sy, a, f, Y = m.Y, R = m.stride
    cdef long long k, r
    for e in range(T):
        n = seg_len[e]
        if n == 0 or n > R:
            continue
        t = seg_start[e]
        sy = m.seg_of[y[e]]
        r = (t0 + t) * R + n - 1
        for k in range(m.seg_ptr[r], m.seg_ptr[r + 1]):
            a = m.seg_attrs[k]
            if m.seg_dense:
                g[m.off_seg + <Py_ssize_t> a * Y + sy] -= factor
                continue
            for f in range(m.seg_fptr[a], m.seg_fptr[a + 1]):
                if m.seg_flab[f] == sy:
                    g[m.off_seg + f] -= factor


cdef inline int sentence(const Model* m, Py_ssize_t s, Py_ssize_t* t0) noexcept nogil:
    t0[0] = m.sent_ptr[s]
    return <int> (m.sent_ptr[s + 1] - t0[0])


# -- the tasks, one sentence each ------------------------------------------------------------

cdef void loglik_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    cdef const Model* m = <const Model*> job
    cdef Work* b = <Work*> work
    cdef Py_ssize_t t0
    cdef int T = sentence(m, s, &t0), t
    cdef double* g = m.grad + tid * m.n_params
    cdef double* tacc = m.tacc + tid * m.K * m.K
    cdef const int* y = m.y + t0
    # the gold segments reuse the Viterbi back-pointer buffers
    if gold_segments(m, y, T, b.ibp, b.lbp) < 0:
        m.bad[s] = 1
        return
    build_tables(m, t0, T, b)
    cdef double gold = gold_segment_score(m, b, y, T, b.ibp, b.lbp)
    segment_scores(m, T, b)
    cdef double logz = forward_backward(m, T, b, True)
    expected_counts(m, T, b, logz, tacc)
    scatter_nodes(m.d, t0, T, b.mu, y, g, 1.0)
    for t in range(1, T):
        tacc[y[t - 1] * m.K + y[t]] -= 1.0
    scatter_segments(m, t0, T, b.segp, 1.0, g)
    scatter_gold_segments(m, t0, y, T, b.ibp, b.lbp, g, 1.0)
    m.total[tid] += logz - labeling_score(m.d, m.w, b.s, t0, T, y, 1.0) - gold


cdef void marginals_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    cdef const Model* m = <const Model*> job
    cdef Work* b = <Work*> work
    cdef Py_ssize_t t0
    cdef int T = sentence(m, s, &t0), i
    build_tables(m, t0, T, b)
    segment_scores(m, T, b)
    cdef double logz = forward_backward(m, T, b, True)
    m.logz[s] = logz
    if logz == -INFINITY:       # no segmentation: marginals 0 (the output is zeroed)
        return
    expected_counts(m, T, b, logz, m.tacc + tid * m.K * m.K)
    for i in range(T * m.K):
        m.marg[t0 * m.K + i] = b.mu[i]


cdef void write_segment(const Model* m, int* out, int start, int n, int sy) noexcept nogil:
    """Position tags of the segment of label sy over out[start .. start+n-1]."""
    cdef const int* q = m.smap + 4 * sy
    cdef int t
    if n == 1:
        out[start] = q[POS_S]
        return
    out[start] = q[POS_B]
    for t in range(start + 1, start + n - 1):
        out[t] = q[POS_I]
    out[start + n - 1] = q[POS_E]


cdef void viterbi_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    cdef const Model* m = <const Model*> job
    cdef Work* b = <Work*> work
    cdef Py_ssize_t t0
    cdef int T = sentence(m, s, &t0)
    cdef int K = m.K, Y = m.Y
    cdef int t, y, n, i, j, hi, arg, ks, kd, k
    cdef const int* q
    cdef double best, v
    build_tables(m, t0, T, b)
    segment_scores(m, T, b)
    for t in range(T):
        for j in range(K):
            b.alpha[t * K + j] = -INFINITY
            b.inn[t * K + j] = -INFINITY
        for j in range(m.n_starts):
            kd = m.starts[j]
            if t == 0:
                b.inn[kd] = 0.0
                b.ibp[kd] = -1
                continue
            best, arg = -INFINITY, -1
            for i in range(m.n_ends):
                ks = m.ends[i]
                v = b.alpha[(t - 1) * K + ks] + m.tr[ks * K + kd]
                if v > best:
                    best, arg = v, ks
            b.inn[t * K + kd] = best
            b.ibp[t * K + kd] = arg
        for y in range(Y):
            q = m.smap + 4 * y
            if m.single[y]:
                b.alpha[t * K + q[POS_S]] = b.inn[t * K + q[POS_S]] + seg_score(m, b, t, 1, y)
                b.lbp[t * K + q[POS_S]] = 1
            hi = min(m.multi[y], t + 1)
            if hi >= 2:
                best, arg = -INFINITY, 2
                for n in range(2, hi + 1):
                    v = b.inn[(t - n + 1) * K + q[POS_B]] + seg_score(m, b, t - n + 1, n, y)
                    if v > best:
                        best, arg = v, n
                b.alpha[t * K + q[POS_E]] = best
                b.lbp[t * K + q[POS_E]] = arg
    best, k = -INFINITY, m.ends[0]
    for i in range(m.n_ends):
        v = b.alpha[(T - 1) * K + m.ends[i]]
        if v > best:
            best, k = v, m.ends[i]
    m.score[s] = best
    cdef int* out = m.labels + t0
    if best == -INFINITY:       # no segmentation (transitions pinned out): no labels
        for t in range(T):
            out[t] = -1
        return
    t = T - 1
    while t >= 0 and k >= 0:
        n = b.lbp[t * K + k]
        write_segment(m, out, t - n + 1, n, m.seg_of[k])
        t -= n
        if t < 0:
            break
        k = b.ibp[(t + 1) * K + out[t + 1]]


cdef int top_entries(double* sc, int* a, int* c, int n, int KB) noexcept nogil:
    """Moves the best min(n, KB) candidates (score sc, keys a, c) to the front, best first, ties
    by position; drops -inf; returns how many."""
    cdef int i, j, bi, ta, tc
    cdef double bv, tv
    cdef int got = 0
    for i in range(min(n, KB)):
        bi, bv = -1, -INFINITY
        for j in range(i, n):
            if sc[j] > bv:
                bi, bv = j, sc[j]
        if bi < 0:
            break
        tv, ta, tc = sc[i], a[i], c[i]
        sc[i], a[i], c[i] = sc[bi], a[bi], c[bi]
        sc[bi], a[bi], c[bi] = tv, ta, tc
        got += 1
    return got


cdef void nbest_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    """The KB best segmentations: lists of the KB best partial scores per (token, state)."""
    cdef const Model* m = <const Model*> job
    cdef Work* b = <Work*> work
    cdef Py_ssize_t t0
    cdef int T = sentence(m, s, &t0)
    cdef int K = m.K, Y = m.Y, KB = m.KB
    cdef int t, y, n, i, j, r, hi, nc, got, ks, kd, k, rank, cell
    cdef const int* q
    cdef double sc
    build_tables(m, t0, T, b)
    segment_scores(m, T, b)
    for t in range(T):
        for j in range(K):
            b.ncnt[t * K + j] = 0
            b.icnt[t * K + j] = 0
        for j in range(m.n_starts):
            kd = m.starts[j]
            cell = t * K + kd
            if t == 0:
                b.isc[cell * KB] = 0.0
                b.iprev[cell * KB] = -1
                b.irank[cell * KB] = 0
                b.icnt[cell] = 1
                continue
            nc = 0
            for i in range(m.n_ends):
                ks = m.ends[i]
                for r in range(b.ncnt[(t - 1) * K + ks]):
                    b.csc[nc] = b.nsc[((t - 1) * K + ks) * KB + r] + m.tr[ks * K + kd]
                    b.ca[nc], b.cb[nc] = ks, r
                    nc += 1
            got = top_entries(b.csc, b.ca, b.cb, nc, KB)
            for r in range(got):
                b.isc[cell * KB + r], b.iprev[cell * KB + r], b.irank[cell * KB + r] = b.csc[r], b.ca[r], b.cb[r]
            b.icnt[cell] = got
        for y in range(Y):
            q = m.smap + 4 * y
            if m.single[y]:
                cell = t * K + q[POS_S]
                sc = seg_score(m, b, t, 1, y)
                for r in range(b.icnt[cell]):
                    b.nsc[cell * KB + r] = b.isc[cell * KB + r] + sc
                    b.nlen[cell * KB + r], b.nrank[cell * KB + r] = 1, r
                b.ncnt[cell] = b.icnt[cell]
            hi = min(m.multi[y], t + 1)
            if hi >= 2:
                nc = 0
                for n in range(2, hi + 1):
                    k = (t - n + 1) * K + q[POS_B]
                    sc = seg_score(m, b, t - n + 1, n, y)
                    for r in range(b.icnt[k]):
                        b.csc[nc] = b.isc[k * KB + r] + sc
                        b.ca[nc], b.cb[nc] = n, r
                        nc += 1
                cell = t * K + q[POS_E]
                got = top_entries(b.csc, b.ca, b.cb, nc, KB)
                for r in range(got):
                    b.nsc[cell * KB + r], b.nlen[cell * KB + r], b.nrank[cell * KB + r] = b.csc[r], b.ca[r], b.cb[r]
                b.ncnt[cell] = got
    nc = 0
    for i in range(m.n_ends):
        ks = m.ends[i]
        for r in range(b.ncnt[(T - 1) * K + ks]):
            b.csc[nc] = b.nsc[((T - 1) * K + ks) * KB + r]
            b.ca[nc], b.cb[nc] = ks, r
            nc += 1
    got = top_entries(b.csc, b.ca, b.cb, nc, KB)
    m.counts[s] = got
    cdef int* out
    for j in range(got):
        m.score[s * KB + j] = b.csc[j]
    for j in range(got):
        out = m.paths + <Py_ssize_t> j * m.N + t0
        k, rank = b.ca[j], b.cb[j]
        t = T - 1
        while t >= 0:
            cell = t * K + k
            n = b.nlen[cell * KB + rank]
            r = b.nrank[cell * KB + rank]
            write_segment(m, out, t - n + 1, n, m.seg_of[k])
            t -= n
            if t < 0:
                break
            cell = (t + 1) * K + out[t + 1]
            k, rank = b.iprev[cell * KB + r], b.irank[cell * KB + r]


cdef void counts_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    """F(labels) of the sentence, times its weight (scatter_nodes with zero marginals adds
    -factor at the labeling's features)."""
    cdef const Model* m = <const Model*> job
    cdef Work* b = <Work*> work
    cdef Py_ssize_t t0
    cdef int T = sentence(m, s, &t0), t
    cdef const int* y = m.y + t0
    cdef double c = m.weights[s]
    if c == 0.0:
        return
    if gold_segments(m, y, T, b.ibp, b.lbp) < 0:
        m.bad[s] = 1
        return
    memset(b.mu, 0, <size_t> T * m.K * sizeof(double))
    scatter_nodes(m.d, t0, T, b.mu, y, m.grad + tid * m.n_params, -c)
    for t in range(1, T):
        m.tacc[tid * m.K * m.K + y[t - 1] * m.K + y[t]] += c
    scatter_gold_segments(m, t0, y, T, b.ibp, b.lbp, m.grad + tid * m.n_params, -c)


cdef void scores_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    cdef const Model* m = <const Model*> job
    cdef Work* b = <Work*> work
    cdef Py_ssize_t t0
    cdef int T = sentence(m, s, &t0)
    cdef const int* y = m.y + t0
    if gold_segments(m, y, T, b.ibp, b.lbp) < 0:
        m.bad[s] = 1
        return
    build_tables(m, t0, T, b)
    m.score[s] = labeling_score(m.d, m.w, b.s, t0, T, y, 1.0) + gold_segment_score(m, b, y, T, b.ibp, b.lbp)


cdef class Segments:
    """The segment lattices of an encoded corpus (see the module docstring)."""

    cdef readonly int n_sentences, n_tokens, n_labels, n_segment_labels, stride, max_len
    cdef readonly Py_ssize_t n_params, off_seg, n_seg_attrs
    cdef const int[::1] sent_ptr
    cdef const int[::1] attr_ptr
    cdef const int[::1] attrs
    cdef const int[::1] feat_ptr
    cdef const int[::1] feat_label
    cdef const double[::1] values
    cdef const long long[::1] seg_ptr
    cdef const int[::1] seg_attrs
    cdef object smap, single, multi, ends, starts, seg_of, pos_of, zeros
    cdef const int[::1] seg_fptr
    cdef const int[::1] seg_flab
    cdef bint seg_dense
    cdef Features d

    def __init__(self, const int[::1] sent_ptr, const int[::1] attr_ptr, const int[::1] attrs,
                 const int[::1] feat_ptr, const int[::1] feat_label, int n_labels, offsets,
                 seg_map, seg_max, seg_ptr, seg_attrs, Py_ssize_t n_seg_attrs, Py_ssize_t off_seg,
                 values=None, seg_feat_ptr=None, seg_feat_label=None):
        """The token part as crftk._lattice.Lattices takes it (no edge attributes), the segment
        labels' position tags (seg_map [Y, 4]: S, B, I, E token label ids, -1 if absent) and
        longest segments (seg_max [Y]), and the spans' attributes (seg_ptr int64 [N * stride + 1],
        seg_attrs int32), whose weights start at off_seg: the features of each segment attribute
        (seg_feat_ptr [n_seg_attrs + 1], seg_feat_label: one segment label each), or, without
        them, every attribute with every label (the complete set, feature a * Y + y)."""
        cdef Py_ssize_t S = sent_ptr.shape[0] - 1
        cdef Py_ssize_t N = attr_ptr.shape[0] - 1
        cdef int K = n_labels
        # the token part as a chain without edge attributes: the chain kernel's checks
        lengths, chain = check_chain_arrays(sent_ptr, attr_ptr, attrs, np.zeros(N + 1, dtype=np.int32),
                                            np.zeros(0, dtype=np.int32), feat_ptr, feat_label, K, 0, offsets)
        smap = np.ascontiguousarray(seg_map, dtype=np.int32)
        smax = np.ascontiguousarray(seg_max, dtype=np.int32)
        Y = smap.shape[0] if smap.ndim == 2 else -1
        if smap.ndim != 2 or smap.shape[1] != 4 or Y < 1 or smax.shape != (Y,):
            raise ValueError("seg_map must be [Y, 4] and seg_max [Y], Y >= 1")
        if smap.min() < -1 or smap.max() >= K:
            raise ValueError("seg_map: token label out of range")
        used = smap[smap >= 0]
        if np.unique(used).size != used.size:
            raise ValueError("seg_map: a token label is the position tag of two segment labels")
        if smax.min() < 1:
            raise ValueError("seg_max: a segment label's longest segment must be at least 1")
        single = (smap[:, POS_S] >= 0).astype(np.int32)
        can_multi = (smap[:, POS_B] >= 0) & (smap[:, POS_E] >= 0)
        multi = np.where(can_multi & (smax >= 2), np.where(smap[:, POS_I] >= 0, smax, np.minimum(smax, 2)), 0)
        multi = multi.astype(np.int32)
        sp = np.ascontiguousarray(seg_ptr, dtype=np.int64)
        sa = np.ascontiguousarray(seg_attrs, dtype=np.int32)
        if N == 0:
            stride = 1
        else:
            if sp.ndim != 1 or sp.size < 1 or (sp.size - 1) % N:
                raise ValueError("seg_ptr must have stride rows per token plus one")
            stride = (sp.size - 1) // N
        if stride < max(int(multi.max()), 1):
            raise ValueError(f"seg_ptr has rows for segments of {stride} tokens, and a label allows "
                             f"{int(multi.max())}")
        if sp[0] != 0 or sp[sp.size - 1] != sa.size or (np.diff(sp) < 0).any():
            raise ValueError("seg_ptr does not match seg_attrs")
        if sa.size and (sa.min() < 0 or sa.max() >= n_seg_attrs):
            raise ValueError("segment attribute id out of range")
        if seg_feat_ptr is None:
            fptr = np.arange(n_seg_attrs + 1, dtype=np.int32) * Y
            flab = np.tile(np.arange(Y, dtype=np.int32), n_seg_attrs)
        else:
            fptr = np.ascontiguousarray(seg_feat_ptr, dtype=np.int32)
            flab = np.ascontiguousarray(seg_feat_label, dtype=np.int32)
            if (fptr.shape != (n_seg_attrs + 1,) or fptr[0] != 0 or fptr[n_seg_attrs] != flab.size
                    or (np.diff(fptr) < 0).any()):
                raise ValueError("seg_feat_ptr must span seg_feat_label, one entry per segment attribute plus one")
            if flab.size and (flab.min() < 0 or flab.max() >= Y):
                raise ValueError("segment feature label out of range")
        self.seg_dense = bool(flab.size == n_seg_attrs * Y and np.array_equal(
            flab, np.tile(np.arange(Y, dtype=np.int32), n_seg_attrs)))
        self.seg_fptr, self.seg_flab = fptr, flab
        if off_seg != chain[4]:
            raise ValueError("the segment weights must follow the token part's parameters")
        ends = [int(smap[y, POS_S]) for y in range(Y) if single[y]] + \
               [int(smap[y, POS_E]) for y in range(Y) if multi[y] >= 2]
        starts = [int(smap[y, POS_S]) for y in range(Y) if single[y]] + \
                 [int(smap[y, POS_B]) for y in range(Y) if multi[y] >= 2]
        if not ends:
            raise ValueError("no segment label has a segment")
        seg_of = np.full(K, -1, dtype=np.int32)
        pos_of = np.full(K, -1, dtype=np.int32)
        for yy in range(Y):
            for pos in range(4):
                if smap[yy, pos] >= 0:
                    seg_of[smap[yy, pos]], pos_of[smap[yy, pos]] = yy, pos
        self.smap, self.single, self.multi = smap, single, multi
        self.ends, self.starts = np.array(ends, dtype=np.int32), np.array(starts, dtype=np.int32)
        self.seg_of, self.pos_of = seg_of, pos_of
        self.seg_ptr, self.seg_attrs = sp, sa
        self.sent_ptr, self.attr_ptr, self.attrs = sent_ptr, attr_ptr, attrs
        self.feat_ptr, self.feat_label = feat_ptr, feat_label
        self.n_sentences, self.n_tokens, self.n_labels, self.n_segment_labels = S, N, K, Y
        self.stride = stride
        self.max_len = int(lengths.max()) if lengths.size else 0
        self.n_seg_attrs = n_seg_attrs
        self.off_seg = off_seg
        self.n_params = off_seg + flab.size
        self.zeros = np.zeros(1, dtype=np.int32)
        self.d.attr_ptr = &attr_ptr[0]
        self.d.attrs = &attrs[0] if attrs.shape[0] else NULL
        self.d.attrs24 = NULL
        self.d.eattr_ptr = &attr_ptr[0]      # never read: no edge attributes
        self.d.eattrs = NULL
        self.d.feat_ptr = &feat_ptr[0]
        self.d.feat_label = &feat_label[0] if feat_label.shape[0] else NULL
        self.d.dense = NULL
        self.d.values = NULL
        values = occurrence_values(values, attrs.shape[0])
        if values is not None:
            self.values = values
            if values.shape[0]:
                self.d.values = &self.values[0]
        self.d.L = K
        self.d.has_edges = 0
        self.d.off_trans, self.d.off_start, self.d.off_end, self.d.off_edge = chain[0], chain[1], chain[2], chain[3]

    cdef Model model(self, const double[::1] w, double[::1] etr) except *:
        if w.shape[0] != self.n_params:
            raise ValueError(f"weight vector has {w.shape[0]} entries, expected {self.n_params}")
        cdef Model m
        memset(&m, 0, sizeof(Model))
        cdef const int[::1] smap = self.smap.reshape(-1)
        cdef const int[::1] single = self.single
        cdef const int[::1] multi = self.multi
        cdef const int[::1] ends = self.ends
        cdef const int[::1] starts = self.starts
        cdef const int[::1] seg_of = self.seg_of
        cdef const int[::1] pos_of = self.pos_of
        cdef int K = self.n_labels
        m.d = &self.d
        m.w = &w[0]
        m.K, m.Y, m.stride = K, self.n_segment_labels, self.stride
        m.smap, m.single, m.multi = &smap[0], &single[0], &multi[0]
        m.ends, m.n_ends = &ends[0], ends.shape[0]
        m.starts, m.n_starts = &starts[0], starts.shape[0]
        m.seg_of, m.pos_of = &seg_of[0], &pos_of[0]
        m.seg_ptr = &self.seg_ptr[0]
        m.seg_attrs = &self.seg_attrs[0] if self.seg_attrs.shape[0] else NULL
        m.off_seg = self.off_seg
        m.seg_fptr = &self.seg_fptr[0]
        m.seg_flab = &self.seg_flab[0] if self.seg_flab.shape[0] else NULL
        m.seg_dense = self.seg_dense
        m.tr = m.w + self.d.off_trans
        tr = np.asarray(w)[self.d.off_trans:self.d.off_trans + K * K].reshape(K, K)
        trmax = float(tr.max())
        ne, ns = self.ends.shape[0], self.starts.shape[0]
        e = np.asarray(etr)
        e[:ne * ns] = np.exp(tr[np.ix_(self.ends, self.starts)] - trmax).reshape(-1)
        e[ne * ns:] = e[:ne * ns].reshape(ne, ns).T.reshape(-1)
        m.ef, m.eb, m.trmax = &etr[0], &etr[ne * ns], trmax
        m.sent_ptr = &self.sent_ptr[0]
        m.n_params = self.n_params
        m.N = self.n_tokens
        return m

    cdef int run(self, Model* m, SentenceTask task, int n_threads, int chunk, int KB) except -1:
        cdef Spec spec
        spec.max_T, spec.K, spec.Y, spec.stride, spec.KB = self.max_len, self.n_labels, self.n_segment_labels, \
            self.stride, KB
        cdef Workspaces ws
        ws.size, ws.init, ws.release, ws.spec = sizeof(Work), work_init, work_release, &spec
        return run_sentences(self.n_sentences, n_threads, chunk, &ws, "out of memory for the segment lattices",
                             task, m)

    def _labels(self, labels):
        lab = np.ascontiguousarray(labels, dtype=np.int32)
        if lab.shape != (self.n_tokens,):
            raise ValueError("labels must have one entry per token")
        if lab.size and (lab.min() < 0 or lab.max() >= self.n_labels):
            raise ValueError("label out of range")
        return lab

    def _check_bad(self, bad_np):
        if bad_np.any():
            raise ValueError(f"labels of sentence {int(np.flatnonzero(bad_np)[0])} are no segmentation of "
                             "the lattice (position tags out of order, or a segment longer than its label allows)")

    def loglik(self, const double[::1] w, labels, int n_threads=1):
        """Negative log-likelihood of the labeling (position tag ids [N]) and its gradient."""
        lab = self._labels(labels)
        cdef const int[::1] lab_v = lab
        n_threads = max(1, n_threads)
        etr_np = np.empty(2 * self.ends.shape[0] * self.starts.shape[0])
        cdef Model m = self.model(w, etr_np)
        total_np = np.zeros(n_threads)
        grad_np = np.zeros((n_threads, self.n_params))
        tacc_np = np.zeros((n_threads, self.n_labels * self.n_labels))
        bad_np = np.zeros(max(self.n_sentences, 1), dtype=np.uint8)
        cdef double[::1] total = total_np
        cdef double[:, ::1] grad = grad_np
        cdef double[:, ::1] tacc = tacc_np
        cdef unsigned char[::1] bad = bad_np
        if self.n_sentences:
            m.y, m.total, m.grad, m.tacc, m.bad = &lab_v[0], &total[0], &grad[0, 0], &tacc[0, 0], &bad[0]
            self.run(&m, loglik_task, n_threads, 8, 0)
        self._check_bad(bad_np)
        g = grad_np.sum(axis=0) if n_threads > 1 else grad_np[0]
        g[self.d.off_trans:self.d.off_trans + self.n_labels * self.n_labels] += tacc_np.sum(axis=0)
        return float(total_np.sum()), g

    def viterbi(self, const double[::1] w, int n_threads=1):
        """Best segmentation of every sentence as position tag ids: (labels[N], scores[S])."""
        etr_np = np.empty(2 * self.ends.shape[0] * self.starts.shape[0])
        cdef Model m = self.model(w, etr_np)
        out_np = np.zeros(self.n_tokens, dtype=np.int32)
        score_np = np.zeros(self.n_sentences, dtype=np.float64)
        cdef int[::1] out = out_np
        cdef double[::1] score = score_np
        if self.n_sentences:
            m.labels, m.score = &out[0], &score[0]
            self.run(&m, viterbi_task, max(1, n_threads), 16, 0)
        return out_np, score_np

    def marginals(self, const double[::1] w, int n_threads=1):
        """Node marginals of the position tags [N, K] and log Z of every sentence [S]."""
        n_threads = max(1, n_threads)
        etr_np = np.empty(2 * self.ends.shape[0] * self.starts.shape[0])
        cdef Model m = self.model(w, etr_np)
        marg_np = np.zeros((self.n_tokens, self.n_labels))
        logz_np = np.zeros(self.n_sentences)
        tacc_np = np.zeros((n_threads, self.n_labels * self.n_labels))
        cdef double[:, ::1] marg = marg_np
        cdef double[::1] logz = logz_np
        cdef double[:, ::1] tacc = tacc_np
        if self.n_sentences:
            m.marg, m.logz, m.tacc = &marg[0, 0], &logz[0], &tacc[0, 0]
            self.run(&m, marginals_task, n_threads, 8, 0)
        return marg_np, logz_np

    def nbest(self, const double[::1] w, int k, int n_threads=1):
        """The k best segmentations of every sentence: (paths[k, N], scores[S, k], counts[S]); a
        sentence with fewer than k has counts[s] < k and the remaining rows -1."""
        if k < 1:
            raise ValueError("k must be at least 1")
        etr_np = np.empty(2 * self.ends.shape[0] * self.starts.shape[0])
        cdef Model m = self.model(w, etr_np)
        paths_np = np.full((k, self.n_tokens), -1, dtype=np.int32)
        scores_np = np.full((self.n_sentences, k), -np.inf)
        counts_np = np.zeros(self.n_sentences, dtype=np.int32)
        cdef int[:, ::1] paths = paths_np
        cdef double[:, ::1] scores = scores_np
        cdef int[::1] counts = counts_np
        if self.n_sentences:
            m.paths, m.score, m.counts, m.KB = &paths[0, 0], &scores[0, 0], &counts[0], k
            self.run(&m, nbest_task, max(1, n_threads), 4, k)
        return paths_np, scores_np, counts_np

    def counts(self, labels, sentence_weights=None, int n_threads=1):
        """Feature counts F(labels) [n_params], each sentence's weighted by sentence_weights."""
        lab = self._labels(labels)
        cdef const int[::1] lab_v = lab
        n_threads = max(1, n_threads)
        wts = (np.ones(self.n_sentences) if sentence_weights is None
               else np.ascontiguousarray(sentence_weights, dtype=np.float64))
        if wts.shape != (self.n_sentences,):
            raise ValueError("sentence_weights must have one entry per sentence")
        cdef double[::1] wts_v = wts
        w_np = np.zeros(self.n_params)
        etr_np = np.empty(2 * self.ends.shape[0] * self.starts.shape[0])
        cdef Model m = self.model(w_np, etr_np)
        grad_np = np.zeros((n_threads, self.n_params))
        tacc_np = np.zeros((n_threads, self.n_labels * self.n_labels))
        bad_np = np.zeros(max(self.n_sentences, 1), dtype=np.uint8)
        cdef double[:, ::1] grad = grad_np
        cdef double[:, ::1] tacc = tacc_np
        cdef unsigned char[::1] bad = bad_np
        if self.n_sentences:
            m.y, m.grad, m.tacc, m.bad, m.weights = &lab_v[0], &grad[0, 0], &tacc[0, 0], &bad[0], &wts_v[0]
            self.run(&m, counts_task, n_threads, 16, 0)
        self._check_bad(bad_np)
        g = grad_np.sum(axis=0)
        g[self.d.off_trans:self.d.off_trans + self.n_labels * self.n_labels] += tacc_np.sum(axis=0)
        return g

    def scores(self, const double[::1] w, labels, int n_threads=1):
        """Score of each sentence's labeling (position tag ids [N]) [S]."""
        lab = self._labels(labels)
        cdef const int[::1] lab_v = lab
        etr_np = np.empty(2 * self.ends.shape[0] * self.starts.shape[0])
        cdef Model m = self.model(w, etr_np)
        score_np = np.zeros(self.n_sentences)
        bad_np = np.zeros(max(self.n_sentences, 1), dtype=np.uint8)
        cdef double[::1] score = score_np
        cdef unsigned char[::1] bad = bad_np
        if self.n_sentences:
            m.y, m.score, m.bad = &lab_v[0], &score[0], &bad[0]
            self.run(&m, scores_task, max(1, n_threads), 16, 0)
        self._check_bad(bad_np)
        return score_np


# -- segment attributes of a batch (crftk.features.segments.RawSegments) -----------------------

cdef enum:
    BY_START = 0      # a value of the span's first token (%first, %before)
    BY_END = 1        # of its last token (%last, %after)
    BY_LEN = 2        # of its length (%len)
    JOINED = 3        # of its tokens' strings joined (%seg, %Seg, %segshape): a trie node's


cdef inline long long find(const long long[::1] keys, long long lo, long long hi, long long key) noexcept nogil:
    """Index of key in keys[lo:hi] (sorted), or -1."""
    cdef long long mid, end = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        if keys[mid] < key:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and keys[lo] == key:
        return lo
    return -1


cdef inline long long look(long long k, long long key, const long long[::1] lk_ptr, const char[::1] lk_dense,
                           const long long[::1] lk_keys, const long long[::1] lk_vals) noexcept nogil:
    """Lookup k of a line's packing: a dense table's entry, or a sorted key's value (lk_vals
    holds one per lk_keys entry); -1 absent."""
    cdef long long lo = lk_ptr[k], hi = lk_ptr[k + 1], i
    if lk_dense[k]:
        return lk_keys[lo + key] if 0 <= key < hi - lo else -1
    i = find(lk_keys, lo, hi, key)
    return lk_vals[i] if i >= 0 else -1


def span_attributes(const long long[::1] sent_ptr, int longest, const long long[:, ::1] by_start,
                    const long long[:, ::1] by_end, const long long[:, ::1] by_len,
                    const long long[:, ::1] alpha, const long long[::1] roots, const long long[::1] tr_key,
                    const long long[::1] tr_child, const long long[::1] child_ptr, long long n_alpha,
                    const long long[:, ::1] node_vals,
                    const long long[::1] line_ptr, const long long[::1] line_offset,
                    const int[::1] mac_kind, const int[::1] mac_src, const int[::1] mac_trie,
                    const long long[::1] mac_radix, const long long[::1] mac_lookup,
                    const long long[::1] lk_ptr, const char[::1] lk_dense, const long long[::1] lk_keys,
                    const long long[::1] lk_vals):
    """(seg_ptr int64 [N * longest + 1], seg_attrs int32) of every span of a batch, as
    SegmentSpace.encode gives them for lines of single-valued macros: per span (row
    ``t * longest + n - 1``) each line's attribute, in line order. A line's macros are
    ``line_ptr[i] .. line_ptr[i + 1]``: macro j's value is read by ``mac_kind[j]`` from row
    ``mac_src[j]`` (of by_start [., N], by_end [., N], by_len [., longest + 1] or node_vals
    [., nodes], the node of joined source ``mac_trie[j]``), packed as key * radix + value and
    looked up in ``mac_lookup[j]`` (the line's next packing step or its final table; -1: none).
    A trie node's children are ``tr_key[child_ptr[node]:child_ptr[node + 1]]`` (node * n_alpha
    + word, sorted), their nodes ``tr_child``. Rows come in increasing order: one pass."""
    cdef Py_ssize_t N = sent_ptr[sent_ptr.shape[0] - 1] if sent_ptr.shape[0] else 0
    cdef Py_ssize_t S = sent_ptr.shape[0] - 1, s, t, e, n, i, j, row, n_lines = line_ptr.shape[0] - 1
    cdef Py_ssize_t n_src = roots.shape[0], k, pos = 0, cap = N * 8 + 64
    cdef long long key, v, node, hit
    ptr_np = np.zeros(N * longest + 1, dtype=np.int64)
    cdef long long[::1] ptr = ptr_np
    cdef long long[::1] nodes = np.empty(n_src + 1, dtype=np.int64)   # each joined source's trie node
    cdef int* out = <int*> malloc(cap * sizeof(int))            # grown as rows fill it
    cdef int* grown
    if out == NULL:
        raise MemoryError()
    try:
        with nogil:
            for s in range(S):
                for t in range(sent_ptr[s], sent_ptr[s + 1]):
                    for k in range(n_src):
                        nodes[k] = roots[k]
                    for n in range(1, longest + 1):
                        row = t * longest + n - 1
                        e = t + n - 1
                        if e >= sent_ptr[s + 1]:
                            ptr[row + 1] = pos
                            continue
                        for k in range(n_src):
                            node = nodes[k]
                            if node >= 0:
                                v = alpha[k, e]
                                hit = -1 if v < 0 else find(tr_key, child_ptr[node], child_ptr[node + 1],
                                                            node * n_alpha + v)
                                nodes[k] = tr_child[hit] if hit >= 0 else -1
                        if pos + n_lines > cap:
                            cap = 2 * cap + n_lines
                            grown = <int*> realloc(out, cap * sizeof(int))
                            if grown == NULL:
                                with gil:
                                    raise MemoryError()
                            out = grown
                        for i in range(n_lines):
                            key = 0
                            for j in range(line_ptr[i], line_ptr[i + 1]):
                                if mac_kind[j] == BY_START:
                                    v = by_start[mac_src[j], t]
                                elif mac_kind[j] == BY_END:
                                    v = by_end[mac_src[j], e]
                                elif mac_kind[j] == BY_LEN:
                                    v = by_len[mac_src[j], n]
                                else:
                                    node = nodes[mac_trie[j]]
                                    v = node_vals[mac_src[j], node] if node >= 0 else -1
                                if v < 0:
                                    key = -1
                                    break
                                key = key * mac_radix[j] + v
                                if mac_lookup[j] >= 0:
                                    key = look(mac_lookup[j], key, lk_ptr, lk_dense, lk_keys, lk_vals)
                                    if key < 0:
                                        break
                            if key >= 0:
                                out[pos] = <int> (key + line_offset[i])
                                pos += 1
                        ptr[row + 1] = pos
        out_np = np.empty(pos, dtype=np.int32)
        if pos:
            memcpy(<void*> cnp.PyArray_DATA(out_np), out, pos * sizeof(int))
    finally:
        free(out)
    return ptr_np, out_np
