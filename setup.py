"""Build crftk: the Cython lattice kernels (with OpenMP where the compiler has it)."""

import os
import shutil
import subprocess
import sys
import tempfile

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

OPENMP_TEST = "#include <omp.h>\nint main(void) { return omp_get_max_threads() > 0 ? 0 : 1; }\n"


def openmp_flags():
    """Compiler and linker flags for OpenMP, or none when the compiler lacks it."""
    if os.environ.get("CRFTK_NO_OPENMP"):
        return [], []
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc.split()[0]) is None:
        return [], []
    flag = "-fopenmp"
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "t.c")
        with open(src, "w") as fh:
            fh.write(OPENMP_TEST)
        cmd = cc.split() + [flag, src, "-o", os.path.join(tmp, "t")]
        ok = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    if not ok:
        print("crftk: the compiler has no OpenMP; building single-threaded kernels", file=sys.stderr)
        return [], []
    return [flag], [flag]


compile_omp, link_omp = openmp_flags()


# the C headers a kernel includes (through the .pxd files it cimports): a change of one
# recompiles the extensions that include it, though their generated C stays the same
VECMATH = ["csrc/vecmath.h"]
# ... and the max-plus products of the factorial grids' max-product passes
MAXPLUS = VECMATH + ["csrc/maxplus.h"]
# ... and product.pxd's n-best step, which every extension that cimports product.pxd includes
PRODUCT = MAXPLUS + ["csrc/nbest.h"]


# no a*b+c contracted into one fused multiply-add, whatever CFLAGS or the target's default (GCC
# contracts wherever FMA exists, e.g. -march=native or aarch64): the kernels' sums keep numpy's
# and each other's bits on every CPU
OPTIMIZE = ["-O3", "-ffp-contract=off"]


def kernel(name, source, headers=()):
    """A Cython extension of crftk with numpy's headers, built with OPTIMIZE and OpenMP."""
    return Extension(name, [source], include_dirs=[numpy.get_include(), "csrc"], depends=list(headers),
                     extra_compile_args=OPTIMIZE + compile_omp, extra_link_args=link_omp,
                     define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")])


extensions = [
    kernel("crftk._lattice", "csrc/lattice.pyx", VECMATH),
    kernel("crftk._induce", "csrc/induce.pyx"),
    kernel("crftk._chain", "csrc/chain_tables.pyx", VECMATH),
    kernel("crftk._product", "csrc/product_tables.pyx", PRODUCT),
    kernel("crftk._pipeline", "csrc/pipeline_decode.pyx", PRODUCT),
    kernel("crftk._messages", "csrc/messages.pyx", PRODUCT),
    kernel("crftk._combine", "csrc/combine.pyx", VECMATH),
    kernel("crftk._semimarkov", "csrc/semimarkov.pyx", VECMATH),
    kernel("crftk._factorial", "csrc/factorial.pyx", PRODUCT),
    kernel("crftk._encode", "csrc/encode.pyx"),
    kernel("crftk._floor", "csrc/floor.pyx"),
    kernel("crftk._textio", "csrc/textio.pyx"),
    Extension("crftk._vector", ["csrc/vector.pyx"], extra_compile_args=OPTIMIZE),
]

setup(
    ext_modules=cythonize(extensions, include_path=["csrc"], compiler_directives={"language_level": 3}),
)
