"""Table maintenance: compaction, Z-order, vacuum, checkpoints and tombstone expiry.

Merges every few minutes leave many small files; reads slow down until they are compacted.
:func:`maintain` keeps every table of a target fast:

1. **compaction**: small files bin-packed into files of ``target_file_size`` (Delta's OPTIMIZE),
   or **Z-ordered** by the key columns (``zorder="keys"``) or chosen columns, so that a MERGE's
   key-range pruning and readers' filters skip most files;
2. **tombstone expiry**: deleted keys older than ``tombstone_retention`` stop blocking late
   events (the internal tombstone table is compacted too);
3. **vacuum**: files that no table version within ``vacuum_retention`` reads are deleted. A
   reader that started on an older version, or a time-travel query, keeps working as long as its
   version is younger than the retention. Below Delta's own minimum (``delta.
   deletedFileRetentionDuration``, 7 days by default) vacuum refuses unless ``force=True``;
4. **checkpoint**: a checkpoint of the current version, and log files older than the log
   retention removed, so that opening the table reads one Parquet file instead of many JSON ones.

Compaction and Z-order rewrite files without changing a single row (the tests compare
snapshots); lakecdc's exactly-once marks (Delta ``txn`` actions) survive them.

Example:
    >>> for r in lakecdc.maintain("lake/", zorder="keys"):        # doctest: +SKIP
    ...     print(r.line())
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from lakecdc.config import arguments as A
from lakecdc.config import values as V
from lakecdc.config.settings import DEFAULT_TOMBSTONE_RETENTION, DEFAULT_VACUUM_RETENTION
from lakecdc.errors import ConfigError
from lakecdc.lake.lease import hold
from lakecdc.lake.state import expire_tombstones, known_tables, table_path, tombstone_path
from lakecdc.merge.commit import retry_conflicts
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.merge.pick import make_engine
from lakecdc.spark.session import get_spark

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

@dataclass(frozen=True)
class MaintenanceReport:
    """What :func:`maintain` did to one table."""

    source_table: str
    target: str
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int
    files_removed: int
    files_added: int
    zorder: tuple[str, ...]
    tombstones_expired: int
    files_vacuumed: int | None
    checkpoint: bool
    version_before: int
    version_after: int
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["zorder"] = list(self.zorder)
        return out

    def line(self) -> str:
        how = f"z-ordered by {', '.join(self.zorder)}" if self.zorder else "compacted"
        vac = "" if self.files_vacuumed is None else f", {self.files_vacuumed} vacuumed"
        return (
            f"{self.source_table}: {how}: files {self.files_before} -> {self.files_after} "
            f"({self.files_removed} rewritten into {self.files_added}), "
            f"{_mib(self.bytes_before)} -> {_mib(self.bytes_after)}{vac}, "
            f"{self.tombstones_expired} tombstone(s) expired, version {self.version_before} -> "
            f"{self.version_after}, {self.seconds:.1f}s"
        )


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def maintain(
    target: str | os.PathLike[str],
    *,
    tables: Sequence[str] | str | None = None,
    compact: bool = True,
    zorder: str | Mapping[str, Sequence[str]] | Sequence[str] | None = None,
    target_file_size: int | None = None,
    vacuum_retention: dt.timedelta | str | None = DEFAULT_VACUUM_RETENTION,
    force: bool = False,
    checkpoint: bool = True,
    tombstone_retention: dt.timedelta | str = DEFAULT_TOMBSTONE_RETENTION,
    engine: str | DeltaRsEngine | None = "delta-rs",
    spark: SparkSession | None = None,
    storage_options: Mapping[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    wait: float | None = None,
) -> list[MaintenanceReport]:
    """Compact (or Z-order), expire tombstones, vacuum and checkpoint the tables under ``target``.

    Args:
        target: the root ``lakecdc apply`` wrote to.
        tables: source table names to maintain (default: every table the target records).
        compact: bin-pack small files (skipped when False, unless ``zorder`` is given).
        zorder: ``"keys"`` (each table's key columns), a list of columns for every table, or a
            mapping ``{table: [columns]}``; None: plain compaction.
        target_file_size: bytes per file after compaction (default: the engine's, 100-256 MiB).
        vacuum_retention: history kept by vacuum (a timedelta or ``"7d"``); None skips vacuum.
        force: allow a ``vacuum_retention`` below the table's minimum (breaks readers of older
            versions and time travel beyond it).
        checkpoint: write a checkpoint and clean up old log files.
        tombstone_retention: deleted keys older than this stop blocking late events (a
            timedelta or ``"7d"``).
        engine: ``"delta-rs"`` (default), ``"delta-spark"`` or ``"auto"``.
        wait: seconds to wait for another writer of ``target`` (a run, a stream's batch) to
            finish; maintenance holds the target's lease as runs do (:mod:`lakecdc.lake.lease`), so
            it never rewrites files under a run. Default: raise
            :class:`~lakecdc.lake.lease.TargetBusy` at once.
    """
    target = A.path("maintain", "target", target)
    tables = [tables] if isinstance(tables, str) else tables
    if vacuum_retention is not None:
        vacuum_retention = V.duration(vacuum_retention, "vacuum_retention")  # ("7d" as well as a timedelta)
    tombstone_retention = V.duration(tombstone_retention, "tombstone_retention")
    A.session("maintain", spark)
    A.optional_callable("maintain", "progress", progress, "each step's message (a str)")
    with hold(target, command="maintain", wait=wait):
        return _maintain(target, tables=tables, compact=compact, zorder=zorder, target_file_size=target_file_size,
                         vacuum_retention=vacuum_retention, force=force, checkpoint=checkpoint,
                         tombstone_retention=tombstone_retention, engine=engine, spark=spark,
                         storage_options=storage_options, progress=progress)


def _maintain(
    target: str, *, tables: Sequence[str] | None, compact: bool,
    zorder: str | Mapping[str, Sequence[str]] | Sequence[str] | None, target_file_size: int | None,
    vacuum_retention: dt.timedelta | None, force: bool, checkpoint: bool, tombstone_retention: dt.timedelta,
    engine: str | DeltaRsEngine | None, spark: SparkSession | None, storage_options: Mapping[str, str] | None,
    progress: Callable[[str], None] | None,
) -> list[MaintenanceReport]:
    say = progress or (lambda _msg: None)
    if engine is None or engine == "delta-rs":
        eng = DeltaRsEngine(storage_options)
    else:
        eng = make_engine(engine, spark or get_spark(), storage_options)
    known = known_tables(target)
    wanted = list(tables) if tables else sorted(known)
    unknown = [t for t in wanted if t not in known]
    if unknown:
        raise ConfigError(f"no table {', '.join(map(repr, unknown))} under {target}; it holds {sorted(known) or 'none'}")
    if vacuum_retention is not None and vacuum_retention < dt.timedelta(0):
        raise ConfigError("vacuum retention must not be negative")
    columns_of = {table: _zorder_columns(zorder, table, known[table]) for table in wanted}
    for table in wanted:  # every table's settings checked before the first one is rewritten
        _check_settings(eng, target, table, zorder=columns_of[table], vacuum_retention=vacuum_retention, force=force)
    reports = []
    for table in wanted:
        columns = columns_of[table]
        say(f"{table}: {'z-ordering by ' + ', '.join(columns) if columns else 'compacting'}")
        reports.append(_maintain_one(
            eng, target, table, compact=compact or bool(columns), zorder=columns, target_file_size=target_file_size,
            vacuum_retention=vacuum_retention, force=force, checkpoint=checkpoint,
            tombstone_retention=tombstone_retention,
        ))
        say(reports[-1].line())
    return reports


def _zorder_columns(
    zorder: str | Mapping[str, Sequence[str]] | Sequence[str] | None, table: str, keys: tuple[str, ...]
) -> tuple[str, ...]:
    if zorder is None:
        return ()
    if isinstance(zorder, str):
        if zorder != "keys":
            raise ConfigError(f"zorder {zorder!r}: use 'keys', a list of columns or {{table: [columns]}}")
        return keys
    if isinstance(zorder, Mapping):
        return tuple(zorder.get(table, ()))
    return tuple(zorder)


def _check_settings(
    eng: DeltaRsEngine, target: str, table: str, *, zorder: tuple[str, ...], vacuum_retention: dt.timedelta | None,
    force: bool,
) -> None:
    """Raise a :class:`ConfigError` when ``table`` cannot be maintained so (a Z-order column it
    lacks, a vacuum retention below its minimum); writes nothing."""
    path = table_path(target, table)
    if zorder:
        columns = {f.name for f in eng.schema(path).fields}
        missing = [c for c in zorder if c not in columns]
        if missing:
            raise ConfigError(f"{table}: cannot Z-order by {missing}: no such column (columns: {sorted(columns)})")
    if vacuum_retention is not None and not force:
        _vacuum(eng, table, path, vacuum_retention, force=False, dry_run=True)


def _vacuum(eng: DeltaRsEngine, table: str, path: str, retention: dt.timedelta, *, force: bool, dry_run: bool) -> int:
    """Vacuum ``path`` (or count what it would delete, ``dry_run``); a retention below the table's
    minimum is a :class:`ConfigError` saying what to do."""
    try:
        return eng.vacuum(path, retention_hours=int(retention.total_seconds() // 3600), enforce=not force,
                          dry_run=dry_run)
    except Exception as exc:
        if "retention" not in str(exc).lower():
            raise
        raise ConfigError(
            f"{table}: vacuum retention {retention} is below the table's minimum ({exc}); "
            "readers of older versions and time travel within it would break. Use a longer retention, "
            "or force it (lakecdc maintain --force) if no reader needs those versions"
        ) from exc


def _maintain_one(
    eng: DeltaRsEngine, target: str, table: str, *, compact: bool, zorder: tuple[str, ...],
    target_file_size: int | None, vacuum_retention: dt.timedelta | None, force: bool, checkpoint: bool,
    tombstone_retention: dt.timedelta,
) -> MaintenanceReport:
    path = table_path(target, table)
    started = time.perf_counter()
    version_before = eng.version(path)
    files_before, bytes_before = eng.files(path)
    removed = added = 0
    if compact and files_before > 1 or zorder:
        removed, added = retry_conflicts(
            lambda: eng.compact(path, target_size=target_file_size, zorder=zorder), what=f"compact {table}"
        )
    stones = tombstone_path(target, table)
    expired = 0
    if eng.exists(stones):
        expired = expire_tombstones(eng, target, table, tombstone_retention, dt.datetime.now(dt.timezone.utc))
        if compact and eng.files(stones)[0] > 1:
            eng.compact(stones, target_size=target_file_size)
    vacuumed: int | None = None
    if vacuum_retention is not None:
        hours = int(vacuum_retention.total_seconds() // 3600)
        vacuumed = _vacuum(eng, table, path, vacuum_retention, force=force, dry_run=False)
        if eng.exists(stones):
            eng.vacuum(stones, retention_hours=hours, enforce=not force, dry_run=False)
    if checkpoint:
        eng.checkpoint(path)
    files_after, bytes_after = eng.files(path)
    return MaintenanceReport(
        source_table=table, target=path, files_before=files_before, files_after=files_after,
        bytes_before=bytes_before, bytes_after=bytes_after, files_removed=removed, files_added=added,
        zorder=zorder, tombstones_expired=expired, files_vacuumed=vacuumed, checkpoint=checkpoint,
        version_before=version_before, version_after=eng.version(path), seconds=time.perf_counter() - started,
    )
