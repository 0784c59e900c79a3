"""The ``lakecdc`` command line: thin parsing over the Python API, a summary at the end.

One module per command (or pair of commands): :mod:`~lakecdc.cli.apply` (apply, stream),
:mod:`~lakecdc.cli.jobs` (run), :mod:`~lakecdc.cli.maintain`, :mod:`~lakecdc.cli.check`,
:mod:`~lakecdc.cli.contract`, :mod:`~lakecdc.cli.target` (status, doctor, repair); the settings
flags they share are in :mod:`~lakecdc.cli.flags`, and become settings in
:mod:`lakecdc.config.sources`. What they print goes through :mod:`~lakecdc.cli.render` (rich
tables on a terminal, plain text otherwise); Spark's own output is kept in a log file by
:mod:`~lakecdc.cli.sparklog` unless ``--verbose``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from importlib import metadata

from lakecdc.cli import apply, check, contract, jobs, maintain, target
from lakecdc.cli.sparklog import SparkLog, spark_output_hidden
from lakecdc.errors import LakecdcError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lakecdc",
        description="Apply CDC change streams (GoldenGate, Debezium, DTS, Qlik) to Delta Lake tables exactly once.",
    )
    parser.add_argument("--version", action="version", version=version_text(),
                        help="print lakecdc's version and the PySpark and Delta versions installed, then exit")
    sub = parser.add_subparsers(dest="command", required=True)
    apply.add_apply(sub)
    apply.add_stream(sub)
    maintain.add(sub)
    jobs.add(sub)
    contract.add(sub)
    check.add(sub)
    target.add_doctor(sub)
    target.add_status(sub)
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    for command in sub.choices.values():  # also after the command: lakecdc apply --verbose ...
        command.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    return parser


VERBOSE_HELP = ("show Spark's own output as it comes (the JVM's start-up lines, its log, package downloads); "
                "otherwise it goes to a log file, named when a command fails")


#: The packages ``lakecdc --version`` reports besides lakecdc itself, when installed.
COMPANIONS = ("pyspark", "delta-spark", "deltalake")


def version_text() -> str:
    """``lakecdc 0.1.0 (pyspark 4.0.5, deltalake 1.6.6)``: lakecdc's installed version and those of
    the engines found next to it (read from the installed metadata, nothing is imported)."""
    def installed(name: str) -> str | None:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            return None

    own = installed("lakecdc") or "(not installed)"
    found = [f"{name} {v}" for name in COMPANIONS if (v := installed(name))]
    return f"lakecdc {own}" + (f" ({', '.join(found)})" if found else "")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` (default: the process's arguments); the exit status: 0 done, 1 a
    table or check failed, 2 bad arguments or a target that cannot be used."""
    try:
        args = build_parser().parse_args(argv)
        with spark_output_hidden(args.verbose) as log:
            code = _run(args, log)
        sys.stdout.flush()  # a closed pipe shows here, not at the interpreter's exit
        return code
    except BrokenPipeError:
        return _closed_pipe()


def _run(args: argparse.Namespace, log: SparkLog) -> int:
    """The command's exit status; on a failure, where Spark's output went."""
    code = 1
    try:
        code = int(args.run(args))
    except (LakecdcError, FileNotFoundError) as exc:
        print(f"lakecdc: error: {exc}", file=sys.stderr)
        code = 2
    finally:
        if code != 0 and (note := log.note()):
            log.keep = True
            print(note, file=sys.stderr)
    return code


def _closed_pipe() -> int:
    """The reader of stdout went away (``lakecdc status --json | head -1``): exit quietly.

    Python would otherwise print a traceback, and another when it flushes stdout at exit; stdout is
    pointed at /dev/null so that last flush succeeds. 141 is what a shell reports for SIGPIPE."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is no file (captured): nothing to flush
        pass
    finally:
        os.close(devnull)
    return 141


if __name__ == "__main__":
    sys.exit(main())
