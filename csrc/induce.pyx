# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Gain kernel of CRF feature induction (McCallum, 2003).

A candidate feature pairs a binary predicate b with a label y. Its value is the
log-likelihood it would add, with weight lambda and the other weights fixed.
Mean-field approximation: each error token t keeps its own marginal p_t(.) and
the tokens are independent. Adding lambda to label y where b fires then only
reweights those tokens' marginals, so over T = {error tokens where b fires}::

    gain(lambda) = lambda * n_y - sum_{t in T} log(1 + p_t(y) (e^lambda - 1)) - lambda^2 inv_var / 2

with n_y the tokens of T whose gold label is y and inv_var = 1/sigma^2 a Gaussian
prior on the new weight. Only error tokens (those the current model mislabels)
are scored, as in McCallum's paper: they carry most of the gain and are few.
The gain is exact for a CRF without transitions and concave in lambda, so a
safeguarded Newton search from lambda = 0 finds the best weight. The log term
is evaluated as logaddexp(log(1-p), log(p) + lambda), which keeps full
precision for p at or near 0 or 1 and lambda large either way.
"""

import numpy as np
from cython.parallel cimport prange, parallel, threadid
from libc.math cimport exp, log1p, fabs, isfinite, INFINITY
from libc.stdlib cimport malloc, free
from libc.string cimport memset


cdef struct Problem:
    const double* logp     # E*L log p_t(y)
    const double* log1mp   # E*L log(1 - p_t(y))
    const int* gold
    const long long* ptr
    const int* tok
    int L
    int max_newton
    double inv_var
    double tol
    double max_step
    double max_weight


cdef inline double logaddexp(double a, double b) noexcept nogil:
    cdef double t
    if a < b:
        t = a
        a = b
        b = t
    if b == -INFINITY:  # also keeps -inf - -inf (NaN) out
        return a
    return a + log1p(exp(b - a))


cdef double evaluate(const Problem* P, const int* tok, Py_ssize_t n, int y, double n_y,
                     double lam, double* d1, double* d2) noexcept nogil:
    """gain(lam); its first and second derivatives go to d1, d2."""
    cdef Py_ssize_t k, i
    cdef double a, b, z, s = 0.0, sq = 0.0, sqq = 0.0
    for k in range(n):
        i = <Py_ssize_t> tok[k] * P.L + y
        a = P.log1mp[i]
        b = P.logp[i] + lam
        z = logaddexp(a, b)
        s += z
        # q = p e^lam / (1 + p (e^lam - 1)) is the reweighted marginal; 1 - q
        # from its own log so that q (1 - q) keeps its precision near q = 1.
        sq += exp(b - z)
        sqq += exp(a + b - 2.0 * z)
    d1[0] = n_y - sq - lam * P.inv_var
    d2[0] = -sqq - P.inv_var
    return lam * n_y - s - 0.5 * P.inv_var * lam * lam


cdef void newton(const Problem* P, const int* tok, Py_ssize_t n, int y, double n_y,
                 double* gain, double* lam_out) noexcept nogil:
    """Maximise gain over [-max_weight, max_weight] by Newton's method from 0.

    Steps are clipped to max_step. Far from the optimum the curvature is
    nearly flat, and clipped Newton steps can jump back and forth across it
    for ever; so the sign of the derivative at each iterate narrows a bracket
    (lo, hi) around the maximiser, and a step that would leave it bisects it
    instead. A flat second derivative (all p in {0, 1}, no prior) gives a full
    step uphill, which walks to the cap.
    """
    cdef double lam = 0.0, lo = -INFINITY, hi = INFINITY
    cdef double g, h, step, nxt
    cdef int it
    for it in range(P.max_newton):
        evaluate(P, tok, n, y, n_y, lam, &g, &h)
        if g == 0.0:
            break
        if g > 0.0:
            lo = lam
        else:
            hi = lam
        if h < 0.0:
            step = min(max(-g / h, -P.max_step), P.max_step)
        else:  # no curvature to scale by
            step = P.max_step if g > 0.0 else -P.max_step
        # the step has the sign of g, so it can only leave the bracket on a
        # side that is already finite; a step below tol is convergence
        nxt = lam + step
        if fabs(step) >= P.tol and (nxt <= lo or nxt >= hi):
            nxt = 0.5 * (lo + hi)
        nxt = min(max(nxt, -P.max_weight), P.max_weight)
        step = nxt - lam
        lam = nxt
        if fabs(step) < P.tol:
            break
    gain[0] = evaluate(P, tok, n, y, n_y, lam, &g, &h)
    lam_out[0] = lam


cdef void score_predicate(const Problem* P, Py_ssize_t c, double* cnt,
                          double* gain, double* lam) noexcept nogil:
    """gain[y], lam[y] for every label y of predicate c; cnt is L scratch."""
    score_tokens(P, P.tok + P.ptr[c], <Py_ssize_t> (P.ptr[c + 1] - P.ptr[c]), cnt, gain, lam)


cdef void score_tokens(const Problem* P, const int* tok, Py_ssize_t n, double* cnt,
                       double* gain, double* lam) noexcept nogil:
    """gain[y], lam[y] for every label y of a predicate firing on tok[:n]."""
    cdef Py_ssize_t k
    cdef int y
    memset(cnt, 0, P.L * sizeof(double))
    for k in range(n):
        cnt[P.gold[tok[k]]] += 1.0
    for y in range(P.L):
        newton(P, tok, n, y, cnt[y], &gain[y], &lam[y])


cdef tuple check_inputs(const double[:, ::1] marginals, const int[::1] gold,
                        const long long[::1] ptr, const int[::1] tok, double inv_var,
                        int max_newton, double tol, double max_step, double max_weight):
    """Check the inputs; return the log-marginal arrays the kernel reads."""
    cdef Py_ssize_t E = marginals.shape[0], L = marginals.shape[1]
    if L < 1:
        raise ValueError("marginals must have at least one label column")
    if gold.shape[0] != E:
        raise ValueError(f"gold has {gold.shape[0]} entries, expected one per error token ({E})")
    m = np.asarray(marginals)
    if m.size and not ((m >= 0.0) & (m <= 1.0)).all():
        raise ValueError("marginals must lie in [0, 1]")
    g = np.asarray(gold)
    if g.size and (g.min() < 0 or g.max() >= L):
        raise ValueError(f"gold label out of range [0, {L})")
    p = np.asarray(ptr)
    if p.size < 1 or p[0] != 0 or p[p.size - 1] != tok.shape[0]:
        raise ValueError(f"ptr must start at 0 and end at len(tok) = {tok.shape[0]}")
    if (np.diff(p) < 0).any():
        raise ValueError("ptr must be non-decreasing")
    t = np.asarray(tok)
    if t.size and (t.min() < 0 or t.max() >= E):
        raise ValueError(f"token index out of range [0, {E})")
    if not (isfinite(inv_var) and inv_var >= 0.0):
        raise ValueError("inv_var must be finite and >= 0")
    if max_newton < 0 or not tol >= 0.0:
        raise ValueError("max_newton and tol must be >= 0")
    if not (isfinite(max_step) and max_step > 0.0 and isfinite(max_weight) and max_weight > 0.0):
        raise ValueError("max_step and max_weight must be finite and > 0")
    with np.errstate(divide="ignore"):  # log(0) = -inf is meant
        return np.log(m), np.log1p(-m)


cdef Problem make_problem(const double[:, ::1] logp, const double[:, ::1] log1mp,
                          const int[::1] gold, const long long[::1] ptr, const int[::1] tok,
                          double inv_var, int max_newton, double tol,
                          double max_step, double max_weight):
    cdef Problem P
    P.logp = &logp[0, 0] if logp.shape[0] else NULL
    P.log1mp = &log1mp[0, 0] if log1mp.shape[0] else NULL
    P.gold = &gold[0] if gold.shape[0] else NULL
    P.ptr = &ptr[0]
    P.tok = &tok[0] if tok.shape[0] else NULL
    P.L = <int> logp.shape[1]
    P.max_newton = max_newton
    P.inv_var = inv_var
    P.tol = tol
    P.max_step = max_step
    P.max_weight = max_weight
    return P


def label_gains(const double[:, ::1] marginals, const int[::1] gold,
                const long long[::1] ptr, const int[::1] tok,
                double inv_var=0.0, int max_newton=20, double tol=1e-6,
                double max_step=5.0, double max_weight=20.0, int n_threads=1):
    """Best gain and weight of every (predicate, label): (gain[C, L], lambda[C, L]).

    ``marginals[E, L]`` and ``gold[E]`` describe the error tokens; predicate c
    fires on tokens ``tok[ptr[c]:ptr[c+1]]`` (each at most once).
    """
    logp, log1mp = check_inputs(marginals, gold, ptr, tok, inv_var, max_newton, tol, max_step, max_weight)
    cdef Py_ssize_t C = ptr.shape[0] - 1
    cdef int L = <int> marginals.shape[1]
    n_threads = max(1, n_threads)
    gain_np = np.zeros((C, L), dtype=np.float64)
    lam_np = np.zeros((C, L), dtype=np.float64)
    flags_np = np.zeros(n_threads, dtype=np.int32)
    cdef double[:, ::1] gain = gain_np
    cdef double[:, ::1] lam = lam_np
    cdef int[::1] flags = flags_np
    cdef Problem P = make_problem(logp, log1mp, gold, ptr, tok, inv_var, max_newton, tol,
                                  max_step, max_weight)
    cdef double* cnt
    cdef Py_ssize_t c
    if C == 0:
        return gain_np, lam_np
    with nogil, parallel(num_threads=n_threads):
        cnt = <double*> malloc(L * sizeof(double))
        if cnt == NULL:
            flags[threadid()] = 1
        for c in prange(C, schedule="dynamic", chunksize=16):
            if cnt != NULL:
                score_predicate(&P, c, cnt, &gain[c, 0], &lam[c, 0])
        free(cnt)
    if flags_np.any():
        raise MemoryError("cannot allocate induction buffers")
    return gain_np, lam_np


def predicate_gains(const double[:, ::1] marginals, const int[::1] gold,
                    const long long[::1] ptr, const int[::1] tok,
                    double inv_var=0.0, int max_newton=20, double tol=1e-6,
                    double max_step=5.0, double max_weight=20.0, int n_threads=1):
    """Best label of every predicate: (gain[C], label[C] int32, lambda[C]).

    Same inputs as ``label_gains``. Ties go to the lowest label; a predicate
    firing on no token gets gain 0, label -1, lambda 0.
    """
    logp, log1mp = check_inputs(marginals, gold, ptr, tok, inv_var, max_newton, tol, max_step, max_weight)
    cdef Py_ssize_t C = ptr.shape[0] - 1
    cdef int L = <int> marginals.shape[1]
    n_threads = max(1, n_threads)
    best_gain_np = np.zeros(C, dtype=np.float64)
    best_label_np = np.full(C, -1, dtype=np.int32)
    best_lam_np = np.zeros(C, dtype=np.float64)
    flags_np = np.zeros(n_threads, dtype=np.int32)
    cdef double[::1] best_gain = best_gain_np
    cdef int[::1] best_label = best_label_np
    cdef double[::1] best_lam = best_lam_np
    cdef int[::1] flags = flags_np
    cdef Problem P = make_problem(logp, log1mp, gold, ptr, tok, inv_var, max_newton, tol,
                                  max_step, max_weight)
    cdef double* buf
    cdef Py_ssize_t c
    cdef int y, b
    if C == 0:
        return best_gain_np, best_label_np, best_lam_np
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> malloc(3 * L * sizeof(double))  # counts | gains | lambdas
        if buf == NULL:
            flags[threadid()] = 1
        for c in prange(C, schedule="dynamic", chunksize=16):
            if buf != NULL and ptr[c + 1] > ptr[c]:
                score_predicate(&P, c, buf, buf + L, buf + 2 * L)
                keep_best(buf + L, buf + 2 * L, L, &best_gain[c], &best_label[c], &best_lam[c])
        free(buf)
    if flags_np.any():
        raise MemoryError("cannot allocate induction buffers")
    return best_gain_np, best_label_np, best_lam_np


cdef inline void keep_best(const double* gain, const double* lam, int L,
                           double* best_gain, int* best_label, double* best_lam) noexcept nogil:
    """The label of highest gain (ties to the lowest)."""
    cdef int y, b = 0
    for y in range(1, L):
        if gain[y] > gain[b]:
            b = y
    best_gain[0] = gain[b]
    best_label[0] = b
    best_lam[0] = lam[b]


def conjunction_gains(const double[:, ::1] marginals, const int[::1] gold,
                      const int[:, ::1] test_at, const int[::1] line_of,
                      const long long[::1] post_ptr, const int[::1] post_tok,
                      const long long[::1] cand_ptr, const int[::1] cand_test,
                      double inv_var=0.0, int max_newton=20, double tol=1e-6,
                      double max_step=5.0, double max_weight=20.0, int n_threads=1):
    """Best label of every conjunction of tests over all the tokens where it fires.

    Like ``predicate_gains`` with ``marginals[N, L]`` and ``gold[N]`` for every
    token; candidate c is the conjunction of the tests
    ``cand_test[cand_ptr[c]:cand_ptr[c+1]]``, firing where all of them do.
    ``test_at[t, l]`` is the test of template line l on token t (-1: none),
    ``line_of[x]`` the line of test x, and test x fires on the tokens
    ``post_tok[post_ptr[x]:post_ptr[x+1]]``. The token sets are built per
    candidate from its rarest test, so they are never all held at once.
    Returns (gain[C], label[C] int32, lambda[C], tokens[C] int64).
    """
    cdef Py_ssize_t N = marginals.shape[0], C = cand_ptr.shape[0] - 1
    cdef Py_ssize_t X = line_of.shape[0]
    cdef int L = <int> marginals.shape[1]
    if test_at.shape[0] != N:
        raise ValueError(f"test_at has {test_at.shape[0]} rows, expected one per token ({N})")
    if post_ptr.shape[0] != X + 1 or post_ptr[0] != 0 or post_ptr[X] != post_tok.shape[0]:
        raise ValueError("post_ptr must have one entry per test plus one, from 0 to len(post_tok)")
    ct = np.asarray(cand_test)
    if ct.size and (ct.min() < 0 or ct.max() >= X):
        raise ValueError(f"candidate test out of range [0, {X})")
    lo = np.asarray(line_of)
    if lo.size and (lo.min() < 0 or lo.max() >= test_at.shape[1]):
        raise ValueError("line_of out of range of test_at's columns")
    pt = np.asarray(post_tok)
    if pt.size and (pt.min() < 0 or pt.max() >= N):
        raise ValueError(f"posting token out of range [0, {N})")
    all_ptr = np.array([0, N], dtype=np.int64)
    all_tok = np.zeros(N, dtype=np.int32)  # one predicate on every token, for check_inputs
    logp, log1mp = check_inputs(marginals, gold, all_ptr, all_tok, inv_var, max_newton, tol,
                                max_step, max_weight)
    n_threads = max(1, n_threads)
    best_gain_np = np.zeros(C, dtype=np.float64)
    best_label_np = np.full(C, -1, dtype=np.int32)
    best_lam_np = np.zeros(C, dtype=np.float64)
    count_np = np.zeros(C, dtype=np.int64)
    flags_np = np.zeros(n_threads, dtype=np.int32)
    cdef double[::1] best_gain = best_gain_np
    cdef int[::1] best_label = best_label_np
    cdef double[::1] best_lam = best_lam_np
    cdef long long[::1] count = count_np
    cdef int[::1] flags = flags_np
    cdef long long[::1] ap = all_ptr
    cdef int[::1] at = all_tok
    cdef Problem P = make_problem(logp, log1mp, gold, ap, at, inv_var, max_newton, tol,
                                  max_step, max_weight)
    cdef double* buf
    cdef int* toks
    cdef Py_ssize_t c, k, j, n, rare
    cdef int t, x
    cdef bint fires
    if C == 0:
        return best_gain_np, best_label_np, best_lam_np, count_np
    with nogil, parallel(num_threads=n_threads):
        buf = <double*> malloc(3 * L * sizeof(double))
        toks = <int*> malloc((N + 1) * sizeof(int))
        if buf == NULL or toks == NULL:
            flags[threadid()] = 1
        for c in prange(C, schedule="dynamic", chunksize=8):
            if buf == NULL or toks == NULL or cand_ptr[c + 1] <= cand_ptr[c]:
                continue
            rare = cand_test[cand_ptr[c]]
            for j in range(cand_ptr[c] + 1, cand_ptr[c + 1]):
                x = cand_test[j]
                if post_ptr[x + 1] - post_ptr[x] < post_ptr[rare + 1] - post_ptr[rare]:
                    rare = x
            n = 0
            for k in range(post_ptr[rare], post_ptr[rare + 1]):
                t = post_tok[k]
                fires = True
                for j in range(cand_ptr[c], cand_ptr[c + 1]):
                    x = cand_test[j]
                    if test_at[t, line_of[x]] != x:
                        fires = False
                        break
                if fires:
                    toks[n] = t
                    n = n + 1
            count[c] = n
            if n > 0:
                score_tokens(&P, toks, n, buf, buf + L, buf + 2 * L)
                keep_best(buf + L, buf + 2 * L, L, &best_gain[c], &best_label[c], &best_lam[c])
        free(buf)
        free(toks)
    if flags_np.any():
        raise MemoryError("cannot allocate induction buffers")
    return best_gain_np, best_label_np, best_lam_np, count_np
