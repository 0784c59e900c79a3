"""What shapes a run besides its inputs: :class:`ApplySettings`, per-table settings, the engine.

Built by :func:`lakecdc.apply` from its arguments (and by jobs from their YAML); read by every
step of the run.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakecdc.changes.columns import sql_string
from lakecdc.changes.events import PkUpdate
from lakecdc.changes.sequence import SeqField
from lakecdc.contracts import Contract
from lakecdc.errors import ConfigError
from lakecdc.history import (
    match_table,
)
from lakecdc.state import (
    DEFAULT_TOMBSTONE_RETENTION,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from lakecdc.merge.delta_rs import DeltaRsEngine



Progress = Callable[[str], None]


@dataclass(frozen=True)
class ApplySettings:
    """Everything that shapes a run besides its inputs."""

    format: str
    keys: Mapping[str, tuple[str, ...]]
    pk_update: PkUpdate
    tombstone_retention: dt.timedelta
    treat_all_as_strings: bool
    #: per table, the only columns to keep (DLT's ``column_list``; keys are always kept)
    column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: per table, columns to leave out (DLT's ``except_column_list``)
    except_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: False: truncates are read but not applied (DLT's ``apply_as_truncates``)
    apply_as_truncates: bool = True
    #: apply a source transaction only once all its events are there (see lakecdc.changes.transactions)
    complete_transactions: bool = False
    #: source-table name patterns (fnmatch) to apply / to leave out; the others' events are skipped
    include_tables: tuple[str, ...] = ()
    exclude_tables: tuple[str, ...] = ()
    #: data contracts by source table: declared keys and column types (lakecdc.contracts)
    contracts: Mapping[str, Contract] = field(default_factory=dict)
    #: per source table, a ``pk_update`` / tombstone retention other than the run's
    pk_update_by_table: Mapping[str, PkUpdate] = field(default_factory=dict)
    retention_by_table: Mapping[str, dt.timedelta] = field(default_factory=dict)

    #: per table (exact names or fnmatch patterns, ``"*"``: every table): 2 for an SCD type 2
    #: history table instead of the current state (DLT's ``stored_as_scd_type``; lakecdc.history)
    stored_as_scd_type: Mapping[str, int] = field(default_factory=dict)
    #: per table (names or patterns): the only columns whose changes open a new version / columns
    #: whose changes never do (DLT's ``track_history_column_list`` / ``..._except_column_list``)
    track_history_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    track_history_except_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: table names or patterns whose Delta tables have Change Data Feed enabled
    change_data_feed: tuple[str, ...] = ()
    #: fields that order the changes instead of the format's seq (DLT's ``sequence_by``; see
    #: lakecdc.changes.sequence): for every table, and per source table (over contracts, over the default)
    sequence_by: tuple[SeqField, ...] = ()
    sequence_by_table: Mapping[str, tuple[SeqField, ...]] = field(default_factory=dict)
    #: how many tables are prepared and merged at the same time (see :func:`_each_table`)
    parallel_tables: int = 1

    def sequence_for(self, table: str) -> tuple[SeqField, ...]:
        """The table's own ``sequence_by``, else its contract's, else the run's; () the format's seq."""
        declared = self.contracts[table].sequence_by if table in self.contracts else ()
        return self.sequence_by_table.get(table) or declared or self.sequence_by

    def scd_type(self, table: str) -> int:
        """1 for a current-state table, 2 for a history table."""
        return int(match_table(self.stored_as_scd_type, table) or 1)

    def wants_change_data_feed(self, table: str) -> bool:
        return any(fnmatch.fnmatchcase(table, p) for p in self.change_data_feed)

    def pk_update_for(self, table: str) -> PkUpdate:
        """The table's own setting, else its contract's, else the run's."""
        declared = self.contracts[table].pk_update if table in self.contracts else None
        return self.pk_update_by_table.get(table) or declared or self.pk_update  # type: ignore[return-value]

    def retention_for(self, table: str) -> dt.timedelta:
        declared = self.contracts[table].tombstone_retention if table in self.contracts else None
        found = self.retention_by_table.get(table, declared)
        return found if found is not None else self.tombstone_retention

    def route_sql(self) -> str | None:
        """SQL over ``table``: true for a table that is applied; None when every table is."""
        if not self.include_tables and not self.exclude_tables:
            return None

        def any_of(patterns: tuple[str, ...]) -> str:
            return " OR ".join(f"table RLIKE {sql_string('^' + fnmatch.translate(p))}" for p in patterns)

        inc = f"({any_of(self.include_tables)})" if self.include_tables else "true"
        exc = f"NOT ({any_of(self.exclude_tables)})" if self.exclude_tables else "true"
        return f"({inc} AND {exc})"

    def ignores(self, table: str, column: str, keys: Sequence[str]) -> bool:
        """True when ``column`` of ``table`` is left out of the target by a column list."""
        low = column.lower()
        if low in {k.lower() for k in keys}:
            return False
        only = self.column_list.get(table)
        if only is not None and low not in {c.lower() for c in only}:
            return True
        return low in {c.lower() for c in self.except_column_list.get(table, ())}


def per_table(value: Any, what: str) -> tuple[Any, dict[str, Any]]:
    """A run-wide setting given once, or per source table with an optional ``"*"`` default."""
    if not isinstance(value, Mapping):
        return value, {}
    by_table = {str(k): v for k, v in value.items() if k != "*"}
    default = value.get("*", DEFAULT_TOMBSTONE_RETENTION if what == "tombstone_retention" else "delete-insert")
    return default, by_table


def normalise_keys(keys: Mapping[str, Sequence[str] | str] | None) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for table, cols in (keys or {}).items():
        items = [c.strip() for c in (cols.split(",") if isinstance(cols, str) else cols)]
        if not items or not all(items):
            raise ConfigError(f"keys for table {table!r} are empty")
        out[table] = tuple(items)
    return out


#: The engine ``auto`` picks on a session lakecdc started itself, when both engines can run there
#: (see the README's "Two engines" and bench/RESULTS.md for the figures behind the choice).
EMBEDDED_DEFAULT_ENGINE = "delta-rs"


def auto_engine(spark: SparkSession) -> str:
    """The engine ``engine="auto"`` means on ``spark``: delta-spark where Delta Lake runs in a session
    you (or your platform) built; on lakecdc's own embedded session :data:`EMBEDDED_DEFAULT_ENGINE`
    (``LAKECDC_ENGINE`` overrides both); delta-rs where Delta's classes are absent."""
    import os

    from lakecdc.spark.compat import delta_spark_available, is_embedded

    chosen = os.environ.get("LAKECDC_ENGINE", "").strip()
    if chosen and chosen != "auto":
        return chosen
    if not delta_spark_available(spark):
        return "delta-rs"
    return EMBEDDED_DEFAULT_ENGINE if is_embedded(spark) else "delta-spark"


def make_engine(engine: str | DeltaRsEngine | None, spark: SparkSession, storage_options: Mapping[str, str] | None) -> DeltaRsEngine:
    from lakecdc.merge.delta_rs import DeltaRsEngine

    if engine is None or engine == "auto":
        engine = auto_engine(spark)
    if engine == "delta-spark":
        from lakecdc.spark.compat import delta_spark_available
        from lakecdc.spark.jars import status

        if not delta_spark_available(spark):
            raise ConfigError(
                "engine 'delta-spark' needs Delta Lake in the Spark session (spark.sql.extensions="
                "io.delta.sql.DeltaSparkSessionExtension and Delta's jars, e.g. spark.jars.packages="
                "io.delta:delta-spark_<spark minor>_2.13:<delta version>); " + status().removeprefix("lakecdc: ")
            )
    if engine == "delta-rs":
        return DeltaRsEngine(storage_options)
    if engine == "delta-spark":
        from lakecdc.merge.delta_spark import DeltaSparkEngine

        return DeltaSparkEngine(spark)  # type: ignore[return-value]
    if isinstance(engine, str):
        raise ConfigError(f"unknown engine {engine!r}; use 'auto', 'delta-rs' or 'delta-spark'")
    return engine
