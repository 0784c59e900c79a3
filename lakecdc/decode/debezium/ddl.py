"""Debezium schema-change records (``tableChanges``): the table's columns, their types and keys.

A connector configured with ``include.schema.changes`` writes a record to its schema-change
topic whenever a captured table is created, altered or dropped (seed 004, "schema change topic").
Its ``tableChanges`` (in the payload, or inside the ``historyRecord`` text MySQL's older records
embed) hold, per table change, ``type`` (``CREATE``/``ALTER``/``DROP``), ``id``
(``"DB"."SCHEMA"."TABLE"``) and the table *after* the change: ``primaryKeyColumnNames`` and
``columns`` (``name``, ``jdbcType``, ``typeName``, ``length``, ``scale``, ``optional``,
``position``). lakecdc uses them so that a table it creates or evolves has the DDL's columns and
types before any row carries them:

* the record stays a skipped row (``source['skipped'] = 'schema change'``), named by its first
  table change, with ``keys`` the primary key and ``after`` the DDL's columns by ``position``, each
  NULL: the pipeline adds those columns (``CREATE``: a new table with every column; ``ALTER ADD
  COLUMN``: the column is added). A run holding only the DDL creates the table when its key is
  known. Columns a later DDL no longer lists (``ALTER DROP COLUMN``) are **kept**: Delta rows
  written before still hold them, and a column mapping rename would lose history; they read NULL
  from then on. A ``DROP`` table change names no columns and drops nothing.
* the decoders' ``column_types`` offer the DDL's types (:func:`ddl_type`) for the columns the
  messages' own Kafka Connect schemas do not type: a Connect type always wins. Between schema
  changes of one table the latest one wins (connector position, then ``source.ts_ms``). An
  existing column keeps its type (delta-rs cannot widen a column type): a value that no longer
  fits is quarantined with the reason, as any value that does not fit.

**Types** (connector-aware where the names differ; the aim is the type Debezium's own Kafka
Connect schema gives the column under default settings, so a table made from a DDL and one made
from rows agree; see :func:`lakecdc.decode.kafka.connect_values.spark_type`):

==========================================================  ==========================================
DDL column                                                  Spark type
==========================================================  ==========================================
Oracle ``NUMBER(p, s)``, ``s <= 0``, ``p - s < 19``           tinyint / smallint / int / bigint by
                                                            digits (< 3, < 5, < 10, < 19), as Debezium
Oracle ``NUMBER(p, s)`` otherwise; ``DECIMAL``/``NUMERIC``    ``decimal(p, s)`` (string above 38 digits)
Oracle ``NUMBER`` without precision, ``FLOAT``, ``DECFLOAT``  string: any of 38 digits at any scale,
                                                            which no ``decimal(p, s)`` holds exactly
``SMALLINT``, ``INTEGER``/``INT``, ``BIGINT``, ``TINYINT``      smallint, int, bigint, smallint
``REAL``, ``BINARY_FLOAT``; ``DOUBLE``, ``BINARY_DOUBLE``       float; double
``BOOLEAN``, ``BIT``                                          boolean
``CHAR``, ``VARCHAR2``, ``NVARCHAR2``, ``CLOB``, ``GRAPHIC``,   string
``XML``, ...
Oracle ``DATE``; ``TIMESTAMP[(n)]`` with ``n <= 6``,          timestamp (Oracle ``DATE`` has a time)
``... WITH [LOCAL] TIME ZONE``
``DATE`` (Db2 and others)                                   date
``TIME``, ``TIMESTAMP(n)`` with ``n > 6``, ``INTERVAL``        string (no time-of-day type, no nanos)
binary (``RAW``, ``BLOB``, ``VARBINARY``, ...)               string (base64 text, as Debezium writes)
anything else                                               by ``jdbcType`` (``java.sql.Types``),
                                                            else string
==========================================================  ==========================================

**Messages without schema** (``schemas.enable=false``) carry decimals as base64 bytes
(``decimal.handling.mode=precise``) and dates and times as epoch numbers, which only a schema
turns back into values: when a run holds row messages without schema (any table's: the type
pass stops looking once it found one), the DDL's decimal, date and timestamp types are not offered
for that run, and those columns are typed from their values as before.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pyspark.sql import types as T

from lakecdc.changes.columns import widest

#: ``type`` of a declared-types row saying the run holds row messages without a schema.
SCHEMALESS = "schemaless"
_DDL_KEY = "ddl"
_ORDER_WIDTH = 20
_OPTIONS = (" IDENTITY", " UNSIGNED", " ZEROFILL", " GENERATED", " NOT NULL", " DEFAULT")
_PARENS = re.compile(r"\(\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?\)")
_STRING_NAMES = ("CHAR", "VARCHAR", "VARCHAR2", "NCHAR", "NVARCHAR", "NVARCHAR2", "CLOB", "NCLOB", "DBCLOB",
                 "LONG", "LONG VARCHAR", "TEXT", "GRAPHIC", "VARGRAPHIC", "LONG VARGRAPHIC", "XML", "XMLTYPE",
                 "ROWID", "UROWID", "JSON", "ENUM", "SET", "UUID", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT")
_BINARY_NAMES = ("RAW", "LONG RAW", "BLOB", "BINARY", "VARBINARY", "BYTEA", "IMAGE", "TINYBLOB", "MEDIUMBLOB",
                 "LONGBLOB")
_SIMPLE: dict[str, T.DataType] = {
    "SMALLINT": T.ShortType(), "INT2": T.ShortType(), "TINYINT": T.ShortType(),
    "INTEGER": T.IntegerType(), "INT": T.IntegerType(), "INT4": T.IntegerType(), "MEDIUMINT": T.IntegerType(),
    "SERIAL": T.IntegerType(), "BIGINT": T.LongType(), "INT8": T.LongType(), "BIGSERIAL": T.LongType(),
    "REAL": T.FloatType(), "BINARY_FLOAT": T.FloatType(), "FLOAT4": T.FloatType(),
    "DOUBLE": T.DoubleType(), "DOUBLE PRECISION": T.DoubleType(), "BINARY_DOUBLE": T.DoubleType(),
    "FLOAT8": T.DoubleType(), "FLOAT": T.DoubleType(), "BOOLEAN": T.BooleanType(), "BOOL": T.BooleanType(), "BIT": T.BooleanType(),
    "DECFLOAT": T.StringType(), "TIME": T.StringType(), "INTERVAL": T.StringType(), "YEAR": T.IntegerType(),
}
#: ``java.sql.Types`` codes (a column whose type name says nothing lakecdc knows).
_JDBC: dict[int, T.DataType] = {
    -7: T.BooleanType(), 16: T.BooleanType(), -6: T.ShortType(), 5: T.ShortType(), 4: T.IntegerType(),
    -5: T.LongType(), 7: T.FloatType(), 6: T.DoubleType(), 8: T.DoubleType(), 91: T.DateType(),
    93: T.TimestampType(), 2014: T.TimestampType(),
}


@dataclass(frozen=True)
class DdlColumn:
    """One ``tableChanges[].table.columns[]`` entry."""

    name: str
    type_name: str
    jdbc_type: int | None
    length: int | None
    scale: int | None
    position: int


@dataclass(frozen=True)
class TableChange:
    """One table change of a schema-change record: the table after it."""

    kind: str  # CREATE | ALTER | DROP
    ident: str
    keys: tuple[str, ...]
    columns: tuple[DdlColumn, ...]


def history(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    """The schema-change record itself: the payload, or the ``historyRecord`` text it embeds."""
    if payload.get("tableChanges") is None and isinstance(payload.get("historyRecord"), str):
        try:
            inner = json.loads(payload["historyRecord"])
        except ValueError:
            return payload
        return inner if isinstance(inner, Mapping) else payload
    return payload


def _int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        return int(str(value))
    except ValueError:
        return None


def _column(raw: Mapping[str, Any], index: int) -> DdlColumn | None:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return None
    position = _int(raw.get("position"))
    return DdlColumn(
        name=name, type_name=str(raw.get("typeName") or raw.get("typeExpression") or ""),
        jdbc_type=_int(raw.get("jdbcType")), length=_int(raw.get("length")), scale=_int(raw.get("scale")),
        position=position if position is not None else index + 1,
    )


def member_map(value: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    """The object ``value[name]``; empty when it is absent or no object."""
    found = value.get(name)
    return found if isinstance(found, Mapping) else {}


def table_changes(payload: Mapping[str, Any]) -> list[TableChange]:
    """The record's table changes (entries that are no object are passed over)."""
    out = []
    for change in history(payload).get("tableChanges") or ():
        if not isinstance(change, Mapping):
            continue
        spec = member_map(change, "table")
        raw_cols = [c for c in spec.get("columns") or () if isinstance(c, Mapping)]
        found = [_column(c, i) for i, c in enumerate(raw_cols)]
        cols = [c for c in found if c is not None]
        out.append(TableChange(
            kind=str(change.get("type") or "").upper(), ident=str(change.get("id") or ""),
            keys=tuple(str(k) for k in spec.get("primaryKeyColumnNames") or ()),
            columns=tuple(sorted(cols, key=lambda c: c.position)),
        ))
    return out


def table_of(ident: str, connector: str) -> str | None:
    """``"DB"."SCHEMA"."TABLE"`` as data events name the table: its last two parts (three for
    SQL Server, whose events name ``DB.SCHEMA.TABLE``)."""
    parts = [p.strip('"`[]') for p in re.findall(r'"[^"]*"|`[^`]*`|\[[^\]]*\]|[^.]+', ident)]
    keep = 3 if connector == "sqlserver" else 2
    return ".".join(parts[-keep:]) if parts else None


# -- types -----------------------------------------------------------------------------------------


def _base(type_name: str) -> tuple[str, int | None, int | None]:
    """``NUMBER(10, 2) identity`` as ``("NUMBER", 10, 2)``: the name without size and options."""
    upper = " ".join(type_name.strip().upper().split())
    m = _PARENS.search(upper)
    precision = int(m.group(1)) if m else None
    scale = int(m.group(2)) if m and m.group(2) is not None else None
    name = _PARENS.sub("", upper)
    for option in _OPTIONS:
        name = name.split(option)[0]
    return " ".join(name.split()), precision, scale


def _decimal(precision: int | None, scale: int | None) -> T.DataType:
    if precision is None or precision <= 0:
        return T.StringType()
    s = scale or 0
    if s < 0:
        precision, s = precision - s, 0
    precision = max(precision, s, 1)
    return T.DecimalType(precision, s) if precision <= 38 else T.StringType()


def _oracle_number(precision: int | None, scale: int | None) -> T.DataType:
    """Debezium's Oracle NUMBER: integers by digits while they fit a long, else Decimal."""
    if precision is None or precision <= 0 or (scale is not None and scale == -127):
        return T.StringType()  # NUMBER / FLOAT: VariableScaleDecimal
    s = scale or 0
    if s <= 0 and precision - s < 19:
        digits = precision - s
        return T.ByteType() if digits < 3 else T.ShortType() if digits < 5 else T.IntegerType() if digits < 10 \
            else T.LongType()
    return _decimal(precision, s)


def _timestamp(fraction: int | None) -> T.DataType:
    return T.TimestampType() if fraction is None or fraction <= 6 else T.StringType()


def ddl_type(column: DdlColumn, connector: str) -> T.DataType:
    """The Spark type of a DDL column (see the module docstring's table)."""
    name, size, size_scale = _base(column.type_name)
    precision = size if size is not None else column.length
    scale = size_scale if size_scale is not None else column.scale
    oracle = connector == "oracle"
    if name == "NUMBER":
        return _oracle_number(precision, scale)
    if name == "FLOAT" and oracle:
        return T.StringType()  # Debezium: VariableScaleDecimal
    if name in ("DECIMAL", "NUMERIC", "DEC"):
        return _decimal(precision, scale)
    if name == "DATE":
        return T.TimestampType() if oracle else T.DateType()
    if name.startswith("TIMESTAMP") or name in ("DATETIME", "DATETIME2", "SMALLDATETIME", "DATETIMEOFFSET"):
        return _timestamp(size if size is not None else column.scale)
    if name.startswith("INTERVAL") or name.startswith("TIME"):
        return T.StringType()
    if name in _SIMPLE:
        return _SIMPLE[name]
    if name in _STRING_NAMES or name in _BINARY_NAMES or "CHAR" in name or "FOR BIT DATA" in name:
        return T.StringType()
    if column.jdbc_type in (2, 3):
        return _decimal(column.length, column.scale)
    return _JDBC.get(column.jdbc_type if column.jdbc_type is not None else 0, T.StringType())


def _encoded(dtype: T.DataType) -> bool:
    """A type whose values Debezium writes encoded (bytes, epoch numbers) without a schema."""
    return isinstance(dtype, (T.DecimalType, T.DateType, T.TimestampType))


# -- declared types: from the executors to column_types ---------------------------------------------


def order_of(pos: str | None, op_ts: int | None) -> str:
    """How schema changes of one table are ordered: connector position, then time."""
    return f"{pos or ''}|{str(op_ts if op_ts is not None else 0).rjust(_ORDER_WIDTH, '0')}"


def declared_rows(changes: Sequence[TableChange], connector: str, order: str,
                  naming: Any = None) -> Iterator[tuple[str, str, str]]:
    """``(table, column, entry)`` rows of a schema-change record for a decoder's type pass; the
    entry is JSON ``{"ddl": order, "type": <Spark type JSON>}`` (:func:`merge_declared` reads it).
    ``naming`` (``ident -> table``) overrides :func:`table_of`."""
    for change in changes:
        if change.kind == "DROP":
            continue
        table = naming(change.ident) if naming else table_of(change.ident, connector)
        if not table:
            continue
        for col in change.columns:
            entry = json.dumps({_DDL_KEY: order, "type": ddl_type(col, connector).json()}, separators=(",", ":"))
            yield table, col.name, entry


class TypeRow(Protocol):
    """A row of a type pass (``table``, ``column``, ``type``), e.g. a collected Spark row."""

    def __getitem__(self, name: str, /) -> Any: ...


def merge_declared(rows: Iterable[TypeRow]) -> dict[str, dict[str, T.DataType]]:
    """Per table, the column types of the rows a decoder's type pass found: Kafka Connect types
    (several for one column: the type that holds them all), else the latest schema change's type
    (not its decimal/date/timestamp types when the run has row messages without schema)."""
    connect: dict[str, dict[str, list[T.DataType]]] = {}
    ddl: dict[str, dict[str, tuple[str, T.DataType]]] = {}
    schemaless = False
    for r in rows:
        text = r["type"]
        if text == SCHEMALESS:
            schemaless = True
            continue
        doc = json.loads(text)
        if isinstance(doc, dict) and _DDL_KEY in doc:
            dtype = T._parse_datatype_json_string(doc["type"])  # noqa: SLF001 (pyspark's own parser)
            seen = ddl.setdefault(r["table"], {}).get(r["column"])
            if seen is None or doc[_DDL_KEY] >= seen[0]:
                ddl[r["table"]][r["column"]] = (doc[_DDL_KEY], dtype)
            continue
        connect.setdefault(r["table"], {}).setdefault(r["column"], []).append(
            T._parse_datatype_json_string(text))  # noqa: SLF001 (pyspark's own parser)
    out = {t: {c: widest(ts) for c, ts in cols.items()} for t, cols in connect.items()}
    for table, cols in ddl.items():
        # (a column its Connect schema declares without a type takes its schema change's type)
        typed = {c.lower() for c, t in out.get(table, {}).items() if not isinstance(t, T.NullType)}
        mine = out.setdefault(table, {})
        for column, (_order, dtype) in cols.items():
            if column.lower() not in typed and not (schemaless and _encoded(dtype)):
                mine[column] = dtype
    return out


__all__ = [
    "SCHEMALESS", "DdlColumn", "TableChange", "TypeRow", "ddl_type", "declared_rows", "history", "member_map",
    "merge_declared", "order_of", "table_changes", "table_of",
]
