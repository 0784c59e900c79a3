"""Steps 4-5 of a run (see :mod:`lakecdc.apply`): one table prepared, then merged.

:func:`prepare_table` types the table's events, drops those not newer than the table, folds them
to one net action per key (an ``abend`` key change stops the run before anything is committed);
:func:`commit_table` MERGEs the net actions with the run's transaction version (retrying a
concurrent writer's conflict) and records tombstones. :func:`fast_path` does both for a run of
the target's one table in a single pass.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import sql_string
from lakecdc.changes.sequence import (
    SeqField,
    basis,
    check_basis,
    record_basis,
    recorded_basis,
    resequence,
)
from lakecdc.consolidate import (
    Layout,
    before_sql,
    drop_stale,
    first_truncate,
    fold,
    fold_with_key_moves,
    key_move_events,
    late_by_file,
    widen,
)
from lakecdc.errors import CommitConflict, PrimaryKeyUpdateError
from lakecdc.history import (
    CHANGE_DATA_FEED,
    HistoryPrepared,
    commit_history,
    enable_change_data_feed,
    is_history,
)
from lakecdc.merge.plan import CDC_COLUMNS, MergePlan
from lakecdc.merge.source import BatchSource
from lakecdc.state import (
    expire_tombstones,
    known_tables,
    read_rows,
    read_stored,
    stored_max_seq,
    table_path,
    tombstone_path,
    tombstone_rows,
    truncate_watermark,
    write_table_info,
)
from lakecdc.summary import TableSummary

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.merge.delta_rs import DeltaRsEngine

from lakecdc.profile import TableShape, table_shape
from lakecdc.settings import ApplySettings, Progress


@dataclass
class Prepared:
    """One table, ready to merge: its layout, its net actions and its counts."""

    table: str
    path: str
    layout: Layout
    new_fields: T.StructType
    exists: bool
    net: pa.Table
    counts: dict[str, int]
    truncate_seq: str | None
    seen_columns: bool
    #: per input file, its events of this table (all events, as the fold saw them) and those of
    #: them that were duplicate or late
    events_by_file: dict[str, int] = field(default_factory=dict)
    late_by_file: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Speculation:
    """What the fast path assumes of a batch, checked by the same pass that folds it.

    The fast path skips the profile pass when the target holds exactly one table, recorded by an
    earlier run with its keys: it assumes the batch holds only that table's events, all decodable,
    with the same keys, no column the table lacks, no truncate and nothing older than the table.
    An event that breaks an assumption is marked "unexpected" by :func:`~lakecdc.consolidate.widen`
    and counted like a bad record by the fold; then the run takes the ordinary path (profile, then
    fold) and nothing was committed.
    """

    table: str
    keys: tuple[str, ...]

    def surprise_sql(self) -> str:
        """SQL over the canonical events: true for an event the fast path did not assume."""
        want = sql_string(",".join(k.lower() for k in self.keys))
        return (
            f"_error IS NOT NULL OR table IS NULL OR table != {sql_string(self.table)} OR op IS NULL OR op = 'T' "
            f"OR (keys IS NOT NULL AND lower(array_join(keys, ',')) != {want})"
        )


def fast_path(
    spark: SparkSession, engine: DeltaRsEngine, settings: ApplySettings, target: str, events: DataFrame,
    *, run_id: int, say: Progress,
) -> Prepared | None:
    """The run's one table prepared in a single pass over the data, or None (see :class:`Speculation`)."""
    known = known_tables(target)
    if len(known) != 1:
        return None
    ((table, keys),) = known.items()
    configured = settings.keys.get(table)
    if configured and [c.lower() for c in configured] != [k.lower() for k in keys]:
        return None
    path = table_path(target, table)
    if not engine.exists(path):
        return None
    done = engine.committed_version(path)
    if done is not None and done >= run_id:
        return None
    prof = {"events": 0, "min_seq": None, "max_truncate": None, "columns": [], "keys": list(keys)}
    shape = table_shape(engine, settings, target, table, prof)
    if shape.new_columns or settings.scd_type(table) == 2 or is_history(shape.existing):
        return None  # (a history table, or one applied as the wrong type: the ordinary path says so)
    fields = settings.sequence_for(table)
    check_basis(engine, target, table, fields)
    if fields:  # (an event without a value is an error: unexpected, the ordinary path quarantines it)
        types = {f.name: f.dataType for f in shape.existing.fields}
        events = resequence(events, table, fields, types, shape.spelled).drop("_unordered")
    say(f"{table}: consolidating")
    out = prepare_table(spark, engine, settings, target, table, {**prof, "columns": list(shape.columns)}, shape, {},
                   events, speculation=Speculation(table, shape.keys))
    if out is None:
        say("the batch holds more than the fast path assumed: profiling it")
        return None
    return out[0]


def prepare_table(
    spark: SparkSession, engine: DeltaRsEngine, settings: ApplySettings, target: str, table: str,
    prof: dict, shape: TableShape, inferred: dict[str, T.DataType], events: DataFrame,
    *, speculation: Speculation | None = None,
) -> tuple[Prepared, DataFrame | None] | None:
    """Fold one table's events into net actions (collected as Arrow) and count what was left out.

    Returns the prepared table and, when some of its records did not fit (a value of the wrong
    type, a missing key), those records for the quarantine. With a ``speculation`` (the fast
    path: no profile was made), returns None when the batch turned out not to be what it assumed.
    """
    path = table_path(target, table)
    exists = shape.exists
    # the fast path folds every event, to find those it did not expect
    mine = events if speculation is not None else events.where(
        (F.col("table") == table) & F.col("_error").isNull() & F.col("op").isNotNull()
    )
    types = {f.name: f.dataType for f in shape.existing.fields}
    types.update(inferred)
    # A new column seen only as NULL is left out for now: the table reads NULL for it anyway,
    # and its type is inferred from the first run that carries a value.
    columns = tuple(c for c in shape.columns if c in types or c in shape.keys)
    types.update({k: T.StringType() for k in shape.keys if k not in types})
    layout = Layout(
        columns=columns, types=tuple(types[c] for c in columns), keys=shape.keys,
        aliases=tuple(tuple(shape.spelled[c.lower()][1:]) for c in columns),
        ignored=tuple(n for c in shape.ignored for n in shape.spelled.get(c.lower(), [c])),
    )
    new_fields = T.StructType([T.StructField(c, types[c]) for c in shape.new_columns if c in columns])

    watermark = truncate_watermark(engine, target, table)
    run_truncate = prof["max_truncate"]
    if run_truncate is not None and watermark is not None and run_truncate <= watermark:
        run_truncate = None  # a replayed truncate: already applied
    max_stored = stored_max_seq(engine, target, table)
    if speculation is not None:
        need_stored = max_stored is None  # checked against the batch's smallest seq afterwards
    else:
        need_stored = max_stored is None or (prof["min_seq"] is not None and prof["min_seq"] <= max_stored)
    stored = read_stored(spark, engine, target, table, layout) if need_stored else None
    wide = widen(mine, layout, surprise=speculation.surprise_sql() if speculation is not None else None)
    marked = drop_stale(wide, layout, stored, watermark)
    # (the fast path keeps truncates: marked unexpected, they count as errors and make it give up)
    usable = marked if speculation is not None else marked.where(F.col("_op") != "T")
    reset = first_truncate(mine, run_truncate) if run_truncate is not None else None
    net = fold(usable, layout, reset=reset).toArrow()
    counts = {
        name: int(pc.sum(net.column(name)).as_py() or 0) for name in ("_events", "_dups", "_stale", "_errors")
    }
    events_by_file, late = late_by_file(net)
    net = net.drop_columns(["_by_file"])
    if speculation is not None:
        min_seq = pc.min(net.column("_min_seq")).as_py()
        if counts["_errors"] or (not need_stored and min_seq is not None and max_stored is not None and min_seq <= max_stored):
            return None
        prof = {**prof, "events": counts["_events"]}
    if pc.any(net.column("_pku")).as_py():
        # the replay needs whole images: widen again with every after value and the before image
        ok = key_move_events(mine, layout, stored, watermark)
        if settings.pk_update_for(table) == "abend":
            raise_abend(table, ok, layout)
        target_rows = read_rows(spark, engine, target, table, layout)
        if reset is not None:  # (rows an earlier run stored at the truncate's seq stay, as in the merge)
            ok = ok.where(f"NOT {before_sql(reset)}")
            target_rows = target_rows.where(F.col("_cdc_seq") >= F.lit(reset[0])) if target_rows is not None else None
        if stored is None:
            stored = read_stored(spark, engine, target, table, layout)
        moved = fold_with_key_moves(
            ok, layout, pk_update=settings.pk_update_for(table), table=table,
            target_rows=target_rows, stored=stored,
        ).toArrow()
        # duplicates stay as the first fold counted them (it also sees events a truncate wiped)
        counts["_pku"] = int(ok.where("_pku").count())
        net = moved.drop_columns(["_by_file"])
    net = net.filter(pc.is_valid(net.column("_action")))
    bad = None
    if counts["_errors"]:
        bad = marked.where(F.col("_error").isNotNull()).select(
            "_file", "_block", "_row", F.lit(table).alias("table"), "_error"
        )
    counts["events"] = prof["events"]
    prep = Prepared(
        table=table, path=path, layout=layout, new_fields=new_fields, exists=exists, net=net,
        counts=counts, truncate_seq=run_truncate, seen_columns=bool(prof["columns"]),
        events_by_file=events_by_file, late_by_file=late,
    )
    return prep, bad


def raise_abend(table: str, ok: DataFrame, layout: Layout) -> None:
    first = ok.where("_pku").orderBy("_seq").limit(1).collect()
    if not first:
        return
    r = first[0]
    nk = len(layout.keys)
    old = tuple(r[f"k{j}"] for j in range(nk))
    new = tuple(r[f"n{j}"] for j in range(nk))
    raise PrimaryKeyUpdateError(table, old, new, r["_pos"])


def change_data_feed(engine: DeltaRsEngine, settings: ApplySettings, prep: Prepared) -> None:
    """Turn on Change Data Feed for a current-state table that asks for it, before its merge: an
    existing table gets the property, a new one is created with it (``commit_table`` then finds it)."""
    if not settings.wants_change_data_feed(prep.table):
        return
    if engine.exists(prep.path):
        enable_change_data_feed(engine, prep.path)
        return
    has_rows = bool(prep.net.num_rows) and bool(pc.any(pc.equal(prep.net.column("_action"), "upsert")).as_py())
    if has_rows or prep.seen_columns:  # the tables commit_table creates
        layout = prep.layout
        schema = T.StructType(
            [T.StructField(c, t) for c, t in zip(layout.columns, layout.types, strict=True)]
            + [T.StructField(name, dtype) for name, dtype in CDC_COLUMNS]
        )
        engine.create(prep.path, schema, name=prep.table, properties=CHANGE_DATA_FEED)


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


def commit_table(
    engine: DeltaRsEngine, settings: ApplySettings, target: str, prep: Prepared, *, run_id: int, now: dt.datetime,
) -> TableSummary:
    layout = prep.layout
    source = BatchSource.from_arrow(prep.net, n_columns=len(layout.columns), n_keys=len(layout.keys))
    schema = T.StructType(
        [T.StructField(c, t) for c, t in zip(layout.columns, layout.types, strict=True)]
        + [T.StructField(name, dtype) for name, dtype in CDC_COLUMNS]
    )
    has_rows = source.rows > 0 and bool(pc.any(pc.equal(source.arrow.column("_action"), "upsert")).as_py())
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
    files: dict[str, int | None] = {}
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
    applied = prep.net.filter(pc.is_valid(prep.net.column("_action")))
    newest = pc.max(applied.column("_cdc_op_ts")).as_py() if applied.num_rows else None
    return TableSummary(
        last_op_ts=newest.astimezone(dt.timezone.utc).isoformat() if newest is not None else None,
        last_seq=pc.max(applied.column("_cdc_seq")).as_py() if applied.num_rows else None,
        source_table=prep.table, target=prep.path, events=prep.counts["events"], inserted=inserted,
        updated=updated, deleted=deleted, duplicate_or_late=prep.counts["_stale"] + prep.counts["_dups"],
        delta_version=engine.version(prep.path) if engine.exists(prep.path) else None, **files,
    )


#: Commits that set session confs (delta-spark's idempotent-commit settings) run one at a time.
_SESSION_COMMIT_LOCK = threading.Lock()


def merge_one(
    engine: DeltaRsEngine, settings: ApplySettings, target: str, prep: Prepared | HistoryPrepared,
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
        say(f"{prep.table}: merging {prep.net.num_rows} net change(s)")
        change_data_feed(eng, settings, prep)  # type: ignore[arg-type]
        return commit_table(eng, settings, target, prep, run_id=run_id, now=now)  # type: ignore[arg-type]


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
