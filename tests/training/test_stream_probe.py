"""crftk train --stream used as a CRF++/CRFsuite user would, on purpose with bad input: every bad
input is one line and a non-zero exit with no model written, and a good input trains the weights
training in memory trains when one batch holds the corpus."""

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from corpora import CLI_ENV, REPO, cli, error_line, random_corpus, write_conll
from crftk.errors import CrftkError
from crftk.features.templates import parse_template
from crftk.io.conll import iter_corpus
from crftk.model import Model
from crftk.training import fit

TEMPLATE = "U00:%x[-1,0]\nU01:%x[0,0]\nU02:%x[1,0]\nU03:%x[0,1]/%x[0,0]\nB\n"
STREAM = ["--algorithm", "perceptron", "--max-iter", "2", "--stream", "-q"]


def quiet(msg):
    pass


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("probe")
    (root / "t.tmpl").write_text(TEMPLATE)
    write_conll(root / "train.txt", random_corpus(200, seed=3, vocab=50))
    return root


def train_cli(root, *args):
    return cli("train", "-t", root / "t.tmpl", *args, cwd=root)


def test_standard_input_is_refused_before_the_dictionary_pass_drains_it(corpus):
    """It used to train the dictionary from the pipe, then every epoch read nothing: exit 0 and a
    model whose weights were all 0."""
    text = (corpus / "train.txt").read_text()
    for name in ("-", "/dev/stdin"):
        model = corpus / "stdin.model"
        run = cli("train", "-t", corpus / "t.tmpl", "-m", model, *STREAM, name, cwd=corpus, input=text)
        assert "can be read once" in error_line(run) and name in run.stderr
        assert not model.exists()
    run = cli("train", "-t", corpus / "t.tmpl", "-m", model, "--algorithm", "perceptron", "--max-iter", "2",
              "-q", "-", cwd=corpus, input=text)
    assert run.returncode == 0 and np.count_nonzero(Model.load(model).weights)    # in memory, stdin is fine


def test_a_fifo_is_refused_instead_of_waiting_for_ever_in_the_first_epoch(corpus):
    fifo = corpus / "fifo"
    os.mkfifo(fifo)
    try:
        run = train_cli(corpus, "-m", "fifo.model", *STREAM, fifo)
    finally:
        fifo.unlink()
    assert f"{fifo}: --stream reads the training files again in every epoch" in error_line(run)
    assert not (corpus / "fifo.model").exists()


def test_a_file_object_is_refused_from_python(corpus):
    with open(corpus / "train.txt", "rb") as fh, pytest.raises(CrftkError, match="a file object"):
        fit(iter_corpus([fh]), parse_template(TEMPLATE), log=quiet, algorithm="sgd", stream=True)


def test_a_training_file_cut_during_training_is_an_error_not_a_model_of_half_the_data(corpus, tmp_path):
    path = tmp_path / "cut.txt"
    text = (corpus / "train.txt").read_text()
    path.write_text(text)
    half = text[:text.index("\n\n", len(text) // 2) + 2]

    def cut_after_the_read_line(msg):
        if msg.startswith("read "):
            path.write_text(half)

    with pytest.raises(CrftkError, match=r"this epoch read .* did the training files change") as e:
        fit(iter_corpus([path]), parse_template(TEMPLATE), log=cut_after_the_read_line, algorithm="perceptron",
            max_iter=2, stream=True, stream_batch_tokens=100)
    assert e.value.path == str(path)


@pytest.mark.parametrize("ending", ["\n", ""], ids=["no-blank-line", "no-newline"])
def test_a_file_without_a_final_blank_line_is_one_batch_and_trains_the_in_memory_weights(corpus, tmp_path, ending):
    """Its last sentence used to make a batch of its own (the last block was parsed before the
    end of the file was known), so it was never shuffled with the others."""
    path = tmp_path / "open-ended.txt"
    path.write_text((corpus / "train.txt").read_text().rstrip("\n") + ending)
    options = dict(log=quiet, algorithm="perceptron", max_iter=3, threads=1)
    memory = fit(iter_corpus([path]), parse_template(TEMPLATE), **options)
    streamed = fit(iter_corpus([path]), parse_template(TEMPLATE), stream=True, **options)
    assert streamed.info["stream"]["batches"] == 1 and streamed.info["sentences"] == 200
    np.testing.assert_array_equal(streamed.weights, memory.weights)


@pytest.mark.parametrize("block_size", [1, 7, 64, 1 << 16])
def test_reading_ahead_gives_the_sentences_of_reading_without(corpus, tmp_path, block_size):
    from crftk.io.conll import read_batches, read_sentences
    path = tmp_path / "open-ended.txt"
    path.write_text((corpus / "train.txt").read_text().rstrip("\n"))
    want = [[row for row in s.rows] for s in read_sentences(path)]
    for ahead in (False, True):
        got = []
        for batch in read_batches(path, batch_tokens=50, max_sentences=50, block_size=block_size, read_ahead=ahead):
            block = bytes(batch.block)
            for k in range(batch.n_sentences):
                toks = range(batch.sent_ptr[k], batch.sent_ptr[k + 1])
                got.append([block[batch.tok_start[t]:batch.tok_end[t]].decode().split() for t in toks])
        assert got == want
