/* The K best labelings of a product chain (product.pxd's product_nbest), in C, computed lazily.

   A node is a stage (t, c) - position t after chain c's transition - and a joint label y; its
   list holds its K best partial labelings. List (t, c, y) is the first K of the candidates
   L(pred_i)[h] + M[i*n + j] in the order (value descending, i ascending, h ascending), where j is
   chain c's label in y, pred_i the node of the stage before with that label replaced by i, and
   M chain c's transitions into t; the last chain's stage then adds the state score s[t, y]. That
   order is what merging the predecessor lists by their heads, the lower label on ties, gives,
   and what the eager recursion (every list in full, before 2026-11) computed.

   Here every node's first entry comes from one forward pass (a max-product step per stage, one
   column of outputs at a time, vectorised over the outputs), and a later entry is computed only
   when the final merge or a successor's next entry needs it: each node keeps, per predecessor
   list, how many of its entries it has taken (its frontier). The K best labelings then cost the
   forward pass plus at most K - 1 descents through the stages, instead of K-best merges at every
   node. The values are the same sums of the same terms, so the same bits.

   An entry of value -inf, and a list's end, are one thing to every reader (no labeling through
   it is ever reported), so a list stops at its first -inf candidate. Potentials of +inf or NaN
   are outside that promise: a NaN candidate (+inf + -inf) is never taken here, where the eager
   merge could take one and its -inf padding could turn into NaN entries.

   Layout: entry h of node (stage, y) is at [(stage*K + h)*S + y] of score, back (the joint label
   of the predecessor it extends) and rank (which entry of the predecessor's list), stage = t*C + c
   (only stage C - 1 of position 0 is used). */
#ifndef CRFTK_NBEST_H
#define CRFTK_NBEST_H

#include <math.h>
#include <stddef.h>
#include <string.h>
#include "vecmath.h"

/* the best of x[i] + M[i*n + j] over i for every output j (the lowest i on ties; -1 and -inf
   where every candidate is -inf): one max-product step for one column of outputs. With GCC or
   clang, up to 16 outputs at a time stay in vector registers (their best and its i, as doubles,
   chosen by the comparison's mask) over all the i, and the last n % 4 outputs are done one by
   one. Additions and comparisons only, so the same results from either build. */
#if defined(__GNUC__) || defined(__clang__)
typedef long long crftk_v4l __attribute__((vector_size(32)));
#define CRFTK_PICK(k, a, b) ((crftk_v4d) (((crftk_v4l) (a) & (k)) | ((crftk_v4l) (b) & ~(k))))
#define CRFTK_NB_STEP(q)                                                        \
    {                                                                           \
        crftk_v4d m, v;                                                         \
        crftk_v4l k;                                                            \
        memcpy(&m, r + 4 * (q), 32);                                            \
        v = xv + m;                                                             \
        k = (crftk_v4l) (v > b##q);                                             \
        b##q = CRFTK_PICK(k, v, b##q);                                          \
        a##q = CRFTK_PICK(k, iv, a##q);                                         \
    }
#define CRFTK_NB_OUT(q)                                                         \
    {                                                                           \
        double at[4];                                                           \
        memcpy(y + j + 4 * (q), &b##q, 32);                                     \
        memcpy(at, &a##q, 32);                                                  \
        arg[j + 4 * (q)] = (int) at[0];                                         \
        arg[j + 4 * (q) + 1] = (int) at[1];                                     \
        arg[j + 4 * (q) + 2] = (int) at[2];                                     \
        arg[j + 4 * (q) + 3] = (int) at[3];                                     \
    }
#define CRFTK_NB_BLOCK(STEPS, OUTS, W)                                          \
    {                                                                           \
        const crftk_v4d none = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};    \
        const crftk_v4d no_i = {-1, -1, -1, -1};                                \
        crftk_v4d b0 = none, b1 = none, b2 = none, b3 = none;                   \
        crftk_v4d a0 = no_i, a1 = no_i, a2 = no_i, a3 = no_i;                   \
        for (i = 0; i < n; i++) {                                               \
            const double xi = x[i];                                             \
            const double* r = M + (ptrdiff_t) i * n + j;                        \
            const crftk_v4d xv = {xi, xi, xi, xi};                              \
            const crftk_v4d iv = {(double) i, (double) i, (double) i, (double) i}; \
            if (xi == -INFINITY)                                                \
                continue;               /* a node without entries */            \
            STEPS                                                               \
        }                                                                       \
        OUTS                                                                    \
        (void) b1; (void) b2; (void) b3; (void) a1; (void) a2; (void) a3;       \
        j += (W);                                                               \
    }
#define CRFTK_NB_VECTOR_COLUMNS                                                 \
    while (j + 16 <= n)                                                         \
        CRFTK_NB_BLOCK(CRFTK_NB_STEP(0) CRFTK_NB_STEP(1) CRFTK_NB_STEP(2) CRFTK_NB_STEP(3), \
                       CRFTK_NB_OUT(0) CRFTK_NB_OUT(1) CRFTK_NB_OUT(2) CRFTK_NB_OUT(3), 16) \
    if (j + 12 <= n)                                                            \
        CRFTK_NB_BLOCK(CRFTK_NB_STEP(0) CRFTK_NB_STEP(1) CRFTK_NB_STEP(2),      \
                       CRFTK_NB_OUT(0) CRFTK_NB_OUT(1) CRFTK_NB_OUT(2), 12)     \
    else if (j + 8 <= n)                                                        \
        CRFTK_NB_BLOCK(CRFTK_NB_STEP(0) CRFTK_NB_STEP(1), CRFTK_NB_OUT(0) CRFTK_NB_OUT(1), 8) \
    else if (j + 4 <= n)                                                        \
        CRFTK_NB_BLOCK(CRFTK_NB_STEP(0), CRFTK_NB_OUT(0), 4)
#else
#define CRFTK_NB_VECTOR_COLUMNS
#endif
/* one output j, alone: best and bi, the best of xs[i] + M[i*n + j] and its i (a -inf xs[i] is
   never taken, nor is a NaN sum) */
#define CRFTK_NB_ONE_OUTPUT(xs, j, best, bi)                                    \
    {                                                                           \
        best = -INFINITY;                                                       \
        bi = -1;                                                                \
        for (i = 0; i < n; i++) {                                               \
            const double v = (xs)[i] + M[(ptrdiff_t) i * n + (j)];              \
            if (v > best) {                                                     \
                best = v;                                                       \
                bi = i;                                                         \
            }                                                                   \
        }                                                                       \
    }
#define CRFTK_NBEST_FORWARD_BODY                                                \
{                                                                               \
    int i, j = 0, bi;                                                           \
    double best;                                                                \
    CRFTK_NB_VECTOR_COLUMNS                                                     \
    for (; j < n; j++) {                                                        \
        CRFTK_NB_ONE_OUTPUT(x, j, best, bi)                                     \
        y[j] = best;                                                            \
        arg[j] = bi;                                                            \
    }                                                                           \
}
CRFTK_BUILT_TWICE(crftk_nbest_forward, (const double* x, const double* M, int n, double* y, int* arg),
                  (x, M, n, y, arg), CRFTK_NBEST_FORWARD_BODY)

/* crftk_nbest_forward for every column of a last chain of few labels (n < 8, stride 1): column
   p's inputs x[p*n + i], its outputs y[p*n + j], and back[p*n + j] = p*n + the best i (or -1) */
#define CRFTK_NBEST_ROWS_BODY                                                   \
{                                                                               \
    int p, i, j, bi;                                                            \
    double best;                                                                \
    for (p = 0; p < pre; p++) {                                                 \
        const double* xp = x + (ptrdiff_t) p * n;                               \
        for (j = 0; j < n; j++) {                                               \
            CRFTK_NB_ONE_OUTPUT(xp, j, best, bi)                                \
            y[(ptrdiff_t) p * n + j] = best;                                    \
            back[(ptrdiff_t) p * n + j] = bi < 0 ? -1 : p * n + bi;             \
        }                                                                       \
    }                                                                           \
}
CRFTK_BUILT_TWICE(crftk_nbest_forward_rows, (const double* x, const double* M, int n, int pre, double* y,
                                            int* back),
                  (x, M, n, pre, y, back), CRFTK_NBEST_ROWS_BODY)

/* cnt[v]: the entries node v has (>= 0), or -1 - that count once its list has ended */
#define CRFTK_NB_ENTRIES(v) (cnt[v] >= 0 ? cnt[v] : -1 - cnt[v])

typedef struct {
    int C, S, K, W;                 /* chains, joint labels, list length, most labels of a chain */
    const int* n;
    const int* stride;
    const double* s;
    const double* const* Tr;
    double* score;
    int* back;
    int* rank;
    int* cnt;                       /* T*C*S */
    int* slot;                      /* T*C*S: the node's frontier in pool, or -1 */
    int* pool;                      /* frontiers of W + 1 ints: taken per list, then the stale list */
    int* stack;                     /* T*C node numbers (below 2^31: score alone then holds 16 GiB) */
    int used;                       /* frontiers handed out */
} crftk_nb;

/* The frontier of node w (made on its first entry after the forward pass's: that one took entry
   0 of the list it came from, which is then stale: its next entry may not exist yet). */
static int* crftk_nb_frontier(crftk_nb* b, ptrdiff_t w)
{
    const ptrdiff_t S = b->S, K = b->K;
    const ptrdiff_t st = w / S, y = w % S;
    const int c = (int) (st % b->C), n = b->n[c], post = b->stride[c];
    const ptrdiff_t from = y - (ptrdiff_t) ((y / post) % n) * post;
    int* f;
    int i0;
    if (b->slot[w] >= 0)
        return b->pool + (ptrdiff_t) b->slot[w] * (b->W + 1);
    b->slot[w] = b->used;
    f = b->pool + (ptrdiff_t) b->used++ * (b->W + 1);
    memset(f, 0, sizeof(int) * (size_t) n);
    i0 = (int) ((b->back[st * K * S + y] - from) / post);
    f[i0] = 1;
    f[b->W] = i0;
    return f;
}

/* Compute the next entry of node v (open, fewer than K entries). Its stale list may need the
   next entry of a predecessor first, and that one the next of its own, and so on down the
   stages: the nodes are stacked going down, then their entries made coming back up. */
static void crftk_nb_next(crftk_nb* b, ptrdiff_t v)
{
    const ptrdiff_t S = b->S, K = b->K;
    const int C = b->C, W = b->W;
    int* cnt = b->cnt;
    int sp = 0;
    ptrdiff_t w = v;
    for (;;) {
        const ptrdiff_t st = w / S, y = w % S;
        const int c = (int) (st % C), n = b->n[c], post = b->stride[c];
        const ptrdiff_t from = y - (ptrdiff_t) ((y / post) % n) * post;
        int* f = crftk_nb_frontier(b, w);
        const int i = f[W];
        ptrdiff_t u;
        b->stack[sp++] = (int) w;
        if (i < 0)
            break;
        u = (st - 1) * S + from + (ptrdiff_t) i * post;
        if (f[i] >= K || cnt[u] < 0 || f[i] < cnt[u]) {
            f[W] = -1;                  /* its entry is there, or will never be needed */
            break;
        }
        w = u;                          /* the predecessor's next entry first */
    }
    while (sp > 0) {
        const ptrdiff_t w2 = b->stack[--sp];
        const ptrdiff_t st = w2 / S, y = w2 % S, pst = st - 1;
        const int c = (int) (st % C), t = (int) (st / C), n = b->n[c], post = b->stride[c];
        const int j = (int) ((y / post) % n);
        const ptrdiff_t from = y - (ptrdiff_t) j * post;
        const double* M = b->Tr[t * C + c];
        int* f = b->pool + (ptrdiff_t) b->slot[w2] * (W + 1);
        const int e = cnt[w2];
        int i, bi = -1;
        double best = -INFINITY;
        ptrdiff_t at;
        f[W] = -1;
        for (i = 0; i < n; i++) {
            const ptrdiff_t u = from + (ptrdiff_t) i * post;
            const int q = f[i];
            if (q < K && q < CRFTK_NB_ENTRIES(pst * S + u)) {
                const double val = b->score[(pst * K + q) * S + u] + M[(ptrdiff_t) i * n + j];
                if (val > best) {       /* the lower label on ties */
                    best = val;
                    bi = i;
                }
            }
        }
        if (bi >= 0 && c == C - 1)
            best += b->s[(ptrdiff_t) t * S + y];
        if (bi < 0) {                   /* no candidate left (and best + s is finite: a -inf
                                           state closed its node in the forward pass) */
            cnt[w2] = -1 - e;           /* the list ends */
            continue;
        }
        at = (st * K + e) * S + y;
        b->score[at] = best;
        b->back[at] = (int) (from + (ptrdiff_t) bi * post);
        b->rank[at] = f[bi];
        f[bi]++;
        f[W] = bi;
        cnt[w2] = e + 1;
    }
}

/* The K best labelings of one product chain of T positions: out[o*T + t] the joint label of the
   o-th at t, best[o] its score; returns how many there are (fewer than K when the chain has
   fewer labelings of finite score). score, back, rank: T*C*S*K; ints: crftk_nbest_ints(...);
   work: 2W doubles (W: the most labels of a chain). */
static inline ptrdiff_t crftk_nbest_ints(int C, int S, int T, int K, int W)
{
    return 2 * (ptrdiff_t) T * C * S + (ptrdiff_t) T * C + S + W
           + (ptrdiff_t) (K - 1) * T * C * (W + 1);
}

static int crftk_product_nbest(int C, int S, const int* n, const int* stride, int T, int K,
                               const double* s, const double* const* Tr, double* score, int* back,
                               int* rank, int* ints, double* work, int* out, double* best)
{
    crftk_nb b;
    const ptrdiff_t SS = S, KK = K, nodes = (ptrdiff_t) T * C * S;
    int W = 0, c, t, y, o, found = 0;
    int* heads;
    int* arg;
    double* xcol;
    double* ycol;
    for (c = 0; c < C; c++)
        W = n[c] > W ? n[c] : W;
    b.C = C; b.S = S; b.K = K; b.W = W; b.n = n; b.stride = stride; b.s = s; b.Tr = Tr;
    b.score = score; b.back = back; b.rank = rank;
    b.cnt = ints;
    b.slot = ints + nodes;
    b.stack = ints + 2 * nodes;
    heads = b.stack + (ptrdiff_t) T * C;
    arg = heads + S;
    b.pool = arg + W;
    b.used = 0;
    xcol = work;
    ycol = work + W;
    if (K > 1)
        for (ptrdiff_t v = 0; v < nodes; v++)
            b.slot[v] = -1;
    /* position 0: one labeling per joint label, in the last stage's lists */
    {
        const ptrdiff_t st = C - 1;
        for (y = 0; y < S; y++) {
            const ptrdiff_t at = st * KK * SS + y;
            score[at] = s[y];
            back[at] = -1;
            rank[at] = -1;
            b.cnt[st * SS + y] = s[y] == -INFINITY ? -1 : -2;     /* ended, with 0 or 1 entry */
        }
    }
    /* every node's first entry: max-product, one column of a chain's outputs at a time */
    for (t = 1; t < T; t++)
        for (c = 0; c < C; c++) {
            const ptrdiff_t st = (ptrdiff_t) t * C + c, pst = st - 1;
            const int nc = n[c], post = stride[c], pre = S / (nc * post);
            const double* M = Tr[t * C + c];
            const double* in0 = score + pst * KK * SS;
            double* out0 = score + st * KK * SS;
            int* back0 = back + st * KK * SS;
            int* cnt0 = b.cnt + st * SS;
            const double* ts = c == C - 1 ? s + (ptrdiff_t) t * S : NULL;
            int p, r, i, j;
            if (post == 1 && nc < 8)
                /* a last chain of few labels: its columns, contiguous, in one call */
                crftk_nbest_forward_rows(in0, M, nc, pre, out0, back0);
            else
                for (p = 0; p < pre; p++)
                    for (r = 0; r < post; r++) {
                        const int from = p * nc * post + r;
                        const double* x = in0 + from;
                        if (post > 1) {
                            for (i = 0; i < nc; i++)
                                xcol[i] = in0[from + i * post];
                            x = xcol;
                        }
                        crftk_nbest_forward(x, M, nc, ycol, arg);
                        for (j = 0; j < nc; j++) {
                            out0[from + j * post] = ycol[j];
                            back0[from + j * post] = arg[j] < 0 ? -1 : from + arg[j] * post;
                        }
                    }
            /* the state scores, and the nodes left without an entry: read as "no entry" by the
               next stage (their value -inf) and closed (the rank of a first entry is not
               stored: it is 0) */
            for (y = 0; y < S; y++) {
                const double v = ts != NULL ? out0[y] + ts[y] : out0[y];
                const int none = back0[y] < 0 || v == -INFINITY;
                out0[y] = none ? -INFINITY : v;
                back0[y] = none ? -1 : back0[y];
                cnt0[y] = none ? -1 : 1;
            }
        }
    /* the K best over the last stage's lists, in order (the lowest joint label on ties) */
    {
        const ptrdiff_t last = ((ptrdiff_t) (T - 1) * C + C - 1);
        int* cnt = b.cnt;
        for (y = 0; y < S; y++)
            heads[y] = 0;
        for (o = 0; o < K; o++) {
            int bi = -1, q;
            double top = -INFINITY;
            for (y = 0; y < S; y++) {
                const int h = heads[y];
                if (h < K && h < CRFTK_NB_ENTRIES(last * SS + y)) {
                    const double v = score[(last * KK + h) * SS + y];
                    if (bi < 0 || v > top) {
                        top = v;
                        bi = y;
                    }
                }
            }
            if (bi < 0)
                break;
            best[o] = top;
            found = o + 1;
            /* trace back: entry by entry, stage by stage, to position 0 */
            y = bi;
            q = heads[bi];
            out[(ptrdiff_t) o * T + T - 1] = y;
            for (t = T - 1; t > 0; t--) {
                for (c = C - 1; c >= 0; c--) {
                    const ptrdiff_t at = (((ptrdiff_t) t * C + c) * KK + q) * SS + y;
                    y = back[at];
                    q = q > 0 ? rank[at] : 0;     /* a first entry's is 0 */
                }
                out[(ptrdiff_t) o * T + t - 1] = y;
            }
            heads[bi]++;
            if (o + 1 < K && heads[bi] < K && heads[bi] == cnt[last * SS + bi])
                crftk_nb_next(&b, last * SS + bi);      /* open, and its next entry not made yet */
        }
    }
    return found;
}

#endif /* CRFTK_NBEST_H */
