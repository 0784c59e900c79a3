"""Primary-key updates: the events that move keys, and the keys they touch folded in an executor.

A primary-key update moves a row: the old key is deleted and the new key's row is built from the
after image, then the before image for columns missing in after, then the old row's values for
columns missing in both. The new row therefore depends on another key's state at that moment,
and chains (``k1 -> k2 -> k3``) depend on each other in order. These keys are few; their events,
their target rows and their tombstones are gathered into one group per table and replayed in seq
order by :func:`replay`, which applies exactly the rules of ``semantics.md``. The result has the
same shape as :func:`lakecdc.consolidate.fold.fold`'s, with every column set (the whole row is known).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import functions as F

from lakecdc.changes.events import PkUpdate
from lakecdc.consolidate.fold import (
    ARRIVAL,
    Layout,
    before_columns,
    drop_stale,
    fold,
    net_schema,
    widen,
)
from lakecdc.errors import PrimaryKeyUpdateError
from lakecdc.spark.versions import arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Key = tuple[Any, ...]


def pk_touched(wide: DataFrame, layout: Layout) -> DataFrame:
    """Keys (``k0``...) that are the old or new side of a primary-key update in ``wide``."""
    moved = wide.where("_pku")
    old = moved.select(*layout.key_cols)
    new = moved.select(*[F.col(f"n{j}").alias(f"k{j}") for j in range(len(layout.keys))])
    return old.unionByName(new).distinct()


def key_move_events(mine: DataFrame, layout: Layout, stored: DataFrame | None, watermark: str | None) -> DataFrame:
    """A batch's usable events widened for the primary-key replay (every after value and the
    before image; see :func:`widen`), stale events and truncates left out, computed **once**.

    The replay reads these events several times (the keys a key change touches, a join back to
    them, the fold of the others, a count), each query planned over the decoder's whole plan:
    for a decoder of wide projections (Qlik's masks and versions) planning alone took most of a
    minute, and the events were decoded again per query. A local checkpoint decodes them once and
    cuts the lineage; the queries after it plan over a scan of the stored rows (memory, spilling
    to disk), a few events or millions alike.
    """
    full = drop_stale(widen(mine, layout, full=True), layout, stored, watermark).where(F.col("_op") != "T")
    return full.where(F.col("_error").isNull() & ~F.col("_stale")).localCheckpoint(eager=True)


def fold_with_key_moves(
    wide: DataFrame,
    layout: Layout,
    *,
    pk_update: PkUpdate,
    table: str,
    target_rows: DataFrame | None = None,
    stored: DataFrame | None = None,
) -> DataFrame:
    """Net actions for a batch that holds primary-key updates (see :func:`fold`).

    Keys untouched by any key change are folded by :func:`fold`; the others, with their target
    rows (``k{j}``, ``c{i}``, ``_cdc_seq``) and stored seqs (``k{j}``, ``_stored_seq``), are
    replayed in order by :func:`fold_pk_keys`. ``wide`` must hold usable events only.
    """
    touched = pk_touched(wide, layout).withColumn("_touched", F.lit(True))
    marked = wide.join(touched, layout.key_cols, "left")
    simple = marked.where(F.col("_touched").isNull()).drop("_touched")
    moved = marked.where(F.col("_touched").isNotNull()).drop("_touched")
    return fold(simple, layout).unionByName(
        fold_pk_keys(moved, layout, touched, target_rows=target_rows, stored=stored, pk_update=pk_update, table=table)
    )


def raise_abend(table: str, ok: DataFrame, layout: Layout) -> None:
    """Raise :class:`~lakecdc.errors.PrimaryKeyUpdateError` for the first key change among ``ok``
    (:func:`key_move_events`), when there is one: the table's ``pk_update`` is ``abend``."""
    first = ok.where("_pku").orderBy("_seq").limit(1).collect()
    if not first:
        return
    r = first[0]
    nk = len(layout.keys)
    old = tuple(r[f"k{j}"] for j in range(nk))
    new = tuple(r[f"n{j}"] for j in range(nk))
    raise PrimaryKeyUpdateError(table, old, new, r["_pos"])


def fold_pk_keys(
    events: DataFrame,
    layout: Layout,
    touched: DataFrame,
    *,
    target_rows: DataFrame | None,
    stored: DataFrame | None,
    pk_update: str,
    table: str,
) -> DataFrame:
    """Net actions for the keys in ``touched`` (see the module docstring)."""
    n = len(layout.columns)
    nk = len(layout.keys)
    typed = events.drop(*[c for i in range(n) for c in (f"b{i}", f"q{i}") if c in events.columns])
    typed = typed.selectExpr("*", *before_columns(layout))
    base = typed.select(
        F.lit("E").alias("_kind"), *layout.key_cols, *[f"n{j}" for j in range(nk)], "_op", "_seq", "_op_ts",
        "_pku", *ARRIVAL, *[f"{p}{i}" for i in range(n) for p in ("a", "p", "b", "q")],
    )
    parts = [base]
    if target_rows is not None:
        rows = target_rows.join(touched.select(*layout.key_cols), layout.key_cols, "left_semi")
        parts.append(
            rows.select(
                F.lit("R").alias("_kind"), *layout.key_cols, *[F.lit(None).alias(f"n{j}") for j in range(nk)],
                F.lit(None).cast("string").alias("_op"), F.col("_cdc_seq").alias("_seq"),
                F.lit(None).cast("timestamp").alias("_op_ts"), F.lit(False).alias("_pku"),
                *[F.lit(None).alias(c) for c in ARRIVAL],
                *[x for i in range(n) for x in (F.col(f"c{i}").alias(f"a{i}"), F.lit(True).alias(f"p{i}"),
                                                 F.lit(None).alias(f"b{i}"), F.lit(False).alias(f"q{i}"))],
            )
        )
    if stored is not None:
        seqs = stored.join(touched.select(*layout.key_cols), layout.key_cols, "left_semi")
        parts.append(
            seqs.select(
                F.lit("S").alias("_kind"), *layout.key_cols, *[F.lit(None).alias(f"n{j}") for j in range(nk)],
                F.lit(None).cast("string").alias("_op"), F.col("_stored_seq").alias("_seq"),
                F.lit(None).cast("timestamp").alias("_op_ts"), F.lit(False).alias("_pku"),
                *[F.lit(None).alias(c) for c in ARRIVAL],
                *[x for i in range(n) for x in (F.lit(None).alias(f"a{i}"), F.lit(False).alias(f"p{i}"),
                                                 F.lit(None).alias(f"b{i}"), F.lit(False).alias(f"q{i}"))],
            )
        )
    allrows = parts[0]
    for p in parts[1:]:
        allrows = allrows.unionByName(p, allowMissingColumns=False)
    schema = net_schema(layout)

    def run(tbl: pa.Table) -> pa.Table:
        return replay(tbl, n_columns=n, n_keys=nk, arrow_schema=_arrow(schema))

    return allrows.withColumn("_group", F.lit(table)).groupBy("_group").applyInArrow(run, schema)


def _arrow(schema: Any) -> pa.Schema:
    return arrow_schema(schema)


def arrival_key(value: Any) -> tuple[int, Any]:
    """An arrival column's value as a sort key (numbers as numbers; a missing one first)."""
    return (0, "") if value is None else (1, value)


def replay(tbl: pa.Table, *, n_columns: int, n_keys: int, arrow_schema: pa.Schema) -> pa.Table:
    """Apply one table's gathered rows (``R``), tombstones (``S``) and events (``E``) in order."""
    recs = tbl.to_pylist()
    rows: dict[Key, list[Any]] = {}
    seq_of: dict[Key, str] = {}
    last_op: dict[Key, str] = {}
    op_ts: dict[Key, Any] = {}
    events: dict[Key, int] = {}
    dups: dict[Key, int] = {}
    touched: list[Key] = []

    def key_of(r: dict[str, Any], prefix: str) -> Key:
        return tuple(r[f"{prefix}{j}"] for j in range(n_keys))

    def touch(k: Key) -> None:
        if k not in events:
            events[k] = 0
            dups[k] = 0
            touched.append(k)

    for r in recs:
        if r["_kind"] == "R":
            k = key_of(r, "k")
            rows[k] = [r[f"a{i}"] for i in range(n_columns)]
            seq_of[k] = max(seq_of.get(k, ""), r["_seq"])
        elif r["_kind"] == "S":
            k = key_of(r, "k")
            seq_of[k] = max(seq_of.get(k, ""), r["_seq"])
    # (seq, arrival): records whose vendor positions tie apply in the order they were written
    evs = sorted((r for r in recs if r["_kind"] == "E"), key=lambda r: (r["_seq"], *(arrival_key(r[c]) for c in ARRIVAL)))
    # per key, the event of this run that set seq_of (its op and images): an event of equal seq
    # comes later in the order and applies, unless it is an exact copy (a replay)
    mine: dict[Key, Any] = {}

    def newer(k: Key, seq: str, sig: Any) -> bool:
        if k not in seq_of or seq > seq_of[k]:
            return True
        return seq == seq_of[k] and k in mine and mine[k] != sig

    for e in evs:
        k = key_of(e, "k")
        touch(k)
        events[k] += 1
        op = e["_op"]
        after = {i: e[f"a{i}"] for i in range(n_columns) if e[f"p{i}"]}
        before = {i: e[f"b{i}"] for i in range(n_columns) if e[f"q{i}"]}
        sig = (op, e["_pku"], tuple(sorted(after.items())), tuple(sorted(before.items())))
        if not newer(k, e["_seq"], sig):
            dups[k] += 1
            continue
        old = rows.get(k)
        mine[k] = sig
        if op == "D":
            rows.pop(k, None)
        elif e["_pku"]:
            rows.pop(k, None)
            new_key = key_of(e, "n")
            touch(new_key)
            if not newer(new_key, e["_seq"], object()):
                pass  # the new key already reflects something newer: only the old row goes
            else:
                built = [after.get(i, before.get(i, old[i] if old is not None else None)) for i in range(n_columns)]
                rows[new_key] = built
                mine[new_key] = ("moved", sig)
                seq_of[new_key], last_op[new_key], op_ts[new_key] = e["_seq"], "U", e["_op_ts"]
        elif old is not None:
            rows[k] = [after.get(i, old[i]) for i in range(n_columns)]
        elif op == "U":
            rows[k] = [after.get(i, before.get(i)) for i in range(n_columns)]
        else:
            rows[k] = [after.get(i) for i in range(n_columns)]
        seq_of[k], last_op[k], op_ts[k] = e["_seq"], "D" if e["_pku"] else op, e["_op_ts"]

    out: dict[str, list[Any]] = {f.name: [] for f in arrow_schema}
    for k in touched:
        if k not in last_op:
            continue  # every event of this key was stale: nothing to write
        live = k in rows
        for j in range(n_keys):
            out[f"k{j}"].append(k[j])
        values = rows.get(k, [None] * n_columns)
        for i in range(n_columns):
            out[f"c{i}"].append(values[i])
            out[f"u{i}"].append(True)
        out["_action"].append("upsert" if live else "delete")
        out["_cdc_seq"].append(seq_of[k])
        out["_cdc_op"].append(last_op[k])
        out["_cdc_op_ts"].append(op_ts[k])
        out["_events"].append(events[k])
        out["_dups"].append(dups[k])
        out["_stale"].append(0)
        out["_errors"].append(0)
        out["_pku"].append(False)
        out["_min_seq"].append(None)
        out["_by_file"].append(None)  # (counted by the first fold)
    return pa.Table.from_pydict(out, schema=arrow_schema)
