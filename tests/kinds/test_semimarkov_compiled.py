"""Semi-Markov tagging on the compiled path (crftk.io.stream batches, the segments encoded by
crftk.features.segments.RawSegments) against the Python path (Tagger.write_batch over Sentences):
the same segment rows for every S-line macro kind it reads, and the same output bytes at 1 and 2
threads, with batches cut anywhere, one-token sentences, no gold column, and -v / -n."""

import io
import random

import numpy as np
import pytest
from click.testing import CliRunner

from crftk.cli import main
from crftk.features.segments import raw_segments
from crftk.io.conll import read_batches
from crftk.kinds import chain, semimarkov
from crftk.model import Model

U_LINES = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]\nB\n"
S_LINES = {
    "joined": "S0:%seg[0]\nS1:%Seg[0]\nS2:%segshape[0]\nS3:%seg[1]\n",
    "tokens": "S0:%first[0]/%last[1]\nS1:%before[1,1]\nS2:%after[2,0]\nS3:%first[1]\n",
    "mixed": "S0:%len\nS1:%len/%first[1]\nS2:%seg[1]/%last[0]/%len\nS3:%Seg[0]/%before[1,0]\nS4:%len/%seg[1]/%after[1,1]/%first[0]\n",
}
WORDS = {"DT": ["the", "a", "The"], "JJ": ["big", "Red", "old-12"], "NN": ["dog", "cat", "U.S.", "car"],
         "VBZ": ["runs", "sees"], ".": ["."]}


def _sentence(rnd):
    rows = []

    def chunk(label, tags):
        for i, p in enumerate(tags):
            rows.append([rnd.choice(WORDS[p]), p, ("B-" if i == 0 else "I-") + label])

    if rnd.random() < 0.1:              # one-token sentences
        chunk("NP", ["NN"])
        return rows
    chunk("NP", ["DT"] + ["JJ"] * rnd.randint(0, 3) + ["NN"])
    chunk("VP", ["VBZ"])
    if rnd.random() < 0.5:
        chunk("NP", ["DT", "NN"])
    rows.append([".", ".", "O"])
    return rows


def _text(n, seed, columns=3):
    rnd = random.Random(seed)
    return "".join("".join(" ".join(r[:columns]) + "\n" for r in _sentence(rnd)) + "\n" for _ in range(n))


def _run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert r.exit_code == 0, r.output
    return r.output


@pytest.fixture(scope="module", params=sorted(S_LINES))
def case(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"semicompiled-{request.param}")
    (d / "t.tmpl").write_text(U_LINES + S_LINES[request.param])
    (d / "train.txt").write_text(_text(60, 1))
    (d / "test.txt").write_text(_text(50, 2) + _text(30, 3).replace("the", "unseen"))
    (d / "words.txt").write_text(_text(20, 4, columns=2))
    _run("train", "-q", "--model-type", "semimarkov", "-t", d / "t.tmpl", "--max-iter", "15", "--threads", "1",
         "-m", d / "m.model", d / "train.txt")
    return d, Model.load(str(d / "m.model"))


def test_its_segment_rows_are_those_of_the_sentences(case):
    d, model = case
    space = model.structure.segments
    raw = raw_segments(space)
    assert raw is not None
    for batch in read_batches(str(d / "test.txt"), batch_tokens=37):
        got = raw.encode(batch)
        want = space.encode([x for x in batch.entries() if not isinstance(x, str)])
        assert np.array_equal(got.seg_ptr, want.seg_ptr)
        assert np.array_equal(got.seg_attrs, want.seg_attrs)
        assert want.seg_attrs.size          # the case has attributes to compare


def _tagged(tagger, path, batch_tokens, **scores):
    out = io.StringIO()
    chain.tag_with(tagger, [str(path)], out, batch_tokens=batch_tokens, **scores)
    return out.getvalue()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("name", ["test.txt", "words.txt"])
@pytest.mark.parametrize("scores", [{}, {"marginals": 1}, {"marginals": 2}, {"nbest": 3}])
def test_the_compiled_path_writes_the_python_paths_bytes(case, threads, name, scores):
    d, model = case
    compiled = semimarkov.CompiledTagger(model, threads=threads)
    assert chain._compiled_path(compiled) and not chain._compiled_path(semimarkov.Tagger(model))
    want = _tagged(semimarkov.Tagger(model, threads=threads), d / name, 50_000, **scores)
    for batch_tokens in (1, 23, 50_000):
        assert _tagged(compiled, d / name, batch_tokens, **scores) == want


def test_the_cli_takes_the_compiled_path_for_what_it_reads(case):
    d, model = case
    assert isinstance(semimarkov.Job(model, "m.model", _options()).tagger, semimarkov.CompiledTagger)


def _options():
    return {"combine": None, "decode": None, "weights": None, "threads": 1, "marginals": 0, "nbest": 0,
            "force_col": None, "inference": None, "tolerance": None, "max_sweeps": None}


def test_its_string_cache_stays_bounded_and_changes_no_row(case, monkeypatch):
    d, model = case
    space = model.structure.segments
    raw = raw_segments(space)
    monkeypatch.setattr(raw, "CACHE_LIMIT", 5)
    batches = list(read_batches(str(d / "test.txt"), batch_tokens=37))
    for batch in batches + batches:
        got = raw.encode(batch)
        want = space.encode([x for x in batch.entries() if not isinstance(x, str)])
        assert np.array_equal(got.seg_attrs, want.seg_attrs)
        assert all(len(cache) <= max(5, len(set(t for s in batch.entries() if not isinstance(s, str)
                                                   for t in s.column(c))))
                   for c, cache in raw._cache.items())


@pytest.mark.parametrize("text", ["-DOCSTART- -X- O\n\n", "-DOCSTART- -X- O\n\n# prob 1\n\n", ""])
def test_a_file_without_sentences_passes_its_lines_through(case, tmp_path, text):
    """A batch of pass-through lines alone has no lattice to decode (it was a ValueError)."""
    d, model = case
    path = tmp_path / "nothing.txt"
    path.write_text(text)
    for threads in (1, 2):
        compiled = semimarkov.CompiledTagger(model, threads=threads)
        assert _tagged(compiled, path, 50_000) == _tagged(semimarkov.Tagger(model, threads=threads), path, 50_000)
