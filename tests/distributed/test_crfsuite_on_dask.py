"""CRFsuite data files and %vec models on a LocalCluster: tagging gives crftk tag's output byte for
byte (pieces cut after empty lines), an error names the file's line, and data-parallel training on
attributes gives local training's weights."""

import io

import numpy as np
import pytest

# "distributed.client": see test_training.py
pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")
from click.testing import CliRunner

from corpora import REPO
from crftk import Model
from crftk.cli import main
from crftk.commands.tag import AttributeJob, TagJob
from crftk.distributed import pieces
from crftk.distributed.tagging import tag_files


def crfsuite_text(n, seed=0):
    rng = np.random.default_rng(seed)
    lines = []
    for k in range(n):
        for _ in range(int(rng.integers(1, 7))):
            label = "ABC"[int(rng.integers(3))]
            lines.append(f"{label}\tw={label if rng.random() < .7 else 'x'}{int(rng.integers(4))}"
                         f"\tv:{rng.normal():.3f}\tpos\\:{int(rng.integers(3))}")
        # sequence ends of every kind the reader takes: CRLF, runs of them, a line of tabs within
        lines.append(["", "\r", "\n", "\t\t\n"][k % 4])
    return "\n".join(lines) + "\n"


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    assert "Traceback" not in r.output, r.output
    return r


@pytest.fixture(scope="module")
def attribute_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("crfsuite")
    (d / "train.crfsuite").write_text(crfsuite_text(120))
    assert run("train", "--format", "crfsuite", d / "train.crfsuite", "-m", d / "m.crftk", "--max-iter", "30",
               "-q").exit_code == 0
    return d


def test_pieces_of_a_crfsuite_file_cut_after_empty_lines_only(tmp_path):
    path = tmp_path / "t.crfsuite"
    path.write_bytes(crfsuite_text(200).encode())
    data = path.read_bytes()
    cuts = pieces.cut(str(path), 300, crfsuite=True)
    assert len(cuts) > 10 and b"".join(data[p.start:p.end] for p in cuts) == data
    for p in cuts[1:]:
        before = data[:p.start].rsplit(b"\n", 2)[-2] + b"\n"
        assert before in (b"\n", b"\r\n")


@pytest.mark.parametrize("reference", [False, True])
def test_tagging_equals_local_tagging_byte_for_byte(cluster, attribute_model, tmp_path, reference):
    test = tmp_path / "test.crfsuite"
    test.write_text(crfsuite_text(300, seed=1))
    job = AttributeJob(TagJob(Model.load(attribute_model / "m.crftk"), "m.crftk", threads=1), reference)
    here = io.StringIO()
    job.tag(here, [str(test)])
    there = io.StringIO()
    counts = tag_files(cluster, job, [str(test), str(test)], there, piece_bytes=1024)
    assert there.getvalue() == here.getvalue() * 2 and counts[0] == 600
    out = tmp_path / "out.txt"
    r = run("tag", "--format", "crfsuite", *(["--reference"] if reference else []), "-m", attribute_model / "m.crftk",
            test, "-o", out, "--workers", "2", "--piece-bytes", "1024")
    assert r.exit_code == 0, r.output
    assert out.read_text() == here.getvalue()


def test_an_error_in_a_later_piece_names_the_files_line_and_writes_nothing(attribute_model, tmp_path):
    text = crfsuite_text(200, seed=2)
    bad = tmp_path / "bad.crfsuite"
    bad.write_text(text + "\nA\tw=a\nB\tv:oops\n")
    line = text.count("\n") + 3
    out = tmp_path / "out.txt"
    here = run("tag", "--format", "crfsuite", "-m", attribute_model / "m.crftk", bad, "-o", out)
    there = run("tag", "--format", "crfsuite", "-m", attribute_model / "m.crftk", bad, "-o", out, "--workers", "2",
                "--piece-bytes", "1024")
    for r in (here, there):
        assert r.exit_code == 1 and f"bad.crfsuite:{line}: the value 'oops' is not a number" in r.output
    assert not out.exists()


def test_a_template_model_is_refused_for_crfsuite_data_on_the_cluster_path(attribute_model, tmp_path):
    r = run("tag", "--format", "crfsuite", "-m", REPO / "tests" / "data" / "model-v1.crftk",
            attribute_model / "train.crfsuite", "--workers", "2")
    assert r.exit_code == 2 and "--format crfsuite tags with a model trained on attributes" in r.output


def test_training_on_attributes_on_a_cluster_equals_local(cluster, attribute_model, tmp_path):
    local, remote = tmp_path / "local.crftk", tmp_path / "remote.crftk"
    common = ["train", "--format", "crfsuite", attribute_model / "train.crfsuite", "--max-iter", "8", "-p", "1", "-q"]
    assert run(*common, "-m", local).exit_code == 0
    r = run(*common, "-m", remote, "--scheduler", cluster.client.scheduler.address)
    assert r.exit_code == 0, r.output
    a, b = Model.load(local), Model.load(remote)
    assert b.info["iterations"] == a.info["iterations"] == 8 and b.info["cluster"]["shards"] == 2
    np.testing.assert_allclose(b.weights, a.weights, rtol=0, atol=1e-9)
    r = run(*common, "-m", remote, "--scheduler", cluster.client.scheduler.address, "--algorithm", "arow")
    assert r.exit_code != 0 and "cannot run on a cluster" in r.output


def test_a_vec_model_tags_on_the_cluster_as_here(cluster, tmp_path):
    data = (REPO / "data" / "demo.train").read_text().split("\n\n")
    train, test = tmp_path / "train.txt", tmp_path / "test.txt"
    train.write_text("\n\n".join(data[:150]) + "\n\n")
    test.write_text("\n\n".join(data[150:400]) + "\n\n")
    words = sorted({line.split()[0] for line in train.read_text().splitlines() if line.strip()})
    rng = np.random.default_rng(3)
    vectors = tmp_path / "vec.txt"
    vectors.write_text(f"{len(words)} 3\n" + "".join(f"{w} {' '.join(f'{x:.4f}' for x in rng.normal(size=3))}\n"
                                                     for w in words))
    template = tmp_path / "t.tmpl"
    template.write_text("U00:%x[0,0]\nU01:%x[0,1]\nU20:%vec[0,0,emb]\nU21:%vec[-1,0,emb]\nB\n")
    model = tmp_path / "vec.crftk"
    assert run("train", "-t", template, "--vectors", f"emb={vectors}", train, "-m", model, "--max-iter", "15",
               "-q").exit_code == 0
    for extra in ([], ["-v"]):
        here, there = tmp_path / "here.txt", tmp_path / "there.txt"
        assert run("tag", "-m", model, test, "-o", here, *extra).exit_code == 0
        r = run("tag", "-m", model, test, "-o", there, *extra, "--workers", "2", "--piece-bytes", "4096")
        assert r.exit_code == 0, r.output
        assert there.read_bytes() == here.read_bytes()
