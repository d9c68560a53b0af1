"""What every command writes: a FIFO or device output is written directly and stays a FIFO or
device (never a regular file renamed over it), a symbolic link's file is written and the link
stays, and an output that is one of the command's inputs (or another output) is refused in one
line before any work, the input left byte for byte as it was."""

import os
import shutil
import stat
import subprocess
import sys

import pytest

from corpora import CLI_ENV as ENV, cli as run, error_line, random_corpus, write_conll as write
from special_files import FifoReader, is_char_device, null_device

TEMPLATE = "Uw0:%x[0,0]\nUp0:%x[0,1]\nB\n"
POS_TEMPLATE = "Uw0:%x[0,0]\nB\n"           # an upstream stage: predicts column 1 from the words
LEXICON_TEMPLATE = "@lexicon L names.lex\nUw0:%x[0,0]\nUl0:%lex[0,L]\nB\n"


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Data, templates, a lexicon, a weight file and two models, trained once."""
    d = tmp_path_factory.mktemp("outputs")
    write(d / "tr.txt", random_corpus(60, seed=1))
    write(d / "dev.txt", random_corpus(20, seed=2))
    write(d / "in.txt", random_corpus(20, seed=3))
    (d / "t.tmpl").write_text(TEMPLATE)
    (d / "lex.tmpl").write_text(LEXICON_TEMPLATE)
    (d / "names.lex").write_text("w1\nw2 w3\n")
    (d / "w.txt").write_text("a 0.5\nb 0.5\n")
    (d / "pos.tmpl").write_text(POS_TEMPLATE)
    for args in (["-t", "t.tmpl", "-m", "m.model"], ["-t", "pos.tmpl", "--label-col", "1", "-m", "pos.model"]):
        p = run("train", "-q", "-p", "1", *args, "--max-iter", "3", "tr.txt", cwd=d)
        assert p.returncode == 0, p.stderr
    return d


@pytest.fixture
def work(made, tmp_path):
    """A fresh copy of the made files for one test."""
    for name in os.listdir(made):
        shutil.copy(made / name, tmp_path / name)
    return tmp_path


def tag_dir_with_input(work):
    (work / "out").mkdir()
    shutil.copy(work / "m.model", work / "out" / "in.txt")    # the model where in.txt's output goes
    return ["tag", "-m", "out/in.txt", "-o", "out", "in.txt"]


def lexicon_dir_with_input(work):
    (work / "lexicons").mkdir()
    shutil.copy(work / "tr.txt", work / "lexicons" / "X.lex")   # X is one of its entity types
    return ["lexicon", "-o", "lexicons", "lexicons/X.lex"]


def links(work):
    os.link(work / "tr.txt", work / "hard.txt")
    (work / "soft.txt").symlink_to(work / "tr.txt")
    return None


# (command line, the input it must leave as it was, words of the one-line refusal)
SAME_FILE = {
    "train -m TRAIN TRAIN": (["train", "-t", "t.tmpl", "-m", "tr.txt", "tr.txt"], "tr.txt",
                             "the model would overwrite the training file tr.txt"),
    "train -m HARDLINK": (["train", "-t", "t.tmpl", "-m", "hard.txt", "tr.txt"], "tr.txt",
                          "the model would overwrite the training file tr.txt"),
    "train -m SYMLINK": (["train", "-t", "t.tmpl", "-m", "soft.txt", "tr.txt"], "tr.txt",
                         "the model would overwrite the training file tr.txt"),
    "train factorial": (["train", "-t", "t.tmpl", "--label-col", "1", "--label-col", "2", "-m", "tr.txt",
                         "tr.txt"], "tr.txt", "the model would overwrite the training file tr.txt"),
    "train --trace DEV --dev DEV": (["train", "-t", "t.tmpl", "-m", "new.model", "--trace", "dev.txt", "--dev",
                                     "dev.txt", "tr.txt"], "dev.txt",
                                    "the trace would overwrite the development file dev.txt"),
    "train -m TEMPLATE": (["train", "-t", "t.tmpl", "-m", "t.tmpl", "tr.txt"], "t.tmpl",
                          "the model would overwrite the template t.tmpl"),
    "train -m LEXICON": (["train", "-t", "lex.tmpl", "-m", "names.lex", "tr.txt"], "names.lex",
                         "the model would overwrite the lexicon L"),
    "train --init M -m M": (["train", "--init", "m.model", "-m", "m.model", "tr.txt"], "m.model",
                            "the model would overwrite the --init model m.model"),
    "train --cross-output TRAIN": (["train", "-t", "t.tmpl", "-m", "new.model", "--cross-predict", "2",
                                    "--cross-output", "tr.txt", "tr.txt"], "tr.txt",
                                   "the cross-prediction output would overwrite the training file tr.txt"),
    "train --trace M --init M": (["train", "--init", "m.model", "-m", "new.model", "--trace", "m.model",
                                  "tr.txt"], "m.model", "the trace would overwrite the --init model m.model"),
    "bag -m TRAIN": (["bag", "-t", "t.tmpl", "-t", "t.tmpl", "-m", "tr.txt", "tr.txt"], "tr.txt",
                     "the model would overwrite the training file tr.txt"),
    "bag --export TEMPLATE": (["bag", "-t", "t.tmpl", "-t", "t.tmpl", "-m", "b.model", "--export", "t.tmpl",
                               "tr.txt"], "t.tmpl", "the exported model would overwrite the template t.tmpl"),
    "bag -m WEIGHTS --weights WEIGHTS": (["bag", "-t", "t.tmpl", "-t", "t.tmpl", "-m", "w.txt", "--weights",
                                          "w.txt", "tr.txt"], "w.txt",
                                         "the model would overwrite the weights file w.txt"),
    "tag -o M": (["tag", "-m", "m.model", "-o", "m.model", "in.txt"], "m.model",
                 "the output would overwrite the model m.model"),
    "tag -o INPUT": (["tag", "-m", "m.model", "-o", "in.txt", "in.txt"], "in.txt",
                     "the output would overwrite the input in.txt"),
    "tag -o WEIGHTS": (["tag", "-m", "m.model", "--weights", "w.txt", "-o", "w.txt", "in.txt"], "w.txt",
                       "the output would overwrite the weights file w.txt"),
    "tag -o DIR holding the model": (tag_dir_with_input, "out/in.txt",
                                     "the output would overwrite the model out/in.txt"),
    "dump -o M M": (["dump", "-o", "m.model", "m.model"], "m.model", "the output would overwrite the model m.model"),
    "compose -o STAGE": (["compose", "-m", "pos.model", "-m", "m.model", "--feed", "1", "-o", "m.model"],
                         "m.model", "the pipeline would overwrite the stage model m.model"),
    "induce -m TRAIN": (["induce", "-t", "t.tmpl", "-m", "tr.txt", "tr.txt"], "tr.txt",
                        "the model would overwrite the training file tr.txt"),
    "induce --report DEV": (["induce", "-t", "t.tmpl", "-m", "new.model", "--dev", "dev.txt", "--report",
                             "dev.txt", "tr.txt"], "dev.txt", "the report would overwrite the development file"),
    "lexicon -o DIR holding an input": (lexicon_dir_with_input, "lexicons/X.lex",
                                        "the lexicon would overwrite the input lexicons/X.lex"),
}


@pytest.mark.parametrize("case", sorted(SAME_FILE))
def test_an_output_that_is_an_input_is_refused_before_any_work(work, case):
    args, kept, words = SAME_FILE[case]
    links(work)
    if callable(args):
        args = args(work)
    before = (work / kept).read_bytes()
    names = sorted(os.listdir(work))
    line = error_line(run(*args, "--max-iter", "2", cwd=work) if args[0] in ("train", "bag")
                      else run(*args, cwd=work))
    assert words in line, line
    assert (work / kept).read_bytes() == before
    assert sorted(os.listdir(work)) == names             # nothing written (no new model, no temp file)
    assert (work / "soft.txt").is_symlink()


def test_bag_model_and_export_of_one_path_are_refused(work):
    line = error_line(run("bag", "-t", "t.tmpl", "-t", "t.tmpl", "-m", "x.model", "--export", "./x.model",
                          "tr.txt", cwd=work))
    assert "the exported model would overwrite the model x.model (the same file)" in line, line
    assert not (work / "x.model").exists()


def test_resuming_from_a_checkpoint_may_update_it(work):
    # the documented resume: --init MODEL.checkpoint -m MODEL --checkpoint-every N writes that file
    shutil.copy(work / "m.model", work / "r.model.checkpoint")
    p = run("train", "-q", "-p", "1", "--init", "r.model.checkpoint", "-m", "r.model", "--checkpoint-every", "1",
            "--max-iter", "2", "tr.txt", cwd=work)
    assert p.returncode == 0, p.stderr
    assert (work / "r.model").exists()


# ---------------------------------------------------------------------------
# FIFOs, devices, descriptors and symbolic links as outputs


FIFO_OUTPUT = {
    "tag -o": (["tag", "-m", "m.model", "-o", "{out}", "in.txt"], "text"),
    "tag -o DIR": (["tag", "-m", "m.model", "-o", "dir", "in.txt"], "text"),
    "train -m": (["train", "-q", "-p", "1", "-t", "t.tmpl", "--max-iter", "2", "-m", "{out}", "tr.txt"], "model"),
    "train --trace": (["train", "-q", "-p", "1", "-t", "t.tmpl", "--max-iter", "2", "-m", "x.model", "--trace",
                       "{out}", "tr.txt"], "text"),
    "train --cross-output": (["train", "-q", "-p", "1", "-t", "t.tmpl", "--max-iter", "2", "-m", "x.model",
                              "--cross-predict", "2", "--cross-output", "{out}", "tr.txt"], "text"),
    "dump -o": (["dump", "-o", "{out}", "m.model"], "text"),
    "compose -o": (["compose", "-m", "pos.model", "-m", "m.model", "--feed", "1", "-o", "{out}"], "model"),
    "bag --export": (["bag", "-p", "1", "--max-iter", "2", "-t", "t.tmpl", "-t", "t.tmpl", "-m", "b.model",
                      "--export", "{out}", "tr.txt"], "model"),
    "induce --report": (["induce", "-t", "t.tmpl", "-m", "x.model", "--rounds", "1", "--round-iter", "2", "--final-iter", "2", "-p", "1",
                         "--report", "{out}",
                         "tr.txt"], "text"),
}


@pytest.mark.parametrize("case", sorted(FIFO_OUTPUT))
def test_a_fifo_output_is_written_directly_and_stays_a_fifo(work, case):
    args, kind = FIFO_OUTPUT[case]
    if case == "tag -o DIR":
        (work / "dir").mkdir()
        fifo = FifoReader(work / "dir" / "in.txt")
    else:
        fifo = FifoReader(work / "out")
    p = run(*[a.replace("{out}", "out") for a in args], cwd=work)
    data = fifo.result()
    assert p.returncode == 0, p.stderr
    assert fifo.is_fifo()
    assert data
    if kind == "model":
        (work / "received.model").write_bytes(data)
        assert run("info", "received.model", cwd=work).returncode == 0
    else:
        data.decode("utf-8")
    if case.startswith("tag"):
        assert data.decode() == run("tag", "-m", "m.model", "in.txt", cwd=work).stdout
    assert not [n for n in os.listdir(work) + os.listdir(work / "dir" if case == "tag -o DIR" else work)
                if n.endswith(".tmp")]


@pytest.mark.parametrize("args", [
    ["tag", "-m", "m.model", "-o", "{out}", "in.txt"],
    ["train", "-q", "-p", "1", "-t", "t.tmpl", "--max-iter", "2", "-m", "{out}", "tr.txt"],
    ["dump", "-o", "{out}", "m.model"],
    ["compose", "-m", "pos.model", "-m", "m.model", "--feed", "1", "-o", "{out}"],
], ids=lambda a: a[0])
def test_a_device_output_stays_a_device(work, args):
    # a node like /dev/null (1, 3) made here: a bug replaces it, never the machine's /dev/null
    null_device(work / "null")
    (work / "null-link").symlink_to(work / "null")
    for out in ("null", "null-link"):
        p = run(*[a.replace("{out}", out) for a in args], cwd=work)
        assert p.returncode == 0, p.stderr
        assert is_char_device(work / "null") and (work / "null-link").is_symlink()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)        # only looked at


def test_tag_to_dev_stdout_writes_standard_output_and_keeps_its_append_mode(work):
    expected = run("tag", "-m", "m.model", "in.txt", cwd=work).stdout
    p = run("tag", "-m", "m.model", "-o", "/dev/stdout", "in.txt", cwd=work)      # stdout: a pipe
    assert p.returncode == 0, p.stderr
    assert p.stdout == expected
    log = work / "log.txt"
    log.write_text("before\n")
    with open(log, "a") as out:
        p = subprocess.run([sys.executable, "-m", "crftk.cli", "tag", "-m", "m.model", "-o", "/dev/stdout",
                            "in.txt"], stdout=out, stderr=subprocess.PIPE, text=True, cwd=work, env=ENV,
                           timeout=300)
    assert p.returncode == 0, p.stderr
    assert log.read_text() == "before\n" + expected


@pytest.mark.parametrize("args", [
    ["tag", "-m", "m.model", "-o", "link", "in.txt"],
    ["train", "-q", "-p", "1", "-t", "t.tmpl", "--max-iter", "2", "-m", "link", "tr.txt"],
    ["compose", "-m", "pos.model", "-m", "m.model", "--feed", "1", "-o", "link"],
], ids=lambda a: a[0])
def test_a_symlink_output_writes_the_file_it_names_and_stays_a_link(work, args):
    (work / "real").write_text("old\n")
    (work / "link").symlink_to("real")
    p = run(*args, cwd=work)
    assert p.returncode == 0, p.stderr
    assert (work / "link").is_symlink() and os.readlink(work / "link") == "real"
    assert (work / "real").read_bytes() != b"old\n"


@pytest.mark.parametrize("args", [
    ["tag", "-m", "m.model", "-o", "full", "in.txt"],
    ["dump", "-o", "full", "m.model"],
    ["train", "-q", "-p", "1", "-t", "t.tmpl", "--max-iter", "2", "-m", "full", "tr.txt"],
], ids=lambda a: a[0])
def test_a_full_device_is_one_line_and_stays_a_device(work, args):
    # a node like /dev/full (1, 7): every write fails with ENOSPC
    null_device(work / "null")           # skips where device nodes cannot be made
    os.mknod(str(work / "full"), stat.S_IFCHR | 0o666, os.makedev(1, 7))
    line = error_line(run(*args, cwd=work))
    assert line == "crftk: error: full: cannot write (No space left on device)" or \
        line == "crftk: error: full: cannot write model file: No space left on device", line
    assert is_char_device(work / "full")


def _dask():
    try:
        import distributed.client  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("where", [[], pytest.param(["--workers", "1"], marks=pytest.mark.skipif(
    not _dask(), reason="Dask is not installed"))], ids=["here", "dask"])
def test_a_full_device_in_an_output_directory_is_one_line_and_stays_a_device(work, where):
    # -o DIR wrote through AtomicFiles (and Dask's outputs), which let the ENOSPC out as a traceback
    null_device(work / "null")           # skips where device nodes cannot be made
    (work / "out").mkdir()
    os.mknod(str(work / "out" / "in.txt"), stat.S_IFCHR | 0o666, os.makedev(1, 7))
    line = error_line(run("tag", "-m", "m.model", "-o", "out", *where, "in.txt", cwd=work))
    assert line == f"crftk: error: {os.path.join('out', 'in.txt')}: cannot write (No space left on device)", line
    assert is_char_device(work / "out" / "in.txt") and os.listdir(work / "out") == ["in.txt"]


@pytest.mark.parametrize("kind", ["directory", "socket"])
@pytest.mark.parametrize("where", [[], pytest.param(["--workers", "1"], marks=pytest.mark.skipif(
    not _dask(), reason="Dask is not installed"))], ids=["here", "dask"])
def test_an_output_in_the_directory_that_cannot_be_written_is_refused_before_any_input_is_read(
        work, where, kind, monkeypatch):
    # it was refused only when its turn came, after the inputs before it were tagged: here the
    # error of the first input came first
    import socket
    (work / "out").mkdir()
    (work / "bad.txt").write_text("w1 p1\nw2\n\n")
    if kind == "directory":
        (work / "out" / "in.txt").mkdir()
    else:
        monkeypatch.chdir(work)             # a socket's path is short: bind it relative
        s = socket.socket(socket.AF_UNIX)
        s.bind(os.path.join("out", "in.txt"))
        s.close()
    line = error_line(run("tag", "-m", "m.model", "-o", "out", *where, "bad.txt", "in.txt", cwd=work))
    refused = f"crftk: error: {os.path.join('out', 'in.txt')}: cannot write the output: is a {kind}"
    if kind == "socket":
        refused += " (crftk writes regular files, FIFOs and character devices such as /dev/null)"
    assert line == refused, line
    assert os.listdir(work / "out") == ["in.txt"]
