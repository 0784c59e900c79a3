"""Writes the notebooks of this folder (run it after editing a cell here, then commit both):

    .venv/bin/python notebooks/make_notebooks.py

Keeping the cells in Python keeps them reviewable and identical across notebooks (the setup cell).
"""
from pathlib import Path

import nbformat as nbf

OUT = Path(__file__).parent
KERNEL = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
          "language_info": {"name": "python"}}

SETUP = '''import tempfile
from pathlib import Path

import lakecdc

# The session you already have (Databricks, a cluster, Jupyter with Spark) is used as it is;
# without one, lakecdc starts a small local Spark session.
spark = lakecdc.get_spark()

# Where the change files land. The default is the sample bundled with lakecdc (GoldenGate JSON);
# on Databricks point it at your landing volume, e.g. "/Volumes/main/cdc/landing/".
LANDING = next((str(p) for p in (Path("../jobs/sample/landing"), Path("jobs/sample/landing")) if p.exists()), None)
assert LANDING, "set LANDING to a directory of change files"
# Where the Delta tables go (a scratch directory here; on Databricks e.g. "/Volumes/main/cdc/lake/").
TARGET = tempfile.mkdtemp(prefix="lakecdc-notebook-")
KEYS = {"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID"]}  # messages without primary_keys
print(spark.version, LANDING, TARGET)'''


def notebook(name, cells):
    nb = nbf.v4.new_notebook(metadata=KERNEL)
    nb.cells = [nbf.v4.new_markdown_cell(c[1]) if c[0] == "md" else nbf.v4.new_code_cell(c[1]) for c in cells]
    for i, cell in enumerate(nb.cells):  # stable ids: regenerating changes only edited cells
        cell.id = f"cell-{i:02d}"
    nbf.write(nb, OUT / name)


notebook("01_quickstart.ipynb", [
    ("md", """# lakecdc quickstart: change files to Delta tables, exactly once

GoldenGate JSON change messages (inserts, partial updates, a primary-key update, a replayed
duplicate and one broken record) are decoded, ordered by the source's own position, folded to one
net change per key and MERGEd into one Delta table per source table. Runs on Databricks (it uses
your `spark`) and in Jupyter with a local Spark: no Delta jars needed."""),
    ("code", SETUP),
    ("md", "## Apply the change files\nOne call; the summary says what happened to every table."),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format="ogg-json", keys=KEYS, spark=spark)
print(summary.render())'''),
    ("md", "## Query the tables\n`lakecdc.read_table` reads a Delta table into Spark (Delta's reader on Databricks, the Delta log's files elsewhere). The `_cdc_` columns keep each row's sequence, op and source commit time."),
    ("code", '''orders = lakecdc.read_table(summary.table("QASOURCE.TCUSTORD").target, spark=spark)
orders.orderBy("ORDER_ID").show(truncate=False)
customers = lakecdc.read_table(summary.table("QASOURCE.TCUSTMER").target, spark=spark)
customers.orderBy("CUST_CODE").show(truncate=False)'''),
    ("md", "## Run it again: nothing changes\nEvery input file is applied once; a re-run (or a crash and a re-run) neither loses nor duplicates a change."),
    ("code", '''again = lakecdc.apply(LANDING, TARGET, format="ogg-json", keys=KEYS, spark=spark)
print(again.render())
assert again.runs == (), "nothing new to apply"'''),
    ("md", "## Time travel\nEvery run is one Delta commit per table; older versions stay readable (within the vacuum retention)."),
    ("code", '''from lakecdc.merge.delta_rs import DeltaRsEngine

path = summary.table("QASOURCE.TCUSTORD").target
for version in range(DeltaRsEngine().version(path) + 1):
    print(version, lakecdc.read_table(path, version=version, spark=spark).count(), "rows")'''),
    ("md", "## The change events themselves, and the quarantine\n`read_changes` gives the decoded canonical events (ops-style); records that could not be applied are in the quarantine with file, line, raw text and reason."),
    ("code", '''events = lakecdc.read_changes(LANDING, format="ogg-json", spark=spark)
events.groupBy("table", "op").count().orderBy("table", "op").show()
lakecdc.read_table(summary.quarantine, spark=spark).select("file", "line", "reason").show(truncate=False)'''),
])

notebook("02_maintenance.ipynb", [
    ("md", """# Keeping tables fast: compaction, Z-order, vacuum, checkpoints

Merges every few minutes leave many small files. `lakecdc.maintain` bin-packs them (or Z-orders
by the key columns, so that each MERGE reads only the files its keys are in), vacuums old files
within a retention, and writes a checkpoint. Rows never change."""),
    ("code", "import json\n" + SETUP + '''


def write_batch(directory, number, first_key, count):
    """A small GoldenGate JSON batch: inserts of new keys (and, in the last one, an update of key 1)."""
    lines = []
    for k in range(first_key, first_key + count):
        lines.append({"table": "DEMO.ITEMS", "op_type": "I", "op_ts": f"2024-01-01 00:{number:02d}:00.000000",
                      "pos": f"{number * 1000 + k:020d}", "primary_keys": ["ID"], "after": {"ID": k, "QTY": k % 7}})
    if number == 11:
        lines.append({"table": "DEMO.ITEMS", "op_type": "U", "op_ts": f"2024-01-01 00:{number:02d}:30.000000",
                      "pos": f"{number * 1000 + 999:020d}", "primary_keys": ["ID"], "before": {"ID": 1}, "after": {"ID": 1, "QTY": number}})
    Path(directory, f"batch-{number:03d}.json").write_text("\\n".join(json.dumps(m) for m in lines) + "\\n")'''),
    ("md", "## Twelve small merges\nEach run applies one small batch, as a scheduled job every few minutes would; each leaves a small file (the MERGE reads only the files its keys' range can be in)."),
    ("code", '''landing = Path(TARGET) / "landing"
landing.mkdir()
lake = str(Path(TARGET) / "lake")
files = []
for n in range(12):
    write_batch(landing, n, first_key=n * 50, count=50)
    s = lakecdc.apply(str(landing), lake, format="ogg-json", spark=spark)
    files.append(s.table("DEMO.ITEMS").files_line())
print("MERGE files read/pruned/rewritten per run:", files)
path = s.table("DEMO.ITEMS").target
before = lakecdc.read_table(path, spark=spark).orderBy("ID").collect()'''),
    ("md", "## Maintain\nZ-order by the key columns, keep a week of history, write a checkpoint."),
    ("code", '''reports = lakecdc.maintain(lake, zorder="keys")
for r in reports:
    print(r.line())
after = lakecdc.read_table(path, spark=spark).orderBy("ID").collect()
assert after == before, "maintenance never changes a row"
report = reports[0]
print(f"files: {report.files_before} -> {report.files_after}")'''),
    ("md", "## Files before and after"),
    ("code", '''import pandas as pd

pd.DataFrame({"files": [report.files_before, report.files_after],
              "MiB": [report.bytes_before / 2**20, report.bytes_after / 2**20]}, index=["before", "after"])'''),
])

notebook("03_monitoring.ipynb", [
    ("md", """# Monitoring: run reports and lag

Every run appends one row per table to the Delta table `<target>/_lakecdc_runs`: counts, MERGE
files, the newest source commit time applied and the lag behind it. Query it like any table, or
ask `lakecdc status`."""),
    ("code", SETUP),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format="ogg-json", keys=KEYS, spark=spark)
runs = lakecdc.read_table(f"{TARGET}/_lakecdc_runs", spark=spark)
runs.select("run_id", "source_table", "events", "inserted", "updated", "deleted", "quarantined",
            "seconds", "last_op_ts", "lag_seconds").orderBy("run_id", "source_table").show(truncate=False)'''),
    ("md", "## Status per table\nThe last run and how far behind the source each table is now (what `lakecdc status --target ...` prints)."),
    ("code", '''from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.runs import render_status, status

print(render_status(status(DeltaRsEngine(), TARGET)))'''),
    ("md", "## Throughput per run"),
    ("code", '''per_run = runs.groupBy("run_id").sum("events", "seconds").orderBy("run_id").toPandas()
per_run["events_per_second"] = per_run["sum(events)"] / per_run["sum(seconds)"]
per_run'''),
])
print("written")
