"""Tagging: stream sentences through a model in batches and write the labels."""

import math
import os
import sys

import numpy as np

from crftk import params
from crftk.io.atomic import AtomicFiles, AtomicWriter
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, check_inputs, input_batches, model_widths
from crftk.io.outputs import check_apart, check_output, directory_outputs
from crftk.io.stream import format_batch, tag_stream
from crftk.errors import CrftkError, UsageError
from crftk.model import Model
from crftk.progress import tty_progress
from crftk.commands.train import resolve_threads
from crftk.ensemble.bag import Bag, BagInference, is_bag
from crftk.ensemble.weights import read_weight_file


class Tagger:
    """Decodes batches of sentences with a model."""

    def __init__(self, model, *, threads=0):
        self.model = model
        self.space = model.space
        self.weights = model.weights
        self.n_threads = resolve_threads(threads)
        self.structure = model.structure
        self.labels = np.asarray(model.output_labels, dtype=object)

    @property
    def output_names(self):
        """The names of the output marginals' columns."""
        return self.structure.output_names

    @property
    def output_index(self):
        """Column of each label id in the output marginals."""
        names = self.output_names
        return np.array([names.index(x) for x in self.labels.tolist()], dtype=np.int64)

    def inference(self, sentences):
        return self.structure.bind(self.space.encode(sentences), self.n_threads)

    def viterbi(self, sentences):
        """Best label ids per sentence: list of int arrays."""
        inf = self.inference(sentences)
        pred = inf.best(self.weights)[0]
        return [pred[sl] for sl in inf.corpus.sentence_slices()]

    def tag(self, sentences):
        """Best label strings per sentence."""
        return [self.labels[p].tolist() for p in self.viterbi(sentences)]

    def marginals(self, inf):
        """Marginals of the output labels [tokens, output_names] and log Z per sentence."""
        return inf.marginals(self.weights)

    def nbest(self, inf, k):
        """(paths [k, tokens], scores [sentences, k], counts) of the k best labelings."""
        # list Viterbi keeps k entries per label and token of the longest sentence, per thread
        max_len = int(np.diff(inf.corpus.sent_ptr).max()) if inf.corpus.n_sentences else 0
        need = max_len * self.space.n_labels * k * 16 * self.n_threads
        if need > params.NBEST_MEMORY:
            raise CrftkError(f"{k}-best lists of a sentence of {max_len} tokens and "
                             f"{self.space.n_labels} labels would take {need / 2**30:.1f} GiB; ask for fewer")
        return inf.nbest(self.weights, k)

    def write_batch(self, items, out, *, marginals=0, nbest=0, sep="\t"):
        """Tag a batch and write it: input columns + predicted label (+ probabilities).

        ``items`` are Sentences and, in between, lines to copy unchanged (str: a
        reader's pass-through lines, such as ``-DOCSTART-``); columns are joined
        with ``sep``.
        """
        sentences = [it for it in items if not isinstance(it, str)]
        blocks = self._blocks(sentences, marginals, nbest, sep) if sentences else iter(())
        for it in items:
            out.write(it + "\n" if isinstance(it, str) else next(blocks))

    def _blocks(self, sentences, marginals, nbest, sep):
        """The output text of each sentence, in order."""
        inf = self.inference(sentences)
        w = self.weights
        slices = inf.corpus.sentence_slices()
        labels = self.labels
        if nbest > 0:
            paths, scores, counts = self.nbest(inf, nbest)
            marg, logz = inf.marginals(w)
            for i, (s, sl) in enumerate(zip(sentences, slices)):
                parts = []
                for k in range(counts[i]):
                    prob = math.exp(scores[i, k] - logz[i])
                    parts.append(f"# nbest {k} {prob:.6f}\n")
                    path = paths[k, sl]
                    extra = [[lab] for lab in labels[path].tolist()]
                    if marginals:
                        outp = self.output_index[path]
                        for cols, p in zip(extra, marg[sl][np.arange(path.size), outp].tolist()):
                            cols.append(f"{p:.6f}")
                    parts.append(_rows_text(s.rows, extra, sep))
                yield "".join(parts)
            return
        pred, vscore = inf.best(w)
        if not marginals:
            for s, sl in zip(sentences, slices):
                yield _rows_text(s.rows, [[lab] for lab in labels[pred[sl]].tolist()], sep)
            return
        marg, logz = inf.marginals(w)
        names = self.output_names
        for i, (s, sl) in enumerate(zip(sentences, slices)):
            p = self.output_index[pred[sl]]
            m = marg[sl]
            extra = []
            for t, y in enumerate(p.tolist()):
                cols = [names[y], f"{m[t, y]:.6f}"]
                if marginals > 1:
                    cols += [f"{names[j]}/{m[t, j]:.6f}" for j in range(len(names))]
                extra.append(cols)
            yield f"# prob {math.exp(vscore[i] - logz[i]):.6f}\n" + _rows_text(s.rows, extra, sep)


class BagTagger(Tagger):
    """Decodes batches with a bag (crftk bag): one of its combinations, with given weights."""

    def __init__(self, model, *, combine="chosen", decode="chosen", weights=None, threads=0):
        super().__init__(model, threads=threads)
        self.bag = Bag.from_model(model)
        self.method = self.bag.combination if combine in (None, "chosen") else combine
        if decode in (None, "chosen"):
            decode = self.bag.decode if self.method == self.bag.combination else "viterbi"
        self.decode = decode
        if isinstance(weights, (str, os.PathLike)):
            weights = read_weight_file(weights, self.bag.names)
        if weights is not None:      # {combination or None (any): weights}, as read from a file
            weights = weights.get(self.method, weights.get(None))
            if weights is None:
                raise CrftkError(f"the weight file gives no weights for {self.method}")
        self.combination_weights = self.bag.weights(self.method) if weights is None else weights
        self.weights = None

    def inference(self, sentences):
        return BagInference(self.bag, sentences, self.method, self.combination_weights, self.decode,
                            self.n_threads)


#: The options of crftk tag that say how a model tags, as TagJob takes them. A TagJob is built from
#: them wherever the files are tagged (here, or from the model's bytes on each Dask worker), so an
#: option cannot reach one path and not the other.
JOB_OPTIONS = ("marginals", "nbest", "combine", "weights", "decode", "nbest_upstream", "threads", "inference",
               "tolerance", "max_sweeps")

#: The options of crftk tag that say how files are read, taken alike by both paths (the output is
#: written in the input's encoding too).
READ_OPTIONS = ("batch_tokens", "max_sentence_tokens", "encoding")


class TagJob:
    """What crftk tag does with one model and its options (JOB_OPTIONS), wherever it runs: the
    model's kind (one CRF, a bag, a pipeline, a factorial CRF) chooses the tagger; options that
    do not apply to it are errors, raised here, before anything is read or written.

    ``options`` holds the options as checked (a bag's weight file read), ready to build the same
    job elsewhere: ``TagJob(Model.from_bytes(...), name, **job.options)``.
    """

    def __init__(self, model, name, *, marginals=0, nbest=0, combine=None, weights=None, decode=None,
                 nbest_upstream=None, threads=0, inference=None, tolerance=None, max_sweeps=None):
        self.model, self.name = model, name
        # the weight file read (its table replaces it in options): an output must not overwrite it
        self.weights_file = weights if isinstance(weights, (str, os.PathLike)) else None
        kind = model.structure_name
        if kind != "factorial" and (inference, tolerance, max_sweeps) != (None, None, None):
            raise CrftkError(f"--inference, --tolerance and --max-sweeps are for factorial models; {name} "
                             f"is a {kind} model")
        if kind == "factorial":
            from crftk.commands.factorial import FactorialDecoder
            if marginals or nbest or decode is not None or combine not in (None, "chosen") or weights:
                raise UsageError("a factorial model tags with the best joint labeling only: drop -v, -n, "
                                 "--decode, --combine and --weights")
            self.decoder = FactorialDecoder(model, threads=threads, inference=inference, tolerance=tolerance,
                                            max_sweeps=max_sweeps)
            self.by_document = any(s.template.anchored for s in self.decoder.structure.chains)
        elif kind == "composed":
            from crftk.commands.compose import Pipeline, check_tag_options
            if decode not in (None,) + params.DECODE.choices:
                raise UsageError(f"--decode {decode} applies to bags combined by seq-mixture; {name} "
                                 "is a pipeline (cascade, joint or normalized)")
            if combine not in (None, "chosen") or weights is not None:
                raise UsageError(f"--combine and --weights are for bags (crftk bag); {name} is a pipeline")
            self.pipeline = Pipeline.from_model(model, name, threads=threads)
            if nbest_upstream is None:
                nbest_upstream = params.NBEST_UPSTREAM.default
            decode, nbest_upstream, nbest = check_tag_options(self.pipeline, decode or params.DECODE.default,
                                                              nbest_upstream, marginals, nbest)
            self.by_document = any(s.space.template.anchored for s in self.pipeline.stages)
        else:
            if decode in params.DECODE.choices:
                raise UsageError(f"--decode {decode} applies to pipelines (crftk compose); {name} "
                                 "is not a pipeline")
            decode = decode or "chosen"
            if isinstance(weights, (str, os.PathLike)) and is_bag(model):
                weights = read_weight_file(weights, Bag.from_model(model).names)
            self.tagger = tagger_for(model, combine=combine, decode=decode, weights=weights, threads=threads)
            spaces = ([m.space for m in self.tagger.bag.members] if isinstance(self.tagger, BagTagger)
                      else [model.space])
            self.by_document = any(s.template.anchored for s in spaces)
        self.kind = kind
        self.options = dict(marginals=marginals, nbest=nbest, combine=combine, weights=weights, decode=decode,
                            nbest_upstream=nbest_upstream, threads=threads, inference=inference,
                            tolerance=tolerance, max_sweeps=max_sweeps)

    def announce(self, log):
        """Log what is said once before tagging (how a pipeline or a factorial model decodes)."""
        line = None
        if self.kind == "factorial":
            from crftk.commands.factorial import decoding_line
            line = decoding_line(self.decoder)
        elif self.kind == "composed":
            from crftk.commands.compose import decoding_line
            line = decoding_line(self.pipeline, self.options["decode"], self.options["nbest_upstream"])
        if log is not None and line:
            log(line)

    def tag(self, out, inputs, *, batch_tokens=50_000, progress=None, log=None,
            max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
        """Tag CoNLL files (``-`` is stdin; read in ``encoding``) into the text stream ``out``:
        (sentences, tokens, gold), ``gold`` what :meth:`report` scores against the input's gold
        columns (None: nothing)."""
        kw = dict(batch_tokens=batch_tokens, progress=progress, log=log, max_sentence_tokens=max_sentence_tokens,
                  encoding=encoding)
        o = self.options
        if self.kind == "factorial":
            from crftk.commands.factorial import tag_with_decoder
            return tag_with_decoder(self.decoder, inputs, out, **kw)
        if self.kind == "composed":
            from crftk.commands.compose import tag_checked
            return tag_checked(self.pipeline, inputs, out, decode=o["decode"], nbest_upstream=o["nbest_upstream"],
                               marginals=o["marginals"], nbest=o["nbest"], **kw)
        return tag_with(self.tagger, inputs, out, marginals=o["marginals"], nbest=o["nbest"], **kw) + (None,)

    def merge(self, gold, more):
        """The gold evidence of two runs together (``more`` after ``gold``)."""
        if gold is None or more is None:
            return more if gold is None else gold
        if self.kind == "composed":
            return gold[0] + more[0], gold[1] + more[1]
        return [g + m for g, m in zip(gold[0], more[0])], [p + m for p, m in zip(gold[1], more[1])]

    def without(self, gold, first):
        """The gold evidence of a run without that of its first sentences, whose evidence is ``first``."""
        if first is None or gold is None:
            return gold
        if self.kind == "composed":
            return gold[0] - first[0], gold[1] - first[1]
        return [g[len(f):] for g, f in zip(gold[0], first[0])], [p[len(f):] for p, f in zip(gold[1], first[1])]

    def report(self, log, gold):
        """Log the accuracy against the input's gold columns (pipelines and factorial models)."""
        if gold is None:
            return
        if self.kind == "composed":
            from crftk.commands.compose import log_accuracy
            log_accuracy(log, self.pipeline, *gold)
        elif self.kind == "factorial":
            from crftk.commands.factorial import log_scores
            log_scores(gold[0], gold[1], self.decoder.structure.label_cols, log)


def run(model_path, inputs, output, *, batch_tokens=50_000, max_sentence_tokens=MAX_SENTENCE_TOKENS, log=None,
        encoding=DEFAULT_ENCODING, **options):
    """crftk tag (here; crftk.distributed.tagging.run on a cluster, from the same options): a
    TagJob of the model and ``options`` (JOB_OPTIONS) tags the inputs. ``output`` ("-": stdout)
    is written whole or not at all; an existing directory gets one output per input, named like
    it (all written, or none). Progress goes to stderr when it is a terminal. The inputs are
    read in ``encoding`` and the outputs written in it (a file and its tagged copy compare line
    by line)."""
    inputs = list(inputs) or ["-"]
    encoding = params.ENCODING.check(encoding)
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
    job = load_job(model_path, inputs, **options)
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


def tagger_for(model, *, combine="chosen", decode="chosen", weights=None, threads=0):
    """The tagger of a model: a BagTagger for a bag, else a Tagger (which takes no combination)."""
    if is_bag(model):
        return BagTagger(model, combine=combine, decode=decode, weights=weights, threads=threads)
    if combine not in (None, "chosen") or decode not in (None, "chosen") or weights is not None:
        raise CrftkError("--combine, --decode and --weights are for bags (crftk bag); this model is one CRF")
    return Tagger(model, threads=threads)


def input_widths(tagger):
    """The column counts a tagger's input may have (crftk.io.conll.Widths): from the last column
    any of its models reads to the training width."""
    if not isinstance(tagger, BagTagger):
        return tagger.space.input_widths()
    widths = [m.space.input_widths() for m in tagger.bag.members]
    reads = {c for m in tagger.bag.members for c in m.space.template.columns}
    return model_widths(reads, min(max(w) for w in widths), "the bag")


def _rows_text(rows, extra, sep):
    return "".join(sep.join(r) + sep + sep.join(e) + "\n" for r, e in zip(rows, extra)) + "\n"


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
    tagger = tagger_for(model, combine=combine, decode=decode, weights=weights, threads=threads)
    return tag_with(tagger, inputs, out, marginals=marginals, nbest=nbest, batch_tokens=batch_tokens,
                    progress=progress, log=log, max_sentence_tokens=max_sentence_tokens, encoding=encoding)


def tag_with(tagger, inputs, out, *, marginals=0, nbest=0, batch_tokens=50_000, progress=None, log=None,
             max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
    """tag_files with a Tagger or BagTagger; (sentences, tokens)."""
    allowed = input_widths(tagger)
    if not marginals and not nbest and _compiled_path(tagger):
        return _tag_compiled(tagger, inputs, out, allowed, batch_tokens, progress, log, max_sentence_tokens,
                             encoding)
    counts = [0, 0]
    for batch, sep in input_batches(inputs, allowed, batch_tokens, by_document=tagger.space.template.anchored,
                                    max_sentence_tokens=max_sentence_tokens, progress=progress, log=log,
                                    counts=counts, encoding=encoding):
        tagger.write_batch(batch, out, marginals=marginals, nbest=nbest, sep=sep)
    return tuple(counts)


# The compiled path: reading, encoding and writing in crftk._textio, batches decoded by a pool
# of threads while the next ones are read and the finished ones written. Labels only (no -v,
# -n); the output is byte for byte that of write_batch.

def _compiled_path(tagger):
    """Whether tag_files can take the compiled path with this tagger (one CRF or a bag)."""
    from crftk.features.space import FeatureSpace
    if type(tagger) not in (Tagger, BagTagger):
        return False
    spaces = [m.space for m in tagger.bag.members] if isinstance(tagger, BagTagger) else [tagger.space]
    return all(type(s) is FeatureSpace and s.raw_readable() for s in spaces)


def _tag_batch(tagger, batch, sep):
    """(output bytes, None) of a RawBatch (runs in a worker thread: the kernels release the GIL)."""
    if isinstance(tagger, BagTagger):
        inf = BagInference.of_raw(tagger.bag, batch, tagger.method, tagger.combination_weights, tagger.decode)
    else:
        inf = tagger.structure.bind(tagger.space.encode_raw(batch), 1)
    pred, _ = inf.best(tagger.weights)
    return format_batch(batch, pred, [tagger.labels.tolist()], sep), None


def _tag_compiled(tagger, inputs, out, allowed, batch_tokens, progress, log, max_sentence_tokens, encoding):
    return tag_stream(lambda batch, sep: _tag_batch(tagger, batch, sep), inputs, out, allowed, tagger.n_threads,
                      batch_tokens=batch_tokens, progress=progress, log=log,
                      max_sentence_tokens=max_sentence_tokens, encoding=encoding)[:2]
