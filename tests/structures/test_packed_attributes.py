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
    # ids up to ~70k: all three bytes of a packed id are used
    rng = np.random.default_rng(11 + valued)
    L = 5
    c = ref.random_corpus(rng, L, rng.integers(1, 30, size=120), n_attrs=70_000, n_eattrs=3,
                          max_attrs=5, valued=valued)
    return c, rng.normal(0.0, 1.0, c.P), rng.integers(0, L, c.N).astype(np.int32)


def pair(c):
    plain, packed = Lattices(*c.arrays()), Lattices(*c.arrays())
    assert packed.pack_attributes() is not None
    return plain, packed


def same(a, b):
    if isinstance(a, tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("valued", [False, True])
@pytest.mark.parametrize("threads", [1, 2])
def test_packed_ids_give_every_kernel_the_same_bits(valued, threads):
    c, w, gold = wide_case(valued)
    assert int(np.asarray(c.arrays()[2]).max()) > 65_535
    plain, packed = pair(c)
    same(packed.loglik(w, gold, threads), plain.loglik(w, gold, threads))
    same(packed.marginals(w, threads), plain.marginals(w, threads))
    same(packed.viterbi(w, threads), plain.viterbi(w, threads))
    same(packed.nbest(w, 3, threads), plain.nbest(w, 3, threads))
    same(packed.state_matrix(w), plain.state_matrix(w))


def test_packing_again_returns_the_same_bytes_and_ids_too_wide_stay_int32(monkeypatch):
    c, w, gold = wide_case(False)
    lat = Lattices(*c.arrays())
    first = lat.pack_attributes()
    assert first.size == 3 * np.asarray(c.arrays()[2]).size + 1
    assert lat.pack_attributes() is first or np.array_equal(lat.pack_attributes(), first)
    monkeypatch.setattr(lattice, "PACKED_IDS", 60_000)       # fewer than the corpus's attributes
    wide = Lattices(*c.arrays())
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
    assert np.asarray(view, dtype=np.int64).dtype == np.int64
    empty = PackedIds(np.zeros(1, dtype=np.uint8))
    assert empty.size == 0 and np.asarray(empty).dtype == np.int32


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
    calls = []
    compact = driver._compact
    monkeypatch.setattr(driver, "_compact", lambda opt, inf: calls.append(inf.compact()))
    packed = fit(sentences(rows), template, log=lambda m: None, max_iter=15, c2=1.0)
    monkeypatch.setattr(driver, "_compact", lambda opt, inf: None)
    plain = fit(sentences(rows), template, log=lambda m: None, max_iter=15, c2=1.0)
    assert calls == [True] and compact is not None
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
    for algorithm in ("lbfgs", "cg", "pcg", "quickprop"):
        Probe.compacted = False
        driver._compact({"objective": "map", "algorithm": algorithm}, Probe())
        assert Probe.compacted
