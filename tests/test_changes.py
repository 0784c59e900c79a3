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
    ev = lakecdc.to_ops(lakecdc.read_changes(key_change, spark=spark)).orderBy("seq").collect()
    assert [r["op"] for r in ev] == ["I", "U", "T"]
    assert ev[1]["before"] == {"ID": "1", "A": "x"} and ev[1]["after"] == {"ID": "2", "A": "z"}
    assert ev[2]["before"] is None and ev[2]["after"] is None


def test_rows_style_pk_update_modes(spark, key_change):
    ev = lakecdc.read_changes(key_change, spark=spark)
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
    lakecdc.apply(landing, target, spark=spark)
    write_jsonl(landing / "2.json", [ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "NEW": 7.5}, keys=["ID"])])
    s = lakecdc.apply(landing, target, spark=spark)
    path = s.table("S.T").target
    assert rows(path, "ID") == [{"ID": 1, "OLD": "o", "NEW": None}, {"ID": 2, "OLD": None, "NEW": pytest.approx(7.5)}]
    assert pa.schema(DeltaTable(path).schema().to_arrow()).field("NEW").type == pa.decimal128(38, 2)


def test_treat_all_columns_as_strings(spark, tmp_path):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": "1", "N": "00042"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, options={"treatAllColumnsAsStrings": "true"}, spark=spark)
    assert rows(s.table("S.T").target) == [{"ID": "1", "N": "00042"}]
