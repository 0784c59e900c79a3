"""``lakecdc check``: the data contracts' checks on a target's tables (and change files)."""

from __future__ import annotations

import argparse

from lakecdc.check.contracts import load_contracts
from lakecdc.check.gx import project_root
from lakecdc.check.quality import Totals, check_changes, check_tables, data_docs_index, results_json, unblock
from lakecdc.cli.flags import add_wait_flag
from lakecdc.cli.target import require_target
from lakecdc.decode import DECODERS
from lakecdc.errors import ConfigError
from lakecdc.lake.lease import hold
from lakecdc.run.read import read_changes
from lakecdc.spark.session import get_spark


def add(sub: argparse._SubParsersAction) -> None:
    """The ``check`` command."""
    kp = sub.add_parser(
        "check", help="data quality: Great Expectations suites from the data contracts",
        description="Validate every table that has a data contract (keys not null and unique, declared "
                    "columns present, required columns not null, accepted values and ranges, the "
                    "contract's quality rules, schema drift, row-count reconciliation with the last run) "
                    "and, with --changes, an incoming change stream. Results are kept in "
                    "<target>/_lakecdc_checks and as Great Expectations Data Docs "
                    "(<target>/_lakecdc/data_docs/index.html). A table whose 'fail' check failed is "
                    "blocked: its next merge waits until a check passes or --unblock accepts it. "
                    "The contract's sql rules run on Spark, its custom rules of engine greatExpectations as "
                    "those expectations; rules lakecdc cannot run are reported 'unsupported'. Each suite runs "
                    "through a GX Checkpoint ('lakecdc <table> merged'), in an existing GX project with "
                    "--gx-project (its checkpoint actions run). Ends with the totals; exit 1 when a 'fail' "
                    "(ODCS severity error) check failed.",
    )
    kp.add_argument("--target", required=True, metavar="DIR", help="root of the Delta tables")
    kp.add_argument("--contract", metavar="PATH", help="the data contract file or directory (required to check)")
    kp.add_argument("--unblock", action="append", default=[], metavar="SOURCE_TABLE",
                    help="accept this blocked table as it is (its next merge runs); checks nothing; repeatable")
    kp.add_argument("--no-data-docs", action="store_true", help="do not update the Data Docs (faster)")
    kp.add_argument("--gx-project", metavar="DIR",
                    help="an existing Great Expectations project (the directory holding gx/): lakecdc's suites, "
                         "validation definitions and checkpoints are added to it and its actions and Data Docs "
                         "sites used; nothing of its own is removed")
    kp.add_argument("--table", action="append", default=[], metavar="SOURCE_TABLE", help="only this table; repeatable")
    kp.add_argument("--changes", metavar="PATH", help="also check the change files under PATH (with --format)")
    kp.add_argument("--format", choices=sorted(DECODERS), help="format of --changes (required with it)")
    kp.add_argument("--json", action="store_true", help="print the results as JSON")
    add_wait_flag(kp)
    kp.set_defaults(run=_check)


def _check(args: argparse.Namespace) -> int:
    # check writes too (its results, the tables it blocks): it holds the lease, and so reads the
    # tables between runs, never halfway through one
    require_target(args.target)
    with hold(args.target, command="check", wait=args.wait):
        return _check_held(args)


def _check_held(args: argparse.Namespace) -> int:
    if args.unblock:
        for table in args.unblock:
            done = unblock(args.target, table)
            print(f"{table}: {'unblocked: its next merge runs' if done else 'was not blocked'}")
        return 0
    if not args.contract:
        raise ConfigError("check needs --contract FILE_OR_DIR (or --unblock TABLE)")
    if args.changes and not args.format:
        raise ConfigError(f"check --changes needs --format (one of: {', '.join(sorted(DECODERS))})")
    contracts = load_contracts(args.contract)  # mistakes in the contracts or the project before Spark starts
    if args.gx_project:
        project_root(args.gx_project)
    spark = get_spark()
    docs = not args.no_data_docs
    results = check_tables(args.target, contracts, spark=spark, tables=args.table or None, data_docs=docs,
                           gx_project=args.gx_project)
    if args.changes:
        events = read_changes(args.changes, format=args.format, spark=spark)
        results += check_changes(events, contracts=contracts, target=args.target, data_docs=docs,
                                 gx_project=args.gx_project)
    totals = Totals.of(results)
    if args.json:
        print(results_json(results))
        return 1 if totals.errors else 0
    print("\n".join(r.line() for r in results))
    index = data_docs_index(args.target)
    if docs and not args.gx_project and index.exists():
        print(f"Data Docs: {index.resolve()}")
    print(totals.line())
    return 1 if totals.errors else 0
