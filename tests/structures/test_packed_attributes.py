"""A chain's attribute ids held in 3 bytes each (Lattices.pack_attributes, ChainInference.compact,
the training driver's _compact): every kernel reads the same ids, so every result is the same bits,
and numpy code reads the corpus's ids through PackedIds."""

import functools

import numpy as np
import pytest

import crftk._lattice as lattice
import lattice_reference as ref
from corpora import random_corpus, sentences
from crftk._lattice import Lattices
from crftk.features.space import FeatureSpace, PackedIds
from crftk.features.templates import parse_template
from crftk.structures.chain import Chain
from crftk.training import driver, fit


@functools.lru_cache(maxsize=None)
def wide_case(valued):
    """(small, spread, w, gold): a random corpus of 300 attributes, and the same corpus with its
    attributes renumbered, in order, to ids across all 24 bits (2**24 - 1 and the byte borders
    among them): the same features in the same order, so the kernels must give the same bits."""
    rng = np.random.default_rng(11 + valued)
    L = 5
    small = ref.random_corpus(rng, L, rng.integers(1, 30, size=120), n_attrs=300, n_eattrs=3,
                              max_attrs=5, valued=valued)
    borders = [0, 255, 256, 65_535, 65_536, 131_071, 131_072, 1 << 20, (1 << 23) - 1, 1 << 23, (1 << 24) - 1]
    spread_ids = np.unique(np.concatenate([borders, rng.integers(0, 1 << 24, 400)]))
    spread_ids = np.sort(rng.choice(spread_ids, 300, replace=False))
    spread_ids[-1] = (1 << 24) - 1
    counts = np.zeros(1 << 24, dtype=np.int32)
    counts[spread_ids] = np.diff(small.feat_ptr)
    feat_ptr = np.zeros((1 << 24) + 1, dtype=np.int32)
    np.cumsum(counts, out=feat_ptr[1:])
    arrays = list(small.arrays())
    arrays[2] = spread_ids[small.attrs].astype(np.int32)
    arrays[5] = feat_ptr
    return small, tuple(arrays), rng.normal(0.0, 1.0, small.P), rng.integers(0, L, small.N).astype(np.int32)


def pair(arrays):
    """(int32 Lattices, packed Lattices) over the same ids; the packed one's source array is then
    overwritten, so that only the packed bytes can give it the right ids."""
    plain = Lattices(*arrays)
    source = list(arrays)
    source[2] = np.array(arrays[2])
    packed = Lattices(*source)
    assert packed.pack_attributes() is not None
    source[2][:] = 0
    return plain, packed


def same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def partial_labels(rng, gold, L):
    """Labels with ~30% of tokens unknown (-1) and the labels each token allows (one-hot where known)."""
    labels = gold.copy()
    unknown = rng.random(gold.size) < 0.3
    labels[unknown] = -1
    allowed = np.zeros((gold.size, L), dtype=np.uint8)
    allowed[np.arange(gold.size), gold] = 1
    allowed[unknown] |= (rng.random((int(unknown.sum()), L)) < 0.5).astype(np.uint8)
    return labels, allowed


@pytest.mark.parametrize("valued", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_packed_ids_give_every_pass_the_same_bits(valued, threads):
    small, spread, w, gold = wide_case(valued)
    assert int(spread[2].max()) == (1 << 24) - 1
    plain, packed = pair(spread)
    reference = Lattices(*small.arrays())
    rng = np.random.default_rng(threads)
    L, P = small.L, small.P
    labels, allowed = partial_labels(rng, gold, L)
    entity = (np.arange(L) % 2).astype(np.float64)
    decode = (rng.random((small.N, L)) < 0.7).astype(np.uint8)
    decode[np.arange(small.N), gold] = 1
    for lat in (packed, plain):
        same(lat.loglik(w, gold, threads), reference.loglik(w, gold, threads))
        curvature, want = np.empty(P), np.empty(P)
        same(lat.loglik(w, labels, threads, curvature, allowed, entity),
             reference.loglik(w, labels, threads, want, allowed, entity))
        same(curvature, want)
        same(lat.marginals(w, threads, decode), reference.marginals(w, threads, decode))
        same(lat.viterbi(w, threads, decode), reference.viterbi(w, threads, decode))
        same(lat.nbest(w, 3, threads), reference.nbest(w, 3, threads))
        same(lat.state_matrix(w), reference.state_matrix(w))
        same(lat.viterbi_scores(w), reference.viterbi_scores(w))
        same(lat.sequence_scores(w, gold), reference.sequence_scores(w, gold))


@pytest.mark.parametrize("valued", [False, True])
def test_packed_ids_give_the_online_epochs_the_same_bits(valued):
    small, spread, w, gold = wide_case(valued)
    plain, packed = pair(spread)
    P = small.P
    order = np.random.default_rng(5).permutation(small.S).astype(np.int32)
    frozen = np.random.default_rng(6).random(P) < 0.1
    epochs = {
        "perceptron": lambda lat, a, b: lat.perceptron_epoch(a, b, gold, order, 1.0),
        "sgd": lambda lat, a, b: lat.sgd_epoch(a, 1.0, gold, order, 0.01, 10.0, 0.0, 1),
        "pa": lambda lat, a, b: lat.pa_epoch(a, b, gold, order, 1.0, 2, 0.5, True, frozen),
        "arow": lambda lat, a, b: lat.arow_epoch(a, b, gold, order, 0.5, frozen),
    }
    for name, epoch in epochs.items():
        runs = []
        for lat in (plain, packed):
            a, b = w * 0.1, (np.ones(P) if name == "arow" else np.zeros(P))
            out = [epoch(lat, a, b) for _ in range(2)]
            runs.append((out, a, b))
        same(tuple(np.asarray(x) for x in runs[0][0][-1]), tuple(np.asarray(x) for x in runs[1][0][-1]))
        same(runs[0][1], runs[1][1])
        same(runs[0][2], runs[1][2])
        assert not np.array_equal(runs[0][1], w * 0.1), name      # the epochs made updates


def test_packing_again_returns_the_same_bytes_and_ids_too_wide_stay_int32(monkeypatch):
    small, spread, w, gold = wide_case(False)
    lat = Lattices(*spread)
    first = lat.pack_attributes()
    assert first.size == 3 * spread[2].size + 1
    assert np.array_equal(lat.pack_attributes(), first)
    monkeypatch.setattr(lattice, "PACKED_IDS", 299)          # fewer than the corpus's 300 attributes
    wide = Lattices(*small.arrays())
    assert wide.pack_attributes() is None
    same(wide.loglik(w, gold, 1), lat.loglik(w, gold, 1))


def test_packed_ids_read_as_an_int32_array():
    rng = np.random.default_rng(3)
    ids = rng.integers(0, 1 << 24, 5000).astype(np.int32)
    ids[:3] = [0, (1 << 24) - 1, 65_536]
    packed = np.zeros(3 * ids.size + 1, dtype=np.uint8)
    packed[:-1] = ids.astype("<u4").view(np.uint8).reshape(-1, 4)[:, :3].ravel()
    view = PackedIds(packed)
    assert len(view) == view.size == 5000 and view.shape == (5000,)
    same(np.asarray(view), ids)
    same(view[17:4000], ids[17:4000])
    same(view[4000:17], ids[4000:17])
    same(view[::7], ids[::7])
    index = rng.integers(0, 5000, 300)
    same(view[index], ids[index])
    assert view[1] == ids[1] and view[-1] == ids[-1] and view[np.int64(2)] == ids[2]
    with pytest.raises(IndexError):
        view[5000]
    assert np.asarray(view, dtype=np.int64).dtype == np.int64
    empty = PackedIds(np.zeros(1, dtype=np.uint8))
    assert empty.size == 0 and np.asarray(empty).dtype == np.int32


def test_a_corpus_of_ids_too_wide_is_not_compacted(monkeypatch):
    template = parse_template("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nB\n")
    space, corpus = FeatureSpace.fit(random_corpus(20, seed=9), template)
    monkeypatch.setattr(lattice, "PACKED_IDS", 3)
    inference = Chain(space).bind(corpus)
    assert not inference.compact() and isinstance(corpus.attrs, np.ndarray)


def test_a_compacted_corpus_trains_and_binds_alike():
    template = parse_template("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nU02:%x[1,1]\nB\nB03:%x[0,1]\n")
    space, corpus = FeatureSpace.fit(random_corpus(50, seed=8), template)
    ids = np.array(corpus.attrs)
    inference = Chain(space).bind(corpus)
    w = np.random.default_rng(0).normal(size=space.n_params)
    labels = corpus.labels
    before = inference.loglik(w, labels)
    assert inference.compact() and isinstance(corpus.attrs, PackedIds)
    same(inference.loglik(w, labels), before)
    same(np.asarray(corpus.attrs), ids)
    same(Chain(space).bind(corpus).loglik(w, labels), before)     # a new binding unpacks them


def test_training_through_the_driver_packs_and_keeps_the_weights(monkeypatch):
    rows = [[[f"w{(i * 7 + j) % 23}", f"t{j % 3}", "B" if j % 4 == 0 else "I"] for j in range(1 + i % 9)]
            for i in range(60)]
    template = parse_template("U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nU02:%x[0,1]\nB\n")
    packs = []
    real = driver._compact

    def watched(opt, inference):
        real(opt, inference)
        packs.append(isinstance(inference.corpus.attrs, PackedIds))
    monkeypatch.setattr(driver, "_compact", watched)
    packed = fit(sentences(rows), template, log=lambda m: None, max_iter=15, c2=1.0)
    monkeypatch.setattr(driver, "_compact", lambda opt, inference: None)
    plain = fit(sentences(rows), template, log=lambda m: None, max_iter=15, c2=1.0)
    assert packs == [True]
    same(np.asarray(packed.weights), np.asarray(plain.weights))


def test_mce_gis_and_the_online_learners_leave_the_corpus_as_it_is():
    class Probe:
        compacted = False

        def compact(self):
            Probe.compacted = True

    for objective, algorithm in (("mce", "lbfgs"), ("mce-f", "lbfgs"), ("map", "gis"), ("map", "sgd"),
                                 ("map", "perceptron"), ("map", "pa"), ("map", "arow")):
        driver._compact({"objective": objective, "algorithm": algorithm}, Probe())
        assert not Probe.compacted
    for algorithm in ("lbfgs", "cg", "pcg", "mixed-cg", "quickprop"):
        Probe.compacted = False
        driver._compact({"objective": "map", "algorithm": algorithm}, Probe())
        assert Probe.compacted
