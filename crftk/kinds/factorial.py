"""The "factorial" kind: a factorial CRF (crftk train with two or more --label-col; Sutton et al.
2004), one chain per label column. crftk tag appends one column per chain and, when the input
holds the gold label columns, scores each chain and all of them together. The structure, its
feature spaces and inference are in crftk.structures.factorial."""

import numpy as np

from crftk.commands.factorial import check_factorial
from crftk.errors import UsageError
from crftk.evaluation.columns import score_chains
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, input_batches
from crftk.io.stream import format_batch, gold_ids, tag_stream
from crftk.kinds.base import Job as KindJob
from crftk.model import Model
from crftk.params import resolve_threads
from crftk.structures import factorial as structure

NAME = "factorial"


class FactorialDecoder:
    """Decodes sentences with a factorial model (labels per chain, as strings)."""

    def __init__(self, model, *, threads=0, inference=None, tolerance=None, max_sweeps=None):
        self.model = model
        self.structure = model.structure
        self.weights = np.concatenate([p.weights for p in model.parts])
        trained = model.info.get("factorial", {})
        self.options = check_factorial(inference if inference is not None else trained.get("inference"),
                                       tolerance if tolerance is not None else trained.get("tolerance"),
                                       max_sweeps if max_sweeps is not None else trained.get("max_sweeps"))
        self.n_threads = resolve_threads(threads)
        self.labels = [np.asarray(x, dtype=object) for x in self.structure.output_labels]

    def bind(self, corpus):
        return self.structure.bind(corpus, self.n_threads, **self.options)

    def decode(self, sentences):
        """Per sentence, per chain, the predicted labels; and the encoded corpus."""
        corpus = self.structure.encode(sentences)
        pred, _ = self.bind(corpus).best(self.weights)
        out = []
        for sl in corpus.sentence_slices():
            out.append([self.labels[c][pred[c, sl]].tolist() for c in range(len(self.labels))])
        return out, corpus



class Job(KindJob):
    """crftk tag with a factorial model: the best joint labeling, by the inference it was trained
    with unless --inference, --tolerance or --max-sweeps say otherwise."""

    def __init__(self, model, name, options):
        self.model, self.name, self.options = model, name, dict(options)
        o = self.options
        if o["marginals"] or o["nbest"] or o["decode"] is not None or o["combine"] not in (None, "chosen") \
                or o["weights"]:
            raise UsageError("a factorial model tags with the best joint labeling only: drop -v, -n, "
                             "--decode, --combine and --weights")
        self.decoder = FactorialDecoder(model, threads=o["threads"], inference=o["inference"],
                                        tolerance=o["tolerance"], max_sweeps=o["max_sweeps"])
        self.by_document = any(s.template.anchored for s in self.decoder.structure.chains)

    def decoding_line(self):
        return decoding_line(self.decoder)

    def tag(self, out, inputs, **read):
        return tag_with_decoder(self.decoder, inputs, out, **read)

    def merge(self, gold, more):
        return [g + m for g, m in zip(gold[0], more[0])], [p + m for p, m in zip(gold[1], more[1])]

    def without(self, gold, first):
        return [g[len(f):] for g, f in zip(gold[0], first[0])], [p[len(f):] for p, f in zip(gold[1], first[1])]

    def report(self, log, gold):
        log_scores(gold[0], gold[1], self.decoder.structure.label_cols, log)


def tag_factorial(model, inputs, out, *, threads=0, inference=None, tolerance=None, max_sweeps=None,
                  batch_tokens=50_000, progress=None, log=None, max_sentence_tokens=MAX_SENTENCE_TOKENS,
                  encoding=DEFAULT_ENCODING):
    """Tag CoNLL files (in ``encoding``) with a factorial model, appending one label column per chain; returns
    (sentences, tokens, scores or None). When the input holds the gold label columns, each
    chain's accuracy and the joint accuracy are logged and returned."""
    decoder = FactorialDecoder(model, threads=threads, inference=inference, tolerance=tolerance,
                               max_sweeps=max_sweeps)
    if log is not None and decoding_line(decoder):
        log(decoding_line(decoder))
    n_sent, n_tok, (gold, pred) = tag_with_decoder(decoder, inputs, out, batch_tokens=batch_tokens,
                                                   progress=progress, log=log,
                                                   max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    return n_sent, n_tok, log_scores(gold, pred, decoder.structure.label_cols, log)


def decoding_line(decoder):
    """What tag logs about a decoder's inference before tagging (None: nothing, for exact Viterbi)."""
    if decoder.options["inference"] != "exact":
        return f"decoding with max-product, --inference {decoder.options['inference']}"
    return None


def tag_with_decoder(decoder, inputs, out, *, batch_tokens=50_000, progress=None, log=None,
                     max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
    """tag_factorial with a FactorialDecoder, without its log lines: (sentences, tokens, (gold, pred)),
    per chain the gold and predicted labels of each sentence that had the gold columns."""
    st = decoder.structure
    n = st.space.n_columns
    cols = st.label_cols
    allowed = {n}
    if sorted(cols) == list(range(n - len(cols), n)):
        allowed.add(n - len(cols))
    gold, pred = [[] for _ in cols], [[] for _ in cols]
    if st.raw_encodable():
        n_sent, n_tok, found = tag_stream(lambda batch, sep: _tag_raw(decoder, batch, sep), inputs, out, allowed,
                                          decoder.n_threads, batch_tokens=batch_tokens, progress=progress,
                                          log=log, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
        for g, p in found:
            for c in range(len(cols)):
                gold[c] += g[c]
                pred[c] += p[c]
        return n_sent, n_tok, (gold, pred)
    counts = [0, 0]
    anchored = any(s.template.anchored for s in st.chains)
    for batch, sep in input_batches(inputs, allowed, batch_tokens, by_document=anchored,
                                    max_sentence_tokens=max_sentence_tokens, progress=progress, log=log,
                                    counts=counts, encoding=encoding):
        sents = [it for it in batch if not isinstance(it, str)]
        tags = iter(decoder.decode(sents)[0] if sents else ())
        for it in batch:
            if isinstance(it, str):
                out.write(it + "\n")
                continue
            labels = next(tags)
            rows = it.rows
            out.write("".join(sep.join(r) + sep + sep.join(x) + "\n" for r, x in zip(rows, zip(*labels))) + "\n")
            if len(rows[0]) == n:
                for c, col in enumerate(cols):
                    gold[c].append([r[col] for r in rows])
                    pred[c].append(labels[c])
    return counts[0], counts[1], (gold, pred)


def log_scores(gold, pred, cols, log):
    """The ChainScores of the sentences that had gold labels (None when none had), logged."""
    if not gold[0]:
        return None
    scores = score_chains(gold, pred)
    if log is not None:
        log(f"against the input's label columns {cols}: {scores.line()}")
    return scores


def _tag_raw(decoder, batch, sep):
    """(output bytes, None or per chain the gold and predicted labels of each sentence) of a
    RawBatch (runs in a worker thread: the kernels release the GIL)."""
    st = decoder.structure
    pred, _ = st.bind(st.encode_raw(batch), 1, **decoder.options).best(decoder.weights)
    data = format_batch(batch, pred, decoder.labels, sep)
    if batch.n_columns != st.space.n_columns:
        return data, None
    ids, names = gold_ids(batch, st.label_cols, st.output_labels)
    cuts = batch.sent_ptr[1:-1]
    gold = [np.split(np.asarray(x, dtype=object)[ids[c]], cuts) for c, x in enumerate(names)]
    guess = [np.split(decoder.labels[c][pred[c]], cuts) for c in range(len(names))]
    return data, ([[x.tolist() for x in g] for g in gold], [[x.tolist() for x in g] for g in guess])


def summary(model, path=None):
    """``crftk info``'s summary: the structure, each chain's and each pair's sizes."""
    return structure.summary(model)


def dump(model, out, *, min_abs=0.0):
    """``crftk dump``: each chain's weights as a chain CRF's, then each pair factor's."""
    def dump_chain(space, weights):
        Model(space, weights).dump(out, min_abs=min_abs)

    structure.dump(model, out, min_abs, dump_chain=dump_chain)
