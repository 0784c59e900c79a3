"""Qlik Replicate (``qlik-json``, ``qlik-avro``): seed 003's examples, the real samples, metadata across
runs, masks, bad records, and oracle round trips of both formats."""

from __future__ import annotations

import dataclasses
import json
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from pyspark.sql import types as T

import lakecdc
from lakecdc.decode import get_decoder
from lakecdc.decode.qlik.catalog import BadRecord, Column, TableVersion, spark_type
from lakecdc.decode.qlik.masks import mask_columns, parse_mask
from lakecdc.errors import ConfigError

try:
    from tests.canal_render import key_changes
    from tests.decode.helpers import brief, decode
    from tests.helpers import rows
    from tests.qlik_render import (
        QlikMessage,
        Table,
        avro_data,
        avro_envelope,
        avro_metadata,
        json_data,
        json_envelope,
        json_metadata,
        kcat_lines,
        length_prefixed,
        mask_hex,
        render_history,
        run_qlik_scenario,
    )
    from tests.test_property import TableSpec, scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from canal_render import key_changes  # type: ignore[no-redef]
    from decode.helpers import brief, decode  # type: ignore[no-redef]
    from helpers import rows  # type: ignore[no-redef]
    from qlik_render import (  # type: ignore[no-redef]
        QlikMessage,
        Table,
        avro_data,
        avro_envelope,
        avro_metadata,
        json_data,
        json_envelope,
        json_metadata,
        kcat_lines,
        length_prefixed,
        mask_hex,
        render_history,
        run_qlik_scenario,
    )
    from test_property import TableSpec, scenarios  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "qlik-json"
SEED = [FIX / "seed-metadata.json", FIX / "seed-data.json"]
SIXTEEN = [FIX / "formats-16-columns-metadata.json", FIX / "formats-16-columns-update.json"]
TOPIC = {"topicTables": "test-kafka-resume-job=INVDB.ITEM_MASTER"}
SAMPLE_ID = "8FB9D3C10EA4B25751DF9CC8318F0A02"  # the real DT sample's messageSchemaId


def version(table: str, n: int, columns: list[tuple[str, str, int]], sid: str | None = None) -> TableVersion:
    return TableVersion(table, n, tuple(Column(c, i, t, key_position=k) for i, (c, t, k) in enumerate(columns, 1)),
                        schema_id=sid)


def quarantine(summary) -> list[tuple[int | None, str]]:
    q = DeltaTable(summary.quarantine).to_pyarrow_table().to_pylist()
    return sorted((r["line"], r["reason"]) for r in q)


# -- masks and types (no Spark) -----------------------------------------------------------------------

ORDERS = version("SALES.ORDERS", 1, [("STATUS", "STRING", 0), ("AMOUNT", "NUMERIC", 0), ("NOTE", "WSTRING", 0),
                                      ("ID", "INT8", 1)])
ITEMS = version("INVDB.ITEM_MASTER", 3, [(f"c{i}", "STRING", int(i == 1)) for i in range(1, 17)])
WIDE = version("S.WIDE", 1, [(f"C{i}", "INT8", int(i == 1)) for i in range(1, 71)])


def test_masks_are_one_hex_number_bit_zero_ordinal_one():
    assert parse_mask("0B", "changeMask") == 0b1011
    assert mask_columns(0x0B, ORDERS, "changeMask", "0B") == ["STATUS", "AMOUNT", "ID"]  # ordinals 1, 2, 4
    assert mask_columns(parse_mask("00FFFF", "columnMask"), ITEMS, "columnMask", "00FFFF") == [f"c{i}" for i in range(1, 17)]
    assert mask_columns(parse_mask("008080", "changeMask"), ITEMS, "changeMask", "008080") == ["c8", "c16"]
    assert parse_mask(b"\x00\x80\x80", "changeMask") == 0x8080  # Avro bytes: the same number
    # shorter than the column count: the missing high digits are 0 (ordinals 9..16 not present)
    assert mask_columns(parse_mask("FF", "columnMask"), ITEMS, "columnMask", "FF") == [f"c{i}" for i in range(1, 9)]
    # more than 64 columns: bit 69 is ordinal 70
    wide = parse_mask(mask_hex({1, 65, 70}, 70), "columnMask")
    assert mask_columns(wide, WIDE, "columnMask", "") == ["C1", "C65", "C70"]
    assert [parse_mask(v, "columnMask") for v in (None, "", b"")] == [None, None, None]


def test_masks_of_an_odd_number_of_digits_have_a_leading_zero_implied():
    assert [parse_mask(v, "changeMask") for v in ("0", "B", "00B", "8080", "08080")] == [0, 0x0B, 0x0B, 0x8080, 0x8080]
    assert mask_columns(parse_mask("B", "changeMask"), ORDERS, "changeMask", "B") == ["STATUS", "AMOUNT", "ID"]
    assert mask_columns(parse_mask("8080", "changeMask"), ITEMS, "changeMask", "8080") == ["c8", "c16"]
    assert mask_columns(parse_mask("FFFF", "columnMask"), ITEMS, "columnMask", "FFFF") == \
        mask_columns(parse_mask("0FFFF", "columnMask"), ITEMS, "columnMask", "0FFFF")


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("0G", "'columnMask' '0G' is not hexadecimal (expected hex digits, e.g. '0B')"),
        (11, "'columnMask' is not a hex string: 11"),
    ],
)
def test_malformed_masks_name_the_mask_and_value(value, reason):
    with pytest.raises(BadRecord, match="^" + reason.replace("(", r"\(").replace(")", r"\)") + "$"):
        parse_mask(value, "columnMask")


def test_a_mask_bit_beyond_the_columns_is_refused():
    with pytest.raises(BadRecord, match=r"'columnMask' '1F' marks ordinal 5, but SALES.ORDERS version 1 has 4 column"):
        mask_columns(0x1F, ORDERS, "columnMask", "1F")


@pytest.mark.parametrize(
    ("kind", "precision", "scale", "expected"),
    [
        ("INT1", 0, 0, T.LongType()), ("INT4", 0, 0, T.LongType()), ("INT8", 0, 0, T.LongType()),
        ("UINT4", 0, 0, T.LongType()), ("UINT8", 0, 0, T.DecimalType(20, 0)),
        ("NUMERIC", 10, 2, T.DecimalType(10, 2)), ("NUMERIC", 38, 10, T.DecimalType(38, 10)),
        ("NUMERIC", 0, 4, T.DecimalType(38, 4)), ("NUMERIC", 40, 2, T.StringType()),
        ("REAL4", 0, 0, T.FloatType()), ("REAL8", 0, 0, T.DoubleType()), ("BOOLEAN", 0, 0, T.BooleanType()),
        ("DATE", 0, 0, T.DateType()), ("DATETIME", 0, 0, T.TimestampNTZType()), ("TIME", 0, 0, T.StringType()),
        ("STRING", 0, 0, T.StringType()), ("WSTRING", 0, 0, T.StringType()), ("BYTES", 0, 0, T.BinaryType()),
        ("BLOB", 0, 0, T.BinaryType()), ("CLOB", 0, 0, T.StringType()), ("NCLOB", 0, 0, T.StringType()),
    ],
)
def test_metadata_types_map_to_exact_spark_types(kind, precision, scale, expected):
    assert spark_type(Column("c", 1, kind, precision=precision, scale=scale)) == expected


def test_options_are_checked():
    assert get_decoder("qlik-json", TOPIC).topic_tables == {"test-kafka-resume-job": "INVDB.ITEM_MASTER"}
    with pytest.raises(ConfigError, match="topicTables entry 'orders' is not TOPIC=SCHEMA.TABLE"):
        get_decoder("qlik-json", {"topicTables": "orders"})
    with pytest.raises(ConfigError, match="framing 'ocf' is not one of auto, length-prefixed, single, kcat"):
        get_decoder("qlik-avro", {"framing": "ocf"})
    with pytest.raises(ConfigError, match="unknown option.*known: metadataDirectory, table, topicTables"):
        get_decoder("qlik-json", {"schemaDirectory": "x"})


def test_renderer_writes_what_replicate_writes():
    table = Table.of(TableSpec("S.T", ("ID",), [(1,), (2,)], {"C1": "int", "C2": "str"}))
    events = [dataclasses.replace(e, table="S.T") for e in key_changes().events if e.table == "SHOP.CUSTOMER"]
    msgs = [m for m in render_history(events, {"S.T": table}) if m is not None]
    assert [m.body["headers"]["operation"] for m in msgs][:4] == ["REFRESH", "REFRESH", "REFRESH", "UPDATE"]
    partial = msgs[5]  # the chained key move logs ID and C2 only: C1 is null with its bit 0
    assert partial.body["data"] == {"ID": 4, "C1": None, "C2": "moved"}
    assert partial.body["headers"]["columnMask"] == "05" and partial.event.after == {"ID": 4, "C2": "moved"}


# -- the seed's examples -------------------------------------------------------------------------------


def test_seed_examples_decode_as_the_seed_says(spark):
    got = decode(spark, "qlik-json", [*SEED, *SIXTEEN], **TOPIC)
    assert all(r["_error"] is None for r in got)
    by_file = {}
    for r in got:
        by_file.setdefault(Path(r["_file"]).name.split(".json")[0], []).append(r)
    (md,) = by_file["seed-metadata"]
    assert (md["table"], md["op"], md["keys"], md["source"]["skipped"], md["source"]["table_version"]) == (
        "SALES.ORDERS", None, ["ID"], "metadata", "1")
    refresh, insert, update, lob, delete = by_file["seed-data"]
    row1 = "AMOUNT='17520.00', DOC='a long text', ID='1', NOTE='first', STATUS='NEW', UPDATED='2024-05-01 10:00:00.000000'"
    assert brief(refresh) == f"R SALES.ORDERS None/0 after={{{row1}}}"
    assert refresh["seq"] == "0" * 35 + "|" + "0" * 10 and refresh["op_ts"] is None  # before every change
    assert brief(insert) == ("I SALES.ORDERS 20240501100500000000000000000000001/1 after={AMOUNT='5.10', DOC=None, "
                             "ID='2', NOTE=None, STATUS='NEW', UPDATED='2024-05-01 10:05:00.000000'}")
    assert insert["op_ts"] == datetime(2024, 5, 1, 10, 5, 0, 123000) and insert["keys"] == ["ID"]
    assert insert["txid"] == "00000000000000000000000000060008"
    # the seed's 0B: ordinals 1, 2 and 4 changed; the LOB changed too but is outside changeMask, and stays
    assert update["source"]["changed_columns"] == "STATUS,AMOUNT,NOTE"
    assert update["after"]["DOC"] == "a longer text" and update["after"]["AMOUNT"] == "17600.50"
    assert update["before"]["STATUS"] == "NEW" and update["source"]["transactionLastEvent"] == "false"
    assert update["seq"] == "20240501100600000000000000000000002|0000000001"
    # columnMask 1F: the LOB (ordinal 6) was not captured: missing, although the message shows null
    assert "DOC" not in lob["after"] and "DOC" not in lob["before"] and lob["idx"] == 2
    assert lob["source"]["present_columns"] == "STATUS,AMOUNT,ID,NOTE,UPDATED"
    assert brief(delete) == ("D SALES.ORDERS 20240501100700000000000000000000004/1 before={AMOUNT='5.10', DOC=None, "
                             "ID='2', NOTE=None, STATUS='NEW', UPDATED='2024-05-01 10:05:00.000000'}")
    assert [r["seq"] for r in by_file["seed-data"]] == sorted(r["seq"] for r in by_file["seed-data"])
    # formats.md's production message: 16 columns, columnMask 00FFFF, changeMask 008080
    (item,) = by_file["formats-16-columns-update"]
    assert (item["table"], item["op"], item["pos"], item["keys"]) == (
        "INVDB.ITEM_MASTER", "U", "20230321213416580000000000000000017", ["item_no"])
    assert item["op_ts"] == datetime(2023, 3, 21, 21, 34, 19, 511000)
    assert len(item["after"]) == len(item["before"]) == 16
    assert item["source"]["changed_columns"] == "item_desc,load_date_time"
    assert {c for c in item["after"] if item["after"][c] != item["before"][c]} == {"item_desc", "load_date_time"}
    assert item["source"]["kafka.topic"] == "test-kafka-resume-job" and item["source"]["kafka.offset"] == "17"
    assert item["source"]["streamPosition"] == "1015;638150312565803470;20221211140008252023B|0000000003A90202DB790001"


def test_seed_examples_apply_with_the_metadata_types(spark, tmp_path):
    summary = lakecdc.apply([str(p) for p in [*SEED, *SIXTEEN]], tmp_path / "lake", format="qlik-json",
                            options=TOPIC, spark=spark)
    tables = {t.source_table: t for t in summary.tables}
    assert summary.ok
    assert {n: (t.events, t.skipped, t.quarantined) for n, t in tables.items()} == {
        "SALES.ORDERS": (5, 1, 0), "INVDB.ITEM_MASTER": (1, 1, 0)}
    orders = tables["SALES.ORDERS"].target
    # the last update's DOC was missing (columnMask 1F): the row keeps the value before it
    assert rows(orders) == [{"STATUS": "SHIPPED", "AMOUNT": Decimal("17600.50"), "ID": 1, "NOTE": "second",
                             "UPDATED": datetime(2024, 5, 1, 10, 0), "DOC": "a longer text"}]
    schema = {f.name: f.type.type for f in DeltaTable(str(orders)).schema().fields}
    assert (schema["AMOUNT"], schema["ID"], schema["UPDATED"], schema["DOC"]) == (
        "decimal(10,2)", "long", "timestamp_ntz", "string")
    (item,) = rows(tables["INVDB.ITEM_MASTER"].target)
    assert item["item_desc"] == "RIVET 3/16 POPR FENDER" and item["load_date_time"] == datetime(2023, 3, 21, 14, 34, 21)


# -- the real samples ---------------------------------------------------------------------------------------


def test_real_samples_decode_to_what_they_state(spark, sample, tmp_path):
    md, dt = sample("qlik-replicate-json/attunity-metadata-MD.json"), sample("qlik-replicate-json/attunity-data-refresh-DT.json")
    data, meta = decode(spark, "qlik-json", [md, dt])  # by file name: the DT's staged copy sorts first
    assert (meta["table"], meta["op"], meta["keys"], meta["_error"]) == ("employees.salaries", None, ["emp_no", "from_date"], None)
    assert meta["source"]["lineage.task"] == "mysql-to-kafka" and meta["source"]["schema_id"] == "94345778F0A920B9F6634C541177EBB2"
    # the two samples come from different captures: the DT names a schema id the MD is not
    assert data["op"] is None and data["_error"].startswith(f"messageSchemaId '{SAMPLE_ID}' names no metadata message")

    # the DT's own metadata message (the MD sample as Replicate sends it for the DT's schema id)
    known = tmp_path / "metadata" / "salaries.json"
    known.parent.mkdir()
    known.write_text(md.read_text().replace("94345778F0A920B9F6634C541177EBB2", SAMPLE_ID))
    summary = lakecdc.apply([str(dt), str(known)], tmp_path / "lake", format="qlik-json",
                            options={"metadataDirectory": str(known.parent)}, spark=spark)
    (table,) = summary.tables
    assert (table.source_table, table.events, table.inserted, table.skipped) == ("employees.salaries", 1, 1, 0)
    assert rows(table.target) == [{"emp_no": 14472, "salary": 49592, "from_date": date(1993, 11, 25),
                                   "to_date": date(1994, 11, 25)}]


# -- metadata across runs ------------------------------------------------------------------------------------


def _orders(version_: int, extra: bool = False) -> Table:
    cols = [("ID", "INT8", 1), ("STATUS", "STRING", 0)] + ([("NOTE", "STRING", 0)] if extra else [])
    return Table("SALES.ORDERS", tuple(cols), version=version_)


def _insert(table: Table, seq: int, row: dict, *, wrapped: bool = True) -> str:
    headers = {"operation": "INSERT", "changeSequence": f"{20240501000000000 * 10**18 + seq}", "timestamp": "2024-05-01T00:00:00",
               "streamPosition": "", "transactionId": "T1", "changeMask": None,
               "columnMask": mask_hex({table.ordinal(c) for c in row}, len(table.names))}
    body = {"data": row, "beforeData": None, "headers": headers}
    return json_data(QlikMessage(table, body, None)) if wrapped else json.dumps(body)  # type: ignore[arg-type]


def test_metadata_of_an_earlier_run_decodes_later_data_and_nothing_is_guessed(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    v1, v2 = _orders(1), _orders(2, extra=True)

    def run(name: str, *lines: str):
        (landing / name).write_text("".join(line + "\n" for line in lines))
        return lakecdc.apply(str(landing), lake, format="qlik-json", spark=spark)

    first = run("1-metadata.json", json_metadata(v1))
    assert [(t.source_table, t.events, t.skipped) for t in first.tables] == [("SALES.ORDERS", 0, 1)]
    kept = list((lake / "_lakecdc" / "decoders" / "qlik-json").glob("*.json"))
    assert [TableVersion.from_json(p.read_text()).version for p in kept] == [1]

    second = run("2-data.json", _insert(v1, 1, {"ID": 1, "STATUS": "NEW"}))
    (orders,) = second.tables
    assert (orders.events, orders.inserted) == (1, 1)
    assert rows(orders.target) == [{"ID": 1, "STATUS": "NEW"}]

    # version 2 (a NOTE column) whose metadata has not come: by id, and bare on the table's topic
    bare = kcat_lines([_insert(v2, 3, {"ID": 3, "STATUS": "NEW", "NOTE": "x"}, wrapped=False)], topic="ORDERS")
    third = run("3-data.json", _insert(v2, 2, {"ID": 2, "STATUS": "NEW", "NOTE": "n"}), bare.strip())
    q = DeltaTable(third.quarantine).to_pyarrow_table().to_pylist()
    # the bare one names its table (its topic), the other only an id
    assert sorted((r["line"], r["source_table"]) for r in q) == [(1, None), (2, "SALES.ORDERS")]
    assert quarantine(third) == [
        (1, f"messageSchemaId '{v2.schema_id}' names no metadata message lakecdc knows, so its table and version "
            "are unknown: give the MD message with that schemaId in the input, in an earlier run into this target, "
            "or in metadataDirectory (the message is not decoded by guess)"),
        (2, "table SALES.ORDERS: the message's version has no metadata (no known version, of 1, has its columns "
            "ID, NOTE, STATUS); the message names no version (no messageSchemaId)"),
    ]

    # version 2's metadata arrives with new data: the new data applies, the quarantined does not
    fourth = run("4-data.json", json_metadata(v2), _insert(v2, 4, {"ID": 4, "STATUS": "NEW", "NOTE": "later"}))
    (orders,) = fourth.tables
    assert (orders.events, orders.skipped, orders.quarantined) == (1, 1, 0)
    assert rows(orders.target, "ID") == [{"ID": 1, "STATUS": "NEW", "NOTE": None},
                                         {"ID": 4, "STATUS": "NEW", "NOTE": "later"}]
    assert len(list((lake / "_lakecdc" / "decoders" / "qlik-json").glob("*.json"))) == 2


def test_bare_messages_find_their_version_by_topic_and_columns(spark, tmp_path):
    v1, v2 = _orders(1), _orders(2, extra=True)
    swapped = Table("SALES.ORDERS", (("STATUS", "STRING", 0), ("ID", "INT8", 1)), version=3)
    f = tmp_path / "dump.json"
    f.write_text(
        "".join(json_metadata(t) + "\n" for t in (v1, v2))
        + kcat_lines([_insert(v1, 1, {"ID": 1, "STATUS": "a"}, wrapped=False)], topic="ORDERS")
        + kcat_lines([_insert(v2, 2, {"ID": 2, "STATUS": "b", "NOTE": "c"}, wrapped=False)], topic="orders-v", key="SALES+ORDERS")
        + kcat_lines([_insert(v1, 3, {"ID": 3, "STATUS": "d"}, wrapped=False)], topic="elsewhere")
    )
    got = decode(spark, "qlik-json", [f])
    assert [(r["source"].get("table_version"), r["_error"]) for r in got[2:]] == [
        ("1", None), ("2", None),
        (None, "the data message names no table: no messageSchemaId (Replicate's envelope), no known externalSchemaId, "
               "no 'schema'/'table' members and no Kafka topic naming a known table; map topics with the option "
               "topicTables=TOPIC=SCHEMA.TABLE or name the table with table=SCHEMA.TABLE")]
    assert decode(spark, "qlik-json", [f], table="SALES.ORDERS")[-1]["after"] == {"ID": "3", "STATUS": "d"}
    # two versions with the same columns numbered differently: the message cannot tell which
    g = tmp_path / "ambiguous.json"
    g.write_text(json_metadata(v1) + "\n" + json_metadata(swapped) + "\n"
                 + kcat_lines([_insert(v1, 1, {"ID": 1, "STATUS": "a"}, wrapped=False)], topic="ORDERS"))
    assert decode(spark, "qlik-json", [g])[-1]["_error"].startswith(
        "table SALES.ORDERS: versions 1, 3 have the message's columns but different ordinals or keys")


# -- bad records ---------------------------------------------------------------------------------------------


def test_bad_records_are_quarantined_and_the_rest_applies(spark, tmp_path):
    table = _orders(1)

    def dt(seq: int, op: str = "INSERT", data: object = "row", **headers) -> str:
        body = {"data": {"ID": seq, "STATUS": "s"} if data == "row" else data, "beforeData": None,
                "headers": {"operation": op, "changeSequence": f"2024050100000000000000000000000{seq:04d}",
                            "timestamp": "2024-05-01T00:00:00.000", "columnMask": "03", **headers}}
        return json_envelope("DT", table.schema_id, body)

    lines = [
        json_metadata(table),                                   # 1 skipped
        dt(1),                                                  # 2 good
        dt(2, columnMask="3"),                                  # 3 good: odd length, '03'
        dt(3, changeMask="0X"),                                 # 4 not hex
        dt(4, columnMask="07"),                                 # 5 a third column in a 2-column table
        dt(5, op="UPSERT"),                                     # 6 unknown operation
        '{"magic": "atMSG", "type": "DT", "message": {',        # 7 not JSON
        dt(7, op="UPDATE", changeSequence=""),                  # 8 no changeSequence
        dt(8, timestamp="yesterday"),                           # 9 not a timestamp
        dt(9, data={"ID": 9, "STATUS": "s", "EXTRA": 1}),       # 10 a column the metadata lacks
        dt(10, op="DELETE", data=None),                         # 11 no row
        dt(11, data={"ID": 11, "STATUS": "ok"}, columnMask="01"),  # 12 good: STATUS missing
    ]
    landing = tmp_path / "landing" / "batch.json"
    landing.parent.mkdir()
    landing.write_text("\n".join(lines) + "\n")
    summary = lakecdc.apply(str(landing.parent), tmp_path / "lake", format="qlik-json", spark=spark)
    (orders,) = summary.tables
    assert (orders.source_table, orders.events, orders.skipped, orders.quarantined) == ("SALES.ORDERS", 3, 1, 7)
    assert summary.quarantined_unrouted == 1  # the line that is not JSON names no table
    assert rows(orders.target, "ID") == [{"ID": 1, "STATUS": "s"}, {"ID": 11, "STATUS": None}, {"ID": 2, "STATUS": "s"}]
    q = DeltaTable(summary.quarantine).to_pyarrow_table().to_pylist()
    assert all(r["file"] == str(landing) and r["format"] == "qlik-json" for r in q)
    got = quarantine(summary)
    assert [line for line, _ in got] == [4, 5, 6, 7, 8, 9, 10, 11]
    reasons = dict(got)
    assert reasons[4] == "'changeMask' '0X' is not hexadecimal (expected hex digits, e.g. '0B')"
    assert reasons[5] == ("'columnMask' '07' marks ordinal 3, but SALES.ORDERS version 1 has 2 column(s): the message "
                          "was not written with that metadata")
    assert reasons[6] == 'unknown headers.operation "UPSERT" (expected REFRESH, INSERT, UPDATE or DELETE)'
    assert reasons[7].startswith("record is not valid JSON")
    assert reasons[8] == "headers.changeSequence missing for operation UPDATE (it orders the changes)"
    assert reasons[9] == "headers.timestamp 'yesterday' is not a timestamp (expected e.g. 2023-03-21T21:34:19.511, UTC)"
    assert reasons[10] == ("'data' has column(s) EXTRA that SALES.ORDERS version 1 does not have: the message was "
                           "not written with that metadata")
    assert reasons[11] == "'data' and 'beforeData' both missing for operation DELETE (expected the deleted row)"
    assert next(r["raw"] for r in q if r["line"] == 6) == lines[5]


# -- wide tables -----------------------------------------------------------------------------------------------


def test_more_than_64_columns(spark, tmp_path):
    cols = (("C1", "INT8", 1), *((f"C{i}", "INT8", 0) for i in range(2, 71)))
    table = Table("S.WIDE", cols)
    full = {f"C{i}": i for i in range(1, 71)}

    def dt(seq: int, op: str, data: dict, before: dict | None, present: set[int], changed: set[int] | None) -> str:
        body = {"data": data, "beforeData": before, "headers": {
            "operation": op, "changeSequence": f"2024050100000000000000000000000{seq:04d}", "timestamp": "2024-05-01T00:00:00",
            "changeMask": mask_hex(changed, 70) if changed else None, "columnMask": mask_hex(present, 70)}}
        return json_envelope("DT", table.schema_id, body)

    update = {**full, "C65": None, "C70": 700}  # C65 not captured (bit 64 clear), C70 changed (bit 69)
    f = tmp_path / "landing" / "wide.json"
    f.parent.mkdir()
    f.write_text("\n".join([json_metadata(table), dt(1, "INSERT", full, None, set(range(1, 71)), None),
                            dt(2, "UPDATE", update, full, set(range(1, 71)) - {65}, {70})]) + "\n")
    (md, ins, upd) = decode(spark, "qlik-json", [f])
    assert len(ins["after"]) == 70 and "C65" not in upd["after"] and upd["source"]["changed_columns"] == "C70"
    assert upd["source"]["columnMask"] == "3E" + "FF" * 8  # 9 bytes; bit 64 (C65) clear
    summary = lakecdc.apply(str(f.parent), tmp_path / "lake", format="qlik-json", spark=spark)
    (row,) = rows(summary.tables[0].target)
    assert row == {**full, "C70": 700}  # C65 kept its value: its null was not captured


# -- oracle round trips --------------------------------------------------------------------------------------

ROUND_TRIP = dict(max_examples=5, derandomize=True, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])


def test_key_changes_round_trip(spark, tmp_path):
    run_qlik_scenario(spark, key_changes(), tmp_path, fmt="qlik-json")


@settings(**ROUND_TRIP)
@given(sc=scenarios(max_events=14, modes=("delete-insert", "update", "abend")))
def test_random_histories_round_trip(spark, tmp_path_factory, sc):
    run_qlik_scenario(spark, sc, tmp_path_factory.mktemp("qlik"), fmt="qlik-json", max_runs=2)


# -- qlik-avro ----------------------------------------------------------------------------------------------------


def test_avro_messages_decode_as_their_json_twins(spark, tmp_path):
    sc = key_changes()
    tables = {s.name: Table.of(s) for s in sc.specs}
    messages = [m for m in render_history(sc.events, tables) if m is not None]
    as_json = tmp_path / "messages.json"
    as_json.write_text("".join(line + "\n" for line in [*map(json_metadata, tables.values()), *map(json_data, messages)]))
    as_avro = tmp_path / "messages.avro"
    as_avro.write_bytes(length_prefixed([*map(avro_metadata, tables.values()), *map(avro_data, messages)]))
    broken = tmp_path / "z-kcat.json"  # a kcat dump: one good record, one that is no envelope
    broken.write_text(kcat_lines([avro_data(messages[0]), b"\x00\x01garbage"]))

    def canonical(r) -> tuple:
        source = {k: v for k, v in r["source"].items() if not k.startswith("kafka.")}
        return (r["table"], r["op"], r["op_ts"], r["pos"], r["idx"], r["seq"], r["txid"], r["keys"], r["before"],
                r["after"], source)

    from_json = decode(spark, "qlik-json", [as_json])
    from_avro = decode(spark, "qlik-avro", [as_avro, broken])
    assert all(r["_error"] is None for r in from_json) and len(from_json) == len(messages) + 2
    assert [canonical(r) for r in from_avro[: len(from_json)]] == [canonical(r) for r in from_json]
    assert from_avro[0]["_offset"] == 0 and from_avro[1]["_offset"] > 0
    good, bad = from_avro[-2:]
    assert canonical(good) == canonical(from_json[2]) and good["source"]["kafka.offset"] == "0"
    assert bad["_error"].startswith("line 2: not a Replicate envelope (Avro record MessageEnvelope)")


def test_bad_avro_messages_are_quarantined_and_the_rest_applies(spark, tmp_path):
    table = Table("S.T", (("ID", "INT8", 1), ("V", "STRING", 0)))

    def insert(n: int) -> bytes:
        headers = {"operation": "INSERT", "changeSequence": f"2024050100000000000000000000000{n:04d}",
                   "timestamp": "2024-05-01T00:00:00", "streamPosition": "", "transactionId": "",
                   "changeMask": None, "columnMask": "03", "transactionEventCounter": None, "transactionLastEvent": None}
        return avro_data(QlikMessage(table, {"data": {"ID": n, "V": f"v{n}"}, "beforeData": None, "headers": headers}, None))  # type: ignore[arg-type]

    messages = [avro_metadata(table), insert(1), avro_envelope("DT", b"", schema_id="FFFF"), b"\x00\x01garbage",
                avro_envelope("DT", b"\x07", schema_id=table.schema_id), insert(2)]
    offsets = [sum(4 + len(m) for m in messages[:i]) for i in range(len(messages) + 1)]
    landing = tmp_path / "landing" / "batch.avro"
    landing.parent.mkdir()
    landing.write_bytes(length_prefixed(messages) + b"\x00\x00\x00\x64abc")  # a cut last message
    summary = lakecdc.apply(str(landing.parent), tmp_path / "lake", format="qlik-avro", spark=spark)
    (t,) = summary.tables
    assert (t.source_table, t.events, t.skipped, t.quarantined, summary.quarantined_unrouted) == ("S.T", 2, 1, 1, 3)
    assert rows(t.target, "ID") == [{"ID": 1, "V": "v1"}, {"ID": 2, "V": "v2"}]
    q = sorted(DeltaTable(summary.quarantine).to_pyarrow_table().to_pylist(), key=lambda r: r["offset"])
    assert all(r["file"] == str(landing) and r["line"] is None and r["format"] == "qlik-avro" for r in q)
    assert [(r["offset"], r["source_table"]) for r in q] == [(offsets[2], None), (offsets[3], None),
                                                             (offsets[4], "S.T"), (offsets[6], None)]
    assert q[0]["reason"].startswith("messageSchemaId 'FFFF' names no metadata message lakecdc knows")
    assert q[1]["reason"].startswith("not a Replicate envelope (Avro record MessageEnvelope): ")
    assert q[2]["reason"].startswith("the dataSchema of S.T version 1 does not read the message: ")
    assert q[3]["reason"] == "truncated: the length prefix gives 100 bytes, only 3 remain"
    assert q[1]["raw"] == "AAFnYXJiYWdl"  # the message's bytes, base64


def test_avro_round_trip(spark, tmp_path):
    run_qlik_scenario(spark, dataclasses.replace(key_changes(), pk_update="update"), tmp_path, fmt="qlik-avro")


@settings(**{**ROUND_TRIP, "max_examples": 2})
@given(sc=scenarios(max_events=12, modes=("delete-insert", "update")))
def test_random_histories_round_trip_avro(spark, tmp_path_factory, sc):
    run_qlik_scenario(spark, sc, tmp_path_factory.mktemp("qlik-avro"), fmt="qlik-avro", max_runs=2)
