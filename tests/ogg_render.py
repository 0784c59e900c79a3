"""Render oracle events as GoldenGate for Big Data op-modeled JSON (seed 000, section 13.3.4.1).

One message per line, members in the formatter's order: ``table``, ``op_type``, ``op_ts``,
``current_ts``, ``pos``, optional ``primary_keys``, then ``before`` / ``after`` holding only the
present columns (a missing column is an absent member, NULL is JSON null). Insert: after only;
update: before and after; delete: before only; truncate: neither.

``current_ts`` is the formatter's wall clock, which differs on every replay. It is written here
deliberately decreasing through each file, so anything that orders by it instead of by
``op_ts``/``pos`` gets the wrong answer.

Example (the seed's truncate, rendered)::

    render_ogg_json([Event("QASOURCE.TCUSTORD", "T", "2015-11-05 18:45:39.000000",
                           "00000000000000005480")])
    -> {"table":"QASOURCE.TCUSTORD","op_type":"T","op_ts":"2015-11-05 18:45:39.000000","current_ts":"2016-10-05T10:15:51.001000","pos":"00000000000000005480"}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from oracle import Event

_CURRENT_TS_BASE = datetime(2016, 10, 5, 10, 15, 51)


def _current_ts(n_after: int) -> str:
    return f"{_CURRENT_TS_BASE + timedelta(milliseconds=n_after):%Y-%m-%dT%H:%M:%S.%f}"


def ogg_message(event: Event, *, primary_keys: bool = True, current_ts: str) -> dict[str, Any]:
    """The JSON object GoldenGate's ``json`` formatter writes for ``event``."""
    op = event.op
    if op not in ("I", "U", "D", "T"):
        raise ValueError(f"GoldenGate JSON has no op_type {op!r} (only I, U, D, T)")
    if op == "I" and (event.after is None or event.before is not None):
        raise ValueError("an op-modeled insert carries an after image only")
    if op == "U" and (event.after is None or event.before is None):
        raise ValueError("an op-modeled update carries a before and an after image")
    if op == "D" and (event.before is None or event.after is not None):
        raise ValueError("an op-modeled delete carries a before image only")
    if op == "T" and (event.before is not None or event.after is not None):
        raise ValueError("an op-modeled truncate carries no image")
    if event.idx != 0:
        raise ValueError("GoldenGate writes one operation per message: idx must be 0")

    msg: dict[str, Any] = {
        "table": event.table,
        "op_type": op,
        "op_ts": event.op_ts,
        "current_ts": current_ts,
        "pos": event.pos,
    }
    if primary_keys and event.keys:
        msg["primary_keys"] = list(event.keys)
    if event.before is not None:
        msg["before"] = dict(event.before)
    if event.after is not None:
        msg["after"] = dict(event.after)
    return msg


def render_ogg_json(events: Sequence[Event], *, primary_keys: bool = True) -> str:
    """The events as GoldenGate op-modeled JSON, one message per line, in the given order."""
    n = len(events)
    lines = [
        json.dumps(
            ogg_message(event, primary_keys=primary_keys, current_ts=_current_ts(n - i)),
            ensure_ascii=False,
            separators=(",", ":"),
        )
        for i, event in enumerate(events)
    ]
    return "".join(line + "\n" for line in lines)


def run_file_name(number: int) -> str:
    """``run-0001.json`` for run 1 (numbers start at 1)."""
    return f"run-{number:04d}.json"


def write_runs(
    events: Sequence[Event],
    runs: Sequence[Sequence[int]],
    dir: str | Path,
    *,
    primary_keys: bool = True,
) -> list[Path]:
    """Write run ``n`` (a list of indices into ``events``) to ``dir/run-000n.json``.

    Returns the written paths, in run order. The directory is created when needed.
    """
    out = Path(dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, run in enumerate(runs, start=1):
        path = out / run_file_name(number)
        path.write_text(
            render_ogg_json([events[i] for i in run], primary_keys=primary_keys),
            encoding="utf-8",
        )
        paths.append(path)
    return paths
