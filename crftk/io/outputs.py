"""Where an output goes, and that it destroys no input.

A regular file (or a new one) is written atomically (a temporary file beside it, renamed over
it: see crftk.io.atomic.AtomicWriter); a symbolic link is followed, so the file it names is
replaced and the link stays. Anything else is never replaced: a FIFO or a character device
(``/dev/null``, a terminal) is opened and written directly, as a stream, and a name of an open
descriptor (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``, ``/proc/self/fd/N``) writes to
that descriptor, sharing its position and append mode as a shell redirection does. Block
devices and sockets are refused. :func:`check_apart` refuses, before any work, an output that
is the same file as an input or as another output; :func:`check_output` that an output can be
written, and :func:`directory_outputs` names (and checks) the outputs of ``-o DIR``.
"""

import os
import re
import stat

from crftk.errors import CrftkError

_DESCRIPTOR_NAMES = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}
_DESCRIPTOR_PATH = re.compile(r"/(?:dev/fd|proc/self/fd)/([0-9]{1,9})")


class Target:
    """Where an output named ``path`` goes: ``kind`` is "file" (written atomically to
    ``where``, the file a symbolic link names), "special" (a FIFO or character device at
    ``where``, opened and written directly) or "descriptor" (the open descriptor ``fd``)."""

    def __init__(self, kind, where=None, fd=None):
        self.kind, self.where, self.fd = kind, where, fd

    @property
    def atomic(self):
        return self.kind == "file"


def output_target(path, what="output"):
    """The :class:`Target` of an output path (not ``"-"``); CrftkError for a directory, a
    block device or a socket."""
    path = os.fsdecode(os.fspath(path))
    fd = _descriptor(path)
    if fd is not None:
        return Target("descriptor", path, fd)
    try:
        mode = os.stat(path).st_mode       # through symbolic links
    except OSError:
        mode = None
    if mode is None or stat.S_ISREG(mode):
        where = os.path.realpath(path) if os.path.islink(path) else path
        return Target("file", where)
    if stat.S_ISDIR(mode):
        raise CrftkError(f"cannot write the {what}: is a directory", path)
    if stat.S_ISFIFO(mode) or stat.S_ISCHR(mode):
        return Target("special", path)
    kind = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else "a special file"
    raise CrftkError(f"cannot write the {what}: is {kind} (crftk writes regular files, FIFOs and character "
                     "devices such as /dev/null)", path)


def _descriptor(path):
    """The descriptor number that ``path`` names (``/dev/stdout``, ``/dev/fd/3``) when it is open
    in this process, else None."""
    fd = _DESCRIPTOR_NAMES.get(path)
    if fd is None:
        m = _DESCRIPTOR_PATH.fullmatch(path)
        if m is None:
            return None
        fd = int(m.group(1))
    try:
        os.fstat(fd)
    except OSError:
        return None
    return fd


def open_direct(target, binary=False, encoding="utf-8"):
    """Open a "special" or "descriptor" :class:`Target` for writing (closing the file never
    closes the descriptor it names), as text in ``encoding`` unless ``binary``; raises OSError."""
    if target.kind == "descriptor":
        fd = os.dup(target.fd)
    else:
        # O_TRUNC is meaningless on a FIFO or device; no O_CREAT: it exists, and must not be made
        fd = os.open(target.where, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    try:
        return os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding=encoding, newline="\n")
    except BaseException:
        os.close(fd)
        raise


def check_special_output(target, path, what="output"):
    """For a target written directly: CrftkError unless it can be written."""
    if target.kind == "special" and not os.access(target.where, os.W_OK):
        raise CrftkError(f"cannot write the {what}: no permission to write it", path)


def _paths(named):
    """(description, path) of each path in ``named`` (pairs whose path may be a list of paths,
    None, '-' or a file object: those are skipped)."""
    for what, value in named:
        values = value if isinstance(value, (list, tuple)) else [value]
        for p in values:
            if isinstance(p, (str, bytes, os.PathLike)):
                p = os.fsdecode(os.fspath(p))
                if p != "-":
                    yield what, p


def _identity(path):
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None, None
    return (st.st_dev, st.st_ino), st.st_mode


def check_apart(outputs, inputs=()):
    """Raise CrftkError, naming both, if an output is the same file (same device and inode,
    through symbolic and hard links) as an input, or two outputs are one file.

    ``outputs`` and ``inputs`` are (description, path or list of paths) pairs; None, '-' and
    file objects are skipped. A character device (``/dev/null``) may be both: writing it
    destroys nothing. Call it before any work, when every input path is known.
    """
    seen_inputs = {}
    for what, path in _paths(inputs):
        key, mode = _identity(path)
        if key is not None and not stat.S_ISCHR(mode):
            seen_inputs.setdefault(key, (what, path))
    seen_outputs = {}
    for what, path in _paths(outputs):
        key, mode = _identity(path)
        if key is not None and key in seen_inputs:
            in_what, in_path = seen_inputs[key]
            raise CrftkError(f"the {what} would overwrite the {in_what} {in_path} (the same file): give the "
                             "output another path", path)
        if key is not None and stat.S_ISCHR(mode):
            continue
        name = key if key is not None else os.path.realpath(path)
        if name in seen_outputs:
            other_what, other = seen_outputs[name]
            raise CrftkError(f"the {what} would overwrite the {other_what} {other} (the same file): give each "
                             "output its own path", path)
        seen_outputs[name] = (what, path)


def check_output(path, what="output"):
    """Raise CrftkError unless ``path`` can be written: run before any long work.

    ``"-"`` (standard output) always can. A regular file's directory must exist and be
    writable (the file itself is replaced atomically, so its own permissions do not matter);
    a FIFO or character device must be writable itself (it is written directly, never
    replaced: see crftk.io.outputs); a directory, a block device or a socket is refused.
    """
    if path is None:
        return
    path = os.fsdecode(os.fspath(path))
    if path == "-":
        return
    target = output_target(path, what)
    if not target.atomic:
        check_special_output(target, path, what)
        return
    directory = os.path.dirname(target.where) or "."
    if not os.path.isdir(directory):
        raise CrftkError(f"cannot write the {what}: directory {directory} does not exist", path)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise CrftkError(f"cannot write the {what}: no permission to write in {directory}", path)


def directory_outputs(inputs, out_dir):
    """The output path of each input file in directory ``out_dir`` (``-o DIR``): the input's
    file name in ``out_dir``. Raises CrftkError before any work for standard input (no name),
    two inputs of one name, an output that would replace its input, or one that cannot be written
    (a directory, a block device or a socket of that name, a FIFO without write permission)."""
    targets, seen = [], {}
    for path in inputs:
        if not isinstance(path, (str, bytes, os.PathLike)) or os.fsdecode(os.fspath(path)) == "-":
            raise CrftkError("standard input has no file name to give its output in the output directory "
                             "(-o DIR): tag it to -o FILE or stdout", out_dir)
        path = os.fsdecode(os.fspath(path))
        target = os.path.join(out_dir, os.path.basename(path))
        if target in seen:
            raise CrftkError(f"{seen[target]} and {path} would both be written to {target}: "
                             "give inputs distinct file names", path)
        if os.path.exists(target) and os.path.samefile(target, path):
            raise CrftkError(f"the output {target} would replace its input", path)
        where = output_target(target)       # a directory, a socket there: refused now, not once
        if not where.atomic:                # the inputs before it are tagged
            check_special_output(where, target)
        seen[target] = path
        targets.append(target)
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise CrftkError("cannot write the outputs: no permission to write in the directory", out_dir)
    return targets
