"""What the GoldenGate formatters share once a record is parsed: op keys, source metadata, the
canonical columns in order, and the row formatters' split primary-key updates joined again."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from lakecdc.changes.events import default_seq
from lakecdc.errors import ConfigError

#: The row formatters' ``pkUpdateHandling`` values (seed 000: ``abend`` is the default).
PK_UPDATE_HANDLING = ("abend", "update", "delete-insert")


def check_pk_update_handling(fmt: str, value: str) -> None:
    if value not in PK_UPDATE_HANDLING:
        raise ConfigError(f"{fmt}: pkUpdateHandling={value!r} is not one of {', '.join(PK_UPDATE_HANDLING)}")


def op_keys(fmt: str, options: Mapping[str, str]) -> dict[str, str]:
    """``{op_type text: canonical op}`` from the ``*OpKey`` options (they must differ)."""
    op_map = {options["insertOpKey"]: "I", options["updateOpKey"]: "U",
              options["deleteOpKey"]: "D", options["truncateOpKey"]: "T"}
    if len(op_map) < 4:
        raise ConfigError(f"{fmt}: insertOpKey, updateOpKey, deleteOpKey and truncateOpKey must differ")
    return op_map


def op_column(op_map: Mapping[str, str], op_type: Column) -> tuple[Column, str]:
    """The canonical op (I/U/D/T) of a GoldenGate op_type text, and the expected texts as text."""
    op = F.element_at(F.create_map(*[F.lit(x) for kv in op_map.items() for x in kv]), op_type)
    return op, ", ".join(op_map)


def source_map(current_ts: Column, tokens: Column, *extra: Column) -> Column:
    """``source``: ``current_ts`` (then ``extra`` key/value columns) and every token as ``token.<name>``."""
    return F.map_concat(
        F.create_map(F.lit("current_ts"), current_ts, *extra),
        F.coalesce(
            F.transform_keys(tokens, lambda k, _v: F.concat(F.lit("token."), k)),
            F.create_map().cast("map<string,string>"),
        ),
    )


def canonical_events(
    parsed: DataFrame, *, op: Column, op_ts: Column, before: Column, after: Column, source: Column,
    error: Column, extra: tuple[Column | str, ...] = (),
) -> DataFrame:
    """The canonical columns of one operation per message (``m_table``, ``m_pos`` and
    ``m_primary_keys`` from ``parsed``), then the origin columns, ``_error`` and ``extra``."""
    idx = F.lit(0)
    return parsed.select(
        F.col("m_table").alias("table"),
        op.alias("op"),
        op_ts.alias("op_ts"),
        F.col("m_pos").alias("pos"),
        idx.alias("idx"),
        default_seq(op_ts, F.col("m_pos"), idx).alias("seq"),
        F.lit(None).cast("string").alias("txid"),
        F.col("m_primary_keys").alias("keys"),
        before.alias("before"),
        after.alias("after"),
        source.alias("source"),
        "_file", "_block", "_row",
        error.alias("_error"),
        *extra,
    )


def rejoin_split_key_changes(events: DataFrame) -> DataFrame:
    """A row formatter's split primary-key updates joined again into the updates they were.

    With ``pkUpdateHandling=delete-insert`` a row formatter writes a primary-key update as a
    delete of the before image and an insert of the after image, both at the update's own
    ``op_ts`` and ``pos``. A trail position belongs to one operation, so a good delete and a good
    insert of one table at the same ``(op_ts, pos)`` are exactly such a pair: each becomes one
    ``U`` event (``before`` = the delete's image, ``after`` = the insert's image, the delete's
    origin), which the pipeline then applies by its ``pk_update`` setting like an op-modeled key
    change. Replayed pairs pair up in file order (the k-th delete with the k-th insert); a half
    without a partner (the other half in another batch) stays as it is. Records without a
    position, bad records and other ops pass through untouched.

    Costs one shuffle of the deletes and inserts, so decoders call it only when told the
    formatter split key changes.
    """
    cols = events.columns
    pairable = F.coalesce(
        F.col("_error").isNull() & F.col("op").isin("D", "I") & (F.coalesce(F.col("pos"), F.lit("")) != ""),
        F.lit(False),
    )
    marked = events.withColumn("_pairable", pairable)
    rest = marked.where(~F.col("_pairable")).drop("_pairable")
    group = Window.partitionBy("table", "op_ts", "pos")
    me = F.struct("_file", "_block", "_row")
    inserts = F.collect_list(F.when(F.col("op") == "I", F.struct(me.alias("w"), F.col("after").alias("after")))).over(group)
    deletes = F.collect_list(F.when(F.col("op") == "D", me)).over(group)
    cand = marked.where("_pairable").drop("_pairable").withColumn("_ins", inserts).withColumn("_dels", deletes)
    ins_where = F.array_sort(F.transform("_ins", lambda x: x["w"]))
    dels = F.array_sort(F.col("_dels"))
    rank = F.when(F.col("op") == "D", F.size(F.filter(dels, lambda x: x < me)) + 1).otherwise(
        F.size(F.filter(ins_where, lambda x: x < me)) + 1)
    cand = cand.withColumn("_rank", rank)
    partner = F.element_at(ins_where, F.col("_rank"))
    joined = (F.col("op") == "D") & (F.col("_rank") <= F.size("_ins"))
    partner_after = F.element_at(F.filter("_ins", lambda x: x["w"] == partner), 1)["after"]
    paired = (
        cand.where((F.col("op") == "D") | (F.col("_rank") > F.size("_dels")))  # inserts with a delete go
        .withColumn("after", F.when(joined, partner_after).otherwise(F.col("after")))
        .withColumn("op", F.when(joined, F.lit("U")).otherwise(F.col("op")))
        .select(*cols)
    )
    return rest.unionByName(paired)
