"""Data-parallel training on a Dask cluster: shards on the workers, the optimizer on the driver.

The pattern of Spark MLlib's and dask-glm's L-BFGS. The encoded training corpus is
cut into one shard per worker thread (contiguous sentences, about equal tokens)
and sent once; each worker builds its shard's objective once (the feature space
travels as model-file bytes). Every evaluation broadcasts the parameters, each
shard computes its part of the unpenalized objective and gradient, the parts are
summed pairwise on the workers (a tree reduction: the driver receives one
vector), and the driver adds the penalty. Any objective that is a sum over
sentences splits this way: the likelihood (with the curvature and counts that pcg
and GIS ask for) and MCE. MCE-F is a ratio of sums: each shard returns its
smoothed TP, FN, FP and the two gradients they need, which the driver combines.
"""

import time
import uuid

import numpy as np

from crftk.distributed.cluster import Cluster, require, worker_threads
from crftk.errors import CrftkError
from crftk.model import Model, chain_record
from crftk.objectives import Likelihood, Penalty
from crftk.objectives.mce import MCE, MCEF, _sigmoid, chunk_table, labeling_chunks
from crftk.progress import plural

#: Times an evaluation is run again after its shards were lost with a worker, and the
#: seconds to wait before each (the scheduler notices a dead worker within moments).
MAX_RESENDS = 3
RESEND_WAIT = 1.0

#: Algorithms that go through the corpus sentence by sentence (not a sum the workers can split).
SEQUENTIAL = ("sgd", "perceptron", "pa", "arow")

# On each worker: (run, shard) -> the shard's objective, for the run it last served.
_SHARDS = {}


def check_algorithm(algorithm):
    """CrftkError for a training method that cannot run data-parallel."""
    if algorithm in SEQUENTIAL:
        raise CrftkError(f"--algorithm {algorithm} updates the weights sentence by sentence, so it cannot "
                         "run on a cluster: use lbfgs, cg, pcg, mixed-cg, gis or quickprop")


class _MCEFPart(MCEF):
    """MCE-F over one shard: the sums its objective is a ratio of, and their gradients."""

    def __init__(self, inference, **options):
        try:
            super().__init__(inference, **options)
        except CrftkError:
            # MCE-F refuses a corpus without gold chunks; a shard without them still counts
            # the false positives of its competitors (the whole corpus was checked to have some)
            if getattr(self, "_act", None) is None or self.corpus.labels is None:
                raise
            a, b, first = labeling_chunks(self._act, self._sent_ptr, self.labels)
            if a.size:
                raise
            self._gold_a, self._gold_b = a, b
            self._gold_keys = np.sort(self._chunk_keys(a, b, first))

    def statistics(self, w):
        """(TP, FN, FP, gradient of the gold segments' terms, of the false-positive ones) at w:
        the objective's gradient is A * the first + B * the second, with A and B from the totals."""
        w = np.ascontiguousarray(w, dtype=np.float64)
        ev = self._evaluate(w)
        gold = ev["is_gold"]
        z = self.alpha * ev["d"] + self.beta
        loss, keep = _sigmoid(z), _sigmoid(-z)
        base = self.alpha * loss * keep
        parts = self._parts_competitor if self.measure == "competitor" else self._parts_segment
        g_gold = self._gradient(w, ev, *parts(ev, np.where(gold, base, 0.0)))
        g_fp = self._gradient(w, ev, *parts(ev, np.where(gold, 0.0, base)))
        return np.array([keep[gold].sum(), loss[gold].sum(), loss[~gold].sum()]), g_gold, g_fp


def mcef_value(gamma, stats, g_gold, g_fp):
    """MCE-F's loss and gradient (without the penalty) from the summed statistics."""
    tp, fn, fp = (float(x) for x in stats)
    g2 = gamma ** 2
    zn = g2 * fn + fp
    zd = (g2 + 1.0) * tp
    if zd <= 0.0:
        zd = np.finfo(float).tiny
    a = g2 / zd + (g2 + 1.0) * zn / zd ** 2
    return zn / zd, a * g_gold + g_fp / zd


def _shard_objective(opt, inference):
    """The unpenalized objective of a shard (the driver adds the penalty once, to the sum)."""
    if opt["objective"] == "mce":
        return MCE(inference, alpha=opt["mce_alpha"], beta=opt["mce_beta"], smoothing=opt["mce_smoothing"],
                   c2=0.0)
    if opt["objective"] == "mce-f":
        return _MCEFPart(inference, alpha=opt["mce_alpha"], beta=opt["mce_beta"], gamma=opt["mce_gamma"], c2=0.0)
    return Likelihood(inference, c2=0.0)


def _on_worker(run, index, shard, space_bytes, opt, threads):
    key = (run, index)
    objective = _SHARDS.get(key)
    if objective is None:
        for old in [k for k in _SHARDS if k[0] != run]:
            del _SHARDS[old]
        if isinstance(space_bytes, bytes):
            model = Model.from_bytes(space_bytes, name="<feature space>")
        else:       # a space the worker holds (crftk.distributed.encoding): the model made here
            model = Model(space_bytes, np.zeros(space_bytes.n_params), opt["model_info"])
        structure = model.structure
        inference = structure.bind(shard, worker_threads(threads), **opt.get("bind", {}))
        objective = _SHARDS[key] = _shard_objective(opt, inference)
    return objective


def shard_evaluate(run, index, shard, space_bytes, opt, threads, params, what):
    """On a worker: the shard's part of the objective at ``params`` (a tuple of summable parts).

    ``what``: "value" (value, gradient), "curvature" (value, gradient, pcg's diagonal),
    "counts" (empirical feature counts, GIS's constant per shard as a 1-vector).
    """
    objective = _on_worker(run, index, shard, space_bytes, opt, threads)
    if what == "counts":
        return objective.empirical_counts(), np.array([objective.max_active()], dtype=np.float64)
    if isinstance(objective, _MCEFPart):
        return objective.statistics(params)
    if isinstance(objective, Likelihood):
        loss, grad = objective._loglik(params, need_curvature=what == "curvature")
        if what == "curvature":
            return np.array([loss]), grad.copy(), objective.curvature(params)
        return np.array([loss]), grad.copy()
    value, grad = objective(params)
    return np.array([value]), grad


def add_parts(a, b, what):
    """Two shards' parts summed (GIS's constant is a maximum, not a sum)."""
    if what == "counts":
        return a[0] + b[0], np.maximum(a[1], b[1])
    return tuple(x + y for x, y in zip(a, b))


def shard_bounds(corpus, n_shards):
    """Contiguous ranges (first, end) of sentences with about equal tokens, none empty."""
    n = corpus.n_sentences
    n_shards = max(1, min(n_shards, n))
    ends = np.searchsorted(corpus.sent_ptr[1:], np.linspace(0, corpus.n_tokens, n_shards + 1)[1:-1],
                           side="left") + 1
    bounds = [0] + sorted(set(int(e) for e in ends if 0 < e < n)) + [n]
    return list(zip(bounds[:-1], bounds[1:]))


def split(corpus, n_shards):
    """The shards of :func:`shard_bounds` as corpora of their own."""
    return [corpus.subset(np.arange(lo, hi)) for lo, hi in shard_bounds(corpus, n_shards)]


class ShardedObjective:
    """The training objective over shards on a cluster; callable like Likelihood (params ->
    penalized value and gradient), with what pcg and GIS ask of it."""

    def __init__(self, cluster, opt, structure, corpus, frozen, log=None, model=None, bind=None):
        self.cluster = cluster
        self.kind = opt["objective"]
        self.gamma = opt["mce_gamma"]
        self.penalty = Penalty(opt["c2"], frozen)
        self.n_params = structure.n_params
        self.n_evals = 0
        self.track_curvature = False
        self.run = uuid.uuid4().hex
        self._last = None
        self._counts = None
        self.log = log
        client = cluster.client
        slots = cluster.slots()
        kept = getattr(corpus, "shards", None)        # a KeptShards (crftk.distributed.encoding)
        if self.kind == "mce-f":        # the check each shard's MCE-F leaves to the whole corpus
            act, _ = chunk_table(structure.space.labels)
            if labeling_chunks(act, corpus.sent_ptr, structure.gold(corpus))[0].size == 0:
                raise CrftkError("MCE-F needs chunks (target segments) in the gold labels; found none")
        self._corpus = corpus
        self._kept = kept is not None
        self._bounds = list(kept) if self._kept else shard_bounds(corpus, len(slots))
        if model is None:           # the structure as the workers rebuild it
            model = Model(structure.space, np.zeros(structure.space.n_params), chain_record(structure.name),
                          structure=structure.name)
        self._model_info = model.info
        self._space_bytes = None if self._kept else model.to_bytes()
        self._opt = {k: opt[k] for k in ("objective", "mce_alpha", "mce_beta", "mce_smoothing", "mce_gamma")}
        self._opt["bind"] = dict(bind or {})
        self._threads = cluster.task_threads()
        self.workers_used = set()
        with cluster.guard("no model was saved"):
            if self._kept:      # the workers hold the space already: no second copy from here
                self._space = corpus.space
                self._opt["model_info"] = self._model_info
                self._shards = list(kept)
            else:
                self._space = client.scatter(self._space_bytes, broadcast=True, hash=False)
                self._shards = [(slots[i], self._send(i, slots[i])) for i in range(len(self._bounds))]
            self.workers_used |= set(a for a, _ in self._shards)
        self.bytes_per_evaluation = self.broadcast_bytes = self.reduce_bytes = 0
        self._logged_bytes = False
        self.resent = 0
        if log is not None:
            log(f"data-parallel: {plural(len(self._shards), 'shard')} on {plural(len(set(slots)), 'Dask worker')} "
                f"({cluster.where.removeprefix('the ')})")

    def _send(self, i, address):
        self.workers_used.add(address)
        lo, hi = self._bounds[i]
        return self.cluster.client.scatter(self._corpus.subset(np.arange(lo, hi)), workers=[address], hash=False)

    def _resend(self):
        """Send again the shards (and the feature space) that died with a worker; False if none did."""
        if self._kept:      # task results: the scheduler computes lost ones again from their pieces
            if self.log is not None:
                self.log("data-parallel: a Dask worker was lost; its shards are read and encoded again")
            self.resent += 1
            return True
        lost = [i for i, (_, future) in enumerate(self._shards) if future.status != "finished"]
        if not lost and self._space.status == "finished":
            return False
        client = self.cluster.client
        if self._space.status != "finished":
            self._space = client.scatter(self._space_bytes, hash=False)
        held = {address: 0 for address in self.cluster.worker_addresses()}
        for i, (address, future) in enumerate(self._shards):
            if i not in lost and address in held:
                held[address] += 1
        for i in lost:
            address = min(held, key=held.get)       # the worker holding the fewest shards
            held[address] += 1
            self._shards[i] = (address, self._send(i, address))
        self.resent += len(lost)
        if self.log is not None:
            self.log(f"data-parallel: a Dask worker was lost; {plural(len(lost), 'shard')} sent again")
        return True

    # -- one pass over the shards ------------------------------------------------------
    def _reduce(self, params, what):
        """The shards' parts at ``params``, summed; a shard lost with its worker is sent again."""
        with self.cluster.guard("no model was saved"):
            for attempt in range(MAX_RESENDS + 1):
                try:
                    return self._reduce_once(params, what)
                except CrftkError:
                    raise
                except Exception:
                    if self.cluster.lost() or attempt == MAX_RESENDS:
                        raise
                    time.sleep(RESEND_WAIT)     # for the scheduler to see which worker died (or for
                    if self.cluster.lost():     # this client to see that the scheduler did)
                        raise
                    self._resend()

    def _reduce_once(self, params, what):
        if self.cluster.lost():         # before the calls below wait for it to come back
            raise ConnectionError("lost the scheduler")
        client = self.cluster.client
        # to one worker, then down a tree to the others (Dask's replicate: each holder sends to two
        # more, ceil(log2 M) rounds; a scatter with broadcast sends M copies from here, and the
        # shards' tasks fetching from one holder would make it send M - 1)
        shared = client.scatter(params, hash=False)
        holders = set(a for a, _ in self._shards)
        if len(holders) > 1:
            replicate(client, shared)
        parts = [client.submit(shard_evaluate, self.run, i, shard, self._space, self._opt, self._threads,
                               shared, what, workers=[address] if address else None, allow_other_workers=True,
                               pure=False)
                 for i, (address, shard) in enumerate(self._shards)]
        while len(parts) > 1:           # pairwise sums on the workers
            pairs = [client.submit(add_parts, a, b, what, pure=False) for a, b in zip(parts[::2], parts[1::2])]
            parts = pairs + parts[len(pairs) * 2:]
        result = parts[0].result()
        # sent (at most): the parameters to every worker, then the parts of every shard once
        # (to the worker summing them, or to the driver at the root)
        vectors = sum(np.size(x) for x in result)
        self.broadcast_bytes = len(holders) * params.nbytes
        self.reduce_bytes = len(self._shards) * vectors * 8
        self.bytes_per_evaluation = self.broadcast_bytes + self.reduce_bytes
        if self.log is not None and not self._logged_bytes:
            self._logged_bytes = True
            self.log(f"data-parallel: each evaluation sends {_megabytes(self.broadcast_bytes)} of parameters "
                     f"down a tree to {plural(len(holders), 'worker')} and {_megabytes(self.reduce_bytes)} of "
                     f"partial sums up the reduction")
        return result

    def _evaluate(self, params, need_curvature=False):
        """(value, gradient) of the unpenalized objective, reusing the last pass at the same point."""
        last = self._last
        if (last is not None and np.array_equal(last[0], params)
                and (last[3] is not None or not need_curvature)):
            return last[1], last[2]
        self.track_curvature |= need_curvature
        params = np.ascontiguousarray(params, dtype=np.float64)
        result = self._reduce(params, "curvature" if self.track_curvature and self.kind == "map" else "value")
        self.n_evals += 2 if self.kind == "mce-f" else 1
        if self.kind == "mce-f":
            value, grad = mcef_value(self.gamma, *result)
            curvature = None
        else:
            value, grad = float(result[0][0]), result[1]
            curvature = result[2] if len(result) > 2 else None
        self._last = (params.copy(), value, grad, curvature)
        return value, grad

    def __call__(self, params):
        value, grad = self._evaluate(params)
        return self.penalty(params, value, grad.copy())

    def summary(self):
        """What a model's training record says of the cluster: shards, workers, bytes sent."""
        return {"shards": len(self._bounds), "workers": len(self.workers_used),
                "bytes_per_evaluation": self.bytes_per_evaluation, "broadcast_bytes_per_evaluation":
                self.broadcast_bytes, "reduce_bytes_per_evaluation": self.reduce_bytes,
                "shards_resent": self.resent, "encoded_on_workers": self._kept}

    # -- what pcg and GIS ask (the likelihood only) --------------------------------------
    def _likelihood_only(self, what):
        if self.kind != "map":
            raise CrftkError(f"{what} needs --objective map")

    def _count_pass(self):
        if self._counts is None:
            self._likelihood_only("GIS")
            counts, most = self._reduce(np.zeros(self.n_params), "counts")
            self._counts = (counts, float(most[0]))     # a real total with real-valued attributes
        return self._counts

    def empirical_counts(self):
        return self._count_pass()[0]

    def max_active(self):
        return self._count_pass()[1]

    def expected_counts(self, w):
        return self._evaluate(w)[1] + self.empirical_counts()

    def curvature(self, w):
        self._likelihood_only("--precondition")
        self._evaluate(w, need_curvature=True)
        return self._last[3].copy()

    def release(self):
        """Drop the shards from the workers."""
        client = self.cluster.client
        if client is None or self.cluster.lost():
            return
        self._shards = []
        self._space = None
        run = self.run
        try:
            client.run(_forget, run)
        except Exception:
            pass


def _megabytes(n):
    return f"{n / 1e6:.2f} MB"


def replicate(client, future):
    """Copy a future's data to every worker by Dask's tree copy. A worker lost meanwhile is the
    scheduler's business: the tasks that need the data then fetch it from a holder."""
    try:
        client.replicate([future])
    except Exception:
        pass


def _forget(run):
    for key in [k for k in _SHARDS if k[0] == run]:
        del _SHARDS[key]


class DataParallel:
    """Training objectives on a Dask cluster: ``--scheduler ADDRESS`` or ``--workers N``.

    The cluster starts when the first objective is asked for (options and data are
    checked before), and stops at :meth:`close` (or the end of a ``with`` block).
    ``threads``: kernel threads per shard (0: see :class:`Cluster`).
    """

    def __init__(self, scheduler=None, workers=0, *, threads=0):
        require()
        self._cluster = Cluster(scheduler, workers, threads=threads)
        self._entered = False
        self._objectives = []

    def started(self):
        """The entered Cluster (started here when no objective asked for it yet)."""
        if not self._entered:
            self._cluster.__enter__()
            self._entered = True
        return self._cluster

    def objective(self, opt, structure, corpus, frozen, log=None, *, model=None, bind=None):
        """The sharded objective of ``structure`` on ``corpus``; ``model``: a Model the workers rebuild
        the structure from (default: one part of the structure's feature space), ``bind``: the
        options of its ``bind``."""
        check_algorithm(opt["algorithm"])
        objective = ShardedObjective(self.started(), opt, structure, corpus, frozen, log, model, bind)
        self._objectives.append(objective)
        return objective

    def close(self):
        if self._entered:
            for objective in self._objectives:
                objective.release()
            self._objectives = []
            self._cluster.__exit__(None, None, None)
            self._entered = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
