"""`crftk train/tag/info --format crfsuite` on the inputs a user gets wrong: each refused in one
line naming the file and line, or handled; a model of attributes summarised by `crftk info`."""

import json

from click.testing import CliRunner

from crftk.cli import main

DATA = "".join(f"{'A' if i % 3 else 'B'}\tw={i % 5}\tv:{i / 7:.3f}\n" + ("\n" if i % 4 == 3 else "")
               for i in range(40))


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in r.output
    return r


def trained(tmp_path):
    train, model = tmp_path / "train.crfsuite", tmp_path / "m.crftk"
    train.write_text(DATA)
    assert run("train", "--format", "crfsuite", train, "-m", model, "--max-iter", "20", "-q").exit_code == 0
    return train, model


def test_info_summarises_a_model_of_attributes(tmp_path):
    _, model = trained(tmp_path)
    r = run("info", "--json", model)
    assert r.exit_code == 0, r.output
    summary = json.loads(r.output)
    assert summary["labels"] == ["A", "B"] and summary["attributes"] == 6 and "vectors" not in summary


def test_a_conll_file_given_as_crfsuite_data_names_the_other_format(tmp_path):
    train, model = trained(tmp_path)
    conll = tmp_path / "c.txt"
    conll.write_text("He PRP B-NP\nreckons VBZ B-VP\n\n")
    for args in (["train", "--format", "crfsuite", conll, "-m", tmp_path / "x.crftk"],
                 ["train", "--format", "crfsuite", train, "--dev", conll, "-m", tmp_path / "x.crftk"],
                 ["tag", "--format", "crfsuite", "-m", model, conll]):
        r = run(*args)
        assert r.exit_code == 1 and "c.txt:1: the label 'He PRP B-NP' holds white space" in r.output
        assert "is this a CoNLL file" in r.output
    assert not (tmp_path / "x.crftk").exists()
