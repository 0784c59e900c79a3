"""Debezium decode throughput: ``debezium-json`` (with and without schema) and ``debezium-avro``
beside the parse floor of each encoding (issue 4, Benchmark).

    python -m bench.debezium --events 1000000 --keys 200000 [--formats a,b] [--repeat R] [--warmup W]
        [--workdir DIR] [--seed S] [--write-results]

The workload of :mod:`bench.generate` (``events.json``, GoldenGate op-modeled JSON) is converted
once (in a subprocess, cached under ``<workload>/formats/<encoding>/`` with a ``manifest.json``)
into what Debezium's Oracle connector would have written for the same changes:

=========================  =====================================================================
encoding                   what is written
=========================  =====================================================================
``debezium-json-schema``   the Kafka Connect JSON converter with ``schemas.enable=true`` (the
                           verbose case): ``{"schema": <the envelope's Connect schema>, "payload":
                           <the envelope>}`` per line; decimals as Connect ``Decimal`` (base64
                           two's complement, scale 2, with their precision)
``debezium-json``          ``schemas.enable=false``: the envelope alone per line;
                           ``decimal.handling.mode=string`` (``"17520.00"``)
``debezium-avro``          Confluent's Avro converter: wire-format messages (magic byte, schema
                           id, Avro body), each preceded by its length (4 bytes, big-endian), as
                           a topic dump holds them; the schema in ``schemas/1.avsc``; decimals
                           as Avro ``bytes`` + ``decimal`` with Connect's properties
=========================  =====================================================================

The envelope: ``op`` (``c``/``u``/``d``), ``before``/``after``, ``source`` (connector ``oracle``,
``db`` ``ORCLPDB1``, ``schema`` ``BENCH``, ``table`` ``ORDERS``, ``ts_ms``/``ts_us``/``ts_ns`` from
``op_ts``, ``scn`` = ``commit_scn`` = the GoldenGate ``pos`` as a number, ``ssn`` 0,
``redo_thread`` 1, ``txId``), ``ts_ms`` (``current_ts``), ``transaction`` null. Debezium writes
whole rows: an update's after image is the whole new row (the GoldenGate before image, complete in
this workload, overlaid with the partial after image), so the same changes apply to the same table.
Integers are ``int64``, the ``YYYY-MM-DD`` dates and the text ``string``.

Then, in one Python process with one Spark session (``local[2]``), per encoding: **lakecdc**
(``get_decoder(format, options).read(...)`` to Spark's ``noop`` sink, every column evaluated,
rows and ``_error`` counted in the same pass: exactly the workload's events, none bad; the
helpers of :mod:`bench.decode`) and its **floor**: ``pyarrow.json.read_json`` with an explicit
schema of the envelope (the ``schema`` member of the verbose case is skipped, not parsed into
values: the floor is the cheapest honest parse of the records' values) for JSON, ``fastavro``'s
``schemaless_reader`` per message (after the 5-byte header; one thread) for Avro. ratio = floor
seconds / lakecdc seconds; the target is >= 0.33 (within 3x).
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa

from bench.converted import (
    ConvertedSuite,
    Encoding,
    LengthPrefixed,
    current_ms,
    dump,
    floor_json,
    gg_messages,
    op_ts_micros,
)
from bench.decode import Floor, count_length_prefixed
from bench.formats import Encoded
from bench.generate import SOURCE_SCHEMA

HEADING = "Debezium decode throughput"
#: Bumped whenever an encoding's bytes change, so that cached encodings are rebuilt.
VERSION = 1
SERVER = "bench"
TOPIC = f"{SERVER}.BENCH.ORDERS"
SCHEMA_ID = 1
DECIMALS = {f.name: f.type for f in SOURCE_SCHEMA if pa.types.is_decimal(f.type)}
COLUMNS = tuple(SOURCE_SCHEMA.names)
_FLUSH = 1 << 22

# -- the Debezium view of one GoldenGate event ------------------------------------------------------


def envelope(message: dict[str, Any]) -> dict[str, Any]:
    """The Debezium envelope of one GoldenGate op-modeled message (values as Python: ints,
    Decimals, strings); an update's after image is the whole new row."""
    op = {"I": "c", "U": "u", "D": "d"}[message["op_type"]]
    before, after = message.get("before"), message.get("after")
    if op == "u":
        after = {**before, **after}
    micros = op_ts_micros(message["op_ts"])
    scn = str(int(message["pos"]))
    source = {
        "version": "2.7.0.Final", "connector": "oracle", "name": SERVER, "ts_ms": micros // 1000, "snapshot": "false",
        "db": "ORCLPDB1", "sequence": None, "ts_us": micros, "ts_ns": micros * 1000, "schema": "BENCH",
        "table": "ORDERS", "txId": f"0a.{scn}.1", "scn": scn, "commit_scn": scn, "lcr_position": None,
        "rs_id": None, "ssn": 0, "redo_thread": 1, "user_name": "BENCH",
    }
    return {"before": before, "after": after, "source": source, "op": op,
            "ts_ms": current_ms(message["current_ts"]), "ts_us": None, "ts_ns": None, "transaction": None}


def _unscaled(value: Decimal, scale: int) -> int:
    return int(value.scaleb(scale))


def _decimal_bytes(value: Decimal, scale: int) -> bytes:
    n = _unscaled(value, scale)
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


def _image(image: dict[str, Any] | None, decimal: Callable[[Decimal, pa.Decimal128Type], Any]) -> dict[str, Any] | None:
    if image is None:
        return None
    return {c: (decimal(Decimal(v), DECIMALS[c]) if c in DECIMALS and v is not None else v) for c, v in image.items()}


def _with_images(env: dict[str, Any], decimal: Callable[[Decimal, pa.Decimal128Type], Any]) -> dict[str, Any]:
    return {**env, "before": _image(env["before"], decimal), "after": _image(env["after"], decimal)}


# -- Kafka Connect schema (JSON converter) -----------------------------------------------------------

_SOURCE_FIELDS = (
    ("version", "string", False), ("connector", "string", False), ("name", "string", False),
    ("ts_ms", "int64", False), ("snapshot", "string", True), ("db", "string", False), ("sequence", "string", True),
    ("ts_us", "int64", True), ("ts_ns", "int64", True), ("schema", "string", False), ("table", "string", False),
    ("txId", "string", True), ("scn", "string", True), ("commit_scn", "string", True), ("lcr_position", "string", True),
    ("rs_id", "string", True), ("ssn", "int64", True), ("redo_thread", "int32", True), ("user_name", "string", True),
)


def _column_field(f: pa.Field) -> dict[str, Any]:
    if pa.types.is_decimal(f.type):
        return {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                "parameters": {"scale": str(f.type.scale), "connect.decimal.precision": str(f.type.precision)},
                "field": f.name}
    kind = "int64" if pa.types.is_integer(f.type) else "string"
    return {"type": kind, "optional": f.name != "ID", "field": f.name}


def connect_schema() -> dict[str, Any]:
    """The envelope's Kafka Connect schema, as Debezium's Oracle connector declares it."""
    row = {"type": "struct", "fields": [_column_field(f) for f in SOURCE_SCHEMA], "optional": True,
           "name": f"{TOPIC}.Value"}
    source = {"type": "struct", "optional": False, "name": "io.debezium.connector.oracle.Source", "field": "source",
              "fields": [{"type": t, "optional": o, "field": n} for n, t, o in _SOURCE_FIELDS]}
    tx = {"type": "struct", "optional": True, "name": "event.block", "version": 1, "field": "transaction",
          "fields": [{"type": "string", "optional": False, "field": "id"},
                     {"type": "int64", "optional": False, "field": "total_order"},
                     {"type": "int64", "optional": False, "field": "data_collection_order"}]}
    return {"type": "struct", "optional": False, "name": f"{TOPIC}.Envelope", "version": 2, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, source,
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"}, {"type": "int64", "optional": True, "field": "ts_us"},
        {"type": "int64", "optional": True, "field": "ts_ns"}, tx]}


# -- Avro schema (Confluent's AvroConverter) ------------------------------------------------------


def _avro_column(f: pa.Field) -> dict[str, Any]:
    if pa.types.is_decimal(f.type):
        t: Any = {"type": "bytes", "scale": f.type.scale, "precision": f.type.precision, "connect.version": 1,
                  "connect.parameters": {"scale": str(f.type.scale), "connect.decimal.precision": str(f.type.precision)},
                  "connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}
    else:
        t = "long" if pa.types.is_integer(f.type) else "string"
    if f.name == "ID":
        return {"name": f.name, "type": t}
    return {"name": f.name, "type": ["null", t], "default": None}


def avro_schema() -> dict[str, Any]:
    """The envelope as Confluent's ``AvroData`` registers it (``after`` refers to ``Value`` by name)."""
    value = {"type": "record", "name": "Value", "namespace": TOPIC, "connect.name": f"{TOPIC}.Value",
             "fields": [_avro_column(f) for f in SOURCE_SCHEMA]}
    prim = {"string": "string", "int64": "long", "int32": "int"}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.oracle",
              "connect.name": "io.debezium.connector.oracle.Source",
              "fields": [{"name": n, "type": ["null", prim[t]], "default": None} if o else {"name": n, "type": prim[t]}
                         for n, t, o in _SOURCE_FIELDS]}
    block = {"type": "record", "name": "block", "namespace": "event", "connect.version": 1, "connect.name": "event.block",
             "fields": [{"name": "id", "type": "string"}, {"name": "total_order", "type": "long"},
                        {"name": "data_collection_order", "type": "long"}]}
    return {"type": "record", "name": "Envelope", "namespace": TOPIC, "connect.version": 2,
            "connect.name": f"{TOPIC}.Envelope", "fields": [
                {"name": "before", "type": ["null", value], "default": None},
                {"name": "after", "type": ["null", f"{TOPIC}.Value"], "default": None},
                {"name": "source", "type": source}, {"name": "op", "type": "string"},
                {"name": "ts_ms", "type": ["null", "long"], "default": None},
                {"name": "ts_us", "type": ["null", "long"], "default": None},
                {"name": "ts_ns", "type": ["null", "long"], "default": None},
                {"name": "transaction", "type": ["null", block], "default": None}]}


# -- converting ---------------------------------------------------------------------------------------


def _b64_decimal(value: Decimal, dtype: pa.Decimal128Type) -> str:
    return base64.b64encode(_decimal_bytes(value, dtype.scale)).decode("ascii")


def _text_decimal(value: Decimal, dtype: pa.Decimal128Type) -> str:
    return f"{value:.{dtype.scale}f}"


def _bytes_decimal(value: Decimal, dtype: pa.Decimal128Type) -> bytes:
    return _decimal_bytes(value, dtype.scale)


def build_json_schema(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    head = '{"schema":' + dump(connect_schema()) + ',"payload":'
    with (out / "events.json").open("w", encoding="utf-8") as fh:
        for message in gg_messages(events_json):
            fh.write(head + dump(_with_images(envelope(message), _b64_decimal)) + "}\n")
    return ["events.json"], {}


def build_json(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    with (out / "events.json").open("w", encoding="utf-8") as fh:
        for message in gg_messages(events_json):
            fh.write(dump(_with_images(envelope(message), _text_decimal)) + "\n")
    return ["events.json"], {}


def build_avro(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    schema = avro_schema()
    (out / "schemas").mkdir()
    (out / "schemas" / f"{SCHEMA_ID}.avsc").write_text(json.dumps(schema, indent=1) + "\n")
    parsed = fastavro.parse_schema(schema)
    header = b"\0" + struct.pack(">I", SCHEMA_ID)
    with LengthPrefixed(out / "events.bin") as messages:
        for message in gg_messages(events_json):
            messages.write(parsed, _with_images(envelope(message), _bytes_decimal), header)
    return ["events.bin"], {"schemaDirectory": "schemas"}


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding("debezium-json-schema", "debezium-json",
                 "Connect JSON with schema (schemas.enable=true), one message per line", build_json_schema),
        Encoding("debezium-json", "debezium-json",
                 "Connect JSON without schema, decimal.handling.mode=string, one message per line", build_json),
        Encoding("debezium-avro", "debezium-avro",
                 "Confluent Avro wire format, length-prefixed messages, schema id 1 in schemas/", build_avro),
    )
}


# -- floors -------------------------------------------------------------------------------------------


def arrow_envelope() -> pa.Schema:
    """The envelope's Arrow schema for pyarrow's JSON reader (decimals as text: base64 or digits)."""
    row = pa.struct([(f.name, pa.string() if pa.types.is_decimal(f.type) else f.type) for f in SOURCE_SCHEMA])
    prim = {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32()}
    source = pa.struct([(n, prim[t]) for n, t, _o in _SOURCE_FIELDS])
    tx = pa.struct([("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())])
    return pa.schema([("before", row), ("after", row), ("source", source), ("op", pa.string()), ("ts_ms", pa.int64()),
                      ("ts_us", pa.int64()), ("ts_ns", pa.int64()), ("transaction", tx)])


def floor_avro_wire(encoded: Encoded) -> int:
    """fastavro's ``schemaless_reader`` per length-prefixed wire-format message (after the magic
    byte and schema id), one thread."""
    schema = fastavro.parse_schema(json.loads((Path(encoded.options["schemaDirectory"]) / f"{SCHEMA_ID}.avsc").read_text()))
    return count_length_prefixed(encoded.files, schema, skip=5)


_JSON = "pyarrow.json.read_json, explicit schema, 2 threads"
FLOORS: dict[str, list[Floor]] = {
    "debezium-json-schema": [floor_json(arrow_envelope(), "payload", label=_JSON + " (the `schema` member skipped)")],
    "debezium-json": [floor_json(arrow_envelope())],
    "debezium-avro": [Floor("fastavro.schemaless_reader per length-prefixed message, 1 thread", floor_avro_wire)],
}


SUITE = ConvertedSuite(
    module="bench.debezium", heading=HEADING, version=VERSION, encodings=ENCODINGS, floors=FLOORS,
    description=__doc__.split("\n\n")[0],
    converted_as="The workload's events converted to what Debezium's Oracle connector writes (bench/debezium.py)",
)
load, encode, main = SUITE.load, SUITE.encode, SUITE.main


if __name__ == "__main__":
    main()
