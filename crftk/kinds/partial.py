"""Training a chain on partial labels (crftk.io.partial): what it refuses, the --init model's
masks, the feasibility of each sentence under the constraints, the log line, and dev scoring
that skips tokens whose gold label is unknown."""

import numpy as np

from crftk.errors import CrftkError, shown
from crftk.evaluation.conlleval import evaluate
from crftk.io.partial import AnnotationError, is_partial, resolve
from crftk.progress import plural
from crftk.structures.constraints import check_feasible, check_gold, check_scheme_labels
from crftk.structures.pairs import current_tags

#: what cannot train on partial labels, and why (one line each)
_ONLINE = ("perceptron", "sgd", "pa", "arow")
_COUNTS = ("gis", "pcg", "mixed-cg")


def first_partial(corpus, origins):
    """(file, line) of the first partial token of an encoded corpus."""
    k, t = corpus.position(int(np.flatnonzero(corpus.labels < 0)[0]))
    return origins.locate(k, t)


def check_partial(opt, corpus, origins):
    """Refuse, in one line at the first partial token, what cannot train on partial labels."""
    why = None
    if opt["model_type"] == "memm":
        why = ("an MEMM normalizes each token given the previous gold label, which a partial token does "
               "not have: train a CRF (--model-type crf)")
    elif opt["objective"] != "map":
        why = (f"--objective {opt['objective']} compares the gold labeling with the best incorrect one, and "
               "partial labels have no single gold labeling: use --objective map")
    elif opt["algorithm"] in _ONLINE:
        why = (f"--algorithm {opt['algorithm']} updates towards one gold labeling per sentence: use lbfgs or cg")
    elif opt["algorithm"] in _COUNTS:
        why = (f"--algorithm {opt['algorithm']} needs the feature counts of one gold labeling, which partial "
               "labels do not fix: use lbfgs or cg")
    if why is not None:
        raise CrftkError(f"the training data has partial labels: {why}", *first_partial(corpus, origins))


def partial_sentences(corpus):
    """bool [sentences]: whether a sentence of the corpus has a partial token (gold -1)."""
    return np.add.reduceat((corpus.labels < 0).astype(np.int64), corpus.sent_ptr[:-1]) > 0


def _tokens_and_pointer(corpus, sentences):
    """(token ids, sentence pointer) of the given sentences of a corpus, taken as a corpus of their own."""
    ptr = np.zeros(sentences.size + 1, dtype=np.int64)
    np.cumsum(np.diff(corpus.sent_ptr)[sentences], out=ptr[1:])
    return corpus.tokens_of(sentences), ptr


def partial_line(corpus, order2=False):
    """The log line of the partial tokens of a training corpus (of order 1: how many are unknown,
    how many have a set; a pair's mask does not tell)."""
    partial = corpus.labels < 0
    allowed = corpus.allowed
    sentences = int(partial_sentences(corpus).sum())
    n = int(partial.sum())
    what = "partial or after a partial one"
    if not order2:
        unknown = int((partial & (allowed.sum(axis=1) == allowed.shape[1])).sum())
        what = f"{unknown:,} unknown, {n - unknown:,} with a label set"
    return f"partial labels: {plural(n, 'token')} of {corpus.n_tokens:,} ({what}) in {plural(sentences, 'sentence')}"


def init_allowed(corpus, unknown, sents, space, marker, origins):
    """The allowed mask of a corpus encoded with an --init model's space (its tokens ``unknown``
    have no label of the model): partial cells resolved against the model's labels."""
    c = space.label_col
    where = [corpus.position(int(u)) for u in unknown]
    cells = [sents[k].rows[t][c] for k, t in where]
    strings = list(dict.fromkeys(cells))
    index = {x: i for i, x in enumerate(strings)}
    try:
        resolved = resolve(strings, [index[x] for x in cells], marker, fixed=space.labels)
    except AnnotationError as e:
        raise CrftkError(e.message, *origins.locate(*where[e.token])) from None
    except CrftkError as e:
        raise CrftkError(e.message, *origins.locate(*where[0])) from None
    allowed = np.zeros((corpus.n_tokens, space.n_labels), dtype=np.uint8)
    known = np.flatnonzero(corpus.labels >= 0)
    allowed[known, corpus.labels[known]] = 1
    allowed[unknown] = resolved.allowed
    return np.ascontiguousarray(allowed)


def check_annotation(job, opt):
    """Before training on partial labels: every sentence has a labeling that the constraints (and,
    for order 2, the agreement of adjacent pairs) permit; the fully labeled sentences' labels are
    checked as without partial labels."""
    structure, corpus, origins = job.structure, job.corpus, job.origins
    scheme = opt["constraints"]
    has = partial_sentences(corpus)
    if scheme != "none":
        labels = structure.space.labels
        tags, y = current_tags(labels, corpus.labels) if job.order2 else (labels, corpus.labels)
        y = np.where(corpus.labels < 0, -1, y)
        check_scheme_labels(tags, y, corpus.sent_ptr, scheme, origins.locate)
        full = np.flatnonzero(~has)
        tokens, ptr = _tokens_and_pointer(corpus, full)
        check_gold(tags, y[tokens], ptr, scheme, lambda k, t: origins.locate(int(full[k]), t))
    pinned = structure.pinned(scheme)
    if pinned is None:
        return          # a first-order chain without constraints: every allowed lattice has a labeling
    lay, L = structure.layout, structure.space.n_labels
    mask = pinned[0]
    some = np.flatnonzero(has)
    tokens, ptr = _tokens_and_pointer(corpus, some)
    why = f" under --constraints {scheme}" if scheme != "none" else ""
    check_feasible(~mask[lay["trans"]].reshape(L, L), ~mask[lay["start"]], ~mask[lay["end"]],
                   corpus.allowed[tokens], ptr, lambda k, t: origins.locate(int(some[k]), t), why)


class KnownGold:
    """The tokens of gold label sequences whose label is known (not partial, crftk.io.partial):
    ``gold`` their labels, ``skipped`` how many were left out; ``of(labels)`` the same tokens of
    other sequences (predictions), ``score(pred)`` conlleval's scores on them."""

    def __init__(self, gold, marker):
        self.gold, self.keep, self.skipped = gold, None, 0
        if not marker:
            return
        keep = [[t for t, lab in enumerate(sent) if not is_partial(lab, marker)] for sent in gold]
        skipped = sum(len(sent) - len(idx) for sent, idx in zip(gold, keep))
        if skipped:
            self.keep, self.skipped = keep, skipped
            self.gold = self.of(gold)

    def of(self, labels):
        if self.keep is None:
            return labels
        return [[sent[t] for t in idx] for sent, idx in zip(labels, self.keep)]

    def score(self, pred):
        return evaluate(self.gold, self.of(pred))


def refuse_partial_cells(sentences, label_cols, marker, why):
    """One line at the first partial label (crftk.io.partial) of the given columns of sentences (a
    list), saying ``why`` what reads them cannot train on it."""
    if not marker:
        return
    for s in sentences:
        for t, row in enumerate(s.rows):
            for c in label_cols:        # a column rows lack is refused by whoever reads it
                if -len(row) <= c < len(row) and is_partial(row[c], marker):
                    raise CrftkError(f"label {shown(row[c])} is partial (unknown or a set): {why}",
                                     s.source, s.line + t if s.line else None)
