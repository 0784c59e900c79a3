"""What a target table already holds, read for a batch's fold: per key the seq the table reflects
(its live row's or its tombstone's), and its rows in the fold's positional names."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.lake.state import table_path, tombstone_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.consolidate.fold import Layout
    from lakecdc.merge.engine import Engine


def read_stored(spark: SparkSession, engine: Engine, target: str, table: str, layout: Layout) -> DataFrame:
    """Per key (``k{j}``) the seq the table reflects: its live row's or its tombstone's."""
    parts: list[DataFrame] = []
    keys = [F.col(f"`{k}`").alias(f"k{j}") for j, k in enumerate(layout.keys)]
    main = table_path(target, table)
    if engine.exists(main):
        parts.append(engine.read(spark, main).select(*keys, F.col("_cdc_seq").alias("_stored_seq")))
    stones = tombstone_path(target, table)
    if engine.exists(stones):
        t = engine.read(spark, stones).where(F.col("_cdc_kind") == "D")
        if all(k in t.columns for k in layout.keys):
            parts.append(t.select(*keys, F.col("_cdc_seq").alias("_stored_seq")))
    if not parts:
        schema = T.StructType(
            [T.StructField(f"k{j}", layout.types[i]) for j, i in enumerate(layout.key_index)]
            + [T.StructField("_stored_seq", T.StringType())]
        )
        return spark.createDataFrame([], schema)
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.groupBy(*layout.key_cols).agg(F.max("_stored_seq").alias("_stored_seq"))


def read_rows(spark: SparkSession, engine: Engine, target: str, table: str, layout: Layout) -> DataFrame | None:
    """The table's rows with positional names (``k{j}``, ``c{i}``, ``_cdc_seq``), or None."""
    main = table_path(target, table)
    if not engine.exists(main):
        return None
    df = engine.read(spark, main)
    cols = [
        (F.col(f"`{c}`") if c in df.columns else F.lit(None).cast(layout.types[i])).alias(f"c{i}")
        for i, c in enumerate(layout.columns)
    ]
    keys = [F.col(f"`{k}`").alias(f"k{j}") for j, k in enumerate(layout.keys)]
    return df.select(*keys, *cols, "_cdc_seq")
