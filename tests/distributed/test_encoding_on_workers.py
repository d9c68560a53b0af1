"""Training files read, fitted and encoded by the workers (crftk.distributed.encoding) train the
model that local training on the same files gives."""

import os

import numpy as np
import pytest

pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")

from corpora import REPO
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import read_template
from crftk.features.union import same_space
from crftk.io.conll import iter_corpus, read_corpus
from crftk.training.driver import fit

TEMPLATE = REPO / "templates" / "chunking-crfpp.tmpl"
DEMO_TRAIN = REPO / "data" / "demo.train"


def quiet(message):
    pass


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """The first 400 sentences of demo.train in two files (pieces cross no file)."""
    text = DEMO_TRAIN.read_text()
    blocks = text.split("\n\n")[:400]
    folder = tmp_path_factory.mktemp("encoding")
    paths = [folder / "a.txt", folder / "b.txt"]
    paths[0].write_text("\n\n".join(blocks[:250]) + "\n\n")
    paths[1].write_text("\n\n".join(blocks[250:]) + "\n\n")
    return [str(p) for p in paths]


def in_process_cluster(n):
    import warnings
    warnings.filterwarnings("ignore", message="Port [0-9]+ is already in use", category=UserWarning)
    from distributed import LocalCluster
    return LocalCluster(n_workers=n, threads_per_worker=1, processes=False, dashboard_address=None,
                        protocol="tcp://", host="127.0.0.1")


def relative(a, b):
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("n_workers,min_freq", [(1, 1), (2, 1), (4, 1), (2, 2)])
def test_encoded_on_the_workers_trains_as_locally(files, n_workers, min_freq):
    template = read_template(TEMPLATE)
    options = dict(max_iter=20, threads=1, min_freq=min_freq)
    local = fit(iter_corpus(files), template, log=quiet, **options)
    lines = []
    with in_process_cluster(n_workers) as lc:
        remote = fit(iter_corpus(files), template, log=lines.append, scheduler=lc.scheduler_address, **options)
    space = FeatureSpace.fit(iter_corpus(files), template, min_freq=min_freq)[0]
    same, why = same_space(remote.space, space)
    assert same, why
    assert remote.info["iterations"] == local.info["iterations"] == 20
    assert relative(remote.weights, local.weights) < 1e-9
    record = remote.info["cluster"]
    assert record["encoded_on_workers"] and record["shards"] >= n_workers and record["workers"] == n_workers
    assert record["broadcast_bytes_per_evaluation"] == n_workers * 8 * local.weights.size
    assert record["bytes_per_evaluation"] == record["broadcast_bytes_per_evaluation"] + \
        record["reduce_bytes_per_evaluation"]
    assert any(line.startswith("data-parallel: the workers read, fit and encode") for line in lines)
    assert any(line.startswith("data-parallel: each evaluation sends") for line in lines)
    assert (remote.info["sentences"], remote.info["tokens"]) == (local.info["sentences"], local.info["tokens"])


def test_seen_transitions_and_constraints_come_from_the_workers(files, cluster):
    template = read_template(TEMPLATE)
    options = dict(max_iter=5, threads=1, transitions="seen", constraints="iob2")
    local = fit(iter_corpus(files), template, log=quiet, **options)
    remote = fit(iter_corpus(files), template, log=quiet, scheduler=cluster.client.scheduler.address, **options)
    assert remote.info["cluster"]["encoded_on_workers"]
    assert relative(remote.weights, local.weights) < 1e-9


def test_a_broken_line_in_a_later_piece_is_named_at_its_line_in_the_file(files, cluster, tmp_path):
    lines = open(files[0]).read().splitlines()
    k = len(lines) - 10
    lines[k] = lines[k] + " extra"
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines) + "\n")
    template = read_template(TEMPLATE)
    with pytest.raises(CrftkError) as local_error:
        fit(iter_corpus([str(bad)]), template, log=quiet, max_iter=2, threads=1)
    with pytest.raises(CrftkError) as error:
        fit(iter_corpus([str(bad)]), template, log=quiet, max_iter=2, threads=1,
            scheduler=cluster.client.scheduler.address)
    assert error.value.path == str(bad) and error.value.line == local_error.value.line == k + 1


def test_what_the_workers_cannot_encode_is_encoded_here_with_one_line_saying_why(files, cluster):
    template = read_template(TEMPLATE)
    lines = []
    model = fit(read_corpus(files[0])[:50], template, log=lines.append, max_iter=2, threads=1,
                scheduler=cluster.client.scheduler.address)
    assert "data-parallel: the training data is read and encoded here (the training data is not read from " \
           "files)" in lines
    assert not model.info["cluster"]["encoded_on_workers"]
    lines = []
    fit(iter_corpus(files), template, log=lines.append, max_iter=2, threads=1, order=2,
        scheduler=cluster.client.scheduler.address)
    assert sum(line.startswith("data-parallel: the training data is read and encoded here") for line in lines) == 1


def test_partial_labels_found_by_the_workers_are_encoded_here(files, cluster, tmp_path):
    rows = open(files[1]).read().split("\n")
    marked = [k for k, row in enumerate(rows) if row.endswith("B-NP")][:3]
    for k in marked:
        rows[k] = rows[k][:-len("B-NP")] + "?"
    text = "\n".join(rows)
    partial = tmp_path / "partial.txt"
    partial.write_text(text)
    template = read_template(TEMPLATE)
    lines = []
    local = fit(iter_corpus([files[0], str(partial)]), template, log=quiet, max_iter=3, threads=1)
    assert len(marked) == 3 and local.info["partial_tokens"] == 3
    remote = fit(iter_corpus([files[0], str(partial)]), template, log=lines.append, max_iter=3, threads=1,
                 scheduler=cluster.client.scheduler.address)
    assert "data-parallel: the training data is read and encoded here (the training data has partial labels)" in lines
    assert relative(remote.weights, local.weights) < 1e-9


def test_a_worker_killed_as_the_encoding_starts_costs_time_not_the_run(files, cluster, worker_killer):
    client = cluster.client
    log, _, killed = worker_killer(lambda message: "merged on the workers; encoding there" in message, max)
    template = read_template(TEMPLATE)
    local = fit(iter_corpus(files), template, log=quiet, max_iter=20, threads=1)
    remote = fit(iter_corpus(files), template, log=log, max_iter=20, threads=1, scheduler=client.scheduler.address)
    assert killed and remote.info["cluster"]["encoded_on_workers"]
    assert relative(remote.weights, local.weights) < 1e-9
    client.wait_for_workers(2, timeout=60)
    assert killed[0] not in client.run(os.getpid).values()


def test_fit_files_from_python_encodes_on_the_workers(files):
    """crftk.CRF(..., scheduler=).fit_files: the Python front of the same path."""
    import crftk
    local = crftk.CRF(str(TEMPLATE), max_iter=5, threads=1).fit_files(files)
    with in_process_cluster(2) as lc:
        remote = crftk.CRF(str(TEMPLATE), max_iter=5, threads=1, scheduler=lc.scheduler_address).fit_files(files)
    assert remote.model_.info["cluster"]["encoded_on_workers"]
    assert relative(remote.model_.weights, local.model_.weights) < 1e-9
