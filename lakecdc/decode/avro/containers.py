"""Avro Object Container Files: header, blocks, codecs, limits, splits and records.

An Object Container File (OCF, Avro specification "Object Container Files") is a header (magic
``Obj\\x01``, metadata map with ``avro.schema`` and ``avro.codec``, a 16-byte sync marker)
followed by blocks: record count, byte size, the (compressed) records, the sync marker.
:func:`iter_ocf_blocks` walks the blocks itself, so a corrupt block is reported with its byte
offset and reading resumes at the next sync marker; a block past its :class:`BlockLimits`
(uncompressed bytes, claimed records) is reported the same way, never inflated past the limit.
Codecs: ``null``, ``deflate``, ``bzip2``, ``xz``, and ``snappy``/``zstandard`` through ``cramjam``.
:func:`plan_ocf_splits` cuts a large file at block boundaries (reading only the block headers),
:func:`ocf_records` reads the records of one split.
"""

from __future__ import annotations

import bz2
import io
import json
import lzma
import os
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from fastavro import parse_schema, schemaless_reader

from lakecdc.decode.avro.schemas import expand_names, read_long
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from lakecdc.decode.files.splits import Split

MAGIC = b"Obj\x01"
SYNC_SIZE = 16


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


def read_ocf_header(fo: BinaryIO) -> OcfHeader:
    """The header at the start of ``fo``; raises ValueError when it is not an OCF header."""
    fo.seek(0)
    try:
        head: Any = schemaless_reader(fo, _HEADER, None)
    except Exception as exc:
        raise ValueError(f"unreadable OCF header: {exc}") from None
    if head["magic"] != MAGIC:
        raise ValueError("not an Avro object container file (no 'Obj\\x01' magic)")
    meta: dict[str, bytes] = head["meta"]
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


def is_ocf(path: str) -> bool:
    """Whether ``path`` starts with the OCF magic."""
    with open(path, "rb") as fh:
        return fh.read(4) == MAGIC


def ocf_records(fh: Any, header: OcfHeader, parsed: Any, split: Split, *,
                return_record_name: bool = False) -> Iterator[tuple[int, int, Any, str | None, bytes]]:
    """``(row, block offset, record, error, raw)`` of the records of an OCF split, read with the
    fastavro schema ``parsed`` (``return_record_name``: union branches that are records as
    ``(name, value)``); a bad block (or the rest of a block that stops reading) is one record with
    ``error`` set."""
    row = split.first_row
    for block in iter_ocf_blocks(fh, header, split.start, split.end, split.limits or DEFAULT_LIMITS):
        if block.error is not None:
            yield row, block.offset, None, f"OCF block at byte offset {block.offset}: {block.error}", block.data
            row += max(block.count, 1)
            continue
        bio = io.BytesIO(block.data)
        for k in range(block.count):
            at = bio.tell()
            try:
                record = schemaless_reader(bio, parsed, None, return_record_name=return_record_name)
            except Exception as exc:
                yield (row, block.offset, None, f"records {k}..{block.count - 1} of the OCF block at byte offset "
                       f"{block.offset} cannot be read: {type(exc).__name__}: {exc}", block.data[at:])
                row += block.count - k
                break
            yield row, block.offset, record, None, block.data[at : bio.tell()]
            row += 1


__all__ = [
    "DEFAULT_LIMITS", "LIMIT_OPTIONS", "MAGIC", "MAX_BLOCK_BYTES", "MAX_BLOCK_RECORDS", "SYNC_SIZE", "BlockLimits",
    "BlockTooLarge", "OcfBlock", "OcfHeader", "decompress", "is_ocf", "iter_ocf_blocks", "min_datum_bytes",
    "ocf_records", "plan_ocf_splits", "read_ocf_header",
]
