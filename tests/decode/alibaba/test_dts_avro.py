"""Alibaba DTS Avro (``dts-avro``): the published demo's records, every value kind through the real
schema, the framings, skipped records, bad messages, and oracle round trips of rendered histories."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from pyspark.sql import types as T

import lakecdc
from lakecdc.decode import DECODERS, get_decoder
from lakecdc.decode.alibaba.dts import Reader
from lakecdc.decode.alibaba.dts_records import RecordReader, position
from lakecdc.decode.alibaba.dts_values import codec_of, datetime_text, zone_offset
from lakecdc.errors import ConfigError
from lakecdc.lake.state import quarantine_path

try:
    from tests.canal_render import key_changes
    from tests.decode.helpers import decode as decode_as
    from tests.dts_render import (
        SCHEMA,
        DtsHistory,
        binary,
        character,
        date_time,
        decimal,
        encode,
        floating,
        integer,
        kcat,
        length_prefixed,
        ocf,
        pk_tag,
        record,
        run_dts_scenario,
        text_object,
        timestamp,
        wkb,
        wkt,
        zoned,
    )
    from tests.helpers import rows
    from tests.test_property import scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from canal_render import key_changes  # type: ignore[no-redef]
    from decode.helpers import decode as decode_as  # type: ignore[no-redef]
    from dts_render import (  # type: ignore[no-redef]
        SCHEMA,
        DtsHistory,
        binary,
        character,
        date_time,
        decimal,
        encode,
        floating,
        integer,
        kcat,
        length_prefixed,
        ocf,
        pk_tag,
        record,
        run_dts_scenario,
        text_object,
        timestamp,
        wkb,
        wkt,
        zoned,
    )
    from helpers import rows  # type: ignore[no-redef]
    from test_property import scenarios  # type: ignore[no-redef]

FORMAT = "dts-avro"

# -- the records a public Python DTS consumer demo printed (MySQL 8.0.28, table mydb.t1) ------------------
# The seed (002) gives no DTS Avro example; it points to Alibaba's subscribe example. These are the
# records a published demo decoded with the same schema and printed (insert, update, delete, DDL).

FIELDS = [("a", 8), ("b", 253)]
TAGS = {"metaVersion": "3109599372", "pk_uk_info": '{"PRIMARY":["a"]}', "server_id": "26957161", "thread_id": "163931"}
DEMO = [
    record("DDL", "mydb", after="create table t1(a bigint primary key, b varchar(100))", id=1700104, ts=1696984152,
           position="67008@78", tags={"GTID": "281c62dc-590c-11ee-a295-00163e390c7c:108156", "Q_CHARSET_CODE": "33",
                                      "commitTimestamp": "1696984152", "server_id": "26957161"}),
    record("INSERT", "mydb.t1", FIELDS, after=[integer("123456789"), character(b"test insert statement.")],
           id=1700382, ts=1696984408, position="72469@78", tags={**TAGS, "readerThroughoutTime": "1696984408050"}),
    record("UPDATE", "mydb.t1", FIELDS, before=[integer("123456789"), character(b"test insert statement.")],
           after=[integer("123456789"), character(b"test update statement.")], id=1700504, ts=1696984517,
           position="75259@78", tags={**TAGS, "readerThroughoutTime": "1696984517078"}),
    record("DELETE", "mydb.t1", FIELDS, before=[integer("123456789"), character(b"test update statement.")],
           id=1700553, ts=1696984560, position="76176@78", tags={**TAGS, "readerThroughoutTime": "1696984560421"}),
]


def decode(spark, *paths: Path, **options: str) -> list:
    """Every record of ``paths`` as dts-avro, in arrival order (:func:`tests.decode.helpers.decode`)."""
    return decode_as(spark, FORMAT, list(paths), **options)


def canonical(r) -> tuple:
    """Every canonical field of a decoded row (``source`` without Kafka metadata)."""
    source = {k: v for k, v in (r["source"] or {}).items() if not k.startswith("kafka.")}
    return (r["table"], r["op"], r["op_ts"], r["pos"], r["idx"], r["seq"], r["txid"], r["keys"],
            r["before"], r["after"], source, r["_error"])


def write(path: Path, content: bytes | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return path


def quarantine(target: Path) -> list[dict[str, Any]]:
    q = DeltaTable(quarantine_path(str(target))).to_pyarrow_table().to_pylist()
    return sorted(q, key=lambda r: (r["file"], r["offset"]))


# -- no Spark ------------------------------------------------------------------------------------------------


def test_registered_and_options_are_checked():
    assert DECODERS[FORMAT].name == FORMAT
    assert get_decoder(FORMAT, {"framing": "KCAT"}).options["framing"] == "kcat"
    with pytest.raises(ConfigError, match="framing='lines' is not one of auto, length-prefixed, single, kcat"):
        get_decoder(FORMAT, {"framing": "lines"})
    with pytest.raises(ConfigError, match="sequenceBy='id' is not one of timestamp, position"):
        get_decoder(FORMAT, {"sequenceBy": "id"})
    with pytest.raises(ConfigError, match="unknown option.*known: dateTimeFraction, framing, keySeparator, maxBlockBytes, maxBlockRecords, "
                       "messageDelimiter, sequenceBy"):
        get_decoder(FORMAT, {"schemaDirectory": "/x"})


def test_positions_sort_in_binlog_order_across_files():
    # offset@file: a new binlog file starts again at small offsets
    raw = [("76176@78", 3), ("4@79", 4), ("120@79", 5), ("120@79", 6), ("999999@78", 2)]
    ordered = sorted(raw, key=lambda p: position(*p))
    assert ordered == [("76176@78", 3), ("999999@78", 2), ("4@79", 4), ("120@79", 5), ("120@79", 6)]
    assert position("75259@78", 1700504) == "0000000078@00000000000000075259/00000000000001700504"
    assert position("123456789", 7) == "00000000000123456789/00000000000000000007"  # an SCN
    assert position("lsn:0/16B3748", 7) == "lsn:0/16B3748/00000000000000000007"


def test_charsets_of_mysql_oracle_and_python_names():
    assert [codec_of(c) for c in ("utf8mb4", "UTF8", "latin1", "gbk", "AL32UTF8", "ZHS16GBK", "UTF-8", "binary")] == [
        "utf-8", "utf-8", "cp1252", "gbk", "utf-8", "gbk", "utf-8", "binary"]
    assert codec_of("latin1", "PostgreSQL") == "latin-1"
    assert codec_of("klingon") is None


def test_datetime_pieces_as_iso_text():
    assert datetime_text({"year": 2023, "month": 10, "day": 11, "hour": 8, "minute": 3, "second": 9, "millis": 500}) == (
        "2023-10-11T08:03:09.000500", "timestamp")
    assert datetime_text({"year": 2023, "month": 10, "day": 11}) == ("2023-10-11", "date")
    assert datetime_text({"hour": -838, "minute": -59, "second": -59}) == ("-838:59:59", "time")
    assert datetime_text({"year": 2023}) == ("2023", "year")
    assert datetime_text({}) == (None, "null")
    oracle = {"year": 2023, "month": 1, "day": 2, "hour": 3, "minute": 4, "second": 5}
    assert datetime_text({**oracle, "millis": 123456789}, nanos=True)[0] == "2023-01-02T03:04:05.123456789"
    assert datetime_text({**oracle, "millis": 123456000}, nanos=True)[0] == "2023-01-02T03:04:05.123456"
    assert zone_offset("GMT+8", oracle) == "+08:00" and zone_offset("UTC", oracle) == "Z"
    assert zone_offset("America/New_York", {**oracle, "month": 7}) == "-04:00"


def _decoded(rec: dict[str, Any], **reader: str):
    data = encode(rec)
    value, layout = Reader.message(data)
    return RecordReader(**reader).row(value, layout, [])


KINDS = [("id", 3, integer(1, 4)), ("big", 8, integer("18446744073709551615")), ("price", 246, decimal("17520.00", 10, 2)),
         ("ratio", 5, floating(0.1)), ("name", 253, character("中文".encode("gbk"), "gbk")),
         ("latin", 254, character(b"caf\xe9", "latin1")), ("created", 7, timestamp(1696984408, 123456)),
         ("born", 10, date_time(year=2023, month=10, day=11)),
         ("at", 12, date_time(year=2023, month=10, day=11, hour=8, minute=33, second=28, millis=500000)),
         ("span", 11, date_time(hour=-838, minute=-59, second=-59)), ("yr", 13, date_time(year=2023)),
         ("zoned", 12, zoned("+08:00", year=2023, month=10, day=11, hour=8, minute=33, second=28)),
         ("blob", 252, binary(b"\x00\x01\xff")), ("doc", 245, text_object('{"a": 1}')),
         ("shape", 255, wkb(b"\x01\x01\x00")), ("shape_text", 255, wkt("POINT(1 2)")),
         ("gone", 253, "NONE"), ("nothing", 253, "NULL"), ("nul", 253, None)]
KIND_TEXTS = {"id": "1", "big": "18446744073709551615", "price": "17520.00", "ratio": "0.1", "name": "中文",
              "latin": "café", "created": "2023-10-11T00:33:28.123456Z", "born": "2023-10-11",
              "at": "2023-10-11T08:33:28.500000", "span": "-838:59:59", "yr": "2023",
              "zoned": "2023-10-11T08:33:28+08:00", "blob": "AAH/", "doc": '{"a": 1}', "shape": "AQEA",
              "shape_text": "POINT(1 2)", "nothing": None, "nul": None}  # "gone" (NONE): missing


def kinds_record(**members: Any) -> dict[str, Any]:
    return record("INSERT", "shop.kinds", [(n, t) for n, t, _ in KINDS], after=[v for _, _, v in KINDS],
                  tags=pk_tag("id"), **members)


def test_every_value_kind_reads_as_exact_text_through_the_real_schema():
    row = _decoded(kinds_record())
    assert row.error is None and row.op == "I" and row.before is None
    assert dict(row.after) == KIND_TEXTS
    reader = RecordReader()
    value, layout = Reader.message(encode(kinds_record()))
    types = {c: t for _, c, t in reader.types(value, layout)}
    assert types == {
        "id": T.LongType(), "big": T.DecimalType(20, 0), "price": T.DecimalType(10, 2), "ratio": T.DoubleType(),
        "name": T.StringType(), "latin": T.StringType(), "created": T.TimestampType(), "born": T.DateType(),
        "at": T.TimestampNTZType(), "span": T.StringType(), "yr": T.LongType(), "zoned": T.TimestampType(),
        "blob": T.BinaryType(), "doc": T.StringType(), "shape": T.StringType(), "shape_text": T.StringType(),
        "gone": T.StringType(), "nothing": T.StringType(), "nul": T.StringType(),  # from the MySQL type code
    }


def test_oracle_fractions_are_nanoseconds_and_other_sources_integers_are_wide():
    fields = [("id", 2), ("at", 180)]
    rec = record("INSERT", "HR.EMP", fields, after=[integer(7), date_time(year=2023, month=1, day=2, hour=3, minute=4,
                                                                            second=5, millis=123456789)],
                 source_type="Oracle", txid="3.17.1042", position="1234567")
    row = _decoded(rec)
    assert dict(row.after) == {"id": "7", "at": "2023-01-02T03:04:05.123456789"}
    assert row.txid == "3.17.1042" and row.pos == "00000000000001234567/00000000000000000001"
    value, layout = Reader.message(encode(rec))
    assert {c: t for _, c, t in RecordReader().types(value, layout)} == {"id": T.DecimalType(38, 0), "at": T.StringType()}
    assert _decoded(rec, fraction="micros").error == (
        "afterImages[1] (column 'at'): DateTime millis 123456789 is not a fraction of a second in microseconds")


def test_operations_map_to_ops_markers_and_ddl():
    image = [integer(1, 4), character("x")]
    snapshot = _decoded(record("INIT", "db.t", [("id", 3), ("v", 253)], after=image, tags=pk_tag("id")))
    assert (snapshot.op, snapshot.before, dict(snapshot.after), snapshot.keys) == ("R", None, {"id": "1", "v": "x"}, ["id"])
    marker = _decoded(record("INIT", None))
    assert (marker.op, marker.table, dict(marker.source)["skipped"]) == (None, None, "init")
    alter = _decoded(record("DDL", "db.t", after="ALTER TABLE t ADD w INT"))
    assert (alter.op, alter.table, dict(alter.source)["sql"], alter.error) == (None, "db.t", "ALTER TABLE t ADD w INT", None)
    for op in ("BEGIN", "COMMIT", "ROLLBACK", "HEARTBEAT", "CHECKPOINT"):
        row = _decoded(record(op, None))
        assert (row.op, row.error, dict(row.source)["skipped"]) == (None, None, op.lower())
    bad_tag = _decoded(record("INSERT", "db.t", [("id", 3), ("v", 253)], after=image, tags={"pk_uk_info": "{PRIMARY"}))
    assert bad_tag.error == "tag 'pk_uk_info' is not JSON: '{PRIMARY' (expected {\"PRIMARY\": [\"col\", ...]})"
    no_before = _decoded(record("UPDATE", "db.t", [("id", 3), ("v", 253)], after=image))
    assert no_before.error == ("'beforeImages' is null for operation UPDATE (expected an array of values aligned "
                               "with 'fields')")
    assert _decoded(record("INSERT", "db.t", after=image)).error == (
        "'fields' is null (expected the array of the columns' names and dataTypeNumber)")


# -- the demo's records, decoded and applied ------------------------------------------------------------------


@pytest.mark.spark
def test_demo_records_decode_and_apply_as_published(spark, tmp_path):
    first = write(tmp_path / "landing" / "part-0.bin", length_prefixed([encode(r) for r in DEMO[:3]]))
    found = decode(spark, first)
    at = lambda s: dt.datetime.fromtimestamp(s, dt.timezone.utc).replace(tzinfo=None)  # noqa: E731
    common = {"sourceType": "MySQL", "sourceVersion": "8.0.28", "sourceTxid": "0"}
    tags = {f"tag.{k}": v for k, v in TAGS.items()}
    pos_i, pos_u = "0000000078@00000000000000072469/00000000000001700382", "0000000078@00000000000000075259/00000000000001700504"
    seq = lambda s, p: f"{(s * 10**6 + 10**16):017d}|{p}|000000"  # noqa: E731
    assert [canonical(r) for r in found] == [
        (None, None, None, None, None, None, None, None, None, None,
         {"skipped": "ddl", "sql": "create table t1(a bigint primary key, b varchar(100))", "id": "1700104",
          "sourcePosition": "67008@78", "safeSourcePosition": "67008@78", "sourceTimestamp": "1696984152",
          **common, "operation": "DDL", "objectName": "mydb", "bornTimestamp": "1696984152",
          "tag.GTID": "281c62dc-590c-11ee-a295-00163e390c7c:108156", "tag.Q_CHARSET_CODE": "33",
          "tag.commitTimestamp": "1696984152", "tag.server_id": "26957161"}, None),
        ("mydb.t1", "I", at(1696984408), pos_i, 0, seq(1696984408, pos_i), None, ["a"], None,
         {"a": "123456789", "b": "test insert statement."},
         {"id": "1700382", "sourcePosition": "72469@78", "safeSourcePosition": "72469@78",
          "sourceTimestamp": "1696984408", **common, "operation": "INSERT", "objectName": "mydb.t1",
          "bornTimestamp": "1696984408", **tags, "tag.readerThroughoutTime": "1696984408050"}, None),
        ("mydb.t1", "U", at(1696984517), pos_u, 0, seq(1696984517, pos_u), None, ["a"],
         {"a": "123456789", "b": "test insert statement."}, {"a": "123456789", "b": "test update statement."},
         {"id": "1700504", "sourcePosition": "75259@78", "safeSourcePosition": "75259@78",
          "sourceTimestamp": "1696984517", **common, "operation": "UPDATE", "objectName": "mydb.t1",
          "bornTimestamp": "1696984517", **tags, "tag.readerThroughoutTime": "1696984517078"}, None),
    ]
    assert [(r["_offset"], r["_raw"]) for r in found] == [(0, None), (4 + len(encode(DEMO[0])), None),
                                                          (8 + len(encode(DEMO[0])) + len(encode(DEMO[1])), None)]
    by_position = decode(spark, first, sequenceBy="position")
    assert [r["seq"] for r in by_position if r["op"]] == [pos_i, pos_u]

    target = tmp_path / "lake"
    s1 = lakecdc.apply(first, target, format=FORMAT, spark=spark)
    t1 = s1.table("mydb.t1")
    assert (t1.events, t1.inserted, t1.skipped, s1.skipped_unrouted) == (2, 1, 0, 1)  # the DDL names no table
    assert rows(t1.target) == [{"a": Decimal("123456789"), "b": "test update statement."}]
    types = {f.name: f.type.type for f in DeltaTable(str(t1.target)).schema().fields if not f.name.startswith("_cdc")}
    assert types == {"a": "decimal(20,0)", "b": "string"}
    second = write(tmp_path / "landing" / "part-1.bin", length_prefixed([encode(DEMO[3])]))
    s2 = lakecdc.apply([first, second], target, format=FORMAT, spark=spark)
    assert (s2.table("mydb.t1").deleted, rows(t1.target)) == (1, [])


@pytest.mark.spark
def test_every_value_kind_applies_with_its_type(spark, tmp_path):
    path = write(tmp_path / "landing" / "kinds.bin", length_prefixed([encode(kinds_record())]))
    s = lakecdc.apply(path, tmp_path / "lake", format=FORMAT, spark=spark)
    t = s.table("shop.kinds")
    assert (t.events, t.quarantined) == (1, 0)
    (row,) = rows(t.target)
    assert row == {
        "id": 1, "big": Decimal("18446744073709551615"), "price": Decimal("17520.00"), "ratio": 0.1, "name": "中文",
        "latin": "café", "created": dt.datetime(2023, 10, 11, 0, 33, 28, 123456, tzinfo=dt.timezone.utc),
        "born": dt.date(2023, 10, 11), "at": dt.datetime(2023, 10, 11, 8, 33, 28, 500000), "span": "-838:59:59",
        "yr": 2023, "zoned": dt.datetime(2023, 10, 11, 0, 33, 28, tzinfo=dt.timezone.utc), "blob": b"\x00\x01\xff",
        "doc": '{"a": 1}', "shape": "AQEA", "shape_text": "POINT(1 2)", "nothing": None, "nul": None,
        "gone": None,
    }  # "gone" (NONE) was never given a value: declared by `fields`, a column all the same


# -- framings ----------------------------------------------------------------------------------------------


@pytest.mark.spark
def test_framings_decode_alike(spark, tmp_path):
    """The same records as a length-prefixed dump, a kcat dump, single-message files, an OCF file,
    and in the older layout without bornTimestamp: the same canonical rows."""
    recs = [DEMO[1], DEMO[2], record("HEARTBEAT", None, id=1700600, ts=1696984600, position="80000@78")]
    messages = [encode(r) for r in recs]
    landing = tmp_path / "landing"
    dump = write(landing / "dump.bin", length_prefixed(messages))
    dumped = write(landing / "dump.json", kcat([*messages, None]))
    container = write(landing / "records.avro", ocf(recs))
    legacy = write(landing / "legacy.bin", length_prefixed([encode(r, legacy=True) for r in recs]))
    singles = [write(tmp_path / "single" / f"m{i}.avro.bin", m) for i, m in enumerate(messages)]
    want = [canonical(r) for r in decode(spark, dump)]
    assert [r[1] for r in want] == ["I", "U", None] and want[2][10]["skipped"] == "heartbeat"
    from_kcat = decode(spark, dumped)
    assert [canonical(r) for r in from_kcat[:3]] == want
    assert from_kcat[1]["source"]["kafka.topic"] == "cn_hangzhou_dts_topic" and from_kcat[1]["source"]["kafka.offset"] == "1"
    assert from_kcat[3]["source"]["skipped"] == "tombstone" and from_kcat[3]["_error"] is None
    assert [canonical(r) for r in decode(spark, container)] == want
    assert [canonical(r) for r in decode(spark, *singles, framing="single")] == want
    no_born = [canonical(r) for r in decode(spark, legacy)]
    assert [r[:10] for r in no_born] == [r[:10] for r in want] and "bornTimestamp" not in no_born[0][10]


# -- skipped records and bad input -------------------------------------------------------------------------

FIELDS2 = [("id", 3), ("v", 253)]


def row_record(op: str, key: int, value: str | None, n: int, table: str | None = "db.t", **images: Any) -> dict[str, Any]:
    image = [integer(key, 4), None if value is None else character(value)]
    default = {"after": image} if op == "INSERT" else {"before": image} if op == "DELETE" else {"before": image, "after": image}
    return record(op, table, FIELDS2, id=1000 + n, ts=1700000000 + n, position=f"{100 * n}@3", tags=pk_tag("id"),
                  **{**default, **images})


def unknown_operation(rec: dict[str, Any]) -> bytes:
    """``rec`` written by a schema whose Operation enum has an 18th symbol (index 17)."""
    schema = json.loads(fastavro.schema.to_parsing_canonical_form(SCHEMA))
    op = next(f for f in schema["fields"] if f["name"] == "operation")
    op["type"]["symbols"].append("TRUNCATE")
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), {**rec, "operation": "TRUNCATE"})
    return out.getvalue()


@pytest.mark.spark
def test_markers_ddl_and_bad_messages(spark, tmp_path):
    """Markers and DDL are skipped and counted; bad messages are quarantined with file, byte offset,
    reason and bytes; the good rows of the same files apply."""
    good1, good2 = encode(row_record("INSERT", 1, "a", 1)), encode(row_record("INSERT", 2, "b", 8))
    cut = encode(row_record("INSERT", 3, "c", 2))[:-3]
    bad_op = unknown_operation(row_record("INSERT", 4, "d", 3))
    short_image = encode(row_record("INSERT", 5, "e", 4, after=[integer(5, 4)]))
    bad_bytes = encode(row_record("INSERT", 6, None, 5, after=[integer(6, 4), character(b"\xff\xfe", "gbk")]))
    no_charset = encode(row_record("INSERT", 7, None, 6, after=[integer(7, 4), character(b"x", "klingon")]))
    no_table = encode(row_record("INSERT", 8, "h", 7, table=None))
    markers = [encode(record(op, None, id=1, ts=1700000000, position="1@3")) for op in ("BEGIN", "COMMIT", "HEARTBEAT")]
    ddl = encode(record("DDL", "db.t", after="ALTER TABLE t ADD w INT", id=2, ts=1700000000, position="2@3"))
    messages = [good1, *markers, cut, bad_op, short_image, bad_bytes, no_charset, no_table, ddl, good2]
    body = length_prefixed(messages)
    tail = encode(row_record("INSERT", 9, "i", 9))
    path = write(tmp_path / "landing" / "a.bin", body + len(tail).to_bytes(4, "big") + tail[:10])
    lines = kcat([encode(row_record("UPDATE", 2, "b2", 10)), bad_op]).splitlines()
    dumped = write(tmp_path / "landing" / "b.json", "\n".join([lines[0], "{not json", lines[1]]) + "\n")
    target = tmp_path / "lake"
    s = lakecdc.apply([path, dumped], target, format=FORMAT, spark=spark)
    t = s.table("db.t")
    assert (t.events, t.skipped, s.skipped_unrouted) == (3, 1, 3)
    assert rows(t.target, "id") == [{"id": 1, "v": "a"}, {"id": 2, "v": "b2"}]
    q = quarantine(target)
    offsets = [sum(4 + len(m) for m in messages[:i]) for i in range(4, 10)] + [len(body)]
    assert [(r["file"], r["offset"], r["line"], r["format"]) for r in q[:7]] == [
        (str(path.resolve()), o, None, FORMAT) for o in offsets]
    assert [r["source_table"] for r in q] == [None, "db.t", "db.t", "db.t", "db.t", None, None, None, "db.t"]
    index17 = ("unknown operation: enum index 17 (the Record schema's operations are INSERT, UPDATE, DELETE, DDL, "
               "BEGIN, COMMIT, ROLLBACK, ABORT, HEARTBEAT, CHECKPOINT, COMMAND, FILL, FINISH, CONTROL, RDB, NOOP, "
               "INIT); a newer DTS may have written it")
    reasons = [r["reason"] for r in q]
    assert reasons[0] == (f"the DTS Record schema does not read the message's {len(cut)} bytes (IndexError: string "
                          "index out of range): a cut message, or no DTS Record")
    assert reasons[1:] == [
        index17,
        "'afterImages' has 1 value(s) but 'fields' names 2 column(s)",
        "afterImages[1] (column 'v'): Character bytes b'\\xff\\xfe' at byte 0 are not valid in charset 'gbk' "
        "(Python codec gbk)",
        "afterImages[1] (column 'v'): Character charset 'klingon' is unknown (expected a MySQL, Oracle or "
        "PostgreSQL character set such as utf8mb4, gbk, latin1, AL32UTF8, or a Python codec name)",
        "'objectName' missing for operation INSERT (expected db.table)",
        f"truncated: the length prefix gives {len(tail)} bytes, only 10 remain",
        "line 2: not a kcat JSON record: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
        f"line 3: {index17}",
    ]
    assert [base64.b64decode(r["raw"]) for r in q[:7]] == [cut, bad_op, short_image, bad_bytes, no_charset, no_table,
                                                           tail[:10]]
    assert [(r["file"], r["raw"]) for r in q[7:]] == [(str(dumped.resolve()), "{not json"), (str(dumped.resolve()), lines[1])]


@pytest.mark.spark
def test_an_ocf_file_of_another_schema_is_quarantined_whole(spark, tmp_path):
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}),
                    [{"x": 1}])
    path = write(tmp_path / "other.avro", out.getvalue())
    (bad,) = decode(spark, path)
    assert bad["_error"] == ("an Avro object container file whose schema is 'Other', not the DTS Record schema "
                             "(com.alibaba.dts.formats.avro.Record)")


# -- oracle round trips ------------------------------------------------------------------------------------


def test_history_is_rendered_with_whole_rows_and_truncates_as_ddl():
    history = DtsHistory.of(key_changes())
    update = history.records[5]  # a partial update of a moved key: DTS writes the whole row
    assert update["operation"] == "UPDATE" and len(update["afterImages"]) == len(update["fields"]) == 3
    assert history.views[5].before == {"ID": 5, "C1": 20, "C2": None} and history.views[5].after == {
        "ID": 4, "C1": 20, "C2": "moved"}
    assert history.records[10]["operation"] == "DDL" and history.views[10] is None


@pytest.mark.spark
@pytest.mark.parametrize("mode", ["delete-insert", "abend"])
def test_key_changes_round_trip(spark, tmp_path, mode):
    run_dts_scenario(spark, dataclasses.replace(key_changes(), pk_update=mode), tmp_path)


@pytest.mark.spark
@settings(max_examples=5, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=14))
def test_random_histories_round_trip(spark, tmp_path_factory, sc):
    run_dts_scenario(spark, sc, tmp_path_factory.mktemp("dts"))
