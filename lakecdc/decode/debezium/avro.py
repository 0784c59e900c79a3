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
type conversion (raw ints and bytes), and hands both to :mod:`lakecdc.decode.debezium.envelope`, the
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

**Schemas** (needed for wire-format messages): option ``schemaDirectory``, a directory or one JSON
file: ``<id>.avsc`` files and schema-registry exports (``/subjects/<subject>/versions/<n>``
objects, lists of them, ``/schemas/ids/<id>``), schema ``references`` resolved by subject and
version from the same export; and/or option ``schema.registry.url``, a schema registry's REST API
(with ``basic.auth.user.info``): the schemas of the ids no ``schemaDirectory`` holds are fetched
by the driver before decoding (a Spark job lists the ids the input names), cached per id. See
:mod:`lakecdc.decode.avro.registry`. The subject
(``<topic>-value``) names the topic for messages that name no table otherwise. OCF files need no
directory. How files are cut and framed: :mod:`lakecdc.decode.kafka.records`.

**Options**: as ``debezium-json`` (``sequenceBy``, ``tableName``,
``unavailable.value.placeholder``, ``topic.prefix``, and the Debezium properties it ignores),
plus ``schemaDirectory``, ``framing`` (``auto``, ``length-prefixed``, ``single``, ``kcat``,
``kcat-K``), ``keySeparator`` and ``messageDelimiter`` (kcat -K dumps), ``maxBlockBytes`` and
``maxBlockRecords`` (an OCF block's limits: :class:`~lakecdc.decode.avro.containers.BlockLimits`).
Other converter properties (``key.converter``, ``value.converter``,
``auto.register.schemas``, ``use.latest.version``, ``connect.meta.data``,
``enhanced.avro.schema.support``, ``scrub.invalid.names``, ...) are accepted and ignored.

**Types** (:meth:`DebeziumAvroDecoder.column_types`): from the writer schemas' ``after``/``before``
records, with the Kafka Connect types of :func:`lakecdc.decode.kafka.connect_values.spark_type`
(Decimal: ``decimal(p, s)``; MicroTimestamp: ``timestamp``; ...), per table as the records name
it; columns only a schema-change record names (``tableChanges``) take the DDL's type (see
:mod:`lakecdc.decode.debezium.ddl`). ``VariableScaleDecimal`` columns are inferred from their
values (:meth:`variant_images`), and are strings while their values are all NULL.

**Bad input** does not stop the batch: a message with the wrong magic byte, an unknown schema
id, too few bytes (a cut length prefix, a short header), bytes the schema does not read exactly,
a corrupt OCF block, or an envelope ``debezium-json`` would refuse (an id the schema registry does
not have: with its answer), gets ``_error`` and goes to the
quarantine with its file, byte ``offset`` (of its length prefix; of the OCF block; of the kcat
line or kcat -K record) and ``raw`` (the message's bytes, base64; a kcat line as its text); the rest applies.
Decoding runs in the executors (``mapInArrow``, fastavro).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.avro.containers import LIMIT_OPTIONS, BlockLimits, is_ocf, plan_ocf_splits
from lakecdc.decode.avro.registry import Registry, SchemaRegistryClient, load_registry, schema_id_batches
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.debezium.avro_reader import Plan, Reader
from lakecdc.decode.debezium.ddl import merge_declared
from lakecdc.decode.debezium.settings import (
    IGNORED_OPTIONS,
    IMAGES,
    OP_TABLE,
    ORDERING,
    SETTINGS,
    settings_from_options,
)
from lakecdc.decode.event import Parts
from lakecdc.decode.files.kcat import KCAT_KV_OPTIONS, kcat_kv_framing
from lakecdc.decode.files.splits import Split, kind_of, split_bytes, splits_frame
from lakecdc.decode.kafka.dumps import length_prefixed_splits
from lakecdc.decode.kafka.records import (
    DECODED_SCHEMA,
    SIDECARS,
    TYPES_SCHEMA,
    VARIANT_SCHEMA,
    decode_batches,
    sidecar_of,
    type_batches,
    variant_batches,
)
from lakecdc.decode.rows import rows_parts
from lakecdc.decode.spec import Option, VendorSpec
from lakecdc.errors import ConfigError
from lakecdc.spark.compat import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FRAMINGS = ("auto", "length-prefixed", "single", "kcat", "kcat-k")
#: split kinds of Confluent wire-format messages, whose schemas are named by id
WIRE_KINDS = ("messages", "single", "kcat", "kcat-k")
DEBEZIUM_AVRO = VendorSpec(
    name="debezium-avro", ops=OP_TABLE, images=IMAGES, ordering=ORDERING,
    options=(*SETTINGS, Option("schemaDirectory", ""), Option("schema.registry.url", ""),
             Option("basic.auth.user.info", ""), Option("framing", "auto"),
             *[Option(k, v) for k, v in {**KCAT_KV_OPTIONS, **LIMIT_OPTIONS}.items()]),
    ignored=IGNORED_OPTIONS | frozenset({
        "basic.auth.credentials.source", "key.converter", "value.converter", "key.converter.schema.registry.url",
        "value.converter.schema.registry.url", "auto.register.schemas", "use.latest.version",
        "connect.meta.data", "enhanced.avro.schema.support", "scrub.invalid.names", "avro.codec",
        "key.subject.name.strategy", "value.subject.name.strategy", "store.kafka.keys", "store.kafka.headers",
    }),
    binary=True, transaction_markers=True,
)


class DebeziumAvroDecoder(Decoder):
    """Debezium envelopes in Avro (Confluent wire format, OCF, kcat dumps) to canonical events."""

    KAFKA_RECORDS = "kcat-base64"

    spec = DEBEZIUM_AVRO
    PYTHON_ROWS = True  # (see Decoder.PYTHON_ROWS)

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        self.settings = settings_from_options(self.name, self.options)
        framing = self.options["framing"].strip().lower()
        if framing not in FRAMINGS:
            raise ConfigError(f"{self.name}: framing {self.options['framing']!r} is not one of {', '.join(FRAMINGS)}")
        self.framing = framing
        self.kcat_kv = kcat_kv_framing(self.name, framing, self.options)
        self._registry: Registry | None = None
        url = self.options["schema.registry.url"].strip()
        self.client = SchemaRegistryClient(url, self.options["basic.auth.user.info"].strip(), fmt=self.name) if url else None
        self._scanned: set[tuple[str, int, int]] = set()  # (path, size, mtime) of the files whose ids were fetched
        self.limits = BlockLimits.of(self.name, self.options)

    # -- planning
    def registry(self, *, required: bool) -> Registry | None:
        """The ``schemaDirectory``'s schemas (read once) and those fetched from ``schema.registry.url``
        so far; ConfigError when needed and neither is given."""
        path = self.options["schemaDirectory"].strip()
        if self._registry is None and path:
            self._registry = load_registry(path)
        if self._registry is None and self.client is not None:
            self._registry = Registry("", url=self.client.url)
        if self._registry is None and required:
            raise ConfigError(
                f"{self.name}: wire-format messages name their schema by id: set schemaDirectory to a directory "
                "of <id>.avsc files or a schema-registry export, or schema.registry.url to the schema registry's "
                "URL (see the debezium-avro documentation)"
            )
        return self._registry

    def fetch_schemas(self, spark: SparkSession, files: Sequence[str], splits: list[Split], parallelism: int) -> list[Split]:
        """Fetches from ``schema.registry.url`` the schemas of the ids the wire-format splits name
        that are not known yet, and returns the splits planned again when any was fetched (a
        length-prefixed file is not cut between a record key and its value). The ids are listed
        by a Spark job over the splits; a kcat -K dump, framed by its messages' schemas, is listed
        again after each fetch until no new id turns up. Files already listed are not read again."""
        wire = [s for s in splits if s.kind in WIRE_KINDS]
        seen = {(p, int(st.st_size), int(st.st_mtime_ns)) for p in {s.path for s in wire} for st in [os.stat(p)]}
        if self.client is None or not wire or seen <= self._scanned:
            return splits
        fetched = False
        while True:
            registry = self.registry(required=True)
            assert registry is not None
            scan = _IdScan(self.settings, registry)
            ids = {r["id"] for r in splits_frame(spark, wire, schema_id_batches, "id long", reader=scan).distinct().collect()}
            new = ids - registry.schemas.keys() - registry.missing.keys()
            if new:
                self._registry = registry.with_fetched(self.client.fetch(new))
                fetched = True
            if not new or not any(s.kind == "kcat-k" for s in wire):
                break
        self._scanned |= seen
        return self.plan(files, parallelism) if fetched else splits

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
        parallelism = default_parallelism(spark)
        splits = self.fetch_schemas(spark, files, self.plan(files, parallelism), parallelism)
        needs_registry = any(s.kind in WIRE_KINDS for s in splits)
        reader = Reader(self.settings, self.registry(required=needs_registry))
        return splits_frame(spark, splits, body, schema, reader=reader)

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """The ``x_*`` rows of the inputs' messages with ``_offset`` and ``_raw`` (executors)."""
        return self._frame(ctx.spark, inputs, decode_batches, DECODED_SCHEMA)

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        """The rows' parts (:func:`~lakecdc.decode.rows.rows_parts`)."""
        return rows_parts(parsed)

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, the Spark type of each column its writer schemas declare (a column declared
        with different types gets the type that holds them all, string when none does), and of
        the columns only schema-change records name (the latest one's type)."""
        return merge_declared(self._frame(spark, files, type_batches, TYPES_SCHEMA).distinct().collect())

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before``, ``after`` as ``map<string, variant>`` for the columns no schema
        types (``VariableScaleDecimal``)."""
        vmap = "map<string, variant>"
        df = self._frame(spark, files, variant_batches, VARIANT_SCHEMA)
        return df.select("table", F.from_json("before", vmap).alias("before"), F.from_json("after", vmap).alias("after"))


@dataclass
class _IdScan(Reader):
    """A :class:`Reader` that records the schema ids it is asked for (a kcat -K dump's messages are
    framed by their schemas: an id not known yet is asked for, then the record is unreadable)."""

    asked: set[int] = field(default_factory=set)

    def by_id(self, schema_id: int) -> Plan:
        self.asked.add(schema_id)
        return super().by_id(schema_id)


__all__ = ["DEBEZIUM_AVRO", "FRAMINGS", "WIRE_KINDS", "DebeziumAvroDecoder"]
