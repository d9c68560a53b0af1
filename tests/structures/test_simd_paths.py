"""The kernels' vector builds (vecmath.h, maxplus.h: baseline, AVX2, AVX-512, picked at run
time) give the same bits: each process below runs the widest build its processor has, or the one
CRFTK_SIMD caps it to, and all must print the same digests. On a processor without AVX-512 two of
the runs take the same path, and the check is only weaker."""

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import hashlib
import numpy as np
from crftk import _messages
from crftk._lattice import chain_products
from crftk.structures import grid

def digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]

rng = np.random.default_rng(7)
out = []
for n in (1, 2, 3, 5, 7, 8, 9, 12, 16, 23, 31, 33, 44, 45, 48, 49, 64, 70, 97):
    M = rng.uniform(0, 1, (n, n)) * np.exp(rng.uniform(-30, 5, (n, n)))
    x = rng.uniform(0, 1, n) * np.exp(rng.uniform(-30, 5, n))
    out.append(("products", n, digest(*chain_products(M, x))))
x = np.concatenate([-rng.uniform(0, 708, 5003), -rng.exponential(1e-3, 1001), [0.0, -0.0, -708.5, -np.inf]])
out.append(("exp", digest(_messages.vector_exp(x))))
p = np.concatenate([rng.uniform(0, 1, 5003), np.exp(-rng.uniform(0, 700, 1001)), [1.0, 0.0, 1e-310, 2.0]])
with np.errstate(divide="ignore"):
    out.append(("log", digest(_messages.vector_log(p))))
for sizes, T in (((44, 3), 9), ((5, 7, 3), 6), ((13, 2), 1), ((50, 9), 4)):
    node = [rng.normal(scale=2.0, size=(T, n)) for n in sizes]
    trans = [rng.normal(scale=2.0, size=(n, n)) for n in sizes]
    pair = [rng.normal(scale=2.0, size=(T, sizes[c], sizes[c + 1])) for c in range(len(sizes) - 1)]
    for schedule in ("trp", "random"):
        m = grid.bp(node, trans, pair, schedule=schedule, tol=1e-6, max_sweeps=50, seed=3)
        out.append(("bp", sizes, schedule, m.sweeps, digest(np.float64(m.logz), *m.node, *m.edge, *m.pair)))
        labels, score, sweeps, conv = grid.bp_max_batch(np.array([0, T]), node, trans, pair, schedule=schedule,
                                                        tol=1e-6, max_sweeps=50, seed=3)
        out.append(("bp_max", sizes, schedule, digest(*labels, score)))
    m, labels, score = grid.exact(node, trans, pair)
    out.append(("exact", sizes, digest(np.float64(m.logz), *m.node, *m.edge, *m.pair, *labels)))
for line in out:
    print(line)
"""


def run_with(cap):
    env = dict(os.environ)
    env.pop("CRFTK_SIMD", None)
    if cap is not None:
        env["CRFTK_SIMD"] = cap
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.parametrize("cap", ["avx2", "base"])
def test_every_vector_build_gives_the_widest_builds_bits(cap):
    widest = run_with(None)
    assert len(widest) > 40
    assert run_with(cap) == widest
