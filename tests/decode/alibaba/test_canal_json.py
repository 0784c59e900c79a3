"""Canal JSON (``canal-json``): seed 002's examples, the real samples, bad records, an oracle round trip."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from pyspark.sql import types as T

import lakecdc
from lakecdc.decode import get_decoder
from lakecdc.decode.alibaba.mysql_types import mysql_type, sql_type
from lakecdc.errors import ConfigError

try:
    from tests.canal_render import (
        canal_messages,
        ddl_message,
        key_changes,
        message_runs,
        mysql_columns,
        run_rendered_scenario,
    )
    from tests.helpers import rows
    from tests.test_property import scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from canal_render import (  # type: ignore[no-redef]
        canal_messages,
        ddl_message,
        key_changes,
        message_runs,
        mysql_columns,
        run_rendered_scenario,
    )
    from helpers import rows  # type: ignore[no-redef]
    from test_property import scenarios  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "canal-json"
LEGACY = {"layout": "dts-before-2022-03-20"}


def decode(spark, paths, **options) -> list:
    df = lakecdc.read_changes([str(p) for p in paths], format="canal-json", options=options, spark=spark)
    return df.orderBy("_file", "_row", "idx").collect()


def brief(r) -> str:
    """An event as compact text: ``OP table pos/idx before={...} after={...}`` (missing = absent)."""
    parts = [r["op"] or "-", r["table"] or "-", f"{r['pos']}/{r['idx']}"]
    for name in ("before", "after"):
        img = r[name]
        if img is not None:
            parts.append(f"{name}={{{', '.join(f'{k}={img[k]!r}' for k in sorted(img))}}}")
    return " ".join(parts)


def message(**members) -> str:
    base = {"data": None, "database": "db", "table": "t", "es": 1600000000000, "id": 1, "isDdl": False,
            "old": None, "pkNames": ["id"], "sql": "", "ts": 1600000000500, "type": "INSERT",
            "mysqlType": {"id": "bigint(20)", "v": "varchar(10)"}, "sqlType": {"id": -5, "v": 12}}
    return json.dumps({**base, **members})


# -- types (no Spark) ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("bigint(20)", T.LongType()), ("INT", T.LongType()), ("TINYINT(1)", T.LongType()), ("BOOLEAN", T.LongType()),
        ("int(10) unsigned", T.LongType()), ("BIGINT unsigned", T.DecimalType(20, 0)),
        ("BIGINT(16) unsigned zerofill", T.DecimalType(20, 0)), ("SERIAL", T.DecimalType(20, 0)),
        ("DECIMAL(2,1)", T.DecimalType(2, 1)), ("DECIMAL(8, 0) unsigned", T.DecimalType(8, 0)),
        ("NUMERIC(8,3)", T.DecimalType(8, 3)), ("decimal", T.DecimalType(10, 0)), ("decimal(38,10)", T.DecimalType(38, 10)),
        ("FIXED(40,3)", T.StringType()), ("FLOAT", T.FloatType()), ("float(30)", T.DoubleType()),
        ("DOUBLE PRECISION(10,7) unsigned zerofill", T.DoubleType()), ("REAL", T.DoubleType()),
        ("DATE", T.DateType()), ("DATETIME(6)", T.TimestampNTZType()), ("timestamp", T.TimestampNTZType()),
        ("varchar(50)", T.StringType()), ("TIME", T.StringType()), ("YEAR", T.LongType()), ("JSON", T.StringType()),
        ("ENUM('a','b')", T.StringType()), ("SET('a','b')", T.StringType()), ("bit(1)", T.StringType()),
        ("LONGBLOB", T.StringType()), ("POINT", T.StringType()), ("", T.StringType()),
    ],
)
def test_mysql_types_map_to_lossless_spark_types(text, expected):
    assert mysql_type(text) == expected


def test_sql_type_codes_are_the_fallback():
    assert [sql_type(c) for c in ("4", -5, "3", "93", "12", None)] == [
        T.LongType(), T.DecimalType(20, 0), T.StringType(), T.TimestampNTZType(), T.StringType(), T.StringType()]


def test_options_are_checked():
    assert get_decoder("canal-json", LEGACY).legacy
    with pytest.raises(ConfigError, match="layout='old' is not one of standard, dts-before-2022-03-20"):
        get_decoder("canal-json", {"layout": "old"})
    with pytest.raises(ConfigError, match="sequenceBy='ts' is not one of es, id"):
        get_decoder("canal-json", {"sequenceBy": "ts"})
    with pytest.raises(ConfigError, match="unknown option.*known: layout, sequenceBy, treatAllColumnsAsStrings"):
        get_decoder("canal-json", {"pkNames": "id"})


# -- the seed's examples ---------------------------------------------------------------------------------


def test_seed_examples_decode_as_the_seed_says(spark, tmp_path):
    legacy_update = tmp_path / "legacy-update.json"
    standard_update = tmp_path / "standard-update.json"
    # the seed describes the two update layouts in words: the same change written both ways
    row_before, row_after = {"id": "7", "v": "a", "w": None}, {"id": "7", "v": "b", "w": None}
    legacy_update.write_text(message(type="UPDATE", data=[row_before], old=[row_after]) + "\n")
    standard_update.write_text(message(type="UPDATE", data=[row_after], old=[{"v": "a"}]) + "\n")

    since, ddl, before = (FIX / "seed-delete-since-2022-03-20.json", FIX / "seed-ddl.json",
                          FIX / "seed-delete-before-2022-03-20.json")
    rows_ = decode(spark, [since, ddl, before, standard_update])
    by_file = {Path(r["_file"]).name.split(".json")[0]: r for r in rows_}
    deleted = by_file["seed-delete-since-2022-03-20"]
    assert brief(deleted) == "D dbname.tablename 00000000000000000058/0 before={id='500000287', shipping_type=None}"
    assert deleted["keys"] == ["id"] and deleted["_error"] is None
    assert deleted["op_ts"] == datetime(2020, 9, 15, 9, 24, 54)  # es 1600161894000 ms, UTC (session zone UTC)
    assert deleted["source"] == {"database": "dbname", "type": "DELETE", "es": "1600161894000",
                                 "ts": "1600161894771", "id": "58"}
    skipped = by_file["seed-ddl"]
    assert (skipped["table"], skipped["op"], skipped["_error"]) == ("dbname.tablename", None, None)
    assert skipped["source"]["skipped"] == "ddl" and skipped["source"]["sql"] == "eg:createxxx"
    assert by_file["seed-delete-before-2022-03-20"]["_error"] == (
        "DELETE with 'data' null and its rows in 'old': the layout of DTS instances created before 2022-03-20; "
        "read such files with the option layout=dts-before-2022-03-20")
    assert brief(by_file["standard-update"]) == "U db.t 00000000000000000001/0 before={id='7', v='a', w=None} after={id='7', v='b', w=None}"

    old_rows = decode(spark, [before, legacy_update], **LEGACY)
    assert sorted(brief(r) for r in old_rows) == [
        "D dbname.tablename 00000000000000000058/0 before={shipping_type='aaa'}",
        "U db.t 00000000000000000001/0 before={id='7', v='a', w=None} after={id='7', v='b', w=None}",
    ]
    assert all(r["_error"] is None for r in old_rows)


# -- the real samples --------------------------------------------------------------------------------------

SAMPLES = ("paimon-canal-ddl-insert-update-old.txt", "paimon-canal-modify-insert-delete-update.txt",
           "paimon-canal-multi-ddl-special-colname.txt")


def test_real_samples_decode_to_what_they_state(spark, sample):
    paths = [sample(f"canal-json/{name}") for name in SAMPLES]
    got = decode(spark, paths)
    assert all(r["_error"] is None for r in got)
    text = [brief(r) for r in got]
    evo1, evo2 = "paimon_sync_table.schema_evolution_1", "paimon_sync_table.schema_evolution_2"
    assert text[:6] == [
        f"- {evo1} None/None",  # ALTER TABLE ... ADD COLUMN v2: a skipped DDL
        f"I {evo1} 00000000000000000014/0 after={{_id='3', pt='2', v1='three', v2='30'}}",
        f"I {evo1} 00000000000000000014/1 after={{_id='5', pt='1', v1='five', v2='50'}}",
        f"- {evo2} None/None",
        f"I {evo2} 00000000000000000016/0 after={{_id='6', pt='1', v1='six', v2='60'}}",
        # old [{"v1":"two"}]: only v1 changed; v2 is a present NULL in both images
        f"U {evo2} 00000000000000000018/0 before={{_id='2', pt='1', v1='two', v2=None}} "
        f"after={{_id='2', pt='1', v1='second', v2=None}}",
    ]
    assert got[1]["_row"] == got[2]["_row"]  # one message, two rows, one line
    # rows of one message tie on seq (es, id) and keep their order in data after the arrival
    assert got[1]["seq"] == got[2]["seq"] and (got[1]["idx"], got[2]["idx"]) == (0, 1) and got[1]["keys"] == ["_id"]
    assert got[0]["source"]["skipped"] == "ddl" and "ADD COLUMN v2 INT" in got[0]["source"]["sql"]
    assert text[7:10] == [
        f"I {evo1} 00000000000000000041/0 after={{_id='7', pt='2', v1='seven', v2='70000000000'}}",
        f"D {evo1} 00000000000000000042/0 before={{_id='5', pt='1', v1='five', v2='50'}}",
        f"U {evo1} 00000000000000000043/0 before={{_id='3', pt='2', v1='three', v2='30'}} "
        f"after={{_id='3', pt='2', v1='three', v2='30000000000'}}",
    ]
    special = got[-1]
    assert special["after"]["$% ^,& *("] == "test_2" and special["after"]["v6"] == "20.002"
    assert "\nADD v4 INT" in got[-2]["source"]["sql"]  # the multi-line DDL, skipped
    assert [r["op"] for r in got].count(None) == 5


def test_real_samples_apply_with_mysql_types(spark, sample, tmp_path):
    paths = [sample(f"canal-json/{name}") for name in (*SAMPLES, "paimon-canal-alltypes.txt")]
    summary = lakecdc.apply([str(p) for p in paths], tmp_path / "lake", format="canal-json", spark=spark)
    tables = {t.source_table: t for t in summary.tables}
    assert summary.ok
    assert {name: (t.events, t.skipped, t.quarantined) for name, t in tables.items()} == {
        "paimon_sync_table.all_types_table": (2, 0, 0),
        "paimon_sync_table.schema_evolution_1": (5, 2, 0),
        "paimon_sync_table.schema_evolution_2": (3, 2, 0),
        "paimon_sync_table.schema_evolution_multiple": (1, 1, 0),
    }
    evo1 = rows(tables["paimon_sync_table.schema_evolution_1"].target, "_id")
    # v2 is declared INT, then BIGINT after the MODIFY: one bigint column holds both
    assert evo1 == [{"pt": 2, "_id": 3, "v1": "three", "v2": 30000000000}, {"pt": 2, "_id": 7, "v1": "seven", "v2": 70000000000}]
    evo2 = rows(tables["paimon_sync_table.schema_evolution_2"].target, "_id")
    assert evo2[0] == {"pt": 1, "_id": 2, "v1": "second", "v2": None}  # an update of a row the target never had
    multiple = rows(tables["paimon_sync_table.schema_evolution_multiple"].target)
    assert multiple == [{"_id": 2, "v1": "long_string_two", "v2": 2000000000000, "v3": "string_2", "v4": 20,
                         "v5": 20.5, "v6": Decimal("20.002"), "$% ^,& *(": "test_2"}]
    all_types = tables["paimon_sync_table.all_types_table"].target
    schema = {f.name: f.type.type for f in DeltaTable(str(all_types)).schema().fields}
    assert (schema["pt"], schema["_bigint_unsigned"], schema["_fixed"], schema["_datetime6"], schema["_date"]) == (
        "decimal(2,1)", "decimal(20,0)", "string", "timestamp_ntz", "date")
    first, second = rows(all_types, "_id")
    assert first["_numeric"] == Decimal("12345.110") and first["_bigint_unsigned_zerofill"] == Decimal("30000000000")
    assert first["_fixed"] == "123456789876543212345678987654321.110"  # 40 digits: kept as exact text
    assert first["_datetime6"] == datetime(2023, 3, 23, 14, 30, 5, 123456) and first["_float"] == 1.5
    assert first["_json"] == '{"a": "b"}' and first["_time"] == "10:13:23" and first["_year"] == 2023
    assert second["_serial"] == Decimal("50000000000") and second["_int"] is None


# -- ordering -------------------------------------------------------------------------------------------------


def test_seq_orders_by_es_then_id_then_row(spark, tmp_path):
    f = tmp_path / "a.json"
    f.write_text("\n".join([
        message(es=1600000001000, id=5, data=[{"id": "1", "v": "a"}, {"id": "2", "v": "b"}]),
        message(es=1600000001000, id=3, data=[{"id": "3", "v": "c"}]),
        message(es=1600000000000, id=9, data=[{"id": "4", "v": "d"}]),
    ]) + "\n")
    by_es = decode(spark, [f])
    assert [r["after"]["id"] for r in sorted(by_es, key=lambda r: r["seq"])] == ["4", "3", "1", "2"]
    by_id = decode(spark, [f], sequenceBy="id")
    assert [r["after"]["id"] for r in sorted(by_id, key=lambda r: r["seq"])] == ["3", "1", "2", "4"]


# -- bad records ------------------------------------------------------------------------------------------------


def test_bad_records_are_quarantined_and_the_rest_applies(spark, tmp_path):
    lines = [
        message(data=[{"id": "1", "v": "a"}, {"id": "2", "v": "b"}]),                        # 1 good
        '{"data": [{"id": "3"}], "type": "INSERT"',                                           # 2 not JSON
        message(type="UPSERT", id=2, data=[{"id": "4", "v": "x"}]),                            # 3 unknown type
        message(es="soon", id=3, data=[{"id": "5", "v": "x"}]),                                # 4 bad es
        message(type="UPDATE", id=4, data=[{"id": "1", "v": "c"}, {"id": "2", "v": "d"}], old=[{"v": "a"}]),  # 5
        message(id=5, data=[{"id": "6", "v": "x"}, {"id": "seven", "v": "y"}, {"id": "8", "v": "z"}]),  # 6 row 2 bad
        message(type="DELETE", id=6, data=None, old=[{"id": "1", "v": "a"}]),                  # 7 legacy delete
        message(id=7, data=[]),                                                                # 8 no rows
        message(type="UPDATE", id=8, data=[{"id": "2", "v": "e"}], old=[{"v": "b"}]),          # 9 good
        message(isDdl=True, type="ALTER", id=9, sql="ALTER TABLE t ADD w INT"),                # 10 skipped
        message(id=10, data=[{"id": "9", "v": "n"}, None]),                                   # 11 row 2 null
    ]
    landing = tmp_path / "landing" / "batch.json"
    landing.parent.mkdir()
    landing.write_text("\n".join(lines) + "\n")
    summary = lakecdc.apply(str(landing.parent), tmp_path / "lake", format="canal-json", spark=spark)
    (table,) = summary.tables
    assert (table.source_table, table.quarantined, table.skipped) == ("db.t", 7, 1)
    assert summary.quarantined_unrouted == 1  # the line that is not JSON names no table
    assert rows(table.target, "id") == [{"id": 1, "v": "a"}, {"id": 2, "v": "e"}, {"id": 6, "v": "x"},
                                        {"id": 8, "v": "z"}, {"id": 9, "v": "n"}]
    q = DeltaTable(summary.quarantine).to_pyarrow_table().to_pylist()
    got = sorted((r["line"], r["reason"]) for r in q)
    assert all(r["file"] == str(landing) and r["format"] == "canal-json" for r in q)
    assert got == [
        (2, "not valid JSON, or a member of the wrong type (expected 'data' and 'old' arrays of objects, "
            "'pkNames' an array of names, 'mysqlType'/'sqlType' objects)"),
        (3, "unknown type 'UPSERT' (expected INSERT, UPDATE, DELETE or INIT; DDL messages carry isDdl true)"),
        (4, "'es' missing or not a whole number of milliseconds: 'soon'"),
        (5, "'old' has 1 row(s) but 'data' has 2 (expected one 'old' entry per row)"),
        (6, "column 'id': after value 'seven' does not fit type bigint"),  # a key that does not type
        (7, "DELETE with 'data' null and its rows in 'old': the layout of DTS instances created before "
            "2022-03-20; read such files with the option layout=dts-before-2022-03-20"),
        (8, "'data' missing or empty for type 'INSERT' (expected an array of row objects)"),
        (11, "'data[1]' is null (expected a row object)"),
    ]
    assert next(r["raw"] for r in q if r["line"] == 3) == lines[2]


# -- an oracle round trip ------------------------------------------------------------------------------------


def run_canal(spark, sc, workdir: Path, **kw) -> None:
    messages, message_of = canal_messages(sc.events, mysql_columns(sc.specs), primary_keys=sc.primary_keys)
    first = sc.specs[0].name

    def header(_number: int) -> list[str]:
        return [ddl_message(first, 1704067200000)]

    run_rendered_scenario(spark, sc, workdir, fmt="canal-json", render=message_runs(messages, message_of, header=header),
                          expect_skipped=lambda _n: {first: 1}, **kw)


def test_renderer_writes_multi_row_messages():
    sc = key_changes()
    messages, message_of = canal_messages(sc.events, mysql_columns(sc.specs))
    assert message_of == [0, 0, 0, 1, 1, 2, 3, 4, 4, 5, 6, 7]
    body = json.loads(messages[1].text)
    assert body["type"] == "UPDATE" and body["old"] == [{"C1": "10"}, {"ID": "2"}]
    # the index in data is no part of Canal's seq: the oracle keeps the rows in their order in data
    assert [e.idx for e in messages[1].events] == [0, 0] and messages[1].events[1].before["ID"] == 2
    assert json.loads(messages[0].text)["type"] == "INIT" and messages[0].events[0].op == "R"


@pytest.mark.parametrize("mode", ["delete-insert", "abend"])
def test_key_changes_round_trip(spark, tmp_path, mode):
    run_canal(spark, dataclasses.replace(key_changes(), pk_update=mode), tmp_path)


@settings(max_examples=5, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=14, modes=("delete-insert", "update")))
def test_random_histories_round_trip(spark, tmp_path_factory, sc):
    run_canal(spark, sc, tmp_path_factory.mktemp("canal"), max_runs=2)
