"""crftk.CRF.fit with partial labels in y: None (unknown) and sets of allowed labels."""

import numpy as np
import pytest

from corpora import REPO
from crftk import CRF
from crftk.errors import CrftkError

TEMPLATE = "U00:%x[0,0]\nU01:%x[0,1]\nB\n"


def _demo(n):
    X, y, sent = [], [], []
    for line in (REPO / "data" / "demo.train").read_text().splitlines():
        if line.strip():
            sent.append(line.split("\t"))
        elif sent:
            X.append([r[:2] for r in sent])
            y.append([r[2] for r in sent])
            sent = []
            if len(X) == n:
                break
    return X, y


def _crf(tmp_path, **kw):
    t = tmp_path / "t.tmpl"
    t.write_text(TEMPLATE)
    return CRF(template=str(t), max_iter=15, threads=1, **kw)


def test_fit_with_unknown_and_sets(tmp_path):
    X, y = _demo(120)
    rng = np.random.default_rng(0)
    partial = [[None if rng.random() < 0.2 else ({lab, "O"} if rng.random() < 0.1 else lab) for lab in s]
               for s in y]
    crf = _crf(tmp_path).fit(X, partial)
    assert crf.model_.info["partial_tokens"] > 0
    assert "?" not in crf.model_.output_labels
    assert crf.score(X, y) > 0.5


@pytest.mark.parametrize("label, fragment", [
    (set(), "empty label set"),
    ({"B-NP", "?"}, "other than the unknown marker"),
    ({"B-NP", "B-ZZ"}, "never has the label 'B-ZZ'"),
    (("B-NP", ""), "label set holding"),
])
def test_fit_errors(tmp_path, label, fragment):
    X, y = _demo(5)
    y[1][0] = label
    with pytest.raises(CrftkError, match=fragment):
        _crf(tmp_path).fit(X, y)


def test_partial_labels_off(tmp_path):
    X, y = _demo(5)
    y[0][0] = None
    with pytest.raises(CrftkError, match="partial labels are off"):
        _crf(tmp_path, unknown_label="").fit(X, y)


def test_feature_dicts_refuse_partial_labels():
    X = [[{"w": "a"}, {"w": "b"}]]
    with pytest.raises(CrftkError, match="partial labels train from CoNLL-style rows"):
        CRF(max_iter=2).fit(X, [["A", None]])
