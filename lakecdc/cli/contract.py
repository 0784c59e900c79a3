"""``lakecdc contract``: draft ODCS data contracts from tables or change files, or check tables
against theirs."""

from __future__ import annotations

import argparse
from pathlib import Path

from lakecdc.check.contracts import check_contract, infer_contract, load_contracts
from lakecdc.config.sources import options, pairs
from lakecdc.decode import DECODERS
from lakecdc.errors import ConfigError
from lakecdc.lake.state import known_tables, table_dir, table_path
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.run.infer import infer_contracts_from_changes


def add(sub: argparse._SubParsersAction) -> None:
    """The ``contract`` command."""
    cp = sub.add_parser(
        "contract", help="draft (infer) or check ODCS data contracts against the Delta tables",
        description="draft (or infer): write an ODCS v3.1 contract per table from the Delta tables under --target, or "
                    "from a sample of change messages (--changes PATH --format F: decoded, typed and keyed "
                    "as apply would, into a scratch table; nothing is written under any target). "
                    "check: compare each table with its contract (missing, extra, retyped columns, keys).",
    )
    cp.add_argument("action", choices=["draft", "infer", "check"], help="draft (or infer): write contracts; check")
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
    cp.set_defaults(run=_contract)


def _contract(args: argparse.Namespace) -> int:
    if args.action == "draft":
        args.action = "infer"
    if args.changes:
        if args.action != "infer" or not args.format:
            raise ConfigError("--changes drafts contracts: use it with 'contract draft' and --format")
        drafts = infer_contracts_from_changes(args.changes, format=args.format, options=options(args.option),
                                              keys=pairs(args.key, "--key"), tables=args.table or None)
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
    """Each draft as ``<out>/<table dir>.yaml`` (:func:`lakecdc.lake.state.table_dir`: one file per
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
