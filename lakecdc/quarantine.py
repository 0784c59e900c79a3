"""Records that could not be applied: kept with file, line, table, raw text and the reason.

The quarantine is one Delta table per target (``<target>/_quarantine``), appended once per run
(idempotently, with the run's transaction version). Good records of the same batch still apply.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from lakecdc.decoders._records import read_records, resolve_lines
from lakecdc.state import quarantine_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.merge.delta_rs import DeltaRsEngine

QUARANTINE_SCHEMA = pa.schema(
    [
        ("run_id", pa.int64()),
        ("format", pa.string()),
        ("file", pa.string()),
        ("line", pa.int64()),
        ("source_table", pa.string()),
        ("reason", pa.string()),
        ("raw", pa.string()),
        ("quarantined_at", pa.timestamp("us", tz="UTC")),
    ]
)
#: Columns a bad-record DataFrame must have to be quarantined.
BAD_COLUMNS = ("_file", "_block", "_row", "_line", "table", "_error", "_raw")


@dataclass(frozen=True)
class Quarantined:
    """One quarantined record, for messages."""

    file: str
    line: int | None
    table: str | None
    reason: str

    def message(self, fmt: str) -> str:
        where = f"line {self.line} of {self.file}" if self.line is not None else self.file
        table = f" (table {self.table})" if self.table else ""
        return f"{fmt}: {where}{table}: {self.reason}; the record was quarantined"


def collect_bad(spark: SparkSession, bad: DataFrame, files: Sequence[str]) -> pa.Table:
    """The bad records as rows of the quarantine, their raw text and line numbers filled in.

    Decoders keep the raw text of the records they reject; records rejected later (a value that
    does not fit its column, a missing key) get theirs from a second read of their files, matched
    by their position in the split (reads of the same files are split the same way).
    """
    records = read_records(spark, files)
    with_raw = bad.join(
        records.select("_file", "_block", "_row", F.col("value").alias("_raw2")), ["_file", "_block", "_row"], "left"
    ).withColumn("_raw", F.coalesce("_raw", "_raw2")).drop("_raw2")
    resolved = resolve_lines(spark, records, with_raw)
    return resolved.select(
        F.col("_file").alias("file"), F.col("_line").alias("line"), F.col("table").alias("source_table"),
        F.col("_error").alias("reason"), F.col("_raw").alias("raw"),
    ).orderBy("file", "line").toArrow()


def write_quarantine(
    engine: DeltaRsEngine, target: str, rows: pa.Table, *, fmt: str, run_id: int, now: dt.datetime
) -> list[Quarantined]:
    """Append ``rows`` (from :func:`collect_bad`) to the target's quarantine table."""
    if rows.num_rows == 0:
        return []
    n = rows.num_rows
    table = pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.int64()),
            "format": pa.array([fmt] * n, pa.string()),
            "file": rows.column("file").cast(pa.string()),
            "line": rows.column("line").cast(pa.int64()),
            "source_table": rows.column("source_table").cast(pa.string()),
            "reason": rows.column("reason").cast(pa.string()),
            "raw": rows.column("raw").cast(pa.string()),
            "quarantined_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        },
        schema=QUARANTINE_SCHEMA,
    )
    engine.append(quarantine_path(target), table, version=run_id)
    return [
        Quarantined(r["file"], r["line"], r["source_table"], r["reason"])
        for r in table.select(["file", "line", "source_table", "reason"]).to_pylist()
    ]
