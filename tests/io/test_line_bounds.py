"""Lines without an end (/dev/zero, a binary file) and CR-only line ends: one error, never a hang."""

import io
import os
import resource
import subprocess
import sys

import pytest

from corpora import REPO
from crftk.errors import CrftkError
from crftk.io import conll
from crftk.io.conll import read_batches, read_sentences

TEMPLATE = str(REPO / "templates" / "chunking-crfpp.tmpl")
TRAIN = str(REPO / "data" / "demo.train")


@pytest.fixture
def limit():
    previous = conll.set_max_line_bytes(100)
    yield 100
    conll.set_max_line_bytes(previous)


def _read_all(reader, source):
    if reader is read_batches:
        return [x for b in read_batches(source, block_size=64) for x in b.entries()]
    return list(read_sentences(source, passthrough=True))


READERS = [read_sentences, read_batches]
SOURCES = [
    lambda p: str(p),
    lambda p: open(p, "rb"),                      # a buffered binary file
    lambda p: open(p, "rb", buffering=0),          # a raw one
    lambda p: open(p, encoding="utf-8"),           # a text one
]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("source", SOURCES)
def test_a_line_past_the_limit_is_an_error_naming_it(reader, source, limit, tmp_path):
    path = tmp_path / "long.txt"
    path.write_text("a B\nb C\n\n" + "x" * 101 + " B\n")
    with pytest.raises(CrftkError) as e:
        _read_all(reader, source(path))
    assert e.value.line == 4 and "a line of more than 100 bytes" in e.value.message
    assert "--max-line-bytes" in e.value.message
    path.write_text("a B\n" + "x" * 98 + " B\n")          # 100 bytes and its line end: taken
    assert len(_read_all(reader, source(path))) == 1


@pytest.mark.parametrize("reader", READERS)
def test_an_endless_line_stops_at_the_limit(reader, limit):
    class Endless(io.RawIOBase):
        """Bytes without a line end, forever (as /dev/zero); counts what was read."""
        served = 0

        def readable(self):
            return True

        def readinto(self, b):
            b[:] = b"x" * len(b)
            self.served += len(b)
            return len(b)

    stream = Endless()
    with pytest.raises(CrftkError, match="a line of more than 100 bytes"):
        _read_all(reader, stream)
    assert stream.served < 1 << 22


class _Endless(io.RawIOBase):
    """A sentence, then Latin-1 bytes without a line end forever (as /dev/zero); counts what was read,
    and gives up after 16 MB so that a reader that holds the whole line fails, not hangs."""

    def __init__(self):
        self.served, self._head = 0, b"a B\n\n"

    def readable(self):
        return True

    def readinto(self, b):
        if self.served > 1 << 24:
            raise AssertionError("read 16 MB of a line without an end")
        data = (self._head + b"\xe9" * len(b))[:len(b)]
        self._head = b""
        b[:] = data
        self.served += len(b)
        return len(b)


@pytest.mark.parametrize("reader", READERS)
def test_an_endless_line_in_another_encoding_stops_at_the_limit(reader, limit):
    # the transcoder held the bytes of a line without an end until it came: /dev/zero grew memory forever
    stream = _Endless()
    source = io.BufferedReader(stream)
    with pytest.raises(CrftkError) as e:
        if reader is read_batches:
            [x for b in read_batches(source, block_size=64, encoding="latin-1") for x in b.entries()]
        else:
            list(read_sentences(source, passthrough=True, encoding="latin-1"))
    assert e.value.line == 3 and "a line of more than 100 bytes" in e.value.message
    assert stream.served < 1 << 22


@pytest.mark.parametrize("reader", READERS)
def test_cr_only_line_ends_are_named(reader, tmp_path):
    path = tmp_path / "mac.txt"
    path.write_bytes(b"Shows NNS B-NP\rwere VBD B-VP\r\rA DT B-NP\r")
    with pytest.raises(CrftkError) as e:
        _read_all(reader, str(path))
    assert str(e.value).startswith(f"{path}:1: the line ends are CR (\\r) only")
    path.write_bytes(b"Shows NNS B-NP\r\nwere VBD B-VP\r\n\r\n")     # CRLF is fine
    assert len(_read_all(reader, str(path))) == 1


def test_a_long_cr_only_file_is_named_too(tmp_path):
    path = tmp_path / "mac.txt"
    path.write_bytes(b"Shows NNS B-NP\r" * 100_000)        # 1.5 MB: past the default limit
    for reader in READERS:
        with pytest.raises(CrftkError, match=r"the line ends are CR \(\\r\) only"):
            _read_all(reader, str(path))


def _crftk(*args, stdin=None):
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # the timeout turns a reader that waits for a line end forever into a failure, not a hung suite,
    # and the memory limit one that holds the endless line into an error, not a machine out of memory
    return subprocess.run([sys.executable, "-m", "crftk.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=60, env=env, stdin=stdin, preexec_fn=_limit_memory)


def _limit_memory():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_as_any_text_file_is_one_line(tmp_path):
    model = tmp_path / "m.model"
    train = tmp_path / "train.txt"
    train.write_text("\n\n".join(TRAIN_TEXT.split("\n\n")[:100]) + "\n")
    run = _crftk("train", "-t", TEMPLATE, "-m", model, "--max-iter", 2, "-q", "-p", 1, train)
    assert run.returncode == 0, run.stderr
    (tmp_path / "lex.tmpl").write_text("@lexicon L /dev/zero\nU0:%lex[0,L]\nB\n")
    too_long = "a line of more than 1,048,576 bytes"
    for args, name in ((["tag", "-m", model, "/dev/zero"], "/dev/zero"),
                       (["tag", "-m", model, "--encoding", "latin-1", "/dev/zero"], "/dev/zero"),
                       (["train", "-t", TEMPLATE, "-m", tmp_path / "x", "/dev/zero"], "/dev/zero"),
                       (["train", "-t", "/dev/zero", "-m", tmp_path / "x", train], "/dev/zero"),
                       (["train", "-t", tmp_path / "lex.tmpl", "-m", tmp_path / "x", train], "/dev/zero"),
                       (["eval", "/dev/zero"], "/dev/zero"),
                       (["tag", "-m", model, "--max-line-bytes", 5, train], str(train))):
        run = _crftk(*args)
        assert run.returncode == 1 and run.stderr.count("\n") == 1, (args, run.stderr)
        assert run.stderr.startswith(f"crftk: error: {name}:1: a line of more than "), (args, run.stderr)
        assert too_long in run.stderr or "5 bytes" in run.stderr
    with open("/dev/zero", "rb") as zero:
        run = _crftk("tag", "-m", model, "-", stdin=zero)
    assert run.returncode == 1 and run.stderr == f"crftk: error: <stdin>:1: {too_long}: is this a text file " \
                                                 f"with line ends? (--max-line-bytes raises the limit)\n"
    assert sorted(os.listdir(tmp_path)) == ["lex.tmpl", "m.model", "train.txt"]


TRAIN_TEXT = open(TRAIN, encoding="utf-8").read()


def test_files_of_more_than_64_columns_train_and_tag(tmp_path):
    # 'column_ids reads at most 64 columns' was a traceback
    rows = [" ".join([f"w{t}", *(f"f{k}{t % 3}" for k in range(68)), "A" if t % 2 else "B"]) for t in range(6)]
    wide = tmp_path / "wide.txt"
    wide.write_text(("\n".join(rows) + "\n\n") * 10)
    (tmp_path / "t.tmpl").write_text("U0:%x[0,0]\nU1:%x[0,67]\nB\n")
    run = _crftk("train", "-t", tmp_path / "t.tmpl", "-m", tmp_path / "m", "--max-iter", 3, "-q", "-p", 1, wide)
    assert run.returncode == 0, run.stderr
    run = _crftk("tag", "-m", tmp_path / "m", wide)
    assert run.returncode == 0, run.stderr
    assert [r.split()[:-1] for r in run.stdout.split("\n") if r] == [r.split() for r in rows] * 10
