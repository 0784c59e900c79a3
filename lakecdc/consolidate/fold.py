"""Consolidation: one table's change events folded into one net action per key, in Spark.

The batch form of the rules in ``semantics.md``. Events are sorted by ``seq``, then by arrival
(:data:`ARRIVAL`: where each was read, so that records whose vendor positions tie keep the order
they were written in; only an exact copy of the event just before it is a duplicate), and each
key's events are folded into a single row for the MERGE:

* the key's last event is a delete: **delete** (a tombstone is kept for late events);
* a delete followed by later events: **replace**: the row is rebuilt from those events alone;
* otherwise an **upsert** that sets each column present in some after image to its last present
  value and keeps the target's value for the others; if the key has no row yet, the columns never
  present take the first event's before image (an update of an absent row), else NULL.

Everything runs as DataFrame operations (one shuffle by key, one sorted window, one aggregation),
so it scales out on a cluster. Keys touched by a primary-key update depend on other keys' rows
(the new row is completed from the old one, also along chains ``k1 -> k2 -> k3``); those few keys
are folded together per table by :mod:`lakecdc.consolidate.keymoves` in an executor.

Internal column names are positional (``a3`` = after value of the 4th column) so that any source
column name works.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.columns import sql_string, typed_sql
from lakecdc.consolidate.files import BY_FILE, by_file

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Where a record was read (file, split, record along the split, then the event's index inside
#: its record): the last tie-breaker of the order, after ``seq`` (semantics.md, ``arrival``). File
#: paths compare by name. The index matters where the format leaves it out of ``seq`` (Canal, whose
#: messages share positions: :class:`lakecdc.decode.spec.Ordering`); elsewhere ``seq`` holds it.
ARRIVAL = ("_file", "_block", "_row", "idx")

#: A place in the order of a batch's events: a seq and an arrival (values of :data:`ARRIVAL`).
Point = tuple[str, tuple[Any, ...]]


def before_sql(point: Point, *, seq: str = "_seq") -> str:
    """SQL over an event's ``seq`` and :data:`ARRIVAL` columns: true when it comes before
    ``point`` in the order (seq, arrival), never NULL. A row without an arrival (one stored by an
    earlier run) whose seq ties the point's is not before it: across runs the seq alone decides."""
    s = sql_string(point[0])
    tie = "false"
    for column, value in reversed(list(zip(ARRIVAL, point[1], strict=True))):
        lit = "NULL" if value is None else sql_string(value) if isinstance(value, str) else str(int(value))
        tie = f"({column} < {lit} OR ({column} = {lit} AND {tie}))"
    return f"coalesce({seq} < {s} OR ({seq} = {s} AND {tie}), false)"


def first_truncate(events: DataFrame, seq: str) -> Point:
    """Where the first truncate of seq ``seq`` sits among ``events`` (canonical events): a
    truncate of equal seq arriving after it is a copy of it (its replay), which removes nothing."""
    arrival = F.min(F.struct(*ARRIVAL)).alias("_at")
    row = events.where((F.col("op") == "T") & (F.col("seq") == seq)).agg(arrival).first()
    at = row["_at"] if row is not None else None
    if at is None:
        raise ValueError(f"no truncate of seq {seq!r} among the events")
    return seq, tuple(at[c] for c in ARRIVAL)


@dataclass(frozen=True)
class Layout:
    """How a table's columns map to the positional internal names."""

    columns: tuple[str, ...]
    types: tuple[T.DataType, ...]
    keys: tuple[str, ...]
    #: Other spellings of a column seen in the images (Delta column names ignore case).
    aliases: tuple[tuple[str, ...], ...] = ()
    #: Image members that are deliberately not columns (a column list leaves them out).
    ignored: tuple[str, ...] = ()

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


def widen(events: DataFrame, layout: Layout, *, full: bool = False, surprise: str | None = None) -> DataFrame:
    """One table's canonical events with typed, positional columns and an ``_error`` reason.

    Adds per column ``i``: ``p{i}`` (present in the after image) and ``v{i}``: the after value when
    present, else the before value (NULL when the before image lacks it too). ``v{i}`` is all the
    fold needs: the after value where the column is present, and the before value where an update
    of an absent row completes a column no after image carried (semantics.md). Only values that
    are used are typed and checked. Per key column ``j``: ``b{i}``/``q{i}`` (typed before value /
    present), ``k{j}`` (the event's key) and ``n{j}`` (the after image's key, differing from
    ``k{j}`` only for a primary-key update); ``_pku`` (is a key update).

    With ``full``, the primary-key replay's columns instead of ``v{i}``: ``a{i}`` (after value) for
    every column and ``_before`` (the raw before image; see :func:`before_columns`).

    ``surprise`` (SQL on the events' columns) marks events the caller did not expect: they, and
    events with an image member that is none of the layout's columns (a column the table does not
    have yet), get the ``_error`` "unexpected" so that the caller can count them.

    The expressions are built as SQL text: one call into Spark per projection, whatever the number
    of columns.
    """
    typed = _typed_values(layout, full=full)
    if surprise is not None:
        typed.columns.append(_surprise_sql(layout, surprise))
    wide = events.selectExpr(*typed.columns)
    drop = typed.checks + (["_surprise"] if surprise is not None else [])
    if not full:
        drop += [f"a{i}" for i in layout.key_index]
    return wide.selectExpr(*_key_sql(layout, typed.checks, surprised=surprise is not None)).drop(*drop)


class _Checked:
    """The SQL columns of a projection, among them one ``_x{n}`` per value whose type is checked:
    the reason the value does not fit its type, else NULL."""

    def __init__(self, columns: list[str]) -> None:
        self.columns = columns
        #: the names of the check columns, in the order they were added
        self.checks: list[str] = []

    def check(self, ok: str | None, name: str, dtype: T.DataType, what: str, *args: str) -> None:
        """Add a check column where ``ok`` (SQL) is false: a value of column ``name`` (of ``what``
        image, or ``%s`` to format in) does not fit ``dtype``, formatted with ``args`` (SQL; the
        value last); nothing when ``ok`` is None (every value fits)."""
        if ok is None:
            return
        reason = sql_string(f"column '{name}': {what} value '%s' does not fit type {dtype.simpleString()}")
        self.columns.append(f"CASE WHEN NOT {ok} THEN format_string({reason}, {', '.join(args)}) END AS _x{len(self.checks)}")
        self.checks.append(f"_x{len(self.checks)}")


def _typed_values(layout: Layout, *, full: bool) -> _Checked:
    """The first projection of :func:`widen`: the event's op, seq, time, position and arrival, and
    per column its presence ``p{i}`` and the typed values the caller uses (``a{i}``, ``b{i}``,
    ``q{i}``, ``v{i}``; see :func:`widen`), each followed by the check of its type."""
    typed = _Checked(["op AS _op", "seq AS _seq", "op_ts AS _op_ts", "pos AS _pos", *ARRIVAL])
    if full:
        typed.columns.append("before AS _before")
    keyset = set(layout.key_index)
    for i, (name, dtype) in enumerate(zip(layout.columns, layout.types, strict=True)):
        a_raw, a_present = _lookup_sql("after", layout.spellings(i), slot=i)
        b_raw, b_present = _lookup_sql("before", layout.spellings(i), slot=i)
        typed.columns.append(f"{a_present} AS p{i}")
        if full or i in keyset:
            a_val, a_ok = typed_sql(a_raw, dtype)
            typed.columns.append(f"{a_val} AS a{i}")
            typed.check(a_ok, name, dtype, "after", a_raw)
        if i in keyset:
            b_val, b_ok = typed_sql(b_raw, dtype)
            typed.columns += [f"{b_val} AS b{i}", f"{b_present} AS q{i}"]
            typed.check(b_ok, name, dtype, "before", b_raw)
        if not full:
            # the value the fold may use: after if present, else before (typed once, checked once)
            used = f"CASE WHEN {a_present} THEN {a_raw} ELSE {b_raw} END"
            v_val, v_ok = typed_sql(used, dtype)
            typed.columns.append(f"{v_val} AS v{i}")
            if i not in keyset:
                what = f"CASE WHEN {a_present} THEN 'after' ELSE 'before' END"
                typed.check(v_ok, name, dtype, "%s", what, used)
    return typed


def _surprise_sql(layout: Layout, surprise: str) -> str:
    """SQL for ``_surprise``: the event matches ``surprise``, or an image holds a member that is no
    known column (it has more members than the known columns and deliberately ignored members
    found in it)."""

    def known(image: str) -> str:
        found = [_lookup_sql(image, (s,), slot=i)[1] for i in range(len(layout.columns)) for s in layout.spellings(i)]
        found += [_lookup_sql(image, (c,))[1] for c in layout.ignored]
        return " + ".join(f"CAST({f} AS INT)" for f in found)

    return (
        f"({surprise}) OR coalesce(size(after), 0) != ({known('after')}) "
        f"OR coalesce(size(before), 0) != ({known('before')}) AS _surprise"
    )


def _key_sql(layout: Layout, checks: list[str], *, surprised: bool) -> list[str]:
    """The second projection of :func:`widen`: every column, then per key column ``j`` the key
    ``k{j}`` (from the before image of a delete, or of an update that holds it) and ``n{j}`` (the
    after image's), ``_pku`` and ``_error``: the first reason the event is unusable, else NULL."""
    kidx = layout.key_index
    before_has_key = " AND ".join(f"q{i}" for i in kidx)
    after_has_key = " AND ".join(f"p{i}" for i in kidx)
    moved = " OR ".join(f"NOT (b{i} <=> a{i})" for i in kidx)
    from_before = f"(_op = 'D' OR (_op = 'U' AND {before_has_key}))"
    second = ["*"]
    missing: list[str] = []
    null: list[str] = []
    for j, i in enumerate(kidx):
        name = sql_string(layout.keys[j])[1:-1]
        second += [f"IF({from_before}, b{i}, a{i}) AS k{j}", f"a{i} AS n{j}"]
        missing.append(
            f"WHEN _op != 'T' AND NOT IF({from_before}, q{i}, p{i}) THEN "
            f"concat('key column \\'{name}\\' missing from the ', IF({from_before}, 'before', 'after'), ' image')"
        )
        null.append(f"WHEN _op != 'T' AND IF({from_before}, b{i}, a{i}) IS NULL THEN 'key column \\'{name}\\' is NULL'")
    # a value that does not fit its type is named before "is NULL" (its typed value is NULL too)
    errors = ["WHEN _surprise THEN 'unexpected'"] if surprised else []
    errors += missing + [f"WHEN {x} IS NOT NULL THEN {x}" for x in checks] + null
    second.append(f"(_op = 'U' AND {before_has_key} AND {after_has_key} AND ({moved})) AS _pku")
    second.append(f"CAST(CASE {' '.join(errors)} END AS STRING) AS _error")
    return second


def before_columns(layout: Layout, image: str = "_before") -> list[str]:
    """SQL for every column's typed before value ``b{i}`` and presence ``q{i}`` from ``image``."""
    out = []
    for i in range(len(layout.columns)):
        out += [f"{typed_before(layout, i, image)} AS b{i}", f"{_lookup_sql(image, layout.spellings(i))[1]} AS q{i}"]
    return out


def typed_before(layout: Layout, i: int, image: str = "_before") -> str:
    """SQL for column ``i``'s typed value in the raw image ``image`` (NULL when missing)."""
    return typed_sql(_lookup_sql(image, layout.spellings(i))[0], layout.types[i])[0]


def _lookup_sql(image: str, spellings: tuple[str, ...], *, slot: int | None = None) -> tuple[str, str]:
    """SQL for a column's value in an image and whether it is present, under any spelling.

    ``slot`` is where the column probably sits among the image's members (its position in the
    table): Spark keeps a JSON object's members in the order written, and formatters write a full
    image in table order, so one comparison usually finds it instead of a scan of the keys.
    """
    names = [sql_string(s) for s in spellings]
    if len(names) == 1 and slot is not None:
        hit = f"(get(map_keys({image}), {slot}) <=> {names[0]})"
        return (
            f"IF({hit}, get(map_values({image}), {slot}), {image}[{names[0]}])",
            f"({hit} OR coalesce(map_contains_key({image}, {names[0]}), false))",
        )
    if len(names) == 1:
        return f"{image}[{names[0]}]", f"coalesce(map_contains_key({image}, {names[0]}), false)"
    value = "CASE " + " ".join(f"WHEN map_contains_key({image}, {n}) THEN {image}[{n}]" for n in names) + " END"
    present = "coalesce(" + " OR ".join(f"map_contains_key({image}, {n})" for n in names) + ", false)"
    return value, present


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


def fold(
    wide: DataFrame, layout: Layout, *, reset: Point | None = None, whole: bool = False, one_file: bool = False,
) -> DataFrame:
    """Fold each key's events into one net action, counting the events it leaves out.

    ``wide`` comes from :func:`widen` (and :func:`drop_stale`, which adds ``_stale``); truncates
    must have been removed. Events with an ``_error`` or marked ``_stale`` take no part in the
    fold but are counted, so that one pass over the data gives both the actions and the counts.

    Output, one row per key: ``k{j}``, ``c{i}`` (value), ``u{i}`` (true: overwrite the target's
    value on update), ``_action`` (``upsert``, ``delete``, or NULL when the key had no usable
    event), ``_cdc_seq``, ``_cdc_op``, ``_cdc_op_ts``, and the counts ``_events``, ``_dups``
    (an exact copy, same seq and content, of the key's event just before it in this run), ``_stale``, ``_errors``, and ``_pku``
    (the key saw a primary-key update: the caller must fold it with :func:`fold_with_key_moves`).

    ``reset`` is where a truncate of this batch sits (see :func:`first_truncate`): events before
    it in the order (seq, arrival) only count (they are wiped), and every key starts again from
    an absent row after it, as after a delete.

    Two choices make the plan cheaper for batches that allow them, with the same output:

    * ``whole``: the caller expects every after image to hold every column (a format that writes
      whole rows, or a batch profiled so): each key's upsert is then its newest after image, one
      aggregate instead of one per column. The output gets ``_partial``, the keys whose images
      were not whole after all; the caller must fold again without ``whole`` when any is.
    * ``one_file``: every event was read from one file: ``_by_file`` is left NULL (no per-file
      windows), the totals say the same (:func:`~lakecdc.consolidate.files.late_by_file` then needs the file's name).
    """
    if "_before" in wide.columns:  # from widen(full=True): the used value is after, else before
        n = len(layout.columns)
        wide = wide.selectExpr("*", *[f"IF(p{i}, a{i}, {typed_before(layout, i)}) AS v{i}" for i in range(n)])
    src = wide.selectExpr(
        *fold_inputs(wide, layout), f"{before_sql(reset)} AS _wiped" if reset is not None else "false AS _wiped",
    )
    over, frame = key_window(layout)
    ev = _mark_events(src, over, frame, truncated=reset is not None)
    if one_file:
        ev = ev.selectExpr("*", f"CAST(NULL AS {BY_FILE.simpleString()}) AS _by_file")
    else:
        ev = by_file(ev, over, frame, late="_dup OR (_stale AND NOT _bad)")
    # Whole-partition window aggregates, read off each key's last row: no second shuffle and no
    # aggregation buffers of structs.
    last_rows = ev.selectExpr(*_key_totals_sql(layout, frame, whole_images=whole)).where("_is_last")
    return last_rows.selectExpr(*_net_action_sql(layout, whole=whole))


def fold_inputs(wide: DataFrame, layout: Layout) -> list[str]:
    """SQL for the columns the folds read from widened events (:func:`widen`, maybe
    :func:`drop_stale`): the key ``k{j}``, op, seq, time, ``_pku``, arrival, ``_ok`` (usable: no
    error and not stale), ``_stale``, ``_bad`` (has an error), ``v{i}`` and ``p{i}`` per column,
    and ``_h``, the hash that finds replayed copies (:func:`content_hash`)."""
    stale = "_stale" if "_stale" in wide.columns else "false"
    values = [f"{p}{i}" for i in range(len(layout.columns)) for p in ("v", "p")]
    return [
        *layout.key_cols, "_op", "_seq", "_op_ts", "_pku", *ARRIVAL, f"(_error IS NULL AND NOT {stale}) AS _ok",
        f"{stale} AS _stale", "_error IS NOT NULL AS _bad", *values, f"{content_hash(layout)} AS _h",
    ]


def key_window(layout: Layout) -> tuple[str, str]:
    """The window of the folds: each key's events in the order (seq, arrival), unusable ones
    (``_ok`` false) first; and its frame over the key's whole partition. Records whose vendor
    positions tie apply in the order they were written."""
    over = f"PARTITION BY {', '.join(layout.key_cols)} ORDER BY _ok, _seq, {', '.join(ARRIVAL)}"
    return over, f"({over} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"


def _mark_events(src: DataFrame, over: str, whole: str, *, truncated: bool) -> DataFrame:
    """``src`` (:func:`fold_inputs` and ``_wiped``: before the batch's truncate) with each event's
    place in its key's window ``over``: ``_n`` (its position, which stands for the order (seq,
    arrival) in comparisons), the previous event's ``_prev_*``, ``_is_last``, ``_d_at`` (where the
    key's last delete sits), ``_dup`` (a replayed copy), ``_last_d`` (the key was deleted or
    truncated), ``_live`` (usable, no copy, not wiped), ``_after_reset`` (past the last delete and
    the truncate) and ``_first`` (the first live event after the last reset).

    Unusable events sort first in their key's partition, so lag() of a usable event only ever
    shows another usable event or nothing usable (``_prev_ok`` false)."""
    return src.selectExpr(
        "*",
        f"row_number() OVER ({over}) AS _n",
        f"coalesce(lag(_ok) OVER ({over}), false) AS _prev_ok",
        f"lag(_seq) OVER ({over}) AS _prev_seq",
        f"lag(_h) OVER ({over}) AS _prev_h",
        f"lag(_wiped) OVER ({over}) AS _prev_wiped",
        f"lead(1) OVER ({over}) IS NULL AS _is_last",
    ).selectExpr(
        # where the key's last delete sits in the order
        "*", f"max(CASE WHEN _ok AND NOT _wiped AND _op = 'D' THEN _n END) OVER {whole} AS _d_at",
    ).selectExpr(
        # an exact copy of the event just before it (same seq and content, same side of the
        # batch's truncate) is a replay
        "*", "_ok AND _prev_ok AND _seq = _prev_seq AND _h <=> _prev_h AND _wiped = _prev_wiped AS _dup",
        f"(_d_at IS NOT NULL OR {'true' if truncated else 'false'}) AS _last_d",
    ).selectExpr(
        "*", "_ok AND NOT _dup AND NOT _wiped AS _live",
        "(_d_at IS NULL OR _n > _d_at) AND NOT _wiped AS _after_reset",
        "(_d_at IS NULL OR _n - 1 > _d_at) AND NOT _prev_wiped AS _prev_after_reset",
    ).selectExpr(
        "*",
        # the first usable event after the last reset (a delete, or the batch's truncate)
        "_live AND _after_reset AND NOT (_prev_ok AND coalesce(_prev_after_reset, false)) AS _first",
    )


def _key_totals_sql(layout: Layout, whole: str, *, whole_images: bool = False) -> list[str]:
    """SQL over the marked events (:func:`_mark_events`, :func:`by_file`) for what the net action
    needs of a key's whole partition, on each of its rows: the newest live event ``_newest``, the
    counts, ``_min_seq``, ``_pku``, per column ``l{i}`` (its last present value since the last
    reset) and ``_fill`` (the before image of an update that met no row). With ``whole_images``,
    instead of those: ``_lastv``, the values of the newest live after image since the last reset,
    and ``_partial``, whether an after image that counts lacked a column."""
    n = len(layout.columns)
    totals = [
        *layout.key_cols, "_is_last", "_last_d", "_by_file",
        # the newest usable event (the last row may be a replayed copy of it, which is not usable)
        f"last(CASE WHEN _live THEN struct(_seq, _op, _op_ts) END, true) OVER {whole} AS _newest",
        f"count(1) OVER {whole} AS _events",
        f"min(CASE WHEN _ok THEN _seq END) OVER {whole} AS _min_seq",
        f"sum(CAST(_dup AS BIGINT)) OVER {whole} AS _dups",
        f"sum(CAST(_stale AND NOT _bad AS BIGINT)) OVER {whole} AS _stale",
        f"sum(CAST(_bad AS BIGINT)) OVER {whole} AS _errors",
        # a key change before the batch's truncate still stops an abend run, as applied one by one
        f"max(_ok AND NOT _dup AND _pku) OVER {whole} AS _pku",
    ]
    if whole_images:
        every = " AND ".join(f"p{i}" for i in range(n))
        values = ", ".join(f"v{i}" for i in range(n))
        counted = "_live AND _op != 'D' AND _after_reset"
        return [
            *totals,
            f"last(CASE WHEN {counted} THEN struct({values}) END, true) OVER {whole} AS _lastv",
            f"max({counted} AND NOT ({every})) OVER {whole} AS _partial",
        ]
    for i in range(n):
        totals.append(
            f"last(CASE WHEN _live AND p{i} AND _op != 'D' AND _after_reset THEN struct(v{i} AS v) END, true) "
            f"OVER {whole} AS l{i}"
        )
    # an update that met no row completes the columns no after image carried from its before
    # image (v{i} is the before value where p{i} is false): one struct of them all
    fill = ", ".join(f"v{i}" for i in range(n))
    totals.append(f"first(CASE WHEN _first AND _op = 'U' THEN struct({fill}) END, true) OVER {whole} AS _fill")
    return totals


def _net_action_sql(layout: Layout, *, whole: bool = False) -> list[str]:
    """SQL over a key's totals (:func:`_key_totals_sql`) for its net action (:func:`net_schema`):
    per column the value ``c{i}`` (its last present value, else the fill) and ``u{i}`` (set it),
    the action and the event it comes from, the counts, ``_pku``, ``_min_seq`` and ``_by_file``."""
    out = [*layout.key_cols]
    for i in range(len(layout.columns)):
        if whole:
            out += [f"_lastv.v{i} AS c{i}", f"(_lastv IS NOT NULL OR _last_d) AS u{i}"]
        else:
            out += [f"IF(l{i} IS NOT NULL, l{i}.v, _fill.v{i}) AS c{i}", f"(l{i} IS NOT NULL OR _last_d) AS u{i}"]
    if whole:
        out.append("coalesce(_partial, false) AS _partial")
    return [
        *out,
        "CASE WHEN _newest IS NULL THEN NULL WHEN _newest._op = 'D' THEN 'delete' ELSE 'upsert' END AS _action",
        "_newest._seq AS _cdc_seq", "_newest._op AS _cdc_op", "_newest._op_ts AS _cdc_op_ts",
        *[f"CAST(coalesce({c}, 0) AS BIGINT) AS {c}" for c in ("_events", "_dups", "_stale", "_errors")],
        "coalesce(_pku, false) AS _pku", "_min_seq", "_by_file",
    ]


def content_hash(layout: Layout) -> str:
    """SQL for a hash of an event's op and images as the fold sees them (``p{i}``, ``v{i}``): two
    events of equal seq and equal hash are copies of one record (a replay)."""
    parts = ["_op"]
    for i, dtype in enumerate(layout.types):
        value = f"v{i}" if not isinstance(dtype, T.MapType) else f"to_json(v{i})"
        parts += [f"p{i}", value]
    return f"xxhash64({', '.join(parts)})"


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
        T.StructField("_min_seq", T.StringType()),
        T.StructField("_by_file", BY_FILE),
    ]
    return T.StructType(fields)
