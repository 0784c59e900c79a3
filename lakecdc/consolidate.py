"""Consolidation: one table's change events folded into one net action per key, in Spark.

The batch form of the rules in ``semantics.md``. Events are sorted by ``seq`` and each key's events
are folded into a single row for the MERGE:

* the key's last event is a delete: **delete** (a tombstone is kept for late events);
* a delete followed by later events: **replace**: the row is rebuilt from those events alone;
* otherwise an **upsert** that sets each column present in some after image to its last present
  value and keeps the target's value for the others; if the key has no row yet, the columns never
  present take the first event's before image (an update of an absent row), else NULL.

Everything runs as DataFrame operations (one shuffle by key, one sorted window, one aggregation),
so it scales out on a cluster. Keys touched by a primary-key update depend on other keys' rows
(the new row is completed from the old one, also along chains ``k1 -> k2 -> k3``); those few keys
are folded together per table by :mod:`lakecdc._pkfold` in an executor.

Internal column names are positional (``a3`` = after value of the 4th column) so that any source
column name works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes import PkUpdate
from lakecdc.columns import typed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Origin columns used to break ties between events of equal seq (first delivered wins).
ARRIVAL = ("_file", "_block", "_row")


@dataclass(frozen=True)
class Layout:
    """How a table's columns map to the positional internal names."""

    columns: tuple[str, ...]
    types: tuple[T.DataType, ...]
    keys: tuple[str, ...]
    #: Other spellings of a column seen in the images (Delta column names ignore case).
    aliases: tuple[tuple[str, ...], ...] = ()

    def spellings(self, i: int) -> tuple[str, ...]:
        extra = self.aliases[i] if i < len(self.aliases) else ()
        return (self.columns[i], *extra)

    def index(self, column: str) -> int:
        return self.columns.index(column)

    @property
    def key_index(self) -> tuple[int, ...]:
        return tuple(self.index(k) for k in self.keys)

    @property
    def key_cols(self) -> list[str]:
        return [f"k{j}" for j in range(len(self.keys))]


def widen(events: DataFrame, layout: Layout) -> DataFrame:
    """One table's canonical events with typed, positional columns and an ``_error`` reason.

    Adds per column ``i``: ``a{i}``/``p{i}`` (after value / present) and ``b{i}``/``q{i}``
    (before), per key column ``j``: ``k{j}`` (the event's key) and ``n{j}`` (the after image's key,
    differing from ``k{j}`` only for a primary-key update), and ``_pku`` (is a key update).
    """
    cols: list[Column] = [
        F.col("op").alias("_op"), F.col("seq").alias("_seq"), F.col("op_ts").alias("_op_ts"),
        F.col("pos").alias("_pos"), *[F.col(c) for c in ARRIVAL], F.col("_line"), F.col("_raw"),
    ]
    cast_error: Column | None = None
    for i, (name, dtype) in enumerate(zip(layout.columns, layout.types)):
        for img, val, pres in (("after", f"a{i}", f"p{i}"), ("before", f"b{i}", f"q{i}")):
            raw, present = _lookup(F.col(img), layout.spellings(i))
            value, ok = typed(raw, dtype)
            cols += [value.alias(val), present.alias(pres)]
            if not isinstance(dtype, T.StringType):
                reason = F.format_string(
                    f"column '{name}': {img} value %s does not fit type {dtype.simpleString()}", F.to_json(raw)
                )
                cast_error = F.when(~ok, reason) if cast_error is None else cast_error.when(~ok, reason)
    cols.append((F.lit(None) if cast_error is None else cast_error.otherwise(F.lit(None))).cast("string").alias("_cast_error"))
    wide = events.select(*cols)

    kidx = layout.key_index
    op = F.col("_op")
    before_has_key = F.lit(True)
    after_has_key = F.lit(True)
    moved = F.lit(False)
    for i in kidx:
        before_has_key = before_has_key & F.col(f"q{i}")
        after_has_key = after_has_key & F.col(f"p{i}")
        moved = moved | ~F.col(f"b{i}").eqNullSafe(F.col(f"a{i}"))
    from_before = (op == "D") | ((op == "U") & before_has_key)
    image = F.when(from_before, F.lit("before")).otherwise(F.lit("after"))
    key_cols: list[Column] = []
    error = F.when(F.lit(False), F.lit(None))
    for j, i in enumerate(kidx):
        name = layout.keys[j]
        present = F.when(from_before, F.col(f"q{i}")).otherwise(F.col(f"p{i}"))
        value = F.when(from_before, F.col(f"b{i}")).otherwise(F.col(f"a{i}"))
        error = error.when((op != "T") & ~present, F.format_string(f"key column '{name}' missing from the %s image", image))
        error = error.when((op != "T") & value.isNull(), F.lit(f"key column '{name}' is NULL"))
        key_cols += [value.alias(f"k{j}"), F.col(f"a{i}").alias(f"n{j}")]
    return wide.select(
        "*",
        *key_cols,
        ((op == "U") & before_has_key & after_has_key & moved).alias("_pku"),
        error.otherwise(F.col("_cast_error")).cast("string").alias("_error"),
    ).drop("_cast_error")


def _lookup(image: Column, spellings: tuple[str, ...]) -> tuple[Column, Column]:
    """A column's value in an image and whether it is present, under any of its spellings."""
    if len(spellings) == 1:
        return image[spellings[0]], F.coalesce(F.map_contains_key(image, spellings[0]), F.lit(False))
    value = F.when(F.map_contains_key(image, spellings[0]), image[spellings[0]])
    present = F.map_contains_key(image, spellings[0])
    for name in spellings[1:]:
        value = value.when(F.map_contains_key(image, name), image[name])
        present = present | F.map_contains_key(image, name)
    return value, F.coalesce(present, F.lit(False))


def drop_stale(wide: DataFrame, layout: Layout, stored: DataFrame | None, watermark: str | None) -> DataFrame:
    """Mark events that are not newer than what the table already reflects (rule 6).

    ``stored`` holds, per key (``k0``...), ``_stored_seq``: the seq of the live row or of the
    tombstone left by its delete. ``watermark`` is the seq of the table's last truncate.
    Adds ``_stale`` (boolean).
    """
    stale = F.lit(False)
    if watermark is not None:
        stale = stale | (F.col("_seq") < F.lit(watermark))
    if stored is not None:
        wide = wide.join(stored, layout.key_cols, "left")
        stale = stale | F.coalesce(F.col("_seq") <= F.col("_stored_seq"), F.lit(False))
        return wide.withColumn("_stale", stale).drop("_stored_seq")
    return wide.withColumn("_stale", stale)


def fold(wide: DataFrame, layout: Layout) -> DataFrame:
    """Fold each key's events into one net action, counting the events it leaves out.

    ``wide`` comes from :func:`widen` (and :func:`drop_stale`, which adds ``_stale``); truncates
    must have been removed. Events with an ``_error`` or marked ``_stale`` take no part in the
    fold but are counted, so that one pass over the data gives both the actions and the counts.

    Output, one row per key: ``k{j}``, ``c{i}`` (value), ``u{i}`` (true: overwrite the target's
    value on update), ``_action`` (``upsert``, ``delete``, or NULL when the key had no usable
    event), ``_cdc_seq``, ``_cdc_op``, ``_cdc_op_ts``, and the counts ``_events``, ``_dups``
    (same key and seq as an earlier event of this run), ``_stale``, ``_errors``, and ``_pku``
    (the key saw a primary-key update: the caller must fold it with :func:`consolidate`).
    """
    keys = layout.key_cols
    n = len(layout.columns)
    stale = F.col("_stale") if "_stale" in wide.columns else F.lit(False)
    ok = F.col("_error").isNull() & ~stale
    src = wide.select(
        *keys, "_op", "_seq", "_op_ts", "_pku", *ARRIVAL, ok.alias("_ok"), stale.alias("_stale"),
        F.col("_error").isNotNull().alias("_bad"),
        *[f"{p}{i}" for i in range(n) for p in ("a", "p", "b", "q")],
    )
    # Unusable events sort first in their key's partition, so lag() of a usable event only
    # ever shows another usable event or nothing usable (prev_ok false).
    w = Window.partitionBy(*keys).orderBy(F.col("_ok"), F.col("_seq"), *[F.col(c) for c in ARRIVAL])
    whole = w.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    okc = F.col("_ok")
    is_d = F.col("_op") == "D"
    ev = src.select(
        "*",
        F.coalesce(F.lag("_ok").over(w), F.lit(False)).alias("_prev_ok"),
        F.lag("_seq").over(w).alias("_prev_seq"),
        F.lag("_op").over(w).alias("_prev_op"),
        F.max(F.when(okc & is_d, F.col("_seq"))).over(whole).alias("_last_d"),
    )
    prev_ok, last_d = F.col("_prev_ok"), F.col("_last_d")
    dup = okc & prev_ok & (F.col("_seq") == F.col("_prev_seq"))
    live = okc & ~dup
    first_after_reset = live & F.when(last_d.isNull(), ~prev_ok).otherwise(
        prev_ok & (F.col("_prev_op") == "D") & (F.col("_prev_seq") == last_d) & (F.col("_seq") > last_d)
    )
    after_reset = last_d.isNull() | (F.col("_seq") > last_d)
    aggs: list[Column] = [
        F.count(F.lit(1)).alias("_events"),
        F.sum(dup.cast("long")).alias("_dups"),
        F.sum((F.col("_stale") & ~F.col("_bad")).cast("long")).alias("_stale"),
        F.sum(F.col("_bad").cast("long")).alias("_errors"),
        F.max(live & F.col("_pku")).alias("_pku"),
        F.max(F.when(live, F.struct("_seq", "_op", "_op_ts"))).alias("_last"),
        F.max(last_d).alias("_last_d"),
    ]
    for i in range(n):
        aggs.append(
            F.max(F.when(live & F.col(f"p{i}") & ~is_d & after_reset,
                         F.struct(F.col("_seq"), F.col(f"a{i}").alias("v")))).alias(f"l{i}")
        )
        aggs.append(
            F.max(F.when(first_after_reset & (F.col("_op") == "U") & F.col(f"q{i}"),
                         F.struct(F.lit(1).alias("o"), F.col(f"b{i}").alias("v")))).alias(f"f{i}")
        )
    agg = ev.groupBy(*keys).agg(*aggs)
    replace = F.col("_last_d").isNotNull()
    out: list[Column] = [*[F.col(k) for k in keys]]
    for i in range(n):
        last, fill = F.col(f"l{i}"), F.col(f"f{i}")
        out.append(F.when(last.isNotNull(), last["v"]).otherwise(fill["v"]).alias(f"c{i}"))
        out.append((last.isNotNull() | replace).alias(f"u{i}"))
    out += [
        F.when(F.col("_last").isNull(), F.lit(None))
        .when(F.col("_last._op") == "D", F.lit("delete"))
        .otherwise(F.lit("upsert")).alias("_action"),
        F.col("_last._seq").alias("_cdc_seq"),
        F.col("_last._op").alias("_cdc_op"),
        F.col("_last._op_ts").alias("_cdc_op_ts"),
        *[F.coalesce(F.col(c), F.lit(0)).cast("long").alias(c) for c in ("_events", "_dups", "_stale", "_errors")],
        F.coalesce(F.col("_pku"), F.lit(False)).alias("_pku"),
    ]
    return agg.select(*out)


def net_schema(layout: Layout) -> T.StructType:
    """Schema of :func:`fold`'s output (shared with the primary-key fold)."""
    fields = [T.StructField(f"k{j}", layout.types[i]) for j, i in enumerate(layout.key_index)]
    for i, dtype in enumerate(layout.types):
        fields += [T.StructField(f"c{i}", dtype), T.StructField(f"u{i}", T.BooleanType())]
    fields += [
        T.StructField("_action", T.StringType()),
        T.StructField("_cdc_seq", T.StringType()),
        T.StructField("_cdc_op", T.StringType()),
        T.StructField("_cdc_op_ts", T.TimestampType()),
        T.StructField("_events", T.LongType()),
        T.StructField("_dups", T.LongType()),
        T.StructField("_stale", T.LongType()),
        T.StructField("_errors", T.LongType()),
        T.StructField("_pku", T.BooleanType()),
    ]
    return T.StructType(fields)


def pk_touched(wide: DataFrame, layout: Layout) -> DataFrame:
    """Keys (``k0``...) that are the old or new side of a primary-key update in ``wide``."""
    moved = wide.where("_pku")
    old = moved.select(*layout.key_cols)
    new = moved.select(*[F.col(f"n{j}").alias(f"k{j}") for j in range(len(layout.keys))])
    return old.unionByName(new).distinct()


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
    replayed in order by :mod:`lakecdc._pkfold`. ``wide`` must hold usable events only.
    """
    from lakecdc._pkfold import fold_pk_keys

    touched = pk_touched(wide, layout).withColumn("_touched", F.lit(True))
    marked = wide.join(touched, layout.key_cols, "left")
    simple = marked.where(F.col("_touched").isNull()).drop("_touched")
    moved = marked.where(F.col("_touched").isNotNull()).drop("_touched")
    return fold(simple, layout).unionByName(
        fold_pk_keys(moved, layout, touched, target_rows=target_rows, stored=stored, pk_update=pk_update, table=table)
    )
