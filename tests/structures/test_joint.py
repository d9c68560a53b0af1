"""Joint decoding of composed models (crftk.structures.joint, Pipeline) against enumeration of
the cross product of the stages' labelings, scored stage by stage from re-encoded sentences,
and against the plain chain kernel on the explicit cross-product lattice."""

import itertools
import math
import random

import numpy as np
import pytest

from corpora import sentences
from crftk import _chain
from crftk.commands.compose import Pipeline
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.model import Model
from crftk.structures import joint
from crftk.structures.chain import chain_lattices

# stage 0 tags column 1 from the words; stage 1 labels column 2 from the words and the fed
# column 1 (offset 0 only: alone, through a test, in conjunctions of two macros either way round,
# of three, with a multi-valued test and through a test), with a transition line that does not
# read the fed column; stage 2 labels column 3 from the fed column 2
TEMPLATES = [
    "U0:%x[0,0]\nU1:%x[-1,0]\nU2:%suf[0,0,1]\nB\n",
    "U0:%x[0,0]\nU1:%x[0,1]\nU2:%x[0,0]/%x[0,1]\nU3:%X[0,1]\nU4:%x[1,0]\nU5:%ngram[0,0,1,2]/%x[0,1]\nU6:%x[0,1]/%x[1,0]\n"
    "U7:%x[0,0]/%x[0,1]/%x[-1,0]\nU8:%X[0,1]/%x[0,0]\nB\nB5:%x[-1,0]\n",
    "U0:%x[0,0]\nU1:%x[0,2]\nU2:%x[-1,0]/%x[0,2]\nB\n",
]
LABEL_COLS = [1, 2, 3]


def corpus(n, seed=0, max_len=4):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rows = []
        for _ in range(rng.randint(1, max_len)):
            w = f"w{rng.randrange(6)}"
            tag = rng.choice("ABC")
            lab = rng.choice(["B-X", "I-X", "O"])
            rows.append([w, tag, lab, rng.choice(["p", "q"]) + lab[0]])
        out.append(rows)
    return sentences(out)


def random_model(sents, stage, seed):
    """A model on the stage's template with random weights (every parameter, transitions and
    edge blocks included)."""
    space, _ = FeatureSpace.fit(sents, parse_template(TEMPLATES[stage]), label_col=LABEL_COLS[stage],
                                feature_set="complete")
    rng = np.random.default_rng(seed)
    return Model(space, rng.normal(scale=1.0, size=space.n_params), {"order": 1, "model_type": "crf"})


def pipeline(n_stages, seed=0):
    train = corpus(40, seed)
    models = [random_model(train, i, seed + i) for i in range(n_stages)]
    return Pipeline.from_models(models, LABEL_COLS[:n_stages - 1])


def score(model, rows, labels):
    """Score of one labeling of one sentence by one model, through its own encoding."""
    corp = model.space.encode(sentences([rows]))
    ids = np.array([model.space.label_index[x] for x in labels], dtype=np.int32)
    return float(chain_lattices(model.space, corp).sequence_scores(model.weights, ids)[0])


def enumerate_joint(pipe, sent):
    """{(labeling of each stage, as tuples of label ids): summed score} over the cross product."""
    out, cache = {}, {}
    stages = pipe.stages
    names = [s.labels for s in stages]
    T = len(sent)
    for ys in itertools.product(*[list(itertools.product(range(len(n)), repeat=T)) for n in names]):
        total = 0.0
        for i, (stage, y) in enumerate(zip(stages, ys)):
            key = (i, None if i == 0 else ys[i - 1], y)      # a stage sees only its own and the fed labels
            if key not in cache:
                fed = None if i == 0 else [names[i - 1][v] for v in ys[i - 1]]
                cache[key] = score(stage.model, stage.rows(sent, fed).rows, [names[i][v] for v in y])
            total += cache[key]
        out[ys] = total
    return out


def logsumexp(x):
    x = np.asarray(list(x))
    m = x.max()
    return m + np.log(np.exp(x - m).sum())


@pytest.mark.parametrize("n_stages", [2, 3])
def test_joint_viterbi_log_z_and_marginals_equal_enumeration(n_stages):
    pipe = pipeline(n_stages, seed=3)
    test = [s for s in corpus(12, seed=7, max_len=3 if n_stages == 2 else 2)]
    best = pipe.decode(test, "joint")
    marg, logz = pipe.joint_marginals(test)
    assert pipe.joint_mode() == "exact"
    for k, sent in enumerate(test):
        table = enumerate_joint(pipe, sent)
        top = max(table, key=table.get)
        assert [tuple(best[c][k].tolist()) for c in range(n_stages)] == list(top)
        assert logz[k] == pytest.approx(logsumexp(table.values()), abs=1e-9)
        for c, stage in enumerate(pipe.stages):
            expect = np.zeros((len(sent), len(stage.labels)))
            for ys, v in table.items():
                expect[np.arange(len(sent)), list(ys[c])] += np.exp(v - logz[k])
            np.testing.assert_allclose(marg[c][k], expect, atol=1e-10)


def test_factorized_recursion_equals_the_explicit_cross_product_lattice():
    pipe = pipeline(2, seed=11)
    test = corpus(10, seed=5, max_len=6)
    sizes, sp, state0, links, trans = pipe.joint_tables(test)
    state = joint.product_state(state0, links)
    S = int(np.prod(sizes))
    assert trans[1].ndim == 3          # the downstream stage's transition line fires
    # the explicit S x S matrix into every token: the sum of the stages' transitions
    N = state.shape[0]
    big = np.zeros((N, S, S))
    for t in range(N):
        m = [tr if tr.ndim == 2 else tr[t] for tr in trans]
        big[t] = (m[0][:, None, :, None] + m[1][None, :, None, :]).reshape(S, S)
    ref_logz, ref_node, _ = _chain.forward_backward(sp, state, big)
    ref_best, ref_score = _chain.viterbi(sp, state, big)
    labels, scores = joint.product_viterbi(sizes, sp, state, trans)
    np.testing.assert_array_equal(np.ravel_multi_index(tuple(labels), sizes), ref_best)
    np.testing.assert_allclose(scores, ref_score, rtol=1e-12)
    marg, logz = joint.product_marginals(sizes, sp, state, trans)
    np.testing.assert_allclose(logz, ref_logz, rtol=1e-12)
    full = ref_node.reshape(N, *sizes.tolist())
    np.testing.assert_allclose(marg[0], full.sum(axis=2), atol=1e-12)
    np.testing.assert_allclose(marg[1], full.sum(axis=1), atol=1e-12)


@pytest.mark.parametrize("n_stages, path", [(2, "tables"), (3, "tables"), (2, "encode"), (3, "encode")])
def test_kbest_upstream_with_every_labeling_equals_exact(n_stages, path):
    pipe = pipeline(n_stages, seed=21)
    if path == "encode":
        reencoding(pipe)
    test = corpus(15, seed=9, max_len=3 if n_stages == 2 else 2)
    exact = pipe._joint_exact(test)
    K = max(len(s.labels) for s in pipe.stages[:-1]) ** max(len(s) for s in test)
    kbest = pipe._joint_nbest(test, K)
    for c in range(n_stages):
        for a, b in zip(exact[c], kbest[c]):
            np.testing.assert_array_equal(a, b)
    # with one upstream labeling it is the cascade, which here differs from the joint answer
    cascade = pipe.decode(test, "cascade")
    one = pipe._joint_nbest(test, 1)
    assert all((a == b).all() for c in range(n_stages) for a, b in zip(cascade[c], one[c]))
    assert any((a != b).any() for c in range(n_stages) for a, b in zip(cascade[c], exact[c]))


def test_joint_groups_split_batches_without_changing_the_answer(monkeypatch):
    pipe = pipeline(2, seed=4)
    test = corpus(30, seed=2, max_len=5)
    whole = [pipe.decode(test, mode, 4) for mode in ("joint", "normalized")]
    monkeypatch.setattr(joint, "MAX_JOINT_CELLS", 20)      # a few sentences per group
    assert len(joint.sentence_groups(np.concatenate([[0], np.cumsum([len(s) for s in test])]), 9)) > 5
    split = [pipe.decode(test, mode, 4) for mode in ("joint", "normalized")]
    for m in range(2):
        for c in range(2):
            for a, b in zip(whole[m][c], split[m][c]):
                np.testing.assert_array_equal(a, b)


def test_exact_link_says_why_not():
    t = parse_template("U0:%x[0,1]\nU1:%x[-1,1]/%x[0,0]\nU2:%x[2,1]\nB\n")
    assert "offsets -1, 2" in joint.exact_link(t, 1)
    assert joint.exact_link(parse_template("U0:%x[0,1]/%x[-1,0]\nU1:%X[0,1]\nB\n"), 1) is None
    assert "transition line" in joint.exact_link(parse_template("U0:%x[0,1]\nB1:%x[0,1]\n"), 1)
    assert "first-mention" in joint.exact_link(parse_template("U0:%^x[0,1]\n"), 1)


def test_product_viterbi_with_ties_returns_a_path_of_the_best_score():
    # integer potentials: many labelings share the best score; the path traced back must be one
    rng = np.random.default_rng(5)
    sizes = np.array([3, 4, 2], dtype=np.int32)
    lengths = [1, 2, 5, 7]
    sp = np.concatenate([[0], np.cumsum(lengths)])
    N, S = int(sp[-1]), int(np.prod(sizes))
    state = rng.integers(-2, 2, size=(N, S)).astype(float)
    trans = [rng.integers(-1, 2, size=(n, n)).astype(float) for n in sizes]
    labels, scores = joint.product_viterbi(sizes, sp, state, trans)
    big = np.zeros((S, S))
    for a in range(S):
        for b in range(S):
            ya, yb = np.unravel_index(a, sizes), np.unravel_index(b, sizes)
            big[a, b] = sum(trans[c][ya[c], yb[c]] for c in range(3))
    _, ref = _chain.viterbi(sp, state, big)
    np.testing.assert_array_equal(scores, ref)
    joint_labels = np.ravel_multi_index(tuple(labels), sizes)
    for s in range(len(lengths)):
        y = joint_labels[sp[s]:sp[s + 1]]
        total = state[np.arange(sp[s], sp[s + 1]), y].sum() + sum(big[y[t - 1], y[t]] for t in range(1, len(y)))
        assert total == scores[s]


@pytest.mark.parametrize("sizes, shared", [([3, 2], True), ([2, 3, 2], False), ([4], True)])
def test_product_nbest_equals_the_best_of_the_enumeration(sizes, shared):
    from crftk import _product
    rng = np.random.default_rng(len(sizes))
    sizes = np.array(sizes, dtype=np.int32)
    lengths = [1, 2, 3, 3]
    sp = np.concatenate([[0], np.cumsum(lengths)])
    N, S = int(sp[-1]), int(np.prod(sizes))
    state = rng.normal(size=(N, S))
    trans = [rng.normal(size=(n, n) if shared else (N, n, n)) for n in sizes]
    K = 7
    paths, scores, counts = _product.nbest(sizes, sp, state, trans, K)
    for s in range(len(lengths)):
        t0, T = sp[s], lengths[s]
        table = []
        for y in itertools.product(range(S), repeat=T):
            v = sum(state[t0 + t, y[t]] for t in range(T))
            for t in range(1, T):
                a, b = np.unravel_index(y[t - 1], sizes), np.unravel_index(y[t], sizes)
                v += sum((m if m.ndim == 2 else m[t0 + t])[a[c], b[c]] for c, m in enumerate(trans))
            table.append((v, y))
        table.sort(key=lambda x: -x[0])
        assert counts[s] == min(K, S ** T)
        for k in range(counts[s]):
            assert scores[s, k] == pytest.approx(table[k][0], abs=1e-10)
            assert tuple(paths[k, t0:t0 + T].tolist()) == table[k][1]
    # the first is the Viterbi labeling
    best, score = _product.viterbi(sizes, sp, state, trans)
    np.testing.assert_array_equal(paths[0], best)
    np.testing.assert_allclose(scores[:, 0], score, rtol=1e-12)


def enumerate_normalized(pipe, sent):
    """{(labeling of each stage): sum over stages of log p_i(y_i | y_{i-1}, x)}, every stage's
    log Z given its fed labels summed over all of its labelings by enumeration."""
    table = enumerate_joint(pipe, sent)
    stages = pipe.stages
    T = len(sent)
    logz = {}
    for i, stage in enumerate(stages):
        for ys, _ in table.items():
            fed = None if i == 0 else ys[i - 1]
            if (i, fed) in logz:
                continue
            names = stage.labels
            rows = stage.rows(sent, None if fed is None else [stages[i - 1].labels[v] for v in fed]).rows
            logz[i, fed] = logsumexp(score(stage.model, rows, [names[v] for v in y])
                                     for y in itertools.product(range(len(names)), repeat=T))
    out = {}
    for ys, total in table.items():
        out[ys] = total - sum(logz[i, None if i == 0 else ys[i - 1]] for i in range(len(stages)))
    return table, out


def reencoding(pipe):
    """The pipeline with every link taken as not exact: K-best rescoring then encodes each stage's
    sentences once per upstream hypothesis instead of reading the fed-label tables."""
    pipe._links = ["taken as not exact by the test"] * (len(pipe.stages) - 1)
    return pipe


@pytest.mark.parametrize("n_stages, path", [(2, "tables"), (3, "tables"), (2, "encode"), (3, "encode")])
def test_normalized_with_every_labeling_maximizes_the_sum_of_log_probabilities(n_stages, path):
    pipe = pipeline(n_stages, seed=13)
    if path == "encode":
        reencoding(pipe)
    test = corpus(12, seed=17, max_len=3 if n_stages == 2 else 2)
    T = max(len(s) for s in test)
    K = math.prod(len(s.labels) ** T for s in pipe.stages[:-1])     # every upstream partial labeling
    got = pipe.decode(test, "normalized", K)
    differs = False
    for k, sent in enumerate(test):
        eq7, table = enumerate_normalized(pipe, sent)
        top = max(table, key=table.get)
        assert [tuple(got[c][k].tolist()) for c in range(n_stages)] == list(top)
        differs |= top != max(eq7, key=eq7.get)
    assert differs          # the objective is not eq. 7's: the enumeration tells them apart
    # with one upstream labeling it is the cascade
    cascade = pipe.decode(test, "cascade")
    one = pipe.decode(test, "normalized", 1)
    assert all((a == b).all() for c in range(n_stages) for a, b in zip(cascade[c], one[c]))


# a downstream stage with first-mention tests of the words (capitalized words repeat across the
# sentences of one document), reading the fed column at offset 0 only: joint decoding is exact
ANCHORED = "U0:%x[0,0]\nU1:%x[0,1]\nU2:%^x[-1,0]\nU3:%^x[1,0]/%x[0,1]\nU4:%^X[0,0]\nB\n"


def anchored_pipeline(n_sentences=40, docs_of=lambda i: 0):
    """(a pipeline whose downstream template is ANCHORED, its training sentences: capitalized words
    repeat across the sentences of a document, sentence i in document docs_of(i))."""
    rng = random.Random(4)
    rows = [[[rng.choice(["Aa", "Bb", "Cc", "dd"]), rng.choice("ABC"), rng.choice(["B-X", "I-X", "O"])]
             for _ in range(rng.randint(1, 3))] for _ in range(n_sentences)]
    train = sentences(rows)
    for i, sent in enumerate(train):
        sent.doc = docs_of(i)
    up = random_model(train, 0, 31)
    space, _ = FeatureSpace.fit(train, parse_template(ANCHORED), label_col=2, feature_set="complete")
    down = Model(space, np.random.default_rng(32).normal(size=space.n_params), {"order": 1, "model_type": "crf"})
    pipe = Pipeline.from_models([up, down], [1])
    assert pipe.joint_mode() == "exact" and space.template.anchored
    return pipe, train


@pytest.mark.parametrize("path", ["tables", "encode"])
def test_kbest_rescoring_keeps_first_mentions_of_an_anchored_template(path):
    pipe, train = anchored_pipeline()
    if path == "encode":
        reencoding(pipe)
    test = train[:10]
    up = pipe.stages[0].model
    exact = pipe._joint_exact(test)
    K = len(up.output_labels) ** max(len(s) for s in test)
    kbest = pipe._joint_nbest(test, K)
    for c in range(2):
        for a, b in zip(exact[c], kbest[c]):
            np.testing.assert_array_equal(a, b)


def test_joint_groups_of_an_anchored_pipeline_cut_between_documents_only(monkeypatch):
    pipe, test = anchored_pipeline(60, docs_of=lambda i: i // 20)
    sent_ptr = np.concatenate([[0], np.cumsum([len(s) for s in test])])
    whole = [pipe.decode(test, mode, 4) for mode in ("joint", "normalized")]
    monkeypatch.setattr(joint, "MAX_JOINT_CELLS", 30)      # a few sentences per group
    n_states = 3 * 3
    assert len(joint.sentence_groups(sent_ptr, n_states)) > 10
    groups = joint.sentence_groups(sent_ptr, n_states, docs=[s.doc for s in test])
    assert [a for a, _ in groups] == [0, 20, 40]             # a document is never split
    split = [pipe.decode(test, mode, 4) for mode in ("joint", "normalized")]
    for m in range(2):
        for c in range(2):
            for a, b in zip(whole[m][c], split[m][c]):
                np.testing.assert_array_equal(a, b)
