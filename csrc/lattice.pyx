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
from libc.math cimport exp, log, sqrt, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memset, memcpy

from chain cimport (ChainBuffers, ChainTask, run_chains, chain_pool_new, chain_pool_free, exp_shifted,
                    vec_mat, mat_vec, mat_vec_transposed,
                    chain_forward_backward, chain_edge_marginals, chain_node_marginals, chain_viterbi,
                    chain_nbest, chain_max_scores, chain_restrict, chain_sum_product, chain_sum_product_shared, transpose,
                    chain_restricted_forward_backward, Moments, chain_count_moments,
                    chain_count_edge_moments)
from potentials cimport (Features, state_scores, has_edge_attributes, log_transitions, exp_transitions,
                         labeling_score, scatter_edge, scatter_nodes, scatter_curvature, add_counts)
from vecmath cimport outer_acc
from difference cimport Difference, difference_init, difference_free, difference_norm2, labeling_difference

cnp.import_array()


cdef double forward_backward(const Features* d, const double* w, const double* E_shared,
                             double shift_shared, Py_ssize_t t0, int T,
                             ChainBuffers* b, double* tacc, double scale,
                             const unsigned char* allowed, double* kept_q=NULL,
                             double* kept_max=NULL, const double* ET_shared=NULL) noexcept nogil:
    """Forward-backward over the sentence at t0 (chain_forward_backward on its tables, built
    in b: b.ebuf holds the matrices of positions with edge attributes); returns log Z. The
    weights are scale * w (SGD keeps them so); E_shared must already be built from the
    scaled ones. allowed (the sentence's [T*L] mask, or NULL): over the labelings it allows;
    kept_q, kept_max, ET_shared (E_shared's transpose, or NULL): see chain_sum_product_shared."""
    cdef int i
    state_scores(d, w, t0, T, b.s)
    if scale != 1.0:
        for i in range(T * d.L):
            b.s[i] *= scale
    if allowed != NULL:
        chain_restrict(b.s, allowed, <Py_ssize_t> T * d.L)
    exp_transitions(d, w, scale, t0, T, E_shared, shift_shared, b.mat, b.ebuf, b.E, b.shift)
    return chain_sum_product_shared(T, d.L, b.s, b.E, b.shift, b.q, b.alpha, b.beta, b.scale, tacc,
                                    E_shared, ET_shared, kept_q, kept_max)


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


cdef inline const unsigned char* sentence_mask(const unsigned char* allowed, Py_ssize_t t0,
                                               int L) noexcept nogil:
    """The [T*L] mask of the sentence at t0 in a corpus's [N*L] mask (NULL: none)."""
    return allowed + t0 * L if allowed != NULL else NULL


cdef struct Pass:
    # what one parallel kernel reads and writes, for its ChainTask
    const Features* d
    const int* sent_ptr
    const double* w
    const int* y                 # gold labels [N]
    const double* E_shared       # exp(transitions - shift)
    const double* ET_shared      # its transpose (NULL unless asked for)
    double shift
    Py_ssize_t n_params
    double* total                # per thread: [threads]
    double* grad                 # [n_params]: thread 0's gradient, the pass's result
    double* grad_rest            # [threads - 1, n_params]: the other threads' (thread_gradient)
    double* tacc                 # [threads, L*L]
    double* curv                 # [threads, n_params], or NULL
    int* labels                  # [N]
    double* score                # [S] (n-best: [S, K])
    double* marg                 # [N, L]
    double* logz                 # [S]
    int* paths                   # [K, N]
    int* counts                  # [S]
    int K
    Py_ssize_t N
    # partial annotation (NULL when every token is labeled): the labels each token allows [N*L],
    # and per sentence whether any token allows more than one
    const unsigned char* allowed
    const unsigned char* partial
    double* tacc_allowed         # [threads, L*L] tacc of the lattices restricted to the allowed labels
    unsigned char* infeasible    # [S] 1: the allowed lattice has no labeling
    # the counted labels' moments (NULL unless asked for): g[L] 1.0 for a counted label
    const double* g
    double* expected             # [threads] sum of E[G]
    double* grad_expected        # [threads, n_params] its gradient
    double* tacc_moments         # [threads, L*L]
    # one thread's scratch for the restricted pass and the moments: [threads, stride]
    double* scratch
    Py_ssize_t scratch_stride
    int* lists                   # [threads, max_T * (L + 1)]: the restricted pass's label lists
    Py_ssize_t lists_stride


cdef inline double* thread_gradient(const Pass* p, int tid) noexcept nogil:
    """The gradient thread tid adds into: thread 0 adds into the result itself, so that summing the
    threads' gradients needs no weight-sized array more than one per extra thread."""
    return p.grad if tid == 0 else p.grad_rest + (tid - 1) * p.n_params


cdef inline int sentence(const Pass* p, Py_ssize_t s, Py_ssize_t* t0) noexcept nogil:
    """The first token of sentence s (into t0) and its length."""
    t0[0] = p.sent_ptr[s]
    return <int> (p.sent_ptr[s + 1] - t0[0])


cdef inline Py_ssize_t scratch_size(int max_T, int L) noexcept nogil:
    """Doubles of one thread's scratch (Pass.scratch): the full pass's kept exp-states and maxima
    (T*L, T), the restricted pass's tables (q, alpha, beta: 3 T*L; scale: T; an edge matrix: L*L)
    and the moments' (q, A, B, node: 4 T*L; L)."""
    return 8 * <Py_ssize_t> max_T * L + 2 * max_T + <Py_ssize_t> L * L + L


cdef inline double* moments_scratch(const Pass* p, int T, int tid) noexcept nogil:
    cdef Py_ssize_t TL = <Py_ssize_t> T * p.d.L
    return p.scratch + tid * p.scratch_stride + 4 * TL + 2 * T + p.d.L * p.d.L


cdef void count_moments(const Pass* p, Py_ssize_t t0, int T, ChainBuffers* b, int tid) noexcept nogil:
    """After the sentence's full forward-backward in b: adds its E[G] to p.expected and the
    gradient of E[G] (the covariances of G with the features) to p.grad_expected."""
    cdef int L = p.d.L, t
    cdef Py_ssize_t TL = <Py_ssize_t> T * L
    cdef double* x = moments_scratch(p, T, tid)
    cdef double* g = p.grad_expected + tid * p.n_params
    cdef Moments m
    m.q, m.A, m.B, m.node, m.tmp = x, x + TL, x + 2 * TL, x + 3 * TL, x + 4 * TL
    p.expected[tid] += chain_count_moments(T, L, b.s, b.E, b.alpha, b.beta, b.scale, p.g, &m)
    for t in range(1, T):
        if has_edge_attributes(p.d, t0 + t):
            memset(b.mat, 0, L * L * sizeof(double))
            chain_count_edge_moments(L, t, b.E[t], b.alpha, b.beta, b.scale, p.g, &m, True, b.mat)
            scatter_edge(p.d, t0 + t, b.mat, 0, 0, g, 0.0)
        elif b.E[t] == p.E_shared:
            chain_count_edge_moments(L, t, b.E[t], b.alpha, b.beta, b.scale, p.g, &m, False,
                                     p.tacc_moments + tid * L * L)
    scatter_nodes(p.d, t0, T, m.node, NULL, g, 1.0)


cdef double restricted_gradient(const Pass* p, Py_ssize_t s, Py_ssize_t t0, int T, ChainBuffers* b,
                                int tid) noexcept nogil:
    """After the sentence's full forward-backward in b (which kept its exp-states in the scratch):
    the forward-backward of the lattice its partial annotation allows, and g += E[counts] -
    E_allowed[counts] (the gradient of log Z - log Z_allowed, one scatter of the marginals'
    difference); returns log Z_allowed (-inf, and p.infeasible[s] set, when the allowed lattice
    has no labeling)."""
    cdef int L = p.d.L, t, i
    cdef Py_ssize_t TL = <Py_ssize_t> T * L
    cdef double* kept_q = p.scratch + tid * p.scratch_stride
    cdef double* kept_max = kept_q + TL
    cdef double* rq = kept_max + T
    cdef double* ralpha = rq + TL
    cdef double* rbeta = ralpha + TL
    cdef double* rscale = rbeta + TL
    cdef double* rmat = rscale + T
    cdef int* lists = p.lists + tid * p.lists_stride
    cdef double* g = thread_gradient(p, tid)
    cdef double logz
    logz = chain_restricted_forward_backward(T, L, b.s, p.allowed + t0 * L, b.E, b.shift, kept_q, kept_max,
                                             rq, ralpha, rbeta, rscale, lists, lists + TL,
                                             p.tacc_allowed + tid * L * L, p.E_shared)
    if not (logz > -INFINITY and logz < INFINITY):
        p.infeasible[s] = 1
        return -INFINITY
    for t in range(1, T):
        if has_edge_attributes(p.d, t0 + t):
            chain_edge_marginals(L, b.alpha + (t - 1) * L, b.E[t], b.q + t * L, 1.0, b.mat)
            chain_edge_marginals(L, ralpha + (t - 1) * L, b.E[t], rq + t * L, 1.0, rmat)
            for i in range(L * L):
                b.mat[i] -= rmat[i]
            scatter_edge(p.d, t0 + t, b.mat, 0, 0, g, 0.0)
    chain_node_marginals(T, L, b.alpha, b.beta)
    if p.curv != NULL:
        scatter_curvature(p.d, t0, T, b.alpha, p.curv + tid * p.n_params)
    for i in range(TL):
        b.alpha[i] -= ralpha[i] * rbeta[i]
    scatter_nodes(p.d, t0, T, b.alpha, NULL, g, 1.0)
    return logz


cdef void loglik_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Pass* p = <const Pass*> job
    cdef Py_ssize_t t0
    cdef int T = sentence(p, s, &t0)
    cdef bint partial = p.partial != NULL and p.partial[s]
    cdef double* kept = p.scratch + tid * p.scratch_stride if partial else NULL
    cdef double logz = forward_backward(p.d, p.w, p.E_shared, p.shift, t0, T, b,
                                        p.tacc + tid * p.d.L * p.d.L, 1.0, NULL,
                                        kept, kept + <Py_ssize_t> T * p.d.L if partial else NULL,
                                        p.ET_shared)
    if p.g != NULL:
        count_moments(p, t0, T, b, tid)
    if partial:
        p.total[tid] += logz - restricted_gradient(p, s, t0, T, b, tid)
        return
    p.total[tid] += logz - labeling_score(p.d, p.w, b.s, t0, T, p.y + t0, 1.0)
    accumulate_gradient(p.d, t0, T, p.y + t0, b, thread_gradient(p, tid), 1.0)
    if p.curv != NULL:
        scatter_curvature(p.d, t0, T, b.alpha, p.curv + tid * p.n_params)


cdef void viterbi_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Pass* p = <const Pass*> job
    cdef Py_ssize_t t0
    cdef int T = sentence(p, s, &t0)
    build_log_tables(p.d, p.w, t0, T, b)
    if p.allowed != NULL:
        chain_restrict(b.s, p.allowed + t0 * p.d.L, <Py_ssize_t> T * p.d.L)
    chain_viterbi(T, p.d.L, b.s, b.E, b.alpha, b.bp, p.labels + t0, p.score + s)


cdef void marginals_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Pass* p = <const Pass*> job
    cdef Py_ssize_t t0
    cdef int T = sentence(p, s, &t0), L = p.d.L, i
    p.logz[s] = forward_backward(p.d, p.w, p.E_shared, p.shift, t0, T, b, NULL, 1.0,
                                 sentence_mask(p.allowed, t0, L), NULL, NULL, p.ET_shared)
    for i in range(T * L):
        p.marg[t0 * L + i] = b.alpha[i] * b.beta[i]


cdef void nbest_task(void* job, Py_ssize_t s, ChainBuffers* b, int tid) noexcept nogil:
    cdef const Pass* p = <const Pass*> job
    cdef Py_ssize_t t0
    cdef int T = sentence(p, s, &t0), n, k, r, t
    build_log_tables(p.d, p.w, t0, T, b)
    if p.allowed != NULL:
        chain_restrict(b.s, p.allowed + t0 * p.d.L, <Py_ssize_t> T * p.d.L)
    # a test gcc cannot drop (always true) keeps chain_nbest's list merge branch-free and
    # in registers: without it n-best runs 1.1-1.25x slower
    if tid >= 0:
        n = chain_nbest(T, p.d.L, p.K, b.s, b.E, b.sc, b.py, b.pk, b.cnt, b.ptr,
                        p.paths + t0, p.N, p.score + s * p.K)
        if p.allowed != NULL:
            # the lists also hold labelings through removed labels (score -inf), best first: drop them
            k = 0
            while k < n and p.score[s * p.K + k] > -INFINITY:
                k += 1
            for r in range(k, n):
                p.score[s * p.K + r] = -INFINITY
                for t in range(T):
                    p.paths[r * p.N + t0 + t] = -1
            n = k
        p.counts[s] = n


cdef struct Online:
    # one online epoch's workspace (crftk's passive-aggressive and AROW passes)
    ChainBuffers* b
    int* pred             # [max_len] the Viterbi labeling of the current sentence
    Difference g          # F(gold) - F(pred) of the current sentence


cdef inline int online_mistakes(const Features* d, const double* w, Py_ssize_t t0, int T, const int* gold,
                                Online* o, double* margin) noexcept nogil:
    """Viterbi on the sentence at t0 with weights w into o.pred; returns its mislabeled tokens
    and, when there are any, puts score(pred) - score(gold) in margin and F(gold) - F(pred) in
    o.g."""
    cdef double best
    cdef int t, wrong = 0
    build_log_tables(d, w, t0, T, o.b)
    chain_viterbi(T, d.L, o.b.s, o.b.E, o.b.alpha, o.b.bp, o.pred, &best)
    for t in range(T):
        if o.pred[t] != gold[t]:
            wrong += 1
    if wrong:
        margin[0] = best - labeling_score(d, w, o.b.s, t0, T, gold, 1.0)
        labeling_difference(&o.g, d, t0, T, gold, o.pred)
    return wrong


def occurrence_values(values, Py_ssize_t n_occurrences, name="values"):
    """Real values of attribute occurrences as the kernels read them (contiguous float64, one
    per occurrence, finite), or None for a binary encoding."""
    if values is None:
        return None
    v = np.ascontiguousarray(values, dtype=np.float64)
    if v.ndim != 1 or v.shape[0] != n_occurrences:
        raise ValueError(f"{name} must have one entry per attribute occurrence ({n_occurrences}), "
                         f"not shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError(f"{name}: an attribute value is not finite (NaN or infinite)")
    return v


cdef enum:
    AROW = 3       # MarginStep.method; 0, 1, 2 are the passive-aggressive types


cdef struct MarginStep:
    # how an online epoch steps on a mislabeled sentence (pa_epoch, arow_epoch)
    int method
    double aggressiveness      # PA-I and PA-II's C
    bint error_sensitive       # PA: the loss adds sqrt(mislabeled tokens), else 1
    double gamma               # AROW
    double c                   # PA: the sentences seen so far, counting from 1 (averaging)
    double* second             # PA: u, the c-weighted sum of the updates; AROW: the variances


cdef double margin_step(MarginStep* m, const Difference* g, double* w, int wrong,
                        double margin) noexcept nogil:
    """The update of w along g = F(gold) - F(predicted) of a sentence with ``wrong`` mislabeled
    tokens and score(predicted) - score(gold) = margin; returns its loss."""
    cdef Py_ssize_t i, q
    cdef double loss, norm2, tau, spread, alpha, v
    cdef double* u = m.second
    cdef double* var = m.second
    if m.method == AROW:
        loss = margin + wrong
        spread = m.gamma
        for i in range(g.n):
            q = g.index[i]
            spread += var[q] * g.value[q] * g.value[q]
        alpha = loss / spread
        for i in range(g.n):
            q = g.index[i]
            v = g.value[q]
            w[q] += alpha * var[q] * v
            var[q] = 1.0 / (1.0 / var[q] + v * v / m.gamma)
        return loss
    loss = margin + (sqrt(<double> wrong) if m.error_sensitive else 1.0)
    norm2 = difference_norm2(g)
    if norm2 > 0:       # else the labelings differ only in frozen parameters: no step moves them
        if m.method == 0:
            tau = loss / norm2
        elif m.method == 1:
            tau = min(m.aggressiveness, loss / norm2)
        else:
            tau = loss / (norm2 + 0.5 / m.aggressiveness)
        for i in range(g.n):
            q = g.index[i]
            v = tau * g.value[q]
            w[q] += v
            u[q] += m.c * v
    return loss


def check_chain_arrays(const int[::1] sent_ptr, const int[::1] attr_ptr, const int[::1] attrs,
                       const int[::1] eattr_ptr, const int[::1] eattrs, const int[::1] feat_ptr,
                       const int[::1] feat_label, int n_labels, int n_edge_attrs, offsets=None):
    """Refuse a chain's corpus arrays, feature map or layout offsets that the kernels cannot read
    (ValueError); returns (the sentence lengths, the offsets: by default ChainLayout's)."""
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
    # the offsets of crftk.features.layout.ChainLayout, the one layout these kernels read: stated
    # here, not imported, so that the kernels import nothing from the layers above them
    cdef Py_ssize_t F = feat_label.shape[0]
    chain_offsets = (F, F + L * L, F + L * L + L, F + L * L + 2 * L,
                     F + L * L + 2 * L + <Py_ssize_t> n_edge_attrs * L * L)
    if offsets is None:
        offsets = chain_offsets
    off_trans, off_start, off_end, off_edge, n_params = offsets
    if (off_trans, off_start, off_end, off_edge, n_params) != chain_offsets:
        raise ValueError("the layout's offsets do not fit the features, labels and edge attributes")
    return lengths, (off_trans, off_start, off_end, off_edge, n_params)


#: attribute ids below this fit in the 3 bytes of Lattices.pack_attributes
PACKED_IDS = 1 << 24


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
    cdef const double[::1] values
    cdef readonly bint valued
    cdef const unsigned char[::1] attrs24
    cdef Features d

    def __init__(self, const int[::1] sent_ptr, const int[::1] attr_ptr, const int[::1] attrs,
                 const int[::1] eattr_ptr, const int[::1] eattrs,
                 const int[::1] feat_ptr, const int[::1] feat_label,
                 int n_labels, int n_edge_attrs, offsets=None, values=None):
        """The corpus arrays, the feature map, and the layout's offsets (trans, start, end,
        edge, n_params: crftk.features.layout.ChainLayout.offsets; by default that layout's);
        values: the real value of each state attribute occurrence (float64 aligned with attrs),
        or None for a binary corpus (crftk.features.space.EncodedCorpus.values)."""
        cdef Py_ssize_t S = sent_ptr.shape[0] - 1
        cdef Py_ssize_t N = attr_ptr.shape[0] - 1
        cdef int L = n_labels
        lengths, offsets = check_chain_arrays(sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label,
                                              n_labels, n_edge_attrs, offsets)
        off_trans, off_start, off_end, off_edge, n_params = offsets
        values = occurrence_values(values, attrs.shape[0])
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
        self.n_params = n_params
        self.d.attr_ptr = &attr_ptr[0]
        self.d.attrs = &attrs[0] if attrs.shape[0] else NULL
        self.d.attrs24 = NULL
        self.d.eattr_ptr = &eattr_ptr[0]
        self.d.eattrs = &eattrs[0] if eattrs.shape[0] else NULL
        self.d.feat_ptr = &feat_ptr[0]
        self.d.feat_label = &feat_label[0] if feat_label.shape[0] else NULL
        self.d.values = NULL
        self.valued = values is not None
        if self.valued:
            self.values = values
            if values.shape[0]:
                self.d.values = &self.values[0]
        self.d.L = L
        self.d.has_edges = 1 if eattrs.shape[0] > 0 else 0
        self.d.off_trans = off_trans
        self.d.off_start = off_start
        self.d.off_end = off_end
        self.d.off_edge = off_edge

    def pack_attributes(self):
        """Hold the state attribute ids in 3 bytes each instead of 4, and let go of the int32 array:
        the ids a training run reads in every evaluation (4.0M on CoNLL-2000: 15.3 -> 11.5 MiB).
        Every kernel reads the same ids, so every result is the same. Returns the packed bytes
        (3 per id, little-endian, one byte of padding), or None where the ids do not fit."""
        cdef Py_ssize_t n = self.attrs.shape[0], start, stop, step = 1 << 20
        if self.d.attrs24 != NULL:
            return np.asarray(self.attrs24)
        if n == 0 or self.feat_ptr.shape[0] - 1 > PACKED_IDS:
            return None
        ids = np.asarray(self.attrs)
        packed = np.empty(3 * n + 1, dtype=np.uint8)
        packed[3 * n] = 0
        for start in range(0, n, step):         # by blocks: no temporary of the corpus's size
            stop = min(n, start + step)
            packed[3 * start:3 * stop].reshape(-1, 3)[:] = (
                ids[start:stop].astype("<u4").view(np.uint8).reshape(-1, 4)[:, :3])
        del ids
        self.attrs24 = packed
        self.d.attrs24 = &self.attrs24[0]
        self.d.attrs = NULL
        self.attrs = np.zeros(0, dtype=np.int32)
        return packed

    cdef void _check_w(self, const double[::1] w) except *:
        if w.shape[0] != self.n_params:
            raise ValueError(f"weight vector has {w.shape[0]} entries, expected {self.n_params}")

    def _check_labels(self, labels, partial=False):
        """One label id per token; with ``partial``, -1 too (a token without one gold label)."""
        if labels.shape[0] != self.n_tokens:
            raise ValueError("labels must have one entry per token")
        lab = np.asarray(labels)
        if lab.size and (lab.min() < (-1 if partial else 0) or lab.max() >= self.n_labels):
            raise ValueError("label out of range")

    def _check_order(self, order):
        o = np.asarray(order)
        if o.size and (o.min() < 0 or o.max() >= self.n_sentences):
            raise ValueError("sentence index out of range")

    cdef Pass start(self, const double[::1] w, double[::1] E_shared=None, double[::1] ET_shared=None) except *:
        """A Pass over this corpus at weights w; with E_shared [L*L], which receives
        exp(transitions - shift), for the sum-product kernels, and ET_shared [L*L] (optional),
        which receives its transpose (their backward steps are faster with it)."""
        self._check_w(w)
        cdef Pass p
        memset(&p, 0, sizeof(Pass))
        p.d = &self.d
        p.sent_ptr = &self.sent_ptr[0]
        p.w = &w[0]
        p.n_params = self.n_params
        p.N = self.n_tokens
        if E_shared is not None:
            p.E_shared = &E_shared[0]
            p.shift = exp_shifted(p.w + self.d.off_trans, &E_shared[0], self.n_labels * self.n_labels)
            if ET_shared is not None:
                transpose(p.E_shared, self.n_labels, &ET_shared[0])
                p.ET_shared = &ET_shared[0]
        return p

    cdef int run(self, Pass* p, ChainTask task, int n_threads, int chunk, int K) except -1:
        return run_chains(self.n_sentences, n_threads, chunk, self.max_len, self.n_labels, 1,
                          self.d.has_edges, K, task, p)

    def _check_allowed(self, allowed):
        """A mask of the labels each token allows as the kernels read it: uint8 [N*L], or None."""
        if allowed is None:
            return None
        a = np.asarray(allowed)
        if a.shape != (self.n_tokens, self.n_labels):
            raise ValueError(f"allowed must be [{self.n_tokens}, {self.n_labels}] (tokens x labels), "
                             f"not {a.shape}")
        if a.dtype == np.bool_:
            a = a.view(np.uint8)
        elif a.dtype != np.uint8:
            raise ValueError("allowed must be a uint8 or bool array")
        a = np.ascontiguousarray(a).reshape(-1)
        if a.size and self.n_labels and not a.reshape(self.n_tokens, self.n_labels).any(axis=1).all():
            raise ValueError("allowed: a token allows no label")
        return a

    def _partial_sentences(self, labels, allowed):
        """Per sentence 1 when one of its tokens has no single gold label (label -1)."""
        if allowed is None:
            raise ValueError("labels of -1 (partially annotated tokens) need the allowed mask")
        lab = np.asarray(labels)
        known = lab >= 0
        if not allowed.reshape(self.n_tokens, self.n_labels)[np.flatnonzero(known), lab[known]].all():
            raise ValueError("allowed: a labeled token does not allow its own label")
        starts = np.asarray(self.sent_ptr)[:self.n_sentences]
        if not starts.size:
            return np.zeros(0, np.uint8)
        return (np.add.reduceat((~known).astype(np.int64), starts) > 0).astype(np.uint8)

    def loglik(self, const double[::1] w, const int[::1] labels, int n_threads=1, curvature=None,
               allowed=None, entity=None):
        """Negative log-likelihood of the gold labels and its gradient.

        Returns (loss, grad): loss = sum over sentences of log Z - score(gold).
        curvature: an optional float64 array [n_params] that receives, in the same
        pass, sum over tokens of p(1 - p) of each state feature, start and end weight
        (see scatter_curvature in potentials.pxd); its other entries are set to 0.

        Partial annotation (Tsuboi et al. 2008): labels -1 where a token has no single gold
        label, and allowed [N, L] (uint8 or bool) the labels each token allows; a sentence
        with such a token adds log Z - log Z_allowed, the log of its annotation's marginal
        likelihood, and its gradient E[counts] - E_allowed[counts].

        entity [L] (1 for the labels counted): then returns (loss, grad, expected,
        expected_grad): the summed expected number of tokens with a counted label under the
        model (unrestricted) and its gradient.
        """
        cdef Py_ssize_t S = self.n_sentences
        n_threads = max(1, n_threads)
        cdef int L = self.n_labels
        self._check_labels(labels, partial=True)
        lab = np.asarray(labels)
        mask = self._check_allowed(allowed)
        partial_np = None
        if lab.size and lab.min() < 0:
            partial_np = self._partial_sentences(lab, mask)
        cdef bint want_h = curvature is not None
        cdef bint moments = entity is not None
        if want_h and (not isinstance(curvature, np.ndarray) or curvature.dtype != np.float64
                       or curvature.shape != (self.n_params,) or not curvature.flags.c_contiguous):
            raise ValueError(f"curvature must be a contiguous float64 array of {self.n_params} elements")
        E_np = np.empty(L * L)
        ET_np = np.empty(L * L)
        cdef Pass p = self.start(w, E_np, ET_np)
        total_np = np.zeros(n_threads)
        grad = np.zeros(self.n_params)
        rest_np = np.zeros((max(1, n_threads - 1), self.n_params if n_threads > 1 else 1))
        tacc_np = np.zeros((n_threads, L * L))
        hbuf_np = np.zeros((n_threads if want_h else 1, self.n_params if want_h else 1))
        cdef double[::1] total = total_np
        cdef double[::1] grad_v = grad
        cdef double[:, ::1] rest = rest_np, tacc = tacc_np, hbuf = hbuf_np
        p.y = &labels[0] if labels.shape[0] else NULL
        p.total, p.grad, p.grad_rest, p.tacc = &total[0], &grad_v[0], &rest[0, 0], &tacc[0, 0]
        p.curv = &hbuf[0, 0] if want_h else NULL
        # what a partial annotation and the moments add (kept alive until the pass is over)
        cdef const unsigned char[::1] allowed_v, partial_v
        cdef unsigned char[::1] infeasible_v
        cdef double[::1] g_v, expected_v
        cdef double[:, ::1] tacc_a, tacc_m, gexp, scratch
        infeasible_np = np.zeros(max(1, S), dtype=np.uint8)
        tacc_a_np = np.zeros((n_threads, L * L))
        tacc_m_np = np.zeros((n_threads, L * L))
        expected_np = np.zeros(n_threads)
        gexp_np = np.zeros((n_threads if moments else 1, self.n_params if moments else 1))
        if partial_np is not None and partial_np.any():
            allowed_v, partial_v, infeasible_v, tacc_a = mask, partial_np, infeasible_np, tacc_a_np
            p.allowed, p.partial, p.infeasible = &allowed_v[0], &partial_v[0], &infeasible_v[0]
            p.tacc_allowed = &tacc_a[0, 0]
        if moments:
            g_np = np.ascontiguousarray(entity, dtype=np.float64)
            if g_np.shape != (L,):
                raise ValueError(f"entity must have one entry per label ({L})")
            g_v, expected_v, tacc_m, gexp = g_np, expected_np, tacc_m_np, gexp_np
            p.g, p.expected, p.tacc_moments, p.grad_expected = &g_v[0], &expected_v[0], &tacc_m[0, 0], &gexp[0, 0]
        cdef int[:, ::1] lists
        if p.partial != NULL or moments:
            scratch_np = np.empty((n_threads, scratch_size(self.max_len, L)))
            scratch = scratch_np
            p.scratch, p.scratch_stride = &scratch[0, 0], scratch_np.shape[1]
            lists_np = np.empty((n_threads, max(1, self.max_len) * (L + 1)), dtype=np.int32)
            lists = lists_np
            p.lists, p.lists_stride = &lists[0, 0], lists_np.shape[1]
        self.run(&p, loglik_task, n_threads, 8, 0)
        if p.partial != NULL and infeasible_np.any():
            raise ValueError(f"sentence {int(np.flatnonzero(infeasible_np)[0])}: no labeling is consistent with "
                             f"its partial annotation (every one it allows has zero probability)")
        if want_h:
            np.sum(hbuf_np, axis=0, out=curvature)
        for i in range(n_threads - 1):       # the order of a sum over the threads' rows: same bits
            grad += rest_np[i]
        grad[self.d.off_trans:self.d.off_trans + L * L] += (tacc_np.sum(axis=0) - tacc_a_np.sum(axis=0)) * E_np
        if not moments:
            return float(total_np.sum()), grad
        grad_e = gexp_np.sum(axis=0) if n_threads > 1 else gexp_np[0]
        grad_e[self.d.off_trans:self.d.off_trans + L * L] += tacc_m_np.sum(axis=0) * E_np
        return float(total_np.sum()), grad, float(expected_np.sum()), grad_e

    cdef void _restrict(self, Pass* p, allowed, const unsigned char[::1] view):
        """Point the pass at a checked mask (decoding over the labelings it allows)."""
        if allowed is not None and view.shape[0]:
            p.allowed = &view[0]

    def viterbi(self, const double[::1] w, int n_threads=1, allowed=None):
        """Best labeling of every sentence: (labels[N], scores[S]); allowed [N, L] (uint8 or
        bool, or None): the best of the labelings that keep to it."""
        mask = self._check_allowed(allowed)
        cdef const unsigned char[::1] mask_v = mask if mask is not None else np.zeros(0, np.uint8)
        cdef Pass p = self.start(w)
        self._restrict(&p, mask, mask_v)
        out_np = np.zeros(self.n_tokens, dtype=np.int32)
        score_np = np.zeros(self.n_sentences, dtype=np.float64)
        cdef int[::1] out = out_np
        cdef double[::1] score = score_np
        if self.n_sentences:
            p.labels, p.score = &out[0], &score[0]
            self.run(&p, viterbi_task, max(1, n_threads), 16, 0)
        return out_np, score_np

    def marginals(self, const double[::1] w, int n_threads=1, allowed=None):
        """Node marginals [N, L] and log Z of every sentence [S]; allowed as in viterbi: those
        of the lattice of the labelings it allows."""
        mask = self._check_allowed(allowed)
        cdef const unsigned char[::1] mask_v = mask if mask is not None else np.zeros(0, np.uint8)
        E_np = np.empty(self.n_labels * self.n_labels)    # outlive the Pass that points into them
        ET_np = np.empty(self.n_labels * self.n_labels)
        cdef Pass p = self.start(w, E_np, ET_np)
        self._restrict(&p, mask, mask_v)
        marg_np = np.zeros((self.n_tokens, self.n_labels), dtype=np.float64)
        logz_np = np.zeros(self.n_sentences, dtype=np.float64)
        cdef double[:, ::1] marg = marg_np
        cdef double[::1] logzs = logz_np
        if self.n_sentences:
            p.marg, p.logz = &marg[0, 0], &logzs[0]
            self.run(&p, marginals_task, max(1, n_threads), 8, 0)
        return marg_np, logz_np

    def nbest(self, const double[::1] w, int k, int n_threads=1, allowed=None):
        """The k best labelings of every sentence (allowed as in viterbi: of those it allows).

        Returns (paths[k, N], scores[S, k], counts[S]); a sentence with fewer
        than k labelings has counts[s] < k and the remaining rows unset (-1).
        """
        if k < 1:
            raise ValueError("k must be at least 1")
        mask = self._check_allowed(allowed)
        cdef const unsigned char[::1] mask_v = mask if mask is not None else np.zeros(0, np.uint8)
        cdef Pass p = self.start(w)
        self._restrict(&p, mask, mask_v)
        paths_np = np.full((k, self.n_tokens), -1, dtype=np.int32)
        scores_np = np.full((self.n_sentences, k), -np.inf, dtype=np.float64)
        counts_np = np.zeros(self.n_sentences, dtype=np.int32)
        cdef int[:, ::1] paths = paths_np
        cdef double[:, ::1] scores = scores_np
        cdef int[::1] counts = counts_np
        if self.n_sentences:
            p.paths, p.score, p.counts, p.K = &paths[0, 0], &scores[0, 0], &counts[0], k
            self.run(&p, nbest_task, max(1, n_threads), 4, k)
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
        cdef Pass p = self.start(w)
        if u.shape[0] != w.shape[0]:
            raise ValueError("u must match w")
        self._check_labels(labels)
        self._check_order(order)
        cdef int L = self.n_labels
        cdef int[::1] pred = np.empty(max(1, self.max_len), dtype=np.int32)
        cdef double score
        cdef Py_ssize_t k, t0
        cdef int T, t, wrong
        cdef long n_sent = 0, n_tok = 0
        cdef ChainBuffers* b = chain_pool_new(1, self.max_len, L, 1, self.d.has_edges, 0)
        try:
            with nogil:
                for k in range(order.shape[0]):
                    T = sentence(&p, order[k], &t0)
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
        cdef Pass p = self.start(v)
        self._check_labels(labels)
        self._check_order(order)
        if not lam > 0 or not a > 0:
            raise ValueError("lam and a must be positive")
        cdef int L = self.n_labels
        cdef const Features* d = &self.d
        cdef double[::1] E = np.empty(L * L), M = np.empty(L * L), tacc = np.empty(L * L)
        cdef Py_ssize_t k, t0, i, n
        cdef int T
        cdef double eta, shift, logz, factor, total = 0.0
        n = v.shape[0]
        cdef ChainBuffers* b = chain_pool_new(1, self.max_len, L, 1, d.has_edges, 0)
        try:
            with nogil:
                for k in range(order.shape[0]):
                    T = sentence(&p, order[k], &t0)
                    for i in range(L * L):
                        M[i] = a * v[d.off_trans + i]
                        tacc[i] = 0.0
                    shift = exp_shifted(&M[0], &E[0], L * L)
                    logz = forward_backward(d, &v[0], &E[0], shift, t0, T, b, &tacc[0], a, NULL)
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

    cdef int _online_new(self, Online* o, const unsigned char[::1] frozen) except -1:
        """The workspace of an online epoch (frozen: one flag per parameter, or empty)."""
        if frozen.shape[0] not in (0, self.n_params):
            raise ValueError("frozen must have one entry per parameter")
        sp = np.asarray(self.sent_ptr, dtype=np.int64)
        touched = (np.diff(np.asarray(self.attr_ptr, dtype=np.int64)[sp])
                   + np.diff(np.asarray(self.eattr_ptr, dtype=np.int64)[sp]) + np.diff(sp) + 1)
        cdef Py_ssize_t capacity = 2 * int(touched.max()) if touched.size else 1
        memset(o, 0, sizeof(Online))
        o.b = chain_pool_new(1, self.max_len, self.n_labels, 1, self.d.has_edges, 0)
        o.pred = <int*> malloc(max(1, self.max_len) * sizeof(int))
        if (o.pred == NULL or difference_init(&o.g, self.n_params, capacity,
                                              &frozen[0] if frozen.shape[0] else NULL) != 0):
            self._online_free(o)
            raise MemoryError()
        return 0

    cdef void _online_free(self, Online* o):
        chain_pool_free(o.b, 1)
        free(o.pred)
        difference_free(&o.g)

    def _online_checks(self, w, state, labels, order, frozen):
        """The frozen flags as the kernel reads them, after the shared checks of an online epoch."""
        self._check_w(w)
        if state.shape[0] != w.shape[0]:
            raise ValueError("the second weight vector must match w")
        self._check_labels(labels)
        self._check_order(order)
        if frozen is None:
            return np.zeros(0, dtype=np.uint8)
        return np.ascontiguousarray(frozen, dtype=bool).view(np.uint8)

    cdef tuple _margin_epoch(self, double[::1] w, double[::1] second, const int[::1] labels,
                             const int[::1] order, frozen, MarginStep* m):
        """The pass that pa_epoch and arow_epoch share (second: u or the variances); returns
        (sentences with a mistake, tokens with a mistake, sum of the losses)."""
        cdef const unsigned char[::1] fz = self._online_checks(w, second, labels, order, frozen)
        cdef Pass p = self.start(w)
        cdef Online o
        cdef Py_ssize_t k, t0
        cdef int T, wrong
        cdef long n_sent = 0, n_tok = 0
        cdef double margin, total = 0.0
        m.second = &second[0]
        self._online_new(&o, fz)
        try:
            with nogil:
                for k in range(order.shape[0]):
                    T = sentence(&p, order[k], &t0)
                    wrong = online_mistakes(&self.d, &w[0], t0, T, &labels[t0], &o, &margin)
                    if wrong:
                        n_sent += 1
                        n_tok += wrong
                        total += margin_step(m, &o.g, &w[0], wrong, margin)
                    m.c += 1.0
        finally:
            self._online_free(&o)
        return n_sent, n_tok, total

    def pa_epoch(self, double[::1] w, double[::1] u, const int[::1] labels, const int[::1] order,
                 double c, int pa_type=1, double aggressiveness=1.0, bint error_sensitive=True,
                 frozen=None):
        """One pass of passive-aggressive training over the sentences in ``order`` (CRFsuite's pa).

        For each sentence, Viterbi with the current weights; when it mislabels n > 0 tokens,
        the loss is score(predicted) - score(gold) + sqrt(n) (error_sensitive; else + 1), d =
        F(gold) - F(predicted), and w += tau * d with tau = loss / ||d||^2 (pa_type 0),
        min(aggressiveness, that) (1), or loss / (||d||^2 + 1 / (2 * aggressiveness)) (2).
        u accumulates c times every update, c counting the sentences seen, so that the
        averaged weights are w - u / c (as perceptron_epoch). ``frozen`` (one bool per
        parameter, or None): parameters left out of d. Updates w and u in place; returns
        (sentences with a mistake, tokens with a mistake, sum of the losses, c after the pass).
        """
        if pa_type not in (0, 1, 2) or not aggressiveness > 0:
            raise ValueError("pa_type must be 0, 1 or 2 and aggressiveness positive")
        cdef MarginStep m
        memset(&m, 0, sizeof(MarginStep))
        m.method, m.aggressiveness, m.error_sensitive, m.c = pa_type, aggressiveness, error_sensitive, c
        return self._margin_epoch(w, u, labels, order, frozen, &m) + (m.c,)

    def arow_epoch(self, double[::1] mean, double[::1] variance, const int[::1] labels,
                   const int[::1] order, double gamma=1.0, frozen=None):
        """One pass of AROW over the sentences in ``order`` (CRFsuite's arow), the covariance
        of the weights kept diagonal (``variance``, one entry per parameter).

        For each sentence, Viterbi with the weights ``mean``; when it mislabels n > 0 tokens,
        the loss is score(predicted) - score(gold) + n, d = F(gold) - F(predicted), and with
        alpha = loss / (gamma + sum of variance * d^2), mean += alpha * variance * d, then each
        touched variance v becomes 1 / (1/v + d^2 / gamma). ``frozen`` as pa_epoch. Updates
        mean and variance in place; returns (sentences with a mistake, tokens with a mistake,
        sum of the losses).
        """
        if not gamma > 0:
            raise ValueError("gamma must be positive")
        cdef MarginStep m
        memset(&m, 0, sizeof(MarginStep))
        m.method, m.gamma = AROW, gamma
        return self._margin_epoch(mean, variance, labels, order, frozen, &m)

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


def chain_products(M, x):
    """chain.pxd's steps through a square matrix M [n, n] for a vector x [n] (for tests): (x M by
    vec_mat, M x by mat_vec, M x by mat_vec_transposed on transpose's M^T)."""
    Mc = np.ascontiguousarray(M, dtype=np.float64)
    xc = np.ascontiguousarray(x, dtype=np.float64)
    cdef int n = xc.shape[0]
    if Mc.shape != (n, n) or n < 1:
        raise ValueError("M must be n x n and x of n entries, n >= 1")
    MT = np.empty_like(Mc)
    outs = [np.empty(n) for _ in range(3)]
    cdef const double[:, ::1] Mv = Mc
    cdef double[:, ::1] MTv = MT
    cdef const double[::1] xv = xc
    cdef double[::1] y0 = outs[0], y1 = outs[1], y2 = outs[2]
    vec_mat(&xv[0], &Mv[0, 0], n, &y0[0])
    mat_vec(&Mv[0, 0], &xv[0], n, &y1[0])
    transpose(&Mv[0, 0], n, &MTv[0, 0])
    mat_vec_transposed(&MTv[0, 0], &xv[0], n, &y2[0])
    return tuple(outs)


def shared_transition_counts(alpha, q, shared, acc):
    """vecmath.h's outer_acc (for tests): acc [n, n] plus alpha[t-1] (x) q[t] for t = T-1 down to 1
    where shared[t] (alpha, q: [T, n])."""
    a = np.ascontiguousarray(alpha, dtype=np.float64)
    qc = np.ascontiguousarray(q, dtype=np.float64)
    out = np.array(acc, dtype=np.float64, order="C")
    cdef int T = a.shape[0], n = a.shape[1] if a.ndim == 2 else 0, t
    if a.ndim != 2 or qc.shape != (T, n) or out.shape != (n, n) or len(shared) != T or n < 1:
        raise ValueError("alpha and q must be [T, n], acc [n, n] and shared of T entries")
    cdef double[::1] mats = np.zeros(2)
    cdef const double** E = <const double**> malloc(max(1, T) * sizeof(double*))
    if E == NULL:
        raise MemoryError()
    for t in range(T):
        E[t] = &mats[0] if shared[t] else &mats[1]
    cdef const double[:, ::1] av = a, qv = qc
    cdef double[:, ::1] ov = out
    outer_acc(&av[0, 0], &qv[0, 0], T, n, E, &mats[0], &ov[0, 0])
    free(E)
    return out


def openmp_enabled():
    """True when the kernels were compiled with OpenMP."""
    return bool(CRFTK_OPENMP)
