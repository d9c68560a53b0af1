"""crftk train --stream used as a CRF++/CRFsuite user would, on purpose with bad input: every bad
input is one line and a non-zero exit with no model written, and a good input trains the weights
training in memory trains when one batch holds the corpus."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from corpora import CLI_ENV, cli, error_line, random_corpus, write_conll
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


@pytest.mark.parametrize("text, line", [
    ("# first mentions\nU0:%x[0,0]\nU1:%^X[-1,0]\nB\n", 3),
    ("U0:%x[0,0]\n\nU1:%doc[0,0,token]\nB\n", 3),
    ("U0:%x[0,0]\n@lexicon L lex.txt\nU1:%lex[0,L]\nB\n", 2),
])
def test_a_template_stream_cannot_take_is_refused_at_its_line(corpus, tmp_path, text, line):
    (tmp_path / "lex.txt").write_text("w1\nw2\n")
    (tmp_path / "bad.tmpl").write_text(text)
    out = cli("train", "-t", "bad.tmpl", "-m", "o.model", *STREAM, corpus / "train.txt", cwd=tmp_path)
    assert error_line(out).startswith(f"crftk: error: bad.tmpl:{line}: --stream ")
    assert not (tmp_path / "o.model").exists()


BAD_FILES = {
    "truncated": (lambda t: t[:len(t) // 2].rstrip("\n") + " w", "expected 3 columns, found 4"),
    "columns change": (lambda t: t.replace("\n\n", "\nw1 A B C\n\n", 3), "expected 3 columns, found 4"),
    "empty": (lambda t: "", "no training sentences"),
    "blank lines only": (lambda t: "\n\n\n", "no training sentences"),
    "latin-1 without --encoding": (lambda t: t.replace("w1 ", "w\u00e91 "), "not valid UTF-8"),
}


@pytest.mark.parametrize("what", list(BAD_FILES))
def test_a_bad_training_file_is_one_line_with_no_model(corpus, tmp_path, what):
    edit, message = BAD_FILES[what]
    path = tmp_path / "bad.txt"
    path.write_bytes(edit((corpus / "train.txt").read_text()).encode("latin-1"))
    out = cli("train", "-t", corpus / "t.tmpl", "-m", "o.model", *STREAM, path, cwd=tmp_path)
    assert "bad.txt" in error_line(out) and message in out.stderr
    assert not (tmp_path / "o.model").exists()


@pytest.mark.parametrize("args, message", [
    (["-m", "train.txt"], "the model would overwrite the training file"),
    (["-m", "."], "cannot write the model: is a directory"),
    (["-m", "o.model", "--label-col", "5"], "label column 5 does not exist in data of 3 columns"),
    (["-m", "o.model", "--dev", "narrow.txt"], "narrow.txt:1: the development set has 2 columns, the training data 3"),
    (["-m", "o.model", "--stream-batch-tokens", "0"], "'--stream-batch-tokens': '0' is not an integer from 1"),
])
def test_bad_outputs_and_options_are_one_line(corpus, args, message):
    (corpus / "narrow.txt").write_text("w1 O\n\n")
    before = (corpus / "train.txt").read_bytes()
    out = train_cli(corpus, *args, *STREAM, "train.txt")
    assert message in error_line(out, 2 if "batch" in message else 1)
    assert not (corpus / "o.model").exists() and (corpus / "train.txt").read_bytes() == before


def test_an_input_directory_is_one_line(corpus):
    out = train_cli(corpus, "-m", "o.model", *STREAM, corpus)
    assert "cannot open for reading (Is a directory)" in error_line(out)


def test_latin1_with_encoding_and_crlf_train_the_in_memory_weights(corpus, tmp_path):
    text = (corpus / "train.txt").read_text().replace("w1 ", "w\u00e91 ").replace("\n", "\r\n")
    (tmp_path / "odd.txt").write_bytes(text.encode("latin-1"))
    weights = []
    for stream in ([], ["--stream"]):
        out = cli("train", "-t", corpus / "t.tmpl", "-m", f"m{len(stream)}", "--algorithm", "arow", "--max-iter", "2",
                  "--encoding", "latin-1", "-q", *stream, "odd.txt", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        model = Model.load(tmp_path / f"m{len(stream)}")
        assert "w\u00e91" in "".join(model.space.attribute_strings())
        weights.append(model.weights)
    np.testing.assert_array_equal(*weights)


class _Interrupting:
    """A log whose status line of the dictionary pass raises KeyboardInterrupt (as Ctrl-C there)."""

    def __call__(self, msg):
        pass

    def status(self, msg):
        if msg.startswith("dictionary pass: 3 batches"):
            raise KeyboardInterrupt


def test_an_interrupt_in_the_dictionary_pass_gives_no_model(corpus):
    with pytest.raises(KeyboardInterrupt):
        fit(iter_corpus([corpus / "train.txt"]), parse_template(TEMPLATE), log=_Interrupting(), algorithm="sgd",
            stream=True, stream_batch_tokens=50, keep_on_interrupt=True)


def test_sigterm_in_an_epoch_leaves_the_interrupt_save_whole(corpus, tmp_path):
    """SIGTERM after the first epoch: the model of the epochs done, whole (it loads, and says it
    was interrupted), and no other file beside it."""
    big = tmp_path / "big.txt"
    big.write_text((corpus / "train.txt").read_text() * 60)
    proc = subprocess.Popen([sys.executable, "-m", "crftk.cli", "train", "-t", corpus / "t.tmpl", "-m", "o.model",
                             "--algorithm", "sgd", "--max-iter", "1000", "--epsilon", "0", "--stream",
                             "--stream-batch-tokens", "200", big], cwd=tmp_path, env=CLI_ENV,
                            stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if line.startswith("epoch    1"):
            break
    proc.send_signal(signal.SIGTERM)
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130 and "Traceback" not in rest, rest
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.txt", "o.model"]
    model = Model.load(tmp_path / "o.model")
    assert model.info["interrupted"] is True and model.info["iterations"] >= 1


def test_several_files_are_several_batches_whatever_the_batch_size(corpus, tmp_path):
    """As README says: a batch ends with its file, so two files never train as one batch (the
    in-memory weights need one file); the dictionary is still the whole corpus's."""
    text = (corpus / "train.txt").read_text().split("\n\n")
    (tmp_path / "a.txt").write_text("\n\n".join(text[:100]) + "\n\n")
    (tmp_path / "b.txt").write_text("\n\n".join(text[100:]))
    files = [tmp_path / "a.txt", tmp_path / "b.txt"]
    options = dict(log=quiet, algorithm="perceptron", max_iter=2, threads=1)
    memory = fit(iter_corpus(files), parse_template(TEMPLATE), **options)
    streamed = fit(iter_corpus(files), parse_template(TEMPLATE), stream=True, stream_batch_tokens=10**9, **options)
    assert streamed.info["stream"]["batches"] == 2 and streamed.info["sentences"] == memory.info["sentences"]
    assert streamed.space.attribute_strings() == memory.space.attribute_strings()
