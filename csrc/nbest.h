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
   enter the K kept, and not at all when its head candidate is below the output's floor: at
   first the lowest head candidate of the K lists with the best heads (K candidates beat it),
   then the K-th candidate the output holds. work: 2n + 2K scratch. */
#define CRFTK_NBEST_COLUMN_BODY                                                 \
{                                                                               \
    int i, j, k, h, o, x;                                                       \
    const ptrdiff_t step = (ptrdiff_t) post * K;                                \
    double* lowest = work;              /* n */                                 \
    double* heads = work + n;           /* K: the K best heads, best first */   \
    int* which = (int*) (work + n + K); /* K: their lists */                    \
    int* filled = which + K;            /* n: how many each output holds */     \
    int* reach = filled + n;            /* n: the outputs a list reaches */     \
    int found = 0;                                                              \
    if (n <= K) {                                                               \
        /* few lists (K candidates from each could fill an output): merged by their heads, the\
           lower label on ties; each list's current candidate is kept (lowest), with its rank \
           (reach) and whether it has one (filled) */                           \
        for (j = 0; j < n; j++) {                                               \
            for (i = 0; i < n; i++) {                                           \
                const double a = in[i * step];                                  \
                reach[i] = 0;                                                   \
                filled[i] = a != -INFINITY;                                     \
                lowest[i] = a + M[(ptrdiff_t) i * n + j];                       \
            }                                                                   \
            for (o = 0; o < K; o++) {                                           \
                int bi = -1;                                                    \
                double best = -INFINITY;                                        \
                for (i = 0; i < n; i++) {       /* without a branch */          \
                    const int take = filled[i] & ((bi < 0) | (lowest[i] > best)); \
                    best = take ? lowest[i] : best;                             \
                    bi = take ? i : bi;                                         \
                }                                                               \
                if (bi < 0) {                                                   \
                    for (; o < K; o++) {                                        \
                        out[j * step + o] = -INFINITY;                          \
                        back[j * step + o] = -1;                                \
                        rank[j * step + o] = -1;                                \
                    }                                                           \
                    break;                                                      \
                }                                                               \
                out[j * step + o] = best;                                       \
                back[j * step + o] = from + bi * post;                          \
                rank[j * step + o] = reach[bi];                                 \
                h = ++reach[bi];                                                \
                if (h < K) {                                                    \
                    const double a = in[bi * step + h];                         \
                    filled[bi] = a != -INFINITY;                                \
                    lowest[bi] = a + M[(ptrdiff_t) bi * n + j];                 \
                } else                                                          \
                    filled[bi] = 0;                                             \
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
    /* list by list, each to the outputs whose floor its head candidate reaches: first the K \
       lists with the best heads, which fill every output with good candidates, then the others\
       in label order. An output's floor rises to its K-th candidate once it holds K, so most \
       later lists reach no output, which one branch-free pass over the outputs tells; equal \
       candidates are ordered by their lists' labels, whatever order the lists come in. */ \
    for (x = 0; x < n + found; x++) {                                           \
        const double* li;                                                       \
        const double* Mi;                                                       \
        double a0;                                                              \
        int reached = 0, r, any = 0;                                            \
        if (x < found)                                                          \
            i = which[x];                                                       \
        else {                                                                  \
            i = x - found;                                                      \
            for (k = 0; k < found && which[k] != i; k++)                        \
                ;                                                               \
            if (k < found)                                                      \
                continue;               /* done first */                        \
        }                                                                       \
        li = in + i * step;                                                     \
        Mi = M + (ptrdiff_t) i * n;                                             \
        a0 = li[0];                                                             \
        if (a0 == -INFINITY)                                                    \
            continue;                   /* an empty list */                     \
        for (j = 0; j < n; j++)                                                 \
            any |= !(a0 + Mi[j] < lowest[j]);                                   \
        if (!any)                                                               \
            continue;                                                           \
        for (j = 0; j < n; j++) {       /* without a branch: the outputs it reaches */\
            reach[reached] = j;                                                 \
            reached += !(a0 + Mi[j] < lowest[j]);                               \
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
                if (v < lowest[j] || (fj == K && !(v > so[K - 1])              \
                                      && !(v == so[K - 1] && from + i * post < bo[K - 1]))) \
                    break;              /* nor can its later (lower) entries */ \
                /* after every kept candidate before it */                      \
                o = fj < K ? fj : K - 1;                                        \
                while (o > 0 && (v > so[o - 1] || (v == so[o - 1] && from + i * post < bo[o - 1]))) { \
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
            if (fj == K && so[K - 1] > lowest[j])                               \
                lowest[j] = so[K - 1];  /* the floor rises */                   \
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
