"""Maximum-entropy Markov models over the CRF's feature space (McCallum et al. 2000).

An MEMM normalizes each step locally: p(y_t | y_{t-1}, x) is a softmax over
y_t of the state potential of y_t at t plus the transition weight from
y_{t-1} (the start weights at t = 0; the end weights are unused and stay 0).
Training maximizes the likelihood of each gold label given the gold previous
one, so it needs no forward-backward; decoding is Viterbi over the locally
normalized log-probabilities. Sha & Pereira (2003) compare it with CRFs
trained on the same features: the label-bias problem makes it worse.
"""

import numpy as np

from crftk.errors import CrftkError
from crftk.structures.base import Inference
from crftk.structures.chain import LabelChain, chain_lattices


def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    z = x - m
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def _steps(space, corpus):
    """Previous-label index structures of a corpus: first tokens and the others."""
    first = corpus.sent_ptr[:-1].astype(np.int64)
    inner = np.ones(corpus.n_tokens, dtype=bool)
    inner[first] = False
    return first, np.flatnonzero(inner)


class MEMM(LabelChain):
    """A maximum-entropy Markov model on a chain CRF's feature space and parameter layout."""

    name = "memm"
    noun = record_noun = "an MEMM"
    record = {"order": 1, "model_type": "memm"}

    def fixed(self, template):
        fixed = super().fixed(template)
        fixed[self.layout.end] = True           # an MEMM has no end weights
        return fixed

    def bind(self, corpus, n_threads=1):
        return MEMMInference(self, corpus, n_threads)

    @classmethod
    def check_space(cls, space, bad):
        if any(cl.line.macros for cl in space.bigram_lines):
            # train refuses these; a file that has one was not written by crftk
            raise bad("an MEMM whose template has a B line with macros")


class MEMMInference(Inference):
    """Local likelihood and Viterbi decoding of an MEMM over an encoded corpus."""

    def __init__(self, structure, corpus, n_threads=1):
        if corpus.eattrs.size:
            raise CrftkError("MEMMs do not support transition templates with macros (B lines "
                             "with %x); use a plain B line")
        super().__init__(structure, corpus, n_threads)
        space = self.space
        self.lattices = chain_lattices(space, corpus)
        self.first, self.inner = _steps(space, corpus)
        self._state_pairs = None

    def _pairs(self):
        """Every (token, state feature) pair of the corpus, for the gradient of state weights, and
        the value of the attribute occurrence it came from (None: all 1)."""
        if self._state_pairs is None:
            space, corpus = self.space, self.corpus
            a_tok = np.repeat(np.arange(corpus.n_tokens), np.diff(corpus.attr_ptr))
            counts = np.diff(space.feat_ptr)[corpus.attrs]
            f_tok = np.repeat(a_tok, counts)
            starts = np.repeat(space.feat_ptr[corpus.attrs].astype(np.int64), counts)
            f_idx = starts + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
            f_val = None if corpus.values is None else np.repeat(corpus.values, counts)
            self._state_pairs = f_tok, f_idx, space.feat_label[f_idx].astype(np.int64), f_val
        return self._state_pairs

    def logits(self, w, y, S=None):
        """Scores of every label at every token given the previous label of the labeling y."""
        lay = self.structure.layout
        L = self.space.n_labels
        if S is None:
            S = self.lattices.state_matrix(w)
        S = S.copy()
        S[self.corpus.sent_ptr[1:] - 1] -= w[lay.end]          # no end weights in an MEMM
        trans = w[lay.trans].reshape(L, L)
        S[self.inner] += trans[y[self.inner - 1]]
        return S

    def loglik(self, w, labels, curvature=None):
        """Negative log-likelihood of each label given the previous one, and its gradient."""
        if curvature is not None:
            raise CrftkError("the diagonal curvature is computed for CRFs only, not MEMMs")
        space, lay = self.space, self.structure.layout
        y = np.asarray(labels, dtype=np.int64)
        L = space.n_labels
        f_tok, f_idx, f_lab, f_val = self._pairs()
        logp = _log_softmax(self.logits(w, y))
        loss = -float(logp[np.arange(y.size), y].sum())
        D = np.exp(logp)
        D[np.arange(y.size), y] -= 1.0
        g = np.zeros(space.n_params)
        scattered = D[f_tok, f_lab] if f_val is None else D[f_tok, f_lab] * f_val
        g[:space.n_features] = np.bincount(f_idx, weights=scattered, minlength=space.n_features)
        prev = y[self.inner - 1]
        g[lay.trans] = np.bincount((prev[:, None] * L + np.arange(L)).ravel(),
                                   weights=D[self.inner].ravel(), minlength=L * L)
        g[lay.start] = D[self.first].sum(axis=0)
        return loss, g

    def best(self, w):
        """Best labeling of every token; MEMMs give no sequence scores (None)."""
        return viterbi(self.space, self.corpus, w), None

    def marginals(self, w):
        raise CrftkError("n-best lists and marginals are computed for CRFs only, not MEMMs")

    def nbest(self, w, k):
        self.marginals(w)


def viterbi(space, corpus, w):
    """Best labeling under the MEMM: Viterbi over local log-probabilities, all sentences at once."""
    lay = space.layout()
    L = space.n_labels
    S = chain_lattices(space, corpus).state_matrix(w)
    ends = corpus.sent_ptr[1:] - 1
    S[ends] -= w[lay["end"]]
    trans = w[lay["trans"]].reshape(L, L)
    starts = corpus.sent_ptr[:-1].astype(np.int64)
    lengths = np.diff(corpus.sent_ptr).astype(np.int64)
    order = np.argsort(-lengths, kind="stable")               # longest first: active sentences are a prefix
    starts, lengths = starts[order], lengths[order]
    delta = _log_softmax(S[starts])                            # [S, L]
    back = []
    for t in range(1, int(lengths.max()) if lengths.size else 0):
        n = int((lengths > t).sum())                           # sentences longer than t
        local = _log_softmax(S[starts[:n] + t][:, None, :] + trans[None, :, :])   # [n, prev, cur]
        cand = delta[:n, :, None] + local
        bp = cand.argmax(axis=1)
        delta = np.concatenate([cand.max(axis=1), delta[n:]])
        back.append(bp)
    out = np.zeros(corpus.n_tokens, dtype=np.int32)
    cur = delta.argmax(axis=1)
    for i in range(order.size):
        T = int(lengths[i])
        y = int(cur[i])
        out[starts[i] + T - 1] = y
        for t in range(T - 1, 0, -1):
            y = int(back[t - 1][i, y])
            out[starts[i] + t - 1] = y
    return out
