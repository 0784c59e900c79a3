"""Run every bundled job and lakecdc's other entry points on one Spark session, print the results.

``python tests/user_session_child.py WORKDIR SESSION`` (WORKDIR holds a copy of ``jobs/`` and
``data_contracts/``; SESSION is ``lakecdc`` for lakecdc's own session, or ``user:ZONE:ANSI`` for a
session built as a notebook user builds one: the plain builder, Spark's default settings, the time
zone ZONE (``-``: the JVM's, from the ``TZ`` environment) and ANSI mode on or off). The last line
of its output is a JSON document of every table's rows and every run's counts, which
``tests/test_user_session.py`` compares across sessions.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

JOBS = ("sample", "goldengate", "debezium", "dts", "qlik")


def session(kind: str):
    if kind == "lakecdc":
        import lakecdc

        return lakecdc.get_spark(conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"})
    from pyspark.sql import SparkSession

    _, zone, ansi = kind.split(":")
    builder = SparkSession.builder.master("local[2]").config("spark.sql.ansi.enabled", ansi)
    if zone != "-":
        builder = builder.config("spark.sql.session.timeZone", zone)
    return builder.getOrCreate()


def cell(value):
    return None if value is None else repr(value)


def tables(target: Path) -> dict:
    import deltalake

    out = {}
    for log in sorted(target.glob("*/_delta_log")):
        dt = deltalake.DeltaTable(str(log.parent))
        data = dt.to_pyarrow_table()
        cols = sorted(c for c in data.column_names if not c.startswith("_cdc_"))
        rows = sorted(json.dumps([cell(r[c]) for c in cols]) for r in data.to_pylist())
        types = {f.name: str(f.type) for f in data.schema if f.name in cols}
        out[log.parent.name] = {"columns": cols, "types": types, "rows": rows}
    return out


def counts(summary) -> list:
    return sorted((t.source_table, t.status, t.events, t.inserted, t.updated, t.deleted,
                   t.duplicate_or_late, t.quarantined, t.last_op_ts) for t in summary.tables)


def main() -> None:
    work, kind = Path(sys.argv[1]), sys.argv[2]
    os.chdir(work)
    spark = session(kind)
    import lakecdc
    from lakecdc.jobs import load_job, run_job

    result: dict = {"zone": spark.conf.get("spark.sql.session.timeZone"), "jobs": {}}
    for name in JOBS:
        job = load_job(f"jobs/{name}.yaml")
        ran = run_job(job, spark=spark)
        result["jobs"][name] = {"runs": [counts(s) for s in ran.summaries], "tables": tables(Path(job.target))}
    # the notebook entry points: events as DataFrames, the instants they carry
    events = lakecdc.read_changes("jobs/sample/landing", format="ogg-json", spark=spark)
    result["op_ts"] = sorted(str(r[0].timestamp()) for r in events.select("op_ts").collect() if r[0] is not None)
    result["rows"] = lakecdc.to_rows(events, pk_update="delete-insert").count()
    # the sample streamed (Structured Streaming, what is there now) into a target of its own
    with lakecdc.stream("jobs/sample/landing", "lake/streamed", format="ogg-json", spark=spark,
                        contracts="data_contracts") as query:
        query.await_termination()
    result["streamed"] = tables(Path("lake/streamed"))
    # the data contracts checked on the sample's tables (Great Expectations on Spark)
    from lakecdc.check.contracts import load_contracts
    from lakecdc.check.quality import check_tables

    checked = check_tables("lake", load_contracts("data_contracts"), spark=spark, record=False, data_docs=False)
    result["checks"] = sorted((c.source_table, c.check, c.success, c.unexpected) for c in checked)
    # a table read back through Spark, and maintenance on it
    table = next(Path("lake").glob("*/*/_delta_log")).parent
    result["read_table"] = lakecdc.read_table(str(table), spark=spark).count()
    reports = lakecdc.maintain(str(Path(job.target)), zorder="keys", spark=spark)
    result["maintained"] = sorted((r.source_table, r.files_after) for r in reports)
    result["after_maintenance"] = tables(Path(job.target))
    print(json.dumps(result, sort_keys=True), flush=True)
    # The process sometimes aborts while the interpreter shuts down ("terminate called without an
    # active exception", a native library's thread outliving it), after every result is out; that is
    # not what this script checks, so it leaves at once.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
