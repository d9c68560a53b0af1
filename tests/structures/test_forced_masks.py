"""crftk.structures.forced: annotations as masks, their conversion to a --train-scheme model's labels,
and the feasibility check against pinned transitions (against enumeration of every labeling)."""

import itertools

import numpy as np
import pytest

from crftk.errors import CrftkError
from crftk.features.layout import ChainLayout
from crftk.io.schemes import Recoder
from crftk.structures.constraints import FORBIDDEN, allowed
from crftk.io.partial import cell_set
from crftk.structures.forced import infeasible_sentence, name_mask, recoded_mask


def test_cells():
    assert cell_set("?", "?") is None
    assert cell_set("B-X", "?") == ("B-X",)
    assert cell_set("B-X|O", "?") == ("B-X", "O")
    with pytest.raises(CrftkError, match="empty element"):
        cell_set("B-X|", "?")
    with pytest.raises(CrftkError, match="stands alone"):
        cell_set("B-X|?", "?")


def test_name_mask_rows():
    names = ["B-X", "I-X", "O"]
    mask = name_mask([None, "O", ("B-X", "I-X"), frozenset({"I-X"})], names, lambda t: ("f", t + 1))
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]]
    with pytest.raises(CrftkError, match=r"^f:2: forced label 'B-Y' is not one of the model's 3 labels"):
        name_mask([None, "B-Y"], names, lambda t: ("f", t + 1))


def test_iob2_labels_become_their_iobes_labels():
    labels = ["B-X", "E-X", "I-X", "O", "S-X"]           # a model trained as iobes on an iob2 corpus
    rec = Recoder(labels, "iobes", "iob2")
    mask = name_mask([None, "B-X", "I-X", "O"], rec.names, lambda t: (None, None))
    out = recoded_mask(mask, rec, np.array([0, 4]))
    allowed_labels = [{labels[j] for j in np.flatnonzero(row)} for row in out]
    assert allowed_labels[0] == set(labels)
    # token by token: every label that converts to the corpus's label with some neighbours
    # (I-X or E-X after O starts a chunk: B-X in IOB2)
    assert allowed_labels[1] == {"B-X", "S-X", "I-X", "E-X"}
    assert allowed_labels[2] == {"I-X", "E-X"}
    assert allowed_labels[3] == {"O"}
    for t, row in enumerate(out):
        for c in np.flatnonzero(row):
            assert any(mask[t, rec.table[a, c, b]] for a in range(len(labels) + 1) for b in range(len(labels) + 1))


def brute_feasible(trans, start, end, mask):
    L = mask.shape[1]
    for y in itertools.product(range(L), repeat=mask.shape[0]):
        if all(mask[t, y[t]] for t in range(len(y))) and start[y[0]] and end[y[-1]] \
                and all(trans[a, b] for a, b in zip(y, y[1:])):
            return True
    return False


@pytest.mark.parametrize("scheme", ["iob2", "iobes"])
def test_infeasible_sentence_equals_enumeration(scheme):
    labels = ["B-X", "I-X", "O"] if scheme == "iob2" else ["B-X", "E-X", "I-X", "O", "S-X"]
    L = len(labels)
    trans, start, end = allowed(labels, scheme)
    lay = ChainLayout(0, L, 0)
    w = np.zeros(lay.n_params)
    w[lay.trans] = np.where(trans.reshape(-1), 0.5, FORBIDDEN)
    w[lay.start] = np.where(start, 0.0, FORBIDDEN)
    w[lay.end] = np.where(end, 0.0, FORBIDDEN)
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 5, size=200)
    ptr = np.concatenate([[0], np.cumsum(lengths)])
    mask = (rng.random((ptr[-1], L)) < 0.45).astype(np.uint8)
    layout = {"trans": lay.trans, "start": lay.start, "end": lay.end}
    feasible = [brute_feasible(trans, start, end, mask[ptr[k]:ptr[k + 1]]) for k in range(lengths.size)]
    assert not all(feasible) and any(feasible)
    first_bad = feasible.index(False)
    assert infeasible_sentence(w, layout, mask, ptr) == first_bad
    # the feasible sentences alone pass
    keep = [k for k in range(lengths.size) if feasible[k]]
    sub = np.concatenate([mask[ptr[k]:ptr[k + 1]] for k in keep])
    assert infeasible_sentence(w, layout, sub, np.concatenate([[0], np.cumsum(lengths[keep])])) is None
