"""The two Delta engines side by side: the same input gives the same tables, cell by cell and type
by type; a table one engine wrote is read and merged into by the other; the engine contract
(idempotent commits, conflicts, properties, Change Data Feed, maintenance) holds on both.

Every other test marked ``engines`` (apply, SCD2 history, maintenance, crashes, streams) runs once
per engine too; this file compares them with each other.
"""

from __future__ import annotations

import datetime as dt
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import types as T

import lakecdc
from lakecdc.errors import CommitConflict, ConfigError
from lakecdc.lake.refs import catalog_ref
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.merge.delta_spark import DeltaSparkEngine
from lakecdc.merge.engine import Engine
from lakecdc.merge.plan import MergePlan
from lakecdc.merge.source import BatchSource
from lakecdc.spark.compat import delta_spark_available
from tests.ogg_render import render_ogg_json
from tests.oracle import Oracle
from tests.test_crash import TABLES, wave
from tests.test_property import assert_targets_match

pytestmark = [pytest.mark.spark, pytest.mark.both_engines]


@pytest.fixture
def both(spark):
    """Both engines on the test session (skips where Delta's classes are absent, or where the tests
    run on delta-rs only: LAKECDC_TEST_ENGINES=delta-rs)."""
    from tests.conftest import ENGINES

    if "delta-spark" not in ENGINES:
        pytest.skip("LAKECDC_TEST_ENGINES leaves delta-spark out")
    if not delta_spark_available(spark):
        import os

        from lakecdc.spark.jars import status

        if os.environ.get("LAKECDC_REQUIRE_ENGINES"):  # CI: both engines or red
            pytest.fail(status())
        pytest.skip(status())
    return {"delta-rs": DeltaRsEngine(), "delta-spark": DeltaSparkEngine(spark)}


def snapshot(spark, path: str) -> tuple[list[tuple[str, str]], list[tuple]]:
    """A table's columns with their Spark types, and its rows sorted, read by Spark through Delta."""
    df = spark.read.format("delta").load(path)
    cols = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    return cols, sorted((tuple(r) for r in df.collect()), key=repr)


def land(landing: Path, n: int) -> None:
    landing.mkdir(parents=True, exist_ok=True)
    (landing / f"wave-{n}.json").write_text(render_ogg_json(wave(n)))


def test_both_engines_implement_the_contract(both):
    """Nothing of the contract is missing on either engine."""
    for engine in both.values():
        assert isinstance(engine, Engine), engine.name


@pytest.mark.parametrize("scd", [1, 2], ids=["plain", "scd2"])
def test_same_input_gives_identical_tables(spark, both, tmp_path, scd):
    """Three waves (inserts, partial updates, key changes, deletes, re-inserts) applied by each
    engine: the tables are identical cell by cell and type by type, and equal the oracle."""
    results = {}
    for name in both:
        landing, target = tmp_path / name / "landing", tmp_path / name / "lake"
        for n in range(3):
            land(landing, n)
            summary = lakecdc.apply(landing, target=target, format="ogg-json", engine=name, spark=spark,
                                    stored_as_scd_type=scd, change_data_feed=True)
            assert summary.ok and summary.engine == name
        results[name] = {t: snapshot(spark, str(target / t)) for t in TABLES}
    for table in TABLES:
        rs_cols, rs_rows = results["delta-rs"][table]
        sp_cols, sp_rows = results["delta-spark"][table]
        assert sp_cols == rs_cols, table
        assert sp_rows == rs_rows, table
    if scd == 1:
        oracle = Oracle()
        for n in range(3):
            oracle.apply_run(wave(n))
        assert_targets_match(oracle, {t: str(tmp_path / "delta-spark" / "lake" / t) for t in TABLES}, "three waves")


@pytest.mark.parametrize("first,second", [("delta-rs", "delta-spark"), ("delta-spark", "delta-rs")])
def test_a_table_one_engine_wrote_is_merged_into_by_the_other(spark, both, tmp_path, first, second):
    """Waves 0-1 by one engine, waves 2-3 by the other, a re-run by the first: the oracle's tables."""
    landing, target = tmp_path / "landing", tmp_path / "lake"
    oracle = Oracle()
    for n, engine in ((0, first), (1, first), (2, second), (3, second)):
        land(landing, n)
        oracle.apply_run(wave(n))
        assert lakecdc.apply(landing, target=target, format="ogg-json", engine=engine, spark=spark).ok
    again = lakecdc.apply(landing, target=target, format="ogg-json", engine=first, spark=spark)
    assert again.ok and not again.tables
    assert_targets_match(oracle, {t: str(target / t) for t in TABLES}, f"{first} then {second}")
    # each engine reads what the other wrote, the same way
    for table in TABLES:
        path = str(target / table)
        a = both["delta-rs"].read(spark, path).orderBy("ID").collect()
        b = both["delta-spark"].read(spark, path).orderBy("ID").collect()
        assert a == b


SCHEMA = T.StructType([T.StructField("ID", T.LongType()), T.StructField("V", T.StringType()),
                       T.StructField("_cdc_seq", T.StringType()), T.StructField("_cdc_op", T.StringType()),
                       T.StructField("_cdc_op_ts", T.TimestampType())])


def batch(rows: list[tuple[int, str | None, str, str]]) -> BatchSource:
    """Net actions (key, value, seq, action) as the consolidation hands them to an engine."""
    table = pa.table({
        "k0": pa.array([r[0] for r in rows], pa.int64()), "c0": pa.array([r[0] for r in rows], pa.int64()),
        "u0": pa.array([True] * len(rows)), "c1": pa.array([r[1] for r in rows], pa.string()),
        "u1": pa.array([r[1] is not None for r in rows]), "_action": pa.array([r[3] for r in rows]),
        "_cdc_seq": pa.array([r[2] for r in rows]), "_cdc_op": pa.array(["U"] * len(rows)),
        "_cdc_op_ts": pa.array([dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)] * len(rows), pa.timestamp("us", tz="UTC")),
    })
    return BatchSource.from_arrow(table, n_columns=2, n_keys=1)


def plan(path: str, version: int) -> MergePlan:
    return MergePlan(table="S.T", path=path, columns=("ID", "V"), keys=("ID",), version=version,
                     metadata={"lakecdc.run_id": str(version)})


def test_merge_rules_and_idempotent_commits_on_both(spark, both, tmp_path):
    """The seq guard, missing columns and deletes give the same table on both engines; the same run
    id merged again commits nothing; appends are once-only; the last txn version reads back."""
    for name, engine in both.items():
        path = str(tmp_path / name)
        engine.create(path, SCHEMA, name="S.T", properties={"delta.appendOnly": "false"})
        assert engine.exists(path) and not engine.exists(str(tmp_path / "nothing"))
        first = engine.merge(plan(path, 1), batch([(1, "a", "5", "upsert"), (2, "b", "5", "upsert"), (3, "c", "5", "upsert")]))
        assert (first.inserted, first.updated, first.deleted) == (3, 0, 0), name
        second = engine.merge(plan(path, 2), batch([(1, None, "6", "upsert"), (2, "old", "4", "upsert"),
                                                    (3, None, "6", "delete"), (4, "new", "6", "upsert")]))
        assert (second.inserted, second.updated, second.deleted) == (1, 1, 1), name
        version = engine.version(path)
        again = engine.merge(plan(path, 2), batch([(9, "replayed", "9", "upsert")]))
        assert engine.version(path) == version, f"{name}: a replayed run id committed"
        assert again.inserted == 0
        assert engine.committed_version(path) == 2
        got = sorted(r["ID"] for r in engine.read_arrow(path, ["ID", "V"]).to_pylist())
        assert got == [1, 2, 4], name
        rows = {r["ID"]: r["V"] for r in engine.read_arrow(path, ["ID", "V"]).to_pylist()}
        assert rows == {1: "a", 2: "b", 4: "new"}, name  # missing V kept, older seq refused
        side = str(tmp_path / f"{name}-side")
        data = pa.table({"x": [1, 2]})
        engine.append(side, data, version=7)
        engine.append(side, data, version=7)
        assert engine.read_arrow(side).num_rows == 2, f"{name}: an append ran twice"
        assert engine.committed_version(side) == 7
        assert engine.delete_where(side, "x = 1") == 1
    assert snapshot(spark, str(tmp_path / "delta-rs")) == snapshot(spark, str(tmp_path / "delta-spark"))


def test_the_last_committed_version_is_found_behind_other_writers_commits(both, tmp_path, monkeypatch):
    """A run's version committed before several commits of other writers (maintenance, a user's
    job) is still found on both engines (delta-spark reads the newest commits first, then further)."""
    import lakecdc.merge.delta_spark as delta_spark

    monkeypatch.setattr(delta_spark, "RECENT_HISTORY", 2)
    data = pa.table({"x": [1]})
    for name, engine in both.items():
        path = str(tmp_path / name)
        engine.append(path, data, version=5)
        for n in range(3):
            engine.append(path, data, version=n, app_id="another-writer")
        assert engine.committed_version(path) == 5, name
        assert engine.committed_version(path, "another-writer") == 2, name


def test_whether_a_table_reaches_a_seq_is_answered_alike_on_both(both, tmp_path):
    """``reaches``: does the table hold a seq at or above a value (how a run decides whether to read
    the stored keys). The same answers on both engines: none for a missing or empty table, at the
    largest seq yes, above it no, also with seqs in several files and a NULL."""
    schema = pa.schema([("ID", pa.int64()), ("_cdc_seq", pa.string())])
    for name, engine in both.items():
        path = str(tmp_path / name)
        assert engine.reaches(path, "_cdc_seq", "") is False  # no table
        for version, seqs in enumerate([["0001|a", "0003|b"], ["0002|c", None], ["0005|d"]], start=1):
            engine.append(path, pa.table({"ID": list(range(len(seqs))), "_cdc_seq": seqs}, schema=schema),
                          version=version, app_id=f"reaches-{uuid.uuid4().hex}")
        answers = [engine.reaches(path, "_cdc_seq", v) for v in ("", "0003|b", "0005|d", "0005|e", "0006")]
        assert answers == [True, True, True, False, False], name


def test_properties_schema_evolution_and_two_source_rows_for_one_key(both, tmp_path):
    """Table properties and added columns read back the same; a batch with two rows for one key
    commits nothing on either engine."""
    for name, engine in both.items():
        path = str(tmp_path / name)
        engine.create(path, SCHEMA, name="S.T")
        engine.set_properties(path, {"delta.enableChangeDataFeed": "true", "lakecdc.sequence_by": "x"})
        props = engine.properties(path)
        assert props["delta.enableChangeDataFeed"] == "true" and props["lakecdc.sequence_by"] == "x", name
        engine.add_columns(path, T.StructType([T.StructField("N", T.DecimalType(20, 2)),
                                               T.StructField("tags", T.ArrayType(T.StringType()))]))
        assert [f.name for f in engine.schema(path).fields][-2:] == ["N", "tags"], name
        assert engine.schema(path)["N"].dataType == T.DecimalType(20, 2)
        engine.merge(plan(path, 2), batch([(1, "a", "1", "upsert")]))
        before = engine.version(path)
        with pytest.raises(Exception) as info:  # noqa: PT011 - each engine's own error
            engine.merge(plan(path, 3), batch([(1, "x", "9", "upsert"), (1, "y", "9", "upsert")]))
        assert not isinstance(info.value, CommitConflict), name
        assert engine.version(path) == before, f"{name}: a refused merge committed"


def test_change_data_feed_is_the_same_on_both(spark, both, tmp_path):
    """With Change Data Feed on, both engines record the same changes per key (read by Spark)."""
    feeds = {}
    for name in both:
        landing, target = tmp_path / name / "landing", tmp_path / name / "lake"
        for n in range(2):
            land(landing, n)
            assert lakecdc.apply(landing, target=target, format="ogg-json", engine=name, spark=spark,
                                 change_data_feed=True).ok
        df = (spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 0)
              .load(str(target / "S.A")))
        feeds[name] = sorted((r["ID"], r["V"], r["_change_type"]) for r in df.collect()
                             if r["_change_type"] != "update_preimage")
    assert feeds["delta-rs"] == feeds["delta-spark"]
    assert ("delete" in {c for _, _, c in feeds["delta-spark"]})


def test_maintenance_on_both(spark, both, tmp_path):
    """Compaction, Z-order, a vacuum dry run (the engines' default: nothing deleted) and a checkpoint
    leave the rows as they were on both engines."""
    for name, engine in both.items():
        path = str(tmp_path / name)
        engine.create(path, SCHEMA, name="S.T")
        for v in range(1, 5):
            engine.merge(plan(path, v), batch([(v, f"v{v}", str(v), "upsert")]))
        rows = snapshot(spark, path)
        files, _ = engine.files(path)
        assert files >= 4, name
        removed, added = engine.compact(path, target_size=None)
        assert removed >= 4 and added == 1, name
        engine.compact(path, target_size=None, zorder=("ID",))
        on_disk = {p for p in Path(path).glob("*.parquet")}
        would = engine.vacuum(path, retention_hours=0, enforce=False)
        assert would >= 4, f"{name}: the dry run lists the compacted files"
        assert {p for p in Path(path).glob("*.parquet")} == on_disk, f"{name}: a dry run deleted files"
        engine.checkpoint(path)
        assert list((Path(path) / "_delta_log").glob("*.checkpoint.parquet")), name
        assert snapshot(spark, path) == rows, name


def test_a_commit_that_loses_a_race_is_a_commit_conflict_on_both(spark, both, tmp_path):
    """Two merges into one table at once: whatever loses raises CommitConflict (retryable), on both
    engines, and the table holds the winners' rows."""
    for name, engine in both.items():
        path = str(tmp_path / name)
        engine.create(path, SCHEMA, name="S.T")
        engine.merge(plan(path, 1), batch([(k, "a", "1", "upsert") for k in range(20)]))
        errors: list[BaseException] = []

        def writer(v: int, engine=engine, path=path, errors=errors) -> None:
            try:
                engine.merge(plan(path, v), batch([(k, f"w{v}", str(v), "upsert") for k in range(20)]))
            except BaseException as exc:  # noqa: BLE001 - collected and checked below
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(v,)) for v in (2, 3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(isinstance(e, CommitConflict) for e in errors), f"{name}: {errors!r}"
        assert len(errors) <= 1, name
        values = {r["V"] for r in engine.read_arrow(path, ["V"]).to_pylist()}
        assert len(values) == 1 and values <= {"w2", "w3"}, f"{name}: {values}"


def test_catalog_tables(spark, both, tmp_path):
    """``table_names`` puts a source table in the session's catalog (managed, or external at a
    location): delta-spark creates and merges it there; delta-rs refuses it with what to do."""
    landing = tmp_path / "landing"
    for n in range(2):
        land(landing, n)
    db = f"lakecdc_test_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE DATABASE {db} LOCATION '{tmp_path / 'warehouse'}'")
    external = tmp_path / "external" / "s_b"
    summary = lakecdc.apply(landing, target=tmp_path / "lake", format="ogg-json", engine="delta-spark", spark=spark,
                            table_names={"S.A": f"{db}.s_a", "S.B": (f"{db}.s_b", str(external))})
    assert summary.ok, [(t.source_table, t.error) for t in summary.tables]
    oracle = Oracle()
    for n in range(2):
        oracle.apply_run(wave(n))
    a = spark.table(f"{db}.s_a")
    assert (external / "_delta_log").is_dir()
    detail = spark.sql(f"DESCRIBE DETAIL {db}.s_b").first()
    assert detail["format"] == "delta" and Path(detail["location"].removeprefix("file:")) == external
    managed = spark.sql(f"DESCRIBE DETAIL {db}.s_a").first()["location"].removeprefix("file:")
    assert not managed.startswith(str(tmp_path / "lake"))  # in the catalog's warehouse
    assert_targets_match(oracle, {"S.A": managed, "S.B": str(external), "S.C": str(tmp_path / "lake" / "S.C")},
                         "catalog run")
    want = {r["ID"] for r in spark.read.format("delta").load(str(external)).collect()}
    assert want and {r["ID"] for r in spark.table(f"{db}.s_b").collect()} == want
    assert a.count() == len(oracle.table("S.A"))
    with pytest.raises(ConfigError, match="catalog table"):
        both["delta-rs"].exists(catalog_ref(f"{db}.s_a"))
    spark.sql(f"DROP DATABASE {db} CASCADE")


def test_column_names_delta_refuses_get_column_mapping(spark, both, tmp_path):
    """A source column named ``ORDER ID`` (Delta's engine refuses spaces without column mapping):
    delta-spark maps columns by name, at creation or when the column arrives later, and reads the
    rows back; delta-rs, which would read such a table's columns as NULLs, refuses it."""
    engine = both["delta-spark"]
    path = str(tmp_path / "t")
    schema = T.StructType([T.StructField("ID", T.LongType()), T.StructField("ORDER ID", T.StringType()),
                           *SCHEMA.fields[2:]])
    engine.create(path, schema, name="S.T")
    assert engine.properties(path)["delta.columnMapping.mode"] == "name"
    later = str(tmp_path / "later")
    engine.create(later, SCHEMA, name="S.T")
    engine.add_columns(later, T.StructType([T.StructField("a=b", T.IntegerType())]))
    assert "a=b" in engine.schema(later).fieldNames()
    table = pa.table({"ID": [1], "ORDER ID": ["x"], "_cdc_seq": ["1"], "_cdc_op": ["I"],
                      "_cdc_op_ts": pa.array([None], pa.timestamp("us", tz="UTC"))})
    engine.append(path, table, version=1)
    assert [tuple(r) for r in engine.read(spark, path).select("ID", "ORDER ID").collect()] == [(1, "x")]
    with pytest.raises(ConfigError, match="maps columns by name.*delta-spark"):
        both["delta-rs"].read_arrow(path, ["ID", "ORDER ID"])  # (deltalake 1.6 would read NULLs)
