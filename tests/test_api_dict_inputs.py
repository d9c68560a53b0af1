"""Feature dicts as users hand them over: numpy arrays, numpy strings and numbers, values past
float64's range; what crftk.CRF and the sklearn-crfsuite drop-in take or refuse in one line."""

import numpy as np
import pytest

import crftk.sklearn_crfsuite as sklearn_crfsuite
from crftk import CRF, CrftkError

X = [[{"w": "a"}, {"w": "b"}], [{"w": "b"}]] * 3
Y = [["A", "B"], ["B"]] * 3


@pytest.mark.parametrize("make", [lambda: CRF(max_iter=10, threads=1),
                                  lambda: sklearn_crfsuite.CRF(max_iterations=10)])
def test_numpy_arrays_of_dicts_and_of_labels_train_as_lists(make):
    # labels read from numpy arrays are numpy.str_ (a str subclass): refused before
    arrays = make().fit([np.array(s) for s in X], [np.array(t) for t in Y])
    lists = make().fit(X, Y)
    assert [list(p) for p in arrays.predict(X)] == [list(p) for p in lists.predict(X)] == Y
    model = arrays.model_ if hasattr(arrays, "model_") else arrays._crf().model_
    assert all(type(label) is str for label in model.space.labels)


@pytest.mark.parametrize("make", [lambda: CRF(max_iter=10, threads=1),
                                  lambda: sklearn_crfsuite.CRF(max_iterations=10)])
def test_an_int_past_float64_is_a_one_line_error(make):
    with pytest.raises(CrftkError, match=r"X\[0\]\[1\]: feature 'v' has the value .* beyond float64's range"):
        make().fit([[{"v": 1}, {"v": 10**400}]], [["A", "B"]])
    with pytest.raises(CrftkError, match="beyond float64's range"):
        make().fit([[{"v": {"n": 10**400}}]], [["A"]])


def test_int_labels_are_refused_as_python_crfsuite_refuses_them():
    with pytest.raises(CrftkError, match=r"y\[0\]\[0\] is an int, not a str"):
        CRF(max_iter=5, threads=1).fit(X, [[1, 2], [2]] * 3)
