"""Render oracle events as GoldenGate's row formatters write them (seed 000, 13.1.2, 13.2, 13.3.3).

A row formatter writes one image per operation: insert and update the after image, delete the
before image, truncate the table name only. So an op-modeled :class:`~oracle.Event` first becomes
the row-modeled events the formatter emits (:func:`row_events`): an update keeps only its after
image; a primary-key update follows ``pkUpdateHandling``: ``delete-insert`` (a delete of the
before image and an insert of the after image, both at the update's position), ``update`` (one
update carrying the after image, so the old key's row is never removed) or ``abend`` (an error).
Those row events are what the oracle applies and what lakecdc must decode.

Two renderings:

* :func:`render_delimited`: ``op|table|op_ts|current_ts|pos[|tokens]|values`` with the table's
  columns in order (present value as text, NULL as ``null_rep``, missing as ``missing_rep``,
  a truncate with every column missing as in the seed's 13.2.2.4), or ``name|value`` pairs;
* :func:`render_json_row`: one object per line, metadata members then the present columns at the
  top level (missing = absent member, NULL = JSON null).

``current_ts`` decreases through each file, so ordering by it gives the wrong answer.

Example (the seed's delete, 13.2.2.3, without tokens)::

    render_delimited([Event("GG.TCUSTORD", "D", "2013-06-02 22:14:41.000000", "00000000000000004338",
                            before={"CUST_CODE": "DAVE", "ORDER_ID": 600})],
                     {"GG.TCUSTORD": ["CUST_CODE", "ORDER_ID", "PRODUCT_PRICE"]}, field_delimiter="|")
    -> D|GG.TCUSTORD|2013-06-02 22:14:41.000000|2016-10-05T10:15:51.001000|00000000000000004338|DAVE|600|
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

try:
    from tests.oracle import Event, declaring, pk_update_keys
    from tests.scenario_driver import Rendered, drive
    from tests.test_property import Scenario, TableSpec
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from oracle import Event, declaring, pk_update_keys  # type: ignore[no-redef]
    from scenario_driver import Rendered, drive  # type: ignore[no-redef]
    from test_property import Scenario, TableSpec  # type: ignore[no-redef]

_CURRENT_TS_BASE = datetime(2016, 10, 5, 10, 15, 51)
_MISSING = object()


def _current_ts(n_after: int) -> str:
    return f"{_CURRENT_TS_BASE + timedelta(milliseconds=n_after):%Y-%m-%dT%H:%M:%S.%f}"


def row_events(event: Event, *, pk_update_handling: str = "delete-insert") -> list[Event]:
    """The row-modeled events a GoldenGate row formatter writes for one op-modeled event."""
    if event.op == "I":
        return [Event(event.table, "I", event.op_ts, event.pos, 0, None, event.after, event.keys)]
    if event.op == "D":
        return [Event(event.table, "D", event.op_ts, event.pos, 0, event.before, None, event.keys)]
    if event.op == "T":
        return [Event(event.table, "T", event.op_ts, event.pos, 0, None, None, event.keys)]
    if event.op != "U":
        raise ValueError(f"GoldenGate has no op_type {event.op!r}")
    if pk_update_keys(event) is not None:
        if pk_update_handling == "abend":
            raise ValueError(f"{event.table}: primary-key update at pos {event.pos} and pkUpdateHandling=abend")
        if pk_update_handling == "delete-insert":
            return [
                Event(event.table, "D", event.op_ts, event.pos, 0, event.before, None, event.keys),
                Event(event.table, "I", event.op_ts, event.pos, 0, None, event.after, event.keys),
            ]
    return [Event(event.table, "U", event.op_ts, event.pos, 0, None, event.after, event.keys)]


def image_of(event: Event) -> dict[str, Any] | None:
    """The single image a row formatter writes: after for I/U, before for D, none for T."""
    return event.before if event.op == "D" else event.after


def value_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def render_delimited(
    events: Sequence[Event],
    columns: Mapping[str, Sequence[str]],
    *,
    field_delimiter: str = "\u0001",
    line_delimiter: str = "\n",
    null_rep: str = "NULL",
    missing_rep: str = "",
    include_column_names: bool = False,
    tokens: Mapping[str, str] | None = None,
    key_value_delimiter: str = "=",
    pair_delimiter: str = ",",
) -> str:
    """Row-modeled events as GoldenGate delimited text (fields of the seed's 13.2.1).

    Raises ValueError for a value the format could not carry back (it contains a delimiter or
    equals the NULL or missing representation).
    """
    n = len(events)
    out = []
    for i, event in enumerate(events):
        fields = [event.op, event.table, event.op_ts, _current_ts(n - i), event.pos]
        if tokens is not None:
            fields.append(pair_delimiter.join(f"{k}{key_value_delimiter}{v}" for k, v in tokens.items()))
        image = image_of(event) or {}
        for col in columns[event.table]:
            value = image.get(col, _MISSING) if event.op != "T" else _MISSING
            if value is _MISSING:
                text = missing_rep
            elif value is None:
                text = null_rep
            else:
                text = value_text(value)
                if field_delimiter in text or line_delimiter in text or text in (null_rep, missing_rep):
                    raise ValueError(f"value {text!r} of column {col} cannot be written with these delimiters")
            fields += [col, text] if include_column_names else [text]
        unknown = set(image) - set(columns[event.table])
        if unknown:
            raise ValueError(f"{event.table}: columns {sorted(unknown)} are not in its column list")
        out.append(field_delimiter.join(fields) + line_delimiter)
    return "".join(out)


def render_json_row(events: Sequence[Event], *, primary_keys: bool = True) -> str:
    """Row-modeled events as GoldenGate ``json_row`` messages, one per line."""
    n = len(events)
    lines = []
    for i, event in enumerate(events):
        msg: dict[str, Any] = {"table": event.table, "op_type": event.op, "op_ts": event.op_ts,
                               "current_ts": _current_ts(n - i), "pos": event.pos}
        if primary_keys and event.keys:
            msg["primary_keys"] = list(event.keys)
        msg.update(image_of(event) or {})
        lines.append(json.dumps(msg, ensure_ascii=False, separators=(",", ":")) + "\n")
    return "".join(lines)


def write_json_schema(directory: str | Path, table: str, columns: Mapping[str, str]) -> Path:
    """A row-modeled GoldenGate JSON schema (seed 13.3.5) for ``table``; ``columns``: name -> JSON type."""
    props: dict[str, Any] = {
        "table": {"type": "string"}, "op_type": {"type": "string"}, "op_ts": {"type": "string"},
        "current_ts": {"type": "string"}, "pos": {"type": "string"},
        "primary_keys": {"type": "array", "items": {"type": "string"}},
        "tokens": {"$ref": "#/definitions/tokens"},
    }
    props.update({c: {"type": [kind, "null"]} for c, kind in columns.items()})
    doc = {"$schema": "http://json-schema.org/draft-04/schema#", "title": table,
           "description": f"JSON schema for table {table}", "type": "object", "properties": props,
           "required": ["table", "op_type", "op_ts", "current_ts", "pos"], "additionalProperties": False}
    path = Path(directory) / f"{table}.schema.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=4))
    return path


def missing_as_null(sc: Scenario) -> Scenario:
    """``sc`` with every image holding every column of its table, NULL where it was missing
    (what a format that cannot say *missing*, such as Avro row, delivers)."""
    import dataclasses

    columns = {s.name: [*s.keys, *s.columns] for s in sc.specs}

    def full(table: str, image: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if image is None else {c: image.get(c) for c in columns[table]}

    events = [dataclasses.replace(e, before=full(e.table, e.before), after=full(e.table, e.after)) for e in sc.events]
    return dataclasses.replace(sc, events=events)


# -- a round trip through lakecdc.apply, checked against the oracle ---------------------------------


def run_row_scenario(
    spark: Any,
    sc: Any,
    workdir: Path,
    *,
    fmt: str,
    render: Any,
    options: Mapping[str, str] | None = None,
    pk_update_handling: str = "delete-insert",
    suffix: str = ".txt",
    max_runs: int = 3,
    rejoin: bool = False,
    declared: Mapping[str, Sequence[str]] | None = None,
) -> None:
    """Render each run of a :class:`test_property.Scenario` as a row formatter would, apply the
    files so far with ``lakecdc.apply`` and compare every table and count with the oracle.

    ``render(row_events) -> str | bytes`` writes one run's file. The oracle applies the same
    row-modeled events lakecdc decodes, so both see an update as its after image only. With
    ``rejoin`` (lakecdc told ``pkUpdateHandling=delete-insert``) the formatter's delete + insert
    of a key change reaches the oracle as the key change itself, applied by ``sc.pk_update``:
    with ``abend`` the run must fail naming it and commit nothing. Runs beyond ``max_runs`` are
    delivered together as the last run (to bound the test's time). ``declared``: the columns the
    files' schemas declare per table (the pipeline adds a declared column no image holds).
    """

    def oracle_events(event: Event) -> list[Event]:
        if rejoin and pk_update_handling == "delete-insert" and event.op == "U" and pk_update_keys(event):
            return [Event(event.table, "U", event.op_ts, event.pos, 0, event.before, event.after, event.keys)]
        return row_events(event, pk_update_handling=pk_update_handling)

    def rendered(run: list[int], _number: int) -> Rendered:
        run_events = [r for i in run for r in row_events(sc.events[i], pk_update_handling=pk_update_handling)]
        data = render(run_events)
        events = [r for i in run for r in oracle_events(sc.events[i])]
        return Rendered(data, suffix, declaring(events, declared) if declared else events)

    drive(spark, sc, workdir, fmt=fmt, render=rendered, options={**(options or {})}, max_runs=max_runs)


def key_change_scenario() -> Scenario:
    """A fixed history that holds what random ones may miss: a partial update, a primary-key
    update and a chain of them (the second with a partial after image), an update of an absent
    key, a delete, a truncate of another table, and replays across runs."""
    cust = TableSpec("QASOURCE.TCUSTMER", ("ID",), [(1,), (2,), (3,), (4,)], {"C1": "int", "C2": "str"})
    line = TableSpec("PDB1.QASOURCE.TORDLINE", ("ID", "CODE"), [(1, "x"), (1, "y")], {"C1": "str"})

    def ev(i: int, spec: TableSpec, op: str, before: dict | None = None, after: dict | None = None) -> Event:
        return Event(spec.name, op, f"2024-01-01 00:00:{i:02d}.000000", f"{1000 + i:020d}", 0, before, after, spec.keys)

    events = [
        ev(0, cust, "I", after={"ID": 1, "C1": 10, "C2": "a"}),
        ev(1, cust, "I", after={"ID": 2, "C1": 20, "C2": None}),
        ev(2, cust, "U", before={"ID": 1}, after={"ID": 1, "C2": "b"}),
        ev(3, cust, "U", before={"ID": 1, "C1": 10, "C2": "b"}, after={"ID": 3, "C1": 11, "C2": "b"}),
        ev(4, cust, "U", before={"ID": 3}, after={"ID": 4, "C1": 12}),
        ev(5, cust, "D", before={"ID": 2}),
        ev(6, line, "I", after={"ID": 1, "CODE": "x", "C1": "p"}),
        ev(7, line, "T"),
        ev(8, line, "I", after={"ID": 1, "CODE": "y", "C1": None}),
        ev(9, cust, "U", before={"ID": 2}, after={"ID": 2, "C1": 5}),
    ]
    runs = [[0, 1, 2, 6], [3, 4, 2, 7], [5, 8, 9, 3, 0]]
    return Scenario(specs=[cust, line], events=events, runs=runs, pk_update="delete-insert", primary_keys=True,
                    source={})
