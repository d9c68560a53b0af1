"""Data-parallel training on real-valued attributes: the shards carry the values, and a
LocalCluster trains the model local training does (issue 33, item 1)."""

import numpy as np
import pytest

# "distributed.client": see test_training.py
pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")

from corpora import REPO, with_random_values
from crftk.commands.train import fit
from crftk.distributed.training import split
from crftk.features.space import FeatureSpace
from crftk.features.templates import read_template
from crftk.io.conll import read_corpus

TEMPLATE = REPO / "templates" / "chunking-crfpp.tmpl"


def quiet(message):
    pass


@pytest.fixture(scope="module")
def data():
    return read_corpus(str(REPO / "data" / "demo.train"))[:200]


@pytest.fixture
def valued_training(monkeypatch):
    """Training encodes its data with random values on every attribute occurrence (non-negative:
    GIS is among the algorithms)."""
    original = FeatureSpace.fit

    def valued_fit(*args, **kw):
        space, corpus = original(*args, **kw)
        return space, with_random_values(corpus, corpus.n_tokens, low=0.0, high=2.0)

    monkeypatch.setattr(FeatureSpace, "fit", valued_fit)


def test_shards_carry_the_values(data):
    _, corpus = FeatureSpace.fit(data, read_template(TEMPLATE))
    corpus = with_random_values(corpus, 1)
    shards = split(corpus, 3)
    assert np.array_equal(np.concatenate([s.values for s in shards]), corpus.values)


@pytest.mark.parametrize("options", [{}, {"algorithm": "pcg"}, {"algorithm": "gis"}, {"order": 2}],
                         ids=["lbfgs", "pcg", "gis", "order2"])
def test_training_with_values_on_a_cluster_equals_local(cluster, data, valued_training, options):
    common = dict(log=quiet, max_iter=4, threads=1, **options)
    local = fit(data, read_template(TEMPLATE), **common)
    remote = fit(data, read_template(TEMPLATE), scheduler=cluster.client.scheduler.address, **common)
    assert remote.info["iterations"] == local.info["iterations"] == 4
    assert remote.info["objective"] == pytest.approx(local.info["objective"], rel=1e-6)
    np.testing.assert_allclose(remote.weights, local.weights, rtol=1e-6, atol=1e-8)
    assert remote.info["cluster"]["shards"] == 2


def test_values_change_what_is_trained(data, valued_training, monkeypatch):
    """The values reach the objective: the same data trained binary gives another model."""
    valued = fit(data, read_template(TEMPLATE), log=quiet, max_iter=3, threads=1)
    monkeypatch.undo()
    binary = fit(data, read_template(TEMPLATE), log=quiet, max_iter=3, threads=1)
    assert valued.info["objective"] != pytest.approx(binary.info["objective"], rel=1e-3)
