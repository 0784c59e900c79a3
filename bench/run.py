"""Run the CDC merge benchmark: lakecdc against the notebooks users would write and the parse floor.

    python -m bench.run --events 1000000 --keys 200000 [--events 5000000 --keys 1000000]
        [--images partial,whole] [--workdir DIR] [--only peer,correct,lakecdc,autocdc,floor] [--warmup N]
        [--repeat N] [--write-results] [--same-jvm]

For each workload (generated into ``--workdir`` if absent, by :mod:`bench.generate` in a
subprocess) and each kind of images (``--images``: ``partial``, the GoldenGate JSON of
``events.json``, whose updates carry partial after images half of the time; ``whole``, the same
changes as Debezium JSON, every after image the whole row, converted once by
:mod:`bench.debezium`), every contender runs on the events against a Delta table freshly copied
from a preloaded template. The contenders take turns, round by round (the machine's speed drifts over
minutes), and each round gives each contender a Python process and Spark JVM of its own: this
command runs itself again with ``--only <contender> --repeat 1``. Sharing one JVM slowed whoever
ran after the other (5M events: lakecdc 48.8 s alone, 99.4 s beside the peer; the peer 19.3 s
alone, 23.9 s beside lakecdc; whether through the JIT or memory was not told apart).
In its process a contender makes ``--warmup`` untimed runs, then one timed run; the median of the
``--repeat`` timed runs is reported. ``--same-jvm`` runs everything in this process, one Spark
session, contenders taking turns run by run (the old way). Spark's start-up and a first warm-up
job are timed and reported apart; a run covers read, consolidation and merge.
Peak memory is the largest resident set of the process plus its children (the Spark JVM),
sampled every 50 ms; the peak above the RSS just before the run is reported too. Each resulting
table is compared with the simulated source, ``expected.parquet``, by ``ID``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime as dt
import gc
import importlib.metadata
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from types import TracebackType

import polars as pl
import psutil
import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import SparkSession

from bench import peers
from bench.formats import encoded_dir
from bench.generate import KEY, TABLE, Workload, workload_dir

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "RESULTS.md"
RESULTS_TITLE = "# Benchmark results"
WARMUP_EVENTS = 20_000
SAMPLE_SECONDS = 0.05
GIB = 1024**3
#: exit status of a process that stopped itself for going over ``--max-rss``
OVER_MEMORY = 75


# --- Spark -----------------------------------------------------------------------------------


def start_spark() -> SparkSession:
    """lakecdc's embedded session (local[2], no UI, UTC, 8 shuffle partitions, 8 GiB driver)."""
    from lakecdc.spark.session import get_spark

    return get_spark(master="local[2]")


# --- Memory ----------------------------------------------------------------------------------


def process_tree_rss() -> int:
    """Resident bytes of this process and all its descendants."""
    me = psutil.Process()
    total = me.memory_info().rss
    for child in me.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:  # exited between listing and reading
            continue
    return total


class PeakRss:
    """Context manager sampling :func:`process_tree_rss` in a background thread.

    With a ``limit`` (bytes), a process tree that grows past it is stopped (its children killed,
    then this process exits with :data:`OVER_MEMORY`) before the machine runs out of memory."""

    def __init__(self, interval: float = SAMPLE_SECONDS, limit: int | None = None, what: str = "") -> None:
        self.interval = interval
        self.limit = limit
        self.what = what
        self.baseline = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, process_tree_rss())
            if self.limit is not None and self.peak > self.limit:
                print(f"  {self.what}: the process tree took {self.peak / GIB:.1f} GiB, over the limit of "
                      f"{self.limit / GIB:.1f} GiB (--max-rss): stopped", file=sys.stderr, flush=True)
                for child in psutil.Process().children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        child.kill()
                os._exit(OVER_MEMORY)

    def __enter__(self) -> PeakRss:
        self.baseline = self.peak = process_tree_rss()
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, process_tree_rss())


class TreeCpu:
    """CPU seconds this process and its descendants spent since the object was made (:meth:`since`).

    Counted per process (pid and start time): each living process's own user and system time,
    plus what the processes this one waited for used (its ``children_*``). A descendant that
    exits meanwhile takes its share with it (Spark reuses its Python workers, so few do), but
    nothing is counted twice or taken away: summing every process's ``children_*`` instead could
    go negative (a worker whose parent ignores SIGCHLD leaves no trace when it exits)."""

    def __init__(self) -> None:
        self._start = self._snapshot()

    @staticmethod
    def _snapshot() -> dict[tuple[int, float], float]:
        me = psutil.Process()
        times = me.cpu_times()
        out = {(0, 0.0): times.children_user + times.children_system}
        for process in [me, *me.children(recursive=True)]:
            try:
                with process.oneshot():
                    t = process.cpu_times()
                    out[(process.pid, process.create_time())] = t.user + t.system
            except psutil.Error:  # exited between listing and reading
                continue
        return out

    def since(self) -> float:
        return sum(seconds - self._start.get(key, 0.0) for key, seconds in self._snapshot().items())


class OtherLoad:
    """Share of the machine's CPU time used meanwhile by other processes (and the hypervisor's
    steal): other work on the machine skews every figure."""

    share = 0.0

    def __enter__(self) -> OtherLoad:
        self._wall, self._busy_start, self._own = time.perf_counter(), self._busy(), TreeCpu()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        wall = time.perf_counter() - self._wall
        others = (self._busy() - self._busy_start) - self._own.since()
        self.share = max(0.0, others) / (wall * (os.cpu_count() or 1))

    @staticmethod
    def _busy() -> float:
        """Busy CPU seconds of the machine (on Linux ``user`` already includes ``guest``)."""
        times = psutil.cpu_times()
        return sum(
            getattr(times, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq", "steal")
        )



# --- Correctness -----------------------------------------------------------------------------


@dataclass
class Check:
    """A contender's Delta table compared with the expected source table, row by row on ``ID``."""

    expected_rows: int
    actual_rows: int
    missing: int
    extra: int
    differing: int
    by_column: dict[str, int]
    notes: list[str]

    @property
    def wrong(self) -> int:
        return self.missing + self.extra + self.differing


def _conform(actual: pl.DataFrame, expected: pl.Schema) -> tuple[pl.DataFrame, list[str]]:
    """The expected columns of ``actual`` (matched case-insensitively, ``_cdc_*`` ignored), cast to
    the expected types; notes name every missing, extra or differently typed column."""
    by_name = {name.upper(): name for name in actual.columns if not name.lower().startswith("_cdc_")}
    notes = []
    columns = []
    for name, dtype in expected.items():
        source = by_name.pop(name.upper(), None)
        if source is None:
            notes.append(f"column {name} missing")
            columns.append(pl.lit(None, dtype).alias(name))
            continue
        column = pl.col(source)
        if actual.schema[source] != dtype:
            notes.append(f"{name} is {actual.schema[source]}, not {dtype}")
            if dtype.is_decimal() and actual.schema[source].is_float():
                column = column.round(2)
            column = column.cast(dtype, strict=False)
        columns.append(column.alias(name))
    notes.extend(f"unexpected column {name}" for name in by_name.values())
    return actual.select(columns), notes


def check(table: Path, expected_path: Path) -> Check:
    """Compare the Delta table at ``table`` with ``expected_path``."""
    return check_arrow(DeltaTable(str(table)).to_pyarrow_table(), expected_path)


def check_arrow(table: pa.Table, expected_path: Path) -> Check:
    """Compare a contender's resulting table (Arrow) with ``expected_path``."""
    expected = pl.read_parquet(expected_path)
    actual, notes = _conform(pl.from_arrow(table), expected.schema)  # type: ignore[arg-type]
    unique = actual.unique(KEY, keep="any")
    joined = expected.join(unique, on=KEY, how="inner", suffix="_actual")
    differs = {
        name: ~pl.col(name).eq_missing(pl.col(f"{name}_actual")) for name in expected.columns if name != KEY
    }
    by_column = joined.select(**{name: expr.sum() for name, expr in differs.items()}).row(0, named=True)
    return Check(
        expected_rows=expected.height,
        actual_rows=actual.height,
        missing=expected.height - joined.height,
        extra=actual.height - joined.height,
        differing=joined.select(pl.any_horizontal(*differs.values()).sum()).item(),
        by_column={name: count for name, count in by_column.items() if count},
        notes=notes,
    )


# --- Contenders ------------------------------------------------------------------------------

#: the converted encoding a whole-image batch reads (:mod:`bench.debezium`)
WHOLE_ENCODING = "debezium-json"
IMAGES_READ = {"partial": "GoldenGate JSON, partial after images", "whole": "Debezium JSON, whole after images"}


@dataclass(frozen=True)
class Batch:
    """What the contenders apply: a workload's changes with ``partial`` images (``events.json``,
    GoldenGate JSON) or ``whole`` ones (the same changes as Debezium JSON, ``events``)."""

    workload: Workload
    images: str
    events: Path

    @property
    def format(self) -> str:
        """lakecdc's format for the batch's events."""
        return "ogg-json" if self.images == "partial" else WHOLE_ENCODING

    @property
    def preload_events(self) -> Path:
        """The preload's inserts in the batch's format (lakecdc's targets are preloaded with them)."""
        if self.images == "partial":
            return self.workload.preload_json
        return encoded_dir(self.workload, f"{WHOLE_ENCODING}-preload") / "events.json"


def ensure_batch(workload: Workload, images: str, workdir: Path, seed: int) -> Batch:
    """The batch of ``workload`` with ``images``; for whole images, the workload's events and
    preload are converted to Debezium JSON first, once (cached beside the workload)."""
    if images == "partial":
        return Batch(workload, images, workload.events_json)
    from bench import debezium

    (encoded,) = debezium.SUITE.ensure(workload, workdir, seed, [WHOLE_ENCODING])
    batch = Batch(workload, images, encoded.files[0])
    if not batch.preload_events.exists():
        staging = batch.preload_events.parent.with_name(batch.preload_events.parent.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        debezium.build_json(workload.preload_json, staging)
        shutil.rmtree(batch.preload_events.parent, ignore_errors=True)
        os.replace(staging, batch.preload_events.parent)
    return batch


@dataclass(frozen=True)
class Contender:
    """One way of applying a :class:`Batch`.

    ``preload(spark, batch, template)`` builds the preloaded target once per batch (not timed);
    ``run(spark, batch, target)`` applies the batch to a copy of it (timed) and returns the path
    of the resulting Delta table for BENCH.ORDERS, or None if it writes none. ``spark``: it needs a
    Spark session (a process measuring only contenders that do not starts no JVM, and passes
    None). ``engine``: the Delta engine it writes with (``delta-rs``, ``delta-spark``; None: it
    writes nothing); its ratio "vs correct" is against the correct notebook of the same engine.
    """

    name: str
    description: str
    run: Callable[[SparkSession, Batch, Path], Path | Ran | None]
    preload: Callable[[SparkSession, Batch, Path], None] | None = None
    spark: bool = True
    engine: str | None = "delta-rs"
    #: the kinds of images (:data:`IMAGES_READ`) it applies right; it is left out of the others
    images: tuple[str, ...] = ("partial", "whole")


@dataclass(frozen=True)
class Ran:
    """What a contender's ``run`` returns when the call's wall time is not its figure (it starts
    its own interpreter and JVM, and times its work inside them): its resulting table (a Delta
    table's path, or Arrow) and the seconds of its own timed work."""

    table: Path | pa.Table
    seconds: float


def _orders_table(summary: object) -> Path:
    if not summary.ok:  # type: ignore[attr-defined]
        raise RuntimeError(f"lakecdc failed:\n{summary.render()}")  # type: ignore[attr-defined]
    tables = [table for table in summary.tables if table.source_table == TABLE]  # type: ignore[attr-defined]
    if len(tables) != 1:
        raise RuntimeError(f"lakecdc reported {len(tables)} tables for {TABLE}")
    return Path(tables[0].target)


def _lakecdc_apply(
    spark: SparkSession, inputs: Path, target: Path, engine: str = "delta-rs", format: str = "ogg-json"
) -> Path:
    import lakecdc

    # (Debezium JSON without schema names no key: it is configured, as the notebooks know it too)
    options: dict[str, object] = {"keys": {TABLE: [KEY]}} if format == WHOLE_ENCODING else {}
    summary = lakecdc.apply(str(inputs), str(target), format=format, spark=spark, engine=engine, **options)
    return _orders_table(summary)


def _lakecdc_preload(spark: SparkSession, workload: Workload, template: Path) -> None:
    _lakecdc_apply(spark, workload.preload_json, template)


def _lakecdc_batch_preload(spark: SparkSession, batch: Batch, template: Path) -> None:
    _lakecdc_apply(spark, batch.preload_events, template, format=batch.format)


def _lakecdc(engine: str, staged_fold_bytes: str | None = None) -> Callable[[SparkSession, Batch, Path], Path]:
    """lakecdc on ``engine``; ``staged_fold_bytes`` sets ``LAKECDC_STAGED_FOLD_BYTES`` for delta-rs
    ("0": the batch staged as Parquet and streamed, "-1": collected; see lakecdc.merge.staged)."""
    def run(spark: SparkSession, batch: Batch, target: Path) -> Path:
        if staged_fold_bytes is not None:
            os.environ["LAKECDC_STAGED_FOLD_BYTES"] = staged_fold_bytes  # (the contender's own process)
        return _lakecdc_apply(spark, batch.events, target, engine=engine, format=batch.format)

    return run


def _plain_preload(spark: SparkSession, batch: Batch, template: Path) -> None:
    """A plain Delta table of the 12 source columns, written by delta-rs (the notebooks' target)."""
    write_deltalake(str(template), pq.read_table(batch.workload.preload_parquet))


def _notebook(apply: Callable[..., None]) -> Callable[[SparkSession, Batch, Path], Path]:
    def run(spark: SparkSession, batch: Batch, target: Path) -> Path:
        apply(spark, batch.events, target, batch.images)
        return target

    return run


def _floor_run(spark: SparkSession, batch: Batch, target: Path) -> None:
    peers.floor(batch.events, batch.images)


def _autocdc_run(spark: SparkSession, batch: Batch, target: Path) -> Ran:
    """OSS Spark's AUTO CDC (:mod:`bench.autocdc`) in the newest interpreter, into Spark's in-memory
    row-level catalog; its figure is its own timing of the incremental pipeline run of the events."""
    from bench import autocdc

    reason = autocdc.unavailable()
    if reason:
        raise RuntimeError(f"AUTO CDC cannot run: {reason}")
    result = autocdc.run(batch.events, target, batch.workload.preload_json)
    return Ran(autocdc.read_result(result), autocdc.read_timing(result).apply)


_TYPICAL = "typical notebook: Spark read.json (images typed), latest row per key by row_number()"
_CORRECT = ("correct notebook: Spark read.json (images as maps), per key one window: newest op and each "
            "column's newest value carried since the last delete; typed casts")
CONTENDERS = {
    contender.name: contender
    for contender in (
        Contender("floor", "pyarrow.json.read_json, explicit schema, 2 threads; parse only", _floor_run, spark=False,
                  engine=None),
        Contender("peer", f"{_TYPICAL}, toArrow, delta-rs merge", _notebook(peers.typical_notebook), _plain_preload),
        Contender("peer-delta-spark", f"{_TYPICAL}, Delta's MERGE INTO from the DataFrame",
                  _notebook(peers.typical_notebook_delta_spark), _plain_preload, engine="delta-spark"),
        Contender("correct", f"{_CORRECT}, toArrow, delta-rs merge updating the carried columns",
                  _notebook(peers.correct_notebook), _plain_preload),
        Contender("correct-delta-spark", f"{_CORRECT}, Delta's MERGE INTO from the DataFrame updating the carried "
                  "columns", _notebook(peers.correct_notebook_delta_spark), _plain_preload, engine="delta-spark"),
        Contender("lakecdc", "lakecdc.apply(events, target, format=<the batch's>) (engine delta-rs)",
                  _lakecdc("delta-rs"), _lakecdc_batch_preload),
        Contender("lakecdc-delta-spark", "lakecdc.apply(events, target, format=<the batch's>, engine='delta-spark')",
                  _lakecdc("delta-spark"), _lakecdc_batch_preload, engine="delta-spark"),
        Contender("lakecdc-collected", "lakecdc (delta-rs), the net actions collected on the driver whatever the "
                  "batch's size (LAKECDC_STAGED_FOLD_BYTES=-1)", _lakecdc("delta-rs", "-1"), _lakecdc_batch_preload),
        Contender("lakecdc-staged", "lakecdc (delta-rs), the net actions staged as Parquet by Spark and streamed "
                  "into the merge whatever the batch's size (LAKECDC_STAGED_FOLD_BYTES=0)", _lakecdc("delta-rs", "0"),
                  _lakecdc_batch_preload),
        Contender("autocdc", "OSS Spark AUTO CDC (pyspark.pipelines.create_auto_cdc_flow, SCD1, sequenced by the "
                  "SCN) into Spark's in-memory row-level test catalog (no durable format supports it on Spark "
                  "4.3, see bench/autocdc.md); timed: its incremental pipeline run of the events, in its own "
                  "interpreter and JVM", _autocdc_run, spark=False, engine=None, images=("whole",)),
    )
}
#: the correct notebook of each engine (the ratio "vs correct")
CORRECT = {"delta-rs": "correct", "delta-spark": "correct-delta-spark"}


@dataclass
class Outcome:
    """The runs of one contender on one workload."""

    contender: Contender
    warmup: int
    seconds: list[float] = field(default_factory=list)
    #: CPU seconds of this process and its children (the Spark JVM, Python workers) per run: less
    #: sensitive than wall time to other work on the machine
    cpu: list[float] = field(default_factory=list)
    peak: int = 0
    above_baseline: int = 0
    checks: list[Check] = field(default_factory=list)
    #: seconds of the first run in the first process, when the runs come from several processes
    first_run: float | None = None

    @property
    def first(self) -> float:
        """Seconds of the first run (a warm-up run unless ``warmup`` is 0)."""
        return self.seconds[0] if self.first_run is None else self.first_run

    def to_json(self) -> dict:
        return {"contender": self.contender.name, "warmup": self.warmup, "seconds": self.seconds, "cpu": self.cpu,
                "peak": self.peak, "above_baseline": self.above_baseline,
                "checks": [dataclasses.asdict(c) for c in self.checks]}

    @classmethod
    def from_json(cls, found: dict) -> Outcome:
        return cls(CONTENDERS[found["contender"]], found["warmup"], found["seconds"], found["cpu"], found["peak"],
                   found["above_baseline"], [Check(**c) for c in found["checks"]])

    def add_timed(self, other: Outcome) -> None:
        """Take ``other``'s timed runs (another process's) as more of this outcome's."""
        if self.first_run is None:
            self.first_run = other.first
        self.seconds += other.seconds[other.warmup :]
        self.cpu += other.cpu[other.warmup :]
        self.peak = max(self.peak, other.peak)
        self.above_baseline = max(self.above_baseline, other.above_baseline)
        self.checks += other.checks

    @property
    def median(self) -> float:
        """Median seconds of the timed runs, after the warm-up runs."""
        return statistics.median(self.seconds[self.warmup :])

    @property
    def median_cpu(self) -> float:
        return statistics.median(self.cpu[self.warmup :])

    @property
    def worst(self) -> Check | None:
        return max(self.checks, key=lambda c: c.wrong, default=None)


def _preload(spark: SparkSession, batch: Batch, contender: Contender, template: Path) -> None:
    shutil.rmtree(template, ignore_errors=True)
    if contender.preload is not None:
        started = time.perf_counter()
        contender.preload(spark, batch, template)
        print(
            f"  {contender.name}: preloaded {batch.workload.keys:,} keys in {time.perf_counter() - started:.1f} s "
            "(not timed)"
        )


def _run_once(
    spark: SparkSession, batch: Batch, contender: Contender, scratch: Path, outcome: Outcome, attempt: int,
    total: int, max_rss: float | None = None,
) -> None:
    """One run of ``contender`` on a fresh copy of its template: timed, memory-sampled, checked."""
    template = scratch / f"{contender.name}-template"
    target = scratch / f"{contender.name}-run"
    shutil.rmtree(target, ignore_errors=True)
    if template.exists():
        shutil.copytree(template, target)
    gc.collect()
    limit = None if max_rss is None else int(max_rss * GIB)
    with PeakRss(limit=limit, what=f"{contender.name} run {attempt}/{total}") as memory:
        started, cpu_started = time.perf_counter(), TreeCpu()
        table = contender.run(spark, batch, target)
        seconds, cpu = time.perf_counter() - started, cpu_started.since()
    if isinstance(table, Ran):  # (its own timing; the CPU of its whole subprocess is no figure of it)
        seconds, cpu, table = table.seconds, float("nan"), table.table
    outcome.seconds.append(seconds)
    outcome.cpu.append(cpu)
    outcome.peak = max(outcome.peak, memory.peak)
    outcome.above_baseline = max(outcome.above_baseline, memory.peak - memory.baseline)
    kind = "warm-up" if attempt <= outcome.warmup else "timed"
    line = (
        f"  {contender.name} run {attempt}/{total} ({kind}): {seconds:.2f} s"
        f"{f' ({cpu:.1f} CPU s)' if cpu == cpu else ' (its own timing)'}, "
        f"peak RSS {memory.peak / GIB:.2f} GiB"
    )
    if table is not None:
        result = (check_arrow(table, batch.workload.expected_parquet) if isinstance(table, pa.Table)
                  else check(table, batch.workload.expected_parquet))
        outcome.checks.append(result)
        line += f", {result.wrong:,} wrong rows"
    print(line)


def measure(
    spark: SparkSession, batch: Batch, contenders: Sequence[Contender], scratch: Path, warmup: int, repeat: int,
    max_rss: float | None = None,
) -> list[Outcome]:
    """Preload a template for each contender, then run them ``warmup + repeat`` times each, taking
    turns (one run each per round: a drift of the machine's speed slows them alike), each run on a
    fresh copy of its template; the medians count only the last ``repeat`` runs. Contenders that
    do not apply ``batch``'s kind of images right (:attr:`Contender.images`) are left out."""
    contenders = [c for c in contenders if batch.images in c.images]
    for contender in contenders:
        _preload(spark, batch, contender, scratch / f"{contender.name}-template")
    outcomes = [Outcome(contender, warmup) for contender in contenders]
    total = warmup + repeat
    for attempt in range(1, total + 1):
        for contender, outcome in zip(contenders, outcomes, strict=True):
            _run_once(spark, batch, contender, scratch, outcome, attempt, total, max_rss)
    return outcomes


# --- Reporting -------------------------------------------------------------------------------


def table_markdown(workload: Workload, outcomes: list[Outcome]) -> str:
    """The side-by-side table, as Markdown (also what is printed). Ratios are seconds of the
    reference over the contender's (above 1 is faster): "vs peer" against the typical notebook
    (delta-rs), "vs correct" against the correct notebook of the contender's own engine."""
    by_name = {o.contender.name: o for o in outcomes}
    peer = by_name.get("peer")
    rows = [
        "| contender | seconds | events/s | ratio vs peer | vs correct | CPU s | CPU ratio vs peer | first run s "
        "| peak RSS | peak above baseline | wrong rows |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for outcome in outcomes:
        ratio = f"{peer.median / outcome.median:.2f}" if peer is not None else "n/a"
        # (a contender without a Delta engine is compared with the delta-rs notebook)
        correct = by_name.get(CORRECT.get(outcome.contender.engine or "delta-rs", ""))
        vs_correct = f"{correct.median / outcome.median:.2f}" if correct is not None else "n/a"
        own_cpu = outcome.median_cpu == outcome.median_cpu and outcome.median_cpu  # (NaN: not measured)
        cpu_ratio = f"{peer.median_cpu / outcome.median_cpu:.2f}" if peer is not None and own_cpu else "n/a"
        cpu = f"{outcome.median_cpu:.1f}" if own_cpu else "n/a"
        worst = outcome.worst
        wrong = (
            "n/a"
            if worst is None
            else f"{worst.wrong:,} of {worst.expected_rows:,} ({worst.wrong / worst.expected_rows:.1%})"
        )
        rows.append(
            f"| {outcome.contender.name} | {outcome.median:.2f} | {workload.events / outcome.median:,.0f} | {ratio} "
            f"| {vs_correct} "
            f"| {cpu} | {cpu_ratio} | {outcome.first:.2f} | {outcome.peak / GIB:.2f} GiB | {outcome.above_baseline / GIB:.2f} GiB | {wrong} |"
        )
    return "\n".join(rows)


def details_markdown(outcomes: list[Outcome]) -> str:
    """What each contender is, and where wrong rows come from."""
    lines = []
    for outcome in outcomes:
        lines.append(f"- **{outcome.contender.name}**: {outcome.contender.description}.")
        worst = outcome.worst
        if worst is not None and (worst.wrong or worst.notes):
            columns = ", ".join(f"{name} {count:,}" for name, count in worst.by_column.items()) or "none"
            lines.append(
                f"  Wrong rows: {worst.missing:,} missing, {worst.extra:,} extra, {worst.differing:,} differing "
                f"(by column: {columns}).{' ' + '; '.join(worst.notes) + '.' if worst.notes else ''}"
            )
    return "\n".join(lines)


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _java_version() -> str:
    """``java -version``'s version, for a process that started no JVM."""
    try:
        found = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
    except OSError:
        return "unknown"
    version = re.search(r'version "([^"]+)"', found)
    return version.group(1) if version else "unknown"


def machine_markdown(spark: SparkSession | None) -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    java = (spark.sparkContext._jvm.System.getProperty("java.version")  # type: ignore[union-attr]
            if spark is not None else _java_version())
    packages = ", ".join(
        f"{name} {_version(name)}" for name in ("lakecdc", "pyspark", "deltalake", "pyarrow", "polars")
    )
    return (
        f"{cpu}, nproc {os.cpu_count()}, {psutil.virtual_memory().total / GIB:.1f} GiB RAM; "
        f"Python {platform.python_version()}, Java {java}; {packages}"
    )


def workload_markdown(workload: Workload, batch: Batch | None = None) -> str:
    """The workload's counts; with a whole-image ``batch``, what its events are read as."""
    meta = workload.meta
    text = (
        f"{meta['events']:,} events ({meta['inserts']:,} I, {meta['updates']:,} U of which "
        f"{meta['partial_updates']:,} partial, {meta['deletes']:,} D; {meta['events_bytes'] / 1e6:,.0f} MB) "
        f"into {meta['keys']:,} preloaded keys; {meta['expected_rows']:,} rows in the final source table"
    )
    if batch is not None and batch.images == "whole":
        text += (f"; read as {IMAGES_READ['whole']} ({batch.events.stat().st_size / 1e6:,.0f} MB, converted by "
                 "bench/debezium.py: every update's after image is the whole new row)")
    return text


def write_results(heading: str, body: str) -> None:
    """Replace the ``## heading`` section of RESULTS.md with ``body``, or append it."""
    text = (
        RESULTS.read_text()
        if RESULTS.exists()
        else f"{RESULTS_TITLE}\n\nWritten by `python -m bench.run --write-results`; one section per workload, replaced by each run.\n"
    )
    sections = text.split("\n## ")
    section = f"{heading}\n\n{body.strip()}\n"
    for index, existing in enumerate(sections[1:], start=1):
        if existing.split("\n", 1)[0] == heading:
            sections[index] = section
            break
    else:
        sections.append(section)
    RESULTS.write_text("\n## ".join(part.rstrip("\n") + "\n" for part in sections))


# --- Main ------------------------------------------------------------------------------------


def ensure_workload(workdir: Path, events: int, keys: int, seed: int) -> Workload:
    """The cached workload, generated by a subprocess first if absent (keeping this process lean)."""
    workload = Workload(workload_dir(workdir, events, keys, seed), events, keys)
    if not workload.exists():
        command = [sys.executable, "-m", "bench.generate", "--events", str(events), "--keys", str(keys)]
        subprocess.run(
            [*command, "--seed", str(seed), "--out", str(workload.directory)], check=True, cwd=REPO
        )
    return workload


def warmup_file(workload: Workload, workdir: Path) -> Path:
    """The first :data:`WARMUP_EVENTS` lines of the workload, for Spark's first job."""
    path = workdir / f"warmup_{WARMUP_EVENTS}.json"
    with workload.events_json.open("rb") as source, path.open("wb") as out:
        out.writelines(islice(source, WARMUP_EVENTS))
    return path


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--events", type=int, action="append", required=True, help="events of a workload (repeatable)"
    )
    parser.add_argument(
        "--keys", type=int, action="append", required=True, help="preloaded keys of that workload"
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument(
        "--images", default="partial",
        help="comma-separated kinds of images, each measured apart: partial (GoldenGate JSON, the workload's "
        "events.json) and whole (the same changes as Debezium JSON, every after image whole)",
    )
    parser.add_argument(
        "--only", default=",".join(CONTENDERS), help="comma-separated contenders, run in this order"
    )
    parser.add_argument(
        "--repeat", type=int, default=1,
        help="rounds: timed runs per contender, each in a fresh process; the median time is reported",
    )
    parser.add_argument(
        "--warmup", type=int, default=1, help="untimed runs per contender before each timed one (in its process)"
    )
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument(
        "--max-rss", type=float, default=20.0,
        help="GiB a contender's process tree (Python, Spark's JVM and workers) may take: a run going over is "
        "stopped and the command fails (default 20, below this machine's 24)",
    )
    parser.add_argument(
        "--write-results", action="store_true", help=f"record the tables in {RESULTS.relative_to(REPO)}"
    )
    parser.add_argument(
        "--same-jvm", action="store_true",
        help="run every contender in this process and one Spark session (--warmup runs, then --repeat timed "
        "ones, taking turns run by run)",
    )
    parser.add_argument("--outcome-json", type=Path, help=argparse.SUPPRESS)  # a child's outcome, for its parent
    args = parser.parse_args(argv)
    if len(args.events) != len(args.keys):
        parser.error("give one --keys per --events")
    unknown = set(args.only.split(",")) - set(CONTENDERS)
    if unknown:
        parser.error(f"unknown contenders {sorted(unknown)}; choose from {list(CONTENDERS)}")
    args.images = args.images.split(",")
    if set(args.images) - set(peers.IMAGES) or len(set(args.images)) != len(args.images):
        parser.error(f"--images: a comma-separated list of {', '.join(peers.IMAGES)}, each once")
    if args.outcome_json is not None and (len(args.events) != 1 or len(args.images) != 1):
        parser.error("--outcome-json takes one workload and one kind of images")
    return args


@dataclass
class Measured:
    """One workload's outcomes, with what the machine and Spark were like meanwhile."""

    outcomes: list[Outcome]
    other: float
    spark_line: str
    machine: str

    def to_json(self) -> dict:
        return {"outcomes": [o.to_json() for o in self.outcomes], "other": self.other,
                "spark_line": self.spark_line, "machine": self.machine}

    @classmethod
    def from_json(cls, found: dict) -> Measured:
        return cls([Outcome.from_json(o) for o in found["outcomes"]], found["other"], found["spark_line"],
                   found["machine"])


def measure_here(args: argparse.Namespace, contenders: Sequence[Contender], batches: Sequence[Batch]) -> list[Measured]:
    """Every batch measured in this process, one Spark session for all contenders (none when
    no contender needs one: the floor alone; its ``spark_line`` is then empty)."""
    spark, spark_line = None, ""
    if any(c.spark for c in contenders):
        started = time.perf_counter()
        spark = start_spark()
        startup = time.perf_counter() - started
        started = time.perf_counter()
        peers.latest_per_key(spark, warmup_file(batches[0].workload, args.workdir))
        first_job = time.perf_counter() - started
        spark_line = (
            f"Spark start-up (fresh JVM): {startup:.1f} s; first job (the peer's read and consolidation of "
            f"{WARMUP_EVENTS:,} events): {first_job:.1f} s. Neither is included below."
        )
        print(spark_line)
    else:
        print("No Spark session: no contender measured here needs one.")
    machine = machine_markdown(spark)
    measured = []
    for batch in batches:
        print(f"\n== {heading_of(batch)}: {workload_markdown(batch.workload, batch)}")
        scratch = args.workdir / "targets" / f"{batch.workload.directory.name}-{batch.images}"
        scratch.mkdir(parents=True, exist_ok=True)
        with OtherLoad() as other:
            outcomes = measure(spark, batch, contenders, scratch, args.warmup, args.repeat, args.max_rss)
        measured.append(Measured(outcomes, other.share, spark_line, machine))
    if spark is not None:
        spark.stop()
    return measured


def measure_apart(args: argparse.Namespace, contenders: Sequence[Contender], batch: Batch) -> Measured:
    """``batch`` measured in rounds, each contender in a fresh process and JVM per round (this
    command again, with ``--only <contender> --repeat 1``); the outcomes merged."""
    workload = batch.workload
    print(f"\n== {heading_of(batch)}: {workload_markdown(workload, batch)}")
    contenders = [c for c in contenders if batch.images in c.images]
    merged = {c.name: Outcome(c, 0) for c in contenders}
    children: list[Measured] = []
    for round_ in range(1, args.repeat + 1):
        for contender in contenders:
            print(f"  round {round_}/{args.repeat}: {contender.name} in a process of its own", flush=True)
            out = args.workdir / f"outcome-run-{contender.name}.json"
            out.unlink(missing_ok=True)
            argv = [sys.executable, "-m", "bench.run", "--events", str(workload.events), "--keys", str(workload.keys),
                    "--workdir", str(args.workdir), "--seed", str(args.seed), "--images", batch.images,
                    "--only", contender.name,
                    "--warmup", str(args.warmup), "--repeat", "1", "--max-rss", str(args.max_rss),
                    "--outcome-json", str(out)]
            done = subprocess.run(argv, check=False, cwd=REPO)
            if done.returncode == OVER_MEMORY:
                raise SystemExit(f"{contender.name} went over --max-rss {args.max_rss:g} GiB on {heading_of(batch)}")
            done.check_returncode()
            child = Measured.from_json(json.loads(out.read_text()))
            children.append(child)
            (outcome,) = child.outcomes
            merged[contender.name].add_timed(outcome)
    first = next((c for c in children if c.spark_line), children[0])  # (the floor's child starts no JVM)
    return Measured(list(merged.values()), max(c.other for c in children), first.spark_line, first.machine)


def heading_of(batch: Batch) -> str:
    """The batch's section of RESULTS.md: its size and the kind of images its events carry."""
    workload = batch.workload
    return f"{workload.events:,} events over {workload.keys:,} keys, {batch.images} images"


def main(argv: list[str] | None = None) -> list[tuple[Batch, Measured]]:
    """Run the benchmark; returns each batch with its outcomes (what it printed)."""
    args = parse_args(argv)
    contenders = [CONTENDERS[name] for name in args.only.split(",")]
    pa.set_cpu_count(2)  # every contender gets the 2 cores Spark's local[2] gets
    args.workdir.mkdir(parents=True, exist_ok=True)
    workloads = [
        ensure_workload(args.workdir, e, k, args.seed) for e, k in zip(args.events, args.keys, strict=True)
    ]
    batches = [ensure_batch(w, images, args.workdir, args.seed) for w in workloads for images in args.images]
    if args.outcome_json is not None:  # a child of measure_apart
        (measured,) = measure_here(args, contenders, batches)
        args.outcome_json.write_text(json.dumps(measured.to_json()))
        return [(batches[0], measured)]
    apart = not args.same_jvm
    if apart:
        measured_all = [measure_apart(args, contenders, b) for b in batches]
    else:
        measured_all = measure_here(args, contenders, batches)
    command = "python -m bench.run " + " ".join(sys.argv[1:] if argv is None else argv)
    for batch, measured in zip(batches, measured_all, strict=True):
        workload = batch.workload
        table = table_markdown(workload, measured.outcomes)
        details = details_markdown(measured.outcomes)
        if apart:
            how = ("Each contender ran in a Python process and Spark JVM of its own, a fresh one per round "
                   "(the floor in a process without a JVM). "
                   + (f"In the first with a JVM: {measured.spark_line}" if measured.spark_line else ""))
            load_line = (f"Other work took up to {measured.other:.0%} of the machine's CPU time meanwhile "
                         "(the most any contender's process saw).")
        else:
            how = f"All contenders ran in one process and Spark session. {measured.spark_line}"
            load_line = f"Other work took {measured.other:.0%} of the machine's CPU time meanwhile."
        print(f"\n{how}\n\n{table}\n\n{details}\n\n{load_line}")
        if args.write_results:
            when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            runs = f"median of {args.repeat} timed runs" if args.repeat > 1 else "one timed run"
            warm = f"{args.warmup} warm-up run{'s' if args.warmup != 1 else ''}"
            runs += f", each after {warm} in its process" if apart else f" after {warm} per contender"
            write_results(
                heading_of(batch),
                f"Measured {when}, {runs}, with `{command}`.\n\n"
                f"- Machine: {measured.machine}.\n- Workload: {workload_markdown(workload, batch)}.\n- {how}\n"
                f"- {load_line}\n\n{table}\n\n{details}\n",
            )
    return list(zip(batches, measured_all, strict=True))


if __name__ == "__main__":
    main()
