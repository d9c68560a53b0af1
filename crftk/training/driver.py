"""The training driver: one loop for every kind of model and every training method.

A kind of model that trains (crftk.kinds.chain, crftk.kinds.factorial) gives a *trainer*:
what it refuses, how it encodes the training data and starts (``prepare``), its development
scorer and the lines and records it adds. This module writes the rest once: the objective
(MAP, MCE, MCE-F) and the algorithm the options choose, the per-iteration log, dev scoring
and the best weights (``--keep``), checkpoints, the interrupt save, the trace and the
training record. ``crftk train``, ``induce``'s inner fits, ``bag``'s members and the Python
estimators all train through it.
"""

import math
import sys
import time

import numpy as np

from crftk import params
from crftk.errors import CrftkError, UsageError, shown
from crftk.features.attributes import AttributeSpace
from crftk.io.crfsuite import AttributeSequences
from crftk.io.partial import check_marker
from crftk.io.schemes import is_chunk_tag
from crftk.objectives import Likelihood
from crftk.optimize import OptimizeResult, cg, gis, lbfgs, quickprop
from crftk.optimize.common import NonFiniteStart, kept, map_large_blocks, trim_heap
from crftk.optimize.online import Batches, arow, averaged_perceptron, passive_aggressive, sgd
from crftk.params import resolve_threads
from crftk.progress import plural
from crftk.kinds import trainer_for
from crftk.training import streaming

TRAIN_PARAMS = params.TRAIN


def _stderr_log(msg):
    print(msg, file=sys.stderr, flush=True)


def check_options(options, log=_stderr_log):
    """All training options, defaults filled in, checked against TRAIN_PARAMS and each other;
    raises CrftkError on a bad value (a thread count above the cap is cut, with a warning)."""
    opt = params.check_params(TRAIN_PARAMS, options, "training", warn=log)
    if opt["algorithm"] == "sgd" and opt["c2"] == 0:
        raise UsageError("--algorithm sgd needs --c2 > 0: its learning-rate schedule is set by the "
                         "L2 coefficient (use lbfgs or perceptron to train without L2)")
    if opt["c1"] > 0 and opt["algorithm"] != "lbfgs":
        raise UsageError(f"--algorithm {opt['algorithm']} supports L2 only; use lbfgs (OWL-QN) for --c1")
    # MCE's competitor and gradient come from whole labelings (n-best, counts): a semi-Markov CRF
    # has them; MCE-F's segment-wise discriminants walk a token chain's Viterbi tables
    kinds = ("crf", "semimarkov") if opt["objective"] == "mce" else ("crf",)
    if opt["objective"] != "map" and (opt["algorithm"] not in ("lbfgs", "quickprop") or opt["order"] != 1
                                      or opt["model_type"] not in kinds or opt["c1"] > 0):
        what = "a first-order CRF or a semi-Markov CRF" if opt["objective"] == "mce" else "a first-order CRF"
        raise UsageError(f"--objective {opt['objective']} trains {what} with --algorithm lbfgs or quickprop "
                         "and L2 only")
    if opt["objective"] == "mce-f" and opt["algorithm"] != "quickprop":
        raise UsageError("--objective mce-f is not continuous (it jumps wherever the best incorrect "
                         "labeling changes), so line searches fail on it: use --algorithm quickprop")
    if opt["order"] == 2 and opt["algorithm"] not in ("lbfgs", "quickprop"):
        raise UsageError("--order 2 trains with --algorithm lbfgs or quickprop only")
    if opt["train_scheme"] != "none" and opt["constraints"] not in ("none", opt["train_scheme"]):
        raise UsageError(f"--constraints {opt['constraints']} contradicts --train-scheme {opt['train_scheme']}: "
                         f"the constraints are on the labels trained on; give --constraints "
                         f"{opt['train_scheme']} or none")
    if opt["model_type"] == "memm" and (opt["order"] == 2 or opt["algorithm"] not in ("lbfgs", "quickprop")):
        raise UsageError("--model-type memm trains with --algorithm lbfgs or quickprop and --order 1 only")
    if opt["max_segment"] and opt["model_type"] != "semimarkov":
        raise UsageError("--max-segment caps the segments of a semi-Markov CRF: give --model-type semimarkov")
    check_partial_options(opt)
    return opt


def check_partial_options(opt):
    """The options of partial labels (crftk.io.partial) and of the expected entity ratio."""
    marker = check_marker(opt["unknown_label"])
    if marker and opt["constraints"] != "none" and is_chunk_tag(marker):
        raise UsageError(f"--unknown-label {shown(marker)} is a label of the --constraints {opt['constraints']} "
                         "scheme: choose a marker that is no label (the default is ?)")
    if opt["entity_ratio"]:
        if opt["objective"] != "map":
            raise UsageError(f"--entity-ratio adds to the likelihood (--objective map), not to --objective "
                             f"{opt['objective']}")
        if opt["model_type"] != "crf" or opt["algorithm"] not in ("lbfgs", "cg"):
            raise UsageError("--entity-ratio trains a CRF (--model-type crf) with --algorithm lbfgs or cg")
        if opt["outside_label"] == marker:
            raise UsageError(f"--outside-label {shown(marker)} is the unknown marker, not a label")


def check_cluster(scheduler, workers, opt):
    """Before any work: the cluster options, Dask installed, an algorithm that can run on it."""
    workers = params.WORKERS.check(workers)
    if scheduler is None and not workers:
        return
    from crftk.distributed.cluster import check_options as check_cluster_options   # Dask only when asked for
    from crftk.distributed.training import check_algorithm
    check_cluster_options(scheduler, workers)
    check_algorithm(opt["algorithm"])
    if opt["entity_ratio"]:
        raise UsageError("--entity-ratio trains on one machine: its hinge needs the whole corpus's expected "
                         "entity count in every evaluation, which the Dask shards do not sum")


class StopWhenSet:
    """The objective, raising KeyboardInterrupt in place of an evaluation once ``stop`` is set."""

    def __init__(self, objective, stop):
        self.objective, self.stop = objective, stop

    def __call__(self, w):
        if self.stop.is_set():
            raise KeyboardInterrupt
        return self.objective(w)

    def __getattr__(self, name):         # n_evals and the like, as the objective has them
        return getattr(self.objective, name)


class Trace:
    """Writes one line per objective evaluation: evaluation, forward-backward passes so
    far, seconds, objective, and dev F1 when a development set is given (TSV)."""

    COLUMNS = ("evaluation", "passes", "seconds", "objective", "dev_f1")

    def __init__(self, objective, out, dev=None, to_weights=None):
        self.objective, self.out, self.dev = objective, out, dev
        self.to_weights = to_weights or (lambda x: x)
        self.start = time.perf_counter()
        self.n = 0
        out.write("\t".join(self.COLUMNS) + "\n")

    @property
    def fresh_gradients(self):           # the objective's gradients pass through as they are
        return getattr(self.objective, "fresh_gradients", False)

    def __call__(self, w):
        f, g = self.objective(w)
        self.n += 1
        seconds = time.perf_counter() - self.start     # the dev scoring below is not training time
        f1 = f"{self.dev.target(self.dev(self.to_weights(w))):.4f}" if self.dev is not None else ""
        self.out.write(f"{self.n}\t{self.objective.n_evals}\t{seconds:.4f}\t{f:.10g}\t{f1}\n")
        self.out.flush()
        return f, g


def objective_for(opt, inference, frozen):
    """The training objective the options choose, over a structure's inference. (MCE and the
    expected entity ratio are imported when chosen: MAP training loads neither.)"""
    if opt["objective"] == "mce":
        from crftk.objectives.mce import MCE
        return MCE(inference, alpha=opt["mce_alpha"], beta=opt["mce_beta"],
                   smoothing=opt["mce_smoothing"], c2=opt["c2"], frozen=frozen)
    if opt["objective"] == "mce-f":
        from crftk.objectives.mce import MCEF
        return MCEF(inference, alpha=opt["mce_alpha"], beta=opt["mce_beta"], gamma=opt["mce_gamma"],
                    c2=opt["c2"], frozen=frozen)
    if opt["entity_ratio"]:
        from crftk.objectives.entity_ratio import EntityRatio
        return EntityRatio(inference, ratio=opt["entity_ratio"], margin=opt["entity_ratio_margin"],
                           weight=opt["entity_ratio_weight"], outside=opt["outside_label"], c2=opt["c2"],
                           frozen=frozen)
    return Likelihood(inference, c2=opt["c2"], frozen=frozen)


#: the algorithms that evaluate the objective's likelihood and gradient passes (the kernels' packed
#: loops); the online learners' epochs and GIS's counts read the ids in loops that test the layout
COMPACT_ALGORITHMS = ("lbfgs", "cg", "pcg", "mixed-cg", "quickprop")


def _compact(opt, inference):
    """Have the bound inference hold its corpus compactly (a chain's: 3-byte attribute ids) where
    training reads that corpus through the likelihood passes alone (MCE's counts read it in numpy)."""
    compact = getattr(inference, "compact", None)
    if compact is not None and opt["objective"] not in ("mce", "mce-f") and opt["algorithm"] in COMPACT_ALGORITHMS:
        compact()


def run_algorithm(opt, objective, fun, w0, frozen, template, callback, log):
    """Run the chosen training method; fun is the objective as the batch methods see it."""
    algorithm = opt["algorithm"]
    fixed = frozen if frozen.any() else None
    common = dict(max_iter=opt["max_iter"], epsilon=opt["epsilon"], period=opt["period"], callback=callback)
    # the online learners' data: streamed Batches, or the objective's corpus in memory (a cluster's
    # objective has neither: those learners do not run there)
    if isinstance(objective, Batches):
        data = (objective, None)
    elif algorithm in streaming.ALGORITHMS:
        data = (objective.inference, objective.labels)
    if algorithm == "sgd":
        return sgd(*data, w0, c2=opt["c2"], frozen=fixed, learn_transitions=template.label_bigram, log=log, **common)
    if algorithm == "perceptron":
        return averaged_perceptron(*data, w0, frozen=fixed, **common)
    if algorithm == "pa":
        return passive_aggressive(*data, w0, pa_type=opt["pa_type"], c=opt["pa_c"],
                                  error_sensitive=opt["error_sensitive"], averaging=opt["averaging"],
                                  frozen=fixed, **common)
    if algorithm == "arow":
        return arow(*data, w0, variance=opt["arow_variance"],
                    gamma=opt["arow_gamma"], frozen=fixed, **common)
    if algorithm in ("cg", "pcg", "mixed-cg"):
        precondition = None
        if algorithm != "cg":
            # plus the prior's curvature; the floor keeps it usable without a prior
            floor = 1e-6 + 2.0 * opt["c2"]
            diagonal = objective.expected_counts
            if opt["precondition"] == "variance":
                objective.track_curvature = True        # in every pass, the first one included
                diagonal = objective.curvature
            precondition = lambda x: diagonal(x) + floor  # noqa: E731
        return cg(fun, w0, precondition=precondition,
                  mixed_after=opt["mixed_after"] if algorithm == "mixed-cg" else None, **common)
    if algorithm == "quickprop":
        # no gradient rule: where the objective jumps, its gradient need not vanish at a minimum
        return quickprop(fun, w0, first_step=opt["first_step"], gpd_iter=opt["gpd_iter"], gtol=0.0, **common)
    if algorithm == "gis":
        return gis(objective.expected_counts, objective.empirical_counts(), w0, C=objective.max_active(),
                   c2=opt["c2"], objective=lambda x: fun(x)[0], fixed=fixed, **common)
    if isinstance(objective, Likelihood):
        # L-BFGS only calls it and remembers its last point itself: no second copy of a pass
        objective.remember = False
    return lbfgs(fun, w0, c1=opt["c1"], l1_mask=None if opt["c1"] == 0 else ~frozen, m=opt["history"],
                 history_dtype=opt.get("history_precision", params.find("history_precision").default), **common)


class Outcome:
    """What a run of :func:`optimize` ends with: the optimizer's result, the weights kept and
    their iteration, the per-iteration records, the best dev score and the seconds taken."""

    def __init__(self, result, weights, chosen, history, best, seconds):
        self.result, self.weights, self.chosen = result, weights, chosen
        self.history, self.best, self.seconds = history, best, seconds

    @property
    def interrupted(self):
        return self.result.reason.startswith("interrupted")


def optimize(opt, objective, w0, frozen, *, template=None, to_weights=None, scorer=None, log=_stderr_log,
             describe=None, progress=None, trace=None, stop=None, checkpoint=None, keep_on_interrupt=False):
    """Minimise ``objective`` from ``w0`` with the options' algorithm; returns an Outcome.

    Each finished iteration is logged (``describe(info)`` gives the line's middle and the
    record's extra fields) and, with a ``scorer``, scored on the development set: the best
    weights are kept for ``--keep best``. ``progress(info)`` is called instead when ``log`` is
    None. ``checkpoint``: (save(weights, info, best, history), N), called every N iterations. With
    ``keep_on_interrupt``, a KeyboardInterrupt after the first iteration ends with the last
    finished iteration. ``stop``: a threading.Event ending training as an interrupt would.
    """
    to_weights = to_weights or (lambda x: x)
    best = {"score": -1.0, "iteration": 0, "w": None, "scores": None}
    history = []
    last_x = [None]         # the point of the last finished iteration
    clock = [time.perf_counter()]

    def on_iteration(info):
        now = time.perf_counter()
        last_x[0] = kept(info.x)       # L-BFGS's points are never changed: held without a copy
        if not np.isfinite(last_x[0]).all():
            raise _diverged(f"the weights are no longer finite after iteration {info.iteration}")
        if log is None:
            if progress is not None:
                progress(info)
            history.append({"iteration": info.iteration, "objective": info.f, "evals": info.n_evals})
            return False
        line, fields = describe(info)
        record = {"iteration": info.iteration, "objective": info.f,
                  "gnorm": info.gnorm if math.isfinite(info.gnorm) else None,
                  "xnorm": info.xnorm if math.isfinite(info.xnorm) else None,
                  "step": info.step if math.isfinite(info.step) else None, **fields}
        record["seconds"] = now - clock[0]      # where fields put it, else last
        if scorer is not None:
            w = to_weights(info.x)
            score = scorer(w)
            record.update(scorer.fields(score))
            line += scorer.text(score)
            if scorer.target(score) > best["score"]:
                best.update(score=scorer.target(score), iteration=info.iteration, w=kept(w), scores=score)
        line += f"  {record['seconds']:.2f}s"
        history.append(record)
        log(line)
        if checkpoint is not None and info.iteration % checkpoint[1] == 0:
            # the current point, not the best dev one: it is where training resumes from
            checkpoint[0](to_weights(last_x[0]), info, best, history)
        clock[0] = time.perf_counter()
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt
        return False

    start = time.perf_counter()
    fun = objective if trace is None else Trace(objective, trace, scorer, to_weights)
    if stop is not None:
        fun = StopWhenSet(fun, stop)
    try:
        result = run_algorithm(opt, objective, fun, w0, frozen, template, on_iteration, log)
    except NonFiniteStart:
        raise _diverged("the objective or its gradient is not finite at the first point") from None
    except KeyboardInterrupt:
        if not keep_on_interrupt or not history:
            raise
        # the last finished iteration stands in for the result (Wapiti does the same)
        done = history[-1]
        result = OptimizeResult(x=np.array(last_x[0]), f=done["objective"], n_iter=done["iteration"],
                                n_evals=done["evals"], converged=False,
                                reason=f"interrupted after iteration {done['iteration']}")
    seconds = time.perf_counter() - start
    if log is not None:
        log(result.reason if result.converged else "stopped before convergence: " + result.reason)
    weights, chosen = to_weights(result.x), result.n_iter
    if not np.isfinite(weights).all():
        raise _diverged("the final weights are not finite")
    if scorer is not None and opt["keep"] == "best" and best["w"] is not None:
        weights, chosen = best["w"], best["iteration"]
        log(scorer.kept_line(best))
    elif scorer is not None and scorer.last_line(best, chosen):
        log(scorer.last_line(best, chosen))
    if not weights.flags.writeable:      # held without a copy while training ran: the caller's to change
        weights = np.array(weights)
    return Outcome(result, weights, chosen, history, best, seconds)


def _diverged(what):
    """The error of a training run that left float64's range: never a model of NaN weights."""
    return CrftkError(f"training failed: {what} (real attribute values too large for float64 arithmetic? "
                      "scale them to a moderate range, e.g. within +-1e6); no model written")


def check_dev(dev, space, dev_source):
    """Refuse a development set unlike the training data: attribute data for an attribute space,
    else sentences with the gold columns, so exactly the training data's column count."""
    attributes = isinstance(space, AttributeSpace)
    if isinstance(dev, AttributeSequences) != attributes:
        raise CrftkError("the development set must be data of the training data's kind: "
                         + ("attribute data (feature dicts, a CRFsuite file)" if attributes else
                            "columns (a CoNLL file)"), dev_source)
    if attributes:
        if dev.labels is None:
            raise CrftkError("the development set has no labels", dev_source)
        return
    n, n_columns = len(dev[0].rows[0]), space.n_columns
    if n != n_columns:
        raise CrftkError(f"the development set has {n} columns, the training data {n_columns}",
                         dev_source, dev[0].line or None)


def _prepare(trainer, cluster, sentences, template, opt, init, init_space, log, source, n_threads):
    """The trainer's job: on a cluster, read and encoded by its workers where the kind and the data
    allow it (``prepare_on_cluster``), else here, the reason logged."""
    if cluster is not None:
        on_cluster = getattr(trainer, "prepare_on_cluster", None)
        why = ("--init starts from a model's feature space" if init is not None else
               "this kind of model is encoded on the driver" if on_cluster is None else None)
        if why is None:
            job = on_cluster(cluster, sentences, template, opt, log=log, source=source, n_threads=n_threads)
            if job is not None:
                return job
        else:
            log(f"data-parallel: the training data is read and encoded here ({why})")
    return trainer.prepare(sentences, template, opt, init=init, log=log, source=source, n_threads=n_threads,
                           init_space=init_space)


def fit(sentences, template, *, dev=None, init=None, init_space="grow", log=_stderr_log, trace=None, source=None,
        dev_source=None, keep_on_interrupt=False, checkpoint=None, scheduler=None, workers=0, inference=None,
        tolerance=None, max_sweeps=None, warm_start=False, stop=None, stream=False,
        stream_batch_tokens=params.STREAM_BATCH_TOKENS.default, **options):
    """Train a model on in-memory or streamed sentences; returns the Model (not saved).

    ``sentences``: an iterable of Sentence (read once); ``template``: a parsed
    Template, or None with ``init`` (a Model to start from: its feature spaces
    and weights); ``init_space``: "grow" adds the data's attributes, features and labels to
    its space, "keep" trains its space alone (crftk.kinds.incremental). ``dev``: a list of
    Sentence scored every iteration. ``trace``:
    an open text file for the per-evaluation trace. ``source``/``dev_source``
    name the data in error messages. With ``keep_on_interrupt``, a
    KeyboardInterrupt after the first iteration ends training with the weights
    it would keep at that point (``info["interrupted"]`` is then True). ``stop``: a
    threading.Event; once it is set, training ends before its next objective evaluation as
    if interrupted (Ctrl-C reaches the main thread only, and a bag trains members in others).
    ``checkpoint``: (path, N) saves the current weights as a model to path every
    N iterations. ``scheduler`` (a Dask scheduler's address) or ``workers`` (N: a local
    cluster of N processes): the objective is evaluated data-parallel there
    (crftk.distributed.training); the optimizer and dev scoring run here.
    ``label_col`` a list of two or more columns trains a factorial CRF, one chain per column
    (crftk.kinds.factorial), with ``inference``, ``tolerance``, ``max_sweeps`` and ``warm_start``.
    ``stream``: ``sentences`` is a crftk.io.conll.CorpusStream whose files an online learner
    reads a batch of ``stream_batch_tokens`` tokens at a time (crftk.training.streaming).
    """
    options = dict(options)
    trainer = trainer_for(options, inference, tolerance, max_sweeps, warm_start)
    opt = check_options(options, log)
    trainer.check(opt)
    if opt["history"] is None:
        opt["history"] = trainer.history            # the kind's own L-BFGS memory
    stream = params.STREAM.check(stream)
    stream_batch_tokens = params.STREAM_BATCH_TOKENS.check(stream_batch_tokens)
    streaming.check_cluster(stream, scheduler, workers)
    check_cluster(scheduler, workers, opt)
    init_space = params.INIT_SPACE.check(init_space)
    n_threads = resolve_threads(opt["threads"])
    t0 = time.perf_counter()
    # before the data is read: the encoding's large temporaries go back to the system when freed
    map_large_blocks()
    if init is not None:
        trainer.check_init(init)
        template = trainer.init_template(init)
    if stream:
        streaming.check(opt, sentences, template, init=init, label_cols=trainer.label_cols)
    cluster = None
    if scheduler is not None or workers:
        from crftk.distributed.training import DataParallel
        cluster = DataParallel(scheduler, workers, threads=opt["threads"])
    try:
        if stream:
            job = streaming.prepare(sentences, template, opt, log=log, n_threads=n_threads,
                                    batch_tokens=stream_batch_tokens, init=init, init_space=init_space)
        else:
            job = _prepare(trainer, cluster, sentences, template, opt, init, init_space, log, source, n_threads)
        scorer = None
        if dev:
            check_dev(dev, job.structure.space, dev_source)
            try:
                scorer = trainer.dev_scorer(job, dev, n_threads)
            except CrftkError as e:
                if e.path is not None or dev_source is None:
                    raise
                raise CrftkError(e.message, dev_source) from None
            log(f"development set: {plural(len(dev), 'sentence')}" + (f" from {dev_source}" if dev_source else ""))
            for line in scorer.warnings():
                log(line)
        frozen, w0 = trainer.start(job, template, opt, init)
        bound = None
        if cluster is not None:
            blank = trainer.model(job, job.structure.weights(np.zeros(job.structure.n_params)),
                                  trainer.record_head(opt))      # the structure, as the workers rebuild it
            objective = cluster.objective(opt, job.structure, job.corpus, frozen, log, model=blank,
                                          bind=trainer.bind_options)
        elif stream:
            objective = job.corpus          # the online learner's Batches, read from the files each epoch
        else:
            bound = job.inference
            if bound is None:
                bound = job.structure.bind(job.corpus, n_threads, **trainer.bind_options)
            objective = objective_for(opt, bound, frozen)
    except BaseException:
        if cluster is not None:
            cluster.close()
        raise
    trainer.ready(job, log)
    settle = getattr(getattr(job.structure, "space", None), "settle", None)
    if settle is not None:
        settle()
    _compact(opt, bound)
    trim_heap()         # what preparing the job freed: its pages back to the system
    saving = None
    if checkpoint is not None:
        path = checkpoint[0]

        def save(weights, info, best, history):
            record = {**trainer.record_head(opt), "checkpoint": True, "iterations": info.iteration,
                      "objective": info.f, **trainer.checkpoint_best(best, scorer is not None), "history": history}
            trainer.model(job, weights, record).save(path)
            log(f"checkpoint: iteration {info.iteration} saved to {path}")
        saving = (save, checkpoint[1])
    try:
        outcome = optimize(opt, objective, w0, frozen, template=template, to_weights=job.structure.weights,
                           scorer=scorer, log=log, describe=trainer.describer(opt, job, bound),
                           trace=trace, stop=stop, checkpoint=saving, keep_on_interrupt=keep_on_interrupt)
    finally:
        if cluster is not None:
            cluster.close()
    result = outcome.result
    info = {
        **trainer.record_head(opt),
        "threads": n_threads,
        "sentences": job.corpus.n_sentences,
        "tokens": job.corpus.n_tokens,
        "iterations": result.n_iter,
        "evaluations": result.n_evals,
        "chosen_iteration": outcome.chosen,
        "converged": result.converged,
        "stop_reason": result.reason,
        "objective": result.f,
        "seconds": outcome.seconds,
        "seconds_in_all": time.perf_counter() - t0,
        **trainer.best_record(outcome.best, scorer is not None),
        "interrupted": outcome.interrupted,
        "history": outcome.history,
    }
    if cluster is not None:
        info["cluster"] = objective.summary()
    if stream:
        info["stream"] = job.corpus.record()
    return trainer.model(job, outcome.weights, info)
