"""Canal JSON, as written by Alibaba Canal and by Alibaba DTS (seed 002), ``--format canal-json``.

One message per line, one message per statement (several rows)::

    {"data": [{"id": "1", "v": "a"}, {"id": "2", "v": null}], "old": null,
     "database": "shop", "table": "orders", "pkNames": ["id"], "type": "INSERT", "isDdl": false,
     "es": 1600161894000, "ts": 1600161894771, "id": 58, "sql": "",
     "mysqlType": {"id": "bigint(20)", "v": "varchar(50)"}, "sqlType": {"id": -5, "v": 12}}

* ``type`` ``INSERT`` / ``UPDATE`` / ``DELETE`` give ops ``I`` / ``U`` / ``D``; ``INIT`` (rows of
  a full load) gives ``R``, an upsert. Each element of ``data`` is one canonical event: ``idx`` is
  its index in the array, and all events of a message share its ``_file``/``_block``/``_row`` (the
  quarantine reports the message's line for each of them).
* ``data`` holds whole rows as text (``null`` is NULL; a column that is not a member of a row
  object is *missing*). For ``UPDATE``, ``old[i]`` holds the previous values of the columns of
  ``data[i]`` that changed, nothing else: the before image is ``data[i]`` with ``old[i]`` laid over
  it, so a key column in ``old`` makes the event a primary-key update.
* ``isDdl: true`` (``ALTER``, ``CREATE``, ``ERASE``, ``QUERY``, ...) is a skipped record
  (``source['skipped'] = 'ddl'``, the statement in ``source['sql']``), counted per table; lakecdc
  evolves the target from the rows themselves. ``TRUNCATE`` is the truncate op ``T``. Heartbeats
  and transaction markers (``HEARTBEAT``, ``MHEARTBEAT``, ``BEGIN``, ``COMMIT``, ``GTID``, ...) are
  skipped too (reason: the type in lower case).
* ``table`` is ``database.table``; ``keys`` is ``pkNames``; ``txid`` is ``gtid`` when present;
  ``source`` holds ``database``, ``type``, ``es``, ``ts``, ``id`` and ``gtid``.
* **Order** (``seq``): ``es`` (binlog time, ms; ``op_ts``), then ``id`` (``pos``: the message id /
  DTS cache offset, zero-padded to 20 digits), then the row's index in ``data``. ``es`` has the
  binlog's one-second resolution and is the time a statement *started*; when ``id`` grows over the
  whole stream (DTS's cache offset), ``sequenceBy=id`` orders by ``id`` and the row index alone,
  which is the binlog's commit order even for long statements that started before a change they
  commit after.
* **Types** (:meth:`CanalJsonDecoder.column_types`): from ``mysqlType``, else ``sqlType``; see
  :mod:`lakecdc.decoders._mysql_types` (exact decimals, unsigned bigint as decimal(20,0), dates,
  ``timestamp_ntz`` for datetime/timestamp). ``treatAllColumnsAsStrings=true`` types every column
  as a string.

**DTS instances created before 2022-03-20** (``layout=dts-before-2022-03-20``): such instances
swapped the two arrays of an ``UPDATE`` (``data`` = the row before, ``old`` = the row after, by
default every column) and wrote a ``DELETE``'s row into ``old`` with ``data`` null. With this
layout the after image is ``old[i]`` laid over ``data[i]`` and a delete's rows come from ``old``
(``data`` when ``old`` is null). Instances created or restarted since keep the open-source layout
(``layout=standard``, the default); a ``DELETE`` whose rows are only in ``old`` is quarantined with
a hint to this option.

Bad records (not JSON, a member of the wrong type, unknown ``type``, no ``table``, no ``es``, no
rows for a DML type, ``old`` and ``data`` of different lengths, a null row) are quarantined with
the reason; the other records of the file apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import widest
from lakecdc.changes.events import (
    IMAGE_TYPE,
    default_seq,
    last_wins,
    overlay,
    sortable_position,
    zero_pad,
)
from lakecdc.decode.files.lines import CORRUPT, read_json
from lakecdc.decoders._mysql_types import mysql_type, sql_type
from lakecdc.decoders.base import Decoder, first_error
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Canal ``type`` of a row message -> canonical op.
ROW_TYPES: dict[str, str] = {"INSERT": "I", "UPDATE": "U", "DELETE": "D", "INIT": "R"}
#: DDL types (skipped as ``ddl`` even when ``isDdl`` is absent); TRUNCATE is the truncate op.
DDL_TYPES = ("DDL", "CREATE", "ALTER", "ERASE", "DROP", "RENAME", "CINDEX", "DINDEX", "QUERY", "INIT_DDL")
#: Non-row messages skipped with their type (lower case) as the reason.
MARKER_TYPES = ("HEARTBEAT", "MHEARTBEAT", "BEGIN", "COMMIT", "ROLLBACK", "GTID", "XACOMMIT", "XAROLLBACK",
                "TRANSACTIONBEGIN", "TRANSACTIONEND")
LAYOUTS = ("standard", "dts-before-2022-03-20")
SEQUENCES = ("es", "id")

_TEXT = ("database", "table", "type", "isDdl", "es", "ts", "id", "sql", "gtid")
_DIGITS = "^[0-9]{1,18}$"


def message_schema() -> T.StructType:
    """The message schema Spark parses with (every scalar as exact text, rows as text maps)."""
    return T.StructType(
        [T.StructField("data", T.ArrayType(IMAGE_TYPE)), T.StructField("old", T.ArrayType(IMAGE_TYPE))]
        + [T.StructField(n, T.StringType()) for n in _TEXT]
        + [
            T.StructField("pkNames", T.ArrayType(T.StringType())),
            T.StructField("mysqlType", T.MapType(T.StringType(), T.StringType())),
            T.StructField("sqlType", T.MapType(T.StringType(), T.StringType())),
        ]
    )


def _types_schema() -> T.StructType:
    return T.StructType(
        [T.StructField(n, T.StringType()) for n in ("database", "table")]
        + [T.StructField(n, T.MapType(T.StringType(), T.StringType())) for n in ("mysqlType", "sqlType")]
    )



def qualified_table(database: Column, table: Column) -> Column:
    """``database.table`` (``table`` alone without a database; NULL without a table)."""
    db = F.when(F.trim(database) != "", database)
    tb = F.when(F.trim(table) != "", table)
    return F.when(tb.isNotNull(), F.concat_ws(".", db, tb))


def _lookup(mapping: dict[str, str], key: Column) -> Column:
    return F.element_at(F.create_map(*[F.lit(x) for kv in mapping.items() for x in kv]), key)


class CanalJsonDecoder(Decoder):
    """Canal JSON messages (Canal, Alibaba DTS) to canonical change events, one per row."""

    name: ClassVar[str] = "canal-json"
    LINES: ClassVar[bool] = True
    OPTIONS: ClassVar[dict[str, str]] = {
        "layout": "standard",
        "sequenceBy": "es",
        "treatAllColumnsAsStrings": "false",
    }

    def __init__(self, options: dict[str, str] | None = None) -> None:
        super().__init__(options)
        for option, allowed in (("layout", LAYOUTS), ("sequenceBy", SEQUENCES)):
            if self.options[option] not in allowed:
                raise ConfigError(f"{self.name}: {option}={self.options[option]!r} is not one of {', '.join(allowed)}")
        self.all_strings = self.flag("treatAllColumnsAsStrings")
        self.legacy = self.options["layout"] == "dts-before-2022-03-20"

    # -- types -----------------------------------------------------------------------------------
    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Per table, each column's type from the messages' ``mysqlType`` (else ``sqlType``).

        A column declared differently across messages (an ``ALTER ... MODIFY`` between them) gets
        the type that holds both (string when none does).
        """
        if self.all_strings:
            return {}
        df = read_json(spark, files, _types_schema(), staging=staging)
        table = qualified_table(F.col("database"), F.col("table"))

        def declared(member: str) -> DataFrame:
            entries = F.explode(F.map_entries(F.coalesce(member, F.create_map().cast("map<string,string>"))))
            return df.where(table.isNotNull()).select(table.alias("t"), entries.alias("e")).select(
                "t", F.col("e.key").alias("c"), F.col("e.value").alias("v"), F.lit(member).alias("k"))

        found: dict[str, dict[str, dict[str, list[T.DataType]]]] = {}
        for r in declared("mysqlType").unionByName(declared("sqlType")).distinct().collect():
            kind = "mysql" if r["k"] == "mysqlType" else "sql"
            dtype = mysql_type(r["v"]) if kind == "mysql" else sql_type(r["v"])
            found.setdefault(r["t"], {}).setdefault(r["c"], {"mysql": [], "sql": []})[kind].append(dtype)
        return {
            t: {c: widest(kinds["mysql"] or kinds["sql"]) for c, kinds in cols.items()}
            for t, cols in found.items()
        }

    # -- decoding --------------------------------------------------------------------------------
    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        m = read_json(spark, files, message_schema(), staging=staging)
        kind = F.upper(F.trim("type"))
        # (never NULL: a message without 'type' must meet the check that says so, not slip through
        # every check as NULL and come out a skipped record)
        ddl = F.coalesce(F.lower(F.trim("isDdl")) == "true", F.lit(False)) | F.coalesce(kind.isin(*DDL_TYPES), F.lit(False))
        row_op = F.when(~ddl, _lookup(ROW_TYPES, kind))
        truncate = F.coalesce(kind == "TRUNCATE", F.lit(False))
        marker = ~ddl & F.coalesce(kind.isin(*MARKER_TYPES), F.lit(False))
        skipped = F.when(truncate, None).when(ddl, F.lit("ddl")).when(marker, F.lower(kind))
        rows = self._rows_array(row_op)
        table = qualified_table(F.col("database"), F.col("table"))
        needs_position = row_op.isNotNull() | truncate
        es_ok = F.coalesce(F.trim("es").rlike(_DIGITS), F.lit(False))
        id_text = F.trim("id")
        message_error = first_error(
            (F.col(CORRUPT).isNotNull(), "not valid JSON, or a member of the wrong type (expected 'data' and "
             "'old' arrays of objects, 'pkNames' an array of names, 'mysqlType'/'sqlType' objects)"),
            (F.col("type").isNull() & ~ddl, "'type' missing"),
            (row_op.isNull() & ~truncate & skipped.isNull(), F.format_string(
                "unknown type '%s' (expected INSERT, UPDATE, DELETE or INIT; DDL messages carry isDdl true)",
                F.col("type"))),
            (needs_position & table.isNull(), "'table' missing or empty"),
            (needs_position & ~es_ok, F.format_string(
                "'es' missing or not a whole number of milliseconds: '%s'", F.coalesce("es", F.lit("")))),
            (needs_position & id_text.isNotNull() & ~F.coalesce(id_text.rlike(_DIGITS), F.lit(False)),
             F.format_string("'id' is not a whole number: '%s'", F.col("id"))),
            *self._row_message_checks(row_op, rows),
        )
        events = m.select("*", table.alias("_table"), row_op.alias("_op"), truncate.alias("_truncate"),
                          skipped.alias("_skipped"), message_error.alias("_msg_error"))
        exploded = events.select(
            "*",
            F.posexplode(
                F.when(F.col("_op").isNotNull() & F.col("_msg_error").isNull(), rows)
                .otherwise(F.array(F.lit(None).cast(IMAGE_TYPE)))
            ).alias("_i", "_r"),
        )
        return self._canonical(exploded, last_win=last_wins(spark))

    def _rows_array(self, row_op: Column) -> Column:
        """The array whose elements are the message's rows (legacy deletes: ``old``)."""
        if self.legacy:
            return F.when(row_op == "D", F.coalesce(F.when(F.size("old") > 0, F.col("old")), F.col("data"))).otherwise(
                F.col("data"))
        return F.col("data")

    def _row_message_checks(self, row_op: Column, rows: Column) -> list[tuple[Column, Column | str]]:
        has_rows = F.coalesce(F.size(rows) > 0, F.lit(False))
        old_rows = F.coalesce(F.size("old") > 0, F.lit(False))
        checks: list[tuple[Column, Column | str]] = []
        if not self.legacy:
            checks.append((
                (row_op == "D") & ~has_rows & old_rows,
                "DELETE with 'data' null and its rows in 'old': the layout of DTS instances created before "
                "2022-03-20; read such files with the option layout=dts-before-2022-03-20",
            ))
        where = F.lit("'data'")
        if self.legacy:
            where = F.when(row_op == "D", F.lit("'old' (or 'data')")).otherwise(where)
        checks += [
            (row_op.isNotNull() & ~has_rows, F.format_string(
                "%s missing or empty for type '%s' (expected an array of row objects)", where, F.col("type"))),
            ((row_op == "U") & F.col("old").isNotNull() & (F.size("old") != F.size("data")), F.format_string(
                "'old' has %d row(s) but 'data' has %d (expected one 'old' entry per row)",
                F.size("old"), F.size("data"))),
        ]
        return checks

    def _images(self, op: Column, row: Column, old: Column, *, last_win: bool) -> tuple[Column, Column]:
        """(before, after) of one row of a row message."""
        if self.legacy:
            before = F.when(op.isin("U", "D"), row)
            after = F.when(op == "U", overlay(row, old, last_win=last_win)).when(op.isin("I", "R"), row)
        else:
            before = F.when(op == "U", overlay(row, old, last_win=last_win)).when(op == "D", row)
            after = F.when(op.isin("I", "U", "R"), row)
        return before, after

    def _canonical(self, p: DataFrame, *, last_win: bool) -> DataFrame:
        i = F.col("_i")
        row = F.col("_r")
        old = F.try_element_at(F.col("old"), i + 1)
        is_rows = F.col("_op").isNotNull() & F.col("_msg_error").isNull()
        # a JSON null among the rows (a legacy delete's rows may come from 'old')
        where = "row %d of the message" if self.legacy else "'data[%d]'"
        row_error = F.when(is_rows & row.isNull(), F.format_string(f"{where} is null (expected a row object)", i))
        error = F.coalesce(F.col("_msg_error"), row_error)
        op = F.when(F.col("_truncate"), F.lit("T")).otherwise(F.col("_op"))
        event = op.isNotNull()
        op_ts = F.when(event, F.timestamp_millis(F.trim("es").try_cast("long")))
        pos = F.when(event & (F.trim("id") != ""), zero_pad(F.trim("id"), 20))
        idx = F.when(event, F.when(is_rows, i).otherwise(F.lit(0)))
        if self.options["sequenceBy"] == "id":
            seq = F.concat_ws("|", sortable_position(pos), zero_pad(idx.cast("string"), 6))
        else:
            seq = default_seq(op_ts, pos, idx)
        before, after = self._images(F.col("_op"), row, old, last_win=last_win)
        keys = F.when(F.size("pkNames") > 0, F.col("pkNames"))
        gtid = F.when(F.trim("gtid") != "", F.col("gtid"))
        source = F.map_filter(
            F.create_map(
                F.lit("database"), F.col("database"), F.lit("type"), F.col("type"), F.lit("es"), F.col("es"),
                F.lit("ts"), F.col("ts"), F.lit("id"), F.col("id"), F.lit("gtid"), gtid,
                F.lit("skipped"), F.col("_skipped"),
                F.lit("sql"), F.when(F.col("_skipped") == "ddl", F.col("sql")),
            ),
            lambda _k, v: v.isNotNull(),
        )
        good = error.isNull()
        return p.select(
            F.col("_table").alias("table"),
            F.when(good, op).alias("op"),
            op_ts.alias("op_ts"),
            pos.alias("pos"),
            idx.cast("int").alias("idx"),
            F.when(event, seq).alias("seq"),
            gtid.alias("txid"),
            F.when(event, keys).alias("keys"),
            F.when(is_rows, before).alias("before"),
            F.when(is_rows, after).alias("after"),
            source.alias("source"),
            "_file", "_block", "_row",
            error.alias("_error"),
        )
