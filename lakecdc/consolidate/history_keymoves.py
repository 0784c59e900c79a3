"""History tables: the keys touched by primary-key updates, replayed per table in an executor.

The SCD type 2 counterpart of :mod:`lakecdc.consolidate.keymoves`: a primary-key update closes the old key's
open version and opens one for the new key, built from the after image, then the before image,
then the old key's row; chains (``k1 -> k2 -> k3``) depend on each other in order, so these few
keys, their open versions and their stored seqs are gathered into one group per table and
replayed in seq order, together with the batch's truncates. The output has the shape of
:func:`lakecdc.consolidate.history.fold_history`'s (versions to insert or update, tombstones); the counts
stay those of the first fold, and one row without a version names each key replayed (the first
fold's rows of those keys are replaced).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F

from lakecdc.consolidate.fold import ARRIVAL, Layout
from lakecdc.consolidate.history import version_schema
from lakecdc.consolidate.keymoves import Applied, Change, Key, arrival_key, gathered_events, key_of
from lakecdc.spark.versions import arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def replay_pk_keys(
    events: DataFrame,
    layout: Layout,
    touched: DataFrame,
    *,
    open_rows: DataFrame | None,
    stored: DataFrame | None,
    truncates: Sequence[tuple[str, int, tuple[Any, ...]]],
    tracked: frozenset[int],
    table: str,
) -> DataFrame:
    """Versions for the keys in ``touched`` (see the module docstring)."""
    n, nk = len(layout.columns), len(layout.keys)
    none = F.lit(None)
    start = (none.cast("string").alias("_t_start_seq"), none.cast("timestamp").alias("_t_start_at"))
    parts = [gathered_events(events, layout, *start)]

    def other(df: DataFrame, kind: str, seq: str, row: bool) -> DataFrame:
        return df.join(touched.select(*layout.key_cols), layout.key_cols, "left_semi").select(
            F.lit(kind).alias("_kind"), *layout.key_cols, *[none.alias(f"n{j}") for j in range(nk)],
            (F.col("_cdc_op") if row else none.cast("string")).alias("_op"), F.col(seq).alias("_seq"),
            (F.col("_cdc_op_ts") if row else none.cast("timestamp")).alias("_op_ts"), F.lit(False).alias("_pku"),
            *[none.alias(c) for c in ARRIVAL],
            *[x for i in range(n) for x in ((F.col(f"c{i}") if row else none).alias(f"a{i}"), F.lit(row).alias(f"p{i}"),
                                             none.alias(f"b{i}"), F.lit(False).alias(f"q{i}"))],
            (F.col("_t_start_seq") if row else none.cast("string")).alias("_t_start_seq"),
            (F.col("_t_start_at") if row else none.cast("timestamp")).alias("_t_start_at"),
        )

    if open_rows is not None:
        parts.append(other(open_rows, "R", "_cdc_seq", True))
    if stored is not None:
        parts.append(other(stored, "S", "_stored_seq", False))
    allrows = parts[0]
    for p in parts[1:]:
        allrows = allrows.unionByName(p)
    schema = version_schema(layout)
    marks = [(s, _EPOCH + dt.timedelta(microseconds=us), at) for s, us, at in truncates]

    def run(tbl: pa.Table) -> pa.Table:
        return replay(tbl, n_columns=n, n_keys=nk, tracked=tracked, truncates=marks, arrow_schema=arrow_schema(schema))

    return allrows.withColumn("_group", F.lit(table)).groupBy("_group").applyInArrow(run, schema)


class _Versions:
    """The versions of the touched keys while the replay runs."""

    def __init__(self, n_columns: int, tracked: frozenset[int]) -> None:
        self.n = n_columns
        self.tracked = tracked
        self.open: dict[Key, dict[str, Any]] = {}
        self.done: list[tuple[Key, dict[str, Any]]] = []

    def row(self, k: Key) -> list[Any] | None:
        v = self.open.get(k)
        return v["row"] if v is not None else None

    def start(self, k: Key, row: list[Any], e: Change) -> None:
        self.open[k] = {"row": row, "start_seq": e.seq, "start_at": e.op_ts, "seq": e.seq, "op": e.op,
                        "op_ts": e.op_ts, "target": False, "changed": True}

    def close(self, k: Key, seq: str, at: dt.datetime | None) -> None:
        v = self.open.pop(k, None)
        if v is not None:
            v["end_seq"], v["end_at"] = seq, at
            self.done.append((k, v))

    def change(self, k: Key, row: list[Any], e: Change) -> None:
        """The key's row becomes ``row``: in place, or a new version when a tracked column differs."""
        v = self.open[k]
        if any(v["row"][i] != row[i] for i in self.tracked):
            self.close(k, e.seq, e.op_ts)
            self.start(k, row, e)
        else:
            v.update(row=row, seq=e.seq, op=e.op, op_ts=e.op_ts, changed=True)


class _HistoryReplay:
    """The touched keys' versions and tombstones while :func:`replay` applies their events and the
    batch's truncates in order."""

    def __init__(self, n_columns: int, n_keys: int, tracked: frozenset[int]) -> None:
        self.n, self.nk = n_columns, n_keys
        self.versions = _Versions(n_columns, tracked)
        self.applied = Applied()
        #: per key whose last event is a delete or moved it away, that event's seq
        self.tomb: dict[Key, str] = {}
        #: every key the gathered rows name, in the order met
        self.seen: dict[Key, None] = {}

    def load(self, recs: list[dict[str, Any]]) -> None:
        """Take in the gathered rows: every key named (also an event's new key), the open versions
        (``R``) and the stored seqs (``R``, ``S``)."""
        for r in recs:
            k = key_of(r, "k", self.nk)
            self.seen[k] = None
            if r["_kind"] == "E" and r["_pku"]:
                self.seen[key_of(r, "n", self.nk)] = None
            if r["_kind"] == "R":
                self.versions.open[k] = {
                    "row": [r[f"a{i}"] for i in range(self.n)], "start_seq": r["_t_start_seq"],
                    "start_at": r["_t_start_at"], "seq": r["_seq"], "op": r["_op"], "op_ts": r["_op_ts"],
                    "target": True, "changed": False,
                }
            if r["_kind"] in ("R", "S"):
                self.applied.stored(k, r["_seq"])

    def truncate(self, seq: str, at: dt.datetime) -> None:
        """A truncate of seq ``seq`` at ``at`` closes every version it comes after (one an earlier
        run stored at the truncate's seq stays: across runs the seq decides)."""
        for k in [k for k, v in self.versions.open.items() if v["seq"] < seq or (v["seq"] == seq and v["changed"])]:
            self.versions.close(k, seq, at)
            # the key is absent now: an event of equal seq after the truncate is no replay
            self.applied.forget(k)

    def apply(self, e: Change) -> None:
        """Apply event ``e`` unless it is a duplicate (or made stale by an earlier event of this
        batch): a delete or key update closes the key's version and leaves a tombstone, a key
        update opens the new key's version, an insert or update opens or changes the key's."""
        k = e.key
        if not self.applied.newer(k, e.seq, e.sig):
            return
        old = self.versions.row(k)
        self.applied.apply(k, e.seq, e.sig)
        self.tomb.pop(k, None)
        if e.op == "D" or e.pku:
            self.versions.close(k, e.seq, e.op_ts)
            self.tomb[k] = e.seq
            if e.pku:
                self._move(e, old)
        elif old is not None:
            self.versions.change(k, e.row(old), e)
        else:
            self.versions.start(k, e.row(None), e)

    def _move(self, e: Change, old: list[Any] | None) -> None:
        """Open the new key's version of key update ``e`` from the old key's row ``old`` (closing
        its open one), unless the new key already reflects something newer."""
        new = e.new_key
        if not self.applied.newer(new, e.seq, object()):
            return  # the new key already reflects something newer: only the old key closes
        self.versions.close(new, e.seq, e.op_ts)
        self.versions.start(new, e.moved_row(old), e)
        self.applied.apply(new, e.seq, ("moved", e.sig))
        self.tomb.pop(new, None)

    def table(self, arrow_schema: pa.Schema) -> pa.Table:
        """The output (:func:`~lakecdc.consolidate.history.version_schema`): one row without a
        version per key replayed (so that the caller can drop the first fold's rows of them), the
        closed versions, the open versions made or changed, and the tombstones."""
        out: dict[str, list[Any]] = {f.name: [] for f in arrow_schema}

        def emit(k: Key, v: dict[str, Any] | None, tomb_seq: str | None) -> None:
            for j in range(self.nk):
                out[f"k{j}"].append(k[j])
            values = v["row"] if v is not None else [None] * self.n
            for i in range(self.n):
                out[f"c{i}"].append(values[i])
            out["_kind"].append(None if v is None else ("update" if v["target"] else "insert"))
            for name, field in (("_start_at", "start_at"), ("_start_seq", "start_seq"), ("_end_at", "end_at"),
                                ("_end_seq", "end_seq"), ("_cdc_seq", "seq"), ("_cdc_op", "op"), ("_cdc_op_ts", "op_ts")):
                out[name].append(v.get(field) if v is not None else None)
            for name in ("_events", "_dups", "_stale", "_errors"):
                out[name].append(0)
            out["_pku"].append(False)
            out["_tomb_seq"].append(tomb_seq)
            out["_by_file"].append(None)  # (counted by the first fold)

        for k in self.seen:
            emit(k, None, None)
        for k, v in self.versions.done:
            emit(k, v, None)
        for k, v in self.versions.open.items():
            if v["changed"]:
                emit(k, v, None)
        for k, seq in self.tomb.items():
            emit(k, None, seq)
        return pa.Table.from_pydict(out, schema=arrow_schema)


def replay(
    tbl: pa.Table, *, n_columns: int, n_keys: int, tracked: frozenset[int],
    truncates: Sequence[tuple[str, dt.datetime, tuple[Any, ...]]], arrow_schema: pa.Schema,
) -> pa.Table:
    """Apply one table's gathered open versions (``R``), stored seqs (``S``), events (``E``) and
    truncates (seq, op_ts, arrival) in the order (seq, arrival); return the versions made or
    changed and the tombstones."""
    recs = tbl.to_pylist()
    state = _HistoryReplay(n_columns, n_keys, tracked)
    state.load(recs)
    timeline: list[tuple[str, tuple[Any, ...], Any]] = [(s, at, ts) for s, ts, at in truncates]
    timeline += [(r["_seq"], tuple(r[c] for c in ARRIVAL), r) for r in recs if r["_kind"] == "E"]
    # (seq, arrival): events and truncates whose vendor positions tie replay in the order they were written
    timeline.sort(key=lambda x: (x[0], *map(arrival_key, x[1])))
    for seq, _, item in timeline:
        if isinstance(item, dict):
            state.apply(Change.read(item, n_columns, n_keys))
        else:
            state.truncate(seq, item)
    return state.table(arrow_schema)
