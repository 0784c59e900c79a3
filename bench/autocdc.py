"""OSS Spark's AUTO CDC (Spark Declarative Pipelines, ``pyspark.pipelines.create_auto_cdc_flow``)
as a contender on the whole-image workload, and which targets it can run against here.

    python -m bench.autocdc probe                  # each target tried; what ran and why each other failed
    python -m bench.autocdc run --events 200000 --keys 40000 [--workdir DIR] [--seed S]

AUTO CDC keeps its target with MERGE through Spark's DataSource V2 row-level operations: the
target table must implement ``SupportsRowLevelOperations``. On this machine's newest PySpark
(4.3.0) no durable table format does (see ``bench/autocdc.md``): the session catalog writes
Parquet (refused), Iceberg's newest Spark runtime (``iceberg-spark-runtime-4.1_2.13:1.12.0``)
cannot be loaded on Spark 4.2 or later, and Delta Lake has no release for Spark 4.3 (on 4.2,
where it has one, its table lacks that interface and is refused). What runs is Spark's own in-memory test catalog with
row-level operations, ``SharedTablesInMemoryRowLevelOperationTableCatalog`` from the tests jar
of ``spark-catalyst_2.13`` (4.2.0, the newest Spark Maven serves), whose tables outlive the
sessions a pipeline run makes. Its tables live in the JVM's memory: the times are AUTO CDC's
own work (the streaming read, its SCD1 batch processing and the MERGE) with no file writes, a
floor for any durable target rather than a figure for one.

The contender (:func:`run`): a pipeline whose source is a streaming read of a directory of
Debezium JSON envelopes (``op`` c/u/d, ``before``/``after``, ``source.scn``), keyed by ``ID``
(from ``after``, else ``before``), sequenced by the SCN, ``op = 'd'`` applied as deletes, SCD
type 1, into the streaming table ``orders``. A first pipeline run applies the preload (the
workload's ``preload.json`` as Debezium inserts), a second, incremental run applies the events
(the file added to the source directory): the second is timed, as bench.run times applying the
workload to a preloaded target. The table is then written to ``result.parquet`` (its
``__spark_autocdc_*`` bookkeeping column dropped by :func:`read_result`).

It needs a PySpark with ``pyspark.pipelines`` (4.2 or later, the project's ``.venv-newest``), so
it runs in that interpreter as a subprocess (``LAKECDC_NEWEST_PYTHON`` names another); the jars
are fetched once from Maven Central with Spark's bundled Ivy into lakecdc's cache.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parents[1]
RESULT = "result.parquet"
TIMING = "timing.json"
TABLE = "orders"
#: Columns AUTO CDC adds to its target for its own bookkeeping (their name prefix).
AUTOCDC_COLUMNS = "__spark_autocdc"
#: The streaming source's schema: the Debezium envelope members the flow reads.
_IMAGE = ("ID BIGINT, CUSTOMER_ID BIGINT, ORDER_DATE STRING, SHIP_DATE STRING, STATUS STRING, CHANNEL STRING, "
          "QUANTITY BIGINT, UNIT_PRICE DECIMAL(10,2), AMOUNT DECIMAL(12,2), DISCOUNT DECIMAL(10,2), "
          "PRIORITY BIGINT, NOTE STRING")
_STRUCT = ", ".join(" ".join(part.split(" ", 1)).replace(" ", ": ", 1) for part in _IMAGE.split(", "))
ENVELOPE_DDL = f"before STRUCT<{_STRUCT}>, after STRUCT<{_STRUCT}>, source STRUCT<scn: STRING>, op STRING"
#: Session settings (those of lakecdc's embedded session that apply: local[2], UTC, 8 partitions).
SESSION_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.default.parallelism": "8",
    "spark.driver.memory": "8g",
}


# --- targets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class MavenJar:
    """One jar of Maven Central (``classifier``: e.g. ``tests``)."""

    group: str
    artifact: str
    version: str
    classifier: str | None = None

    def __str__(self) -> str:
        return ":".join(p for p in (self.group, self.artifact, self.version, self.classifier) if p)


@dataclass(frozen=True)
class Target:
    """A catalog to put AUTO CDC's target table in: the jars and session settings it needs."""

    name: str
    description: str
    #: the pipeline's default catalog (None: the session catalog)
    catalog: str | None = None
    jars: tuple[MavenJar, ...] = ()
    #: session settings (``{warehouse}`` is replaced by a directory)
    conf: dict[str, str] = field(default_factory=dict)
    #: Delta Lake's package for the running Spark (lakecdc.spark.jars' table), its catalog the session's
    delta: bool = False


ICEBERG = MavenJar("org.apache.iceberg", "iceberg-spark-runtime-4.1_2.13", "1.12.0")
SPARK_TESTS = MavenJar("org.apache.spark", "spark-catalyst_2.13", "4.2.0", "tests")
_IN_MEMORY = "org.apache.spark.sql.connector.catalog."
TARGETS = {
    t.name: t
    for t in (
        Target("session", "the session catalog, the pipelines' default (spark_catalog, format parquet)"),
        Target("iceberg", f"Iceberg's newest Spark runtime ({ICEBERG}), a Hadoop catalog in a temporary directory",
               "tgt", (ICEBERG,), {"spark.sql.catalog.tgt": "org.apache.iceberg.spark.SparkCatalog",
                                   "spark.sql.catalog.tgt.type": "hadoop",
                                   "spark.sql.catalog.tgt.warehouse": "{warehouse}"}),
        Target("delta", "Delta Lake's release for the running Spark as the session catalog, format delta",
               conf={"spark.sql.sources.default": "delta"}, delta=True),
        Target("memory", f"Spark's in-memory test catalog with row-level operations ({SPARK_TESTS})",
               "tgt", (SPARK_TESTS,), {"spark.sql.catalog.tgt": _IN_MEMORY + "InMemoryRowLevelOperationTableCatalog"}),
        Target("memory-shared", f"the same, its tables shared by all sessions ({SPARK_TESTS})",
               "tgt", (SPARK_TESTS,),
               {"spark.sql.catalog.tgt": _IN_MEMORY + "SharedTablesInMemoryRowLevelOperationTableCatalog"}),
    )
}
#: The target the contender uses: the one that runs here.
CONTENDER_TARGET = "memory-shared"


def jar_cache() -> Path:
    """Where the jars are kept: beside lakecdc's resolved Spark packages."""
    from lakecdc.spark.jars import cache_dir

    return cache_dir() / "autocdc"


def maven_jar(jar: MavenJar) -> Path:
    """The jar file of ``jar``, fetched once with the Ivy that PySpark ships (no dependencies:
    both jars here are self-contained). Raises RuntimeError with Ivy's report when unresolved."""
    import pyspark

    name = f"{jar.artifact}-{jar.version}{'-' + jar.classifier if jar.classifier else ''}.jar"
    path = jar_cache() / name
    if path.is_file():
        return path
    ivy_jar = next(iter(sorted((Path(pyspark.__file__).parent / "jars").glob("ivy-*.jar"))), None)
    if ivy_jar is None:
        raise RuntimeError(f"no Ivy jar in PySpark's jars ({Path(pyspark.__file__).parent / 'jars'})")
    classifier = f' m:classifier="{jar.classifier}"' if jar.classifier else ""
    module = f"""<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">
  <info organisation="lakecdc" module="autocdc-jars"/>
  <dependencies>
    <dependency org="{jar.group}" name="{jar.artifact}" rev="{jar.version}" transitive="false">
      <artifact name="{jar.artifact}" type="jar" ext="jar"{classifier}/>
    </dependency>
  </dependencies>
</ivy-module>
"""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ivy.xml").write_text(module)
        done = subprocess.run(
            ["java", "-jar", str(ivy_jar), "-ivy", str(Path(tmp) / "ivy.xml"),
             "-cache", str(jar_cache() / "ivy-cache"), "-retrieve", f"{tmp}/[artifact].[ext]"],
            capture_output=True, text=True, timeout=600,
        )
        fetched = Path(tmp) / f"{jar.artifact}.jar"
        if done.returncode or not fetched.is_file():
            report = [line.strip() for line in done.stdout.splitlines() if "not found" in line or "UNRESOLVED" in line]
            raise RuntimeError(f"{jar} could not be resolved from Maven Central: {'; '.join(report) or done.stdout[-500:]}")
        shutil.move(fetched, path)
    return path


# --- the pipeline (runs in the newest interpreter) --------------------------------------------


def start_session(target: Target, warehouse: Path) -> Any:
    """A Spark Connect session on a local server (``local[2]``) with ``target``'s jars and catalog."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.remote("local[2]")
    # the session catalog's tables under the run's directory, not the working directory
    settings = {**SESSION_CONF, "spark.sql.warehouse.dir": warehouse.as_uri()}
    if target.jars:
        settings["spark.jars"] = ",".join(str(maven_jar(j)) for j in target.jars)
    if target.delta:
        settings.update(_delta_conf())
    settings.update({k: v.replace("{warehouse}", warehouse.as_uri()) for k, v in target.conf.items()})
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _delta_conf() -> dict[str, str]:
    """Settings that load Delta Lake's release for the running Spark (resolved with its
    dependencies into lakecdc's Ivy cache). Raises RuntimeError when Delta has none."""
    from lakecdc.spark.jars import DELTA_SESSION_CONF, cache_dir, delta_package, spark_version

    package = delta_package()
    if package is None:
        raise RuntimeError(f"Delta Lake has no release for Spark {spark_version()} (lakecdc.spark.jars.DELTA_FOR_SPARK)")
    return {"spark.jars.packages": str(package), "spark.jars.ivy": str(cache_dir()), **DELTA_SESSION_CONF}


def _define(spark: Any, source: Path) -> None:
    """The pipeline's graph: the Debezium source as a temporary view, the target, the AUTO CDC flow."""
    import pyspark.pipelines as dp
    from pyspark.sql import functions as F

    columns = [part.split(" ", 1)[0] for part in _IMAGE.split(", ")][1:]

    @dp.temporary_view
    def changes() -> Any:
        return spark.readStream.schema(ENVELOPE_DDL).json(str(source)).select(
            F.coalesce("after.ID", "before.ID").alias("ID"),
            *[F.col(f"after.{c}").alias(c) for c in columns],
            F.col("op").alias("_op"),
            F.col("source.scn").cast("bigint").alias("_seq"),
        )

    dp.create_streaming_table(TABLE)
    dp.create_auto_cdc_flow(target=TABLE, source="changes", keys=["ID"], sequence_by="_seq",
                            apply_as_deletes="_op = 'd'", except_column_list=["_op", "_seq"], stored_as_scd_type=1)


def run_pipeline(spark: Any, target: Target, source: Path, storage: Path) -> float:
    """One run of the pipeline (what ``spark-pipelines run`` does: graph, definitions, run, its
    events awaited); incremental over what ``storage`` recorded. Returns its seconds."""
    from pyspark.pipelines.add_pipeline_analysis_context import add_pipeline_analysis_context
    from pyspark.pipelines.graph_element_registry import graph_element_registration_context
    from pyspark.pipelines.spark_connect_graph_element_registry import SparkConnectGraphElementRegistry
    from pyspark.pipelines.spark_connect_pipeline import (
        create_dataflow_graph,
        handle_pipeline_events,
        start_run,
    )

    start = time.perf_counter()
    graph = create_dataflow_graph(spark, default_catalog=target.catalog,
                                  default_database="bench" if target.catalog else None, sql_conf={})
    with (graph_element_registration_context(SparkConnectGraphElementRegistry(spark, graph)),
          add_pipeline_analysis_context(spark=spark, dataflow_graph_id=graph, flow_name=None)):
        _define(spark, source)
    handle_pipeline_events(start_run(spark, graph, full_refresh=None, full_refresh_all=False, refresh=None,
                                     dry=False, storage=storage.as_uri()))
    return time.perf_counter() - start


def table_name(target: Target) -> str:
    return f"{target.catalog}.bench.{TABLE}" if target.catalog else TABLE


def _place(file: Path, directory: Path) -> None:
    """``file`` into the source directory (a hard link where possible: the events can be large)."""
    destination = directory / file.name
    try:
        os.link(file, destination)
    except OSError:
        shutil.copyfile(file, destination)


@dataclass
class Timing:
    """Seconds of one contender run: the session's start, the preload run, the timed run of the
    events, and writing the table out."""

    session: float
    preload: float
    apply: float
    write: float
    rows: int


def apply(preload: Path, events: Path, workdir: Path, target: Target) -> Timing:
    """Run the pipeline on ``preload`` then (incrementally) on ``events`` (Debezium JSON files of
    distinct names), with its storage, source directory and result under ``workdir``."""
    source, storage = workdir / "source", workdir / "storage"
    for directory in (source, storage, workdir / "warehouse"):
        shutil.rmtree(directory, ignore_errors=True)
    source.mkdir(parents=True)
    begin = time.perf_counter()
    spark = start_session(target, workdir / "warehouse")
    try:
        session = time.perf_counter() - begin
        if target.catalog:
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {target.catalog}.bench")
        _place(preload, source)
        first = run_pipeline(spark, target, source, storage)
        _place(events, source)
        second = run_pipeline(spark, target, source, storage)
        begin = time.perf_counter()
        table = spark.table(table_name(target)).toArrow()
        pq.write_table(table, workdir / RESULT)
        return Timing(session, first, second, time.perf_counter() - begin, table.num_rows)
    finally:
        spark.stop()


# --- what bench.run calls (any interpreter) ----------------------------------------------------


def newest_python() -> Path:
    """The interpreter with the newest PySpark: ``LAKECDC_NEWEST_PYTHON``, else the repository's
    ``.venv-newest``."""
    return Path(os.environ.get("LAKECDC_NEWEST_PYTHON") or REPO / ".venv-newest" / "bin" / "python")


def unavailable() -> str | None:
    """Why AUTO CDC cannot run here (no such interpreter, or its PySpark lacks pipelines), or None."""
    python = newest_python()
    if not python.is_file():
        return f"no interpreter with the newest PySpark at {python} (set LAKECDC_NEWEST_PYTHON)"
    probe = subprocess.run([str(python), "-c", "import pyspark, pyspark.pipelines as p; p.create_auto_cdc_flow; "
                            "print(pyspark.__version__)"], capture_output=True, text=True)
    if probe.returncode:
        return f"{python}: PySpark without pyspark.pipelines.create_auto_cdc_flow (4.2 or later needed): " + (
            probe.stderr.strip().splitlines() or ["?"])[-1]
    return None


def _in_newest(*args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([str(newest_python()), "-m", "bench.autocdc", *args], env=env, text=True,
                          capture_output=capture, check=False)


def debezium_preload(preload_json: Path, directory: Path) -> Path:
    """The workload's GoldenGate ``preload.json`` as Debezium inserts (``preload.json`` in
    ``directory``), as bench.debezium converts the events."""
    from bench.debezium import build_json

    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        build_json(preload_json, Path(tmp))
        out = directory / "preload.json"
        shutil.move(Path(tmp) / "events.json", out)
    return out


def run(events_path: Path, target_dir: Path, preload_path: Path | None = None) -> Path:
    """Apply the Debezium JSON ``events_path`` with AUTO CDC to a table preloaded from
    ``preload_path`` (GoldenGate JSON inserts; default: the ``preload.json`` of the workload
    whose ``formats/debezium-json/events.json`` this is), in the newest interpreter, working in
    ``target_dir``. Returns the path of the resulting table (Parquet, :func:`read_result`);
    :func:`read_timing` gives its seconds. Raises RuntimeError when the run fails."""
    events_path, target_dir = Path(events_path), Path(target_dir)
    preload_path = Path(preload_path) if preload_path else events_path.parents[2] / "preload.json"
    target_dir.mkdir(parents=True, exist_ok=True)
    preload = debezium_preload(preload_path, target_dir / "converted")
    done = _in_newest("apply", str(preload), str(events_path.resolve()), str(target_dir.resolve()),
                      "--target", CONTENDER_TARGET)
    if done.returncode:
        raise RuntimeError(f"AUTO CDC run on {events_path} failed (exit {done.returncode}); see its output above")
    return target_dir / RESULT


def read_result(path: Path) -> pa.Table:
    """The table a run wrote, without AUTO CDC's bookkeeping columns."""
    table = pq.read_table(path)
    return table.drop_columns([n for n in table.column_names if n.startswith(AUTOCDC_COLUMNS)])


def read_timing(path: Path) -> Timing:
    """The seconds of the run that wrote the result ``path``."""
    return Timing(**json.loads((Path(path).parent / TIMING).read_text()))


# --- probe: each target tried ------------------------------------------------------------------


def _sample_events() -> Iterator[dict[str, Any]]:
    """Four Debezium changes: insert, update and delete of ID 1, insert of ID 2."""
    row = {c.split(" ")[0]: None for c in _IMAGE.split(", ")}
    one, two = {**row, "ID": 1, "STATUS": "NEW"}, {**row, "ID": 2, "STATUS": "NEW"}
    changes = [("c", None, one), ("u", one, {**one, "STATUS": "PAID"}), ("c", None, two), ("d", two, None)]
    for scn, (op, before, after) in enumerate(changes, start=10):
        yield {"before": before, "after": after, "source": {"scn": str(scn)}, "op": op}


def attempt(target: Target, workdir: Path) -> dict[str, Any]:
    """Run the pipeline on :func:`_sample_events` into ``target``; what happened."""
    workdir.mkdir(parents=True, exist_ok=True)
    preload, events = workdir / "preload.json", workdir / "events.json"
    sample = [json.dumps(e) for e in _sample_events()]
    preload.write_text(sample[0] + "\n")
    events.write_text("\n".join(sample[1:]) + "\n")
    try:
        timing = apply(preload, events, workdir, target)
    except Exception as error:  # every failure is the finding: reported, not raised
        return {"target": target.name, "ok": False, "error": _first_line(error)}
    rows = read_result(workdir / RESULT).sort_by("ID").to_pylist()
    right = [(r["ID"], r["STATUS"]) for r in rows] == [(1, "PAID")]
    return {"target": target.name, "ok": right, "rows": rows, "seconds": asdict(timing),
            **({} if right else {"error": f"wrong result: {rows}"})}


def _first_line(error: BaseException) -> str:
    """The informative line of a Spark (Connect) error: gRPC's ``details``, else the message's first line."""
    text = str(error)
    details = re.search(r'details = "(.*?)"\n', text)
    line = details.group(1) if details else (text.strip().splitlines() or [type(error).__name__])[0]
    return f"{type(error).__name__}: {line}"


def probe(names: list[str]) -> list[dict[str, Any]]:
    """Try each target in a process of its own (jars are fixed at a JVM's start); print and return
    the outcomes."""
    reason = unavailable()
    if reason:
        print(f"AUTO CDC cannot run: {reason}")
        return []
    outcomes = []
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"autocdc-{name}-") as tmp:
            done = _in_newest("attempt", name, tmp, capture=True)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        outcome = json.loads(lines[-1]) if lines else {
            "target": name, "ok": False, "error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}
        outcomes.append(outcome)
        verdict = "runs, right result" if outcome["ok"] else outcome["error"]
        print(f"- {name} ({TARGETS[name].description}):\n    {verdict}", flush=True)
    return outcomes


# --- command line ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.autocdc", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("probe", help="try each target, print what runs and each error")
    p.add_argument("--targets", default=",".join(TARGETS), help="comma-separated, of: " + ", ".join(TARGETS))
    r = sub.add_parser("run", help="the contender on bench.run's whole-image workload, checked and timed")
    r.add_argument("--events", type=int, default=200_000)
    r.add_argument("--keys", type=int, default=40_000)
    r.add_argument("--seed", type=int, default=42)
    r.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    a = sub.add_parser("apply", help="(in the newest interpreter) preload, then the events")
    a.add_argument("preload", type=Path)
    a.add_argument("events", type=Path)
    a.add_argument("workdir", type=Path)
    a.add_argument("--target", default=CONTENDER_TARGET, choices=sorted(TARGETS))
    t = sub.add_parser("attempt", help="(in the newest interpreter) one target of the probe")
    t.add_argument("target", choices=sorted(TARGETS))
    t.add_argument("workdir", type=Path)
    args = parser.parse_args(argv)

    if args.command == "probe":
        probe(args.targets.split(","))
    elif args.command == "attempt":
        print(json.dumps(attempt(TARGETS[args.target], args.workdir), default=str))
    elif args.command == "apply":
        timing = apply(args.preload, args.events, args.workdir, TARGETS[args.target])
        (args.workdir / TIMING).write_text(json.dumps(asdict(timing)) + "\n")
        print(f"AUTO CDC: session {timing.session:.1f} s, preload run {timing.preload:.1f} s, "
              f"events run {timing.apply:.1f} s, result written {timing.write:.1f} s, {timing.rows:,} rows")
    else:
        run_whole(args)


def run_whole(args: argparse.Namespace) -> None:
    """Generate (or reuse) the workload and its Debezium JSON, run the contender, check its table."""
    from bench.debezium import SUITE
    from bench.run import check_arrow, ensure_workload

    reason = unavailable()
    if reason:
        raise SystemExit(f"AUTO CDC cannot run: {reason}")
    workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
    (encoded,) = SUITE.ensure(workload, args.workdir, args.seed, ["debezium-json"])
    events = encoded.files[0]
    target_dir = args.workdir / "targets" / workload.directory.name / "autocdc"
    shutil.rmtree(target_dir, ignore_errors=True)
    begin = time.perf_counter()
    result = run(events, target_dir, workload.preload_json)
    wall = time.perf_counter() - begin
    timing = read_timing(result)
    checked = check_arrow(read_result(result), workload.expected_parquet)
    print(f"{workload.events:,} events over {workload.keys:,} keys (whole images, Debezium JSON): "
          f"events run {timing.apply:.1f} s ({workload.events / timing.apply:,.0f} events/s), preload run "
          f"{timing.preload:.1f} s, session {timing.session:.1f} s, whole subprocess {wall:.1f} s; "
          f"{checked.wrong} wrong rows of {checked.expected_rows:,} "
          f"(missing {checked.missing}, extra {checked.extra}, differing {checked.differing}){'; ' if checked.notes else ''}"
          + "; ".join(checked.notes))


if __name__ == "__main__":
    main()
