"""OSS Spark's AUTO CDC as a bench contender (bench/autocdc.py): it applies the whole-image
workload right, and the pipelines' default target is refused as the probe records.

The runs need the newest PySpark (pyspark.pipelines, 4.2 or later) in the interpreter
``bench.autocdc.newest_python()`` names, and the jar of Spark's in-memory row-level test catalog
(fetched once from Maven Central); without them the tests that run pipelines are skipped with
the reason.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import autocdc  # noqa: E402
from bench.generate import SOURCE_SCHEMA, generate  # noqa: E402
from bench.run import check_arrow  # noqa: E402

EVENTS, KEYS = 2_000, 400


@pytest.fixture(scope="module")
def newest() -> None:
    reason = autocdc.unavailable()
    if reason:
        pytest.skip(f"AUTO CDC cannot run here: {reason}")


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return generate(tmp_path_factory.mktemp("autocdc") / "workload", EVENTS, KEYS, seed=7)


def test_source_schema_matches_the_workload() -> None:
    """The streaming source reads every column of the workload's table, in its order."""
    assert [part.split(" ")[0] for part in autocdc._IMAGE.split(", ")] == SOURCE_SCHEMA.names


def test_read_result_drops_bookkeeping_columns(tmp_path: Path) -> None:
    """read_result returns the table's own columns: AUTO CDC's ``__spark_autocdc_*`` column goes."""
    import pyarrow.parquet as pq

    meta = pa.array([{"deleteSequence": None, "upsertSequence": 3}])
    pq.write_table(pa.table({"ID": [1], "NOTE": ["x"], "__spark_autocdc_metadata": meta}), tmp_path / "r.parquet")
    assert autocdc.read_result(tmp_path / "r.parquet").column_names == ["ID", "NOTE"]


def test_preload_becomes_debezium_inserts_before_the_events(workload: Any, tmp_path: Path) -> None:
    """The GoldenGate preload converts to one Debezium insert per key, each sequenced before
    every event of the workload (its SCN below the events' lowest)."""
    from bench.debezium import build_json

    preload = autocdc.debezium_preload(workload.preload_json, tmp_path / "converted")
    envelopes = [json.loads(line) for line in preload.read_text().splitlines()]
    assert len(envelopes) == KEYS
    assert {e["op"] for e in envelopes} == {"c"}
    assert sorted(e["after"]["ID"] for e in envelopes) == list(range(1, KEYS + 1))
    build_json(workload.events_json, tmp_path)
    first_event = min(int(json.loads(line)["source"]["scn"]) for line in (tmp_path / "events.json").open())
    assert max(int(e["source"]["scn"]) for e in envelopes) < first_event


@pytest.mark.slow
def test_autocdc_applies_whole_images_right(newest: None, workload: Any, tmp_path: Path) -> None:
    """AUTO CDC (SCD1, keys ID, sequenced by the SCN, op 'd' as deletes) applied to the Debezium
    JSON of a 2,000-event workload over a preloaded table leaves exactly the source's table:
    no row missing, extra or differing; the timing of its runs is recorded."""
    from bench.debezium import build_json

    build_json(workload.events_json, tmp_path)
    result = autocdc.run(tmp_path / "events.json", tmp_path / "target", workload.preload_json)
    checked = check_arrow(autocdc.read_result(result), workload.expected_parquet)
    assert (checked.wrong, checked.notes) == (0, [])
    assert checked.actual_rows == checked.expected_rows == workload.meta["expected_rows"]
    timing = autocdc.read_timing(result)
    assert timing.rows == checked.expected_rows and timing.apply > 0 and timing.preload > 0


@pytest.mark.slow
def test_default_pipeline_target_is_refused(newest: None, tmp_path: Path) -> None:
    """In the session catalog, the pipelines' default, the target is a Parquet table, which has no
    row-level operations: the run fails with AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE."""
    done = autocdc._in_newest("attempt", "session", str(tmp_path), capture=True)
    outcome = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    assert outcome["ok"] is False
    assert "AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE" in outcome["error"] and "parquet" in outcome["error"]
