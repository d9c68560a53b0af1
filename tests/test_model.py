import io

import numpy as np
import pytest

from corpora import random_corpus
from crftk.errors import CrftkError
from crftk.features import FeatureSpace
from crftk.model import Model, model_header
from crftk.templates import parse_template

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
    la, lb = m.space.lattices(a), back.space.lattices(b)
    assert np.array_equal(la.viterbi(m.weights)[0], lb.viterbi(back.weights)[0])
    assert model_header(path)["meta"]["kind"] == "linear-chain"


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
