"""The MERGE of one batch into one SCD type 2 history table, written once and run by either engine.

A history table holds every version of every row: the source columns, the validity columns
``__START_AT`` / ``__END_AT`` (``NULL`` end: the open, current version) and the exact seqs that
opened and closed the version (``_cdc_start_seq`` / ``_cdc_end_seq``), plus the ``_cdc_`` columns of
the last event applied to the version. The batch's source rows come from
:func:`lakecdc.consolidate.history.fold_history`: each is a whole version (``k{j}``, ``c{i}``,
validity, ``_cdc_`` values), of one of two kinds:

* ``update``: the key's open version in the table, changed in place (columns not tracked by the
  history) and/or closed (its ``__END_AT`` set);
* ``insert``: a new version, open or already closed within the batch.

Clause rules (the same for both engines):

1. ``ON`` the key, the target's open version (``t._cdc_end_seq IS NULL``) and ``s._kind = 'update'``:
   an ``insert`` row never matches, so one batch can add several versions of one key.
2. ``WHEN MATCHED AND s._kind = 'update' AND t._cdc_seq <= s._cdc_seq THEN UPDATE SET`` every column
   and the validity and ``_cdc_`` columns from the source.
3. ``WHEN NOT MATCHED AND s._kind = 'insert' THEN INSERT`` every column.
4. with truncates in the batch: ``WHEN NOT MATCHED BY SOURCE AND t._cdc_end_seq IS NULL AND
   t._cdc_seq < '<last truncate>' THEN UPDATE SET`` the end to the first truncate after the version's
   last change (open versions of keys the batch does not touch are closed by the truncate too).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import types as T

from lakecdc.merge.plan import APP_ID, CDC_COLUMNS, quote, sql_literal

#: DLT's names for the validity columns (``__START_AT`` inclusive, ``__END_AT`` exclusive).
START_AT, END_AT = "__START_AT", "__END_AT"
#: The validity columns of a history table: source commit times and the exact seqs behind them.
HISTORY_COLUMNS: tuple[tuple[str, T.DataType], ...] = (
    (START_AT, T.TimestampType()),
    (END_AT, T.TimestampType()),
    ("_cdc_start_seq", T.StringType()),
    ("_cdc_end_seq", T.StringType()),
)
#: Source-row column behind each validity column.
_SOURCE_NAMES = {START_AT: "_start_at", END_AT: "_end_at", "_cdc_start_seq": "_start_seq", "_cdc_end_seq": "_end_seq"}


def is_history(schema: T.StructType) -> bool:
    """True for the schema of a history table (it has the validity columns)."""
    return END_AT in schema.fieldNames()


def timestamp_sql(value: dt.datetime) -> str:
    """A UTC instant as SQL both engines read the same way, whatever the session's time zone."""
    utc = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return f"CAST('{utc.isoformat(sep='T', timespec='microseconds')}Z' AS TIMESTAMP)"


@dataclass(frozen=True)
class HistoryPlan:
    """One history table's MERGE. Render with an engine (``merge_history``) or :meth:`to_sql`."""

    table: str
    path: str
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    version: int
    key_ranges: tuple[tuple[object, object], ...] = ()
    #: the batch's truncates, ``(seq, op_ts)`` in seq order; each closes the versions older than it
    truncates: tuple[tuple[str, dt.datetime], ...] = ()
    app_id: str = APP_ID
    metadata: Mapping[str, str] = field(default_factory=dict)

    # -- clauses ---------------------------------------------------------------------------------
    def predicate(self) -> str:
        parts = [f"t.{quote(k)} = s.k{j}" for j, k in enumerate(self.keys)]
        for k, (lo, hi) in zip(self.keys, self.key_ranges, strict=False):
            if lo is not None and hi is not None and not isinstance(lo, float):
                parts.append(f"t.{quote(k)} >= {sql_literal(lo)} AND t.{quote(k)} <= {sql_literal(hi)}")
        parts += ["t._cdc_end_seq IS NULL", "s._kind = 'update'"]
        return " AND ".join(parts)

    def update_condition(self) -> str:
        return "s._kind = 'update' AND t._cdc_seq <= s._cdc_seq"

    def insert_condition(self) -> str:
        return "s._kind = 'insert'"

    def _meta(self) -> dict[str, str]:
        out = {quote(name): f"s.{_SOURCE_NAMES[name]}" for name, _ in HISTORY_COLUMNS}
        out.update({quote(name): f"s.{name}" for name, _ in CDC_COLUMNS})
        return out

    def update_set(self) -> dict[str, str]:
        keys = set(self.keys)
        out = {quote(c): f"s.c{i}" for i, c in enumerate(self.columns) if c not in keys}
        out.update(self._meta())
        return out

    def insert_values(self) -> dict[str, str]:
        key_pos = {k: j for j, k in enumerate(self.keys)}
        out = {quote(c): (f"s.k{key_pos[c]}" if c in key_pos else f"s.c{i}") for i, c in enumerate(self.columns)}
        out.update(self._meta())
        return out

    def by_source_condition(self) -> str | None:
        if not self.truncates:
            return None
        return f"t._cdc_end_seq IS NULL AND t._cdc_seq < {sql_literal(self.truncates[-1][0])}"

    def by_source_set(self) -> dict[str, str]:
        """The end of an open version the batch does not touch: the first truncate after it."""
        at = " ".join(f"WHEN t._cdc_seq < {sql_literal(s)} THEN {timestamp_sql(ts)}" for s, ts in self.truncates)
        seq = " ".join(f"WHEN t._cdc_seq < {sql_literal(s)} THEN {sql_literal(s)}" for s, _ in self.truncates)
        return {quote(END_AT): f"CASE {at} END", quote("_cdc_end_seq"): f"CASE {seq} END"}

    # -- rendering -------------------------------------------------------------------------------
    def to_sql(self, source: str = "lakecdc_batch", *, target: str | None = None) -> str:
        """The plan as one ``MERGE INTO`` statement (Delta SQL, as delta-spark runs it)."""
        upd = ", ".join(f"{k} = {v}" for k, v in self.update_set().items())
        ins = self.insert_values()
        lines = [
            f"MERGE INTO {target or 'delta.' + quote(self.path)} AS t",
            f"USING {source} AS s",
            f"ON {self.predicate()}",
            f"WHEN MATCHED AND {self.update_condition()} THEN UPDATE SET {upd}",
            f"WHEN NOT MATCHED AND {self.insert_condition()} THEN INSERT ({', '.join(ins)}) "
            f"VALUES ({', '.join(ins.values())})",
        ]
        by_source = self.by_source_condition()
        if by_source is not None:
            closes = ", ".join(f"{k} = {v}" for k, v in self.by_source_set().items())
            lines.append(f"WHEN NOT MATCHED BY SOURCE AND {by_source} THEN UPDATE SET {closes}")
        return "\n".join(lines)
