"""crftk --encoding end to end: a Latin-1 corpus (made here: Spanish words with accents,
PER/LOC chunks) trains the same model as its UTF-8 copy, tags to Latin-1 output that is
byte for byte the UTF-8 run's output transcoded, and is scored by eval; without the option
it is a one-line decode error naming file and line; a bad codec is a usage error."""

import os
import random
import threading

import pytest
from click.testing import CliRunner

from crftk.cli import main

TEMPLATE = "U0:%x[0,0]\nU1:%x[-1,0]\nU2:%x[0,1]\nU3:%x[1,0]\nB\n"
NAMES = ["José", "María", "Núñez", "Begoña", "Íñigo", "Andrés"]
PLACES = ["Córdoba", "Málaga", "Cádiz", "Logroño", "Ávila"]
WORDS = ["el", "niño", "comió", "pingüino", "así", "también", "según", "dijo", "año", "está", "en", "de"]


def corpus_text(n_sentences=40, seed=0):
    rng = random.Random(seed)
    sents = []
    for _ in range(n_sentences):
        rows = []
        for _ in range(rng.randint(3, 8)):
            r = rng.random()
            if r < 0.2:
                rows.append((rng.choice(NAMES), "NP", "B-PER"))
                if rng.random() < 0.4:
                    rows.append((rng.choice(NAMES), "NP", "I-PER"))
            elif r < 0.35:
                rows.append((rng.choice(PLACES), "NP", "B-LOC"))
            else:
                rows.append((rng.choice(WORDS), "W", "O"))
        sents.append(rows)
    return "-DOCSTART- -X- O\n\n" + "".join("".join(" ".join(r) + "\n" for r in s) + "\n" for s in sents)


def crftk(*args, ok=True, input=None):
    try:
        runner = CliRunner(mix_stderr=False)     # click < 8.2
    except TypeError:
        runner = CliRunner()
    result = runner.invoke(main, [str(a) for a in args], input=input, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if ok:
        assert result.exit_code == 0, result.stderr
    return result


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("encoding")
    text = corpus_text()
    (d / "es.utf8").write_bytes(text.encode("utf-8"))
    (d / "es.latin1").write_bytes(text.encode("latin-1"))
    (d / "t.tmpl").write_text(TEMPLATE)
    (d / "w.tmpl").write_text("U0:%x[0,0]\nU1:%x[-1,0]\nB\n")      # words only: for label columns 1 and 2
    common = ["-t", d / "t.tmpl", "--max-iter", 15, "-p", 1, "-q"]
    crftk("train", *common, "-m", d / "utf8.model", d / "es.utf8")
    crftk("train", *common, "-m", d / "latin1.model", "--encoding", "latin-1", "--dev", d / "es.latin1",
          d / "es.latin1")
    crftk("train", *common, "-m", d / "utf8-dev.model", "--dev", d / "es.utf8", d / "es.utf8")
    return d


def test_a_latin1_corpus_trains_the_model_of_its_utf8_copy(data):
    dumps = [crftk("dump", data / m).stdout for m in ("utf8.model", "latin1.model", "utf8-dev.model")]
    assert "Núñez" in dumps[0]
    assert dumps[1] == dumps[2]          # --dev read in Latin-1 too: the same iterations kept
    assert dumps[1] == crftk("dump", data / "latin1.model").stdout


@pytest.mark.parametrize("flags", [[], ["-v"], ["-n", "2"]], ids=["compiled", "marginals", "nbest"])
def test_tag_writes_latin1_output_identical_to_the_utf8_run(data, flags, monkeypatch):
    import crftk.kinds.chain as tag_module
    paths = []
    compiled = tag_module._tag_compiled
    monkeypatch.setattr(tag_module, "_tag_compiled", lambda *a: paths.append("compiled") or compiled(*a))
    utf8 = crftk("tag", "-m", data / "utf8-dev.model", *flags, data / "es.utf8").stdout_bytes
    latin1 = crftk("tag", "-m", data / "latin1.model", "--encoding", "latin-1", *flags, data / "es.latin1").stdout_bytes
    assert paths == ["compiled", "compiled"]         # -v and -n too (issue 38)
    assert "Córdoba".encode("latin-1") in latin1 and "Córdoba".encode("utf-8") not in latin1
    assert latin1.decode("latin-1") == utf8.decode("utf-8")
    out = data / f"out{len(flags)}"
    crftk("tag", "-m", data / "latin1.model", "--encoding", "latin1", *flags, "-o", out, data / "es.latin1")
    assert out.read_bytes() == latin1
    stdin = crftk("tag", "-m", data / "latin1.model", "--encoding", "latin-1", *flags, "-",
                  input=(data / "es.latin1").read_bytes())
    assert stdin.stdout_bytes == latin1


def test_eval_reads_tagged_latin1(data):
    tagged = data / "tagged.latin1"
    crftk("tag", "-m", data / "latin1.model", "--encoding", "latin-1", "-o", tagged, data / "es.latin1")
    crftk("tag", "-m", data / "utf8-dev.model", "-o", data / "tagged.utf8", data / "es.utf8")
    want = crftk("eval", "--json", data / "tagged.utf8").stdout
    assert crftk("eval", "--json", "--encoding", "latin-1", tagged).stdout == want
    r = crftk("eval", tagged, ok=False)
    assert r.exit_code == 1 and r.stderr.startswith(f"crftk: error: {tagged}:3: not valid UTF-8")


@pytest.mark.parametrize("command", ["train", "tag", "eval", "bag", "induce", "lexicon"])
def test_latin1_without_the_option_is_one_line_with_file_and_line(data, command, tmp_path):
    latin1 = data / "es.latin1"
    args = {"train": ["-t", data / "t.tmpl", "-m", tmp_path / "m"],
            "tag": ["-m", data / "utf8.model"],
            "eval": [],
            "bag": ["-t", data / "t.tmpl", "-t", data / "t.tmpl", "-m", tmp_path / "m"],
            "induce": ["-t", data / "t.tmpl", "-m", tmp_path / "m"],
            "lexicon": ["-o", tmp_path]}[command]
    r = crftk(command, *args, latin1, ok=False)
    assert r.exit_code == 1
    assert r.stderr.startswith(f"crftk: error: {latin1}:3: not valid UTF-8 (byte ")
    assert "--encoding" in r.stderr and r.stderr.count("\n") == 1
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("command", ["train", "tag", "eval", "bag", "induce", "lexicon"])
@pytest.mark.parametrize("name, says", [("latin-9x", "unknown encoding 'latin-9x'"),
                                        ("utf-16", "the encoding 'utf-16' is not supported")])
def test_a_bad_encoding_is_a_usage_error(command, name, says):
    r = crftk(command, "--encoding", name, "x", ok=False)
    assert r.exit_code == 2
    assert r.stderr.startswith(f"crftk: error: invalid value for '--encoding': {says}")
    assert r.stderr.count("\n") == 1


def test_a_label_the_output_encoding_cannot_write(data, tmp_path):
    (tmp_path / "euro").write_text((data / "es.utf8").read_text().replace(" O\n", " €\n"))   # the usual label
    crftk("train", "-t", data / "t.tmpl", "-m", tmp_path / "m", "--max-iter", 3, "-p", 1, "-q", tmp_path / "euro")
    out = tmp_path / "out"
    r = crftk("tag", "-m", tmp_path / "m", "--encoding", "latin-1", "-o", out, data / "es.latin1", ok=False)
    assert r.exit_code == 1
    assert r.stderr == f"crftk: error: {out}: cannot write '€' in iso8859-1, the output's encoding\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["euro", "m"]
    assert crftk("tag", "-m", tmp_path / "m", "--encoding", "cp1252", data / "es.latin1").exit_code == 0


def test_cross_prediction_output_follows_the_encoding(data, tmp_path):
    out = tmp_path / "cross"
    crftk("train", "-t", data / "t.tmpl", "-m", tmp_path / "m", "--max-iter", 3, "-p", 1, "-q",
          "--encoding", "latin-1", "--cross-predict", 2, "--cross-output", out, data / "es.latin1")
    text = out.read_bytes().decode("latin-1")       # Latin-1, as its input
    assert "Córdoba" in text and text.count("\n") == (data / "es.utf8").read_text().count("\n")


def test_lexicons_are_utf8_whatever_the_input_encoding(data, tmp_path):
    crftk("lexicon", "-o", tmp_path, "--encoding", "latin-1", data / "es.latin1")
    assert "Logroño" in (tmp_path / "LOC.lex").read_bytes().decode("utf-8")


def test_a_lexicon_file_stays_utf8_under_another_encoding(data, tmp_path):
    """Templates and the lexicons they name are UTF-8 whatever --encoding says: a Latin-1
    gazetteer is an error at its first non-ASCII line, not a lexicon that silently never matches."""
    (tmp_path / "places.lex").write_bytes("Cádiz\nLogroño\n".encode("latin-1"))
    (tmp_path / "lex.tmpl").write_text(f"@lexicon places {tmp_path / 'places.lex'}\nU0:%x[0,0]\nU1:%lex[0,places]\nB\n")
    r = crftk("train", "-t", tmp_path / "lex.tmpl", "-m", tmp_path / "m", "--encoding", "latin-1", "--max-iter", 3,
              data / "es.latin1", ok=False)
    assert r.exit_code == 1 and r.stderr.count("\n") == 1
    assert r.stderr.startswith(f"crftk: error: {tmp_path / 'places.lex'}:1: not valid UTF-8 (byte 2 of the line): "
                               "lexicon files are UTF-8")
    (tmp_path / "places.lex").write_bytes("Cádiz\nLogroño\n".encode("utf-8"))
    crftk("train", "-t", tmp_path / "lex.tmpl", "-m", tmp_path / "m", "--encoding", "latin-1", "--max-iter", 3,
          "-q", "-p", 1, data / "es.latin1")


def test_help_describes_the_option():
    for command in ("train", "tag", "eval", "bag", "induce", "lexicon"):
        text = crftk(command, "--help").stdout
        assert "--encoding NAME" in text and "latin-1" in text and "[default: utf-8]" in text, command
    assert "--encoding" not in crftk("compose", "--help").stdout      # reads models only


@pytest.mark.parametrize("flags", [[], ["--decode", "cascade"], ["-v"]])
def test_pipelines_tag_latin1(data, flags, tmp_path):
    """tag_pipeline's own paths (the compiled one, and the Python one of -v)."""
    crftk("train", "-t", data / "w.tmpl", "-m", tmp_path / "pos", "--label-col", 1, "--max-iter", 5, "-p", 1, "-q",
          "--encoding", "latin-1", data / "es.latin1")
    crftk("compose", "-m", tmp_path / "pos", "-m", data / "latin1.model", "--feed", 1, "-o", tmp_path / "p")
    utf8 = crftk("tag", "-m", tmp_path / "p", *flags, data / "es.utf8").stdout_bytes
    latin1 = crftk("tag", "-m", tmp_path / "p", "--encoding", "latin-1", *flags, data / "es.latin1").stdout_bytes
    assert latin1.decode("latin-1") == utf8.decode("utf-8") and "Ávila".encode("latin-1") in latin1


def test_factorial_crfs_train_and_tag_latin1(data, tmp_path):
    common = ["-t", data / "w.tmpl", "--label-col", 1, "--label-col", 2, "--max-iter", 5, "-p", 1, "-q"]
    crftk("train", *common, "-m", tmp_path / "u", data / "es.utf8")
    crftk("train", *common, "-m", tmp_path / "l", "--encoding", "latin-1", data / "es.latin1")
    assert crftk("dump", tmp_path / "u").stdout == crftk("dump", tmp_path / "l").stdout
    utf8 = crftk("tag", "-m", tmp_path / "u", data / "es.utf8").stdout_bytes
    latin1 = crftk("tag", "-m", tmp_path / "l", "--encoding", "latin-1", data / "es.latin1").stdout_bytes
    assert latin1.decode("latin-1") == utf8.decode("utf-8") and "Ávila".encode("latin-1") in latin1


@pytest.mark.parametrize("flags", [[], ["-v"]], ids=["compiled", "marginals"])
def test_tag_to_a_directory_writes_each_output_in_the_encoding(data, flags, tmp_path):
    """tag -o DIR without Dask (one output per input, crftk.io.atomic.AtomicFiles)."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.write_bytes((data / "es.latin1").read_bytes())
    two.write_bytes(corpus_text(10, seed=1).encode("latin-1"))
    out = tmp_path / "out"
    out.mkdir()
    crftk("tag", "-m", data / "latin1.model", "--encoding", "latin-1", *flags, "-o", out, one, two)
    for path in (one, two):
        want = crftk("tag", "-m", data / "latin1.model", "--encoding", "latin-1", *flags, path).stdout_bytes
        assert (out / path.name).read_bytes() == want and "ñ".encode("latin-1") in want


def test_a_label_the_encoding_cannot_write_leaves_no_output_in_the_directory(data, tmp_path):
    (tmp_path / "euro").write_text((data / "es.utf8").read_text().replace(" O\n", " €\n"))
    crftk("train", "-t", data / "t.tmpl", "-m", tmp_path / "m", "--max-iter", 3, "-p", 1, "-q", tmp_path / "euro")
    out = tmp_path / "out"
    out.mkdir()
    r = crftk("tag", "-m", tmp_path / "m", "--encoding", "latin-1", "-o", out, data / "es.latin1", ok=False)
    assert r.exit_code == 1
    assert r.stderr == f"crftk: error: {out / 'es.latin1'}: cannot write '€' in iso8859-1, the output's encoding\n"
    assert list(out.iterdir()) == []


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_output_is_written_in_the_encoding(data, tmp_path):
    """An output written directly (crftk.io.outputs: a FIFO, never replaced) follows --encoding too."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    crftk("tag", "-m", data / "latin1.model", "--encoding", "latin-1", "-o", fifo, data / "es.latin1")
    reader.join(30)
    want = crftk("tag", "-m", data / "latin1.model", "--encoding", "latin-1", data / "es.latin1").stdout_bytes
    assert got == [want] and "Córdoba".encode("latin-1") in want
