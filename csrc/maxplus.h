/* Max-plus vector-matrix products for max-product message passing (messages.pxd): each output
   column's maximum over the rows held in a vector register for the whole pass (the plain loop
   stores and reloads it for every row). Compiled for the baseline target and for AVX-512 and
   picked at run time. Every sum is the plain loop's, in its order, and max is exact, so the
   results are the same bits on either (max_pd(v, a) is v > a ? v : a, as the loops compare);
   CRFTK_SIMD=base or avx2 keeps the baseline (vecmath.h's crftk_simd). maxplus.pxd declares them
   for Cython. */
#ifndef CRFTK_MAXPLUS_H
#define CRFTK_MAXPLUS_H

#include <math.h>
#include <stddef.h>
#include "vecmath.h"

/* y[j] = max over i < m of v(i, j) for j < n, where v(i, j) = x1[i] + M[i*n + j], or with x2,
   (M[i*n + j] + x1[i]) + x2[i] (a Viterbi backward step over a transposed matrix). */
static inline void crftk_maxplus_plain(const double* x1, const double* x2, const double* M, int m, int n,
                                       double* y)
{
    int i, j;
    for (j = 0; j < n; j++)
        y[j] = -INFINITY;
    for (i = 0; i < m; i++) {
        const double* r = M + (ptrdiff_t) i * n;
        const double a = x1[i], b = x2 != NULL ? x2[i] : 0.0;
        if (x2 == NULL) {
            for (j = 0; j < n; j++) {
                const double v = a + r[j];
                y[j] = v > y[j] ? v : y[j];
            }
        } else {
            for (j = 0; j < n; j++) {
                const double v = (r[j] + a) + b;
                y[j] = v > y[j] ? v : y[j];
            }
        }
    }
}

/* The largest of v[0:n], -inf when n is 0 or every value is -inf or NaN: the loop that keeps the
   first larger value, whose result any order of comparison gives but for the sign of a zero
   maximum (+0 or -0, which compare and add alike). */
static inline double crftk_max_of_plain(const double* v, int n)
{
    double m = -INFINITY;
    int i;
    for (i = 0; i < n; i++)
        m = v[i] > m ? v[i] : m;
    return m;
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx512f"))) static double crftk_max_of_avx512(const double* v, int n)
{
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    __m512d a = ninf, b = ninf;
    double out[8], m;
    int i = 0, k;
    for (; i + 16 <= n; i += 16) {
        a = _mm512_max_pd(_mm512_loadu_pd(v + i), a);
        b = _mm512_max_pd(_mm512_loadu_pd(v + i + 8), b);
    }
    for (; i < n; i += 8) {
        const int lanes = n - i < 8 ? n - i : 8;
        a = _mm512_max_pd(_mm512_mask_loadu_pd(ninf, (__mmask8) ((1u << lanes) - 1), v + i), a);
    }
    _mm512_storeu_pd(out, _mm512_max_pd(b, a));
    m = out[0];
    for (k = 1; k < 8; k++)
        m = out[k] > m ? out[k] : m;
    return m;
}

/* K vectors of 8 columns from column j; the last one (k == K - 1) loads only the lanes before
   n, and the others are zero, whose sums land in lanes that are never stored. The full vectors
   load without a mask, and no mask waits in a register across the rows (six masks did not fit
   with the accumulators: each row reloaded them). */
#define CRFTK_MP_LOAD(k) (k < K - 1 ? _mm512_loadu_pd(r + 8 * (k)) : _mm512_maskz_loadu_pd(last, r + 8 * (k)))
#define CRFTK_MP_BLOCK(K_, EXPR)                                                  \
    {                                                                             \
        enum { K = K_ };                                                          \
        const __mmask8 last = mask[K - 1];                                        \
        __m512d a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf, a4 = ninf, a5 = ninf; \
        for (i = 0; i < m; i++) {                                                 \
            const double* r = M + (ptrdiff_t) i * n + j;                          \
            const __m512d xa = _mm512_set1_pd(x1[i]);                             \
            const __m512d xb = _mm512_set1_pd(x2 != NULL ? x2[i] : 0.0);          \
            a0 = _mm512_max_pd(EXPR(CRFTK_MP_LOAD(0)), a0);                       \
            if (K > 1) a1 = _mm512_max_pd(EXPR(CRFTK_MP_LOAD(1)), a1);            \
            if (K > 2) a2 = _mm512_max_pd(EXPR(CRFTK_MP_LOAD(2)), a2);            \
            if (K > 3) a3 = _mm512_max_pd(EXPR(CRFTK_MP_LOAD(3)), a3);            \
            if (K > 4) a4 = _mm512_max_pd(EXPR(CRFTK_MP_LOAD(4)), a4);            \
            if (K > 5) a5 = _mm512_max_pd(EXPR(CRFTK_MP_LOAD(5)), a5);            \
            (void) xb;                                                            \
        }                                                                         \
        _mm512_mask_storeu_pd(y + j, mask[0], a0);                                \
        if (K > 1) _mm512_mask_storeu_pd(y + j + 8, mask[1], a1);                 \
        if (K > 2) _mm512_mask_storeu_pd(y + j + 16, mask[2], a2);                \
        if (K > 3) _mm512_mask_storeu_pd(y + j + 24, mask[3], a3);                \
        if (K > 4) _mm512_mask_storeu_pd(y + j + 32, mask[4], a4);                \
        if (K > 5) _mm512_mask_storeu_pd(y + j + 40, mask[5], a5);                \
    }
/* One vector of columns (n - j <= 8: a message into a chain of up to 8 labels): a single
   accumulator would wait on each row's max, so rows go to four in turn. A maximum is the same
   in any order, and a nonzero maximum has one bit pattern; a zero one may be +0 or -0, whichever
   row comes first, so a block with a zero maximum is done again by the plain loop. */
#define CRFTK_MP_ROW1(ii, acc, EXPR)                                              \
    {                                                                             \
        const __m512d xa = _mm512_set1_pd(x1[ii]);                                \
        const __m512d xb = _mm512_set1_pd(x2 != NULL ? x2[ii] : 0.0);             \
        acc = _mm512_max_pd(EXPR(_mm512_maskz_loadu_pd(last, M + (ptrdiff_t) (ii) * n + j)), acc); \
        (void) xb;                                                                \
    }
#define CRFTK_MP_NARROW(EXPR)                                                     \
    {                                                                             \
        const __mmask8 last = mask[0];                                            \
        __m512d a0 = ninf, a1 = ninf, a2 = ninf, a3 = ninf;                       \
        for (i = 0; i + 4 <= m; i += 4) {                                         \
            CRFTK_MP_ROW1(i, a0, EXPR)                                            \
            CRFTK_MP_ROW1(i + 1, a1, EXPR)                                        \
            CRFTK_MP_ROW1(i + 2, a2, EXPR)                                        \
            CRFTK_MP_ROW1(i + 3, a3, EXPR)                                        \
        }                                                                         \
        for (; i < m; i++)                                                        \
            CRFTK_MP_ROW1(i, a0, EXPR)                                            \
        a0 = _mm512_max_pd(_mm512_max_pd(a3, a2), _mm512_max_pd(a1, a0));        \
        if (_mm512_mask_cmp_pd_mask(last, a0, _mm512_setzero_pd(), _CMP_EQ_OQ)) { \
            crftk_maxplus_plain(x1, x2, M, m, n, y);                              \
            return;                                                               \
        }                                                                         \
        _mm512_mask_storeu_pd(y + j, last, a0);                                   \
    }
#define CRFTK_MP_FORWARD(v) _mm512_add_pd(xa, v)
#define CRFTK_MP_BACKWARD(v) _mm512_add_pd(_mm512_add_pd(v, xa), xb)
#define CRFTK_MP_BLOCKS(EXPR)                                                     \
    switch (k) {                                                                  \
    case 1: CRFTK_MP_NARROW(EXPR) break;                                          \
    case 2: CRFTK_MP_BLOCK(2, EXPR) break;                                        \
    case 3: CRFTK_MP_BLOCK(3, EXPR) break;                                        \
    case 4: CRFTK_MP_BLOCK(4, EXPR) break;                                        \
    case 5: CRFTK_MP_BLOCK(5, EXPR) break;                                        \
    default: CRFTK_MP_BLOCK(6, EXPR) break;                                       \
    }

__attribute__((target("avx512f"))) static void crftk_maxplus_avx512(const double* x1, const double* x2,
                                                                    const double* M, int m, int n, double* y)
{
    const __m512d ninf = _mm512_set1_pd(-INFINITY);
    int i, j, k, left;
    __mmask8 mask[6];
    /* up to 48 columns (6 registers) per pass over the rows */
    for (j = 0; j < n; j += 48) {
        left = n - j < 48 ? n - j : 48;
        k = (left + 7) / 8;
        for (i = 0; i < 6; i++) {
            const int lanes = left - 8 * i;
            mask[i] = (__mmask8) (lanes >= 8 ? 0xFF : lanes > 0 ? (1u << lanes) - 1 : 0);
        }
        if (x2 == NULL)
            CRFTK_MP_BLOCKS(CRFTK_MP_FORWARD)
        else
            CRFTK_MP_BLOCKS(CRFTK_MP_BACKWARD)
    }
}

static inline double crftk_max_of(const double* v, int n)
{
    /* a vector or fewer: the plain loop, inlined, costs less than the masked load and the lanes'
       reduction (a factorial CRF's messages into a chain of 3 labels) */
    if (n <= 8)
        return crftk_max_of_plain(v, n);
    return crftk_simd() >= 2 ? crftk_max_of_avx512(v, n) : crftk_max_of_plain(v, n);
}

static inline void crftk_maxplus(const double* x1, const double* x2, const double* M, int m, int n, double* y)
{
    if (crftk_simd() >= 2)
        crftk_maxplus_avx512(x1, x2, M, m, n, y);
    else
        crftk_maxplus_plain(x1, x2, M, m, n, y);
}
#else
#define crftk_maxplus crftk_maxplus_plain
#define crftk_max_of crftk_max_of_plain
#endif

#endif /* CRFTK_MAXPLUS_H */
