"""The parameter vector of a linear-chain CRF, declared once.

    [ state features F | transitions L*L (prev*L + cur) | start L | end L | edge blocks E*L*L ]

F state features (attribute, label) pairs of a feature space, L labels, E edge
attributes (CRF++ ``B`` lines with macros: one L*L block each). Everything that
reads or writes a weight vector by part (the kernels' offsets, counting features,
pinning constraints, dumping a model) asks a ChainLayout.
"""

from dataclasses import dataclass

import numpy as np

PARTS = ("state", "trans", "start", "end", "edge")


@dataclass(frozen=True)
class ChainLayout:
    n_features: int
    n_labels: int
    n_edge_attrs: int = 0

    @property
    def n_params(self):
        L = self.n_labels
        return self.n_features + L * L + 2 * L + self.n_edge_attrs * L * L

    @property
    def state(self):
        return slice(0, self.n_features)

    @property
    def trans(self):
        return slice(self.n_features, self.n_features + self.n_labels ** 2)

    @property
    def start(self):
        t = self.trans.stop
        return slice(t, t + self.n_labels)

    @property
    def end(self):
        s = self.start.stop
        return slice(s, s + self.n_labels)

    @property
    def edge(self):
        return slice(self.end.stop, self.n_params)

    def __getitem__(self, part):
        """The slice of a part by name ("state", "trans", "start", "end", "edge")."""
        if part not in PARTS:
            raise KeyError(part)
        return getattr(self, part)

    def offsets(self):
        """(trans, start, end, edge, n_params): where each part begins, for the kernels."""
        return self.trans.start, self.start.start, self.end.start, self.edge.start, self.n_params

    def transitions(self, w):
        """The L x L transition matrix in w (a view)."""
        return np.asarray(w)[self.trans].reshape(self.n_labels, self.n_labels)

    def edge_blocks(self, w):
        """The E x L x L blocks of observation-conditioned transitions in w (a view)."""
        L = self.n_labels
        return np.asarray(w)[self.edge].reshape(self.n_edge_attrs, L, L)


@dataclass(frozen=True)
class PairLayout:
    """The parameters of a factorial CRF's pair factor (features.space.PairSpace):
    the weights of its (attribute, label pair) features, nothing else."""

    n_features: int

    @property
    def n_params(self):
        return self.n_features

    @property
    def state(self):
        return slice(0, self.n_features)

    def __getitem__(self, part):
        if part != "state":
            raise KeyError(part)
        return self.state
