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
(:mod:`lakecdc.consolidate.history_keymoves`), as the current-state path does. The MERGE is
:class:`lakecdc.merge.history_plan.HistoryPlan`, committed with the run's Delta app transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import sql_string
from lakecdc.config.settings import match_table
from lakecdc.consolidate.files import BY_FILE, by_file
from lakecdc.consolidate.fold import ARRIVAL, Layout, before_sql, fold_inputs, key_window
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakecdc.config.settings import Settings

#: Count columns of the fold's output (non-zero on one row per key).
COUNT_COLUMNS = ("_events", "_dups", "_stale", "_errors")


def tracked_columns(settings: Settings, table: str, layout: Layout) -> frozenset[int]:
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
        *[T.StructField(c, T.LongType()) for c in COUNT_COLUMNS],
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
    """One table's events (from :func:`~lakecdc.consolidate.fold.widen` and
    :func:`~lakecdc.consolidate.fold.drop_stale`, truncates removed) as the versions they make.

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
    n = len(layout.columns)
    ev = marked.selectExpr(
        *fold_inputs(marked, layout),
        "false AS _target", "CAST(NULL AS STRING) AS _t_start_seq", "CAST(NULL AS TIMESTAMP) AS _t_start_at",
    )
    if open_rows is not None:
        ev = ev.unionByName(_pseudo_events(open_rows, ev, layout))
    before_t, after_t = _truncate_cases(truncates)
    ev = _key_counts(ev, layout, before_t)
    ev = _segments(ev, layout)
    # per key, live or not, and segment, in the order (seq, arrival)
    w3 = f"PARTITION BY {', '.join(layout.key_cols)}, _live, _seg ORDER BY _seq, {', '.join(ARRIVAL)}"
    run = f"({w3} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    ev = _rows_after(ev, n, w3, run)
    ev = _versions(ev, tracked, w3, run, after_t)
    return ev.where("_version OR _is_last").selectExpr(*_version_sql(layout))


def _key_counts(ev: DataFrame, layout: Layout, before_t: str) -> DataFrame:
    """``ev`` (the events and the open versions' pseudo events) with, per key in the order (seq,
    arrival): ``_tb`` (the batch's last truncate before the event, :func:`_truncate_cases`),
    ``_dup`` (an exact copy, same seq and content, of the usable event just before it, with no
    truncate between them), ``_is_last``, ``_live`` (usable and no copy), and over the key's whole
    partition its counts ``_n_events``... (:data:`COUNT_COLUMNS`), ``_key_pku`` (a live key
    update), ``_newest`` (its newest live event) and ``_by_file``."""
    w1, whole = key_window(layout)
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
    return by_file(ev, w1, whole, late="(_dup AND NOT _target) OR (_stale AND NOT _bad)", counted="NOT _target")


def _segments(ev: DataFrame, layout: Layout) -> DataFrame:
    """``ev`` (:func:`_key_counts`) with ``_seg``: the number of the event's segment among its
    key's live (or its key's other) events in the order (seq, arrival). A delete ends a segment,
    and a truncate between two events starts one."""
    w2 = f"PARTITION BY {', '.join(layout.key_cols)}, _live ORDER BY _seq, {', '.join(ARRIVAL)}"
    return ev.selectExpr(
        "*",
        f"row_number() OVER ({w2}) = 1 OR lag(_op) OVER ({w2}) = 'D' OR NOT (lag(_tb) OVER ({w2}) <=> _tb) AS _seg_start",
    ).selectExpr("*", f"sum(CAST(_seg_start AS INT)) OVER ({w2} ROWS UNBOUNDED PRECEDING) AS _seg")


def _rows_after(ev: DataFrame, n: int, w3: str, run: str) -> DataFrame:
    """``ev`` (:func:`_segments`) with the row after each event in place of its values ``v{i}`` and
    ``p{i}``: per column ``r{i}``, its last present value in the segment (window ``w3``, frame
    ``run`` up to the event), else the segment's base (the open version's row, or the before
    image of an update that starts it, or NULL); and ``_first`` (the segment's first event)."""
    base = ", ".join(f"v{i}" for i in range(n))
    return ev.selectExpr(
        "*", f"row_number() OVER ({w3}) = 1 AS _first",
        f"first(CASE WHEN _op = 'U' AND NOT _target THEN struct({base}) END) OVER {run} AS _base",
        *[f"last(CASE WHEN p{i} AND _op != 'D' THEN struct(v{i} AS v) END, true) OVER {run} AS l{i}" for i in range(n)],
    ).selectExpr(
        *[c for c in ev.columns if not (c[0] in "vp" and c[1:].isdigit())], "_first",
        *[f"IF(l{i} IS NOT NULL, l{i}.v, _base.v{i}) AS r{i}" for i in range(n)],
    )


def _versions(ev: DataFrame, tracked: frozenset[int], w3: str, run: str, after_t: str) -> DataFrame:
    """``ev`` (:func:`_rows_after`) with the versions: ``_chg`` (the event opens a version: it
    starts a segment or changes a tracked column, and is no delete), ``_vopen`` (the open version's
    start: from the target or not, seq and time), ``_end`` (where it ends: the next event that
    closes it, else the first truncate after it, ``after_t``) and ``_version`` (the event is the
    version's last, and the version is new or changed)."""
    diff = " OR ".join(f"NOT (r{i} <=> lag(r{i}) OVER ({w3}))" for i in sorted(tracked)) or "false"
    ev = ev.selectExpr("*", f"_op != 'D' AND (_first OR {diff}) AS _chg")
    return ev.selectExpr(
        "*",
        f"last(CASE WHEN _chg THEN named_struct('t', _target, 's', coalesce(_t_start_seq, _seq), "
        f"'ts', coalesce(_t_start_at, _op_ts)) END, true) OVER {run} AS _vopen",
        f"lead(named_struct('s', _seq, 'ts', _op_ts, 'closes', _chg OR _op = 'D')) OVER ({w3}) AS _next",
    ).selectExpr(
        "*",
        "_live AND _op != 'D' AND (_next IS NULL OR _next.closes) AS _vlast",
        f"IF(_next IS NOT NULL, named_struct('s', _next.s, 'ts', _next.ts), {after_t}) AS _end",
    ).selectExpr("*", "_vlast AND NOT (_target AND _end IS NULL) AS _version")


def _version_sql(layout: Layout) -> list[str]:
    """SQL over the versions (:func:`_versions`) for :func:`fold_history`'s output
    (:func:`version_schema`): a version's row, kind, start, end and last event, and on the key's
    last row its counts, ``_pku``, ``_tomb_seq`` and ``_by_file``."""
    return [
        *layout.key_cols, *[f"r{i} AS c{i}" for i in range(len(layout.columns))],
        "CASE WHEN _version THEN IF(_vopen.t, 'update', 'insert') END AS _kind",
        "_vopen.ts AS _start_at", "_vopen.s AS _start_seq", "_end.ts AS _end_at", "_end.s AS _end_seq",
        "_seq AS _cdc_seq", "_op AS _cdc_op", "_op_ts AS _cdc_op_ts",
        *[f"CAST(IF(_is_last, _n{c}, 0) AS BIGINT) AS {c}" for c in COUNT_COLUMNS],
        "_is_last AND coalesce(_key_pku, false) AS _pku",
        "CASE WHEN _is_last AND _newest._op = 'D' THEN _newest._seq END AS _tomb_seq",
        "IF(_is_last, _by_file, NULL) AS _by_file",
    ]
