"""The "crf" kind: one chain CRF of any order, or an MEMM (crftk train; a model that crftk induce
grows is one too, with the same runtime). Its tagger decodes batches of sentences with the
model's structure; crftk tag streams files through it, on the compiled path when it can. Its
trainer (below) is what the training driver, crftk.training, asks of it."""

import dataclasses
import math
import time

import numpy as np

from crftk import params
from crftk.errors import CrftkError, UsageError, shown
from crftk.features.attributes import AttributeSpace
from crftk.features.space import FeatureSpace
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, Origins, describe_widths, input_batches
from crftk.io.crfsuite import AttributeSequences, read_crfsuite
from crftk.io.schemes import Detector, Recoder, check_chunk_tags, convert
from crftk.kinds.base import Job as KindJob
from crftk.kinds.base import refuse_factorial_training
from crftk.kinds.base import dump, summary  # noqa: F401 (this kind's info and dump)
from crftk.kinds import incremental
from crftk.kinds.partial import KnownGold, check_annotation, check_partial, init_allowed, partial_line
from crftk.io.partial import AnnotationError, cell_set, check_marker
from crftk.model import Model
from crftk.params import resolve_threads
from crftk.progress import plural, status
from crftk.structures import make_structure, structure_name
from crftk.structures.constraints import check_gold
from crftk.structures.pairs import current_tags, pair_labels, pair_sentences
from crftk.structures.forced import infeasible_sentence, name_mask, recoded_mask

NAME = "crf"


def recoder_of(model):
    """The Recoder converting a model's predictions to its corpus's scheme, or None (a model
    trained on its labels as they are)."""
    scheme = model.info.get("train_scheme", "none")
    if scheme == "none":
        return None
    return Recoder(model.output_labels, scheme, model.info["corpus_scheme"])


def scheme_record(info):
    """The schemes a training record names (train_scheme, corpus_scheme), if any: what a file
    made of trained models (a bag) records of them."""
    return {k: info[k] for k in ("train_scheme", "corpus_scheme") if k in info}


class SchemeConversion:
    """Sentences with the label column converted to a training scheme (--train-scheme); the
    scheme of the training corpus is detected on the way (``detector``)."""

    def __init__(self, scheme, label_col, marker=None):
        self.scheme, self.label_col, self.marker = scheme, label_col, marker
        self.detector = Detector()

    def sentences(self, sentences, detect=True):
        c = self.label_col
        for s in sentences:
            tags = [row[c] for row in s.rows]
            check_chunk_tags(s, tags, self.marker,
                             f"--train-scheme {self.scheme} converts whole chunks, and label {{label}} is partial "
                             "(unknown or a set): train partial labels without --train-scheme",
                             f"--train-scheme {self.scheme} converts chunk tags (B/I/E/S-TYPE or O); label {{label}} "
                             "is not one: train this column without --train-scheme")
            if detect:
                self.detector.add(tags)
            rows = [list(row) for row in s.rows]
            for row, tag in zip(rows, convert(tags, self.scheme)):
                row[c] = tag
            yield dataclasses.replace(s, rows=rows)


class Tagger:
    """Decodes batches of sentences with a model."""

    #: whether it tags on the compiled path (declared by each class, not inherited: a subclass
    #: may decode otherwise than raw_inference does)
    compiled = True

    def __init__(self, model, *, threads=0, force=None):
        self.model = model
        self.space = model.space
        self.weights = model.weights
        self.n_threads = resolve_threads(threads)
        self.structure = model.structure
        self.labels = np.asarray(model.output_labels, dtype=object)
        self.recoder = recoder_of(model)
        #: --force-col: (column, unknown marker) whose cells constrain decoding, or None
        self.force = force
        if force is not None:
            refuse_memm_forcing(model)

    def output_tags(self, pred, sent_ptr):
        """The output labels (strings) of predicted label ids: in the corpus's scheme when the
        model was trained in another (--train-scheme)."""
        if self.recoder is None:
            return self.labels[pred]
        return self.recoder.tags(pred, sent_ptr)

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
        return self.structure.bind(self.structure.encode(sentences), self.n_threads)

    def viterbi(self, sentences):
        """Best label ids per sentence: list of int arrays."""
        inf = self.inference(sentences)
        pred = inf.best(self.weights)[0]
        return [pred[sl] for sl in inf.corpus.sentence_slices()]

    def tag(self, sentences, constraints=None):
        """Best label strings per sentence; ``constraints``: (annotations, locate) as
        allowed_states takes them (None: --force-col's, if given)."""
        inf = self.inference(sentences)
        names = self.output_tags(inf.best(self.weights, **self.constrained(inf, sentences, constraints))[0],
                                 inf.corpus.sent_ptr)
        return [names[sl].tolist() for sl in inf.corpus.sentence_slices()]

    # -- constrained decoding (--force-col, predict(constraints=...)) ----------------------------
    def constrained(self, inf, sentences, constraints=None):
        """The keyword arguments that constrain the decoding of a batch: {"allowed": mask} when
        ``constraints`` are given or --force-col reads them from the sentences, else {} (so
        unconstrained decoding calls the kernels as ever)."""
        if constraints is None and self.force is not None:
            constraints = forced_cells(sentences, *self.force)
        if constraints is None:
            return {}
        refuse_memm_forcing(self.model)       # predict(constraints=...) reaches here without --force-col
        return {"allowed": self.allowed_states(inf, *constraints)}

    def allowed_states(self, inf, annotations, locate):
        """uint8 [tokens, kernel states] of one annotation per token of ``inf``'s corpus (a label,
        None or a set of labels, crftk.structures.forced; labels in the corpus's scheme, converted
        when the model was trained in another); ``locate(token)`` gives its (file, line). A label
        the model lacks, or a sentence that no labeling avoiding the model's pinned transitions
        (--constraints) fits, is an error there."""
        sent_ptr = inf.corpus.sent_ptr
        tags = list(self.structure.output_names)       # the tags a structure's mask of states is built from
        if self.recoder is None:
            mask = name_mask(annotations, tags, locate)
        else:       # over the labels the recoder reads (output_labels: a pair's current tag), then the tags
            by_label = recoded_mask(name_mask(annotations, self.recoder.names, locate), self.recoder, sent_ptr)
            column = {lab: j for j, lab in reversed(list(enumerate(self.structure.output_labels)))}
            mask = by_label[:, [column[tag] for tag in tags]]
        states = np.ascontiguousarray(self.structure.state_allowed(inf.corpus, mask), dtype=np.uint8)
        bad = infeasible_sentence(self.weights, self.space.layout(), states, sent_ptr)
        if bad is not None:
            scheme = (self.model.info.get("options") or {}).get("constraints", "none")
            rules = f"the model's {scheme} constraints" if scheme != "none" else "the model's pinned transitions"
            raise CrftkError(f"the forced labels of the sentence starting here admit no labeling under {rules}",
                             *locate(int(sent_ptr[bad])))
        return states

    def marginals(self, inf, **allowed):
        """Marginals of the output labels [tokens, output_names] and log Z per sentence (``allowed``:
        the mask of constrained decoding)."""
        return inf.marginals(self.weights, **allowed)

    def nbest(self, inf, k, **allowed):
        """(paths [k, tokens], scores [sentences, k], counts) of the k best labelings (``allowed``:
        the mask of constrained decoding)."""
        # list Viterbi keeps k entries per label and token of the longest sentence, per thread
        max_len = int(np.diff(inf.corpus.sent_ptr).max()) if inf.corpus.n_sentences else 0
        need = max_len * self.space.n_labels * k * 16 * self.n_threads
        if need > params.NBEST_MEMORY:
            raise CrftkError(f"{k}-best lists of a sentence of {max_len} tokens and "
                             f"{self.space.n_labels} labels would take {need / 2**30:.1f} GiB; ask for fewer")
        return inf.nbest(self.weights, k, **allowed)

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
        allowed = self.constrained(inf, sentences)
        if nbest > 0:
            paths, scores, counts = self.nbest(inf, nbest, **allowed)
            marg, logz = inf.marginals(w, **allowed)
            for i, (s, sl) in enumerate(zip(sentences, slices)):
                parts = []
                for k in range(counts[i]):
                    prob = math.exp(scores[i, k] - logz[i])
                    parts.append(f"# nbest {k} {prob:.6f}\n")
                    path = paths[k, sl]
                    extra = [[lab] for lab in self.output_tags(path, [0, path.size]).tolist()]
                    if marginals:
                        outp = self.output_index[path]
                        for cols, p in zip(extra, marg[sl][np.arange(path.size), outp].tolist()):
                            cols.append(f"{p:.6f}")
                    parts.append(_rows_text(s.rows, extra, sep))
                yield "".join(parts)
            return
        pred, vscore = inf.best(w, **allowed)
        tags = self.output_tags(pred, inf.corpus.sent_ptr)
        if not marginals:
            for s, sl in zip(sentences, slices):
                yield _rows_text(s.rows, [[lab] for lab in tags[sl].tolist()], sep)
            return
        marg, logz = inf.marginals(w, **allowed)
        names = self.output_names
        for i, (s, sl) in enumerate(zip(sentences, slices)):
            p = self.output_index[pred[sl]]
            m = marg[sl]
            extra = []
            # a model trained in another scheme: the label in the corpus's scheme, with the
            # marginal of the training label it was converted from (and -vv the training labels')
            for t, (y, tag) in enumerate(zip(p.tolist(), tags[sl].tolist())):
                cols = [tag, f"{m[t, y]:.6f}"]
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


def forced_cells(sentences, col, marker):
    """(annotations, locate) of --force-col: each token's cell in column ``col`` read as an
    annotation (crftk.io.partial.cell_set), and the (file, line) of a token."""
    cells, where = [], []
    for s in sentences:
        for t, row in enumerate(s.rows):
            c = col + len(row) if col < 0 else col
            line = s.line + t if s.line else None
            if not 0 <= c < len(row):
                raise CrftkError(f"--force-col {col} is not a column of this line ({len(row)} columns)", s.source,
                                 line)
            try:        # no marker (--unknown-label ''): every cell is one label, | and ? included
                cells.append(cell_set(row[c], marker) if marker else (row[c],))
            except CrftkError as e:
                raise CrftkError(e.message, s.source, line) from None
            where.append((s.source, line))
    return cells, where.__getitem__


def refuse_memm_forcing(model):
    """Constrained decoding masks a CRF's lattice: an MEMM normalizes per token and has none."""
    if model.model_type == "memm":
        raise CrftkError("constrained decoding (--force-col, predict(constraints=...)) masks a CRF's lattice; "
                         "an MEMM decodes by its local probabilities and takes no constraints")


class Job(KindJob):
    """crftk tag with one CRF: its Tagger, which takes no combination."""

    force_refusal = None

    def __init__(self, model, name, options):
        super().__init__(model, name, options)
        decode = options["decode"]
        if decode in params.DECODE.choices:
            raise UsageError(f"--decode {decode} applies to pipelines (crftk compose); {name} "
                             "is not a pipeline")
        self.options["decode"] = decode or "chosen"
        self.tagger = self.make_tagger()
        self.by_document = any(by_document(s.template) for s in self.tagger.spaces())
        self.whole_files = any(whole_files(s.template) for s in self.tagger.spaces())

    def make_tagger(self):
        o = self.options
        return tagger(self.model, combine=o["combine"], decode=o["decode"], weights=o["weights"],
                      threads=o["threads"], force=self.force())

    def force(self):
        """(column, unknown marker) of --force-col, or None."""
        o = self.options
        if o.get("force_col") is None:
            return None
        marker = o.get("unknown_label")        # None: the caller left it unset; "": no marker, as in training
        return (params.FORCE_COL.check(o["force_col"]),
                check_marker(params.UNKNOWN_LABEL.check(params.UNKNOWN_LABEL.default if marker is None else marker)))

    def tag(self, out, inputs, **read):
        o = self.options
        return tag_with(self.tagger, inputs, out, marginals=o["marginals"], nbest=o["nbest"], **read) + (None,)


def tagger(model, *, combine="chosen", decode="chosen", weights=None, threads=0, force=None):
    """The Tagger of one CRF, which takes no combination."""
    if combine not in (None, "chosen") or decode not in (None, "chosen") or weights is not None:
        raise CrftkError("--combine, --decode and --weights are for bags (crftk bag); this model is one CRF")
    return Tagger(model, threads=threads, force=force)


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
    if tagger.force is None and _compiled_path(tagger) and (not (marginals or nbest) or _scores_compiled(tagger)):
        return _tag_compiled(tagger, inputs, out, allowed, batch_tokens, progress, log, max_sentence_tokens,
                             encoding, marginals, nbest)
    counts = [0, 0]
    # every model the tagger runs (a bag's members, both stages of a two-stage model) decides
    templates = [s.template for s in tagger.spaces()]
    batches = input_batches(inputs, allowed, batch_tokens, by_document=any(by_document(t) for t in templates),
                            whole_files=any(whole_files(t) for t in templates), max_sentence_tokens=max_sentence_tokens,
                            progress=progress, log=log, counts=counts, encoding=encoding)
    for batch, sep in batches:
        tagger.write_batch(batch, out, marginals=marginals, nbest=nbest, sep=sep)
    return tuple(counts)


def by_document(template):
    """Whether a template's macros look across sentences of a document (first mentions, %doc)."""
    return template.anchored or template.aggregates


def whole_files(template):
    """Whether a template reads %corpus aggregates: then each input file is tagged as one batch."""
    return any(m.kind == "corpus" for m in template.macros)


def tag_attributes(tagger, inputs, out, *, reference=False, batch_tokens=50_000,
                   max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
    """Tag CRFsuite data files with a model over attributes: a label a line (``reference``: the
    input's label, a tab, the predicted one), a blank line after each sequence (as crfsuite tag);
    (sequences, tokens)."""
    counts = [0, 0]
    for path in inputs:
        data = read_crfsuite(path, encoding=encoding, max_sequence_tokens=max_sentence_tokens)
        p = data.sent_ptr
        k0 = 0
        while k0 < data.n_sequences:
            k1 = max(k0 + 1, int(np.searchsorted(p, p[k0] + batch_tokens, side="right")) - 1)
            batch = data.slice(k0, min(k1, data.n_sequences))
            for k, labels in enumerate(tagger.tag(batch)):
                if reference:
                    gold = batch.labels[batch.sent_ptr[k]:batch.sent_ptr[k + 1]]
                    labels = [f"{g}\t{y}" for g, y in zip(gold, labels)]
                out.write("\n".join(labels) + "\n\n")
            counts[0] += batch.n_sequences
            counts[1] += batch.n_tokens
            k0 = min(k1, data.n_sequences)
    return tuple(counts)


# The compiled path: reading and writing in crftk._textio, encoding in crftk._encode, batches decoded by a pool
# of threads while the next ones are read and the finished ones written; with -v and -n too
# (the kernels' marginals and n-best lists, rows written by _textio.format_scored_rows). The
# output is byte for byte that of write_batch.

def _compiled_path(tagger):
    """Whether tag_with can take the compiled path with this tagger (one CRF or a bag)."""
    from crftk.features.space import FeatureSpace
    if not type(tagger).__dict__.get("compiled"):
        return False
    return all(type(s) is FeatureSpace and s.raw_readable(whole_documents=True) for s in tagger.spaces())


def _scores_compiled(tagger):
    """Whether -v and -n take the compiled path with this tagger: an MEMM's inference refuses
    marginals, in the words of the Python path, which tags it."""
    return tagger.model.model_type != "memm"


def _tag_batch(tagger, batch, sep, marginals=0, nbest=0):
    """(output bytes, None) of a RawBatch (runs in a worker thread: the kernels release the GIL)."""
    from crftk.io.stream import format_batch    # the compiled tag path's (a training process needs none)
    if not batch.n_sentences:         # pass-through lines alone (a semi-Markov lattice of none is an error)
        return format_batch(batch, np.zeros(0, dtype=np.int32), [[]], sep), None
    inf = tagger.raw_inference(batch)
    if marginals or nbest:
        return _scored_batch(tagger, inf, batch, sep, marginals, nbest), None
    pred, _ = inf.best(tagger.weights)
    if tagger.recoder is not None:
        return format_batch(batch, tagger.recoder(pred, inf.corpus.sent_ptr), [tagger.recoder.names], sep), None
    return format_batch(batch, pred, [tagger.labels.tolist()], sep), None


def _scored_batch(tagger, inf, batch, sep, marginals, nbest):
    """The output bytes of a RawBatch with -v (``marginals`` 1 or 2) or -n (``nbest`` > 0), as
    Tagger._blocks writes them: the same kernels and arithmetic, the rows written in compiled code."""
    from crftk.io.stream import format_scored
    w = tagger.weights
    S, N = batch.n_sentences, batch.n_tokens
    if nbest:
        paths, scores, blocks = tagger.nbest(inf, nbest)
        marg, logz = inf.marginals(w)
        logp = np.asarray(scores, dtype=np.float64).reshape(S, nbest) - np.asarray(logz, dtype=np.float64)[:, None]
    else:
        pred, vscore = inf.best(w)
        marg, logz = inf.marginals(w)
        paths = np.asarray(pred)[None, :]
        logp = (np.asarray(vscore, dtype=np.float64) - np.asarray(logz, dtype=np.float64))[:, None]
        blocks = np.ones(S, dtype=np.int32)
    # the rows past a sentence's count of labelings (-1) are never written: any label id does there
    paths = np.maximum(np.asarray(paths, dtype=np.int64).reshape(-1, N), 0)
    with_prob = bool(marginals) or not nbest
    col = tagger.output_index[paths] if with_prob else None
    if tagger.recoder is None:
        ids, labels = paths, tagger.labels.tolist()
    else:
        ids = np.stack([tagger.recoder(row, inf.corpus.sent_ptr) for row in paths])
        labels = tagger.recoder.names
    names = tagger.output_names if marginals > 1 and not nbest else None
    return format_scored(batch, ids, blocks, logp, np.asarray(marg).reshape(N, -1), col, labels, names, sep,
                         "nbest" if nbest else "prob")


def _tag_compiled(tagger, inputs, out, allowed, batch_tokens, progress, log, max_sentence_tokens, encoding,
                  marginals=0, nbest=0):
    from crftk.io.stream import tag_stream
    return tag_stream(lambda batch, sep: _tag_batch(tagger, batch, sep, marginals, nbest), inputs, out, allowed,
                      tagger.n_threads,
                      batch_tokens=batch_tokens, progress=progress, log=log,
                      max_sentence_tokens=max_sentence_tokens, encoding=encoding,
                      by_document=any(by_document(s.template) for s in tagger.spaces()))[:2]


# -- training --------------------------------------------------------------------------------

class DevScorer:
    """Scores a development set with the current weights (chunk F1 and accuracy).

    ``sentences`` are encoded for the structure (label pairs for a pair
    structure); the gold labels are read from ``gold_sentences`` (default: the
    same sentences), in the labels decoding outputs.
    """

    def __init__(self, structure, sentences, n_threads, gold_sentences=None, recoder=None, marker=None):
        space = structure.space
        self.structure, self.recoder = structure, recoder
        self.inference = structure.bind(structure.encode(sentences), n_threads)
        self.labels = np.asarray(structure.output_labels, dtype=object)
        self.slices = self.inference.corpus.sentence_slices()
        gold_sentences = sentences if gold_sentences is None else gold_sentences
        if isinstance(gold_sentences, AttributeSequences):
            self.gold = gold_sentences.gold()
        else:
            self.gold = [[row[space.label_col] for row in s.rows] for s in gold_sentences]
        # tokens whose gold label is unknown or a set (crftk.io.partial) are not scored
        self.known = KnownGold(self.gold, marker)
        self.gold, self.skipped = self.known.gold, self.known.skipped
        if self.skipped:
            if not any(self.gold):      # every score would be 0 and --keep best would keep iteration 1
                raise CrftkError("no token of the development set has a known gold label (every one is "
                                 "unknown or a set): there is nothing to score it on")

    def unseen_labels(self):
        """(label, tokens) of the gold labels the model does not have, most frequent first."""
        known = set(self.structure.output_labels if self.recoder is None else self.recoder.names)
        counts = {}
        for sent in self.gold:
            for lab in sent:
                if lab not in known:
                    counts[lab] = counts.get(lab, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def warnings(self):
        """What training warns about the development set: gold labels the model cannot predict."""
        unseen = self.unseen_labels()
        skipped = [f"dev: {plural(self.skipped, 'token')} with unknown gold labels not scored"] if self.skipped else []
        if not unseen:
            return skipped
        listed = ", ".join(f"{lab} ({plural(n, 'token')})" for lab, n in unseen[:10])
        return [f"crftk: warning: the development set has {plural(len(unseen), 'label')} never seen in training, "
                f"which the model cannot predict: {listed}" + (", ..." if len(unseen) > 10 else "")] + skipped

    def __call__(self, w):
        pred, _ = self.inference.best(w)
        if self.recoder is None:
            names = self.labels[pred]
        else:       # scored in the corpus's scheme, as the model's outputs will be
            names = self.recoder.tags(pred, self.inference.corpus.sent_ptr)
        return self.known.score([names[sl].tolist() for sl in self.slices])

    # -- what the training driver logs and records of a score ---------------
    @staticmethod
    def target(score):
        """What --keep best maximizes."""
        return score.overall.f1

    @staticmethod
    def fields(score):
        return {"dev_f1": score.overall.f1, "dev_accuracy": score.token_accuracy}

    @staticmethod
    def text(score):
        return f"  dev F1 {score.overall.f1:6.2f} acc {100 * score.token_accuracy:6.2f}"

    @staticmethod
    def kept_line(best):
        return f"keeping the weights of iteration {best['iteration']} (best dev F1 {best['score']:.2f})"

    @staticmethod
    def last_line(best, chosen):
        return (f"keeping the weights of the last iteration, {chosen} (--keep last; best dev F1 "
                f"{best['score']:.2f} at iteration {best['iteration']})")


def unseen_transitions(structure, corpus):
    """Mask of the transition parameters (previous label -> label) that no two adjacent tokens of
    the corpus's gold labels show (a corpus kept on a cluster's workers brings them: ``seen``)."""
    seen = getattr(corpus, "seen", None)
    if seen is None:
        seen = corpus.transitions_seen(structure.space.n_labels)
    mask = np.zeros(structure.n_params, dtype=bool)
    mask[structure.layout.trans] = ~seen
    return mask


class ChainJob:
    """A chain's training data, encoded: its structure, corpus and what prepare learned."""

    def __init__(self, structure, corpus, origins, template, order2, conversion=None, marker=None):
        self.structure, self.corpus, self.origins = structure, corpus, origins
        self.template, self.order2 = template, order2
        self.conversion = conversion   # a SchemeConversion of the labels (--train-scheme), or None
        self.marker = marker           # the unknown marker of partial labels (crftk.io.partial), or None
        self.inference = None          # bound by the driver (or on a cluster's workers)
        self.init_weights = None       # an --init model's weights placed in its grown space, or None


def _read_line(corpus, space, more, t0, n_threads):
    """The log line of the encoded training data; ``more`` is what the kind of data adds after the
    state features."""
    return (f"read {plural(corpus.n_sentences, 'sentence')}, {plural(corpus.n_tokens, 'token')}; "
            f"{plural(space.n_labels, 'label')}, {plural(space.n_attrs, 'attribute')}, "
            f"{plural(space.n_features, 'state feature')}{more}; {plural(space.n_params, 'parameter')} "
            f"({time.perf_counter() - t0:.2f}s, {plural(n_threads, 'thread')})")


def check_template(template, log):
    """Refuse the lines a chain's template cannot have (S and P lines); warn of one without U lines."""
    template.refuse_segments()
    if template.pairs or template.pair_plain:
        line = template.pairs[0].lineno if template.pairs else template.pair_plain
        raise CrftkError("a P line is a pair factor of a factorial CRF and needs a second chain: give two "
                         "or more --label-col (one per chain)", template.path, line)
    if not template.unigrams:
        log("crftk: warning: the template has no U lines: the model has no state features and learns "
            + ("transitions only" if template.bigrams or template.label_bigram
               else "start and end weights only"))


def transitions_text(template, space):
    """What the read line says of a chain's transitions."""
    transitions = "no transitions" if not template.label_bigram else "label bigram"
    if space.n_edge_attrs:
        transitions += f" + {plural(space.n_edge_attrs, 'observation-conditioned transition attribute')}"
    return transitions


class ChainTrainer:
    """The training of one chain of labels (crftk train with one --label-col)."""

    bind_options = {}
    label_cols = None
    history = params.HISTORY        # L-BFGS memory when --history is not given

    @staticmethod
    def fit_options(opt):
        """The keyword arguments of crftk.training.fit that train this kind again with ``opt``."""
        return opt

    @classmethod
    def refusing(cls, inference=None, tolerance=None, max_sweeps=None, warm_start=False):
        refuse_factorial_training(inference, tolerance, max_sweeps, warm_start)
        return cls()

    def check(self, opt):
        """crftk.training.check_options holds the chain's rules."""

    @staticmethod
    def check_init(init):
        """--init continues the training of one first-order CRF."""
        hint = "tag with it (crftk tag), or train from a template"
        if init.kind == "factorial":
            cols = " ".join(f"--label-col {c}" for c in init.structure.label_cols)
            hint = f"continue it with its label columns ({cols}), tag with it, or train from a template"
        init.require_kind("crf", "--init", hint=hint)
        if init.order != 1 or init.model_type != "crf":
            raise CrftkError("--init takes a first-order CRF model", init.source)

    @staticmethod
    def init_template(init):
        return init.space.template

    @staticmethod
    def _check_template(template, opt, init, log):
        if init is None:
            check_template(template, log)
        if opt["model_type"] == "memm" and template.bigrams:
            raise CrftkError("MEMMs do not support transition templates with macros (B lines with %x); use a "
                             "plain B line", template.path, template.bigrams[0].lineno)

    def prepare_on_cluster(self, cluster, sentences, template, opt, *, log, source, n_threads):
        """:meth:`prepare` with the training files read, fitted and encoded by the workers of
        ``cluster`` (a DataParallel; crftk.distributed.encoding), the shards left there; None,
        after a log line saying why, where that cannot be (the driver then encodes)."""
        from crftk.distributed.encoding import encode_on_cluster, refusal
        t0 = time.perf_counter()
        if type(self).prepare is not ChainTrainer.prepare:
            why = "this kind of model is encoded on the driver"
        elif isinstance(sentences, AttributeSequences):
            why = "attribute data (feature dicts, a CRFsuite file) is encoded on the driver"
        else:
            why = refusal(sentences, template, opt)
        done = None
        if why is None:
            self._check_template(template, opt, None, log)
            done = encode_on_cluster(cluster.started(), sentences, template, opt, log=log, source=source)
            if done is None:
                why = "the training data has partial labels"
        if done is None:
            log(f"data-parallel: the training data is read and encoded here ({why})")
            return None
        space, corpus = done
        structure = make_structure(structure_name(opt["order"], opt["model_type"]), space)
        log(_read_line(corpus, space, f", {transitions_text(template, space)}", t0, n_threads))
        return ChainJob(structure, corpus, None, template, False)

    def prepare(self, sentences, template, opt, *, init, log, source, n_threads, init_space="keep"):
        """Check the template, encode the training data (with an --init model's feature space, grown
        by the data's with ``init_space`` "grow" (crftk.kinds.incremental), or a new one fit to it)
        and log what was read."""
        t0 = time.perf_counter()
        if isinstance(sentences, AttributeSequences):
            job = self._prepare_attributes(sentences, opt, init=init, log=log, source=source, t0=t0,
                                           n_threads=n_threads)
            if init is not None and init_space == "grow":
                log("--init-space grow: feature dicts and CRFsuite data train in the --init model's space "
                    "(as --init-space keep): their attribute space does not grow")
            return job
        self._check_template(template, opt, init, log)
        order2 = opt["order"] == 2
        marker = opt["unknown_label"] or None
        origins = Origins()
        stream = origins.record(sentences)
        conversion = growth = None
        if init is not None and init.info.get("train_scheme", "none") != opt["train_scheme"]:
            raise CrftkError(f"the --init model was trained with --train-scheme {init.info.get('train_scheme', 'none')}: "
                             f"continue it with the same --train-scheme", init.source)
        if opt["train_scheme"] != "none":
            conversion = SchemeConversion(opt["train_scheme"], opt["label_col"], marker)
            stream = conversion.sentences(stream)
        if order2:
            stream = pair_sentences(stream, opt["label_col"], marker)
        status(log, f"reading and encoding the training data{' from ' + str(source) if source else ''} ...")
        if init is not None:
            space = init.space
            if isinstance(space, AttributeSpace):
                raise CrftkError("the --init model was trained on attribute data (feature dicts or a CRFsuite "
                                 "file): continue it with that kind of data", source)
            sents = list(stream)
            self._check_init_columns(space, sents, origins)
            if init_space == "grow" and sents:
                growth = self._grow(init, sents, opt, order2, marker, source)
            if growth is not None and growth.space is not None:
                space = growth.space
            corpus = space.encode(sents)
            if corpus.labels is None:
                raise CrftkError("the training data has no gold label column", source)
            unknown = np.flatnonzero(corpus.labels < 0)
            if unknown.size and marker:
                corpus.allowed = init_allowed(corpus, unknown, sents, space, marker, origins)
                if corpus.allowed.all():    # the likelihood is 0 whatever the weights: c2 would only erase them
                    raise CrftkError("every token of the training data is unknown (any label of the --init "
                                     "model): there is nothing to learn from", source)
            elif unknown.size:
                k, t = corpus.position(unknown[0])
                label = sents[k].rows[t][space.label_col]
                raise CrftkError(f"label {shown(label)} is not one of the --init model's "
                                 f"{plural(space.n_labels, 'label')}", *origins.locate(k, t))
            del sents
        else:
            try:
                space, corpus = FeatureSpace.fit(stream, template, label_col=opt["label_col"],
                                                 min_freq=opt["min_freq"], feature_set=opt["feature_set"],
                                                 path=source, unknown_label=marker, pairs=order2,
                                                 extra_labels=(opt["outside_label"],) if opt["entity_ratio"] else ())
            except AnnotationError as e:
                raise CrftkError(e.message, *origins.locate(*e.where)) from None
        structure = make_structure(structure_name(opt["order"], opt["model_type"]), space)
        transitions = transitions_text(template, space)
        if corpus.allowed is not None:
            check_partial(opt, corpus, origins)
        if growth is not None:          # after every refusal: a failure prints its one line alone
            log(growth.line)
        log(_read_line(corpus, space, f", {transitions}", t0, n_threads))
        if corpus.allowed is not None:
            log(partial_line(corpus, order2))
        if opt["entity_ratio"]:
            outside = [j for j, tag in enumerate(structure.output_labels) if tag == opt["outside_label"]]
            if not np.isin(corpus.labels, outside).any():
                log(f"crftk: warning: no token has --outside-label {shown(opt['outside_label'])} as its known "
                    f"label (it is added as a label, as when every token outside entities is unknown): "
                    f"check its spelling")
        if conversion is not None:
            log(f"labels: {conversion.detector.scheme} in {source or 'the training data'}, trained as "
                f"{conversion.scheme} ({plural(len(structure.output_labels), 'label')})")
        job = ChainJob(structure, corpus, origins, template, order2, conversion, marker)
        if growth is not None:
            job.init_weights = growth.weights
        return job

    @staticmethod
    def _check_init_columns(space, sents, origins):
        """Refuse, at the first sentence's line, training data whose columns the --init model does
        not read or that lack its gold label column (before growing reads that column)."""
        if not sents:
            return
        n, widths = len(sents[0].rows[0]), space.input_widths()
        if n not in widths:
            raise CrftkError(f"the --init model expects {describe_widths(widths)}, found {n}: {widths.needs}",
                             *origins.locate(0))
        if not space.input_columns(n):
            raise CrftkError(f"the training data has no gold label column (the --init model's is column "
                             f"{space.label_col} of {space.n_columns}; this data has {n})", *origins.locate(0))

    @staticmethod
    def _grow(init, sents, opt, order2, marker, source):
        """The Growth of the --init model's space by the training sentences; one without a space
        when the data cannot grow it (its line says why), None when the data adds nothing."""
        if init.space.encode(sents[:1]).labels is None:    # refused before its rows are read, as keep does
            raise CrftkError("the training data has no gold label column", source)
        why = incremental.why_kept(init.space.template, opt, order2)
        if why is None and incremental.has_partial_labels(sents, init.space.label_col, marker):
            why = "partial labels are resolved against the --init model's labels"
        if why is not None:
            return incremental.kept(why)
        return incremental.grow(init, sents, opt["min_freq"], source)

    @staticmethod
    def _prepare_attributes(data, opt, *, init, log, source, t0, n_threads):
        """prepare for attribute data (crftk.io.crfsuite.AttributeSequences): the features are the
        data's attributes, no template's."""
        order2 = opt["order"] == 2
        if data.labels is None:
            raise CrftkError("the training data has no labels", source)
        if opt["train_scheme"] != "none":
            raise CrftkError(f"--train-scheme {opt['train_scheme']} converts a CoNLL label column; attribute data "
                             "(feature dicts, a CRFsuite file) is trained on its labels as they are", source)
        if order2:
            data = pair_labels(data)
        status(log, f"encoding the training data{' from ' + str(source) if source else ''} ...")
        if init is not None:
            space = init.space
            if not isinstance(space, AttributeSpace):
                raise CrftkError("the --init model was trained from a template: continue it with CoNLL data",
                                 source)
            corpus = space.encode(data)
            unknown = np.flatnonzero(corpus.labels < 0)
            if unknown.size:
                raise data.error(f"label {shown(data.labels[unknown[0]])} is not one of the --init model's "
                                 f"{plural(space.n_labels, 'label')}", unknown[0])
        else:
            space, corpus = AttributeSpace.fit(data, min_freq=opt["min_freq"], feature_set=opt["feature_set"],
                                                count=opt["feature_count"])
        structure = make_structure(structure_name(opt["order"], opt["model_type"]), space)
        log(_read_line(corpus, space, ", real values" if corpus.values is not None else "", t0, n_threads))
        return ChainJob(structure, corpus, data, space.template, order2)

    @staticmethod
    def dev_scorer(job, dev, n_threads):
        space = job.structure.space
        conv, marker = job.conversion, job.marker
        if conv is not None and not isinstance(dev, AttributeSequences):
            # encoded in the training scheme; scored against the dev set's own labels
            recoder = Recoder(job.structure.output_labels, conv.scheme, conv.detector.scheme)
            encoded = conv.sentences(dev, detect=False)
            if job.order2:
                encoded = pair_sentences(encoded, space.label_col)
            return DevScorer(job.structure, list(encoded), n_threads, gold_sentences=dev, recoder=recoder)
        if not job.order2:
            return DevScorer(job.structure, dev, n_threads, marker=marker)
        if isinstance(dev, AttributeSequences):
            return DevScorer(job.structure, pair_labels(dev), n_threads, gold_sentences=dev)
        return DevScorer(job.structure, list(pair_sentences(dev, space.label_col, marker)), n_threads,
                         gold_sentences=dev, marker=marker)

    @staticmethod
    def start(job, template, opt, init):
        """(frozen mask, starting parameters): fixed and pinned parameters, an --init model's weights."""
        structure, corpus, space = job.structure, job.corpus, job.structure.space
        frozen = structure.fixed(template)
        w0 = np.zeros(structure.n_params)
        if getattr(corpus, "allowed", None) is not None:
            check_annotation(job, opt)
        elif opt["constraints"] != "none" and corpus.labels is not None:   # (else checked on the workers)
            # a second-order model's labels are tag pairs: the constraints are on their current tags
            tags, y = current_tags(space.labels, corpus.labels) if job.order2 else (space.labels, corpus.labels)
            check_gold(tags, y, corpus.sent_ptr, opt["constraints"], job.origins.locate)
        pinned = structure.pinned(opt["constraints"])
        if pinned is not None:
            mask, value = pinned
            frozen |= mask
            w0[mask] = value
        if opt["transitions"] == "seen":
            # CRFsuite without all_possible_transitions: a transition never seen stays at 0
            frozen |= unseen_transitions(structure, corpus)
        if init is not None:
            start = structure.params(init.weights if job.init_weights is None else job.init_weights)
            w0 = np.where(w0 != 0, w0, start)    # the pinned (non-zero) weights stay pinned
        return frozen, w0

    @staticmethod
    def ready(job, log):
        if job.order2:
            log(f"order 2: {plural(job.structure.space.n_labels, 'label pair')}, "
                f"{plural(job.structure.n_backoff, 'backoff feature')}")

    @staticmethod
    def describer(opt, job, inference):
        """The middle of each iteration's log line and its record's fields."""
        algorithm = opt["algorithm"]

        def describe(info):
            if algorithm == "perceptron":
                line = f"epoch {info.iteration:4d}  mislabeled tokens {int(info.f)}  active {info.n_active}"
            elif algorithm in ("pa", "arow"):
                line = (f"epoch {info.iteration:4d}  mislabeled tokens {info.mislabeled}  loss {info.f:.6e}  "
                        f"active {info.n_active}")
            elif algorithm == "sgd":
                line = (f"epoch {info.iteration:4d}  objective {info.f:.6e}  rate {info.step:.3e}  "
                        f"active {info.n_active}")
            else:
                line = (f"iter {info.iteration:4d}  objective {info.f:.6e}  |g| {info.gnorm:.3e}  "
                        f"active {info.n_active}")
            fields = {"active": info.n_active, "evals": info.n_evals}
            if info.mislabeled is not None:
                fields["mislabeled"] = info.mislabeled
            return line, fields
        return describe

    @staticmethod
    def record_head(opt):
        return {"options": params.recorded(opt), "order": opt["order"], "model_type": opt["model_type"]}

    @staticmethod
    def checkpoint_best(best, scored):
        return {"best_dev_f1": best["score"] if scored else None,
                "best_dev_iteration": best["iteration"] if scored else None}

    @staticmethod
    def best_record(best, scored):
        return {"best_dev_f1": best["score"] if scored else None}

    @staticmethod
    def model(job, weights, info):
        if job.conversion is not None:
            info = {**info, "train_scheme": job.conversion.scheme, "corpus_scheme": job.conversion.detector.scheme}
        if getattr(job.corpus, "allowed", None) is not None:
            info = {**info, "partial_tokens": int((job.corpus.labels < 0).sum())}
        return Model(job.structure.space, weights, info)
