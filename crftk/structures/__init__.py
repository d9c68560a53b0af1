"""Kinds of model: their parameters and inference over an encoded corpus (see base.py).

chain: the first-order linear-chain CRF; pairs: a second-order chain through
label pairs; memm: a maximum-entropy Markov model on the chain's features;
composed: a pipeline of such models (crftk compose), one part per stage; factorial:
several label chains coupled at every token (Sutton et al. 2004), one part per chain
and per pair factor; twostage: a CRF reading another's labels over documents
(crftk train --first-stage), one part per stage; semimarkov: a semi-Markov CRF over
segments (crftk train --model-type semimarkov), a token part and a segment part.
A new structure subclasses base.Structure and is added to ``STRUCTURES``.
"""

from crftk.structures.chain import Chain
from crftk.structures.composed import Composed
from crftk.structures.factorial import Factorial
from crftk.structures.memm import MEMM
from crftk.structures.pairs import Pairs
from crftk.structures.semimarkov import SemiMarkov
from crftk.structures.twostage import TwoStage

STRUCTURES = {s.name: s for s in (Chain, Pairs, MEMM, Composed, Factorial, TwoStage, SemiMarkov)}


def structure_name(order=1, model_type="crf"):
    """The structure of the training options --order and --model-type."""
    if model_type == "memm":
        return MEMM.name
    if model_type == SemiMarkov.name:
        return SemiMarkov.name
    return Pairs.name if int(order) == 2 else Chain.name


def make_structure(name, space):
    return STRUCTURES[name](space)
