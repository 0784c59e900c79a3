"""A table's shape: its columns before typing (the target's and the run's new ones, with their
other spellings), its keys, and the columns it leaves out, from the target's schema and the run's
profile of its events (:mod:`lakecdc.run.profile`). :mod:`lakecdc.merge.prepare` makes the table's
layout from it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from lakecdc.errors import ConfigError, LakecdcError, MissingKeyError
from lakecdc.lake.state import known_tables, table_path
from lakecdc.merge.history_plan import HISTORY_COLUMNS, is_history

if TYPE_CHECKING:
    from lakecdc.config.settings import Settings
    from lakecdc.merge.engine import Engine


#: Column names a target table keeps for lakecdc's own columns: any name starting with ``_cdc_``
#: (in any case: Delta column names ignore case), and in a history table its validity columns.
RESERVED_PREFIX = "_cdc_"


def reserved_column(name: str, *, history: bool = False) -> bool:
    """True when a source column named ``name`` would clash with lakecdc's metadata columns.

    Such a column is not added to the table: the records that carry it are quarantined with a
    reason naming it (:func:`~lakecdc.run.profile.reserved_records`), the others apply. To apply
    those records without the column, leave it out with ``except_column_list``
    (``--except-column-list T=_cdc_x``).
    """
    low = name.lower()
    return low.startswith(RESERVED_PREFIX) or (history and low in {n.lower() for n, _ in HISTORY_COLUMNS})


@dataclass(frozen=True)
class TableShape:
    """A table's columns before typing: existing ones, new ones (with other spellings), keys."""

    exists: bool
    existing: T.StructType
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    spelled: dict[str, list[str]]
    new_columns: dict[str, list[str]]
    #: columns of the images that a column list leaves out (all spellings)
    ignored: tuple[str, ...] = ()
    #: columns of the images named like lakecdc's own (:func:`reserved_column`): their records
    #: are quarantined
    reserved: tuple[str, ...] = ()


def table_shape(engine: Engine, settings: Settings, target: str, table: str, prof: dict) -> TableShape:
    """Columns and keys of ``table`` from its target (if any) and this run's events.

    Delta column names ignore case, so spellings that differ only in case are one column (the
    target's spelling, else the first seen).
    """
    path = table_path(target, table)
    exists = engine.exists(path)
    existing = engine.schema(path) if exists else T.StructType()
    existing_cols = [f.name for f in existing.fields if not f.name.startswith("_cdc_")]
    spelled: dict[str, list[str]] = {c.lower(): [c] for c in existing_cols}
    seen: list[str] = []
    for c in prof["columns"]:
        if c.lower() not in spelled:
            spelled[c.lower()] = [c]
            seen.append(c)
        elif c not in spelled[c.lower()]:
            spelled[c.lower()].append(c)
    recorded = known_tables(target).get(table) if exists else None
    # messages without keys (inserts and deletes of some formats) fall back on the recorded ones
    fallback = recorded if not prof["keys"] else None
    contract = settings.contract(table)
    configured = settings.keys_for(table) or (contract.keys if contract and contract.keys else None)
    keys = resolve_keys(table, prof["keys"], configured or fallback, existing_cols + seen)
    ignored = [c for c in seen if settings.ignores(table, c, keys)]
    seen = [c for c in seen if c not in ignored]
    history = settings.scd_type(table) == 2
    reserved = [c for c in seen if reserved_column(c, history=history)]
    for k in keys:
        if reserved_column(k, history=history):
            raise LakecdcError(
                f"table {table!r}: key column {k!r} has a name lakecdc keeps for its own columns "
                f"({RESERVED_PREFIX}*, and __START_AT/__END_AT in history tables); a Delta table cannot hold "
                "both: configure another key (--key), or rename the column at the source"
            )
    seen = [c for c in seen if c not in reserved]
    if recorded and [k.lower() for k in recorded] != [k.lower() for k in keys]:
        raise ConfigError(
            f"table {table!r}: its primary_keys are now {list(keys)}, but {path} was built on {list(recorded)}; "
            "a Delta table cannot change its key: apply into a new target, or rebuild this table"
        )
    for k in keys:
        if k.lower() not in spelled:
            spelled[k.lower()] = [k]
            seen.append(k)
    kept = [c for c in existing_cols if not settings.ignores(table, c, keys)]
    return TableShape(
        exists=exists, existing=existing, columns=tuple(kept + seen), keys=keys, spelled=spelled,
        new_columns={c: spelled[c.lower()][1:] for c in seen},
        ignored=tuple(sorted({*ignored, *(c for c in existing_cols if c not in kept)}, key=str.lower)),
        reserved=tuple(n for c in reserved for n in spelled[c.lower()]),
    )


def history_shape(settings: Settings, table: str, path: str, shape: TableShape) -> TableShape:
    """``shape`` checked against the storage asked for: a history table's validity columns are
    taken out of its source columns; a table cannot change between current state and history."""
    wanted = settings.scd_type(table) == 2
    if shape.exists and is_history(shape.existing) and not wanted:
        raise ConfigError(
            f"table {table!r}: {path} is an SCD type 2 history table; apply it with "
            f"stored_as_scd_type=2 (--scd2 {table}), or into another target"
        )
    if not wanted:
        return shape
    if shape.exists and not is_history(shape.existing):
        raise ConfigError(
            f"table {table!r}: {path} is a current-state table (SCD type 1); a history table "
            "(stored_as_scd_type=2) needs a new table: apply into another target, or rebuild this one"
        )
    validity = {name for name, _ in HISTORY_COLUMNS}
    return replace(
        shape,
        existing=T.StructType([f for f in shape.existing.fields if f.name not in validity]),
        columns=tuple(c for c in shape.columns if c not in validity),
        ignored=tuple(c for c in shape.ignored if c not in validity),
    )


def resolve_keys(table: str, declared: Sequence[str] | None, configured: Sequence[str] | None, columns: Sequence[str]) -> tuple[str, ...]:
    """The key columns, spelled as the table's columns are (message keys may differ in case)."""
    if declared and configured and [c.lower() for c in declared] != [c.lower() for c in configured]:
        raise ConfigError(
            f"table {table!r}: the messages' primary_keys {list(declared)} differ from the configured "
            f"keys {list(configured)}; remove one of them"
        )
    chosen = declared or configured
    if not chosen:
        raise MissingKeyError(table)
    out = []
    lower = {c.lower(): c for c in columns}
    for k in chosen:
        out.append(k if k in columns else lower.get(k.lower(), k))
    return tuple(out)


def with_declared(shape: TableShape, declared: Mapping[str, T.DataType], settings: Settings, table: str) -> TableShape:
    """``shape`` with the columns the input declares but no image of the run holds (a column
    every message leaves out: a Qlik mask bit 0, an Avro ``_isMissing`` flag, a DTS ``NONE``, a
    Debezium unavailable value) added as new columns: rows inserted now read NULL for them, and
    as they are never present in an image no stored value is overwritten. Columns a column list
    leaves out and names lakecdc keeps for its own columns are not added."""
    history = settings.scd_type(table) == 2
    extra = [c for c in declared
             if c.lower() not in shape.spelled and not settings.ignores(table, c, shape.keys)
             and not reserved_column(c, history=history)]
    if not extra:
        return shape
    return replace(
        shape, columns=(*shape.columns, *extra), spelled={**shape.spelled, **{c.lower(): [c] for c in extra}},
        new_columns={**shape.new_columns, **{c: [] for c in extra}},
    )
