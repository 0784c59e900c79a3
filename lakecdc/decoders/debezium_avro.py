"""Debezium change events as Avro (``--format debezium-avro``): Confluent's Avro converter and sinks' OCF files.

**What Debezium writes.** With ``value.converter=io.confluent.connect.avro.AvroConverter`` each
Kafka record value (and key) is a message in the *Confluent wire format*::

    0x00 | schema id (4 bytes, big-endian) | the datum in Avro's binary encoding (no schema)

The id names the writer schema in the schema registry. That schema is what Confluent's
``AvroData`` makes of the Kafka Connect schema ``debezium-json`` shows with ``schemas.enable``:
the envelope is a record ``Envelope`` in namespace ``<topic.prefix>.<schema>.<table>`` with
``before``/``after`` (``["null", Value]``, the second a reference to the first's named record),
``source`` (``io.debezium.connector.<connector>.Source``), ``op``, ``ts_ms`` and ``transaction``;
the key is a record ``Key`` in the same namespace. Kafka Connect's types survive as Avro
properties: ``int8``/``int16`` are Avro ``int`` with ``"connect.type": "int8"``; a logical type is
``"connect.name"`` (``io.debezium.time.MicroTimestamp``, ``org.apache.kafka.connect.data.Decimal``,
...) with ``"connect.parameters"`` (a decimal's ``scale`` and ``connect.decimal.precision``), and
Connect's own Decimal/Date/Time/Timestamp also carry Avro's ``logicalType``. This decoder turns
each writer schema back into that Kafka Connect schema (:func:`connect_schema`; a plain Avro
``logicalType`` without ``connect.name`` maps to the Connect type that means the same: ``decimal``
to Decimal with the Avro precision, ``date``, ``time-millis``/``-micros``,
``timestamp-millis``/``-micros``/``-nanos``), decodes the datum with fastavro *without* logical
type conversion (raw ints and bytes), and hands both to :mod:`lakecdc.decoders._debezium`, the
code ``debezium-json`` uses: so an event gives the same canonical row whichever converter wrote it
(ops ``c``/``u``/``d``/``r``/``t``; tombstones, heartbeats, transaction markers and schema
changes skipped and counted; per-connector table names and ordering; values as exact text:
Decimal bytes with their scale as decimal digits, ``io.debezium.time.*`` by their ``connect.name``
as ISO text; the unavailable-value placeholder as a missing column). Avro unions are read as
their value. A ``float`` column is written as the shortest text of its 32-bit value (``0.1``),
a ``double`` as Python's shortest repr (``NaN``, ``Infinity`` spelt out).

**Avro names are sanitised** (``schema.name.adjustment.mode=avro``, seeds 001/004: characters
outside ``[A-Za-z0-9_]`` become ``_``, so table ``order-items`` gives record
``server1.inventory.order_items.Envelope``). The table name comes from the ``source`` block
(``db``/``schema``/``table``, the source's own names), which wins; the record name is the
fallback only when ``source`` names no table. Column names are the field names (a field with the
``__debezium.source.column.name`` parameter takes that name).

**Inputs**, told apart per file (``framing=auto``):

* **Object Container Files** (``Obj\\x01``), as sinks write them (Confluent's S3/HDFS sinks with
  ``AvroFormat``): the header holds the writer schema; each record is an envelope (a nullable
  one: ``null`` is a tombstone). Large files are split at blocks and read in parallel. When a
  sink stored the keys too (``store.kafka.keys=true``: ``<name>.keys.avro`` beside
  ``<name>.avro``, one key record per value record), the keys give the primary-key columns;
  ``*.keys.avro`` and ``*.headers.avro`` are not read as values.
* **Length-prefixed wire-format messages** (each preceded by its length, 4 bytes big-endian, as
  a topic dump writes them). A zero-length message is a null value (a tombstone). A message whose
  schema is a record named ``*.Key`` is a record key: it gives the primary-key columns of the
  message right after it (key and value dumped alternately), and is itself a skipped record
  (``key``) counted under the value's table. Large files are split at message boundaries (never
  between a key and its value).
* **kcat dumps** (``kcat -J`` style JSON lines, a file starting with ``{``): ``topic``,
  ``partition``, ``offset``, ``ts``, ``tstype``, ``broker``, ``headers`` kept in ``source`` as
  ``kafka.<name>``; ``key`` and ``payload`` are the wire-format messages **base64-encoded**
  (``null``: no key / a tombstone). A key that is no wire-format message names no columns (kept as
  ``kafka.key``). JSON produced by kcat's own Avro deserialiser (``-s avro``) is not read.
* **kcat -K dumps** (``framing=kcat-K``, or ``auto`` with ``keySeparator`` given): what
  ``kcat -C -K<sep> [-D<delim>] [-Z]`` writes, each record its key's bytes, the separator, the
  value's bytes and the delimiter, nothing escaped. Options ``keySeparator`` (kcat's ``-K``;
  required) and ``messageDelimiter`` (``-D``, default ``\\n``), with kcat's escapes (``\\t``,
  ``\\n``, ``\\xNN``). The binary values may hold both, so records are not cut at them: each
  value (and a wire-format key) is read with its schema, and the record ends where the message
  ends with the delimiter after it. Another key is the text before the first separator (kept as
  ``kafka.key``); empty or ``NULL`` is no key, an empty or ``NULL`` value a tombstone. A record
  that does not read so cannot tell where it ends: it is quarantined from its byte offset up to
  the next record that reads (:func:`~lakecdc.decode.kafka.records.kcat_kv_messages`). One
  split per file.
* ``framing=single``: each (non-OCF) file is one wire-format message.

**Schemas** (option ``schemaDirectory``, needed for wire-format messages, a directory or one JSON
file): ``<id>.avsc`` files and schema-registry exports (``/subjects/<subject>/versions/<n>``
objects, lists of them, ``/schemas/ids/<id>``), schema ``references`` resolved by subject and
version from the same export: see :mod:`lakecdc.decode.avro.registry`. The subject
(``<topic>-value``) names the topic for messages that name no table otherwise. OCF files need no
directory. How files are cut and framed: :mod:`lakecdc.decode.kafka.records`.

**Options**: as ``debezium-json`` (``sequenceBy``, ``tableName``,
``unavailable.value.placeholder``, ``topic.prefix``, and the Debezium properties it ignores),
plus ``schemaDirectory``, ``framing`` (``auto``, ``length-prefixed``, ``single``, ``kcat``,
``kcat-K``), ``keySeparator`` and ``messageDelimiter`` (kcat -K dumps), ``maxBlockBytes`` and
``maxBlockRecords`` (an OCF block's limits: :class:`~lakecdc.decode.avro.containers.BlockLimits`).
Converter properties (``schema.registry.url``, ``key.converter``, ``value.converter``,
``auto.register.schemas``, ``use.latest.version``, ``connect.meta.data``,
``enhanced.avro.schema.support``, ``scrub.invalid.names``, ...) are accepted and ignored.

**Types** (:meth:`DebeziumAvroDecoder.column_types`): from the writer schemas' ``after``/``before``
records, with the Kafka Connect types of :func:`lakecdc.decode.kafka.connect_values.spark_type`
(Decimal: ``decimal(p, s)``; MicroTimestamp: ``timestamp``; ...), per table as the records name
it; columns only a schema-change record names (``tableChanges``) take the DDL's type (see
:mod:`lakecdc.decoders._debezium_ddl`). ``VariableScaleDecimal`` columns are inferred from their
values (:meth:`variant_images`), and are strings while their values are all NULL.

**Bad input** does not stop the batch: a message with the wrong magic byte, an unknown schema
id, too few bytes (a cut length prefix, a short header), bytes the schema does not read exactly,
a corrupt OCF block, or an envelope ``debezium-json`` would refuse, gets ``_error`` and goes to the
quarantine with its file, byte ``offset`` (of its length prefix; of the OCF block; of the kcat
line or kcat -K record) and ``raw`` (the message's bytes, base64; a kcat line as its text); the rest applies.
Decoding runs in the executors (``mapInArrow``, fastavro).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from fastavro import parse_schema, schemaless_reader
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.avro.connect import connect_schema, without_logical_types
from lakecdc.decode.avro.containers import (
    LIMIT_OPTIONS,
    BlockLimits,
    is_ocf,
    ocf_records,
    plan_ocf_splits,
    read_ocf_header,
)
from lakecdc.decode.avro.registry import Registry, load_registry, pairs_as_key
from lakecdc.decode.avro.schemas import Mismatch, read_at
from lakecdc.decode.avro.text import text_converter
from lakecdc.decode.base import Decoder
from lakecdc.decode.files.kcat import KCAT_KV_OPTIONS, kcat_kv_framing
from lakecdc.decode.files.splits import Split, kind_of, split_bytes, splits_frame
from lakecdc.decode.jsontext import Num, compact_json
from lakecdc.decode.kafka.connect_values import column_name, image_fields, spark_type
from lakecdc.decode.kafka.dumps import WIRE_HEADER, length_prefixed_splits
from lakecdc.decode.kafka.records import (
    DECODED_SCHEMA,
    SIDECARS,
    TYPES_SCHEMA,
    VARIANT_SCHEMA,
    Message,
    Out,
    decode_batches,
    read_messages,
    sidecar_of,
    type_batches,
    variant_batches,
)
from lakecdc.decode.rows import Pairs, RecordError
from lakecdc.decoders._debezium import (
    SETTINGS_OPTIONS,
    Images,
    Key,
    Row,
    Settings,
    decode_value,
    envelope_table,
    failed,
    image_readers,
    name_from_topic,
    non_row_reason,
    schema_change_types,
    settings_from_options,
    skipped,
)
from lakecdc.decoders._debezium_ddl import merge_declared
from lakecdc.decoders._debezium_lines import parse_json, same_table
from lakecdc.decoders.debezium_json import DebeziumJsonDecoder, canonical
from lakecdc.errors import ConfigError
from lakecdc.spark.compat import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FRAMINGS = ("auto", "length-prefixed", "single", "kcat", "kcat-k")



@dataclass(frozen=True)
class Plan:
    """How the records of one writer schema are read."""

    label: str  # "schema id 42 (subject ...)", "the header of x.avro": for messages
    parsed: Any  # fastavro's parsed schema, logical types removed
    connect: dict[str, Any]
    name: str | None  # the record's Connect (else Avro full) name
    role: str  # "value", "key" (pairs with the next value) or "other-key"
    floats: tuple[tuple[str, str, Callable[[float], str | None]], ...]  # (image, column, text)
    images: Images  # the before/after readers, made once
    topic: str | None = None

    @classmethod
    def of(cls, schema: Any, label: str, settings: Settings, topic: str | None = None) -> Plan:
        connect = connect_schema(schema)
        name = connect.get("name") if connect.get("type") == "struct" else None
        role = "value"
        if isinstance(name, str) and name.endswith("Key") and not any(
                f.get("field") == "op" for f in connect.get("fields") or ()):
            role = "key" if pairs_as_key(name) else "other-key"
        floats = []
        for image in ("before", "after"):
            for column, f in (image_fields(connect, image) or {}).items():
                if f.get("type") in ("float32", "float64") and not f.get("name"):
                    floats.append((image, column, text_converter("float" if f["type"] == "float32" else "double")))
        parsed = parse_schema(without_logical_types(schema))
        images = image_readers(connect, settings, ordered=True)
        return cls(label, parsed, connect, name, role, tuple(floats), images, topic)

    def adapt(self, record: Any) -> Any:
        """Float columns as exact number text (the rest :func:`column_text` reads as it is)."""
        if self.floats and isinstance(record, dict):
            for image, column, text in self.floats:
                values = record.get(image)
                if isinstance(values, dict) and isinstance(values.get(column), float):
                    values[column] = Num(text(values[column]))
        return record

    def declared(self, table: str) -> Iterator[tuple[str, str, str]]:
        """``(table, column, Spark type JSON)`` of the envelope's image columns."""
        for image in ("before", "after"):
            for name, f in (image_fields(self.connect, image) or {}).items():
                dtype = spark_type(f)
                if dtype is not None:
                    yield table, column_name(name, f), dtype.json()


# -- reading in the executors --------------------------------------------------------------------


class _Bad(RecordError):
    """A message that cannot be decoded, with the table its schema names (when it names one)."""

    def __init__(self, reason: str, table: str | None = None) -> None:
        super().__init__(reason)
        self.table = table

@dataclass
class Reader:
    """Decodes :class:`Split` s into canonical rows (runs in the executors)."""

    settings: Settings
    registry: Registry | None
    _plans: dict[Any, Plan] = field(default_factory=dict, repr=False)
    #: Avro-sanitised table names (from record names and topics) -> the source block's names
    _tables: dict[str, str] = field(default_factory=dict, repr=False)
    _seen: set[tuple[str | None, str | None, str]] = field(default_factory=set, repr=False)

    # -- schemas
    def by_id(self, schema_id: int) -> Plan:
        plan = self._plans.get(schema_id)
        if plan is None:
            reg = self.registry
            if reg is None or schema_id not in reg.schemas:
                raise _Bad(reg.unknown(schema_id) if reg else f"schema id {schema_id}: no schemaDirectory given")
            plan = self._plans[schema_id] = Plan.of(reg.schemas[schema_id], reg.label(schema_id), self.settings,
                                                     reg.topic(schema_id))
        return plan

    def by_schema(self, key: Any, schema: Any, label: str) -> Plan:
        if key not in self._plans:
            self._plans[key] = Plan.of(schema, label, self.settings)
        return self._plans[key]

    def message(self, data: bytes) -> tuple[Plan, Any]:
        """A wire-format message's schema and datum; :class:`_Bad` when it cannot be read."""
        n = len(data)
        if data[0] != 0:
            raise _Bad(f"wrong magic byte 0x{data[0]:02x}: a Confluent wire-format message starts with 0x00, "
                       "then the 4-byte schema id")
        if n < WIRE_HEADER:
            raise _Bad(f"truncated: {n} byte(s), a Confluent wire-format message has at least {WIRE_HEADER} "
                       "(magic byte and schema id)")
        plan = self.by_id(int.from_bytes(data[1:WIRE_HEADER], "big"))
        try:
            value, end = read_at(data, WIRE_HEADER, plan.parsed)
        except Mismatch as exc:
            raise _Bad(f"{plan.label} does not read the message: {exc}", self._hint(plan)) from None
        if end != n:
            raise _Bad(f"{plan.label} reads {end - WIRE_HEADER} of the message's {n - WIRE_HEADER} body bytes",
                       self._hint(plan))
        return plan, value

    def _hint(self, plan: Plan) -> str | None:
        return self.source_name(name_from_topic(plan.name, self.settings) or name_from_topic(plan.topic, self.settings))

    def source_name(self, table: str | None) -> str | None:
        """The source's own name of a table named after a (sanitised) record name or topic, as
        the envelopes read so far name it."""
        return self._tables.get(table, table) if table else table

    def _learn(self, plan: Plan, topic: str | None, row: Row) -> Row:
        """Remember the source's name of the envelope's table; name a skipped row by it."""
        if row.op is not None and row.table:
            seen = (plan.name, topic, row.table)
            if seen not in self._seen:
                self._seen.add(seen)
                for name in (plan.name, topic or plan.topic):
                    hint = name_from_topic(name, self.settings)
                    if hint and hint != row.table:
                        self._tables[hint] = row.table
        elif row.table:
            row = row._replace(table=self.source_name(row.table))
        return row

    def key_of(self, data: bytes | None) -> Key | None:
        """The key a kcat record's key bytes give (None when they are no wire-format key)."""
        if not data:
            return None
        try:
            plan, value = self.message(data)
        except RecordError:
            return None
        return Key(value, plan.connect, compact_json(value)) if isinstance(value, dict) and plan.role != "value" else None

    def table_of(self, plan: Plan, value: Any, topic: str | None) -> str | None:
        """The table an envelope record names (None for other records)."""
        if plan.role != "value" or not isinstance(value, dict) or "op" not in value:
            return None
        source = value.get("source")
        return envelope_table(source, plan.name, topic or plan.topic, self.settings) if isinstance(source, dict) else None

    # -- records to rows
    def value_row(self, plan: Plan, value: Any, key: Key | None, kafka: Pairs, topic: str | None) -> Row:
        try:
            row = decode_value(plan.adapt(value), plan.connect, key=key, kafka=kafka, topic=topic or plan.topic,
                               settings=self.settings, parse=parse_json, images=plan.images)
            return self._learn(plan, topic, row)
        except RecordError as exc:
            return failed(str(exc))
        except Exception as exc:  # one odd record must not fail the batch
            return failed(f"could not read the record: {type(exc).__name__}: {exc}")

    def rows(self, split: Split) -> Iterator[Out]:
        if split.kind == "bad":
            with open(split.path, "rb") as fh:
                yield Out(0, 0, failed(split.note or "unreadable file"), fh.read(1 << 16))
        elif split.kind == "ocf":
            yield from self._ocf_rows(split)
        else:
            yield from self._message_rows(split)

    def _message_rows(self, split: Split) -> Iterator[Out]:
        held: tuple[Out, Key] | None = None  # a key message, out when the next message is read
        for m in self.messages(split):
            pending, held = held, None
            out, key_row = self._message_row(m, pending[1] if pending else None)
            if pending is not None:
                first = pending[0]
                if key_row is True and out.value.table:  # counted under its value's table
                    first = first._replace(value=first.value._replace(table=out.value.table))
                yield first
            if isinstance(key_row, Key):
                held = (out, key_row)
            else:
                yield out
        if held is not None:
            yield held[0]

    def _message_row(self, m: Message, pending: Key | None) -> tuple[Out, Key | bool | None]:
        """The row of one message, and: the :class:`Key` it is (held for the next message), or
        whether it took ``pending``."""
        if m.error is not None:
            return Out(m.row, m.offset, failed(m.error), m.raw), None
        kafka = list(m.kafka or [])
        key = self.key_of(m.key) if m.key is not None else None
        if not m.data:
            if key is None and pending is not None:
                key = pending
            value = decode_value(None, None, key=key, kafka=kafka, topic=m.topic, settings=self.settings, parse=parse_json)
            value = value._replace(table=self.source_name(value.table))
            return Out(m.row, m.offset, value, m.raw), pending is not None and key is pending
        try:
            plan, record = self.message(m.data)
        except _Bad as bad:
            return Out(m.row, m.offset, failed(self._where(m, str(bad)), table=bad.table), m.raw), None
        kafka.append(("avro.schema_id", str(int.from_bytes(m.data[1:WIRE_HEADER], "big"))))
        if plan.role == "key" and isinstance(record, dict):
            found = Key(record, plan.connect, compact_json(record))
            hint = self.source_name(name_from_topic(plan.name, self.settings))
            return Out(m.row, m.offset, skipped("key", table=hint, extra=[("key", found.text)]), m.raw), found
        if plan.role != "value":
            reason = non_row_reason(record, plan.name) if isinstance(record, dict) else None
            return Out(m.row, m.offset, skipped(reason or "key", extra=kafka), m.raw), None
        took = False
        if key is None and pending is not None and same_table(pending, plan.connect):
            key, took = pending, True
        value = self.value_row(plan, record, key, kafka, m.topic)
        if value.error is not None:
            value = value._replace(error=self._where(m, value.error))
        return Out(m.row, m.offset, value, m.raw), took

    @staticmethod
    def _where(m: Message, reason: str) -> str:
        return f"line {m.row + 1}: {reason}" if isinstance(m.raw, str) else reason

    # -- message files
    def messages(self, split: Split) -> Iterator[Message]:
        return read_messages(split, self.measure, key_measure=self.measure)

    def measure(self, fh: BinaryIO, pos: int) -> tuple[int]:
        """Where the wire-format message at byte ``pos`` of ``fh`` ends (its schema reads its
        datum); :class:`_Bad` when none starts there (a kcat ``-K`` dump's values and keys)."""
        fh.seek(pos)
        head = fh.read(WIRE_HEADER)
        if len(head) < WIRE_HEADER or head[0] != 0:
            raise _Bad("not a Confluent wire-format message (magic byte 0x00, then the 4-byte schema id)")
        plan = self.by_id(int.from_bytes(head[1:], "big"))
        try:
            schemaless_reader(fh, plan.parsed, None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError...
            raise _Bad(f"{plan.label} does not read the message: {type(exc).__name__}: {exc}") from None
        return (fh.tell(),)

    # -- object container files
    def _ocf_rows(self, split: Split) -> Iterator[Out]:
        with open(split.path, "rb") as fh:
            header = read_ocf_header(fh)
            plan = self.by_schema(("ocf", split.path), header.schema, f"the header of {os.path.basename(split.path)}")
            keys = self._ocf_keys(split.keys) if split.keys else None
            for row, offset, record, error, raw in self.ocf_records(fh, header, plan, split):
                key = next(keys, None) if keys is not None else None
                if error is not None:
                    keys = None  # a bad block's records are not counted: the keys no longer line up
                    yield Out(row, offset, failed(error), raw)
                elif record is None:
                    value = decode_value(None, None, key=key, kafka=[], topic=None, settings=self.settings,
                                         parse=parse_json)
                    table = self.source_name(value.table) or self._hint(plan)  # the file's table
                    yield Out(row, offset, value._replace(table=table), None)
                else:
                    value = self.value_row(plan, record, key, [], None)
                    yield Out(row, offset, value, raw if value.error is not None else None)

    def ocf_records(self, fh: Any, header: Any, plan: Plan, split: Split) -> Iterator[tuple[int, int, Any, str | None, bytes]]:
        """``(row, block offset, record, error, raw)`` of the split's records."""
        return ocf_records(fh, header, plan.parsed, split)

    def _ocf_keys(self, path: str) -> Iterator[Key | None]:
        """The keys of a sink's ``.keys.avro`` file, one per record (None for a null key)."""
        with open(path, "rb") as fh:
            try:
                header = read_ocf_header(fh)
            except ValueError:
                return
            plan = self.by_schema(("ocf", path), header.schema, f"the header of {os.path.basename(path)}")
            whole = Split(path, "ocf", header.length, os.path.getsize(path))
            for _row, _offset, record, error, _raw in self.ocf_records(fh, header, plan, whole):
                if error is not None:
                    return
                yield Key(record, plan.connect, compact_json(record)) if isinstance(record, dict) else None

    # -- declared types
    def types(self, split: Split) -> Iterator[tuple[str, str, str]]:
        """The declared column types of the tables in the split: one record per envelope schema
        read, and every schema-change record's columns (see :mod:`lakecdc.decoders._debezium_ddl`)."""
        if split.kind == "bad":
            return
        if split.kind == "ocf":
            yield from self._ocf_types(split)
            return
        done: set[int] = set()
        for m in self.messages(split):
            data = m.data
            if m.error is not None or not data or len(data) < WIRE_HEADER or data[0] != 0:
                continue
            schema_id = int.from_bytes(data[1:WIRE_HEADER], "big")
            if schema_id in done:
                continue
            try:
                plan, record = self.message(data)
            except RecordError:
                done.add(schema_id)
                continue
            if self._schema_change(plan, record):
                yield from schema_change_types(record, self.settings)
                continue
            table = self.table_of(plan, record, m.topic)
            if table or not (isinstance(record, dict) and "op" in record):
                done.add(schema_id)
            if table:
                yield from plan.declared(table)

    def _ocf_types(self, split: Split) -> Iterator[tuple[str, str, str]]:
        with open(split.path, "rb") as fh:
            header = read_ocf_header(fh)
            plan = self.by_schema(("ocf", split.path), header.schema, split.path)
            for _row, _offset, record, _error, _raw in self.ocf_records(fh, header, plan, split):
                if self._schema_change(plan, record):
                    yield from schema_change_types(record, self.settings)
                    continue
                table = self.table_of(plan, record, None)
                if table:
                    yield from plan.declared(table)
                    return

    @staticmethod
    def _schema_change(plan: Plan, record: Any) -> bool:
        return (plan.role == "value" and isinstance(record, dict) and "op" not in record
                and non_row_reason(record, plan.name) == "schema change")


class DebeziumAvroDecoder(Decoder):
    """Debezium envelopes in Avro (Confluent wire format, OCF, kcat dumps) to canonical events."""

    name: ClassVar[str] = "debezium-avro"
    PYTHON_ROWS: ClassVar[bool] = True  # (see Decoder.PYTHON_ROWS)
    TRANSACTION_MARKERS: ClassVar[bool] = True
    OPTIONS: ClassVar[dict[str, str]] = {**SETTINGS_OPTIONS, "schemaDirectory": "", "framing": "auto", **KCAT_KV_OPTIONS,
                                         **LIMIT_OPTIONS}
    IGNORED_OPTIONS: ClassVar[frozenset[str]] = DebeziumJsonDecoder.IGNORED_OPTIONS | frozenset(
        {
            "schema.registry.url", "key.converter", "value.converter", "key.converter.schema.registry.url",
            "value.converter.schema.registry.url", "auto.register.schemas", "use.latest.version",
            "connect.meta.data", "enhanced.avro.schema.support", "scrub.invalid.names", "avro.codec",
            "key.subject.name.strategy", "value.subject.name.strategy", "store.kafka.keys", "store.kafka.headers",
        }
    )

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        self.settings = settings_from_options(self.name, self.options)
        framing = self.options["framing"].strip().lower()
        if framing not in FRAMINGS:
            raise ConfigError(f"{self.name}: framing {self.options['framing']!r} is not one of {', '.join(FRAMINGS)}")
        self.framing = framing
        self.kcat_kv = kcat_kv_framing(self.name, framing, self.options)
        self._registry: Registry | None = None
        self.limits = BlockLimits.of(self.name, self.options)

    # -- planning
    def registry(self, *, required: bool) -> Registry | None:
        """The ``schemaDirectory``'s schemas (read once); ConfigError when needed and not given."""
        path = self.options["schemaDirectory"].strip()
        if self._registry is None and path:
            self._registry = load_registry(path)
        if self._registry is None and required:
            raise ConfigError(
                f"{self.name}: wire-format messages name their schema by id: set schemaDirectory to a directory "
                "of <id>.avsc files or a schema-registry export (see the debezium-avro documentation)"
            )
        return self._registry

    def _skipped_input(self, path: str) -> bool:
        if path.endswith(".avsc") or path.endswith(SIDECARS):
            return True
        directory = self.options["schemaDirectory"].strip()
        if directory:
            root = os.path.abspath(directory)
            return os.path.abspath(path) == root or os.path.abspath(path).startswith(root + os.sep)
        return False

    def plan(self, files: Sequence[str], parallelism: int = 2) -> list[Split]:
        """The splits of the inputs: OCF files at blocks, message files at messages."""
        paths = [p for p in files if not self._skipped_input(p) and os.path.getsize(p) > 0]
        size_of = split_bytes(sum(os.path.getsize(p) for p in paths), parallelism)
        out: list[Split] = []
        for path in paths:
            size = os.path.getsize(path)
            if is_ocf(path):
                keys = sidecar_of(path)
                try:
                    _header, parts = plan_ocf_splits(path, size if keys else size_of, self.limits)
                except (ValueError, OSError) as exc:
                    out.append(Split(path, "bad", note=f"OCF file header: {exc}"))
                    continue
                out += [Split(path, "ocf", start, start + length, first, keys, limits=self.limits)
                        for start, length, first in parts]
                continue
            kind = kind_of(path, self.framing, kcat_kv=self.kcat_kv is not None)
            if kind == "messages":
                registry = self.registry(required=True)
                key_ids = registry.key_ids() if registry else frozenset()
                out += [Split(path, kind, s, e, r) for s, e, r in length_prefixed_splits(path, size_of, key_ids)]
            else:
                self.registry(required=True)
                sep, delim = self.kcat_kv or (b"", b"\n")
                out.append(Split(path, kind, 0, size, 0, separator=sep, delimiter=delim))
        return out

    def _frame(self, spark: SparkSession, files: Sequence[str], body: Any, schema: T.StructType) -> DataFrame:
        splits = self.plan(files, default_parallelism(spark))
        needs_registry = any(s.kind in ("messages", "single", "kcat", "kcat-k") for s in splits)
        reader = Reader(self.settings, self.registry(required=needs_registry))
        return splits_frame(spark, splits, body, schema, reader=reader)

    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        p = self._frame(spark, files, decode_batches, DECODED_SCHEMA)
        return canonical(p, "_offset", "_raw")

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, the Spark type of each column its writer schemas declare (a column declared
        with different types gets the type that holds them all, string when none does), and of
        the columns only schema-change records name (the latest one's type)."""
        return merge_declared(self._frame(spark, files, type_batches, TYPES_SCHEMA).distinct().collect())

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before``, ``after`` as ``map<string, variant>`` for the columns no schema
        types (``VariableScaleDecimal``)."""
        vmap = T.MapType(T.StringType(), T.VariantType())
        df = self._frame(spark, files, variant_batches, VARIANT_SCHEMA)
        return df.select("table", F.from_json("before", vmap).alias("before"), F.from_json("after", vmap).alias("after"))



__all__ = ["DebeziumAvroDecoder", "Plan", "Reader"]
