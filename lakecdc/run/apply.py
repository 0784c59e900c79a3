"""``apply``: decode new inputs, consolidate per table, MERGE each table exactly once.

The path of one run, top to bottom:

1. **plan**: take the target's lease (one writer at a time, :mod:`lakecdc.run.lease`), list the
   inputs, leave out those an earlier run applied, check that the ledger and the tables agree
   (:mod:`lakecdc.maintenance.doctor`), write the run manifest (:mod:`lakecdc.run.ledger`);
2. **decode** the files with the format's decoder into canonical events (cached once);
3. **profile** the events per table in one aggregation: counts, seq range, truncates, the
   columns seen and the keys the messages carry (:mod:`lakecdc.run.profile`);
4. per table, **prepare** (:mod:`lakecdc.merge.prepare`, several tables at once): the table's
   columns and types (target schema, then inference for new columns), typed wide events, records that do not fit go to the quarantine, events not newer
   than the table (rule 6) are dropped and counted; an ``abend`` primary-key update stops the run
   here, before anything was committed;
5. per table, **consolidate** to one net action per key and **merge** with the run's transaction
   version, then record tombstones (:mod:`lakecdc.merge.commit`);
6. write the quarantine, mark the manifest committed, return the summary.

The settings of a run are :class:`lakecdc.config.settings.ApplySettings`.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import CancelledError, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pyspark import StorageLevel
from pyspark.sql import functions as F

from lakecdc.changes.events import PK_UPDATE_MODES, PkUpdate
from lakecdc.changes.quarantine import (
    BAD_COLUMNS,
    Quarantined,
    collect_bad,
    quarantine_path,
    write_quarantine,
)
from lakecdc.changes.sequence import check_basis, per_table_sequence_by, resequence
from lakecdc.changes.transactions import (
    held_files,
    record_applied,
    split_open_transactions,
    write_held,
)
from lakecdc.check.contracts import Contract, load_contracts
from lakecdc.check.quality import blocked_tables
from lakecdc.config.settings import (
    DEFAULT_TOMBSTONE_RETENTION,
    ApplySettings,
    Progress,
    history_settings,
    normalise_keys,
    per_table,
)
from lakecdc.decode import get_decoder
from lakecdc.decode.files.lines import EXACT_STRINGS
from lakecdc.errors import ConfigError, LakecdcError, MissingKeyError, PrimaryKeyUpdateError, explain
from lakecdc.maintenance.doctor import verify
from lakecdc.merge.commit import merge_one
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.merge.pick import make_engine
from lakecdc.merge.prepare import HistoryPrepared, Prepared, fast_path, prepare_history, prepare_table
from lakecdc.run.lease import hold
from lakecdc.run.ledger import Ledger, Manifest, list_inputs
from lakecdc.run.profile import (
    Accounts,
    TableShape,
    declared_columns,
    history_shape,
    new_column_types,
    profile_events,
    resequenced,
    reserved_records,
    table_shape,
    with_declared,
)
from lakecdc.run.runs import record_run
from lakecdc.run.state import catalog_routes, check_table_owner, record_table_paths, table_path
from lakecdc.run.summary import RunSummary, TableSummary, add_kinds, unreadable, unreadable_message
from lakecdc.spark.compat import delta_spark_available
from lakecdc.spark.conf import job_conf, run_conf
from lakecdc.spark.session import active_spark, get_spark

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from lakecdc.decode.base import Decoder


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
    table_names: Mapping[str, str | tuple[str, str]] | str | None = None,
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
    sequence_by: Sequence[str] | str | Mapping[str, Sequence[str] | str] | None = None,
    parallel_tables: int | None = None,
    progress: Progress | None = None,
    wait: float | None = None,
    reapply: str | Sequence[str] = (),
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
        table_names: source tables kept as tables of the Spark session's catalog instead of paths
            (delta-spark engine): ``{"SRC.ORDERS": "main.sales.orders"}`` (a managed table),
            ``{"SRC.ORDERS": ("main.sales.orders", "s3://bucket/orders")}`` (external, at that
            location), or a ``"catalog.schema"`` prefix for every table (``SRC.ORDERS`` ->
            ``<prefix>.src_orders``). Recorded with the target like ``table_paths``; lakecdc's own
            state (ledger, tombstones, quarantine) stays under ``target``.
        column_list: per table, the only columns written to the target (DLT's ``column_list``);
            key columns are always written. ``{"S.ORDERS": ["ID", "STATUS"]}``.
        except_column_list: per table, columns never written (DLT's ``except_column_list``).
        apply_as_truncates: False to read truncates without applying them (DLT's
            ``apply_as_truncates``): they are left out of the run like records of no interest.
        complete_transactions: apply a source transaction only when all its events have been
            read (formats with transaction metadata: Debezium's BEGIN/END markers); the events
            of a transaction still open are held for the next run (see :mod:`lakecdc.changes.transactions`).
        include_tables / exclude_tables: source-table name patterns (``QASOURCE.*``, fnmatch,
            case-sensitive): only tables matching an include pattern (all, when none is given) and
            no exclude pattern are applied; the others' events are counted as skipped.
        contracts: ODCS data contracts (a file, a directory of them, or loaded ones by source
            table): their keys for messages without keys, their column types over inference.
        stored_as_scd_type: 2 for SCD type 2 history tables (every version, with ``__START_AT`` /
            ``__END_AT``; see :mod:`lakecdc.consolidate.history`) instead of current-state tables (1, the
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
        sequence_by: order changes by these fields instead of the format's seq (DLT's
            ``sequence_by``): ``["UPDATED_AT"]`` for every table, or per source table
            ``{"S.ORDERS": ["VERSION", "source.scn:int"]}`` (a ``"*"`` entry for the others; a
            contract's ``lakecdc.sequence_by`` comes between the two). Fields: ``op_ts``, ``pos``,
            ``source.<name>`` or a column, compared by type (see :mod:`lakecdc.changes.sequence`); the
            format's seq breaks ties. An event without a value is quarantined. A table keeps the
            basis it was built with (a run with another one is refused).
        parallel_tables: how many tables are prepared and merged at once (default
            :data:`DEFAULT_PARALLEL_TABLES`, at most the number of tables); 1 merges one at a time.
        progress: called with a short message at each step (the CLI shows them).
        wait: seconds to wait for another writer of ``target`` to finish (default: none). One
            writer per target at a time (see :mod:`lakecdc.run.lease`): while another run, ``stream``
            batch, ``maintain`` or ``check`` holds the target, this run raises
            :class:`~lakecdc.run.lease.TargetBusy` (who holds it, since when) once ``wait`` has passed.
        reapply: files applied before to read again in this run, by path or pattern (``fnmatch``,
            on the whole path or on the file name: ``"landing/2024-06-*.json"``, ``"*.avro"``):
            for files an earlier run read with the wrong ``format`` and quarantined (the summary's
            ``unreadable_files``), or after a decoder's fix. Each chosen file is taken out of the
            ledger (the manifests under ``_lakecdc/runs/`` that named it list it as
            ``reapplied``) and applied as a new file; its changes the tables already reflect count
            as duplicate or late (nothing is applied twice).

    Returns:
        A :class:`~lakecdc.run.summary.RunSummary`; ``summary.ok`` is False when a table failed
        (its error is in the summary; the other tables were applied).

    Raises:
        PrimaryKeyUpdateError: a key change met ``pk_update="abend"``; nothing was committed.
        TargetBusy: another writer holds ``target`` (after ``wait`` seconds).
        TargetDamaged: the ledger and the tables disagree (a lost ``_lakecdc/``, deleted Delta
            commits); the message says what and how to repair (``lakecdc doctor`` / ``repair``).

    Example:
        >>> import lakecdc
        >>> s = lakecdc.apply("landing/", "lake/", format="ogg-json")        # doctest: +SKIP
        >>> print(s.render())                                                # doctest: +SKIP
    """
    pk_default, pk_by_table = per_table(pk_update, "pk_update")
    retention_default, retention_by_table = per_table(tombstone_retention, "tombstone_retention")
    seq_default, seq_by_table = per_table_sequence_by(sequence_by)
    if parallel_tables is not None and (isinstance(parallel_tables, bool) or not isinstance(parallel_tables, int)
                                        or parallel_tables < 1):
        raise ConfigError(f"parallel_tables {parallel_tables!r}: expected a number of tables, 1 or more")
    for mode in (pk_default, *pk_by_table.values()):
        if mode not in PK_UPDATE_MODES:
            raise ConfigError(f"pk_update {mode!r} is not one of {', '.join(PK_UPDATE_MODES)}")
    started = time.perf_counter()
    target_s = str(Path(target).resolve())
    decoder = get_decoder(format, options)
    decoder.state_dir = str(Path(target_s) / "_lakecdc" / "decoders" / format)
    settings = ApplySettings(
        format=format,
        keys=normalise_keys(keys),
        pk_update=pk_default,
        tombstone_retention=retention_default,
        pk_update_by_table=pk_by_table, retention_by_table=retention_by_table,
        treat_all_as_strings=decoder.all_strings,
        column_list=normalise_keys(column_list),
        except_column_list=normalise_keys(except_column_list),
        apply_as_truncates=apply_as_truncates,
        complete_transactions=complete_transactions,
        include_tables=tuple(include_tables), exclude_tables=tuple(exclude_tables),
        contracts=contracts if isinstance(contracts, Mapping) else load_contracts(contracts),
        sequence_by=seq_default, sequence_by_table=seq_by_table,
        parallel_tables=parallel_tables or DEFAULT_PARALLEL_TABLES,
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
    raw_inputs = [inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs)
    files = list_inputs(raw_inputs)
    say = progress or (lambda _msg: None)
    with hold(target_s, command="apply", wait=wait) as lease:  # one writer per target
        ledger = Ledger(target_s)
        if reapply:
            chosen = reapply_matcher(reapply)
            again = ledger.forget(chosen)
            missing = [f for f in again if f not in files]
            say(f"re-applying {len(again)} file(s)" + (f" ({len(missing)} of them not among the inputs)" if missing else ""))
            if not again:
                raise ConfigError(
                    f"reapply {list(reapply) if not isinstance(reapply, str) else reapply!r}: no file applied to "
                    f"{target_s} matches (give paths or patterns of files an earlier run applied)"
                )
        plan = ledger.plan(format, files, appendable=decoder.appendable, min_age=min_file_age)
        paths = {t: c.target for t, c in settings.contracts.items() if c.target}
        paths.update(table_paths or {})
        if table_names:
            paths.update(catalog_routes(table_names))
        if plan.waiting:
            say(f"{len(plan.waiting)} file(s) changed less than {min_file_age:g}s ago: left for a later run")
        if not (plan.pending or plan.new or paths or spark is not None or engine not in (None, "auto")
                or active_spark() is not None):
            # nothing to apply: a scheduled re-run answers without starting a JVM
            say("nothing new to apply")
            return combine_summaries([], target=target_s, fmt=format, engine="not started (nothing to apply)",
                                     seconds=time.perf_counter() - started)
        # (Spark starts once the arguments, the configuration and the inputs are known to be usable:
        # a mistake in them is reported in a second, not after a JVM's start-up)
        spark = spark or get_spark()
        eng = make_engine(engine, spark, storage_options)
        verify(eng, target_s)  # the ledger and the tables agree (else: what is wrong, how to repair)
        if paths:
            record_table_paths(target_s, paths, exists=eng.exists)
        manifests: list[tuple[Manifest, bool]] = [(run, True) for run in plan.pending]
        if plan.new:
            manifest = Manifest(run_id=ledger.next_run_id(), status="planned", format=format, inputs=plan.new)
            lease.check()
            ledger.write(manifest, new=True)
            manifests.append((manifest, False))
        if not manifests:
            say("nothing new to apply")
        results: list[RunSummary] = []
        for manifest, resumed in manifests:
            lease.note(run_id=manifest.run_id)
            say(f"run {manifest.run_id}: {len(manifest.inputs)} file(s){' (resuming)' if resumed else ''}")
            run_started = dt.datetime.now(dt.timezone.utc)
            result = _run(spark, eng, decoder, settings, target_s, manifest, resumed=resumed, say=say)
            say(f"run {manifest.run_id}: recording the run")
            record_run(eng, target_s, result, run_id=manifest.run_id, inputs=[f.path for f in manifest.inputs],
                       started=run_started, finished=dt.datetime.now(dt.timezone.utc), files=manifest.inputs)
            if result.ok:
                manifest.status = "committed"
                manifest.finished_at = time.time()
            manifest.summary = result.to_dict()
            lease.check()
            ledger.write(manifest)
            results.append(result)
        return combine_summaries(results, target=target_s, fmt=format, engine=eng.name, seconds=time.perf_counter() - started)


def reapply_matcher(patterns: str | Sequence[str]) -> Callable[[str], bool]:
    """Whether a file path is chosen by ``patterns`` (paths or fnmatch patterns, matched against
    the whole resolved path or the file name)."""
    items = [patterns] if isinstance(patterns, (str, os.PathLike)) else list(patterns)
    whole = [str(Path(os.fspath(p)).expanduser().absolute()) for p in items]
    exact = {str(Path(os.fspath(p)).resolve()) for p in items}
    names = [os.fspath(p) for p in items if os.sep not in os.fspath(p)]

    def chosen(path: str) -> bool:
        return (path in exact or any(fnmatch.fnmatchcase(path, w) for w in whole)
                or any(fnmatch.fnmatchcase(Path(path).name, n) for n in names))

    return chosen


def combine_summaries(results: list[RunSummary], *, target: str, fmt: str, engine: str, seconds: float) -> RunSummary:
    tables: dict[str, TableSummary] = {}
    for r in results:
        for t in r.tables:
            tables[t.source_table] = tables[t.source_table].plus(t) if t.source_table in tables else t
    return RunSummary(
        target=target, format=fmt, runs=tuple(x for r in results for x in r.runs),
        files=sum(r.files for r in results), tables=tuple(tables[k] for k in sorted(tables)),
        quarantine=quarantine_path(target), quarantined_unrouted=sum(r.quarantined_unrouted for r in results),
        skipped_unrouted=sum(r.skipped_unrouted for r in results),
        skipped_unrouted_kinds=functools.reduce(add_kinds, (r.skipped_unrouted_kinds for r in results), {}),
        file_accounts={f: acc for r in results for f, acc in r.file_accounts.items()},
        unreadable_files=tuple(f for r in results for f in r.unreadable_files),
        seconds=seconds, engine=engine, resumed=any(r.resumed for r in results),
    )


#: A run whose input files hold at most this many bytes keeps its decoded events in Spark's cache
#: from the start: each query of the run (profile, fold, held transactions, quarantine) would
#: decode them again, and for a small batch Spark's per-query work (planning, generated code,
#: Python workers) is most of the time, so decoding once saves about a sixth of a small run. A
#: big single-table batch decodes twice instead: caching maps costs more than parsing them.
SMALL_RUN_BYTES = 64 << 20


def _run(
    spark: SparkSession, engine: DeltaRsEngine, decoder: Decoder, settings: ApplySettings, target: str,
    manifest: Manifest, *, resumed: bool, say: Progress,
) -> RunSummary:
    files = [f.path for f in manifest.inputs]
    run_id = manifest.run_id
    now = dt.datetime.now(dt.timezone.utc)
    staging = str(Path(target) / "_lakecdc" / "staging" / f"run-{run_id:010d}")
    say(f"decoding {len(files)} file(s) as {settings.format}")
    input_bytes = sum(f.size for f in manifest.inputs)
    with job_conf(spark, run_conf(input_bytes)):
        decoded = events = decoder.read(spark, files, staging=staging)
        if input_bytes <= SMALL_RUN_BYTES:
            decoded.persist(StorageLevel.MEMORY_AND_DISK)
        held = None
        typed_from = files
        if settings.complete_transactions:
            events, held = split_open_transactions(spark, engine, target, events, run_id)
            # events held by an earlier run come from its files: their declared types too
            typed_from = [*files, *(f for f in held_files(engine, target, run_id) if f not in files)]
        route = settings.route_sql()
        if route is not None:  # tables routed elsewhere: their events become skipped records
            events = _as_skipped(events, F.expr(f"NOT (table IS NULL OR {route})"), "excluded table")
            # (a skipped schema change of such a table must not create it either)
            events = events.withColumn("after", F.expr(f"CASE WHEN table IS NULL OR {route} THEN after END"))
        if not settings.apply_as_truncates:  # truncates are read, counted, not applied
            events = _as_skipped(events, F.col("op") == "T", "truncate (apply_as_truncates off)")
        try:
            summaries, quarantined, skipped, accounts = _run_tables(
                spark, engine, decoder, settings, target, typed_from, events, run_id=run_id, now=now,
                staging=staging, say=say, cached=decoded.is_cached)
            held_counts: dict[str | None, int] = {}
            if held is not None and all(s.status in ("applied", "skipped") for s in summaries.values()):
                say("holding the events of transactions not complete yet")
                held_counts, markers = write_held(engine, target, held, run_id)
                record_applied(engine, target, events, run_id, now, settings.tombstone_retention)
                for name, n in markers.items():
                    skipped[name] = skipped.get(name, 0) + n
                    kinds = accounts.skipped.setdefault(name, {}) if accounts is not None else {}
                    kinds["transaction marker"] = kinds.get("transaction marker", 0) + n
        finally:
            events.unpersist()
            decoded.unpersist()
    shutil.rmtree(staging, ignore_errors=True)
    per_table: dict[str | None, int] = {}
    for q in quarantined:
        per_table[q.table] = per_table.get(q.table, 0) + 1
    for name in [*skipped, *held_counts, *per_table]:  # (a table whose every record was quarantined too)
        if name is not None and name not in summaries:
            summaries[name] = TableSummary(name, table_path(target, name), status="applied")
    kinds = accounts.skipped if accounts is not None else {}
    for name, s in list(summaries.items()):
        summaries[name] = replace(s, quarantined=per_table.get(name, 0), skipped=skipped.get(name, 0),
                                  skipped_kinds=dict(kinds.get(name, {})), held=held_counts.get(name, 0))
    failed = {name for name, s in summaries.items() if s.status == "failed"}
    file_accounts = _file_accounts(accounts, quarantined, failed)
    bad_files = tuple(f for f, acc in sorted(file_accounts.items()) if unreadable(acc))
    if bad_files:
        say(unreadable_message(bad_files, settings.format))
    for q in quarantined[:20]:
        say(q.message(settings.format))
    if len(quarantined) > 20:
        say(f"... and {len(quarantined) - 20} more quarantined record(s) in {quarantine_path(target)}")
    return RunSummary(
        target=target, format=settings.format, runs=(run_id,), files=len(files),
        tables=tuple(summaries[k] for k in sorted(summaries)), quarantine=quarantine_path(target),
        quarantined_unrouted=per_table.get(None, 0), skipped_unrouted=skipped.get(None, 0),
        skipped_unrouted_kinds=dict(kinds.get(None, {})), file_accounts=file_accounts, unreadable_files=bad_files,
        engine=engine.name, resumed=resumed,
    )


def _as_skipped(events: DataFrame, where: Column, kind: str) -> DataFrame:
    """``events`` with the good row changes ``where`` picks turned into skipped records of ``kind``."""
    hit = F.coalesce(where, F.lit(False)) & F.col("op").isNotNull() & F.col("_error").isNull()
    mark = F.create_map(F.lit("skipped"), F.lit(kind))
    source = F.map_concat(F.map_filter(F.coalesce("source", F.create_map().cast("map<string,string>")),
                                       lambda k, _v: k != "skipped"), mark)
    return events.select(
        *[F.when(hit, source).otherwise(F.col(c)).alias(c) if c == "source"
          else F.when(~hit, F.col(c)).alias(c) if c in ("op", "after") else F.col(c) for c in events.columns]
    )


def _file_accounts(
    accounts: Accounts | None, quarantined: list[Quarantined], failed: Collection[str] = (),
) -> dict[str, dict[str, int]]:
    """Per file, what became of its records (:data:`~lakecdc.run.summary.FILE_ACCOUNTS`): the
    profile's accounts, with the row changes a later step quarantined (a value that does not fit
    its column, ...) moved to ``quarantined``, those of ``failed`` tables to ``failed`` (the next
    run applies them), and the others split into ``applied`` and ``duplicate_or_late`` as the
    tables' folds found them."""
    if accounts is None:
        return {}
    out = {f: dict(acc) for f, acc in accounts.files.items()}
    total: dict[str, int] = {}
    for q in quarantined:
        total[q.file] = total.get(q.file, 0) + 1
    for f, n in total.items():
        acc = out.setdefault(f, {})
        later = n - acc.get("quarantined", 0)
        if later > 0:
            acc["events"] = max(0, acc.get("events", 0) - later)
            acc["quarantined"] = n
    for (f, table), n in accounts.events.items():
        if table in failed and f in out:
            moved = min(n, out[f].get("events", 0))
            out[f]["events"] = out[f].get("events", 0) - moved
            out[f]["failed"] = out[f].get("failed", 0) + moved
    for f, acc in out.items():
        events = acc.pop("events", 0)
        late = min(events, sum(n for (g, table), n in accounts.late.items() if g == f and table not in failed))
        acc["applied"], acc["duplicate_or_late"] = events - late, late
    return {f: {k: v for k, v in acc.items() if v} for f, acc in out.items()}


def _run_tables(
    spark: SparkSession, engine: DeltaRsEngine, decoder: Decoder, settings: ApplySettings, target: str,
    files: list[str], events: DataFrame, *, run_id: int, now: dt.datetime, staging: str, say: Progress,
    cached: bool = False,
) -> tuple[dict[str, TableSummary], list[Quarantined], dict[str | None, int], Accounts | None]:
    """``cached``: the decoded events ``events`` is made from are in Spark's cache already (a small
    run): then ``events`` (maybe a filter of them) is not cached a second time."""
    blocked = blocked_tables(target)  # a 'fail' data-quality check stops these tables' merges
    fast = None if blocked else fast_path(spark, engine, settings, target, events, run_id=run_id, say=say)
    if fast is not None:
        # every record was a row change of the one table (else the fast path gave up)
        accounts = Accounts(files={f: {"events": n} for f, n in fast.events_by_file.items()},
                            events={(f, fast.table): n for f, n in fast.events_by_file.items()})
        accounts.add_late(fast.table, fast.late_by_file)
        return {fast.table: merge_one(engine, settings, target, fast, run_id=run_id, now=now, say=say)}, [], {}, accounts
    if decoder.rows_in_python() and not cached:
        # decoded by Python record by record: caching them costs less than decoding them again
        # (a first run of 200,000 Debezium messages with schema: 22.7 -> 15-18 s)
        events.persist(StorageLevel.MEMORY_AND_DISK)
    profile, decode_errors, skipped, accounts = profile_events(events)
    if len(profile) > 1 and not cached and not events.is_cached:
        # Several tables read the same events: decode once into Spark's cache. (A single table
        # decoded by Spark is cheaper to decode twice than to cache: caching maps costs more
        # than parsing.)
        events.persist(StorageLevel.MEMORY_AND_DISK)
    summaries: dict[str, TableSummary] = {}
    shapes: dict[str, TableShape] = {}
    for table in sorted(profile):
        path = table_path(target, table)
        if table in blocked:
            summaries[table] = _failed(target, table, profile[table], LakecdcError(blocked[table]), say)
            continue
        try:
            check_table_owner(target, table)  # (never two source tables in one directory)
            done = engine.committed_version(path)
            if done is not None and done >= run_id:
                summaries[table] = TableSummary(table, path, status="skipped", delta_version=engine.version(path))
                continue
            check_basis(engine, target, table, settings.sequence_for(table))
            shapes[table] = history_shape(settings, table, path, table_shape(engine, settings, target, table, profile[table]))
        except MissingKeyError as exc:
            if not profile[table]["columns"] and not engine.exists(path):
                # only truncates of a table not created yet: nothing to empty and nothing to build
                # a table from, so nothing to do (a later run with rows and keys creates it)
                summaries[table] = TableSummary(table, path, events=profile[table]["events"], status="applied")
                continue
            summaries[table] = TableSummary(table, path, events=profile[table]["events"], status="failed", error=str(exc))
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a table whose log cannot be read
            summaries[table] = _failed(target, table, profile[table], exc, say)
    # columns the input declares are kept even when no image of the run holds them
    declared = declared_columns(spark, decoder, shapes, files, staging=staging)
    shapes = {t: with_declared(sh, declared.get(t, {}), settings, t) for t, sh in shapes.items()}
    wanted = {t: sh.new_columns for t, sh in shapes.items() if sh.new_columns}
    inferred = new_column_types(spark, decoder, settings, files, wanted, staging=staging, say=say, declared=declared)
    bad_parts: list[DataFrame] = []
    if decode_errors:
        bad_parts.append(events.where(F.col("_error").isNotNull()).select(*BAD_COLUMNS))

    def prepare(table: str) -> tuple[Prepared | HistoryPrepared, list[DataFrame]]:
        say(f"{table}: consolidating")
        prof, mine, bad_seq, bad_names = profile[table], events, None, None
        if shapes[table].reserved:  # records with a column named like lakecdc's own: quarantined
            mine, bad_names = reserved_records(mine, table, shapes[table].reserved)
        fields = settings.sequence_for(table)
        if fields:
            mine, prof, bad_seq = resequenced(mine, table, fields, shapes[table], inferred.get(table, {}), prof)
        prep_fn = prepare_history if settings.scd_type(table) == 2 else prepare_table
        prep, bad = prep_fn(spark, engine, settings, target, table, prof, shapes[table],  # type: ignore[operator]
                            inferred.get(table, {}), mine)
        return prep, [b for b in (bad_names, bad_seq, bad) if b is not None]

    prepared: list[Prepared | HistoryPrepared] = []
    # the user's configuration, or an abend asked for, stops the run before anything is committed
    for table, outcome in _each_table(list(shapes), prepare, settings.parallel_tables,
                                      fatal=(ConfigError, PrimaryKeyUpdateError)):
        if isinstance(outcome, BaseException):  # one table's failure must not stop the others
            summaries[table] = _failed(target, table, profile[table], outcome, say)
            continue
        prep, bad_here = outcome
        bad_parts += bad_here
        prepared.append(prep)
        accounts.add_late(prep.table, prep.late_by_file)

    def merge(table: str) -> TableSummary:
        prep = next(p for p in prepared if p.table == table)
        return merge_one(engine, settings, target, prep, run_id=run_id, now=now, say=say)

    for table, result in _each_table([p.table for p in prepared], merge, settings.parallel_tables, fatal=(ConfigError,)):
        summaries[table] = _failed(target, table, profile[table], result, say) if isinstance(result, BaseException) else result
    quarantined: list[Quarantined] = []
    if bad_parts:
        say("writing the quarantine")
        bad_all = bad_parts[0]
        for b in bad_parts[1:]:
            bad_all = bad_all.unionByName(b)
        quarantined = write_quarantine(engine, target, collect_bad(bad_all, events), fmt=settings.format,
                                       run_id=run_id, now=now)
    return summaries, quarantined, skipped, accounts


T_ = TypeVar("T_")

#: Tables prepared and merged at once when the caller does not say: per-table work is mostly
#: waiting (Spark job scheduling, Delta log reads, delta-rs merges, which release the GIL), so even
#: 2 cores merge 12 tables 1.7-2x faster 4 at a time (bench/README.md, "Concurrent table merges").
DEFAULT_PARALLEL_TABLES = 4


def _each_table(
    tables: list[str], work: Callable[[str], T_], parallel: int, *, fatal: tuple[type[BaseException], ...],
) -> list[tuple[str, T_ | Exception]]:
    """``work`` on each table, ``parallel`` at a time, as ``(table, result or the exception it
    raised)`` in the tables' order (so summaries and messages do not depend on timing).

    A ``fatal`` exception is raised once the tables already started have finished (those not
    started yet are not started): it stops the run, as it would one table at a time.
    """
    if parallel <= 1 or len(tables) <= 1:
        out: list[tuple[str, T_ | Exception]] = []
        for table in tables:
            try:
                out.append((table, work(table)))
            except fatal:
                raise
            except Exception as exc:  # noqa: BLE001 - reported per table by the caller
                out.append((table, exc))
        return out
    with ThreadPoolExecutor(max_workers=min(parallel, len(tables)), thread_name_prefix="lakecdc-table") as pool:
        futures = [(table, pool.submit(work, table)) for table in tables]
        results: list[tuple[str, T_ | Exception]] = []
        stop: BaseException | None = None
        for table, fut in futures:
            try:
                results.append((table, fut.result()))
            except CancelledError:
                continue
            except fatal as exc:
                if stop is None:
                    stop = exc
                    for _, other in futures:
                        other.cancel()  # (those already running finish)
            except Exception as exc:  # noqa: BLE001 - reported per table by the caller
                results.append((table, exc))
    if stop is not None:
        raise stop
    return results


def _failed(target: str, table: str, prof: dict, exc: BaseException, say: Progress) -> TableSummary:
    """The summary of a table whose merge failed: the run stays unfinished and is resumed by the
    next one, for this table only (the others committed theirs)."""
    reason = explain(exc)
    say(f"{table}: FAILED ({reason}); the other tables go on, this one is retried by the next run")
    return TableSummary(table, table_path(target, table), events=prof["events"], status="failed", error=reason)


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
    sequence_by: Sequence[str] | str | Mapping[str, Sequence[str] | str] | None = None,
    contracts: str | os.PathLike[str] | Mapping[str, Contract] | None = None,
) -> DataFrame:
    """Decode change files into ops-style canonical events (good and bad records alike).

    ``_error`` is NULL for good records and holds the reason for bad ones.

    ``sequence_by`` (as for :func:`apply`) rebuilds ``seq`` from those fields; a column is
    compared by the type the input declares (Avro schemas, ...) or the ``contracts`` give, else as
    text: suffix it ``:int`` or ``:ts`` to compare as a number or a time. An event without a value
    gets an ``_error`` naming the field. (Also a contract's ``lakecdc.sequence_by`` applies.)

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
    decoder = get_decoder(format, options)
    events = decoder.read(spark, files, staging=staging)
    loaded = contracts if isinstance(contracts, Mapping) else load_contracts(contracts)
    default, by_table = per_table_sequence_by(sequence_by)
    by_table = {**{t: c.sequence_by for t, c in loaded.items() if c.sequence_by}, **by_table}
    if not default and not by_table:
        return events
    declared = dict(decoder.column_types(spark, files, staging=staging))
    for table, contract in loaded.items():
        declared[table] = {**declared.get(table, {}), **contract.types}
    tables = sorted(by_table) if not default else sorted(
        r[0] for r in events.where(F.col("table").isNotNull()).select("table").distinct().collect()
    )
    for table in tables:
        fields = by_table.get(table) or default
        types = {c: t for c, t in declared.get(table, {}).items() if t.typeName() != "void"}  # (declared untyped)
        events = resequence(events, table, fields, types).drop("_unordered")
    return events
