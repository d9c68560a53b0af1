"""Dask tagging's outputs as local tagging's: a FIFO (alone, or in an -o DIR) is written directly and
stays a FIFO; an output that is an input is refused before a cluster starts."""

import io
import os
import shutil

import pytest

pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")

from corpora import REPO
from special_files import FifoReader
from crftk.commands.tag import tag_files as tag_locally
from crftk.commands.train import fit
from crftk.distributed.tagging import tag
from crftk.errors import CrftkError
from crftk.features.templates import parse_template
from crftk.io.conll import read_corpus

DEMO_TEST = str(REPO / "data" / "demo.test")


@pytest.fixture(scope="module")
def model():
    return fit(read_corpus(DEMO_TEST)[:200], parse_template("U0:%x[0,0]\nU1:%x[0,1]\nB\n"), log=lambda m: None,
               max_iter=5, threads=1)


def local(model, inputs):
    out = io.StringIO()
    tag_locally(model, inputs, out, threads=1)
    return out.getvalue()


def test_a_fifo_output_is_streamed_and_stays_a_fifo(cluster, model, tmp_path):
    fifo = FifoReader(tmp_path / "out")
    tag(model, [DEMO_TEST], fifo.path, scheduler=cluster.client.scheduler.address, piece_bytes=20_000)
    assert fifo.result().decode() == local(model, [DEMO_TEST])
    assert fifo.is_fifo() and os.listdir(tmp_path) == ["out"]


def test_a_fifo_in_the_output_directory_is_streamed_and_stays_a_fifo(cluster, model, tmp_path):
    fifo = FifoReader(tmp_path / "demo.test")
    tag(model, [DEMO_TEST], str(tmp_path), scheduler=cluster.client.scheduler.address, piece_bytes=20_000)
    assert fifo.result().decode() == local(model, [DEMO_TEST])
    assert fifo.is_fifo() and os.listdir(tmp_path) == ["demo.test"]


@pytest.mark.parametrize("output", ["model", "input"])
def test_an_output_that_is_an_input_is_refused_before_the_cluster_starts(model, tmp_path, output):
    model.save(tmp_path / "model")
    shutil.copy(DEMO_TEST, tmp_path / "input")
    before = (tmp_path / output).read_bytes()
    with pytest.raises(CrftkError, match=f"the output would overwrite the {output} .*{output} \\(the same file\\)"):
        tag(str(tmp_path / "model"), [str(tmp_path / "input")], str(tmp_path / output), workers=1)
    assert (tmp_path / output).read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["input", "model"]


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    """(bag model path, weight file) of a tiny bag."""
    from click.testing import CliRunner
    from crftk.cli import main
    d = tmp_path_factory.mktemp("bag")
    (d / "train.txt").write_text("".join(open(DEMO_TEST).read().splitlines(keepends=True)[:400]))
    templates = [f"conll2000-np-bag-{name}.tmpl" for name in ("base", "pos")]
    result = CliRunner().invoke(main, ["bag", *[x for t in templates for x in ("-t", str(REPO / "templates" / t))],
                                       "--dev", str(d / "train.txt"), "-m", str(d / "bag.model"), "-q",
                                       "--max-iter", "3", "-p", "1", str(d / "train.txt")])
    assert result.exit_code == 0, result.output
    (d / "w.txt").write_text("conll2000-np-bag-base 0.3\nconll2000-np-bag-pos 0.7\n")
    return str(d / "bag.model"), str(d / "w.txt")


def test_an_output_that_is_the_weight_file_is_refused_before_the_cluster_starts(monkeypatch, bag, tmp_path):
    # the TagJob holds the table read from the weight file, not its path: the check never saw the file
    from click.testing import CliRunner
    from crftk.cli import main
    import crftk.distributed.tagging as dask_tagging
    from crftk.commands.tag import load_job

    def no_cluster(*args, **kw):
        raise AssertionError("a cluster was started")

    monkeypatch.setattr(dask_tagging, "Cluster", no_cluster)
    model, weights = bag
    before = open(weights, "rb").read()
    refused = f"crftk: error: {weights}: the output would overwrite the weights file {weights} (the same file)"
    for cluster in (["--workers", "1"], ["--scheduler", "tcp://127.0.0.1:9"]):
        result = CliRunner().invoke(main, ["tag", "-m", model, "--weights", weights, "-o", weights, *cluster,
                                           DEMO_TEST])
        assert result.exit_code == 1 and result.output.startswith(refused), result.output
        assert result.output.count("\n") == 1
    with pytest.raises(CrftkError, match="the output would overwrite the weights file"):     # the library function
        tag(load_job(model, weights=weights), [DEMO_TEST], weights, workers=1)
    with pytest.raises(CrftkError, match="the output would overwrite the weights file"):
        tag(model, [DEMO_TEST], weights, workers=1, weights=weights)
    assert open(weights, "rb").read() == before
    assert sorted(os.listdir(os.path.dirname(weights))) == ["bag.model", "train.txt", "w.txt"]


def test_a_failed_rename_of_an_output_is_one_error_naming_it(monkeypatch, tmp_path):
    from crftk.distributed.tagging import _Outputs
    shutil.copy(DEMO_TEST, tmp_path / "in.txt")
    (tmp_path / "out").mkdir()
    outputs = _Outputs([str(tmp_path / "in.txt")], out_dir=str(tmp_path / "out"))
    outputs.start(0)
    outputs.write("a B\n\n")
    outputs.finish()

    def replace(src, dst):
        raise OSError(16, "Device or resource busy")

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(CrftkError) as e:
        outputs.commit()
    assert str(e.value) == f"{tmp_path / 'out' / 'in.txt'}: cannot write (Device or resource busy)"
    outputs.abort()
    assert os.listdir(tmp_path / "out") == []
