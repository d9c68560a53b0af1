"""Fuzz: aggregate macros (%doc, %corpus, %ctx) and two-stage models on random tiny corpora.

Whatever the corpus and the template's aggregates, training a CRF or a two-stage model ends in a
model or a CrftkError, and `crftk tag` of the training file writes the labels that
`crftk.CRF.predict` / `crftk.TwoStage.predict` give the same sentences with their documents.
"""

import uuid

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

import crftk
import fuzz_strategies as fz
from crftk.cli import main
from crftk.errors import CrftkError

WORDS = ["Smith", "Paris", "Bank", "the", "of", "said", "York"]
POS = ["NNP", "DT", "IN"]
LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "I-ORG", "B-ORG"]
KINDS = ["token", "entity", "super", "hist"]


@st.composite
def corpora(draw):
    """Documents of sentences of (word, POS, label) rows."""
    docs = []
    for _ in range(draw(st.integers(1, 4))):
        doc = []
        for _ in range(draw(st.integers(1, 3))):
            n = draw(st.integers(1, 5))
            doc.append([[draw(st.sampled_from(WORDS)), draw(st.sampled_from(POS)), draw(st.sampled_from(LABELS))]
                        for _ in range(n)])
        docs.append(doc)
    return docs


def aggregate_lines(col, cols):
    """Template lines of aggregate macros over column ``col`` (and %ctx over ``cols``)."""
    row = st.integers(-2, 2)
    macro = st.one_of(
        st.builds(lambda s, r, k: f"%{s}[{r},{col},{k}]", st.sampled_from(["doc", "corpus"]), row,
                  st.sampled_from(KINDS)),
        st.builds(lambda r, c, w: f"%ctx[{r},{c},{w}]", row, st.sampled_from(cols), st.integers(1, 3)),
        st.builds(lambda r, c: f"%x[{r},{c}]", row, st.sampled_from(cols)))
    return st.lists(macro, min_size=1, max_size=5).map(
        lambda ms: "".join(f"U{i}:{m}\n" for i, m in enumerate(ms)) + "B\n")


def _write(docs, path):
    text = "".join("-DOCSTART- -X- O\n\n" + "".join("\n".join(" ".join(r) for r in s) + "\n\n" for s in doc)
                   for doc in docs)
    path.write_text(text)
    X = [[r[:2] for r in s] for doc in docs for s in doc]
    y = [[r[2] for r in s] for doc in docs for s in doc]
    ids = [d for d, doc in enumerate(docs) for _ in doc]
    return str(path), X, y, ids


def _tagged(model_path, data):
    r = CliRunner().invoke(main, ["tag", "-m", model_path, "-p", "1", data])
    assert r.exit_code == 0, r.output
    out, sent = [], []
    for line in r.stdout.splitlines():
        if not line.strip():
            if sent:
                out.append(sent)
            sent = []
        elif not line.startswith("-DOCSTART-"):
            sent.append(line.split()[-1])
    return out + ([sent] if sent else [])


@pytest.mark.fuzz(weight=0.5, cap=60)
@given(docs=corpora(), template=aggregate_lines(1, [0, 1]))
@fz.counted
def test_a_crf_with_aggregates_tags_from_the_command_line_as_predict(fuzz_dir, docs, template):
    d = fuzz_dir / f"agg-{uuid.uuid4().hex}"
    d.mkdir()
    data, X, y, ids = _write(docs, d / "train.txt")
    (d / "t.tmpl").write_text(template)
    try:
        crf = crftk.CRF(str(d / "t.tmpl"), max_iter=5, threads=1).fit(X, y, docs=ids)
    except CrftkError:
        return
    crf.save(str(d / "m.model"))
    assert _tagged(str(d / "m.model"), data) == crf.predict(X, docs=ids)


@pytest.mark.fuzz(weight=0.5, cap=40)
@given(docs=corpora(), template=aggregate_lines(2, [0, 1, 2]), folds=st.integers(2, 3))
@fz.counted
def test_a_two_stage_model_tags_from_the_command_line_as_predict(fuzz_dir, docs, template, folds):
    d = fuzz_dir / f"two-{uuid.uuid4().hex}"
    d.mkdir()
    data, X, y, ids = _write(docs, d / "train.txt")
    (d / "first.tmpl").write_text("U0:%x[0,0]\nU1:%x[0,1]\nB\n")
    (d / "second.tmpl").write_text(template)
    try:
        first = crftk.CRF(str(d / "first.tmpl"), max_iter=5, threads=1).fit(X, y, docs=ids)
        two = crftk.TwoStage(first, str(d / "second.tmpl"), first_stage_folds=folds, max_iter=5,
                             threads=1).fit(X, y, docs=ids)
    except CrftkError:
        return
    two.save(str(d / "two.model"))
    assert _tagged(str(d / "two.model"), data) == two.predict(X, docs=ids)
