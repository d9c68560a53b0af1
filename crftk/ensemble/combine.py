"""The four ways of combining a bag's chains (Sutton, Sindelar & McCallum 2006, section 4).

Every member is a first-order chain CRF over the same labels. On a batch of
sentences each member gives its tables (``member_tables``: log state potentials
[N, L], start and end weights included, and log transitions [L, L] or [N, L, L]);
``Evidence`` holds them for all members and, when a mixture or a transition
product needs them, the members' node marginals and transition distributions
p_i(y_t | y_{t-1}, x) (crftk._combine.conditionals). ``combine`` turns evidence
and weights into one chain, given by its tables, that crftk._chain decodes:

- ``seq-poe``: the weighted sum of the members' tables, the CRF whose weights are the
  weighted average of theirs (p(y|x) proportional to prod_i p_i(y|x)^l_i);
- ``seq-mixture``: p_APPX of their eq. 4, the chain of the mixture's pairwise marginals
  (its node marginals are exactly the mixture's); decoded by Viterbi, or with
  ``decode="max-marginal"`` token by token from the mixed node marginals (eq. 5);
- ``trans-mixture``: sum_i l_i p_i(y_t | y_{t-1}, x) (eq. 8);
- ``trans-poe``: prod_i p_i(y_t | y_{t-1}, x)^l_i renormalized per transition (eq. 9).
"""

import numpy as np

from crftk import _chain, _combine
from crftk.errors import CrftkError
from crftk.params import COMBINATIONS as METHODS
MIXTURES = ("seq-mixture", "trans-mixture")
DECODINGS = ("viterbi", "max-marginal")
_KERNEL_METHOD = {"seq-mixture": _combine.SEQ_MIXTURE, "trans-mixture": _combine.TRANS_MIXTURE,
                  "trans-poe": _combine.TRANS_POE}


def member_tables(model, corpus, n_threads=1):
    """(state [N, L], trans [L, L] or [N, L, L]): a chain model's log tables on an encoded corpus."""
    space, w = model.space, model.weights
    inf = model.structure.bind(corpus, n_threads)
    state = inf.state_matrix(w)
    lay = space.layout()
    trans = np.array(lay.transitions(w))
    if space.n_edge_attrs:
        N, L = state.shape
        ptr = np.asarray(corpus.eattr_ptr, dtype=np.int64)
        counts = np.diff(ptr)
        per_token = np.broadcast_to(trans, (N, L, L)).copy()
        if counts.sum():
            owner = np.repeat(np.arange(N), counts)
            np.add.at(per_token, owner, lay.edge_blocks(w)[np.asarray(corpus.eattrs, dtype=np.int64)])
        trans = per_token
    return state, trans


class Evidence:
    """What the members say about one batch: their tables, and (computed once, when asked)
    their log Z, node marginals and transition distributions."""

    def __init__(self, sent_ptr, tables, n_threads=1):
        self.sent_ptr = np.ascontiguousarray(sent_ptr, dtype=np.int64)
        self.tables = list(tables)
        self.n_threads = max(1, int(n_threads))
        self._conditionals = None

    @classmethod
    def of(cls, members, sentences, n_threads=1):
        """Evidence of member models on sentences (each encodes them with its own feature space);
        also returns the first member's encoded corpus (its gold labels, its sentence slices)."""
        return cls.of_corpora(members, [m.space.encode(sentences) for m in members], n_threads)

    @classmethod
    def of_corpora(cls, members, corpora, n_threads=1):
        """The same from each member's encoded corpus of one batch."""
        tables = [member_tables(m, c, n_threads) for m, c in zip(members, corpora)]
        return cls(corpora[0].sent_ptr, tables, n_threads), corpora[0]

    @property
    def n_members(self):
        return len(self.tables)

    @property
    def n_labels(self):
        return self.tables[0][0].shape[1]

    @property
    def n_tokens(self):
        return int(self.sent_ptr[-1])

    def conditionals(self):
        """(log Z [M, S], node marginals [M, N, L], transition distributions [M, N, L, L])."""
        if self._conditionals is None:
            out = [_combine.conditionals(self.sent_ptr, s, t, self.n_threads) for s, t in self.tables]
            self._conditionals = tuple(np.stack(x) for x in zip(*out))
        return self._conditionals

    def sequence_logprob(self, labels):
        """log p_i(y | x) [M, S] of a labeling (label ids per token) under each member."""
        y = np.asarray(labels, dtype=np.int64)
        logz = self.conditionals()[0]
        sid = np.repeat(np.arange(self.sent_ptr.size - 1), np.diff(self.sent_ptr))
        inner = np.ones(y.size, dtype=bool)
        inner[self.sent_ptr[:-1]] = False
        out = []
        for (state, trans), lz in zip(self.tables, logz):
            score = state[np.arange(y.size), y]
            t = np.flatnonzero(inner)
            tr = trans[y[t - 1], y[t]] if trans.ndim == 2 else trans[t, y[t - 1], y[t]]
            score = score.copy()
            score[t] += tr
            out.append(np.bincount(sid, weights=score, minlength=lz.size) - lz)
        return np.array(out)


class Combined:
    """One chain that stands for the combination: decode it, take its marginals or n-best."""

    def __init__(self, sent_ptr, state, trans, n_threads=1, node=None):
        self.sent_ptr, self.state, self.trans = sent_ptr, state, trans
        self.n_threads = n_threads
        self._node = node          # max-marginal decoding: the node marginals it maximizes

    def best(self):
        """(label ids [N], their log scores in the combined chain [S])."""
        if self._node is None:
            return _chain.viterbi(self.sent_ptr, self.state, self.trans, self.n_threads)
        pred = np.argmax(self._node, axis=1).astype(np.int32)
        return pred, self.score(pred)

    def score(self, labels):
        """Log score of a labeling in the combined chain, per sentence."""
        y = np.asarray(labels, dtype=np.int64)
        sp = self.sent_ptr
        sid = np.repeat(np.arange(sp.size - 1), np.diff(sp))
        score = self.state[np.arange(y.size), y].copy()
        t = np.flatnonzero(np.isin(np.arange(y.size), sp[:-1], invert=True))
        score[t] += self.trans[y[t - 1], y[t]] if self.trans.ndim == 2 else self.trans[t, y[t - 1], y[t]]
        return np.bincount(sid, weights=score, minlength=sp.size - 1)

    def marginals(self):
        """(node marginals [N, L], log Z [S]) of the combined chain."""
        logz, node, _ = _chain.forward_backward(self.sent_ptr, self.state, self.trans, self.n_threads)
        return node, logz

    def nbest(self, k):
        return _chain.nbest(self.sent_ptr, self.state, self.trans, k, self.n_threads)


def check_weights(weights, n_members, where=None):
    """Non-negative finite weights, one per member, summing to 1 after normalization."""
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if w.size != n_members:
        raise CrftkError(f"{w.size} weights for {n_members} bags", *(where or ()))
    if not np.all(np.isfinite(w)) or np.any(w < 0) or not np.any(w > 0):
        raise CrftkError("bag weights must be finite, non-negative and not all 0", *(where or ()))
    w = w / w.max()             # first: the sum of weights near the float maximum overflows
    return w / w.sum()


def combine(evidence, method, weights, decode="viterbi"):
    """The combined chain of ``method`` (METHODS) with these member weights."""
    if method not in METHODS:
        raise CrftkError(f"unknown combination {method!r}: choose one of {', '.join(METHODS)}")
    if decode not in DECODINGS:
        raise CrftkError(f"unknown decoding {decode!r}: choose viterbi or max-marginal")
    if decode == "max-marginal" and method != "seq-mixture":
        raise CrftkError("max-marginal decoding is an option of seq-mixture only")
    lam = check_weights(weights, evidence.n_members)
    sp, nt = evidence.sent_ptr, evidence.n_threads
    if method == "seq-poe":
        state = sum(l * s for l, (s, _) in zip(lam, evidence.tables))
        shapes = {t.ndim for _, t in evidence.tables}
        trans = sum(l * t for l, (_, t) in zip(lam, evidence.tables))     # broadcasts [L,L] + [N,L,L]
        if shapes == {2}:
            trans = np.asarray(trans)
        return Combined(sp, state, trans, nt)
    _, node, cond = evidence.conditionals()
    state, trans = _combine.combine(sp, node, cond, lam, _KERNEL_METHOD[method], nt)
    mixed = None
    if decode == "max-marginal":
        mixed = np.tensordot(lam, node, axes=1)
    return Combined(sp, state, trans, nt, node=mixed)
