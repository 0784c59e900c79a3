"""The Debezium Avro decoder: Confluent wire format against a schema directory or a registry
export, kcat dumps, sinks' OCF files with their keys; logical types, Avro-sanitised names, bad
messages, and a round trip of random histories against the oracle."""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import struct
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.decode import DECODERS, get_decoder
from lakecdc.decode.avro.connect import connect_schema
from lakecdc.decode.avro.registry import load_registry
from lakecdc.decode.debezium.rules import sortable
from lakecdc.decode.kafka.dumps import length_prefixed_splits
from lakecdc.errors import ConfigError
from lakecdc.lake.state import quarantine_path
from tests.decode.helpers import decode as decode_events

try:
    from tests.debezium_avro_render import AvroRenderer, length_prefixed, wire
    from tests.debezium_render import (
        MARKER_SCHEMA,
        Renderer,
        Style,
        WholeTransactions,
        as_debezium,
        decoded_table,
    )
    from tests.decode.debezium.test_debezium_json import WRITTEN
    from tests.helpers import rows
    from tests.oracle import Oracle, declaring
    from tests.test_property import assert_counts, assert_targets_match, scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from debezium_avro_render import AvroRenderer, length_prefixed, wire  # type: ignore[no-redef]
    from debezium_render import (  # type: ignore[no-redef]
        MARKER_SCHEMA,
        Renderer,
        Style,
        WholeTransactions,
        as_debezium,
        decoded_table,
    )
    from helpers import rows  # type: ignore[no-redef]
    from oracle import Oracle, declaring  # type: ignore[no-redef]
    from test_debezium_json import WRITTEN  # type: ignore[no-redef]
    from test_property import assert_counts, assert_targets_match, scenarios  # type: ignore[no-redef]

FORMAT = "debezium-avro"
TABLE = "inventory.order-items"  # as the source block names it
NS = "dbserver1.inventory.order_items"  # Debezium's Avro-sanitised name

# -- a PostgreSQL table as Confluent's AvroConverter registers it -------------------------------------


def _opt(t: Any) -> list[Any]:
    return ["null", t]


VALUE = {
    "type": "record", "name": "Value", "namespace": NS, "connect.name": f"{NS}.Value",
    "fields": [
        {"name": "id", "type": "int"},
        {"name": "price", "default": None, "type": _opt({
            "type": "bytes", "scale": 2, "precision": 10, "connect.version": 1, "logicalType": "decimal",
            "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
            "connect.name": "org.apache.kafka.connect.data.Decimal"})},
        {"name": "created", "default": None,
         "type": _opt({"type": "long", "connect.version": 1, "connect.name": "io.debezium.time.MicroTimestamp"})},
        {"name": "shipped", "default": None, "type": _opt({
            "type": "long", "connect.version": 1, "connect.name": "org.apache.kafka.connect.data.Timestamp",
            "logicalType": "timestamp-millis"})},
        {"name": "day", "default": None,
         "type": _opt({"type": "int", "connect.version": 1, "connect.name": "io.debezium.time.Date"})},
        {"name": "qty", "default": None, "type": _opt({"type": "int", "connect.type": "int16"})},
        {"name": "ratio", "default": None, "type": _opt("float")},
        {"name": "note", "default": None, "type": _opt("string")},
        {"name": "zoned", "default": None,
         "type": _opt({"type": "string", "connect.version": 1, "connect.name": "io.debezium.time.ZonedTimestamp"})},
        {"name": "amount", "default": None, "type": _opt({
            "type": "record", "name": "VariableScaleDecimal", "namespace": "io.debezium.data", "connect.version": 1,
            "connect.name": "io.debezium.data.VariableScaleDecimal",
            "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}]})},
    ],
}
SOURCE = {
    "type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
    "connect.name": "io.debezium.connector.postgresql.Source",
    "fields": [
        {"name": "version", "type": "string"}, {"name": "connector", "type": "string"},
        {"name": "name", "type": "string"}, {"name": "ts_ms", "type": "long"},
        {"name": "snapshot", "default": "false", "type": _opt({
            "type": "string", "connect.version": 1, "connect.parameters": {"allowed": "true,last,false,incremental"},
            "connect.default": "false", "connect.name": "io.debezium.data.Enum"})},
        {"name": "db", "type": "string"}, {"name": "schema", "type": "string"}, {"name": "table", "type": "string"},
        {"name": "txId", "default": None, "type": _opt("long")}, {"name": "lsn", "default": None, "type": _opt("long")},
    ],
}
BLOCK = {
    "type": "record", "name": "block", "namespace": "event", "connect.version": 1, "connect.name": "event.block",
    "fields": [{"name": "id", "type": "string"}, {"name": "total_order", "type": "long"},
               {"name": "data_collection_order", "type": "long"}],
}
ENVELOPE = {
    "type": "record", "name": "Envelope", "namespace": NS, "connect.version": 1, "connect.name": f"{NS}.Envelope",
    "fields": [
        {"name": "before", "type": _opt(VALUE), "default": None},
        {"name": "after", "type": _opt(f"{NS}.Value"), "default": None},  # a reference, as Confluent writes it
        {"name": "source", "type": SOURCE},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": _opt("long"), "default": None},
        {"name": "transaction", "type": _opt(BLOCK), "default": None},
    ],
}
KEY = {"type": "record", "name": "Key", "namespace": NS, "connect.name": f"{NS}.Key", "fields": [{"name": "id", "type": "int"}]}
TX_MARKER = {
    "type": "record", "name": "TransactionMetadataValue", "namespace": "io.debezium.connector.common",
    "connect.version": 1, "connect.name": "io.debezium.connector.common.TransactionMetadataValue",
    "fields": [{"name": "status", "type": "string"}, {"name": "id", "type": "string"},
               {"name": "ts_ms", "type": "long"}, {"name": "event_count", "type": _opt("long"), "default": None},
               {"name": "data_collections", "default": None, "type": _opt({"type": "array", "items": {
                   "type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro",
                   "fields": [{"name": "data_collection", "type": "string"}, {"name": "event_count", "type": "long"}]}})}],
}
IDS = {"value": 7, "key": 8, "tx": 9}
SCHEMAS = {IDS["value"]: ENVELOPE, IDS["key"]: KEY, IDS["tx"]: TX_MARKER}
SUBJECTS = {IDS["value"]: f"{NS}-value", IDS["key"]: f"{NS}-key", IDS["tx"]: "dbserver1.transaction-value"}
TS = 1_700_000_000_000  # ms: 2023-11-14T22:13:20Z
UNAVAILABLE = "__debezium_unavailable_value"


def unscaled(n: int) -> bytes:
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


def row(i: int, **values: Any) -> dict[str, Any]:
    base = {"id": i, "price": None, "created": None, "shipped": None, "day": None, "qty": None, "ratio": None,
            "note": None, "zoned": None, "amount": None}
    return {**base, **values}


def envelope(op: str, lsn: int, *, before: dict | None = None, after: dict | None = None,
             snapshot: str = "false") -> dict[str, Any]:
    source = {"version": "2.5.0.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": TS + lsn,
              "snapshot": snapshot, "db": "shop", "schema": "inventory", "table": "order-items",
              "txId": None if op == "r" else 700 + lsn, "lsn": lsn}
    tx = None if op == "r" else {"id": f"{700 + lsn}:{lsn}", "total_order": 1, "data_collection_order": 1}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": TS + lsn + 5, "transaction": tx}


def message(kind: str, value: Any) -> bytes:
    schema_id = IDS[kind]
    return wire(schema_id, fastavro.parse_schema(SCHEMAS[schema_id]), value)


def key(i: int) -> bytes:
    return message("key", {"id": i})


FULL = row(1, price=unscaled(1250), created=1_700_000_000_123_456, shipped=1_700_000_000_123, day=19_675, qty=3,
           ratio=0.1, note="first", zoned="2024-01-01T10:00:00.5+02:00", amount={"scale": 3, "value": unscaled(31415)})
#: (key, value) messages in order: a snapshot read, an insert, a truncate, an insert, an update whose
#: note is unavailable (TOAST), an insert and its delete with the tombstone; a transaction marker.
MESSAGES: list[tuple[bytes | None, bytes]] = [
    (key(1), message("value", envelope("r", 100, after=FULL, snapshot="true"))),
    (key(2), message("value", envelope("c", 200, after=row(2, price=unscaled(-5), note="two")))),
    (None, message("value", envelope("t", 250))),
    (None, message("tx", {"status": "BEGIN", "id": "960:260", "ts_ms": TS, "event_count": None, "data_collections": None})),
    (key(3), message("value", envelope("c", 260, after=row(3, price=unscaled(700), note="n3")))),
    (key(3), message("value", envelope("u", 300, before=row(3, price=unscaled(700), note=UNAVAILABLE),
                                       after=row(3, price=unscaled(701), note=UNAVAILABLE)))),
    (key(4), message("value", envelope("c", 310, after=row(4, note="four")))),
    (key(4), message("value", envelope("d", 400, before=row(4, note="four")))),
    (key(4), b""),  # the tombstone
]
CANONICAL_FULL = {"id": "1", "price": "12.50", "created": "2023-11-14T22:13:20.123456Z",
                  "shipped": "2023-11-14T22:13:20.123Z", "day": "2023-11-14", "qty": "3", "ratio": "0.1",
                  "note": "first", "zoned": "2024-01-01T08:00:00.5Z", "amount": "31.415"}
EMPTY = {c: None for c in CANONICAL_FULL}


def canonical(i: int, **values: str) -> dict[str, str | None]:
    return {**EMPTY, "id": str(i), **values}


def write_registry(directory: Path, *, export: bool = False) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    if export:  # one subject version as `curl .../subjects/<s>/versions/1` returns it, the rest as a list
        first, *rest = sorted(SCHEMAS)
        (directory / "one.json").write_text(json.dumps(
            {"subject": SUBJECTS[first], "version": 1, "id": first, "schema": json.dumps(SCHEMAS[first])}))
        (directory / "rest.json").write_text(json.dumps([
            {"subject": SUBJECTS[i], "version": 1, "id": i, "schema": json.dumps(SCHEMAS[i])} for i in rest]))
    else:
        for i, schema in SCHEMAS.items():
            (directory / f"{i}.avsc").write_text(json.dumps(schema))
    return directory


def decode(spark, *paths: Path, **options: str) -> list[Any]:
    """Every output row (skipped ones too), in file order."""
    return decode_events(spark, FORMAT, list(paths), **options)


def events(found: list[Any]) -> list[Any]:
    return [r for r in found if r["op"] is not None or r["_error"] is not None]


def quarantine(target: Path) -> list[dict[str, Any]]:
    q = pa.table(DeltaTable(quarantine_path(str(target))).to_pyarrow_table()).to_pylist()
    return sorted(q, key=lambda r: (r["file"], r["offset"]))


def pg_pos(lsn: int, read: bool = False) -> str:
    return f"{sortable(lsn)}|{'1' if read else '0'}"


# -- schemas -----------------------------------------------------------------------------------------


def test_confluent_avro_schemas_read_back_as_kafka_connect_schemas():
    s = connect_schema(ENVELOPE)
    assert (s["type"], s["name"]) == ("struct", f"{NS}.Envelope")
    before, after = s["fields"][0], s["fields"][1]
    assert before["optional"] and after["optional"] and after["fields"] == before["fields"]  # the reference resolved
    cols = {f["field"]: f for f in after["fields"]}
    assert cols["price"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert cols["price"]["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert (cols["qty"]["type"], cols["ratio"]["type"], cols["id"]["type"]) == ("int16", "float32", "int32")
    assert cols["created"]["name"] == "io.debezium.time.MicroTimestamp" and cols["created"]["type"] == "int64"
    # plain Avro logical types map to the Connect type that reads the same
    plain = connect_schema({"type": "record", "name": "R", "fields": [
        {"name": "d", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}},
        {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}}]})
    d, t = plain["fields"]
    assert (d["name"], d["parameters"]) == ("org.apache.kafka.connect.data.Decimal",
                                            {"scale": "1", "connect.decimal.precision": "5"})
    assert t["name"] == "io.debezium.time.MicroTimestamp"


def test_schema_directory_and_registry_export_are_read_and_checked(tmp_path):
    by_file = load_registry(str(write_registry(tmp_path / "avsc")))
    export = load_registry(str(write_registry(tmp_path / "export", export=True)))
    assert by_file.schemas == export.schemas == SCHEMAS
    assert export.subjects == SUBJECTS and export.topic(IDS["value"]) == NS
    assert by_file.key_ids() == frozenset({IDS["key"]})
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "orders.avsc").write_text(json.dumps(KEY))
    with pytest.raises(ConfigError, match=r"orders.avsc: name the file by its schema id"):
        load_registry(str(tmp_path / "bad"))
    (tmp_path / "clash").mkdir()
    (tmp_path / "clash" / "7.avsc").write_text(json.dumps(KEY))
    (tmp_path / "clash" / "x.json").write_text(json.dumps({"id": 7, "schema": json.dumps(ENVELOPE)}))
    with pytest.raises(ConfigError, match="schema id 7 differs from the one in"):
        load_registry(str(tmp_path / "clash"))
    with pytest.raises(ConfigError, match="unknown option"):
        get_decoder(FORMAT, {"schemaDir": "x"})
    with pytest.raises(ConfigError, match="framing 'lines' is not one of"):
        get_decoder(FORMAT, {"framing": "lines"})
    assert DECODERS[FORMAT].name == FORMAT
    get_decoder(FORMAT, {"schema.registry.url": "http://registry:8081", "value.converter": "AvroConverter"})


def test_large_message_files_are_cut_at_messages_never_between_a_key_and_its_value(tmp_path):
    messages = [m for k, v in MESSAGES for m in ([k] if k else []) + [v]] * 20
    path = tmp_path / "m.bin"
    path.write_bytes(length_prefixed(messages))
    cuts = length_prefixed_splits(str(path), 400, frozenset({IDS["key"]}))
    assert len(cuts) > 3 and cuts[0][0] == 0 and cuts[-1][1] == path.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:], strict=False))
    starts, pos = {}, 0
    for n, m in enumerate(messages):
        starts[pos] = n
        pos += 4 + len(m)
    for start, _end, first in cuts:
        assert starts[start] == first
        assert first == 0 or not (len(messages[first - 1]) > 5 and messages[first - 1][1:5] == struct.pack(">I", IDS["key"]))


# -- golden decode -----------------------------------------------------------------------------------


def _check_events(found: list[Any]) -> None:
    """The events of MESSAGES as debezium-json would give them."""
    ev = events(found)
    assert [(r["table"], r["op"], r["_error"]) for r in ev] == [(TABLE, op, None) for op in "RITIUID"]
    read, c2, trunc, c3, u3, c4, d4 = ev
    assert read["after"] == CANONICAL_FULL and read["before"] is None and read["keys"] == ["id"]
    assert read["pos"] == pg_pos(100, read=True) and read["txid"] is None
    assert read["op_ts"] == dt.datetime(2023, 11, 14, 22, 13, 20, 100_000)
    assert c2["after"] == canonical(2, price="-0.05", note="two") and c2["txid"] == "900:200"
    assert (trunc["before"], trunc["after"], trunc["keys"], trunc["pos"]) == (None, None, None, pg_pos(250))
    expected_u3 = {k: v for k, v in canonical(3, price="7.01").items() if k != "note"}  # note unavailable: missing
    assert u3["after"] == expected_u3 and "note" not in u3["before"] and u3["before"]["price"] == "7.00"
    assert d4["before"] == canonical(4, note="four") and d4["after"] is None and d4["keys"] == ["id"]
    assert [r["pos"] for r in ev[1:]] == [pg_pos(n) for n in (200, 250, 260, 300, 310, 400)]
    assert all(r["seq"] == r["pos"] for r in ev)
    assert c3["source"]["source.snapshot"] == "false" and c3["source"]["transaction.total_order"] == "1"
    skipped = [(r["table"], r["source"]["skipped"], r["txid"]) for r in found if r["op"] is None and r["_error"] is None]
    assert (None, "transaction marker", "960:260") in skipped and (TABLE, "tombstone", None) in skipped


@pytest.mark.spark
def test_wire_format_messages_decode_as_debezium_json_would(spark, tmp_path):
    registry = write_registry(tmp_path / "schemas")
    path = tmp_path / "landing" / "dump.bin"
    path.parent.mkdir()
    path.write_bytes(length_prefixed([m for k, v in MESSAGES for m in ([k] if k else []) + [v]]))
    found = decode(spark, path, schemaDirectory=str(registry))
    _check_events(found)
    assert [r["source"]["skipped"] for r in found if r["op"] is None] == [
        "key", "key", "transaction marker", "key", "key", "key", "key", "key", "tombstone"]
    # keys are counted under their value's table (the source block's name, not the Avro name)
    assert {r["table"] for r in found if r["op"] is None and r["source"]["skipped"] != "transaction marker"} == {TABLE}
    assert all(r["_offset"] is not None and r["_raw"] is None for r in found)
    assert [r["_row"] for r in found] == list(range(len(found)))

    target = tmp_path / "lake"
    s = lakecdc.apply(path, target, format=FORMAT, options={"schemaDirectory": str(registry)}, spark=spark)
    t = s.table(TABLE)
    assert (t.events, t.quarantined, t.skipped) == (7, 0, 8)
    assert rows(t.target, "id") == [{
        "id": 3, "price": Decimal("7.01"), "created": None, "shipped": None, "day": None, "qty": None,
        "ratio": None, "note": "n3", "zoned": None, "amount": None}]  # the unavailable note kept its value
    types = {f.name: f.type.type for f in DeltaTable(str(t.target)).schema().fields if not f.name.startswith("_cdc")}
    assert types == {"id": "integer", "price": "decimal(10,2)", "created": "timestamp", "shipped": "timestamp",
                     "day": "date", "qty": "short", "ratio": "float", "note": "string", "zoned": "timestamp",
                     "amount": "decimal(38,3)"}  # VariableScaleDecimal: inferred from its values


@pytest.mark.spark
def test_kcat_dump_with_base64_messages_and_a_registry_export(spark, tmp_path):
    registry = write_registry(tmp_path / "export", export=True)
    lines = []
    for offset, (k, v) in enumerate(MESSAGES):
        topic = "dbserver1.transaction" if v[1:5] == struct.pack(">I", IDS["tx"]) else NS
        lines.append(json.dumps({
            "topic": topic, "partition": 0, "offset": offset, "tstype": "create", "ts": TS, "broker": 1,
            "headers": ["h", "1"], "key": None if k is None else base64.b64encode(k).decode(),
            "payload": base64.b64encode(v).decode() if v else None}))
    path = tmp_path / "landing" / "dump.json"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    found = decode(spark, path, schemaDirectory=str(registry))
    _check_events(found)
    c2 = events(found)[1]
    assert (c2["source"]["kafka.topic"], c2["source"]["kafka.offset"], c2["source"]["kafka.header.h"]) == (NS, "1", "1")
    assert c2["keys"] == ["id"] and c2["source"]["avro.schema_id"] == str(IDS["value"])
    assert len(found) == len(MESSAGES)  # keys ride with their values


# -- bad input ---------------------------------------------------------------------------------------------


@pytest.mark.spark
def test_bad_messages_are_quarantined_with_offset_reason_and_bytes_and_the_rest_applies(spark, tmp_path):
    registry = write_registry(tmp_path / "schemas")
    good1 = message("value", envelope("c", 10, after=row(1, note="a")))
    unknown = b"\0" + struct.pack(">I", 99) + good1[5:]
    magic = b"\x01" + good1[1:]
    extra = good1 + b"\x00\x00"
    short = b"\0\0\0"
    good2 = message("value", envelope("c", 20, after=row(2, note="b")))
    cut = message("value", envelope("c", 30, after=row(3)))
    body = length_prefixed([good1, unknown, magic, extra, short, good2])
    path = tmp_path / "landing" / "a.bin"
    path.parent.mkdir()
    path.write_bytes(body + struct.pack(">I", len(cut)) + cut[:10])
    target = tmp_path / "lake"
    s = lakecdc.apply(path, target, format=FORMAT, options={"schemaDirectory": str(registry)}, keys={TABLE: ["id"]},
                      spark=spark)
    assert [(r["id"], r["note"]) for r in rows(s.table(TABLE).target, "id")] == [(1, "a"), (2, "b")]
    q = quarantine(target)
    sizes = [4 + len(m) for m in (good1, unknown, magic, extra, short, good2)]
    offsets = [sum(sizes[:i]) for i in (1, 2, 3, 4)] + [len(body)]
    assert [(r["file"], r["line"], r["offset"], r["format"]) for r in q] == [
        (str(path.resolve()), None, o, FORMAT) for o in offsets]
    # the sanitised record name read back as the source's table name (seen in the same file)
    assert [r["source_table"] for r in q] == [None, None, TABLE, None, None]
    assert [r["reason"] for r in q] == [
        f"schema id 99 is not in schemaDirectory '{registry}' (ids 7, 8, 9); export it from the schema registry",
        "wrong magic byte 0x01: a Confluent wire-format message starts with 0x00, then the 4-byte schema id",
        f"schema id 7 reads {len(good1) - 5} of the message's {len(extra) - 5} body bytes",
        "truncated: 3 byte(s), a Confluent wire-format message has at least 5 (magic byte and schema id)",
        f"truncated: the length prefix gives {len(cut)} bytes, only 10 remain",
    ]
    assert [base64.b64decode(r["raw"]) for r in q] == [unknown, magic, extra, short, cut[:10]]


@pytest.mark.spark
def test_ocf_tombstones_and_a_corrupt_block(spark, tmp_path):
    """A sink's OCF file (nullable envelope, one block per record): a null record is a tombstone,
    a block whose sync marker is damaged is quarantined with its byte offset (up to the next sync
    marker found: the next block too), reading resumes after it."""
    records = [envelope("c", 10, after=row(1, note="a")), None, envelope("c", 20, after=row(2)),
               envelope("c", 30, after=row(3)), envelope("c", 40, after=row(4))]
    buffer = io.BytesIO()
    fastavro.writer(buffer, fastavro.parse_schema(["null", ENVELOPE]), records, sync_interval=1)
    data = bytearray(buffer.getvalue())
    header = fastavro.reader(io.BytesIO(bytes(data)))
    sync = bytes(header._header["sync"])
    marks = [i for i in range(len(data)) if data[i : i + 16] == sync]
    assert len(marks) == 6  # the header's, then one per block
    data[marks[3]] ^= 0xFF  # the third block no longer ends with the sync marker
    path = tmp_path / "landing" / "topic+0+0000000000.avro"
    path.parent.mkdir()
    path.write_bytes(bytes(data))
    found = decode(spark, path)
    assert [(r["op"], (r["source"] or {}).get("skipped"), r["_error"] is None) for r in found] == [
        ("I", None, True), (None, "tombstone", True), (None, None, False), ("I", None, True)]
    bad = found[2]
    assert bad["_offset"] == marks[2] + 16 and bad["_error"] == (
        f"OCF block at byte offset {marks[2] + 16}: the block does not end with the file's sync marker")
    assert base64.b64decode(bad["_raw"]) == bytes(data[marks[2] + 16 : marks[4] + 16])
    assert found[1]["table"] == TABLE and [r["after"]["id"] for r in found if r["op"]] == ["1", "4"]


@pytest.mark.spark
def test_wire_format_without_a_schema_directory_is_refused(spark, tmp_path):
    path = tmp_path / "a.bin"
    path.write_bytes(length_prefixed([MESSAGES[1][1]]))
    with pytest.raises(ConfigError, match="set schemaDirectory"):
        get_decoder(FORMAT).read(spark, [str(path)], staging=str(tmp_path / "s"))


# -- round trip ------------------------------------------------------------------------------------------

STYLES = {
    "oracle-wire": (Style("oracle", schema=True, layout="key-value"), "wire"),
    "postgresql-ocf": (Style("postgresql", schema=True, layout="key-value"), "ocf"),
}


def _round_trip(spark, workdir: Path, sc, reads: list[bool], style: Style, container: str) -> None:
    """Render Debezium's view of ``sc`` run by run as Avro; after every run the tables equal the oracle's."""
    evs, index = as_debezium(sc.events, style.connector, reads)
    kinds = {decoded_table(style.connector, spec.name): {**{k: "int" if k == "ID" else "str" for k in spec.keys},
                                                         **spec.columns} for spec in sc.specs}
    originals = {decoded_table(style.connector, spec.name): spec.name for spec in sc.specs}
    keys = {decoded_table(style.connector, spec.name): list(spec.keys) for spec in sc.specs}
    renderer = AvroRenderer(Renderer(evs, kinds, style, originals), evs, keys)
    landing, registry = workdir / "landing", workdir / "schemas"
    landing.mkdir(parents=True)
    oracle, targets, applied = Oracle(), {}, []
    for number, run in enumerate(sc.runs, start=1):
        run_events = [evs[j] for i in run for j in index[i]]
        if container == "wire":
            path = landing / f"run-{number:04d}.bin"
            path.write_bytes(renderer.render_wire(run_events))
            renderer.write_registry(registry, export=number % 2 == 0)
            applied.append(str(path))
            options = {"schemaDirectory": str(registry)}
        else:
            applied += [str(p) for p in renderer.write_ocf(run_events, landing, f"run-{number:04d}")]
            options = {}
        expected = oracle.apply_run(declaring(run_events, kinds), pk_update="delete-insert")
        summary = lakecdc.apply(applied, workdir / "lake", format=FORMAT, options=options, keys=keys,
                                pk_update=sc.pk_update, spark=spark)
        actual = {t.source_table: {f: getattr(t, f) for f in ("target", "events", "duplicate_or_late", "quarantined",
                                                               "inserted", "updated", "deleted", "status", "error")}
                  for t in summary.tables}
        targets.update({t: str(a["target"]) for t, a in actual.items()})
        assert summary.quarantined_unrouted == 0
        assert_counts(number, sc, run_events, expected, actual)
        assert_targets_match(oracle, targets, f"run {number} ({style}, {container})")


@pytest.mark.spark
@pytest.mark.parametrize("style", list(STYLES), ids=list(STYLES))
@settings(max_examples=4, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=12), reads=st.lists(st.booleans(), min_size=12, max_size=12))
def test_round_trip_of_random_histories_matches_the_oracle(spark, tmp_path_factory, style, sc, reads):
    _round_trip(spark, tmp_path_factory.mktemp("dbzavro"), sc, reads, *STYLES[style])


@pytest.mark.spark
def test_round_trip_of_a_written_history_matches_the_oracle(spark, tmp_path):
    """A key change (delete + tombstone + create), a truncate, a snapshot read replayed after newer
    changes, partial images (unavailable values), duplicates across runs: wire format."""
    _round_trip(spark, tmp_path, WRITTEN, [True], *STYLES["oracle-wire"])
    (table,) = [p for p in (tmp_path / "lake").iterdir() if not p.name.startswith("_")]
    assert rows(table, "ID") == [{"ID": 4, "A": "é\\'\"", "B": 4}]


def test_message_splits_of_a_small_file_is_one(tmp_path):
    path = tmp_path / "x.bin"
    path.write_bytes(length_prefixed([MESSAGES[0][1]]))
    assert length_prefixed_splits(str(path), 1 << 20, frozenset()) == [(0, path.stat().st_size, 0)]


def test_float_texts_are_those_of_the_32_bit_value():
    from lakecdc.decode.debezium.avro_reader import Plan
    from lakecdc.decode.debezium.settings import Settings

    plan = Plan.of(ENVELOPE, "t", Settings())
    record = fastavro.schemaless_reader(io.BytesIO(MESSAGES[0][1][5:]), plan.parsed, None)
    assert plan.adapt(record)["after"]["ratio"] == "0.1"


@pytest.mark.spark
@settings(max_examples=3, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=12), reads=st.lists(st.booleans(), min_size=12, max_size=12))
def test_transactions_cut_across_runs_apply_whole_in_the_wire_format(spark, tmp_path_factory, sc, reads):
    """complete_transactions with the transaction topic's BEGIN/END records in Avro (wire format):
    the tables equal the oracle fed only whole transactions (see WholeTransactions)."""
    style = STYLES["oracle-wire"][0]
    workdir = tmp_path_factory.mktemp("dbzavrotx")
    evs, index = as_debezium(sc.events, style.connector, reads)
    kinds = {decoded_table(style.connector, spec.name): {**{k: "int" if k == "ID" else "str" for k in spec.keys},
                                                         **spec.columns} for spec in sc.specs}
    originals = {decoded_table(style.connector, spec.name): spec.name for spec in sc.specs}
    keys = {decoded_table(style.connector, spec.name): list(spec.keys) for spec in sc.specs}
    base = Renderer(evs, kinds, style, originals)
    renderer, whole = AvroRenderer(base, evs, keys), WholeTransactions(base, evs)
    landing, registry = workdir / "landing", workdir / "schemas"
    landing.mkdir(parents=True)
    oracle, targets, applied = Oracle(), {}, []
    for number, run in enumerate(sc.runs, start=1):
        items, ready = whole.run([evs[j] for i in run for j in index[i]])
        messages: list[bytes] = []
        for kind, x in items:
            messages += (renderer.wire_messages([x]) if kind == "event"
                         else [renderer.message(MARKER_SCHEMA, x, f"{style.server}.transaction-value")])
        path = landing / f"run-{number:04d}.bin"
        path.write_bytes(length_prefixed(messages))
        renderer.write_registry(registry)
        applied.append(str(path))
        oracle.apply_run(declaring(ready, kinds), pk_update="delete-insert")
        summary = lakecdc.apply(applied, workdir / "lake", format=FORMAT, options={"schemaDirectory": str(registry)},
                                keys=keys, pk_update=sc.pk_update, complete_transactions=True, spark=spark)
        assert summary.ok and summary.quarantined_unrouted == 0
        assert sum(t.held for t in summary.tables) == whole.held, f"run {number}: held"
        targets.update({t.source_table: t.target for t in summary.tables})
        assert_targets_match(oracle, targets, f"run {number} (Avro wire format, whole transactions)")
