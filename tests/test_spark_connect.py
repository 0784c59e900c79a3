"""lakecdc on a Spark Connect session: ``apply`` (both engines) and ``stream`` against a local Spark
Connect server the tests start (:mod:`tests.connect_server`), with the tables equal to the oracle's.

A Spark Connect session has no JVM handle: any use of py4j (``_jvm``, ``sparkContext``, ``_jdf``)
on the way fails there, so these runs working is the proof that the data path has none. The
source guard below lists the few places that may use py4j, each on a classic session only.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import lakecdc
from lakecdc.spark.compat import delta_spark_available, is_spark_connect
from tests.ogg_render import render_ogg_json
from tests.oracle import Oracle
from tests.test_crash import TABLES, wave
from tests.test_property import assert_targets_match

PACKAGE = Path(lakecdc.__file__).parent
PY4J = re.compile(r"_jvm\b|sparkContext\b|_jdf\b|_jsparkSession\b|_jsc\b|_jconf\b|\.rdd\b|_gateway\b")

#: The only places lakecdc may touch py4j: the embedded session's own start-up, and checks that
#: run on a classic session only (each behind ``is_spark_connect``), with how many lines do.
PY4J_ALLOWED = {
    "spark/session.py": 1,  # the embedded session's log level, right after lakecdc started it
    "spark/compat.py": 4,  # jvm(): the JVM of a classic session; Delta's classes, the core count
    # a checkpoint through DeltaLog, and the files a finished MERGE read and pruned (its command's
    # metrics), on a classic session only
    "merge/delta_spark.py": 2,
    "run/warmup.py": 1,  # the JVM process of the session that writes the class archive
}


def _engine_or_skip(spark, engine: str) -> str:
    if engine == "delta-spark" and not delta_spark_available(spark):
        from lakecdc.spark.jars import status

        pytest.skip(f"the Spark Connect server has no Delta Lake: {status()}")
    return engine


def test_only_the_listed_places_use_py4j():
    """No module of lakecdc touches py4j but the listed ones, each as often as listed: a new use
    in the data path would fail on Spark Connect."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        code = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
        hits = sum(1 for line in code if PY4J.search(line.split("#")[0]))
        if hits:
            found[path.relative_to(PACKAGE).as_posix()] = hits
    assert found == PY4J_ALLOWED


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.both_engines
@pytest.mark.parametrize("engine", ["delta-spark", "delta-rs"])
def test_apply_on_spark_connect_equals_the_oracle(connect_spark, tmp_path, engine):
    """Two runs of GoldenGate JSON (inserts, partial updates, a key change, deletes, a re-insert)
    applied through a Spark Connect session build the oracle's tables with either engine; a third
    run finds nothing new."""
    spark = connect_spark
    assert is_spark_connect(spark)
    engine = _engine_or_skip(spark, engine)
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    oracle = Oracle()
    targets = {t: str(lake / t) for t in TABLES}
    for n in range(2):
        (landing / f"wave-{n}.json").write_text(render_ogg_json(wave(n)))
        oracle.apply_run(wave(n))
        summary = lakecdc.apply(str(landing), str(lake), format="ogg-json", spark=spark, engine=engine)
        assert summary.ok, summary.render()
        assert summary.engine == engine
        assert sorted(t.source_table for t in summary.tables) == list(TABLES)
        assert_targets_match(oracle, targets, f"run {n + 1} on Spark Connect ({engine})")
    again = lakecdc.apply(str(landing), str(lake), format="ogg-json", spark=spark, engine=engine)
    assert again.runs == ()
    assert_targets_match(oracle, targets, f"a run with nothing new on Spark Connect ({engine})")


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.both_engines
def test_stream_on_spark_connect_applies_every_file_once(connect_spark, tmp_path):
    """An available-now stream on a Spark Connect session (its batches run in the server's Python
    process, with the engine ``auto`` picks there) applies both files; the client's handle learns
    the batch (``on_batch``, ``total``) and the tables equal the oracle's. A second start finds
    nothing new."""
    spark = connect_spark
    assert is_spark_connect(spark)
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    landing.mkdir()
    oracle = Oracle()
    for n in range(2):
        (landing / f"wave-{n}.json").write_text(render_ogg_json(wave(n)))
        oracle.apply_run(wave(n))
    seen: list[lakecdc.StreamBatch] = []
    handle = lakecdc.stream(str(landing), str(lake), format="ogg-json", spark=spark, on_batch=seen.append)
    handle.await_termination()
    assert handle.batches == 1 and len(seen) == 1
    assert [Path(f).name for f in seen[0].files] == ["wave-0.json", "wave-1.json"]
    want_engine = "delta-spark" if delta_spark_available(spark) else "delta-rs"
    assert handle.total.ok and handle.total.engine == want_engine
    assert {t.source_table: t.events for t in handle.total.tables} == {t: 10 for t in TABLES}
    assert_targets_match(oracle, {t: str(lake / t) for t in TABLES}, "an available-now stream on Spark Connect")
    assert not (lake / "_lakecdc" / "stream-batches").exists() or not any((lake / "_lakecdc" / "stream-batches").iterdir())
    again = lakecdc.stream(str(landing), str(lake), format="ogg-json", spark=spark)
    again.await_termination()
    assert again.batches == 0


@pytest.mark.spark
@pytest.mark.slow
def test_read_changes_and_to_rows_on_spark_connect(connect_spark, tmp_path):
    """``read_changes`` decodes GoldenGate JSON through a Spark Connect session into one event per
    message, none bad, and ``to_rows`` splits the key change into a delete and an insert."""
    spark = connect_spark
    landing = tmp_path / "landing"
    landing.mkdir()
    events = wave(0) + wave(1)
    (landing / "waves.json").write_text(render_ogg_json(events))
    decoded = lakecdc.read_changes(str(landing), format="ogg-json", spark=spark)
    assert is_spark_connect(decoded.sparkSession)
    counts = {(r["table"], r["op"]): r["count"] for r in decoded.groupBy("table", "op").count().collect()}
    want: dict[tuple[str, str], int] = {}
    for e in events:
        want[(e.table, e.op)] = want.get((e.table, e.op), 0) + 1
    assert counts == want
    assert decoded.where("_error IS NOT NULL").count() == 0
    rows = lakecdc.to_rows(decoded, pk_update="delete-insert")
    per_op = {r["op"]: r["count"] for r in rows.where("table = 'S.A'").groupBy("op").count().collect()}
    assert per_op == {"I": want[("S.A", "I")] + 1, "U": want[("S.A", "U")] - 1, "D": want[("S.A", "D")] + 1}
