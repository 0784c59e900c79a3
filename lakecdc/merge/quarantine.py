"""Records that could not be applied: kept with file, line, table, raw text and the reason.

Records of binary inputs (Avro) have no line: their decoder gives ``_offset`` (the byte offset
of the message in the file) and ``_raw`` (its bytes, base64), kept as ``offset`` and ``raw``.

The quarantine is one Delta table per target (``<target>/_quarantine``), appended once per run
(idempotently, with the run's transaction version). Good records of the same batch still apply.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import functions as F

from lakecdc.decode.files.reread import locate, source_of
from lakecdc.lake.state import quarantine_path

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from lakecdc.lake.store import Store

QUARANTINE_SCHEMA = pa.schema(
    [
        ("run_id", pa.int64()),
        ("format", pa.string()),
        ("file", pa.string()),
        ("line", pa.int64()),
        ("offset", pa.int64()),
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
    offset: int | None = None

    def message(self, fmt: str) -> str:
        if self.line is not None:
            where = f"line {self.line} of {self.file}"
        elif self.offset is not None:
            where = f"byte offset {self.offset} of {self.file}"
        else:
            where = self.file
        table = f" (table {self.table})" if self.table else ""
        return f"{fmt}: {where}{table}: {self.reason}; the record was quarantined"


def collect_bad(bad: DataFrame, events: DataFrame) -> pa.Table:
    """The bad records as rows of the quarantine, with their line numbers and raw text.

    ``bad`` holds ``_file``, ``_block``, ``_row``, ``table`` and ``_error``; ``events`` is the
    (cached) DataFrame they came from. A record's position in its split is its row id minus the
    split's first row id; :func:`~lakecdc.decode.files.reread.locate` turns that into a line and
    reads the line's text from the file.

    Binary inputs: when ``bad`` (or else ``events``) has ``_offset`` and ``_raw``, those are
    the record's place and raw bytes; the line stays NULL.
    """
    if "_offset" in bad.columns or "_offset" in events.columns:
        return _collect_binary(bad, events)
    found = bad.select("_file", "_block", "_row", "table", "_error").collect()
    if not found:
        return _empty()
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
        out.append({"file": source_of(r["_file"]), "line": line, "offset": None, "source_table": r["table"],
                    "reason": r["_error"], "raw": raw})
    out.sort(key=lambda x: (x["file"], x["line"] or 0))
    return pa.Table.from_pylist(out, schema=_ROWS_SCHEMA)


_ROWS_SCHEMA = pa.schema([(n, QUARANTINE_SCHEMA.field(n).type) for n in ("file", "line", "offset", "source_table", "reason", "raw")])


def _empty() -> pa.Table:
    return _ROWS_SCHEMA.empty_table()


def _collect_binary(bad: DataFrame, events: DataFrame) -> pa.Table:
    """Bad records of binary inputs: offset and raw bytes from the records themselves.

    Records the pipeline found bad after decoding (a NULL key, a value of the wrong type) come
    without ``_offset``/``_raw``; those are looked up in ``events`` by file, split and row.
    """
    own = "_offset" in bad.columns and "_raw" in bad.columns
    cols = ["_file", "_block", "_row", "table", "_error"] + (["_offset", "_raw"] if own else [])
    found = bad.select(*cols).collect()
    if not found:
        return _empty()
    origin: dict[tuple[str, int, int], tuple[int | None, str | None]] = {}
    if not own:
        files = sorted({r["_file"] for r in found})
        ids = sorted({r["_row"] for r in found})
        hits = events.where(F.col("_file").isin(files) & F.col("_row").isin(ids))
        origin = {(r["_file"], r["_block"], r["_row"]): (r["_offset"], r["_raw"])
                  for r in hits.select("_file", "_block", "_row", "_offset", "_raw").collect()}
    out = []
    for r in found:
        offset, raw = (r["_offset"], r["_raw"]) if own else origin.get((r["_file"], r["_block"], r["_row"]), (None, None))
        out.append({"file": r["_file"], "line": None, "offset": offset, "source_table": r["table"],
                    "reason": r["_error"], "raw": raw})
    out.sort(key=lambda x: (x["file"], x["offset"] if x["offset"] is not None else -1))
    return pa.Table.from_pylist(out, schema=_ROWS_SCHEMA)


def write_quarantine(
    engine: Store, target: str, rows: pa.Table, *, fmt: str, run_id: int, now: dt.datetime
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
            "offset": (rows.column("offset") if "offset" in rows.column_names else pa.nulls(n)).cast(pa.int64()),
            "source_table": rows.column("source_table").cast(pa.string()),
            "reason": rows.column("reason").cast(pa.string()),
            "raw": rows.column("raw").cast(pa.string()),
            "quarantined_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        },
        schema=QUARANTINE_SCHEMA,
    )
    engine.append(quarantine_path(target), table, version=run_id)
    return [
        Quarantined(r["file"], r["line"], r["source_table"], r["reason"], r["offset"])
        for r in table.select(["file", "line", "source_table", "reason", "offset"]).to_pylist()
    ]
