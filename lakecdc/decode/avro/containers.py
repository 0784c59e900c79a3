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
  offset and reading resumes at the next sync marker; a block past its :class:`BlockLimits`
  (uncompressed bytes, claimed records) is reported the same way, never inflated past the limit. Codecs: ``null``, ``deflate``, ``bzip2``,
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

from lakecdc.errors import ConfigError

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


_PRIMITIVE_NAMES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})


def qualified(name: str, namespace: str | None) -> str:
    """A name as the Avro specification resolves it in ``namespace``: a name with a dot is full
    already; otherwise the namespace (the type's own, else the enclosing one's) comes first."""
    return name if "." in name or not namespace else f"{namespace}.{name}"


def expand_names(schema: Any) -> tuple[Any, dict[str, Any]]:
    """``schema`` (parsed JSON) with every named type's ``name`` its full name (no ``namespace``
    left) and every reference to a named type written with that full name, and the named types by
    full name (Avro specification, "Names": a name without a dot takes the namespace of its own
    ``namespace`` attribute, else of the innermost enclosing named type; a reference without a
    dot is looked up in the enclosing namespace first, then in the null namespace)."""
    named: dict[str, Any] = {}

    def walk(node: Any, namespace: str) -> Any:
        if isinstance(node, list):
            return [walk(b, namespace) for b in node]
        if isinstance(node, str):
            if node in _PRIMITIVE_NAMES or "." in node:
                return node
            inner = qualified(node, namespace)
            return inner if inner in named else node
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind in _NAMED_KINDS:
            space = node.get("namespace", namespace)
            full = qualified(str(node.get("name", "")), space if isinstance(space, str) else namespace)
            out = {k: v for k, v in node.items() if k != "namespace"}
            out["name"] = full
            named[full] = out  # before its fields: a field may refer to its own record
            if kind in ("record", "error"):
                inner = full.rpartition(".")[0]
                out["fields"] = [{**f, "type": walk(f.get("type"), inner)} if isinstance(f, dict) else f
                                 for f in node.get("fields") or ()]
            return out
        if kind == "array":
            return {**node, "items": walk(node.get("items"), namespace)}
        if kind == "map":
            return {**node, "values": walk(node.get("values"), namespace)}
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in _PRIMITIVE_NAMES):
            return {**node, "type": walk(kind, namespace)}
        return node

    return walk(schema, ""), named


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


#: Default of :attr:`BlockLimits.max_block_bytes`: a block's records, uncompressed, at most 256 MiB.
MAX_BLOCK_BYTES = 256 << 20
#: Default of :attr:`BlockLimits.max_block_records`.
MAX_BLOCK_RECORDS = 10_000_000
#: The decoder options that set the limits (every Avro decoder reading object container files).
LIMIT_OPTIONS: dict[str, str] = {"maxBlockBytes": str(MAX_BLOCK_BYTES), "maxBlockRecords": str(MAX_BLOCK_RECORDS)}


@dataclass(frozen=True)
class BlockLimits:
    """How large an OCF block may be, checked before its records are read (a compression bomb, a
    header claiming 2^62 records): a block past a limit is one bad record whose reason names the
    limit and the option that raises it; the file's other blocks are read.

    * ``max_block_bytes`` (option ``maxBlockBytes``): the block's records uncompressed, in bytes;
      decompression stops there, so a block that inflates further never takes more memory.
    * ``max_block_records`` (option ``maxBlockRecords``): the records a block may claim. A block
      also may not claim more records than its uncompressed bytes can hold (every record of a
      schema whose records take at least one byte needs one).
    """

    max_block_bytes: int = MAX_BLOCK_BYTES
    max_block_records: int = MAX_BLOCK_RECORDS

    @classmethod
    def of(cls, decoder: str, options: dict[str, str]) -> BlockLimits:
        """The limits a decoder's options set (:data:`LIMIT_OPTIONS`); ConfigError for a value
        that is not a positive whole number."""
        values = []
        for name in LIMIT_OPTIONS:
            text = str(options.get(name, LIMIT_OPTIONS[name])).strip().replace("_", "")
            if not text.isdigit() or int(text) <= 0:
                raise ConfigError(f"{decoder}: option {name}={options.get(name)!r} is not a positive whole number")
            values.append(int(text))
        return cls(*values)

    def counted(self, count: int) -> int:
        """The row numbers a block of ``count`` records takes (one for a count past the limit, so
        that a claimed 2^62 records does not shift the numbers of the records after it)."""
        return count if 0 <= count <= self.max_block_records else 1


DEFAULT_LIMITS = BlockLimits()


class BlockTooLarge(ValueError):
    """A block whose records, uncompressed, pass :attr:`BlockLimits.max_block_bytes`."""


def _too_large(limit: int) -> BlockTooLarge:
    return BlockTooLarge(f"the block inflates past {limit} bytes, the limit (option maxBlockBytes={limit}; "
                         "raise it to read such blocks)")


def _zstd_content_size(data: bytes) -> int | None:
    """The ``Frame_Content_Size`` a Zstandard frame header declares, None when it declares none."""
    if len(data) < 6 or data[:4] != b"\x28\xb5\x2f\xfd":
        return None
    fhd = data[4]
    single, dict_flag, fcs_flag = fhd >> 5 & 1, fhd & 3, fhd >> 6
    pos = 5 + (0 if single else 1) + (0, 1, 2, 4)[dict_flag]
    size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if size == 0 or pos + size > len(data):
        return None
    value = int.from_bytes(data[pos : pos + size], "little")
    return value + 256 if size == 2 else value


def decompress(codec: str, data: bytes, limit: int | None = None) -> bytes:
    """A block's records, uncompressed; with ``limit``, :class:`BlockTooLarge` as soon as they pass
    ``limit`` bytes (never more than about ``limit`` bytes are made)."""
    if codec == "null":
        if limit is not None and len(data) > limit:
            raise _too_large(limit)
        return data
    if codec in ("deflate", "bzip2", "xz"):
        if limit is None:
            if codec == "deflate":
                return zlib.decompress(data, -15)
            return bz2.decompress(data) if codec == "bzip2" else lzma.decompress(data)
        if codec == "deflate":
            z = zlib.decompressobj(-15)
            out = z.decompress(data, limit + 1)
            if len(out) <= limit:
                out += z.flush()
            if len(out) <= limit and not z.eof:
                raise ValueError("incomplete or truncated deflate stream")
        else:
            out, rest = b"", data
            while rest and len(out) <= limit:  # (concatenated streams, as bz2/lzma.decompress read them)
                d = bz2.BZ2Decompressor() if codec == "bzip2" else lzma.LZMADecompressor()
                out += d.decompress(rest, max_length=limit + 1 - len(out))
                if len(out) > limit:
                    break
                if not d.eof:
                    raise ValueError(f"incomplete or truncated {codec} stream")
                rest = d.unused_data
        if len(out) > limit:
            raise _too_large(limit)
        return out
    if codec in ("snappy", "zstandard"):
        try:
            import cramjam
        except ImportError:
            raise ValueError(f"codec {codec!r} needs the 'cramjam' package (pip install cramjam)") from None
        if codec == "zstandard":
            if limit is None:
                return bytes(cramjam.zstd.decompress(data))
            declared = _zstd_content_size(data)
            if declared is not None and declared > limit:
                raise _too_large(limit)
            # into a buffer of the declared size (a stream without it: growing, up to the limit); the
            # decompressor refuses to write past the buffer's end
            size = declared if declared is not None else min(limit + 1, max(len(data) * 8, 1 << 16))
            while True:
                buf = bytearray(size)
                try:
                    n = cramjam.zstd.decompress_into(data, buf)
                except Exception as exc:
                    if "whole buffer" not in str(exc):
                        raise
                    if size > limit:
                        raise _too_large(limit) from None
                    size = min(limit + 1, size * 4 if declared is None else limit + 1)
                    continue
                break
            if n > limit:
                raise _too_large(limit)
            return bytes(buf[:n])
        # snappy: the raw block starts with its uncompressed length (a varint)
        if limit is not None:
            length = _uvarint(data)
            if length is not None and length > limit:
                raise _too_large(limit)
        out = bytes(cramjam.snappy.decompress_raw(data[:-4]))
        if zlib.crc32(out) != struct.unpack(">I", data[-4:])[0]:
            raise ValueError("snappy block fails its CRC-32 check")
        return out
    raise ValueError(f"unsupported OCF codec {codec!r}")


def _uvarint(data: bytes) -> int | None:
    shift = result = 0
    for b in data[:10]:
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result
        shift += 7
    return None


def min_datum_bytes(schema: Any) -> int:
    """The fewest bytes one datum of ``schema`` (parsed JSON) takes in Avro's binary encoding
    (0 for ``null`` and records of such fields: any number of them fits in no bytes)."""
    expanded, _named = expand_names(schema)  # (references by full name: two types may share a short one)
    return _min_bytes(expanded, {}, 0)


def _min_bytes(schema: Any, named: dict[str, int], depth: int) -> int:
    if depth > 64:
        return 0
    if isinstance(schema, list):
        return 1  # the branch index
    if isinstance(schema, str):
        if schema in named:
            return named[schema]
        return {"boolean": 1, "int": 1, "long": 1, "float": 4, "double": 8, "bytes": 1, "string": 1}.get(schema, 0)
    if not isinstance(schema, dict):
        return 0
    kind = schema.get("type")
    if kind in ("record", "error"):
        name = str(schema.get("name", ""))
        named.setdefault(name, 0)  # (a record that refers to itself counts nothing for it)
        named[name] = sum(_min_bytes(f.get("type"), named, depth + 1) for f in schema.get("fields") or ()
                          if isinstance(f, dict))
        return named[name]
    if kind == "fixed":
        size = schema.get("size", 0)
        named[str(schema.get("name", ""))] = size if isinstance(size, int) and size > 0 else 0
        return named[str(schema.get("name", ""))]
    if kind == "enum":
        named[str(schema.get("name", ""))] = 1
        return 1
    if kind in ("array", "map"):
        return 1
    return _min_bytes(kind, named, depth + 1)


@dataclass(frozen=True)
class OcfBlock:
    """One block: byte offset in the file, record count, uncompressed records; or why it is bad."""

    offset: int
    count: int
    data: bytes
    error: str | None = None


def iter_ocf_blocks(fo: BinaryIO, header: OcfHeader, start: int, end: int,
                    limits: BlockLimits = DEFAULT_LIMITS) -> Iterator[OcfBlock]:
    """The blocks of ``[start, end)`` (a split starts at a block); a bad block is yielded with
    ``error`` set and reading resumes after the next sync marker. A block past one of the
    ``limits`` is a bad block (its ``count``: :meth:`BlockLimits.counted`) whose reason names
    the limit."""
    fo.seek(start)
    buf = fo.read(max(0, end - start))
    pos = 0
    smallest: int | None = None  # the fewest bytes a record of the header's schema takes
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
            yield OcfBlock(offset, limits.counted(count), buf[pos:nxt],
                           f"truncated: the block of {count} record(s) gives {size} bytes, the file ends first")
            pos = nxt
            continue
        if buf[stop : stop + SYNC_SIZE] != header.sync:
            nxt = _resync(buf, pos, header.sync)
            yield OcfBlock(offset, limits.counted(count), buf[pos:nxt], "the block does not end with the file's sync marker")
            pos = nxt
            continue
        raw = buf[pos + body : stop]
        if count > limits.max_block_records:
            yield OcfBlock(offset, limits.counted(count), raw,
                           f"the block claims {count} records, more than the limit of {limits.max_block_records} "
                           f"(option maxBlockRecords={limits.max_block_records}; raise it to read such blocks)")
            pos = stop + SYNC_SIZE
            continue
        try:
            data = decompress(header.codec, raw, limits.max_block_bytes)
        except BlockTooLarge as exc:
            yield OcfBlock(offset, count, raw, f"{count} record(s) in {size} bytes: {exc}")
        except Exception as exc:
            yield OcfBlock(offset, count, raw, f"cannot decompress ({header.codec}): {exc}")
        else:
            if smallest is None:
                smallest = min_datum_bytes(header.schema)
            if smallest and count * smallest > len(data):
                yield OcfBlock(offset, count, raw,
                               f"the block claims {count} records but holds {len(data)} bytes uncompressed: a record "
                               f"of its schema takes at least {smallest} byte(s)")
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


def plan_ocf_splits(path: str, split_bytes: int,
                    limits: BlockLimits = DEFAULT_LIMITS) -> tuple[OcfHeader, list[tuple[int, int, int]]]:
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
            records += limits.counted(count)
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
