"""Feature bagging (Sutton, Sindelar & McCallum 2006), the training: one CRF per feature bag
(each through the training driver), then the weights of each of the four combinations
(crftk.ensemble.combine) chosen on held-out data - the development set, or K folds of the
training data; crftk bag (crftk.commands.bag) reads the files and saves the bag."""

import concurrent.futures
import os
import sys
import threading
import time

import numpy as np

from crftk import params
from crftk.ensemble.bag import Bag
from crftk.ensemble.combine import METHODS, MIXTURES, Evidence
from crftk.ensemble.weights import HeldOut, em, f1, grid_search, read_weight_file
from crftk.errors import CrftkError
from crftk.features.extract import load_lexicons
from crftk.features.templates import parse_template
from crftk.params import resolve_threads
from crftk.progress import plural
from crftk.kinds.chain import ChainTrainer, scheme_record
from crftk.kinds.partial import refuse_partial_cells
from crftk.training.driver import check_options, fit


def _stderr_log(msg):
    print(msg, file=sys.stderr, flush=True)


def _silent(msg):
    pass


class BagInterrupted(KeyboardInterrupt):
    """Training stopped before every member had weights: ``members`` holds the Model of each
    member that has some (finished or interrupted), None for the others, in ``names``' order."""

    def __init__(self, names, members):
        super().__init__()
        self.names, self.members = names, members



def check_bag_options(options, log=_stderr_log):
    """(bag options, training options), checked; CrftkError on a bad value."""
    names = {p.name for p in params.BAG}
    bag_opt = params.check_params(params.BAG, {k: v for k, v in options.items() if k in names}, "bag")
    train_opt = check_options({k: v for k, v in options.items() if k not in names}, log)
    if train_opt["history"] is None:
        train_opt["history"] = ChainTrainer.history      # the members are chains (the bag records it)
    given = [what for what, bad in (("--order 2", train_opt["order"] != 1),
                                    (f"--model-type {train_opt['model_type']}", train_opt["model_type"] != "crf"))
             if bad]
    if given:
        raise CrftkError(f"bag trains first-order CRFs: drop {' and '.join(given)}")
    if bag_opt["decode"] == "max-marginal" and bag_opt["combine"] not in ("auto", "seq-mixture"):
        raise CrftkError("--decode max-marginal is an option of --combine seq-mixture")
    return bag_opt, train_opt


def random_bags(template, k, fraction, seed):
    """k templates, each with a random subset (fraction of them, at least one) of the template's
    U lines and all its other lines (the random subspace method)."""
    lines = template.text.splitlines()
    u_rows = [i for i, line in enumerate(lines) if line.strip().startswith("U")]
    if len(u_rows) < 2:
        raise CrftkError("--random-bags needs a template with at least two U lines", template.path)
    rng = np.random.default_rng(seed)
    size = max(1, int(round(fraction * len(u_rows))))
    out = []
    for _ in range(k):
        keep = set(rng.choice(u_rows, size=size, replace=False).tolist())
        text = "\n".join(line for i, line in enumerate(lines) if i not in u_rows or i in keep) + "\n"
        out.append(parse_template(text, template.path))
    return out


def member_names(templates, random):
    if random:
        return [f"random{i + 1}" for i in range(len(templates))]
    names = []
    for t in templates:
        base = os.path.splitext(os.path.basename(t.path))[0] or "bag"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def fit_bag(sentences, templates, *, dev=None, weights_file=None, log=_stderr_log, source=None,
            keep_on_interrupt=False, **options):
    """Train a bag on in-memory sentences (a list) and parsed templates; returns its Model (not saved).

    ``dev``: a list of Sentence on which the weights are chosen (unless ``cv``);
    ``weights_file``: weights to use instead (see ensemble.weights.read_weight_file).
    With ``keep_on_interrupt``, Ctrl-C stops every member's training at once, and once every
    member has weights the bag is returned with uniform weights (``info["bag"]["interrupted"]``);
    before that, BagInterrupted carries the members that have some.
    """
    log = log or _silent
    bag_opt, train_opt = check_bag_options(options, log)
    t0 = time.perf_counter()
    sentences = list(sentences)
    if not sentences:
        raise CrftkError("no training sentences", source)
    refuse_partial_cells(sentences, [train_opt["label_col"]], train_opt["unknown_label"],
                         "a bag's combination weights are chosen on held-out gold labels, which must all be known")
    templates = list(templates)
    if bag_opt["random_bags"]:
        if len(templates) != 1:
            raise CrftkError("--random-bags draws the bags from one template: give exactly one -t")
        templates = random_bags(templates[0], bag_opt["random_bags"], bag_opt["bag_fraction"], bag_opt["seed"])
    if len(templates) < 2:
        raise CrftkError("a bag needs at least two feature bags: give -t twice or more, or "
                         "--random-bags K with one template")
    for t in templates:
        t.refuse_segments()
        load_lexicons(t)          # a missing lexicon found now, not after the first bags trained
    names = member_names(templates, bool(bag_opt["random_bags"]))
    given = read_weight_file(weights_file, names) if weights_file is not None else {}
    if dev is not None:
        n = len(dev[0].rows[0])
        if n != len(sentences[0].rows[0]):
            raise CrftkError(f"the development set has {n} columns, the training data "
                             f"{len(sentences[0].rows[0])}", None, dev[0].line or None)

    mode = bag_opt["parallel"]
    if mode == "auto":
        mode = DEFAULT_PARALLEL
    log(f"bag: {plural(len(templates), 'bag')} ({', '.join(names)}), trained "
        + ("in parallel" if mode == "bags" else "one after another, each with every thread"))
    start = time.perf_counter()
    interrupted = False
    try:
        members = train_members(sentences, templates, names, train_opt, mode, log, keep_on_interrupt)
    except BagInterrupted as e:
        if not keep_on_interrupt or any(m is None for m in e.members):
            raise
        members, interrupted = e.members, True
    train_seconds = time.perf_counter() - start
    bag_ = Bag(members, names, {})
    labels = np.asarray(bag_.labels, dtype=object)

    n_threads = resolve_threads(train_opt["threads"])
    blocks, held = [], None
    try:
        if interrupted:
            pass
        elif bag_opt["cv"]:
            held = f"{bag_opt['cv']}-fold cross-validation on the training data"
            blocks = cross_validation_blocks(sentences, templates, names, train_opt, bag_opt["cv"], mode,
                                             n_threads, log)
        elif dev is not None:
            held = "the development set"
            blocks = [held_out_block(members, dev, train_opt["label_col"], n_threads)]
    except KeyboardInterrupt:
        if not keep_on_interrupt:
            raise
        interrupted, blocks, held = True, [], None
    if interrupted:
        log("interrupted: every member has weights; the bag keeps them, combined with "
            + ("the --weights file's weights" if given else "uniform weights"))

    record = {"members": names, "templates": [t.path for t in templates], "weights": {}, "weights_by": {},
              "held_out": held or "none", "parallel": mode, "train_seconds": train_seconds,
              "interrupted": interrupted}
    if blocks:
        record["member_dev_f1"] = {}
        for i, name in enumerate(names):
            score, _ = f1(blocks, "seq-poe", np.eye(len(names))[i], labels=labels)
            record["member_dev_f1"][name] = score
            log(f"bag {name}: F1 {score:.2f} on {held}")
        record["dev_f1"] = {}
    for method in METHODS:
        decode = bag_opt["decode"] if method == "seq-mixture" else "viterbi"
        w, how = choose_weights(method, blocks, labels, given, bag_opt, len(names), log)
        record["weights"][method] = [float(x) for x in w]
        record["weights_by"][method] = how
        line = f"{method}: weights " + " ".join(f"{n}={x:.3f}" for n, x in zip(names, w)) + f" ({how})"
        if blocks:
            score, _ = f1(blocks, method, w, decode, labels)
            record["dev_f1"][method] = score
            line += f", F1 {score:.2f} on {held}"
        log(line)
    chosen = bag_opt["combine"]
    if chosen == "auto":
        chosen = max(METHODS, key=lambda m: record["dev_f1"][m]) if blocks else "seq-poe"
    record["combine"] = chosen
    record["decode"] = bag_opt["decode"] if chosen == "seq-mixture" else "viterbi"
    log(f"combination: {chosen}" + (f" (best F1 on {held})" if bag_opt["combine"] == "auto" and blocks else ""))
    bag_ = Bag(members, names, record)
    info = {"options": params.recorded({**train_opt, **bag_opt}), "seconds": time.perf_counter() - t0,
            "member_iterations": [m.info.get("iterations") for m in members],
            "member_converged": [m.info.get("converged") for m in members],
            **scheme_record(members[0].info)}
    return bag_.to_model(info)


#: --parallel auto: measured on the 2-core machine, the bags at once were a little faster (benchmarks/results/bag.md)
DEFAULT_PARALLEL = "bags"


def train_members(sentences, templates, names, train_opt, mode, log, keep_on_interrupt=False):
    """One fitted Model per template: one after another with every thread ("threads"), or all at
    once with the threads shared out ("bags"). Ctrl-C stops them all at their next evaluation and
    raises BagInterrupted; with ``keep_on_interrupt`` the members that had finished an iteration
    keep their weights so far."""
    cores = resolve_threads(train_opt["threads"])
    stop = threading.Event()

    def one(template, name, threads):
        if stop.is_set():       # a member still waiting for a thread when Ctrl-C came: not started
            return None
        prefixed = lambda msg: log(f"[{name}] {msg}")  # noqa: E731
        opt = dict(train_opt, threads=threads)
        try:
            return fit(sentences, template, log=prefixed, source=name, keep_on_interrupt=keep_on_interrupt,
                       stop=stop, **opt)
        except KeyboardInterrupt:
            return None         # no finished iteration (or nothing to keep)

    if mode == "threads" or len(templates) == 1:
        members = []
        for t, n in zip(templates, names):
            member = one(t, n, cores)
            members.append(member)
            if member is None or member.info.get("interrupted"):
                members += [None] * (len(templates) - len(members))
                raise BagInterrupted(names, members)
        return members
    workers = min(len(templates), cores)
    per = max(1, cores // workers)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(one, t, n, per) for t, n in zip(templates, names)]
        try:
            concurrent.futures.wait(futures)
        except KeyboardInterrupt:
            stop.set()      # the members stop at their next evaluation; wait for them below
        members = [f.result() for f in futures]
    if stop.is_set() or any(m is None or m.info.get("interrupted") for m in members):
        raise BagInterrupted(names, members)
    return members


def held_out_block(members, sentences, label_col, n_threads):
    """The members' evidence on labeled sentences, with their gold labels."""
    evidence, corpus = Evidence.of(members, sentences, n_threads)
    if corpus.labels is None:
        raise CrftkError("the held-out sentences have no gold label column")
    col = members[0].space.label_col
    gold = [[row[col] for row in s.rows] for s in sentences]
    return HeldOut(evidence, corpus.labels, gold, corpus.sentence_slices())


def cross_validation_blocks(sentences, templates, names, train_opt, k, mode, n_threads, log):
    """K held-out blocks: fold f (sentences i with i mod K == f) seen by members trained on the rest."""
    if len(sentences) < k:
        raise CrftkError(f"--cv {k} needs at least {k} training sentences, not {len(sentences)}")
    blocks = []
    for fold in range(k):
        train = [s for i, s in enumerate(sentences) if i % k != fold]
        held = [s for i, s in enumerate(sentences) if i % k == fold]
        log(f"cross-validation fold {fold + 1}/{k}: training on {plural(len(train), 'sentence')}")
        members = train_members(train, templates, names, train_opt, mode, _quiet_iterations(log))
        blocks.append(held_out_block(members, held, train_opt["label_col"], n_threads))
    return blocks


def _quiet_iterations(log):
    """The folds' training logs without their per-iteration lines."""
    def out(msg):
        if "iter " not in msg and "epoch " not in msg:
            log(msg)
    return out


def choose_weights(method, blocks, labels, given, bag_opt, n_members, log):
    """(weights, how they were chosen) of one combination."""
    if method in given:
        return given[method], "file"
    if None in given:
        return given[None], "file"
    how = bag_opt["weights_by"]
    uniform = np.full(n_members, 1.0 / n_members)
    if not blocks or how == "uniform":
        return uniform, "uniform"
    if how == "auto":
        how = "grid" if n_members == 2 else ("em" if method in MIXTURES else "uniform")
    if how == "em":
        if method not in MIXTURES:
            how = "grid" if n_members == 2 else "uniform"
            if how == "uniform":
                return uniform, "uniform (EM is for mixtures)"
        else:
            return em(blocks, method), "em"
    decode = bag_opt["decode"] if method == "seq-mixture" else "viterbi"
    w, _ = grid_search(blocks, method, labels, bag_opt["grid_step"], decode)
    return w, f"grid, step {bag_opt['grid_step']:g}"
