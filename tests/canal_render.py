"""Render oracle histories as Canal JSON (seed 002), and drive a rendered history through lakecdc.

A history (``test_property.Scenario.events``, in seq order) becomes Canal messages: consecutive
events of one table, one op and one transaction share a message (up to three rows in ``data``),
as Canal writes the rows of one statement. Each message gets ``es`` (the first event's ``op_ts``
cut to milliseconds) and ``id``: ids grow inside one ``es`` but *fall* from one ``es`` to the
next, so a reader that orders by ``id`` before ``es`` gets the wrong answer.

What the oracle is given is what the messages say (:func:`canal_view`): an update's after image is
its ``data`` row and its before image the ``data`` row with the ``old`` values laid over it; the
seq is ``(es, id)``: messages that tie on it keep the order they were written in, and the rows of
one message their order in ``data`` (the oracle's stable sort keeps the list's order). Kafka
re-delivers whole messages, so a replayed event replays its message (every row of it).

Example::

    >>> from oracle import Event
    >>> e = Event("S.T", "U", "2024-01-01 00:00:00.000000", "1", 0, {"ID": 1, "V": "a"}, {"ID": 1, "V": "b"}, ("ID",))
    >>> canal_view(e).before
    {'ID': 1, 'V': 'a'}
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

try:
    from tests.oracle import Event
    from tests.scenario_driver import Rendered, drive
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from oracle import Event  # type: ignore[no-redef]
    from scenario_driver import Rendered, drive  # type: ignore[no-redef]

ES_BASE_ID = 100_000
MAX_ROWS = 3


@dataclass(frozen=True)
class Message:
    """One rendered message and the oracle events it stands for (in ``data`` order)."""

    text: str
    events: tuple[Event, ...]


# -- Canal -------------------------------------------------------------------------------------------


def split_table(name: str) -> tuple[str, str]:
    """``PDB1.QASOURCE.TORDLINE`` -> (``PDB1.QASOURCE``, ``TORDLINE``): database and table."""
    db, _, table = name.rpartition(".")
    return db, table


def canal_text(value: Any) -> str | None:
    """Canal writes every value as a string (NULL as null)."""
    return None if value is None else str(value)


def canal_view(event: Event) -> Event:
    """The event as Canal can say it: an update's before image is ``data`` with ``old`` over it."""
    if event.op != "U":
        return event
    after = event.after or {}
    old = changed_old(event)
    return dataclasses.replace(event, before={**after, **old})


def changed_old(event: Event) -> dict[str, Any]:
    """``old`` of an update: the before values of the columns that changed (or are not in after)."""
    after = event.after or {}
    return {c: v for c, v in (event.before or {}).items() if c not in after or after[c] != v}


def _groups(events: Sequence[Event]) -> list[list[int]]:
    groups: list[list[int]] = []
    for i, e in enumerate(events):
        last = groups[-1] if groups else None
        if (
            last is not None and e.op != "T" and len(last) < MAX_ROWS
            and all(events[j].table == e.table and events[j].op == e.op and events[j].op_ts == e.op_ts for j in last)
        ):
            last.append(i)
        else:
            groups.append([i])
    return groups


_EPOCH = datetime(1970, 1, 1)


def _es_ms(op_ts: str) -> int:
    """An oracle ``op_ts`` as Canal's ``es``: milliseconds since 1970 (the microseconds cut off)."""
    return (datetime.strptime(op_ts, "%Y-%m-%d %H:%M:%S.%f") - _EPOCH) // timedelta(milliseconds=1)


def canal_messages(
    events: Sequence[Event], columns: Mapping[str, Mapping[str, str]], *, primary_keys: bool = True,
) -> tuple[list[Message], list[int]]:
    """The history as Canal messages, and for each event the index of its message.

    ``columns`` gives each table's MySQL column types (``{"ID": "bigint(20)", ...}``).
    """
    messages: list[Message] = []
    message_of: list[int] = [0] * len(events)
    last_es, group, rank = None, 0, 0
    for n, members in enumerate(_groups(events)):
        first = events[members[0]]
        es = _es_ms(first.op_ts)
        if last_es is not None and es != last_es:
            group, rank = group + 1, 0
        elif last_es is not None:
            rank += 1
        last_es = es
        msg_id = (ES_BASE_ID - group) * 100 + rank
        kind = "INIT" if first.op == "I" and members[0] % 4 == 0 else {"I": "INSERT", "U": "UPDATE", "D": "DELETE", "T": "TRUNCATE"}[first.op]
        db, table = split_table(first.table)
        when = f"{_EPOCH + timedelta(milliseconds=es):%Y-%m-%d %H:%M:%S.%f}"
        types = dict(columns[first.table])
        seen = [  # (mysqlType declares every column of the table, except in a truncate)
            dataclasses.replace(canal_view(events[i]), op="R" if kind == "INIT" else events[i].op, op_ts=when,
                                pos=f"{msg_id:020d}", idx=0, declared=tuple(types) if kind != "TRUNCATE" else ())
            for i in members
        ]
        body: dict[str, Any] = {"data": None, "database": db, "es": es, "id": msg_id, "isDdl": kind == "TRUNCATE",
                                "mysqlType": None, "old": None, "pkNames": None, "sql": "", "sqlType": None,
                                "table": table, "ts": es + 771, "type": kind}
        if kind == "TRUNCATE":
            body["sql"] = f"TRUNCATE TABLE {table}"
        else:
            rows = [events[i].before if first.op == "D" else events[i].after for i in members]
            body["data"] = [{c: canal_text(v) for c, v in (row or {}).items()} for row in rows]
            if first.op == "U":
                body["old"] = [{c: canal_text(v) for c, v in changed_old(events[i]).items()} for i in members]
            body["mysqlType"] = types
            body["sqlType"] = {c: (-5 if t.startswith("bigint") else 12) for c, t in types.items()}
            body["pkNames"] = list(first.keys) if primary_keys else None
        messages.append(Message(json.dumps(body, ensure_ascii=False, separators=(",", ":")), tuple(seen)))
        for i in members:
            message_of[i] = n
    return messages, message_of


def ddl_message(table: str, es: int) -> str:
    """An ``ALTER TABLE`` message (isDdl true): a skipped record."""
    db, name = split_table(table)
    return json.dumps({"data": None, "database": db, "es": es, "id": 1, "isDdl": True, "mysqlType": None,
                       "old": None, "pkNames": None, "sql": f"ALTER TABLE {name} COMMENT 'x'", "sqlType": None,
                       "table": name, "ts": es, "type": "ALTER"})


def mysql_columns(specs: Sequence[Any]) -> dict[str, dict[str, str]]:
    """MySQL types of the scenario's tables: ``ID`` bigint(20), ``CODE`` varchar(16), int columns
    bigint, string columns varchar(255)."""
    out = {}
    for spec in specs:
        cols = {k: ("bigint(20)" if k == "ID" else "varchar(16)") for k in spec.keys}
        cols.update({c: ("bigint" if kind == "int" else "varchar(255)") for c, kind in spec.columns.items()})
        out[spec.name] = cols
    return out


# -- a fixed history ----------------------------------------------------------------------------------


def key_changes() -> Any:
    """A fixed history (a ``test_property.Scenario``): in Canal, multi-row messages of inserts,
    updates (partial, one moving a key, a chain of key moves) and deletes; a delete then a
    re-insert, a truncate of another table, replays of whole messages across runs."""
    try:
        from tests.test_property import Scenario, TableSpec
    except ModuleNotFoundError:
        from test_property import Scenario, TableSpec  # type: ignore[no-redef]

    cust = TableSpec("SHOP.CUSTOMER", ("ID",), [(1,), (2,), (3,), (4,), (5,)], {"C1": "int", "C2": "str"})
    line = TableSpec("SHOP.ORDER_LINE", ("ID", "CODE"), [(1, "x"), (1, "y")], {"C1": "str"})

    def ev(t: int, spec: TableSpec, op: str, before: dict | None = None, after: dict | None = None) -> Event:
        return Event(spec.name, op, f"2024-01-01 00:00:{t:02d}.000000", "0", 0, before, after, spec.keys)

    events = [
        ev(0, cust, "I", after={"ID": 1, "C1": 10, "C2": "a"}),                       # 0 one message,
        ev(0, cust, "I", after={"ID": 2, "C1": 20, "C2": None}),                      # 1 three rows
        ev(0, cust, "I", after={"ID": 3, "C1": 30, "C2": "c"}),                       # 2
        ev(1, cust, "U", before={"ID": 1, "C1": 10, "C2": "a"}, after={"ID": 1, "C1": 11, "C2": "a"}),  # 3
        ev(1, cust, "U", before={"ID": 2, "C1": 20, "C2": None}, after={"ID": 5, "C1": 20, "C2": None}),  # 4 key move
        ev(2, cust, "U", before={"ID": 5}, after={"ID": 4, "C2": "moved"}),           # 5 chained, partial
        ev(3, line, "I", after={"ID": 1, "CODE": "x", "C1": "p"}),                    # 6
        ev(4, cust, "D", before={"ID": 3, "C1": 30, "C2": "c"}),                      # 7
        ev(4, cust, "D", before={"ID": 1, "C1": 11, "C2": "a"}),                      # 8 (same message)
        ev(5, cust, "I", after={"ID": 3, "C1": 33, "C2": "again"}),                   # 9 re-insert
        ev(6, line, "T"),                                                             # 10
        ev(7, line, "I", after={"ID": 1, "CODE": "y", "C1": None}),                   # 11
    ]
    runs = [[0, 1, 2, 3, 4, 6], [5, 7, 8, 3, 10], [9, 11, 0, 5]]
    return Scenario(specs=[cust, line], events=events, runs=runs, pk_update="delete-insert", primary_keys=True, source={})


# -- delivering rendered messages ----------------------------------------------------------------------

#: render(run's event indices, run number) -> (file text, the events the oracle applies)
RunRenderer = Callable[[list[int], int], tuple[str, list[Event]]]


def message_runs(messages: Sequence[Message], message_of: Sequence[int], *, header: Callable[[int], list[str]]) -> RunRenderer:
    """A renderer delivering, per run, the message of each event in the run (an event whose message
    the run just delivered for another of its events rides along), after ``header(run)`` lines."""

    def render(run: list[int], number: int) -> tuple[str, list[Event]]:
        lines = list(header(number))
        seen: list[Event] = []
        last, used = None, set()
        for i in run:
            m = message_of[i]
            if m == last and i not in used:
                used.add(i)
                continue
            lines.append(messages[m].text)
            seen.extend(messages[m].events)
            last, used = m, {i}
        return "".join(line + "\n" for line in lines), seen

    return render


def run_rendered_scenario(
    spark: Any, sc: Any, workdir: Path, *, fmt: str, render: RunRenderer, options: Mapping[str, str] | None = None,
    max_runs: int = 3, expect_skipped: Callable[[int], dict[str, int]] | None = None,
) -> None:
    """:func:`scenario_driver.drive` over text runs (``render(run, number) -> (text, seen)``); with
    ``expect_skipped`` each run's skipped records per table are checked too."""

    def rendered(run: list[int], number: int) -> Rendered:
        text, seen = render(run, number)
        return Rendered(text, ".json", seen)

    def skipped_as_expected(number: int, _run: list[int], summary: Any) -> None:
        if expect_skipped is not None:
            skipped = {t.source_table: t.skipped for t in summary.tables if t.skipped}
            assert skipped == expect_skipped(number), f"run {number}: skipped {skipped}"

    drive(spark, sc, workdir, fmt=fmt, render=rendered, options=options, max_runs=max_runs, check=skipped_as_expected)
