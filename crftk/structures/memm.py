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


class MEMMObjective:
    """Negative log-likelihood of the gold labels, each given the gold previous label, plus
    c2*||w||^2; callable (w) -> (value, gradient) like LogLikelihood."""

    def __init__(self, space, corpus, *, c2=1.0, frozen=None):
        if corpus.labels is None:
            raise CrftkError("training data has no gold label column")
        if corpus.eattrs.size:
            raise CrftkError("MEMMs do not support transition templates with macros (B lines "
                             "with %x); use a plain B line")
        self.space, self.corpus = space, corpus
        self.lattices = space.lattices(corpus)
        self.c2 = float(c2)
        self.frozen = np.zeros(space.n_params, dtype=bool) if frozen is None else frozen.copy()
        self.frozen[space.layout()["end"]] = True
        self.n_params = space.n_params
        self.n_evals = 0
        self.first, self.inner = _steps(space, corpus)
        self.y = corpus.labels.astype(np.int64)
        # every (token, state feature) pair of the corpus, for the gradient of state weights
        a_tok = np.repeat(np.arange(corpus.n_tokens), np.diff(corpus.attr_ptr))
        counts = np.diff(space.feat_ptr)[corpus.attrs]
        self.f_tok = np.repeat(a_tok, counts)
        starts = np.repeat(space.feat_ptr[corpus.attrs].astype(np.int64), counts)
        self.f_idx = starts + (np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts))
        self.f_lab = space.feat_label[self.f_idx].astype(np.int64)

    def logits(self, w, S=None):
        """Scores of every label at every token given the gold previous label."""
        lay = self.space.layout()
        L = self.space.n_labels
        if S is None:
            S = self.lattices.state_matrix(w)
        S = S.copy()
        S[self.corpus.sent_ptr[1:] - 1] -= w[lay["end"]]          # no end weights in an MEMM
        trans = w[lay["trans"]].reshape(L, L)
        S[self.inner] += trans[self.y[self.inner - 1]]
        return S

    def __call__(self, w):
        self.n_evals += 1
        space, y = self.space, self.y
        lay = space.layout()
        L = space.n_labels
        logp = _log_softmax(self.logits(w))
        loss = -float(logp[np.arange(y.size), y].sum())
        D = np.exp(logp)
        D[np.arange(y.size), y] -= 1.0
        g = np.zeros(space.n_params)
        g[:space.n_features] = np.bincount(self.f_idx, weights=D[self.f_tok, self.f_lab],
                                           minlength=space.n_features)
        prev = y[self.inner - 1]
        g[lay["trans"]] = np.bincount((prev[:, None] * L + np.arange(L)).ravel(),
                                      weights=D[self.inner].ravel(), minlength=L * L)
        g[lay["start"]] = D[self.first].sum(axis=0)
        if self.c2 > 0:
            free = w[~self.frozen]
            loss += self.c2 * float(free @ free)
            g += 2.0 * self.c2 * w
        g[self.frozen] = 0.0
        return loss, g


def viterbi(space, corpus, w):
    """Best labeling under the MEMM: Viterbi over local log-probabilities, all sentences at once."""
    lay = space.layout()
    L = space.n_labels
    S = space.lattices(corpus).state_matrix(w)
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
