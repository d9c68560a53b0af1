"""crftk tag: stream sentences through a model in batches and write the labels; the model's
kind (crftk.kinds) gives the tagger and the options it takes."""

import os
import sys

from crftk import params
from crftk.io.atomic import AtomicFiles, AtomicWriter
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, check_inputs
from crftk.io.outputs import check_apart, check_output, directory_outputs
from crftk.io.stream import format_batch  # noqa: F401 (re-exported)
from crftk.kinds import kind_of, tagger_for
from crftk.kinds.bag import BagTagger  # noqa: F401 (re-exported)
from crftk.errors import UsageError
from crftk.features.attributes import AttributeSpace
from crftk.kinds.chain import Tagger, _rows_text, input_widths, tag_attributes, tag_with  # noqa: F401
from crftk.model import Model
from crftk.progress import tty_progress

#: The options of crftk tag that say how a model tags, as TagJob takes them. A TagJob is built from
#: them wherever the files are tagged (here, or from the model's bytes on each Dask worker), so an
#: option cannot reach one path and not the other.
JOB_OPTIONS = ("marginals", "nbest", "combine", "weights", "decode", "nbest_upstream", "threads", "inference",
               "tolerance", "max_sweeps", "force_col", "unknown_label")

#: The options of crftk tag that say how files are read, taken alike by both paths (the output is
#: written in the input's encoding too).
READ_OPTIONS = ("batch_tokens", "max_sentence_tokens", "encoding")


class TagJob:
    """What crftk tag does with one model and its options (JOB_OPTIONS), wherever it runs: the
    model's kind (crftk.kinds: one CRF, a bag, a pipeline, a factorial CRF) chooses the tagger;
    options that do not apply to it are errors, raised here, before anything is read or written.

    ``options`` holds the options as checked (a bag's weight file read), ready to build the same
    job elsewhere: ``TagJob(Model.from_bytes(...), name, **job.options)``.
    """

    def __init__(self, model, name, *, marginals=0, nbest=0, combine=None, weights=None, decode=None,
                 nbest_upstream=None, threads=0, inference=None, tolerance=None, max_sweeps=None, force_col=None,
                 unknown_label=params.UNKNOWN_LABEL.default):
        self.model, self.name = model, name
        if force_col is None and unknown_label not in (None, params.UNKNOWN_LABEL.default):
            raise UsageError("--unknown-label is the marker of free tokens in the --force-col column: give "
                             "--force-col COL")
        # the weight file read (its table replaces it in options): an output must not overwrite it
        self.weights_file = weights if isinstance(weights, (str, os.PathLike)) else None
        self.runtime = kind_of(model).Job(model, name, dict(
            marginals=marginals, nbest=nbest, combine=combine, weights=weights, decode=decode,
            nbest_upstream=nbest_upstream, threads=threads, inference=inference, tolerance=tolerance,
            max_sweeps=max_sweeps, force_col=force_col, unknown_label=unknown_label))
        self.by_document = self.runtime.by_document
        self.whole_files = getattr(self.runtime, "whole_files", False)
        self.options = self.runtime.options

    def announce(self, log):
        """Log what is said once before tagging (how a pipeline or a factorial model decodes)."""
        line = self.runtime.decoding_line()
        if log is not None and line:
            log(line)

    def tag(self, out, inputs, *, batch_tokens=50_000, progress=None, log=None,
            max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
        """Tag CoNLL files (``-`` is stdin; read in ``encoding``) into the text stream ``out``:
        (sentences, tokens, gold), ``gold`` what :meth:`report` scores against the input's gold
        columns (None: nothing)."""
        return self.runtime.tag(out, inputs, batch_tokens=batch_tokens, progress=progress, log=log,
                                max_sentence_tokens=max_sentence_tokens, encoding=encoding)

    def merge(self, gold, more):
        """The gold evidence of two runs together (``more`` after ``gold``)."""
        if gold is None or more is None:
            return more if gold is None else gold
        return self.runtime.merge(gold, more)

    def without(self, gold, first):
        """The gold evidence of a run without that of its first sentences, whose evidence is ``first``."""
        if first is None or gold is None:
            return gold
        return self.runtime.without(gold, first)

    def report(self, log, gold):
        """Log the accuracy against the input's gold columns (pipelines and factorial models)."""
        if gold is not None:
            self.runtime.report(log, gold)


def run(model_path, inputs, output, *, batch_tokens=50_000, max_sentence_tokens=MAX_SENTENCE_TOKENS, log=None,
        encoding=DEFAULT_ENCODING, data_format="conll", reference=False, **options):
    """crftk tag (here; crftk.distributed.tagging.run on a cluster, from the same options): a
    TagJob of the model and ``options`` (JOB_OPTIONS) tags the inputs. ``output`` ("-": stdout)
    is written whole or not at all; an existing directory gets one output per input, named like
    it (all written, or none). Progress goes to stderr when it is a terminal. The inputs are
    read in ``encoding`` and the outputs written in it (a file and its tagged copy compare line
    by line). ``data_format`` "crfsuite": the inputs are CRFsuite data files, tagged by a model
    trained on attributes; the output is a label a line (``reference``: the input's label, a tab,
    the predicted one), a blank line between sequences."""
    inputs = list(inputs) or ["-"]
    encoding = params.ENCODING.check(encoding)
    params.DATA_FORMAT.check(data_format)
    output = os.fsdecode(os.fspath(output))
    targets = None
    if output != "-" and os.path.isdir(output):     # -o DIR: one output per input, named like it
        targets = directory_outputs(inputs, output)
    else:
        check_output(output)
    weights = options.get("weights")
    weights_file = weights if isinstance(weights, (str, os.PathLike)) else None
    check_inputs([model_path, *inputs, weights_file])
    check_apart([("output", targets or output)], tag_inputs(model_path, inputs, weights_file))
    job = in_format(load_job(model_path, inputs, **options), model_path, data_format, reference, options)
    progress = tty_progress()
    job.announce(log)
    read = dict(batch_tokens=batch_tokens, max_sentence_tokens=max_sentence_tokens, progress=progress, log=log,
                encoding=encoding)
    if targets is None:
        with AtomicWriter(output, encoding=encoding) as out:
            job.report(log, job.tag(out, inputs, **read)[2])
    else:
        with AtomicFiles(targets, encoding=encoding) as files:
            for i, path in enumerate(inputs):
                job.report(log, job.tag(files.open(i), [path], **read)[2])
    end_progress_line(progress)


def in_format(job, model_path, data_format, reference, options):
    """The job that tags inputs of ``data_format`` (here and on a cluster): the TagJob itself for
    CoNLL files, an AttributeJob over it for CRFsuite data files; a model or an option that does
    not fit the format is refused in one line."""
    crfsuite = params.DATA_FORMAT.check(data_format) == "crfsuite"
    if reference and not crfsuite:
        raise UsageError("--reference writes the labels of CRFsuite data files: it needs --format crfsuite "
                         "(a CoNLL file's tagged output keeps its gold column)")
    reads_attributes = isinstance(job.model.space, AttributeSpace)
    if crfsuite and (job.model.kind != "crf" or not reads_attributes):
        raise UsageError(f"--format crfsuite tags with a model trained on attributes (crftk train --format crfsuite, "
                         f"or feature dicts); {model_path} reads CoNLL columns through its template")
    if reads_attributes and not crfsuite:
        raise UsageError(f"{model_path} was trained on attributes (feature dicts or a CRFsuite file): tag CRFsuite "
                         "data files with --format crfsuite")
    if crfsuite and options.get("force_col") is not None:
        raise UsageError("--force-col reads a column of a CoNLL file; CRFsuite data files have none to force "
                         "(crftk.CRF.predict(X, constraints=...) constrains feature dicts)")
    if crfsuite and (options.get("marginals") or options.get("nbest")):
        raise UsageError("--format crfsuite writes labels only: drop -v/--marginals and -n/--nbest")
    return AttributeJob(job, reference) if crfsuite else job


class AttributeJob:
    """A TagJob's model tagging CRFsuite data files: a label a line (``reference``: the input's
    label, a tab, the predicted one), as TagJob's interface asks (no gold evidence)."""

    by_document = False

    def __init__(self, job, reference=False):
        self.job, self.reference = job, bool(reference)
        self.model, self.name, self.options = job.model, job.name, job.options
        self.weights_file = job.weights_file

    def announce(self, log):
        pass

    def tag(self, out, inputs, *, batch_tokens=50_000, progress=None, log=None,
            max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
        counts = tag_attributes(self.job.runtime.tagger, inputs, out, reference=self.reference,
                                batch_tokens=batch_tokens, max_sentence_tokens=max_sentence_tokens,
                                encoding=encoding)
        return counts + (None,)

    @staticmethod
    def merge(gold, more):
        return None

    @staticmethod
    def without(gold, first):
        return None

    @staticmethod
    def report(log, gold):
        pass


def tag_inputs(model_path, inputs, weights_file=None):
    """What tag reads, for io.outputs.check_apart: no output may be one of them."""
    return [("model", model_path), ("input", list(inputs)), ("weights file", weights_file)]


def load_job(model_path, inputs=(), **options):
    """The TagJob of a model file and crftk tag's options (JOB_OPTIONS; all of them reach it
    here, wherever the files are then tagged), once the model, ``inputs`` and a weight file are
    found readable."""
    weights = options.get("weights")
    check_inputs([model_path, *inputs, weights if isinstance(weights, (str, os.PathLike)) else None])
    return TagJob(Model.load(model_path), model_path, **options)


def end_progress_line(progress):
    """Ends the progress line that a tty progress reporter drew."""
    if progress:
        sys.stderr.write("\n")


def tag_files(model, inputs, out, *, marginals=0, nbest=0, threads=0, batch_tokens=50_000,
              progress=None, log=None, max_sentence_tokens=MAX_SENTENCE_TOKENS, combine="chosen",
              decode="chosen", weights=None, encoding=DEFAULT_ENCODING):
    """Tag CoNLL files (``-`` is stdin) batch by batch, writing to ``out``; returns counts.

    Lines that are not tokens (``-DOCSTART-``, ``# prob`` annotations) are copied
    in place; the output keeps each file's column separator (tab or space).
    ``log`` receives a warning for an input without sentences. A bag is tagged with the
    combination ``combine`` (default: its own choice), ``decode`` and ``weights`` (a weight
    file, or {combination or None: weights}: see crftk.ensemble.weights.read_weight_file).
    The inputs are read in ``encoding``; what is written to ``out`` is text (or UTF-8 bytes to
    its buffer when it writes UTF-8), so ``out``'s encoding is the output's.
    """
    if model.kind == "two-stage":       # both stages, on whole documents (as crftk tag -m runs it)
        from crftk.kinds import twostage
        tagger = twostage.Tagger(twostage.TwoStage.from_model(model, model.source), threads=threads)
    else:
        tagger = tagger_for(model, combine=combine, decode=decode, weights=weights, threads=threads)
    return tag_with(tagger, inputs, out, marginals=marginals, nbest=nbest, batch_tokens=batch_tokens,
                    progress=progress, log=log, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
