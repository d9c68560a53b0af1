"""Second-order chain models through label pairs (Sha & Pereira 2003).

The label of token i becomes the pair (tag of i-1, tag of i), with ``<s>`` as
the tag before a sentence, so a first-order model over pairs is a second-order
model over tags. Pair transitions must agree on the shared tag: (a, b) may
only be followed by (b, c); the others are pinned at FORBIDDEN like hard
constraints. Features are factored: every predicate is paired with the label
pair and, as a backoff, with the current tag alone. The backoff weights are
tied parameters: the weight the kernels see for (attribute, (a, b)) is its
own parameter plus the backoff parameter of (attribute, b). Decoding returns
plain tags.
"""

import numpy as np

from crftk.conll import Sentence
from crftk.structures.constraints import allowed, pinned_mask
from crftk.errors import CrftkError, shown

BOS = "<s>"
SEP = "|"


def pair_name(prev, cur):
    return prev + SEP + cur


def current_tag(pair):
    return pair.split(SEP, 1)[1]


def pair_sentences(sentences, label_col):
    """The sentences with the label column replaced by (previous tag, tag) pairs."""
    for s in sentences:
        rows, prev = [], BOS
        for i, row in enumerate(s.rows):
            tag = row[label_col]
            if SEP in tag or tag == BOS:
                raise CrftkError(f"label {shown(tag)} cannot be used with --order 2 (it contains {SEP!r} "
                                 f"or is {BOS})", s.source, s.line + i if s.line else None)
            new = list(row)
            new[label_col] = pair_name(prev, tag)
            rows.append(new)
            prev = tag
        yield Sentence(rows, s.doc, s.line, s.source)


def pinned(space, scheme="none"):
    """Mask of the pair-model weights pinned at FORBIDDEN: transitions that disagree on the
    shared tag, pairs starting with <s> anywhere but first, and the tag constraints."""
    pairs = [p.split(SEP, 1) for p in space.labels]
    prev = np.array([a for a, _ in pairs], dtype=object)
    cur = np.array([b for _, b in pairs], dtype=object)
    trans_ok = cur[:, None] == prev[None, :]
    start_ok = prev == BOS
    end_ok = np.ones(len(pairs), dtype=bool)
    if scheme != "none":
        tags = sorted(set(cur.tolist()))
        t_ok, t_start, t_end = allowed(tags, scheme)
        ix = {t: i for i, t in enumerate(tags)}
        ci = np.array([ix[c] for c in cur])
        trans_ok &= t_ok[ci[:, None], ci[None, :]]
        start_ok &= t_start[ci]
        end_ok &= t_end[ci]
    return pinned_mask(space, trans_ok, start_ok, end_ok)


def backoff_index(space):
    """For every state feature, the index of its (attribute, current tag) backoff parameter."""
    tags = sorted({current_tag(p) for p in space.labels})
    tag_of_label = np.array([tags.index(current_tag(p)) for p in space.labels], dtype=np.int64)
    attr = np.repeat(np.arange(space.n_attrs, dtype=np.int64), np.diff(space.feat_ptr))
    keys = attr * len(tags) + tag_of_label[space.feat_label]
    uniq, index = np.unique(keys, return_inverse=True)
    return index.reshape(-1), uniq.size


class Tied:
    """An objective over tied parameters theta = [w-space parameters, backoff parameters].

    ``objective`` must carry no penalty (c2=0): the L2 term c2*||theta||^2 is
    added here, on the parameters actually learned. ``frozen`` (w-space) are
    held and left out of the penalty.
    """

    def __init__(self, objective, index, n_backoff, *, c2=0.0, frozen=None):
        self.objective, self.index, self.n_backoff = objective, index, n_backoff
        self.n_w = objective.n_params
        self.c2 = float(c2)
        self.free = np.ones(self.n_w + n_backoff, dtype=bool)
        if frozen is not None:
            self.free[:self.n_w] = ~frozen

    @property
    def n_evals(self):
        return self.objective.n_evals

    def expand(self, theta):
        w = theta[:self.n_w].copy()
        w[:self.index.size] += theta[self.n_w:][self.index]
        return w

    def __call__(self, theta):
        f, g_w = self.objective(self.expand(theta))
        g = np.zeros_like(theta)
        g[:self.n_w] = g_w
        g[self.n_w:] = np.bincount(self.index, weights=g_w[:self.index.size], minlength=self.n_backoff)
        if self.c2 > 0:
            free = theta[self.free]
            f += self.c2 * float(free @ free)
            g[self.free] += 2.0 * self.c2 * free
        g[~self.free] = 0.0
        return f, g


def tag_probabilities(pair_marginals, labels):
    """Marginals of tags [N, T] from marginals of pairs [N, P], and the tag names."""
    tags = sorted({current_tag(p) for p in labels})
    to_tag = np.zeros((len(labels), len(tags)))
    for i, p in enumerate(labels):
        to_tag[i, tags.index(current_tag(p))] = 1.0
    return pair_marginals @ to_tag, tags
