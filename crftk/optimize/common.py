"""What the minimisers share: results, progress reports, stopping rules, the objective wrapper.

Every minimiser (L-BFGS/OWL-QN, CG, GIS, QuickProp, and the online trainers)
reports an :class:`IterationInfo` after each iteration, stops by the same
:class:`StoppingRules` and returns an :class:`OptimizeResult`. They are written
for objectives that are expensive to evaluate (a CRF objective is a pass over a
whole corpus) and have millions of parameters: every evaluation is counted, no
point is evaluated twice in a row, and the vector work per iteration is numpy
operations with no Python loop over parameters. The arrays passed to ``fun``
are never modified afterwards, and the gradient returned by ``fun`` is copied,
so ``fun`` may reuse its output buffer.
"""

from __future__ import annotations

import math
import platform
import sys
import threading
from collections import deque
from dataclasses import dataclass

import numpy as np
from crftk._vector import all_finite as _all_finite, axpy as _kernel_axpy, axpy_dot as _kernel_axpy_dot
from crftk._vector import BLOCK as _KERNEL_BLOCK, dot as _kernel_dot, scale_dot as _kernel_scale_dot
from crftk._vector import same_values as _same_values

# Sufficient-decrease (Armijo) constant of the line searches.
ARMIJO = 1e-4

@dataclass
class OptimizeResult:
    """Outcome of :func:`lbfgs`, :func:`cg` or :func:`gis`.

    ``x`` is the last accepted point (every accepted step decreases the
    objective, so it is also the best), ``f`` the objective there including
    the L1 term, ``reason`` a sentence saying why the minimiser stopped.
    """

    x: np.ndarray
    f: float
    n_iter: int
    n_evals: int
    converged: bool
    reason: str

    @classmethod
    def at(cls, x, shape, f, n_iter, n_evals, outcome):
        """The result at point x (reshaped to the caller's shape), given (converged, reason); a
        point the minimiser sealed (:func:`seal`) is copied, an array the caller may change."""
        if not x.flags.writeable:
            x = np.array(x)
        return cls(x=x.reshape(shape), f=f, n_iter=n_iter, n_evals=n_evals, converged=outcome[0],
                   reason=outcome[1])


@dataclass
class IterationInfo:
    """Progress report passed to the callback after every iteration.

    ``f`` includes the L1 term, ``gnorm`` is the norm of the gradient (of the
    pseudo-gradient for OWL-QN), ``step`` the accepted step length along the
    search direction, ``n_evals`` the evaluations so far and ``n_active`` the
    number of nonzero parameters.  For :func:`gis`, ``f`` is the value of
    ``objective`` (the gradient norm without one), ``step`` the norm of the
    update and ``n_evals`` counts calls of ``expected``. ``mislabeled``: the
    training tokens an online learner mislabeled during the epoch (pa, arow), else None.
    """

    iteration: int
    x: np.ndarray
    f: float
    gnorm: float
    xnorm: float
    step: float
    n_evals: int
    n_active: int
    mislabeled: int | None = None


class Objective:
    """Wraps ``fun``: counts evaluations, copies gradients, checks shapes.

    It also remembers the last point so that asking for the same point twice
    in a row returns the stored values instead of calling ``fun`` again.
    """

    def __init__(self, fun, shape):
        self.fun = fun
        self.shape = shape
        self.n_evals = 0
        self._last_x = None
        self._last_value = None

    def forget(self):
        """Drop the last evaluation (a caller about to reuse its gradient's memory)."""
        self._last_x = None
        self._last_value = None

    def __call__(self, x):
        if self._last_x is not None and same_point(x, self._last_x):
            return self._last_value
        f, g = self.fun(x.reshape(self.shape))
        self.n_evals += 1
        f = float(f)
        # a copy, as fun may reuse its buffer, unless fun says each gradient is a new array that
        # it keeps no reference to (then the copy would only be one more vector at the peak)
        g = np.array(g, dtype=np.float64, copy=None if getattr(self.fun, "fresh_gradients", False) else True)
        if g.size != x.size:
            raise ValueError(
                f"the gradient returned by fun has {g.size} elements, "
                f"expected {x.size}"
            )
        g = g.reshape(-1)
        self._last_x = x
        self._last_value = (f, g)
        return f, g


def is_finite(f, g):
    """Whether f and every entry of g are finite. A gradient (contiguous float64) goes through a
    compiled loop: the line search calls this right after a pass, the training's peak, where a
    boolean vector of g's size would be a fresh mapping faulted in."""
    if not math.isfinite(f):
        return False
    g = np.asarray(g)
    if g.dtype == np.float64 and g.flags.c_contiguous:
        return _all_finite(g.reshape(-1))
    return bool(np.isfinite(g).all())


def same_point(a, b):
    """np.array_equal(a, b), by a compiled loop that stops at the first difference for contiguous
    float64 arrays (a minimiser's points: a trial point is compared with the points before it)."""
    if (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype == np.float64
            and a.flags.c_contiguous and b.flags.c_contiguous):
        return a.shape == b.shape and _same_values(a.reshape(-1), b.reshape(-1))
    return bool(np.array_equal(a, b))


class NonFiniteStart(ValueError):
    """The objective or its gradient is not finite where a minimiser starts."""


def evaluate_start(fun, shape, x):
    """(Objective wrapper, f, g) at the starting point, which must be finite."""
    obj = Objective(fun, shape)
    f, g = obj(x)
    with np.errstate(over="ignore"):
        square = dot64(g, g) if is_finite(f, g) else math.inf
    if not math.isfinite(square):     # the first step's length would be 0 or NaN
        raise NonFiniteStart("fun returned a non-finite value or gradient (or squared gradient norm) at x0")
    return obj, f, g


def axpy(a, x, y):
    """y += a * x in place, without a temporary: for contiguous vectors (y float64, x float64 or
    L-BFGS's float32 pairs, read in y's precision: the same two roundings per entry as a cast block
    scaled and added) in one compiled pass; else a float32 x a block at a time, so that no
    temporary of the whole vector raises the peak memory."""
    if _contiguous(x) and _float64_vector(y):
        _kernel_axpy(a, x, y)
        return
    if x.dtype == y.dtype or x.ndim != 1:
        y += a * x
        return
    if y.dtype == np.float64:
        t = scratch(np.float64)
        for i in range(0, x.size, BLOCK):
            block = as_block(x, i, t)
            block *= a
            y[i:i + BLOCK] += block
        return
    for i in range(0, x.size, BLOCK):
        y[i:i + BLOCK] += a * x[i:i + BLOCK].astype(y.dtype)


#: elements per block of the mixed-precision vector operations (512 KiB of float64): dot64's own
#: block, so that products summed a block at a time (L-BFGS's pairs) are dot64's numbers
BLOCK = _KERNEL_BLOCK

_scratch = threading.local()


def scratch(dtype, k=0):
    """This thread's k-th buffer of BLOCK elements of dtype, for the block operations. A new
    temporary per block would be a mapping of its own (:func:`map_large_blocks`), its pages
    faulted in again every time: several times slower than the arithmetic."""
    buffers = _scratch.__dict__.setdefault("buffers", {})
    key = (np.dtype(dtype).str, k)
    if key not in buffers:
        buffers[key] = np.empty(BLOCK, dtype)
    return buffers[key]


def release_scratch():
    """Free this thread's scratch buffers (the next :func:`scratch` makes them again): L-BFGS
    calls it before each line search, whose evaluations are the training's peak, where they would
    be idle memory. Once per iteration their pages are faulted in again, under a millisecond
    against a pass over the corpus."""
    _scratch.__dict__.pop("buffers", None)


def as_block(x, i, out):
    """Block i of x (from element i, at most BLOCK elements) cast into out's dtype, in out."""
    block = x[i:i + BLOCK]
    out = out[:block.size]
    np.copyto(out, block)
    return out


def dot64(x, y):
    """x'y summed in float64, whatever the precision of x and y, in crftk's own fixed order
    (``crftk._vector.dot``: BLOCK entries at a time, eight running sums in each): the same number
    whatever the CPU. BLAS's ddot changes its last bits with the kernel it picks, and with them the
    weights a minimiser reaches. No temporary for contiguous float32/float64 vectors."""
    return _kernel_dot(_flat(x), _flat(y))


def norm(x):
    """The Euclidean norm of x, as sqrt(dot64(x, x)) (np.linalg.norm's formula in that order)."""
    return math.sqrt(dot64(x, x))


def axpy_dot(a, x, y, z):
    """y += a * x (:func:`axpy`), then return dot64(z, y): for contiguous vectors in one pass over
    y, the same numbers as the two calls."""
    if _contiguous(x) and _contiguous(z) and _float64_vector(y):
        return _kernel_axpy_dot(a, x, y, z)
    axpy(a, x, y)
    return dot64(z, y)


def scale_dot(a, y, z):
    """y *= a, then return dot64(z, y); one pass over y when both are contiguous."""
    if _contiguous(z) and _float64_vector(y):
        return _kernel_scale_dot(a, y, z)
    y *= a
    return dot64(z, y)


def _contiguous(x):
    """Whether x is a vector the compiled kernels read: contiguous float32 or float64."""
    return x.dtype in (np.float32, np.float64) and x.ndim == 1 and x.flags.c_contiguous


def _float64_vector(y):
    """Whether y is a vector the compiled kernels write: contiguous float64."""
    return y.dtype == np.float64 and _contiguous(y)


def _flat(x):
    """x as a contiguous float32 or float64 vector: itself when it is one, else a copy."""
    x = np.asarray(x)
    if _contiguous(x):
        return x
    return np.ascontiguousarray(x.reshape(-1), dtype=np.float32 if x.dtype == np.float32 else np.float64)


# glibc's mallopt parameter; 128 KiB is its own starting threshold
_M_MMAP_THRESHOLD, _MMAP_THRESHOLD = -3, 128 * 1024


def map_large_blocks():
    """Have glibc's malloc keep every block of 128 KiB or more in its own mapping, returned to
    the system when freed, and give back the free heap it holds (malloc_trim).

    By default glibc raises that threshold to the size of the largest block freed, so that
    after the first few evaluations each freed weight-sized vector stays in the heap: on
    CoNLL-2000 that held ~19 MB of a training run's peak. Set once per process, on glibc only
    (elsewhere nothing happens). Results do not change: only where the vectors live."""
    global _mapped, _libc
    if _mapped:
        return
    _mapped = True
    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        return
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD)
        libc.malloc_trim(0)
        _libc = libc
    except Exception:       # a libc without them: the default allocator's behaviour is kept
        pass


_mapped = False
_libc = None


def trim_heap():
    """Give the free pages of glibc's heap back to the system (malloc_trim), after map_large_blocks."""
    if _libc is not None:
        _libc.malloc_trim(0)


def check_options(max_iter, epsilon, period, gtol, max_linesearch=1):
    """Validate the options every minimiser shares; return the integer ones."""
    if int(max_iter) != max_iter or max_iter < 0:
        raise ValueError(f"max_iter must be an integer >= 0, got {max_iter}")
    if int(period) != period or period < 0:
        raise ValueError(f"period must be an integer >= 0, got {period}")
    if int(max_linesearch) != max_linesearch or max_linesearch < 1:
        raise ValueError(
            f"max_linesearch must be a positive integer, got {max_linesearch}"
        )
    if not (epsilon >= 0.0) or not (gtol >= 0.0):
        raise ValueError("epsilon and gtol must be numbers >= 0")
    return int(max_iter), int(period), int(max_linesearch)


def seal(x):
    """Make x, an array the minimiser made and will not change again, read-only, so that
    :func:`kept` can hold it without a copy; returns x."""
    x.flags.writeable = False
    return x


def kept(a):
    """``a`` itself when nothing can change it any more (it and every array it views are
    read-only, as :func:`seal` leaves a minimiser's points), else a copy: what a caller keeps
    of an iteration's point, without a weight-sized copy where none is needed."""
    base = a
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return np.array(a, copy=True)
        base = base.base
    return a if base is None else np.array(a, copy=True)


def start_point(x0):
    """Return ``(shape, x)``: x0's shape and a flat float64 copy; x0 must be finite."""
    x0 = np.asarray(x0, dtype=np.float64)
    if np.isnan(x0).any():
        raise ValueError("x0 contains NaN")
    if not np.isfinite(x0).all():
        raise ValueError("x0 contains infinite values")
    return x0.shape, x0.reshape(-1).copy()


def bool_mask(mask, shape, name):
    """Validate a boolean mask of x0's shape; return it flat."""
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(f"{name} must be a boolean array, got dtype {mask.dtype}")
    if mask.shape != shape:
        raise ValueError(
            f"{name} has shape {mask.shape}, expected {shape} (the shape of x0)"
        )
    return mask.reshape(-1)


class StoppingRules:
    """The stopping rules shared by the minimisers.

    Before the first iteration: the gradient test, then ``max_iter == 0``.
    After each iteration, in this order: the gradient test and the
    relative-improvement test (both: converged), the iteration limit, a stop
    requested by the callback (not converged).
    """

    def __init__(self, *, max_iter, epsilon, period, gtol, f0, shape=None):
        self.shape = shape          # x0's: results are reshaped to it
        self.max_iter = max_iter
        self.epsilon = epsilon
        self.period = period
        self.gtol = gtol
        self.recent = deque([f0], maxlen=period + 1)

    def _gradient_small(self, gnorm, xnorm):
        rel = gnorm / max(1.0, xnorm)
        if gnorm == 0.0:
            return "converged: the gradient is exactly zero"
        if rel < self.gtol:
            return (
                f"converged: gradient norm {rel:.2g} (relative to max(1, |x|)) "
                f"is below tolerance {self.gtol:g}"
            )
        return None

    def at_start(self, g, x):
        """``(converged, reason)`` if the minimiser should not start from x (gradient g), else None."""
        reason = self._gradient_small(norm(g), norm(x))
        if reason is not None:
            return True, reason
        if self.max_iter == 0:
            return False, "reached the iteration limit (0) before converging"
        return None

    def result(self, x, f, n_iter, n_evals, converged, reason):
        """The minimiser's result at x."""
        return OptimizeResult.at(x, self.shape, f, n_iter, n_evals, (converged, reason))

    def result_at_start(self, g, x, f, n_evals):
        """The result when the minimiser should not start from x (see at_start), else None."""
        outcome = self.at_start(g, x)
        return None if outcome is None else self.result(x, f, 0, n_evals, *outcome)

    def end_of_iteration(self, callback, *, iteration, x, f, gnorm, step, n_evals, best=None):
        """Report the iteration to the callback, then apply the rules (to the best point's f):
        the result at ``best`` (x, f), default the current point, when the minimiser stops,
        else None."""
        xnorm = norm(x)
        stop = report(callback, iteration=iteration, x=x, shape=self.shape, f=f, gnorm=gnorm, xnorm=xnorm,
                      step=step, n_evals=n_evals)
        best_x, best_f = (x, f) if best is None else best
        outcome = self.after_iteration(iteration, best_f, gnorm, xnorm, stop)
        return None if outcome is None else self.result(best_x, best_f, iteration, n_evals, *outcome)

    def after_iteration(self, n_iter, f, gnorm, xnorm, stop_requested):
        """``(converged, reason)`` if the minimiser should stop, else None."""
        self.recent.append(f)
        reason = self._gradient_small(gnorm, xnorm)
        if reason is not None:
            return True, reason
        if self.period > 0 and n_iter >= self.period:
            rate = (self.recent[0] - f) / max(abs(f), 1e-300)
            if rate < self.epsilon:
                return (
                    True,
                    f"converged: relative improvement {rate:.3e} over the last "
                    f"{self.period} iterations is below epsilon {self.epsilon:g}",
                )
        if n_iter >= self.max_iter:
            return (
                False,
                f"reached the iteration limit ({self.max_iter}) before converging",
            )
        if stop_requested:
            return False, "stopped by callback"
        return None


def report(callback, *, iteration, x, shape, f, gnorm, xnorm, step, n_evals, mislabeled=None):
    """Call the callback (if any) with an :class:`IterationInfo`; return its stop request."""
    if callback is None:
        return False
    info = IterationInfo(
        iteration=iteration,
        x=x.reshape(shape),
        f=f,
        gnorm=gnorm,
        xnorm=xnorm,
        step=step,
        n_evals=n_evals,
        n_active=int(np.count_nonzero(x)),
        mislabeled=mislabeled,
    )
    return bool(callback(info))


def not_descent(slope):
    return (
        f"line search failed: the search direction is not a descent direction "
        f"even for steepest descent (directional derivative {slope:.2g})"
    )


