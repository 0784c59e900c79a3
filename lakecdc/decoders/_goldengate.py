"""What the GoldenGate formatters share once a record is parsed: op keys, source metadata, the
canonical columns in order."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from lakecdc.changes import default_seq
from lakecdc.errors import ConfigError


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
