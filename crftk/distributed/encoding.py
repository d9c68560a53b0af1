"""The feature dictionary built and the training data encoded on a Dask cluster's workers.

The driver cuts the training files into pieces at sentence boundaries (:mod:`.pieces`,
about one per worker thread); each worker reads its pieces from the shared file system
and fits a feature space to each (every attribute kept, with its count); the spaces are
merged by a tree of :func:`crftk.features.union.union_spaces` tasks on the workers, in
file order, pruned with ``--min-freq`` at the root only (the union of pieces fitted in
order is the space fitting their concatenation gives); the root is copied to the workers
once, by a tree, and each piece is encoded with it where it stays, as one shard of
:class:`crftk.distributed.training.ShardedObjective`. The driver receives the final space
(the model's) and each shard's sizes and seen transitions, never a sentence, so its
memory follows the parameter vector, not the corpus.

A worker lost on the way costs nothing but time: every result here is a task's, which the
scheduler computes again from its piece elsewhere.
"""

import io
import math
import os
import threading
from dataclasses import dataclass

import numpy as np

from crftk.distributed import pieces as _pieces
from crftk.distributed.training import replicate
from crftk.errors import CrftkError
from crftk.features.space import EncodedCorpus, FeatureSpace
from crftk.io.conll import CorpusStream, max_line_bytes, read_batches, read_sentences, set_max_line_bytes
from crftk.io.partial import partial_strings
from crftk.progress import plural

#: Spaces merged by one union task: the tree has ceil(log4 pieces) levels.
UNION_FANIN = 4

#: Held while a task builds the compiled tables of the space its worker holds.
_PREPARING = threading.Lock()

#: The reader options a stream may carry to the workers (the CLI's and iter_corpus's defaults).
_READ_OPTIONS = ("max_sentence_tokens", "encoding")


@dataclass
class KeptShards:
    """The training corpus as shards kept on the workers: what the driver knows of it."""

    shards: list            # (worker address, future of the shard's EncodedCorpus), in file order
    n_sentences: int
    n_tokens: int
    seen: np.ndarray        # bool [labels * labels]: transitions some two adjacent gold labels show
    space: object = None    # the future of the final space, on the workers
    labels = None           # the gold labels stay on the workers
    allowed = None          # no partial labels on this path
    values = None


def refusal(stream, template, opt):
    """Why distributed encoding cannot train on ``stream`` with these options (one line), or None."""
    if not isinstance(stream, CorpusStream):
        return "the training data is not read from files"
    if set(stream.kw) - set(_READ_OPTIONS):
        return "the training files are read with options the workers do not take"
    for p in stream.paths:
        if not isinstance(p, (str, bytes, os.PathLike)) or os.fsdecode(os.fspath(p)) == "-":
            return "standard input and open files cannot be read by the workers"
    if opt["order"] != 1:
        return "a second-order CRF's labels are pairs read across each sentence"
    if opt["train_scheme"] != "none":
        return "--train-scheme detects the corpus's scheme over the whole corpus"
    if opt["objective"] == "mce-f":
        return "MCE-F checks the gold chunks of the whole corpus"
    if template.lexicons:
        return "the template reads lexicons"
    if template.anchored or template.aggregates:
        return "first-mention and document macros read whole documents"
    return None


@dataclass(frozen=True)
class _Reading:
    """What a worker needs to read and fit its pieces as the driver's reader would."""

    template: object
    label_col: int
    feature_set: str
    marker: object
    n_columns: int
    kw: dict
    line_limit: int
    constraints: str = "none"


def _batches(piece, reading):
    """The RawBatch batches of a piece (errors at the file's line numbers)."""
    set_max_line_bytes(reading.line_limit)
    with open(piece.path, "rb") as f:
        f.seek(piece.start)
        data = io.BytesIO(f.read(piece.size))
    data.name = piece.name
    try:
        for batch in read_batches(data, n_columns=reading.n_columns, **reading.kw):
            if batch.n_sentences:
                yield batch
    except CrftkError as e:
        raise _at_file_line(e, piece) from None


def _at_file_line(e, piece):
    if e.path == piece.name and e.line is not None and piece.start > 0:
        return CrftkError(e.message, e.path, e.line + _pieces.lines_before(piece.path, piece.start))
    return e


class _PieceData:
    """A piece as FeatureSpace.fit reads a CorpusStream: by batches."""

    def __init__(self, piece, reading):
        self.piece, self.reading = piece, reading
        self.empty = True

    def batches(self):
        for batch in _batches(self.piece, self.reading):
            self.empty = False
            yield batch


def fit_piece(piece, reading):
    """On a worker: (the piece's feature space with every attribute and its count, or None for a
    piece without sentences; whether it has partial labels)."""
    data = _PieceData(piece, reading)
    try:
        space, _ = FeatureSpace.fit(data, reading.template, label_col=reading.label_col, min_freq=1,
                                    feature_set=reading.feature_set, path=piece.name)
    except CrftkError as e:
        if data.empty:
            return None, False
        raise _at_file_line(e, piece) from None
    partial = bool(reading.marker) and any(partial_strings(space.labels, reading.marker))
    return (None if partial else space), partial


def merge(fits, min_freq):
    """On a worker: the union of fitted pieces (in order), as (space, partial); ``min_freq`` prunes."""
    from crftk.features.union import union_spaces
    if any(partial for _, partial in fits):
        return None, True
    spaces = [space for space, _ in fits if space is not None]
    if not spaces:
        return None, False
    return union_spaces(spaces, min_freq=min_freq)[0], False


def root_space(fitted):
    """On a worker: the root's space alone (what the driver and the encoding tasks take)."""
    return fitted[0]


def encode_piece(piece, reading, space):
    """On a worker: a piece encoded with the final space (its shard), its gold constraints checked."""
    lines, parts = [], []
    with _PREPARING:        # the tasks of a worker share its space: its compiled tables are built once,
        raw = space.raw_readable()      # before they encode with them (as tagging's threads do)
    for batch in _batches(piece, reading):
        if raw:
            part = space.encode_raw(batch)
            part.labels = space.raw_gold(batch)     # every label is the space's: it was fitted on them
        else:
            sentences = list(read_sentences(io.BytesIO(bytes(batch.block)), n_columns=reading.n_columns,
                                            **reading.kw))
            part = space.encode(sentences)
        parts.append(part)
        lines.append(np.asarray(batch.sent_line, dtype=np.int64))
    corpus = concatenate(parts)
    if reading.constraints != "none":
        from crftk.structures.constraints import check_gold
        first = np.concatenate(lines) if lines else np.zeros(0, np.int64)
        offset = _pieces.lines_before(piece.path, piece.start) if piece.start else 0

        def locate(k, t):
            return piece.name, int(first[k]) + t + offset
        check_gold(space.labels, corpus.labels, corpus.sent_ptr, reading.constraints, locate)
    return corpus


def shard_facts(corpus, n_labels):
    """On a worker: (sentences, tokens, seen transitions) of a shard."""
    return corpus.n_sentences, corpus.n_tokens, corpus.transitions_seen(n_labels)


def concatenate(parts):
    """Encoded corpora one after the other, as one (gold labels and real values kept)."""
    if len(parts) == 1:
        return parts[0]
    if not parts:
        empty = np.zeros(0, np.int32)
        return EncodedCorpus(np.zeros(1, np.int32), np.zeros(1, np.int32), empty, np.zeros(1, np.int32), empty, empty)

    def ptrs(name):
        out, base = [np.zeros(1, np.int64)], 0
        for p in parts:
            ptr = getattr(p, name)
            out.append(ptr[1:].astype(np.int64) + base)
            base += int(ptr[-1])
        return np.concatenate(out).astype(np.int32)

    def flat(name):
        arrays = [getattr(p, name) for p in parts]
        return None if arrays[0] is None else np.concatenate(arrays)

    return EncodedCorpus(ptrs("sent_ptr"), ptrs("attr_ptr"), flat("attrs"), ptrs("eattr_ptr"), flat("eattrs"),
                         flat("labels"), flat("values"))


def cut_files(paths, n_slots):
    """The pieces of the training files, about ``n_slots`` in all (a file is one piece at least)."""
    paths = [os.fsdecode(os.fspath(p)) for p in paths]
    total = sum(os.path.getsize(p) for p in paths)
    target = max(1, math.ceil(total / max(1, n_slots)))
    out = []
    for i, p in enumerate(paths):
        out += _pieces.cut(os.path.abspath(p), target, file=i, name=p)
    return out


def encode_on_cluster(cluster, stream, template, opt, *, log=None, source=None):
    """Fit, merge, broadcast and encode on ``cluster`` (an entered Cluster).

    Returns (the final FeatureSpace, KeptShards), or None after the workers found partial
    labels (which the union does not cover: the caller encodes on the driver)."""
    client = cluster.client
    paths = [os.fsdecode(os.fspath(p)) for p in stream.paths]
    columns = None
    for p in paths:
        columns = _pieces.first_token_line(p)[1]
        if columns is not None:
            break
    if columns is None:
        raise CrftkError("no training sentences", source)
    label_col = opt["label_col"]
    FeatureSpace._check_first(columns, label_col, template, source, None)
    kw = {k: stream.kw[k] for k in _READ_OPTIONS if k in stream.kw}
    reading = _Reading(template, label_col, opt["feature_set"], opt["unknown_label"] or None, columns, kw,
                       max_line_bytes(), opt["constraints"])
    slots = cluster.slots()
    pieces = cut_files(paths, len(slots))

    def on_slot(i):         # piece i is fitted and encoded on one worker (unless it is lost)
        return dict(workers=[slots[i % len(slots)]], allow_other_workers=True, pure=False)

    if log is not None:
        log(f"data-parallel: the workers read, fit and encode {plural(len(pieces), 'piece')} of the training "
            f"data ({plural(len(cluster.worker_addresses()), 'Dask worker')})")
    with cluster.guard("no model was saved"):
        level = [client.submit(fit_piece, p, reading, **on_slot(i)) for i, p in enumerate(pieces)]
        while True:
            groups = [level[i:i + UNION_FANIN] for i in range(0, len(level), UNION_FANIN)]
            last = len(groups) == 1
            level = [client.submit(merge, g, opt["min_freq"] if last else 1, pure=False) for g in groups]
            if last:
                break
        fitted = level[0]
        space, partial = fitted.result()
        if partial:
            return None
        if space is None:
            raise CrftkError("no training sentences", source)
        if log is not None:
            log(f"data-parallel: {plural(space.n_attrs, 'attribute')} merged on the workers; encoding there ...")
        shared = client.submit(root_space, fitted, pure=False)
        replicate(client, shared)           # the dictionary to every worker once, down a tree
        shards = [client.submit(encode_piece, p, reading, shared, **on_slot(i)) for i, p in enumerate(pieces)]
        facts = client.gather([client.submit(shard_facts, s, space.n_labels, pure=False) for s in shards])
        where = client.who_has(shards)
    kept = [(sorted(where[s.key])[0] if where.get(s.key) else None, s) for s, f in zip(shards, facts) if f[0]]
    seen = np.zeros(space.n_labels ** 2, dtype=bool)
    for _, _, s in facts:
        seen |= s
    corpus = KeptShards(kept, sum(f[0] for f in facts), sum(f[1] for f in facts), seen, shared)
    return space, corpus

