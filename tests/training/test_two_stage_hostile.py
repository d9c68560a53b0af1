"""Two-stage models under bad input: each refused in one line, nothing half-written."""

import pytest
from click.testing import CliRunner

from crftk.cli import main
from crftk.errors import CrftkError
from crftk.model import Model
from crftk.training import twostage
from forged import forge
from training.test_two_stage import _corpus


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two")
    train = _corpus(tmp / "train.txt")
    (tmp / "s1.tmpl").write_text("U0:%x[0,0]\nU1:%x[-1,0]\nB\n")
    (tmp / "s2.tmpl").write_text("U0:%x[0,0]\nU1:%x[0,3]\nU2:%doc[0,3,token]\nU3:%corpus[0,3,entity]\nB\n")
    first, two, oof = str(tmp / "s1.model"), str(tmp / "two.model"), str(tmp / "oof.txt")
    r = CliRunner().invoke(main, ["train", "-q", "-t", str(tmp / "s1.tmpl"), "-m", first, train])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["train", "-q", "-t", str(tmp / "s2.tmpl"), "--first-stage", first,
                                  "--first-stage-folds", "2", "--first-stage-output", oof, "-m", two, train])
    assert r.exit_code == 0, r.output
    return tmp, train, first, two, oof


def _columns(src, dst, keep):
    lines = []
    for line in open(src):
        f = line.split()
        lines.append(" ".join(keep(f)) + "\n" if len(f) == 4 else line)
    dst.write_text("".join(lines))
    return str(dst)


def test_input_too_narrow_for_the_first_stage_labels_is_refused_at_its_line(made, tmp_path):
    """Two columns (word POS) of a model whose first stage writes column 3: the labels would land
    in column 2 and the second stage read nothing there."""
    tmp, train, first, two, _ = made
    narrow = _columns(train, tmp_path / "narrow.txt", lambda f: f[:2])
    out = tmp_path / "out.txt"
    r = CliRunner().invoke(main, ["tag", "-m", two, "-o", str(out), narrow])
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert "narrow.txt:3: expected at least 3 columns, found 2" in r.output and "column 3" in r.output
    assert not out.exists()
    import crftk
    with pytest.raises(CrftkError, match="has 2 columns"):
        crftk.TwoStage.load(two).predict([[["Smith", "NNP"]]])
    # the words, POS and chunk columns (no gold) are the input it was made for
    ok = _columns(train, tmp_path / "ok.txt", lambda f: f[:3])
    r = CliRunner().invoke(main, ["tag", "-m", two, "-o", str(out), ok])
    assert r.exit_code == 0, r.output


def test_first_stage_labels_with_another_column_count_are_refused(made, tmp_path):
    tmp, train, first, _, oof = made
    wide = _columns(oof, tmp_path / "wide.txt", lambda f: f + ["X"])
    model = tmp_path / "m.model"
    r = CliRunner().invoke(main, ["train", "-q", "-t", str(tmp / "s2.tmpl"), "--first-stage", first,
                                  "--first-stage-labels", wide, "-m", str(model), train])
    assert r.exit_code == 1 and "wide.txt:3: this sentence is not the training data's" in r.output
    assert not model.exists()


def _stages(meta):
    return meta["info"]["two_stage"]["stages"]


@pytest.mark.parametrize("edit, message", [
    (lambda m: _stages(m).reverse(), "record was trained on label column"),
    (lambda m: _stages(m)[1]["info"].update(train_scheme="xyz", corpus_scheme="iob1"), "training scheme 'xyz'"),
    (lambda m: _stages(m)[0]["info"].update(train_scheme="bilou"), "corpus scheme"),
    (lambda m: m["info"].pop("two_stage"), "does not describe its two stages"),
])
@pytest.mark.parametrize("command", ["tag", "info", "dump"])
def test_forged_two_stage_files_are_refused_by_every_command(made, tmp_path, edit, message, command):
    tmp, train, _, two, _ = made
    bad = forge(two, str(tmp_path / "forged.model"), edit)
    args = [command, bad] if command != "tag" else [command, "-m", bad, train]
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 1 and "Traceback" not in r.output
    assert message in r.output and "forged.model" in r.output
    assert len(r.output.strip().splitlines()) == 1


def test_a_forged_training_scheme_of_a_plain_crf_is_refused(made, tmp_path):
    _, train, first, _, _ = made
    bad = forge(first, str(tmp_path / "forged.model"), lambda m: m["info"].update(train_scheme="iobes",
                                                                                  corpus_scheme="bilou"))
    with pytest.raises(CrftkError, match="corpus scheme 'bilou'"):
        Model.load(bad)


def test_an_interrupt_in_the_second_stage_saves_it_and_the_fold_labels(made, tmp_path, monkeypatch):
    """Ctrl-C while the second stage trains: as crftk train, the last iteration is saved and the
    command ends interrupted; the out-of-fold labels, all finished, are written too."""
    tmp, train, first, _, oof = made
    real_fit = twostage.fit

    def fit(sentences, template, **k):
        if k.get("keep_on_interrupt"):          # the second stage (the folds never keep)
            def log(line):
                if line.startswith("iter    3"):
                    raise KeyboardInterrupt
            k["log"] = log
        return real_fit(sentences, template, **k)

    monkeypatch.setattr(twostage, "fit", fit)
    model, labels = tmp_path / "m.model", tmp_path / "labels.txt"
    r = CliRunner().invoke(main, ["train", "-q", "-t", str(tmp / "s2.tmpl"), "--first-stage", first,
                                  "--first-stage-folds", "2", "--first-stage-output", str(labels), "-m", str(model),
                                  train])
    assert r.exit_code == 130 and "interrupted" in r.output
    from crftk.kinds.twostage import TwoStage
    second = TwoStage.load(str(model)).second
    assert second.info["interrupted"] and second.info["iterations"] == 3
    assert labels.read_text() == open(oof).read()


def test_an_interrupt_during_the_folds_writes_nothing(made, tmp_path, monkeypatch):
    tmp, train, first, _, _ = made
    calls = []

    def fit(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_fit(*a, **k)

    real_fit = twostage.fit
    monkeypatch.setattr(twostage, "fit", fit)
    model, labels = tmp_path / "m.model", tmp_path / "labels.txt"
    r = CliRunner().invoke(main, ["train", "-q", "-t", str(tmp / "s2.tmpl"), "--first-stage", first,
                                  "--first-stage-folds", "3", "--first-stage-output", str(labels), "-m", str(model),
                                  train])
    assert r.exit_code == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_attribute_model_as_first_stage_says_what_it_is(tmp_path, made):
    tmp, train, _, _, _ = made
    attr = tmp_path / "attr.txt"
    attr.write_text("O\tw=the\nI-PER\tw=Smith\n\nO\tw=a\n\n")
    model = str(tmp_path / "attr.model")
    r = CliRunner().invoke(main, ["train", "-q", "--format", "crfsuite", "-m", model, str(attr)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["train", "-q", "-t", str(tmp / "s2.tmpl"), "--first-stage", model, "-m",
                                  str(tmp_path / "m"), train])
    assert r.exit_code == 2 and "CRFsuite file" in r.output
