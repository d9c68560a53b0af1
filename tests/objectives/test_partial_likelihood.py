"""The likelihood of partial labels and the expected entity ratio through the objectives: finite
differences of their gradients (order 1 and label pairs), and the hinge's value."""

import random

import numpy as np
import pytest

from corpora import sentences
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.objectives import Likelihood
from crftk.objectives.entity_ratio import SMOOTHING, EntityRatio, rounded_hinge
from crftk.structures import make_structure
from crftk.structures.pairs import pair_sentences

TEMPLATE = parse_template("U00:%x[0,0]\nU01:%x[-1,0]\nB\n")


def _corpus(order, seed=0, n=12):
    rng = random.Random(seed)
    rows_list = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(1, 5)):
            w = rng.randrange(5)
            label = ("B-X", "I-X", "O")[w % 3]
            r = rng.random()
            label = "?" if r < 0.25 else (f"{label}|O" if r < 0.35 and label != "O" else label)
            rows.append([f"w{w}", label])
        rows_list.append(rows)
    sents = sentences(rows_list)
    if order == 2:
        sents = list(pair_sentences(sents, 1, "?"))
    space, corpus = FeatureSpace.fit(sents, TEMPLATE, label_col=1, unknown_label="?", pairs=order == 2)
    assert corpus.allowed is not None
    structure = make_structure("chain" if order == 1 else "pairs", space)
    return structure.bind(corpus, 1)


def _fd(obj, x, coords, eps=1e-6):
    f0, g = obj(x)
    for i in coords:
        e = np.zeros_like(x)
        e[i] = eps
        fd = (obj(x + e)[0] - obj(x - e)[0]) / (2 * eps)
        assert fd == pytest.approx(g[i], rel=1e-5, abs=1e-6), i


@pytest.mark.parametrize("order", [1, 2])
def test_partial_likelihood_gradient(order):
    inference = _corpus(order)
    obj = Likelihood(inference, c2=0.1)
    rng = np.random.default_rng(1)
    x = rng.normal(scale=0.3, size=obj.n_params)
    _fd(obj, x, rng.choice(x.size, min(40, x.size), replace=False))


@pytest.mark.parametrize("order", [1, 2])
def test_entity_ratio_gradient_away_from_the_kink(order):
    inference = _corpus(order, seed=2)
    rng = np.random.default_rng(3)
    x = rng.normal(scale=0.3, size=inference.structure.n_params)
    plain = Likelihood(inference, c2=0.1)
    obj = EntityRatio(inference, ratio=0.05, margin=0.01, weight=2.0, c2=0.1)
    f, _ = obj(x)
    gap = abs(obj.rho_hat - 0.05) - 0.01
    assert gap > 0.05                           # on the hinge's slope, far from its kink
    assert f == pytest.approx(plain(x)[0] + 2.0 * inference.corpus.n_tokens * (gap - SMOOTHING / 2), rel=1e-12)
    _fd(obj, x, rng.choice(x.size, min(40, x.size), replace=False))


def test_entity_ratio_gradient_on_the_rounded_corner():
    inference = _corpus(1, seed=2)
    rng = np.random.default_rng(3)
    x = rng.normal(scale=0.3, size=inference.structure.n_params)
    probe = EntityRatio(inference, ratio=0.0, margin=0.0, c2=0.1)
    probe(x)
    # a margin that leaves the expected share a quarter of the rounding inside the corner
    obj = EntityRatio(inference, ratio=0.0, margin=probe.rho_hat - SMOOTHING / 4, weight=2.0, c2=0.1)
    f, _ = obj(x)
    excess = SMOOTHING / 4
    assert f == pytest.approx(Likelihood(inference, c2=0.1)(x)[0]
                              + 2.0 * inference.corpus.n_tokens * excess ** 2 / (2 * SMOOTHING), rel=1e-9)
    _fd(obj, x, rng.choice(x.size, min(40, x.size), replace=False))


def test_rounded_hinge_is_continuous_with_a_continuous_slope():
    for edge in (0.0, SMOOTHING):
        below, above = rounded_hinge(edge - 1e-12), rounded_hinge(edge + 1e-12)
        assert below[0] == pytest.approx(above[0], abs=1e-10)
        assert below[1] == pytest.approx(above[1], abs=1e-9)
    assert rounded_hinge(0.5) == (0.5 - SMOOTHING / 2, 1.0)


def test_entity_ratio_inside_the_margin_is_the_likelihood():
    inference = _corpus(1, seed=4)
    x = np.zeros(inference.structure.n_params)
    probe = EntityRatio(inference, ratio=0.5, margin=0.0, c2=0.1)
    probe(x)
    obj = EntityRatio(inference, ratio=probe.rho_hat, margin=0.01, c2=0.1)
    f, g = obj(x)
    f0, g0 = Likelihood(inference, c2=0.1)(x)
    assert f == f0 and np.array_equal(g, g0)


def test_outside_label_must_exist():
    from crftk.errors import CrftkError
    with pytest.raises(CrftkError, match="--outside-label 'N' is not a label"):
        EntityRatio(_corpus(1), ratio=0.2, outside="N")
