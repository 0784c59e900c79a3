"""``apply``: decode new inputs, consolidate per table, MERGE each table exactly once.

The path of one run, top to bottom:

1. **plan**: list the inputs, leave out those an earlier run applied, write the run manifest
   (:mod:`lakecdc.ledger`);
2. **decode** the files with the format's decoder into canonical events (cached once);
3. **profile** the events per table in one aggregation: counts, seq range, truncates, the
   columns seen and the keys the messages carry;
4. per table, **prepare**: the table's columns and types (target schema, then inference for new
   columns), typed wide events, records that do not fit go to the quarantine, events not newer
   than the table (rule 6) are dropped and counted; an ``abend`` primary-key update stops the run
   here, before anything was committed;
5. per table, **consolidate** to one net action per key and **merge** with the run's transaction
   version, then record tombstones;
6. write the quarantine, mark the manifest committed, return the summary.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import random
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes import PK_UPDATE_MODES, PkUpdate
from lakecdc.columns import infer_types, sql_string
from lakecdc.consolidate import Layout, drop_stale, fold, fold_with_key_moves, widen
from lakecdc.contracts import Contract, load_contracts
from lakecdc.decoders import get_decoder
from lakecdc.decoders._records import EXACT_STRINGS
from lakecdc.errors import CommitConflict, ConfigError, LakecdcError, MissingKeyError, PrimaryKeyUpdateError
from lakecdc.history import (
    CHANGE_DATA_FEED,
    HistoryPrepared,
    commit_history,
    enable_change_data_feed,
    history_settings,
    history_shape,
    is_history,
    match_table,
    prepare_history,
)
from lakecdc.ledger import Ledger, Manifest, list_inputs
from lakecdc.merge.plan import CDC_COLUMNS, MergePlan
from lakecdc.merge.source import BatchSource
from lakecdc.quarantine import BAD_COLUMNS, Quarantined, collect_bad, write_quarantine
from lakecdc.runs import record_run
from lakecdc.session import get_spark, job_conf
from lakecdc.state import (
    DEFAULT_TOMBSTONE_RETENTION,
    expire_tombstones,
    known_tables,
    quarantine_path,
    read_rows,
    read_stored,
    record_table_paths,
    stored_max_seq,
    table_path,
    tombstone_path,
    tombstone_rows,
    truncate_watermark,
    write_table_info,
)
from lakecdc.summary import RunSummary, TableSummary
from lakecdc.transactions import HELD, held_files, record_applied, split_open_transactions, write_held

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.decoders.base import Decoder
    from lakecdc.merge.delta_rs import DeltaRsEngine

Progress = Callable[[str], None]


@dataclass(frozen=True)
class ApplySettings:
    """Everything that shapes a run besides its inputs."""

    format: str
    keys: Mapping[str, tuple[str, ...]]
    pk_update: PkUpdate
    tombstone_retention: dt.timedelta
    treat_all_as_strings: bool
    #: per table, the only columns to keep (DLT's ``column_list``; keys are always kept)
    column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: per table, columns to leave out (DLT's ``except_column_list``)
    except_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: False: truncates are read but not applied (DLT's ``apply_as_truncates``)
    apply_as_truncates: bool = True
    #: apply a source transaction only once all its events are there (see lakecdc.transactions)
    complete_transactions: bool = False
    #: source-table name patterns (fnmatch) to apply / to leave out; the others' events are skipped
    include_tables: tuple[str, ...] = ()
    exclude_tables: tuple[str, ...] = ()
    #: data contracts by source table: declared keys and column types (lakecdc.contracts)
    contracts: Mapping[str, Contract] = field(default_factory=dict)
    #: per source table, a ``pk_update`` / tombstone retention other than the run's
    pk_update_by_table: Mapping[str, PkUpdate] = field(default_factory=dict)
    retention_by_table: Mapping[str, dt.timedelta] = field(default_factory=dict)

    #: per table (exact names or fnmatch patterns, ``"*"``: every table): 2 for an SCD type 2
    #: history table instead of the current state (DLT's ``stored_as_scd_type``; lakecdc.history)
    stored_as_scd_type: Mapping[str, int] = field(default_factory=dict)
    #: per table (names or patterns): the only columns whose changes open a new version / columns
    #: whose changes never do (DLT's ``track_history_column_list`` / ``..._except_column_list``)
    track_history_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    track_history_except_column_list: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: table names or patterns whose Delta tables have Change Data Feed enabled
    change_data_feed: tuple[str, ...] = ()

    def scd_type(self, table: str) -> int:
        """1 for a current-state table, 2 for a history table."""
        return int(match_table(self.stored_as_scd_type, table) or 1)

    def wants_change_data_feed(self, table: str) -> bool:
        return any(fnmatch.fnmatchcase(table, p) for p in self.change_data_feed)

    def pk_update_for(self, table: str) -> PkUpdate:
        """The table's own setting, else its contract's, else the run's."""
        declared = self.contracts[table].pk_update if table in self.contracts else None
        return self.pk_update_by_table.get(table) or declared or self.pk_update  # type: ignore[return-value]

    def retention_for(self, table: str) -> dt.timedelta:
        declared = self.contracts[table].tombstone_retention if table in self.contracts else None
        found = self.retention_by_table.get(table, declared)
        return found if found is not None else self.tombstone_retention

    def route_sql(self) -> str | None:
        """SQL over ``table``: true for a table that is applied; None when every table is."""
        if not self.include_tables and not self.exclude_tables:
            return None

        def any_of(patterns: tuple[str, ...]) -> str:
            return " OR ".join(f"table RLIKE {sql_string('^' + fnmatch.translate(p))}" for p in patterns)

        inc = f"({any_of(self.include_tables)})" if self.include_tables else "true"
        exc = f"NOT ({any_of(self.exclude_tables)})" if self.exclude_tables else "true"
        return f"({inc} AND {exc})"

    def ignores(self, table: str, column: str, keys: Sequence[str]) -> bool:
        """True when ``column`` of ``table`` is left out of the target by a column list."""
        low = column.lower()
        if low in {k.lower() for k in keys}:
            return False
        only = self.column_list.get(table)
        if only is not None and low not in {c.lower() for c in only}:
            return True
        return low in {c.lower() for c in self.except_column_list.get(table, ())}


def _per_table(value: Any, what: str) -> tuple[Any, dict[str, Any]]:
    """A run-wide setting given once, or per source table with an optional ``"*"`` default."""
    if not isinstance(value, Mapping):
        return value, {}
    by_table = {str(k): v for k, v in value.items() if k != "*"}
    default = value.get("*", DEFAULT_TOMBSTONE_RETENTION if what == "tombstone_retention" else "delete-insert")
    return default, by_table


def _normalise_keys(keys: Mapping[str, Sequence[str] | str] | None) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for table, cols in (keys or {}).items():
        items = [c.strip() for c in (cols.split(",") if isinstance(cols, str) else cols)]
        if not items or not all(items):
            raise ConfigError(f"keys for table {table!r} are empty")
        out[table] = tuple(items)
    return out


def _make_engine(engine: str | DeltaRsEngine | None, spark: SparkSession, storage_options: Mapping[str, str] | None) -> DeltaRsEngine:
    from lakecdc._compat import delta_spark_available
    from lakecdc.merge.delta_rs import DeltaRsEngine

    if engine is None or engine == "auto":
        engine = "delta-spark" if delta_spark_available(spark) else "delta-rs"
    if engine == "delta-rs":
        return DeltaRsEngine(storage_options)
    if engine == "delta-spark":
        from lakecdc.merge.delta_spark import DeltaSparkEngine

        return DeltaSparkEngine(spark)  # type: ignore[return-value]
    if isinstance(engine, str):
        raise ConfigError(f"unknown engine {engine!r}; use 'auto', 'delta-rs' or 'delta-spark'")
    return engine


def apply(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    target: str | os.PathLike[str],
    *,
    format: str = "ogg-json",
    keys: Mapping[str, Sequence[str] | str] | None = None,
    pk_update: PkUpdate | Mapping[str, PkUpdate] = "delete-insert",
    options: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    engine: str | DeltaRsEngine | None = None,
    tombstone_retention: dt.timedelta | Mapping[str, dt.timedelta] = DEFAULT_TOMBSTONE_RETENTION,
    table_paths: Mapping[str, str] | None = None,
    column_list: Mapping[str, Sequence[str] | str] | None = None,
    except_column_list: Mapping[str, Sequence[str] | str] | None = None,
    apply_as_truncates: bool = True,
    complete_transactions: bool = False,
    include_tables: Sequence[str] = (),
    exclude_tables: Sequence[str] = (),
    contracts: str | os.PathLike[str] | Mapping[str, Contract] | None = None,
    stored_as_scd_type: Mapping[str, int] | int = 1,
    track_history_column_list: Mapping[str, Sequence[str] | str] | Sequence[str] | None = None,
    track_history_except_column_list: Mapping[str, Sequence[str] | str] | Sequence[str] | None = None,
    change_data_feed: bool | Sequence[str] = False,
    storage_options: Mapping[str, str] | None = None,
    min_file_age: float = 0.0,
    progress: Progress | None = None,
) -> RunSummary:
    """Apply the change files under ``inputs`` to one Delta table per source table under ``target``.

    Only files no earlier run applied to ``target`` are read; a run interrupted by a crash is
    finished first, on exactly its files. Running again with nothing new changes nothing.

    Args:
        inputs: files or directories (read recursively, in a stable order).
        target: root directory; each source table becomes ``<target>/<table>``.
        format: a registered format name (see :data:`lakecdc.decoders.DECODERS`).
        keys: primary-key columns per source table, for messages that carry none
            (DLT's ``keys``); ``{"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_ID"]}``.
        pk_update: ``delete-insert`` (default), ``update`` or ``abend`` (see ``semantics.md``);
            or per source table, ``{"S.ORDERS": "update"}`` (a ``"*"`` entry for the others).
        options: format options (GoldenGate property names for GoldenGate formats).
        spark: the session to use; default: the active one, else an embedded local one.
        engine: ``auto`` (delta-spark when its JVM classes are present, else delta-rs),
            ``delta-rs`` or ``delta-spark``.
        tombstone_retention: how long a deleted key keeps blocking late events; or per source
            table (a ``"*"`` entry for the others).
        table_paths: where a source table's Delta table lives instead of ``<target>/<table>``: a
            path relative to ``target``, an absolute path or a URI (``{"S.ORDERS": "orders"}``).
            Recorded with the target, so later runs need not repeat it; a table that exists
            cannot be moved this way (move it, then edit ``_lakecdc/routes.json``).
        column_list: per table, the only columns written to the target (DLT's ``column_list``);
            key columns are always written. ``{"S.ORDERS": ["ID", "STATUS"]}``.
        except_column_list: per table, columns never written (DLT's ``except_column_list``).
        apply_as_truncates: False to read truncates without applying them (DLT's
            ``apply_as_truncates``): they are left out of the run like records of no interest.
        complete_transactions: apply a source transaction only when all its events have been
            read (formats with transaction metadata: Debezium's BEGIN/END markers); the events
            of a transaction still open are held for the next run (see :mod:`lakecdc.transactions`).
        include_tables / exclude_tables: source-table name patterns (``QASOURCE.*``, fnmatch,
            case-sensitive): only tables matching an include pattern (all, when none is given) and
            no exclude pattern are applied; the others' events are counted as skipped.
        contracts: ODCS data contracts (a file, a directory of them, or loaded ones by source
            table): their keys for messages without keys, their column types over inference.
        stored_as_scd_type: 2 for SCD type 2 history tables (every version, with ``__START_AT`` /
            ``__END_AT``; see :mod:`lakecdc.history`) instead of current-state tables (1, the
            default); for all tables, or per table: ``{"S.ORDERS": 2}`` (fnmatch patterns work).
        track_history_column_list / track_history_except_column_list: for history tables, the
            only columns whose changes open a new version / columns whose changes never do (a
            change of other columns updates the current version in place); per table, or a list
            for every history table.
        change_data_feed: enable Delta's Change Data Feed (``delta.enableChangeDataFeed``) on
            every table (True) or on these tables (names or patterns).
        min_file_age: seconds; files changed more recently are left for a later run (a writer
            may still be at work on them). Whatever the setting, a file of a line-oriented format
            that grows after it was applied has its new complete lines applied by a later run (a
            line caught half-written is quarantined, then read again whole); other formats'
            files must not change once read (an :class:`InputChangedError` says which did).
        progress: called with a short message at each step (the CLI shows them).

    Returns:
        A :class:`~lakecdc.summary.RunSummary`; ``summary.ok`` is False when a table failed
        (its error is in the summary; the other tables were applied).

    Raises:
        PrimaryKeyUpdateError: a key change met ``pk_update="abend"``; nothing was committed.

    Example:
        >>> import lakecdc
        >>> s = lakecdc.apply("landing/", "lake/", format="ogg-json")        # doctest: +SKIP
        >>> print(s.render())                                                # doctest: +SKIP
    """
    pk_default, pk_by_table = _per_table(pk_update, "pk_update")
    retention_default, retention_by_table = _per_table(tombstone_retention, "tombstone_retention")
    for mode in (pk_default, *pk_by_table.values()):
        if mode not in PK_UPDATE_MODES:
            raise ConfigError(f"pk_update {mode!r} is not one of {', '.join(PK_UPDATE_MODES)}")
    started = time.perf_counter()
    spark = spark or get_spark()
    target_s = str(Path(target).resolve())
    decoder = get_decoder(format, options)
    decoder.state_dir = str(Path(target_s) / "_lakecdc" / "decoders" / format)
    eng = _make_engine(engine, spark, storage_options)
    settings = ApplySettings(
        format=format,
        keys=_normalise_keys(keys),
        pk_update=pk_default,
        tombstone_retention=retention_default,
        pk_update_by_table=pk_by_table, retention_by_table=retention_by_table,
        treat_all_as_strings=decoder.all_strings,
        column_list=_normalise_keys(column_list),
        except_column_list=_normalise_keys(except_column_list),
        apply_as_truncates=apply_as_truncates,
        complete_transactions=complete_transactions,
        include_tables=tuple(include_tables), exclude_tables=tuple(exclude_tables),
        contracts=contracts if isinstance(contracts, Mapping) else load_contracts(contracts),
        **history_settings(stored_as_scd_type, track_history_column_list, track_history_except_column_list,
                           change_data_feed),
    )
    for table in set(settings.column_list) & set(settings.except_column_list):
        raise ConfigError(f"table {table!r}: give column_list or except_column_list, not both")
    if complete_transactions and not decoder.TRANSACTION_MARKERS:
        raise ConfigError(
            f"complete_transactions needs transaction markers (BEGIN/END with event counts), which "
            f"{format} messages do not carry: without them no transaction would ever look complete"
        )
    paths = {t: c.target for t, c in settings.contracts.items() if c.target}
    paths.update(table_paths or {})
    if paths:
        record_table_paths(target_s, paths, exists=eng.exists)
    say = progress or (lambda _msg: None)
    raw_inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files = list_inputs(raw_inputs)
    ledger = Ledger(target_s)
    plan = ledger.plan(format, files, appendable=decoder.appendable, min_age=min_file_age)
    manifests: list[tuple[Manifest, bool]] = [(run, True) for run in plan.pending]
    if plan.new:
        manifest = Manifest(run_id=ledger.next_run_id(), status="planned", format=format, inputs=plan.new)
        ledger.write(manifest)
        manifests.append((manifest, False))
    if plan.waiting:
        say(f"{len(plan.waiting)} file(s) changed less than {min_file_age:g}s ago: left for a later run")
    if not manifests:
        say("nothing new to apply")
    results: list[RunSummary] = []
    for manifest, resumed in manifests:
        say(f"run {manifest.run_id}: {len(manifest.inputs)} file(s){' (resuming)' if resumed else ''}")
        run_started = dt.datetime.now(dt.timezone.utc)
        result = _run(spark, eng, decoder, settings, target_s, manifest, resumed=resumed, say=say)
        say(f"run {manifest.run_id}: recording the run")
        record_run(eng, target_s, result, run_id=manifest.run_id, inputs=[f.path for f in manifest.inputs],
                   started=run_started, finished=dt.datetime.now(dt.timezone.utc))
        if result.ok:
            manifest.status = "committed"
            manifest.finished_at = time.time()
        manifest.summary = result.to_dict()
        ledger.write(manifest)
        results.append(result)
    return _combine(results, target=target_s, fmt=format, engine=eng.name, seconds=time.perf_counter() - started)


def _combine(results: list[RunSummary], *, target: str, fmt: str, engine: str, seconds: float) -> RunSummary:
    tables: dict[str, TableSummary] = {}
    for r in results:
        for t in r.tables:
            tables[t.source_table] = tables[t.source_table].plus(t) if t.source_table in tables else t
    return RunSummary(
        target=target, format=fmt, runs=tuple(x for r in results for x in r.runs),
        files=sum(r.files for r in results), tables=tuple(tables[k] for k in sorted(tables)),
        quarantine=quarantine_path(target), quarantined_unrouted=sum(r.quarantined_unrouted for r in results),
        skipped_unrouted=sum(r.skipped_unrouted for r in results),
        seconds=seconds, engine=engine, resumed=any(r.resumed for r in results),
    )


@dataclass
class _Prepared:
    """One table, ready to merge: its layout, its net actions and its counts."""

    table: str
    path: str
    layout: Layout
    new_fields: T.StructType
    exists: bool
    net: pa.Table
    counts: dict[str, int]
    truncate_seq: str | None
    seen_columns: bool


def _run(
    spark: SparkSession, engine: DeltaRsEngine, decoder: Decoder, settings: ApplySettings, target: str,
    manifest: Manifest, *, resumed: bool, say: Progress,
) -> RunSummary:
    files = [f.path for f in manifest.inputs]
    run_id = manifest.run_id
    now = dt.datetime.now(dt.timezone.utc)
    staging = str(Path(target) / "_lakecdc" / "staging" / f"run-{run_id:010d}")
    say(f"decoding {len(files)} file(s) as {settings.format}")
    with job_conf(spark):
        events = decoder.read(spark, files, staging=staging)
        held = None
        typed_from = files
        if settings.complete_transactions:
            events, held = split_open_transactions(spark, engine, target, events, run_id)
            # events held by an earlier run come from its files: their declared types too
            typed_from = [*files, *(f for f in held_files(engine, target, run_id) if f not in files)]
        route = settings.route_sql()
        if route is not None:  # tables routed elsewhere: their events become skipped records
            events = events.withColumn("op", F.expr(f"CASE WHEN table IS NULL OR {route} THEN op END"))
        if not settings.apply_as_truncates:
            events = events.where((F.col("op") != "T") | F.col("op").isNull() | F.col("_error").isNotNull())
        try:
            summaries, quarantined, skipped = _run_tables(spark, engine, decoder, settings, target, typed_from,
                                                          events, run_id=run_id, now=now, staging=staging, say=say)
            held_counts: dict[str | None, int] = {}
            if held is not None and all(s.status in ("applied", "skipped") for s in summaries.values()):
                say("holding the events of transactions not complete yet")
                held_counts, markers = write_held(engine, target, held, run_id)
                record_applied(engine, target, events, run_id, now, settings.tombstone_retention)
                for name, n in markers.items():
                    skipped[name] = skipped.get(name, 0) + n
        finally:
            events.unpersist()
    shutil.rmtree(staging, ignore_errors=True)
    per_table: dict[str | None, int] = {}
    for q in quarantined:
        per_table[q.table] = per_table.get(q.table, 0) + 1
    for name in [*skipped, *held_counts, *per_table]:  # (a table whose every record was quarantined too)
        if name is not None and name not in summaries:
            summaries[name] = TableSummary(name, table_path(target, name), status="applied")
    for name, s in list(summaries.items()):
        summaries[name] = replace(s, quarantined=per_table.get(name, 0), skipped=skipped.get(name, 0),
                                  held=held_counts.get(name, 0))
    for q in quarantined[:20]:
        say(q.message(settings.format))
    if len(quarantined) > 20:
        say(f"... and {len(quarantined) - 20} more quarantined record(s) in {quarantine_path(target)}")
    return RunSummary(
        target=target, format=settings.format, runs=(run_id,), files=len(files),
        tables=tuple(summaries[k] for k in sorted(summaries)), quarantine=quarantine_path(target),
        quarantined_unrouted=per_table.get(None, 0), skipped_unrouted=skipped.get(None, 0),
        engine=engine.name, resumed=resumed,
    )


def _run_tables(
    spark: SparkSession, engine: DeltaRsEngine, decoder: Decoder, settings: ApplySettings, target: str,
    files: list[str], events: DataFrame, *, run_id: int, now: dt.datetime, staging: str, say: Progress,
) -> tuple[dict[str, TableSummary], list[Quarantined], dict[str | None, int]]:
    prep: _Prepared | HistoryPrepared
    from lakecdc.quality import blocked_tables

    blocked = blocked_tables(target)  # a 'fail' data-quality check stops these tables' merges
    fast = None if blocked else _fast_path(spark, engine, settings, target, events, run_id=run_id, say=say)
    if fast is not None:
        prep = fast
        say(f"{prep.table}: merging {prep.net.num_rows} net change(s)")
        _change_data_feed(engine, settings, prep)
        return {prep.table: _commit(engine, settings, target, prep, run_id=run_id, now=now)}, [], {}
    profile, decode_errors, skipped = _profile(events)
    if len(profile) > 1:
        # Several tables read the same events: decode once into Spark's cache. (A single table
        # is cheaper to decode twice than to cache: caching maps costs more than parsing.)
        events.persist(StorageLevel.MEMORY_AND_DISK)
    summaries: dict[str, TableSummary] = {}
    shapes: dict[str, _Shape] = {}
    for table in sorted(profile):
        path = table_path(target, table)
        if table in blocked:
            summaries[table] = _failed(target, table, profile[table], LakecdcError(blocked[table]), say)
            continue
        try:
            done = engine.committed_version(path)
            if done is not None and done >= run_id:
                summaries[table] = TableSummary(table, path, status="skipped", delta_version=engine.version(path))
                continue
            shapes[table] = history_shape(settings, table, path, _shape(engine, settings, target, table, profile[table]))
        except MissingKeyError as exc:
            summaries[table] = TableSummary(table, path, events=profile[table]["events"], status="failed", error=str(exc))
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a table whose log cannot be read
            summaries[table] = _failed(target, table, profile[table], exc, say)
    wanted = {t: sh.new_columns for t, sh in shapes.items() if sh.new_columns}
    inferred = _new_column_types(spark, decoder, settings, files, wanted, staging=staging, say=say)
    bad_parts: list[DataFrame] = []
    if decode_errors:
        bad_parts.append(events.where(F.col("_error").isNotNull()).select(*BAD_COLUMNS))
    prepared: list[_Prepared | HistoryPrepared] = []
    for table, shape in shapes.items():
        say(f"{table}: consolidating")
        try:
            prepare = prepare_history if settings.scd_type(table) == 2 else _prepare
            prep, bad = prepare(spark, engine, settings, target, table, profile[table], shape,  # type: ignore[operator,misc]
                                inferred.get(table, {}), events)
        except (ConfigError, PrimaryKeyUpdateError):
            raise  # the user's configuration, or an abend asked for: stop the run
        except Exception as exc:  # noqa: BLE001 - one table's failure must not stop the others
            summaries[table] = _failed(target, table, profile[table], exc, say)
            continue
        if bad is not None:
            bad_parts.append(bad)
        prepared.append(prep)
    for prep in prepared:
        try:
            if isinstance(prep, HistoryPrepared):
                say(f"{prep.table}: merging {prep.versions.num_rows} version(s) into its history")
                summaries[prep.table] = commit_history(engine, settings, target, prep, run_id=run_id, now=now)
                continue
            say(f"{prep.table}: merging {prep.net.num_rows} net change(s)")
            _change_data_feed(engine, settings, prep)
            summaries[prep.table] = _commit(engine, settings, target, prep, run_id=run_id, now=now)
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - one table's failure must not stop the others
            summaries[prep.table] = _failed(target, prep.table, profile[prep.table], exc, say)
    quarantined: list[Quarantined] = []
    if bad_parts:
        say("writing the quarantine")
        bad_all = bad_parts[0]
        for b in bad_parts[1:]:
            bad_all = bad_all.unionByName(b)
        quarantined = write_quarantine(engine, target, collect_bad(bad_all, events), fmt=settings.format,
                                       run_id=run_id, now=now)
    return summaries, quarantined, skipped


def _failed(target: str, table: str, prof: dict, exc: BaseException, say: Progress) -> TableSummary:
    """The summary of a table whose merge failed: the run stays unfinished and is resumed by the
    next one, for this table only (the others committed theirs)."""
    reason = str(exc) if isinstance(exc, LakecdcError) else f"{type(exc).__name__}: {exc}"
    say(f"{table}: FAILED ({reason}); the other tables go on, this one is retried by the next run")
    return TableSummary(table, table_path(target, table), events=prof["events"], status="failed", error=reason)


def _change_data_feed(engine: DeltaRsEngine, settings: ApplySettings, prep: _Prepared) -> None:
    """Turn on Change Data Feed for a current-state table that asks for it, before its merge: an
    existing table gets the property, a new one is created with it (``_commit`` then finds it)."""
    if not settings.wants_change_data_feed(prep.table):
        return
    if engine.exists(prep.path):
        enable_change_data_feed(engine, prep.path)
        return
    has_rows = bool(prep.net.num_rows) and bool(pc.any(pc.equal(prep.net.column("_action"), "upsert")).as_py())
    if has_rows or prep.seen_columns:  # the tables _commit creates
        layout = prep.layout
        schema = T.StructType(
            [T.StructField(c, t) for c, t in zip(layout.columns, layout.types, strict=True)]
            + [T.StructField(name, dtype) for name, dtype in CDC_COLUMNS]
        )
        engine.create(prep.path, schema, name=prep.table, properties=CHANGE_DATA_FEED)


def _new_column_types(
    spark: SparkSession, decoder: Decoder, settings: ApplySettings, files: list[str],
    wanted: dict[str, dict[str, list[str]]], *, staging: str, say: Progress,
) -> dict[str, dict[str, T.DataType]]:
    """Types of the new columns: declared by the input, else inferred from the data, else string."""
    if not wanted:
        return {}
    if settings.treat_all_as_strings:
        return {t: {c: T.StringType() for c in cols} for t, cols in wanted.items()}
    declared = dict(decoder.column_types(spark, files, staging=staging)) if wanted else {}
    for table, contract in settings.contracts.items():  # a contract's types win over the input's
        declared[table] = {**declared.get(table, {}), **contract.types}
    out: dict[str, dict[str, T.DataType]] = {}
    rest: dict[str, dict[str, list[str]]] = {}
    for table, cols in wanted.items():
        known = {c.lower(): t for c, t in declared.get(table, {}).items()}
        out[table] = {c: known[c.lower()] for c in cols if c.lower() in known}
        left = {c: alts for c, alts in cols.items() if c.lower() not in known}
        if left:
            rest[table] = left
    images = decoder.variant_images(spark, files, staging=staging) if rest else None
    if images is not None:
        say(f"inferring the types of new columns of {len(rest)} table(s)")
        for table, found in infer_types(images, rest).items():
            out[table].update(found)
    elif rest:
        for table, cols in rest.items():
            out[table].update({c: T.StringType() for c in cols})
    return out


@dataclass(frozen=True)
class _Speculation:
    """What the fast path assumes of a batch, checked by the same pass that folds it.

    The fast path skips the profile pass when the target holds exactly one table, recorded by an
    earlier run with its keys: it assumes the batch holds only that table's events, all decodable,
    with the same keys, no column the table lacks, no truncate and nothing older than the table.
    An event that breaks an assumption is marked "unexpected" by :func:`~lakecdc.consolidate.widen`
    and counted like a bad record by the fold; then the run takes the ordinary path (profile, then
    fold) and nothing was committed.
    """

    table: str
    keys: tuple[str, ...]

    def surprise_sql(self) -> str:
        """SQL over the canonical events: true for an event the fast path did not assume."""
        want = sql_string(",".join(k.lower() for k in self.keys))
        return (
            f"_error IS NOT NULL OR table IS NULL OR table != {sql_string(self.table)} OR op IS NULL OR op = 'T' "
            f"OR (keys IS NOT NULL AND lower(array_join(keys, ',')) != {want})"
        )


def _fast_path(
    spark: SparkSession, engine: DeltaRsEngine, settings: ApplySettings, target: str, events: DataFrame,
    *, run_id: int, say: Progress,
) -> _Prepared | None:
    """The run's one table prepared in a single pass over the data, or None (see :class:`_Speculation`)."""
    known = known_tables(target)
    if len(known) != 1:
        return None
    ((table, keys),) = known.items()
    configured = settings.keys.get(table)
    if configured and [c.lower() for c in configured] != [k.lower() for k in keys]:
        return None
    path = table_path(target, table)
    if not engine.exists(path):
        return None
    done = engine.committed_version(path)
    if done is not None and done >= run_id:
        return None
    prof = {"events": 0, "min_seq": None, "max_truncate": None, "columns": [], "keys": list(keys)}
    shape = _shape(engine, settings, target, table, prof)
    if shape.new_columns or settings.scd_type(table) == 2 or is_history(shape.existing):
        return None  # (a history table, or one applied as the wrong type: the ordinary path says so)
    say(f"{table}: consolidating")
    out = _prepare(spark, engine, settings, target, table, {**prof, "columns": list(shape.columns)}, shape, {},
                   events, speculation=_Speculation(table, shape.keys))
    if out is None:
        say("the batch holds more than the fast path assumed: profiling it")
        return None
    return out[0]


def _profile(events: DataFrame) -> tuple[dict[str, dict], int, dict[str | None, int]]:
    """One aggregation over the run: per table counts, seq range, truncates, columns, keys.

    Also returns how many records could not be decoded at all, and how many records were
    skipped per table (``None``: no table): tombstones, heartbeats, transaction markers and
    other non-row records, which a decoder marks with ``op`` NULL and no ``_error``.
    """
    fine = F.col("_error").isNull()
    good = fine & F.col("op").isNotNull()
    rows = events.groupBy("table").agg(
        F.count(F.when(good, F.lit(1))).alias("events"),
        F.count(F.when(fine & F.col("op").isNull() & F.col("source")[HELD].isNull(), F.lit(1))).alias("skipped"),
        F.count(F.when(~fine, F.lit(1))).alias("errors"),
        F.min(F.when(good, F.col("seq"))).alias("min_seq"),
        F.max(F.when(good & (F.col("op") == "T"), F.col("seq"))).alias("max_truncate"),
        F.collect_set(F.when(good, F.map_keys("after"))).alias("after_cols"),
        F.collect_set(F.when(good, F.map_keys("before"))).alias("before_cols"),
        # skipped records may name keys too (a Debezium schema change's primaryKeyColumnNames)
        F.max_by("keys", F.when(fine & F.col("keys").isNotNull(), F.col("seq"))).alias("keys"),
    ).collect()
    out: dict[str, dict] = {}
    errors = 0
    skipped: dict[str | None, int] = {}
    for r in rows:
        errors += int(r["errors"])
        if r["skipped"]:
            skipped[r["table"]] = int(r["skipped"])
        if r["table"] is None or not r["events"]:
            continue
        cols: list[str] = []
        for group in (r["after_cols"], r["before_cols"]):
            for arr in group:
                for c in arr:
                    if c not in cols:
                        cols.append(c)
        out[r["table"]] = {
            "events": int(r["events"]), "min_seq": r["min_seq"], "max_truncate": r["max_truncate"],
            "columns": cols, "keys": list(r["keys"]) if r["keys"] else None,
        }
    return out, errors, skipped


@dataclass(frozen=True)
class _Shape:
    """A table's columns before typing: existing ones, new ones (with other spellings), keys."""

    exists: bool
    existing: T.StructType
    columns: tuple[str, ...]
    keys: tuple[str, ...]
    spelled: dict[str, list[str]]
    new_columns: dict[str, list[str]]
    #: columns of the images that a column list leaves out (all spellings)
    ignored: tuple[str, ...] = ()


def _shape(engine: DeltaRsEngine, settings: ApplySettings, target: str, table: str, prof: dict) -> _Shape:
    """Columns and keys of ``table`` from its target (if any) and this run's events.

    Delta column names ignore case, so spellings that differ only in case are one column (the
    target's spelling, else the first seen).
    """
    path = table_path(target, table)
    exists = engine.exists(path)
    existing = engine.schema(path) if exists else T.StructType()
    existing_cols = [f.name for f in existing.fields if not f.name.startswith("_cdc_")]
    spelled: dict[str, list[str]] = {c.lower(): [c] for c in existing_cols}
    seen: list[str] = []
    for c in prof["columns"]:
        if c.lower() not in spelled:
            spelled[c.lower()] = [c]
            seen.append(c)
        elif c not in spelled[c.lower()]:
            spelled[c.lower()].append(c)
    recorded = known_tables(target).get(table) if exists else None
    # messages without keys (inserts and deletes of some formats) fall back on the recorded ones
    fallback = recorded if not prof["keys"] else None
    contract = settings.contracts.get(table)
    configured = settings.keys.get(table) or (contract.keys if contract and contract.keys else None)
    keys = _resolve_keys(table, prof["keys"], configured or fallback, existing_cols + seen)
    ignored = [c for c in seen if settings.ignores(table, c, keys)]
    seen = [c for c in seen if c not in ignored]
    if recorded and [k.lower() for k in recorded] != [k.lower() for k in keys]:
        raise ConfigError(
            f"table {table!r}: its primary_keys are now {list(keys)}, but {path} was built on {list(recorded)}; "
            "a Delta table cannot change its key: apply into a new target, or rebuild this table"
        )
    for k in keys:
        if k.lower() not in spelled:
            spelled[k.lower()] = [k]
            seen.append(k)
    kept = [c for c in existing_cols if not settings.ignores(table, c, keys)]
    return _Shape(
        exists=exists, existing=existing, columns=tuple(kept + seen), keys=keys, spelled=spelled,
        new_columns={c: spelled[c.lower()][1:] for c in seen},
        ignored=tuple(sorted({*ignored, *(c for c in existing_cols if c not in kept)}, key=str.lower)),
    )


def _resolve_keys(table: str, declared: Sequence[str] | None, configured: Sequence[str] | None, columns: Sequence[str]) -> tuple[str, ...]:
    """The key columns, spelled as the table's columns are (message keys may differ in case)."""
    if declared and configured and [c.lower() for c in declared] != [c.lower() for c in configured]:
        raise ConfigError(
            f"table {table!r}: the messages' primary_keys {list(declared)} differ from the configured "
            f"keys {list(configured)}; remove one of them"
        )
    chosen = declared or configured
    if not chosen:
        raise MissingKeyError(table)
    out = []
    lower = {c.lower(): c for c in columns}
    for k in chosen:
        out.append(k if k in columns else lower.get(k.lower(), k))
    return tuple(out)


def _prepare(
    spark: SparkSession, engine: DeltaRsEngine, settings: ApplySettings, target: str, table: str,
    prof: dict, shape: _Shape, inferred: dict[str, T.DataType], events: DataFrame,
    *, speculation: _Speculation | None = None,
) -> tuple[_Prepared, DataFrame | None] | None:
    """Fold one table's events into net actions (collected as Arrow) and count what was left out.

    Returns the prepared table and, when some of its records did not fit (a value of the wrong
    type, a missing key), those records for the quarantine. With a ``speculation`` (the fast
    path: no profile was made), returns None when the batch turned out not to be what it assumed.
    """
    path = table_path(target, table)
    exists = shape.exists
    # the fast path folds every event, to find those it did not expect
    mine = events if speculation is not None else events.where(
        (F.col("table") == table) & F.col("_error").isNull() & F.col("op").isNotNull()
    )
    types = {f.name: f.dataType for f in shape.existing.fields}
    types.update(inferred)
    # A new column seen only as NULL is left out for now: the table reads NULL for it anyway,
    # and its type is inferred from the first run that carries a value.
    columns = tuple(c for c in shape.columns if c in types or c in shape.keys)
    types.update({k: T.StringType() for k in shape.keys if k not in types})
    layout = Layout(
        columns=columns, types=tuple(types[c] for c in columns), keys=shape.keys,
        aliases=tuple(tuple(shape.spelled[c.lower()][1:]) for c in columns),
        ignored=tuple(n for c in shape.ignored for n in shape.spelled.get(c.lower(), [c])),
    )
    new_fields = T.StructType([T.StructField(c, types[c]) for c in shape.new_columns if c in columns])

    watermark = truncate_watermark(engine, target, table)
    run_truncate = prof["max_truncate"]
    if run_truncate is not None and watermark is not None and run_truncate <= watermark:
        run_truncate = None  # a replayed truncate: already applied
    max_stored = stored_max_seq(engine, target, table)
    if speculation is not None:
        need_stored = max_stored is None  # checked against the batch's smallest seq afterwards
    else:
        need_stored = max_stored is None or (prof["min_seq"] is not None and prof["min_seq"] <= max_stored)
    stored = read_stored(spark, engine, target, table, layout) if need_stored else None
    wide = widen(mine, layout, surprise=speculation.surprise_sql() if speculation is not None else None)
    marked = drop_stale(wide, layout, stored, watermark)
    # (the fast path keeps truncates: marked unexpected, they count as errors and make it give up)
    usable = marked if speculation is not None else marked.where(F.col("_op") != "T")
    net = fold(usable, layout, reset_seq=run_truncate).toArrow()
    counts = {
        name: int(pc.sum(net.column(name)).as_py() or 0) for name in ("_events", "_dups", "_stale", "_errors")
    }
    if speculation is not None:
        min_seq = pc.min(net.column("_min_seq")).as_py()
        if counts["_errors"] or (not need_stored and min_seq is not None and max_stored is not None and min_seq <= max_stored):
            return None
        prof = {**prof, "events": counts["_events"]}
    if pc.any(net.column("_pku")).as_py():
        # the replay needs whole images: widen again with every after value and the before image
        full = drop_stale(widen(mine, layout, full=True), layout, stored, watermark).where(F.col("_op") != "T")
        ok = full.where(F.col("_error").isNull() & ~F.col("_stale"))
        if settings.pk_update_for(table) == "abend":
            _raise_abend(table, ok, layout)
        target_rows = read_rows(spark, engine, target, table, layout)
        if run_truncate is not None:
            ok = ok.where(F.col("_seq") > F.lit(run_truncate))
            target_rows = target_rows.where(F.col("_cdc_seq") > F.lit(run_truncate)) if target_rows is not None else None
        if stored is None:
            stored = read_stored(spark, engine, target, table, layout)
        moved = fold_with_key_moves(
            ok, layout, pk_update=settings.pk_update_for(table), table=table,
            target_rows=target_rows, stored=stored,
        ).toArrow()
        # duplicates stay as the first fold counted them (it also sees events a truncate wiped)
        counts["_pku"] = int(ok.where("_pku").count())
        net = moved
    net = net.filter(pc.is_valid(net.column("_action")))
    bad = None
    if counts["_errors"]:
        bad = marked.where(F.col("_error").isNotNull()).select(
            "_file", "_block", "_row", F.lit(table).alias("table"), "_error"
        )
    counts["events"] = prof["events"]
    prep = _Prepared(
        table=table, path=path, layout=layout, new_fields=new_fields, exists=exists, net=net,
        counts=counts, truncate_seq=run_truncate, seen_columns=bool(prof["columns"]),
    )
    return prep, bad


def _raise_abend(table: str, ok: DataFrame, layout: Layout) -> None:
    first = ok.where("_pku").orderBy("_seq").limit(1).collect()
    if not first:
        return
    r = first[0]
    nk = len(layout.keys)
    old = tuple(r[f"k{j}"] for j in range(nk))
    new = tuple(r[f"n{j}"] for j in range(nk))
    raise PrimaryKeyUpdateError(table, old, new, r["_pos"])


T_ = TypeVar("T_")

#: Attempts and first wait of :func:`retry_conflicts` (the wait doubles, with jitter).
CONFLICT_ATTEMPTS, CONFLICT_WAIT = 6, 0.25


def retry_conflicts(action: Callable[[], T_], *, what: str, say: Progress | None = None) -> T_:
    """Run ``action`` (an idempotent Delta commit), again after a :class:`CommitConflict` with a
    growing wait: a concurrent writer (a maintenance job, another merge) committed first. The
    merge re-reads the table each time, and its txn version makes a commit that did land a no-op."""
    wait = CONFLICT_WAIT
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return action()
        except CommitConflict as exc:
            if attempt == CONFLICT_ATTEMPTS:
                raise CommitConflict(f"{what}: still conflicting after {attempt} attempts: {exc}") from exc
            if say:
                say(f"{what}: a concurrent commit won; retrying in {wait:.1f}s")
            time.sleep(wait * (1 + random.random()))
            wait *= 2
    raise AssertionError("unreachable")


def _commit(
    engine: DeltaRsEngine, settings: ApplySettings, target: str, prep: _Prepared, *, run_id: int, now: dt.datetime,
) -> TableSummary:
    layout = prep.layout
    source = BatchSource.from_arrow(prep.net, n_columns=len(layout.columns), n_keys=len(layout.keys))
    schema = T.StructType(
        [T.StructField(c, t) for c, t in zip(layout.columns, layout.types, strict=True)]
        + [T.StructField(name, dtype) for name, dtype in CDC_COLUMNS]
    )
    has_rows = source.rows > 0 and bool(pc.any(pc.equal(source.arrow.column("_action"), "upsert")).as_py())
    # A table is created once some image showed its columns; a stream that so far only
    # truncated it leaves tombstones and a truncate mark, no table.
    creatable = has_rows or prep.seen_columns
    if not prep.exists and not creatable:
        pass
    elif not prep.exists:
        engine.create(prep.path, schema, name=prep.table)
    elif prep.new_fields.fields:
        engine.add_columns(prep.path, prep.new_fields)
    if prep.exists or creatable:
        write_table_info(target, prep.table, layout.keys)
    plan = MergePlan(
        table=prep.table, path=prep.path, columns=layout.columns, keys=layout.keys, version=run_id,
        always_set=source.always_set, key_ranges=source.key_ranges if prep.truncate_seq is None else (),
        truncate_below=prep.truncate_seq,
        metadata={"lakecdc.run_id": str(run_id), "lakecdc.format": settings.format},
    )
    inserted = updated = deleted = 0
    files: dict[str, int | None] = {}
    if (source.rows or prep.truncate_seq is not None) and (prep.exists or creatable):
        result = retry_conflicts(lambda: engine.merge(plan, source), what=f"merge into {prep.table}")
        inserted, updated, deleted = result.inserted, result.updated, result.deleted
        files = {"files_scanned": result.files_scanned, "files_skipped": result.files_skipped,
                 "files_rewritten": result.files_removed, "files_added": result.files_added}
    stones = tombstone_rows(source.deletes, layout, truncate_seq=prep.truncate_seq, now=now)
    if stones.num_rows:
        engine.append(tombstone_path(target, prep.table), stones, version=run_id)
    expire_tombstones(engine, target, prep.table, settings.retention_for(prep.table), now)
    if settings.pk_update_for(prep.table) == "update":
        moved = min(prep.counts.get("_pku", 0), inserted, deleted)
        inserted, deleted, updated = inserted - moved, deleted - moved, updated + moved
    applied = prep.net.filter(pc.is_valid(prep.net.column("_action")))
    newest = pc.max(applied.column("_cdc_op_ts")).as_py() if applied.num_rows else None
    return TableSummary(
        last_op_ts=newest.astimezone(dt.timezone.utc).isoformat() if newest is not None else None,
        last_seq=pc.max(applied.column("_cdc_seq")).as_py() if applied.num_rows else None,
        source_table=prep.table, target=prep.path, events=prep.counts["events"], inserted=inserted,
        updated=updated, deleted=deleted, duplicate_or_late=prep.counts["_stale"] + prep.counts["_dups"],
        delta_version=engine.version(prep.path) if engine.exists(prep.path) else None, **files,
    )


def read_table(
    path: str | os.PathLike[str], *, version: int | None = None, spark: SparkSession | None = None,
) -> DataFrame:
    """A Delta table lakecdc wrote, as a Spark DataFrame, optionally as of an older ``version``.

    Uses Delta's own reader when its JVM classes are there (Databricks), else reads the files
    the Delta log lists (delta-rs): the same rows either way, no Delta jars needed.

    Example:
        >>> s = lakecdc.apply("landing/", "lake/")                                      # doctest: +SKIP
        >>> lakecdc.read_table(s.table("QASOURCE.TCUSTORD").target, version=1).show()   # doctest: +SKIP
    """
    from lakecdc._compat import delta_spark_available
    from lakecdc.merge.delta_rs import DeltaRsEngine

    spark = spark or get_spark()
    if delta_spark_available(spark):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(str(path))
    return DeltaRsEngine().read(spark, str(path), version)


def read_changes(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    format: str = "ogg-json",
    options: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
) -> DataFrame:
    """Decode change files into ops-style canonical events (good and bad records alike).

    ``_error`` is NULL for good records and holds the reason for bad ones.

    Example:
        >>> ev = lakecdc.read_changes("landing/", format="ogg-json")     # doctest: +SKIP
        >>> ev.groupBy("table", "op").count().show()                      # doctest: +SKIP
    """
    spark = spark or get_spark()
    raw = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files = list_inputs(raw)
    if not files:
        raise LakecdcError(f"no input files under {', '.join(map(str, raw))}")
    staging = tempfile.mkdtemp(prefix="lakecdc-staging-")
    spark.conf.set(EXACT_STRINGS, "true")
    return get_decoder(format, options).read(spark, files, staging=staging)
