"""crftk train --init MODEL NEW_DATA with --init-space grow|keep, used as a CRF++/CRFsuite user
would: every model kind either continues as --init-space says or is refused in one line, and a
corrupt model file is one line with nothing written."""

import pytest

from corpora import cli, error_line, random_corpus, write_conll
from crftk.model import Model

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[0,1]\nB\n"
SECOND = "U00:%x[0,0]\nU01:%x[0,2]\nU02:%x[-1,2]/%x[0,2]\nB\n"      # column 2: the first stage's labels
FAST = ["--max-iter", "2", "-q"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("incr")
    (root / "t.tmpl").write_text(TEMPLATE)
    (root / "second.tmpl").write_text(SECOND)
    write_conll(root / "old.txt", random_corpus(60, seed=1, vocab=10))
    write_conll(root / "new.txt", random_corpus(60, seed=2, vocab=30))
    return root


def run(root, *args):
    return cli("train", *args, cwd=root)


@pytest.fixture(scope="module")
def two_stage(files):
    assert run(files, "-t", "t.tmpl", "-m", "first.model", *FAST, "old.txt").returncode == 0
    made = run(files, "-t", "second.tmpl", "--first-stage", "first.model", "--first-stage-folds", "2",
               "-m", "two.model", *FAST, "old.txt")
    assert made.returncode == 0, made.stderr
    return files / "two.model"


def second_stage_attrs(path):
    from crftk.kinds.twostage import TwoStage
    return TwoStage.from_model(Model.load(path)).second.space.n_attrs


def test_init_space_keep_keeps_a_two_stage_models_second_stage_space(files, two_stage):
    """--init of a two-stage model grew its second stage's space whatever --init-space said."""
    before = second_stage_attrs(two_stage)
    kept = run(files, "--init", two_stage, "--init-space", "keep", "-m", "kept.model", "--max-iter", "2",
               "new.txt")
    assert kept.returncode == 0 and "--init-space grow" not in kept.stderr, kept.stderr
    assert second_stage_attrs(files / "kept.model") == before
    grown = run(files, "--init", two_stage, "-m", "grown.model", "--max-iter", "2", "new.txt")
    assert grown.returncode == 0 and "--init-space grow: the training data adds" in grown.stderr
    assert second_stage_attrs(files / "grown.model") > before


@pytest.mark.parametrize("content, message", [
    (b"", "not a crftk model file (the file is empty)"),
    (b"w1 A O\n\n", "not a crftk model file"),
])
def test_a_file_that_is_no_model_is_one_line(files, content, message):
    (files / "bad.model").write_bytes(content)
    for space in ("grow", "keep"):
        out = run(files, "--init", "bad.model", "--init-space", space, "-m", "o.model", *FAST, "new.txt")
        assert message in error_line(out) and not (files / "o.model").exists()


def test_a_truncated_model_is_one_line(files):
    assert run(files, "-t", "t.tmpl", "-m", "whole.model", *FAST, "old.txt").returncode == 0
    data = (files / "whole.model").read_bytes()
    (files / "cut.model").write_bytes(data[:len(data) // 2])
    out = run(files, "--init", "cut.model", "-m", "o.model", *FAST, "new.txt")
    assert "cut.model: truncated" in error_line(out) and not (files / "o.model").exists()


@pytest.mark.parametrize("space", ["grow", "keep"])
@pytest.mark.parametrize("columns, message", [
    (4, "new.txt:1: the --init model expects 2 or 3 columns, found 4"),
    (1, "new.txt:1: the --init model expects 2 or 3 columns, found 1"),
    (2, "new.txt:1: the training data has no gold label column (the --init model's is column 2 of 3"),
])
def test_new_data_of_another_width_is_one_line_at_its_first_line(files, tmp_path, space, columns, message):
    """grow read the label column of data without it (IndexError, a traceback), and a wrong width
    was said without the file or line."""
    assert run(files, "-t", "t.tmpl", "-m", "whole.model", *FAST, "old.txt").returncode == 0
    rows = [row.split() for row in (files / "new.txt").read_text().splitlines()]
    wide = {4: lambda r: r[:2] + ["X"] + r[2:], 1: lambda r: r[:1], 2: lambda r: r[:2]}[columns]
    (tmp_path / "new.txt").write_text("".join(" ".join(wide(r)) + "\n" if r else "\n" for r in rows))
    out = run(tmp_path, "--init", files / "whole.model", "--init-space", space, "-m", "o.model", *FAST, "new.txt")
    assert error_line(out).startswith(f"crftk: error: {message}"), out.stderr
    assert not (tmp_path / "o.model").exists()
