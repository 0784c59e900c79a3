"""A batch's net actions, materialised once for an engine, with the facts the plan needs.

delta-rs merges an Arrow table collected on the driver (:meth:`BatchSource.from_arrow`), or for a
large batch a stream of the record batches Spark staged as Parquet; delta-spark merges straight
from the fold's DataFrame, kept in Spark's cache (:meth:`BatchSource.from_spark`): nothing but the
facts and the deleted keys (for the tombstones) reach the driver."""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class BatchSource:
    """Net actions as the engine consumes them (``arrow`` for delta-rs, ``df`` for delta-spark).

    ``rows``: the net actions; ``upserts``: those that write a row; ``last_op_ts`` / ``last_seq``:
    the newest event time and seq among them (None without any)."""

    rows: int
    always_set: frozenset[int]
    key_ranges: tuple[tuple[Any, Any], ...]
    deletes: pa.Table  # k{j}, _cdc_seq of the keys the batch deletes
    arrow: pa.Table | None = None
    df: DataFrame | None = None
    upserts: int = 0
    last_op_ts: Any = None
    last_seq: str | None = None
    #: the cached DataFrame ``df`` reads from (``df`` itself unless it was derived from a cache)
    cached: DataFrame | None = None
    #: the directory ``df`` reads from instead, its rows staged as Parquet (a large delta-rs batch,
    #: streamed into the merge: :mod:`lakecdc.merge.staged`)
    stage: str | None = None

    def release(self) -> None:
        """Drop the cached or staged rows of a Spark source (after its merge)."""
        if self.cached is not None:
            self.cached.unpersist()
        if self.stage is not None:
            shutil.rmtree(self.stage, ignore_errors=True)

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
        applied = table.filter(pc.is_valid(table.column("_action"))) if table.num_rows else table
        return cls(
            rows=table.num_rows,
            always_set=always,
            key_ranges=ranges,
            deletes=deletes,
            arrow=table,
            upserts=int(pc.sum(pc.equal(table.column("_action"), "upsert")).as_py() or 0) if table.num_rows else 0,
            last_op_ts=pc.max(applied.column("_cdc_op_ts")).as_py() if applied.num_rows else None,
            last_seq=pc.max(applied.column("_cdc_seq")).as_py() if applied.num_rows else None,
        )

    @classmethod
    def from_spark(cls, df: DataFrame, *, n_columns: int, n_keys: int, cached: DataFrame | None = None,
                   stage: str | None = None) -> BatchSource:
        """Facts computed by one Spark aggregation; the rows stay distributed (delta-spark), cached
        until :meth:`release`: in ``cached`` when ``df`` is a projection of that cached DataFrame
        (one copy in Spark's cache, not two), else in ``df`` itself, unless ``df`` reads the files
        staged in ``stage``."""
        if cached is None and stage is None:
            cached = df = df if df.is_cached else df.persist()
        aggs = [F.count(F.lit(1)).alias("n"), F.count_if(F.col("_action") == "upsert").alias("upserts"),
                F.max(F.when(F.col("_action").isNotNull(), F.unix_micros("_cdc_op_ts"))).alias("last_op_ts"),
                F.max(F.when(F.col("_action").isNotNull(), F.col("_cdc_seq"))).alias("last_seq")]
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
            cached=cached,
            stage=stage,
            upserts=int(row["upserts"]),
            # (as micros: a collected timestamp is a naive datetime in the driver's local time)
            last_op_ts=None if row["last_op_ts"] is None else _EPOCH + dt.timedelta(microseconds=row["last_op_ts"]),
            last_seq=row["last_seq"],
        )
