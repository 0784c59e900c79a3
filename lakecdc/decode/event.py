"""The one projection of a parsed record into the canonical change event.

A vendor's decoder says, as Spark columns over its parsed records, what each record is
(:class:`Parts`); :func:`project` turns those into the columns of
:data:`lakecdc.changes.events.EVENT_SCHEMA` and applies the rules every format shares:

* ``op`` is NULL on a bad record (``_error`` set), and so are both images;
* an image is kept only for the ops :class:`~lakecdc.decode.spec.Images` names for it (and an
  after image on a skipped record when it says so);
* ``source['skipped']`` is the kind of a skipped (non-row) record and nothing else;
* ``idx`` (0 when the vendor gives none) and ``seq`` (by the spec's
  :class:`~lakecdc.decode.spec.Ordering`) are set for events and the skipped records that are
  still ordered, NULL for the rest;
* the output columns are the event's, then ``_file``, ``_block``, ``_row``, ``_error`` (and for
  binary formats ``_offset`` and ``_raw``, the latter only on bad records).

It computes each value once, in a projection of its own, before the rules read it again (Spark
shares no subexpression between the branches of a CASE WHEN), and it uses no lambda function
(Spark runs those interpreted, out of the generated code).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import (
    EVENT_SCHEMA,
    IMAGE_TYPE,
    default_seq,
    sortable_position,
    zero_pad,
)
from lakecdc.decode.checks import Check, first_error
from lakecdc.decode.spec import Ordering, VendorSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
_ENTRY = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.StringType())])
#: Where a record came from (see :mod:`lakecdc.changes.events`).
ORIGIN = ("_file", "_block", "_row")
#: What binary formats add: the byte offset of the record, its bytes (base64) when it is bad.
BINARY = ("_offset", "_raw")


@dataclass(frozen=True)
class Parts:
    """What a vendor's SQL says of one parsed record (columns over the parsed DataFrame).

    ``op`` is the canonical op of a row record, whether or not the record turns out bad (its
    checks decide that); NULL for a skipped record, whose kind is ``skipped``. ``ordered``: a
    skipped record that still gets a ``seq`` (e.g. a schema change naming keys). ``seq``: only
    with ``Ordering('given')``. ``raw``: binary formats, the record's bytes (base64). Members left
    None are NULL (``source``: empty).
    """

    table: Column
    op: Column
    op_ts: Column
    pos: Column | None = None
    idx: Column | None = None
    seq: Column | None = None
    txid: Column | None = None
    keys: Column | None = None
    before: Column | None = None
    after: Column | None = None
    source: Column | None = None
    skipped: Column | None = None
    ordered: Column | None = None
    checks: Sequence[Check] = ()
    raw: Column | None = None


def _null(c: Column | None, dtype: T.DataType | str) -> Column:
    return F.lit(None).cast(dtype) if c is None else c.cast(dtype)


def _ops(ops: frozenset[str], op: Column) -> Column:
    if not ops:
        return F.lit(False)
    if len(ops) == 1:
        return op == next(iter(ops))
    return op.isin(*sorted(ops))


def sequence(ordering: Ordering, op_ts: Column, pos: Column, idx: Column, given: Column | None = None) -> Column:
    """``seq`` of an event by ``ordering`` (``idx`` not NULL)."""
    in_seq = ordering.idx == "seq"
    if ordering.seq == "default":
        return default_seq(op_ts, pos, idx if in_seq else None)
    if ordering.seq == "pos-idx":
        where = pos if ordering.pos_width is None else sortable_position(pos, ordering.pos_width)
        return F.concat_ws("|", where, zero_pad(idx.cast("string"), ordering.idx_width)) if in_seq else where
    if given is None:
        raise ValueError("Ordering('given') needs Parts.seq")
    return given


def source_map(*pairs: tuple[str, Column]) -> Column:
    """A ``source`` map of the pairs whose value is not NULL (a NULL value leaves its key out),
    built without a lambda function."""
    entries = F.array(*[F.when(v.isNotNull(), F.struct(F.lit(k).alias("key"), v.cast("string").alias("value")))
                        for k, v in pairs])
    return F.map_from_entries(F.array_except(entries, F.array(F.lit(None).cast(_ENTRY))))


def _with_skipped(source: Column, skipped: Column) -> Column:
    """``source`` whose ``skipped`` entry is ``skipped`` (none when NULL), whatever the vendor's
    map held under that name; the map as it is in the usual case (neither)."""
    has = F.map_contains_key(source, "skipped")
    own = F.struct(F.lit("skipped").alias("key"), source["skipped"].alias("value"))
    rest = F.when(has, F.map_from_entries(F.array_except(F.map_entries(source), F.array(own)))).otherwise(source)
    added = F.when(skipped.isNotNull(), F.create_map(F.lit("skipped"), skipped)).otherwise(F.create_map().cast(_TEXT_MAP))
    return F.when(skipped.isNull() & ~has, source).otherwise(F.map_concat(rest, added))


def project(parsed: DataFrame, parts: Parts, spec: VendorSpec) -> DataFrame:
    """Canonical events (see the module docstring) of the records of ``parsed`` as ``parts`` says.

    What depends on the session (a time read as UTC, maps laid over each other) is in the parts
    already: the vendor's checks read those values (see :class:`lakecdc.decode.base.Context`).
    """
    binary = spec.binary
    extra = ["_offset"] if binary else []
    staged = parsed.select(
        parts.table.cast("string").alias("_e_table"),
        parts.op.cast("string").alias("_e_op"),
        _null(parts.op_ts, "timestamp").alias("_e_op_ts"),
        _null(parts.pos, "string").alias("_e_pos"),
        F.coalesce(_null(parts.idx, "int"), F.lit(0)).alias("_e_idx"),
        _null(parts.seq, "string").alias("_e_seq"),
        _null(parts.txid, "string").alias("_e_txid"),
        _null(parts.keys, "array<string>").alias("_e_keys"),
        _null(parts.before, IMAGE_TYPE).alias("_e_before"),
        _null(parts.after, IMAGE_TYPE).alias("_e_after"),
        F.coalesce(_null(parts.source, _TEXT_MAP), F.create_map().cast(_TEXT_MAP)).alias("_e_source"),
        _null(parts.skipped, "string").alias("_e_skipped"),
        F.coalesce(_null(parts.ordered, "boolean"), F.lit(False)).alias("_e_ordered"),
        first_error(*parts.checks).alias("_error"),
        *([_null(parts.raw, "string").alias("_e_raw")] if binary else []),
        *ORIGIN, *extra,
    )
    op, error = F.col("_e_op"), F.col("_error")
    good = error.isNull()
    ordered = op.isNotNull() | F.col("_e_ordered")
    idx = F.col("_e_idx")
    seq = sequence(spec.ordering, F.col("_e_op_ts"), F.col("_e_pos"), idx, F.col("_e_seq"))
    images = spec.images
    if images.single:
        before_image = after_image = F.col("_e_after")
    else:
        before_image, after_image = F.col("_e_before"), F.col("_e_after")
    after_ops = _ops(images.after, op)
    if images.skipped_after:
        after_ops = after_ops | F.col("_e_skipped").isNotNull()
    events = staged.select(
        F.col("_e_table").alias("table"),
        F.when(good, op).alias("op"),
        F.col("_e_op_ts").alias("op_ts"),
        F.col("_e_pos").alias("pos"),
        F.when(ordered, idx).alias("idx"),
        F.when(ordered, seq).alias("seq"),
        F.col("_e_txid").alias("txid"),
        F.col("_e_keys").alias("keys"),
        F.when(good & _ops(images.before, op), before_image).alias("before"),
        F.when(good & after_ops, after_image).alias("after"),
        _with_skipped(F.col("_e_source"), F.col("_e_skipped")).alias("source"),
        *ORIGIN,
        error,
        *extra,
        *([F.when(~good, F.col("_e_raw")).alias("_raw")] if binary else []),
    )
    return events


def event_schema(*, binary: bool) -> T.StructType:
    """The schema :func:`project` gives (events, origin, ``_error``; binary: ``_offset``, ``_raw``)."""
    fields = [
        *EVENT_SCHEMA.fields,
        T.StructField("_file", T.StringType()),
        T.StructField("_block", T.LongType()),
        T.StructField("_row", T.LongType()),
        T.StructField("_error", T.StringType()),
    ]
    if binary:
        fields += [T.StructField("_offset", T.LongType()), T.StructField("_raw", T.StringType())]
    return T.StructType(fields)


def empty_events(spark: SparkSession, *, binary: bool) -> DataFrame:
    """No events, with :func:`project`'s columns (an input of no record files)."""
    return spark.createDataFrame([], event_schema(binary=binary))


__all__ = ["BINARY", "ORIGIN", "Parts", "empty_events", "event_schema", "project", "sequence", "source_map"]
