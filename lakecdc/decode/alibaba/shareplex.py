"""SharePlex JSON, as written by Alibaba DTS (seed 002) and by Quest SharePlex, ``--format shareplex-json``.

One message per line (pretty-printed messages are read too), one operation per message::

    {"meta": {"time": "2017-06-16T14:24:34", "userid": 84, "op": "upd", "scn": "14589063118712",
              "rowid": "AAATGpAAIAAItcIAAA", "trans": "7.0.411499", "seq": 2, "size": 11,
              "table": "CL_BIZ1.MIO_LOG", "idx": "2/11", "posttime": "2017-06-16T14:33:52"},
     "data": {"CNTR_NO": "1171201606"},
     "key": {"MIO_LOG_ID": "32537893", "CNTR_NO": "1171201606syui26"}}

* ``meta.op``: ``ins`` (``insert``) gives ``I`` with the row in ``data``; ``del`` (``delete``)
  gives ``D`` with the row in ``data`` and ``key`` (``key``'s values for the columns ``data`` does
  not carry); ``truncate`` (``trunc``) gives ``T``; ``upd`` (``update``) gives ``U``: ``data``
  holds the new values of the changed columns only (every other column is *missing*, never NULL)
  and ``key`` the old values of the columns SharePlex identifies the row by. ``key`` is a **before
  image**, not a declaration of the primary key: in the DTS document's own update example it holds
  five columns, two of them NULL, among them the changed ``CNTR_NO`` with its old value. The
  before image is ``key``; the after image is ``data`` plus the ``key`` columns it does not carry
  (their values did not change). When a column of the table's primary key (``--key``) has in
  ``data`` a value other than in ``key``, the update is a primary-key update; a changed column
  that is not a key column is an ordinary update. ``drop column`` (``dropcol``) is a skipped
  record (``source['skipped'] = 'ddl'``). ``update before`` / ``update after`` (images of one
  update split into two messages) cannot be paired reliably and are quarantined.
* ``keys``: none. SharePlex messages do not declare the primary key, so a table's key is given
  with ``--key`` (or a contract). ``keysFromKeyObject=true`` takes the names of an update's ``key``
  members as the key instead, for a SharePlex set up to write exactly the key columns there.
* ``table`` is ``meta.table``; ``txid`` is ``meta.trans``; ``op_ts`` is ``meta.time`` (UTC commit
  time); ``source`` holds every ``meta`` member as text (``time``, ``posttime``, ``userid``,
  ``scn``, ``rowid``, ``trans``, ``seq``, ``size``, ``idx``, ...).
* **Order** (``seq``): ``scn`` (the commit SCN), then the transaction id, then ``meta.seq`` (the
  operation's 1-based number in its transaction; from ``meta.idx`` ``seq/size`` when ``seq`` is
  absent). ``pos`` is ``<scn, 20 digits>.<trans, each part 10 digits>``; ``idx`` is ``meta.seq``.
  ``seq`` is ``<pos>|<idx, 6 digits>``: the commit time is not part of it (the SCN orders
  commits; ``time`` has one-second resolution).
* **Values** are text as written: strings as they are, numbers with their exact digits. SharePlex
  JSON declares no types: the pipeline infers them from the JSON values (whole numbers bigint,
  numbers with a fraction decimal, everything else string; see :mod:`lakecdc.changes.columns`).

Bad records (not JSON, no ``meta``, an unknown ``meta.op``, no ``meta.table``, an ``scn`` that is
no number, a ``time`` that is no timestamp, no row for an insert, update or delete) are
quarantined with the reason; the rest of the file applies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import IMAGE_TYPE, digits, padded_parts, sortable_position, with_padded_parts
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.checks import (
    bad_json,
    bad_time,
    blank_as_null,
    image_missing,
    missing,
    op_missing,
    refused,
    unknown_op,
)
from lakecdc.decode.event import Parts
from lakecdc.decode.files.lines import CORRUPT, read_json
from lakecdc.decode.spec import Names, Op, OpTable, Option, Ordering, VendorSpec
from lakecdc.decode.times import parse_op_ts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: ``meta.op`` (lower case, ``_`` read as a space) -> canonical op.
OPS: dict[str, Op] = {
    "ins": "I", "insert": "I", "upd": "U", "update": "U", "del": "D", "delete": "D",
    "truncate": "T", "trunc": "T", "truncate table": "T",
}
#: ``meta.op`` of skipped DDL.
DDL_OPS = ("drop column", "dropcol", "ddl")
SPLIT_UPDATES = ("update before", "update after", "upd before", "upd after")
_SPLIT = ("meta.op '%s': an update split into before and after messages cannot be paired reliably; "
          "have SharePlex write whole updates ('upd')")
#: ``meta``'s members in the order DTS writes them (seed 002): a message whose ``meta`` has exactly
#: these, in this order, has its members read by position after one comparison of the names,
#: instead of one search of the names per member
META_ORDER = ("time", "userid", "op", "scn", "rowid", "trans", "seq", "size", "table", "idx", "posttime")
_SCN_DIGITS = 20
_IDX_WIDTH = 6
_PART_WIDTH = 10

SHAREPLEX = VendorSpec(
    name="shareplex-json",
    ops=OpTable(OPS, skipped=dict.fromkeys(DDL_OPS, "ddl"), refused=dict.fromkeys(SPLIT_UPDATES, _SPLIT),
                normal="lower-trim-underscore", expected="one of ins, upd, del, truncate; drop column is skipped"),
    ordering=Ordering("pos-idx", idx_width=_IDX_WIDTH),
    names=Names(table="meta.table", op="meta.op", op_ts="meta.time"),
    options=(Option("keysFromKeyObject", "false", "flag"),),
    lines=True,
)


def _schema(value: T.DataType) -> T.StructType:
    image = T.MapType(T.StringType(), value)
    text = T.MapType(T.StringType(), T.StringType())
    return T.StructType([T.StructField("meta", text), T.StructField("data", image), T.StructField("key", image)])


def transaction_position(trans: Column) -> Column:
    """An Oracle transaction id (``7.0.411499``) with each part padded to 10 digits, so that ids
    compare part by part (only a tie-break between transactions of one SCN); a part of 10
    characters or more is kept whole (:func:`~lakecdc.changes.events.padded_parts`)."""
    return padded_parts(trans, ".", _PART_WIDTH)


def with_transaction_position(df: DataFrame, name: str, trans: Column) -> DataFrame:
    """``df`` with a column ``name``: :func:`transaction_position` of ``trans``, in projections of
    its own (:func:`~lakecdc.changes.events.with_padded_parts`)."""
    return with_padded_parts(df, name, trans, ".", _PART_WIDTH)


class SharePlexJsonDecoder(Decoder):
    """SharePlex JSON messages to canonical change events (one operation per message)."""

    spec = SHAREPLEX

    def __init__(self, options: dict[str, str] | None = None) -> None:
        super().__init__(options)
        self.keys_from_key = self.flag("keysFromKeyObject")

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before`` (``key``, else a delete's ``data``), ``after`` (``data``) as maps of
        variants: the JSON types of the values, for type inference."""
        df = read_json(spark, files, _schema(T.VariantType()), staging=staging)
        code = SHAREPLEX.op_table(self.options).code(F.col("meta")["op"])
        return df.select(
            F.col("meta")["table"].alias("table"),
            F.when(code == "D", F.coalesce("data", "key")).otherwise(F.col("key")).alias("before"),
            F.when(code != "D", F.col("data")).alias("after"),
        )

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """Messages with their members, op and positions each in a column of their own.

        Staged projections, each value computed once per message: Spark shares no subexpression
        between the branches of a CASE WHEN, and the checks read the op a dozen times. The
        optimizer keeps a projection apart when another reads its non-trivial values more than
        once (CollapseProject); the meta members go through a struct for that reason (a map
        lookup alone counts as trivial and would be repeated).
        """
        data, key, meta = F.col("data"), F.col("key"), F.col("meta")
        derived = None
        if not ctx.last_win:
            # the lambda (map_filter) next to the reader, only for the rare messages that need it:
            # a key column among the changed columns
            overlap = F.arrays_overlap(F.map_keys(key), F.map_keys(data))
            derived = {"_key_rest": F.when(F.coalesce(overlap, F.lit(True)), F.map_filter(
                F.coalesce(key, F.create_map().cast(IMAGE_TYPE)), lambda k, _v: ~F.map_contains_key(data, k)))}
        m = read_json(ctx.spark, inputs, _schema(T.StringType()), staging=ctx.staging, derived=derived)
        m = m.select("*", (F.map_keys(meta) == F.array(*map(F.lit, META_ORDER))).alias("_usual"))
        usual = F.col("_usual")

        def member(name: str) -> Column:
            return F.when(usual, F.map_values(meta)[META_ORDER.index(name)]).otherwise(meta[name])

        members = F.struct(
            member("op").alias("op"), member("table").alias("table"), F.trim(member("scn")).alias("scn"),
            member("time").alias("time"), F.trim(member("seq")).alias("seq"), member("trans").alias("trans"),
        )
        m = m.select("*", members.alias("_m"))
        m = m.select("*", SHAREPLEX.op_table(self.options).code(F.col("_m.op")).alias("_code"))
        op, skipped, refusal = SHAREPLEX.op_table(self.options).sql(F.col("_m.op"), F.col("_code"))
        m = m.select("*", op.alias("_op"), skipped.alias("_skipped"), refusal.alias("_refused"),
                     blank_as_null(F.col("_m.table")).alias("_table"),
                     parse_op_ts(F.trim("_m.time"), utc_session=ctx.utc).alias("_op_ts"))
        event = F.col("_op").isNotNull()
        m = with_transaction_position(m, "_trans_pos", F.when(event, F.col("_m.trans")))
        seq_text = F.col("_m.seq")
        idx_text = F.substring_index(F.trim(member("idx")), "/", 1)  # (looked up only without 'seq')
        idx = F.coalesce(seq_text.try_cast("int"), idx_text.try_cast("int"))
        pos = F.concat(sortable_position(F.col("_m.scn")), F.lit("."), F.col("_trans_pos"))
        return m.select("*", F.when(event, idx).alias("_idx"), F.when(event, pos).alias("_pos"))

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        data, key, meta = F.col("data"), F.col("key"), F.col("meta")
        op, raw_op, scn, seq_text = F.col("_op"), F.col("_m.op"), F.col("_m.scn"), F.col("_m.seq")
        event = op.isNotNull()
        names = self.spec.names
        # key with data laid over it (under LAST_WIN, data's values win; else _key_rest is key
        # without data's names, NULL when no key column is among them): an update's after image,
        # a delete's before image (the row, and what key adds to it)
        kept_key = F.coalesce(key, F.create_map().cast(IMAGE_TYPE)) if ctx.last_win else F.coalesce(F.col("_key_rest"), key)
        deleted = F.when(data.isNull(), key).when(key.isNull(), data).otherwise(F.map_concat(kept_key, data))
        checks = [
            bad_json(F.col(CORRUPT), "'meta', 'data' and 'key' objects"),
            (meta.isNull(), "'meta' missing (expected an object)"),
            op_missing(raw_op, names.op),
            refused(F.col("_refused")),
            unknown_op(raw_op, F.col("_code").isNotNull(), SHAREPLEX.op_table(self.options), names.op),
            missing(F.col("_table"), names.table),
            (event & ~F.coalesce(digits(scn, _SCN_DIGITS), F.lit(False)), F.format_string(
                "'meta.scn' missing or not a number: '%s' (it orders the changes)", F.coalesce(scn, F.lit("")))),
            bad_time(F.col("_op_ts"), F.col("_m.time"), names.op_ts, where=event),
            (event & seq_text.isNotNull() & ~F.coalesce(digits(seq_text, 9), F.lit(False)),
             F.format_string("'meta.seq' is not a whole number: '%s'", seq_text)),
            image_missing((op == "I") & data.isNull(), "data", names.op, raw_op, "the row"),
            image_missing((op == "U") & data.isNull(), "data", names.op, raw_op, "the changed columns"),
            image_missing((op == "D") & data.isNull() & key.isNull(), "data", names.op, raw_op, "the row"),
        ]
        return Parts(
            table=F.col("_table"),
            op=op,
            op_ts=F.when(event, F.col("_op_ts")),
            pos=F.col("_pos"),
            idx=F.col("_idx"),
            txid=F.when(event, F.col("_m.trans")),
            keys=F.when(event & (F.size(key) > 0), F.map_keys(key)) if self.keys_from_key else None,
            before=F.when(op == "U", key).otherwise(deleted),
            after=F.when(op == "I", data).otherwise(F.map_concat(kept_key, data)),
            source=meta,
            skipped=F.col("_skipped"),
            checks=checks,
        )


__all__ = ["SHAREPLEX", "SharePlexJsonDecoder", "transaction_position", "with_transaction_position"]
