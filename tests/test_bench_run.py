"""The merge benchmark (bench/run.py) gives each contender a process and JVM of its own, a fresh
one per round, the contenders taking turns, and reports their runs together as one run; its
notebooks (bench/peers.py) write what their text says: the correct one no wrong row on partial or
whole images, the typical one none on whole images."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the bench package sits beside tests/, not installed
    sys.path.insert(0, str(REPO))

from bench import peers  # noqa: E402
from bench import run as bench_run  # noqa: E402
from tests.test_bench_fold_floor import FULL, _event  # noqa: E402

pytestmark = pytest.mark.spark


def test_each_contender_runs_in_a_process_of_its_own_every_round(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "bench.run", "--events", "2000", "--keys", "500", "--workdir", str(tmp_path),
            "--only", "floor,peer", "--repeat", "2", "--warmup", "0"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=True)
    out = done.stdout
    # turns: floor, peer, floor, peer, each announced, then run by a child of its own
    rounds = re.findall(r"round (\d)/2: (\w+) in a process of its own", out)
    assert rounds == [("1", "floor"), ("1", "peer"), ("2", "floor"), ("2", "peer")]
    # one JVM per child of the peer (and one line in the report); the floor's children start none
    assert out.count("Spark start-up (fresh JVM)") == 3
    assert out.count("No Spark session: no contender measured here needs one.") == 2
    assert len(re.findall(r"(floor|peer) run 1/1 \(timed\)", out)) == 4
    assert "a Python process and Spark JVM of its own, a fresh one per round" in out
    assert "In the first with a JVM: Spark start-up" in out  # (the peer's child's, not the floor's)
    table = out[out.rindex("| contender |"):]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| ") and "---" not in line}
    assert set(rows) == {"contender", "floor", "peer"}
    assert "1.00" in rows["peer"] and "of 891" in rows["peer"]  # the peer's wrong rows, checked in its child
    # each child left its outcome for the parent: the last round's
    child = bench_run.Measured.from_json(json.loads((tmp_path / "outcome-run-peer.json").read_text()))
    (peer,) = child.outcomes
    assert peer.contender.name == "peer" and len(peer.seconds) == 1 and peer.checks[0].expected_rows == 891


def test_runs_of_several_processes_merge_into_one_outcome() -> None:
    peer = bench_run.CONTENDERS["peer"]
    merged = bench_run.Outcome(peer, 0)
    check = bench_run.Check(10, 10, 0, 0, 1, {"X": 1}, [])
    for seconds, peak in (([9.0, 3.0], 5), ([8.0, 4.0], 7)):
        child = bench_run.Outcome(peer, 1, seconds, [2 * s for s in seconds], peak, peak - 1, [check])
        merged.add_timed(bench_run.Outcome.from_json(json.loads(json.dumps(child.to_json()))))
    assert merged.seconds == [3.0, 4.0] and merged.cpu == [6.0, 8.0]  # the warm-up runs left out
    assert merged.first == 9.0 and merged.median == 3.5
    assert (merged.peak, merged.above_baseline, len(merged.checks)) == (7, 6, 2)
    assert merged.worst == check


def test_a_contender_that_times_itself_reports_its_own_seconds_and_only_on_its_images(tmp_path: Path, monkeypatch) -> None:
    """A contender returning :class:`Ran` (AUTO CDC: its own interpreter and JVM) is reported with
    the seconds it timed, not the call's wall time, its CPU as n/a, its Arrow table checked; a
    contender for whole images only is left out of a partial batch."""
    from bench.generate import generate

    workload = generate(tmp_path / "w", 300, 100, seed=3)
    expected = pq.read_table(workload.expected_parquet)

    def slow_but_timed(spark, batch, target):  # noqa: ANN001, ANN202
        time.sleep(0.3)
        return bench_run.Ran(expected, 0.01)

    own = bench_run.Contender("own", "times itself", slow_but_timed, spark=False, engine=None, images=("whole",))
    whole = bench_run.Batch(workload, "whole", workload.events_json)
    (outcome,) = bench_run.measure(None, whole, [own], tmp_path / "scratch", warmup=0, repeat=1)
    assert outcome.seconds == [0.01] and outcome.worst.wrong == 0 and outcome.worst.expected_rows == expected.num_rows
    row = bench_run.table_markdown(workload, [outcome]).splitlines()[-1].split("|")
    assert row[1].strip() == "own" and row[2].strip() == "0.01" and row[6].strip() == "n/a"
    assert bench_run.measure(None, bench_run.Batch(workload, "partial", workload.events_json), [own], tmp_path / "s2", 0, 1) == []
    assert bench_run.CONTENDERS["autocdc"].images == ("whole",)


def test_the_correct_notebook_keeps_each_columns_newest_value_carried_since_the_last_delete(spark, tmp_path: Path) -> None:
    """Per key, the correct fold's newest op, and per column whether the batch sets it and to what:
    a partial update sets only what it carries (a carried NULL too), a delete empties every column,
    so that an insert after it that lacks a column leaves that column NULL, not the old value."""
    lines = [
        _event("U", 3, FULL, {"ID": 1, "NOTE": None}),  # written out of order: the fold orders by op_ts, pos
        _event("I", 1, None, FULL),
        _event("U", 2, FULL, {"ID": 1, "STATUS": "SHIPPED"}),
        _event("U", 4, {**FULL, "ID": 2}, {"ID": 2, "QUANTITY": 5}),
        _event("D", 5, {**FULL, "ID": 2}, None),
        _event("I", 6, None, {k: v for k, v in FULL.items() if k != "NOTE"} | {"ID": 2, "STATUS": "AGAIN"}),
        _event("U", 7, {**FULL, "ID": 3}, {"ID": 3, "AMOUNT": 9.25}),
        _event("D", 8, {**FULL, "ID": 3}, None),
    ]
    events = tmp_path / "events.json"
    events.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rows = {r["ID"]: r for r in peers.correct_rows(spark, events).toArrow().to_pylist()}
    assert set(rows) == {1, 2, 3}
    one, two, three = rows[1], rows[2], rows[3]
    assert one["_op"] == "U" and one["STATUS"] == "SHIPPED" and one["QUANTITY"] == 2 and one["p_STATUS"]
    assert one["NOTE"] is None and one["p_NOTE"]  # a carried NULL is set
    assert str(one["UNIT_PRICE"]) == "1.50" and one["p_UNIT_PRICE"]  # typed as the source: decimal(10,2)
    assert two["_op"] == "I" and two["STATUS"] == "AGAIN" and two["QUANTITY"] == 2  # the reinsert's, not the update's
    assert two["NOTE"] is None and two["p_NOTE"]  # emptied by the delete, not carried since
    assert three["_op"] == "D" and all(three[f"p_{c}"] for c in peers.COLUMNS)
    typical = {r["ID"]: r for r in peers.latest_per_key(spark, events).to_pylist()}
    assert typical[1]["CUSTOMER_ID"] is None and typical[1]["STATUS"] is None  # the peer loses uncarried columns


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bench_run.Workload]:
    workdir = tmp_path_factory.mktemp("bench")
    return workdir, bench_run.ensure_workload(workdir, 2_000, 500, 42)


@pytest.mark.parametrize("images", peers.IMAGES)
def test_the_correct_notebooks_write_no_wrong_row_and_the_table_shows_their_ratio(
    spark, workload: tuple[Path, bench_run.Workload], images: str, tmp_path: Path
) -> None:
    """Every contender's table checked against the simulated source: the correct notebook (both
    engines) gets every row right on partial and on whole images, the typical notebook only on
    whole ones; the printed table has a "vs correct" ratio, 1.00 for the correct notebook itself."""
    from lakecdc.spark.compat import delta_spark_available

    workdir, generated = workload
    batch = bench_run.ensure_batch(generated, images, workdir, 42)
    assert batch.events.exists() and batch.preload_events.exists()
    names = ["peer", "correct", "lakecdc"]
    if delta_spark_available(spark):
        names.append("correct-delta-spark")
    contenders = [bench_run.CONTENDERS[n] for n in names]
    outcomes = {o.contender.name: o for o in bench_run.measure(spark, batch, contenders, tmp_path, 0, 1)}
    wrong = {name: o.worst.wrong for name, o in outcomes.items() if o.worst is not None}
    assert set(wrong) == set(names)
    assert all(wrong[n] == 0 for n in names if n != "peer"), wrong
    assert (wrong["peer"] == 0) == (images == "whole"), wrong  # the peer is right on whole images only
    table = bench_run.table_markdown(generated, list(outcomes.values()))
    header, _rule, *rows = table.splitlines()
    columns = [c.strip() for c in header.strip("|").split("|")]
    cells = {row.split("|")[1].strip(): [c.strip() for c in row.strip("|").split("|")] for row in rows}
    vs_correct = columns.index("vs correct")
    assert cells["correct"][vs_correct] == "1.00" and float(cells["peer"][vs_correct]) > 0
    assert float(cells["lakecdc"][vs_correct]) > 0
    assert bench_run.heading_of(batch) == f"2,000 events over 500 keys, {images} images"
