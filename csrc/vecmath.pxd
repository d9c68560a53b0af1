"""The kernels' vector math (vecmath.h): a vector-matrix product, summed outer products, exp and
log of arrays, built for the baseline target and for AVX2 and picked at run time, with the same
results on either."""

cdef extern from "vecmath.h":
    # y[j] = sum_i x[i] M[i*nb + j] (i < na, j < nb), summed in the order of chain.pxd's vec_mat
    void vec_mat_rect "crftk_vec_mat" (const double* x, const double* M, int na, int nb, double* y) noexcept nogil
    # acc[i*n + j] += a[(t-1)*n + i] q[t*n + j] for t = T-1 down to 1 where E[t] == shared, in that order
    void outer_acc "crftk_outer_acc" (const double* a, const double* q, int T, int n, const double* const* E,
                                      const double* shared, double* acc) noexcept nogil
    # y = exp(x) within 3 ulps (0 below -708; meant for x <= 0); x and y may be the same array
    void exp_array "crftk_exp_array" (const double* x, double* y, int n) noexcept nogil
    # y = log(x) within 3 ulps; x and y may be the same array
    void log_array "crftk_log_array" (const double* x, double* y, int n) noexcept nogil
