import io
import os
import subprocess
import sys

import numpy as np
import pytest

from corpora import REPO, random_corpus
from crftk.io.container import dumps, pack_strings
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.model import Model, model_header
from crftk.structures.chain import chain_lattices
from crftk.features.templates import parse_template

TEMPLATE = "U00:%x[0,0]\nU01:%x[-1,0]/%x[0,1]\nU02:%x[-1,1]/%x[0,1]/%x[1,0]\nB\nB01:%x[0,1]\n"


def make_model(seed=0):
    space, _ = FeatureSpace.fit(random_corpus(30, seed=seed), parse_template(TEMPLATE))
    w = np.random.default_rng(seed).normal(size=space.n_params)
    return Model(space, w, {"note": "test", "iterations": 3})


def test_save_load_round_trip(tmp_path):
    m = make_model()
    path = tmp_path / "m.crftk"
    m.save(path)
    back = Model.load(path)
    assert np.array_equal(back.weights, m.weights)
    assert back.labels == m.labels
    assert back.info == {"note": "test", "iterations": 3}
    test = random_corpus(10, seed=3, vocab=20)
    a, b = m.space.encode(test), back.space.encode(test)
    assert np.array_equal(a.attrs, b.attrs) and np.array_equal(a.eattrs, b.eattrs)
    la, lb = chain_lattices(m.space, a), chain_lattices(back.space, b)
    assert np.array_equal(la.viterbi(m.weights)[0], lb.viterbi(back.weights)[0])
    header = model_header(path)["meta"]
    assert header["kind"] == "model" and header["structure"] == "chain"
    assert [(p["name"], p["version"]) for p in header["parts"]] == [("main", 1)]


def test_bytes_round_trip_equals_the_file(tmp_path):
    m = make_model()
    path = tmp_path / "m.crftk"
    m.save(path)
    data = m.to_bytes()
    assert data == path.read_bytes()
    back = Model.from_bytes(data)
    assert np.array_equal(back.weights, m.weights) and back.labels == m.labels
    with pytest.raises(CrftkError, match="<bytes>: truncated"):
        Model.from_bytes(data[:-3])
    flipped = bytearray(data)
    flipped[-5] ^= 1
    with pytest.raises(CrftkError, match="corrupted"):
        Model.from_bytes(bytes(flipped))


def test_file_is_not_a_pickle(tmp_path):
    path = tmp_path / "m.crftk"
    make_model().save(path)
    head = path.read_bytes()[:8]
    assert head.startswith(b"CRFTK") and not head.startswith(b"\x80")


@pytest.mark.parametrize("cut", [5, 30, 0.5, -3])
def test_truncated_model_is_a_clear_error(tmp_path, cut):
    path = tmp_path / "m.crftk"
    make_model().save(path)
    data = path.read_bytes()
    n = int(len(data) * cut) if isinstance(cut, float) else (cut if cut > 0 else len(data) + cut)
    path.write_bytes(data[:n])
    with pytest.raises(CrftkError) as e:
        Model.load(path)
    assert str(path) in str(e.value) and "truncated" in str(e.value)


def test_corrupted_and_foreign_models(tmp_path):
    path = tmp_path / "m.crftk"
    make_model().save(path)
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CrftkError, match="checksum"):
        Model.load(path)
    path.write_text("U00:%x[0,0]\n")
    with pytest.raises(CrftkError, match="not a crftk model"):
        Model.load(path)
    with pytest.raises(CrftkError, match="not found"):
        Model.load(tmp_path / "missing")


def test_weights_must_fit_the_space():
    m = make_model()
    with pytest.raises(CrftkError, match="needs"):
        Model(m.space, m.weights[:-1])


def test_summary_counts():
    m = make_model()
    s = m.summary()
    assert s["n_labels"] == len(m.labels) == 3
    assert s["parameters"] == m.weights.size
    assert s["nonzero_parameters"] == int(np.count_nonzero(m.weights))
    assert s["templates"] == {"state": 3, "transition": 1, "label_bigram": True}


def test_dump_lists_every_weight_with_crfpp_strings():
    m = make_model()
    out = io.StringIO()
    m.dump(out)
    text = out.getvalue()
    state = text.split("[state] attribute\tlabel\tweight\n")[1].split("\n\n")[0].splitlines()
    assert len(state) == m.space.n_features
    name, label, weight = state[0].split("\t")
    f0 = 0
    assert name == m.space.attribute_strings()[0] and label == m.labels[m.space.feat_label[f0]]
    assert float(weight) == pytest.approx(m.weights[f0], abs=1e-6)
    assert any(line.startswith("U00:w") for line in state)
    edge = text.split("[edge] attribute\tprevious\tcurrent\tweight\n")[1].splitlines()
    assert len(edge) == m.space.n_edge_attrs * 9
    out = io.StringIO()
    m.dump(out, min_abs=1.0)
    kept = out.getvalue().split("[state] attribute\tlabel\tweight\n")[1].split("\n\n")[0].splitlines()
    assert len(kept) == int((np.abs(m.weights[:m.space.n_features]) > 1.0).sum())


# ---------------------------------------------------------------------------
# load validation: files whose checksums are right but whose contents crftk never wrote
# ---------------------------------------------------------------------------



def crafted(edit, seed=0):
    """A model file (bytes, valid checksums) whose meta and arrays ``edit(meta, arrays)`` changed."""
    meta, arrays = make_model(seed)._parts()
    # the edit sees the one part's space and arrays (stored as "0:name"), and the training record
    view = dict(meta["parts"][0]["space"], info=meta["info"])
    own = {k.split(":", 1)[1]: np.array(v) for k, v in arrays.items()}
    edit(view, own)
    meta["info"] = view.pop("info")
    meta["parts"][0]["space"] = view
    return dumps(meta, {f"0:{k}": v for k, v in own.items()})


def crafted_file(edit_file, seed=0):
    """A model file whose whole meta and arrays ``edit_file(meta, arrays)`` changed."""
    meta, arrays = make_model(seed)._parts()
    edit_file(meta, arrays)
    return dumps(meta, arrays)


@pytest.mark.parametrize("edit, fragment", [
    (lambda meta, arrays: meta.update(structure="factorial-9"), "unknown structure 'factorial-9'"),
    (lambda meta, arrays: meta["parts"][0].update(version=2), "has version 2; this crftk reads up to 1"),
    (lambda meta, arrays: meta.update(parts=[]), "it lists no parts"),
    (lambda meta, arrays: arrays.update({"7:weights": np.zeros(3)}), "array '7:weights' belongs to no part"),
    (lambda meta, arrays: meta.update(kind="bag-of-words"), "unsupported model kind 'bag-of-words'"),
])
def test_the_structure_and_parts_of_a_file_are_checked(edit, fragment):
    assert fragment in load_error(crafted_file(edit))


def test_a_model_with_several_parts_round_trips():
    from crftk.model import Part
    a, b = make_model(0), make_model(1)
    # a chain file holds several parts only as a bag (one per member), which its record says
    two = Model(a.space, a.weights, {**a.info, "bag": {"members": ["main", "second"]}},
                more_parts=[Part(b.space, b.weights * 2, "second")])
    back = Model.from_bytes(two.to_bytes())
    assert [p.name for p in back.parts] == ["main", "second"]
    assert back.structure_name == "chain" and back.kind == "bag"
    assert np.array_equal(back.parts[1].weights, b.weights * 2)
    assert back.parts[1].space.labels == b.space.labels
    with pytest.raises(CrftkError, match="distinct names"):
        Model(a.space, a.weights, more_parts=[Part(b.space, b.weights)])


def load_error(data):
    with pytest.raises(CrftkError) as e:
        Model.from_bytes(data, name="edited.model")
    assert e.value.path == "edited.model" and "\n" not in str(e.value)
    return e.value.message


def test_crafting_helper_keeps_a_loadable_model():
    back = Model.from_bytes(crafted(lambda meta, arrays: None))
    assert np.array_equal(back.weights, make_model().weights)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nan_or_infinite_weights_are_rejected_at_load(value):
    def edit(meta, arrays):
        arrays["weights"][[5, 9]] = value
    assert load_error(crafted(edit)) == (
        "model file has NaN or infinite weights (2 of them, the first is parameter 5); retrain the model")


def test_nan_weights_are_one_line_from_the_cli(tmp_path):
    """Before, such a model tagged with '# prob nan' and exit status 0."""
    def edit(meta, arrays):
        arrays["weights"][0] = np.nan
    (tmp_path / "m.model").write_bytes(crafted(edit))
    (tmp_path / "in.txt").write_text("w1 A\nw2 B\n")
    for args in (["tag", "-v", "-m", "m.model", "in.txt"], ["info", "m.model"]):
        p = run_cli(args, tmp_path)
        assert p.returncode == 1 and p.stdout == ""
        assert p.stderr.splitlines() == [
            "crftk: error: m.model: model file has NaN or infinite weights (1 of them, the first is "
            "parameter 0); retrain the model"]


def run_cli(args, cwd, limit_memory=False):
    def cap():      # a runaway allocation fails instead of swapping the shared machine
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    return subprocess.run([sys.executable, "-m", "crftk.cli", *args], cwd=cwd, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          preexec_fn=cap if limit_memory else None, timeout=300)


def _edit_feat_label(meta, arrays):
    arrays["feat_label"][3] = 3                 # 3 labels: ids 0..2


def _edit_feat_label_negative(meta, arrays):
    arrays["feat_label"][0] = -1


def _edit_feat_ptr_end(meta, arrays):
    arrays["feat_ptr"][-1] -= 1


def _edit_feat_ptr_order(meta, arrays):
    p = arrays["feat_ptr"]
    p[1], p[2] = p[2], p[1]


def _edit_feature_repeated(meta, arrays):
    fl, p = arrays["feat_label"], arrays["feat_ptr"]
    a = int(np.flatnonzero(np.diff(p) >= 2)[0])
    fl[p[a] + 1] = fl[p[a]]


def _edit_keys_unsorted(meta, arrays):
    k = arrays["u0.keys"]
    k[0], k[1] = k[1], k[0]


def _edit_keys_past_vocabulary(meta, arrays):
    arrays["u0.keys"][-1] = 10**6


def _edit_step_past_vocabulary(meta, arrays):
    arrays["u2.step0"][-1] = 10**9


def _edit_pair_keys_negative(meta, arrays):
    arrays["u1.keys"][0] = -7


def _edit_labels_repeated(meta, arrays):
    labels = ["O", "O", "B-X"]
    arrays["labels.offsets"], arrays["labels.blob"] = pack_strings(labels)


def _edit_order(value):
    def edit(meta, arrays):
        meta["info"]["order"] = value
    return edit


@pytest.mark.parametrize("edit, fragment", [
    (_edit_feat_label, "a feature names a label outside the 3 labels"),
    (_edit_feat_label_negative, "a feature names a label outside the 3 labels"),
    (_edit_feat_ptr_end, "the feature table does not run over"),
    (_edit_feat_ptr_order, "the feature table does not run over"),
    (_edit_feature_repeated, "not in label order or repeat a label"),
    (_edit_keys_unsorted, "state template line 1: its keys are not distinct, sorted"),
    (_edit_keys_past_vocabulary, "state template line 1: its keys are not distinct, sorted"),
    (_edit_step_past_vocabulary, "state template line 3: its keys"),
    (_edit_pair_keys_negative, "state template line 2: its keys"),
    (_edit_labels_repeated, "a label appears twice"),
    (_edit_order(3), "order 3 is not 1 or 2"),
    (_edit_order("2"), "order '2' is not 1 or 2"),
    (_edit_order(True), "order True is not 1 or 2"),
    (_edit_order(2), "an order-2 model's labels must be tag pairs"),
    (lambda meta, arrays: meta["info"].update(model_type="hmm"), "unknown model type 'hmm'"),
    (lambda meta, arrays: meta.update(info=[1]), "its training record is not an object"),
], ids=lambda x: getattr(x, "__name__", None) if callable(x) else None)
def test_inconsistent_models_are_rejected_at_load(edit, fragment):
    assert fragment in load_error(crafted(edit))


def _edit_record(**fields):
    """An edit of the training record: options (of partial labels) and top-level fields."""
    def edit(meta, arrays):
        info = meta["info"]
        info.setdefault("options", {})
        for name, value in fields.items():
            (info if name == "partial_tokens" else info["options"])[name] = value
    return edit


@pytest.mark.parametrize("fields, fragment", [
    (dict(unknown_label=5), "unknown_label is wrong: --unknown-label must be a string"),
    (dict(unknown_label="a b"), "unknown_label is wrong: --unknown-label must be one cell"),
    (dict(unknown_label="A|B"), "unknown_label is wrong: --unknown-label 'A|B' must be one label cell"),
    (dict(entity_ratio="x"), "entity_ratio is wrong"),
    (dict(entity_ratio=1.5), "entity_ratio is wrong"),
    (dict(entity_ratio=-1), "entity_ratio is wrong"),
    (dict(entity_ratio_margin=7), "entity_ratio_margin is wrong"),
    (dict(entity_ratio_weight=0), "entity_ratio_weight is wrong"),
    (dict(outside_label=""), "outside_label is wrong"),
    (dict(partial_tokens=-5), "partial_tokens -5 is not a count"),
    (dict(partial_tokens="x"), "partial_tokens 'x' is not a count"),
    (dict(partial_tokens=True), "partial_tokens True is not a count"),
])
def test_a_forged_partial_label_record_is_rejected_at_load(fields, fragment):
    """CRF.load builds an estimator from the record's options, and a first stage's out-of-fold
    retraining trains with them: a value no crftk writes is refused when the file is read."""
    assert fragment in load_error(crafted(_edit_record(**fields)))


def test_a_partial_label_record_crftk_writes_loads():
    edit = _edit_record(unknown_label="#", entity_ratio=0.3, entity_ratio_margin=0.05, entity_ratio_weight=10.0,
                        outside_label="O", partial_tokens=12)
    assert Model.from_bytes(crafted(edit)).info["options"]["unknown_label"] == "#"


def test_a_forged_partial_label_record_is_one_line_from_the_cli(tmp_path):
    (tmp_path / "m.model").write_bytes(crafted(_edit_record(entity_ratio=2)))
    (tmp_path / "in.txt").write_text("w1 A\nw2 B\n")
    for args in (["tag", "-m", "m.model", "in.txt"], ["info", "m.model"]):
        p = run_cli(args, tmp_path)
        assert p.returncode == 1 and p.stdout == ""
        lines = p.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("crftk: error: m.model: model file is inconsistent: its "
                                                       "training record's entity_ratio is wrong"), p.stderr


def test_a_stored_template_with_a_huge_row_offset_is_one_line(tmp_path):
    """A model's template is parsed again at load: %x[-300000000,0] ran out of memory there."""
    def edit(meta, arrays):
        meta["template"] = meta["template"].replace("%x[-1,0]", "%x[-300000000,0]")
    data = crafted(edit)
    assert b"%x[-300000000,0]" in data
    (tmp_path / "m.model").write_bytes(data)
    (tmp_path / "in.txt").write_text("w1 A\n")
    p = run_cli(["tag", "-m", "m.model", "in.txt"], tmp_path, limit_memory=True)
    assert p.returncode == 1, p.stderr[-300:]
    assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("crftk: error: m.model")


def test_a_version_1_model_still_loads_and_is_saved_as_version_2(tmp_path):
    """tests/data/model-v1.crftk was written by crftk 0.1.0 (commit 54ca70d), before format 2."""
    old_path = REPO / "tests" / "data" / "model-v1.crftk"
    assert model_header(old_path)["version"] == 1
    old = Model.load(old_path)
    assert old.labels == ["B-NP", "B-PP", "B-SBAR", "B-VP", "I-NP", "I-VP", "O"]
    assert old.weights.size == 1197 and np.isfinite(old.weights).all()
    old.save(tmp_path / "m.crftk")
    header = model_header(tmp_path / "m.crftk")
    assert header["version"] == 2
    assert model_header(old_path)["meta"]["kind"] == "linear-chain"      # one space, no parts list
    assert header["meta"]["kind"] == "model" and header["meta"]["structure"] == old.structure_name == "chain"
    new = Model.load(tmp_path / "m.crftk")
    assert np.array_equal(new.weights, old.weights) and new.info == old.info
    assert new.space.template.text == old.space.template.text
    from crftk.io.conll import read_corpus
    from crftk.commands.tag import Tagger
    test = read_corpus(REPO / "data" / "demo.test")[:50]
    outputs = []
    for m in (old, new):
        out = io.StringIO()
        Tagger(m, threads=1).write_batch(test, out, marginals=2)
        outputs.append(out.getvalue())
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 500


@pytest.mark.parametrize("field, value", [("template", 1.5), ("lexicons", None), ("n_columns", "3"),
                                          ("label_col", True)])
def test_header_fields_of_the_wrong_type_are_one_line(field, value):
    # found by the fuzz suite: a float template or null lexicons gave AttributeError tracebacks
    def edit(meta, arrays):
        meta[field] = value
    assert f"its field {field!r} is not a" in load_error(crafted(edit))


@pytest.mark.parametrize("label", ["", "B NP", "I-NP\t"])
def test_a_label_that_cannot_be_a_column_is_refused_at_load(label):
    # found by the fuzz suite: an empty label name tagged with a missing output column, exit 0
    from crftk.io.container import pack_strings

    def edit(meta, arrays):
        labels = ["B-NP", label, "O"]
        arrays["labels.offsets"], arrays["labels.blob"] = pack_strings(labels)
    assert "a label is empty or holds white space" in load_error(crafted(edit))


@pytest.mark.parametrize("edit, fragment", [
    # found by the fuzz suite (100,000 cases): each loaded, then failed at tagging with a traceback
    # (column count 0, a lexicon the file does not hold) or blamed the input file (label column 2 of 1)
    (lambda meta, arrays: meta.update(n_columns=0), "label column 2 of 0 columns"),
    (lambda meta, arrays: meta.update(n_columns=1), "label column 2 of 1 columns"),
    (lambda meta, arrays: meta.update(label_col=3), "label column 3 of 3 columns"),
    # issue 31: a negative label column reached the compiled readers, which index rows unchecked
    (lambda meta, arrays: meta.update(label_col=-1), "label column -1 of 3 columns"),
    (lambda meta, arrays: meta.update(label_col=1), "its template reads column 1, its label column"),
    (lambda meta, arrays: meta.update(template=meta["template"] + "U9:%x[0,5]\n"),
     "its template reads column 5 of 3 columns"),
    (lambda meta, arrays: meta.update(template=meta["template"] + "@lexicon CITY city.lex\nUlex:%lex[0,CITY]\n"),
     "its template uses lexicon 'CITY', which the file does not hold"),
])
def test_columns_and_lexicons_of_the_header_must_fit_the_template(edit, fragment):
    assert fragment in load_error(crafted(edit))


def test_an_memm_file_whose_template_has_a_b_line_with_macros_is_refused_at_load():
    # found by the fuzz suite: such a forged file loaded, then tagging failed without naming it
    def memm(meta, arrays):     # TEMPLATE has B01:%x[0,1]
        meta.update(structure="memm")
        meta["info"]["model_type"] = "memm"
    data = crafted_file(memm)
    assert "an MEMM whose template has a B line with macros" in load_error(data)


@pytest.mark.parametrize("name", ["feat_label", "feat_ptr", "weights", "labels.blob"])
def test_an_array_that_is_not_flat_is_refused_at_load(name):
    # found by the fuzz suite: a two-dimensional feat_label loaded into a numpy broadcast error
    def edit(meta, arrays):
        a = arrays[name]
        arrays[name] = np.ascontiguousarray((a if a.size % 2 == 0 else a[:-1]).reshape(2, -1))
    assert "is not one-dimensional" in load_error(crafted(edit))


@pytest.mark.parametrize("key", [np.iinfo(np.int64).min, -1, 10**12])
def test_a_line_key_out_of_range_is_refused_at_load(key):
    # found by the fuzz suite (fifth 100,000-case run): a forged last key -2**63 passed the
    # sortedness check (np.diff wrapped around), then tagging failed with an IndexError traceback
    def edit(meta, arrays):
        keys = arrays["u0.keys"].copy()
        keys[-1] = key
        arrays["u0.keys"] = keys
    assert "state template line 1: its keys are not distinct, sorted" in load_error(crafted(edit))


def test_an_attribute_space_is_refused_in_a_file_of_several_parts():
    # found in review: a bag (or pipeline, factorial) file with a part over feature dicts loaded,
    # then crftk info and tag failed with a traceback; such a space is a one-part chain's only
    from crftk.features.attributes import AttributeSpace, flatten
    from crftk.model import Part
    space, _ = AttributeSpace.fit(flatten([[{"w": "a"}, {"w": "b"}]], [["A", "B"]]))
    alone = Model(space, np.zeros(space.n_params), {})
    assert Model.from_bytes(alone.to_bytes()).space.attributes == ["w:a", "w:b"]
    a = make_model(0)
    bag = Model(a.space, a.weights, {**a.info, "bag": {"members": ["main", "dicts"]}},
                more_parts=[Part(space, np.zeros(space.n_params), "dicts")])
    assert "part 'dicts' has a feature space of kind 'attributes'" in load_error(bag.to_bytes())
