"""Merge cost (issue 6): many small merges into a big table, and one batch into tables of two sizes.

    python -m bench.merges [--rows 10000000] [--merges 200] [--batch-keys 1000] [--sweep-keys 10000]
        [--part a,b] [--repeat 3] [--target-file-size BYTES] [--workdir DIR] [--seed 42] [--write-results]

Two tables are generated once and cached under ``<workdir>/merges``: ``--rows`` rows in 100 files
and ``--rows / 10`` rows in 10 files, every file holding one contiguous range of ``ID`` (the table
sorted by its key: what a key-clustered or Z-ordered table looks like). Each comes twice, with the
same rows: as a lakecdc target (its rows carry lakecdc's ``_cdc_*`` columns; a first small
``lakecdc.apply`` creates it, and the rows it wrote are checked against the generated ones) and as
a plain Delta table of the 12 source columns. The change batches are GoldenGate JSON (``ogg-json``)
lines as :mod:`bench.generate` writes them, updates of existing keys (before image: the key; after
image: the whole new row), ``uniform`` (keys spread over the whole key space) or ``clustered``
(distinct keys drawn from a window of twice as many contiguous keys), every batch newer than the
one before.

Contenders, each merging every batch into its own fresh copy of the table:

* **lakecdc**: ``lakecdc.apply(batch, target, format="ogg-json")``: decode and consolidate with
  Spark, then a delta-rs MERGE whose predicate is narrowed by the batch's key range;
* **peer**, the plain delta-rs merge baseline.md measured: the batch's after images read by
  ``pyarrow.json``, then ``DeltaTable.merge(source, "t.ID = s.ID")`` (delta-rs defaults: no range
  predicate, ``streamed_exec=True``), update all / insert all.

Part **a**: ``--merges`` consecutive merges of ``--batch-keys`` keys into the big table, per
contender and key distribution: per-merge seconds (median, p95), the MERGE's own seconds, files
rewritten; then the table's layout (files, small files, how many files a key's range falls in), a
full read of it (``DeltaTable.to_pyarrow_table``, median of 3), compaction to the target file size
(``lakecdc.maintain`` for lakecdc, ``optimize.compact`` for the peer), and layout and read again.
Part **b**: one batch of ``--sweep-keys`` keys into fresh copies of both tables (``--repeat`` times,
median): uniform (over each table's key space) and clustered (the same keys for both tables).

Timing and delta-rs's own figures: each MERGE's ``execute()`` is timed and its metrics recorded
(``num_target_files_removed`` = files rewritten, ``num_target_rows_copied``, ``scan_time_ms``):
delta-rs 1.6's ``files_scanned`` / ``files_skipped`` metrics read 0 / all whatever it pruned
(engines.md), so "files in key range" (files whose ``ID`` statistics overlap the batch's key
range, from the Delta log before the merge) is shown instead. CPU seconds include the Spark JVM
and Python workers; peak RSS is that of the process tree (helpers of :mod:`bench.run`). Files a
merge removed are deleted from the copy after each merge, outside the timing (disk).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
from deltalake import DeltaTable, write_deltalake
from deltalake.table import TableMerger
from pyspark.sql import SparkSession

from bench import peers
from bench.generate import (
    COLUMNS,
    KEY,
    PRELOAD_START_US,
    SOURCE_SCHEMA,
    TABLE,
    WORKLOAD_START_US,
    _column_values,
    _header,
    _object,
    _write_lines,
)
from bench.run import GIB, OtherLoad, PeakRss, TreeCpu, machine_markdown, start_spark, write_results

BIG_FILES, SMALL_FILES = 100, 10
SMALL_DIVISOR = 10  # the small table has rows / 10 rows
BOOTSTRAP_ROWS = 50  # rows lakecdc.apply writes to create its target (every column non-null in some)
READ_REPEAT = 3
KINDS = ("clustered", "uniform")
CONTENDERS = ("lakecdc", "lakecdc-delta-spark", "peer")
#: the contenders a run measures unless --contenders says otherwise
DEFAULT_CONTENDERS = ("lakecdc", "peer")
#: lakecdc contenders and the Delta engine each merges with
ENGINES = {"lakecdc": "delta-rs", "lakecdc-delta-spark": "delta-spark"}
MIB = 2**20

# lakecdc's default seq, "<micros + 10**16, 17 digits>|<pos, 20 digits>|<idx, 6 digits>"
# (lakecdc.changes.events.default_seq): the preload rows are written directly, and checked against the
# rows lakecdc.apply wrote for the first BOOTSTRAP_ROWS keys.
_MICROS_OFFSET, _MICROS_WIDTH, _POS_WIDTH, _IDX_WIDTH = 10**16, 17, 20, 6


# --- Tables ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tables:
    """One cached table: ``rows`` rows in ``files`` files, as a lakecdc target and as a plain table."""

    directory: Path
    rows: int
    files: int

    @property
    def lakecdc_root(self) -> Path:
        return self.directory / "lakecdc"

    @property
    def plain(self) -> Path:
        return self.directory / "plain"

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads((self.directory / "meta.json").read_text())

    def exists(self) -> bool:
        return (self.directory / "meta.json").exists()


def lakecdc_table(root: Path) -> Path:
    """The Delta table of BENCH.ORDERS under a lakecdc target root."""
    from lakecdc.lake.state import table_path

    return Path(table_path(str(root), TABLE))


def _source_rows(seed: int, rows: int, chunk: int, first_id: int, n: int) -> pa.Table:
    """``n`` rows with ``ID`` from ``first_id``, random values seeded by table size and chunk."""
    values = _column_values(np.random.default_rng([seed, rows, chunk]), n)
    ids = pa.array(np.arange(first_id, first_id + n, dtype=np.int64))
    return pa.Table.from_arrays([ids, *(values[name].typed for name in COLUMNS)], schema=SOURCE_SCHEMA)


def _preload_micros(ids: np.ndarray) -> np.ndarray:
    return PRELOAD_START_US + ids * 1000


def _with_cdc(rows: pa.Table) -> pa.Table:
    """``rows`` with the ``_cdc_*`` columns lakecdc would give them had each been inserted by a
    preload event (``op_ts`` = :func:`_preload_micros`, ``pos`` = ``ID - 1``, as the bootstrap)."""
    ids = rows.column(KEY).to_numpy()
    micros = _preload_micros(ids)
    seq = (
        pl.Series(micros + _MICROS_OFFSET).cast(pl.String).str.zfill(_MICROS_WIDTH)
        + "|"
        + pl.Series(ids - 1).cast(pl.String).str.zfill(_POS_WIDTH)
        + "|"
        + "0" * _IDX_WIDTH
    )
    return (
        rows.append_column("_cdc_seq", seq.to_arrow().cast(pa.string()))
        .append_column("_cdc_op", pa.array(["I"] * rows.num_rows, pa.string()))
        .append_column("_cdc_op_ts", pa.array(micros, pa.timestamp("us", tz="UTC")))
    )


def _preload_lines(path: Path, seed: int, rows: int, per_file: int, n: int) -> None:
    """Insert events for keys ``1..n`` with the values of the table's first chunk (file)."""
    values = _column_values(np.random.default_rng([seed, rows, 0]), per_file)
    frame = pl.DataFrame(
        {"id": np.arange(1, n + 1, dtype=np.int64), **{c: values[c].fragments[:n] for c in COLUMNS}}
    )
    line = pl.concat_str(
        [
            _header(pl.lit("I"), PRELOAD_START_US + pl.col("id") * 1000, pl.col("id") - 1),
            pl.lit(',"after":'),
            _object(pl.col("id").cast(pl.String), {c: pl.col(c) for c in COLUMNS}),
            pl.lit("}"),
        ]
    )
    with path.open("wb") as handle:
        _write_lines(frame, line, handle)


def _same_rows(written: pa.Table, expected: pa.Table) -> None:
    """Fail unless lakecdc's bootstrap rows equal the generated ones (types cast to lakecdc's)."""
    written = written.sort_by(KEY)
    expected = expected.select(written.column_names).cast(written.schema)
    if not written.equals(expected):
        for name in written.column_names:
            if not written.column(name).equals(expected.column(name)):
                raise RuntimeError(
                    f"generated preload rows differ from what lakecdc.apply wrote in column {name}: "
                    f"{written.column(name).slice(0, 3).to_pylist()} vs {expected.column(name).slice(0, 3).to_pylist()}"
                )
        raise RuntimeError("generated preload rows differ from what lakecdc.apply wrote")


def ensure_tables(
    spark: SparkSession, workdir: Path, rows: int, files: int, seed: int, say: Callable[[str], None]
) -> Tables:
    """The cached table pair of ``rows`` rows in ``files`` files, generated first if absent."""
    import lakecdc

    tables = Tables(workdir / "merges" / f"table_r{rows}_f{files}_s{seed}", rows, files)
    if tables.exists():
        return tables
    started = time.perf_counter()
    staging = Tables(tables.directory.with_name(tables.directory.name + ".partial"), rows, files)
    shutil.rmtree(staging.directory, ignore_errors=True)
    staging.directory.mkdir(parents=True)
    per_file = rows // files
    if per_file < BOOTSTRAP_ROWS:
        raise SystemExit(
            f"--rows {rows:,} is too small: files of {per_file} rows (at least {BOOTSTRAP_ROWS})"
        )
    bootstrap = staging.directory / "bootstrap.json"
    _preload_lines(bootstrap, seed, rows, per_file, BOOTSTRAP_ROWS)
    summary = lakecdc.apply(str(bootstrap), str(staging.lakecdc_root), format="ogg-json", spark=spark)
    if not summary.ok or summary.table(TABLE).inserted != BOOTSTRAP_ROWS:
        raise RuntimeError(f"lakecdc could not create the target: {summary.render()}")
    target = lakecdc_table(staging.lakecdc_root)
    written = pa.table(DeltaTable(str(target)).to_pyarrow_table())
    first = _with_cdc(_source_rows(seed, rows, 0, 1, per_file))
    _same_rows(written, first.slice(0, BOOTSTRAP_ROWS))
    schema = written.schema
    for chunk in range(files):
        source = (
            first
            if chunk == 0
            else _with_cdc(_source_rows(seed, rows, chunk, chunk * per_file + 1, per_file))
        )
        mode = "overwrite" if chunk == 0 else "append"  # the first chunk replaces the bootstrap rows
        write_deltalake(str(target), source.select(schema.names).cast(schema), mode=mode)
        write_deltalake(str(staging.plain), source.select(SOURCE_SCHEMA.names), mode="append")
    for path in (target, staging.plain):
        DeltaTable(str(path)).create_checkpoint()
    for path, want in ((target, files), (staging.plain, files)):
        got = len(DeltaTable(str(path)).file_uris())
        if got != want:
            raise RuntimeError(f"{path}: {got} files written, {want} wanted")
    bootstrap.unlink()
    _drop_removed(target)
    meta = {
        "rows": rows,
        "files": files,
        "seed": seed,
        "lakecdc_bytes": table_layout(target, 1).bytes,
        "plain_bytes": table_layout(staging.plain, 1).bytes,
    }
    (staging.directory / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    shutil.rmtree(tables.directory, ignore_errors=True)
    staging.directory.rename(tables.directory)
    say(
        f"generated {tables.directory}: {rows:,} rows in {files} files "
        f"({meta['lakecdc_bytes'] / MIB:,.0f} MiB with lakecdc's columns, {meta['plain_bytes'] / MIB:,.0f} MiB plain) "
        f"in {time.perf_counter() - started:.1f} s"
    )
    return tables


# --- Batches ---------------------------------------------------------------------------------


def _keys(rng: np.random.Generator, kind: str, n: int, space: int) -> np.ndarray:
    """``n`` distinct keys of ``1..space``: spread over it, or drawn from ``2n`` contiguous keys."""
    if n > space:
        raise SystemExit(f"a batch of {n:,} keys does not fit a table of {space:,} rows")
    if kind == "uniform":
        return rng.choice(space, n, replace=False).astype(np.int64) + 1
    window = min(2 * n, space)
    start = int(rng.integers(1, space - window + 2))
    return rng.choice(window, n, replace=False).astype(np.int64) + start


def write_batch(path: Path, keys: np.ndarray, index: int, seed: int) -> None:
    """One batch of GoldenGate JSON updates of ``keys``, the ``index``-th of its series (later
    indexes are later in ``op_ts`` and ``pos``, all after the preload)."""
    values = _column_values(np.random.default_rng([seed, 1, index, len(keys)]), len(keys))
    frame = pl.DataFrame(
        {"id": keys, "seq": np.arange(len(keys), dtype=np.int64), **{c: values[c].fragments for c in COLUMNS}}
    )
    id_text = pl.col("id").cast(pl.String)
    line = pl.concat_str(
        [
            _header(
                pl.lit("U"),
                WORKLOAD_START_US + index * 1_000_000 + pl.col("seq"),
                index * 10_000_000 + pl.col("seq"),
            ),
            pl.lit(',"before":'),
            _object(id_text, {}),
            pl.lit(',"after":'),
            _object(id_text, {c: pl.col(c) for c in COLUMNS}),
            pl.lit("}"),
        ]
    )
    tmp = path.with_suffix(".partial")
    with tmp.open("wb") as handle:
        _write_lines(frame, line, handle)
    tmp.rename(path)


@dataclass(frozen=True)
class Batch:
    path: Path
    keys: int
    low: int
    high: int


def ensure_batch(
    path: Path, rng: np.random.Generator, kind: str, n: int, space: int, index: int, seed: int
) -> Batch:
    keys = _keys(rng, kind, n, space)  # drawn even when cached: later batches of a series stay the same
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_batch(path, keys, index, seed)
    return Batch(path, n, int(keys.min()), int(keys.max()))


def series_batches(workdir: Path, kind: str, merges: int, n: int, space: int, seed: int) -> list[Batch]:
    """Part a's ``merges`` consecutive batches of ``n`` keys of one kind."""
    folder = workdir / "merges" / f"batches_a_r{space}_k{n}_s{seed}" / kind
    rng = np.random.default_rng([seed, 2, KINDS.index(kind), space, n])
    return [
        ensure_batch(folder / f"batch_{i:04d}.json", rng, kind, n, space, i, seed)
        for i in range(1, merges + 1)
    ]


def sweep_batch(workdir: Path, kind: str, n: int, space: int, small: int, seed: int) -> Batch:
    """Part b's batch of ``n`` keys into a table of ``space`` rows: uniform over its own key space,
    clustered within the small table's (the same batch for both tables)."""
    folder = workdir / "merges" / f"batches_b_k{n}_s{seed}"
    if kind == "clustered":
        rng = np.random.default_rng([seed, 3, small, n])
        return ensure_batch(folder / f"clustered_r{small}.json", rng, kind, n, small, 1, seed)
    rng = np.random.default_rng([seed, 4, space, n])
    return ensure_batch(folder / f"uniform_r{space}.json", rng, kind, n, space, 1, seed)


# --- Measuring -------------------------------------------------------------------------------


@dataclass
class MergeMetrics:
    """The MERGE of one run, as delta-rs reported it, and how long ``execute()`` took."""

    seconds: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)


class MergeSpy:
    """Times every delta-rs ``TableMerger.execute()`` in this process and keeps its metrics."""

    def __init__(self) -> None:
        self.calls: list[MergeMetrics] = []

    @contextmanager
    def installed(self) -> Iterator[MergeSpy]:
        original = TableMerger.execute

        def execute(merger: TableMerger) -> dict[str, Any]:
            started = time.perf_counter()
            metrics = original(merger)
            self.calls.append(MergeMetrics(time.perf_counter() - started, dict(metrics)))
            return metrics

        TableMerger.execute = execute  # type: ignore[method-assign]
        try:
            yield self
        finally:
            TableMerger.execute = original  # type: ignore[method-assign]

    def take(self) -> MergeMetrics:
        """The one merge since the last call (fails on none or several)."""
        calls, self.calls = self.calls, []
        if len(calls) != 1:
            raise RuntimeError(f"expected one MERGE, saw {len(calls)}")
        return calls[0]


@dataclass(frozen=True)
class Layout:
    """The data files of one table version."""

    files: int
    bytes: int
    sizes: tuple[int, ...]
    #: mean number of files whose ID range holds a key (1.0: every key in one file's range)
    overlap: float

    def small(self, target: int) -> int:
        """Files below half the target size."""
        return sum(1 for size in self.sizes if size < target / 2)

    @property
    def median_mib(self) -> float:
        return statistics.median(self.sizes) / MIB if self.sizes else 0.0


def _actions(path: Path) -> pa.Table:
    return pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))


def table_layout(path: Path, probes: int = 1000) -> Layout:
    actions = _actions(path)
    sizes = tuple(actions.column("size_bytes").to_pylist())
    overlap = 0.0
    if actions.num_rows:
        lows = actions.column(f"min.{KEY}").to_numpy(zero_copy_only=False)
        highs = actions.column(f"max.{KEY}").to_numpy(zero_copy_only=False)
        points = np.linspace(lows.min(), highs.max(), probes)
        overlap = float(
            ((lows[None, :] <= points[:, None]) & (highs[None, :] >= points[:, None])).sum(axis=1).mean()
        )
    return Layout(len(sizes), sum(sizes), sizes, overlap)


def files_in_range(path: Path, low: int, high: int) -> int:
    """Files whose ID statistics overlap ``[low, high]``: those a key-range predicate cannot skip."""
    actions = _actions(path)
    lows, highs = actions.column(f"min.{KEY}"), actions.column(f"max.{KEY}")
    return int(pc.sum(pc.and_(pc.less_equal(lows, high), pc.greater_equal(highs, low))).as_py() or 0)


def _drop_removed(path: Path) -> None:
    """Delete the data files the table's current version no longer lists (outside any timing)."""
    live = {Path(p).name for p in _actions(path).column("path").to_pylist()}
    for file in path.glob("*.parquet"):
        if file.name not in live:
            file.unlink()


def read_seconds(path: Path) -> float:
    """Median seconds of reading the whole table (open, every file, every column) into Arrow."""
    times = []
    for _ in range(READ_REPEAT):
        started = time.perf_counter()
        table = DeltaTable(str(path)).to_pyarrow_table()
        times.append(time.perf_counter() - started)
        del table
    return statistics.median(times)


@dataclass
class Run:
    """One merge of one batch by one contender."""

    seconds: float
    cpu: float
    merge: MergeMetrics
    files_before: int
    in_range: int

    @property
    def rewritten(self) -> int:
        return int(self.merge.metrics.get("num_target_files_removed", 0))

    @property
    def added(self) -> int:
        return int(self.merge.metrics.get("num_target_files_added", 0))

    @property
    def scan_ms(self) -> int:
        return int(self.merge.metrics.get("scan_time_ms", 0))

    @property
    def copied(self) -> int:
        return int(self.merge.metrics.get("num_target_rows_copied", 0))


def _peer_merge(batch: Batch, table: Path) -> int:
    """The plain delta-rs merge: after images read by pyarrow, merged on the key alone."""
    events = pj.read_json(
        batch.path,
        read_options=pj.ReadOptions(use_threads=True),
        parse_options=pj.ParseOptions(explicit_schema=peers.arrow_event_schema()),
    )
    source = pa.Table.from_struct_array(events.column("after").combine_chunks())
    metrics = (
        DeltaTable(str(table))
        .merge(source, f"t.{KEY} = s.{KEY}", source_alias="s", target_alias="t")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    return int(metrics["num_target_rows_updated"])


def _lakecdc_merge(spark: SparkSession, batch: Batch, root: Path, engine: str = "delta-rs") -> int:
    import lakecdc

    summary = lakecdc.apply(str(batch.path), str(root), format="ogg-json", spark=spark, engine=engine)
    result = summary.table(TABLE)
    if not summary.ok or result.inserted or result.deleted:
        raise RuntimeError(f"lakecdc did not just update: {summary.render()}")
    return result.updated


def _spark_merge_metrics(table: Path) -> MergeMetrics:
    """Delta's own engine reports its MERGE in the commit (operationMetrics), as delta-rs's names."""
    commit = DeltaTable(str(table)).history(1)[0]
    if commit.get("operation") != "MERGE":
        raise RuntimeError(f"expected a MERGE commit, saw {commit.get('operation')}")
    m = {k: int(v) for k, v in (commit.get("operationMetrics") or {}).items() if str(v).lstrip("-").isdigit()}
    return MergeMetrics(m.get("executionTimeMs", 0) / 1000, {
        "num_target_files_removed": m.get("numTargetFilesRemoved", 0),
        "num_target_files_added": m.get("numTargetFilesAdded", 0),
        "num_target_rows_copied": m.get("numTargetRowsCopied", 0),
        "scan_time_ms": m.get("scanTimeMs", 0),
    })


def merge_once(spark: SparkSession, spy: MergeSpy, contender: str, batch: Batch, copy: Path) -> Run:
    """Merge ``batch`` into ``copy`` (a lakecdc root or a plain table) and measure it."""
    engine = ENGINES.get(contender)
    table = lakecdc_table(copy) if engine else copy
    before = len(_actions(table))
    in_range = files_in_range(table, batch.low, batch.high)
    gc.collect()
    started, cpu = time.perf_counter(), TreeCpu()
    updated = _lakecdc_merge(spark, batch, copy, engine) if engine else _peer_merge(batch, table)
    seconds, cpu = time.perf_counter() - started, cpu.since()
    if updated != batch.keys:
        raise RuntimeError(f"{contender}: {updated:,} rows updated, {batch.keys:,} expected")
    run = Run(seconds, cpu, _spark_merge_metrics(table) if engine == "delta-spark" else spy.take(), before, in_range)
    _drop_removed(table)
    return run


def _fresh_copy(template: Path, copy: Path) -> None:
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(template, copy)


def _template(tables: Tables, contender: str) -> Path:
    return tables.lakecdc_root if contender in ENGINES else tables.plain


def compact(contender: str, copy: Path, target_size: int) -> float:
    """Compact ``copy`` to ``target_size`` files as its contender's user would; seconds."""
    started = time.perf_counter()
    if contender in ENGINES:
        import lakecdc

        lakecdc.maintain(str(copy), target_file_size=target_size, engine=ENGINES[contender])
    else:
        table = DeltaTable(str(copy))
        table.optimize.compact(target_size=target_size)
        DeltaTable(str(copy)).create_checkpoint()
    return time.perf_counter() - started


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q))


# --- Part a ----------------------------------------------------------------------------------


@dataclass
class Series:
    """Part a for one contender and key distribution."""

    contender: str
    kind: str
    runs: list[Run]
    before: Layout
    after_merges: Layout
    after_compaction: Layout
    read_before: float
    read_after: float
    compact_seconds: float
    peak: int
    above_baseline: int

    def seconds(self) -> list[float]:
        return [r.seconds for r in self.runs]

    def merge_seconds(self) -> list[float]:
        return [r.merge.seconds for r in self.runs]

    def rewritten(self) -> list[float]:
        return [float(r.rewritten) for r in self.runs]


def run_series(
    spark: SparkSession,
    spy: MergeSpy,
    tables: Tables,
    contender: str,
    kind: str,
    batches: list[Batch],
    scratch: Path,
    target_size: int,
    say: Callable[[str], None],
) -> Series:
    copy = scratch / f"a-{contender}-{kind}"
    _fresh_copy(_template(tables, contender), copy)
    table = lakecdc_table(copy) if contender in ENGINES else copy
    before = table_layout(table)
    runs: list[Run] = []
    step = max(1, len(batches) // 10)
    with PeakRss() as memory:
        for i, batch in enumerate(batches, start=1):
            runs.append(merge_once(spark, spy, contender, batch, copy))
            if i % step == 0 or i == len(batches):
                last = runs[-step:] if i % step == 0 else runs[-(i % step) :]
                say(
                    f"  {contender} {kind}: merge {i}/{len(batches)}: median {statistics.median(r.seconds for r in last):.2f} s "
                    f"(MERGE {statistics.median(r.merge.seconds for r in last):.2f} s), "
                    f"files rewritten {statistics.median(r.rewritten for r in last):g}, table {runs[-1].files_before - runs[-1].rewritten + runs[-1].added} files"
                )
    after_merges = table_layout(table)
    read_before = read_seconds(table)
    seconds = compact(contender, copy, target_size)
    _drop_removed(table)
    after_compaction = table_layout(table)
    read_after = read_seconds(table)
    say(
        f"  {contender} {kind}: files {after_merges.files} -> {after_compaction.files} after compaction "
        f"({seconds:.1f} s); read {read_before:.2f} s -> {read_after:.2f} s"
    )
    shutil.rmtree(copy)
    return Series(
        contender,
        kind,
        runs,
        before,
        after_merges,
        after_compaction,
        read_before,
        read_after,
        seconds,
        memory.peak,
        memory.peak - memory.baseline,
    )


def part_a_markdown(series: list[Series], target_size: int) -> str:
    peer = {s.kind: s for s in series if s.contender == "peer"}
    rows = [
        "| keys | contender | merges | median s | p95 s | ratio vs peer | MERGE median s | MERGE p95 s "
        "| CPU s median | scan ms median | files in key range (median) | files rewritten median / p95 / total | rows copied median "
        "| first 10 / last 10 median s | peak RSS |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in series:
        secs = s.seconds()
        other = peer.get(s.kind)
        ratio = f"{statistics.median(other.seconds()) / statistics.median(secs):.2f}" if other else "n/a"
        rewritten = s.rewritten()
        head, tail = secs[:10], secs[-10:]
        rows.append(
            f"| {s.kind} | {s.contender} | {len(s.runs)} | {statistics.median(secs):.2f} | {percentile(secs, 95):.2f} "
            f"| {ratio} | {statistics.median(s.merge_seconds()):.2f} | {percentile(s.merge_seconds(), 95):.2f} "
            f"| {statistics.median(r.cpu for r in s.runs):.1f} | {statistics.median(r.scan_ms for r in s.runs):,.0f} "
            f"| {statistics.median(r.in_range for r in s.runs):g} "
            f"| {statistics.median(rewritten):g} / {percentile(rewritten, 95):g} / {sum(rewritten):,.0f} "
            f"| {statistics.median(r.copied for r in s.runs):,.0f} "
            f"| {statistics.median(head):.2f} / {statistics.median(tail):.2f} | {s.peak / GIB:.2f} GiB |"
        )
    rows += [
        "",
        f"Layout and full-table read (small file: below half the target size of {target_size / MIB:.1f} MiB; "
        "key overlap: how many files' ID ranges hold a key, on average):",
        "",
        "| keys | contender | files before merges | after merges: files / small / median MiB / key overlap "
        "| read s | compaction s | after compaction: files / small / median MiB / key overlap | read s | read ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in series:
        a, c = s.after_merges, s.after_compaction
        rows.append(
            f"| {s.kind} | {s.contender} | {s.before.files} | {a.files} / {a.small(target_size)} / {a.median_mib:.1f} / {a.overlap:.1f} "
            f"| {s.read_before:.2f} | {s.compact_seconds:.1f} "
            f"| {c.files} / {c.small(target_size)} / {c.median_mib:.1f} / {c.overlap:.1f} | {s.read_after:.2f} "
            f"| {s.read_before / s.read_after:.2f} |"
        )
    return "\n".join(rows)


# --- Part b ----------------------------------------------------------------------------------


@dataclass
class Sweep:
    """Part b for one table size, key distribution and contender."""

    rows: int
    files: int
    kind: str
    contender: str
    runs: list[Run]

    @property
    def seconds(self) -> float:
        return statistics.median(r.seconds for r in self.runs)

    @property
    def merge_seconds(self) -> float:
        return statistics.median(r.merge.seconds for r in self.runs)

    @property
    def rewritten(self) -> float:
        return statistics.median(r.rewritten for r in self.runs)

    @property
    def cpu(self) -> float:
        return statistics.median(r.cpu for r in self.runs)


def run_sweep(
    spark: SparkSession,
    spy: MergeSpy,
    tables: Tables,
    contender: str,
    kind: str,
    batch: Batch,
    scratch: Path,
    repeat: int,
) -> Sweep:
    copy = scratch / f"b-{contender}-{kind}-r{tables.rows}"
    runs = []
    for _ in range(repeat):
        _fresh_copy(_template(tables, contender), copy)
        runs.append(merge_once(spark, spy, contender, batch, copy))
    shutil.rmtree(copy)
    return Sweep(tables.rows, tables.files, kind, contender, runs)


def part_b_markdown(sweeps: list[Sweep]) -> str:
    by = {(s.rows, s.kind, s.contender): s for s in sweeps}
    smallest = min(s.rows for s in sweeps)
    rows = [
        "| keys | table rows (files) | contender | seconds | ratio vs peer | MERGE s | CPU s | files in key range "
        "| files rewritten | rows copied | scan ms | seconds vs smallest table | MERGE s vs smallest table |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sweeps:
        peer = by.get((s.rows, s.kind, "peer"))
        base = by[(smallest, s.kind, s.contender)]
        rows.append(
            f"| {s.kind} | {s.rows:,} ({s.files}) | {s.contender} | {s.seconds:.2f} "
            f"| {peer.seconds / s.seconds:.2f} | {s.merge_seconds:.2f} | {statistics.median(r.cpu for r in s.runs):.1f} "
            f"| {statistics.median(r.in_range for r in s.runs):g} | {s.rewritten:g} of {s.files} "
            f"| {statistics.median(r.copied for r in s.runs):,.0f} | {statistics.median(r.scan_ms for r in s.runs):,.0f} "
            f"| {s.seconds / base.seconds:.2f} | {s.merge_seconds / base.merge_seconds:.2f} |"
        )
    return "\n".join(rows)


@dataclass
class Verdict:
    rewritten_share: float
    rewritten_ok: bool
    cost_ratio: float
    merge_ratio: float
    cpu_ratio: float
    cost_ok: bool

    def lines(self, big: Sweep, small: Sweep) -> str:
        return (
            f"- Target 1, a clustered batch into {big.rows:,} rows rewrites at most 5% of the files: lakecdc rewrote "
            f"{big.rewritten:g} of {big.files} ({self.rewritten_share:.0%}): **{'met' if self.rewritten_ok else 'missed'}**.\n"
            f"- Target 2, it costs within 2x of the same batch into {small.rows:,} rows: {big.seconds:.2f} s vs "
            f"{small.seconds:.2f} s, {self.cost_ratio:.2f}x (the MERGE alone: {big.merge_seconds:.2f} s vs "
            f"{small.merge_seconds:.2f} s, {self.merge_ratio:.2f}x; CPU seconds of the process tree, steadier when "
            f"other work shares the machine: {big.cpu:.1f} vs {small.cpu:.1f}, {self.cpu_ratio:.2f}x): "
            f"**{'met' if self.cost_ok else 'missed'}**."
        )


def verdict(sweeps: list[Sweep]) -> tuple[Verdict, Sweep, Sweep]:
    mine = sorted(
        (s for s in sweeps if s.contender == "lakecdc" and s.kind == "clustered"), key=lambda s: s.rows
    )
    small, big = mine[0], mine[-1]
    share = big.rewritten / big.files
    ratio = big.seconds / small.seconds
    return (
        Verdict(
            share,
            share <= 0.05,
            ratio,
            big.merge_seconds / small.merge_seconds,
            big.cpu / small.cpu if small.cpu else float("nan"),
            ratio <= 2.0,
        ),
        big,
        small,
    )


# --- Main ------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rows", type=int, default=10_000_000, help="rows of the big table (the small one: a tenth)"
    )
    parser.add_argument("--merges", type=int, default=200, help="consecutive merges of part a")
    parser.add_argument("--batch-keys", type=int, default=1_000, help="keys per merge of part a")
    parser.add_argument("--sweep-keys", type=int, default=10_000, help="keys of part b's batch")
    parser.add_argument("--part", default="a,b", help="a, b or a,b")
    parser.add_argument("--repeat", type=int, default=3, help="part b: runs per case on fresh copies, median")
    parser.add_argument(
        "--target-file-size",
        type=int,
        default=None,
        help="compaction's target in bytes (default: the mean file size of the generated big table)",
    )
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--contenders", default=",".join(DEFAULT_CONTENDERS),
                        help=f"comma-separated, of {', '.join(CONTENDERS)} (lakecdc-delta-spark needs Delta's jars)")
    parser.add_argument("--write-results", action="store_true", help="record the tables in bench/RESULTS.md")
    args = parser.parse_args(argv)
    parts = set(args.part.split(","))
    if not parts or parts - {"a", "b"}:
        parser.error("--part: a, b or a,b")
    args.parts = parts
    args.contenders = tuple(c for c in args.contenders.split(",") if c)
    if set(args.contenders) - set(CONTENDERS) or "peer" not in args.contenders:
        parser.error(f"--contenders: of {', '.join(CONTENDERS)}, with peer (the ratios are against it)")
    if args.rows % (BIG_FILES * SMALL_DIVISOR):
        parser.error(f"--rows must be a multiple of {BIG_FILES * SMALL_DIVISOR}")
    return args


def main(argv: list[str] | None = None, spark: SparkSession | None = None) -> dict[str, Any]:
    """Run the benchmark; returns what it printed, as objects (``series``, ``sweeps``, ``verdict``)."""
    args = parse_args(argv)
    pa.set_cpu_count(2)  # as bench.run: pyarrow gets the 2 cores Spark's local[2] gets
    say = lambda line: print(line, flush=True)  # noqa: E731
    scratch = args.workdir / "merges" / "runs"
    scratch.mkdir(parents=True, exist_ok=True)
    own_spark = spark is None and SparkSession.getActiveSession() is None
    started = time.perf_counter()
    spark = spark or start_spark()
    startup = time.perf_counter() - started
    out: dict[str, Any] = {"series": [], "sweeps": [], "verdict": None, "sections": {}}
    try:
        big = ensure_tables(spark, args.workdir, args.rows, BIG_FILES, args.seed, say)
        small = ensure_tables(spark, args.workdir, args.rows // SMALL_DIVISOR, SMALL_FILES, args.seed, say)
        target_size = args.target_file_size or big.meta["lakecdc_bytes"] // BIG_FILES
        out["target_size"] = target_size
        spy = MergeSpy()
        with spy.installed():
            # Spark's first job, untimed: lakecdc merges a batch into a copy of the small table
            warm = sweep_batch(
                args.workdir,
                "clustered",
                min(args.batch_keys, small.rows),
                small.rows,
                small.rows,
                args.seed + 1,
            )
            _fresh_copy(small.lakecdc_root, scratch / "warmup")
            started = time.perf_counter()
            merge_once(spark, spy, "lakecdc", warm, scratch / "warmup")
            shutil.rmtree(scratch / "warmup")
            first_job = time.perf_counter() - started
            spark_line = (
                f"Spark start-up: {startup:.1f} s; first job (lakecdc merging {warm.keys:,} keys into a copy of the "
                f"{small.rows:,}-row table): {first_job:.1f} s. Neither is included below."
            )
            say(spark_line)
            machine = machine_markdown(spark)
            command = "python -m bench.merges " + " ".join(sys.argv[1:] if argv is None else argv)
            when = lambda: dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")  # noqa: E731
            tables_line = (
                f"Tables: {big.rows:,} rows in {big.files} files ({big.meta['lakecdc_bytes'] / MIB:,.0f} MiB as a lakecdc "
                f"target, {big.meta['plain_bytes'] / MIB:,.0f} MiB plain) and {small.rows:,} rows in {small.files} files, "
                "each file one contiguous ID range"
            )
            if "a" in args.parts:
                say(f"\n== part a: {args.merges} merges of {args.batch_keys:,} keys into {big.rows:,} rows")
                with OtherLoad() as other:
                    for kind in KINDS:
                        batches = series_batches(
                            args.workdir, kind, args.merges, args.batch_keys, big.rows, args.seed
                        )
                        for contender in args.contenders:
                            out["series"].append(
                                run_series(
                                    spark, spy, big, contender, kind, batches, scratch, target_size, say
                                )
                            )
                table = part_a_markdown(out["series"], target_size)
                load = f"Other work took {other.share:.0%} of the machine's CPU time meanwhile."
                say(f"\n{table}\n\n{load}")
                heading = (
                    f"Merge cost (a): {args.merges} merges of {args.batch_keys:,} keys into {big.rows:,} rows"
                )
                out["sections"][heading] = (
                    f"Measured {when()} with `{command}` (issue 6).\n\n- Machine: {machine}.\n- {tables_line}.\n"
                    f"- {spark_line}\n- {load}\n\n{table}\n"
                )
                if args.write_results:  # each part as soon as it is done
                    write_results(heading, out["sections"][heading])
            if "b" in args.parts:
                say(f"\n== part b: {args.sweep_keys:,} keys into {small.rows:,} and {big.rows:,} rows")
                with OtherLoad() as other:
                    for kind in KINDS:
                        for tables in (small, big):
                            batch = sweep_batch(
                                args.workdir, kind, args.sweep_keys, tables.rows, small.rows, args.seed
                            )
                            for contender in args.contenders:
                                sweep = run_sweep(
                                    spark, spy, tables, contender, kind, batch, scratch, args.repeat
                                )
                                out["sweeps"].append(sweep)
                                say(
                                    f"  {kind} into {tables.rows:,} rows, {contender}: {sweep.seconds:.2f} s "
                                    f"(MERGE {sweep.merge_seconds:.2f} s), {sweep.rewritten:g} of {tables.files} files rewritten"
                                )
                table = part_b_markdown(out["sweeps"])
                result, big_sweep, small_sweep = verdict(out["sweeps"])
                out["verdict"] = result
                load = f"Other work took {other.share:.0%} of the machine's CPU time meanwhile."
                say(f"\n{table}\n\n{result.lines(big_sweep, small_sweep)}\n\n{load}")
                heading = (
                    f"Merge cost (b): {args.sweep_keys:,} keys into {small.rows:,} and {big.rows:,} rows"
                )
                runs = (
                    f"median of {args.repeat} runs per case, each on a fresh copy"
                    if args.repeat > 1
                    else "one run per case"
                )
                out["sections"][heading] = (
                    f"Measured {when()}, {runs}, with `{command}` (issue 6).\n\n- Machine: {machine}.\n- {tables_line}.\n"
                    f"- {spark_line}\n- {load}\n\n{table}\n\n{result.lines(big_sweep, small_sweep)}\n"
                )
                if args.write_results:
                    write_results(heading, out["sections"][heading])
    finally:
        if own_spark:
            spark.stop()
    return out


if __name__ == "__main__":
    main()
