# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Exact inference on a product of C label chains coupled at every position.

The joint label of a position is y = (y_0, ..., y_{C-1}), chain c having n[c]
labels; it is numbered row-major (chain 0 outermost), y = sum_c y_c * stride[c],
S = prod n[c] joint labels. A product chain of T positions is given by

- ``s[t*S + y]``: the log potential of joint label y at t (whatever couples the
  chains at one position: their state potentials and the factors between them);
- per chain c, the transition matrix into t: ``Tr[t*C + c]`` (log) or
  ``E[t*C + c] = exp(Tr - shift[t*C + c])`` (exponentiated) of size n[c] x n[c].

The transition into t is the product of the chains' transitions, so a recursion
never forms the S x S matrix: it applies one chain's matrix at a time along that
chain's axis (the factorized recursion). A step costs O(S * sum_c n[c]), not
O(S^2): for two chains of |A| and |B| labels, O(|A|^2 |B| + |A| |B|^2).

Forward-backward is scaled like chain.pxd's; Viterbi and n-best keep one
back-pointer table per chain and position. Callers own the buffers.
"""

from libc.math cimport INFINITY
from libc.string cimport memset

from chain cimport exp_shifted, scaled_start, scaled_step, scaled_backward_start, backward_weights, vec_mat, \
    mat_vec, argmax, transpose as transpose_matrix
from vecmath cimport vec_mat_rect
from maxplus cimport maxplus

cdef extern from "nbest.h":
    # product_nbest's lists, made lazily (nbest.h describes them), and the ints they need
    int crftk_product_nbest(int C, int S, const int* n, const int* stride, int T, int K, const double* s,
                            const double** Tr, double* score, int* back, int* rank, int* ints,
                            double* work, int* out, double* best) noexcept nogil
    Py_ssize_t nbest_ints "crftk_nbest_ints" (int C, int S, int T, int K, int W) noexcept nogil

# A chain of at most this many labels that is not the last one is stepped a column at a time
# (its labels for one assignment of the later chains), the column copied to a contiguous
# buffer on the stack and multiplied by vecmath.h's or maxplus.h's register-blocked products
# (a thread's stack holds the transposed matrix the backward step reads: 32 KiB).
cdef enum:
    GATHERED = 64


cdef struct Shape:
    int C              # chains
    int S              # joint labels
    int n[8]           # labels of each chain
    int stride[8]      # index step of each chain's label


cdef inline int shape_init(Shape* sh, int C, const int* n) noexcept nogil:
    """Fill a Shape; returns 0, or -1 when C is outside 1..8 or a chain has no label."""
    cdef int c
    if C < 1 or C > 8:
        return -1
    sh.C = C
    sh.S = 1
    for c in range(C - 1, -1, -1):
        if n[c] < 1:
            return -1
        sh.n[c] = n[c]
        sh.stride[c] = sh.S
        sh.S *= n[c]
    return 0


cdef inline void axis_sum(const Shape* sh, int c, const double* x, const double* M, const double* MT,
                          bint transpose, double* y) noexcept nogil:
    """y[.., j, ..] = sum_i x[.., i, ..] M[i, j] along chain c's axis; with transpose,
    sum_i M[j, i] x[.., i, ..] (a backward step). MT (or NULL): M's transpose, which the
    backward step of a chain other than the last reads column by column (see GATHERED)."""
    cdef int nc = sh.n[c], post = sh.stride[c], pre = sh.S // (nc * post)
    cdef int from_step = nc, to_step = 1      # M[i*from_step + j*to_step] links i to j
    cdef int p, i, j, r
    cdef const double* xb
    cdef double* yb
    cdef const double* Mf
    cdef double mij
    cdef double xcol[GATHERED]
    cdef double ycol[GATHERED]
    if transpose:
        from_step = 1
        to_step = nc
    if post == 1:
        # the last chain: loops over contiguous rows (the same sums in the same order as below)
        for p in range(pre):
            xb = x + p * nc
            yb = y + p * nc
            if transpose:
                mat_vec(M, xb, nc, yb)
            else:
                vec_mat(xb, M, nc, yb)
        return
    Mf = MT if transpose else M
    if nc <= GATHERED and Mf != NULL:
        # column by column: y[j, r] = sum_i x[i, r] Mf[i, j] summed over i in order from 0.0,
        # as the loop below sums it (Mf[i, j] = M[j, i] backward: products commute exactly)
        for p in range(pre):
            xb = x + p * nc * post
            yb = y + p * nc * post
            for r in range(post):
                for i in range(nc):
                    xcol[i] = xb[i * post + r]
                vec_mat_rect(xcol, Mf, nc, nc, ycol)
                for j in range(nc):
                    yb[j * post + r] = ycol[j]
        return
    memset(y, 0, sh.S * sizeof(double))
    for p in range(pre):
        xb = x + p * nc * post
        yb = y + p * nc * post
        for i in range(nc):
            for j in range(nc):
                mij = M[i * from_step + j * to_step]
                for r in range(post):
                    yb[j * post + r] += xb[i * post + r] * mij


cdef inline void axis_max(const Shape* sh, int c, const double* x, const double* M,
                          double* y) noexcept nogil:
    """y[.., j, ..] = max_i x[.., i, ..] + M[i, j] along chain c's axis.

    The inner loops run over contiguous memory without a back-pointer to keep, so the
    compiler vectorizes them; product_viterbi finds the maximizing i again for the one
    path it traces back (stage_value)."""
    cdef int nc = sh.n[c], post = sh.stride[c], pre = sh.S // (nc * post)
    cdef int p, i, j, r, w = nc * post
    cdef double v, m
    cdef const double* xb
    cdef const double* xi
    cdef const double* Mi
    cdef double* yb
    cdef double* yj
    cdef double xcol[GATHERED]
    cdef double ycol[GATHERED]
    if post > 1 and nc <= GATHERED:
        # column by column through maxplus.h: the same sums x[i, r] + M[i, j], and a maximum
        # is exact (its v > y ? v : y keeps the loop's first of equal values): the same bits for
        # potentials without NaN (maxplus starts at -inf, so it drops a NaN the loop would keep)
        for p in range(pre):
            xb = x + p * w
            yb = y + p * w
            for r in range(post):
                for i in range(nc):
                    xcol[i] = xb[i * post + r]
                maxplus(xcol, NULL, M, nc, nc, ycol)
                for j in range(nc):
                    yb[j * post + r] = ycol[j]
        return
    for p in range(pre):
        xb = x + p * w
        yb = y + p * w
        for j in range(nc):
            m = M[j]
            yj = yb + j * post
            for r in range(post):
                yj[r] = xb[r] + m
        for i in range(1, nc):
            xi = xb + i * post
            Mi = M + i * nc
            if post == 1:
                for j in range(nc):
                    v = xi[0] + Mi[j]
                    yb[j] = v if v > yb[j] else yb[j]
            else:
                for j in range(nc):
                    m = Mi[j]
                    yj = yb + j * post
                    for r in range(post):
                        v = xi[r] + m
                        yj[r] = v if v > yj[r] else yj[r]


cdef inline double stage_value(const Shape* sh, int c, Py_ssize_t k, const double* x0,
                               const double** Tr) noexcept nogil:
    """Entry k of the max-product message after chains 0..c-1 have moved one step (x0: the
    message before any, Tr: the C matrices of the step), computed again from x0 alone; it
    equals what axis_max wrote there bit for bit (the same sums, and a maximum rounds nothing)."""
    if c == 0:
        return x0[k]
    cdef int d = c - 1, nd = sh.n[d], post = sh.stride[d]
    cdef int j = <int> ((k // post) % nd), i
    cdef Py_ssize_t base = k - <Py_ssize_t> j * post
    cdef double best = -INFINITY, v
    for i in range(nd):
        v = stage_value(sh, d, base + <Py_ssize_t> i * post, x0, Tr) + Tr[d][i * nd + j]
        if i == 0 or v > best:
            best = v
    return best


cdef inline double product_forward(const Shape* sh, int T, const double* s, const double** E,
                                   const double* shift, double* q, double* alpha, double* scale,
                                   double* tmp) noexcept nogil:
    """The scaled forward pass of product_forward_backward (log Z and what its backward pass
    reads: alpha, scale, q[t] = exp-state(t)); log Z alone needs no more. tmp: 2*S scratch."""
    cdef int S = sh.S, C = sh.C
    cdef int t, c
    cdef double logz, m
    cdef const double* x
    cdef double* y
    logz = scaled_start(s, alpha, scale, S)
    for t in range(1, T):
        for c in range(C):
            logz += shift[t * C + c]
        m = exp_shifted(s + t * S, q + t * S, S)
        logz += m
        x = alpha + (t - 1) * S
        y = tmp
        for c in range(C):
            axis_sum(sh, c, x, E[t * C + c], NULL, False, y)
            x = y
            y = tmp + S if y == tmp else tmp
        logz += scaled_step(x, q + t * S, alpha + t * S, scale + t, S)
    return logz


cdef inline double product_forward_backward(const Shape* sh, int T, const double* s,
                                            const double** E, const double* shift, double* q,
                                            double* alpha, double* beta, double* scale,
                                            double* tmp) noexcept nogil:
    """Scaled forward-backward over a product chain; returns log Z.

    Afterwards alpha[t]*beta[t] are the joint node marginals, and q[t] holds
    exp-state(t) * beta[t] / scale[t] for product_edge_marginals. tmp: 2*S scratch.
    """
    cdef int S = sh.S, C = sh.C
    cdef int t, c
    cdef double logz
    cdef double* x
    cdef double* y
    cdef double* qt
    cdef const double* Et
    cdef double mt[GATHERED * GATHERED]
    cdef const double* mt_of = NULL         # the matrix mt holds the transpose of
    logz = product_forward(sh, T, s, E, shift, q, alpha, scale, tmp)
    scaled_backward_start(beta, T, S)
    for t in range(T - 1, 0, -1):
        qt = q + t * S
        backward_weights(qt, beta + t * S, scale[t], S)
        x = qt
        y = tmp
        for c in range(C):
            if c == C - 1:
                y = beta + (t - 1) * S
            Et = E[t * C + c]
            if sh.stride[c] > 1 and sh.n[c] <= GATHERED and Et != mt_of:
                # transposed when it differs from the last matrix transposed: once per sentence for
                # a shared matrix of two chains; with several chains before the last, at every position
                transpose_matrix(Et, sh.n[c], mt)
                mt_of = Et
            axis_sum(sh, c, x, Et, mt if mt_of == Et else NULL, True, y)
            x = y
            y = tmp + S if y == tmp else tmp
    return logz


cdef inline void product_node_marginals(int T, int S, double* alpha, const double* beta) noexcept nogil:
    """Turns alpha into the joint node marginals, in place."""
    cdef Py_ssize_t i
    for i in range(<Py_ssize_t> T * S):
        alpha[i] *= beta[i]


cdef inline void product_edge_marginals(const Shape* sh, int c, const double* alpha_prev,
                                        const double** Et, const double* qt, double* tmp,
                                        double* out) noexcept nogil:
    """out[i*n+j] = p(chain c has i at t-1 and j at t), after forward-backward and before
    product_node_marginals. Et: the C matrices into t (E + t*C); tmp: 2*S scratch."""
    cdef int C = sh.C, nc = sh.n[c], post = sh.stride[c], pre = sh.S // (nc * post)
    cdef int d, p, i, j, r
    cdef const double* x = alpha_prev
    cdef double* y = tmp
    cdef const double* xb
    cdef const double* ub
    cdef double acc
    for d in range(C):             # move every other chain to time t
        if d == c:
            continue
        axis_sum(sh, d, x, Et[d], NULL, False, y)
        x = y
        y = tmp + sh.S if y == tmp else tmp
    for i in range(nc):
        for j in range(nc):
            acc = 0.0
            for p in range(pre):
                xb = x + p * nc * post + i * post
                ub = qt + p * nc * post + j * post
                for r in range(post):
                    acc += xb[r] * ub[r]
            out[i * nc + j] = acc * Et[c][i * nc + j]


cdef inline void product_viterbi(const Shape* sh, int T, const double* s, const double** Tr,
                                 double* delta, double* tmp, int* bp, int* out,
                                 double* score) noexcept nogil:
    """Best joint labeling: out[t] the joint label at t, score[0] its score (on ties, the
    lowest label of each chain, the last chain decided first).

    delta: T*S, tmp: 2*S; bp is not used (the traceback finds each step's best predecessor
    again, chain by chain, from delta: O(S) per position instead of T*C*S stored pointers).
    """
    cdef int S = sh.S, C = sh.C
    cdef int t, k, c, nc, post, j, i, best_i
    cdef Py_ssize_t idx, base
    cdef double best, v
    cdef const double* x
    cdef double* y
    for k in range(S):
        delta[k] = s[k]
    for t in range(1, T):
        x = delta + (t - 1) * S
        y = tmp
        for c in range(C):
            if c == C - 1:
                y = delta + t * S
            axis_max(sh, c, x, Tr[t * C + c], y)
            x = y
            y = tmp + S if y == tmp else tmp
        for k in range(S):
            delta[t * S + k] += s[t * S + k]
    out[T - 1] = argmax(delta + (T - 1) * S, S, score)
    for t in range(T - 1, 0, -1):
        idx = out[t]
        for c in range(C - 1, -1, -1):
            nc = sh.n[c]
            post = sh.stride[c]
            j = <int> ((idx // post) % nc)
            base = idx - <Py_ssize_t> j * post
            best_i = 0
            best = -INFINITY
            for i in range(nc):
                v = stage_value(sh, c, base + <Py_ssize_t> i * post, delta + (t - 1) * S, Tr + t * C) \
                    + Tr[t * C + c][i * nc + j]
                if i == 0 or v > best:
                    best = v
                    best_i = i
            idx = base + <Py_ssize_t> best_i * post
        out[t - 1] = <int> idx


cdef inline int product_nbest(const Shape* sh, int T, int K, const double* s, const double** Tr,
                              double* score, int* back, int* rank, int* ints, double* work, int* out,
                              double* best) noexcept nogil:
    """The K best joint labelings: out[k*T + t] the joint label of the k-th at t, best[k] its
    score; returns how many there are (fewer than K when the chain has fewer labelings).

    The factorized recursion with a list of the K best partial scores per state, each list the
    merge of its chain's n_c predecessor lists by their heads (ties go to the lower label), its
    entries after the first made only when a labeling reported needs them (nbest.h). score, back
    and rank: T*C*S*K; ints: nbest_ints(C, S, T, K, max n_c); work: 2 max n_c.
    """
    return crftk_product_nbest(sh.C, sh.S, sh.n, sh.stride, T, K, s, Tr, score, back, rank, ints, work,
                               out, best)
