"""Per-file counts of the folds: how many events each input file gave a table, and how many of
them were duplicate or late, kept in the folds' own window (no other shuffle or sort)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from lakecdc.decode.files.reread import source_of

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


#: Type of the ``_by_file`` column of :func:`fold` and the history fold: per key, one entry per
#: run of its events (in the fold's order) read from one file: that file (as read, maybe a staged
#: copy), how many events the run holds and how many of them were duplicate or late.
BY_FILE = T.ArrayType(T.StructType([
    T.StructField("file", T.StringType()), T.StructField("events", T.LongType()), T.StructField("late", T.LongType()),
]))


def by_file(ev: DataFrame, over: str, whole: str, *, late: str, counted: str = "true") -> DataFrame:
    """``ev`` (one row per event, windowed ``over`` per key) with ``_by_file`` (:data:`BY_FILE`):
    the key's events and duplicate or late events per file they were read from, computed in the
    fold's own window (running sums over its order, no other shuffle or sort). ``late`` and
    ``counted`` are SQL over the rows: the event was duplicate or late; the row is an event (not
    a stand-in for a stored row). The caller sums the entries per file over the keys
    (:func:`late_by_file`)."""
    run = f"({over} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)"
    ev = ev.selectExpr(
        "*",
        f"NOT (lag(_file) OVER ({over}) <=> _file) AS _rs",
        f"NOT (lead(_file, 1, '') OVER ({over}) <=> _file) AS _re",
        f"sum(CAST({counted} AS BIGINT)) OVER {run} AS _cn",
        f"sum(CAST({late} AS BIGINT)) OVER {run} AS _cl",
        f"CAST({counted} AS BIGINT) AS _c1", f"CAST({late} AS BIGINT) AS _l1",
    )
    ev = ev.selectExpr(
        "*",
        f"max(CASE WHEN _rs THEN _cn - _c1 END) OVER {run} AS _cn0",
        f"max(CASE WHEN _rs THEN _cl - _l1 END) OVER {run} AS _cl0",
    )
    return ev.selectExpr(
        "*",
        "collect_list(CASE WHEN _re AND _file IS NOT NULL AND _cn > _cn0 THEN named_struct("
        f"'file', _file, 'events', _cn - _cn0, 'late', _cl - _cl0) END) OVER {whole} AS _by_file",
    ).drop("_rs", "_re", "_cn", "_cl", "_c1", "_l1", "_cn0", "_cl0")


def late_by_file(net: pa.Table, one_file: str | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """Per file (the input file, not a staged copy), the events and the duplicate or late events
    of a fold's collected output (its ``_by_file`` column, see :func:`by_file`). ``one_file``:
    the file every event was read from (a fold made with ``one_file``): its totals say it."""
    if one_file is not None and net.num_rows:
        def total(name: str) -> int:
            return int(pc.sum(net.column(name)).as_py() or 0)

        replayed = total("_dups") + total("_stale")
        return {one_file: total("_events")}, ({one_file: replayed} if replayed else {})
    if "_by_file" not in net.column_names or not net.num_rows:
        return {}, {}
    flat = pc.list_flatten(net.column("_by_file"))
    if not len(flat):
        return {}, {}
    entries = pa.table({"file": pc.struct_field(flat, "file"), "events": pc.struct_field(flat, "events"),
                        "late": pc.struct_field(flat, "late")})
    return per_input_file(entries.group_by("file").aggregate([("events", "sum"), ("late", "sum")])
                          .rename_columns(["file", "events", "late"]))


def per_input_file(sums: pa.Table) -> tuple[dict[str, int], dict[str, int]]:
    """``(events, late)`` per input file of ``sums`` (``file``, ``events``, ``late``: one row per
    file read, a staged copy's counts going to the file it was staged from)."""
    events: dict[str, int] = {}
    late: dict[str, int] = {}
    for r in sums.to_pylist():
        f = source_of(r["file"])
        events[f] = events.get(f, 0) + int(r["events"] or 0)
        if r["late"]:
            late[f] = late.get(f, 0) + int(r["late"])
    return events, late
