"""Streaming CoNLL files through a tagger in compiled batches (crftk._textio): read a batch,
tag it in a pool of threads while the next ones are read, write the finished ones in order."""

from collections import deque
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from crftk import _encode, _textio
from crftk.errors import CrftkError
from crftk.io.conll import DEFAULT_ENCODING, Layout, codec, read_batches, whole_documents


def format_batch(batch, pred, labels, sep):
    """The output bytes of a RawBatch: its rows, each with the labels ``pred[c, token]`` of
    ``labels[c]`` appended for every c (pred: [columns, tokens], or [tokens] for one column)."""
    pred = np.ascontiguousarray(pred, dtype=np.int32).reshape(len(labels), batch.n_tokens)
    return _textio.format_rows(batch.block, batch.tok_start, batch.tok_end, batch.sent_ptr, batch.items,
                               batch.pt_start, batch.pt_end, pred,
                               [list(x) for x in labels], sep.encode())


def format_scored(batch, pred, blocks, logp, marg, col, labels, names, sep, header, per_row=1):
    """The output bytes of a RawBatch with probabilities (crftk tag -v, -n): sentence s as
    ``blocks[s]`` blocks k, each a ``# prob P`` or ``# nbest k P`` line (``header`` "prob" or
    "nbest"; P = exp(logp[s, k])), its rows and a blank line; a row is the token's columns, then
    ``labels[pred[k, t]]``, then (``col`` given) ``marg[t, col[k, t]]``, then (``names`` given)
    ``names[j]/marg[t, j]`` for every j; numbers as format(x, ".6f"). With ``per_row`` R (a
    pipeline's stages), block k's row holds R labels, rows k*R..k*R+R-1 of pred (and col), each
    followed by its probability when ``col`` is given."""
    N = batch.n_tokens
    pred = np.ascontiguousarray(pred, dtype=np.int32).reshape(-1, N)
    K = pred.shape[0] // per_row
    col = np.zeros((0, N), dtype=np.int32) if col is None else np.ascontiguousarray(col, dtype=np.int32)
    return _textio.format_scored_rows(
        batch.block, batch.tok_start, batch.tok_end, batch.sent_ptr, batch.items, batch.pt_start, batch.pt_end,
        pred, np.ascontiguousarray(blocks, dtype=np.int32),
        np.ascontiguousarray(logp, dtype=np.float64).reshape(batch.n_sentences, K),
        np.ascontiguousarray(marg, dtype=np.float64).reshape(N, -1), col.reshape(-1, N), names is not None,
        list(labels), list(names or ()), sep.encode(), header == "nbest", per_row)


def gold_ids(batch, columns, labels):
    """(ids [len(columns), tokens], the string of every id per column) of a RawBatch's gold labels
    in ``columns``, numbered as ``labels[c]`` (a label not there gets an id past them)."""
    interners = [_encode.Interner(x) for x in labels]
    ids = _encode.column_ids(batch.block, batch.tok_start, batch.tok_end, columns, interners)
    return ids.T, [x.strings() for x in interners]


def tag_stream(tag_batch, inputs, out, allowed, n_threads, *, batch_tokens, progress, log, max_sentence_tokens,
               encoding=DEFAULT_ENCODING, by_document=False):
    """Read CoNLL files (in ``encoding``) in RawBatches, tag each with ``tag_batch(batch, sep)``
    -> (output bytes, extra) in a pool of ``n_threads`` threads while the next are read, and
    write the bytes in order; returns (sentences, tokens, the extras in order). ``by_document``:
    no document is split between batches (first mentions look back within it). The bytes are
    UTF-8: they go to ``out``'s buffer when ``out`` writes UTF-8, else through ``out`` as text
    (which encodes them in its own encoding)."""
    buffer = getattr(out, "buffer", None) if _writes_utf8(out) else None
    if buffer is not None:
        out.flush()
    extras = []

    def emit(result):
        data, extra = result
        if buffer is not None:
            buffer.write(data)
        else:
            out.write(data.decode("utf-8"))
        if extra is not None:
            extras.append(extra)

    n_sent = n_tok = 0
    workers = max(1, n_threads)
    pool = ThreadPoolExecutor(workers) if workers > 1 else None
    try:
        for path in inputs:
            layout = Layout()
            before = n_sent
            pending = deque()
            batches = read_batches(path, n_columns=allowed, layout=layout, batch_tokens=batch_tokens,
                                   max_sentence_tokens=max_sentence_tokens, encoding=encoding)
            for batch in whole_documents(batches) if by_document else batches:
                sep = layout.separator or "\t"
                if pool is None:
                    emit(tag_batch(batch, sep))
                else:
                    pending.append(pool.submit(tag_batch, batch, sep))
                    while len(pending) > workers:
                        emit(pending.popleft().result())
                n_sent += batch.n_sentences
                n_tok += batch.n_tokens
                if progress:
                    progress(n_sent, n_tok)
            while pending:
                emit(pending.popleft().result())
            if n_sent == before and log is not None:
                log(f"crftk: warning: {'standard input' if path == '-' else path} has no sentences to tag")
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    if buffer is not None:
        buffer.flush()
    return n_sent, n_tok, extras


def _writes_utf8(out):
    """Whether a text stream encodes as UTF-8 (a stream that says nothing is taken to)."""
    encoding = getattr(out, "encoding", None)
    if not isinstance(encoding, str):
        return True
    try:
        return codec(encoding) == "utf-8"
    except CrftkError:
        return False
