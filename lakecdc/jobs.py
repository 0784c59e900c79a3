"""Declarative merge jobs: one YAML file per pipeline, run once or kept running.

    lakecdc run jobs/sample.yaml             # apply what is new, maintain when due, print a summary
    lakecdc run jobs/sample.yaml --watch     # the same every --interval (default 60s) until stopped

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
    pk_update: delete-insert           # or update / abend
    tombstone_retention: 7d            # how long a deleted key blocks late events
    apply_as_truncates: true
    complete_transactions: false       # Debezium: whole transactions only
    min_file_age: 30s                  # files changed more recently wait for the next run
    contracts: data_contracts          # ODCS contracts: keys and column types
    maintenance:                       # optional: lakecdc maintain, automatically
      every_runs: 12                   # after this many runs that changed something ...
      max_files: 200                   # ... or as soon as a table has more files than this
      zorder: keys                     # or a list of columns, or leave out for compaction
      target_file_size: 128MB
      vacuum_retention: 7d

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

from lakecdc.errors import ConfigError

_TOP = {"name", "target", "sources", "tables", "pk_update", "tombstone_retention", "apply_as_truncates",
        "complete_transactions", "maintenance", "engine", "contracts", "min_file_age"}
_SOURCE = {"input", "format", "options", "gg_properties", "gg_handler"}
_TABLES = {"include", "exclude", "keys", "column_list", "except_column_list"}
_MAINTENANCE = {"every_runs", "max_files", "zorder", "target_file_size", "vacuum_retention", "tombstone_retention"}


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


class _Where:
    """Line numbers of a YAML document's mapping keys and values, for error messages."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.lines: dict[tuple[str, ...], int] = {}
        try:
            node = yaml.compose(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}" if mark else path
            raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
        if node is not None:
            self._walk(node, ())

    def _walk(self, node: yaml.Node, at: tuple[str, ...]) -> None:
        self.lines.setdefault(at, node.start_mark.line + 1)  # a key's own line, not its value's
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                self.lines[(*at, str(k.value))] = k.start_mark.line + 1
                self._walk(v, (*at, str(k.value)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                self._walk(v, (*at, str(i)))

    def error(self, at: tuple[str, ...], message: str) -> ConfigError:
        probe = at
        while probe and probe not in self.lines:
            probe = probe[:-1]
        line = self.lines.get(probe)
        key = ".".join(at) or "(top)"
        return ConfigError(f"{self.path}:{line or '?'}: {key}: {message}")


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; a :class:`ConfigError` names the file, line and key."""
    from lakecdc.cli import parse_duration, parse_size
    from lakecdc.decoders import DECODERS

    text = Path(path).read_text()
    where = _Where(str(path), text)
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

    check_keys(data, _TOP, ())
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
            from lakecdc.ggprops import read_gg_properties

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
        min_file_age=duration(data.get("min_file_age", "0"), ("min_file_age",)),
    )


@dataclass
class JobResult:
    """One run of a job: the apply summary per source and the maintenance done, if any."""

    job: str
    summaries: list[Any]
    maintained: list[Any]

    @property
    def ok(self) -> bool:
        return all(s.ok for s in self.summaries)

    def render(self) -> str:
        parts = [f"job {self.job}"]
        parts += [s.render() for s in self.summaries]
        if self.maintained:
            parts.append("maintenance:")
            parts += [f"  {r.line()}" for r in self.maintained]
        return "\n".join(parts)


def run_job(job: Job, *, spark: Any = None, progress: Callable[[str], None] | None = None) -> JobResult:
    """Apply every source of ``job`` once (only new files), then maintain the tables when due."""
    import lakecdc

    summaries = []
    for src in job.sources:
        inputs = [p for p in src.inputs if any(c in p for c in "*?[") or Path(p).exists()]
        missing = [p for p in src.inputs if p not in inputs]
        if missing:
            raise ConfigError(f"{job.path}: input {missing[0]!r} does not exist")
        summaries.append(lakecdc.apply(
            inputs, job.target, format=src.format, options=src.options, keys=job.keys, pk_update=job.pk_update,  # type: ignore[arg-type]
            spark=spark, engine=job.engine, tombstone_retention=job.tombstone_retention,
            column_list=job.column_list, except_column_list=job.except_column_list,
            apply_as_truncates=job.apply_as_truncates, complete_transactions=job.complete_transactions,
            include_tables=job.include, exclude_tables=job.exclude, contracts=job.contracts,
            min_file_age=job.min_file_age.total_seconds(), progress=progress,
        ))
    maintained = []
    if job.maintenance is not None and _maintenance_due(job, summaries):
        maintained = lakecdc.maintain(
            job.target, zorder=job.maintenance.zorder, target_file_size=job.maintenance.target_file_size,
            vacuum_retention=job.maintenance.vacuum_retention, tombstone_retention=job.tombstone_retention,
            engine="delta-rs" if job.engine == "auto" else job.engine, spark=spark, progress=progress,
        )
        _state_path(job).write_text(json.dumps({"runs_since": 0}))
    return JobResult(job.name, summaries, maintained)


def _state_path(job: Job) -> Path:
    path = Path(job.target) / "_lakecdc" / "jobs" / f"{job.name}.maintenance.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _maintenance_due(job: Job, summaries: list[Any]) -> bool:
    """Count runs that changed something; due after ``every_runs`` or past ``max_files``."""
    from lakecdc.merge.delta_rs import DeltaRsEngine
    from lakecdc.state import known_tables, table_path

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
