"""What a new user of --model-type semimarkov ran into (issue 36's reliability probe): templates,
corpora and models that reached a traceback, an abort or a false message, each now a one-line
error or the right behaviour."""

import subprocess
import sys

import numpy as np
import pytest

from crftk.io.container import dumps, pack_strings, read_container
from crftk.io.schemes import convert
from test_semimarkov_kind import ok, one_line_error, run


def conll(path, sentences):
    """Write sentences of (word, POS, tag) rows."""
    path.write_text("".join("".join(" ".join(row) + "\n" for row in s) + "\n" for s in sentences))
    return path


CHUNKS = [[("the", "DT", "B-NP"), ("dog", "NN", "I-NP"), ("runs", "VBZ", "B-VP"), (".", ".", "O")],
          [("a", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sleeps", "VBZ", "B-VP"), (".", ".", "O")],
          [("the", "DT", "B-NP"), ("cat", "NN", "I-NP"), ("sees", "VBZ", "B-VP"), ("a", "DT", "B-NP"),
           ("dog", "NN", "I-NP"), (".", ".", "O")]]


def test_an_s_line_without_macros_is_one_attribute_on_every_segment(tmp_path):
    """An S line of literal text only (a per-label segment bias) trains and tags; it raised an
    IndexError in the segment attribute tables."""
    train = conll(tmp_path / "train.txt", CHUNKS * 3)
    for line in ("S9:bias", "S"):
        (tmp_path / "t.tmpl").write_text(f"U0:%x[0,0]\nB\n{line}\n")
        ok("train", "-q", "--model-type", "semimarkov", "-t", tmp_path / "t.tmpl", "--threads", "1",
           "-m", tmp_path / "m.model", train)
        out = ok("tag", "-m", tmp_path / "m.model", train)
        assert [ln.split()[-1] for ln in out.split("\n") if ln] == [r[2] for s in CHUNKS * 3 for r in s]
        assert "S9:bias" in ok("dump", tmp_path / "m.model") or line == "S"


@pytest.fixture
def pairs_only(tmp_path):
    """A model whose only segments are two-token NPs (no O token, no one-token chunk in its
    training data), and sentences of 3 and 2 tokens: the first has no segmentation."""
    train = conll(tmp_path / "train.txt", [[("the", "DT", "B-NP"), ("dog", "NN", "I-NP")],
                                           [("a", "DT", "B-NP"), ("cat", "NN", "I-NP")]])
    (tmp_path / "t.tmpl").write_text("U0:%x[0,0]\nU1:%x[0,1]\nB\nS0:%len\n")
    model = tmp_path / "pairs.model"
    ok("train", "-q", "--model-type", "semimarkov", "-t", tmp_path / "t.tmpl", "--threads", "1", "-m", model, train)
    odd = tmp_path / "odd.txt"
    odd.write_text("d DT\ne NN\n\na DT\nb NN\nc NN\n\n")
    return model, odd


@pytest.mark.parametrize("flags", [[], ["-v"], ["-n", "2"]])
def test_a_sentence_without_segmentation_is_an_error_at_its_line(pairs_only, flags):
    """tag wrote made-up labels for it, and -v / -n aborted the process (the marginals' kernel
    wrote outside its tables for segments the lattice lacks). Run in a subprocess: an abort must
    fail this test, not end the test run."""
    model, odd = pairs_only
    r = subprocess.run([sys.executable, "-m", "crftk.cli", "tag", *flags, "-m", str(model), str(odd)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{odd}:4:" in lines[0] and "no segmentation" in lines[0], lines[0]


def test_the_kernel_gives_zero_marginals_to_a_sentence_without_segmentation(pairs_only):
    """Below the tagger's check: log Z is -inf and the marginals are zero (no write outside the
    tables, no NaN)."""
    model, odd = pairs_only
    code = f"""
import numpy as np
from crftk.model import Model
from crftk.io.conll import read_sentences
m = Model.load({str(model)!r})
inf = m.structure.bind(m.structure.encode(list(read_sentences({str(odd)!r}))), 1)
marg, logz = inf.marginals(np.concatenate([p.weights for p in m.parts]))
assert np.isfinite(logz[0]) and logz[1] == -np.inf, logz
assert np.all(marg[2:] == 0) and np.allclose(marg[:2].sum(axis=1), 1), marg
print("fine")
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "fine" in r.stdout, (r.returncode, r.stdout, r.stderr)


def test_a_model_file_whose_tags_make_no_segment_is_refused_in_one_line(pairs_only, tmp_path):
    """Token tags that are no segment's (only B- and I- tags: no label has an S- tag or a B-/E-
    pair) raised the kernel's ValueError at tag time."""
    model, odd = pairs_only
    meta, arrays = read_container(model)
    arrays = {k: np.array(v) for k, v in arrays.items()}
    arrays["0:labels.offsets"], arrays["0:labels.blob"] = pack_strings(["B-NP", "I-NP"])
    forged = tmp_path / "forged.model"
    forged.write_bytes(dumps(meta, arrays))
    line = one_line_error("tag", "-m", forged, odd, fragment="no segment")
    assert str(forged) in line


def test_init_on_data_in_another_scheme_says_which_scheme_it_tags_in(tmp_path):
    """The warning said tagging keeps the --init model's scheme; the new model tags in the new
    data's (as a chain CRF continued with --init does)."""
    iob2 = conll(tmp_path / "iob2.txt", CHUNKS * 2)
    iob1 = conll(tmp_path / "iob1.txt", [[(w, p, t) for (w, p, _), t in zip(s, convert([r[2] for r in s], "iob1"))]
                                         for s in CHUNKS * 2])
    (tmp_path / "t.tmpl").write_text("U0:%x[0,0]\nB\nS0:%len\n")
    ok("train", "-q", "--model-type", "semimarkov", "-t", tmp_path / "t.tmpl", "--threads", "1",
       "-m", tmp_path / "a.model", iob2)
    r = run("train", "--model-type", "semimarkov", "--init", tmp_path / "a.model", "--threads", "1",
            "-m", tmp_path / "b.model", iob1)
    assert r.exit_code == 0, r.output
    warning = next(ln for ln in r.output.splitlines() if "warning" in ln)
    tags = [ln.split()[-1] for ln in ok("tag", "-m", tmp_path / "b.model", iob1).split("\n") if ln]
    assert tags == [ln.split()[-1] for ln in iob1.read_text().split("\n") if ln]     # iob1: I-NP first
    assert "iob1" in warning.split(":", 2)[-1].split("this data is")[-1] and "keeps the model's" not in warning


def test_compose_names_the_semimarkov_model_not_a_train_scheme_it_never_had(pairs_only, tmp_path):
    model, _ = pairs_only
    line = one_line_error("compose", "-m", model, "-m", model, "--feed", "1", "-o", tmp_path / "p.model",
                          fragment="semi-Markov")
    assert "--train-scheme" not in line


def test_bag_names_the_model_type_given(tmp_path):
    train = conll(tmp_path / "train.txt", CHUNKS)
    (tmp_path / "t.tmpl").write_text("U0:%x[0,0]\nB\n")
    line = one_line_error("bag", "--model-type", "semimarkov", "-t", tmp_path / "t.tmpl", "-t", tmp_path / "t.tmpl",
                          "-m", tmp_path / "b.model", train, fragment="--model-type semimarkov")
    assert "memm" not in line
