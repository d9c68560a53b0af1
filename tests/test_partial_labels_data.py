"""The training files of benchmarks/partial_labels.py (issue 35's experiments), made from tiny
synthetic corpora: nested removal rates, what each setting marks, drops or keeps, and the
chunking baseline's labeled-token budget. No training."""

import importlib.util
import json
import random
import sys

import pytest

from crftk.evaluation.conlleval import chunks
from tests.corpora import REPO

_spec = importlib.util.spec_from_file_location("partial_labels", REPO / "benchmarks" / "partial_labels.py")
partial_labels = importlib.util.module_from_spec(_spec)
_path = list(sys.path)
_spec.loader.exec_module(partial_labels)     # puts the repository first on sys.path for its imports
sys.path[:] = _path

DOCSTART = "-DOCSTART- -X- O O"


def ner_corpus(rng, n_docs=3, n_sentences=12):
    """IOB1 NER text: mentions of 1-3 tokens, some right after one of their type (B-)."""
    lines = []
    for _ in range(n_docs):
        lines += [DOCSTART, ""]
        for _ in range(n_sentences):
            tags = []
            while len(tags) < rng.randint(3, 12):
                if rng.random() < 0.5:
                    tags.append("O")
                    continue
                kind = rng.choice(["PER", "LOC", "ORG"])
                first = "B" if tags and tags[-1].endswith(kind) else "I"
                tags += [f"{first}-{kind}"] + [f"I-{kind}"] * rng.randint(0, 2)
            lines += [f"w{rng.randrange(50)} NN I-NP {t}" for t in tags] + [""]
    return "\n".join(lines) + "\n"


def chunk_corpus(rng, n_sentences=60):
    lines = []
    for _ in range(n_sentences):
        lines += [f"w{rng.randrange(50)} NN {rng.choice(['B-NP', 'I-NP', 'B-VP', 'O'])}"
                  for _ in range(rng.randint(1, 9))] + [""]
    return "\n".join(lines) + "\n"


def sentences(path):
    """[[(word, label), ...], ...] of a file; -DOCSTART- lines counted apart."""
    out, cur, docs = [], [], 0
    for line in path.read_text().splitlines():
        if line.startswith("-DOCSTART-"):
            docs += 1
        elif line:
            cols = line.split()
            cur.append((cols[0], cols[-1]))
        elif cur:
            out.append(cur)
            cur = []
    return out, docs


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    root = tmp_path_factory.mktemp("partial")
    rng = random.Random(7)
    (root / "conll2003").mkdir()
    (root / "conll2000").mkdir()
    (root / "conll2003" / "eng.train").write_text(ner_corpus(rng))
    (root / "conll2000" / "train.txt").write_text(chunk_corpus(rng))
    partial_labels.main(["--data-dir", str(root), "--out", str(root / "out"), "make-data", "--seed", "3"])
    return root


def removed_mentions(made, rate):
    """The mentions (sentence, start, end) whose tokens file c marks unknown, and the original."""
    original, _ = sentences(made / "conll2003" / "eng.train")
    c, _ = sentences(made / "out" / f"ner-r{rate}-c.train")
    removed = set()
    for k, (orig, part) in enumerate(zip(original, c)):
        for _, start, end in chunks([t for _, t in orig], "iob1"):
            marks = {t == "?" for _, t in part[start:end]}
            assert len(marks) == 1, "a mention is removed whole or not at all"
            if marks == {True}:
                removed.add((k, start, end))
    return original, removed


def test_removal_rates_are_nested_and_of_the_share_asked(made):
    original, _ = sentences(made / "conll2003" / "eng.train")
    total = sum(len(chunks([t for _, t in s], "iob1")) for s in original)
    removed = {rate: removed_mentions(made, rate)[1] for rate in (30, 50, 70)}
    for rate in (30, 50, 70):
        assert len(removed[rate]) == round(total * rate / 100)
    assert removed[30] < removed[50] < removed[70]


def test_setting_b_drops_exactly_the_sentences_that_lost_a_mention(made):
    original, removed = removed_mentions(made, 50)
    lost = {k for k, _, _ in removed}
    b, docs = sentences(made / "out" / "ner-r50-b.train")
    assert lost and b == [s for k, s in enumerate(original) if k not in lost]
    assert docs == 3


def test_settings_a_c_d_mark_the_removed_mentions_and_only_d_frees_o(made):
    original, removed = removed_mentions(made, 50)
    a, _ = sentences(made / "out" / "ner-r50-a.train")
    c, _ = sentences(made / "out" / "ner-r50-c.train")
    d, _ = sentences(made / "out" / "ner-r50-d.train")
    assert len(a) == len(c) == len(d) == len(original)
    for k, orig in enumerate(original):
        gone = set()
        for _, start, end in chunks([t for _, t in orig], "iob1"):
            if (k, start, end) in removed:
                gone.update(range(start, end))
        kept = [ch for ch in chunks([t for _, t in orig], "iob1") if (k, ch[1], ch[2]) not in removed]
        assert chunks([t for _, t in a[k]], "iob1") == kept          # removed mentions are O in a
        for t, (word, label) in enumerate(orig):
            assert [x[0] for x in (a[k][t], c[k][t], d[k][t])] == [word] * 3
            assert c[k][t][1] == ("?" if t in gone else label)
            assert d[k][t][1] == ("?" if t in gone or label == "O" else label)
    info = json.loads((made / "out" / "data.json").read_text())
    labels = [t for s in original for _, t in s]
    assert info["entity_ratio"] == pytest.approx(sum(t != "O" for t in labels) / len(labels))
    assert info["files"]["ner-r50-d"]["known"] == sum(t != "?" for s in d for _, t in s)


def test_the_partial_runs_get_the_marker_and_d_the_entity_ratio(made):
    info = json.loads((made / "out" / "data.json").read_text())
    options = {name: opts for name, _, opts in partial_labels.runs(info)}
    assert options["ner-r50-a"] == options["ner-r50-b"] == options["chunk-h50-budget"] == []
    assert options["ner-r50-c"] == options["chunk-h80-partial"] == ["--unknown-label", "?"]
    d = ["--unknown-label", "?", "--entity-ratio", f"{info['entity_ratio']:.6f}", "--max-iter", "400"]
    assert options["ner-r50-d"] == d
    assert options["ner-r50-d-m01"] == d + ["--entity-ratio-margin", "0.01"]
    # the margin run trains on setting d's file, is counted as it and compared with setting a
    assert partial_labels.data_name("ner-r50-d-m01") == "ner-r50-d"
    assert partial_labels.against("ner-r50-d-m01") == "ner-r50-a"


def test_chunking_hidden_labels_are_nested_and_the_baseline_has_their_budget(made):
    original, _ = sentences(made / "conll2000" / "train.txt")
    n = sum(len(s) for s in original)
    hidden = {}
    for rate in (50, 80):
        part, _ = sentences(made / "out" / f"chunk-h{rate}-partial.train")
        assert [[w for w, _ in s] for s in part] == [[w for w, _ in s] for s in original]
        hidden[rate] = {(k, t) for k, s in enumerate(part) for t, (_, label) in enumerate(s) if label == "?"}
        assert all(part[k][t] == original[k][t] for k, s in enumerate(part) for t in range(len(s))
                   if (k, t) not in hidden[rate])
        assert len(hidden[rate]) == round(n * rate / 100)
        budget = n - len(hidden[rate])
        whole, _ = sentences(made / "out" / f"chunk-h{rate}-budget.train")
        used = sum(len(s) for s in whole)
        assert all(s in original for s in whole) and len(whole) < len(original)
        assert budget - max(len(s) for s in original) < used <= budget
    assert hidden[50] < hidden[80]


def test_each_row_is_compared_with_setting_a_at_its_rate_or_with_the_budget():
    against = partial_labels.against
    assert [against(f"ner-r50-{x}") for x in "abcd"] == [None] + ["ner-r50-a"] * 3
    assert against("chunk-h80-partial") == "chunk-h80-budget"
    assert against("chunk-h80-budget") is against("ner-full") is against("chunk-full") is None
