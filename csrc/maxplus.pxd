"""Max-plus vector-matrix products (maxplus.h), built for the baseline target and for AVX-512 and
picked at run time, with the same results on either: messages.pxd's max-product passes."""

cdef extern from "maxplus.h":
    # y[j] = max over i < m of x1[i] + M[i*n + j] (x2 NULL), or of (M[i*n + j] + x1[i]) + x2[i]
    void maxplus "crftk_maxplus" (const double* x1, const double* x2, const double* M, int m, int n,
                                  double* y) noexcept nogil
    # the largest of v[0:n] (-inf when none is larger), in any order: the same value as a loop
    # keeping the first larger one, but for the sign of a zero maximum
    double max_of "crftk_max_of" (const double* v, int n) noexcept nogil
