"""The MERGE of one batch into one table, written once and run by either Delta engine.

A :class:`MergePlan` holds everything that decides the outcome: the match condition (the key,
narrowed by the batch's key range so the engine can skip files), the per-column update
expressions (a column the batch does not carry keeps the target's value), the inserts, the
deletes, the seq guard (a row is only touched by a strictly newer change), the truncate
watermark, and the idempotent-commit identity (``app_id``, ``version``). The source rows are the
net actions of :mod:`lakecdc.consolidate.fold` (positional columns ``k{j}``, ``c{i}``, ``u{i}``).

Clause rules (the same for both engines):

1. ``WHEN MATCHED AND s._action = 'delete' AND t._cdc_seq < s._cdc_seq THEN DELETE``
2. ``WHEN MATCHED AND s._action = 'upsert' AND t._cdc_seq < s._cdc_seq THEN UPDATE SET`` each
   column to ``CASE WHEN s.u{i} THEN s.c{i} ELSE t.<col> END`` (just ``s.c{i}`` when every source
   row sets it), and the ``_cdc_`` columns
3. ``WHEN NOT MATCHED AND s._action = 'upsert' THEN INSERT`` every column from ``s.c{i}``
4. with a truncate in the batch: ``WHEN NOT MATCHED BY SOURCE AND t._cdc_seq < '<watermark>'
   THEN DELETE``
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import types as T

#: Metadata columns lakecdc keeps on every target row.
CDC_COLUMNS: tuple[tuple[str, T.DataType], ...] = (
    ("_cdc_seq", T.StringType()),
    ("_cdc_op", T.StringType()),
    ("_cdc_op_ts", T.TimestampType()),
)
APP_ID = "lakecdc"


def quote(name: str) -> str:
    """A column name as a SQL identifier (backticks; both engines accept them)."""
    return "`" + name.replace("`", "``") + "`"


def sql_literal(value: object) -> str:
    """A Python value as a SQL literal both engines parse identically."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, (int, decimal.Decimal)):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return "'" + str(value).replace("'", "''") + "'"


@dataclass(frozen=True)
class MergePlan:
    """One table's MERGE. Build with :meth:`for_batch`; render with an engine."""

    table: str
    path: str
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    version: int
    always_set: frozenset[int] = frozenset()
    key_ranges: tuple[tuple[object, object], ...] = ()
    truncate_below: str | None = None
    app_id: str = APP_ID
    metadata: Mapping[str, str] = field(default_factory=dict)

    # -- clauses ---------------------------------------------------------------------------------
    def predicate(self) -> str:
        parts = [f"t.{quote(k)} = s.k{j}" for j, k in enumerate(self.keys)]
        for k, (lo, hi) in zip(self.keys, self.key_ranges, strict=False):
            if lo is not None and hi is not None and not isinstance(lo, float):
                parts.append(f"t.{quote(k)} >= {sql_literal(lo)} AND t.{quote(k)} <= {sql_literal(hi)}")
        return " AND ".join(parts)

    def delete_condition(self) -> str:
        return "s._action = 'delete' AND t._cdc_seq < s._cdc_seq"

    def update_condition(self) -> str:
        return "s._action = 'upsert' AND t._cdc_seq < s._cdc_seq"

    def insert_condition(self) -> str:
        return "s._action = 'upsert'"

    def by_source_delete_condition(self) -> str | None:
        if self.truncate_below is None:
            return None
        return f"t._cdc_seq < {sql_literal(self.truncate_below)}"

    def update_set(self) -> dict[str, str]:
        out: dict[str, str] = {}
        key_set = set(self.keys)
        for i, c in enumerate(self.columns):
            if c in key_set:
                continue
            if i in self.always_set:
                out[quote(c)] = f"s.c{i}"
            else:
                out[quote(c)] = f"CASE WHEN s.u{i} THEN s.c{i} ELSE t.{quote(c)} END"
        out.update({quote(name): f"s.{name}" for name, _ in CDC_COLUMNS})
        return out

    def insert_values(self) -> dict[str, str]:
        key_pos = {k: j for j, k in enumerate(self.keys)}
        out = {quote(c): (f"s.k{key_pos[c]}" if c in key_pos else f"s.c{i}") for i, c in enumerate(self.columns)}
        out.update({quote(name): f"s.{name}" for name, _ in CDC_COLUMNS})
        return out

    # -- rendering -------------------------------------------------------------------------------
    def to_sql(self, source: str = "lakecdc_batch", *, target: str | None = None) -> str:
        """The plan as one ``MERGE INTO`` statement (Delta SQL, as delta-spark runs it) into
        ``target`` (a table's SQL name; default ``delta.`<path>```)."""
        upd = ", ".join(f"{k} = {v}" for k, v in self.update_set().items())
        ins = self.insert_values()
        lines = [
            f"MERGE INTO {target or 'delta.' + quote(self.path)} AS t",
            f"USING {source} AS s",
            f"ON {self.predicate()}",
            f"WHEN MATCHED AND {self.delete_condition()} THEN DELETE",
            f"WHEN MATCHED AND {self.update_condition()} THEN UPDATE SET {upd}",
            f"WHEN NOT MATCHED AND {self.insert_condition()} THEN INSERT ({', '.join(ins)}) "
            f"VALUES ({', '.join(ins.values())})",
        ]
        by_source = self.by_source_delete_condition()
        if by_source is not None:
            lines.append(f"WHEN NOT MATCHED BY SOURCE AND {by_source} THEN DELETE")
        return "\n".join(lines)


@dataclass(frozen=True)
class MergeResult:
    """What one MERGE did."""

    table: str
    engine: str
    version: int | None
    inserted: int
    updated: int
    deleted: int
    files_added: int = 0
    files_removed: int = 0
    #: target files read, and skipped by the key-range and partition pruning (when the engine says)
    files_scanned: int | None = None
    files_skipped: int | None = None
    skipped: bool = False
