"""``lakecdc run JOB.yaml``: a job file's sources applied once, every interval or as streams."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable
from pathlib import Path

from lakecdc.cli.render import console, progress_printer
from lakecdc.cli.render import job as render_job
from lakecdc.config.durations import parse_duration
from lakecdc.errors import ConfigError
from lakecdc.jobs import Job, JobResult, load_job, run_job, stream_job, watch
from lakecdc.lake.lease import hold
from lakecdc.streaming import BatchFailed


def add(sub: argparse._SubParsersAction) -> None:
    """The ``run`` command."""
    rp = sub.add_parser(
        "run", help="run a job file (jobs/<name>.yaml): apply its sources, maintain when due",
        description="Run a declarative job: every source applied into the target (only new files), table "
                    "routing and settings from the file, maintenance when its policy says. See lakecdc/jobs/file.py "
                    "or docs/operations.md for the file's keys; mistakes are reported with their line.",
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
    rp.set_defaults(run=_run_job)


def _run_job(args: argparse.Namespace) -> int:
    job = load_job(args.job)
    if args.parallel_tables is not None:
        job = dataclasses.replace(job, settings=job.settings.with_(parallel_tables=args.parallel_tables))
    say = progress_printer(args.quiet)

    def report(result: JobResult) -> None:
        out = console()
        render_job(result, out)
        out.file.flush()
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
        render_job(result, console())
    return 0
