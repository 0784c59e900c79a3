"""What a run did, per table: the frozen results, their JSON form and a readable table."""

from __future__ import annotations

import functools
import json
import os
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from lakecdc.lake.state import quarantine_path


@dataclass(frozen=True)
class TableSummary:
    """One table's outcome in one run (``cli.md`` names these fields)."""

    source_table: str
    target: str
    events: int = 0
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    duplicate_or_late: int = 0
    quarantined: int = 0
    delta_version: int | None = None
    status: str = "applied"
    #: records of this table that are no row change (tombstones, markers): skipped, not errors
    skipped: int = 0
    #: ``skipped`` by exact kind: ``{"tombstone": 3, "ddl": 1, ...}``
    skipped_kinds: dict[str, int] = field(default_factory=dict)
    #: the MERGE's target files: read, pruned unread (key ranges), rewritten (removed), written
    files_scanned: int | None = None
    files_skipped: int | None = None
    files_rewritten: int = 0
    files_added: int = 0
    #: events of this table held for a later run: their source transaction is not complete yet
    held: int = 0
    #: the newest source commit time (ISO, UTC) and seq this run applied to the table
    last_op_ts: str | None = None
    last_seq: str | None = None
    error: str | None = None

    def files_line(self) -> str:
        """``read/pruned/rewritten`` target files of the MERGE (``-`` where the engine does not say)."""
        if self.files_scanned is None and self.files_skipped is None and not self.files_rewritten:
            return "-"
        def show(n: int | None) -> str:
            return "-" if n is None else str(n)
        return f"{show(self.files_scanned)}/{show(self.files_skipped)}/{self.files_rewritten}"

    def plus(self, other: TableSummary) -> TableSummary:
        return replace(
            self,
            events=self.events + other.events,
            inserted=self.inserted + other.inserted,
            updated=self.updated + other.updated,
            deleted=self.deleted + other.deleted,
            duplicate_or_late=self.duplicate_or_late + other.duplicate_or_late,
            quarantined=self.quarantined + other.quarantined,
            skipped=self.skipped + other.skipped,
            skipped_kinds=add_kinds(self.skipped_kinds, other.skipped_kinds),
            files_scanned=_add(self.files_scanned, other.files_scanned),
            files_skipped=_add(self.files_skipped, other.files_skipped),
            files_rewritten=self.files_rewritten + other.files_rewritten,
            files_added=self.files_added + other.files_added,
            held=other.held,
            last_op_ts=max(filter(None, (self.last_op_ts, other.last_op_ts)), default=None),
            last_seq=max(filter(None, (self.last_seq, other.last_seq)), default=None),
            delta_version=other.delta_version if other.delta_version is not None else self.delta_version,
            status=max(self.status, other.status, key=lambda s: _STATUS_RANK.get(s, 0)),
            error=other.error or self.error,
        )


def add_kinds(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    """Two counts by kind added up."""
    out = dict(a)
    for k, n in b.items():
        out[k] = out.get(k, 0) + n
    return out


def kinds_text(kinds: dict[str, int]) -> str:
    """``{"tombstone": 2, "comment": 1}`` as ``2 tombstone, 1 comment`` (most first)."""
    return ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0])))


#: Which status a table shows over several runs: a failure anywhere, else applied in any run.
_STATUS_RANK = {"skipped": 0, "applied": 1, "failed": 2}


def _add(a: int | None, b: int | None) -> int | None:
    return None if a is None and b is None else (a or 0) + (b or 0)


@dataclass(frozen=True)
class RunSummary:
    """A whole ``apply``: the runs it made (ids), tables, quarantine and timing."""

    target: str
    format: str
    runs: tuple[int, ...] = ()
    files: int = 0
    tables: tuple[TableSummary, ...] = ()
    quarantine: str | None = None
    quarantined_unrouted: int = 0
    #: skipped records that name no table (heartbeats, transaction markers, ...)
    skipped_unrouted: int = 0
    #: ``skipped_unrouted`` by exact kind
    skipped_unrouted_kinds: dict[str, int] = field(default_factory=dict)
    #: per input file, what became of its records: ``applied``, ``duplicate_or_late`` (a copy of
    #: the event before it, or not newer than the table), ``held``, ``skipped:<kind>`` and
    #: ``quarantined``, and ``failed`` (row changes of a table that failed: the next run applies
    #: them; see :data:`FILE_ACCOUNTS`); they add up to the records read from the file. A count of
    #: zero is left out.
    file_accounts: dict[str, dict[str, int]] = field(default_factory=dict)
    #: files none of whose records was a row change and at least half of whose records were
    #: quarantined (a wrong ``format``?): the run ends with an error status (see ``cli.md``)
    unreadable_files: tuple[str, ...] = ()
    seconds: float = 0.0
    engine: str = "delta-rs"
    resumed: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(t.status in ("applied", "skipped") for t in self.tables)

    def table(self, name: str) -> TableSummary:
        for t in self.tables:
            if t.source_table == name:
                return t
        raise KeyError(f"no table {name!r} in this run; tables: {[t.source_table for t in self.tables]}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "format": self.format,
            "engine": self.engine,
            "runs": list(self.runs),
            "resumed": self.resumed,
            "files": self.files,
            "seconds": round(self.seconds, 3),
            "tables": [asdict(t) for t in self.tables],
            "quarantine": self.quarantine,
            "quarantined_unrouted": self.quarantined_unrouted,
            "skipped_unrouted": self.skipped_unrouted,
            "skipped_unrouted_kinds": self.skipped_unrouted_kinds,
            "file_accounts": self.file_accounts,
            "unreadable_files": list(self.unreadable_files),
            "ok": self.ok,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunSummary:
        """The summary :meth:`to_dict` gave (``extra`` is not kept)."""
        return cls(
            target=d["target"], format=d["format"], engine=d.get("engine", "delta-rs"),
            runs=tuple(d.get("runs") or ()), resumed=bool(d.get("resumed")), files=int(d.get("files") or 0),
            seconds=float(d.get("seconds") or 0.0),
            tables=tuple(TableSummary(**t) for t in d.get("tables") or ()),
            quarantine=d.get("quarantine"), quarantined_unrouted=int(d.get("quarantined_unrouted") or 0),
            skipped_unrouted=int(d.get("skipped_unrouted") or 0),
            skipped_unrouted_kinds=dict(d.get("skipped_unrouted_kinds") or {}),
            file_accounts={f: dict(a) for f, a in (d.get("file_accounts") or {}).items()},
            unreadable_files=tuple(d.get("unreadable_files") or ()),
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    #: the columns of :meth:`table_rows`
    HEAD = ("table", "events", "inserted", "updated", "deleted", "dup/late", "quarantined",
            "files read/pruned/rewritten", "version", "status")

    def table_rows(self) -> list[list[str]]:
        """One row per table under :attr:`HEAD`, as text."""
        return [
            [str(x) for x in (t.source_table, t.events, t.inserted, t.updated, t.deleted, t.duplicate_or_late,
                              t.quarantined, t.files_line(), "" if t.delta_version is None else t.delta_version,
                              t.status)]
            for t in self.tables
        ]

    def render(self) -> str:
        """A plain-text table a person reads at the end of a run."""
        head, rows = list(self.HEAD), self.table_rows()
        widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=True)] if rows else [len(h) for h in head]
        fmt = "  ".join(f"{{:<{w}}}" if i == 0 or i == len(head) - 1 else f"{{:>{w}}}" for i, w in enumerate(widths))
        lines = [fmt.format(*head), fmt.format(*["-" * w for w in widths])]
        lines += [fmt.format(*r) for r in rows]
        return "\n".join([*lines, "", *self.notes()])

    def notes(self) -> list[str]:
        """What :meth:`render` prints under the table: files, runs and time, then anything held,
        skipped, quarantined or failed."""
        runs = ", ".join(map(str, self.runs)) or "none (nothing new)"
        lines = [f"{self.files} file(s), run(s) {runs}, {self.seconds:.1f}s, engine {self.engine}"]
        held = sum(t.held for t in self.tables)
        if held:
            lines.append(f"{held} event(s) held for the next run: their source transaction is not complete yet")
        kinds = self.skipped_unrouted_kinds
        for t in self.tables:
            kinds = add_kinds(kinds, t.skipped_kinds)
        skipped = self.skipped_unrouted + sum(t.skipped for t in self.tables)
        if skipped:
            known = sum(kinds.values())
            if known < skipped:
                kinds = add_kinds(kinds, {"no row change": skipped - known})
            lines.append(f"{skipped} record(s) skipped, no row change: {kinds_text(kinds)}")
        if self.quarantined_unrouted:
            lines.append(f"{self.quarantined_unrouted} record(s) quarantined that name no table (not valid JSON, ...)")
        if self.quarantine and (self.quarantined_unrouted or any(t.quarantined for t in self.tables)):
            lines.append(f"quarantined records: {shown_path(self.quarantine)}")
        lines += self.file_lines()
        for t in self.tables:
            if t.error:
                lines.append(f"ERROR {t.source_table}: {t.error}")
        if self.unreadable_files:
            lines.append(unreadable_message(self.unreadable_files, self.format))
        return lines


    def file_lines(self, most: int = 10) -> list[str]:
        """Per file whose records were not all applied, what became of them (``most`` files)."""
        shown = [(f, acc) for f, acc in sorted(self.file_accounts.items()) if set(acc) - {"applied"}]
        if not shown:
            return []
        out = ["per file, records not all applied:"]
        for f, acc in shown[:most]:
            parts = [f"{acc[k]} {k.replace('_', ' ')}" for k in FILE_ACCOUNTS if acc.get(k)]
            parts += [f"{n} skipped ({k.split(':', 1)[1]})" for k, n in sorted(acc.items()) if k.startswith("skipped:")]
            out.append(f"  {shown_path(f)}: {', '.join(parts)}")
        if len(shown) > most:
            out.append(f"  ... and {len(shown) - most} more file(s) (file_accounts in the JSON summary)")
        return out


#: The kinds of :attr:`RunSummary.file_accounts` (skipped records as ``skipped:<kind>``).
FILE_ACCOUNTS = ("applied", "duplicate_or_late", "held", "quarantined", "failed")


def shown_path(path: str) -> str:
    """``path`` as a person reads it in a summary: relative to the working directory when it lies
    under it or beside it, under its parent (``lake/_quarantine``, ``../landing/a.json``), else as it is."""
    if "://" in path:
        return path
    here, there = Path.cwd(), Path(os.path.abspath(path))
    if there.is_relative_to(here) or (here.parent != Path(here.anchor) and there.is_relative_to(here.parent)):
        return os.path.relpath(there, here)
    return path


def unreadable(accounts: dict[str, int]) -> bool:
    """A file none of whose records was a row change and at least half of whose records were
    quarantined: most likely read as the wrong format (or not change data at all)."""
    total = sum(accounts.values())
    bad = accounts.get("quarantined", 0)
    changes = sum(accounts.get(k, 0) for k in ("applied", "duplicate_or_late", "held", "failed"))
    return bad > 0 and not changes and 2 * bad >= total


def unreadable_message(files: tuple[str, ...], fmt: str) -> str:
    shown = ", ".join(shown_path(f) for f in files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return (
        f"ERROR {len(files)} file(s) gave no row change, and most of their records were quarantined "
        f"(read as {fmt}: the wrong format?): {shown}. They are recorded as applied; once the cause is "
        f"fixed, apply them again with `lakecdc apply --reapply FILE_OR_GLOB ...` (API: reapply=[...])"
    )


def combine_summaries(results: list[RunSummary], *, target: str, fmt: str, engine: str, seconds: float) -> RunSummary:
    """One summary of several runs (or batches) into ``target``: the tables' counts added up."""
    tables: dict[str, TableSummary] = {}
    for r in results:
        for t in r.tables:
            tables[t.source_table] = tables[t.source_table].plus(t) if t.source_table in tables else t
    return RunSummary(
        target=target, format=fmt, runs=tuple(x for r in results for x in r.runs),
        files=sum(r.files for r in results), tables=tuple(tables[k] for k in sorted(tables)),
        quarantine=quarantine_path(target), quarantined_unrouted=sum(r.quarantined_unrouted for r in results),
        skipped_unrouted=sum(r.skipped_unrouted for r in results),
        skipped_unrouted_kinds=functools.reduce(add_kinds, (r.skipped_unrouted_kinds for r in results), {}),
        file_accounts={f: acc for r in results for f, acc in r.file_accounts.items()},
        unreadable_files=tuple(f for r in results for f in r.unreadable_files),
        seconds=seconds, engine=engine, resumed=any(r.resumed for r in results),
    )
