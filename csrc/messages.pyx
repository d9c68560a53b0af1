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
from sentences cimport Workspaces, workspaces_new, workspaces_free, run_sentences
from vecmath cimport exp_array, log_array
from maxplus cimport maxplus

from messages cimport (Grid, GridOut, GridWork, grid_work_init, grid_work_release, grid_joint_labels,
                       grid_edge_count, grid_exact, grid_exact_viterbi, grid_bp, grid_bp_max,
                       grid_comb_edges, grid_labeling_score, GRID_WANT_EXACT, GRID_WANT_BP, GRID_TRP,
                       GRID_RANDOM)


cdef struct Batch:
    # a GridBatch's grids and outputs, for the nogil code; outputs NULL where not asked for
    int C, max_len
    int n[8]
    const double* node_p[8]
    const double* trans_p[8]
    const double* pair_p[8]
    const long* sp
    double* node_base[8]
    double* pair_base[8]
    int* lab_base[8]
    double* edge_base
    Py_ssize_t eoff[8]
    Py_ssize_t edge_width
    int want                      # what the workspaces are for (GRID_WANT_*)


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
    # the outputs (see outputs())
    cdef readonly object node_out, pair_out, edge_acc, labels_out
    cdef Batch b

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
            self.b.n[c] = sizes_l[c]
            v2 = self.node[c]
            self.b.node_p[c] = &v2[0, 0] if N else NULL
            v2 = self.trans[c]
            self.b.trans_p[c] = &v2[0, 0]
            if c < C - 1:
                v3 = self.pair[c]
                self.b.pair_p[c] = &v3[0, 0, 0] if N else NULL
        self.n_tokens = N
        self.n_grids = sp.size - 1
        self.max_len = int(np.diff(sp).max()) if sp.size > 1 else 0
        cdef const long[::1] spv = self.sent_ptr
        self.b.sp = &spv[0]
        self.b.C = self.C
        self.b.max_len = self.max_len

    cdef int outputs(self, int n_threads, bint marginals, bint labels) except -1:
        """The batch's output arrays: with marginals, node [N, n_c] and pair [N, n_c, n_c+1] per
        chain and each thread's chain-edge sums; with labels, [N] int32 per chain. Call before
        workspaces(), whose slots point at them."""
        cdef Py_ssize_t N = self.n_tokens, k = 0
        cdef int c
        cdef double[:, ::1] v2
        cdef double[:, :, ::1] v3
        cdef int[::1] vi
        sizes_l = self.sizes.tolist()
        for c in range(self.C):
            self.b.eoff[c] = k
            k += sizes_l[c] * sizes_l[c]
        self.b.edge_width = k
        self.node_out = [np.zeros((N, n)) for n in sizes_l] if marginals else None
        self.pair_out = [np.zeros((N, sizes_l[c], sizes_l[c + 1])) for c in range(self.C - 1)] if marginals else None
        self.edge_acc = np.zeros((n_threads, k)) if marginals else None
        self.labels_out = [np.zeros(N, dtype=np.int32) for _ in range(self.C)] if labels else None
        if marginals:
            v2 = self.edge_acc
            self.b.edge_base = &v2[0, 0]
        for c in range(self.C):
            if marginals and N:
                v2 = self.node_out[c]
                self.b.node_base[c] = &v2[0, 0]
                if c < self.C - 1:
                    v3 = self.pair_out[c]
                    self.b.pair_base[c] = &v3[0, 0, 0]
            if labels and N:
                vi = self.labels_out[c]
                self.b.lab_base[c] = &vi[0]
        return 0

    def edges(self):
        """Per chain [n_c, n_c]: the chain-edge marginals summed over the tokens and threads."""
        total = self.edge_acc.sum(axis=0)
        return [total[self.b.eoff[c]:self.b.eoff[c] + n * n].reshape(n, n) for c, n in enumerate(self.sizes.tolist())]

    cdef Workspaces workspaces(self, int want):
        """A Slot per thread, its workspace made for this batch (for what want says)."""
        self.b.want = want
        return slot_workspaces(&self.b)


cdef int slot_init(void* spec, void* work, int i) noexcept nogil:
    cdef Batch* b = <Batch*> spec
    cdef Slot* sl = <Slot*> work
    cdef int c
    if grid_work_init(&sl.w, b.max_len, b.C, b.n, b.want) < 0:
        return -1
    sl.g.C = b.C
    sl.g.n = b.n
    sl.g.node = sl.node
    sl.g.trans = b.trans_p
    sl.g.pair = sl.pair
    if b.edge_base != NULL:      # marginals asked for
        for c in range(b.C):
            sl.edge_out[c] = b.edge_base + i * b.edge_width + b.eoff[c]
        sl.out.node = sl.node_out
        sl.out.edge = sl.edge_out
        sl.out.pair = sl.pair_out if b.C > 1 else NULL
    return 0


cdef void slot_release(void* spec, void* work) noexcept nogil:
    grid_work_release(&(<Slot*> work).w)


cdef inline Workspaces slot_workspaces(Batch* b) noexcept nogil:
    return Workspaces(size=sizeof(Slot), init=slot_init, release=slot_release, spec=b)


cdef void batch_at(const Batch* b, Slot* sl, Py_ssize_t s) noexcept nogil:
    """Points the slot's grid (and its per-token outputs, where set) at grid s."""
    cdef Py_ssize_t t0 = b.sp[s]
    cdef int c
    sl.g.T = <int> (b.sp[s + 1] - t0)
    for c in range(b.C):
        sl.node[c] = b.node_p[c] + t0 * b.n[c]
        if b.node_base[c] != NULL:
            sl.node_out[c] = b.node_base[c] + t0 * b.n[c]
        if b.lab_base[c] != NULL:
            sl.labels[c] = b.lab_base[c] + t0
        if c < b.C - 1:
            sl.pair[c] = b.pair_p[c] + t0 * b.n[c] * b.n[c + 1]
            if b.pair_base[c] != NULL:
                sl.pair_out[c] = b.pair_base[c] + t0 * b.n[c] * b.n[c + 1]


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


def max_plus(x1, M, x2=None):
    """y[j] = max over i of x1[i] + M[i, j], or of (M[i, j] + x1[i]) + x2[i] with x2, through the
    kernels' max-plus product (maxplus.h's, AVX-512 where the CPU has it; for tests)."""
    a = np.ascontiguousarray(x1, dtype=np.float64)
    t = np.ascontiguousarray(M, dtype=np.float64)
    b = None if x2 is None else np.ascontiguousarray(x2, dtype=np.float64)
    if a.ndim != 1 or t.ndim != 2 or t.shape[0] != a.shape[0] or (b is not None and b.shape != a.shape):
        raise ValueError("max_plus: x1 [m], M [m, n] and x2 [m]")
    y = np.empty(t.shape[1])
    if t.shape[1] == 0:
        return y
    cdef const double[::1] xa = a if a.size else np.zeros(1)
    cdef const double[::1] xb = (b if b.size else np.zeros(1)) if b is not None else np.zeros(1)
    cdef const double[:, ::1] tm = t if t.size else np.zeros((1, t.shape[1]))
    cdef double[::1] out = y
    maxplus(&xa[0], &xb[0] if b is not None else NULL, &tm[0, 0], <int> t.shape[0], <int> t.shape[1], &out[0])
    return y


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


cdef struct Job:
    # what _run asks of every grid: its inputs, and its outputs (one entry per grid)
    const Batch* b
    bint marginals, labels, loopy
    int schedule
    double tol
    int max_sweeps
    unsigned long long seed
    double* logz
    double* score
    int* sweeps
    int* conv


cdef void grid_task(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil:
    """Grid s of a _run, on its thread's Slot."""
    cdef const Job* j = <const Job*> job
    cdef Slot* me = <Slot*> work
    batch_at(j.b, me, s)
    if j.marginals and j.loopy:
        j.logz[s] = grid_bp(&me.g, &me.w, j.schedule, j.tol, j.max_sweeps, j.seed + <unsigned long long> s,
                            &me.out, &j.sweeps[s], &j.conv[s])
    elif j.marginals:
        j.logz[s] = grid_exact(&me.g, &me.w, &me.out)
    if j.labels and j.loopy:
        j.score[s] = grid_bp_max(&me.g, &me.w, j.schedule, j.tol, j.max_sweeps,
                                 j.seed + <unsigned long long> s, me.labels, &j.sweeps[s], &j.conv[s])
    elif j.labels:
        j.score[s] = grid_exact_viterbi(&me.g, &me.w, me.labels)


def _run(GridBatch gb, int n_threads, bint marginals, bint labels, bint loopy, int schedule, double tol,
         int max_sweeps, unsigned long long seed):
    """Inference on every grid into gb's outputs: marginals (exact, or sum-product) and labels
    (exact Viterbi, or max-product); loopy grid s is seeded with seed + s. Returns (log Z
    (Bethe when loopy) [S], labeling score [S], sweeps [S], converged [S])."""
    cdef int nt = max(1, n_threads)
    logz_np = np.zeros(gb.n_grids)
    score_np = np.zeros(gb.n_grids)
    sweeps_np = np.zeros(gb.n_grids, dtype=np.int32)
    conv_np = np.zeros(gb.n_grids, dtype=np.int32)
    cdef double[::1] logz = logz_np, score = score_np
    cdef int[::1] sweeps = sweeps_np, conv = conv_np
    gb.outputs(nt, marginals, labels)
    cdef Workspaces ws = gb.workspaces(GRID_WANT_BP if loopy else GRID_WANT_EXACT)
    cdef Job job
    if gb.n_grids:
        job = Job(b=&gb.b, marginals=marginals, labels=labels, loopy=loopy, schedule=schedule, tol=tol,
                  max_sweeps=max_sweeps, seed=seed, logz=&logz[0], score=&score[0], sweeps=&sweeps[0],
                  conv=&conv[0])
        run_sentences(gb.n_grids, nt, 4, &ws, "cannot allocate grid workspaces", grid_task, &job)
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
    cdef Workspaces ws = gb.workspaces(GRID_WANT_BP)
    cdef Slot* sl = <Slot*> workspaces_new(&ws, 1, "cannot allocate grid workspaces")
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
        batch_at(&gb.b, &sl[0], 0)
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
        workspaces_free(&ws, <char*> sl, 1)
    return counts[:2 * E].reshape(E, 2)
