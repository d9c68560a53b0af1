"""Scores of several label columns tagged together (a factorial CRF's chains): each column's
conlleval scores and the joint accuracy (every column right at a token)."""

import numpy as np

from crftk.evaluation.conlleval import evaluate


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


def score_chains(gold, pred):
    """gold, pred: per chain, per sentence, the label strings."""
    per_chain = [evaluate(g, p) for g, p in zip(gold, pred)]
    joint, n = 0, 0
    for sents in zip(*[list(zip(g, p)) for g, p in zip(gold, pred)]):
        # sents: per chain (gold sentence, predicted sentence) of one sentence
        ok = np.ones(len(sents[0][0]), dtype=bool)
        for g, p in sents:
            ok &= np.asarray(g, dtype=object) == np.asarray(p, dtype=object)
        joint += int(ok.sum())
        n += ok.size
    return ChainScores(per_chain, joint, n)
