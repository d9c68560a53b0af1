"""Batches of crftk tag keep documents whole when any model a tagger runs looks across sentences."""

import io
import random

from click.testing import CliRunner

from crftk.cli import main
from crftk.kinds import chain, twostage
from crftk.model import Model

NAMES = {"Smith": "PER", "Paris": "LOC", "Acme": "ORG"}


def _corpus(path, n_docs=6, seed=5):
    rnd = random.Random(seed)
    parts = []
    for _ in range(n_docs):
        parts.append("-DOCSTART- -X- O\n\n")
        for _ in range(3):
            rows = []
            for _ in range(rnd.randint(2, 4)):
                w = rnd.choice(sorted(NAMES) + ["the", "said", "in"])
                rows.append(f"{w} NNP I-{NAMES[w]}" if w in NAMES else f"{w} DT O")
            parts.append("\n".join(rows) + "\n\n")
    path.write_text("".join(parts))
    return str(path)


def _two_stage(tmp_path, train, first_template, second_template):
    """The path of a two-stage model of the given templates trained on ``train`` (2 folds)."""
    (tmp_path / "s1.tmpl").write_text(first_template)
    (tmp_path / "s2.tmpl").write_text(second_template)
    first, two = str(tmp_path / "s1.model"), str(tmp_path / "s2.model")
    run = CliRunner().invoke
    r = run(main, ["train", "-q", "-t", str(tmp_path / "s1.tmpl"), "-m", first, train])
    assert r.exit_code == 0, r.output
    r = run(main, ["train", "-q", "-t", str(tmp_path / "s2.tmpl"), "--first-stage", first,
                   "--first-stage-folds", "2", "-m", two, train])
    assert r.exit_code == 0, r.output
    return two


def test_a_first_stage_with_first_mentions_gets_whole_documents(tmp_path):
    # the second stage reads no other sentence; the first stage's first mentions do
    train = _corpus(tmp_path / "train.txt")
    two = _two_stage(tmp_path, train, "U0:%x[0,0]\nU1:%^X[0,0]\nB\n", "U0:%x[0,0]\nU1:%x[0,2]\nB\n")
    tagger = twostage.Tagger(twostage.TwoStage.from_model(Model.load(two)))
    batches = []
    write = tagger.write_batch

    def spy(batch, *a, **k):
        batches.append({s.doc for s in batch if not isinstance(s, str)})
        return write(batch, *a, **k)

    tagger.write_batch = spy
    chain.tag_with(tagger, [train], io.StringIO(), batch_tokens=5)
    assert len(batches) > 1
    for a, b in zip(batches, batches[1:]):
        assert a.isdisjoint(b)          # no document is cut between two batches


def test_a_pipeline_refuses_a_stage_with_document_macros(tmp_path):
    # a pipeline batches by first mentions only, and joint decoding sets the fed column token by
    # token: a %doc feature on it never fired there, and %ctx / %doc values depended on the batch
    train = _corpus(tmp_path / "train.txt")
    (tmp_path / "up.tmpl").write_text("U0:%x[0,0]\nB\n")
    run = CliRunner().invoke
    r = run(main, ["train", "-q", "-t", str(tmp_path / "up.tmpl"), "--label-col", "1", "-m",
                   str(tmp_path / "up.model"), train])
    assert r.exit_code == 0, r.output
    for k, line in enumerate(["U2:%doc[0,1,token]", "U2:%ctx[0,0,1]"]):
        (tmp_path / "down.tmpl").write_text(f"U0:%x[0,0]\nU1:%x[0,1]\n{line}\nB\n")
        down = str(tmp_path / f"down{k}.model")
        r = run(main, ["train", "-q", "-t", str(tmp_path / "down.tmpl"), "-m", down, train])
        assert r.exit_code == 0, r.output
        r = run(main, ["compose", "-m", str(tmp_path / "up.model"), "-m", down, "--feed", "1",
                       "-o", str(tmp_path / "pipe.model")])
        assert r.exit_code != 0 and "across sentences" in r.output, r.output
        assert "Traceback" not in r.output and not (tmp_path / "pipe.model").exists()


def test_a_factorial_crf_refuses_document_macros(tmp_path):
    # its tagging cuts batches between documents only for first mentions
    train = _corpus(tmp_path / "train.txt")
    (tmp_path / "f.tmpl").write_text("U0:%x[0,0]\nU1:%ctx[0,0,1]\nB\n")
    r = CliRunner().invoke(main, ["train", "-q", "-t", str(tmp_path / "f.tmpl"), "--label-col", "1",
                                  "--label-col", "2", "-m", str(tmp_path / "f.model"), train])
    assert r.exit_code != 0 and "%ctx" in r.output and "Traceback" not in r.output, r.output
    assert not (tmp_path / "f.model").exists()


def test_a_first_stage_may_read_context_aggregation(tmp_path):
    # %ctx reads no first stage's labels: a first stage with it is one CRF like any other
    train = _corpus(tmp_path / "train.txt")
    two = _two_stage(tmp_path, train, "U0:%x[0,0]\nU1:%ctx[0,0,1]\nB\n",
                     "U0:%x[0,0]\nU1:%x[0,2]\nU2:%doc[0,2,token]\nB\n")
    r = CliRunner().invoke(main, ["tag", "-m", two, train])
    assert r.exit_code == 0 and "Smith" in r.output, r.output
