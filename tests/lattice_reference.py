"""Plain NumPy references for the lattice kernels (crftk._lattice).

Everything here is written straight from the definitions in csrc/potentials.pxd
and crftk.features.layout (the declared parameter layout), and shares no code
with the kernels:

- the score of a labeling is a sum of weights, one per firing parameter (a state feature's
  times the value of the attribute occurrence it fires from, 1 in a binary corpus);
- brute-force enumeration of all L**T labelings of tiny sentences;
- log-space forward-backward and Viterbi (logaddexp / max) for long ones.

Parameter layout::

    [ state features F | transitions L*L (prev*L+cur) | start L | end L | edge blocks E*L*L ]
"""

import itertools

import numpy as np

from crftk.features.layout import ChainLayout

I32 = np.int32


class Corpus:
    """A corpus in the flat encoding the kernels read, plus the layout offsets."""

    def __init__(self, sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label,
                 n_labels, n_edge_attrs, values=None):
        self.sent_ptr = np.ascontiguousarray(sent_ptr, dtype=I32)
        self.attr_ptr = np.ascontiguousarray(attr_ptr, dtype=I32)
        self.attrs = np.ascontiguousarray(attrs, dtype=I32)
        self.eattr_ptr = np.ascontiguousarray(eattr_ptr, dtype=I32)
        self.eattrs = np.ascontiguousarray(eattrs, dtype=I32)
        self.feat_ptr = np.ascontiguousarray(feat_ptr, dtype=I32)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=I32)
        self.values = None if values is None else np.ascontiguousarray(values, dtype=np.float64)
        self.L = int(n_labels)
        self.E = int(n_edge_attrs)
        self.F = len(self.feat_label)
        self.layout = ChainLayout(self.F, self.L, self.E)
        self.off_trans, self.off_start, self.off_end, self.off_edge, self.P = self.layout.offsets()
        self.S = len(self.sent_ptr) - 1
        self.N = int(self.sent_ptr[-1])

    def arrays(self):
        return (self.sent_ptr, self.attr_ptr, self.attrs, self.eattr_ptr, self.eattrs,
                self.feat_ptr, self.feat_label, self.L, self.E, self.layout.offsets(), self.values)

    def sentences(self):
        """(s, t0, T) for every sentence."""
        for s in range(self.S):
            t0 = int(self.sent_ptr[s])
            yield s, t0, int(self.sent_ptr[s + 1]) - t0

    def token_attrs(self, tok):
        return self.attrs[self.attr_ptr[tok]:self.attr_ptr[tok + 1]]

    def token_occurrences(self, tok):
        """(attribute, value) of each state attribute occurrence of the token."""
        lo, hi = self.attr_ptr[tok], self.attr_ptr[tok + 1]
        vals = np.ones(hi - lo) if self.values is None else self.values[lo:hi]
        return list(zip(self.attrs[lo:hi].tolist(), vals.tolist()))

    def token_eattrs(self, tok):
        return self.eattrs[self.eattr_ptr[tok]:self.eattr_ptr[tok + 1]]

    def features(self, a):
        """(feature index, label) pairs of attribute a."""
        return [(f, int(self.feat_label[f])) for f in range(self.feat_ptr[a], self.feat_ptr[a + 1])]


def random_values(rng, n):
    """n real attribute values: mostly in [-2, 2], some exactly 0, 1 and -1."""
    v = rng.uniform(-2.0, 2.0, n)
    special = rng.random(n)
    v[special < 0.1] = 0.0
    v[(special >= 0.1) & (special < 0.2)] = 1.0
    v[(special >= 0.2) & (special < 0.25)] = -1.0
    return v


def random_corpus(rng, L, lengths, n_attrs=7, complete=False, n_eattrs=0, max_attrs=3,
                  max_eattrs=2, p_no_attr=0.25, valued=False):
    """A random corpus.

    complete: every attribute has a feature for every label; otherwise each
    attribute gets a random (possibly empty) subset of the labels, in random
    order. Tokens draw 0..max_attrs attributes (repeats allowed), and
    0..max_eattrs edge attributes when n_eattrs > 0 (first tokens of sentences
    included: there is no transition into them, so those must be ignored).
    At least one token has no attribute at all. valued: each state attribute occurrence
    gets a random real value (random_values), else the corpus is binary (values None).
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    N = int(lengths.sum())
    sent_ptr = np.concatenate([[0], np.cumsum(lengths)])
    feat_label, feat_ptr = [], [0]
    for _ in range(n_attrs):
        if complete:
            labs = rng.permutation(L)
        else:
            labs = rng.choice(L, size=int(rng.integers(0, L + 1)), replace=False)
        feat_label.extend(int(x) for x in labs)
        feat_ptr.append(len(feat_label))
    bare = int(rng.integers(0, N))
    attrs, attr_ptr = [], [0]
    eattrs, eattr_ptr = [], [0]
    for tok in range(N):
        n = 0 if (tok == bare or rng.random() < p_no_attr) else int(rng.integers(1, max_attrs + 1))
        attrs.extend(int(x) for x in rng.integers(0, n_attrs, n))
        attr_ptr.append(len(attrs))
        if n_eattrs:
            m = int(rng.integers(0, max_eattrs + 1))
            eattrs.extend(int(x) for x in rng.integers(0, n_eattrs, m))
        eattr_ptr.append(len(eattrs))
    values = random_values(rng, len(attrs)) if valued else None
    return Corpus(sent_ptr, attr_ptr, attrs, eattr_ptr, eattrs, feat_ptr, feat_label, L, n_eattrs, values)


# ---------------------------------------------------------------------------
# scores straight from the definition


def ref_score(c, w, t0, y):
    """Score of the labeling y of the sentence starting at token t0 (plain loops)."""
    L = c.L
    total = 0.0
    for t, yt in enumerate(y):
        tok = t0 + t
        for a, v in c.token_occurrences(tok):
            for f, lab in c.features(a):
                if lab == yt:
                    total += v * w[f]
        if t > 0:
            total += w[c.off_trans + y[t - 1] * L + yt]
            for e in c.token_eattrs(tok):
                total += w[c.off_edge + e * L * L + y[t - 1] * L + yt]
    total += w[c.off_start + y[0]]
    total += w[c.off_end + y[-1]]
    return total


def feature_counts(c, t0, Y):
    """phi[m, p]: how often parameter p fires in labeling Y[m] of the sentence at t0.

    Scores are phi @ w; the gradient of log Z is E[phi].
    """
    Y = np.asarray(Y, dtype=np.int64)
    M, T = Y.shape
    L = c.L
    rows = np.arange(M)
    phi = np.zeros((M, c.P))
    for t in range(T):
        tok = t0 + t
        for a, v in c.token_occurrences(tok):
            for f, lab in c.features(a):
                phi[:, f] += v * (Y[:, t] == lab)
        if t > 0:
            pair = Y[:, t - 1] * L + Y[:, t]
            phi[rows, c.off_trans + pair] += 1.0
            for e in c.token_eattrs(tok):
                phi[rows, c.off_edge + e * L * L + pair] += 1.0
    phi[rows, c.off_start + Y[:, 0]] += 1.0
    phi[rows, c.off_end + Y[:, -1]] += 1.0
    return phi


def all_labelings(L, T):
    """All L**T labelings in lexicographic order (row index = base-L number)."""
    return np.array(list(itertools.product(range(L), repeat=T)), dtype=np.int64).reshape(-1, T)


def labeling_index(y, L):
    idx = 0
    for v in y:
        idx = idx * L + int(v)
    return idx


def logsumexp(x):
    x = np.asarray(x, dtype=np.float64)
    m = x.max()
    return float(m + np.log(np.exp(x - m).sum()))


class Enumeration:
    """Every labeling of one tiny sentence with its feature counts."""

    def __init__(self, c, t0, T):
        self.t0, self.T = t0, T
        self.Y = all_labelings(c.L, T)
        self.phi = feature_counts(c, t0, self.Y)

    def scores(self, w):
        return self.phi @ w

    def logz(self, w):
        return logsumexp(self.scores(w))

    def probs(self, w):
        sc = self.scores(w)
        p = np.exp(sc - sc.max())
        return p / p.sum()

    def node_marginals(self, w, L):
        p = self.probs(w)
        marg = np.zeros((self.T, L))
        for t in range(self.T):
            marg[t] = np.bincount(self.Y[:, t], weights=p, minlength=L)
        return marg

    def expected_counts(self, w):
        return self.probs(w) @ self.phi


# ---------------------------------------------------------------------------
# log-space dynamic programming (for sentences too long to enumerate)


def log_potentials(c, w, t0, T):
    """state[t, y] (start/end included) and trans[t] (L x L, into token t; trans[0] unused)."""
    L = c.L
    state = np.zeros((T, L))
    for t in range(T):
        for a, v in c.token_occurrences(t0 + t):
            for f, lab in c.features(a):
                state[t, lab] += v * w[f]
    state[0] += w[c.off_start:c.off_start + L]
    state[T - 1] += w[c.off_end:c.off_end + L]
    base = w[c.off_trans:c.off_trans + L * L].reshape(L, L)
    trans = np.repeat(base[None], T, axis=0)
    for t in range(1, T):
        for e in c.token_eattrs(t0 + t):
            trans[t] += w[c.off_edge + e * L * L:c.off_edge + (e + 1) * L * L].reshape(L, L)
    return state, trans


def log_forward_backward(state, trans):
    """(log Z, node marginals [T, L], edge marginals [T, L, L] with [0] zero)."""
    T, L = state.shape
    la = np.empty((T, L))
    lb = np.zeros((T, L))
    la[0] = state[0]
    for t in range(1, T):
        la[t] = np.logaddexp.reduce(la[t - 1][:, None] + trans[t], axis=0) + state[t]
    logz = float(np.logaddexp.reduce(la[T - 1]))
    for t in range(T - 1, 0, -1):
        lb[t - 1] = np.logaddexp.reduce(trans[t] + (state[t] + lb[t])[None, :], axis=1)
    marg = np.exp(la + lb - logz)
    xi = np.zeros((T, L, L))
    for t in range(1, T):
        xi[t] = np.exp(la[t - 1][:, None] + trans[t] + (state[t] + lb[t])[None, :] - logz)
    return logz, marg, xi


def log_viterbi_score(state, trans):
    T, L = state.shape
    d = state[0].copy()
    for t in range(1, T):
        d = (d[:, None] + trans[t]).max(axis=0) + state[t]
    return float(d.max())


def expected_counts_from_marginals(c, t0, T, marg, xi):
    """E[phi] of one sentence from its node and edge marginals."""
    L = c.L
    g = np.zeros(c.P)
    for t in range(T):
        for a, v in c.token_occurrences(t0 + t):
            for f, lab in c.features(a):
                g[f] += v * marg[t, lab]
    g[c.off_start:c.off_start + L] += marg[0]
    g[c.off_end:c.off_end + L] += marg[T - 1]
    for t in range(1, T):
        g[c.off_trans:c.off_trans + L * L] += xi[t].ravel()
        for e in c.token_eattrs(t0 + t):
            g[c.off_edge + e * L * L:c.off_edge + (e + 1) * L * L] += xi[t].ravel()
    return g
