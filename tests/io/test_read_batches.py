"""The compiled reader (read_batches) against the reference reader (read_sentences)."""

import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fuzz_strategies as fz
from crftk.errors import CrftkError
from crftk.io.conll import Layout, Sentence, read_batches, read_sentences


def _reference(path, **kw):
    items, error = [], None
    layout = Layout()
    try:
        for item in read_sentences(path, passthrough=True, layout=layout, **kw):
            items.append(item)
    except CrftkError as e:
        error = e
    return items, error, layout.separator


def _compiled(path, batch_tokens=50_000, block_size=1 << 20, **kw):
    items, error = [], None
    layout = Layout()
    try:
        for batch in read_batches(path, layout=layout, batch_tokens=batch_tokens, block_size=block_size, **kw):
            items.extend(batch.entries())
    except CrftkError as e:
        error = e
    return items, error, layout.separator


def _as_tuples(items):
    return [x if isinstance(x, str) else (x.rows, x.doc, x.line, x.source) for x in items]


def _check(tmp_path, data, **kw):
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    ref_items, ref_error, ref_sep = _reference(str(path), **{k: v for k, v in kw.items()
                                                            if k not in ("batch_tokens", "block_size")})
    items, error, sep = _compiled(str(path), **kw)
    assert (None if error is None else (error.message, error.path, error.line)) == \
        (None if ref_error is None else (ref_error.message, ref_error.path, ref_error.line))
    if error is None:
        assert _as_tuples(items) == _as_tuples(ref_items)
        assert sep == ref_sep
    else:   # the reference yielded some sentences before its error; the batches before it agree
        assert _as_tuples(items) == _as_tuples(ref_items[:len(items)])


CASES = [
    b"",
    b"\n\n",
    b"a B O\nb C I\n\nc D O\n",
    b"a B O\nb C I\n\nc D O",                                   # no line end at the end
    b"a\tB\tO\r\nb\tC\tI\r\n\r\n",                              # CRLF, tabs
    b"\xef\xbb\xbf-DOCSTART- -X- O\n\na B O\n\n-DOCSTART- -X- O\n\n-DOCSTART- -X- O\nb C O\n",
    b"# prob 0.5\na B O\n# nbest 0 0.25\nb C O\n\n# comment O\n# # O\n\n",
    b"  -DOCSTART-\na B O\n   \n\x0c\n",
    "caf\u00e9 N O\n1\u00a0000 CD O\n\u00e9t\u00e9\x1fX O\n".encode(),
    b"a B O\nb C\n",                                             # column count changes
    b"a B O\n\xff B O\n",                                        # invalid UTF-8
    b"a B O\nb C O\nc D O\nd E O\n",                             # too long with limit 3
    b"a B\n\nb C D\n",
]


@pytest.mark.parametrize("data", CASES)
@pytest.mark.parametrize("batch_tokens,block_size", [(50_000, 1 << 20), (1, 1), (2, 7)])
def test_cases_read_as_the_reference_reads_them(tmp_path, data, batch_tokens, block_size):
    _check(tmp_path, data, batch_tokens=batch_tokens, block_size=block_size)
    _check(tmp_path, data, batch_tokens=batch_tokens, block_size=block_size, n_columns={2, 3},
           max_sentence_tokens=3)
    _check(tmp_path, data, batch_tokens=batch_tokens, block_size=block_size, n_columns=3, min_columns=2)


@settings(max_examples=100)
@given(data=fz.conll_files(), n_columns=st.sampled_from([None, 2, 3, {2, 3}]),
       limit=st.sampled_from([None, 1, 3]), batch_tokens=st.sampled_from([1, 3, 50_000]),
       block_size=st.sampled_from([1, 5, 64, 1 << 20]))
def test_fuzzed_files_read_as_the_reference_reads_them(tmp_path_factory, data, n_columns, limit, batch_tokens,
                                                      block_size):
    _check(tmp_path_factory.mktemp("rb"), data, n_columns=n_columns, max_sentence_tokens=limit,
           batch_tokens=batch_tokens, block_size=block_size)


def test_batches_close_at_sentence_ends_once_full(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(b"w%d X O\nv Y O\n\n" % i for i in range(10)))
    batches = list(read_batches(str(path), batch_tokens=5))
    assert [b.n_tokens for b in batches] == [6, 6, 6, 2]
    assert [len(b.entries()) for b in batches] == [3, 3, 3, 1]


def test_binary_and_text_streams(tmp_path):
    data = b"a B O\n\nb C O\n"
    items = [e for b in read_batches(io.BytesIO(data)) for e in b.entries()]
    assert [s.rows for s in items if isinstance(s, Sentence)] == [[["a", "B", "O"]], [["b", "C", "O"]]]
    items = [e for b in read_batches(io.StringIO(data.decode())) for e in b.entries()]
    assert [s.rows for s in items if isinstance(s, Sentence)] == [[["a", "B", "O"]], [["b", "C", "O"]]]


def _whole_documents_check(tmp_path, data, batch_tokens, block_size):
    """whole_documents keeps the reader's stream and never splits a document between batches."""
    from crftk.io.conll import whole_documents
    path = tmp_path / "in.txt"
    path.write_bytes(data)
    try:
        ref = list(read_sentences(str(path), passthrough=True))
    except CrftkError:
        return
    batches = list(whole_documents(read_batches(str(path), batch_tokens=batch_tokens, block_size=block_size)))
    items = [x for b in batches for x in b.entries()]
    assert _as_tuples(items) == _as_tuples(ref)
    where = {}
    for k, b in enumerate(batches):
        assert b.items.size
        for x in b.entries():
            if not isinstance(x, str):
                assert where.setdefault(x.doc, k) == k, "a document split between batches"
        # the arrays agree with each other as the reader's do
        assert b.sent_ptr[0] == 0 and b.sent_ptr[-1] == b.n_tokens and b.sent_doc.size == b.n_sentences
        assert sorted(b.items[b.items >= 0].tolist()) == list(range(b.n_sentences))
        assert sorted((-1 - b.items[b.items < 0]).tolist()) == list(range(b.pt_start.size))


DOCUMENTS = b"".join(b"-DOCSTART- -X- O\n\n" + b"".join(b"w%d%d X O\nv Y O\n\n" % (d, i) for i in range(d % 4))
                     + (b"# prob 0.5\n\n" if d % 3 == 0 else b"") for d in range(12))


@pytest.mark.parametrize("data", CASES[:8] + [DOCUMENTS, DOCUMENTS.replace(b"-DOCSTART- -X- O\n", b"")])
@pytest.mark.parametrize("batch_tokens,block_size", [(50_000, 1 << 20), (1, 1), (2, 7), (3, 64), (5, 1 << 20)])
def test_whole_documents_keep_the_stream_and_split_no_document(tmp_path, data, batch_tokens, block_size):
    _whole_documents_check(tmp_path, data, batch_tokens, block_size)


@settings(max_examples=100)
@given(data=fz.conll_files(), batch_tokens=st.sampled_from([1, 3, 50_000]), block_size=st.sampled_from([1, 5, 64]))
def test_fuzzed_whole_documents(tmp_path_factory, data, batch_tokens, block_size):
    _whole_documents_check(tmp_path_factory.mktemp("wd"), data, batch_tokens, block_size)


def test_whole_documents_close_where_a_document_ends(tmp_path):
    from crftk.io.conll import whole_documents
    path = tmp_path / "in.txt"
    path.write_bytes(DOCUMENTS)
    plain = list(read_batches(str(path), batch_tokens=3))
    whole = list(whole_documents(read_batches(str(path), batch_tokens=3)))
    # a batch of the reader gives at most one: its documents that end in it, with those held before
    assert 1 < len(whole) <= len(plain)
    assert [b.sent_doc.tolist() for b in whole][:3] == [[0], [1, 1], [2, 2, 2]]
    assert sum(b.n_tokens for b in whole) == sum(b.n_tokens for b in plain)


def test_a_long_document_over_small_batches_holds_its_bytes_once(tmp_path):
    """Each batch of the reader carries the rest of its block; whole_documents keeps only each held
    piece's own bytes (a one-document file in batches of one token held ~N blocks before)."""
    import tracemalloc

    from crftk.io.conll import whole_documents
    path = tmp_path / "one.txt"
    data = b"".join(b"w%d X O\n\n" % i for i in range(3000))
    path.write_bytes(data)
    list(whole_documents(read_batches(str(path), batch_tokens=1)))        # what a first run allocates once
    tracemalloc.start()
    try:
        out = list(whole_documents(read_batches(str(path), batch_tokens=1, block_size=1 << 16)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(out) == 1 and out[0].n_tokens == 3000 and len(out[0].block) <= len(data)
    assert peak < 40 * len(data), peak          # 0.6 MB here; 57 MB when each piece kept its block
