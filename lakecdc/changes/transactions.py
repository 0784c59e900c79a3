"""Whole source transactions only: events of a transaction not yet complete wait for a later run.

A change stream cut into files (or Kafka batches) can end in the middle of a source transaction.
Applying half a transaction makes a table show a state the source never had (an order without its
lines). With ``complete_transactions=True`` a run applies a transaction's events only when the
whole transaction is there, and **holds** the others for the next run.

How a run knows a transaction is complete: decoders that read transaction metadata (Debezium's
transaction topic: ``BEGIN`` / ``END`` markers with ``event_count``) emit the markers as skipped
records (``op`` NULL, no ``_error``) with ``txid`` = the transaction id and, in ``source``,
``tx.status`` (``BEGIN`` / ``END``) and, on ``END``, ``tx.event_count`` (the transaction's
data events over all tables). A transaction is complete when its ``END`` marker has been read
and at least ``tx.event_count`` distinct events (table, seq) of it have: duplicates from a
consumer restart do not make a transaction look complete early. Events without a ``txid`` are
never held.

Held events (and the markers of their transactions) are kept as canonical events in
``<target>/_lakecdc/held/run-<id>``, written after the run's tables are committed, and read back
(marked ``source['lakecdc.held']``) by the next run, which applies them with its own files once
their transaction completes. A run that crashes is resumed on the held events of the run before
it (kept until a later run starts), so nothing is lost or applied twice. A transaction whose ``END`` never arrives is held until
it does: the summary's ``held`` count shows it.

A transaction applied once stays complete: its id goes to ``<target>/_lakecdc/transactions``
(with the run and the time) when its run commits, so copies of its events that come again in a
later run (a consumer restart re-reads a topic from an older offset, without the markers) are
applied as the duplicates they are, not held for an END that already came. Ids are forgotten
after the tombstone retention, as deleted keys are.
"""

from __future__ import annotations

import datetime as dt
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.lake.store import Store

#: ``source`` key marking an event read back from the held store (not counted twice as skipped).
HELD = "lakecdc.held"
_RUN_DIR = re.compile(r"run-(\d+)$")


def held_root(target: str) -> Path:
    return Path(target) / "_lakecdc" / "held"


def _held_runs(target: str) -> list[tuple[int, Path]]:
    root = held_root(target)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if (m := _RUN_DIR.search(p.name))]
    return sorted(found)


def split_open_transactions(
    spark: SparkSession, engine: Store, target: str, events: DataFrame, run_id: int
) -> tuple[DataFrame, DataFrame]:
    """``(to apply, to hold)``: this run's events plus those held before run ``run_id``.

    To apply: events of complete transactions, events without a transaction, bad and skipped
    records. To hold: data events of transactions not complete yet, and those transactions'
    markers.
    """
    earlier = [p for r, p in _held_runs(target) if r < run_id]
    applied_before = _applied_path(target)
    for older in earlier[:-1]:  # superseded by the latest (runs commit in order)
        shutil.rmtree(older, ignore_errors=True)
    both = events
    if earlier and engine.exists(str(earlier[-1])):
        held = engine.read(spark, str(earlier[-1]))
        source = F.coalesce("source", F.create_map().cast("map<string,string>"))
        held = held.withColumn("source", F.when(source[HELD].isNotNull(), source).otherwise(
            F.map_concat(source, F.create_map(F.lit(HELD), F.lit(str(run_id))))
        ))
        both = events.unionByName(held.select(*[c for c in held.columns if c in events.columns]),
                                  allowMissingColumns=True)
    good = F.col("_error").isNull()
    data = both.where(good & F.col("op").isNotNull() & F.col("txid").isNotNull())
    seen = data.select("txid", "table", "seq").distinct().groupBy("txid").agg(F.count(F.lit(1)).alias("_seen"))
    ends = both.where(good & F.col("op").isNull() & (F.col("source")["tx.status"] == "END")).select(
        "txid", F.col("source")["tx.event_count"].cast("long").alias("_expected")
    ).groupBy("txid").agg(F.max("_expected").alias("_expected"))
    complete = seen.join(ends, "txid", "full").where(
        F.col("_expected").isNotNull() & (F.coalesce("_seen", F.lit(0)) >= F.col("_expected"))
    ).select("txid", F.lit(True).alias("_complete"))
    if engine.exists(applied_before):  # applied by an earlier run: complete whatever comes again
        done = engine.read(spark, applied_before).where(F.col("run_id") < run_id).select("txid")
        complete = complete.unionByName(done.select("txid", F.lit(True).alias("_complete"))).distinct()
    marked = both.join(complete, "txid", "left")
    # a transaction is open when it has data events or markers and is not complete
    is_open = F.col("txid").isNotNull() & good & F.col("_complete").isNull()
    return marked.where(~is_open).drop("_complete"), marked.where(is_open).drop("_complete")


def _applied_path(target: str) -> str:
    return str(Path(target) / "_lakecdc" / "transactions")


def record_applied(
    engine: Store, target: str, applied: DataFrame, run_id: int, now: dt.datetime, retention: dt.timedelta,
) -> None:
    """Remember the transactions whose events run ``run_id`` applied (once per run), and forget
    those older than ``retention``."""
    import pyarrow as pa

    ids = applied.where(F.col("_error").isNull() & F.col("op").isNotNull() & F.col("txid").isNotNull())
    txids = sorted(r["txid"] for r in ids.select("txid").distinct().collect())
    path = _applied_path(target)
    if txids:
        rows = pa.table({"txid": pa.array(txids, pa.string()), "run_id": pa.array([run_id] * len(txids), pa.int64()),
                         "applied_at": pa.array([now] * len(txids), pa.timestamp("us", tz="UTC"))})
        engine.append(path, rows, version=run_id)
    if engine.exists(path):
        cutoff = (now - retention).astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(sep="T") + "Z"
        engine.delete_where(path, f"applied_at < '{cutoff}'")


def held_files(engine: Store, target: str, run_id: int) -> list[str]:
    """The input files the events held for run ``run_id`` were read from (those still there)."""
    import os

    import pyarrow.compute as pc

    earlier = [p for r, p in _held_runs(target) if r < run_id]
    if not earlier or not engine.exists(str(earlier[-1])):
        return []
    files = pc.unique(engine.read_arrow(str(earlier[-1]), columns=["_file"]).column("_file")).to_pylist()
    return sorted(f for f in files if f and os.path.exists(f))


def write_held(
    engine: Store, target: str, held: DataFrame, run_id: int
) -> tuple[dict[str | None, int], dict[str | None, int]]:
    """Keep ``held`` for the next run; returns the held data events per table, and the markers
    this run read for the first time (skipped records, counted once) per table.

    Called after the run's tables are committed. The held set of the run before stays until the
    next run starts, so that this run, if resumed after a crash, reads the same held events.
    """
    rows = held.toArrow()
    path = held_root(target) / f"run-{run_id:010d}"
    engine.append(str(path), rows, version=run_id)  # even empty: it supersedes the earlier sets
    counts: dict[str | None, int] = {}
    markers: dict[str | None, int] = {}
    ops, tables = rows.column("op").to_pylist(), rows.column("table").to_pylist()
    again = [HELD in dict(m or []) for m in rows.column("source").to_pylist()]
    for op, table, old in zip(ops, tables, again, strict=True):
        if op is not None:
            counts[table] = counts.get(table, 0) + 1
        elif not old:
            markers[table] = markers.get(table, 0) + 1
    return counts, markers
