"""Factorial CRFs from the command line and the library: training (``crftk train`` with two or
more ``--label-col``), tagging (``crftk tag`` appends one column per chain) and scoring each
chain and all of them together.

The structure, its feature spaces and inference are in crftk.structures.factorial; this module
reads files, runs L-BFGS on the penalized likelihood, scores the development set, and writes.
"""

import math
import sys
import time

import numpy as np

from crftk import params
from crftk.errors import CrftkError, UsageError
from crftk.evaluation.columns import score_chains
from crftk.io.conll import DEFAULT_ENCODING, MAX_SENTENCE_TOKENS, input_batches, read_corpus
from crftk.io.outputs import check_output
from crftk.io.stream import format_batch, gold_ids, tag_stream
from crftk.model import Model, Part
from crftk.objectives.penalty import Penalty
from crftk.optimize import OptimizeResult, lbfgs
from crftk.params import resolve_threads
from crftk.progress import plural, status
from crftk.structures.factorial import Factorial, fit_spaces


def _stderr_log(msg):
    print(msg, file=sys.stderr, flush=True)


def check_factorial(inference=None, tolerance=None, max_sweeps=None):
    """The factorial options, defaults filled in and checked."""
    return {"inference": params.INFERENCE.check(params.INFERENCE.default if inference is None else inference),
            "tolerance": params.TOLERANCE.check(params.TOLERANCE.default if tolerance is None else tolerance),
            "max_sweeps": params.MAX_SWEEPS_PARAM.check(params.MAX_SWEEPS_PARAM.default if max_sweeps is None
                                                        else max_sweeps)}


def refuse_factorial_options(inference=None, tolerance=None, max_sweeps=None, warm_start=False):
    """A linear chain (one label column) takes none of the factorial options: bad input, exit 1
    (issue 16), like a label column that does not exist."""
    given = [p.option for p, v in zip(params.FACTORIAL, (inference, tolerance, max_sweeps)) if v is not None]
    given += ["--warm-start"] if warm_start else []
    if given:
        raise CrftkError(f"{', '.join(given)} {'is an option' if len(given) == 1 else 'are options'} of factorial "
                         f"CRFs: give two or more --label-col (one per chain)")


def _check_warm_start(warm_start, fopt):
    if warm_start and fopt["inference"] != "trp":
        raise CrftkError(f"--warm-start is for --inference trp, not {fopt['inference']}")


def _check_linear_only(opt):
    """Training options a factorial CRF does not take."""
    bad = []
    if opt["algorithm"] != "lbfgs":
        bad.append(f"--algorithm {opt['algorithm']}")
    if opt["objective"] != "map":
        bad.append(f"--objective {opt['objective']}")
    if opt["order"] != 1:
        bad.append("--order 2")
    if opt["model_type"] != "crf":
        bad.append(f"--model-type {opt['model_type']}")
    if opt["constraints"] != "none":
        bad.append(f"--constraints {opt['constraints']}")
    if bad:
        raise UsageError(f"a factorial CRF (several --label-col) trains with --algorithm lbfgs and the MAP "
                         f"objective only: drop {', '.join(bad)}")


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


class DevScorer:
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


def fit_factorial(sentences, template, label_cols, opt, *, dev=None, log=_stderr_log, source=None, dev_source=None,
                  keep_on_interrupt=False, inference=None, tolerance=None, max_sweeps=None, warm_start=False):
    """Train a factorial CRF on in-memory sentences, one chain per label column; returns the Model.
    ``opt``: the training options, checked (crftk.commands.train.check_options). ``warm_start``
    (trp): every objective evaluation starts message passing from the previous one's messages
    (FactorialInference)."""
    _check_linear_only(opt)
    fopt = check_factorial(inference, tolerance, max_sweeps)
    _check_warm_start(warm_start, fopt)
    n_threads = resolve_threads(opt["threads"])
    t0 = time.perf_counter()
    sentences = list(sentences)
    status(log, f"reading and encoding the training data{' from ' + str(source) if source else ''} ...")
    chains, pairs, corpus = fit_spaces(sentences, template, list(label_cols), min_freq=opt["min_freq"],
                                       feature_set=opt["feature_set"], path=source)
    structure = Factorial(chains, pairs)
    inference_ = structure.bind(corpus, n_threads, **fopt, warm_start=warm_start)
    desc = "; ".join(f"chain {c + 1} (column {s.label_col}): {plural(s.n_labels, 'label')}, "
                     f"{plural(s.n_features, 'state feature')}" for c, s in enumerate(chains))
    pdesc = "; ".join(f"pair {c + 1}-{c + 2}: {plural(p.n_attrs - 1, 'observation attribute')}, "
                      f"{plural(p.n_features, 'pair feature')}" for c, p in enumerate(pairs))
    log(f"factorial CRF: read {plural(corpus.n_sentences, 'sentence')}, {plural(corpus.n_tokens, 'token')}; "
        f"{desc}; {pdesc}; {plural(structure.n_params, 'parameter')}; inference {fopt['inference']}"
        f"{' with warm starts' if warm_start else ''} ({time.perf_counter() - t0:.2f}s, {plural(n_threads, 'thread')})")
    scorer = None
    if dev:
        n = len(dev[0].rows[0])
        if n != chains[0].n_columns:
            raise CrftkError(f"the development set has {n} columns, the training data {chains[0].n_columns}",
                             dev_source, dev[0].line or None)
        scorer = DevScorer(structure, dev, n_threads, fopt)
        log(f"development set: {plural(len(dev), 'sentence')}" + (f" from {dev_source}" if dev_source else ""))
    frozen = structure.fixed(template)
    penalty = Penalty(opt["c2"], frozen)
    gold = corpus.labels
    evals = [0]

    def fun(w):
        loss, grad = inference_.loglik(w, gold)
        evals[0] += 1
        return penalty(w, loss, grad.copy())

    best = {"score": -1.0, "iteration": 0, "w": None, "scores": None}
    history = []
    last_x = [None]
    clock = [time.perf_counter()]

    def on_iteration(info):
        now = time.perf_counter()
        converged, sweeps = inference_.last_stats
        record = {"iteration": info.iteration, "objective": info.f,
                  "gnorm": info.gnorm if math.isfinite(info.gnorm) else None, "evals": info.n_evals,
                  "seconds": now - clock[0], "converged": converged, "mean_sweeps": sweeps}
        line = (f"iter {info.iteration:4d}  objective {info.f:.6e}  |g| {info.gnorm:.3e}  "
                f"converged {converged}/{corpus.n_sentences}  sweeps {sweeps:.2f}")
        if scorer is not None:
            scores = scorer(info.x)
            record["dev"] = scores.to_dict()
            line += f"  dev {scores.line()}"
            if scores.target() > best["score"]:
                best.update(score=scores.target(), iteration=info.iteration, w=np.array(info.x, copy=True),
                            scores=scores.to_dict())
        line += f"  {record['seconds']:.2f}s"
        history.append(record)
        last_x[0] = np.array(info.x, copy=True)
        log(line)
        clock[0] = time.perf_counter()
        return False

    start = time.perf_counter()
    w0 = np.zeros(structure.n_params)
    try:
        result = lbfgs(fun, w0, c1=opt["c1"], l1_mask=None if opt["c1"] == 0 else ~frozen, m=opt["history"],
                       max_iter=opt["max_iter"], epsilon=opt["epsilon"], period=opt["period"],
                       callback=on_iteration)
    except KeyboardInterrupt:
        if not keep_on_interrupt or not history:
            raise
        done = history[-1]
        result = OptimizeResult(x=last_x[0], f=done["objective"], n_iter=done["iteration"], n_evals=done["evals"],
                                converged=False, reason=f"interrupted after iteration {done['iteration']}")
    seconds = time.perf_counter() - start
    log(result.reason if result.converged else "stopped before convergence: " + result.reason)
    weights, chosen = result.x, result.n_iter
    if scorer is not None and opt["keep"] == "best" and best["w"] is not None:
        weights, chosen = best["w"], best["iteration"]
        log(f"keeping the weights of iteration {chosen} (best dev score {best['score']:.2f}: the last chain's F1, "
            f"or its accuracy when it has no chunks)")
    info = {
        "options": {**opt, "label_col": list(structure.label_cols)},
        "factorial": {**fopt, "label_cols": list(structure.label_cols), "chains": structure.n_chains,
                      **({"warm_start": True} if warm_start else {})},
        "order": 1, "model_type": "crf", "threads": n_threads,
        "sentences": corpus.n_sentences, "tokens": corpus.n_tokens,
        "iterations": result.n_iter, "evaluations": result.n_evals, "chosen_iteration": chosen,
        "converged": result.converged, "stop_reason": result.reason, "objective": result.f,
        "seconds": seconds, "seconds_in_all": time.perf_counter() - t0,
        "best_dev": best["scores"] if scorer is not None else None,
        "interrupted": result.reason.startswith("interrupted"),
        "history": history,
    }
    return factorial_model(structure, weights, info)


def factorial_model(structure, weights, info):
    """The Model of a factorial structure: a part per chain (chain0, ...) and per pair (pair0, ...)."""
    w = structure.split(np.asarray(weights, dtype=np.float64))
    C = structure.n_chains
    parts = [Part(s, w[c], f"chain{c}") for c, s in enumerate(structure.chains)]
    parts += [Part(p, w[C + c], f"pair{c}") for c, p in enumerate(structure.pairs)]
    return Model(parts[0].space, parts[0].weights, info, structure=Factorial.name, more_parts=parts[1:],
                 name=parts[0].name)


def train_factorial(train_files, template, model_path, opt, *, label_cols, dev_file=None, log=_stderr_log,
                    max_sentence_tokens=MAX_SENTENCE_TOKENS, inference=None, tolerance=None, max_sweeps=None,
                    warm_start=False, encoding=DEFAULT_ENCODING):
    """``crftk train`` with several label columns: read the files (in ``encoding``), train, save."""
    _check_warm_start(warm_start, check_factorial(inference, tolerance, max_sweeps))
    check_output(model_path, "model")
    dev = None
    if dev_file is not None:
        dev = read_corpus(dev_file, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
        if not dev:
            log(f"crftk: warning: the development set {dev_file} has no sentences; it is not used")
    status(log, "reading the training data ...")
    sentences = read_corpus(train_files, max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    if not sentences:
        raise CrftkError("no training sentences", train_files[0])
    model = fit_factorial(sentences, template, label_cols, opt, dev=dev or None, log=log, source=train_files[0],
                          dev_source=dev_file, keep_on_interrupt=model_path is not None, inference=inference,
                          tolerance=tolerance, max_sweeps=max_sweeps, warm_start=warm_start)
    model.info.update(train_files=list(train_files), dev_file=None if dev_file is None else str(dev_file),
                      init_model=None)
    if model_path is not None:
        model.save(model_path)
        log(f"saved {model_path} ({model.info['seconds_in_all']:.1f}s in all)")
    if model.info["interrupted"]:
        raise KeyboardInterrupt
    return model


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
