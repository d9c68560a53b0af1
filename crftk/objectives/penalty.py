"""The L2 penalty every objective adds, and the parameters it leaves alone."""

import math

import numpy as np

from crftk._vector import axpy, dot
from crftk.errors import CrftkError

#: elements per block of the penalty's gradient: 64 KiB of float64, under glibc's mmap threshold
#: (crftk.optimize.common.map_large_blocks), so each block's temporary comes from the heap instead
#: of a fresh mapping faulted in again for every block (3x slower on CoNLL-2000's 456k weights)
_BLOCK = 1 << 13


class Penalty:
    """``c2 * ||w||^2`` over the parameters that move (CRFsuite's L2 convention).

    ``frozen`` marks parameters held at their starting value: their gradient is
    zero and they are left out of the penalty (the transitions of a template
    without a label bigram; the weights hard constraints pin).
    """

    def __init__(self, c2=0.0, frozen=None):
        c2 = float(c2)
        if not math.isfinite(c2) or c2 < 0:
            raise CrftkError(f"c2 must be a finite number >= 0, got {c2!r}")
        self.c2 = c2
        self.frozen = frozen if frozen is not None and np.any(frozen) else None
        self.free = None if self.frozen is None else ~self.frozen

    def __call__(self, w, value, grad):
        """(value, grad) of the unpenalized objective at w -> those of the penalized one (grad in place)."""
        c2, frozen = self.c2, self.frozen
        if c2 > 0:
            # the sum over the free weights alone: pinned weights (-1e4 each) would
            # swamp the value's last digits if added and subtracted again
            free = w if frozen is None else w[self.free]
            # crftk's own sum (as the minimisers' products): the same value whatever BLAS runs
            free = np.ascontiguousarray(free.reshape(-1), dtype=np.float64)
            value += c2 * dot(free, free)
            if (w.ndim == 1 and grad.ndim == 1 and w.dtype == grad.dtype == np.float64
                    and w.flags.c_contiguous and grad.flags.c_contiguous):
                # one compiled pass: the same product and sum per entry as the blocks below
                axpy(2.0 * c2, w, grad)
            elif w.ndim == 1 and grad.ndim == 1:
                # a block at a time: the same sums, with no temporary of the whole vector
                for i in range(0, w.size, _BLOCK):
                    grad[i:i + _BLOCK] += (2.0 * c2) * w[i:i + _BLOCK]
            else:
                grad += (2.0 * c2) * w
        if frozen is not None:
            grad[frozen] = 0.0
        return value, grad
