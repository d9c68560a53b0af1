# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The sparse difference d = F(gold) - F(predicted) of two labelings of one sentence, along
which the online learners of crftk._lattice (passive-aggressive, AROW) step.

A Difference is a workspace over the whole parameter vector: ``value`` is dense and zero
outside the parameters listed in ``index``, so a parameter that both labelings (or two
positions) touch is merged as it is added, and the norm and the update cost the sentence's
size, not the model's. Positions where the labelings agree put the same features in both
with opposite signs, so they are skipped: their terms would cancel. Frozen parameters are
left out, so a step neither moves them nor counts them in its norm.
"""

from libc.stdlib cimport malloc, calloc, free

from potentials cimport Features, attr_id


cdef struct Difference:
    double* value                 # [n_params], zero outside index
    unsigned char* listed         # [n_params], 1 where index holds the parameter
    Py_ssize_t* index             # the parameters d touches, n of them
    Py_ssize_t n
    const unsigned char* frozen   # [n_params] or NULL: parameters left out


cdef inline void difference_free(Difference* g) noexcept nogil:
    free(g.value)
    free(g.listed)
    free(g.index)
    g.value, g.listed, g.index, g.n = NULL, NULL, NULL, 0


cdef inline int difference_init(Difference* g, Py_ssize_t n_params, Py_ssize_t capacity,
                                const unsigned char* frozen) noexcept nogil:
    """A cleared workspace whose index holds up to ``capacity`` parameters (one sentence's
    two labelings touch at most 2 * (its attribute and edge attribute occurrences + tokens
    + 1)); 0, or -1 (nothing left allocated) when out of memory."""
    g.value = <double*> calloc(n_params if n_params > 0 else 1, sizeof(double))
    g.listed = <unsigned char*> calloc(n_params if n_params > 0 else 1, sizeof(unsigned char))
    g.index = <Py_ssize_t*> malloc((capacity if capacity > 0 else 1) * sizeof(Py_ssize_t))
    g.n = 0
    g.frozen = frozen
    if g.value == NULL or g.listed == NULL or g.index == NULL:
        difference_free(g)
        return -1
    return 0


cdef inline void difference_add(Difference* g, Py_ssize_t p, double amount) noexcept nogil:
    if g.frozen != NULL and g.frozen[p]:
        return
    if not g.listed[p]:
        g.listed[p] = 1
        g.index[g.n] = p
        g.n += 1
    g.value[p] += amount


cdef inline void difference_clear(Difference* g) noexcept nogil:
    cdef Py_ssize_t i, p
    for i in range(g.n):
        p = g.index[i]
        g.value[p] = 0.0
        g.listed[p] = 0
    g.n = 0


cdef inline double difference_norm2(const Difference* g) noexcept nogil:
    """||d||^2."""
    cdef Py_ssize_t i
    cdef double v, total = 0.0
    for i in range(g.n):
        v = g.value[g.index[i]]
        total += v * v
    return total


cdef inline int state_feature(const Features* d, int a, int y) noexcept nogil:
    """The feature of attribute a with label y, or -1 when the space has none."""
    cdef int f, f0 = d.feat_ptr[a]
    if d.dense != NULL and d.dense[a]:
        return f0 + y
    for f in range(f0, d.feat_ptr[a + 1]):
        if d.feat_label[f] == y:
            return f
    return -1


cdef inline void add_state_features(Difference* g, const Features* d, Py_ssize_t tok, int y,
                                    double sign) noexcept nogil:
    """d += sign * (each state attribute's value) on the features of token tok with label y;
    the binary loop has no per-occurrence test of the values."""
    cdef int k, f
    if d.values == NULL:
        for k in range(d.attr_ptr[tok], d.attr_ptr[tok + 1]):
            f = state_feature(d, attr_id(d, k), y)
            if f >= 0:
                difference_add(g, f, sign)
    else:
        for k in range(d.attr_ptr[tok], d.attr_ptr[tok + 1]):
            f = state_feature(d, attr_id(d, k), y)
            if f >= 0:
                difference_add(g, f, sign * d.values[k])


cdef inline void add_transition(Difference* g, const Features* d, Py_ssize_t tok, int prev, int cur,
                                double sign) noexcept nogil:
    """d += sign on the transition prev -> cur into token tok and on its edge attributes' blocks."""
    cdef Py_ssize_t LL = <Py_ssize_t> d.L * d.L
    cdef Py_ssize_t pair = <Py_ssize_t> prev * d.L + cur
    cdef int k
    difference_add(g, d.off_trans + pair, sign)
    if d.has_edges:
        for k in range(d.eattr_ptr[tok], d.eattr_ptr[tok + 1]):
            difference_add(g, d.off_edge + d.eattrs[k] * LL + pair, sign)


cdef inline void labeling_difference(Difference* g, const Features* d, Py_ssize_t t0, int T,
                                     const int* gold, const int* pred) noexcept nogil:
    """g = F(gold) - F(pred) for the sentence at t0 (g is cleared first)."""
    cdef int t
    difference_clear(g)
    for t in range(T):
        if gold[t] != pred[t]:
            add_state_features(g, d, t0 + t, gold[t], 1.0)
            add_state_features(g, d, t0 + t, pred[t], -1.0)
        if t > 0 and (gold[t] != pred[t] or gold[t - 1] != pred[t - 1]):
            add_transition(g, d, t0 + t, gold[t - 1], gold[t], 1.0)
            add_transition(g, d, t0 + t, pred[t - 1], pred[t], -1.0)
    if gold[0] != pred[0]:
        difference_add(g, d.off_start + gold[0], 1.0)
        difference_add(g, d.off_start + pred[0], -1.0)
    if gold[T - 1] != pred[T - 1]:
        difference_add(g, d.off_end + gold[T - 1], 1.0)
        difference_add(g, d.off_end + pred[T - 1], -1.0)
