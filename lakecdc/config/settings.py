"""What shapes a run besides its inputs: :class:`ApplySettings` and its per-table settings.

Built by :func:`lakecdc.apply` from its arguments (and by jobs from their YAML); read by every
step of the run. The engine a run merges with is picked by :mod:`lakecdc.merge.pick`.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakecdc.changes.columns import sql_string
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from lakecdc.changes.events import PkUpdate
    from lakecdc.changes.sequence import SeqField
    from lakecdc.check.contracts import Contract

#: How long a deleted key blocks late events when the run does not say (its tombstone's life).
DEFAULT_TOMBSTONE_RETENTION = dt.timedelta(days=7)

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
    #: data contracts by source table: declared keys and column types (lakecdc.check.contracts)
    contracts: Mapping[str, Contract] = field(default_factory=dict)
    #: per source table, a ``pk_update`` / tombstone retention other than the run's
    pk_update_by_table: Mapping[str, PkUpdate] = field(default_factory=dict)
    retention_by_table: Mapping[str, dt.timedelta] = field(default_factory=dict)

    #: per table (exact names or fnmatch patterns, ``"*"``: every table): 2 for an SCD type 2
    #: history table instead of the current state (DLT's ``stored_as_scd_type``; lakecdc.consolidate.history)
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


def match_table(mapping: Mapping[str, Any], table: str) -> Any:
    """``mapping``'s value for ``table``: its exact name first, else the first fnmatch pattern
    (``QASOURCE.*``, ``*``) that matches it, in sorted order; None when none does."""
    if table in mapping:
        return mapping[table]
    for pattern in sorted(mapping):
        if fnmatch.fnmatchcase(table, pattern):
            return mapping[pattern]
    return None


def _column_lists(value: Mapping[str, Sequence[str] | str] | Sequence[str] | str | None, what: str) -> dict[str, tuple[str, ...]]:
    """``{table: cols}`` as given, or columns for every table (``"*"``) from a plain list or ``"A,B"``."""
    if value is None:
        return {}
    pairs = dict(value.items()) if isinstance(value, Mapping) else {"*": value}
    out: dict[str, tuple[str, ...]] = {}
    for table, cols in pairs.items():
        items = tuple(c.strip() for c in (cols.split(",") if isinstance(cols, str) else cols))
        if not all(items):
            raise ConfigError(f"{what} for table {table!r}: an empty column name in {cols!r}")
        out[table] = items
    return out


def history_settings(
    stored_as_scd_type: Mapping[str, int] | int,
    track_history_column_list: Mapping[str, Sequence[str] | str] | Sequence[str] | str | None,
    track_history_except_column_list: Mapping[str, Sequence[str] | str] | Sequence[str] | str | None,
    change_data_feed: bool | Sequence[str] | str,
) -> dict[str, Any]:
    """The :class:`ApplySettings` fields of ``apply``'s history arguments, checked."""
    types = {"*": stored_as_scd_type} if isinstance(stored_as_scd_type, int) else dict(stored_as_scd_type or {})
    for table, kind in types.items():
        if kind not in (1, 2):
            raise ConfigError(f"stored_as_scd_type for {table!r} is {kind!r}; use 1 (current state) or 2 (history)")
    track = _column_lists(track_history_column_list, "track_history_column_list")
    but = _column_lists(track_history_except_column_list, "track_history_except_column_list")
    for table in set(track) & set(but):
        raise ConfigError(f"table {table!r}: give track_history_column_list or track_history_except_column_list, not both")
    if isinstance(change_data_feed, bool):
        cdf: tuple[str, ...] = ("*",) if change_data_feed else ()
    else:
        cdf = (change_data_feed,) if isinstance(change_data_feed, str) else tuple(change_data_feed)
    return {"stored_as_scd_type": types, "track_history_column_list": track,
            "track_history_except_column_list": but, "change_data_feed": cdf}
