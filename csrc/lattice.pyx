# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The linear-chain CRF kernels over an encoded corpus: likelihood and gradient, Viterbi,
marginals, n-best, and the online passes (perceptron, SGD).

Each kernel runs over the sentences (``prange`` where sentences are independent):
for each sentence, potentials.pxd builds its tables from the features and weights,
chain.pxd runs inference on them, and potentials.pxd scatters marginals back onto
the parameters. The corpus arrays and the parameter layout are described in
potentials.pxd.
"""

import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, parallel, threadid
from libc.math cimport exp, log, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memset, memcpy

from chain cimport (ChainBuffers, chain_pool_new, chain_pool_free, exp_shifted,
                    chain_forward_backward, chain_edge_marginals, chain_node_marginals, chain_viterbi,
                    chain_nbest, chain_max_scores)
from potentials cimport (Features, state_scores, has_edge_attributes, log_transitions, exp_transitions,
                         labeling_score, scatter_edge, scatter_nodes, scatter_curvature, add_counts)

cnp.import_array()


cdef double forward_backward(const Features* d, const double* w, const double* E_shared,
                             double shift_shared, Py_ssize_t t0, int T,
                             ChainBuffers* b, double* tacc, double scale) noexcept nogil:
    """Forward-backward over the sentence at t0 (chain_forward_backward on its tables, built
    in b: b.ebuf holds the matrices of positions with edge attributes); returns log Z. The
    weights are scale * w (SGD keeps them so); E_shared must already be built from the
    scaled ones."""
    cdef int i
    state_scores(d, w, t0, T, b.s)
    if scale != 1.0:
        for i in range(T * d.L):
            b.s[i] *= scale
    exp_transitions(d, w, scale, t0, T, E_shared, shift_shared, b.mat, b.ebuf, b.E, b.shift)
    return chain_forward_backward(T, d.L, b.s, b.E, b.shift, b.q, b.alpha, b.beta, b.scale, tacc, E_shared)


cdef void accumulate_gradient(const Features* d, Py_ssize_t t0, int T, const int* y,
                              ChainBuffers* b, double* g, double factor) noexcept nogil:
    """g += factor * (expected counts - observed counts) for one sentence, after
    forward_backward (which gathered the expected counts of the positions sharing the
    transition matrix: its tacc argument). Leaves the node marginals in b.alpha."""
    cdef int L = d.L
    cdef int t
    for t in range(1, T):
        if has_edge_attributes(d, t0 + t):
            chain_edge_marginals(L, b.alpha + (t - 1) * L, b.E[t], b.q + t * L, factor, b.mat)
            scatter_edge(d, t0 + t, b.mat, y[t - 1], y[t], g, factor)
        g[d.off_trans + y[t - 1] * L + y[t]] -= factor
    chain_node_marginals(T, L, b.alpha, b.beta)
    scatter_nodes(d, t0, T, b.alpha, y, g, factor)


cdef inline void build_log_tables(const Features* d, const double* w, Py_ssize_t t0, int T,
                                  ChainBuffers* b) noexcept nogil:
    """The log tables of the sentence at t0 (for the max-product kernels): b.s and b.E."""
    state_scores(d, w, t0, T, b.s)
    log_transitions(d, w, t0, T, b.ebuf, b.E)


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
    cdef Features d

    def __init__(self, const int[::1] sent_ptr, const int[::1] attr_ptr, const int[::1] attrs,
                 const int[::1] eattr_ptr, const int[::1] eattrs,
                 const int[::1] feat_ptr, const int[::1] feat_label,
                 int n_labels, int n_edge_attrs, offsets=None):
        """The corpus arrays, the feature map, and the layout's offsets (trans, start, end,
        edge, n_params: crftk.structures.layout.ChainLayout.offsets; by default that layout's)."""
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
        if offsets is None:
            from crftk.structures.layout import ChainLayout
            offsets = ChainLayout(feat_label.shape[0], L, n_edge_attrs).offsets()
        off_trans, off_start, off_end, off_edge, n_params = offsets
        if (off_trans != self.n_features or off_start != off_trans + L * L or off_end != off_start + L
                or off_edge != off_end + L or n_params != off_edge + <Py_ssize_t> n_edge_attrs * L * L):
            raise ValueError("the layout's offsets do not fit the features, labels and edge attributes")
        self.n_params = n_params
        self.d.attr_ptr = &attr_ptr[0]
        self.d.attrs = &attrs[0] if attrs.shape[0] else NULL
        self.d.eattr_ptr = &eattr_ptr[0]
        self.d.eattrs = &eattrs[0] if eattrs.shape[0] else NULL
        self.d.feat_ptr = &feat_ptr[0]
        self.d.feat_label = &feat_label[0] if feat_label.shape[0] else NULL
        self.d.L = L
        self.d.has_edges = 1 if eattrs.shape[0] > 0 else 0
        self.d.off_trans = off_trans
        self.d.off_start = off_start
        self.d.off_end = off_end
        self.d.off_edge = off_edge

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
        (see scatter_curvature in potentials.pxd); its other entries are set to 0.
        """
        self._check_w(w)
        self._check_labels(labels)
        n_threads = max(1, n_threads)
        cdef int L = self.n_labels
        gbuf_np = np.zeros((n_threads, self.n_params), dtype=np.float64)
        tacc_np = np.zeros((n_threads, L * L), dtype=np.float64)
        cdef double[:, ::1] gbuf = gbuf_np
        cdef double[:, ::1] tacc = tacc_np
        cdef bint want_h = curvature is not None
        if want_h and (not isinstance(curvature, np.ndarray) or curvature.dtype != np.float64
                       or curvature.shape != (self.n_params,) or not curvature.flags.c_contiguous):
            raise ValueError(f"curvature must be a contiguous float64 array of {self.n_params} elements")
        hbuf_np = np.zeros((n_threads if want_h else 1, self.n_params if want_h else 1), dtype=np.float64)
        cdef double[:, ::1] hbuf = hbuf_np
        cdef double total = 0.0
        cdef Py_ssize_t s, t0
        cdef int T, tid
        cdef ChainBuffers* b = NULL
        cdef double logz
        cdef const Features* d = &self.d
        cdef const double* wp = &w[0]
        cdef const int* yp = &labels[0] if labels.shape[0] else NULL
        E_np = np.empty(L * L, dtype=np.float64)
        cdef double[::1] E_shared = E_np
        cdef double shift = exp_shifted(wp + d.off_trans, &E_shared[0], L * L)
        cdef ChainBuffers* pool = chain_pool_new(n_threads, self.max_len, L, 1, d.has_edges, 0)
        try:
            with nogil, parallel(num_threads=n_threads):
                tid = threadid()
                b = &pool[tid]
                for s in prange(self.n_sentences, schedule="dynamic", chunksize=8):
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    logz = forward_backward(d, wp, &E_shared[0], shift, t0, T, b, &tacc[tid, 0], 1.0)
                    total += logz - labeling_score(d, wp, b.s, t0, T, yp + t0, 1.0)
                    accumulate_gradient(d, t0, T, yp + t0, b, &gbuf[tid, 0], 1.0)
                    if want_h:
                        scatter_curvature(d, t0, T, b.alpha, &hbuf[tid, 0])
        finally:
            chain_pool_free(pool, n_threads)
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
        cdef int[::1] out = out_np
        cdef double[::1] score = score_np
        cdef Py_ssize_t s, t0
        cdef int T
        cdef ChainBuffers* b = NULL
        cdef const Features* d = &self.d
        cdef const double* wp = &w[0]
        if self.n_sentences == 0:
            return out_np, score_np
        cdef ChainBuffers* pool = chain_pool_new(n_threads, self.max_len, L, 1, d.has_edges, 0)
        try:
            with nogil, parallel(num_threads=n_threads):
                b = &pool[threadid()]
                for s in prange(self.n_sentences, schedule="dynamic", chunksize=16):
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    build_log_tables(d, wp, t0, T, b)
                    chain_viterbi(T, L, b.s, b.E, b.alpha, b.bp, &out[t0], &score[s])
        finally:
            chain_pool_free(pool, n_threads)
        return out_np, score_np

    def marginals(self, const double[::1] w, int n_threads=1):
        """Node marginals [N, L] and log Z of every sentence [S]."""
        self._check_w(w)
        n_threads = max(1, n_threads)
        cdef int L = self.n_labels
        marg_np = np.zeros((self.n_tokens, L), dtype=np.float64)
        logz_np = np.zeros(self.n_sentences, dtype=np.float64)
        cdef double[:, ::1] marg = marg_np
        cdef double[::1] logzs = logz_np
        cdef Py_ssize_t s, t0
        cdef int T, t, j
        cdef ChainBuffers* b = NULL
        cdef const Features* d = &self.d
        cdef const double* wp = &w[0]
        E_np = np.empty(L * L, dtype=np.float64)
        cdef double[::1] E_shared = E_np
        cdef double shift = exp_shifted(wp + d.off_trans, &E_shared[0], L * L)
        if self.n_sentences == 0:
            return marg_np, logz_np
        cdef ChainBuffers* pool = chain_pool_new(n_threads, self.max_len, L, 1, d.has_edges, 0)
        try:
            with nogil, parallel(num_threads=n_threads):
                b = &pool[threadid()]
                for s in prange(self.n_sentences, schedule="dynamic", chunksize=8):
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    logzs[s] = forward_backward(d, wp, &E_shared[0], shift, t0, T, b, NULL, 1.0)
                    for t in range(T):
                        for j in range(L):
                            marg[t0 + t, j] = b.alpha[t * L + j] * b.beta[t * L + j]
        finally:
            chain_pool_free(pool, n_threads)
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
        cdef int[:, ::1] paths = paths_np
        cdef double[:, ::1] scores = scores_np
        cdef int[::1] counts = counts_np
        cdef Py_ssize_t s, t0
        cdef int T
        cdef ChainBuffers* b = NULL
        cdef const Features* d = &self.d
        cdef const double* wp = &w[0]
        if self.n_sentences == 0:
            return paths_np, scores_np, counts_np
        cdef ChainBuffers* pool = chain_pool_new(n_threads, self.max_len, L, 1, d.has_edges, K)
        try:
            with nogil, parallel(num_threads=n_threads):
                b = &pool[threadid()]
                for s in prange(self.n_sentences, schedule="dynamic", chunksize=4):
                    # a test gcc cannot drop (always true) keeps its list merge branch-free
                    # and out of the stack: without it n-best runs 1.25x slower
                    if threadid() >= 0:
                        t0 = self.sent_ptr[s]
                        T = <int> (self.sent_ptr[s + 1] - t0)
                        build_log_tables(d, wp, t0, T, b)
                        counts[s] = chain_nbest(T, L, K, b.s, b.E, b.sc, b.py, b.pk, b.cnt, b.ptr,
                                                &paths[0, t0], self.n_tokens, &scores[s, 0])
        finally:
            chain_pool_free(pool, n_threads)
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
        cdef int[::1] pred = np.empty(max(1, self.max_len), dtype=np.int32)
        cdef double score
        cdef Py_ssize_t k, s, t0
        cdef int T, t, wrong
        cdef long n_sent = 0, n_tok = 0
        cdef ChainBuffers* b = chain_pool_new(1, self.max_len, L, 1, self.d.has_edges, 0)
        try:
            with nogil:
                for k in range(order.shape[0]):
                    s = order[k]
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    build_log_tables(&self.d, &w[0], t0, T, b)
                    chain_viterbi(T, L, b.s, b.E, b.alpha, b.bp, &pred[0], &score)
                    wrong = 0
                    for t in range(T):
                        if pred[t] != labels[t0 + t]:
                            wrong += 1
                    if wrong:
                        n_sent += 1
                        n_tok += wrong
                        add_counts(&self.d, t0, T, &labels[t0], 1.0, &w[0], &u[0], c)
                        add_counts(&self.d, t0, T, &pred[0], -1.0, &w[0], &u[0], c)
                    c += 1.0
        finally:
            chain_pool_free(b, 1)
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
        cdef const Features* d = &self.d
        cdef double[::1] E = np.empty(L * L), M = np.empty(L * L), tacc = np.empty(L * L)
        cdef Py_ssize_t k, s, t0, i, n
        cdef int T
        cdef double eta, shift, logz, factor, total = 0.0
        n = v.shape[0]
        cdef ChainBuffers* b = chain_pool_new(1, self.max_len, L, 1, d.has_edges, 0)
        try:
            with nogil:
                for k in range(order.shape[0]):
                    s = order[k]
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    for i in range(L * L):
                        M[i] = a * v[d.off_trans + i]
                        tacc[i] = 0.0
                    shift = exp_shifted(&M[0], &E[0], L * L)
                    logz = forward_backward(d, &v[0], &E[0], shift, t0, T, b, &tacc[0], a)
                    total += logz - labeling_score(d, &v[0], b.s, t0, T, &labels[t0], a)
                    eta = 1.0 / (lam * (t0_rate + t))
                    a *= 1.0 - eta * lam
                    factor = -eta / a
                    accumulate_gradient(d, t0, T, &labels[t0], b, &v[0], factor)
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
        finally:
            chain_pool_free(b, 1)
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
        cdef Py_ssize_t s, t0
        cdef int T
        cdef ChainBuffers* b = chain_pool_new(1, self.max_len, L, 1, self.d.has_edges, 0)
        try:
            with nogil:
                for s in range(self.n_sentences):
                    t0 = self.sent_ptr[s]
                    T = <int> (self.sent_ptr[s + 1] - t0)
                    build_log_tables(&self.d, &w[0], t0, T, b)
                    chain_max_scores(T, L, b.s, b.E, &fwd[t0, 0], &bwd[t0, 0])
        finally:
            chain_pool_free(b, 1)
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
                out[s] = labeling_score(&self.d, &w[0], sbuf, t0, T, &labels[t0], 1.0)
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
