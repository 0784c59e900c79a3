"""The contract both Delta engines implement.

lakecdc runs every write through an :class:`Engine`: :class:`~lakecdc.merge.delta_rs.DeltaRsEngine`
(delta-rs, embedded in the Python process) and :class:`~lakecdc.merge.delta_spark.DeltaSparkEngine`
(Delta Lake's own engine inside Spark, driven through Spark SQL only, so that a Spark Connect
session works too). The behaviour suite (``tests/test_engines.py`` and every test using the
``engine`` fixture) runs on both and requires identical tables. Tables are named by their ref
(:mod:`lakecdc.lake.refs`: a path, a URI or ``catalog:<name>``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lakecdc.lake.store import Store

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import types as T

    from lakecdc.merge.history_plan import HistoryPlan
    from lakecdc.merge.plan import MergePlan, MergeResult
    from lakecdc.merge.source import BatchSource


@runtime_checkable
class Engine(Store, Protocol):
    """What lakecdc needs of a Delta engine. Both engines implement all of it.

    Writes are idempotent: a merge, history merge or append carries ``(app_id, version)`` (the
    run id) as a Delta transaction identifier, and an engine commits nothing for a pair the table
    already holds. A commit that loses to a concurrent one raises
    :class:`~lakecdc.errors.CommitConflict` (retryable) on both engines. The reads and writes of
    the target's own tables (``exists``, ``properties``, ``append``, ``read``, ...) are those of
    :class:`~lakecdc.lake.store.Store`.
    """

    name: str

    # table lifecycle
    def create(self, path: str, schema: T.StructType, *, name: str | None = None,
               properties: Mapping[str, str] | None = None) -> None: ...
    def schema(self, path: str) -> T.StructType: ...
    def add_columns(self, path: str, fields: T.StructType) -> None: ...
    def committed_version(self, path: str, app_id: str = ...) -> int | None: ...
    def version(self, path: str) -> int: ...

    # writes
    def merge(self, plan: MergePlan, source: BatchSource) -> MergeResult: ...
    def merge_history(self, plan: HistoryPlan, source: pa.Table) -> MergeResult: ...

    # maintenance
    def files(self, path: str) -> tuple[int, int]: ...
    def compact(self, path: str, *, target_size: int | None, zorder: tuple[str, ...] = ()) -> tuple[int, int]: ...
    def vacuum(self, path: str, *, retention_hours: int, enforce: bool, dry_run: bool = False) -> int | None: ...
    def checkpoint(self, path: str) -> None: ...
