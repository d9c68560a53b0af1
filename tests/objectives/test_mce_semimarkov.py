"""MCE (Suzuki et al.'s sentence error count) on a semi-Markov CRF: the competitor is the best
incorrect segmentation (2-best), the gradient F(competitor) - F(gold) counted over whole segments."""

import numpy as np
import pytest

import crftk
from crftk.io.conll import Sentence
from crftk.objectives.mce import MCE

X = [[["the", "DT"], ["dog", "NN"], ["runs", "VBZ"], [".", "."]], [["a", "DT"], ["big", "JJ"], ["cat", "NN"]],
     [["dogs", "NNS"], ["run", "VBP"]], [["the", "DT"], ["cat", "NN"], ["runs", "VBZ"]]]
Y = [["B-NP", "I-NP", "B-VP", "O"], ["B-NP", "I-NP", "I-NP"], ["B-NP", "B-VP"], ["B-NP", "I-NP", "B-VP"]]
IOBES = [["B-NP", "E-NP", "S-VP", "O"], ["B-NP", "I-NP", "E-NP"], ["S-NP", "S-VP"], ["B-NP", "E-NP", "S-VP"]]


@pytest.fixture(scope="module")
def bound():
    model = crftk.CRF("U0:%x[0,0]\nU1:%x[0,1]\nB\nS0:%len\nS1:%first[1]/%last[1]\n", model_type="semimarkov",
                      max_iter=5, threads=1).fit(X, Y).model_
    st = model.structure
    corpus = st.encode([Sentence([r + [t] for r, t in zip(x, y)]) for x, y in zip(X, IOBES)])
    return st, st.bind(corpus), np.concatenate([p.weights for p in model.parts])


def test_value_is_the_sigmoid_of_each_sentence_margin(bound):
    st, inf, w = bound
    mce = MCE(inf, c2=0.0)
    value, _ = mce(w)
    gold = st.gold(inf.corpus)
    paths, scores, counts = inf.nbest(w, 2)
    expected = 0.0
    for s, sl in enumerate(inf.corpus.sentence_slices()):
        wrong = [r for r in range(counts[s]) if not np.array_equal(paths[r, sl], gold[sl])]
        d = scores[s, wrong[0]] - inf.sequence_scores(w, gold)[s]
        expected += 1 / (1 + np.exp(-d))
    assert value == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("smoothing", ["sigmoid", "logistic"])
def test_gradient_matches_finite_differences(bound, smoothing):
    st, inf, w = bound
    rng = np.random.default_rng(3)
    w = w + rng.normal(0, 0.3, w.size)          # away from the trained weights' ties
    mce = MCE(inf, c2=0.01, smoothing=smoothing)
    _, grad = mce(w)
    d = rng.normal(size=w.size)
    h = 1e-6
    fd = (mce(w + h * d)[0] - mce(w - h * d)[0]) / (2 * h)
    assert fd == pytest.approx(grad @ d, rel=1e-5, abs=1e-7)


def test_mce_f_is_refused_for_a_semi_markov_crf_and_mce_is_not():
    from crftk import params
    from crftk.errors import UsageError
    from crftk.training.driver import check_options
    opt = dict(params.defaults(), model_type="semimarkov", algorithm="quickprop")
    check_options(dict(opt, objective="mce"), log=lambda msg: None)
    with pytest.raises(UsageError, match="mce-f trains a first-order CRF with"):
        check_options(dict(opt, objective="mce-f"), log=lambda msg: None)
