"""The Debezium JSON decoder: the public samples, seeds 001/004, layouts, ordering, types, bad
records, and a round trip of random histories against the oracle."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.decode import DECODERS, get_decoder
from lakecdc.decode.debezium.rules import op_ts_micros, sortable
from lakecdc.decode.files.reread import locate
from lakecdc.decode.kafka.connect_values import decimal_text, zoned_to_utc
from lakecdc.errors import ConfigError
from lakecdc.lake.state import quarantine_path
from tests.decode.helpers import decode as decode_events

try:
    from tests.debezium_render import (
        MARKER_SCHEMA,
        Renderer,
        Style,
        WholeTransactions,
        as_debezium,
        decoded_table,
    )
    from tests.helpers import rows
    from tests.oracle import Event, Oracle, declaring
    from tests.test_property import Scenario, TableSpec, assert_counts, assert_targets_match, scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from debezium_render import (  # type: ignore[no-redef]
        MARKER_SCHEMA,
        Renderer,
        Style,
        WholeTransactions,
        as_debezium,
        decoded_table,
    )
    from helpers import rows  # type: ignore[no-redef]
    from oracle import Event, Oracle, declaring  # type: ignore[no-redef]
    from test_property import (  # type: ignore[no-redef]
        Scenario,
        TableSpec,
        assert_counts,
        assert_targets_match,
        scenarios,
    )

FIX = Path(__file__).parents[2] / "fixtures" / "debezium-json"
SHARED_SAMPLES = Path(os.environ.get("LAKECDC_SAMPLES", Path(__file__).parents[2] / "fixtures" / "samples"))
SAMPLES = "debezium-json"
FORMAT = "debezium-json"


# -- helpers ---------------------------------------------------------------------------------------


def decode(spark, *paths: Path, **options: str) -> list[Any]:
    """Every output row (skipped ones too), in file order."""
    return decode_events(spark, FORMAT, list(paths), **options)


def events(found: list[Any]) -> list[Any]:
    return [r for r in found if r["op"] is not None or r["_error"] is not None]


def skips(found: list[Any]) -> list[str]:
    return [r["source"]["skipped"] for r in found if r["op"] is None and r["_error"] is None]


def write(path: Path, *records: Any) -> Path:
    """JSON lines (a str is written as it is)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def mysql(op: str, *, pos: int, before: dict | None = None, after: dict | None = None, table: str = "T",
          file: str = "mysql-bin.000001", ts: int = 1_700_000_000_000, **extra: Any) -> dict[str, Any]:
    """A schemaless MySQL envelope."""
    source = {"version": "2.7.0.Final", "connector": "mysql", "name": "srv", "ts_ms": ts, "snapshot": "false",
              "db": "shop", "table": table, "server_id": 1, "file": file, "pos": pos, "row": 0}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": ts + 7, **extra}


def oracle_env(op: str, *, scn: int, commit: int | None = None, before: dict | None = None,
               after: dict | None = None, snapshot: str = "false", table: str = "ORDERS") -> dict[str, Any]:
    source = {"version": "2.3.4.Final", "connector": "oracle", "name": "server1", "ts_ms": 1_700_000_000_000,
              "snapshot": snapshot, "db": "ORCLPDB1", "schema": "APP", "table": table, "txId": "06.1.1",
              "scn": str(scn), "commit_scn": None if commit is None else str(commit), "ssn": 0, "redo_thread": 1}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_500}


def quarantine(target: Path) -> list[dict[str, Any]]:
    q = pa.table(DeltaTable(quarantine_path(str(target))).to_pyarrow_table()).to_pylist()
    return sorted(q, key=lambda r: (r["file"], r["line"]))


def b64(n: int) -> str:
    return base64.b64encode(n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)).decode()


# -- the public samples ----------------------------------------------------------------------------


@pytest.fixture
def raw_sample(tmp_path):
    """Copy a file of ../shared/samples into tmp_path as it is (licence comment header included)."""

    def copy(relative: str) -> Path:
        src = SHARED_SAMPLES / relative
        if not src.exists():
            pytest.skip(f"shared sample {src} not present")
        dest = tmp_path / "landing" / src.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        return dest

    return copy


@pytest.mark.spark
def test_sample_cud_with_a_partial_before_image(spark, sample, tmp_path):
    """Paimon's MySQL 1.9.7 sample: c (with a new column), d, u with a partial before image, c."""
    path = sample(f"{SAMPLES}/paimon-debezium-mysql-cud-partial-before.txt")
    found = events(decode(spark, path))
    assert [(r["table"], r["op"], r["_error"]) for r in found] == [("test.product", op, None) for op in "IDUI"]
    c105, d101, u105, c107 = found
    assert c105["after"] == {"id": "105", "name": "hammer", "description": "14oz carpenter's hammer",
                             "weight": "0.875", "address": "Shanghai"}
    assert c105["before"] is None and d101["after"] is None
    assert d101["before"] == {"id": "101", "name": "scooter", "description": "Small 2-wheel scooter", "weight": "3.14"}
    assert u105["before"] == {"address": "Shanghai"}  # partial: the other columns are missing, not NULL
    assert u105["after"]["address"] == "Beijing"
    assert c107["after"] == {"id": "107", "name": "rocks", "description": "box of assorted rocks", "weight": "5.3"}
    # file "" and pos 0 name no binlog position: ordered by source.ts_ms
    assert [r["pos"] for r in found] == [None] * 4
    assert str(u105["op_ts"]) == "2020-08-06 03:35:06" and str(c105["op_ts"]) == "2020-08-06 03:34:43"
    assert u105["seq"] > c105["seq"] and u105["source"]["source.connector"] == "mysql"
    assert u105["source"]["ts_ms"] == "1596684906000" and u105["txid"] is None

    s = lakecdc.apply(path, tmp_path / "lake", format=FORMAT, keys={"test.product": ["id"]}, spark=spark)
    t = s.table("test.product")
    assert (t.events, t.skipped, t.quarantined, s.skipped_unrouted) == (4, 0, 0, 0)
    assert rows(t.target, "id") == [
        {"id": 105, "name": "hammer", "description": "14oz carpenter's hammer", "weight": Decimal("0.875"),
         "address": "Beijing"},
        {"id": 107, "name": "rocks", "description": "box of assorted rocks", "weight": Decimal("5.300"),
         "address": None},
    ]


@pytest.mark.spark
def test_sample_with_schema_null_and_with_schema(spark, sample):
    delete = sample(f"{SAMPLES}/paimon-debezium-schema-null-delete.txt")
    insert = sample(f"{SAMPLES}/paimon-debezium-schema-include-insert.txt")
    i, d = events(decode(spark, delete, insert))  # in file-name order
    assert (d["table"], d["op"], d["after"]) == ("test.product", "D", None)
    assert d["before"] == {"id": "101", "name": "scooter", "description": "Small 2-wheel scooter", "weight": "3.14"}
    assert (i["table"], i["op"]) == ("inventory.products", "I")
    # the double keeps the digits it was written with; a snapshot row of a 1.1 connector
    assert i["after"] == {"id": "101", "name": "scooter", "description": "Small 2-wheel scooter",
                          "weight": "3.140000104904175"}
    assert i["source"]["source.snapshot"] == "true" and str(i["op_ts"]) == "1970-01-01 00:00:00"
    # a snapshot row (op c, snapshot true, as 1.x connectors wrote it) sorts before streamed changes
    # at its binlog position: that position is where the next event starts
    assert i["pos"] == i["seq"] == "mysql-bin.00000000000000000003|00000000000000000154|0|00000000000000000000"
    types = get_decoder(FORMAT).column_types(spark, [str(insert)], staging=str(insert.parent / "_s"))
    assert types == {"inventory.products": {"id": lakecdc_type("integer"), "name": lakecdc_type("string"),
                                            "description": lakecdc_type("string"), "weight": lakecdc_type("double")}}


def lakecdc_type(name: str):
    from pyspark.sql import types as T

    return T._parse_datatype_json_string(json.dumps(name))  # noqa: SLF001


@pytest.mark.spark
def test_sample_all_types_key_value_lines(spark, raw_sample, tmp_path):
    """Alternating KEY and VALUE lines of a MySQL all-types table: keys from the key lines, logical
    types decoded to exact text, the Delta columns typed from the Connect schema. The file keeps
    its licence header: 17 comment lines, skipped."""
    path = raw_sample(f"{SAMPLES}/paimon-debezium-mysql-alltypes-key-value.txt")
    found = decode(spark, path)
    assert skips(found) == ["comment"] * 17 + ["key", "key"]
    one, two = events(found)
    assert one["keys"] == two["keys"] == ["_id"] and one["table"] == "workdb.all_types_table"
    a = one["after"]
    assert {k: a[k] for k in ("_id", "_tinyint1", "_boolean", "_bigint_unsigned", "_float", "_real",
                              "_double_precision", "_numeric", "_fixed", "_decimal", "_year", "_set")} == {
        "_id": "1", "_tinyint1": "1", "_boolean": "true", "_bigint_unsigned": "20000000000", "_float": "1.5",
        "_real": "1.000001", "_double_precision": "1.000111", "_numeric": "12345.110",
        "_fixed": "123456789876543212345678987654321.110", "_decimal": "11111", "_year": "2023", "_set": "a,b"}
    assert {k: a[k] for k in ("_date", "_datetime", "_datetime3", "_datetime6", "_datetime_p2", "_timestamp",
                              "_timestamp0", "_time")} == {
        "_date": "2023-03-23",                        # io.debezium.time.Date, 19439 days
        "_datetime": "2023-03-23T14:30:05.000Z",      # Timestamp, 1679581805000 ms
        "_datetime3": "2023-03-23T14:30:05.123Z",
        "_datetime6": "2023-03-23T14:30:05.123456Z",  # MicroTimestamp
        "_datetime_p2": "2023-03-24T14:30:05.120Z",
        "_timestamp": "2023-03-23T07:00:10.123456Z",  # ZonedTimestamp, already UTC
        "_timestamp0": "2023-03-22T16:10:00Z",
        "_time": "10:13:23.000000",                   # MicroTime, 36803000000 us
    }
    assert a["_point"] == "AQEAAAAAAAAAAADwPwAAAAAAAPA/" and a["_bin"] == "Ynl0ZXMAAAAAAA=="  # WKB / bytes, base64
    assert a["_json"] == '{"a": "b"}'
    assert two["after"]["_tinyint1"] is None and two["after"]["_serial"] == "50000000000"
    assert one["pos"] == "mysql-bin.00000000000000000074|00000000000000013593|1|00000000000000000000"

    s = lakecdc.apply(path, tmp_path / "lake", format=FORMAT, spark=spark)  # keys from the key lines
    t = s.table("workdb.all_types_table")
    assert (t.events, t.skipped) == (2, 2) and s.skipped_unrouted == 17
    schema = {f.name: f.type.type for f in DeltaTable(t.target).schema().fields}
    assert (schema["_id"], schema["_tinyint"], schema["_bigint"], schema["_float"], schema["_double"]) == (
        "integer", "short", "long", "float", "double")
    assert (schema["_date"], schema["_datetime6"], schema["_timestamp"], schema["_time"], schema["_fixed"]) == (
        "date", "timestamp", "timestamp", "string", "string")
    got = {r["_id"]: r for r in rows(t.target)}
    utc = dt.timezone.utc
    assert got[1]["_datetime6"] == dt.datetime(2023, 3, 23, 14, 30, 5, 123456, tzinfo=utc)
    assert got[1]["_timestamp"] == dt.datetime(2023, 3, 23, 7, 0, 10, 123456, tzinfo=utc)
    assert got[1]["_date"] == dt.date(2023, 3, 23) and got[1]["_boolean"] is True
    assert got[1]["_fixed"] == "123456789876543212345678987654321.110" and got[2]["_serial"] == 50000000000


@pytest.mark.spark
def test_sample_mongodb_key_value_deletes(spark, raw_sample):
    """MongoDB 2.7: deletes without a before image take the document's _id from the key line."""
    path = raw_sample(f"{SAMPLES}/paimon-debezium-mongodb-delete-key-value.txt")
    found = decode(spark, path)
    assert skips(found) == ["comment"] * 17 + ["key"] * 3
    d1, d2, d3 = events(found)
    assert {r["table"] for r in (d1, d2, d3)} == {"bigdata_test.sync_test_table"}
    assert [r["op"] for r in (d1, d2, d3)] == ["D"] * 3 and all(r["keys"] == ["_id"] for r in (d1, d2, d3))
    assert d1["before"] == {"_id": '{"$oid":"67ab25755c0d5ac87eb8c632"}'}   # an ObjectId key
    assert d2["before"] == {"_id": "67ab25755c0d5ac87eb8c632"}              # a string key
    assert d3["before"] == {"_id": '{"$oid":"67ab25755c0d5ac87eb8c632"}', "created_at": "1736207571013",
                            "created_by": "peter", "tags": '["pending"]', "updated_at": '{"$date":1739455297970}'}
    assert str(d1["op_ts"]) == "2025-02-12 00:59:52" and d1["pos"] == "00000000000000000028"  # ts then ord
    assert d1["source"]["source.ts_ns"] == "1739321992000000000"


@pytest.mark.spark
def test_sample_pretty_printed_schema_change_is_skipped(spark, raw_sample, tmp_path):
    """A pretty-printed document after a licence header: staged as one line, mapped back to line 19."""
    path = raw_sample(f"{SAMPLES}/paimon-debezium-mysql-schema-change-event.json")
    found = decode(spark, path)
    # its tableChanges (inside historyRecord) name the table and its key
    assert skips(found) == ["schema change"] and found[0]["table"] == "tinyint1_not_bool_test.t1"
    assert found[0]["keys"] == ["pk"] and "ALTER TABLE t1" in found[0]["source"]["ddl"]
    assert locate(found[0]["_file"], 0, {0})[0][0] == 19
    s = lakecdc.apply(path, tmp_path / "lake", format=FORMAT, spark=spark)
    assert s.table("tinyint1_not_bool_test.t1").skipped == 1 and s.skipped_unrouted == 0 and s.ok
    # no rows yet, but the DDL names the key and the columns: the table is created (issue 4 item 8)
    assert DeltaTable(str(tmp_path / "lake" / "tinyint1_not_bool_test.t1")).to_pyarrow_table().num_rows == 0


# -- the seeds ---------------------------------------------------------------------------------------

ORACLE_AFTER = {"ID": "1004", "FIRST_NAME": "Anne", "LAST_NAME": "Kretchmar", "EMAIL": "annek@noanswer.org"}


def oracle_pos(commit: int, scn: int, thread: int = 1, ssn: int = 1) -> str:
    return "|".join(f"{n:020d}" for n in (commit, scn, thread, ssn))


@pytest.mark.spark
def test_seed_001_oracle_examples_decode_as_the_seed_says(spark):
    found = decode(spark, FIX / "seed-001-oracle.json")
    assert skips(found) == ["comment"] * 6 + ["key"]
    c, u, d, t = events(found)
    assert [(r["table"], r["op"], r["_error"]) for r in (c, u, d, t)] == [
        ("DEBEZIUM.CUSTOMERS", "I", None), ("DEBEZIUM.CUSTOMERS", "U", None), ("DEBEZIUM.CUSTOMERS", "D", None),
        ("DEBEZIUM.TEST_TABLE", "T", None)]
    # the create follows the key line: its key column; the others carry none
    assert (c["keys"], u["keys"], t["keys"]) == (["ID"], None, None)
    assert (c["before"], c["after"]) == (None, ORACLE_AFTER)
    assert u["before"] == ORACLE_AFTER and u["after"] == {**ORACLE_AFTER, "EMAIL": "anne@example.com"}
    assert (d["before"], d["after"]) == ({**ORACLE_AFTER, "EMAIL": "anne@example.com"}, None)
    assert (t["before"], t["after"]) == (None, None)
    assert [r["txid"] for r in (c, u, d, t)] == ["6.28.807", "6.9.809", "6.28.807", "02000a0037030000"]
    assert [str(r["op_ts"]) for r in (c, u, d, t)] == [
        "2018-03-03 13:52:34", "2018-03-03 14:03:31", "2018-03-03 13:52:33", "2021-12-08 14:42:15"]
    # ordered by commit SCN, then SCN, redo thread, ssn
    assert [r["pos"] for r in (c, u, d, t)] == [
        oracle_pos(2122185, 2122185), oracle_pos(2125544, 2125544), oracle_pos(2122184, 2122184),
        oracle_pos(13271102, 13234397)]
    assert all(r["seq"] == r["pos"] for r in (c, u, d, t))
    assert c["source"]["source.rs_id"] == "001234.00012345.0124" and c["source"]["source.snapshot"] == "false"
    assert c["source"]["ts_ms"] == "1532592105975"


@pytest.mark.spark
def test_seed_001_applied_in_scn_order_then_truncated(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    lines = (FIX / "seed-001-oracle.json").read_text().splitlines()
    write(landing / "1.json", *lines[:-1])  # key, create, update, delete: no truncate yet
    s = lakecdc.apply(landing, target, format=FORMAT, spark=spark)
    t = s.table("DEBEZIUM.CUSTOMERS")
    assert (t.events, t.skipped) == (3, 1) and s.skipped_unrouted == 6
    # the seed's delete has the lowest SCN (2122184): it comes first and finds nothing; the create
    # (2122185) and the update (2125544) leave the row with the new e-mail
    assert rows(t.target) == [{"ID": 1004, "FIRST_NAME": "Anne", "LAST_NAME": "Kretchmar", "EMAIL": "anne@example.com"}]
    truncate = json.loads(lines[-1])
    truncate["payload"]["source"].update({"schema": "DEBEZIUM", "table": "CUSTOMERS"})
    write(landing / "2.json", truncate)
    # a truncate has no key; the run carries no other event of the table, so the keys are given
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"DEBEZIUM.CUSTOMERS": ["ID"]}, spark=spark)
    assert s.table("DEBEZIUM.CUSTOMERS").events == 1 and rows(t.target) == []


@pytest.mark.spark
def test_seed_004_db2_examples_decode_as_the_seed_says(spark):
    found = decode(spark, FIX / "seed-004-db2.json")  # pretty-printed: staged one document a line
    assert skips(found) == ["schema change", "schema change", "transaction marker", "transaction marker"]
    read, create = events(found)
    assert (read["table"], read["op"], read["before"], read["after"]) == (
        "DB2INST1.MYTABLE", "R", None, {"pk": "1", "value": "New data"})
    assert read["source"]["source.snapshot"] == "incremental" and read["txid"] is None
    # a snapshot read has no change LSN: it sorts after every change committed at its LSN
    lsn = "0000000000000025:0000000000000d98:00000000000000a2"
    assert read["pos"] == read["seq"] == f"{lsn}|~|~"
    assert (create["op"], create["after"], create["txid"]) == ("I", {"pk": "2", "aa": "1"}, "00000025:00000d08:0025")
    assert create["pos"] == ("0000000000000025:0000000000000d08:0000000000000025|"
                             "0000000000000025:0000000000000d08:0000000000000010|00000000000000000001")
    assert create["source"]["transaction.total_order"] == "1" and create["source"]["ts_ms"] == "1580390884335"
    assert str(create["op_ts"]) == "2020-01-30 13:28:04"
    staged = found[0]["_file"]
    assert {rank: line for rank, (line, _) in locate(staged, 0, {0, 1, 4}).items()} == {0: 7, 1: 30, 4: 109}


@pytest.mark.spark
def test_db2_orders_by_commit_lsn_then_change_lsn_and_streamed_changes_beat_snapshot_reads(spark, tmp_path):
    def db2(op: str, commit: str, change: str | None, serial: int | None, after: dict, snapshot: str = "false"):
        source = {"connector": "db2", "name": "db2", "ts_ms": 1_600_000_000_000, "snapshot": snapshot,
                  "db": "TESTDB", "schema": "S", "table": "T", "change_lsn": change, "commit_lsn": commit,
                  "event_serial_no": serial}
        return {"before": {"ID": after["ID"]} if op == "u" else None, "after": after, "source": source, "op": op}

    landing, target = tmp_path / "landing", tmp_path / "lake"
    write(landing / "1.json",
          db2("u", "00000025:00000e00:0001", "00000025:00000d99:0002", 2, {"ID": 1, "V": "third"}),
          db2("u", "00000025:00000e00:0001", "00000025:00000d99:0001", 1, {"ID": 1, "V": "second"}),
          db2("c", "00000025:00000d98:0003", "00000025:00000d98:0001", 1, {"ID": 1, "V": "first"}))
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"S.T": ["ID"]}, spark=spark)
    assert rows(s.table("S.T").target) == [{"ID": 1, "V": "third"}]
    # an incremental snapshot read taken before the streamed change arrives late: it is older
    write(landing / "2.json", db2("r", "00000025:00000d99:0000", None, None, {"ID": 1, "V": "snap"}, "incremental"),
          db2("r", "00000025:00000d99:0000", None, None, {"ID": 2, "V": "snap"}, "incremental"))
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"S.T": ["ID"]}, spark=spark)
    assert s.table("S.T").duplicate_or_late == 1
    assert rows(s.table("S.T").target, "ID") == [{"ID": 1, "V": "third"}, {"ID": 2, "V": "snap"}]


# -- layouts, skipped records, names ------------------------------------------------------------------


@pytest.mark.spark
def test_kcat_records_give_keys_topic_and_kafka_metadata(spark, tmp_path):
    key = {"schema": {"type": "struct", "name": "srv.shop.T.Key", "fields": [{"type": "int32", "field": "ID"}]},
           "payload": {"ID": 1}}
    value = {"schema": None, "payload": mysql("c", pos=10, after={"ID": 1, "V": "a"})}
    tomb_key = json.dumps({"ID": 2})
    path = write(
        tmp_path / "dump.json",
        {"topic": "srv.shop.T", "partition": 3, "offset": 41, "tstype": "create", "ts": 1_700_000_000_123,
         "broker": 1, "headers": {"trace": "x1"}, "key": json.dumps(key), "payload": json.dumps(value)},
        {"topic": "srv.shop.T", "partition": 3, "offset": 42, "tstype": "create", "ts": 1_700_000_000_124,
         "broker": 1, "key": tomb_key, "payload": None},
        {"topic": "srv.shop.T", "partition": 3, "offset": 43, "ts": 1, "key": None,  # payload as base64
         "payload": base64.b64encode(json.dumps(mysql("u", pos=20, before={"ID": 1}, after={"ID": 1, "V": "b"})).encode()).decode()},
        {"topic": "__debezium-heartbeat.srv", "partition": 0, "offset": 7, "key": '{"serverName":"srv"}',
         "payload": '{"ts_ms":1700000000999}'},
    )
    found = decode(spark, path)
    c, u = events(found)
    assert (c["table"], c["op"], c["keys"], c["after"]) == ("shop.T", "I", ["ID"], {"ID": "1", "V": "a"})
    assert {k: c["source"][k] for k in ("kafka.topic", "kafka.partition", "kafka.offset", "kafka.ts",
                                        "kafka.tstype", "kafka.header.trace")} == {
        "kafka.topic": "srv.shop.T", "kafka.partition": "3", "kafka.offset": "41", "kafka.ts": "1700000000123",
        "kafka.tstype": "create", "kafka.header.trace": "x1"}
    assert (u["op"], u["keys"], u["after"]) == ("U", None, {"ID": "1", "V": "b"})
    tomb, beat = [r for r in found if r["op"] is None]
    assert (tomb["table"], tomb["source"]["skipped"], tomb["source"]["key"]) == ("shop.T", "tombstone", '{"ID":2}')
    assert (beat["table"], beat["source"]["skipped"]) == (None, "heartbeat")


@pytest.mark.spark
def test_non_row_records_are_skipped_and_counted_not_applied_nor_quarantined(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write(landing / "a.json",
          "// a comment line",
          mysql("c", pos=1, after={"ID": 1, "V": "a"}),
          {"ID": 1},                                                     # a key line ...
          mysql("d", pos=2, before={"ID": 1, "V": "a"}),                 # ... of this delete
          {"ID": 1},
          "null",                                                        # its tombstone
          {"ts_ms": 1_700_000_000_000},                                  # heartbeat
          {"status": "BEGIN", "id": "571", "ts_ms": 1, "event_count": None, "data_collections": None},
          {"source": {"connector": "mysql", "db": "shop"}, "ddl": "ALTER TABLE T ADD C INT", "databaseName": "shop"},
          mysql("m", pos=3),                                             # a logical-decoding message
          mysql("c", pos=4, after={"ID": 2, "V": "b"}))
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"shop.T": ["ID"]}, spark=spark)
    t = s.table("shop.T")
    assert (t.events, t.quarantined, t.inserted) == (3, 0, 1)
    assert rows(t.target) == [{"ID": 2, "V": "b"}]
    found = decode(spark, landing / "a.json")
    assert skips(found) == ["comment", "key", "key", "tombstone", "heartbeat", "transaction marker",
                            "schema change", "message"]
    assert t.skipped + s.skipped_unrouted == 8
    assert not Path(s.quarantine).exists()


@pytest.mark.spark
def test_table_names_from_schema_name_topic_prefix_and_source_block(spark, tmp_path):
    envelope = {"type": "struct", "name": "my.server.INV.CUST_1.Envelope", "fields": []}
    no_table = {"before": None, "after": {"ID": 1}, "op": "c",
                "source": {"connector": "oracle", "name": "my.server", "ts_ms": 1, "scn": "5", "commit_scn": "5"}}
    named = {**no_table, "source": {**no_table["source"], "schema": "INV", "table": "CUST-1"}}
    path = write(tmp_path / "a.json", {"schema": envelope, "payload": no_table}, {"schema": envelope, "payload": named})
    sanitised, original = events(decode(spark, path))
    assert sanitised["table"] == "INV.CUST_1"  # source.name is the topic prefix, although it has a dot
    assert original["table"] == "INV.CUST-1"   # the source block's names win over the sanitised ones
    (row,) = events(decode(spark, path, **{"topic.prefix": "my"}))[:1]
    assert row["table"] == "server.INV.CUST_1"
    (row,) = events(decode(spark, path, tableName="db.schema.table"))[1:]
    assert row["table"] == "INV.CUST-1"  # no db in this source block: the parts it has


@pytest.mark.spark
def test_unavailable_values_are_missing_and_never_written(spark, tmp_path):
    """PostgreSQL TOAST columns unchanged by an update arrive as the placeholder: missing."""
    def pg(op: str, lsn: int, after: dict, before: dict | None = None) -> dict:
        source = {"connector": "postgresql", "name": "pg", "ts_ms": 1_700_000_000_000, "db": "d",
                  "schema": "public", "table": "docs", "lsn": lsn, "txId": 9}
        return {"before": before, "after": after, "source": source, "op": op}

    landing, target = tmp_path / "landing", tmp_path / "lake"
    write(landing / "1.json", pg("c", 100, {"id": 1, "body": "long text", "tags": ["a"], "blob": "AQID", "n": 1}))
    write(landing / "2.json", pg("u", 200, {"id": 1, "body": "__debezium_unavailable_value",
                                           "tags": ["__debezium_unavailable_value"],
                                           "blob": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==", "n": 2}))
    (u,) = events(decode(spark, landing / "2.json"))
    assert u["after"] == {"id": "1", "n": "2"} and u["before"] is None
    assert u["pos"] == "00000000000000000200|0" and u["txid"] == "9"
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"public.docs": ["id"]}, spark=spark)
    assert rows(s.table("public.docs").target) == [
        {"id": 1, "body": "long text", "tags": '["a"]', "blob": "AQID", "n": 2}]
    # a configured placeholder replaces the default one
    path = write(tmp_path / "3.json", pg("u", 300, {"id": 1, "body": "<toast>", "n": "__debezium_unavailable_value"}))
    (u,) = events(decode(spark, path, **{"unavailable.value.placeholder": "<toast>"}))
    assert u["after"] == {"id": "1", "n": "__debezium_unavailable_value"}


# -- ordering ------------------------------------------------------------------------------------------


@pytest.mark.spark
def test_oracle_orders_by_commit_scn_and_snapshot_reads_never_override_newer_changes(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write(landing / "1.json",
          # a long transaction's update (scn 90) commits after a short one's (scn 95, commit 96)
          oracle_env("u", scn=90, commit=120, before={"ID": 1}, after={"ID": 1, "V": "long tx"}),
          oracle_env("u", scn=95, commit=96, before={"ID": 1}, after={"ID": 1, "V": "short tx"}),
          oracle_env("c", scn=50, commit=50, after={"ID": 1, "V": "created"}))
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"APP.ORDERS": ["ID"]}, spark=spark)
    assert rows(s.table("APP.ORDERS").target) == [{"ID": 1, "V": "long tx"}]
    # a snapshot taken at SCN 110 arrives afterwards: row 1 changed at commit 120, so its read is old
    write(landing / "2.json",
          oracle_env("r", scn=110, after={"ID": 1, "V": "snapshot"}, snapshot="true"),
          oracle_env("r", scn=110, after={"ID": 2, "V": "snapshot"}, snapshot="last"))
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"APP.ORDERS": ["ID"]}, spark=spark)
    assert rows(s.table("APP.ORDERS").target, "ID") == [{"ID": 1, "V": "long tx"}, {"ID": 2, "V": "snapshot"}]
    assert s.table("APP.ORDERS").duplicate_or_late == 1


@pytest.mark.spark
def test_mysql_binlog_positions_across_files_and_sequence_by_override(spark, tmp_path):
    path = write(tmp_path / "a.json",
                 mysql("u", pos=4, file="mysql-bin.000010", before={"ID": 1}, after={"ID": 1, "V": "new"}),
                 mysql("u", pos=900, file="mysql-bin.000009", before={"ID": 1}, after={"ID": 1, "V": "old"},
                       ts=1_800_000_000_000))
    new, old = events(decode(spark, path))
    assert new["seq"] > old["seq"]  # file 10 after file 9 whatever the timestamps say
    new, old = events(decode(spark, path, sequenceBy="op_ts"))
    assert new["seq"] < old["seq"] and new["pos"].startswith("mysql-bin.00000000000000000010|")
    new, old = events(decode(spark, path, sequenceBy="source.ts_ms, ts_ms"))
    assert new["seq"] == "00000001700000000000|00000001700000000007" and new["pos"] == new["seq"]


def test_options_are_checked():
    assert "debezium-json" in DECODERS
    with pytest.raises(ConfigError, match="unknown option.*sequence_by.*known: .*sequenceBy"):
        get_decoder(FORMAT, {"sequence_by": "op_ts"})
    with pytest.raises(ConfigError, match="op_ts stands alone"):
        get_decoder(FORMAT, {"sequenceBy": "op_ts,source.scn"})
    with pytest.raises(ConfigError, match="empty name"):
        get_decoder(FORMAT, {"sequenceBy": "source.scn,"})
    get_decoder(FORMAT, {"decimal.handling.mode": "string", "schemas.enable": "false"})  # accepted, ignored


def test_connector_positions():
    from lakecdc.decode.debezium.rules import connector_position

    def pad(*parts: object) -> str:
        return "|".join(sortable(p) if p != "~" else "~" for p in parts)

    oracle = {"scn": "5", "commit_scn": "7", "redo_thread": 2, "ssn": 3}
    assert connector_position(oracle, "oracle", "U") == (pad(7, 5, 2, 3), True)
    assert connector_position({**oracle, "snapshot": "true"}, "oracle", "R") == (pad(5, 5, "~", "~"), True)
    # RAC: a commit SCN written per redo thread is read for the event's own thread
    rac = {**oracle, "commit_scn": "9:1:0a00,8:2:0b00"}
    assert connector_position(rac, "oracle", "U")[0] == pad(8, 5, 2, 3)
    # the snapshot-or-stream phase is one character
    assert connector_position({"lsn": 42}, "postgresql", "I") == (f"{sortable(42)}|0", True)
    assert connector_position({"lsn": 42, "snapshot": "last"}, "postgresql", "R") == (f"{sortable(42)}|1", True)
    assert connector_position({"file": "binlog.000002", "pos": 7, "row": 1}, "mysql", "I") == (
        f"binlog.00000000000000000002|{sortable(7)}|1|{sortable(1)}", True)
    assert connector_position({"ord": 3}, "mongodb", "I") == (sortable(3), False)  # seq: op_ts first
    assert connector_position({"file": "", "pos": 0}, "mysql", "I") == (None, False)
    assert connector_position({"ts_ms": 1}, "vitess", "I") == (None, False)


def test_position_parts_sort_as_numbers():
    assert sortable("2122185") == "00000000000002122185" and sortable(None) == ""
    assert sortable("00000025:00000D98:00a2") == "0000000000000025:0000000000000d98:00000000000000a2"
    assert sortable("9") < sortable("10") and sortable("0000000f:0001") < sortable("00000010:0000")


# -- types ---------------------------------------------------------------------------------------------


def test_decimal_and_zoned_texts_are_exact():
    assert decimal_text(-1050, 2) == "-10.50" and decimal_text(5, 3) == "0.005" and decimal_text(7, 0) == "7"
    assert decimal_text(12, -2) == "1200"
    assert zoned_to_utc("2020-01-01T01:30:00.123456789+02:00", "c") == "2019-12-31T23:30:00.123456789Z"
    assert zoned_to_utc("2020-01-01T01:30:00Z", "c") == "2020-01-01T01:30:00Z"


LOGICAL = [  # (field schema, JSON value, canonical text, Delta value)
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2", "connect.decimal.precision": "10"}},
     b64(-1234567), "-12345.67", Decimal("-12345.67")),
    ({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal"}, {"scale": 3, "value": b64(31415)}, "31.415",
     Decimal("31.415")),
    ({"type": "int32", "name": "io.debezium.time.Date"}, -1, "1969-12-31", dt.date(1969, 12, 31)),
    ({"type": "int32", "name": "org.apache.kafka.connect.data.Time"}, 45_296_789, "12:34:56.789", "12:34:56.789"),
    ({"type": "int64", "name": "io.debezium.time.NanoTime"}, 1_000_000_001, "00:00:01.000000001", "00:00:01.000000001"),
    ({"type": "int64", "name": "io.debezium.time.MicroTime"}, -1, "-00:00:00.000001", "-00:00:00.000001"),
    ({"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"}, 1, "1970-01-01T00:00:00.001Z",
     dt.datetime(1970, 1, 1, 0, 0, 0, 1000, tzinfo=dt.timezone.utc)),
    ({"type": "int64", "name": "io.debezium.time.NanoTimestamp"}, 1_600_000_000_123_456_789,
     "2020-09-13T12:26:40.123456789Z", "2020-09-13T12:26:40.123456789Z"),
    ({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}, "2024-02-29T23:59:59.5-05:00",
     "2024-03-01T04:59:59.5Z", dt.datetime(2024, 3, 1, 4, 59, 59, 500000, tzinfo=dt.timezone.utc)),
    ({"type": "string", "name": "io.debezium.data.Json"}, '{"k": [1, 2.50]}', '{"k": [1, 2.50]}', '{"k": [1, 2.50]}'),
    ({"type": "string", "name": "io.debezium.data.Uuid"}, "5f8a-..", "5f8a-..", "5f8a-.."),
    ({"type": "struct", "name": "io.debezium.data.geometry.Geometry"}, {"wkb": "AQEAAAA=", "srid": 4326}, "AQEAAAA=",
     b"\x01\x01\x00\x00\x00"),
    ({"type": "bytes"}, "3q2+7w==", "3q2+7w==", b"\xde\xad\xbe\xef"),
    ({"type": "int8"}, -128, "-128", -128),
    ({"type": "float32"}, 0.1, "0.1", pytest.approx(0.1)),
    ({"type": "float64"}, 1e-7, "1e-07", 1e-07),
    ({"type": "boolean"}, False, "false", False),
    ({"type": "array", "items": {"type": "int32"}}, [1, 2], "[1,2]", "[1,2]"),
]


@pytest.mark.spark
def test_kafka_connect_logical_types_decode_exactly_and_type_the_columns(spark, tmp_path):
    fields = [{"field": "ID", "type": "int32", "optional": False}] + [
        {**f, "field": f"C{i}", "optional": True} for i, (f, *_rest) in enumerate(LOGICAL)]
    row = {"type": "struct", "name": "srv.shop.T.Value", "fields": fields}
    schema = {"type": "struct", "name": "srv.shop.T.Envelope",
              "fields": [{**row, "field": "before"}, {**row, "field": "after"}]}
    after = {"ID": 1, **{f"C{i}": v for i, (_f, v, *_r) in enumerate(LOGICAL)}}
    landing, target = tmp_path / "landing", tmp_path / "lake"
    path = write(landing / "a.json", {"schema": schema, "payload": mysql("c", pos=5, after=after)})
    (r,) = events(decode(spark, path))
    assert r["after"] == {"ID": "1", **{f"C{i}": text for i, (_f, _v, text, _d) in enumerate(LOGICAL)}}
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"shop.T": ["ID"]}, spark=spark)
    types = {f.name: f.type.type for f in DeltaTable(s.table("shop.T").target).schema().fields}
    assert [types[f"C{i}"] for i in range(len(LOGICAL))] == [
        "decimal(10,2)", "decimal(38,3)",  # Decimal: its precision; VariableScaleDecimal: inferred
        "date", "string", "string", "string", "timestamp", "string", "timestamp", "string", "string", "binary",
        "binary", "byte", "float", "double", "boolean", "string"]
    (got,) = rows(s.table("shop.T").target)
    assert got == {"ID": 1, **{f"C{i}": d for i, (_f, _v, _t, d) in enumerate(LOGICAL)}}


# -- bad records -----------------------------------------------------------------------------------------


@pytest.mark.spark
def test_bad_records_are_quarantined_with_file_line_reason_and_the_rest_applies(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    lines = [
        json.dumps(mysql("c", pos=1, after={"ID": 1, "V": "a"})),
        '{"before": null, "after": {"ID": 2}',                                            # line 2
        json.dumps(mysql("x", pos=3, after={"ID": 3})),                                   # line 3
        json.dumps(mysql("c", pos=4, after=None)),                                        # line 4
        json.dumps({"before": None, "after": {"ID": 5}, "op": "c"}),                      # line 5
        json.dumps({"schema": {"type": "struct", "name": "srv.shop.T.Envelope", "fields": [
            {"field": "after", "type": "struct", "fields": [
                {"field": "D", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
                 "parameters": {"scale": "1"}}]}]},
                    "payload": mysql("c", pos=6, after={"ID": 6, "D": "not base64!"})}),      # line 6
        "null",
        json.dumps(mysql("c", pos=8, after={"ID": 8, "V": "h"})),
    ]
    bad = write(landing / "a.json", *lines)
    s = lakecdc.apply(landing, target, format=FORMAT, keys={"shop.T": ["ID"]}, spark=spark)
    # (D: line 6's schema declares it, so it is a column though its one value was quarantined)
    assert rows(s.table("shop.T").target, "ID") == [{"ID": 1, "V": "a", "D": None}, {"ID": 8, "V": "h", "D": None}]
    assert (s.table("shop.T").quarantined, s.quarantined_unrouted, s.skipped_unrouted) == (3, 2, 1)
    q = quarantine(target)
    assert [(r["line"], r["source_table"], r["reason"]) for r in q] == [
        (2, None, "record is not valid JSON: Expecting ',' delimiter at column 36"),
        (3, "shop.T", "unknown op 'x' (expected one of c, u, d, r, t)"),
        (4, "shop.T", "'after' missing for op 'c' (expected an object)"),
        (5, None, "'source' missing for op 'c' (expected an object)"),
        (6, "shop.T", "column 'D' (Decimal): 'not base64!' is not base64"),
    ]
    assert all(r["file"] == str(bad.resolve()) and r["raw"] == lines[r["line"] - 1] and r["format"] == FORMAT
               for r in q)


# -- round trip ------------------------------------------------------------------------------------------

STYLES = {
    "oracle-schema-key-lines": Style("oracle", schema=True, layout="key-value"),
    "mysql-schemaless": Style("mysql", schema=False, layout="values"),
    "db2-kcat-schema": Style("db2", schema=True, layout="kcat"),
}


def _round_trip(spark, workdir: Path, sc, reads: list[bool], style: Style) -> None:
    """Render Debezium's view of ``sc`` run by run; after every run the tables equal the oracle's."""
    evs, index = as_debezium(sc.events, style.connector, reads)
    kinds = {decoded_table(style.connector, spec.name): {**{k: "int" if k == "ID" else "str" for k in spec.keys},
                                                         **spec.columns} for spec in sc.specs}
    originals = {decoded_table(style.connector, spec.name): spec.name for spec in sc.specs}
    renderer = Renderer(evs, kinds, style, originals)
    keys = {decoded_table(style.connector, spec.name): list(spec.keys) for spec in sc.specs}
    oracle, targets, applied = Oracle(), {}, []
    for number, run in enumerate(sc.runs, start=1):
        run_events = [evs[j] for i in run for j in index[i]]
        path = workdir / "landing" / f"run-{number:04d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(renderer.render(run_events), encoding="utf-8")
        applied.append(str(path))
        expected = oracle.apply_run(declaring(run_events, kinds if style.schema else {}), pk_update="delete-insert")
        summary = lakecdc.apply(applied, workdir / "lake", format=FORMAT, keys=keys, pk_update=sc.pk_update,
                                spark=spark)
        actual = {t.source_table: {f: getattr(t, f) for f in ("target", "events", "duplicate_or_late", "quarantined",
                                                               "inserted", "updated", "deleted", "status", "error")}
                  for t in summary.tables}
        targets.update({t: str(a["target"]) for t, a in actual.items()})
        assert summary.quarantined_unrouted == 0
        assert_counts(number, sc, run_events, expected, actual)
        assert_targets_match(oracle, targets, f"run {number} ({style})")


@pytest.mark.spark
@pytest.mark.parametrize("style", list(STYLES), ids=list(STYLES))
@settings(max_examples=5, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=12), reads=st.lists(st.booleans(), min_size=12, max_size=12))
def test_round_trip_of_random_histories_matches_the_oracle(spark, tmp_path_factory, style, sc, reads):
    _round_trip(spark, tmp_path_factory.mktemp("dbz"), sc, reads, STYLES[style])


def _written(op: str, second: int, *, before: dict | None = None, after: dict | None = None) -> Event:
    return Event("QASOURCE.TCUSTORD", op, f"2024-01-01 00:00:{second:02d}.000000", f"{second:020d}", 0, before,
                 after, ("ID",))


#: A key change (delete + tombstone + create), a truncate, a snapshot read replayed after newer
#: changes, partial images, duplicates across runs.
WRITTEN = Scenario(
    specs=[TableSpec("QASOURCE.TCUSTORD", ("ID",), [], {"A": "str", "B": "int"})],
    events=[
        _written("I", 1, after={"ID": 1, "A": "snap", "B": 10}),                       # read in the snapshot
        _written("I", 2, after={"ID": 2, "A": "two", "B": None}),
        _written("U", 3, before={"ID": 1, "A": "snap"}, after={"ID": 3, "B": 30}),      # key 1 -> 3
        _written("U", 4, before={"ID": 3}, after={"ID": 3, "A": "three"}),
        _written("T", 5),
        _written("I", 6, after={"ID": 1, "A": "again", "B": -(2**40)}),
        _written("U", 7, before={"ID": 1}, after={"ID": 1, "B": 7}),                    # A missing: kept
        _written("D", 8, before={"ID": 1, "A": "again"}),
        _written("I", 9, after={"ID": 4, "A": "é\\'\"", "B": 4}),
    ],
    runs=[[1, 0, 2], [3, 4, 0, 5, 6], [8, 7, 2, 6]],
    pk_update="delete-insert",
    primary_keys=True,
    source={},
)


@pytest.mark.spark
@pytest.mark.parametrize("style", ["oracle-schema-key-lines"])
def test_round_trip_of_a_written_history_matches_the_oracle(spark, tmp_path, style):
    _round_trip(spark, tmp_path, WRITTEN, [True], STYLES[style])
    lake = tmp_path / "lake"
    (table,) = [p for p in lake.iterdir() if p.name != "_lakecdc" and not p.name.startswith("_")]
    assert rows(table, "ID") == [{"ID": 4, "A": "é\\'\"", "B": 4}]


def test_complete_transactions_wait_for_the_end_marker_across_files(spark, tmp_path):
    """complete_transactions=True with Debezium's transaction topic: a transaction cut by the
    end of a file is held, then applied whole when its END marker and every event have come."""
    import lakecdc

    def event(key: int, pos: int, tx: str) -> dict:
        return {"before": None, "after": {"id": key, "v": f"v{key}"}, "op": "c", "ts_ms": 1_700_000_000_000 + pos,
                "source": {"connector": "mysql", "db": "inv", "table": "items", "file": "mysql-bin.000001",
                           "pos": pos, "row": 0, "ts_ms": 1_700_000_000_000 + pos},
                "transaction": {"id": tx, "total_order": key, "data_collection_order": key}}

    begin = {"status": "BEGIN", "id": "tx1", "ts_ms": 1_700_000_000_000, "event_count": None, "data_collections": None}
    end = {"status": "END", "id": "tx1", "ts_ms": 1_700_000_000_300, "event_count": 2,
           "data_collections": [{"data_collection": "inv.items", "event_count": 2}]}
    landing, target = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    (landing / "1.json").write_text("\n".join(json.dumps(m) for m in [begin, event(1, 100, "tx1")]) + "\n")
    opts = {"format": "debezium-json", "keys": {"inv.items": ["id"]}, "complete_transactions": True, "spark": spark}
    first = lakecdc.apply(landing, target, **opts)
    assert first.table("inv.items").held == 1 and first.table("inv.items").inserted == 0
    (landing / "2.json").write_text("\n".join(json.dumps(m) for m in [event(2, 200, "tx1"), end]) + "\n")
    second = lakecdc.apply(landing, target, **opts)
    t = second.table("inv.items")
    assert (t.held, t.inserted) == (0, 2)
    assert sorted(r["id"] for r in DeltaTable(t.target).to_pyarrow_table().to_pylist()) == [1, 2]
    # a consumer restart delivers an event of the applied transaction again, without its markers:
    # a duplicate of a complete transaction, not one waiting for its END
    (landing / "3.json").write_text(json.dumps(event(2, 200, "tx1")) + "\n")
    third = lakecdc.apply(landing, target, **opts).table("inv.items")
    assert (third.held, third.events, third.duplicate_or_late, third.inserted) == (0, 1, 1, 0)


def test_a_schema_change_names_the_keys_of_rows_that_carry_none(spark, tmp_path):
    """Issue 4 item 8: the schema-change record's primaryKeyColumnNames key the table's rows
    (schema-less values without key lines carry no key); the record itself is skipped, counted."""
    import lakecdc

    change = {"source": {"connector": "mysql", "db": "inv", "table": "items", "ts_ms": 1_700_000_000_000,
                         "file": "mysql-bin.000001", "pos": 10, "row": 0},
              "databaseName": "inv", "ddl": "CREATE TABLE items (code INT PRIMARY KEY, v TEXT)",
              "tableChanges": [{"type": "CREATE", "id": '"inv"."items"',
                                "table": {"primaryKeyColumnNames": ["code"], "columns": []}}]}
    row = {"before": None, "after": {"code": 7, "v": "a"}, "op": "c", "ts_ms": 1_700_000_000_100,
           "source": {"connector": "mysql", "db": "inv", "table": "items", "ts_ms": 1_700_000_000_100,
                      "file": "mysql-bin.000001", "pos": 20, "row": 0}}
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "1.json").write_text(json.dumps(change) + "\n" + json.dumps(row) + "\n")
    s = lakecdc.apply(landing, tmp_path / "lake", format="debezium-json", spark=spark)
    t = s.table("inv.items")
    assert s.ok and t.inserted == 1 and t.skipped == 1
    assert DeltaTable(t.target).to_pyarrow_table().select(["code", "v"]).to_pylist() == [{"code": 7, "v": "a"}]


# -- whole transactions across runs ------------------------------------------------------------------


def _marker_line(renderer: Renderer, payload: dict) -> str:
    """A record of Debezium's transaction topic, in the renderer's style."""
    value = renderer.wrap(payload, MARKER_SCHEMA)
    if renderer.style.layout != "kcat":
        return json.dumps(value)
    return json.dumps({"topic": f"{renderer.style.server}.transaction", "partition": 0, "offset": 0, "ts": 0,
                       "key": None, "payload": json.dumps(value)})


def _transactions_round_trip(spark, workdir: Path, sc, reads: list[bool], style: Style) -> None:
    """Random runs cut the source's transactions anywhere (and deliver duplicates, out of order):
    with ``complete_transactions`` the tables equal the oracle fed, run by run, what
    :class:`WholeTransactions` says a whole-transaction consumer applies."""
    evs, index = as_debezium(sc.events, style.connector, reads)
    kinds = {decoded_table(style.connector, spec.name): {**{k: "int" if k == "ID" else "str" for k in spec.keys},
                                                         **spec.columns} for spec in sc.specs}
    originals = {decoded_table(style.connector, spec.name): spec.name for spec in sc.specs}
    renderer = Renderer(evs, kinds, style, originals)
    keys = {decoded_table(style.connector, spec.name): list(spec.keys) for spec in sc.specs}
    whole = WholeTransactions(renderer, evs)
    oracle, targets, applied = Oracle(), {}, []
    for number, run in enumerate(sc.runs, start=1):
        items, ready = whole.run([evs[j] for i in run for j in index[i]])
        lines = [renderer.render([x]).rstrip("\n") if kind == "event" else _marker_line(renderer, x) for kind, x in items]
        path = workdir / "landing" / f"run-{number:04d}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        applied.append(str(path))
        oracle.apply_run(declaring(ready, kinds if style.schema else {}), pk_update="delete-insert")
        summary = lakecdc.apply(applied, workdir / "lake", format=FORMAT, keys=keys, pk_update=sc.pk_update,
                                complete_transactions=True, spark=spark)
        assert summary.ok and summary.quarantined_unrouted == 0
        assert sum(t.held for t in summary.tables) == whole.held, f"run {number}: held"
        targets.update({t.source_table: t.target for t in summary.tables})
        assert_targets_match(oracle, targets, f"run {number} ({style}, whole transactions)")


@pytest.mark.spark
@pytest.mark.parametrize("style", ["mysql-schemaless", "db2-kcat-schema"])
@settings(max_examples=4, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=12), reads=st.lists(st.booleans(), min_size=12, max_size=12))
def test_transactions_cut_across_runs_apply_whole_as_the_oracle_says(spark, tmp_path_factory, style, sc, reads):
    _transactions_round_trip(spark, tmp_path_factory.mktemp("dbztx"), sc, reads, STYLES[style])


def test_op_ts_takes_ascii_digits_only():
    """A time written in other digits (Arabic-Indic, superscripts) is no number: the envelope's
    time is taken instead, as SQL does (Python's int() would read '\u0661\u0662' as 12)."""
    assert op_ts_micros({"ts_ms": 5}, {"ts_ms": "\u0661\u0662"}) == 5000
    assert op_ts_micros({}, {"ts_us": "\u00b2"}) is None
    assert op_ts_micros({}, {"ts_ns": "-1500", "ts_ms": 9}) == -2
    assert op_ts_micros({}, {"ts_ms": "12"}) == 12000
