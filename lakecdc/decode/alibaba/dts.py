"""Alibaba Cloud DTS Avro (``--format dts-avro``): the ``Record`` DTS writes to Kafka (seed 002).

**What DTS writes.** DTS Avro is DTS's default Kafka format (change tracking, and synchronisation
to a Kafka cluster). Each Kafka record value is one ``com.alibaba.dts.formats.avro.Record`` in
Avro's binary encoding, *without* any header (no Confluent magic byte, no schema id): consumers
decode it with the published schema, as Alibaba's ``aliyun-dts-subscribe-demo`` does
(``schemaless_reader(BytesIO(value), load_schema("...Record.avsc"))``). The schema files are
vendored in ``lakecdc/decoders/schemas/dts/`` (Apache-2.0, from that demo). A record::

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

import functools
import io
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, ClassVar

from fastavro import parse_schema, schemaless_reader
from pyspark.sql import types as T

from lakecdc.decode.avro.containers import (
    LIMIT_OPTIONS,
    BlockLimits,
    is_ocf,
    ocf_records,
    plan_ocf_splits,
    read_ocf_header,
)
from lakecdc.decode.base import Decoder
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
from lakecdc.decode.rows import MISSING, Pairs, RecordError
from lakecdc.decoders._debezium import Row, failed, skipped
from lakecdc.decoders._dts_values import MYSQL_LONG, MYSQL_WIDE, Values
from lakecdc.decoders.debezium_json import canonical
from lakecdc.errors import ConfigError
from lakecdc.spark.compat import default_parallelism

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCHEMA_DIR = Path(__file__).parent / "schemas" / "dts"
NAMESPACE = "com.alibaba.dts.formats.avro"
FRAMINGS = ("auto", "length-prefixed", "single", "kcat", "kcat-k")
SEQUENCES = ("timestamp", "position")
FRACTIONS = ("auto", "micros", "nanos")

ROW_OPS = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}
MARKERS = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "ABORT", "HEARTBEAT", "CHECKPOINT", "COMMAND", "FILL",
                     "FINISH", "CONTROL", "RDB", "NOOP"})
#: MySQL binlog type codes (``dataTypeNumber`` of MySQL sources) typed without a value
_MYSQL_BY_CODE: dict[int, T.DataType] = {
    **{c: T.LongType() for c in MYSQL_LONG}, **{c: T.DecimalType(20, 0) for c in MYSQL_WIDE},
    4: T.DoubleType(), 5: T.DoubleType(), 7: T.TimestampType(), 10: T.DateType(), 14: T.DateType(),
    12: T.TimestampNTZType(), **{c: T.StringType() for c in (11, 15, 245, 247, 248, 249, 250, 251, 252, 253, 254, 255)},
}
_MYSQL_POSITION = re.compile(r"^(\d+)@(\d+)$")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})

# -- the schema ------------------------------------------------------------------------------------------


def _named_files(directory: Path) -> dict[str, Any]:
    return {p.name[: -len(".avsc")]: json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.avsc"))}


def _full(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _EnumsAsInts:
    """A (self-contained) schema with every enum read as its index: an ``int``. Avro writes an enum
    as its index, so the bytes read the same; an index the schema has no symbol for is then the
    record's problem, not the message's."""

    def __init__(self) -> None:
        self.enums: dict[str, list[str]] = {}  # short name -> symbols
        self.defined: set[str] = set()

    def walk(self, node: Any, namespace: str) -> Any:
        if isinstance(node, list):
            return [self.walk(b, namespace) for b in node]
        if isinstance(node, str):
            return self._reference(node, namespace)
        if not isinstance(node, dict):
            raise ValueError(f"not an Avro type: {node!r}")
        kind = node.get("type")
        if kind == "enum":
            self.enums[str(node["name"]).rsplit(".", 1)[-1]] = list(node.get("symbols") or [])
            self.defined.add(_full(str(node["name"]), node.get("namespace", namespace)))
            return "int"
        if kind in ("record", "error"):
            full = _full(str(node["name"]), node.get("namespace", namespace))
            self.defined.add(full)
            inner = full.rpartition(".")[0]
            fields = [{**f, "type": self.walk(f["type"], inner)} for f in node.get("fields") or ()]
            return {**node, "fields": fields}
        if kind == "array":
            return {**node, "items": self.walk(node["items"], namespace)}
        if kind == "map":
            return {**node, "values": self.walk(node["values"], namespace)}
        if isinstance(kind, (list, dict)) or (isinstance(kind, str) and kind not in _PRIMITIVES and kind != "fixed"):
            return self.walk(kind, namespace)
        return node

    def _reference(self, name: str, namespace: str) -> Any:
        if name in _PRIMITIVES:
            return name
        full = _full(name, namespace)
        if full.rsplit(".", 1)[-1] in self.enums:
            return "int"
        if full in self.defined or name in self.defined:
            return full if full in self.defined else name
        raise ValueError(f"the schema names the type {name!r}, which is not defined")


@dataclass(frozen=True)
class Layout:
    """One Record schema as read here: fastavro's parsed schema (enums as indexes) and the enums."""

    parsed: Any
    enums: dict[str, list[str]]
    label: str

    def symbol(self, enum: str, index: Any) -> str | None:
        symbols = self.enums.get(enum, [])
        return symbols[index] if isinstance(index, int) and 0 <= index < len(symbols) else None

    @classmethod
    def of(cls, schema: Any, label: str) -> Layout:
        walker = _EnumsAsInts()
        rewritten = walker.walk(schema, "")
        # parsed once with fastavro's hint, so that reading a message does not parse the schema again
        return cls(parse_schema(rewritten), walker.enums, label)


def published_schema(*, born_timestamp: bool = True) -> dict[str, Any]:
    """The vendored ``Record`` schema, each named type written out where it is first used
    (optionally without ``bornTimestamp``, the field later DTS versions added at the end)."""
    files = _named_files(SCHEMA_DIR)
    seen: set[str] = set()

    def inline(node: Any, namespace: str) -> Any:
        if isinstance(node, list):
            return [inline(b, namespace) for b in node]
        if isinstance(node, str):
            full = _full(node, namespace)
            if node in _PRIMITIVES or full in seen or full not in files:
                return node
            seen.add(full)
            return inline(files[full], full.rpartition(".")[0])
        if not isinstance(node, dict):
            return node
        if node.get("type") in ("record", "enum"):
            full = _full(str(node["name"]), node.get("namespace", namespace))
            seen.add(full)
            namespace = full.rpartition(".")[0]
        return {k: (inline(v, namespace) if k in ("type", "items", "values", "fields") else v) for k, v in node.items()}

    out = inline(files[f"{NAMESPACE}.Record"], NAMESPACE)
    if not born_timestamp:
        out = {**out, "fields": [f for f in out["fields"] if f["name"] != "bornTimestamp"]}
    return out


@functools.lru_cache(maxsize=1)
def _published() -> tuple[Layout, Layout]:
    return (Layout.of(published_schema(), "the DTS Record schema"),
            Layout.of(published_schema(born_timestamp=False), "the DTS Record schema without bornTimestamp"))


def is_record_schema(schema: Any) -> bool:
    """Whether an OCF header's schema is a DTS ``Record`` (any namespace: older SDKs used
    ``com.alibaba.alidts.formats.avro``)."""
    if not isinstance(schema, dict) or schema.get("type") != "record" or str(schema.get("name", "")).rsplit(".", 1)[-1] != "Record":
        return False
    names = {f.get("name") for f in schema.get("fields") or () if isinstance(f, dict)}
    return {"operation", "objectName", "fields", "beforeImages", "afterImages"} <= names


def read_record(data: bytes, layout: Layout) -> Any:
    """Decode ``data`` as exactly one Record (union branches as ``(name, value)``)."""
    bio = io.BytesIO(data)
    try:
        value = schemaless_reader(bio, layout.parsed, None, return_record_name=True)
    except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError...
        raise RecordError(f"{layout.label} does not read the message's {len(data)} bytes ({type(exc).__name__}: "
                          f"{exc}): a cut message, or no DTS Record") from None
    if bio.tell() != len(data):
        raise RecordError(f"{layout.label} reads {bio.tell()} of the message's {len(data)} bytes")
    return value


# -- records to rows ------------------------------------------------------------------------------------


def position(source_position: str, record_id: int) -> str:
    """``sourcePosition`` and the record ``id`` as one string whose order is the stream's (see the
    module docstring)."""
    tail = f"/{record_id:020d}" if record_id >= 0 else f"/-{-record_id:019d}"
    text = source_position.strip()
    m = _MYSQL_POSITION.match(text)
    if m:
        return f"{int(m.group(2)):010d}@{int(m.group(1)):020d}{tail}"
    if text.isdigit() and len(text) <= 20:
        return f"{int(text):020d}{tail}"
    return f"{text}{tail}"


@dataclass
class RecordReader:
    """Decodes DTS Records into canonical rows (runs in the executors)."""

    sequence_by: str = "timestamp"
    fraction: str = "auto"
    _values: dict[str, Values] = field(default_factory=dict, repr=False)

    def values(self, source_type: str) -> Values:
        if source_type not in self._values:
            nanos = self.fraction == "nanos" or (self.fraction == "auto" and source_type == "Oracle")
            self._values[source_type] = Values(source_type, nanos)
        return self._values[source_type]

    def row(self, record: Mapping[str, Any], layout: Layout, kafka: Pairs) -> Row:
        """One Record as a canonical row (skipped for non-row operations, failed when bad)."""
        name = layout.symbol("Operation", record.get("operation"))
        object_name = record.get("objectName") or None
        source = _source_pairs(record, layout, name) + list(kafka)
        if name is None:
            known = ", ".join(layout.enums.get("Operation", []))
            return failed(f"unknown operation: enum index {record.get('operation')} (the Record schema's operations "
                          f"are {known}); a newer DTS may have written it", table=object_name)
        if name == "DDL":
            sql = next((v for v in (record.get("afterImages"), record.get("beforeImages")) if isinstance(v, str)), None)
            extra = [*source, ("sql", sql)] if sql is not None else source
            return skipped("ddl", table=_object_table(object_name), extra=extra)
        op = ROW_OPS.get(name) or ("R" if name == "INIT" and isinstance(record.get("afterImages"), list) else None)
        if op is None:
            if name in MARKERS or name == "INIT":
                return skipped(name.lower(), table=_object_table(object_name), extra=source)
            return failed(f"unknown operation '{name}' (expected INSERT, UPDATE, DELETE, DDL or a marker)",
                          table=object_name)
        try:
            return self._event(record, layout, op, object_name, source)
        except RecordError as exc:
            return failed(str(exc), table=object_name)
        except Exception as exc:  # one odd record must not fail the batch
            return failed(f"could not read the record: {type(exc).__name__}: {exc}", table=object_name)

    def _event(self, record: Mapping[str, Any], layout: Layout, op: str, table: str | None, source: Pairs) -> Row:
        if not table:
            raise RecordError(f"'objectName' missing for operation {layout.symbol('Operation', record['operation'])} "
                              "(expected db.table)")
        columns = _fields(record)
        values = self.values(layout.symbol("SourceType", (record.get("source") or {}).get("sourceType")) or "OTHER")
        before = self._image(record, "beforeImages", columns, values, layout) if op in ("U", "D") else None
        after = self._image(record, "afterImages", columns, values, layout) if op in ("I", "U", "R") else None
        pos = position(str(record.get("sourcePosition") or ""), int(record.get("id") or 0))
        txid = str(record.get("sourceTxid") or "")
        return Row(
            table=table, op=op, op_ts=int(record["sourceTimestamp"]) * 1_000_000, pos=pos,
            seq=pos if self.sequence_by == "position" else None, txid=txid if txid not in ("", "0") else None,
            keys=primary_key(record.get("tags") or {}), before=before, after=after, source=source,
        )

    @staticmethod
    def _image(record: Mapping[str, Any], name: str, columns: list[tuple[str, int]], values: Values,
               layout: Layout) -> Pairs:
        image = record.get(name)
        if not isinstance(image, list):
            what = "null" if image is None else f"the string {str(image)[:40]!r}"
            raise RecordError(f"'{name}' is {what} for operation {layout.symbol('Operation', record['operation'])} "
                              "(expected an array of values aligned with 'fields')")
        if len(image) != len(columns):
            raise RecordError(f"'{name}' has {len(image)} value(s) but 'fields' names {len(columns)} column(s)")
        pairs: Pairs = []
        for i, ((column, _type_number), item) in enumerate(zip(columns, image, strict=True)):
            try:
                text = item_text(item, values, layout)
            except RecordError as exc:  # the reason names the element only when there is one
                raise RecordError(f"{name}[{i}] (column '{column}'): {exc}") from None
            if text is not MISSING:
                pairs.append((column, text))
        return pairs

    def types(self, record: Mapping[str, Any], layout: Layout, *, by_code: bool = True
              ) -> Iterator[tuple[str, str, T.DataType]]:
        """``(table, column, type)`` of the record's columns with a value (with ``by_code``, also
        those without one in this record, by their MySQL type code: :meth:`code_types`)."""
        name = layout.symbol("Operation", record.get("operation"))
        table = record.get("objectName")
        if (name not in ROW_OPS and name != "INIT") or not table:
            return
        try:
            columns = _fields(record)
        except RecordError:
            return
        source_type = layout.symbol("SourceType", (record.get("source") or {}).get("sourceType")) or "OTHER"
        values = self.values(source_type)
        typed: set[str] = set()
        for image in ("beforeImages", "afterImages"):
            items = record.get(image)
            if not isinstance(items, list) or len(items) != len(columns):
                continue
            for (column, type_number), item in zip(columns, items, strict=True):
                try:
                    _text, dtype = render_item(item, values, type_number, layout, column)
                except RecordError:
                    continue
                if dtype is not None:
                    typed.add(column)
                    yield table, column, dtype
        if by_code:
            for t, column, dtype in self.code_types(record, layout):
                if column not in typed:
                    yield t, column, dtype

    @staticmethod
    def code_types(record: Mapping[str, Any], layout: Layout) -> Iterator[tuple[str, str, T.DataType]]:
        """``(table, column, type)`` by the MySQL type code (``dataTypeNumber``) where it is
        unambiguous: what a column whose values are all NULL gets (MySQL sources only)."""
        name = layout.symbol("Operation", record.get("operation"))
        table = record.get("objectName")
        source_type = layout.symbol("SourceType", (record.get("source") or {}).get("sourceType"))
        if (name not in ROW_OPS and name != "INIT") or not table or source_type != "MySQL":
            return
        try:
            columns = _fields(record)
        except RecordError:
            return
        for column, type_number in columns:
            if type_number in _MYSQL_BY_CODE:
                yield table, column, _MYSQL_BY_CODE[type_number]


@functools.lru_cache(maxsize=64)
def _kind(name: str) -> str:
    """A union branch's short name (``com.alibaba.dts.formats.avro.Integer`` -> ``Integer``)."""
    return name.rsplit(".", 1)[-1]


def item_text(item: Any, values: Values, layout: Layout) -> Any:
    """One image element as text (None: NULL; ``MISSING``: EmptyObject NONE), as
    :func:`render_item` renders it, without its type (the per-value work of the rows)."""
    if item is None:
        return None
    if type(item) is tuple and len(item) == 2:
        kind = _kind(str(item[0]))
        try:
            return values.text(kind, item[1])
        except RecordError as exc:
            raise RecordError(f"{kind} {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"{kind} value {item[1]!r:.80} cannot be read: {exc}") from None
    if isinstance(item, int) and not isinstance(item, bool):  # EmptyObject, read by its index
        symbol = layout.symbol("EmptyObject", item)
        if symbol == "NULL":
            return None
        if symbol == "NONE":
            return MISSING
        raise RecordError(f"unknown EmptyObject index {item}")
    raise RecordError(f"not a DTS value: {item!r:.60}")


def render_item(item: Any, values: Values, type_number: int, layout: Layout, where: str) -> tuple[Any, T.DataType | None]:
    """One image element (``None``, ``(kind, value)``, or an EmptyObject index) as text and type."""
    if item is None:
        return None, None
    if isinstance(item, int) and not isinstance(item, bool):  # EmptyObject, read by its index
        symbol = layout.symbol("EmptyObject", item)
        if symbol == "NULL":
            return None, None
        if symbol == "NONE":
            return MISSING, None
        raise RecordError(f"{where}: unknown EmptyObject index {item}")
    if not (isinstance(item, tuple) and len(item) == 2):
        raise RecordError(f"{where}: not a DTS value: {item!r:.60}")
    kind = str(item[0]).rsplit(".", 1)[-1]
    try:
        return values.render(kind, item[1], type_number)
    except RecordError as exc:
        raise RecordError(f"{where}: {kind} {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{where}: {kind} value {item[1]!r:.80} cannot be read: {exc}") from None


def _fields(record: Mapping[str, Any]) -> list[tuple[str, int]]:
    fields = record.get("fields")
    if not isinstance(fields, list):
        what = "null" if fields is None else f"the string {str(fields)[:40]!r}"
        raise RecordError(f"'fields' is {what} (expected the array of the columns' names and dataTypeNumber)")
    return [(str(f["name"]), int(f.get("dataTypeNumber") or 0)) for f in fields]


def primary_key(tags: Mapping[str, str]) -> list[str] | None:
    """The ``PRIMARY`` columns of the ``pk_uk_info`` tag (None without one)."""
    text = tags.get("pk_uk_info")
    if not text:
        return None
    names = _primary_key(text)
    return None if names is None else list(names)


@functools.lru_cache(maxsize=1024)
def _primary_key(text: str) -> tuple[str, ...] | None:
    """The ``PRIMARY`` columns a ``pk_uk_info`` text names (one table's records repeat the text)."""
    try:
        info = json.loads(text)
    except ValueError:
        raise RecordError(f"tag 'pk_uk_info' is not JSON: {text[:60]!r} (expected {{\"PRIMARY\": [\"col\", ...]}})") from None
    names = info.get("PRIMARY") if isinstance(info, dict) else None
    if not isinstance(names, list) or not names:
        return None
    return tuple(str(n) for n in names)


def _object_table(object_name: str | None) -> str | None:
    """The table a non-row record names: ``objectName`` when it is ``db.table``, else None."""
    return object_name if object_name and "." in object_name else None


def _source_pairs(record: Mapping[str, Any], layout: Layout, operation: str | None) -> Pairs:
    src = record.get("source") or {}
    pairs: Pairs = [
        ("id", str(record.get("id"))), ("sourcePosition", record.get("sourcePosition")),
        ("safeSourcePosition", record.get("safeSourcePosition") or None),
        ("sourceTimestamp", str(record.get("sourceTimestamp"))), ("sourceTxid", record.get("sourceTxid") or None),
        ("sourceType", layout.symbol("SourceType", src.get("sourceType"))), ("sourceVersion", src.get("version")),
        ("operation", operation), ("objectName", record.get("objectName")),
    ]
    if record.get("bornTimestamp") is not None:
        pairs.append(("bornTimestamp", str(record["bornTimestamp"])))
    pairs += [(f"tag.{k}", v) for k, v in (record.get("tags") or {}).items()]
    return [(k, v) for k, v in pairs if v is not None]


# -- reading files (executors) --------------------------------------------------------------------------


@dataclass
class Reader:
    """Decodes :class:`~lakecdc.decoders.debezium_avro.Split` s of DTS input into rows."""

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
        current, legacy = _published()
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
    for layout in _published():
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

    name: ClassVar[str] = "dts-avro"
    PYTHON_ROWS: ClassVar[bool] = True  # (see Decoder.PYTHON_ROWS)
    OPTIONS: ClassVar[dict[str, str]] = {"framing": "auto", "sequenceBy": "timestamp", "dateTimeFraction": "auto",
                                         **KCAT_KV_OPTIONS, **LIMIT_OPTIONS}

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        for option, allowed in (("framing", FRAMINGS), ("sequenceBy", SEQUENCES), ("dateTimeFraction", FRACTIONS)):
            value = self.options[option].strip().lower()
            if value not in allowed:
                raise ConfigError(f"{self.name}: {option}={self.options[option]!r} is not one of {', '.join(allowed)}")
            self.options[option] = value
        self.limits = BlockLimits.of(self.name, self.options)
        self.kcat_kv = kcat_kv_framing(self.name, self.options["framing"], self.options)

    def plan(self, files: Sequence[str], parallelism: int = 2) -> list[Split]:
        """The splits of the inputs: OCF files at blocks, length-prefixed files at messages."""
        paths = [p for p in files if not p.endswith(".avsc") and os.path.getsize(p) > 0]
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

    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        return canonical(self._frame(spark, files, decode_batches, DECODED_SCHEMA), "_offset", "_raw")

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, each column's Spark type from its values (see the module docstring); a column
        seen with different types gets the type that holds them all (string when none does)."""
        from lakecdc.changes.columns import widest

        rows = self._frame(spark, files, type_batches, TYPES_SCHEMA).distinct().collect()
        found: dict[str, dict[str, tuple[list[T.DataType], list[T.DataType]]]] = {}
        for r in rows:
            by_code = r["type"].startswith(_BY_CODE)
            dtype = T._parse_datatype_json_string(r["type"].removeprefix(_BY_CODE))  # noqa: SLF001 (pyspark's own)
            found.setdefault(r["table"], {}).setdefault(r["column"], ([], []))[by_code].append(dtype)
        # a column's values decide; its MySQL type code only when no record gives it a value
        return {t: {c: widest(values or codes) for c, (values, codes) in cols.items()} for t, cols in found.items()}


__all__ = ["DtsAvroDecoder", "Layout", "Reader", "RecordReader", "position", "published_schema"]
