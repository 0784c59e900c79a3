"""Reading ``debezium-json`` lines in the executors: records to canonical rows, in Arrow batches.

:class:`LineReader` decodes the lines of one partition in order (see
:mod:`lakecdc.decode.debezium.json` for the layouts): a comment line or a key line is a skipped
record, a key line gives the primary-key columns of the value on the next line, a kcat record
(``topic``, ``partition``, ``offset``, ...) carries its key and value as JSON text, as JSON, as
base64 of JSON, or as the Avro datum kcat's own deserialiser rendered
(:mod:`lakecdc.decode.debezium.avro_json`). The envelope itself is
:func:`lakecdc.decode.debezium.envelope.decode_value`'s.

Speed (the issue-4 benchmark decodes a million events): lines are parsed with msgspec and each
distinct Kafka Connect schema text once (:mod:`lakecdc.decode.jsontext`, :mod:`lakecdc.decode.kafka.connect`), the
images of one schema read by converters made once; the cyclic garbage collector is off while a
batch is decoded *and* turned into Arrow arrays, and the rows are freed before it is back on (else
its first pass walks every object of the batch).
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import types as T

from lakecdc.decode.debezium.avro_json import AvroJson, is_avro_json
from lakecdc.decode.debezium.envelope import (
    Images,
    Key,
    decode_value,
    image_readers,
    looks_like_key,
    non_row_reason,
    parse_json,
    same_table,
)
from lakecdc.decode.debezium.rules import name_from_topic
from lakecdc.decode.debezium.settings import Settings
from lakecdc.decode.files.kcat import split_key_value
from lakecdc.decode.jsontext import compact_json, loads
from lakecdc.decode.kafka.connect import ConnectSplitter, unwrap_connect
from lakecdc.decode.kafka.records import KCAT_MEMBERS, kafka_pairs, kcat_part
from lakecdc.decode.rows import ROW_SCHEMA, RecordError, Row, encodable, failed, gc_paused, skipped

if TYPE_CHECKING:
    from lakecdc.decode.avro.registry import Registry

_MAP = pa.map_(pa.string(), pa.string())

# -- reading lines -----------------------------------------------------------------------------------


class LineReader:
    """Decodes the lines of one partition in order (a key line pairs with the next line).

    ``registry``: the ``schemaDirectory`` option's Avro writer schemas, for kcat records rendered
    by kcat's Avro deserialiser.
    """

    def __init__(self, settings: Settings, registry: Registry | None = None, prefixes: Sequence[str] = ()) -> None:
        self.settings = settings
        self.prefixes = list(prefixes)  # what Spark cut off lines whose _head is their index
        self.connect = ConnectSplitter(functools.partial(image_readers, settings=settings))
        self.avro_json = AvroJson(settings, registry)
        self.in_comment: str | None = None  # the file whose /* ... */ block is open
        self.pending: tuple[str, int, Key] | None = None
        self.paired = False  # whether the last value read took the pending key

    def read_all(self, lines: list[tuple[str, str, int]] | list[tuple[str, str, int, int | None]]) -> list[Row]:
        """The rows of consecutive lines; a key line that pairs with the next value is counted
        under that value's table (its own schema name may spell the table otherwise). A line may
        come as ``(text, file, row, head)``: ``head`` the index of the prefix cut off its text."""
        out: list[Row] = []
        for text, file, row, *head in lines:
            decoded = self.read(text, file, row, head[0] if head else None)
            if self.paired and out and decoded.table and out[-1].table != decoded.table:
                out[-1] = out[-1]._replace(table=decoded.table)
            out.append(decoded)
        return out

    def read(self, text: str, file: str, row: int, head: int | None = None) -> Row:
        try:
            return self._read(text, file, row, head)
        except RecordError as exc:
            return failed(str(exc))
        except Exception as exc:  # one odd record must not fail the batch
            return failed(f"could not read the record: {type(exc).__name__}: {exc}")

    def _comment(self, text: str, file: str) -> bool:
        if self.in_comment is None and text[:1] == "{":  # the common case, fast
            return False
        stripped = text.strip()
        if self.in_comment == file:
            if "*/" in stripped:
                self.in_comment = None
            return True
        self.in_comment = None
        if stripped.startswith("/*"):
            if "*/" not in stripped[2:]:
                self.in_comment = file
            return True
        return stripped.startswith(("//", "*"))

    def _read(self, text: str, file: str, row: int, head: int | None = None) -> Row:
        pending, self.pending, self.paired = self.pending, None, False
        split = None
        if head is not None:
            # the line started with prefixes[head] (a '{"schema":...' text): it is no comment,
            # unless a comment block is open, where the whole line is read as it was
            prefix = self.prefixes[head]
            if self.in_comment is None:
                split = self.connect.split_cut(prefix, text)
            text = prefix + text if split is None else text
        if split is None and self.in_comment is None and text[:1] != "{":
            pair = split_key_value(text)
            if pair is not None:
                return self._key_value(*pair, file, row)
        if split is None and self._comment(text, file):
            return skipped("comment")
        images: Images | None = None
        if split is None:
            split = self.connect.split(text)
        if split is not None:
            payload, schema, images = split
        else:
            try:
                record = loads(text)
            except RecordError:
                pair = split_key_value(text, json_key=True)
                if pair is None:
                    raise
                return self._key_value(*pair, file, row)
            if isinstance(record, dict) and all(k in record for k in KCAT_MEMBERS):
                return self._kcat(record)
            payload, schema = unwrap_connect(record)
        schema_name = schema.get("name") if schema else None
        if isinstance(payload, dict) and "op" not in payload and non_row_reason(payload, schema_name) is None \
                and looks_like_key(payload, schema_name):
            found = Key(payload, schema, compact_json(payload))
            self.pending = (file, row, found)
            return skipped("key", table=name_from_topic(schema_name, self.settings), extra=[("key", found.text)])
        key = None
        if pending is not None and pending[0] == file and pending[1] == row - 1 and same_table(pending[2], schema):
            key, self.paired = pending[2], True
        return decode_value(payload, schema, key=key, kafka=[], topic=None, settings=self.settings, parse=parse_json,
                            images=images)

    def _key_value(self, key_text: str, value_text: str, file: str, row: int) -> Row:
        """A ``KEY<sep>VALUE`` line of a kcat ``-K<sep>`` dump: the key (JSON: the record's key; any
        other text, a placeholder such as ``****``, is kept as ``kafka.key``) and the value."""
        key: Key | None = None
        try:
            parsed = loads(key_text) if key_text[:1] in "{[" else None
        except RecordError:
            parsed = None
        if parsed is not None:
            payload, schema = unwrap_connect(parsed)
            if looks_like_key(payload, schema.get("name") if schema else None):
                key = Key(payload, schema, compact_json(payload))
        if value_text.strip() in ("", "NULL", "null"):
            return skipped("tombstone", extra=[("kafka.key", key_text)])
        self.pending = (file, row - 1, key) if key is not None else None
        out = self._read(value_text, file, row)
        self.paired = False  # (the key was on this line: no earlier line to name the table of)
        if key is None and out.error is None and out.op is not None:
            out = out._replace(source=[*(out.source or []), ("kafka.key", key_text)])
        return out

    def _part(self, raw: Any, what: str) -> tuple[Any, Mapping[str, Any] | None, Images | None]:
        """A kcat ``key``/``payload`` as ``(payload, schema, images)``."""
        if isinstance(raw, str):
            split = self.connect.split(raw)
            if split is not None:
                return split
        payload, schema = unwrap_connect(kcat_part(raw, what, loads))
        return payload, schema, None

    def _kcat(self, record: Mapping[str, Any]) -> Row:
        kafka = kafka_pairs(record)
        topic = record.get("topic") if isinstance(record.get("topic"), str) else None
        for part in ("key_error", "payload_error"):
            if record.get(part):
                raise RecordError(f"kcat could not deserialise the record: {part} '{record[part]}'")
        if is_avro_json(record):
            return self.avro_json.row(record, kafka, topic)
        key = None
        raw_key = record.get("key")
        if raw_key is not None:
            try:
                key_value, key_schema, _ = self._part(raw_key, "kcat key")
            except RecordError:
                key_value, key_schema = None, None  # a key that is no JSON names no columns
            if isinstance(key_value, dict):
                key = Key(key_value, key_schema, compact_json(key_value))
            kafka.append(("kafka.key", raw_key if isinstance(raw_key, str) else compact_json(raw_key)))
        payload, schema, images = self._part(record.get("payload"), "kcat payload")
        return decode_value(payload, schema, key=key, kafka=kafka, topic=topic, settings=self.settings,
                            parse=parse_json, images=images)


def lines_of(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, list[tuple[str, str, int, int | None]]]]:
    """Each batch with its lines as ``(text, file, row, head)`` (``head`` from an optional
    ``_head`` column: the index of the prefix Spark cut off the text, else None)."""
    for batch in batches:
        values = batch.column("value").to_pylist()
        files = batch.column("_file").to_pylist()
        rows = batch.column("_row").to_pylist()
        heads = batch.column("_head").to_pylist() if "_head" in batch.schema.names else [None] * len(values)
        yield batch, list(zip(values, files, rows, heads, strict=True))


def _arrow_type(dtype: T.DataType) -> pa.DataType:
    if isinstance(dtype, T.LongType):
        return pa.int64()
    if isinstance(dtype, T.ArrayType):
        return pa.list_(pa.string())
    if isinstance(dtype, T.MapType):
        return _MAP
    return pa.string()


_ARROW_SCHEMA = pa.schema([(f.name, _arrow_type(f.dataType)) for f in ROW_SCHEMA.fields])
_ROW_TYPES = (pa.string(), pa.string(), pa.int64(), pa.string(), pa.string(), pa.string(), pa.list_(pa.string()),
              _MAP, _MAP, _MAP, pa.string())


def rows_batch(batch: pa.RecordBatch, out: list[Row]) -> pa.RecordBatch:
    """The ``x_*`` batch of ``out``, the rows of ``batch``'s lines (its origin columns kept)."""
    cols: list[Any] = list(zip(*out, strict=True)) if out else [[] for _ in Row._fields]
    try:
        arrays = [pa.array(col, kind) for col, kind in zip(cols, _ROW_TYPES, strict=True)]
    except UnicodeEncodeError:
        cols = list(zip(*[encodable(r) for r in out], strict=True))
        arrays = [pa.array(col, kind) for col, kind in zip(cols, _ROW_TYPES, strict=True)]
    origin = [batch.column("_file"), batch.column("_block"), batch.column("_row")]
    return pa.RecordBatch.from_arrays(origin + arrays, schema=_ARROW_SCHEMA)


def decode_batches(batches: Iterator[pa.RecordBatch], *, settings: Settings,
                   registry: Registry | None = None, prefixes: Sequence[str] = ()) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: lines (``value`` + origin columns, maybe ``_head``) to canonical rows
    (``x_*``)."""
    reader = LineReader(settings, registry, prefixes)
    for batch, lines in lines_of(batches):
        with gc_paused():  # the collector's passes cost a third of the decoding (see gc_paused)
            out = reader.read_all(lines)
            result = rows_batch(batch, out)
            del out, lines  # freed while the collector is off: its next pass finds nothing of them
        yield result


__all__ = [
    "LineReader", "decode_batches", "lines_of", "rows_batch",
]
