"""End-to-end tests of the crftk command line: train, tag, eval, info and dump.

Most commands run in-process through click's CliRunner; the error cases, the
pipelines and stdin/stdout handling run ``python -m crftk.cli`` in a
subprocess, so that what is checked is exactly what a user sees (exit code,
stderr, files left on disk).  All data are written by the tests themselves,
except for the tests of the demo corpus, which read ``data/demo.*``.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from crftk.cli import main
from crftk.params import MAX_NBEST
from corpora import REPO

DEMO_TRAIN = REPO / "data" / "demo.train"
DEMO_TEST = REPO / "data" / "demo.test"
CHUNKING_TEMPLATE = REPO / "templates" / "chunking-crfpp.tmpl"
# subprocesses run this checkout's crftk, whatever their working directory (not an installed one)
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

# A tiny corpus that the template below separates: every word has one label.
TINY = [
    [("The", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sat", "VBD", "B-VP"), ("on", "IN", "B-PP"),
     ("the", "DT", "B-NP"), ("mat", "NN", "I-NP"), (".", ".", "O")],
    [("A", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("has", "VBZ", "B-VP"), ("barked", "VBN", "I-VP"),
     (".", ".", "O")],
    [("the", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("sat", "VBD", "B-VP"), ("near", "IN", "B-PP"),
     ("a", "DT", "B-NP"), ("tree", "NN", "I-NP"), (".", ".", "O")],
    [("The", "DT", "B-NP"), ("bird", "NN", "I-NP"), ("is", "VBZ", "B-VP"), ("happy", "JJ", "B-ADJP"),
     (".", ".", "O")],
    [("Birds", "NNS", "B-NP"), ("sing", "VBP", "B-VP"), ("in", "IN", "B-PP"), ("the", "DT", "B-NP"),
     ("garden", "NN", "I-NP"), (",", ",", "O"), ("and", "CC", "O"), ("cats", "NNS", "B-NP"),
     ("sleep", "VBP", "B-VP"), (".", ".", "O")],
]
TINY_LABELS = sorted({row[2] for s in TINY for row in s})

TEMPLATE = """\
# test template: words and tags around the current token
Uw0:%x[0,0]
Uw-1:%x[-1,0]
Up0:%x[0,1]
Up-1p0:%x[-1,1]/%x[0,1]

B
"""

# Words at -1..+1 and tags at -2..+1: small enough to train in about a second on a
# few hundred demo sentences, rich enough to score well.
DEMO_TEMPLATE = """\
Uw-1:%x[-1,0]
Uw0:%x[0,0]
Uw+1:%x[1,0]
Up-2:%x[-2,1]
Up-1:%x[-1,1]
Up0:%x[0,1]
Up+1:%x[1,1]
Up-1p0:%x[-1,1]/%x[0,1]
Up0p+1:%x[0,1]/%x[1,1]
B
"""


# ---------------------------------------------------------------------------
# helpers


def conll_text(sentences, columns=None, sep=" "):
    """CoNLL text of sentences (lists of tuples), keeping `columns` (indices) if given."""
    out = []
    for s in sentences:
        for row in s:
            out.append(sep.join(row if columns is None else [row[c] for c in columns]) + "\n")
        out.append("\n")
    return "".join(out)


def write(path, text):
    path = Path(path)
    path.write_text(text, encoding="utf-8")
    return path


def head_sentences(src, n):
    """The first n sentences of a CoNLL file, as text."""
    blocks = Path(src).read_text(encoding="utf-8").split("\n\n")
    return "\n\n".join(blocks[:n]) + "\n\n"


def make_runner():
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()  # click >= 8.2 keeps stderr apart anyway


def cli(*args, input=None, ok=True):
    """Run crftk in-process; re-raise anything but a clean exit, so a bug shows its traceback."""
    result = make_runner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=True)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if ok:
        assert result.exit_code == 0, result.stderr
    return result


def run(*args, input=None, cwd=None):
    """Run `python -m crftk.cli` in a subprocess."""
    return subprocess.run([sys.executable, "-m", "crftk.cli", *[str(a) for a in args]],
                          input=input, capture_output=True, text=True, cwd=cwd, timeout=300, env=ENV)


def assert_error(proc, *fragments):
    """A clean failure: non-zero exit, one 'crftk: error:' line naming the fragments."""
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("crftk: error:"), lines[0]
    for fragment in fragments:
        assert str(fragment) in lines[0], (fragment, lines[0])
    return lines[0]


def listing(directory):
    return sorted(p.name for p in Path(directory).iterdir())


def blocks(text):
    """Sentences of tagger output: lists of lines (annotation lines included)."""
    assert text.endswith("\n\n") or text == "", repr(text[-20:])
    return [b.split("\n") for b in text[:-2].split("\n\n")] if text else []


def info_json(model):
    return json.loads(cli("info", "--json", model).stdout)


def eval_json(*args, input=None):
    return json.loads(cli("eval", "--json", *args, input=input).stdout)


def train(tmp, train_files, template_text=TEMPLATE, *extra, name="m.model"):
    tmpl = write(Path(tmp) / "t.tmpl", template_text)
    model = Path(tmp) / name
    cli("train", "-q", "-t", tmpl, "-m", model, *train_files, *extra)
    return model


# ---------------------------------------------------------------------------
# fixtures


class Tiny:
    """The tiny corpus and a model trained on it (shared: tests must not modify them)."""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    t = Tiny()
    t.dir = d
    t.train = write(d / "tiny.train", conll_text(TINY))
    t.nogold = write(d / "tiny.nogold", conll_text(TINY, columns=(0, 1)))
    t.template = write(d / "tiny.tmpl", TEMPLATE)
    t.model = d / "tiny.model"
    cli("train", "-q", "-t", t.template, "-m", t.model, t.train, "--max-iter", 200)
    t.tagged = cli("tag", "-m", t.model, t.train).stdout
    return t


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """300 demo training sentences, 150 test sentences and a model trained with --dev."""
    d = tmp_path_factory.mktemp("demo")
    t = Tiny()
    t.dir = d
    t.train = write(d / "demo300.train", head_sentences(DEMO_TRAIN, 300))
    t.dev = write(d / "demo150.dev", head_sentences(DEMO_TEST, 150))
    t.template = write(d / "demo.tmpl", DEMO_TEMPLATE)
    t.model = d / "demo.model"
    cli("train", "-q", "-t", t.template, "-m", t.model, t.train, "--dev", t.dev, "--max-iter", 60)
    return t


# ---------------------------------------------------------------------------
# the pipeline


def test_train_info_tag_eval_pipeline(tmp_path):
    data = write(tmp_path / "train.txt", conll_text(TINY))
    tmpl = write(tmp_path / "t.tmpl", TEMPLATE)
    model = tmp_path / "chunk.model"
    tagged = tmp_path / "tagged.txt"

    p = run("train", "-t", tmpl, "-m", model, data, "--max-iter", 200)
    assert p.returncode == 0, p.stderr
    assert model.is_file()
    assert "saved" in p.stderr  # progress goes to stderr, nothing to stdout
    assert p.stdout == ""

    p = run("info", model)
    assert p.returncode == 0, p.stderr
    assert "labels" in p.stdout and "B-NP" in p.stdout

    p = run("tag", "-m", model, "-o", tagged, data)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""

    p = run("eval", tagged)
    assert p.returncode == 0, p.stderr
    assert "FB1: 100.00" in p.stdout.splitlines()[1]

    # the same through pipes: tag from stdin, eval from stdin
    p = run("tag", "-m", model, "-", input=data.read_text())
    assert p.returncode == 0, p.stderr
    assert p.stdout == tagged.read_text()
    p = run("eval", "--json", "-", input=p.stdout)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["overall"]["f1"] == 100.0


def test_eval_of_separable_training_data_is_100(tiny):
    result = eval_json(write(tiny.dir / "tagged-eval.txt", tiny.tagged))
    n_chunks = sum(1 for s in TINY for row in s if row[2].startswith("B-"))
    assert result["overall"]["f1"] == 100.0
    assert result["overall"]["n_gold"] == result["overall"]["n_correct"] == n_chunks
    assert result["token_accuracy"] == 100.0 and result["sentence_accuracy"] == 100.0
    assert result["n_sentences"] == len(TINY)
    # two-file form: gold from the training file, predictions from the tagger output
    assert eval_json(tiny.train, tiny.dir / "tagged-eval.txt")["overall"]["f1"] == 100.0


def test_eval_scores_errors_below_100(tmp_path):
    gold = [[("a", "DT", "B-NP"), ("b", "NN", "I-NP"), ("c", "VBD", "B-VP")]]
    # the predicted NP is cut short: 1 of 2 chunks right, 1 of 3 predicted
    pred = [[("a", "DT", "B-NP", "B-NP"), ("b", "NN", "I-NP", "B-NP"), ("c", "VBD", "B-VP", "B-VP")]]
    result = eval_json(write(tmp_path / "p.txt", conll_text(pred)))
    assert result["overall"]["n_gold"] == 2
    assert result["overall"]["n_pred"] == 3
    assert result["overall"]["n_correct"] == 1
    assert result["overall"]["f1"] == pytest.approx(40.0)  # P = 1/3, R = 1/2
    # the same from two files
    write(tmp_path / "g.txt", conll_text(gold))
    write(tmp_path / "q.txt", conll_text(pred, columns=(0, 1, 3)))
    assert eval_json(tmp_path / "g.txt", tmp_path / "q.txt")["overall"]["f1"] == pytest.approx(40.0)


# ---------------------------------------------------------------------------
# info and dump


def test_info_json_reports_labels_and_counts(tmp_path):
    sents = TINY
    model = train(tmp_path, [write(tmp_path / "d.txt", conll_text(sents))], "Uw0:%x[0,0]\nB\n",
                  "--max-iter", 50, "--c2", 0.5)
    info = info_json(model)
    words = {row[0] for s in sents for row in s}
    pairs = {(row[0], row[2]) for s in sents for row in s}
    L = len(TINY_LABELS)
    assert info["labels"] == TINY_LABELS
    assert info["n_labels"] == L
    assert info["columns"] == 3
    assert info["label_column"] == 2
    assert info["templates"] == {"state": 1, "transition": 0, "label_bigram": True}
    assert info["feature_set"] == "supported"
    assert info["attributes"] == len(words)
    assert info["edge_attributes"] == 0
    assert info["state_features"] == len(pairs)
    assert info["parameters"] == len(pairs) + L * L + 2 * L
    assert 0 < info["nonzero_parameters"] <= info["parameters"]
    tr = info["training"]
    assert tr["sentences"] == len(sents)
    assert tr["tokens"] == sum(len(s) for s in sents)
    assert tr["options"]["max_iter"] == 50
    assert tr["options"]["c2"] == 0.5
    assert tr["train_files"] == [str(tmp_path / "d.txt")]


def test_info_text_lists_the_summary(tiny):
    out = cli("info", tiny.model).stdout
    first = {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines() if line.strip()}
    assert first["n_labels"] == str(len(TINY_LABELS))
    assert first["labels"] == " ".join(TINY_LABELS)          # words, not a Python list
    assert first["training.sentences"] == str(len(TINY))
    assert first["templates.label_bigram"] == "yes"
    assert first["training.options.c2"] == "1"
    assert "training.history" not in first
    assert not any(c in out for c in "[]{}'"), out


def test_info_json_complete_feature_set(tmp_path):
    model = train(tmp_path, [write(tmp_path / "d.txt", conll_text(TINY))], "Uw0:%x[0,0]\nB\n",
                  "--max-iter", 20, "--feature-set", "complete")
    info = info_json(model)
    words = {row[0] for s in TINY for row in s}
    assert info["feature_set"] == "complete"
    assert info["state_features"] == len(words) * len(TINY_LABELS)


def parse_dump(text):
    """Sections of a dump: {name: [fields of each line]}."""
    sections = {}
    current = None
    for line in text.splitlines():
        if line.startswith("["):
            current = line[1:line.index("]")]
            sections[current] = []
        elif line.strip() and current is not None and not line.startswith("#"):
            sections[current].append(line.split("\t"))
    return sections


def test_dump_lists_transitions_and_state_features_in_crfpp_form(tmp_path):
    model = train(tmp_path, [write(tmp_path / "d.txt", conll_text(TINY))],
                  "Uw0:%x[0,0]\nUp-1p0:%x[-1,1]/%x[0,1]\nB\n", "--max-iter", 50)
    dump = parse_dump(cli("dump", model).stdout)
    labels = TINY_LABELS
    assert [row[0] for row in dump["labels"]] == labels

    trans = dump["transitions"]
    assert sorted((a, b) for a, b, _ in trans) == sorted((a, b) for a in labels for b in labels)
    for row in trans:
        float(row[2])
    assert sorted(row[0] for row in dump["start"]) == labels
    assert sorted(row[0] for row in dump["end"]) == labels

    state = {(attr, lab) for attr, lab, w in dump["state"] if float(w) != 0.0}
    expected = {(f"Uw0:{row[0]}", row[2]) for s in TINY for row in s}
    for s in TINY:
        prev = ["_B-1"] + [row[1] for row in s]
        expected |= {(f"Up-1p0:{p}/{row[1]}", row[2]) for p, row in zip(prev, s)}
    assert state == expected
    assert ("Uw0:the", "B-NP") in state
    assert ("Up-1p0:_B-1/DT", "B-NP") in state


def test_dump_output_file_and_min_abs(tiny, tmp_path):
    full = cli("dump", tiny.model).stdout
    out = tmp_path / "dump.txt"
    assert cli("dump", "-o", out, tiny.model).stdout == ""
    assert out.read_text() == full
    assert listing(tmp_path) == ["dump.txt"]
    state = parse_dump(full)["state"]
    cut = sorted(abs(float(w)) for _, _, w in state)[len(state) // 2]
    kept = parse_dump(cli("dump", "--min-abs", cut, tiny.model).stdout)["state"]
    assert 0 < len(kept) < len(state)
    assert all(abs(float(w)) > cut for _, _, w in kept)


# ---------------------------------------------------------------------------
# tag output


def test_tag_output_is_input_columns_plus_label(tiny):
    sents = blocks(tiny.tagged)
    assert len(sents) == len(TINY)
    for lines, gold in zip(sents, TINY):
        assert len(lines) == len(gold)
        for line, row in zip(lines, gold):
            fields = line.split(" ")
            assert fields[:3] == list(row)  # input columns, joined with the input's separator
            assert len(fields) == 4
            assert fields[3] == row[2]  # separable data: the prediction is right


def test_tag_without_the_gold_column(tiny):
    out = cli("tag", "-m", tiny.model, tiny.nogold).stdout
    sents = blocks(out)
    assert len(sents) == len(TINY)
    for lines, gold in zip(sents, TINY):
        for line, row in zip(lines, gold):
            assert line.split(" ") == [row[0], row[1], row[2]]
    # the prediction does not depend on the presence of the gold column
    with_gold = [line.split()[-1] for b in blocks(tiny.tagged) for line in b]
    without = [line.split()[-1] for b in sents for line in b]
    assert with_gold == without


def parse_marginals(text):
    """[(sequence prob, [fields...])] of `tag -v` / `-vv` output."""
    out = []
    for lines in blocks(text):
        assert lines[0].startswith("# prob "), lines[0]
        prob = float(lines[0].split()[2])
        out.append((prob, [line.split() for line in lines[1:]]))
    return out


def test_tag_v_adds_probabilities(tiny):
    out = cli("tag", "-v", "-m", tiny.model, tiny.train).stdout
    sents = parse_marginals(out)
    assert len(sents) == len(TINY)
    for (prob, rows), gold in zip(sents, TINY):
        assert 0 < prob <= 1
        assert len(rows) == len(gold)
        for fields, row in zip(rows, gold):
            assert len(fields) == 5
            assert fields[:4] == list(row) + [row[2]]
            p = float(fields[4])
            assert 0 < p <= 1
        # a labeling is never more likely than any one of its labels
        assert prob <= min(float(f[4]) for f in rows) + 1e-6
    # the labels are those of plain tagging
    plain = [line.split()[3] for b in blocks(tiny.tagged) for line in b]
    assert [f[3] for _, rows in sents for f in rows] == plain


def test_tag_vv_adds_every_label_probability(tiny):
    out = cli("tag", "-vv", "-m", tiny.model, tiny.train).stdout
    sents = parse_marginals(out)
    assert len(sents) == len(TINY)
    for prob, rows in sents:
        assert 0 < prob <= 1
        for fields in rows:
            assert len(fields) == 3 + 2 + len(TINY_LABELS)
            pairs = [f.rsplit("/", 1) for f in fields[5:]]
            assert [lab for lab, _ in pairs] == TINY_LABELS
            probs = {lab: float(p) for lab, p in pairs}
            assert all(0 <= p <= 1 for p in probs.values())
            assert sum(probs.values()) == pytest.approx(1.0, abs=1e-4)
            assert probs[fields[3]] == pytest.approx(float(fields[4]), abs=1e-6)


def test_tag_nbest(tiny):
    out = cli("tag", "-n", 3, "-m", tiny.model, tiny.train).stdout
    lines = out.split("\n")
    headers = [line for line in lines if line.startswith("# nbest")]
    assert len(headers) == 3 * len(TINY)
    by_sentence = [headers[i:i + 3] for i in range(0, len(headers), 3)]
    viterbi = [[line.split()[3] for line in b] for b in blocks(tiny.tagged)]
    probs_v = [p for p, _ in parse_marginals(cli("tag", "-v", "-m", tiny.model, tiny.train).stdout)]
    labelings = []
    for block in blocks(out):
        assert block[0].startswith("# nbest ")
        labelings.append([line.split()[3] for line in block[1:]])
    for i, hs in enumerate(by_sentence):
        ks = [int(h.split()[2]) for h in hs]
        ps = [float(h.split()[3]) for h in hs]
        assert ks == [0, 1, 2]
        assert all(0 < p <= 1 for p in ps)
        assert ps == sorted(ps, reverse=True)
        assert sum(ps) <= 1 + 1e-5
        assert ps[0] == pytest.approx(probs_v[i], abs=1e-6)
        paths = labelings[3 * i:3 * i + 3]
        assert paths[0] == viterbi[i]  # the best labeling is Viterbi's
        assert len({tuple(p) for p in paths}) == 3  # three different labelings
        assert all(len(p) == len(TINY[i]) for p in paths)


def test_tag_output_file_is_written_atomically(tiny, tmp_path):
    out = tmp_path / "tagged.txt"
    r = cli("tag", "-m", tiny.model, "-o", out, tiny.train)
    assert r.stdout == ""
    assert out.read_text() == tiny.tagged
    assert listing(tmp_path) == ["tagged.txt"]  # no temporary file left

    # an existing file is replaced ...
    write(out, "old contents\n")
    cli("tag", "-m", tiny.model, "-o", out, tiny.train)
    assert out.read_text() == tiny.tagged

    # ... but only by a complete output: a failure half-way (the first batches
    # are already written) leaves the old file as it was
    write(out, "old contents\n")
    bad = write(tmp_path / "bad.txt", conll_text(TINY[:2]) + "x NN B-NP extra\n")
    p = run("tag", "-m", tiny.model, "-o", out, "--batch-tokens", 1, tiny.train, bad)
    assert_error(p, f"bad.txt:{sum(len(s) + 1 for s in TINY[:2]) + 1}:")
    assert out.read_text() == "old contents\n"
    assert listing(tmp_path) == ["bad.txt", "tagged.txt"]


def test_tag_same_file_twice_is_the_concatenation(tiny, tmp_path):
    assert cli("tag", "-m", tiny.model, tiny.train, tiny.train).stdout == tiny.tagged * 2
    other = write(tmp_path / "other.txt", conll_text(TINY[::-1]))
    other_tagged = cli("tag", "-m", tiny.model, other).stdout
    assert other_tagged != tiny.tagged
    both = cli("tag", "-m", tiny.model, tiny.train, other).stdout
    assert both == tiny.tagged + other_tagged


def test_tag_small_batches_give_the_same_output(tiny):
    assert cli("tag", "-m", tiny.model, "--batch-tokens", 1, tiny.train).stdout == tiny.tagged
    assert cli("tag", "-m", tiny.model, "--threads", 1, tiny.train).stdout == tiny.tagged


def test_tag_reads_stdin(tiny):
    text = tiny.train.read_text()
    assert cli("tag", "-m", tiny.model, "-", input=text).stdout == tiny.tagged
    assert cli("tag", "-m", tiny.model, input=text).stdout == tiny.tagged  # no file: stdin
    # stdin between two files
    both = cli("tag", "-m", tiny.model, tiny.train, "-", tiny.train, input=text).stdout
    assert both == tiny.tagged * 3


def test_tag_input_with_tabs_crlf_and_docstart(tiny, tmp_path):
    text = "-DOCSTART- -X- O\n\n" + conll_text(TINY, sep="\t").replace("\n", "\r\n")
    src = write(tmp_path / "in.txt", text)
    # the document line passes through in place; tab-separated input gives tab-separated output
    assert cli("tag", "-m", tiny.model, src).stdout == "-DOCSTART- -X- O\n\n" + tiny.tagged.replace(" ", "\t")


def test_tag_keeps_every_document_line_in_place(tiny, tmp_path):
    """CoNLL-2003 marks documents with -DOCSTART- lines: tag copies each one where it was, so the
    output lines up with the input and tagging it again gives the same labels."""
    docs = "".join("-DOCSTART- -X- O\n\n" + conll_text([s]) for s in TINY) + "-DOCSTART- -X- O\n"
    src = write(tmp_path / "docs.txt", docs)
    out = cli("tag", "-m", tiny.model, src).stdout
    assert out.count("-DOCSTART- -X- O\n") == len(TINY) + 1
    in_lines, out_lines = docs.splitlines(), out.splitlines()
    assert len(in_lines) == len(out_lines)
    for a, b in zip(in_lines, out_lines):
        if a.startswith("-DOCSTART-") or not a:
            assert a == b
        else:
            assert b.split()[:-1] == a.split()     # the token with its predicted label appended
    again = cli("tag", "-m", tiny.model, write(tmp_path / "cut.txt", "\n".join(
        " ".join(line.split()[:-1]) if line and not line.startswith("-DOC") else line
        for line in out_lines) + "\n")).stdout
    assert again == out


def test_tag_output_reads_back_into_eval_and_tag(tiny, tmp_path):
    """Tagger output (with -v annotations) is valid input for eval."""
    tagged_v = write(tmp_path / "v.txt", cli("tag", "-v", "-m", tiny.model, tiny.train).stdout)
    # columns: word POS gold pred prob -> gold and predicted are columns 2 and 3
    result = eval_json("--gold-col", 2, "--pred-col", 3, tagged_v)
    assert result["overall"]["f1"] == 100.0
    assert result["n_sentences"] == len(TINY)


# ---------------------------------------------------------------------------
# training with a development set


def test_dev_keeps_the_best_iteration(demo):
    tr = info_json(demo.model)["training"]
    history = tr["history"]
    assert tr["dev_file"] == str(demo.dev)
    assert len(history) == tr["iterations"] >= 1
    assert [h["iteration"] for h in history] == list(range(1, len(history) + 1))
    scores = [h["dev_f1"] for h in history]
    best = tr["best_dev_f1"]
    assert best == max(scores)
    chosen = tr["chosen_iteration"]
    assert 1 <= chosen <= tr["iterations"]
    assert history[chosen - 1]["dev_f1"] == best
    # The saved weights are those of the chosen iteration: tagging the dev set
    # with the model gives back exactly the best dev F1 (and not the last one's).
    tagged = cli("tag", "-m", demo.model, demo.dev).stdout
    result = eval_json("-", input=tagged)
    assert result["overall"]["f1"] == pytest.approx(best, abs=1e-9)
    # the demo corpus is learnable but not trivial
    assert 70 < best < 100


def test_dev_equal_to_train_on_separable_data(tmp_path):
    data = write(tmp_path / "d.txt", conll_text(TINY))
    model = train(tmp_path, [data], TEMPLATE, "--dev", data, "--max-iter", 100)
    tr = info_json(model)["training"]
    assert tr["best_dev_f1"] == 100.0
    assert tr["history"][tr["chosen_iteration"] - 1]["dev_f1"] == 100.0
    assert eval_json("-", input=cli("tag", "-m", model, data).stdout)["overall"]["f1"] == 100.0


def test_without_dev_the_last_iteration_is_kept(tiny):
    tr = info_json(tiny.model)["training"]
    assert tr["dev_file"] is None
    assert tr["best_dev_f1"] is None
    assert tr["chosen_iteration"] == tr["iterations"] == len(tr["history"])
    assert all("dev_f1" not in h for h in tr["history"])


def test_train_log_goes_to_stderr_and_quiet_silences_it(tmp_path):
    data = write(tmp_path / "d.txt", conll_text(TINY))
    tmpl = write(tmp_path / "t.tmpl", TEMPLATE)
    loud = cli("train", "-t", tmpl, "-m", tmp_path / "a.model", data, "--max-iter", 5)
    assert loud.stdout == ""
    assert "iter    1" in loud.stderr
    quiet = cli("train", "-q", "-t", tmpl, "-m", tmp_path / "b.model", data, "--max-iter", 5)
    assert quiet.stdout == "" and quiet.stderr == ""
    assert info_json(tmp_path / "b.model")["training"]["iterations"] <= 5


def test_train_several_files_is_training_on_their_concatenation(tmp_path):
    a = write(tmp_path / "a.txt", conll_text(TINY[:2]))
    b = write(tmp_path / "b.txt", conll_text(TINY[2:]))
    model = train(tmp_path, [a, b], TEMPLATE, "--max-iter", 30)
    info = info_json(model)
    assert info["training"]["sentences"] == len(TINY)
    assert info["labels"] == TINY_LABELS
    assert info["training"]["train_files"] == [str(a), str(b)]


def test_shipped_chunking_template_trains_on_the_demo_corpus(tmp_path):
    data = write(tmp_path / "d.txt", head_sentences(DEMO_TRAIN, 60))
    model = tmp_path / "m.model"
    cli("train", "-q", "-t", CHUNKING_TEMPLATE, "-m", model, data, "--max-iter", 5)
    info = info_json(model)
    assert info["templates"]["state"] == sum(
        1 for line in CHUNKING_TEMPLATE.read_text().splitlines() if line.startswith("U"))
    assert info["templates"]["label_bigram"] is True
    assert info["training"]["sentences"] == 60


def test_broken_pipe_is_quiet(demo):
    """`crftk tag ... | head -1`: the reader goes away early; no traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "crftk.cli", "tag", "-vv", "-m", str(demo.model),
                             str(DEMO_TEST)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=300) == 0, err
    assert first.startswith(b"# prob ")
    assert "Traceback" not in err and "Exception" not in err


# ---------------------------------------------------------------------------
# errors: one line on stderr, file and line named, nothing left behind


@pytest.fixture
def errdir(tmp_path):
    write(tmp_path / "good.txt", conll_text(TINY))
    write(tmp_path / "t.tmpl", TEMPLATE)
    return tmp_path


def test_error_training_file_with_wrong_column_count(errdir):
    rows = conll_text(TINY[:1]) + "A DT B-NP\ndog NN\nbarked VBD B-VP\n\n"
    bad_line = len(TINY[0]) + 1 + 2  # second line of the second sentence
    write(errdir / "bad.txt", rows)
    before = listing(errdir)
    p = run("train", "-t", "t.tmpl", "-m", "out.model", "bad.txt", cwd=errdir)
    assert_error(p, f"bad.txt:{bad_line}:", "found 2")
    assert p.stdout == ""
    assert listing(errdir) == before


def test_error_second_training_file_with_other_column_count(errdir):
    write(errdir / "four.txt", "a DT x B-NP\n\n")
    before = listing(errdir)
    p = run("train", "-t", "t.tmpl", "-m", "out.model", "good.txt", "four.txt", cwd=errdir)
    assert_error(p, "four.txt:1:")
    assert listing(errdir) == before


def test_error_missing_training_file(errdir):
    before = listing(errdir)
    p = run("train", "-t", "t.tmpl", "-m", "out.model", "missing.txt", cwd=errdir)
    assert_error(p, "missing.txt")
    assert listing(errdir) == before


def test_error_missing_template(errdir):
    before = listing(errdir)
    p = run("train", "-t", "nope.tmpl", "-m", "out.model", "good.txt", cwd=errdir)
    assert_error(p, "nope.tmpl")
    assert listing(errdir) == before


@pytest.mark.parametrize("bad, what", [
    ("U01:%x[0]", "macro"),             # bad macro: one argument
    ("U01:%x[a,0]", "macro"),           # bad macro: not an integer
    ("U01:%y[0,0]", "macro"),           # unknown macro
    ("X01:%x[0,0]", "must start with"),  # unknown line type
    ("U01:%x[0,7]", "column 7"),        # a column the data does not have
    ("U01:%x[-1,2]", "column 2"),       # the gold label column
])
def test_error_bad_template(errdir, bad, what):
    # line 1 comment, line 2 good, line 3 bad
    write(errdir / "bad.tmpl", f"# comment\nU00:%x[0,0]\n{bad}\nB\n")
    before = listing(errdir)
    p = run("train", "-t", "bad.tmpl", "-m", "out.model", "good.txt", cwd=errdir)
    assert_error(p, "bad.tmpl:3:", what)
    assert listing(errdir) == before


def test_error_tag_with_a_text_file_as_model(errdir):
    before = listing(errdir)
    p = run("tag", "-m", "good.txt", "-o", "out.txt", "good.txt", cwd=errdir)
    assert_error(p, "good.txt", "not a crftk model")
    assert listing(errdir) == before


def test_error_tag_with_missing_model(errdir):
    before = listing(errdir)
    p = run("tag", "-m", "nope.model", "-o", "out.txt", "good.txt", cwd=errdir)
    assert_error(p, "nope.model")
    assert listing(errdir) == before


@pytest.mark.parametrize("cut", ["half", "last-bytes"])
def test_error_tag_with_truncated_model(tiny, demo, errdir, cut):
    for model in (tiny.model, demo.model):
        data = model.read_bytes()
        keep = len(data) // 2 if cut == "half" else len(data) - 8
        (errdir / "cut.model").write_bytes(data[:keep])
        before = listing(errdir)
        p = run("tag", "-m", "cut.model", "-o", "out.txt", "good.txt", cwd=errdir)
        assert_error(p, "cut.model", "truncated")
        assert listing(errdir) == before
        assert_error(run("info", "cut.model", cwd=errdir), "cut.model")
        assert_error(run("dump", "cut.model", cwd=errdir), "cut.model")


def test_error_tag_with_corrupted_model_payload(tiny, errdir):
    data = bytearray(tiny.model.read_bytes())
    data[-5] ^= 0x5A
    (errdir / "bad.model").write_bytes(bytes(data))
    before = listing(errdir)
    p = run("tag", "-m", "bad.model", "-o", "out.txt", "good.txt", cwd=errdir)
    assert_error(p, "bad.model", "corrupted")
    assert listing(errdir) == before


def test_error_tag_file_with_wrong_number_of_columns(tiny, errdir):
    text = conll_text(TINY[:1]) + "a DT B-NP extra\n\n"
    write(errdir / "four.txt", text)
    before = listing(errdir)
    p = run("tag", "-m", tiny.model, "-o", "out.txt", "four.txt", cwd=errdir)
    assert_error(p, f"four.txt:{len(TINY[0]) + 2}:", "found 4")
    assert listing(errdir) == before
    write(errdir / "one.txt", "a\nb\n")
    p = run("tag", "-m", tiny.model, "-o", "out.txt", "one.txt", cwd=errdir)
    assert_error(p, "one.txt:1:", "found 1")


def test_error_eval_inconsistent_columns(errdir):
    write(errdir / "p.txt", "a DT B-NP B-NP\nb NN I-NP I-NP\n\nc DT B-NP\n")
    p = run("eval", "p.txt", cwd=errdir)
    assert_error(p, "p.txt:4:")
    assert p.stdout == ""


def test_error_eval_files_that_do_not_line_up(errdir):
    write(errdir / "gold.txt", conll_text(TINY))
    # predictions: the second sentence lacks its last token
    pred = [list(s) for s in TINY]
    pred[1] = pred[1][:-1]
    write(errdir / "pred.txt", conll_text(pred))
    p = run("eval", "gold.txt", "pred.txt", cwd=errdir)
    line = len(TINY[0]) + 1 + len(TINY[1])  # the token missing from pred.txt
    assert_error(p, f"gold.txt:{line}", "pred.txt")
    assert p.stdout == ""
    # fewer sentences in the predictions
    write(errdir / "short.txt", conll_text(TINY[:3]))
    assert_error(run("eval", "gold.txt", "short.txt", cwd=errdir), "gold.txt:", "short.txt")


def test_error_eval_missing_file(errdir):
    assert_error(run("eval", "nope.txt", cwd=errdir), "nope.txt")


def test_error_dev_file_with_wrong_number_of_columns(errdir):
    write(errdir / "dev.txt", "a DT B-NP extra\n\n")
    before = listing(errdir)
    p = run("train", "-q", "-t", "t.tmpl", "-m", "out.model", "good.txt", "--dev", "dev.txt",
            cwd=errdir)
    assert_error(p, "dev.txt")
    assert listing(errdir) == before


def test_error_model_path_unwritable(errdir):
    before = listing(errdir)
    p = run("train", "-q", "-t", "t.tmpl", "-m", "no/such/dir/out.model", "good.txt", cwd=errdir)
    assert_error(p, "no/such/dir/out.model")
    assert listing(errdir) == before


# ---------------------------------------------------------------------------
# help


SUBCOMMANDS = ["train", "tag", "eval", "info", "dump"]


def test_main_help_lists_the_subcommands():
    out = cli("--help").stdout
    for name in SUBCOMMANDS:
        assert name in out


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_subcommand_help_mentions_every_option(name):
    out = cli(name, "--help").stdout
    assert out.startswith("Usage:")
    command = main.commands[name]
    options = [p for p in command.params if isinstance(p, click.Option)]
    assert options
    for opt in options:
        for flag in opt.opts + opt.secondary_opts:
            assert flag in out, (name, flag)


@pytest.mark.parametrize("name, flags", [
    ("train", ["--c1", "--c2", "--max-iter", "--epsilon", "--period", "--min-freq", "--feature-set",
               "--threads", "--dev", "--template", "--model", "--quiet", "--label-col", "--history"]),
    ("tag", ["--model", "--output", "--marginals", "-v", "--nbest", "--batch-tokens", "--threads"]),
    ("eval", ["--gold-col", "--pred-col", "--scheme", "--json"]),
    ("info", ["--json"]),
    ("dump", ["--output", "--min-abs"]),
])
def test_subcommand_help_documents_the_expected_options(name, flags):
    for args in ([name, "--help"], [name, "-h"]):
        out = cli(*args).stdout
        for flag in flags:
            assert flag in out, (name, flag)


# ---------------------------------------------------------------------------
# the demo corpus


def test_demo_corpus_is_what_the_generator_makes(tmp_path):
    p = subprocess.run([sys.executable, str(REPO / "data" / "make_demo_corpus.py"), str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "demo.train").read_bytes() == DEMO_TRAIN.read_bytes()
    assert (tmp_path / "demo.test").read_bytes() == DEMO_TEST.read_bytes()


@pytest.mark.parametrize("path, n", [(DEMO_TRAIN, 1500), (DEMO_TEST, 300)])
def test_demo_corpus_is_valid_conll2000(path, n):
    assert path.stat().st_size < 300_000
    text = path.read_text(encoding="utf-8")
    sents = blocks(text)
    assert len(sents) == n
    for lines in sents:
        prev = "O"
        for line in lines:
            fields = line.split("\t")           # tab-separated (see make_demo_corpus.py)
            assert len(fields) == 3, line
            label = fields[2]
            assert label == "O" or label[:2] in ("B-", "I-"), line
            if label.startswith("I-"):  # IOB2: I-X only continues a chunk of type X
                assert prev[2:] == label[2:], (prev, line)
            prev = label


def test_demo_test_has_unseen_words():
    train_words = {line.split(" ")[0] for line in DEMO_TRAIN.read_text().splitlines() if line}
    test_words = [line.split(" ")[0] for line in DEMO_TEST.read_text().splitlines() if line]
    unseen = sum(w not in train_words for w in test_words) / len(test_words)
    assert 0.02 < unseen < 0.2


# ---------------------------------------------------------------------------
# what a new user trips on


def test_eval_of_tag_v_output_says_which_columns_to_pass(tiny, tmp_path):
    tagged_v = write(tmp_path / "v.txt", cli("tag", "-v", "-m", tiny.model, tiny.train).stdout)
    p = run("eval", tagged_v)
    assert_error(p, "probabilities", "--gold-col -3 --pred-col -2")
    assert p.returncode == 1
    assert eval_json("--gold-col", -3, "--pred-col", -2, tagged_v)["overall"]["f1"] == 100.0


def test_eval_of_tag_vv_output_says_which_columns_to_pass(tiny, tmp_path):
    tagged = write(tmp_path / "vv.txt", cli("tag", "-vv", "-m", tiny.model, tiny.train).stdout)
    k = len(TINY_LABELS)
    line = assert_error(run("eval", tagged), "label/probability", f"--gold-col {-(k + 3)} --pred-col {-(k + 2)}")
    assert "-vv" in line
    # the README's old recipe for -vv output (-3/-2) is caught too
    assert_error(run("eval", "--gold-col", -3, "--pred-col", -2, tagged), "label/probability")
    assert eval_json("--gold-col", -(k + 3), "--pred-col", -(k + 2), tagged)["overall"]["f1"] == 100.0


def test_eval_of_a_gold_only_file_is_an_error(tiny, tmp_path):
    # word POS chunk: the default columns are POS (as gold) and chunk (as predicted)
    assert_error(run("eval", tiny.train), "share no label", "tagged first")
    assert_error(run("eval", "--gold-col", -1, "--pred-col", -1, tiny.train), "same column")
    one = write(tmp_path / "one.txt", "a\nb\n")
    assert_error(run("eval", one), "1 column", "gold and a predicted label column")


def test_eval_of_nbest_output_scores_the_best_list_and_says_so(tiny, tmp_path):
    nbest = write(tmp_path / "n.txt", cli("tag", "-n", 3, "-m", tiny.model, tiny.train).stdout)
    plain = write(tmp_path / "p.txt", tiny.tagged)
    p = run("eval", "--json", nbest)
    assert p.returncode == 0, p.stderr
    assert "scoring the labeling of rank 0" in p.stderr
    best = json.loads(p.stdout)
    assert best["n_sentences"] == len(TINY) and best["nbest_rank"] == 0
    assert best["overall"] == eval_json(plain)["overall"]
    second = eval_json("--nbest-rank", 1, nbest)
    assert second["n_sentences"] == len(TINY) and second["overall"]["f1"] < 100.0
    # two files: gold from the corpus, predictions from n-best output
    assert eval_json(tiny.train, nbest)["overall"]["f1"] == 100.0


def test_eval_and_tag_of_empty_input_say_so(tiny, tmp_path):
    empty = write(tmp_path / "empty.txt", "")
    assert_error(run("eval", empty), "no tokens to score")
    p = run("tag", "-m", tiny.model, empty)
    assert p.returncode == 0 and p.stdout == ""
    assert "has no sentences to tag" in p.stderr


def test_outputs_are_checked_before_any_work(tiny, tmp_path):
    for args in (("train", "-t", tiny.template, "-m", tmp_path / "nodir" / "m.model", tiny.train),
                 ("train", "-t", tiny.template, "-m", tmp_path, tiny.train),
                 ("train", "-t", tiny.template, "-m", tmp_path / "m.model", "--trace", tmp_path / "no" / "t",
                  tiny.train),
                 ("induce", "-t", tiny.template, "-m", tmp_path / "nodir" / "m.model", tiny.train),
                 ("induce", "-t", tiny.template, "-m", tmp_path / "i.model", "--report", tmp_path / "no" / "r",
                  tiny.train),
                 ("tag", "-m", tiny.model, "-o", tmp_path / "nodir" / "out", tiny.train),
                 ("dump", tiny.model, "-o", tmp_path / "nodir" / "dump.txt")):
        p = run(*args)
        line = assert_error(p, "cannot write the")
        assert "does not exist" in line or "is a directory" in line
        assert "iter" not in p.stderr and "round" not in p.stderr
    assert listing(tmp_path) == []


def test_keep_last_ignores_the_dev_scores(demo, tmp_path):
    logs = []
    from crftk.commands.train import train as train_fn
    best = train_fn([demo.train], demo.template, dev_file=demo.dev, log=logs.append, max_iter=25, threads=1)
    last = train_fn([demo.train], demo.template, dev_file=demo.dev, log=logs.append, max_iter=25, threads=1,
                    keep="last")
    assert last.info["chosen_iteration"] == last.info["iterations"] == 25
    f1 = [r["dev_f1"] for r in best.info["history"]]
    assert best.info["chosen_iteration"] == 1 + f1.index(max(f1))
    assert any("--keep last" in line for line in logs)
    import numpy as np
    if best.info["chosen_iteration"] != 25:
        assert not np.array_equal(best.weights, last.weights)


def test_silent_no_ops_are_said(tiny, tmp_path):
    other = write(tmp_path / "other.tmpl", TEMPLATE + "Uw+1:%x[1,0]\n")
    p = run("train", "-t", other, "--init", tiny.model, "-m", tmp_path / "x.model", tiny.train)
    assert_error(p, "is not the template of the --init model")
    empty = write(tmp_path / "empty.tmpl", "# nothing\nB\n")
    p = run("train", "-t", empty, "-m", tmp_path / "e.model", "--max-iter", 3, tiny.train)
    assert p.returncode == 0 and "no U lines" in p.stderr and "transitions only" in p.stderr
    dev = write(tmp_path / "dev.txt", "a DT B-LST\nb NN B-LST\nc NN I-NP\n\nd X B-XX\n")
    p = run("train", "-t", tiny.template, "-m", tmp_path / "d.model", "--max-iter", 3, "--dev", dev, tiny.train)
    assert p.returncode == 0, p.stderr
    assert "2 labels never seen in training" in p.stderr and "B-LST (2 tokens), B-XX (1 token)" in p.stderr


def test_log_wording(tiny, tmp_path):
    p = run("train", "-t", tiny.template, "-m", tmp_path / "m.model", "--max-iter", 2, "-p", 1, tiny.train)
    assert "s, 1 thread)" in p.stderr and "1 threads" not in p.stderr
    assert "label bigram" in p.stderr and "0 transition attributes" not in p.stderr
    edge = write(tmp_path / "e.tmpl", TEMPLATE + "B1:%x[0,1]\n")
    p = run("train", "-t", edge, "-m", tmp_path / "e.model", "--max-iter", 2, tiny.train)
    assert "observation-conditioned transition attributes" in p.stderr


def test_click_usage_errors_take_crftks_form():
    p = run("train", "x.txt")
    assert p.returncode == 2
    line = assert_error(p, "missing option", "--model", "crftk train --help")
    assert not line.startswith("Error") and "Usage" not in p.stderr
    assert_error(run("frobnicate"), "no such command")
    assert_error(run("tag", "-m", "m", "-n", "x"), "--nbest")


# ---------------------------------------------------------------------------
# interrupts


def _default_sigint():
    # a test run started in the background inherits an ignored SIGINT, which Python then keeps
    # ignoring; the child must take Ctrl-C as a user's terminal would deliver it
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(*args, **kw):
    return subprocess.Popen([sys.executable, "-m", "crftk.cli", *[str(a) for a in args]],
                            stderr=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV,
                            preexec_fn=_default_sigint, **kw)


def _wait_for(stream, prefix):
    seen = []
    for line in stream:
        seen.append(line)
        if line.startswith(prefix):
            return seen
    raise AssertionError("never saw " + prefix + ": " + "".join(seen))


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupting_train_saves_the_weights_so_far_and_exits_130(tmp_path, sig):
    import signal
    data = write(tmp_path / "big.train", DEMO_TRAIN.read_text() * 6)     # slow enough to interrupt
    model = tmp_path / "m.model"
    proc = _start("train", "-t", CHUNKING_TEMPLATE, "-m", model, "--epsilon", 0, "--max-iter", 100000,
                  "-p", 1, data)
    _wait_for(proc.stderr, "iter    3")
    proc.send_signal(getattr(signal, sig))
    rest = proc.stderr.read()
    assert proc.wait(timeout=120) == 130, rest
    assert "interrupted after iteration" in rest and f"saved {model}" in rest
    assert rest.rstrip().splitlines()[-1] == "crftk: interrupted"
    info = info_json(model)["training"]
    assert info["interrupted"] and info["iterations"] >= 3
    assert listing(tmp_path) == ["big.train", "m.model"]          # no temporary file left


def test_terminating_tag_leaves_no_output(tmp_path, tiny):
    import signal
    out = tmp_path / "out.tagged"
    proc = _start("tag", "-m", tiny.model, "-o", out, "--batch-tokens", 5, "-", stdin=subprocess.PIPE)
    proc.stdin.write(conll_text(TINY))        # tag is now writing its temporary file and waits for more
    proc.stdin.flush()
    import time
    deadline = time.time() + 60
    while not any(p.name.startswith(".out.tagged.") for p in tmp_path.iterdir()):
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    assert proc.stderr.read().strip() == "crftk: interrupted"
    assert listing(tmp_path) == []


def test_pathological_input_is_refused_before_it_takes_the_memory(tiny, tmp_path):
    rows = [" ".join(row) for s in TINY for row in s] * 30            # no blank line: one "sentence"
    flat = write(tmp_path / "flat.txt", "\n".join(rows) + "\n")
    line = assert_error(run("tag", "-m", tiny.model, "--max-sentence-tokens", 100, flat), "flat.txt:101:",
                        "more than 100 tokens", "blank line missing")
    assert "(from line 1)" in line
    assert_error(run("train", "-t", tiny.template, "-m", tmp_path / "m.model", "--max-sentence-tokens", 100,
                     flat), "flat.txt:101:")
    ok = run("tag", "-m", tiny.model, "--max-sentence-tokens", len(rows), flat)
    assert ok.returncode == 0 and len(ok.stdout.splitlines()) == len(rows) + 1
    # n-best tables too large for memory: one line, before any allocation (-n itself is at most
    # MAX_NBEST, so it takes a sentence of ~20,000 tokens to reach the limit)
    long_flat = write(tmp_path / "long.txt", "\n".join(rows * 40) + "\n")
    assert_error(run("tag", "-m", tiny.model, "-p", 1, "-n", MAX_NBEST, long_flat),
                 f"{MAX_NBEST}-best lists of a sentence of {len(rows) * 40} tokens", "GiB")
    assert listing(tmp_path) == ["flat.txt", "long.txt"]


def test_label_errors_name_file_and_line_and_cut_long_values(tiny, tmp_path):
    bad = write(tmp_path / "bad.tagged", "a DT B-NP B-NP\nb NN I-NP E-NP\n")
    assert_error(run("eval", "--scheme", "iob2", bad), "bad.tagged:2: predicted tag 'E-NP' is not valid")
    huge = "I-" + "X" * 1_000_000
    data = write(tmp_path / "huge.txt", conll_text(TINY) + f"x NN O\ny NN {huge}\n")
    line = assert_error(run("train", "-q", "-t", tiny.template, "-m", tmp_path / "m.model", "--constraints",
                            "iob2", data), f"huge.txt:{len(conll_text(TINY).splitlines()) + 2}:", "'O' followed by")
    assert len(line) < 700 and "(1,000,002 characters)" in line
    pipes = write(tmp_path / "pipes.txt", "a DT B|NP\n")
    assert_error(run("train", "-q", "-t", tiny.template, "-m", tmp_path / "o.model", "--order", 2, pipes),
                 "pipes.txt:1: label 'B|NP' cannot be used with --order 2")
    other = write(tmp_path / "other.txt", conll_text(TINY) + "q NN B-NEW\n")
    assert_error(run("train", "-q", "--init", tiny.model, "--init-space", "keep", "-m", tmp_path / "i.model", other),
                 f"other.txt:{len(conll_text(TINY).splitlines()) + 1}: label 'B-NEW' is not one of")
    assert listing(tmp_path) == ["bad.tagged", "huge.txt", "other.txt", "pipes.txt"]


# ---------------------------------------------------------------------------
# numbers a user or a file gives are bounded: one line, exit 1 or 2, never a traceback,
# a crash, a hang or gigabytes of memory (issue 13; the cases were found by fuzzing)


def run_bounded(*args, cwd=None, timeout=120):
    """run() with 2 GB of address space and a time limit, so that an unbounded number fails
    the test quickly instead of taking the machine's memory or hanging."""
    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (2 * 2**30, 2 * 2**30))
    return subprocess.run([sys.executable, "-m", "crftk.cli", *[str(a) for a in args]], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, preexec_fn=limit, env=ENV)


@pytest.mark.parametrize("macro, what", [
    ("%x[0,\u00b2]", "the column must be an integer"),         # was a ValueError traceback
    ("%x[0,\u2460]", "the column must be an integer"),         # was a ValueError traceback
    ("%pre[0,0,\u00b2]", "lengths must be integers"),          # was a ValueError traceback
    ("%x[10000000,0]", "the row must be an integer from -100 to 100"),   # took 3.6 GB, wrote 358 MB
    ("%ngram[0,0,1,100000000]", "lengths must be integers from 1 to 100"),   # hung
])
def test_template_numbers_out_of_bounds_are_one_line_errors(errdir, macro, what):
    write(errdir / "bad.tmpl", f"# comment\nU00:%x[0,0]\nU01:{macro}\nB\n")
    before = listing(errdir)
    p = run_bounded("train", "-t", "bad.tmpl", "-m", "out.model", "--max-iter", 5, "good.txt", cwd=errdir)
    assert p.returncode == 1
    assert_error(p, "bad.tmpl:3: bad macro", what)
    assert listing(errdir) == before


def test_template_with_a_byte_order_mark_is_read_like_a_conll_file_with_one(errdir):
    (errdir / "bom.tmpl").write_bytes(b"\xef\xbb\xbf" + TEMPLATE.encode("utf-8"))
    p = run("train", "-q", "-t", "bom.tmpl", "-m", "bom.model", "--max-iter", 5, "good.txt", cwd=errdir)
    assert p.returncode == 0, p.stderr
    assert info_json(errdir / "bom.model")["templates"]["state"] == 4


def test_model_whose_template_has_a_huge_offset_fails_at_load(tiny, tmp_path):
    from crftk.io.container import read_container, write_container
    meta, arrays = read_container(tiny.model)
    space = meta["parts"][0]["space"]
    assert "%x[-1,0]" in space["template"]
    space["template"] = space["template"].replace("%x[-1,0]", "%x[-300000000,0]")
    model = tmp_path / "huge-offset.model"
    write_container(model, meta, {name: a.copy() for name, a in arrays.items()})
    for args in (["tag", "-m", model, "-o", tmp_path / "out.txt", tiny.train], ["info", model], ["dump", model]):
        p = run_bounded(*args)     # was: 11 GB, a minute, then 'out of memory'
        assert p.returncode == 1
        assert_error(p, f"{model}: the model's template", "the row must be an integer from -100 to 100")
    assert listing(tmp_path) == ["huge-offset.model"]


@pytest.mark.parametrize("option, value", [
    ("--c2", "inf"),        # tracebacks
    ("--c1", "inf"),
    ("--c1", "nan"),
    ("--epsilon", "nan"),
    ("--c2", "nan"),        # trained to the end, then failed at save
    ("--epsilon", "inf"),
    ("--c2", "-1"),
    ("--max-iter", "100000000000000000000"),
    ("--history", "1000000000"),
])
def test_train_option_values_out_of_bounds_are_usage_errors(errdir, option, value):
    before = listing(errdir)
    p = run("train", "-t", "t.tmpl", "-m", "out.model", "--max-iter", 5, option, value, "good.txt", cwd=errdir)
    assert p.returncode == 2
    assert_error(p, f"invalid value for '{option}'", repr(value), "is not a")
    assert listing(errdir) == before


@pytest.mark.parametrize("args, message", [
    (["--algorithm", "sgd", "--c2", 0], "--algorithm sgd needs --c2 > 0"),
    (["--algorithm", "cg", "--c1", 1], "--algorithm cg supports L2 only"),
    (["--objective", "mce-f"], "--objective mce-f is not continuous"),
    (["--order", 2, "--algorithm", "perceptron"], "--order 2 trains with --algorithm lbfgs or quickprop"),
])
def test_options_that_do_not_go_together_are_usage_errors(errdir, args, message):
    before = listing(errdir)
    p = run("train", "-t", "t.tmpl", "-m", "out.model", *args, "good.txt", cwd=errdir)
    assert p.returncode == 2          # as click's own usage errors, not 1 (a data error)
    assert_error(p, message)
    assert listing(errdir) == before


def test_train_without_a_template_is_a_usage_error(errdir):
    p = run("train", "-m", "out.model", "good.txt", cwd=errdir)
    assert p.returncode == 2
    assert_error(p, "train needs --template (or --init MODEL)")


@pytest.mark.parametrize("n", [10**20, 1001])
def test_tag_nbest_beyond_the_bound_is_a_usage_error(tiny, tmp_path, n):
    p = run("tag", "-m", tiny.model, "-n", n, "-o", tmp_path / "out.txt", tiny.train)
    assert p.returncode == 2
    assert_error(p, "'--nbest'", "is not an integer from 0 to 1,000")
    assert listing(tmp_path) == []


def test_tag_nbest_at_the_bound_works(tiny):
    out = cli("tag", "-m", tiny.model, "-n", 1000, tiny.train).stdout
    assert out.count("# nbest 0 ") == len(TINY)


@pytest.mark.parametrize("threads", [100_000, 40_000])
def test_thread_counts_beyond_the_cap_warn_and_run(tiny, tmp_path, threads):
    from crftk.params import thread_cap
    p = run_bounded("tag", "-m", tiny.model, "-p", threads, tiny.train)   # was: a crash (exit 139)
    assert p.returncode == 0, p.stderr
    assert p.stdout == tiny.tagged
    assert p.stderr.splitlines() == [f"crftk: warning: --threads {threads:,} is more than 4 threads per core "
                                     f"({thread_cap() // 4} cores): using {thread_cap()}"]
    p = run_bounded("train", "-q", "-t", tiny.template, "-m", tmp_path / "m.model", "--max-iter", 5,
                    "-p", threads, tiny.train)
    assert p.returncode == 0 and p.stderr.count("\n") == 1 and "crftk: warning: --threads" in p.stderr
    assert info_json(tmp_path / "m.model")["training"]["threads"] == thread_cap()


def test_induce_thread_count_beyond_the_cap_warns_and_runs(tmp_path):
    data = write(tmp_path / "train.txt", head_sentences(DEMO_TRAIN, 50))
    p = run_bounded("induce", "-q", "-t", REPO / "templates" / "chunking-atomic.tmpl", "-m", tmp_path / "m.model",
                    "--rounds", 1, "-p", 100_000, data)
    assert p.returncode == 0, p.stderr
    assert p.stderr.startswith("crftk: warning: --threads 100,000 is more than") and p.stderr.count("\n") == 1


# the fewest arguments that get each command as far as converting its options
_COMMAND_ARGS = {"train": ["x.txt", "-m", "m"], "induce": ["x.txt", "-m", "m", "-t", "t"], "tag": ["-m", "m"],
                 "eval": ["x.txt"], "lexicon": ["x.txt", "-o", "d"], "info": ["m"], "dump": ["m"],
                 "compose": ["-m", "a", "-m", "b", "-o", "p"],
                 "bag": ["x.txt", "-m", "m", "-t", "t"]}


def _numeric_options():
    """(command, option) for every option of every command that takes a number."""
    from crftk.params import Encoding, LabelCell
    out = []
    for name, command in main.commands.items():
        for param in command.params:
            if (isinstance(param, click.Option) and not param.is_flag and not param.count
                    and not isinstance(param.type, (click.Choice, Encoding, LabelCell)) and param.type is not click.STRING):
                out.append((name, param))
    return out


def test_every_numeric_option_of_every_command_is_bounded():
    from crftk.params import Integer, Real
    options = _numeric_options()
    assert {name for name, _ in options} >= {"train", "induce", "tag", "eval", "lexicon", "dump"}
    assert len(options) >= 40
    for name, param in options:
        assert isinstance(param.type, (Integer, Real)), (name, param.name, param.type)


@pytest.mark.parametrize("name, param", _numeric_options(), ids=lambda x: getattr(x, "name", x))
def test_every_numeric_option_rejects_what_is_out_of_bounds(name, param):
    from crftk.params import Real
    t = param.type
    bad = ["nan", "inf", "-inf", "1e400"] if isinstance(t, Real) else ["1.5", "x", "9" * 5000]
    if t.max is not None:
        bad.append(str(t.max * 2 if isinstance(t, Real) else t.max + 1))
    if t.min is not None:
        bad.append(str(t.min - 1))
    for value in bad:
        r = make_runner().invoke(main, [name, *_COMMAND_ARGS[name], param.opts[0], value])
        assert r.exit_code == 2, (name, param.opts, value, r.output)
        assert r.exception is None or isinstance(r.exception, SystemExit)
        assert f"invalid value for '{param.opts[0]}'" in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_cli_options_and_library_checks_share_one_declaration():
    from crftk.commands.induce import INDUCE_PARAMS
    from crftk.commands.train import TRAIN_PARAMS
    for command, params in (("train", TRAIN_PARAMS), ("induce", INDUCE_PARAMS)):
        options = {p.name: p for p in main.commands[command].params}
        for p in params:
            if p.name != "threads" and not p.choices:
                assert options[p.name].type is p.type, (command, p.name)


def test_tag_with_more_than_two_v_is_a_usage_error(tiny, tmp_path):
    p = run("tag", "-m", tiny.model, "-vvv", "-o", tmp_path / "out.txt", tiny.train)
    assert p.returncode == 2
    assert_error(p, "'-v'", "3 is not in the range")
    assert listing(tmp_path) == []


def test_mcnemar_on_different_gold_names_the_first_differing_line(tmp_path):
    write(tmp_path / "a.txt", "the DT B-NP B-NP\nfox NN I-NP I-NP\n\nruns VBZ B-VP B-VP\n")
    write(tmp_path / "b.txt", "the DT B-NP B-NP\nfox NN I-NP I-NP\n\nruns VBZ B-NP B-VP\n")
    p = run("eval", "a.txt", "--mcnemar", "b.txt", cwd=tmp_path)
    assert p.returncode == 1
    assert_error(p, "b.txt:4: the two systems' outputs do not share the same gold labels",
                 "gold 'B-NP' here, 'B-VP' in the first output")
    write(tmp_path / "c.txt", "the DT B-NP B-NP\nfox NN I-NP I-NP\n")
    p = run("eval", "a.txt", "--mcnemar", "c.txt", cwd=tmp_path)
    assert p.returncode == 1
    assert_error(p, "c.txt: the two systems' outputs do not share the same gold labels",
                 "1 sentence here, 2 in the first output")
