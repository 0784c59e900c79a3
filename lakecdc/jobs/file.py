"""Job files: one YAML file per pipeline, read and checked into a :class:`Job`.

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

Relative paths are read from the directory the command runs in. ``${NAME}`` anywhere in the file
is the environment variable ``NAME`` (``target: ${LAKE_ROOT}/lake``: one file for dev and prod).
A mistake in the file (an unknown key, a wrong type or value, a missing ``target``) is reported
with its line and key before anything runs; the settings' values are those of
:class:`lakecdc.Settings`, read by :func:`lakecdc.config.sources.from_job`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakecdc.config import values as V
from lakecdc.config.durations import parse_size, parse_trigger
from lakecdc.config.settings import DEFAULT_VACUUM_RETENTION, EVERY_TABLE, Settings
from lakecdc.config.sources import from_job, read_yaml
from lakecdc.config.where import Where
from lakecdc.decode import DECODERS
from lakecdc.decode.goldengate.properties import read_gg_properties
from lakecdc.errors import ConfigError

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
    """One ``sources:`` entry: its inputs (paths or globs), format and the format's options."""

    inputs: tuple[str, ...]
    format: str
    options: dict[str, str]


@dataclass(frozen=True)
class Maintenance:
    """When ``lakecdc maintain`` runs after a job's runs, and how."""

    every_runs: int | None = None
    max_files: int | None = None
    zorder: str | list[str] | None = None
    target_file_size: int | None = None
    vacuum_retention: dt.timedelta | None = DEFAULT_VACUUM_RETENTION


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
    #: the settings every source is applied with (each source's format and options over them)
    settings: Settings = field(default_factory=Settings)
    maintenance: Maintenance | None = None
    stream: Streaming = field(default_factory=Streaming)
    #: run the contracts' data-quality checks on the tables a run changed (lakecdc.check.quality)
    checks: bool = False

    @property
    def include(self) -> tuple[str, ...]:
        return self.settings.include_tables

    @property
    def exclude(self) -> tuple[str, ...]:
        return self.settings.exclude_tables

    @property
    def contracts(self) -> Any:
        return self.settings.contracts

    @property
    def table_paths(self) -> Mapping[str, str]:
        """``tables.paths``: where source tables' Delta tables live."""
        return self.settings.table_paths

    @property
    def pk_update_by_table(self) -> dict[str, str]:
        """``tables.pk_update``: the tables' own ``pk_update`` (the job's own is ``"*"``'s)."""
        return {t: m for t, m in self.settings.pk_update.items() if t != EVERY_TABLE}

    @property
    def retention_by_table(self) -> dict[str, dt.timedelta]:
        """``tables.tombstone_retention``: the tables' own retention."""
        return {t: r for t, r in self.settings.tombstone_retention.items() if t != EVERY_TABLE}

    def settings_for(self, source: Source) -> Settings:
        """The settings ``source`` is applied with."""
        return self.settings.with_(format=source.format, options=source.options)


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; a :class:`ConfigError` names the file, line and key."""
    data, where = read_yaml(path, "a mapping (target:, sources:, ...)")
    _check_keys(where, data, _TOP, ())
    if data.get("tables") is not None:
        _check_keys(where, data["tables"], _TABLES, ("tables",))
    checks = data.get("checks", False)
    if not isinstance(checks, bool):
        raise where.error(("checks",), "expected true or false")
    if checks and not data.get("contracts"):
        raise where.error(("checks",), "checks come from data contracts: set contracts: too")
    if not data.get("target"):
        raise where.error(("target",), "missing: the root directory of the Delta tables")
    sources = _sources(data.get("sources"), where)
    try:
        settings = Settings.build(**from_job(data, where))
    except ConfigError as exc:
        if str(exc).startswith(f"{path}:"):
            raise
        raise ConfigError(f"{path}: {exc}") from None
    return Job(
        name=str(data.get("name") or Path(path).stem), path=str(path), target=str(data["target"]),
        sources=sources, settings=settings, maintenance=_maintenance(data.get("maintenance"), where),
        stream=_streaming(data.get("stream"), where), checks=checks,
    )


def _check_keys(where: Where, obj: Any, allowed: set[str], at: tuple[str, ...]) -> dict:
    if not isinstance(obj, dict):
        raise where.error(at, f"expected a mapping, found {type(obj).__name__}")
    unknown = sorted(set(map(str, obj)) - allowed)
    if unknown:
        raise where.error((*at, unknown[0]), f"unknown key; expected one of {', '.join(sorted(allowed))}")
    return obj


def _sources(raw: Any, where: Where) -> tuple[Source, ...]:
    if not isinstance(raw, list) or not raw:
        raise where.error(("sources",), "expected a list of sources, each with input: and format:")
    sources = []
    for i, src in enumerate(raw):
        at = ("sources", str(i))
        _check_keys(where, src, _SOURCE, at)
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
    return tuple(sources)


def _maintenance(raw: Any, where: Where) -> Maintenance | None:
    if raw is None:
        return None
    m = _check_keys(where, raw, _MAINTENANCE, ("maintenance",))

    def number(key: str) -> int | None:
        try:
            return V.count(m[key], key, "runs" if key == "every_runs" else "files") if m.get(key) else None
        except V.BadValue as exc:
            raise where.error(("maintenance", key), exc.detail) from None

    try:
        size = parse_size(str(m["target_file_size"])) if m.get("target_file_size") else None
    except ConfigError as exc:
        raise where.error(("maintenance", "target_file_size"), str(exc)) from None
    vacuum = m.get("vacuum_retention", "7d")
    try:
        retention = None if str(vacuum).lower() == "none" else V.duration(vacuum, "vacuum_retention")
    except V.BadValue as exc:
        raise where.error(("maintenance", "vacuum_retention"), exc.detail) from None
    return Maintenance(every_runs=number("every_runs"), max_files=number("max_files"), zorder=m.get("zorder"),
                       target_file_size=size, vacuum_retention=retention)


def _streaming(raw: Any, where: Where) -> Streaming:
    if raw is None:
        return Streaming()
    st = _check_keys(where, raw, _STREAM, ("stream",))
    trigger = str(st.get("trigger", "available-now"))
    try:
        parse_trigger(trigger)
    except ConfigError as exc:
        raise where.error(("stream", "trigger"), str(exc)) from None
    most = st.get("max_files_per_trigger")
    if most is not None and (not isinstance(most, int) or isinstance(most, bool) or most < 1):
        raise where.error(("stream", "max_files_per_trigger"), f"{most!r}: expected a number of files, 1 or more")
    return Streaming(trigger=trigger, max_files_per_trigger=most,
                     checkpoint=str(st["checkpoint"]) if st.get("checkpoint") else None)
