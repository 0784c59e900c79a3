"""The MERGE plan: its clauses, its SQL (parsed by Spark's own parser), the idempotent-commit
settings of delta-spark, and engine selection. The engines themselves: tests/test_engines.py."""

from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import types as T

from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.merge.delta_spark import TXN_APP_ID, TXN_VERSION, USER_METADATA, txn_confs
from lakecdc.merge.plan import MergePlan, quote, sql_literal
from lakecdc.merge.source import BatchSource
from lakecdc.spark.compat import delta_spark_available

PLAN = MergePlan(
    table="S.T", path="/lake/S.T", columns=("ID", "Odd `Name`", "N"), keys=("ID",), version=7,
    always_set=frozenset({2}), key_ranges=((3, 9),), truncate_below=None, metadata={"lakecdc.run_id": "7"},
)


def test_plan_clauses():
    assert PLAN.predicate() == "t.`ID` = s.k0 AND t.`ID` >= 3 AND t.`ID` <= 9"
    upd = PLAN.update_set()
    assert upd["`Odd ``Name```"] == "CASE WHEN s.u1 THEN s.c1 ELSE t.`Odd ``Name``` END"
    assert upd["`N`"] == "s.c2"                      # every source row sets N: no CASE needed
    assert "`ID`" not in upd                         # keys are matched, never updated
    assert PLAN.insert_values()["`ID`"] == "s.k0"
    assert PLAN.update_condition().endswith("t._cdc_seq < s._cdc_seq")
    assert PLAN.by_source_delete_condition() is None
    truncating = MergePlan(table="S.T", path="/p", columns=("ID",), keys=("ID",), version=1, truncate_below="x'y")
    assert truncating.by_source_delete_condition() == "t._cdc_seq < 'x''y'"


def test_sql_literals():
    assert sql_literal(None) == "NULL"
    assert sql_literal("O'Brien") == "'O''Brien'"
    assert sql_literal(decimal.Decimal("1.50")) == "1.50"
    assert sql_literal(True) == "TRUE"
    assert quote("a`b") == "`a``b`"


@pytest.mark.spark
def test_merge_sql_parses_with_sparks_own_parser(spark):
    for plan in (PLAN, MergePlan(table="S.T", path="/p", columns=("ID", "V"), keys=("ID",), version=1, truncate_below="5")):
        sql = plan.to_sql()
        parsed = spark._jsparkSession.sessionState().sqlParser().parsePlan(sql)
        assert parsed.getClass().getSimpleName() == "MergeIntoTable"
        assert parsed.matchedActions().size() == 2          # delete, update
        assert parsed.notMatchedActions().size() == 1       # insert
        assert parsed.notMatchedBySourceActions().size() == (1 if plan.truncate_below is not None else 0)
        assert "_cdc_seq" in parsed.toString()


@pytest.mark.spark
def test_delta_spark_detection_and_txn_confs_restore(spark, monkeypatch):
    """Delta is detected exactly when the session has its jars and extension; ``auto`` picks delta-rs
    on lakecdc's own session, delta-spark on another with Delta, LAKECDC_ENGINE over both; the txn
    confs are set inside the block and restored after it."""
    from lakecdc.merge.pick import auto_engine
    from lakecdc.spark.jars import session_conf

    has_delta = "spark.sql.extensions" in session_conf() or "Delta" in (spark.conf.get("spark.sql.extensions", "") or "")
    assert delta_spark_available(spark) is has_delta
    monkeypatch.delenv("LAKECDC_ENGINE", raising=False)
    embedded = spark.conf.get("spark.lakecdc.embedded", None) == "true"
    assert auto_engine(spark) == ("delta-spark" if has_delta and not embedded else "delta-rs")
    monkeypatch.setenv("LAKECDC_ENGINE", "delta-rs")
    assert auto_engine(spark) == "delta-rs"
    spark.conf.set(USER_METADATA, "before")
    with txn_confs(spark, "lakecdc", 42, {"lakecdc.run_id": "42"}):
        assert spark.conf.get(TXN_APP_ID) == "lakecdc"
        assert spark.conf.get(TXN_VERSION) == "42"
        assert '"lakecdc.run_id": "42"' in spark.conf.get(USER_METADATA)
    assert spark.conf.get(TXN_APP_ID, None) is None
    assert spark.conf.get(USER_METADATA) == "before"
    spark.conf.unset(USER_METADATA)


@pytest.mark.spark
def test_txn_confs_of_two_threads_leave_the_session_as_it_was(spark):
    """Two tables committing at once (parallel_tables): the second block waits for the first and
    restores what was there before both, so no txnAppId is left behind on the user's session (a
    later MERGE of theirs with it set would be skipped by Delta as a replay)."""
    import threading

    inside, release = threading.Event(), threading.Event()

    def first() -> None:
        with txn_confs(spark, "a", 1, {}):
            inside.set()
            release.wait(30)

    def second() -> None:
        with txn_confs(spark, "b", 2, {}):
            pass

    t1 = threading.Thread(target=first)
    t1.start()
    assert inside.wait(30)
    t2 = threading.Thread(target=second)
    t2.start()
    t2.join(0.5)
    release.set()
    t1.join(30)
    t2.join(30)
    assert spark.conf.get(TXN_APP_ID, None) is None
    assert spark.conf.get(TXN_VERSION, None) is None


def _source(rows: list[dict]) -> BatchSource:
    schema = pa.schema([("k0", pa.int64()), ("c0", pa.int64()), ("u0", pa.bool_()), ("c1", pa.string()),
                        ("u1", pa.bool_()), ("_action", pa.string()), ("_cdc_seq", pa.string()),
                        ("_cdc_op", pa.string()), ("_cdc_op_ts", pa.timestamp("us", tz="UTC")),
                        ("_events", pa.int64()), ("_dups", pa.int64())])
    return BatchSource.from_arrow(pa.Table.from_pylist(rows, schema=schema), n_columns=2, n_keys=1)


def test_delta_rs_merge_behaviour(tmp_path):
    """Missing columns keep the target, the seq guard blocks older changes, a failure commits nothing."""
    path = str(tmp_path / "t")
    engine = DeltaRsEngine()
    engine.create(path, T.StructType([T.StructField("ID", T.LongType()), T.StructField("V", T.StringType()),
                                      T.StructField("_cdc_seq", T.StringType()), T.StructField("_cdc_op", T.StringType()),
                                      T.StructField("_cdc_op_ts", T.TimestampType())]))
    write_deltalake(path, pa.table({"ID": [1, 2, 3], "V": ["a", "b", "c"], "_cdc_seq": ["5", "5", "5"],
                                    "_cdc_op": ["I"] * 3, "_cdc_op_ts": pa.array([None] * 3, pa.timestamp("us", tz="UTC"))}),
                    mode="append")
    plan = MergePlan(table="S.T", path=path, columns=("ID", "V"), keys=("ID",), version=3)
    src = _source([
        {"k0": 1, "c0": 1, "u0": True, "c1": None, "u1": False, "_action": "upsert", "_cdc_seq": "6", "_cdc_op": "U", "_events": 1, "_dups": 0},
        {"k0": 2, "c0": 2, "u0": True, "c1": "old", "u1": True, "_action": "upsert", "_cdc_seq": "4", "_cdc_op": "U", "_events": 1, "_dups": 0},
        {"k0": 3, "c0": None, "u0": False, "c1": None, "u1": False, "_action": "delete", "_cdc_seq": "6", "_cdc_op": "D", "_events": 1, "_dups": 0},
        {"k0": 4, "c0": 4, "u0": True, "c1": "new", "u1": True, "_action": "upsert", "_cdc_seq": "6", "_cdc_op": "I", "_events": 1, "_dups": 0},
    ])
    result = engine.merge(plan, src)
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)
    got = sorted(DeltaTable(path).to_pyarrow_table(columns=["ID", "V"]).to_pylist(), key=lambda r: r["ID"])
    assert got == [{"ID": 1, "V": "a"}, {"ID": 2, "V": "b"}, {"ID": 4, "V": "new"}]
    assert engine.committed_version(path) == 3
    before = DeltaTable(path).version()
    bad = _source([{"k0": 1, "c0": 1, "u0": True, "c1": "x", "u1": True, "_action": "upsert", "_cdc_seq": "9", "_cdc_op": "U", "_events": 1, "_dups": 0}] * 2)
    with pytest.raises(Exception):  # noqa: B017 - engine-specific error type; two source rows for one target row: both engines refuse
        engine.merge(MergePlan(table="S.T", path=path, columns=("ID", "V"), keys=("ID",), version=4), bad)
    assert DeltaTable(path).version() == before
