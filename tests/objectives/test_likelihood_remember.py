"""Likelihood.remember = False (the driver's choice under L-BFGS): the same value and gradient, bit
for bit, with no copy of the point or of its gradient kept between calls."""

import random

import numpy as np
import pytest

from corpora import sentences
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.objectives import Likelihood
from crftk.structures import make_structure
from crftk.structures.pairs import pair_sentences

TEMPLATE = parse_template("U00:%x[0,0]\nU01:%x[-1,0]\nU02:%x[0,0]/%x[1,0]\nB\n")


def _inference(name):
    rng = random.Random(7)
    rows = [[[f"w{w}", ("B-X", "I-X", "O")[w % 3]] for w in (rng.randrange(9) for _ in range(rng.randint(1, 7)))]
            for _ in range(40)]
    sents = sentences(rows)
    if name == "pairs":
        sents = list(pair_sentences(sents, 1, None))
    space, corpus = FeatureSpace.fit(sents, TEMPLATE, label_col=1, pairs=name == "pairs")
    return make_structure(name, space).bind(corpus, 1)


@pytest.mark.parametrize("name", ["chain", "pairs"])
def test_forgetting_changes_no_bit(name):
    inference = _inference(name)
    remembering, forgetting = Likelihood(inference, c2=0.3), Likelihood(inference, c2=0.3)
    forgetting.remember = False
    rng = np.random.default_rng(0)
    for _ in range(3):
        w = rng.standard_normal(remembering.n_params)
        f1, g1 = remembering(w)
        f2, g2 = forgetting(w)
        assert f1 == f2
        np.testing.assert_array_equal(g1, g2)
        assert forgetting._last is None and remembering._last is not None
    if name != "chain":
        return
    # the remembered pass is still what the expected counts reuse
    passes = remembering.n_evals
    remembering.expected_counts(w)
    assert remembering.n_evals == passes


def test_the_curvature_is_still_given_when_forgetting():
    inference = _inference("chain")
    remembering, forgetting = Likelihood(inference, c2=0.3), Likelihood(inference, c2=0.3)
    forgetting.remember = False
    w = np.random.default_rng(1).standard_normal(remembering.n_params)
    np.testing.assert_array_equal(remembering.curvature(w), forgetting.curvature(w))
