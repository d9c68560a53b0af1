/* One step of the K-best recursion of a product chain (product.pxd's product_nbest) along one
   chain's axis, for the outputs of one column (the joint labels that differ in that chain's label
   only), in C: the loops are tight enough for the compiler to keep them in registers. Compiled
   for the baseline target and for AVX2 (vecmath.h's CRFTK_BUILT_TWICE): only additions,
   comparisons and copies, so the same results on either. product.pxd declares it. */
#ifndef CRFTK_NBEST_H
#define CRFTK_NBEST_H

#include <math.h>
#include <stddef.h>
#include "vecmath.h"

/* List i of the column is in[i*step + h] (h < K: its entries, best first, an -inf tail when
   shorter); output list j goes to out[j*step + o], with back[j*step + o] = from + i*post and
   rank[j*step + o] = h for the entry (i, h) it holds (-1 for none). Output j keeps the K first
   of the candidates in[i*step + h] + M[i*n + j] in the order (value descending, i ascending, h
   ascending): what merging the lists by their heads, the lower label on ties, picks, and how
   the outputs are found when n <= K. With more lists, a list is read while its candidate can
   enter the K kept, and not at all when its head candidate is below the lowest head candidate
   of the K lists with the best heads (K candidates beat it). work:
   2n + 2K scratch. */
#define CRFTK_NBEST_COLUMN_BODY                                                 \
{                                                                               \
    int i, j, k, h, o;                                                          \
    const ptrdiff_t step = (ptrdiff_t) post * K;                                \
    double* lowest = work;              /* n */                                 \
    double* heads = work + n;           /* K: the K best heads, best first */   \
    int* which = (int*) (work + n + K); /* K: their lists */                    \
    int* filled = which + K;            /* n: how many each output holds */     \
    int* reach = filled + n;            /* n: the outputs a list reaches */     \
    int found = 0;                                                              \
    if (n <= K) {                                                               \
        /* few lists (K candidates from each could fill an output): merged by their heads, the\
           lower label on ties (reach: the heads) */                            \
        for (j = 0; j < n; j++) {                                               \
            for (i = 0; i < n; i++)                                             \
                reach[i] = 0;                                                   \
            for (o = 0; o < K; o++) {                                           \
                int bi = -1;                                                    \
                double best = -INFINITY;                                        \
                for (i = 0; i < n; i++) {                                       \
                    double a, v;                                                \
                    if (reach[i] >= K)                                          \
                        continue;                                               \
                    a = in[i * step + reach[i]];                                \
                    if (a == -INFINITY)                                         \
                        continue;                                               \
                    v = a + M[(ptrdiff_t) i * n + j];                           \
                    if (bi < 0 || v > best) {                                    \
                        best = v;                                               \
                        bi = i;                                                 \
                    }                                                           \
                }                                                               \
                if (bi < 0) {                                                   \
                    out[j * step + o] = -INFINITY;                              \
                    back[j * step + o] = -1;                                    \
                    rank[j * step + o] = -1;                                    \
                    continue;                                                   \
                }                                                               \
                out[j * step + o] = best;                                       \
                back[j * step + o] = from + bi * post;                          \
                rank[j * step + o] = reach[bi];                                 \
                reach[bi]++;                                                    \
            }                                                                   \
        }                                                                       \
        return;                                                                 \
    }                                                                           \
    /* the K lists with the best heads: output j has K candidates of at least the lowest of \
       theirs, so a candidate below it is not among its K best (a list whose head is below it \
       is not read) */                                                          \
    for (i = 0; i < n; i++) {                                                   \
        const double a = in[i * step];                                          \
        if (a == -INFINITY || (found == K && !(a > heads[K - 1])))              \
            continue;                                                           \
        o = found < K ? found : K - 1;                                          \
        while (o > 0 && a > heads[o - 1]) {                                     \
            heads[o] = heads[o - 1];                                            \
            which[o] = which[o - 1];                                            \
            o--;                                                                \
        }                                                                       \
        heads[o] = a;                                                           \
        which[o] = i;                                                           \
        if (found < K)                                                          \
            found++;                                                            \
    }                                                                           \
    for (j = 0; j < n; j++)                                                     \
        lowest[j] = found == K ? INFINITY : -INFINITY;                          \
    if (found == K)                                                             \
        for (k = 0; k < K; k++) {                                               \
            const double a = heads[k];                                          \
            const double* Mi = M + (ptrdiff_t) which[k] * n;                    \
            for (j = 0; j < n; j++) {                                           \
                const double v = a + Mi[j];                                     \
                lowest[j] = v < lowest[j] ? v : lowest[j];                      \
            }                                                                   \
        }                                                                       \
    for (j = 0; j < n; j++)                                                     \
        filled[j] = 0;                                                          \
    /* list by list, each to the outputs whose floor its head candidate reaches (an output\
       sees the lists in the order of their labels, as a merge by heads does) */\
    for (i = 0; i < n; i++) {                                                   \
        const double* li = in + i * step;                                       \
        const double* Mi = M + (ptrdiff_t) i * n;                               \
        int reached = 0, r;                                                     \
        if (li[0] == -INFINITY)                                                 \
            continue;                   /* an empty list */                     \
        for (j = 0; j < n; j++) {       /* without a branch: the outputs it reaches */\
            reach[reached] = j;                                                 \
            reached += !(li[0] + Mi[j] < lowest[j]);                            \
        }                                                                       \
        for (r = 0; r < reached; r++) {                                         \
            double* so;                                                         \
            int* bo;                                                            \
            int* ro;                                                            \
            int fj;                                                             \
            double m;                                                           \
            j = reach[r];                                                       \
            so = out + j * step;                                                \
            bo = back + j * step;                                               \
            ro = rank + j * step;                                               \
            fj = filled[j];                                                     \
            m = Mi[j];                                                          \
            for (h = 0; h < K; h++) {                                           \
                double v;                                                       \
                if (li[h] == -INFINITY)                                         \
                    break;              /* the list's end */                    \
                v = li[h] + m;                                                  \
                if (v < lowest[j] || (fj == K && !(v > so[K - 1])))             \
                    break;              /* nor can its later (lower) entries */ \
                /* after every kept candidate of at least v (they come first) */\
                o = fj < K ? fj : K - 1;                                        \
                while (o > 0 && v > so[o - 1]) {                                \
                    so[o] = so[o - 1];                                          \
                    bo[o] = bo[o - 1];                                          \
                    ro[o] = ro[o - 1];                                          \
                    o--;                                                        \
                }                                                               \
                so[o] = v;                                                      \
                bo[o] = from + i * post;                                        \
                ro[o] = h;                                                      \
                if (fj < K)                                                     \
                    fj++;                                                       \
            }                                                                   \
            filled[j] = fj;                                                     \
        }                                                                       \
    }                                                                           \
    for (j = 0; j < n; j++)                                                     \
        for (o = filled[j]; o < K; o++) {                                       \
            out[j * step + o] = -INFINITY;                                      \
            back[j * step + o] = -1;                                            \
            rank[j * step + o] = -1;                                            \
        }                                                                       \
}
CRFTK_BUILT_TWICE(crftk_nbest_column, (const double* in, const double* M, int n, int post, int K, int from,
                                       double* out, int* back, int* rank, double* work),
                  (in, M, n, post, K, from, out, back, rank, work), CRFTK_NBEST_COLUMN_BODY)

#endif /* CRFTK_NBEST_H */
