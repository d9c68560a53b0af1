"""FIFOs and device nodes made in a test's directory, for the tests of outputs that must be
written directly and never replaced. Nothing here writes to the machine's /dev."""

import os
import select
import stat
import threading

import pytest


class FifoReader:
    """A FIFO at ``path`` with a reader thread collecting what is written into it.

    The reader holds the FIFO open (non-blocking) from the start, so a writer's open never
    waits, and a test that fails because the FIFO was replaced by a regular file cannot hang:
    ``result()`` returns what arrived once the writer is done (``stop()``).
    """

    def __init__(self, path):
        self.path = str(path)
        os.mkfifo(self.path)
        self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        self._chunks = []
        self._writer_done = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self):
        while True:
            ready, _, _ = select.select([self._fd], [], [], 0.05)
            data = b""
            if ready:
                try:
                    data = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    data = b""
            if data:
                self._chunks.append(data)
            elif self._writer_done.is_set():
                return
            elif ready:         # end of file while no writer is connected (yet)
                self._writer_done.wait(0.02)

    def result(self):
        """Every byte written, once the writer has finished."""
        self._writer_done.set()
        self._thread.join(10)
        os.close(self._fd)
        return b"".join(self._chunks)

    def is_fifo(self):
        return stat.S_ISFIFO(os.lstat(self.path).st_mode)


def null_device(path):
    """A character device node like /dev/null (major 1, minor 3) at ``path``: what a command
    does to it is what it would do to the machine's /dev/null, but a bug replaces only this
    node. Skips where device nodes cannot be made."""
    try:
        os.mknod(str(path), stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, AttributeError, OSError) as e:
        pytest.skip(f"cannot make a device node here ({e})")
    return path


def is_char_device(path):
    return stat.S_ISCHR(os.lstat(str(path)).st_mode)
