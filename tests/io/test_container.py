"""Tests for crftk.io.container: the model file container (format versions 1 and 2)."""

import hashlib
import json
import os
import pickle
import signal
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

from crftk.io import atomic
from crftk.io import container
from crftk.io.atomic import AtomicWriter
from crftk.io.container import _meta_digest  # noqa: E402  (crafted version-1 headers need it)
from crftk.io.container import (
    FORMAT_VERSION,
    MAGIC,
    dumps,
    loads,
    pack_strings,
    read_container,
    read_header,
    unpack_strings,
    write_container,
)
from crftk.errors import CrftkError
from corpora import REPO

VERSIONS = [1, 2]


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def sample_arrays():
    rng = np.random.default_rng(0)
    return {
        "weights": rng.standard_normal((7, 5)),
        "weights32": rng.standard_normal(13).astype(np.float32),
        "ids": np.arange(-20, 20, dtype=np.int64).reshape(2, 4, 5),
        "i32": np.array([0, -1, 2**31 - 1, -(2**31)], dtype=np.int32),
        "i16": np.array([-300, 300], dtype=np.int16),
        "i8": np.array([-128, 127, 3], dtype=np.int8),
        "u8": np.frombuffer(b"\x00\xffabc", dtype=np.uint8),
        "u16": np.array([65535, 1, 2], dtype=np.uint16),
        "u32": np.array([2**32 - 1], dtype=np.uint32),
        "u64": np.array([2**64 - 1, 0], dtype=np.uint64),
        "mask": np.array([[True, False, True]]),
        "empty_f": np.zeros((0,), dtype=np.float64),
        "empty_2d": np.zeros((3, 0), dtype=np.int32),
        "scalar": np.array(2.5),
        "scalar_int": np.array(-7, dtype=np.int16),
    }


META = {
    "template": "U00:%x[0,0]\nU01:%x[-1,0]/%x[0,0]\nB\n",
    "options": {"c2": 1.0, "max_iter": 100, "algorithm": "lbfgs", "nested": {"a": [1, [2, 3]]}},
    "labels": ["B-PER", "I-PER", "O", "é", ""],
    "flags": [True, False, None],
    "big": 2**62 + 1,
    "float": 0.1,
    "ünïcødé key": "värde ✓",
}


def write_sample(path, version=FORMAT_VERSION):
    arrays = sample_arrays()
    write_container(path, META, arrays, version=version)
    return arrays


def assert_same_arrays(got, expected):
    assert list(got) == list(expected)
    for name, exp in expected.items():
        arr = got[name]
        assert arr.shape == exp.shape, name
        assert arr.dtype == exp.dtype.newbyteorder("<"), name
        np.testing.assert_array_equal(arr, exp, err_msg=name)


def layout(path):
    """(header_len, payload_start, file_size) of a written container of either version."""
    data = path.read_bytes()
    (version,) = struct.unpack_from("<I", data, 8)
    if version == 1:
        (hlen,) = struct.unpack_from("<Q", data, 12)
        return hlen, 20 + hlen, len(data)
    (hlen,) = struct.unpack_from("<Q", data, 16)
    return hlen, 96 + hlen, len(data)


def v1_bytes(header, payload=b"", *, version=1):
    """A version-1 container with an arbitrary header dict, built from the documented layout."""
    raw = json.dumps(header).encode("utf-8")
    return MAGIC + struct.pack("<IQ", version, len(raw)) + raw + payload


def v2_bytes(header, payload=b"", *, reserved=0, pad=True, header_len=None, payload_len=None,
             raw=None):
    """A version-2 container with an arbitrary header (dict, or ``raw`` bytes) and valid
    digests, built from the documented layout independently of the writer."""
    if raw is None:
        raw = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if pad:
            raw += b" " * (-len(raw) % 8)
    fixed = MAGIC + struct.pack(
        "<IIQQ", 2, reserved,
        len(raw) if header_len is None else header_len,
        len(payload) if payload_len is None else payload_len,
    )
    header_digest = hashlib.sha256(fixed + raw).digest()
    file_digest = hashlib.sha256(fixed + header_digest + raw + payload).digest()
    return fixed + header_digest + file_digest + raw + payload


def craft(path, header, payload=b"", *, version=2, fix_checksum=True):
    """Write a hand-made container of the given version; its checksums are right unless
    ``fix_checksum`` is false (version 1)."""
    header = dict(header)
    if version == 1:
        if fix_checksum:
            header["payload_sha256"] = hashlib.sha256(payload).hexdigest()
            header.setdefault("payload_bytes", len(payload))
        path.write_bytes(v1_bytes(header, payload))
    else:
        path.write_bytes(v2_bytes(header, payload))


def good_header(v=2, **overrides):
    """A valid header of version ``v`` for a 16-byte payload holding one float64 array [2]."""
    version = v
    header = {
        "format": "crftk-model",
        "version": version,
        "meta": {},
        "arrays": [{"name": "a", "dtype": "<f8", "shape": [2], "offset": 0, "nbytes": 16}],
    }
    if version == 1:
        header["payload_bytes"] = 16
    header.update(overrides)
    if version == 1:
        header.setdefault("meta_sha256", _meta_digest(header["meta"]))
    return header


def message(excinfo):
    return excinfo.value.message


def flip(data, bit):
    out = bytearray(data)
    out[bit >> 3] ^= 1 << (bit & 7)
    return bytes(out)


# ---------------------------------------------------------------------------
# round trips
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_round_trip_arrays_and_meta(tmp_path, version):
    path = tmp_path / "m.crftk"
    arrays = write_sample(path, version)
    assert struct.unpack_from("<I", path.read_bytes(), 8) == (version,)
    meta, got = read_container(path)
    assert meta == META
    assert_same_arrays(got, arrays)
    assert got["scalar"].shape == () and got["scalar"][()] == 2.5
    assert got["empty_2d"].shape == (3, 0)
    meta2, got2 = loads(path.read_bytes())
    assert meta2 == META
    assert_same_arrays(got2, arrays)


def test_new_files_are_version_2():
    assert FORMAT_VERSION == 2
    assert struct.unpack_from("<I", dumps({}, {}), 8) == (2,)


def test_writing_an_unknown_version_is_refused(tmp_path):
    for version in (0, 3, "2"):
        with pytest.raises(ValueError, match="cannot be written"):
            dumps({}, {}, version=version)
    with pytest.raises(ValueError):
        write_container(tmp_path / "m.crftk", {}, {}, version=3)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("version", VERSIONS)
def test_round_trip_accepts_str_path_and_no_arrays(tmp_path, version):
    path = str(tmp_path / "m.crftk")
    write_container(path, {"x": 1}, {}, version=version)
    assert read_container(path) == ({"x": 1}, {})


def test_version_2_layout_matches_the_documented_format(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path)
    data = path.read_bytes()
    sig, version, reserved, hlen, plen = struct.unpack_from("<8sIIQQ", data, 0)
    assert (sig, version, reserved) == (MAGIC, 2, 0)
    assert hlen % 8 == 0 and len(data) == 96 + hlen + plen
    header_digest, file_digest = data[32:64], data[64:96]
    raw = data[96 : 96 + hlen]
    assert header_digest == hashlib.sha256(data[:32] + raw).digest()
    assert file_digest == hashlib.sha256(data[:64] + data[96:]).digest()
    text = raw.decode("utf-8")
    assert text == text.rstrip(" ") + " " * (len(text) - len(text.rstrip(" ")))
    assert len(text) - len(text.rstrip(" ")) < 8
    header = json.loads(text)
    assert list(header) == ["format", "version", "meta", "arrays"]
    assert header["format"] == "crftk-model" and header["version"] == 2
    assert header["meta"] == META
    payload = data[96 + hlen :]
    pos = 0
    for entry in header["arrays"]:
        assert entry["offset"] == (pos + 7) // 8 * 8
        assert not payload[pos : entry["offset"]].strip(b"\x00")
        pos = entry["offset"] + entry["nbytes"]
    assert pos == len(payload)
    by_name = {e["name"]: e for e in header["arrays"]}
    w = by_name["weights"]
    assert w["dtype"] == "<f8" and w["shape"] == [7, 5] and w["nbytes"] == 7 * 5 * 8
    raw_w = payload[w["offset"] : w["offset"] + w["nbytes"]]
    np.testing.assert_array_equal(np.frombuffer(raw_w, "<f8").reshape(7, 5), sample_arrays()["weights"])
    assert by_name["scalar"]["shape"] == []
    # the helper that crafts version-2 files follows the same documented layout
    assert v2_bytes(header, payload) == data


def test_version_1_layout_matches_the_documented_format(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path, version=1)
    data = path.read_bytes()
    assert data[:8] == MAGIC
    version, hlen = struct.unpack_from("<IQ", data, 8)
    assert version == 1
    start = 20 + hlen
    assert start % 8 == 0
    header = json.loads(data[20:start].decode("utf-8"))
    assert header["format"] == "crftk-model"
    assert header["version"] == 1
    assert header["meta"] == META
    assert header["meta_sha256"] == _meta_digest(META)
    payload = data[start:]
    assert header["payload_bytes"] == len(payload)
    assert header["payload_sha256"] == hashlib.sha256(payload).hexdigest()
    allowed = {"|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f4", "<f8"}
    for entry in header["arrays"]:
        assert entry["dtype"] in allowed
        assert entry["offset"] % 8 == 0
        assert entry["offset"] + entry["nbytes"] <= len(payload)
    by_name = {e["name"]: e for e in header["arrays"]}
    w = by_name["weights"]
    assert w["dtype"] == "<f8" and w["shape"] == [7, 5] and w["nbytes"] == 7 * 5 * 8


def test_big_endian_and_non_contiguous_input_stored_little_endian_c_order(tmp_path):
    path = tmp_path / "m.crftk"
    base = np.arange(24, dtype=np.float64).reshape(4, 6)
    arrays = {
        "be": base.astype(">f8"),
        "be_int": np.arange(5, dtype=">i4"),
        "transposed": base.T,
        "strided": base[::2, ::3],
    }
    write_container(path, {}, arrays)
    header = read_header(path)
    assert [e["dtype"] for e in header["arrays"]] == ["<f8", "<i4", "<f8", "<f8"]
    _, got = read_container(path)
    assert got["be"].dtype == np.dtype("<f8")
    np.testing.assert_array_equal(got["be"], base)
    np.testing.assert_array_equal(got["be_int"], np.arange(5))
    np.testing.assert_array_equal(got["transposed"], base.T)
    np.testing.assert_array_equal(got["strided"], base[::2, ::3])


def test_loaded_arrays_are_read_only(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path)
    _, got = read_container(path)
    with pytest.raises(ValueError):
        got["weights"][0, 0] = 1.0
    copy = got["weights"].copy()
    copy[0, 0] = 1.0


def test_overwrite_replaces_previous_file(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path)
    write_container(path, {"v": 2}, {"a": np.ones(3, dtype=np.int8)})
    meta, got = read_container(path)
    assert meta == {"v": 2}
    assert list(got) == ["a"]
    assert os.listdir(tmp_path) == ["m.crftk"]


# ---------------------------------------------------------------------------
# write-side validation
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        np.array(["a", "b"]),
        np.array([1 + 2j]),
        np.array([1.0], dtype=np.float16),
        np.array([b"x"]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
        np.array([{"a": 1}], dtype=object),
    ],
)
def test_write_rejects_dtypes_outside_whitelist(tmp_path, bad):
    path = tmp_path / "m.crftk"
    with pytest.raises(TypeError, match="unsupported dtype"):
        write_container(path, {}, {"x": bad})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "meta, exc",
    [
        ({"x": object()}, TypeError),
        ({1: "non-str key"}, TypeError),
        ({"x": {"y": {2: 3}}}, TypeError),
        ({"x": float("nan")}, ValueError),
        ({"x": [float("inf")]}, ValueError),
        (["not", "a", "dict"], TypeError),
    ],
)
def test_write_rejects_bad_meta(tmp_path, meta, exc):
    with pytest.raises(exc):
        write_container(tmp_path / "m.crftk", meta, {})
    assert os.listdir(tmp_path) == []


def test_write_rejects_circular_meta(tmp_path):
    meta = {"a": []}
    meta["a"].append(meta)
    with pytest.raises(ValueError):
        write_container(tmp_path / "m.crftk", meta, {})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("name", ["", 3, None])
def test_write_rejects_bad_array_names(tmp_path, name):
    with pytest.raises(TypeError):
        write_container(tmp_path / "m.crftk", {}, {name: np.zeros(1)})


def test_write_into_missing_directory_raises_crftk_error(tmp_path):
    path = tmp_path / "no" / "such" / "dir" / "m.crftk"
    with pytest.raises(CrftkError) as ei:
        write_container(path, {}, {})
    assert ei.value.path == str(path)
    assert "cannot write model file" in message(ei)


# ---------------------------------------------------------------------------
# atomic writes
# ---------------------------------------------------------------------------


def test_failed_write_with_object_array_keeps_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "m.crftk"
    arrays = write_sample(path)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        write_container(path, {"new": True}, {"ok": np.zeros(3), "bad": np.array([None, 1])})
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.crftk"]
    meta, got = read_container(path)
    assert meta == META
    assert_same_arrays(got, arrays)


@pytest.mark.parametrize("fail_in", ["fsync", "replace", "write_payload"])
def test_failure_during_write_keeps_old_file_and_leaves_no_temp(tmp_path, monkeypatch, fail_in):
    path = tmp_path / "m.crftk"
    write_sample(path)
    before = path.read_bytes()
    seen_temp = []

    def boom(*args, **kwargs):
        seen_temp.extend(n for n in os.listdir(tmp_path) if n != "m.crftk")
        raise OSError(28, "No space left on device")

    if fail_in == "fsync":
        monkeypatch.setattr(container.os, "fsync", boom)
    elif fail_in == "replace":
        monkeypatch.setattr(container.os, "replace", boom)
    else:
        # Fail when the payload is written: by then the header has been written
        # to the temp file, so this is a genuine mid-write failure.
        real_fdopen = os.fdopen

        class FailingFile:
            def __init__(self, f):
                self._f, self._writes = f, 0

            def write(self, data):
                self._writes += 1
                if self._writes > 2:
                    self._f.flush()
                    boom()
                return self._f.write(data)

            def __getattr__(self, name):
                return getattr(self._f, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self._f.close()

        def failing_fdopen(*args, **kwargs):
            return FailingFile(real_fdopen(*args, **kwargs))

        monkeypatch.setattr(container.os, "fdopen", failing_fdopen)

    with pytest.raises(CrftkError) as ei:
        write_container(path, {"new": True}, {"x": np.arange(1000.0)})
    assert "No space left on device" in message(ei)
    assert ei.value.path == str(path)
    assert seen_temp, "the failure should have happened while a temp file existed"
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.crftk"]


def test_interrupt_during_write_removes_temp(tmp_path, monkeypatch):
    path = tmp_path / "m.crftk"

    def interrupt(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(container.os, "fsync", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_container(path, {}, {"x": np.zeros(4)})
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
def test_written_file_gets_normal_permissions(tmp_path):
    path = tmp_path / "m.crftk"
    old = os.umask(0o022)
    try:
        write_container(path, {}, {})
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644


# ---------------------------------------------------------------------------
# temp files left by killed writers
# ---------------------------------------------------------------------------


def dead_pid():
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def temp_name(base, pid, host=None):
    host = atomic._host_tag() if host is None else host
    return f".{base}.{pid}-{host}-0123abcd.tmp"


def write_with(writer, path):
    if writer == "container":
        write_container(path, {}, {"x": np.zeros(2)})
    else:
        with AtomicWriter(path) as f:
            f.write("text\n")


@pytest.mark.skipif(os.name != "posix", reason="pids are checked with os.kill(pid, 0)")
@pytest.mark.parametrize("writer", ["container", "atomic-writer"])
def test_a_write_removes_the_temp_files_of_dead_writers_of_the_same_target(tmp_path, writer):
    path = tmp_path / "out"
    gone = dead_pid()
    stale = [temp_name("out", gone), temp_name("out", dead_pid()).replace("0123abcd.tmp", "4567cdef.tmp")]
    other_host = "00000000" if atomic._host_tag() != "00000000" else "11111111"
    kept = [
        temp_name("out", os.getpid()),          # this process: alive
        temp_name("out", os.getppid()),         # alive
        temp_name("out", gone, host=other_host),  # a pid of another machine
        temp_name("other", gone),               # another target
        temp_name("out.old", gone),
        ".out.0123456789ab.tmp",                # older crftk's names carry no pid
        "out.123-0123abcd-0123abcd.tmp",
    ]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"partial")
    not_a_file = temp_name("out", gone).replace("0123abcd.tmp", "99999999.tmp")
    (tmp_path / not_a_file).mkdir()
    kept.append(not_a_file)
    write_with(writer, path)
    assert sorted(os.listdir(tmp_path)) == sorted(kept + ["out"])


@pytest.mark.parametrize("writer", ["container", "atomic-writer"])
def test_temp_file_names_carry_the_writers_pid(tmp_path, monkeypatch, writer):
    seen = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(os.path.basename(src))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    write_with(writer, tmp_path / "out")
    assert len(seen) == 1
    assert atomic._temp_name_pattern("out").fullmatch(seen[0]).group(1) == str(os.getpid())


@pytest.mark.skipif(os.name != "posix", reason="signals")
def test_kill_9_of_tag_leaves_a_temp_that_the_next_run_removes(tmp_path):
    """tag -o reads stdin after it opened its temp file: kill -9 then leaves the temp; SIGTERM
    removes it itself; the next run of any writer of that output removes a killed one's."""
    from corpora import random_corpus
    from crftk.features.space import FeatureSpace
    from crftk.model import Model
    from crftk.features.templates import parse_template

    space, _ = FeatureSpace.fit(random_corpus(20), parse_template("U00:%x[0,0]\nB\n"))
    Model(space, np.zeros(space.n_params)).save(tmp_path / "m.model")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    out = tmp_path / "out.tagged"

    def temps():
        return [n for n in os.listdir(tmp_path) if n.startswith(".out.tagged.")]

    def start():
        proc = subprocess.Popen([sys.executable, "-m", "crftk.cli", "tag", "-m", "m.model", "-o",
                                 "out.tagged", "-"], cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        proc.stdin.write(b"w1 A\nw2 B\n\n")
        proc.stdin.flush()
        deadline = time.monotonic() + 60
        while not temps():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.02)
        return proc

    proc = start()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(60) == 130
    assert temps() == [] and not out.exists()

    proc = start()
    proc.kill()
    proc.wait(60)
    assert len(temps()) == 1 and not out.exists()
    left = temps()[0]
    p = subprocess.run([sys.executable, "-m", "crftk.cli", "tag", "-m", "m.model", "-o", "out.tagged",
                        "-"], cwd=tmp_path, env=env, input=b"w1 A\n\n", capture_output=True)
    assert p.returncode == 0, p.stderr
    assert temps() == [] and out.read_text().split() == ["w1", "A", out.read_text().split()[2]]
    assert not (tmp_path / left).exists()


# ---------------------------------------------------------------------------
# read errors
# ---------------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "nope.crftk"
    for reader in (read_container, read_header):
        with pytest.raises(CrftkError) as ei:
            reader(path)
        assert ei.value.path == str(path)
        assert "not found" in message(ei)


def test_directory_instead_of_file(tmp_path):
    with pytest.raises(CrftkError) as ei:
        read_container(tmp_path)
    assert ei.value.path == str(tmp_path)


@pytest.mark.skipif(not os.path.exists("/proc/self/mem"), reason="needs Linux's /proc")
@pytest.mark.parametrize("reader", [read_container, read_header])
def test_a_file_that_fails_to_read_is_one_error(reader):
    # /proc/self/mem opens, then its first read fails with EIO
    with pytest.raises(CrftkError) as ei:
        reader("/proc/self/mem")
    assert str(ei.value) == "/proc/self/mem: cannot read model file: Input/output error"


class _Evil:
    """Unpickling this would create a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.mark.parametrize("kind", ["pickle", "evil_pickle", "text", "npy", "npz", "empty", "junk"])
def test_foreign_files_are_not_crftk_files(tmp_path, kind):
    path = tmp_path / "model"
    marker = tmp_path / "pwned"
    if kind == "pickle":
        path.write_bytes(pickle.dumps({"weights": np.zeros(3)}))
    elif kind == "evil_pickle":
        path.write_bytes(pickle.dumps(_Evil(str(marker))))
    elif kind == "text":
        path.write_text("U00:%x[0,0]\nB\n", encoding="utf-8")
    elif kind == "npy":
        np.save(path.with_suffix(".npy"), np.zeros(3))
        path.with_suffix(".npy").rename(path)
    elif kind == "npz":
        with open(path, "wb") as f:
            np.savez(f, a=np.zeros(3))
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(b"\x00" * 100)
    for reader in (read_container, read_header):
        with pytest.raises(CrftkError) as ei:
            reader(path)
        assert message(ei).startswith("not a crftk model file")
        assert ei.value.path == str(path)
    assert not marker.exists()


def test_future_version_asks_for_upgrade(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path)
    data = bytearray(path.read_bytes())
    # A future format may lay out everything after the version differently.
    data[8:12] = struct.pack("<I", FORMAT_VERSION + 1)
    data[12:] = b"\xff" * 10
    path.write_bytes(bytes(data))
    for reader in (read_container, read_header):
        with pytest.raises(CrftkError) as ei:
            reader(path)
        assert message(ei) == (
            f"model format version {FORMAT_VERSION + 1} is newer than this crftk "
            f"supports ({FORMAT_VERSION}); upgrade crftk"
        )
        assert ei.value.path == str(path)


def test_version_zero_is_rejected(tmp_path):
    path = tmp_path / "m.crftk"
    path.write_bytes(v1_bytes(good_header(1), b"\x00" * 16, version=0))
    with pytest.raises(CrftkError, match="unsupported model format version 0"):
        read_container(path)


def test_version_1_truncation_points(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path, version=1)
    full = path.read_bytes()
    hlen, start, size = layout(path)
    payload_bytes = size - start
    assert payload_bytes > 100

    cases = {
        3: "truncated: expected 8 bytes of signature, found 3",
        7: "truncated: expected 8 bytes of signature, found 7",
        8: "truncated: expected 4 bytes of format version, found 0",
        10: "truncated: expected 4 bytes of format version, found 2",
        15: "truncated: expected 8 bytes of header length, found 3",
        20: f"truncated: expected {hlen} bytes of header, found 0",
        20 + hlen // 2: f"truncated: expected {hlen} bytes of header, found {hlen // 2}",
        start - 1: f"truncated: expected {hlen} bytes of header, found {hlen - 1}",
        start: f"truncated: expected {payload_bytes} bytes of payload, found 0",
        start + 50: f"truncated: expected {payload_bytes} bytes of payload, found 50",
        size - 1: (
            f"truncated: expected {payload_bytes} bytes of payload, found {payload_bytes - 1}"
        ),
    }
    for cut, expected in cases.items():
        path.write_bytes(full[:cut])
        with pytest.raises(CrftkError) as ei:
            read_container(path)
        assert message(ei) == expected, cut
        assert ei.value.path == str(path)


def test_version_2_truncation_points(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path)
    full = path.read_bytes()
    hlen, start, size = layout(path)
    payload_bytes = size - start
    assert payload_bytes > 100

    cases = {
        3: "truncated: expected 8 bytes of signature, found 3",
        8: "truncated: expected 4 bytes of format version, found 0",
        10: "truncated: expected 4 bytes of format version, found 2",
        12: "truncated: expected 96 bytes of preamble, found 12",
        40: "truncated: expected 96 bytes of preamble, found 40",
        95: "truncated: expected 96 bytes of preamble, found 95",
        96: f"truncated: expected {hlen} bytes of header, found 0",
        96 + hlen // 2: f"truncated: expected {hlen} bytes of header, found {hlen // 2}",
        start - 1: f"truncated: expected {hlen} bytes of header, found {hlen - 1}",
        start: f"truncated: expected {payload_bytes} bytes of payload, found 0",
        start + 50: f"truncated: expected {payload_bytes} bytes of payload, found 50",
        size - 1: (
            f"truncated: expected {payload_bytes} bytes of payload, found {payload_bytes - 1}"
        ),
    }
    for cut, expected in cases.items():
        path.write_bytes(full[:cut])
        with pytest.raises(CrftkError) as ei:
            read_container(path)
        assert message(ei) == expected, cut
        assert ei.value.path == str(path)
        assert "truncated" in str(pytest.raises(CrftkError, loads, full[:cut]).value)


@pytest.mark.parametrize("version", VERSIONS)
def test_trailing_bytes_are_rejected(tmp_path, version):
    path = tmp_path / "m.crftk"
    write_sample(path, version)
    with open(path, "ab") as f:
        f.write(b"extra")
    with pytest.raises(CrftkError, match="corrupted: 5 unexpected bytes after the payload"):
        read_container(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_flipped_payload_byte_fails_checksum(tmp_path, version):
    path = tmp_path / "m.crftk"
    write_sample(path, version)
    full = bytearray(path.read_bytes())
    _, start, size = layout(path)
    for pos in (start, (start + size) // 2, size - 1):
        data = bytearray(full)
        data[pos] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(CrftkError) as ei:
            read_container(path)
        assert message(ei) == "corrupted: checksum mismatch"
        assert ei.value.path == str(path)
        # The header is still readable for `crftk info`.
        assert read_header(path)["meta"] == META


def test_version_2_flipped_header_or_digest_byte_is_caught(tmp_path):
    path = tmp_path / "m.crftk"
    write_sample(path)
    full = path.read_bytes()
    hlen, start, _ = layout(path)
    expected = {
        13: "corrupted: header checksum mismatch",            # reserved field
        26: "corrupted: header checksum mismatch",            # payload length
        40: "corrupted: header checksum mismatch",            # header digest
        70: "corrupted: checksum mismatch",                   # file digest: read_header trusts it
        100: "corrupted: header checksum mismatch",           # JSON
        start - 1: "corrupted: header checksum mismatch",     # padding
    }
    for pos, text in expected.items():
        data = bytearray(full)
        data[pos] ^= 0x01
        path.write_bytes(bytes(data))
        with pytest.raises(CrftkError) as ei:
            read_container(path)
        assert message(ei) == text, pos
        if "header" in text:
            with pytest.raises(CrftkError, match="header checksum mismatch"):
                read_header(path)
        else:
            assert read_header(path)["meta"] == META


def test_version_2_every_single_bit_flip_is_rejected():
    data = dumps({"template": "U00:%x[0,0]", "n": 3},
                 {"w": np.array([0.5, -1.25, 3.0]), "ids": np.array([1, 2], dtype=np.int32),
                  "mask": np.array([True, False])})
    assert loads(data)[0] == {"template": "U00:%x[0,0]", "n": 3}
    messages = set()
    for bit in range(len(data) * 8):
        with pytest.raises(CrftkError) as ei:
            loads(flip(data, bit), name="m")
        assert "\n" not in str(ei.value)
        messages.add(message(ei).split(":")[0])
    assert messages <= {"not a crftk model file", "corrupted", "truncated",
                        "model format version 3 is newer than this crftk supports (2); upgrade crftk",
                        "unsupported model format version 0"} | {
        f"model format version {2 ^ (1 << b)} is newer than this crftk supports (2); upgrade crftk"
        for b in range(32)}


@pytest.mark.parametrize("version", VERSIONS)
def test_read_header_does_not_need_the_payload(tmp_path, version):
    path = tmp_path / "m.crftk"
    write_sample(path, version)
    _, start, _ = layout(path)
    path.write_bytes(path.read_bytes()[:start])  # header only, payload gone
    header = read_header(path)
    assert header["meta"] == META
    assert header["format"] == "crftk-model"
    assert header["version"] == version
    assert [e["name"] for e in header["arrays"]] == list(sample_arrays())
    with pytest.raises(CrftkError, match="truncated: expected .* bytes of payload, found 0"):
        read_container(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_read_header_reads_only_the_header_bytes(tmp_path, monkeypatch, version):
    path = tmp_path / "m.crftk"
    write_container(path, {"k": "v"}, {"big": np.zeros(1 << 20)}, version=version)
    _, start, size = layout(path)
    consumed = []
    real_open = open

    class Spy:
        def __init__(self, f):
            self._f = f

        def read(self, n=-1):
            data = self._f.read(n)
            consumed.append(len(data))
            return data

        def __getattr__(self, name):
            return getattr(self._f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._f.close()

    monkeypatch.setattr(container, "open", lambda *a, **k: Spy(real_open(*a, **k)), raising=False)
    assert read_header(path)["meta"] == {"k": "v"}
    assert sum(consumed) == start < size


@pytest.mark.parametrize("version", VERSIONS)
def test_wrong_format_name(tmp_path, version):
    path = tmp_path / "m.crftk"
    write_container(path, {}, {}, format_name="crftk-other", version=version)
    expected = "wrong file format 'crftk-other', expected 'crftk-model'"
    with pytest.raises(CrftkError, match=expected):
        read_container(path)
    meta, arrays = read_container(path, expected_format="crftk-other")
    assert (meta, arrays) == ({}, {})
    assert read_header(path, expected_format=None)["format"] == "crftk-other"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b"[1, 2, 3]",
        b'"a string"',
        b"\xff\xfe{}",
        b'{"format": "crftk-model", "version": 1, "meta": {}, "arrays": [], '
        b'"payload_bytes": 0, "payload_sha256": NaN}',
        b"[" * 100000 + b"]" * 100000,
        b'{"format": "crftk-model"} x',
        b' {"format": "crftk-model"}',
    ],
    ids=["syntax", "list", "string", "bad-utf8", "nan", "deep-nesting", "text-after", "space-before"],
)
def test_malformed_json_header(tmp_path, raw, version):
    path = tmp_path / "m.crftk"
    if version == 1:
        path.write_bytes(MAGIC + struct.pack("<IQ", 1, len(raw)) + raw)
    else:
        path.write_bytes(v2_bytes(None, raw=raw + b" " * (-len(raw) % 8)))
    for reader in (read_container, read_header):
        with pytest.raises(CrftkError) as ei:
            reader(path)
        assert message(ei).startswith("malformed header")
        assert "\n" not in str(ei.value)
        assert ei.value.path == str(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_crafted_good_header_is_accepted(tmp_path, version):
    """Sanity check for the crafting helpers used by the tests below."""
    path = tmp_path / "m.crftk"
    payload = np.array([1.5, -2.0]).tobytes()
    craft(path, good_header(version), payload, version=version)
    meta, arrays = read_container(path)
    np.testing.assert_array_equal(arrays["a"], [1.5, -2.0])


def _entry(**overrides):
    entry = {"name": "a", "dtype": "<f8", "shape": [2], "offset": 0, "nbytes": 16}
    entry.update(overrides)
    return entry


def _b(**overrides):
    entry = {"name": "b", "dtype": "<i4", "shape": [1], "offset": 16, "nbytes": 4}
    entry.update(overrides)
    return entry


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "entries, fragment",
    [
        ([_entry(offset=1 << 40)], "outside the 16-byte payload"),
        ([_entry(offset=8)], "outside the 16-byte payload"),
        ([_entry(offset=-8)], "offset"),
        ([_entry(offset=4, nbytes=8, shape=[1])], "offset"),
        ([_entry(offset=1.0)], "offset"),
        ([_entry(nbytes=24)], "does not match shape"),
        ([_entry(shape=[3])], "does not match shape"),
        ([_entry(shape=[-2])], "invalid shape"),
        ([_entry(shape=[True, 2])], "invalid shape"),
        ([_entry(shape="2")], "invalid shape"),
        ([_entry(shape=[2**40, 2**40], nbytes=2**83)], "outside the 16-byte payload"),
        ([_entry(shape=[1] * 33, nbytes=8)], "too many dimensions"),
        ([_entry(dtype="|O")], "dtype '|O' is not allowed"),
        ([_entry(dtype="object")], "is not allowed"),
        ([_entry(dtype=">f8")], "is not allowed"),
        ([_entry(dtype="<U2")], "is not allowed"),
        ([_entry(dtype="<f2", nbytes=4)], "is not allowed"),
        ([_entry(dtype=["<f8"])], "is not allowed"),
        ([_entry(name="")], "invalid name"),
        ([_entry(), _entry()], "appears twice"),
        ([{"name": "a", "dtype": "<f8"}], "lacks"),
        (["not an object"], "lacks"),
        ({"a": "not a list"}, "'arrays' is not a list"),
        # arrays lie where the writer puts them: in order, 8-aligned, no overlap, no hole
        ([_entry(shape=[1], nbytes=8, offset=8)], "not where it belongs (0"),
        ([_entry(shape=[1], nbytes=8)], "the arrays end at byte 8 of the 16-byte payload"),
        ([], "the arrays end at byte 0 of the 16-byte payload"),
        ([_entry(shape=[1], nbytes=8), _entry(name="b", shape=[1], nbytes=8, offset=0)],
         "array 'b': offset 0 is not where it belongs (8"),
        ([_entry(name="b", shape=[1], nbytes=8, offset=8), _entry(shape=[1], nbytes=8, offset=0)],
         "array 'b': offset 8 is not where it belongs (0"),
    ],
)
def test_crafted_bad_array_directory(tmp_path, entries, fragment, version):
    path = tmp_path / "m.crftk"
    craft(path, good_header(version, arrays=entries), b"\x00" * 16, version=version)
    for reader in (read_container, read_header):
        with pytest.raises(CrftkError) as ei:
            reader(path)
        assert message(ei).startswith("malformed header")
        assert fragment in message(ei)
        assert ei.value.path == str(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_crafted_arrays_at_their_places_with_a_gap_are_accepted(tmp_path, version):
    path = tmp_path / "m.crftk"
    entries = [_entry(name="b", dtype="<i4", shape=[1], nbytes=4), _entry(offset=8)]
    payload = struct.pack("<i", -3) + bytes(4) + np.array([1.0, 2.0]).tobytes()
    craft(path, good_header(version, arrays=entries, **({"payload_bytes": 24} if version == 1 else {})),
          payload, version=version)
    _, arrays = read_container(path)
    assert arrays["b"].tolist() == [-3] and arrays["a"].tolist() == [1.0, 2.0]
    bad = payload[:5] + b"\x01" + payload[6:]      # a non-zero byte in the gap
    craft(path, good_header(version, arrays=entries, **({"payload_bytes": 24} if version == 1 else {})),
          bad, version=version)
    with pytest.raises(CrftkError, match="corrupted: non-zero padding before array 'a'"):
        read_container(path)


def test_version_1_edited_array_offset_is_rejected(tmp_path):
    """The fuzz finding of issue 13: version 1's checksums do not cover the array directory,
    so an edited offset loaded other bytes silently. The layout check rejects it."""
    path = tmp_path / "m.crftk"
    write_container(path, {"k": 1}, {"a": np.arange(4.0), "b": np.arange(6.0)}, version=1)
    data = path.read_bytes()
    assert b'"offset":32' in data
    for edit in (b'"offset":24', b'"offset":40', b'"offset":0 ', b'"offset":3 '):
        path.write_bytes(data.replace(b'"offset":32', edit))
        with pytest.raises(CrftkError, match="malformed header: array 'b'"):
            read_container(path)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "overrides, fragment",
    [
        ({"version": 3}, "does not match the file version"),
        ({"version": True}, "does not match the file version"),
        ({"meta": []}, "'meta' is not an object"),
        ({"format": 7}, "'format' is not a string"),
    ],
)
def test_crafted_bad_header_fields(tmp_path, overrides, fragment, version):
    path = tmp_path / "m.crftk"
    craft(path, good_header(version, **overrides), b"\x00" * 16, version=version)
    with pytest.raises(CrftkError) as ei:
        read_container(path)
    assert fragment in message(ei)


@pytest.mark.parametrize("value", [-1, "16", 16.0])
def test_crafted_bad_payload_bytes_version_1(tmp_path, value):
    path = tmp_path / "m.crftk"
    craft(path, good_header(1, payload_bytes=value), b"\x00" * 16, version=1)
    with pytest.raises(CrftkError, match="'payload_bytes'"):
        read_container(path)


@pytest.mark.parametrize(
    "drop", ["format", "version", "meta", "arrays", "payload_bytes", "payload_sha256", "meta_sha256"]
)
def test_crafted_header_missing_key_version_1(tmp_path, drop):
    path = tmp_path / "m.crftk"
    payload = b"\x00" * 16
    header = dict(good_header(1), payload_sha256=hashlib.sha256(payload).hexdigest())
    del header[drop]
    craft(path, header, payload, version=1, fix_checksum=False)
    with pytest.raises(CrftkError, match=f"malformed header: missing '{drop}'"):
        read_container(path)


@pytest.mark.parametrize("drop", ["format", "version", "meta", "arrays"])
def test_crafted_header_missing_key_version_2(tmp_path, drop):
    path = tmp_path / "m.crftk"
    header = good_header(2)
    del header[drop]
    craft(path, header, b"\x00" * 16)
    with pytest.raises(CrftkError, match=f"malformed header: missing '{drop}'"):
        read_container(path)


def test_unknown_header_keys_version_2_rejected_version_1_ignored(tmp_path):
    path = tmp_path / "m.crftk"
    craft(path, good_header(2, extra=1), b"\x00" * 16)
    with pytest.raises(CrftkError, match="malformed header: unknown key 'extra'"):
        read_container(path)
    craft(path, good_header(1, extra=1), b"\x00" * 16, version=1)
    assert read_container(path)[1]["a"].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("sha", ["abc", "G" * 64, "A" * 64, 5])
def test_crafted_bad_checksum_field_version_1(tmp_path, sha):
    path = tmp_path / "m.crftk"
    path.write_bytes(v1_bytes(dict(good_header(1), payload_sha256=sha), b"\x00" * 16))
    with pytest.raises(CrftkError, match="payload_sha256"):
        read_container(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_edited_meta_is_caught_by_the_header_checksum(tmp_path, version):
    path = tmp_path / "m.crftk"
    write_container(path, {"template": "U00:%x[0,0]"}, {"a": np.arange(3.0)}, version=version)
    data = path.read_bytes()
    assert b"U00:%x[0,0]" in data
    path.write_bytes(data.replace(b"U00:%x[0,0]", b"U00:%x[0,1]"))
    for reader in (read_container, read_header):
        with pytest.raises(CrftkError, match="header checksum mismatch"):
            reader(path)


def test_crafted_header_length_past_end_of_file(tmp_path):
    path = tmp_path / "m.crftk"
    path.write_bytes(MAGIC + struct.pack("<IQ", 1, 2**63) + b"{}")
    with pytest.raises(CrftkError, match=f"truncated: expected {2**63} bytes of header, found 2"):
        read_container(path)
    path.write_bytes(v2_bytes(None, raw=b"{}      ", header_len=2**63))
    with pytest.raises(CrftkError, match=f"truncated: expected {2**63} bytes of header, found 8"):
        read_container(path)


def test_crafted_version_2_preamble_fields(tmp_path):
    path = tmp_path / "m.crftk"
    payload = b"\x00" * 16
    path.write_bytes(v2_bytes(good_header(), payload, reserved=1))
    with pytest.raises(CrftkError, match="malformed header: reserved field is 1, not 0"):
        read_container(path)
    path.write_bytes(v2_bytes(good_header(), payload, pad=False))
    with pytest.raises(CrftkError, match="is not a multiple of 8"):
        read_container(path)
    raw = json.dumps(good_header(), separators=(",", ":")).encode()
    path.write_bytes(v2_bytes(None, payload, raw=raw + b" " * (-len(raw) % 8 + 8)))
    with pytest.raises(CrftkError, match="more than 7 bytes of padding"):
        read_container(path)
    path.write_bytes(v2_bytes(good_header(arrays=[_entry(shape=[3], nbytes=24)]), payload, payload_len=24))
    with pytest.raises(CrftkError, match="truncated: expected 24 bytes of payload, found 16"):
        read_container(path)
    path.write_bytes(v2_bytes(good_header(), payload + bytes(8), payload_len=16))
    with pytest.raises(CrftkError, match="corrupted: 8 unexpected bytes after the payload"):
        read_container(path)


@pytest.mark.parametrize("version", VERSIONS)
def test_crafted_bool_array_with_invalid_bytes(tmp_path, version):
    path = tmp_path / "m.crftk"
    entries = [{"name": "m", "dtype": "|b1", "shape": [3], "offset": 0, "nbytes": 3}]
    extra = {"payload_bytes": 3} if version == 1 else {}
    craft(path, good_header(version, arrays=entries, **extra), b"\x01\x00\x02", version=version)
    with pytest.raises(CrftkError, match="bool"):
        read_container(path)


def test_crafted_aliases_for_one_byte_dtypes(tmp_path):
    """Version 1 accepts '<b1', '<i1' and '<u1'; version 2 only the spellings it writes."""
    path = tmp_path / "m.crftk"
    entries = [
        {"name": "b", "dtype": "<b1", "shape": [2], "offset": 0, "nbytes": 2},
        {"name": "i", "dtype": "<i1", "shape": [2], "offset": 8, "nbytes": 2},
        {"name": "u", "dtype": "<u1", "shape": [2], "offset": 16, "nbytes": 2},
    ]
    payload = b"\x01\x00" + b"\x00" * 6 + b"\xff\x01" + b"\x00" * 6 + b"\xff\x01"
    craft(path, good_header(1, arrays=entries, payload_bytes=len(payload)), payload, version=1)
    _, arrays = read_container(path)
    np.testing.assert_array_equal(arrays["b"], [True, False])
    np.testing.assert_array_equal(arrays["i"], [-1, 1])
    np.testing.assert_array_equal(arrays["u"], [255, 1])
    craft(path, good_header(2, arrays=entries), payload)
    with pytest.raises(CrftkError, match="dtype '<b1' is not allowed"):
        read_container(path)


def test_loading_never_unpickles(tmp_path, monkeypatch):
    path = tmp_path / "m.crftk"
    write_sample(path)

    def forbidden(*a, **k):
        raise AssertionError("pickle used while loading")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    meta, arrays = read_container(path)
    assert meta == META


# ---------------------------------------------------------------------------
# string lists
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "strings",
    [
        [],
        [""],
        ["", "", ""],
        ["a", "bc", "", "def"],
        ["naïve", "", "日本語", "x", "emoji 😀", "", "ß"],
        ["\x00", "a\x00b", "\n", " "],
        ["ascii only", "then", "é"],
        ["é"],
    ],
)
def test_strings_round_trip(strings):
    offsets, blob = pack_strings(strings)
    assert offsets.dtype == np.uint64 and offsets.ndim == 1
    assert blob.dtype == np.uint8 and blob.ndim == 1
    assert len(offsets) == len(strings) + 1
    assert offsets[0] == 0 and offsets[-1] == blob.size
    assert blob.tobytes() == "".join(strings).encode("utf-8")
    assert unpack_strings(offsets, blob) == strings


def test_strings_round_trip_through_a_file(tmp_path):
    path = tmp_path / "m.crftk"
    labels = ["B-LOC", "I-LOC", "O", "Ünïcode", ""]
    feats = ["w[0]=the", "w[0]=Straße", "", "w[-1]=日本"]
    lo, lb = pack_strings(labels)
    fo, fb = pack_strings(feats)
    write_container(path, {}, {"labels.offsets": lo, "labels.blob": lb,
                               "feats.offsets": fo, "feats.blob": fb})
    _, arrays = read_container(path)
    assert unpack_strings(arrays["labels.offsets"], arrays["labels.blob"]) == labels
    assert unpack_strings(arrays["feats.offsets"], arrays["feats.blob"]) == feats


def test_pack_strings_rejects_non_str():
    with pytest.raises(TypeError):
        pack_strings(["a", b"b"])
    with pytest.raises(TypeError):
        pack_strings(["a", None])
    with pytest.raises(UnicodeEncodeError):
        pack_strings(["a", "\udcff"])


def test_pack_strings_accepts_any_iterable():
    offsets, blob = pack_strings(s for s in ["x", "yz"])
    assert unpack_strings(offsets, blob) == ["x", "yz"]


@pytest.mark.parametrize(
    "offsets, blob, fragment",
    [
        ([0, 2, 1, 3], b"abc", "non-decreasing"),
        ([1, 3], b"abc", "expected 0 to 3"),
        ([0, 2], b"abc", "expected 0 to 3"),
        ([0, 9, 3], b"abc", "outside the blob"),
        ([0, -1, 3], b"abc", "outside the blob"),
        ([], b"", "non-empty"),
        ([0, 1, 3], "é!".encode(), "splits a UTF-8 character"),
        ([0, 1, 2], b"a\xff", "invalid UTF-8"),
        ([0, 2], b"\xc3(", "invalid UTF-8"),
    ],
)
def test_unpack_strings_rejects_inconsistent_input(offsets, blob, fragment):
    with pytest.raises(CrftkError) as ei:
        unpack_strings(np.array(offsets, dtype=np.int64),
                       np.frombuffer(blob, dtype=np.uint8), path="m.crftk")
    assert fragment in ei.value.message
    assert ei.value.path == "m.crftk"


def test_unpack_strings_rejects_wrong_dtypes():
    with pytest.raises(CrftkError, match="uint8"):
        unpack_strings(np.array([0, 1], dtype=np.uint64), np.array([1.0]))
    with pytest.raises(CrftkError, match="integer"):
        unpack_strings(np.array([0.0, 1.0]), np.frombuffer(b"a", dtype=np.uint8))


def test_million_strings_round_trip():
    # the size of a large model's dictionary; speed is benchmarked, not timed here
    ascii_strings = [f"w[0]={i}" for i in range(1_000_000)]
    mixed = [f"w[0]=é{i}" if i % 7 == 0 else f"w{i}" for i in range(1_000_000)]
    for strings in (ascii_strings, mixed):
        offsets, blob = pack_strings(strings)
        assert len(offsets) == len(strings) + 1
        assert unpack_strings(offsets, blob) == strings
