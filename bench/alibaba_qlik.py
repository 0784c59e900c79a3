"""Alibaba DTS and Qlik Replicate decode throughput: ``dts-avro``, ``shareplex-json``,
``canal-json`` and ``qlik-json`` beside the parse floor of each encoding (issue 5, Benchmark).

    python -m bench.alibaba_qlik --events 1000000 --keys 200000 [--formats a,b] [--repeat R]
        [--warmup W] [--workdir DIR] [--seed S] [--write-results]

The workload of :mod:`bench.generate` (``events.json``: GoldenGate op-modeled JSON, table
``BENCH.ORDERS``) is converted once (in a subprocess, cached under
``<workload>/formats/<encoding>/`` with a ``manifest.json``; :mod:`bench.converted`) into what each
source would have written for the same changes, one message per event:

==================  ==============================================================================
encoding            what is written
==================  ==============================================================================
``dts-avro``        DTS ``Record`` s (the published schema of ``lakecdc/decode/alibaba/schemas/dts``),
                    plain Avro binary without header, each preceded by its length (4 bytes,
                    big-endian) as a dump of DTS's Kafka topic holds them. A MySQL source:
                    ``Integer`` (BIGINT/INT), ``Decimal`` (precision and scale 2),
                    ``Character`` (utf8mb4 bytes), ``DateTime`` (year, month, day), NULL as a
                    null element; whole rows (an update's after image is its before image with
                    the changed columns laid over it: DTS cannot say "not logged");
                    ``sourcePosition`` ``offset@file``, ``tags.pk_uk_info`` naming ``ID``
``shareplex-json``  DTS's SharePlex JSON, one line per operation: ``meta`` (``op`` ins/upd/del,
                    ``scn`` = the GoldenGate ``pos``, ``trans``, ``seq`` 1 of ``size`` 1,
                    ``time`` to the second, ...), ``data`` (an update: the changed columns'
                    new values only) and ``key`` (an update: ``ID``'s old value); whole
                    numbers as JSON numbers, decimals and text as strings
``canal-json``      DTS's Canal JSON, one message per statement of one row: ``data`` the
                    whole row as strings, ``old`` the previous values of an update's changed
                    columns, ``mysqlType``/``sqlType``, ``pkNames``, ``es`` = ``op_ts`` in
                    ms, ``id`` = the GoldenGate ``pos``
``qlik-json``       Qlik Replicate's JSON data messages, each wrapped in its envelope
                    (``magic`` atMSG, ``type`` DT, ``messageSchemaId``), the metadata message
                    (``MD``, version 1, ordinals 1..12, types INT8/INT4/NUMERIC/DATE/STRING)
                    apart in ``metadata/`` as a dedicated metadata topic would give it
                    (option ``metadataDirectory``). Integers as JSON numbers, NUMERIC and
                    dates as strings. ``columnMask``/``changeMask`` as 2-byte hex: a partial
                    update (half of the updates, as in the workload) shows its uncaptured
                    columns as null in ``data``/``beforeData`` with their ``columnMask`` bit 0;
                    ``changeSequence`` is the op time's 17 digits then the ``pos`` in 18
==================  ==============================================================================

Every encoding carries every event of ``events.json`` in order; applied, each gives the table the
workload gives (tests/test_bench_alibaba_qlik.py checks the decoded events against
``events.json``, event by event). Then, in one process with one Spark session (``local[2]``), per
encoding: **lakecdc** (``get_decoder(format, options).read(...)`` to Spark's ``noop`` sink, rows
and ``_error`` counted in the same pass: exactly the workload's events, none bad; the helpers of
:mod:`bench.decode`) and its **floor**: ``pyarrow.json.read_json`` with an explicit schema of the
messages for the JSON encodings, ``fastavro``'s ``schemaless_reader`` per message for DTS Avro.
ratio = floor seconds / lakecdc seconds; the target is >= 0.33 (within 3x).
"""

from __future__ import annotations

import hashlib
import json
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
    whole_row,
)
from bench.decode import Floor, count_length_prefixed
from bench.formats import Encoded
from bench.generate import KEY, SOURCE_SCHEMA, TABLE

HEADING = "Alibaba DTS and Qlik decode throughput"
#: Bumped whenever an encoding's bytes change, so that cached encodings are rebuilt.
VERSION = 1
COLUMNS = tuple(SOURCE_SCHEMA.names)
DATABASE, TABLE_NAME = TABLE.split(".")
DECIMALS = {f.name: f.type for f in SOURCE_SCHEMA if pa.types.is_decimal(f.type)}
DATES = ("ORDER_DATE", "SHIP_DATE")
#: MySQL column types (Canal's mysqlType, sqlType; DTS's dataTypeNumber)
MYSQL: dict[str, tuple[str, int, int]] = {
    "ID": ("bigint(20)", -5, 8), "CUSTOMER_ID": ("bigint(20)", -5, 8), "ORDER_DATE": ("date", 91, 10),
    "SHIP_DATE": ("date", 91, 10), "STATUS": ("varchar(16)", 12, 253), "CHANNEL": ("varchar(16)", 12, 253),
    "QUANTITY": ("int(11)", 4, 3), "UNIT_PRICE": ("decimal(10,2)", 3, 246), "AMOUNT": ("decimal(12,2)", 3, 246),
    "DISCOUNT": ("decimal(10,2)", 3, 246), "PRIORITY": ("int(11)", 4, 3), "NOTE": ("varchar(255)", 12, 253),
}
#: Qlik Replicate column types of the metadata message
QLIK: dict[str, str] = {
    "ID": "INT8", "CUSTOMER_ID": "INT8", "ORDER_DATE": "DATE", "SHIP_DATE": "DATE", "STATUS": "STRING",
    "CHANNEL": "STRING", "QUANTITY": "INT4", "UNIT_PRICE": "NUMERIC", "AMOUNT": "NUMERIC", "DISCOUNT": "NUMERIC",
    "PRIORITY": "INT4", "NOTE": "STRING",
}
OPS = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}
Image = dict[str, Any]


def _text(value: Any) -> str | None:
    """A value as the text sources that write strings give it (Decimal with its scale as written)."""
    return None if value is None else str(value)


def _changed(message: dict[str, Any]) -> list[str]:
    """The non-key columns an update sets to a new value (partial after images hold only ID and
    such columns; a full one is compared with its before image)."""
    before, after = message["before"], message["after"]
    return [c for c in COLUMNS if c != KEY and c in after and after[c] != before.get(c)]


# -- DTS Avro -----------------------------------------------------------------------------------------------

_NS = "com.alibaba.dts.formats.avro."


def _dts_value(column: str, value: Any) -> Any:
    if value is None:
        return None
    if column in DECIMALS:
        dtype = DECIMALS[column]
        return (f"{_NS}Decimal", {"value": str(value), "precision": dtype.precision, "scale": dtype.scale})
    if isinstance(value, int):
        return (f"{_NS}Integer", {"precision": 19 if MYSQL[column][2] == 8 else 10, "value": str(value)})
    if column in DATES:
        y, m, d = (int(p) for p in value.split("-"))
        return (f"{_NS}DateTime", {"year": y, "month": m, "day": d, "hour": None, "minute": None, "second": None,
                                  "millis": None})
    return (f"{_NS}Character", {"charset": "utf8mb4", "value": value.encode("utf-8")})


def _dts_image(image: Image | None) -> list[Any] | None:
    return None if image is None else [_dts_value(c, image.get(c)) for c in COLUMNS]


_DTS_FIELDS = [{"name": c, "dataTypeNumber": MYSQL[c][2]} for c in COLUMNS]
_DTS_TAGS = {"pk_uk_info": json.dumps({"PRIMARY": [KEY]}, separators=(",", ":")), "thread_id": "1", "server_id": "1"}


def dts_record(message: dict[str, Any]) -> dict[str, Any]:
    """The DTS Record of one GoldenGate message (whole rows)."""
    pos = int(message["pos"])
    op = message["op_type"]
    position = f"{4 + 250 * (pos % 1_000_000)}@{78 + pos // 1_000_000}"  # binlog offset @ file number
    seconds = op_ts_micros(message["op_ts"]) // 1_000_000
    return {
        "version": 0, "id": pos, "sourceTimestamp": seconds, "sourcePosition": position,
        "safeSourcePosition": position, "sourceTxid": "0", "source": {"sourceType": "MySQL", "version": "8.0.28"},
        "operation": OPS[op], "objectName": TABLE, "processTimestamps": None,
        "tags": {**_DTS_TAGS, "readerThroughoutTime": str(current_ms(message["current_ts"]))},
        "fields": _DTS_FIELDS, "beforeImages": _dts_image(message.get("before") if op != "I" else None),
        "afterImages": _dts_image(whole_row(message)), "bornTimestamp": seconds,
    }


def dts_schema() -> Any:
    from lakecdc.decode.alibaba.dts_records import published_schema

    return fastavro.parse_schema(published_schema())


def build_dts(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    parsed = dts_schema()
    with LengthPrefixed(out / "events.bin") as messages:
        for message in gg_messages(events_json):
            messages.write(parsed, dts_record(message))
    return ["events.bin"], {}


# -- SharePlex JSON ---------------------------------------------------------------------------------------


def _shareplex_image(image: Image, columns: list[str] | tuple[str, ...]) -> Image:
    return {c: (_text(image[c]) if isinstance(image[c], Decimal) else image[c]) for c in columns if c in image}


def shareplex_message(message: dict[str, Any]) -> dict[str, Any]:
    """One SharePlex operation (see the module docstring)."""
    op, pos = message["op_type"], int(message["pos"])
    meta = {
        "time": message["op_ts"][:19].replace(" ", "T"), "userid": 84,
        "op": {"I": "ins", "U": "upd", "D": "del"}[op], "scn": str(pos), "rowid": f"AAATGpAAIAA{pos:09d}",
        "trans": f"{pos % 8}.{pos % 31}.{pos}", "seq": 1, "size": 1, "table": TABLE, "idx": "1/1",
        "posttime": message["current_ts"][:19],
    }
    if op == "U":
        return {"meta": meta, "data": _shareplex_image(message["after"], _changed(message)),
                "key": {KEY: message["before"][KEY]}}
    return {"meta": meta, "data": _shareplex_image(message["before" if op == "D" else "after"], COLUMNS)}


def build_shareplex(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    with (out / "events.json").open("w", encoding="utf-8") as fh:
        for message in gg_messages(events_json):
            fh.write(dump(shareplex_message(message)) + "\n")
    return ["events.json"], {}


# -- Canal JSON ------------------------------------------------------------------------------------------

_MYSQL_TYPE = {c: MYSQL[c][0] for c in COLUMNS}
_SQL_TYPE = {c: MYSQL[c][1] for c in COLUMNS}


def canal_message(message: dict[str, Any]) -> dict[str, Any]:
    """One Canal message of one row (see the module docstring)."""
    op = message["op_type"]
    row = message["before"] if op == "D" else whole_row(message)
    assert row is not None
    old = [{c: _text(message["before"][c]) for c in _changed(message)}] if op == "U" else None
    return {
        "data": [{c: _text(row.get(c)) for c in COLUMNS}], "database": DATABASE,
        "es": op_ts_micros(message["op_ts"]) // 1000, "id": int(message["pos"]), "isDdl": False,
        "mysqlType": _MYSQL_TYPE, "old": old, "pkNames": [KEY], "sql": "", "sqlType": _SQL_TYPE,
        "table": TABLE_NAME, "ts": current_ms(message["current_ts"]), "type": OPS[op],
    }


def build_canal(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    with (out / "events.json").open("w", encoding="utf-8") as fh:
        for message in gg_messages(events_json):
            fh.write(dump(canal_message(message)) + "\n")
    return ["events.json"], {}


# -- Qlik JSON --------------------------------------------------------------------------------------------

QLIK_SCHEMA_ID = hashlib.md5(f"{TABLE}/1".encode()).hexdigest().upper()
_MASK_BYTES = len(COLUMNS) // 8 + 1


def mask_hex(columns: list[str] | tuple[str, ...]) -> str:
    """Replicate's mask: one hex number over ``columns // 8 + 1`` bytes, bit ``ordinal - 1`` per column."""
    return sum(1 << COLUMNS.index(c) for c in columns).to_bytes(_MASK_BYTES, "big").hex().upper()


def qlik_metadata() -> dict[str, Any]:
    """The metadata message (envelope MD) of ``BENCH.ORDERS`` version 1."""
    columns = {
        c: {"ordinal": i, "type": QLIK[c], "length": 0 if QLIK[c] != "STRING" else 255,
            "precision": DECIMALS[c].precision if c in DECIMALS else 0, "scale": DECIMALS[c].scale if c in DECIMALS else 0,
            "primaryKeyPosition": 1 if c == KEY else 0, "nullable": c != KEY}
        for i, c in enumerate(COLUMNS, 1)
    }
    body = {"schemaId": QLIK_SCHEMA_ID,
            "lineage": {"server": "bench", "task": "orders", "schema": DATABASE, "table": TABLE_NAME, "tableVersion": 1,
                        "timestamp": "2023-12-31T00:00:00.000"},
            "tableStructure": {"tableColumns": columns}}
    return {"magic": "atMSG", "type": "MD", "headers": None, "messageSchemaId": None, "messageSchema": None,
            "message": body}


def _qlik_image(image: Image, present: list[str] | tuple[str, ...]) -> Image:
    return {c: ((_text(image.get(c)) if c in DECIMALS else image.get(c)) if c in present else None) for c in COLUMNS}


def qlik_message(message: dict[str, Any]) -> dict[str, Any]:
    """One data message in its envelope (see the module docstring)."""
    op, pos = message["op_type"], int(message["pos"])
    ts = message["op_ts"]
    if op == "U":
        present: list[str] | tuple[str, ...] = [c for c in COLUMNS if c in message["after"]]
        row = whole_row(message)
        assert row is not None
        data, before = _qlik_image(row, present), _qlik_image(message["before"], present)
        column_mask, change_mask = mask_hex(present), mask_hex(_changed(message))
    else:
        data = _qlik_image(message["before" if op == "D" else "after"], COLUMNS)
        before, column_mask = None, mask_hex(COLUMNS)
        change_mask = mask_hex(COLUMNS if op == "I" else (KEY,))
    headers = {
        "operation": OPS[op], "changeSequence": f"{ts[:4]}{ts[5:7]}{ts[8:10]}{ts[11:13]}{ts[14:16]}{ts[17:19]}"
        f"{ts[20:23]}{pos:018d}", "timestamp": f"{ts[:10]}T{ts[11:23]}", "streamPosition": message["pos"],
        "transactionId": f"{pos:032X}", "changeMask": change_mask, "columnMask": column_mask,
        "transactionEventCounter": 1, "transactionLastEvent": True,
    }
    return {"magic": "atMSG", "type": "DT", "headers": None, "messageSchemaId": QLIK_SCHEMA_ID, "messageSchema": None,
            "message": {"data": data, "beforeData": before, "headers": headers}}


def build_qlik(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    (out / "metadata").mkdir()
    (out / "metadata" / f"{TABLE}.json").write_text(dump(qlik_metadata()) + "\n", encoding="utf-8")
    with (out / "events.json").open("w", encoding="utf-8") as fh:
        for message in gg_messages(events_json):
            fh.write(dump(qlik_message(message)) + "\n")
    return ["events.json"], {"metadataDirectory": "metadata"}


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding("dts-avro", "dts-avro", "DTS Record Avro (MySQL source, whole rows), length-prefixed messages",
                 build_dts),
        Encoding("shareplex-json", "shareplex-json",
                 "DTS SharePlex JSON, one operation per line, updates with the changed columns only", build_shareplex),
        Encoding("canal-json", "canal-json", "DTS Canal JSON, one row per message, values as strings, `old` on updates",
                 build_canal),
        Encoding("qlik-json", "qlik-json",
                 "Qlik Replicate JSON data messages in their envelope, half the updates partial (columnMask), "
                 "metadata message in metadata/", build_qlik),
    )
}


# -- floors -----------------------------------------------------------------------------------------------


def _row(types: dict[str, pa.DataType] | None = None) -> pa.StructType:
    """The columns as the JSON encodings hold them: integers int64 (``types`` overrides), the rest text."""
    types = types or {}
    return pa.struct([(c, types.get(c, pa.int64() if pa.types.is_integer(SOURCE_SCHEMA.field(c).type) else pa.string()))
                      for c in COLUMNS])


def shareplex_arrow() -> pa.Schema:
    meta = pa.struct([("time", pa.string()), ("userid", pa.int64()), ("op", pa.string()), ("scn", pa.string()),
                      ("rowid", pa.string()), ("trans", pa.string()), ("seq", pa.int64()), ("size", pa.int64()),
                      ("table", pa.string()), ("idx", pa.string()), ("posttime", pa.string())])
    return pa.schema([("meta", meta), ("data", _row()), ("key", pa.struct([(KEY, pa.int64())]))])


def canal_arrow() -> pa.Schema:
    text = _row({c: pa.string() for c in COLUMNS})
    return pa.schema([
        ("data", pa.list_(text)), ("database", pa.string()), ("es", pa.int64()), ("id", pa.int64()),
        ("isDdl", pa.bool_()), ("mysqlType", pa.struct([(c, pa.string()) for c in COLUMNS])), ("old", pa.list_(text)),
        ("pkNames", pa.list_(pa.string())), ("sql", pa.string()),
        ("sqlType", pa.struct([(c, pa.int64()) for c in COLUMNS])), ("table", pa.string()), ("ts", pa.int64()),
        ("type", pa.string()),
    ])


def qlik_arrow() -> pa.Schema:
    headers = pa.struct([
        ("operation", pa.string()), ("changeSequence", pa.string()), ("timestamp", pa.string()),
        ("streamPosition", pa.string()), ("transactionId", pa.string()), ("changeMask", pa.string()),
        ("columnMask", pa.string()), ("transactionEventCounter", pa.int64()), ("transactionLastEvent", pa.bool_()),
    ])
    message = pa.struct([("data", _row()), ("beforeData", _row()), ("headers", headers)])
    return pa.schema([("magic", pa.string()), ("type", pa.string()), ("messageSchemaId", pa.string()),
                      ("message", message)])


def floor_dts(encoded: Encoded) -> int:
    """fastavro's ``schemaless_reader`` per length-prefixed Record with the published schema, 1 thread."""
    return count_length_prefixed(encoded.files, dts_schema())


FLOORS: dict[str, list[Floor]] = {
    "dts-avro": [Floor("fastavro.schemaless_reader per length-prefixed message, published schema, 1 thread",
                       floor_dts)],
    "shareplex-json": [floor_json(shareplex_arrow())],
    "canal-json": [floor_json(canal_arrow())],
    "qlik-json": [floor_json(qlik_arrow())],
}

SUITE = ConvertedSuite(
    module="bench.alibaba_qlik", heading=HEADING, version=VERSION, encodings=ENCODINGS, floors=FLOORS,
    description=__doc__.split("\n\n")[0],
    converted_as="The workload's events converted to what Alibaba DTS (DTS Avro, SharePlex JSON, Canal JSON) and "
                 "Qlik Replicate (JSON) write (bench/alibaba_qlik.py)",
)
load, encode, main = SUITE.load, SUITE.encode, SUITE.main


if __name__ == "__main__":
    main()
