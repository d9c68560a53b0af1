"""crftk: conditional random fields on sequences, from the command line and from Python.

    from crftk import CRF, read_conll, evaluate
    X, y = read_conll("data/demo.train", label_col=-1)
    crf = CRF("templates/chunking-crfpp.tmpl").fit(X, y)
    X_test, y_test = read_conll("data/demo.test", label_col=-1)
    print(evaluate(y_test, crf.predict(X_test)).overall.f1)

``CRF``, ``FactorialCRF``, ``Pipeline``, ``read_conll``, ``evaluate``, ``NotFittedError`` (crftk/api.py) and ``Model``
(crftk/model.py) are imported on first use, so that ``import crftk`` (and the command
line, which imports it) does not load numpy and the training code.
"""

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
__all__ = ["Bag", "CRF", "CrftkError", "Model", "NotFittedError", "Pipeline", "TwoStage", "evaluate", "read_conll",
           "__version__"]

_LAZY = {"Bag": "crftk.api", "CRF": "crftk.api", "FactorialCRF": "crftk.api", "NotFittedError": "crftk.api", "Pipeline": "crftk.api", "TwoStage": "crftk.api",
         "read_conll": "crftk.api",
         "evaluate": "crftk.api", "Model": "crftk.model"}


def __getattr__(name):
    # the API's names are imported on first use: `import crftk` (the CLI's first step) stays cheap
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'crftk' has no attribute {name!r}")
    value = getattr(__import__(module, fromlist=[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
