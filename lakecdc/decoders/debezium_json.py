"""Debezium change events as JSON (``--format debezium-json``): seeds 001 (Oracle) and 004 (Db2).

**Input layouts**, told apart per record, so one file may mix them:

* one JSON value per line, as the Kafka Connect JSON converter writes it: with
  ``schemas.enable=true`` a ``{"schema": ..., "payload": ...}`` pair (the schema is Kafka Connect's
  and gives the column types), with ``schemas.enable=false`` the bare envelope; ``null`` is a
  tombstone;
* Kafka record dumps, ``kcat -J`` style: ``{"topic", "partition", "offset", "tstype", "ts",
  "broker", "headers", "key", "payload"}`` where ``key``/``payload`` are the record's JSON text (or
  already JSON, or base64 of it); a null payload is a tombstone. ``topic``, ``partition``,
  ``offset``, ``ts``, ``tstype`` and each header are kept in ``source`` as ``kafka.<name>``
  (``kafka.header.<name>``), and the key gives the primary-key columns;
* key and value records on alternating lines (a sink that writes both, as in the samples): a
  record that is a key (schema named ``*.Key``, or without schema a flat object that is no
  envelope) gives the primary-key columns of the **value on the next line** of the same file (when
  both have schemas, only if they name the same table). The key line itself is a skipped record
  (``skipped`` = ``key``), counted like tombstones under the value's table;
* pretty-printed or concatenated JSON documents (a schema-change event printed by a tool): staged
  one document per line first, with a map back to the original line numbers.

Lines before the first record that are comments (a ``/* ... */`` licence block, ``//`` lines),
and comment lines between records, are skipped records too (``skipped`` = ``comment``).

Everything else, envelope to canonical event, is in :mod:`lakecdc.decoders._debezium`: ops
``c``/``u``/``d``/``r``/``t`` to ``I``/``U``/``D``/``R``/``T``; tombstones, heartbeats,
transaction markers and schema changes skipped (``op`` and ``_error`` NULL, ``table`` NULL,
``source['skipped']`` the reason); table names per connector; ordering per connector; values as
exact text from the Kafka Connect logical types; the unavailable-value placeholder as a missing
column.

Records are parsed in the executors (``mapInArrow``), numbers kept as their exact text. A record
that is not valid JSON, has an unknown ``op``, lacks the image its op needs, or a value that does
not fit its declared type is quarantined with the reason; the rest of the file applies.

**Options**: ``sequenceBy`` (``auto``: the connector's order; ``op_ts``; or a comma list of source
map names such as ``source.commit_scn,source.scn,source.ssn``), ``tableName`` (``auto``: the
connector's naming; or the ``source`` parts to join, e.g. ``db.schema.table``),
``unavailable.value.placeholder`` (Debezium's property; default ``__debezium_unavailable_value``)
and ``topic.prefix`` (Debezium's property: stripped from topic and schema names when the source
block names no table). Debezium converter and connector properties that change nothing here are
accepted and ignored (``schemas.enable``, ``decimal.handling.mode``, ``time.precision.mode``,
``binary.handling.mode``, ``tombstones.on.delete``, ...): what they change is read per record.

**Types** (:meth:`DebeziumJsonDecoder.column_types`): from the value schema's ``after``/``before``
struct when messages carry one (see :func:`lakecdc.decoders._debezium.spark_type`); without a
schema the pipeline infers them from the JSON values (integers: bigint; numbers with a fraction:
decimal; booleans; everything else string), so use ``decimal.handling.mode=string`` or a
schema for exact decimals (a schemaless ``precise`` decimal is base64 text and stays a string).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes import IMAGE_TYPE, default_seq
from lakecdc.decoders._debezium import (
    UNAVAILABLE,
    Key,
    Row,
    Settings,
    decode_value,
    envelope_table,
    failed,
    gc_paused,
    looks_like_key,
    name_from_topic,
    non_row_reason,
    skipped,
)
from lakecdc.decoders._kafka_connect import (
    Num,
    Pairs,
    RecordError,
    column_name,
    compact_json,
    image_fields,
    placeholder_forms,
    plain_text,
    spark_type,
)
from lakecdc.decoders._records import split_documents
from lakecdc.decoders.base import Decoder
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_KCAT = ("topic", "partition", "offset")
_KCAT_META = ("topic", "partition", "offset", "tstype", "ts", "broker")
_MAP = pa.map_(pa.string(), pa.string())

#: What the executors return per input line (``x_op_ts``: microseconds since 1970).
PARSED_SCHEMA = T.StructType(
    [
        T.StructField("_file", T.StringType()),
        T.StructField("_block", T.LongType()),
        T.StructField("_row", T.LongType()),
        T.StructField("x_table", T.StringType()),
        T.StructField("x_op", T.StringType()),
        T.StructField("x_op_ts", T.LongType()),
        T.StructField("x_pos", T.StringType()),
        T.StructField("x_seq", T.StringType()),
        T.StructField("x_txid", T.StringType()),
        T.StructField("x_keys", T.ArrayType(T.StringType())),
        T.StructField("x_before", IMAGE_TYPE),
        T.StructField("x_after", IMAGE_TYPE),
        T.StructField("x_source", T.MapType(T.StringType(), T.StringType())),
        T.StructField("x_error", T.StringType()),
    ]
)
_TYPES_SCHEMA = T.StructType(
    [T.StructField("table", T.StringType()), T.StructField("column", T.StringType()), T.StructField("type", T.StringType())]
)
_VARIANT_SCHEMA = T.StructType(
    [T.StructField("table", T.StringType()), T.StructField("before", T.StringType()), T.StructField("after", T.StringType())]
)


# -- JSON ------------------------------------------------------------------------------------------


def parse_json(text: str, what: str = "record") -> Any:
    """JSON with every number kept as its exact text (:class:`~lakecdc.decoders._debezium.Num`)."""
    try:
        return json.loads(text, parse_int=Num, parse_float=Num, parse_constant=Num)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise RecordError(f"{what} is nested too deeply") from None


def _unwrap_connect(value: Any) -> tuple[Any, Mapping[str, Any] | None]:
    """``(payload, schema)`` of a Kafka Connect JSON value (``{"schema", "payload"}``) or a bare one."""
    if isinstance(value, dict) and "payload" in value and "schema" in value and len(value) == 2:
        schema = value["schema"]
        return value["payload"], schema if isinstance(schema, dict) else None
    return value, None


def _kcat_part(raw: Any, what: str) -> Any:
    """A kcat ``key``/``payload``: JSON text (or base64 of it), or JSON already."""
    if not isinstance(raw, str):
        return raw
    try:
        return parse_json(raw, what)
    except RecordError as first:
        try:
            decoded = base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            raise first from None
        return parse_json(decoded, f"{what} (base64)")


def _kafka_pairs(record: Mapping[str, Any]) -> Pairs:
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


def _same_table(key: Key, schema: Mapping[str, Any] | None) -> bool:
    """A key belongs to the next value unless both schemas name different tables (the part
    before ``.Key`` / ``.Envelope``; seed 001's own key and value differ in the schema part)."""
    value_name = schema.get("name") if isinstance(schema, Mapping) else None
    key_name = key.schema_name
    if not value_name or not key_name:
        return True
    return key_name.rsplit(".", 2)[-2:-1] == value_name.rsplit(".", 2)[-2:-1]


# -- reading lines -----------------------------------------------------------------------------------


class LineReader:
    """Decodes the lines of one partition in order (a key line pairs with the next line)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.in_comment: str | None = None  # the file whose /* ... */ block is open
        self.pending: tuple[str, int, Key] | None = None
        self.paired = False  # whether the last value read took the pending key

    def read_all(self, lines: list[tuple[str, str, int]]) -> list[Row]:
        """The rows of consecutive lines; a key line that pairs with the next value is counted
        under that value's table (its own schema name may spell the table otherwise)."""
        out: list[Row] = []
        for text, file, row in lines:
            decoded = self.read(text, file, row)
            if self.paired and out and decoded.table and out[-1].table != decoded.table:
                out[-1] = out[-1]._replace(table=decoded.table)
            out.append(decoded)
        return out

    def read(self, text: str, file: str, row: int) -> Row:
        try:
            return self._read(text, file, row)
        except RecordError as exc:
            return failed(str(exc))
        except Exception as exc:  # one odd record must not fail the batch
            return failed(f"could not read the record: {type(exc).__name__}: {exc}")

    def _comment(self, text: str, file: str) -> bool:
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

    def _read(self, text: str, file: str, row: int) -> Row:
        pending, self.pending, self.paired = self.pending, None, False
        if self._comment(text, file):
            return skipped("comment")
        record = parse_json(text)
        if isinstance(record, dict) and all(k in record for k in _KCAT):
            return self._kcat(record)
        payload, schema = _unwrap_connect(record)
        schema_name = schema.get("name") if schema else None
        if isinstance(payload, dict) and "op" not in payload and non_row_reason(payload, schema_name) is None \
                and looks_like_key(payload, schema_name):
            key = Key(payload, schema, compact_json(payload))
            self.pending = (file, row, key)
            return skipped("key", table=name_from_topic(schema_name, self.settings), extra=[("key", key.text)])
        key = None
        if pending is not None and pending[0] == file and pending[1] == row - 1 and _same_table(pending[2], schema):
            key, self.paired = pending[2], True
        return decode_value(payload, schema, key=key, kafka=[], topic=None, settings=self.settings, parse=parse_json)

    def _kcat(self, record: Mapping[str, Any]) -> Row:
        kafka = _kafka_pairs(record)
        topic = record.get("topic") if isinstance(record.get("topic"), str) else None
        for part in ("key_error", "payload_error"):
            if record.get(part):
                raise RecordError(f"kcat could not deserialise the record: {part} '{record[part]}'")
        key = None
        raw_key = record.get("key")
        if raw_key is not None:
            try:
                key_value, key_schema = _unwrap_connect(_kcat_part(raw_key, "kcat key"))
            except RecordError:
                key_value, key_schema = None, None  # a key that is no JSON names no columns
            if isinstance(key_value, dict):
                key = Key(key_value, key_schema, compact_json(key_value))
            kafka.append(("kafka.key", raw_key if isinstance(raw_key, str) else compact_json(raw_key)))
        payload, schema = _unwrap_connect(_kcat_part(record.get("payload"), "kcat payload"))
        return decode_value(payload, schema, key=key, kafka=kafka, topic=topic, settings=self.settings, parse=parse_json)


def _lines_of(batches: Iterator[pa.RecordBatch]) -> Iterator[tuple[pa.RecordBatch, list[tuple[str, str, int]]]]:
    for batch in batches:
        values = batch.column("value").to_pylist()
        files = batch.column("_file").to_pylist()
        rows = batch.column("_row").to_pylist()
        yield batch, list(zip(values, files, rows, strict=True))


def decode_batches(batches: Iterator[pa.RecordBatch], *, settings: Settings) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: lines (``value`` + origin columns) to canonical rows (``x_*``)."""
    reader = LineReader(settings)
    for batch, lines in _lines_of(batches):
        with gc_paused():  # the collector's passes cost a third of the decoding (see gc_paused)
            out = reader.read_all(lines)
        cols = list(zip(*out, strict=True)) if out else [[] for _ in Row._fields]
        yield pa.RecordBatch.from_arrays(
            [
                batch.column("_file"), batch.column("_block"), batch.column("_row"),
                pa.array(cols[0], pa.string()), pa.array(cols[1], pa.string()), pa.array(cols[2], pa.int64()),
                pa.array(cols[3], pa.string()), pa.array(cols[4], pa.string()), pa.array(cols[5], pa.string()),
                pa.array(cols[6], pa.list_(pa.string())), pa.array(cols[7], _MAP), pa.array(cols[8], _MAP),
                pa.array(cols[9], _MAP), pa.array(cols[10], pa.string()),
            ],
            schema=pa.schema([(f.name, _arrow_type(f.dataType)) for f in PARSED_SCHEMA.fields]),
        )


def _arrow_type(dtype: T.DataType) -> pa.DataType:
    if isinstance(dtype, T.LongType):
        return pa.int64()
    if isinstance(dtype, T.ArrayType):
        return pa.list_(pa.string())
    if isinstance(dtype, T.MapType):
        return _MAP
    return pa.string()


def _json_image(pairs: Pairs | None) -> str | None:
    """An image as a JSON object, numbers as numbers (for type inference)."""
    if pairs is None:
        return None
    parts = []
    for k, v in pairs:
        value = "null" if v is None else (str(v) if isinstance(v, Num) else json.dumps(v, ensure_ascii=False))
        parts.append(f"{json.dumps(k, ensure_ascii=False)}:{value}")
    return "{" + ",".join(parts) + "}"


def variant_batches(batches: Iterator[pa.RecordBatch], *, settings: Settings) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: good rows' ``table`` and images as JSON objects."""
    reader = LineReader(settings)
    for _batch, lines in _lines_of(batches):
        rows = [r for r in reader.read_all(lines) if r.op is not None and r.error is None]
        yield pa.RecordBatch.from_pydict(
            {"table": [r.table for r in rows], "before": [_json_image(r.before) for r in rows],
             "after": [_json_image(r.after) for r in rows]},
            schema=pa.schema([("table", pa.string()), ("before", pa.string()), ("after", pa.string())]),
        )


def _types_of(text: str, settings: Settings) -> Iterator[tuple[str, str, str]]:
    """``(table, column, Spark type JSON)`` declared by one line's value schema."""
    if "schema" not in text:
        return
    try:
        record = parse_json(text)
    except RecordError:
        return
    topic = None
    if isinstance(record, dict) and all(k in record for k in _KCAT):
        topic = record.get("topic") if isinstance(record.get("topic"), str) else None
        try:
            record = _kcat_part(record.get("payload"), "kcat payload")
        except RecordError:
            return
    payload, schema = _unwrap_connect(record)
    if not schema or not isinstance(payload, dict) or not isinstance(payload.get("source"), dict):
        return
    table = envelope_table(payload["source"], schema.get("name"), topic, settings)
    if not table:
        return
    for image in ("before", "after"):
        for name, field in (image_fields(schema, image) or {}).items():
            dtype = spark_type(field)
            if dtype is not None:
                yield table, column_name(name, field), dtype.json()


def type_batches(batches: Iterator[pa.RecordBatch], *, settings: Settings) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: the distinct declared column types of the partition."""
    seen: set[tuple[str, str, str]] = set()
    for batch in batches:
        for text in batch.column("value").to_pylist():
            seen.update(_types_of(text, settings))
    rows = sorted(seen)
    yield pa.RecordBatch.from_pydict(
        {"table": [r[0] for r in rows], "column": [r[1] for r in rows], "type": [r[2] for r in rows]},
        schema=pa.schema([("table", pa.string()), ("column", pa.string()), ("type", pa.string())]),
    )


# -- staging -------------------------------------------------------------------------------------


def _blank_leading_comments(text: str) -> str:
    """``text`` with its leading ``/* */`` and ``//`` comments turned to spaces (newlines kept,
    so line numbers stay right)."""
    chars = list(text)
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        else:
            break
        for j in range(i, end):
            if chars[j] != "\n":
                chars[j] = " "
        i = end
    return "".join(chars)


def _first_record(path: str) -> str | None:
    """The first line of ``path`` that is neither blank nor a comment."""
    in_comment = False
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            stripped = line.strip()
            if in_comment:
                in_comment = "*/" not in stripped
                continue
            if not stripped or stripped.startswith(("//", "*")):
                continue
            if stripped.startswith("/*"):
                in_comment = "*/" not in stripped[2:]
                continue
            return stripped
    return None


def _is_documents(path: str) -> bool:
    """True when the first record is a JSON object spread over several lines."""
    first = _first_record(path)
    if first is None or not first.startswith("{"):
        return False
    try:
        json.loads(first)
        return False
    except ValueError:
        pass
    depth, in_str, esc = 0, False, False
    for ch in first:
        if in_str:
            esc, in_str = (False, in_str) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            in_str = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return False  # a whole (bad) record on one line
    return depth > 0


def stage(path: str, staging: str) -> str:
    """``path`` itself when it holds one record per line, else its documents staged one per line
    (leading comments dropped) with a ``.lines.json`` sidecar of their original line numbers."""
    if not _is_documents(path):
        return path
    digest = hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:16]
    out = Path(staging) / f"{Path(path).name}.{digest}.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    text = _blank_leading_comments(Path(path).read_text(encoding="utf-8"))
    lines: list[int] = []
    with open(out, "w", encoding="utf-8") as fh:
        for line, doc in split_documents(text):
            fh.write(doc.replace("\r", " ").replace("\n", " ") + "\n")
            lines.append(line)
    Path(f"{out}.lines.json").write_text(json.dumps({"source": path, "lines": lines}))
    return str(out)


# -- the decoder ---------------------------------------------------------------------------------


def canonical(parsed: DataFrame, *extra: str) -> DataFrame:
    """The decoded ``x_*`` rows (shared by debezium-json and debezium-avro) as canonical events;
    ``extra`` origin columns are kept after ``_row``."""
    op_ts = F.timestamp_micros("x_op_ts")
    idx = F.lit(0)
    event = F.col("x_op").isNotNull()
    # a schema change naming keys gets a seq too: the run's keys are the latest named
    ordered = event | (F.col("x_keys").isNotNull() & F.col("x_op_ts").isNotNull())
    seq = F.when(ordered, F.coalesce(F.col("x_seq"), default_seq(op_ts, F.col("x_pos"), idx)))
    return parsed.select(
        F.col("x_table").alias("table"),
        F.col("x_op").alias("op"),
        op_ts.alias("op_ts"),
        F.col("x_pos").alias("pos"),
        F.when(event, idx).alias("idx"),
        seq.alias("seq"),
        F.col("x_txid").alias("txid"),
        F.col("x_keys").alias("keys"),
        F.col("x_before").alias("before"),
        F.col("x_after").alias("after"),
        F.col("x_source").alias("source"),
        "_file", "_block", "_row",
        F.col("x_error").alias("_error"),
        *extra,
    )


class DebeziumJsonDecoder(Decoder):
    """Debezium JSON change events (Connect JSON with or without schema, kcat dumps) to canonical events."""

    name: ClassVar[str] = "debezium-json"
    TRANSACTION_MARKERS: ClassVar[bool] = True
    LINES: ClassVar[bool] = True
    OPTIONS: ClassVar[dict[str, str]] = {
        "sequenceBy": "auto",
        "tableName": "auto",
        "unavailable.value.placeholder": UNAVAILABLE,
        "topic.prefix": "",
    }
    IGNORED_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {
            "schemas.enable", "key.converter.schemas.enable", "value.converter.schemas.enable",
            "decimal.handling.mode", "time.precision.mode", "binary.handling.mode", "tombstones.on.delete",
            "provide.transaction.metadata", "include.schema.changes", "skipped.operations",
            "field.name.adjustment.mode", "schema.name.adjustment.mode", "format",
        }
    )

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        o = self.options
        self.settings = Settings(
            placeholders=placeholder_forms([o["unavailable.value.placeholder"]]),
            sequence_by=self._list("sequenceBy"),
            table_name=self._list("tableName"),
            topic_prefix=o["topic.prefix"].strip() or None,
        )

    def _list(self, option: str) -> tuple[str, ...]:
        value = self.options[option].strip()
        if value.lower() == "auto":
            return ()
        parts = tuple(p.strip() for p in value.split(","))
        if not all(parts):
            raise ConfigError(f"{self.name}: option {option}={value!r} has an empty name")
        if option == "sequenceBy" and "op_ts" in parts and parts != ("op_ts",):
            raise ConfigError(f"{self.name}: sequenceBy=op_ts stands alone (op_ts, pos, index); got {value!r}")
        if option == "tableName":
            parts = tuple(p for part in parts for p in part.split("."))
        return parts

    def lines(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """Non-blank lines of the (staged) inputs with ``_file``, ``_block``, ``_row`` as
        :func:`~lakecdc.decoders._records.read_text` gives them (so quarantine lines match)."""
        paths = [stage(f, staging) for f in files]
        names = {Path(p).resolve().as_uri(): p for p in paths}
        mapping = F.create_map(*[F.lit(x) for kv in names.items() for x in kv])
        uri = F.input_file_name()
        return spark.read.text(paths).where(F.col("value").rlike("[^ \\t\\r\\n]")).select(
            "value",
            F.coalesce(mapping[uri], uri).alias("_file"),
            F.input_file_block_start().alias("_block"),
            F.monotonically_increasing_id().alias("_row"),
        )

    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        body = functools.partial(decode_batches, settings=self.settings)
        p = self.lines(spark, files, staging=staging).mapInArrow(body, PARSED_SCHEMA)
        return canonical(p)

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, the Spark type of each column the messages' Kafka Connect schemas declare.

        A column declared with different types across messages gets the type that holds them all
        (string when none does).
        """
        from lakecdc.columns import widest

        body = functools.partial(type_batches, settings=self.settings)
        rows = self.lines(spark, files, staging=staging).select("value").mapInArrow(body, _TYPES_SCHEMA).distinct().collect()
        found: dict[str, dict[str, list[T.DataType]]] = {}
        for r in rows:
            found.setdefault(r["table"], {}).setdefault(r["column"], []).append(
                T._parse_datatype_json_string(r["type"])  # noqa: SLF001 (pyspark's own parser)
            )
        return {t: {c: widest(ts) for c, ts in cols.items()} for t, cols in found.items()}

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before``, ``after`` as ``map<string, variant>`` (the decoded values' JSON
        types) for the columns no schema types."""
        body = functools.partial(variant_batches, settings=self.settings)
        vmap = T.MapType(T.StringType(), T.VariantType())
        df = self.lines(spark, files, staging=staging).mapInArrow(body, _VARIANT_SCHEMA)
        return df.select("table", F.from_json("before", vmap).alias("before"), F.from_json("after", vmap).alias("after"))
