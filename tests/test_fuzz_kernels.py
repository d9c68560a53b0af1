"""Fuzz: compiled kernels against their Python transcriptions.

The K best labelings of a product of chains (crftk._product.nbest: lists made lazily, an entry
only when a reported labeling needs it) must be those of the full merge by heads
(product_reference.merged_nbest) bit for bit: paths, scores and counts, whatever the chains,
K, lengths and threads, with ties (potentials of a few values) and impossible states and
transitions (-inf) everywhere.
"""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import fuzz_strategies as fz
from product_reference import assert_nbest_is_the_merge

#: potentials of few values, so that candidates tie across lists and within them
VALUES = st.sampled_from([-np.inf, -2.0, -1.0, -0.5, 0.0, 0.0, 0.5, 1.0, 1.5, 3.0])


@st.composite
def products(draw):
    sizes = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    if int(np.prod(sizes)) > 60:
        sizes = sizes[:1]
    S = int(np.prod(sizes))
    lengths = draw(st.lists(st.integers(1, 7), min_size=1, max_size=3))
    N = sum(lengths)
    shared = draw(st.booleans())
    state = np.array(draw(st.lists(VALUES, min_size=N * S, max_size=N * S)), dtype=np.float64).reshape(N, S)
    trans = []
    for n in sizes:
        shape = (n, n) if shared else (N, n, n)
        cells = int(np.prod(shape))
        trans.append(np.array(draw(st.lists(VALUES, min_size=cells, max_size=cells)),
                              dtype=np.float64).reshape(shape))
    sp = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    return sizes, sp, state, trans


@pytest.mark.fuzz(weight=0.5)
@given(case=products(), K=st.integers(1, 12), threads=st.integers(1, 2))
@fz.counted
def test_product_nbest_is_the_full_merge(case, K, threads):
    sizes, sp, state, trans = case
    assert_nbest_is_the_merge(sizes, sp, state, trans, K, threads)
