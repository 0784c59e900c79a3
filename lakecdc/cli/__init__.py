"""The ``lakecdc`` command line: thin parsing over the Python API, a summary at the end.

One module per command (or pair of commands): :mod:`~lakecdc.cli.apply` (apply, stream),
:mod:`~lakecdc.cli.jobs` (run), :mod:`~lakecdc.cli.maintain`, :mod:`~lakecdc.cli.check`,
:mod:`~lakecdc.cli.contract`, :mod:`~lakecdc.cli.target` (status, doctor, repair); the settings
flags they share are in :mod:`~lakecdc.cli.flags`, and become settings in
:mod:`lakecdc.config.sources`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lakecdc.cli import apply, check, contract, jobs, maintain, target
from lakecdc.errors import LakecdcError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakecdc",
        description="Apply CDC change streams (GoldenGate, Debezium, DTS, Qlik) to Delta Lake tables exactly once.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    apply.add_apply(sub)
    apply.add_stream(sub)
    maintain.add(sub)
    jobs.add(sub)
    contract.add(sub)
    check.add(sub)
    target.add_doctor(sub)
    target.add_status(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except LakecdcError as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
