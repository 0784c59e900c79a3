"""Job files: validation with lines, routing (include/exclude), maintenance when due, --watch."""

from __future__ import annotations

import dataclasses
import json
from decimal import Decimal
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
        "apiVersion: v3.0.2\nkind: DataContract\nid: a\nversion: 1.0.0\nstatus: active\nschema:\n  - name: A\n    physicalName: S.A\n    properties:\n"
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


# -- the example jobs: jobs/<family>.yaml on their bundled data (jobs/make_samples.py) ----------------

EXAMPLES = ("goldengate", "debezium", "dts", "qlik")
#: what each example's story ends with: per table, its key column and its rows' values by key
#: (customer 2's partial update kept the columns it did not log; customer 3 moved to key 30 with
#: every column; order 101 was deleted; the redelivered update changed nothing)
CUSTOMERS = {1: ("Ann", "Berlin", "gold"), 2: ("Bob", "Lyon", "silver"), 30: ("Cid", "Rome", "bronze")}
ORDERS = {100: (1, "25.50", "paid"), 102: (30, "99.90", "shipped")}


def _story(upper: bool) -> dict[str, tuple[str, dict[int, dict[str, object]]]]:
    def name(c: str) -> str:
        return c.upper() if upper else c

    customers = {k: {name("name"): n, name("city"): c, name("tier"): t} for k, (n, c, t) in CUSTOMERS.items()}
    orders = {k: {name("customer_id"): c, name("amount"): a, name("status"): s} for k, (c, a, s) in ORDERS.items()}
    return {"customers": (name("id"), customers), "orders": (name("id"), orders)}


STORIES = {
    "goldengate": {"SHOP.CUSTOMERS": _story(True)["customers"], "SHOP.ORDERS": _story(True)["orders"]},
    "debezium": {"public.customers": _story(False)["customers"], "public.orders": _story(False)["orders"],
                 "inventory.products": ("id", {1: {"sku": "MUG-01", "stock": 39}, 2: {"sku": "CAP-07", "stock": 11}})},
    "dts": {"shop.customers": _story(False)["customers"], "shop.orders": _story(False)["orders"],
            "shop.payments": ("id", {1: {"order_id": 100, "state": "settled"}, 2: {"order_id": 102, "state": "settled"}}),
            "SALES.INVOICES": ("INVOICE_NO", {7101: {"ORDER_ID": 100, "TOTAL": "25.50", "STATUS": "paid"}})},
    "qlik": {"shop.customers": _story(True)["customers"], "shop.orders": _story(True)["orders"]},
}


def _same(actual: object, expected: object) -> bool:
    """Equal, a decimal column compared by value ('25.50' and Decimal('25.5000000000'))."""
    if isinstance(actual, Decimal) and isinstance(expected, str):
        return actual == Decimal(expected)
    return actual == expected


def test_every_bundled_job_is_valid(monkeypatch):
    monkeypatch.chdir(REPO)  # the jobs' paths are relative to the repository root, where they run
    jobs = {p.stem: load_job(p.relative_to(REPO)) for p in sorted((REPO / "jobs").glob("*.yaml"))}
    assert {"sample", *EXAMPLES} <= set(jobs)
    for name, job in jobs.items():
        assert job.maintenance is not None, f"{name}: shows a maintenance policy"
        assert all(Path(i).is_dir() for s in job.sources for i in s.inputs), f"{name}: bundled landing data"
    assert jobs["goldengate"].sources[0].format == "ogg-delimited"  # from gg.properties
    assert jobs["goldengate"].sources[0].options["pkUpdateHandling"] == "delete-insert"
    assert [s.format for s in jobs["dts"].sources] == ["dts-avro", "canal-json", "shareplex-json"]


@pytest.mark.spark
@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_job_tells_its_story_once(spark, tmp_path, monkeypatch, name):
    """Each family's job, run as `lakecdc run jobs/<name>.yaml` would (targets redirected), ends
    with the story's tables; the redelivered update is counted as a duplicate; a second run
    changes nothing."""
    monkeypatch.chdir(REPO)
    job = dataclasses.replace(load_job(f"jobs/{name}.yaml"), target=str(tmp_path / "lake"))
    first = run_job(job, spark=spark)
    assert first.ok, first.render()
    tables = {t.source_table: t for s in first.summaries for t in s.tables}
    assert set(tables) == set(STORIES[name])
    for table, (key, expected) in STORIES[name].items():
        actual = {r[key]: r for r in rows(tables[table].target)}
        assert set(actual) == set(expected), f"{name} {table}: keys"
        for k, values in expected.items():
            for column, value in values.items():
                assert _same(actual[k][column], value), f"{name} {table} {key}={k} {column}: {actual[k][column]!r}"
        assert tables[table].quarantined == 0
    customers = next(t for t in tables if t.lower().endswith("customers"))
    assert tables[customers].duplicate_or_late == 1, "Bob's move was delivered twice"
    second = run_job(job, spark=spark)
    assert second.ok and all(s.runs == () for s in second.summaries), "nothing new the second time"
