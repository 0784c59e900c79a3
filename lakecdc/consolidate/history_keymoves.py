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

from lakecdc.consolidate.fold import ARRIVAL, Layout, before_columns
from lakecdc.consolidate.history import version_schema
from lakecdc.consolidate.keymoves import arrival_key
from lakecdc.spark.versions import arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Key = tuple[Any, ...]
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
    typed = events.drop(*[c for i in range(n) for c in (f"b{i}", f"q{i}") if c in events.columns])
    typed = typed.selectExpr("*", *before_columns(layout))
    none = F.lit(None)
    base = typed.select(
        F.lit("E").alias("_kind"), *layout.key_cols, *[f"n{j}" for j in range(nk)], "_op", "_seq", "_op_ts",
        "_pku", *ARRIVAL, *[f"{p}{i}" for i in range(n) for p in ("a", "p", "b", "q")],
        none.cast("string").alias("_t_start_seq"), none.cast("timestamp").alias("_t_start_at"),
    )
    parts = [base]

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

    def start(self, k: Key, row: list[Any], e: dict[str, Any]) -> None:
        self.open[k] = {"row": row, "start_seq": e["_seq"], "start_at": e["_op_ts"], "seq": e["_seq"], "op": e["_op"],
                        "op_ts": e["_op_ts"], "target": False, "changed": True}

    def close(self, k: Key, seq: str, at: dt.datetime | None) -> None:
        v = self.open.pop(k, None)
        if v is not None:
            v["end_seq"], v["end_at"] = seq, at
            self.done.append((k, v))

    def change(self, k: Key, row: list[Any], e: dict[str, Any]) -> None:
        """The key's row becomes ``row``: in place, or a new version when a tracked column differs."""
        v = self.open[k]
        if any(v["row"][i] != row[i] for i in self.tracked):
            self.close(k, e["_seq"], e["_op_ts"])
            self.start(k, row, e)
        else:
            v.update(row=row, seq=e["_seq"], op=e["_op"], op_ts=e["_op_ts"], changed=True)


def replay(
    tbl: pa.Table, *, n_columns: int, n_keys: int, tracked: frozenset[int],
    truncates: Sequence[tuple[str, dt.datetime, tuple[Any, ...]]], arrow_schema: pa.Schema,
) -> pa.Table:
    """Apply one table's gathered open versions (``R``), stored seqs (``S``), events (``E``) and
    truncates (seq, op_ts, arrival) in the order (seq, arrival); return the versions made or
    changed and the tombstones."""
    recs = tbl.to_pylist()
    versions = _Versions(n_columns, tracked)
    seq_of: dict[Key, str] = {}
    tomb: dict[Key, str] = {}

    def key_of(r: dict[str, Any], prefix: str) -> Key:
        return tuple(r[f"{prefix}{j}"] for j in range(n_keys))

    seen: dict[Key, None] = {}
    for r in recs:
        k = key_of(r, "k")
        seen[k] = None
        if r["_kind"] == "E" and r["_pku"]:
            seen[key_of(r, "n")] = None
        if r["_kind"] == "R":
            versions.open[k] = {"row": [r[f"a{i}"] for i in range(n_columns)], "start_seq": r["_t_start_seq"],
                                "start_at": r["_t_start_at"], "seq": r["_seq"], "op": r["_op"], "op_ts": r["_op_ts"],
                                "target": True, "changed": False}
        if r["_kind"] in ("R", "S"):
            seq_of[k] = max(seq_of.get(k, ""), r["_seq"])
    timeline: list[tuple[str, tuple[Any, ...], Any]] = [(s, at, ts) for s, ts, at in truncates]
    timeline += [(r["_seq"], tuple(r[c] for c in ARRIVAL), r) for r in recs if r["_kind"] == "E"]
    # (seq, arrival): events and truncates whose vendor positions tie replay in the order they were written
    timeline.sort(key=lambda x: (x[0], *map(arrival_key, x[1])))
    # per key, the event of this batch that set seq_of: an event of equal seq comes later and
    # applies, unless it is an exact copy of it (a replay)
    mine: dict[Key, Any] = {}

    def newer(k: Key, seq: str, sig: Any) -> bool:
        if k not in seq_of or seq > seq_of[k]:
            return True
        return seq == seq_of[k] and k in mine and mine[k] != sig

    for seq, _, item in timeline:
        if not isinstance(item, dict):  # a truncate closes every version it comes after
            # (one an earlier run stored at the truncate's seq stays: across runs the seq decides)
            for k in [k for k, v in versions.open.items() if v["seq"] < seq or (v["seq"] == seq and v["changed"])]:
                versions.close(k, seq, item)
                # the key is absent now: an event of equal seq after the truncate is no replay
                seq_of.pop(k, None)
                mine.pop(k, None)
            continue
        e = item
        k = key_of(e, "k")
        after = {i: e[f"a{i}"] for i in range(n_columns) if e[f"p{i}"]}
        before = {i: e[f"b{i}"] for i in range(n_columns) if e[f"q{i}"]}
        sig = (e["_op"], e["_pku"], tuple(sorted(after.items())), tuple(sorted(before.items())))
        if not newer(k, seq, sig):
            continue  # a duplicate (or made stale by an earlier event of this batch)
        old = versions.row(k)
        seq_of[k] = seq
        mine[k] = sig
        tomb.pop(k, None)
        if e["_op"] == "D" or e["_pku"]:
            versions.close(k, seq, e["_op_ts"])
            tomb[k] = seq
            if not e["_pku"]:
                continue
            new = key_of(e, "n")
            if not newer(new, seq, object()):
                continue  # the new key already reflects something newer: only the old key closes
            built = [after.get(i, before.get(i, old[i] if old is not None else None)) for i in range(n_columns)]
            versions.close(new, seq, e["_op_ts"])
            versions.start(new, built, e)
            seq_of[new] = seq
            mine[new] = ("moved", sig)
            tomb.pop(new, None)
        elif old is not None:
            versions.change(k, [after.get(i, old[i]) for i in range(n_columns)], e)
        elif e["_op"] == "U":
            versions.start(k, [after.get(i, before.get(i)) for i in range(n_columns)], e)
        else:
            versions.start(k, [after.get(i) for i in range(n_columns)], e)

    out: dict[str, list[Any]] = {f.name: [] for f in arrow_schema}

    def emit(k: Key, v: dict[str, Any] | None, tomb_seq: str | None) -> None:
        for j in range(n_keys):
            out[f"k{j}"].append(k[j])
        values = v["row"] if v is not None else [None] * n_columns
        for i in range(n_columns):
            out[f"c{i}"].append(values[i])
        kind = None if v is None else ("update" if v["target"] else "insert")
        out["_kind"].append(kind)
        for name, field in (("_start_at", "start_at"), ("_start_seq", "start_seq"), ("_end_at", "end_at"),
                            ("_end_seq", "end_seq"), ("_cdc_seq", "seq"), ("_cdc_op", "op"), ("_cdc_op_ts", "op_ts")):
            out[name].append(v.get(field) if v is not None else None)
        for name in ("_events", "_dups", "_stale", "_errors"):
            out[name].append(0)
        out["_pku"].append(False)
        out["_tomb_seq"].append(tomb_seq)
        out["_by_file"].append(None)  # (counted by the first fold)

    for k in seen:  # every key replayed here, so that the caller can drop the first fold's rows of them
        emit(k, None, None)
    for k, v in versions.done:
        emit(k, v, None)
    for k, v in versions.open.items():
        if v["changed"]:
            emit(k, v, None)
    for k, seq in tomb.items():
        emit(k, None, seq)
    return pa.Table.from_pydict(out, schema=arrow_schema)
