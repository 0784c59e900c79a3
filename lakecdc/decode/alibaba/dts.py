"""Alibaba Cloud DTS Avro (``--format dts-avro``): the ``Record`` DTS writes to Kafka (seed 002).

**What DTS writes.** DTS Avro is DTS's default Kafka format (change tracking, and synchronisation
to a Kafka cluster). Each Kafka record value is one ``com.alibaba.dts.formats.avro.Record`` in
Avro's binary encoding, *without* any header (no Confluent magic byte, no schema id): consumers
decode it with the published schema, as Alibaba's ``aliyun-dts-subscribe-demo`` does
(``schemaless_reader(BytesIO(value), load_schema("...Record.avsc"))``). The schema files are
vendored in ``lakecdc/decode/alibaba/schemas/dts/`` (Apache-2.0, from that demo). A record::

    version 0, id 1700504 (the record's number in the stream), sourceTimestamp 1696984517 (seconds),
    sourcePosition "75259@78" (binlog offset @ binlog file number), safeSourcePosition, sourceTxid,
    source {sourceType MySQL, version 8.0.28}, operation UPDATE, objectName "mydb.t1",
    tags {pk_uk_info '{"PRIMARY":["a"]}', thread_id, server_id, readerThroughoutTime, ...},
    fields [{name a, dataTypeNumber 8}, {name b, dataTypeNumber 253}],
    beforeImages [Integer{precision 8, value "123456789"}, Character{charset utf8mb4, value b"..."}],
    afterImages  [...], bornTimestamp

**Operations.** ``INSERT`` / ``UPDATE`` / ``DELETE`` give ``I`` / ``U`` / ``D`` (an update carries
both images: DTS writes whole rows). ``INIT`` with row images is a snapshot row (``R``, an upsert).
``DDL`` is a skipped record recorded like canal-json records DDL (``source['skipped'] = 'ddl'``, the
statement, which DTS writes as the string ``afterImages``, in ``source['sql']``); lakecdc evolves
the target from the rows. ``BEGIN``, ``COMMIT``, ``ROLLBACK``, ``ABORT``, ``HEARTBEAT``,
``CHECKPOINT``, ``COMMAND``, ``FILL``, ``FINISH``, ``CONTROL``, ``RDB``, ``NOOP`` (and ``INIT``
without rows) are skipped records, reason the operation in lower case. Skipped records name their
table only when ``objectName`` is ``db.table`` (a DDL's ``objectName`` is often the database
alone). The ``operation`` enum is read by its index, so an operation a newer DTS adds is
quarantined naming its index instead of making the whole message unreadable.

**Tables and keys.** ``table`` is ``objectName`` exactly as DTS writes it: ``db.table`` for MySQL,
``db.schema.table`` where the source has schemas; a dot *inside* a name stays escaped as
``\\u002E``, as DTS writes it, so the parts stay unambiguous. ``keys`` is the ``PRIMARY`` list of
the ``pk_uk_info`` tag (JSON ``{"PRIMARY": [...], "<unique key>": [...]}``); a record without it
has no keys (pass ``--key``).

**Values** (``fields`` names the columns, the images are arrays aligned with it; each column is
present; a null element is NULL) as exact text:

=========================  ==================================================================
value kind                 text
=========================  ==================================================================
Integer, Decimal           ``value`` as written (never through a float)
Float                      the double's shortest repr (``0.1``; ``NaN``, ``Infinity``)
Character                  ``value`` decoded with its ``charset``: MySQL names (``utf8mb4``,
                           ``gbk``, ``latin1`` = cp1252, ...), Oracle names (``AL32UTF8``,
                           ``ZHS16GBK``, ...), else any Python codec name (``UTF-8``);
                           ``binary`` as base64. An unknown charset or bytes the charset
                           cannot decode quarantine the record, naming column and charset.
Timestamp                  ``timestamp`` seconds + ``millis`` (microseconds, as the DTS SDK
                           reads it) since 1970 UTC: ``2023-10-11T00:33:28.123456Z``
DateTime                   wall-clock pieces, ISO text of the pieces present:
                           ``2023-10-11T08:33:28.500000`` (DATETIME),
                           ``2023-10-11`` (DATE), ``-838:59:59`` (TIME), ``2023`` (YEAR).
                           ``millis`` is the fraction of a second: microseconds (6 digits),
                           nanoseconds (9 digits) for Oracle sources, as the DTS
                           subscribe example reads them (option ``dateTimeFraction``)
TimestampWithTimeZone      the DateTime text and its zone as an offset
                           (``2023-10-11T08:33:28+08:00``; a region name such as
                           ``Asia/Shanghai`` is resolved to its offset at that time)
BinaryObject,              ``value`` bytes as **base64**
BinaryGeometry (WKB)
TextObject (JSON, ENUM,    ``value`` as is
SET, ...), TextGeometry
EmptyObject                ``NULL``: NULL; ``NONE`` (a placeholder without a value, in the
                           SDK's words): the column is *missing* from the image
=========================  ==================================================================

**Types** (:meth:`DtsAvroDecoder.column_types`), per value: Decimal ``decimal(p, s)`` from its
precision and scale (string above 38 digits); Integer ``bigint`` for MySQL TINYINT .. INT and
YEAR (``dataTypeNumber`` 1, 2, 3, 9, 13), ``decimal(20,0)`` for MySQL BIGINT and BIT (8, 16: the
record does not say whether a BIGINT is unsigned), ``decimal(38,0)`` for other sources; Float
``double``; Timestamp and TimestampWithTimeZone ``timestamp``; DateTime ``timestamp_ntz`` (date and
time), ``date`` (date only), ``bigint`` (year only), else string; BinaryObject and
Character of the ``binary`` charset ``binary`` (the exact bytes: the base64 text is decoded when
the column is typed, :mod:`lakecdc.changes.columns`); everything else string (BinaryGeometry too: WKB as
base64 text). A DateTime fraction below the microsecond (Oracle) types the column as
a string, so no digit is cut. For MySQL sources a column whose values are all NULL is typed from
its ``dataTypeNumber`` alone when that is unambiguous.

**Order** (``seq``). ``op_ts`` is ``sourceTimestamp`` (seconds, UTC); ``pos`` is
``sourcePosition`` made sortable, then the record ``id``: MySQL's ``offset@file`` becomes
``<file, 10 digits>@<offset, 20 digits>/<id, 20 digits>`` (``75259@78`` ->
``0000000078@00000000000000075259/00000000000001700504``: file first, so a new binlog file sorts
after the old one's larger offsets); a number (an SCN) is padded to 20 digits; any other position
is kept as written. ``seq`` is the default ``(op_ts, pos)``. ``sequenceBy=position`` orders by
``pos`` alone (the binlog's commit order, for statements that started before a change they commit
after). ``txid`` is ``sourceTxid`` (NULL when empty or ``0``, which MySQL sources write).
``source`` keeps ``id``, ``sourcePosition``, ``safeSourcePosition``, ``sourceTimestamp``,
``sourceTxid``, ``sourceType``, ``sourceVersion``, ``operation``, ``bornTimestamp`` and every tag
as ``tag.<name>``.

**Inputs**, told apart per file (``framing=auto``): Avro object container files (``Obj\\x01``)
whose header schema is the DTS ``Record`` (read with that schema; another schema is refused);
kcat ``-J`` dumps (a file starting with ``{``: ``payload`` base64, ``topic``, ``partition``,
``offset``, ``ts``, ``headers`` kept as ``kafka.<name>``; a null payload is a skipped tombstone);
otherwise length-prefixed messages (each preceded by its length, 4 bytes big-endian, as a topic
dump writes them). ``framing=single`` reads each non-OCF file as one message. kcat ``-K`` dumps
(``framing=kcat-K``, or ``auto`` with ``keySeparator`` given: key, separator, value, delimiter,
nothing escaped, as ``kcat -C -K<sep> [-D<delim>] [-Z]`` writes them) are read as debezium-avro
reads them: each value is read with the Record schemas to find where it ends (the delimiter must
follow), the key is the text before the first separator (``kafka.key``), an empty or ``NULL``
value is a tombstone, and a record that does not read is quarantined from its byte offset to the
next record that reads. A message the
published schema does not read to its last byte is tried with the older schema without
``bornTimestamp`` (so a message cut exactly before its ``bornTimestamp`` reads as an older one). Large files are split (OCF at blocks, messages at messages) and decoded in the
executors with fastavro (``mapInArrow``), as debezium-avro does.

**Bad input** does not stop the batch: a cut or unreadable message, an unknown operation, an
image whose length differs from ``fields``, an unknown or undecodable charset, a missing
``objectName`` get ``_error`` and go to the quarantine with file, byte ``offset`` (of the length
prefix, the OCF block, the kcat line or kcat -K record) and ``raw`` (the message base64; a kcat line as text).

Options: ``framing`` (``auto``, ``length-prefixed``, ``single``, ``kcat``, ``kcat-K``),
``keySeparator`` and ``messageDelimiter`` (kcat's ``-K`` and ``-D``, default ``\\n``), ``sequenceBy``
(``timestamp``, ``position``), ``dateTimeFraction`` (``auto``, ``micros``, ``nanos``), ``maxBlockBytes``
and ``maxBlockRecords`` (an OCF block's limits: :class:`~lakecdc.decode.avro.containers.BlockLimits`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from fastavro import schemaless_reader
from pyspark.sql import types as T

from lakecdc.changes.columns import widest
from lakecdc.decode.alibaba.dts_records import (
    NAMESPACE,
    OPS,
    Layout,
    RecordReader,
    is_record_schema,
    published_layouts,
    read_record,
)
from lakecdc.decode.avro.containers import (
    LIMIT_OPTIONS,
    BlockLimits,
    is_ocf,
    ocf_records,
    plan_ocf_splits,
    read_ocf_header,
)
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.event import Parts
from lakecdc.decode.files.kcat import KCAT_KV_OPTIONS, kcat_kv_framing
from lakecdc.decode.files.splits import Split, kind_of, split_bytes, splits_frame
from lakecdc.decode.kafka.dumps import length_prefixed_splits
from lakecdc.decode.kafka.records import (
    DECODED_SCHEMA,
    TYPES_SCHEMA,
    Message,
    Out,
    decode_batches,
    read_messages,
    type_batches,
)
from lakecdc.decode.rows import RecordError, failed, rows_parts, skipped
from lakecdc.decode.spec import Images, Option, Ordering, VendorSpec
from lakecdc.errors import ConfigError
from lakecdc.spark.compat import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FRAMINGS = ("auto", "length-prefixed", "single", "kcat", "kcat-k")
SEQUENCES = ("timestamp", "position")
FRACTIONS = ("auto", "micros", "nanos")

DTS_AVRO = VendorSpec(
    name="dts-avro", ops=OPS, images=Images(whole="always"), ordering=Ordering("given"),
    options=(Option("framing", "auto"), Option("sequenceBy", "timestamp"), Option("dateTimeFraction", "auto"),
             *[Option(k, v) for k, v in {**KCAT_KV_OPTIONS, **LIMIT_OPTIONS}.items()]),
    binary=True,
)


# -- reading files (executors) --------------------------------------------------------------------------


@dataclass
class Reader:
    """Decodes :class:`~lakecdc.decode.files.splits.Split` s of DTS input into rows."""

    records: RecordReader
    _ocf: dict[str, Layout] = field(default_factory=dict, repr=False)

    def rows(self, split: Split) -> Iterator[Out]:
        if split.kind == "bad":
            with open(split.path, "rb") as fh:
                yield Out(0, 0, failed(split.note or "unreadable file"), fh.read(1 << 16))
        elif split.kind == "ocf":
            for row, offset, record, error, raw, layout in self._ocf_records(split):
                if error is not None:
                    yield Out(row, offset, failed(error), raw)
                else:
                    value = self.records.row(record, layout, [])
                    yield Out(row, offset, value, raw if value.error is not None else None)
        else:
            for m in read_messages(split, measure):
                yield self._message_row(m)

    def _message_row(self, m: Message) -> Out:
        if m.error is not None:
            return Out(m.row, m.offset, failed(m.error), m.raw)
        kafka = list(m.kafka or [])
        if not m.data:
            return Out(m.row, m.offset, skipped("tombstone", extra=kafka), m.raw)
        try:
            record, layout = self.message(m.data)
        except RecordError as exc:
            return Out(m.row, m.offset, failed(_where(m, str(exc))), m.raw)
        value = self.records.row(record, layout, kafka)
        if value.error is not None:
            value = value._replace(error=_where(m, value.error))
        return Out(m.row, m.offset, value, m.raw)

    @staticmethod
    def message(data: bytes) -> tuple[Any, Layout]:
        """A message's Record, read with the published schema (else the one without bornTimestamp)."""
        current, legacy = published_layouts()
        try:
            return read_record(data, current), current
        except RecordError as first:
            try:
                return read_record(data, legacy), legacy
            except RecordError:
                raise first from None

    def _ocf_records(self, split: Split) -> Iterator[tuple[int, int, Any, str | None, bytes, Layout]]:
        with open(split.path, "rb") as fh:
            header = read_ocf_header(fh)
            layout = self._ocf.get(split.path)
            if layout is None:
                layout = self._ocf[split.path] = Layout.of(header.schema, f"the header of {os.path.basename(split.path)}")
            for row, offset, record, error, raw in ocf_records(fh, header, layout.parsed, split, return_record_name=True):
                yield row, offset, record, error, raw, layout

    def types(self, split: Split) -> Iterator[tuple[str, str, str]]:
        """``(table, column, Spark type JSON)`` declared by the values of the split's records."""
        seen: set[tuple[str, str, str]] = set()
        for record, layout in self._records(split):
            found = [(t, c, d.json()) for t, c, d in self.records.types(record, layout, by_code=False)]
            found += [(t, c, _BY_CODE + d.json()) for t, c, d in self.records.code_types(record, layout)]
            for item in found:
                if item not in seen:
                    seen.add(item)
                    yield item

    def _records(self, split: Split) -> Iterator[tuple[Any, Layout]]:
        if split.kind == "ocf":
            for _row, _offset, record, error, _raw, layout in self._ocf_records(split):
                if error is None:
                    yield record, layout
        elif split.kind != "bad":
            for m in read_messages(split, measure):
                if m.error is None and m.data:
                    try:
                        yield self.message(m.data)
                    except RecordError:
                        continue


def measure(fh: BinaryIO, pos: int) -> list[int]:
    """Where a Record starting at byte ``pos`` of ``fh`` may end: as the published schema reads
    it, then as the one without ``bornTimestamp`` does (a kcat ``-K`` dump's values)."""
    ends: list[int] = []
    for layout in published_layouts():
        fh.seek(pos)
        try:
            schemaless_reader(fh, layout.parsed, None, return_record_name=True)
        except Exception:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError...
            continue
        ends.append(fh.tell())
    if not ends:
        raise RecordError("the DTS Record schemas do not read the bytes there: a cut message, or no DTS Record")
    return ends


def _where(m: Message, reason: str) -> str:
    """A kcat record's reason names its line (binary inputs are found by their byte offset)."""
    return f"line {m.row + 1}: {reason}" if isinstance(m.raw, str) and not reason.startswith("line ") else reason


# -- the decoder (driver) --------------------------------------------------------------------------------

#: marks a type that comes from a MySQL type code, not from a value (:meth:`Reader.types`)
_BY_CODE = "code:"


class DtsAvroDecoder(Decoder):
    """Alibaba DTS Avro ``Record`` s (length-prefixed dumps, kcat dumps, single messages, OCF) to canonical events."""

    KAFKA_RECORDS = "kcat-base64"

    spec = DTS_AVRO
    PYTHON_ROWS: ClassVar[bool] = True  # (see Decoder.PYTHON_ROWS)

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        for option, allowed in (("framing", FRAMINGS), ("sequenceBy", SEQUENCES), ("dateTimeFraction", FRACTIONS)):
            value = self.options[option].strip().lower()
            if value not in allowed:
                raise ConfigError(f"{self.name}: {option}={self.options[option]!r} is not one of {', '.join(allowed)}")
            self.options[option] = value
        self.limits = BlockLimits.of(self.name, self.options)
        self.kcat_kv = kcat_kv_framing(self.name, self.options["framing"], self.options)

    def inputs(self, files: Sequence[str]) -> list[str]:
        """The files that hold records: not the ``.avsc`` schemas beside them, not empty ones."""
        return [p for p in files if not p.endswith(".avsc") and os.path.getsize(p) > 0]

    def plan(self, files: Sequence[str], parallelism: int = 2) -> list[Split]:
        """The splits of the inputs: OCF files at blocks, length-prefixed files at messages."""
        paths = self.inputs(files)
        size_of = split_bytes(sum(os.path.getsize(p) for p in paths), parallelism)
        out: list[Split] = []
        for path in paths:
            if is_ocf(path):
                out += self._ocf_splits(path, size_of, self.limits)
            elif (kind := kind_of(path, self.options["framing"], kcat_kv=self.kcat_kv is not None)) == "messages":
                out += [Split(path, kind, s, e, r) for s, e, r in length_prefixed_splits(path, size_of)]
            else:
                sep, delim = self.kcat_kv or (b"", b"\n")
                out.append(Split(path, kind, 0, os.path.getsize(path), 0, separator=sep, delimiter=delim))
        return out

    @staticmethod
    def _ocf_splits(path: str, split_bytes: int, limits: BlockLimits) -> list[Split]:
        try:
            header, parts = plan_ocf_splits(path, split_bytes, limits)
        except (ValueError, OSError) as exc:
            return [Split(path, "bad", note=f"OCF file header: {exc}")]
        if not is_record_schema(header.schema):
            name = header.schema.get("name") if isinstance(header.schema, dict) else header.schema
            return [Split(path, "bad", note=f"an Avro object container file whose schema is {str(name)[:60]!r}, not the "
                                            f"DTS Record schema ({NAMESPACE}.Record)")]
        return [Split(path, "ocf", start, start + length, first, limits=limits) for start, length, first in parts]

    def _frame(self, spark: SparkSession, files: Sequence[str], body: Any, schema: T.StructType) -> DataFrame:
        splits = self.plan(files, default_parallelism(spark))
        reader = Reader(RecordReader(self.options["sequenceBy"], self.options["dateTimeFraction"]))
        return splits_frame(spark, splits, body, schema, reader=reader)

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """The Records as :data:`~lakecdc.decode.rows.ROW_SCHEMA` rows with ``_offset`` and ``_raw``."""
        return self._frame(ctx.spark, inputs, decode_batches, DECODED_SCHEMA)

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        return rows_parts(parsed)

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, each column's Spark type from its values (see the module docstring); a column
        seen with different types gets the type that holds them all (string when none does)."""
        rows = self._frame(spark, files, type_batches, TYPES_SCHEMA).distinct().collect()
        found: dict[str, dict[str, tuple[list[T.DataType], list[T.DataType]]]] = {}
        for r in rows:
            by_code = r["type"].startswith(_BY_CODE)
            dtype = T._parse_datatype_json_string(r["type"].removeprefix(_BY_CODE))  # noqa: SLF001 (pyspark's own)
            found.setdefault(r["table"], {}).setdefault(r["column"], ([], []))[by_code].append(dtype)
        # a column's values decide; its MySQL type code only when no record gives it a value
        return {t: {c: widest(values or codes) for c, (values, codes) in cols.items()} for t, cols in found.items()}


__all__ = ["DTS_AVRO", "DtsAvroDecoder", "Reader", "measure"]
