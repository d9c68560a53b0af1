"""Options declared once, with their bounds: the CLI's options and the library's checks.

``TRAIN`` (the options of a training run, as ``crftk train`` lists them) and ``INDUCE``
are ordered tuples of :class:`Param` (name, default, type, help, choices);
``CHECKPOINT_EVERY`` and ``MAX_SENTENCE_TOKENS`` are options of training from files.
The CLI generates its options from them; ``train.fit``, ``train.train`` and
``induce.induce`` check a Python caller's values against the same declarations:
``defaults(TRAIN)`` is {name: default}, ``check(name, value)`` one value,
``check_params(TRAIN, options, "training")`` all of them with defaults filled in.

A numeric option's ``type`` is a bounded number (:class:`Integer`, :class:`Real`,
:class:`Threads`): as a click type it turns the command-line text into a value or
fails with one line; :meth:`Param.check` applies the same bounds to a Python
caller's value (CrftkError). Every bound is far beyond any real use; they exist so
that a typo or a fuzzer cannot reach an overflow, a hang or gigabytes of memory.
"""

import math
import numbers
import os
import re
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace

import click

from crftk.io.conll import DEFAULT_ENCODING, codec
from crftk.io.conll import MAX_LINE_BYTES as MAX_LINE
from crftk.io.conll import MAX_SENTENCE_TOKENS as MAX_SENTENCE
from crftk.errors import CrftkError, shown
from crftk.features.templates import MAX_COLUMNS, VECTOR_LOOKUPS

#: Iterations, epochs, rounds: CoNLL-2000 converges within about a thousand.
MAX_ITER = 1_000_000
#: Counts of tokens or attributes: the kernels number tokens with 32-bit integers.
MAX_COUNT = 1_000_000_000
#: Penalties and smoothing constants: at 1e6 every weight is ~0 or the loss a step.
MAX_COEFFICIENT = 1e6
#: L-BFGS correction pairs: each holds two copies of the weights; 3-20 is usual.
MAX_HISTORY = 100
# L-BFGS correction pairs kept when --history is not given: a linear chain keeps CRFsuite's 6; a
# factorial CRF (c2 0.05 in Sutton et al.'s setting, 670k weights on CoNLL-2000) converged in
# 1,067 iterations with 6 and in 512 with 50 (benchmarks/results/fcrf-history.md)
HISTORY = 6
FACTORIAL_HISTORY = 50
#: --max-segment: a semi-Markov CRF's lattice and segment encoding grow with tokens x this.
MAX_SEGMENT = 1000
#: Labelings per sentence of ``tag -n``: the paths of a batch take K x tokens x 4 bytes.
MAX_NBEST = 1000
#: Most memory the n-best tables of one batch may take.
NBEST_MEMORY = 2 * 2**30
#: Jackknife folds of `crftk lexicon`: one per document is reached long before (CoNLL-2003
#: train has 946 documents); each entry records the folds it was seen in.
MAX_LEXICON_FOLDS = 10_000
#: Worker threads beyond this many per core only cost memory (one gradient buffer each).
THREADS_PER_CORE = 4


def _number(x):
    """A bound as people write it: 1,000,000 rather than 1000000.0 or 1e+06."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    return f"{x:g}"


def _got(value):
    """A Python caller's value for a message: strings quoted, anything cut to a readable length."""
    if isinstance(value, str):
        return shown(value)
    text = str(value)
    return text if len(text) <= 40 else f"{text[:16]}...{text[-16:]} ({len(text):,} characters)"


class _Bounded:
    """Range checks shared by the click conversion (text) and Param.check (a Python value)."""

    kind = int
    also = ()          # values accepted outside the range (e.g. 0 meaning "off")

    def describe(self):
        """'an integer from 1 to 1,000', 'a number > 0 and <= 1,000', '0 or an integer from 2 to 100'."""
        lo, hi = self.min, self.max
        noun = "an integer" if self.kind is int else "a number"
        if lo is not None and hi is not None and not (self.min_open or self.max_open):
            text = f"{noun} from {_number(lo)} to {_number(hi)}"
        else:
            if self.kind is float and (lo is None or hi is None):
                noun = "a finite number"
            bounds = [f"{'>' if self.min_open else '>='} {_number(lo)}"] if lo is not None else []
            bounds += [f"{'<' if self.max_open else '<='} {_number(hi)}"] if hi is not None else []
            text = " ".join([noun, " and ".join(bounds)]).strip()
        return " or ".join([*map(_number, self.also), text])

    def _describe_range(self):
        """The range as click shows it in --help ('1<=x<=1,000', '0<x<=1,000', 'x>=0')."""
        lo, hi = self.min, self.max
        if lo is not None and hi is None:
            text = f"x{'>' if self.min_open else '>='}{_number(lo)}"
        elif lo is not None or hi is not None:
            text = ((f"{_number(lo)}{'<' if self.min_open else '<='}" if lo is not None else "") + "x"
                    + (f"{'<' if self.max_open else '<='}{_number(hi)}" if hi is not None else ""))
        else:
            text = "finite"
        return " or ".join([*map(_number, self.also), text])

    def accepts(self, x):
        if x in self.also:
            return True
        if self.kind is float and not math.isfinite(x):
            return False
        if self.min is not None and (x < self.min or self.min_open and x == self.min):
            return False
        return self.max is None or not (x > self.max or self.max_open and x == self.max)

    def _from_python(self, value):
        """The value as this kind of number, or None (bool is not a number here)."""
        if isinstance(value, bool):
            return None
        if self.kind is int:
            return int(value) if isinstance(value, numbers.Integral) else None
        return float(value) if isinstance(value, numbers.Real) else None

    def check(self, value, option, warn=None):
        """The value if it is in range; else CrftkError naming the option (Python callers)."""
        x = self._from_python(value)
        if x is None or not self.accepts(x):
            raise CrftkError(f"{option} must be {self.describe()} (got {_got(value)})")
        return x

    def convert(self, value, param, ctx):
        x = self._from_python(value)
        if x is None:
            try:
                x = self.kind(str(value).strip())
            except (ValueError, OverflowError):
                x = None
        if x is None or not self.accepts(x):
            self.fail(f"{shown(value)} is not {self.describe()}", param, ctx)
        return x


class Integer(_Bounded, click.IntRange):
    """An integer in [min, max] (either may be None), or one of ``also``."""

    def __init__(self, min=None, max=None, *, also=()):
        click.IntRange.__init__(self, min, max)
        self.also = tuple(also)


class Real(_Bounded, click.FloatRange):
    """A finite float in the range (ends open or closed); NaN and infinities never pass."""

    kind = float

    def __init__(self, min=None, max=None, *, min_open=False, max_open=False):
        click.FloatRange.__init__(self, min, max, min_open=min_open, max_open=max_open)


def available_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def thread_cap():
    """Most worker threads used: THREADS_PER_CORE per core (beyond, OpenMP fails or crashes)."""
    return THREADS_PER_CORE * available_cores()


def resolve_threads(threads):
    """Threads to run: 0 or None is every core; more than thread_cap() is cut to it."""
    if threads is None or threads <= 0:
        return available_cores()
    return min(threads, thread_cap())


class Threads(Integer):
    """0 (every core) or a thread count; a count above thread_cap() is cut to it, with a warning."""

    def __init__(self):
        super().__init__(0)

    def _capped(self, n, option, warn):
        cap = thread_cap()
        if n <= cap:
            return n
        if warn is not None:
            warn(f"crftk: warning: {option} {n:,} is more than {THREADS_PER_CORE} threads per core "
                 f"({available_cores()} cores): using {cap}")
        return cap

    def _describe_range(self):
        return f"x>=0; at most {thread_cap()} are used"

    def check(self, value, option, warn=None):
        return self._capped(super().check(value, option), option, warn)

    def convert(self, value, param, ctx):
        n = super().convert(value, param, ctx)
        option = param.opts[0] if param is not None and param.opts else "--threads"
        return self._capped(n, option, lambda msg: click.echo(msg, err=True))


class Flag(click.types.BoolParamType):
    """An on/off option: --NAME/--no-NAME on the command line, True or False (or 1, 0) from
    Python."""

    def check(self, value, option, warn=None):
        if isinstance(value, bool) or (getattr(value, "dtype", None) is not None and value.dtype.kind == "b"):
            return bool(value)
        if isinstance(value, numbers.Integral) and value in (0, 1):
            return bool(value)
        raise CrftkError(f"{option} must be True or False (got {_got(value)})")


class LabelCell(click.ParamType):
    """A label as one cell of a column file: a string without white space (empty only when
    ``empty``: the option is then off)."""

    name = "text"

    def __init__(self, empty=False):
        self.empty = empty

    def _problem(self, value):
        if not isinstance(value, str):
            return f"must be a string (got {_got(value)})"
        if not value and not self.empty:
            return "must not be empty"
        if any(c.isspace() for c in value):
            return f"must be one cell of a column file, without white space (got {_got(value)})"
        return None

    def check(self, value, option, warn=None):
        problem = self._problem(value)
        if problem:
            raise CrftkError(f"{option} {problem}")
        return value

    def convert(self, value, param, ctx):
        problem = self._problem(value)
        if problem:
            self.fail(problem, param, ctx)
        return value


class Encoding(click.ParamType):
    """The name of a text encoding crftk reads CoNLL files in (crftk.io.conll.codec): the
    value is the codec's own name ("latin-1" gives "iso8859-1")."""

    name = "encoding"

    def check(self, value, option, warn=None):
        return codec(value)

    def convert(self, value, param, ctx):
        try:
            return codec(value)
        except CrftkError as e:
            self.fail(e.message, param, ctx)


#: How messages name an option: "cli" (--max-iter, the command line's) or "python" (max_iter,
#: the keyword of crftk's Python API, which sets it through python_names()).
_SPELLING = ContextVar("crftk_option_spelling", default="cli")
#: The names of every declared option (a Param registers its own): what python_names respells.
_DECLARED = set()
#: Repeated command-line options whose Python keyword is a plural list (compose --feed COL ...).
_KEYWORDS = {"feed": "feeds"}
_CLI_OPTION = re.compile(r"(?<![\w-])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")


def spelled(name):
    """An option as its caller writes it: --max-iter on the command line, max_iter from Python."""
    return name if _SPELLING.get() == "python" else "--" + name.replace("_", "-")


def python_spelling(text):
    """The text with every declared option's command-line name replaced by its keyword."""
    def keyword(m):
        name = m.group(1).replace("-", "_")
        name = _KEYWORDS.get(name, name)
        return name if name in _DECLARED else m.group(0)
    return _CLI_OPTION.sub(keyword, text)


@contextmanager
def python_names():
    """Within it, options are named as Python keywords (c2, max_iter): the checks of the
    declarations spell them so, and a CrftkError from a layer whose message names an option
    as the command line does (--algorithm sgd needs --c2 > 0) has it respelled on its way out."""
    token = _SPELLING.set("python")
    try:
        yield
    except CrftkError as error:
        error.message = python_spelling(error.message)
        error.args = (str(error),)
        raise
    finally:
        _SPELLING.reset(token)


@dataclass(frozen=True)
class Param:
    """An option of train or induce, declared once: the CLI builds its option from it and
    the library checks a Python caller's value against the same declaration."""

    name: str
    default: object
    type: object        # str, int (with choices), a bounded number (Integer, Real, Threads), Encoding
    help: str
    choices: tuple = ()
    # None (the default) stands for the model kind's own value, which its trainer fills in
    per_kind: bool = False

    def __post_init__(self):
        _DECLARED.add(self.name)

    @property
    def option(self):
        """The command-line option: --max-iter."""
        return "--" + self.name.replace("_", "-")

    def check(self, value, warn=None):
        """The value, checked (and for thread counts capped); CrftkError when it is out of range,
        naming the option as the caller spells it (:func:`spelled`)."""
        if value is None and self.per_kind:
            return None
        if self.choices:
            if value not in self.choices:
                raise CrftkError(f"{spelled(self.name)} must be one of {', '.join(map(str, self.choices))} "
                                 f"(got {_got(value)})")
            return value
        if isinstance(self.type, (_Bounded, Encoding, Flag, LabelCell)):
            return self.type.check(value, spelled(self.name), warn)
        return value


def column_index():
    """A column number, negative counting from the end."""
    return Integer(-MAX_COLUMNS, MAX_COLUMNS - 1)


#: The options of a training run (``crftk train``, ``train.fit``, ``crftk.CRF``), in --help order.
TRAIN = (
    Param("algorithm", "lbfgs", str,
          "Training method. lbfgs: L-BFGS (OWL-QN when --c1 > 0); cg: nonlinear conjugate "
          "gradient; pcg: CG preconditioned by Sha & Pereira's diagonal Hessian approximation "
          "(see --precondition); mixed-cg: pcg for --mixed-after iterations, then cg; "
          "gis: generalized iterative scaling; sgd: stochastic gradient descent with L2 and a "
          "decaying rate (CRFsuite's l2sgd; --max-iter counts epochs); perceptron: Collins' "
          "averaged perceptron (unregularized: --c2 is ignored; --max-iter counts epochs); "
          "pa: passive-aggressive (Crammer et al. 2006, as CRFsuite's pa; see --pa-type, "
          "--pa-c, --error-sensitive, --averaging; --c2 is ignored; --max-iter counts epochs); "
          "arow: adaptive regularization of weights (Mejer & Crammer 2010, as CRFsuite's arow; "
          "see --arow-variance, --arow-gamma; --c2 is ignored; --max-iter counts epochs); "
          "quickprop: Fahlman's QuickProp, fixed-rule steps without a line search (for "
          "--objective mce-f, as Suzuki et al.). Only lbfgs takes --c1.",
          ("lbfgs", "cg", "pcg", "mixed-cg", "gis", "sgd", "perceptron", "pa", "arow", "quickprop")),
    Param("mixed_after", 20, Integer(0, MAX_ITER),
          "mixed-cg: iterations with the preconditioner before plain CG."),
    Param("precondition", "variance", str,
          "pcg, mixed-cg: the diagonal Hessian approximation (Sha & Pereira: features and tokens "
          "taken as independent). variance: sum over tokens of p(1-p) for state features, expected "
          "counts for transitions; counts: expected feature counts (the sum of squares of local "
          "features alone). Both get + 2*c2 and are checked to be finite and positive.",
          ("variance", "counts")),
    Param("first_step", 0.1, Real(0, 1000, min_open=True),
          "quickprop: the largest change of any weight in the first step "
          "(this fixes the learning rate of the gradient terms)."),
    Param("gpd_iter", 0, Integer(0, MAX_ITER),
          "quickprop: plain gradient-descent (GPD) iterations before QuickProp."),
    Param("pa_type", 1, int,
          "pa: the step along d = F(gold) - F(predicted) on a mislabeled sentence: 0 takes "
          "loss / ||d||^2 (PA), 1 that at most C = --pa-c (PA-I), 2 loss / (||d||^2 + 1/(2C)) "
          "(PA-II). Each epoch logs the sum of the losses (the objective --epsilon watches).", (0, 1, 2)),
    Param("pa_c", 1.0, Real(0, MAX_COEFFICIENT, min_open=True),
          "pa: the aggressiveness C of --pa-type 1 and 2 (larger: bigger steps)."),
    Param("error_sensitive", True, Flag(),
          "pa: the loss of a mislabeled sentence is score(predicted) - score(gold) plus the square "
          "root of its mislabeled tokens (--error-sensitive), or plus 1 (--no-error-sensitive)."),
    Param("averaging", True, Flag(),
          "pa: return the average of the weights over every sentence of every epoch (as the "
          "averaged perceptron), or the last weights (--no-averaging)."),
    Param("arow_variance", 1.0, Real(0, MAX_COEFFICIENT, min_open=True),
          "arow: the initial variance of every weight."),
    Param("arow_gamma", 1.0, Real(0, MAX_COEFFICIENT, min_open=True),
          "arow: the trade-off gamma between keeping the weights and fitting a mislabeled "
          "sentence (smaller: bigger steps, the variances shrink faster)."),
    Param("c1", 0.0, Real(0, MAX_COEFFICIENT), "L1 coefficient: adds c1*|w|_1 (OWL-QN). 0 disables L1."),
    Param("c2", 1.0, Real(0, MAX_COEFFICIENT),
          "L2 coefficient: adds c2*||w||^2 (CRFsuite's c2; a Gaussian prior "
          "of variance 1/(2*c2)). 0 disables L2."),
    Param("max_iter", 1000, Integer(1, MAX_ITER), "Stop after this many iterations."),
    Param("epsilon", 1e-5, Real(0, 1), "Stop when the objective improved by less than this fraction over "
                                       "the last --period iterations (like CRF++ -e, CRFsuite delta)."),
    Param("period", 10, Integer(1, MAX_ITER), "Iterations over which --epsilon measures the improvement."),
    Param("history", None, Integer(1, MAX_HISTORY),
          f"L-BFGS memory: number of correction pairs kept. Unset: {HISTORY}, and {FACTORIAL_HISTORY} for a "
          f"factorial CRF (several --label-col), whose likelihood converges in about half the iterations "
          f"with it.", per_kind=True),
    Param("history_precision", "float32", str, "L-BFGS: the precision its correction pairs are stored in: "
          "float32 (half the memory of float64, 2 x --history x parameters x 4 bytes; the recursion's "
          "dot products and its direction stay float64).", ("float64", "float32")),
    Param("min_freq", 1, Integer(0, MAX_COUNT),
          "Drop attributes seen fewer than this many times in training (CRF++ -f). Feature dicts and "
          "CRFsuite data: drop an (attribute, label) feature seen fewer times with that label (with "
          "--feature-count values, whose values with that label sum to less: CRFsuite's feature.minfreq; "
          "0 then keeps those whose values are all 0 too, as CRFsuite's default does). A template needs "
          "at least 1."),
    Param("feature_count", "occurrences", str,
          "Feature dicts and CRFsuite data: what --min-freq counts of an (attribute, label) feature: its "
          "occurrences, or the sum of its values (CRFsuite's frequency, which drops a feature whose "
          "values sum below the threshold, negative ones included).", ("occurrences", "values")),
    Param("feature_set", "supported", str,
          "supported: only (attribute, label) pairs seen in training; complete: every attribute "
          "with every label (Sha & Pereira's complete set; bigger, sometimes better).", ("supported", "complete")),
    Param("transitions", "all", str,
          "all: every transition between two labels has a weight; seen: only those seen in the training "
          "labels, the others fixed at 0 (CRFsuite without all_possible_transitions).", ("all", "seen")),
    Param("label_col", -1, column_index(),
          "Column of the gold label (0-based; negative counts from the end). crftk train: repeat it "
          "(--label-col 1 --label-col 2) to train a factorial CRF, one chain per label column."),
    Param("objective", "map", str,
          "map: penalized log-likelihood; mce: minimum classification error (Suzuki et al.: "
          "the smoothed sentence error count, psi = infinity; lbfgs or quickprop; the paper's "
          "C=1000 is --c2 0.0005); mce-f: the smoothed segmentation F-score loss (Suzuki et al. "
          "eq. 16; --algorithm quickprop; the paper's C=1e5 (chunking) / 1e4 (NER) is --c2 "
          "5e-6 / 5e-5). Both train a first-order CRF; start them from a MAP model with --init.",
          ("map", "mce", "mce-f")),
    Param("mce_alpha", 1.0, Real(0, MAX_COEFFICIENT, min_open=True),
          "mce: slope alpha of the smoothing function."),
    Param("mce_beta", 0.0, Real(-MAX_COEFFICIENT, MAX_COEFFICIENT),
          "mce: offset beta of the smoothing function."),
    Param("mce_smoothing", "sigmoid", str, "mce: sigmoid or logistic smoothing (mce-f: sigmoid).",
          ("sigmoid", "logistic")),
    Param("mce_gamma", 1.0, Real(0, MAX_COEFFICIENT, min_open=True),
          "mce-f: gamma of the F-score F_gamma (1: F1)."),
    Param("model_type", "crf", str,
          "crf: a conditional random field; memm: a maximum-entropy Markov model on the same "
          "features, normalized per token (Sha & Pereira's comparison; lbfgs or quickprop, order 1); "
          "semimarkov: a semi-Markov CRF (Sarawagi & Cohen 2004) labeling segments of chunk tags (the "
          "template's U lines score the segments' IOBES position tags, its S lines whole segments; "
          "lbfgs, cg, pcg, mixed-cg or quickprop; tagged files keep the corpus's chunk scheme).",
          ("crf", "memm", "semimarkov")),
    Param("max_segment", 0, Integer(0, MAX_SEGMENT),
          "--model-type semimarkov: the longest segment of any label, in tokens (longer gold segments "
          "are cut into pieces of at most this many; the log counts them). 0: each label's longest "
          "segment in the training data."),
    Param("order", 1, int, "Markov order: 1, or 2 (labels are pairs of tags with backoff "
                           "features on the current tag, as Sha & Pereira; lbfgs or quickprop; the pair "
                           "label set grows as tags squared, so keep the tag set small).", (1, 2)),
    Param("constraints", "none", str,
          "Hard label constraints, enforced in training and decoding: iob2 (no I-X after O or "
          "another type), iob1 (B-X only between chunks of type X), iobes (also spelled bioes), bilou "
          "(iobes with L, U for E, S); none. They constrain the labels trained on: with --train-scheme, "
          "none or the training scheme itself.",
          ("none", "iob2", "iob1", "iobes", "bioes", "bilou")),
    Param("train_scheme", "none", str,
          "Train on the label column converted to this chunk scheme (iob2, iobes, or bilou: B, I, L "
          "for last, U for unit-length chunks) and convert every prediction back to the corpus's own "
          "scheme (detected from the training labels), so tagged files and crftk eval stay in it. The "
          "column must hold chunk tags only (B/I/E/S-TYPE, O). none: the labels as they are.",
          ("none", "iob2", "iobes", "bilou")),
    Param("unknown_label", "?", LabelCell(empty=True),
          "Partial labels: a label cell equal to this marker is unknown (any label), and a cell A|B is "
          "the set of labels A and B; training maximizes the likelihood of every labeling they allow "
          "(Tsuboi et al. 2008). Empty: no partial labels (| and the marker are labels as any other)."),
    Param("entity_ratio", 0.0, Real(0, 1, max_open=True),
          "Expected entity ratio loss (Effland & Collins 2021) for partially annotated entities: the "
          "expected share RHO of tokens whose label is not --outside-label; the objective adds "
          "--entity-ratio-weight * tokens * max(0, |expected share - RHO| - --entity-ratio-margin), "
          "its corner rounded over 0.01 of the share for L-BFGS. 0: off."),
    Param("entity_ratio_margin", 0.05, Real(0, 1),
          "--entity-ratio: the margin GAMMA within which the expected share costs nothing."),
    Param("entity_ratio_weight", 10.0, Real(0, MAX_COEFFICIENT, min_open=True),
          "--entity-ratio: the weight LAMBDA of the ratio's hinge (per token)."),
    Param("outside_label", "O", LabelCell(),
          "--entity-ratio: the label that is no entity (every other label counts as one)."),
    Param("keep", "best", str,
          "With --dev: best keeps the weights of the iteration with the best dev F1 (as Sha & "
          "Pereira chose on held-out data); last keeps the final weights, so that figures reported "
          "on the dev set are not chosen on it.", ("best", "last")),
    Param("threads", 0, Threads(), "Worker threads for the lattice kernels; 0 uses all cores."),
)

#: Options of ``crftk train`` about its files rather than the model (``train.train`` takes them).
CHECKPOINT_EVERY = Param("checkpoint_every", 0, Integer(0, MAX_ITER),
                         "Every N iterations save the current weights to MODEL.checkpoint (removed when "
                         "the model is saved). To resume after a crash: train --init MODEL.checkpoint with "
                         "the same data; the optimizer's memory (L-BFGS pairs, CG direction) starts "
                         "afresh. 0: never.")
#: ``crftk train --stream``: an online learner over the training files read a batch at a time
#: (crftk.training.streaming), and the tokens of a batch.
STREAM = Param("stream", False, Flag(),
               "Stream the training files instead of holding the corpus in memory (--algorithm sgd, "
               "perceptron, pa or arow): a first pass builds the feature dictionary a batch at a time, "
               "then each epoch reads the files again, encoding and training on one batch at a time "
               "(shuffled within the batch), so memory is the dictionary and one batch. CoNLL files "
               "with a template whose macros read single sentences; --init (a checkpoint resumed, or a "
               "model continued) as without --stream; no partial labels, --constraints, --train-scheme or "
               "--transitions seen.")
STREAM_BATCH_TOKENS = Param("stream_batch_tokens", 100_000, Integer(1, MAX_COUNT),
                            "--stream: tokens per batch (memory grows with it; a batch also ends with its "
                            "file and at least every 64 MiB read; one batch holding the whole corpus trains "
                            "exactly as without --stream).")
INIT_SPACE = Param("init_space", "grow", str,
                   "With --init: grow adds the training data's attributes (those seen at least --min-freq "
                   "times in it; the model's own are all kept), state features and labels to the model's "
                   "feature space, every new weight starting at 0, and logs what it added; keep trains the "
                   "model's space alone (the data's unknown attributes are ignored, an unknown label is an "
                   "error). Partial labels, --order 2, templates with lexicons, feature dicts or CRFsuite "
                   "data, factorial and semi-Markov CRFs keep the space (the log says why).",
                   ("grow", "keep"))
MAX_SENTENCE_TOKENS = Param("max_sentence_tokens", MAX_SENTENCE, Integer(1, MAX_COUNT),
                            "Longest sentence accepted: a longer one is an error (a file whose blank "
                            "lines between sentences are missing would need gigabytes).")
MAX_LINE_BYTES = Param("max_line_bytes", MAX_LINE, Integer(1, MAX_COUNT),
                       "Longest line accepted in any text file read (data, templates, lexicons, weight "
                       "files), in bytes: a longer one is an error (a stream without line ends, such as "
                       "/dev/zero, would never end).")
#: Default most labels of a pipeline's joint label set (the product of its stages').
MAX_JOINT = 1_000_000
MAX_JOINT_LABELS = Param("max_joint_labels", MAX_JOINT, Integer(1, 10**15),
                         "Most labels in a pipeline's joint label set (the product of its stages' label "
                         "counts): a larger product is refused, since joint decoding keeps tables of that "
                         "many labels per token.")

#: Word vectors of the template's %vec lines (crftk train --vectors NAME=FILE, crftk.CRF(vectors=...)).
VECTORS = Param("vectors", None, str,
                "Word vectors for the template's %vec[r,c,NAME] lines, as NAME=FILE (repeatable): a "
                "word2vec/GloVe text file, an optional 'count dim' header line, then 'word v1 ... vD' per "
                "line. The model stores the vectors its template reads (float32), so tag needs the model "
                "alone; a NAME no %vec line reads is warned of and not stored.")
VECTORS_LOOKUP = Param("vectors_lookup", "exact", str,
                       "How a word finds its vector: exact (as written), or lowercase (as written, else "
                       "lower-cased: for tables of lower-cased words such as GloVe's). Stored in the model: "
                       "tagging looks words up the same way.", VECTOR_LOOKUPS)

#: The encoding of the CoNLL files a command reads (and of tag's output, which follows its input).
ENCODING = Param("encoding", DEFAULT_ENCODING, Encoding(),
                 "Encoding of the CoNLL files the command reads (stdin included), e.g. latin-1 for "
                 "CoNLL-2002 Spanish and Dutch; any encoding that writes ASCII as single bytes (not "
                 "UTF-16). Output made from the input (tag's, --cross-output) is written in it too; "
                 "templates, lexicons and models are always UTF-8.")

#: Message-passing sweeps per sentence (each sweep passes every message of the grid once or twice).
MAX_SWEEPS = 100_000

#: Options of ``crftk train`` for factorial CRFs (two or more --label-col); --inference also of tag.
INFERENCE = Param("inference", "exact", str,
                  "Factorial CRFs: exact (forward-backward and Viterbi over the product of the chains' "
                  "labels, factorized recursion), trp (tree-based reparameterization: a sweep runs exact "
                  "passes on spanning trees that together cover the grid) or bp (loopy belief propagation "
                  "with a random asynchronous schedule). trp and bp decode with max-product.",
                  ("exact", "trp", "bp"))
TOLERANCE = Param("tolerance", 1e-3, Real(0, 1, min_open=True),
                  "Factorial CRFs, --inference trp/bp: a sentence has converged when no message changes by "
                  "more than this.")
MAX_SWEEPS_PARAM = Param("max_sweeps", 100, Integer(1, MAX_SWEEPS),
                         "Factorial CRFs, --inference trp/bp: most sweeps per sentence and pass.")
FACTORIAL = (INFERENCE, TOLERANCE, MAX_SWEEPS_PARAM)

#: Folds of ``train --cross-predict``: each trains a model on the other folds.
MAX_CROSS_FOLDS = 100
CROSS_PREDICT = Param("cross_predict", 0, Integer(2, MAX_CROSS_FOLDS, also=(0,)),
                      "Also write out-of-fold predictions of the training files to --cross-output: "
                      "sentence i goes to fold i mod K, and each fold is tagged by a model trained on "
                      "the other K-1 (same options), the label column replaced by the prediction, so a "
                      "downstream stage can train on honest upstream errors. 0: off.")

#: Folds of ``train --first-stage``: the out-of-fold labels the second stage trains on.
FIRST_STAGE_FOLDS = Param("first_stage_folds", 10, Integer(2, MAX_CROSS_FOLDS),
                          "With --first-stage (or --init of a two-stage model): folds of the training "
                          "documents (document i in fold i mod K; sentences when there are fewer documents "
                          "than K); each fold's first-stage labels "
                          "come from the first stage's template and options trained on the other K-1, so the "
                          "second stage learns from the first stage's errors on unseen text.")

#: Options of ``crftk tag`` for pipelines (``crftk compose``).
DECODE = Param("decode", "joint", str,
               "How a pipeline (crftk compose) decodes. cascade: each stage's Viterbi labels feed the "
               "next; joint: the best labeling of all stages together under the sum of their scores "
               "(Sutton & McCallum 2005), exact when every fed column is read at offset 0 only, else by "
               "rescoring the --nbest-upstream best labelings of each upstream stage; normalized: the "
               "--nbest-upstream best labelings of each upstream stage, each with the best labeling of "
               "the next, rescored by the sum of the stages' log-probabilities, log p(y1|x) + "
               "log p(y2|y1,x) (K=1 is the cascade). The log says which ran.",
               ("cascade", "joint", "normalized"))
NBEST_UPSTREAM = Param("nbest_upstream", 20, Integer(1, MAX_NBEST),
                       "Upstream labelings rescored per sentence and stage: by normalized decoding, and "
                       "by joint decoding of a pipeline whose fed columns are read at other offsets "
                       "than 0.")

#: Worker processes of --workers (a local Dask cluster); more is beyond any one machine.
MAX_WORKERS = 10_000

#: Options of ``crftk tag`` and ``crftk train`` that run them on a Dask cluster (crftk.distributed).
SCHEDULER = Param("scheduler", None, str,
                  "Run on the Dask cluster of this scheduler (tcp://HOST:PORT), whose workers have crftk "
                  "installed and see the input files at the same paths. Needs pip install crftk[dask].")
WORKERS = Param("workers", 0, Integer(0, MAX_WORKERS),
                "Run on a local Dask cluster of N worker processes started for the run (0: no cluster; "
                "-p is then the threads of each). Needs pip install crftk[dask].")
PIECE_BYTES = Param("piece_bytes", 1 << 20, Integer(1 << 10, MAX_COUNT),
                    "With --scheduler or --workers: bytes of input per task (files are cut at sentence "
                    "boundaries, or at -DOCSTART- lines for templates with first-mention features).")

#: Folds of --gain-folds: each trains its own model every round; 10 is the usual choice.
MAX_GAIN_FOLDS = 100
#: Newton iterations for one candidate's weight: it converges in a handful.
MAX_NEWTON = 1000

_TRAINING = {p.name: p for p in TRAIN}

INDUCE = (
    Param("start", "empty", str, "empty: the model starts with no state features (McCallum & Li); "
                                 "atomic: it starts with every atomic test, with each label the test "
                                 "occurs with, trained to convergence, and rounds add conjunctions.",
          ("empty", "atomic")),
    Param("rounds", 20, Integer(1, MAX_ITER),
          "Most rounds of induction (it also stops when no candidate passes "
          "--gain-threshold)."),
    Param("per_round", 1000, Integer(1, MAX_COUNT), "Most features added per round (McCallum & Li: 1000)."),
    Param("gain_threshold", 5.0, Real(), "Smallest gain (in log-likelihood) of a feature to add "
                                         "(McCallum & Li: 5)."),
    Param("gain_tokens", "errors", str,
          "errors: a candidate's gain is summed over the error tokens only (McCallum & Li); all: "
          "the best --rescore candidates by that gain are scored again over every training token "
          "where they fire, so the tokens a candidate would hurt count too.", ("errors", "all")),
    Param("rescore", 20000, Integer(1, MAX_COUNT),
          "With --gain-tokens all: how many conjunctions (besides every "
          "atomic test and model feature) are scored again over all tokens."),
    Param("error_below", 0.0, Real(0, 1), "Tokens whose gold label has a marginal below this also count "
                                          "as error tokens (0: only the tokens Viterbi mislabels, as the "
                                          "paper)."),
    Param("gain_folds", 0, Integer(2, MAX_GAIN_FOLDS, also=(0,)),
          "0: gains and error tokens come from the model's own posteriors on its training data "
          "(McCallum & Li); K >= 2: the sentences are dealt into K folds and each token's posteriors "
          "and Viterbi labels come from a model of the same features trained, round by round, on "
          "the other folds, so gains measure what a candidate would fix on unseen text."),
    Param("conjoin_top", 1000, Integer(1, MAX_COUNT),
          "Conjunction candidates are formed from this many atomic tests "
          "and model features of highest gain (McCallum & Li: 1000)."),
    Param("round_iter", 10, Integer(0, MAX_ITER), "L-BFGS iterations after each round (McCallum & Li: 10)."),
    Param("final_iter", 0, Integer(0, MAX_ITER), "Most L-BFGS iterations after the last round, stopping at "
                                                 "convergence as train does (0: none, as the paper)."),
    Param("newton_iter", 20, Integer(1, MAX_NEWTON), "Most Newton iterations for a candidate's weight."),
    Param("expand", "labels", str, "labels: a selected predicate gets a weight for every label it "
                                   "occurs with in training (the aggregate feature expanded, as the "
                                   "paper); none: only the label it was selected with.",
          ("labels", "none")),
    # training's own options (type, default, range from TRAIN), told for induction
    replace(_TRAINING["c2"], help="L2 coefficient c2 of training and of the gain's prior on the new weight "
            "(c2 = 1/(2 sigma^2); McCallum & Li's variance 0.5 is c2=1)."),
    replace(_TRAINING["min_freq"], help="Drop atomic tests seen fewer than this many times in training."),
    replace(_TRAINING["label_col"], help="Column of the gold label (0-based; negative counts from the end)."),
    replace(_TRAINING["threads"], help="Worker threads; 0 uses all cores."),
)


#: Feature bags of --random-bags: each trains a CRF of its own.
MAX_BAGS = 100
#: Folds of bag --cv: each trains every bag once more.
MAX_BAG_FOLDS = 20
#: The four ways of combining a bag (Sutton, Sindelar & McCallum 2006).
COMBINATIONS = ("seq-poe", "seq-mixture", "trans-mixture", "trans-poe")

#: The options of ``crftk bag`` besides the training options (``bag.bag``, ``bag.fit_bag``, ``crftk.Bag``).
BAG = (
    Param("random_bags", 0, Integer(2, MAX_BAGS, also=(0,)),
          "K >= 2: draw K bags from the one template given, each a random subset of its U lines "
          "(the random subspace method; its other lines are kept). 0: one bag per -t."),
    Param("bag_fraction", 0.5, Real(0, 1, min_open=True), "--random-bags: the fraction of U lines in each bag."),
    Param("seed", 0, Integer(0, 2**32 - 1), "--random-bags: the seed of the draw."),
    Param("combine", "auto", str,
          "The combination tag uses by default: seq-poe (per-sequence product of experts: the weighted "
          "average of the bags' weights), seq-mixture (per-sequence mixture), trans-mixture "
          "(mixture of the transition distributions), trans-poe (their product); auto: the one of best "
          "F1 on the held-out data (--dev or --cv), seq-poe without.", ("auto",) + COMBINATIONS),
    Param("decode", "viterbi", str,
          "seq-mixture: viterbi on the chain of its mixed pairwise marginals (the paper's eq. 4), or "
          "max-marginal: each token's label of highest mixed marginal (eq. 5).", ("viterbi", "max-marginal")),
    Param("weights_by", "auto", str,
          "How each combination's weights are chosen on the held-out data: grid (every weight vector "
          "in steps of --grid-step, best F1), em (mixtures: highest likelihood of the gold labels; "
          "products then use the grid with two bags, else uniform), uniform; auto: grid for two "
          "bags, em for the mixtures and uniform for the products with more. Without held-out "
          "data the weights are uniform.", ("auto", "grid", "em", "uniform")),
    Param("grid_step", 0.05, Real(0, 0.5, min_open=True), "Step of the weight grid."),
    Param("cv", 0, Integer(2, MAX_BAG_FOLDS, also=(0,)),
          "K >= 2: choose the weights by K-fold cross-validation on the training data (every bag "
          "is trained K more times; the paper's choice for chunking) instead of on --dev. 0: on --dev."),
    Param("parallel", "auto", str,
          "threads: train the bags one after another, each with every thread; bags: train them at "
          "once, the threads shared out; auto: bags, the faster in the measurements of "
          "benchmarks/results/bag.md (2 cores).", ("auto", "threads", "bags")),
)
#: ``crftk tag``'s options for a bag: which combination, with which decoding.
DATA_FORMAT = Param("format", "conll", str,
                    "conll: CoNLL columns, features from the template; crfsuite: CRFsuite's data files "
                    "(LABEL<TAB>ATTR[:VALUE]<TAB>..., a blank line between sequences, \\: and \\\\ escaping a colon "
                    "and a backslash), the attributes themselves the features: no template.",
                    ("conll", "crfsuite"))
REFERENCE = Param("reference", False, bool,
                  "--format crfsuite: write each token's label from the input before the predicted one "
                  "(REFERENCE<TAB>PREDICTED, as crfsuite tag -r), so crftk eval scores the output.")
TAG_COMBINE = Param("combine", "chosen", str,
                    "For a bag: the combination to tag with (chosen: the one crftk bag chose).",
                    ("chosen",) + COMBINATIONS)
TAG_DECODE = Param("decode", "chosen", str,
                   "For a bag combined by seq-mixture: viterbi or max-marginal decoding (chosen: the "
                   "bag's).", ("chosen", "viterbi", "max-marginal"))

#: The marker of a label cell that names no label (any label), in training files and --force-col columns.
UNKNOWN_LABEL = replace(_TRAINING["unknown_label"],
                        help="--force-col: a cell equal to this marker is unknown (any label), and a cell A|B "
                             "the set of labels A and B. Empty: no marker, as in training (every cell one label).")
#: ``crftk tag``'s constrained decoding (crftk.structures.forced).
FORCE_COL = Param("force_col", None, column_index(),
                  "Constrained decoding: a token whose cell in column COL (0-based; negative counts from the "
                  "end) is a label of the model keeps it; the --unknown-label marker frees the token, a set "
                  "A|B restricts it; the rest is decoded (Viterbi, -n, -v) under these constraints. A label "
                  "the model does not know, or forced labels that admit no labeling under the model's "
                  "--constraints, is an error. One CRF (any order, --train-scheme converted token by token) "
                  "or a two-stage model's second stage; the output's format is that of plain tagging, "
                  "decoded by the same kernels but not on the compiled byte path.")


def defaults(params=TRAIN):
    """{name: default} of the declarations."""
    return {p.name: p.default for p in params}


def find(name, params=TRAIN):
    """The declaration called ``name``; KeyError if there is none."""
    for p in params:
        if p.name == name:
            return p
    raise KeyError(name)


def check(name, value, params=TRAIN, warn=None):
    """One option's value checked against its declaration (thread counts capped, with ``warn``)."""
    return find(name, params).check(value, warn)


#: Options a model's record stores only when they differ from these values, so that the files of
#: models trained without them are those of before they existed.
_RECORDED_WHEN_SET = {"train_scheme": "none", "unknown_label": "?", "entity_ratio": 0.0, "max_segment": 0}
#: Options recorded only with --entity-ratio, which alone reads them.
_ENTITY_RATIO = ("entity_ratio_margin", "entity_ratio_weight", "outside_label")


def recorded(options):
    """Training options as a model's record stores them: --train-scheme, --unknown-label and
    the entity ratio's options only when given."""
    ratio = options.get("entity_ratio", 0.0)
    return {k: v for k, v in options.items()
            if not (k in _RECORDED_WHEN_SET and v == _RECORDED_WHEN_SET[k])
            and not (k in _ENTITY_RATIO and not ratio)}


def check_params(params, options, what, warn=None):
    """Options of ``params`` with defaults filled in and every value checked; TypeError on an
    unknown name (a programming error), CrftkError on a bad value."""
    names = {p.name for p in params}
    unknown = set(options) - names
    if unknown:
        raise TypeError(f"unknown {what} options: {sorted(unknown)}")
    return {p.name: p.check(options.get(p.name, p.default), warn) for p in params}


# What users of other CRF tools type for crftk's options, for the suggestion of an unknown
# option (click's own guess, by spelling, offers --period for --iterations). Keys are
# spelled without leading dashes, lower case, '_' as '-'; values: (crftk's option, a note).
# They never become options: one name per option keeps --help and the docs short.
_CRFPP_C = "CRF++'s -c C is --c2 1/(2C)"
FOREIGN_OPTIONS = {
    **{name: ("--max-iter", None) for name in (
        "iterations", "iteration", "iter", "iters", "maxiter", "max-iterations", "max-iteration",
        "max-iters", "n-iter", "num-iterations", "epochs")},
    "c": ("--c2", _CRFPP_C), "cost": ("--c2", _CRFPP_C), "l2": ("--c2", None), "rho2": ("--c2", None),
    "l1": ("--c1", None), "rho1": ("--c1", None),
    "f": ("--min-freq", None), "freq": ("--min-freq", None), "minfreq": ("--min-freq", None),
    "feature.minfreq": ("--min-freq", None), "cutoff": ("--min-freq", None),
    "e": ("--epsilon", None), "eta": ("--epsilon", None), "stopeps": ("--epsilon", None),
    "delta": ("--epsilon", None), "stopwin": ("--period", None),
    "a": ("--algorithm", None), "algo": ("--algorithm", None), "type": ("--model-type", None),
    "nthread": ("--threads", None), "thread": ("--threads", None), "nthreads": ("--threads", None),
    "devel": ("--dev", None), "pattern": ("--template", None),
    "num-memories": ("--history", None), "m-memory": ("--history", None),
}


def foreign_option(name, known):
    """crftk's option for an unknown option ``name`` that another CRF tool has (CRF++'s -c,
    CRFsuite's max_iterations, Wapiti's --maxiter ...), as (option, note or None), if the
    command has that option (``known``: its option strings); else None."""
    key = name.lstrip("-").lower().replace("_", "-")
    hit = FOREIGN_OPTIONS.get(key)
    return hit if hit is not None and hit[0] in known else None
