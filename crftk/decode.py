"""Tagging: stream sentences through a model in batches and write the labels."""

import math
import sys

import numpy as np

from crftk.conll import chunked, read_sentences
from crftk.errors import CrftkError
from crftk.train import resolve_threads


def best_labeling(space, corpus, lattices, w, n_threads, model_type="crf"):
    """Best labeling of every token, and its score per sentence (None for MEMMs)."""
    if model_type == "memm":
        from crftk.memm import viterbi as memm_viterbi
        return memm_viterbi(space, corpus, w), None
    return lattices.viterbi(w, n_threads)


class Tagger:
    """Decodes batches of sentences with a model."""

    def __init__(self, model, *, threads=0):
        self.model = model
        self.space = model.space
        self.weights = model.weights
        self.n_threads = resolve_threads(threads)
        self.labels = np.asarray(model.output_labels, dtype=object)

    @property
    def output_names(self):
        return sorted(set(self.labels.tolist())) if self.model.order == 2 else self.model.labels

    @property
    def output_index(self):
        """Column of each label id in the output marginals."""
        names = self.output_names
        return np.array([names.index(x) for x in self.labels.tolist()], dtype=np.int64)

    def output_marginals(self, lat):
        """Marginals of the output labels [N, K] and log Z; pairs summed into tags for order 2."""
        marg, logz = lat.marginals(self.weights, self.n_threads)
        if self.model.order == 2:
            from crftk.order2 import tag_probabilities
            marg, _ = tag_probabilities(marg, self.model.labels)
        return marg, logz

    def lattices(self, sentences):
        corpus = self.space.encode(sentences)
        return corpus, self.space.lattices(corpus)

    def viterbi(self, sentences):
        """Best label ids per sentence: list of int arrays."""
        corpus, lat = self.lattices(sentences)
        pred = self._best(corpus, lat)[0]
        return [pred[sl] for sl in corpus.sentence_slices()]

    def _best(self, corpus, lat):
        return best_labeling(self.space, corpus, lat, self.weights, self.n_threads, self.model.model_type)

    def tag(self, sentences):
        """Best label strings per sentence."""
        return [self.labels[p].tolist() for p in self.viterbi(sentences)]

    def write_batch(self, sentences, out, *, marginals=0, nbest=0):
        """Tag a batch and write it: input columns + predicted label (+ probabilities)."""
        corpus, lat = self.lattices(sentences)
        w, nt = self.weights, self.n_threads
        slices = corpus.sentence_slices()
        labels = self.labels
        if (nbest or marginals) and self.model.model_type == "memm":
            raise CrftkError("n-best lists and marginals are computed for CRFs only, not MEMMs")
        if nbest > 0:
            paths, scores, counts = lat.nbest(w, nbest, nt)
            marg, logz = self.output_marginals(lat)
            for i, (s, sl) in enumerate(zip(sentences, slices)):
                for k in range(counts[i]):
                    prob = math.exp(scores[i, k] - logz[i])
                    out.write(f"# nbest {k} {prob:.6f}\n")
                    path = paths[k, sl]
                    extra = [[lab] for lab in labels[path].tolist()]
                    if marginals:
                        outp = self.output_index[path]
                        for cols, p in zip(extra, marg[sl][np.arange(path.size), outp].tolist()):
                            cols.append(f"{p:.6f}")
                    _write_rows(out, s.rows, extra)
            return
        pred, vscore = self._best(corpus, lat)
        if not marginals:
            for s, sl in zip(sentences, slices):
                _write_rows(out, s.rows, [[lab] for lab in labels[pred[sl]].tolist()])
            return
        marg, logz = self.output_marginals(lat)
        names = self.output_names
        for i, (s, sl) in enumerate(zip(sentences, slices)):
            out.write(f"# prob {math.exp(vscore[i] - logz[i]):.6f}\n")
            p = self.output_index[pred[sl]]
            m = marg[sl]
            extra = []
            for t, y in enumerate(p.tolist()):
                cols = [names[y], f"{m[t, y]:.6f}"]
                if marginals > 1:
                    cols += [f"{names[j]}/{m[t, j]:.6f}" for j in range(len(names))]
                extra.append(cols)
            _write_rows(out, s.rows, extra)


def _write_rows(out, rows, extra):
    out.write("".join("\t".join(r) + "\t" + "\t".join(e) + "\n" for r, e in zip(rows, extra)))
    out.write("\n")


def tag_files(model, inputs, out, *, marginals=0, nbest=0, threads=0, batch_tokens=50_000,
              progress=None):
    """Tag CoNLL files (``-`` is stdin) batch by batch, writing to ``out``; returns counts."""
    tagger = Tagger(model, threads=threads)
    space = model.space
    allowed = {space.n_columns}
    if space.label_col == space.n_columns - 1:
        allowed.add(space.n_columns - 1)
    n_sent = n_tok = 0
    batches = chunked_by_document if space.template.anchored else chunked
    for path in inputs:
        stream = read_sentences(path, n_columns=allowed)
        for batch in batches(stream, max_tokens=batch_tokens):
            tagger.write_batch(batch, out, marginals=marginals, nbest=nbest)
            n_sent += len(batch)
            n_tok += sum(len(s) for s in batch)
            if progress:
                progress(n_sent, n_tok)
    return n_sent, n_tok


def chunked_by_document(sentences, max_tokens=50_000):
    """Batches of whole documents (first-mention features look back within a document)."""
    batch, doc, n = [], None, 0
    for s in sentences:
        if s.doc != doc and batch and n >= max_tokens:
            yield batch
            batch, n = [], 0
        batch.append(s)
        doc = s.doc
        n += len(s)
    if batch:
        yield batch


def tty_progress(stream=sys.stderr):
    """A progress reporter for tag_files that writes only when stream is a terminal."""
    if not stream.isatty():
        return None

    def report(n_sent, n_tok):
        stream.write(f"\rtagged {n_sent} sentences, {n_tok} tokens")
        stream.flush()
    return report
