"""crftk.io.stream: the gold labels of a batch read in compiled code."""

import subprocess
import sys

from crftk.io.conll import read_batches
from crftk.io.stream import gold_ids


def test_gold_ids_numbers_each_columns_labels(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("a X B\nb Y O\n\nc X O\n\n")
    batch, = read_batches(str(path), n_columns={3})
    ids, strings = gold_ids(batch, [1, 2], [["Y"], ["O", "B"]])
    assert ids.tolist() == [[1, 0, 1], [1, 0, 0]]
    assert strings == [["Y", "X"], ["O", "B"]]


def test_a_negative_column_is_refused_by_the_kernel(tmp_path):
    # issue 31: _textio.column_ids (built without wraparound) read before the row with -1 or -2:
    # a segfault, so the call runs in a subprocess
    path = tmp_path / "in.txt"
    path.write_text("a X B\nb Y O\n\n")
    code = ("from crftk.io.conll import read_batches\nfrom crftk.io.stream import gold_ids\n"
            f"batch, = read_batches({str(path)!r}, n_columns={{3}})\n"
            "for col in (-1, -2):\n"
            "    try:\n        gold_ids(batch, [0, col], [[], []])\n"
            "    except ValueError as e:\n        print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.returncode, r.stderr)
    assert r.stdout.splitlines() == ["column_ids: column -1 is not a column index",
                                   "column_ids: column -2 is not a column index"]
