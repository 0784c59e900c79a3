"""The reference implementation of ``design/semantics.md``.

Plain Python, no Spark, written to be read rather than to be fast: events are applied one at a
time, in sequence order, to dictionaries. Every lakecdc path must end with the tables this module
computes; the property tests check exactly that.

The rules are those of "Applying events" in ``semantics.md``:

* key of an event: ``I``/``R`` from ``after``, ``D`` from ``before``, ``U`` from ``before`` when
  all key columns are present there, else from ``after``;
* 1 ``I``/``R`` upsert, 2 ``U`` update (an update of an absent key inserts), 3 primary-key
  update (``delete-insert`` / ``update`` / ``abend``), 4 ``D`` delete (leaves a tombstone),
  5 ``T`` truncate (with a watermark), 6 stale events (duplicate, replayed or late) change
  nothing and are counted.

Where the contract leaves room, the choice made here is written next to the code and repeated in
``Oracle``'s docstring.

Example:
    >>> o = Oracle()
    >>> counts = o.apply_run([
    ...     Event("S.T", "I", "2024-01-01 00:00:00.000000", "00000000000000000001",
    ...           after={"ID": 1, "A": "x", "B": 1}, keys=("ID",)),
    ...     Event("S.T", "U", "2024-01-01 00:00:01.000000", "00000000000000000002",
    ...           before={"ID": 1}, after={"ID": 1, "B": 2}, keys=("ID",)),
    ... ])
    >>> o.table("S.T")
    {(1,): {'ID': 1, 'A': 'x', 'B': 2}}
    >>> counts["S.T"].inserted, counts["S.T"].updated
    (1, 1)
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

Seq = tuple[str, str, int]
Key = tuple[Any, ...]
Row = dict[str, Any]
PkUpdate = Literal["delete-insert", "update", "abend"]

PK_UPDATE_MODES: tuple[str, ...] = ("delete-insert", "update", "abend")
KEYED_OPS = frozenset({"I", "U", "D", "R"})


@dataclass(frozen=True)
class Event:
    """One canonical change event.

    ``before``/``after`` hold only the PRESENT columns: a key mapped to ``None`` is a present
    NULL, an absent key is a MISSING column. ``idx`` is the index inside the message (0 for
    GoldenGate, one event per message). ``declared``: the columns the message's own schema
    declares (an Avro or Debezium schema, Qlik metadata, DTS ``fields``), present or not.
    """

    table: str
    op: str
    op_ts: str
    pos: str
    idx: int = 0
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    keys: tuple[str, ...] = ()
    declared: tuple[str, ...] = ()

    @property
    def seq(self) -> Seq:
        return (self.op_ts, self.pos, self.idx)


class PrimaryKeyUpdateError(Exception):
    """A primary-key update met ``pk_update="abend"``; nothing of the run was applied."""

    def __init__(self, table: str, old_key: Key, new_key: Key, pos: str) -> None:
        self.table = table
        self.old_key = old_key
        self.new_key = new_key
        self.pos = pos
        super().__init__(
            f"{table}: primary-key update from {old_key!r} to {new_key!r} at pos {pos} "
            f"with pk_update='abend'; nothing of the run was applied "
            f"(use pk_update='delete-insert' or 'update' to apply it)"
        )


@dataclass
class RunCounts:
    """What one run did to one table.

    ``events`` .. ``duplicate_or_late`` count per event, as the events are applied one at a time
    (an insert followed by a delete of the same key in one run counts 1 inserted and 1 deleted;
    a truncate counts 1 deleted per row it removed).

    ``net_inserted`` / ``net_updated`` / ``net_deleted`` compare the table before and after the
    run, key by key, the way one MERGE per run would report it: a key live after but not before
    the run is inserted, live before but not after is deleted, live at both ends with a different
    stored seq is updated (even when no value changed).
    """

    events: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    duplicate_or_late: int = 0
    net_inserted: int = 0
    net_updated: int = 0
    net_deleted: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class TableState:
    keys: tuple[str, ...] = ()
    columns: list[str] = field(default_factory=list)  # every column ever seen, first-seen order
    rows: dict[Key, Row] = field(default_factory=dict)  # live rows: only columns received
    seqs: dict[Key, Seq] = field(default_factory=dict)  # stored seq of each live row
    tombstones: dict[Key, Seq] = field(default_factory=dict)  # seq of the delete, per dead key
    truncated_at: Seq | None = None  # the truncate watermark
    # per key, what the event of THIS run that set its stored seq was (see ``signature``)
    run_sig: dict[Key, Any] = field(default_factory=dict)

    def stored_seq(self, key: Key) -> Seq | None:
        if key in self.seqs:
            return self.seqs[key]
        return self.tombstones.get(key)

    def is_stale(self, seq: Seq, key: Key, sig: Any = None) -> bool:
        """Rule 6 for a keyed event; an event of this run whose seq ties the one stored by an
        earlier event of this run came later (arrival) and applies, unless it is a copy of it."""
        stored = self.stored_seq(key)
        if stored is not None and seq < stored:
            return True
        if stored is not None and seq == stored and (key not in self.run_sig or self.run_sig[key] == sig):
            return True
        return self.truncated_at is not None and seq < self.truncated_at

    def put(self, key: Key, row: Row, seq: Seq) -> None:
        self.rows[key] = row
        self.seqs[key] = seq
        self.tombstones.pop(key, None)

    def remove(self, key: Key, seq: Seq) -> None:
        """Delete ``key`` (live or not) and leave a tombstone carrying ``seq``."""
        self.rows.pop(key, None)
        self.seqs.pop(key, None)
        self.tombstones[key] = seq


def declaring(events: list[Event], declared: Mapping[str, Sequence[str]]) -> list[Event]:
    """``events`` as messages whose schema declares every column of their table: each with
    ``declared`` set to ``declared[table]`` (a table not in it declares nothing)."""
    return [replace(e, declared=tuple(declared.get(e.table, ()))) for e in events]


def image_key(image: dict[str, Any] | None, keys: tuple[str, ...]) -> Key | None:
    """The key held by an image, or None when any key column is missing from it."""
    if image is None or not keys or any(k not in image for k in keys):
        return None
    return tuple(image[k] for k in keys)


def event_key(event: Event) -> Key:
    """The key an event is matched by (semantics.md, "Key of an event")."""
    if event.op in ("I", "R"):
        key = image_key(event.after, event.keys)
    elif event.op == "D":
        key = image_key(event.before, event.keys)
    elif event.op == "U":
        key = image_key(event.before, event.keys)
        if key is None:
            key = image_key(event.after, event.keys)
    else:
        raise ValueError(f"op {event.op!r} has no key")
    if key is None:
        raise ValueError(
            f"{event.table} {event.op} at pos {event.pos}: the image it is matched by lacks "
            f"key columns {event.keys!r} (before={event.before!r}, after={event.after!r})"
        )
    return key


def pk_update_keys(event: Event) -> tuple[Key, Key] | None:
    """(old key, new key) when ``event`` is a primary-key update, else None."""
    if event.op != "U":
        return None
    old = image_key(event.before, event.keys)
    new = image_key(event.after, event.keys)
    if old is None or new is None or old == new:
        return None
    return old, new


def signature(event: Event) -> Any:
    """What makes two events of equal seq copies of one record: the op and, per column, whether
    the after image holds it and the value used (after's, else before's; a missing column and a
    NULL one are alike when after lacks them)."""
    after = event.after or {}
    used = {(c, True, repr(v)) for c, v in after.items()}
    used |= {(c, False, repr(v)) for c, v in (event.before or {}).items() if c not in after and v is not None}
    return (event.op, frozenset(used))


def _validate(event: Event) -> None:
    if event.op not in KEYED_OPS | {"T"}:
        raise ValueError(f"{event.table}: unknown op {event.op!r} at pos {event.pos}")
    if event.op in KEYED_OPS:
        if not event.keys:
            raise ValueError(f"{event.table}: {event.op} at pos {event.pos} has no key columns")
        if event.op in ("I", "R", "U") and event.after is None:
            raise ValueError(f"{event.table}: {event.op} at pos {event.pos} has no after image")
        event_key(event)


class Oracle:
    """The in-memory target: one table per source table, rules of semantics.md.

    Decisions where semantics.md leaves room (keep in step with the property tests):

    * Equal seq: ``apply_run`` sorts stably, so events with the same seq apply in the order they
      arrived (the list's order: the arrival tie-breaker). An event whose seq equals the one
      stored for its key by an EARLIER run is stale; one that equals the seq stored by an event
      of this run applies, unless it is an exact copy of that event (same op, and the same value
      or absence of every column, an after value over a before one: :func:`signature`), which is
      a replay counted as ``duplicate_or_late``.
    * A delete of a key the table does not hold removes nothing but still leaves a tombstone with
      its seq (so an older insert arriving later cannot resurrect the key). It is not counted as
      ``duplicate_or_late`` and not as ``deleted``.
    * Rule 6's "below the table's last truncate" is strict, for truncates too: a truncate is
      stale (``duplicate_or_late``) only when its seq is below the watermark. A replayed truncate
      (seq equal to the watermark) is therefore applied, removes nothing and is counted in
      ``events`` only. A truncate above the watermark is applied even when it removes nothing
      (e.g. every row is newer).
    * A keyed event whose seq equals a truncate's is ordered by arrival like any tie: one of this
      run that arrived before the truncate is wiped by it, one after it applies (also in a later
      run: it is not below the watermark). A row stored by an EARLIER run at the truncate's seq
      stays: across runs the seq alone decides, and it is not older than the truncate.
    * Truncate leaves existing tombstones alone and writes none: the watermark already rejects
      everything older.
    * A primary-key update whose new key already holds a row older than the update replaces that
      row entirely (after, then before, then the old key's row); one whose new key holds something
      newer (row or tombstone) still deletes the old key but does not write the new one.
    * Counting a primary-key update: ``delete-insert`` counts the old key ``deleted`` (when it was
      live) and the new key ``inserted`` (``updated`` when it was live); ``update`` counts one
      ``updated`` when the old key was live and the new key was not, otherwise the same as
      delete-insert.
    * ``abend`` raises at the first primary-key update, in seq order, that rule 6 lets through
      (a stale one changes nothing, so it is only counted, in every mode); the run is then
      discarded as a whole.
    * An update of a live key counts ``updated`` even when no value changes; an upsert (I/R) of
      a live key counts ``updated``.
    * The column set holds every column present in any image of any event of the table,
      including stale events (the column exists in the source), and every column an event's
      message declares (``Event.declared``) though no image holds it: such a column reads NULL
      until a value arrives, and being missing it never overwrites one. Columns of a failed
      (abend) run are not recorded.
    """

    def __init__(self) -> None:
        self._tables: dict[str, TableState] = {}

    # ---- reading -------------------------------------------------------------------------------

    def tables(self) -> list[str]:
        return sorted(self._tables)

    def keys(self, table: str) -> tuple[str, ...]:
        return self._tables[table].keys if table in self._tables else ()

    def columns(self, table: str) -> list[str]:
        return list(self._tables[table].columns) if table in self._tables else []

    def table(self, table: str) -> dict[Key, Row]:
        """{key: row over every column of the table}; a column never received reads None."""
        state = self._tables.get(table)
        if state is None:
            return {}
        return {key: {col: row.get(col) for col in state.columns} for key, row in state.rows.items()}

    def stored_seq(self, table: str, key: Key) -> Seq | None:
        state = self._tables.get(table)
        return None if state is None else state.stored_seq(key)

    def tombstones(self, table: str) -> dict[Key, Seq]:
        state = self._tables.get(table)
        return {} if state is None else dict(state.tombstones)

    def truncate_watermark(self, table: str) -> Seq | None:
        state = self._tables.get(table)
        return None if state is None else state.truncated_at

    def copy(self) -> Oracle:
        other = Oracle()
        other._tables = copy.deepcopy(self._tables)
        return other

    # ---- applying ------------------------------------------------------------------------------

    def apply_run(self, events: list[Event], pk_update: PkUpdate = "delete-insert") -> dict[str, RunCounts]:
        """Apply one run (one batch) and return its counts per table.

        On any error (``PrimaryKeyUpdateError``, ``ValueError`` for a malformed event) the oracle
        is left exactly as it was.
        """
        if pk_update not in PK_UPDATE_MODES:
            raise ValueError(f"pk_update={pk_update!r}; expected one of {PK_UPDATE_MODES}")
        for event in events:
            _validate(event)
        ordered = sorted(events, key=lambda e: e.seq)  # stable: arrival order breaks seq ties
        work = copy.deepcopy(self._tables)
        for state in work.values():
            state.run_sig = {}
        counts: dict[str, RunCounts] = {}
        live_before = {t: dict(s.seqs) for t, s in work.items()}
        for event in ordered:
            state = work.setdefault(event.table, TableState())
            run_counts = counts.setdefault(event.table, RunCounts())
            self._apply_one(state, event, pk_update, run_counts)
        for table, run_counts in counts.items():
            _net_counts(live_before.get(table, {}), work[table].seqs, run_counts)
        self._tables = work
        return counts

    @staticmethod
    def _apply_one(state: TableState, event: Event, pk_update: str, counts: RunCounts) -> None:
        counts.events += 1
        if event.keys and not state.keys:
            state.keys = event.keys
        elif event.keys and event.keys != state.keys:
            raise ValueError(
                f"{event.table}: key columns {event.keys!r} at pos {event.pos} differ from "
                f"{state.keys!r} seen before"
            )
        for image in (event.before, event.after, dict.fromkeys(event.declared)):
            for col in image or {}:
                if col not in state.columns:
                    state.columns.append(col)

        seq = event.seq
        if event.op == "T":
            _truncate(state, seq, counts)
            return

        key = event_key(event)
        sig = signature(event)
        if state.is_stale(seq, key, sig):  # rule 6; for a pk update: the OLD key's stored seq
            counts.duplicate_or_late += 1
            return
        state.run_sig[key] = sig

        if event.op in ("I", "R"):
            _upsert(state, key, event, counts)
        elif event.op == "D":
            _delete(state, key, seq, counts)
        else:
            keys = pk_update_keys(event)
            if keys is None:
                _update(state, key, event, counts)
            elif pk_update == "abend":  # apply_run discards its working copy
                raise PrimaryKeyUpdateError(event.table, keys[0], keys[1], event.pos)
            else:
                _pk_update(state, keys[0], keys[1], event, pk_update, counts)


def _upsert(state: TableState, key: Key, event: Event, counts: RunCounts) -> None:
    """Rule 1: present columns overwrite; missing ones keep the live row's value, else NULL."""
    assert event.after is not None
    if key in state.rows:
        row = {**state.rows[key], **event.after}
        counts.updated += 1
    else:
        row = dict(event.after)
        counts.inserted += 1
    state.put(key, row, event.seq)


def _update(state: TableState, key: Key, event: Event, counts: RunCounts) -> None:
    """Rule 2: after's present columns overwrite; an absent key is inserted from after+before."""
    assert event.after is not None
    if key in state.rows:
        row = {**state.rows[key], **event.after}
        counts.updated += 1
    else:
        row = {**(event.before or {}), **event.after}
        counts.inserted += 1
    state.put(key, row, event.seq)


def _delete(state: TableState, key: Key, seq: Seq, counts: RunCounts) -> None:
    """Rule 4: remove the row; always leave a tombstone with the delete's seq."""
    if key in state.rows:
        counts.deleted += 1
    state.remove(key, seq)


def _pk_update(state: TableState, old: Key, new: Key, event: Event, mode: str, counts: RunCounts) -> None:
    """Rule 3 (``delete-insert`` and ``update`` give the same content; only counts differ)."""
    assert event.after is not None
    seq = event.seq
    old_row = state.rows.get(old)
    old_was_live = old_row is not None
    state.remove(old, seq)

    new_stored = state.stored_seq(new)
    new_written = new_stored is None or new_stored < seq or (new_stored == seq and new in state.run_sig)
    new_was_live = new in state.rows
    if new_written:
        # after, then before for columns missing in after, then the old row for columns
        # missing in both (a column the old row never received is NULL anyway).
        row = {**(old_row or {}), **(event.before or {}), **event.after}
        state.put(new, row, seq)
        state.run_sig[new] = ("moved", signature(event))

    if mode == "update" and old_was_live and new_written and not new_was_live:
        counts.updated += 1
        return
    if old_was_live:
        counts.deleted += 1
    if new_written:
        if new_was_live:
            counts.updated += 1
        else:
            counts.inserted += 1


def _truncate(state: TableState, seq: Seq, counts: RunCounts) -> None:
    """Rule 5: remove every row that comes before the truncate; raise the watermark.

    A row comes before it when its seq is lower, or equal and written by an event of this run
    (which arrived before the truncate: ``apply_run`` applies ties in arrival order). A truncate
    whose seq equals the watermark is a copy of the one that set it and removes nothing.
    """
    if state.truncated_at is not None and seq < state.truncated_at:
        counts.duplicate_or_late += 1
        return
    if state.truncated_at == seq:
        return
    for key in [k for k, row_seq in state.seqs.items() if row_seq < seq or (row_seq == seq and k in state.run_sig)]:
        del state.rows[key]
        del state.seqs[key]
        counts.deleted += 1
    state.truncated_at = seq


def _net_counts(before: dict[Key, Seq], after: dict[Key, Seq], counts: RunCounts) -> None:
    counts.net_inserted = sum(1 for k in after if k not in before)
    counts.net_deleted = sum(1 for k in before if k not in after)
    counts.net_updated = sum(1 for k in after if k in before and after[k] != before[k])
