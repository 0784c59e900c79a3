"""What a person reads from the CLI: tables, notes and progress lines, through ``rich``.

On a terminal the tables get a rule under the header and the status column its colour; when the
output is not a terminal (a pipe, a file, a scheduler's log) or ``NO_COLOR`` is set, the same
tables come out as plain aligned text, without colour or escape codes, never wrapped. Every
function takes the :class:`~rich.console.Console` to print on (:func:`console` for stdout), so a
test can hand one that records.

Example:
    >>> from lakecdc.cli import render                              # doctest: +SKIP
    >>> render.console().print(render.table(["table", "rows"], [["S.A", "3"]], right={1}))
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lakecdc.config.settings import Progress

if TYPE_CHECKING:
    from lakecdc.jobs import JobResult
    from lakecdc.lake.runs import TableStatus
    from lakecdc.lake.summary import RunSummary
    from lakecdc.maintenance.doctor import Problem
    from lakecdc.maintenance.maintain import MaintenanceReport

#: The header rule of a plain table: dashes under each column, a space between columns (ASCII).
PLAIN = box.Box("    \n    \n -  \n    \n    \n    \n    \n    \n", ascii=True)

#: Width of plain output: wide enough that no table or line is ever wrapped in a log.
PLAIN_WIDTH = 10_000

#: How a status cell looks on a terminal.
STATUS_STYLES = {"applied": "green", "skipped": "dim", "failed": "bold red", "passed": "green"}


def plain_wanted(file: object) -> bool:
    """True when ``file`` is not a terminal or ``NO_COLOR`` is set (https://no-color.org)."""
    isatty = getattr(file, "isatty", None)
    return bool(os.environ.get("NO_COLOR")) or not (callable(isatty) and isatty())


def console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr): colours on a terminal, plain text otherwise."""
    file = sys.stderr if stderr else sys.stdout
    if plain_wanted(file):
        return Console(file=file, color_system=None, width=PLAIN_WIDTH, markup=False, highlight=False,
                       emoji=False, soft_wrap=True)
    return Console(file=file, markup=False, highlight=False, emoji=False)


def _plain(out: Console) -> bool:
    return out.color_system is None


def table(head: Sequence[str], rows: Sequence[Sequence[str | Text]], *, out: Console | None = None,
          right: Collection[int] = (), status: int | None = None, title: str | None = None) -> Table:
    """A table of ``rows`` under ``head``: columns ``right`` aligned right (numbers), column
    ``status`` coloured by :data:`STATUS_STYLES` on a terminal; its look follows ``out``
    (default: a plain one)."""
    plain = out is None or _plain(out)
    t = Table(box=PLAIN if plain else box.SIMPLE_HEAD, show_edge=False, pad_edge=False, title=title,
              title_justify="left", header_style="" if plain else "bold", highlight=False,
              padding=(0, 1) if plain else (0, 0))
    for i, name in enumerate(head):
        # on a narrow terminal a header breaks after a '/' (and between words), a cell never
        shown = name if plain else name.replace("/", "/\n") if len(name) > 12 else name
        t.add_column(shown, justify="right" if i in right else "left", no_wrap=True)
    for row in rows:
        cells = list(row)
        word = cells[status] if status is not None else None
        if status is not None and isinstance(word, str):
            cells[status] = Text(word, style=STATUS_STYLES.get(word, ""))
        t.add_row(*cells)
    return t


def summary(s: RunSummary, out: Console) -> None:
    """An apply's (or a stream batch's) summary: one row per table, then the notes under it."""
    head = list(s.HEAD)
    out.print(table(head, s.table_rows(), out=out, right=set(range(1, len(head) - 1)), status=len(head) - 1))
    out.print()
    for line in s.notes():
        out.print(Text(line, style="bold red" if line.startswith("ERROR") else ""))


def status(rows: list[TableStatus], out: Console) -> None:
    """``lakecdc status``: the last run and the lag of every table."""
    from lakecdc.lake.runs import STATUS_HEAD, status_rows

    if not rows:
        out.print("no runs recorded yet")
        return
    out.print(table(STATUS_HEAD, status_rows(rows), out=out, right={1, 5, 6, 7}, status=2))


def maintenance(reports: Sequence[MaintenanceReport], out: Console) -> None:
    """``lakecdc maintain``: what was done to each table."""
    head = ["table", "done", "files", "rewritten", "size (MiB)", "vacuumed", "tombstones expired", "version",
            "seconds"]
    rows = [[
        r.source_table, f"z-ordered by {', '.join(r.zorder)}" if r.zorder else "compacted",
        f"{r.files_before} -> {r.files_after}", f"{r.files_removed} into {r.files_added}",
        f"{r.bytes_before / 2**20:.1f} -> {r.bytes_after / 2**20:.1f}",
        "-" if r.files_vacuumed is None else str(r.files_vacuumed), str(r.tombstones_expired),
        f"{r.version_before} -> {r.version_after}", f"{r.seconds:.1f}",
    ] for r in reports]
    out.print(table(head, rows, out=out, right=set(range(2, len(head)))))


def problems(found: Sequence[Problem], target: str, out: Console) -> None:
    """``lakecdc doctor``: whether the ledger and the tables agree, else each problem and its repair."""
    if not found:
        out.print(Text(f"{target}: the ledger and the tables agree", style="green"))
        return
    out.print(Text(f"{target}: {len(found)} problem(s)", style="bold red"))
    for p in found:
        out.print(Text(f"- {p.what}"))
        out.print(Text(f"  repair: {p.fix}", style="yellow"))


def job(result: JobResult, out: Console) -> None:
    """``lakecdc run``: the job's apply summaries, checks and maintenance."""
    out.print(Text(f"job {result.job}", style="bold"))
    for s in result.summaries:
        summary(s, out)
    if result.checks:
        failed = [c for c in result.checks if not c.success]
        out.print(Text(f"checks: {len(result.checks) - len(failed)} of {len(result.checks)} passed",
                       style="bold red" if failed else "green"))
        for c in failed:
            out.print(Text(f"  {c.line()}"))
    if result.maintained:
        out.print("maintenance:")
        maintenance(result.maintained, out)


def progress_printer(quiet: bool) -> Progress:
    """A ``progress`` callback printing ``[  12.3s] message`` lines on stderr (nothing when
    ``quiet``); lines from tables merged in parallel each come out whole, on a line of their own."""
    started = time.perf_counter()
    lock = threading.Lock()
    err = console(stderr=True)

    def say(msg: str) -> None:
        if quiet:
            return
        line = Text(f"[{time.perf_counter() - started:6.1f}s] ", style="dim")
        line.append(msg)
        with lock:
            err.print(line)

    return say
