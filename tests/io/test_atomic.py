"""Tests for crftk.io.atomic: an output is the old file or the whole new one, never half of it."""

import io
import os
import sys

import pytest

from crftk.errors import CrftkError
from crftk.io.atomic import AtomicWriter


def test_atomic_writer_creates_and_replaces(tmp_path):
    path = tmp_path / "out.txt"
    with AtomicWriter(str(path)) as f:
        f.write("new ü\n")
    assert path.read_bytes() == "new ü\n".encode("utf-8")
    path.write_text("old\n")
    with AtomicWriter(path) as f:
        f.write("replaced\n")
        assert path.read_text() == "old\n"  # not visible before the end
        f.write("a\r\n")
    assert path.read_bytes() == b"replaced\na\r\n"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_writer_exception_keeps_old_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with AtomicWriter(str(path)) as f:
            f.write("half")
            raise RuntimeError("boom")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_writer_exception_without_old_file(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with AtomicWriter(str(tmp_path / "out.txt")) as f:
            f.write("x")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_atomic_writer_temp_file_is_in_the_same_directory(tmp_path):
    path = tmp_path / "out.txt"
    writer = AtomicWriter(str(path))
    with writer as f:
        assert os.path.dirname(writer.temp_path) == str(tmp_path)
        assert os.listdir(tmp_path) == [os.path.basename(writer.temp_path)]
        f.write("x")
    assert writer.temp_path is None
    assert os.listdir(tmp_path) == ["out.txt"]


def test_atomic_writer_binary(tmp_path):
    path = tmp_path / "model.bin"
    with AtomicWriter(str(path), binary=True) as f:
        f.write(b"\x00\x01\r\n\xff")
    assert path.read_bytes() == b"\x00\x01\r\n\xff"


def test_atomic_writer_permissions(tmp_path):
    old_umask = os.umask(0o022)
    try:
        path = tmp_path / "out.txt"
        with AtomicWriter(str(path)) as f:
            f.write("x")
        assert os.stat(path).st_mode & 0o777 == 0o644
        os.chmod(path, 0o600)
        with AtomicWriter(str(path)) as f:
            f.write("y")
        assert os.stat(path).st_mode & 0o777 == 0o600
    finally:
        os.umask(old_umask)


def test_atomic_writer_follows_symlink(tmp_path):
    real = tmp_path / "real.txt"
    real.write_text("old")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    with AtomicWriter(str(link)) as f:
        f.write("new")
    assert link.is_symlink() and real.read_text() == "new"


def test_atomic_writer_stdout(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    with AtomicWriter("-") as f:
        f.write("a\tA\n")
    assert out.getvalue() == "a\tA\n"


def test_atomic_writer_stdout_binary(monkeypatch):
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    monkeypatch.setattr(sys, "stdout", out)
    with AtomicWriter("-", binary=True) as f:
        f.write(b"\x00bin")
    assert out.buffer.getvalue() == b"\x00bin"


def test_atomic_writer_bad_targets(tmp_path):
    with pytest.raises(CrftkError) as info:
        with AtomicWriter(str(tmp_path)):
            pass
    assert "cannot open" in str(info.value)
    missing = str(tmp_path / "no" / "such" / "dir.txt")
    with pytest.raises(CrftkError) as info:
        with AtomicWriter(missing):
            pass
    assert str(info.value).startswith(f"{missing}: cannot open")
