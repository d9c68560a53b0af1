# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The memory-traffic floor of a chain CRF's training pass (benchmarks/floor.py).

``gather_scatter`` walks an encoded corpus as lattice.pyx's likelihood pass does, with none of
its inference: per token, the state scores (each attribute occurrence's features' weights
added into a row of L), then the scatter of that row back onto a per-thread gradient (each
feature's entry read, added to, written). What is left is the traffic of the layout: the
attribute ids, the feature ranges and labels, the weights and the gradient. Fused over the
precision of the weights and gradient, the width of the attribute and feature ids and of the
labels, so that each layout is measured by the same loop; prefetched as the real kernels are.
"""

from cython.parallel cimport prange, parallel, threadid
from libc.stdlib cimport malloc, free
from libc.string cimport memset

from potentials cimport prefetch_read, prefetch_write

ctypedef fused real_t:
    float
    double

ctypedef fused id_t:
    int
    long long

ctypedef fused label_t:
    int
    unsigned short

cdef enum:
    AHEAD = 6


def gather_scatter(const int[::1] sent_ptr, const int[::1] attr_ptr, const id_t[::1] attrs,
                   const id_t[::1] feat_ptr, const label_t[::1] feat_label, const real_t[::1] w,
                   real_t[:, ::1] grad, int n_labels, int max_len, int n_threads=1):
    """One gather of every token's state scores and one scatter of them onto grad[thread]
    (which the caller zeroes); returns the sum of the scores (so that no work is dead)."""
    cdef Py_ssize_t S = sent_ptr.shape[0] - 1
    cdef Py_ssize_t s
    cdef int L = n_labels, t, T, tid, phase
    cdef Py_ssize_t k, k_end, f, f0, t0
    cdef double total = 0.0, part
    cdef double* row
    cdef double* buf
    cdef real_t* g
    cdef size_t per_thread
    cdef double* bufs
    if n_threads < 1 or n_threads > grad.shape[0] or grad.shape[1] != w.shape[0]:
        raise ValueError("grad must be [n_threads, n_params], n_threads >= 1")
    _check_corpus(sent_ptr, attr_ptr, attrs, feat_ptr, feat_label, w, n_labels, max_len)
    per_thread = <size_t> max(1, max_len) * <size_t> L
    bufs = <double*> malloc(per_thread * <size_t> n_threads * sizeof(double))
    if bufs == NULL:
        raise MemoryError()
    with nogil, parallel(num_threads=n_threads):
        tid = threadid()
        buf = bufs + <size_t> tid * per_thread
        g = &grad[tid, 0]
        for s in prange(S, schedule="dynamic", chunksize=8):
            t0 = sent_ptr[s]
            T = <int> (sent_ptr[s + 1] - t0)
            memset(buf, 0, <size_t> T * <size_t> L * sizeof(double))
            k_end = attr_ptr[t0 + T]
            for phase in range(2):           # 0: the gather of the scores, 1: their scatter
                for t in range(T):
                    row = buf + t * L
                    for k in range(attr_ptr[t0 + t], attr_ptr[t0 + t + 1]):
                        if k + AHEAD < k_end:
                            f0 = feat_ptr[attrs[k + AHEAD]]
                            prefetch_read(&feat_label[f0])
                            if phase == 0:
                                prefetch_read(&w[f0])
                            else:
                                prefetch_write(&g[f0])
                        if phase == 0:
                            for f in range(feat_ptr[attrs[k]], feat_ptr[attrs[k] + 1]):
                                row[feat_label[f]] += w[f]
                        else:
                            for f in range(feat_ptr[attrs[k]], feat_ptr[attrs[k] + 1]):
                                g[f] += <real_t> row[feat_label[f]]
            part = 0.0
            for t in range(T):
                part = part + buf[t * L]
            total += part
    free(bufs)
    return total


def _check_corpus(sent_ptr, attr_ptr, attrs, feat_ptr, feat_label, w, int n_labels, int max_len):
    """ValueError unless the arrays index each other within bounds (the kernel checks nothing)."""
    import numpy as np
    sp, ap, at = np.asarray(sent_ptr), np.asarray(attr_ptr), np.asarray(attrs)
    fp, fl = np.asarray(feat_ptr), np.asarray(feat_label)
    if sp.size < 1 or sp[0] != 0 or np.any(np.diff(sp) < 0) or sp[-1] + 1 > ap.size:
        raise ValueError("sent_ptr must rise from 0 within attr_ptr")
    if sp.size > 1 and int(np.diff(sp).max()) > max_len:
        raise ValueError("max_len is shorter than the longest sentence")
    if np.any(np.diff(ap) < 0) or ap[0] < 0 or ap[-1] > at.size:
        raise ValueError("attr_ptr must rise within attrs")
    if at.size and (at.min() < 0 or at.max() + 1 >= fp.size):
        raise ValueError("attrs must index feat_ptr")
    if np.any(np.diff(fp) < 0) or fp[0] < 0 or fp[-1] > min(fl.size, np.asarray(w).size):
        raise ValueError("feat_ptr must rise within feat_label and w")
    if fl.size and (fl.min() < 0 or fl.max() >= n_labels):
        raise ValueError("feat_label must be below n_labels")
