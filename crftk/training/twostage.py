"""Two-stage training (Krishnan & Manning 2006): a second CRF trained on a first one's labels.

The second stage must learn how far to trust the first stage's labels on text the first stage
has not seen, so its training data carries *out-of-fold* labels: the training documents are
cut into K folds (document i of the files in fold i mod K; sentence i when there are fewer
documents than folds), and each fold is tagged by the first stage's configuration (its template
and training options, from its model file) trained on the other K-1. A fold's labels never come
from a model that saw that fold. The first stage itself, trained on everything, tags at tag
time (crftk.kinds.twostage), and tags the development set here.
"""

import time

import numpy as np

from crftk import params
from crftk.errors import CrftkError, UsageError
from crftk.features.space import FeatureSpace
from crftk.features.templates import AGGREGATES
from crftk.kinds.chain import Tagger
from crftk.kinds.partial import KnownGold
from crftk.kinds.twostage import TwoStage, with_first_labels
from crftk.progress import plural, status
from crftk.training.driver import fit


def _quiet(msg):
    pass


def check_first_stage(first, path):
    """A first stage is one chain CRF whose template can be retrained on folds."""
    if first.kind != "crf":
        raise UsageError(f"--first-stage {path} is {first.describe()}: the first stage is one CRF "
                         "(crftk train without --first-stage)")
    if type(first.space) is not FeatureSpace:
        raise UsageError(f"--first-stage {path} was trained on attributes (feature dicts or a CRFsuite file): the first "
                         "stage needs a template to retrain on folds")
    template = first.space.template
    if template.lexicons:
        raise UsageError(f"--first-stage {path}: its template reads lexicons, which out-of-fold training would "
                         "have to rebuild per fold; train the first stage without @lexicon lines")
    if any(m.kind in AGGREGATES for m in template.macros):      # %ctx reads no stage's labels: allowed
        raise UsageError(f"--first-stage {path} reads a first stage's labels itself (%doc/%corpus): "
                         "a two-stage model has two stages")
    if not isinstance(first.info.get("options"), dict):
        raise UsageError(f"--first-stage {path} has no training options in its record to retrain on folds")


def fold_of(sentences, folds):
    """The fold of each sentence: its document's rank mod ``folds``, or, with fewer documents than
    folds, its own index mod ``folds``; and what was cut ("documents" or "sentences")."""
    docs = np.fromiter((s.doc for s in sentences), dtype=np.int64, count=len(sentences))
    _, rank = np.unique(docs, return_inverse=True)
    if rank.size and int(rank.max()) + 1 >= folds:
        return rank.reshape(-1) % folds, "documents"
    return np.arange(len(sentences)) % folds, "sentences"


def out_of_fold(first, sentences, folds, *, threads=0, log=_quiet):
    """The first stage's labels of each training sentence, each from a model of the first stage's
    configuration trained on the other folds; (labels per sentence, what the folds cut)."""
    folds = params.CROSS_PREDICT.check(folds)
    if len(sentences) < folds:
        raise CrftkError(f"--first-stage-folds {folds} needs at least {folds} training sentences, found "
                         f"{len(sentences)}")
    fold, unit = fold_of(sentences, folds)
    steps = training_steps(first)
    if len(steps) > 1:
        log(f"first stage: each fold repeats its {len(steps)} training steps ("
            + ", then ".join(f"{m.info['options']['objective']} from "
                             + ("the template" if i == 0 else "the step before") for i, m in enumerate(steps)) + ")")
    labels = [None] * len(sentences)
    label_col = first.space.label_col
    for k in range(folds):
        status(log, f"first stage, fold {k + 1} of {folds}: training on the other {folds - 1} ...")
        t0 = time.perf_counter()
        rest = [s for s, f in zip(sentences, fold) if f != k]
        held = np.flatnonzero(fold == k).tolist()
        model = None
        for step in steps:
            options = dict(step.info["options"], threads=threads)
            model = fit(rest, step.space.template if model is None else None, init=model, log=_quiet, **options)
        tags = Tagger(model, threads=threads).tag([sentences[i] for i in held])
        for i, t in zip(held, tags):
            labels[i] = t
        gold = [[row[label_col] for row in sentences[i].rows] for i in held]
        score = KnownGold(gold, step.info["options"].get("unknown_label", params.UNKNOWN_LABEL.default)).score(tags)
        log(f"first stage, fold {k + 1}/{folds}: trained on {plural(len(rest), 'sentence')} "
            f"({model.info['iterations']} iterations, {time.perf_counter() - t0:.0f}s), tagged "
            f"{plural(len(held), 'sentence')}: F1 {score.overall.f1:.2f}")
    return labels, unit


def training_steps(first):
    """The models whose training made ``first``, first to last: a model trained with --init (MCE-F
    from a MAP model) is repeated from the model its record names, which must still be there."""
    from crftk.model import Model
    steps, model, seen = [first], first, set()
    while model.info.get("init_model"):
        path = model.info["init_model"]
        if path in seen or len(steps) > 10:
            raise CrftkError(f"the first stage's --init models form a loop at {path}")
        seen.add(path)
        try:
            model = Model.load(path)
        except CrftkError as e:
            raise CrftkError(f"the first stage was trained from --init {path}, which out-of-fold training must "
                             f"repeat, and it cannot be loaded: {e}") from None
        check_first_stage(model, path)
        steps.append(model)
    return steps[::-1]


def fit_two_stage(sentences, template, first, *, folds=10, first_labels=None, dev=None, log=_quiet,
                  source=None, dev_source=None, first_path=None, init=None, on_labels=None, labels_source=None,
                  **options):
    """Train the second stage of a two-stage model on ``first``'s out-of-fold labels (or on
    ``first_labels``, one list per sentence, when given, read from ``labels_source``); returns the TwoStage. ``init``: a
    second stage to start from (its features and weights; then no template). ``on_labels``:
    called with the out-of-fold labels once every fold has finished, before the second stage
    trains (so they can be kept if that training is interrupted)."""
    check_first_stage(first, first_path)
    if options.get("model_type") == "semimarkov":     # a two-stage file holds two chain CRFs
        raise UsageError("a two-stage model's second stage is a CRF that reads the first's labels: drop "
                         "--model-type semimarkov")
    if template is not None:
        template.refuse_segments()
    sentences = list(sentences)
    if not sentences:
        raise CrftkError("no training sentences", source)
    col = first.space.label_col
    n1 = first.space.n_columns
    widths = {len(s.rows[0]) for s in sentences}
    if widths != {n1}:
        raise CrftkError(f"the training data has {'/'.join(map(str, sorted(widths)))} columns, the first stage "
                         f"{first_path} was trained on {n1}", source)
    given = options.pop("label_col", -1)
    if given not in (-1, col, col - n1):
        raise UsageError(f"--label-col {given}: a two-stage model predicts the first stage's label column ({col})")
    threads = options.get("threads", 0)
    if first_labels is None:
        log(f"first stage {first_path}: out-of-fold labels of {plural(len(sentences), 'training sentence')}, "
            f"{folds} folds")
        first_labels, unit = out_of_fold(first, sentences, folds, threads=threads, log=log)
        oof = {"folds": folds, "by": unit}
        if on_labels is not None:
            on_labels(first_labels)
    else:
        if len(first_labels) != len(sentences) or any(len(a) != len(s) for a, s in zip(first_labels, sentences)):
            raise CrftkError("the first stage's labels do not match the training sentences", source)
        oof = {"folds": None, "by": "given", "labels": labels_source}
    gold = [[row[col] for row in s.rows] for s in sentences]
    score = KnownGold(gold, options.get("unknown_label", params.UNKNOWN_LABEL.default)).score(first_labels)
    log(f"first-stage labels of the training data: F1 {score.overall.f1:.2f}, accuracy "
        f"{100 * score.token_accuracy:.2f} (the second stage reads them in column {col})")
    train2 = with_first_labels(sentences, first_labels, col)
    dev2 = None
    if dev:
        dev2 = with_first_labels(dev, Tagger(first, threads=threads).tag(dev), col)
    second = fit(train2, None if init is not None else template, dev=dev2, log=log, source=source,
                 dev_source=dev_source, init=init, label_col=col + 1, **options)
    two = TwoStage(first, second, col, {"first_stage": None if first_path is None else str(first_path),
                                        "out_of_fold": oof})
    two.training_labels = first_labels
    return two
