"""A training run with threads gives the same weights every time it is run with the same number of
threads: each thread adds the same sentences into its own sums, in the same order (a static
schedule), whichever thread is free first."""

import numpy as np
import pytest

from corpora import random_corpus, factorial_sentences, write_conll
from crftk.commands.train import train

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[1,0]\nU03:%x[0,1]\nU04:%x[0,0]/%x[0,1]\nB\n"


def _weights(tmp_path, sents, name, runs=4, **options):
    data = tmp_path / f"{name}.txt"
    write_conll(data, sents)
    tmpl = tmp_path / f"{name}.tmpl"
    tmpl.write_text(options.pop("template", TEMPLATE))
    out = []
    for _ in range(runs):
        model = train([str(data)], str(tmpl), None, log=lambda msg: None, threads=2, max_iter=8, c2=0.5,
                      **options)
        out.append(np.asarray(model.weights).copy())
    return out


def _assert_same_bits(weights):
    first = weights[0]
    for w in weights[1:]:
        assert w.shape == first.shape
        assert np.array_equal(w.view(np.uint64), first.view(np.uint64))


def test_a_chain_crf_trained_twice_on_two_threads_has_the_same_weights(tmp_path):
    # thousands of sentences of mixed lengths: a free-for-all schedule hands them out differently
    _assert_same_bits(_weights(tmp_path, random_corpus(3000, seed=5, max_len=30), "chain"))


def test_a_factorial_crf_trained_twice_on_two_threads_has_the_same_weights(tmp_path):
    sents = factorial_sentences(2, n_sentences=1500, seed=3, max_len=12)
    _assert_same_bits(_weights(tmp_path, sents, "fcrf", runs=3, label_col=[1, 2], inference="trp",
                               template="U00:%x[0,0]\nU01:%x[-1,0]\nB\n"))
