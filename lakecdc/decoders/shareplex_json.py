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
from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import (
    IMAGE_TYPE,
    digits,
    last_wins,
    padded_parts,
    sortable_position,
    with_padded_parts,
    zero_pad,
)
from lakecdc.decode.files.lines import CORRUPT, read_json
from lakecdc.decoders.base import Decoder, first_error, parse_op_ts, session_is_utc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: ``meta.op`` (lower case, ``_`` read as a space) -> canonical op, or ``-ddl`` for skipped DDL.
OPS: dict[str, str] = {
    "ins": "I", "insert": "I", "upd": "U", "update": "U", "del": "D", "delete": "D",
    "truncate": "T", "trunc": "T", "truncate table": "T",
    "drop column": "-ddl", "dropcol": "-ddl", "ddl": "-ddl",
}
SPLIT_UPDATES = ("update before", "update after", "upd before", "upd after")
#: ``meta``'s members in the order DTS writes them (seed 002): a message whose ``meta`` has exactly
#: these, in this order, has its members read by position after one comparison of the names,
#: instead of one search of the names per member
META_ORDER = ("time", "userid", "op", "scn", "rowid", "trans", "seq", "size", "table", "idx", "posttime")
_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
_SCN_DIGITS = 20
_IDX_WIDTH = 6
_PART_WIDTH = 10


def _schema(value: T.DataType) -> T.StructType:
    image = T.MapType(T.StringType(), value)
    return T.StructType([T.StructField("meta", _TEXT_MAP), T.StructField("data", image), T.StructField("key", image)])


def _lookup(mapping: dict[str, str], key: Column) -> Column:
    return F.element_at(F.create_map(*[F.lit(x) for kv in mapping.items() for x in kv]), key)


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

    name: ClassVar[str] = "shareplex-json"
    LINES: ClassVar[bool] = True
    OPTIONS: ClassVar[dict[str, str]] = {"keysFromKeyObject": "false"}

    def __init__(self, options: dict[str, str] | None = None) -> None:
        super().__init__(options)
        self.keys_from_key = self.flag("keysFromKeyObject")

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before`` (``key``, else a delete's ``data``), ``after`` (``data``) as maps of
        variants: the JSON types of the values, for type inference."""
        df = read_json(spark, files, _schema(T.VariantType()), staging=staging)
        op = _lookup(OPS, F.replace(F.lower(F.trim(F.col("meta")["op"])), F.lit("_"), F.lit(" ")))
        return df.select(
            F.col("meta")["table"].alias("table"),
            F.when(op == "D", F.coalesce("data", "key")).otherwise(F.col("key")).alias("before"),
            F.when(op != "D", F.col("data")).alias("after"),
        )

    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        # Staged projections, each value computed once per message: Spark shares no
        # subexpression between the branches of a CASE WHEN, and the checks below read the op
        # (a map lookup after trim, lower and a regex) a dozen times. The optimizer keeps a
        # projection apart when another reads its non-trivial values more than once
        # (CollapseProject); the meta members go through a struct for that reason (a map lookup
        # alone counts as trivial and would be repeated).
        data, key, meta = F.col("data"), F.col("key"), F.col("meta")
        last_win = last_wins(spark)
        derived = None
        if not last_win:
            # the lambda (map_filter) next to the reader, only for the rare messages that need it:
            # a key column among the changed columns
            overlap = F.arrays_overlap(F.map_keys(key), F.map_keys(data))
            derived = {"_key_rest": F.when(F.coalesce(overlap, F.lit(True)), F.map_filter(
                F.coalesce(key, F.create_map().cast(IMAGE_TYPE)), lambda k, _v: ~F.map_contains_key(data, k)))}
        m = read_json(spark, files, _schema(T.StringType()), staging=staging, derived=derived)
        m = m.select("*", (F.map_keys(meta) == F.array(*map(F.lit, META_ORDER))).alias("_usual"))
        usual = F.col("_usual")

        def member(name: str) -> Column:
            return F.when(usual, F.map_values(meta)[META_ORDER.index(name)]).otherwise(meta[name])

        # meta without a member named 'skipped' (source['skipped'] marks a skipped record): the
        # entry taken out by value, without a lambda
        entry = F.struct(F.lit("skipped").alias("key"), meta["skipped"].alias("value"))
        m = m.select("*", F.when(~usual & F.map_contains_key(meta, "skipped"), F.map_from_entries(
            F.array_except(F.map_entries(meta), F.array(entry)))).alias("_meta_rest"))
        members = F.struct(
            member("op").alias("op"), member("table").alias("table"), F.trim(member("scn")).alias("scn"),
            member("time").alias("time"), F.trim(member("seq")).alias("seq"), member("trans").alias("trans"),
        )
        m = m.select("*", members.alias("_m"))
        raw_op, scn, seq_text = F.col("_m.op"), F.col("_m.scn"), F.col("_m.seq")
        # the op as written (ins, upd, del) found first; trimmed, in lower case, '_' as a space only
        # when it is not
        m = m.select("*", _lookup(OPS, raw_op).alias("_direct"))
        normal = F.when(F.col("_direct").isNull(), F.replace(F.lower(F.trim(raw_op)), F.lit("_"), F.lit(" ")))
        m = m.select("*", normal.alias("_op_text"))
        m = m.select("*", F.coalesce("_direct", _lookup(OPS, F.col("_op_text"))).alias("_mapped"))
        op_text, mapped = F.col("_op_text"), F.col("_mapped")
        op = F.when(~mapped.startswith("-"), mapped)
        skipped = F.when(mapped.startswith("-"), F.substring(mapped, 2, 100))
        table = F.when(F.trim("_m.table") != "", F.col("_m.table"))
        op_ts = parse_op_ts(F.trim("_m.time"), utc_session=session_is_utc(spark))
        idx_text = F.substring_index(F.trim(member("idx")), "/", 1)  # (looked up only without 'seq')
        event = F.col("_op").isNotNull()
        error = first_error(
            (F.col(CORRUPT).isNotNull(), "not valid JSON, or a member of the wrong type "
             "(expected 'meta', 'data' and 'key' objects)"),
            (meta.isNull(), "'meta' missing (expected an object)"),
            (raw_op.isNull(), "'meta.op' missing"),
            (op_text.isin(*SPLIT_UPDATES), F.format_string(
                "meta.op '%s': an update split into before and after messages cannot be paired reliably; "
                "have SharePlex write whole updates ('upd')", raw_op)),
            (mapped.isNull(), F.format_string(
                "unknown meta.op '%s' (expected one of ins, upd, del, truncate; drop column is skipped)", raw_op)),
            (F.col("_table").isNull(), "'meta.table' missing or empty"),
            (event & ~F.coalesce(digits(scn, _SCN_DIGITS), F.lit(False)), F.format_string(
                "'meta.scn' missing or not a number: '%s' (it orders the changes)", F.coalesce(scn, F.lit("")))),
            (event & F.col("_op_ts").isNull(), F.format_string(
                "'meta.time' missing or not a timestamp: '%s'", F.coalesce("_m.time", F.lit("")))),
            (event & seq_text.isNotNull() & ~F.coalesce(digits(seq_text, 9), F.lit(False)),
             F.format_string("'meta.seq' is not a whole number: '%s'", seq_text)),
            ((F.col("_op") == "I") & data.isNull(), F.format_string(
                "'data' missing for meta.op '%s' (expected the row)", raw_op)),
            ((F.col("_op") == "U") & data.isNull(), F.format_string(
                "'data' missing for meta.op '%s' (expected the changed columns)", raw_op)),
            ((F.col("_op") == "D") & data.isNull() & key.isNull(), F.format_string(
                "'data' missing for meta.op '%s' (expected the row)", raw_op)),
        )
        m = m.select("*", op.alias("_op"), skipped.alias("_skipped"), table.alias("_table"), op_ts.alias("_op_ts"))
        m = m.select("*", error.alias("_err"))
        op, skipped = F.col("_op"), F.col("_skipped")
        idx = F.when(event, F.coalesce(seq_text.try_cast("int"), idx_text.try_cast("int"), F.lit(0)))
        m = with_transaction_position(m, "_trans_pos", F.when(event, F.col("_m.trans")))
        pos = F.when(event, F.concat(sortable_position(scn), F.lit("."), F.col("_trans_pos")))
        m = m.select("*", idx.alias("_idx"), pos.alias("_pos"))
        seq = F.when(event, F.concat_ws("|", "_pos", zero_pad(F.col("_idx").cast("string"), _IDX_WIDTH)))
        key_names = F.when(F.size(key) > 0, F.map_keys(key)) if self.keys_from_key else F.lit(None)
        # key with data laid over it (under LAST_WIN, data's values win; else _key_rest is key
        # without data's names, NULL when no key column is among them): an update's after image,
        # a delete's before image (the row, and what key adds to it)
        kept_key = F.coalesce(key, F.create_map().cast(IMAGE_TYPE)) if last_win else F.coalesce(F.col("_key_rest"), key)
        before = F.when(op == "U", key).when(op == "D", F.when(
            data.isNull(), key).when(key.isNull(), data).otherwise(F.map_concat(kept_key, data)))
        after = F.when(op == "I", data).when(op == "U", F.map_concat(kept_key, data))
        plain = meta.isNotNull() & skipped.isNull() & F.col("_meta_rest").isNull()
        source = F.when(plain, meta).otherwise(F.map_concat(
            F.coalesce("_meta_rest", meta, F.create_map().cast(_TEXT_MAP)),
            F.when(skipped.isNotNull(), F.create_map(F.lit("skipped"), skipped)).otherwise(F.create_map().cast(_TEXT_MAP)),
        ))
        return m.select(
            F.col("_table").alias("table"),
            F.when(F.col("_err").isNull(), op).alias("op"),
            F.when(event, F.col("_op_ts")).alias("op_ts"),
            F.col("_pos").alias("pos"),
            F.col("_idx").alias("idx"),
            seq.alias("seq"),
            F.when(event, F.col("_m.trans")).alias("txid"),
            F.when(event, key_names).cast(T.ArrayType(T.StringType())).alias("keys"),
            before.alias("before"),
            after.alias("after"),
            source.alias("source"),
            "_file", "_block", "_row",
            F.col("_err").alias("_error"),
        )
