"""python-crfsuite's ``Tagger`` and ``ItemSequence`` over crftk's models of feature dicts."""

import contextlib
import math
import os
import sys

import numpy as np

from crftk.errors import CrftkError
from crftk.features.attributes import AttributeSpace, flatten
from crftk.io.atomic import AtomicWriter
from crftk.io.outputs import check_apart
from crftk.model import Model


class ItemSequence:
    """A sequence of items (tokens) flattened once, as python-crfsuite's ``ItemSequence``: a token is
    a dict of features or a list of attribute strings, flattened as python-crfsuite does
    (``{"w": "the"}`` is attribute ``w:the`` of value 1, ``{"len": 3}`` attribute ``len`` of value 3,
    a nested dict, list or set prefixes its key). The Trainer and the Tagger take it where they
    take a list of tokens."""

    def __init__(self, pyseq):
        if isinstance(pyseq, ItemSequence):
            self._items = [dict(x) for x in pyseq._items]
            return
        data = flatten([list(pyseq)], name="xseq")
        items = []
        values = data.values
        for t in range(len(data.tok_ptr) - 1):
            a, b = int(data.tok_ptr[t]), int(data.tok_ptr[t + 1])
            item = {}
            for k in range(a, b):
                item[data.names[k]] = item.get(data.names[k], 0.0) + (1.0 if values is None else float(values[k]))
            items.append(item)
        self._items = items

    def items(self):
        """The flattened items: a list of {attribute: value} dicts."""
        return [dict(x) for x in self._items]

    def __len__(self):
        return len(self._items)

    def __repr__(self):
        return f"<ItemSequence of size {len(self)}>"


class InvalidModelError(CrftkError, ValueError):
    """A model that cannot be opened (a ValueError, as python-crfsuite's Tagger raises)."""


@contextlib.contextmanager
def _invalid_model():
    try:
        yield
    except CrftkError as e:
        if isinstance(e, ValueError):
            raise
        raise InvalidModelError(e.message, e.path, e.line) from None


def tokens(xseq):
    """A sequence as crftk's dict path takes it (an ItemSequence as its flattened dicts)."""
    return xseq.items() if isinstance(xseq, ItemSequence) else xseq


class Tagger:
    """Tags item sequences with a model file of crftk (a model trained on feature dicts: by
    :class:`crftk.pycrfsuite.Trainer`, ``crftk.sklearn_crfsuite.CRF``, or ``crftk.CRF()`` without a
    template). ``set`` a sequence, then ``tag``, ``probability`` and ``marginal`` ask about it."""

    def __init__(self):
        self._crf = None
        self._xseq = None
        self._marginals = None
        self.threads = 1

    # models -------------------------------------------------------------------
    def open(self, name):
        """Open a model file; returns a context manager that closes the tagger. A file that is
        not a crftk model raises InvalidModelError, a ValueError as python-crfsuite's."""
        with _invalid_model():
            model = Model.load(os.fspath(name))
        return self._open(model)

    def open_inmemory(self, value):
        """Open a model from the bytes of a model file."""
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"open_inmemory takes the bytes of a model file, not {type(value).__name__}")
        with _invalid_model():
            model = Model.from_bytes(bytes(value), name="<in-memory model>")
        return self._open(model)

    def _open(self, model):
        from crftk.api import CRF
        if not isinstance(model.space, AttributeSpace):
            raise ValueError("this model reads CoNLL columns through a template, not feature dicts: "
                             "tag with crftk.CRF.load(path) or crftk tag")
        crf = CRF(threads=self.threads)
        crf._set_model(model)
        self._crf = crf
        self._xseq = self._marginals = None
        return contextlib.closing(self)

    def close(self):
        """Forget the model."""
        self._crf = None
        self._xseq = self._marginals = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    @property
    def model(self):
        """The crftk Model opened (crftk's own)."""
        return self._opened().model_

    def _opened(self):
        if self._crf is None:
            raise ValueError("the tagger has no model: open(path) or open_inmemory(bytes) first")
        return self._crf

    def labels(self):
        """The model's labels."""
        return list(self._opened().classes_)

    # tagging -----------------------------------------------------------------
    def set(self, xseq):
        """Make xseq the sequence that tag, probability and marginal ask about."""
        crf = self._opened()
        seq = tokens(xseq)
        if isinstance(seq, (str, bytes, dict)) or not hasattr(seq, "__iter__"):
            raise CrftkError(f"xseq must be a list of tokens (dicts of features or lists of attributes), "
                             f"not {type(seq).__name__}")
        seq = list(seq)
        flatten([seq], name="xseq")          # a bad token fails here, not at a later question
        self._xseq, self._marginals = seq, None
        return crf

    def tag(self, xseq=None):
        """The best labeling of xseq (by default, of the sequence set before)."""
        crf = self.set(xseq) if xseq is not None else self._opened()
        if not self._xseq:
            return []
        return list(crf.predict([self._xseq])[0])

    def _current(self):
        self._opened()
        if self._xseq is None:
            raise ValueError("no sequence to ask about: set(xseq) or tag(xseq) first")
        return self._xseq

    def probability(self, yseq):
        """P(yseq | the sequence set)."""
        xseq = self._current()
        yseq = list(yseq)
        if len(yseq) != len(xseq):
            raise ValueError(f"yseq has {len(yseq)} labels for a sequence of {len(xseq)} items")
        if not xseq:
            return 1.0
        for tagger, batch, _ in self._crf._batches([xseq], None):
            index = {label: i for i, label in enumerate(tagger.labels.tolist())}
            unknown = [y for y in yseq if y not in index]
            if unknown:
                raise ValueError(f"unknown label {unknown[0]!r}: the model's labels are {self.labels()}")
            inference = tagger.inference(batch)
            nll, _ = inference.loglik(tagger.weights, np.array([index[y] for y in yseq], dtype=np.int32))
            return math.exp(-float(nll))

    def marginal(self, y, pos):
        """The probability of label y at position pos of the sequence set."""
        xseq = self._current()
        if not 0 <= pos < len(xseq):
            raise ValueError(f"position {pos} is outside the sequence of {len(xseq)} items")
        if self._marginals is None:
            self._marginals = self._crf.predict_marginals([xseq])[0]
        if y not in self._marginals[pos]:
            raise ValueError(f"unknown label {y!r}: the model's labels are {self.labels()}")
        return self._marginals[pos][y]

    # the model's contents ---------------------------------------------------
    def info(self):
        """The model's labels, attributes and non-zero weights, as python-crfsuite's ``info()``
        (a :class:`ParsedDump`)."""
        return ParsedDump.of(self.model)

    def dump(self, filename=None):
        """Write the model's weights as text (``crftk dump``'s) to filename (written atomically,
        never over the model file), or print them."""
        model = self.model
        if filename is None:
            model.dump(sys.stdout)
            return
        check_apart([("dump", filename)], [("model", model.source)])
        with AtomicWriter(filename) as out:
            model.dump(out)


class ParsedDump:
    """A model's contents as python-crfsuite's ``Tagger.info()`` gives them: ``header`` (dict of
    strings: ``size`` in bytes, ``num_labels``, ``num_attrs``, ``num_features``), ``labels`` and
    ``attributes`` ({name: id string}), ``transitions`` ({(from, to): weight}) and
    ``state_features`` ({(attribute, label): weight}). As CRFsuite stores a model, only non-zero
    weights are listed and only attributes with one (numbered in the order of their features)."""

    def __init__(self):
        self.header = {}
        self.labels = {}
        self.attributes = {}
        self.transitions = {}
        self.state_features = {}

    @classmethod
    def of(cls, model):
        space, w = model.space, np.asarray(model.weights)
        layout = space.layout()
        labels = list(space.labels)
        dump = cls()
        dump.labels = {label: str(i) for i, label in enumerate(labels)}
        L = len(labels)
        trans = layout.transitions(w)
        for a in range(L):
            for b in range(L):
                if trans[a, b] != 0:
                    dump.transitions[(labels[a], labels[b])] = float(trans[a, b])
        state = w[layout.state]
        ptr, feat_label = space.feat_ptr, space.feat_label
        for a, name in enumerate(space.attributes):
            k0, k1 = int(ptr[a]), int(ptr[a + 1])
            nonzero = np.flatnonzero(state[k0:k1])
            if nonzero.size:
                dump.attributes.setdefault(name, str(len(dump.attributes)))
                for k in (k0 + nonzero).tolist():
                    dump.state_features[(name, labels[feat_label[k]])] = float(state[k])
        dump.header = {"magic": "crftk", "size": str(len(model.to_bytes())), "type": "crf1d",
                       "num_features": str(len(dump.state_features) + len(dump.transitions)),
                       "num_labels": str(L), "num_attrs": str(len(dump.attributes))}
        return dump
