"""The semi-Markov structure (crftk.structures.semimarkov): the map from segment labels to their
tokens' IOBES tags, the refusals of parts that make no structure, sub-corpora for Dask shards,
the layout of its parameters and its inference against enumeration."""

import copy

import numpy as np
import pytest

import crftk
from crftk.errors import CrftkError
from crftk.io.conll import Sentence
from crftk.structures import STRUCTURES, structure_name
from crftk.structures.semimarkov import SemiMarkov, SemiMarkovCorpus, segment_map

X = [[["the", "DT"], ["dog", "NN"], ["runs", "VBZ"], [".", "."]], [["a", "DT"], ["big", "JJ"], ["cat", "NN"]],
     [["dogs", "NNS"], ["run", "VBP"]]]
Y = [["B-NP", "I-NP", "B-VP", "O"], ["B-NP", "I-NP", "I-NP"], ["B-NP", "B-VP"]]


@pytest.fixture(scope="module")
def model():
    return crftk.CRF("U0:%x[0,0]\nU1:%x[0,1]\nB\nS0:%len\nS1:%first[1]/%last[1]\n", model_type="semimarkov", max_iter=15, threads=1).fit(X, Y).model_


def test_segment_map_names_each_position_of_each_label():
    tags = ["B-NP", "E-NP", "I-NP", "O", "S-NP", "S-VP"]
    m = segment_map(tags, ["NP", "O", "VP"])
    assert m.tolist() == [[4, 0, 2, 1], [3, -1, -1, -1], [5, -1, -1, -1]]
    with pytest.raises(CrftkError, match="'B-PP' is not a position"):
        segment_map(tags + ["B-PP"], ["NP", "O", "VP"])
    with pytest.raises(CrftkError, match="'X-NP' is not a position"):
        segment_map(["X-NP"], ["NP", "O"])


def test_registered_and_named_by_the_model_type():
    assert STRUCTURES["semimarkov"] is SemiMarkov and structure_name(1, "semimarkov") == "semimarkov"


def test_parameters_are_the_token_part_then_the_segment_part(model):
    st = model.structure
    assert st.n_params == st.space.n_params + st.segments.n_params
    w = np.arange(st.n_params, dtype=float)
    tok, seg = st.split(w)
    assert tok.size == st.space.n_params and seg.size == st.segments.n_params
    assert st.output_labels == st.space.labels and all(t == "O" or t[1] == "-" for t in st.output_labels)
    assert st.seg_max[st.segments.labels.index("O")] == 1
    assert dict(zip(st.segments.labels, st.seg_max.tolist()))["NP"] == 3


def _segments(space, labels, max_len):
    out = copy.copy(space)
    out.labels, out.max_len = list(labels), np.asarray(max_len, dtype=np.int32)
    return out


def test_parts_that_make_no_structure_are_refused(model):
    st = model.structure
    Y = len(st.segments.labels)
    with pytest.raises(CrftkError, match="one token long"):
        SemiMarkov(st.space, _segments(st.segments, st.segments.labels, np.full(Y, 2)))
    with pytest.raises(CrftkError, match="one positive length per label"):
        SemiMarkov(st.space, _segments(st.segments, st.segments.labels, np.zeros(Y)))
    with pytest.raises(CrftkError, match="is not a position"):
        SemiMarkov(st.space, _segments(st.segments, ["O", "VP"], [1, 1]))
    with pytest.raises(CrftkError, match="drop --constraints"):
        st.pinned("iob2")
    assert st.pinned("none") is None


def _sentences(rows, labels):
    return [Sentence([r + [t] for r, t in zip(x, y)]) for x, y in zip(rows, labels)]


def test_a_subset_is_the_encoding_of_those_sentences(model):
    st = model.structure
    iobes = [["B-NP", "E-NP", "S-VP", "O"], ["B-NP", "I-NP", "E-NP"], ["S-NP", "S-VP"]]
    corpus = st.encode(_sentences(X, iobes))
    assert isinstance(corpus, SemiMarkovCorpus) and corpus.n_tokens == 9 and corpus.n_sentences == 3
    part = corpus.subset(np.array([0, 2]))
    alone = st.encode(_sentences([X[0], X[2]], [iobes[0], iobes[2]]))
    for name in ("sent_ptr", "attr_ptr", "attrs", "labels"):
        assert np.array_equal(getattr(part, name), getattr(alone, name))
    assert np.array_equal(part.segments.seg_ptr, alone.segments.seg_ptr)
    assert np.array_equal(part.segments.seg_attrs, alone.segments.seg_attrs)
    # the gold IOBES labels have a finite likelihood, and the marginals are distributions
    inf = st.bind(corpus)
    w = np.concatenate([p.weights for p in model.parts])
    nll, grad = inf.loglik(w, st.gold(corpus))
    assert np.isfinite(nll) and nll > 0 and grad.shape == (st.n_params,)
    marg, logz = inf.marginals(w)
    assert np.allclose(marg.sum(axis=1), 1) and logz.shape == (3,)
    # pcg's curvature: p(1-p) where the token part's features fire, expected counts elsewhere
    expected = grad + inf.counts(st.gold(corpus))
    h = inf.variance(w, expected)
    assert h.shape == expected.shape and (h >= -1e-12).all()
    lay = st.layout
    assert np.array_equal(h[lay.trans], expected[lay.trans])


def test_no_mask_of_allowed_labels(model):
    st = model.structure
    corpus = st.encode(_sentences(X[:1], [["B-NP", "E-NP", "S-VP", "O"]]))
    inf = st.bind(corpus)
    w = np.zeros(st.n_params)
    with pytest.raises(CrftkError, match="no mask"):
        inf.best(w, allowed=np.ones((4, st.space.n_labels), dtype=np.uint8))
    with pytest.raises(CrftkError, match="no mask"):
        st.state_allowed(corpus, np.ones((4, st.space.n_labels)))
