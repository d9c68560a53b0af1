# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Vector kernels for the optimizers: in place, no temporaries, no BLAS threads.

The mixed-precision ones (a float32 vector of L-BFGS's stored pairs with float64 ones) do in one
pass what the block-at-a-time numpy code did in several (cast into a scratch block, scale, add):
each element gets the same operations in the same order, so the same bits. Built with
-ffp-contract=off (setup.py), so a * x + y rounds twice, as numpy's separate operations do.
"""

from cython cimport floating
from libc.math cimport isfinite


def axpy(double a, const floating[::1] x, double[::1] y):
    """y += a * x, in place; a float32 x's entries read as float64, times a, added to y's."""
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


def all_finite(const double[::1] x):
    """Whether every entry of x is finite (np.isfinite(x).all() with no boolean temporary)."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef bint ok = True
    with nogil:
        for i in range(n):
            if not isfinite(x[i]):
                ok = False
                break
    return ok


def same_values(const double[::1] a, const double[::1] b):
    """Whether a and b have the same length and equal entries (np.array_equal: NaN equals nothing,
    -0.0 equals 0.0), stopping at the first difference: two points of a minimiser differ in their
    first entries almost always, and array_equal compares them all into a boolean temporary."""
    cdef Py_ssize_t i, n = a.shape[0]
    cdef bint same = True
    if b.shape[0] != n:
        return False
    with nogil:
        for i in range(n):
            if a[i] != b[i]:
                same = False
                break
    return same
