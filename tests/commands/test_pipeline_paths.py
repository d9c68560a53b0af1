"""Every macro kind of the template language, in an upstream and a downstream stage of a pipeline,
through every decoding mode (cascade, exact joint, K-best joint, normalized; -v, -n) and every path:
the compiled batch path (Pipeline.decode_raw; batches of several runs of sentences, one or two
threads), the Python batch path (tag_pipeline on sentences), each document decoded alone
(Pipeline.tag, tag_with_probabilities, tag_nbest) and the Python API (crftk.Pipeline.predict). The
outputs are compared byte for byte. Models have random weights over small real data: fast, and
every feature counts."""

import io

import numpy as np
import pytest

import crftk
from corpora import REPO
from crftk.commands import compose
from crftk.commands.compose import Pipeline
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.io.conll import read_corpus
from crftk.model import Model
from crftk.structures import joint

# one line (or a few) of each macro kind, reading column {c}
KINDS = {
    "x": "U{p}x:%x[-1,{c}]/%x[0,{c}]\n",
    "X": "U{p}X:%X[0,{c}]\n",
    "t T": 'U{p}t:%t[0,{c},"^[A-Z]"]/%T[1,{c},"S$"]\n',
    "m M": 'U{p}m:%m[0,{c},"[0-9]+"]\nU{p}M:%M[-1,{c},"^TH"]\n',
    "shape": "U{p}sh:%shape[0,{c}]\n",
    "fshape cshape": "U{p}fs:%fshape[0,{c}]/%cshape[1,{c}]\n",
    "pre suf": "U{p}ps:%pre[0,{c},2]/%suf[-1,{c},2]\n",
    "ngram": "U{p}ng:%ngram[0,{c},2,3]\n",
    "shape x ngram": "U{p}sn:%shape[0,{c}]/%ngram[1,{c},1,2]/%x[0,{c}]\n",
    "lexicon": "U{p}lx:%lex[0,names]/%x[0,{c}]\n",
    "first mention": "U{p}a:%^x[-1,0]\nU{p}ac:%^cshape[1,0]/%x[0,{c}]\n",
    "B with macros": "B{p}b:%x[0,{c}]\nB{p}bs:%shape[0,{c}]\n",
    "star": "*{p}st:%suf[0,{c},1]\n",
}
# the same kind reading the fed column (1) at offset 0 only, as exact joint decoding needs (a
# B line or a first mention reading it would not be exact: those read the words beside it)
FED = {
    "x": "Uf:%x[0,1]/%x[-1,0]\n",
    "X": "Uf:%X[0,1]\n",
    "t T": 'Uf:%t[0,1,"^N"]/%x[0,0]\nUf2:%T[0,1,"^v"]\n',
    "m M": 'Uf:%m[0,1,"^V.*"]\nUf2:%M[0,1,"^j"]/%x[1,0]\n',
    "shape": "Uf:%shape[0,1]\n",
    "fshape cshape": "Uf:%fshape[0,1]/%cshape[0,1]\n",
    "pre suf": "Uf:%pre[0,1,1]/%suf[0,1,1]\n",
    "ngram": "Uf:%ngram[0,1,1,2]/%x[1,0]\n",
    "shape x ngram": "Uf:%shape[0,1]/%ngram[0,1,1,2]\n",
    "lexicon": "Uf:%x[0,1]/%lex[0,names]\n",
    "first mention": "Uf:%x[0,1]/%^X[0,0]\n",
    "B with macros": "Uf:%x[0,1]\n",
    "star": "Uf:%x[0,1]/%suf[0,0,1]\n",
}
EVERYTHING = "everything"
UP_BASE = "U0:%x[0,0]\nB\n"
DOWN_BASE = "U0:%x[0,0]\nU1:%x[0,1]\nB\n"
INEXACT = "Uin:%x[-1,1]/%x[0,1]\n"      # the fed column at offset -1: K-best joint decoding
MARKER = "-DOCSTART- -X- O"


def head(path, n):
    return "\n\n".join(path.read_text().split("\n\n")[:n]) + "\n\n"


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("paths")
    (d / "train.txt").write_text(head(REPO / "data" / "demo.train", 60))
    (d / "names.txt").write_text("the\nof the\nMr.\nNew York\nmillion\n")
    test = read_corpus(REPO / "data" / "demo.test")[:12]
    for k, s in enumerate(test):
        s.doc = k // 4
    inputs = {}
    for gold in (True, False):
        text = ""
        for k, s in enumerate(test):
            if k % 4 == 0:
                text += MARKER + "\n\n"
            text += "".join("\t".join(r if gold else r[:-1]) + "\n" for r in s.rows) + "\n"
        inputs[gold] = d / f"in-{'gold' if gold else 'words-pos'}.txt"
        inputs[gold].write_text(text)
    return d, read_corpus(d / "train.txt"), inputs


def _template(d, kinds, c, fed=None):
    head = f"@lexicon names {d / 'names.txt'}\n"
    lines = [KINDS[k].format(p=f"{'u' if fed is None else 'd'}{i}", c=c) for i, k in enumerate(kinds)]
    if fed is not None:
        lines += [FED[k].replace("Uf", f"Uf{i}_").replace("*f", f"*f{i}_") for i, k in enumerate(kinds)]
    return head + (UP_BASE if fed is None else DOWN_BASE) + "".join(lines) + (fed or "")


def _model(sents, text, label_col, seed):
    space, _ = FeatureSpace.fit(sents, parse_template(text), label_col=label_col)
    return Model(space, np.random.default_rng(seed).normal(scale=0.7, size=space.n_params))


def _pipeline(data, kind, exact):
    d, sents, _ = data
    kinds = sorted(KINDS) if kind == EVERYTHING else [kind]
    up = _model(sents, _template(d, kinds, 0), 1, 1)
    down = _model(sents, _template(d, kinds, 0, fed="" if exact else INEXACT), 2, 2)
    return Pipeline.from_models([up, down], [1])


def _tag(pipeline, path, compiled, monkeypatch, **kw):
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(compose.Pipeline, "raw_decodable", lambda self, mode: False)
        out, logged = io.StringIO(), []
        n_sent, n_tok, (correct, scored) = compose.tag_pipeline(pipeline, [str(path)], out, log=logged.append,
                                                               nbest_upstream=3, **kw)
    return out.getvalue(), n_sent, n_tok, correct.tolist(), scored, logged


def _units(sentences):
    """The sentences in runs decoded alone: each document (first mentions look back through it)."""
    return [[s for s in sentences if s.doc == d] for d in sorted({s.doc for s in sentences})]


def _expected(pipeline, path, how):
    """The output tag_pipeline should write, from each run of sentences decoded alone."""
    sentences = read_corpus(path)
    out, seen = "", None
    for unit in _units(sentences):
        results = how(unit)
        for sent, result in zip(unit, results):
            if sent.doc != seen:
                out += MARKER + "\n\n"
                seen = sent.doc
            out += result(sent.rows)
    return out


def _plain(pipeline, decode):
    def how(unit):
        return [lambda rows, labels=labels: "".join("\t".join(r + list(x)) + "\n" for r, x in zip(rows, zip(*labels)))
                + "\n" for labels in pipeline.tag(unit, decode, 3)]
    return how


def _with_probabilities(pipeline):
    def how(unit):
        def one(prob, labels, probs):
            return lambda rows: f"# prob {prob:.6f}\n" + "".join(
                "\t".join(r + [v for c in range(len(labels)) for v in (labels[c][t], f"{probs[c][t]:.6f}")]) + "\n"
                for t, r in enumerate(rows)) + "\n"
        return [one(*x) for x in pipeline.tag_with_probabilities(unit)]
    return how


def _nbest(pipeline, k):
    def how(unit):
        def one(lists):
            return lambda rows: "".join(f"# nbest {r} {prob:.6f}\n" + "".join(
                "\t".join(row + list(x)) + "\n" for row, x in zip(rows, zip(*labels))) + "\n"
                for r, (prob, labels) in enumerate(lists))
        return [one(x) for x in pipeline.tag_nbest(unit, k)]
    return how


CASES = [(k, True) for k in sorted(KINDS)] + [(EVERYTHING, True), (EVERYTHING, False), ("shape", False),
                                             ("ngram", False), ("lexicon", False), ("first mention", False)]


@pytest.fixture(scope="module", params=CASES, ids=[f"{k}-{'exact' if e else 'kbest'}" for k, e in CASES])
def pipeline(request, data):
    kind, exact = request.param
    p = _pipeline(data, kind, exact)
    assert p.joint_mode() == ("exact" if exact else "nbest")
    return p


def _compiled_expected(pipeline, decode):
    kinds = {m.kind for s in pipeline.stages for m in s.space.template.macros}
    anchored = any(s.space.template.anchored for s in pipeline.stages)
    return "lex" not in kinds and not anchored and (decode == "cascade"
                                                    or decode == "joint" and pipeline.joint_mode() == "exact")


@pytest.mark.parametrize("decode", ["cascade", "joint", "normalized"])
@pytest.mark.parametrize("gold", [True, False])
def test_every_path_writes_the_same_labels(pipeline, data, monkeypatch, decode, gold):
    _, _, inputs = data
    path = inputs[gold]
    python = _tag(pipeline, path, False, monkeypatch, decode=decode)
    assert python[1] == 12 and (python[4] > 0) == gold
    assert python[0] == _expected(pipeline, path, _plain(pipeline, decode))
    assert pipeline.raw_decodable(decode) == _compiled_expected(pipeline, decode)
    for threads, batch in ((1, 50_000), (2, 7)):
        pipeline.n_threads = threads
        with monkeypatch.context() as m:
            m.setattr(joint, "MAX_JOINT_CELLS", 600)        # several runs of sentences per batch
            assert _tag(pipeline, path, True, monkeypatch, decode=decode, batch_tokens=batch) == python
    pipeline.n_threads = 1
    # the API, a document at a time (it takes no document numbers: first mentions would cross them)
    X, docs = crftk.read_conll(path, label_col=-1, docs=True)[::2] if gold else crftk.read_conll(path, docs=True)
    api = []
    for d in sorted(set(docs)):
        api += crftk.Pipeline._from_pipeline(pipeline, 1).predict([x for x, e in zip(X, docs) if e == d], decode=decode,
                                                nbest_upstream=3, stages=True)
    lines = [line.split("\t") for line in python[0].splitlines() if line and not line.startswith("-DOCSTART-")]
    assert [x for labels in api for x in zip(*labels)] == [tuple(r[-2:]) for r in lines]


@pytest.mark.parametrize("gold", [True, False])
def test_probabilities_and_nbest_lists(pipeline, data, monkeypatch, gold):
    _, _, inputs = data
    path = inputs[gold]
    if pipeline.joint_mode() != "exact":
        pytest.skip("-v and -n need exact joint decoding")
    with monkeypatch.context() as m:
        m.setattr(joint, "MAX_JOINT_CELLS", 600)
        probs = _tag(pipeline, path, True, monkeypatch, decode="joint", marginals=1, batch_tokens=7)
        nbest = _tag(pipeline, path, True, monkeypatch, decode="joint", nbest=2, batch_tokens=7)
    assert probs[0] == _expected(pipeline, path, _with_probabilities(pipeline))
    assert nbest[0] == _expected(pipeline, path, _nbest(pipeline, 2))
    plain = _tag(pipeline, path, True, monkeypatch, decode="joint")[0]
    best = [line.split("\t") for line in plain.splitlines() if line and not line.startswith("-DOCSTART-")]
    with_probs = [line.split("\t") for line in probs[0].splitlines() if line and line[0] not in "#-"]
    assert [r[-4::2] for r in with_probs] == [r[-2:] for r in best]
    first = [b for b in nbest[0].split("# nbest ")[1:] if b.startswith("0 ")]
    assert [line.split("\t")[-2:] for b in first for line in b.splitlines()[1:] if line] == [r[-2:] for r in best]
