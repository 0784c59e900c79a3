"""Writes the notebooks of this folder, runs them and saves them with their outputs (run it after
editing a cell here, then commit the notebooks with it):

    .venv/bin/python notebooks/make_notebooks.py              # write, run, save with outputs
    .venv/bin/python notebooks/make_notebooks.py --no-run     # write the cells only

Keeping the cells in Python keeps them reviewable and identical across notebooks (the parameters
and setup cells). Every notebook runs unchanged on Databricks and in Jupyter:

* its parameters cell (tagged ``parameters``, so papermill can set them) holds relative defaults:
  the change files bundled in ``jobs/`` and a target under the working directory; on Databricks
  the same parameters are widgets (``dbutils.widgets``), which a job's task can set;
* the session is ``SparkSession.builder.getOrCreate()``: Databricks' ``spark``, else a local one;
* tables are shown with Databricks' ``display`` there, as pandas tables elsewhere.

The notebooks run in one kernel, in a scratch copy of the repository's ``jobs/`` and
``data_contracts/`` (:func:`run_notebooks`; tests/test_notebooks.py runs them the same way), so
nothing is written into the repository and the saved outputs show relative paths only.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import nbformat as nbf

OUT = Path(__file__).resolve().parent
ROOT = OUT.parent
KERNEL = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
          "language_info": {"name": "python"}}
#: What a notebook reads from the repository, copied next to the scratch copy of the notebooks.
INPUTS = ("jobs", "data_contracts")
#: The kernel's first cell before each notebook: an empty namespace, no figure left open.
RESET_CELL = ("%reset -f\nimport sys\nif 'matplotlib.pyplot' in sys.modules:\n"
              "    sys.modules['matplotlib.pyplot'].close('all')")

#: Each notebook's cells: ("md", text), ("code", source) or ("parameters", source).
NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}


def notebook(name: str, cells: list[tuple[str, str]]) -> None:
    NOTEBOOKS[name] = cells


def parameters(comment: str, **defaults: str) -> tuple[str, str]:
    """The parameters cell: papermill's (tagged ``parameters``), the widgets' defaults on Databricks."""
    lines = [f"# {line}" if line else "#" for line in comment.splitlines()]
    lines += [f"{name} = {json.dumps(value)}" for name, value in defaults.items()]
    return ("parameters", "\n".join(lines))


def setup(*names: str, extra: str = "") -> str:
    """The setup cell: the parameters ``names`` from Databricks widgets there, the Spark session,
    a fresh target, and ``show``."""
    widgets = "\n".join(f'    dbutils.widgets.text("{n}", {n})\n    {n} = dbutils.widgets.get("{n}")' for n in names)
    return f'''import os
import shutil
import sys
from pathlib import Path

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

import lakecdc

ON_DATABRICKS = "DATABRICKS_RUNTIME_VERSION" in os.environ
if ON_DATABRICKS:  # the parameters are the notebook's widgets (a job's task can set them)
{widgets}

# Spark's Python workers run this Python, which has lakecdc's dependencies (Databricks' already do).
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
spark = SparkSession.builder.getOrCreate()  # Databricks' `spark`, or a local session
pd.set_option("display.max_colwidth", None)


def show(df, rows: int = 20) -> None:
    """``df`` as a table: Databricks' ``display`` there, its first ``rows`` rows as a pandas table elsewhere."""
    display(df if ON_DATABRICKS else df.limit(rows).toPandas())


def fresh(path: str) -> str:
    """An empty directory at ``path`` for this notebook's tables. What an earlier run of this notebook
    left there is removed; a directory the notebook did not create is used as it is, never emptied."""
    mark = Path(path, ".lakecdc-notebook")
    if mark.exists():
        shutil.rmtree(path)
    if not Path(path).exists():
        Path(path).mkdir(parents=True)
        mark.touch()
    return path

{extra}'''.rstrip()


SAMPLE_SETUP = setup("LANDING", "TARGET", extra='''
assert Path(LANDING).is_dir(), f"LANDING {LANDING!r} is not a directory: set it to your change files"
TARGET = fresh(TARGET)
KEYS = {"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID"]}  # messages without primary_keys
print("Spark", spark.version, "| landing:", LANDING, "| target:", TARGET)''')


def sample_parameters(name: str) -> tuple[str, str]:
    """The parameters cell of a notebook on the bundled GoldenGate JSON sample."""
    return parameters(
        """Parameters (papermill sets them; on Databricks they are the notebook's widgets).
LANDING: a directory of change files, here the sample bundled with lakecdc (GoldenGate JSON);
on Databricks e.g. "/Volumes/main/cdc/landing/".
TARGET: where the Delta tables go, a directory under the working directory here;
on Databricks e.g. "/Volumes/main/cdc/lake/".""",
        LANDING="../jobs/sample/landing", TARGET=f"lakecdc-demo/{name}")


notebook("01_quickstart.ipynb", [
    ("md", """# lakecdc quickstart: change files to Delta tables, exactly once

GoldenGate JSON change messages (inserts, partial updates, a primary-key update, a replayed
duplicate and one broken record) are decoded, ordered by the source's own position, folded to one
net change per key and MERGEd into one Delta table per source table. Runs unchanged on Databricks
(it uses your `spark`; set the widgets) and in Jupyter with a local Spark (set the parameters):
no Delta jars needed."""),
    sample_parameters("quickstart"),
    ("code", SAMPLE_SETUP),
    ("md", "## Apply the change files\nOne call; the summary says what happened to every table."),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format="ogg-json", keys=KEYS, spark=spark)
print(summary.render())'''),
    ("md", "## Query the tables\n`lakecdc.read_table` reads a Delta table into Spark (Delta's reader on Databricks, the Delta log's files elsewhere). The `_cdc_` columns keep each row's sequence, op and source commit time."),
    ("code", '''orders = lakecdc.read_table(summary.table("QASOURCE.TCUSTORD").target, spark=spark)
show(orders.orderBy("ORDER_ID"))'''),
    ("code", '''customers = lakecdc.read_table(summary.table("QASOURCE.TCUSTMER").target, spark=spark)
show(customers.orderBy("CUST_CODE"))'''),
    ("md", "## Run it again: nothing changes\nEvery input file is applied once; a re-run (or a crash and a re-run) neither loses nor duplicates a change."),
    ("code", '''again = lakecdc.apply(LANDING, TARGET, format="ogg-json", keys=KEYS, spark=spark)
print(again.render())
assert again.runs == (), "nothing new to apply"'''),
    ("md", "## Time travel\nEvery run is one Delta commit per table; older versions stay readable (within the vacuum retention)."),
    ("code", '''orders_table = summary.table("QASOURCE.TCUSTORD")
for version in range(orders_table.delta_version + 1):
    print("version", version, lakecdc.read_table(orders_table.target, version=version, spark=spark).count(), "rows")'''),
    ("md", "## The change events themselves\n`read_changes` gives the decoded canonical events (ops-style), good and bad records alike."),
    ("code", '''events = lakecdc.read_changes(LANDING, format="ogg-json", spark=spark)
show(events.groupBy("table", "op").count().orderBy("table", "op"))'''),
    ("md", "## The quarantine\nRecords that could not be applied are kept with their file, line, raw text and the reason."),
    ("code", '''quarantine = lakecdc.read_table(summary.quarantine, spark=spark)
show(quarantine.select(F.regexp_extract("file", "[^/]+$", 0).alias("file"), "line", "reason"))'''),
])

notebook("02_maintenance.ipynb", [
    ("md", """# Keeping tables fast: compaction, Z-order, vacuum, checkpoints

Merges every few minutes leave many small files. `lakecdc.maintain` bin-packs them (or Z-orders
by the key columns, so that each MERGE reads only the files its keys are in), vacuums old files
within a retention, and writes a checkpoint. Rows never change."""),
    parameters("""Parameters (papermill sets them; on Databricks they are the notebook's widgets).
TARGET: where the demo writes its change files and Delta tables, a directory under the working
directory here; on Databricks e.g. "/Volumes/main/cdc/demo/maintenance".""", TARGET="lakecdc-demo/maintenance"),
    ("code", setup("TARGET", extra='''
TARGET = fresh(TARGET)
print("Spark", spark.version, "| target:", TARGET)''')),
    ("md", "## Twelve small merges\nEach run applies one small batch, as a scheduled job every few minutes would; each leaves a small file (the MERGE reads only the files its keys' range can be in)."),
    ("code", '''import json


def write_batch(directory, number, first_key, count):
    """A small GoldenGate JSON batch: inserts of new keys (and, in the last one, an update of key 1)."""
    lines = []
    for k in range(first_key, first_key + count):
        lines.append({"table": "DEMO.ITEMS", "op_type": "I", "op_ts": f"2024-01-01 00:{number:02d}:00.000000",
                      "pos": f"{number * 1000 + k:020d}", "primary_keys": ["ID"], "after": {"ID": k, "QTY": k % 7}})
    if number == 11:
        lines.append({"table": "DEMO.ITEMS", "op_type": "U", "op_ts": f"2024-01-01 00:{number:02d}:30.000000",
                      "pos": f"{number * 1000 + 999:020d}", "primary_keys": ["ID"], "before": {"ID": 1}, "after": {"ID": 1, "QTY": number}})
    Path(directory, f"batch-{number:03d}.json").write_text("\\n".join(json.dumps(m) for m in lines) + "\\n")


landing = Path(TARGET) / "landing"
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
    ("code", '''import matplotlib.pyplot as plt

sizes = pd.DataFrame({"files": [report.files_before, report.files_after],
                      "MiB": [report.bytes_before / 2**20, report.bytes_after / 2**20]}, index=["before", "after"])
ax = sizes["files"].plot.bar(title="DEMO.ITEMS: data files before and after maintenance", rot=0)
ax.set_ylabel("files")
plt.show()
sizes'''),
])

notebook("03_monitoring.ipynb", [
    ("md", """# Monitoring: run reports and lag

Every run appends one row per table to the Delta table `<target>/_lakecdc_runs`: counts, MERGE
files, the newest source commit time applied and the lag behind it. Query it like any table, or
ask `lakecdc status`."""),
    sample_parameters("monitoring"),
    ("code", SAMPLE_SETUP),
    ("md", "## One run per arriving file\nAs a scheduled job would: each run applies the files that arrived since the last one (here one file each)."),
    ("code", '''for file in sorted(str(p) for p in Path(LANDING).iterdir() if p.is_file()):
    summary = lakecdc.apply([file], TARGET, format="ogg-json", keys=KEYS, spark=spark)
    print(Path(file).name, "-> run(s)", summary.runs, [(t.source_table, t.events) for t in summary.tables])
runs = lakecdc.read_table(f"{TARGET}/_lakecdc_runs", spark=spark)
show(runs.select("run_id", "source_table", "events", "inserted", "updated", "deleted", "quarantined",
                 "seconds", "last_op_ts", "lag_seconds").orderBy("run_id", "source_table"))'''),
    ("md", "## Status per table\nThe last run, its status and how far behind the source each table is now (what `lakecdc status --target ...` prints)."),
    ("code", '''status = runs.groupBy("source_table").agg(
    F.max("run_id").alias("last_run"),
    F.max_by("status", "run_id").alias("status"),
    F.max("finished_at").alias("finished"),
    F.max("last_op_ts").alias("newest_op_ts"),
    F.count("*").alias("runs"),
    F.sum("events").alias("events"),
).withColumn("lag", F.current_timestamp() - F.col("newest_op_ts"))
show(status.orderBy("source_table"))'''),
    ("md", "## Throughput and lag per run\nCharts from `_lakecdc_runs`: events per second of each run (a run's `seconds` is on each of its tables' rows: counted once per run), and each table's lag behind its source."),
    ("code", '''import matplotlib.pyplot as plt

per_run = (runs.groupBy("run_id")
           .agg(F.sum("events").alias("events"), F.max("seconds").alias("seconds"))
           .withColumn("events_per_second", F.col("events") / F.col("seconds"))
           .orderBy("run_id").toPandas())
lag = (runs.select("run_id", "source_table", (F.col("lag_seconds") / 86400).alias("lag_days"))
       .toPandas().pivot(index="run_id", columns="source_table", values="lag_days"))
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
per_run.plot.bar(x="run_id", y="events_per_second", ax=left, legend=False, rot=0, title="events per second, per run")
lag.plot.bar(ax=right, rot=0, title="lag behind the source (days), per table")
right.set_ylim(0, 1.35 * lag.max().max())
right.legend(loc="upper center", ncol=2)
plt.tight_layout()
plt.show()
per_run'''),
])


def family_parameters(family: str) -> tuple[str, str]:
    """The parameters cell of a source family's notebook: its bundled example folder jobs/<family>/."""
    return parameters(f"""Parameters (papermill sets them; on Databricks they are the notebook's widgets).
EXAMPLE: the jobs/{family} folder of the lakecdc repository (change files written by
jobs/make_samples.py); on Databricks a copy of it in a volume, e.g. "/Volumes/main/cdc/{family}".
TARGET: where the Delta tables go, a directory under the working directory here;
on Databricks e.g. "/Volumes/main/cdc/lake/".""", EXAMPLE=f"../jobs/{family}", TARGET=f"lakecdc-demo/{family}")


def family_setup(family: str, extra: str = "") -> str:
    """The setup cell of a source family's notebook."""
    lines = [
        "",
        f'assert Path(EXAMPLE, "landing").is_dir(), f"EXAMPLE {{EXAMPLE!r}} is not the jobs/{family} folder of lakecdc"',
        'LANDING = f"{EXAMPLE}/landing"',
        "TARGET = fresh(TARGET)",
        *([extra] if extra else []),
        'print("Spark", spark.version, "| landing:", LANDING, "| target:", TARGET)',
    ]
    return setup("EXAMPLE", "TARGET", extra="\n".join(lines))


#: The columns of decoded change events the family notebooks show.
EVENT_COLUMNS = '''.select("table", "op", "pos", "before", "after").orderBy("seq")'''

notebook("04_goldengate.ipynb", [
    ("md", """# GoldenGate delimited text, configured by the replicat's gg.properties

GoldenGate for Big Data writes the trail through a handler and a formatter, configured in the
replicat's Java properties file (`gg.handler.<name>.format=delimitedtext`, `...format.fieldDelimiter`, ...).
Delimited text is *row-modeled*: one record per operation, `op|table|op_ts|current_ts|pos|values`,
an insert or update with the row after it, a delete with the row before it. A column the trail did
not log is written as `missingValueRepresentation` (empty): lakecdc reads it as *missing*, so it
never overwrites the table; NULL is `NULL`. lakecdc reads the formatter's settings from the same
properties file, so the files are read exactly as they were written (`jobs/goldengate.yaml`)."""),
    family_parameters("goldengate"),
    ("code", family_setup("goldengate")),
    ("md", "## The replicat's properties and the files\n`read_gg_properties` maps the handler's format to a lakecdc format and its `format.*` properties to options. The tables' `<table>.schema.json` (GoldenGate writes them to `dirdef/`) give the column names and types."),
    ("code", '''from lakecdc.decode.goldengate.properties import read_gg_properties

FORMAT, OPTIONS = read_gg_properties(f"{EXAMPLE}/gg.properties")
OPTIONS["schemaDirectory"] = f"{EXAMPLE}/dirdef"
KEYS = {"SHOP.CUSTOMERS": ["ID"], "SHOP.ORDERS": ["ID"]}  # delimited records carry no key names
print(FORMAT, OPTIONS)
print((Path(LANDING) / "shop_2024-05-01_09-00-02.txt").read_text())'''),
    ("md", "## Decoded change events\nBob's move logged `CITY` only: `NAME` and `TIER` are absent from the image (missing), not NULL. Customer 3's new key 30 was written as a delete and an insert at one position (`pkUpdateHandling=delete-insert`); lakecdc joins them back into one key change, whose insert lacked `TIER`."),
    ("code", '''events = lakecdc.read_changes(LANDING, format=FORMAT, options=OPTIONS, spark=spark)
show(events.where("table = 'SHOP.CUSTOMERS'")''' + EVENT_COLUMNS + ")"),
    ("md", "## Apply, query, apply again"),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format=FORMAT, options=OPTIONS, keys=KEYS, spark=spark)
print(summary.render())
customers = lakecdc.read_table(summary.table("SHOP.CUSTOMERS").target, spark=spark).orderBy("ID")
show(customers.select("ID", "NAME", "CITY", "TIER", "_cdc_op"))
show(lakecdc.read_table(summary.table("SHOP.ORDERS").target, spark=spark).orderBy("ID").select(
    "ID", "CUSTOMER_ID", "AMOUNT", "STATUS"))
by_id = {r["ID"]: r for r in customers.collect()}
assert by_id[2]["NAME"] == "Bob" and by_id[2]["CITY"] == "Lyon", "the partial update kept NAME"
assert 3 not in by_id and by_id[30]["TIER"] == "bronze", "the key change moved the row and kept TIER"
print("customer 30 kept TIER:", by_id[30]["TIER"])
again = lakecdc.apply(LANDING, TARGET, format=FORMAT, options=OPTIONS, keys=KEYS, spark=spark)
print(again.render())
assert again.runs == (), "nothing new to apply"'''),
    ("md", "## Without `pkUpdateHandling=delete-insert`\nTold nothing, lakecdc reads the two records as what they are: a delete of 3 and an insert of 30 that lacks `TIER` (the new row would hold `TIER` NULL). Keep the option in step with the formatter's: reading the properties file does that."),
    ("code", '''plain = {**OPTIONS, "pkUpdateHandling": "abend"}
show(lakecdc.read_changes(LANDING, format=FORMAT, options=plain, spark=spark).where(
    "pos = '00000000000000002004'")''' + EVENT_COLUMNS + ")"),
])

notebook("05_debezium.ipynb", [
    ("md", """# Debezium: change events from Kafka Connect, whole transactions only

Debezium writes one Kafka record per row change: the key (`{"id": 2}`) and the value, an envelope
`{before, after, source, op, ts_ms, transaction}` with `op` `c`/`u`/`d`/`r` (with
`schemas.enable=true` each is `{"schema": ..., "payload": ...}`). A delete is followed by a
*tombstone* (a null value), a primary-key change is a delete, a tombstone and a create, and the
transaction topic's BEGIN/END markers say which events form a source transaction. lakecdc reads
topic dumps of these records (`debezium-json`; `debezium-avro` for the Avro converter, which
`jobs/debezium.yaml` also reads) and orders them by the source position (here PostgreSQL's LSN),
never by arrival."""),
    family_parameters("debezium"),
    ("code", family_setup("debezium", extra='FILES = sorted(str(p) for p in Path(LANDING).glob("*.json"))')),
    ("md", "## One record\nA key line, then its value: Bob's move. `notes` is a TOASTed column the update did not change: PostgreSQL did not send it and Debezium wrote its placeholder, which lakecdc reads as *missing* (the table keeps the value)."),
    ("code", '''import json

lines = Path(FILES[1]).read_text().splitlines()
key, value = (json.loads(x)["payload"] for x in lines[1:3])
print("key:", key)
print("value:", json.dumps({k: value[k] for k in ("op", "before", "after")}, indent=1))
print("source:", {k: value["source"][k] for k in ("connector", "schema", "table", "lsn", "txId")})'''),
    ("md", "## Decoded change events\nTombstones, key lines and transaction markers are skipped (counted); the key change is the delete of 3 and the create of 30."),
    ("code", '''events = lakecdc.read_changes(LANDING, format="debezium-json", spark=spark)
show(events.where("op IS NOT NULL")''' + EVENT_COLUMNS + ")"),
    ("md", "## Whole transactions only\nWith `complete_transactions=True` a source transaction is applied once its END marker and all its events have landed. The first two files end in the middle of the transaction that renumbers customer 3 and orders 102: its events wait (`held`) while the others apply, so no reader ever sees customer 3 deleted without customer 30."),
    ("code", '''first = lakecdc.apply(FILES[:2], TARGET, format="debezium-json", complete_transactions=True, spark=spark)
print(first.render())
print("held:", {t.source_table: t.held for t in first.tables})
summary = lakecdc.apply(LANDING, TARGET, format="debezium-json", complete_transactions=True, spark=spark)
print(summary.render())
assert all(t.held == 0 for t in summary.tables), "the transaction is complete now"'''),
    ("code", '''customers = lakecdc.read_table(summary.table("public.customers").target, spark=spark).orderBy("id")
show(customers.select("id", "name", "city", "notes"))
show(lakecdc.read_table(summary.table("public.orders").target, spark=spark).orderBy("id").select(
    "id", "customer_id", "amount", "status"))
by_id = {r["id"]: r for r in customers.collect()}
assert by_id[2]["city"] == "Lyon" and by_id[2]["notes"] == "VIP since 2019", "TOAST: notes kept"
print("customer 2 kept notes:", by_id[2]["notes"])
again = lakecdc.apply(LANDING, TARGET, format="debezium-json", complete_transactions=True, spark=spark)
print(again.render())
assert again.runs == (), "nothing new to apply"'''),
])

notebook("06_dts.ipynb", [
    ("md", """# Alibaba DTS: three formats into one target

A DTS subscription writes to Kafka in one of three formats: **DTS Avro** (its default: one Avro
`Record` per operation with whole-row images of typed values, keys in the `pk_uk_info` tag, BEGIN/
COMMIT/heartbeat records), **Canal JSON** (one message per statement, rows in `data`, an update's
previous values in `old`) and **SharePlex JSON** (one operation per message, an update's changed
columns in `data` and the old key in `key`). lakecdc reads each (`dts-avro`, `canal-json`,
`shareplex-json`); here three subscriptions land in one target, one table per format."""),
    family_parameters("dts"),
    ("code", family_setup("dts", extra='''SOURCES = {"avro": "dts-avro", "canal": "canal-json", "shareplex": "shareplex-json"}
KEYS = {"SALES.INVOICES": ["INVOICE_NO"]}  # SharePlex inserts and deletes carry no key names''')),
    ("md", "## DTS Avro, decoded\nWhole rows; customer 3 becoming 30 is one UPDATE whose images hold different keys; the BEGIN/COMMIT records, the heartbeat and the DDL are skipped."),
    ("code", '''events = lakecdc.read_changes(f"{LANDING}/avro", format="dts-avro", spark=spark)
show(events.where("op IS NOT NULL AND table = 'shop.customers'")''' + EVENT_COLUMNS + ")"),
    ("md", "## All three into one target\nEach table's order is its own format's (binlog time and position, Canal's `es` and `id`, SharePlex's SCN), so one table comes from one format."),
    ("code", '''summaries = {}
for folder, fmt in SOURCES.items():
    summaries[folder] = lakecdc.apply(f"{LANDING}/{folder}", TARGET, format=fmt, keys=KEYS, spark=spark)
    print(fmt, "\\n" + summaries[folder].render())
tables = {t.source_table: t.target for s in summaries.values() for t in s.tables}
print(sorted(tables))'''),
    ("code", '''for table, columns in {"shop.customers": ["id", "name", "city", "tier"],
                       "shop.orders": ["id", "customer_id", "amount", "status"],
                       "shop.payments": ["id", "order_id", "amount", "method", "state"],
                       "SALES.INVOICES": ["INVOICE_NO", "ORDER_ID", "TOTAL", "STATUS"]}.items():
    print(table)
    show(lakecdc.read_table(tables[table], spark=spark).select(*columns).orderBy(columns[0]))'''),
    ("md", "## Apply again: nothing new\nEvery source's files are recorded as applied in the target's ledger."),
    ("code", '''again = [lakecdc.apply(f"{LANDING}/{folder}", TARGET, format=fmt, keys=KEYS, spark=spark)
         for folder, fmt in SOURCES.items()]
assert all(s.runs == () for s in again), "nothing new to apply"
invoices = {r["INVOICE_NO"]: r for r in lakecdc.read_table(tables["SALES.INVOICES"], spark=spark).collect()}
assert set(invoices) == {7101} and invoices[7101]["STATUS"] == "paid", "renumbered, status kept"
print("tables in one target:", len(tables), "- nothing new on the second pass")'''),
])

notebook("07_qlik.ipynb", [
    ("md", """# Qlik Replicate: metadata messages, data messages and the column mask

Replicate's Kafka target writes a **metadata** message (`type: MD`) per table version (columns in
order, types, key positions) and **data** messages (`type: DT`) that name it by `messageSchemaId`:
`data`, `beforeData` and `headers` (`operation` REFRESH/INSERT/UPDATE/DELETE, `changeSequence`,
`columnMask`, `changeMask`). An update that did not log every column still writes every column,
the unlogged ones as null with their `columnMask` bit 0: lakecdc reads them as *missing*, so the
table keeps their values. The metadata is kept under the target, so later files decode without it."""),
    family_parameters("qlik"),
    ("code", family_setup("qlik")),
    ("md", "## Bob's move, as Replicate wrote it\n`columnMask` `05` = columns 1 and 3 (ID, CITY) were logged; NAME and TIER are null in `data` because they were not."),
    ("code", '''import json

message = json.loads((Path(LANDING) / "replicate-0002.json").read_text().splitlines()[0])["message"]
print(json.dumps(message["data"]), message["headers"]["operation"], "columnMask", message["headers"]["columnMask"])'''),
    ("md", "## Decoded change events\nThe metadata messages are skipped (counted); the full load is `R` (an upsert); Bob's move has `ID` and `CITY` only."),
    ("code", '''events = lakecdc.read_changes(LANDING, format="qlik-json", spark=spark)
show(events.where("op IS NOT NULL AND table = 'shop.customers'")''' + EVENT_COLUMNS + ")"),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format="qlik-json", spark=spark)
print(summary.render())
customers = lakecdc.read_table(summary.table("shop.customers").target, spark=spark).orderBy("ID")
show(customers.select("ID", "NAME", "CITY", "TIER"))
show(lakecdc.read_table(summary.table("shop.orders").target, spark=spark).orderBy("ID").select(
    "ID", "CUSTOMER_ID", "AMOUNT", "STATUS"))
bob = {r["ID"]: r for r in customers.collect()}[2]
assert (bob["NAME"], bob["CITY"], bob["TIER"]) == ("Bob", "Lyon", "silver"), "the mask kept NAME and TIER"
print("the columnMask kept Bob's TIER:", bob["TIER"])
again = lakecdc.apply(LANDING, TARGET, format="qlik-json", spark=spark)
print(again.render())
assert again.runs == (), "nothing new to apply"'''),
])

notebook("08_data_quality.ipynb", [
    ("md", """# Data quality: contracts, Great Expectations checks, failures and blocked tables

Each table's ODCS data contract (`data_contracts/`) declares its columns, types and key. lakecdc
generates Great Expectations suites from them: `check_tables` validates the merged tables (key
unique and not null, columns present, accepted values, row counts reconciled with the last run),
`check_changes` an incoming change stream (op types, op_ts, keys, order). Results go to the Delta
table `<target>/_lakecdc_checks`; a failed `fail` check blocks that table's next merge."""),
    parameters("""Parameters (papermill sets them; on Databricks they are the notebook's widgets).
LANDING: a directory of change files, here the sample bundled with lakecdc (GoldenGate JSON).
CONTRACTS: the directory of the tables' data contracts (ODCS YAML).
TARGET: where the Delta tables go, a directory under the working directory here;
on Databricks e.g. "/Volumes/main/cdc/lake/".""",
               LANDING="../jobs/sample/landing", CONTRACTS="../data_contracts", TARGET="lakecdc-demo/data_quality"),
    ("code", setup("LANDING", "CONTRACTS", "TARGET", extra='''
assert Path(LANDING).is_dir(), f"LANDING {LANDING!r} is not a directory: set it to your change files"
assert Path(CONTRACTS).is_dir(), f"CONTRACTS {CONTRACTS!r} is not a directory of data contracts"
TARGET = fresh(TARGET)
print("Spark", spark.version, "| landing:", LANDING, "| contracts:", CONTRACTS, "| target:", TARGET)''')),
    ("md", "## Apply with the contracts, then check the tables"),
    ("code", '''from lakecdc.check.contracts import load_contracts
from lakecdc.check.quality import blocked_tables, check_changes, check_tables

contracts = load_contracts(CONTRACTS)
summary = lakecdc.apply(LANDING, TARGET, format="ogg-json", contracts=CONTRACTS, spark=spark)
results = check_tables(TARGET, contracts, spark=spark, data_docs=False)
for r in results:
    print(r.line())
assert all(r.success for r in results if r.severity == "fail")'''),
    ("md", "## Check the change stream\nThe same files, before any merge: op types, commit times, keys (TCUSTORD's messages carry none: its contract names them) and the order of each key's events within a file."),
    ("code", '''events = lakecdc.read_changes(LANDING, format="ogg-json", spark=spark)
for r in check_changes(events, contracts=contracts, target=TARGET, data_docs=False):
    print(r.line())'''),
    ("md", "## A crafted bad table\nA copy of the target in which one customer row was written twice (as a broken writer might). The key check fails, the table is blocked: its next merge does not run until it is fixed (or accepted with `lakecdc check --unblock`)."),
    ("code", '''from deltalake import DeltaTable, write_deltalake

BAD = fresh(TARGET + "-bad")
shutil.copytree(TARGET, BAD, dirs_exist_ok=True)
customers = str(Path(BAD, Path(summary.table("QASOURCE.TCUSTMER").target).name))
write_deltalake(customers, DeltaTable(customers).to_pyarrow_table().slice(0, 1), mode="append")
bad = check_tables(BAD, contracts, spark=spark, data_docs=False)
for r in bad:
    if not r.success:
        print(r.line())
assert any(r.check == "key CUST_CODE unique" and not r.success for r in bad)
print(blocked_tables(BAD)["QASOURCE.TCUSTMER"])'''),
    ("md", "## The results table\nEvery check of every run, queryable like any Delta table (here the failures)."),
    ("code", '''checks = lakecdc.read_table(f"{BAD}/_lakecdc_checks", spark=spark)
show(checks.where("NOT success").select("source_table", "check", "severity", "unexpected"))'''),
])


def build(name: str) -> nbf.NotebookNode:
    """Notebook ``name`` without outputs, its cells with stable ids (regenerating changes only edited cells)."""
    nb = nbf.v4.new_notebook(metadata=KERNEL)
    for i, (kind, source) in enumerate(NOTEBOOKS[name]):
        cell = nbf.v4.new_markdown_cell(source) if kind == "md" else nbf.v4.new_code_cell(source)
        if kind == "parameters":
            cell.metadata["tags"] = ["parameters"]
        cell.id = f"cell-{i:02d}"
        nb.cells.append(cell)
    return nb


def scratch_copy(root: Path) -> Path:
    """The repository's inputs of the notebooks copied under ``root`` as they lie in the repository;
    returns the directory to run the notebooks in (``root/notebooks``)."""
    for name in INPUTS:
        shutil.copytree(ROOT / name, root / name)
    (root / "notebooks").mkdir()
    return root / "notebooks"


def start_kernel(cwd: Path):
    """A Jupyter kernel (``python3``) started in ``cwd``; shut it down with ``shutdown_kernel(now=True)``.

    What the JVM writes to the process's stderr (its start-up warnings, Spark's progress bars) stays
    in the kernel's log, as in a classic Jupyter kernel: the cells keep what Python prints and shows.
    """
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel(cwd=str(cwd), extra_arguments=["--IPKernelApp.capture_fd_output=False"])
    return km


def run(nb: nbf.NotebookNode, km) -> None:
    """Run ``nb``'s cells in the kernel ``km`` (in place: each cell gets its outputs), after clearing
    the namespace the notebook before it left (``%reset -f``), so none leans on another's variables;
    the Spark session (and its warm JVM) carries over, as a cluster's ``spark`` does on Databricks.
    Execution counts are numbered from 1. A cell that fails raises ``nbclient.exceptions.CellExecutionError``.
    """
    from nbclient import NotebookClient

    nb.cells.insert(0, nbf.v4.new_code_cell(RESET_CELL))
    # no cell time limit: a slow machine is not a failure (errors are)
    client = NotebookClient(nb, km=km, timeout=None, record_timing=False)
    try:
        client.execute()
    finally:
        nb.cells.pop(0)
        if client.kc is not None:
            client.kc.stop_channels()
    _number(nb)


def run_notebooks(notebooks: list[nbf.NotebookNode], cwd: Path) -> None:
    """Run ``notebooks`` one after the other in one kernel started in ``cwd`` (:func:`run`): a kernel
    and a JVM per notebook cost minutes on a small machine."""
    km = start_kernel(cwd)
    try:
        for nb in notebooks:
            run(nb, km)
    finally:
        km.shutdown_kernel(now=True)


def _number(nb: nbf.NotebookNode) -> None:
    """Execution counts 1, 2, ... in the notebook's own order (the shared kernel counts on)."""
    count = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        count += 1
        cell.execution_count = count
        for output in cell.outputs:
            if "execution_count" in output:
                output.execution_count = count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-run", action="store_true", help="write the cells only, without outputs")
    parser.add_argument("names", nargs="*", help="notebooks to write (default: all)")
    args = parser.parse_args(argv)
    names = args.names or list(NOTEBOOKS)
    notebooks = [build(name) for name in names]
    if not args.no_run:
        with tempfile.TemporaryDirectory(prefix="lakecdc-notebooks-") as root:
            run_notebooks(notebooks, scratch_copy(Path(root)))
    for name, nb in zip(names, notebooks, strict=True):
        nbf.write(nb, OUT / name)
        print("written", name, "(with outputs)" if not args.no_run else "(no outputs)", file=sys.stderr)


if __name__ == "__main__":
    main()
