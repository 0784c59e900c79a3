"""The ``lakecdc`` command line: thin parsing over the Python API, a summary at the end."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from lakecdc.decoders import DECODERS
from lakecdc.errors import ConfigError, LakecdcError

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

what happens:
  Only files no earlier run applied to --target are read; running the same command again
  changes nothing. Events are ordered by (op_ts, pos), folded to one net change per key and
  MERGEd in one commit per table. Columns missing from an image never overwrite the table.
  Records that cannot be applied go to <target>/_quarantine with file, line, raw text and
  reason; the rest applies. Exit status: 0 when every table applied, 1 when a table failed
  (the others were applied), 2 for bad arguments or a run that committed nothing.

ogg-json options (GoldenGate property names, without gg.handler.<name>.format.):
  insertOpKey=I updateOpKey=U deleteOpKey=D truncateOpKey=T beforeObjectName=before
  afterObjectName=after flatten=false flattenDelimiter=. treatAllColumnsAsStrings=false
  (values may be wrapped as CDATA[...])

other formats: ogg-avro-op / ogg-avro-row (schemaDirectory=DIR, framing=length-prefixed|delimited|single,
  wrapMessageInGenericAvroMessage=true, lineDelimiter=...), ogg-xml (insertOpKey=..., encoding=...),
  ogg-delimited / ogg-json-row (includeColumnNames=true, fieldDelimiter=..., pkUpdateHandling=...),
  debezium-json (sequenceBy=op_ts|source.scn,..., tableName=db.schema.table, topic.prefix=...,
  unavailable.value.placeholder=...), canal-json (sequenceBy=id, layout=dts-before-2022-03-20,
  treatAllColumnsAsStrings=true), shareplex-json (keysFromKeyObject=false):
  see the README's "Formats" section for every option

more:
  --complete-transactions   Debezium: apply whole source transactions only (hold the rest)
  --contract data_contracts ODCS contracts: keys and column types
  lakecdc run jobs/x.yaml, lakecdc maintain, lakecdc status, lakecdc check, lakecdc contract
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


def parse_duration(text: str) -> dt.timedelta:
    """``7d``, ``36h``, ``90m``, ``45s`` or ``0`` as a timedelta.

    >>> parse_duration("36h")
    datetime.timedelta(days=1, seconds=43200)
    """
    units = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
    value = text.strip().lower()
    if value == "0":
        return dt.timedelta(0)
    if len(value) < 2 or value[-1] not in units or not value[:-1].replace(".", "", 1).isdigit():
        raise ConfigError(f"duration {text!r}: expected a number and a unit d/h/m/s, e.g. 7d or 36h")
    return dt.timedelta(**{units[value[-1]]: float(value[:-1])})


def parse_size(text: str) -> int:
    """``128MB``, ``1GB``, ``512KB`` or a number of bytes as bytes (binary units).

    >>> parse_size("128MB")
    134217728
    """
    units = {"KB": 2**10, "MB": 2**20, "GB": 2**30, "B": 1}
    value = text.strip().upper().replace("IB", "B")
    for unit, factor in units.items():
        if value.endswith(unit) and value[: -len(unit)].strip().replace(".", "", 1).isdigit():
            return int(float(value[: -len(unit)]) * factor)
    if value.isdigit():
        return int(value)
    raise ConfigError(f"size {text!r}: expected a number with KB, MB or GB, e.g. 128MB")


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
    ap.add_argument("--format", choices=sorted(DECODERS), help="input format (or from --gg-properties / --config)")
    ap.add_argument("--gg-properties", metavar="FILE",
                    help="a GoldenGate Java adapter properties file: its handler's format and every "
                         "gg.handler.<name>.format.* property (--option overrides one)")
    ap.add_argument("--gg-handler", metavar="NAME", help="which handler of --gg-properties (default: the only one)")
    ap.add_argument("--input", action="append", required=True, metavar="PATH",
                    help="file or directory (recursive); repeatable")
    ap.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    ap.add_argument("--key", action="append", default=[], metavar="TABLE=COL[,COL...]",
                    help="primary key of a table whose messages carry none; repeatable")
    ap.add_argument("--pk-update", choices=["abend", "update", "delete-insert"], default=None,
                    help="primary-key updates: delete-insert (default), update, or abend")
    ap.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                    help="format option (GoldenGate property name for GoldenGate formats); repeatable")
    ap.add_argument("--column-list", action="append", default=[], metavar="TABLE=COL[,COL...]",
                    help="write only these columns of TABLE (keys always); DLT's column_list; repeatable")
    ap.add_argument("--except-column-list", action="append", default=[], metavar="TABLE=COL[,COL...]",
                    help="never write these columns of TABLE; DLT's except_column_list; repeatable")
    ap.add_argument("--ignore-truncates", action="store_true",
                    help="read truncates but do not apply them (DLT's apply_as_truncates=False)")
    ap.add_argument("--complete-transactions", action="store_true",
                    help="apply a source transaction only when all its events are there; hold the rest "
                         "for the next run (formats with transaction markers: Debezium)")
    ap.add_argument("--min-file-age", metavar="SECONDS", type=float, default=None,
                   help="leave files changed less than SECONDS ago for a later run (a writer may still be "
                        "at work); files of line formats that grow later have their new lines applied then")
    ap.add_argument("--tombstone-retention", metavar="DURATION", default=None,
                    help="how long a deleted key blocks late events: 7d (default), 36h, 90m, 0")
    ap.add_argument("--contract", metavar="PATH",
                    help="ODCS data contract(s): a YAML file or a directory of them (keys and column types)")
    ap.add_argument("--config", metavar="FILE",
                    help="YAML with any of: format, keys {table: [cols]}, pk_update, options {name: value}, "
                         "column_list / except_column_list {table: [cols]}, apply_as_truncates, tombstone_retention, "
                         "complete_transactions")
    ap.add_argument("--engine", choices=["auto", "delta-rs", "delta-spark"], default="auto",
                    help="Delta engine (auto: delta-spark when its JVM classes are present, else delta-rs)")
    ap.add_argument("--summary-json", metavar="FILE", help="also write the run summary as JSON")
    ap.add_argument("--quiet", action="store_true", help="print only the summary")

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
    mp.add_argument("--quiet", action="store_true", help="print only the report")

    rp = sub.add_parser(
        "run", help="run a job file (jobs/<name>.yaml): apply its sources, maintain when due",
        description="Run a declarative job: every source applied into the target (only new files), table "
                    "routing and settings from the file, maintenance when its policy says. See lakecdc/jobs.py "
                    "or the README for the file's keys; mistakes are reported with their line.",
        epilog="examples:\n  lakecdc run jobs/sample.yaml\n  lakecdc run jobs/sample.yaml --watch --interval 5m\n",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    rp.add_argument("job", metavar="JOB.yaml", help="the job file")
    rp.add_argument("--watch", action="store_true", help="keep running: once every --interval until stopped")
    rp.add_argument("--interval", metavar="DURATION", default="60s", help="time between runs with --watch (default 60s)")
    rp.add_argument("--max-runs", type=int, metavar="N", help="with --watch: stop after N runs")
    rp.add_argument("--summary-json", metavar="FILE", help="also write the last run's summary as JSON")
    rp.add_argument("--quiet", action="store_true", help="print only the summary")

    cp = sub.add_parser(
        "contract", help="draft (infer) or check ODCS data contracts against the Delta tables",
        description="infer: write an ODCS v3 contract per table from the Delta tables under --target. "
                    "check: compare each table with its contract (missing, extra, retyped columns, keys).",
    )
    cp.add_argument("action", choices=["infer", "check"])
    cp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    cp.add_argument("--table", action="append", default=[], metavar="SOURCE_TABLE", help="only this table; repeatable")
    cp.add_argument("--contract", metavar="PATH", help="check: the contract file or directory")
    cp.add_argument("--out", metavar="DIR", help="infer: write <table>.yaml files here (default: print)")

    kp = sub.add_parser(
        "check", help="data quality: Great Expectations suites from the data contracts",
        description="Validate every table that has a data contract (keys not null and unique, declared "
                    "columns present, required columns not null, schema drift, row-count reconciliation "
                    "with the last run) and, with --changes, an incoming change stream. Results are kept "
                    "in <target>/_lakecdc_checks. Exit 1 when a 'fail' check failed.",
    )
    kp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    kp.add_argument("--contract", required=True, metavar="PATH", help="the data contract file or directory")
    kp.add_argument("--table", action="append", default=[], metavar="SOURCE_TABLE", help="only this table; repeatable")
    kp.add_argument("--changes", metavar="PATH", help="also check the change files under PATH (with --format)")
    kp.add_argument("--format", choices=sorted(DECODERS), default="ogg-json", help="format of --changes")
    kp.add_argument("--json", action="store_true", help="print the results as JSON")

    sp = sub.add_parser(
        "status", help="last run and lag per table of a target",
        description="Per table: the last run, its status and finish time, the newest source commit time "
                    "applied and the lag behind it, runs and events so far (from <target>/_lakecdc_runs, "
                    "a Delta table you can also query).",
    )
    sp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables (as given to apply)")
    sp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return parser


def _apply(args: argparse.Namespace) -> int:
    import lakecdc

    config = _read_config(args.config)
    keys = {**{t: list(c) for t, c in (config.get("keys") or {}).items()}, **_parse_keys(args.key)}
    fmt = args.format
    gg_options: dict[str, str] = {}
    if args.gg_properties:
        from lakecdc.ggprops import read_gg_properties

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
    started = time.perf_counter()

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    summary = lakecdc.apply(
        args.input, args.target, format=fmt, keys=keys, pk_update=pk_update, options=options,
        engine=args.engine, progress=say, column_list=column_list, except_column_list=except_list,
        apply_as_truncates=truncates, tombstone_retention=retention,
        complete_transactions=args.complete_transactions or bool(config.get("complete_transactions", False)),
        contracts=args.contract or config.get("contracts"),
        min_file_age=args.min_file_age if args.min_file_age is not None else float(config.get("min_file_age", 0)),
    )
    print(summary.render())
    if args.summary_json:
        Path(args.summary_json).write_text(summary.to_json() + "\n")
    return 0 if summary.ok else 1


def _maintain(args: argparse.Namespace) -> int:
    import json

    import lakecdc

    zorder: str | list[str] | None = None
    if args.zorder:
        zorder = "keys" if args.zorder == "keys" else [c.strip() for c in args.zorder.split(",") if c.strip()]
    started = time.perf_counter()

    def say(msg: str) -> None:
        if not args.quiet:
            print(f"[{time.perf_counter() - started:6.1f}s] {msg}", file=sys.stderr, flush=True)

    reports = lakecdc.maintain(
        args.target, tables=args.table or None, compact=not args.no_compact, zorder=zorder,
        target_file_size=parse_size(args.target_file_size) if args.target_file_size else None,
        vacuum_retention=None if args.vacuum_retention.lower() == "none" else parse_duration(args.vacuum_retention),
        force=args.force, checkpoint=not args.no_checkpoint,
        tombstone_retention=parse_duration(args.tombstone_retention), progress=say,
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

    from lakecdc.jobs import load_job, run_job, watch

    job = load_job(args.job)
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

    if args.watch:
        interval = parse_duration(args.interval).total_seconds()
        try:
            failures = watch(job, interval=interval, max_runs=args.max_runs, progress=say, report=report)
        except KeyboardInterrupt:
            return 0
        return 1 if failures else 0
    result = run_job(job, progress=say)
    report(result)
    return 0 if result.ok else 1


def _contract(args: argparse.Namespace) -> int:
    import yaml

    from lakecdc.contracts import check_contract, infer_contract, load_contracts
    from lakecdc.merge.delta_rs import DeltaRsEngine
    from lakecdc.state import known_tables, table_path

    engine, known = DeltaRsEngine(), known_tables(args.target)
    tables = args.table or sorted(known)
    missing = [t for t in tables if t not in known]
    if missing:
        raise ConfigError(f"no table {missing[0]!r} under {args.target}; it holds {sorted(known) or 'none'}")
    if args.action == "infer":
        for t in tables:
            text = yaml.safe_dump(infer_contract(t, engine.schema(table_path(args.target, t)), known[t]), sort_keys=False)
            if args.out:
                Path(args.out).mkdir(parents=True, exist_ok=True)
                (Path(args.out) / f"{t}.yaml").write_text(text)
                print(f"{t}: {Path(args.out) / (t + '.yaml')}")
            else:
                print(f"# {t}\n{text}")
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


def _check(args: argparse.Namespace) -> int:
    import lakecdc
    from lakecdc.contracts import load_contracts
    from lakecdc.quality import check_changes, check_tables, results_json

    spark = lakecdc.get_spark()
    results = check_tables(args.target, load_contracts(args.contract), spark=spark, tables=args.table or None)
    if args.changes:
        results += check_changes(lakecdc.read_changes(args.changes, format=args.format, spark=spark))
    print(results_json(results) if args.json else "\n".join(r.line() for r in results))
    return 1 if any(not r.success and r.severity == "fail" for r in results) else 0


def _status(args: argparse.Namespace) -> int:
    import json

    from lakecdc.merge.delta_rs import DeltaRsEngine
    from lakecdc.runs import render_status, status

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
    except LakecdcError as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
