"""Which inputs a target has applied: one manifest per run under ``<target>/_lakecdc/runs/``.

The protocol that makes a run exactly-once:

1. list the inputs; files named by an earlier manifest are never applied again;
2. write the manifest of run ``N`` (its files, sizes, mtimes) with status ``planned`` *before*
   any commit;
3. commit each table with the Delta app transaction ``(lakecdc, N)``;
4. rewrite the manifest with status ``committed`` and the run's summary.

After a crash anywhere in 3-4 the next run finds manifest ``N`` still ``planned`` and runs it
again on exactly the same files; tables whose transaction version already reached ``N`` are
skipped, the others applied. A crash before 2 leaves nothing to undo.
"""

from __future__ import annotations

import glob
import json
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from lakecdc.errors import InputChangedError

Status = Literal["planned", "committed"]


@dataclass(frozen=True)
class InputFile:
    path: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str) -> InputFile:
        st = os.stat(path)
        return cls(path=path, size=st.st_size, mtime_ns=st.st_mtime_ns)


@dataclass
class Manifest:
    run_id: int
    status: Status
    format: str
    inputs: list[InputFile]
    started_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    summary: dict[str, Any] | None = None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        raw = json.loads(text)
        raw["inputs"] = [InputFile(**f) for f in raw["inputs"]]
        return cls(**raw)


def list_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[str]:
    """Files under ``paths`` (recursively; a path with ``*``/``?``/``[`` is a glob, ``**`` included),
    in a stable order; hidden files and dirs skipped."""
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
                out += [str((Path(root) / f).resolve()) for f in sorted(files) if not f.startswith((".", "_"))]
        elif path.exists():
            out.append(str(path.resolve()))
        elif any(c in str(p) for c in "*?["):  # a glob: every file it matches (none is fine)
            out += list_inputs(sorted(glob.glob(str(p), recursive=True)))
        else:
            raise FileNotFoundError(f"input {str(path)!r} does not exist")
    seen: set[str] = set()
    return [f for f in out if not (f in seen or seen.add(f))]  # type: ignore[func-returns-value]


class Ledger:
    """The run manifests of one target root."""

    def __init__(self, target: str | os.PathLike[str]) -> None:
        self.dir = Path(target) / "_lakecdc" / "runs"

    def manifests(self) -> list[Manifest]:
        if not self.dir.is_dir():
            return []
        return [Manifest.from_json(p.read_text()) for p in sorted(self.dir.glob("run-*.json"))]

    def applied(self) -> dict[str, InputFile]:
        """Every input named by any manifest (planned ones included: they will be resumed)."""
        return {f.path: f for m in self.manifests() for f in m.inputs}

    def pending(self) -> list[Manifest]:
        """The runs that did not finish, oldest first.

        More than one is left when a table failed in several runs in a row: each run is then
        resumed in order, so the failed table gets its changes in the order they came (the other
        tables skip the runs they committed).
        """
        return [m for m in self.manifests() if m.status == "planned"]

    def next_run_id(self) -> int:
        runs = self.manifests()
        return (runs[-1].run_id + 1) if runs else 1

    def write(self, manifest: Manifest) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a manifest."""
        self.dir.mkdir(parents=True, exist_ok=True)
        final = self.dir / f"run-{manifest.run_id:010d}.json"
        tmp = final.with_suffix(".json.tmp")
        tmp.write_text(manifest.to_json())
        os.replace(tmp, final)

    def plan(self, fmt: str, files: Sequence[str]) -> tuple[list[Manifest], list[str]]:
        """The unfinished runs to resume (oldest first) and the files no manifest names yet."""
        pending = self.pending()
        for run in pending:
            for f in run.inputs:
                now = InputFile.of(f.path) if os.path.exists(f.path) else None
                if now is None or now.size < f.size:
                    raise InputChangedError(
                        f"run {run.run_id} did not finish and its input {f.path!r} is now "
                        f"{'gone' if now is None else 'shorter'}; restore it to resume exactly once"
                    )
        applied = self.applied()
        return pending, [f for f in files if f not in applied]
