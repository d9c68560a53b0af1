"""The compiled beam of K-best joint and normalized pipeline decoding (crftk.structures.beam over
crftk._pipeline) gives the labels of the Python beam (Pipeline.decode): two- and three-stage
pipelines, links read at several offsets (K-best) and at offset 0 only (the fed-label tables),
several K, batch boundaries anywhere and one or two threads; and its n-best kernel gives
crftk._lattice's lists, ties included. Models have random weights over small real data."""

import io
import itertools

import numpy as np
import pytest

from corpora import REPO
from crftk import _pipeline as kernels
from crftk.commands import compose
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.io.conll import Layout, read_batches, read_corpus
from crftk.kinds.pipeline import Pipeline
from crftk.model import Model
from crftk.structures.chain import chain_lattices

UP = "U0:%x[0,0]\nU1:%x[-1,0]\nU2:%suf[0,0,2]\nB\n"
# a line before the fed ones (summed once), fed lines at several offsets, then static lines again
# (summed per hypothesis after them), a test of the fed column, and a transition line with macros
KBEST = ('U0:%x[0,0]\nUf:%x[-1,{c}]/%x[0,{c}]\nUw:%x[1,0]\nUg:%x[1,{c}]\nUt:%t[0,{c},"^N"]\n'
         'Uwf:%x[0,0]/%x[0,{c}]\nB\nB1:%x[0,0]\n')
EXACT = "U0:%x[0,0]\nU1:%x[0,{c}]\nUp:%x[0,{c}]/%x[-1,0]\nUs:%suf[0,0,1]/%x[0,{c}]\nB\n"


def _rows(s):
    # word POS chunk, and a fourth column for a third stage: the chunk's B/I/O
    return [r[:3] + [r[2][0]] for r in s.rows]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("beam")
    train = read_corpus(REPO / "data" / "demo.train")[:80]
    for s in train:
        s.rows = _rows(s)
    test = read_corpus(REPO / "data" / "demo.test")[:40]
    text = "".join("".join("\t".join(r) + "\n" for r in _rows(s)) + "\n" for s in test)
    (d / "in.txt").write_text(text)
    return train, d / "in.txt"


def _model(sents, text, label_col, seed, n_columns=None):
    rows = sents if n_columns is None else [type(s)([r[:n_columns] for r in s.rows], s.doc, s.line, s.source)
                                            for s in sents]
    space, _ = FeatureSpace.fit(rows, parse_template(text), label_col=label_col)
    w = np.random.default_rng(seed).normal(scale=0.8, size=space.n_params)
    return Model(space, np.round(w * 4) / 4)        # quarters: exact ties between labelings


def _pipeline(data, links):
    sents, _ = data
    models = [_model(sents, UP, 1, 1, 3)]
    for i, link in enumerate(links):
        text = (KBEST if link == "kbest" else EXACT).format(c=i + 1)
        models.append(_model(sents, text, i + 2, i + 2, None if i == len(links) - 1 else 3))
    return Pipeline.from_models(models, list(range(1, len(links) + 1)))


PIPELINES = [("kbest",), ("exact",), ("kbest", "exact"), ("exact", "kbest")]


@pytest.fixture(scope="module", params=PIPELINES, ids=["-".join(p) for p in PIPELINES])
def pipeline(request, data):
    return _pipeline(data, request.param)


def _batches(pipeline, path, batch_tokens):
    return list(read_batches(str(path), n_columns=pipeline.input_widths(), layout=Layout(),
                             batch_tokens=batch_tokens, max_sentence_tokens=100_000))


@pytest.mark.parametrize("mode", ["joint", "normalized"])
@pytest.mark.parametrize("K", [1, 2, 5, 20])
def test_the_compiled_beam_decodes_as_the_python_beam(pipeline, data, mode, K):
    _, path = data
    if mode == "joint" and pipeline.joint_mode() == "exact":
        assert not pipeline.raw_beam_decodable(mode)
        return
    assert pipeline.raw_beam_decodable(mode)
    sentences = read_corpus(path)
    expected = np.stack([np.concatenate(ids) for ids in pipeline.decode(sentences, mode, K)])
    for batch_tokens in (50_000, 30, 1):
        got = np.concatenate([pipeline.decode_raw(b, mode, K) for b in _batches(pipeline, path, batch_tokens)],
                             axis=1)
        np.testing.assert_array_equal(got, expected)


def _tag(pipeline, path, compiled, monkeypatch, **kw):
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(compose.Pipeline, "raw_beam_decodable", lambda self, mode: False)
        out = io.StringIO()
        counts = compose.tag_pipeline(pipeline, [str(path)], out, **kw)
    return out.getvalue(), counts[0], counts[1], counts[2][0].tolist(), counts[2][1]


@pytest.mark.parametrize("mode", ["joint", "normalized"])
def test_tag_writes_the_same_bytes_with_threads_and_batches(data, monkeypatch, mode):
    _, path = data
    pipeline = _pipeline(data, ("kbest", "exact"))
    python = _tag(pipeline, path, False, monkeypatch, decode=mode, nbest_upstream=4)
    for threads, batch in ((1, 50_000), (2, 17), (2, 200)):
        pipeline.n_threads = threads
        assert _tag(pipeline, path, True, monkeypatch, decode=mode, nbest_upstream=4, batch_tokens=batch) == python


def test_a_stage_the_beam_cannot_read_goes_the_python_way(data):
    sents, _ = data
    up = _model(sents, UP, 1, 1, 3)
    down = _model(sents, "U0:%x[0,0]\nUn:%ngram[-1,1,1,2]\nB\n", 2, 2, 3)      # a multi-valued test of it
    pipeline = Pipeline.from_models([up, down], [1])
    assert pipeline.joint_mode() == "nbest" and not pipeline.raw_beam_decodable("normalized")


def _brute_force(s, trans, T, L):
    scores = []
    for y in itertools.product(range(L), repeat=T):
        scores.append(sum(s[t, y[t]] for t in range(T)) + sum(trans[y[t - 1], y[t]] for t in range(1, T)))
    return sorted(scores, reverse=True)


@pytest.mark.parametrize("template", [UP, UP + "B1:%x[0,0]\n"], ids=["shared", "edges"])
@pytest.mark.parametrize("seed", range(4))
def test_the_pruned_nbest_gives_the_lattice_kernels_lists(data, seed, template):
    sents, _ = data
    model = _model(sents[:20], template, 1, seed, 3)
    space = model.space
    corpus = space.encode([type(s)([r[:3] for r in s.rows], s.doc, s.line, s.source) for s in sents[20:40]])
    kernel = kernels.Stage(model.weights, space.feat_ptr, space.feat_label, space.n_labels, space.n_edge_attrs,
                             space.layout().offsets(), corpus.sent_ptr, corpus.attr_ptr, corpus.attrs,
                             corpus.eattr_ptr, corpus.eattrs)
    lattices = chain_lattices(space, corpus)
    for k in (1, 2, 7, 30):
        got, want = kernel.nbest(k), lattices.nbest(model.weights, k)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    # the scores against every labeling, on sentences cut to 1..3 tokens
    short = space.encode([type(s)([r[:3] for r in s.rows[:1 + k % 3]], s.doc, s.line, s.source)
                          for k, s in enumerate(sents[20:30])])
    kernel = kernels.Stage(model.weights, space.feat_ptr, space.feat_label, space.n_labels, space.n_edge_attrs,
                           space.layout().offsets(), short.sent_ptr, short.attr_ptr, short.attrs,
                           short.eattr_ptr, short.eattrs)
    state = chain_lattices(space, short).state_matrix(model.weights)
    L = space.n_labels
    assert (space.n_edge_attrs > 0) == ("B1" in template)
    if space.n_edge_attrs:                  # the brute force reads the shared matrix only
        return
    trans = model.weights[space.layout().trans].reshape(L, L)
    _, scores, counts = kernel.nbest(5)
    for s in range(short.n_sentences):
        a, b = short.sent_ptr[s], short.sent_ptr[s + 1]
        want = _brute_force(state[a:b], trans, b - a, L)[:5]
        assert counts[s] == len(want)
        np.testing.assert_allclose(scores[s, :counts[s]], want, rtol=0, atol=1e-9)


# pair lines on both sides of the fed macro, the fed column alone, and a word seen with few tags
TABLE = "U0:%x[0,0]\nUc:%x[0,{c}]\nUp:%x[0,{c}]/%x[-1,0]\nUs:%suf[0,0,1]/%x[0,{c}]\nUq:%x[1,0]/%x[0,{c}]\nB\n"


@pytest.mark.parametrize("seed", range(3))
def test_the_compiled_fed_table_adds_the_rows_of_the_numpy_path(data, seed):
    from crftk.structures import joint
    sents, path = data
    up = _model(sents, UP, 1, 1, 3)
    space, _ = FeatureSpace.fit(sents, parse_template(TABLE.format(c=1)), label_col=2)
    # unrounded weights: a change in the order of the sums would show in the last bits
    down = Model(space, np.random.default_rng(seed).normal(size=space.n_params))
    labels = list(up.output_labels) + ["never-seen"]
    link = joint.FedLink(down, 1, labels)
    assert link.packed is not None
    test = read_corpus(path)
    values = space.extractor.values([type(s)([r[:4] for r in s.rows], s.doc, s.line, s.source) for s in test])
    got, _ = link.tables_of(values)
    link.packed = None                       # the line-by-line numpy path
    want, _ = link.tables_of(values)
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    # and each fed label's rows are the stage's state potentials on the rows holding that label
    rows = [[r[:4] for r in s.rows] for s in test]
    for j in (0, 3, len(labels) - 1):
        filled = [type(s)([r[:1] + [labels[j]] + r[2:] for r in rs], s.doc, s.line, s.source)
                  for s, rs in zip(test, rows)]
        state = chain_lattices(space, space.encode(filled)).state_matrix(down.weights)
        np.testing.assert_allclose(got[:, j], state, rtol=0, atol=1e-12)


@pytest.mark.parametrize("links", [("exact",), ("exact", "exact")])
@pytest.mark.parametrize("scores", [{"marginals": 1}] + [{"nbest": k} for k in (1, 2, 5)])
def test_scored_tagging_writes_the_python_paths_bytes(data, tmp_path, monkeypatch, links, scores):
    _, path = data
    pipeline = _pipeline(data, links)
    inputs = [path]
    if pipeline.optional_gold:          # and the input without the last stage's gold column
        text = path.read_text()
        cut = tmp_path / "cut.txt"
        cut.write_text("".join(
            "\t".join(line.split("\t")[:-1]) + "\n" if line else "\n" for line in text.split("\n")[:-1]))
        inputs.append(cut)
    for source in inputs:
        with monkeypatch.context() as m:
            m.setattr(compose.Pipeline, "raw_decodable", lambda self, mode: False)
            python = _tag(pipeline, source, True, monkeypatch, **scores)
        assert python[0].count("# nbest 0 " if "nbest" in scores else "# prob ") == 40
        for threads, batch in ((1, 50_000), (2, 23)):
            pipeline.n_threads = threads
            assert _tag(pipeline, source, True, monkeypatch, batch_tokens=batch, **scores) == python


@pytest.mark.parametrize("links", [("kbest",), ("exact",)])
@pytest.mark.parametrize("logz", [False, True])
def test_resumed_hypotheses_score_the_bits_of_a_full_pass(data, links, logz):
    # a scorer's later k = 1 calls resume its first one's passes (crftk._pipeline.Passes); a fresh
    # scorer's first call is a full pass: paths, scores and log Z must be the same bits
    from crftk.structures import beam
    _, path = data
    pipeline = _pipeline(data, links)
    stage, link = pipeline.stages[1], pipeline._beam_link(1)
    n_up = len(pipeline.stages[0].labels)
    batch = _batches(pipeline, path, 50_000)[0]

    def scorer():
        if isinstance(link, beam.FedLines):
            return link.scorer(batch)
        return beam._table_scorer(link, stage.model, batch, n_up * len(stage.labels))
    rng = np.random.default_rng(len(links[0]) + logz)
    N, S = batch.n_tokens, batch.n_sentences
    sent_ptr = batch.sent_ptr.astype(np.int64)
    first = rng.integers(0, n_up, N).astype(np.int32)
    resumed = scorer()
    active = np.ones(S, dtype=np.int32)
    want = scorer()(first, active, 1, logz)
    got = resumed(first, active, 1, logz)
    for a, b in zip(got, want):
        assert a.tobytes() == b.tobytes()
    for trial in range(12):
        fed = first.copy()
        for s in rng.choice(S, size=S // 2, replace=False):       # the others keep hypothesis 0
            lo, hi = sent_ptr[s], sent_ptr[s + 1]
            where = [lo, hi - 1, rng.integers(lo, hi)][trial % 3]   # first, last or any token
            fed[where] = (fed[where] + 1 + rng.integers(0, n_up - 1)) % n_up
            if trial > 6:
                fed[rng.integers(lo, hi)] = rng.integers(0, n_up)
        active = (rng.random(S) < 0.8).astype(np.int32)
        want = scorer()(fed, active, 1, logz)
        got = resumed(fed, active, 1, logz)
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()
