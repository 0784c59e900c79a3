"""``lakecdc status``, ``doctor`` and ``repair``: a target's runs, its health, and its mending."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path

from lakecdc.cli import render
from lakecdc.cli.flags import add_wait_flag
from lakecdc.errors import ConfigError
from lakecdc.lake.lease import current_holder, hold
from lakecdc.lake.runs import status
from lakecdc.maintenance.doctor import diagnose, repair, to_json
from lakecdc.merge.delta_rs import DeltaRsEngine

#: What a root ``lakecdc apply`` wrote to holds: its ledger, and the run reports (which are enough
#: for ``repair`` to rebuild a lost ledger).
TARGET_MARKS = ("_lakecdc", "_lakecdc_runs")


def require_target(path: str) -> None:
    """Raise a :class:`ConfigError` (the CLI exits 2) unless ``path`` is a root ``lakecdc apply``
    wrote to; nothing is created. A URI (``s3://...``) is taken as given: its store is asked
    by the command itself."""
    if "://" in path and not path.startswith("file://"):
        return
    root = Path(path.removeprefix("file://"))
    if any((root / mark).is_dir() for mark in TARGET_MARKS):
        return
    if not root.exists():
        why = "it does not exist"
    elif not root.is_dir():
        why = "it is a file"
    elif (root / "_delta_log").is_dir():
        why = "it is a Delta table; give the directory lakecdc apply wrote its tables under"
    else:
        entries = sorted(p.name for p in root.iterdir())
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        why = f"it holds {shown}" if entries else "it is empty"
    raise ConfigError(f"{path} is not a lakecdc target (no _lakecdc/ ledger): {why}. Give the --target "
                      "a 'lakecdc apply' or 'lakecdc run' wrote to")


def add_doctor(sub: argparse._SubParsersAction) -> None:
    """The ``doctor`` and ``repair`` commands."""
    dp = sub.add_parser(
        "doctor", help="check that a target's ledger and tables agree (a lost _lakecdc/, deleted Delta commits)",
        description="Compare the ledger (<target>/_lakecdc/runs) with the tables' own commits: a ledger missing, "
                    "behind the tables or with runs missing, a table whose Delta version is behind what a run "
                    "left it at (deleted _delta_log commits) or that is gone. Every run checks the same before "
                    "it applies anything. Exit 1 when something is wrong; 'lakecdc repair' mends it.",
    )
    dp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    dp.add_argument("--json", action="store_true", help="print the problems as JSON")
    dp.set_defaults(run=_doctor)

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
    add_wait_flag(xp)
    xp.set_defaults(run=_repair)


def add_status(sub: argparse._SubParsersAction) -> None:
    """The ``status`` command."""
    sp = sub.add_parser(
        "status", help="last run and lag per table of a target",
        description="Per table: the last run, its status and finish time, the newest source commit time "
                    "applied and the lag behind it, runs and events so far (from <target>/_lakecdc_runs, "
                    "a Delta table you can also query).",
    )
    sp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables (as given to apply)")
    sp.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sp.set_defaults(run=_status)


def _doctor(args: argparse.Namespace) -> int:
    require_target(args.target)
    problems = diagnose(DeltaRsEngine(), args.target)
    if args.json:
        print(to_json(problems))
    else:
        render.problems(problems, args.target, render.console())
        holder = current_holder(args.target)
        stale = holder.stale(time.time()) if holder is not None else "never taken"
        print(f"lease: free ({stale})" if stale or holder is None else
              f"lease: held by {'run ' + str(holder.run_id) + ', ' if holder.run_id else ''}lakecdc {holder.command} "
              f"(host {holder.host}, pid {holder.pid})")
    return 1 if problems else 0


def _repair(args: argparse.Namespace) -> int:
    require_target(args.target)
    engine = DeltaRsEngine()
    with hold(args.target, command="repair", wait=args.wait):
        for line in repair(engine, args.target, reapply=args.reapply):
            print(line)
        left = diagnose(engine, args.target)
    for p in left:
        print(f"still wrong: {p.what}\n  repair: {p.fix}")
    return 1 if left else 0


def _status(args: argparse.Namespace) -> int:
    require_target(args.target)
    rows = status(DeltaRsEngine(), args.target)
    if args.json:
        now = dt.datetime.now(dt.timezone.utc)
        print(json.dumps([{
            "source_table": r.source_table, "target": r.target, "last_run": r.last_run, "status": r.last_status,
            "finished_at": r.finished_at.isoformat(), "last_op_ts": r.last_op_ts.isoformat() if r.last_op_ts else None,
            "lag_seconds": lag.total_seconds() if (lag := r.lag(now)) is not None else None, "runs": r.runs, "events": r.events,
        } for r in rows], indent=2))
    else:
        render.status(rows, render.console())
    return 0
