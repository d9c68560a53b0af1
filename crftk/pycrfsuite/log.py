"""The training log of the python-crfsuite layer: what python-crfsuite's ``Trainer.logparser``
(and sklearn-crfsuite's ``training_log_``) hold, made from crftk's training record.

CRFsuite writes a text log that python-crfsuite parses; crftk records every iteration in the
model (``info["history"]``), and :class:`TrainLog` reads that instead, giving the same
attributes: ``iterations`` (one dict per iteration), ``last_iteration``, ``featgen_*``,
``training_seconds``, ``log`` (lines) and ``events``. An iteration's dict has ``num``, ``loss``
(the objective; for the perceptron the mislabeled tokens), ``error_norm`` (the gradient's norm,
batch methods), ``active_features``, ``linesearch_trials`` (lbfgs), ``time`` (seconds) and
``scores``; with a held-out set every iteration has ``item_accuracy_float``, and the last one also
``item_accuracy``, ``instance_accuracy`` (Fractions and floats), ``avg_precision``, ``avg_recall``,
``avg_f1`` and ``scores`` per label (:data:`LabelScore`), of the final weights. CRFsuite's
``feature_norm`` is the norm of the weights, ``linesearch_step`` the accepted step (L-BFGS).
"""

from collections import namedtuple
from fractions import Fraction

LabelScore = namedtuple("LabelScore", "match model ref precision recall f1")


class TrainLog:
    """A finished training run's log (see the module's doc)."""

    def __init__(self):
        self.state = None
        self.featgen_percent = -2
        self.featgen_num_features = None
        self.featgen_seconds = None
        self.training_seconds = None
        self.storing_seconds = None
        self.iterations = []
        self.last_iteration = None
        self.log = []
        self.events = []

    @property
    def last_log(self):
        """The text of the last event (the lines since the one before)."""
        if not self.events:
            return ""
        _, start, end = self.events[-1]
        return "".join(self.log[start:end])

    def _event(self, name, lines):
        start = len(self.log)
        self.log.extend(line + "\n" for line in lines)
        self.events.append((name, start, len(self.log)))

    @classmethod
    def from_record(cls, info, n_features, holdout=None):
        """The log of a model's training record; ``holdout``: (gold, predicted) label sequences of
        the held-out set under the final weights, for the last iteration's scores."""
        log = cls()
        log._event("start", [f"crftk {info.get('options', {}).get('algorithm', '')} training"])
        log.featgen_percent = 100
        log.featgen_num_features = int(n_features)
        log._event("featgen_end", [f"Number of features: {n_features}"])
        previous_evals = 0
        lbfgs = info.get("options", {}).get("algorithm") == "lbfgs"
        for record in info.get("history", []):
            it = {"num": int(record["iteration"]), "scores": {}, "loss": float(record["objective"])}
            if record.get("gnorm") is not None:
                it["error_norm"] = float(record["gnorm"])
            if record.get("xnorm") is not None:
                it["feature_norm"] = float(record["xnorm"])
            if "active" in record:
                it["active_features"] = int(record["active"])
            if lbfgs and "evals" in record:
                it["linesearch_trials"] = int(record["evals"]) - previous_evals
                previous_evals = int(record["evals"])
            if lbfgs and record.get("step") is not None:
                it["linesearch_step"] = float(record["step"])
            if "seconds" in record:
                it["time"] = float(record["seconds"])
            if record.get("dev_accuracy") is not None:
                it["item_accuracy_float"] = float(record["dev_accuracy"])
            log.iterations.append(it)
            log.last_iteration = it
            log._event("iteration", [f"***** Iteration #{it['num']} *****"]
                       + [f"{key}: {value}" for key, value in it.items() if key not in ("num", "scores")])
        if holdout is not None and log.last_iteration is not None:
            log.last_iteration.update(holdout_scores(*holdout))
        log.training_seconds = info.get("seconds")
        log._event("optimization_end", [f"Total seconds required for training: {log.training_seconds}",
                                        str(info.get("stop_reason", ""))])
        log.state = "STORING"
        return log


def holdout_scores(gold, predicted):
    """CRFsuite's held-out evaluation: per label (match, model, ref, precision, recall, f1), their
    macro-average, and item and instance accuracy."""
    labels = sorted({t for s in gold for t in s} | {t for s in predicted for t in s})
    match = dict.fromkeys(labels, 0)
    model = dict.fromkeys(labels, 0)
    ref = dict.fromkeys(labels, 0)
    items = right_items = right_instances = 0
    for g, p in zip(gold, predicted):
        right_instances += list(g) == list(p)
        for a, b in zip(g, p):
            items += 1
            ref[a] += 1
            model[b] += 1
            if a == b:
                match[a] += 1
                right_items += 1
    scores = {}
    for label in labels:
        if model[label] == 0 and ref[label] == 0:
            scores[label] = LabelScore(0, 0, 0, None, None, None)
            continue
        precision = match[label] / model[label] if model[label] else 0.0
        recall = match[label] / ref[label] if ref[label] else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        scores[label] = LabelScore(match[label], model[label], ref[label], precision, recall, f1)
    n = len(scores) or 1
    item = Fraction(right_items, items or 1)
    instance = Fraction(right_instances, len(gold) or 1)
    return {"scores": scores,
            "avg_precision": sum(s.precision or 0.0 for s in scores.values()) / n,
            "avg_recall": sum(s.recall or 0.0 for s in scores.values()) / n,
            "avg_f1": sum(s.f1 or 0.0 for s in scores.values()) / n,
            "item_accuracy": item, "item_accuracy_float": float(item),
            "instance_accuracy": instance, "instance_accuracy_float": float(instance)}
