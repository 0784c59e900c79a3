"""Debezium schema-change records (issue 4 item 8): ``tableChanges`` columns and
``primaryKeyColumnNames`` give a table its columns, types and keys before rows carry them.

The DDL type mapping and the skipped row are checked without Spark; the Delta tables in one
module-scoped history of runs (Db2 seed 004's CREATE with schema-less rows; an Oracle table with
Connect-schema rows, ALTERs between runs, a DDL-only run) and the MySQL sample."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from lakecdc.decode.avro.registry import Registry
from lakecdc.decode.debezium.avro_reader import Reader
from lakecdc.decode.debezium.ddl import DdlColumn, ddl_type, merge_declared
from lakecdc.decode.debezium.envelope import decode_value, parse_json
from lakecdc.decode.debezium.settings import Settings
from lakecdc.decode.files.splits import Split

try:
    from tests.debezium_avro_render import length_prefixed, wire
    from tests.helpers import rows
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from debezium_avro_render import length_prefixed, wire  # type: ignore[no-redef]
    from helpers import rows  # type: ignore[no-redef]

SAMPLES = Path(__file__).parents[2] / "fixtures" / "samples" / "debezium-json"  # vendored (MANIFEST.tsv)
FORMAT = "debezium-json"


# -- the mapping -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("type_name", "length", "scale", "connector", "expected"), [
    ("NUMBER", 9, 0, "oracle", "int"),              # Debezium: int32 for up to 9 digits
    ("NUMBER", 18, 0, "oracle", "bigint"),
    ("NUMBER", 20, 0, "oracle", "decimal(20,0)"),
    ("NUMBER", 10, 2, "oracle", "decimal(10,2)"),
    ("NUMBER(5,-2)", None, None, "oracle", "int"),  # 7 integer digits
    ("NUMBER", None, None, "oracle", "string"),     # no precision: any scale, kept exact as text
    ("NUMBER", 0, -127, "oracle", "string"),
    ("FLOAT", 126, None, "oracle", "string"),
    ("BINARY_DOUBLE", None, None, "oracle", "double"),
    ("VARCHAR2", 255, None, "oracle", "string"),
    ("DATE", 7, None, "oracle", "timestamp"),       # Oracle DATE has a time of day
    ("TIMESTAMP(6)", 11, 6, "oracle", "timestamp"),
    ("TIMESTAMP(9) WITH TIME ZONE", None, None, "oracle", "string"),  # nanoseconds: as NanoTimestamp
    ("int identity", 10, 0, "db2", "int"),          # seed 004
    ("varchar", 255, None, "db2", "string"),
    ("DECIMAL", 12, 3, "db2", "decimal(12,3)"),
    ("DATE", 10, None, "db2", "date"),
    ("TIME", 8, None, "db2", "string"),
    ("CHAR(16) FOR BIT DATA", 16, None, "db2", "string"),
    ("DECFLOAT", 34, None, "db2", "string"),
    ("TINYINT", 1, None, "mysql", "smallint"),
    ("GEOMETRY", None, None, "mysql", "string"),    # unknown: string
])
def test_ddl_types(type_name: str, length: int | None, scale: int | None, connector: str, expected: str) -> None:
    assert ddl_type(DdlColumn("C", type_name, None, length, scale, 1), connector).simpleString() == expected


def test_unknown_type_names_fall_back_on_the_jdbc_type() -> None:
    assert ddl_type(DdlColumn("C", "MYTYPE", -5, None, None, 1), "db2").simpleString() == "bigint"
    assert ddl_type(DdlColumn("C", "MYNUM", 3, 8, 2, 1), "db2").simpleString() == "decimal(8,2)"


def col(name: str, type_name: str, position: int, length: int | None = None, scale: int | None = None) -> dict[str, Any]:
    return {"name": name, "jdbcType": 0, "typeName": type_name, "length": length, "scale": scale,
            "position": position, "optional": position > 1}


def change(kind: str, scn: int, columns: list[dict[str, Any]], *, table: str = "ORDERS") -> dict[str, Any]:
    """An Oracle schema-change record (``payload`` only)."""
    return {"source": {"version": "2.5.0.Final", "connector": "oracle", "name": "server1", "ts_ms": 1_700_000_000_000 + scn,
                       "snapshot": "false", "db": "ORCLPDB1", "schema": "DEBEZIUM", "table": table,
                       "scn": str(scn), "commit_scn": str(scn)},
            "ts_ms": 1_700_000_000_000 + scn, "databaseName": "ORCLPDB1", "schemaName": "DEBEZIUM",
            "ddl": f"{kind} TABLE {table} ...",
            "tableChanges": [{"type": kind, "id": f'"ORCLPDB1"."DEBEZIUM"."{table}"',
                              "table": {"primaryKeyColumnNames": ["ID"], "columns": columns}}]}


def test_the_skipped_row_names_table_keys_and_columns_by_position() -> None:
    payload = change("CREATE", 10, [col("NAME", "VARCHAR2", 2, 40), col("ID", "NUMBER", 1, 9, 0)])
    row = decode_value(payload, None, key=None, kafka=[], topic=None, settings=Settings(), parse=parse_json)
    assert (row.op, row.table, row.keys, row.after) == (None, "DEBEZIUM.ORDERS", ["ID"], [("ID", None), ("NAME", None)])
    assert dict(row.source or [])["skipped"] == "schema change"
    dropped = decode_value({**payload, "tableChanges": [{"type": "DROP", "id": '"ORCLPDB1"."DEBEZIUM"."ORDERS"'}]},
                           None, key=None, kafka=[], topic=None, settings=Settings(), parse=parse_json)
    assert (dropped.table, dropped.after, dropped.keys) == ("DEBEZIUM.ORDERS", None, None)


def test_merge_prefers_connect_types_then_the_latest_ddl_and_skips_encoded_types_without_schema() -> None:
    def ddl(order: str, dtype: str) -> str:
        return json.dumps({"ddl": order, "type": json.dumps(dtype)})

    found = [{"table": "T", "column": "A", "type": json.dumps("long")},
             {"table": "T", "column": "A", "type": ddl("2", "integer")},
             {"table": "T", "column": "B", "type": ddl("2", "integer")},
             {"table": "T", "column": "B", "type": ddl("1", "short")},
             {"table": "T", "column": "D", "type": ddl("1", "date")}]
    assert {c: t.simpleString() for c, t in merge_declared(found)["T"].items()} == {"A": "bigint", "B": "int", "D": "date"}
    schemaless = merge_declared([*found, {"table": "", "column": "", "type": "schemaless"}])
    assert "D" not in schemaless["T"]  # epoch days without a schema: typed from the values instead


# -- Avro: schema-change records in the wire format ----------------------------------------------------

COLUMN = {"type": "record", "name": "Column", "namespace": "io.debezium.connector.schema", "fields": [
    {"name": "name", "type": "string"}, {"name": "jdbcType", "type": "int"}, {"name": "typeName", "type": "string"},
    {"name": "length", "type": ["null", "int"], "default": None}, {"name": "scale", "type": ["null", "int"], "default": None},
    {"name": "position", "type": "int"}, {"name": "optional", "type": "boolean"}]}
SCHEMA_CHANGE = {
    "type": "record", "name": "SchemaChangeValue", "namespace": "io.debezium.connector.oracle",
    "connect.name": "io.debezium.connector.oracle.SchemaChangeValue",
    "fields": [
        {"name": "source", "type": {"type": "record", "name": "Source", "fields": [
            {"name": "connector", "type": "string"}, {"name": "name", "type": "string"}, {"name": "ts_ms", "type": "long"},
            {"name": "scn", "type": "string"}, {"name": "commit_scn", "type": "string"}]}},
        {"name": "ts_ms", "type": "long"}, {"name": "databaseName", "type": "string"},
        {"name": "ddl", "type": ["null", "string"], "default": None},
        {"name": "tableChanges", "type": {"type": "array", "items": {
            "type": "record", "name": "Change", "namespace": "io.debezium.connector.schema", "fields": [
                {"name": "type", "type": "string"}, {"name": "id", "type": "string"},
                {"name": "table", "type": {"type": "record", "name": "Table", "fields": [
                    {"name": "primaryKeyColumnNames", "type": {"type": "array", "items": "string"}},
                    {"name": "columns", "type": {"type": "array", "items": COLUMN}}]}}]}}},
    ],
}


def test_avro_schema_change_records_declare_their_columns(tmp_path: Path) -> None:
    parsed = fastavro.parse_schema(SCHEMA_CHANGE)

    def record(scn: int, columns: list[dict[str, Any]]) -> bytes:
        value = change("ALTER", scn, columns)
        value["source"] = {k: value["source"][k] for k in ("connector", "name", "ts_ms", "scn", "commit_scn")}
        value.pop("schemaName")
        for c in value["tableChanges"][0]["table"]["columns"]:
            c.pop("optional")
            c["optional"] = c["position"] > 1
        return wire(5, parsed, value)

    path = tmp_path / "schema-changes.bin"
    path.write_bytes(length_prefixed([
        record(20, [col("ID", "NUMBER", 1, 9, 0), col("QTY", "NUMBER", 2, 9, 0)]),
        record(15, [col("ID", "NUMBER", 1, 9, 0), col("QTY", "NUMBER", 2, 4, 0)]),  # older, read later
    ]))
    reader = Reader(Settings(), Registry(str(tmp_path), {5: SCHEMA_CHANGE}))
    split = Split(str(path), "messages", 0, path.stat().st_size, 0)
    types = merge_declared({"table": t, "column": c, "type": x} for t, c, x in reader.types(split))
    assert {c: t.simpleString() for c, t in types["DEBEZIUM.ORDERS"].items()} == {"ID": "int", "QTY": "int"}
    skipped = [o.value for o in reader.rows(split)]
    assert [(r.table, r.keys, [c for c, _ in r.after or []]) for r in skipped] == [
        ("DEBEZIUM.ORDERS", ["ID"], ["ID", "QTY"])] * 2


# -- Delta tables --------------------------------------------------------------------------------------


def delta_types(path: str) -> dict[str, str]:
    schema = pa.table(DeltaTable(path).to_pyarrow_table()).schema
    return {f.name: str(f.type) for f in schema if not f.name.startswith("_cdc_")}


DB2_CREATE = {  # seed 004's schema-change message (its payload), with a DECIMAL column added
    "source": {"version": "2.3.4.Final", "connector": "db2", "name": "db2", "ts_ms": 0, "snapshot": "true",
               "db": "testdb", "schema": "DB2INST1", "table": "CUSTOMERS", "change_lsn": None,
               "commit_lsn": "00000025:00000d98:00a2", "event_serial_no": None},
    "ts_ms": 1588252618953, "databaseName": "TESTDB", "schemaName": "DB2INST1", "ddl": None,
    "tableChanges": [{"type": "CREATE", "id": '"DB2INST1"."CUSTOMERS"', "table": {
        "defaultCharsetName": None, "primaryKeyColumnNames": ["ID"],
        "columns": [
            {"name": "ID", "jdbcType": 4, "nativeType": None, "typeName": "int identity", "typeExpression": "int identity",
             "charsetName": None, "length": 10, "scale": 0, "position": 1, "optional": False,
             "autoIncremented": False, "generated": False},
            *[{"name": n, "jdbcType": 12, "nativeType": None, "typeName": "varchar", "typeExpression": "varchar",
               "charsetName": None, "length": 255, "scale": None, "position": p, "optional": False,
               "autoIncremented": False, "generated": False}
              for n, p in (("FIRST_NAME", 2), ("LAST_NAME", 3), ("EMAIL", 4))],
            {"name": "BALANCE", "jdbcType": 3, "typeName": "DECIMAL", "length": 10, "scale": 2, "position": 5,
             "optional": True},
            {"name": "JOINED", "jdbcType": 91, "typeName": "DATE", "length": 10, "position": 6, "optional": True},
        ],
        "attributes": [{"customAttribute": "attributeValue"}]}}],
}


def db2_row(i: int, lsn: int) -> dict[str, Any]:
    """A schema-less Db2 insert (no key line: the keys come from the schema change)."""
    after = {"ID": i, "FIRST_NAME": "Sally", "LAST_NAME": "Thomas", "EMAIL": f"s{i}@example.com",
             "BALANCE": "AJY=", "JOINED": 18000}  # Decimal bytes (base64) and epoch days, as Debezium writes them
    source = {"version": "2.3.4.Final", "connector": "db2", "name": "db2", "ts_ms": 1588252620000, "snapshot": "false",
              "db": "testdb", "schema": "DB2INST1", "table": "CUSTOMERS",
              "change_lsn": f"00000025:00000d98:{lsn:04x}", "commit_lsn": f"00000025:00000d98:{lsn:04x}",
              "event_serial_no": 1}
    return {"before": None, "after": after, "source": source, "op": "c", "ts_ms": 1588252620100}


def connect_row(scn: int, op: str, after: dict[str, Any]) -> dict[str, Any]:
    """An Oracle event with its Connect schema (schemas.enable=true) typing ID (int64) and NAME."""
    fields = [{"type": "int64", "optional": False, "field": "ID"}, {"type": "string", "optional": True, "field": "NAME"}]
    schema = {"type": "struct", "name": "server1.DEBEZIUM.ORDERS.Envelope", "fields": [
        {"type": "struct", "optional": True, "field": "before", "fields": fields},
        {"type": "struct", "optional": True, "field": "after", "fields": fields},
        {"type": "struct", "optional": False, "field": "source", "fields": []},
        {"type": "string", "optional": False, "field": "op"}]}
    payload = change("CREATE", scn, [])
    return {"schema": schema, "payload": {"before": None, "after": after, "source": payload["source"], "op": op,
                                          "ts_ms": payload["ts_ms"]}}


def lines(*docs: dict[str, Any]) -> str:
    return "".join(json.dumps(d) + "\n" for d in docs)


@pytest.fixture(scope="module")
def history(spark, tmp_path_factory) -> dict[str, Any]:
    """Three runs into one target (see the tests below); the summaries and the tables after each."""
    root = tmp_path_factory.mktemp("schema-changes")
    landing, target = root / "landing", root / "lake"
    landing.mkdir()
    out: dict[str, Any] = {}

    def run(name: str, text: str) -> None:
        (landing / f"{name}.json").write_text(text)
        s = lakecdc.apply(landing, target, format=FORMAT, spark=spark)
        out[name] = s
        out[f"{name}.types"] = delta_types(s.table("DEBEZIUM.ORDERS").target) if s.table("DEBEZIUM.ORDERS") else {}

    create = change("CREATE", 10, [col("ID", "NUMBER", 1, 9, 0), col("NAME", "VARCHAR2", 2, 40),
                                   col("EMAIL", "VARCHAR2", 3, 80), col("AMOUNT", "NUMBER", 4, 10, 2),
                                   col("CREATED", "DATE", 5), col("RATE", "NUMBER", 6)])
    run("1", lines(create, connect_row(11, "c", {"ID": 1, "NAME": "one"})))
    kept = [col("ID", "NUMBER", 1, 9, 0), col("NAME", "VARCHAR2", 2, 40)]  # EMAIL dropped by these ALTERs
    run("2", lines(connect_row(12, "c", {"ID": 2, "NAME": "two"}),
                   change("ALTER", 20, [*kept, col("QTY", "NUMBER", 3, 9, 0)]),
                   change("ALTER", 15, [*kept, col("QTY", "NUMBER", 3, 4, 0)])))  # older: its QTY type loses
    # (schema-less rows of another table: the run's messages are not all typed by a schema)
    run("3", lines(change("ALTER", 30, [*kept, col("QTY", "NUMBER", 3, 9, 0), col("COMMENTS", "VARCHAR2", 4, 200)]),
                   DB2_CREATE, db2_row(1001, 1), db2_row(1002, 2)))
    return out


@pytest.mark.spark
def test_a_create_then_schemaless_rows_gives_the_ddl_columns_types_and_keys(history) -> None:
    t = history["3"].table("DB2INST1.CUSTOMERS")
    assert history["3"].ok and (t.inserted, t.skipped, t.quarantined) == (2, 1, 0)
    # ID is int as the DDL says (a schema-less integer alone would be inferred bigint); the
    # Decimal bytes and epoch days of schema-less rows cannot fit decimal/date: typed from the values
    assert delta_types(t.target) == {"ID": "int32", "FIRST_NAME": "string", "LAST_NAME": "string", "EMAIL": "string",
                                     "BALANCE": "string", "JOINED": "int64"}
    assert [r["ID"] for r in rows(t.target, "ID")] == [1001, 1002]


@pytest.mark.spark
def test_connect_types_win_and_the_ddl_types_the_columns_no_row_carries(history) -> None:
    t = history["1"].table("DEBEZIUM.ORDERS")
    assert (t.inserted, t.skipped, t.quarantined) == (1, 1, 0)
    assert history["1.types"] == {"ID": "int64", "NAME": "string", "EMAIL": "string", "AMOUNT": "decimal128(10, 2)",
                                  "CREATED": "timestamp[us, tz=UTC]", "RATE": "string"}
    first = rows(t.target, "ID")[0]  # (as the later runs left it)
    assert {c: first[c] for c in history["1.types"]} == {"ID": 1, "NAME": "one", "EMAIL": None, "AMOUNT": None,
                                                         "CREATED": None, "RATE": None}


@pytest.mark.spark
def test_alter_add_column_between_runs_adds_it_typed_by_the_latest_ddl_and_keeps_dropped_ones(history) -> None:
    t = history["2"].table("DEBEZIUM.ORDERS")
    assert history["2"].ok and (t.inserted, t.skipped) == (1, 2)
    types = history["2.types"]
    assert types["QTY"] == "int32"  # NUMBER(9) at SCN 20 over NUMBER(4) at SCN 15, whatever the file order
    assert "EMAIL" in types and list(types)[:6] == ["ID", "NAME", "EMAIL", "AMOUNT", "CREATED", "RATE"]


@pytest.mark.spark
def test_a_ddl_alone_evolves_the_table(history) -> None:
    s = history["3"]
    t = s.table("DEBEZIUM.ORDERS")
    assert s.ok and (t.events, t.inserted, t.skipped) == (0, 0, 1)
    assert history["3.types"]["COMMENTS"] == "string"
    assert [r["ID"] for r in rows(t.target, "ID")] == [1, 2]


@pytest.mark.spark
def test_the_sample_alter_alone_creates_its_table_unless_excluded(spark, tmp_path) -> None:
    src = SAMPLES / "paimon-debezium-mysql-schema-change-event.json"
    if not src.exists():
        pytest.skip(f"shared sample {src} not present")
    path = tmp_path / "landing" / src.name
    path.parent.mkdir()
    shutil.copyfile(src, path)
    skipped = lakecdc.apply(path, tmp_path / "other", format=FORMAT, exclude_tables=["tinyint1_not_bool_test.*"],
                            spark=spark)
    assert skipped.ok and not (tmp_path / "other" / "tinyint1_not_bool_test.t1").exists()
    s = lakecdc.apply(path, tmp_path / "lake", format=FORMAT, spark=spark)
    t = s.table("tinyint1_not_bool_test.t1")
    assert s.ok and (t.events, t.skipped) == (0, 1)
    assert delta_types(t.target) == {"pk": "int32", "_tinyint1": "int16", "_new_tinyint1": "int16"}
