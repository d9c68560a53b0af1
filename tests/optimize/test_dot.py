"""The minimisers' inner products (crftk._vector.dot and its fused forms): one fixed order of
sums, written out here in Python and matched bit for bit, so that training gives the same
weights whatever BLAS kernel the CPU picks."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from corpora import REPO
from crftk._vector import BLOCK, axpy_dot as kernel_axpy_dot, dot, scale_dot as kernel_scale_dot
from crftk.optimize.common import BLOCK as OPTIMIZER_BLOCK, axpy, axpy_dot, dot64, norm, scale_dot
from crftk.optimize.quasi_newton import _History

LANES = 8
SIZES = [0, 1, 7, 8, 9, 63, 1000, BLOCK - 1, BLOCK, BLOCK + 1, 2 * BLOCK + 13]


def reference_dot(x, y):
    """The documented order: per block of BLOCK entries, entry i into running sum i % 8 (of the
    block), the eight sums added pairwise; the blocks' sums added in turn from 0."""
    x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
    total = np.float64(0.0)
    for start in range(0, x.size, BLOCK):
        xb, yb = x[start:start + BLOCK], y[start:start + BLOCK]
        acc = [np.float64(0.0)] * LANES
        for i in range(xb.size):
            acc[i % LANES] = acc[i % LANES] + xb[i] * yb[i]
        block = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
        total = total + block
    return float(total)


def test_the_block_is_the_documented_one():
    # the order's block (documented in csrc/vector.pyx and the README) and the block at a time of
    # L-BFGS's pair products must be one: push_step sums the blocks' dot64s in turn
    assert BLOCK == 65536 and OPTIMIZER_BLOCK == BLOCK


def _vectors(n, xtype, ytype, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(xtype), rng.standard_normal(n).astype(ytype)


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 63, 1000, BLOCK + 1])
@pytest.mark.parametrize("xtype", [np.float32, np.float64])
@pytest.mark.parametrize("ytype", [np.float32, np.float64])
def test_dot_is_the_documented_order_bit_for_bit(n, xtype, ytype):
    x, y = _vectors(n, xtype, ytype)
    expected = reference_dot(x, y)
    assert dot(x, y) == expected and dot(y, x) == expected
    assert dot64(x, y) == expected


@pytest.mark.parametrize("n", [3, 1000, 2 * BLOCK + 13])
def test_dot_is_within_rounding_of_the_exact_sum(n):
    x, y = _vectors(n, np.float32, np.float64, seed=1)
    products = x.astype(np.float64) * y
    exact = math.fsum(products)
    bound = n * np.finfo(np.float64).eps * float(np.abs(products).sum())
    assert abs(dot(x, y) - exact) <= bound


def test_the_order_is_not_a_plain_running_sum():
    # cancellation that a running sum and the eight lanes round differently: the test above
    # would also pass for another order, this one would not
    x = np.array([1e16, 1.0, -1e16, 1.0, 0, 0, 0, 0, 1.0])
    y = np.ones_like(x)
    assert reference_dot(x, y) == dot(x, y)
    assert dot(x, y) != sum(x)


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("xtype", [np.float32, np.float64])
def test_axpy_dot_is_axpy_then_dot(n, xtype):
    x, z = _vectors(n, xtype, np.float32, seed=2)
    y = np.random.default_rng(3).standard_normal(n)
    expected_y = y.copy()
    axpy(-0.37, x, expected_y)
    expected = dot64(z, expected_y)
    got = kernel_axpy_dot(-0.37, x, y, z)
    np.testing.assert_array_equal(y, expected_y)
    assert got == expected


@pytest.mark.parametrize("n", SIZES)
def test_scale_dot_is_the_scaling_then_dot(n):
    _, z = _vectors(n, np.float64, np.float32, seed=4)
    y = np.random.default_rng(5).standard_normal(n)
    expected_y = y * 0.61
    got = kernel_scale_dot(0.61, y, z)
    np.testing.assert_array_equal(y, expected_y)
    assert got == dot64(z, expected_y)


def test_python_fallbacks_give_the_kernels_numbers():
    # strided and 2-D operands are copied into a contiguous vector, summed in the same order
    rng = np.random.default_rng(6)
    a = rng.standard_normal((2, 500))
    x, y = a[0], a[1]
    strided = rng.standard_normal(1000)[::2]
    assert dot64(strided, y) == dot(np.ascontiguousarray(strided), y)
    assert dot64(a, a) == dot(a.reshape(-1), a.reshape(-1))
    assert norm(x) == math.sqrt(dot(x, x))
    q1, q2 = y.copy(), y.copy()
    assert axpy_dot(0.5, strided, q1, x) == kernel_axpy_dot(0.5, np.ascontiguousarray(strided), q2, x)
    np.testing.assert_array_equal(q1, q2)
    q1, q2 = y.copy(), y.copy()
    assert scale_dot(3.0, q1, strided) == kernel_scale_dot(3.0, q2, np.ascontiguousarray(strided))
    np.testing.assert_array_equal(q1, q2)


def test_norm_is_the_square_root_of_the_documented_sum():
    x = np.random.default_rng(7).standard_normal(2 * BLOCK + 13)
    assert norm(x) == math.sqrt(reference_dot(x, x))


def reference_direction(history, g):
    """The two-loop recursion step by step: each product, then each update, its own pass."""
    q = -g
    alphas = []
    for s, y, rho in zip(reversed(history.s), reversed(history.y), reversed(history.rho)):
        a = rho * dot64(s, q)
        alphas.append(a)
        axpy(-a, y, q)
    q *= history.gamma
    for s, y, rho, a in zip(history.s, history.y, history.rho, reversed(alphas)):
        b = rho * dot64(y, q)
        axpy(a - b, s, q)
    return q


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("m", [1, 2, 6])
@pytest.mark.parametrize("n", [5, BLOCK + 3])
def test_the_fused_direction_is_the_recursion_step_by_step(dtype, m, n):
    rng = np.random.default_rng(8)
    history = _History(m, dtype)
    assert np.array_equal(history.direction(np.ones(n)), -np.ones(n))     # no pairs: -g
    for _ in range(m + 3):                                                # fills, then wraps
        s = rng.standard_normal(n)
        history.push(s, 2.0 * s + 0.1 * rng.standard_normal(n))
        g = rng.standard_normal(n)
        expected = reference_direction(history, g)
        np.testing.assert_array_equal(history.direction(g), expected)


def test_lengths_must_agree():
    with pytest.raises(ValueError):
        dot(np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        kernel_axpy_dot(1.0, np.ones(3), np.ones(3), np.ones(4))
    with pytest.raises(ValueError):
        kernel_scale_dot(1.0, np.ones(3), np.ones(2))


def _openblas_coretypes():
    """Two OpenBLAS kernels this CPU runs whose ddot differ in the last bits, else None."""
    if sys.platform != "linux" or not os.path.exists("/proc/cpuinfo"):
        return None
    flags = open("/proc/cpuinfo").read()
    if " avx2" not in flags:
        return None
    probe = ("import numpy as np; r = np.random.default_rng(0); x = r.standard_normal(65536); "
             "print(repr(float(x @ r.standard_normal(65536))))")
    out = {}
    for core in ("Prescott", "Haswell"):
        env = dict(os.environ, OPENBLAS_CORETYPE=core)
        run = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
        if run.returncode:
            return None
        out[core] = run.stdout
    return tuple(out) if len(set(out.values())) == 2 else None


def test_training_gives_the_same_weights_under_two_blas_kernels(tmp_path):
    cores = _openblas_coretypes()
    if cores is None:
        pytest.skip("needs numpy on OpenBLAS with two kernels (Prescott, Haswell) whose ddot differ")
    chunking, factorial = (str(REPO / "templates" / t) for t in ("chunking-crfpp.tmpl", "fcrf-np.tmpl"))
    runs = {   # L-BFGS with float32 pairs, OWL-QN, CG, and a factorial CRF (50 pairs) on the demo corpus
        "lbfgs": ["-t", chunking, "--max-iter", "40"],
        "owlqn": ["-t", chunking, "--max-iter", "40", "--c1", "0.1"],
        "cg": ["-t", chunking, "--max-iter", "20", "--algorithm", "cg"],
        "factorial": ["-t", factorial, "--max-iter", "10", "--label-col", "1", "--label-col", "2"],
    }
    probe = ("import sys, hashlib; from crftk.model import Model; m = Model.load(sys.argv[1]); "
             "print(hashlib.sha256(b''.join(p.weights.tobytes() for p in m.parts)).hexdigest())")
    digests = {}
    for core in cores:
        env = dict(os.environ, OPENBLAS_CORETYPE=core, PYTHONPATH=str(REPO))
        for name, options in runs.items():
            model = tmp_path / f"{core}-{name}.model"
            subprocess.run([sys.executable, "-m", "crftk", "train", "-q", *options, "-m", str(model),
                            str(REPO / "data" / "demo.train")], env=env, check=True, cwd=tmp_path)
            digest = subprocess.run([sys.executable, "-c", probe, str(model)], env=env, check=True,
                                    capture_output=True, text=True, cwd=tmp_path).stdout
            digests.setdefault(name, set()).add(digest)
    assert all(len(d) == 1 for d in digests.values()), digests
