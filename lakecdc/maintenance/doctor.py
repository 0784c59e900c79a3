"""The ledger and the tables check each other: ``lakecdc doctor`` and ``lakecdc repair``.

A target's ledger (``<target>/_lakecdc/runs``, :mod:`lakecdc.lake.ledger`) says which inputs were
applied and, per run, which Delta version each table reached; each table's commits say which run
last wrote it (the Delta app transaction ``(lakecdc, run id)``) and carry ``lakecdc.run_id`` in
their commit metadata. When one of them is damaged, a run would go wrong without a word:

* **the ledger lost** (``_lakecdc/`` deleted, restored from an old backup): run ids restart below
  the tables' transaction versions, so every table would take the new runs for ones it already
  committed and skip their changes; and every input would be applied again;
* **a table behind the ledger** (the newest ``_delta_log`` commit files deleted, the table
  restored from an old copy): the rows of the lost commits are gone, and a later partial update
  would recreate a row with NULLs where the lost values were.

So every run that has something to apply checks first (:func:`verify`) and stops with
:class:`TargetDamaged`, which says what is wrong and how to repair it. ``lakecdc doctor``
(:func:`diagnose`) reports the same without running anything; ``lakecdc repair`` (:func:`repair`)
mends what can be mended:

* a lost ledger is rebuilt from the run reports in ``<target>/_lakecdc_runs`` (each run's input
  files, format and per-table status) and the tables' own transaction versions; a run a table
  committed that no report names becomes a committed run without inputs (its files, if applied
  again, are duplicates to the tables: nothing changes);
* a table behind the ledger: the runs whose commits it lost are marked unfinished, so the next
  run applies their inputs again to that table only (the other tables skip runs they committed).
  The inputs must still be there (the next run says which one is missing).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from lakecdc.errors import LakecdcError
from lakecdc.lake.ledger import InputFile, Ledger, Manifest
from lakecdc.lake.runs import RUNS_APP_ID, runs_path
from lakecdc.lake.state import known_tables, table_path
from lakecdc.merge.plan import APP_ID

if TYPE_CHECKING:
    from lakecdc.merge.delta_rs import DeltaRsEngine


class TargetDamaged(LakecdcError):
    """The ledger and the tables of a target disagree; nothing was applied."""

    def __init__(self, target: str, problems: list[Problem]) -> None:
        self.target = target
        self.problems = problems
        lines = "\n".join(f"  - {p.what}" for p in problems)
        fixes = []
        for p in problems:
            if p.fix not in fixes:
                fixes.append(p.fix)
        super().__init__(
            f"target {target} is damaged, nothing was applied:\n{lines}\nto repair: " + "; ".join(fixes)
        )


@dataclass(frozen=True)
class Problem:
    """One disagreement between the ledger and the tables."""

    kind: str  # ledger-missing | ledger-behind | ledger-gap | table-behind | table-gone
    what: str
    fix: str
    table: str | None = None


def data_tables(engine: DeltaRsEngine, target: str) -> dict[str, str]:
    """``{path: name}`` of the Delta tables lakecdc keeps for ``target``: those its state records
    and every Delta table directly under it (bookkeeping ones, ``_...``, left out)."""
    out: dict[str, str] = {}
    for table in known_tables(target):
        out[table_path(target, table)] = table
    root = Path(target)
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.name.startswith(("_", ".")) or not (child / "_delta_log").is_dir():
                continue
            out.setdefault(str(child), child.name)
    return out


def _committed_runs(engine: DeltaRsEngine, tables: dict[str, str]) -> dict[str, tuple[int | None, int]]:
    """``{path: (lakecdc transaction version, Delta version)}`` of the tables that exist; a table
    whose log cannot be read is left out here (its own merge fails and says why: the other tables
    go on)."""
    out: dict[str, tuple[int | None, int]] = {}
    for path in tables:
        try:
            if engine.exists(path):
                out[path] = (engine.committed_version(path, APP_ID), engine.version(path))
        except Exception:  # noqa: BLE001,S112 - reported by the table's merge
            out[path] = _UNREADABLE
    return out


_UNREADABLE = (None, -1)


def _recorded_versions(manifests: list[Manifest], target: str) -> dict[str, tuple[int, int, str]]:
    """Per table path: the newest Delta version a finished run recorded, with that run's id and the
    table. (An unfinished run is resumed by the next one: a table that lacks its commit gets it.)

    A table under the target is found where the target is now: a target copied or moved whole
    (a backup restored elsewhere) keeps its tables inside it, whatever root its runs recorded."""
    out: dict[str, tuple[int, int, str]] = {}
    for m in manifests:
        if m.status != "committed":
            continue
        root = str((m.summary or {}).get("target") or "").rstrip("/")
        for t in (m.summary or {}).get("tables", []):
            v, path = t.get("delta_version"), t.get("target")
            if v is None or path is None:
                continue
            if root and root != target.rstrip("/") and path.startswith(root + "/"):
                path = target.rstrip("/") + path[len(root):]
            if path not in out or v > out[path][0]:
                out[path] = (int(v), m.run_id, t.get("source_table") or path)
    return out


def diagnose(engine: DeltaRsEngine, target: str) -> list[Problem]:
    """What is wrong between ``target``'s ledger and its tables (empty: they agree)."""
    target = str(Path(target).resolve()) if "://" not in target else target
    ledger = Ledger(target)
    manifests = ledger.manifests()
    tables = data_tables(engine, target)
    state = _committed_runs(engine, tables)
    repair = f"lakecdc repair --target {target}"
    problems: list[Problem] = []
    newest = max((m.run_id for m in manifests), default=0)
    reported = engine.committed_version(runs_path(target), RUNS_APP_ID) if engine.exists(runs_path(target)) else None
    unreadable = {p for p, v in state.items() if v is _UNREADABLE}
    ahead = [(run, tables[p]) for p, (run, _) in state.items() if run is not None and run > newest]
    if reported is not None and reported > newest:
        ahead.append((reported, "the run reports (_lakecdc_runs)"))
    if ahead:
        run, where = max(ahead)
        if not manifests:
            problems.append(Problem(
                "ledger-missing",
                f"the ledger {ledger.dir} is missing or empty, but {where} committed run {run}: "
                "without it run ids would restart at 1 and the tables would skip the new runs' changes, "
                "and every input would be applied again",
                f"restore {Path(target) / '_lakecdc'} from a backup, or rebuild the ledger with '{repair}'",
            ))
        else:
            problems.append(Problem(
                "ledger-behind",
                f"the ledger {ledger.dir} knows runs up to {newest}, but {where} committed run {run}: "
                "the ledger was damaged or restored from an older copy",
                f"restore {Path(target) / '_lakecdc'} from a backup, or rebuild the ledger with '{repair}'",
            ))
    ids = sorted(m.run_id for m in manifests)
    missing = sorted(set(range(1, newest + 1)) - set(ids))
    if missing and manifests:
        shown = ", ".join(map(str, missing[:10])) + (" ..." if len(missing) > 10 else "")
        problems.append(Problem(
            "ledger-gap",
            f"the ledger {ledger.dir} lacks the manifest(s) of run(s) {shown}: their inputs would be applied "
            "again",
            f"restore the run-*.json files from a backup, or rebuild the ledger with '{repair}'",
        ))
    for path, (version, run_id, name) in sorted(_recorded_versions(manifests, target).items()):
        if path in unreadable:
            continue
        if path not in state:
            problems.append(Problem(
                "table-gone",
                f"table {name} at {path} is gone, but run {run_id} left it at Delta version {version}",
                f"restore {path} from a backup; or, to build it again from the inputs, '{repair} --reapply'",
                table=name,
            ))
        elif state[path][1] < version:
            problems.append(Problem(
                "table-behind",
                f"table {name} at {path} is at Delta version {state[path][1]}, but run {run_id} left it at "
                f"version {version}: its newest commit(s) in {path}/_delta_log were deleted (or the table was "
                "restored from an older copy), and their rows are lost",
                f"restore the missing _delta_log commit files from a backup; or '{repair} --reapply' to apply "
                "the inputs of the runs it lost again (to that table only)",
                table=name,
            ))
    return problems


def verify(engine: DeltaRsEngine, target: str) -> None:
    """Raise :class:`TargetDamaged` when ``target``'s ledger and tables disagree."""
    problems = diagnose(engine, target)
    if problems:
        raise TargetDamaged(target, problems)


def repair(engine: DeltaRsEngine, target: str, *, reapply: bool = False) -> list[str]:
    """Mend what :func:`diagnose` finds; returns what was done, one line each.

    The ledger is rebuilt when it is missing or behind the tables (from ``_lakecdc_runs`` and the
    tables' transaction versions). With ``reapply``, the runs whose commits a table lost (or
    every run that wrote a table that is gone) are marked unfinished: the next run applies their
    inputs again, to the tables that lack them only.
    """
    target = str(Path(target).resolve()) if "://" not in target else target
    done: list[str] = []
    problems = diagnose(engine, target)
    kinds = {p.kind for p in problems}
    if kinds & {"ledger-missing", "ledger-behind", "ledger-gap"}:
        done += _rebuild_ledger(engine, target)
        problems = diagnose(engine, target)
        kinds = {p.kind for p in problems}
    lagging = [p for p in problems if p.kind in ("table-behind", "table-gone")]
    if lagging and reapply:
        done += _reopen_runs(engine, target, {p.table for p in lagging if p.table})
    elif lagging:
        done += [f"not repaired: {p.what} (restore the files, or repair with --reapply)" for p in lagging]
    if not done:
        done.append(f"{target}: the ledger and the tables agree; nothing to repair")
    return done


def _rebuild_ledger(engine: DeltaRsEngine, target: str) -> list[str]:
    ledger = Ledger(target)
    have = {m.run_id: m for m in ledger.manifests()}
    reports: dict[int, list[dict]] = {}
    if engine.exists(runs_path(target)):
        for row in engine.read_arrow(runs_path(target)).to_pylist():
            reports.setdefault(int(row["run_id"]), []).append(row)
    tables = data_tables(engine, target)
    committed = {p: run for p, (run, _) in _committed_runs(engine, tables).items() if run is not None}
    newest = max([*have, *reports, *committed.values(), 0])
    out: list[str] = []
    fmt_default = next((r[0]["format"] for _, r in sorted(reports.items()) if r and r[0].get("format")), "unknown")
    for run_id in range(1, newest + 1):
        if run_id in have:
            continue
        rows = reports.get(run_id, [])
        if rows:
            inputs = _inputs_of(rows[0])
            failed = [r["source_table"] for r in rows if r["status"] not in ("applied", "skipped")]
            status: Literal["planned", "committed"] = "planned" if failed else "committed"
            tables_summary = [{"source_table": r["source_table"], "target": r["target"], "status": r["status"],
                               "delta_version": r["delta_version"]} for r in rows]
            manifest = Manifest(run_id=run_id, status=status, format=rows[0]["format"] or fmt_default, inputs=inputs,
                                started_at=rows[0]["started_at"].timestamp() if rows[0]["started_at"] else time.time(),
                                finished_at=rows[0]["finished_at"].timestamp() if rows[0]["finished_at"] else None,
                                summary={"rebuilt_by": "lakecdc repair", "tables": tables_summary})
            note = f"{len(inputs)} input(s), from the run reports" + (
                f"; unfinished (failed: {', '.join(failed)}): the next run resumes it" if failed else "")
        else:
            manifest = Manifest(run_id=run_id, status="committed", format=fmt_default, inputs=[],
                                finished_at=time.time(),
                                summary={"rebuilt_by": "lakecdc repair", "tables": [], "inputs_unknown": True})
            note = ("no run report names its inputs: recorded without them (if its files are applied again, the "
                    "tables take their changes as duplicates)")
        ledger.write(manifest, new=True)
        out.append(f"run {run_id}: manifest rebuilt, {note}")
    if out:
        out.append(f"ledger rebuilt in {ledger.dir}; lost with {Path(target) / '_lakecdc'} and not rebuilt: "
                   "tombstones of deleted keys (late changes to keys deleted within the tombstone retention could "
                   "bring them back), held transactions, quality blocks; tables' key columns are recorded again "
                   "by their next merge")
    return out


def _inputs_of(row: dict) -> list[InputFile]:
    origins = row.get("input_origins")
    ends = row.get("input_ends")
    out = []
    for i, path in enumerate(row.get("inputs") or []):
        source = origins[i] if origins and origins[i] else path
        try:
            st = os.stat(source)
            size, mtime = st.st_size, st.st_mtime_ns
        except OSError:
            size, mtime = 0, 0
        if ends and ends[i] is not None:
            size = int(ends[i])
        out.append(InputFile(path=source, size=size, mtime_ns=mtime))
    return out


def _reopen_runs(engine: DeltaRsEngine, target: str, names: set[str]) -> list[str]:
    ledger = Ledger(target)
    tables = data_tables(engine, target)
    state = _committed_runs(engine, tables)
    out = []
    for m in ledger.manifests():
        for t in (m.summary or {}).get("tables", []):
            if (t.get("source_table") or t.get("target")) not in names or t.get("delta_version") is None:
                continue
            now = state.get(t["target"], (None, -1))[1]
            if t["delta_version"] > now and m.status == "committed":
                m.status = "planned"
                m.summary = {**(m.summary or {}), "reopened_by": "lakecdc repair --reapply"}
                ledger.write(m)
                out.append(f"run {m.run_id}: marked unfinished, the next run applies its {len(m.inputs)} input(s) "
                           f"again to {t['source_table']} (now at Delta version {now}, the run left it at "
                           f"{t['delta_version']})")
                break
    return out


def render(problems: list[Problem], target: str) -> str:
    if not problems:
        return f"{target}: the ledger and the tables agree"
    return "\n".join([f"{target}: {len(problems)} problem(s)"] + [f"- {p.what}\n  repair: {p.fix}" for p in problems])


def to_json(problems: list[Problem]) -> str:
    return json.dumps([p.__dict__ for p in problems], indent=2)
