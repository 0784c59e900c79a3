"""Declarative merge jobs: one YAML file per pipeline, run once or kept running.

    lakecdc run jobs/sample.yaml             # apply what is new, maintain when due, print a summary
    lakecdc run jobs/sample.yaml --watch     # the same every --interval (default 60s) until stopped
    lakecdc run jobs/sample.yaml --stream    # each source as a Structured Streaming query (lakecdc.streaming)

A job file::

    name: sample                       # a label for the summary (default: the file name)
    target: lake                       # root of the Delta tables
    sources:                           # one or more; each applied in turn into the same target
      - input: jobs/sample/landing      # a path or glob, or a list of them
        format: ogg-json
        options: {treatAllColumnsAsStrings: "false"}   # the format's options (cli.md names)
    tables:
      include: ["QASOURCE.*"]          # source-table patterns to apply (default: all)
      exclude: ["QASOURCE.AUDIT_*"]    # never applied: their events are counted as skipped
      keys:                            # for messages that carry no primary key
        QASOURCE.TCUSTORD: [CUST_CODE, ORDER_DATE, PRODUCT_CODE, ORDER_ID]
      column_list: {}                  # DLT's column_list / except_column_list, per table
      except_column_list: {}
      stored_as_scd_type: {QASOURCE.TCUSTORD: 2}   # SCD type 2 history tables (or 2: every table)
      track_history_column_list: {}    # history tables: only these columns open a new version,
      track_history_except_column_list: {}   # or all but these (per table; lakecdc.consolidate.history)
      paths: {QASOURCE.TCUSTMER: sales/customers}   # a table's Delta table elsewhere than <target>/<table>
      pk_update: {QASOURCE.TCUSTORD: update}        # per table, over the job's pk_update
      tombstone_retention: {QASOURCE.TCUSTORD: 30d} # per table, over the job's retention
      sequence_by: {QASOURCE.TCUSTORD: [UPDATED_AT]} # per table, over the job's sequence_by
    pk_update: delete-insert           # or update / abend
    sequence_by: [op_ts, pos]          # order changes by these fields (lakecdc.changes.sequence); default:
                                       # the format's order
    parallel_tables: 2                 # tables prepared and merged at once (default: lakecdc.apply's)
    tombstone_retention: 7d            # how long a deleted key blocks late events
    apply_as_truncates: true
    complete_transactions: false       # Debezium: whole transactions only
    min_file_age: 30s                  # files changed more recently wait for the next run
    contracts: data_contracts          # ODCS contracts: keys and column types
    checks: true                       # after each run, the contracts' data-quality checks on the tables it
                                       # changed; a failed 'fail' check blocks that table's next merge
    change_data_feed: false            # true, or a list of tables: Delta's Change Data Feed on
    maintenance:                       # optional: lakecdc maintain, automatically
      every_runs: 12                   # after this many runs that changed something ...
      max_files: 200                   # ... or as soon as a table has more files than this
      zorder: keys                     # or a list of columns, or leave out for compaction
      target_file_size: 128MB
      vacuum_retention: 7d
    stream:                            # optional: settings of lakecdc run --stream
      trigger: available-now           # or once, or an interval such as "30 seconds" (runs until stopped)
      max_files_per_trigger: 500       # default: every new file in one batch
      checkpoint: lake/_lakecdc/jobs/sample.stream   # the default; source N uses <checkpoint>/source-N

With ``--stream`` every source must be one directory (a landing directory; no globs) and
``min_file_age`` must be 0: a stream takes each file once, when it lands (see lakecdc.streaming).

Relative paths are read from the directory the command runs in. A mistake in the file (an
unknown key, a wrong type, a missing ``target``) is reported with its line before anything runs.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from lakecdc.changes.sequence import parse_sequence_by
from lakecdc.check.contracts import load_contracts
from lakecdc.check.quality import check_tables
from lakecdc.config.durations import parse_duration, parse_size, parse_trigger
from lakecdc.config.where import Where
from lakecdc.decode import DECODERS
from lakecdc.errors import ConfigError
from lakecdc.decode.goldengate.properties import read_gg_properties
from lakecdc.maintenance.maintain import maintain
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.run.apply import apply
from lakecdc.run.state import known_tables, table_path
from lakecdc.spark.session import get_spark
from lakecdc.streaming import ChangeStream, StreamBatch, stream

_TOP = {"name", "target", "sources", "tables", "pk_update", "tombstone_retention", "apply_as_truncates",
        "complete_transactions", "maintenance", "engine", "contracts", "min_file_age", "stream", "change_data_feed",
        "checks", "sequence_by", "parallel_tables"}
_SOURCE = {"input", "format", "options", "gg_properties", "gg_handler"}
_TABLES = {"include", "exclude", "keys", "column_list", "except_column_list", "stored_as_scd_type",
           "track_history_column_list", "track_history_except_column_list", "paths", "pk_update",
           "tombstone_retention", "sequence_by"}
_MAINTENANCE = {"every_runs", "max_files", "zorder", "target_file_size", "vacuum_retention", "tombstone_retention"}
_STREAM = {"trigger", "max_files_per_trigger", "checkpoint"}


@dataclass(frozen=True)
class Source:
    inputs: tuple[str, ...]
    format: str
    options: dict[str, str]


@dataclass(frozen=True)
class Maintenance:
    every_runs: int | None = None
    max_files: int | None = None
    zorder: str | list[str] | None = None
    target_file_size: int | None = None
    vacuum_retention: dt.timedelta | None = dt.timedelta(days=7)


@dataclass(frozen=True)
class Streaming:
    """How ``lakecdc run --stream`` runs the job's sources."""

    trigger: str = "available-now"
    max_files_per_trigger: int | None = None
    #: root of the sources' checkpoints (default ``<target>/_lakecdc/jobs/<name>.stream``)
    checkpoint: str | None = None


@dataclass(frozen=True)
class Job:
    """A parsed, validated job file."""

    name: str
    path: str
    target: str
    sources: tuple[Source, ...]
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    keys: dict[str, list[str]] = field(default_factory=dict)
    column_list: dict[str, list[str]] = field(default_factory=dict)
    except_column_list: dict[str, list[str]] = field(default_factory=dict)
    pk_update: str = "delete-insert"
    tombstone_retention: dt.timedelta = dt.timedelta(days=7)
    apply_as_truncates: bool = True
    complete_transactions: bool = False
    engine: str = "auto"
    maintenance: Maintenance | None = None
    #: ODCS contracts (a file or directory): keys and column types
    contracts: str | None = None
    #: files changed less than this long ago are left for a later run
    min_file_age: dt.timedelta = dt.timedelta(0)
    stream: Streaming = field(default_factory=Streaming)
    #: per table (names or patterns): 2 for an SCD type 2 history table (lakecdc.consolidate.history)
    stored_as_scd_type: dict[str, int] = field(default_factory=dict)
    track_history_column_list: dict[str, list[str]] = field(default_factory=dict)
    track_history_except_column_list: dict[str, list[str]] = field(default_factory=dict)
    #: True, or the tables whose Delta tables get Change Data Feed
    change_data_feed: bool | tuple[str, ...] = False
    #: per source table: its Delta table's path (relative to the target, absolute or a URI), its
    #: pk_update and its tombstone retention, over the job-wide settings
    table_paths: dict[str, str] = field(default_factory=dict)
    pk_update_by_table: dict[str, str] = field(default_factory=dict)
    retention_by_table: dict[str, dt.timedelta] = field(default_factory=dict)
    #: run the contracts' data-quality checks on the tables a run changed (lakecdc.check.quality)
    checks: bool = False
    #: fields ordering the changes (lakecdc.changes.sequence): every table's, and per table over it
    sequence_by: tuple[str, ...] = ()
    sequence_by_table: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: tables prepared and merged at once (None: lakecdc.apply's default)
    parallel_tables: int | None = None


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; a :class:`ConfigError` names the file, line and key."""
    text = Path(path).read_text()
    where = Where(str(path), text)
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise where.error((), "expected a mapping (target:, sources:, ...)")

    def check_keys(obj: Any, allowed: set[str], at: tuple[str, ...]) -> dict:
        if not isinstance(obj, dict):
            raise where.error(at, f"expected a mapping, found {type(obj).__name__}")
        unknown = sorted(set(map(str, obj)) - allowed)
        if unknown:
            raise where.error((*at, unknown[0]), f"unknown key; expected one of {', '.join(sorted(allowed))}")
        return obj

    def duration(value: Any, at: tuple[str, ...]) -> dt.timedelta:
        try:
            return parse_duration(str(value))
        except ConfigError as exc:
            raise where.error(at, str(exc)) from None

    def table_lists(obj: Any, at: tuple[str, ...]) -> dict[str, list[str]]:
        if obj is None:
            return {}
        if not isinstance(obj, dict) or not all(isinstance(v, list) and v for v in obj.values()):
            raise where.error(at, "expected {TABLE: [COLUMN, ...]}")
        return {str(k): [str(c) for c in v] for k, v in obj.items()}

    def patterns(obj: Any, at: tuple[str, ...]) -> tuple[str, ...]:
        if obj is None:
            return ()
        items = [obj] if isinstance(obj, str) else obj
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise where.error(at, "expected a pattern or a list of patterns such as QASOURCE.*")
        return tuple(items)

    def table_map(obj: Any, at: tuple[str, ...], convert: Callable[..., Any]) -> dict[str, Any]:
        if obj is None:
            return {}
        if not isinstance(obj, dict):
            raise where.error(at, "expected {TABLE: VALUE}")
        return {str(k): convert(v, (*at, str(k))) if convert is not str else str(v) for k, v in obj.items()}

    def sequence(value: Any, at: tuple[str, ...]) -> tuple[str, ...]:
        if not isinstance(value, (str, list)) or not value:
            raise where.error(at, "expected a list of fields such as [UPDATED_AT] (op_ts, pos, source.<name>, a column)")
        try:
            return tuple(str(f) for f in parse_sequence_by(value))
        except ConfigError as exc:
            raise where.error(at, str(exc)) from None

    def pk_mode(value: Any, at: tuple[str, ...]) -> str:
        if value not in ("delete-insert", "update", "abend"):
            raise where.error(at, f"{value!r}: use delete-insert, update or abend")
        return str(value)

    check_keys(data, _TOP, ())
    checks = data.get("checks", False)
    if not isinstance(checks, bool):
        raise where.error(("checks",), "expected true or false")
    if checks and not data.get("contracts"):
        raise where.error(("checks",), "checks come from data contracts: set contracts: too")
    if not data.get("target"):
        raise where.error(("target",), "missing: the root directory of the Delta tables")
    raw_sources = data.get("sources")
    if not isinstance(raw_sources, list) or not raw_sources:
        raise where.error(("sources",), "expected a list of sources, each with input: and format:")
    sources = []
    for i, src in enumerate(raw_sources):
        at = ("sources", str(i))
        check_keys(src, _SOURCE, at)
        fmt, options = src.get("format"), {str(k): str(v) for k, v in (src.get("options") or {}).items()}
        if src.get("gg_properties"):
            gg_format, gg_options = read_gg_properties(str(src["gg_properties"]), src.get("gg_handler"))
            fmt, options = fmt or gg_format, {**gg_options, **options}
        if fmt not in DECODERS:
            raise where.error((*at, "format"), f"{fmt!r} is not a format; use one of {', '.join(sorted(DECODERS))}")
        inputs = src.get("input")
        items = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(items, list) or not items:
            raise where.error((*at, "input"), "expected a path or glob, or a list of them")
        sources.append(Source(tuple(str(x) for x in items), fmt, options))
    tables = check_keys(data.get("tables") or {}, _TABLES, ("tables",))
    pk_update = str(data.get("pk_update", "delete-insert"))
    if pk_update not in ("delete-insert", "update", "abend"):
        raise where.error(("pk_update",), f"{pk_update!r}: use delete-insert, update or abend")
    maintenance = None
    if data.get("maintenance") is not None:
        m = check_keys(data["maintenance"], _MAINTENANCE, ("maintenance",))
        try:
            size = parse_size(str(m["target_file_size"])) if m.get("target_file_size") else None
        except ConfigError as exc:
            raise where.error(("maintenance", "target_file_size"), str(exc)) from None
        vacuum = m.get("vacuum_retention", "7d")
        maintenance = Maintenance(
            every_runs=int(m["every_runs"]) if m.get("every_runs") else None,
            max_files=int(m["max_files"]) if m.get("max_files") else None,
            zorder=m.get("zorder"), target_file_size=size,
            vacuum_retention=None if str(vacuum).lower() == "none" else duration(vacuum, ("maintenance", "vacuum_retention")),
        )
    scd = tables.get("stored_as_scd_type") or {}
    if not isinstance(scd, dict):
        scd = {"*": scd}
    for table, kind in scd.items():
        if kind not in (1, 2):
            key = ("tables", "stored_as_scd_type", *((str(table),) if table != "*" else ()))
            raise where.error(key, f"{kind!r}: use 1 (current state) or 2 (SCD type 2 history)")
    parallel = data.get("parallel_tables")
    if parallel is not None and (not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1):
        raise where.error(("parallel_tables",), f"{parallel!r}: expected a number of tables, 1 or more")
    cdf = data.get("change_data_feed", False)
    if not isinstance(cdf, bool):
        cdf = patterns(cdf, ("change_data_feed",))
    streaming = Streaming()
    if data.get("stream") is not None:
        st = check_keys(data["stream"], _STREAM, ("stream",))
        trigger = str(st.get("trigger", "available-now"))
        try:
            parse_trigger(trigger)
        except ConfigError as exc:
            raise where.error(("stream", "trigger"), str(exc)) from None
        most = st.get("max_files_per_trigger")
        if most is not None and (not isinstance(most, int) or isinstance(most, bool) or most < 1):
            raise where.error(("stream", "max_files_per_trigger"), f"{most!r}: expected a number of files, 1 or more")
        streaming = Streaming(trigger=trigger, max_files_per_trigger=most,
                              checkpoint=str(st["checkpoint"]) if st.get("checkpoint") else None)
    return Job(
        name=str(data.get("name") or Path(path).stem), path=str(path), target=str(data["target"]),
        sources=tuple(sources), include=patterns(tables.get("include"), ("tables", "include")),
        exclude=patterns(tables.get("exclude"), ("tables", "exclude")),
        keys=table_lists(tables.get("keys"), ("tables", "keys")),
        column_list=table_lists(tables.get("column_list"), ("tables", "column_list")),
        except_column_list=table_lists(tables.get("except_column_list"), ("tables", "except_column_list")),
        pk_update=pk_update,
        tombstone_retention=duration(data.get("tombstone_retention", "7d"), ("tombstone_retention",)),
        apply_as_truncates=bool(data.get("apply_as_truncates", True)),
        complete_transactions=bool(data.get("complete_transactions", False)),
        engine=str(data.get("engine", "auto")), maintenance=maintenance,
        contracts=str(data["contracts"]) if data.get("contracts") else None,
        min_file_age=duration(data.get("min_file_age", "0"), ("min_file_age",)), stream=streaming,
        stored_as_scd_type={str(t): int(k) for t, k in scd.items()},
        track_history_column_list=table_lists(tables.get("track_history_column_list"), ("tables", "track_history_column_list")),
        track_history_except_column_list=table_lists(
            tables.get("track_history_except_column_list"), ("tables", "track_history_except_column_list")),
        change_data_feed=cdf,
        table_paths=table_map(tables.get("paths"), ("tables", "paths"), str),
        pk_update_by_table=table_map(tables.get("pk_update"), ("tables", "pk_update"), pk_mode),
        retention_by_table=table_map(tables.get("tombstone_retention"), ("tables", "tombstone_retention"),
                                     lambda v, at: duration(v, at)),
        checks=checks,
        sequence_by=sequence(data["sequence_by"], ("sequence_by",)) if data.get("sequence_by") is not None else (),
        sequence_by_table=table_map(tables.get("sequence_by"), ("tables", "sequence_by"), sequence),
        parallel_tables=parallel,
    )


@dataclass
class JobResult:
    """One run of a job: the apply summary per source and the maintenance done, if any."""

    job: str
    summaries: list[Any]
    maintained: list[Any]
    checks: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every table applied and no 'fail' check failed."""
        return all(s.ok for s in self.summaries) and not any(
            not c.success and c.severity == "fail" for c in self.checks)

    def render(self) -> str:
        parts = [f"job {self.job}"]
        parts += [s.render() for s in self.summaries]
        if self.checks:
            failed = [c for c in self.checks if not c.success]
            parts.append(f"checks: {len(self.checks) - len(failed)} of {len(self.checks)} passed")
            parts += [f"  {c.line()}" for c in failed]
        if self.maintained:
            parts.append("maintenance:")
            parts += [f"  {r.line()}" for r in self.maintained]
        return "\n".join(parts)


def run_job(job: Job, *, spark: Any = None, progress: Callable[[str], None] | None = None) -> JobResult:
    """Apply every source of ``job`` once (only new files), then maintain the tables when due."""
    summaries = []
    for src in job.sources:
        inputs = [p for p in src.inputs if any(c in p for c in "*?[") or Path(p).exists()]
        missing = [p for p in src.inputs if p not in inputs]
        if missing:
            raise ConfigError(f"{job.path}: input {missing[0]!r} does not exist")
        summaries.append(apply(
            inputs, job.target, format=src.format, options=src.options, spark=spark, progress=progress,
            min_file_age=job.min_file_age.total_seconds(), **_settings(job),
        ))
    checked = _check_if_asked(job, summaries, spark=spark, progress=progress)
    return JobResult(job.name, summaries, _maintain_if_due(job, summaries, spark=spark, progress=progress), checked)


def _check_if_asked(job: Job, summaries: list[Any], *, spark: Any, progress: Callable[[str], None] | None) -> list[Any]:
    """The contracts' checks on the tables this run changed (a failed 'fail' check blocks the
    table's next merge: see lakecdc.check.quality)."""
    if not job.checks or job.contracts is None:
        return []
    contracts = load_contracts(job.contracts)
    changed = sorted({t.source_table for s in summaries for t in s.tables
                      if t.source_table in contracts and (t.inserted or t.updated or t.deleted)})
    if not changed:
        return []
    if progress:
        progress(f"checking {len(changed)} table(s) against their contracts")
    return check_tables(job.target, contracts, spark=spark, tables=changed)


def _settings(job: Job) -> dict[str, Any]:
    """The job's settings as keyword arguments of lakecdc.apply (and lakecdc.stream)."""
    pk_update: Any = {**job.pk_update_by_table, "*": job.pk_update} if job.pk_update_by_table else job.pk_update
    retention: Any = ({**job.retention_by_table, "*": job.tombstone_retention} if job.retention_by_table
                      else job.tombstone_retention)
    return dict(
        keys=job.keys, pk_update=pk_update, engine=job.engine, tombstone_retention=retention,
        table_paths=job.table_paths or None,
        column_list=job.column_list, except_column_list=job.except_column_list,
        apply_as_truncates=job.apply_as_truncates, complete_transactions=job.complete_transactions,
        include_tables=job.include, exclude_tables=job.exclude, contracts=job.contracts,
        stored_as_scd_type=job.stored_as_scd_type, track_history_column_list=job.track_history_column_list or None,
        track_history_except_column_list=job.track_history_except_column_list or None,
        change_data_feed=job.change_data_feed,
        sequence_by=({**job.sequence_by_table, **({"*": job.sequence_by} if job.sequence_by else {})}
                     if job.sequence_by_table else (job.sequence_by or None)),
        parallel_tables=job.parallel_tables,
    )


def _maintain_if_due(job: Job, summaries: list[Any], *, spark: Any, progress: Callable[[str], None] | None) -> list[Any]:
    if job.maintenance is None or not _maintenance_due(job, summaries):
        return []
    maintained = maintain(
        job.target, zorder=job.maintenance.zorder, target_file_size=job.maintenance.target_file_size,
        vacuum_retention=job.maintenance.vacuum_retention, tombstone_retention=job.tombstone_retention,
        engine="delta-rs" if job.engine == "auto" else job.engine, spark=spark, progress=progress,
    )
    _state_path(job).write_text(json.dumps({"runs_since": 0}))
    return maintained


def _prefixed(progress: Callable[[str], None] | None, prefix: str) -> Callable[[str], None] | None:
    if progress is None:
        return None
    return lambda msg: progress(prefix + msg)


def stream_job(
    job: Job, *, trigger: str | None = None, spark: Any = None, progress: Callable[[str], None] | None = None,
    report: Callable[[JobResult], None] | None = None,
) -> JobResult:
    """Run every source of ``job`` as a Structured Streaming query into the job's target.

    Each batch is applied as :func:`run_job` applies a source (the same settings, the same ledger),
    then reported, then the tables are maintained when due. An available-now or once ``trigger``
    (default: the job's ``stream.trigger``) returns when every source is done; an interval runs
    until a batch fails or the caller is interrupted (the queries are stopped either way).
    Returns what each source applied in total.
    """
    if job.min_file_age:
        raise ConfigError(f"{job.path}: min_file_age: a stream takes each file once, when it lands; "
                          "set it to 0 for --stream (make files land whole: write, then rename)")
    for i, src in enumerate(job.sources):
        if len(src.inputs) != 1 or not Path(src.inputs[0]).is_dir():
            raise ConfigError(f"{job.path}: sources.{i}.input: --stream reads one landing directory per source; "
                              f"found {list(src.inputs)}")
    root = Path(job.stream.checkpoint or Path(job.target) / "_lakecdc" / "jobs" / f"{job.name}.stream")
    spark = spark or get_spark()  # resolved here: the batches run on the streams' own threads
    several = len(job.sources) > 1

    def on_batch(batch: StreamBatch) -> None:  # runs while no other batch of this process applies
        maintained = _maintain_if_due(job, [batch.summary], spark=spark, progress=progress)
        if report:
            report(JobResult(job.name, [batch.summary], maintained))

    handles: list[ChangeStream] = []
    try:
        for i, src in enumerate(job.sources):
            say = _prefixed(progress, f"source {i}: ") if several else progress
            handles.append(stream(
                src.inputs[0], job.target, format=src.format, options=src.options,
                checkpoint=root / f"source-{i}", trigger=trigger or job.stream.trigger,
                max_files_per_trigger=job.stream.max_files_per_trigger, spark=spark, on_batch=on_batch,
                progress=say, **_settings(job),
            ))
        running = list(handles)
        while running:  # the first failure, from whichever source, ends the job
            running = [h for h in running if not h.await_termination(1.0)]
    finally:
        for h in handles:
            h.stop()
    return JobResult(job.name, [h.total for h in handles], [])


def _state_path(job: Job) -> Path:
    path = Path(job.target) / "_lakecdc" / "jobs" / f"{job.name}.maintenance.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _maintenance_due(job: Job, summaries: list[Any]) -> bool:
    """Count runs that changed something; due after ``every_runs`` or past ``max_files``."""
    policy = job.maintenance
    assert policy is not None
    state = _state_path(job)
    runs_since = json.loads(state.read_text()).get("runs_since", 0) if state.exists() else 0
    runs_since += sum(len(s.runs) for s in summaries)
    state.write_text(json.dumps({"runs_since": runs_since}))
    if policy.every_runs and runs_since >= policy.every_runs:
        return True
    if policy.max_files:
        engine = DeltaRsEngine()
        for table in known_tables(job.target):
            path = table_path(job.target, table)
            if engine.exists(path) and engine.files(path)[0] > policy.max_files:
                return True
    return False


def watch(job: Job, *, interval: float, max_runs: int | None = None, spark: Any = None,
          progress: Callable[[str], None] | None = None, report: Callable[[JobResult], None] | None = None) -> int:
    """Run ``job`` every ``interval`` seconds (``max_runs`` times, or until interrupted).

    A run that fails (a bad file, a table error) is reported and the next one tries again.
    Returns how many runs failed.
    """
    failures = done = 0
    while max_runs is None or done < max_runs:
        started = time.monotonic()
        try:
            result = run_job(job, spark=spark, progress=progress)
            failures += 0 if result.ok else 1
            if report:
                report(result)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - a long-running job reports and goes on
            failures += 1
            if progress:
                progress(f"run failed: {exc}; trying again in {interval:.0f}s")
        done += 1
        if max_runs is not None and done >= max_runs:
            break
        time.sleep(max(0.0, interval - (time.monotonic() - started)))
    return failures
