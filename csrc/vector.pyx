# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Vector kernels for the optimizers: in place, no temporaries, no BLAS threads."""


def axpy(double a, const double[::1] x, double[::1] y):
    """y += a * x, in place."""
    cdef Py_ssize_t i, n = y.shape[0]
    if x.shape[0] != n:
        raise ValueError("x and y differ in length")
    with nogil:
        for i in range(n):
            y[i] += a * x[i]
