"""Render oracle events as Debezium Avro (test-only writer for ``debezium-avro``).

Builds on :mod:`debezium_render`: its :class:`~debezium_render.Renderer` (with ``schema``) gives
each record's Kafka Connect schema and payload, which are turned into Avro as Confluent's
``AvroData`` does (written here from the converter's rules, independently of the decoder, which
goes the other way):

* Connect structs become records named by the Connect name (``server1.S.T.Value`` is record
  ``Value`` in namespace ``server1.S.T``), with ``"connect.name"``; a named record used twice
  (``before`` and ``after``) is referenced by name the second time; optional fields are
  ``["null", T]`` with ``"default": null``;
* ``int8``/``int16`` are ``int`` with ``"connect.type"``; logical types carry ``"connect.name"``,
  ``"connect.version"`` and ``"connect.parameters"``; Connect's Decimal is also Avro's
  ``decimal`` (``precision`` from ``connect.decimal.precision``, else 64), Date/Time/Timestamp
  Avro's ``date``/``time-millis``/``timestamp-millis``;
* payload values follow the schema (Decimal base64 becomes the raw bytes). Avro cannot leave a
  field out, so a column *missing* from an image is written as Debezium writes an unavailable
  value (PostgreSQL TOAST): ``__debezium_unavailable_value``, as text or as its bytes.

The JSON renderer's ``source`` schema declares only ``table``; here the ``source`` record declares
every field the events' source blocks carry (strings, ``long`` for integers, all optional), as
Debezium's ``io.debezium.connector.<connector>.Source`` does.

:class:`AvroRenderer` writes a run as **length-prefixed wire-format messages** (each key message
before its value, a tombstone as a zero-length message, a truncate without key), registering each
schema under ``<topic>-key``/``<topic>-value`` with ids from 1; :meth:`AvroRenderer.write_registry`
writes them as ``<id>.avsc`` files or as one schema-registry export. :meth:`AvroRenderer.write_ocf`
writes a run as **object container files**, one per table (tombstones left out, as sinks drop null
values), each with a ``.keys.avro`` file of its records' keys (``null`` for a truncate).
"""

from __future__ import annotations

import base64
import io
import json
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro

if TYPE_CHECKING:
    from debezium_render import Renderer
    from oracle import Event

DECIMAL = "org.apache.kafka.connect.data.Decimal"
_PRIMITIVE: dict[str, Any] = {
    "int8": {"type": "int", "connect.type": "int8"},
    "int16": {"type": "int", "connect.type": "int16"},
    "int32": "int",
    "int64": "long",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_AVRO_LOGICAL = {
    "org.apache.kafka.connect.data.Date": "date",
    "org.apache.kafka.connect.data.Time": "time-millis",
    "org.apache.kafka.connect.data.Timestamp": "timestamp-millis",
}


def avro_type(connect: dict[str, Any], names: set[str]) -> Any:
    """The Avro type of a Kafka Connect schema (``names``: records defined so far)."""
    kind = connect["type"]
    name = connect.get("name")
    if kind == "struct":
        full = name or "io.confluent.connect.avro.ConnectDefault"
        if full in names:
            return full
        names.add(full)
        namespace, _, short = full.rpartition(".")
        fields = []
        for f in connect["fields"]:
            t = avro_type(f, names)
            if f.get("optional", True):
                fields.append({"name": f["field"], "type": ["null", t], "default": None})
            else:
                fields.append({"name": f["field"], "type": t})
        record: dict[str, Any] = {"type": "record", "name": short, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        record["connect.name"] = full
        return record
    if kind == "array":
        return {"type": "array", "items": avro_type(connect["items"], names)}
    base = _PRIMITIVE[kind]
    if not name:
        return base
    out: dict[str, Any] = dict(base) if isinstance(base, dict) else {"type": base}
    params = connect.get("parameters")
    if name == DECIMAL:
        out.update(logicalType="decimal", precision=int(params.get("connect.decimal.precision", 64)),
                   scale=int(params["scale"]))
    elif name in _AVRO_LOGICAL:
        out["logicalType"] = _AVRO_LOGICAL[name]
    out["connect.version"] = connect.get("version", 1)
    if params:
        out["connect.parameters"] = dict(params)
    out["connect.name"] = name
    return out


def datum(connect: dict[str, Any], value: Any) -> Any:
    """A Kafka Connect JSON payload value as fastavro writes it for :func:`avro_type`."""
    if value is None:
        return None
    if connect["type"] == "struct":
        return {f["field"]: datum(f, value.get(f["field"])) for f in connect["fields"]}
    if connect["type"] == "array":
        return [datum(connect["items"], v) for v in value]
    if connect["type"] == "bytes" and isinstance(value, str):
        return base64.b64decode(value)
    return value


UNAVAILABLE = "__debezium_unavailable_value"


def envelope_datum(connect: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """An envelope payload as a datum; a column missing from ``before``/``after`` (Avro cannot
    leave a field out) is written as Debezium writes an unavailable value: the placeholder, as
    text or as its bytes."""
    out = datum(connect, payload)
    for f in connect["fields"]:
        image = payload.get(f["field"])
        if f["field"] in ("before", "after") and image is not None:
            for column in f["fields"]:
                if column["field"] not in image:
                    text = UNAVAILABLE if column["type"] == "string" else UNAVAILABLE.encode()
                    out[f["field"]][column["field"]] = text
    return out


def wire(schema_id: int, parsed: Any, value: Any) -> bytes:
    """A Confluent wire-format message: magic byte 0, the schema id, the Avro datum."""
    out = io.BytesIO()
    out.write(b"\0" + struct.pack(">I", schema_id))
    fastavro.schemaless_writer(out, parsed, value)
    return out.getvalue()


def length_prefixed(messages: Sequence[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


def _source_field(name: str, values: list[Any]) -> dict[str, Any]:
    kinds = {type(v) for v in values if v is not None}
    kind = "int64" if kinds == {int} else "boolean" if kinds == {bool} else "string"
    return {"type": kind, "optional": True, "field": name}


class AvroRenderer:
    """Writes runs of :func:`debezium_render.as_debezium` events as Debezium Avro."""

    def __init__(self, base: Renderer, events: Sequence[Event], keys: dict[str, list[str]]) -> None:
        self.base = base
        self.keys = keys  # decoded table -> key columns
        sources = [base.source(e) for e in events]
        names: dict[str, list[Any]] = {}
        for src in sources:
            for k, v in src.items():
                names.setdefault(k, []).append(v)
        connector = base.style.connector
        self.source_schema = {"type": "struct", "optional": False, "name": f"io.debezium.connector.{connector}.Source",
                              "field": "source", "fields": [_source_field(k, vs) for k, vs in names.items()]}
        self.schemas: dict[int, Any] = {}  # id -> Avro schema
        self.subjects: dict[int, str] = {}
        self._ids: dict[str, int] = {}
        self._parsed: dict[int, Any] = {}

    # -- schemas
    def envelope_connect(self, table: str) -> dict[str, Any]:
        schema = self.base.value_schema(table)
        fields = [self.source_schema if f["field"] == "source" else f for f in schema["fields"]]
        return {**schema, "fields": fields}

    def key_connect(self, table: str) -> dict[str, Any]:
        return self.base.key_schema(table, {k: None for k in self.keys[table]})

    def register(self, connect: dict[str, Any], subject: str) -> int:
        schema = avro_type(connect, set())
        text = json.dumps(schema, sort_keys=True)
        if text not in self._ids:
            schema_id = len(self._ids) + 1
            self._ids[text] = schema_id
            self.schemas[schema_id] = schema
            self.subjects[schema_id] = subject
            self._parsed[schema_id] = fastavro.parse_schema(schema)
        return self._ids[text]

    def message(self, connect: dict[str, Any], payload: Any, subject: str) -> bytes:
        schema_id = self.register(connect, subject)
        value = envelope_datum(connect, payload) if subject.endswith("-value") else datum(connect, payload)
        return wire(schema_id, self._parsed[schema_id], value)

    # -- records
    def records(self, e: Event, total_order: int) -> list[tuple[dict | None, dict | None]]:
        """``(key payload, envelope payload)`` of one event: the envelope, and after a delete the
        tombstone (``None``); a truncate has no key."""
        out = []
        for key, value in self.base.messages(e, total_order):
            out.append((None if key is None else key["payload"], None if value is None else value["payload"]))
        return out

    def wire_messages(self, run: Sequence[Event]) -> list[bytes]:
        """Key and value messages of a run, in order (zero-length values for tombstones)."""
        out: list[bytes] = []
        for e in run:
            topic = self.base.topic(e.table)
            for key, value in self.records(e, int(e.pos)):
                if key is not None:
                    out.append(self.message(self.key_connect(e.table), key, f"{topic}-key"))
                out.append(b"" if value is None else self.message(self.envelope_connect(e.table), value, f"{topic}-value"))
        return out

    def render_wire(self, run: Sequence[Event]) -> bytes:
        return length_prefixed(self.wire_messages(run))

    def write_registry(self, directory: Path, *, export: bool = False) -> Path:
        """The schemas as ``<id>.avsc`` files, or (``export``) one ``schemas.json`` as the
        registry's ``GET /schemas`` lists them."""
        directory.mkdir(parents=True, exist_ok=True)
        if export:
            entries = [{"subject": self.subjects[i], "version": 1, "id": i, "schema": json.dumps(s)}
                       for i, s in sorted(self.schemas.items())]
            (directory / "schemas.json").write_text(json.dumps(entries))
        else:
            for i, s in self.schemas.items():
                (directory / f"{i}.avsc").write_text(json.dumps(s, indent=1))
        return directory

    def write_ocf(self, run: Sequence[Event], directory: Path, stem: str) -> list[Path]:
        """One OCF file per table of the run (values), each with its ``.keys.avro`` file."""
        by_table: dict[str, list[tuple[dict | None, dict]]] = {}
        for e in run:
            for key, value in self.records(e, int(e.pos)):
                if value is not None:
                    by_table.setdefault(e.table, []).append((key, value))
        directory.mkdir(parents=True, exist_ok=True)
        written = []
        for table, records in by_table.items():
            envelope, key = self.envelope_connect(table), self.key_connect(table)
            name = f"{stem}-{table.replace('.', '_')}"
            path = directory / f"{name}.avro"
            with path.open("wb") as fh:
                fastavro.writer(fh, fastavro.parse_schema(avro_type(envelope, set())),
                                [envelope_datum(envelope, v) for _k, v in records], codec="deflate")
            with (directory / f"{name}.keys.avro").open("wb") as fh:
                fastavro.writer(fh, fastavro.parse_schema(["null", avro_type(key, set())]),
                                [None if k is None else datum(key, k) for k, _v in records])
            written.append(path)
        return written
