"""The compiled tagging path (crftk._textio) writes what the pure-Python path writes."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fuzz_strategies as fz
from corpora import WORDS, random_corpus, random_docs
from crftk.kinds import chain as tag_module
from crftk.commands.tag import tag_files
from crftk.errors import CrftkError
from crftk.features.space import FeatureSpace
from crftk.features.templates import parse_template
from crftk.model import Model

TEMPLATE = "U:%x[0,0]\nU1:%x[0,1]\nUw:%x[-1,0]/%x[0,0]\nUt:%x[-2,1]/%x[-1,1]/%x[0,1]/%x[2,0]\nU2:%x[3,1]\n" \
           "B\nB1:%x[-1,1]/%x[0,1]\nB2:%x[1,0]\n"


# single-valued tests of columns: derived per batch from the column ids (unseen words from their strings)
DERIVED = TEMPLATE + 'Us:%suf[0,0,1]/%x[0,1]\nUt:%t[-1,0,"[0-9]$"]\nUX:%X[1,1]\nUf:%fshape[0,0]\nUc:%cshape[2,0]\n' \
    'Up:%pre[0,1,1]\nUm:%m[0,0,"^w1"]/%M[1,0,"^W"]\nB3:%T[0,0,"1"]\n'


# multi-valued tests: value ids from the bytes, attributes by the numpy encoder
MULTI = DERIVED + "Ush:%shape[0,0]\nUng:%ngram[-1,0,1,2]/%x[0,1]\n"
# first mentions: a batch holds whole documents (crftk.io.conll.whole_documents)
ANCHORED = MULTI + "Ua:%^x[0,1]\nUaX:%^X[-1,0]/%x[0,1]\nUac:%^cshape[1,0]\n"
TEMPLATES = {"columns": TEMPLATE, "derived tests": DERIVED, "multi-valued tests": MULTI, "first mentions": ANCHORED}


@pytest.fixture(scope="module", params=sorted(TEMPLATES))
def model(request):
    sents = random_corpus(80, seed=1)
    if request.param == "first mentions":        # capitalized words met again in their document
        sents += random_docs(20, seed=7, max_len=8)
    sents[0].rows[0][0] = "caf\u00e9"            # a non-ASCII word the model knows
    space, _ = FeatureSpace.fit(sents, parse_template(TEMPLATES[request.param]))
    w = np.random.default_rng(0).normal(size=space.n_params)
    return Model(space, w)


def _run(model, paths, compiled, monkeypatch, binary=False, **kw):
    """(output text, error) of tag_files on the compiled or the pure-Python path."""
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(tag_module, "_compiled_path", lambda model: False)
        if binary:
            raw = io.BytesIO()
            out = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
        else:
            out = io.StringIO()
        try:
            counts = tag_files(model, paths, out, **kw)
        except CrftkError as e:
            return None, (e.message, e.path, e.line)
        if binary:
            out.flush()
            return raw.getvalue().decode("utf-8"), counts
        return out.getvalue(), counts


def _same(model, tmp_path, monkeypatch, data, **kw):
    paths = []
    for i, d in enumerate(data if isinstance(data, list) else [data]):
        p = tmp_path / f"in{i}.txt"
        p.write_bytes(d)
        paths.append(str(p))
    want = _run(model, paths, False, monkeypatch, **kw)
    got = _run(model, paths, True, monkeypatch, **kw)
    assert got == want
    got = _run(model, paths, True, monkeypatch, binary=True, **kw)
    assert got == want
    return want


def _text(sents, sep=" ", drop=False, end="\n"):
    return "".join(end.join(sep.join(r[:-1] if drop else r) for r in s.rows) + end + end for s in sents).encode()


def test_the_compiled_path_is_taken(model):
    assert tag_module._compiled_path(tag_module.Tagger(model))


CASES = {
    "spaces": _text(random_corpus(30, seed=2)),
    "tabs": _text(random_corpus(30, seed=3), sep="\t"),
    "mixed separators": b"w1  A\tB-X\nw2 \t B O\n\nw3\x0bA\x1fO\n",
    "no label column": _text(random_corpus(20, seed=4), drop=True),
    "crlf": _text(random_corpus(20, seed=5), end="\r\n"),
    "no final line end": b"w1 A O\nw2 B O",
    "docstart": b"-DOCSTART- -X- O\n\nw1 A O\n\n-DOCSTART- -X- O\nw2 B O\n  -DOCSTART-\n\n\nw3 A O\n",
    "annotations and comments": b"# prob 0.5\nw1 A O\n# nbest 0 0.1\nw2 B O\n\n# # O\n# comment O\n\n# prob 1\n\n",
    "unicode": "caf\u00e9 A O\n1\u00a0000 B O\n\u65e5\u672c A O\n\n\u00e9t\u00e9 B O\n".encode(),
    "bom": b"\xef\xbb\xbfw1 A O\n\nw2 B O\n",
    "blank lines only": b"\n \n\t\n",
    "documents": b"".join(b"-DOCSTART- -X- O\n\n" + _text(random_docs(1, seed=d, max_len=8, words=WORDS + ["Xyz", "Qq"]))
                          for d in range(12)),
    "empty": b"",
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("threads", [1, 2])
def test_output_is_byte_identical(model, tmp_path, monkeypatch, name, threads):
    text, counts = _same(model, tmp_path, monkeypatch, CASES[name], threads=threads)
    assert text is not None
    _same(model, tmp_path, monkeypatch, CASES[name], threads=threads, batch_tokens=3)


@pytest.mark.parametrize("opts", [{"marginals": 1}, {"marginals": 2}, {"nbest": 2}, {"nbest": 2, "marginals": 1}])
def test_probabilities_and_nbest_are_unchanged(model, tmp_path, monkeypatch, opts):
    _same(model, tmp_path, monkeypatch, CASES["docstart"] + CASES["spaces"], **opts)


def test_several_files_each_keep_their_separator(model, tmp_path, monkeypatch):
    _same(model, tmp_path, monkeypatch, [CASES["tabs"], CASES["spaces"], CASES["empty"], CASES["crlf"]])


@pytest.mark.parametrize("data", [
    b"w1 A O\nw2 B\n",                        # the column count changes
    b"w1 A O\n\nw2 A O X\n",                  # a count the model does not take
    b"w1 A O\n\xff A O\n",                    # not UTF-8
    b"w1 A O\nw2 A O\nw3 A O\n",              # too long for --max-sentence-tokens 2
    b"w1 A O\n" * 5 + b"\n" + b"w1 A\n",
])
def test_errors_name_the_same_file_and_line(model, tmp_path, monkeypatch, data):
    (_, error) = _same(model, tmp_path, monkeypatch, data, max_sentence_tokens=2, batch_tokens=1)
    assert error is not None and error[1].endswith("in0.txt") and error[2] >= 1


@settings(max_examples=60)
@given(data=fz.conll_files(n_columns=3), threads=st.sampled_from([1, 2]), batch=st.sampled_from([1, 4, 50_000]))
def test_fuzzed_inputs(model, tmp_path_factory, data, threads, batch):
    from _pytest.monkeypatch import MonkeyPatch
    mp = MonkeyPatch()
    try:
        _same(model, tmp_path_factory.mktemp("tc"), mp, data, threads=threads, batch_tokens=batch)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def bag_model():
    from crftk.ensemble.bag import Bag
    sents = random_corpus(80, seed=6)
    members, rng = [], np.random.default_rng(1)
    for tmpl in [TEMPLATE, "U:%x[0,0]\nU1:%x[-1,1]/%x[0,1]\nB\n"]:
        space, _ = FeatureSpace.fit(sents, parse_template(tmpl))
        members.append(Model(space, rng.normal(size=space.n_params)))
    record = {"members": ["a", "b"], "combine": "seq-poe", "decode": "viterbi",
              "weights": {"seq-poe": [0.7, 0.3], "seq-mixture": [0.4, 0.6], "trans-mixture": [0.5, 0.5],
                          "trans-poe": [0.5, 0.5]}}      # a bag file has every combination's weights
    return Bag(members, ["a", "b"], record).to_model()


@pytest.mark.parametrize("combine,decode", [("chosen", "chosen"), ("seq-mixture", "max-marginal"),
                                            ("trans-poe", "chosen")])
@pytest.mark.parametrize("threads", [1, 2])
def test_a_bag_takes_the_compiled_path_and_writes_the_same(bag_model, tmp_path, monkeypatch, combine, decode,
                                                          threads):
    from crftk.commands.tag import tagger_for
    assert tag_module._compiled_path(tagger_for(bag_model, combine=combine, decode=decode))
    data = CASES["docstart"] + CASES["spaces"] + CASES["unicode"]
    text, _ = _same(bag_model, tmp_path, monkeypatch, data, threads=threads, batch_tokens=7, combine=combine,
                    decode=decode)
    first = Model(bag_model.parts[0].space, bag_model.parts[0].weights)
    alone, _ = _run(first, [str(tmp_path / "in0.txt")], True, monkeypatch)
    assert text != alone                # the members are combined, not the first one alone


@pytest.fixture(scope="module")
def factorial_model():
    from crftk.kinds.factorial import factorial_model as make
    from crftk.structures.factorial import Factorial, fit_spaces
    sents = random_corpus(80, seed=7)
    for s in sents:                 # a second label column: word, tag, label, tag again (a chain per label)
        for r in s.rows:
            r.append(r[1] if r[0] != "w3" else "Z")
    tmpl = ('U:%x[0,0]\nU1:%x[-1,0]/%x[0,0]\nUsh:%shape[1,0]\nUs:%suf[0,0,1]\nUt:%t[1,0,"[02468]$"]\nB\n'
            'P:%x[0,0]\nP1:%suf[-1,0,1]\n')
    chains, pairs, _ = fit_spaces(sents, parse_template(tmpl), [3, 2])
    st = Factorial(chains, pairs)
    return make(st, np.random.default_rng(2).normal(size=st.n_params), {})


FACTORIAL_CASES = {
    "labelled": b"w1 A B-X A\nw2 B O B\nw3 C B-Y Z\n\n-DOCSTART- -X- O O\n\nw4 A O A\nw11 B B-Y B\n\n",
    "unlabelled, tabs": b"w1\tA\nw2\tB\n\nw9\tC\n\n",
    "a label the model lacks": b"w1 A B-X Q\nw2 B ZZ B\n\n# comment O O\nw5 C O C\n",
}


@pytest.mark.parametrize("name", sorted(FACTORIAL_CASES))
@pytest.mark.parametrize("inference,threads,batch", [("exact", 1, 50_000), ("exact", 2, 2), ("trp", 2, 3),
                                                     ("bp", 1, 1)])
def test_a_factorial_model_takes_the_compiled_path_and_writes_the_same(factorial_model, tmp_path, monkeypatch,
                                                                     name, inference, threads, batch):
    from crftk.kinds import factorial
    from crftk.structures.factorial import Factorial
    path = tmp_path / "in.txt"
    path.write_bytes(FACTORIAL_CASES[name])
    assert factorial_model.structure.raw_encodable()
    results = []
    for compiled in (False, True):
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(Factorial, "raw_encodable", lambda self: False)
            out, logged = io.StringIO(), []
            n_sent, n_tok, scores = factorial.tag_factorial(factorial_model, [str(path)], out, threads=threads,
                                                            inference=inference, batch_tokens=batch,
                                                            log=logged.append)
            results.append((out.getvalue(), n_sent, n_tok, scores and scores.to_dict(), logged))
    assert results[0] == results[1]
    text = results[0][0]
    assert text.count("\n\n") >= 2 and (results[0][3] is None) == (name == "unlabelled, tabs")


@pytest.mark.parametrize("line", ["Ua:%^x[0,0]", "Uac:%^cshape[0,0]"])
def test_first_mentions_are_read_from_bytes_only_by_whole_documents(line):
    """One CRF tags them on the compiled path, which reads whole documents; the readers of other
    kinds (pipelines, factorial models, streamed training), which cut batches anywhere, refuse."""
    space, _ = FeatureSpace.fit(random_corpus(20, seed=8), parse_template(TEMPLATE + line + "\n"))
    model = Model(space, np.zeros(space.n_params))
    assert tag_module._compiled_path(tag_module.Tagger(model))
    assert space.raw_readable(whole_documents=True) and not space.raw_readable()


def test_lexicons_take_the_python_path(tmp_path):
    (tmp_path / "names.txt").write_text("w1\nw2 w3\n")
    tmpl = f"@lexicon names {tmp_path / 'names.txt'}\n" + TEMPLATE + "Ul:%lex[0,names]\n"
    space, _ = FeatureSpace.fit(random_corpus(20, seed=8), parse_template(tmpl))
    assert not tag_module._compiled_path(tag_module.Tagger(Model(space, np.zeros(space.n_params))))
