"""Fuzz: the CoNLL reader and what reads through it (tag, eval, lexicon, train) on odd files.

Whatever the bytes, reading raises nothing but CrftkError, and that error names
the file and the line; what is read is what the file holds; tagging copies the
input back with one more column; the commands fail with one line and leave no
output behind.
"""

import io
import math

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import fuzz_strategies as fz
from crftk.io.conll import Sentence, read_corpus, read_sentences
from crftk.commands.tag import tag_files
from crftk.errors import CrftkError

column_counts = st.one_of(st.none(), st.integers(1, 5), st.sets(st.integers(1, 5), min_size=1, max_size=3))


def _read_all(source, **kw):
    """(items, error) of reading ``source`` to the end."""
    items = []
    try:
        for item in read_sentences(source, **kw):
            items.append(item)
    except CrftkError as e:
        return items, e
    return items, None


def _sentences(items):
    return [(s.rows, s.doc, s.line) for s in items if isinstance(s, Sentence)]


def _allowed(n_columns, min_columns):
    if n_columns is None:
        return None
    counts = {n_columns} if isinstance(n_columns, int) else set(n_columns)
    return {k for k in counts if k >= min_columns}


@pytest.mark.fuzz(weight=4)
@given(data=fz.conll_files(), n_columns=column_counts, min_columns=st.integers(1, 3),
       limit=st.sampled_from([None, 1, 3, 100_000]), first_doc=st.integers(0, 3))
@fz.counted
def test_reader_reads_what_the_file_holds(fuzz_dir, data, n_columns, min_columns, limit, first_doc):
    allowed = _allowed(n_columns, min_columns)
    assume(allowed is None or allowed)
    path = fz.write(fuzz_dir / "input.txt", data)
    kw = dict(n_columns=n_columns, min_columns=min_columns, max_sentence_tokens=limit, first_doc=first_doc)
    items, error = _read_all(path, **kw)
    kept, kept_error = _read_all(path, passthrough=True, **kw)

    # passthrough adds str lines and changes nothing else, errors included
    assert _sentences(kept) == _sentences(items)
    assert str(kept_error) == str(error)
    assert all(isinstance(s, Sentence) for s in items)
    for line in (x for x in kept if isinstance(x, str)):
        assert line == "" or line.lstrip().startswith("-DOCSTART-") or line.startswith("# "), line

    # a file object reads as the path does (the name aside)
    with open(path, "rb") as f:
        from_file, file_error = _read_all(f, **kw)
    assert _sentences(from_file) == _sentences(items)
    assert (file_error is None) == (error is None)
    if error is not None:
        assert (file_error.message, file_error.line) == (error.message, error.line)
        fz.assert_names(error, path)
        assert error.line <= data.count(b"\n") + 1
        return

    tokens = [row for s in items for row in s.rows]
    assert tokens == fz.reference_tokens(data)
    widths = {len(row) for row in tokens}
    assert len(widths) <= 1, widths           # one column count per file
    if allowed is not None and widths:
        assert widths <= allowed
    assert all(len(row) >= min_columns for row in tokens)
    docs = [s.doc for s in items]
    assert docs == sorted(docs) and (not docs or docs[0] >= first_doc)
    for s in items:
        assert 0 < len(s) and (limit is None or len(s) <= limit)
        assert s.source == str(path) and s.line >= 1


@pytest.mark.fuzz(weight=2)
@given(files=st.lists(fz.conll_files(max_lines=10), min_size=1, max_size=3), n_columns=column_counts)
@fz.counted
def test_corpus_of_several_files_names_the_file_at_fault(fuzz_dir, files, n_columns):
    assume(_allowed(n_columns, 1) != set())
    with fz.scratch(fuzz_dir) as d:
        paths = [fz.write(d / f"part{i}.txt", data) for i, data in enumerate(files)]
        try:
            corpus = read_corpus(paths, n_columns=n_columns)
        except CrftkError as e:
            assert e.path in [str(p) for p in paths], str(e)
            assert isinstance(e.line, int) and e.line >= 1, str(e)
            return
    # one column count per file; across the files too unless several counts are allowed
    for p in paths:
        assert len({len(row) for s in corpus if s.source == str(p) for row in s.rows}) <= 1
    if n_columns is None or isinstance(n_columns, int):
        assert len({len(row) for s in corpus for row in s.rows}) <= 1
    docs = [s.doc for s in corpus]
    assert docs == sorted(docs)
    # each file starts a new document
    starts = {}
    for s in corpus:
        starts.setdefault(s.source, s.doc)
    firsts = [starts[str(p)] for p in paths if str(p) in starts]
    assert firsts == sorted(set(firsts))


def _output_rows(text):
    """The token rows of tagger output (annotation and document lines left out)."""
    rows = []
    for line in text.split("\n"):
        row = fz.fields(line)
        if not row or row[0].startswith("-DOCSTART-") or (line.startswith("# ") and row[1:2]
                                                          and row[1] in ("prob", "nbest")):
            continue
        rows.append(row)
    return rows


def _probability(text):
    value = float(text)
    return math.isfinite(value) and 0.0 <= value <= 1.0 + 1e-9


@pytest.mark.fuzz(weight=3)
@given(data=fz.conll_files(), which=st.sampled_from(["crf", "crf", "order2", "memm"]),
       marginals=st.integers(0, 2), nbest=st.sampled_from([0, 0, 1, 3]), batch=st.sampled_from([1, 4, 50_000]),
       limit=st.sampled_from([3, 100_000]))
@example(data=b"\xef\xbb\xbf# prob \xef\xbb\xbf0.5\n", which="crf", marginals=0, nbest=0, batch=1, limit=3)
@example(data=b"# prob 0.5\r\xef\xbb\xbf\n, , x , ,\n", which="crf", marginals=0, nbest=0, batch=1, limit=3)
@fz.counted
def test_tagging_copies_the_input_and_adds_labels(models, fuzz_dir, data, which, marginals, nbest, batch, limit):
    trained = models[which]
    if which == "memm":
        marginals = nbest = 0            # CRFs only; a CrftkError otherwise, tested elsewhere
    path = fz.write(fuzz_dir / "input.txt", data)
    out = io.StringIO()
    try:
        tag_files(trained.model, [str(path)], out, marginals=marginals, nbest=nbest, threads=1,
                  batch_tokens=batch, max_sentence_tokens=limit)
    except CrftkError as e:
        fz.assert_names(e, path)
        return
    text = out.getvalue()
    inputs = fz.reference_tokens(data)
    rows = _output_rows(text)
    labels = set(trained.model.output_labels)
    # n-best rows carry the label and with -v its marginal; -vv adds every label's otherwise
    extra = 1 + (marginals > 0) + (len(labels) if marginals > 1 and not nbest else 0)
    if nbest:
        # each sentence comes once per labeling: compare the set of rows
        assert {tuple(r[:-extra]) for r in rows} == {tuple(r) for r in inputs}
    else:
        assert [r[:-extra] for r in rows] == inputs
    for r in rows:
        assert r[-extra] in labels, r
        if marginals:
            assert _probability(r[-extra + 1]), r
    # the input's own annotation lines are copied as they are (its byte order mark aside)
    # (a lone carriage return inside a line is kept: only line ends are compared without it)
    decoded = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "replace")
    copied = {line.removesuffix("\r") for line in decoded.split("\n")}
    for line in text.split("\n"):
        if (line.startswith("# prob ") or line.startswith("# nbest ")) and line.removesuffix("\r") not in copied:
            assert _probability(line.split()[-1]), line


COMMANDS = ["tag", "tag-v", "eval", "eval-tagged", "lexicon", "train"]


@pytest.mark.fuzz(weight=2)
@given(data=fz.conll_files(), command=st.sampled_from(COMMANDS), nbest=st.sampled_from([0, 2]))
@fz.counted
def test_commands_on_odd_files_fail_in_one_line_and_leave_nothing(models, sandbox, fuzz_dir, data, command, nbest):
    with fz.scratch(fuzz_dir) as d:
        path = fz.write(d / "in put.txt", data)
        out = d / "out"
        out.mkdir()
        if command == "eval-tagged":
            # score what the tagger made of the file (its '# nbest'/'# prob' lines included)
            result = sandbox.call("cli", ["tag", "-m", models["crf"].path, "-n", nbest, "-o", out / "t.txt", path])
            fz.check_cli(result, out, [])
            assume(result["exit_code"] == 0)
            path = out / "t.txt"
            args = ["eval", path]
        elif command == "eval":
            args = ["eval", path]
        elif command in ("tag", "tag-v"):
            args = ["tag", "-m", models["crf"].path, "-o", out / "tagged.txt", path]
            args += ["-v", "-n", nbest] if command == "tag-v" else []
        elif command == "lexicon":
            args = ["lexicon", "-o", out / "lex", path]
        else:
            args = ["train", "-q", "-t", models["crf"].path.parent / "plain.tmpl", "-m", out / "m.model",
                    "--max-iter", 3, "-p", 1, path]
        before = fz.listing(out)
        result = sandbox.call("cli", args)
        fz.check_cli(result, out, before)
        if result["exit_code"] == 1:      # names the file at fault: the input, or the template
            assert any(str(a) in result["stderr"] for a in args[1:] if isinstance(a, type(path))), result["stderr"]
