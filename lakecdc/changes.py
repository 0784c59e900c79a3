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
table, else inferred from the JSON types of the data; see :mod:`lakecdc.columns`), so numbers are
never rounded through a double on the way.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.errors import PrimaryKeyUpdateError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PkUpdate = Literal["abend", "update", "delete-insert"]
PK_UPDATE_MODES: tuple[str, ...] = ("abend", "update", "delete-insert")

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
    two regular expressions (``width`` zeros put before every part, then taken off again as far
    as the part is longer than ``width``).
    """
    text = F.coalesce(text, F.lit(""))
    zeros = "0" * width

    def pad(part: Column) -> Column:
        return F.when(F.length(part) >= width, part).otherwise(zero_pad(part, width))

    seps = F.length(text) - F.length(F.replace(text, F.lit(sep), F.lit("")))
    three = F.concat_ws(sep, pad(F.substring_index(text, sep, 1)),
                        pad(F.substring_index(F.substring_index(text, sep, 2), sep, -1)),
                        pad(F.substring_index(text, sep, -1)))
    q = re.escape(sep)
    padded = F.regexp_replace(text, f"(?<![^{q}])", zeros)
    general = F.regexp_replace(
        padded, f"(?<![^{q}])(?:0{{{width}}}(?=[^{q}]{{{width}}})|0{{1,{width - 1}}}(?=[^{q}]{{{width}}}(?:{q}|\\z)))", "")
    return F.when(seps == 2, three).otherwise(general)


def default_seq(op_ts: Column, pos: Column, idx: Column) -> Column:
    """The default consolidation order ``(op_ts, pos, idx)`` as one sortable string.

    The string is ``<micros>|<pos>|<idx>``: every part fixed width, so comparing two strings
    compares the tuples. Both Delta engines compare strings byte-wise, so the same value works as
    the seq guard inside a MERGE.
    """
    return F.concat_ws(
        "|",
        sortable_micros(op_ts),
        sortable_position(pos),
        zero_pad(F.coalesce(idx, F.lit(0)).cast("string"), _IDX_WIDTH),
    )


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
    return public(events)


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


def to_rows(events: DataFrame, *, pk_update: PkUpdate = "abend") -> DataFrame:
    """Rows-style change events: the single image a GoldenGate row formatter would emit.

    Inserts, reads and updates carry their after image, deletes their before image, truncates
    none. A primary-key update (an update whose after-image key differs from its before-image key)
    is handled like the row formatters' ``pkUpdateHandling``:

    * ``abend`` raises :class:`~lakecdc.errors.PrimaryKeyUpdateError` naming the first one;
    * ``update`` keeps it as one update carrying the after image;
    * ``delete-insert`` splits it into a delete of the before image and an insert of the after
      image (the insert completed from the before image for columns missing in after).

    Returns the canonical columns with ``row`` in place of ``before``/``after``.
    """
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
