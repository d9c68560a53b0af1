"""Kinds of model: their parameters and inference over an encoded corpus (see base.py).

chain: the first-order linear-chain CRF; pairs: a second-order chain through
label pairs; memm: a maximum-entropy Markov model on the chain's features;
composed: a pipeline of such models (crftk compose), one part per stage; factorial:
several label chains coupled at every token (Sutton et al. 2004), one part per chain
and per pair factor; twostage: a CRF reading another's labels over documents
(crftk train --first-stage), one part per stage; semimarkov: a semi-Markov CRF over
segments (crftk train --model-type semimarkov), a token part and a segment part.
A new structure subclasses base.Structure and is added to ``STRUCTURES``' table (``_WHERE``; and to
crftk.model.CHAIN_STRUCTURES if it is a chain of labels).
"""

from collections.abc import Mapping
from importlib import import_module

#: structure name -> (module, class). Imported when first asked for, so that a process training a
#: chain CRF loads no other structure's module or kernels (with the other kinds', 3 MiB of a chain
#: training's peak on CoNLL-2000).
_WHERE = {
    "chain": ("crftk.structures.chain", "Chain"),
    "pairs": ("crftk.structures.pairs", "Pairs"),
    "memm": ("crftk.structures.memm", "MEMM"),
    "composed": ("crftk.structures.composed", "Composed"),
    "factorial": ("crftk.structures.factorial", "Factorial"),
    "twostage": ("crftk.structures.twostage", "TwoStage"),
    "semimarkov": ("crftk.structures.semimarkov", "SemiMarkov"),
}


class _Structures(Mapping):
    """The registry: a read-only mapping whose classes are imported on access."""

    def __getitem__(self, name):
        module, cls = _WHERE[name]
        return getattr(import_module(module), cls)

    def __contains__(self, name):       # without importing the class
        return name in _WHERE

    def __iter__(self):
        return iter(_WHERE)

    def __len__(self):
        return len(_WHERE)


STRUCTURES = _Structures()


def structure_name(order=1, model_type="crf"):
    """The structure of the training options --order and --model-type."""
    if model_type in ("memm", "semimarkov"):
        return model_type
    return "pairs" if int(order) == 2 else "chain"


def make_structure(name, space):
    return STRUCTURES[name](space)
