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

Steps 1-4 run under the target's lease (:mod:`lakecdc.lake.lease`): one writer plans at a time, and
``N`` (the newest manifest's id + 1) is created only if no manifest ``N`` exists. Before step 2 a
run checks that the ledger and the tables agree (:mod:`lakecdc.maintenance.doctor`): a ledger lost or behind
the tables' transaction versions, or a table behind the Delta version a run recorded, stops it.
"""

from __future__ import annotations

import fnmatch
import glob
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from lakecdc.errors import InputChangedError, InputNotFoundError, LakecdcError
from lakecdc.lake.lease import create_exclusive

Status = Literal["planned", "committed"]


@dataclass(frozen=True)
class InputFile:
    """One input of a run. ``path`` is what the decoder reads; for the appended part of a file
    applied before, that is a copy of bytes ``start`` to ``end`` of ``origin`` (see
    :meth:`Ledger.plan`)."""

    path: str
    size: int
    mtime_ns: int
    origin: str | None = None
    start: int = 0
    end: int | None = None

    @classmethod
    def of(cls, path: str) -> InputFile:
        st = os.stat(path)
        return cls(path=path, size=st.st_size, mtime_ns=st.st_mtime_ns)

    @property
    def source(self) -> str:
        """The landing file this input came from."""
        return self.origin or self.path

    @property
    def consumed(self) -> int:
        """How far into :attr:`source` the changes have been read."""
        return self.end if self.end is not None else self.size


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
            raise InputNotFoundError(str(path))
    seen: set[str] = set()
    return [f for f in out if not (f in seen or seen.add(f))]  # type: ignore[func-returns-value]


class Ledger:
    """The run manifests of one target root."""

    def __init__(self, target: str | os.PathLike[str]) -> None:
        self.dir = Path(target) / "_lakecdc" / "runs"

    def manifests(self) -> list[Manifest]:
        if not self.dir.is_dir():
            return []
        out = []
        for p in sorted(self.dir.glob("run-*.json")):
            try:
                out.append(Manifest.from_json(p.read_text()))
            except (ValueError, TypeError, KeyError) as exc:
                target = self.dir.parent.parent
                raise LakecdcError(
                    f"the ledger's manifest {p} cannot be read ({type(exc).__name__}: {exc}); nothing was applied. "
                    f"Restore it from a backup, or move it away and rebuild it from the run reports with "
                    f"'lakecdc repair --target {target}'"
                ) from exc
        return out

    def applied(self) -> dict[str, InputFile]:
        """Every input named by any manifest (planned ones included: they will be resumed)."""
        return {f.path: f for m in self.manifests() for f in m.inputs}

    def consumed(self) -> dict[str, int]:
        """Per landing file, how many of its bytes some manifest covers."""
        out: dict[str, int] = {}
        for m in self.manifests():
            for f in m.inputs:
                out[f.source] = max(out.get(f.source, 0), f.consumed)
        return out

    def pending(self) -> list[Manifest]:
        """The runs that did not finish, oldest first.

        More than one is left when a table failed in several runs in a row: each run is then
        resumed in order, so the failed table gets its changes in the order they came (the other
        tables skip the runs they committed).
        """
        return [m for m in self.manifests() if m.status == "planned"]

    def forget(self, matches: Callable[[str], bool]) -> list[str]:
        """Make the landing files ``matches`` picks new again, so that the next run applies them
        (``apply(reapply=...)``): their inputs are taken out of the committed manifests that name
        them, and listed under ``reapplied`` in those manifests' summaries. A run that did not
        finish must be resumed first. Returns the files forgotten."""
        gone: list[str] = []
        for m in self.manifests():
            hit = [f for f in m.inputs if matches(f.source)]
            if not hit:
                continue
            if m.status != "committed":
                raise InputChangedError(
                    f"run {m.run_id} did not finish and reads {hit[0].source!r}: run apply once without "
                    f"reapply to finish it, then re-apply the file"
                )
            m.inputs = [f for f in m.inputs if not matches(f.source)]
            m.summary = {**(m.summary or {}), "reapplied": sorted({*(m.summary or {}).get("reapplied", []),
                                                                   *(f.source for f in hit)})}
            self.write(m)
            gone += [f.source for f in hit if f.source not in gone]
        return gone

    def next_run_id(self) -> int:
        runs = self.manifests()
        return (runs[-1].run_id + 1) if runs else 1

    def write(self, manifest: Manifest, *, new: bool = False) -> None:
        """Write atomically (temp file + rename) so a crash never leaves half a manifest.

        ``new``: the manifest of a run just planned; it is created only if no manifest of its run
        id exists (two runs never share an id, even without the target's lease).
        """
        self.dir.mkdir(parents=True, exist_ok=True)
        final = self.dir / f"run-{manifest.run_id:010d}.json"
        if not new:
            tmp = final.with_name(f".{final.name}.{os.getpid()}.{time.monotonic_ns()}.tmp")
            tmp.write_text(manifest.to_json())
            os.replace(tmp, final)
            return
        if not create_exclusive(final, manifest.to_json()):
            raise LakecdcError(
                f"run {manifest.run_id} of {self.dir.parent.parent} was planned by another writer at the same "
                f"time; nothing of this run was applied: run again (and run one writer per target)"
            )

    def plan(
        self, fmt: str, files: Sequence[str], *, appendable: bool = False, min_age: float = 0.0,
    ) -> Plan:
        """The unfinished runs to resume (oldest first) and the new inputs: files no manifest names
        yet, and the new complete lines of files that grew since a run read them.

        Files changed less than ``min_age`` seconds ago are left for a later run (a writer may
        still be at work). A file that grew after it was applied is read on from where the last
        run stopped when the format has one message per line (``appendable``): its new complete
        lines are copied to ``_lakecdc/appended/`` and applied as an input of their own (a line
        the earlier read caught half-written, and quarantined, is read again whole). Other formats
        cannot be applied in parts: that is an :class:`InputChangedError`, as is a file that
        became shorter than what was applied (rewritten in place).
        """
        pending = self.pending()
        for run in pending:
            for given in run.inputs:
                now = InputFile.of(given.path) if os.path.exists(given.path) else None
                if now is None or now.size < given.size:
                    raise InputChangedError(
                        f"run {run.run_id} did not finish and its input {given.path!r} is now "
                        f"{'gone' if now is None else 'shorter'}; restore it to resume exactly once"
                    )
        consumed = self.consumed()
        fresh: list[InputFile] = []
        waiting: list[str] = []
        young = time.time_ns() - int(min_age * 1e9)
        for f in files:
            st = os.stat(f)
            if min_age > 0 and st.st_mtime_ns > young:
                waiting.append(f)
            elif f not in consumed:
                fresh.append(InputFile(path=f, size=st.st_size, mtime_ns=st.st_mtime_ns))
            elif st.st_size != consumed[f]:
                part = self._appended(fmt, f, consumed[f], st.st_size, appendable=appendable)
                if part is not None:
                    fresh.append(part)
        return Plan(pending=pending, new=fresh, waiting=waiting)

    def _appended(self, fmt: str, path: str, done: int, size: int, *, appendable: bool) -> InputFile | None:
        """The complete lines ``path`` gained after byte ``done``, copied into a file of their own."""
        if size < done:
            raise InputChangedError(
                f"{path!r} is {size} bytes now, shorter than the {done} bytes already applied: it was "
                f"rewritten in place; write changes to new files (a rewritten file cannot be applied exactly once)"
            )
        if not appendable:
            raise InputChangedError(
                f"{path!r} grew from {done} to {size} bytes after it was applied; {fmt} files cannot be "
                f"applied in parts: write new changes to new files, or let files settle before they are "
                f"read (min_file_age / --min-file-age)"
            )
        with open(path, "rb") as fh:
            start = _resume_at(fh, done)
            fh.seek(start)
            data = fh.read(size - start)
        cut = data.rfind(b"\n")
        if cut < 0:
            return None  # no complete line yet
        end = start + cut + 1
        name = Path(path)
        digest = hashlib.sha1(path.encode()).hexdigest()[:10]
        copy = self.dir.parent / "appended" / f"{name.stem}.{digest}.{start}-{end}{name.suffix}"
        copy.parent.mkdir(parents=True, exist_ok=True)
        tmp = copy.with_name(copy.name + ".tmp")
        tmp.write_bytes(data[: cut + 1])
        os.replace(tmp, copy)
        st = copy.stat()
        return InputFile(path=str(copy), size=st.st_size, mtime_ns=st.st_mtime_ns, origin=path, start=start, end=end)


@dataclass(frozen=True)
class Plan:
    """What a run of :func:`lakecdc.apply` has to do (see :meth:`Ledger.plan`)."""

    pending: list[Manifest]
    new: list[InputFile]
    waiting: list[str]


def _resume_at(fh: Any, done: int) -> int:
    """Where to go on reading a file of lines of which ``done`` bytes were read: there, or at the
    start of the line the earlier read cut (it saw half of it)."""
    if done == 0:
        return 0
    fh.seek(done - 1)
    last, following = fh.read(1), fh.read(1)
    if last == b"\n":
        return done
    if following == b"\n":
        return done + 1  # the earlier read ended exactly at a line's end
    block = 1 << 16
    pos = done
    while pos > 0:
        lo = max(0, pos - block)
        fh.seek(lo)
        chunk = fh.read(pos - lo)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            return lo + nl + 1
        pos = lo
    return 0


def reapply_matcher(patterns: str | Sequence[str]) -> Callable[[str], bool]:
    """Whether a file path is chosen by ``patterns`` (paths or fnmatch patterns, matched against
    the whole resolved path or the file name)."""
    items = [patterns] if isinstance(patterns, (str, os.PathLike)) else list(patterns)
    whole = [str(Path(os.fspath(p)).expanduser().absolute()) for p in items]
    exact = {str(Path(os.fspath(p)).resolve()) for p in items}
    names = [os.fspath(p) for p in items if os.sep not in os.fspath(p)]

    def chosen(path: str) -> bool:
        return (path in exact or any(fnmatch.fnmatchcase(path, w) for w in whole)
                or any(fnmatch.fnmatchcase(Path(path).name, n) for n in names))

    return chosen
