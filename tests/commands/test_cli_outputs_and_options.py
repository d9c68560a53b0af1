"""Command-line details a new user meets: `tag -o DIR` without Dask, `--init` with the model's
own template, other CRF tools' option names, weight-file errors at their first bad line, and
`make install` saying what its long build is."""

import os
import shutil
import subprocess

import pytest

from corpora import REPO, cli as run, error_line, random_corpus, write_conll as write

TEMPLATE = "# words and tags\nUw0:%x[0,0]\nUw-1:%x[-1,0]\nUp0:%x[0,1]\nB\n"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    write(d / "train.txt", random_corpus(80, seed=1))
    (d / "t.tmpl").write_text(TEMPLATE)
    p = run("train", "-q", "-p", "1", "-t", "t.tmpl", "-m", "m.model", "--max-iter", "10", "train.txt", cwd=d)
    assert p.returncode == 0, p.stderr
    return d


# ---------------------------------------------------------------------------
# tag -o DIR, locally


def test_tag_into_a_directory_writes_one_output_per_input_as_tagging_each_alone(trained, tmp_path):
    (tmp_path / "a").mkdir()
    one = write(tmp_path / "a" / "one.txt", random_corpus(20, seed=2))
    two = write(tmp_path / "two.txt", random_corpus(15, seed=3))
    out = tmp_path / "tagged"
    out.mkdir()
    p = run("tag", "-m", trained / "m.model", "-o", out, one, two)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert sorted(os.listdir(out)) == ["one.txt", "two.txt"]
    for path in (one, two):
        alone = run("tag", "-m", trained / "m.model", path)
        assert (out / path.name).read_text() == alone.stdout != ""


def test_tag_into_a_directory_writes_none_when_an_input_fails(trained, tmp_path):
    good = write(tmp_path / "good.txt", random_corpus(20, seed=2))
    bad = tmp_path / "bad.txt"
    bad.write_text("w1 A\n\nw2 A B-X C\n\n")            # its second sentence has 4 columns
    out = tmp_path / "tagged"
    out.mkdir()
    line = error_line(run("tag", "-m", trained / "m.model", "-o", out, good, bad))
    assert f"{bad}:3:" in line
    assert os.listdir(out) == []                       # not even good.txt, tagged before the error


@pytest.mark.parametrize("case", ["stdin", "same-name", "replaces-input"])
def test_tag_into_a_directory_refuses_outputs_it_cannot_name(trained, tmp_path, case):
    out = tmp_path / "tagged"
    out.mkdir()
    one = write(tmp_path / "one.txt", random_corpus(5, seed=2))
    if case == "stdin":
        args, words = [one, "-"], "standard input has no file name"
    elif case == "same-name":
        (tmp_path / "b").mkdir()
        args, words = [one, write(tmp_path / "b" / "one.txt", random_corpus(5, seed=3))], "would both be written"
    else:
        shutil.copy(one, out / "one.txt")
        args, words = [out / "one.txt"], "would replace its input"
    line = error_line(run("tag", "-m", trained / "m.model", "-o", out, *args))
    assert words in line
    assert os.listdir(out) == (["one.txt"] if case == "replaces-input" else [])


# ---------------------------------------------------------------------------
# train --init MODEL -t TEMPLATE


def test_init_accepts_the_models_own_template(trained):
    # the same lines in another order, with other comments and a repeated line: the same features
    (trained / "same.tmpl").write_text("B\n# reordered\nUp0:%x[0,1]\nUw0:%x[0,0]\nUw-1:%x[-1,0]\nUw0:%x[0,0]\n")
    for tmpl in ("t.tmpl", "same.tmpl"):
        p = run("train", "-q", "-p", "1", "--init", "m.model", "-t", tmpl, "-m", "again.model", "--max-iter", "2",
                "train.txt", cwd=trained)
        assert p.returncode == 0, p.stderr
        assert p.stderr == ""


@pytest.mark.parametrize("text, where, what", [
    (TEMPLATE + "Up-1:%x[-1,1]\n", "other.tmpl:6:", "line 'Up-1:%x[-1,1]' is not in the model's template"),
    ("Uw0:%x[0,0]\nUp0:%x[0,1]\nB\n", "other.tmpl:", "the model's template line 'Uw-1:%x[-1,0]' is missing"),
    ("Uw0:%x[0,0]\nUw-1:%x[-1,0]\nUp0:%x[0,1]\n", "other.tmpl:", "has plain B line"),
])
def test_init_refuses_another_template_in_one_line(trained, text, where, what):
    (trained / "other.tmpl").write_text(text)
    line = error_line(run("train", "--init", "m.model", "-t", "other.tmpl", "-m", "refused.model", "train.txt",
                          cwd=trained), status=2)
    assert line.startswith(f"crftk: error: {where}"), line
    assert "is not the template of the --init model m.model" in line and what in line, line
    assert not (trained / "refused.model").exists()


def test_init_refuses_a_template_whose_lexicon_changed(tmp_path):
    write(tmp_path / "train.txt", random_corpus(40, seed=1))
    (tmp_path / "w.lex").write_text("w1\nw2 w3\n")
    (tmp_path / "l.tmpl").write_text("@lexicon W w.lex\nUw0:%x[0,0]\nUl:%lex[0,W]\nB\n")
    assert run("train", "-q", "-p", "1", "-t", "l.tmpl", "-m", "m.model", "--max-iter", "3", "train.txt",
               cwd=tmp_path).returncode == 0
    again = ("train", "-q", "-p", "1", "--init", "m.model", "-t", "l.tmpl", "-m", "again.model", "--max-iter", "2",
             "train.txt")
    assert run(*again, cwd=tmp_path).returncode == 0
    (tmp_path / "w.lex").write_text("w1\nw4\n")
    line = error_line(run(*again, cwd=tmp_path), status=2)
    assert line.startswith("crftk: error: l.tmpl:1: --template is not the template of the --init model"), line
    assert "lexicon W's entries differ from those the model embeds" in line


# ---------------------------------------------------------------------------
# other CRF tools' option names


@pytest.mark.parametrize("option, crftk_option", [
    ("--iterations", "--max-iter"), ("--maxiter", "--max-iter"), ("--max_iterations", "--max-iter"),
    ("-c", "--c2"), ("--rho1", "--c1"), ("-f", "--min-freq"), ("--devel", "--dev"),
])
def test_an_option_of_another_crf_tool_suggests_crftks(option, crftk_option):
    line = error_line(run("train", option, "5", "-t", "x.tmpl", "-m", "x.model", "x.txt"), status=2)
    assert f"no such option '{option}': did you mean {crftk_option}?" in line, line
    assert "--period" not in line


def test_a_foreign_option_is_suggested_only_where_the_command_has_it():
    line = error_line(run("tag", "--iterations", "5", "-m", "x.model", "x.txt"), status=2)
    assert "--max-iter" not in line                    # tag has no --max-iter


# ---------------------------------------------------------------------------
# Makefile


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_install_says_what_the_long_build_is_before_pip(tmp_path):
    p = subprocess.run(["make", "-n", "-B", "install", f"OUT={tmp_path}"], cwd=REPO, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    pip = next(i for i, line in enumerate(lines) if "pip install" in line)
    assert any(line.startswith("echo") and "Cython kernels" in line for line in lines[:pip]), lines
