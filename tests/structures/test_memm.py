import itertools

import numpy as np
import pytest

from corpora import random_corpus
from crftk.features.space import FeatureSpace
from crftk.objectives import Likelihood
from crftk.structures.memm import MEMM, viterbi
from crftk.features.templates import parse_template

TEMPLATE = "U:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,0]/%x[0,1]\nB\n"


def local_logprob(space, corpus, w, t, prev, cur):
    """log p(cur | prev, x) at token t, from the definition (prev None at a sentence start)."""
    lay = space.layout()
    L = space.n_labels
    scores = np.zeros(L)
    for k in range(corpus.attr_ptr[t], corpus.attr_ptr[t + 1]):
        a = corpus.attrs[k]
        for f in range(space.feat_ptr[a], space.feat_ptr[a + 1]):
            scores[space.feat_label[f]] += w[f]
    scores += w[lay["start"]] if prev is None else w[lay["trans"]].reshape(L, L)[prev]
    return scores[cur] - np.logaddexp.reduce(scores)


@pytest.fixture
def small():
    space, corpus = FeatureSpace.fit(random_corpus(12, seed=3, max_len=4), parse_template(TEMPLATE))
    w = np.random.default_rng(1).normal(size=space.n_params)
    return space, corpus, w


def test_value_matches_the_definition(small):
    space, corpus, w = small
    obj = Likelihood(MEMM(space).bind(corpus), c2=0.0)
    want = 0.0
    for s in range(corpus.n_sentences):
        t0, t1 = corpus.sent_ptr[s], corpus.sent_ptr[s + 1]
        for t in range(t0, t1):
            prev = None if t == t0 else corpus.labels[t - 1]
            want -= local_logprob(space, corpus, w, t, prev, corpus.labels[t])
    assert obj(w)[0] == pytest.approx(want)


def test_gradient_matches_finite_differences(small):
    space, corpus, w = small
    obj = Likelihood(MEMM(space).bind(corpus), c2=0.4, frozen=MEMM(space).fixed(parse_template(TEMPLATE)))
    f, g = obj(w)
    lay = space.layout()
    assert np.all(g[lay["end"]] == 0)
    for i in np.random.default_rng(2).choice(lay["end"].start, size=25, replace=False):
        e = np.zeros_like(w)
        e[i] = 1e-6
        assert (obj(w + e)[0] - obj(w - e)[0]) / 2e-6 == pytest.approx(g[i], rel=1e-5, abs=1e-6)


def test_viterbi_maximizes_the_product_of_local_probabilities(small):
    space, corpus, w = small
    pred = viterbi(space, corpus, w)
    L = space.n_labels
    for s in range(corpus.n_sentences):
        t0, t1 = int(corpus.sent_ptr[s]), int(corpus.sent_ptr[s + 1])
        best, arg = -np.inf, None
        for y in itertools.product(range(L), repeat=t1 - t0):
            v = sum(local_logprob(space, corpus, w, t0 + i, None if i == 0 else y[i - 1], y[i])
                    for i in range(len(y)))
            if v > best:
                best, arg = v, y
        assert tuple(pred[t0:t1]) == arg


def test_memm_trains_and_tags_through_the_commands(tmp_path):
    import io
    from crftk.commands.tag import tag_files
    from crftk.errors import CrftkError
    from crftk.model import Model
    from crftk.commands.train import train
    sents = random_corpus(150, seed=5)
    (tmp_path / "train.txt").write_text("".join("\n".join(" ".join(r) for r in s.rows) + "\n\n"
                                                for s in sents))
    (tmp_path / "t.tmpl").write_text(TEMPLATE)
    train([tmp_path / "train.txt"], tmp_path / "t.tmpl", tmp_path / "m.model", log=lambda m: None,
          model_type="memm", dev_file=tmp_path / "train.txt")
    model = Model.load(tmp_path / "m.model")
    assert model.model_type == "memm"
    out = io.StringIO()
    tag_files(model, [str(tmp_path / "train.txt")], out)
    rows = [l.split() for l in out.getvalue().splitlines() if l]
    pred = viterbi(model.space, model.space.encode(sents), model.weights)
    assert [r[-1] for r in rows] == [model.labels[i] for i in pred]
    assert np.mean([r[2] == r[3] for r in rows]) > 0.95
    with pytest.raises(CrftkError, match="CRFs only"):
        tag_files(model, [str(tmp_path / "train.txt")], io.StringIO(), marginals=1)
    with pytest.raises(CrftkError, match="lbfgs"):
        train([tmp_path / "train.txt"], tmp_path / "t.tmpl", log=lambda m: None, model_type="memm",
              algorithm="perceptron")


def test_a_transition_template_with_macros_is_refused_at_its_line(tmp_path):
    # found by the fuzz suite: the error named neither the template nor its line
    from crftk.commands.train import train
    from crftk.errors import CrftkError
    (tmp_path / "t.tmpl").write_text("U:%x[0,0]\nB%x[0,0]\n")
    (tmp_path / "d.txt").write_text("a A\nb B\n\n")
    with pytest.raises(CrftkError, match="MEMMs do not support") as e:
        train([tmp_path / "d.txt"], tmp_path / "t.tmpl", None, log=lambda m: None, model_type="memm")
    assert (e.value.path, e.value.line) == (str(tmp_path / "t.tmpl"), 2)
