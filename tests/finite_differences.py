"""Finite-difference checks of gradients shared by the objective tests (on pytest's pythonpath)."""

import numpy as np
import pytest


def fd_check_piecewise(obj, w, competitor, n_coords=60, eps=1e-6, seed=0):
    """Central differences against the gradient of a piecewise-smooth objective (MCE, MCE-F), on
    coordinates where the competitors (argmaxes, ``competitor(w)``) stay put and no kink lies
    in [w - eps, w + eps]; at least 80% of the coordinates tried must be checked."""
    rng = np.random.default_rng(seed)
    f0, g = obj(w)
    bad0 = competitor(w)
    coords = rng.choice(w.size, min(n_coords, w.size), replace=False)
    checked = 0
    for i in coords:
        e = np.zeros_like(w)
        e[i] = eps
        if not (np.array_equal(competitor(w + e), bad0) and np.array_equal(competitor(w - e), bad0)):
            continue
        fp, fm = obj(w + e)[0], obj(w - e)[0]
        if abs((fp - f0) - (f0 - fm)) > 1e-10 * (1 + abs(f0)):
            continue                                   # a kink inside [w - eps, w + eps]
        fd = (fp - fm) / (2 * eps)
        assert fd == pytest.approx(g[i], rel=1e-5, abs=1e-6), f"coordinate {i}"
        checked += 1
    assert checked >= 0.8 * len(coords)
