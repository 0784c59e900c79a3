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
    return subprocess.run([sys.executable, "-m", "lakecdc", *args], capture_output=True, text=True, cwd=ROOT, timeout=900)


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

    from lakecdc.cli import parse_duration

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


def test_failed_table_exits_1(tmp_path):
    write_jsonl(tmp_path / "in" / "a.json", [ogg("S.NOKEY", "I", "00:00:01", 1, after={"X": 1})])
    out = run_cli("apply", "--format", "ogg-json", "--input", str(tmp_path / "in"), "--target", str(tmp_path / "lake"))
    assert out.returncode == 1
    assert "--key S.NOKEY=COL" in out.stdout
