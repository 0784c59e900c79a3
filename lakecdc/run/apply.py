"""``apply``: decode new inputs, consolidate per table, MERGE each table exactly once.

The path of one run, top to bottom:

1. **plan**: take the target's lease (one writer at a time, :mod:`lakecdc.lake.lease`), list the
   inputs, leave out those an earlier run applied, check that the ledger and the tables agree
   (:mod:`lakecdc.maintenance.doctor`), write the run manifest (:mod:`lakecdc.lake.ledger`);
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

The settings of a run are one :class:`lakecdc.config.settings.Settings`.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyspark import StorageLevel
from pyspark.sql import functions as F

from lakecdc.changes.columns import sql_string
from lakecdc.changes.sequence import check_basis
from lakecdc.changes.transactions import held_files, record_applied, split_open_transactions, write_held
from lakecdc.check.contracts import load_contracts
from lakecdc.check.quality import blocked_tables
from lakecdc.config import arguments as A
from lakecdc.config.settings import Progress, Settings
from lakecdc.decode import get_decoder
from lakecdc.errors import ConfigError, LakecdcError, MissingKeyError, PrimaryKeyUpdateError
from lakecdc.lake.lease import Lease, hold
from lakecdc.lake.ledger import Ledger, Manifest, Plan, list_inputs, reapply_matcher
from lakecdc.lake.runs import record_run
from lakecdc.lake.state import (
    catalog_routes,
    check_table_owner,
    quarantine_path,
    record_table_paths,
    table_path,
)
from lakecdc.lake.summary import RunSummary, TableSummary, combine_summaries, unreadable, unreadable_message
from lakecdc.maintenance.doctor import verify
from lakecdc.merge.commit import merge_one
from lakecdc.merge.pick import make_engine
from lakecdc.merge.prepare import Batch, HistoryPrepared, Prepared, fast_path, prepare_history, prepare_table
from lakecdc.merge.quarantine import BAD_COLUMNS, Quarantined, collect_bad, write_quarantine
from lakecdc.merge.shape import TableShape, history_shape, table_shape, with_declared
from lakecdc.merge.staged import stage_root
from lakecdc.run.kafka import Kafka, framing_of, land_available
from lakecdc.run.profile import (
    Accounts,
    declared_columns,
    new_column_types,
    profile_events,
    resequenced,
    reserved_records,
)
from lakecdc.run.tables import as_skipped, each_table, failed_table, file_accounts
from lakecdc.spark.conf import job_conf, run_conf
from lakecdc.spark.session import active_spark, get_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.decode.base import Decoder
    from lakecdc.merge.delta_rs import DeltaRsEngine


def apply(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | Kafka,
    target: str | os.PathLike[str],
    *,
    format: str | None = None,
    settings: Settings | None = None,
    spark: SparkSession | None = None,
    progress: Progress | None = None,
    **overrides: Any,
) -> RunSummary:
    """Apply the change files under ``inputs`` to one Delta table per source table under ``target``.

    Only files no earlier run applied to ``target`` are read; a run interrupted by a crash is
    finished first, on exactly its files. Running again with nothing new changes nothing.

    Args:
        inputs: files or directories (read recursively, in a stable order), or Kafka topics
            (:class:`~lakecdc.run.kafka.Kafka`: the records not applied yet are landed as files
            under the target, then applied as files are).
        target: root directory; each source table becomes ``<target>/<table>``.
        format: the files' format, a registered name (``ogg-json``, ``debezium-json``, ...: see
            :data:`lakecdc.decode.DECODERS`); required here or in ``settings`` (none is assumed).
        settings: a :class:`~lakecdc.config.settings.Settings` (built once, reused by many runs);
            default: every setting's default.
        spark: the session to use; default: the active one, else an embedded local one.
        progress: called with a short message at each step (the CLI shows them).
        **overrides: settings by name, over ``settings``'s (``format="debezium-json"``,
            ``keys={"S.ORDERS": ["ID"]}``, ``pk_update="abend"``, ...): every field of
            :class:`~lakecdc.config.settings.Settings`, which says what each one does. A name that
            is not a setting, or a value a setting does not accept, is a :class:`ConfigError`.

    Returns:
        A :class:`~lakecdc.lake.summary.RunSummary`; ``summary.ok`` is False when a table failed
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
        >>> base = lakecdc.Settings(format="debezium-json", keys={"APP.ORDERS": ["ID"]})
        >>> s = lakecdc.apply("landing/", "lake/", settings=base, pk_update="abend")  # doctest: +SKIP
    """
    started = time.perf_counter()
    if not isinstance(inputs, Kafka):
        inputs = A.paths("apply", "inputs", inputs)
    target_s = str(Path(A.path("apply", "target", target)).resolve())
    A.session("apply", spark)
    A.optional_callable("apply", "progress", progress, "each step's message (a str)")
    if format is not None:
        overrides["format"] = format
    settings, decoder = _checked(Settings.build(settings, **overrides), target_s)
    if not isinstance(inputs, Kafka):
        A.must_exist(inputs)  # (before the target is touched)
    say = progress or (lambda _msg: None)
    kafka = inputs if isinstance(inputs, Kafka) else None
    framing = framing_of(decoder) if kafka is not None else ""
    with hold(target_s, command="apply", wait=settings.wait) as lease:  # one writer per target
        if kafka is not None:  # the topics' new records landed as files first (lakecdc.run.kafka)
            spark = spark or get_spark()
            landing = kafka.landing_dir(target_s)
            say(f"landing the new records of Kafka {kafka.describe()} in {landing}")
            land_available(spark, kafka, landing, framing)
            inputs = landing
        assert not isinstance(inputs, Kafka)
        files = list_inputs([inputs] if isinstance(inputs, (str, os.PathLike)) else list(inputs))
        ledger = Ledger(target_s)
        if settings.reapply:
            _forget(ledger, settings.reapply, files, target_s, say)
        plan = ledger.plan(settings.format, files, appendable=decoder.appendable, min_age=settings.min_file_age)
        paths = _table_routes(settings)
        if plan.waiting:
            say(f"{len(plan.waiting)} file(s) changed less than {settings.min_file_age:g}s ago: left for a later run")
        if not (plan.pending or plan.new or paths or spark is not None or settings.engine != "auto"
                or active_spark() is not None):
            # nothing to apply: a scheduled re-run answers without starting a JVM
            say("nothing new to apply")
            return combine_summaries([], target=target_s, fmt=settings.format,
                                     engine="not started (nothing to apply)", seconds=time.perf_counter() - started)
        # (Spark starts once the arguments, the configuration and the inputs are known to be usable:
        # a mistake in them is reported in a second, not after a JVM's start-up)
        spark = spark or get_spark()
        eng = make_engine(settings.engine, spark, settings.storage_options)
        verify(eng, target_s)  # the ledger and the tables agree (else: what is wrong, how to repair)
        if paths:
            record_table_paths(target_s, paths, exists=eng.exists)
        results = [
            _run_recorded(spark, eng, decoder, settings, target_s, manifest, lease, resumed=resumed, say=say)
            for manifest, resumed in _manifests(ledger, lease, plan, settings.format, say)
        ]
        return combine_summaries(results, target=target_s, fmt=settings.format, engine=eng.name,
                                 seconds=time.perf_counter() - started)


def _checked(settings: Settings, target: str) -> tuple[Settings, Decoder]:
    """``settings`` with its contracts loaded, and the decoder of its format (a mistake in either
    is reported before anything else happens)."""
    fmt = settings.required_format()
    decoder = get_decoder(fmt, settings.options)
    decoder.state_dir = str(Path(target) / "_lakecdc" / "decoders" / fmt)
    if not isinstance(settings.contracts, Mapping):
        settings = replace(settings, contracts=load_contracts(settings.contracts))
    if settings.complete_transactions and not decoder.TRANSACTION_MARKERS:
        raise ConfigError(
            f"complete_transactions needs transaction markers (BEGIN/END with event counts), which "
            f"{settings.format} messages do not carry: without them no transaction would ever look complete"
        )
    return settings, decoder


def _forget(ledger: Ledger, reapply: Sequence[str], files: list[str], target: str, say: Progress) -> None:
    """Take the files ``reapply`` chooses out of the ledger, so that this run applies them again."""
    again = ledger.forget(reapply_matcher(reapply))
    missing = [f for f in again if f not in files]
    say(f"re-applying {len(again)} file(s)" + (f" ({len(missing)} of them not among the inputs)" if missing else ""))
    if not again:
        shown = reapply[0] if len(reapply) == 1 else list(reapply)
        raise ConfigError(
            f"reapply {shown!r}: no file applied to {target} matches (give paths or patterns of files "
            f"an earlier run applied)"
        )


def _table_routes(settings: Settings) -> dict[str, str]:
    """Where source tables live other than ``<target>/<table>``: their contracts' paths, then
    ``table_paths``, then ``table_names``."""
    contracts = settings.contracts if isinstance(settings.contracts, Mapping) else {}
    paths = {t: c.target for t, c in contracts.items() if c.target}
    paths.update(settings.table_paths)
    if settings.table_names:
        paths.update(catalog_routes(settings.table_names))
    return paths


def _manifests(ledger: Ledger, lease: Lease, plan: Plan, fmt: str, say: Progress) -> list[tuple[Manifest, bool]]:
    """The runs to do: those an interrupted run left (resumed), then one for the new files."""
    manifests: list[tuple[Manifest, bool]] = [(run, True) for run in plan.pending]
    if plan.new:
        manifest = Manifest(run_id=ledger.next_run_id(), status="planned", format=fmt, inputs=plan.new)
        lease.check()
        ledger.write(manifest, new=True)
        manifests.append((manifest, False))
    if not manifests:
        say("nothing new to apply")
    return manifests


def _run_recorded(
    spark: SparkSession, engine: DeltaRsEngine, decoder: Decoder, settings: Settings, target: str,
    manifest: Manifest, lease: Lease, *, resumed: bool, say: Progress,
) -> RunSummary:
    """One run of ``manifest``'s files, recorded in the run records and the ledger."""
    ledger = Ledger(target)
    lease.note(run_id=manifest.run_id)
    say(f"run {manifest.run_id}: {len(manifest.inputs)} file(s){' (resuming)' if resumed else ''}")
    run_started = dt.datetime.now(dt.timezone.utc)
    result = _run(spark, engine, decoder, settings, target, manifest, resumed=resumed, say=say)
    say(f"run {manifest.run_id}: recording the run")
    record_run(engine, target, result, run_id=manifest.run_id, inputs=[f.path for f in manifest.inputs],
               started=run_started, finished=dt.datetime.now(dt.timezone.utc), files=manifest.inputs)
    if result.ok:
        manifest.status = "committed"
        manifest.finished_at = time.time()
    manifest.summary = result.to_dict()
    lease.check()
    ledger.write(manifest)
    return result


#: A run whose input files hold at most this many bytes keeps its decoded events in Spark's cache
#: from the start: each query of the run (profile, fold, held transactions, quarantine) would
#: decode them again, and for a small batch Spark's per-query work (planning, generated code,
#: Python workers) is most of the time, so decoding once saves about a sixth of a small run. A
#: big single-table batch decodes twice instead: caching maps costs more than parsing them.
SMALL_RUN_BYTES = 64 << 20


@dataclass
class _Outcome:
    """What a run's tables came to, before the run's summary is made of it."""

    summaries: dict[str, TableSummary]
    quarantined: list[Quarantined] = field(default_factory=list)
    skipped: dict[str | None, int] = field(default_factory=dict)
    accounts: Accounts | None = None
    held: dict[str | None, int] = field(default_factory=dict)


def _run(
    spark: SparkSession, engine: DeltaRsEngine, decoder: Decoder, settings: Settings, target: str,
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
        events = _routed(events, settings)
        try:
            batch = _batch(decoder, files if held is None else [*files, "(held)"],
                           stage=stage_root(spark, engine.name, staging, input_bytes))
            out = _run_tables(spark, engine, decoder, settings, target, typed_from, events, run_id=run_id, now=now,
                              staging=staging, say=say, cached=decoded.is_cached, batch=batch)
            if held is not None and all(s.status in ("applied", "skipped") for s in out.summaries.values()):
                _hold_open(engine, settings, target, events, held, run_id, now, out, say)
        finally:
            events.unpersist()
            decoded.unpersist()
            shutil.rmtree(staging, ignore_errors=True)  # (a failed run leaves no staged files either)
    return _summary(engine, settings, target, run_id, len(files), out, resumed=resumed, say=say)


def _batch(decoder: Decoder, files: list[str], *, stage: str | None = None) -> Batch:
    """What the run knows of its batch before reading it (see :class:`~lakecdc.merge.prepare.Batch`):
    whether its format writes whole after images, its one input file, and where its tables stage
    their net actions (a large delta-rs run)."""
    spec = getattr(decoder, "spec", None)
    whole = spec is not None and spec.images.whole == "always"
    return Batch(whole_images=whole, one_file=files[0] if len(files) == 1 else None, stage=stage)


def _routed(events: DataFrame, settings: Settings) -> DataFrame:
    """``events`` with those of tables the run leaves out (``include_tables`` / ``exclude_tables``,
    truncates with ``apply_as_truncates`` off) turned into skipped records."""
    route = route_sql(settings)
    if route is not None:  # tables routed elsewhere: their events become skipped records
        events = as_skipped(events, F.expr(f"NOT (table IS NULL OR {route})"), "excluded table")
        # (a skipped schema change of such a table must not create it either)
        events = events.withColumn("after", F.expr(f"CASE WHEN table IS NULL OR {route} THEN after END"))
    if not settings.apply_as_truncates:  # truncates are read, counted, not applied
        events = as_skipped(events, F.col("op") == "T", "truncate (apply_as_truncates off)")
    return events


def route_sql(settings: Settings) -> str | None:
    """SQL over ``table``: true for a table the run applies; None when it applies every table."""
    if not settings.include_tables and not settings.exclude_tables:
        return None

    def any_of(patterns: tuple[str, ...]) -> str:
        return " OR ".join(f"table RLIKE {sql_string('^' + fnmatch.translate(p))}" for p in patterns)

    inc = f"({any_of(settings.include_tables)})" if settings.include_tables else "true"
    exc = f"NOT ({any_of(settings.exclude_tables)})" if settings.exclude_tables else "true"
    return f"({inc} AND {exc})"


def _hold_open(
    engine: DeltaRsEngine, settings: Settings, target: str, events: DataFrame, held: DataFrame, run_id: int,
    now: dt.datetime, out: _Outcome, say: Progress,
) -> None:
    """Keep the events of transactions not complete yet for a later run; count their markers."""
    say("holding the events of transactions not complete yet")
    out.held, markers = write_held(engine, target, held, run_id)
    record_applied(engine, target, events, run_id, now, settings.default_retention)
    for name, n in markers.items():
        out.skipped[name] = out.skipped.get(name, 0) + n
        kinds = out.accounts.skipped.setdefault(name, {}) if out.accounts is not None else {}
        kinds["transaction marker"] = kinds.get("transaction marker", 0) + n


def _summary(
    engine: DeltaRsEngine, settings: Settings, target: str, run_id: int, files: int, out: _Outcome, *,
    resumed: bool, say: Progress,
) -> RunSummary:
    """The run's summary: each table's counts, each file's accounts; the quarantine told."""
    summaries, skipped = out.summaries, out.skipped
    per_table: dict[str | None, int] = {}
    for q in out.quarantined:
        per_table[q.table] = per_table.get(q.table, 0) + 1
    for name in [*skipped, *out.held, *per_table]:  # (a table whose every record was quarantined too)
        if name is not None and name not in summaries:
            summaries[name] = TableSummary(name, table_path(target, name), status="applied")
    kinds = out.accounts.skipped if out.accounts is not None else {}
    for name, s in list(summaries.items()):
        summaries[name] = replace(s, quarantined=per_table.get(name, 0), skipped=skipped.get(name, 0),
                                  skipped_kinds=dict(kinds.get(name, {})), held=out.held.get(name, 0))
    failed = {name for name, s in summaries.items() if s.status == "failed"}
    accounts = file_accounts(out.accounts, out.quarantined, failed)
    bad_files = tuple(f for f, acc in sorted(accounts.items()) if unreadable(acc))
    if bad_files:
        say(unreadable_message(bad_files, settings.format))
    for q in out.quarantined[:20]:
        say(q.message(settings.format))
    if len(out.quarantined) > 20:
        say(f"... and {len(out.quarantined) - 20} more quarantined record(s) in {quarantine_path(target)}")
    return RunSummary(
        target=target, format=settings.format, runs=(run_id,), files=files,
        tables=tuple(summaries[k] for k in sorted(summaries)), quarantine=quarantine_path(target),
        quarantined_unrouted=per_table.get(None, 0), skipped_unrouted=skipped.get(None, 0),
        skipped_unrouted_kinds=dict(kinds.get(None, {})), file_accounts=accounts, unreadable_files=bad_files,
        engine=engine.name, resumed=resumed,
    )


def _run_tables(
    spark: SparkSession, engine: DeltaRsEngine, decoder: Decoder, settings: Settings, target: str,
    files: list[str], events: DataFrame, *, run_id: int, now: dt.datetime, staging: str, say: Progress,
    cached: bool = False, batch: Batch | None = None,
) -> _Outcome:
    """Profile, prepare and merge every table of ``events``. ``cached``: the decoded events
    ``events`` is made from are in Spark's cache already (a small run): then ``events`` (maybe a
    filter of them) is not cached a second time."""
    blocked = blocked_tables(target)  # a 'fail' data-quality check stops these tables' merges
    batch = batch or Batch()
    fast = None if blocked else fast_path(spark, engine, settings, target, events, run_id=run_id, say=say, batch=batch)
    if fast is not None:
        # every record was a row change of the one table (else the fast path gave up)
        accounts = Accounts(files={f: {"events": n} for f, n in fast.events_by_file.items()},
                            events={(f, fast.table): n for f, n in fast.events_by_file.items()})
        accounts.add_late(fast.table, fast.late_by_file)
        summary = merge_one(engine, settings, target, fast, run_id=run_id, now=now, say=say)
        return _Outcome({fast.table: summary}, accounts=accounts)
    if decoder.rows_in_python() and not cached:
        # decoded by Python record by record: caching them costs less than decoding them again
        # (a first run of 200,000 Debezium messages with schema: 22.7 -> 15-18 s)
        events.persist(StorageLevel.MEMORY_AND_DISK)
    profile, decode_errors, skipped, accounts = profile_events(events)
    settings.check_one_table_keys(profile)
    if len(profile) > 1 and not cached and not events.is_cached:
        # Several tables read the same events: decode once into Spark's cache. (A single table
        # decoded by Spark is cheaper to decode twice than to cache: caching maps costs more
        # than parsing.)
        events.persist(StorageLevel.MEMORY_AND_DISK)
    out = _Outcome({}, skipped=skipped, accounts=accounts)
    shapes = _shapes(engine, settings, target, profile, blocked, run_id, out, say)
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
        args = (spark, engine, settings, target, table, prof, shapes[table], inferred.get(table, {}), mine)
        prepared: tuple[Prepared | HistoryPrepared, DataFrame | None] | None
        if settings.scd_type(table) == 2:
            prepared = prepare_history(*args)
        else:
            prepared = prepare_table(*args, batch=batch)
        if prepared is None:  # (only a speculation gives up)
            raise AssertionError(f"{table}: the fold gave up without a speculation")
        prep, bad = prepared
        return prep, [b for b in (bad_names, bad_seq, bad) if b is not None]

    _prepare_and_merge(engine, settings, target, list(shapes), prepare, profile, bad_parts,
                                  run_id=run_id, now=now, out=out, say=say)
    if bad_parts:
        say("writing the quarantine")
        bad_all = bad_parts[0]
        for b in bad_parts[1:]:
            bad_all = bad_all.unionByName(b)
        out.quarantined = write_quarantine(engine, target, collect_bad(bad_all, events), fmt=settings.format,
                                           run_id=run_id, now=now)
    return out


def _shapes(
    engine: DeltaRsEngine, settings: Settings, target: str, profile: dict[str, dict], blocked: Mapping[str, str],
    run_id: int, out: _Outcome, say: Progress,
) -> dict[str, TableShape]:
    """Each profiled table's columns and keys; the tables that cannot be prepared (blocked by a
    check, merged by this run already, without keys, ...) get their summary in ``out`` instead."""
    shapes: dict[str, TableShape] = {}
    for table in sorted(profile):
        path = table_path(target, table)
        if table in blocked:
            out.summaries[table] = failed_table(target, table, profile[table], LakecdcError(blocked[table]), say)
            continue
        try:
            check_table_owner(target, table)  # (never two source tables in one directory)
            done = engine.committed_version(path)
            if done is not None and done >= run_id:
                out.summaries[table] = TableSummary(table, path, status="skipped", delta_version=engine.version(path))
                continue
            check_basis(engine, target, table, settings.sequence_for(table))
            shapes[table] = history_shape(settings, table, path, table_shape(engine, settings, target, table, profile[table]))
        except MissingKeyError as exc:
            events = profile[table]["events"]
            if not profile[table]["columns"] and not engine.exists(path):
                # only truncates of a table not created yet: nothing to empty and nothing to build
                # a table from, so nothing to do (a later run with rows and keys creates it)
                out.summaries[table] = TableSummary(table, path, events=events, status="applied")
                continue
            out.summaries[table] = TableSummary(table, path, events=events, status="failed", error=str(exc))
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a table whose log cannot be read
            out.summaries[table] = failed_table(target, table, profile[table], exc, say)
    return shapes


def _prepare_and_merge(
    engine: DeltaRsEngine, settings: Settings, target: str, tables: list[str], prepare: Any,
    profile: dict[str, dict], bad_parts: list[DataFrame], *, run_id: int, now: dt.datetime, out: _Outcome,
    say: Progress,
) -> None:
    """Prepare every table (``prepare``), then merge each prepared one, several at a time; their
    summaries go to ``out``, the records that did not fit to ``bad_parts``."""
    prepared: list[Prepared | HistoryPrepared] = []
    # the user's configuration, or an abend asked for, stops the run before anything is committed
    # (and releases what the tables prepared so far hold: cached or staged net actions)
    for table, outcome in each_table(tables, prepare, settings.parallel_tables,
                                     fatal=(ConfigError, PrimaryKeyUpdateError), discard=lambda o: _release(o[0])):
        if isinstance(outcome, BaseException):  # one table's failure must not stop the others
            out.summaries[table] = failed_table(target, table, profile[table], outcome, say)
            continue
        prep, bad_here = outcome
        bad_parts += bad_here
        prepared.append(prep)
        assert out.accounts is not None
        out.accounts.add_late(prep.table, prep.late_by_file)

    def merge(table: str) -> TableSummary:
        prep = next(p for p in prepared if p.table == table)
        return merge_one(engine, settings, target, prep, run_id=run_id, now=now, say=say)

    try:
        for table, result in each_table([p.table for p in prepared], merge, settings.parallel_tables,
                                        fatal=(ConfigError,)):
            out.summaries[table] = (failed_table(target, table, profile[table], result, say)
                                    if isinstance(result, BaseException) else result)
    finally:
        for prep in prepared:  # (merge_one released those it merged; a fatal error skips the rest)
            _release(prep)


def _release(prep: Prepared | HistoryPrepared) -> None:
    if isinstance(prep, Prepared):
        prep.net.release()
