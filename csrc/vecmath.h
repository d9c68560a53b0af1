/* The vector math of crftk's kernels, in C: a register-blocked vector-matrix product, a chain's
   summed outer products (its expected transition counts), and exp and log four values at a time,
   each compiled for the baseline target and for AVX2 (the product for AVX-512 too) and picked
   at run time, with the same bits on any of them (no FMA, the same operations in the
   same order). CRFTK_SIMD=base or avx2 in the environment caps the pick (tests run every path on
   one machine). vecmath.pxd declares them for Cython; chain.pxd, messages.pxd and messages.pyx
   use them. */
#ifndef CRFTK_VECMATH_H
#define CRFTK_VECMATH_H

/* y[j] = sum_i x[i] M[i*nb + j] (i < na, j < nb) with up to 32 columns at a time held in vector
   registers over the whole sum (the plain loop stores and reloads y for every i). Each y[j] is summed in
   the same order as chain.pxd's vec_mat's, so the results are the same bits, also from its AVX2 build
   (CRFTK_BUILT_TWICE; no FMA: the same roundings). */
#include <stddef.h>
#include <string.h>
#if defined(__GNUC__) || defined(__clang__)
typedef double crftk_v4d __attribute__((vector_size(32)));
/* one pass over the rows for K vectors of 4 columns, accumulated in K registers: each
   row costs the latency of one add whatever K is, so the fewer passes the better */
#define CRFTK_LOAD_MUL_ADD(a, k) { crftk_v4d rr; memcpy(&rr, r + 4 * (k), 32); a += xi * rr; }
#define CRFTK_STORE(a, k) memcpy(y + j + 4 * (k), &a, 32);
#define CRFTK_COLUMNS(K, BODY, OUT)                                             \
    {                                                                           \
        crftk_v4d a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0; \
        for (i = 0; i < na; i++) {                                              \
            const double* r = M + (ptrdiff_t) i * nb + j;                       \
            crftk_v4d xi = {x[i], x[i], x[i], x[i]};                            \
            BODY                                                                \
        }                                                                       \
        OUT                                                                     \
        (void) a1; (void) a2; (void) a3; (void) a4; (void) a5; (void) a6; (void) a7; \
        j += 4 * (K);                                                           \
    }
/* K vectors of 4 columns and the 1-3 columns after them (left), in one pass over the rows */
#define CRFTK_COLUMNS_TAIL(K, BODY, OUT)                                        \
    {                                                                           \
        crftk_v4d a0 = {0, 0, 0, 0}, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0; \
        double c0 = 0.0, c1 = 0.0, c2 = 0.0;                                    \
        const int left = nb - j - 4 * (K);                                      \
        for (i = 0; i < na; i++) {                                              \
            const double* r = M + (ptrdiff_t) i * nb + j;                       \
            crftk_v4d xi = {x[i], x[i], x[i], x[i]};                            \
            const double xs = x[i], *rt = r + 4 * (K);                          \
            (void) xi;                                                          \
            BODY                                                                \
            if (left > 0) c0 += xs * rt[0];                                     \
            if (left > 1) c1 += xs * rt[1];                                     \
            if (left > 2) c2 += xs * rt[2];                                     \
        }                                                                       \
        OUT                                                                     \
        (void) a1; (void) a2; (void) a3; (void) a4; (void) a5; (void) a6;       \
        j += 4 * (K);                                                           \
        if (left > 0) y[j] = c0;                                                \
        if (left > 1) y[j + 1] = c1;                                            \
        if (left > 2) y[j + 2] = c2;                                            \
        j += left;                                                              \
    }
#define CRFTK_MUL_ADD_1 CRFTK_LOAD_MUL_ADD(a0, 0)
#define CRFTK_MUL_ADD_2 CRFTK_MUL_ADD_1 CRFTK_LOAD_MUL_ADD(a1, 1)
#define CRFTK_MUL_ADD_3 CRFTK_MUL_ADD_2 CRFTK_LOAD_MUL_ADD(a2, 2)
#define CRFTK_MUL_ADD_4 CRFTK_MUL_ADD_3 CRFTK_LOAD_MUL_ADD(a3, 3)
#define CRFTK_MUL_ADD_5 CRFTK_MUL_ADD_4 CRFTK_LOAD_MUL_ADD(a4, 4)
#define CRFTK_MUL_ADD_6 CRFTK_MUL_ADD_5 CRFTK_LOAD_MUL_ADD(a5, 5)
#define CRFTK_MUL_ADD_7 CRFTK_MUL_ADD_6 CRFTK_LOAD_MUL_ADD(a6, 6)
#define CRFTK_STORE_1 CRFTK_STORE(a0, 0)
#define CRFTK_STORE_2 CRFTK_STORE_1 CRFTK_STORE(a1, 1)
#define CRFTK_STORE_3 CRFTK_STORE_2 CRFTK_STORE(a2, 2)
#define CRFTK_STORE_4 CRFTK_STORE_3 CRFTK_STORE(a3, 3)
#define CRFTK_STORE_5 CRFTK_STORE_4 CRFTK_STORE(a4, 4)
#define CRFTK_STORE_6 CRFTK_STORE_5 CRFTK_STORE(a5, 5)
#define CRFTK_STORE_7 CRFTK_STORE_6 CRFTK_STORE(a6, 6)
#define CRFTK_VEC_MAT_BODY                                                      \
{                                                                               \
    int i, j = 0;                                                               \
    while (nb - j >= 32)                                                        \
        CRFTK_COLUMNS(8,                                                        \
            CRFTK_LOAD_MUL_ADD(a0, 0) CRFTK_LOAD_MUL_ADD(a1, 1) CRFTK_LOAD_MUL_ADD(a2, 2) \
            CRFTK_LOAD_MUL_ADD(a3, 3) CRFTK_LOAD_MUL_ADD(a4, 4) CRFTK_LOAD_MUL_ADD(a5, 5) \
            CRFTK_LOAD_MUL_ADD(a6, 6) CRFTK_LOAD_MUL_ADD(a7, 7),               \
            CRFTK_STORE(a0, 0) CRFTK_STORE(a1, 1) CRFTK_STORE(a2, 2) CRFTK_STORE(a3, 3) \
            CRFTK_STORE(a4, 4) CRFTK_STORE(a5, 5) CRFTK_STORE(a6, 6) CRFTK_STORE(a7, 7)) \
    /* the rest (under 32 columns) in one pass over the rows, its last 1-3 columns beside the  \
       vectors: each pass costs the latency of na adds, so one pass, not three (n = 23) */      \
    switch ((nb - j) / 4) {                                                     \
    case 7: CRFTK_COLUMNS_TAIL(7, CRFTK_MUL_ADD_7, CRFTK_STORE_7) break;        \
    case 6: CRFTK_COLUMNS_TAIL(6, CRFTK_MUL_ADD_6, CRFTK_STORE_6) break;        \
    case 5: CRFTK_COLUMNS_TAIL(5, CRFTK_MUL_ADD_5, CRFTK_STORE_5) break;        \
    case 4: CRFTK_COLUMNS_TAIL(4, CRFTK_MUL_ADD_4, CRFTK_STORE_4) break;        \
    case 3: CRFTK_COLUMNS_TAIL(3, CRFTK_MUL_ADD_3, CRFTK_STORE_3) break;        \
    case 2: CRFTK_COLUMNS_TAIL(2, CRFTK_MUL_ADD_2, CRFTK_STORE_2) break;        \
    case 1: CRFTK_COLUMNS_TAIL(1, CRFTK_MUL_ADD_1, CRFTK_STORE_1) break;        \
    default: if (j < nb) CRFTK_COLUMNS_TAIL(0, , ) break;  /* 1-3 columns only */  \
    }                                                                           \
}
#else
#define CRFTK_VEC_MAT_BODY                                                      \
{                                                                               \
    int i, j;                                                                   \
    for (j = 0; j < nb; j++) {                                                  \
        double acc = 0.0;                                                       \
        for (i = 0; i < na; i++) acc += x[i] * M[(ptrdiff_t) i * nb + j];       \
        y[j] = acc;                                                             \
    }                                                                           \
}
#endif
/* name(params) compiled twice, for the baseline target and for AVX2, the AVX2 one called
   where the processor has it (GCC or clang on x86-64; elsewhere once); CRFTK_BUILT_THRICE adds
   an AVX-512 build of another body (wider vectors, the same operations on each value), called
   where the processor has it and the condition ``wide`` on the arguments holds */
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <stdlib.h>
#include <immintrin.h>
#define CRFTK_X86 1
/* The widest of the builds the processor runs: 2 AVX-512, 1 AVX2, 0 the baseline; CRFTK_SIMD
   (base, avx2; any other value is ignored) caps it. Read once per extension module, as it loads
   (crftk_simd_init): not later from the kernels' threads, where getenv could race a change of the
   environment. */
static int crftk_simd_level = -1;
static inline int crftk_simd(void)
{
    if (__builtin_expect(crftk_simd_level < 0, 0)) {
        const char* cap = getenv("CRFTK_SIMD");
        int level = __builtin_cpu_supports("avx2") ? 1 : 0;
        if (level && __builtin_cpu_supports("avx512f"))
            level = 2;
        if (cap != NULL && strcmp(cap, "base") == 0)
            level = 0;
        else if (cap != NULL && strcmp(cap, "avx2") == 0 && level > 1)
            level = 1;
        crftk_simd_level = level;
    }
    return crftk_simd_level;
}
__attribute__((constructor)) static void crftk_simd_init(void)
{
    (void) crftk_simd();
}
#define CRFTK_BUILT_TWICE(name, params, args, body)                             \
    static inline void name##_base params body                                  \
    __attribute__((target("avx2"), unused)) static void name##_avx2 params body \
    static inline void name params                                              \
    {                                                                           \
        if (crftk_simd() >= 1) name##_avx2 args;                                \
        else name##_base args;                                                  \
    }
#define CRFTK_BUILT_THRICE(name, params, args, body, body512, wide)             \
    static inline void name##_base params body                                  \
    __attribute__((target("avx2"), unused)) static void name##_avx2 params body \
    __attribute__((target("avx512f"), unused)) static void name##_avx512 params body512 \
    static inline void name params                                              \
    {                                                                           \
        const int level = crftk_simd();                                         \
        if (level >= 2 && (wide)) name##_avx512 args;                           \
        else if (level >= 1) name##_avx2 args;                                  \
        else name##_base args;                                                  \
    }
#else
#define CRFTK_X86 0
#define CRFTK_BUILT_TWICE(name, params, args, body) static inline void name params body
#define CRFTK_BUILT_THRICE(name, params, args, body, body512, wide) static inline void name params body
#endif
/* The AVX-512 build: up to 48 columns (6 registers of 8) per pass over the rows, the last
   register's lanes past nb loaded as 0 and not stored; each column's sum is the others' (0.0, then
   + x[i] * M[i, j] for i in order). n = 44 (a POS chain) is one pass, not two (32 + 12): 44 x 44
   took 300 -> 230 ns here (a 2-core Xeon), 23 x 23 97 -> 73 ns. Up to 16 columns it is not
   faster (equal at 16, 20% slower at 12, 3x at 3: the masks cost more than the pass saves), so
   those stay on AVX2. */
#if CRFTK_X86
#define CRFTK_VM_LOAD(k) (k < K - 1 ? _mm512_loadu_pd(r + 8 * (k)) : _mm512_maskz_loadu_pd(last, r + 8 * (k)))
#define CRFTK_VM_ADD(k) if (K > k) a##k = _mm512_add_pd(a##k, _mm512_mul_pd(xi, CRFTK_VM_LOAD(k)));
#define CRFTK_VM_STORE(k) if (K > k) _mm512_mask_storeu_pd(y + j + 8 * (k), mask[k], a##k);
#define CRFTK_VM_BLOCK(K_)                                                      \
    {                                                                           \
        enum { K = K_ };                                                        \
        const __mmask8 last = mask[K - 1];                                      \
        __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0; \
        for (i = 0; i < na; i++) {                                              \
            const double* r = M + (ptrdiff_t) i * nb + j;                       \
            const __m512d xi = _mm512_set1_pd(x[i]);                            \
            CRFTK_VM_ADD(0) CRFTK_VM_ADD(1) CRFTK_VM_ADD(2)                     \
            CRFTK_VM_ADD(3) CRFTK_VM_ADD(4) CRFTK_VM_ADD(5)                     \
        }                                                                       \
        CRFTK_VM_STORE(0) CRFTK_VM_STORE(1) CRFTK_VM_STORE(2)                   \
        CRFTK_VM_STORE(3) CRFTK_VM_STORE(4) CRFTK_VM_STORE(5)                   \
    }
#define CRFTK_VEC_MAT_BODY512                                                   \
{                                                                               \
    int i, j, k, left;                                                          \
    __mmask8 mask[6];                                                           \
    for (j = 0; j < nb; j += 48) {                                              \
        left = nb - j < 48 ? nb - j : 48;                                       \
        k = (left + 7) / 8;                                                     \
        for (i = 0; i < 6; i++) {                                               \
            const int lanes = left - 8 * i;                                     \
            mask[i] = (__mmask8) (lanes >= 8 ? 0xFF : lanes > 0 ? (1u << lanes) - 1 : 0); \
        }                                                                       \
        switch (k) {                                                            \
        case 1: CRFTK_VM_BLOCK(1) break;                                        \
        case 2: CRFTK_VM_BLOCK(2) break;                                        \
        case 3: CRFTK_VM_BLOCK(3) break;                                        \
        case 4: CRFTK_VM_BLOCK(4) break;                                        \
        case 5: CRFTK_VM_BLOCK(5) break;                                        \
        default: CRFTK_VM_BLOCK(6) break;                                       \
        }                                                                       \
    }                                                                           \
}
#else
#define CRFTK_VEC_MAT_BODY512 CRFTK_VEC_MAT_BODY
#endif
CRFTK_BUILT_THRICE(crftk_vec_mat, (const double* x, const double* M, int na, int nb, double* y),
                   (x, M, na, nb, y), CRFTK_VEC_MAT_BODY, CRFTK_VEC_MAT_BODY512, nb > 16)

/* acc[i*n + j] += a[(t-1)*n + i] * q[t*n + j] for t = T-1 down to 1 wherever E[t] == shared: a
   chain's expected transition counts through its shared matrix, as a backward sweep adds them
   one position at a time (chain.pxd's chain_sum_product_shared), with up to 32 entries of a row
   held in vector registers over all the positions instead of loaded and stored at each. Every
   entry gets the same products added in the same order: the same bits, also from the AVX2 build
   (no FMA). */
#if defined(__GNUC__) || defined(__clang__)
#define CRFTK_OUTER_LOAD(k) memcpy(&c##k, out + j + 4 * (k), 32);
#define CRFTK_OUTER_ADD(k) { crftk_v4d rr; memcpy(&rr, r + 4 * (k), 32); c##k += ai * rr; }
#define CRFTK_OUTER_STORE(k) memcpy(out + j + 4 * (k), &c##k, 32);
#define CRFTK_OUTER_COLUMNS(K, LOAD, BODY, STORE)                               \
    {                                                                           \
        crftk_v4d c0 = {0, 0, 0, 0}, c1 = c0, c2 = c0, c3 = c0;                 \
        LOAD                                                                    \
        for (t = T - 1; t >= 1; t--) {                                          \
            if (E[t] != shared) continue;                                       \
            const double* r = q + (ptrdiff_t) t * n + j;                        \
            const double av = a[(ptrdiff_t) (t - 1) * n + i];                   \
            crftk_v4d ai = {av, av, av, av};                                    \
            BODY                                                                \
        }                                                                       \
        STORE                                                                   \
        (void) c1; (void) c2; (void) c3;                                        \
        j += 4 * (K);                                                           \
    }
#define CRFTK_OUTER_BODY                                                        \
{                                                                               \
    int i, j, t;                                                                \
    for (i = 0; i < n; i++) {                                                   \
        double* out = acc + (ptrdiff_t) i * n;                                  \
        j = 0;                                                                  \
        while (n - j >= 16)                                                     \
            CRFTK_OUTER_COLUMNS(4,                                              \
                CRFTK_OUTER_LOAD(0) CRFTK_OUTER_LOAD(1) CRFTK_OUTER_LOAD(2) CRFTK_OUTER_LOAD(3), \
                CRFTK_OUTER_ADD(0) CRFTK_OUTER_ADD(1) CRFTK_OUTER_ADD(2) CRFTK_OUTER_ADD(3), \
                CRFTK_OUTER_STORE(0) CRFTK_OUTER_STORE(1) CRFTK_OUTER_STORE(2) CRFTK_OUTER_STORE(3)) \
        if (n - j >= 8)                                                         \
            CRFTK_OUTER_COLUMNS(2, CRFTK_OUTER_LOAD(0) CRFTK_OUTER_LOAD(1),     \
                CRFTK_OUTER_ADD(0) CRFTK_OUTER_ADD(1), CRFTK_OUTER_STORE(0) CRFTK_OUTER_STORE(1)) \
        if (n - j >= 4)                                                         \
            CRFTK_OUTER_COLUMNS(1, CRFTK_OUTER_LOAD(0), CRFTK_OUTER_ADD(0), CRFTK_OUTER_STORE(0)) \
        if (j < n) {                                                            \
            /* the last 1-3 columns, side by side */                            \
            const int left = n - j;                                             \
            double e0 = out[j], e1 = left > 1 ? out[j + 1] : 0.0, e2 = left > 2 ? out[j + 2] : 0.0; \
            for (t = T - 1; t >= 1; t--) {                                      \
                if (E[t] != shared) continue;                                   \
                const double av = a[(ptrdiff_t) (t - 1) * n + i], *r = q + (ptrdiff_t) t * n + j; \
                e0 += av * r[0];                                                \
                if (left > 1) e1 += av * r[1];                                  \
                if (left > 2) e2 += av * r[2];                                  \
            }                                                                   \
            out[j] = e0;                                                        \
            if (left > 1) out[j + 1] = e1;                                      \
            if (left > 2) out[j + 2] = e2;                                      \
        }                                                                       \
    }                                                                           \
}
#else
#define CRFTK_OUTER_BODY                                                        \
{                                                                               \
    int i, j, t;                                                                \
    for (t = T - 1; t >= 1; t--)                                                \
        if (E[t] == shared)                                                     \
            for (i = 0; i < n; i++)                                             \
                for (j = 0; j < n; j++)                                         \
                    acc[(ptrdiff_t) i * n + j] += a[(ptrdiff_t) (t - 1) * n + i] * q[(ptrdiff_t) t * n + j]; \
}
#endif
CRFTK_BUILT_TWICE(crftk_outer_acc, (const double* a, const double* q, int T, int n, const double* const* E,
                                    const double* shared, double* acc),
                  (a, q, T, n, E, shared, acc), CRFTK_OUTER_BODY)

/* y[i] = exp(x[i]) for n values (x and y may be the same array), 4 (AVX-512: 8) at a time: k = x / ln 2
   rounded, r = x - k ln 2 (|r| <= ln 2 / 2), exp(r) by its Taylor series to r^12 / 12!
   (truncation below 2e-16), times 2^k built in the exponent bits. Within 3 ulps of exp;
   0 below -708 (no subnormal results), NaN for NaN; meant for x <= 0 (no overflow
   check). The same operations for every value and on every target (no FMA), so a value's
   result does not depend on its place in the array or on the processor. */
#include <stdint.h>
#define CRFTK_LOG2E 1.4426950408889634
#define CRFTK_LN2_HI 6.93147180369123816490e-01
#define CRFTK_LN2_LO 1.90821492927058770002e-10
#define CRFTK_SHIFTER 6755399441055744.0            /* 1.5 * 2^52 */
#define CRFTK_EXP_POLY(p, r)                                                    \
    p = (r) * (1.0 / 479001600) + 1.0 / 39916800; p = p * (r) + 1.0 / 3628800;   \
    p = p * (r) + 1.0 / 362880; p = p * (r) + 1.0 / 40320; p = p * (r) + 1.0 / 5040;  \
    p = p * (r) + 1.0 / 720; p = p * (r) + 1.0 / 120; p = p * (r) + 1.0 / 24;         \
    p = p * (r) + 1.0 / 6; p = p * (r) + 0.5; p = p * (r) + 1.0; p = p * (r) + 1.0;
static inline double crftk_exp1(double x)
{
    double t = x * CRFTK_LOG2E + CRFTK_SHIFTER, k = t - CRFTK_SHIFTER, r, p, s, sh = CRFTK_SHIFTER;
    int64_t bits, shbits;
    r = x - k * CRFTK_LN2_HI;
    r = r - k * CRFTK_LN2_LO;
    CRFTK_EXP_POLY(p, r)
    memcpy(&bits, &t, 8);
    memcpy(&shbits, &sh, 8);
    bits = (int64_t) ((uint64_t) (bits - shbits + 1023) << 52);
    memcpy(&s, &bits, 8);
    return x < -708.0 ? 0.0 : p * s;
}
#if defined(__GNUC__) || defined(__clang__)
typedef int64_t crftk_v4i __attribute__((vector_size(32)));
typedef uint64_t crftk_v4u __attribute__((vector_size(32)));
#define CRFTK_EXP_BODY                                                          \
{                                                                               \
    int i = 0;                                                                  \
    const crftk_v4d shifter = {CRFTK_SHIFTER, CRFTK_SHIFTER, CRFTK_SHIFTER, CRFTK_SHIFTER}; \
    crftk_v4u shbits;                                                           \
    memcpy(&shbits, &shifter, 32);                                              \
    for (; i + 4 <= n; i += 4) {                                                \
        crftk_v4d v, t, k, r, p, s;                                             \
        crftk_v4u bits;                                                         \
        crftk_v4i low;                                                          \
        memcpy(&v, x + i, 32);                                                  \
        t = v * CRFTK_LOG2E + shifter;                                          \
        k = t - shifter;                                                        \
        r = v - k * CRFTK_LN2_HI;                                               \
        r = r - k * CRFTK_LN2_LO;                                               \
        CRFTK_EXP_POLY(p, r)                                                    \
        memcpy(&bits, &t, 32);                                                  \
        bits = (bits - shbits + 1023) << 52;                                    \
        memcpy(&s, &bits, 32);                                                  \
        p = p * s;                                                              \
        low = v < -708.0;                                                       \
        memcpy(&bits, &p, 32);                                                  \
        bits &= ~(crftk_v4u) low;                                               \
        memcpy(y + i, &bits, 32);                                               \
    }                                                                           \
    for (; i < n; i++) y[i] = crftk_exp1(x[i]);                                 \
}
#endif

/* y[i] = log(x[i]) for n values (x and y may be the same array), 4 at a time: x = 2^e m
   with m in [sqrt(1/2), sqrt(2)), log m = 2 atanh(s) = 2 (s + s^3/3 + ... + s^23/23), s =
   (m - 1) / (m + 1) (|s| <= 0.172, truncation below 1e-18), plus e ln 2. Within 3 ulps of
   log; a value that is not a positive normal number (0, subnormal, negative, infinite, NaN)
   goes to the C library's log (the other values of its group of 4 one at a time, the same
   operations). The same result anywhere in an array and on every target (no FMA). */
#include <math.h>
#define CRFTK_SQRT2 1.4142135623730951
#define CRFTK_DBL_MIN 2.2250738585072014e-308
#define CRFTK_DBL_MAX 1.7976931348623157e+308
#define CRFTK_LOG_SERIES(R, z)                                                  \
    R = (z) * (1.0 / 23) + 1.0 / 21; R = R * (z) + 1.0 / 19; R = R * (z) + 1.0 / 17; \
    R = R * (z) + 1.0 / 15; R = R * (z) + 1.0 / 13; R = R * (z) + 1.0 / 11;   \
    R = R * (z) + 1.0 / 9; R = R * (z) + 1.0 / 7; R = R * (z) + 1.0 / 5;      \
    R = R * (z) + 1.0 / 3; R = R * (z);
static inline double crftk_log1(double x)
{
    uint64_t bits, mb;
    double m, e, f, s, z, R, lm, one = 1.0;
    if (!(x >= CRFTK_DBL_MIN && x <= CRFTK_DBL_MAX)) return log(x);
    memcpy(&bits, &x, 8);
    e = (double) (int64_t) (bits >> 52) - 1023.0;
    mb = (bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL;
    memcpy(&m, &mb, 8);
    if (m > CRFTK_SQRT2) { m = m * 0.5; e = e + one; }
    f = m - 1.0;
    s = f / (f + 2.0);
    z = s * s;
    CRFTK_LOG_SERIES(R, z)
    lm = 2.0 * s + 2.0 * s * R;
    return e * CRFTK_LN2_HI + (e * CRFTK_LN2_LO + lm);
}
#if defined(__GNUC__) || defined(__clang__)
#define CRFTK_LOG_BODY                                                          \
{                                                                               \
    int i = 0, k;                                                               \
    const crftk_v4u mant = {0x000fffffffffffffULL, 0x000fffffffffffffULL, 0x000fffffffffffffULL, 0x000fffffffffffffULL}; \
    const crftk_v4u onebits = {0x3ff0000000000000ULL, 0x3ff0000000000000ULL, 0x3ff0000000000000ULL, 0x3ff0000000000000ULL}; \
    const crftk_v4u magic = {0x4330000000000000ULL, 0x4330000000000000ULL, 0x4330000000000000ULL, 0x4330000000000000ULL}; \
    const crftk_v4d two52 = {4503599627370496.0, 4503599627370496.0, 4503599627370496.0, 4503599627370496.0}; \
    for (; i + 4 <= n; i += 4) {                                                \
        crftk_v4d v, m, mh, e, f, s, z, R, lm, ebits;                           \
        crftk_v4u bits, ub;                                                     \
        crftk_v4i ok, big;                                                      \
        memcpy(&v, x + i, 32);                                                  \
        ok = (v >= CRFTK_DBL_MIN) & (v <= CRFTK_DBL_MAX);                       \
        if (!(ok[0] & ok[1] & ok[2] & ok[3])) {                                 \
            for (k = 0; k < 4; k++) y[i + k] = crftk_log1(x[i + k]);            \
            continue;                                                           \
        }                                                                       \
        memcpy(&bits, &v, 32);                                                  \
        ub = (bits >> 52) | magic;                                              \
        memcpy(&ebits, &ub, 32);                                                \
        e = (ebits - two52) - 1023.0;                                           \
        ub = (bits & mant) | onebits;                                           \
        memcpy(&m, &ub, 32);                                                    \
        big = m > CRFTK_SQRT2;                                                  \
        mh = m * 0.5;                                                           \
        {                                                                       \
            crftk_v4u mbits, hbits, sel, onev;                                  \
            crftk_v4d one = {1.0, 1.0, 1.0, 1.0}, inc;                          \
            memcpy(&mbits, &m, 32); memcpy(&hbits, &mh, 32);                    \
            sel = (crftk_v4u) big;                                              \
            mbits = (hbits & sel) | (mbits & ~sel);                             \
            memcpy(&m, &mbits, 32);                                             \
            memcpy(&onev, &one, 32);                                            \
            onev &= sel;                                                        \
            memcpy(&inc, &onev, 32);                                            \
            e = e + inc;                                                        \
        }                                                                       \
        f = m - 1.0;                                                            \
        s = f / (f + 2.0);                                                      \
        z = s * s;                                                              \
        CRFTK_LOG_SERIES(R, z)                                                  \
        lm = 2.0 * s + 2.0 * s * R;                                             \
        lm = e * CRFTK_LN2_HI + (e * CRFTK_LN2_LO + lm);                        \
        memcpy(y + i, &lm, 32);                                                 \
    }                                                                           \
    for (; i < n; i++) y[i] = crftk_log1(x[i]);                                 \
}
#endif

#if !(defined(__GNUC__) || defined(__clang__))
/* without vector types, one value at a time */
#define CRFTK_EXP_BODY { int i; for (i = 0; i < n; i++) y[i] = crftk_exp1(x[i]); }
#define CRFTK_LOG_BODY { int i; for (i = 0; i < n; i++) y[i] = crftk_log1(x[i]); }
#endif
CRFTK_BUILT_TWICE(crftk_exp_array, (const double* x, double* y, int n), (x, y, n), CRFTK_EXP_BODY)
CRFTK_BUILT_TWICE(crftk_log_array, (const double* x, double* y, int n), (x, y, n), CRFTK_LOG_BODY)

#endif /* CRFTK_VECMATH_H */
