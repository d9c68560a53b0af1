"""crftk train --vectors / %num on the command line: the model tags alone, info tells its vectors,
and the errors of --vectors are one line each."""

import json

import pytest
from click.testing import CliRunner

from crftk.cli import main

TRAIN = "".join(f"{w} {n} {lab}\n" + ("\n" if i % 3 == 2 else "")
                for i, (w, n, lab) in enumerate([("the", "1", "B-NP"), ("cat", "2.5", "I-NP"), ("sat", "-1", "O"),
                                                 ("The", "0", "B-NP"), ("dog", "1e1", "I-NP"), ("ran", ".5", "O")] * 4))
TEMPLATE = "U0:%x[0,0]\nU1:%num[0,1]\nU2:%vec[0,0,emb]\nU3:%vec[-1,0,emb]\nB\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "train.txt").write_text(TRAIN, encoding="utf-8")
    (tmp_path / "t.tmpl").write_text(TEMPLATE, encoding="utf-8")
    (tmp_path / "emb.txt").write_text("3 2\nthe 0.5 -1\ncat 1 2\ndog 0.25 0.75\n", encoding="utf-8")
    return tmp_path


def _run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def _train(d, *extra):
    return _run("train", "-t", d / "t.tmpl", "-m", d / "m.model", "--max-iter", "3", "-p", "1", *extra,
                d / "train.txt")


def test_model_tags_alone_and_info_tells_its_vectors(files):
    d = files
    r = _train(d, "--vectors", f"emb={d / 'emb.txt'}", "--vectors-lookup", "lowercase")
    assert r.exit_code == 0, r.output
    (d / "emb.txt").unlink()                   # tagging needs the model alone
    r = _run("tag", "-m", d / "m.model", d / "train.txt")
    assert r.exit_code == 0, r.output
    rows = [line.split() for line in r.output.splitlines() if line.strip()]
    assert len(rows) == len([x for x in TRAIN.splitlines() if x.strip()]) and all(len(x) == 4 for x in rows)
    r = _run("info", "--json", d / "m.model")
    info = json.loads(r.output)
    assert info["vectors"] == {"emb": {"words": 3, "dimensions": 2, "dtype": "float32", "bytes": info["vectors"]["emb"]["bytes"],
                                       "lookup": "lowercase"}}
    assert info["attributes"] >= 1 + 2 + 2
    text = _run("info", d / "m.model").output
    assert "vectors.emb.words" in text and "vectors.emb.dimensions" in text
    dump = _run("dump", d / "m.model").output
    assert "U1:%num[0,1]\t" in dump and "U2:%vec[0,0,emb][1]\t" in dump


@pytest.mark.parametrize("args,message", [
    ([], "t.tmpl:3: %vec reads vectors emb, which are not given (crftk train --vectors emb=FILE"),
    (["--vectors", "emb"], "--vectors takes NAME=FILE, not 'emb'"),
    (["--vectors", "emb=nothere.txt"], "nothere.txt: cannot open vectors emb: no such file"),
    (["--vectors", "emb=bad.txt"], "bad.txt:3: 1 values where the vectors have 2"),
    (["--vectors", "emb=emb.txt", "--vectors", "emb=emb.txt"], "vectors emb given twice"),
    (["--vectors-lookup", "fuzzy"], "'fuzzy' is not one of"),
])
def test_vectors_errors_are_one_line(files, monkeypatch, args, message):
    d = files
    monkeypatch.chdir(d)
    (d / "bad.txt").write_text("the 1 2\ncat 1 2\ndog 1\n", encoding="utf-8")
    r = _train(d, *args)
    assert r.exit_code in (1, 2), r.output
    lines = [x for x in r.output.splitlines() if x.strip()]
    assert message in lines[-1] and "Traceback" not in r.output
    assert not (d / "m.model").exists()


def test_unused_vectors_warn_and_init_refuses_them(files):
    d = files
    (d / "t.tmpl").write_text("U0:%x[0,0]\nU1:%num[0,1]\nB\n", encoding="utf-8")
    r = _train(d, "--vectors", f"emb={d / 'emb.txt'}")
    assert r.exit_code == 0, r.output
    assert "crftk: warning: --vectors emb is not read by any %vec line of the template" in r.output
    r = _run("train", "--init", d / "m.model", "-m", d / "m2.model", "--vectors", f"emb={d / 'emb.txt'}",
             d / "train.txt")
    assert r.exit_code == 2 and "--init trains with the vectors its model holds" in r.output


def test_a_field_that_is_not_a_number(files):
    d = files
    (d / "t.tmpl").write_text("U1:%num[0,1]\nB\n", encoding="utf-8")
    (d / "train.txt").write_text(TRAIN.replace("2.5", "2,5"), encoding="utf-8")
    r = _train(d)
    assert r.exit_code == 1
    assert f"{d / 'train.txt'}:2: %num reads column 1: '2,5' is not a finite decimal number" in r.output


def test_help_declares_the_options():
    r = _run("train", "--help")
    assert "--vectors NAME=FILE" in r.output and "--vectors-lookup" in r.output
