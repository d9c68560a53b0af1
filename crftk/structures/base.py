"""What every kind of model provides: its parameters, and inference over an encoded corpus.

A Structure is a kind of model (a first-order chain, a chain over label pairs, an
MEMM ...) on one feature space. It declares

- its training parameters (``n_params``), the weight vector the kernels read
  (``weights(params)``) and the way back (``pullback(gradient)``): the same vector
  for most structures, tied parameters for label pairs;
- the gold labels of a training corpus (``gold(corpus)``, checked);
- which parameters never move (``fixed()``) and which hard constraints pin
  (``pinned(scheme)``);
- what decoding outputs (``output_labels``);
- ``bind(corpus, n_threads)``: an Inference over an encoded corpus;
- the kinds of model file it makes (``file_kinds``; crftk.model.KINDS joins them) and,
  for a file of it, which kind it is, that kind in words, the checks its parts and training
  record pass at load, and its ``crftk info`` summary and ``crftk dump`` text: crftk.model
  asks the structure a file names, so that it never branches on the name.

An Inference answers, for a weight vector: the negative log-likelihood of a
labeling and its gradient (``loglik``), the best labeling (``best``), output
marginals (``marginals``), the k best labelings (``nbest``), and the feature
counts of a labeling (``counts``). Objectives, optimizers and decoding talk to
these two interfaces only, so a new structure needs no change in them.
"""

import numpy as np

from crftk.errors import CrftkError
from crftk.structures.constraints import FORBIDDEN, forbidden_parameters


class Structure:
    """Base class: identity parameterization, no fixed parameters."""

    #: the name stored in model files
    name = None
    #: the kinds of model file this structure makes: kind -> (the kind in words, the Python
    #: call that loads it); one for most structures (see file_kind)
    file_kinds = {}
    #: what a part of a file of several parts is to its reader (describe, dump)
    part_noun = "part"

    def __init__(self, space):
        self.space = space

    @property
    def layout(self):
        return self.space.layout()

    @property
    def labels(self):
        """The labels the kernels see (pairs of tags for a pair structure)."""
        return self.space.labels

    @property
    def output_labels(self):
        """What decoding outputs, in order: label ids index this list."""
        return self.labels

    @property
    def output_names(self):
        """The columns of output marginals, in order."""
        return self.output_labels

    @property
    def n_params(self):
        return self.space.n_params

    def weights(self, params):
        """The kernels' weight vector for the training parameters."""
        return params

    def pullback(self, grad):
        """The gradient with respect to the training parameters, from one with respect to weights."""
        return grad

    def params(self, weights):
        """Training parameters that give these weights (to start from a trained model)."""
        return np.asarray(weights, dtype=np.float64)

    def fixed(self, template):
        """Mask of the parameters that never move, for this template (starting values kept)."""
        fixed = np.zeros(self.n_params, dtype=bool)
        if not template.label_bigram:
            fixed[self.layout.trans] = True
        return fixed

    def pinned(self, scheme):
        """(mask, value): parameters the constraint scheme pins (zero probability), or None."""
        if scheme == "none":
            return None
        return forbidden_parameters(self.space, scheme), FORBIDDEN

    def gold(self, corpus):
        """The gold labels of a training corpus as the kernels read them (one row per chain of a
        factorial CRF); refused when absent or outside the label set."""
        if corpus.labels is None:
            raise CrftkError("training data has no gold label column")
        labels = np.asarray(corpus.labels)
        # -1: a partial token, whose allowed labels the corpus's mask holds (crftk.io.partial)
        if (labels < 0).any() and getattr(corpus, "allowed", None) is None:
            raise CrftkError("training data has labels outside the label set")
        return np.ascontiguousarray(labels, dtype=np.int32)

    def state_allowed(self, corpus, tag_allowed):
        """The kernels' mask of the states each token allows (uint8 [N, states]), from a mask of
        the tags it allows (tag_allowed [N, len(output_names)], in output_names' order): the same
        mask for a structure whose states are its tags."""
        mask = np.asarray(tag_allowed)
        if mask.shape != (corpus.n_tokens, len(self.output_names)):
            raise ValueError(f"a tag mask must be [{corpus.n_tokens}, {len(self.output_names)}], not {mask.shape}")
        return np.ascontiguousarray(mask, dtype=np.uint8)

    def meta(self):
        """What a model file records about the structure besides its feature space."""
        return {"name": self.name}

    def encode(self, sentences):
        """The encoded corpus of sentences that ``bind`` takes (gold labels kept when present)."""
        return self.space.encode(sentences)

    def bind(self, corpus, n_threads=1):
        raise NotImplementedError

    # -- its model files ------------------------------------------------------------------
    @classmethod
    def file_kind(cls, info):
        """Which of ``file_kinds`` a file of this structure with training record ``info`` is."""
        (kind,) = cls.file_kinds
        return kind

    @classmethod
    def describe(cls, parts, info):
        """The file's kind in words, with its size: "a pipeline (3 stages)"."""
        noun = cls.file_kinds[cls.file_kind(info)][0]
        return f"{noun} ({len(parts)} {cls.part_noun}s)"

    @classmethod
    def check_file(cls, parts, info, path):
        """Refuse a file whose parts (crftk.model.Part) or training record this structure
        cannot have; run after each part's own checks."""
        cls.refuse_bag_record(info, path)

    @classmethod
    def refuse_bag_record(cls, info, path):
        """A bag's record (crftk.ensemble.bag) in a file that is no bag."""
        if "bag" in info:
            raise CrftkError(f"model file is inconsistent: a {cls.name} model with a bag's record", path)

    @classmethod
    def summary(cls, model):
        """``crftk info``'s summary (a dict) of a crftk.model.Model of this structure."""
        raise NotImplementedError

    @classmethod
    def dump(cls, model, out, min_abs=0.0):
        """``crftk dump``: the weights of a crftk.model.Model of this structure as text."""
        raise NotImplementedError


class Inference:
    """Inference of a structure over one encoded corpus (see the module docstring)."""

    #: loglik fills a curvature vector in its pass (else pcg's variance comes from ``variance``)
    curvature_in_pass = True

    def __init__(self, structure, corpus, n_threads=1):
        self.structure = structure
        self.space = structure.space
        self.corpus = corpus
        self.n_threads = max(1, int(n_threads))
        self._index = None

    @property
    def n_sentences(self):
        return self.corpus.n_sentences

    def loglik(self, w, labels, curvature=None, allowed=None, entity=None):
        raise NotImplementedError

    def best(self, w):
        raise NotImplementedError

    def marginals(self, w):
        raise CrftkError(f"marginals are not computed for {self.structure.name} models")

    def nbest(self, w, k):
        raise CrftkError(f"n-best lists are not computed for {self.structure.name} models")

    def counts(self, labels):
        raise NotImplementedError

    def labeling_difference(self, bad, gold, tok_w):
        """Sum over sentences of the weight tok_w at their tokens times (the feature counts of
        labeling ``bad`` - those of ``gold``): MCE's gradient. A structure whose inference counts
        labelings per token overrides it."""
        raise CrftkError(f"MCE is not computed for {self.structure.name} models")

    # -- positions ---------------------------------------------------------
    @property
    def index(self):
        """Per-token positions: sentence id, first/last flags, position in the sentence."""
        if self._index is None:
            sp = np.asarray(self.corpus.sent_ptr, dtype=np.int64)
            lengths = np.diff(sp)
            N = int(sp[-1])
            sid = np.repeat(np.arange(lengths.size), lengths)
            first = np.zeros(N, dtype=bool)
            first[sp[:-1][lengths > 0]] = True
            last = np.zeros(N, dtype=bool)
            last[sp[1:][lengths > 0] - 1] = True
            pos = np.arange(N, dtype=np.int64) - sp[:-1][sid]
            self._index = {"sent_ptr": sp, "lengths": lengths, "sid": sid, "first": first, "last": last,
                           "pos": pos}
        return self._index
