"""Second-order chain models through label pairs (Sha & Pereira 2003).

The label of token i becomes the pair (tag of i-1, tag of i), with ``<s>`` as
the tag before a sentence, so a first-order model over pairs is a second-order
model over tags. Pair transitions must agree on the shared tag: (a, b) may
only be followed by (b, c); the others are pinned at FORBIDDEN like hard
constraints. Features are factored: every predicate is paired with the label
pair and, as a backoff, with the current tag alone. The backoff weights are
tied parameters: the weight the kernels see for (attribute, (a, b)) is its
own parameter plus the backoff parameter of (attribute, b) (Pairs.weights). Decoding returns
plain tags.
"""

import numpy as np

from crftk.io.conll import Sentence
from crftk.io.partial import BOS, SET_SEP, is_partial, pair_cell
from crftk.structures.chain import ChainInference, LabelChain
from crftk.structures.constraints import FORBIDDEN, allowed, pinned_mask
from crftk.errors import CrftkError, shown

SEP = SET_SEP


def pair_name(prev, cur):
    return prev + SEP + cur


def current_tag(pair):
    return pair.split(SEP, 1)[1]


def _check_tag(tag, path, line):
    if SEP in tag or tag == BOS:
        raise CrftkError(f"label {shown(tag)} cannot be used with --order 2 (it contains {SEP!r} "
                         f"or is {BOS})", path, line)


def pair_sentences(sentences, label_col, marker=None):
    """The sentences with the label column replaced by (previous tag, tag) pairs. ``marker``: the
    unknown marker of partial labels (crftk.io.partial; None: off): a token whose tag or previous
    tag is partial gets a pair cell, never read as a set of pairs."""
    for s in sentences:
        rows, prev, prev_partial = [], BOS, False
        for i, row in enumerate(s.rows):
            tag = row[label_col]
            partial = is_partial(tag, marker)
            if not partial:
                _check_tag(tag, s.source, s.line + i if s.line else None)
            new = list(row)
            new[label_col] = pair_cell(prev, tag) if partial or prev_partial else pair_name(prev, tag)
            rows.append(new)
            prev, prev_partial = tag, partial
        yield Sentence(rows, s.doc, s.line, s.source)


def pair_labels(data):
    """Attribute sequences (crftk.io.crfsuite.AttributeSequences) with each label replaced by
    the pair (previous tag, tag)."""
    out = []
    p = data.sent_ptr.tolist()
    for k in range(len(p) - 1):
        prev = BOS
        for t in range(p[k], p[k + 1]):
            tag = data.labels[t]
            _check_tag(tag, *data.locate(k, t - p[k]))
            out.append(pair_name(prev, tag))
            prev = tag
    return data.with_labels(out)


def current_tags(pair_labels, y):
    """(tag names, each token's tag id) of the current tags of pair labels ``prev SEP cur``."""
    cur = [p.split(SEP, 1)[1] for p in pair_labels]
    tags = sorted(set(cur))
    ix = {t: i for i, t in enumerate(tags)}
    return tags, np.array([ix[c] for c in cur], dtype=np.int64)[np.asarray(y)]


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


class Pairs(LabelChain):
    """A second-order chain over tags: a first-order chain over (previous tag, tag) pairs.

    Its training parameters are theta = [the pair model's weights, backoff
    weights of (attribute, current tag)]; the kernels see
    ``weights(theta)``: each (attribute, pair) weight plus its backoff.
    """

    name = "pairs"
    noun = record_noun = "a second-order CRF"
    record = {"order": 2, "model_type": "crf"}

    def __init__(self, space):
        super().__init__(space)
        self.index, self.n_backoff = backoff_index(space)
        self.n_w = space.n_params
        self.tags = sorted({current_tag(p) for p in space.labels})

    @property
    def n_params(self):
        return self.n_w + self.n_backoff

    @property
    def output_labels(self):
        return [current_tag(p) for p in self.space.labels]

    @property
    def output_names(self):
        return self.tags

    def weights(self, theta):
        w = theta[:self.n_w].copy()
        w[:self.index.size] += theta[self.n_w:][self.index]
        return w

    def pullback(self, grad):
        back = np.bincount(self.index, weights=grad[:self.index.size], minlength=self.n_backoff)
        return np.concatenate([grad, back])

    def params(self, weights):
        return np.concatenate([np.asarray(weights, dtype=np.float64), np.zeros(self.n_backoff)])

    def _extend(self, mask):
        return np.concatenate([mask, np.zeros(self.n_backoff, dtype=bool)])

    def fixed(self, template):
        fixed = np.zeros(self.n_w, dtype=bool)
        if not template.label_bigram:
            fixed[self.layout.trans] = True
        return self._extend(fixed)

    def pinned(self, scheme):
        """Pair transitions that disagree on the shared tag, and the scheme's (tags') constraints."""
        return self._extend(pinned(self.space, scheme)), FORBIDDEN

    def bind(self, corpus, n_threads=1):
        return PairsInference(self, corpus, n_threads)

    def state_allowed(self, corpus, tag_allowed):
        """Pair (a, b) at token t is allowed when b is allowed at t and a at t - 1 (a is <s> at a
        sentence's first token, and only there)."""
        tags = np.asarray(super().state_allowed(corpus, tag_allowed), dtype=bool)
        pairs = [p.split(SEP, 1) for p in self.space.labels]
        ix = {t: i for i, t in enumerate(self.tags)}
        cur = np.array([ix[b] for _, b in pairs], dtype=np.int64)
        prev = np.array([ix.get(a, -1) for a, _ in pairs], dtype=np.int64)
        first = np.zeros(corpus.n_tokens, dtype=bool)
        first[np.asarray(corpus.sent_ptr[:-1], dtype=np.int64)] = True
        before = np.roll(tags, 1, axis=0)[:, np.maximum(prev, 0)]
        after_tag = np.where(first[:, None], prev[None, :] < 0, before & (prev[None, :] >= 0))
        return np.ascontiguousarray(tags[:, cur] & after_tag, dtype=np.uint8)

    @classmethod
    def check_space(cls, space, bad):
        if not all(SEP in x for x in space.labels):
            raise bad("an order-2 model's labels must be tag pairs")


class PairsInference(ChainInference):
    """Chain inference over pairs; marginals are summed into tags."""

    def marginals(self, w, allowed=None):
        marg, logz = super().marginals(w, allowed)
        return tag_probabilities(marg, self.space.labels)[0], logz


def tag_probabilities(pair_marginals, labels):
    """Marginals of tags [N, T] from marginals of pairs [N, P], and the tag names."""
    tags = sorted({current_tag(p) for p in labels})
    to_tag = np.zeros((len(labels), len(tags)))
    for i, p in enumerate(labels):
        to_tag[i, tags.index(current_tag(p))] = 1.0
    return pair_marginals @ to_tag, tags
