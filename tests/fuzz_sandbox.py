"""A worker process for the fuzz properties whose calls may crash, hang or run away.

The Cython kernels skip bounds checks, so a damaged model that loads can read
out of bounds and kill the process; an absurd option (``-p 100000``,
``--history 10**9``) can exhaust threads or memory; and a forked child cannot
use OpenMP once its parent has (it hangs). Such calls therefore go to one
long-lived worker, started fresh with ``python -c``, under a memory limit and
a time limit. A crash, a hang or an allocation beyond the limit fails the one
property that caused it (with the worker's last words) and the next call
starts a new worker; the test run itself goes on.

:meth:`Sandbox.call` returns what the job returned, raises a
:class:`~crftk.errors.CrftkError` raised in the worker as the same error, and
raises :class:`WorkerFailure` (an AssertionError) for anything else.
"""

import io
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import crftk
from crftk.errors import CrftkError

#: The repository the parent imports crftk from: the worker imports the same one.
REPO = Path(crftk.__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent

#: Address space of the worker (a runaway allocation fails there, not on the machine).
MEMORY_LIMIT = 8 * 2**30
#: Seconds a call may take before the worker is killed and the call counts as hung.
TIME_LIMIT = 120.0

_LENGTH = struct.Struct("<Q")


class WorkerFailure(AssertionError):
    """A call in the worker raised something other than CrftkError, crashed or hung."""


_failure_types = {}


def _failure(kind, text):
    """A WorkerFailure subclass per kind of failure, so that Hypothesis tells distinct bugs apart."""
    name = "Worker" + "".join(c for c in kind.title() if c.isalnum())
    cls = _failure_types.get(name)
    if cls is None:
        cls = _failure_types[name] = type(name, (WorkerFailure,), {})
    return cls(text)


class Sandbox:
    """One worker process at a time, restarted after a crash or a hang."""

    def __init__(self, memory_limit=MEMORY_LIMIT, time_limit=TIME_LIMIT):
        self.memory_limit = memory_limit
        self.time_limit = time_limit
        self.proc = None
        self.log = None
        self.starts = 0

    def _start(self):
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS)] + ([env["PYTHONPATH"]]
                                                                        if env.get("PYTHONPATH") else []))
        env["MALLOC_ARENA_MAX"] = "2"     # thread arenas would eat the address space limit
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        code = f"import fuzz_sandbox; fuzz_sandbox.serve({self.memory_limit})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log, cwd=str(REPO), env=env)
        self.starts += 1

    def _last_words(self):
        try:
            self.log.seek(0)
            text = self.log.read().decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return text[-3000:]

    def _stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()
                except OSError:
                    pass
            self.proc = None
        if self.log is not None:
            self.log.close()
            self.log = None

    close = _stop

    def call(self, job, *args, time_limit=None, **kwargs):
        """Run ``JOBS[job](*args, **kwargs)`` in the worker."""
        if self.proc is None or self.proc.poll() is not None:
            self._stop()
            self._start()
        message = pickle.dumps((job, args, kwargs))
        try:
            self.proc.stdin.write(_LENGTH.pack(len(message)) + message)
            self.proc.stdin.flush()
            reply = self._receive(time_limit or self.time_limit)
        except BrokenPipeError:
            reply = None
        except TimeoutError:
            self._stop()
            raise _failure("hung", f"{job} did not finish within {time_limit or self.time_limit:.0f} s") from None
        if reply is None:
            return self._died(job)
        status, payload = pickle.loads(reply)
        if status == "ok":
            return payload
        if status == "crftk":
            raise CrftkError(*payload)
        kind, text = payload
        raise _failure(kind, f"{job} raised in the worker:\n{text}")

    def _receive(self, time_limit):
        deadline = time.monotonic() + time_limit
        out = self.proc.stdout
        fd = out.fileno()
        data = b""
        need = _LENGTH.size
        header = True
        while True:
            while len(data) < need:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                ready, _, _ = select.select([fd], [], [], left)
                if not ready:
                    continue
                chunk = os.read(fd, max(need - len(data), 1 << 16))
                if not chunk:
                    return None
                data += chunk
            if header:
                need = _LENGTH.size + _LENGTH.unpack(data[:_LENGTH.size])[0]
                header = False
                continue
            return data[_LENGTH.size:need]

    def _died(self, job):
        code = self.proc.wait()
        words = self._last_words()
        self._stop()
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        raise _failure("crashed", f"the worker died ({how}) running {job}:\n{words}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._stop()
        return False


# ---------------------------------------------------------------------------
# the worker


def serve(memory_limit):
    """The worker's loop: read a job, run it, send back its outcome."""
    import resource
    protocol_in = os.fdopen(os.dup(0), "rb")
    protocol_out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)           # a job reading stdin must not read the protocol
    os.dup2(2, 1)                 # nor may a stray print write into it
    import crftk.cli  # noqa: F401  (import before the limit: the first import maps the most)
    resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
    while True:
        head = protocol_in.read(_LENGTH.size)
        if len(head) < _LENGTH.size:
            return
        job, args, kwargs = pickle.loads(protocol_in.read(_LENGTH.unpack(head)[0]))
        try:
            reply = ("ok", JOBS[job](*args, **kwargs))
        except CrftkError as e:
            reply = ("crftk", (e.message, e.path, e.line))
        except BaseException as e:    # noqa: BLE001  (reported to the parent, whatever it is)
            reply = ("error", (type(e).__name__, "".join(traceback.format_exception(type(e), e, e.__traceback__))))
        try:
            data = pickle.dumps(reply)
        except Exception as e:        # noqa: BLE001
            data = pickle.dumps(("error", ("UnpicklableResult", repr(e))))
        protocol_out.write(_LENGTH.pack(len(data)) + data)
        protocol_out.flush()


def job_cli(args, input_text=None):
    """crftk's command line in-process (click's CliRunner): exit code, output, any traceback."""
    from click.testing import CliRunner

    from crftk.cli import main
    result = CliRunner().invoke(main, [str(a) for a in args], input=input_text, catch_exceptions=True)
    exc = result.exception
    tb = None
    if exc is not None and not isinstance(exc, SystemExit):
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr, "traceback": tb}


def job_tag(model, inputs, **options):
    """Load a model (a path or its bytes) and tag files with it; returns the output text."""
    from crftk.commands.tag import tag_files
    from crftk.model import Model
    m = Model.from_bytes(model) if isinstance(model, bytes) else Model.load(model)
    out = io.StringIO()
    tag_files(m, inputs, out, **options)
    return out.getvalue()


def job_tag_run(model_path, inputs, output, **options):
    """crftk tag's library call on a model file of any kind (CRF, bag, pipeline, factorial CRF),
    which chooses the tagger: returns the output file's text."""
    from crftk.commands.tag import run
    run(model_path, inputs, output, **options)
    with open(output, encoding="utf-8") as fh:
        return fh.read()


def job_fit(rows, template, **options):
    """Train on in-memory sentences (lists of rows) with a template (its text, or a file);
    returns the weights' (size, all finite)."""
    import numpy as np

    from crftk.io.conll import Sentence
    from crftk.features.templates import parse_template, read_template
    from crftk.commands.train import fit
    sentences = [Sentence([list(r) for r in s], d, 1, "<fuzz>") for d, s in enumerate(rows)]
    template = read_template(template) if isinstance(template, Path) else parse_template(template)
    model = fit(sentences, template, log=lambda msg: None, **options)
    return model.weights.size, bool(np.isfinite(model.weights).all())


def job_induce(train_file, template_path, **options):
    """Induce on a file; returns the weights' (size, all finite)."""
    import numpy as np

    from crftk.commands.induce import induce
    model = induce([train_file], template_path, log=lambda msg: None, **options)
    return model.weights.size, bool(np.isfinite(model.weights).all())


def job_fit_dicts(X, y, **options):
    """crftk.CRF on feature dicts; returns the weights' (size, all finite) and the predictions."""
    import numpy as np

    from crftk import CRF
    crf = CRF(**options).fit(X, y)
    return crf.model_.weights.size, bool(np.isfinite(crf.model_.weights).all()), crf.predict(X)


JOBS = {"cli": job_cli, "tag": job_tag, "tag_run": job_tag_run, "fit": job_fit, "induce": job_induce,
        "fit_dicts": job_fit_dicts}
