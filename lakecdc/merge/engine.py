"""The contract both Delta engines implement, and how targets are named.

lakecdc runs every write through an :class:`Engine`: :class:`~lakecdc.merge.delta_rs.DeltaRsEngine`
(delta-rs, embedded in the Python process) and :class:`~lakecdc.merge.delta_spark.DeltaSparkEngine`
(Delta Lake's own engine inside Spark, driven through Spark SQL only, so that a Spark Connect
session works too). The behaviour suite (``tests/test_engines.py`` and every test using the
``engine`` fixture) runs on both and requires identical tables.

A target is named by a string, its *ref*: a path or URI of a Delta table, or ``catalog:<name>``
for a table in the Spark session's catalog (``catalog:main.sales.orders``), which only the
delta-spark engine can reach (:func:`catalog_name`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

    from lakecdc.merge.history_plan import HistoryPlan
    from lakecdc.merge.plan import MergePlan, MergeResult
    from lakecdc.merge.source import BatchSource

#: The prefix of a target ref naming a catalog table instead of a path.
CATALOG = "catalog:"
#: Between a catalog table's name and the location of its files (an external table).
_AT = " LOCATION "
_SLUG = re.compile(r"[^0-9A-Za-z_]")


def catalog_name(ref: str) -> str | None:
    """The catalog table name a ref names (``catalog:main.sales.orders`` -> ``main.sales.orders``),
    or None for a path."""
    return ref[len(CATALOG):].split(_AT, 1)[0] if ref.startswith(CATALOG) else None


def catalog_location(ref: str) -> str | None:
    """Where an external catalog table keeps its files (None: a managed table, or a path)."""
    if not ref.startswith(CATALOG) or _AT not in ref:
        return None
    return ref.split(_AT, 1)[1]


def catalog_ref(name: str, location: str | None = None) -> str:
    """The ref of catalog table ``name`` (external at ``location`` when given)."""
    if not name or not name.strip() or "`" in name or any(c in name for c in "\n\r\t"):
        raise ConfigError(f"catalog table name {name!r}: expected catalog.schema.table (or schema.table)")
    return CATALOG + name.strip() + (_AT + str(location) if location else "")


def catalog_table_for(prefix: str, table: str) -> str:
    """The catalog table a source table gets under a ``catalog.schema`` prefix: its name in lower
    case, ``.`` and other characters outside ``[0-9a-z_]`` as ``_``, and, when characters other
    than ``.`` were replaced, 8 hex digits of its SHA-256 so that no two source tables meet
    (``SRC.ORDERS`` -> ``<prefix>.src_orders``, ``a/b`` -> ``<prefix>.a_b_1b2c3d4e``)."""
    flat = table.replace(".", "_")
    slug = _SLUG.sub("_", flat).lower()
    if _SLUG.search(flat) or not slug:
        slug += "_" + hashlib.sha256(table.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{prefix.rstrip('.')}.{slug}"


@runtime_checkable
class Engine(Protocol):
    """What lakecdc needs of a Delta engine. Both engines implement all of it.

    Writes are idempotent: a merge, history merge or append carries ``(app_id, version)`` (the
    run id) as a Delta transaction identifier, and an engine commits nothing for a pair the table
    already holds. A commit that loses to a concurrent one raises
    :class:`~lakecdc.errors.CommitConflict` (retryable) on both engines.
    """

    name: str

    # table lifecycle
    def exists(self, path: str) -> bool: ...
    def create(self, path: str, schema: T.StructType, *, name: str | None = None,
               properties: Mapping[str, str] | None = None) -> None: ...
    def properties(self, path: str) -> dict[str, str]: ...
    def set_properties(self, path: str, properties: Mapping[str, str]) -> None: ...
    def schema(self, path: str) -> T.StructType: ...
    def add_columns(self, path: str, fields: T.StructType) -> None: ...
    def committed_version(self, path: str, app_id: str = ...) -> int | None: ...
    def version(self, path: str) -> int: ...
    def max_stat(self, path: str, column: str) -> str | None: ...

    # writes
    def merge(self, plan: MergePlan, source: BatchSource) -> MergeResult: ...
    def merge_history(self, plan: HistoryPlan, source: pa.Table) -> MergeResult: ...
    def append(self, path: str, data: pa.Table, *, version: int, app_id: str = ...) -> None: ...
    def delete_where(self, path: str, predicate: str) -> int: ...

    # reads
    def read(self, spark: SparkSession, path: str, version: int | None = None) -> DataFrame: ...
    def read_arrow(self, path: str, columns: list[str] | None = None) -> pa.Table: ...

    # maintenance
    def files(self, path: str) -> tuple[int, int]: ...
    def compact(self, path: str, *, target_size: int | None, zorder: tuple[str, ...] = ()) -> tuple[int, int]: ...
    def vacuum(self, path: str, *, retention_hours: int, enforce: bool, dry_run: bool = False) -> int | None: ...
    def checkpoint(self, path: str) -> None: ...
