"""What the target's own tables need of a Delta engine.

lakecdc keeps its state in Delta tables beside the data (tombstones, the runs table, the
quarantine, held events) and reads table properties and statistics to check a run against what
the target holds. Those reads and writes are :class:`Store`; a Delta engine
(:class:`lakecdc.merge.engine.Engine`, both of whose engines implement it) is a :class:`Store`
that also merges, creates and maintains tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession


@runtime_checkable
class Store(Protocol):
    """The reads and writes of the target's own Delta tables (any table given by its ref)."""

    def exists(self, path: str) -> bool: ...
    def properties(self, path: str) -> dict[str, str]: ...
    def set_properties(self, path: str, properties: Mapping[str, str]) -> None: ...
    def reaches(self, path: str, column: str, value: str) -> bool | None: ...
    def append(self, path: str, data: pa.Table, *, version: int, app_id: str = ...) -> None: ...
    def delete_where(self, path: str, predicate: str) -> int: ...
    def read(self, spark: SparkSession, path: str, version: int | None = None) -> DataFrame: ...
    def read_arrow(self, path: str, columns: list[str] | None = None) -> pa.Table: ...
