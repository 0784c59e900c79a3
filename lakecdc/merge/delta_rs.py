"""The embedded engine: delta-rs (the ``deltalake`` package) commits the plans.

The batch's net actions reach delta-rs as one Arrow table collected from Spark: memory on the
driver is bounded by the batch's distinct keys (one row per key), never by the target table; a
large batch's are staged as Parquet by Spark and streamed instead (:mod:`lakecdc.merge.staged`).
``streamed_exec=False`` plus the key-range literals in the predicate let delta-rs skip target
files the batch cannot touch (see ``engines.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction
from deltalake.exceptions import CommitFailedError
from deltalake.schema import Schema
from pyspark.sql import types as T

from lakecdc.errors import CommitConflict, ConfigError
from lakecdc.lake.refs import catalog_name
from lakecdc.merge import staged
from lakecdc.merge.arrow_types import to_arrow_schema, to_spark_schema
from lakecdc.merge.plan import APP_ID, MergePlan, MergeResult
from lakecdc.merge.source import BatchSource

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.merge.history_plan import HistoryPlan


def _path(ref: str) -> str:
    """A target ref as delta-rs takes it: a path; a catalog table is refused with what to do."""
    name = catalog_name(ref)
    if name is not None:
        raise ConfigError(f"table {name!r} is a catalog table: only the delta-spark engine writes to a "
                          "Spark catalog (engine='delta-spark' on a session with Delta Lake)")
    return ref


def _done(table: DeltaTable, app_id: str, version: int) -> bool:
    """Whether ``table`` holds a commit of ``(app_id, version)`` or a later one (delta-rs records
    the transaction but does not refuse a repeat, as Delta's engine does: lakecdc checks)."""
    done = table.transaction_version(app_id)
    return done is not None and done >= version


class DeltaRsEngine:
    """Runs merge plans and small appends with delta-rs; reads tables for Spark."""

    name = "delta-rs"

    def __init__(self, storage_options: Mapping[str, str] | None = None) -> None:
        self.storage_options = dict(storage_options or {})

    def table(self, path: str) -> DeltaTable:
        table = DeltaTable(_path(path), storage_options=self.storage_options or None)
        if table.metadata().configuration.get("delta.columnMapping.mode", "none") != "none":
            # deltalake 1.6 reads such a table's columns as NULLs, and would write them so
            raise ConfigError(
                f"{path}: the table maps columns by name (Delta's engine made it so for a column name "
                "with spaces or ,;{}()=); delta-rs cannot read or write it correctly: use engine='delta-spark'"
            )
        return table

    # -- table lifecycle -------------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return DeltaTable.is_deltatable(_path(path), storage_options=self.storage_options or None)

    def create(
        self, path: str, schema: T.StructType, *, name: str | None = None, properties: Mapping[str, str] | None = None,
    ) -> None:
        DeltaTable.create(
            path, to_arrow_schema(schema), mode="ignore", name=name,
            configuration=dict(properties) if properties else None,
            storage_options=self.storage_options or None,
        )

    def properties(self, path: str) -> dict[str, str]:
        """The table's properties (``delta.enableChangeDataFeed``, ...)."""
        return dict(self.table(path).metadata().configuration)

    def set_properties(self, path: str, properties: Mapping[str, str]) -> None:
        """Set table properties in one commit (the protocol is raised when a property needs it)."""
        # (delta-rs refuses property names it does not know unless told not to: lakecdc's own)
        self.table(path).alter.set_table_properties(dict(properties), raise_if_not_exists=False)

    def schema(self, path: str) -> T.StructType:
        return to_spark_schema(pa.schema(self.table(path).schema().to_arrow()))

    def add_columns(self, path: str, fields: T.StructType) -> None:
        arrow = to_arrow_schema(fields)
        new = Schema.from_arrow(arrow).fields
        self.table(path).alter.add_columns(list(new))

    def committed_version(self, path: str, app_id: str = APP_ID) -> int | None:
        if not self.exists(path):
            return None
        return self.table(path).transaction_version(app_id)

    def version(self, path: str) -> int:
        return self.table(path).version()

    def reaches(self, path: str, column: str, value: str) -> bool | None:
        """Whether ``path`` may hold a ``column`` value at or above ``value``, from the Delta log's
        file statistics alone; None when a file has no statistics for ``column`` (a table of more
        columns than Delta indexes). A missing or empty table holds none."""
        top = self._max_stat(path, column)
        return None if top is None else top != "" and top >= value

    def _max_stat(self, path: str, column: str) -> str | None:
        """The largest ``column`` value per the Delta log's file statistics, or None if unknown.

        An empty table answers ``""`` (nothing stored is larger than any seq).
        """
        if not self.exists(path):
            return ""
        actions = pa.table(self.table(path).get_add_actions(flatten=True))
        if actions.num_rows == 0:
            return ""
        name = f"max.{column}"
        if name not in actions.column_names:
            return None
        values = actions.column(name)
        counts = actions.column("num_records").to_pylist()
        nulls = actions.column(f"null_count.{column}").to_pylist() if f"null_count.{column}" in actions.column_names else [0] * len(counts)
        best = ""
        for value, count, null_count in zip(values.to_pylist(), counts, nulls, strict=True):
            if value is None and count != null_count:
                return None
            if value is not None and value > best:
                best = value
        return best

    # -- writes ----------------------------------------------------------------------------------
    def merge(self, plan: MergePlan, source: BatchSource) -> MergeResult:
        """Run ``plan`` with ``source`` (the net actions) in one atomic, idempotent commit."""
        if source.arrow is not None:
            data: pa.Table | pa.RecordBatchReader = source.arrow
        else:  # a large batch, staged by Spark: streamed (its target files still pruned by the key ranges)
            assert source.stage is not None and source.df is not None, "delta-rs merges Arrow or staged batches"
            data = staged.reader(source.stage, source.df.schema)
        props = CommitProperties(
            app_transactions=[Transaction(app_id=plan.app_id, version=plan.version)],
            custom_metadata=dict(plan.metadata),
        )
        table = self.table(plan.path)
        if _done(table, plan.app_id, plan.version):
            return MergeResult(table=plan.table, engine=self.name, version=table.version(), inserted=0, updated=0,
                               deleted=0, skipped=True)
        merger = table.merge(
            data, plan.predicate(), source_alias="s", target_alias="t",
            streamed_exec=source.arrow is None, commit_properties=props,
        )
        merger = (
            merger.when_matched_delete(plan.delete_condition())
            .when_matched_update(updates=plan.update_set(), predicate=plan.update_condition())
            .when_not_matched_insert(updates=plan.insert_values(), predicate=plan.insert_condition())
        )
        by_source = plan.by_source_delete_condition()
        if by_source is not None:
            merger = merger.when_not_matched_by_source_delete(by_source)
        try:
            metrics = merger.execute()
        except CommitFailedError as exc:
            raise CommitConflict(f"table {plan.table!r} at {plan.path}: {exc}") from exc
        return MergeResult(
            table=plan.table,
            engine=self.name,
            version=self.version(plan.path),
            inserted=int(metrics.get("num_target_rows_inserted", 0)),
            updated=int(metrics.get("num_target_rows_updated", 0)),
            deleted=int(metrics.get("num_target_rows_deleted", 0)),
            files_added=int(metrics.get("num_target_files_added", 0)),
            files_removed=int(metrics.get("num_target_files_removed", 0)),
            files_scanned=int(metrics.get("num_target_files_scanned", 0)),
            files_skipped=int(metrics.get("num_target_files_skipped_during_scan", 0)),
        )

    def merge_history(self, plan: HistoryPlan, source: pa.Table) -> MergeResult:
        """Run a history table's ``plan`` with ``source`` (its versions) in one idempotent commit."""
        props = CommitProperties(
            app_transactions=[Transaction(app_id=plan.app_id, version=plan.version)],
            custom_metadata=dict(plan.metadata),
        )
        table = self.table(plan.path)
        if _done(table, plan.app_id, plan.version):
            return MergeResult(table=plan.table, engine=self.name, version=table.version(), inserted=0, updated=0,
                               deleted=0, skipped=True)
        merger = table.merge(
            source, plan.predicate(), source_alias="s", target_alias="t",
            streamed_exec=False, commit_properties=props,
        )
        merger = (
            merger.when_matched_update(updates=plan.update_set(), predicate=plan.update_condition())
            .when_not_matched_insert(updates=plan.insert_values(), predicate=plan.insert_condition())
        )
        by_source = plan.by_source_condition()
        if by_source is not None:
            merger = merger.when_not_matched_by_source_update(updates=plan.by_source_set(), predicate=by_source)
        try:
            metrics = merger.execute()
        except CommitFailedError as exc:
            raise CommitConflict(f"table {plan.table!r} at {plan.path}: {exc}") from exc
        return MergeResult(
            table=plan.table, engine=self.name, version=self.version(plan.path),
            inserted=int(metrics.get("num_target_rows_inserted", 0)),
            updated=int(metrics.get("num_target_rows_updated", 0)),
            deleted=int(metrics.get("num_target_rows_deleted", 0)),
            files_added=int(metrics.get("num_target_files_added", 0)),
            files_removed=int(metrics.get("num_target_files_removed", 0)),
        )

    def append(self, path: str, data: pa.Table, *, version: int, app_id: str = APP_ID) -> None:
        """Append ``data`` once: skipped when ``(app_id, version)`` is already committed."""
        from deltalake import write_deltalake

        done = self.committed_version(path, app_id)
        if done is not None and done >= version:
            return
        write_deltalake(
            path, data, mode="append", schema_mode="merge",
            storage_options=self.storage_options or None,
            commit_properties=CommitProperties(app_transactions=[Transaction(app_id=app_id, version=version)]),
        )

    def delete_where(self, path: str, predicate: str) -> int:
        """Delete the rows matching ``predicate``; returns how many were deleted."""
        metrics = self.table(path).delete(predicate)
        return int(metrics.get("num_deleted_rows", 0))

    def read_arrow(self, path: str, columns: list[str] | None = None) -> pa.Table:
        return pa.table(self.table(path).to_pyarrow_table(columns=columns))

    # -- maintenance -------------------------------------------------------------------------------
    def files(self, path: str) -> tuple[int, int]:
        """``(files, bytes)`` of the table's current version."""
        actions = pa.table(self.table(path).get_add_actions(flatten=True))
        return actions.num_rows, int(pc.sum(actions.column("size_bytes")).as_py() or 0)

    def compact(self, path: str, *, target_size: int | None, zorder: tuple[str, ...] = ()) -> tuple[int, int]:
        """Bin-pack small files (Z-ordered by ``zorder`` when given); ``(files removed, added)``."""
        optimizer = self.table(path).optimize
        try:
            if zorder:
                metrics = optimizer.z_order(list(zorder), target_size=target_size)
            else:
                metrics = optimizer.compact(target_size=target_size)
        except CommitFailedError as exc:
            raise CommitConflict(f"optimize {path}: {exc}") from exc
        return int(metrics.get("numFilesRemoved", 0)), int(metrics.get("numFilesAdded", 0))

    def vacuum(self, path: str, *, retention_hours: int, enforce: bool, dry_run: bool = True) -> int:
        """Files no version within ``retention_hours`` reads: how many would be deleted
        (``dry_run``, the default), or are deleted."""
        removed = self.table(path).vacuum(
            retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=enforce
        )
        return len(removed)

    def checkpoint(self, path: str) -> None:
        """Write a checkpoint of the current version and drop log files older than the log retention."""
        table = self.table(path)
        table.create_checkpoint()
        table.cleanup_metadata()

    # -- reads for Spark -------------------------------------------------------------------------
    def read(self, spark: SparkSession, path: str, version: int | None = None) -> DataFrame:
        """The table (at ``version``, default the latest) as a Spark DataFrame, read by Spark from
        the files the Delta log lists.

        Tables that need Delta's reader (deletion vectors, column mapping) are read through
        delta-rs instead.
        """
        dt = self.table(path) if version is None else DeltaTable(
            path, version=version, storage_options=self.storage_options or None
        )
        schema = to_spark_schema(pa.schema(dt.schema().to_arrow()))
        protocol = dt.protocol()
        features = set(protocol.reader_features or [])
        if features & {"deletionVectors", "columnMapping"} or dt.metadata().partition_columns:
            return spark.createDataFrame(dt.to_pyarrow_table())
        files = dt.file_uris()
        if not files:
            return spark.createDataFrame([], schema)
        return spark.read.schema(schema).parquet(*files)
