"""Kafka record files for the Avro decoders: how they are cut, framed and read in the executors.

Shared by ``debezium-avro``, ``dts-avro`` and ``qlik-avro`` (each brings a :class:`RowReader`
that turns one :class:`Split` into canonical rows):

* **Splits** (:class:`Split`): one task's share of the input. Object Container Files are cut at
  blocks (:func:`lakecdc.decoders._avro.plan_ocf_splits`); files of length-prefixed messages at
  message boundaries, never between a record key and its value (:func:`message_splits`); a kcat
  dump or a single message is one split.
* **Framing** (:func:`read_messages`): each message preceded by its length (4 bytes big-endian;
  a zero length is a null value, a tombstone); ``single``: the file is one message; kcat ``-J``
  dumps: one JSON record a line whose ``key``/``payload`` are the messages base64-encoded, the
  other members kept as ``kafka.<name>`` (:func:`kcat_message`); kcat ``-K`` dumps of binary
  messages (:func:`kcat_kv_messages`).
* **OCF records** (:func:`ocf_records`): the records of an OCF split, a bad block one record with
  its error.
* **mapInArrow bodies** (:func:`decode_batches`, :func:`type_batches`, :func:`variant_batches`):
  split numbers in, canonical ``x_*`` rows (with ``_offset`` and ``_raw`` for the quarantine),
  declared column types, or images as JSON out; the garbage collector paused while a batch is
  built (:func:`lakecdc.decoders._debezium.gc_paused`).
"""

from __future__ import annotations

import base64
import binascii
import io
import itertools
import json
import mmap
import os
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple, Protocol

import pyarrow as pa
from fastavro import schemaless_reader
from pyspark.sql import types as T

from lakecdc.decoders._avro import DEFAULT_LIMITS, BlockLimits, iter_length_prefixed, iter_ocf_blocks
from lakecdc.decoders._debezium import Row, gc_paused
from lakecdc.decoders._kafka_connect import Pairs, RecordError, compact_json
from lakecdc.decoders.debezium_json import PARSED_SCHEMA, _json_image, _kafka_pairs
from lakecdc.errors import ConfigError

#: Upper bound of one task's share of a large file (OCF: cut at blocks; messages: at messages).
SPLIT_BYTES = 128 << 20
_MIN_SPLIT = 4 << 20
_BATCH_ROWS = 4096
_HEADER = 5  # magic byte + schema id
_SIDECARS = (".keys.avro", ".headers.avro")
_PREFIX = struct.Struct(">I")

_MAP = pa.map_(pa.string(), pa.string())
DECODED_SCHEMA = T.StructType(
    [*PARSED_SCHEMA.fields, T.StructField("_offset", T.LongType()), T.StructField("_raw", T.StringType())]
)
_ARROW_DECODED = pa.schema(
    [
        ("_file", pa.string()), ("_block", pa.int64()), ("_row", pa.int64()),
        ("x_table", pa.string()), ("x_op", pa.string()), ("x_op_ts", pa.int64()), ("x_pos", pa.string()),
        ("x_seq", pa.string()), ("x_txid", pa.string()), ("x_keys", pa.list_(pa.string())),
        ("x_before", _MAP), ("x_after", _MAP), ("x_source", _MAP), ("x_error", pa.string()),
        ("_offset", pa.int64()), ("_raw", pa.string()),
    ]
)
_TYPES_SCHEMA = T.StructType(
    [T.StructField("table", T.StringType()), T.StructField("column", T.StringType()), T.StructField("type", T.StringType())]
)
_VARIANT_SCHEMA = T.StructType(
    [T.StructField("table", T.StringType()), T.StructField("before", T.StringType()), T.StructField("after", T.StringType())]
)



@dataclass(frozen=True)
class Split:
    """One task's share of the input."""

    path: str
    kind: str  # "ocf" | "messages" | "single" | "kcat" | "kcat-k" | "bad"
    start: int = 0
    end: int = 0
    first_row: int = 0
    keys: str | None = None  # an OCF file's keys file
    note: str | None = None
    limits: BlockLimits = DEFAULT_LIMITS  # an OCF file's block limits (the decoder's options)
    separator: bytes = b""  # a kcat -K dump's key delimiter
    delimiter: bytes = b"\n"  # a kcat -K dump's message delimiter (-D)


class Message(NamedTuple):
    """One Kafka record of a message file: where it is, its value and key bytes, its metadata."""

    row: int
    offset: int
    raw: bytes | str  # what the quarantine keeps
    data: bytes | None  # the value's wire-format message; None or b"" for a null value
    error: str | None = None
    key: bytes | None = None
    kafka: Pairs | None = None
    topic: str | None = None


class Out(NamedTuple):
    """One output row: its place, the canonical row, and the raw bytes kept when it is bad."""

    row: int
    offset: int
    value: Row
    raw: bytes | str | None



# -- reading --------------------------------------------------------------------------------------


def read_messages(split: Split, measure: Measure | None = None, *, key_measure: Measure | None = None) -> Iterator[Message]:
    """The Kafka records of a ``messages`` (length-prefixed), ``single``, ``kcat`` or ``kcat-k``
    split (``measure``, ``key_measure``: see :func:`kcat_kv_messages`)."""
    if split.kind == "kcat":
        yield from kcat_messages(split)
        return
    if split.kind == "kcat-k":
        if measure is None:
            raise ValueError("a kcat -K dump is read with a measure of its messages")
        yield from kcat_kv_messages(split, measure, key_measure=key_measure)
        return
    with open(split.path, "rb") as fh:
        if split.kind == "single":
            data = fh.read()
            yield Message(0, 0, data, data)
            return
        for n, frame in enumerate(iter_length_prefixed(fh, split.start)):
            if frame.offset >= split.end:
                return
            yield Message(split.first_row + n, frame.offset, frame.payload, frame.payload, frame.error)


def kcat_messages(split: Split) -> Iterator[Message]:
    """The records of a kcat ``-J`` dump, one a non-blank line (``offset``: the line's byte offset)."""
    offset = 0
    with open(split.path, "rb") as fh:
        for n, line in enumerate(fh):
            at, offset = offset, offset + len(line)
            if line.strip():
                yield kcat_message(n, at, line.decode("utf-8", "replace").rstrip("\r\n"))


def kcat_message(n: int, at: int, text: str) -> Message:
    """One kcat ``-J`` line (0-based line ``n`` at byte ``at``): its base64 ``payload`` and ``key``
    decoded, the other members kept as ``kafka.<name>`` pairs; ``error`` set when it is no such line."""
    def bad(reason: str) -> Message:
        return Message(n, at, text, None, f"line {n + 1}: {reason}")

    try:
        record = json.loads(text)
    except ValueError as exc:
        return bad(f"not a kcat JSON record: {exc}")
    if not isinstance(record, dict) or "payload" not in record:
        return bad("not a kcat -J record (expected topic, partition, offset, key, payload)")
    for part in ("key_error", "payload_error"):
        if record.get(part):
            return bad(f"kcat could not read the record: {part} '{record[part]}'")
    kafka = _kafka_pairs(record)
    topic = record.get("topic") if isinstance(record.get("topic"), str) else None
    raw_key, payload = record.get("key"), record.get("payload")
    if raw_key is not None:
        kafka.append(("kafka.key", raw_key if isinstance(raw_key, str) else compact_json(raw_key)))
    if payload is not None and not isinstance(payload, str):
        return bad("'payload' is not base64 text: lakecdc reads the wire-format bytes base64-encoded, "
                   "not kcat's Avro deserialiser output (-s avro)")
    data = _unbase64(payload) if payload is not None else None
    if payload is not None and data is None:
        return bad(f"'payload' is not base64: '{payload[:40]}'")
    key = _unbase64(raw_key) if isinstance(raw_key, str) else None
    return Message(n, at, text, data, None, key, kafka, topic)


#: Where a binary message starting at a byte offset of an open file may end, most likely first
#: (several when the format has more than one schema); :class:`RecordError` saying why when no
#: message of the format starts there.
Measure = Callable[[BinaryIO, int], Sequence[int]]

#: What kcat writes for a null key or value with ``-Z``.
KCAT_NULL = b"NULL"
#: How far :func:`kcat_kv_messages` looks for the next record after one it cannot read.
_RESYNC_TRIES = 4096
#: The most bytes of such a record the quarantine keeps.
_RAW_LIMIT = 1 << 16


def kcat_delimiter(text: str, option: str) -> bytes:
    """A kcat ``-K`` / ``-D`` delimiter as kcat reads it: text in which ``\\n``, ``\\t``,
    ``\\r`` and ``\\xNN`` (a byte in hex) stand for those bytes; ValueError naming ``option``
    when it is empty."""
    out = b""
    for i, part in enumerate(re.split(r"(\\x[0-9a-fA-F]{1,2}|\\[ntr])", text)):
        if i % 2 == 0:
            out += part.encode("utf-8")
        else:
            out += bytes([int(part[2:], 16)]) if part[1] == "x" else {"n": b"\n", "t": b"\t", "r": b"\r"}[part[1]]
    if not out:
        raise ValueError(f"{option} is empty: give the delimiter kcat was given (e.g. '^', '\\t', '\\x1f')")
    return out


#: The options of a kcat ``-K`` dump (:func:`kcat_kv_framing`), with their defaults.
KCAT_KV_OPTIONS = {"keySeparator": "", "messageDelimiter": "\\n"}


def kcat_kv_framing(name: str, framing: str, options: dict[str, str]) -> tuple[bytes, bytes] | None:
    """The key separator and message delimiter of kcat ``-K`` dumps when the decoder reads them
    (``framing=kcat-K``, or ``auto`` with ``keySeparator`` given), else None; ConfigError (naming
    the decoder ``name``) for ``kcat-K`` without a separator or a delimiter that says nothing."""
    given = options.get("keySeparator", "")
    if framing != "kcat-k" and not (framing == "auto" and given):
        return None
    if not given:
        raise ConfigError(f"{name}: framing=kcat-K needs keySeparator, the -K delimiter kcat wrote the dump with "
                          "(e.g. keySeparator=^, or \\t for a tab, \\xNN for a byte)")
    try:
        return (kcat_delimiter(given, "keySeparator"),
                kcat_delimiter(options.get("messageDelimiter") or "\\n", "messageDelimiter"))
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


def kcat_kv_messages(split: Split, measure: Measure, *, key_measure: Measure | None = None) -> Iterator[Message]:
    """The records of a kcat ``-K<separator>`` dump of binary messages.

    kcat writes each record as its key's bytes, the key separator, the value's bytes, then the
    message delimiter (``-D``, default newline), with nothing escaped: a binary value may hold
    the separator or the delimiter itself, so a record is not cut at them blindly. Each value
    is measured instead: ``measure`` reads the message that starts after the separator (an
    Avro datum knows its own length) and the record ends where that message ends, when the
    delimiter (or the end of the file) follows. A key is measured the same way with
    ``key_measure`` when one is given and the key reads as such a message followed by the
    separator; otherwise the key is the text before the first separator (as kcat itself splits
    a line it produces from). An empty value, or kcat's ``NULL`` (``-Z``), is a null value (a
    tombstone); an empty or ``NULL`` key is no key.

    A record that cannot be read so (a value that does not read, or does not end at a
    delimiter) cannot tell where it ends: it is one record with ``error`` set (its byte offset
    and why), running to the first place after it where a record reads, or to the end of the
    file.
    """
    sep, delim = split.separator, split.delimiter
    with open(split.path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        size = len(mm)

        def record(pos: int, strict: bool = False) -> tuple[bytes | None, bytes | None, int]:
            """``(key, value, end)`` of the record at ``pos``; RecordError saying why not (``strict``:
            also when a text key holds the message delimiter, as one does that starts inside a
            record)."""
            key_end = -1
            if key_measure is not None and mm[pos:pos + 1] == b"\0":
                try:
                    key_end = next((e for e in key_measure(fh, pos) if mm[e:e + len(sep)] == sep), -1)
                except RecordError:
                    key_end = -1
            if key_end < 0:
                key_end = mm.find(sep, pos)
                if key_end < 0:
                    raise RecordError(f"no key separator {sep!r} after byte offset {pos}")
                if strict and mm.find(delim, pos, key_end) >= 0:
                    raise RecordError("a text key holding the message delimiter")
            key = mm[pos:key_end]
            found = None if key in (b"", KCAT_NULL) else key
            at = key_end + len(sep)
            for null in (b"", KCAT_NULL):
                stop = at + len(null)
                if mm[at:stop] == null and (stop == size or mm[stop:stop + len(delim)] == delim):
                    return found, None, min(stop + len(delim), size)
            ends = measure(fh, at)
            # kcat ends every record with the delimiter: an end at the end of the file without it
            # (a cut dump) only when no end is followed by the delimiter
            for end in sorted(ends, key=lambda e: mm[e:e + len(delim)] != delim):
                if end == size or mm[end:end + len(delim)] == delim:
                    return found, mm[at:end], min(end + len(delim), size)
            raise RecordError(f"the value at byte offset {at} reads to byte {ends[0] if ends else at}, where no message "
                              f"delimiter {delim!r} follows: not a kcat -K dump with key separator {sep!r} and "
                              f"message delimiter {delim!r}")

        pos = n = 0
        while pos < size:
            try:
                key, value, end = record(pos)
            except RecordError as exc:
                end = _resync(record, mm, pos, delim)
                yield Message(n, pos, mm[pos:min(end, pos + _RAW_LIMIT)], None,
                              f"kcat -K record at byte offset {pos}: {exc}; bytes {pos}..{end} cannot be told apart "
                              "into records (the next record that reads starts there)" if end < size else
                              f"kcat -K record at byte offset {pos}: {exc}; bytes {pos}..{end} (the end of the file) "
                              "cannot be told apart into records")
            else:
                kafka: Pairs = []
                if key is not None and not (key_measure is not None and key[:1] == b"\0"):
                    kafka.append(("kafka.key", key.decode("utf-8", "replace")))
                yield Message(n, pos, mm[pos:end], value, None, key, kafka)
            pos, n = end, n + 1


def _resync(record: Callable[[int, bool], Any], mm: mmap.mmap, pos: int, delim: bytes) -> int:
    """Where the first record that reads starts after a delimiter past ``pos``, its key a message
    or a text without the delimiter (the file's size when none does within :data:`_RESYNC_TRIES`
    delimiters)."""
    at = pos
    for _ in range(_RESYNC_TRIES):
        found = mm.find(delim, at + 1)
        if found < 0:
            break
        at = found
        start = found + len(delim)
        if start >= len(mm):
            break
        try:
            record(start, True)
        except RecordError:
            continue
        return start
    return len(mm)


def ocf_records(fh: Any, header: Any, parsed: Any, split: Split, *,
                return_record_name: bool = False) -> Iterator[tuple[int, int, Any, str | None, bytes]]:
    """``(row, block offset, record, error, raw)`` of the records of an OCF split, read with the
    fastavro schema ``parsed`` (``return_record_name``: union branches that are records as
    ``(name, value)``); a bad block (or the rest of a block that stops reading) is one record with
    ``error`` set."""
    row = split.first_row
    for block in iter_ocf_blocks(fh, header, split.start, split.end, split.limits):
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


class RowReader(Protocol):
    """What the ``mapInArrow`` bodies below need of a reader (:class:`Reader`, or another Avro
    format's reader over the same :class:`Split` s)."""

    def rows(self, split: Split) -> Iterator[Out]: ...

    def types(self, split: Split) -> Iterator[tuple[str, str, str]]: ...


def _unbase64(text: str) -> bytes | None:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None


def _arrow_batch(path: str, block: int, outs: list[Out]) -> pa.RecordBatch:
    rows = [o.value for o in outs]
    cols = list(zip(*rows, strict=True)) if rows else [[] for _ in Row._fields]
    raws = [None if o.value.error is None or o.raw is None else
            (o.raw if isinstance(o.raw, str) else base64.b64encode(o.raw).decode("ascii")) for o in outs]
    n = len(outs)
    return pa.RecordBatch.from_arrays(
        [
            pa.array([path] * n, pa.string()), pa.array([block] * n, pa.int64()),
            pa.array([o.row for o in outs], pa.int64()),
            pa.array(cols[0], pa.string()), pa.array(cols[1], pa.string()), pa.array(cols[2], pa.int64()),
            pa.array(cols[3], pa.string()), pa.array(cols[4], pa.string()), pa.array(cols[5], pa.string()),
            pa.array(cols[6], pa.list_(pa.string())), pa.array(cols[7], _MAP), pa.array(cols[8], _MAP),
            pa.array(cols[9], _MAP), pa.array(cols[10], pa.string()),
            pa.array([o.offset for o in outs], pa.int64()), pa.array(raws, pa.string()),
        ],
        schema=_ARROW_DECODED,
    )


def _split_indices(batches: Iterator[pa.RecordBatch]) -> Iterator[int]:
    for batch in batches:
        yield from batch.column("id").to_pylist()


def decode_batches(batches: Iterator[pa.RecordBatch], *, reader: RowReader, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: split numbers (``id``) to canonical rows (``x_*``, ``_offset``, ``_raw``);
    the garbage collector paused while a batch is decoded (see :func:`gc_paused`)."""
    for i in _split_indices(batches):
        split = splits[i]
        rows = reader.rows(split)
        while True:
            with gc_paused():
                outs = list(itertools.islice(rows, _BATCH_ROWS))
                if not outs:
                    break
                batch = _arrow_batch(split.path, split.start, outs)
            yield batch


def type_batches(batches: Iterator[pa.RecordBatch], *, reader: RowReader, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: the declared column types of the splits' tables."""
    seen: set[tuple[str, str, str]] = set()
    for i in _split_indices(batches):
        with gc_paused():
            seen.update(reader.types(splits[i]))
    rows = sorted(seen)
    yield pa.RecordBatch.from_pydict(
        {"table": [r[0] for r in rows], "column": [r[1] for r in rows], "type": [r[2] for r in rows]},
        schema=pa.schema([("table", pa.string()), ("column", pa.string()), ("type", pa.string())]),
    )


def variant_batches(batches: Iterator[pa.RecordBatch], *, reader: RowReader, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: good rows' ``table`` and images as JSON objects (numbers as numbers)."""
    schema = pa.schema([("table", pa.string()), ("before", pa.string()), ("after", pa.string())])
    for i in _split_indices(batches):
        with gc_paused():
            rows = [o.value for o in reader.rows(splits[i]) if o.value.op is not None and o.value.error is None]
        yield pa.RecordBatch.from_pydict(
            {"table": [r.table for r in rows], "before": [_json_image(r.before) for r in rows],
             "after": [_json_image(r.after) for r in rows]},
            schema=schema,
        )


# -- planning (driver) -----------------------------------------------------------------------------


def message_splits(path: str, split_bytes: int, key_ids: frozenset[int]) -> list[tuple[int, int, int]]:
    """``(start, end, first message number)`` of a length-prefixed file cut into about
    ``split_bytes``, at message boundaries, never between a key message and its value."""
    size = os.path.getsize(path)
    if size <= split_bytes:
        return [(0, size, 0)]
    out: list[tuple[int, int, int]] = []
    start = first = pos = n = 0
    after_key = False
    unpack = _PREFIX.unpack_from
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        while pos + 4 <= size:
            if pos - start >= split_bytes and not after_key:
                out.append((start, pos, first))
                start, first = pos, n
            (length,) = unpack(mm, pos)
            body = pos + 4
            after_key = (length >= _HEADER and body + _HEADER <= size and mm[body] == 0
                         and unpack(mm, body + 1)[0] in key_ids)
            pos = body + length
            n += 1
    out.append((start, size, first))
    return out


def _sidecar_of(path: str) -> str | None:
    """A sink's keys file beside an OCF file of values (``x.avro`` -> ``x.keys.avro``)."""
    base, ext = os.path.splitext(path)
    keys = f"{base}.keys{ext or '.avro'}"
    return keys if os.path.isfile(keys) else None


def _first_byte(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(64).lstrip()[:1]

