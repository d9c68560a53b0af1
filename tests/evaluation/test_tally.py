"""The vectorized counts (crftk.evaluation.tally, ChainTally) against evaluate's, label by label."""

import random

import numpy as np
import pytest

from crftk.evaluation.columns import ChainTally, score_chains
from crftk.evaluation.conlleval import evaluate
from crftk.evaluation.tally import Tally

# every prefix conlleval's rules read, types with dashes, the empty type, and labels that are no chunk tags
LABELS = ["O", "B-NP", "I-NP", "E-NP", "S-NP", "B-VP", "I-VP", "I-X-Y", "B-X-Y", "B", "I", "[", "]", "NN",
          "B-", "-", "O-NP"]


def same(tally_eval, reference):
    assert tally_eval.to_dict() == reference.to_dict()
    assert tally_eval.format() == reference.format()


def flat(sentences, names):
    ids = {x: i for i, x in enumerate(names)}
    return np.array([ids[x] for s in sentences for x in s], dtype=np.intp)


def sentences(rng, labels, n, longest=9, empty=False):
    return [[rng.choice(labels) for _ in range(rng.randint(0 if empty else 1, longest))] for _ in range(n)]


@pytest.mark.parametrize("seed", range(40))
def test_tally_of_ids_is_evaluate(seed):
    rng = random.Random(seed)
    labels = rng.sample(LABELS, rng.randint(1, len(LABELS)))
    gold = sentences(rng, labels, rng.randint(0, 30), empty=seed % 3 == 0)
    pred = [[x if rng.random() < 0.7 else rng.choice(labels) for x in s] for s in gold]
    names = sorted(set(labels), key=lambda _: rng.random())
    sent_ptr = np.concatenate(([0], np.cumsum([len(s) for s in gold]))).astype(np.intp)
    same(Tally.of_ids(flat(gold, names), flat(pred, names), sent_ptr, names).evaluation(), evaluate(gold, pred))


def test_a_hand_worked_case():
    # gold: NP [0,2) VP [2,3) | NP [0,1); pred: NP [0,2) NP [2,3) | NP [0,1) O
    names = ["B-NP", "I-NP", "B-VP", "O"]
    gold = [["B-NP", "I-NP", "B-VP"], ["B-NP", "O"]]
    pred = [["B-NP", "I-NP", "B-NP"], ["I-NP", "O"]]
    t = Tally.of_ids(flat(gold, names), flat(pred, names), [0, 3, 5], names)
    e = t.evaluation()
    assert (e.overall.n_gold, e.overall.n_pred, e.overall.n_correct) == (3, 3, 2)
    assert (e.per_type["NP"].n_gold, e.per_type["NP"].n_pred, e.per_type["VP"].n_pred) == (2, 3, 0)
    assert (e.n_correct_tokens, e.n_correct_sentences) == (3, 0)
    same(e, evaluate(gold, pred))


def test_tallies_add_and_take_back():
    rng = random.Random(7)
    names = ["O", "B-NP", "I-NP", "B-PP", "NN"]
    parts = []
    for _ in range(4):
        g = sentences(rng, names, rng.randint(1, 8))
        p = [[x if rng.random() < 0.6 else rng.choice(names) for x in s] for s in g]
        parts.append((g, p))
    tallies = [Tally.of_ids(flat(g, names), flat(p, names),
                            np.concatenate(([0], np.cumsum([len(s) for s in g]))), names) for g, p in parts]
    total = tallies[0] + tallies[1] + tallies[2] + tallies[3]
    gold = [s for g, _ in parts for s in g]
    pred = [s for _, p in parts for s in p]
    same(total.evaluation(), evaluate(gold, pred))
    rest = total - tallies[0]
    same(rest.evaluation(), evaluate(gold[len(parts[0][0]):], pred[len(parts[0][1]):]))
    # a label seen only in the part taken back no longer decides whether chunk scores apply
    only_pos = Tally.of_ids(np.array([0]), np.array([0]), [0, 1], ["NN"])
    chunks = Tally.of_ids(np.array([0, 1]), np.array([0, 1]), [0, 2], ["B-NP", "I-NP"])
    assert (only_pos + chunks - chunks).evaluation().chunk_tags is False
    assert (only_pos + chunks).evaluation().chunk_tags is True


@pytest.mark.parametrize("seed", range(10))
def test_chain_tally_is_the_old_per_sentence_scoring(seed):
    rng = random.Random(seed)
    chains = [["NN", "DT", "VB", "B-X"], ["B-NP", "I-NP", "O"]]
    lengths = [rng.randint(1, 7) for _ in range(rng.randint(1, 12))]
    gold = [[[rng.choice(c) for _ in range(n)] for n in lengths] for c in chains]
    pred = [[[x if rng.random() < 0.7 else rng.choice(c) for x in s] for s in g] for g, c in zip(gold, chains)]
    scores = score_chains(gold, pred)
    joint = sum(all(g[k][i] == p[k][i] for g, p in zip(gold, pred))
                for k, n in enumerate(lengths) for i in range(n))
    assert (scores.joint_correct, scores.n_tokens) == (joint, sum(lengths))
    for c in range(2):
        same(scores.per_chain[c], evaluate(gold[c], pred[c]))
    # by ids, in two batches numbered differently (a gold label the model lacks gets a batch's own id)
    cut = len(lengths) // 2
    halves = []
    for lo, hi in ((0, cut), (cut, len(lengths))):
        names = [sorted({x for s in g[lo:hi] + p[lo:hi] for x in s}, key=lambda _: rng.random())
                 for g, p in zip(gold, pred)]
        ptr = np.concatenate(([0], np.cumsum(lengths[lo:hi]))).astype(np.intp)
        halves.append(ChainTally.of_ids([flat(g[lo:hi], x) for g, x in zip(gold, names)],
                                        [flat(p[lo:hi], x) for p, x in zip(pred, names)], ptr, names))
    both = (halves[0] + halves[1]).scores()
    assert both.line() == scores.line()
    assert both.to_dict() == scores.to_dict()


def test_tallies_refuse_a_sentence_split_not_from_0_and_score_no_chains():
    with pytest.raises(ValueError):
        Tally.of_ids(np.array([0, 1]), np.array([0, 1]), [1, 2], ["B-NP", "O"])
    assert score_chains([], []).line() == ChainTally([], 0, 0).scores().line()
