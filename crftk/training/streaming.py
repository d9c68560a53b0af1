"""Training on a corpus streamed from its files (crftk train --stream): memory bounded by the
feature dictionary and one batch, not by the corpus.

Two kinds of pass read the CoNLL files batch by batch (crftk.io.conll.CorpusStream.batches,
RawBatch bytes read in compiled code). The dictionary pass fits a feature space to each batch
and merges it into the spaces before (crftk.features.union.union_spaces, which numbers
everything as fitting the whole corpus would), pruning with --min-freq at the end. Then every
epoch of an online learner (crftk.optimize.online: sgd, perceptron, pa, arow) reads the files
again: each batch is encoded with the frozen space in compiled code
(FeatureSpace.encode_raw) and run through the kernels' epoch, the learner's state carried from
one batch to the next. With one batch holding the whole corpus this is the in-memory training,
weight for weight.
"""

import os
import stat
import time

import numpy as np

from crftk.errors import CrftkError, UsageError, shown
from crftk.features.attributes import AttributeSpace
from crftk.features.extract import Extractor
from crftk.features.space import EncodedCorpus, FeatureSpace
from crftk.features.templates import DOCUMENT_MACROS
from crftk.io.conll import CorpusStream, _split_columns
from crftk.io.crfsuite import AttributeSequences
from crftk.kinds import incremental
from crftk.kinds.chain import ChainJob, _read_line, check_template, transitions_text
from crftk.optimize.online import Batches
from crftk.progress import plural, status
from crftk.structures.chain import Chain

#: The online learners: each visits one sentence at a time, so one batch at a time.
ALGORITHMS = ("sgd", "perceptron", "pa", "arow")


def check_cluster(stream, scheduler, workers):
    """Refuse --stream with a cluster (before the cluster's own checks, which need Dask)."""
    if stream and (scheduler is not None or workers):
        raise UsageError("--stream trains on one machine: drop --scheduler/--workers (a cluster keeps the "
                         "corpus in shards on its workers instead)")


def check(opt, sentences, template, *, init, label_cols):
    """Refuse in one line what --stream cannot train (after :func:`check_cluster`)."""
    if isinstance(sentences, AttributeSequences):
        raise UsageError("--stream reads CoNLL files with a template: CRFsuite data (--format crfsuite) and "
                         "feature dicts are trained in memory")
    if not isinstance(sentences, CorpusStream):
        raise UsageError("--stream reads its training data from files (crftk train FILE..., "
                         "crftk.CRF.fit_files): in-memory sentences are trained without it")
    check_rereadable(sentences.paths)
    if opt["algorithm"] not in ALGORITHMS:
        raise UsageError(f"--stream trains with --algorithm {', '.join(ALGORITHMS)}: --algorithm "
                         f"{opt['algorithm']} needs the whole corpus in every iteration")
    if init is not None and isinstance(init.space, AttributeSpace):
        raise UsageError("--stream reads CoNLL files with a template: an --init model of feature dicts or "
                         "CRFsuite data continues in memory")
    if init is not None and init.info.get("train_scheme", "none") != "none":
        raise UsageError(f"--stream trains on the labels as they are: an --init model trained with --train-scheme "
                         f"{init.info['train_scheme']} continues in memory")
    if label_cols:
        raise UsageError("--stream trains one chain: a factorial CRF (several --label-col) trains in memory")
    refused = [(f"--model-type {opt['model_type']}", opt["model_type"] != "crf"),
               ("--order 2", opt["order"] != 1),
               (f"--train-scheme {opt['train_scheme']}", opt["train_scheme"] != "none"),
               (f"--constraints {opt['constraints']}", opt["constraints"] != "none"),
               ("--transitions seen", opt["transitions"] != "all")]
    given = [what for what, bad in refused if bad]
    if given:
        raise UsageError(f"--stream trains a first-order CRF on the labels as they are, without checking the "
                         f"whole corpus's gold labels first: drop {', '.join(given)}")
    whole_documents = [line.lineno for line in template.lines
                       if any(m.anchored or m.kind in DOCUMENT_MACROS for m in line.macros)]
    if whole_documents:
        raise CrftkError("--stream encodes a batch of sentences at a time: first-mention (%^) and document "
                         "(%doc, %corpus, %ctx) macros need whole documents; train without --stream",
                         template.path, whole_documents[0])
    if not Extractor(template, {}).can_fit_batches():
        raise CrftkError("--stream reads its batches as bytes in compiled code, which lexicon macros do not "
                         "read; train without --stream", template.path,
                         min(template.lexicon_lines.values(), default=None))


def check_rereadable(paths):
    """Refuse a training input that can be read once (standard input, a pipe, FIFO or device, a
    file object): the dictionary pass would drain it, and the epochs would then read nothing."""
    for path in paths:
        if isinstance(path, (str, bytes, os.PathLike)):
            name = os.fsdecode(os.fspath(path))
            if name == "-":
                what = "standard input"
            else:
                try:
                    if stat.S_ISREG(os.stat(name).st_mode):
                        continue
                except OSError:
                    continue        # reading it says why, in the words of every other command
                what = "not a regular file: a pipe, FIFO or device"
        else:
            name = getattr(path, "name", None)
            name, what = (name if isinstance(name, str) else "<stream>"), "a file object"
        raise CrftkError(f"--stream reads the training files again in every epoch, and this input can be read "
                         f"once ({what}): write it to a file first, or train without --stream", name)


class _OneBatch:
    """One RawBatch as the stream FeatureSpace.fit reads on its compiled path."""

    def __init__(self, batch):
        self.batch = batch

    def batches(self):
        return iter((self.batch,))

    def __iter__(self):         # never read: fit takes batches() when the template allows it
        raise AssertionError("a batch is fitted through batches()")


#: Bytes read at a time per token of a batch: CoNLL lines are mostly shorter, so a batch closes
#: at its token count rather than at the end of a block (a batch never spans two blocks).
BLOCK_BYTES_PER_TOKEN = 64


def _batch_kw(batch_tokens):
    # a sentence has a token at least: batch_tokens also bounds the sentences of a batch
    block = min(max(BLOCK_BYTES_PER_TOKEN * batch_tokens, 1 << 16), 1 << 26)
    return {"batch_tokens": batch_tokens, "max_sentences": batch_tokens, "block_size": block, "read_ahead": True}


def _token_line(batch, t):
    """The line number of token t of a RawBatch (a sentence's token lines are consecutive)."""
    k = int(np.searchsorted(batch.sent_ptr, t, side="right")) - 1
    return int(batch.sent_line[k]) + int(t - batch.sent_ptr[k])


def dictionary(stream, template, opt, batch_tokens, log):
    """(space, sentences, tokens, batches): the feature space of a CorpusStream fitted a batch at
    a time and merged in file order, pruned with --min-freq at the end."""
    from crftk.features.union import union_spaces
    marker = opt["unknown_label"] or None
    merged, pending, n_sentences, n_tokens, n_batches = [], [], 0, 0, 0
    for batch in stream.batches(**_batch_kw(batch_tokens)):
        piece, corpus = FeatureSpace.fit(_OneBatch(batch), template, label_col=opt["label_col"], min_freq=1,
                                         feature_set=opt["feature_set"], path=batch.source, unknown_label=marker)
        if corpus.allowed is not None:
            t = int(np.flatnonzero(corpus.labels < 0)[0])
            raise CrftkError(f"--stream trains on fully labeled data, and this label is partial (the "
                             f"--unknown-label marker {marker!r} or a set A|B): train without --stream, or give "
                             f"--unknown-label '' if such cells are labels", batch.source, _token_line(batch, t))
        del corpus
        # the batches' spaces wait until they hold as many attributes as the dictionary so far, then
        # join it in one union: each attribute is merged O(log batches) times, not once per batch
        pending.append(piece)
        if sum(p.n_attrs for p in pending) >= sum(p.n_attrs for p in merged):
            merged, pending = [union_spaces(merged + pending)[0]], []
        n_sentences += batch.n_sentences
        n_tokens += batch.n_tokens
        n_batches += 1
        status(log, f"dictionary pass: {plural(n_batches, 'batch', 'batches')}, {plural(n_tokens, 'token')} ...")
    if not merged:
        raise CrftkError("no training sentences", stream.paths[0] if stream.paths else None)
    space = merged[0]
    if pending or opt["min_freq"] > 1:
        space = union_spaces(merged + pending, min_freq=opt["min_freq"])[0]
    return space, n_sentences, n_tokens, n_batches


def prepare(stream, template, opt, *, log, n_threads, batch_tokens, init=None, init_space="grow"):
    """The chain trainer's job (crftk.kinds.chain.ChainJob) of a CorpusStream trained by --stream:
    the dictionary pass's space, and a StreamedCorpus as its corpus. With an ``init`` model (a
    checkpoint resumed, or a model continued on new files), its space grown by the dictionary
    pass's (``init_space`` "grow", crftk.kinds.incremental) or kept, the job's ``init_weights``
    its weights placed in the grown space."""
    t0 = time.perf_counter()
    read = opt
    if init is None:
        check_template(template, log)
    else:                   # the data is read as the model reads it, pruned when merged into it
        read = {**opt, "label_col": init.space.label_col, "feature_set": init.space.feature_set, "min_freq": 1}
    source = stream.paths[0] if len(stream.paths) == 1 else f"{len(stream.paths)} files"
    status(log, f"dictionary pass over {source}, {plural(batch_tokens, 'token')} a batch ...")
    space, n_sentences, n_tokens, n_batches = dictionary(stream, template, read, batch_tokens, log)
    growth, data_labels = None, space.labels
    if init is not None:
        if space.n_columns != init.space.n_columns:
            raise CrftkError(f"the --init model reads rows of {init.space.n_columns} columns, and the training "
                             f"data has {space.n_columns}", stream.paths[0])
        growth = _continued(init, space, opt, init_space)
        space = init.space if growth is None or growth.space is None else growth.space
    structure = Chain(space)
    corpus = StreamedCorpus(stream.paths, stream.kw, structure, batch_tokens, n_threads, n_sentences, n_tokens,
                            n_batches, init_labels=init is not None and space is init.space)
    if corpus.init_labels and set(data_labels) - set(space.labels):
        for _ in corpus.batches():      # a pass that stops at the first label the model lacks, with its line
            pass
    transitions = transitions_text(template, space)
    if growth is not None:
        log(growth.line)
    log(_read_line(corpus, space, f", {transitions}", t0, n_threads)
        + f"; streamed in {plural(n_batches, 'batch', 'batches')} of up to {plural(batch_tokens, 'token')}")
    job = ChainJob(structure, corpus, None, template, False)
    if growth is not None:
        job.init_weights = growth.weights
    return job


def _continued(init, data, opt, init_space):
    """The Growth of the --init model's space by the dictionary pass's ``data`` (None: it adds
    nothing, or --init-space keep; one without a space: the space is kept, its line says why)."""
    if init_space == "keep":
        return None
    why = incremental.why_kept(init.space.template, opt, False)
    if why is None:
        return incremental.grow_by(init, data, opt["min_freq"])
    return incremental.kept(why)


class StreamedCorpus(Batches):
    """The training files as Batches of an online learner: each epoch reads them again, a batch
    at a time, encoded with the frozen ``space`` and bound to ``structure``'s kernels."""

    allowed = None          # no partial labels (refused by the dictionary pass)

    def __init__(self, paths, kw, structure, batch_tokens, n_threads, n_sentences, n_tokens, n_batches=None, *,
                 init_labels=False):
        self.paths, self.kw = list(paths), dict(kw)
        self.init_labels = init_labels      # the labels are an --init model's: a label it lacks is the data's
        self.structure, self.space = structure, structure.space
        self.batch_tokens, self.n_threads = batch_tokens, n_threads
        self.n_sentences, self.n_tokens, self.n_batches = n_sentences, n_tokens, n_batches
        if not self.space.raw_readable():
            raise CrftkError("--stream encodes its batches in compiled code, which this template's columns "
                             "do not allow (more than 64 columns?); train without --stream", self.space.template.path)

    def record(self):
        """What the training record says of the streaming."""
        return {"batch_tokens": self.batch_tokens, "batches": self.n_batches}

    def batches(self):
        stream = CorpusStream(self.paths, self.kw)
        n_sentences = n_tokens = 0
        for batch in stream.batches(**_batch_kw(self.batch_tokens)):
            n_sentences += batch.n_sentences
            n_tokens += batch.n_tokens
            yield self.encoded(batch)
        if (n_sentences, n_tokens) != (self.n_sentences, self.n_tokens):
            # a file cut or rewritten since the dictionary pass: the epoch did not train on the corpus
            raise CrftkError(f"this epoch read {plural(n_sentences, 'sentence')} and {plural(n_tokens, 'token')}, "
                             f"the dictionary pass {self.n_sentences:,} and {self.n_tokens:,}: did "
                             "the training files change during training?",
                             self.paths[0] if len(self.paths) == 1 else None)

    def first(self):
        batches = self.batches()
        try:
            return next(batches)
        finally:
            batches.close()       # the file is closed now, not when the generator is collected

    def encoded(self, batch):
        """(inference, gold label ids) of a RawBatch."""
        corpus = self.space.encode_raw(batch)
        col = self.space.label_col
        labels = self.space.raw_gold(batch)
        unknown = np.flatnonzero(labels < 0)
        if unknown.size:
            t = int(unknown[0])
            if self.init_labels:
                row = _split_columns(batch.block[batch.tok_start[t]:batch.tok_end[t]].decode("utf-8"))
                raise CrftkError(f"label {shown(row[col])} is not one of the --init model's "
                                 f"{plural(self.space.n_labels, 'label')}", batch.source, _token_line(batch, t))
            raise CrftkError("a label the dictionary pass did not see: did the training files change during "
                             "training?", batch.source, _token_line(batch, t))
        corpus = EncodedCorpus(corpus.sent_ptr, corpus.attr_ptr, corpus.attrs, corpus.eattr_ptr, corpus.eattrs,
                               labels, corpus.values)
        return self.structure.bind(corpus, self.n_threads), labels
