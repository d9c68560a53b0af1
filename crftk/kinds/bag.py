"""The "bag" kind: a feature bag (crftk bag), first-order chain CRFs over the same labels, tagged
with one of their combinations (crftk.ensemble); the weights of each combination are in the
file's record."""

import os

from crftk.errors import CrftkError
from crftk.ensemble.bag import Bag, BagInference, is_bag
from crftk.ensemble.weights import read_weight_file
from crftk.io.conll import model_widths
from crftk.kinds.chain import Job as ChainJob
from crftk.kinds.chain import Tagger
from crftk.kinds.chain import tagger as chain_tagger
from crftk.kinds.base import dump, summary  # noqa: F401 (this kind's info and dump)

NAME = "bag"


class BagTagger(Tagger):
    """Decodes batches with a bag (crftk bag): one of its combinations, with given weights."""

    compiled = True

    def __init__(self, model, *, combine="chosen", decode="chosen", weights=None, threads=0):
        super().__init__(model, threads=threads)
        self.bag = Bag.from_model(model)
        self.method = self.bag.combination if combine in (None, "chosen") else combine
        if decode in (None, "chosen"):
            decode = self.bag.decode if self.method == self.bag.combination else "viterbi"
        self.decode = decode
        if isinstance(weights, (str, os.PathLike)):
            weights = read_weight_file(weights, self.bag.names)
        if weights is not None:      # {combination or None (any): weights}, as read from a file
            weights = weights.get(self.method, weights.get(None))
            if weights is None:
                raise CrftkError(f"the weight file gives no weights for {self.method}")
        self.combination_weights = self.bag.weights(self.method) if weights is None else weights
        self.weights = None

    def inference(self, sentences):
        return BagInference(self.bag, sentences, self.method, self.combination_weights, self.decode,
                            self.n_threads)

    def spaces(self):
        return [m.space for m in self.bag.members]

    def input_widths(self):
        widths = [m.space.input_widths() for m in self.bag.members]
        reads = {c for m in self.bag.members for c in m.space.template.columns}
        return model_widths(reads, min(max(w) for w in widths), "the bag")

    def raw_inference(self, batch):
        return BagInference.of_raw(self.bag, batch, self.method, self.combination_weights, self.decode)


class Job(ChainJob):
    """crftk tag with a bag: a BagTagger, its weight file (--weights) read here, once."""

    force_refusal = ("a feature bag, whose combinations decode on tables of their own "
                     "(crftk.ensemble.combine) that take no mask of allowed labels")

    def make_tagger(self):
        o = self.options
        if isinstance(o["weights"], (str, os.PathLike)):
            o["weights"] = read_weight_file(o["weights"], Bag.from_model(self.model).names)
        return tagger(self.model, combine=o["combine"], decode=o["decode"], weights=o["weights"],
                      threads=o["threads"])


def tagger(model, *, combine="chosen", decode="chosen", weights=None, threads=0):
    """The BagTagger of a bag."""
    return BagTagger(model, combine=combine, decode=decode, weights=weights, threads=threads)


def tagger_for(model, *, combine="chosen", decode="chosen", weights=None, threads=0):
    """The tagger of a model: a BagTagger for a bag, else a Tagger (which takes no combination)."""
    of = tagger if is_bag(model) else chain_tagger
    return of(model, combine=combine, decode=decode, weights=weights, threads=threads)
