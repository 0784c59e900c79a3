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
* kcat records whose key and value **kcat's own Avro deserialiser** rendered (``kcat -s avro -r
  <registry> -J``: Avro's JSON encoding, unions wrapped as ``{"<type>": value}``, with
  ``key_schema_id``/``value_schema_id``): read through the writer schemas of the
  ``schemaDirectory`` option exactly as ``debezium-avro`` reads the binary messages, or without
  it by their shape (a bytes value, maybe a Decimal, is then a per-record error): see
  :mod:`lakecdc.decode.debezium.avro_json`;
* key and value records on alternating lines (a sink that writes both, as in the samples): a
  record that is a key (schema named ``*.Key``, or without schema a flat object that is no
  envelope) gives the primary-key columns of the **value on the next line** of the same file (when
  both have schemas, only if they name the same table). The key line itself is a skipped record
  (``skipped`` = ``key``), counted like tombstones under the value's table;
* pretty-printed or concatenated JSON documents (a schema-change event printed by a tool): staged
  one document per line first, with a map back to the original line numbers.

Lines before the first record that are comments (a ``/* ... */`` licence block, ``//`` lines),
and comment lines between records, are skipped records too (``skipped`` = ``comment``).

Everything else, envelope to canonical event, is in :mod:`lakecdc.decode.debezium.envelope`: ops
``c``/``u``/``d``/``r``/``t`` to ``I``/``U``/``D``/``R``/``T``; tombstones, heartbeats,
transaction markers and schema changes skipped (``op`` and ``_error`` NULL, ``table`` NULL,
``source['skipped']`` the reason); table names per connector; ordering per connector; values as
exact text from the Kafka Connect logical types; the unavailable-value placeholder as a missing
column.

Records are parsed in the executors (``mapInArrow``, :mod:`lakecdc.decode.debezium.lines`),
numbers kept as their exact text, with msgspec and each distinct Connect schema text parsed once
(:mod:`lakecdc.decode.jsontext`, :mod:`lakecdc.decode.kafka.connect`). A record
that is not valid JSON, has an unknown ``op``, lacks the image its op needs, or a value that does
not fit its declared type is quarantined with the reason; the rest of the file applies.

**Options**: ``sequenceBy`` (``auto``: the connector's order; ``op_ts``; or a comma list of source
map names such as ``source.commit_scn,source.scn,source.ssn``), ``tableName`` (``auto``: the
connector's naming; or the ``source`` parts to join, e.g. ``db.schema.table``),
``unavailable.value.placeholder`` (Debezium's property; default ``__debezium_unavailable_value``)
``reader`` (``spark``, the default: files of bare envelopes decoded by Spark's JSON
source in SQL, about twice as fast, see :mod:`lakecdc.decode.debezium.sql`; ``python``: every
line by the Python reader), ``topic.prefix`` (Debezium's property: stripped from topic and schema names when the source
block names no table) and ``schemaDirectory`` (Avro writer schemas by id, as ``debezium-avro``
reads them: for kcat's Avro JSON). Debezium converter and connector properties that change nothing here are
accepted and ignored (``schemas.enable``, ``decimal.handling.mode``, ``time.precision.mode``,
``binary.handling.mode``, ``tombstones.on.delete``, ...): what they change is read per record.

**Types** (:meth:`DebeziumJsonDecoder.column_types`): from the value schema's ``after``/``before``
struct when messages carry one (see :func:`lakecdc.decode.kafka.connect_values.spark_type`: every
column the schema declares is a column of the table, even while its values are all NULL); without a
schema the pipeline infers them from the JSON values (integers: bigint; numbers with a fraction:
decimal; booleans; everything else string), so use ``decimal.handling.mode=string`` or a
schema for exact decimals (a schemaless ``precise`` decimal is base64 text and stays a string).
Columns only a schema-change record names (``tableChanges``) take the DDL's type: see
:mod:`lakecdc.decode.debezium.ddl`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.avro.registry import Registry, load_registry
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.debezium.connect_sql import connect_file
from lakecdc.decode.debezium.connect_sql import decode as decode_connect
from lakecdc.decode.debezium.ddl import SCHEMALESS, merge_declared
from lakecdc.decode.debezium.envelope import image_readers, non_row_reason, parse_json, schema_change_types
from lakecdc.decode.debezium.lines import LineReader, decode_batches, lines_of
from lakecdc.decode.debezium.rules import envelope_table
from lakecdc.decode.debezium.settings import (
    IGNORED_OPTIONS,
    IMAGES,
    OP_TABLE,
    ORDERING,
    SETTINGS,
    Settings,
    settings_from_options,
)
from lakecdc.decode.debezium.sql import decode as decode_in_spark
from lakecdc.decode.debezium.sql import shape_of, source_block, spark_file
from lakecdc.decode.event import Parts
from lakecdc.decode.files.lines import read_lines
from lakecdc.decode.files.staging import first_record, is_documents, json_documents, stage
from lakecdc.decode.jsontext import json_image
from lakecdc.decode.kafka.connect import ConnectSplitter, connect_prefixes, unwrap_connect
from lakecdc.decode.kafka.connect_values import column_name, image_fields, spark_type
from lakecdc.decode.kafka.records import KCAT_MEMBERS, TYPES_SCHEMA, VARIANT_SCHEMA, kcat_part
from lakecdc.decode.rows import ROW_SCHEMA, RecordError, rows_parts
from lakecdc.decode.spec import Option, VendorSpec
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

def variant_batches(batches: Iterator[pa.RecordBatch], *, settings: Settings,
                    registry: Registry | None = None, prefixes: Sequence[str] = ()) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: good rows' ``table`` and images as JSON objects."""
    reader = LineReader(settings, registry, prefixes)
    for _batch, lines in lines_of(batches):
        rows = [r for r in reader.read_all(lines) if r.op is not None and r.error is None]
        yield pa.RecordBatch.from_pydict(
            {"table": [r.table for r in rows], "before": [json_image(r.before) for r in rows],
             "after": [json_image(r.after) for r in rows]},
            schema=pa.schema([("table", pa.string()), ("before", pa.string()), ("after", pa.string())]),
        )


#: A ``schema`` member and the first character of its value (``\\"`` inside an escaped payload).
_SCHEMA_MEMBER = re.compile(r'schema\\?"\s*:\s*(\\?.)')


def _may_declare(text: str) -> bool:
    """The line may declare types: a schema-change record, or a ``schema`` member whose value is
    no string (a bare envelope's ``source`` has ``"schema": "INVENTORY"``: not a Connect schema)."""
    if "tableChanges" in text or "historyRecord" in text:
        return True
    return any(m.group(1) not in ('"', '\\"') for m in _SCHEMA_MEMBER.finditer(text))


def _types_of(text: str, settings: Settings, *, find_schemaless: bool = False) -> Iterator[tuple[str, str, str]]:
    """``(table, column, Spark type JSON)`` declared by one line's value schema, or by its
    schema-change record (:func:`~lakecdc.decode.debezium.envelope.schema_change_types`); with
    ``find_schemaless``, ``("", "", SCHEMALESS)`` for a row message without schema."""
    if not find_schemaless and not _may_declare(text):
        return
    try:
        record = parse_json(text)
    except RecordError:
        return
    topic = None
    if isinstance(record, dict) and all(k in record for k in KCAT_MEMBERS):
        topic = record.get("topic") if isinstance(record.get("topic"), str) else None
        try:
            record = kcat_part(record.get("payload"), "kcat payload")
        except RecordError:
            return
    payload, schema = unwrap_connect(record)
    yield from _declared(payload, schema, topic, settings)


def _declared(payload: Any, schema: Mapping[str, Any] | None, topic: str | None,
              settings: Settings) -> Iterator[tuple[str, str, str]]:
    """:func:`_types_of` of a record's parsed ``payload`` and ``schema``."""
    if not isinstance(payload, dict):
        return
    if "op" not in payload and non_row_reason(payload, schema.get("name") if schema else None) == "schema change":
        yield from schema_change_types(payload, settings)
        return
    if not isinstance(payload.get("source"), dict):
        return
    if not schema:
        yield "", "", SCHEMALESS
        return
    table = envelope_table(payload["source"], schema.get("name"), topic, settings)
    if not table:
        return
    for image in ("before", "after"):
        for name, field in (image_fields(schema, image) or {}).items():
            dtype = spark_type(field)
            if dtype is not None:
                yield table, column_name(name, field), dtype.json()


class _HeadTypes:
    """:func:`_types_of` for lines whose schema Spark cut off (``_head``): each line's payload is
    parsed (msgspec; a fraction of the line), its schema once per head, and a row message's
    types once per head and table."""

    def __init__(self, settings: Settings, prefixes: Sequence[str]) -> None:
        self.settings = settings
        self.prefixes = prefixes
        self.splitter = ConnectSplitter(functools.partial(image_readers, settings=settings))
        self.schemas: dict[int, Any] = {}
        self.rows: dict[tuple[int, str | None], list[tuple[str, str, str]]] = {}

    def types(self, head: int, rest: str) -> Iterable[tuple[str, str, str]] | None:
        """The line's declared types; None when it must be read whole (:func:`_types_of`)."""
        prefix = self.prefixes[head]
        split = self.splitter.split_cut(prefix, rest)
        if split is None:
            return None
        payload = split[0]
        if head not in self.schemas:
            record = parse_json(prefix + "null}")  # the schema as _types_of parses it
            self.schemas[head] = unwrap_connect(record)[1]
        schema = self.schemas[head]
        source = payload.get("source") if isinstance(payload, dict) else None
        if not isinstance(source, dict) or "op" not in payload or not schema:  # (not the common row)
            return list(_declared(payload, schema, None, self.settings))
        key = (head, envelope_table(source, schema.get("name"), None, self.settings))
        if key not in self.rows:
            self.rows[key] = list(_declared(payload, schema, None, self.settings))
        return self.rows[key]


def type_batches(batches: Iterator[pa.RecordBatch], *, settings: Settings,
                 prefixes: Sequence[str] = ()) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: the distinct declared column types of the partition (and whether it
    holds row messages without schema: looked for until one is found)."""
    seen: set[tuple[str, str, str]] = set()
    schemaless = False
    heads = _HeadTypes(settings, prefixes)
    for _batch, lines in lines_of(batches):
        for text, _file, _row, head in lines:
            found_all = heads.types(head, text) if head is not None else None
            if found_all is None:
                text = text if head is None else prefixes[head] + text
                found_all = _types_of(text, settings, find_schemaless=not schemaless)
            for found in found_all:
                schemaless = schemaless or found[2] == SCHEMALESS
                seen.add(found)
    rows = sorted(seen)
    yield pa.RecordBatch.from_pydict(
        {"table": [r[0] for r in rows], "column": [r[1] for r in rows], "type": [r[2] for r in rows]},
        schema=pa.schema([("table", pa.string()), ("column", pa.string()), ("type", pa.string())]),
    )


# -- staging -------------------------------------------------------------------------------------


def stage_file(path: str, staging: str) -> str:
    """``path`` itself when it holds one record per line, else its documents staged one per line
    (leading comments dropped) with a ``.lines.json`` sidecar of their original line numbers."""
    return stage(path, staging, json_documents(comments=True)) if is_documents(path) else path


# -- the decoder ---------------------------------------------------------------------------------


DEBEZIUM_JSON = VendorSpec(
    name="debezium-json", ops=OP_TABLE, images=IMAGES, ordering=ORDERING,
    options=(*SETTINGS, Option("schemaDirectory", ""), Option("reader", "spark")),
    ignored=IGNORED_OPTIONS, lines=True, transaction_markers=True,
)


class DebeziumJsonDecoder(Decoder):
    """Debezium JSON change events (Connect JSON with or without schema, kcat dumps) to canonical events."""

    KAFKA_RECORDS = "kcat-text"

    spec = DEBEZIUM_JSON

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        self.settings = settings_from_options(self.name, self.options)
        if self.options["reader"] not in ("spark", "python"):
            raise ConfigError(f"{self.name}: option reader={self.options['reader']!r}: expected python or spark")
        self._registry: Registry | None = None

    def registry(self) -> Registry | None:
        """The ``schemaDirectory``'s Avro writer schemas (read once, as ``debezium-avro`` reads
        them), for kcat records rendered by kcat's Avro deserialiser; None when not given."""
        path = self.options["schemaDirectory"].strip()
        if self._registry is None and path:
            self._registry = load_registry(path)
        return self._registry

    def lines(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> tuple[DataFrame, list[str]]:
        """Non-blank lines of the (staged) inputs with ``_file``, ``_block``, ``_row`` as
        :func:`~lakecdc.decode.files.lines.read_text` gives them (so quarantine lines match), and
        ``_head``: the index of the Connect schema prefix cut off ``value``, in the list returned
        beside the lines (see :func:`~lakecdc.decode.kafka.connect.connect_prefixes`)."""
        paths = [stage_file(f, staging) for f in files]
        prefixes = connect_prefixes(first_record(p) for p in paths)
        return read_lines(spark, paths, prefixes), prefixes

    _python_files = False

    def rows_in_python(self) -> bool:
        """Whether the last :meth:`read` sent some file to the Python reader (a file of Connect
        pairs with schema, kcat records, key and value lines, ``reader=python``)."""
        return self._python_files

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """The ``x_*`` rows of the inputs, each file by the route its first record calls for: bare
        envelopes in SQL (:mod:`~lakecdc.decode.debezium.sql`), Connect pairs with schema in SQL
        over the cut payload (:mod:`~lakecdc.decode.debezium.connect_sql`), the rest by the
        Python reader (:mod:`~lakecdc.decode.debezium.lines`)."""
        spark = ctx.spark
        paths = [stage_file(f, ctx.staging) for f in inputs]
        firsts = {p: first_record(p) for p in paths} if self.options["reader"] == "spark" else {}
        by_spark = [p for p, first in firsts.items() if spark_file(first)]
        parts = []
        if by_spark:
            parts.append(decode_in_spark(spark, by_spark, self.settings, self.registry(), staging=ctx.staging,
                                         shape=shape_of([source_block(firsts[p]) for p in by_spark])))
        # Connect pairs with schema whose first record is an envelope of a schema SQL reads: the
        # payloads decoded in SQL
        pairs = {p: env for p in paths if p not in by_spark and (env := connect_file(firsts.get(p))) is not None}
        if pairs:
            prefixes = connect_prefixes(firsts[p] for p in pairs)
            shape = shape_of([env["source"] for env in pairs.values()])
            parts.append(decode_connect(read_lines(spark, list(pairs), prefixes), prefixes, self.settings,
                                        self.registry(), shape=shape))
        rest = [p for p in paths if p not in by_spark and p not in pairs]
        self._python_files = bool(rest)
        if rest or not parts:
            prefixes = connect_prefixes(firsts[p] if p in firsts else first_record(p) for p in rest)
            body = functools.partial(decode_batches, settings=self.settings, registry=self.registry(), prefixes=prefixes)
            parts.append(read_lines(spark, rest, prefixes).mapInArrow(body, ROW_SCHEMA))
        return functools.reduce(lambda a, b: a.unionByName(b), parts)

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        """The rows' parts (:func:`~lakecdc.decode.rows.rows_parts`)."""
        return rows_parts(parsed)

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, the Spark type of each column the messages' Kafka Connect schemas declare
        (a column declared with different types across messages gets the type that holds them
        all, string when none does), and of the columns only schema-change records name (the
        latest one's type; see :mod:`lakecdc.decode.debezium.ddl`)."""
        lines, prefixes = self.lines(spark, files, staging=staging)
        body = functools.partial(type_batches, settings=self.settings, prefixes=prefixes)
        rows = lines.mapInArrow(body, TYPES_SCHEMA).distinct().collect()
        return merge_declared(rows)

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before``, ``after`` as ``map<string, variant>`` (the decoded values' JSON
        types) for the columns no schema types."""
        lines, prefixes = self.lines(spark, files, staging=staging)
        body = functools.partial(variant_batches, settings=self.settings, registry=self.registry(), prefixes=prefixes)
        vmap = "map<string, variant>"
        df = lines.mapInArrow(body, VARIANT_SCHEMA)
        return df.select("table", F.from_json("before", vmap).alias("before"), F.from_json("after", vmap).alias("after"))


__all__ = ["DEBEZIUM_JSON", "DebeziumJsonDecoder", "stage_file",
           "type_batches", "variant_batches"]
