"""Tagging: stream sentences through a model in batches and write the labels."""

import math
import os
import sys

import numpy as np

from crftk import params
from crftk.io.conll import (DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, AtomicFiles, AtomicWriter, check_inputs,
                            check_output, directory_outputs, input_batches, model_widths)
from crftk.io.outputs import check_apart
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


def run(model_path, inputs, output, *, marginals=0, nbest=0, batch_tokens=50_000, combine=None, weights=None,
        decode=None, nbest_upstream=None, threads=0, max_sentence_tokens=MAX_SENTENCE_TOKENS, log=None,
        inference=None, tolerance=None, max_sweeps=None, encoding=DEFAULT_ENCODING):
    """crftk tag (here; crftk.distributed.tagging.run on a cluster): the model's kind (one CRF,
    a bag, a pipeline, a factorial CRF) chooses the tagger; ``output`` ("-": stdout) is written
    whole or not at all; an existing directory gets one output per input, named like it (all
    written, or none). Progress goes to stderr when it is a terminal. ``inference``,
    ``tolerance``, ``max_sweeps``: factorial CRFs only (default: the model's own). The inputs
    are read in ``encoding`` and the outputs are written in it (a file and its tagged copy
    compare line by line)."""
    inputs = list(inputs) or ["-"]
    encoding = params.ENCODING.check(encoding)
    output = os.fsdecode(os.fspath(output))
    targets = None
    if output != "-" and os.path.isdir(output):     # -o DIR: one output per input, named like it
        targets = directory_outputs(inputs, output)
    else:
        check_output(output)
    weights_file = weights if isinstance(weights, (str, os.PathLike)) else None
    check_inputs([model_path, *inputs, weights_file])
    check_apart([("output", targets or output)], tag_inputs(model_path, inputs, weights_file))
    model = Model.load(model_path)
    progress = tty_progress()
    factorial = model.structure_name == "factorial"
    if not factorial and (inference, tolerance, max_sweeps) != (None, None, None):
        raise CrftkError(f"--inference, --tolerance and --max-sweeps are for factorial models; {model_path} "
                         f"is a {model.structure_name} model")
    if factorial:
        from crftk.commands.factorial import tag_factorial      # here: only factorial models need it
        if marginals or nbest or decode is not None or combine not in (None, "chosen") or weights:
            raise UsageError("a factorial model tags with the best joint labeling only: drop -v, -n, --decode, "
                             "--combine and --weights")

        def tag_into(out, inputs, **kw):
            return tag_factorial(model, inputs, out, threads=threads, inference=inference, tolerance=tolerance,
                                 max_sweeps=max_sweeps, **kw)
    elif model.structure_name == "composed":
        from crftk.commands.compose import Pipeline, tag_pipeline    # here: only pipelines need it
        if decode not in (None,) + params.DECODE.choices:
            raise UsageError(f"--decode {decode} applies to bags combined by seq-mixture; {model_path} "
                             "is a pipeline (cascade, joint or normalized)")
        pipeline = Pipeline.from_model(model, model_path, threads=threads)

        def tag_into(out, inputs, **kw):
            return tag_pipeline(pipeline, inputs, out, decode=decode or params.DECODE.default,
                                nbest_upstream=(params.NBEST_UPSTREAM.default if nbest_upstream is None
                                                else nbest_upstream),
                                marginals=marginals, nbest=nbest, **kw)
    elif decode in params.DECODE.choices:
        raise UsageError(f"--decode {decode} applies to pipelines (crftk compose); {model_path} "
                         "is not a pipeline")
    else:
        def tag_into(out, inputs, **kw):
            return tag_files(model, inputs, out, marginals=marginals, nbest=nbest, threads=threads,
                             combine=combine, decode=decode or "chosen", weights=weights, **kw)
    kw = dict(batch_tokens=batch_tokens, progress=progress, log=log, max_sentence_tokens=max_sentence_tokens,
              encoding=encoding)
    if targets is None:
        with AtomicWriter(output, encoding=encoding) as out:
            tag_into(out, inputs, **kw)
    else:
        with AtomicFiles(targets, encoding=encoding) as files:
            for i, path in enumerate(inputs):
                tag_into(files.open(i), [path], **kw)
    end_progress_line(progress)


def tag_inputs(model_path, inputs, weights_file=None):
    """What tag reads, for io.outputs.check_apart: no output may be one of them."""
    return [("model", model_path), ("input", list(inputs)), ("weights file", weights_file)]


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
    space = model.space
    allowed = input_widths(tagger)
    if not marginals and not nbest and _compiled_path(tagger):
        return _tag_compiled(tagger, inputs, out, allowed, batch_tokens, progress, log, max_sentence_tokens,
                             encoding)
    counts = [0, 0]
    for batch, sep in input_batches(inputs, allowed, batch_tokens, by_document=space.template.anchored,
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
