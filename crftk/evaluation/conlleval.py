"""Chunk-based evaluation (CoNLL-2000 ``conlleval`` conventions) and McNemar's test.

Chunks
------
A tag is split on its *first* dash into a prefix and a type: ``"B-NP"`` is
prefix ``B``, type ``NP``; ``"B-X-Y"`` is prefix ``B``, type ``X-Y``; a tag
without a dash (``"O"``) is its own prefix with an empty type.

Chunk boundaries are decided from each pair of adjacent tags, with the
sentence boundary acting as an ``O`` on both sides, by the rules conlleval
uses, extended with ``S`` (single-token chunk) so that IOBES works too:

* a chunk **starts** at a token tagged ``B``, ``S``, ``[`` or ``]``; at an
  ``I`` or ``E`` token that follows ``O``, ``E`` or ``S`` (so ``O I-NP I-NP``
  is a chunk beginning at the first ``I``, and in IOE1 ``E-NP I-NP`` starts a
  new chunk at the ``I``); and at any non-``O`` token whose type differs from
  the previous token's type;
* a chunk **ends** after a token tagged ``E``, ``S``, ``[`` or ``]``; after a
  ``B`` or ``I`` token followed by ``B``, ``S`` or ``O``; after any non-``O``
  token followed by a token of another type; and wherever a new chunk starts.

A chunk takes the type of the token it starts at.  These rules cover IOB1,
IOB2, IOE1, IOE2 and IOBES with no need to name the scheme.  Bracket tags
make single-token chunks, as they do in conlleval.

Naming a scheme (``iob1``, ``iob2``, ``ioe1``, ``ioe2``, ``iobes``) only adds
a check that every tag uses a prefix of that scheme; the rules are the same.
"""

import os
import re
from collections import Counter
from dataclasses import dataclass, field

from crftk.io.conll import codec, read_sentences
from crftk.io.partial import DEFAULT_MARKER
from crftk.errors import CrftkError, shown
from crftk.progress import plural
from crftk.io import schemes

__all__ = [
    "SCHEMES",
    "are_chunk_tags",
    "chunks",
    "evaluate",
    "Evaluation",
    "ChunkScores",
    "mcnemar",
    "McNemar",
    "read_labels",
    "read_pairs",
    "read_two",
]


# ---------------------------------------------------------------------------
# chunk extraction

SCHEMES = ("auto",) + schemes.SCHEMES

# conlleval's chunk rules live in the I/O layer (crftk.io.schemes), which converts between schemes by them
_extract = schemes.read_chunks


def _check_scheme(scheme):
    return schemes.canonical(scheme, SCHEMES)


def _tag_ok(tag, allowed):
    if tag == "O":
        return True
    prefix, dash, _ = tag.partition("-")
    return bool(dash) and prefix in allowed


def _validate(sentences, scheme, what, locate=None):
    """Raise CrftkError for the first tag not valid under ``scheme``.

    ``locate(what, sentence, token)`` gives the (file, line) of a tag, if known.
    """
    allowed = frozenset(schemes.PREFIXES[scheme])
    seen = set()
    for s in sentences:
        seen.update(s)
    bad = {t for t in seen if not _tag_ok(t, allowed)}
    if not bad:
        return
    for si, s in enumerate(sentences):
        for ti, t in enumerate(s):
            if t in bad:
                path, line = locate(what, si, ti) if locate is not None else (None, None)
                where = f" ({what} sentence {si + 1}, token {ti + 1})" if what and path is None else ""
                raise CrftkError(
                    f"{what + ' ' if what else ''}tag {shown(t)} is not valid in the {scheme} scheme{where}; "
                    f"allowed: 'O' and {'/'.join(sorted(allowed))} prefixes with a type", path, line
                )


def chunks(tags, scheme="auto"):
    """Chunks of one sentence: a list of ``(type, start, end_exclusive)``.

    ``tags`` is a sequence of tag strings.  With an explicit ``scheme`` the tags
    are first checked to use only that scheme's prefixes (CrftkError if not).
    """
    scheme = _check_scheme(scheme)
    tags = list(tags)
    if scheme != "auto":
        _validate([tags], scheme, "")
    return _extract(tags)


# ---------------------------------------------------------------------------
# evaluation


def _ratio(num, den):
    return num / den if den else 0.0


@dataclass
class ChunkScores:
    """Chunk counts and conlleval-style scores (precision/recall/f1 in percent)."""

    n_gold: int = 0
    n_pred: int = 0
    n_correct: int = 0

    @property
    def precision(self):
        return 100.0 * _ratio(self.n_correct, self.n_pred)

    @property
    def recall(self):
        return 100.0 * _ratio(self.n_correct, self.n_gold)

    @property
    def f1(self):
        p, r = self.precision, self.recall
        return 2.0 * p * r / (p + r) if p + r > 0 else 0.0

    def to_dict(self):
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "n_gold": self.n_gold,
            "n_pred": self.n_pred,
            "n_correct": self.n_correct,
        }

    def __getitem__(self, key):
        return self.to_dict()[key]


@dataclass
class Evaluation:
    """Result of :func:`evaluate`."""

    n_tokens: int = 0
    n_sentences: int = 0
    n_correct_tokens: int = 0
    n_correct_sentences: int = 0
    overall: ChunkScores = field(default_factory=ChunkScores)
    per_type: dict = field(default_factory=dict)
    scheme: str = "auto"
    chunk_tags: bool = True  # False: no label has a chunk prefix (POS tags), only accuracy applies

    @property
    def token_accuracy(self):
        """Fraction (0..1) of tokens whose predicted tag equals the gold tag."""
        return _ratio(self.n_correct_tokens, self.n_tokens)

    @property
    def sentence_accuracy(self):
        """Fraction (0..1) of sentences whose tags are all correct."""
        return _ratio(self.n_correct_sentences, self.n_sentences)

    def to_dict(self):
        return {
            "scheme": self.scheme,
            "chunk_tags": self.chunk_tags,
            "n_tokens": self.n_tokens,
            "n_sentences": self.n_sentences,
            "n_correct_tokens": self.n_correct_tokens,
            "n_correct_sentences": self.n_correct_sentences,
            "token_accuracy": 100.0 * self.token_accuracy,
            "sentence_accuracy": 100.0 * self.sentence_accuracy,
            "overall": self.overall.to_dict(),
            "per_type": {t: self.per_type[t].to_dict() for t in sorted(self.per_type)},
        }

    def format(self):
        """A text report laid out like conlleval's output; token accuracy alone when the labels
        are not chunk tags."""
        o = self.overall
        sentences = (f"sentence accuracy: {100.0 * self.sentence_accuracy:6.2f}% "
                     f"({self.n_correct_sentences} of {self.n_sentences} sentences correct)")
        if not self.chunk_tags:
            return (f"processed {self.n_tokens} tokens; the labels are not chunk tags (none has a B-, I-, "
                    f"E- or S- prefix), so chunk precision, recall and F1 do not apply: token accuracy\n"
                    f"accuracy: {100.0 * self.token_accuracy:6.2f}% ({self.n_correct_tokens} of "
                    f"{self.n_tokens} tokens correct)\n{sentences}\n")
        lines = [
            f"processed {self.n_tokens} tokens with {o.n_gold} phrases; "
            f"found: {o.n_pred} phrases; correct: {o.n_correct}.",
            f"accuracy: {100.0 * self.token_accuracy:6.2f}%; "
            f"precision: {o.precision:6.2f}%; recall: {o.recall:6.2f}%; "
            f"FB1: {o.f1:6.2f}",
        ]
        for t in sorted(self.per_type):
            s = self.per_type[t]
            lines.append(
                f"{t:>17}: precision: {s.precision:6.2f}%; recall: {s.recall:6.2f}%; "
                f"FB1: {s.f1:6.2f}  {s.n_pred}"
            )
        lines.append(sentences)
        return "\n".join(lines) + "\n"

    def __str__(self):
        return self.format()


def evaluate(gold_sentences, pred_sentences, scheme="auto", locate=None):
    """Score predicted tag sequences against gold ones; returns an :class:`Evaluation`.

    Both arguments are lists of sentences, each a list of tag strings, and must
    have the same shape.  A predicted chunk is correct when a gold chunk has the
    same type, start and end; when no label has a chunk prefix (POS tags) only the
    accuracies apply (``chunk_tags`` is False). ``locate("gold"|"predicted", sentence, token)``
    gives the (file, line) of a tag for error messages (see :class:`Labels`).
    """
    scheme = _check_scheme(scheme)
    gold_sentences = list(gold_sentences)
    pred_sentences = list(pred_sentences)
    if len(gold_sentences) != len(pred_sentences):
        raise CrftkError(
            f"gold has {len(gold_sentences)} sentences but prediction has "
            f"{len(pred_sentences)}"
        )
    for i, (g, p) in enumerate(zip(gold_sentences, pred_sentences)):
        if len(g) != len(p):
            raise CrftkError(
                f"sentence {i + 1}: gold has {len(g)} tokens but prediction has {len(p)}"
            )
    if scheme != "auto":
        _validate(gold_sentences, scheme, "gold", locate)
        _validate(pred_sentences, scheme, "predicted", locate)

    labels = set()
    for s in gold_sentences:
        labels.update(s)
    for s in pred_sentences:
        labels.update(s)

    n_tokens = n_correct_tokens = n_correct_sentences = 0
    gold_count = {}
    pred_count = {}
    correct_count = {}
    extract = _extract
    for g, p in zip(gold_sentences, pred_sentences):
        n_tokens += len(g)
        gc = extract(g)
        if g == p:
            n_correct_sentences += 1
            n_correct_tokens += len(g)
            for c in gc:
                t = c[0]
                gold_count[t] = gold_count.get(t, 0) + 1
                pred_count[t] = pred_count.get(t, 0) + 1
                correct_count[t] = correct_count.get(t, 0) + 1
            continue
        n_correct_tokens += sum(1 for a, b in zip(g, p) if a == b)
        pc = extract(p)
        for c in gc:
            t = c[0]
            gold_count[t] = gold_count.get(t, 0) + 1
        if gc:
            gset = set(gc)
            for c in pc:
                t = c[0]
                pred_count[t] = pred_count.get(t, 0) + 1
                if c in gset:
                    correct_count[t] = correct_count.get(t, 0) + 1
        else:
            for c in pc:
                t = c[0]
                pred_count[t] = pred_count.get(t, 0) + 1

    per_type = {}
    for t in set(gold_count) | set(pred_count):
        per_type[t] = ChunkScores(
            gold_count.get(t, 0), pred_count.get(t, 0), correct_count.get(t, 0)
        )
    overall = ChunkScores(
        sum(gold_count.values()), sum(pred_count.values()), sum(correct_count.values())
    )
    return Evaluation(
        n_tokens=n_tokens,
        n_sentences=len(gold_sentences),
        n_correct_tokens=n_correct_tokens,
        n_correct_sentences=n_correct_sentences,
        overall=overall,
        per_type=per_type,
        scheme=scheme,
        chunk_tags=are_chunk_tags(labels),
    )


# ---------------------------------------------------------------------------
# McNemar's test

_EXACT_BELOW = 50  # use the exact binomial test when b + c is below this


@dataclass
class McNemar:
    """Result of :func:`mcnemar` (A and B are the two systems)."""

    unit: str
    n_a_only: int  # A correct, B wrong
    n_b_only: int  # B correct, A wrong
    n_both: int
    n_neither: int
    statistic: float
    p_value: float
    method: str

    @property
    def n(self):
        return self.n_a_only + self.n_b_only + self.n_both + self.n_neither

    def to_dict(self):
        return {
            "unit": self.unit,
            "n": self.n,
            "n_a_only": self.n_a_only,
            "n_b_only": self.n_b_only,
            "n_both": self.n_both,
            "n_neither": self.n_neither,
            "statistic": self.statistic,
            "p_value": self.p_value,
            "method": self.method,
        }

    def format(self):
        n = self.n
        acc_a = 100.0 * _ratio(self.n_a_only + self.n_both, n)
        acc_b = 100.0 * _ratio(self.n_b_only + self.n_both, n)
        if self.method == "exact-binomial":
            how = (
                f"exact two-sided binomial test, k = {int(self.statistic)} "
                f"of n = {self.n_a_only + self.n_b_only}, p = 0.5"
            )
        elif self.method == "chi2":
            how = f"chi-square with continuity correction, 1 df, statistic = {self.statistic:.4f}"
        else:
            how = "no discordant pairs"
        return (
            f"McNemar's test over {n} {self.unit}s:\n"
            f"  accuracy A: {acc_a:6.2f}%   accuracy B: {acc_b:6.2f}%\n"
            f"  A right, B wrong: {self.n_a_only}   A wrong, B right: {self.n_b_only}   "
            f"both right: {self.n_both}   both wrong: {self.n_neither}\n"
            f"  {how}\n"
            f"  p-value: {self.p_value:.4g}\n"
        )

    def __str__(self):
        return self.format()


def _mcnemar_p(b, c):
    """(statistic, p_value, method) for discordant counts b and c."""
    n = b + c
    if n == 0:
        return 0.0, 1.0, "none"
    if n < _EXACT_BELOW:
        from scipy.stats import binomtest

        p = binomtest(b, n, 0.5, alternative="two-sided").pvalue
        return float(b), min(1.0, float(p)), "exact-binomial"
    from scipy.stats import chi2

    stat = (abs(b - c) - 1) ** 2 / n
    return float(stat), float(chi2.sf(stat, 1)), "chi2"


def mcnemar(gold_sentences, pred_a_sentences, pred_b_sentences, unit="token"):
    """McNemar's test comparing systems A and B on the same gold data.

    ``unit="token"`` pairs per-token correctness, ``unit="sentence"`` per-sentence
    exact match.  Uses the exact two-sided binomial test on the discordant
    counts when there are fewer than 50 of them, otherwise the continuity
    corrected chi-square statistic with one degree of freedom.
    """
    if unit not in ("token", "sentence"):
        raise CrftkError(f"unknown unit {unit!r} for McNemar's test (token or sentence)")
    gold = list(gold_sentences)
    a_s = list(pred_a_sentences)
    b_s = list(pred_b_sentences)
    if not (len(gold) == len(a_s) == len(b_s)):
        raise CrftkError(
            f"McNemar's test needs the same sentences: gold has {len(gold)}, "
            f"A has {len(a_s)}, B has {len(b_s)}"
        )
    a_only = b_only = both = neither = 0
    for i, (g, a, b) in enumerate(zip(gold, a_s, b_s)):
        if not (len(g) == len(a) == len(b)):
            raise CrftkError(
                f"sentence {i + 1}: gold has {len(g)} tokens, A has {len(a)}, B has {len(b)}"
            )
        if unit == "sentence":
            ra, rb = list(a) == list(g), list(b) == list(g)
            if ra and rb:
                both += 1
            elif ra:
                a_only += 1
            elif rb:
                b_only += 1
            else:
                neither += 1
        else:
            for tg, ta, tb in zip(g, a, b):
                if ta == tg:
                    if tb == tg:
                        both += 1
                    else:
                        a_only += 1
                elif tb == tg:
                    b_only += 1
                else:
                    neither += 1
    stat, p, method = _mcnemar_p(a_only, b_only)
    return McNemar(unit, a_only, b_only, both, neither, stat, p, method)


# ---------------------------------------------------------------------------
# reading column files


class _Sentences:
    """Sentences of selected columns, with the line number of every token."""

    def __init__(self, name):
        self.name = name
        self.sentences = []  # list of lists of tuples of column values
        self.lines = []  # line number of each token, parallel to sentences
        self.ends = []  # line number that closed each sentence
        self.last_line = 0
        self.n_columns = 0
        self.nbest = 0  # labelings per sentence in n-best output (0: not n-best output)
        self.annotated = False  # has "# prob" lines: crftk tag -v output
        self.sample = []  # whole rows of the first sentences read, to say which columns pair up


def _source_name(source):
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fsdecode(os.fspath(source))
        return "<stdin>" if path == "-" else path
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else "<input>"


_SAMPLE_TOKENS = 5000  # rows kept whole for the diagnosis of columns that cannot pair up


def _read(source, cols, nbest_rank=0, max_sentence_tokens=None, encoding="utf-8"):
    """Read a column file (in ``encoding``), keeping columns ``cols`` (indices, negative allowed).

    Of n-best output (``# nbest K P`` before each labeling) only the labelings
    of rank ``nbest_rank`` are kept; every sentence must have one. Outside
    n-best output ``nbest_rank`` must be 0.
    """
    name = _source_name(source)
    encoding = codec(encoding)
    if (encoding == "utf-8" and not isinstance(source, (str, bytes, os.PathLike))
            and not hasattr(source, "read")):
        source = [line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape")
                  for line in source]
    out = _Sentences(name)
    need = max(max(c + 1, -c) for c in cols)
    rank = None
    end = 0
    sampled = 0
    group = None  # [first line, labelings] of the n-best list being read
    short = None  # the first n-best list without rank nbest_rank
    for item in read_sentences(source, passthrough=True, max_sentence_tokens=max_sentence_tokens,
                               encoding=encoding):
        if isinstance(item, str):
            fields = item.split()
            if len(fields) >= 3 and fields[:2] == ["#", "nbest"] and fields[2].isdigit():
                rank = int(fields[2])
                out.nbest = max(out.nbest, rank + 1)
                if rank == 0:
                    if short is None and group is not None and group[1] <= nbest_rank:
                        short = group
                    group = [None, 0]
                if group is not None:
                    group[1] = max(group[1], rank + 1)
            elif fields[:2] == ["#", "prob"]:
                out.annotated = True
            continue
        first = item.line
        if group is not None and group[0] is None:
            group[0] = first
        if not out.n_columns:
            out.n_columns = len(item.rows[0])
            if out.n_columns < need:
                raise CrftkError(
                    f"{out.n_columns} column{'s' if out.n_columns != 1 else ''} but column "
                    f"index {_col_desc(cols, out.n_columns)} was asked for: eval needs a gold "
                    f"and a predicted label column", name, first)
        end = first + len(item)
        if rank is not None and rank != nbest_rank:
            continue
        out.sentences.append([tuple(row[c] for c in cols) for row in item.rows])
        out.lines.append(list(range(first, end)))
        out.ends.append(end)
        if sampled < _SAMPLE_TOKENS:
            out.sample.append(item.rows)
            sampled += len(item.rows)
    out.last_line = end
    if short is None and group is not None and group[1] <= nbest_rank:
        short = group
    _check_rank(out, nbest_rank, short)
    return out


def _check_rank(data, nbest_rank, short):
    """Raise unless every sentence of ``data`` has a labeling of rank ``nbest_rank``."""
    counted = "ranks count from 0, the best labeling, as the file's '# nbest RANK P' lines do"
    if nbest_rank and not data.nbest and data.n_columns:
        raise CrftkError(f"nbest rank {nbest_rank} was asked for, but this is not n-best output (no "
                         f"'# nbest' lines, which 'crftk tag -n K' writes): leave the rank at 0",
                         data.name)
    if nbest_rank >= data.nbest > 0:
        raise CrftkError(f"no labeling of nbest rank {nbest_rank} here: the n-best lists have ranks 0 to "
                         f"{data.nbest - 1} ({counted})", data.name)
    if short is not None:
        raise CrftkError(f"this sentence has {plural(short[1], 'labeling')} (ranks 0 to {short[1] - 1}), "
                         f"so none of nbest rank {nbest_rank}; 'crftk tag -n K' lists fewer than K "
                         f"labelings for a sentence that has fewer ({counted})", data.name, short[0])


def _col_desc(cols, ncols):
    bad = [c for c in cols if not -ncols <= c < ncols]
    return ", ".join(str(c) for c in bad)


_PROBABILITY = re.compile(r"^[01]\.\d+$")
_LABEL_PROBABILITY = re.compile(r"^.+/[01]\.\d+$")
_CHUNK_PREFIXES = frozenset("BIES[]")

#: Tokens with a label other than O that each of two columns needs before sharing no such label
#: and no chunk type proves that they are not the gold and predicted labels of one task: a poor
#: tagger can miss every gold type of a sentence or two, not of this many tokens.
_MIN_EVIDENCE = 20


def _chunk_type(label):
    """The type of a chunk tag (``B-NP``: ``NP``), None for a label that is not one."""
    prefix, dash, kind = label.partition("-")
    return kind if dash and kind and prefix in _CHUNK_PREFIXES else None


def are_chunk_tags(labels):
    """Whether chunk scores apply to ``labels``: one has a chunk prefix, or all are ``O``.

    POS tags (``NN``, ``PRP$``, ``-LRB-``) have none: of those only token accuracy means anything.
    """
    labels = set(labels)
    return labels <= {"O"} or any(_chunk_type(t) is not None for t in labels)


def _counts(sentences):
    counts = Counter()
    for s in sentences:
        counts.update(s)
    return counts


def _unrelated(gold_counts, pred_counts, min_tokens=_MIN_EVIDENCE):
    """Why two label columns (value counts) cannot be gold and predicted labels of one task, or None.

    They can unless both have labels other than O, share none of those and no chunk type, and each
    has ``min_tokens`` tokens of them. So predictions of all O, a gold column without chunks, IOB2
    predictions against IOBES gold (B-PER and S-PER share PER) and a poor tagger on a sentence or
    two pass; chunk against NER tags (sharing O only) and POS against chunk tags do not.
    """
    gold = {v: n for v, n in gold_counts.items() if v != "O"}
    pred = {v: n for v, n in pred_counts.items() if v != "O"}
    if not gold or not pred or gold.keys() & pred.keys():
        return None
    gold_types = {_chunk_type(v) for v in gold} - {None}
    pred_types = {_chunk_type(v) for v in pred} - {None}
    if gold_types & pred_types:
        return None
    if sum(gold.values()) < min_tokens or sum(pred.values()) < min_tokens:
        return None
    if gold_types and pred_types:
        return f"share no chunk type (gold: {_sample(gold_types)}; predicted: {_sample(pred_types)})"
    shared = " but O" if "O" in gold_counts and "O" in pred_counts else ""
    return f"share no label{shared} (gold: {_sample(gold)}; predicted: {_sample(pred)})"


def _label_columns(sample):
    """Indices of the sample's columns that may hold labels: not the word (column 0 of three or
    more), not probabilities (``tag -v``), not label/probability pairs (``tag -vv``)."""
    if not sample:
        return []
    n = len(sample[0][0])
    out = []
    for c in range(1 if n >= 3 else 0, n):
        values = {row[c] for s in sample for row in s}
        if not all(_PROBABILITY.match(v) for v in values) and \
                not all(_LABEL_PROBABILITY.match(v) for v in values):
            out.append(c)
    return out


def _column_pairs(gold_sample, pred_sample):
    """The (gold, predicted) column pairs (indices from 0) that look like a gold and a predicted
    labeling of one task, the pair of the last label column first.

    One file (the two samples the same): each label column, from the last, is paired with the
    earlier column of related labels (see :func:`_unrelated`) it agrees with on most tokens, so
    that the columns 'crftk tag' appends (one per stage of a pipeline, one per chain of a
    factorial model) find their gold columns. Two files: one pair at most.
    """
    same = gold_sample is pred_sample
    gold_cols, pred_cols = _label_columns(gold_sample), _label_columns(pred_sample)
    if not gold_cols or not pred_cols:
        return []
    gold_rows = [row for s in gold_sample for row in s]
    pred_rows = [row for s in pred_sample for row in s]
    n = min(len(gold_rows), len(pred_rows))
    counts = {}

    def column_counts(rows, c, side):
        if (side, c) not in counts:
            counts[side, c] = Counter(row[c] for row in rows[:n])
        return counts[side, c]

    pairs, used = [], set()
    for p in reversed(pred_cols):
        if p in used:
            continue
        best, best_agree = None, 0
        for g in gold_cols:
            if same and (g >= p or g in used):
                continue
            if _unrelated(column_counts(gold_rows, g, "gold"), column_counts(pred_rows, p, "pred"), 1):
                continue
            agree = sum(1 for i in range(n) if gold_rows[i][g] == pred_rows[i][p])
            if agree > best_agree:
                best, best_agree = g, agree
        if best is not None:
            pairs.append((best, p))
            used.update((best, p))
            if not same:
                break
    return pairs


def _advice(gdata, pdata):
    """What to pass instead of the columns asked for, or None when no columns pair up."""
    pairs = _column_pairs(gdata.sample, pdata.sample)
    if not pairs:
        return None
    ng, np_ = gdata.n_columns, pdata.n_columns
    g, p = pairs[0]
    text = f"pass --gold-col {g - ng} --pred-col {p - np_}"
    if len(pairs) > 1:
        every = " ".join(f"--gold-col {g - ng} --pred-col {p - np_}" for g, p in sorted(pairs))
        text += (f" (the last label column), or {every} to score each of the {len(pairs)} label columns "
                 f"and their joint accuracy (a pipeline appends one column per stage, a factorial "
                 f"model one per chain)")
    last = _label_columns(pdata.sample)[-1]
    if gdata is pdata and all(p != last for _, p in pairs):
        text += f"; column {last - np_} has no gold column of its kind here"
    return text


def _check_labels(gold, pred, gdata, pdata, gold_col, pred_col):
    """Raise when the columns asked for cannot be gold and predicted labels, saying what to pass.

    Catches the usual slips: the probabilities of ``crftk tag -v``/``-vv`` output taken for
    labels, columns of two different tasks (the last two columns of a pipeline's or factorial
    model's output, of a file with gold labels only, or of a file tagged for another task).
    """
    where = pdata.name
    same = gdata is pdata
    g_values, p_values = _counts(gold), _counts(pred)

    def instead(untagged):
        advice = _advice(gdata, pdata)
        if advice is not None:
            return advice
        if not untagged:
            return "no column here holds gold labels of the predictions' kind (was the input tagged " \
                   "without its gold column?)"
        if same:
            return ("is the file tagged? A file with gold labels only must be tagged first (crftk tag -m "
                    "MODEL FILE), or scored against another file (crftk eval GOLD PREDICTED)")
        return "are both files labeled for the same task? --gold-col and --pred-col pick other columns"

    for what, col, values in (("predicted", pred_col, p_values), ("gold", gold_col, g_values)):
        if values and all(_PROBABILITY.match(v) for v in values):
            raise CrftkError(f"the {what} column ({col}) holds probabilities, not labels: this looks like "
                             f"'crftk tag -v' output, which follows each label column it appends with "
                             f"that label's probability: {instead(False)}", where)
        if values and all(_LABEL_PROBABILITY.match(v) for v in values):
            raise CrftkError(f"the {what} column ({col}) holds label/probability pairs: this looks like "
                             f"'crftk tag -vv' output, whose rows end with the gold label, the predicted "
                             f"label, its probability and one label/probability column per label: "
                             f"{instead(False)}", where)
    reason = _unrelated(g_values, p_values)
    if reason is not None:
        raise CrftkError(f"the gold column ({gold_col}) and the predicted column ({pred_col}) {reason}, "
                         f"so they cannot be the gold and predicted labels of one task: {instead(True)}",
                         where)


def _sample(values, n=4):
    shown = sorted(values)[:n]
    return ", ".join(shown) + (", ..." if len(values) > n else "")


@dataclass
class Labels:
    """Gold and predicted tags read from files (see :func:`read_labels`)."""

    gold: list
    pred: list
    nbest: int = 0            # labelings per sentence when the predictions are n-best lists
    nbest_rank: int = 0       # the rank that was kept
    sources: tuple = ()       # (gold, predicted) _Sentences, for locating a tag

    def locate(self, which, sentence, token):
        """(file, line) of a gold or predicted tag, for messages."""
        data = self.sources[0 if which == "gold" else -1]
        return data.name, data.lines[sentence][token]

    def check_same_gold(self, first):
        """Raise CrftkError at the first token where these gold labels differ from ``first``'s
        (McNemar's test needs two systems' outputs on the same data)."""
        what = "the two systems' outputs do not share the same gold labels"
        for si, (a, b) in enumerate(zip(first.gold, self.gold)):
            for ti, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    raise CrftkError(f"{what}: gold {shown(y)} here, {shown(x)} in the first output",
                                     *self.locate("gold", si, ti))
            if len(a) != len(b):
                raise CrftkError(f"{what}: this sentence has {plural(len(b), 'token')} here, {len(a)} "
                                 "in the first output", *self.locate("gold", si, 0))
        if len(first.gold) != len(self.gold):
            raise CrftkError(f"{what}: {plural(len(self.gold), 'sentence')} here, {len(first.gold)} "
                             "in the first output", self.sources[0].name)


def refuse_unknown_gold(labels):
    """crftk eval scores fully labeled gold only: one line at the first gold tag that is the
    default unknown marker ``?`` of partial labels (crftk.io.partial)."""
    for k, sent in enumerate(labels.gold):
        if DEFAULT_MARKER in sent:
            raise CrftkError(f"gold label {shown(DEFAULT_MARKER)} is unknown (partial annotation): crftk eval "
                             "scores fully labeled gold only; drop the sentences with unknown labels first",
                             *labels.locate("gold", k, sent.index(DEFAULT_MARKER)))


def read_labels(gold_file, pred_file=None, *, gold_col=None, pred_col=-1, nbest_rank=0, check=True,
                encoding="utf-8"):
    """Gold and predicted tags from one conlleval-style file or from two files.

    One file: gold in ``gold_col`` (default -2), predictions in ``pred_col``.
    Two files: gold from ``gold_file`` (default column -1), predictions from
    ``pred_file``; they must line up sentence by sentence and token by token.
    Of n-best output only the labelings of rank ``nbest_rank`` are read (0: the
    best, as in the ``# nbest RANK P`` lines); a sentence without one is an error.
    With ``check``, columns that cannot be a gold and a predicted label column
    (probabilities, the same column twice, labels of two different tasks, such
    as a file of gold labels only) and input without tokens raise CrftkError
    saying what to pass. ``encoding``: of both files.
    """
    if pred_file is None:
        gold_col = -2 if gold_col is None else gold_col
        data = _read(gold_file, (gold_col, pred_col), nbest_rank, encoding=encoding)
        if check and data.n_columns and gold_col % data.n_columns == pred_col % data.n_columns:
            advice = _advice(data, data)
            raise CrftkError(f"--gold-col {gold_col} and --pred-col {pred_col} are the same column of "
                             f"{data.n_columns}{': ' + advice if advice else ''}", data.name)
        gold = [[t[0] for t in s] for s in data.sentences]
        pred = [[t[1] for t in s] for s in data.sentences]
        gdata = pdata = data
    else:
        gold_col = -1 if gold_col is None else gold_col
        gdata = _read(gold_file, (gold_col,), encoding=encoding)
        pdata = _read(pred_file, (pred_col,), nbest_rank, encoding=encoding)
        _line_up(gdata, pdata)
        gold = [[t[0] for t in s] for s in gdata.sentences]
        pred = [[t[0] for t in s] for s in pdata.sentences]
    if check:
        if not any(gold):
            raise CrftkError("no tokens to score (the input is empty)", pdata.name)
        _check_labels(gold, pred, gdata, pdata, gold_col, pred_col)
    return Labels(gold, pred, pdata.nbest, nbest_rank, (gdata, pdata))


def read_pairs(path_or_lines, gold_col=-2, pred_col=-1):
    """Read a conlleval-style file: gold and predicted tags as two of its columns.

    ``path_or_lines`` is a path, ``"-"`` for stdin, or an iterable of lines
    (str or bytes).  Blank lines separate sentences; lines starting with
    ``-DOCSTART-`` are document boundaries; ``# prob ...`` / ``# nbest ...``
    annotation lines are skipped (of n-best output, the best labelings are
    read).  Returns ``(gold_sentences, pred_sentences)``, unchecked.
    """
    labels = read_labels(path_or_lines, gold_col=gold_col, pred_col=pred_col, check=False)
    return labels.gold, labels.pred


def read_two(gold_file, pred_file, gold_col=-1, pred_col=-1):
    """Read gold tags from one file and predicted tags from another.

    Both files must have the same sentences with the same numbers of tokens;
    a mismatch raises CrftkError naming both files and the first differing
    line.  Returns ``(gold_sentences, pred_sentences)``, unchecked.
    """
    labels = read_labels(gold_file, pred_file, gold_col=gold_col, pred_col=pred_col, check=False)
    return labels.gold, labels.pred


def _line_up(g, p):
    for i in range(max(len(g.sentences), len(p.sentences))):
        if i >= len(g.sentences) or i >= len(p.sentences):
            gl = g.lines[i][0] if i < len(g.sentences) else g.last_line + 1
            pl = p.lines[i][0] if i < len(p.sentences) else p.last_line + 1
            _mismatch(
                g, gl, p, pl,
                f"{len(g.sentences)} sentences vs {len(p.sentences)}",
            )
        ng, np_ = len(g.sentences[i]), len(p.sentences[i])
        if ng != np_:
            j = min(ng, np_)
            gl = g.lines[i][j] if j < ng else g.ends[i]
            pl = p.lines[i][j] if j < np_ else p.ends[i]
            _mismatch(g, gl, p, pl, f"sentence {i + 1} has {ng} tokens vs {np_}")


def _mismatch(g, gl, p, pl, detail):
    raise CrftkError(
        f"sentences and tokens do not line up with {p.name}:{pl} ({detail})",
        g.name,
        gl,
    )


@dataclass
class ColumnsEvaluation:
    """Several (gold, predicted) column pairs of one file scored at once: each pair's
    :class:`Evaluation`, and the joint accuracy (tokens where every pair agrees), as for the
    chains of a factorial CRF (``crftk tag`` appends one column per chain)."""

    columns: list            # (gold column, predicted column) per pair
    results: list            # Evaluation per pair
    joint_correct: int
    n_tokens: int

    @property
    def joint_accuracy(self):
        return self.joint_correct / self.n_tokens if self.n_tokens else 0.0

    def to_dict(self):
        return {"columns": [{"gold_col": g, "pred_col": p, **r.to_dict()}
                            for (g, p), r in zip(self.columns, self.results)],
                "joint_accuracy": 100 * self.joint_accuracy, "tokens": self.n_tokens}

    def format(self):
        parts = []
        for (g, p), r in zip(self.columns, self.results):
            parts.append(f"# gold column {g}, predicted column {p}\n{r.format()}")
        parts.append(f"joint accuracy (every pair right): {100 * self.joint_accuracy:.2f}% "
                     f"({self.joint_correct} of {self.n_tokens} tokens)")
        return "\n\n".join(parts)


def evaluate_columns(path, gold_cols, pred_cols, scheme="auto", encoding="utf-8"):
    """Score each (gold_cols[i], pred_cols[i]) pair of one file (in ``encoding``) and their joint
    accuracy."""
    if len(gold_cols) != len(pred_cols):
        raise CrftkError(f"give as many --gold-col as --pred-col (one pair per chain), not {len(gold_cols)} "
                         f"and {len(pred_cols)}")
    results, ok = [], None
    for g, p in zip(gold_cols, pred_cols):
        labels = read_labels(path, gold_col=g, pred_col=p, encoding=encoding)
        results.append(evaluate(labels.gold, labels.pred, scheme=scheme, locate=labels.locate))
        right = [x == y for gs, ps in zip(labels.gold, labels.pred) for x, y in zip(gs, ps)]
        ok = right if ok is None else [a and b for a, b in zip(ok, right)]
    return ColumnsEvaluation(list(zip(gold_cols, pred_cols)), results, sum(ok), len(ok))
