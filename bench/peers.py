"""The contenders lakecdc is measured against, as notebooks would write them.

Each reads a batch of change events, either GoldenGate op-modeled JSON (``images="partial"``: an
update's after image may hold only the key and the changed columns) or the same changes as
Debezium JSON without schema (``images="whole"``: every after image is the whole new row).

* :func:`typical_notebook`: what a Spark notebook usually does with a CDC batch: keep the latest
  event per key (``row_number()`` over the event order, descending), delete keys whose latest
  event is a delete, upsert the others from their after image. Fast, and right on whole images,
  but wrong on partial ones: columns absent from a partial after image become NULL.
* :func:`correct_notebook`: what a Spark expert writes by hand for partial images: images read
  as maps (a column the image lacks is not carried; a carried NULL is), per key one window: the
  newest op and, per column, the newest value carried since the key's last delete; typed casts;
  a MERGE updating only the carried columns.
* Both merge either with delta-rs (``toArrow()`` and ``DeltaTable.merge``) or with Delta's own
  engine in Spark (``MERGE INTO`` from the DataFrame, nothing collected to the driver).
* :func:`floor`: pyarrow's JSON reader on the same file with an explicit schema and nothing else;
  no consolidation or write can beat parsing the input once.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bench.generate import KEY, SOURCE_SCHEMA

OP_COLUMN = "_op"
#: the source columns after the key
COLUMNS = SOURCE_SCHEMA.names[1:]
IMAGES = ("partial", "whole")


def arrow_event_schema() -> pa.Schema:
    """The GoldenGate op-modeled message, with ``before``/``after`` typed as the source table."""
    row = pa.struct(list(SOURCE_SCHEMA))
    return pa.schema(
        [
            ("table", pa.string()),
            ("op_type", pa.string()),
            ("op_ts", pa.string()),
            ("current_ts", pa.string()),
            ("pos", pa.string()),
            ("primary_keys", pa.list_(pa.string())),
            ("before", row),
            ("after", row),
        ]
    )


def _spark_type(arrow_type: pa.DataType) -> T.DataType:
    if pa.types.is_int64(arrow_type):
        return T.LongType()
    if pa.types.is_string(arrow_type):
        return T.StringType()
    if pa.types.is_decimal(arrow_type):
        return T.DecimalType(arrow_type.precision, arrow_type.scale)
    raise TypeError(f"no Spark type for {arrow_type}")


def spark_event_schema() -> T.StructType:
    """:func:`arrow_event_schema` as a Spark schema."""
    fields = []
    for field in arrow_event_schema():
        if pa.types.is_struct(field.type):
            spark_type: T.DataType = T.StructType(
                [T.StructField(child.name, _spark_type(child.type)) for child in field.type]
            )
        elif pa.types.is_list(field.type):
            spark_type = T.ArrayType(T.StringType())
        else:
            spark_type = _spark_type(field.type)
        fields.append(T.StructField(field.name, spark_type))
    return T.StructType(fields)


_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
#: the GoldenGate message members a map reader parses (images as maps: presence is a key being there)
MAP_SCHEMA = T.StructType([
    T.StructField("table", T.StringType()), T.StructField("op_type", T.StringType()),
    T.StructField("op_ts", T.StringType()), T.StructField("pos", T.StringType()),
    T.StructField("before", _TEXT_MAP), T.StructField("after", _TEXT_MAP),
])


def debezium_schema(image: T.DataType) -> T.StructType:
    """The Debezium envelope members a notebook reads: the images (as ``image``), ``op``, and the
    event order from ``source`` (``ts_us``, then the SCN)."""
    source = T.StructType([T.StructField("ts_us", T.LongType()), T.StructField("scn", T.StringType())])
    return T.StructType([T.StructField("before", image), T.StructField("after", image),
                         T.StructField("op", T.StringType()), T.StructField("source", source)])


#: per event: the key, the order (``ts``, ``pos``), the op as I/U/D, of GoldenGate and Debezium messages
_GG_EVENT = ("op_ts AS ts", "pos", "op_type AS op")
_DEBEZIUM_EVENT = ("source.ts_us AS ts", "CAST(source.scn AS BIGINT) AS pos",
                   "CASE op WHEN 'd' THEN 'D' WHEN 'u' THEN 'U' ELSE 'I' END AS op")


def _messages(spark: SparkSession, events: Path, images: str, typed: bool) -> DataFrame:
    """``events`` read with its images typed as the source table (``typed``) or as maps, and the
    key, order and op of each event beside them."""
    if images == "partial":
        messages = spark.read.schema(spark_event_schema() if typed else MAP_SCHEMA).json(str(events))
        event = _GG_EVENT
    else:
        row = T.StructType([T.StructField(f.name, _spark_type(f.type)) for f in SOURCE_SCHEMA])
        messages = spark.read.schema(debezium_schema(row if typed else _TEXT_MAP)).json(str(events))
        event = _DEBEZIUM_EVENT
    key = f"coalesce(after.{KEY}, before.{KEY})" if typed else f"CAST(coalesce(after['{KEY}'], before['{KEY}']) AS BIGINT)"
    return messages.selectExpr(f"{key} AS {KEY}", *event, "after")


# --- The typical notebook: the newest row per key -------------------------------------------


def latest_rows(spark: SparkSession, events: Path, images: str = "partial") -> DataFrame:
    """The latest event per key by ``row_number()``: its after image (NULL for a delete) and its op
    type (I/U/D) in :data:`OP_COLUMN`."""
    latest_first = Window.partitionBy(KEY).orderBy(F.col("ts").desc(), F.col("pos").desc())
    return (
        _messages(spark, events, images, typed=True)
        .select(KEY, *(F.col(f"after.{name}").alias(name) for name in COLUMNS), F.col("op").alias(OP_COLUMN),
                "ts", "pos")
        .withColumn("_rn", F.row_number().over(latest_first))
        .where(F.col("_rn") == 1)
        .select(*SOURCE_SCHEMA.names, OP_COLUMN)
    )


def latest_per_key(spark: SparkSession, events: Path, images: str = "partial") -> pa.Table:
    """:func:`latest_rows` as Arrow."""
    return latest_rows(spark, events, images).toArrow()


#: the typical notebook's update: every column from the newest row
_REPLACE = {name: f"s.{name}" for name in COLUMNS}


def typical_notebook(spark: SparkSession, events: Path, table: Path, images: str = "partial") -> None:
    """:func:`latest_per_key`, then a delta-rs MERGE into the Delta table at ``table``."""
    merge_delta_rs(latest_per_key(spark, events, images), table, _REPLACE)


def typical_notebook_delta_spark(spark: SparkSession, events: Path, table: Path, images: str = "partial") -> None:
    """:func:`latest_rows`, then Delta's MERGE in Spark into the Delta table at ``table``."""
    merge_delta_spark(spark, latest_rows(spark, events, images), table, _REPLACE)


# --- The correct notebook: per column, the newest value carried ------------------------------

_WHOLE_KEY = f"PARTITION BY {KEY} ORDER BY ts, pos ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING"


def correct_rows(spark: SparkSession, events: Path, images: str = "partial") -> DataFrame:
    """Per key: the newest op in :data:`OP_COLUMN` and, per source column, ``p_<column>`` (the batch
    sets it: an event since the key's last delete carried it, or the delete emptied it) and
    ``<column>`` (that value, typed; NULL after a delete).

    Each event gives each column a struct: ``gone`` for a delete, the value for an image that
    carries the column, nothing otherwise; the newest non-NULL struct per key is the answer."""
    carried = [
        f"CASE WHEN op = 'D' THEN struct(true AS gone, CAST(NULL AS STRING) AS v) "
        f"WHEN map_contains_key(after, '{c}') THEN struct(false AS gone, after['{c}'] AS v) END AS {c}"
        for c in COLUMNS
    ]
    newest = (
        _messages(spark, events, images, typed=False)
        .selectExpr(KEY, "ts", "pos", "op", *carried)
        .selectExpr(KEY, f"lead(1) OVER (PARTITION BY {KEY} ORDER BY ts, pos) IS NULL AS _newest",
                    f"last(op) OVER ({_WHOLE_KEY}) AS {OP_COLUMN}",
                    *[f"last({c}, true) OVER ({_WHOLE_KEY}) AS {c}" for c in COLUMNS])
        .where("_newest")
    )
    types = {f.name: _spark_type(f.type).simpleString() for f in SOURCE_SCHEMA}
    return newest.selectExpr(KEY, OP_COLUMN, *[f"{c} IS NOT NULL AS p_{c}" for c in COLUMNS],
                             *[f"CAST(IF({c}.gone, NULL, {c}.v) AS {types[c]}) AS {c}" for c in COLUMNS])


#: the correct notebook's update: only the columns the batch sets
_CARRIED = {name: f"CASE WHEN s.p_{name} THEN s.{name} ELSE t.{name} END" for name in COLUMNS}


def correct_notebook(spark: SparkSession, events: Path, table: Path, images: str = "partial") -> None:
    """:func:`correct_rows` as Arrow, then a delta-rs MERGE into the Delta table at ``table``."""
    merge_delta_rs(correct_rows(spark, events, images).toArrow(), table, _CARRIED)


def correct_notebook_delta_spark(spark: SparkSession, events: Path, table: Path, images: str = "partial") -> None:
    """:func:`correct_rows`, then Delta's MERGE in Spark into the Delta table at ``table``."""
    merge_delta_spark(spark, correct_rows(spark, events, images), table, _CARRIED)


# --- The MERGE: delete where the newest op is D, else update (``update``) or insert ------------


def merge_delta_rs(source: pa.Table, table: Path, update: dict[str, str]) -> None:
    """delta-rs's MERGE of ``source`` (the source columns and :data:`OP_COLUMN`) into ``table``."""
    (
        DeltaTable(str(table))
        .merge(source, f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
        .when_matched_delete(f"s.{OP_COLUMN} = 'D'")
        .when_matched_update(update, f"s.{OP_COLUMN} <> 'D'")
        .when_not_matched_insert({name: f"s.{name}" for name in SOURCE_SCHEMA.names}, f"s.{OP_COLUMN} <> 'D'")
        .execute()
    )


def merge_delta_spark(spark: SparkSession, source: DataFrame, table: Path, update: dict[str, str]) -> None:
    """Delta's own MERGE in Spark (``MERGE INTO`` the path, from ``source`` as a view)."""
    source.createOrReplaceTempView("batch")
    names = SOURCE_SCHEMA.names
    spark.sql(
        f"MERGE INTO delta.`{table}` t USING batch s ON t.{KEY} = s.{KEY} "
        f"WHEN MATCHED AND s.{OP_COLUMN} = 'D' THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {', '.join(f'{c} = {e}' for c, e in update.items())} "
        f"WHEN NOT MATCHED AND s.{OP_COLUMN} <> 'D' THEN INSERT ({', '.join(names)}) "
        f"VALUES ({', '.join(f's.{c}' for c in names)})"
    )
    spark.catalog.dropTempView("batch")


def floor(events: Path, images: str = "partial") -> pa.Table:
    """Parse ``events`` with pyarrow's multi-threaded JSON reader and an explicit schema."""
    if images == "partial":
        schema = arrow_event_schema()
    else:
        from bench.debezium import arrow_envelope

        schema = arrow_envelope()
    return pj.read_json(
        events,
        read_options=pj.ReadOptions(use_threads=True),
        parse_options=pj.ParseOptions(explicit_schema=schema),
    )
