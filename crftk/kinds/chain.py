"""The "crf" kind: one chain CRF of any order, or an MEMM (crftk train; a model that crftk induce
grows is one too, with the same runtime). Its tagger decodes batches of sentences with the
model's structure; crftk tag streams files through it, on the compiled path when it can."""

import math

import numpy as np

from crftk import params
from crftk.errors import CrftkError, UsageError
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, input_batches
from crftk.io.stream import format_batch, tag_stream
from crftk.kinds.base import Job as KindJob
from crftk.kinds.base import dump, summary  # noqa: F401 (this kind's info and dump)
from crftk.params import resolve_threads

NAME = "crf"


class Tagger:
    """Decodes batches of sentences with a model."""

    #: whether it tags on the compiled path (declared by each class, not inherited: a subclass
    #: may decode otherwise than raw_inference does)
    compiled = True

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


    def spaces(self):
        """The feature spaces the tagger's models read its input with."""
        return [self.space]

    def input_widths(self):
        """The column counts its input may have (crftk.io.conll.Widths)."""
        return self.space.input_widths()

    def raw_inference(self, batch):
        """The inference over a RawBatch (one thread)."""
        return self.structure.bind(self.space.encode_raw(batch), 1)


class Job(KindJob):
    """crftk tag with one CRF: its Tagger, which takes no combination."""

    def __init__(self, model, name, options):
        super().__init__(model, name, options)
        decode = options["decode"]
        if decode in params.DECODE.choices:
            raise UsageError(f"--decode {decode} applies to pipelines (crftk compose); {name} "
                             "is not a pipeline")
        self.options["decode"] = decode or "chosen"
        self.tagger = self.make_tagger()
        self.by_document = any(s.template.anchored for s in self.tagger.spaces())

    def make_tagger(self):
        o = self.options
        return tagger(self.model, combine=o["combine"], decode=o["decode"], weights=o["weights"],
                      threads=o["threads"])

    def tag(self, out, inputs, **read):
        o = self.options
        return tag_with(self.tagger, inputs, out, marginals=o["marginals"], nbest=o["nbest"], **read) + (None,)


def tagger(model, *, combine="chosen", decode="chosen", weights=None, threads=0):
    """The Tagger of one CRF, which takes no combination."""
    if combine not in (None, "chosen") or decode not in (None, "chosen") or weights is not None:
        raise CrftkError("--combine, --decode and --weights are for bags (crftk bag); this model is one CRF")
    return Tagger(model, threads=threads)


def input_widths(tagger):
    """The column counts a tagger's input may have (crftk.io.conll.Widths): from the last column
    any of its models reads to the training width."""
    return tagger.input_widths()


def _rows_text(rows, extra, sep):
    return "".join(sep.join(r) + sep + sep.join(e) + "\n" for r, e in zip(rows, extra)) + "\n"


def tag_with(tagger, inputs, out, *, marginals=0, nbest=0, batch_tokens=50_000, progress=None, log=None,
             max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
    """crftk.commands.tag.tag_files with a Tagger (or a bag's); (sentences, tokens)."""
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
    """Whether tag_with can take the compiled path with this tagger (one CRF or a bag)."""
    from crftk.features.space import FeatureSpace
    if not type(tagger).__dict__.get("compiled"):
        return False
    return all(type(s) is FeatureSpace and s.raw_readable() for s in tagger.spaces())


def _tag_batch(tagger, batch, sep):
    """(output bytes, None) of a RawBatch (runs in a worker thread: the kernels release the GIL)."""
    pred, _ = tagger.raw_inference(batch).best(tagger.weights)
    return format_batch(batch, pred, [tagger.labels.tolist()], sep), None


def _tag_compiled(tagger, inputs, out, allowed, batch_tokens, progress, log, max_sentence_tokens, encoding):
    return tag_stream(lambda batch, sep: _tag_batch(tagger, batch, sep), inputs, out, allowed, tagger.n_threads,
                      batch_tokens=batch_tokens, progress=progress, log=log,
                      max_sentence_tokens=max_sentence_tokens, encoding=encoding)[:2]
