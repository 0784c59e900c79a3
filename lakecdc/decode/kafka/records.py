"""Kafka records of message files, and the ``mapInArrow`` bodies that read them in the executors.

Shared by ``debezium-avro``, ``dts-avro`` and ``qlik-avro`` (each brings a :class:`RowReader`
that turns one :class:`~lakecdc.decode.files.splits.Split` into canonical rows):

* **Framing** (:func:`read_messages`): each message preceded by its length (4 bytes big-endian;
  a zero length is a null value, a tombstone: :mod:`lakecdc.decode.kafka.dumps`); ``single``:
  the file is one message; kcat ``-J`` dumps: one JSON record a line whose ``key``/``payload``
  are the messages base64-encoded, the other members kept as ``kafka.<name>``
  (:func:`kcat_message`); kcat ``-K`` dumps of binary messages (:func:`kcat_kv_messages`).
* **kcat -J records of JSON messages** (:func:`kafka_pairs`, :func:`kcat_part`): the record's
  metadata as ``kafka.*`` pairs and a ``key``/``payload`` as JSON, for the JSON formats' readers.
* **mapInArrow bodies** (:func:`decode_batches`, :func:`type_batches`, :func:`variant_batches`):
  split numbers in, canonical ``x_*`` rows (with ``_offset`` and ``_raw`` for the quarantine),
  declared column types, or images as JSON out; the garbage collector paused while a batch is
  built (:func:`lakecdc.decode.rows.gc_paused`).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import pyarrow as pa
from pyspark.sql import types as T

from lakecdc.decode.files.kcat import Measure, kcat_kv_records
from lakecdc.decode.files.splits import Split, split_numbers
from lakecdc.decode.jsontext import compact_json, json_image, plain_text, slow_loads
from lakecdc.decode.kafka.dumps import iter_length_prefixed
from lakecdc.decode.rows import ROW_SCHEMA, Pairs, RecordError, gc_paused

_BATCH_ROWS = 4096
#: The files a Kafka sink writes beside an OCF file of values (its records' keys and headers).
SIDECARS = (".keys.avro", ".headers.avro")
#: The members of a kcat ``-J`` record that make it one.
KCAT_MEMBERS = ("topic", "partition", "offset")
_KCAT_META = ("topic", "partition", "offset", "tstype", "ts", "broker")

_MAP = pa.map_(pa.string(), pa.string())
DECODED_SCHEMA = T.StructType(
    [*ROW_SCHEMA.fields, T.StructField("_offset", T.LongType()), T.StructField("_raw", T.StringType())]
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
_ROW_FIELDS = 11  # the x_* columns
TYPES_SCHEMA = T.StructType(
    [T.StructField("table", T.StringType()), T.StructField("column", T.StringType()), T.StructField("type", T.StringType())]
)
VARIANT_SCHEMA = T.StructType(
    [T.StructField("table", T.StringType()), T.StructField("before", T.StringType()), T.StructField("after", T.StringType())]
)


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
    value: Any  # the canonical row (a named tuple with table, op, before, after, error, ...)
    raw: bytes | str | None


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
    kafka = kafka_pairs(record)
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


def kcat_kv_messages(split: Split, measure: Measure, *, key_measure: Measure | None = None) -> Iterator[Message]:
    """The records of a kcat ``-K<separator>`` dump of binary messages (see
    :func:`lakecdc.decode.files.kcat.kcat_kv_records`): a key that is text (not a message
    ``key_measure`` reads) kept as the ``kafka.key`` pair."""
    for r in kcat_kv_records(split.path, split.separator, split.delimiter, measure, key_measure=key_measure):
        if r.error is not None:
            yield Message(r.n, r.offset, r.raw, None, r.error)
            continue
        kafka: Pairs = []
        if r.key is not None and not (key_measure is not None and r.key[:1] == b"\0"):
            kafka.append(("kafka.key", r.key.decode("utf-8", "replace")))
        yield Message(r.n, r.offset, r.raw, r.value, None, r.key, kafka)


def kafka_pairs(record: Mapping[str, Any]) -> Pairs:
    """A kcat ``-J`` record's metadata (topic, partition, offset, timestamp type and value,
    broker, headers) as ``kafka.<name>`` / ``kafka.header.<name>`` pairs."""
    out: Pairs = [(f"kafka.{k}", _meta_text(record.get(k))) for k in _KCAT_META if k in record]
    headers = record.get("headers")
    if isinstance(headers, dict):
        out += [(f"kafka.header.{k}", None if v is None else str(v)) for k, v in headers.items()]
    elif isinstance(headers, list):  # older kcat: [name, value, name, value, ...]
        out += [(f"kafka.header.{headers[i]}", None if headers[i + 1] is None else str(headers[i + 1]))
                for i in range(0, len(headers) - 1, 2)]
    return out


def _meta_text(value: Any) -> str | None:
    text = plain_text(value)
    return None if text is None else str(text)


def kcat_part(raw: Any, what: str, parse: Callable[[str, str], Any] = slow_loads) -> Any:
    """A kcat ``-J`` record's ``key``/``payload`` of a JSON message: JSON text (or base64 of it),
    or JSON already; :class:`~lakecdc.decode.rows.RecordError` naming ``what`` when it is neither."""
    if not isinstance(raw, str):
        return raw
    try:
        return parse(raw, what)
    except RecordError as first:
        try:
            decoded = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise first from None
        return parse(decoded, f"{what} (base64)")


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
    cols: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[] for _ in range(_ROW_FIELDS)]
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


def decode_batches(batches: Iterator[pa.RecordBatch], *, reader: RowReader, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: split numbers (``id``) to canonical rows (``x_*``, ``_offset``, ``_raw``);
    the garbage collector paused while a batch is decoded (see :func:`gc_paused`)."""
    for i in split_numbers(batches):
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
    for i in split_numbers(batches):
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
    for i in split_numbers(batches):
        with gc_paused():
            rows = [o.value for o in reader.rows(splits[i]) if o.value.op is not None and o.value.error is None]
        yield pa.RecordBatch.from_pydict(
            {"table": [r.table for r in rows], "before": [json_image(r.before) for r in rows],
             "after": [json_image(r.after) for r in rows]},
            schema=schema,
        )


def sidecar_of(path: str) -> str | None:
    """A sink's keys file beside an OCF file of values (``x.avro`` -> ``x.keys.avro``)."""
    base, ext = os.path.splitext(path)
    keys = f"{base}.keys{ext or '.avro'}"
    return keys if os.path.isfile(keys) else None


__all__ = [
    "DECODED_SCHEMA", "KCAT_MEMBERS", "SIDECARS", "TYPES_SCHEMA", "VARIANT_SCHEMA", "Message", "Out", "RowReader",
    "decode_batches", "kafka_pairs", "kcat_kv_messages", "kcat_message", "kcat_messages", "kcat_part", "read_messages",
    "sidecar_of", "type_batches", "variant_batches",
]
