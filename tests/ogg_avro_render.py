"""Render oracle events as GoldenGate for Big Data Avro messages (seed 000, section 13.4).

Schemas follow the seed's (13.4.1.4 row, 13.4.2.4 op): record ``TABLE`` in namespace
``CATALOG.SCHEMA``; the metadata fields ``table``, ``op_type``, ``op_ts``, ``current_ts``,
``pos``, ``primary_keys``, ``tokens``; then, for the op format, nullable ``before``/``after``
records ``columns`` holding every column as a nullable field followed by ``COL_isMissing``
(true: the column is missing from the image), or, for the row format, one nullable field per
column (missing renders as null).

Containers:

* ``length-prefixed``: one file of messages, each preceded by its length (4 bytes, big-endian);
* ``wrapped``: the same, each message wrapped in ``oracle.goldengate.generic_wrapper`` with the
  payload schema's 64-bit parsing fingerprint;
* ``ocf``: one Avro object container file per table and run (the file holds one schema),
  deflate blocks in odd runs, snappy blocks in even ones.

:func:`row_scenario_writer` renders row-modeled events (``avro_row``) for
``ogg_row_render.run_row_scenario``.

Example::

    schema = op_schema("QASOURCE.TCUSTMER", {"ID": "long", "C1": "string"})
    msg = encode(schema, op_record(event, schema))
"""

from __future__ import annotations

import io
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fastavro
from fastavro import parse_schema, schemaless_writer

from lakecdc.decode.avro.schemas import parsing_fingerprint

if TYPE_CHECKING:
    from oracle import Event

CONTAINERS = ("length-prefixed", "wrapped", "ocf")
#: Avro types of the property tests' key columns
KEY_TYPES = {"ID": "long", "CODE": "string"}
WRAPPER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "generic_wrapper",
    "namespace": "oracle.goldengate",
    "fields": [
        {"name": "table_name", "type": "string"},
        {"name": "schema_fingerprint", "type": "long"},
        {"name": "payload", "type": "bytes"},
    ],
}
_META_FIELDS: list[dict[str, Any]] = [
    {"name": "table", "type": "string"},
    {"name": "op_type", "type": "string"},
    {"name": "op_ts", "type": "string"},
    {"name": "current_ts", "type": "string"},
    {"name": "pos", "type": "string"},
    {"name": "primary_keys", "type": {"type": "array", "items": "string"}},
    {"name": "tokens", "type": {"type": "map", "values": "string"}, "default": {}},
]


def _named(table: str) -> dict[str, str]:
    namespace, _, name = table.rpartition(".")
    return {"name": name, "namespace": namespace} if namespace else {"name": name}


def row_schema(table: str, columns: dict[str, Any]) -> dict[str, Any]:
    """The ``avro_row`` schema of ``table``; ``columns`` maps a column to its Avro type."""
    cols = [{"name": c, "type": ["null", t], "default": None} for c, t in columns.items()]
    return {"type": "record", **_named(table), "fields": [*_META_FIELDS, *cols]}


def op_schema(table: str, columns: dict[str, Any]) -> dict[str, Any]:
    """The ``avro_op`` schema of ``table``: ``before``/``after`` records with ``COL_isMissing``."""
    cols: list[dict[str, Any]] = []
    for c, t in columns.items():
        cols += [{"name": c, "type": ["null", t], "default": None}, {"name": f"{c}_isMissing", "type": "boolean"}]
    record = {"type": "record", "name": "columns", "fields": cols}
    return {
        "type": "record",
        **_named(table),
        "fields": [
            *_META_FIELDS,
            {"name": "before", "type": ["null", record], "default": None},
            {"name": "after", "type": ["null", "columns"], "default": None},
        ],
    }


def _columns(schema: dict[str, Any]) -> list[str]:
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    if "before" in fields:
        return [f["name"] for f in fields["before"][1]["fields"] if not f["name"].endswith("_isMissing")]
    return [n for n in fields if n not in {f["name"] for f in _META_FIELDS}]


def _meta(event: Event, current_ts: str, primary_keys: bool) -> dict[str, Any]:
    return {
        "table": event.table,
        "op_type": event.op,
        "op_ts": event.op_ts,
        "current_ts": current_ts,
        "pos": event.pos,
        "primary_keys": list(event.keys) if primary_keys else [],
        "tokens": {},
    }


def op_record(event: Event, schema: dict[str, Any], *, current_ts: str = "2016-10-05T10:15:51.000000",
              primary_keys: bool = True) -> dict[str, Any]:
    """The op-modeled record of ``event``: missing columns get ``COL_isMissing: true``."""
    cols = _columns(schema)

    def image(values: dict[str, Any] | None) -> dict[str, Any] | None:
        if values is None:
            return None
        out: dict[str, Any] = {}
        for c in cols:
            out[c] = values.get(c)
            out[f"{c}_isMissing"] = c not in values
        return out

    return {**_meta(event, current_ts, primary_keys), "before": image(event.before), "after": image(event.after)}


def row_record(event: Event, schema: dict[str, Any], *, current_ts: str = "2016-10-05T10:15:51.000000",
               primary_keys: bool = True) -> dict[str, Any]:
    """The row-modeled record of ``event`` (delete: before image; else after; missing -> null)."""
    image = (event.before if event.op == "D" else event.after) or {}
    return {**_meta(event, current_ts, primary_keys), **{c: image.get(c) for c in _columns(schema)}}


def encode(schema: dict[str, Any], record: dict[str, Any]) -> bytes:
    """One message: the record's Avro binary encoding (no framing)."""
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(schema), record)
    return out.getvalue()


def wrap(table: str, schema: dict[str, Any], payload: bytes, *, fingerprint: int | None = None) -> bytes:
    """``payload`` inside a generic wrapper message (the fingerprint of ``schema`` unless given)."""
    fp = parsing_fingerprint(schema) if fingerprint is None else fingerprint
    return encode(WRAPPER_SCHEMA, {"table_name": table, "schema_fingerprint": fp, "payload": payload})


def length_prefixed(messages: Sequence[bytes]) -> bytes:
    """Messages each preceded by its length as 4 bytes, big-endian."""
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


def kcat_lines(messages: Sequence[bytes | None], *, topic: str) -> str:
    """``messages`` as the records of one topic partition dumped by ``kcat -J`` with a base64
    deserialiser (a None message: a record without a value)."""
    import base64
    import json

    return "".join(json.dumps({"topic": topic, "partition": 0, "offset": n, "tstype": "create", "ts": 1475662559000 + n,
                               "broker": 0, "key": None,
                               "payload": None if m is None else base64.b64encode(m).decode("ascii")}) + "\n"
                   for n, m in enumerate(messages))


def write_ocf(path: Path, schema: dict[str, Any], records: Sequence[dict[str, Any]], *, codec: str = "deflate",
              sync_interval: int = 16000) -> Path:
    """An Avro object container file of ``records``."""
    with open(path, "wb") as fh:
        fastavro.writer(fh, parse_schema(schema), list(records), codec=codec, sync_interval=sync_interval)
    return path


def write_schema_dir(directory: Path, schemas: dict[str, dict[str, Any]]) -> Path:
    """``<table>.avsc`` per table, plus ``generic_wrapper.avsc``, the way GoldenGate writes them."""
    import json

    directory.mkdir(parents=True, exist_ok=True)
    for table, schema in schemas.items():
        (directory / f"{table}.avsc").write_text(json.dumps(schema, indent=2))
    (directory / "generic_wrapper.avsc").write_text(json.dumps(WRAPPER_SCHEMA, indent=2))
    return directory


def write_runs(
    events: Sequence[Event],
    runs: Sequence[Sequence[int]],
    directory: Path,
    schemas: dict[str, dict[str, Any]],
    *,
    container: str = "length-prefixed",
    primary_keys: bool = True,
) -> list[list[Path]]:
    """Run ``n``'s events as op-modeled Avro in ``directory``: the files of each run, in run order.

    ``current_ts`` decreases through each run (never a valid order).
    """
    directory.mkdir(parents=True, exist_ok=True)
    out: list[list[Path]] = []
    for number, run in enumerate(runs, start=1):
        chosen = [events[i] for i in run]
        records = [
            (e.table, op_record(e, schemas[e.table], current_ts=f"2016-10-05T10:15:{59 - min(k, 59):02d}.000000",
                                primary_keys=primary_keys))
            for k, e in enumerate(chosen)
        ]
        if container == "ocf":
            codec = "deflate" if number % 2 else "snappy"
            paths = []
            for table in sorted({t for t, _ in records}):
                path = directory / f"run-{number:04d}-{table}.avro"
                paths.append(write_ocf(path, schemas[table], [r for t, r in records if t == table], codec=codec))
            out.append(paths)
            continue
        messages = [encode(schemas[t], r) for t, r in records]
        if container == "wrapped":
            messages = [wrap(t, schemas[t], m) for (t, _), m in zip(records, messages, strict=True)]
        if container == "kcat":
            path = directory / f"run-{number:04d}.json"
            path.write_text(kcat_lines(messages, topic="ogg"))
        else:
            path = directory / f"run-{number:04d}.bin"
            path.write_bytes(length_prefixed(messages))
        out.append([path])
    return out


def row_scenario_writer(sc: Any, workdir: Path) -> tuple[Any, dict[str, str]]:
    """For a property-test scenario: a renderer of row-modeled events as length-prefixed
    ``avro_row`` messages (``long``/``string`` columns) and the decoder options naming the
    schema directory it wrote. Missing columns are written as null (the format's limit: render
    ``ogg_row_render.missing_as_null(sc)`` so that the oracle sees the same)."""
    schemas = {}
    for spec in sc.specs:
        cols = {k: KEY_TYPES[k] for k in spec.keys}
        cols.update({c: "long" if kind == "int" else "string" for c, kind in spec.columns.items()})
        schemas[spec.name] = row_schema(spec.name, cols)
    dirdef = write_schema_dir(workdir / "dirdef", schemas)

    def render(events: Sequence[Event]) -> bytes:
        return length_prefixed([encode(schemas[e.table], row_record(e, schemas[e.table], primary_keys=sc.primary_keys))
                                for e in events])

    return render, {"schemaDirectory": str(dirdef)}
