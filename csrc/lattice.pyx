# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Linear-chain lattice kernels: forward-backward, gradient, Viterbi, n-best.

A corpus is encoded as flat integer arrays (see crftk/features.py):

- ``sent_ptr[S+1]``: token offsets of the sentences;
- ``attr_ptr[N+1]``, ``attrs``: the state attributes of each token (CSR);
- ``eattr_ptr[N+1]``, ``eattrs``: the edge (transition) attributes of each token,
  i.e. CRF++ ``B`` templates with macros; the transition into token t uses
  the attributes of token t;
- ``feat_ptr[A+1]``, ``feat_label``: the state features of each attribute, one
  (attribute, label) pair each; the weight of feature f is ``w[f]``.

The parameter vector is laid out as::

    [ state features (F) | transitions L*L (prev*L+cur) | start L | end L | edge blocks E*L*L ]

Forward-backward works on exponentiated potentials with per-position scaling
(no overflow on long sentences, no logsumexp in the inner loop); Viterbi and
n-best work in log space.
"""

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, parallel, threadid
from libc.math cimport exp, log, INFINITY
from libc.stdlib cimport malloc, calloc, free
from libc.string cimport memset, memcpy

cnp.import_array()


cdef struct Data:
    const int* attr_ptr
    const int* attrs
    const int* eattr_ptr
    const int* eattrs
    const int* feat_ptr
    const int* feat_label
    int L
    int has_edges
    Py_ssize_t off_trans
    Py_ssize_t off_start
    Py_ssize_t off_end
    Py_ssize_t off_edge


cdef inline void state_scores(const Data* d, const double* w, Py_ssize_t t0, int T,
                              double* s) noexcept nogil:
    """s[t*L+y]: log potential of label y at token t0+t, with start/end weights."""
    cdef int L = d.L
    cdef int t, y, k, a, f
    cdef double* row
    memset(s, 0, T * L * sizeof(double))
    for t in range(T):
        row = s + t * L
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            a = d.attrs[k]
            for f in range(d.feat_ptr[a], d.feat_ptr[a + 1]):
                row[d.feat_label[f]] += w[f]
    for y in range(L):
        s[y] += w[d.off_start + y]
        s[(T - 1) * L + y] += w[d.off_end + y]


cdef inline int edge_scores(const Data* d, const double* w, Py_ssize_t tok,
                            double* M) noexcept nogil:
    """Log transition matrix into token ``tok`` when it has edge attributes.

    Returns 0 (and leaves M alone) when the token has none: the shared
    transition matrix applies.
    """
    cdef int L = d.L
    cdef int k, i
    cdef const double* blk
    if not d.has_edges or d.eattr_ptr[tok] == d.eattr_ptr[tok + 1]:
        return 0
    memcpy(M, w + d.off_trans, L * L * sizeof(double))
    for k in range(d.eattr_ptr[tok], d.eattr_ptr[tok + 1]):
        blk = w + d.off_edge + <Py_ssize_t> d.eattrs[k] * L * L
        for i in range(L * L):
            M[i] += blk[i]
    return 1


cdef inline double exp_shifted(const double* src, double* dst, int n) noexcept nogil:
    """dst = exp(src - max(src)); returns the max."""
    cdef int i
    cdef double m = src[0]
    for i in range(1, n):
        if src[i] > m:
            m = src[i]
    for i in range(n):
        dst[i] = exp(src[i] - m)
    return m


cdef struct Work:
    double* s        # T*L log state potentials
    double* q        # T*L exp state potentials, then S*beta/scale
    double* alpha    # T*L scaled forward, then node marginals
    double* beta     # T*L scaled backward
    double* scale    # T
    double* ebuf     # T*L*L exp transition matrices of positions with edge attributes
    double* mbuf     # L*L scratch
    const double** E # T pointers to the exp transition matrix into each position


cdef Work* work_new(int max_T, int L, int has_edges) noexcept nogil:
    """Per-thread buffers for sentences of up to max_T tokens; NULL when out of memory."""
    cdef Work* wk = <Work*> calloc(1, sizeof(Work))
    if wk == NULL:
        return NULL
    if max_T < 1:
        max_T = 1
    wk.s = <double*> malloc(max_T * L * sizeof(double))
    wk.q = <double*> malloc(max_T * L * sizeof(double))
    wk.alpha = <double*> malloc(max_T * L * sizeof(double))
    wk.beta = <double*> malloc(max_T * L * sizeof(double))
    wk.scale = <double*> malloc(max_T * sizeof(double))
    wk.mbuf = <double*> malloc(L * L * sizeof(double))
    wk.E = <const double**> malloc(max_T * sizeof(double*))
    if has_edges:
        wk.ebuf = <double*> malloc(<Py_ssize_t> max_T * L * L * sizeof(double))
    else:
        wk.ebuf = NULL
    if (wk.s == NULL or wk.q == NULL or wk.alpha == NULL or wk.beta == NULL
            or wk.scale == NULL or wk.mbuf == NULL or wk.E == NULL
            or (has_edges and wk.ebuf == NULL)):
        work_free(wk)
        return NULL
    return wk


cdef void work_free(Work* wk) noexcept nogil:
    if wk == NULL:
        return
    free(wk.s)
    free(wk.q)
    free(wk.alpha)
    free(wk.beta)
    free(wk.scale)
    free(wk.mbuf)
    free(wk.E)
    free(wk.ebuf)
    free(wk)


cdef double forward_backward(const Data* d, const double* w, const double* E_shared,
                             double shift_shared, Py_ssize_t t0, int T,
                             Work* wk, double* tacc, double scale) noexcept nogil:
    """Scaled forward-backward over one sentence; returns log Z.

    Afterwards alpha[t]*beta[t] are the node marginals and
    alpha[t-1,i]*E[t][i,j]*q[t,j] the edge marginals. When tacc is given,
    alpha[t-1,i]*q[t,j] is added to it for every position using the shared
    matrix (the gradient multiplies by that matrix once at the end); doing it
    in the backward sweep reads q[t] once for both. The weights are scale * w
    (SGD keeps them so); E_shared must already be built from the scaled ones.
    """
    cdef int L = d.L
    cdef int t, i, j
    cdef double logz, m, c, a, acc, shift, inv
    cdef double* at
    cdef const double* ap
    cdef const double* E
    cdef double* qt
    cdef double* bt

    state_scores(d, w, t0, T, wk.s)
    if scale != 1.0:
        for i in range(T * L):
            wk.s[i] *= scale
    # exp potentials of the transitions into each position
    for t in range(1, T):
        if edge_scores(d, w, t0 + t, wk.mbuf):
            if scale != 1.0:
                for i in range(L * L):
                    wk.mbuf[i] *= scale
            shift = exp_shifted(wk.mbuf, wk.ebuf + <Py_ssize_t> t * L * L, L * L)
            wk.E[t] = wk.ebuf + <Py_ssize_t> t * L * L
            wk.scale[t] = shift      # log shift, consumed below
        else:
            wk.E[t] = E_shared
            wk.scale[t] = shift_shared

    # forward
    logz = exp_shifted(wk.s, wk.alpha, L)
    c = 0.0
    for j in range(L):
        c += wk.alpha[j]
    for j in range(L):
        wk.alpha[j] /= c
    wk.scale[0] = c
    logz += log(c)
    for t in range(1, T):
        logz += wk.scale[t]
        m = exp_shifted(wk.s + t * L, wk.q + t * L, L)
        logz += m
        at = wk.alpha + t * L
        ap = wk.alpha + (t - 1) * L
        E = wk.E[t]
        memset(at, 0, L * sizeof(double))
        for i in range(L):
            a = ap[i]
            for j in range(L):
                at[j] += a * E[i * L + j]
        c = 0.0
        qt = wk.q + t * L
        for j in range(L):
            at[j] *= qt[j]
            c += at[j]
        inv = 1.0 / c
        for j in range(L):
            at[j] *= inv
        wk.scale[t] = c
        logz += log(c)

    # backward
    bt = wk.beta + (T - 1) * L
    for j in range(L):
        bt[j] = 1.0
    for t in range(T - 1, 0, -1):
        qt = wk.q + t * L
        bt = wk.beta + t * L
        inv = 1.0 / wk.scale[t]
        for j in range(L):
            qt[j] = qt[j] * bt[j] * inv
        E = wk.E[t]
        bt = wk.beta + (t - 1) * L
        if tacc != NULL and E == E_shared:
            ap = wk.alpha + (t - 1) * L
            for i in range(L):
                acc = 0.0
                a = ap[i]
                row = tacc + i * L
                for j in range(L):
                    acc += E[i * L + j] * qt[j]
                    row[j] += a * qt[j]
                bt[i] = acc
        else:
            for i in range(L):
                acc = 0.0
                for j in range(L):
                    acc += E[i * L + j] * qt[j]
                bt[i] = acc
    return logz


cdef double gold_score(const Data* d, const double* w, const double* s, Py_ssize_t t0,
                       int T, const int* y, double scale) noexcept nogil:
    """Score of the labeling y (s: state log potentials, already scaled; weights scale * w)."""
    cdef int L = d.L
    cdef int t, k
    cdef double total = 0.0, trans = 0.0
    for t in range(T):
        total += s[t * L + y[t]]
    for t in range(1, T):
        trans += w[d.off_trans + y[t - 1] * L + y[t]]
        if d.has_edges:
            for k in range(d.eattr_ptr[t0 + t], d.eattr_ptr[t0 + t + 1]):
                trans += w[d.off_edge + <Py_ssize_t> d.eattrs[k] * L * L + y[t - 1] * L + y[t]]
    return total + scale * trans


cdef void accumulate_gradient(const Data* d, Py_ssize_t t0, int T, const int* y,
                              Work* wk, double* g, double factor) noexcept nogil:
    """g += factor * (expected counts - observed counts) for one sentence.

    Expected transition counts of positions sharing the global matrix were
    gathered by forward_backward (its tacc argument).
    """
    cdef int L = d.L
    cdef int t, i, j, k, a, f
    cdef double ai, p
    cdef const double* ap
    cdef const double* qt
    cdef const double* E
    cdef double* blk
    cdef double* pt
    cdef const double* bt
    cdef Py_ssize_t tok

    # transitions and edge attributes (need alpha before it becomes the marginals)
    for t in range(1, T):
        tok = t0 + t
        ap = wk.alpha + (t - 1) * L
        qt = wk.q + t * L
        E = wk.E[t]
        if d.has_edges and d.eattr_ptr[tok] != d.eattr_ptr[tok + 1]:
            for i in range(L):
                ai = ap[i]
                for j in range(L):
                    wk.mbuf[i * L + j] = factor * ai * E[i * L + j] * qt[j]
            for i in range(L * L):
                g[d.off_trans + i] += wk.mbuf[i]
            for k in range(d.eattr_ptr[tok], d.eattr_ptr[tok + 1]):
                blk = g + d.off_edge + <Py_ssize_t> d.eattrs[k] * L * L
                for i in range(L * L):
                    blk[i] += wk.mbuf[i]
                blk[y[t - 1] * L + y[t]] -= factor
        g[d.off_trans + y[t - 1] * L + y[t]] -= factor

    # node marginals
    for t in range(T):
        pt = wk.alpha + t * L
        bt = wk.beta + t * L
        for j in range(L):
            pt[j] *= bt[j]
    for j in range(L):
        g[d.off_start + j] += factor * wk.alpha[j]
        g[d.off_end + j] += factor * wk.alpha[(T - 1) * L + j]
    g[d.off_start + y[0]] -= factor
    g[d.off_end + y[T - 1]] -= factor

    for t in range(T):
        pt = wk.alpha + t * L
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            a = d.attrs[k]
            for f in range(d.feat_ptr[a], d.feat_ptr[a + 1]):
                g[f] += factor * pt[d.feat_label[f]]
                if d.feat_label[f] == y[t]:
                    g[f] -= factor


cdef void accumulate_curvature(const Data* d, Py_ssize_t t0, int T, Work* wk, double* h) noexcept nogil:
    """h += p(1 - p) summed over the tokens, for every state feature, start and end weight.

    The Hessian diagonal if the tokens were independent (Sha & Pereira's feature
    independence approximation); needs the node marginals that
    accumulate_gradient leaves in wk.alpha.
    """
    cdef int L = d.L
    cdef int t, j, k, a, f
    cdef double p
    cdef const double* pt
    for j in range(L):
        p = wk.alpha[j]
        h[d.off_start + j] += p * (1.0 - p)
        p = wk.alpha[(T - 1) * L + j]
        h[d.off_end + j] += p * (1.0 - p)
    for t in range(T):
        pt = wk.alpha + t * L
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            a = d.attrs[k]
            for f in range(d.feat_ptr[a], d.feat_ptr[a + 1]):
                p = pt[d.feat_label[f]]
                h[f] += p * (1.0 - p)


cdef void viterbi_one(const Data* d, const double* w, Py_ssize_t t0, int T, Work* wk,
                      int* bp, int* out, double* score) noexcept nogil:
    """Best labeling of one sentence into out[0:T]; its score into score[0]."""
    cdef int L = d.L
    cdef int t, i, j, best_j
    cdef double v, best, di
    cdef const double* Tr
    cdef double* cur
    cdef double* prev
    state_scores(d, w, t0, T, wk.s)
    prev = wk.alpha
    for j in range(L):
        prev[j] = wk.s[j]
    for t in range(1, T):
        if edge_scores(d, w, t0 + t, wk.mbuf):
            Tr = wk.mbuf
        else:
            Tr = w + d.off_trans
        cur = wk.alpha + t * L
        for j in range(L):
            cur[j] = -INFINITY
            bp[t * L + j] = 0
        for i in range(L):
            di = prev[i]
            for j in range(L):
                v = di + Tr[i * L + j]
                if v > cur[j]:
                    cur[j] = v
                    bp[t * L + j] = i
        for j in range(L):
            cur[j] += wk.s[t * L + j]
        prev = cur
    best_j = 0
    best = prev[0]
    for j in range(1, L):
        if prev[j] > best:
            best = prev[j]
            best_j = j
    score[0] = best
    out[T - 1] = best_j
    for t in range(T - 1, 0, -1):
        out[t - 1] = bp[t * L + out[t]]


cdef inline int best_head(const double* sc, const int* cnt, const int* ptr, int L, int K,
                          const double* Tr, int j, double* best) noexcept nogil:
    """The list i whose next unused entry (sc[i*K + ptr[i]], plus Tr[i*L+j] when Tr is
    given) scores highest, its score in best[0]; -1 when every list is used up.

    The lists hold, best first, the partial paths ending in label i at one
    position; merging them gives the best paths one position further.
    """
    cdef int i, bi = -1
    cdef double v
    best[0] = -INFINITY
    for i in range(L):
        if ptr[i] < cnt[i]:
            v = sc[<Py_ssize_t> i * K + ptr[i]]
            if Tr != NULL:
                v += Tr[i * L + j]
            if bi < 0 or v > best[0]:
                best[0] = v
                bi = i
    return bi


cdef int nbest_one(const Data* d, const double* w, Py_ssize_t t0, int T, int K, Work* wk,
                   double* sc, int* py, int* pk, int* cnt, int* ptr,
                   int* out, Py_ssize_t out_stride, double* out_score) noexcept nogil:
    """Exact K best labelings (list Viterbi); returns how many were found.

    sc/py/pk[(t*L+y)*K+r]: score, previous label and previous rank of the
    r-th best partial path ending in label y at t; cnt[t*L+y] how many.
    """
    cdef int L = d.L
    cdef int t, i, j, r, bi, n
    cdef double best
    cdef const double* Tr
    cdef Py_ssize_t base, pbase
    state_scores(d, w, t0, T, wk.s)
    for j in range(L):
        sc[j * K] = wk.s[j]
        cnt[j] = 1
    for t in range(1, T):
        if edge_scores(d, w, t0 + t, wk.mbuf):
            Tr = wk.mbuf
        else:
            Tr = w + d.off_trans
        for j in range(L):
            base = (<Py_ssize_t> t * L + j) * K
            for i in range(L):
                ptr[i] = 0
            n = 0
            while n < K:
                bi = best_head(sc + (<Py_ssize_t> t - 1) * L * K, cnt + (t - 1) * L, ptr, L, K, Tr, j, &best)
                if bi < 0:
                    break
                sc[base + n] = best + wk.s[t * L + j]
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
        bi = best_head(sc + (<Py_ssize_t> T - 1) * L * K, cnt + (T - 1) * L, ptr, L, K, NULL, 0, &best)
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


cdef void add_counts(const Data* d, Py_ssize_t t0, int T, const int* y, double amount,
                     double* w, double* u, double c) noexcept nogil:
    """w += amount * F(y) and u += c * amount * F(y) for the labeling y of one sentence."""
    cdef int L = d.L
    cdef int t, k, a, f
    cdef Py_ssize_t idx
    for t in range(T):
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            a = d.attrs[k]
            for f in range(d.feat_ptr[a], d.feat_ptr[a + 1]):
                if d.feat_label[f] == y[t]:
                    w[f] += amount
                    u[f] += c * amount
                    break
        if t > 0:
            idx = d.off_trans + y[t - 1] * L + y[t]
            w[idx] += amount
            u[idx] += c * amount
            if d.has_edges:
                for k in range(d.eattr_ptr[t0 + t], d.eattr_ptr[t0 + t + 1]):
                    idx = d.off_edge + <Py_ssize_t> d.eattrs[k] * L * L + y[t - 1] * L + y[t]
                    w[idx] += amount
                    u[idx] += c * amount
    w[d.off_start + y[0]] += amount
    u[d.off_start + y[0]] += c * amount
    w[d.off_end + y[T - 1]] += amount
    u[d.off_end + y[T - 1]] += c * amount


cdef class Lattices:
    """The lattices of an encoded corpus, ready for the kernels."""

    cdef readonly int n_sentences, n_tokens, n_labels, n_features, n_edge_attrs, max_len
    cdef readonly Py_ssize_t n_params
    cdef const int[::1] sent_ptr
    cdef const int[::1] attr_ptr
    cdef const int[::1] attrs
    cdef const int[::1] eattr_ptr
    cdef const int[::1] eattrs
    cdef const int[::1] feat_ptr
    cdef const int[::1] feat_label
    cdef Data d

    def __init__(self, const int[::1] sent_ptr, const int[::1] attr_ptr, const int[::1] attrs,
                 const int[::1] eattr_ptr, const int[::1] eattrs,
                 const int[::1] feat_ptr, const int[::1] feat_label,
                 int n_labels, int n_edge_attrs):
        cdef Py_ssize_t S = sent_ptr.shape[0] - 1
        cdef Py_ssize_t N = attr_ptr.shape[0] - 1
        cdef int L = n_labels
        if S < 0 or N < 0 or sent_ptr[0] != 0 or sent_ptr[S] != N:
            raise ValueError("sent_ptr does not span the tokens")
        if eattr_ptr.shape[0] != N + 1:
            raise ValueError("eattr_ptr must have one entry per token plus one")
        if attr_ptr[N] != attrs.shape[0] or eattr_ptr[N] != eattrs.shape[0]:
            raise ValueError("attribute pointers do not match the attribute arrays")
        if feat_ptr.shape[0] < 1 or feat_ptr[0] != 0 or feat_ptr[feat_ptr.shape[0] - 1] != feat_label.shape[0]:
            raise ValueError("feat_ptr does not match feat_label")
        for name, ptr in (("sent_ptr", sent_ptr), ("attr_ptr", attr_ptr), ("eattr_ptr", eattr_ptr),
                          ("feat_ptr", feat_ptr)):
            if ptr.shape[0] > 1 and (np.diff(np.asarray(ptr)) < 0).any():
                raise ValueError(f"{name} must be non-decreasing")
        if attr_ptr[0] != 0 or eattr_ptr[0] != 0:
            raise ValueError("attribute pointers must start at 0")
        if L < 1:
            raise ValueError("need at least one label")
        a_np = np.asarray(attrs)
        if a_np.size and (a_np.min() < 0 or a_np.max() >= feat_ptr.shape[0] - 1):
            raise ValueError("attribute id out of range")
        e_np = np.asarray(eattrs)
        if e_np.size and (e_np.min() < 0 or e_np.max() >= n_edge_attrs):
            raise ValueError("edge attribute id out of range")
        fl = np.asarray(feat_label)
        if fl.size and (fl.min() < 0 or fl.max() >= L):
            raise ValueError("feature label out of range")
        lengths = np.diff(np.asarray(sent_ptr))
        if lengths.size and lengths.min() < 1:
            raise ValueError("empty sentence")
        self.sent_ptr = sent_ptr
        self.attr_ptr = attr_ptr
        self.attrs = attrs
        self.eattr_ptr = eattr_ptr
        self.eattrs = eattrs
        self.feat_ptr = feat_ptr
        self.feat_label = feat_label
        self.n_sentences = S
        self.n_tokens = N
        self.n_labels = L
        self.n_features = feat_label.shape[0]
        self.n_edge_attrs = n_edge_attrs
        self.max_len = int(lengths.max()) if lengths.size else 0
        self.n_params = self.n_features + L * L + 2 * L + <Py_ssize_t> n_edge_attrs * L * L
        self.d.attr_ptr = &attr_ptr[0]
        self.d.attrs = &attrs[0] if attrs.shape[0] else NULL
        self.d.eattr_ptr = &eattr_ptr[0]
        self.d.eattrs = &eattrs[0] if eattrs.shape[0] else NULL
        self.d.feat_ptr = &feat_ptr[0]
        self.d.feat_label = &feat_label[0] if feat_label.shape[0] else NULL
        self.d.L = L
        self.d.has_edges = 1 if eattrs.shape[0] > 0 else 0
        self.d.off_trans = self.n_features
        self.d.off_start = self.d.off_trans + L * L
        self.d.off_end = self.d.off_start + L
        self.d.off_edge = self.d.off_end + L

    cdef void _check_w(self, const double[::1] w) except *:
        if w.shape[0] != self.n_params:
            raise ValueError(f"weight vector has {w.shape[0]} entries, expected {self.n_params}")

    def _check_labels(self, labels):
        if labels.shape[0] != self.n_tokens:
            raise ValueError("labels must have one entry per token")
        lab = np.asarray(labels)
        if lab.size and (lab.min() < 0 or lab.max() >= self.n_labels):
            raise ValueError("label out of range")

    def _check_order(self, order):
        o = np.asarray(order)
        if o.size and (o.min() < 0 or o.max() >= self.n_sentences):
            raise ValueError("sentence index out of range")

    def loglik(self, const double[::1] w, const int[::1] labels, int n_threads=1, curvature=None):
        """Negative log-likelihood of the gold labels and its gradient.

        Returns (loss, grad): loss = sum over sentences of log Z - score(gold).
        curvature: an optional float64 array [n_params] that receives, in the same
        pass, sum over tokens of p(1 - p) of each state feature, start and end weight
        (see accumulate_curvature); its other entries are set to 0.
        """
        self._check_w(w)
        self._check_labels(labels)
        n_threads = max(1, n_threads)
        cdef int L = self.n_labels
        gbuf_np = np.zeros((n_threads, self.n_params), dtype=np.float64)
        tacc_np = np.zeros((n_threads, L * L), dtype=np.float64)
        flags_np = np.zeros(n_threads, dtype=np.int32)
        cdef double[:, ::1] gbuf = gbuf_np
        cdef double[:, ::1] tacc = tacc_np
        cdef int[::1] flags = flags_np
        cdef bint want_h = curvature is not None
        if want_h and (not isinstance(curvature, np.ndarray) or curvature.dtype != np.float64
                       or curvature.shape != (self.n_params,) or not curvature.flags.c_contiguous):
            raise ValueError(f"curvature must be a contiguous float64 array of {self.n_params} elements")
        hbuf_np = np.zeros((n_threads if want_h else 1, self.n_params if want_h else 1), dtype=np.float64)
        cdef double[:, ::1] hbuf = hbuf_np
        cdef double total = 0.0
        cdef Py_ssize_t s, t0
        cdef int T, tid
        cdef Work* wk
        cdef double logz
        cdef const Data* d = &self.d
        cdef const double* wp = &w[0]
        cdef const int* yp = &labels[0] if labels.shape[0] else NULL
        E_np = np.empty(L * L, dtype=np.float64)
        cdef double[::1] E_shared = E_np
        cdef double shift = exp_shifted(wp + d.off_trans, &E_shared[0], L * L)
        with nogil, parallel(num_threads=n_threads):
            tid = threadid()
            wk = work_new(self.max_len, L, d.has_edges)
            if wk == NULL:
                flags[tid] = 1
            for s in prange(self.n_sentences, schedule="dynamic", chunksize=8):
                if wk != NULL:
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    logz = forward_backward(d, wp, &E_shared[0], shift, t0, T, wk, &tacc[tid, 0], 1.0)
                    total += logz - gold_score(d, wp, wk.s, t0, T, yp + t0, 1.0)
                    accumulate_gradient(d, t0, T, yp + t0, wk, &gbuf[tid, 0], 1.0)
                    if want_h:
                        accumulate_curvature(d, t0, T, wk, &hbuf[tid, 0])
            work_free(wk)
        if flags_np.any():
            raise MemoryError("cannot allocate lattice buffers")
        if want_h:
            np.sum(hbuf_np, axis=0, out=curvature)
        grad = gbuf_np.sum(axis=0) if n_threads > 1 else gbuf_np[0]
        grad[self.d.off_trans:self.d.off_trans + L * L] += tacc_np.sum(axis=0) * E_np
        return total, grad

    def viterbi(self, const double[::1] w, int n_threads=1):
        """Best labeling of every sentence: (labels[N], scores[S])."""
        self._check_w(w)
        n_threads = max(1, n_threads)
        cdef int L = self.n_labels
        out_np = np.zeros(self.n_tokens, dtype=np.int32)
        score_np = np.zeros(self.n_sentences, dtype=np.float64)
        flags_np = np.zeros(n_threads, dtype=np.int32)
        cdef int[::1] out = out_np
        cdef double[::1] score = score_np
        cdef int[::1] flags = flags_np
        cdef Py_ssize_t s, t0
        cdef int T
        cdef Work* wk
        cdef int* bp
        cdef const Data* d = &self.d
        cdef const double* wp = &w[0]
        if self.n_sentences == 0:
            return out_np, score_np
        with nogil, parallel(num_threads=n_threads):
            wk = work_new(self.max_len, L, 0)
            bp = <int*> malloc(<Py_ssize_t> self.max_len * L * sizeof(int))
            if wk == NULL or bp == NULL:
                flags[threadid()] = 1
            for s in prange(self.n_sentences, schedule="dynamic", chunksize=16):
                if wk != NULL and bp != NULL:
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    viterbi_one(d, wp, t0, T, wk, bp, &out[t0], &score[s])
            work_free(wk)
            free(bp)
        if flags_np.any():
            raise MemoryError("cannot allocate lattice buffers")
        return out_np, score_np

    def marginals(self, const double[::1] w, int n_threads=1):
        """Node marginals [N, L] and log Z of every sentence [S]."""
        self._check_w(w)
        n_threads = max(1, n_threads)
        cdef int L = self.n_labels
        marg_np = np.zeros((self.n_tokens, L), dtype=np.float64)
        logz_np = np.zeros(self.n_sentences, dtype=np.float64)
        flags_np = np.zeros(n_threads, dtype=np.int32)
        cdef double[:, ::1] marg = marg_np
        cdef double[::1] logzs = logz_np
        cdef int[::1] flags = flags_np
        cdef Py_ssize_t s, t0
        cdef int T, t, j
        cdef Work* wk
        cdef const Data* d = &self.d
        cdef const double* wp = &w[0]
        E_np = np.empty(L * L, dtype=np.float64)
        cdef double[::1] E_shared = E_np
        cdef double shift = exp_shifted(wp + d.off_trans, &E_shared[0], L * L)
        if self.n_sentences == 0:
            return marg_np, logz_np
        with nogil, parallel(num_threads=n_threads):
            wk = work_new(self.max_len, L, d.has_edges)
            if wk == NULL:
                flags[threadid()] = 1
            for s in prange(self.n_sentences, schedule="dynamic", chunksize=8):
                if wk != NULL:
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    logzs[s] = forward_backward(d, wp, &E_shared[0], shift, t0, T, wk, NULL, 1.0)
                    for t in range(T):
                        for j in range(L):
                            marg[t0 + t, j] = wk.alpha[t * L + j] * wk.beta[t * L + j]
            work_free(wk)
        if flags_np.any():
            raise MemoryError("cannot allocate lattice buffers")
        return marg_np, logz_np

    def nbest(self, const double[::1] w, int k, int n_threads=1):
        """The k best labelings of every sentence.

        Returns (paths[k, N], scores[S, k], counts[S]); a sentence with fewer
        than k labelings has counts[s] < k and the remaining rows unset (-1).
        """
        self._check_w(w)
        if k < 1:
            raise ValueError("k must be at least 1")
        n_threads = max(1, n_threads)
        cdef int L = self.n_labels
        cdef int K = k
        paths_np = np.full((k, self.n_tokens), -1, dtype=np.int32)
        scores_np = np.full((self.n_sentences, k), -np.inf, dtype=np.float64)
        counts_np = np.zeros(self.n_sentences, dtype=np.int32)
        flags_np = np.zeros(n_threads, dtype=np.int32)
        cdef int[:, ::1] paths = paths_np
        cdef double[:, ::1] scores = scores_np
        cdef int[::1] counts = counts_np
        cdef int[::1] flags = flags_np
        cdef Py_ssize_t s, t0
        cdef int T
        cdef Work* wk
        cdef double* sc
        cdef int* py
        cdef int* pk
        cdef int* cnt
        cdef int* ptr
        cdef Py_ssize_t cells = <Py_ssize_t> self.max_len * L * K
        cdef const Data* d = &self.d
        cdef const double* wp = &w[0]
        if self.n_sentences == 0:
            return paths_np, scores_np, counts_np
        with nogil, parallel(num_threads=n_threads):
            wk = work_new(self.max_len, L, 0)
            sc = <double*> malloc(cells * sizeof(double))
            py = <int*> malloc(cells * sizeof(int))
            pk = <int*> malloc(cells * sizeof(int))
            cnt = <int*> malloc(<Py_ssize_t> self.max_len * L * sizeof(int))
            ptr = <int*> malloc(L * sizeof(int))
            if wk == NULL or sc == NULL or py == NULL or pk == NULL or cnt == NULL or ptr == NULL:
                flags[threadid()] = 1
            for s in prange(self.n_sentences, schedule="dynamic", chunksize=4):
                if flags[threadid()] == 0:
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    counts[s] = nbest_one(d, wp, t0, T, K, wk, sc, py, pk, cnt, ptr,
                                          &paths[0, t0], self.n_tokens, &scores[s, 0])
            work_free(wk)
            free(sc)
            free(py)
            free(pk)
            free(cnt)
            free(ptr)
        if flags_np.any():
            raise MemoryError("cannot allocate lattice buffers")
        return paths_np, scores_np, counts_np

    def perceptron_epoch(self, double[::1] w, double[::1] u, const int[::1] labels,
                         const int[::1] order, double c):
        """One pass of Collins' averaged perceptron over the sentences in ``order``.

        For each sentence, Viterbi with the current weights; on a mistake,
        w += F(gold) - F(predicted). u accumulates c times every update, c
        counting the sentences seen (starting at 1), so that the averaged
        weights are w - u / c. Updates w and u in place; returns
        (sentences with a mistake, tokens with a mistake, c after the pass).
        """
        self._check_w(w)
        if u.shape[0] != w.shape[0]:
            raise ValueError("u must match w")
        self._check_labels(labels)
        self._check_order(order)
        cdef int L = self.n_labels
        cdef Work* wk = work_new(self.max_len, L, 0)
        cdef int* bp = <int*> malloc(max(1, self.max_len) * L * sizeof(int))
        cdef int* pred = <int*> malloc(max(1, self.max_len) * sizeof(int))
        cdef double score
        cdef Py_ssize_t k, s, t0
        cdef int T, t, wrong
        cdef long n_sent = 0, n_tok = 0
        if wk == NULL or bp == NULL or pred == NULL:
            work_free(wk)
            free(bp)
            free(pred)
            raise MemoryError("cannot allocate lattice buffers")
        with nogil:
            for k in range(order.shape[0]):
                s = order[k]
                t0 = self.sent_ptr[s]
                T = <int> (self.sent_ptr[s + 1] - t0)
                viterbi_one(&self.d, &w[0], t0, T, wk, bp, pred, &score)
                wrong = 0
                for t in range(T):
                    if pred[t] != labels[t0 + t]:
                        wrong += 1
                if wrong:
                    n_sent += 1
                    n_tok += wrong
                    add_counts(&self.d, t0, T, &labels[t0], 1.0, &w[0], &u[0], c)
                    add_counts(&self.d, t0, T, pred, -1.0, &w[0], &u[0], c)
                c += 1.0
        work_free(wk)
        free(bp)
        free(pred)
        return n_sent, n_tok, c

    def sgd_epoch(self, double[::1] v, double a, const int[::1] labels, const int[::1] order,
                  double lam, double t0_rate, double t, int learn_transitions=1):
        """One pass of stochastic gradient descent with L2 (CRFsuite's l2sgd).

        The weights are a * v. For each sentence of ``order``, with the rate
        eta = 1 / (lam * (t0_rate + t)), the weights shrink by (1 - eta*lam)
        (only a changes) and take a step -eta times the sentence's gradient
        (only the parameters it touches change). lam is 2*c2/n_sentences.
        Updates v in place; returns (a, t after the pass, sum of the sentences'
        negative log-likelihoods, each at the weights before its step).
        """
        self._check_w(v)
        self._check_labels(labels)
        self._check_order(order)
        if not lam > 0 or not a > 0:
            raise ValueError("lam and a must be positive")
        cdef int L = self.n_labels
        cdef const Data* d = &self.d
        cdef Work* wk = work_new(self.max_len, L, d.has_edges)
        cdef double* E = <double*> malloc(L * L * sizeof(double))
        cdef double* M = <double*> malloc(L * L * sizeof(double))
        cdef double* tacc = <double*> malloc(L * L * sizeof(double))
        cdef Py_ssize_t k, s, t0, i, n
        cdef int T
        cdef double eta, shift, logz, factor, total = 0.0
        if wk == NULL or E == NULL or M == NULL or tacc == NULL:
            work_free(wk)
            free(E)
            free(M)
            free(tacc)
            raise MemoryError("cannot allocate lattice buffers")
        n = v.shape[0]
        with nogil:
            for k in range(order.shape[0]):
                s = order[k]
                t0 = self.sent_ptr[s]
                T = <int> (self.sent_ptr[s + 1] - t0)
                for i in range(L * L):
                    M[i] = a * v[d.off_trans + i]
                    tacc[i] = 0.0
                shift = exp_shifted(M, E, L * L)
                logz = forward_backward(d, &v[0], E, shift, t0, T, wk, tacc, a)
                total += logz - gold_score(d, &v[0], wk.s, t0, T, &labels[t0], a)
                eta = 1.0 / (lam * (t0_rate + t))
                a *= 1.0 - eta * lam
                factor = -eta / a
                accumulate_gradient(d, t0, T, &labels[t0], wk, &v[0], factor)
                if learn_transitions:
                    for i in range(L * L):
                        v[d.off_trans + i] += factor * tacc[i] * E[i]
                else:   # undo what accumulate_gradient put there
                    for i in range(L * L):
                        v[d.off_trans + i] = 0.0
                if a < 1e-9:      # fold the scale back into v before it underflows
                    for i in range(n):
                        v[i] *= a
                    a = 1.0
                t += 1.0
        work_free(wk)
        free(E)
        free(M)
        free(tacc)
        return a, t, total

    def state_matrix(self, const double[::1] w):
        """Log state potentials [N, L] of every token, start and end weights included."""
        self._check_w(w)
        cdef int L = self.n_labels
        out_np = np.zeros((self.n_tokens, L), dtype=np.float64)
        cdef double[:, ::1] out = out_np
        cdef Py_ssize_t s, t0
        if self.n_tokens == 0:
            return out_np
        with nogil:
            for s in range(self.n_sentences):
                t0 = self.sent_ptr[s]
                state_scores(&self.d, &w[0], t0, <int> (self.sent_ptr[s + 1] - t0), &out[t0, 0])
        return out_np

    def viterbi_scores(self, const double[::1] w):
        """Forward and backward Viterbi scores [N, L] (max-product messages).

        fwd[t, y]: best score of a labeling of tokens ..t ending in y at t;
        bwd[t, y]: best score of the rest of the sentence after t given y at t,
        so fwd + bwd is the best score of a labeling through (t, y).
        """
        self._check_w(w)
        cdef int L = self.n_labels
        fwd_np = np.zeros((self.n_tokens, L), dtype=np.float64)
        bwd_np = np.zeros((self.n_tokens, L), dtype=np.float64)
        cdef double[:, ::1] fwd = fwd_np
        cdef double[:, ::1] bwd = bwd_np
        cdef double* sbuf = <double*> malloc(max(1, self.max_len) * L * sizeof(double))
        cdef double* M = <double*> malloc(L * L * sizeof(double))
        cdef const double* Tr
        cdef Py_ssize_t s, t0
        cdef int T, t, i, j
        cdef double v, best
        if sbuf == NULL or M == NULL:
            free(sbuf)
            free(M)
            raise MemoryError()
        with nogil:
            for s in range(self.n_sentences):
                t0 = self.sent_ptr[s]
                T = <int> (self.sent_ptr[s + 1] - t0)
                state_scores(&self.d, &w[0], t0, T, sbuf)
                for j in range(L):
                    fwd[t0, j] = sbuf[j]
                    bwd[t0 + T - 1, j] = 0.0
                for t in range(1, T):
                    Tr = M if edge_scores(&self.d, &w[0], t0 + t, M) else &w[0] + self.d.off_trans
                    for j in range(L):
                        best = -INFINITY
                        for i in range(L):
                            v = fwd[t0 + t - 1, i] + Tr[i * L + j]
                            if v > best:
                                best = v
                        fwd[t0 + t, j] = best + sbuf[t * L + j]
                for t in range(T - 1, 0, -1):
                    Tr = M if edge_scores(&self.d, &w[0], t0 + t, M) else &w[0] + self.d.off_trans
                    for i in range(L):
                        best = -INFINITY
                        for j in range(L):
                            v = Tr[i * L + j] + sbuf[t * L + j] + bwd[t0 + t, j]
                            if v > best:
                                best = v
                        bwd[t0 + t - 1, i] = best
        free(sbuf)
        free(M)
        return fwd_np, bwd_np

    def sequence_scores(self, const double[::1] w, const int[::1] labels):
        """Score (unnormalised log potential) of the given labeling of each sentence."""
        self._check_w(w)
        self._check_labels(labels)
        cdef int L = self.n_labels
        out_np = np.zeros(self.n_sentences, dtype=np.float64)
        cdef double[::1] out = out_np
        cdef Py_ssize_t s, t0
        cdef int T
        cdef double* sbuf = <double*> malloc(max(1, self.max_len) * L * sizeof(double))
        if sbuf == NULL:
            raise MemoryError()
        with nogil:
            for s in range(self.n_sentences):
                t0 = self.sent_ptr[s]
                T = <int> (self.sent_ptr[s + 1] - t0)
                state_scores(&self.d, &w[0], t0, T, sbuf)
                out[s] = gold_score(&self.d, &w[0], sbuf, t0, T, &labels[t0], 1.0)
        free(sbuf)
        return out_np


cdef extern from *:
    """
    #ifdef _OPENMP
    #define CRFTK_OPENMP 1
    #else
    #define CRFTK_OPENMP 0
    #endif
    """
    int CRFTK_OPENMP


def openmp_enabled():
    """True when the kernels were compiled with OpenMP."""
    return bool(CRFTK_OPENMP)
