"""Semi-Markov CRFs (Sarawagi & Cohen 2004): a sentence is labeled by segments.

A segmentation's score is that of the token chain CRF over the IOBES position tags it implies
(the ``tokens`` part: a FeatureSpace over IOBES tags, fit on the label column rewritten by
crftk.io.segments.SegmentConversion) plus, per segment, the weights of its segment attributes
with its label (the ``segments`` part: crftk.features.segments.SegmentSpace, the template's S
lines, each attribute with the labels of its features). Segments of label y are at most
``max_len[y]`` tokens. Decoding outputs IOBES tags, which a Recoder converts to the corpus's scheme. The lattice (log Z,
marginals, Viterbi, n-best over segmentations) is the kernel crftk._semimarkov.
"""

import numpy as np

from crftk.errors import CrftkError, UsageError, shown
from crftk.io.schemes import SCHEMES
from crftk.io.segments import OUTSIDE
from crftk.structures.base import Inference, Structure
from crftk.structures.chain import dump_weights
from crftk.structures.factorial import state_variance

#: the names of a semi-Markov model file's two parts, in order
PARTS = ("tokens", "segments")
#: the position prefixes of a segment's tokens, in the order of the kernel's seg_map columns
POSITIONS = ("S", "B", "I", "E")


def segment_map(tags, labels):
    """int32 [Y, 4]: the token label id of each position (S, B, I, E) of each segment label,
    -1 where the token part lacks that tag (the kernel then builds no such segment); an outside
    segment is its one ``O`` token. CrftkError for a token tag that is no position of a label."""
    index = {tag: j for j, tag in enumerate(tags)}
    seg_map = np.full((len(labels), 4), -1, dtype=np.int32)
    known = set()
    for y, label in enumerate(labels):
        if label == OUTSIDE:
            names = [OUTSIDE]
        else:
            names = [f"{p}-{label}" for p in POSITIONS]
        for k, name in enumerate(names):
            if name in index:
                seg_map[y, k] = index[name]
                known.add(name)
    stray = [tag for tag in tags if tag not in known]
    if stray:
        raise CrftkError(f"token label {shown(stray[0])} is not a position (S-, B-, I-, E-) of a segment label "
                         f"({', '.join(labels)})")
    return seg_map


def segment_lengths(seg_map, seg_max):
    """The lengths of the segments the kernel's lattice has, sorted: 1 for a label with an S- tag
    (an outside segment: its O tag), 2 .. L_y for one with B- and E- tags (past 2 with its I- tag)."""
    lengths = set()
    for (s, b, i, e), n in zip(np.asarray(seg_map).tolist(), np.asarray(seg_max).tolist()):
        if s >= 0:
            lengths.add(1)
        if b >= 0 and e >= 0 and n >= 2:
            lengths.update(range(2, (n if i >= 0 else 2) + 1))
    return sorted(lengths)


class SemiMarkovCorpus:
    """The token part's EncodedCorpus (every attribute it has is read through) and the
    SegmentCorpus of the same sentences (``segments``)."""

    def __init__(self, tokens, segments):
        self.tokens, self.segments = tokens, segments

    def __getattr__(self, name):
        if name in ("tokens", "segments"):      # not yet set (copy, unpickling)
            raise AttributeError(name)
        return getattr(self.tokens, name)

    def subset(self, sentences):
        """The given sentences (ids in increasing order) as a corpus of their own."""
        return SemiMarkovCorpus(self.tokens.subset(sentences), self.segments.subset(self.tokens.sent_ptr, sentences))


class SemiMarkov(Structure):
    """A semi-Markov CRF: ``space`` (the token part, over IOBES tags) and ``segments``."""

    name = "semimarkov"
    file_kinds = {"semimarkov": ("a semi-Markov CRF", "crftk.CRF.load")}

    def __init__(self, tokens, segments):
        super().__init__(tokens)
        self.segments = segments
        if tokens.n_edge_attrs:
            raise CrftkError("a semi-Markov CRF's token part has no B lines with macros")
        self.seg_map = segment_map(tokens.labels, segments.labels)
        self.seg_max = np.ascontiguousarray(segments.max_len, dtype=np.int32)
        if self.seg_max.shape != (len(segments.labels),) or (self.seg_max < 1).any():
            raise CrftkError("the segment part's longest segments are not one positive length per label")
        if OUTSIDE in segments.labels and self.seg_max[segments.labels.index(OUTSIDE)] != 1:
            raise CrftkError(f"an outside ({OUTSIDE}) segment is one token long")
        self.seg_lengths = segment_lengths(self.seg_map, self.seg_max)
        if not self.seg_lengths:
            raise CrftkError("no segment label has a segment: the token part has no S- tag, no O and no B- and E- "
                             "tags of one label")

    def unsegmentable(self, lengths):
        """Indices of the sentence ``lengths`` that no sequence of the lattice's segments covers
        (when its training data had no O token and no one-token segment, an odd length may not)."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if not lengths.size or 1 in self.seg_lengths:
            return np.zeros(0, dtype=np.int64)
        covered = np.zeros(int(lengths.max()) + 1, dtype=bool)
        covered[0] = True
        for t in range(1, covered.size):
            covered[t] = any(covered[t - n] for n in self.seg_lengths if n <= t)
        return np.flatnonzero(~covered[lengths])

    @classmethod
    def part_space(cls, name):
        """The space class of a model file's part (crftk.model reads it)."""
        from crftk.features.segments import SegmentSpace
        from crftk.features.space import FeatureSpace
        return SegmentSpace if name == PARTS[1] else FeatureSpace

    @classmethod
    def from_parts(cls, parts):
        names = tuple(p.name for p in parts)
        if names != PARTS:
            raise CrftkError(f"a semi-Markov model's parts are {' and '.join(PARTS)}, not {', '.join(names)}")
        return cls(parts[0].space, parts[1].space)

    @classmethod
    def describe(cls, parts, info):
        return "a semi-Markov CRF"

    @classmethod
    def check_file(cls, parts, info, path):
        """Two parts that make one structure; a record that converts IOBES to a corpus scheme."""
        super().check_file(parts, info, path)

        def bad(what):
            return CrftkError(f"model file is inconsistent: {what}", path)

        try:
            cls.from_parts(parts)
        except CrftkError as e:
            raise bad(e.message) from None
        if info.get("model_type") != cls.name or info.get("order", 1) != 1:
            raise bad(f"a semi-Markov model's record names model type {shown(info.get('model_type'))}, "
                      f"order {info.get('order', 1)!r:.20}")
        if info.get("train_scheme") != "iobes" or info.get("corpus_scheme") not in SCHEMES:
            raise bad(f"its record names training scheme {shown(info.get('train_scheme'))} and corpus scheme "
                      f"{shown(info.get('corpus_scheme'))}, not iobes and one of {', '.join(SCHEMES)}")

    @property
    def labels(self):
        return self.space.labels

    @property
    def n_params(self):
        return self.space.n_params + self.segments.n_params

    def split(self, w):
        """The weight vector cut into the token part's and the segment part's (views)."""
        off = self.space.n_params
        return w[:off], w[off:]

    def pinned(self, scheme):
        if scheme != "none":
            raise UsageError(f"--constraints {scheme}: a semi-Markov CRF's segment lattice already allows "
                             f"consistent IOBES tags only: drop --constraints")
        return None

    def state_allowed(self, corpus, tag_allowed):
        raise CrftkError("a semi-Markov CRF's segment lattice takes no mask of allowed labels")

    def meta(self):
        return {"name": self.name, "segment_labels": list(self.segments.labels)}

    def encode(self, sentences):
        """A SemiMarkovCorpus of sentences (gold token labels kept when the rows hold IOBES tags)."""
        return SemiMarkovCorpus(self.space.encode(sentences), self.segments.encode(sentences))

    def bind(self, corpus, n_threads=1):
        return SemiMarkovInference(self, corpus, n_threads)

    summary = classmethod(lambda cls, model: semimarkov_summary(model))
    dump = classmethod(lambda cls, model, out, min_abs=0.0: semimarkov_dump(model, out, min_abs))


class SemiMarkovInference(Inference):
    """Inference over segmentations (crftk._semimarkov.Segments) of a corpus whose ``segments``
    is the SegmentCorpus of its sentences."""

    #: pcg's curvature comes from the marginals (variance), not from the likelihood's pass
    curvature_in_pass = False

    def __init__(self, structure, corpus, n_threads=1):
        super().__init__(structure, corpus, n_threads)
        from crftk._semimarkov import Segments
        segments = getattr(corpus, "segments", None)
        if segments is None:
            raise CrftkError("a semi-Markov CRF binds a corpus with its segments (SemiMarkov.encode)")
        st, tokens = structure, getattr(corpus, "tokens", corpus)
        self.tokens = tokens
        self.kernel = Segments(tokens.sent_ptr, tokens.attr_ptr, tokens.attrs, st.space.feat_ptr,
                               st.space.feat_label, st.space.n_labels, st.space.layout().offsets(),
                               st.seg_map, st.seg_max, segments.seg_ptr, segments.seg_attrs,
                               st.segments.n_attrs, st.space.n_params, values=tokens.values,
                               seg_feat_ptr=st.segments.feat_ptr, seg_feat_label=st.segments.feat_label)

    @staticmethod
    def _refuse(allowed, entity=None):
        if allowed is not None:
            raise CrftkError("a semi-Markov CRF's segment lattice takes no mask of allowed labels")
        if entity is not None:
            raise CrftkError("a semi-Markov CRF computes no expected entity ratio")

    def loglik(self, w, labels, curvature=None, allowed=None, entity=None):
        self._refuse(allowed, entity)
        if curvature is not None:
            raise CrftkError("a semi-Markov CRF's likelihood pass computes no curvature (see variance)")
        return self.kernel.loglik(np.ascontiguousarray(w, dtype=np.float64), labels, self.n_threads)

    def best(self, w, allowed=None):
        self._refuse(allowed)
        return self.kernel.viterbi(np.ascontiguousarray(w, dtype=np.float64), self.n_threads)

    def marginals(self, w, allowed=None):
        self._refuse(allowed)
        return self.kernel.marginals(np.ascontiguousarray(w, dtype=np.float64), self.n_threads)

    def nbest(self, w, k, allowed=None):
        self._refuse(allowed)
        return self.kernel.nbest(np.ascontiguousarray(w, dtype=np.float64), k, self.n_threads)

    def counts(self, labels):
        return self.kernel.counts(np.ascontiguousarray(labels, dtype=np.int32), n_threads=self.n_threads)

    def sequence_scores(self, w, labels):
        """The score of each sentence's labeling (position tag ids)."""
        return self.kernel.scores(np.ascontiguousarray(w, dtype=np.float64), labels, self.n_threads)

    def labeling_difference(self, bad, gold, tok_w):
        """Sum over sentences of their weight (tok_w, constant over a sentence's tokens) times
        F(bad) - F(gold): a segment's features are the whole segment's, so counts go by sentence."""
        weights = np.asarray(tok_w, dtype=np.float64)[self.index["sent_ptr"][:-1]]
        return (self.kernel.counts(np.ascontiguousarray(bad, dtype=np.int32), weights, self.n_threads)
                - self.kernel.counts(np.ascontiguousarray(gold, dtype=np.int32), weights, self.n_threads))

    def variance(self, w, expected):
        """Sha & Pereira's diagonal Hessian approximation: p(1-p) of the IOBES token marginals for
        the token part's state, start and end weights; the expected counts for the transitions and
        the segment weights (the kernel gives no segment marginals)."""
        nodes, _ = self.marginals(w)
        h = np.array(expected, dtype=np.float64, copy=True)
        state_variance(self.space, self.tokens, nodes * (1.0 - nodes), h[:self.space.n_params])
        return h


def semimarkov_summary(model):
    """``crftk info`` of a semi-Markov model: the token part's sizes and the segment part's."""
    st = model.structure
    tokens, segments = st.space, st.segments
    w_tok, w_seg = model.parts[0].weights, model.parts[1].weights
    return {"structure": st.name, "labels": tokens.labels, "n_labels": tokens.n_labels,
            "segment_labels": list(segments.labels),
            "max_segment": {y: int(n) for y, n in zip(segments.labels, st.seg_max.tolist())},
            "columns": tokens.n_columns, "label_column": tokens.label_col,
            "templates": {"state": len(tokens.unigram_lines), "transition": len(tokens.bigram_lines),
                          "label_bigram": tokens.template.label_bigram,
                          "segment": len(getattr(tokens.template, "segments", ()))},
            "attributes": tokens.n_attrs, "state_features": tokens.n_features,
            "segment_attributes": segments.n_attrs, "feature_set": tokens.feature_set,
            "parameters": st.n_params,
            "nonzero_parameters": int(np.count_nonzero(w_tok) + np.count_nonzero(w_seg)),
            "nonzero_segment_weights": int(np.count_nonzero(w_seg)),
            "schemes": {"trained_as": model.info.get("train_scheme"), "corpus": model.info.get("corpus_scheme")},
            "training": model.info}


def semimarkov_dump(model, out, min_abs=0.0):
    """The token part as a chain CRF's dump, then one line per non-zero segment weight."""
    st = model.structure
    segments = st.segments
    out.write(f"# crftk semi-Markov model: {len(segments.labels)} segment labels, {st.n_params} parameters\n")
    out.write("\n[tokens]\n")
    dump_weights(st.space, model.parts[0].weights, out, min_abs)
    out.write("\n[segment lengths] label: longest\n")
    for label, n in zip(segments.labels, st.seg_max.tolist()):
        out.write(f"{label}\t{n}\n")
    out.write("\n[segment] attribute\tlabel\tweight\n")
    w, ptr, lab = model.parts[1].weights, segments.feat_ptr, segments.feat_label
    for a, name in enumerate(segments.attribute_strings()):
        for f in range(ptr[a], ptr[a + 1]):
            if abs(w[f]) > min_abs:
                out.write(f"{name}\t{segments.labels[lab[f]]}\t{w[f]:.6f}\n")
