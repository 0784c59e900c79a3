"""``lakecdc maintain``: compaction or Z-order, vacuum and checkpoints of a target's tables."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from lakecdc.cli.flags import add_wait_flag
from lakecdc.cli.render import console, maintenance, progress_printer
from lakecdc.cli.target import require_target
from lakecdc.config.durations import parse_duration, parse_size
from lakecdc.maintenance.maintain import maintain

EPILOG_MAINTAIN = """\
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


def add(sub: argparse._SubParsersAction) -> None:
    """The ``maintain`` command."""
    mp = sub.add_parser(
        "maintain", help="compact / Z-order, vacuum and checkpoint the tables of a target",
        epilog=EPILOG_MAINTAIN, formatter_class=argparse.RawDescriptionHelpFormatter,
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
    add_wait_flag(mp)
    mp.add_argument("--quiet", action="store_true", help="print only the report")
    mp.set_defaults(run=_maintain)


def _maintain(args: argparse.Namespace) -> int:
    require_target(args.target)
    zorder: str | list[str] | None = None
    if args.zorder:
        zorder = "keys" if args.zorder == "keys" else [c.strip() for c in args.zorder.split(",") if c.strip()]
    say = progress_printer(args.quiet)

    reports = maintain(
        args.target, tables=args.table or None, compact=not args.no_compact, zorder=zorder,
        target_file_size=parse_size(args.target_file_size) if args.target_file_size else None,
        vacuum_retention=None if args.vacuum_retention.lower() == "none" else parse_duration(args.vacuum_retention),
        force=args.force, checkpoint=not args.no_checkpoint,
        tombstone_retention=parse_duration(args.tombstone_retention), progress=say, wait=args.wait,
    )
    if reports:
        maintenance(reports, console())
    else:
        print(f"no tables under {args.target}")
    if args.summary_json:
        Path(args.summary_json).write_text(json.dumps({"tables": [r.to_dict() for r in reports]}, indent=2) + "\n")
    return 0
