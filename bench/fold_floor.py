"""How fast Spark can fold per column at all, beside the typical-notebook peer (issue 2's target).

    python -m bench.fold_floor --events 1000000 --keys 200000 [--repeat 3] [--workdir DIR] [--seed S]

The peer of :mod:`bench.run` keeps the newest event per key (``row_number()``): one window, no
notion of a column an event does not carry, hence its wrong rows. Any consolidation that gets
partial updates right must at least, per key, find each column's newest *carried* value: a
window aggregate per column. This command times, in one Spark session (``local[2]``), contenders
taking turns round after round, each ending in ``toArrow()`` (the hand-off to delta-rs; the MERGE
that follows is the same for all and left out):

* **peer**: :func:`bench.peers.latest_per_key`: typed parse, ``row_number()``, newest row per key;
* **fold-typed**: the peer's typed parse, then one window with ``last(column, ignoreNulls)`` per
  column (NULL read as "not carried": still wrong on NULLs, and no deletes, no ordering checks,
  no types): about the least a per-column fold costs in Spark, with the peer's parse;
* **fold-maps**: the same window over images parsed as ``map<string,string>`` (which tells a
  column not carried from a NULL, as a correct reader must): presence, still nothing else;
* **peer run** and **lakecdc run** (unless ``--no-runs``): the whole runs of :mod:`bench.run`
  (the peer's merge; ``lakecdc.apply``) on a fresh copy of a preloaded table, for reference.

If ``fold-typed`` is already slower than ``peer``, no Spark consolidation that folds per column
can match the peer (issue 2's ">= 1.0"); the gap between ``fold-maps`` and ``lakecdc run`` is
what lakecdc's own work (typing, checks, deletes, duplicates, key changes, the ledger) adds.
Prints each contender's runs and median, and its ratio against the peer (the whole runs: against
the peer's whole run).
"""

from __future__ import annotations

import argparse
import functools
import shutil
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from bench import peers
from bench.generate import KEY, SOURCE_SCHEMA
from bench.peers import MAP_SCHEMA
from bench.run import Batch, ensure_workload, start_spark

ORDER = "PARTITION BY k ORDER BY op_ts, pos"
WHOLE = f"({ORDER} ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"


def _newest_per_column(events: DataFrame) -> pa.Table:
    """``events`` (``k``, ``op_ts``, ``pos``, ``op_type`` and one column per source column, NULL
    where not carried): per key, each column's newest carried value and the newest op, as Arrow."""
    columns = SOURCE_SCHEMA.names[1:]
    return events.selectExpr(
        "k", f"lead(1) OVER ({ORDER}) IS NULL AS _last", f"last(op_type) OVER {WHOLE} AS _op",
        *[f"last({c}, true) OVER {WHOLE} AS {c}" for c in columns],
    ).where("_last").drop("_last").toArrow()


def fold_typed(spark: SparkSession, events: Path) -> pa.Table:
    """The peer's typed parse, then the newest non-NULL value of every column per key."""
    messages = spark.read.schema(peers.spark_event_schema()).json(str(events))
    return _newest_per_column(messages.selectExpr(
        f"coalesce(after.{KEY}, before.{KEY}) AS k", "op_ts", "pos", "op_type",
        *[f"after.{c} AS {c}" for c in SOURCE_SCHEMA.names[1:]],
    ))


def fold_maps(spark: SparkSession, events: Path) -> pa.Table:
    """Images as maps, then the newest carried value (a struct, so a carried NULL counts) per column."""
    messages = spark.read.schema(MAP_SCHEMA).json(str(events))
    return _newest_per_column(messages.selectExpr(
        f"coalesce(after['{KEY}'], before['{KEY}']) AS k", "op_ts", "pos", "op_type",
        *[f"IF(map_contains_key(after, '{c}'), struct(after['{c}'] AS v), NULL) AS {c}" for c in SOURCE_SCHEMA.names[1:]],
    ))


CONSOLIDATIONS: dict[str, Callable[[SparkSession, Path], pa.Table]] = {
    "peer": peers.latest_per_key, "fold-typed": fold_typed, "fold-maps": fold_maps,
}
#: whole runs for reference (bench.run's contenders: the peer's merge and lakecdc.apply)
RUNS = ("peer", "lakecdc")


def rounds_parser(description: str) -> argparse.ArgumentParser:
    """The command line of a benchmark of contenders taking turns on one workload (this module's,
    :mod:`bench.parse_floor`'s)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the first is a warm-up, not counted")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = rounds_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--no-runs", action="store_true", help="leave out the whole runs (peer and lakecdc with MERGE)")
    return parser.parse_args(argv)


def measure(spark: SparkSession, args: argparse.Namespace) -> dict[str, list[float]]:
    """Measure; print each contender's runs, median and ratio; return the timed runs by name."""
    from bench.run import CONTENDERS

    workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
    scratch = args.workdir / "fold-floor"
    shutil.rmtree(scratch, ignore_errors=True)
    timed: dict[str, Callable[[], object]] = {
        name: functools.partial(fn, spark, workload.events_json) for name, fn in CONSOLIDATIONS.items()
    }
    for name in () if args.no_runs else RUNS:
        contender = CONTENDERS[name]
        template = scratch / f"{name}-template"
        batch = Batch(workload, "partial", workload.events_json)
        assert contender.preload is not None
        contender.preload(spark, batch, template)

        def whole_run(contender=contender, template=template, batch=batch) -> None:  # noqa: ANN001
            target = scratch / f"{contender.name}-run"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(template, target)
            contender.run(spark, batch, target)

        timed[f"{name} run"] = whole_run
    seconds: dict[str, list[float]] = {name: [] for name in timed}
    for round_ in range(args.repeat):
        for name, fn in timed.items():
            started = time.perf_counter()
            fn()
            took = time.perf_counter() - started
            print(f"  round {round_ + 1}/{args.repeat}{' (warm-up)' if round_ == 0 else ''}: {name} {took:.2f} s",
                  flush=True)
            if round_ or args.repeat == 1:
                seconds[name].append(took)
    peer = statistics.median(seconds["peer"])
    print(f"\n{workload.events:,} events over {workload.keys:,} keys, one JVM, median of {len(seconds['peer'])}:")
    print("| contender | seconds (runs) | ratio vs peer (runs: vs peer run) |\n|---|---:|---:|")
    for name, runs in seconds.items():
        median = statistics.median(runs)
        shown = ", ".join(f"{s:.2f}" for s in runs)
        base = statistics.median(seconds["peer run"]) if name.endswith(" run") else peer
        ratio = f"{base / median:.2f}"
        print(f"| {name} | {median:.2f} ({shown}) | {ratio} |")
    return seconds


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    spark = start_spark()
    try:
        measure(spark, args)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
