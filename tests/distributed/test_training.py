"""Data-parallel training on a LocalCluster equals training in one process."""

import os

import numpy as np
import pytest

# "distributed.client", not "distributed": with tests/ on the path, tests/distributed itself is a
# namespace package of that name, which imports without Dask.
pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")
from click.testing import CliRunner

from corpora import REPO
from crftk.cli import main
from crftk.commands.train import fit, train
from crftk.distributed.training import split
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import read_template
from crftk.io.conll import read_corpus

TEMPLATE = REPO / "templates" / "chunking-crfpp.tmpl"
DEMO_TRAIN = str(REPO / "data" / "demo.train")
ITERATIONS = 4


def quiet(message):
    pass


@pytest.fixture(scope="module")
def data():
    return read_corpus(DEMO_TRAIN)[:300]


@pytest.fixture(scope="module")
def map_model(data):
    return fit(data, read_template(TEMPLATE), log=quiet, max_iter=30, threads=1)


def test_shards_are_contiguous_and_cover_the_corpus(data):
    _, corpus = FeatureSpace.fit(data, read_template(TEMPLATE))
    shards = split(corpus, 3)
    assert [s.n_sentences for s in shards] and sum(s.n_sentences for s in shards) == corpus.n_sentences
    assert max(s.n_tokens for s in shards) < 0.4 * corpus.n_tokens       # about a third each
    assert np.array_equal(np.concatenate([s.labels for s in shards]), corpus.labels)
    assert np.array_equal(np.concatenate([s.attrs for s in shards]), corpus.attrs)
    many = split(corpus, 10 ** 6)         # never an empty shard
    assert min(s.n_sentences for s in many) >= 1 and sum(s.n_sentences for s in many) == corpus.n_sentences


@pytest.mark.parametrize("options", [
    {"c1": 0.1},                                                    # OWL-QN
    {"algorithm": "pcg"},                                           # the curvature pass
    {"algorithm": "gis"},                                           # counts and GIS's constant
    {"order": 2},                                                   # tied parameters
    {"objective": "mce", "c2": 5e-4, "init": True},
    {"objective": "mce-f", "algorithm": "quickprop", "c2": 5e-6, "init": True},   # a ratio of sums
], ids=["owlqn", "pcg", "gis", "order2", "mce", "mce-f"])
def test_distributed_training_equals_local_training(cluster, data, map_model, options):
    options = dict(options)
    template = read_template(TEMPLATE)
    if options.pop("init", False):
        options["init"], template = map_model, None
    local = fit(data, template, log=quiet, max_iter=ITERATIONS, threads=1, **options)
    remote = fit(data, template, log=quiet, max_iter=ITERATIONS, threads=1,
                 scheduler=cluster.client.scheduler.address, **options)
    assert remote.info["iterations"] == local.info["iterations"] == ITERATIONS
    assert remote.info["objective"] == pytest.approx(local.info["objective"], rel=1e-6)
    assert remote.info["evaluations"] == local.info["evaluations"]
    record = remote.info["cluster"]
    assert record["shards"] == record["workers"] == 2 and record["bytes_per_evaluation"] > 8 * 2 * local.weights.size


def test_cli_trains_on_a_running_scheduler_as_locally(cluster, tmp_path):
    args = ["train", "-t", str(TEMPLATE), "--max-iter", str(ITERATIONS), "-p", "1", DEMO_TRAIN,
            "--trace"]
    local = CliRunner().invoke(main, args + [str(tmp_path / "l.tsv"), "-m", str(tmp_path / "l.crftk")])
    remote = CliRunner().invoke(main, args + [str(tmp_path / "r.tsv"), "-m", str(tmp_path / "r.crftk"),
                                              "--scheduler", cluster.client.scheduler.address])
    assert local.exit_code == 0 and remote.exit_code == 0, remote.output
    assert "data-parallel: 2 shards on 2 Dask workers" in remote.output

    def objectives(name):
        rows = (tmp_path / name).read_text().splitlines()[1:]
        return [float(r.split("\t")[3]) for r in rows], [int(r.split("\t")[1]) for r in rows]

    (fl, nl), (fr, nr) = objectives("l.tsv"), objectives("r.tsv")
    assert nl == nr and np.allclose(fl, fr, rtol=1e-9, atol=0)


def test_sequential_algorithms_are_refused_before_any_work(tmp_path):
    with pytest.raises(CrftkError, match="--algorithm perceptron updates the weights sentence by sentence"):
        train([DEMO_TRAIN], TEMPLATE, tmp_path / "m", algorithm="perceptron", workers=2)
    with pytest.raises(CrftkError, match="not both"):
        train([DEMO_TRAIN], TEMPLATE, tmp_path / "m", scheduler="tcp://127.0.0.1:1", workers=2)
    assert os.listdir(tmp_path) == []


def test_lost_scheduler_is_one_error_and_no_model(external, tmp_path):
    address, scheduler = external
    model = tmp_path / "m.crftk"

    def log(message):
        if message.startswith("iter") and scheduler.poll() is None:
            scheduler.kill()

    with pytest.raises(CrftkError) as error:
        train([DEMO_TRAIN], TEMPLATE, model, scheduler=address, max_iter=50, threads=1, log=log)
    assert str(error.value) == f"lost the connection to the Dask scheduler at {address}; no model was saved"
    assert os.listdir(tmp_path) == []


def test_a_killed_worker_costs_a_resend_not_the_run(cluster, data, worker_killer):
    client = cluster.client
    log, lines, _ = worker_killer(lambda message: message.startswith("iter    2"), min)
    template = read_template(TEMPLATE)
    local = fit(data, template, log=quiet, max_iter=ITERATIONS, threads=1)
    remote = fit(data, template, log=log, max_iter=ITERATIONS, threads=1, scheduler=client.scheduler.address)
    assert "data-parallel: a Dask worker was lost; 1 shard sent again" in lines
    assert remote.info["objective"] == pytest.approx(local.info["objective"], rel=1e-6)
    client.wait_for_workers(2, timeout=60)


def test_the_python_estimator_trains_on_a_scheduler(cluster, data):
    from crftk import CRF
    X = [[row[:-1] for row in s.rows] for s in data]
    y = [[row[-1] for row in s.rows] for s in data]
    local = CRF(str(TEMPLATE), max_iter=ITERATIONS, threads=1).fit(X, y)
    remote = CRF(str(TEMPLATE), max_iter=ITERATIONS, threads=1, scheduler=cluster.client.scheduler.address).fit(X, y)
    assert remote.model_.info["cluster"]["shards"] == 2 and "cluster" not in local.model_.info
    assert remote.model_.info["objective"] == pytest.approx(local.model_.info["objective"], rel=1e-6)
    assert remote.predict(X[:20]) == local.predict(X[:20])


def test_mce_f_counts_a_shard_without_gold_chunks(cluster, data, map_model):
    from crftk.io.conll import Sentence
    # the first half of the tokens labeled O throughout: the first of two shards has no chunk
    outside = [Sentence([row[:-1] + ["O"] for row in s.rows]) for s in data]
    both = outside + data
    options = dict(objective="mce-f", algorithm="quickprop", c2=5e-6, init=map_model, max_iter=3, threads=1,
                   log=quiet)
    local = fit(both, None, **options)
    remote = fit(both, None, scheduler=cluster.client.scheduler.address, **options)
    assert remote.info["objective"] == pytest.approx(local.info["objective"], rel=1e-6)
    with pytest.raises(CrftkError, match="MCE-F needs chunks"):
        fit(outside, None, scheduler=cluster.client.scheduler.address, **options)


@pytest.mark.parametrize("options", [{}, {"algorithm": "pcg"}, {"algorithm": "gis"}], ids=["lbfgs", "pcg", "gis"])
def test_a_factorial_crf_trains_on_a_cluster_as_locally(cluster, data, options):
    """The workers rebuild the factorial structure from its model bytes and bind it with its options."""
    template = read_template(REPO / "templates" / "fcrf-np.tmpl")
    common = dict(log=quiet, max_iter=3, threads=1, label_col=[1, 2], inference="trp", **options)
    local = fit(data[:120], template, **common)
    remote = fit(data[:120], template, scheduler=cluster.client.scheduler.address, **common)
    assert remote.kind == local.kind == "factorial" and remote.info["iterations"] == local.info["iterations"]
    assert remote.info["objective"] == pytest.approx(local.info["objective"], rel=1e-6)
    assert remote.info["cluster"]["shards"] == 2
