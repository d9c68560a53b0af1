# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Potentials of a linear-chain CRF from features and weights, and gradients back to them.

An encoded corpus (crftk/features.py) is a set of flat integer arrays:

- ``attr_ptr[N+1]``, ``attrs``: the state attributes of each token (CSR);
- ``eattr_ptr[N+1]``, ``eattrs``: the edge (transition) attributes of each token,
  i.e. CRF++ ``B`` templates with macros; the transition into token t uses
  the attributes of token t;
- ``feat_ptr[A+1]``, ``feat_label``: the state features of each attribute, one
  (attribute, label) pair each; the weight of feature f is ``w[f]``;
- ``values`` (or NULL): the real value of each state attribute occurrence, aligned with
  ``attrs``: a feature then adds value * weight to a potential and its count at a token is
  the value. Each walk over the occurrences picks its binary or valued loop once per call,
  so that the binary one is the loop it was, with no multiply or test per occurrence.

The parameter vector is laid out as (crftk.structures.ChainLayout declares it)::

    [ state features (F) | transitions L*L (prev*L+cur) | start L | end L | edge blocks E*L*L ]

This header turns weights into the tables that crftk's chain inference (chain.pxd)
reads, and scatters marginals and labelings back onto the parameters. Everything is
nogil and allocation-free.
"""

from libc.string cimport memset, memcpy

from chain cimport exp_shifted

cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define CRFTK_PREFETCH_READ(p) __builtin_prefetch((p), 0, 3)
    #define CRFTK_PREFETCH_WRITE(p) __builtin_prefetch((p), 1, 3)
    #else
    #define CRFTK_PREFETCH_READ(p) ((void) 0)
    #define CRFTK_PREFETCH_WRITE(p) ((void) 0)
    #endif
    #include <stdint.h>
    #include <string.h>
    /* attribute id k of a 3-byte packed array (little-endian, one byte of padding at its end) */
    static inline int crftk_packed_id(const unsigned char* p, Py_ssize_t k) {
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        uint32_t v;
        memcpy(&v, p + 3 * k, 4);
        return (int) (v & 0xFFFFFFu);
    #else
        const unsigned char* q = p + 3 * k;
        return (int) q[0] | ((int) q[1] << 8) | ((int) q[2] << 16);
    #endif
    }
    """
    int packed_id "crftk_packed_id" (const unsigned char* p, Py_ssize_t k) noexcept nogil
    void prefetch_read "CRFTK_PREFETCH_READ" (const void* p) noexcept nogil
    void prefetch_write "CRFTK_PREFETCH_WRITE" (const void* p) noexcept nogil

# How many attribute occurrences ahead state_scores and scatter_nodes ask for the
# feature range (feat_ptr) and for the weights, labels and gradient entries of an
# attribute. The feature tables of a large model do not fit in the L2 cache: each
# attribute starts a run of features at a random place, and without prefetching the
# loops wait for memory there (about 60% of a Viterbi or likelihood pass).
cdef enum:
    AHEAD_RANGE = 12
    AHEAD_FEATURES = 6


cdef struct Features:
    const int* attr_ptr
    const int* attrs
    # NULL, or the attribute ids packed in 3 bytes each (then attrs is NULL): what a training
    # corpus holds through L-BFGS (crftk._lattice.Lattices.pack_attributes); read through attr_id
    const unsigned char* attrs24
    const int* eattr_ptr
    const int* eattrs
    const int* feat_ptr
    const int* feat_label
    # NULL, or per attribute 1 when its features are every label in order (feat_label[f0 + y]
    # = y): the kernels then add and scatter whole rows, which the compiler vectorizes
    const unsigned char* dense
    # NULL when every state attribute occurrence has value 1 (the binary path, no values
    # stored); else values[k] is the real value of occurrence attrs[k]: potentials add
    # value * weight, gradients scatter value * marginal. Edge attributes are binary.
    const double* values
    int L
    int has_edges
    Py_ssize_t off_trans
    Py_ssize_t off_start
    Py_ssize_t off_end
    Py_ssize_t off_edge


cdef inline int attr_at(const Features* d, Py_ssize_t k, bint packed) noexcept nogil:
    """The id of state attribute occurrence k, packed (d.attrs24) or not (d.attrs): packed is a
    constant where the hot loops call this, so that each has a copy for either layout with no
    test per occurrence (a test there made the int32 loglik ~8-13% slower, measured)."""
    if packed:
        return packed_id(d.attrs24, k)
    return d.attrs[k]


cdef inline int attr_id(const Features* d, Py_ssize_t k) noexcept nogil:
    """The id of state attribute occurrence k, for the loops off the hot path (one test each)."""
    return attr_at(d, k, d.attrs24 != NULL)


cdef inline void prefetch_features(const Features* d, const double* v, int k, int k_end,
                                   bint write, bint packed) noexcept nogil:
    """Ask for what attribute occurrence k + AHEAD_FEATURES reads (its labels and v, the
    weights or, to write, the gradient) and for the feature range and dense flag of
    k + AHEAD_RANGE, whose entries are then in cache when their turn comes; within one sentence's
    occurrences (k_end). Prefetching changes no result."""
    cdef int f, f1, a
    if k + AHEAD_RANGE < k_end:
        a = attr_at(d, k + AHEAD_RANGE, packed)
        prefetch_read(&d.feat_ptr[a])
        if d.dense != NULL:
            prefetch_read(&d.dense[a])
    if k + AHEAD_FEATURES < k_end:
        a = attr_at(d, k + AHEAD_FEATURES, packed)
        f = d.feat_ptr[a]
        f1 = d.feat_ptr[a + 1]
        # every cache line of the run (a run of 8 features spans two lines of v in most places)
        while f < f1:
            prefetch_read(&d.feat_label[f])
            if write:
                prefetch_write(&v[f])
            else:
                prefetch_read(&v[f])
            f += 8
        if f1 > 0:
            prefetch_read(&d.feat_label[f1 - 1])
            if write:
                prefetch_write(&v[f1 - 1])
            else:
                prefetch_read(&v[f1 - 1])


cdef inline void gather_attribute(const Features* d, const double* w, int a, double* row) noexcept nogil:
    """row[y] += the weight of attribute a's feature with label y, for each of its features: a
    whole row when the attribute is dense (the same sums in the same order, vectorized)."""
    cdef int f, f0 = d.feat_ptr[a]
    cdef const double* v
    if d.dense != NULL and d.dense[a]:
        v = w + f0
        for f in range(d.L):
            row[f] += v[f]
        return
    for f in range(f0, d.feat_ptr[a + 1]):
        row[d.feat_label[f]] += w[f]


cdef inline void gather_scaled(const Features* d, const double* w, int a, double value,
                               double* row) noexcept nogil:
    """gather_attribute for an occurrence of attribute a with a real value: row[y] += value *
    the weight (a loop of its own: the binary one keeps no multiply)."""
    cdef int f, f0 = d.feat_ptr[a]
    cdef const double* v
    if d.dense != NULL and d.dense[a]:
        v = w + f0
        for f in range(d.L):
            row[f] += value * v[f]
        return
    for f in range(f0, d.feat_ptr[a + 1]):
        row[d.feat_label[f]] += value * w[f]


cdef inline void scatter_attribute(const Features* d, int a, const double* p, int gold, double factor,
                                   double* g) noexcept nogil:
    """g += factor * (expected - observed counts) of attribute a's features at one token: p the
    token's marginals over the labels, gold its observed label (outside 0..L-1: none)."""
    cdef int f, lab, fg, n_gold, f0 = d.feat_ptr[a]
    cdef double* gr
    if d.dense != NULL and d.dense[a]:
        gr = g + f0
        for f in range(d.L):
            gr[f] += factor * p[f]
        if 0 <= gold < d.L:
            gr[gold] -= factor
        return
    # the observed feature's -factor after the loop, found with selects: a test in the loop is a
    # branch that the gold label mispredicts. Each entry gets the same two operations in the same
    # order (no other feature of the run is the same entry), so the same bits.
    fg = -1
    n_gold = 0
    for f in range(f0, d.feat_ptr[a + 1]):
        lab = d.feat_label[f]
        g[f] += factor * p[lab]
        fg = f if lab == gold else fg
        n_gold += lab == gold
    if n_gold == 1:
        g[fg] -= factor
    elif n_gold > 1:        # a feature map with one label twice in a run (not crftk's)
        for f in range(f0, d.feat_ptr[a + 1]):
            if d.feat_label[f] == gold:
                g[f] -= factor


cdef inline int dense_attributes(const int* feat_ptr, const int* feat_label, Py_ssize_t n_attrs, int L,
                                 unsigned char* out) noexcept nogil:
    """out[a] = 1 where attribute a's features are labels 0..L-1 in order (Features.dense);
    returns how many are."""
    cdef Py_ssize_t a
    cdef int f0, y, n = 0
    for a in range(n_attrs):
        out[a] = 0
        f0 = feat_ptr[a]
        if feat_ptr[a + 1] - f0 != L:
            continue
        for y in range(L):
            if feat_label[f0 + y] != y:
                break
        else:
            out[a] = 1
            n += 1
    return n


cdef inline void gather_tokens(const Features* d, const double* w, Py_ssize_t t0, int T,
                               double* s, bint prefetch) noexcept nogil:
    """s[t*L+y] = the summed (value *) weights of token t0+t's attribute occurrences' features
    with label y. Binary or valued is chosen once per call: the binary loop stays as it was.
    prefetch (a constant at each call, so the test folds away): ask for the features ahead,
    which pays where tokens have many attributes in a large model (state features)."""
    cdef int L = d.L
    cdef int t, k, k_end = d.attr_ptr[t0 + T]
    cdef double* row
    memset(s, 0, T * L * sizeof(double))
    if d.values == NULL:
        if d.attrs24 != NULL:
            gather_binary(d, w, t0, T, s, prefetch, True)
        else:
            gather_binary(d, w, t0, T, s, prefetch, False)
        return
    for t in range(T):
        row = s + t * L
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            if prefetch:
                prefetch_features(d, w, k, k_end, False, d.attrs24 != NULL)
            gather_scaled(d, w, attr_id(d, k), d.values[k], row)


cdef inline void gather_binary(const Features* d, const double* w, Py_ssize_t t0, int T,
                               double* s, bint prefetch, bint packed) noexcept nogil:
    """gather_tokens' binary loop (s already zeroed), for one layout of the ids (packed: a
    constant at each call)."""
    cdef int L = d.L
    cdef int t, k, k_end = d.attr_ptr[t0 + T]
    cdef double* row
    for t in range(T):
        row = s + t * L
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            if prefetch:
                prefetch_features(d, w, k, k_end, False, packed)
            gather_attribute(d, w, attr_at(d, k, packed), row)


cdef inline void state_scores(const Features* d, const double* w, Py_ssize_t t0, int T,
                              double* s) noexcept nogil:
    """s[t*L+y]: log potential of label y at token t0+t, with start/end weights."""
    gather_tokens(d, w, t0, T, s, True)
    add_start_end(d, w, T, s)


cdef inline void state_scores_cached(const Features* d, const double* w, Py_ssize_t t0, int T,
                                     double* s) noexcept nogil:
    """state_scores without prefetching, where the feature tables are small enough to stay in
    cache (a chain of a few labels)."""
    gather_tokens(d, w, t0, T, s, False)
    add_start_end(d, w, T, s)


cdef inline void add_start_end(const Features* d, const double* w, int T, double* s) noexcept nogil:
    """s += the start weights at the first token and the end weights at the last."""
    cdef int L = d.L
    cdef int y
    for y in range(L):
        s[y] += w[d.off_start + y]
        s[(T - 1) * L + y] += w[d.off_end + y]


cdef inline bint has_edge_attributes(const Features* d, Py_ssize_t tok) noexcept nogil:
    return d.has_edges and d.eattr_ptr[tok] != d.eattr_ptr[tok + 1]


cdef inline int edge_scores(const Features* d, const double* w, Py_ssize_t tok,
                            double* M) noexcept nogil:
    """Log transition matrix into token ``tok`` when it has edge attributes.

    Returns 0 (and leaves M alone) when the token has none: the shared
    transition matrix applies.
    """
    cdef int L = d.L
    cdef int k, i
    cdef const double* blk
    if not has_edge_attributes(d, tok):
        return 0
    memcpy(M, w + d.off_trans, L * L * sizeof(double))
    for k in range(d.eattr_ptr[tok], d.eattr_ptr[tok + 1]):
        blk = w + d.off_edge + <Py_ssize_t> d.eattrs[k] * L * L
        for i in range(L * L):
            M[i] += blk[i]
    return 1


cdef inline void log_transitions(const Features* d, const double* w, Py_ssize_t t0, int T,
                                 double* buf, const double** Tr) noexcept nogil:
    """Tr[t]: the log transition matrix into each position t >= 1 of the sentence at t0:
    the shared one in w, or, where edge attributes fire, one built in buf[t*L*L]."""
    cdef int t
    cdef Py_ssize_t LL = <Py_ssize_t> d.L * d.L
    for t in range(1, T):
        if edge_scores(d, w, t0 + t, buf + t * LL):
            Tr[t] = buf + t * LL
        else:
            Tr[t] = w + d.off_trans


cdef inline void exp_transitions(const Features* d, const double* w, double scale, Py_ssize_t t0,
                                 int T, const double* E_shared, double shift_shared, double* mbuf,
                                 double* ebuf, const double** E, double* shift) noexcept nogil:
    """E[t] = exp(transition matrix into t - shift[t]): the shared E_shared (already
    exponentiated, from scaled weights) or one built in ebuf[t*L*L] from the token's
    edge attributes. The weights are scale * w (SGD keeps them so)."""
    cdef int t, i
    cdef int LL = d.L * d.L
    for t in range(1, T):
        if edge_scores(d, w, t0 + t, mbuf):
            if scale != 1.0:
                for i in range(LL):
                    mbuf[i] *= scale
            shift[t] = exp_shifted(mbuf, ebuf + <Py_ssize_t> t * LL, LL)
            E[t] = ebuf + <Py_ssize_t> t * LL
        else:
            E[t] = E_shared
            shift[t] = shift_shared


cdef inline double labeling_score(const Features* d, const double* w, const double* s, Py_ssize_t t0,
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


cdef inline void scatter_edge(const Features* d, Py_ssize_t tok, const double* marg, int prev,
                              int cur, double* g, double factor) noexcept nogil:
    """Gradient of a token with edge attributes: g += marg (factor * the expected transition
    counts into it) on the shared matrix and on each of its attributes' blocks, minus
    factor at the observed transition prev -> cur of the blocks."""
    cdef int L = d.L
    cdef int k, i
    cdef double* blk
    for i in range(L * L):
        g[d.off_trans + i] += marg[i]
    for k in range(d.eattr_ptr[tok], d.eattr_ptr[tok + 1]):
        blk = g + d.off_edge + <Py_ssize_t> d.eattrs[k] * L * L
        for i in range(L * L):
            blk[i] += marg[i]
        blk[prev * L + cur] -= factor


cdef inline void scatter_nodes(const Features* d, Py_ssize_t t0, int T, const double* marg,
                               const int* y, double* g, double factor) noexcept nogil:
    """g += factor * (expected - observed counts) of the state features and the start and
    end weights, from node marginals marg[t*L + j] and the observed labeling y (a feature's
    count at a token is its attribute occurrence's value: 1 on the binary path). y NULL: no
    observed labeling, marg only (e.g. the difference of two marginals, or covariances).

    The token/attribute/feature walk is state_scores' run backwards (scatter, not gather).
    It is written twice on purpose: one walker with a gather/scatter flag made the Viterbi
    pass about 10% slower (measured), and this loop nest is the hottest in crftk.
    """
    cdef int L = d.L
    cdef int t, j, k, gold, k_end = d.attr_ptr[t0 + T]
    cdef const double* pt
    for j in range(L):
        g[d.off_start + j] += factor * marg[j]
        g[d.off_end + j] += factor * marg[(T - 1) * L + j]
    if y != NULL:
        g[d.off_start + y[0]] -= factor
        g[d.off_end + y[T - 1]] -= factor
    if d.values == NULL:
        if d.attrs24 != NULL:
            scatter_binary(d, t0, T, marg, y, g, factor, True)
        else:
            scatter_binary(d, t0, T, marg, y, g, factor, False)
        return
    for t in range(T):
        pt = marg + t * L
        gold = y[t] if y != NULL else -1
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            prefetch_features(d, g, k, k_end, True, d.attrs24 != NULL)
            scatter_attribute(d, attr_id(d, k), pt, gold, factor * d.values[k], g)


cdef inline void scatter_binary(const Features* d, Py_ssize_t t0, int T, const double* marg,
                                const int* y, double* g, double factor, bint packed) noexcept nogil:
    """scatter_nodes' binary loop over the state attributes, for one layout of the ids (packed:
    a constant at each call)."""
    cdef int L = d.L
    cdef int t, k, gold, k_end = d.attr_ptr[t0 + T]
    cdef const double* pt
    for t in range(T):
        pt = marg + t * L
        gold = y[t] if y != NULL else -1
        for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
            prefetch_features(d, g, k, k_end, True, packed)
            scatter_attribute(d, attr_at(d, k, packed), pt, gold, factor, g)


cdef inline void scatter_token(const Features* d, Py_ssize_t tok, const double* p, int gold, double factor,
                               double* g) noexcept nogil:
    """scatter_attribute for each state attribute occurrence of token tok (value * factor each)."""
    cdef int k
    if d.values == NULL:
        for k in range(d.attr_ptr[tok], d.attr_ptr[tok + 1]):
            scatter_attribute(d, attr_id(d, k), p, gold, factor, g)
        return
    for k in range(d.attr_ptr[tok], d.attr_ptr[tok + 1]):
        scatter_attribute(d, attr_id(d, k), p, gold, factor * d.values[k], g)


cdef inline void curvature_attribute(const Features* d, int a, const double* p, double v2,
                                     double* h) noexcept nogil:
    """h += v2 * p(1 - p) for each feature of attribute a (p: the token's marginals)."""
    cdef int f
    cdef double q
    for f in range(d.feat_ptr[a], d.feat_ptr[a + 1]):
        q = p[d.feat_label[f]]
        h[f] += v2 * q * (1.0 - q)


cdef inline void scatter_curvature(const Features* d, Py_ssize_t t0, int T, const double* marg,
                                   double* h) noexcept nogil:
    """h += value^2 p(1 - p) summed over the tokens, for every state feature, start and end
    weight (value 1 on the binary path).

    The Hessian diagonal if the tokens were independent (Sha & Pereira's feature
    independence approximation), from the node marginals.
    """
    cdef int L = d.L
    cdef int t, j, k
    cdef double p
    for j in range(L):
        p = marg[j]
        h[d.off_start + j] += p * (1.0 - p)
        p = marg[(T - 1) * L + j]
        h[d.off_end + j] += p * (1.0 - p)
    for t in range(T):
        if d.values == NULL:        # 1.0: the multiply folds away
            for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
                curvature_attribute(d, attr_id(d, k), marg + t * L, 1.0, h)
        else:
            for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
                curvature_attribute(d, attr_id(d, k), marg + t * L, d.values[k] * d.values[k], h)


cdef inline void count_attribute(const Features* d, int a, int label, double step, double c,
                                 double* w, double* u) noexcept nogil:
    """w += step, u += c * step at attribute a's feature with the label, if it has one."""
    cdef int f
    for f in range(d.feat_ptr[a], d.feat_ptr[a + 1]):
        if d.feat_label[f] == label:
            w[f] += step
            u[f] += c * step
            return


cdef inline void add_counts(const Features* d, Py_ssize_t t0, int T, const int* y, double amount,
                            double* w, double* u, double c) noexcept nogil:
    """w += amount * F(y) and u += c * amount * F(y) for the labeling y of one sentence (a state
    feature counts its attribute occurrence's value)."""
    cdef int L = d.L
    cdef int t, k
    cdef Py_ssize_t idx
    for t in range(T):
        if d.values == NULL:
            for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
                count_attribute(d, attr_id(d, k), y[t], amount, c, w, u)
        else:
            for k in range(d.attr_ptr[t0 + t], d.attr_ptr[t0 + t + 1]):
                count_attribute(d, attr_id(d, k), y[t], amount * d.values[k], c, w, u)
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
