"""Writing outputs so that a failure leaves no half-written file.

A regular file is written to a temporary file beside it, flushed, fsynced and renamed over it
(:class:`AtomicWriter`, and :class:`AtomicFiles` for the per-input outputs of ``-o DIR``, all
renamed at the end); the temporary names carry the writer's pid and host, so that a later writer
removes the ones a killed writer left (:func:`remove_stale_temps`). Outputs that are not regular
files (FIFOs, devices, ``/dev/stdout``) are written directly: where an output goes is
crftk.io.outputs's business.
"""

import codecs
import errno
import io
import os
import re
import stat
import sys

from crftk.errors import CrftkError, shown
from crftk.io.conll import DEFAULT_ENCODING, codec
from crftk.io.outputs import open_direct, output_target

__all__ = ["AtomicWriter", "AtomicFiles", "open_temp_beside", "fsync_directory", "raise_if_full"]

STDOUT_NAME = "<stdout>"


class AtomicWriter:
    """Write a file so that readers see either the old or the whole new one.

    ``with AtomicWriter(path) as f: f.write(...)`` writes into a temporary
    file in the same directory as ``path`` (text with ``"\\n"`` line ends in
    ``encoding``, UTF-8 by default, or bytes with ``binary=True``).  On a clean exit the data is
    flushed, fsynced and the temporary file is renamed onto ``path`` with
    ``os.replace``; if the block raises, the temporary file is removed and an
    existing file at ``path`` is left untouched.  A new file gets the usual
    permissions (0666 minus the umask); a replaced file keeps its mode.  If
    ``path`` is a symbolic link, the file it points to is replaced.  A FIFO, a
    character device or an open descriptor's name (``/dev/stdout``) is written
    directly and never replaced (crftk.io.outputs); a failure can then leave
    part of the output there, as on standard output.

    ``path`` ``"-"`` writes to ``sys.stdout`` (``sys.stdout.buffer`` with
    ``binary=True``, or through a wrapper of it when stdout has another
    encoding) without atomicity; the stream is flushed at the end and
    not closed.  Problems opening or committing the file, and text that the
    encoding cannot write, raise :class:`CrftkError`.
    """

    def __init__(self, path, binary=False, encoding=DEFAULT_ENCODING):
        self.path = os.fsdecode(os.fspath(path))
        self.binary = binary
        self.encoding = codec(encoding)
        self._stdout = None         # the wrapper of sys.stdout.buffer in another encoding
        self._file = None
        self._tmp = None
        self._target = None
        self._direct = False
        #: Path of the temporary file while the ``with`` block runs, else None.
        self.temp_path = None

    def __enter__(self):
        if self._file is not None:
            raise RuntimeError("AtomicWriter is not reentrant")
        if self.path == "-":
            self._file = sys.stdout.buffer if self.binary else sys.stdout
            if (not self.binary and getattr(sys.stdout, "buffer", None) is not None
                    and _codec_of(sys.stdout) != self.encoding):
                sys.stdout.flush()
                self._stdout = self._file = io.TextIOWrapper(sys.stdout.buffer, encoding=self.encoding,
                                                             newline="\n")
            return self._file
        if os.path.isdir(self.path):
            raise CrftkError("cannot open for writing (is a directory)", self.path)
        where = output_target(self.path)
        if not where.atomic:        # a FIFO, a device, /dev/stdout: written directly, never replaced
            try:
                self._file = open_direct(where, self.binary, encoding=self.encoding)
            except OSError as e:
                raise CrftkError(f"cannot open for writing ({e.strerror or e})", self.path) from None
            self._direct = True
            return self._file
        target = where.where
        old_mode = None
        try:
            old_mode = stat.S_IMODE(os.stat(target).st_mode)
        except OSError:
            pass
        try:
            tmp, fd = open_temp_beside(target)
        except OSError as e:
            reason = e.strerror or str(e)
            raise CrftkError(f"cannot open for writing ({reason})", self.path) from None
        try:
            if old_mode is not None and hasattr(os, "fchmod"):
                os.fchmod(fd, old_mode)
            if self.binary:
                f = os.fdopen(fd, "wb")
            else:
                f = os.fdopen(fd, "w", encoding=self.encoding, newline="\n")
            fd = None
            # within the try: a signal (SIGTERM is a KeyboardInterrupt) before __enter__ returns
            # means no __exit__, so the file would be left behind
            self._file, self._tmp, self._target = f, tmp, target
            self.temp_path = tmp
        except BaseException:
            if fd is not None:
                os.close(fd)
            else:
                f.close()
            self._file = self._tmp = self._target = self.temp_path = None
            _unlink_quietly(tmp)
            raise
        return f

    def __exit__(self, exc_type, exc, tb):
        f, tmp, target = self._file, self._tmp, self._target
        self._file = self._tmp = self._target = self.temp_path = None
        if tmp is None:  # standard output, or an output written directly
            if f is None:
                return False
            direct, self._direct = self._direct, False
            if not direct:
                wrapper, self._stdout = self._stdout, None
                try:
                    f.flush()
                finally:
                    if wrapper is not None:
                        wrapper.detach()
                return self._unwritable(exc)
            try:
                f.close()           # flushes
            except OSError as e:
                if exc_type is None:
                    raise CrftkError(f"cannot write ({e.strerror or e})", self.path) from None
            self._raise_if_full(exc)
            return self._unwritable(exc)
        if exc_type is not None:
            try:
                f.close()
            except Exception:
                pass
            _unlink_quietly(tmp)
            self._raise_if_full(exc)
            return self._unwritable(exc)
        try:
            if not f.closed:
                f.flush()
                os.fsync(f.fileno())
                f.close()
            os.replace(tmp, target)
        except OSError as e:
            try:
                f.close()
            except Exception:
                pass
            _unlink_quietly(tmp)
            reason = e.strerror or str(e)
            raise CrftkError(f"cannot write ({reason})", self.path) from None
        fsync_directory(os.path.dirname(target))
        return False

    def _unwritable(self, exc):
        """Text the encoding cannot write (a model's label, in tag's output) as a CrftkError."""
        if isinstance(exc, UnicodeEncodeError) and _codec_of(exc) == self.encoding:
            text = exc.object[exc.start:exc.end]
            raise CrftkError(f"cannot write {shown(text)} in {self.encoding}, the output's encoding",
                             STDOUT_NAME if self.path == "-" else self.path) from None
        return False

    def _raise_if_full(self, exc):
        raise_if_full(exc, self.path)


def raise_if_full(exc, path):
    """A write of output ``path`` that failed for want of room (a full disk, /dev/full) is one line,
    not a traceback."""
    if isinstance(exc, OSError) and exc.errno in _NO_ROOM:
        raise CrftkError(f"cannot write ({exc.strerror})", path) from None


def _codec_of(x):
    """The codec name of a stream's or a UnicodeError's encoding (None if it has none)."""
    try:
        return codecs.lookup(x.encoding).name
    except (AttributeError, LookupError, TypeError):
        return None


#: errors of a write that found no room: only writing the output raises them
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


class AtomicFiles:
    """Several outputs, each written to a temporary file beside it (as by AtomicWriter) and all
    renamed into place when the ``with`` block ends cleanly: a failure leaves none of them.

    ``with AtomicFiles(paths) as files: f = files.open(i); f.write(...)``; opening the next
    file closes the one before (one file open at a time, however many outputs). The files are
    text in ``encoding`` (UTF-8 by default); text it cannot write is a CrftkError.
    """

    def __init__(self, paths, encoding=DEFAULT_ENCODING):
        self.paths = [os.fsdecode(os.fspath(p)) for p in paths]
        self.encoding = codec(encoding)
        self._temps = {}        # output number: (temporary file, the file it replaces)
        self._file = None
        self._file_is_temp = False
        self._current = 0       # the output being written

    def __enter__(self):
        return self

    def open(self, i):
        self._close()
        self._current = i
        where = output_target(self.paths[i])
        try:
            if not where.atomic:        # a FIFO or device: written directly, never replaced
                self._file = open_direct(where, encoding=self.encoding)
                self._file_is_temp = False
                return self._file
            tmp, fd = open_temp_beside(where.where)
        except OSError as e:
            raise CrftkError(f"cannot open for writing ({e.strerror or e})", self.paths[i]) from None
        self._temps[i] = (tmp, where.where)
        self._file = os.fdopen(fd, "w", encoding=self.encoding, newline="\n")
        self._file_is_temp = True
        return self._file

    def _close(self):
        f, self._file = self._file, None
        if f is not None:
            f.flush()
            if self._file_is_temp:
                os.fsync(f.fileno())
            f.close()

    def __exit__(self, exc_type, exc, tb):
        failed = self.paths[self._current]      # the output an error names
        try:
            if exc_type is None:
                self._close()
                for i, (tmp, target) in sorted(self._temps.items()):
                    failed = self.paths[i]
                    os.replace(tmp, target)
                for directory in {os.path.dirname(target) for _, target in self._temps.values()}:
                    fsync_directory(directory)
                self._temps = {}
        except OSError as e:
            raise CrftkError(f"cannot write ({e.strerror or e})", failed) from None
        finally:
            if self._file is not None:
                try:
                    self._file.close()
                except OSError:
                    pass
                self._file = None
            for tmp, _ in self._temps.values():
                _unlink_quietly(tmp)
            self._temps = {}
        raise_if_full(exc, self.paths[self._current])
        if isinstance(exc, UnicodeEncodeError) and _codec_of(exc) == self.encoding:
            text = exc.object[exc.start:exc.end]
            raise CrftkError(f"cannot write {shown(text)} in {self.encoding}, the output's encoding",
                             self.paths[self._current]) from None
        return False


def _host_tag():
    """8 hex digits naming this machine, so that a pid in a temp name is only ever
    checked on the host that wrote it (directories can be shared over a network)."""
    import hashlib      # here, with socket and secrets: libcrypto only in a process that writes a file
    import socket
    return hashlib.sha256(socket.gethostname().encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _temp_name_pattern(base):
    """Matches the temp names :func:`open_temp_beside` gives for ``base``: (pid, host tag)."""
    return re.compile(re.escape(f".{base}.") + r"([1-9][0-9]{0,9})-([0-9a-f]{8})-[0-9a-f]{8}\.tmp")


def _process_is_gone(pid):
    """True only when no process ``pid`` exists; any doubt counts as alive."""
    if os.name != "posix":      # os.kill(pid, 0) would terminate the process on Windows
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):   # PermissionError: alive, another user's
        return False
    return False


def remove_stale_temps(target):
    """Remove the temp files that killed writers (``kill -9``, a crash) left for ``target``.

    Only files named as :func:`open_temp_beside` names them for this target, written
    on this host by a process that no longer exists, are removed; a running writer's
    file, another program's files and anything that is not a regular file stay.
    """
    if os.name != "posix":
        return
    directory, base = os.path.split(target)
    pattern = _temp_name_pattern(base)
    host = _host_tag()
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return
    for name in names:
        m = pattern.fullmatch(name)
        if m is None or m.group(2) != host:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or not _process_is_gone(pid):
            continue
        path = os.path.join(directory, name)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError:
            pass


def open_temp_beside(target):
    """Create a new temporary file next to ``target``: returns (path, fd open for writing).

    Its name is ``.{base}.{pid}-{host}-{random}.tmp``, so that a later writer can
    tell whether the process that made it is still alive; stale ones for the same
    target are removed first (:func:`remove_stale_temps`). Raises OSError.
    """
    remove_stale_temps(target)
    directory, base = os.path.split(target)
    prefix = f".{base}.{os.getpid()}-{_host_tag()}-"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_BINARY", 0)
    import secrets
    for _ in range(100):
        tmp = os.path.join(directory, f"{prefix}{secrets.token_hex(4)}.tmp")
        try:
            return tmp, os.open(tmp, flags, 0o666)  # umask applies, like open()
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary file name", target)


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def fsync_directory(directory):
    """Make a rename durable; best effort (not possible on every platform)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
