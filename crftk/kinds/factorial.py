"""The "factorial" kind: a factorial CRF (crftk train with two or more --label-col; Sutton et al.
2004), one chain per label column. crftk tag appends one column per chain and, when the input
holds the gold label columns, scores each chain and all of them together. The structure, its
feature spaces and inference are in crftk.structures.factorial. Its trainer (below) is what the
training driver, crftk.training, asks of it."""

import time

import numpy as np

from crftk import params
from crftk.errors import CrftkError, UsageError, shown
from crftk.evaluation.columns import ChainTally, score_chains
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, Origins, input_batches
from crftk.io.stream import format_batch, gold_ids, tag_stream
from crftk.kinds.base import Job as KindJob
from crftk.kinds.base import refuse_forcing
from crftk.kinds.base import dump, summary  # noqa: F401 (this kind's info and dump: the structure's)
from crftk.kinds.partial import refuse_partial_cells
from crftk.model import Model, Part
from crftk.params import resolve_threads
from crftk.progress import plural, status
from crftk.structures.factorial import Factorial, fit_spaces

NAME = "factorial"


# -- options ---------------------------------------------------------------------------------

def check_factorial(inference=None, tolerance=None, max_sweeps=None):
    """The factorial options, defaults filled in and checked."""
    return {"inference": params.INFERENCE.check(params.INFERENCE.default if inference is None else inference),
            "tolerance": params.TOLERANCE.check(params.TOLERANCE.default if tolerance is None else tolerance),
            "max_sweeps": params.MAX_SWEEPS_PARAM.check(params.MAX_SWEEPS_PARAM.default if max_sweeps is None
                                                        else max_sweeps)}


def check_warm_start(warm_start, fopt):
    if warm_start and fopt["inference"] != "trp":
        raise CrftkError(f"--warm-start is for --inference trp, not {fopt['inference']}")


def label_columns_option(options):
    """The label columns of a factorial CRF (a list of two or more), or None for a linear chain;
    options["label_col"] is left a single column (or removed for a factorial CRF)."""
    cols = options.get("label_col", -1)
    if not isinstance(cols, (list, tuple)):
        return None
    if len(cols) <= 1:
        options["label_col"] = cols[0] if cols else -1
        return None
    label_col = next(p for p in params.TRAIN if p.name == "label_col")
    for col in cols:
        label_col.check(col)
    del options["label_col"]
    return list(cols)


# -- tagging ---------------------------------------------------------------------------------

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

    force_refusal = ("a factorial CRF, whose label columns are decoded together on grids "
                     "(crftk._factorial) that take no mask of allowed labels")

    def __init__(self, model, name, options):
        refuse_forcing(self, name, options)
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
        return gold + more

    def without(self, gold, first):
        return gold - first

    def report(self, log, gold):
        log_scores(gold, self.decoder.structure.label_cols, log)


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
    n_sent, n_tok, tally = tag_with_decoder(decoder, inputs, out, batch_tokens=batch_tokens, progress=progress,
                                            log=log, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    return n_sent, n_tok, log_scores(tally, decoder.structure.label_cols, log)


def decoding_line(decoder):
    """What tag logs about a decoder's inference before tagging (None: nothing, for exact Viterbi)."""
    if decoder.options["inference"] != "exact":
        return f"decoding with max-product, --inference {decoder.options['inference']}"
    return None


def tag_with_decoder(decoder, inputs, out, *, batch_tokens=50_000, progress=None, log=None,
                     max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding=DEFAULT_ENCODING):
    """tag_factorial with a FactorialDecoder, without its log lines: (sentences, tokens, a ChainTally
    of the sentences that had the gold columns, or None when none had)."""
    st = decoder.structure
    n = st.space.n_columns
    cols = st.label_cols
    allowed = {n}
    if sorted(cols) == list(range(n - len(cols), n)):
        allowed.add(n - len(cols))
    if st.raw_encodable():
        n_sent, n_tok, found = tag_stream(lambda batch, sep: _tag_raw(decoder, batch, sep), inputs, out, allowed,
                                          decoder.n_threads, batch_tokens=batch_tokens, progress=progress,
                                          log=log, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
        return n_sent, n_tok, sum(found[1:], found[0]) if found else None
    tally = None
    counts = [0, 0]
    anchored = any(s.template.anchored for s in st.chains)
    for batch, sep in input_batches(inputs, allowed, batch_tokens, by_document=anchored,
                                    max_sentence_tokens=max_sentence_tokens, progress=progress, log=log,
                                    counts=counts, encoding=encoding):
        sents = [it for it in batch if not isinstance(it, str)]
        tags = iter(decoder.decode(sents)[0] if sents else ())
        gold, pred = [[] for _ in cols], [[] for _ in cols]
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
        if gold[0]:
            more = ChainTally.of_labels(gold, pred)
            tally = more if tally is None else tally + more
    return counts[0], counts[1], tally


def log_scores(tally, cols, log):
    """The ChainScores of a ChainTally (None for None: no sentence had gold labels), logged."""
    if tally is None:
        return None
    scores = tally.scores()
    if log is not None:
        log(f"against the input's label columns {cols}: {scores.line()}")
    return scores


def _tag_raw(decoder, batch, sep):
    """(output bytes, None or the ChainTally of its gold and predicted labels) of a RawBatch (runs
    in a worker thread: the kernels release the GIL)."""
    st = decoder.structure
    pred, _ = st.bind(st.encode_raw(batch), 1, **decoder.options).best(decoder.weights)
    data = format_batch(batch, pred, decoder.labels, sep)
    if batch.n_columns != st.space.n_columns:
        return data, None
    # gold ids number the model's labels as pred does, and a label the model lacks past them
    ids, names = gold_ids(batch, st.label_cols, st.output_labels)
    return data, ChainTally.of_ids(ids, np.asarray(pred), batch.sent_ptr, names)


# -- training --------------------------------------------------------------------------------

#: training methods a factorial CRF cannot use, and why
ONLINE_ONLY = "updates the weights sentence by sentence through the linear chain's kernel, which a factorial CRF lacks"


class DevScorer:
    """Scores a development set: each chain's accuracy and F1, and the joint accuracy."""

    def __init__(self, structure, sentences, n_threads, options):
        self.corpus = structure.encode(sentences)
        self.inference = structure.bind(self.corpus, n_threads, **options)
        self.labels = [np.asarray(x, dtype=object) for x in structure.output_labels]
        self.slices = self.corpus.sentence_slices()
        self.gold = [[[row[col] for row in s.rows] for s in sentences] for col in structure.label_cols]

    def __call__(self, w):
        pred, _ = self.inference.best(w)
        guesses = [[lab[pred[c, sl]].tolist() for sl in self.slices] for c, lab in enumerate(self.labels)]
        return score_chains(self.gold, guesses)

    @staticmethod
    def warnings():
        return []

    # -- what the training driver logs and records of a score ---------------
    @staticmethod
    def target(scores):
        return scores.target()

    @staticmethod
    def fields(scores):
        return {"dev": scores.to_dict()}

    @staticmethod
    def text(scores):
        return f"  dev {scores.line()}"

    @staticmethod
    def kept_line(best):
        return (f"keeping the weights of iteration {best['iteration']} (best dev score {best['score']:.2f}: the last "
                f"chain's F1, or its accuracy when it has no chunks)")

    @staticmethod
    def last_line(best, chosen):
        return None


class FactorialJob:
    def __init__(self, structure, corpus, inference):
        self.structure, self.corpus, self.inference = structure, corpus, inference


class FactorialTrainer:
    """The training of a factorial CRF (crftk train with two or more --label-col)."""

    # L-BFGS memory when --history is not given: more pairs than a chain's 6, which take about
    # half the iterations on this kind's weakly regularized likelihood
    history = params.FACTORIAL_HISTORY

    def __init__(self, label_cols, inference=None, tolerance=None, max_sweeps=None, warm_start=False):
        self.label_cols = label_cols
        self.given = {"inference": inference, "tolerance": tolerance, "max_sweeps": max_sweeps,
                      "warm_start": warm_start}
        self.fopt = check_factorial(inference, tolerance, max_sweeps)
        check_warm_start(warm_start, self.fopt)
        self.warm_start = bool(warm_start)
        self.bind_options = {**self.fopt, "warm_start": self.warm_start}

    def fit_options(self, opt):
        """The keyword arguments of crftk.training.fit that train this kind again with ``opt``."""
        return {**opt, "label_col": list(self.label_cols), **self.given}

    def check(self, opt):
        """Training options a factorial CRF does not take, refused in one line that says why."""
        if opt["algorithm"] in ("sgd", "perceptron", "pa", "arow"):
            raise UsageError(f"--algorithm {opt['algorithm']} {ONLINE_ONLY}: use lbfgs, cg, pcg, mixed-cg, gis "
                             f"or quickprop")
        if opt["objective"] != "map":
            raise UsageError(f"--objective {opt['objective']} compares the best labeling of one chain with "
                             f"its gold chunks through the chain's forward-backward tables: a factorial CRF "
                             f"trains with --objective map")
        if opt["train_scheme"] != "none":
            raise UsageError(f"--train-scheme {opt['train_scheme']} converts one chain's labels and back; a "
                             f"factorial CRF (several --label-col) couples its chains' labels through pair "
                             f"factors learned on the columns as they are: drop --train-scheme")
        bad = []
        if opt["order"] != 1:
            bad.append("--order 2")
        if opt["model_type"] != "crf":
            bad.append(f"--model-type {opt['model_type']}")
        if opt["constraints"] != "none":
            bad.append(f"--constraints {opt['constraints']}")
        if opt["transitions"] != "all":
            bad.append(f"--transitions {opt['transitions']}")
        if bad:
            raise UsageError(f"a factorial CRF (several --label-col) is first-order chains of CRF potentials "
                             f"with every transition and without label constraints: drop {', '.join(bad)}")

    def check_init(self, init):
        init.require_kind("factorial", "--init with several --label-col",
                          hint="train a factorial CRF from a template, or give one --label-col to continue it")
        trained = list(init.structure.label_cols)
        if trained != self.label_cols:
            raise CrftkError(f"the --init model's chains read the label columns {trained}, not "
                             f"{self.label_cols}", init.source)

    @staticmethod
    def init_template(init):
        return init.space.template

    def prepare(self, sentences, template, opt, *, init, log, source, n_threads, init_space="keep"):
        t0 = time.perf_counter()
        origins = Origins()
        sentences = list(origins.record(sentences))
        status(log, f"reading and encoding the training data{' from ' + str(source) if source else ''} ...")
        if init is None:
            template.refuse_segments()
            if template.aggregates:
                # its tagging batches keep documents whole for first mentions only
                raise UsageError("a factorial CRF (several --label-col) tags in batches that keep documents whole for "
                                 "first mentions only: drop the template's %doc, %corpus and %ctx lines")
            chains, pairs, corpus = fit_spaces(sentences, template, self.label_cols, min_freq=opt["min_freq"],
                                               feature_set=opt["feature_set"], path=source)
            structure = Factorial(chains, pairs)
        else:
            structure = init.structure
            if not sentences:
                raise CrftkError("no training sentences", source)
            corpus = structure.encode(sentences)
            _check_known_labels(structure, corpus, sentences, origins, source)
        # after the columns were checked (fit_spaces, the --init model's encoding)
        refuse_partial_cells(sentences, structure.label_cols, opt["unknown_label"],
                             "a factorial CRF cannot train on partial labels, its kernels (exact product inference "
                             "and loopy belief propagation) take no mask of allowed labels; train one --label-col")
        inference = structure.bind(corpus, n_threads, **self.bind_options)
        chains, pairs = structure.chains, structure.pairs
        desc = "; ".join(f"chain {c + 1} (column {s.label_col}): {plural(s.n_labels, 'label')}, "
                         f"{plural(s.n_features, 'state feature')}" for c, s in enumerate(chains))
        pdesc = "; ".join(f"pair {c + 1}-{c + 2}: {plural(p.n_attrs - 1, 'observation attribute')}, "
                          f"{plural(p.n_features, 'pair feature')}" for c, p in enumerate(pairs))
        if init is not None and init_space == "grow":
            log("--init-space grow: a factorial CRF trains in its --init model's space (as --init-space keep): "
                "its chains and pair factors do not grow")
        log(f"factorial CRF: read {plural(corpus.n_sentences, 'sentence')}, {plural(corpus.n_tokens, 'token')}; "
            f"{desc}; {pdesc}; {plural(structure.n_params, 'parameter')}; inference {self.fopt['inference']}"
            f"{' with warm starts' if self.warm_start else ''} ({time.perf_counter() - t0:.2f}s, "
            f"{plural(n_threads, 'thread')})")
        return FactorialJob(structure, corpus, inference)

    def dev_scorer(self, job, dev, n_threads):
        return DevScorer(job.structure, dev, n_threads, self.fopt)

    @staticmethod
    def start(job, template, opt, init):
        frozen = job.structure.fixed(template)
        w0 = np.zeros(job.structure.n_params)
        if init is not None:
            w0 = np.concatenate([p.weights for p in init.parts]).astype(np.float64)
        return frozen, w0

    @staticmethod
    def ready(job, log):
        """Nothing to add before the first iteration."""

    @staticmethod
    def describer(opt, job, inference):
        n = job.corpus.n_sentences

        def describe(info):
            line = f"iter {info.iteration:4d}  objective {info.f:.6e}  |g| {info.gnorm:.3e}"
            if inference is None:           # on a cluster: the workers hold the message-passing statistics
                return line, {"evals": info.n_evals}
            converged, sweeps = inference.last_stats
            line += f"  converged {converged}/{n}  sweeps {sweeps:.2f}"
            return line, {"evals": info.n_evals, "seconds": None, "converged": converged, "mean_sweeps": sweeps}
        return describe

    def record_head(self, opt):
        return {"options": {**params.recorded(opt), "label_col": list(self.label_cols)},
                "factorial": {**self.fopt, "label_cols": list(self.label_cols), "chains": len(self.label_cols),
                              **({"warm_start": True} if self.warm_start else {})},
                "order": 1, "model_type": "crf"}

    @staticmethod
    def checkpoint_best(best, scored):
        return {"best_dev": best["scores"].to_dict() if scored and best["scores"] is not None else None}

    @staticmethod
    def best_record(best, scored):
        return FactorialTrainer.checkpoint_best(best, scored)

    @staticmethod
    def model(job, weights, info):
        return factorial_model(job.structure, weights, info)


def trainer(options, inference=None, tolerance=None, max_sweeps=None, warm_start=False):
    """A FactorialTrainer when the options name two or more label columns (then removed from
    ``options``), else None."""
    label_cols = label_columns_option(options)
    if label_cols is None:
        return None
    return FactorialTrainer(label_cols, inference, tolerance, max_sweeps, warm_start)


def _check_known_labels(structure, corpus, sentences, origins, source):
    """Refuse a training label an --init model does not have (it has no weights for it)."""
    if corpus.labels is None:
        raise CrftkError("the training data has no gold label columns", source)
    for c, space in enumerate(structure.chains):
        unknown = np.flatnonzero(corpus.labels[c] < 0)
        if unknown.size:
            k, t = corpus.position(unknown[0])
            label = sentences[k].rows[t][space.label_col]
            raise CrftkError(f"label {shown(label)} is not one of the --init model's chain {c + 1} "
                             f"{plural(space.n_labels, 'label')}", *origins.locate(k, t))


def factorial_model(structure, weights, info):
    """The Model of a factorial structure: a part per chain (chain0, ...) and per pair (pair0, ...)."""
    w = structure.split(np.asarray(weights, dtype=np.float64))
    C = structure.n_chains
    parts = [Part(s, w[c], f"chain{c}") for c, s in enumerate(structure.chains)]
    parts += [Part(p, w[C + c], f"pair{c}") for c, p in enumerate(structure.pairs)]
    return Model(parts[0].space, parts[0].weights, info, structure=Factorial.name, more_parts=parts[1:],
                 name=parts[0].name)
