"""Job files: validation with lines, routing (include/exclude), maintenance when due, --watch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lakecdc.cli import main
from lakecdc.errors import ConfigError
from lakecdc.jobs import load_job, run_job, watch
from tests.helpers import ogg, rows, write_jsonl

REPO = Path(__file__).parent.parent


def write_job(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(body)
    return path


@pytest.mark.parametrize(("body", "message"), [
    ("target: lake\nsources:\n  - input: x\n    format: ogg-json\n    colour: red\n", ":5: sources.0.colour: unknown key"),
    ("sources:\n  - input: x\n    format: ogg-json\n", ":1: target: missing"),
    ("target: lake\nsources:\n  - input: x\n    format: nope\n", ":4: sources.0.format: 'nope' is not a format"),
    ("target: lake\nsources: []\n", ":2: sources: expected a list"),
    ("target: lake\nsources:\n  - {input: x, format: ogg-json}\ntables:\n  keys:\n    S.T: ID\n", ":5: tables.keys: expected {TABLE"),
    ("target: lake\nsources:\n  - {input: x, format: ogg-json}\nmaintenance:\n  vacuum_retention: a week\n",
     ":5: maintenance.vacuum_retention: duration 'a week'"),
    ("target: lake\nsources: [\n", ": not valid YAML"),
    ("target: lake\nsources:\n  - {input: x, format: ogg-json}\nmin_file_age: soon\n", ":4: min_file_age: duration 'soon'"),
])
def test_mistakes_are_reported_with_their_line(tmp_path, body, message):
    path = write_job(tmp_path, body)
    with pytest.raises(ConfigError) as exc:
        load_job(path)
    assert str(exc.value).startswith(str(path)) and message in str(exc.value)


def test_the_bundled_sample_job_is_valid():
    job = load_job(REPO / "jobs" / "sample.yaml")
    assert job.target == "lake" and job.sources[0].format == "ogg-json" and job.include == ("QASOURCE.*",)
    assert job.contracts == "data_contracts" and job.maintenance.zorder == "keys"


@pytest.mark.spark
def test_a_job_routes_tables_and_maintains_when_due(spark, tmp_path):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [
        ogg("APP.ORDERS", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
        ogg("APP.AUDIT_LOG", "I", "00:00:02", 2, after={"ID": 1, "V": "noise"}, keys=["ID"]),
        ogg("OTHER.T", "I", "00:00:03", 3, after={"ID": 1}, keys=["ID"]),
    ])
    path = write_job(tmp_path, f"""
name: demo
target: {lake}
sources:
  - input: "{landing}/*.json"
    format: ogg-json
tables:
  include: ["APP.*"]
  exclude: ["APP.AUDIT_*"]
maintenance:
  every_runs: 2
  vacuum_retention: none
""")
    job = load_job(path)
    first = run_job(job, spark=spark)
    (summary,) = first.summaries
    assert rows(summary.table("APP.ORDERS").target) == [{"ID": 1, "V": "a"}]
    assert summary.table("APP.AUDIT_LOG").skipped == 1 and summary.table("OTHER.T").skipped == 1
    assert not (lake / "APP.AUDIT_LOG").exists() and not (lake / "OTHER.T").exists()
    assert first.maintained == []  # one run so far
    write_jsonl(landing / "2.json", [ogg("APP.ORDERS", "U", "00:00:04", 4, before={"ID": 1}, after={"ID": 1, "V": "b"}, keys=["ID"])])
    second = run_job(job, spark=spark)
    assert [r.source_table for r in second.maintained] == ["APP.ORDERS"], "due after 2 runs that changed something"
    assert rows(second.summaries[0].table("APP.ORDERS").target) == [{"ID": 1, "V": "b"}]
    assert "maintenance:" in second.render() and "APP.ORDERS: compacted" in second.render()
    # --watch: runs on a schedule; nothing new means nothing applied and no failure
    assert watch(job, interval=0, max_runs=2, spark=spark) == 0


@pytest.mark.spark
def test_lakecdc_run_cli(spark, tmp_path, capsys):
    landing, lake = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("APP.ORDERS", "I", "00:00:01", 1, after={"ID": 7}, keys=["ID"])])
    path = write_job(tmp_path, f"target: {lake}\nsources:\n  - input: {landing}\n    format: ogg-json\n")
    out_json = tmp_path / "run.json"
    assert main(["run", str(path), "--quiet", "--summary-json", str(out_json)]) == 0
    assert "job job" in capsys.readouterr().out
    summary = json.loads(out_json.read_text())
    assert summary["ok"] and summary["runs"][0]["tables"][0]["inserted"] == 1
    assert main(["run", str(path), "--watch", "--interval", "0s", "--max-runs", "2", "--quiet"]) == 0
    bad = write_job(tmp_path, "target: x\nsources:\n  - input: y\n    format: ogg-json\n    colour: red\n")
    assert main(["run", str(bad)]) == 2
    assert "job.yaml:5: sources.0.colour: unknown key" in capsys.readouterr().err


def test_per_table_settings_and_checks_after_each_run(spark, tmp_path):
    """tables.paths / pk_update / tombstone_retention per table, and checks: true running the
    contracts' checks on the tables a run changed."""
    landing = tmp_path / "landing"
    write_jsonl(landing / "1.json", [
        ogg("S.A", "I", "00:00:01", 1, after={"ID": 1, "V": "a"}, keys=["ID"]),
        ogg("S.B", "I", "00:00:02", 2, after={"ID": 1, "V": "a"}, keys=["ID"]),
    ])
    contracts = tmp_path / "contracts"
    contracts.mkdir()
    (contracts / "a.yaml").write_text(
        "apiVersion: v3.0.2\nkind: DataContract\nschema:\n  - name: A\n    physicalName: S.A\n    properties:\n"
        "      - {name: ID, physicalType: bigint, primaryKey: true}\n      - {name: V, physicalType: string}\n")
    job = write_job(tmp_path, (
        f"target: {tmp_path / 'lake'}\nsources:\n  - {{input: {landing}, format: ogg-json}}\n"
        f"contracts: {contracts}\nchecks: true\n"
        "tables:\n  paths: {S.A: mine/a}\n  pk_update: {S.B: update}\n  tombstone_retention: {S.B: 30d}\n"))
    loaded = load_job(job)
    assert loaded.table_paths == {"S.A": "mine/a"} and loaded.pk_update_by_table == {"S.B": "update"}
    assert loaded.retention_by_table["S.B"].days == 30
    result = run_job(loaded, spark=spark)
    assert result.ok and rows(tmp_path / "lake" / "mine" / "a") == [{"ID": 1, "V": "a"}]
    assert {c.source_table for c in result.checks} == {"S.A"} and all(c.success for c in result.checks)
    assert "checks: " in result.render()
    write_jsonl(landing / "2.json", [ogg("S.B", "U", "00:00:03", 3, before={"ID": 1, "V": "a"},
                                         after={"ID": 2, "V": "a"}, keys=["ID"])])
    s = run_job(loaded, spark=spark).summaries[0].table("S.B")
    assert (s.inserted, s.updated, s.deleted) == (0, 1, 0)   # pk_update=update for S.B
    bad = write_job(tmp_path, f"target: x\nsources:\n  - {{input: {landing}, format: ogg-json}}\nchecks: true\n")
    with pytest.raises(ConfigError, match=":4: checks: checks come from data contracts"):
        load_job(bad)
