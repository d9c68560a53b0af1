"""Outputs that are not regular files are written directly, never replaced; a symbolic link's
file is written, not the link; an output that is an input (or another output) is refused."""

import os
import stat

import numpy as np
import pytest

from special_files import FifoReader, is_char_device, null_device

from crftk.errors import CrftkError
from crftk.io.atomic import AtomicFiles, AtomicWriter
from crftk.io.outputs import check_output
from crftk.io.container import dumps, read_container, write_container

TEXT = "w1\tA\n" * 20_000 + "\n"        # larger than a pipe's buffer: the writer must stream


# --- FIFOs and devices ------------------------------------------------------


@pytest.mark.parametrize("binary", [False, True])
def test_atomic_writer_streams_into_a_fifo_and_leaves_it(tmp_path, binary):
    fifo = FifoReader(tmp_path / "out")
    check_output(fifo.path)
    with AtomicWriter(fifo.path, binary=binary) as f:
        f.write(TEXT.encode() if binary else TEXT)
    assert fifo.result() == TEXT.encode()
    assert fifo.is_fifo()
    assert os.listdir(tmp_path) == ["out"]                   # no temporary file either


def test_atomic_writer_through_a_symlink_to_a_fifo(tmp_path):
    fifo = FifoReader(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    with AtomicWriter(str(tmp_path / "link")) as f:
        f.write("a\n")
    assert fifo.result() == b"a\n"
    assert fifo.is_fifo() and (tmp_path / "link").is_symlink()


def test_atomic_writer_writes_a_device_and_leaves_it_a_device(tmp_path):
    dev = null_device(tmp_path / "null")
    check_output(str(dev))
    with AtomicWriter(str(dev)) as f:
        f.write(TEXT)
    assert is_char_device(dev)
    assert os.listdir(tmp_path) == ["null"]
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)     # read only: the machine's stays a device


def test_write_container_streams_a_model_into_a_fifo(tmp_path):
    arrays = {"w": np.arange(20_000, dtype="<f8")}
    fifo = FifoReader(tmp_path / "model")
    write_container(fifo.path, {"k": 1}, arrays)
    assert fifo.result() == dumps({"k": 1}, arrays)
    assert fifo.is_fifo()


def test_write_container_writes_a_device_and_leaves_it(tmp_path):
    dev = null_device(tmp_path / "null")
    write_container(str(dev), {"k": 1}, {"w": np.zeros(3)})
    assert is_char_device(dev) and os.listdir(tmp_path) == ["null"]


def test_write_container_follows_a_symlink(tmp_path):
    real = tmp_path / "real.model"
    write_container(real, {"k": 1}, {})
    link = tmp_path / "link.model"
    link.symlink_to(real)
    write_container(link, {"k": 2}, {})
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert read_container(str(real))[0]["k"] == 2


def test_atomic_files_write_a_fifo_among_regular_outputs(tmp_path):
    fifo = FifoReader(tmp_path / "b")
    paths = [str(tmp_path / "a"), fifo.path]
    with AtomicFiles(paths) as files:
        files.open(0).write("one\n")
        files.open(1).write("two\n")
    assert fifo.result() == b"two\n" and fifo.is_fifo()
    assert (tmp_path / "a").read_text() == "one\n"


def test_a_block_device_or_socket_is_refused_before_anything_is_written(tmp_path):
    block = tmp_path / "disk"
    try:
        os.mknod(str(block), stat.S_IFBLK | 0o600, os.makedev(7, 250))
    except OSError as e:
        pytest.skip(f"cannot make a device node here ({e})")
    for call in (lambda: check_output(str(block)), lambda: AtomicWriter(str(block)).__enter__(),
                 lambda: write_container(str(block), {}, {})):
        with pytest.raises(CrftkError, match="is a block device"):
            call()
    assert stat.S_ISBLK(os.lstat(block).st_mode)


def test_descriptor_names_write_to_the_open_descriptor(tmp_path):
    # /dev/fd/N shares the descriptor's position and append mode, as a shell redirection does
    path = tmp_path / "log"
    path.write_text("kept\n")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        with AtomicWriter(f"/dev/fd/{fd}") as f:
            f.write("added\n")
        os.fstat(fd)                                          # still open
    finally:
        os.close(fd)
    assert path.read_text() == "kept\nadded\n"
    assert os.listdir(tmp_path) == ["log"]


# --- outputs that are inputs ----------------------------------------------------


def test_check_apart_finds_the_same_file_through_links(tmp_path):
    from crftk.io.outputs import check_apart
    data = tmp_path / "data.txt"
    data.write_text("x\n")
    (tmp_path / "soft").symlink_to(data)
    os.link(data, tmp_path / "hard")
    for name in ("data.txt", "soft", "hard"):
        with pytest.raises(CrftkError) as info:
            check_apart([("model", str(tmp_path / name))], [("training file", str(data))])
        assert "model would overwrite the training file" in str(info.value) and str(data) in str(info.value)
    check_apart([("model", str(tmp_path / "new"))], [("training file", str(data)), ("input", "-")])


def test_check_apart_refuses_two_outputs_of_one_path(tmp_path):
    from crftk.io.outputs import check_apart
    with pytest.raises(CrftkError, match="the exported model would overwrite the model .*/x \\(the same file\\)"):
        check_apart([("model", str(tmp_path / "x")), ("exported model", f"{tmp_path}/./x")])


def test_check_apart_lets_a_character_device_be_input_and_output(tmp_path):
    from crftk.io.outputs import check_apart
    dev = null_device(tmp_path / "null")
    check_apart([("output", str(dev)), ("trace", str(dev))], [("input", str(dev))])


def test_atomic_files_name_the_output_whose_rename_failed(tmp_path, monkeypatch):
    # a rename that failed was reported against the first output, whichever it was
    paths = [str(tmp_path / "a"), str(tmp_path / "b")]
    real_replace = os.replace

    def replace(src, dst):
        if dst == paths[1]:
            raise OSError(13, "Permission denied")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(CrftkError) as e:
        with AtomicFiles(paths) as files:
            for i in range(2):
                files.open(i).write("x\n")
    assert str(e.value) == f"{paths[1]}: cannot write (Permission denied)"
    assert all(not name.endswith(".tmp") for name in os.listdir(tmp_path))
