"""The ``lakecdc`` command line: thin parsing over the Python API, a summary at the end."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lakecdc.check.contracts import check_contract, infer_contract, load_contracts
from lakecdc.check.quality import check_changes, check_tables, data_docs_index, results_json, unblock
from lakecdc.config.durations import parse_duration, parse_size
from lakecdc.decode import DECODERS
from lakecdc.errors import ConfigError, LakecdcError
from lakecdc.decode.goldengate.properties import read_gg_properties
from lakecdc.jobs import Job, JobResult, load_job, run_job, stream_job, watch
from lakecdc.maintenance.doctor import diagnose, render, repair, to_json
from lakecdc.maintenance.maintain import maintain
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.run.apply import apply, read_changes
from lakecdc.run.infer import infer_contracts_from_changes
from lakecdc.run.lease import current_holder, hold
from lakecdc.run.runs import render_status, status
from lakecdc.run.state import known_tables, table_dir, table_path
from lakecdc.spark.session import get_spark
from lakecdc.streaming import BatchFailed, StreamBatch, stream

_EPILOG_APPLY = """\
examples:
  # GoldenGate JSON files under landing/ into one Delta table per source table under lake/
  lakecdc apply --format ogg-json --input landing/ --target lake/ --summary-json run.json

  # messages without primary_keys: name the key columns per table
  lakecdc apply --format ogg-json --input landing/ --target lake/ \\
      --key QASOURCE.TCUSTORD=CUST_CODE,ORDER_DATE,PRODUCT_CODE,ORDER_ID

  # the replicat wrote flattened JSON with renamed images
  lakecdc apply --format ogg-json --input landing/ --target lake/ \\
      --option flatten=true --option beforeObjectName=old --option afterObjectName=new

  # read the replicat's own properties file: its handler's format and format.* settings
  lakecdc apply --gg-properties dirprm/hdfs.properties --input landing/ --target lake/

  # keep only some columns of a table, never apply truncates, keep tombstones 30 days
  lakecdc apply --format ogg-json --input landing/ --target lake/ \
      --column-list S.ORDERS=ID,STATUS,AMOUNT --ignore-truncates --tombstone-retention 30d

  # keep S.ORDERS as an SCD type 2 history table (only STATUS changes open a new version),
  # with Delta's Change Data Feed on for downstream readers
  lakecdc apply --format ogg-json --input landing/ --target lake/ \
      --scd2 S.ORDERS --track-history S.ORDERS=STATUS --change-data-feed

what happens:
  Only files no earlier run applied to --target are read; running the same command again
  changes nothing. Events are ordered by (op_ts, pos), folded to one net change per key and
  MERGEd in one commit per table. Columns missing from an image never overwrite the table.
  Records that cannot be applied go to <target>/_quarantine with file, line, raw text and
  reason; the rest applies. The summary counts every record: applied, duplicate/late, skipped
  with its kind (tombstone, heartbeat, transaction marker, ddl, comment, ...) or quarantined,
  and per file in --summary-json (file_accounts). Exit status: 0 when every table applied, 1
  when a table failed (the others were applied) or when a file gave no row change and at least
  half of its records were quarantined (the wrong --format?); 2 for bad arguments or a run that
  committed nothing. Such files are recorded as applied: --reapply FILE_OR_GLOB reads them again.

ogg-json options (GoldenGate property names, without gg.handler.<name>.format.):
  insertOpKey=I updateOpKey=U deleteOpKey=D truncateOpKey=T beforeObjectName=before
  afterObjectName=after flatten=false flattenDelimiter=. treatAllColumnsAsStrings=false
  (values may be wrapped as CDATA[...])

other formats: ogg-avro-op / ogg-avro-row (schemaDirectory=DIR, framing=length-prefixed|delimited|single,
  wrapMessageInGenericAvroMessage=true, lineDelimiter=...), ogg-xml (insertOpKey=..., encoding=...),
  ogg-delimited / ogg-json-row (includeColumnNames=true, fieldDelimiter=..., pkUpdateHandling=...),
  debezium-json (sequenceBy=op_ts|source.scn,..., tableName=db.schema.table, topic.prefix=...,
  unavailable.value.placeholder=...), canal-json (sequenceBy=id, layout=dts-before-2022-03-20,
  treatAllColumnsAsStrings=true), shareplex-json (keysFromKeyObject=true), dts-avro
  (framing=length-prefixed|single|kcat|kcat-K keySeparator=^, sequenceBy=position,
  dateTimeFraction=micros|nanos),
  qlik-json / qlik-avro (metadataDirectory=DIR, topicTables=TOPIC=SCHEMA.TABLE,..., table=S.T):
  see the README's "Formats" section for every option

more:
  --complete-transactions   Debezium: apply whole source transactions only (hold the rest)
  --contract data_contracts ODCS contracts: keys and column types
  lakecdc stream (new files as they land), lakecdc run jobs/x.yaml, lakecdc maintain, lakecdc status,
  lakecdc check, lakecdc contract
"""


_EPILOG_STREAM = """\
examples:
  # apply what landed since the last time, then exit (cron, a scheduled Databricks job)
  lakecdc stream --format ogg-json --input landing/ --target lake/ --summary-json run.json

  # keep running: a micro-batch every 30 seconds, at most 500 files each, until Ctrl-C
  lakecdc stream --format debezium-json --input landing/ --target lake/ --trigger "30 seconds" \\
      --max-files-per-trigger 500 --glob '*.json' --key APP.ORDERS=ID

what happens:
  A Spark file stream lists new files under --input (names starting with . or _ are ignored; the
  contents are read by the decoder, not by the stream). Each micro-batch calls the same apply as
  'lakecdc apply' on exactly its files and prints its summary. Spark's checkpoint remembers the
  batches, lakecdc's ledger the files applied: a replayed batch or a lost checkpoint applies nothing
  twice. A batch in which a table failed stops the stream (exit 1) before it is committed; fix the
  cause and run the same command: it resumes that batch. Write files into --input whole (write
  elsewhere or under a .name, then rename).

apply, run or stream:
  lakecdc apply     given files or directories, once (scripts, backfills, tests)
  lakecdc run       a job file: several sources, table routing, maintenance; --watch polls
  lakecdc stream    a landing directory as a Structured Streaming query: each batch hands apply
                    only its new files; available-now for schedulers, an interval to keep
                    running (also 'lakecdc run JOB.yaml --stream')
"""


_EPILOG_MAINTAIN = """\
examples:
  # every table under lake/: bin-pack small files, vacuum files older than 7 days, checkpoint
  lakecdc maintain --target lake/

  # cluster one table by its key columns (MERGE key-range pruning then skips most files)
  lakecdc maintain --target lake/ --table QASOURCE.TCUSTORD --zorder keys --target-file-size 128MB

what happens:
  Compaction and Z-order rewrite files, never rows: every table reads the same before and after.
  Vacuum deletes only files that no version younger than --vacuum-retention reads, so a reader
  that started on an older version (or a time-travel query) within the retention keeps working;
  a retention below the table's minimum (7 days by default) needs --force.
"""


def _parse_keys(values: Sequence[str], flag: str = "--key") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for v in values:
        table, sep, cols = v.partition("=")
        if not sep or not table or not cols:
            raise ConfigError(f"{flag} {v!r}: expected TABLE=COL[,COL...]")
        out[table] = [c.strip() for c in cols.split(",") if c.strip()]
    return out


def _parse_options(values: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for v in values:
        name, sep, value = v.partition("=")
        if not sep or not name:
            raise SystemExit(f"lakecdc: --option {v!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out


def _read_config(path: str | None) -> dict:
    if not path:
        return {}
    import yaml

    with open(path) as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise SystemExit(f"lakecdc: --config {path}: expected a mapping at the top level")
    return data


def _add_format_flags(p: argparse.ArgumentParser) -> None:
    """--format and the GoldenGate properties file it may come from (apply, stream)."""
    p.add_argument("--format", choices=sorted(DECODERS), help="input format (or from --gg-properties / --config)")
    p.add_argument("--gg-properties", metavar="FILE",
                   help="a GoldenGate Java adapter properties file: its handler's format and every "
                        "gg.handler.<name>.format.* property (--option overrides one)")
    p.add_argument("--gg-handler", metavar="NAME", help="which handler of --gg-properties (default: the only one)")


def _add_settings_flags(p: argparse.ArgumentParser) -> None:
    """The apply settings, shared by apply and stream (the same names as lakecdc.apply's arguments)."""
    p.add_argument("--key", action="append", default=[], metavar="TABLE=COL[,COL...]",
                   help="primary key of a table whose messages carry none; repeatable")
    p.add_argument("--pk-update", choices=["abend", "update", "delete-insert"], default=None,
                   help="primary-key updates: delete-insert (default), update, or abend")
    p.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                   help="format option (GoldenGate property name for GoldenGate formats); repeatable")
    p.add_argument("--column-list", action="append", default=[], metavar="TABLE=COL[,COL...]",
                   help="write only these columns of TABLE (keys always); DLT's column_list; repeatable")
    p.add_argument("--except-column-list", action="append", default=[], metavar="TABLE=COL[,COL...]",
                   help="never write these columns of TABLE; DLT's except_column_list; repeatable")
    p.add_argument("--ignore-truncates", action="store_true",
                   help="read truncates but do not apply them (DLT's apply_as_truncates=False)")
    p.add_argument("--complete-transactions", action="store_true",
                   help="apply a source transaction only when all its events are there; hold the rest "
                        "for the next run (formats with transaction markers: Debezium)")
    p.add_argument("--tombstone-retention", metavar="DURATION", default=None,
                   help="how long a deleted key blocks late events: 7d (default), 36h, 90m, 0")
    p.add_argument("--scd2", action="append", default=[], metavar="TABLE[,TABLE...]",
                   help="keep these tables as SCD type 2 history tables (every version, __START_AT/__END_AT) "
                        "instead of their current state; patterns such as 'S.*' or '*' work; repeatable")
    p.add_argument("--track-history", action="append", default=[], metavar="[TABLE=]COL[,COL...]",
                   help="history tables: only changes to these columns open a new version (others update the "
                        "current version in place); DLT's track_history_column_list; repeatable")
    p.add_argument("--track-history-except", action="append", default=[], metavar="[TABLE=]COL[,COL...]",
                   help="history tables: changes to these columns never open a new version; "
                        "DLT's track_history_except_column_list; repeatable")
    p.add_argument("--change-data-feed", nargs="?", const="*", default=None, metavar="TABLE[,TABLE...]",
                   help="enable Delta's Change Data Feed on every table (or on these tables)")
    p.add_argument("--sequence-by", action="append", default=[], metavar="[TABLE=]FIELD[,FIELD...]",
                   help="order changes by these fields instead of the format's seq (DLT's sequence_by): op_ts, pos, "
                        "source.<name> or a column (the after image's value; a delete's before image), compared by "
                        "the column's type, or as :int / :ts / :str (source.scn:int); the format's seq breaks ties; "
                        "an event without a value is quarantined. Without TABLE= for every table; repeatable. A table "
                        "keeps the sequence_by it was built with")
    p.add_argument("--parallel-tables", type=int, default=None, metavar="N",
                   help="prepare and merge up to N tables at once (default 4; 1: one after the other)")
    p.add_argument("--contract", metavar="PATH",
                   help="ODCS data contract(s): a YAML file or a directory of them (keys and column types)")
    p.add_argument("--config", metavar="FILE",
                   help="YAML with any of: format, keys {table: [cols]}, pk_update, options {name: value}, "
                        "column_list / except_column_list {table: [cols]}, apply_as_truncates, tombstone_retention, "
                        "complete_transactions, stored_as_scd_type (2 or {table: 2}), track_history_column_list / "
                        "track_history_except_column_list {table: [cols]}, change_data_feed (true or [tables]), "
                        "sequence_by ([fields] or {table: [fields]}), parallel_tables")
    p.add_argument("--engine", choices=["auto", "delta-rs", "delta-spark"], default="auto",
                   help="Delta engine (auto: delta-spark in a session with Delta Lake that lakecdc did not start, "
                        "else delta-rs; LAKECDC_ENGINE sets it too)")
    p.add_argument("--table-name", action="append", default=[], metavar="TABLE=CATALOG_TABLE[@LOCATION]",
                   help="keep source TABLE as a table of the Spark catalog (delta-spark engine): "
                        "SRC.ORDERS=main.sales.orders, or ...=main.sales.orders@s3://bucket/orders for an "
                        "external table; repeatable")
    p.add_argument("--catalog-schema", metavar="CATALOG.SCHEMA",
                   help="keep every source table without a --table-name in this catalog schema "
                        "(SRC.ORDERS -> CATALOG.SCHEMA.src_orders; delta-spark engine)")
    _add_wait_flag(p)


def _add_wait_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                   help="one writer per target at a time: wait up to SECONDS for another run, stream batch, "
                        "maintain or check on --target to finish (default: stop at once with 'target ... is busy')")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakecdc",
        description="Apply CDC change streams (GoldenGate, Debezium, DTS, Qlik) to Delta Lake tables exactly once.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ap = sub.add_parser(
        "apply", help="apply change files to Delta tables", epilog=_EPILOG_APPLY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Decode change files, consolidate them per primary key and MERGE them into one Delta table per source table.",
    )
    _add_format_flags(ap)
    ap.add_argument("--input", action="append", required=True, metavar="PATH",
                    help="file or directory (recursive); repeatable")
    ap.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    _add_settings_flags(ap)
    ap.add_argument("--min-file-age", metavar="SECONDS", type=float, default=None,
                    help="leave files changed less than SECONDS ago for a later run (a writer may still be "
                         "at work); files of line formats that grow later have their new lines applied then")
    ap.add_argument("--reapply", action="append", default=[], metavar="FILE_OR_GLOB",
                    help="read again files an earlier run applied (a path, or a pattern on the path or the "
                         "file name): e.g. files read with the wrong --format; repeatable")
    ap.add_argument("--summary-json", metavar="FILE", help="also write the run summary as JSON")
    ap.add_argument("--quiet", action="store_true", help="print only the summary")

    tp = sub.add_parser(
        "stream", help="apply files as they land: a Spark Structured Streaming query", epilog=_EPILOG_STREAM,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Watch a landing directory with a Spark Structured Streaming query; each micro-batch applies "
                    "its new files exactly as 'lakecdc apply' does (one ledger, one summary per batch).",
    )
    _add_format_flags(tp)
    tp.add_argument("--input", required=True, metavar="DIR", help="the landing directory (recursive)")
    tp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    tp.add_argument("--checkpoint", metavar="DIR",
                    help="Spark's checkpoint, one per landing directory (default <target>/_lakecdc/stream-checkpoint)")
    tp.add_argument("--trigger", default="available-now", metavar="available-now|once|INTERVAL",
                    help="available-now (default): the files there now, then exit; once: the same in one batch; "
                         "an interval such as '30 seconds' or 5m: a batch every interval until stopped (Ctrl-C)")
    tp.add_argument("--max-files-per-trigger", type=int, metavar="N",
                    help="at most N files per batch (default: every new file in one batch)")
    tp.add_argument("--glob", metavar="PATTERN", help="only file names matching PATTERN, e.g. '*.json'")
    _add_settings_flags(tp)
    tp.add_argument("--summary-json", metavar="FILE",
                    help="also write the summary of everything applied so far as JSON (rewritten after each batch)")
    tp.add_argument("--quiet", action="store_true", help="print only the summaries")

    mp = sub.add_parser(
        "maintain", help="compact / Z-order, vacuum and checkpoint the tables of a target",
        epilog=_EPILOG_MAINTAIN, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Keep the Delta tables under a target fast: bin-pack small files (or Z-order them), "
                    "expire old tombstones, vacuum files older than the retention, write a checkpoint.",
    )
    mp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables (as given to apply)")
    mp.add_argument("--table", action="append", default=[], metavar="SOURCE_TABLE",
                    help="maintain only this source table; repeatable (default: every table)")
    mp.add_argument("--zorder", metavar="keys|COL[,COL...]",
                    help="Z-order by each table's keys ('keys') or by these columns, instead of plain compaction")
    mp.add_argument("--target-file-size", metavar="SIZE", help="file size after compaction, e.g. 128MB")
    mp.add_argument("--no-compact", action="store_true", help="skip compaction (vacuum and checkpoint only)")
    mp.add_argument("--vacuum-retention", metavar="DURATION", default="7d",
                    help="history vacuum keeps (default 7d, Delta's own default); 'none' skips vacuum")
    mp.add_argument("--force", action="store_true",
                    help="allow a vacuum retention below the table's minimum (breaks older readers and time travel)")
    mp.add_argument("--no-checkpoint", action="store_true", help="do not write a checkpoint")
    mp.add_argument("--tombstone-retention", metavar="DURATION", default="7d",
                    help="deleted keys older than this stop blocking late events (default 7d)")
    mp.add_argument("--summary-json", metavar="FILE", help="also write the report as JSON")
    _add_wait_flag(mp)
    mp.add_argument("--quiet", action="store_true", help="print only the report")

    rp = sub.add_parser(
        "run", help="run a job file (jobs/<name>.yaml): apply its sources, maintain when due",
        description="Run a declarative job: every source applied into the target (only new files), table "
                    "routing and settings from the file, maintenance when its policy says. See lakecdc/jobs.py "
                    "or the README for the file's keys; mistakes are reported with their line.",
        epilog="examples:\n  lakecdc run jobs/sample.yaml\n  lakecdc run jobs/sample.yaml --watch --interval 5m\n"
               "  lakecdc run jobs/sample.yaml --stream --trigger '30 seconds'\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("job", metavar="JOB.yaml", help="the job file")
    rp.add_argument("--watch", action="store_true", help="keep running: once every --interval until stopped")
    rp.add_argument("--stream", action="store_true",
                    help="run each source as a Structured Streaming query over its landing directory "
                         "(see 'lakecdc stream --help'; the job's stream: settings)")
    rp.add_argument("--trigger", metavar="available-now|once|INTERVAL",
                    help="with --stream: overrides the job's stream.trigger (default available-now)")
    rp.add_argument("--interval", metavar="DURATION", default="60s", help="time between runs with --watch (default 60s)")
    rp.add_argument("--max-runs", type=int, metavar="N", help="with --watch: stop after N runs")
    rp.add_argument("--parallel-tables", type=int, metavar="N",
                    help="prepare and merge up to N tables at once (over the job's parallel_tables)")
    rp.add_argument("--summary-json", metavar="FILE", help="also write the last run's summary as JSON")
    rp.add_argument("--quiet", action="store_true", help="print only the summary")
    rp.add_argument("--wait", type=float, default=None, metavar="SECONDS",
                    help="wait up to SECONDS for another writer of the job's target to finish (the job's runs and "
                         "maintenance then hold the target's lease together). Not with --watch (a run that meets a "
                         "busy target is reported and tried again at the next interval) or --stream")

    cp = sub.add_parser(
        "contract", help="draft (infer) or check ODCS data contracts against the Delta tables",
        description="infer: write an ODCS v3 contract per table from the Delta tables under --target, or "
                    "from a sample of change messages (--changes PATH --format F: decoded, typed and keyed "
                    "as apply would, into a scratch table; nothing is written under any target). "
                    "check: compare each table with its contract (missing, extra, retyped columns, keys).",
    )
    cp.add_argument("action", choices=["infer", "check"])
    cp.add_argument("--target", metavar="DIR", help="root of the Delta tables (infer: or --changes)")
    cp.add_argument("--changes", action="append", default=[], metavar="PATH",
                    help="infer: draft from these change files or directories instead; repeatable")
    cp.add_argument("--format", choices=sorted(DECODERS), help="infer --changes: their format")
    cp.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="infer --changes: a format option; repeatable")
    cp.add_argument("--key", action="append", default=[], metavar="TABLE=COL[,COL...]",
                    help="infer --changes: key columns of a table whose messages carry none; repeatable")
    cp.add_argument("--table", action="append", default=[], metavar="SOURCE_TABLE", help="only this table; repeatable")
    cp.add_argument("--contract", metavar="PATH", help="check: the contract file or directory")
    cp.add_argument("--out", metavar="DIR", help="infer: write <table>.yaml files here (default: print)")

    kp = sub.add_parser(
        "check", help="data quality: Great Expectations suites from the data contracts",
        description="Validate every table that has a data contract (keys not null and unique, declared "
                    "columns present, required columns not null, accepted values and ranges, the "
                    "contract's quality rules, schema drift, row-count reconciliation with the last run) "
                    "and, with --changes, an incoming change stream. Results are kept in "
                    "<target>/_lakecdc_checks and as Great Expectations Data Docs "
                    "(<target>/_lakecdc/data_docs/index.html). A table whose 'fail' check failed is "
                    "blocked: its next merge waits until a check passes or --unblock accepts it. "
                    "Exit 1 when a 'fail' check failed.",
    )
    kp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    kp.add_argument("--contract", metavar="PATH", help="the data contract file or directory (required to check)")
    kp.add_argument("--unblock", action="append", default=[], metavar="SOURCE_TABLE",
                    help="accept this blocked table as it is (its next merge runs); checks nothing; repeatable")
    kp.add_argument("--no-data-docs", action="store_true", help="do not update the Data Docs (faster)")
    kp.add_argument("--table", action="append", default=[], metavar="SOURCE_TABLE", help="only this table; repeatable")
    kp.add_argument("--changes", metavar="PATH", help="also check the change files under PATH (with --format)")
    kp.add_argument("--format", choices=sorted(DECODERS), default="ogg-json", help="format of --changes")
    kp.add_argument("--json", action="store_true", help="print the results as JSON")
    _add_wait_flag(kp)

    dp = sub.add_parser(
        "doctor", help="check that a target's ledger and tables agree (a lost _lakecdc/, deleted Delta commits)",
        description="Compare the ledger (<target>/_lakecdc/runs) with the tables' own commits: a ledger missing, "
                    "behind the tables or with runs missing, a table whose Delta version is behind what a run "
                    "left it at (deleted _delta_log commits) or that is gone. Every run checks the same before "
                    "it applies anything. Exit 1 when something is wrong; 'lakecdc repair' mends it.",
    )
    dp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    dp.add_argument("--json", action="store_true", help="print the problems as JSON")

    xp = sub.add_parser(
        "repair", help="rebuild a lost ledger from the tables' commits and the run reports",
        description="Rebuild the ledger (<target>/_lakecdc/runs) when it is missing or behind the tables: from the "
                    "run reports (<target>/_lakecdc_runs: each run's inputs and tables) and the tables' transaction "
                    "versions. With --reapply, the runs whose commits a table lost are marked unfinished: the next "
                    "'lakecdc apply' applies their inputs again, to that table only. Holds the target's lease.",
    )
    xp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    xp.add_argument("--reapply", action="store_true",
                    help="mark the runs a table lost (deleted commits, a table gone) unfinished, to apply them again")
    _add_wait_flag(xp)

    sp = sub.add_parser(
        "status", help="last run and lag per table of a target",
        description="Per table: the last run, its status and finish time, the newest source commit time "
                    "applied and the lag behind it, runs and events so far (from <target>/_lakecdc_runs, "
                    "a Delta table you can also query).",
    )
    sp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables (as given to apply)")
    sp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def _apply_settings(args: argparse.Namespace) -> tuple[str, dict]:
    """The format and lakecdc.apply's keyword arguments from the shared flags and --config."""
    config = _read_config(args.config)
    keys = {**{t: list(c) for t, c in (config.get("keys") or {}).items()}, **_parse_keys(args.key)}
    fmt = args.format
    gg_options: dict[str, str] = {}
    if args.gg_properties:
        gg_format, gg_options = read_gg_properties(args.gg_properties, args.gg_handler)
        if fmt and fmt != gg_format:
            raise ConfigError(f"--format {fmt} contradicts {args.gg_properties}, whose handler writes {gg_format}")
        fmt = gg_format
    fmt = fmt or config.get("format")
    if not fmt:
        raise ConfigError("say which format the files are in: --format NAME, or --gg-properties FILE")
    options = {**gg_options, **{str(k): str(v) for k, v in (config.get("options") or {}).items()},
               **_parse_options(args.option)}
    pk_update = args.pk_update or config.get("pk_update") or "delete-insert"
    column_list = {**{t: list(c) for t, c in (config.get("column_list") or {}).items()}, **_parse_keys(args.column_list, "--column-list")}
    except_list = {**{t: list(c) for t, c in (config.get("except_column_list") or {}).items()},
                   **_parse_keys(args.except_column_list, "--except-column-list")}
    truncates = not args.ignore_truncates and bool(config.get("apply_as_truncates", True))
    retention = parse_duration(args.tombstone_retention or str(config.get("tombstone_retention", "7d")))
    history = _history_flags(args, config)
    sequence_by = _sequence_flags(args.sequence_by, config.get("sequence_by"))
    parallel = args.parallel_tables if args.parallel_tables is not None else config.get("parallel_tables")
    # --min-file-age is apply's only: a stream takes each file once, when it is listed
    min_age = getattr(args, "min_file_age", None)
    return fmt, dict(
        keys=keys, pk_update=pk_update, options=options, engine=args.engine, column_list=column_list,
        except_column_list=except_list, apply_as_truncates=truncates, tombstone_retention=retention,
        complete_transactions=args.complete_transactions or bool(config.get("complete_transactions", False)),
        contracts=args.contract or config.get("contracts"),
        min_file_age=min_age if min_age is not None else float(config.get("min_file_age", 0)),
        sequence_by=sequence_by, parallel_tables=parallel, wait=args.wait,
        table_names=_table_names(args.table_name, args.catalog_schema, config.get("table_names")),
        **history,
    )


def _table_names(pairs: list[str], schema: str | None, configured: Any) -> Any:
    """``--table-name TABLE=NAME[@LOCATION]`` and ``--catalog-schema`` (over --config's
    ``table_names``) as lakecdc.apply's ``table_names``."""
    if schema and not pairs and not configured:
        return schema
    out: dict[str, Any] = dict(configured) if isinstance(configured, dict) else {}
    for pair in pairs:
        table, sep, name = pair.partition("=")
        if not sep or not table.strip() or not name.strip():
            raise ConfigError(f"--table-name {pair!r}: expected TABLE=CATALOG_TABLE (or TABLE=CATALOG_TABLE@LOCATION)")
        catalog_table, at, location = name.partition("@")
        out[table.strip()] = (catalog_table.strip(), location.strip()) if at else catalog_table.strip()
    if schema or isinstance(configured, str):
        if out:
            raise ConfigError("--catalog-schema and --table-name: give one of them (per-table names, or one schema)")
        return schema or configured
    return out or None


def _sequence_flags(values: list[str], configured: Any) -> Any:
    """``--sequence-by [TABLE=]FIELD,...`` (over --config's ``sequence_by``) as lakecdc.apply's
    ``sequence_by``: a list of fields, or ``{table: fields}`` with ``"*"`` for every table."""
    out: dict[str, Any] = {}
    if isinstance(configured, dict):
        out.update({str(t): v for t, v in configured.items()})
    elif configured:
        out["*"] = configured
    for v in values:
        table, sep, fields = v.partition("=")
        if not sep:
            table, fields = "*", v
        if not table.strip() or not [f for f in fields.split(",") if f.strip()]:
            raise ConfigError(f"--sequence-by {v!r}: expected [TABLE=]FIELD[,FIELD...], e.g. S.ORDERS=UPDATED_AT")
        out[table.strip()] = fields
    if not out:
        return None
    return out["*"] if list(out) == ["*"] else out


def _history_flags(args: argparse.Namespace, config: dict) -> dict:
    """``--scd2``, ``--track-history[-except]``, ``--change-data-feed`` (over --config's keys) as
    lakecdc.apply's ``stored_as_scd_type``, ``track_history_*`` and ``change_data_feed``."""
    scd = config.get("stored_as_scd_type", 1)
    scd = dict(scd) if isinstance(scd, dict) else ({"*": int(scd)} if scd != 1 else {})
    scd.update({t.strip(): 2 for v in args.scd2 for t in v.split(",") if t.strip()})

    def columns(values: list[str], key: str, flag: str) -> dict[str, list[str]]:
        raw = config.get(key) or {}
        out = {t: list(c) for t, c in raw.items()} if isinstance(raw, dict) else {"*": list(raw)}
        for v in values:
            table, sep, cols = v.rpartition("=")
            if not [c for c in cols.split(",") if c.strip()]:
                raise ConfigError(f"{flag} {v!r}: expected [TABLE=]COL[,COL...]")
            out[table if sep else "*"] = [c.strip() for c in cols.split(",") if c.strip()]
        return out

    cdf = config.get("change_data_feed", False)
    if args.change_data_feed is not None:
        cdf = [t.strip() for t in args.change_data_feed.split(",") if t.strip()]
    return dict(
        stored_as_scd_type=scd,
        track_history_column_list=columns(args.track_history, "track_history_column_list", "--track-history") or None,
        track_history_except_column_list=columns(
            args.track_history_except, "track_history_except_column_list", "--track-history-except") or None,
        change_data_feed=cdf,
    )


def _apply(args: argparse.Namespace) -> int:
    fmt, settings = _apply_settings(args)
    started = time.perf_counter()

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    summary = apply(args.input, args.target, format=fmt, progress=say, reapply=args.reapply, **settings)
    print(summary.render())
    if args.summary_json:
        Path(args.summary_json).write_text(summary.to_json() + "\n")
    return 0 if summary.ok and not summary.unreadable_files else 1


def _stream(args: argparse.Namespace) -> int:
    from pyspark.errors import StreamingQueryException


    fmt, settings = _apply_settings(args)
    started = time.perf_counter()

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def on_batch(batch: StreamBatch) -> None:
        print(f"batch {batch.batch_id}: {len(batch.files)} file(s)\n{batch.summary.render()}\n", flush=True)
        if args.summary_json:
            Path(args.summary_json).write_text(batch.total.to_json() + "\n")

    handle = stream(
        args.input, args.target, format=fmt, checkpoint=args.checkpoint, trigger=args.trigger,
        max_files_per_trigger=args.max_files_per_trigger, path_glob_filter=args.glob, progress=say,
        on_batch=on_batch, **settings,
    )
    try:
        handle.await_termination()
    except KeyboardInterrupt:
        say("stopping")
        handle.stop()
    except BatchFailed as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 1
    except StreamingQueryException as exc:
        print(f"lakecdc: error: the stream stopped: {exc}", file=sys.stderr)
        return 2
    if handle.batches != 1:
        print(("total:\n" if handle.batches else "") + handle.total.render())
    if args.summary_json and not handle.batches:
        Path(args.summary_json).write_text(handle.total.to_json() + "\n")
    return 1 if handle.total.unreadable_files else 0


def _maintain(args: argparse.Namespace) -> int:
    import json

    zorder: str | list[str] | None = None
    if args.zorder:
        zorder = "keys" if args.zorder == "keys" else [c.strip() for c in args.zorder.split(",") if c.strip()]
    started = time.perf_counter()

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    reports = maintain(
        args.target, tables=args.table or None, compact=not args.no_compact, zorder=zorder,
        target_file_size=parse_size(args.target_file_size) if args.target_file_size else None,
        vacuum_retention=None if args.vacuum_retention.lower() == "none" else parse_duration(args.vacuum_retention),
        force=args.force, checkpoint=not args.no_checkpoint,
        tombstone_retention=parse_duration(args.tombstone_retention), progress=say, wait=args.wait,
    )
    for r in reports:
        print(r.line())
    if not reports:
        print(f"no tables under {args.target}")
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps({"tables": [r.to_dict() for r in reports]}, indent=2) + "\n")
    return 0


def _run_job(args: argparse.Namespace) -> int:
    import json


    job = load_job(args.job)
    if args.parallel_tables is not None:
        import dataclasses

        job = dataclasses.replace(job, parallel_tables=args.parallel_tables)
    started = time.perf_counter()

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    def report(result) -> None:  # type: ignore[no-untyped-def]
        print(result.render(), flush=True)
        if args.summary_json:
            Path(args.summary_json).write_text(json.dumps({
                "job": result.job, "ok": result.ok, "runs": [s.to_dict() for s in result.summaries],
                "maintenance": [r.to_dict() for r in result.maintained],
            }, indent=2, default=str) + "\n")

    if args.wait is not None and (args.watch or args.stream):
        raise ConfigError("--wait goes with a single run (lakecdc run JOB.yaml --wait SECONDS), not --watch or --stream")
    if args.stream:
        return _stream_job(args, job, say, report)
    if args.trigger:
        raise ConfigError("--trigger goes with --stream")
    if args.watch:
        interval = parse_duration(args.interval).total_seconds()
        try:
            failures = watch(job, interval=interval, max_runs=args.max_runs, progress=say, report=report)
        except KeyboardInterrupt:
            return 0
        return 1 if failures else 0
    with hold(job.target, command="run", wait=args.wait):  # the job's apply and maintain share it
        result = run_job(job, progress=say)
    report(result)
    return 0 if result.ok else 1


def _stream_job(args: argparse.Namespace, job: Job, say: Callable[[str], None], report: Callable[[JobResult], None]) -> int:
    if args.watch:
        raise ConfigError("--watch and --stream are two ways of keeping a job running: give one")
    try:
        result = stream_job(job, trigger=args.trigger, progress=say, report=report)
    except KeyboardInterrupt:
        return 0
    except BatchFailed as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 1
    if not any(s.runs for s in result.summaries):
        print(result.render())
    return 0


def _contract(args: argparse.Namespace) -> int:


    if args.changes:
        if args.action != "infer" or not args.format:
            raise ConfigError("--changes drafts contracts: use it with 'contract infer' and --format")
        drafts = infer_contracts_from_changes(args.changes, format=args.format, options=_parse_options(args.option),
                                              keys=_parse_keys(args.key), tables=args.table or None)
        _write_contracts(drafts, args.out)
        return 0
    if not args.target:
        raise ConfigError("contract needs --target DIR (or, to infer from messages, --changes PATH --format F)")
    engine, known = DeltaRsEngine(), known_tables(args.target)
    tables = args.table or sorted(known)
    missing = [t for t in tables if t not in known]
    if missing:
        raise ConfigError(f"no table {missing[0]!r} under {args.target}; it holds {sorted(known) or 'none'}")
    if args.action == "infer":
        _write_contracts({t: infer_contract(t, engine.schema(table_path(args.target, t)), known[t]) for t in tables},
                         args.out)
        return 0
    if not args.contract:
        raise ConfigError("contract check needs --contract FILE_OR_DIR")
    contracts = load_contracts(args.contract)
    failed = 0
    for t in tables:
        if t not in contracts:
            print(f"{t}: no contract")
            failed += 1
            continue
        problems = check_contract(contracts[t], engine.schema(table_path(args.target, t)), known[t])
        print(f"{t}: {'matches its contract' if not problems else 'differs from its contract'}")
        for p in problems:
            print(f"  - {p}")
        failed += bool(problems)
    return 1 if failed else 0


def _write_contracts(drafts: dict[str, dict], out: str | None) -> None:
    """Each draft as ``<out>/<table dir>.yaml`` (:func:`lakecdc.run.state.table_dir`: one file per
    table, whatever its name holds), or printed."""
    import yaml


    for t, contract in drafts.items():
        text = yaml.safe_dump(contract, sort_keys=False)
        if out:
            Path(out).mkdir(parents=True, exist_ok=True)
            (Path(out) / f"{table_dir(t)}.yaml").write_text(text)
            print(f"{t}: {Path(out) / (table_dir(t) + '.yaml')}")
        else:
            print(f"# {t}\n{text}")


def _check(args: argparse.Namespace) -> int:
    # check writes too (its results, the tables it blocks): it holds the lease, and so reads the
    # tables between runs, never halfway through one
    with hold(args.target, command="check", wait=args.wait):
        return _check_held(args)


def _doctor(args: argparse.Namespace) -> int:
    if not Path(args.target).is_dir():
        raise ConfigError(f"no target at {args.target}")
    problems = diagnose(DeltaRsEngine(), args.target)
    print(to_json(problems) if args.json else render(problems, args.target))
    if not args.json:
        holder = current_holder(args.target)
        stale = holder.stale(time.time()) if holder is not None else "never taken"
        print(f"lease: free ({stale})" if stale or holder is None else
              f"lease: held by {'run ' + str(holder.run_id) + ', ' if holder.run_id else ''}lakecdc {holder.command} "
              f"(host {holder.host}, pid {holder.pid})")
    return 1 if problems else 0


def _repair(args: argparse.Namespace) -> int:
    if not Path(args.target).is_dir():
        raise ConfigError(f"no target at {args.target}")
    engine = DeltaRsEngine()
    with hold(args.target, command="repair", wait=args.wait):
        for line in repair(engine, args.target, reapply=args.reapply):
            print(line)
        left = diagnose(engine, args.target)
    for p in left:
        print(f"still wrong: {p.what}\n  repair: {p.fix}")
    return 1 if left else 0


def _check_held(args: argparse.Namespace) -> int:
    if args.unblock:
        for table in args.unblock:
            done = unblock(args.target, table)
            print(f"{table}: {'unblocked: its next merge runs' if done else 'was not blocked'}")
        return 0
    if not args.contract:
        raise ConfigError("check needs --contract FILE_OR_DIR (or --unblock TABLE)")
    spark = get_spark()
    contracts = load_contracts(args.contract)
    docs = not args.no_data_docs
    results = check_tables(args.target, contracts, spark=spark, tables=args.table or None, data_docs=docs)
    if args.changes:
        events = read_changes(args.changes, format=args.format, spark=spark)
        results += check_changes(events, contracts=contracts, target=args.target, data_docs=docs)
    print(results_json(results) if args.json else "\n".join(r.line() for r in results))
    index = data_docs_index(args.target)
    if docs and not args.json and index.exists():
        print(f"Data Docs: {index.resolve()}")
    return 1 if any(not r.success and r.severity == "fail" for r in results) else 0


def _status(args: argparse.Namespace) -> int:
    import json


    rows = status(DeltaRsEngine(), args.target)
    if args.json:
        now = dt.datetime.now(dt.timezone.utc)
        print(json.dumps([{
            "source_table": r.source_table, "target": r.target, "last_run": r.last_run, "status": r.last_status,
            "finished_at": r.finished_at.isoformat(), "last_op_ts": r.last_op_ts.isoformat() if r.last_op_ts else None,
            "lag_seconds": r.lag(now).total_seconds() if r.last_op_ts else None, "runs": r.runs, "events": r.events,
        } for r in rows], indent=2))
    else:
        print(render_status(rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "apply":
            return _apply(args)
        if args.command == "stream":
            return _stream(args)
        if args.command == "maintain":
            return _maintain(args)
        if args.command == "status":
            return _status(args)
        if args.command == "run":
            return _run_job(args)
        if args.command == "contract":
            return _contract(args)
        if args.command == "check":
            return _check(args)
        if args.command == "doctor":
            return _doctor(args)
        if args.command == "repair":
            return _repair(args)
    except LakecdcError as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
