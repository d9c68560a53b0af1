"""A bag: several chain CRFs over the same labels, and how to combine them.

A bag is saved as one model file (crftk.model): one part per member (its feature
space and weights, named after the bag), and in the training record
``info["bag"]`` the member names, the combination chosen (``combine``, with
``decode``), the weights of every combination (``weights``: method -> one weight
per member), how they were chosen (``weights_by``) and the F1 they reached
(``dev_f1``, ``member_dev_f1``). ``BagInference`` answers the tagger's questions
(best labels, marginals, n-best) for one combination on a batch of sentences.
"""

import math

from crftk.errors import CrftkError, shown
from crftk.ensemble.combine import DECODINGS, METHODS, Evidence, check_weights, combine
from crftk.model import Model, Part


def is_bag(model):
    return isinstance(model.info.get("bag"), dict)


class Bag:
    """Member models (first-order chain CRFs, same labels) with the bag's record."""

    def __init__(self, members, names, record):
        if len(members) < 2:
            raise CrftkError(f"a bag needs at least two members, not {len(members)}")
        labels = members[0].labels
        for name, m in zip(names, members):
            if m.structure_name != "chain":
                raise CrftkError(f"bag member {shown(name)} is a {m.structure_name} model; bags hold "
                                 "first-order chain CRFs")
            if m.labels != labels:
                raise CrftkError(f"bag member {shown(name)} has the labels {' '.join(m.labels)}, "
                                 f"the first member {' '.join(labels)}: bags must share one label set")
            if (m.space.n_columns, m.space.label_col) != (members[0].space.n_columns,
                                                          members[0].space.label_col):
                raise CrftkError(f"bag member {shown(name)} reads other columns than the first member")
        self.members = list(members)
        self.names = list(names)
        self.record = dict(record)

    @property
    def labels(self):
        return self.members[0].labels

    @property
    def combination(self):
        return self.record.get("combine", "seq-poe")

    @property
    def decode(self):
        return self.record.get("decode", "viterbi")

    def weights(self, method):
        """The weights chosen for a combination (crftk bag chooses them for every one)."""
        w = self.record.get("weights", {}).get(method)
        if w is None:
            raise CrftkError(f"the bag has no weights for {shown(method)}")
        return check_weights(w, len(self.members))

    # model files ---------------------------------------------------------
    def to_model(self, info=None):
        """One model file's worth: a part per member, the record in info["bag"]."""
        info = dict(info or {})
        info.update(order=1, model_type="crf", bag=self.record)
        first = self.members[0]
        more = [Part(m.space, m.weights, name) for m, name in zip(self.members[1:], self.names[1:])]
        return Model(first.space, first.weights, info, structure="chain", more_parts=more, name=self.names[0])

    @classmethod
    def from_model(cls, model, path=None):
        """The bag a model file holds; CrftkError when it holds none or its record does not fit."""
        path = path if path is not None else model.source
        record = model.info.get("bag")
        if not isinstance(record, dict):
            raise CrftkError("the model is not a bag (crftk bag makes one): --combine needs a bag", path)
        names = [p.name for p in model.parts]

        def bad(what):
            return CrftkError(f"model file is inconsistent: {what}", path)

        if record.get("members") != names:
            raise bad("the bag's member list does not match its parts")
        weights = record.get("weights")
        if not isinstance(weights, dict):
            raise bad("the bag's weights are not a table")
        missing = [m for m in METHODS if m not in weights]
        if missing:     # crftk bag writes every combination's: tagging would fall back on others
            raise bad(f"the bag's weights table has no weights for {', '.join(missing)}")
        for method, w in weights.items():
            if method not in METHODS or not isinstance(w, list) or len(w) != len(names) or \
                    not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in w):
                raise bad(f"the bag's weights for {shown(method)} do not fit its {len(names)} members")
            if not math.isfinite(sum(float(x) for x in w)):     # (a float sum: no numpy overflow warning)
                # normalized, weights such as 1e308 1e308 would all be 0
                raise bad(f"the bag's weights for {shown(method)} do not sum to a finite number")
            try:
                check_weights(w, len(names))
            except CrftkError as e:
                raise bad(e.message) from None
        if record.get("combine", "seq-poe") not in METHODS or record.get("decode", "viterbi") not in DECODINGS:
            raise bad("the bag names an unknown combination")
        if record.get("decode") == "max-marginal" and record.get("combine", "seq-poe") != "seq-mixture":
            # combine refuses it at tag time, in an error that named no file
            raise bad(f"the bag decodes {shown(record.get('combine', 'seq-poe'))} by max-marginal "
                      "(an option of seq-mixture only)")
        members = [Model(p.space, p.weights, {"order": 1, "model_type": "crf"}, structure="chain")
                   for p in model.parts]
        try:
            return cls(members, names, record)
        except CrftkError as e:
            raise CrftkError(e.message, path) from None

    # combining ------------------------------------------------------------
    def evidence(self, sentences, n_threads=1):
        """(Evidence, the first member's encoded corpus) of the members on sentences."""
        return Evidence.of(self.members, sentences, n_threads)


class BagInference:
    """The Inference interface (best, marginals, nbest) of one combination on a batch; the
    weight vector the tagger passes is ignored (the bag's weights are fixed here)."""

    def __init__(self, bag, sentences, method, weights, decode="viterbi", n_threads=1, *, encoded=None):
        evidence, self.corpus = encoded if encoded is not None else bag.evidence(sentences, n_threads)
        self.combined = combine(evidence, method, weights, decode)

    @classmethod
    def of_raw(cls, bag, batch, method, weights, decode="viterbi", n_threads=1):
        """The same on a crftk.io.conll.RawBatch (the members' spaces encode it in compiled code)."""
        return cls(bag, None, method, weights, decode, n_threads,
                   encoded=Evidence.of_corpora(bag.members, [m.space.encode_raw(batch) for m in bag.members],
                                                n_threads))

    @property
    def n_sentences(self):
        return self.corpus.n_sentences

    def best(self, w=None):
        return self.combined.best()

    def marginals(self, w=None):
        return self.combined.marginals()

    def nbest(self, w, k):
        return self.combined.nbest(k)
