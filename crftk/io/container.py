"""The on-disk container for crftk model files.

A container holds a JSON-serialisable ``meta`` dict (template text, options,
label names, ...) and a set of named numpy arrays (weights, vocabularies).
It is never a pickle: loading parses a JSON header and copies raw bytes into
numpy arrays of whitelisted plain dtypes, so a file cannot run code.

Every version starts with the same 12 bytes (integers are little-endian)::

    offset  size  field
    0       8     signature  b"CRFTK\\x00M\\x01"  (fixed; it is not the version)
    8       4     format version, uint32

Version 2 (what crftk writes) protects every byte of the file::

    offset  size  field
    0       8     signature
    8       4     format version, uint32 = 2
    12      4     reserved, uint32 = 0
    16      8     header length H in bytes, uint64, a multiple of 8
    24      8     payload length P in bytes, uint64
    32      32    header digest: SHA-256 of bytes 0..31 followed by the H header bytes
    64      32    file digest: SHA-256 of every byte of the file except these 32,
                  that is bytes 0..63, then the header, then the payload
    96      H     header: UTF-8 JSON object followed by 0 to 7 spaces
    96+H    P     payload: the raw array bytes

The file is exactly 96+H+P bytes. A reader checks the header digest before it
parses the header, and the file digest before it uses the payload, so a damaged
file is rejected whatever byte is damaged; ``crftk info``'s header-only reading
(:func:`read_header`) checks the header digest without reading the payload.
The JSON header has exactly these keys::

    "format"    format name, "crftk-model" for model files
    "version"   2 (the binary field again)
    "meta"      the caller's dict, stored as given
    "arrays"    list of {"name", "dtype", "shape", "offset", "nbytes"}

Version 1 (what crftk wrote before format 2; still read) has no digest of the whole file::

    0       8     signature
    8       4     format version, uint32 = 1
    12      8     header length H in bytes, uint64
    20      H     header: UTF-8 JSON object padded with trailing spaces so that
                  the payload starts at a multiple of 8
    20+H    P     payload

and its JSON header has, besides the four keys above, ``"payload_bytes"`` (P),
``"payload_sha256"`` (hex SHA-256 of the payload) and ``"meta_sha256"`` (hex
SHA-256 of the canonical JSON of "meta": sorted keys, no spaces). Version-1
files are still read; :func:`dumps` and :func:`write_container` write one with
``version=1`` (for tests and for older crftk releases).

In both versions each array is stored C-contiguous and little-endian, in the
order of the "arrays" list: ``offset`` (relative to the start of the payload)
is the first multiple of 8 at or after the end of the previous array (0 for
the first), the bytes in between are zero, and the payload ends with the last
array.  ``nbytes`` equals ``prod(shape) * itemsize``.  ``dtype`` is the numpy
dtype string with an explicit byte order, one of ``|b1`` (bool), ``|i1``,
``<i2``, ``<i4``, ``<i8``, ``|u1``, ``<u2``, ``<u4``, ``<u8``, ``<f4``,
``<f8`` (numpy spells one-byte types with ``|``, "byte order not applicable";
version 1 also accepts ``<b1``, ``<i1`` and ``<u1`` on reading).  A bool array
holds only the bytes 0 and 1.  0-d arrays (shape ``[]``) and empty arrays are
supported.  Anything else (a misplaced array, a length that disagrees with the
file size) is rejected on reading.

Files are written atomically (temp file in the same directory, fsync,
``os.replace``), so a crash or error never leaves a half-written model under
the target name; FIFOs and devices are written directly (crftk.io.outputs).

Lists of strings (vocabularies) are stored as two arrays with
:func:`pack_strings` / :func:`unpack_strings`.
"""

import contextlib
import io
import json
import os
import struct

import numpy as np

from crftk.io.atomic import fsync_directory, open_temp_beside
from crftk.io.outputs import open_direct, output_target
from crftk.errors import CrftkError

__all__ = [
    "MAGIC",
    "FORMAT_VERSION",
    "FORMAT_NAME",
    "write_container",
    "read_container",
    "dumps",
    "loads",
    "read_header",
    "pack_strings",
    "unpack_strings",
]

MAGIC = b"CRFTK\x00M\x01"
FORMAT_VERSION = 2
FORMAT_NAME = "crftk-model"
_VERSIONS = (1, 2)

_V1_PREAMBLE = struct.Struct("<8sIQ")  # signature, version, header length: 20 bytes
_V2_FIXED = struct.Struct("<8sIIQQ")  # signature, version, reserved, H, P: 32 bytes
_V2_PREAMBLE_SIZE = _V2_FIXED.size + 64  # + header digest + file digest = 96
_ALIGN = 8
_MAX_DIMS = 32

# Stored dtype string -> dtype.  The first spelling of each type is the one
# that is written.
_DTYPES = {
    "|b1": np.dtype("bool"),
    "|i1": np.dtype("int8"),
    "<i2": np.dtype("<i2"),
    "<i4": np.dtype("<i4"),
    "<i8": np.dtype("<i8"),
    "|u1": np.dtype("uint8"),
    "<u2": np.dtype("<u2"),
    "<u4": np.dtype("<u4"),
    "<u8": np.dtype("<u8"),
    "<f4": np.dtype("<f4"),
    "<f8": np.dtype("<f8"),
}
_V1_DTYPE_ALIASES = {"<b1": "|b1", "<i1": "|i1", "<u1": "|u1"}

_V1_HEADER_KEYS = ("format", "version", "meta", "arrays", "payload_bytes", "payload_sha256", "meta_sha256")
_V2_HEADER_KEYS = ("format", "version", "meta", "arrays")
_ENTRY_KEYS = ("name", "dtype", "shape", "offset", "nbytes")


def _sha256(data=b""):
    """A SHA-256 hash object. hashlib (OpenSSL's libcrypto, a few MB resident) is imported when a
    file is first written or read, not by every process that imports this module."""
    import hashlib
    return hashlib.sha256(data)


def _align(n):
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def _is_int(x):
    return type(x) is int  # excludes bool


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------


def _check_json_value(value, where):
    """Reject values that JSON would silently change (non-str keys) or refuse."""
    stack = [(value, where)]
    seen = set()  # containers already checked; also stops on cycles
    while stack:
        v, w = stack.pop()
        if v is None or isinstance(v, (bool, int, str)):
            continue
        if isinstance(v, (dict, list, tuple)):
            if id(v) in seen:
                continue
            seen.add(id(v))
        if isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise ValueError(f"{w}: {v!r} cannot be stored in JSON")
            continue
        if isinstance(v, dict):
            for k, item in v.items():
                if not isinstance(k, str):
                    raise TypeError(f"{w}: dict key {k!r} is not a str")
                stack.append((item, f"{w}[{k!r}]"))
            continue
        if isinstance(v, (list, tuple)):
            stack.extend((item, f"{w}[{i}]") for i, item in enumerate(v))
            continue
        raise TypeError(f"{w}: {type(v).__name__} is not JSON-serialisable")


def _prepare_arrays(arrays):
    """Validate and convert arrays; return (entries, payload length)."""
    if not isinstance(arrays, dict):
        raise TypeError(f"arrays must be a dict, not {type(arrays).__name__}")
    entries = []
    pos = 0
    for name, value in arrays.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"array name {name!r} must be a non-empty str")
        arr = np.asarray(value)
        dt = arr.dtype
        code = dt.newbyteorder("<").str if dt.fields is None and dt.subdtype is None else None
        if code not in _DTYPES or dt.kind not in "biuf":
            raise TypeError(
                f"array {name!r} has unsupported dtype {dt}; allowed: bool, "
                "int8/16/32/64, uint8/16/32/64, float32/64"
            )
        arr = np.asarray(arr, dtype=_DTYPES[code], order="C")  # keeps 0-d arrays 0-d
        raw = arr.reshape(-1).view(np.uint8)
        start = _align(pos)
        entries.append(
            {
                "name": name,
                "dtype": code,
                "shape": [int(d) for d in arr.shape],
                "offset": start,
                "nbytes": int(raw.size),
                "_raw": raw,
            }
        )
        pos = start + raw.size
    return entries, pos


def _payload_chunks(entries):
    """The payload's bytes in file order: each array after its zero padding."""
    chunks = []
    pos = 0
    for e in entries:
        if e["offset"] > pos:
            chunks.append(bytes(e["offset"] - pos))
        chunks.append(e["_raw"])
        pos = e["offset"] + e["nbytes"]
    return chunks


def _meta_digest(meta):
    """SHA-256 of the canonical JSON of meta (version 1's check of the header text)."""
    text = json.dumps(meta, ensure_ascii=False, allow_nan=False, sort_keys=True, separators=(",", ":"))
    return _sha256(text.encode("utf-8")).hexdigest()


def _json_bytes(header, start):
    """The header as UTF-8 JSON, padded with spaces so that ``start + len`` is a multiple of 8."""
    text = json.dumps(header, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    data = text.encode("utf-8")
    return data + b" " * (_align(start + len(data)) - start - len(data))


def _entries_json(entries):
    return [{k: e[k] for k in _ENTRY_KEYS} for e in entries]


def _v1_chunks(fmt, meta, entries, payload_bytes):
    payload = _payload_chunks(entries)
    digest = _sha256()
    for c in payload:
        digest.update(c)
    header = {
        "format": fmt,
        "version": 1,
        "meta": meta,
        "arrays": _entries_json(entries),
        "payload_bytes": payload_bytes,
        "payload_sha256": digest.hexdigest(),
        "meta_sha256": _meta_digest(meta),
    }
    header = _json_bytes(header, _V1_PREAMBLE.size)
    return [_V1_PREAMBLE.pack(MAGIC, 1, len(header)), header] + payload


def _v2_chunks(fmt, meta, entries, payload_bytes):
    payload = _payload_chunks(entries)
    header = _json_bytes({"format": fmt, "version": 2, "meta": meta, "arrays": _entries_json(entries)},
                         _V2_PREAMBLE_SIZE)
    fixed = _V2_FIXED.pack(MAGIC, 2, 0, len(header), payload_bytes)
    header_digest = _sha256(fixed + header).digest()
    file_digest = _sha256(fixed + header_digest)
    file_digest.update(header)
    for c in payload:
        file_digest.update(c)
    return [fixed, header_digest, file_digest.digest(), header] + payload


def _chunks(meta, arrays, format_name, version):
    """The bytes of a container, in file order (validated before the first chunk)."""
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict, not {type(meta).__name__}")
    if not isinstance(format_name, str) or not format_name:
        raise TypeError("format_name must be a non-empty str")
    if version not in _VERSIONS:
        raise ValueError(f"container version {version!r} cannot be written; choose one of {_VERSIONS}")
    _check_json_value(meta, "meta")
    entries, payload_bytes = _prepare_arrays(arrays)
    build = _v1_chunks if version == 1 else _v2_chunks
    return build(format_name, meta, entries, payload_bytes)


def dumps(meta, arrays, *, format_name=FORMAT_NAME, version=FORMAT_VERSION):
    """The container of ``meta`` and ``arrays`` as bytes (what write_container writes)."""
    return b"".join(bytes(c) for c in _chunks(meta, arrays, format_name, version))


def write_container(path, meta, arrays, *, format_name=FORMAT_NAME, version=FORMAT_VERSION):
    """Write ``meta`` and ``arrays`` to ``path`` atomically.

    ``meta`` must be a dict of JSON values (str keys; tuples come back as
    lists; NaN/inf are refused).  ``arrays`` maps non-empty str names to
    numpy arrays (or array-likes) of a whitelisted dtype; they are stored
    C-contiguous little-endian, whatever their layout in memory.
    ``version`` is the container format version (1 only for older readers).

    The data go to a temporary file in the same directory, which is flushed,
    fsynced and then renamed over ``path`` with ``os.replace``.  On any error
    the temporary file is removed and an existing file at ``path`` is left
    untouched. A symbolic link's file is replaced (the link stays); a FIFO or
    a character device is written directly, never replaced (crftk.io.outputs).

    Raises TypeError/ValueError for invalid ``meta``/``arrays`` (programming
    errors, detected before anything is written) and CrftkError (with the
    path) when the file system refuses the write.
    """
    path = os.fspath(path)
    chunks = _chunks(meta, arrays, format_name, version)
    where = output_target(path, "model")
    if not where.atomic:        # a FIFO or device (/dev/null): written directly, never replaced
        try:
            with open_direct(where, binary=True) as f:
                for chunk in chunks:
                    f.write(chunk)
        except OSError as exc:
            raise CrftkError(f"cannot write model file: {exc.strerror or exc}", path=path) from exc
        return
    path = where.where          # a symbolic link's file is replaced, not the link

    tmp = None
    try:
        tmp, fd = open_temp_beside(path)
        with os.fdopen(fd, "wb") as f:
            for chunk in chunks:
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise CrftkError(f"cannot write model file: {reason}", path=path) from exc
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    fsync_directory(os.path.dirname(path))


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def _open_for_reading(path):
    """The open file; an error opening or reading it (EIO from /proc/self/mem, a failing disk) is
    CrftkError."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise CrftkError("model file not found", path=path) from None
    except IsADirectoryError:
        raise CrftkError("is a directory, not a model file", path=path) from None
    except OSError as exc:
        raise CrftkError(f"cannot read model file: {exc.strerror or exc}", path=path) from None
    with f:
        try:
            yield f
        except OSError as exc:
            raise CrftkError(f"cannot read model file: {exc.strerror or exc}", path=path) from None


def _reject_constant(name):
    raise ValueError(f"{name} is not valid JSON")


class _Parsed:
    """What was read before the payload: the header and where everything lies."""

    def __init__(self, version, header, entries, start, payload_bytes, check_payload):
        self.version = version
        self.header = header              # the JSON header (dict)
        self.entries = entries            # (name, dtype, shape, count, offset) in file order
        self.start = start                # payload offset in the file
        self.payload_bytes = payload_bytes
        self.check_payload = check_payload  # payload bytes -> None, raises on a mismatch


def _read_version(f, path):
    """The first 12 bytes: signature and a supported format version."""
    pre = f.read(12)
    sig = pre[: len(MAGIC)]
    if not pre:
        raise CrftkError("not a crftk model file (the file is empty)", path=path)
    if sig != MAGIC[: len(sig)]:
        raise CrftkError("not a crftk model file", path=path)
    if len(sig) < len(MAGIC):
        raise CrftkError(
            f"truncated: expected {len(MAGIC)} bytes of signature, found {len(sig)}", path=path
        )
    if len(pre) < 12:
        raise CrftkError(
            f"truncated: expected 4 bytes of format version, found {len(pre) - 8}", path=path
        )
    (version,) = struct.unpack_from("<I", pre, 8)
    if version > FORMAT_VERSION:
        raise CrftkError(
            f"model format version {version} is newer than this crftk supports "
            f"({FORMAT_VERSION}); upgrade crftk",
            path=path,
        )
    if version not in _VERSIONS:
        raise CrftkError(f"unsupported model format version {version}", path=path)
    return version, pre


def _read_header_bytes(f, size, start, header_len, path):
    available = max(size - start, 0)
    if header_len > available:
        raise CrftkError(
            f"truncated: expected {header_len} bytes of header, found {available}", path=path
        )
    raw = f.read(header_len)
    if len(raw) < header_len:
        raise CrftkError(
            f"truncated: expected {header_len} bytes of header, found {len(raw)}", path=path
        )
    return raw


def _parse_json(raw, path):
    """The JSON object at the start of ``raw``; only spaces may follow it (the padding)."""
    def bad(msg):
        return CrftkError(f"malformed header: {msg}", path=path)

    try:
        text = raw.decode("utf-8")
        header, end = json.JSONDecoder(parse_constant=_reject_constant).raw_decode(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise bad(msg) from None
    if text[end:].strip(" "):
        raise bad(f"unexpected text after the JSON object at character {end}")
    if not isinstance(header, dict):
        raise bad("not a JSON object")
    return header


def _read_v1(f, size, pre, path, expected_format):
    rest = f.read(_V1_PREAMBLE.size - len(pre))
    pre += rest
    if len(pre) < _V1_PREAMBLE.size:
        raise CrftkError(
            f"truncated: expected 8 bytes of header length, found {len(pre) - 12}", path=path
        )
    _, _, header_len = _V1_PREAMBLE.unpack(pre)
    raw = _read_header_bytes(f, size, _V1_PREAMBLE.size, header_len, path)
    header = _parse_json(raw, path)

    def bad(msg):
        return CrftkError(f"malformed header: {msg}", path=path)

    _check_keys(header, _V1_HEADER_KEYS, path, exact=False)
    _check_common(header, 1, path, expected_format)
    if header["meta_sha256"] != _meta_digest(header["meta"]):
        raise CrftkError("corrupted: header checksum mismatch", path=path)
    payload_bytes = header["payload_bytes"]
    if not _is_int(payload_bytes) or payload_bytes < 0:
        raise bad(f"'payload_bytes' {payload_bytes!r} is not a non-negative integer")
    sha = header["payload_sha256"]
    if (
        not isinstance(sha, str)
        or len(sha) != 64
        or any(c not in "0123456789abcdef" for c in sha)
    ):
        raise bad("'payload_sha256' is not a lowercase hex SHA-256 digest")
    entries = _check_entries(header["arrays"], payload_bytes, path, _V1_DTYPE_ALIASES)

    def check_payload(payload):
        if _sha256(payload).hexdigest() != sha:
            raise CrftkError("corrupted: checksum mismatch", path=path)

    start = _V1_PREAMBLE.size + header_len
    return _Parsed(1, header, entries, start, payload_bytes, check_payload)


def _read_v2(f, size, pre, path, expected_format):
    pre += f.read(_V2_PREAMBLE_SIZE - len(pre))
    if len(pre) < _V2_PREAMBLE_SIZE:
        raise CrftkError(
            f"truncated: expected {_V2_PREAMBLE_SIZE} bytes of preamble, found {len(pre)}", path=path
        )
    fixed = pre[: _V2_FIXED.size]
    _, _, reserved, header_len, payload_bytes = _V2_FIXED.unpack(fixed)
    header_digest = pre[_V2_FIXED.size : _V2_FIXED.size + 32]
    file_digest = pre[_V2_FIXED.size + 32 : _V2_PREAMBLE_SIZE]
    raw = _read_header_bytes(f, size, _V2_PREAMBLE_SIZE, header_len, path)
    # Nothing read so far is trusted until this digest matches.
    if _sha256(fixed + raw).digest() != header_digest:
        raise CrftkError("corrupted: header checksum mismatch", path=path)
    if reserved != 0:
        raise CrftkError(f"malformed header: reserved field is {reserved}, not 0", path=path)
    if header_len % _ALIGN:
        raise CrftkError(f"malformed header: length {header_len} is not a multiple of {_ALIGN}", path=path)
    header = _parse_json(raw, path)
    if len(raw) - len(raw.rstrip(b" ")) >= _ALIGN:
        raise CrftkError(f"malformed header: more than {_ALIGN - 1} bytes of padding", path=path)
    _check_keys(header, _V2_HEADER_KEYS, path, exact=True)
    _check_common(header, 2, path, expected_format)
    entries = _check_entries(header["arrays"], payload_bytes, path, {})

    def check_payload(payload):
        digest = _sha256(fixed + header_digest)
        digest.update(raw)
        digest.update(payload)
        if digest.digest() != file_digest:
            raise CrftkError("corrupted: checksum mismatch", path=path)

    start = _V2_PREAMBLE_SIZE + header_len
    return _Parsed(2, header, entries, start, payload_bytes, check_payload)


def _check_keys(header, keys, path, exact):
    missing = [k for k in keys if k not in header]
    if missing:
        raise CrftkError("malformed header: missing " + ", ".join(repr(k) for k in missing), path=path)
    extra = [k for k in header if k not in keys]
    if exact and extra:
        raise CrftkError("malformed header: unknown key " + ", ".join(repr(k) for k in extra), path=path)


def _check_common(header, version, path, expected_format):
    def bad(msg):
        return CrftkError(f"malformed header: {msg}", path=path)

    fmt = header["format"]
    if not isinstance(fmt, str):
        raise bad("'format' is not a string")
    if expected_format is not None and fmt != expected_format:
        raise CrftkError(f"wrong file format {fmt!r}, expected {expected_format!r}", path=path)
    if header["version"] != version or not _is_int(header["version"]):
        raise bad(f"'version' {header['version']!r} does not match the file version {version}")
    if not isinstance(header["meta"], dict):
        raise bad("'meta' is not an object")


def _check_entries(directory, payload_bytes, path, aliases):
    """The array directory, checked against the payload length: (name, dtype, shape, count, offset).

    Arrays must lie where the writer puts them: in directory order, each at the
    first multiple of 8 after the previous one, the last one ending the payload.
    """
    if not isinstance(directory, list):
        raise CrftkError("malformed header: 'arrays' is not a list", path=path)
    entries = []
    seen = set()
    pos = 0
    for i, entry in enumerate(directory):
        if not isinstance(entry, dict) or any(k not in entry for k in _ENTRY_KEYS):
            raise CrftkError(
                f"malformed header: array entry {i} lacks one of {', '.join(_ENTRY_KEYS)}", path=path
            )
        name = entry["name"]
        if not isinstance(name, str) or not name:
            raise CrftkError(f"malformed header: array entry {i} has an invalid name {name!r}", path=path)
        if name in seen:
            raise CrftkError(f"malformed header: array {name!r} appears twice", path=path)
        seen.add(name)

        def bad_array(msg, name=name):
            return CrftkError(f"malformed header: array {name!r}: {msg}", path=path)

        code = entry["dtype"]
        code = aliases.get(code, code) if isinstance(code, str) else code
        if not isinstance(code, str) or code not in _DTYPES:
            raise bad_array(f"dtype {entry['dtype']!r} is not allowed")
        dtype = _DTYPES[code]
        shape = entry["shape"]
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            raise bad_array(f"invalid shape {shape!r}")
        if len(shape) > _MAX_DIMS:
            raise bad_array(f"too many dimensions ({len(shape)})")
        count = 1
        for d in shape:
            count *= d
        offset, nbytes = entry["offset"], entry["nbytes"]
        if not _is_int(offset) or offset < 0 or offset % _ALIGN:
            raise bad_array(f"offset {offset!r} is not a non-negative multiple of {_ALIGN}")
        if not _is_int(nbytes) or nbytes != count * dtype.itemsize:
            raise bad_array(
                f"nbytes {nbytes!r} does not match shape {shape} x itemsize {dtype.itemsize}"
            )
        if offset + nbytes > payload_bytes:
            raise bad_array(
                f"bytes {offset}..{offset + nbytes} lie outside the {payload_bytes}-byte payload"
            )
        if offset != _align(pos):
            raise bad_array(
                f"offset {offset} is not where it belongs ({_align(pos)}, after the previous array)"
            )
        entries.append((name, dtype, tuple(shape), count, offset))
        pos = offset + nbytes
    if pos != payload_bytes:
        raise CrftkError(
            f"malformed header: the arrays end at byte {pos} of the {payload_bytes}-byte payload",
            path=path,
        )
    return entries


def _parse(f, size, path, expected_format):
    version, pre = _read_version(f, path)
    read = _read_v1 if version == 1 else _read_v2
    return read(f, size, pre, path, expected_format)


def read_header(path, *, expected_format=FORMAT_NAME):
    """Return the parsed, validated JSON header of the container at ``path``.

    Only the preamble and the header are read; the payload is neither read nor
    checked (a file with a damaged payload still has a readable header).  Use
    it for ``crftk info``.  In version 2 the header digest is checked, so the
    header returned is the one written.  ``expected_format=None`` accepts any
    format name.  The returned dict has the keys described in the module
    docstring for the file's version; ``header["meta"]`` is the caller's meta.
    """
    path = os.fspath(path)
    with _open_for_reading(path) as f:
        parsed = _parse(f, os.fstat(f.fileno()).st_size, path, expected_format)
    return parsed.header


def read_container(path, *, expected_format=FORMAT_NAME):
    """Load the container at ``path`` and return ``(meta, arrays)``.

    The file is read into memory once and its digests are verified.
    ``arrays`` maps names to numpy arrays in file order.  The arrays are
    **read-only** views (``np.frombuffer``) of that one in-memory buffer; call
    ``.copy()`` on an array you want to modify.  Nothing in the file can run
    code: the header is JSON and arrays use whitelisted plain dtypes.

    Every problem with the file raises CrftkError carrying ``path``.
    """
    path = os.fspath(path)
    with _open_for_reading(path) as f:
        return _read(f, os.fstat(f.fileno()).st_size, path, expected_format)


def loads(data, *, name="<bytes>", expected_format=FORMAT_NAME):
    """``(meta, arrays)`` of a container held in memory (what :func:`dumps` returns).

    Checked exactly as :func:`read_container` checks a file; errors name ``name``.
    """
    data = bytes(data)
    return _read(io.BytesIO(data), len(data), name, expected_format)


def _read(f, size, path, expected_format):
    parsed = _parse(f, size, path, expected_format)
    expected = parsed.payload_bytes
    found = size - parsed.start
    if found < expected:
        raise CrftkError(
            f"truncated: expected {expected} bytes of payload, found {found}", path=path
        )
    if found > expected:
        raise CrftkError(
            f"corrupted: {found - expected} unexpected bytes after the payload", path=path
        )
    payload = f.read(expected)
    if len(payload) != expected:
        raise CrftkError(
            f"truncated: expected {expected} bytes of payload, found {len(payload)}",
            path=path,
        )
    parsed.check_payload(payload)

    arrays = {}
    pos = 0
    for name, dtype, shape, count, offset in parsed.entries:
        if payload[pos:offset].strip(b"\x00"):
            raise CrftkError(f"corrupted: non-zero padding before array {name!r}", path=path)
        try:
            arr = np.frombuffer(payload, dtype=dtype, count=count, offset=offset).reshape(shape)
        except (ValueError, TypeError, OverflowError, MemoryError) as exc:
            raise CrftkError(
                f"malformed header: array {name!r}: {str(exc).splitlines()[0]}", path=path
            ) from None
        if dtype.kind == "b" and count and arr.reshape(-1).view(np.uint8).max() > 1:
            raise CrftkError(
                f"corrupted: array {name!r} holds bool bytes other than 0 and 1", path=path
            )
        arrays[name] = arr
        pos = offset + count * dtype.itemsize
    return parsed.header["meta"], arrays


# ---------------------------------------------------------------------------
# string lists
# ---------------------------------------------------------------------------


def pack_strings(strings):
    """Encode a list of str as ``(offsets, blob)`` for storage as two arrays.

    ``blob`` is a 1-D uint8 array holding the UTF-8 bytes of all strings
    concatenated; ``offsets`` is a 1-D uint64 array of length ``n + 1`` with
    ``offsets[0] == 0`` and ``offsets[-1] == len(blob)``; string ``i`` is
    ``blob[offsets[i]:offsets[i + 1]]``.  Both arrays are read-only.
    Raises TypeError for non-str items and UnicodeEncodeError for strings
    that are not valid Unicode (lone surrogates).
    """
    strings = list(strings)
    joined = "".join(strings)  # TypeError on non-str items
    n = len(strings)
    offsets = np.zeros(n + 1, dtype=np.uint64)
    if joined.isascii():
        blob = joined.encode("ascii")
        lengths = np.fromiter(map(len, strings), dtype=np.uint64, count=n)
    else:
        encoded = [s.encode("utf-8") for s in strings]
        blob = b"".join(encoded)
        lengths = np.fromiter(map(len, encoded), dtype=np.uint64, count=n)
    np.cumsum(lengths, out=offsets[1:])
    offsets.setflags(write=False)
    return offsets, np.frombuffer(blob, dtype=np.uint8)


def unpack_strings(offsets, blob, *, path=None):
    """Decode ``(offsets, blob)`` made by :func:`pack_strings` into a list of str.

    The whole blob is decoded once and sliced.  Inconsistent offsets or
    invalid UTF-8 raise CrftkError; pass ``path`` (the model file the arrays
    came from) so the message names it.
    """
    def bad(msg):
        return CrftkError(f"corrupted string table: {msg}", path=path)

    offsets = np.asarray(offsets)
    blob = np.asarray(blob)
    if blob.ndim != 1 or blob.dtype != np.uint8:
        raise bad(f"blob must be a 1-D uint8 array, not {blob.dtype} with shape {blob.shape}")
    if offsets.ndim != 1 or offsets.dtype.kind not in "iu" or offsets.size == 0:
        raise bad("offsets must be a non-empty 1-D integer array")
    size = blob.size
    if int(offsets[0]) != 0 or int(offsets[-1]) != size:
        first, last = int(offsets[0]), int(offsets[-1])
        raise bad(f"offsets run from {first} to {last}, expected 0 to {size}")
    if int(offsets.min()) < 0 or int(offsets.max()) > size:
        raise bad("offsets lie outside the blob")
    offs = offsets.astype(np.int64)
    if offs.size > 1 and np.any(offs[1:] < offs[:-1]):
        raise bad("offsets are not non-decreasing")

    data = blob.tobytes()
    if data.isascii():
        text = data.decode("ascii")
        bounds = offs.tolist()
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise bad(f"invalid UTF-8 at byte {exc.start}") from None
        # A byte starts a character unless it is a continuation byte 10xxxxxx.
        starts = (blob & 0xC0) != 0x80
        inner = offs[(offs > 0) & (offs < size)]
        if not starts[inner].all():
            raise bad("an offset splits a UTF-8 character")
        char_index = np.zeros(size + 1, dtype=np.int64)
        np.cumsum(starts, out=char_index[1:])
        bounds = char_index[offs].tolist()
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]
