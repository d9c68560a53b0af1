"""Every kind of model file crftk writes resolves to its kind module (crftk.kinds) and tags
through it: one chain CRF of order 1 and 2, an MEMM, an induced CRF, a bag, a pipeline and a
factorial CRF, each trained briefly on a slice of data/demo.train."""

import io

import pytest

import crftk
from corpora import REPO
from crftk.commands.induce import induce
from crftk.commands.tag import JOB_OPTIONS, TagJob
from crftk.kinds import KINDS, bag, chain, factorial, kind_of, pipeline
from crftk.model import KINDS as FILE_KINDS
from crftk.model import Model

WORDS = "U0:%x[0,0]\nU1:%x[-1,0]\nB\n"
CHUNK = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[-1,1]/%x[0,1]\nB\n"
ATOMIC = "U0:%x[0,0]\nU1:%x[0,1]\nB\n"
FAST = dict(max_iter=3, threads=1)
#: each file written, and the kind module it must resolve to
EXPECTED = {"chain": chain, "order2": chain, "memm": chain, "induced": chain, "bag": bag,
            "pipeline": pipeline, "factorial": factorial}


def demo(n, start=0):
    text = (REPO / "data" / "demo.train").read_text().split("\n\n")
    return [[line.split("\t") for line in s.splitlines()] for s in text[start:start + n] if s.strip()]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("registry")
    rows = demo(60)
    words = [[r[:1] for r in s] for s in rows]
    with_tags = [[r[:2] for r in s] for s in rows]
    tags, chunks = [[r[1] for r in s] for s in rows], [[r[2] for r in s] for s in rows]
    paths = {k: d / f"{k}.model" for k in EXPECTED}
    chunker = crftk.CRF(CHUNK, **FAST).fit(with_tags, chunks)
    chunker.save(paths["chain"])
    crftk.CRF(CHUNK, order=2, **FAST).fit(with_tags, chunks).save(paths["order2"])
    crftk.CRF(CHUNK, model_type="memm", **FAST).fit(with_tags, chunks).save(paths["memm"])
    train = d / "train.txt"
    train.write_text("".join("".join("\t".join(r) + "\n" for r in s) + "\n" for s in rows))
    (d / "atomic.tmpl").write_text(ATOMIC)
    induce([str(train)], str(d / "atomic.tmpl"), str(paths["induced"]), log=lambda msg: None, rounds=1,
           threads=1)
    crftk.Bag([CHUNK, WORDS], **FAST).fit(with_tags, chunks, with_tags[:20], chunks[:20]).save(paths["bag"])
    tagger = crftk.CRF(WORDS, **FAST).fit(words, tags)
    crftk.Pipeline.compose([tagger, chunker], 1).save(paths["pipeline"])
    crftk.FactorialCRF(WORDS, **FAST).fit(words, [tags, chunks]).save(paths["factorial"])
    text = d / "in.txt"
    text.write_text("".join("".join("\t".join(r) + "\n" for r in s) + "\n" for s in demo(8, start=100)))
    return paths, text


def test_the_registry_names_each_kind_of_file_once():
    assert set(KINDS) == set(FILE_KINDS)
    assert all(module.NAME == name for name, module in KINDS.items())


@pytest.mark.parametrize("which", list(EXPECTED))
def test_each_file_resolves_to_its_kind_and_tags_through_it(files, which):
    paths, text = files
    model = Model.load(paths[which])
    module = kind_of(model)
    assert module is EXPECTED[which]
    options = {name: None for name in JOB_OPTIONS} | {"marginals": 0, "nbest": 0, "threads": 1}
    job = module.Job(model, str(paths[which]), options)
    out = io.StringIO()
    n_sent, n_tok, _ = job.tag(out, [str(text)])
    rows = [line.split("\t") for line in out.getvalue().splitlines() if line]
    assert n_sent == 8 and len(rows) == n_tok
    added = {"pipeline": 2, "factorial": 2}.get(which, 1)
    assert {len(r) for r in rows} == {3 + added}
    # crftk tag's TagJob is that kind's job
    assert type(TagJob(model, str(paths[which]), **options).runtime) is module.Job
    info = module.summary(model, str(paths[which]))
    assert isinstance(info, dict) and info
    dumped = io.StringIO()
    module.dump(model, dumped)
    assert dumped.getvalue().startswith("# crftk ")
