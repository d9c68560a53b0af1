"""Helpers of the sklearn-crfsuite drop-in."""

from itertools import chain


def flatten(y):
    """The items of a list of sequences in one list: ``flatten([[1, 2], [3]]) == [1, 2, 3]``."""
    return list(chain.from_iterable(y))
