"""A batch's net actions, materialised once for an engine, with the facts the plan needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


@dataclass(frozen=True)
class BatchSource:
    """Net actions as the engine consumes them (``arrow`` for delta-rs, ``df`` for delta-spark)."""

    rows: int
    always_set: frozenset[int]
    key_ranges: tuple[tuple[Any, Any], ...]
    deletes: pa.Table  # k{j}, _cdc_seq of the keys the batch deletes
    arrow: pa.Table | None = None
    df: DataFrame | None = None

    @classmethod
    def from_arrow(cls, table: pa.Table, *, n_columns: int, n_keys: int) -> BatchSource:
        """Collect-side facts computed with Arrow compute (no extra Spark job)."""
        always = frozenset(
            i for i in range(n_columns)
            if table.num_rows and pc.all(pc.fill_null(table.column(f"u{i}"), False)).as_py()
        )
        ranges = tuple(
            (pc.min(table.column(f"k{j}")).as_py(), pc.max(table.column(f"k{j}")).as_py()) if table.num_rows else (None, None)
            for j in range(n_keys)
        )
        deletes = table.filter(pc.equal(table.column("_action"), "delete")).select(
            [f"k{j}" for j in range(n_keys)] + ["_cdc_seq", "_action"]
        )
        return cls(
            rows=table.num_rows,
            always_set=always,
            key_ranges=ranges,
            deletes=deletes,
            arrow=table,
        )

    @classmethod
    def from_spark(cls, df: DataFrame, *, n_columns: int, n_keys: int) -> BatchSource:
        """Facts computed by one Spark aggregation; the rows stay distributed (delta-spark)."""
        df = df.persist()
        aggs = [F.count(F.lit(1)).alias("n")]
        aggs += [F.min(F.coalesce(f"u{i}", F.lit(False))).alias(f"u{i}") for i in range(n_columns)]
        aggs += [x for j in range(n_keys) for x in (F.min(f"k{j}").alias(f"lo{j}"), F.max(f"k{j}").alias(f"hi{j}"))]
        row = df.agg(*aggs).first()
        assert row is not None
        deletes = df.where(F.col("_action") == "delete").select(
            *[f"k{j}" for j in range(n_keys)], "_cdc_seq", "_action"
        ).toArrow()
        return cls(
            rows=int(row["n"]),
            always_set=frozenset(i for i in range(n_columns) if row[f"u{i}"]),
            key_ranges=tuple((row[f"lo{j}"], row[f"hi{j}"]) for j in range(n_keys)),
            deletes=deletes,
            df=df,
        )
