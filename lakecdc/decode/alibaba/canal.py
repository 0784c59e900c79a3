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
  DTS cache offset, zero-padded to 20 digits). Canal gives every message of one client batch the
  same ``id``, and ``es`` has the binlog's one-second resolution, so many messages tie: they keep
  the order they were written in (the arrival), and the row's index in ``data`` orders only the
  rows of one message, after that (``Ordering(idx="arrival")``). ``es`` is the time a statement
  *started*; when ``id`` grows over the whole stream (DTS's cache offset), ``sequenceBy=id``
  orders by ``id`` alone (then arrival and row index), which is the binlog's commit order even for
  long statements that started before a change they commit after.
* **Types** (:meth:`CanalJsonDecoder.column_types`): from ``mysqlType``, else ``sqlType``; see
  :mod:`lakecdc.decode.alibaba.mysql_types` (exact decimals, unsigned bigint as decimal(20,0), dates,
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
from dataclasses import replace
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import widest
from lakecdc.changes.events import IMAGE_TYPE, overlay, zero_pad
from lakecdc.decode.alibaba.mysql_types import mysql_type, sql_type
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.checks import Check, bad_json, blank_as_null, first_error, missing, op_missing, unknown_op
from lakecdc.decode.event import Parts, source_map
from lakecdc.decode.files.lines import CORRUPT, read_json
from lakecdc.decode.spec import Images, Names, Op, OpTable, Option, Ordering, VendorSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Canal ``type`` of a row message -> canonical op.
ROW_TYPES: dict[str, Op] = {"INSERT": "I", "UPDATE": "U", "DELETE": "D", "INIT": "R"}
#: DDL types (skipped as ``ddl`` even when ``isDdl`` is absent); TRUNCATE is the truncate op.
DDL_TYPES = ("DDL", "CREATE", "ALTER", "ERASE", "DROP", "RENAME", "CINDEX", "DINDEX", "QUERY", "INIT_DDL")
#: Non-row messages skipped with their type (lower case) as the reason.
MARKER_TYPES = ("HEARTBEAT", "MHEARTBEAT", "BEGIN", "COMMIT", "ROLLBACK", "GTID", "XACOMMIT", "XAROLLBACK",
                "TRANSACTIONBEGIN", "TRANSACTIONEND")
LAYOUTS = ("standard", "dts-before-2022-03-20")
SEQUENCES = ("es", "id")

_TEXT = ("database", "table", "type", "isDdl", "es", "ts", "id", "sql", "gtid")
_DIGITS = "^[0-9]{1,18}$"

CANAL = VendorSpec(
    name="canal-json",
    ops=OpTable(
        {**ROW_TYPES, "TRUNCATE": "T"},
        skipped={**{t: "ddl" for t in DDL_TYPES}, **{t: t.lower() for t in MARKER_TYPES}},
        normal="upper-trim",
        expected="INSERT, UPDATE, DELETE or INIT; DDL messages carry isDdl true",
    ),
    images=Images(whole="always"),
    ordering=Ordering("default", idx="arrival"),
    names=Names(table="table", op="type", op_ts="es"),
    options=(
        Option("layout", "standard", "choice", LAYOUTS),
        Option("sequenceBy", "es", "choice", SEQUENCES),
        Option("treatAllColumnsAsStrings", "false", "flag"),
    ),
    lines=True,
)
#: ``sequenceBy=id``: ``id`` (20 digits), then the message's arrival, then the row's index in ``data``.
BY_ID = Ordering("pos-idx", pos_width=20, idx="arrival")


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
    return F.when(blank_as_null(table).isNotNull(), F.concat_ws(".", blank_as_null(database), table))


class CanalJsonDecoder(Decoder):
    """Canal JSON messages (Canal, Alibaba DTS) to canonical change events, one per row."""

    KAFKA_RECORDS = "values"

    spec = CANAL

    def __init__(self, options: dict[str, str] | None = None) -> None:
        super().__init__(options)
        self.all_strings = self.flag("treatAllColumnsAsStrings")
        self.legacy = self.options["layout"] == "dts-before-2022-03-20"
        if self.options["sequenceBy"] == "id":
            self.spec = replace(CANAL, ordering=BY_ID)

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
    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """Messages with their op, skipped kind and message-level reason, one row per row of
        ``data`` (``_i`` its index, ``_r`` the row; one row with ``_r`` NULL for a message
        without rows)."""
        ops = CANAL.op_table(self.options)
        m = read_json(ctx.spark, inputs, message_schema(), staging=ctx.staging)
        m = m.select("*", ops.code(F.col("type")).alias("_code"),
                     F.coalesce(F.lower(F.trim("isDdl")) == "true", F.lit(False)).alias("_ddl"),
                     qualified_table(F.col("database"), F.col("table")).alias("_table"))
        op, skipped, _ = ops.sql(F.col("type"), F.col("_code"))
        ddl = F.col("_ddl")
        # TRUNCATE is the truncate op even when the message says isDdl (Canal does)
        truncate = F.coalesce(op == "T", F.lit(False))
        m = m.select("*", F.when(truncate, op).when(~ddl, op).alias("_op"),
                     F.when(truncate, None).when(ddl, F.lit("ddl")).otherwise(skipped).alias("_skipped"))
        row_op = F.when(F.col("_op") != "T", F.col("_op"))
        m = m.select("*", row_op.alias("_row_op"))
        m = m.select("*", self._message_error(ops, F.col("_row_op"), self._rows_array(F.col("_row_op"))).alias("_msg_error"))
        rows = F.when(F.col("_row_op").isNotNull() & F.col("_msg_error").isNull(), self._rows_array(F.col("_row_op")))
        return m.select("*", F.posexplode(F.coalesce(rows, F.array(F.lit(None).cast(IMAGE_TYPE)))).alias("_i", "_r"))

    def _message_error(self, ops: OpTable, row_op: Column, rows: Column) -> Column:
        """The reason a whole message is bad (NULL when it is not)."""
        names = self.spec.names
        event = F.col("_op").isNotNull()
        es_ok = F.coalesce(F.trim("es").rlike(_DIGITS), F.lit(False))
        id_text = F.trim("id")
        return first_error(
            bad_json(F.col(CORRUPT), "'data' and 'old' arrays of objects, 'pkNames' an array of names, "
                     "'mysqlType'/'sqlType' objects"),
            op_missing(F.col("type"), names.op, where=~F.col("_ddl")),
            unknown_op(F.col("type"), event | F.col("_skipped").isNotNull(), ops, names.op),
            missing(F.col("_table"), names.table, where=event),
            (event & ~es_ok, F.format_string(
                "'es' missing or not a whole number of milliseconds: '%s'", F.coalesce("es", F.lit("")))),
            (event & id_text.isNotNull() & ~F.coalesce(id_text.rlike(_DIGITS), F.lit(False)),
             F.format_string("'id' is not a whole number: '%s'", F.col("id"))),
            *self._row_message_checks(row_op, rows),
        )

    def _rows_array(self, row_op: Column) -> Column:
        """The array whose elements are the message's rows (legacy deletes: ``old``)."""
        if self.legacy:
            return F.when(row_op == "D", F.coalesce(F.when(F.size("old") > 0, F.col("old")), F.col("data"))).otherwise(
                F.col("data"))
        return F.col("data")

    def _row_message_checks(self, row_op: Column, rows: Column) -> list[Check]:
        has_rows = F.coalesce(F.size(rows) > 0, F.lit(False))
        old_rows = F.coalesce(F.size("old") > 0, F.lit(False))
        checks: list[Check] = []
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
        """(before, after) of one row of a row message (kept only for the ops whose images they
        are: :attr:`VendorSpec.images`)."""
        changed = overlay(row, old, last_win=last_win)
        if self.legacy:
            return row, F.when(op == "U", changed).otherwise(row)
        return F.when(op == "U", changed).otherwise(row), row

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        i, row = F.col("_i"), F.col("_r")
        is_rows = F.col("_row_op").isNotNull() & F.col("_msg_error").isNull()
        # a JSON null among the rows (a legacy delete's rows may come from 'old')
        where = "row %d of the message" if self.legacy else "'data[%d]'"
        event = F.col("_op").isNotNull()
        before, after = self._images(F.col("_op"), row, F.try_element_at(F.col("old"), i + 1), last_win=ctx.last_win)
        gtid = blank_as_null(F.col("gtid"))
        return Parts(
            table=F.col("_table"),
            op=F.col("_op"),
            op_ts=F.when(event, F.timestamp_millis(F.trim("es").try_cast("long"))),
            pos=F.when(event & (F.trim("id") != ""), zero_pad(F.trim("id"), 20)),
            idx=i,
            txid=gtid,
            keys=F.when(event & (F.size("pkNames") > 0), F.col("pkNames")),
            before=before,
            after=after,
            source=source_map(("database", F.col("database")), ("type", F.col("type")), ("es", F.col("es")),
                              ("ts", F.col("ts")), ("id", F.col("id")), ("gtid", gtid),
                              ("sql", F.when(F.col("_skipped") == "ddl", F.col("sql")))),
            skipped=F.col("_skipped"),
            checks=[
                (F.col("_msg_error").isNotNull(), F.col("_msg_error")),
                (is_rows & row.isNull(), F.format_string(f"{where} is null (expected a row object)", i)),
            ],
        )


__all__ = ["CANAL", "CanalJsonDecoder", "message_schema", "qualified_table"]
