"""The reference for SCD type 2 history tables: :class:`tests.oracle.Oracle`, watched event by event.

A history table must hold, for every key, the sequence of versions the current-state table went
through. So this oracle applies each run exactly as the current-state oracle does (same ordering,
same stale/duplicate rules, same primary-key and truncate rules) and, after each event, looks at
what that event did to the current-state table, key by key:

* a key's row appeared: a version **opens** at the event;
* a key's row disappeared (delete, the old side of a primary-key update, truncate): its open
  version **closes** at the event;
* a key's row changed in a tracked column (NULL-aware), or the key is the new side of a
  primary-key update: the open version closes and a new one opens, both at the event;
* otherwise (only untracked columns changed, or nothing but the seq): the open version is
  **updated in place** (its values and ``_cdc_seq`` / ``_cdc_op`` / ``_cdc_op_ts``).

Tracked columns: every non-key column, or only those of ``track`` (DLT's
``track_history_column_list``), or all but those of ``track_except``
(``track_history_except_column_list``), per table.

Example:
    >>> h = HistoryOracle()
    >>> _ = h.apply_run([
    ...     Event("S.T", "I", "2024-01-01 00:00:00.000000", "1", after={"ID": 1, "A": "x"}, keys=("ID",)),
    ...     Event("S.T", "U", "2024-01-01 00:00:01.000000", "2", before={"ID": 1}, after={"ID": 1, "A": "y"}, keys=("ID",)),
    ... ])
    >>> [(v.row["A"], v.start[1], v.end[1] if v.end else None) for v in h.versions("S.T")[(1,)]]
    [('x', '1', '2'), ('y', '2', None)]
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

try:
    from tests.oracle import (
        Event,
        Key,
        Oracle,
        PkUpdate,
        Row,
        RunCounts,
        Seq,
        TableState,
        _net_counts,
        _validate,
        pk_update_keys,
    )
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from oracle import (  # type: ignore[no-redef]
        Event,
        Key,
        Oracle,
        PkUpdate,
        Row,
        RunCounts,
        Seq,
        TableState,
        _net_counts,
        _validate,
        pk_update_keys,
    )

__all__ = ["Event", "HistoryOracle", "Version"]


@dataclass
class Version:
    """One version of one key: its row, the seq (and op_ts, ``seq[0]``) that opened and closed it,
    and the last event applied to it."""

    row: Row
    start: Seq
    end: Seq | None
    seq: Seq
    op: str


class HistoryOracle:
    """The in-memory history: one list of versions per key and table, plus the current-state oracle."""

    def __init__(
        self,
        track: Mapping[str, Sequence[str]] | None = None,
        track_except: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        self.current = Oracle()
        self.track = {t: set(c) for t, c in (track or {}).items()}
        self.track_except = {t: set(c) for t, c in (track_except or {}).items()}
        self._versions: dict[str, dict[Key, list[Version]]] = {}

    # ---- reading -------------------------------------------------------------------------------

    def tables(self) -> list[str]:
        return self.current.tables()

    def columns(self, table: str) -> list[str]:
        return self.current.columns(table)

    def versions(self, table: str) -> dict[Key, list[Version]]:
        """{key: versions in seq order}; a version's row holds only the columns it received."""
        return copy.deepcopy(self._versions.get(table, {}))

    def tracked(self, table: str, column: str) -> bool:
        if column in self.current.keys(table):
            return False
        if table in self.track:
            return column in self.track[table]
        return column not in self.track_except.get(table, set())

    # ---- applying ------------------------------------------------------------------------------

    def apply_run(self, events: list[Event], pk_update: PkUpdate = "delete-insert") -> dict[str, RunCounts]:
        """Apply one run as :meth:`Oracle.apply_run` does, recording the versions it makes.

        On an error (an ``abend`` primary-key update, a malformed event) nothing changes.
        """
        for event in events:
            _validate(event)
        current = self.current.copy()
        work = copy.deepcopy(self._versions)
        tables: dict[str, TableState] = current._tables
        counts: dict[str, RunCounts] = {}
        live_before = {t: dict(s.seqs) for t, s in tables.items()}
        for event in sorted(events, key=lambda e: e.seq):  # stable: arrival order breaks seq ties
            state = tables.setdefault(event.table, TableState())
            rows, seqs, sigs = dict(state.rows), dict(state.seqs), dict(state.run_sig)
            Oracle._apply_one(state, event, pk_update, counts.setdefault(event.table, RunCounts()))
            self._observe(work.setdefault(event.table, {}), event, rows, seqs, sigs, state)
        for table, run_counts in counts.items():
            _net_counts(live_before.get(table, {}), tables[table].seqs, run_counts)
        self.current, self._versions = current, work
        return counts

    def _observe(
        self, history: dict[Key, list[Version]], event: Event, rows: dict[Key, Row], seqs: dict[Key, Seq],
        sigs: dict[Key, Any], state: TableState,
    ) -> None:
        """Turn what ``event`` did to the current-state table into version changes (``rows``,
        ``seqs`` and ``sigs`` are the table's rows, seqs and run signatures before it: an event
        that ties the seq of the key's row still touches it when it applies)."""
        moved = pk_update_keys(event)
        for key in sorted(set(seqs) | set(state.seqs), key=repr):
            if (seqs.get(key) == state.seqs.get(key) and (key in rows) == (key in state.rows)
                    and sigs.get(key) == state.run_sig.get(key)):
                continue  # untouched (or a stale event)
            versions = history.setdefault(key, [])
            open_ = versions[-1] if versions and versions[-1].end is None else None
            assert (open_ is not None) == (key in rows), f"{key}: history and current state disagree"
            new = state.rows.get(key)
            if new is None:
                if open_ is not None:
                    open_.end = event.seq
                continue
            if open_ is not None:
                changed = any(
                    self.tracked(event.table, c) and open_.row.get(c) != new.get(c) for c in state.columns
                )
                if not changed and not (moved is not None and key == moved[1]):
                    open_.row, open_.seq, open_.op = dict(new), event.seq, event.op
                    continue
                open_.end = event.seq
            versions.append(Version(dict(new), event.seq, None, event.seq, event.op))

    # ---- comparing -----------------------------------------------------------------------------

    def expected(self, table: str) -> dict[Key, list[tuple[Any, ...]]]:
        """Per key, each version as ``(start op_ts, start pos, end op_ts, end pos, op, values...)``
        with values in :meth:`columns` order (a column never received reads None)."""
        cols = self.columns(table)
        out: dict[Key, list[tuple[Any, ...]]] = {}
        for key, versions in self._versions.get(table, {}).items():
            out[key] = [
                (v.start[0], v.start[1], v.end[0] if v.end else None, v.end[1] if v.end else None, v.op,
                 *(v.row.get(c) for c in cols))
                for v in versions
            ]
        return out
