"""A trained model: feature space, weights and training record; saved without pickle."""

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from crftk import params
from crftk.errors import CrftkError, shown
from crftk.features.attributes import SPACE_KIND, AttributeSpace
from crftk.features.space import FeatureSpace
from crftk.io.container import dumps, loads, read_container, read_header, write_container
from crftk.io.partial import check_marker
from crftk.structures import STRUCTURES, make_structure, structure_name
from crftk.structures.pairs import SEP

FORMAT = "crftk-model"


#: meta["kind"] of model files that name their structure and hold a list of parts
MODEL_KIND = "model"
#: meta["kind"] of the first files: one feature space and weight vector, the structure in info
LEGACY_KIND = "linear-chain"


class _FileKinds(Mapping):
    """Each kind of model file (Model.kind): its name, and the Python call that loads it, joined
    from every structure's ``file_kinds`` when first read (an error message's), so that loading
    or training one kind imports no other structure."""

    def _joined(self):
        if not hasattr(self, "_kinds"):
            self._kinds = {kind: said for s in STRUCTURES.values() for kind, said in s.file_kinds.items()}
        return self._kinds

    def __getitem__(self, kind):
        return self._joined()[kind]

    def __iter__(self):
        return iter(self._joined())

    def __len__(self):
        return len(self._joined())


KINDS = _FileKinds()
#: structures over one chain of labels (what crftk train trains from one label column): the
#: subclasses of LabelChain in STRUCTURES, named here so that none of the others is imported
#: (tests/structures/test_file_kinds.py checks the two agree)
CHAIN_STRUCTURES = ("chain", "pairs", "memm")
#: version of a part's layout (a feature space's arrays + a weight vector); a reader refuses newer ones
PART_VERSION = 1


@dataclass
class Part:
    """One (feature space, weights) pair of a model; ``name`` says its role in the structure."""

    space: FeatureSpace
    weights: np.ndarray
    name: str = "main"


class Model:
    """Feature space + weight vector + what training recorded (``info``).

    A model file names its structure (crftk.structures) and holds a list of
    parts; a model trained by ``crftk train`` has one. ``space`` and
    ``weights`` are those of the first part.
    """

    def __init__(self, space, weights, info=None, *, structure=None, more_parts=(), name="main"):
        self.info = dict(info or {})
        self.parts = [Part(space, _weights_for(space, weights), name)]
        for part in more_parts:
            self.parts.append(Part(part.space, _weights_for(part.space, part.weights), part.name))
        if len({p.name for p in self.parts}) != len(self.parts):
            raise CrftkError("the parts of a model need distinct names")
        if structure is None:
            structure = structure_name(self.order, self.model_type)
        self.structure_name = structure
        self._structure = None
        self.source = None          # the file (or name) it was loaded from, for error messages

    @property
    def space(self):
        return self.parts[0].space

    @property
    def weights(self):
        return self.parts[0].weights

    @property
    def labels(self):
        return self.space.labels

    @property
    def model_type(self):
        return self.info.get("model_type", "crf")

    @property
    def order(self):
        return int(self.info.get("order", 1))

    @property
    def kind(self):
        """What the file holds, which says how to load it: "crf" (one chain CRF of any order, or
        an MEMM), "bag", "pipeline" or "factorial" (KINDS); its structure says which."""
        return STRUCTURES[self.structure_name].file_kind(self.info)

    def describe(self):
        """The kind in words, with its size: "a feature bag (4 members)"."""
        return STRUCTURES[self.structure_name].describe(self.parts, self.info)

    def require_kind(self, kind, entry, hint=None, path=None):
        """Raise CrftkError unless the model is of ``kind``: ``entry`` (what is loading it) takes
        that kind; the message names the kind found and how to load or tag it, and the file
        (``path``, else the one the model was loaded from)."""
        if self.kind == kind:
            return
        found = self.kind
        hint = hint or f"load it with {KINDS[found][1]} (crftk tag tags with any kind)"
        raise CrftkError(f"{entry} takes {KINDS[kind][0]}; this file is {self.describe()}: {hint}",
                         self.source if path is None else path)

    @property
    def structure(self):
        """The kind of model (crftk.structures) over this feature space."""
        if self._structure is None:
            kind = STRUCTURES[self.structure_name]
            # a structure over several parts (factorial) builds itself from all of them
            self._structure = (kind.from_parts(self.parts) if hasattr(kind, "from_parts")
                               else make_structure(self.structure_name, self.space))
        return self._structure

    @property
    def output_labels(self):
        """What decoding outputs for each label id: the label, or for order 2 the current tag."""
        return self.structure.output_labels

    def _parts(self):
        meta = {"kind": MODEL_KIND, "structure": self.structure_name, "info": self.info, "parts": []}
        arrays = {}
        for i, part in enumerate(self.parts):
            space_meta, space_arrays = part.space.to_arrays()
            meta["parts"].append({"name": part.name, "version": PART_VERSION, "space": space_meta})
            for key, value in space_arrays.items():
                arrays[f"{i}:{key}"] = value
            arrays[f"{i}:weights"] = part.weights
        return meta, arrays

    def save(self, path):
        write_container(path, *self._parts())

    def to_bytes(self):
        """The model file's contents, as bytes."""
        return dumps(*self._parts())

    @classmethod
    def load(cls, path):
        return cls._from_parts(*read_container(path), path)

    @classmethod
    def from_bytes(cls, data, name="<bytes>"):
        """A model from what :meth:`to_bytes` returned, checked as a file is."""
        return cls._from_parts(*loads(data, name=name), name)

    @classmethod
    def _from_parts(cls, meta, arrays, path):
        info = meta.get("info", {})
        if not isinstance(info, dict):
            raise CrftkError("model file is inconsistent: its training record is not an object", path)
        _check_kind(info, path)
        kind = meta.get("kind")
        if kind == LEGACY_KIND:
            parts, structure = [("main", meta, arrays)], None
        elif kind == MODEL_KIND:
            parts, structure = _split_parts(meta, arrays, path)
        else:
            raise CrftkError(f"unsupported model kind {shown(kind)}", path)
        loaded = []
        for name, space_meta, space_arrays in parts:
            flat = [k for k, a in space_arrays.items() if a.ndim != 1]
            if flat:       # crftk writes every array of a part flat; code that reads them relies on it
                raise CrftkError(f"model file is inconsistent: its array {shown(flat[0])} is not one-dimensional",
                                 path)
            space_type = _space_type(structure, name, space_meta, len(parts), path)
            try:
                space = space_type.from_arrays(space_meta, space_arrays, path)
            except CrftkError as e:
                if len(parts) == 1:
                    raise
                raise CrftkError(f"{e.message} (part {shown(name)})", e.path, e.line) from None
            if "weights" not in space_arrays:
                raise CrftkError(f"model file has no weights for its part {shown(name)}", path)
            loaded.append(Part(space, space_arrays["weights"], name))
        try:
            model = cls(loaded[0].space, loaded[0].weights, info, structure=structure, more_parts=loaded[1:],
                        name=loaded[0].name)
        except CrftkError as e:
            raise CrftkError(e.message, path) from None
        for part in model.parts:
            if isinstance(part.space, (FeatureSpace, AttributeSpace)):   # other spaces check themselves on load
                _check_space(part.space, info, path)
            _check_weights(part.weights, path)
            if model.structure_name in CHAIN_STRUCTURES:
                check_chain_model(model.structure_name, info, part.space, path)
        STRUCTURES[model.structure_name].check_file(model.parts, info, path)
        model.source = path
        return model

    # summaries ------------------------------------------------------------
    def summary(self):
        """``crftk info``'s summary: what the structure shows of its parts' sizes, and the record."""
        return STRUCTURES[self.structure_name].summary(self)

    def dump(self, out, *, min_abs=0.0):
        """Write the weights as text (the structure's layout): for a CRF, transitions, then one
        line per state feature."""
        STRUCTURES[self.structure_name].dump(self, out, min_abs)


# load validation ------------------------------------------------------------
# The container's checksums catch damage; these checks catch files whose checksums are right
# but whose contents no crftk wrote (another program's, an edited one). The kernels index
# with these arrays unchecked, so each index is bounded here, once, before any is used.

def _weights_for(space, weights):
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    if weights.shape != (space.n_params,):
        raise CrftkError(f"weights have {weights.size} entries, the feature space needs {space.n_params}")
    return weights


def _space_type(structure, name, space_meta, n_parts, path):
    """The feature-space class of a part: the structure's, or, for a chain over attributes
    (no template: crftk.features.attributes), AttributeSpace. Such a chain is a file of one
    part: bags, pipelines and factorial CRFs read CoNLL columns through templates."""
    space_type = getattr(STRUCTURES.get(structure), "part_space", lambda name: FeatureSpace)(name)
    if space_meta.get("space") is None:
        return space_type
    if (space_meta["space"] != SPACE_KIND or space_type is not FeatureSpace or n_parts != 1
            or structure not in CHAIN_STRUCTURES):
        raise CrftkError(f"model file is inconsistent: part {shown(name)} has a feature space of kind "
                         f"{shown(space_meta['space'])}", path)
    return AttributeSpace


def _split_parts(meta, arrays, path):
    """[(name, space meta, space arrays)] and the structure name of a model file of MODEL_KIND."""

    def bad(what):
        return CrftkError(f"model file is inconsistent: {what}", path)

    structure = meta.get("structure")
    if not isinstance(structure, str) or structure not in STRUCTURES:
        raise CrftkError(f"model file has an unknown structure {shown(structure)} (this crftk knows "
                         f"{', '.join(sorted(STRUCTURES))}; a newer crftk may have written it)", path)
    entries = meta.get("parts")
    if not isinstance(entries, list) or not entries:
        raise bad("it lists no parts")
    parts, owned = [], set()
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("space"), dict) \
                or not isinstance(entry.get("name"), str):
            raise bad(f"part {i} is malformed")
        version = entry.get("version")
        if type(version) is not int or version < 1:
            raise bad(f"part {i} has no valid version")
        if version > PART_VERSION:
            raise CrftkError(f"model part {shown(entry['name'])} has version {version}; this crftk reads "
                             f"up to {PART_VERSION} (upgrade crftk)", path)
        prefix = f"{i}:"
        own = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
        owned.update(prefix + k for k in own)
        parts.append((entry["name"], entry["space"], own))
    stray = sorted(set(arrays) - owned)
    if stray:
        raise bad(f"array {shown(stray[0])} belongs to no part")
    return parts, structure


def _check_kind(info, path):
    model_type, order = info.get("model_type", "crf"), info.get("order", 1)
    if model_type not in ("crf", "memm", "semimarkov"):
        raise CrftkError(f"model file is inconsistent: unknown model type {shown(model_type)}", path)
    if type(order) is not int or order not in (1, 2):
        raise CrftkError(f"model file is inconsistent: order {order!r:.40} is not 1 or 2", path)
    _check_partial_record(info, path)


#: the options of partial labels a record stores (params.recorded): read back by CRF.load, a
#: first stage's out-of-fold retraining and --init, so a forged value is refused at load
_PARTIAL_OPTIONS = ("unknown_label", "entity_ratio", "entity_ratio_margin", "entity_ratio_weight", "outside_label")


def _check_partial_record(info, path):
    options = info.get("options")
    for name in _PARTIAL_OPTIONS if isinstance(options, dict) else ():
        if name in options:
            try:
                value = params.check(name, options[name])
                if name == "unknown_label":
                    check_marker(value)
            except CrftkError as e:
                raise CrftkError(f"model file is inconsistent: its training record's {name} is wrong: {e.message}",
                                 path) from None
    n = info.get("partial_tokens", 0)
    if type(n) is not int or n < 0:
        raise CrftkError(f"model file is inconsistent: its record's partial_tokens {n!r:.40} is not a count of "
                         "tokens", path)


def chain_record(structure):
    """The training record's order and model type of a chain structure (CHAIN_STRUCTURES)."""
    return dict(STRUCTURES[structure].record)


def check_chain_model(structure, info, space, path, where=""):
    """Refuse a chain structure (CHAIN_STRUCTURES) other than the one its training record (order,
    model type) names, or one its feature space cannot have; ``where``: which stage, in a pipeline."""
    def bad(what):
        return CrftkError(f"model file is inconsistent: {where}{what}", path)

    expected = structure_name(info.get("order", 1), info.get("model_type", "crf"))
    if structure != expected:
        raise bad(f"its structure is {shown(structure)}, but its training record is that of "
                  f"{STRUCTURES[expected].record_noun}")
    STRUCTURES[structure].check_space(space, bad)
    _check_schemes(info, space.labels, bad)


def _check_schemes(info, labels, bad):
    """A record's --train-scheme and corpus scheme are schemes crftk converts between, and its
    labels are tags of the training scheme: a forged record would otherwise tag in a wrong scheme."""
    from crftk.io.schemes import PREFIXES, SCHEMES, TRAINING_SCHEMES, split
    train, corpus = info.get("train_scheme", "none"), info.get("corpus_scheme")
    if train == "none" and corpus is None:
        return
    if train not in TRAINING_SCHEMES or corpus not in SCHEMES:
        raise bad(f"its record names training scheme {shown(train)} and corpus scheme {shown(corpus)}, "
                  f"not one of {', '.join(TRAINING_SCHEMES)} and one of {', '.join(SCHEMES)}")
    for label in labels:
        for tag in label.split(SEP):
            prefix, kind = split(tag)
            if tag != "O" and not (prefix in PREFIXES[train] and len(prefix) == 1 and kind):
                raise bad(f"label {shown(label)} is not a tag of its training scheme {train}")


def _check_weights(weights, path):
    bad = np.flatnonzero(~np.isfinite(weights))
    if bad.size:
        raise CrftkError(f"model file has NaN or infinite weights ({bad.size:,} of them, the first is "
                         f"parameter {int(bad[0]):,}); retrain the model", path)


def _check_space(space, info, path):
    def bad(what):
        return CrftkError(f"model file is inconsistent: {what}", path)

    labels = space.labels
    L = len(labels)
    if L == 0:
        raise bad("it has no labels")
    if len(space.label_index) != L:
        raise bad("a label appears twice")
    if not all(x and not any(c.isspace() for c in x) for x in labels):
        raise bad("a label is empty or holds white space (it could not be a column of a CoNLL file)")
    if info.get("order", 1) == 2 and not all(SEP in x for x in labels):
        raise bad("an order-2 model's labels must be tag pairs")
    ptr, fl = space.feat_ptr, space.feat_label
    A, F = space.n_attrs, fl.size
    if ptr.ndim != 1 or ptr.size != A + 1 or ptr[0] != 0 or ptr[-1] != F or np.any(np.diff(ptr) < 0):
        raise bad(f"the feature table does not run over its {A:,} attributes and {F:,} features")
    if F and (fl.min() < 0 or fl.max() >= L):
        raise bad(f"a feature names a label outside the {L} labels")
    # features are sorted by (attribute, label), each pair once: code that searches them relies on it
    attr_of = np.repeat(np.arange(A, dtype=np.int64), np.diff(ptr))
    if F > 1 and np.any(np.diff(attr_of * L + fl) <= 0):
        raise bad("the features of an attribute are not in label order or repeat a label")
    for kind, lines in (("state", space.unigram_lines), ("transition", space.bigram_lines)):
        for i, cl in enumerate(lines):
            _check_line(cl, [space.radix(m) for m in cl.line.macros],
                        lambda what: bad(f"{kind} template line {i + 1}: {what}"))


def _check_line(cl, radices, bad):
    """Each level's packed keys: sorted, distinct, below (entries of the level below) x radix."""
    levels = list(cl.steps) + [cl.keys]
    below = radices[0] if radices else 1
    for depth, keys in enumerate(levels):
        bound = below * (radices[depth + 1] if len(radices) > 1 else 1)
        keys = np.asarray(keys)
        if keys.ndim != 1:
            raise bad("a key table is not one-dimensional")
        # compared, not subtracted: np.diff of a forged key near -2**63 wraps around
        if keys.size and (keys.min() < 0 or keys.max() >= bound or np.any(keys[1:] <= keys[:-1])):
            raise bad("its keys are not distinct, sorted and within its dictionaries")
        below = keys.size


def format_summary(summary):
    """``crftk info``'s text: one ``key value`` line per entry, nested entries as dotted keys,
    lists as space-separated words, no Python reprs."""
    lines = []

    def text(value):
        if value is None:
            return "-"
        if isinstance(value, bool):
            return "yes" if value else "no"
        if isinstance(value, float):
            return f"{value:.6g}"
        if isinstance(value, (list, tuple)):
            return " ".join(text(v) for v in value) if value else "-"
        return str(value)

    def walk(prefix, d):
        for key, value in d.items():
            name = f"{prefix}{key}"
            if isinstance(value, dict):
                walk(name + ".", value)
            else:
                lines.append((name, text(value)))

    summary = dict(summary)
    training = dict(summary.pop("training", None) or {})
    training.pop("history", None)      # per-iteration records: --json has them
    walk("", summary)
    walk("training.", training)
    width = max(len(name) for name, _ in lines)
    return "\n".join(f"{name:{width}s}  {value}" for name, value in lines)


def model_header(path):
    """The model file's header (meta) without reading the weights."""
    return read_header(path)
