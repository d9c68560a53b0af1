"""Every input a command reads (training and dev files, templates, the lexicons templates
name, --init models, weight files, the files to tag) is checked before any work starts:
a missing one is one line naming it (a lexicon: the template line that asks for it), with
no training done and nothing written."""

import os
import re
import subprocess
import sys

import pytest

from corpora import REPO

ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
DEMO_TRAIN = REPO / "data" / "demo.train"
WORDS = "Uw-1:%x[-1,0]\nUw0:%x[0,0]\nUp0:%x[0,1]\nB\n"
# the lexicon is declared on line 3 and does not exist
LEXICON = "# words and a lexicon\nUw0:%x[0,0]\n@lexicon NP lex/NP.lex\nUl0:%lex[0,NP]\nB\n"


def run(*args, cwd):
    return subprocess.run([sys.executable, "-m", "crftk.cli", *[str(a) for a in args]], capture_output=True,
                          text=True, cwd=cwd, timeout=300, env=ENV)


def one_error_line(proc):
    """The single stderr line of a clean failure: no progress line, so no work was done."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crftk: error: "), proc.stderr
    return lines[0]


@pytest.fixture
def workdir(tmp_path):
    blocks = DEMO_TRAIN.read_text(encoding="utf-8").split("\n\n")[:60]
    (tmp_path / "train.txt").write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    (tmp_path / "words.tmpl").write_text(WORDS)
    (tmp_path / "lex.tmpl").write_text(LEXICON)
    return tmp_path


@pytest.mark.parametrize("command", [
    ["train", "-t", "lex.tmpl", "-m", "out.model", "--max-iter", "3", "train.txt"],
    ["train", "-t", "lex.tmpl", "-m", "out.model", "--max-iter", "3", "--label-col", "1", "--label-col", "2",
     "train.txt"],
    # the bag with the lexicon second: its first bag used to train before the lexicon was missed
    ["bag", "-t", "words.tmpl", "-t", "lex.tmpl", "-m", "out.bag", "--max-iter", "3", "--parallel", "threads",
     "train.txt"],
    ["bag", "-t", "words.tmpl", "-t", "lex.tmpl", "-m", "out.bag", "--max-iter", "3", "--parallel", "bags",
     "train.txt"],
    ["induce", "-t", "lex.tmpl", "-m", "out.model", "--rounds", "1", "train.txt"],
], ids=["train", "train-factorial", "bag-threads", "bag-parallel", "induce"])
def test_a_missing_lexicon_names_the_template_line_before_any_training(workdir, command):
    before = sorted(os.listdir(workdir))
    line = one_error_line(run(*command, cwd=workdir))
    assert line.startswith("crftk: error: lex.tmpl:3: lexicon NP: "), line
    assert os.path.join("lex", "NP.lex") + " not found" in line
    assert "crftk lexicon -o lex " in line           # how to make it
    assert sorted(os.listdir(workdir)) == before


def test_a_bag_fit_in_python_checks_lexicons_before_the_first_bag(workdir):
    from crftk.training.bagging import fit_bag
    from crftk.errors import CrftkError
    from crftk.features.templates import read_template
    from crftk.io.conll import read_corpus
    logged = []
    with pytest.raises(CrftkError, match=re.escape(f"{workdir / 'lex.tmpl'}:3: lexicon NP: ")):
        fit_bag(read_corpus(workdir / "train.txt"), [read_template(workdir / f) for f in ("words.tmpl", "lex.tmpl")],
                log=logged.append, max_iter=3, threads=1, parallel="threads")
    assert logged == []


def test_an_unreadable_lexicon_names_the_template_line_and_the_reason(workdir):
    (workdir / "lex").mkdir()
    (workdir / "lex" / "NP.lex").mkdir()            # a directory where the file should be
    line = one_error_line(run("train", "-t", "lex.tmpl", "-m", "out.model", "train.txt", cwd=workdir))
    assert line.startswith("crftk: error: lex.tmpl:3: lexicon NP: cannot open "), line


def test_tag_checks_every_input_before_writing_any_output(workdir):
    assert run("train", "-q", "-t", "words.tmpl", "-m", "m.model", "--max-iter", "3", "train.txt",
               cwd=workdir).returncode == 0
    p = run("tag", "-m", "m.model", "train.txt", "missing.txt", cwd=workdir)
    assert one_error_line(p) == "crftk: error: missing.txt: cannot open for reading (No such file or directory)"
    assert p.stdout == ""                            # train.txt is not tagged first


def test_the_readme_bag_example_builds_its_lexicons_first():
    """The README's bag block runs as written: a `crftk lexicon -o DIR` for the directory the
    lexicon template reads, before `crftk bag`."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("### bag"):]
    block = section[section.index("```sh\n") + 6:]
    block = block[:block.index("```")].replace("\\\n", " ")
    commands = [line.split("#")[0].split() for line in block.splitlines() if line.strip()]
    bag_at = next(i for i, c in enumerate(commands) if c[:2] == ["crftk", "bag"])
    built = {os.path.normpath(c[c.index("-o") + 1]) for c in commands[:bag_at] if c[:2] == ["crftk", "lexicon"]}
    bag = commands[bag_at]
    needed = set()
    for k, word in enumerate(bag):
        if word == "-t":
            template = REPO / bag[k + 1]
            for line in template.read_text(encoding="utf-8").splitlines():
                if line.startswith("@lexicon"):
                    path = os.path.normpath(os.path.join(bag[k + 1].rsplit("/", 1)[0], line.split()[2]))
                    needed.add(os.path.dirname(path))
    assert needed and needed <= built, (needed, built)
    # the folder that holds the lexicon folder is made first: crftk lexicon makes only the last one
    for d in built:
        parent = os.path.dirname(d)
        assert not parent or any(c[:2] == ["mkdir", "-p"] and os.path.normpath(c[2]) == parent
                                 for c in commands[:bag_at]), parent
