"""Tests for crftk.evaluation.conlleval: conlleval-style chunk scoring, McNemar, readers.

Every expected value below is worked out by hand in the comments.
"""

import io
import json
import math
import sys

import pytest

from crftk.errors import CrftkError
import crftk
from crftk.evaluation.conlleval import (are_chunk_tags, chunks, evaluate, mcnemar, read_labels, read_pairs,
                                       read_two)


def scores(obj):
    return (obj.n_gold, obj.n_pred, obj.n_correct)


# ---------------------------------------------------------------------------
# chunk extraction


def test_iob2_perfect_match():
    # B-NP I-NP | O | B-VP | B-NP  ->  NP[0,2) VP[3,4) NP[4,5)
    tags = ["B-NP", "I-NP", "O", "B-VP", "B-NP"]
    assert chunks(tags) == [("NP", 0, 2), ("VP", 3, 4), ("NP", 4, 5)]
    e = evaluate([tags], [list(tags)])
    assert scores(e.overall) == (3, 3, 3)
    assert e.overall.precision == 100.0
    assert e.overall.recall == 100.0
    assert e.overall.f1 == 100.0
    assert e.token_accuracy == 1.0 and e.sentence_accuracy == 1.0
    assert scores(e.per_type["NP"]) == (2, 2, 2)
    assert scores(e.per_type["VP"]) == (1, 1, 1)


def test_iob1():
    # I-NP at 0 follows the sentence boundary (O): starts a chunk.
    # I-NP at 1 continues it.  B-NP at 2 (after I) ends it and starts a new
    # one: NP[0,2), NP[2,3).  O ends.  I-VP after O starts VP at 4; I-PP is a
    # type change: VP[4,5), PP[5,6), closed by the sentence end.
    tags = ["I-NP", "I-NP", "B-NP", "O", "I-VP", "I-PP"]
    assert chunks(tags) == [("NP", 0, 2), ("NP", 2, 3), ("VP", 4, 5), ("PP", 5, 6)]
    assert chunks(tags, scheme="iob1") == chunks(tags)


def test_quirk_i_after_o_starts_chunk():
    # conlleval: "O I-NP I-NP" is one chunk starting at the first I.
    assert chunks(["O", "I-NP", "I-NP"]) == [("NP", 1, 3)]
    assert chunks(["O", "I-NP", "I-NP", "O"]) == [("NP", 1, 3)]


def test_type_change_mid_chunk():
    # I-NP -> I-VP: different type ends NP[0,2) and starts VP[2,4).
    assert chunks(["B-NP", "I-NP", "I-VP", "I-VP", "O"]) == [("NP", 0, 2), ("VP", 2, 4)]
    # B-NP -> I-VP as well (IOB2 input with a bad I).
    assert chunks(["B-NP", "I-VP"]) == [("NP", 0, 1), ("VP", 1, 2)]


def test_single_token_chunk():
    assert chunks(["O", "B-NP", "O"]) == [("NP", 1, 2)]
    assert chunks(["B-NP"]) == [("NP", 0, 1)]
    assert chunks(["O", "O"]) == []
    assert chunks([]) == []


def test_type_split_on_first_dash():
    # "B-X-Y" is prefix B, type "X-Y"; "I-X-Y" continues it.
    assert chunks(["B-X-Y", "I-X-Y", "I-X"]) == [("X-Y", 0, 2), ("X", 2, 3)]


def test_ioe1_and_ioe2():
    # IOE1: E only between adjacent same-type chunks.
    # I-NP(0) after O starts; E-NP(1) continues; I-NP(2) after E: the E ended
    # NP[0,2) and a new chunk starts; O ends NP[2,3).  I-VP after O starts at
    # 4, I-VP continues, sentence end closes VP[4,6).
    tags = ["I-NP", "E-NP", "I-NP", "O", "I-VP", "I-VP"]
    want = [("NP", 0, 2), ("NP", 2, 3), ("VP", 4, 6)]
    assert chunks(tags) == want
    assert chunks(tags, scheme="ioe1") == want
    # IOE2: every chunk ends in E.  I-NP E-NP -> NP[0,2); E-NP after E is a
    # new single-token chunk NP[2,3); O; E-VP after O -> VP[4,5).
    tags = ["I-NP", "E-NP", "E-NP", "O", "E-VP"]
    want = [("NP", 0, 2), ("NP", 2, 3), ("VP", 4, 5)]
    assert chunks(tags) == want
    assert chunks(tags, scheme="ioe2") == want


def test_iobes():
    # S-PER single; B I E ORG [1,4); B E LOC [4,6); S-LOC right after E-LOC is
    # its own chunk [6,7); O; S-MISC [8,9).
    tags = ["S-PER", "B-ORG", "I-ORG", "E-ORG", "B-LOC", "E-LOC", "S-LOC", "O", "S-MISC"]
    want = [("PER", 0, 1), ("ORG", 1, 4), ("LOC", 4, 6), ("LOC", 6, 7), ("MISC", 8, 9)]
    assert chunks(tags) == want
    assert chunks(tags, scheme="iobes") == want
    # E followed by B of the same type: two chunks, not one.
    assert chunks(["B-X", "E-X", "B-X", "E-X"]) == [("X", 0, 2), ("X", 2, 4)]
    # S S: two single chunks; S then I-X: the I starts a new chunk.
    assert chunks(["S-X", "S-X"]) == [("X", 0, 1), ("X", 1, 2)]
    assert chunks(["S-X", "I-X", "E-X"]) == [("X", 0, 1), ("X", 1, 3)]


def test_bracket_tags():
    # conlleval treats "[" and "]" tags as one-token chunks: "[" starts a
    # chunk and ends it at once, so the I-NP after it starts nothing (I only
    # starts a chunk after O/E/S or on a type change); "]" again makes a
    # one-token chunk.
    assert chunks(["O", "[-NP", "I-NP", "]-NP"]) == [("NP", 1, 2), ("NP", 3, 4)]
    assert chunks(["[-NP", "]-VP", "O"]) == [("NP", 0, 1), ("VP", 1, 2)]


def test_sentence_boundary_closes_chunk():
    # Sentence 1: B-NP I-NP -> NP[0,2), closed by the boundary.
    # Sentence 2: I-NP O -> the I after the boundary starts NP[0,1).
    # The prediction writes the second chunk as B-NP: same chunk, so both
    # chunks are correct although one token tag differs.
    gold = [["B-NP", "I-NP"], ["I-NP", "O"]]
    pred = [["B-NP", "I-NP"], ["B-NP", "O"]]
    e = evaluate(gold, pred)
    assert scores(e.overall) == (2, 2, 2)
    assert e.overall.f1 == 100.0
    assert e.n_tokens == 4 and e.n_sentences == 2
    assert e.token_accuracy == 0.75
    assert e.sentence_accuracy == 0.5


# A small corpus whose counts are worked out by hand; used by several tests.
#
# S1 gold B-NP I-NP I-NP O B-VP -> NP[0,3) VP[4,5)
#    pred B-NP I-NP O    O B-VP -> NP[0,2) VP[4,5)
#    right start, wrong end: NP not correct; VP correct.  tokens right: 4/5
# S2 gold = pred = B-PP B-NP I-NP -> PP[0,1) NP[1,3), both correct; 3/3
# S3 gold O    B-NP -> NP[1,2)
#    pred B-NP I-NP -> NP[0,2)   wrong start: not correct; tokens right 0/2
# S4 gold O    O    -> nothing
#    pred B-VP O    -> VP[0,1)   spurious; tokens right 1/2
#
# gold chunks: NP 3, VP 1, PP 1 = 5;  predicted: NP 3, VP 2, PP 1 = 6
# correct: NP 1 (S2), VP 1 (S1), PP 1 (S2) = 3
# precision 3/6 = 50%, recall 3/5 = 60%, F1 = 2*50*60/110 = 54.5454...%
# tokens 12, right 4+3+0+1 = 8 -> 66.67%; sentences right 1/4 (S2)
# NP: P = R = 1/3 = 33.33%; VP: P 1/2 = 50%, R 1/1 = 100%, F1 = 66.67%;
# PP: 100% everything.
GOLD = [
    ["B-NP", "I-NP", "I-NP", "O", "B-VP"],
    ["B-PP", "B-NP", "I-NP"],
    ["O", "B-NP"],
    ["O", "O"],
]
PRED = [
    ["B-NP", "I-NP", "O", "O", "B-VP"],
    ["B-PP", "B-NP", "I-NP"],
    ["B-NP", "I-NP"],
    ["B-VP", "O"],
]


def test_hand_worked_corpus():
    e = evaluate(GOLD, PRED)
    assert scores(e.overall) == (5, 6, 3)
    assert e.overall.precision == pytest.approx(50.0)
    assert e.overall.recall == pytest.approx(60.0)
    assert e.overall.f1 == pytest.approx(600.0 / 11.0)
    assert e.n_tokens == 12 and e.n_sentences == 4
    assert e.token_accuracy == pytest.approx(8 / 12)
    assert e.sentence_accuracy == pytest.approx(0.25)
    assert set(e.per_type) == {"NP", "VP", "PP"}
    assert scores(e.per_type["NP"]) == (3, 3, 1)
    assert e.per_type["NP"].precision == pytest.approx(100 / 3)
    assert e.per_type["NP"].recall == pytest.approx(100 / 3)
    assert scores(e.per_type["VP"]) == (1, 2, 1)
    assert e.per_type["VP"].precision == pytest.approx(50.0)
    assert e.per_type["VP"].recall == pytest.approx(100.0)
    assert e.per_type["VP"].f1 == pytest.approx(200 / 3)
    assert scores(e.per_type["PP"]) == (1, 1, 1)


def test_right_start_wrong_end_not_correct():
    # gold NP[0,3), pred NP[0,2): nothing correct; P, R, F1 all 0.
    e = evaluate([["B-NP", "I-NP", "I-NP"]], [["B-NP", "I-NP", "O"]])
    assert scores(e.overall) == (1, 1, 0)
    assert (e.overall.precision, e.overall.recall, e.overall.f1) == (0.0, 0.0, 0.0)


def test_undefined_scores_are_zero():
    # No chunks anywhere: P, R, F1 undefined -> 0, like conlleval.
    e = evaluate([["O", "O"]], [["O", "O"]])
    assert scores(e.overall) == (0, 0, 0)
    assert (e.overall.precision, e.overall.recall, e.overall.f1) == (0.0, 0.0, 0.0)
    assert e.per_type == {}
    e = evaluate([], [])
    assert e.n_tokens == 0 and e.token_accuracy == 0.0


def test_format_conlleval_layout():
    lines = evaluate(GOLD, PRED).format().splitlines()
    assert lines[0] == "processed 12 tokens with 5 phrases; found: 6 phrases; correct: 3."
    assert lines[1] == "accuracy:  66.67%; precision:  50.00%; recall:  60.00%; FB1:  54.55"
    # one line per type, sorted by name; the last number is the predicted count
    assert lines[2] == "               NP: precision:  33.33%; recall:  33.33%; FB1:  33.33  3"
    assert lines[3] == "               PP: precision: 100.00%; recall: 100.00%; FB1: 100.00  1"
    assert lines[4] == "               VP: precision:  50.00%; recall: 100.00%; FB1:  66.67  2"
    assert "sentence accuracy:  25.00%" in lines[5]
    assert len(lines) == 6


def test_to_dict_is_json():
    d = json.loads(json.dumps(evaluate(GOLD, PRED).to_dict()))
    assert d["n_tokens"] == 12
    assert d["overall"]["n_correct"] == 3
    assert d["overall"]["precision"] == pytest.approx(50.0)
    assert d["per_type"]["VP"]["n_pred"] == 2
    assert d["sentence_accuracy"] == pytest.approx(25.0)    # percent, like precision and F1


def test_length_mismatch_raises():
    with pytest.raises(CrftkError):
        evaluate([["O"]], [["O"], ["O"]])
    with pytest.raises(CrftkError, match="sentence 1"):
        evaluate([["O", "O"]], [["O"]])


def test_explicit_scheme_validation():
    with pytest.raises(CrftkError, match="'E-NP'"):
        chunks(["B-NP", "E-NP"], scheme="iob2")
    with pytest.raises(CrftkError, match="'S-X'"):
        evaluate([["B-X", "O"]], [["S-X", "O"]], scheme="iob1")
    with pytest.raises(CrftkError, match="'B-NP'"):
        chunks(["B-NP"], scheme="ioe2")
    with pytest.raises(CrftkError, match="scheme"):
        chunks(["O"], scheme="bilou")
    # the same tags are fine when the scheme allows them
    assert chunks(["B-NP", "E-NP"], scheme="iobes") == [("NP", 0, 2)]
    # auto accepts anything
    assert chunks(["B-NP", "E-NP", "S-X"]) == [("NP", 0, 2), ("X", 2, 3)]


# ---------------------------------------------------------------------------
# McNemar


def _pairs_to_sentences(outcomes, split):
    """Build gold/A/B sentences: outcomes are (a_right, b_right) per token."""
    gold, a, b = [], [], []
    for ar, br in outcomes:
        gold.append("X")
        a.append("X" if ar else "Y")
        b.append("X" if br else "Z")
    cut = lambda s: [s[:split], s[split:]]  # noqa: E731
    return cut(gold), cut(a), cut(b)


def test_mcnemar_exact_binomial():
    # A-only 7, B-only 2, both 5, neither 1 (15 tokens over 2 sentences).
    outcomes = [(1, 0)] * 7 + [(0, 1)] * 2 + [(1, 1)] * 5 + [(0, 0)]
    g, a, b = _pairs_to_sentences(outcomes, 6)
    r = mcnemar(g, a, b)
    assert (r.n_a_only, r.n_b_only, r.n_both, r.n_neither) == (7, 2, 5, 1)
    assert r.method == "exact-binomial"
    # two-sided exact binomial with n = 9, p = 1/2: twice the lower tail
    # P(K <= 2) = (C(9,0) + C(9,1) + C(9,2)) / 2^9 = 46/512.
    expected = 2 * sum(math.comb(9, i) for i in range(3)) / 2**9
    assert expected == pytest.approx(92 / 512)
    assert r.p_value == pytest.approx(expected)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["n_a_only"] == 7 and d["p_value"] == pytest.approx(expected)
    text = r.format()
    assert "7" in text and "p-value" in text


def test_mcnemar_symmetric_and_empty():
    # b == c -> p = 1
    g, a, b = _pairs_to_sentences([(1, 0), (0, 1), (1, 1)], 1)
    assert mcnemar(g, a, b).p_value == pytest.approx(1.0)
    # no discordant pairs -> p = 1
    g, a, b = _pairs_to_sentences([(1, 1), (0, 0)], 1)
    r = mcnemar(g, a, b)
    assert (r.n_a_only, r.n_b_only) == (0, 0)
    assert r.p_value == 1.0


def test_mcnemar_chi_square():
    # A-only 80, B-only 40: 120 >= 50 -> chi-square with continuity correction
    # (|80 - 40| - 1)^2 / 120 = 1521/120 = 12.675; for 1 df the survival
    # function is erfc(sqrt(x / 2)).
    outcomes = [(1, 0)] * 80 + [(0, 1)] * 40 + [(1, 1)] * 300 + [(0, 0)] * 10
    g, a, b = _pairs_to_sentences(outcomes, 200)
    r = mcnemar(g, a, b)
    assert (r.n_a_only, r.n_b_only, r.n_both, r.n_neither) == (80, 40, 300, 10)
    assert r.method == "chi2"
    assert r.statistic == pytest.approx(1521 / 120)
    assert r.p_value == pytest.approx(math.erfc(math.sqrt(1521 / 120 / 2)))


def test_mcnemar_threshold():
    # 49 discordant -> exact; 50 -> chi-square.
    g, a, b = _pairs_to_sentences([(1, 0)] * 30 + [(0, 1)] * 19, 10)
    assert mcnemar(g, a, b).method == "exact-binomial"
    g, a, b = _pairs_to_sentences([(1, 0)] * 30 + [(0, 1)] * 20, 10)
    assert mcnemar(g, a, b).method == "chi2"


def test_mcnemar_sentence_unit():
    # sentences: 1 both right, 3 only A right, 0 only B right, 1 neither.
    gold = [["B-NP"], ["O", "B-VP"], ["O"], ["B-PP"], ["O", "O"]]
    a = [["B-NP"], ["O", "B-VP"], ["O"], ["B-PP"], ["O", "B-NP"]]
    b = [["B-NP"], ["O", "I-VP"], ["B-NP"], ["O"], ["B-NP", "O"]]
    r = mcnemar(gold, a, b, unit="sentence")
    assert (r.n_a_only, r.n_b_only, r.n_both, r.n_neither) == (3, 0, 1, 1)
    # exact: 2 * P(K <= 0 | n = 3) = 2/8
    assert r.p_value == pytest.approx(2 * math.comb(3, 0) / 2**3)
    assert r.unit == "sentence"


def test_mcnemar_errors():
    with pytest.raises(CrftkError):
        mcnemar([["O"]], [["O"]], [["O"], ["O"]])
    with pytest.raises(CrftkError):
        mcnemar([["O"]], [["O"]], [["O", "O"]])
    with pytest.raises(CrftkError):
        mcnemar([["O"]], [["O"]], [["O"]], unit="word")


# ---------------------------------------------------------------------------
# readers

CONLL = """\
-DOCSTART- -X- O O

Confidence NN B-NP B-NP
in IN B-PP B-PP
the DT B-NP B-NP
pound NN I-NP I-VP

# prob 0.93
is VBZ B-VP B-VP
# nbest 0 0.01
widely RB I-VP O
-DOCSTART- -X- O O
He PRP B-NP B-NP
"""


def test_read_pairs_conlleval_layout(tmp_path):
    p = tmp_path / "out.txt"
    p.write_text(CONLL, encoding="utf-8")
    gold, pred = read_pairs(str(p))
    # DOCSTART lines are boundaries, not tokens (the second one splits
    # sentences even without a blank line); "# prob"/"# nbest" lines skipped.
    assert gold == [["B-NP", "B-PP", "B-NP", "I-NP"], ["B-VP", "I-VP"], ["B-NP"]]
    assert pred == [["B-NP", "B-PP", "B-NP", "I-VP"], ["B-VP", "O"], ["B-NP"]]
    # the same from a list of lines, and with explicit columns
    assert read_pairs(CONLL.splitlines()) == (gold, pred)
    g2, p2 = read_pairs(CONLL.splitlines(), gold_col=1, pred_col=2)
    assert g2[0] == ["NN", "IN", "DT", "NN"] and p2[0] == gold[0]


def test_read_pairs_stdin(monkeypatch):
    data = "a X B-NP B-NP\nb X I-NP O\n\nc X O O\n".encode("utf-8")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data), encoding="utf-8"))
    assert read_pairs("-") == ([["B-NP", "I-NP"], ["O"]], [["B-NP", "O"], ["O"]])


def test_read_pairs_column_count_error(tmp_path):
    p = tmp_path / "bad.txt"
    p.write_text("a X B-NP B-NP\nb X I-NP\n", encoding="utf-8")
    with pytest.raises(CrftkError) as ei:
        read_pairs(str(p))
    assert f"{p}:2:" in str(ei.value)
    assert ei.value.line == 2


def test_read_pairs_too_few_columns(tmp_path):
    p = tmp_path / "narrow.txt"
    p.write_text("\n# prob 0.5\nB-NP\n", encoding="utf-8")
    with pytest.raises(CrftkError) as ei:
        read_pairs(str(p))
    # the first token line is line 3
    assert f"{p}:3:" in str(ei.value)


def test_read_pairs_bad_utf8(tmp_path):
    p = tmp_path / "latin1.txt"
    p.write_bytes(b"a B-NP B-NP\n\xe9t\xe9 I-NP I-NP\n")
    with pytest.raises(CrftkError) as ei:
        read_pairs(str(p))
    assert f"{p}:2:" in str(ei.value)
    assert "UTF-8" in str(ei.value)


def test_read_pairs_missing_file(tmp_path):
    with pytest.raises(CrftkError):
        read_pairs(str(tmp_path / "nope.txt"))


def test_read_two(tmp_path):
    g = tmp_path / "gold.txt"
    p = tmp_path / "pred.txt"
    g.write_text("a DT B-NP\nb NN I-NP\n\nc VB B-VP\n", encoding="utf-8")
    p.write_text("a B-NP\nb B-NP\n\n# prob 0.9\nc O\n\n\n", encoding="utf-8")
    gold, pred = read_two(str(g), str(p))
    assert gold == [["B-NP", "I-NP"], ["B-VP"]]
    assert pred == [["B-NP", "B-NP"], ["O"]]
    e = evaluate(gold, pred)
    # gold NP[0,2) VP[0,1); pred NP[0,1) NP[1,2): nothing correct
    assert scores(e.overall) == (2, 2, 0)


def test_read_two_token_mismatch(tmp_path):
    g = tmp_path / "gold.txt"
    p = tmp_path / "pred.txt"
    # sentence 2 has 2 tokens in gold but 3 in pred; the extra pred token is on
    # pred line 6, and gold's sentence 2 ends at its line 6 (end of file).
    g.write_text("a B-NP\nb I-NP\n\nc B-VP\nd O\n", encoding="utf-8")
    p.write_text("a B-NP\nb I-NP\n\nc B-VP\nd O\ne O\n", encoding="utf-8")
    with pytest.raises(CrftkError) as ei:
        read_two(str(g), str(p))
    msg = str(ei.value)
    assert f"{g}:6" in msg and f"{p}:6" in msg


def test_read_two_sentence_mismatch(tmp_path):
    g = tmp_path / "gold.txt"
    p = tmp_path / "pred.txt"
    # pred splits gold's one sentence in two: sentence 1 is 2 tokens vs 1;
    # first mismatch is gold line 2 (token "b") vs pred line 2 (blank).
    g.write_text("a B-NP\nb I-NP\n", encoding="utf-8")
    p.write_text("a B-NP\n\nb I-NP\n", encoding="utf-8")
    with pytest.raises(CrftkError) as ei:
        read_two(str(g), str(p))
    msg = str(ei.value)
    assert f"{g}:2" in msg and f"{p}:2" in msg
    # an extra sentence at the end of pred
    p.write_text("a B-NP\nb I-NP\n\nc O\n", encoding="utf-8")
    with pytest.raises(CrftkError) as ei:
        read_two(str(g), str(p))
    assert f"{p}:4" in str(ei.value) and str(g) in str(ei.value)


# ---------------------------------------------------------------------------
# labels that are not chunk tags: token accuracy only


def test_pos_tags_are_not_chunk_tags():
    assert not are_chunk_tags(["NN", "PRP$", "-LRB-", "NN-TL", "O"])   # a dash, but no chunk prefix
    assert are_chunk_tags(["NN", "B-NP"]) and are_chunk_tags(["O"]) and are_chunk_tags(["S-PER", "E-LOC"])
    assert not are_chunk_tags(["B-"])                                    # a prefix without a type


def test_pos_labels_are_scored_by_token_accuracy():
    # 3 of 4 tokens right, 1 of 2 sentences
    e = evaluate([["DT", "NN"], ["VB", "-LRB-"]], [["DT", "NN"], ["VB", "NN"]])
    assert e.chunk_tags is False and e.token_accuracy == 0.75
    text = e.format()
    assert "not chunk tags" in text and "accuracy:  75.00% (3 of 4 tokens correct)" in text
    assert "FB1" not in text and "LRB" not in text
    assert e.to_dict()["chunk_tags"] is False
    chunked = evaluate([["B-NP", "I-NP"]], [["B-NP", "O"]])
    assert chunked.chunk_tags is True and "FB1" in chunked.format()
    assert crftk.evaluate([["NN"]], [["VB"]]).chunk_tags is False


# ---------------------------------------------------------------------------
# columns that cannot be a gold and a predicted labeling


def lines(pairs, extra=()):
    """'w EXTRA... GOLD PRED' rows, five tokens a sentence."""
    out = []
    for i, (g, p) in enumerate(pairs):
        out.append(" ".join(["w", *extra, g, p]))
        if i % 5 == 4:
            out.append("")
    return out


def test_columns_of_two_tasks_are_refused():
    # chunk and NER tags share O only; POS and chunk tags nothing: 20 tokens other than O each
    ner = [("B-NP", "B-PER"), ("I-NP", "I-PER"), ("B-VP", "O"), ("O", "O")] * 10
    with pytest.raises(CrftkError, match=r"share no chunk type \(gold: NP, VP; predicted: PER\).*tagged first"):
        read_labels(lines(ner))
    pos = [("NN", "B-NP"), ("DT", "I-NP")] * 10
    with pytest.raises(CrftkError, match=r"share no label \(gold: DT, NN; predicted: B-NP, I-NP\)"):
        read_labels(lines(pos))
    # 19 tokens other than O: a poor tagger of the same task could do that on a short file
    read_labels(lines(pos[:19]))
    read_labels(lines(ner[:37]))         # 19 entity tokens predicted
    with pytest.raises(CrftkError, match="share no chunk type"):
        read_labels(lines(ner[:38]))     # 20


@pytest.mark.parametrize("what, pairs", [
    ("a tagger that finds nothing", [("B-PER", "O"), ("I-PER", "O"), ("O", "O")] * 20),
    ("gold without chunks", [("O", "B-LOC"), ("O", "I-LOC"), ("O", "O")] * 20),
    ("a poor tagger of the same types", [("B-PER", "B-LOC"), ("I-PER", "O"), ("B-LOC", "O"), ("O", "B-PER")] * 20),
    ("one type", [("B-PER", "I-PER"), ("I-PER", "O"), ("O", "B-PER")] * 20),
    ("IOBES gold, IOB2 predictions", [("S-PER", "B-PER"), ("O", "O")] * 30),
    ("IOB1 gold, IOB2 predictions, no O", [("I-NP", "B-NP")] * 30),
    ("POS tags", [("NN", "NN"), ("DT", "JJ"), ("VB", "NN")] * 20),
    ("all O", [("O", "O")] * 30),
])
def test_columns_of_one_task_are_scored_however_poorly_they_agree(what, pairs):
    labels = read_labels(lines(pairs))
    assert sum(map(len, labels.gold)) == len(pairs)


def test_hints_pair_each_appended_column_with_its_gold():
    # word POS chunk NER POS' chunk' NER': three chains (or stages), the last pair first
    rows = [("NN", "B-NP", "B-PER", "NN", "B-NP", "B-PER"), ("VB", "B-VP", "O", "NN", "B-VP", "O"),
            ("DT", "B-NP", "O", "DT", "I-NP", "B-LOC"), ("NN", "I-NP", "O", "NN", "I-NP", "O")] * 10
    text = [" ".join(("w",) + r) if r else "" for r in rows]
    with pytest.raises(CrftkError) as ei:
        read_labels(text)
    message = str(ei.value)
    assert "pass --gold-col -4 --pred-col -1 (the last label column), or --gold-col -6 --pred-col -3 " \
           "--gold-col -5 --pred-col -2 --gold-col -4 --pred-col -1 to score each of the 3" in message
    # and with a probability after each predicted column (-v)
    text_v = [" ".join(f.split()[:4] + [f.split()[4], "0.5", f.split()[5], "0.25", f.split()[6], "1.0"])
              if f else "" for f in text]
    with pytest.raises(CrftkError, match=r"holds probabilities.*pass --gold-col -7 --pred-col -2 "):
        read_labels(text_v)
    assert read_labels(text_v, gold_col=-7, pred_col=-2).gold[0][0] == "B-PER"


# ---------------------------------------------------------------------------
# n-best ranks


NBEST = """\
# nbest 0 0.6
a B-NP B-NP
b I-NP I-NP

# nbest 1 0.3
a B-NP B-NP
b I-NP O

# nbest 0 0.9
c O O

"""


def test_nbest_rank_counts_from_0_and_every_sentence_needs_one(tmp_path):
    assert read_labels(NBEST.splitlines(), nbest_rank=0).pred == [["B-NP", "I-NP"], ["O"]]
    # rank 1 exists for the first sentence only: the second is named by its line
    with pytest.raises(CrftkError, match=r"^<input>:10: this sentence has 1 labeling \(ranks 0 to 0\), "
                                         r"so none of nbest rank 1"):
        read_labels(NBEST.splitlines(), nbest_rank=1)
    with pytest.raises(CrftkError, match=r"no labeling of nbest rank 2 here: the n-best lists have ranks 0 to 1 "
                                         r"\(ranks count from 0"):
        read_labels(NBEST.splitlines(), nbest_rank=2)
    with pytest.raises(CrftkError, match="not n-best output"):
        read_labels(["a B-NP B-NP"], nbest_rank=1)
    path = tmp_path / "nbest.txt"
    path.write_text(NBEST)
    assert crftk.evaluate(str(path), nbest_rank=0).n_sentences == 2
    with pytest.raises(CrftkError, match="no labeling of nbest rank 2"):
        crftk.evaluate(str(path), nbest_rank=2)
