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
from dataclasses import dataclass, field

from crftk.io.conll import codec, read_sentences
from crftk.errors import CrftkError, shown
from crftk.progress import plural
from crftk.io import schemes
from crftk.io.schemes import split

__all__ = [
    "SCHEMES",
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

_CONTINUE, _CLOSE, _OPEN = 0, 1, 2

# (previous tag, tag) -> (action, type of the tag).  Grows with the number
# of distinct tag pairs seen, which is small for any real tag set; cleared
# if it ever gets large.
_TRANSITIONS = {}
_MAX_TRANSITIONS = 200_000


def _decide(prev, tag):
    """Action at the boundary between ``prev`` and ``tag``.

    ``_OPEN``: a chunk starts at ``tag`` (closing any open chunk first);
    ``_CLOSE``: an open chunk ends with ``prev``; ``_CONTINUE``: neither.
    """
    pp, pt = split(prev)
    cp, ct = split(tag)

    starts = (
        cp in ("B", "S", "[", "]")
        or (cp in ("I", "E") and pp in ("O", "E", "S"))
        or (cp != "O" and pt != ct)
    )
    if starts:
        return _OPEN, ct
    ends = (
        pp in ("E", "S", "[", "]")
        or (pp in ("B", "I") and cp in ("B", "S", "O"))
        or (pp != "O" and pt != ct)
        or cp == "O"
    )
    return (_CLOSE if ends else _CONTINUE), ct


def _transition(prev, tag):
    if len(_TRANSITIONS) >= _MAX_TRANSITIONS:
        _TRANSITIONS.clear()
    r = _TRANSITIONS[(prev, tag)] = _decide(prev, tag)
    return r


def _extract(tags):
    """Chunks of one sentence as ``(type, start, end_exclusive)``; no checks."""
    get = _TRANSITIONS.get
    out = []
    prev = "O"
    start = -1
    ctype = ""
    i = 0
    for tag in tags:
        r = get((prev, tag))
        if r is None:
            r = _transition(prev, tag)
        action = r[0]
        if action:
            if start >= 0:
                out.append((ctype, start, i))
                start = -1
            if action == _OPEN:
                start = i
                ctype = r[1]
        prev = tag
        i += 1
    if start >= 0:  # the sentence boundary acts as "O", which closes any chunk
        out.append((ctype, start, i))
    return out


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
        """A text report laid out like conlleval's output."""
        o = self.overall
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
        lines.append(
            f"sentence accuracy: {100.0 * self.sentence_accuracy:6.2f}% "
            f"({self.n_correct_sentences} of {self.n_sentences} sentences correct)"
        )
        return "\n".join(lines) + "\n"

    def __str__(self):
        return self.format()


def evaluate(gold_sentences, pred_sentences, scheme="auto", locate=None):
    """Score predicted tag sequences against gold ones; returns an :class:`Evaluation`.

    Both arguments are lists of sentences, each a list of tag strings, and must
    have the same shape.  A predicted chunk is correct when a gold chunk has the
    same type, start and end. ``locate("gold"|"predicted", sentence, token)``
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
        self.first_line = 0  # line of the first token
        self.first_row = []  # the columns of the first token
        self.nbest = 0  # labelings per sentence in n-best output (0: not n-best output)
        self.annotated = False  # has "# prob" lines: crftk tag -v output


def _source_name(source):
    if isinstance(source, (str, bytes, os.PathLike)):
        path = os.fsdecode(os.fspath(source))
        return "<stdin>" if path == "-" else path
    name = getattr(source, "name", None)
    return name if isinstance(name, str) else "<input>"


def _read(source, cols, nbest_rank=0, max_sentence_tokens=None, encoding="utf-8"):
    """Read a column file (in ``encoding``), keeping columns ``cols`` (indices, negative allowed).

    Of n-best output (``# nbest K P`` before each labeling) only the labelings
    of rank ``nbest_rank`` are kept.
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
    for item in read_sentences(source, passthrough=True, max_sentence_tokens=max_sentence_tokens,
                               encoding=encoding):
        if isinstance(item, str):
            fields = item.split()
            if len(fields) >= 3 and fields[:2] == ["#", "nbest"] and fields[2].isdigit():
                rank = int(fields[2])
                out.nbest = max(out.nbest, rank + 1)
            elif fields[:2] == ["#", "prob"]:
                out.annotated = True
            continue
        first = item.line
        if not out.n_columns:
            out.n_columns = len(item.rows[0])
            out.first_line = first
            out.first_row = item.rows[0]
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
    out.last_line = end
    return out


def _col_desc(cols, ncols):
    bad = [c for c in cols if not -ncols <= c < ncols]
    return ", ".join(str(c) for c in bad)


_PROBABILITY = re.compile(r"^[01]\.\d+$")
_LABEL_PROBABILITY = re.compile(r"^.+/[01]\.\d+$")


def _check_labels(gold, pred, where, gold_col, pred_col, first_row):
    """Raise when the columns asked for cannot be gold and predicted labels.

    Catches the usual slips: the probabilities of ``crftk tag -v``/``-vv``
    output taken for labels, one column given twice, and a file of gold labels
    only (its last two columns hold, say, POS tags and chunk labels, which
    share no value).
    """
    g_values = {t for s in gold for t in s}
    p_values = {t for s in pred for t in s}
    hint = " (crftk eval --help explains --gold-col and --pred-col)"
    if p_values and all(_PROBABILITY.match(v) for v in p_values) and not \
            all(_PROBABILITY.match(v) for v in g_values):
        raise CrftkError(f"the predicted column ({pred_col}) holds probabilities, not labels: this "
                         f"looks like 'crftk tag -v' output, whose rows end with the gold label, the "
                         f"predicted label and its probability: pass --gold-col -3 --pred-col -2", where)
    if p_values and all(_LABEL_PROBABILITY.match(v) for v in p_values):
        k = 0
        while k < len(first_row) and _LABEL_PROBABILITY.match(first_row[-1 - k]):
            k += 1        # one label/probability column per label
        advice = f"pass --gold-col {-(k + 3)} --pred-col {-(k + 2)}"
        raise CrftkError(f"the predicted column ({pred_col}) holds label/probability pairs: this looks "
                         f"like 'crftk tag -vv' output, whose rows end with the gold label, the predicted "
                         f"label, its probability and one label/probability column per label: {advice}",
                         where)
    n_tokens = sum(len(s) for s in gold)
    if n_tokens >= 10 and g_values.isdisjoint(p_values):
        raise CrftkError(f"the gold column ({gold_col}) and the predicted column ({pred_col}) share no "
                         f"label (gold: {_sample(g_values)}; predicted: {_sample(p_values)}): is the file "
                         f"tagged? A file with gold labels only must be tagged first (crftk tag -m MODEL "
                         f"FILE), or scored against another file (crftk eval GOLD PREDICTED){hint}", where)


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


def read_labels(gold_file, pred_file=None, *, gold_col=None, pred_col=-1, nbest_rank=0, check=True,
                encoding="utf-8"):
    """Gold and predicted tags from one conlleval-style file or from two files.

    One file: gold in ``gold_col`` (default -2), predictions in ``pred_col``.
    Two files: gold from ``gold_file`` (default column -1), predictions from
    ``pred_file``; they must line up sentence by sentence and token by token.
    Of n-best output only the labelings of rank ``nbest_rank`` (0: the best)
    are read. With ``check``, columns that cannot be a gold and a predicted
    label column (probabilities, the same column twice, a file of gold labels
    only) and input without tokens raise CrftkError saying what to pass. ``encoding``: of
    both files.
    """
    if pred_file is None:
        gold_col = -2 if gold_col is None else gold_col
        data = _read(gold_file, (gold_col, pred_col), nbest_rank, encoding=encoding)
        if check and data.n_columns and gold_col % data.n_columns == pred_col % data.n_columns:
            raise CrftkError(f"--gold-col {gold_col} and --pred-col {pred_col} are the same column of "
                             f"{data.n_columns}", data.name)
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
        _check_labels(gold, pred, pdata.name, gold_col, pred_col, pdata.first_row)
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
