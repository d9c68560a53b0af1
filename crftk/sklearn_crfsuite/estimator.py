"""sklearn-crfsuite's ``CRF`` estimator, trained and run by crftk.

The constructor takes sklearn-crfsuite's parameters with their defaults (None: CRFsuite's
default for the algorithm) and meaning, plus ``n_threads`` (crftk's: 0 uses every core); each
becomes a crftk option as :mod:`crftk.pycrfsuite.options` says. ``fit`` trains through
:class:`crftk.pycrfsuite.Trainer` (``trainer_cls``, if given, must be a subclass of it). The
fitted attributes are sklearn-crfsuite's, read from crftk's model as CRFsuite stores one: only
non-zero weights, and only the attributes that have one. ``predict`` and ``predict_marginals``
tag all sentences in crftk's batches (threads over sentences) and return numpy object arrays
made as sklearn-crfsuite makes them.
"""

import inspect
import os
import tempfile
import warnings

import numpy as np

from crftk.api import CRF as _CRF
from crftk.api import NotFittedError as _NotFitted
from crftk.api import _Estimator
from crftk.model import Model
from crftk.pycrfsuite import Tagger, Trainer
from crftk.sklearn_crfsuite.metrics import flat_accuracy_score

#: sklearn-crfsuite's CRF parameter -> CRFsuite's parameter name (as its Trainer takes them).
CRFSUITE_NAMES = {
    "min_freq": "feature.minfreq", "all_possible_states": "feature.possible_states",
    "all_possible_transitions": "feature.possible_transitions", "c1": "c1", "c2": "c2",
    "max_iterations": "max_iterations", "num_memories": "num_memories", "epsilon": "epsilon",
    "period": "period", "delta": "delta", "linesearch": "linesearch", "max_linesearch": "max_linesearch",
    "calibration_eta": "calibration.eta", "calibration_rate": "calibration.rate",
    "calibration_samples": "calibration.samples", "calibration_candidates": "calibration.candidates",
    "calibration_max_trials": "calibration.max_trials", "pa_type": "type", "c": "c",
    "error_sensitive": "error_sensitive", "averaging": "averaging", "variance": "variance", "gamma": "gamma",
}


class NotFittedError(_NotFitted, AttributeError):
    """The CRF is used before it was fitted (a ValueError as crftk's, and an AttributeError, which
    sklearn-crfsuite's unfitted CRF raises)."""


class ModelFile:
    """Where the model file is (sklearn-crfsuite's ``modelfile``): ``name`` is ``model_filename``,
    a kept temporary file (``keep_tempfiles``), or None while the model is only in memory."""

    def __init__(self, name=None):
        self.name = name


class CRF:
    """A linear-chain CRF on feature dicts with sklearn-crfsuite's parameters; see the module's doc.

    ``algorithm``: lbfgs (default), l2sgd, ap, pa or arow. ``min_freq``, ``all_possible_states``,
    ``all_possible_transitions``, ``c1``, ``c2``, ``max_iterations``, ``num_memories``, ``epsilon``,
    ``period``, ``delta``, ``linesearch``, ``max_linesearch``, ``calibration_*``, ``pa_type``, ``c``,
    ``error_sensitive``, ``averaging``, ``variance``, ``gamma``: CRFsuite's parameters (None: its
    default for the algorithm; an algorithm that does not have one refuses it). ``verbose``:
    crftk's training log on stderr. ``model_filename``: the model file fit writes (crftk's format),
    or, unfitted, one to load and tag with. ``keep_tempfiles``: without ``model_filename``, fit also
    writes the model to a temporary file, left in place (``modelfile.name``). ``trainer_cls``: a
    subclass of crftk.pycrfsuite.Trainer to train with. ``n_threads``: threads (0: every core).
    """

    def __init__(self, algorithm=None, min_freq=None, all_possible_states=None, all_possible_transitions=None,
                 c1=None, c2=None, max_iterations=None, num_memories=None, epsilon=None, period=None,
                 delta=None, linesearch=None, max_linesearch=None, calibration_eta=None, calibration_rate=None,
                 calibration_samples=None, calibration_candidates=None, calibration_max_trials=None,
                 pa_type=None, c=None, error_sensitive=None, averaging=None, variance=None, gamma=None,
                 verbose=False, model_filename=None, keep_tempfiles=False, trainer_cls=None, n_threads=0):
        for name, value in locals().items():
            if name != "self":
                setattr(self, name, value)
        self.training_log_ = None
        self._model = None
        self._written = None

    # scikit-learn's parameter protocol: crftk's estimators' get_params and set_params over the
    # constructor's parameter names
    get_params = _Estimator.get_params
    set_params = _Estimator.set_params

    def __repr__(self):
        defaults = {p.name: p.default for p in self._PARAMS}
        args = [f"{name}={value!r}" for name, value in self.get_params().items() if value != defaults[name]]
        return f"CRF({', '.join(args)})"

    __sklearn_tags__ = _Estimator.__sklearn_tags__

    def __sklearn_is_fitted__(self):
        return self._fitted_model() is not None

    # training ------------------------------------------------------------------------
    def _trainer(self):
        cls = self.trainer_cls or Trainer
        if not (isinstance(cls, type) and issubclass(cls, Trainer)):
            raise TypeError("trainer_cls must be a subclass of crftk.pycrfsuite.Trainer (python-crfsuite's "
                            "Trainer trains with CRFsuite, not crftk)")
        params = {CRFSUITE_NAMES[name]: getattr(self, name) for name in CRFSUITE_NAMES
                  if getattr(self, name) is not None}
        trainer = cls(algorithm=self.algorithm, verbose=self.verbose, n_threads=self.n_threads)
        for name, value in params.items():
            if name not in trainer.params():
                raise ValueError(f"{_keyword(name)}={value!r} is not a parameter of algorithm "
                                 f"{trainer.algorithm} (its parameters: "
                                 f"{', '.join(_keyword(p) for p in trainer.params())})")
            trainer.set(name, value)
        return trainer

    def fit(self, X, y, X_dev=None, y_dev=None):
        """Train on sentences X (lists of feature dicts, python-crfsuite's format) with labels y;
        with X_dev and y_dev, score them every iteration (``training_log_``). Returns self."""
        if (X_dev is None) != (y_dev is None):
            raise ValueError("Pass both X_dev and y_dev to use the holdout data")
        X, y = list(X), list(y)
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} sentences but y has {len(y)} label sequences")
        trainer = self._trainer()
        for xseq, yseq in zip(X, y):
            trainer.append(xseq, yseq)
        if X_dev is not None:
            X_dev, y_dev = list(X_dev), list(y_dev)
            if len(X_dev) != len(y_dev):
                raise ValueError(f"X_dev has {len(X_dev)} sentences but y_dev has {len(y_dev)} label sequences")
            for xseq, yseq in zip(X_dev, y_dev):
                trainer.append(xseq, yseq, 1)
        path = self.model_filename
        if path is None and self.keep_tempfiles:
            fd, path = tempfile.mkstemp(suffix=".crftk", prefix="model")
            os.close(fd)
        trainer.train(path or "", holdout=-1 if X_dev is None else 1)
        self._written = path
        self._set_model(trainer.model_)
        self.training_log_ = trainer.logparser
        return self

    # the model -------------------------------------------------------------------------
    def _set_model(self, model):
        self._model = model
        self._estimator = None
        self._tagger = None
        self._info = None

    @property
    def modelfile(self):
        """Where the model file is (sklearn-crfsuite's ``modelfile``; ``name`` None while the model
        is only in memory)."""
        return ModelFile(self._written or self.model_filename)

    def _fitted_model(self):
        if self._model is None and self.model_filename is not None and os.path.exists(self.model_filename):
            self._set_model(Model.load(self.model_filename))
        return self._model

    def _crf(self):
        """The crftk.CRF of the model (raises NotFittedError before fit)."""
        model = self._fitted_model()
        if model is None:
            raise NotFittedError("this CRF is not fitted yet: call fit(X, y) first, or give model_filename")
        if self._estimator is None:
            crf = _CRF()
            crf._set_model(model)
            self._estimator = crf
        self._estimator.threads = self.n_threads
        return self._estimator

    @property
    def tagger_(self):
        """A crftk.pycrfsuite.Tagger of the model (None before fit)."""
        model = self._fitted_model()
        if model is None:
            return None
        if self._tagger is None:
            tagger = Tagger()
            tagger._open(model)
            self._tagger = tagger
        return self._tagger

    def _dump(self):
        if self.tagger_ is None:
            return None
        if self._info is None:
            self._info = self.tagger_.info()
        return self._info

    @property
    def classes_(self):
        """The labels (None before fit)."""
        return None if self.tagger_ is None else self.tagger_.labels()

    @property
    def size_(self):
        """Size of the model file in bytes (crftk's format; None before fit)."""
        info = self._dump()
        return None if info is None else int(info.header["size"])

    @property
    def num_attributes_(self):
        """Attributes with at least one non-zero weight (None before fit)."""
        info = self._dump()
        return None if info is None else int(info.header["num_attrs"])

    @property
    def attributes_(self):
        """Those attributes, by their number (None before fit)."""
        info = self._dump()
        if info is None:
            return None
        names = [None] * len(info.attributes)
        for name, number in info.attributes.items():
            names[int(number)] = name
        return names

    @property
    def state_features_(self):
        """{(attribute, label): weight} of the non-zero state weights (None before fit)."""
        info = self._dump()
        return None if info is None else info.state_features

    @property
    def transition_features_(self):
        """{(from label, to label): weight} of the non-zero transition weights (None before fit)."""
        info = self._dump()
        return None if info is None else info.transitions

    @property
    def model_(self):
        """The crftk Model (crftk's own attribute; None before fit)."""
        return self._fitted_model()

    # tagging ---------------------------------------------------------------------------
    def predict(self, X):
        """The best labeling of each sentence: a numpy object array of label lists."""
        return _array([list(labels) for labels in self._crf().predict(list(X))])

    def predict_single(self, xseq):
        """The best labeling of one sentence: a list of labels."""
        return list(self._crf().predict([xseq])[0])

    def predict_marginals(self, X):
        """Per sentence, per token {label: probability}: a numpy object array."""
        return _array(self._crf().predict_marginals(list(X)))

    def predict_marginals_single(self, xseq):
        """Per token of one sentence {label: probability}."""
        return self._crf().predict_marginals([xseq])[0]

    def score(self, X, y):
        """Token accuracy of the predictions on X (as sklearn-crfsuite's score)."""
        return flat_accuracy_score(y, self.predict(X))

    # pickling: the parameters, the model file's bytes and the training log -----------
    def __getstate__(self):
        model = self._fitted_model()
        return {"crftk": 1, "params": self.get_params(), "training_log": self.training_log_,
                "model": None if model is None else model.to_bytes()}

    def __setstate__(self, state):
        if not isinstance(state, dict) or state.get("crftk") != 1:
            raise ValueError("not the pickled state of a crftk.sklearn_crfsuite.CRF")
        self.__init__(**state["params"])
        self.training_log_ = state["training_log"]
        if state["model"] is not None:
            self._set_model(Model.from_bytes(state["model"], name="<pickled CRF>"))


# the constructor's parameters, as crftk's estimators declare theirs (name, default)
CRF._PARAMS = tuple(inspect.signature(CRF.__init__).parameters.values())[1:]


def _array(rows):
    """A numpy object array of the rows, as numpy makes it (two-dimensional when every sentence
    has the same length, as sklearn-crfsuite's)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.VisibleDeprecationWarning)
        return np.array(rows, dtype=object)


def _keyword(crfsuite_name):
    """sklearn-crfsuite's keyword of a CRFsuite parameter."""
    for keyword, name in CRFSUITE_NAMES.items():
        if name == crfsuite_name:
            return keyword
    return crfsuite_name
