"""Qlik Replicate / Qlik Talend Data Integration, Kafka target (seed 003): ``qlik-json`` and ``qlik-avro``.

Replicate writes two kinds of messages. A **metadata message** (``MD``), one per table version::

    {"schemaId": "9434...", "lineage": {"server": "...", "task": "...", "schema": "employees",
     "table": "salaries", "tableVersion": 1, "timestamp": "2018-04-13T20:13:58.289"},
     "tableStructure": {"tableColumns": {"emp_no": {"ordinal": 1, "type": "INT4", "length": 10,
       "precision": 0, "scale": 0, "primaryKeyPosition": 1, "nullable": false}, ...}},
     "dataSchema": "<the Avro schema of the data messages, as JSON text>"}

and a **data message** (``DT``) per changed row::

    {"data": {"emp_no": 14472, "salary": 49592, ...}, "beforeData": null,
     "headers": {"operation": "UPDATE", "changeSequence": "20230321213416580000000000000000017",
       "timestamp": "2023-03-21T21:34:19.511", "streamPosition": "...", "transactionId": "0000...",
       "changeMask": "008080", "columnMask": "00FFFF", "externalSchemaId": null,
       "transactionEventCounter": 1, "transactionLastEvent": true}}

Both usually come wrapped in Replicate's envelope ``{"magic": "atMSG", "type": "DT" | "MD",
"headers", "messageSchemaId", "messageSchema", "message": {...}}`` (the samples); with "wrap data
messages" off they come bare. Both forms are read, one message per line or pretty-printed (staged one
per line, quarantine lines still the file's), and as Kafka record dumps (``kcat -J`` lines: ``topic``,
``partition``, ``offset``, ``key``, ``payload`` the message's JSON text, or base64 of it; a null
payload is a skipped tombstone; ``kafka.*`` kept in ``source``).

**Metadata.** Each ``MD`` message is a skipped record (``op`` and ``_error`` NULL,
``source['skipped'] = 'metadata'``) of its table ``schema.table``, carrying ``keys`` (columns whose
``primaryKeyPosition`` > 0, in that order) and a seq (its lineage timestamp), so it counts as schema
information like a Debezium schema change. What it says is kept per table version and used to decode
that version's data messages. It may arrive in an earlier run than its data: :func:`lakecdc.apply`
keeps every version learnt in the target (``Decoder.state_dir``, one JSON file per distinct
version, written once); the option ``metadataDirectory`` names files of ``MD`` messages a user
keeps (a metadata topic dump; JSON, or for ``qlik-avro`` also Avro envelopes). Files under it are not
read as input.

**Which version wrote a data message.** The envelope's ``messageSchemaId`` is the ``schemaId`` of its
metadata message (how Qlik's own Avro SDK joins them); a ``headers.externalSchemaId`` equal to a
known ``schemaId`` does the same. Replicate writes no table name into data messages by default (Qlik
support article 2115290), so without an id the table comes from: the message's own ``schema`` /
``table`` members (seed 003 lists them), then the option ``topicTables`` (``topic=SCHEMA.TABLE,...``),
then a Kafka topic (or a ``schema+table`` Kafka key, Replicate's "Schema and table name" message key)
equal to a known table (``schema.table``, or the bare table name when only one schema has it: what
"separate topic for each table" gives), then the option ``table``. Its version is then the known
version whose columns are exactly the message's columns; versions that fit equally but number
columns differently make the message ambiguous. A data message whose version has no metadata
(an unknown ``messageSchemaId``, a table with no known version, columns no version has) is
quarantined with a reason naming the id or the table; it is never decoded by guess, not even later
(a quarantined message stays quarantined when its metadata arrives in a later run).

**Data.** ``headers.operation``: ``REFRESH`` (full load) gives ``R`` (an upsert), ``INSERT`` ``I``
(after = ``data``), ``UPDATE`` ``U`` (after = ``data``, before = ``beforeData`` when given),
``DELETE`` ``D`` (before = ``data``, the deleted row; ``beforeData`` when ``data`` is null).
``table`` is the metadata's ``schema.table``; ``txid`` ``transactionId``; ``op_ts`` ``timestamp``
(UTC); ``source`` holds every header as text, ``table_version``, ``schema_id``, ``messageSchemaId``,
and the decoded masks.

**Masks.** ``columnMask`` and ``changeMask`` are one hexadecimal number each, most significant digit
first, whose bit ``ordinal - 1`` stands for the column of that ordinal (seed 003: ``0B`` = 1011 =
ordinals 1, 2 and 4; formats.md: ``00FFFF``/``008080`` on 16 columns = all present, 8 and 16
changed). Avro gives the same number as bytes. A column whose ``columnMask`` bit is 0 was not
captured: it is **missing** from ``after`` and ``before`` (not a map key), even when the message
shows null. ``changeMask`` only informs: LOB columns are outside it, so it never removes a column.
Decoded, they are ``source['present_columns']`` / ``source['changed_columns']`` (names,
comma-separated, in ordinal order; absent when the mask is); ``source['version_mask']`` is the
mask of every ordinal the message's table version has (``0FFF`` for 12 columns), so that
:func:`lakecdc.check.quality.check_changes` can tell a mask that names a column the version does not have. Decisions: a mask shorter than the
column count is still a number (its missing high digits are 0: those columns are not present /
not changed), and so is a mask of an odd number of digits (a leading 0 implied: ``B`` is ``0B``); a
null or empty mask means every column is present; a mask with a bit above the last ordinal or
non-hex digits quarantines the message naming the mask and its value. Masks
of any width are Python integers (tables of hundreds of columns).

**Order** (``seq``): ``changeSequence`` (35 digits, "use it to order the records", seed 003; Replicate
writes it across all tables of a task) then ``transactionEventCounter`` (``idx``), as
``<changeSequence>|<counter, 10 digits>``; ``pos`` is ``changeSequence``. The source ``timestamp``
is not part of it. ``REFRESH`` messages have an empty ``changeSequence``: they sort before every
change (a full load precedes the changes Replicate applies after it); a data message of another
operation without ``changeSequence`` is quarantined.

**Types** (:meth:`QlikJsonDecoder.column_types`, from the metadata, every version of a table
combined with :func:`lakecdc.changes.columns.widest`): ``INT1``/``INT2``/``INT4``/``INT8`` and
``UINT1``/``UINT2``/``UINT4`` bigint, ``UINT8`` decimal(20,0), ``NUMERIC(p,s)`` decimal(p,s) exactly
(no declared precision: decimal(38,s); more than 38 digits: string, the exact text), ``REAL4`` float,
``REAL8`` double, ``BOOLEAN`` boolean, ``DATE`` date, ``DATETIME`` timestamp_ntz (the source's wall
time), ``BYTES`` and ``BLOB`` binary (the exact bytes), everything else (``STRING``, ``WSTRING``,
``TIME``, ``CLOB``, ``NCLOB``, ...) string. Values stay the exact text of the message (numbers never
through a double), except bytes: Replicate's JSON writes them as hex digits, which the images carry
as base64, lakecdc's one text form of bytes (:mod:`lakecdc.changes.columns`; Avro ``bytes`` are base64
already); a ``BYTES``/``BLOB`` value that is not hex quarantines its message.
``treatAllColumnsAsStrings=true`` types every column as a string.

**qlik-avro.** Replicate's Avro output is the same envelope as an Avro record ``MessageEnvelope``
(``magic`` fixed(5) ``atMSG``, ``type``, ``headers``, ``messageSchemaId``, ``messageSchema``,
``message`` bytes), written raw (no Confluent wire format). An ``MD`` envelope embeds the schema of
its message (``messageSchema``); a ``DT`` envelope names the ``schemaId`` of its metadata message,
whose ``dataSchema`` reads the message bytes (record ``DataRecord``: ``data``, ``beforeData``,
``headers``; masks as ``bytes``). Inputs (``framing=auto``): files of length-prefixed envelopes
(4 bytes big-endian length each), a file that is one envelope (starts with ``atMSG``), or kcat ``-J``
dumps with base64 payloads (the framing of :mod:`lakecdc.decode.kafka.records`). Values are
rendered by :func:`lakecdc.decode.avro.text.text_converter`. Replicate's "publish to a schema registry"
mode (Confluent wire format without metadata messages) is not read.

Decoding runs in the executors; only the metadata messages (a few per table) are collected, to the
driver, before the data is decoded. ``qlik-json``'s common lines (wrapped data messages of a version
known by its id) are decoded in Spark SQL, the others in Python (:mod:`lakecdc.decode.qlik.sql`,
which says which); ``qlik-avro`` in Python (``mapInArrow``).
"""

from __future__ import annotations

import base64
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, ClassVar

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import widest
from lakecdc.changes.events import sortable_position
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.event import Parts
from lakecdc.decode.files.lines import read_text
from lakecdc.decode.files.splits import Split, kind_of, split_bytes, split_numbers, splits_frame
from lakecdc.decode.files.staging import on_executors
from lakecdc.decode.kafka.dumps import length_prefixed_splits
from lakecdc.decode.kafka.records import read_messages
from lakecdc.decode.qlik import sql
from lakecdc.decode.qlik.avro import AvroReader, avro_metadata, avro_row, load_metadata_directory
from lakecdc.decode.qlik.catalog import (
    Catalog,
    TableVersion,
    load_state,
    parse_topic_tables,
    spark_type,
    write_state,
)
from lakecdc.decode.qlik.messages import OPS, Row, json_value
from lakecdc.decode.rows import gc_paused, rows_parts
from lakecdc.decode.spec import Names, Option, Ordering, VendorSpec
from lakecdc.decode.times import parse_op_ts
from lakecdc.errors import ConfigError
from lakecdc.spark.compat import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_MAP = pa.map_(pa.string(), pa.string())
_MD = T.StructType([T.StructField("md", T.StringType())])
_X_ARROW: list[pa.DataType] = [
    pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.string(),
    pa.list_(pa.string()), _MAP, _MAP, _MAP, pa.string(),
]
_ORIGIN = [("_file", pa.string(), T.StringType()), ("_block", pa.int64(), T.LongType()), ("_row", pa.int64(), T.LongType())]
_BINARY = [("_offset", pa.int64(), T.LongType()), ("_raw", pa.string(), T.StringType())]
_AVRO_ARROW = pa.schema([
    *[(n, a) for n, a, _s in _ORIGIN],
    *[(f.name, a) for f, a in zip(sql.X_SCHEMA.fields, _X_ARROW, strict=True)],
    *[(n, a) for n, a, _s in _BINARY],
])
#: The rows ``qlik-avro`` decodes in the executors: origin, ``x_*``, ``_offset`` and ``_raw``.
AVRO_PARSED = T.StructType([*[T.StructField(n, s) for n, _a, s in _ORIGIN], *sql.X_SCHEMA.fields,
                            *[T.StructField(n, s) for n, _a, s in _BINARY]])
FRAMINGS = ("auto", "length-prefixed", "single", "kcat")
#: ``pos`` (``changeSequence``) and ``idx`` (``transactionEventCounter``) widths in ``seq``.
_SEQUENCE_DIGITS, _COUNTER_DIGITS = 35, 10
_TIME = "_op_ts"

_OPTIONS = (Option("metadataDirectory", ""), Option("topicTables", ""), Option("table", ""),
            Option("treatAllColumnsAsStrings", "false", "flag"))
QLIK_JSON = VendorSpec(
    name="qlik-json", ops=OPS, ordering=Ordering("given"),
    names=Names(table="table", op="headers.operation", op_ts="headers.timestamp"), options=_OPTIONS,
)
QLIK_AVRO = VendorSpec(
    name="qlik-avro", ops=OPS, ordering=Ordering("given"),
    names=Names(table="table", op="headers.operation", op_ts="headers.timestamp"),
    options=(*_OPTIONS, Option("framing", "auto")), binary=True,
)


# -- mapInArrow bodies ------------------------------------------------------------------------------------


def _x_arrays(rows: Sequence[Row]) -> list[pa.Array]:
    cols: list[Sequence[object]] = list(zip(*rows, strict=True)) if rows else [[] for _ in Row._fields]
    return [pa.array(list(c), a) for c, a in zip(cols, _X_ARROW, strict=True)]


def _json_message(text: str) -> object:
    return json_value(text)[0]


def _metadata_of(decode: Callable[[], object]) -> str | None:
    try:
        found = decode()
    except Exception:  # bad records are reported by the decoding pass
        return None
    return found.to_json() if isinstance(found, TableVersion) else None


#: What a line holding a metadata message (or a kcat record, whose payload may be one) contains.
_METADATA_MARKS = (b"tableStructure", b'"payload"')
_SCAN_BYTES = 1 << 24


def may_hold_metadata(path: str) -> str:
    """"1" when the file's bytes hold one of :data:`_METADATA_MARKS` ("" when not): a search of
    the bytes, so that a file of data messages alone is not read as text by Spark to learn nothing."""
    overlap = max(len(m) for m in _METADATA_MARKS) - 1
    with open(path, "rb") as fh:
        tail = b""
        while chunk := fh.read(_SCAN_BYTES):
            window = tail + chunk
            if any(m in window for m in _METADATA_MARKS):
                return "1"
            tail = window[-overlap:]
    return ""


def json_metadata_batches(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Lines to the canonical JSON of the metadata messages among them."""
    for batch in batches:
        found = {md for text in batch.column("value").to_pylist()
                 if (md := _metadata_of(functools.partial(_json_message, text))) is not None}
        yield pa.RecordBatch.from_pydict({"md": sorted(found)}, schema=pa.schema([("md", pa.string())]))


def avro_decode_batches(batches: Iterator[pa.RecordBatch], *, catalog: Catalog, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
    """Split numbers to ``x_*`` rows with ``_offset`` and ``_raw`` (base64, or a kcat line's text)."""
    reader = AvroReader(catalog)
    for i in split_numbers(batches):
        split = splits[i]
        with gc_paused():
            messages = list(read_messages(split))
            rows = [avro_row(m, reader) for m in messages]
        raws = [None if r.error is None else (m.raw if isinstance(m.raw, str) else base64.b64encode(m.raw).decode("ascii"))
                for m, r in zip(messages, rows, strict=True)]
        n = len(rows)
        origin = [pa.array([split.path] * n, pa.string()), pa.array([split.start] * n, pa.int64()),
                  pa.array([m.row for m in messages], pa.int64())]
        binary = [pa.array([m.offset for m in messages], pa.int64()), pa.array(raws, pa.string())]
        yield pa.RecordBatch.from_arrays([*origin, *_x_arrays(rows), *binary], schema=_AVRO_ARROW)


def avro_metadata_batches(batches: Iterator[pa.RecordBatch], *, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
    """Split numbers to the canonical JSON of the metadata envelopes among their messages."""
    reader = AvroReader(Catalog([]))
    for i in split_numbers(batches):
        found = {md for m in read_messages(splits[i])
                 if m.data and (md := _metadata_of(functools.partial(avro_metadata, reader, m.data))) is not None}
        yield pa.RecordBatch.from_pydict({"md": sorted(found)}, schema=pa.schema([("md", pa.string())]))


# -- what a row is ----------------------------------------------------------------------------------------


def with_time(rows: DataFrame, *, utc: bool) -> DataFrame:
    """``x_*`` rows with ``headers.timestamp`` read as a time (UTC), in a column of its own (the
    projection and its check both read it)."""
    event, ts = F.col("x_op").isNotNull(), F.col("x_ts")
    return rows.select("*", F.when(event & ts.isNotNull(), parse_op_ts(ts, utc_session=utc)).alias(_TIME))


def row_parts(rows: DataFrame) -> Parts:
    """What an ``x_*`` row (:func:`with_time`) is (:func:`~lakecdc.decode.rows.rows_parts`): ``seq``
    ``<changeSequence>|<counter>`` for data messages, the metadata's own for metadata rows
    (skipped, ordered: they name keys)."""
    ts, op_ts = F.col("x_ts"), F.col(_TIME)
    event = F.col("x_op").isNotNull()
    counter = F.coalesce(F.col("x_counter"), F.lit("0"))
    seq = F.when(event, F.concat(sortable_position(F.col("x_pos"), _SEQUENCE_DIGITS), F.lit("|"),
                                 sortable_position(counter, _COUNTER_DIGITS))).otherwise(F.col("x_seq"))
    bad_time = (event & ts.isNotNull() & op_ts.isNull(), F.format_string(
        "headers.timestamp '%s' is not a timestamp (expected e.g. 2023-03-21T21:34:19.511, UTC)", ts))
    return rows_parts(rows, op_ts=op_ts, idx=counter.try_cast("int"), seq=seq, ordered=F.col("x_seq").isNotNull(),
                      checks=[bad_time])


# -- the decoders ---------------------------------------------------------------------------------------------


class QlikJsonDecoder(Decoder):
    """Qlik Replicate JSON metadata and data messages (envelope or bare, kcat dumps) to canonical events."""

    KAFKA_RECORDS = "kcat-text"

    spec = QLIK_JSON

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        self.all_strings = self.flag("treatAllColumnsAsStrings")
        self.topic_tables = parse_topic_tables(self.options["topicTables"], self.name)
        self._catalog: tuple[object, Catalog] | None = None
        #: common data messages decoded in Spark SQL (:mod:`lakecdc.decode.qlik.sql`), the
        #: rest in Python; False: every line in Python (the reference the tests compare with)
        self.spark_route = True

    # -- metadata
    def _is_metadata_file(self, path: str) -> bool:
        directory = self.options["metadataDirectory"].strip()
        if not directory:
            return False
        root, full = os.path.abspath(directory), os.path.abspath(path)
        return full == root or full.startswith(root + os.sep)

    def inputs(self, files: Sequence[str]) -> list[str]:
        """The files to decode: not those of ``metadataDirectory``, not empty ones."""
        return [f for f in files if not self._is_metadata_file(f) and os.path.getsize(f) > 0]

    def learn(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> list[TableVersion]:
        """The metadata messages of ``files`` (read in the executors, collected: a few per table).

        Only the files whose bytes hold :data:`_METADATA_MARKS` are read as text (a search of the
        bytes in the executors, :func:`may_hold_metadata`)."""
        files = [f for f, hit in zip(files, on_executors(spark, may_hold_metadata, files), strict=True) if hit]
        if not files:
            return []
        lines = read_text(spark, files, staging=staging)
        wanted = F.col("value").contains("tableStructure") | F.col("value").contains('"payload"')
        found = lines.where(wanted).select("value").mapInArrow(json_metadata_batches, _MD).distinct().collect()
        return [TableVersion.from_json(r["md"]) for r in found]

    def catalog(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> Catalog:
        """Every table version known: this input's, earlier runs' (``state_dir``), ``metadataDirectory``'s.

        What this input teaches is kept in ``state_dir`` for later runs.
        """
        key = (tuple(files), self.state_dir)
        if self._catalog is not None and self._catalog[0] == key:
            return self._catalog[1]
        learnt = self.learn(spark, files, staging=staging) if files else []
        directory = self.options["metadataDirectory"].strip()
        known = load_state(self.state_dir) + (load_metadata_directory(directory, self.name) if directory else [])
        write_state(self.state_dir, learnt)
        table = self.options["table"].strip() or None
        catalog = Catalog([*known, *learnt], topic_tables=self.topic_tables, default_table=table)
        self._catalog = (key, catalog)
        return catalog

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, each column's type from its metadata (all versions combined, see the module doc)."""
        if self.all_strings:
            return {}
        catalog = self.catalog(spark, self.inputs(files), staging=staging)
        out: dict[str, dict[str, T.DataType]] = {}
        for table, versions in catalog.by_table.items():
            found: dict[str, list[T.DataType]] = {}
            for tv in versions.values():
                for c in tv.columns:
                    found.setdefault(c.name, []).append(spark_type(c))
            out[table] = {c: widest(ts) for c, ts in found.items()}
        return out

    # -- decoding
    def rows_in_python(self) -> bool:
        return self.PYTHON_ROWS or not self.spark_route

    def prepare(self, ctx: Context, inputs: Sequence[str]) -> Context:
        """The catalog of table versions (:meth:`catalog`), in ``ctx.state``."""
        return Context(ctx.spark, ctx.staging, ctx.last_win, ctx.utc, self.catalog(ctx.spark, inputs, staging=ctx.staging))

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """The lines as ``x_*`` rows (:mod:`lakecdc.decode.qlik.sql`), their time read."""
        assert isinstance(ctx.state, Catalog)
        rows = sql.read(ctx.spark, inputs, ctx.state, staging=ctx.staging, sql=self.spark_route)
        return with_time(rows, utc=ctx.utc)

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        return row_parts(parsed)


class QlikAvroDecoder(QlikJsonDecoder):
    """Qlik Replicate Avro envelopes (length-prefixed, single, kcat base64) to canonical events."""

    KAFKA_RECORDS = "kcat-base64"

    spec = QLIK_AVRO
    PYTHON_ROWS: ClassVar[bool] = True  # (see Decoder.PYTHON_ROWS)

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        self.framing = self.options["framing"].strip().lower()
        if self.framing not in FRAMINGS:
            raise ConfigError(f"{self.name}: framing {self.options['framing']!r} is not one of {', '.join(FRAMINGS)}")

    def _kind(self, path: str) -> str:
        if self.framing == "auto":
            with open(path, "rb") as fh:
                if fh.read(5) == b"atMSG":  # one envelope
                    return "single"
        return kind_of(path, self.framing)

    def plan(self, files: Sequence[str], parallelism: int = 2) -> list[Split]:
        """The splits of the inputs: length-prefixed files cut at messages, others whole."""
        size_of = split_bytes(sum(os.path.getsize(p) for p in files), parallelism, policy="ceil")
        out: list[Split] = []
        for path in files:
            kind = self._kind(path)
            if kind == "messages":
                out += [Split(path, kind, s, e, r) for s, e, r in length_prefixed_splits(path, size_of)]
            else:
                out.append(Split(path, kind, 0, os.path.getsize(path), 0))
        return out

    def learn(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> list[TableVersion]:
        splits = self.plan(files)
        if not splits:
            return []
        found = splits_frame(spark, splits, avro_metadata_batches, _MD).distinct().collect()
        return [TableVersion.from_json(r["md"]) for r in found]

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """The messages as ``x_*`` rows with ``_offset`` and ``_raw`` (Python, ``mapInArrow``)."""
        assert isinstance(ctx.state, Catalog)
        splits = self.plan(inputs, default_parallelism(ctx.spark))
        body = functools.partial(avro_decode_batches, catalog=ctx.state)
        return with_time(splits_frame(ctx.spark, splits, body, AVRO_PARSED), utc=ctx.utc)


__all__ = ["AVRO_PARSED", "QLIK_AVRO", "QLIK_JSON", "QlikAvroDecoder", "QlikJsonDecoder", "may_hold_metadata",
           "row_parts", "with_time"]
