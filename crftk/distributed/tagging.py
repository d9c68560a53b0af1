"""Batch tagging on a Dask cluster: pieces of files as tasks, outputs in input order.

The driver cuts each input into pieces at sentence boundaries (:mod:`.pieces`) and
keeps a bounded window of them in flight, so that its memory and the workers' stay
flat however large the corpus is; workers read their piece from the shared file
system, tag it with the model they loaded once (the model file's bytes are
broadcast, never a pickled model), and send the text back; the driver writes the
pieces in input order. A piece tagged alone gives the text the whole file gives
there (a piece never splits a sentence, or a document for first-mention templates),
so the output equals ``crftk tag``'s byte for byte.
"""

import hashlib
import io
import os
import sys
import time

import numpy as np

from crftk.commands.tag import AttributeJob, TagJob, end_progress_line, in_format, load_job, tag_inputs
from crftk.distributed import pieces as _pieces
from crftk.distributed.cluster import Cluster, check_options, require, worker_threads
from crftk.errors import CrftkError, shown
from crftk.io.atomic import AtomicWriter, fsync_directory, open_temp_beside, raise_if_full
from crftk.io.conll import (DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, check_inputs, codec, max_line_bytes,
                            set_max_line_bytes)
from crftk.io.outputs import check_apart, check_output, directory_outputs, open_direct, output_target
from crftk.model import Model
from crftk.params import PIECE_BYTES as PIECE_PARAM
from crftk.params import WORKERS
from crftk.progress import plural

#: Input bytes per task: 1 MB keeps a task's text (in and out) small next to a worker's
#: memory, and takes long enough (about 0.5 s) for the scheduling cost (~1 ms) to vanish.
PIECE_BYTES = 1 << 20

#: Pieces in flight (tagging, or tagged and waiting their turn) per worker thread.
WINDOW_PER_SLOT = 2

#: What tag and tag_files take as a job already built (a CRFsuite data file's AttributeJob wraps a TagJob).
_JOB_TYPES = (TagJob, AttributeJob)

# On each worker: the key (digest of the model and the job's options) -> the TagJob it last
# built, and how many models it has loaded.
_JOBS = {}
_LOADS = [0]


def _job(key, model_bytes, name, options, crfsuite=None):
    job = _JOBS.get(key)
    if job is None:
        _JOBS.clear()         # one job at a time: a new run's job replaces the last one
        options = dict(options, threads=worker_threads(options["threads"]))
        job = TagJob(Model.from_bytes(model_bytes, name=name), name, **options)
        if crfsuite is not None:
            job = AttributeJob(job, reference=crfsuite["reference"])
        _JOBS[key] = job
        _LOADS[0] += 1
    return job


def _job_key(model_bytes, name, options):
    """The digest of a job (model bytes, name, options) that a worker caches its TagJob by. The
    options are None, numbers, strings, or a bag's weights: {combination or None: float array}."""
    h = hashlib.sha256(model_bytes)

    def feed(value):
        if isinstance(value, dict):
            h.update(b"{")
            for k in sorted(value, key=repr):
                feed(k)
                feed(value[k])
            h.update(b"}")
        elif isinstance(value, np.ndarray):
            h.update(f"array {value.dtype.str} {value.shape}:".encode() + np.ascontiguousarray(value).tobytes())
        else:
            h.update(repr(value).encode() + b";")

    feed(name)
    feed(options)
    return h.hexdigest()


def models_loaded():
    """On a worker: how many times it has loaded a model."""
    return _LOADS[0]


def tag_piece(model_bytes, key, piece, options):
    """On a worker: (output text, sentences, tokens, gold evidence) of one piece of a file, tagged by
    the TagJob that ``crftk tag`` builds from the same model and options."""
    job = _job(key, model_bytes, options["name"], options["job"], options["crfsuite"])
    read = dict(batch_tokens=options["batch_tokens"], max_sentence_tokens=options["max_sentence_tokens"],
                encoding=options["encoding"])
    set_max_line_bytes(options["max_line_bytes"])       # the driver's, for every reader of this worker
    with open(piece.path, "rb") as f:
        f.seek(piece.start)
        data = f.read(piece.size)
    first = options["first_line"]
    # A piece after the file's first token line starts with a copy of that line, as a sentence of
    # its own: the reader then holds the piece's lines to the file's column count and separator
    # (and says so) exactly as it does reading the whole file. What the copy alone gives (its
    # text, counts and gold evidence; whatever the kind of model and the options) is cut off.
    prefix = piece.start > 0 and first is not None
    try:
        head = None
        if prefix:
            head = _tag_bytes(job, first + b"\n", piece.name, read)
            data = first + b"\n" + data
        text, n_sent, n_tok, gold = _tag_bytes(job, data, piece.name, read)
    except CrftkError as e:
        if e.path == piece.name and e.line is not None and piece.start > 0:
            # the piece's line numbers, as the file's
            line = e.line - (2 if prefix else 0) + _pieces.lines_before(piece.path, piece.start)   # the copy: 2 lines
            message = e.message.replace(" as on line 1 ", f" as on line {options['first_line_number']} ")
            raise CrftkError(message, e.path, line) from None
        raise
    if head is not None:
        if not text.startswith(head[0]):
            raise RuntimeError(f"{piece.name}: the copy of the first token line tagged otherwise within a piece")
        text = text[len(head[0]):]
        n_sent, n_tok, gold = n_sent - head[1], n_tok - head[2], job.without(gold, head[3])
    return text, n_sent, n_tok, gold


def _tag_bytes(job, data, name, read):
    stream = io.BytesIO(data)
    stream.name = name
    out = io.StringIO()
    n_sent, n_tok, gold = job.tag(out, [stream], **read)
    return out.getvalue(), n_sent, n_tok, gold


class _Outputs:
    """One output per input file in ``out_dir`` (temporary files, all renamed at the end), or
    every file's text on one stream ``out``; the files in ``encoding``."""

    def __init__(self, inputs, out=None, out_dir=None, encoding=DEFAULT_ENCODING):
        self.out, self.out_dir = out, out_dir
        self.encoding = encoding
        self.targets = []
        self.temps = []         # (temporary file, the file it replaces, the output's name)
        self._file = None
        self._file_is_temp = False
        self._current = 0       # the output being written
        if out_dir is not None:
            if not os.path.isdir(out_dir):
                raise CrftkError("the output directory does not exist", out_dir)
            self.targets = directory_outputs(inputs, out_dir)     # named as crftk tag -o DIR names them

    def start(self, i):
        if self.out_dir is None:
            return
        self._current = i
        where = output_target(self.targets[i])
        if not where.atomic:        # a FIFO or device: written directly, never replaced
            self._file, self._file_is_temp = open_direct(where, encoding=self.encoding), False
            return
        tmp, fd = open_temp_beside(where.where)
        self.temps.append((tmp, where.where, self.targets[i]))
        self._file, self._file_is_temp = os.fdopen(fd, "w", encoding=self.encoding, newline="\n"), True

    def write(self, text):
        if self.out_dir is None:
            self.out.write(text)        # an AtomicWriter: it reports text its encoding cannot write
            return
        try:
            self._file.write(text)
        except UnicodeEncodeError as e:
            raise CrftkError(f"cannot write {shown(e.object[e.start:e.end])} in {self.encoding}, the output's "
                             "encoding", self.targets[self._current]) from None
        except OSError as e:
            raise_if_full(e, self.targets[self._current])
            raise

    def finish(self):
        f = self._file
        if f is None:
            return
        try:
            f.flush()
            if self._file_is_temp:
                os.fsync(f.fileno())
            self._file = None       # else abort() closes it
            f.close()
        except BrokenPipeError:
            raise       # a FIFO's reader gone: the command's business, as on standard output
        except OSError as e:
            raise CrftkError(f"cannot write ({e.strerror or e})", self.targets[self._current]) from None

    def commit(self):
        """Every output in place, at once at the end: a failure before leaves none of them."""
        for tmp, target, name in self.temps:
            try:
                os.replace(tmp, target)
            except OSError as e:
                raise CrftkError(f"cannot write ({e.strerror or e})", name) from None
        if self.temps:
            fsync_directory(self.out_dir)
        self.temps = []

    def abort(self):
        if self._file is not None:
            try:
                self._file.close()
            except OSError:         # what it holds cannot be written: the error being raised says so
                pass
            self._file = None
        for tmp, _, _ in self.temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        self.temps = []


def tag_files(cluster, model, inputs, out=None, *, out_dir=None, batch_tokens=50_000, piece_bytes=PIECE_BYTES,
              progress=None, log=None, max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING,
              **options):
    """Tag CoNLL files on ``cluster`` (an entered :class:`~crftk.distributed.Cluster`).

    ``model``: a :class:`~crftk.commands.tag.TagJob`, or a Model tagged with ``options`` (those of
    TagJob: marginals, nbest, combine, ...). Writes every file's output, in input order, to the
    text stream ``out`` (what :func:`crftk.commands.tag.run` writes), or with ``out_dir`` to one
    file per input named like it (all renamed into place at the end: an error or a lost
    scheduler leaves none). ``progress(files_done, n_files, n_sent, n_tok)``, ``log`` a warning
    for an input without sentences, and the accuracy against the input's gold columns (of a
    pipeline or factorial model: per output, as crftk tag logs it). Returns (sentences, tokens).
    The inputs are read in ``encoding`` and the files of ``out_dir`` written in it.
    """
    encoding = codec(encoding)
    job = model if isinstance(model, _JOB_TYPES) else TagJob(model, "<model>", **options)
    inputs = [os.fspath(p) for p in inputs]
    if "-" in inputs:
        raise CrftkError("distributed tagging reads files on the workers: standard input ('-') cannot be "
                         "sent to them; save it to a file first")
    if (out is None) == (out_dir is None):
        raise ValueError("give out (a text stream) or out_dir, not both")
    if getattr(job, "whole_files", False):
        raise CrftkError("this model's %corpus features read each input file whole, which a cluster tags in "
                         "pieces: tag it without --scheduler/--workers")
    outputs = _Outputs(inputs, out, out_dir, encoding)
    files = []
    crfsuite = isinstance(job, AttributeJob)
    for path in inputs:
        # a CRFsuite data file has no columns to hold a piece to: no copy of its first line
        _, _, line, lineno = (None,) * 4 if crfsuite else _pieces.first_token_line(path)
        files.append({"path": os.path.abspath(path), "name": path, "first_line": line, "first_line_number": lineno})
    client = cluster.client
    model_bytes = job.model.to_bytes()
    shipped = dict(job.options, threads=cluster.task_threads())
    options = {"job": shipped, "name": job.name, "batch_tokens": batch_tokens,
               "max_sentence_tokens": max_sentence_tokens, "by_document": job.by_document, "encoding": encoding,
               "max_line_bytes": max_line_bytes(),      # --max-line-bytes, set for the whole process here
               "crfsuite": {"reference": job.reference} if crfsuite else None}
    key = _job_key(model_bytes, job.name, dict(shipped, crfsuite=options["crfsuite"]))
    counts = [[0, 0] for _ in inputs]
    golds = [None for _ in inputs]
    totals = [0, 0]
    try:
        with cluster.guard():
            shared = client.scatter(model_bytes, broadcast=True)
            _run(cluster, shared, key, files, options, piece_bytes, outputs, counts, golds, totals, progress, job)
        outputs.commit()
    except BaseException:
        outputs.abort()
        raise
    if log is not None:
        for path, (n_sent, _) in zip(inputs, counts):
            if n_sent == 0:
                log(f"crftk: warning: {path} has no sentences to tag")
        if out_dir is not None:
            for gold in golds:
                job.report(log, gold)
        else:
            gold = None
            for more in golds:
                gold = job.merge(gold, more)
            job.report(log, gold)
    return totals[0], totals[1]


def _run(cluster, shared, key, files, options, piece_bytes, outputs, counts, golds, totals, progress, job):
    """Submit pieces (a bounded window), write their texts in order as they come back."""
    from distributed import as_completed

    client = cluster.client
    window = WINDOW_PER_SLOT * cluster.n_slots + 1

    def all_pieces():
        for i, f in enumerate(files):
            cuts = _pieces.cut(f["path"], piece_bytes, file=i, by_document=options["by_document"], name=f["name"],
                               crfsuite=options["crfsuite"] is not None)
            for k, p in enumerate(cuts):
                yield p, k == len(cuts) - 1

    todo = all_pieces()
    order = []              # (piece, last of its file) in submission order
    futures = {}            # position in order -> future
    results = {}            # position in order -> result, until written
    written = 0
    finished_files = 0

    def submit():
        new = []
        while len(order) - written < window:
            nxt = next(todo, None)
            if nxt is None:
                break
            piece, last = nxt
            f = files[piece.file]
            opts = dict(options, first_line=f["first_line"], first_line_number=f["first_line_number"])
            fut = client.submit(tag_piece, shared, key, piece, opts, pure=False)
            futures[fut.key] = len(order)
            order.append((piece, last))
            new.append(fut)
        return new

    running = as_completed(submit(), loop=client.loop)
    for fut in running:
        position = futures.pop(fut.key)
        results[position] = fut            # an error is raised when its turn comes, in input order
        while written in results:
            text, n_sent, n_tok, gold = results.pop(written).result()
            piece, last = order[written]
            golds[piece.file] = job.merge(golds[piece.file], gold)
            if piece.index == 0:
                outputs.start(piece.file)
            outputs.write(text)
            counts[piece.file][0] += n_sent
            counts[piece.file][1] += n_tok
            totals[0] += n_sent
            totals[1] += n_tok
            if last:
                outputs.finish()
                finished_files += 1
            written += 1
            if progress is not None:
                progress(finished_files, len(files), totals[0], totals[1])
        running.update(submit())


def tty_progress(stream=None):
    """A progress line ``report(files_done, n_files, n_sent, n_tok)`` on a terminal, else None."""
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        return None
    start = time.perf_counter()

    def report(files_done, n_files, n_sent, n_tok):
        rate = n_tok / max(time.perf_counter() - start, 1e-9)
        stream.write(f"\rtagged {files_done:,}/{plural(n_files, 'file')}, {plural(n_sent, 'sentence')}, "
                     f"{plural(n_tok, 'token')} ({rate:,.0f} tokens/s)")
        stream.flush()
    return report


def tag(model, inputs, output="-", *, scheduler=None, workers=0, batch_tokens=50_000, piece_bytes=PIECE_BYTES,
        progress=None, log=None, max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING, **options):
    """``crftk tag --scheduler/--workers``: tag files on a cluster started (or joined) for the run.

    ``model``: a :class:`~crftk.commands.tag.TagJob`, or a Model or model path tagged with
    ``options`` (those of TagJob: marginals, nbest, combine, weights, decode, ..., threads: kernel
    threads per task). ``output``: a directory (one output per input, named like it), a file, or
    ``-`` (standard output); every output is checked before the cluster starts and written only
    when all of it is tagged. Returns (sentences, tokens).
    """
    require()
    workers = WORKERS.check(workers)
    encoding = codec(encoding)
    piece_bytes = PIECE_PARAM.check(piece_bytes)
    inputs = [os.fspath(p) for p in inputs]
    if isinstance(model, _JOB_TYPES):
        model_path, weights = (None if model.name == "<model>" else model.name), model.weights_file
    else:
        model_path, weights = (None if isinstance(model, Model) else model), options.get("weights")
    output, out_dir = _check_files(model_path, inputs, output,
                                   weights if isinstance(weights, (str, os.PathLike)) else None)
    if not isinstance(model, _JOB_TYPES):
        name = "<model>" if isinstance(model, Model) else os.fspath(model)
        model = TagJob(model if isinstance(model, Model) else Model.load(model), name, **options)
    job = model
    job.announce(log)
    kw = dict(batch_tokens=batch_tokens, piece_bytes=piece_bytes, progress=progress, log=log,
              max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    with Cluster(scheduler, workers, threads=job.options["threads"]) as cluster:
        if out_dir is not None:
            return tag_files(cluster, job, inputs, out_dir=out_dir, **kw)
        with AtomicWriter(output, encoding=encoding) as out:
            return tag_files(cluster, job, inputs, out, **kw)


def _check_files(model_path, inputs, output, weights_file):
    """Before a cluster starts: the inputs are files the workers can read, and no output (a file,
    or those of a directory) overwrites the model, an input or the weight file. Returns (output,
    the output directory or None)."""
    if not inputs or "-" in inputs:
        raise CrftkError("distributed tagging reads files on the workers: standard input ('-') cannot be "
                         "sent to them; save it to a file first")
    output = os.fsdecode(os.fspath(output))
    out_dir = output if output != "-" and os.path.isdir(output) else None
    if out_dir is None:
        check_output(output)
    for path in inputs:
        _pieces.first_token_line(path)      # every input readable before the cluster starts
    check_apart([("output", output if out_dir is None else directory_outputs(inputs, out_dir))],
                tag_inputs(model_path, inputs, weights_file))
    return output, out_dir


def run(model_path, inputs, output, *, scheduler=None, workers=0, piece_bytes=PIECE_BYTES, batch_tokens=50_000,
        max_sentence_tokens=MAX_SENTENCE_TOKENS, log=None, encoding=DEFAULT_ENCODING, data_format="conll",
        reference=False, **options):
    """``crftk tag --scheduler/--workers``: the TagJob that :func:`crftk.commands.tag.run` builds
    from the model and ``options`` (every option of crftk tag that says how to tag), run on a
    cluster by :func:`run_job`. The outputs are checked against the files read before the model
    is loaded (the job holds a bag's weight file as the table read from it), after the cluster
    options (as crftk train checks them)."""
    check_options(scheduler, workers)
    weights = options.get("weights")
    weights_file = weights if isinstance(weights, (str, os.PathLike)) else None
    inputs = [os.fspath(p) for p in inputs]
    check_inputs([model_path, *inputs, weights_file])
    _check_files(model_path, inputs, output, weights_file)
    job = in_format(load_job(model_path, **options), model_path, data_format, reference, options)
    run_job(job, inputs, output, scheduler=scheduler, workers=workers, piece_bytes=piece_bytes,
            batch_tokens=batch_tokens, max_sentence_tokens=max_sentence_tokens, log=log, encoding=encoding)


def run_job(job, inputs, output, *, scheduler=None, workers=0, batch_tokens=50_000, piece_bytes=PIECE_BYTES,
            max_sentence_tokens=MAX_SENTENCE_TOKENS, log=None, encoding=DEFAULT_ENCODING):
    """:func:`tag` of a TagJob, with a progress line on a terminal."""
    progress = tty_progress()
    tag(job, list(inputs), output, scheduler=scheduler, workers=workers, batch_tokens=batch_tokens,
        piece_bytes=piece_bytes, progress=progress, log=log, max_sentence_tokens=max_sentence_tokens,
        encoding=encoding)
    end_progress_line(progress)
