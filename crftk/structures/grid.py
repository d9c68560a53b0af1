"""Factorial grids (C label chains coupled at every token): inference from numpy potentials.

The front of the kernels in csrc/messages.pxd (crftk._messages). One grid is given by, per
chain c of n_c labels, log potentials

- ``node[c]``: [T, n_c], label i of chain c at token t;
- ``trans[c]``: [n_c, n_c], chain c has i at t-1 and j at t (the same at every token);
- ``pair[c]`` (c < C-1): [T, n_c, n_c+1], chain c has a and chain c+1 has b at t.

A batch is the same with the tokens of every grid one after the other and
``sent_ptr`` marking where each starts (as crftk._product takes product chains).

- :func:`exact`, :func:`exact_batch`: log Z, marginals and the best labeling over the joint
  labels (cost grows with prod n_c);
- :func:`bp`, :func:`bp_batch`: loopy sum-product (beliefs, Bethe log Z) with the ``trp``
  or ``random`` schedule; :func:`bp_max`, :func:`bp_max_batch`: max-product decoding.
"""

from dataclasses import dataclass

import numpy as np

from crftk import _messages

#: Schedules of loopy belief propagation, by name.
SCHEDULES = {"trp": 0, "random": 1}


@dataclass
class Marginals:
    """log Z (exact, or the Bethe approximation of BP) and the marginals (or beliefs):
    ``node[c]`` [T, n_c], ``edge[c]`` [n_c, n_c] summed over tokens (over every grid of a
    batch), ``pair[c]`` [T, n_c, n_c+1]; for BP, ``sweeps`` and ``converged`` per grid."""
    logz: np.ndarray
    node: list
    edge: list
    pair: list
    sweeps: np.ndarray = None
    converged: np.ndarray = None


def sizes_of(node):
    """Labels per chain, from the node tables."""
    return np.array([np.shape(a)[-1] for a in node], dtype=np.int32)


def _one(node):
    return np.array([0, len(node[0])], dtype=np.int64)


def exact_batch(sent_ptr, node, trans, pair, n_threads=1):
    """(Marginals, labels per chain [N], best scores [S]) of every grid of a batch."""
    r = _messages.exact(sizes_of(node), sent_ptr, node, trans, pair, n_threads)
    return Marginals(r["logz"], r["node"], r["edge"], r["pair"]), r["labels"], r["score"]


def exact(node, trans, pair):
    """(Marginals with a scalar logz, labels per chain [T], best score) of one grid."""
    m, labels, score = exact_batch(_one(node), node, trans, pair)
    m.logz = float(m.logz[0])
    return m, labels, float(score[0])


def _schedule(name):
    try:
        return SCHEDULES[name]
    except KeyError:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, not {name!r}") from None


def bp_batch(sent_ptr, node, trans, pair, schedule="trp", tol=1e-3, max_sweeps=100, seed=0, n_threads=1):
    """Loopy sum-product over every grid of a batch: Marginals of beliefs, with the Bethe log Z,
    the sweeps run and whether each grid converged (no message changed by more than ``tol``)."""
    r = _messages.bp(sizes_of(node), sent_ptr, node, trans, pair, _schedule(schedule), tol, max_sweeps,
                     seed, n_threads)
    return Marginals(r["logz"], r["node"], r["edge"], r["pair"], r["sweeps"], r["converged"])


def bp(node, trans, pair, schedule="trp", tol=1e-3, max_sweeps=100, seed=0):
    """Loopy sum-product over one grid (Marginals with a scalar Bethe logz, sweeps, converged)."""
    m = bp_batch(_one(node), node, trans, pair, schedule, tol, max_sweeps, seed)
    m.logz, m.sweeps, m.converged = float(m.logz[0]), int(m.sweeps[0]), bool(m.converged[0])
    return m


def bp_max_batch(sent_ptr, node, trans, pair, schedule="trp", tol=1e-3, max_sweeps=100, seed=0, n_threads=1):
    """Loopy max-product decoding of every grid: (labels per chain [N], scores [S], sweeps [S],
    converged [S])."""
    r = _messages.bp_max(sizes_of(node), sent_ptr, node, trans, pair, _schedule(schedule), tol, max_sweeps,
                         seed, n_threads)
    return r["labels"], r["score"], r["sweeps"], r["converged"]


def bp_max(node, trans, pair, schedule="trp", tol=1e-3, max_sweeps=100, seed=0):
    """(labels per chain [T], score, sweeps, converged) of one grid by loopy max-product."""
    labels, score, sweeps, conv = bp_max_batch(_one(node), node, trans, pair, schedule, tol, max_sweeps, seed)
    return labels, float(score[0]), int(sweeps[0]), bool(conv[0])
