"""crftk train: read the training files, check every input and output, train any kind through the
training driver (crftk.training), save; and the out-of-fold predictions of --cross-predict."""

import contextlib
import os

import numpy as np

from crftk import params
from crftk.io.atomic import AtomicWriter
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, check_inputs, iter_corpus, read_corpus
from crftk.errors import CrftkError, UsageError
from crftk.io.outputs import check_apart, check_output
from crftk.evaluation.conlleval import evaluate
from crftk.model import Model
from crftk.params import resolve_threads
from crftk.progress import plural, status
from crftk.features.extract import load_lexicons
from crftk.features.attributes import attribute_template
from crftk.features.vectors import attach_vectors, parse_specs
from crftk.features.templates import read_template, template_difference
from crftk.io.crfsuite import read_crfsuite
from crftk.kinds import kind_of
from crftk.training import streaming
from crftk.training import TRAIN_PARAMS, _stderr_log, check_cluster, check_options, fit, trainer_for  # noqa: F401

DEFAULTS = params.defaults(TRAIN_PARAMS)
CHECKPOINT_SUFFIX = ".checkpoint"


def train(train_files, template_path, model_path=None, *, dev_file=None, log=_stderr_log,
          trace_file=None, init_model=None, init_space="grow", max_sentence_tokens=MAX_SENTENCE_TOKENS,
          checkpoint_every=0, cross_predict=0, cross_output=None, scheduler=None, workers=0, inference=None,
          tolerance=None, max_sweeps=None, warm_start=False, encoding=DEFAULT_ENCODING, vectors=None,
          vectors_lookup="exact", data_format="conll", first_stage=None, first_stage_folds=None,
          first_stage_labels=None, first_stage_output=None, stream=False,
          stream_batch_tokens=params.STREAM_BATCH_TOKENS.default, **options):
    """Train a CRF on CoNLL files; saves it to model_path (if given) and returns the Model.

    trace_file: a path (written atomically when training ends) or an open text file
    receiving one line per objective evaluation (see Trace). init_model: a model file whose
    feature space and weights training starts from (then there is no template to read);
    ``init_space`` "grow" adds the training data's attributes, features and labels to that space,
    "keep" trains it alone.
    Every output path is checked before any work starts. A sentence longer than
    ``max_sentence_tokens`` is an error (a file whose blank lines are missing).
    ``checkpoint_every``: N > 0 saves the current weights to ``model_path +
    ".checkpoint"`` every N iterations (removed when training finishes); ``--init``
    from it resumes training, with a fresh optimizer memory.
    ``cross_predict``: K >= 2 also writes ``cross_output``, the training files with their
    label column replaced by out-of-fold predictions (see :func:`cross_predictions`).
    ``scheduler``/``workers``: train data-parallel on a Dask cluster (see :func:`fit`).
    ``label_col`` a list of two or more columns trains a factorial CRF, one chain per column
    (crftk.kinds.factorial), with ``inference``, ``tolerance``, ``max_sweeps`` and ``warm_start``.
    ``encoding``: of the training and dev files, and of ``cross_output``. ``data_format``
    "crfsuite": the files are CRFsuite data files (crftk.io.crfsuite), whose attributes are the
    features: no template.
    ``vectors``: {NAME: path} or NAME=FILE strings, the word vectors of the template's %vec lines,
    looked up as ``vectors_lookup`` says (crftk.features.vectors).
    ``stream``: train an online learner on the files read a batch of ``stream_batch_tokens``
    tokens at a time (crftk.training.streaming).
    ``first_stage``: a model file; train the second stage of a two-stage model on its out-of-fold
    labels (``first_stage_folds`` folds; or the labels of ``first_stage_labels``, a file as
    ``first_stage_output`` writes them) and save both stages (crftk.training.twostage).
    """
    options = dict(options)
    encoding = params.ENCODING.check(encoding)
    crfsuite = params.DATA_FORMAT.check(data_format) == "crfsuite"
    if crfsuite:
        _check_crfsuite_options(train_files, template_path, cross_predict, options)
    trainer = trainer_for(options, inference, tolerance, max_sweeps, warm_start)
    opt = check_options(options, log)
    trainer.check(opt)
    stream = params.STREAM.check(stream)
    streaming.check_cluster(stream, scheduler, workers)
    check_cluster(scheduler, workers, opt)
    checkpoint_every = params.CHECKPOINT_EVERY.check(checkpoint_every)
    init_space = params.INIT_SPACE.check(init_space)
    cross_predict = params.CROSS_PREDICT.check(cross_predict)
    if stream and cross_predict:
        raise UsageError("--cross-predict trains its folds in memory: drop --stream")
    if stream and (first_stage is not None or first_stage_labels is not None):
        raise UsageError("a two-stage model trains its stages in memory: drop --stream")
    if max_sentence_tokens is not None:      # None: no limit
        max_sentence_tokens = params.MAX_SENTENCE_TOKENS.check(max_sentence_tokens)
    check_output(model_path, "model")
    if cross_predict and cross_output is None:
        raise UsageError("--cross-predict needs --cross-output FILE (where the predicted column goes)")
    if cross_output is not None and not cross_predict:
        raise UsageError("--cross-output needs --cross-predict K (the number of folds)")
    if cross_predict and init_model is not None:
        raise UsageError("--cross-predict trains each fold from the template: drop --init")
    if cross_predict and trainer.label_cols:
        raise UsageError("--cross-predict replaces one label column by out-of-fold predictions: a factorial CRF "
                         "(several --label-col) has one per chain; tag with each fold's model instead")
    check_output(cross_output, "cross-prediction output")
    two_stage_init = _two_stage_init(init_model)
    if first_stage is not None and two_stage_init is not None:
        raise UsageError(f"--init {init_model} is a two-stage model, which holds its first stage: drop --first-stage")
    if first_stage is None and two_stage_init is None and (first_stage_labels is not None
                                                           or first_stage_output is not None
                                                           or first_stage_folds is not None):
        raise UsageError("--first-stage-folds, --first-stage-labels and --first-stage-output need --first-stage "
                         "MODEL (or --init of a two-stage model)")
    if first_stage_labels is not None and first_stage_folds is not None:
        raise UsageError("--first-stage-labels gives the labels --first-stage-folds would train folds for: give one")
    if first_stage is not None or two_stage_init is not None:
        first_stage_folds = params.FIRST_STAGE_FOLDS.check(
            params.FIRST_STAGE_FOLDS.default if first_stage_folds is None else first_stage_folds)
        _check_two_stage_options(crfsuite, cross_predict, trainer, scheduler, workers, checkpoint_every, trace_file,
                                 first_stage_labels, first_stage_output)
    check_output(first_stage_output, "first-stage labels output")
    checkpoint = None
    if checkpoint_every:
        if model_path is None:
            raise UsageError("--checkpoint-every needs a model path (-m) to write beside")
        checkpoint = (os.fspath(model_path) + CHECKPOINT_SUFFIX, checkpoint_every)
    if trace_file is not None and not hasattr(trace_file, "write"):
        check_output(trace_file, "trace")
    train_files = training_files(train_files)
    check_inputs([*train_files, dev_file, init_model, template_path, first_stage, first_stage_labels])
    init = None
    if two_stage_init is not None:
        if template_path is not None:
            raise UsageError(f"--init {init_model} trains its own second stage's features: drop --template")
    elif init_model is None and template_path is None and not crfsuite:
        raise UsageError("train needs --template (or --init MODEL)")
    template = None if template_path is None else read_template(template_path)
    lexicons = None if template is None else load_lexicons(template)   # all inputs before any work
    vectors_lookup = params.VECTORS_LOOKUP.check(vectors_lookup)
    vector_files = parse_specs(vectors)
    if vector_files and init_model is not None:
        raise UsageError("--init trains with the vectors its model holds: drop --vectors")
    if vector_files and crfsuite:
        raise UsageError("--vectors are read by a template's %vec lines; a CRFsuite data file carries its own "
                         "real values: drop --vectors")
    inputs = [*data_inputs(train_files, dev_file), ("--init model", init_model),
              *([] if template is None else template_inputs(template)),
              *((f"vectors {name}", path) for name, path in vector_files.items()),
              ("--first-stage model", first_stage), ("--first-stage-labels file", first_stage_labels)]
    outputs = [("model", model_path), ("cross-prediction output", cross_output),
               ("first-stage labels output", first_stage_output),
               ("trace", None if hasattr(trace_file, "write") else trace_file)]
    check_apart(outputs, inputs)
    if template is not None and init_model is None:
        attach_vectors(template, vector_files, vectors_lookup, log)
    if checkpoint is not None:      # it may be the --init model: resuming from a checkpoint updates it
        check_apart([*outputs, ("checkpoint", checkpoint[0])], [i for i in inputs if i[0] != "--init model"])
    if init_model is not None and two_stage_init is None:
        init = Model.load(init_model)
        trainer.check_init(init)
        if template is not None:
            check_init_template(template, lexicons, init, init_model)
        template = None
    if crfsuite and init is None:
        template = attribute_template()
    dev = None
    if dev_file is not None and crfsuite:
        dev = read_crfsuite(dev_file, encoding=encoding, max_sequence_tokens=max_sentence_tokens)
        if not dev.n_sequences:
            log(f"crftk: warning: the development set {dev_file} has no sequences; it is not used")
    elif dev_file is not None:
        dev = read_corpus(dev_file, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
        if not dev:
            log(f"crftk: warning: the development set {dev_file} has no sentences; it is not used")
    if first_stage is not None or two_stage_init is not None:
        return _train_two_stage(train_files, template, model_path, first_stage, two_stage_init, first_stage_folds,
                                first_stage_labels, first_stage_output, dev, dev_file, log, max_sentence_tokens,
                                encoding, {**trainer.fit_options(opt), "init_space": init_space})
    cross_text = None
    if cross_predict:
        cross_text = cross_predictions(train_files, template, cross_predict, dev=dev or None, log=log,
                                       max_sentence_tokens=max_sentence_tokens, encoding=encoding, **opt)
    with contextlib.ExitStack() as stack:
        trace = trace_file
        if trace_file is not None and not hasattr(trace_file, "write"):
            trace = stack.enter_context(AtomicWriter(trace_file))
        try:
            if crfsuite:
                data = read_crfsuite(train_files[0], encoding=encoding, max_sequence_tokens=max_sentence_tokens)
            else:
                data = iter_corpus(train_files, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
            model = fit(data, template, dev=dev or None, init=init, init_space=init_space, log=log, trace=trace,
                        source=train_files[0], dev_source=dev_file, keep_on_interrupt=model_path is not None,
                        checkpoint=checkpoint, scheduler=scheduler, workers=workers, stream=stream,
                        stream_batch_tokens=stream_batch_tokens, **trainer.fit_options(opt))
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


def _check_crfsuite_options(train_files, template_path, cross_predict, options):
    """What --format crfsuite does not take, refused in one line each."""
    if template_path is not None:
        raise UsageError("--format crfsuite trains on the file's attributes: drop --template")
    if len(training_files(train_files)) != 1:
        raise UsageError("--format crfsuite trains on one data file (concatenate them: cat A B > C)")
    if cross_predict:
        raise UsageError("--cross-predict writes CoNLL columns: it takes --format conll")
    cols = options.get("label_col", -1)
    if isinstance(cols, (list, tuple)) or cols != -1:
        raise UsageError("--format crfsuite reads the label first on each line: drop --label-col")


def _two_stage_init(init_model):
    """The --init model when it is a two-stage model (its second stage trains on), else None."""
    if init_model is None:
        return None
    check_inputs([init_model])
    model = Model.load(init_model)
    return model if model.kind == "two-stage" else None


def _check_two_stage_options(crfsuite, cross_predict, trainer, scheduler, workers, checkpoint_every, trace_file,
                             labels, output):
    """What a two-stage model's training does not take, refused in one line each."""
    refused = [("--format crfsuite", crfsuite), ("--cross-predict", cross_predict),
               ("several --label-col (a factorial CRF)", trainer.label_cols),
               ("--scheduler/--workers", scheduler is not None or workers), ("--checkpoint-every", checkpoint_every),
               ("--trace", trace_file is not None)]
    for what, given in refused:
        if given:
            raise UsageError(f"a two-stage model trains on CoNLL files on one machine: drop {what}")
    if labels is not None and output is not None:
        raise UsageError("--first-stage-labels reads the labels --first-stage-output would write: give one")


def _train_two_stage(train_files, template, model_path, first_path, init, folds, labels_path, labels_output, dev,
                     dev_file, log, max_sentence_tokens, encoding, opt):
    """crftk train --first-stage (or --init of a two-stage model): the second stage trained on the
    first stage's out-of-fold labels."""
    from crftk.kinds.twostage import TwoStage
    from crftk.training.twostage import fit_two_stage
    second_init = None
    if init is not None:
        stages = TwoStage.from_model(init)
        first, second_init = stages.first, stages.second
        first_path = stages.info.get("first_stage") or "(the --init model's first stage)"
    else:
        first = Model.load(first_path)
    files, sentences = _read_keeping_lines(train_files, max_sentence_tokens, encoding)
    labels = None
    if labels_path is not None:
        labels = _read_first_labels(labels_path, sentences, first.space.label_col, max_sentence_tokens, encoding)
    def write_labels(first_labels):
        if labels_output is not None:
            with AtomicWriter(labels_output, encoding=encoding) as out:
                out.write(_labeled_text(files, first_labels, first.space.label_col))
            log(f"wrote the out-of-fold first-stage labels to {labels_output}")

    folded = []
    try:
        # Ctrl-C in the second stage's training saves its last iteration, as crftk train does
        two = fit_two_stage(sentences, template, first, folds=folds, first_labels=labels, dev=dev or None, log=log,
                            source=train_files[0], dev_source=dev_file, first_path=first_path, init=second_init,
                            on_labels=folded.append, keep_on_interrupt=model_path is not None,
                            labels_source=None if labels_path is None else str(labels_path), **opt)
    except KeyboardInterrupt:
        if folded:          # every fold finished: their labels stand, as --cross-output's do
            write_labels(folded[0])
        raise
    model = two.to_model()
    model.info.update(train_files=train_files, dev_file=None if dev_file is None else str(dev_file))
    if model_path is not None:
        model.save(model_path)
        log(f"saved {model_path} (two stages)")
    write_labels(two.training_labels)
    if two.second.info.get("interrupted"):
        raise KeyboardInterrupt     # saved; the command still ends as interrupted
    return model


def _read_first_labels(path, sentences, col, max_sentence_tokens, encoding):
    """The label column of a --first-stage-labels file, checked token by token against the
    training sentences (same sentences, same words)."""
    given = read_corpus(path, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    if len(given) != len(sentences):
        raise CrftkError(f"has {plural(len(given), 'sentence')}, the training data {len(sentences):,}: "
                         "it is not a copy of the training files", path)
    for g, s in zip(given, sentences):
        if len(g.rows) != len(s.rows) or any(a[0] != b[0] or len(a) != len(b) for a, b in zip(g.rows, s.rows)):
            raise CrftkError(f"this sentence is not the training data's {s.source}:{s.line} (its words or "
                             "columns differ)", path, g.line)
    return [[row[col] for row in g.rows] for g in given]


def _write_cross_output(text, path, folds, log, encoding):
    with AtomicWriter(path, encoding=encoding) as out:
        out.write(text)
    log(f"wrote the out-of-fold predictions of {folds} folds to {path}")


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
    opt = check_options(options, log)
    folds = params.CROSS_PREDICT.check(folds)
    files, sentences = _read_keeping_lines(train_files, max_sentence_tokens, encoding)
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
        # the labels as trained (a --train-scheme or semi-Markov model's not converted back)
        tagger = kind_of(model).Tagger(model, threads=resolve_threads(opt["threads"]))
        names = np.asarray(model.output_labels, dtype=object)
        tags = [names[ids].tolist() for ids in tagger.viterbi([sentences[i] for i in held])]
        for i, labels in zip(held.tolist(), tags):
            predicted[i] = labels
        gold = [[row[model.space.label_col] for row in sentences[i].rows] for i in held.tolist()]
        score = evaluate(gold, tags)
        f1 = f", F1 {score.overall.f1:.2f}" if score.overall.n_gold else ""      # labels that form chunks
        log(f"cross-prediction fold {k + 1}/{folds}: {plural(len(rest), 'training sentence')}, "
            f"{model.info['iterations']} iterations; {plural(held.size, 'sentence')} tagged, "
            f"accuracy {100 * score.token_accuracy:.2f}{f1}")
    return _labeled_text(files, predicted, model.space.label_col)


def _read_keeping_lines(train_files, max_sentence_tokens, encoding):
    """(each file's items (Sentences and pass-through lines) and column separator, all the
    sentences); document numbers continue across files."""
    from crftk.io.conll import Layout, read_sentences
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
    return files, sentences


def _labeled_text(files, labels, col):
    """The files' text (from _read_keeping_lines) with column ``col`` replaced by ``labels``
    (one list per sentence)."""
    from crftk.io.conll import format_sentence
    parts, i = [], 0
    for items, sep in files:
        for it in items:
            if isinstance(it, str):
                parts.append(it + "\n")
                continue
            rows = [row[:col] + [lab] + row[col + 1:] for row, lab in zip(it.rows, labels[i])]
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
