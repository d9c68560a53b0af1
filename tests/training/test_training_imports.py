"""A chain CRF's training process does not load what it does not use: hashlib (OpenSSL's
libcrypto) until a model file is written, numpy.ma at all (np.unique imports it), and the other
kinds of model, their structures and kernels (the registries import a kind when it is asked for)."""

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ABSENT = ("hashlib", "_hashlib", "secrets", "socket", "numpy.ma")
#: what the other kinds would bring: their modules, structures and kernels
OTHER_KINDS = ("crftk.kinds.bag", "crftk.kinds.pipeline", "crftk.kinds.factorial", "crftk.kinds.twostage",
               "crftk.kinds.semimarkov", "crftk.structures.composed", "crftk.structures.factorial",
               "crftk.structures.twostage", "crftk.structures.semimarkov", "crftk.structures.joint",
               "crftk.structures.beam", "crftk.ensemble.combine", "crftk._chain", "crftk._combine",
               "crftk._factorial", "crftk._messages", "crftk._pipeline", "crftk._product", "crftk._semimarkov",
               # MAP training's: neither the other objectives nor the compiled tag path (and its thread pool)
               "crftk.objectives.mce", "crftk.objectives.entity_ratio", "crftk.io.stream", "concurrent.futures")

SCRIPT = """
import json, sys
from crftk.commands.train import train
imported = [m for m in %(absent)r if m in sys.modules]
from corpora import sentences
from crftk.features.templates import parse_template
from crftk.training import fit
rows = [[["the", "DT", "B-NP"], ["cat", "NN", "I-NP"], ["sat", "VBD", "O"]],
        [["a", "DT", "B-NP"], ["dog", "NN", "I-NP"]]] * 5
fit(sentences(rows), parse_template("U00:%%x[0,0]\\nU01:%%x[0,1]/%%x[1,1]\\nB\\n"), log=lambda m: None,
    max_iter=3, c2=1.0)
trained = [m for m in %(absent)r if m in sys.modules]
print(json.dumps([imported, trained]))
"""


def test_training_imports_neither_hashlib_nor_numpy_ma():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "tests")]))
    out = subprocess.run([sys.executable, "-c", SCRIPT % {"absent": ABSENT}], env=env, cwd=str(ROOT),
                         capture_output=True, text=True, check=True)
    imported, trained = json.loads(out.stdout.strip().splitlines()[-1])
    assert imported == [] and trained == []


def test_writing_a_model_still_hashes_it(tmp_path):
    # the lazily imported hash is the container's digest: a saved model loads and checks
    from crftk.io.container import read_container, write_container
    import numpy as np
    write_container(tmp_path / "m", {"kind": "x"}, {"a": np.arange(3)})
    meta, arrays = read_container(tmp_path / "m")
    assert meta == {"kind": "x"} and arrays["a"].tolist() == [0, 1, 2]


def test_training_a_chain_imports_no_other_kind():
    # through the CLI, as crftk train runs, up to the written model; the model file then loads
    script = f"""
import sys
from crftk.cli import main
sys.argv = ["crftk", "train", "-q", "-t", {str(ROOT / "templates" / "chunking-crfpp.tmpl")!r}, "-m", sys.argv[1],
            "--max-iter", "2", {str(ROOT / "data" / "demo.train")!r}]
try:
    main()
except SystemExit as stop:
    assert not stop.code, stop.code
print([m for m in {OTHER_KINDS!r} if m in sys.modules])
"""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as d:
        out = subprocess.run([sys.executable, "-c", script, os.path.join(d, "m")], env=env, cwd=str(ROOT),
                             capture_output=True, text=True, check=True)
        assert out.stdout.strip().splitlines()[-1] == "[]"
        assert os.path.getsize(os.path.join(d, "m")) > 0


def test_the_other_kinds_still_load_when_asked_for():
    from crftk.kinds import KINDS
    from crftk.structures import STRUCTURES
    assert KINDS["factorial"].NAME == "factorial" and STRUCTURES["semimarkov"].name == "semimarkov"
