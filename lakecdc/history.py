"""SCD type 2 history tables: every version of every row, instead of the current state only.

DLT's AUTO CDC vocabulary: ``stored_as_scd_type=2`` makes a table a history table; its rows are
versions, valid from ``__START_AT`` (inclusive) to ``__END_AT`` (exclusive; NULL for the current,
open version). Both are the source commit times (``op_ts``) of the events that opened and closed
the version; since one source transaction shares one ``op_ts``, the exact order is kept as well:
``_cdc_start_seq`` / ``_cdc_end_seq`` are the seqs of those events (a version opened and closed
inside one transaction has ``__START_AT = __END_AT``). ``_cdc_seq`` / ``_cdc_op`` / ``_cdc_op_ts``
describe the last event applied to the version, as on a current-state table.

The rules are the current-state rules of ``semantics.md`` (the same ordering by seq, missing vs
NULL, stale and duplicate events dropped the same way), turned into versions event by event:

* a key's row appears (insert, upsert, update of an unknown key completed from its before image,
  re-insert after a delete): a version **opens**;
* a change of a **tracked** column (every non-key column, or DLT's ``track_history_column_list``,
  or all but ``track_history_except_column_list``) closes the open version and opens a new one;
  a change of other columns only (or none) **updates the open version in place**;
* a delete closes the open version; a primary-key update closes the old key's version and opens
  the new key's (closing the new key's open version if it had one); a truncate closes every open
  version older than it.

Late events: within one run the order of arrival does not matter (the run is sorted by seq).
Across runs, an event that is not newer than what the history holds for its key (any version's
last event or end, or the key's tombstone) or older than the last truncate is dropped and
counted as duplicate/late, exactly as for a current-state table: closed history is never
rewritten (DLT re-orders it), so versions of a key never overlap and the open versions always
equal the current-state table the same events would give.

The fold runs as Spark window functions over each key ordered by seq (see :func:`fold_history`);
keys touched by primary-key updates are replayed per table in an executor
(:mod:`lakecdc._pkhistory`), as the current-state path does. The MERGE is
:class:`lakecdc.merge.history_plan.HistoryPlan`, committed with the run's Delta app transaction.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc._pkfold import arrival_key
from lakecdc.changes.columns import sql_string
from lakecdc.consolidate import (
    ARRIVAL,
    BY_FILE,
    Layout,
    before_sql,
    by_file,
    content_hash,
    drop_stale,
    key_move_events,
    late_by_file,
    pk_touched,
    widen,
)
from lakecdc.errors import ConfigError
from lakecdc.merge.history_plan import END_AT, HISTORY_COLUMNS, START_AT, HistoryPlan
from lakecdc.merge.plan import CDC_COLUMNS
from lakecdc.state import (
    expire_tombstones,
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
    from lakecdc.profile import TableShape
    from lakecdc.settings import ApplySettings

#: The table property that turns on Delta's Change Data Feed.
CHANGE_DATA_FEED = {"delta.enableChangeDataFeed": "true"}

#: Count columns of the fold's output (non-zero on one row per key).
_COUNTS = ("_events", "_dups", "_stale", "_errors")


# -- settings --------------------------------------------------------------------------------------


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
    """The :class:`~lakecdc.settings.ApplySettings` fields of ``apply``'s history arguments, checked."""
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


def tracked_columns(settings: ApplySettings, table: str, layout: Layout) -> frozenset[int]:
    """Positions of the columns whose changes open a new version (never the key columns)."""
    only = match_table(settings.track_history_column_list, table)
    but = match_table(settings.track_history_except_column_list, table)
    if only is not None and but is not None:
        raise ConfigError(f"table {table!r}: both a track_history_column_list and a track_history_except_column_list match it")
    keys = {k.lower() for k in layout.keys}
    only_low = {c.lower() for c in only} if only is not None else None
    but_low = {c.lower() for c in but or ()}
    return frozenset(
        i for i, c in enumerate(layout.columns)
        if c.lower() not in keys and (only_low is None or c.lower() in only_low) and c.lower() not in but_low
    )


def is_history(schema: T.StructType) -> bool:
    """True for the schema of a history table (it has the validity columns)."""
    return END_AT in schema.fieldNames()


def history_shape(settings: ApplySettings, table: str, path: str, shape: TableShape) -> TableShape:
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


def history_schema(layout: Layout) -> T.StructType:
    """The Delta schema of a history table: source columns, validity columns, ``_cdc_`` columns."""
    return T.StructType(
        [T.StructField(c, t) for c, t in zip(layout.columns, layout.types, strict=True)]
        + [T.StructField(name, dtype) for name, dtype in (*HISTORY_COLUMNS, *CDC_COLUMNS)]
    )


def enable_change_data_feed(engine: DeltaRsEngine, path: str) -> bool:
    """Turn on Change Data Feed on an existing table (one commit; none when it is on). Returns
    whether a commit was made."""
    if engine.properties(path).get("delta.enableChangeDataFeed", "").lower() == "true":
        return False
    engine.set_properties(path, CHANGE_DATA_FEED)
    return True


# -- the fold --------------------------------------------------------------------------------------


def version_schema(layout: Layout) -> T.StructType:
    """Schema of :func:`fold_history`'s output (shared with the primary-key replay)."""
    fields = [T.StructField(f"k{j}", layout.types[i]) for j, i in enumerate(layout.key_index)]
    fields += [T.StructField(f"c{i}", dtype) for i, dtype in enumerate(layout.types)]
    fields += [
        T.StructField("_kind", T.StringType()),
        T.StructField("_start_at", T.TimestampType()),
        T.StructField("_start_seq", T.StringType()),
        T.StructField("_end_at", T.TimestampType()),
        T.StructField("_end_seq", T.StringType()),
        T.StructField("_cdc_seq", T.StringType()),
        T.StructField("_cdc_op", T.StringType()),
        T.StructField("_cdc_op_ts", T.TimestampType()),
        *[T.StructField(c, T.LongType()) for c in _COUNTS],
        T.StructField("_pku", T.BooleanType()),
        T.StructField("_tomb_seq", T.StringType()),
        T.StructField("_by_file", BY_FILE),
    ]
    return T.StructType(fields)


def _pseudo_events(open_rows: DataFrame, events: DataFrame, layout: Layout) -> DataFrame:
    """The open versions of the keys ``events`` touch, as events that come first in their key and
    carry every column: the fold then continues (or closes) them like any version."""
    keys = layout.key_cols
    wanted = events.where("_ok").select(*keys)
    n = len(layout.columns)
    return open_rows.join(wanted, keys, "left_semi").select(
        *keys, F.col("_cdc_op").alias("_op"), F.col("_cdc_seq").alias("_seq"), F.col("_cdc_op_ts").alias("_op_ts"),
        F.lit(False).alias("_pku"), *[F.lit(None).cast(events.schema[c].dataType).alias(c) for c in ARRIVAL],
        F.lit(True).alias("_ok"), F.lit(False).alias("_stale"), F.lit(False).alias("_bad"),
        *[x for i in range(n) for x in (F.col(f"c{i}").alias(f"v{i}"), F.lit(True).alias(f"p{i}"))],
        F.lit(None).cast("bigint").alias("_h"),
        F.lit(True).alias("_target"), F.col("_t_start_seq"), F.col("_t_start_at"),
    )


#: A truncate of the batch: its seq, op_ts (microseconds) and arrival (values of ``ARRIVAL``).
Truncate = tuple[str, int, tuple[Any, ...]]


def _truncate_cases(truncates: Sequence[Truncate]) -> tuple[str, str]:
    """SQL over ``_seq`` and the arrival: the batch's last truncate before the event, and the
    first one after it (a struct of its seq and op_ts); NULL when there is none. A row stored by
    an earlier run (no arrival) that ties a truncate's seq comes after it."""
    if not truncates:
        return "CAST(NULL AS STRING)", "CAST(NULL AS STRUCT<s: STRING, ts: TIMESTAMP>)"
    before = " ".join(
        f"WHEN NOT {before_sql((s, at))} THEN {sql_string(s)}" for s, _, at in reversed(truncates)
    )
    after = " ".join(
        f"WHEN {before_sql((s, at))} THEN named_struct('s', {sql_string(s)}, 'ts', timestamp_micros({us}))"
        for s, us, at in truncates
    )
    return f"CASE {before} END", f"CASE {after} END"


def fold_history(
    marked: DataFrame, layout: Layout, *, open_rows: DataFrame | None, truncates: Sequence[Truncate],
    tracked: frozenset[int],
) -> DataFrame:
    """One table's events (from :func:`~lakecdc.consolidate.widen` and
    :func:`~lakecdc.consolidate.drop_stale`, truncates removed) as the versions they make.

    ``open_rows`` holds the table's open versions (``k{j}``, ``c{i}``, ``_cdc_seq``, ``_cdc_op``,
    ``_cdc_op_ts``, ``_t_start_seq``, ``_t_start_at``); ``truncates`` the batch's truncates newer
    than the table's watermark (:data:`Truncate`) in the order (seq, arrival); ``tracked`` the
    positions of the tracked columns.

    Per key, in the order (seq, arrival) (after duplicates, stale and bad events are set aside and counted):
    a **segment** is a run of events between resets (a delete ends one; a truncate between two
    events starts a new one); the row after each event is, per column, its last present value in
    the segment, else the segment's base (the open version's row, or an update's before image,
    or NULL); an event whose row differs from the previous row in a tracked column opens a
    **version**; a version ends at the next version's first event, at the segment's delete, or at
    the first truncate after it.

    Output (:func:`version_schema`): one row per version the batch opened (``_kind`` ``insert``)
    or changed (``update``: the table's open version, changed in place and/or closed), and on each
    key's last row the key's counts, ``_pku`` and ``_tomb_seq`` (the seq of the delete it ends
    with, for a tombstone).
    """
    keys = layout.key_cols
    n = len(layout.columns)
    stale = "_stale" if "_stale" in marked.columns else "false"
    ev = marked.selectExpr(
        *keys, "_op", "_seq", "_op_ts", "_pku", *ARRIVAL,
        f"(_error IS NULL AND NOT {stale}) AS _ok", f"{stale} AS _stale", "_error IS NOT NULL AS _bad",
        *[f"{x}{i}" for i in range(n) for x in ("v", "p")], f"{content_hash(layout)} AS _h",
        "false AS _target", "CAST(NULL AS STRING) AS _t_start_seq", "CAST(NULL AS TIMESTAMP) AS _t_start_at",
    )
    if open_rows is not None:
        ev = ev.unionByName(_pseudo_events(open_rows, ev, layout))
    by_key, arrival = ", ".join(keys), ", ".join(ARRIVAL)
    before_t, after_t = _truncate_cases(truncates)

    # 1. per key, in the order (seq, arrival): duplicates (an exact copy, same seq and content, of
    # the usable event just before it, with no truncate between them), counts
    w1 = f"PARTITION BY {by_key} ORDER BY _ok, _seq, {arrival}"
    whole = f"({w1} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"
    ev = ev.selectExpr("*", f"{before_t} AS _tb").selectExpr(
        "*", f"_ok AND coalesce(lag(_ok) OVER ({w1}), false) AND _seq = lag(_seq) OVER ({w1}) "
        f"AND _h <=> lag(_h) OVER ({w1}) AND _tb <=> lag(_tb) OVER ({w1}) AS _dup",
        f"lead(1) OVER ({w1}) IS NULL AS _is_last",
    ).selectExpr("*", "_ok AND NOT _dup AS _live")
    ev = ev.selectExpr(
        "*",
        f"sum(CAST(NOT _target AS BIGINT)) OVER {whole} AS _n_events",
        f"sum(CAST(_dup AS BIGINT)) OVER {whole} AS _n_dups",
        f"sum(CAST(_stale AND NOT _bad AS BIGINT)) OVER {whole} AS _n_stale",
        f"sum(CAST(_bad AS BIGINT)) OVER {whole} AS _n_errors",
        f"max(_live AND _pku) OVER {whole} AS _key_pku",
        f"last(CASE WHEN _live AND NOT _target THEN struct(_seq, _op) END, true) OVER {whole} AS _newest",
    )
    ev = by_file(ev, w1, whole, late="(_dup AND NOT _target) OR (_stale AND NOT _bad)", counted="NOT _target")
    # 2. segments of the usable events: a delete ends one, a truncate between two events starts one
    w2 = f"PARTITION BY {by_key}, _live ORDER BY _seq, {arrival}"
    ev = ev.selectExpr(
        "*",
        f"row_number() OVER ({w2}) = 1 OR lag(_op) OVER ({w2}) = 'D' OR NOT (lag(_tb) OVER ({w2}) <=> _tb) AS _seg_start",
    ).selectExpr("*", f"sum(CAST(_seg_start AS INT)) OVER ({w2} ROWS UNBOUNDED PRECEDING) AS _seg")
    # 3. the row after each event: last present value in the segment, else the segment's base
    w3 = f"PARTITION BY {by_key}, _live, _seg ORDER BY _seq, {arrival}"
    run = f"({w3} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    base = ", ".join(f"v{i}" for i in range(n))
    ev = ev.selectExpr(
        "*", f"row_number() OVER ({w3}) = 1 AS _first",
        f"first(CASE WHEN _op = 'U' AND NOT _target THEN struct({base}) END) OVER {run} AS _base",
        *[f"last(CASE WHEN p{i} AND _op != 'D' THEN struct(v{i} AS v) END, true) OVER {run} AS l{i}" for i in range(n)],
    ).selectExpr(
        *[c for c in ev.columns if not (c[0] in "vp" and c[1:].isdigit())], "_first",
        *[f"IF(l{i} IS NOT NULL, l{i}.v, _base.v{i}) AS r{i}" for i in range(n)],
    )
    # 4. versions: an event that changes a tracked column (or starts a segment) opens one
    diff = " OR ".join(f"NOT (r{i} <=> lag(r{i}) OVER ({w3}))" for i in sorted(tracked)) or "false"
    ev = ev.selectExpr("*", f"_op != 'D' AND (_first OR {diff}) AS _chg")
    ev = ev.selectExpr(
        "*",
        f"last(CASE WHEN _chg THEN named_struct('t', _target, 's', coalesce(_t_start_seq, _seq), "
        f"'ts', coalesce(_t_start_at, _op_ts)) END, true) OVER {run} AS _vopen",
        f"lead(named_struct('s', _seq, 'ts', _op_ts, 'closes', _chg OR _op = 'D')) OVER ({w3}) AS _next",
    ).selectExpr(
        "*",
        "_live AND _op != 'D' AND (_next IS NULL OR _next.closes) AS _vlast",
        f"IF(_next IS NOT NULL, named_struct('s', _next.s, 'ts', _next.ts), {after_t}) AS _end",
    ).selectExpr("*", "_vlast AND NOT (_target AND _end IS NULL) AS _version")
    return ev.where("_version OR _is_last").selectExpr(
        *keys, *[f"r{i} AS c{i}" for i in range(n)],
        "CASE WHEN _version THEN IF(_vopen.t, 'update', 'insert') END AS _kind",
        "_vopen.ts AS _start_at", "_vopen.s AS _start_seq", "_end.ts AS _end_at", "_end.s AS _end_seq",
        "_seq AS _cdc_seq", "_op AS _cdc_op", "_op_ts AS _cdc_op_ts",
        *[f"CAST(IF(_is_last, _n{c}, 0) AS BIGINT) AS {c}" for c in _COUNTS],
        "_is_last AND coalesce(_key_pku, false) AS _pku",
        "CASE WHEN _is_last AND _newest._op = 'D' THEN _newest._seq END AS _tomb_seq",
        "IF(_is_last, _by_file, NULL) AS _by_file",
    )


# -- prepare and commit ----------------------------------------------------------------------------


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


def _layout(shape: TableShape, inferred: dict[str, T.DataType]) -> tuple[Layout, T.StructType]:
    """The table's layout and new columns, as ``prepare.prepare_table`` builds them."""
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


def _known(
    spark: SparkSession, engine: DeltaRsEngine, target: str, table: str, layout: Layout, *, exists: bool,
    min_seq: str | None,
) -> tuple[DataFrame | None, DataFrame | None]:
    """Per key the seq the history reflects (``k{j}``, ``_stored_seq``: any version's last event or
    end, or the key's tombstone), or None when the batch is newer than everything; and the open
    versions with positional names (None without a table)."""
    path, stones = table_path(target, table), tombstone_path(target, table)
    keys = [F.col(f"`{k}`").alias(f"k{j}") for j, k in enumerate(layout.keys)]
    bounds = [engine.max_stat(path, "_cdc_seq"), engine.max_stat(path, "_cdc_end_seq"), engine.max_stat(stones, "_cdc_seq")]
    need = min_seq is None or any(b is None for b in bounds) or min_seq <= max(b for b in bounds if b is not None)
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
    spark: SparkSession, engine: DeltaRsEngine, settings: ApplySettings, target: str, table: str,
    prof: dict, shape: TableShape, inferred: dict[str, T.DataType], events: DataFrame,
) -> tuple[HistoryPrepared, DataFrame | None]:
    """Fold one history table's events into versions (collected as Arrow) and count what was left
    out; also returns the records that did not fit (for the quarantine), or None."""
    from lakecdc._pkhistory import replay_pk_keys
    from lakecdc.prepare import raise_abend

    path = table_path(target, table)
    mine = events.where((F.col("table") == table) & F.col("_error").isNull() & F.col("op").isNotNull())
    layout, new_fields = _layout(shape, inferred)
    tracked = tracked_columns(settings, table, layout)
    watermark = truncate_watermark(engine, target, table)
    truncates, late_truncates = _truncates(mine, prof, watermark)
    stored, open_rows = _known(spark, engine, target, table, layout, exists=shape.exists, min_seq=prof["min_seq"])
    marked = drop_stale(widen(mine, layout), layout, stored, watermark)
    usable = marked.where(F.col("_op") != "T")
    out = fold_history(usable, layout, open_rows=open_rows, truncates=truncates, tracked=tracked).toArrow()
    counts = {name: int(pc.sum(out.column(name)).as_py() or 0) for name in _COUNTS}
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


def commit_history(
    engine: DeltaRsEngine, settings: ApplySettings, target: str, prep: HistoryPrepared, *, run_id: int, now: dt.datetime,
) -> TableSummary:
    """MERGE one history table's versions exactly once (the run's app transaction), then record its
    tombstones and truncate mark, as the current-state commit does."""
    from lakecdc.prepare import retry_conflicts

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
