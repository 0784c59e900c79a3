"""The cluster engine: Delta Lake's own engine inside Spark, driven through Spark SQL.

Every operation is a Spark SQL statement or a DataFrame read/write (``MERGE INTO``, ``CREATE
TABLE``, ``DESCRIBE HISTORY``, ``OPTIMIZE``, ``VACUUM``, ...), never a call into the JVM, so the
engine runs the same on a classic session, on Databricks and on a Spark Connect session. Two
extras ask a classic session's JVM and are left out on Spark Connect: a checkpoint on demand, and
the count of target files a MERGE read and pruned (:func:`_files_read_and_pruned`). It
needs only Delta's JVM classes in the session (``spark.sql.extensions`` with
``io.delta.sql.DeltaSparkSessionExtension``, or a platform that has Delta built in), not the
``delta-spark`` Python package.

Targets are paths (``delta.`<path>```) or catalog tables (``catalog:<name>``, see
:mod:`lakecdc.merge.engine`).

Idempotent commits use the session confs ``spark.databricks.delta.write.txnAppId`` /
``txnVersion`` for DML and the writer options ``txnAppId`` / ``txnVersion`` for appends: Delta
commits nothing for an ``(app id, version)`` the table already holds. They are internal settings
in Delta's source, so they are set in exactly one place (:func:`txn_confs`). Each commit also
carries ``{"lakecdc.app_id": ..., "lakecdc.txn_version": ...}`` in its ``userMetadata``, which is
how :meth:`DeltaSparkEngine.committed_version` reads the last one back with SQL alone.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.errors import CommitConflict, ConfigError, LakecdcError
from lakecdc.lake.refs import catalog_location, catalog_name
from lakecdc.merge.arrow_types import to_arrow_schema, to_spark_schema
from lakecdc.merge.plan import APP_ID, MergePlan, MergeResult, quote, sql_literal
from lakecdc.spark.compat import is_spark_connect, jvm

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.merge.history_plan import HistoryPlan
    from lakecdc.merge.source import BatchSource

TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
TXN_VERSION = "spark.databricks.delta.write.txnVersion"
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
#: commits :meth:`DeltaSparkEngine.committed_version` looks back through (DESCRIBE HISTORY)
HISTORY_DEPTH = 1000
#: ... of which the newest are read first (:meth:`DeltaSparkEngine.committed_version`)
RECENT_HISTORY = 20
#: Delta's errors for a commit that lost to a concurrent one (all retryable)
_CONFLICTS = ("ConcurrentAppendException", "ConcurrentDeleteReadException", "ConcurrentDeleteDeleteException",
              "ConcurrentTransactionException", "MetadataChangedException", "ProtocolChangedException",
              "ConcurrentWriteException", "DELTA_CONCURRENT_")

#: MERGE's own counts of the target's files before and after data skipping (not in the commit's
#: ``operationMetrics``; read from the executed command where the session has a JVM to ask)
_SKIPPING_METRICS = ("numTargetFilesBeforeSkipping", "numTargetFilesAfterSkipping")

#: Session confs are shared by every thread of a session: commits that set them run one at a time.
_SESSION_CONFS = threading.RLock()


def _txn_metadata(app_id: str, version: int, metadata: Mapping[str, str]) -> str:
    return json.dumps({**dict(metadata), "lakecdc.app_id": app_id, "lakecdc.txn_version": str(version)},
                      sort_keys=True)


@contextlib.contextmanager
def session_confs(spark: SparkSession, values: Mapping[str, str | None]) -> Iterator[None]:
    """Set (or, for None, unset) session confs while the block runs, then restore them."""
    conf = spark.conf
    # Read what to restore under the lock: read before it, a second thread's block could record the
    # first one's values as "previous" and leave them set on the user's session afterwards.
    with _SESSION_CONFS:
        previous = {k: conf.get(k, None) for k in values}
        try:
            for key, value in values.items():
                if value is None:
                    conf.unset(key)
                else:
                    conf.set(key, value)
            yield
        finally:
            for key, value in previous.items():
                if value is None:
                    conf.unset(key)
                else:
                    conf.set(key, value)


def _files_read_and_pruned(done: DataFrame) -> tuple[int | None, int | None]:
    """The target files a finished ``MERGE INTO`` read and pruned by data skipping, from the metrics
    of the command Delta ran (``None, None`` on Spark Connect, or where Delta does not keep them).

    Delta records these two counts on the command, not in the commit, so they are read through the
    classic session's JVM; the statement has already run, so nothing in the data path needs it."""
    if is_spark_connect(done.sparkSession):
        return None, None
    try:
        command = done._jdf.queryExecution().commandExecuted().commandPhysicalPlan().cmd()
        metrics = command.metrics()
        if not all(metrics.contains(name) for name in _SKIPPING_METRICS):
            return None, None
        before, after = (int(metrics.apply(name).value()) for name in _SKIPPING_METRICS)
    except Exception:  # noqa: BLE001 - another Delta or Spark build: the counts are optional
        return None, None
    return after, before - after


def txn_confs(spark: SparkSession, app_id: str, version: int, metadata: Mapping[str, str]):
    """Session confs that make the DML run inside this block an idempotent Delta commit."""
    return session_confs(spark, {TXN_APP_ID: app_id, TXN_VERSION: str(version),
                                 USER_METADATA: _txn_metadata(app_id, version, metadata)})


def ddl_type(dtype: T.DataType) -> str:
    """A Spark type as DDL text, field names quoted (``struct<`a b`: int>``)."""
    if isinstance(dtype, T.StructType):
        return "struct<" + ", ".join(f"{quote(f.name)}: {ddl_type(f.dataType)}" for f in dtype.fields) + ">"
    if isinstance(dtype, T.ArrayType):
        return f"array<{ddl_type(dtype.elementType)}>"
    if isinstance(dtype, T.MapType):
        return f"map<{ddl_type(dtype.keyType)}, {ddl_type(dtype.valueType)}>"
    return dtype.simpleString()


#: Characters Delta's engine refuses in column names unless the table maps columns by name.
_INVALID_IN_NAMES = set(" ,;{}()\n\t=")
#: Column mapping by name (Delta protocol reader 2 / writer 5): any column name, as sources have them.
COLUMN_MAPPING = {"delta.columnMapping.mode": "name", "delta.minReaderVersion": "2", "delta.minWriterVersion": "5"}


def _needs_column_mapping(schema: T.StructType) -> bool:
    """Whether a column name (at any depth) holds a character Delta's engine refuses without column
    mapping (a source column ``ORDER ID``)."""
    def names(dtype: T.DataType):
        if isinstance(dtype, T.StructType):
            for f in dtype.fields:
                yield f.name
                yield from names(f.dataType)
        elif isinstance(dtype, T.ArrayType):
            yield from names(dtype.elementType)
        elif isinstance(dtype, T.MapType):
            yield from names(dtype.keyType)
            yield from names(dtype.valueType)
    return any(set(n) & _INVALID_IN_NAMES for n in names(schema))


def _is_conflict(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(name in text for name in _CONFLICTS)


def _is_missing_table(exc: BaseException) -> bool:
    text = str(exc)
    return any(s in text for s in ("DELTA_MISSING_DELTA_TABLE", "is not a Delta table", "TABLE_OR_VIEW_NOT_FOUND",
                                   "DELTA_TABLE_NOT_FOUND", "DELTA_PATH_DOES_NOT_EXIST", "PATH_NOT_FOUND",
                                   "doesn't exist", "does not exist"))


class DeltaSparkEngine:
    """Runs merge plans, appends and maintenance with Delta Lake's engine on the session's cluster."""

    name = "delta-spark"

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark

    # -- naming ----------------------------------------------------------------------------------
    def ref(self, path: str) -> str:
        """The SQL name of a target: its catalog name, or ``delta.`<path>```."""
        name = catalog_name(path)
        return name if name is not None else f"delta.{quote(path)}"

    def _sql(self, text: str) -> DataFrame:
        return self.spark.sql(text)

    def _commit(self, text: str, what: str) -> DataFrame:
        """Run a committing statement; a lost race with another writer is a CommitConflict."""
        try:
            return self._sql(text)
        except Exception as exc:
            if _is_conflict(exc):
                raise CommitConflict(f"{what}: {str(exc).splitlines()[0]}") from exc
            raise

    # -- table lifecycle -------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        name = catalog_name(path)
        if name is not None:
            if not self.spark.catalog.tableExists(name):
                return False
            return self._detail(path)["format"] == "delta"
        if "://" not in path and not path.startswith("file:"):
            # a local path: the log's presence answers without a Spark job
            return (Path(path) / "_delta_log").is_dir() and any((Path(path) / "_delta_log").iterdir())
        try:
            self._detail(path)
        except Exception as exc:
            if _is_missing_table(exc):
                return False
            raise
        return True

    def _detail(self, path: str) -> dict:
        row = self._sql(f"DESCRIBE DETAIL {self.ref(path)}").first()
        return row.asDict() if row else {}

    def create(
        self, path: str, schema: T.StructType, *, name: str | None = None, properties: Mapping[str, str] | None = None,
    ) -> None:
        cols = ", ".join(f"{quote(f.name)} {ddl_type(f.dataType)}" for f in schema.fields)
        parts = [f"CREATE TABLE IF NOT EXISTS {self.ref(path)} ({cols}) USING delta"]
        if _needs_column_mapping(schema):
            properties = {**COLUMN_MAPPING, **(properties or {})}
        location = catalog_location(path)
        if location:
            parts.append(f"LOCATION {sql_literal(location)}")
        if name:
            parts.append(f"COMMENT {sql_literal('lakecdc target for source table ' + name)}")
        if properties:
            parts.append("TBLPROPERTIES (" + ", ".join(f"{sql_literal(k)} = {sql_literal(v)}"
                                                       for k, v in properties.items()) + ")")
        self._commit(" ".join(parts), f"create {path}")

    def properties(self, path: str) -> dict[str, str]:
        return {str(k): str(v) for k, v in (self._detail(path).get("properties") or {}).items()}

    def set_properties(self, path: str, properties: Mapping[str, str]) -> None:
        pairs = ", ".join(f"{sql_literal(k)} = {sql_literal(v)}" for k, v in properties.items())
        self._commit(f"ALTER TABLE {self.ref(path)} SET TBLPROPERTIES ({pairs})", f"set properties of {path}")

    def _df(self, path: str, version: int | None = None) -> DataFrame:
        name = catalog_name(path)
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.table(name) if name is not None else reader.load(path)

    def schema(self, path: str) -> T.StructType:
        return self._df(path).schema

    def add_columns(self, path: str, fields: T.StructType) -> None:
        if _needs_column_mapping(fields) and self.properties(path).get("delta.columnMapping.mode", "none") == "none":
            self.set_properties(path, COLUMN_MAPPING)
        cols = ", ".join(f"{quote(f.name)} {ddl_type(f.dataType)}" for f in fields.fields)
        self._commit(f"ALTER TABLE {self.ref(path)} ADD COLUMNS ({cols})", f"add columns to {path}")

    def committed_version(self, path: str, app_id: str = APP_ID) -> int | None:
        """The last transaction version ``app_id`` committed to the table, from the ``userMetadata``
        of its latest :data:`HISTORY_DEPTH` commits (None: none there).

        Each commit of the history is a file to read, and transaction versions only grow, so the
        newest :data:`RECENT_HISTORY` commits are read first: one of them is usually ``app_id``'s
        (maintenance and other writers commit in between now and then)."""
        if not self.exists(path):
            return None
        recent = self._committed_version(path, app_id, RECENT_HISTORY)
        return recent if recent is not None else self._committed_version(path, app_id, HISTORY_DEPTH)

    def _committed_version(self, path: str, app_id: str, depth: int) -> int | None:
        rows = (self._sql(f"DESCRIBE HISTORY {self.ref(path)} LIMIT {depth}")
                .where(F.col("userMetadata").isNotNull()).select("userMetadata").collect())
        best: int | None = None
        for row in rows:
            try:
                meta = json.loads(row[0])
            except ValueError:
                continue
            if isinstance(meta, dict) and meta.get("lakecdc.app_id") == app_id:
                version = int(meta.get("lakecdc.txn_version", -1))
                best = version if best is None else max(best, version)
        return best

    def version(self, path: str) -> int:
        newest = self._sql(f"DESCRIBE HISTORY {self.ref(path)} LIMIT 1").select("version").first()
        if newest is None:
            raise LakecdcError(f"{path}: Delta table without a history")
        return int(newest[0])

    def reaches(self, path: str, column: str, value: str) -> bool:
        """Whether ``path`` holds a ``column`` value at or above ``value``: one row asked for, so
        Delta's data skipping leaves out every file whose statistics lie below ``value`` (the usual
        answer, a batch newer than the table, reads no file; a ``max`` would read the whole column:
        Delta answers it from statistics for numbers and dates only)."""
        if not self.exists(path):
            return False
        return bool(self._df(path).where(F.col(column) >= F.lit(value)).select(column).limit(1).collect())

    # -- writes ----------------------------------------------------------------------------------
    def _last_metrics(self, path: str) -> tuple[int | None, dict[str, str]]:
        last = self._sql(f"DESCRIBE HISTORY {self.ref(path)} LIMIT 1").select("version", "operationMetrics").first()
        return (int(last[0]), dict(last[1] or {})) if last else (None, {})

    def _run_merge(self, table: str, path: str, sql: str, source: DataFrame, app_id: str, version: int,
                   metadata: Mapping[str, str]) -> MergeResult:
        view = f"lakecdc_batch_{uuid.uuid4().hex[:12]}"
        source.createOrReplaceTempView(view)
        try:
            with txn_confs(self.spark, app_id, version, metadata):
                before = self.version(path)
                done = self._commit(sql.replace("lakecdc_batch", view, 1), f"merge into {table}")
                after, metrics = self._last_metrics(path)
                scanned, skipped = _files_read_and_pruned(done)
        finally:
            self.spark.catalog.dropTempView(view)
        if after == before:  # the (app id, version) was committed before: Delta skipped it
            return MergeResult(table=table, engine=self.name, version=after, inserted=0, updated=0, deleted=0,
                               skipped=True)
        return MergeResult(
            table=table, engine=self.name, version=after,
            inserted=int(metrics.get("numTargetRowsInserted", 0)),
            updated=int(metrics.get("numTargetRowsUpdated", 0)),
            deleted=int(metrics.get("numTargetRowsDeleted", 0)),
            files_added=int(metrics.get("numTargetFilesAdded", 0)),
            files_removed=int(metrics.get("numTargetFilesRemoved", 0)),
            files_scanned=scanned, files_skipped=skipped,
        )

    def _source_df(self, data: pa.Table) -> DataFrame:
        return self.spark.createDataFrame(data, schema=to_spark_schema(data.schema))

    def merge(self, plan: MergePlan, source: BatchSource) -> MergeResult:
        df = source.df if source.df is not None else self._source_df(source.arrow)
        return self._run_merge(plan.table, plan.path, plan.to_sql(target=self.ref(plan.path)), df,
                               plan.app_id, plan.version, plan.metadata)

    def merge_history(self, plan: HistoryPlan, source: pa.Table) -> MergeResult:
        """A history table's plan (see :mod:`lakecdc.merge.history_plan`) with Delta's own MERGE."""
        return self._run_merge(plan.table, plan.path, plan.to_sql(target=self.ref(plan.path)),
                               self._source_df(source), plan.app_id, plan.version, plan.metadata)

    def append(self, path: str, data: pa.Table, *, version: int, app_id: str = APP_ID) -> None:
        """Append ``data`` once: Delta skips an ``(app_id, version)`` the table already holds."""
        writer = (self._source_df(data).write.format("delta").mode("append").option("mergeSchema", "true")
                  .option("txnAppId", app_id).option("txnVersion", version)
                  .option("userMetadata", _txn_metadata(app_id, version, {})))
        name = catalog_name(path)
        try:
            if name is not None:
                writer.saveAsTable(name)
            else:
                writer.save(path)
        except Exception as exc:
            if _is_conflict(exc):
                raise CommitConflict(f"append to {path}: {str(exc).splitlines()[0]}") from exc
            raise

    def delete_where(self, path: str, predicate: str) -> int:
        row = self._commit(f"DELETE FROM {self.ref(path)} WHERE {predicate}", f"delete from {path}").first()
        return int(row[0] or 0) if row else 0

    # -- reads -----------------------------------------------------------------------------------
    def read(self, spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
        if spark is not self.spark:
            return DeltaSparkEngine(spark).read(spark, path, version)
        return self._df(path, version)

    def read_arrow(self, path: str, columns: list[str] | None = None) -> pa.Table:
        df = self._df(path)
        return df.select(*(columns or df.columns)).toArrow()

    # -- maintenance (Delta's own OPTIMIZE / ZORDER BY / VACUUM) ---------------------------------
    def files(self, path: str) -> tuple[int, int]:
        detail = self._detail(path)
        return int(detail.get("numFiles") or 0), int(detail.get("sizeInBytes") or 0)

    def compact(self, path: str, *, target_size: int | None, zorder: tuple[str, ...] = ()) -> tuple[int, int]:
        sql = f"OPTIMIZE {self.ref(path)}"
        if zorder:
            sql += " ZORDER BY (" + ", ".join(quote(c) for c in zorder) + ")"
        with session_confs(self.spark, {MAX_FILE_SIZE: str(target_size)} if target_size else {}):
            row = self._commit(sql, f"optimize {path}").select("metrics.numFilesRemoved", "metrics.numFilesAdded").first()
        return (int(row[0] or 0), int(row[1] or 0)) if row else (0, 0)

    def vacuum(self, path: str, *, retention_hours: int, enforce: bool, dry_run: bool = True) -> int | None:
        """Delta's VACUUM: the number of files it would delete (``dry_run``, the default) or None
        after deleting (Delta's SQL does not say how many it deleted)."""
        sql = f"VACUUM {self.ref(path)} RETAIN {int(retention_hours)} HOURS" + (" DRY RUN" if dry_run else "")
        with session_confs(self.spark, {} if enforce else {RETENTION_CHECK: "false"}):
            try:
                result = self._sql(sql)
                return result.count() if dry_run else None
            except Exception as exc:
                if "retention" in str(exc).lower():
                    raise ConfigError(str(exc).splitlines()[0]) from exc
                raise

    def checkpoint(self, path: str) -> None:
        """A checkpoint of the current version: Delta's JVM API on a classic session. Delta also
        writes one itself every ``delta.checkpointInterval`` commits (10), which is all a Spark
        Connect session gets (its SQL has no checkpoint statement)."""
        if is_spark_connect(self.spark):
            return
        target = catalog_name(path)
        if target is not None:
            path = str(self._detail(path)["location"])
        jvm(self.spark).org.apache.spark.sql.delta.DeltaLog.forTable(self.spark._jsparkSession, path).checkpoint()

    def arrow_schema(self, schema: T.StructType) -> pa.Schema:
        return to_arrow_schema(schema)
