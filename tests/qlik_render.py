"""Render oracle histories as Qlik Replicate messages (seed 003), as JSON or as Avro envelopes.

A history (``test_property.Scenario.events``, in seq order) becomes one data message per event,
each wrapped in Replicate's envelope naming its table's metadata message (``messageSchemaId``);
the metadata messages (one per table, version 1) go first in the first run only, so later runs
decode with what the target kept. Per event:

* ``changeSequence`` grows along the history (35 digits) while ``timestamp`` *falls* (a reader
  that orders by the timestamp gets the wrong answer); ``transactionEventCounter`` counts the
  events of one source transaction from 1;
* an insert of a key nothing touched before becomes a ``REFRESH`` (a full-load row: empty
  ``changeSequence`` and ``timestamp``, null masks), which sorts before every change;
* a partial image (an update that logged some columns only) is written the way Replicate writes
  it: every column in ``data``/``beforeData``, the missing ones as null with their ``columnMask``
  bit 0; ``changeMask`` marks the columns whose value differs from ``beforeData``;
* truncates are not rendered (Replicate's data messages have no truncate operation).

What the oracle is given is what the messages say (:class:`QlikMessage.event`): images restricted
to the ``columnMask`` columns (an update's before values of columns it did not log are the after
values), ``op_ts`` empty and ``pos`` the changeSequence, so that the oracle's ``(op_ts, pos, idx)``
is lakecdc's ``changeSequence|counter``.

Example::

    >>> mask_hex({1, 2, 4}, 4)
    '0B'
    >>> mask_hex(set(range(1, 17)), 16)
    '00FFFF'
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fastavro import parse_schema, schemaless_writer

try:
    from tests.oracle import Event, declaring
    from tests.scenario_driver import Rendered, drive
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from oracle import Event, declaring  # type: ignore[no-redef]
    from scenario_driver import Rendered, drive  # type: ignore[no-redef]

ENVELOPE = {
    "type": "record", "name": "MessageEnvelope", "fields": [
        {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 5}},
        {"name": "type", "type": "string"},
        {"name": "headers", "type": ["null", {"type": "map", "values": "string"}]},
        {"name": "messageSchemaId", "type": ["null", "string"]},
        {"name": "messageSchema", "type": ["null", "string"]},
        {"name": "message", "type": "bytes"},
    ],
}
_ENVELOPE = parse_schema(ENVELOPE)
_FIRST_TS = datetime(2030, 1, 1)


def mask_hex(ordinals: set[int], n_columns: int) -> str:
    """A mask as Replicate writes it: one hex number over ``n_columns // 8 + 1`` bytes, bit
    ``ordinal - 1`` set for each ordinal."""
    value = sum(1 << (o - 1) for o in ordinals)
    return value.to_bytes(n_columns // 8 + 1, "big").hex().upper()


def schema_id(table: str, version: int = 1) -> str:
    return hashlib.md5(f"{table}/{version}".encode()).hexdigest().upper()


# -- metadata --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """A table as its metadata message says: columns in ordinal order with Qlik types, key positions."""

    name: str
    columns: tuple[tuple[str, str, int], ...]  # (name, qlik type, primaryKeyPosition)
    version: int = 1

    @property
    def schema_id(self) -> str:
        return schema_id(self.name, self.version)

    @property
    def names(self) -> list[str]:
        return [c for c, _t, _k in self.columns]

    def ordinal(self, column: str) -> int:
        return self.names.index(column) + 1

    @classmethod
    def of(cls, spec: Any, *, keyed: bool = True) -> Table:
        """A ``test_property.TableSpec``: keys first (``ID`` INT8, ``CODE`` STRING), then ``C1``...
        (int INT8, str STRING); ``keyed=False`` writes no primaryKeyPosition."""
        cols = [(k, "INT8" if k == "ID" else "STRING", (i + 1) if keyed else 0) for i, k in enumerate(spec.keys)]
        cols += [(c, "INT8" if kind == "int" else "STRING", 0) for c, kind in spec.columns.items()]
        return cls(spec.name, tuple(cols))

    def data_schema(self) -> dict[str, Any]:
        avro = {"INT8": "long", "INT4": "int", "STRING": "string"}
        fields = [{"name": c, "type": ["null", avro.get(t, "string")]} for c, t, _k in self.columns]
        headers = [
            {"name": "operation", "type": {"type": "enum", "name": "operation", "symbols": ["INSERT", "UPDATE", "DELETE", "REFRESH"]}},
            *({"name": n, "type": "string"} for n in ("changeSequence", "timestamp", "streamPosition", "transactionId")),
            {"name": "changeMask", "type": ["null", "bytes"]}, {"name": "columnMask", "type": ["null", "bytes"]},
            {"name": "transactionEventCounter", "type": ["null", "long"]},
            {"name": "transactionLastEvent", "type": ["null", "boolean"]},
        ]
        return {"type": "record", "name": "DataRecord", "fields": [
            {"name": "data", "type": {"type": "record", "name": "Data", "fields": fields}},
            {"name": "beforeData", "type": ["null", "Data"]},
            {"name": "headers", "type": {"type": "record", "name": "Headers", "fields": headers}},
        ]}

    def metadata(self) -> dict[str, Any]:
        schema, _, table = self.name.rpartition(".")
        return {
            "schemaId": self.schema_id,
            "lineage": {"server": "replicate-test", "task": "history", "schema": schema, "table": table,
                        "tableVersion": self.version, "timestamp": "2024-01-01T00:00:00.000"},
            "tableStructure": {"tableColumns": {
                c: {"ordinal": i, "type": t, "length": 0 if t == "INT8" else 255, "precision": 0, "scale": 0,
                    "primaryKeyPosition": k, "nullable": k == 0}
                for i, (c, t, k) in enumerate(self.columns, 1)}},
            "dataSchema": json.dumps(self.data_schema(), separators=(",", ":")),
        }

    def metadata_schema(self) -> dict[str, Any]:
        """The Avro schema of this table's metadata message (as Replicate embeds it in the MD envelope)."""
        def rec(name: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
            return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}

        column = [("ordinal", "int"), ("type", "string"), ("length", "int"), ("precision", "int"), ("scale", "int"),
                  ("primaryKeyPosition", "int"), ("nullable", "boolean")]
        lineage = rec("Lineage", [("server", "string"), ("task", "string"), ("schema", "string"), ("table", "string"),
                                   ("tableVersion", "long"), ("timestamp", "string")])
        columns = rec("TableColumns", [(c, rec(f"col_{c}", column)) for c in self.names])
        return rec("MetadataMessage", [("schemaId", "string"), ("lineage", lineage),
                                       ("tableStructure", rec("TableStructure", [("tableColumns", columns)])),
                                       ("dataSchema", "string")])


# -- data ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QlikMessage:
    """One data message (the ``message`` member of its envelope) and the event it stands for."""

    table: Table
    body: dict[str, Any]
    event: Event


def _images(table: Table, e: Event) -> tuple[dict[str, Any], dict[str, Any] | None, list[str]]:
    """(data, beforeData, present columns) of an event."""
    shown = e.before if e.op == "D" else e.after
    present = [c for c in table.names if c in (shown or {})]
    data = {c: (shown or {}).get(c) for c in table.names}
    before = None
    if e.op == "U":
        before = {c: ((e.before or {}).get(c, data[c]) if c in present else None) for c in table.names}
    return data, before, present


def render_history(events: Sequence[Event], tables: dict[str, Table]) -> list[QlikMessage | None]:
    """One message per event (None for a truncate), see the module docstring."""
    out: list[QlikMessage | None] = []
    touched: set[tuple[str, tuple[Any, ...]]] = set()
    counter, last_ts = 0, None
    for n, e in enumerate(events):
        if e.op == "T":
            out.append(None)
            continue
        table = tables[e.table]
        keys = [c for c, _t, k in table.columns if k] or list(e.keys)
        marks = {(e.table, tuple((img or {}).get(k) for k in keys)) for img in (e.before, e.after) if img}
        refresh = e.op == "I" and not (marks & touched)
        touched |= marks
        counter = counter + 1 if e.op_ts == last_ts else 1
        last_ts = e.op_ts
        data, before, present = _images(table, e)
        op = "REFRESH" if refresh else {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}[e.op]
        sequence = "" if refresh else f"20240101120000000{n + 1:018d}"
        ts = "" if refresh else f"{_FIRST_TS - timedelta(seconds=n):%Y-%m-%dT%H:%M:%S}.000"
        changed = [c for c in present if before is None or before[c] != data[c]] if e.op != "D" else None
        ordinals = {table.ordinal(c) for c in present}
        headers = {
            "operation": op, "changeSequence": sequence, "timestamp": ts,
            "streamPosition": "" if refresh else f"pos-{n}", "transactionId": "" if refresh else hashlib.md5(e.op_ts.encode()).hexdigest().upper(),
            "changeMask": None if refresh or changed is None else mask_hex({table.ordinal(c) for c in changed}, len(table.names)),
            "columnMask": None if refresh else mask_hex(ordinals, len(table.names)),
            "transactionEventCounter": None if refresh else counter, "transactionLastEvent": None if refresh else True,
        }
        if refresh:  # a full-load row carries every column
            present, data = table.names, {c: (e.after or {}).get(c) for c in table.names}
        view = dataclasses.replace(
            e, op="R" if refresh else e.op, op_ts="", pos=sequence, idx=0 if refresh else counter,
            after={c: data[c] for c in present} if e.op != "D" else None,
            before=({c: data[c] for c in present} if e.op == "D"
                    else {c: before[c] for c in present} if before is not None else None),
        )
        out.append(QlikMessage(table, {"data": data, "beforeData": before, "headers": headers}, view))
    return out


# -- JSON ------------------------------------------------------------------------------------------


def json_envelope(kind: str, schema: str, message: dict[str, Any]) -> str:
    return json.dumps({"magic": "atMSG", "type": kind, "headers": None, "messageSchemaId": schema,
                       "messageSchema": None, "message": message}, ensure_ascii=False, separators=(",", ":"))


def json_metadata(table: Table) -> str:
    return json_envelope("MD", table.schema_id, table.metadata())


def json_data(m: QlikMessage) -> str:
    return json_envelope("DT", m.table.schema_id, m.body)


# -- Avro ------------------------------------------------------------------------------------------


def _avro(schema: Any, record: dict[str, Any]) -> bytes:
    buf = io.BytesIO()
    schemaless_writer(buf, parse_schema(schema), record)
    return buf.getvalue()


def avro_envelope(kind: str, message: bytes, *, schema_id: str | None = None, schema: str | None = None) -> bytes:
    return _avro(_ENVELOPE, {"magic": b"atMSG", "type": kind, "headers": None, "messageSchemaId": schema_id,
                             "messageSchema": schema, "message": message})


def avro_metadata(table: Table) -> bytes:
    schema = table.metadata_schema()
    return avro_envelope("MD", _avro(schema, table.metadata()), schema=json.dumps(schema))


def avro_data(m: QlikMessage) -> bytes:
    body = dict(m.body)
    body["headers"] = {k: (bytes.fromhex(v) if k.endswith("Mask") and v is not None else v) for k, v in body["headers"].items()}
    return avro_envelope("DT", _avro(m.table.data_schema(), body), schema_id=m.table.schema_id)


def length_prefixed(messages: Sequence[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


def kcat_lines(messages: Sequence[bytes | str], topic: str = "replicate", key: str | None = None) -> str:
    """kcat ``-J`` lines: Avro bytes base64-encoded, JSON messages as their text."""
    lines = []
    for offset, m in enumerate(messages):
        payload = base64.b64encode(m).decode("ascii") if isinstance(m, bytes) else m
        lines.append(json.dumps({"topic": topic, "partition": 0, "offset": offset, "tstype": "create",
                                 "ts": 1704067200000 + offset, "broker": 0, "key": key, "payload": payload}))
    return "".join(line + "\n" for line in lines)


# -- delivering a history run by run ---------------------------------------------------------------


def render_run(messages: Sequence[QlikMessage | None], tables: Sequence[Table], run: list[int], number: int, *,
               avro: bool) -> tuple[bytes, list[Event], str]:
    """One run's file (its bytes, the events the oracle applies, its suffix): the metadata messages
    first in run 1; run 2 as a kcat ``-J`` dump (JSON: bare messages on one topic per table, named
    like the table; Avro: base64 envelopes), the others plain (JSON lines; length-prefixed Avro)."""
    picked = [messages[i] for i in run if messages[i] is not None]
    seen = [m.event for m in picked if m is not None]
    if avro:
        parts = [avro_metadata(t) for t in tables] if number == 1 else []
        parts += [avro_data(m) for m in picked if m is not None]
        if number == 2:
            return kcat_lines(parts).encode(), seen, ".json"
        return length_prefixed(parts), seen, ".avro"
    lines = [json_metadata(t) for t in tables] if number == 1 else []
    if number == 2:
        text = "".join(kcat_lines([json.dumps(m.body, separators=(",", ":"))], topic=m.table.name.rpartition(".")[2])
                       for m in picked if m is not None)
        return ("".join(line + "\n" for line in lines) + text).encode(), seen, ".json"
    lines += [json_data(m) for m in picked if m is not None]
    return "".join(line + "\n" for line in lines).encode(), seen, ".json"


def run_qlik_scenario(spark: Any, sc: Any, workdir: Any, *, fmt: str, max_runs: int = 3) -> None:
    """:func:`scenario_driver.drive` over Qlik runs; the metadata messages come in run 1 only
    (counted as skipped there, nothing skipped after)."""
    tables = {s.name: Table.of(s, keyed=sc.primary_keys) for s in sc.specs}
    messages = render_history(sc.events, tables)

    def rendered(run: list[int], number: int) -> Rendered:
        data, seen, suffix = render_run(messages, list(tables.values()), run, number, avro=fmt == "qlik-avro")
        # the metadata messages declare every column of their tables
        return Rendered(data, suffix, declaring(seen, {s.name: [*s.keys, *s.columns] for s in sc.specs}))

    def metadata_skipped_once(number: int, _run: list[int], summary: Any) -> None:
        skipped = {t.source_table: t.skipped for t in summary.tables if t.skipped}
        assert skipped == ({name: 1 for name in tables} if number == 1 else {}), f"run {number}: skipped {skipped}"

    drive(spark, sc, workdir, fmt=fmt, render=rendered, max_runs=max_runs, check=metadata_skipped_once)
