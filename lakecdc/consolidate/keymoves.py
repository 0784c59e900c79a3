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

from dataclasses import dataclass
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
    from pyspark.sql import Column, DataFrame

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
    keys = layout.key_cols
    none = F.lit(None)

    def stand_ins(df: DataFrame, kind: str, seq: str, row: bool) -> DataFrame:
        """The touched keys' target rows (kind ``R``, every column present) or stored seqs (``S``)."""
        return df.join(touched.select(*keys), keys, "left_semi").select(
            F.lit(kind).alias("_kind"), *keys, *[none.alias(f"n{j}") for j in range(nk)],
            none.cast("string").alias("_op"), F.col(seq).alias("_seq"),
            none.cast("timestamp").alias("_op_ts"), F.lit(False).alias("_pku"), *[none.alias(c) for c in ARRIVAL],
            *[x for i in range(n) for x in ((F.col(f"c{i}") if row else none).alias(f"a{i}"), F.lit(row).alias(f"p{i}"),
                                             none.alias(f"b{i}"), F.lit(False).alias(f"q{i}"))],
        )

    parts = [gathered_events(events, layout)]
    if target_rows is not None:
        parts.append(stand_ins(target_rows, "R", "_cdc_seq", True))
    if stored is not None:
        parts.append(stand_ins(stored, "S", "_stored_seq", False))
    allrows = parts[0]
    for p in parts[1:]:
        allrows = allrows.unionByName(p, allowMissingColumns=False)
    schema = net_schema(layout)

    def run(tbl: pa.Table) -> pa.Table:
        return replay(tbl, n_columns=n, n_keys=nk, arrow_schema=_arrow(schema))

    return allrows.withColumn("_group", F.lit(table)).groupBy("_group").applyInArrow(run, schema)


def gathered_events(events: DataFrame, layout: Layout, *extra: Column) -> DataFrame:
    """``events`` (:func:`key_move_events`) as the replay's rows of kind ``E``: the key, the new key
    ``n{j}``, op, seq, time, ``_pku``, arrival and per column ``a{i}``, ``p{i}``, ``b{i}``, ``q{i}``
    (the typed before value, read from the raw before image), then the ``extra`` columns."""
    n, nk = len(layout.columns), len(layout.keys)
    typed = events.drop(*[c for i in range(n) for c in (f"b{i}", f"q{i}") if c in events.columns])
    typed = typed.selectExpr("*", *before_columns(layout))
    return typed.select(
        F.lit("E").alias("_kind"), *layout.key_cols, *[f"n{j}" for j in range(nk)], "_op", "_seq", "_op_ts",
        "_pku", *ARRIVAL, *[f"{p}{i}" for i in range(n) for p in ("a", "p", "b", "q")], *extra,
    )


def _arrow(schema: Any) -> pa.Schema:
    return arrow_schema(schema)


def arrival_key(value: Any) -> tuple[int, Any]:
    """An arrival column's value as a sort key (numbers as numbers; a missing one first)."""
    return (0, "") if value is None else (1, value)


def key_of(r: dict[str, Any], prefix: str, n_keys: int) -> Key:
    """A gathered row's key: its ``k{j}`` (``prefix`` ``k``) or an event's new key ``n{j}``."""
    return tuple(r[f"{prefix}{j}"] for j in range(n_keys))


@dataclass(frozen=True)
class Change:
    """One gathered event (``E``) as the replays apply it."""

    seq: str
    op: str
    op_ts: Any
    #: a primary-key update: the row moves from ``key`` to ``new_key``
    pku: bool
    key: Key
    new_key: Key
    n_columns: int
    #: the values present in the after and before images, by column position
    after: dict[int, Any]
    before: dict[int, Any]
    #: what the event says: two events of equal seq and equal signature are copies of one record
    sig: Any

    @classmethod
    def read(cls, e: dict[str, Any], n_columns: int, n_keys: int) -> Change:
        """The event of gathered row ``e``."""
        after = {i: e[f"a{i}"] for i in range(n_columns) if e[f"p{i}"]}
        before = {i: e[f"b{i}"] for i in range(n_columns) if e[f"q{i}"]}
        return cls(
            seq=e["_seq"], op=e["_op"], op_ts=e["_op_ts"], pku=e["_pku"],
            key=key_of(e, "k", n_keys), new_key=key_of(e, "n", n_keys), n_columns=n_columns,
            after=after, before=before,
            sig=(e["_op"], e["_pku"], tuple(sorted(after.items())), tuple(sorted(before.items()))),
        )

    def row(self, old: list[Any] | None) -> list[Any]:
        """The key's row after this insert or update: the after image over the key's row ``old``;
        with no row, an update takes the columns its after image lacks from its before image
        (an update of an absent row) and an insert leaves them NULL."""
        if old is not None:
            return [self.after.get(i, old[i]) for i in range(self.n_columns)]
        if self.op == "U":
            return [self.after.get(i, self.before.get(i)) for i in range(self.n_columns)]
        return [self.after.get(i) for i in range(self.n_columns)]

    def moved_row(self, old: list[Any] | None) -> list[Any]:
        """The new key's row after this key update: the after image, then the before image, then
        the old key's row ``old`` (None: NULL)."""
        return [
            self.after.get(i, self.before.get(i, old[i] if old is not None else None)) for i in range(self.n_columns)
        ]


class Applied:
    """Per key, the seq that its row reflects (the target's row, its tombstone, or this batch's
    events so far) and the signature of this batch's event that set it: an event of equal seq comes
    later in the order (seq, arrival) and applies, unless it is an exact copy of it (a replay)."""

    def __init__(self) -> None:
        self.seq: dict[Key, str] = {}
        self.mine: dict[Key, Any] = {}

    def stored(self, k: Key, seq: str) -> None:
        """Key ``k`` has a stored row or tombstone of seq ``seq``."""
        self.seq[k] = max(self.seq.get(k, ""), seq)

    def newer(self, k: Key, seq: str, sig: Any) -> bool:
        """Whether an event of seq ``seq`` and signature ``sig`` changes key ``k``."""
        if k not in self.seq or seq > self.seq[k]:
            return True
        return seq == self.seq[k] and k in self.mine and self.mine[k] != sig

    def apply(self, k: Key, seq: str, sig: Any) -> None:
        """An event of seq ``seq`` and signature ``sig`` of this batch changed key ``k``."""
        self.seq[k] = seq
        self.mine[k] = sig

    def forget(self, k: Key) -> None:
        """Key ``k`` is absent now (a truncate removed it): any later event applies."""
        self.seq.pop(k, None)
        self.mine.pop(k, None)


class _NetReplay:
    """The touched keys' rows and counts while :func:`replay` applies their events in order."""

    def __init__(self, n_columns: int) -> None:
        self.n = n_columns
        self.applied = Applied()
        self.rows: dict[Key, list[Any]] = {}
        self.last_op: dict[Key, str] = {}
        self.op_ts: dict[Key, Any] = {}
        self.events: dict[Key, int] = {}
        self.dups: dict[Key, int] = {}
        #: the keys in the order they were first met
        self.touched: list[Key] = []

    def touch(self, k: Key) -> None:
        """Count key ``k`` among the touched keys (from zero events)."""
        if k not in self.events:
            self.events[k] = 0
            self.dups[k] = 0
            self.touched.append(k)

    def apply(self, e: Change) -> None:
        """Apply event ``e``: count it, and unless it is not newer than its key, change the key's
        row (a delete or a key update removes it; a key update builds the new key's row)."""
        k = e.key
        self.touch(k)
        self.events[k] += 1
        if not self.applied.newer(k, e.seq, e.sig):
            self.dups[k] += 1
            return
        old = self.rows.get(k)
        self.applied.apply(k, e.seq, e.sig)
        if e.op == "D":
            self.rows.pop(k, None)
        elif e.pku:
            self.rows.pop(k, None)
            self._move(e, old)
        else:
            self.rows[k] = e.row(old)
        self.last_op[k], self.op_ts[k] = "D" if e.pku else e.op, e.op_ts

    def _move(self, e: Change, old: list[Any] | None) -> None:
        """Build the new key's row of key update ``e`` from the old key's row ``old``, unless the
        new key already reflects something newer (then only the old row goes)."""
        self.touch(e.new_key)
        if self.applied.newer(e.new_key, e.seq, object()):
            self.rows[e.new_key] = e.moved_row(old)
            self.applied.apply(e.new_key, e.seq, ("moved", e.sig))
            self.last_op[e.new_key], self.op_ts[e.new_key] = "U", e.op_ts

    def table(self, n_keys: int, arrow_schema: pa.Schema) -> pa.Table:
        """The net actions of the touched keys (:func:`~lakecdc.consolidate.fold.net_schema`): every
        column set; keys whose every event was stale are left out."""
        out: dict[str, list[Any]] = {f.name: [] for f in arrow_schema}
        for k in self.touched:
            if k not in self.last_op:
                continue  # every event of this key was stale: nothing to write
            for j in range(n_keys):
                out[f"k{j}"].append(k[j])
            values = self.rows.get(k, [None] * self.n)
            for i in range(self.n):
                out[f"c{i}"].append(values[i])
                out[f"u{i}"].append(True)
            out["_action"].append("upsert" if k in self.rows else "delete")
            out["_cdc_seq"].append(self.applied.seq[k])
            out["_cdc_op"].append(self.last_op[k])
            out["_cdc_op_ts"].append(self.op_ts[k])
            out["_events"].append(self.events[k])
            out["_dups"].append(self.dups[k])
            for name, value in (("_stale", 0), ("_errors", 0), ("_pku", False), ("_min_seq", None)):
                out[name].append(value)
            out["_by_file"].append(None)  # (counted by the first fold)
        return pa.Table.from_pydict(out, schema=arrow_schema)


def replay(tbl: pa.Table, *, n_columns: int, n_keys: int, arrow_schema: pa.Schema) -> pa.Table:
    """Apply one table's gathered rows (``R``), tombstones (``S``) and events (``E``) in order."""
    recs = tbl.to_pylist()
    state = _NetReplay(n_columns)
    for r in recs:
        if r["_kind"] == "R":
            state.rows[key_of(r, "k", n_keys)] = [r[f"a{i}"] for i in range(n_columns)]
        if r["_kind"] in ("R", "S"):
            state.applied.stored(key_of(r, "k", n_keys), r["_seq"])
    # (seq, arrival): records whose vendor positions tie apply in the order they were written
    evs = sorted((r for r in recs if r["_kind"] == "E"), key=lambda r: (r["_seq"], *(arrival_key(r[c]) for c in ARRIVAL)))
    for e in evs:
        state.apply(Change.read(e, n_columns, n_keys))
    return state.table(n_keys, arrow_schema)
