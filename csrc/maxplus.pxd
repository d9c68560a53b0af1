"""Max-plus vector-matrix products (maxplus.h), built for the baseline target and for AVX-512 and
picked at run time, with the same results on either: messages.pxd's max-product passes."""

cdef extern from "maxplus.h":
    # y[j] = max over i < m of x1[i] + M[i*n + j] (x2 NULL), or of (M[i*n + j] + x1[i]) + x2[i]
    void maxplus "crftk_maxplus" (const double* x1, const double* x2, const double* M, int m, int n,
                                  double* y) noexcept nogil
