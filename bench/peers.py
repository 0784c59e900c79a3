"""The contenders lakecdc is measured against.

* :func:`typical_notebook`: what a Spark notebook usually does with a CDC batch: keep the latest
  event per key (``row_number()`` over ``op_ts``, ``pos`` descending), delete keys whose latest
  event is a delete, upsert the others from their ``after`` image, via a delta-rs MERGE. It is
  fast but wrong on partial updates: columns absent from a partial after image become NULL.
* :func:`floor`: pyarrow's JSON reader on the same file with an explicit schema and nothing else;
  no consolidation or write can beat parsing the input once.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.json as pj
from deltalake import DeltaTable
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from bench.generate import KEY, SOURCE_SCHEMA

OP_COLUMN = "_op"


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


def latest_per_key(spark: SparkSession, events: Path) -> pa.Table:
    """The latest event per key by ``row_number()``: its ``after`` image (key from ``before`` for a
    delete) and its op type in :data:`OP_COLUMN`, as Arrow."""
    messages = spark.read.schema(spark_event_schema()).json(str(events))
    key = F.coalesce(F.col(f"after.{KEY}"), F.col(f"before.{KEY}"))
    latest_first = Window.partitionBy(KEY).orderBy(F.col("op_ts").desc(), F.col("pos").desc())
    latest = (
        messages.select(
            key.alias(KEY),
            *(F.col(f"after.{name}").alias(name) for name in SOURCE_SCHEMA.names[1:]),
            F.col("op_type").alias(OP_COLUMN),
            "op_ts",
            "pos",
        )
        .withColumn("_rn", F.row_number().over(latest_first))
        .where(F.col("_rn") == 1)
        .select(*SOURCE_SCHEMA.names, OP_COLUMN)
    )
    return latest.toArrow()


def typical_notebook(spark: SparkSession, events: Path, table: Path) -> None:
    """:func:`latest_per_key`, then a delta-rs MERGE into the Delta table at ``table``."""
    (
        DeltaTable(str(table))
        .merge(latest_per_key(spark, events), f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
        .when_matched_delete(f"s.{OP_COLUMN} = 'D'")
        .when_matched_update_all(f"s.{OP_COLUMN} <> 'D'", except_cols=[OP_COLUMN])
        .when_not_matched_insert_all(f"s.{OP_COLUMN} <> 'D'", except_cols=[OP_COLUMN])
        .execute()
    )


def floor(events: Path) -> pa.Table:
    """Parse ``events`` with pyarrow's multi-threaded JSON reader and an explicit schema."""
    return pj.read_json(
        events,
        read_options=pj.ReadOptions(use_threads=True),
        parse_options=pj.ParseOptions(explicit_schema=arrow_event_schema()),
    )
