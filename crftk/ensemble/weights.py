"""Choosing a bag's weights: grid search on held-out F1, uniform, EM for the mixtures, a file.

Held-out data is a list of (Evidence, gold label ids, gold label strings per
sentence) blocks: the development set, or the K held-out folds of
cross-validation, each scored by models that did not see it. The grid and EM
pool the blocks.
"""

import itertools

import numpy as np

from crftk.errors import CrftkError
from crftk.ensemble.combine import MIXTURES, check_weights, combine
from crftk.evaluation.conlleval import evaluate

#: Most grid points searched per combination (a finer step over many bags would take hours).
MAX_GRID = 20_000
WEIGHTS_BY = ("auto", "grid", "uniform", "em")


class HeldOut:
    """One block of held-out data: the members' evidence on it and its gold labels."""

    def __init__(self, evidence, gold_ids, gold, slices):
        self.evidence = evidence
        self.gold_ids = np.asarray(gold_ids)
        self.gold = gold                  # label strings per sentence
        self.slices = slices


def simplex_grid(n_members, step):
    """Every weight vector on the simplex whose entries are multiples of step."""
    k = int(round(1 / step))
    if abs(k * step - 1) > 1e-9:
        raise CrftkError(f"the grid step {step:g} does not divide 1 into equal steps")
    n = _count(k, n_members)
    if n > MAX_GRID:
        raise CrftkError(f"a grid of step {step:g} over {n_members} bags has {n:,} points (at most "
                         f"{MAX_GRID:,}): use a coarser --grid-step, or --weights-by em/uniform")
    out = []
    for cuts in itertools.combinations(range(k + n_members - 1), n_members - 1):
        parts = np.diff([-1, *cuts, k + n_members - 1]) - 1
        out.append(parts / k)
    return np.array(out)


def _count(k, m):
    from math import comb
    return comb(k + m - 1, m - 1)


def f1(blocks, method, weights, decode="viterbi", labels=None):
    """Pooled chunk F1 (and the result) of a combination on held-out blocks."""
    gold, pred = [], []
    for b in blocks:
        ids, _ = combine(b.evidence, method, weights, decode).best()
        names = labels[ids]
        gold.extend(b.gold)
        pred.extend(names[sl].tolist() for sl in b.slices)
    result = evaluate(gold, pred)
    return result.overall.f1, result


def grid_search(blocks, method, labels, step=0.05, decode="viterbi"):
    """(weights, F1): the grid point of best pooled F1 (ties: the one nearest uniform)."""
    M = blocks[0].evidence.n_members
    best = None
    for w in simplex_grid(M, step):
        score, _ = f1(blocks, method, w, decode, labels)
        key = (round(score, 10), -float(np.abs(w - 1 / M).sum()))
        if best is None or key > best[0]:
            best = (key, w, score)
    return best[1], best[2]


def em(blocks, method, n_iter=200, tol=1e-8):
    """Mixture weights of highest held-out likelihood of the gold labels, by EM.

    seq-mixture: one latent member per sentence; trans-mixture: one per
    transition (and per first label). Positions with a label a member does not
    know are left out.
    """
    if method not in MIXTURES:
        raise CrftkError(f"EM chooses the weights of mixtures, not of {method}")
    logp = []                  # [M, items] log-probabilities of the gold labels
    for b in blocks:
        ev, y = b.evidence, b.gold_ids.astype(np.int64)
        sp = ev.sent_ptr
        if method == "seq-mixture":
            ok = np.bincount(np.repeat(np.arange(sp.size - 1), np.diff(sp)), weights=(y < 0),
                             minlength=sp.size - 1) == 0
            logp.append(ev.sequence_logprob(np.maximum(y, 0))[:, ok])
        else:
            _, node, cond = ev.conditionals()
            prev = np.empty_like(y)
            prev[1:] = y[:-1]
            prev[sp[:-1]] = 0                  # a first position's rows all hold its initial distribution
            ok = (y >= 0) & (prev >= 0)
            t = np.flatnonzero(ok)
            with np.errstate(divide="ignore"):
                logp.append(np.log(cond[:, t, prev[t], y[t]]))
    logp = np.concatenate(logp, axis=1)
    M = logp.shape[0]
    lam = np.full(M, 1.0 / M)
    if logp.shape[1] == 0:
        return lam
    for _ in range(n_iter):
        with np.errstate(divide="ignore"):
            a = np.log(lam)[:, None] + logp
        top = a.max(axis=0)
        top[~np.isfinite(top)] = 0.0
        r = np.exp(a - top)
        z = r.sum(axis=0)
        r = r[:, z > 0] / z[z > 0]
        new = r.mean(axis=1) if r.shape[1] else lam
        if np.abs(new - lam).max() < tol:
            lam = new
            break
        lam = new
    return lam


def read_weight_file(path, names):
    """Weights from a text file: one ``NAME WEIGHT`` line per bag member (``#`` comments), or
    ``COMBINATION NAME=WEIGHT ...`` lines for several combinations; returns {method or None: w}."""
    from crftk.ensemble.combine import METHODS
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise CrftkError(f"cannot read the weight file ({e.strerror if isinstance(e, OSError) else 'not UTF-8'})",
                         path) from None
    # each line is checked as it is read, so that an error names the first bad line
    single, out = {}, {}
    for n, line in enumerate(lines, 1):
        words = line.split()
        if not words or words[0].startswith("#"):
            continue
        if words[0] in METHODS:
            if words[0] in out:
                raise CrftkError(f"combination {words[0]} is given twice", path, n)
            w = {}
            for item in words[1:]:
                name, sep, value = item.partition("=")
                if name in w:
                    raise CrftkError(f"bag {name!r} is given twice", path, n)
                w[name] = _weight(value if sep else "", path, n)
            out[words[0]] = check_weights(_ordered(w, names, path, n), len(names), (path, n))
            continue
        if len(words) != 2:
            raise CrftkError("expected 'NAME WEIGHT' or 'COMBINATION NAME=WEIGHT ...'", path, n)
        if words[0] in single:
            raise CrftkError(f"bag {words[0]!r} is given twice", path, n)
        _known(words[0], names, path, n)
        single[words[0]] = (_weight(words[1], path, n), n)
    if single:
        last = max(n for _, n in single.values())
        w = _ordered({k: v for k, (v, _) in single.items()}, names, path, last)
        out[None] = check_weights(w, len(names), (path, last))
    if not out:
        raise CrftkError("the weight file gives no weights", path)
    return out


def _weight(text, path, line):
    try:
        x = float(text)
    except ValueError:
        raise CrftkError(f"{text!r} is not a weight", path, line) from None
    if not np.isfinite(x) or x < 0:
        raise CrftkError(f"weight {text} is not a finite number >= 0", path, line)
    return x


def _known(name, names, path, line):
    if name not in names:
        raise CrftkError(f"the bag has no member {name!r} (its members: {' '.join(names)})", path, line)


def _ordered(weights, names, path, line):
    for name in weights:
        _known(name, names, path, line)
    missing = [n for n in names if n not in weights]
    if missing:
        raise CrftkError(f"no weight for bag member {missing[0]!r}", path, line)
    return [weights[n] for n in names]
