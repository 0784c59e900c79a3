"""Job files: one YAML file per pipeline, read and checked into a :class:`Job`.

    lakecdc run jobs/sample.yaml             # apply what is new, maintain when due, print a summary
    lakecdc run jobs/sample.yaml --watch     # the same every --interval (default 60s) until stopped
    lakecdc run jobs/sample.yaml --stream    # each source as a Structured Streaming query (lakecdc.streaming)

A job file (relative paths are relative to the job file's own directory)::

    name: sample                       # a label for the summary (default: the file name)
    target: ${LAKE:-../lake}           # root of the Delta tables ($LAKE when set, else ../lake)
    sources:                           # one or more; each applied in turn into the same target
      - input: sample/landing          # a path or glob, or a list of them
        format: ogg-json               # required (or gg_properties:): see lakecdc formats
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
    pk_update: delete-insert           # (the default) or update / abend
    sequence_by: [op_ts, pos]          # order changes by these fields (lakecdc.changes.sequence); default:
                                       # the format's order
    parallel_tables: 2                 # tables prepared and merged at once (default: lakecdc.apply's)
    tombstone_retention: 7d            # how long a deleted key blocks late events
    apply_as_truncates: true
    complete_transactions: false       # Debezium: whole transactions only
    min_file_age: 30s                  # files changed more recently wait for the next run
    contracts: ../data_contracts       # ODCS contracts: keys and column types
    checks: true                       # after each run, the contracts' data-quality checks on the tables it
                                       # changed; a failed 'fail' check blocks that table's next merge
    change_data_feed: false            # true, or a list of tables: Delta's Change Data Feed on
    maintenance:                       # optional: lakecdc maintain, automatically (see below)
      every_runs: 12                   # after this many runs that changed something ...
      max_files: 200                   # ... or as soon as a table has more files than this
      zorder: keys                     # or a list of columns, or leave out for compaction
      target_file_size: 128MB
      vacuum_retention: 7d             # or none: no vacuum
      tombstone_retention: 7d          # tombstones older than this are dropped (default: the job's)
    stream:                            # optional: settings of lakecdc run --stream
      trigger: available-now           # or once, or an interval such as "30 seconds" (runs until stopped)
      max_files_per_trigger: 500       # default: every new file in one batch
      checkpoint: ../lake/_lakecdc/jobs/sample.stream   # the default: <target>/_lakecdc/jobs/<name>.stream;
                                                        # source N uses <checkpoint>/source-N

**Paths.** ``target``, ``input``, ``contracts``, ``gg_properties``, ``stream.checkpoint`` and the
formats' file options (``schemaDirectory``, ``schemaFile``, ``metadataDirectory``) are read relative
to the directory of the job file, whatever directory the command runs in; absolute paths and URIs
(``s3://...``) are kept as they are. ``tables.paths`` are relative to the target.

**Environment.** ``${NAME}`` anywhere in the file (outside comments) is the environment variable
``NAME``, ``${NAME:-default}`` the same with a default for when it is unset or empty: one file for
dev and prod (``target: ${LAKE_ROOT:-../lake}``). An unset variable without a default is an error
naming the file, the line and the variable.

**Maintenance due.** ``lakecdc run`` counts, in ``<target>/_lakecdc/jobs/<name>.maintenance.json``,
the runs that applied something since the last maintenance (a run that found nothing new does not
count; ``--watch`` and ``--stream`` batches count alike). After a run, maintenance is due when that
count reaches ``every_runs``, or when some table of the target has more data files than
``max_files`` (whichever comes first; with neither set it is never due). A due maintenance runs
:func:`lakecdc.maintain` on every table of the target (compaction or ``zorder``, vacuum with
``vacuum_retention``, expired tombstones dropped, a checkpoint) and sets the count back to 0.

**Checks.** Every key is validated before anything runs (a pydantic model of the file): an
unknown key (with the closest known one: ``did you mean 'pk_update'?``), a value of the wrong type
or one a setting does not accept is reported as ``file:line: key: what was wrong``, every mistake
of the file at once. The settings' values are those of :class:`lakecdc.Settings`, read by
:func:`lakecdc.config.sources.from_job`. With ``--stream`` every source must be one directory (a
landing directory; no globs) and ``min_file_age`` must be 0: a stream takes each file once, when
it lands (see lakecdc.streaming).
"""

from __future__ import annotations

import datetime as dt
import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from lakecdc.config import values as V
from lakecdc.config.durations import parse_size, parse_trigger
from lakecdc.config.settings import DEFAULT_TRIGGER, DEFAULT_VACUUM_RETENTION, EVERY_TABLE, PARSERS, Settings
from lakecdc.config.sources import from_job, read_yaml
from lakecdc.config.values import BadValue
from lakecdc.config.where import Where
from lakecdc.decode import DECODERS
from lakecdc.decode.goldengate.properties import read_gg_properties
from lakecdc.errors import ConfigError

#: Format options whose values are paths (a comma-separated list for ``schemaFile``): read
#: relative to the job file like the job's own paths.
PATH_OPTIONS = frozenset({"schemaDirectory", "schemaFile", "metadataDirectory"})


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
    #: tombstones older than this are dropped (None: the job's ``tombstone_retention``)
    tombstone_retention: dt.timedelta | None = None


@dataclass(frozen=True)
class Streaming:
    """How ``lakecdc run --stream`` runs the job's sources."""

    trigger: str = DEFAULT_TRIGGER
    max_files_per_trigger: int | None = None
    #: root of the sources' checkpoints (default ``<target>/_lakecdc/jobs/<name>.stream``)
    checkpoint: str | None = None


@dataclass(frozen=True)
class Job:
    """A parsed, validated job file (its paths made absolute from the job file's directory)."""

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


# -- the file's model: every key, its type and its check ------------------------------------------


def _mistake(message: str, table: str | None = None) -> PydanticCustomError:
    """A value the job file must not hold; ``table``: the entry of a per-table mapping it is in."""
    return PydanticCustomError("lakecdc", "{message}", {"message": message, "table": table})


def _checked(check: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``check`` as a validator: a ConfigError it raises becomes the key's mistake."""

    def validate(value: Any) -> Any:
        if value is None:
            return value
        try:
            check(value)
        except BadValue as exc:
            raise _mistake(exc.detail, exc.table if isinstance(value, Mapping) else None) from None
        except ConfigError as exc:
            raise _mistake(str(exc)) from None
        return value

    return validate


def _setting(name: str) -> Any:
    """A key holding setting ``name``'s value (as a keyword of :func:`lakecdc.apply` takes it)."""
    return Annotated[Any, AfterValidator(_checked(lambda v: PARSERS[name](v, name)))]


def _by_table(name: str, what: str = "VALUE") -> Any:
    """A ``tables:`` key holding ``{TABLE: value}`` of setting ``name``."""

    def check(value: Any) -> None:
        if not isinstance(value, Mapping):
            raise _mistake(f"expected {{TABLE: {what}}}")
        if what == "[COLUMN, ...]" and not all(isinstance(v, list) and v for v in value.values()):
            raise _mistake("expected {TABLE: [COLUMN, ...]}")
        PARSERS[name](value, name)

    return Annotated[Any, AfterValidator(_checked(check))]


def _format(value: str) -> str:
    if value not in DECODERS:
        raise _mistake(f"{value!r} is not a format; use one of {', '.join(sorted(DECODERS))}")
    return value


def _inputs(value: Any) -> Any:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not items or not all(isinstance(x, str) and x for x in items):
        raise _mistake("expected a path or glob, or a list of them")
    return value


def _scalars(value: Any) -> Any:
    for name, v in value.items():
        if isinstance(v, (dict, list)) or v is None:
            raise _mistake(f"{name}: expected a text, number or true/false value")
    return value


class _Model(BaseModel):
    """Every model of the file: unknown keys refused, YAML's types taken as they are."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _SourceModel(_Model):
    input: Annotated[Any, AfterValidator(_inputs)] = Field(...)
    format: Annotated[str, AfterValidator(_format)] | None = None
    options: Annotated[dict[str, Any], AfterValidator(_scalars)] = {}
    gg_properties: str | None = None
    gg_handler: str | None = None

    @model_validator(mode="after")
    def _a_format(self) -> _SourceModel:
        if self.format is None and self.gg_properties is None:
            raise _mistake(f"give format: (one of {', '.join(sorted(DECODERS))}) or gg_properties:")
        return self


class _TablesModel(_Model):
    include: _setting("include_tables") = None  # type: ignore[valid-type]
    exclude: _setting("exclude_tables") = None  # type: ignore[valid-type]
    keys: _by_table("keys", "[COLUMN, ...]") = None  # type: ignore[valid-type]
    column_list: _by_table("column_list", "[COLUMN, ...]") = None  # type: ignore[valid-type]
    except_column_list: _by_table("except_column_list", "[COLUMN, ...]") = None  # type: ignore[valid-type]
    stored_as_scd_type: _setting("stored_as_scd_type") = None  # type: ignore[valid-type]
    track_history_column_list: _by_table("track_history_column_list", "[COLUMN, ...]") = None  # type: ignore[valid-type]
    track_history_except_column_list: _by_table(  # type: ignore[valid-type]
        "track_history_except_column_list", "[COLUMN, ...]") = None
    paths: _by_table("table_paths") = None  # type: ignore[valid-type]
    pk_update: _by_table("pk_update") = None  # type: ignore[valid-type]
    tombstone_retention: _by_table("tombstone_retention") = None  # type: ignore[valid-type]
    sequence_by: _by_table("sequence_by", "[FIELD, ...]") = None  # type: ignore[valid-type]


def _size(value: Any) -> Any:
    parse_size(str(value))
    return value


def _vacuum(value: Any) -> Any:
    if str(value).lower() != "none":
        V.duration(value, "vacuum_retention")
    return value


def _zorder(value: Any) -> Any:
    if not (isinstance(value, str) and value) and not (
            isinstance(value, list) and value and all(isinstance(c, str) and c for c in value)):
        raise _mistake("expected keys, or a list of columns")
    return value


def _trigger(value: str) -> str:
    parse_trigger(value)
    return value


class _MaintenanceModel(_Model):
    every_runs: Annotated[int, Field(ge=1)] | None = None
    max_files: Annotated[int, Field(ge=1)] | None = None
    zorder: Annotated[Any, AfterValidator(_zorder)] = None
    target_file_size: Annotated[Any, AfterValidator(_checked(_size))] = None
    vacuum_retention: Annotated[Any, AfterValidator(_checked(_vacuum))] = None
    tombstone_retention: Annotated[Any, AfterValidator(_checked(lambda v: V.duration(v, "tombstone_retention")))] = None


class _StreamModel(_Model):
    trigger: Annotated[str, AfterValidator(_checked(_trigger))] = DEFAULT_TRIGGER
    max_files_per_trigger: Annotated[int, Field(ge=1)] | None = None
    checkpoint: str | None = None


class _JobModel(_Model):
    name: str | None = None
    target: str = Field(...)
    sources: Annotated[list[_SourceModel], Field(min_length=1)]
    tables: _TablesModel | None = None
    pk_update: _setting("pk_update") = None  # type: ignore[valid-type]
    tombstone_retention: _setting("tombstone_retention") = None  # type: ignore[valid-type]
    sequence_by: _setting("sequence_by") = None  # type: ignore[valid-type]
    apply_as_truncates: bool = True
    complete_transactions: bool = False
    engine: _setting("engine") = None  # type: ignore[valid-type]
    contracts: str | None = None
    min_file_age: _setting("min_file_age") = None  # type: ignore[valid-type]
    change_data_feed: _setting("change_data_feed") = None  # type: ignore[valid-type]
    parallel_tables: _setting("parallel_tables") = None  # type: ignore[valid-type]
    checks: bool = False
    maintenance: _MaintenanceModel | None = None
    stream: _StreamModel | None = None

    @model_validator(mode="after")
    def _checks_need_contracts(self) -> _JobModel:
        if self.checks and not self.contracts:
            raise PydanticCustomError("lakecdc", "{message}", {
                "message": "checks come from data contracts: set contracts: too", "key": "checks"})
        return self


#: What a key of each kind holds, for a value of the wrong type (pydantic's error types).
_EXPECTED = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "bool_type": "true or false", "bool_parsing": "true or false", "string_type": "a text value",
    "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}

#: A key's meaning, for a missing or empty one.
_MISSING = {
    "target": "missing: the root directory of the Delta tables",
    "sources": "expected a list of sources, each with input: and format:",
    "input": "missing: a path or glob, or a list of them",
}


def _models_at(loc: tuple[str, ...]) -> type[BaseModel] | None:
    """The model whose keys ``loc`` (a key path of the file) is among."""
    model: Any = _JobModel
    for part in loc[:-1]:
        if part.isdigit():
            continue
        info = model.model_fields.get(part) if model is not None else None
        if info is None:
            return None
        model = next((a for a in _arguments(info.annotation) if isinstance(a, type) and issubclass(a, BaseModel)),
                     None)
    return model


def _arguments(annotation: Any) -> list[Any]:
    out = [annotation]
    for arg in getattr(annotation, "__args__", ()) or ():
        out += _arguments(arg)
    return out


def _message(error: Mapping[str, Any], loc: tuple[str, ...]) -> str:
    """What was wrong with one key, worded for a person."""
    kind, found = error["type"], error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "lakecdc":
        return str(ctx["message"])
    if kind == "extra_forbidden":
        known = sorted(_models_at(loc).model_fields) if _models_at(loc) is not None else []  # type: ignore[union-attr]
        close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"unknown key; {hint}expected one of {', '.join(known)}"
    if kind in ("missing", "too_short") and loc and loc[-1] in _MISSING:
        return _MISSING[loc[-1]]
    if kind == "missing":
        return "missing"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, found {found!r}"
    if kind in ("greater_than_equal", "greater_than"):
        limit = ctx.get("ge", ctx.get("gt"))
        return f"expected a number, {limit} or more, found {found!r}"
    return f"{error['msg']} (found {found!r})"


def _validated(data: Mapping[str, Any], where: Where) -> _JobModel:
    """``data`` as the file's model; every mistake of the file in one :class:`ConfigError`, each as
    ``file:line: key: what was wrong``, in the order of the file."""
    try:
        return _JobModel.model_validate(dict(data))
    except ValidationError as exc:
        mistakes = []
        for error in exc.errors():
            loc = tuple(str(p) for p in error["loc"])
            ctx = error.get("ctx") or {}
            if ctx.get("key"):
                loc = (*loc, str(ctx["key"]))
            if ctx.get("table"):
                loc = (*loc, str(ctx["table"]))
            mistakes.append(where.error(loc, _message(error, loc)))
        mistakes.sort(key=lambda m: _line(str(m), where.path))
        raise ConfigError("\n".join(dict.fromkeys(str(m) for m in mistakes))) from None


def _line(message: str, path: str) -> int:
    number = message[len(path) + 1:].split(":", 1)[0]
    return int(number) if number.isdigit() else 0


# -- reading a job -------------------------------------------------------------------------------


def _beside(base: Path, value: str) -> str:
    """``value`` (a path, glob or URI) relative to ``base`` when it is a relative path."""
    if "://" in value:
        return value
    path = Path(value).expanduser()
    return value if path.is_absolute() else os.path.normpath(base / path)


def load_job(path: str | Path) -> Job:
    """Read and validate a job file; a :class:`ConfigError` names the file, line and key of each
    mistake (see the module's docstring for what a job file holds)."""
    data, where = read_yaml(path, "a mapping (target:, sources:, ...)")
    model = _validated(data, where)
    base = Path(path).resolve().parent
    if model.contracts:
        data = {**data, "contracts": _beside(base, model.contracts)}
    sources = tuple(_source(s, base, where, ("sources", str(i))) for i, s in enumerate(model.sources))
    try:
        settings = Settings.build(**from_job(data, where))
    except ConfigError as exc:
        if str(exc).startswith(f"{path}:"):
            raise
        raise ConfigError(f"{path}: {exc}") from None
    stream = model.stream or _StreamModel()
    return Job(
        name=model.name or Path(path).stem, path=str(path), target=_beside(base, model.target),
        sources=sources, settings=settings, maintenance=_maintenance(model.maintenance), checks=model.checks,
        stream=Streaming(trigger=stream.trigger, max_files_per_trigger=stream.max_files_per_trigger,
                         checkpoint=_beside(base, stream.checkpoint) if stream.checkpoint else None),
    )


def _source(src: _SourceModel, base: Path, where: Where, at: tuple[str, ...]) -> Source:
    """One source, its paths read from ``base``; the format and options of its ``gg_properties``
    file under its own."""
    options = {str(k): _text(v) for k, v in src.options.items()}
    fmt = src.format
    if src.gg_properties:
        try:
            gg_format, gg_options = read_gg_properties(_beside(base, src.gg_properties), src.gg_handler)
        except (ConfigError, OSError) as exc:
            raise where.error((*at, "gg_properties"), str(exc)) from None
        fmt, options = fmt or gg_format, {**gg_options, **options}
    for name in PATH_OPTIONS & set(options):
        options[name] = ",".join(_beside(base, p.strip()) for p in options[name].split(",") if p.strip())
    inputs = [src.input] if isinstance(src.input, str) else src.input
    assert fmt is not None  # (the model requires format: or gg_properties:)
    return Source(tuple(_beside(base, p) for p in inputs), fmt, options)


def _text(value: Any) -> str:
    """An option's value as text (YAML's ``true`` as ``true``, as a properties file has it)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _maintenance(m: _MaintenanceModel | None) -> Maintenance | None:
    if m is None:
        return None
    vacuum = m.vacuum_retention
    retention = (DEFAULT_VACUUM_RETENTION if vacuum is None
                 else None if str(vacuum).lower() == "none" else V.duration(vacuum, "vacuum_retention"))
    return Maintenance(
        every_runs=m.every_runs, max_files=m.max_files, zorder=m.zorder,
        target_file_size=parse_size(str(m.target_file_size)) if m.target_file_size else None,
        vacuum_retention=retention,
        tombstone_retention=(V.duration(m.tombstone_retention, "tombstone_retention")
                             if m.tombstone_retention is not None else None),
    )
