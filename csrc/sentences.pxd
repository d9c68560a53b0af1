# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True, initializedcheck=False
"""The one parallel loop of the kernels over independent units (sentences, chains, grids).

A kernel gives a task (one unit's work, run on its thread's workspace), a struct of its
inputs and outputs (the job), and how to make a thread's workspace (Workspaces). Units are
dealt to the threads dynamically, a chunk at a time, so results never depend on which
thread ran a unit: a task writes per-unit outputs, or per-thread sums indexed by tid.
"""

from libc.stdlib cimport calloc, free
from cython.parallel cimport prange, parallel, threadid


# One unit's work: job is the kernel's own struct of inputs and outputs, s the unit, work the
# thread's workspace, tid the thread (for per-thread sums).
ctypedef void (*SentenceTask)(void* job, Py_ssize_t s, void* work, int tid) noexcept nogil


cdef struct Workspaces:
    # how to make and free one thread's workspace: a struct of size bytes, zeroed, then init
    # (of thread i's; 0, or -1 when out of memory, with nothing left allocated); release frees
    # what init made
    # (after folding what the workspace counted into spec, for kernels that count)
    size_t size
    int (*init)(void* spec, void* work, int i) noexcept nogil
    void (*release)(void* spec, void* work) noexcept nogil
    void* spec


cdef inline char* workspaces_new(const Workspaces* ws, int n, str oom) except NULL:
    """n workspaces side by side, made before a parallel block so that running out of memory
    raises MemoryError(oom) here. Free with workspaces_free."""
    cdef char* pool = <char*> calloc(n, ws.size)
    cdef int i
    if pool == NULL:
        raise MemoryError(oom)
    for i in range(n):
        if ws.init(ws.spec, pool + <size_t> i * ws.size, i) < 0:
            workspaces_free(ws, pool, i)
            raise MemoryError(oom)
    return pool


cdef inline void workspaces_free(const Workspaces* ws, char* pool, int n) noexcept nogil:
    """Releases the first n workspaces of a pool and frees the pool."""
    cdef int i
    for i in range(n):
        ws.release(ws.spec, pool + <size_t> i * ws.size)
    free(pool)


cdef inline int run_sentences(Py_ssize_t n, int n_threads, int chunk, const Workspaces* ws, str oom,
                              SentenceTask task, void* job) except -1:
    """task(job, s, ...) for every s < n over n_threads threads, each thread with a workspace of
    ws (workspaces_new; none made when n is 0). Chunks of chunk units go to the threads in turn
    (a static schedule), not to whichever is free: the units a thread adds into its own sums are
    then the same in every run, so a training run gives the same weights each time it is run
    with the same number of threads."""
    cdef Py_ssize_t s
    cdef int tid
    if n <= 0:
        return 0
    cdef char* pool = workspaces_new(ws, n_threads, oom)
    try:
        with nogil, parallel(num_threads=n_threads):
            tid = threadid()
            for s in prange(n, schedule="static", chunksize=chunk):
                task(job, s, pool + <size_t> tid * ws.size, tid)
    finally:
        workspaces_free(ws, pool, n_threads)
    return 0
