"""Ops-style and rows-style events, schema evolution and string typing through the public API."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import lakecdc
from tests.helpers import ogg, rows, write_jsonl

pytestmark = pytest.mark.spark


@pytest.fixture
def key_change(tmp_path):
    return write_jsonl(tmp_path / "in" / "a.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "A": "x", "B": "y"}, keys=["ID"]),
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1, "A": "x"}, after={"ID": 2, "A": "z"}, keys=["ID"]),
        ogg("S.T", "T", "00:00:03", 3),
    ])


def test_ops_style_keeps_both_images(spark, key_change):
    ev = lakecdc.to_ops(lakecdc.read_changes(key_change, format="ogg-json", spark=spark)).orderBy("seq").collect()
    assert [r["op"] for r in ev] == ["I", "U", "T"]
    assert ev[1]["before"] == {"ID": "1", "A": "x"} and ev[1]["after"] == {"ID": "2", "A": "z"}
    assert ev[2]["before"] is None and ev[2]["after"] is None


def test_rows_style_pk_update_modes(spark, key_change):
    ev = lakecdc.read_changes(key_change, format="ogg-json", spark=spark)
    split = lakecdc.to_rows(ev, pk_update="delete-insert").orderBy("seq").collect()
    assert [(r["op"], r["row"]) for r in split] == [
        ("I", {"ID": "1", "A": "x", "B": "y"}),
        ("D", {"ID": "1", "A": "x"}),
        ("I", {"ID": "2", "A": "z"}),   # completed from the before image for columns missing in after
        ("T", None),
    ]
    kept = lakecdc.to_rows(ev, pk_update="update").orderBy("seq").collect()
    assert [(r["op"], r["row"]) for r in kept][1] == ("U", {"ID": "2", "A": "z"})
    with pytest.raises(lakecdc.PrimaryKeyUpdateError, match=r"'S.T'.*'1'.*'2'"):
        lakecdc.to_rows(ev, pk_update="abend")


def test_new_columns_are_added_and_dropped_ones_kept(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "OLD": "o"}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    write_jsonl(landing / "2.json", [ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "NEW": 7.5}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    path = s.table("S.T").target
    assert rows(path, "ID") == [{"ID": 1, "OLD": "o", "NEW": None}, {"ID": 2, "OLD": None, "NEW": pytest.approx(7.5)}]
    assert pa.schema(DeltaTable(path).schema().to_arrow()).field("NEW").type == pa.decimal128(38, 2)


def test_treat_all_columns_as_strings(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": "1", "N": "00042"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", options={"treatAllColumnsAsStrings": "true"}, spark=spark)
    assert rows(s.table("S.T").target) == [{"ID": "1", "N": "00042"}]


@pytest.mark.parametrize("most", [None, 9, 20])
def test_digits_is_ascii_digits_only(spark, most):
    import re

    from pyspark.sql import functions as F

    from lakecdc.changes.events import digits

    texts = ["0", "7", "007", "123456789", "1234567890", "12345678901234567890", "123456789012345678901",
             "9223372036854775807", "9223372036854775808", "-1", "+1", " 1", "1 ", "1.0", "1e3", "", None,
             "١٢", "0x1F", "00000000000000000000"]
    df = spark.createDataFrame([(t,) for t in texts], "t string")
    got = [r[0] for r in df.select(digits(F.col("t"), most)).collect()]
    pattern = re.compile("[0-9]+" if most is None else f"[0-9]{{1,{most}}}")
    assert got == [None if t is None else pattern.fullmatch(t) is not None for t in texts]


@pytest.mark.parametrize("policy", ["EXCEPTION", "LAST_WIN"])
def test_overlay_lays_top_over_base_under_either_map_key_policy(spark, policy):
    from pyspark.sql import functions as F

    from lakecdc.changes.events import last_wins, overlay
    from lakecdc.spark.conf import MAP_KEY_DEDUP, job_conf

    cases = [
        ({"A": "1", "B": "2"}, {"B": "3", "C": None}), ({"A": "1"}, None), (None, {"A": "1"}), ({}, {"A": "1"}),
        ({"A": "1", "B": "2"}, {"A": "1", "B": "2"}), ({"A": None}, {"A": "x"}),
    ]
    df = spark.createDataFrame(cases, "base map<string,string>, top map<string,string>")
    with job_conf(spark, {MAP_KEY_DEDUP: policy}):
        last_win = last_wins(spark)
        got = [r[0] for r in df.select(overlay(F.col("base"), F.col("top"), last_win=last_win)).collect()]
    assert last_win == (policy == "LAST_WIN")
    assert got == [None if b is None else {**b, **(t or {})} for b, t in cases]


def test_op_ts_cast_as_it_is_in_a_utc_session_reads_what_the_z_form_reads(spark):
    """In a session whose zone is UTC a time without a zone is cast as it is; elsewhere a ``Z`` is
    appended. Both read the same instants (times with their own zone keep it)."""
    from pyspark.sql import functions as F

    from lakecdc.decode.times import parse_op_ts, session_is_utc
    from lakecdc.spark.conf import job_conf

    texts = ["2017-06-16T14:24:34", "2017-06-16 14:24:34.123456", "2017-06-16T14:24:34+08:00", "2017-06-16T14:24:34Z",
             "2017-06-16", "2017-06-16T14:24:34 UTC", "2017-06-16T14:24:34.5-01:30", "junk", "", None]
    df = spark.createDataFrame([(t,) for t in texts], "t string")
    got = {}
    for zone in ("UTC", "Asia/Shanghai", "Etc/UTC", "America/New_York"):
        with job_conf(spark, {"spark.sql.session.timeZone": zone}):
            utc = session_is_utc(spark)
            assert utc == (zone in ("UTC", "Etc/UTC"))
            # epoch microseconds: the instant, whatever zone renders it
            fast, z_form = (F.unix_micros(parse_op_ts(F.col("t"), utc_session=u)) for u in (utc, False))
            rows = df.select(fast, z_form).collect()
            assert [r[0] for r in rows] == [r[1] for r in rows]
            got[zone] = [r[0] for r in rows]
    assert got["UTC"][0] == 1497623074000000 and got["UTC"][2] == 1497623074000000 - 8 * 3600 * 1_000_000
    assert got["UTC"][-3:] == [None, None, None]
    # a time, with or without a zone of its own, is the same instant in any session (a date alone
    # is midnight in the session's zone, as before)
    assert all(got[z][:4] + got[z][5:] == got["UTC"][:4] + got["UTC"][5:] for z in got)
