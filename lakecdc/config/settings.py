"""What shapes a run besides its inputs: :class:`Settings`, one frozen object.

Build it once and reuse it (``lakecdc.Settings(format="debezium-json", keys={"S.T": ["ID"]})``),
or let :func:`lakecdc.apply` build it from its keyword arguments; the CLI's flags, ``--config``
YAML, job files and data contracts reach the same fields through :mod:`lakecdc.config.sources`.
Every field accepts the forms its keyword argument of :func:`lakecdc.apply` accepts and keeps one
of them (a per-table setting as ``{table: value}`` with ``"*"`` for the others); a value it does
not accept is a :class:`~lakecdc.errors.ConfigError` naming the setting, the value and what it
accepts. Every default is stated once, here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import fnmatch
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from lakecdc.config import values as V
from lakecdc.config.values import BadValue, PkUpdate, ScdType, SeqField
from lakecdc.errors import ConfigError

#: What a primary-key update becomes when the run, the table and its contract do not say.
DEFAULT_PK_UPDATE: PkUpdate = "delete-insert"
#: How long a deleted key blocks late events when the run does not say (its tombstone's life).
DEFAULT_TOMBSTONE_RETENTION = dt.timedelta(days=7)
#: What a table is when ``stored_as_scd_type`` does not name it: its current state.
DEFAULT_SCD_TYPE: ScdType = 1
#: How much history ``maintain``'s vacuum keeps (Delta's default ``delta.deletedFileRetentionDuration``).
DEFAULT_VACUUM_RETENTION = dt.timedelta(days=7)
#: Tables prepared and merged at once when the caller does not say: per-table work is mostly
#: waiting (Spark job scheduling, Delta log reads, delta-rs merges, which release the GIL), so even
#: 2 cores merge 12 tables 1.7-2x faster 4 at a time (bench/README.md, "Concurrent table merges").
DEFAULT_PARALLEL_TABLES = 4
#: When a stream (``lakecdc.stream``, ``lakecdc run --stream``) triggers its batches when it does not say.
DEFAULT_TRIGGER = "available-now"

#: The key of a per-table setting's value for the tables it does not name.
EVERY_TABLE = "*"

Progress = Callable[[str], None]


class Declared(Protocol):
    """What a data contract declares for its table that a run's settings defer to
    (:class:`lakecdc.check.contracts.Contract`)."""

    # (read-only: a contract is frozen)
    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def pk_update(self) -> str | None: ...
    @property
    def tombstone_retention(self) -> dt.timedelta | None: ...
    @property
    def sequence_by(self) -> tuple[SeqField, ...]: ...
    @property
    def target(self) -> str | None: ...


def _per_table(scalar: Callable[..., Any]) -> Callable[[Any, str], dict[str, Any]]:
    """A parser of ``value`` or ``{table: value}`` (``"*"``: the others) from one of ``value``."""

    def parse(value: Any, setting: str) -> dict[str, Any]:
        if value is None:
            return {}
        pairs = value.items() if isinstance(value, Mapping) else [(EVERY_TABLE, value)]
        out: dict[str, Any] = {}
        for table, v in pairs:
            try:
                out[str(table)] = scalar(v, setting)
            except BadValue as exc:
                if table == EVERY_TABLE or exc.table is not None:
                    raise
                raise exc.for_table(str(table)) from None
        return out

    return parse


def _keys(value: Any, setting: str) -> dict[str, tuple[str, ...]]:
    """``{table: cols}``; a plain list (DLT's ``keys=["ID"]`` for a one-table input) is the key of
    every table whose messages carry none."""
    return _per_table(lambda v, s: V.columns(v, s))(value, setting)


def _change_data_feed(value: Any, setting: str) -> tuple[str, ...]:
    if isinstance(value, bool):
        return (EVERY_TABLE,) if value else ()
    return V.patterns(value, setting) if value else ()


def _table_names(value: Any, setting: str) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip().strip("."):
            raise BadValue(setting, value, "a catalog.schema prefix or a mapping {TABLE: CATALOG_TABLE}")
        return value
    if not isinstance(value, Mapping):
        raise BadValue(setting, value, "a catalog.schema prefix or a mapping {TABLE: CATALOG_TABLE}")
    return {str(t): tuple(v) if isinstance(v, (list, tuple)) else str(v) for t, v in value.items()}


def _contracts(value: Any, setting: str) -> Any:
    if value is None or isinstance(value, (Mapping, str, os.PathLike)):
        return value
    raise BadValue(setting, value, "a contract file or directory, or contracts by source table")


def _reapply(value: Any, setting: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, (str, os.PathLike)) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(x, (str, os.PathLike)) and str(x) for x in items):
        raise BadValue(setting, value, "a path or pattern of applied files, or a list of them (\"landing/2024-06-*.json\")")
    return tuple(items)


def _optional(scalar: Callable[..., Any]) -> Callable[[Any, str], Any]:
    return lambda value, setting: None if value is None else scalar(value, setting)


#: The parser of each field (the value as given -> the value kept); each keeps its own output.
PARSERS: dict[str, Callable[[Any, str], Any]] = {
    "format": lambda v, s: "" if v is None or v == "" else V.name(v, s),
    "options": V.string_map,
    "keys": _keys,
    "pk_update": _per_table(V.pk_update),
    "tombstone_retention": _per_table(V.duration),
    "sequence_by": _per_table(V.sequence),
    "column_list": _per_table(V.columns),
    "except_column_list": _per_table(V.columns),
    "apply_as_truncates": V.flag,
    "complete_transactions": V.flag,
    "include_tables": V.patterns,
    "exclude_tables": V.patterns,
    "contracts": _contracts,
    "stored_as_scd_type": _per_table(V.scd_type),
    "track_history_column_list": _per_table(V.columns),
    "track_history_except_column_list": _per_table(V.columns),
    "change_data_feed": _change_data_feed,
    "engine": V.engine,
    "storage_options": V.string_map,
    "table_paths": V.string_map,
    "table_names": _table_names,
    "min_file_age": V.seconds,
    "parallel_tables": lambda v, s: DEFAULT_PARALLEL_TABLES if v is None else V.count(v, s),
    "wait": _optional(V.seconds),
    "reapply": _reapply,
}


@dataclass(frozen=True)
class Settings:
    """Everything that shapes a run besides its inputs (and the Spark session).

    The fields are :func:`lakecdc.apply`'s keyword arguments (see there what each does) and take
    the same values; :meth:`with_` returns a copy with some of them changed::

        base = lakecdc.Settings(format="debezium-json", keys={"S.T": ["ID"]})
        lakecdc.apply("landing/", "lake/", settings=base)
        lakecdc.apply("landing/", "lake/", settings=base, pk_update="abend")   # this run only

    Per-table settings are kept as ``{table: value}``, ``"*"`` holding the value for the tables
    they do not name; ask for one table's value with the ``..._for`` methods.
    """

    #: a registered format name (see :data:`lakecdc.decode.DECODERS`); every run needs one (none is
    #: assumed), but a ``Settings`` may leave it to the call that uses it ("": not given yet)
    format: str = ""
    #: the format's options (GoldenGate property names for GoldenGate formats)
    options: Mapping[str, str] = field(default_factory=dict)
    #: primary-key columns per source table, for messages that carry none (DLT's ``keys``):
    #: ``{"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_ID"]}``; a plain list (``["ID"]``, DLT's form for
    #: a one-table input, kept as ``"*"``) is the key of the input's one table: a run whose input
    #: holds several tables refuses it (name each table's key instead)
    keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: ``delete-insert`` (default), ``update`` or ``abend`` (see ``semantics.md``); or per source
    #: table, ``{"S.ORDERS": "update"}`` (a ``"*"`` entry for the others)
    pk_update: Mapping[str, PkUpdate] = field(default_factory=dict)
    #: how long a deleted key keeps blocking late events (a timedelta or ``"7d"``); or per source
    #: table (a ``"*"`` entry for the others)
    tombstone_retention: Mapping[str, dt.timedelta] = field(default_factory=dict)
    #: order changes by these fields instead of the format's seq (DLT's ``sequence_by``):
    #: ``["UPDATED_AT"]`` for every table, or per source table ``{"S.ORDERS": ["VERSION",
    #: "source.scn:int"]}`` (a ``"*"`` entry for the others; a contract's ``lakecdc.sequence_by``
    #: comes between the two). Fields: ``op_ts``, ``pos``, ``source.<name>`` or a column, compared by
    #: type (see :mod:`lakecdc.changes.sequence`); the format's seq breaks ties. An event without a
    #: value is quarantined. A table keeps the basis it was built with.
    sequence_by: Mapping[str, tuple[SeqField, ...]] = field(default_factory=dict)
    #: per table, the only columns written to the target (DLT's ``column_list``); key columns are
    #: always written. ``{"S.ORDERS": ["ID", "STATUS"]}``
    column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: per table, columns never written (DLT's ``except_column_list``)
    except_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: False to read truncates without applying them (DLT's ``apply_as_truncates``)
    apply_as_truncates: bool = True
    #: apply a source transaction only when all its events have been read (formats with
    #: transaction markers: Debezium's BEGIN/END); the events of one still open are held for the
    #: next run (see :mod:`lakecdc.changes.transactions`)
    complete_transactions: bool = False
    #: source-table name patterns (``QASOURCE.*``, fnmatch, case-sensitive): only tables matching an
    #: include pattern (all, when none is given) and no exclude pattern are applied; the others'
    #: events are counted as skipped
    include_tables: tuple[str, ...] = ()
    exclude_tables: tuple[str, ...] = ()
    #: ODCS data contracts (a file, a directory of them, or loaded ones by source table): their
    #: keys for messages without keys, their column types over inference, their ``lakecdc.*``
    #: settings under the run's per-table ones
    contracts: str | os.PathLike[str] | Mapping[str, Declared] | None = None
    #: 2 (or ``"2"``) for SCD type 2 history tables (every version, with ``__START_AT`` /
    #: ``__END_AT``; see :mod:`lakecdc.consolidate.history`) instead of current-state tables (1, the
    #: default); for all tables, or per table: ``{"S.ORDERS": 2}`` (fnmatch patterns work)
    stored_as_scd_type: Mapping[str, ScdType] = field(default_factory=dict)
    #: for history tables, the only columns whose changes open a new version / columns whose
    #: changes never do (a change of other columns updates the current version in place); per table
    #: (names or patterns), or a list for every history table
    track_history_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    track_history_except_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: enable Delta's Change Data Feed on every table (True) or on these tables (names or patterns)
    change_data_feed: tuple[str, ...] = ()
    #: ``auto`` (delta-spark when its JVM classes are present, else delta-rs), ``delta-rs``,
    #: ``delta-spark``, or an engine object
    engine: Any = "auto"
    #: delta-rs's storage options (object store credentials and endpoints)
    storage_options: Mapping[str, str] = field(default_factory=dict)
    #: where a source table's Delta table lives instead of ``<target>/<table>``: a path relative to
    #: the target, an absolute path or a URI (``{"S.ORDERS": "orders"}``). Recorded with the
    #: target, so later runs need not repeat it; a table that exists is not moved this way
    table_paths: Mapping[str, str] = field(default_factory=dict)
    #: source tables kept as tables of the Spark session's catalog (delta-spark engine):
    #: ``{"SRC.ORDERS": "main.sales.orders"}`` (managed), ``{"SRC.ORDERS": ("main.sales.orders",
    #: "s3://bucket/orders")}`` (external), or a ``"catalog.schema"`` prefix for every table.
    #: Recorded with the target like ``table_paths``
    table_names: Mapping[str, str | tuple[str, str]] | str | None = None
    #: seconds; files changed more recently are left for a later run (a writer may still be at
    #: work on them). A file of a line-oriented format that grows after it was applied has its new
    #: complete lines applied by a later run; other formats' files must not change once read
    min_file_age: float = 0.0
    #: how many tables are prepared and merged at once (at most the number of tables); 1 merges
    #: one at a time
    parallel_tables: int = DEFAULT_PARALLEL_TABLES
    #: seconds to wait for another writer of the target to finish (None: raise
    #: :class:`~lakecdc.lake.lease.TargetBusy` at once); one writer per target at a time
    wait: float | None = None
    #: files applied before to read again in this run, by path or pattern (``fnmatch``, on the
    #: whole path or on the file name: ``"landing/2024-06-*.json"``, ``"*.avro"``): files read with
    #: the wrong ``format`` and quarantined, or after a decoder's fix. Each is taken out of the
    #: ledger and applied as a new file; changes the tables already hold count as duplicate or late
    reapply: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, PARSERS[f.name](getattr(self, f.name), f.name))
        for a, b in (("column_list", "except_column_list"),
                     ("track_history_column_list", "track_history_except_column_list")):
            for table in sorted(set(getattr(self, a)) & set(getattr(self, b))):
                raise ConfigError(f"table {table!r}: give {a} or {b}, not both")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """Every setting's name (the keyword arguments :func:`lakecdc.apply` takes besides its inputs)."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def build(cls, settings: Settings | None = None, **overrides: Any) -> Settings:
        """``settings`` (default: every default) with ``overrides`` in place of its fields; a name
        that is not a setting is a :class:`ConfigError` listing the settings."""
        unknown = sorted(set(overrides) - set(cls.names()))
        if unknown:
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)}; the settings are {', '.join(cls.names())}")
        if settings is not None and not isinstance(settings, Settings):
            raise ConfigError(f"settings={settings!r}: expected a lakecdc.Settings")
        return dataclasses.replace(settings, **overrides) if settings is not None else cls(**overrides)

    def with_(self, **overrides: Any) -> Settings:
        """A copy with ``overrides`` in place of these fields (the same names and values as the fields)."""
        return Settings.build(self, **overrides)

    # -- one table's value -----------------------------------------------------------------------

    @property
    def loaded_contracts(self) -> Mapping[str, Any]:
        """The contracts by source table, once loaded (:func:`lakecdc.apply` loads them first)."""
        if self.contracts is None:
            return {}
        if not isinstance(self.contracts, Mapping):
            raise ConfigError(f"the contracts at {self.contracts} are not loaded yet (lakecdc.check.contracts.load_contracts)")
        return self.contracts

    def contract(self, table: str) -> Declared | None:
        """``table``'s contract (once the contracts are loaded), or None."""
        return self.loaded_contracts.get(table)

    def keys_for(self, table: str) -> tuple[str, ...] | None:
        """The key columns the run names for ``table`` (its own, else every table's); None: none."""
        return self.keys.get(table) or self.keys.get(EVERY_TABLE)

    def check_one_table_keys(self, tables: Iterable[str | None]) -> None:
        """Refuse a plain list of keys (``keys=["ID"]``, DLT's form for a one-table input) when more
        than one of the input's ``tables`` would take it: each table's key must then be named."""
        every = self.keys.get(EVERY_TABLE)
        unnamed = sorted({t for t in tables if t is not None and t not in self.keys})
        if every is None or len(unnamed) < 2:
            return
        shown = ", ".join(unnamed[:5]) + (f" and {len(unnamed) - 5} more" if len(unnamed) > 5 else "")
        raise ConfigError(
            f"keys={list(every)} is the key of a one-table input, but this input holds {len(unnamed)} tables "
            f"({shown}): name each table's key, keys={{{unnamed[0]!r}: {list(every)}, ...}} "
            f"(a job file's tables.keys, the CLI's --key TABLE=COL,...)"
        )

    def required_format(self) -> str:
        """The format the run reads; a :class:`ConfigError` listing the registered formats when the
        settings name none (no format is assumed: reading files as the wrong one quarantines them)."""
        if not self.format:
            from lakecdc.decode import DECODERS

            raise ConfigError(
                "say which format the change files are in: format=NAME (the CLI's --format NAME, a job "
                f"source's format:); the formats: {', '.join(sorted(DECODERS))}"
            )
        return self.format

    def pk_update_for(self, table: str) -> PkUpdate:
        """The table's own setting, else its contract's, else the run's."""
        declared = self.contract(table)
        return (self.pk_update.get(table) or (declared.pk_update if declared else None)  # type: ignore[return-value]
                or self.pk_update.get(EVERY_TABLE, DEFAULT_PK_UPDATE))

    def retention_for(self, table: str) -> dt.timedelta:
        """The table's own tombstone retention, else its contract's, else the run's."""
        declared = self.contract(table)
        for found in (self.tombstone_retention.get(table), declared.tombstone_retention if declared else None):
            if found is not None:
                return found
        return self.default_retention

    @property
    def default_retention(self) -> dt.timedelta:
        """The run's tombstone retention (for the tables no setting or contract names)."""
        return self.tombstone_retention.get(EVERY_TABLE, DEFAULT_TOMBSTONE_RETENTION)

    def sequence_for(self, table: str) -> tuple[SeqField, ...]:
        """The table's own ``sequence_by``, else its contract's, else the run's; () the format's seq."""
        declared = self.contract(table)
        return (self.sequence_by.get(table) or (declared.sequence_by if declared else ())
                or self.sequence_by.get(EVERY_TABLE, ()))

    def scd_type(self, table: str) -> ScdType:
        """1 for a current-state table, 2 for a history table."""
        found = match_table(self.stored_as_scd_type, table)
        return found if found is not None else DEFAULT_SCD_TYPE

    def wants_change_data_feed(self, table: str) -> bool:
        return any(fnmatch.fnmatchcase(table, p) for p in self.change_data_feed)

    def ignores(self, table: str, column: str, keys: Sequence[str]) -> bool:
        """True when ``column`` of ``table`` is left out of the target by a column list."""
        low = column.lower()
        if low in {k.lower() for k in keys}:
            return False
        only = self.column_list.get(table, self.column_list.get(EVERY_TABLE))
        if only is not None and low not in {c.lower() for c in only}:
            return True
        but = self.except_column_list.get(table, self.except_column_list.get(EVERY_TABLE, ()))
        return low in {c.lower() for c in but}


def match_table(mapping: Mapping[str, Any], table: str) -> Any:
    """``mapping``'s value for ``table``: its exact name first, else the first fnmatch pattern
    (``QASOURCE.*``, ``*``) that matches it, in sorted order; None when none does."""
    if table in mapping:
        return mapping[table]
    for pattern in sorted(mapping):
        if fnmatch.fnmatchcase(table, pattern):
            return mapping[pattern]
    return None
