"""Kinds of model: their parameters and inference over an encoded corpus (see base.py).

chain: the first-order linear-chain CRF; pairs: a second-order chain through
label pairs; memm: a maximum-entropy Markov model on the chain's features;
composed: a pipeline of such models (crftk compose), one part per stage; factorial:
several label chains coupled at every token (Sutton et al. 2004), one part per chain
and per pair factor; twostage: a CRF reading another's labels over documents
(crftk train --first-stage), one part per stage; semimarkov: a semi-Markov CRF over
segments (crftk train --model-type semimarkov), a token part and a segment part.
A new structure subclasses base.Structure and is added to ``STRUCTURES``' table (its class's path; and to
crftk.model.CHAIN_STRUCTURES if it is a chain of labels).
"""

from crftk.registry import LazyRegistry

#: structure name -> its class, imported when first asked for, so that a process training a chain
#: CRF loads no other structure's module or kernels (with the other kinds', 3 MiB of a chain
#: training's peak on CoNLL-2000).
STRUCTURES = LazyRegistry({
    "chain": "crftk.structures.chain:Chain",
    "pairs": "crftk.structures.pairs:Pairs",
    "memm": "crftk.structures.memm:MEMM",
    "composed": "crftk.structures.composed:Composed",
    "factorial": "crftk.structures.factorial:Factorial",
    "twostage": "crftk.structures.twostage:TwoStage",
    "semimarkov": "crftk.structures.semimarkov:SemiMarkov",
})


def structure_name(order=1, model_type="crf"):
    """The structure of the training options --order and --model-type."""
    if model_type in ("memm", "semimarkov"):
        return model_type
    return "pairs" if int(order) == 2 else "chain"


def make_structure(name, space):
    return STRUCTURES[name](space)
