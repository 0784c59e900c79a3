"""What a run did, per table: the frozen results, their JSON form and a readable table."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any


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
            files_scanned=_add(self.files_scanned, other.files_scanned),
            files_skipped=_add(self.files_skipped, other.files_skipped),
            files_rewritten=self.files_rewritten + other.files_rewritten,
            files_added=self.files_added + other.files_added,
            held=other.held,
            last_op_ts=max(filter(None, (self.last_op_ts, other.last_op_ts)), default=None),
            last_seq=max(filter(None, (self.last_seq, other.last_seq)), default=None),
            delta_version=other.delta_version if other.delta_version is not None else self.delta_version,
            status=max(self.status, other.status, key=_STATUS_RANK.get),
            error=other.error or self.error,
        )


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
            "ok": self.ok,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)

    def render(self) -> str:
        """A plain-text table a person reads at the end of a run."""
        head = ["table", "events", "inserted", "updated", "deleted", "dup/late", "quarantined",
                "files read/pruned/rewritten", "version", "status"]
        rows = [
            [t.source_table, t.events, t.inserted, t.updated, t.deleted, t.duplicate_or_late, t.quarantined,
             t.files_line(), "" if t.delta_version is None else t.delta_version, t.status]
            for t in self.tables
        ]
        widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)] if rows else [len(h) for h in head]
        fmt = "  ".join(f"{{:<{w}}}" if i == 0 or i == len(head) - 1 else f"{{:>{w}}}" for i, w in enumerate(widths))
        lines = [fmt.format(*head), fmt.format(*["-" * w for w in widths])]
        lines += [fmt.format(*map(str, r)) for r in rows]
        runs = ", ".join(map(str, self.runs)) or "none (nothing new)"
        lines.append("")
        lines.append(f"{self.files} file(s), run(s) {runs}, {self.seconds:.1f}s, engine {self.engine}")
        held = sum(t.held for t in self.tables)
        if held:
            lines.append(f"{held} event(s) held for the next run: their source transaction is not complete yet")
        skipped = self.skipped_unrouted + sum(t.skipped for t in self.tables)
        if skipped:
            lines.append(f"{skipped} record(s) skipped: tombstones, heartbeats, transaction markers (no row change)")
        if self.quarantined_unrouted:
            lines.append(f"{self.quarantined_unrouted} record(s) quarantined that name no table (not valid JSON, ...)")
        if self.quarantine and (self.quarantined_unrouted or any(t.quarantined for t in self.tables)):
            lines.append(f"quarantined records: {self.quarantine}")
        for t in self.tables:
            if t.error:
                lines.append(f"ERROR {t.source_table}: {t.error}")
        return "\n".join(lines)
