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
