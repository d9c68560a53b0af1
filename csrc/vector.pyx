# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Vector kernels for the optimizers: in place, no temporaries, no BLAS threads.

The mixed-precision ones (a float32 vector of L-BFGS's stored pairs with float64 ones) do in one
pass what the block-at-a-time numpy code did in several (cast into a scratch block, scale, add):
each element gets the same operations in the same order, so the same bits. Built without FMA
contraction (no -march), so a * x + y rounds twice, as numpy's separate operations did.
"""


def axpy(double a, const double[::1] x, double[::1] y):
    """y += a * x, in place."""
    cdef Py_ssize_t i, n = y.shape[0]
    if x.shape[0] != n:
        raise ValueError("x and y differ in length")
    with nogil:
        for i in range(n):
            y[i] += a * x[i]


def axpy_single(double a, const float[::1] x, double[::1] y):
    """y += a * x for a float32 x, in place: x's entry read as float64, times a, added to y's."""
    cdef Py_ssize_t i, n = y.shape[0]
    if x.shape[0] != n:
        raise ValueError("x and y differ in length")
    with nogil:
        for i in range(n):
            y[i] += a * <double> x[i]


def rounded_difference(const double[::1] a, const double[::1] b, double[::1] out):
    """out = a - b computed in float64, rounded to float32 and read back in float64 (the entries
    of a float32 pair as the products read them)."""
    cdef Py_ssize_t i, n = out.shape[0]
    if a.shape[0] != n or b.shape[0] != n:
        raise ValueError("a, b and out differ in length")
    with nogil:
        for i in range(n):
            out[i] = <double> <float> (a[i] - b[i])


def single_difference(const double[::1] a, const double[::1] b, float[::1] out):
    """out = a - b computed in float64 and rounded to float32."""
    cdef Py_ssize_t i, n = out.shape[0]
    if a.shape[0] != n or b.shape[0] != n:
        raise ValueError("a, b and out differ in length")
    with nogil:
        for i in range(n):
            out[i] = <float> (a[i] - b[i])
