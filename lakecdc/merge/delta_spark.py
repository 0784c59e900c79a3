"""The cluster engine: delta-spark's ``DeltaTable`` runs the same plans where Delta's JVM classes are.

Used automatically when :func:`lakecdc._compat.delta_spark_available` is true (Databricks, a
cluster with the Delta jars). It is **not exercised on the development machine** (no Maven: the
Delta jars cannot be loaded there); the plans it runs are the ones the delta-rs engine runs, and
their SQL form is checked by Spark's own parser in the tests.

Idempotent commits use the session confs ``spark.databricks.delta.write.txnAppId`` /
``txnVersion`` (internal in Delta's source, so they are set in exactly one place:
:func:`txn_confs`) and the commit metadata ``spark.databricks.delta.commitInfo.userMetadata``.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.merge.arrow_types import to_arrow_schema, to_spark_schema
from lakecdc.merge.plan import APP_ID, MergePlan, MergeResult, quote, sql_literal

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.merge.history_plan import HistoryPlan
    from lakecdc.merge.source import BatchSource

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"


@contextlib.contextmanager
def txn_confs(spark: SparkSession, app_id: str, version: int, metadata: Mapping[str, str]) -> Iterator[None]:
    """Session confs that make the DML run inside this block an idempotent Delta commit."""
    conf = spark.conf
    previous = {k: conf.get(k, None) for k in (TXN_APP_ID, TXN_VERSION, USER_METADATA)}
    conf.set(TXN_APP_ID, app_id)
    conf.set(TXN_VERSION, str(version))
    conf.set(USER_METADATA, json.dumps(dict(metadata), sort_keys=True))
    try:
        yield
    finally:
        for key, value in previous.items():
            if value is None:
                conf.unset(key)
            else:
                conf.set(key, value)


class DeltaSparkEngine:
    """Runs merge plans with ``delta.tables.DeltaTable`` on the session's cluster."""

    name = "delta-spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    def _delta(self, path: str):  # type: ignore[no-untyped-def]
        from delta.tables import DeltaTable

        return DeltaTable.forPath(self.spark, path)

    def exists(self, path: str) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, path))

    def create(
        self, path: str, schema: T.StructType, *, name: str | None = None, properties: Mapping[str, str] | None = None,
    ) -> None:
        from delta.tables import DeltaTable

        builder = DeltaTable.createIfNotExists(self.spark).location(path).addColumns(schema)
        if name:
            builder = builder.comment(f"lakecdc target for source table {name}")
        for key, value in (properties or {}).items():
            builder = builder.property(key, value)
        builder.execute()

    def properties(self, path: str) -> dict[str, str]:
        row = self.spark.sql(f"DESCRIBE DETAIL delta.{quote(path)}").select("properties").first()
        return dict(row[0] or {}) if row else {}

    def set_properties(self, path: str, properties: Mapping[str, str]) -> None:
        pairs = ", ".join(f"{sql_literal(k)} = {sql_literal(v)}" for k, v in properties.items())
        self.spark.sql(f"ALTER TABLE delta.{quote(path)} SET TBLPROPERTIES ({pairs})")

    def schema(self, path: str) -> T.StructType:
        return self._delta(path).toDF().schema

    def add_columns(self, path: str, fields: T.StructType) -> None:
        cols = ", ".join(f"{quote(f.name)} {f.dataType.simpleString()}" for f in fields.fields)
        self.spark.sql(f"ALTER TABLE delta.{quote(path)} ADD COLUMNS ({cols})")

    def committed_version(self, path: str, app_id: str = APP_ID) -> int | None:
        if not self.exists(path):
            return None
        jvm = self.spark.sparkContext._jvm  # type: ignore[attr-defined]
        log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path)
        version = log.update(False, jvm.scala.Option.empty(), jvm.scala.Option.empty()).transactions().get(app_id)
        return None if version.isEmpty() else int(version.get())

    def version(self, path: str) -> int:
        return int(self._delta(path).history(1).select("version").first()[0])

    def max_stat(self, path: str, column: str) -> str | None:
        if not self.exists(path):
            return ""
        row = self.spark.read.format("delta").load(path).agg(F.max(column)).first()
        return (row[0] if row else None) or ""

    def merge(self, plan: MergePlan, source: BatchSource) -> MergeResult:
        df = source.df
        if df is None:
            assert source.arrow is not None
            df = self.spark.createDataFrame(source.arrow)
        merger = (
            self._delta(plan.path).alias("t").merge(df.alias("s"), plan.predicate())
            .whenMatchedDelete(condition=plan.delete_condition())
            .whenMatchedUpdate(condition=plan.update_condition(), set=plan.update_set())
            .whenNotMatchedInsert(condition=plan.insert_condition(), values=plan.insert_values())
        )
        by_source = plan.by_source_delete_condition()
        if by_source is not None:
            merger = merger.whenNotMatchedBySourceDelete(condition=by_source)
        with txn_confs(self.spark, plan.app_id, plan.version, plan.metadata):
            merger.execute()
        last = self._delta(plan.path).history(1).first()
        metrics = (last["operationMetrics"] if last else None) or {}
        return MergeResult(
            table=plan.table, engine=self.name, version=int(last["version"]) if last else None,
            inserted=int(metrics.get("numTargetRowsInserted", 0)),
            updated=int(metrics.get("numTargetRowsUpdated", 0)),
            deleted=int(metrics.get("numTargetRowsDeleted", 0)),
            files_added=int(metrics.get("numTargetFilesAdded", 0)),
            files_removed=int(metrics.get("numTargetFilesRemoved", 0)),
        )

    def merge_history(self, plan: HistoryPlan, source: pa.Table) -> MergeResult:
        """A history table's plan (see :mod:`lakecdc.merge.history_plan`) with Delta's own MERGE."""
        df = self.spark.createDataFrame(source)
        merger = (
            self._delta(plan.path).alias("t").merge(df.alias("s"), plan.predicate())
            .whenMatchedUpdate(condition=plan.update_condition(), set=plan.update_set())
            .whenNotMatchedInsert(condition=plan.insert_condition(), values=plan.insert_values())
        )
        by_source = plan.by_source_condition()
        if by_source is not None:
            merger = merger.whenNotMatchedBySourceUpdate(condition=by_source, set=plan.by_source_set())
        with txn_confs(self.spark, plan.app_id, plan.version, plan.metadata):
            merger.execute()
        last = self._delta(plan.path).history(1).first()
        metrics = (last["operationMetrics"] if last else None) or {}
        return MergeResult(
            table=plan.table, engine=self.name, version=int(last["version"]) if last else None,
            inserted=int(metrics.get("numTargetRowsInserted", 0)),
            updated=int(metrics.get("numTargetRowsUpdated", 0)),
            deleted=int(metrics.get("numTargetRowsDeleted", 0)),
            files_added=int(metrics.get("numTargetFilesAdded", 0)),
            files_removed=int(metrics.get("numTargetFilesRemoved", 0)),
        )

    def append(self, path: str, data: pa.Table, *, version: int, app_id: str = APP_ID) -> None:
        df = self.spark.createDataFrame(data, schema=to_spark_schema(data.schema))
        (df.write.format("delta").mode("append").option("mergeSchema", "true")
           .option("txnAppId", app_id).option("txnVersion", version).save(path))

    def read(self, spark: SparkSession, path: str) -> DataFrame:
        return spark.read.format("delta").load(path)

    def read_arrow(self, path: str, columns: list[str] | None = None) -> pa.Table:
        df = self.read(self.spark, path)
        return df.select(*(columns or df.columns)).toArrow()

    # -- maintenance (Delta's own OPTIMIZE / ZORDER BY / VACUUM) ---------------------------------
    def files(self, path: str) -> tuple[int, int]:
        row = self.spark.sql(f"DESCRIBE DETAIL delta.{quote(path)}").select("numFiles", "sizeInBytes").first()
        return int(row[0] or 0), int(row[1] or 0)

    def compact(self, path: str, *, target_size: int | None, zorder: tuple[str, ...] = ()) -> tuple[int, int]:
        if target_size:
            self.spark.conf.set("spark.databricks.delta.optimize.maxFileSize", str(target_size))
        builder = self._delta(path).optimize()
        result = builder.executeZOrderBy(*zorder) if zorder else builder.executeCompaction()
        metrics = result.select("metrics.numFilesRemoved", "metrics.numFilesAdded").first()
        return int(metrics[0] or 0), int(metrics[1] or 0)

    def vacuum(self, path: str, *, retention_hours: int, enforce: bool) -> int | None:
        """Delta's VACUUM; its Python API does not say how many files it deleted (None)."""
        check = "spark.databricks.delta.retentionDurationCheck.enabled"
        if not enforce:
            self.spark.conf.set(check, "false")
        try:
            self._delta(path).vacuum(retention_hours)
        finally:
            if not enforce:
                self.spark.conf.unset(check)
        return None

    def checkpoint(self, path: str) -> None:
        jvm = self.spark.sparkContext._jvm  # type: ignore[attr-defined]
        jvm.org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path).checkpoint()

    def delete_where(self, path: str, predicate: str) -> int:
        self._delta(path).delete(predicate)
        last = self._delta(path).history(1).first()
        return int(((last["operationMetrics"] if last else None) or {}).get("numDeletedRows", 0))

    def arrow_schema(self, schema: T.StructType) -> pa.Schema:
        return to_arrow_schema(schema)
