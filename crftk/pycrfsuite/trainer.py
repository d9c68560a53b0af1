"""python-crfsuite's ``Trainer``: sequences appended, an algorithm selected with CRFsuite's
parameters, a model trained by crftk and written in crftk's format."""

import os
import warnings

from crftk.pycrfsuite import options as crfsuite
from crftk.pycrfsuite.log import TrainLog
from crftk.pycrfsuite.tagger import tokens


class CRFSuiteError(Exception):
    """python-crfsuite's error type, for code that catches it (crftk raises CrftkError, ValueError
    and TypeError)."""


class BaseTrainer:
    """Holds the training data and CRFsuite's parameters of the selected algorithm.

    ``algorithm``: lbfgs (default), l2sgd, ap, pa or arow; ``params``: {name: value} of CRFsuite's
    parameters (see :meth:`params`, :meth:`help`); ``verbose``: crftk's training log on stderr.
    ``n_threads`` (crftk's own): the threads training runs on (0: every core).
    """

    def __init__(self, algorithm=None, params=None, verbose=True, *, n_threads=0):
        self.verbose = verbose
        self.n_threads = n_threads
        self._data = []
        self.select("lbfgs" if algorithm is None else algorithm)
        if params is not None:
            self.set_params(params)

    # data ---------------------------------------------------------------------
    def append(self, xseq, yseq, group=0):
        """Add a sequence (tokens: dicts of features or lists of attributes, or an ItemSequence)
        with its labels; ``group`` numbers it for ``train(holdout=group)``."""
        if isinstance(yseq, (str, bytes)):
            raise ValueError("yseq is a string: it must be a sequence of labels, one per item")
        xseq, yseq = list(tokens(xseq)), list(yseq)
        if len(xseq) != len(yseq):
            raise ValueError(f"the numbers of items and labels differ: {len(xseq)} items, {len(yseq)} labels")
        self._data.append((xseq, yseq, int(group)))

    def clear(self):
        """Remove every sequence appended."""
        self._data = []

    # parameters -----------------------------------------------------------------
    def select(self, algorithm, type="crf1d"):
        """Choose the training algorithm (lbfgs, l2sgd, ap, pa, arow); its parameters start at
        CRFsuite's defaults."""
        if type != "crf1d":
            raise ValueError(f"Bad arguments: algorithm={algorithm!r}, type={type!r} (crf1d is the only type)")
        try:
            self._algorithm = crfsuite.canonical(algorithm)
        except ValueError as e:
            raise ValueError(f"Bad arguments: algorithm={algorithm!r}, type={type!r}: {e}") from None
        self._values = {}

    @property
    def algorithm(self):
        """The selected algorithm's CRFsuite name."""
        return self._algorithm

    def params(self):
        """The names of the selected algorithm's parameters."""
        return list(crfsuite.PARAMETERS[self._algorithm])

    def set(self, name, value):
        """Set a parameter (a value or its string); ValueError for a name the algorithm lacks."""
        if name not in crfsuite.PARAMETERS[self._algorithm]:
            raise ValueError(f"Parameter not found: {name}")
        self._values[name] = crfsuite.cast(self._algorithm, name, value)

    def get(self, name):
        """A parameter's value (its default unless set)."""
        if name not in crfsuite.PARAMETERS[self._algorithm]:
            raise ValueError(f"Parameter not found: {name}")
        return self._values.get(name, crfsuite.PARAMETERS[self._algorithm][name][0])

    def set_params(self, params):
        """Set several parameters from a dict."""
        for name, value in params.items():
            self.set(name, value)

    def get_params(self):
        """{name: value} of every parameter of the selected algorithm."""
        return {name: self.get(name) for name in self.params()}

    def help(self, name):
        """What a parameter means (and what crftk does with it)."""
        if name not in crfsuite.PARAMETERS[self._algorithm]:
            raise ValueError(f"Parameter not found: {name}")
        return crfsuite.PARAMETERS[self._algorithm][name][2]

    # training -------------------------------------------------------------------
    def crftk_options(self):
        """The options of crftk.CRF this trainer trains with."""
        options, notes = crfsuite.crftk_options(self._algorithm, self._values, threads=self.n_threads)
        for note in notes:
            warnings.warn(note, UserWarning, stacklevel=3)
        return options

    def train(self, model, holdout=-1):
        """Train on the sequences appended (those of group ``holdout`` held out and scored every
        iteration) and write the model to the path ``model`` (nothing when it is empty).
        ``self.model_`` is the crftk Model trained, ``self.logparser`` its :class:`TrainLog`."""
        from crftk.api import CRF
        options = self.crftk_options()
        train = [(x, y) for x, y, g in self._data if g != holdout]
        dev = [(x, y) for x, y, g in self._data if g == holdout] if holdout != -1 else []
        if not train:
            raise ValueError("no training data: append sequences (outside the holdout group) first")
        crf = CRF(verbose=bool(self.verbose), keep="last", **options)
        X, y = [x for x, _ in train], [y for _, y in train]
        if dev:
            crf.fit(X, y, [x for x, _ in dev], [y for _, y in dev])
        else:
            crf.fit(X, y)
        path = os.fspath(model) if model is not None else ""
        if path:
            crf.save(path)
        self.model_ = crf.model_
        held = None
        if dev:
            gold = [y for _, y in dev]
            held = (gold, [list(p) for p in crf.predict([x for x, _ in dev])])
        self.logparser = TrainLog.from_record(crf.model_.info, crf.model_.space.n_params, held)
        self._after_training()

    def _after_training(self):
        pass


class Trainer(BaseTrainer):
    """The trainer with python-crfsuite's hooks: after training, when ``verbose``, ``on_iteration
    (log, info)`` is called for each iteration (``info``: its dict in ``logparser.iterations``),
    then ``on_optimization_end(log)`` and ``on_end(log)``. crftk's log is printed as training
    runs; the hooks print nothing unless overridden (crftk's driver does not call into Python
    between iterations, so they come after the last one)."""

    logparser = None

    def _after_training(self):
        if not self.verbose:
            return
        log = self.logparser
        self.on_start(log.log[0] if log.log else "")
        self.on_featgen_end("")
        for it in log.iterations:
            self.on_iteration("", it)
        self.on_optimization_end(log.last_log)
        self.on_end("")

    def _quiet(self, log, *info):
        """A hook: override it to act on the event (``on_iteration(log, info)``,
        ``on_featgen_progress(log, percent)``, the others ``(log)``)."""

    on_start = on_featgen_progress = on_featgen_end = on_prepared = on_prepare_error = _quiet
    on_iteration = on_optimization_end = on_end = _quiet
