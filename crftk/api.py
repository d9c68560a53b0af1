"""The Python API: a scikit-learn-style CRF estimator on in-memory sentences, and readers.

Data are plain Python lists, as in a CoNLL file: a sentence is a list of token
rows, a row a sequence of column strings (a bare string is a row of one
column), without the label column; the labels are a separate list ``y`` of
label sequences, one per sentence. :func:`read_conll` reads a file into that
shape. The estimator trains through :func:`crftk.commands.train.fit` and decodes through
:class:`crftk.kinds.chain.Tagger`, so it gives exactly what ``crftk train`` and
``crftk tag`` give, and its model files are theirs.

scikit-learn is not needed: the estimators follow its conventions (parameters
stored as given, ``get_params``/``set_params``, ``fit``/``predict``/``score``,
pickled as their model file's bytes), so ``sklearn.base.clone``, joblib and
``sklearn.model_selection`` work with them when scikit-learn is installed. Errors
name the parameters as the keywords they are here (``c2``, not ``--c2``).
"""

import functools
import inspect
import os
import re
import warnings
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from crftk.io.atomic import AtomicWriter
from crftk.io.conll import (MAX_SENTENCE_TOKENS, Sentence, check_inputs, chunked, describe_widths, iter_corpus,
                            read_corpus)
from crftk.io.outputs import check_apart, check_output
from crftk.io.partial import SET_SEP
from crftk.kinds.chain import Tagger
from crftk.errors import CrftkError, shown
from crftk.evaluation.conlleval import evaluate as _evaluate
from crftk.evaluation.conlleval import read_labels
from crftk.model import Model
from crftk.progress import Reporter
from crftk.features.attributes import AttributeSpace, attribute_template, flatten
from crftk.features.templates import parse_template, read_template
from crftk.params import (BAG, CHECKPOINT_EVERY, FACTORIAL, FIRST_STAGE_FOLDS, INIT_SPACE, SCHEDULER, STREAM,
                          STREAM_BATCH_TOKENS, TRAIN, VECTORS, VECTORS_LOOKUP, WORKERS, Param, python_names)
from crftk.features.vectors import attach_vectors
from crftk.params import python_spelling
from crftk.commands.train import check_options
from crftk.commands.train import fit as _fit

__all__ = ["CRF", "Bag", "FactorialCRF", "Pipeline", "Labelings", "NotFittedError", "read_conll", "evaluate"]

#: Tokens decoded at once by predict and its relatives (as ``crftk tag --batch-tokens``).
BATCH_TOKENS = 50_000

#: Name of a template given as text or lines, in error messages.
TEMPLATE_TEXT = "<template>"

# The estimator's own parameters; the training ones are crftk.params.TRAIN, declared once for
# crftk train, train.fit and this class.
API_PARAMS = (
    Param("template", None, object,
          "The feature template (CRF++ syntax with crftk's macros): a path, template text, or a list "
          "of lines. A str is text when it holds a newline; otherwise it is a path when such a file "
          "exists, text when it holds a '%' (one macro line), and else a path (that is missing). "
          "Lexicon files of a template given as text are relative to the working directory. None "
          "with init."),
    Param("init", None, object,
          "A model to start from (a path to a model file, or a Model such as another fitted CRF's "
          "model_): its feature space and weights; no template then (crftk train --init)."),
    replace(INIT_SPACE, help="With init: grow adds the training data's attributes (those seen at least min_freq "
            "times; the model's own are all kept), state features and labels to the model's space, the new "
            "weights starting at 0; keep trains the model's space alone (crftk train --init-space)."),
    Param("trace", None, object,
          "A path (written when training ends) or an open text file: one line per objective "
          "evaluation (crftk train --trace)."),
    Param("checkpoint", None, object,
          "With checkpoint_every: the path where the current weights are saved as a model."),
    # the same declarations as crftk train's options (type, default, range), told for Python
    replace(CHECKPOINT_EVERY, help="Save the current weights to checkpoint every this many iterations "
            "(0: never); fitting with init=checkpoint and the same data resumes from there."),
    replace(SCHEDULER, help="Train data-parallel on the Dask cluster of this scheduler (tcp://HOST:PORT): "
            "the sentences in shards on its workers, the optimizer here (crftk train --scheduler; pip "
            "install crftk[dask])."),
    replace(WORKERS, help="Train data-parallel on a local Dask cluster of this many worker processes, "
            "started for the fit (0: no cluster; crftk train --workers)."),
    replace(STREAM, help="fit_files only: read the training files a batch at a time, every epoch, with "
            "algorithm sgd, perceptron, pa or arow, so that memory holds the feature dictionary and one batch, "
            "not the corpus (crftk train --stream)."),
    replace(STREAM_BATCH_TOKENS, help="With stream: tokens per batch (a batch holding the whole corpus trains "
            "exactly as without stream)."),
    replace(VECTORS, type=object,
            help="The word vectors of the template's %vec[r,c,NAME] lines: {NAME: path of a word2vec/GloVe "
                 "text file} (crftk train --vectors NAME=FILE). The model stores those it reads."),
    VECTORS_LOOKUP,
    Param("verbose", False, bool,
          "Log training (one line per iteration) to stderr, as crftk train does. Otherwise training "
          "is silent, and its warnings are Python warnings (UserWarning)."),
)
PARAMS = API_PARAMS[:1] + TRAIN + API_PARAMS[1:]
_BY_NAME = {p.name: p for p in PARAMS}
_TRAIN_NAMES = tuple(p.name for p in TRAIN)
VERBOSE = _BY_NAME["verbose"]

#: Bag's parameters: its templates, crftk bag's options, the training options, verbose.
BAG_PARAMS = (Param("templates", None, object,
                    "The bags' templates: a list of templates (paths, text or lists of lines, as CRF's), "
                    "or one with random_bags=K."),) + BAG + TRAIN + (VERBOSE,)
#: FactorialCRF's parameters: the template, crftk train's factorial options, the training
#: options a factorial CRF takes (not label_col: each label sequence list is a chain), verbose.
FACTORIAL_PARAMS = (API_PARAMS[0],) + FACTORIAL + (
    Param("warm_start", False, bool,
          "inference trp: every objective evaluation starts message passing from the previous "
          "one's messages (crftk train --warm-start)."),
) + tuple(p for p in TRAIN if p.name != "label_col") + (VERBOSE,)


class NotFittedError(CrftkError, ValueError):
    """The estimator is used before it was fitted (a ValueError, as scikit-learn's is)."""


def _keywords(method):
    """The method with options named as Python keywords in its errors and warnings (c2, not --c2)."""
    @functools.wraps(method)
    def named(*args, **kwargs):
        with python_names():
            return method(*args, **kwargs)
    return named


class Labelings(list):
    """What ``predict`` returns: a list of label lists, one per sentence, that numpy takes as a
    one-dimensional array of sentences (dtype object) rather than a table of tokens, which
    sentences of different lengths are not. So scikit-learn can join and reorder the folds of
    ``cross_val_predict``; it is a list in every other way."""

    def __array__(self, dtype=None, copy=None):
        out = np.empty(len(self), dtype=object)
        for i, labels in enumerate(self):
            out[i] = labels
        return out if dtype is None else out.astype(dtype)


class _Estimator:
    """scikit-learn's parameter protocol over the declarations ``_PARAMS`` (each stored as an
    attribute of its name, as given), and pickling as ``_state``/``_restore`` say: a model
    travels as its file's bytes, checked again when unpickled, never as pickled objects."""

    _PARAMS = ()

    def get_params(self, deep=True):
        """The constructor's arguments, by name."""
        return {p.name: getattr(self, p.name) for p in self._PARAMS}

    def set_params(self, **params):
        """Set constructor arguments; returns self. An unknown name is a ValueError (as in sklearn)."""
        names = {p.name for p in self._PARAMS}
        for name in params:
            if name not in names:
                raise ValueError(f"invalid parameter {name!r} for estimator {self!r}; valid parameters: "
                                 f"{', '.join(sorted(names))}")
        for name, value in params.items():
            setattr(self, name, value)
        return self

    def _init_params(self, given, positional=1):
        """Store the declared parameters (those after the ``positional`` ones) from ``given``,
        defaults for the others; an unknown name is a TypeError, as for any function."""
        names = {p.name for p in self._PARAMS[positional:]}
        for name in given:
            if name not in names:
                raise TypeError(f"{type(self).__name__}.__init__() got an unexpected keyword argument {name!r}")
        for p in self._PARAMS[positional:]:
            setattr(self, p.name, given.get(p.name, p.default))

    def __repr__(self):
        args = []
        for p in self._PARAMS:
            value = getattr(self, p.name, p.default)
            if not _same(value, p.default):
                args.append(f"{p.name}={_short(value)}")
        return f"{type(self).__name__}({', '.join(args)})"

    def __sklearn_tags__(self):
        # only scikit-learn calls this, so scikit-learn is there to import; crftk never imports it
        from sklearn.utils import InputTags, Tags, TargetTags
        return Tags(estimator_type=None, target_tags=TargetTags(required=True), transformer_tags=None,
                    regressor_tags=None, classifier_tags=None,
                    input_tags=InputTags(two_d_array=False, string=True))

    def __sklearn_is_fitted__(self):
        return hasattr(self, "model_")

    def _input_files(self):
        """(description, path) of the files this estimator's parameters name (templates, init and
        stage models): nothing it writes may replace them (io.outputs.check_apart)."""
        return []

    #: the kind of model file the estimator holds (crftk.model.KINDS), and how it is fitted
    _kind = None
    #: other kinds it holds too (a CRF: a semi-Markov CRF's)
    _more_kinds = ()
    _fit_call = "fit(X, y)"

    def _model(self):
        model = getattr(self, "model_", None)
        if model is None:
            name = type(self).__name__
            raise NotFittedError(f"this {name} is not fitted yet: call {self._fit_call} first, or {name}.load(path)")
        return model

    def save(self, path):
        """Write the model file (the format of the command line's; written atomically)."""
        model = self._model()
        self._check_apart(path)
        model.save(path)

    @classmethod
    def _load_model(cls, path):
        """The Model of a file, refused unless it is of the estimator's kind."""
        model = Model.load(path)
        cls._require_kind(model, f"crftk.{cls.__name__}.load")
        return model

    @classmethod
    def _require_kind(cls, model, entry):
        """Refuse a model of no kind the estimator holds (``_kind``, ``_more_kinds``) in one line."""
        if model.kind not in cls._more_kinds:
            model.require_kind(cls._kind, entry)

    def _check_apart(self, path, what="model"):
        check_apart([(what, path)], self._input_files())

    def __getstate__(self):
        state = {"crftk": 1, "params": self.get_params()}
        if hasattr(self, "model_"):
            state["model"] = self.model_.to_bytes()
        return state

    def __setstate__(self, state):
        kind = type(self).__name__
        if not isinstance(state, dict) or state.get("crftk") != 1:
            raise CrftkError(f"not the pickled state of a crftk {kind} (or of a newer version)")
        self.__init__(**state["params"])
        if "model" in state:
            self._set_model(Model.from_bytes(state["model"], name=f"<pickled {kind}>"))


def _signature(cls, positional, required=()):
    """``help(cls)`` shows every declared parameter with its default (the first ``positional``
    may be given by position; the ``required`` ones have no default)."""
    kind = inspect.Parameter

    def parameter(i, p):
        how = kind.POSITIONAL_OR_KEYWORD if i < positional else kind.KEYWORD_ONLY
        return kind(p.name, how) if p.name in required else kind(p.name, how, default=p.default)

    cls.__init__.__signature__ = inspect.Signature(
        [kind("self", kind.POSITIONAL_OR_KEYWORD)] + [parameter(i, p) for i, p in enumerate(cls._PARAMS)])


def _document_batches(tagger, *rest):
    """(tagger, batch, indices in X) of sentences: whole documents a batch when a template looks
    across sentences (first mentions, %doc), all of them in one batch for %corpus aggregates."""
    from crftk.kinds.chain import by_document, whole_files
    *templates, index, sentences, docs = rest
    across = any(by_document(t) for t in templates)
    if across and docs is not None:
        # a batch must hold whole documents: bring each document's sentences together, in order
        order = sorted(range(len(sentences)), key=lambda k: sentences[k].doc)
        index, sentences = [index[k] for k in order], [sentences[k] for k in order]
    if any(whole_files(t) for t in templates):
        if sentences:
            yield tagger, sentences, index
        return
    start = 0
    for batch in chunked(sentences, BATCH_TOKENS, by_document=across):
        yield tagger, batch, index[start:start + len(batch)]
        start += len(batch)


def _tagger(model, threads):
    """The tagger of a model of CRF_KINDS (its kind's: crftk.kinds)."""
    from crftk.kinds import kind_of
    return kind_of(model).Tagger(model, threads=threads)


class CRF(_Estimator):
    """A linear-chain CRF estimator with scikit-learn's conventions.

    ``X`` is a list of sentences, a sentence a list of token rows, a row a
    sequence of column strings as in a CoNLL file without the label column (a
    bare string is a row of one column); ``y`` a list of label sequences. The
    template numbers columns as in the file, label included: with the default
    ``label_col=-1`` (the label last), column j of a row of X is the template's
    column j. ``docs``, where a method takes it, gives each sentence's document
    number (non-negative ints, as the -DOCSTART- lines of a file number them) for
    first-mention macros and jackknifed lexicons; by default X is one document.

    Fitted attributes: ``model_`` (the :class:`crftk.Model`) and ``classes_``
    (the labels, in the column order of ``predict_marginals(..., as_arrays=True)``).
    """

    _kind = "crf"
    _more_kinds = ("semimarkov",)

    _PARAMS = PARAMS

    def __init__(self, template=None, **params):
        self.template = template
        self._init_params(params)

    # training ---------------------------------------------------------------
    @_keywords
    def fit(self, X, y, X_dev=None, y_dev=None, *, docs=None, dev_docs=None):
        """Train on sentences X with labels y; with X_dev/y_dev, score that set every iteration.

        With a development set, ``keep="best"`` keeps the weights of the iteration
        with the best dev F1 (chosen on it, so its score is optimistic);
        ``keep="last"`` trains as without it. Returns self.
        """
        options, init = self._training_options()
        if init is not None and isinstance(init.space, AttributeSpace) or init is None and self.template is None:
            if self.vectors:
                raise CrftkError("vectors are read by a template's %vec lines; feature dicts carry their "
                                 "own real values (leave vectors=None)")
            template, train, dev = _attribute_data(X, y, X_dev, y_dev, docs, dev_docs)
        else:
            template, train, dev = self._column_data(X, y, X_dev, y_dev, docs, dev_docs, init, options)
        return self._train(train, template, dev, init, options)

    @_keywords
    def fit_files(self, files, dev=None):
        """Train on CoNLL files (a path or a list of paths, concatenated; the gold label in
        ``label_col``) read as ``crftk train`` reads them; ``dev``: a CoNLL file scored every
        iteration. With ``stream=True`` the files are read a batch at a time, every epoch
        (crftk train --stream); with ``workers``/``scheduler`` on a Dask cluster. Returns self.
        """
        options, init = self._training_options()
        paths = [files] if isinstance(files, (str, bytes, os.PathLike)) else list(files)
        if not paths:
            raise CrftkError("fit_files needs at least one training file")
        check_inputs([*paths, dev])
        template = None if init is not None else self._column_template()
        dev_sentences = None
        if dev is not None:
            dev_sentences = read_corpus(dev)
            if not dev_sentences:
                _Log(self.verbose)(f"crftk: warning: the development set {dev} has no sentences; it is not used")
        return self._train(iter_corpus(paths), template, dev_sentences, init, options, source=paths[0],
                           dev_source=dev)

    def _training_options(self):
        """(training options, init Model or None), checked before any data is read."""
        options = {}
        for name in _TRAIN_NAMES:
            value = getattr(self, name)
            options[name] = value.item() if isinstance(value, np.generic) else value  # JSON in the model
        check_options(options, log=lambda message: None)   # a bad value fails before the data are
        # converted; train.fit checks again, and warns (through _Log) of a capped thread count
        init = self._init_model()
        if init is not None and self.template is not None:
            raise CrftkError("init starts from the model's own template and feature space: "
                             "leave template=None (or drop init to train from the template)")
        if init is not None and self.vectors:
            raise CrftkError("init trains with the vectors its model holds: leave vectors=None")
        return options, init

    def _train(self, train, template, dev, init, options, **sources):
        """Fit through the training driver (its outputs checked first) and hold the model."""
        log = _Log(self.verbose)
        if dev is not None and not dev:
            log("crftk: warning: the development set has no tokens; it is not used")
        trace_path = None if self.trace is None or hasattr(self.trace, "write") else self.trace
        check_output(trace_path, "trace")
        checkpoint = None
        if self.checkpoint_every:
            every = _BY_NAME["checkpoint_every"].check(self.checkpoint_every)
            if self.checkpoint is None:
                raise CrftkError("checkpoint_every needs checkpoint, the path to save the weights to")
            checkpoint = (os.fspath(self.checkpoint), int(every))
            check_output(checkpoint[0], "checkpoint")
        # the checkpoint may be init: fitting from a checkpoint resumes, and updates it
        check_apart([("trace", trace_path), ("checkpoint", checkpoint and checkpoint[0])],
                    [i for i in self._input_files() if i[0] != "init model"])
        check_apart([("trace", trace_path)], self._input_files())
        trace = self.trace
        with _trace_file(trace) as out:
            model = _fit(train, template, dev=dev or None, init=init, init_space=self.init_space, log=log,
                         trace=out, keep_on_interrupt=True, checkpoint=checkpoint, scheduler=self.scheduler,
                         workers=self.workers, stream=self.stream, stream_batch_tokens=self.stream_batch_tokens,
                         **sources, **options)
        self._set_model(model)
        if model.info["interrupted"]:
            raise KeyboardInterrupt     # fitted with the last finished iteration's weights
        return self

    def _column_template(self):
        """The template parameter parsed, with its vectors attached."""
        template = _template(self.template)
        if self.vectors is not None and not isinstance(self.vectors, dict):
            raise TypeError(f"vectors must be a dict {{NAME: path}}, not {type(self.vectors).__name__}")
        attach_vectors(template, self.vectors, _BY_NAME["vectors_lookup"].check(self.vectors_lookup),
                       _Log(self.verbose))
        return template

    def _column_data(self, X, y, X_dev, y_dev, docs, dev_docs, init, options):
        """(template, training Sentences, development Sentences or None) of rows of columns."""
        if init is not None:
            template, n_columns, label_col = None, init.space.n_columns, init.space.label_col
            width = n_columns - 1
        else:
            template = self._column_template()
            width, label_col = None, options["label_col"]
        if y is None:
            raise CrftkError("fit needs the labels y (one label sequence per sentence of X)")
        marker = options["unknown_label"]
        _, train = _sentences(X, "X", width, label_col, y, "y", docs, "docs", marker=marker)
        if not train:
            raise CrftkError("no training sentences (X is empty or its sentences have no tokens)")
        width = len(train[0].rows[0]) - 1
        dev = None
        if X_dev is not None or y_dev is not None:
            if X_dev is None or y_dev is None:
                raise CrftkError("a development set needs both X_dev and y_dev")
            _, dev = _sentences(X_dev, "X_dev", width, label_col, y_dev, "y_dev", dev_docs, "dev_docs",
                                marker=marker)
        return template, train, dev

    def _init_model(self):
        init = self.init
        if init is None or isinstance(init, Model):
            return init
        if isinstance(init, (str, os.PathLike)):
            return Model.load(init)
        raise TypeError(f"init must be a model path or a Model (a fitted CRF's model_), "
                        f"not {type(init).__name__}")

    def _set_model(self, model):
        self._require_kind(model, "crftk.CRF")
        self.model_ = model
        self.classes_ = list(_tagger(model, threads=1).output_names)

    # decoding ---------------------------------------------------------------
    def _batches(self, X, docs):
        """(tagger, batch of Sentences, their indices in X) for the non-empty sentences of X."""
        model = self._model()
        space = model.space
        if isinstance(space, AttributeSpace):
            yield from _attribute_batches(model, X, docs, _BY_NAME["threads"].check(self.threads, warn=_Log(False)))
            return
        tagger = _tagger(model, threads=_BY_NAME["threads"].check(self.threads, warn=_Log(False)))
        index, sentences = _sentences(X, "X", None, space.label_col, None, None, docs, "docs",
                                      tagger.input_widths())
        yield from _document_batches(tagger, space.template, index, sentences, docs)

    @_keywords
    def predict(self, X, *, constraints=None, docs=None):
        """The best labeling of each sentence: a list of label lists (a :class:`Labelings`).

        ``constraints`` (constrained decoding, as ``crftk tag --force-col``): per sentence, per
        token a label (the token keeps it), None (free) or a set of labels (one of them); the
        rest is decoded under them. A label the model lacks, or a sentence whose constraints admit
        no labeling under the model's ``constraints`` scheme, is an error naming it.
        """
        out = Labelings([] for _ in range(_count(X, "X")))
        constraints = _constraint_lists(constraints, X)
        for tagger, batch, index in self._batches(X, docs):
            for i, labels in zip(index, tagger.tag(batch, _annotations(constraints, index))):
                out[i] = labels
        return out

    @_keywords
    def predict_marginals(self, X, *, as_arrays=False, constraints=None, docs=None):
        """Each token's probability of every label (forward-backward marginals).

        Per sentence, per token a dict label -> probability; with ``as_arrays``,
        per sentence a float array [tokens, labels] with columns in ``classes_`` order.
        Each token's probabilities sum to 1. ``constraints``: as :meth:`predict`'s; the
        marginals are then those of the labelings they allow.
        """
        self._crf_only("marginals")
        n_labels = len(self.classes_)
        out = [np.zeros((0, n_labels)) if as_arrays else [] for _ in range(_count(X, "X"))]
        constraints = _constraint_lists(constraints, X)
        for tagger, batch, index in self._batches(X, docs):
            inf = tagger.inference(batch)
            marg, _ = tagger.marginals(inf, **tagger.constrained(inf, batch, _annotations(constraints, index)))
            names = tagger.output_names
            for i, sl in zip(index, inf.corpus.sentence_slices()):
                out[i] = marg[sl] if as_arrays else [dict(zip(names, row)) for row in marg[sl].tolist()]
        return out

    @_keywords
    def predict_nbest(self, X, k, *, constraints=None, docs=None):
        """The k best labelings of each sentence: per sentence a list of (labels, probability),
        best first (fewer than k when the sentence has fewer labelings). ``constraints``: as
        :meth:`predict`'s; the labelings are those they allow, their probabilities conditional
        on them."""
        self._crf_only("n-best lists")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise CrftkError(f"k must be a positive number of labelings, not {k!r}")
        k = int(k)
        out = [[([], 1.0)] for _ in range(_count(X, "X"))]   # an empty sentence has one labeling
        constraints = _constraint_lists(constraints, X)
        for tagger, batch, index in self._batches(X, docs):
            inf = tagger.inference(batch)
            allowed = tagger.constrained(inf, batch, _annotations(constraints, index))
            paths, scores, counts = tagger.nbest(inf, k, **allowed)
            _, logz = tagger.marginals(inf, **allowed)
            probs = np.exp(scores - logz[:, None])
            for s, (i, sl) in enumerate(zip(index, inf.corpus.sentence_slices())):
                out[i] = [(tagger.output_tags(paths[r, sl], [0, sl.stop - sl.start]).tolist(), float(probs[s, r]))
                          for r in range(counts[s])]
        return out

    def _crf_only(self, what):
        if self._model().model_type == "memm":
            raise CrftkError(f"{what} are computed for CRFs only, not MEMMs")

    @_keywords
    def score(self, X, y, *, docs=None):
        """Chunk F1 in percent of the predictions on X against y (conlleval's, as crftk eval)."""
        self._model()
        gold = _label_lists(y, "y", X)
        return _evaluate(gold, self.predict(X, docs=docs)).overall.f1

    # model files and pickling -----------------------------------------------
    def _input_files(self):
        return [("template", _template_path(self.template)),
                ("init model", self.init if isinstance(self.init, (str, os.PathLike)) else None)]

    @classmethod
    def load(cls, path):
        """A fitted CRF from a model file (from save, crftk train or crftk induce)."""
        return cls._from_model(cls._load_model(path))

    @classmethod
    def _from_model(cls, model):
        options = model.info.get("options") or {}
        crf = cls(template=None if isinstance(model.space, AttributeSpace) else model.space.template.text,
                  **{name: options[name] for name in _TRAIN_NAMES if name in options})
        crf._set_model(model)
        return crf

    def __getstate__(self):
        state = super().__getstate__()
        if isinstance(self.init, Model):
            state["init"] = self.init.to_bytes()
            state["params"]["init"] = None
        return state

    def __setstate__(self, state):
        init = state.get("init") if isinstance(state, dict) else None
        super().__setstate__(state)
        if init is not None:
            self.init = Model.from_bytes(init, name="<pickled init model>")


class TwoStage(CRF):
    """A two-stage CRF (Krishnan & Manning 2006; ``crftk train --first-stage``): ``first``, a fitted
    CRF (or a model file's path), tags X; its labels go into the rows at its label column, and
    this CRF, whose ``template`` reads them there, also through ``%doc``/``%corpus`` aggregates over
    the documents (``docs``) and the whole X, is trained on out-of-fold labels of the first stage's
    configuration (``first_stage_folds`` folds of documents). predict runs both stages.
    """

    _kind = "two-stage"
    _more_kinds = ()
    _PARAMS = (Param("first", None, object, "The first stage: a fitted crftk.CRF, a Model, or a model file's "
                     "path."),) + PARAMS[:1] + (FIRST_STAGE_FOLDS,) + PARAMS[1:]

    def __init__(self, first=None, template=None, **params):
        self.first = first
        self.template = template
        self._init_params(params, positional=2)

    def _first_model(self):
        first = self.first
        if isinstance(first, CRF):
            return first._model()
        if isinstance(first, Model):
            return first
        if isinstance(first, (str, os.PathLike)):
            return Model.load(first)
        raise CrftkError("first must be a fitted crftk.CRF, a Model or a model file's path")

    @_keywords
    def fit(self, X, y, X_dev=None, y_dev=None, *, docs=None, dev_docs=None):
        """Train the second stage on the first stage's out-of-fold labels of X; returns self."""
        from crftk.training.twostage import fit_two_stage
        first = self._first_model()
        options = {name: getattr(self, name) for name in _TRAIN_NAMES}
        check_options(options, log=lambda message: None)
        if self.init is not None or self.checkpoint_every or self.scheduler is not None or self.workers:
            raise CrftkError("a TwoStage trains from its template on one machine: leave init, checkpoint_every, "
                             "scheduler and workers unset")
        label_col = first.space.label_col
        _, train = _sentences(X, "X", first.space.n_columns - 1, label_col, y, "y", docs, "docs")
        dev = None
        if X_dev is not None:
            _, dev = _sentences(X_dev, "X_dev", first.space.n_columns - 1, label_col, y_dev, "y_dev", dev_docs,
                                "dev_docs")
        options.pop("label_col", None)
        two = fit_two_stage(train, _template(self.template), first, folds=self.first_stage_folds, dev=dev or None,
                            log=_Log(self.verbose), **options)
        self._set_model(two.to_model())
        return self

    def _set_model(self, model):
        from crftk.kinds.twostage import TwoStage as Stages
        self.model_ = model
        self.stages_ = Stages.from_model(model)
        self.classes_ = list(self.stages_.second.output_labels)

    def _batches(self, X, docs):
        from crftk.kinds.twostage import Tagger as TwoStageTagger
        self._model()
        stages = self.stages_
        index, sentences = _sentences(X, "X", None, stages.first.space.label_col, None, None, docs, "docs",
                                      stages.input_widths())
        tagger = TwoStageTagger(stages, threads=_BY_NAME["threads"].check(self.threads, warn=_Log(False)))
        # whole documents when either stage looks across sentences (first mentions, %doc)
        yield from _document_batches(tagger, *(s.space.template for s in (stages.first, stages.second)), index,
                                     sentences, docs)

    def _crf_only(self, what):
        if self._model() is not None and self.stages_.second.model_type == "memm":
            raise CrftkError(f"{what} are computed for CRFs only, not MEMMs (this second stage is one)")

    def _input_files(self):
        return [("template", _template_path(self.template)),
                ("first stage", self.first if isinstance(self.first, (str, os.PathLike)) else None)]

    @classmethod
    def _from_model(cls, model):
        from crftk.kinds.twostage import TwoStage as Stages
        stages = Stages.from_model(model)
        options = stages.second.info.get("options") or {}
        two = cls(first=stages.first, template=stages.second.space.template.text,
                  **{name: options[name] for name in _TRAIN_NAMES if name in options and name != "label_col"})
        two._set_model(model)
        return two

    def __getstate__(self):
        state = _Estimator.__getstate__(self)
        state["params"]["first"] = None          # the model file holds the first stage
        return state

    def __setstate__(self, state):
        _Estimator.__setstate__(self, state)
        if hasattr(self, "stages_"):
            self.first = self.stages_.first


class Bag(_Estimator):
    """Feature bagging (``crftk bag``): one CRF per template, combined by seq-poe, seq-mixture,
    trans-mixture or trans-poe (Sutton, Sindelar & McCallum 2006).

    ``templates``: a list of templates (paths, text or lists of lines, as CRF's), or one
    with ``random_bags=K``. The other keyword arguments are crftk bag's options
    (crftk.params.BAG), the training options (crftk.params.TRAIN) and ``verbose``. ``fit``
    chooses each combination's weights on ``X_dev``/``y_dev`` (or by ``cv=K`` folds of the
    training data); ``predict`` combines as chosen unless told otherwise. Fitted
    attributes: ``model_`` (one Model holding every bag) and ``classes_``.
    """

    _kind = "bag"

    _PARAMS = BAG_PARAMS

    def __init__(self, templates, **params):
        self.templates = templates
        self._init_params(params)

    @_keywords
    def fit(self, X, y, X_dev=None, y_dev=None, *, docs=None, dev_docs=None, weights=None):
        """Train the bags on X, y; ``weights``: a weight file to use instead of choosing. Returns self."""
        from crftk.training.bagging import check_bag_options, fit_bag
        options = {p.name: getattr(self, p.name) for p in BAG + TRAIN}
        check_bag_options(options, log=lambda message: None)  # a bad value fails before the data are read
        if isinstance(self.templates, (str, os.PathLike)) or self.templates is None:
            raise CrftkError("templates must be a list (one template per bag)")
        templates = [_template(t) for t in self.templates]
        _, train = _sentences(X, "X", None, self.label_col, y, "y", docs, "docs")
        if not train:
            raise CrftkError("no training sentences (X is empty or its sentences have no tokens)")
        dev = None
        if X_dev is not None or y_dev is not None:
            if X_dev is None or y_dev is None:
                raise CrftkError("a development set needs both X_dev and y_dev")
            _, dev = _sentences(X_dev, "X_dev", len(train[0].rows[0]) - 1, self.label_col, y_dev, "y_dev",
                                dev_docs, "dev_docs")
        self._set_model(fit_bag(train, templates, dev=dev or None, weights_file=weights,
                                log=_Log(self.verbose), **options))
        return self

    def _set_model(self, model):
        from crftk.ensemble.bag import Bag as _Bag
        model.require_kind("bag", "crftk.Bag")
        self.classes_ = list(_Bag.from_model(model).labels)
        self.model_ = model

    def _tagged(self, X, docs, combine, decode, weights):
        from crftk.kinds import tagger_for
        model = self._model()
        tagger = tagger_for(model, combine=combine, decode=decode, weights=weights,
                            threads=_BY_NAME["threads"].check(self.threads, warn=_Log(False)))
        index, sentences = _sentences(X, "X", None, model.space.label_col, None, None, docs, "docs",
                                      tagger.input_widths())
        yield from _document_batches(tagger, *(m.space.template for m in tagger.bag.members), index, sentences, docs)

    @_keywords
    def predict(self, X, *, combine="chosen", decode="chosen", weights=None, docs=None):
        """The best labeling of each sentence under a combination (default: the one fit chose)."""
        out = Labelings([] for _ in range(_count(X, "X")))
        for tagger, batch, index in self._tagged(X, docs, combine, decode, weights):
            for i, labels in zip(index, tagger.tag(batch)):
                out[i] = labels
        return out

    @_keywords
    def predict_marginals(self, X, *, combine="chosen", weights=None, docs=None):
        """Per sentence a float array [tokens, labels] (columns in classes_ order): the
        combination's marginals."""
        out = [np.zeros((0, len(self.classes_ if hasattr(self, "classes_") else []))) for _ in range(_count(X, "X"))]
        for tagger, batch, index in self._tagged(X, docs, combine, "chosen", weights):
            inf = tagger.inference(batch)
            marg, _ = inf.marginals()
            for i, sl in zip(index, inf.corpus.sentence_slices()):
                out[i] = marg[sl]
        return out

    @_keywords
    def score(self, X, y, *, combine="chosen", docs=None):
        """Chunk F1 in percent of a combination's predictions on X against y."""
        return _evaluate(_label_lists(y, "y", X), self.predict(X, combine=combine, docs=docs)).overall.f1

    def export(self, path=None, weights=None):
        """The seq-poe combination as one ordinary Model (saved to path if given); weights:
        the bag's chosen seq-poe weights unless given."""
        from crftk.ensemble.bag import Bag as _Bag
        from crftk.ensemble.merge import seq_poe_model
        bag = _Bag.from_model(self.model_)
        model = seq_poe_model(bag, bag.weights("seq-poe") if weights is None else weights)
        if path is not None:
            self._check_apart(path, "exported model")
            model.save(path)
        return model

    def _input_files(self):
        templates = [self.templates] if isinstance(self.templates, (str, os.PathLike)) else self.templates or []
        return [("template", [_template_path(t) for t in templates])]

    @classmethod
    def load(cls, path):
        model = cls._load_model(path)
        bag = cls(model.info["bag"].get("templates", []))
        bag._set_model(model)
        return bag


_signature(Bag, 1, required={"templates"})


def _parameters_doc():
    def python(text):
        # the shared help names command-line options: --max-iter is max_iter here
        return re.sub(r"--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_"), text)

    lines = ["", "    Parameters (all keyword arguments but template; defaults as crftk train's)", "    " + "-" * 70]
    for p in PARAMS:
        choices = f" One of {', '.join(map(repr, p.choices))}." if p.choices else ""
        lines.append(f"    {p.name} = {p.default!r}")
        lines.append(f"        {python(p.help) if p in TRAIN else p.help}{choices}")
    return "\n".join(lines) + "\n"


CRF.__doc__ += _parameters_doc()
_signature(CRF, 1)
_signature(TwoStage, 2)


class _Log:
    """Training's log: stderr when verbose; otherwise silent but for warnings, which become
    Python warnings."""

    WARNING = "crftk: warning: "

    def __init__(self, verbose):
        self.reporter = Reporter() if verbose else None
        self.status = self.reporter.status if verbose else None

    def __call__(self, message):
        if self.reporter is not None:
            self.reporter(message)
        elif message.startswith(self.WARNING):
            # a Python warning names options as the keywords they are here
            warnings.warn(python_spelling(message[len(self.WARNING):]), UserWarning, stacklevel=4)


class _trace_file:
    """The trace as an open file: a given file as is, a path through an AtomicWriter."""

    def __init__(self, trace):
        self.trace, self.writer = trace, None

    def __enter__(self):
        if self.trace is None or hasattr(self.trace, "write"):
            return self.trace
        self.writer = AtomicWriter(self.trace)
        return self.writer.__enter__()

    def __exit__(self, *exc):
        return False if self.writer is None else self.writer.__exit__(*exc)


def _template_path(spec):
    """The file a template parameter names, or None (template text, a list of lines)."""
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and "\n" not in spec and os.path.isfile(spec)):
        return spec
    return None


def _template(spec):
    """A parsed template from a path, template text, or a list of lines (see the parameter's help)."""
    if isinstance(spec, os.PathLike):
        return read_template(spec)
    if isinstance(spec, str):
        if "\n" in spec:
            return parse_template(spec, TEMPLATE_TEXT)
        if os.path.isfile(spec):
            return read_template(spec)
        if "%" in spec:
            return parse_template(spec, TEMPLATE_TEXT)
        raise CrftkError("cannot open template: no such file (template text needs a newline, or "
                         "a '%' macro on its one line)", spec)
    if isinstance(spec, (list, tuple)) and all(isinstance(line, str) for line in spec):
        return parse_template("\n".join(line.rstrip("\r\n") for line in spec) + "\n", TEMPLATE_TEXT)
    raise TypeError(f"template must be a path, template text or a list of lines, not {type(spec).__name__}")


def _count(X, name):
    if isinstance(X, (str, bytes, os.PathLike)):
        raise CrftkError(f"{name} is a path or a string, not a list of sentences: read a file with "
                         f"crftk.read_conll(path, label_col=-1)")
    if isinstance(X, Mapping):
        raise CrftkError(f"{name} is a dict: it must be a list with one entry per sentence")
    try:
        return len(X)
    except TypeError:
        raise CrftkError(f"{name} must be a list with one entry per sentence, not {_a(X)}") from None


def _a(value):
    """A value's type for a message: "None", "an int", "a dict"."""
    if value is None:
        return "None"
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _held(value):
    """A value that should have been a string, for a message: "None", "an int (1)"."""
    return "None" if value is None else f"{_a(value)} ({shown(value)})"


def _is_sequence(value):
    """Whether a sentence or a row can be a list of rows or of strings (a dict or a number cannot)."""
    if value is None or isinstance(value, Mapping):
        return False
    try:
        iter(value)
    except TypeError:
        return False
    return True


def _is_partial_label(label):
    """A label of y that is partial: None (unknown) or a collection of the labels allowed."""
    return label is None or isinstance(label, (set, frozenset, tuple, list))


def _partial_cells(labels, name, i, marker):
    """A sentence's labels with partial ones (None: unknown; a set, tuple or list: the labels
    allowed) written as a label column writes them (crftk.io.partial): the marker, ``A|B``."""
    out = []
    for t, label in enumerate(labels):
        if _is_partial_label(label):
            if not marker:
                raise CrftkError(f"{name}[{i}][{t}] is a partial label ({_a(label)}), and partial labels are off "
                                 f"(unknown_label is empty)")
            if label is None:
                label = marker
            else:
                parts = sorted(set(label), key=str) if isinstance(label, (set, frozenset)) else list(label)
                for x in parts:
                    if not isinstance(x, str) or not x or any(c.isspace() for c in x) or SET_SEP in x or x == marker:
                        raise CrftkError(f"{name}[{i}][{t}] is a label set holding {_held(x)}: its labels are "
                                         f"strings without white space or {SET_SEP!r}, other than the unknown "
                                         f"marker {shown(marker)}")
                if not parts:
                    raise CrftkError(f"{name}[{i}][{t}] is an empty label set: give None for an unknown label")
                label = SET_SEP.join(dict.fromkeys(parts))
        out.append(label)
    return out


def _label_lists(y, name, X=None, *, training=False, marker=None):
    """y as a list of label lists, checked against the sentences of X; with ``training``, every
    label must be able to be a column of a CoNLL file (what a model file must hold). ``marker``:
    partial labels (None, sets) are written as cells with this unknown marker."""
    n = _count(y, name)
    if X is not None:
        X = list(X)
        if n != len(X):
            raise CrftkError(f"X has {len(X)} sentences but {name} has {n} label sequences")
    out = []
    for i, labels in enumerate(y):
        if isinstance(labels, str):
            raise CrftkError(f"{name}[{i}] is a str: {name} holds one sequence of labels per sentence")
        if isinstance(labels, bytes) or not _is_sequence(labels):
            raise CrftkError(f"{name}[{i}] is {_a(labels)}: {name} holds one sequence of labels (strings) "
                             f"per sentence")
        labels = list(labels)
        if training and marker is not None:
            labels = _partial_cells(labels, name, i, marker)
        try:
            "".join(labels)
        except TypeError:
            bad = next(x for x in labels if not isinstance(x, str))
            raise CrftkError(f"{name}[{i}] holds {_held(bad)}; labels are strings") from None
        if training:
            for t, label in enumerate(labels):
                if not label or any(c.isspace() for c in label):
                    what = "is an empty label" if not label else f"({shown(label)}) holds white space"
                    raise CrftkError(f"{name}[{i}][{t}] {what}: a label is one column of a CoNLL file, and a "
                                     f"model file holds no other")
        sentence = None if X is None else X[i]
        if sentence is not None and not isinstance(sentence, (str, bytes)) and hasattr(sentence, "__len__") \
                and len(labels) != len(sentence):
            raise CrftkError(f"X[{i}] has {len(sentence)} tokens but {name}[{i}] has {len(labels)} labels")
        out.append(labels)
    return out


def _constraint_lists(constraints, X):
    """predict's ``constraints`` checked against X: per sentence a list of token annotations (a
    label, None or a set of labels, crftk.structures.forced), or None when there are none."""
    if constraints is None:
        return None
    n = _count(constraints, "constraints")
    X = list(X)
    if n != len(X):
        raise CrftkError(f"X has {len(X)} sentences but constraints has {n}")
    out = []
    for i, (sentence, given) in enumerate(zip(X, constraints)):
        if isinstance(given, (str, bytes)) or not _is_sequence(given):
            raise CrftkError(f"constraints[{i}] is {_a(given)}: constraints hold one list per sentence, of a label, "
                             f"None or a set of labels per token")
        given = list(given)
        if hasattr(sentence, "__len__") and not isinstance(sentence, (str, bytes)) and len(given) != len(sentence):
            raise CrftkError(f"X[{i}] has {len(sentence)} tokens but constraints[{i}] has {len(given)}")
        for t, a in enumerate(given):
            if a is None or isinstance(a, str):
                continue
            if isinstance(a, bytes) or isinstance(a, Mapping) or not _is_sequence(a) \
                    or not all(isinstance(x, str) for x in a):
                raise CrftkError(f"constraints[{i}][{t}] is {_a(a)}: a token's constraint is a label, None or "
                                 f"a set of labels (strings)")
        out.append(given)
    return out


def _annotations(constraints, index):
    """(annotations, locate) of the sentences ``index`` of X (in a batch), as Tagger.tag takes them."""
    if constraints is None:
        return None
    flat, where = [], []
    for i in index:
        flat += constraints[i]
        where += [(f"constraints[{i}][{t}]", None) for t in range(len(constraints[i]))]
    return flat, where.__getitem__


def _sentences(X, name, width, label_col, y, y_name, docs, docs_name, widths=None, marker=None):
    """(indices in X, Sentences) of the non-empty sentences of X, rows checked.

    ``width``: the number of input columns every row must have (None: the first
    row's). With labels ``y``, each row gets its label inserted at ``label_col``
    (a column of the full row, as in a file); without, a placeholder goes there
    when columns follow it (a row may lack the label and the columns after the ones
    the model reads). ``widths`` (with ``width`` None): the model's input widths
    (crftk.io.conll.Widths, in a file's columns) that the first row's must give.
    """
    n = _count(X, name)
    labels = _label_lists(y, y_name, X, training=True, marker=marker) if y is not None else None
    if docs is not None:
        if _count(docs, docs_name) != n:
            raise CrftkError(f"{name} has {n} sentences but {docs_name} has {_count(docs, docs_name)} entries")
        docs = list(docs)
        for i, d in enumerate(docs):
            if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
                raise CrftkError(f"{docs_name}[{i}] is {d!r}: document numbers are non-negative ints")
    at = None
    first = None
    index, out = [], []
    for i, sent in enumerate(X):
        if isinstance(sent, (str, bytes)) or not _is_sequence(sent):
            raise CrftkError(f"{name}[{i}] is {_a(sent)}: a sentence is a list of token "
                             f"rows (for one column, a list of strings)")
        rows = []
        for t, row in enumerate(sent):
            if isinstance(row, Mapping):
                raise CrftkError(f"{name}[{i}][{t}] is a dict of features (python-crfsuite's input): "
                                 f"{_NO_FEATURE_INPUT}")
            if not _is_sequence(row):
                raise CrftkError(f"{name}[{i}][{t}] is {_a(row)}: a token row is a list of column strings "
                                 f"(for one column, a string)")
            row = [row] if isinstance(row, str) else list(row)
            message = None
            if width is None:
                width, first = len(row), (i, t)
                if widths is not None and _file_width(width, label_col) not in widths:
                    message = _widths_message(name, i, t, width, widths, label_col, labels is None)
            elif len(row) != width:
                message = _width_message(name, i, t, len(row), width, first, labels is None)
            if message is not None:
                if _looks_like_features(row):
                    message = f"{message}; its strings look like python-crfsuite features: {_NO_FEATURE_INPUT}"
                raise CrftkError(message)
            if at is None:
                c = label_col + width + 1 if label_col < 0 else label_col
                if not 0 <= c <= width and widths is None:
                    raise CrftkError(f"label_col {label_col} is not a column of rows of {width} input "
                                     f"columns and the label")
                at = c
            try:
                "".join(row)
            except TypeError:
                bad = next(x for x in row if not isinstance(x, str))
                raise CrftkError(f"{name}[{i}][{t}] holds {_held(bad)}; "
                                 f"columns are strings") from None
            if labels is not None:
                row.insert(at, labels[i][t])
            elif at < width:
                row.insert(at, "")          # the label column, which the template never reads
            rows.append(row)
        if rows:
            index.append(i)
            out.append(Sentence(rows, 0 if docs is None else int(docs[i]), 0, f"{name}[{i}]"))
    return index, out


#: Feature dicts or lists per token (python-crfsuite's input) with a template.
_NO_FEATURE_INPUT = ("feature dicts and feature lists are read without a template: CRF(template=None) (see "
                     "\"Feature dicts\" in crftk's README.md); with a template, a token row holds the column "
                     "strings of a CoNLL line (the label split off)")


def _refuse_partial_dicts(y):
    """Partial labels (None, sets in y) train with a template: one line for feature dicts."""
    for i, labels in enumerate(y):
        if _is_sequence(labels) and not isinstance(labels, (str, bytes)):
            for t, label in enumerate(labels):
                if _is_partial_label(label):
                    raise CrftkError(f"y[{i}][{t}] is a partial label ({_a(label)}): partial labels train from "
                                     "CoNLL-style rows with a template, not from feature dicts")


def _attribute_data(X, y, X_dev, y_dev, docs, dev_docs):
    """(template, training data, development data or None) of feature dicts or attribute lists
    (crftk.features.attributes)."""
    if docs is not None or dev_docs is not None:
        raise CrftkError("docs are for a template's first-mention macros and lexicons; feature dicts take none")
    if y is None:
        raise CrftkError("fit needs the labels y (one label sequence per sentence of X)")
    _refuse_partial_dicts(y)
    train = flatten(X, y)
    if not train.n_sequences:
        raise CrftkError("no training sentences (X is empty or its sentences have no tokens)")
    dev = None
    if X_dev is not None or y_dev is not None:
        if X_dev is None or y_dev is None:
            raise CrftkError("a development set needs both X_dev and y_dev")
        dev = flatten(X_dev, y_dev, name="X_dev", y_name="y_dev")
    return attribute_template(), train, dev


def _attribute_batches(model, X, docs, threads):
    """_batches of a model over attributes: (tagger, AttributeSequences, their indices in X)."""
    if docs is not None:
        raise CrftkError("docs are for a template's first-mention macros and lexicons; feature dicts take none")
    _count(X, "X")
    data = flatten(X)
    tagger = Tagger(model, threads=threads)
    for k0, k1 in _token_chunks(data.sent_ptr, BATCH_TOKENS):
        yield tagger, data.slice(k0, k1), data.index[k0:k1].tolist()


def _token_chunks(sent_ptr, tokens):
    """(first, end) sequence ranges of about ``tokens`` tokens each (at least one sequence)."""
    n = sent_ptr.size - 1
    k0 = 0
    while k0 < n:
        k1 = max(k0 + 1, int(np.searchsorted(sent_ptr, sent_ptr[k0] + tokens, side="right")) - 1)
        yield k0, min(k1, n)
        k0 = min(k1, n)
_FEATURE_STRING = re.compile(r"^[^=\s]+=")


def _looks_like_features(row):
    """Whether a row is a list of python-crfsuite feature strings ('word.lower=the', 'bias')."""
    return any(isinstance(x, str) and _FEATURE_STRING.match(x) for x in row)


def _file_width(width, label_col):
    """The columns in a file of an input row of ``width`` columns (the label column inserted
    when columns follow it)."""
    return width + 1 if label_col < width else width


def _widths_message(name, i, t, found, widths, label_col, predicting):
    """The error of a first row whose width the model cannot read."""
    own = sorted(w for w in range(max(widths) + 1) if _file_width(w, label_col) in widths)
    hint = ""
    if predicting and own and found == own[-1] + 1:
        hint = "; rows hold the input columns only: crftk.read_conll(path, label_col=-1) splits the label off"
    return f"{name}[{i}][{t}] has {found} columns, rows of {describe_widths(own)} are expected: {widths.needs}{hint}"


def _width_message(name, i, t, found, width, first, predicting):
    if first is None:       # the model fixed the width
        hint = ""
        if predicting and found == width + 1:
            hint = (" (rows hold the input columns only; crftk.read_conll(path, label_col=-1) "
                    "splits the label off)")
        return f"{name}[{i}][{t}] has {found} columns, the model reads {width}{hint}"
    return (f"{name}[{i}][{t}] has {found} columns but {name}[{first[0]}][{first[1]}] has {width}: "
            f"every token row has the same columns")


def _same(a, b):
    try:
        return a is b or (type(a) is type(b) and bool(a == b))
    except Exception:       # arrays and the like: shown
        return False


def _short(value):
    return shown(value, 60) if isinstance(value, str) else repr(value)


class Pipeline(_Estimator):
    """A pipeline of CRFs (``crftk compose``) in memory: stages trained apart, decoded in cascade
    or jointly (Sutton & McCallum 2005).

    ``Pipeline(models, feeds)`` (or ``Pipeline.compose``) builds one from Models or model paths
    (``compose`` also takes fitted CRFs), ``feeds[i]`` being the input column of model i+1 that
    model i's labels fill; ``names`` names the stages; ``Pipeline.load(path)`` reads a file of
    ``crftk compose``. X holds sentences of token rows in the last model's input columns, as
    ``read_conll(path, label_col=-1)`` gives them, or fewer: down to the last
    column a stage reads that no stage fills (a POS -> chunk pipeline takes the words alone).
    ``decode``: "joint" (exact over the product
    of the label sets when every fed column is read at offset 0 only, else by rescoring the
    ``nbest_upstream`` best upstream labelings: ``joint_mode``), "normalized" (the
    ``nbest_upstream`` best upstream labelings rescored by the sum of the stages'
    log-probabilities, log p(y1|x) + log p(y2|y1,x)) or "cascade".

    The stages come trained, so a pipeline has no ``fit``: it is built (``pipeline_``) when
    made, and again by ``set_params``. It pickles as its pipeline file's bytes.
    """

    _PARAMS = (
        Param("models", None, object, "The stages: Models or model paths (compose also takes fitted CRFs)."),
        Param("feeds", None, object, "feeds[i]: the input column of model i+1 that model i's labels fill "
                                     "(an int for two stages)."),
        Param("names", None, object, "The stages' names (None: unnamed)."),
        replace(_BY_NAME["threads"], help="Worker threads of decoding; 0 uses all cores."),
    )

    @_keywords
    def __init__(self, models, feeds, *, names=None, threads=0):
        self.models, self.feeds, self.names, self.threads = models, feeds, names, threads
        self._build()

    def _build(self):
        from crftk.kinds.pipeline import Pipeline as _Pipeline
        loaded = []
        for m in self.models:
            if isinstance(m, CRF):
                m = m._model()
            elif not isinstance(m, Model):
                m = Model.load(m)
            loaded.append(m)
        feeds = [self.feeds] if isinstance(self.feeds, (int, np.integer)) else list(self.feeds)
        threads = _BY_NAME["threads"].check(self.threads, warn=_Log(False))
        self.pipeline_ = _Pipeline.from_models(loaded, feeds, names=self.names, threads=threads, log=_Log(False))

    @_keywords
    def set_params(self, **params):
        """Set constructor arguments and build the pipeline again; returns self (unchanged if
        the new pipeline cannot be built)."""
        before = self.get_params()
        super().set_params(**params)
        try:
            self._build()
        except BaseException:
            super().set_params(**before)
            raise
        return self

    @classmethod
    @_keywords
    def load(cls, path, *, threads=0):
        """The pipeline of a file written by crftk compose (or save)."""
        from crftk.kinds.pipeline import Pipeline as _Pipeline
        return cls._from_pipeline(_Pipeline.load(path, threads=_BY_NAME["threads"].check(threads, warn=_Log(False))),
                                  threads)

    @classmethod
    def _from_pipeline(cls, pipeline, threads):
        """The estimator of a built pipeline: its stages' Models as ``models``."""
        est = cls.__new__(cls)
        stages = pipeline.stages
        est.models = [s.model for s in stages]
        est.feeds = [s.feed for s in stages[1:]]
        est.names = [s.name for s in stages] if any(s.name is not None for s in stages) else None
        est.threads = threads
        est.pipeline_ = pipeline
        return est

    @classmethod
    def compose(cls, models, feeds, *, names=None, threads=0):
        """A pipeline of CRFs, Models or model paths (a CRF gives its fitted model)."""
        models = [m._model() if isinstance(m, CRF) else m for m in models]
        return cls(models, feeds, names=names, threads=threads)

    def __getstate__(self):
        # the pipeline file's bytes; the stages' Models among the parameters are those of the
        # pipeline, named by their place rather than written twice
        params = self.get_params()
        stages = [s.model for s in self.pipeline_.stages]
        params["models"] = [_StageRef(stages.index(m)) if any(m is x for x in stages) else m
                            for m in params["models"]]
        return {"crftk": 1, "params": params, "pipeline": self.pipeline_.to_model().to_bytes()}

    def __setstate__(self, state):
        from crftk.kinds.pipeline import Pipeline as _Pipeline
        if not isinstance(state, dict) or state.get("crftk") != 1 or "pipeline" not in state:
            raise CrftkError("not the pickled state of a crftk Pipeline (or of a newer version)")
        params = dict(state["params"])
        with python_names():
            model = Model.from_bytes(state["pipeline"], name="<pickled Pipeline>")
            pipeline = _Pipeline.from_model(model, "<pickled Pipeline>",
                                            threads=_BY_NAME["threads"].check(params["threads"]))
        stages = [s.model for s in pipeline.stages]
        params["models"] = [stages[m.index] if isinstance(m, _StageRef) else m for m in params["models"]]
        self.__dict__.update(params)
        self.pipeline_ = pipeline

    def __sklearn_is_fitted__(self):
        return True         # its stages come trained

    @property
    def joint_mode(self):
        """"exact", "nbest" (K-best upstream rescoring) or None (a stage is not a first-order CRF)."""
        return self.pipeline_.joint_mode()

    @property
    def stage_labels(self):
        """The labels of each stage, in order."""
        return [s.labels for s in self.pipeline_.stages]

    def _batches(self, X):
        last = self.pipeline_.stages[-1].space
        label_col = last.label_col if self.pipeline_.optional_gold else last.n_columns
        index, sentences = _sentences(X, "X", None, label_col, None, None, None, "docs",
                                      self.pipeline_.input_widths())
        start = 0
        for batch in chunked(sentences, BATCH_TOKENS):
            yield batch, index[start:start + len(batch)]
            start += len(batch)

    @_keywords
    def predict(self, X, *, decode="joint", nbest_upstream=20, stages=False):
        """The last stage's labels of each sentence (a :class:`Labelings`); with ``stages``, per
        sentence a list of every stage's labels."""
        n = len(self.pipeline_.stages)
        out = Labelings([[] for _ in range(n)] if stages else [] for _ in range(_count(X, "X")))
        for batch, index in self._batches(X):
            for i, labels in zip(index, self.pipeline_.tag(batch, decode, nbest_upstream)):
                out[i] = labels if stages else labels[-1]
        return out

    @_keywords
    def predict_marginals(self, X):
        """Exact joint marginals: per sentence, per stage a float array [tokens, labels] (columns
        in ``stage_labels`` order), and the log partition function of each sentence."""
        n = len(self.pipeline_.stages)
        out = [[np.zeros((0, len(x))) for x in self.stage_labels] for _ in range(_count(X, "X"))]
        logz = np.zeros(len(out))
        for batch, index in self._batches(X):
            marg, lz = self.pipeline_.joint_marginals(batch)
            for k, i in enumerate(index):
                out[i] = [marg[c][k] for c in range(n)]
                logz[i] = lz[k]
        return out, logz

    @_keywords
    def predict_nbest(self, X, k):
        """The k best joint labelings of each sentence (exact joint decoding): per sentence a list
        of (per stage its labels, probability), best first."""
        out = [[] for _ in range(_count(X, "X"))]
        for batch, index in self._batches(X):
            for i, lists in zip(index, self.pipeline_.tag_nbest(batch, k)):
                out[i] = [(labels, prob) for prob, labels in lists]
        return out

    def _input_files(self):
        return [("stage model", [m for m in self.models if isinstance(m, (str, os.PathLike))])]

    def save(self, path):
        """Write the pipeline file (the format of crftk compose; written atomically)."""
        self._check_apart(path, "pipeline")
        self.pipeline_.save(path)


class _StageRef:
    """In a pickled Pipeline's parameters: the Model of stage ``index`` of its pipeline file."""

    def __init__(self, index):
        self.index = index


_signature(Pipeline, 2, required={"models", "feeds"})


# readers and scoring ------------------------------------------------------------
def read_conll(path, label_col=None, *, docs=False, max_sentence_tokens=MAX_SENTENCE_TOKENS, encoding="utf-8"):
    """Sentences of a CoNLL file (or of several, concatenated) as lists of rows.

    Each sentence is a list of token rows, each row a list of column strings.
    With ``label_col`` (e.g. -1), that column is split off: returns ``(X, y)``
    for :meth:`CRF.fit`. With ``docs``, the document number of each sentence
    (counted by -DOCSTART- lines) comes last: ``(X, docs)`` or ``(X, y, docs)``.
    ``encoding``: the files' (e.g. "latin-1"; the strings are the same as those of the
    file converted to UTF-8).
    """
    sentences = read_corpus(path, min_columns=1 if label_col is None else 2,
                            max_sentence_tokens=max_sentence_tokens, encoding=encoding)
    X = [s.rows for s in sentences]
    out = [X]
    if label_col is not None:
        if X:
            n = len(X[0][0])
            c = label_col + n if label_col < 0 else label_col
            if not 0 <= c < n:
                raise CrftkError(f"label column {label_col} does not exist in data of {n} columns",
                                 sentences[0].source, sentences[0].line)
            out.append([[row.pop(c) for row in rows] for rows in X])
        else:
            out.append([])
    if docs:
        out.append([s.doc for s in sentences])
    return out[0] if len(out) == 1 else tuple(out)


def evaluate(gold, pred=None, *, scheme="auto", gold_col=None, pred_col=-1, nbest_rank=0, encoding="utf-8"):
    """Chunk scores (conlleval's rules): an :class:`crftk.evaluation.conlleval.Evaluation`.

    In memory: ``evaluate(gold, pred)`` with two lists of label sequences. Files,
    as ``crftk eval``: ``evaluate(path)``, a tagged file with the gold and
    predicted labels in its last two columns (``gold_col``, ``pred_col``), or
    ``evaluate(gold_path, pred_path)``, read in ``encoding``. ``scheme`` checks the tags (auto: none).
    The result has ``overall.f1`` (percent), ``per_type``, accuracies,
    ``format()`` (conlleval's report) and ``to_dict()``.
    """
    paths = (str, bytes, os.PathLike)
    if isinstance(gold, paths):
        if pred is not None and not isinstance(pred, paths):
            raise TypeError("evaluate takes two label lists or one or two file paths, not a mixture")
        labels = read_labels(gold, pred, gold_col=gold_col, pred_col=pred_col, nbest_rank=nbest_rank,
                             encoding=encoding)
        return _evaluate(labels.gold, labels.pred, scheme=scheme, locate=labels.locate)
    if pred is None or isinstance(pred, paths):
        raise TypeError("evaluate takes two label lists (gold, predicted) or one or two file paths")
    gold = _label_lists(gold, "gold")
    pred = _label_lists(pred, "pred")
    return _evaluate(gold, pred, scheme=scheme)



class FactorialCRF(_Estimator):
    """A factorial CRF estimator (Sutton et al. 2004): one label chain per label sequence
    list, adjacent chains coupled at every token (``crftk train`` with several --label-col).

    ``X`` as for :class:`CRF` (rows of input columns); ``Y`` a list with one entry per chain,
    each a list of label sequences (one per sentence of X). The template numbers the columns
    of a row of X from 0; chain c's labels are column ``width + c`` (which it must not read);
    its ``P`` lines condition the pair factors on observations. ``inference``,
    ``tolerance``, ``max_sweeps``, ``warm_start``: as crftk train's; other keyword arguments are
    training options of :class:`CRF` (c2, max_iter, threads, ...) but label_col.

    Y and predict's output are chain-major, which scikit-learn's cross-validation helpers do
    not split: ``clone`` works, and cross-validation is a loop over ``KFold`` splits (README).
    """

    _kind = "factorial"
    _fit_call = "fit(X, Y)"

    _PARAMS = FACTORIAL_PARAMS

    def __init__(self, template=None, **params):
        self.template = template
        self._init_params(params)

    def _training_options(self):
        return {p.name: getattr(self, p.name) for p in TRAIN if p.name != "label_col"}

    @staticmethod
    def _rows(X, Y, name, width=None):
        _, sentences = _sentences(X, name, width, -1, None, None, None, None)
        if Y is not None:
            Y = [_label_lists(y, f"Y[{c}]", X, training=True) for c, y in enumerate(Y)]
            nonempty = [i for i, s in enumerate(X) if len(s)]
            for k, i in enumerate(nonempty):
                for t, row in enumerate(sentences[k].rows):
                    row.extend(y[i][t] for y in Y)
        return sentences

    @_keywords
    def fit(self, X, Y, X_dev=None, Y_dev=None):
        """Train on sentences X with one list of label sequences per chain in Y; returns self."""
        if Y is None or _count(Y, "Y") < 2:
            raise CrftkError("a factorial CRF needs two or more label sequence lists (one per chain) in Y")
        if self.template is None:
            raise CrftkError("FactorialCRF needs a template")
        opt = check_options(self._training_options(), log=lambda message: None)
        train = self._rows(X, Y, "X")
        if not train:
            raise CrftkError("no training sentences (X is empty or its sentences have no tokens)")
        width = len(train[0].rows[0]) - len(Y)
        dev = None
        if X_dev is not None:
            dev = self._rows(X_dev, Y_dev, "X_dev", width)
        model = _fit(train, _template(self.template), dev=dev or None, log=_Log(self.verbose),
                     keep_on_interrupt=True, inference=self.inference, tolerance=self.tolerance,
                     max_sweeps=self.max_sweeps, warm_start=self.warm_start,
                     **{**opt, "label_col": [width + c for c in range(len(Y))]})
        self._set_model(model)
        return self

    def _set_model(self, model):
        model.require_kind("factorial", "crftk.FactorialCRF")
        self.model_ = model
        self.classes_ = [list(x) for x in model.structure.output_labels]

    @_keywords
    def predict(self, X):
        """Per chain, per sentence of X, the labels of the best joint labeling."""
        from crftk.kinds.factorial import FactorialDecoder
        model = self._model()
        st = model.structure
        width = st.space.n_columns - st.n_chains
        n = _count(X, "X")
        out = [Labelings([] for _ in range(n)) for _ in range(st.n_chains)]
        index, sentences = _sentences(X, "X", width, -1, None, None, None, None)
        decoder = FactorialDecoder(model, threads=_BY_NAME["threads"].check(self.threads, warn=_Log(False)),
                                   inference=self.inference, tolerance=self.tolerance, max_sweeps=self.max_sweeps)
        start = 0
        for batch in chunked(sentences, BATCH_TOKENS):
            labels, _ = decoder.decode(batch)
            for i, lab in zip(index[start:start + len(batch)], labels):
                for c in range(st.n_chains):
                    out[c][i] = lab[c]
            start += len(batch)
        return out

    @_keywords
    def score(self, X, Y):
        """Joint token accuracy in percent (every chain right) of the predictions on X against Y."""
        from crftk.evaluation.columns import score_chains
        pred = self.predict(X)
        gold = [_label_lists(y, f"Y[{c}]", X) for c, y in enumerate(Y)]
        return 100 * score_chains(gold, pred).joint_accuracy

    def _input_files(self):
        return [("template", _template_path(self.template))]

    @classmethod
    def load(cls, path, **kw):
        model = cls._load_model(path)
        est = cls(model.space.template.text, **kw)
        est._set_model(model)
        return est


_signature(FactorialCRF, 1)
