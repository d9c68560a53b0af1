"""Training: read data, build the feature space, optimize, keep the best weights, save."""

import contextlib
import math
import os
import sys
import time

import numpy as np

from crftk import params
from crftk.structures import make_structure, structure_name
from crftk.structures.constraints import check_gold
from crftk.io.atomic import AtomicWriter
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, Origins, check_inputs, iter_corpus, read_corpus
from crftk.errors import CrftkError, UsageError, shown
from crftk.io.outputs import check_apart, check_output
from crftk.evaluation.conlleval import evaluate
from crftk.features.space import FeatureSpace
from crftk.model import Model
from crftk.objectives import Likelihood
from crftk.objectives.mce import MCE, MCEF
from crftk.optimize.online import averaged_perceptron, sgd
from crftk.optimize import OptimizeResult, cg, gis, lbfgs, quickprop
from crftk.params import available_cores, resolve_threads  # noqa: F401 (re-exported)
from crftk.structures.pairs import current_tags, pair_sentences
from crftk.progress import plural, status
from crftk.features.extract import load_lexicons
from crftk.features.templates import read_template, template_difference
from crftk.commands.factorial import refuse_factorial_options


TRAIN_PARAMS = params.TRAIN
DEFAULTS = params.defaults(TRAIN_PARAMS)
CHECKPOINT_SUFFIX = ".checkpoint"


def _stderr_log(msg):
    print(msg, file=sys.stderr, flush=True)


class DevScorer:
    """Scores a development set with the current weights (chunk F1 and accuracy).

    ``sentences`` are encoded for the structure (label pairs for a pair
    structure); the gold labels are read from ``gold_sentences`` (default: the
    same sentences), in the labels decoding outputs.
    """

    def __init__(self, structure, sentences, n_threads, gold_sentences=None):
        space = structure.space
        self.structure = structure
        self.inference = structure.bind(space.encode(sentences), n_threads)
        self.labels = np.asarray(structure.output_labels, dtype=object)
        self.slices = self.inference.corpus.sentence_slices()
        gold_sentences = sentences if gold_sentences is None else gold_sentences
        self.gold = [[row[space.label_col] for row in s.rows] for s in gold_sentences]

    def unseen_labels(self):
        """(label, tokens) of the gold labels the model does not have, most frequent first."""
        known = set(self.structure.output_labels)
        counts = {}
        for sent in self.gold:
            for lab in sent:
                if lab not in known:
                    counts[lab] = counts.get(lab, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def __call__(self, w):
        pred, _ = self.inference.best(w)
        names = self.labels[pred]
        return evaluate(self.gold, [names[sl].tolist() for sl in self.slices])


class _StopWhenSet:
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

    def __call__(self, w):
        f, g = self.objective(w)
        self.n += 1
        seconds = time.perf_counter() - self.start     # the dev scoring below is not training time
        f1 = f"{self.dev(self.to_weights(w)).overall.f1:.4f}" if self.dev is not None else ""
        self.out.write(f"{self.n}\t{self.objective.n_evals}\t{seconds:.4f}\t{f:.10g}\t{f1}\n")
        self.out.flush()
        return f, g


def _objective(opt, inference, frozen):
    """The training objective the options choose, over a structure's inference."""
    if opt["objective"] == "mce":
        return MCE(inference, alpha=opt["mce_alpha"], beta=opt["mce_beta"],
                   smoothing=opt["mce_smoothing"], c2=opt["c2"], frozen=frozen)
    if opt["objective"] == "mce-f":
        return MCEF(inference, alpha=opt["mce_alpha"], beta=opt["mce_beta"], gamma=opt["mce_gamma"],
                    c2=opt["c2"], frozen=frozen)
    return Likelihood(inference, c2=opt["c2"], frozen=frozen)


def _run_algorithm(opt, objective, fun, w0, frozen, template, callback, log):
    """Run the chosen training method; fun is the objective as the batch methods see it."""
    algorithm = opt["algorithm"]
    fixed = frozen if frozen.any() else None
    common = dict(max_iter=opt["max_iter"], epsilon=opt["epsilon"], period=opt["period"], callback=callback)
    if algorithm == "sgd":
        return sgd(objective.inference, objective.labels, w0, c2=opt["c2"], frozen=fixed,
                   learn_transitions=template.label_bigram, log=log, **common)
    if algorithm == "perceptron":
        return averaged_perceptron(objective.inference, objective.labels, w0, frozen=fixed, **common)
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
    return lbfgs(fun, w0, c1=opt["c1"], l1_mask=None if opt["c1"] == 0 else ~frozen, m=opt["history"],
                 **common)


def _label_columns(options):
    """The label columns of a factorial CRF (a list of two or more), or None for a linear chain;
    options["label_col"] is left a single column (or removed for a factorial CRF)."""
    cols = options.get("label_col", -1)
    if not isinstance(cols, (list, tuple)):
        return None
    if len(cols) <= 1:
        options["label_col"] = cols[0] if cols else -1
        return None
    label_col = next(p for p in TRAIN_PARAMS if p.name == "label_col")
    for col in cols:
        label_col.check(col)
    del options["label_col"]
    return list(cols)


def _train_factorial(train_files, template_path, model_path, label_cols, *, dev_file, log, trace_file,
                     init_model, max_sentence_tokens, checkpoint_every, cross_predict, cross_output, scheduler,
                     workers, inference, tolerance, max_sweeps, warm_start, options, encoding):
    """train() for several label columns: a factorial CRF (crftk.commands.factorial)."""
    from crftk.commands.factorial import train_factorial
    opt = check_options(options, log)
    given = [name for name, v in (("--init", init_model), ("--trace", trace_file),
                                  ("--checkpoint-every", checkpoint_every), ("--cross-predict", cross_predict),
                                  ("--cross-output", cross_output), ("--scheduler", scheduler),
                                  ("--workers", workers)) if v]
    if given:
        raise UsageError(f"{', '.join(given)}: not available for factorial CRFs (several --label-col)")
    if template_path is None:
        raise UsageError("train needs --template")
    if max_sentence_tokens is not None:
        max_sentence_tokens = params.MAX_SENTENCE_TOKENS.check(max_sentence_tokens)
    check_output(model_path, "model")
    train_files = training_files(train_files)
    check_inputs([*train_files, dev_file, template_path])
    template = read_template(template_path)
    load_lexicons(template)            # every input before any work
    check_apart([("model", model_path)], [*data_inputs(train_files, dev_file), *template_inputs(template)])
    return train_factorial(train_files, template, model_path, opt,
                           label_cols=label_cols, dev_file=dev_file, log=log,
                           max_sentence_tokens=max_sentence_tokens, inference=inference, tolerance=tolerance,
                           max_sweeps=max_sweeps, warm_start=warm_start, encoding=encoding)


def train(train_files, template_path, model_path=None, *, dev_file=None, log=_stderr_log,
          trace_file=None, init_model=None, max_sentence_tokens=MAX_SENTENCE_TOKENS, checkpoint_every=0,
          cross_predict=0, cross_output=None, scheduler=None, workers=0, inference=None, tolerance=None,
          max_sweeps=None, warm_start=False, encoding=DEFAULT_ENCODING, **options):
    """Train a CRF on CoNLL files; saves it to model_path (if given) and returns the Model.

    trace_file: a path (written atomically when training ends) or an open text file
    receiving one line per objective evaluation (see Trace). init_model: a model file whose
    feature space and weights training starts from (then there is no template to read).
    Every output path is checked before any work starts. A sentence longer than
    ``max_sentence_tokens`` is an error (a file whose blank lines are missing).
    ``checkpoint_every``: N > 0 saves the current weights to ``model_path +
    ".checkpoint"`` every N iterations (removed when training finishes); ``--init``
    from it resumes training, with a fresh optimizer memory.
    ``cross_predict``: K >= 2 also writes ``cross_output``, the training files with their
    label column replaced by out-of-fold predictions (see :func:`cross_predictions`).
    ``scheduler``/``workers``: train data-parallel on a Dask cluster (see :func:`fit`).
    ``label_col`` a list of two or more columns trains a factorial CRF, one chain per column
    (crftk.commands.factorial), with ``inference``, ``tolerance``, ``max_sweeps`` and ``warm_start``.
    ``encoding``: of the training and dev files, and of ``cross_output``.
    """
    options = dict(options)
    encoding = params.ENCODING.check(encoding)
    label_cols = _label_columns(options)
    if label_cols is not None:
        return _train_factorial(train_files, template_path, model_path, label_cols, dev_file=dev_file, log=log,
                                trace_file=trace_file, init_model=init_model,
                                max_sentence_tokens=max_sentence_tokens, checkpoint_every=checkpoint_every,
                                cross_predict=cross_predict, cross_output=cross_output, scheduler=scheduler,
                                workers=workers, inference=inference, tolerance=tolerance,
                                max_sweeps=max_sweeps, warm_start=warm_start, options=options, encoding=encoding)
    refuse_factorial_options(inference, tolerance, max_sweeps, warm_start)
    opt = check_options(options, log)
    _check_cluster(scheduler, workers, opt)
    checkpoint_every = params.CHECKPOINT_EVERY.check(checkpoint_every)
    cross_predict = params.CROSS_PREDICT.check(cross_predict)
    if max_sentence_tokens is not None:      # None: no limit
        max_sentence_tokens = params.MAX_SENTENCE_TOKENS.check(max_sentence_tokens)
    check_output(model_path, "model")
    if cross_predict and cross_output is None:
        raise UsageError("--cross-predict needs --cross-output FILE (where the predicted column goes)")
    if cross_output is not None and not cross_predict:
        raise UsageError("--cross-output needs --cross-predict K (the number of folds)")
    if cross_predict and init_model is not None:
        raise UsageError("--cross-predict trains each fold from the template: drop --init")
    check_output(cross_output, "cross-prediction output")
    checkpoint = None
    if checkpoint_every:
        if model_path is None:
            raise UsageError("--checkpoint-every needs a model path (-m) to write beside")
        checkpoint = (os.fspath(model_path) + CHECKPOINT_SUFFIX, checkpoint_every)
    if trace_file is not None and not hasattr(trace_file, "write"):
        check_output(trace_file, "trace")
    train_files = training_files(train_files)
    check_inputs([*train_files, dev_file, init_model, template_path])
    init = None
    if init_model is None and template_path is None:
        raise UsageError("train needs --template (or --init MODEL)")
    template = None if template_path is None else read_template(template_path)
    lexicons = None if template is None else load_lexicons(template)   # all inputs before any work
    inputs = [*data_inputs(train_files, dev_file), ("--init model", init_model),
              *([] if template is None else template_inputs(template))]
    outputs = [("model", model_path), ("cross-prediction output", cross_output),
               ("trace", None if hasattr(trace_file, "write") else trace_file)]
    check_apart(outputs, inputs)
    if checkpoint is not None:      # it may be the --init model: resuming from a checkpoint updates it
        check_apart([*outputs, ("checkpoint", checkpoint[0])], [i for i in inputs if i[0] != "--init model"])
    if init_model is not None:
        init = Model.load(init_model)
        _check_init_kind(init)
        if template is not None:
            check_init_template(template, lexicons, init, init_model)
        template = None
    dev = None
    if dev_file is not None:
        dev = read_corpus(dev_file, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
        if not dev:
            log(f"crftk: warning: the development set {dev_file} has no sentences; it is not used")
    cross_text = None
    if cross_predict:
        cross_text = cross_predictions(train_files, template, cross_predict, dev=dev or None, log=log,
                                       max_sentence_tokens=max_sentence_tokens, encoding=encoding, **opt)
    with contextlib.ExitStack() as stack:
        trace = trace_file
        if trace_file is not None and not hasattr(trace_file, "write"):
            trace = stack.enter_context(AtomicWriter(trace_file))
        try:
            model = fit(iter_corpus(train_files, max_sentence_tokens=max_sentence_tokens, encoding=encoding),
                        template, dev=dev or None, init=init, log=log, trace=trace, source=train_files[0],
                        dev_source=dev_file, keep_on_interrupt=model_path is not None, checkpoint=checkpoint,
                        scheduler=scheduler, workers=workers, **opt)
        except KeyboardInterrupt:
            if cross_text is not None:        # every fold finished: their predictions stand
                _write_cross_output(cross_text, cross_output, cross_predict, log, encoding)
            raise
    model.info.update(train_files=train_files, dev_file=None if dev_file is None else str(dev_file),
                      init_model=None if init_model is None else str(init_model))
    if model_path is not None:
        model.save(model_path)
        log(f"saved {model_path} ({model.info['seconds_in_all']:.1f}s in all)")
        if checkpoint is not None and not model.info["interrupted"] and os.path.isfile(checkpoint[0]):
            os.unlink(checkpoint[0])          # the finished model supersedes it (a FIFO or device stays)
    if cross_text is not None:
        _write_cross_output(cross_text, cross_output, cross_predict, log, encoding)
    if model.info["interrupted"]:
        raise KeyboardInterrupt     # saved; the command still ends as interrupted
    return model


def _write_cross_output(text, path, folds, log, encoding):
    with AtomicWriter(path, encoding=encoding) as out:
        out.write(text)
    log(f"wrote the out-of-fold predictions of {folds} folds to {path}")


def _check_init_kind(init):
    """--init continues the training of one CRF: a bag, pipeline or factorial file is refused (its
    first part is not the model)."""
    init.require_kind("crf", "--init", hint="tag with it (crftk tag), or train from a template")


def check_init_template(template, lexicons, init, init_path):
    """--init with --template: the template must be the --init model's own (the model's feature
    space is what training starts from); a different one is an error naming where it differs."""
    own = init.space.template
    diff = template_difference(template, own)
    if diff is None:
        embedded = init.space.extractor.lexicons
        for name, lex in lexicons.items():
            if lex.to_lines() != embedded[name].to_lines():
                diff = f"lexicon {name}'s entries differ from those the model embeds", template.lexicon_lines[name]
                break
    if diff is not None:
        what, line = diff
        raise UsageError(f"--template is not the template of the --init model {init_path}: {what} "
                         "(--init trains the model's own features: drop --template, or drop --init to "
                         "train from this template)", template.path, line)


def cross_predictions(train_files, template, folds, *, dev=None, log=_stderr_log,
                      max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING, **options):
    """The training files' text with the label column replaced by out-of-fold predictions.

    Sentence i (counted over all the files) belongs to fold i mod ``folds``; each fold
    is tagged by a model trained with ``options`` on the other folds. Predictions on a
    model's own training data are too good to train a downstream stage on, these have
    the errors it makes on unseen text. Lines that are not tokens (``-DOCSTART-``) and
    each file's column separator are kept; several files are concatenated.
    """
    from crftk.io.conll import Layout, format_sentence, read_sentences
    opt = check_options(options, log)
    folds = params.CROSS_PREDICT.check(folds)
    files, sentences, doc = [], [], 0
    for path in train_files:
        layout = Layout()
        items = list(read_sentences(path, passthrough=True, first_doc=doc, layout=layout,
                                    max_sentence_tokens=max_sentence_tokens, encoding=encoding))
        sents = [it for it in items if not isinstance(it, str)]
        if sents:
            doc = sents[-1].doc + 1
        files.append((items, layout.separator or "\t"))
        sentences.extend(sents)
    if len(sentences) < folds:
        raise CrftkError(f"--cross-predict {folds} needs at least {folds} training sentences, "
                         f"found {len(sentences)}", train_files[0])
    predicted = [None] * len(sentences)
    fold_of = np.arange(len(sentences)) % folds
    for k in range(folds):
        status(log, f"cross-prediction: training on the folds other than {k + 1} of {folds} ...")
        rest = [s for s, f in zip(sentences, fold_of) if f != k]
        model = fit(rest, template, dev=dev, log=lambda msg: None, source=train_files[0], **opt)
        held = np.flatnonzero(fold_of == k)
        inference = model.structure.bind(model.space.encode([sentences[i] for i in held]),
                                         resolve_threads(opt["threads"]))
        names = np.asarray(model.output_labels, dtype=object)[inference.best(model.weights)[0]]
        tags = [names[sl].tolist() for sl in inference.corpus.sentence_slices()]
        for i, labels in zip(held.tolist(), tags):
            predicted[i] = labels
        gold = [[row[model.space.label_col] for row in sentences[i].rows] for i in held.tolist()]
        score = evaluate(gold, tags)
        f1 = f", F1 {score.overall.f1:.2f}" if score.overall.n_gold else ""      # labels that form chunks
        log(f"cross-prediction fold {k + 1}/{folds}: {plural(len(rest), 'training sentence')}, "
            f"{model.info['iterations']} iterations; {plural(held.size, 'sentence')} tagged, "
            f"accuracy {100 * score.token_accuracy:.2f}{f1}")
    col = model.space.label_col
    parts, i = [], 0
    for items, sep in files:
        for it in items:
            if isinstance(it, str):
                parts.append(it + "\n")
                continue
            rows = [row[:col] + [lab] + row[col + 1:] for row, lab in zip(it.rows, predicted[i])]
            parts.append(format_sentence(rows, sep=sep))
            i += 1
    return "".join(parts)


def data_inputs(train_files, dev_file=None):
    """The training and development files as inputs for io.outputs.check_apart."""
    return [("training file", list(train_files)), ("development file", dev_file)]


def template_inputs(template):
    """A parsed template's file and its lexicons' files, as inputs for io.outputs.check_apart."""
    return [("template", template.path),
            *((f"lexicon {name}", path) for name, (path, _) in template.lexicons.items())]


def training_files(train_files):
    """The training file paths as a list of str (one path may be given alone); at least one."""
    if isinstance(train_files, (str, os.PathLike)):
        train_files = [train_files]
    train_files = [str(p) for p in train_files]
    if not train_files:
        raise UsageError("no training files given")
    return train_files


def check_options(options, log=_stderr_log):
    """All training options, defaults filled in, checked against TRAIN_PARAMS and each other;
    raises CrftkError on a bad value (a thread count above the cap is cut, with a warning)."""
    opt = params.check_params(TRAIN_PARAMS, options, "training", warn=log)
    if opt["algorithm"] == "sgd" and opt["c2"] == 0:
        raise UsageError("--algorithm sgd needs --c2 > 0: its learning-rate schedule is set by the "
                         "L2 coefficient (use lbfgs or perceptron to train without L2)")
    if opt["c1"] > 0 and opt["algorithm"] != "lbfgs":
        raise UsageError(f"--algorithm {opt['algorithm']} supports L2 only; use lbfgs (OWL-QN) for --c1")
    if opt["objective"] != "map" and (opt["algorithm"] not in ("lbfgs", "quickprop") or opt["order"] != 1
                                      or opt["model_type"] != "crf" or opt["c1"] > 0):
        raise UsageError(f"--objective {opt['objective']} trains a first-order CRF with --algorithm "
                         "lbfgs or quickprop and L2 only")
    if opt["objective"] == "mce-f" and opt["algorithm"] != "quickprop":
        raise UsageError("--objective mce-f is not continuous (it jumps wherever the best incorrect "
                         "labeling changes), so line searches fail on it: use --algorithm quickprop")
    if opt["order"] == 2 and opt["algorithm"] not in ("lbfgs", "quickprop"):
        raise UsageError("--order 2 trains with --algorithm lbfgs or quickprop only")
    if opt["model_type"] == "memm" and (opt["order"] == 2 or opt["algorithm"] not in ("lbfgs", "quickprop")):
        raise UsageError("--model-type memm trains with --algorithm lbfgs or quickprop and --order 1 only")
    return opt


def _check_cluster(scheduler, workers, opt):
    """Before any work: the cluster options, Dask installed, an algorithm that can run on it."""
    workers = params.WORKERS.check(workers)
    if scheduler is None and not workers:
        return
    from crftk.distributed.cluster import check_options        # Dask only when asked for
    from crftk.distributed.training import check_algorithm
    check_options(scheduler, workers)
    check_algorithm(opt["algorithm"])


def fit(sentences, template, *, dev=None, init=None, log=_stderr_log, trace=None, source=None,
        dev_source=None, keep_on_interrupt=False, checkpoint=None, scheduler=None, workers=0, inference=None,
        tolerance=None, max_sweeps=None, warm_start=False, stop=None, **options):
    """Train a CRF on in-memory or streamed sentences; returns the Model (not saved).

    ``sentences``: an iterable of Sentence (read once); ``template``: a parsed
    Template, or None with ``init`` (a Model to start from: its feature space
    and weights). ``dev``: a list of Sentence scored every iteration. ``trace``:
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
    ``label_col`` a list of two or more columns: a factorial CRF (see :func:`train`).
    """
    options = dict(options)
    label_cols = _label_columns(options)
    if label_cols is not None:
        from crftk.commands.factorial import fit_factorial
        opt = check_options(options, log)
        if init is not None or trace is not None or checkpoint is not None or scheduler is not None or workers:
            raise UsageError("init, trace, checkpoint and a cluster are not available for factorial CRFs")
        return fit_factorial(sentences, template, label_cols, opt, dev=dev, log=log, source=source,
                             dev_source=dev_source, keep_on_interrupt=keep_on_interrupt, inference=inference,
                             tolerance=tolerance, max_sweeps=max_sweeps, warm_start=warm_start)
    refuse_factorial_options(inference, tolerance, max_sweeps, warm_start)
    opt = check_options(options, log)
    _check_cluster(scheduler, workers, opt)
    n_threads = resolve_threads(opt["threads"])
    t0 = time.perf_counter()
    if init is not None:
        _check_init_kind(init)
        if init.order != 1 or init.model_type != "crf":
            raise CrftkError("--init takes a first-order CRF model", init.source)
        template = init.space.template
    elif template.pairs or template.pair_plain:
        line = template.pairs[0].lineno if template.pairs else template.pair_plain
        raise CrftkError("a P line is a pair factor of a factorial CRF and needs a second chain: give two "
                         "or more --label-col (one per chain)", template.path, line)
    elif not template.unigrams:
        log("crftk: warning: the template has no U lines: the model has no state features and learns "
            + ("transitions only" if template.bigrams or template.label_bigram else "start and end weights only"))
    if opt["model_type"] == "memm" and template.bigrams:
        raise CrftkError("MEMMs do not support transition templates with macros (B lines with %x); use a "
                         "plain B line", template.path, template.bigrams[0].lineno)
    order2 = opt["order"] == 2
    origins = Origins()
    stream = origins.record(sentences)
    if order2:
        stream = pair_sentences(stream, opt["label_col"])
    status(log, f"reading and encoding the training data{' from ' + str(source) if source else ''} ...")
    if init is not None:
        space = init.space
        sents = list(stream)
        corpus = space.encode(sents)
        if corpus.labels is None:
            raise CrftkError("the training data has no gold label column", source)
        unknown = np.flatnonzero(corpus.labels < 0)
        if unknown.size:
            k = int(np.searchsorted(corpus.sent_ptr, unknown[0], side="right")) - 1
            t = int(unknown[0] - corpus.sent_ptr[k])
            label = sents[k].rows[t][space.label_col]
            raise CrftkError(f"label {shown(label)} is not one of the --init model's "
                             f"{plural(space.n_labels, 'label')}", *origins.locate(k, t))
        del sents
    else:
        space, corpus = FeatureSpace.fit(stream, template, label_col=opt["label_col"],
                                         min_freq=opt["min_freq"], feature_set=opt["feature_set"],
                                         path=source)
    n_tokens = corpus.n_tokens
    structure = make_structure(structure_name(opt["order"], opt["model_type"]), space)
    transitions = "no transitions" if not template.label_bigram else "label bigram"
    if space.n_edge_attrs:
        transitions += f" + {plural(space.n_edge_attrs, 'observation-conditioned transition attribute')}"
    log(f"read {plural(corpus.n_sentences, 'sentence')}, {plural(n_tokens, 'token')}; "
        f"{plural(space.n_labels, 'label')}, {plural(space.n_attrs, 'attribute')}, "
        f"{plural(space.n_features, 'state feature')}, {transitions}; {plural(space.n_params, 'parameter')} "
        f"({time.perf_counter() - t0:.2f}s, {plural(n_threads, 'thread')})")

    scorer = None
    if dev:
        # the development set needs the gold column, so exactly the training column count
        n = len(dev[0].rows[0])
        if n != space.n_columns:
            raise CrftkError(f"the development set has {n} columns, the training data {space.n_columns}",
                             dev_source, dev[0].line or None)
        scorer = DevScorer(structure, list(pair_sentences(dev, space.label_col)) if order2 else dev,
                           n_threads, gold_sentences=dev)
        log(f"development set: {plural(len(dev), 'sentence')}"
            + (f" from {dev_source}" if dev_source else ""))
        unseen = scorer.unseen_labels()
        if unseen:
            listed = ", ".join(f"{lab} ({plural(n, 'token')})" for lab, n in unseen[:10])
            log(f"crftk: warning: the development set has {plural(len(unseen), 'label')} never seen in training, "
                f"which the model cannot predict: {listed}" + (", ..." if len(unseen) > 10 else ""))

    frozen = structure.fixed(template)
    w0 = np.zeros(structure.n_params)
    if opt["constraints"] != "none":
        # a second-order model's labels are tag pairs: the constraints are on their current tags
        tags, y = current_tags(space.labels, corpus.labels) if order2 else (space.labels, corpus.labels)
        check_gold(tags, y, corpus.sent_ptr, opt["constraints"], origins.locate)
    pinned = structure.pinned(opt["constraints"])
    if pinned is not None:
        mask, value = pinned
        frozen |= mask
        w0[mask] = value
    if init is not None:
        start = structure.params(init.weights)
        w0 = np.where(w0 != 0, w0, start)    # the pinned (non-zero) weights stay pinned
    cluster = None
    if scheduler is not None or workers:
        from crftk.distributed.training import DataParallel
        cluster = DataParallel(scheduler, workers, threads=opt["threads"])
        try:
            objective = cluster.objective(opt, structure, corpus, frozen, log)
        except BaseException:
            cluster.close()
            raise
    else:
        objective = _objective(opt, structure.bind(corpus, n_threads), frozen)
    to_weights = structure.weights
    if order2:
        log(f"order 2: {plural(space.n_labels, 'label pair')}, {plural(structure.n_backoff, 'backoff feature')}")

    best = {"f1": -1.0, "iteration": 0, "w": None}
    history = []
    last_x = [None]         # the point of the last finished iteration
    clock = [time.perf_counter()]

    def on_iteration(info):
        now = time.perf_counter()
        record = {"iteration": info.iteration, "objective": info.f,
                  "gnorm": info.gnorm if math.isfinite(info.gnorm) else None,
                  "active": info.n_active, "evals": info.n_evals, "seconds": now - clock[0]}
        if opt["algorithm"] == "perceptron":
            line = f"epoch {info.iteration:4d}  mislabeled tokens {int(info.f)}  active {info.n_active}"
        elif opt["algorithm"] == "sgd":
            line = (f"epoch {info.iteration:4d}  objective {info.f:.6e}  rate {info.step:.3e}  "
                    f"active {info.n_active}")
        else:
            line = (f"iter {info.iteration:4d}  objective {info.f:.6e}  |g| {info.gnorm:.3e}  "
                    f"active {info.n_active}")
        if scorer is not None:
            score = scorer(to_weights(info.x))
            record["dev_f1"] = score.overall.f1
            record["dev_accuracy"] = score.token_accuracy
            line += f"  dev F1 {score.overall.f1:6.2f} acc {100 * score.token_accuracy:6.2f}"
            if score.overall.f1 > best["f1"]:
                best.update(f1=score.overall.f1, iteration=info.iteration, w=to_weights(info.x))
        line += f"  {record['seconds']:.2f}s"
        history.append(record)
        last_x[0] = np.array(info.x, copy=True)
        log(line)
        if checkpoint is not None and info.iteration % checkpoint[1] == 0:
            # the current point, not the best dev one: it is where training resumes from
            Model(space, to_weights(last_x[0]), {
                "options": opt, "order": opt["order"], "model_type": opt["model_type"],
                "checkpoint": True, "iterations": info.iteration, "objective": info.f,
                "best_dev_f1": best["f1"] if scorer is not None else None,
                "best_dev_iteration": best["iteration"] if scorer is not None else None,
                "history": history}).save(checkpoint[0])
            log(f"checkpoint: iteration {info.iteration} saved to {checkpoint[0]}")
        clock[0] = time.perf_counter()
        if stop is not None and stop.is_set():
            raise KeyboardInterrupt
        return False

    start = time.perf_counter()
    fun = objective if trace is None else Trace(objective, trace, scorer, to_weights)
    if stop is not None:
        fun = _StopWhenSet(fun, stop)
    try:
        result = _run_algorithm(opt, objective, fun, w0, frozen, template, on_iteration, log)
    except KeyboardInterrupt:
        if not keep_on_interrupt or not history:
            raise
        # the last finished iteration stands in for the result (Wapiti does the same)
        done = history[-1]
        result = OptimizeResult(x=last_x[0], f=done["objective"], n_iter=done["iteration"],
                                n_evals=done["evals"], converged=False,
                                reason=f"interrupted after iteration {done['iteration']}")
    finally:
        if cluster is not None:
            cluster.close()
    seconds = time.perf_counter() - start
    log(result.reason if result.converged else "stopped before convergence: " + result.reason)

    weights = to_weights(result.x)
    chosen = result.n_iter
    if scorer is not None and opt["keep"] == "best" and best["w"] is not None:
        weights, chosen = best["w"], best["iteration"]
        log(f"keeping the weights of iteration {chosen} (best dev F1 {best['f1']:.2f})")
    elif scorer is not None:
        log(f"keeping the weights of the last iteration, {chosen} (--keep last; best dev F1 "
            f"{best['f1']:.2f} at iteration {best['iteration']})")
    info = {
        "options": opt,
        "order": opt["order"],
        "model_type": opt["model_type"],
        "threads": n_threads,
        "sentences": corpus.n_sentences,
        "tokens": n_tokens,
        "iterations": result.n_iter,
        "evaluations": result.n_evals,
        "chosen_iteration": chosen,
        "converged": result.converged,
        "stop_reason": result.reason,
        "objective": result.f,
        "seconds": seconds,
        "seconds_in_all": time.perf_counter() - t0,
        "best_dev_f1": best["f1"] if scorer is not None else None,
        "interrupted": result.reason.startswith("interrupted"),
        "history": history,
    }
    if cluster is not None:
        info["cluster"] = objective.summary()
    return Model(space, weights, info)
