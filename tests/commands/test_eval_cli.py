"""crftk eval on what each kind of model writes: the columns eval refuses, the columns it says to
pass instead (each hint is run), token accuracy for labels that are not chunk tags, and
--nbest-rank. Tiny models (5 iterations) on a slice of the demo corpus; CliRunner in-process."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from crftk.cli import main
from corpora import CONLL2003, REPO

DEMO_TRAIN = REPO / "data" / "demo.train"
DEMO_TEST = REPO / "data" / "demo.test"
CONLL2003_TESTA = CONLL2003 / "eng.testa"

# Every template reads the POS column (1) at offset 0 only, so that a pipeline of a POS tagger
# and this chunker decodes exactly (--decode joint).
POS_TEMPLATE = "Uw-1:%x[-1,0]\nUw0:%x[0,0]\nUw+1:%x[1,0]\nB\n"
CHUNK_TEMPLATE = "Uw0:%x[0,0]\nUw-1:%x[-1,0]\nUp0:%x[0,1]\nUwp:%x[0,0]/%x[0,1]\nB\n"
BAG_TEMPLATES = ("Uw0:%x[0,0]\nUw-1:%x[-1,0]\nB\n", "Up0:%x[0,1]\nUp-1:%x[-1,0]/%x[0,1]\nB\n")


def blocks(path, n):
    return "\n\n".join(Path(path).read_text(encoding="utf-8").split("\n\n")[:n]) + "\n\n"


def invoke(*args, input=None):
    result = CliRunner().invoke(main, [str(a) for a in args], input=input)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def ok(*args, input=None):
    result = invoke(*args, input=input)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def error(*args, input=None):
    """The one 'crftk: error:' line of a run that exits 1."""
    result = invoke(*args, input=input)
    assert result.exit_code == 1, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("crftk: error: "), result.stderr
    return lines[0]


def hints(message):
    """The column options an error says to pass: the single pair first, then every pair."""
    found = re.findall(r"(?:pass|, or) ((?:--gold-col -?\d+ --pred-col -?\d+ ?)+)", message)
    assert found, message
    return [h.split() for h in found]


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """A plain CRF, a bag, a pipeline (POS tagger -> chunker) and a factorial model, and test data."""
    d = tmp_path_factory.mktemp("kinds")
    k = {"dir": d}
    train, test = d / "train.txt", d / "test.txt"
    train.write_text(blocks(DEMO_TRAIN, 150), encoding="utf-8")
    test.write_text(blocks(DEMO_TEST, 25), encoding="utf-8")
    k["train"], k["test"] = train, test
    k["words_pos"] = d / "test.wp"        # the pipeline's input without the chunk column
    k["words_pos"].write_text("".join(" ".join(line.split()[:2]) + "\n"
                                      for line in test.read_text().splitlines()), encoding="utf-8")
    for name, text in (("pos.tmpl", POS_TEMPLATE), ("chunk.tmpl", CHUNK_TEMPLATE),
                       ("bag0.tmpl", BAG_TEMPLATES[0]), ("bag1.tmpl", BAG_TEMPLATES[1])):
        (d / name).write_text(text)
    fast = ("-q", "--max-iter", 5, "-p", 1)
    k["plain"] = d / "plain.model"
    ok("train", *fast, "-t", d / "chunk.tmpl", "-m", k["plain"], train)
    ok("train", *fast, "-t", d / "pos.tmpl", "-m", d / "pos.model", "--label-col", 1, train)
    k["pipeline"] = d / "pc.pipeline"
    ok("compose", "-m", d / "pos.model", "-m", k["plain"], "--feed", 1, "-o", k["pipeline"])
    k["factorial"] = d / "f.model"
    ok("train", "-q", "--max-iter", 5, "-t", d / "pos.tmpl", "-m", k["factorial"], "--label-col", 1,
       "--label-col", 2, train)
    k["bag"] = d / "b.bag"
    ok("bag", *fast, "-t", d / "bag0.tmpl", "-t", d / "bag1.tmpl", "-m", k["bag"], "--dev", test, train)
    k["pos"] = d / "pos.model"
    return k


def tagged(kinds, model, *options, data=None):
    name = "-".join([Path(str(model)).stem, *[str(o).strip("-") for o in options], "out"])
    path = kinds["dir"] / name
    path.write_text(ok("tag", "-m", kinds[model], *options, data or kinds["test"]), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# every model kind's output: the default columns, or the hint eval gives, score it


@pytest.mark.parametrize("model, options, n_pairs", [
    ("plain", (), 0),                       # word POS chunk predicted: the default columns
    ("plain", ("-v",), 1),                  # ... probability
    ("plain", ("-vv",), 1),                 # ... probability label/probability per label
    ("plain", ("-n", 2), 0),
    ("plain", ("-n", 2, "-v"), 1),
    ("bag", ("-v",), 1),
    ("bag", ("-vv",), 1),
    ("pipeline", (), 2),                    # word POS chunk POS' chunk'
    ("pipeline", ("-v",), 2),               # word POS chunk POS' p chunk' p
    ("pipeline", ("-n", 2), 2),
    ("pipeline", ("--decode", "cascade"), 2),
    ("factorial", (), 2),                   # word POS chunk POS' chunk'
])
def test_each_model_kinds_output_is_scored_by_the_default_or_the_hinted_columns(kinds, model, options, n_pairs):
    out = tagged(kinds, model, *options)
    if n_pairs == 0:
        assert json.loads(ok("eval", "--json", out))["overall"]["n_gold"] > 0
        return
    message = error("eval", out)
    found = hints(message)
    assert len(found) == n_pairs, message          # the last column's pair, then every pair
    last = json.loads(ok("eval", "--json", *found[0], out))
    assert last["chunk_tags"] and last["overall"]["n_gold"] > 0 and last["overall"]["f1"] > 0
    if n_pairs > 1:
        every = json.loads(ok("eval", "--json", *found[1], out))
        assert [c["chunk_tags"] for c in every["columns"]] == [False, True]   # POS, then chunks
        assert every["columns"][1]["overall"] == last["overall"]
        assert 0 < every["joint_accuracy"] <= every["columns"][0]["token_accuracy"]


def test_pipeline_output_without_gold_chunks_hints_the_pos_pair_and_says_the_chunks_have_no_gold(kinds):
    out = tagged(kinds, "pipeline", "--decode", "cascade", data=kinds["words_pos"])  # word POS POS' chunk'
    message = error("eval", out)
    assert "share no label" in message and "column -1 has no gold column" in message
    [pair] = hints(message)
    assert pair == ["--gold-col", "-3", "--pred-col", "-2"]
    assert "token accuracy" in ok("eval", *pair, out)


def test_v_output_without_a_gold_column_says_so(kinds):
    out = tagged(kinds, "plain", "-v", data=kinds["words_pos"])                 # word POS chunk' p
    message = error("eval", out)
    assert "probabilities" in message and "tagged without its gold column" in message


def test_two_files_hint_the_predicted_column_of_v_output(kinds):
    out = tagged(kinds, "plain", "-v")
    message = error("eval", kinds["test"], out)
    [pair] = hints(message)
    assert pair == ["--gold-col", "-1", "--pred-col", "-2"]
    assert json.loads(ok("eval", "--json", *pair, kinds["test"], out))["overall"]["f1"] > 0


def test_the_old_v_recipe_on_pipeline_v_output_is_refused_with_the_right_one(kinds):
    out = tagged(kinds, "pipeline", "-v")
    message = error("eval", "--gold-col", -3, "--pred-col", -2, out)   # -3 is a probability
    assert "gold column (-3) holds probabilities" in message
    assert hints(message)[0] == ["--gold-col", "-5", "--pred-col", "-2"]


# ---------------------------------------------------------------------------
# columns of two tasks


CONLL2003_LIKE = """\
-DOCSTART- -X- -X- O

EU NNP B-NP B-ORG
rejects VBZ B-VP O
German JJ B-NP B-MISC
call NN I-NP O
to TO B-VP O
boycott VB I-VP O
British JJ B-NP B-MISC
lamb NN I-NP O
. . O O

Peter NNP B-NP B-PER
Blackburn NNP I-NP I-PER

BRUSSELS NNP B-NP B-LOC
1996-08-22 CD I-NP O

"""


def test_an_untagged_file_of_chunk_and_ner_columns_is_refused(tmp_path):
    untagged = tmp_path / "testa.txt"
    untagged.write_text(CONLL2003_LIKE * 3)
    # 18 entity tokens: few enough for a poor tagger to miss every gold type, so scored
    assert "processed" in ok("eval", untagged)
    untagged.write_text(CONLL2003_LIKE * 2 + CONLL2003_LIKE.replace("-DOCSTART- -X- -X- O\n\n", "") * 2)
    message = error("eval", untagged)
    assert "share no chunk type (gold: NP, VP; predicted: LOC, MISC, ORG, PER)" in message
    assert "tagged first" in message
    # the two columns again, as two files
    error_two = error("eval", "--pred-col", -2, untagged, untagged)
    assert "share no chunk type" in error_two
    assert hints(error_two) == [["--gold-col", "-1", "--pred-col", "-1"]]


@pytest.mark.skipif(not CONLL2003_TESTA.exists(), reason="CoNLL-2003 is not on this machine")
def test_eng_testa_untagged_is_refused():
    message = error("eval", CONLL2003_TESTA)
    assert "share no chunk type" in message and "tagged first" in message


def test_columns_of_one_task_are_scored_however_badly_they_agree(tmp_path):
    # a tagger that finds no entity, a gold without entities, the wrong types on a short file,
    # one type only, IOB2 predictions against IOBES gold (no label in common, the type PER)
    rows = {
        "all-O predictions": [("B-PER", "O"), ("I-PER", "O"), ("O", "O")] * 20,
        "gold without entities": [("O", "B-PER"), ("O", "I-PER"), ("O", "O")] * 20,
        "wrong types, short": [("B-PER", "B-LOC"), ("I-PER", "I-LOC"), ("O", "O")] * 6,
        "one type": [("B-PER", "B-PER"), ("I-PER", "O"), ("O", "B-PER")] * 20,
        "IOBES against IOB2": [("S-PER", "B-PER"), ("O", "O"), ("S-PER", "O")] * 20,
        "POS": [("NN", "NN"), ("DT", "NN"), ("VB", "JJ")] * 20,
    }
    for what, pairs in rows.items():
        path = tmp_path / "f.txt"
        path.write_text("".join(f"w {g} {p}\n" + ("\n" if i % 5 == 4 else "") for i, (g, p) in enumerate(pairs)))
        assert invoke("eval", path).exit_code == 0, what


# ---------------------------------------------------------------------------
# labels that are not chunk tags


def test_a_pos_column_is_scored_by_token_accuracy(kinds):
    out = tagged(kinds, "pos")                         # word POS chunk POS'
    text = ok("eval", "--gold-col", 1, out)
    assert "not chunk tags" in text and "token accuracy" in text
    assert "FB1" not in text and "phrases" not in text
    rows = [line.split() for line in out.read_text().splitlines() if line]
    right = sum(r[1] == r[-1] for r in rows)
    assert f"({right} of {len(rows)} tokens correct)" in text
    doc = json.loads(ok("eval", "--json", "--gold-col", 1, out))
    assert doc["chunk_tags"] is False and doc["token_accuracy"] == pytest.approx(100 * right / len(rows))


# ---------------------------------------------------------------------------
# --nbest-rank


def test_nbest_rank_counts_from_0_and_a_missing_rank_is_an_error(kinds):
    out = tagged(kinds, "plain", "-n", 3)
    assert json.loads(ok("eval", "--json", "--nbest-rank", 2, out))["nbest_rank"] == 2
    message = error("eval", "--nbest-rank", 3, out)
    assert "no labeling of nbest rank 3" in message and "ranks 0 to 2" in message and "count from 0" in message
    assert "counted from 0" in ok("eval", "--help")
    plain = tagged(kinds, "plain")
    assert "not n-best output" in error("eval", "--nbest-rank", 1, plain)


def test_nbest_rank_that_a_short_sentence_lacks_names_it(tmp_path, kinds):
    data = tmp_path / "short.txt"     # a one-token sentence has fewer labelings than the others
    data.write_text(blocks(kinds["test"], 2) + "Yes UH B-INTJ\n\n")
    k = 30
    out = tmp_path / "n.out"
    out.write_text(ok("tag", "-m", kinds["plain"], "-n", k, data))
    n_short = sum(1 for line in out.read_text().splitlines() if line.startswith("# nbest")) - 2 * k
    assert 0 < n_short < k
    message = error("eval", "--nbest-rank", n_short, out)
    first = [line.split()[:1] for line in out.read_text().splitlines()].index(["Yes"]) + 1  # its first labeling
    assert f"n.out:{first}: this sentence has {n_short} labelings (ranks 0 to {n_short - 1})" in message
    assert json.loads(ok("eval", "--json", "--nbest-rank", n_short - 1, out))["n_sentences"] == 3
