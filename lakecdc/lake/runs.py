"""Run reports: one row per table and run in ``<target>/_lakecdc_runs``, and ``lakecdc status``.

Every run of :func:`lakecdc.apply` appends, per table it touched, what it did (events, inserted,
updated, deleted, duplicate/late, quarantined, skipped, held, MERGE files), when (start, end,
seconds), how far the table has got (the newest source ``op_ts`` and ``seq`` applied) and the
input files. It is a Delta table, so notebooks and monitors query it like any other::

    spark.read.format("delta").load("lake/_lakecdc_runs") \\
         .groupBy("source_table").agg(F.max("finished_at"), F.max("last_op_ts"))

:func:`status` reads it back: per table the last run and the **lag** (now minus the newest
source commit time applied), what ``lakecdc status`` prints.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

if TYPE_CHECKING:
    from collections.abc import Sequence

    from lakecdc.lake.ledger import InputFile
    from lakecdc.lake.store import Store
    from lakecdc.lake.summary import RunSummary

RUNS_APP_ID = "lakecdc-runs"

RUNS_SCHEMA = pa.schema([
    ("run_id", pa.int64()),
    ("source_table", pa.string()),
    ("target", pa.string()),
    ("format", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("started_at", pa.timestamp("us", tz="UTC")),
    ("finished_at", pa.timestamp("us", tz="UTC")),
    ("seconds", pa.float64()),
    ("input_files", pa.int64()),
    ("inputs", pa.list_(pa.string())),
    ("events", pa.int64()),
    ("inserted", pa.int64()),
    ("updated", pa.int64()),
    ("deleted", pa.int64()),
    ("duplicate_or_late", pa.int64()),
    ("quarantined", pa.int64()),
    ("skipped", pa.int64()),
    ("held", pa.int64()),
    ("files_scanned", pa.int64()),
    ("files_skipped", pa.int64()),
    ("files_rewritten", pa.int64()),
    ("delta_version", pa.int64()),
    ("last_op_ts", pa.timestamp("us", tz="UTC")),
    ("last_seq", pa.string()),
    ("lag_seconds", pa.float64()),
    # per input: the landing file it came from and how far into it the run read (``lakecdc repair``
    # rebuilds a lost ledger from them)
    ("input_origins", pa.list_(pa.string())),
    ("input_ends", pa.list_(pa.int64())),
])


def runs_path(target: str) -> str:
    return str(Path(target) / "_lakecdc_runs")


def record_run(
    engine: Store, target: str, summary: RunSummary, *, run_id: int, inputs: list[str],
    started: dt.datetime, finished: dt.datetime, files: Sequence[InputFile] | None = None,
) -> None:
    """Append one row per table of ``summary`` (one run); idempotent per run id. ``files``: the
    run's inputs as the ledger has them (their landing file and the bytes read)."""
    origins = [f.source for f in files] if files is not None else None
    ends = [f.consumed for f in files] if files is not None else None
    rows = []
    for t in summary.tables:
        last = dt.datetime.fromisoformat(t.last_op_ts) if t.last_op_ts else None
        rows.append({
            "run_id": run_id, "source_table": t.source_table, "target": t.target, "format": summary.format,
            "status": t.status, "error": t.error, "started_at": started, "finished_at": finished,
            "seconds": (finished - started).total_seconds(), "input_files": len(inputs), "inputs": inputs,
            "events": t.events, "inserted": t.inserted, "updated": t.updated, "deleted": t.deleted,
            "duplicate_or_late": t.duplicate_or_late, "quarantined": t.quarantined, "skipped": t.skipped,
            "held": t.held, "files_scanned": t.files_scanned, "files_skipped": t.files_skipped,
            "files_rewritten": t.files_rewritten, "delta_version": t.delta_version, "last_op_ts": last,
            "last_seq": t.last_seq, "lag_seconds": (finished - last).total_seconds() if last else None,
            "input_origins": origins, "input_ends": ends,
        })
    if rows:
        engine.append(runs_path(target), pa.Table.from_pylist(rows, schema=RUNS_SCHEMA), version=run_id,
                      app_id=RUNS_APP_ID)


@dataclass(frozen=True)
class TableStatus:
    """Where one table stands: its last run and how far behind the source it is."""

    source_table: str
    target: str
    last_run: int
    last_status: str
    finished_at: dt.datetime
    last_op_ts: dt.datetime | None
    runs: int
    events: int

    def lag(self, now: dt.datetime | None = None) -> dt.timedelta | None:
        """Now minus the newest source commit time applied (None before any row change)."""
        if self.last_op_ts is None:
            return None
        return (now or dt.datetime.now(dt.timezone.utc)) - self.last_op_ts


def status(engine: Store, target: str) -> list[TableStatus]:
    """Per table: its last run, the newest ``op_ts`` ever applied, runs and events so far."""
    path = runs_path(target)
    if not engine.exists(path):
        return []
    runs = engine.read_arrow(path).sort_by([("run_id", "ascending")])
    out = []
    for table in sorted(set(runs.column("source_table").to_pylist())):
        mine = runs.filter(pc.equal(runs.column("source_table"), table))
        last = mine.slice(mine.num_rows - 1).to_pylist()[0]
        newest = pc.max(mine.column("last_op_ts")).as_py()
        out.append(TableStatus(
            source_table=table, target=last["target"], last_run=last["run_id"], last_status=last["status"],
            finished_at=last["finished_at"], last_op_ts=newest, runs=mine.num_rows,
            events=int(pc.sum(mine.column("events")).as_py() or 0),
        ))
    return out


def render_status(rows: list[TableStatus], now: dt.datetime | None = None) -> str:
    """``lakecdc status`` output: one line per table."""
    if not rows:
        return "no runs recorded yet"
    head, body = list(STATUS_HEAD), status_rows(rows, now)
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=True)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in body]
    return "\n".join(lines)


#: the columns of :func:`status_rows`
STATUS_HEAD = ("table", "last run", "status", "finished (UTC)", "newest op_ts (UTC)", "lag", "runs", "events")


def status_rows(rows: list[TableStatus], now: dt.datetime | None = None) -> list[list[str]]:
    """One row of text per table under :data:`STATUS_HEAD` (the lag as of ``now``)."""
    now = now or dt.datetime.now(dt.timezone.utc)
    body = []
    for r in rows:
        lag = r.lag(now)
        body.append([
            r.source_table, str(r.last_run), r.last_status, r.finished_at.strftime("%Y-%m-%d %H:%M:%S"),
            r.last_op_ts.strftime("%Y-%m-%d %H:%M:%S") if r.last_op_ts else "-",
            _human(lag) if lag is not None else "-", str(r.runs), str(r.events),
        ])
    return body


def _human(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {minutes}m"
    return f"{sign}{minutes}m {secs}s"
