"""Step 4 of a run (see :mod:`lakecdc.run.apply`): each table prepared for its merge.

:func:`prepare_table` types a current-state table's events, drops those not newer than the table
and folds them to one net action per key; :func:`prepare_history` folds a history table's events
into versions (an ``abend`` key change stops the run in either, before anything is committed).
:func:`fast_path` prepares a run of the target's one table in a single pass. The prepared table
is merged by :mod:`lakecdc.merge.commit`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import sql_string
from lakecdc.changes.sequence import check_basis, resequence
from lakecdc.consolidate.files import late_by_file, per_input_file
from lakecdc.consolidate.fold import (
    ARRIVAL,
    Layout,
    Point,
    before_sql,
    drop_stale,
    first_truncate,
    fold,
    widen,
)
from lakecdc.consolidate.history import COUNT_COLUMNS, Truncate, fold_history, tracked_columns
from lakecdc.consolidate.history_keymoves import replay_pk_keys
from lakecdc.consolidate.keymoves import (
    arrival_key,
    fold_with_key_moves,
    key_move_events,
    pk_touched,
    raise_abend,
)
from lakecdc.errors import LakecdcError
from lakecdc.lake.state import known_tables, stored_reaches, table_path, tombstone_path, truncate_watermark
from lakecdc.merge import staged
from lakecdc.merge.history_plan import START_AT, is_history
from lakecdc.merge.shape import TableShape, table_shape
from lakecdc.merge.source import BatchSource
from lakecdc.merge.stored import read_rows, read_stored

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.config.settings import Progress, Settings
    from lakecdc.merge.delta_rs import DeltaRsEngine


def layout_of(shape: TableShape, inferred: dict[str, T.DataType]) -> tuple[Layout, T.StructType]:
    """The table's layout (its columns, their types and its keys) and its new columns.

    A new column seen only as NULL is left out for now: the table reads NULL for it anyway, and
    its type is inferred from the first run that carries a value."""
    types = {f.name: f.dataType for f in shape.existing.fields}
    types.update(inferred)
    columns = tuple(c for c in shape.columns if c in types or c in shape.keys)
    types.update({k: T.StringType() for k in shape.keys if k not in types})
    layout = Layout(
        columns=columns, types=tuple(types[c] for c in columns), keys=shape.keys,
        aliases=tuple(tuple(shape.spelled[c.lower()][1:]) for c in columns),
        ignored=tuple(n for c in shape.ignored for n in shape.spelled.get(c.lower(), [c])),
    )
    return layout, T.StructType([T.StructField(c, types[c]) for c in shape.new_columns if c in columns])


@dataclass
class Prepared:
    """One table, ready to merge: its layout, its net actions and its counts."""

    table: str
    path: str
    layout: Layout
    new_fields: T.StructType
    exists: bool
    #: the net actions (one per key) and the facts of them the merge needs
    net: BatchSource
    counts: dict[str, int]
    truncate_seq: str | None
    seen_columns: bool
    #: per input file, its events of this table (all events, as the fold saw them) and those of
    #: them that were duplicate or late
    events_by_file: dict[str, int] = field(default_factory=dict)
    late_by_file: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Batch:
    """What a run knows of its batch that lets the fold take a cheaper plan (same result).

    ``whole_images``: the format writes every column in every after image (its
    :class:`~lakecdc.decode.spec.Images` says ``whole="always"``): the fold takes each key's newest
    image instead of each column's newest value, and folds again per column if a key's images
    were not whole after all (a value the capture left out). ``one_file``: the batch's only input
    file: its counts per file are the totals, no per-file bookkeeping in the fold. ``stage``: see
    :mod:`lakecdc.merge.staged`.
    """

    whole_images: bool = False
    one_file: str | None = None
    #: where a delta-rs run stages its tables' net actions instead of collecting them (a large
    #: run: :func:`lakecdc.merge.staged.stage_root`), or None
    stage: str | None = None


@dataclass(frozen=True)
class Speculation:
    """What the fast path assumes of a batch, checked by the same pass that folds it.

    The fast path skips the profile pass when the target holds exactly one table, recorded by an
    earlier run with its keys: it assumes the batch holds only that table's events, all decodable,
    with the same keys, no column the table lacks, no truncate and nothing older than the table.
    An event that breaks an assumption is marked "unexpected" by :func:`~lakecdc.consolidate.fold.widen`
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
    spark: SparkSession, engine: DeltaRsEngine, settings: Settings, target: str, events: DataFrame,
    *, run_id: int, say: Progress, batch: Batch = Batch(),
) -> Prepared | None:
    """The run's one table prepared in a single pass over the data, or None (see :class:`Speculation`)."""
    known = known_tables(target)
    if len(known) != 1:
        return None
    ((table, keys),) = known.items()
    configured = settings.keys_for(table)
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
                   events, speculation=Speculation(table, shape.keys), batch=batch)
    if out is None:
        say("the batch holds more than the fast path assumed: profiling it")
        return None
    return out[0]


def prepare_table(
    spark: SparkSession, engine: DeltaRsEngine, settings: Settings, target: str, table: str,
    prof: dict, shape: TableShape, inferred: dict[str, T.DataType], events: DataFrame,
    *, speculation: Speculation | None = None, batch: Batch = Batch(),
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
    layout, new_fields = layout_of(shape, inferred)

    watermark = truncate_watermark(engine, target, table)
    run_truncate = prof["max_truncate"]
    if run_truncate is not None and watermark is not None and run_truncate <= watermark:
        run_truncate = None  # a replayed truncate: already applied
    # the stored seqs are read only when the table may hold one at or above the batch's smallest
    # (the usual batch is newer than the whole table: its keys are not read); the fast path learns
    # that smallest seq from its fold and asks then, or now if the engine could not tell then
    if speculation is not None:
        need_stored = stored_reaches(engine, target, table, "") is None
    else:
        need_stored = prof["min_seq"] is not None and stored_reaches(engine, target, table, prof["min_seq"]) is not False
    stored = read_stored(spark, engine, target, table, layout) if need_stored else None
    wide = widen(mine, layout, surprise=speculation.surprise_sql() if speculation is not None else None)
    marked = drop_stale(wide, layout, stored, watermark)
    # (the fast path keeps truncates: marked unexpected, they count as errors and make it give up)
    usable = marked if speculation is not None else marked.where(F.col("_op") != "T")
    reset = first_truncate(mine, run_truncate) if run_truncate is not None else None
    stage = staged.table_dir(batch.stage, table) if batch.stage is not None and engine.name == "delta-rs" else None
    folded = _folded_in_spark(usable, layout, reset, batch, stage=stage) if engine.name == "delta-spark" or stage else None
    net = _folded(usable, layout, reset, batch) if folded is None else None
    if folded is not None:
        totals = folded.totals
        counts = {name: int(totals[name] or 0) for name in ("_events", "_dups", "_stale", "_errors")}
        events_by_file, late = folded.by_file(batch.one_file)
        min_seq, moved_keys = totals["_min_seq"], bool(totals["_pku"])
    else:
        assert net is not None
        counts = {
            name: int(pc.sum(net.column(name)).as_py() or 0) for name in ("_events", "_dups", "_stale", "_errors")
        }
        events_by_file, late = late_by_file(net, batch.one_file)
        net = net.drop_columns(["_by_file"])
        min_seq, moved_keys = pc.min(net.column("_min_seq")).as_py(), bool(pc.any(net.column("_pku")).as_py())
    if speculation is not None:
        if counts["_errors"] or (not need_stored and min_seq is not None
                                 and stored_reaches(engine, target, table, min_seq) is not False):
            if folded is not None:
                folded.df.unpersist()
            return None
        prof = {**prof, "events": counts["_events"]}
    if moved_keys and folded is not None:  # (rare: the replay below works on the collected actions)
        net = folded.df.drop("_by_file").toArrow()
        folded.df.unpersist()
        folded = None
    if moved_keys:
        assert net is not None
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
    n_columns, n_keys = len(layout.columns), len(layout.keys)
    if folded is not None:  # delta-spark merges from the DataFrame, read from the fold's cache
        applied = folded.df.where(F.col("_action").isNotNull()).drop("_by_file")
        if stage is not None:  # (delta-rs streams the staged files)
            source = BatchSource.from_spark(applied, n_columns=n_columns, n_keys=n_keys, stage=stage)
        else:
            source = BatchSource.from_spark(applied, n_columns=n_columns, n_keys=n_keys, cached=folded.df)
    else:
        assert net is not None
        source = BatchSource.from_arrow(net.filter(pc.is_valid(net.column("_action"))), n_columns=n_columns,
                                        n_keys=n_keys)
    bad = None
    if counts["_errors"]:
        bad = marked.where(F.col("_error").isNotNull()).select(
            "_file", "_block", "_row", F.lit(table).alias("table"), "_error"
        )
    counts["events"] = prof["events"]
    prep = Prepared(
        table=table, path=path, layout=layout, new_fields=new_fields, exists=exists, net=source,
        counts=counts, truncate_seq=run_truncate, seen_columns=bool(prof["columns"]),
        events_by_file=events_by_file, late_by_file=late,
    )
    return prep, bad


@dataclass
class HistoryPrepared:
    """One history table, ready to merge: its versions, tombstones, truncates and counts."""

    table: str
    path: str
    layout: Layout
    new_fields: T.StructType
    exists: bool
    versions: pa.Table
    deletes: pa.Table
    truncates: tuple[tuple[str, dt.datetime], ...]
    counts: dict[str, int]
    seen_columns: bool
    #: per input file, its events of this table that were duplicate or late
    late_by_file: dict[str, int] = field(default_factory=dict)


def _folded(usable: DataFrame, layout: Layout, reset: Point | None, batch: Batch) -> pa.Table:
    """The net actions of ``usable``, collected, by the cheapest fold ``batch`` allows."""
    one_file = batch.one_file is not None
    with _result_size_advice():
        if batch.whole_images:
            net = fold(usable, layout, reset=reset, whole=True, one_file=one_file).toArrow()
            if not pc.any(net.column("_partial")).as_py():
                return net.drop_columns(["_partial"])
        return fold(usable, layout, reset=reset, one_file=one_file).toArrow()


@contextlib.contextmanager
def _result_size_advice() -> Iterator[None]:
    """Spark's refusal to collect more than ``spark.driver.maxResultSize`` as a LakecdcError that
    says what to do (delta-rs merges the batch's net actions collected on the driver)."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - py4j's and Spark Connect's errors alike
        if "maxResultSize" not in str(exc):
            raise
        raise LakecdcError(
            "the batch's net actions (one row per changed key) are larger than spark.driver.maxResultSize, "
            "which delta-rs needs them collected within: raise spark.driver.maxResultSize (and the driver's "
            "memory), apply fewer files per run (a narrower path or glob, or lakecdc.stream with "
            "max_files_per_trigger), or use engine='delta-spark', which merges them in Spark"
        ) from exc


@dataclass
class _SparkFold:
    """A fold's net actions kept in Spark's cache (delta-spark merges them from there) and its
    totals over all keys (one aggregation)."""

    df: DataFrame
    totals: dict

    def by_file(self, one_file: str | None) -> tuple[dict[str, int], dict[str, int]]:
        """:func:`~lakecdc.consolidate.files.late_by_file` of the cached actions, summed in Spark."""
        total = {name: int(self.totals[name] or 0) for name in ("_events", "_dups", "_stale")}
        if not total["_events"]:
            return {}, {}
        if one_file is not None:  # (the fold left _by_file NULL: the totals are the file's)
            replayed = total["_dups"] + total["_stale"]
            return {one_file: total["_events"]}, ({one_file: replayed} if replayed else {})
        sums = (self.df.select(F.explode("_by_file").alias("e")).groupBy(F.col("e.file").alias("file"))
                .agg(F.sum("e.events").alias("events"), F.sum("e.late").alias("late")).toArrow())
        return per_input_file(sums)


def _folded_in_spark(
    usable: DataFrame, layout: Layout, reset: Point | None, batch: Batch, *, stage: str | None = None,
) -> _SparkFold | None:
    """:func:`_folded` left in Spark: the net actions cached (or written to ``stage`` and read from
    there), their totals collected; None when they cannot be staged."""
    one_file = batch.one_file is not None

    def kept(**choices: bool) -> _SparkFold | None:
        df = fold(usable, layout, reset=reset, one_file=one_file, **choices)
        if stage is None:
            df = df.persist(StorageLevel.MEMORY_AND_DISK)
        elif staged.can_stage(df):
            df = staged.stage(df, stage)
        else:
            return None
        sums = [F.sum(c).alias(c) for c in ("_events", "_dups", "_stale", "_errors")]
        extra = [F.max("_partial").alias("_partial")] if "_partial" in df.columns else []
        row = df.agg(*sums, F.min("_min_seq").alias("_min_seq"), F.max("_pku").alias("_pku"), *extra).first()
        return _SparkFold(df, row.asDict() if row is not None else {})

    if batch.whole_images:
        out = kept(whole=True)
        if out is None or not out.totals.get("_partial"):
            if out is not None:
                out.df = out.df.drop("_partial")
            return out
        out.df.unpersist()
    return kept()


def _known(
    spark: SparkSession, engine: DeltaRsEngine, target: str, table: str, layout: Layout, *, exists: bool,
    min_seq: str | None,
) -> tuple[DataFrame | None, DataFrame | None]:
    """Per key the seq the history reflects (``k{j}``, ``_stored_seq``: any version's last event or
    end, or the key's tombstone), or None when the batch is newer than everything; and the open
    versions with positional names (None without a table)."""
    path, stones = table_path(target, table), tombstone_path(target, table)
    keys = [F.col(f"`{k}`").alias(f"k{j}") for j, k in enumerate(layout.keys)]
    need = min_seq is None or any(
        engine.reaches(p, column, min_seq) is not False
        for p, column in ((path, "_cdc_seq"), (path, "_cdc_end_seq"), (stones, "_cdc_seq"))
    )
    parts: list[DataFrame] = []
    open_rows = None
    if exists:
        hist = engine.read(spark, path)
        parts.append(hist.select(*keys, F.greatest("_cdc_seq", "_cdc_end_seq").alias("_stored_seq")))
        values = [
            (F.col(f"`{c}`") if c in hist.columns else F.lit(None).cast(layout.types[i])).alias(f"c{i}")
            for i, c in enumerate(layout.columns)
        ]
        open_rows = hist.where(F.col("_cdc_end_seq").isNull()).select(
            *keys, *values, "_cdc_seq", "_cdc_op", "_cdc_op_ts",
            F.col("_cdc_start_seq").alias("_t_start_seq"), F.col(START_AT).alias("_t_start_at"),
        )
    if not need:
        return None, open_rows
    if engine.exists(stones):
        t = engine.read(spark, stones).where(F.col("_cdc_kind") == "D")
        if all(k in t.columns for k in layout.keys):
            parts.append(t.select(*keys, F.col("_cdc_seq").alias("_stored_seq")))
    if not parts:
        return None, open_rows
    stored = parts[0]
    for p in parts[1:]:
        stored = stored.unionByName(p)
    return stored.groupBy(*layout.key_cols).agg(F.max("_stored_seq").alias("_stored_seq")), open_rows


def _truncates(mine: DataFrame, prof: dict, watermark: str | None) -> tuple[list[Truncate], int]:
    """The batch's truncates newer than ``watermark`` (:data:`Truncate`), one per seq (the first
    to arrive: one of equal seq arriving later is its copy), in the order (seq, arrival); and how
    many were older than the watermark (late)."""
    if prof.get("max_truncate") is None:
        return [], 0
    rows = mine.where(F.col("op") == "T").select("seq", F.unix_micros("op_ts").alias("us"), *ARRIVAL).collect()
    first: dict[str, Truncate] = {}
    for r in rows:
        if watermark is not None and r["seq"] <= watermark:
            continue
        t = (r["seq"], int(r["us"]), tuple(r[c] for c in ARRIVAL))
        if r["seq"] not in first or [*map(arrival_key, t[2])] < [*map(arrival_key, first[r["seq"]][2])]:
            first[r["seq"]] = t
    live = [first[s] for s in sorted(first)]
    return live, sum(1 for r in rows if watermark is not None and r["seq"] < watermark)


def prepare_history(
    spark: SparkSession, engine: DeltaRsEngine, settings: Settings, target: str, table: str,
    prof: dict, shape: TableShape, inferred: dict[str, T.DataType], events: DataFrame,
) -> tuple[HistoryPrepared, DataFrame | None]:
    """Fold one history table's events into versions (collected as Arrow) and count what was left
    out; also returns the records that did not fit (for the quarantine), or None."""
    path = table_path(target, table)
    mine = events.where((F.col("table") == table) & F.col("_error").isNull() & F.col("op").isNotNull())
    layout, new_fields = layout_of(shape, inferred)
    tracked = tracked_columns(settings, table, layout)
    watermark = truncate_watermark(engine, target, table)
    truncates, late_truncates = _truncates(mine, prof, watermark)
    stored, open_rows = _known(spark, engine, target, table, layout, exists=shape.exists, min_seq=prof["min_seq"])
    marked = drop_stale(widen(mine, layout), layout, stored, watermark)
    usable = marked.where(F.col("_op") != "T")
    out = fold_history(usable, layout, open_rows=open_rows, truncates=truncates, tracked=tracked).toArrow()
    counts = {name: int(pc.sum(out.column(name)).as_py() or 0) for name in COUNT_COLUMNS}
    counts["_stale"] += late_truncates
    _, late = late_by_file(out)
    out = out.drop_columns(["_by_file"])
    if pc.any(out.column("_pku")).as_py():
        # keys touched by a primary-key update depend on each other: replay them in order
        ok = key_move_events(mine, layout, stored, watermark)
        if settings.pk_update_for(table) == "abend":
            raise_abend(table, ok, layout)
        touched = pk_touched(ok, layout)
        moved = ok.join(touched, layout.key_cols, "left_semi")
        replayed = replay_pk_keys(moved, layout, touched, open_rows=open_rows, stored=stored, truncates=truncates,
                                  tracked=tracked, table=table).toArrow()
        # the other keys' versions do not depend on the moved ones: keep the first fold's
        key_cols = layout.key_cols
        moved_keys = replayed.group_by(key_cols).aggregate([])
        kept = out.join(moved_keys, keys=key_cols, join_type="left anti").select(out.column_names)
        nullable = pa.schema([f.with_nullable(True) for f in out.schema])
        out = pa.concat_tables([kept.cast(nullable), replayed.select(out.column_names).cast(nullable)])
    bad = None
    if counts["_errors"]:
        bad = marked.where(F.col("_error").isNotNull()).select("_file", "_block", "_row", F.lit(table).alias("table"), "_error")
    counts["events"] = prof["events"]
    versions = out.filter(pc.is_valid(out.column("_kind")))
    ends = out.filter(pc.is_valid(out.column("_tomb_seq")))
    deletes = ends.select([f"k{j}" for j in range(len(layout.keys))] + ["_tomb_seq"]).rename_columns(
        [f"k{j}" for j in range(len(layout.keys))] + ["_cdc_seq"])
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    prep = HistoryPrepared(
        table=table, path=path, layout=layout, new_fields=new_fields, exists=shape.exists, versions=versions,
        deletes=deletes, truncates=tuple((s, epoch + dt.timedelta(microseconds=us)) for s, us, _ in truncates),
        counts=counts, seen_columns=bool(prof["columns"]), late_by_file=late,
    )
    return prep, bad
