"""A chain CRF's training process does not load what it does not use: hashlib (OpenSSL's
libcrypto) until a model file is written, and numpy.ma at all (np.unique imports it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ABSENT = ("hashlib", "_hashlib", "secrets", "socket", "numpy.ma")

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
