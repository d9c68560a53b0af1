"""Scores of several label columns tagged together (a factorial CRF's chains): each column's
conlleval scores and the joint accuracy (every column right at a token)."""

import numpy as np

from crftk.evaluation.tally import Tally


class ChainScores:
    """Each chain's scores (conlleval) and the joint accuracy (every chain right at a token)."""

    def __init__(self, per_chain, joint_correct, n_tokens):
        self.per_chain = per_chain
        self.joint_correct = int(joint_correct)
        self.n_tokens = int(n_tokens)

    @property
    def joint_accuracy(self):
        return self.joint_correct / self.n_tokens if self.n_tokens else 0.0

    def target(self):
        """What --keep best maximizes: the last chain's chunk F1, or its accuracy when it has no chunks."""
        last = self.per_chain[-1]
        return last.overall.f1 if last.overall.n_gold else 100 * last.token_accuracy

    def line(self, names=None):
        parts = []
        for c, r in enumerate(self.per_chain):
            name = names[c] if names else f"chain {c + 1}"
            f1 = f" F1 {r.overall.f1:.2f}" if r.overall.n_gold else ""
            parts.append(f"{name} acc {100 * r.token_accuracy:.2f}{f1}")
        return ", ".join(parts) + f", joint acc {100 * self.joint_accuracy:.2f}"

    def to_dict(self):
        return {"chains": [{"accuracy": 100 * r.token_accuracy, "precision": r.overall.precision,
                            "recall": r.overall.recall, "f1": r.overall.f1} for r in self.per_chain],
                "joint_accuracy": 100 * self.joint_accuracy, "tokens": self.n_tokens}


class ChainTally:
    """The counts behind :class:`ChainScores`, added up batch by batch (``+``; ``-`` takes counts back)."""

    __slots__ = ("per_chain", "joint_correct", "n_tokens")

    def __init__(self, per_chain, joint_correct, n_tokens):
        self.per_chain, self.joint_correct, self.n_tokens = list(per_chain), int(joint_correct), int(n_tokens)

    @classmethod
    def of_ids(cls, gold, pred, sent_ptr, names):
        """gold, pred: [chains, tokens] label ids of a batch, each chain's numbering its labels ``names[c]``."""
        gold, pred = np.asarray(gold), np.asarray(pred)
        per_chain = [Tally.of_ids(g, p, sent_ptr, x) for g, p, x in zip(gold, pred, names)]
        return cls(per_chain, np.all(gold == pred, axis=0).sum() if len(gold) else 0, gold.shape[-1])

    @classmethod
    def of_labels(cls, gold, pred):
        """gold, pred: per chain, per sentence, the label strings."""
        if not gold:
            return cls([], 0, 0)
        lengths = [len(s) for s in gold[0]]
        sent_ptr = np.concatenate(([0], np.cumsum(lengths, dtype=np.intp)))
        g_ids, p_ids, names = [], [], []
        for g, p in zip(gold, pred):
            ids = {}
            g_ids.append(np.fromiter((ids.setdefault(x, len(ids)) for s in g for x in s), dtype=np.intp))
            p_ids.append(np.fromiter((ids.setdefault(x, len(ids)) for s in p for x in s), dtype=np.intp))
            names.append(list(ids))
        if any(len(x) != sent_ptr[-1] for x in g_ids + p_ids) or \
                any([len(s) for s in c] != lengths for c in list(gold) + list(pred)):
            raise ValueError("every chain's gold and predicted sentences must have the same lengths")
        return cls.of_ids(np.reshape(g_ids, (len(g_ids), -1)), np.reshape(p_ids, (len(p_ids), -1)), sent_ptr, names)

    def _combine(self, other, sign):
        return ChainTally([a + b if sign > 0 else a - b for a, b in zip(self.per_chain, other.per_chain)],
                          self.joint_correct + sign * other.joint_correct, self.n_tokens + sign * other.n_tokens)

    def __add__(self, other):
        return self._combine(other, 1)

    def __sub__(self, other):
        return self._combine(other, -1)

    def scores(self):
        return ChainScores([t.evaluation() for t in self.per_chain], self.joint_correct, self.n_tokens)


def score_chains(gold, pred):
    """gold, pred: per chain, per sentence, the label strings."""
    return ChainTally.of_labels(gold, pred).scores()
