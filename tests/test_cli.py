"""The command line, run as a user runs it (a fresh process, its own Spark)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ogg, rows, write_jsonl

pytestmark = pytest.mark.spark
ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lakecdc", *args], capture_output=True, text=True, cwd=ROOT)


def test_help_teaches():
    out = run_cli("apply", "--help")
    assert out.returncode == 0
    for needle in ("--format", "--key TABLE=COL", "--summary-json", "examples:", "flatten=true", "_quarantine",
                   "--column-list", "--except-column-list", "--ignore-truncates", "--tombstone-retention"):
        assert needle in out.stdout


def test_bad_arguments_exit_2_with_a_message(tmp_path):
    out = run_cli("apply", "--format", "ogg-json", "--input", str(tmp_path / "nope"), "--target", str(tmp_path / "lake"))
    assert out.returncode == 2
    assert "does not exist" in out.stderr
    out = run_cli("apply", "--format", "ogg-json", "--input", str(tmp_path), "--target", str(tmp_path / "lake"),
                  "--option", "flaten=true")
    assert out.returncode == 2 and "unknown option(s) flaten" in out.stderr
    out = run_cli("apply", "--format", "ogg-json", "--input", str(tmp_path), "--target", str(tmp_path / "lake"),
                  "--tombstone-retention", "seven days")
    assert out.returncode == 2 and "expected a number and a unit" in out.stderr


def test_durations():
    from datetime import timedelta

    from lakecdc.config.durations import parse_duration

    assert parse_duration("7d") == timedelta(days=7)
    assert parse_duration("36h") == timedelta(hours=36)
    assert parse_duration("0") == timedelta(0)


def test_apply_the_bundled_sample_twice(tmp_path):
    """The README's main job: the bundled sample, then the same command again (a no-op)."""
    target, summary = tmp_path / "lake", tmp_path / "run.json"
    args = ["apply", "--format", "ogg-json", "--input", "jobs/sample/landing", "--target", str(target),
            "--config", "jobs/sample/apply.yaml", "--summary-json", str(summary)]
    out = run_cli(*args)
    assert out.returncode == 0, out.stderr
    data = json.loads(summary.read_text())
    tables = {t["source_table"]: t for t in data["tables"]}
    assert set(tables) == {"QASOURCE.TCUSTMER", "QASOURCE.TCUSTORD"}
    assert data["quarantine"] == str(target.resolve() / "_quarantine")
    assert tables["QASOURCE.TCUSTMER"]["duplicate_or_late"] == 1     # JANE's replayed update
    assert tables["QASOURCE.TCUSTMER"]["target"] == str(target.resolve() / "QASOURCE.TCUSTMER")
    assert "line 5 of" in out.stderr and "not valid JSON" in out.stderr
    customers = {r["CUST_CODE"]: r for r in rows(tables["QASOURCE.TCUSTMER"]["target"])}
    assert set(customers) == {"WILL", "JANE", "DAVID", "ANN"}
    # partial update kept CITY/STATE; the key change kept the columns it did not log
    assert customers["JANE"] == {"CUST_CODE": "JANE", "NAME": "ROCKY FLYER LLC", "CITY": "DENVER", "STATE": "CO"}
    assert customers["DAVID"]["CITY"] == "TALLAHASSEE"
    # ANN deleted then inserted again: nothing of the old row survives
    assert customers["ANN"] == {"CUST_CODE": "ANN", "NAME": "ANN'S AUTOS 2", "CITY": None, "STATE": None}
    orders = {r["CUST_CODE"]: r for r in rows(tables["QASOURCE.TCUSTORD"]["target"])}
    assert set(orders) == {"WILL", "BILL"} and str(orders["BILL"]["PRODUCT_PRICE"]) == "14000.00"

    again = run_cli(*args)
    assert again.returncode == 0
    assert json.loads(summary.read_text())["tables"] == []
    # nothing new: answered without starting Spark
    assert "nothing new to apply" in again.stderr and "engine not started" in again.stdout


def test_failed_table_exits_1(tmp_path):
    write_jsonl(tmp_path / "in" / "a.json", [ogg("S.NOKEY", "I", "00:00:01", 1, after={"X": 1})])
    out = run_cli("apply", "--format", "ogg-json", "--input", str(tmp_path / "in"), "--target", str(tmp_path / "lake"))
    assert out.returncode == 1
    assert "--key S.NOKEY=COL" in out.stdout


def test_every_run_is_reported_in_a_delta_table_and_status_shows_lag(spark, tmp_path, capsys):
    """_lakecdc_runs gets one row per table and run (counts, files, newest op_ts and seq, lag);
    `lakecdc status` prints the last run and the lag per table."""
    import datetime as dt

    from deltalake import DeltaTable

    from lakecdc.cli import main

    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.A", "I", "10:00:00", 1, after={"ID": 1}, keys=["ID"]),
                                     ogg("S.B", "I", "10:00:01", 2, after={"ID": 1}, keys=["ID"])])
    assert main(["apply", "--format", "ogg-json", "--input", str(landing), "--target", str(target), "--quiet"]) == 0
    write_jsonl(landing / "2.json", [ogg("S.A", "U", "11:30:00", 3, before={"ID": 1}, after={"ID": 1}, keys=["ID"])])
    assert main(["apply", "--format", "ogg-json", "--input", str(landing), "--target", str(target), "--quiet"]) == 0
    runs = DeltaTable(str(target / "_lakecdc_runs")).to_pyarrow_table().sort_by([("run_id", "ascending"), ("source_table", "ascending")])
    got = [(r["run_id"], r["source_table"], r["events"], r["inserted"], r["updated"], r["input_files"])
           for r in runs.to_pylist()]
    assert got == [(1, "S.A", 1, 1, 0, 1), (1, "S.B", 1, 1, 0, 1), (2, "S.A", 1, 0, 1, 1)]
    last = runs.to_pylist()[-1]
    assert last["last_op_ts"] == dt.datetime(2020, 1, 1, 11, 30, tzinfo=dt.timezone.utc)
    assert last["lag_seconds"] > 0 and last["inputs"][0].endswith("2.json") and last["status"] == "applied"
    capsys.readouterr()
    assert main(["status", "--target", str(target)]) == 0
    out = capsys.readouterr().out
    assert "S.A" in out and "2020-01-01 11:30:00" in out and "S.B" in out and "2020-01-01 10:00:01" in out
    assert main(["status", "--target", str(target), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(r["source_table"], r["last_run"], r["runs"]) for r in listed] == [("S.A", 2, 2), ("S.B", 1, 1)]
