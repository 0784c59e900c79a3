"""Avro plumbing the Avro decoders share: fingerprints, schema directories, OCF blocks, framing, text.

Nothing here knows a vendor's record layout; the vendor modules build on it.

* **Fingerprints.** :func:`parsing_fingerprint` is Avro's 64-bit Rabin fingerprint (CRC-64-AVRO,
  Avro specification "Schema Fingerprints") of a schema's Parsing Canonical Form, as Java's
  ``SchemaNormalization.parsingFingerprint64`` returns it: a *signed* 64-bit number (``"null"``
  gives 7195948357588979594). fastavro's ``fingerprint(..., "CRC-64-AVRO")`` gives the same
  value as the hex of its little-endian bytes.
* **Schema directories.** :func:`load_schema_directory` reads every ``*.avsc`` of a directory.
  A schema belongs to the table named by its record's full name (``namespace.name``: GoldenGate
  writes ``GG.TCUSTORD`` as namespace ``GG``, name ``TCUSTORD``). ``<table>.avsc`` is the current
  version; ``<table>_<timestamp>.avsc`` are older copies (GoldenGate ``versionSchemas=true``).
  :meth:`SchemaDirectory.versions` lists a table's versions newest first: the current file, then
  the timestamped ones by descending file name (GoldenGate's timestamp suffix sorts by time).
* **Object Container Files** (OCF, Avro specification "Object Container Files"): a header
  (magic ``Obj\\x01``, metadata map with ``avro.schema`` and ``avro.codec``, a 16-byte sync
  marker) followed by blocks: record count, byte size, the (compressed) records, the sync marker.
  :func:`iter_ocf_blocks` walks the blocks itself, so a corrupt block is reported with its byte
  offset and reading resumes at the next sync marker. Codecs: ``null``, ``deflate``, ``bzip2``,
  ``xz``, and ``snappy``/``zstandard`` through ``cramjam``.
* **Exact decoding.** :func:`read_at` decodes one binary-encoded datum and returns where it
  ended, so a caller can demand that a message decodes to exactly its last byte: the test that
  tells which schema version wrote a message.
* **Text.** :func:`text_converter` renders an Avro value as the exact text lakecdc keeps in its
  images: ``long``/``int`` as digits, ``double`` as the shortest text that reads back to the same
  double (``17520.0``; ``NaN``, ``Infinity``, ``-Infinity``), ``float`` as the shortest text of
  the 32-bit value (``0.1``, not ``0.10000000149011612``), ``boolean`` as ``true``/``false``,
  ``decimal`` exactly in plain notation with its scale (``1.10``), ``bytes``/``fixed`` as base64,
  ``date`` as ``YYYY-MM-DD``, ``time-*`` as ``HH:MM:SS.ffffff``, ``timestamp-*`` (UTC) and
  ``local-timestamp-*`` as ``YYYY-MM-DD HH:MM:SS.ffffff``, ``uuid`` and ``enum`` as their text,
  records, arrays and maps as compact JSON text (inside which decimals, dates and bytes are JSON
  strings as above).
* **Types.** :func:`spark_type`: ``long`` bigint, ``int`` int, ``double``/``float`` double,
  ``boolean``, ``string``, ``decimal(p, s)`` exactly (as string when ``p > 38``); everything else
  (bytes, fixed, enums, dates, times, timestamps, records, arrays, maps, unions of several
  types) string.
"""

from __future__ import annotations

import base64
import bz2
import datetime as dt
import decimal
import io
import json
import lzma
import math
import os
import struct
import uuid
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from fastavro import parse_schema, schemaless_reader
from fastavro.schema import to_parsing_canonical_form
from pyspark.sql import types as T

MAGIC = b"Obj\x01"
SYNC_SIZE = 16
_EMPTY64 = 0xC15D213AA4D7A795
_MASK64 = (1 << 64) - 1


def _rabin_table() -> tuple[int, ...]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_EMPTY64 & -(fp & 1))
        table.append(fp & _MASK64)
    return tuple(table)


_RABIN = _rabin_table()


def rabin64(data: bytes) -> int:
    """CRC-64-AVRO of ``data`` as a signed 64-bit number (Java's ``long``)."""
    fp = _EMPTY64
    for byte in data:
        fp = (fp >> 8) ^ _RABIN[(fp ^ byte) & 0xFF]
    return fp - (1 << 64) if fp >= 1 << 63 else fp


def parsing_fingerprint(schema: Any) -> int:
    """Avro's 64-bit parsing fingerprint of ``schema`` (JSON text, or its parsed JSON)."""
    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "["):
        schema = json.loads(schema)
    return rabin64(to_parsing_canonical_form(schema).encode("utf-8"))


# -- schema directories --------------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaFile:
    """One ``.avsc`` file of a schema directory."""

    file: str
    table: str
    label: str  # "" for the current ``<table>.avsc``, else the version suffix
    schema: Any
    fingerprint: int

    @property
    def parsed(self) -> dict[str, Any]:
        return _parsed(self.file, self.fingerprint, self.schema)


_PARSED: dict[tuple[str, int], Any] = {}


def _parsed(name: str, fingerprint: int, schema: Any) -> Any:
    key = (name, fingerprint)
    if key not in _PARSED:
        _PARSED[key] = parse_schema(schema, _write_hint=False)
    return _PARSED[key]


def full_name(schema: Any) -> str | None:
    """The full name (``namespace.name``) of a named schema, None for an unnamed one."""
    if not isinstance(schema, dict) or "name" not in schema:
        return None
    name = str(schema["name"])
    namespace = schema.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


@dataclass(frozen=True)
class SchemaDirectory:
    """The schemas of a directory, by table and by fingerprint."""

    path: str
    files: tuple[SchemaFile, ...] = ()
    wrapper: SchemaFile | None = None
    by_table: dict[str, tuple[SchemaFile, ...]] = field(default_factory=dict)
    by_fingerprint: dict[int, SchemaFile] = field(default_factory=dict)

    def versions(self, table: str) -> tuple[SchemaFile, ...]:
        """The table's schema versions, newest first (exact name, else ignoring case)."""
        found = self.by_table.get(table)
        if found is None:
            lower = table.lower()
            found = next((v for t, v in self.by_table.items() if t.lower() == lower), ())
        return found


def load_schema_directory(path: str, *, encoding: str = "utf-8") -> SchemaDirectory:
    """Every ``*.avsc`` of ``path`` (not recursive); ``generic_wrapper.avsc`` kept apart.

    Raises ValueError naming the file when one is not a valid Avro schema.
    """
    files: list[SchemaFile] = []
    wrapper = None
    for p in sorted(Path(path).glob("*.avsc")):
        try:
            schema = json.loads(p.read_text(encoding=encoding))
            parse_schema(schema, _write_hint=False)
            fp = parsing_fingerprint(schema)
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{p}: not a valid Avro schema: {exc}") from exc
        table = full_name(schema) or p.stem
        stem = p.stem
        label = "" if stem == table else stem[len(table) + 1 :] if stem.startswith(table + "_") else stem
        sf = SchemaFile(p.name, table, label, schema, fp)
        if table == "oracle.goldengate.generic_wrapper":
            wrapper = sf
        else:
            files.append(sf)
    by_table: dict[str, list[SchemaFile]] = {}
    for sf in files:
        by_table.setdefault(sf.table, []).append(sf)
    ordered: dict[str, tuple[SchemaFile, ...]] = {}
    for table, group in by_table.items():
        group.sort(key=lambda s: s.label, reverse=True)
        group.sort(key=lambda s: s.label != "")
        seen: set[int] = set()
        ordered[table] = tuple(s for s in group if not (s.fingerprint in seen or seen.add(s.fingerprint)))  # type: ignore[func-returns-value]
    by_fp: dict[int, SchemaFile] = {}
    for group in ordered.values():
        for sf in group:
            by_fp.setdefault(sf.fingerprint, sf)
    return SchemaDirectory(path, tuple(files), wrapper, ordered, by_fp)


# -- binary decoding -----------------------------------------------------------------------------


class Mismatch(ValueError):
    """Bytes that do not decode (exactly) with a schema."""


def read_at(data: bytes, pos: int, parsed: Any) -> tuple[Any, int]:
    """Decode one datum of ``parsed`` starting at ``data[pos]``; return it and where it ended."""
    bio = io.BytesIO(data)
    bio.seek(pos)
    try:
        value = schemaless_reader(bio, parsed, None)
    except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError...
        raise Mismatch(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None
    return value, bio.tell()


def read_exact(data: bytes, parsed: Any) -> Any:
    """Decode ``data`` as exactly one datum of ``parsed`` (every byte used, none missing)."""
    value, end = read_at(data, 0, parsed)
    if end != len(data):
        raise Mismatch(f"the schema reads {end} of the message's {len(data)} bytes")
    return value


def read_long(data: bytes, pos: int) -> tuple[int, int] | None:
    """An Avro ``long`` (zig-zag varint) at ``pos``: ``(value, end)``, None when cut short."""
    shift = result = 0
    while pos < len(data) and shift < 70:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    return None


def peek_string(data: bytes, pos: int = 0) -> str | None:
    """The Avro ``string`` at ``pos`` (a GoldenGate message starts with its table name)."""
    got = read_long(data, pos)
    if got is None:
        return None
    n, start = got
    if n < 0 or start + n > len(data):
        return None
    try:
        return data[start : start + n].decode("utf-8")
    except UnicodeDecodeError:
        return None


# -- framing of single-message files --------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    """One message of a file: where it starts, its bytes, and why it is bad (None when whole)."""

    offset: int
    payload: bytes
    error: str | None = None


def iter_length_prefixed(fo: BinaryIO, start: int = 0) -> Iterator[Frame]:
    """Messages each preceded by its length as 4 bytes, big-endian (streamed, not read whole)."""
    fo.seek(start)
    offset = start
    while True:
        head = fo.read(4)
        if not head:
            return
        if len(head) < 4:
            yield Frame(offset, head, f"truncated length prefix: {len(head)} of 4 bytes at the end of the file")
            return
        (n,) = struct.unpack(">I", head)
        payload = fo.read(n)
        if len(payload) < n:
            yield Frame(offset, payload, f"truncated: the length prefix gives {n} bytes, only {len(payload)} remain")
            return
        yield Frame(offset, payload)
        offset += 4 + n


# -- object container files ----------------------------------------------------------------------

_HEADER = parse_schema(
    {
        "type": "record",
        "name": "org.apache.avro.file.Header",
        "fields": [
            {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 4}},
            {"name": "meta", "type": {"type": "map", "values": "bytes"}},
            {"name": "sync", "type": {"type": "fixed", "name": "Sync", "size": SYNC_SIZE}},
        ],
    }
)


@dataclass(frozen=True)
class OcfHeader:
    """An OCF file's header: its schema (JSON), codec, sync marker and length in bytes."""

    schema: Any
    codec: str
    sync: bytes
    length: int


def is_ocf(path: str) -> bool:
    with open(path, "rb") as fh:
        return fh.read(4) == MAGIC


def read_ocf_header(fo: BinaryIO) -> OcfHeader:
    """The header at the start of ``fo``; raises ValueError when it is not an OCF header."""
    fo.seek(0)
    try:
        head = schemaless_reader(fo, _HEADER, None)
    except Exception as exc:
        raise ValueError(f"unreadable OCF header: {exc}") from None
    if head["magic"] != MAGIC:
        raise ValueError("not an Avro object container file (no 'Obj\\x01' magic)")
    meta = head["meta"]
    if "avro.schema" not in meta:
        raise ValueError("OCF header without 'avro.schema'")
    codec = meta.get("avro.codec", b"null").decode("utf-8", errors="replace")
    try:
        schema = json.loads(meta["avro.schema"].decode("utf-8"))
        parse_schema(schema, _write_hint=False)
    except Exception as exc:
        raise ValueError(f"the header's 'avro.schema' is not a valid Avro schema: {exc}") from None
    return OcfHeader(schema, codec, head["sync"], fo.tell())


def decompress(codec: str, data: bytes) -> bytes:
    """A block's records, uncompressed."""
    if codec == "null":
        return data
    if codec == "deflate":
        return zlib.decompress(data, -15)
    if codec == "bzip2":
        return bz2.decompress(data)
    if codec == "xz":
        return lzma.decompress(data)
    if codec in ("snappy", "zstandard"):
        try:
            import cramjam
        except ImportError:
            raise ValueError(f"codec {codec!r} needs the 'cramjam' package (pip install cramjam)") from None
        if codec == "zstandard":
            return bytes(cramjam.zstd.decompress(data))
        out = bytes(cramjam.snappy.decompress_raw(data[:-4]))
        if zlib.crc32(out) != struct.unpack(">I", data[-4:])[0]:
            raise ValueError("snappy block fails its CRC-32 check")
        return out
    raise ValueError(f"unsupported OCF codec {codec!r}")


@dataclass(frozen=True)
class OcfBlock:
    """One block: byte offset in the file, record count, uncompressed records; or why it is bad."""

    offset: int
    count: int
    data: bytes
    error: str | None = None


def iter_ocf_blocks(fo: BinaryIO, header: OcfHeader, start: int, end: int) -> Iterator[OcfBlock]:
    """The blocks of ``[start, end)`` (a split starts at a block); a bad block is yielded with
    ``error`` set and reading resumes after the next sync marker."""
    fo.seek(start)
    buf = fo.read(max(0, end - start))
    pos = 0
    while pos < len(buf):
        head = _block_head(buf, pos)
        offset = start + pos
        if head is None or head[0] < 0 or head[1] < 0:
            nxt = _resync(buf, pos, header.sync)
            yield OcfBlock(offset, 0, buf[pos:nxt], "unreadable block header (record count and size)")
            pos = nxt
            continue
        count, size, body = head
        stop = pos + body + size
        if stop + SYNC_SIZE > len(buf):
            nxt = _resync(buf, pos, header.sync)
            yield OcfBlock(offset, count, buf[pos:nxt],
                           f"truncated: the block of {count} record(s) gives {size} bytes, the file ends first")
            pos = nxt
            continue
        if buf[stop : stop + SYNC_SIZE] != header.sync:
            nxt = _resync(buf, pos, header.sync)
            yield OcfBlock(offset, count, buf[pos:nxt], "the block does not end with the file's sync marker")
            pos = nxt
            continue
        try:
            data = decompress(header.codec, buf[pos + body : stop])
        except Exception as exc:
            yield OcfBlock(offset, count, buf[pos + body : stop], f"cannot decompress ({header.codec}): {exc}")
        else:
            yield OcfBlock(offset, count, data)
        pos = stop + SYNC_SIZE


def _block_head(buf: bytes, pos: int) -> tuple[int, int, int] | None:
    """``(count, size, header length)`` of the block at ``pos``."""
    first = read_long(buf, pos)
    if first is None:
        return None
    second = read_long(buf, first[1])
    if second is None:
        return None
    return first[0], second[0], second[1] - pos


def _resync(buf: bytes, pos: int, sync: bytes) -> int:
    found = buf.find(sync, pos)
    return len(buf) if found < 0 else found + SYNC_SIZE


def plan_ocf_splits(path: str, split_bytes: int) -> tuple[OcfHeader, list[tuple[int, int, int]]]:
    """The header and ``(start, length, first record number)`` splits of about ``split_bytes``.

    Files under ``split_bytes`` are one split (nothing but the header is read); larger ones are
    cut at block boundaries found by reading only the block headers.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as fo:
        header = read_ocf_header(fo)
        if size - header.length <= split_bytes:
            return header, [(header.length, size - header.length, 0)]
        splits: list[tuple[int, int, int]] = []
        start, first, pos, records = header.length, 0, header.length, 0
        while pos < size:
            fo.seek(pos)
            head = _block_head(fo.read(20), 0)
            if head is None or head[0] < 0 or head[1] < 0:
                break  # the executor reports what follows as a bad block
            count, length, body = head
            if pos - start >= split_bytes:
                splits.append((start, pos - start, first))
                start, first = pos, records
            records += count
            pos += body + length + SYNC_SIZE
        splits.append((start, size - start, first))
        return header, splits


# -- values as text and Spark types --------------------------------------------------------------


def _branches(avro_type: Any) -> list[Any]:
    """The non-null branches of a (possibly union) type."""
    if isinstance(avro_type, list):
        return [b for b in avro_type if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
    return [avro_type]


def _base(avro_type: Any) -> tuple[str, dict[str, Any]]:
    """``(type name, attributes)`` of a single (non-union) type."""
    if isinstance(avro_type, dict):
        inner = avro_type.get("type")
        if isinstance(inner, (dict, list)):
            return _base(inner)
        return str(inner), avro_type
    return str(avro_type), {}


def spark_type(avro_type: Any) -> T.DataType:
    """The Spark type of a column declared as ``avro_type`` (see the module docstring)."""
    branches = _branches(avro_type)
    if len(branches) != 1:
        return T.StringType()
    name, attrs = _base(branches[0])
    if attrs.get("logicalType") == "decimal" and name in ("bytes", "fixed"):
        precision, scale = int(attrs.get("precision", 0)), int(attrs.get("scale", 0))
        if 0 < precision <= 38 and 0 <= scale <= precision:
            return T.DecimalType(precision, scale)
        return T.StringType()
    if attrs.get("logicalType"):
        return T.StringType()
    return {
        "long": T.LongType(),
        "int": T.IntegerType(),
        "double": T.DoubleType(),
        "float": T.DoubleType(),
        "boolean": T.BooleanType(),
        "string": T.StringType(),
    }.get(name, T.StringType())


def _double_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def _float32_text(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return _double_text(v)
    # the shortest decimal text that reads back to the same 32-bit float
    for digits in range(1, 18):
        text = f"{v:.{digits}g}"
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == v:
            return repr(float(text))
    return repr(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float):
        return v if math.isfinite(v) else _double_text(v)
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return value_text(v)


def value_text(v: Any) -> str | None:
    """Any decoded Avro value as text, by its Python type (``float`` as a double)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _double_text(v)
    if isinstance(v, str):
        return v
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return f"{v:%Y-%m-%d %H:%M:%S.%f}"
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dt.time):
        return v.replace(tzinfo=None).isoformat(timespec="microseconds")
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(_jsonable(v), ensure_ascii=False, separators=(",", ":"))
    return str(v)


def text_converter(avro_type: Any) -> Callable[[Any], str | None]:
    """The function rendering values of a field declared as ``avro_type`` as exact text."""
    branches = _branches(avro_type)
    if len(branches) == 1:
        name, attrs = _base(branches[0])
        if name == "float" and not attrs.get("logicalType"):
            return lambda v: None if v is None else _float32_text(v)
    return value_text


# -- helpers for fast paths (additive: the functions above keep their behaviour) ------------------


def plan_length_prefixed_splits(path: str, split_bytes: int) -> list[tuple[int, int, int]]:
    """``(start, length, first message number)`` splits of about ``split_bytes`` of a file of
    length-prefixed messages (4 bytes big-endian, see :func:`iter_length_prefixed`).

    Only the prefixes are read (no decoding). Files up to ``split_bytes`` are one split; a split
    always starts at a length prefix, and the last one runs to the end of the file (so a truncated
    message at the end is in it).
    """
    import mmap

    size = os.path.getsize(path)
    if size <= split_bytes:
        return [(0, size, 0)]
    out: list[tuple[int, int, int]] = []
    start = first = pos = n = 0
    unpack = struct.Struct(">I").unpack_from
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        while pos + 4 <= size:
            if pos - start >= split_bytes:
                out.append((start, pos - start, first))
                start, first = pos, n
            (length,) = unpack(mm, pos)
            pos += 4 + length
            n += 1
    out.append((start, size - start, first))
    return out


def text_kind(avro_type: Any) -> str | None:
    """How :func:`text_converter` renders a field declared as ``avro_type``, when it is one of
    the plain cases fastavro decodes to a single Python type: ``"string"`` (the ``str`` itself),
    ``"integer"`` (``int`` as ``str(v)``), ``"double"`` (``float``, see :func:`value_text`),
    ``"boolean"``; None for anything else (use :func:`text_converter`)."""
    branches = _branches(avro_type)
    if len(branches) != 1:
        return None
    name, attrs = _base(branches[0])
    if attrs.get("logicalType"):
        return None
    return {"string": "string", "long": "integer", "int": "integer", "double": "double", "boolean": "boolean"}.get(name)


def double_text(v: float) -> str:
    """A ``double`` as exact text (what :func:`value_text` gives for a ``float``)."""
    return _double_text(v)
