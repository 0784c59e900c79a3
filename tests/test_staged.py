"""A large delta-rs batch is staged as Parquet by Spark and streamed into the merge
(lakecdc.merge.staged): the same tables and counts as a collected batch, nothing left behind."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import types as T

import lakecdc
from lakecdc.merge import staged
from tests.helpers import ogg, rows, write_jsonl

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


def test_staged_rows_read_back_as_collected_ones_whatever_their_time_or_calendar(spark, tmp_path):
    """Timestamps outside Parquet's INT96/nanosecond range and dates before the Gregorian switch
    come back from the staged files as Spark collects them, in Spark and as Arrow."""
    schema = T.StructType([
        T.StructField("k0", T.LongType()), T.StructField("_action", T.StringType()),
        T.StructField("ts", T.TimestampType()), T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("d", T.DateType()), T.StructField("n", T.DecimalType(20, 4)),
        T.StructField("b", T.BinaryType()), T.StructField("u0", T.BooleanType()),
    ])
    data = [
        (1, "upsert", dt.datetime(1, 1, 1, tzinfo=UTC), dt.datetime(1, 1, 1), dt.date(1, 1, 1),
         Decimal("-1.5000"), b"\x00\xff", True),
        (2, "delete", dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
         dt.datetime(9999, 12, 31, 23, 59, 59), dt.date(9999, 12, 31), Decimal("1234567890123456.7890"), b"", False),
        (3, "upsert", dt.datetime(1582, 10, 4, 12, tzinfo=UTC), dt.datetime(1582, 10, 4), dt.date(1582, 10, 4),
         None, None, None),
        (4, None, None, None, None, None, None, None),  # not applied: left out of the stream
    ]
    df = spark.createDataFrame(data, schema)
    back = staged.stage(df, str(tmp_path / "stage"))
    assert back.schema == df.schema
    assert back.toArrow().sort_by("k0").equals(df.toArrow().sort_by("k0"))
    streamed = staged.reader(str(tmp_path / "stage"), schema).read_all()
    collected = df.where("_action IS NOT NULL").toArrow()
    assert streamed.schema.equals(collected.schema)
    assert streamed.sort_by("k0").equals(collected.sort_by("k0"))


def test_runs_stage_only_when_large_local_and_delta_rs(spark, tmp_path, monkeypatch):
    staging = str(tmp_path / "_lakecdc" / "staging" / "run-1")
    monkeypatch.delenv("LAKECDC_STAGED_FOLD_BYTES", raising=False)
    assert staged.stage_root(spark, "delta-rs", staging, staged.STAGED_FOLD_BYTES - 1) is None
    assert staged.stage_root(spark, "delta-rs", staging, staged.STAGED_FOLD_BYTES) == f"{staging}/fold"
    assert staged.stage_root(spark, "delta-spark", staging, staged.STAGED_FOLD_BYTES) is None  # (merges from Spark)
    assert staged.stage_root(spark, "delta-rs", "s3://bucket/lake/_lakecdc/staging/run-1", 1 << 40) is None
    monkeypatch.setenv("LAKECDC_STAGED_FOLD_BYTES", "0")
    assert staged.stage_root(spark, "delta-rs", staging, 0) == f"{staging}/fold"
    monkeypatch.setenv("LAKECDC_STAGED_FOLD_BYTES", "-1")
    assert staged.stage_root(spark, "delta-rs", staging, 1 << 40) is None
    monkeypatch.setenv("LAKECDC_STAGED_FOLD_BYTES", "1G")
    with pytest.raises(lakecdc.ConfigError, match="LAKECDC_STAGED_FOLD_BYTES='1G'"):
        staged.stage_root(spark, "delta-rs", staging, 1)


def _batches() -> list[list[dict]]:
    """Three runs, each over two files: two tables' inserts; partial updates, a replayed copy across
    files, a delete; then a key change (whose replay works on collected rows) and a late update."""
    first = [
        *(ogg("S.T", "I", f"00:00:{i:02d}", i, after={"ID": i, "A": f"a{i}", "N": i}, keys=["ID"]) for i in range(1, 8)),
        ogg("S.U", "I", "00:00:01", 1, after={"K": "x", "V": 1.5}, keys=["K"]),
    ]
    second = [
        ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "A": "a2", "N": 2}, keys=["ID"]),  # a replayed copy
        ogg("S.T", "U", "00:00:10", 10, before={"ID": 1}, after={"ID": 1, "N": 10}, keys=["ID"]),
        ogg("S.T", "U", "00:00:11", 11, before={"ID": 3}, after={"ID": 3, "A": None}, keys=["ID"]),
        ogg("S.T", "D", "00:00:12", 12, before={"ID": 4, "A": "a4", "N": 4}, keys=["ID"]),
        ogg("S.U", "U", "00:00:12", 12, before={"K": "x"}, after={"K": "x", "V": 2.5}, keys=["K"]),
    ]
    third = [
        ogg("S.T", "U", "00:00:20", 20, before={"ID": 5}, after={"ID": 50, "A": "moved"}, keys=["ID"]),  # a key change
        ogg("S.T", "U", "00:00:21", 21, before={"ID": 6}, after={"ID": 6, "A": "a6b"}, keys=["ID"]),
        ogg("S.T", "U", "00:00:05", 5, before={"ID": 7}, after={"ID": 7, "A": "late"}, keys=["ID"]),  # late
    ]
    return [first, second, third]


def _apply_all(spark, tmp_path: Path, name: str) -> tuple[list[lakecdc.RunSummary], Path]:
    landing, target = tmp_path / name / "landing", tmp_path / name / "lake"
    out = []
    for n, batch in enumerate(_batches()):
        write_jsonl(landing / f"{n}a.json", batch[: len(batch) // 2])
        write_jsonl(landing / f"{n}b.json", batch[len(batch) // 2:])
        out.append(lakecdc.apply(landing, target, format="ogg-json", spark=spark, engine="delta-rs"))
    return out, target


def test_a_staged_batch_applies_as_a_collected_one(spark, tmp_path, monkeypatch):
    monkeypatch.setenv("LAKECDC_STAGED_FOLD_BYTES", "-1")
    collected, plain = _apply_all(spark, tmp_path, "collected")

    streamed: list[str] = []
    real_reader = staged.reader

    def spy(directory: str, schema: T.StructType) -> pa.RecordBatchReader:
        streamed.append(directory)
        assert Path(directory).is_dir()
        return real_reader(directory, schema)

    monkeypatch.setattr(staged, "reader", spy)
    monkeypatch.setenv("LAKECDC_STAGED_FOLD_BYTES", "0")
    staged_runs, target = _apply_all(spark, tmp_path, "staged")

    assert streamed, "no batch was streamed from staged files"
    assert all("/_lakecdc/staging/" in d for d in streamed)
    assert not list((target / "_lakecdc").glob("staging/*")), "the staged files stay after the run"
    for table in ("S.T", "S.U"):
        assert rows(target / table) == rows(plain / table)
    fields = ("events", "inserted", "updated", "deleted", "duplicate_or_late", "quarantined")
    for a, b in zip(collected, staged_runs):
        assert json.dumps(a.file_accounts, sort_keys=True, default=str).replace("collected", "staged") == json.dumps(
            b.file_accounts, sort_keys=True, default=str)
        for t in a.tables:
            assert [getattr(t, f) for f in fields] == [getattr(b.table(t.source_table), f) for f in fields]
            assert (t.last_seq, t.last_op_ts) == (b.table(t.source_table).last_seq, b.table(t.source_table).last_op_ts)
    assert rows(target / "S.T", "ID") == [
        {"ID": 1, "A": "a1", "N": 10}, {"ID": 2, "A": "a2", "N": 2}, {"ID": 3, "A": None, "N": 3},
        {"ID": 50, "A": "moved", "N": 5}, {"ID": 6, "A": "a6b", "N": 6}, {"ID": 7, "A": "a7", "N": 7},
    ]  # (sorted as text)


def test_the_one_pass_of_a_one_table_target_stages_too(spark, tmp_path, monkeypatch):
    """The fast path (one table, no profile) stages its batch, and gives up on a surprise (a new
    column) with nothing committed, then the ordinary path stages again."""
    monkeypatch.setenv("LAKECDC_STAGED_FOLD_BYTES", "0")
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": i, "N": i}, keys=["ID"]) for i in (1, 2, 3)])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark, engine="delta-rs")
    write_jsonl(landing / "2.json", [
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "N": 10}, keys=["ID"]),
        ogg("S.T", "D", "00:00:03", 3, before={"ID": 2, "N": 2}, keys=["ID"]),
    ])
    said: list[str] = []
    t = lakecdc.apply(landing, target, format="ogg-json", spark=spark, engine="delta-rs", progress=said.append).table("S.T")
    assert not any("fast path assumed" in m or "inferring" in m for m in said)  # (the one pass)
    assert (t.events, t.updated, t.deleted) == (2, 1, 1)
    write_jsonl(landing / "3.json", [
        ogg("S.T", "U", "00:00:04", 4, before={"ID": 3}, after={"ID": 3, "X": "x"}, keys=["ID"]),
    ])
    said.clear()
    t = lakecdc.apply(landing, target, format="ogg-json", spark=spark, engine="delta-rs", progress=said.append).table("S.T")
    assert any("fast path assumed" in m for m in said)
    assert t.updated == 1
    assert rows(target / "S.T", "ID") == [{"ID": 1, "N": 10, "X": None}, {"ID": 3, "N": 3, "X": "x"}]
    assert not list((target / "_lakecdc").glob("staging/*"))
