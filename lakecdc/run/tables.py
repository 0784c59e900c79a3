"""A run's work table by table: several tables at once, a failed table's summary, and what
became of each file's records once every table is done."""

from __future__ import annotations

from collections.abc import Callable, Collection
from concurrent.futures import CancelledError, ThreadPoolExecutor
from typing import TYPE_CHECKING, TypeVar

from pyspark.sql import functions as F

from lakecdc.errors import explain
from lakecdc.lake.state import table_path
from lakecdc.lake.summary import TableSummary

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from lakecdc.config.settings import Progress
    from lakecdc.merge.quarantine import Quarantined
    from lakecdc.run.profile import Accounts


T_ = TypeVar("T_")


def each_table(
    tables: list[str], work: Callable[[str], T_], parallel: int, *, fatal: tuple[type[BaseException], ...],
    discard: Callable[[T_], None] | None = None,
) -> list[tuple[str, T_ | Exception]]:
    """``work`` on each table, ``parallel`` at a time, as ``(table, result or the exception it
    raised)`` in the tables' order (so summaries and messages do not depend on timing).

    A ``fatal`` exception is raised once the tables already started have finished (those not
    started yet are not started): it stops the run, as it would one table at a time. The results
    it leaves unreturned go to ``discard`` (to release what they hold).
    """
    if parallel <= 1 or len(tables) <= 1:
        out: list[tuple[str, T_ | Exception]] = []
        for table in tables:
            try:
                out.append((table, work(table)))
            except fatal:
                _discard(out, discard)
                raise
            except Exception as exc:  # noqa: BLE001 - reported per table by the caller
                out.append((table, exc))
        return out
    with ThreadPoolExecutor(max_workers=min(parallel, len(tables)), thread_name_prefix="lakecdc-table") as pool:
        futures = [(table, pool.submit(work, table)) for table in tables]
        results: list[tuple[str, T_ | Exception]] = []
        stop: BaseException | None = None
        for table, fut in futures:
            try:
                results.append((table, fut.result()))
            except CancelledError:
                continue
            except fatal as exc:
                if stop is None:
                    stop = exc
                    for _, other in futures:
                        other.cancel()  # (those already running finish)
            except Exception as exc:  # noqa: BLE001 - reported per table by the caller
                results.append((table, exc))
    if stop is not None:
        _discard(results, discard)
        raise stop
    return results


def _discard(results: list[tuple[str, T_ | Exception]], discard: Callable[[T_], None] | None) -> None:
    for _, result in results:
        if discard is not None and not isinstance(result, Exception):
            discard(result)


def failed_table(target: str, table: str, prof: dict, exc: BaseException, say: Progress) -> TableSummary:
    """The summary of a table whose merge failed: the run stays unfinished and is resumed by the
    next one, for this table only (the others committed theirs)."""
    reason = explain(exc)
    say(f"{table}: FAILED ({reason}); the other tables go on, this one is retried by the next run")
    return TableSummary(table, table_path(target, table), events=prof["events"], status="failed", error=reason)


def as_skipped(events: DataFrame, where: Column, kind: str) -> DataFrame:
    """``events`` with the good row changes ``where`` picks turned into skipped records of ``kind``."""
    hit = F.coalesce(where, F.lit(False)) & F.col("op").isNotNull() & F.col("_error").isNull()
    mark = F.create_map(F.lit("skipped"), F.lit(kind))
    source = F.map_concat(F.map_filter(F.coalesce("source", F.create_map().cast("map<string,string>")),
                                       lambda k, _v: k != "skipped"), mark)
    return events.select(
        *[F.when(hit, source).otherwise(F.col(c)).alias(c) if c == "source"
          else F.when(~hit, F.col(c)).alias(c) if c in ("op", "after") else F.col(c) for c in events.columns]
    )


def file_accounts(
    accounts: Accounts | None, quarantined: list[Quarantined], failed: Collection[str] = (),
) -> dict[str, dict[str, int]]:
    """Per file, what became of its records (:data:`~lakecdc.lake.summary.FILE_ACCOUNTS`): the
    profile's accounts, with the row changes a later step quarantined (a value that does not fit
    its column, ...) moved to ``quarantined``, those of ``failed`` tables to ``failed`` (the next
    run applies them), and the others split into ``applied`` and ``duplicate_or_late`` as the
    tables' folds found them."""
    if accounts is None:
        return {}
    out = {f: dict(acc) for f, acc in accounts.files.items()}
    total: dict[str, int] = {}
    for q in quarantined:
        total[q.file] = total.get(q.file, 0) + 1
    for f, n in total.items():
        acc = out.setdefault(f, {})
        later = n - acc.get("quarantined", 0)
        if later > 0:
            acc["events"] = max(0, acc.get("events", 0) - later)
            acc["quarantined"] = n
    for (f, table), n in accounts.events.items():
        if table in failed and f in out:
            moved = min(n, out[f].get("events", 0))
            out[f]["events"] = out[f].get("events", 0) - moved
            out[f]["failed"] = out[f].get("failed", 0) + moved
    for f, acc in out.items():
        events = acc.pop("events", 0)
        late = min(events, sum(n for (g, table), n in accounts.late.items() if g == f and table not in failed))
        acc["applied"], acc["duplicate_or_late"] = events - late, late
    return {f: {k: v for k, v in acc.items() if v} for f, acc in out.items()}
