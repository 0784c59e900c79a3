"""Step 5 of a run (see :mod:`lakecdc.run.apply`): each prepared table merged exactly once.

:func:`merge_one` commits a table prepared by :mod:`lakecdc.merge.prepare`: :func:`commit_table`
MERGEs a current-state table's net actions, :func:`commit_history` a history table's versions,
each with the run's transaction version (retrying a concurrent writer's conflict:
:func:`retry_conflicts`), then records the tombstones and expires the old ones.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from lakecdc.changes.sequence import SeqField, basis, record_basis, recorded_basis
from lakecdc.consolidate.fold import Layout
from lakecdc.errors import CommitConflict
from lakecdc.lake.state import expire_tombstones, tombstone_path, write_table_info
from lakecdc.lake.summary import TableSummary
from lakecdc.merge.arrow_types import to_arrow_type
from lakecdc.merge.history_plan import HISTORY_COLUMNS, HistoryPlan
from lakecdc.merge.plan import CDC_COLUMNS, MergePlan
from lakecdc.merge.prepare import HistoryPrepared, Prepared

if TYPE_CHECKING:
    from lakecdc.config.settings import Progress, Settings
    from lakecdc.merge.delta_rs import DeltaRsEngine

#: The table property that turns on Delta's Change Data Feed.
CHANGE_DATA_FEED = {"delta.enableChangeDataFeed": "true"}


def table_schema(layout: Layout) -> T.StructType:
    """The Delta schema of a current-state table: its source columns, then the ``_cdc_`` columns."""
    return T.StructType(
        [T.StructField(c, t) for c, t in zip(layout.columns, layout.types, strict=True)]
        + [T.StructField(name, dtype) for name, dtype in CDC_COLUMNS]
    )


def enable_change_data_feed(engine: DeltaRsEngine, path: str) -> bool:
    """Turn on Change Data Feed on an existing table (one commit; none when it is on). Returns
    whether a commit was made."""
    if engine.properties(path).get("delta.enableChangeDataFeed", "").lower() == "true":
        return False
    engine.set_properties(path, CHANGE_DATA_FEED)
    return True


def change_data_feed(engine: DeltaRsEngine, settings: Settings, prep: Prepared) -> None:
    """Turn on Change Data Feed for a current-state table that asks for it, before its merge: an
    existing table gets the property, a new one is created with it (``commit_table`` then finds it)."""
    if not settings.wants_change_data_feed(prep.table):
        return
    if engine.exists(prep.path):
        enable_change_data_feed(engine, prep.path)
        return
    if prep.net.upserts or prep.seen_columns:  # the tables commit_table creates
        engine.create(prep.path, table_schema(prep.layout), name=prep.table, properties=CHANGE_DATA_FEED)


T_ = TypeVar("T_")


#: Attempts and first wait of :func:`retry_conflicts` (the wait doubles, with jitter).
CONFLICT_ATTEMPTS, CONFLICT_WAIT = 6, 0.25


def retry_conflicts(action: Callable[[], T_], *, what: str, say: Progress | None = None) -> T_:
    """Run ``action`` (an idempotent Delta commit), again after a :class:`CommitConflict` with a
    growing wait: a concurrent writer (a maintenance job, another merge) committed first. The
    merge re-reads the table each time, and its txn version makes a commit that did land a no-op."""
    wait = CONFLICT_WAIT
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return action()
        except CommitConflict as exc:
            if attempt == CONFLICT_ATTEMPTS:
                raise CommitConflict(f"{what}: still conflicting after {attempt} attempts: {exc}") from exc
            if say:
                say(f"{what}: a concurrent commit won; retrying in {wait:.1f}s")
            time.sleep(wait * (1 + random.random()))
            wait *= 2
    raise AssertionError("unreachable")


def tombstone_rows(deleted: pa.Table, layout: Layout, *, truncate_seq: str | None, now: dt.datetime) -> pa.Table:
    """Tombstones for the batch's deleted keys, plus a truncate mark when the batch truncated."""
    n = deleted.num_rows + (1 if truncate_seq is not None else 0)
    cols: dict[str, pa.Array] = {}
    for j, i in enumerate(layout.key_index):
        values = deleted.column(f"k{j}").to_pylist() + ([None] if truncate_seq is not None else [])
        cols[layout.keys[j]] = pa.array(values, type=to_arrow_type(layout.types[i]))
    seqs = deleted.column("_cdc_seq").to_pylist() + ([truncate_seq] if truncate_seq is not None else [])
    cols["_cdc_seq"] = pa.array(seqs, type=pa.string())
    cols["_cdc_kind"] = pa.array(["D"] * deleted.num_rows + (["T"] if truncate_seq is not None else []), type=pa.string())
    cols["_cdc_recorded_at"] = pa.array([now] * n, type=pa.timestamp("us", tz="UTC"))
    return pa.table(cols)


def commit_table(
    engine: DeltaRsEngine, settings: Settings, target: str, prep: Prepared, *, run_id: int, now: dt.datetime,
) -> TableSummary:
    """MERGE one current-state table's net actions exactly once (the run's app transaction),
    creating the table or adding its new columns first, then record its tombstones and truncate
    mark and expire the old tombstones."""
    layout = prep.layout
    source = prep.net
    schema = table_schema(layout)
    has_rows = source.upserts > 0
    # A table is created once some image showed its columns; a stream that so far only
    # truncated it leaves tombstones and a truncate mark, no table.
    creatable = has_rows or prep.seen_columns
    if not prep.exists and not creatable:
        pass
    elif not prep.exists:
        engine.create(prep.path, schema, name=prep.table)
    elif prep.new_fields.fields:
        engine.add_columns(prep.path, prep.new_fields)
    if prep.exists or creatable:
        write_table_info(target, prep.table, layout.keys)
    plan = MergePlan(
        table=prep.table, path=prep.path, columns=layout.columns, keys=layout.keys, version=run_id,
        always_set=source.always_set, key_ranges=source.key_ranges if prep.truncate_seq is None else (),
        truncate_below=prep.truncate_seq,
        metadata={"lakecdc.run_id": str(run_id), "lakecdc.format": settings.format},
    )
    inserted = updated = deleted = 0
    files: dict[str, Any] = {}
    if (source.rows or prep.truncate_seq is not None) and (prep.exists or creatable):
        result = retry_conflicts(lambda: engine.merge(plan, source), what=f"merge into {prep.table}")
        inserted, updated, deleted = result.inserted, result.updated, result.deleted
        files = {"files_scanned": result.files_scanned, "files_skipped": result.files_skipped,
                 "files_rewritten": result.files_removed, "files_added": result.files_added}
    stones = tombstone_rows(source.deletes, layout, truncate_seq=prep.truncate_seq, now=now)
    if stones.num_rows:
        engine.append(tombstone_path(target, prep.table), stones, version=run_id)
    expire_tombstones(engine, target, prep.table, settings.retention_for(prep.table), now)
    if settings.pk_update_for(prep.table) == "update":
        moved = min(prep.counts.get("_pku", 0), inserted, deleted)
        inserted, deleted, updated = inserted - moved, deleted - moved, updated + moved
    newest = source.last_op_ts
    return TableSummary(
        last_op_ts=newest.astimezone(dt.timezone.utc).isoformat() if newest is not None else None,
        last_seq=source.last_seq,
        source_table=prep.table, target=prep.path, events=prep.counts["events"], inserted=inserted,
        updated=updated, deleted=deleted, duplicate_or_late=prep.counts["_stale"] + prep.counts["_dups"],
        delta_version=engine.version(prep.path) if engine.exists(prep.path) else None, **files,
    )


def history_schema(layout: Layout) -> T.StructType:
    """The Delta schema of a history table: source columns, validity columns, ``_cdc_`` columns."""
    return T.StructType(
        [T.StructField(c, t) for c, t in zip(layout.columns, layout.types, strict=True)]
        + [T.StructField(name, dtype) for name, dtype in (*HISTORY_COLUMNS, *CDC_COLUMNS)]
    )


def commit_history(
    engine: DeltaRsEngine, settings: Settings, target: str, prep: HistoryPrepared, *, run_id: int, now: dt.datetime,
) -> TableSummary:
    """MERGE one history table's versions exactly once (the run's app transaction), then record its
    tombstones and truncate mark, as the current-state commit does."""
    layout = prep.layout
    cdf = settings.wants_change_data_feed(prep.table)
    creatable = prep.versions.num_rows > 0 or prep.seen_columns
    if not prep.exists and creatable:
        engine.create(prep.path, history_schema(layout), name=prep.table, properties=CHANGE_DATA_FEED if cdf else None)
    elif prep.exists:
        if prep.new_fields.fields:
            engine.add_columns(prep.path, prep.new_fields)
        if cdf:
            enable_change_data_feed(engine, prep.path)
    if prep.exists or creatable:
        write_table_info(target, prep.table, layout.keys)
    versions = prep.versions
    ranges = tuple(
        (pc.min(versions.column(f"k{j}")).as_py(), pc.max(versions.column(f"k{j}")).as_py())
        for j in range(len(layout.keys))
    ) if versions.num_rows and not prep.truncates else ()
    plan = HistoryPlan(
        table=prep.table, path=prep.path, columns=layout.columns, keys=layout.keys, version=run_id,
        key_ranges=ranges, truncates=prep.truncates,
        metadata={"lakecdc.run_id": str(run_id), "lakecdc.format": settings.format, "lakecdc.scd_type": "2"},
    )
    inserted = updated = 0
    files: dict[str, int | None] = {}
    if (versions.num_rows or prep.truncates) and (prep.exists or creatable):
        result = retry_conflicts(lambda: engine.merge_history(plan, versions), what=f"merge into {prep.table}")
        inserted, updated = result.inserted, result.updated
        files = {"files_rewritten": result.files_removed, "files_added": result.files_added}
    last = prep.truncates[-1][0] if prep.truncates else None
    stones = tombstone_rows(prep.deletes, layout, truncate_seq=last, now=now)
    if stones.num_rows:
        engine.append(tombstone_path(target, prep.table), stones, version=run_id)
    expire_tombstones(engine, target, prep.table, settings.retention_for(prep.table), now)
    newest = pc.max(versions.column("_cdc_op_ts")).as_py() if versions.num_rows else None
    return TableSummary(
        source_table=prep.table, target=prep.path, events=prep.counts["events"], inserted=inserted, updated=updated,
        deleted=0, duplicate_or_late=prep.counts["_stale"] + prep.counts["_dups"],
        last_op_ts=newest.astimezone(dt.timezone.utc).isoformat() if newest is not None else None,
        last_seq=pc.max(versions.column("_cdc_seq")).as_py() if versions.num_rows else None,
        delta_version=engine.version(prep.path) if engine.exists(prep.path) else None, **files,  # type: ignore[arg-type]
    )


#: Commits that set session confs (delta-spark's idempotent-commit settings) run one at a time.
_SESSION_COMMIT_LOCK = threading.Lock()


def merge_one(
    engine: DeltaRsEngine, settings: Settings, target: str, prep: Prepared | HistoryPrepared,
    *, run_id: int, now: dt.datetime, say: Progress,
) -> TableSummary:
    """Commit one prepared table; a table records its sequence basis before its first merge (when
    it is created, or, for a table that stores no seq yet, when the basis changes)."""
    fields = settings.sequence_for(prep.table)
    eng = Recording(engine, fields)
    with _SESSION_COMMIT_LOCK if engine.name != "delta-rs" else contextlib.nullcontext():
        if engine.exists(prep.path) and recorded_basis(engine, prep.path) != basis(fields):
            record_basis(engine, prep.path, fields)
        if isinstance(prep, HistoryPrepared):
            say(f"{prep.table}: merging {prep.versions.num_rows} version(s) into its history")
            return commit_history(eng, settings, target, prep, run_id=run_id, now=now)  # type: ignore[arg-type]
        say(f"{prep.table}: merging {prep.net.rows} net change(s)")
        try:
            change_data_feed(eng, settings, prep)  # type: ignore[arg-type]
            return commit_table(eng, settings, target, prep, run_id=run_id, now=now)  # type: ignore[arg-type]
        finally:
            prep.net.release()


class Recording:
    """An engine whose new tables record a sequence basis right after they are created (delta-rs
    creates no table with a property it does not know; a crash in between leaves an empty table,
    which :func:`~lakecdc.changes.sequence.check_basis` lets take the basis)."""

    def __init__(self, engine: DeltaRsEngine, fields: tuple[SeqField, ...]) -> None:
        self._engine = engine
        self._fields = fields

    def create(self, path: str, schema: T.StructType, *, name: str | None = None,
               properties: Mapping[str, str] | None = None) -> None:
        self._engine.create(path, schema, name=name, properties=properties)
        if self._fields:
            record_basis(self._engine, path, self._fields)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._engine, attr)
