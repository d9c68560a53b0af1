"""Attribute features: python-crfsuite's feature dicts and CRFsuite's data, without a template.

A token is a dict (or a list of attribute strings) flattened as python-crfsuite flattens it:
``{k: "v"}`` is attribute ``k:v`` of value 1; ``{k: 1.5}``, ``{k: True}`` (1.0), ``{k: False}``
(0.0) attribute ``k`` of that value; a dict, list or set value prefixes ``k:`` to each attribute
it flattens to (a list or set holds attribute strings of value 1); ``["a", "b"]`` is two
attributes of value 1. Bytes are taken as UTF-8. Occurrences are kept as given: an attribute
twice in a token counts twice, one of value 0 is an occurrence that adds nothing.

:class:`AttributeSpace` is the feature space of such data: the labels, the attribute strings
and the state features (attribute, label), laid out as :class:`crftk.features.space.FeatureSpace`
lays them out, so the chain structures and kernels take it unchanged. It has no transition
attributes; its transitions are the label bigram.
"""

import math
from itertools import repeat
from numbers import Real

import numpy as np

from crftk import _encode
from crftk.errors import CrftkError, shown
from crftk.features.space import FEATURE_SETS, ChainSpace, EncodedCorpus
from crftk.features.templates import parse_template
from crftk.io.container import pack_strings, unpack_strings
from crftk.io.crfsuite import AttributeSequences

#: Deepest nesting of dicts, lists and sets inside a token's dict ({"a": {"b": {"c": 1}}} is 2).
MAX_DEPTH = 8

#: What a model file's feature space of attributes records (its "space" field).
SPACE_KIND = "attributes"

#: The template an attribute space stands for: the label bigram alone (transitions between
#: labels, no observation-conditioned ones).
_TEMPLATE = "B\n"


class _Bad(Exception):
    """A token that cannot be flattened: the message, placed by the caller."""


def _number(value, k):
    """A value's float (bool, int, float, numpy numbers), or None when it is not a number."""
    if isinstance(value, (Real, np.bool_)) and not isinstance(value, np.datetime64):
        return _float(k, value)
    return None


def _float(k, v):
    """An int's float; past float64's range (10**400) an error, not an OverflowError."""
    try:
        return float(v)
    except OverflowError:
        raise _Bad(f"feature {shown(k)} has the value {shown(v)}, beyond float64's range") from None


def _text(x, what):
    if isinstance(x, bytes):
        try:
            return x.decode("utf-8")
        except UnicodeDecodeError:
            raise _Bad(f"{what} {shown(x)} is not UTF-8") from None
    if x is None:
        raise _Bad(f"{what} is None")
    raise _Bad(f"{what} {shown(x)} is {_a(x)}, not a str")


def _a(value):
    kind = type(value).__name__
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind}"


def _nested(prefix, value, names, values, depth):
    """The attributes of a dict, list or set value under ``prefix:``."""
    if depth > MAX_DEPTH:
        raise _Bad(f"feature {shown(prefix)} nests dicts, lists or sets deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        _flatten_dict(value, names, values, prefix + ":", depth)
        return
    for a in value:
        if type(a) is not str:
            a = _text(a, f"an entry of the list or set of feature {shown(prefix)}")
        names.append(prefix + ":" + a)
        values.append(1.0)


def _flatten_dict(token, names, values, prefix, depth):
    for k, v in token.items():
        if type(k) is not str:
            k = _text(k, "a feature name")
        if prefix:
            k = prefix + k
        tv = type(v)
        if tv is str:
            names.append(k + ":" + v)
            values.append(1.0)
        elif tv is float or tv is int or tv is bool:
            if tv is float and not math.isfinite(v):
                raise _Bad(f"feature {shown(k)} has the value {v}; values are finite numbers")
            names.append(k)
            values.append(_float(k, v))
        elif isinstance(v, (dict, list, set, frozenset, tuple)):
            _nested(k, v, names, values, depth + 1)
        elif isinstance(v, bytes):
            names.append(k + ":" + _text(v, f"the value of feature {shown(k)}"))
            values.append(1.0)
        else:
            x = _number(v, k)
            if x is None:
                what = "None" if v is None else f"{_a(v)} ({shown(v)})"
                raise _Bad(f"feature {shown(k)} has the value {what}: a value is a str, a number, a bool, "
                           "or a dict, list or set of them")
            if not math.isfinite(x):
                raise _Bad(f"feature {shown(k)} has the value {x}; values are finite numbers")
            names.append(k)
            values.append(x)


def _flatten_token(token, names, values):
    if type(token) is dict and _encode.flatten_plain(token, names, values):
        return
    if isinstance(token, dict):
        _flatten_dict(token, names, values, "", 0)
    elif isinstance(token, (list, tuple)):
        for a in token:
            if type(a) is not str:
                a = _text(a, "an attribute of a token given as a list")
            names.append(a)
            values.append(1.0)
    else:
        what = "None" if token is None else _a(token)
        raise _Bad(f"the token is {what}: a token is a dict of features or a list of attribute strings")


def flatten(X, y=None, *, name="X", y_name="y"):
    """X (a list of sequences of tokens, as python-crfsuite takes them) and optionally y (one
    label sequence per sequence of X) as :class:`AttributeSequences`; empty sequences are left
    out (``index`` gives each kept one's number in X). CrftkError, naming the sequence and
    token, on a token that cannot be flattened or labels that do not match."""
    if isinstance(X, (str, bytes, dict)) or not hasattr(X, "__iter__"):
        raise CrftkError(f"{name} must be a list with one sequence of tokens per sentence, not {_a(X)}")
    names, values, tok_ptr, sent_ptr, index, labels = [], [], [0], [0], [], None
    if y is not None:
        if isinstance(y, (str, bytes, dict)) or not hasattr(y, "__len__"):
            raise CrftkError(f"{y_name} must be a list with one label sequence per sentence, not {_a(y)}")
        X = list(X)
        if len(X) != len(y):
            raise CrftkError(f"{name} has {len(X)} sentences but {y_name} has {len(y)} label sequences")
        labels = []
    for i, seq in enumerate(X):
        if isinstance(seq, (str, bytes, dict)) or not hasattr(seq, "__iter__"):
            raise CrftkError(f"{name}[{i}] is {_a(seq)}: a sentence is a list of tokens (dicts of features)")
        n = 0
        for t, token in enumerate(seq):
            try:
                _flatten_token(token, names, values)
            except _Bad as e:
                raise CrftkError(f"{name}[{i}][{t}]: {e}") from None
            except RecursionError:
                raise CrftkError(f"{name}[{i}][{t}]: a feature nests itself") from None
            tok_ptr.append(len(names))
            n += 1
        if y is not None:
            seq_labels = y[i]
            if isinstance(seq_labels, (str, bytes)) or not hasattr(seq_labels, "__len__"):
                raise CrftkError(f"{y_name}[{i}] is {_a(seq_labels)}: {y_name} holds one sequence of labels "
                                 "(strings) per sentence")
            if len(seq_labels) != n:
                raise CrftkError(f"{name}[{i}] has {n} tokens but {y_name}[{i}] has {len(seq_labels)} labels")
            labels.extend(seq_labels)
        if n:
            sent_ptr.append(sent_ptr[-1] + n)
            index.append(i)
    if labels is not None:
        _check_labels(y, labels, y_name)
        if not all(type(label) is str for label in set(labels)):
            labels = [str(label) for label in labels]       # plain strings in model files and outputs
    vals = np.array(values, dtype=np.float64)
    return AttributeSequences(np.array(sent_ptr, dtype=np.int64), np.array(tok_ptr, dtype=np.int64), names,
                              None if np.all(vals == 1.0) else vals, labels, name=name,
                              index=np.array(index, dtype=np.int64))


def _bad_label(label):
    """What is wrong with a label, or None: a label is a non-empty str without white space."""
    if not isinstance(label, str):          # numpy's str_ is one (labels read from arrays)
        return "is None" if label is None else f"is {_a(label)}, not a str"
    if not label:
        return "is an empty label"
    if any(c.isspace() for c in label):
        return f"({shown(label)}) holds white space"
    return None


def _check_labels(y, labels, y_name):
    """Each distinct label checked once (a corpus has few); the first bad one located in y."""
    try:
        distinct = set(labels)
    except TypeError:                       # an unhashable label: check them one by one
        distinct = labels
    if all(_bad_label(label) is None for label in distinct):
        return
    for i, seq_labels in enumerate(y):
        for t, label in enumerate(seq_labels):
            what = _bad_label(label)
            if what is not None:
                raise CrftkError(f"{y_name}[{i}][{t}] {what}: a label is a non-empty string without white space")


def attribute_template():
    """The template an attribute space stands for (what training asks of a template)."""
    return parse_template(_TEMPLATE, "<attributes>")


class AttributeSpace(ChainSpace):
    """Labels, attribute strings and state features of attribute data (no template)."""

    # what the template spaces have and this one has not: columns, lines of macros, vocabularies
    n_columns = None
    label_col = None
    unigram_lines = ()
    bigram_lines = ()
    vocabs = {}
    n_edge_attrs = 0

    def __init__(self, labels, attributes, feat_ptr, feat_label, feature_set="supported"):
        self.template = attribute_template()
        self.labels = list(labels)
        self.label_index = {s: i for i, s in enumerate(self.labels)}
        self.attributes = list(attributes)
        self.feat_ptr = np.ascontiguousarray(feat_ptr, dtype=np.int32)
        self.feat_label = np.ascontiguousarray(feat_label, dtype=np.int32)
        self.feature_set = feature_set
        self._index = None

    @property
    def n_attrs(self):
        return len(self.attributes)

    @property
    def attribute_index(self):
        """{attribute string: id}."""
        if self._index is None:
            self._index = {a: i for i, a in enumerate(self.attributes)}
        return self._index

    def attribute_strings(self, edge=False):
        return [] if edge else list(self.attributes)

    def raw_readable(self):
        return False

    # building ------------------------------------------------------------
    @classmethod
    def fit(cls, data, *, min_freq=0.0, feature_set="supported", count="values"):
        """The space of training data (AttributeSequences with labels); returns (space, corpus).

        A state feature (attribute, label) is kept when its frequency is at least ``min_freq``:
        with ``count="values"`` CRFsuite's, the sum of the values of its occurrences (a feature
        whose values sum below it is dropped, negative ones included); with "occurrences" the
        number of its occurrences, as templates count;
        attributes left with no feature are dropped. "complete" gives each attribute that keeps
        a feature every label; counting values, as CRFsuite's all_possible_states, the unseen
        pairs count 0 and the threshold applies to every pair (a positive one leaves the seen
        pairs only, "supported"; a seen pair whose values sum below it is dropped).
        """
        if feature_set not in FEATURE_SETS:
            raise CrftkError(f"unknown feature set {feature_set!r}: choose supported or complete")
        if not isinstance(min_freq, Real) or not math.isfinite(min_freq):
            raise CrftkError(f"min_freq must be a finite number, not {min_freq!r}")
        if data.labels is None:
            raise CrftkError("the training data has no labels", data.source)
        if data.n_tokens == 0:
            raise CrftkError("no training sentences", data.source)
        labels = sorted(set(data.labels))
        label_index = {s: i for i, s in enumerate(labels)}
        L = len(labels)
        gold = np.fromiter(map(label_index.__getitem__, data.labels), dtype=np.int64, count=data.n_tokens)
        seen = dict.fromkeys(data.names)            # in order of first occurrence
        names = list(seen)
        seen.update(zip(names, range(len(names))))
        first = np.fromiter(map(seen.__getitem__, data.names), dtype=np.int64, count=len(data.names))
        del seen
        counts = np.diff(data.tok_ptr)
        key = first * L + np.repeat(gold, counts)
        uniq, inverse, _ = _encode.unique_inverse(key)
        if count not in ("values", "occurrences"):
            raise CrftkError(f"unknown feature count {count!r}: choose occurrences or values")
        freq = np.bincount(inverse, weights=data.values if count == "values" else None, minlength=uniq.size)
        kept = uniq[freq >= min_freq]
        complete = feature_set == "complete"
        if complete and count == "values":
            # CRFsuite's possible states are features of frequency 0, of every attribute seen: a
            # positive threshold drops them, and a seen pair whose values sum below it goes too
            complete = False
            if min_freq <= 0:
                kept = np.setdiff1d(np.arange(len(names) * L, dtype=np.int64), uniq[freq < min_freq])
        has_feature = np.zeros(len(names), dtype=bool)
        has_feature[kept // L] = True
        old_ids = np.flatnonzero(has_feature)
        order = np.argsort(np.array([names[a] for a in old_ids.tolist()], dtype=object), kind="stable")
        old_ids = old_ids[order]
        new_id = np.full(len(names), -1, dtype=np.int64)
        new_id[old_ids] = np.arange(old_ids.size)
        A = int(old_ids.size)
        if A * L >= 2**31:
            raise CrftkError(f"{A} attributes x {L} labels: too many for this version; raise min_freq")
        if complete:
            feat_ptr = (np.arange(A + 1, dtype=np.int64) * L).astype(np.int32)
            feat_label = np.tile(np.arange(L, dtype=np.int32), A)
        else:
            pairs = np.sort(new_id[kept // L] * L + kept % L)
            feat_label = (pairs % L).astype(np.int32)
            feat_ptr = np.zeros(A + 1, dtype=np.int32)
            np.cumsum(np.bincount(pairs // L, minlength=A), out=feat_ptr[1:])
        space = cls(labels, [names[a] for a in old_ids.tolist()], feat_ptr, feat_label, feature_set)
        if space.n_params >= 2**31:
            raise CrftkError(f"{space.n_params} parameters: too many for this version; raise min_freq")
        corpus = space._corpus(data, new_id[first], gold.astype(np.int32))
        return space, corpus

    def _corpus(self, data, ids, gold):
        """The EncodedCorpus of data whose occurrences have attribute ids ``ids`` (-1: unknown,
        left out). Occurrences of value 0 are left out too: they add nothing to a potential or a
        gradient, and dropping them lets data whose other values are all 1 (python-crfsuite's
        ``False`` booleans) take the binary kernels, 2.5x faster than the valued ones."""
        keep = ids >= 0
        if data.values is not None:
            keep &= data.values != 0.0
        n = data.n_tokens
        owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(data.tok_ptr))[keep]
        attr_ptr = np.zeros(n + 1, dtype=np.int32)
        np.cumsum(np.bincount(owner, minlength=n), out=attr_ptr[1:])
        values = None
        if data.values is not None:
            values = np.ascontiguousarray(data.values[keep], dtype=np.float64)
            if np.all(values == 1.0):
                values = None
        if attr_ptr[-1] >= 2**31:
            raise CrftkError("too many attribute occurrences for this version", data.source)
        return EncodedCorpus(data.sent_ptr.astype(np.int32), attr_ptr, ids[keep].astype(np.int32),
                             np.zeros(n + 1, np.int32), np.zeros(0, np.int32), gold, values)

    def encode(self, data):
        """Encode AttributeSequences with the frozen dictionaries; attributes unseen in training
        are left out; gold labels kept when present (-1: a label the space lacks)."""
        index = self.attribute_index
        ids = np.fromiter(map(index.get, data.names, repeat(-1)), dtype=np.int64, count=len(data.names))
        gold = None
        if data.labels is not None:
            gold = np.fromiter(map(self.label_index.get, data.labels, repeat(-1)), dtype=np.int32,
                               count=data.n_tokens)
        return self._corpus(data, ids, gold)

    # serialization -------------------------------------------------------
    def to_arrays(self):
        """(meta, arrays) for the model file."""
        arrays = {"feat_ptr": self.feat_ptr, "feat_label": self.feat_label}
        arrays["labels.offsets"], arrays["labels.blob"] = pack_strings(self.labels)
        arrays["attributes.offsets"], arrays["attributes.blob"] = pack_strings(self.attributes)
        return {"space": SPACE_KIND, "feature_set": self.feature_set}, arrays

    @classmethod
    def from_arrays(cls, meta, arrays, path=None):
        if meta.get("space") != SPACE_KIND or meta.get("feature_set") not in FEATURE_SETS:
            raise CrftkError("model file is inconsistent: its attribute space has no valid feature set", path)
        try:
            labels = unpack_strings(arrays["labels.offsets"], arrays["labels.blob"], path=path)
            attributes = unpack_strings(arrays["attributes.offsets"], arrays["attributes.blob"], path=path)
            space = cls(labels, attributes, arrays["feat_ptr"], arrays["feat_label"], meta["feature_set"])
        except (KeyError, ValueError, TypeError) as e:
            raise CrftkError(f"model file is incomplete or inconsistent ({e})", path) from None
        if len(space.attribute_index) != space.n_attrs:
            raise CrftkError("model file is inconsistent: an attribute appears twice", path)
        return space
