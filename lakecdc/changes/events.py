"""The canonical change event every decoder produces, ops-style and rows-style.

One row per source operation, whatever the vendor format (see ``semantics.md`` of the design):

============  =====================================================================================
column        meaning
============  =====================================================================================
table         source table as the source names it, e.g. ``QASOURCE.TCUSTORD``
op            ``I`` insert, ``U`` update, ``D`` delete, ``T`` truncate, ``R`` snapshot read (upsert)
op_ts         source commit time (UTC timestamp, microseconds)
pos           source position, normalised so that string order is the source's order
idx           index of the operation inside its message / transaction (0 when one op a message)
seq           the total order used to consolidate: a string whose plain order is the order of
              ``(op_ts, pos, idx)`` by default (see :func:`default_seq`)
txid          source transaction id, when the format carries one
keys          primary-key column names, when the message or the configuration gives them
before/after  the row images as ``map<string, string>``: a column that is *present* is a key of
              the map (its value may be NULL); a *missing* column is not a key at all. A value is
              the exact text the message carried (``17520.00`` stays ``17520.00``; objects and
              arrays as JSON text). A missing image is a NULL map.
source        everything else the format carries (``current_ts``, ``token.<name>``, ...)
_file, ...    where the record came from: ``_file``, ``_block``, ``_row`` (and ``_line`` when
              the reader knows it), used for error reports and deterministic tie-breaking
============  =====================================================================================

Values stay text until the typing step casts them to the table's column types (from the target
table, else inferred from the JSON types of the data; see :mod:`lakecdc.changes.columns`), so numbers are
never rounded through a double on the way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.config.arguments import dataframe
from lakecdc.config.settings import DEFAULT_PK_UPDATE
from lakecdc.config.values import PK_UPDATE_MODES, PkUpdate  # noqa: F401 - PK_UPDATE_MODES: named here too
from lakecdc.config.values import pk_update as parse_pk_update
from lakecdc.errors import PrimaryKeyUpdateError
from lakecdc.spark.conf import MAP_KEY_DEDUP, conf_value

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


IMAGE_TYPE = T.MapType(T.StringType(), T.StringType(), valueContainsNull=True)

#: The canonical ops-style schema (public columns, in order).
EVENT_SCHEMA = T.StructType(
    [
        T.StructField("table", T.StringType()),
        T.StructField("op", T.StringType()),
        T.StructField("op_ts", T.TimestampType()),
        T.StructField("pos", T.StringType()),
        T.StructField("idx", T.IntegerType()),
        T.StructField("seq", T.StringType()),
        T.StructField("txid", T.StringType()),
        T.StructField("keys", T.ArrayType(T.StringType())),
        T.StructField("before", IMAGE_TYPE),
        T.StructField("after", IMAGE_TYPE),
        T.StructField("source", T.MapType(T.StringType(), T.StringType())),
    ]
)
EVENT_COLUMNS: tuple[str, ...] = tuple(EVENT_SCHEMA.fieldNames())
#: Where a record came from; kept next to the public columns until the events are consolidated.
ORIGIN_COLUMNS: tuple[str, ...] = ("_file", "_block", "_row", "_line")
#: Set by decoders: why a record is bad (NULL when good) and its raw text for the quarantine.
ERROR_COLUMNS: tuple[str, ...] = ("_error", "_raw")

OPS: frozenset[str] = frozenset({"I", "U", "D", "T", "R"})

_POS_WIDTH = 20
_IDX_WIDTH = 6
_MICROS_WIDTH = 17


def zero_pad(text: Column, width: int) -> Column:
    """``lpad(text, width, '0')`` (a longer text is cut, as by ``lpad``), with a pad as wide as the
    field: ``lpad`` copies its pad once per repetition, a one-character pad once per missing digit."""
    return F.lpad(text, width, "0" * width)


def digits(c: Column, most: int | None = None) -> Column:
    """``c`` is one or more ASCII digits (at most ``most``). A number as Spark writes a
    non-negative long is (no regular expression, which matches a copy of the text as a Java
    string: the common case); any other text is matched (``translate`` would be slower: a hash
    lookup per character)."""
    n = c.try_cast("bigint")
    bound = "+" if most is None else f"{{1,{most}}}"
    short = F.lit(True) if most is None else F.length(c) <= most
    return F.when((n >= 0) & (n.cast("string") == c), short).otherwise(c.rlike(f"^[0-9]{bound}$"))


def last_wins(spark: SparkSession) -> bool:
    """Whether ``spark`` builds a map given a key twice with the key's last value instead of failing
    (its ``spark.sql.mapKeyDedupPolicy`` is ``LAST_WIN``, as during lakecdc's jobs:
    :data:`lakecdc.spark.conf.JOB_CONF`). Read when a plan is made; the plan must run under it."""
    return (conf_value(spark, MAP_KEY_DEDUP) or "EXCEPTION").strip().upper() == "LAST_WIN"


def overlay(base: Column, top: Column, *, last_win: bool) -> Column:
    """``base`` with the members of ``top`` laid over it (``top`` NULL: ``base`` as is; ``base``
    NULL: NULL).

    With ``last_win`` (:func:`last_wins` of the session that runs the plan) ``map_concat`` does it
    alone. Otherwise the members ``top`` has are first filtered out of ``base`` with a lambda,
    which Spark runs interpreted, taking the projection that holds it out of the generated code.
    """
    top = F.coalesce(top, F.create_map().cast(IMAGE_TYPE))
    if last_win:
        return F.map_concat(base, top)
    return F.map_concat(F.map_filter(base, lambda k, _v: ~F.map_contains_key(top, k)), top)


def sortable_micros(ts: Column) -> Column:
    """A timestamp as fixed-width digits (microseconds since 1970, offset to stay positive)."""
    shifted = F.unix_micros(ts) + F.lit(10**16)
    return zero_pad(shifted.cast("string"), _MICROS_WIDTH)


def sortable_position(pos: Column, width: int = _POS_WIDTH) -> Column:
    """A numeric position string left-padded so that string order is numeric order.

    Positions longer than ``width`` are kept whole (``lpad`` would cut them).
    """
    pos = F.coalesce(pos, F.lit(""))
    return F.when(F.length(pos) >= width, pos).otherwise(zero_pad(pos, width))


def padded_parts(text: Column, sep: str, width: int) -> Column:
    """``text`` with each ``sep``-separated part left-padded with zeros to ``width`` characters
    (a longer part kept whole), so that string order compares part by part.

    Without a lambda, which Spark runs interpreted and which takes the whole projection holding
    it out of the generated code: a text of three parts is padded part by part
    (``substring_index``; ``split_part`` compiles a regular expression per value), any other by
    two regular expressions (:func:`_padded_by_patterns`). :func:`with_padded_parts` does the
    same in projections of its own, finding each part once.
    """
    text = F.coalesce(text, F.lit(""))
    seps = F.length(text) - F.length(F.replace(text, F.lit(sep), F.lit("")))
    three = F.concat_ws(sep, *(_padded(p, F.length(p), width) for p in _three_parts(text, sep)))
    return F.when(seps == 2, three).otherwise(_padded_by_patterns(text, sep, width))


def with_padded_parts(df: DataFrame, name: str, text: Column, sep: str, width: int) -> DataFrame:
    """``df`` with a column ``name``: :func:`padded_parts` of ``text``, found in projections of its
    own so that each part of a three-part text is cut out once and measured once (Spark shares no
    subexpression between the branches of a CASE WHEN, so within one expression a part is cut out
    again where it is used again; the form with a CASE per part cut the middle one four times).
    A text has three parts exactly when its length is theirs plus two separators."""
    t, parts, sizes = f"_{name}_t", [f"_{name}_p{i}" for i in range(3)], [f"_{name}_n{i}" for i in range(4)]
    df = df.select("*", F.coalesce(text, F.lit("")).alias(t))
    df = df.select("*", *(p.alias(n) for p, n in zip(_three_parts(F.col(t), sep), parts, strict=True)))
    df = df.select("*", *(F.length(c).alias(n) for c, n in zip([*parts, t], sizes, strict=True)))
    n = [F.col(c) for c in sizes]
    three = F.concat_ws(sep, *(_padded(F.col(p), k, width) for p, k in zip(parts, n[:3], strict=True)))
    exact = n[3] == n[0] + n[1] + n[2] + 2 * len(sep)
    out = F.when(exact, three).otherwise(_padded_by_patterns(F.col(t), sep, width))
    return df.select("*", out.alias(name)).drop(t, *parts, *sizes)


def _three_parts(text: Column, sep: str) -> tuple[Column, Column, Column]:
    """The first, second and last ``sep``-separated parts of ``text``."""
    return (F.substring_index(text, sep, 1), F.substring_index(F.substring_index(text, sep, 2), sep, -1),
            F.substring_index(text, sep, -1))


def _padded(part: Column, length: Column, width: int) -> Column:
    """``part`` (of ``length`` characters) left-padded with zeros to ``width``, a longer one whole."""
    return F.lpad(part, F.greatest(length, F.lit(width)), F.lit("0" * width))


def _padded_by_patterns(text: Column, sep: str, width: int) -> Column:
    """:func:`padded_parts` for any number of parts: ``width`` zeros put before every part, then
    taken off again as far as the part is longer than ``width``."""
    q = re.escape(sep)
    padded = F.regexp_replace(text, f"(?<![^{q}])", "0" * width)
    return F.regexp_replace(
        padded, f"(?<![^{q}])(?:0{{{width}}}(?=[^{q}]{{{width}}})|0{{1,{width - 1}}}(?=[^{q}]{{{width}}}(?:{q}|\\z)))", "")


def default_seq(op_ts: Column, pos: Column, idx: Column | None) -> Column:
    """The default consolidation order ``(op_ts, pos, idx)`` as one sortable string.

    The string is ``<micros>|<pos>|<idx>``: every part fixed width, so comparing two strings
    compares the tuples. Both Delta engines compare strings byte-wise, so the same value works as
    the seq guard inside a MERGE. ``idx`` None: ``<micros>|<pos>`` (the index orders only after
    the arrival, see :class:`lakecdc.decode.spec.Ordering`); it sorts before every
    ``<micros>|<pos>|<idx>`` of the same op_ts and pos.
    """
    parts = [sortable_micros(op_ts), sortable_position(pos)]
    if idx is not None:
        parts.append(zero_pad(F.coalesce(idx, F.lit(0)).cast("string"), _IDX_WIDTH))
    return F.concat_ws("|", *parts)


def public(events: DataFrame) -> DataFrame:
    """The ops-style view: the canonical columns plus where each record came from."""
    keep = [c for c in (*EVENT_COLUMNS, *ORIGIN_COLUMNS) if c in events.columns]
    return events.select(*keep)


def to_ops(events: DataFrame) -> DataFrame:
    """Ops-style change events: one row per source operation, before and after images.

    Example:
        >>> events = lakecdc.read_changes("landing/", format="ogg-json")   # doctest: +SKIP
        >>> to_ops(events).select("table", "op", "seq", "after").show()    # doctest: +SKIP
    """
    return public(dataframe("to_ops", "events", events, "lakecdc.read_changes(...)'s"))


def key_changed(keys: Column, before: Column, after: Column) -> Column:
    """True where an update's after-image key differs from its before-image key.

    Only keys present in both images count: an image without the key columns cannot move a row.
    """
    def image_key(image: Column) -> Column:
        return F.transform(keys, lambda k: image[k])

    def has_all(image: Column) -> Column:
        return F.forall(keys, lambda k: F.coalesce(F.map_contains_key(image, k), F.lit(False)))

    return (
        (F.size(keys) > 0)
        & has_all(before)
        & has_all(after)
        & (image_key(before) != image_key(after))
    )


def to_rows(events: DataFrame, *, pk_update: PkUpdate = DEFAULT_PK_UPDATE) -> DataFrame:
    """Rows-style change events: the single image a GoldenGate row formatter would emit.

    Inserts, reads and updates carry their after image, deletes their before image, truncates
    none. A primary-key update (an update whose after-image key differs from its before-image key)
    is handled like the row formatters' ``pkUpdateHandling``:

    * ``abend`` raises :class:`~lakecdc.errors.PrimaryKeyUpdateError` naming the first one;
    * ``update`` keeps it as one update carrying the after image;
    * ``delete-insert`` splits it into a delete of the before image and an insert of the after
      image (the insert completed from the before image for columns missing in after).

    The default is :func:`lakecdc.apply`'s (``delete-insert``).

    Returns the canonical columns with ``row`` in place of ``before``/``after``.
    """
    dataframe("to_rows", "events", events, "lakecdc.read_changes(...)'s")
    pk_update = parse_pk_update(pk_update)
    moved = key_changed(F.col("keys"), F.col("before"), F.col("after"))
    flagged = events.withColumn("_pk_moved", (F.col("op") == "U") & F.coalesce(moved, F.lit(False)))
    if pk_update == "abend":
        first = flagged.where("_pk_moved").orderBy("seq").limit(1).collect()
        if first:
            r = first[0]
            old = [_key_value(r.before, k) for k in r["keys"]]
            new = [_key_value(r.after, k) for k in r["keys"]]
            raise PrimaryKeyUpdateError(r["table"], tuple(old), tuple(new), r["pos"])
    row_image = (
        F.when(F.col("op") == "D", F.col("before"))
        .when(F.col("op") == "T", F.lit(None).cast(IMAGE_TYPE))
        .otherwise(F.col("after"))
    )
    plain = flagged.withColumn("row", row_image)
    if pk_update == "delete-insert":
        completed = F.map_concat(
            F.map_filter("before", lambda k, _v: ~F.map_contains_key(F.col("after"), k)),
            F.col("after"),
        )
        split = F.explode(
            F.when(
                F.col("_pk_moved"),
                F.array(
                    F.struct(F.lit("D").alias("op"), F.col("before").alias("row"), F.lit(0).alias("half")),
                    F.struct(F.lit("I").alias("op"), completed.alias("row"), F.lit(1).alias("half")),
                ),
            ).otherwise(F.array(F.struct(F.col("op"), F.col("row"), F.lit(0).alias("half"))))
        )
        plain = plain.select("*", split.alias("_split")).drop("op", "row")
        plain = plain.withColumn("op", F.col("_split.op")).withColumn("row", F.col("_split.row"))
        plain = plain.withColumn("seq", F.concat(F.col("seq"), F.when(F.col("_split.half") == 1, F.lit("+")).otherwise(F.lit(""))))
    cols = [c for c in EVENT_COLUMNS if c not in ("before", "after")] + ["row"]
    cols += [c for c in ORIGIN_COLUMNS if c in events.columns]
    return plain.select(*cols)


def _key_value(image: object, column: str) -> object:
    """A key column's value (its text) from a collected image."""
    if not isinstance(image, dict):
        return None
    return image.get(column)
