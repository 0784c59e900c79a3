"""Running a :class:`~lakecdc.jobs.file.Job`: once (:func:`run_job`), every interval
(:func:`watch`) or as Structured Streaming queries (:func:`stream_job`), with the job's checks and
maintenance when due."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakecdc.check.contracts import load_contracts
from lakecdc.check.quality import check_tables
from lakecdc.errors import ConfigError
from lakecdc.jobs.file import Job
from lakecdc.lake.state import known_tables, table_path
from lakecdc.maintenance.maintain import maintain
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.run.apply import apply
from lakecdc.spark.session import get_spark
from lakecdc.streaming import ChangeStream, StreamBatch, stream


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
        summaries.append(apply(inputs, job.target, settings=job.settings_for(src), spark=spark, progress=progress))
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


def _maintain_if_due(job: Job, summaries: list[Any], *, spark: Any, progress: Callable[[str], None] | None) -> list[Any]:
    if job.maintenance is None or not _maintenance_due(job, summaries):
        return []
    maintained = maintain(
        job.target, zorder=job.maintenance.zorder, target_file_size=job.maintenance.target_file_size,
        vacuum_retention=job.maintenance.vacuum_retention,
        tombstone_retention=job.maintenance.tombstone_retention or job.settings.default_retention,
        engine="delta-rs" if job.settings.engine == "auto" else job.settings.engine, spark=spark, progress=progress,
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
    if job.settings.min_file_age:
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
                src.inputs[0], job.target, settings=job.settings_for(src), checkpoint=root / f"source-{i}",
                trigger=trigger or job.stream.trigger, max_files_per_trigger=job.stream.max_files_per_trigger,
                spark=spark, on_batch=on_batch, progress=say,
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
    """Count the runs that applied something (kept under the target, across processes); due once
    the count reaches ``every_runs``, or when a table has more data files than ``max_files``."""
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
