"""crftk bag: training a bag, its model file, tagging with each combination, the seq-poe export,
the weights, and the errors a user can cause."""

import itertools

import numpy as np
import pytest
from click.testing import CliRunner

from corpora import random_corpus
from crftk.cli import main
from crftk.commands.bag import bag
from crftk.training.bagging import fit_bag, random_bags
from crftk.commands.tag import tagger_for
from crftk.ensemble.bag import Bag
from crftk.ensemble.combine import Evidence, combine
from crftk.ensemble.merge import seq_poe_model
from crftk.errors import CrftkError
from crftk.features.templates import parse_template

from crftk.model import Model

WORD_BAG = "Uw-1:%x[-1,0]\nUw0:%x[0,0]\nUw+1:%x[1,0]\nUs:%suf[0,0,1]\n\nB\n"
TAG_BAG = "Up-1:%x[-1,1]\nUp0:%x[0,1]\nUw0:%x[0,0]\nUp0w+1:%x[0,1]/%x[1,0]/%x[-1,1]\n\nB\n"
EDGE_BAG = "Up0:%x[0,1]\nUw0:%x[0,0]\n\nB\nBp:%x[0,1]\n"
OPTS = dict(max_iter=30, threads=1)


def write(path, sents):
    with open(path, "w") as fh:
        for s in sents:
            fh.write("".join(" ".join(r) + "\n" for r in s.rows) + "\n")
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bag")
    (d / "words.tmpl").write_text(WORD_BAG)
    (d / "tags.tmpl").write_text(TAG_BAG)
    (d / "edges.tmpl").write_text(EDGE_BAG)
    train = write(d / "train.txt", random_corpus(120, seed=1))
    dev = write(d / "dev.txt", random_corpus(40, seed=2))
    return d, train, dev


@pytest.fixture(scope="module")
def bagged(files):
    d, train, dev = files
    path = str(d / "model.bag")
    model = bag([train], [str(d / "words.tmpl"), str(d / "tags.tmpl")], path, dev_file=dev, log=None,
                export_path=str(d / "poe.model"), **OPTS)
    return path, model


def sentences_of(path):
    from crftk.io.conll import read_corpus
    return read_corpus(path)


def test_bag_file_holds_a_part_per_member_and_the_chosen_weights(files, bagged):
    d, train, dev = files
    path, model = bagged
    loaded = Model.load(path)
    assert [p.name for p in loaded.parts] == ["words", "tags"]
    record = loaded.info["bag"]
    assert record["members"] == ["words", "tags"]
    assert set(record["weights"]) == {"seq-poe", "seq-mixture", "trans-mixture", "trans-poe"}
    for w in record["weights"].values():
        assert len(w) == 2 and sum(w) == pytest.approx(1.0)
        assert all(round(x / 0.05) * 0.05 == pytest.approx(x) for x in w)       # the 0.05 grid
    assert record["combine"] == max(record["dev_f1"], key=record["dev_f1"].get)
    # the L-BFGS memory its chain members trained with, not the unset None of the options
    assert loaded.info["options"]["history"] == 6
    # each member is the CRF that train would give on its template
    from crftk.commands.train import fit
    from crftk.features.templates import read_template
    alone = fit(sentences_of(train), read_template(str(d / "words.tmpl")), log=lambda m: None, **OPTS)
    np.testing.assert_array_equal(loaded.parts[0].weights, alone.weights)


def test_tag_uses_the_chosen_combination_and_reaches_its_dev_f1(files, bagged):
    from crftk.evaluation.conlleval import evaluate
    _, _, dev = files
    path, _ = bagged
    model = Model.load(path)
    record = model.info["bag"]
    for method in ["chosen", "seq-poe", "seq-mixture", "trans-mixture", "trans-poe"]:
        tagger = tagger_for(model, combine=method)
        sents = sentences_of(dev)
        pred = tagger.tag(sents)
        gold = [[r[-1] for r in s.rows] for s in sents]
        want = record["dev_f1"][record["combine"] if method == "chosen" else method]
        assert evaluate(gold, pred).overall.f1 == pytest.approx(want)


def test_exported_seq_poe_model_tags_like_the_product_of_experts(files, bagged):
    d, _, dev = files
    path, _ = bagged
    bag_ = Bag.from_model(Model.load(path))
    exported = Model.load(str(d / "poe.model"))
    assert len(exported.parts) == 1 and "bag" not in exported.info
    sents = sentences_of(dev)
    lam = bag_.weights("seq-poe")
    ev, corpus = bag_.evidence(sents)
    want_state = sum(l * s for l, (s, _) in zip(lam, ev.tables))
    inf = exported.structure.bind(exported.space.encode(sents))
    np.testing.assert_allclose(inf.state_matrix(exported.weights), want_state, atol=1e-12)
    pred, _ = inf.best(exported.weights)
    np.testing.assert_array_equal(pred, combine(ev, "seq-poe", lam).best()[0])


def test_seq_poe_scores_like_the_weighted_sum_of_log_probabilities(files):
    """log p(y) of the averaged model = sum_i l_i log p_i(y) + a constant per sentence."""
    d, train, dev = files
    sents = sentences_of(train)
    templates = [parse_template(WORD_BAG, str(d / "w.tmpl")), parse_template(EDGE_BAG, str(d / "e.tmpl"))]
    model = fit_bag(sents, templates, log=None, weights_by="uniform", **OPTS)
    bag_ = Bag.from_model(model)
    lam = np.array([0.3, 0.7])
    merged = seq_poe_model(bag_, lam)
    test = sentences_of(dev)[:6]
    ev, _ = bag_.evidence(test)
    minf = merged.structure.bind(merged.space.encode(test))
    logz = minf.marginals(merged.weights)[1]
    L = len(bag_.labels)
    for s, sent in enumerate(test[:4]):
        T = len(sent.rows)
        sub = Evidence(np.array([0, T]), [(st[ev.sent_ptr[s]:ev.sent_ptr[s] + T],
                                          tr if tr.ndim == 2 else tr[ev.sent_ptr[s]:ev.sent_ptr[s] + T])
                                         for st, tr in ev.tables])
        one = merged.structure.bind(merged.space.encode([sent]))
        diffs = []
        for y in itertools.product(range(L), repeat=T):
            y = np.array(y, dtype=np.int32)
            mine = one.sequence_scores(merged.weights, y)[0] - logz[s]
            theirs = float(lam @ sub.sequence_logprob(y)[:, 0])
            diffs.append(mine - theirs)
        assert np.ptp(diffs) < 1e-9


def test_cli_bag_tag_and_info(files, tmp_path):
    d, train, dev = files
    runner = CliRunner()
    model = str(tmp_path / "b.bag")
    r = runner.invoke(main, ["bag", "-t", str(d / "words.tmpl"), "-t", str(d / "edges.tmpl"), "-m", model,
                             "--dev", dev, "--max-iter", "20", "-p", "1", train])
    assert r.exit_code == 0, r.output
    assert "bag words: F1" in r.output and "seq-poe: weights words=" in r.output
    r = runner.invoke(main, ["tag", "-m", model, "--combine", "trans-poe", "-v", dev])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("# prob ")
    r = runner.invoke(main, ["info", model])
    assert "training.bag.weights.seq-poe" in r.output and "parts.edges.parameters" in r.output


def test_weights_by_em_and_uniform(files):
    d, train, dev = files
    templates = [parse_template(WORD_BAG, "w.tmpl"), parse_template(TAG_BAG, "t.tmpl")]
    sents, dv = sentences_of(train), sentences_of(dev)
    uni = fit_bag(sents, templates, dev=dv, weights_by="uniform", log=None, **OPTS).info["bag"]
    assert all(w == [0.5, 0.5] for w in uni["weights"].values())
    got = fit_bag(sents, templates, dev=dv, weights_by="em", log=None, **OPTS).info["bag"]
    assert got["weights_by"]["seq-mixture"] == "em" and got["weights_by"]["trans-mixture"] == "em"
    # EM's weights do not lower the held-out likelihood below that of any grid point
    bag_ = Bag.from_model(fit_bag(sents, templates, dev=dv, weights_by="em", log=None, **OPTS))
    ev, corpus = bag_.evidence(dv)
    logp = ev.sequence_logprob(corpus.labels)

    def loglik(w):
        return float(np.log(np.asarray(w) @ np.exp(logp)).sum())

    best = loglik(got["weights"]["seq-mixture"])
    assert all(best >= loglik([a, 1 - a]) - 1e-6 for a in np.linspace(0, 1, 21))


def test_cross_validation_chooses_weights_without_dev(files):
    d, train, _ = files
    templates = [parse_template(WORD_BAG, "w.tmpl"), parse_template(TAG_BAG, "t.tmpl")]
    logged = []
    model = fit_bag(sentences_of(train), templates, cv=2, log=logged.append, **OPTS)
    record = model.info["bag"]
    assert record["held_out"].startswith("2-fold")
    assert set(record["dev_f1"]) == set(record["weights"])
    assert any("cross-validation fold 2/2" in line for line in logged)


def test_random_bags_draw_subsets_of_the_u_lines(files):
    template = parse_template(TAG_BAG + "Ux:%x[1,1]\nUy:%x[-1,0]\n", "t.tmpl")
    bags = random_bags(template, 3, 0.5, seed=4)
    texts = {line.text for line in template.unigrams}
    for b in bags:
        assert len(b.unigrams) == 3 and {line.text for line in b.unigrams} <= texts and b.label_bigram
    assert random_bags(template, 3, 0.5, seed=4)[1].text == bags[1].text
    d, train, _ = files
    model = fit_bag(sentences_of(train), [template], random_bags=2, seed=1, log=None, **OPTS)
    assert model.info["bag"]["members"] == ["random1", "random2"]


def test_weight_file_for_tagging(files, bagged, tmp_path):
    _, _, dev = files
    path, _ = bagged
    wf = tmp_path / "w.txt"
    wf.write_text("# two bags\nwords 3\ntags 1\n")
    model = Model.load(path)
    tagger = tagger_for(model, combine="trans-mixture", weights=str(wf))
    np.testing.assert_allclose(tagger.combination_weights, [0.75, 0.25])
    wf.write_text("trans-poe words=1 tags=0\n")
    assert tagger_for(model, combine="trans-poe", weights=str(wf)).combination_weights.tolist() == [1, 0]


@pytest.mark.parametrize("text, message", [
    ("words 1\n", "2:.*no weight for bag member 'tags'|1: no weight for bag member 'tags'"),
    ("words 1\ntags 1\nother 2\n", "3: the bag has no member 'other'"),
    ("words 1\ntags -1\n", "2: weight -1 is not a finite number >= 0"),
    ("words 0\ntags 0\n", "2: bag weights must be finite"),
    ("words one\ntags 1\n", "1: 'one' is not a weight"),
    ("words 1 2\n", "1: expected 'NAME WEIGHT'"),
    # several bad lines: the first one is reported
    ("other 2\nwords 1\ntags 1\n", "1: the bag has no member 'other'"),
    ("words 1\nzz 1\ntags 1\nyy 1\n", "2: the bag has no member 'zz'"),
    ("seq-poe words=0 tags=0\ntrans-poe words=1 tags=1\nwords x\n", "1: bag weights must be finite"),
    ("seq-poe words=0 tags=0\nseq-poe words=1 tags=1\n", "1: bag weights must be finite"),
    ("seq-poe words=1 tags=1\nseq-poe words=1 tags=2\n", "2: combination seq-poe is given twice"),
    ("seq-poe words=1 tags=1 words=2\n", "1: bag 'words' is given twice"),
])
def test_weight_file_that_does_not_match_is_one_line_exit_1(files, bagged, tmp_path, text, message):
    _, _, dev = files
    path, _ = bagged
    wf = tmp_path / "w.txt"
    wf.write_text(text)
    out = tmp_path / "out.txt"
    r = CliRunner().invoke(main, ["tag", "-m", path, "--weights", str(wf), "-o", str(out), dev])
    assert r.exit_code == 1
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"crftk: error: {wf}:")
    import re
    assert re.search(message, lines[0]), lines[0]
    assert not out.exists()


def test_one_bag_only_is_refused_before_training(files, tmp_path):
    d, train, dev = files
    model = tmp_path / "one.bag"
    r = CliRunner().invoke(main, ["bag", "-t", str(d / "words.tmpl"), "-m", str(model), train])
    assert r.exit_code == 1
    assert r.output.strip() == ("crftk: error: a bag needs at least two feature bags: give -t twice or more, "
                                "or --random-bags K with one template")
    assert not model.exists()


def test_bags_on_different_label_sets_are_refused(files, tmp_path):
    d, train, _ = files
    sents = sentences_of(train)
    m1 = fit_bag(sents, [parse_template(WORD_BAG, "a"), parse_template(TAG_BAG, "b")], log=None, **OPTS)
    # a member trained on data without the label B-Y
    other = [s for s in sents if all(r[-1] != "B-Y" for r in s.rows)]
    from crftk.commands.train import fit
    narrow = fit(other, parse_template(WORD_BAG, "c"), log=lambda m: None, **OPTS)
    members = Bag.from_model(m1).members
    with pytest.raises(CrftkError, match="bags must share one label set"):
        Bag([members[0], narrow], ["a", "c"], {})
    # and a model file whose parts disagree is refused at load, in one line
    forged = Bag(members, ["a", "b"], {**m1.info["bag"], "members": ["a", "b"]}).to_model()
    forged.parts[1].space = narrow.space
    forged.parts[1].weights = narrow.weights
    path = tmp_path / "forged.bag"
    forged.save(str(path))
    out = tmp_path / "o.txt"
    r = CliRunner().invoke(main, ["tag", "-m", str(path), "-o", str(out), train])
    assert r.exit_code == 1 and len(r.output.strip().splitlines()) == 1
    assert "bags must share one label set" in r.output and str(path) in r.output
    assert not out.exists()


def test_combine_options_need_a_bag(files, bagged, tmp_path):
    d, train, dev = files
    plain = tmp_path / "plain.model"
    r = CliRunner().invoke(main, ["train", "-t", str(d / "words.tmpl"), "-m", str(plain), "--max-iter", "5",
                                  "-q", train])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["tag", "-m", str(plain), "--combine", "seq-poe", dev])
    assert r.exit_code == 1 and "--combine, --decode and --weights are for bags" in r.output


def test_bag_options_are_checked(files):
    d, train, _ = files
    t = [parse_template(WORD_BAG, "w"), parse_template(TAG_BAG, "t")]
    with pytest.raises(CrftkError, match="first-order CRFs"):
        fit_bag(sentences_of(train), t, order=2, log=None)
    with pytest.raises(CrftkError, match="drop --model-type semimarkov$"):
        fit_bag(sentences_of(train), t, model_type="semimarkov", log=None)
    with pytest.raises(CrftkError, match="--grid-step must be"):
        fit_bag(sentences_of(train), t, grid_step=0, log=None)
    with pytest.raises(CrftkError, match="--combine must be one of"):
        fit_bag(sentences_of(train), t, combine="vote", log=None)


def test_bags_in_parallel_give_the_same_members(files):
    d, train, _ = files
    t = [parse_template(WORD_BAG, "w"), parse_template(TAG_BAG, "t")]
    sents = sentences_of(train)
    a = fit_bag(sents, t, parallel="threads", log=None, **OPTS)
    b = fit_bag(sents, t, parallel="bags", log=None, **dict(OPTS, threads=2))
    for pa, pb in zip(a.parts, b.parts):
        np.testing.assert_allclose(pa.weights, pb.weights, rtol=1e-9, atol=1e-12)


def test_python_api_bag_matches_the_command(files, bagged, tmp_path):
    import crftk
    from crftk.io.conll import read_corpus
    d, train, dev = files
    X, y = crftk.read_conll(train, label_col=-1)
    Xd, yd = crftk.read_conll(dev, label_col=-1)
    b = crftk.Bag([str(d / "words.tmpl"), str(d / "tags.tmpl")], **OPTS).fit(X, y, Xd, yd)
    _, model = bagged
    assert b.model_.info["bag"]["weights"] == model.info["bag"]["weights"]
    assert b.classes_ == model.labels
    sents = read_corpus(dev)
    for method in ["seq-poe", "trans-poe"]:
        want = tagger_for(model, combine=method).tag(sents)
        assert b.predict(Xd, combine=method) == want
    marg = b.predict_marginals(Xd[:3], combine="seq-mixture")
    for m, x in zip(marg, Xd[:3]):
        assert m.shape == (len(x), len(b.classes_))
        np.testing.assert_allclose(m.sum(axis=1), 1.0)
    assert b.score(Xd, yd, combine="seq-poe") == pytest.approx(model.info["bag"]["dev_f1"]["seq-poe"])
    exported = b.export(str(tmp_path / "poe.model"))
    assert crftk.CRF.load(str(tmp_path / "poe.model")).predict(Xd) == b.predict(Xd, combine="seq-poe")
    assert exported.info["bag_export"]["members"] == ["words", "tags"]


def test_bag_weight_file_is_checked_before_training_and_then_used(files, tmp_path):
    d, train, dev = files
    wf = tmp_path / "w.txt"
    wf.write_text("words 1\nwrong 1\n")
    model = tmp_path / "w.bag"
    args = ["bag", "-t", str(d / "words.tmpl"), "-t", str(d / "tags.tmpl"), "-m", str(model), "--weights",
            str(wf), "--max-iter", "5", train]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and r.output.startswith(f"crftk: error: {wf}:2: the bag has no member 'wrong'")
    assert "read " not in r.output and not model.exists()      # refused before any training
    wf.write_text("words 1\ntags 3\ntrans-poe words=1 tags=1\n")
    r = CliRunner().invoke(main, args + ["--dev", dev])
    assert r.exit_code == 0, r.output
    record = Model.load(str(model)).info["bag"]
    assert record["weights"]["seq-poe"] == [0.25, 0.75] and record["weights"]["trans-poe"] == [0.5, 0.5]
    assert record["weights_by"]["seq-mixture"] == "file"


def test_tag_nbest_and_max_marginal_with_a_bag(files, bagged):
    _, _, dev = files
    path, _ = bagged
    r = CliRunner().invoke(main, ["tag", "-m", path, "--combine", "trans-poe", "-n", "2", dev])
    assert r.exit_code == 0 and r.output.startswith("# nbest 0 ")
    r = CliRunner().invoke(main, ["tag", "-m", path, "--combine", "seq-mixture", "--decode", "max-marginal", dev])
    assert r.exit_code == 0, r.output
    bag_ = Bag.from_model(Model.load(path))
    sents = sentences_of(dev)
    ev, corpus = bag_.evidence(sents)
    node = np.tensordot(bag_.weights("seq-mixture"), ev.conditionals()[1], axes=1)
    want = np.asarray(bag_.labels)[node.argmax(axis=1)]
    got = [line.split()[-1] for line in r.output.splitlines() if line.strip()]
    assert got == want.tolist()


def test_cli_tag_of_a_bag_of_plain_column_templates_combines_the_bags(files, tmp_path):
    """Plain-column templates take tag's compiled path for one CRF; a bag must not (it would tag
    with its first member only)."""
    d, train, dev = files
    (tmp_path / "a.tmpl").write_text("Uw0:%x[0,0]\nUw-1:%x[-1,0]\n\nB\n")
    (tmp_path / "b.tmpl").write_text("Up0:%x[0,1]\nUp-1p0:%x[-1,1]/%x[0,1]\n\nB\n")
    model = str(tmp_path / "plain.bag")
    r = CliRunner().invoke(main, ["bag", "-t", str(tmp_path / "a.tmpl"), "-t", str(tmp_path / "b.tmpl"), "-m",
                                  model, "--max-iter", "20", "-p", "1", "-q", train])
    assert r.exit_code == 0, r.output
    loaded = Model.load(model)
    sents = sentences_of(dev)
    for method in ["seq-poe", "trans-mixture"]:
        r = CliRunner().invoke(main, ["tag", "-m", model, "--combine", method, dev])
        assert r.exit_code == 0, r.output
        got = [line.split()[-1] for line in r.output.splitlines() if line.strip()]
        want = [lab for s in tagger_for(loaded, combine=method).tag(sents) for lab in s]
        assert got == want
    first = tagger_for(Bag.from_model(loaded).members[0]).tag(sents)
    assert want != [lab for s in first for lab in s]      # the combination is not the first bag alone


def test_the_seq_poe_export_holds_real_valued_lines():
    # found in review: crftk bag --export with a %num line ended in a traceback (KeyError in the
    # merge, which looked the line up among the vocabularies it has none of)
    from crftk.io.conll import Sentence
    sents = [Sentence([[r[0], f"{len(r[0]) / 3 - 1:.2f}", *r[1:]] for r in s.rows], s.doc, s.line, s.source)
             for s in random_corpus(60, seed=3)]
    templates = [parse_template("U0:%x[0,0]\nU1:%num[0,1]\nB\n"),
                 parse_template("U2:%x[0,2]\nU1:%num[0,1]\nU3:%num[-1,1]\nB\n")]
    model = fit_bag(sents, templates, log=None, weights_by="uniform", **OPTS)
    bag_ = Bag.from_model(model)
    lam = np.array([0.3, 0.7])
    merged = seq_poe_model(bag_, lam)
    test = sents[:10]
    ev, _ = bag_.evidence(test)
    inf = merged.structure.bind(merged.space.encode(test))
    np.testing.assert_allclose(inf.state_matrix(merged.weights), sum(l * s for l, (s, _) in zip(lam, ev.tables)),
                               atol=1e-12)
    back = Model.from_bytes(merged.to_bytes())
    assert back.structure.bind(back.space.encode(test)).best(back.weights)[0].tolist() == \
        combine(ev, "seq-poe", lam).best()[0].tolist()
