"""Records that could not be applied: kept with file, line, table, raw text and the reason.

The quarantine is one Delta table per target (``<target>/_quarantine``), appended once per run
(idempotently, with the run's transaction version). Good records of the same batch still apply.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from lakecdc.decoders._records import locate, source_of
from lakecdc.state import quarantine_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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
BAD_COLUMNS = ("_file", "_block", "_row", "table", "_error")


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


def collect_bad(bad: DataFrame, events: DataFrame) -> pa.Table:
    """The bad records as rows of the quarantine, with their line numbers and raw text.

    ``bad`` holds ``_file``, ``_block``, ``_row``, ``table`` and ``_error``; ``events`` is the
    (cached) DataFrame they came from. A record's position in its split is its row id minus the
    split's first row id; :func:`~lakecdc.decoders._records.locate` turns that into a line and
    reads the line's text from the file.
    """
    found = bad.select("_file", "_block", "_row", "table", "_error").collect()
    if not found:
        return pa.table({"file": pa.array([], pa.string()), "line": pa.array([], pa.int64()),
                         "source_table": pa.array([], pa.string()), "reason": pa.array([], pa.string()),
                         "raw": pa.array([], pa.string())})
    splits = {(r["_file"], r["_block"]) for r in found}
    firsts = {
        (r["_file"], r["_block"]): r["first"]
        for r in events.where(F.col("_file").isin(sorted({f for f, _ in splits})))
        .groupBy("_file", "_block").agg(F.min("_row").alias("first")).collect()
    }
    ranks: dict[tuple[str, int], set[int]] = {}
    for r in found:
        key = (r["_file"], r["_block"])
        ranks.setdefault(key, set()).add(r["_row"] - firsts[key])
    located = {key: locate(key[0], key[1], rs) for key, rs in ranks.items()}
    out = []
    for r in found:
        key = (r["_file"], r["_block"])
        line, raw = located[key].get(r["_row"] - firsts[key], (None, None))
        out.append({"file": source_of(r["_file"]), "line": line, "source_table": r["table"],
                    "reason": r["_error"], "raw": raw})
    out.sort(key=lambda x: (x["file"], x["line"] or 0))
    return pa.Table.from_pylist(out)


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
