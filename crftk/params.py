"""Options declared once, with their bounds: the CLI's options and the library's checks.

A numeric option's ``type`` is a bounded number (:class:`Integer`, :class:`Real`,
:class:`Threads`): as a click type it turns the command-line text into a value or
fails with one line; :meth:`Param.check` applies the same bounds to a Python
caller's value (CrftkError). Every bound is far beyond any real use; they exist so
that a typo or a fuzzer cannot reach an overflow, a hang or gigabytes of memory.
"""

import math
import numbers
import os
from dataclasses import dataclass

import click

from crftk.errors import CrftkError, shown
from crftk.templates import MAX_COLUMNS

#: Iterations, epochs, rounds: CoNLL-2000 converges within about a thousand.
MAX_ITER = 1_000_000
#: Counts of tokens or attributes: the kernels number tokens with 32-bit integers.
MAX_COUNT = 1_000_000_000
#: Penalties and smoothing constants: at 1e6 every weight is ~0 or the loss a step.
MAX_COEFFICIENT = 1e6
#: L-BFGS correction pairs: each holds two copies of the weights; 3-20 is usual.
MAX_HISTORY = 100
#: Labelings per sentence of ``tag -n``: the paths of a batch take K x tokens x 4 bytes.
MAX_NBEST = 1000
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


@dataclass(frozen=True)
class Param:
    """An option of train or induce, declared once: the CLI builds its option from it and
    the library checks a Python caller's value against the same declaration."""

    name: str
    default: object
    type: object        # str, int (with choices), or a bounded number (Integer, Real, Threads)
    help: str
    choices: tuple = ()

    @property
    def option(self):
        return "--" + self.name.replace("_", "-")

    def check(self, value, warn=None):
        """The value, checked (and for thread counts capped); CrftkError when it is out of range."""
        if self.choices:
            if value not in self.choices:
                raise CrftkError(f"{self.option} must be one of {', '.join(map(str, self.choices))} "
                                 f"(got {_got(value)})")
            return value
        if isinstance(self.type, _Bounded):
            return self.type.check(value, self.option, warn)
        return value


def check_params(params, options, what, warn=None):
    """Options of ``params`` with defaults filled in and every value checked."""
    names = {p.name for p in params}
    unknown = set(options) - names
    if unknown:
        raise TypeError(f"unknown {what} options: {sorted(unknown)}")
    return {p.name: p.check(options.get(p.name, p.default), warn) for p in params}


def column_index():
    """A column number, negative counting from the end."""
    return Integer(-MAX_COLUMNS, MAX_COLUMNS - 1)
