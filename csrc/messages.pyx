# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""Inference on batches of factorial grids, from numpy arrays (crftk._messages).

A batch of grids of one shape (messages.pxd describes a grid) is

- ``sizes``: the labels of each chain (C of them, 1..8);
- ``sent_ptr[S+1]``: the tokens of each grid (at least one each);
- ``node``: per chain, ``[N, n_c]`` log potentials;
- ``trans``: per chain, ``[n_c, n_c]`` log transitions (shared by every grid);
- ``pair``: per chain c < C-1, ``[N, n_c, n_c+1]`` log potentials linking chains c and c+1.

The kernels run over the grids in parallel (prange, nogil); grid s of a BP batch draws
its random schedule from ``seed + s``, so results do not depend on the thread count.
"""

import numpy as np
from libc.stdlib cimport calloc, free

from vecmath cimport exp_array, log_array
from cython.parallel cimport prange, parallel, threadid

from messages cimport (Grid, GridOut, GridWork, grid_work_init, grid_work_release, grid_joint_labels,
                       grid_edge_count, grid_exact, grid_exact_viterbi, grid_bp, grid_bp_max,
                       grid_comb_edges, grid_labeling_score, GRID_WANT_EXACT, GRID_WANT_BP, GRID_TRP,
                       GRID_RANDOM)


cdef struct Slot:
    # one thread's grid view, outputs and workspace
    Grid g
    const double* node[8]
    const double* pair[8]
    double* node_out[8]
    double* pair_out[8]
    double* edge_out[8]
    int* labels[8]
    GridOut out
    GridWork w


cdef class GridBatch:
    """A batch of grids, checked and made contiguous."""

    cdef readonly object sizes, sent_ptr, node, trans, pair
    cdef readonly int C, max_len
    cdef readonly Py_ssize_t n_tokens, n_grids
    cdef int n[8]
    cdef const double* node_p[8]
    cdef const double* trans_p[8]
    cdef const double* pair_p[8]
    cdef const long[::1] sp
    # the outputs (see outputs()); NULL where not asked for
    cdef readonly object node_out, pair_out, edge_acc, labels_out
    cdef double* node_base[8]
    cdef double* pair_base[8]
    cdef int* lab_base[8]
    cdef double* edge_base
    cdef Py_ssize_t eoff[8]
    cdef Py_ssize_t edge_width

    def __init__(self, sizes, sent_ptr, node, trans, pair):
        self.sizes = np.ascontiguousarray(sizes, dtype=np.int32)
        C = self.sizes.size
        if self.sizes.ndim != 1 or not 1 <= C <= 8 or (self.sizes < 1).any():
            raise ValueError("between 1 and 8 chains, each with at least one label")
        self.C = C
        self.sent_ptr = np.ascontiguousarray(sent_ptr, dtype=np.int64)
        sp = self.sent_ptr
        if sp.ndim != 1 or sp.size < 1 or sp[0] != 0 or (np.diff(sp) < 1).any():
            raise ValueError("sent_ptr must rise from 0 in steps of at least 1")
        N = int(sp[sp.size - 1])
        sizes_l = self.sizes.tolist()
        if len(node) != C or len(trans) != C or len(pair) != C - 1:
            raise ValueError(f"{C} chains need {C} node tables, {C} transition tables and {C - 1} pair tables")
        self.node = [np.ascontiguousarray(a, dtype=np.float64) for a in node]
        self.trans = [np.ascontiguousarray(a, dtype=np.float64) for a in trans]
        self.pair = [np.ascontiguousarray(a, dtype=np.float64) for a in pair]
        for c, n in enumerate(sizes_l):
            if self.node[c].shape != (N, n):
                raise ValueError(f"node[{c}] must be [{N}, {n}], not {self.node[c].shape}")
            if self.trans[c].shape != (n, n):
                raise ValueError(f"trans[{c}] must be [{n}, {n}], not {self.trans[c].shape}")
            if c < C - 1 and self.pair[c].shape != (N, n, sizes_l[c + 1]):
                raise ValueError(f"pair[{c}] must be [{N}, {n}, {sizes_l[c + 1]}], not {self.pair[c].shape}")
        for a in self.node + self.trans + self.pair:
            if np.isnan(a).any() or np.isposinf(a).any():
                raise ValueError("potentials must be finite or -inf")
        cdef const double[:, ::1] v2
        cdef const double[:, :, ::1] v3
        for c in range(C):
            self.n[c] = sizes_l[c]
            v2 = self.node[c]
            self.node_p[c] = &v2[0, 0] if N else NULL
            v2 = self.trans[c]
            self.trans_p[c] = &v2[0, 0]
            if c < C - 1:
                v3 = self.pair[c]
                self.pair_p[c] = &v3[0, 0, 0] if N else NULL
        self.n_tokens = N
        self.n_grids = sp.size - 1
        self.max_len = int(np.diff(sp).max()) if sp.size > 1 else 0
        self.sp = self.sent_ptr

    cdef int outputs(self, int n_threads, bint marginals, bint labels) except -1:
        """The batch's output arrays: with marginals, node [N, n_c] and pair [N, n_c, n_c+1] per
        chain and each thread's chain-edge sums; with labels, [N] int32 per chain. Call before
        slots(), which points the slots at them."""
        cdef Py_ssize_t N = self.n_tokens, k = 0
        cdef int c
        cdef double[:, ::1] v2
        cdef double[:, :, ::1] v3
        cdef int[::1] vi
        sizes_l = self.sizes.tolist()
        for c in range(self.C):
            self.eoff[c] = k
            k += sizes_l[c] * sizes_l[c]
        self.edge_width = k
        self.node_out = [np.zeros((N, n)) for n in sizes_l] if marginals else None
        self.pair_out = [np.zeros((N, sizes_l[c], sizes_l[c + 1])) for c in range(self.C - 1)] if marginals else None
        self.edge_acc = np.zeros((n_threads, k)) if marginals else None
        self.labels_out = [np.zeros(N, dtype=np.int32) for _ in range(self.C)] if labels else None
        if marginals:
            v2 = self.edge_acc
            self.edge_base = &v2[0, 0]
        for c in range(self.C):
            if marginals and N:
                v2 = self.node_out[c]
                self.node_base[c] = &v2[0, 0]
                if c < self.C - 1:
                    v3 = self.pair_out[c]
                    self.pair_base[c] = &v3[0, 0, 0]
            if labels and N:
                vi = self.labels_out[c]
                self.lab_base[c] = &vi[0]
        return 0

    def edges(self):
        """Per chain [n_c, n_c]: the chain-edge marginals summed over the tokens and threads."""
        total = self.edge_acc.sum(axis=0)
        return [total[self.eoff[c]:self.eoff[c] + n * n].reshape(n, n) for c, n in enumerate(self.sizes.tolist())]

    cdef Slot* slots(self, int n_threads, int want) except NULL:
        """One slot per thread, its workspace made for this batch; free with free_slots."""
        cdef Slot* sl = <Slot*> calloc(n_threads, sizeof(Slot))
        cdef int i, c
        if sl == NULL:
            raise MemoryError("cannot allocate grid workspaces")
        for i in range(n_threads):
            if grid_work_init(&sl[i].w, self.max_len, self.C, self.n, want) < 0:
                free_slots(sl, i)
                raise MemoryError("cannot allocate grid workspaces")
            sl[i].g.C = self.C
            sl[i].g.n = self.n
            sl[i].g.node = sl[i].node
            sl[i].g.trans = self.trans_p
            sl[i].g.pair = sl[i].pair
            if self.edge_base != NULL:      # marginals asked for
                for c in range(self.C):
                    sl[i].edge_out[c] = self.edge_base + i * self.edge_width + self.eoff[c]
                sl[i].out.node = sl[i].node_out
                sl[i].out.edge = sl[i].edge_out
                sl[i].out.pair = sl[i].pair_out if self.C > 1 else NULL
        return sl

    cdef void at(self, Slot* sl, Py_ssize_t s) noexcept nogil:
        """Points the slot's grid (and its per-token outputs, where set) at grid s."""
        cdef Py_ssize_t t0 = self.sp[s]
        cdef int c
        sl.g.T = <int> (self.sp[s + 1] - t0)
        for c in range(self.C):
            sl.node[c] = self.node_p[c] + t0 * self.n[c]
            if self.node_base[c] != NULL:
                sl.node_out[c] = self.node_base[c] + t0 * self.n[c]
            if self.lab_base[c] != NULL:
                sl.labels[c] = self.lab_base[c] + t0
            if c < self.C - 1:
                sl.pair[c] = self.pair_p[c] + t0 * self.n[c] * self.n[c + 1]
                if self.pair_base[c] != NULL:
                    sl.pair_out[c] = self.pair_base[c] + t0 * self.n[c] * self.n[c + 1]


cdef void free_slots(Slot* sl, int n) noexcept nogil:
    cdef int i
    for i in range(n):
        grid_work_release(&sl[i].w)
    free(sl)


cdef object _elementwise(x, void (*fn)(const double*, double*, int) noexcept nogil):
    src = np.ascontiguousarray(x, dtype=np.float64).ravel()
    out = np.empty_like(src)
    cdef const double[::1] xs = src
    cdef double[::1] ys = out
    if src.size:
        fn(&xs[0], &ys[0], <int> src.size)
    return out.reshape(np.shape(x))


def vector_exp(x):
    """exp of a float64 array through the kernels' vector exp (vecmath.h's; for tests)."""
    return _elementwise(x, exp_array)


def vector_log(x):
    """log of a float64 array through the kernels' vector log (vecmath.h's; for tests)."""
    return _elementwise(x, log_array)


def check_exact_size(sizes, max_len, limit=2**26):
    """Raises ValueError when exact inference would need more than ``limit`` joint-state cells."""
    S = int(np.prod(np.asarray(sizes, dtype=np.int64)))
    if S * max(1, max_len) > limit:
        raise ValueError(f"exact inference over {S} joint labels and {max_len} tokens needs "
                         f"{S * max_len} cells (limit {limit})")


def exact(sizes, sent_ptr, node, trans, pair, int n_threads=1, bint marginals=True, bint viterbi=True):
    """Exact inference over each grid: a dict with

    - ``logz`` [S]; ``node``: per chain [N, n_c]; ``edge``: per chain [n_c, n_c], the chain-edge
      marginals summed over the tokens of every grid of the batch; ``pair``: per chain c < C-1,
      [N, n_c, n_c+1] (these when ``marginals``);
    - ``labels``: per chain [N] int32, the best joint labeling; ``score`` [S] its log potential
      (when ``viterbi``).
    """
    cdef GridBatch gb = GridBatch(sizes, sent_ptr, node, trans, pair)
    check_exact_size(gb.sizes, gb.max_len)
    logz, score, _, _ = _run(gb, n_threads, marginals, viterbi, False, 0, 0.0, 0, 0)
    res = {}
    if marginals:
        res.update(logz=logz, node=gb.node_out, edge=gb.edges(), pair=gb.pair_out)
    if viterbi:
        res.update(labels=gb.labels_out, score=score)
    return res


def edge_list(int C, int T):
    """[E, 4] int: the variables (c, t, c', t') each edge of a C x T grid links, in the kernels'
    edge numbering (messages.pxd)."""
    out = []
    for c in range(C):
        for t in range(1, T):
            out.append((c, t - 1, c, t))
    for c in range(C - 1):
        for t in range(T):
            out.append((c, t, c + 1, t))
    assert len(out) == grid_edge_count(C, T)
    return np.array(out, dtype=np.int64).reshape(-1, 4)


def _check_bp(int schedule, double tol, int max_sweeps):
    if schedule not in (GRID_TRP, GRID_RANDOM):
        raise ValueError(f"schedule must be {GRID_TRP} (TRP) or {GRID_RANDOM} (random), not {schedule}")
    if not tol >= 0:
        raise ValueError("tol must be at least 0")
    if max_sweeps < 1:
        raise ValueError("max_sweeps must be at least 1")


def bp(sizes, sent_ptr, node, trans, pair, int schedule=GRID_TRP, double tol=1e-3, int max_sweeps=100,
       unsigned long long seed=0, int n_threads=1):
    """Loopy sum-product over each grid: a dict with ``logz`` [S] (the Bethe approximation),
    ``node``, ``edge``, ``pair`` as exact() returns them (beliefs), ``sweeps`` [S] int32 and
    ``converged`` [S] bool."""
    _check_bp(schedule, tol, max_sweeps)
    cdef GridBatch gb = GridBatch(sizes, sent_ptr, node, trans, pair)
    logz, _, sweeps, conv = _run(gb, n_threads, True, False, True, schedule, tol, max_sweeps, seed)
    return {"logz": logz, "node": gb.node_out, "pair": gb.pair_out, "edge": gb.edges(),
            "sweeps": sweeps, "converged": conv}


def bp_max(sizes, sent_ptr, node, trans, pair, int schedule=GRID_TRP, double tol=1e-3, int max_sweeps=100,
           unsigned long long seed=0, int n_threads=1):
    """Loopy max-product decoding of each grid: a dict with ``labels`` per chain [N] int32,
    ``score`` [S] (their log potential), ``sweeps`` [S] int32, ``converged`` [S] bool."""
    _check_bp(schedule, tol, max_sweeps)
    cdef GridBatch gb = GridBatch(sizes, sent_ptr, node, trans, pair)
    _, score, sweeps, conv = _run(gb, n_threads, False, True, True, schedule, tol, max_sweeps, seed)
    return {"labels": gb.labels_out, "score": score, "sweeps": sweeps, "converged": conv}


def _run(GridBatch gb, int n_threads, bint marginals, bint labels, bint loopy, int schedule, double tol,
         int max_sweeps, unsigned long long seed):
    """Inference on every grid into gb's outputs: marginals (exact, or sum-product) and labels
    (exact Viterbi, or max-product); loopy grid s is seeded with seed + s. Returns (log Z
    (Bethe when loopy) [S], labeling score [S], sweeps [S], converged [S])."""
    cdef int nt = max(1, n_threads)
    cdef Py_ssize_t s
    logz_np = np.zeros(gb.n_grids)
    score_np = np.zeros(gb.n_grids)
    sweeps_np = np.zeros(gb.n_grids, dtype=np.int32)
    conv_np = np.zeros(gb.n_grids, dtype=np.int32)
    cdef double[::1] logz = logz_np, score = score_np
    cdef int[::1] sweeps = sweeps_np, conv = conv_np
    gb.outputs(nt, marginals, labels)
    cdef Slot* sl = NULL
    cdef Slot* me = NULL
    if gb.n_grids:
        sl = gb.slots(nt, GRID_WANT_BP if loopy else GRID_WANT_EXACT)
        try:
            with nogil, parallel(num_threads=nt):
                me = &sl[threadid()]
                for s in prange(gb.n_grids, schedule="dynamic", chunksize=4):
                    gb.at(me, s)
                    if marginals and loopy:
                        logz[s] = grid_bp(&me.g, &me.w, schedule, tol, max_sweeps, seed + <unsigned long long> s,
                                          &me.out, &sweeps[s], &conv[s])
                    elif marginals:
                        logz[s] = grid_exact(&me.g, &me.w, &me.out)
                    if labels and loopy:
                        score[s] = grid_bp_max(&me.g, &me.w, schedule, tol, max_sweeps,
                                               seed + <unsigned long long> s, me.labels, &sweeps[s], &conv[s])
                    elif labels:
                        score[s] = grid_exact_viterbi(&me.g, &me.w, me.labels)
        finally:
            free_slots(sl, nt)
    return logz_np, score_np, sweeps_np, conv_np.astype(bool)


def comb_edges(int C, int T, int spine):
    """The edges (edge_list numbering) of TRP's comb with chain ``spine`` as its spine."""
    if not (1 <= C <= 8 and T >= 1 and 0 <= spine < C):
        raise ValueError("1..8 chains, at least one token, a spine among the chains")
    out = np.zeros(max(1, C * T), dtype=np.int32)
    cdef int[::1] o = out
    cdef Py_ssize_t k = grid_comb_edges(C, T, spine, &o[0])
    return out[:k].copy()


def message_counts(sizes, node, trans, pair, int schedule, int sweeps, bint maxp=False,
                   unsigned long long seed=0):
    """[E, 2]: how many messages one grid's BP sent across each edge, each way (way 0: forward
    in time or down to chain c+1), in ``sweeps`` sweeps that are never counted as converged."""
    _check_bp(schedule, 0.0, sweeps)
    cdef GridBatch gb = GridBatch(sizes, np.array([0, len(node[0])]), node, trans, pair)
    cdef Slot* sl = gb.slots(1, GRID_WANT_BP)
    cdef int sw = 0, cv = 0
    E = grid_edge_count(gb.C, gb.max_len)
    counts = np.zeros(2 * E + 2, dtype=np.int32)
    cdef int[::1] cnt = counts
    cdef int* lab[8]
    labels = [np.zeros(gb.max_len, dtype=np.int32) for _ in range(gb.C)]
    cdef int[::1] vi
    for c in range(gb.C):
        vi = labels[c]
        lab[c] = &vi[0]
    try:
        gb.at(&sl[0], 0)
        sl[0].w.visits = &cnt[0]
        sl[0].out.node = NULL
        sl[0].out.edge = NULL
        sl[0].out.pair = NULL
        if maxp:
            grid_bp_max(&sl[0].g, &sl[0].w, schedule, -1.0, sweeps, seed, lab, &sw, &cv)
        else:
            grid_bp(&sl[0].g, &sl[0].w, schedule, -1.0, sweeps, seed, &sl[0].out, &sw, &cv)
    finally:
        sl[0].w.visits = NULL
        free_slots(sl, 1)
    return counts[:2 * E].reshape(E, 2)
