"""A Dask client for one run of crftk: a running scheduler, or a local cluster started for it.

Dask (``dask.distributed``) is an optional dependency; :func:`require` says in one
line what to install when it is missing. :class:`Cluster` turns the engine's ways
of failing into crftk errors: a scheduler that cannot be reached, one that has no
workers, and one lost while work is running (:meth:`Cluster.guard`) each give one
line (and, through the callers' atomic writers, no output). A worker that dies is
the engine's business: the scheduler runs its tasks again elsewhere; only a task
that keeps killing its workers is an error.
"""

import contextlib
import logging
import time
import warnings

from crftk.errors import CrftkError, UsageError, shown
from crftk.params import WORKERS, available_cores

INSTALL = "pip install crftk[dask]"

#: Seconds to wait for a scheduler to answer, and for its first worker.
CONNECT_TIMEOUT = 20
#: Seconds a failed call waits for the client to see whether the scheduler is gone.
LOST_WAIT = 2.0

# Dask logs its own view of what goes wrong (a lost connection, a restarted worker) as
# tracebacks on stderr; crftk says it in one line instead.
_QUIET = ("distributed", "tornado", "asyncio")


def require():
    """The ``distributed`` module; CrftkError saying what to install when Dask is missing."""
    try:
        import distributed
        # A folder named distributed on the path (a user's project, crftk's tests/distributed) is
        # an empty namespace package, not Dask.
        distributed.Client
    except (ImportError, AttributeError):
        raise CrftkError(f"--scheduler and --workers run on Dask, which is not installed: {INSTALL}") from None
    return distributed


class Cluster:
    """``with Cluster(scheduler=ADDRESS) as c`` or ``with Cluster(workers=N) as c``: ``c.client``.

    ``threads``: kernel threads per task (0: the cores of a worker's machine divided
    among the local workers, or all of a remote worker's cores).
    """

    def __init__(self, scheduler=None, workers=0, *, threads=0, connect_timeout=None):
        if bool(scheduler) == bool(workers):
            raise CrftkError("give either --scheduler ADDRESS or --workers N, not both"
                             if scheduler else "a cluster needs --scheduler ADDRESS or --workers N")
        if scheduler:
            require()
            check_address(scheduler)
        self.scheduler = scheduler
        self.workers = int(workers or 0)
        self.threads = int(threads or 0)
        self.connect_timeout = CONNECT_TIMEOUT if connect_timeout is None else connect_timeout
        self.client = None
        self._local = None
        self._levels = {}

    @property
    def where(self):
        return f"the Dask scheduler at {self.scheduler}" if self.scheduler else "the local Dask cluster"

    def __enter__(self):
        distributed = require()
        self._silence()
        try:
            if self.scheduler:
                try:
                    self.client = distributed.Client(self.scheduler, timeout=self.connect_timeout,
                                                     set_as_default=False)
                except (OSError, TimeoutError, ValueError) as e:
                    raise CrftkError(f"cannot reach {self.where}: {_reason(e)}") from None
            else:
                import dask
                # Dask's nannies set MALLOC_TRIM_THRESHOLD_ in their workers, so that memory goes back
                # to the system at once; feature extraction, allocating and freeing all the time,
                # then runs 1.3x slower (measured): the local workers keep glibc's default.
                # The scheduler's HTTP server (health checks; no dashboard here) moves off a port in
                # use (another cluster's 8787) with a warning of 4 lines on stderr: nothing to say.
                with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}), \
                        warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="Port [0-9]+ is already in use", category=UserWarning)
                    self._local = distributed.LocalCluster(
                        n_workers=self.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                        worker_dashboard_address=None, silence_logs=logging.CRITICAL)
                self.client = distributed.Client(self._local, set_as_default=False)
            try:
                self.client.wait_for_workers(1, timeout=self.connect_timeout)
            except (OSError, TimeoutError) as e:
                raise CrftkError(f"{self.where} has no workers ({_reason(e)})") from None
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for closing in (self.client, self._local):
            if closing is not None:
                with contextlib.suppress(Exception):
                    closing.close(timeout=5)
        self.client = self._local = None
        for name, level in self._levels.items():
            logging.getLogger(name).setLevel(level)
        self._levels = {}
        return False

    def _silence(self):
        for name in list(logging.root.manager.loggerDict) + list(_QUIET):
            if name.split(".")[0] in _QUIET and name not in self._levels:
                logger = logging.getLogger(name)
                self._levels[name] = logger.level
                logger.setLevel(logging.CRITICAL + 1)

    # -- what the workers are ---------------------------------------------------------
    def worker_addresses(self):
        return sorted(self.client.scheduler_info(n_workers=-1)["workers"])

    def slots(self):
        """A worker's address per task that can run at once (one per worker thread), sorted."""
        slots = []
        for address, worker in sorted(self.client.scheduler_info(n_workers=-1)["workers"].items()):
            slots += [address] * max(1, int(worker.get("nthreads", 1)))
        return slots

    @property
    def n_slots(self):
        """Tasks that can run at once (worker threads in all)."""
        return max(1, len(self.slots()))

    def task_threads(self):
        """Kernel threads each task asks for (0: resolved on the worker by :func:`worker_threads`)."""
        if self.threads:
            return self.threads
        if self._local is not None:
            return max(1, available_cores() // self.workers)
        return 0

    # -- failures -------------------------------------------------------------------
    def lost(self):
        """Whether the connection to the scheduler is gone."""
        client = self.client
        if client is None:
            return True
        status = getattr(client, "status", "running")
        return status not in ("running", "newly-created")

    def lost_soon(self, seconds=None):
        """Whether the connection to the scheduler is gone, or goes within ``seconds``: a call
        that failed on a closed connection can fail before the client notices."""
        deadline = time.monotonic() + (LOST_WAIT if seconds is None else seconds)
        while not self.lost():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    @contextlib.contextmanager
    def guard(self, outcome="nothing was written"):
        """Turn a lost scheduler, or a task that kills every worker it runs on, into CrftkError
        (its message ends with ``outcome``)."""
        try:
            yield
        except (CrftkError, KeyboardInterrupt):
            raise
        except Exception as e:
            if self.lost_soon() or "scheduler-connection-lost" in str(e):
                raise CrftkError(f"lost the connection to {self.where}; {outcome}") from None
            if type(e).__name__ == "KilledWorker":
                raise CrftkError(f"a task killed every worker it ran on ({_reason(e)}); {outcome}") from None
            raise


def check_options(scheduler, workers):
    """Before any work (what :class:`Cluster` would refuse only once made): ``--scheduler`` or
    ``--workers``, not both, Dask installed, and an address it can connect to. Returns workers."""
    workers = WORKERS.check(workers)
    if scheduler is not None and workers:
        raise CrftkError("give either --scheduler ADDRESS or --workers N, not both")
    require()
    if scheduler is not None:
        check_address(scheduler)
    return workers


def check_address(address):
    """UsageError unless ``address`` is one Dask can connect to ([SCHEME://]HOST:PORT, a scheme it
    knows): Dask's client, given a malformed one, fails only after it is made, and its
    finalizer then blocks the exit for 40 seconds."""
    from distributed.comm import parse_address, registry
    from distributed.comm.addressing import parse_host_port
    what = f"--scheduler {shown(address)}"
    try:
        scheme, location = parse_address(address)
    except (ValueError, TypeError) as e:
        raise UsageError(f"{what} is not a scheduler address ({_reason(e)})") from None
    try:
        registry.get_backend(scheme)
    except ValueError:
        known = ", ".join(sorted(set(registry.backends) - {"inproc"}))
        raise UsageError(f"{what}: Dask knows no scheme {scheme!r} (it knows {known})") from None
    if scheme == "inproc":
        raise UsageError(f"{what}: an inproc address is only reachable inside the process that made it")
    if scheme == "ucx":
        return              # ucx resolves its own addresses
    try:
        host, port = parse_host_port(location)
    except ValueError:
        raise UsageError(f"{what} has no valid port: give HOST:PORT or {scheme}://HOST:PORT "
                         f"(a scheduler listens on port 8786 by default)") from None
    if not host or not 1 <= port <= 65535:
        raise UsageError(f"{what} is not a scheduler address: give HOST:PORT or {scheme}://HOST:PORT with "
                         f"a port from 1 to 65535")


def worker_threads(threads):
    """On a worker: the kernel threads of a task asking for ``threads`` (0: the machine's cores
    shared among the worker's task threads, so that tasks running side by side do not
    oversubscribe it)."""
    if threads:
        return threads
    try:
        from distributed import get_worker
        slots = get_worker().state.nthreads
    except Exception:           # not on a worker (a test calling the task directly)
        slots = 1
    return max(1, available_cores() // max(1, slots))


def _reason(e):
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
