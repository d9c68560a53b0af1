"""crftk tag -v / -n on the compiled path (crftk._textio.format_scored_rows) writes byte for byte
what the pure-Python path (Tagger.write_batch) writes: one CRF of order 1 and 2, a model trained
in another chunk scheme, a bag; labelled and unlabelled input, one-token sentences, separators,
pass-through lines, batch boundaries and threads."""

import io
import math

import numpy as np
import pytest

import crftk
from corpora import random_corpus
from crftk import _textio
from crftk.commands.tag import tag_files
from crftk.errors import CrftkError
from crftk.io.conll import read_batches
from crftk.kinds import chain as tag_module

TEMPLATE = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,0]/%x[0,0]\nU3:%x[1,1]\nB\n"


def _xy(sents):
    return [[r[:2] for r in s.rows] for s in sents], [[r[2] for r in s.rows] for s in sents]


@pytest.fixture(scope="module")
def models():
    X, y = _xy(random_corpus(120, seed=11))
    fit = {"c2": 0.5, "max_iter": 15}
    return {
        "crf": crftk.CRF(TEMPLATE, **fit).fit(X, y).model_,
        "order 2": crftk.CRF(TEMPLATE, order=2, **fit).fit(X, y).model_,
        "iobes scheme": crftk.CRF(TEMPLATE, train_scheme="iobes", **fit).fit(X, y).model_,
        "bag": crftk.Bag([TEMPLATE, "U0:%x[0,0]\nU1:%x[-1,1]/%x[0,1]\nB\n"], **fit).fit(X, y).model_,
    }


def _text(sents, sep=" ", width=3):
    return "".join("\n".join(sep.join(r[:width]) for r in s.rows) + "\n\n" for s in sents).encode()


CASES = {
    "gold, spaces": _text(random_corpus(25, seed=2)),
    "no gold, tabs": _text(random_corpus(25, seed=3), sep="\t", width=2),
    "one-token sentences": _text(random_corpus(12, seed=4, max_len=1)),
    "pass-through lines": b"-DOCSTART- -X- O\n\nw1 A O\n# prob 0.5\nw2 B B-X\n\n# nbest 0 1\n\nw3 A O\n\n"
                          b"-DOCSTART- -X- O\nw4 C O\n",
    "crlf, no final line end": b"w1 A O\r\nw2 B O\r\n\r\nw3 C B-Y",
    "blank lines only": b"\n \n",
}

OPTIONS = [{"marginals": 1}, {"marginals": 2}, {"nbest": 1}, {"nbest": 3}, {"nbest": 10},
           {"nbest": 4, "marginals": 1}, {"nbest": 2, "marginals": 2}]


def _run(model, path, compiled, monkeypatch, **kw):
    """(output, counts or the error) of tag_files on the compiled or the Python path, and how many
    batches format_scored_rows wrote."""
    written = []
    with monkeypatch.context() as m:
        if compiled:
            scored = tag_module._scored_batch
            m.setattr(tag_module, "_scored_batch", lambda *a: written.append(1) or scored(*a))
        else:
            m.setattr(tag_module, "_compiled_path", lambda tagger: False)
        out = io.StringIO()
        try:
            return out.getvalue() if tag_files(model, [str(path)], out, **kw) else None, len(written)
        except CrftkError as e:
            return (e.message, e.path, e.line), len(written)


@pytest.mark.parametrize("kind", ["crf", "order 2", "iobes scheme", "bag"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_scored_output_is_the_python_paths(models, kind, case, tmp_path, monkeypatch):
    path = tmp_path / "in.txt"
    path.write_bytes(CASES[case])
    for opts in OPTIONS:
        want, _ = _run(models[kind], path, False, monkeypatch, **opts)
        assert isinstance(want, str), want
        for threads, batch in [(1, 50_000), (2, 3), (2, 1)]:
            got, written = _run(models[kind], path, True, monkeypatch, threads=threads, batch_tokens=batch, **opts)
            assert got == want, (opts, threads, batch)
            assert written >= (case != "blank lines only")       # the compiled path wrote them
        if case != "blank lines only":
            assert ("# nbest " if "nbest" in opts else "# prob ") in want


@pytest.mark.parametrize("combine,decode", [("seq-mixture", "max-marginal"), ("trans-poe", "chosen"),
                                            ("trans-mixture", "viterbi")])
def test_every_combination_of_a_bag_writes_the_python_paths(models, combine, decode, tmp_path, monkeypatch):
    path = tmp_path / "in.txt"
    path.write_bytes(CASES["gold, spaces"] + CASES["one-token sentences"])
    for opts in ({"marginals": 2}, {"nbest": 3, "marginals": 1}):
        kw = {"combine": combine, "decode": decode, **opts}
        want, _ = _run(models["bag"], path, False, monkeypatch, **kw)
        got, written = _run(models["bag"], path, True, monkeypatch, threads=2, batch_tokens=5, **kw)
        assert got == want and written > 1


def test_the_sequence_and_label_probabilities_are_the_models(models, tmp_path, monkeypatch):
    path = tmp_path / "in.txt"
    path.write_bytes(CASES["gold, spaces"])
    text, _ = _run(models["crf"], path, True, monkeypatch, marginals=2)
    blocks = [b for b in text.split("\n\n") if b]
    first = blocks[0].splitlines()
    assert first[0].startswith("# prob ") and 0 < float(first[0].split()[2]) <= 1
    for row in first[1:]:
        cells = row.split(" ")
        label, p = cells[3], float(cells[4])
        every = dict(c.rsplit("/", 1) for c in cells[5:])
        assert math.isclose(sum(map(float, every.values())), 1, abs_tol=5e-6)
        assert every[label] == cells[4] and p == max(map(float, every.values()))
    nbest, _ = _run(models["crf"], path, True, monkeypatch, nbest=3)
    probs = [float(line.split()[3]) for line in nbest.splitlines() if line.startswith("# nbest 0 ")]
    assert probs == [float(b.splitlines()[0].split()[2]) for b in blocks]


def test_an_memm_refuses_probabilities_as_before(tmp_path, monkeypatch):
    X, y = _xy(random_corpus(40, seed=5))
    memm = crftk.CRF(TEMPLATE, model_type="memm", max_iter=5).fit(X, y).model_
    path = tmp_path / "in.txt"
    path.write_bytes(CASES["gold, spaces"])
    for opts in ({"marginals": 1}, {"nbest": 2}):
        want = _run(memm, path, False, monkeypatch, **opts)[0]
        assert want == _run(memm, path, True, monkeypatch, **opts)[0]
        assert "MEMMs" in want[0]


VALUES = [0.0, -0.0, 1.0, 0.5, 1 / 128, 3 / 128, 0.0000005, 0.0000015, 0.9999995, 0.99999949999999, 1.9999996,
          1e-300, 5e-324, 2.0, 2.5, 123456.0000005, 1e300, -1e-17, -0.3, math.inf, -math.inf, math.nan, -math.nan,
          0.1234565, 0.7312345]


def test_numbers_are_written_as_python_formats_them(tmp_path):
    rng = np.random.default_rng(0)
    values = np.array(VALUES + rng.random(2000).tolist() + (rng.integers(0, 2_000_001, 2000) / 1e6).tolist()
                      + ((rng.integers(0, 2_000_000, 2000) + 0.5) / 1e6).tolist())
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(b"w%d\n" % i for i in range(values.size)))
    batch, = read_batches(str(path), n_columns=None)
    N = batch.n_tokens
    logs = np.log(np.abs(values[:1])) if values[0] else np.array([-np.inf])
    marg = values.reshape(N, 1)
    out = _textio.format_scored_rows(batch.block, batch.tok_start, batch.tok_end, batch.sent_ptr, batch.items,
                                     batch.pt_start, batch.pt_end, np.zeros((1, N), np.int32),
                                     np.ones(1, np.int32), logs.reshape(1, 1), marg, np.zeros((1, N), np.int32),
                                     True, ["L"], ["L"], b" ", False)
    lines = out.decode().splitlines()
    assert lines[0] == f"# prob {math.exp(logs[0]):.6f}"
    want = [f"w{i} L {x:.6f} L/{x:.6f}" for i, x in enumerate(values.tolist())]
    assert lines[1:-1] == want and lines[-1] == ""


def test_bad_arrays_are_refused_not_read(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"w1 A\nw2 B\n\n")
    batch, = read_batches(str(path), n_columns=None)
    args = dict(pred=np.zeros((1, 2), np.int32), n_blocks=np.ones(1, np.int32), logp=np.zeros((1, 1)),
                marg=np.zeros((2, 2)), col=np.zeros((1, 2), np.int32))
    bad = [("pred", np.full((1, 2), 5, np.int32)), ("n_blocks", np.full(1, 2, np.int32)),
           ("col", np.full((1, 2), 2, np.int32)), ("marg", np.zeros((1, 2))), ("logp", np.zeros((1, 2)))]
    for key, value in bad:
        a = {**args, key: value}
        with pytest.raises(ValueError, match="format_scored_rows"):
            _textio.format_scored_rows(batch.block, batch.tok_start, batch.tok_end, batch.sent_ptr, batch.items,
                                       batch.pt_start, batch.pt_end, a["pred"], a["n_blocks"], a["logp"], a["marg"],
                                       a["col"], False, ["X"], [], b" ", True)
