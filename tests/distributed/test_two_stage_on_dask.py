"""Two-stage models on a cluster: %doc models tag byte for byte as locally (pieces are cut at
documents), a %corpus one (each file is its corpus) is refused in one line."""

import io

import pytest

pytest.importorskip("distributed.client", reason="Dask is not installed (pip install crftk[dask])")

from crftk.commands.tag import tag_files as tag_locally
from crftk.distributed.tagging import tag_files
from crftk.errors import CrftkError
from crftk.features.templates import parse_template
from crftk.io.conll import read_corpus
from crftk.training.driver import fit
from crftk.training.twostage import fit_two_stage
from training.test_two_stage import _corpus


def _two_stage(train, second):
    sents = read_corpus(train)
    first = fit(sents, parse_template("U0:%x[0,0]\nU1:%x[-1,0]\nB\n"), log=lambda m: None, threads=1)
    return fit_two_stage(sents, parse_template(second), first, folds=2, threads=1).to_model()


def test_document_aggregates_tag_as_locally(cluster, tmp_path):
    train = _corpus(tmp_path / "train.txt", n_docs=40)
    model = _two_stage(train, "U0:%x[0,0]\nU1:%x[0,3]\nU2:%doc[0,3,token]\nU3:%doc[0,3,entity]\n"
                              "U4:%doc[0,3,hist]\nU5:%ctx[0,1,1]\nB\n")
    out = io.StringIO()
    tag_files(cluster, model, [train], out, piece_bytes=400)
    local = io.StringIO()
    tag_locally(model, [train], local, threads=1)
    assert out.getvalue() == local.getvalue()


def test_corpus_aggregates_are_refused(cluster, tmp_path):
    train = _corpus(tmp_path / "train.txt", n_docs=8)
    model = _two_stage(train, "U0:%x[0,0]\nU1:%corpus[0,3,token]\nB\n")
    with pytest.raises(CrftkError, match="read each input file whole"):
        tag_files(cluster, model, [train], io.StringIO())
