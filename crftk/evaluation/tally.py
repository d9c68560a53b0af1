"""conlleval's counts from label ids, vectorized: what :func:`crftk.evaluation.conlleval.evaluate`
counts from lists of label strings, for a batch of sentences as flat arrays of ids (a tagger's
output and the input's gold column), added up batch by batch.

A chunk is read by the same rule table (:func:`crftk.io.schemes.boundary` of every pair of the
batch's labels, the sentence start acting as an ``O``), so the counts are equal, and so is every
score made from them."""

from collections import Counter

import numpy as np

from crftk.evaluation.conlleval import ChunkScores, Evaluation, are_chunk_tags
from crftk.io.schemes import OPEN, boundary

#: rule tables of recent label lists (a tagger's batches repeat its own labels)
_TABLES = {}
_MAX_TABLES = 64


def _rule_table(names):
    """(action [L + 1, L], type id [L + 1, L], types) of labels ``names``: row L is the sentence start."""
    key = tuple(names)
    table = _TABLES.get(key)
    if table is not None:
        return table
    n = len(key)
    action = np.zeros((n + 1, n), dtype=np.int8)
    kind = np.zeros((n + 1, n), dtype=np.intp)
    types = {}
    for row, prev in enumerate(key + ("O",)):
        for col, tag in enumerate(key):
            a, t = boundary(prev, tag)
            action[row, col] = a
            kind[row, col] = types.setdefault(t, len(types))
    if len(_TABLES) >= _MAX_TABLES:
        _TABLES.clear()
    table = _TABLES[key] = (action, kind, list(types))
    return table


def _chunks(ids, starts, ends, action, kind):
    """(start, end exclusive, type id) arrays of the chunks of the sentences [starts[k], ends[k])."""
    sentence_start = len(action) - 1
    prev = np.empty_like(ids)
    prev[1:] = ids[:-1]
    prev[starts[starts < ends]] = sentence_start
    acts = action[prev, ids]
    opens = np.flatnonzero(acts == OPEN)
    # an open chunk ends at the next boundary with an action, or at its sentence's end
    closes = np.zeros(len(ids) + 1, dtype=bool)
    closes[:-1] = acts != 0
    closes[ends] = True
    closers = np.flatnonzero(closes)
    return opens, closers[np.searchsorted(closers, opens, side="right")], kind[prev[opens], ids[opens]]


class Tally:
    """conlleval's counts of some sentences; tallies add (``+``) and take back (``-``) counts."""

    __slots__ = ("n_tokens", "n_sentences", "n_correct_tokens", "n_correct_sentences", "gold", "pred", "correct",
                 "labels")

    def __init__(self):
        self.n_tokens = self.n_sentences = self.n_correct_tokens = self.n_correct_sentences = 0
        self.gold, self.pred, self.correct = Counter(), Counter(), Counter()     # chunks per type
        self.labels = Counter()     # tokens per label, gold and predicted

    @classmethod
    def of_ids(cls, gold, pred, sent_ptr, names):
        """The counts of sentences ``sent_ptr[k]:sent_ptr[k + 1]`` of the flat label ids ``gold`` and
        ``pred``, both numbering the labels ``names``."""
        names = list(names)
        gold = np.asarray(gold, dtype=np.intp)
        pred = np.asarray(pred, dtype=np.intp)
        sent_ptr = np.asarray(sent_ptr, dtype=np.intp)
        if gold.shape != pred.shape or gold.ndim != 1 or len(sent_ptr) < 1 or sent_ptr[0] != 0 \
                or sent_ptr[-1] != len(gold) or (np.diff(sent_ptr) < 0).any():
            raise ValueError("gold and pred must be flat id arrays of the same length, split by sent_ptr")
        t = cls()
        starts, ends = sent_ptr[:-1], sent_ptr[1:]
        t.n_tokens, t.n_sentences = len(gold), len(starts)
        same = gold == pred
        t.n_correct_tokens = int(same.sum())
        wrong = np.concatenate(([0], np.cumsum(~same)))
        t.n_correct_sentences = int((wrong[ends] == wrong[starts]).sum())
        seen = np.bincount(gold, minlength=len(names)) + np.bincount(pred, minlength=len(names))
        t.labels.update({names[i]: int(seen[i]) for i in np.flatnonzero(seen)})
        if not len(gold):
            return t
        action, kind, types = _rule_table(names)
        g_open, g_end, g_type = _chunks(gold, starts, ends, action, kind)
        p_open, p_end, p_type = _chunks(pred, starts, ends, action, kind)
        # a chunk as one number: (start, end, type); a side has one chunk per start
        span, n_types = len(gold) + 1, max(1, len(types))
        g_key = (g_open * span + g_end) * n_types + g_type
        p_key = (p_open * span + p_end) * n_types + p_type
        right = np.intersect1d(g_key, p_key, assume_unique=True) % n_types
        for counter, typ in ((t.gold, g_type), (t.pred, p_type), (t.correct, right)):
            counts = np.bincount(typ, minlength=len(types))
            counter.update({types[i]: int(counts[i]) for i in np.flatnonzero(counts)})
        return t

    def _combine(self, other, sign):
        t = Tally()
        for name in ("n_tokens", "n_sentences", "n_correct_tokens", "n_correct_sentences"):
            setattr(t, name, getattr(self, name) + sign * getattr(other, name))
        for name in ("gold", "pred", "correct", "labels"):
            mine, theirs = getattr(self, name), getattr(other, name)
            total = getattr(t, name)
            for key in mine.keys() | theirs.keys():
                n = mine.get(key, 0) + sign * theirs.get(key, 0)
                if n:
                    total[key] = n
        return t

    def __add__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def evaluation(self):
        """The :class:`Evaluation` ``evaluate`` gives for these sentences (scheme "auto")."""
        per_type = {k: ChunkScores(self.gold.get(k, 0), self.pred.get(k, 0), self.correct.get(k, 0))
                    for k in self.gold.keys() | self.pred.keys()}
        overall = ChunkScores(sum(self.gold.values()), sum(self.pred.values()), sum(self.correct.values()))
        return Evaluation(n_tokens=self.n_tokens, n_sentences=self.n_sentences,
                          n_correct_tokens=self.n_correct_tokens, n_correct_sentences=self.n_correct_sentences,
                          overall=overall, per_type=per_type, scheme="auto", chunk_tags=are_chunk_tags(self.labels))
