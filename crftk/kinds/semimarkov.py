"""The "semimarkov" kind: a semi-Markov CRF (crftk train --model-type semimarkov). It is trained
on the gold segmentation of a chunk-tag column and tags in the corpus's own scheme (its IOBES
predictions converted back by a Recoder), so crftk eval reads its output as a chain CRF's
(compose and bag take chain CRFs, not semi-Markov models). Its tagger and job are the chain's over the structure crftk.structures.semimarkov;
its trainer (below) is what the training driver, crftk.training, asks of it."""

import time

import numpy as np

from crftk import params
from crftk.errors import CrftkError, UsageError, shown
from crftk.features.segments import raw_segments
from crftk.features.space import FeatureSpace
from crftk.io.conll import Origins, model_widths
from crftk.io.crfsuite import AttributeSequences
from crftk.io.schemes import Recoder
from crftk.io.segments import OUTSIDE, SegmentConversion
from crftk.kinds import chain
from crftk.kinds.base import dump, summary  # noqa: F401 (this kind's info and dump: the structure's)
from crftk.model import Model, Part
from crftk.progress import plural, status
from crftk.structures.semimarkov import PARTS, SemiMarkov, SemiMarkovCorpus

NAME = "semimarkov"
#: why a semi-Markov model takes no --force-col or constraints
NO_MASK = "a semi-Markov CRF, whose segment lattice takes no mask of allowed labels"


class Tagger(chain.Tagger):
    """Decodes batches of sentences with a semi-Markov model; labels in the corpus's scheme."""

    #: raw batches need the segment part's compiled encoder too
    compiled = False

    def __init__(self, model, *, threads=0, force=None):
        if force is not None:
            raise CrftkError(f"--force-col: this model is {NO_MASK}")
        super().__init__(model, threads=threads)     # its recoder: the record's iobes -> corpus scheme
        self.weights = np.concatenate([p.weights for p in model.parts])

    def input_widths(self):
        """The column counts its input may have: the U lines' and the S lines' columns read."""
        space = self.space
        return model_widths(space.template.columns + self.structure.segments.template.segment_columns,
                            space.n_columns)

    def inference(self, sentences):
        """The inference over the sentences; a sentence no segmentation covers is an error at its line."""
        sentences = list(sentences)
        inf = super().inference(sentences)
        bad = self.structure.unsegmentable(np.diff(inf.corpus.sent_ptr))
        if bad.size:
            s = sentences[int(bad[0])]
            raise self._unsegmentable(len(s.rows), s.source, s.line)
        return inf

    def _unsegmentable(self, n_tokens, source, line):
        return CrftkError(f"this sentence of {plural(n_tokens, 'token')} has no segmentation under the model: "
                          f"its segments are of {', '.join(map(str, self.structure.seg_lengths))} tokens only "
                          f"(its training data had no O token and no one-token chunk)", source, line or None)

    def constrained(self, inf, sentences, constraints=None):
        if constraints is not None:
            raise CrftkError(f"constrained decoding: this model is {NO_MASK}")
        return {}


class CompiledTagger(Tagger):
    """A Tagger on the compiled path (crftk.io.stream): the token part encoded by its compiled
    encoder, the segments by crftk.features.segments.RawSegments, for models whose S lines it
    reads (the others tag through Tagger)."""

    compiled = True

    def __init__(self, model, *, threads=0, force=None, raw=None):
        super().__init__(model, threads=threads, force=force)
        self.raw = raw if raw is not None else raw_segments(self.structure.segments)

    def raw_inference(self, batch):
        """The inference over a RawBatch (one thread); a sentence no segmentation covers is an
        error at its line, as in inference."""
        inf = self.structure.bind(SemiMarkovCorpus(self.space.encode_raw(batch), self.raw.encode(batch)), 1)
        bad = self.structure.unsegmentable(batch.sentence_lengths())
        if bad.size:
            k = int(bad[0])
            raise self._unsegmentable(int(batch.sentence_lengths()[k]), batch.source, int(batch.sent_line[k]))
        return inf


class Job(chain.Job):
    """crftk tag with a semi-Markov model: the best segmentation (-v its tags' marginals, -n the
    n best segmentations), written in the corpus's scheme."""

    force_refusal = NO_MASK

    def make_tagger(self):
        o = self.options
        chain.tagger(self.model, combine=o["combine"], decode=o["decode"], weights=o["weights"])  # its refusals
        raw = raw_segments(self.model.structure.segments)
        if raw is None:
            return Tagger(self.model, threads=o["threads"])
        return CompiledTagger(self.model, threads=o["threads"], raw=raw)


# -- training --------------------------------------------------------------------------------

#: the batch methods a semi-Markov CRF trains with
_ALGORITHMS = ("lbfgs", "cg", "pcg", "mixed-cg", "quickprop")


class SemiMarkovTrainer(chain.ChainTrainer):
    """The training of a semi-Markov CRF from one chunk-tag column and a template (U lines over
    the IOBES position tags, S lines over whole segments)."""

    def check(self, opt):
        if opt["algorithm"] not in _ALGORITHMS:
            raise UsageError(f"--algorithm {opt['algorithm']}: a semi-Markov CRF trains with "
                             f"{', '.join(_ALGORITHMS)} (its lattice has no per-sentence update epochs "
                             f"nor GIS's feature bound)")
        refused = [("--order 2", opt["order"] != 1),
                   (f"--train-scheme {opt['train_scheme']}", opt["train_scheme"] != "none"),
                   (f"--constraints {opt['constraints']}", opt["constraints"] != "none")]
        given = [what for what, bad in refused if bad]
        if given:
            raise UsageError(f"a semi-Markov CRF is first order, trains on IOBES tags and converts back to the "
                             f"corpus's scheme itself, and its segment lattice allows consistent tags only: "
                             f"drop {', '.join(given)}")

    @staticmethod
    def check_init(init):
        init.require_kind(NAME, "--init with --model-type semimarkov",
                          hint="continue it without --model-type semimarkov, or train from a template")

    def prepare(self, sentences, template, opt, *, init, log, source, n_threads, init_space="keep"):
        """Convert the label column to the IOBES tags of its segments, fit (or, with --init, reuse)
        the token and segment spaces and encode the data."""
        from crftk.features.segments import SegmentSpace
        t0 = time.perf_counter()
        if isinstance(sentences, AttributeSequences):
            raise CrftkError("a semi-Markov CRF's features come from a template over columns (its S lines read "
                             "the columns of whole segments): train it on CoNLL rows with a template, not on "
                             "attribute data (feature dicts, a CRFsuite file)", source)
        if init is None and (template.pairs or template.pair_plain):
            line = template.pairs[0].lineno if template.pairs else template.pair_plain
            raise CrftkError("a P line is a pair factor of a factorial CRF; a semi-Markov CRF has one label "
                             "column", template.path, line)
        if template.bigrams:
            raise CrftkError("a semi-Markov CRF takes a plain B line (transitions between IOBES tags), not B "
                             "lines with macros", template.path, template.bigrams[0].lineno)
        origins = Origins()
        cap = opt["max_segment"] or None
        conversion = SegmentConversion(opt["label_col"], cap, opt["unknown_label"] or None)
        status(log, f"reading and encoding the training data{' from ' + str(source) if source else ''} ...")
        sents = list(conversion.sentences(origins.record(sentences)))
        if not sents:
            raise CrftkError("no training sentences", source)
        if init is not None:
            structure = init.structure
            if init.info.get("corpus_scheme") != conversion.detector.scheme:
                log(f"crftk: warning: the --init model was trained on {init.info.get('corpus_scheme')} tags, this "
                    f"data is {conversion.detector.scheme}: the new model tags in {conversion.detector.scheme}")
            tokens = structure.space.encode(sents)
            _check_init_labels(structure, tokens, conversion, sents, origins, source)
            corpus = SemiMarkovCorpus(tokens, structure.segments.encode(sents))
        else:
            labels = sorted(set(conversion.longest) | {OUTSIDE})
            max_len = np.array([conversion.longest.get(y, 1) for y in labels], dtype=np.int32)
            tokens_space, tokens = FeatureSpace.fit(sents, template, label_col=opt["label_col"],
                                                    min_freq=opt["min_freq"], feature_set=opt["feature_set"],
                                                    path=source)
            segments, seg_corpus = SegmentSpace.fit(sents, template, labels=labels, max_len=max_len,
                                                    min_freq=opt["min_freq"], label_col=opt["label_col"],
                                                    feature_set=opt["feature_set"])
            structure = SemiMarkov(tokens_space, segments)
            corpus = SemiMarkovCorpus(tokens, seg_corpus)
        del sents
        space, segments = structure.space, structure.segments
        lengths = ", ".join(f"{y} {n}" for y, n in zip(segments.labels, structure.seg_max.tolist()) if y != OUTSIDE)
        if init is not None and init_space == "grow":
            log("--init-space grow: a semi-Markov CRF trains in its --init model's spaces (as --init-space "
                "keep): its segment space does not grow")
        log(f"read {plural(corpus.n_sentences, 'sentence')}, {plural(corpus.n_tokens, 'token')}; "
            f"{plural(space.n_labels, 'position tag')}, {plural(space.n_features, 'state feature')}, "
            f"{plural(segments.n_attrs, 'segment attribute')} x {plural(len(segments.labels), 'segment label')}; "
            f"{plural(structure.n_params, 'parameter')} ({time.perf_counter() - t0:.2f}s, "
            f"{plural(n_threads, 'thread')})")
        log(f"segments: {conversion.detector.scheme} in {source or 'the training data'}, longest per label: "
            f"{lengths or '-'}" + (f"; {plural(conversion.n_split, 'gold segment')} longer than --max-segment "
                                   f"{cap} split" if cap else ""))
        return chain.ChainJob(structure, corpus, origins, template, False, conversion=conversion)

    @staticmethod
    def dev_scorer(job, dev, n_threads):
        recoder = Recoder(job.structure.output_labels, "iobes", job.conversion.detector.scheme)
        return chain.DevScorer(job.structure, dev, n_threads, recoder=recoder)

    @staticmethod
    def start(job, template, opt, init):
        frozen, w0 = chain.ChainTrainer.start(job, template, opt, None)
        if init is not None:
            start = np.concatenate([p.weights for p in init.parts])
            w0 = np.where(frozen, w0, start)
        return frozen, w0

    @staticmethod
    def record_head(opt):
        return {"options": params.recorded(opt), "order": 1, "model_type": NAME}

    @staticmethod
    def model(job, weights, info):
        return semimarkov_model(job.structure, weights, {**info, "train_scheme": "iobes",
                                                         "corpus_scheme": job.conversion.detector.scheme,
                                                         "split_segments": job.conversion.n_split})


def semimarkov_model(structure, weights, info):
    """The Model of a semi-Markov structure: its token part, then its segment part."""
    w_tok, w_seg = structure.split(np.asarray(weights, dtype=np.float64))
    return Model(structure.space, w_tok, info, structure=SemiMarkov.name, name=PARTS[0],
                 more_parts=[Part(structure.segments, w_seg, PARTS[1])])


def _check_init_labels(structure, tokens, conversion, sents, origins, source):
    """Refuse a segment label, or a segment longer than the --init model's longest, that it lacks."""
    unknown = np.flatnonzero(tokens.labels < 0) if tokens.labels is not None else np.zeros(0, dtype=np.int64)
    if unknown.size:
        k, t = tokens.position(unknown[0])
        raise CrftkError(f"position tag {shown(sents[k].rows[t][structure.space.label_col])} is not one of the "
                         f"--init model's {plural(structure.space.n_labels, 'tag')}", *origins.locate(k, t))
    longest = dict(zip(structure.segments.labels, structure.seg_max.tolist()))
    for label, n in conversion.longest.items():
        if n > longest.get(label, 0):
            raise CrftkError(f"the data has a {label} segment of {n} tokens, longer than the --init model's "
                             f"{longest.get(label, 0)}: give --max-segment {longest.get(label, 1)}", source)


def trainer(options):
    """A SemiMarkovTrainer when the options ask for --model-type semimarkov, else None."""
    return SemiMarkovTrainer() if options.get("model_type") == NAME else None
