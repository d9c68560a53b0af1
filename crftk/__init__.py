"""crftk: conditional random fields on sequences, from the command line and from Python."""

import os

# crftk parallelises over sentences with its own OpenMP threads. A multi-threaded
# BLAS under numpy would only speed up the optimizer's vector operations a little,
# and its spinning worker threads steal the cores the kernels run on (measured: 50x
# slower vector operations on a busy 2-core machine). Effective only if crftk is
# imported before numpy; a value set by the user wins.
for _var in ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

from crftk.errors import CrftkError  # noqa: E402

__version__ = "0.1.0"
__all__ = ["CrftkError", "__version__"]
