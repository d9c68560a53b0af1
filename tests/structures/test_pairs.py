import io
import random

import numpy as np
import pytest

from corpora import random_corpus
from crftk.commands.tag import tag_files
from crftk.features.space import FeatureSpace
from crftk.model import Model
from crftk.objectives import Likelihood
from crftk.structures.pairs import Pairs, current_tag, pair_sentences, pinned
from crftk.features.templates import parse_template
from crftk.commands.train import train


def periodic(n, seed):
    """Tags follow A A B B A A ...; only the first two words reveal the phase."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        phase = rng.randrange(4)
        tags = ["A", "A", "B", "B"] * 4
        tags = tags[phase:phase + rng.randint(6, 12)]
        words = [t.lower() if i < 2 else f"z{rng.randrange(30)}" for i, t in enumerate(tags)]
        out.append("\n".join(f"{w} {t}" for w, t in zip(words, tags)) + "\n\n")
    return "".join(out)


def test_pairs_and_pinned_structure():
    sents = list(pair_sentences(random_corpus(20, seed=1), -1))
    assert sents[0].rows[0][-1].startswith("<s>|")
    space, _ = FeatureSpace.fit(sents, parse_template("U:%x[0,0]\nB\n"))
    mask = pinned(space)
    L = space.n_labels
    lay = space.layout()
    trans = mask[lay["trans"]].reshape(L, L)
    for i, a in enumerate(space.labels):
        for j, b in enumerate(space.labels):
            assert trans[i, j] == (current_tag(a) != b.split("|")[0])
    assert (~mask[lay["start"]]).tolist() == [p.startswith("<s>|") for p in space.labels]


def test_tied_gradient_matches_finite_differences():
    sents = list(pair_sentences(random_corpus(10, seed=2, max_len=4), -1))
    space, corpus = FeatureSpace.fit(sents, parse_template("U:%x[0,0]\nU1:%x[0,1]\nB\n"))
    structure = Pairs(space)
    frozen, value = structure.pinned("none")
    obj = Likelihood(structure.bind(corpus), c2=0.3, frozen=frozen)
    rng = np.random.default_rng(0)
    theta = rng.normal(scale=0.3, size=structure.n_params)
    assert structure.n_params == space.n_params + structure.n_backoff
    theta[frozen] = value
    f, g = obj(theta)
    assert np.all(g[frozen] == 0)
    free = np.flatnonzero(~frozen)
    for i in rng.choice(free, size=20, replace=False):
        e = np.zeros_like(theta)
        e[i] = 1e-6
        num = (obj(theta + e)[0] - obj(theta - e)[0]) / 2e-6
        assert num == pytest.approx(g[i], rel=1e-5, abs=1e-6)
    assert np.all(g[frozen] == 0)


def test_second_order_learns_what_first_order_cannot(tmp_path):
    (tmp_path / "train.txt").write_text(periodic(300, 3))
    (tmp_path / "test.txt").write_text(periodic(100, 4))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text("U:%x[0,0]\nB\n")
    accuracy = {}
    for order in (1, 2):
        train([tmp_path / "train.txt"], tmpl, tmp_path / f"o{order}.model", log=lambda m: None,
              order=order, c2=0.1)
        out = io.StringIO()
        tag_files(Model.load(tmp_path / f"o{order}.model"), [str(tmp_path / "test.txt")], out,
                  marginals=1)
        rows = [l.split() for l in out.getvalue().splitlines() if l and not l.startswith("#")]
        assert all(r[2] in ("A", "B") for r in rows)          # plain tags, not pairs
        assert all(0.0 <= float(r[3]) <= 1.0 for r in rows)
        accuracy[order] = np.mean([r[1] == r[2] for r in rows])
    assert accuracy[2] > 0.97
    assert accuracy[1] < 0.9


def test_dev_scoring_compares_tags_with_tags(tmp_path):
    # the dev F1 training reports for order 2 is the F1 of tagging the dev set with the model
    (tmp_path / "train.txt").write_text(periodic(200, 5))
    (tmp_path / "dev.txt").write_text(periodic(60, 6))
    tmpl = tmp_path / "t.tmpl"
    tmpl.write_text("U:%x[0,0]\nB\n")
    model = train([tmp_path / "train.txt"], tmpl, tmp_path / "o2.model", dev_file=tmp_path / "dev.txt",
                  log=lambda m: None, order=2, c2=0.1, max_iter=30)
    out = io.StringIO()
    tag_files(Model.load(tmp_path / "o2.model"), [str(tmp_path / "dev.txt")], out)
    rows = [l.split() for l in out.getvalue().splitlines() if l]
    from crftk.evaluation.conlleval import evaluate
    gold, pred = [r[1] for r in rows], [r[2] for r in rows]
    assert model.info["best_dev_f1"] == pytest.approx(evaluate([gold], [pred]).overall.f1)
    assert model.info["best_dev_f1"] > 90
