"""Job files: validation with lines, routing (include/exclude), maintenance when due, --watch."""

from __future__ import annotations

import ast
import dataclasses
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path

import pytest

from lakecdc.cli import main
from lakecdc.config.settings import DEFAULT_VACUUM_RETENTION
from lakecdc.errors import ConfigError
from lakecdc.jobs import load_job, run_job, watch
from lakecdc.jobs.file import PATH_OPTIONS
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
    """A mistake in a job file is a ConfigError starting with the file and naming line and key."""
    path = write_job(tmp_path, body)
    with pytest.raises(ConfigError) as exc:
        load_job(path)
    assert str(exc.value).startswith(str(path)) and message in str(exc.value)


def test_the_bundled_sample_job_is_valid(tmp_path, monkeypatch):
    """The sample job's paths are read from its own directory, whatever the working directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LAKE_ROOT", raising=False)
    job = load_job(REPO / "jobs" / "sample.yaml")
    assert job.target == str(REPO / "lake") and job.sources[0].format == "ogg-json" and job.include == ("QASOURCE.*",)
    assert job.sources[0].inputs == (str(REPO / "jobs" / "sample" / "landing"),)
    assert job.contracts == str(REPO / "data_contracts") and job.maintenance.zorder == "keys"


def test_paths_are_relative_to_the_job_file(tmp_path, monkeypatch):
    """target, inputs (globs too), contracts, gg_properties, stream.checkpoint and the formats' file
    options are read from the job file's directory; absolute paths and URIs are kept."""
    jobs = tmp_path / "repo" / "jobs"
    (jobs / "gg").mkdir(parents=True)
    (jobs / "gg" / "gg.properties").write_text(
        "gg.handlerlist=fw\ngg.handler.fw.type=filewriter\ngg.handler.fw.format=delimitedtext\n")
    path = jobs / "job.yaml"
    path.write_text(
        "target: ../lake\n"
        "sources:\n"
        "  - input: [landing/*.json, /abs/in, s3://bucket/in]\n"
        "    gg_properties: gg/gg.properties\n"
        "    options: {schemaDirectory: gg/dirdef, schemaFile: 'a.json, /abs/b.json'}\n"
        "contracts: ../contracts\n"
        "stream: {checkpoint: chk}\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    job = load_job(Path("..") / "repo" / "jobs" / "job.yaml")
    root = tmp_path / "repo"
    assert job.target == str(root / "lake") and job.contracts == str(root / "contracts")
    (src,) = job.sources
    assert src.inputs == (str(jobs / "landing" / "*.json"), "/abs/in", "s3://bucket/in")
    assert src.format == "ogg-delimited", "the format of gg.properties, found beside the job file"
    assert src.options["schemaDirectory"] == str(jobs / "gg" / "dirdef")
    assert src.options["schemaFile"] == f"{jobs / 'a.json'},/abs/b.json"
    assert job.stream.checkpoint == str(jobs / "chk")


def test_environment_variables_with_defaults(tmp_path, monkeypatch):
    """``${NAME:-default}`` takes the default when NAME is unset or empty; ``${NAME}`` unset is an
    error naming the file, the line and the variable; a comment's ``${...}`` is left alone."""
    path = write_job(tmp_path, (
        "# ${NOT_A_SETTING} in a comment is text\n"
        "target: ${LAKE_ROOT:-/data/dev}/lake   # ${NOR_HERE}\n"
        "sources:\n"
        "  - {input: '${LANDING:-in}', format: '${FORMAT}'}\n"))
    for name in ("LAKE_ROOT", "LANDING", "NOT_A_SETTING", "NOR_HERE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("FORMAT", "debezium-json")
    job = load_job(path)
    assert job.target == "/data/dev/lake" and job.sources[0].inputs == (str(tmp_path / "in"),)
    assert job.sources[0].format == "debezium-json"
    monkeypatch.setenv("LAKE_ROOT", "/data/prod")
    monkeypatch.setenv("LANDING", "")
    job = load_job(path)
    assert job.target == "/data/prod/lake" and job.sources[0].inputs == (str(tmp_path / "in"),)
    monkeypatch.delenv("FORMAT")
    with pytest.raises(ConfigError, match=r"job.yaml:4: \$\{FORMAT\}: the environment variable FORMAT is not set"):
        load_job(path)


@pytest.mark.parametrize(("body", "message"), [
    ("maintenance:\n  every_runs: twelve\n", ":5: maintenance.every_runs: expected an integer, found 'twelve'"),
    ("maintenance:\n  max_files: 0\n", ":5: maintenance.max_files: expected a number, 1 or more, found 0"),
    ("pk_udpate: update\n", ":4: pk_udpate: unknown key; did you mean 'pk_update'?"),
    ("maintenance:\n  every_run: 3\n", ":5: maintenance.every_run: unknown key; did you mean 'every_runs'?"),
    ("tables:\n  inclde: [S.*]\n", ":5: tables.inclde: unknown key; did you mean 'include'?"),
    ("checks: 'yes'\n", ":4: checks: expected true or false, found 'yes'"),
    ("apply_as_truncates: 1\n", ":4: apply_as_truncates: expected true or false, found 1"),
    ("name: 2024\n", ":4: name: expected a text value, found 2024"),
    ("maintenance: [every_runs]\n", ":4: maintenance: expected a mapping"),
    ("maintenance:\n  zorder: {A: 1}\n", ":5: maintenance.zorder: expected keys, or a list of columns"),
    ("maintenance:\n  target_file_size: huge\n", ":5: maintenance.target_file_size: size 'huge'"),
    ("stream:\n  max_files_per_trigger: many\n", ":5: stream.max_files_per_trigger: expected an integer"),
    ("tables:\n  paths: sales\n", ":5: tables.paths: expected {TABLE: VALUE}"),
])
def test_every_key_is_validated_with_its_line(tmp_path, body, message):
    """The file's model checks every key's type and value; the message names file, line and key."""
    path = write_job(tmp_path, "target: lake\nsources:\n  - {input: x, format: ogg-json}\n" + body)
    with pytest.raises(ConfigError) as exc:
        load_job(path)
    assert str(exc.value).startswith(str(path)) and message in str(exc.value)


def test_every_mistake_of_a_file_is_reported_at_once_in_file_order(tmp_path):
    """Several mistakes: one line each, in the order of the file (not one per attempt)."""
    path = write_job(tmp_path, (
        "target: lake\n"
        "sources:\n"
        "  - {input: x}\n"
        "pk_update: sideways\n"
        "maintenance:\n"
        "  every_runs: twelve\n"))
    with pytest.raises(ConfigError) as exc:
        load_job(path)
    lines = str(exc.value).splitlines()
    assert [line.split(": ", 1)[0] for line in lines] == [f"{path}:3", f"{path}:4", f"{path}:6"]
    assert "sources.0: give format: (one of" in lines[0] and "gg_properties:" in lines[0]
    assert "pk_update: 'sideways': use abend" in lines[1]


def test_maintenance_keeps_its_own_tombstone_retention(tmp_path):
    """maintenance.tombstone_retention is read (it was accepted and dropped); left out, the job's
    retention applies, and vacuum keeps Delta's default history."""
    path = write_job(tmp_path, "target: lake\nsources:\n  - {input: x, format: ogg-json}\n"
                               "maintenance:\n  every_runs: 2\n  tombstone_retention: 30d\n")
    m = load_job(path).maintenance
    assert m.tombstone_retention == dt.timedelta(days=30) and m.vacuum_retention == DEFAULT_VACUUM_RETENTION
    path.write_text(path.read_text().replace("  tombstone_retention: 30d\n", "  vacuum_retention: none\n"))
    m = load_job(path).maintenance
    assert m.tombstone_retention is None and m.vacuum_retention is None


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


def test_every_bundled_job_is_valid(tmp_path, monkeypatch):
    """Every jobs/*.yaml loads from any working directory, its inputs and file options found."""
    monkeypatch.chdir(tmp_path)  # the jobs' paths are relative to the job files
    monkeypatch.delenv("LAKE_ROOT", raising=False)
    jobs = {p.stem: load_job(p) for p in sorted((REPO / "jobs").glob("*.yaml"))}
    assert {"sample", *EXAMPLES} <= set(jobs)
    for name, job in jobs.items():
        assert job.maintenance is not None, f"{name}: shows a maintenance policy"
        assert all(Path(i).is_dir() for s in job.sources for i in s.inputs), f"{name}: bundled landing data"
        assert all(Path(s.options[o]).exists() for s in job.sources for o in PATH_OPTIONS if o in s.options)
        assert Path(job.target).parent in (REPO / "lake", REPO), f"{name}: writes under the repository's lake/"
    assert jobs["goldengate"].sources[0].format == "ogg-delimited"  # from gg.properties
    assert jobs["goldengate"].sources[0].options["pkUpdateHandling"] == "delete-insert"
    assert [s.format for s in jobs["dts"].sources] == ["dts-avro", "canal-json", "shareplex-json"]


@pytest.mark.spark
@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_job_tells_its_story_once(spark, tmp_path, monkeypatch, name):
    """Each family's job, run as `lakecdc run jobs/<name>.yaml` would (targets redirected), ends
    with the story's tables; the redelivered update is counted as a duplicate; a second run
    changes nothing."""
    monkeypatch.chdir(tmp_path)
    job = dataclasses.replace(load_job(REPO / "jobs" / f"{name}.yaml"), target=str(tmp_path / "lake"))
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


# -- scheduling examples: jobs/examples/ --------------------------------------------------------------


def _job_file_named(command: list[str]) -> Path:
    """The bundled job file a ``lakecdc run .../jobs/<name>.yaml`` command runs (its path from ``jobs/``)."""
    assert command[:1] == ["run"] or command[:2] == ["lakecdc", "run"], command
    (job,) = [c for c in command if c.endswith(".yaml")]
    assert "/jobs/" in job, f"{job}: a path ending in jobs/<name>.yaml"
    return REPO / "jobs" / job.rsplit("/jobs/", 1)[1]


def test_the_databricks_job_runs_a_bundled_job_on_a_schedule():
    """jobs/examples/databricks_job.json is a Jobs API definition: a python_wheel_task calling the
    wheel's ``lakecdc`` entry point with ``run <job file>`` (a job file of this repository, which
    loads), a job cluster of a Spark 4 runtime, a schedule and one run at a time."""
    spec = json.loads((REPO / "jobs" / "examples" / "databricks_job.json").read_text())
    (task,) = spec["tasks"]
    wheel = task["python_wheel_task"]
    assert (wheel["package_name"], wheel["entry_point"]) == ("lakecdc", "lakecdc")
    job = _job_file_named(wheel["parameters"])
    assert job.is_file() and load_job(job).sources
    clusters = {c["job_cluster_key"]: c["new_cluster"] for c in spec["job_clusters"]}
    cluster = clusters[task["job_cluster_key"]]
    assert int(cluster["spark_version"].split(".")[0]) >= 17, "a runtime with Spark 4 (lakecdc needs PySpark 4)"
    assert "LAKE_ROOT" in cluster["spark_env_vars"], "the target moved by the job file's ${LAKE_ROOT}"
    assert spec["schedule"]["quartz_cron_expression"] and spec["max_concurrent_runs"] == 1
    assert any(lib.get("whl", "").endswith(".whl") for lib in task["libraries"])


def test_the_airflow_dag_runs_the_cli_every_few_minutes():
    """jobs/examples/airflow_dag.py parses (no Airflow needed here), and its one BashOperator runs
    ``lakecdc run <job file>`` (a bundled job file) on a timedelta schedule, one run at a time."""
    tree = ast.parse((REPO / "jobs" / "examples" / "airflow_dag.py").read_text())
    constants = {t.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 for t in node.targets if isinstance(t, ast.Name) and isinstance(node.value, ast.Constant)}
    calls = {c.func.id: c for c in ast.walk(tree) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    bash = {k.arg: k.value for k in calls["BashOperator"].keywords}["bash_command"]
    assert isinstance(bash, ast.JoinedStr)
    command = "".join(v.value if isinstance(v, ast.Constant) else constants[v.value.id]  # type: ignore[attr-defined]
                      for v in bash.values).split()
    job = _job_file_named(command)
    assert job.is_file() and load_job(job).sources
    dag = {k.arg: k.value for k in calls["DAG"].keywords}
    assert ast.unparse(dag["schedule"]) == "EVERY" and "minutes=" in ast.unparse(
        next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "EVERY"))  # type: ignore[attr-defined]
    assert ast.literal_eval(dag["max_active_runs"]) == 1 and ast.literal_eval(dag["catchup"]) is False
