"""The chain kind (one chain of labels: a first- or second-order CRF, an MEMM): its trainer.

The trainer is what crftk.training asks of a kind: the options it refuses, the encoding
of the training data and the starting point, the development scorer, and the lines and
records it adds to the driver's.
"""

import time

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.evaluation.conlleval import evaluate
from crftk.features.space import FeatureSpace
from crftk.io.conll import Origins
from crftk.kinds.factorial import refuse_factorial_options
from crftk.model import Model
from crftk.progress import plural, status
from crftk.structures import make_structure, structure_name
from crftk.structures.constraints import check_gold
from crftk.structures.pairs import current_tags, pair_sentences


class DevScorer:
    """Scores a development set with the current weights (chunk F1 and accuracy).

    ``sentences`` are encoded for the structure (label pairs for a pair
    structure); the gold labels are read from ``gold_sentences`` (default: the
    same sentences), in the labels decoding outputs.
    """

    def __init__(self, structure, sentences, n_threads, gold_sentences=None):
        space = structure.space
        self.structure = structure
        self.inference = structure.bind(space.encode(sentences), n_threads)
        self.labels = np.asarray(structure.output_labels, dtype=object)
        self.slices = self.inference.corpus.sentence_slices()
        gold_sentences = sentences if gold_sentences is None else gold_sentences
        self.gold = [[row[space.label_col] for row in s.rows] for s in gold_sentences]

    def unseen_labels(self):
        """(label, tokens) of the gold labels the model does not have, most frequent first."""
        known = set(self.structure.output_labels)
        counts = {}
        for sent in self.gold:
            for lab in sent:
                if lab not in known:
                    counts[lab] = counts.get(lab, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))

    def __call__(self, w):
        pred, _ = self.inference.best(w)
        names = self.labels[pred]
        return evaluate(self.gold, [names[sl].tolist() for sl in self.slices])

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


class ChainJob:
    """A chain's training data, encoded: its structure, corpus and what prepare learned."""

    def __init__(self, structure, corpus, origins, template, order2):
        self.structure, self.corpus, self.origins = structure, corpus, origins
        self.template, self.order2 = template, order2
        self.inference = None          # bound by the driver (or on a cluster's workers)


class ChainTrainer:
    """The training of one chain of labels (crftk train with one --label-col)."""

    bind_options = {}
    label_cols = None

    @staticmethod
    def fit_options(opt):
        """The keyword arguments of crftk.training.fit that train this kind again with ``opt``."""
        return opt

    @classmethod
    def refusing(cls, inference=None, tolerance=None, max_sweeps=None, warm_start=False):
        refuse_factorial_options(inference, tolerance, max_sweeps, warm_start)
        return cls()

    def check(self, opt):
        """crftk.training.check_options holds the chain's rules."""

    @staticmethod
    def check_init(init):
        """--init continues the training of one first-order CRF."""
        init.require_kind("crf", "--init", hint="tag with it (crftk tag), or train from a template")
        if init.order != 1 or init.model_type != "crf":
            raise CrftkError("--init takes a first-order CRF model", init.source)

    @staticmethod
    def init_template(init):
        return init.space.template

    def prepare(self, sentences, template, opt, *, init, log, source, n_threads):
        """Check the template, encode the training data (with an --init model's feature space, or
        a new one fit to it) and log what was read."""
        t0 = time.perf_counter()
        if init is None:
            if template.pairs or template.pair_plain:
                line = template.pairs[0].lineno if template.pairs else template.pair_plain
                raise CrftkError("a P line is a pair factor of a factorial CRF and needs a second chain: give two "
                                 "or more --label-col (one per chain)", template.path, line)
            if not template.unigrams:
                log("crftk: warning: the template has no U lines: the model has no state features and learns "
                    + ("transitions only" if template.bigrams or template.label_bigram
                       else "start and end weights only"))
        if opt["model_type"] == "memm" and template.bigrams:
            raise CrftkError("MEMMs do not support transition templates with macros (B lines with %x); use a "
                             "plain B line", template.path, template.bigrams[0].lineno)
        order2 = opt["order"] == 2
        origins = Origins()
        stream = origins.record(sentences)
        if order2:
            stream = pair_sentences(stream, opt["label_col"])
        status(log, f"reading and encoding the training data{' from ' + str(source) if source else ''} ...")
        if init is not None:
            space = init.space
            sents = list(stream)
            corpus = space.encode(sents)
            if corpus.labels is None:
                raise CrftkError("the training data has no gold label column", source)
            unknown = np.flatnonzero(corpus.labels < 0)
            if unknown.size:
                k, t = corpus.position(unknown[0])
                label = sents[k].rows[t][space.label_col]
                raise CrftkError(f"label {shown(label)} is not one of the --init model's "
                                 f"{plural(space.n_labels, 'label')}", *origins.locate(k, t))
            del sents
        else:
            space, corpus = FeatureSpace.fit(stream, template, label_col=opt["label_col"],
                                             min_freq=opt["min_freq"], feature_set=opt["feature_set"],
                                             path=source)
        structure = make_structure(structure_name(opt["order"], opt["model_type"]), space)
        transitions = "no transitions" if not template.label_bigram else "label bigram"
        if space.n_edge_attrs:
            transitions += f" + {plural(space.n_edge_attrs, 'observation-conditioned transition attribute')}"
        log(f"read {plural(corpus.n_sentences, 'sentence')}, {plural(corpus.n_tokens, 'token')}; "
            f"{plural(space.n_labels, 'label')}, {plural(space.n_attrs, 'attribute')}, "
            f"{plural(space.n_features, 'state feature')}, {transitions}; {plural(space.n_params, 'parameter')} "
            f"({time.perf_counter() - t0:.2f}s, {plural(n_threads, 'thread')})")
        return ChainJob(structure, corpus, origins, template, order2)

    @staticmethod
    def dev_scorer(job, dev, n_threads, dev_source, log):
        space = job.structure.space
        # the development set needs the gold column, so exactly the training column count
        n = len(dev[0].rows[0])
        if n != space.n_columns:
            raise CrftkError(f"the development set has {n} columns, the training data {space.n_columns}",
                             dev_source, dev[0].line or None)
        scorer = DevScorer(job.structure, list(pair_sentences(dev, space.label_col)) if job.order2 else dev,
                           n_threads, gold_sentences=dev)
        log(f"development set: {plural(len(dev), 'sentence')}" + (f" from {dev_source}" if dev_source else ""))
        unseen = scorer.unseen_labels()
        if unseen:
            listed = ", ".join(f"{lab} ({plural(n, 'token')})" for lab, n in unseen[:10])
            log(f"crftk: warning: the development set has {plural(len(unseen), 'label')} never seen in training, "
                f"which the model cannot predict: {listed}" + (", ..." if len(unseen) > 10 else ""))
        return scorer

    @staticmethod
    def start(job, template, opt, init):
        """(frozen mask, starting parameters): fixed and pinned parameters, an --init model's weights."""
        structure, corpus, space = job.structure, job.corpus, job.structure.space
        frozen = structure.fixed(template)
        w0 = np.zeros(structure.n_params)
        if opt["constraints"] != "none":
            # a second-order model's labels are tag pairs: the constraints are on their current tags
            tags, y = current_tags(space.labels, corpus.labels) if job.order2 else (space.labels, corpus.labels)
            check_gold(tags, y, corpus.sent_ptr, opt["constraints"], job.origins.locate)
        pinned = structure.pinned(opt["constraints"])
        if pinned is not None:
            mask, value = pinned
            frozen |= mask
            w0[mask] = value
        if init is not None:
            start = structure.params(init.weights)
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
            elif algorithm == "sgd":
                line = (f"epoch {info.iteration:4d}  objective {info.f:.6e}  rate {info.step:.3e}  "
                        f"active {info.n_active}")
            else:
                line = (f"iter {info.iteration:4d}  objective {info.f:.6e}  |g| {info.gnorm:.3e}  "
                        f"active {info.n_active}")
            return line, {"active": info.n_active, "evals": info.n_evals}
        return describe

    @staticmethod
    def record_head(opt):
        return {"options": opt, "order": opt["order"], "model_type": opt["model_type"]}

    @staticmethod
    def checkpoint_best(best, scored):
        return {"best_dev_f1": best["score"] if scored else None,
                "best_dev_iteration": best["iteration"] if scored else None}

    @staticmethod
    def best_record(best, scored):
        return {"best_dev_f1": best["score"] if scored else None}

    @staticmethod
    def model(job, weights, info):
        return Model(job.structure.space, weights, info)
