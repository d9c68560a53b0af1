# cython: language_level=3, boundscheck=False, wraparound=False, initializedcheck=False
"""Vector kernels for the optimizers: in place, no temporaries, no BLAS threads.

The mixed-precision ones (a float32 vector of L-BFGS's stored pairs with float64 ones) do in one
pass what the block-at-a-time numpy code did in several (cast into a scratch block, scale, add):
each element gets the same operations in the same order, so the same bits. Built with
-ffp-contract=off (setup.py), so a * x + y rounds twice, as numpy's separate operations do.

The inner products are summed here in one fixed order rather than by BLAS, whose order differs
between its kernels (OPENBLAS_CORETYPE=Haswell and SkylakeX give different last bits): the
minimisers' every product goes through :func:`dot`, so a training run gives the same weights
under every BLAS kernel.
"""

from cython cimport floating
from libc.math cimport isfinite

ctypedef fused other_floating:
    float
    double

#: elements per block of :func:`dot`: its sum is the blocks' sums added in turn, each block's
#: summed in LANES running sums; crftk.optimize.common sums pairs a block at a time with it
cdef enum:
    _BLOCK = 65536
    _LANES = 8
BLOCK = _BLOCK


cdef inline double _block_dot(const floating *x, const other_floating *y, Py_ssize_t n) noexcept nogil:
    """The sum of x[i] * y[i] (in float64) over one block: entry i is added to running sum
    i % LANES, and the sums are added pairwise at the end. Eight independent sums let the
    compiler keep them in vector registers; the order is the same whatever the CPU."""
    cdef double acc[_LANES]
    cdef Py_ssize_t i, k, whole = n - n % _LANES
    for k in range(_LANES):
        acc[k] = 0.0
    for i in range(whole // _LANES):
        for k in range(_LANES):
            acc[k] += <double> x[i * _LANES + k] * <double> y[i * _LANES + k]
    for i in range(whole, n):
        acc[i - whole] += <double> x[i] * <double> y[i]
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))


cdef inline double _dot(const floating *x, const other_floating *y, Py_ssize_t n) noexcept nogil:
    cdef double total = 0.0
    cdef Py_ssize_t i = 0
    while i < n:
        total += _block_dot(x + i, y + i, min(<Py_ssize_t> _BLOCK, n - i))
        i += _BLOCK
    return total


def dot(const floating[::1] x, const other_floating[::1] y):
    """x'y summed in float64 in a fixed order (the blocks' sums in turn); x and y float32 or
    float64. The same number for the same vectors whatever the CPU, unlike BLAS's ddot."""
    cdef Py_ssize_t n = x.shape[0]
    cdef double total
    if y.shape[0] != n:
        raise ValueError("x and y differ in length")
    if n == 0:
        return 0.0
    with nogil:
        total = _dot(&x[0], &y[0], n)
    return total


def axpy_dot(double a, const floating[::1] x, double[::1] y, const other_floating[::1] z):
    """y += a * x as :func:`axpy`, then return dot(z, y): one pass over y instead of two (L-BFGS's
    two-loop recursion updates its vector and takes the next pair's product with it)."""
    cdef Py_ssize_t i, j, m, n = y.shape[0]
    cdef double total = 0.0
    if x.shape[0] != n or z.shape[0] != n:
        raise ValueError("x, y and z differ in length")
    with nogil:
        i = 0
        while i < n:
            m = min(<Py_ssize_t> _BLOCK, n - i)
            for j in range(i, i + m):
                y[j] += a * <double> x[j]
            total += _block_dot(&z[i], &y[i], m)
            i += _BLOCK
    return total


def scale_dot(double a, double[::1] y, const floating[::1] z):
    """y *= a, then return dot(z, y), in one pass over y."""
    cdef Py_ssize_t i, j, m, n = y.shape[0]
    cdef double total = 0.0
    if z.shape[0] != n:
        raise ValueError("y and z differ in length")
    with nogil:
        i = 0
        while i < n:
            m = min(<Py_ssize_t> _BLOCK, n - i)
            for j in range(i, i + m):
                y[j] *= a
            total += _block_dot(&z[i], &y[i], m)
            i += _BLOCK
    return total


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
