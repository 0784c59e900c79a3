"""``lakecdc apply`` and ``lakecdc stream``: change files (given, or as they land) into Delta tables."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lakecdc.cli.flags import (
    add_format_flags,
    add_kafka_flags,
    add_settings_flags,
    kafka_input,
    require_format,
)
from lakecdc.cli.render import console, progress_printer, summary
from lakecdc.config.sources import from_cli
from lakecdc.decode.goldengate.properties import read_gg_properties
from lakecdc.run.apply import apply
from lakecdc.streaming import BatchFailed, StreamBatch, stream

EPILOG_APPLY = """\
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

  # the new records of Kafka topics (Debezium's), landed under lake/_lakecdc/kafka, then applied
  lakecdc apply --format debezium-json --kafka-bootstrap-servers broker:9092 \\
      --subscribe dbserver1.inventory.customers --target lake/ --key inventory.customers=id

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
  see docs/formats.md for every option

more:
  --complete-transactions   Debezium: apply whole source transactions only (hold the rest)
  --contract data_contracts ODCS contracts: keys and column types
  lakecdc stream (new files as they land), lakecdc run jobs/x.yaml, lakecdc maintain, lakecdc status,
  lakecdc check, lakecdc contract
"""


EPILOG_STREAM = """\
examples:
  # apply what landed since the last time, then exit (cron, a scheduled Databricks job)
  lakecdc stream --format ogg-json --input landing/ --target lake/ --summary-json run.json

  # keep running: a micro-batch every 30 seconds, at most 500 files each, until Ctrl-C
  lakecdc stream --format debezium-json --kafka-bootstrap-servers broker:9092 --subscribe dbserver1.inventory.customers \\
      --target lake/ --key inventory.customers=id --trigger "30 seconds"
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


def add_apply(sub: argparse._SubParsersAction) -> None:
    """The ``apply`` command."""
    ap = sub.add_parser(
        "apply", help="apply change files to Delta tables", epilog=EPILOG_APPLY,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Decode change files, consolidate them per primary key and MERGE them into one Delta table per source table.",
    )
    add_format_flags(ap)
    ap.add_argument("--input", action="append", metavar="PATH",
                    help="file or directory (recursive); repeatable (or Kafka topics: --kafka-bootstrap-servers)")
    add_kafka_flags(ap)
    ap.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    add_settings_flags(ap)
    ap.add_argument("--min-file-age", metavar="SECONDS", type=float, default=None,
                    help="leave files changed less than SECONDS ago for a later run (a writer may still be "
                         "at work); files of line formats that grow later have their new lines applied then")
    ap.add_argument("--reapply", action="append", default=[], metavar="FILE_OR_GLOB",
                    help="read again files an earlier run applied (a path, or a pattern on the path or the "
                         "file name): e.g. files read with the wrong --format; repeatable")
    ap.add_argument("--summary-json", metavar="FILE", help="also write the run summary as JSON")
    ap.add_argument("--quiet", action="store_true", help="print only the summary")
    ap.set_defaults(run=_apply)


def add_stream(sub: argparse._SubParsersAction) -> None:
    """The ``stream`` command."""
    tp = sub.add_parser(
        "stream", help="apply files as they land: a Spark Structured Streaming query", epilog=EPILOG_STREAM,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Watch a landing directory with a Spark Structured Streaming query; each micro-batch applies "
                    "its new files exactly as 'lakecdc apply' does (one ledger, one summary per batch).",
    )
    add_format_flags(tp)
    tp.add_argument("--input", metavar="DIR",
                    help="the landing directory (recursive) (or Kafka topics: --kafka-bootstrap-servers)")
    add_kafka_flags(tp)
    tp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    tp.add_argument("--checkpoint", metavar="DIR",
                    help="Spark's checkpoint, one per landing directory (default <target>/_lakecdc/stream-checkpoint)")
    tp.add_argument("--trigger", default="available-now", metavar="available-now|once|INTERVAL",
                    help="available-now (default): the files there now, then exit; once: the same in one batch; "
                         "an interval such as '30 seconds' or 5m: a batch every interval until stopped (Ctrl-C)")
    tp.add_argument("--max-files-per-trigger", type=int, metavar="N",
                    help="at most N files per batch (default: every new file in one batch)")
    tp.add_argument("--glob", metavar="PATTERN", help="only file names matching PATTERN, e.g. '*.json'")
    add_settings_flags(tp)
    tp.add_argument("--summary-json", metavar="FILE",
                    help="also write the summary of everything applied so far as JSON (rewritten after each batch)")
    tp.add_argument("--quiet", action="store_true", help="print only the summaries")
    tp.set_defaults(run=_stream)


def _apply(args: argparse.Namespace) -> int:
    require_format(args)
    settings = from_cli(args, read_gg_properties)
    inputs = kafka_input(args, args.input) or args.input
    done = apply(inputs, args.target, settings=settings, progress=progress_printer(args.quiet))
    summary(done, console())
    if args.summary_json:
        Path(args.summary_json).write_text(done.to_json() + "\n")
    return 0 if done.ok and not done.unreadable_files else 1


def _stream(args: argparse.Namespace) -> int:
    from pyspark.errors import StreamingQueryException

    require_format(args)
    settings = from_cli(args, read_gg_properties)
    say = progress_printer(args.quiet)

    def on_batch(batch: StreamBatch) -> None:
        out = console()
        out.print(f"batch {batch.batch_id}: {len(batch.files)} file(s)")
        summary(batch.summary, out)
        out.print()
        out.file.flush()
        if args.summary_json:
            Path(args.summary_json).write_text(batch.total.to_json() + "\n")

    handle = stream(
        kafka_input(args, args.input) or args.input, args.target, settings=settings, checkpoint=args.checkpoint, trigger=args.trigger,
        max_files_per_trigger=args.max_files_per_trigger, path_glob_filter=args.glob, progress=say,
        on_batch=on_batch,
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
        out = console()
        if handle.batches:
            out.print("total:")
        summary(handle.total, out)
    if args.summary_json and not handle.batches:
        Path(args.summary_json).write_text(handle.total.to_json() + "\n")
    return 1 if handle.total.unreadable_files else 0
