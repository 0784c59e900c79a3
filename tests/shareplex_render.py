"""Render oracle histories as SharePlex JSON (seed 002): one message per operation.

Events of one transaction (one ``op_ts`` in the history) share ``scn`` and ``trans`` and are
numbered by ``seq`` (``idx`` = ``seq/size``). SCNs grow from transaction to transaction while
``meta.time`` deliberately runs *backwards*, so a reader that orders by ``time`` instead of by
``scn`` gets the wrong answer. Whole numbers are written as JSON numbers, text as strings.

What the oracle is given is what the messages say (:func:`shareplex_view`): an update carries the
key columns' old values in ``key`` (its before image) and the new values of the other after
columns in ``data`` (the after image is ``key`` with ``data`` over it; a key column whose value
did not change is left out of ``data``). The seq is ``(scn, trans, seq)``, which the oracle sees
through ``pos`` and ``idx``.

Example::

    >>> from oracle import Event
    >>> e = Event("S.T", "U", "2024-01-01 00:00:00.000000", "1", 0, {"ID": 1, "V": "a"}, {"ID": 1, "V": "b"}, ("ID",))
    >>> shareplex_view(e).before, shareplex_view(e).after
    ({'ID': 1}, {'ID': 1, 'V': 'b'})
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

try:
    from tests.canal_render import Message
    from tests.oracle import Event
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from canal_render import Message  # type: ignore[no-redef]
    from oracle import Event  # type: ignore[no-redef]

OPS = {"I": "ins", "U": "upd", "D": "del", "T": "truncate"}
SCN_BASE = 14589063118712
_TIME_BASE = datetime(2030, 1, 1)


def update_parts(event: Event) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``key``, ``data``) of an update: the key columns' old values, the after columns that changed."""
    before, after = event.before or {}, event.after or {}
    key = {k: before[k] for k in event.keys if k in before}
    data = {c: v for c, v in after.items() if not (c in key and key[c] == v)}
    return key, data


def shareplex_view(event: Event) -> Event:
    """The event as SharePlex can say it (see the module docstring)."""
    if event.op != "U":
        return event
    key, data = update_parts(event)
    return dataclasses.replace(event, before=key, after={**key, **data})


def transaction_position(scn: int, trans: str) -> str:
    """The decoder's ``pos``: the SCN in 20 digits, then each part of ``trans`` in 10."""
    return f"{scn:020d}." + ".".join(p.zfill(10) for p in trans.split("."))


def shareplex_messages(events: Sequence[Event]) -> tuple[list[Message], list[int]]:
    """One message per event (so event ``i`` is message ``i``); transactions are runs of events
    with one ``op_ts``."""
    sizes: dict[str, int] = {}
    for e in events:
        sizes[e.op_ts] = sizes.get(e.op_ts, 0) + 1
    messages: list[Message] = []
    tx, last_ts, seq = -1, None, 0
    for i, e in enumerate(events):
        if e.op_ts != last_ts:
            tx, last_ts, seq = tx + 1, e.op_ts, 0
        seq += 1
        scn = SCN_BASE + 1000 * tx + (tx * 7) % 13
        trans = f"{tx % 4}.{(tx * 5) % 3}.{411499 - tx}"
        meta = {
            "time": f"{_TIME_BASE - timedelta(seconds=tx):%Y-%m-%dT%H:%M:%S}", "userid": 84, "op": OPS[e.op],
            "scn": str(scn), "rowid": f"AAATGpAAIAAItcI{i:03d}", "trans": trans, "seq": seq,
            "size": sizes[e.op_ts], "table": e.table, "idx": f"{seq}/{sizes[e.op_ts]}",
            "posttime": f"{_TIME_BASE + timedelta(minutes=9):%Y-%m-%dT%H:%M:%S}",
        }
        body: dict[str, Any] = {"meta": meta}
        if e.op == "I":
            body["data"] = dict(e.after or {})
        elif e.op == "D":
            body["data"] = dict(e.before or {})
        elif e.op == "U":
            key, data = update_parts(e)
            body["data"], body["key"] = data, key
        seen = dataclasses.replace(shareplex_view(e), op_ts="0", pos=transaction_position(scn, trans), idx=seq)
        messages.append(Message(json.dumps(body, ensure_ascii=False, separators=(",", ":")), (seen,)))
    return messages, list(range(len(events)))


def ddl_message(table: str) -> str:
    """A ``drop column`` message: a skipped record."""
    return json.dumps({"meta": {"time": "2030-01-01T00:00:00", "op": "drop column", "scn": "1", "table": table}})
