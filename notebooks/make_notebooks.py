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
    ("code", '''import matplotlib.pyplot as plt
import pandas as pd

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
    ("code", SETUP),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format="ogg-json", keys=KEYS, spark=spark)
runs = lakecdc.read_table(f"{TARGET}/_lakecdc_runs", spark=spark)
runs.select("run_id", "source_table", "events", "inserted", "updated", "deleted", "quarantined",
            "seconds", "last_op_ts", "lag_seconds").orderBy("run_id", "source_table").show(truncate=False)'''),
    ("md", "## Status per table\nThe last run and how far behind the source each table is now (what `lakecdc status --target ...` prints)."),
    ("code", '''from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.lake.runs import render_status, status

print(render_status(status(DeltaRsEngine(), TARGET)))'''),
    ("md", "## Throughput and lag per run\nCharts from `_lakecdc_runs`: events per second of each run, and each table's lag behind its source."),
    ("code", '''import matplotlib.pyplot as plt

per_run = runs.groupBy("run_id").sum("events", "seconds").orderBy("run_id").toPandas()
per_run["events_per_second"] = per_run["sum(events)"] / per_run["sum(seconds)"]
lag = runs.select("run_id", "source_table", "lag_seconds").toPandas().pivot(
    index="run_id", columns="source_table", values="lag_seconds")
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.5))
per_run.plot.bar(x="run_id", y="events_per_second", ax=left, legend=False, rot=0, title="events per second, per run")
lag.plot(ax=right, marker="o", title="lag behind the source (s), per table")
plt.tight_layout()
plt.show()
per_run'''),
])


def family_setup(family: str) -> str:
    """The setup cell of a source family's notebook: its bundled example folder jobs/<family>/."""
    return f'''import tempfile
from pathlib import Path

import lakecdc

# The session you already have (Databricks, a cluster, Jupyter with Spark) is used as it is;
# without one, lakecdc starts a small local Spark session.
spark = lakecdc.get_spark()

# The example: jobs/{family}/ of the lakecdc repository (change files generated by jobs/make_samples.py).
# On Databricks copy that folder to a volume and set EXAMPLE to it, or point LANDING at your own
# landing volume, e.g. "/Volumes/main/cdc/landing/".
EXAMPLE = next((p.resolve() for p in (Path("../jobs/{family}"), Path("jobs/{family}")) if p.exists()), None)
assert EXAMPLE, "set EXAMPLE to the jobs/{family} folder of lakecdc (or LANDING to your change files)"
LANDING = str(EXAMPLE / "landing")
# Where the Delta tables go (a scratch directory here; on Databricks e.g. "/Volumes/main/cdc/lake/").
TARGET = tempfile.mkdtemp(prefix="lakecdc-{family}-")
print(spark.version, LANDING, TARGET)'''


SHOW_EVENTS = '''.select("table", "op", "pos", "before", "after").orderBy("seq").show(truncate=False)'''

notebook("04_goldengate.ipynb", [
    ("md", """# GoldenGate delimited text, configured by the replicat's gg.properties

GoldenGate for Big Data writes the trail through a handler and a formatter, configured in the
replicat's Java properties file (`gg.handler.<name>.format=delimitedtext`, `...format.fieldDelimiter`, ...).
Delimited text is *row-modeled*: one record per operation, `op|table|op_ts|current_ts|pos|values`,
an insert or update with the row after it, a delete with the row before it. A column the trail did
not log is written as `missingValueRepresentation` (empty): lakecdc reads it as *missing*, so it
never overwrites the table; NULL is `NULL`. lakecdc reads the formatter's settings from the same
properties file, so the files are read exactly as they were written (`jobs/goldengate.yaml`)."""),
    ("code", family_setup("goldengate")),
    ("md", "## The replicat's properties and the files\n`read_gg_properties` maps the handler's format to a lakecdc format and its `format.*` properties to options. The tables' `<table>.schema.json` (GoldenGate writes them to `dirdef/`) give the column names and types."),
    ("code", '''from lakecdc.decode.goldengate.properties import read_gg_properties

FORMAT, OPTIONS = read_gg_properties(EXAMPLE / "gg.properties")
OPTIONS["schemaDirectory"] = str(EXAMPLE / "dirdef")
KEYS = {"SHOP.CUSTOMERS": ["ID"], "SHOP.ORDERS": ["ID"]}  # delimited records carry no key names
print(FORMAT, OPTIONS)
print((Path(LANDING) / "shop_2024-05-01_09-00-02.txt").read_text())'''),
    ("md", "## Decoded change events\nBob's move logged `CITY` only: `NAME` and `TIER` are absent from the image (missing), not NULL. Customer 3's new key 30 was written as a delete and an insert at one position (`pkUpdateHandling=delete-insert`); lakecdc joins them back into one key change, whose insert lacked `TIER`."),
    ("code", '''events = lakecdc.read_changes(LANDING, format=FORMAT, options=OPTIONS, spark=spark)
events.where("table = 'SHOP.CUSTOMERS'")''' + SHOW_EVENTS),
    ("md", "## Apply, query, apply again"),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format=FORMAT, options=OPTIONS, keys=KEYS, spark=spark)
print(summary.render())
customers = lakecdc.read_table(summary.table("SHOP.CUSTOMERS").target, spark=spark).orderBy("ID")
customers.select("ID", "NAME", "CITY", "TIER", "_cdc_op").show()
lakecdc.read_table(summary.table("SHOP.ORDERS").target, spark=spark).orderBy("ID").select(
    "ID", "CUSTOMER_ID", "AMOUNT", "STATUS").show()
by_id = {r["ID"]: r for r in customers.collect()}
assert by_id[2]["NAME"] == "Bob" and by_id[2]["CITY"] == "Lyon", "the partial update kept NAME"
assert 3 not in by_id and by_id[30]["TIER"] == "bronze", "the key change moved the row and kept TIER"
print("customer 30 kept TIER:", by_id[30]["TIER"])
again = lakecdc.apply(LANDING, TARGET, format=FORMAT, options=OPTIONS, keys=KEYS, spark=spark)
print(again.render())
assert again.runs == (), "nothing new to apply"'''),
    ("md", "## Without `pkUpdateHandling=delete-insert`\nTold nothing, lakecdc reads the two records as what they are: a delete of 3 and an insert of 30 that lacks `TIER` (the new row would hold `TIER` NULL). Keep the option in step with the formatter's: reading the properties file does that."),
    ("code", '''plain = {**OPTIONS, "pkUpdateHandling": "abend"}
lakecdc.read_changes(LANDING, format=FORMAT, options=plain, spark=spark).where(
    "pos = '00000000000000002004'")''' + SHOW_EVENTS),
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
    ("code", family_setup("debezium") + '''
FILES = sorted(str(p) for p in Path(LANDING).glob("*.json"))'''),
    ("md", "## One record\nA key line, then its value: Bob's move. `notes` is a TOASTed column the update did not change: PostgreSQL did not send it and Debezium wrote its placeholder, which lakecdc reads as *missing* (the table keeps the value)."),
    ("code", '''import json

lines = Path(FILES[1]).read_text().splitlines()
key, value = (json.loads(x)["payload"] for x in lines[1:3])
print("key:", key)
print("value:", json.dumps({k: value[k] for k in ("op", "before", "after")}, indent=1))
print("source:", {k: value["source"][k] for k in ("connector", "schema", "table", "lsn", "txId")})'''),
    ("md", "## Decoded change events\nTombstones, key lines and transaction markers are skipped (counted); the key change is the delete of 3 and the create of 30."),
    ("code", '''events = lakecdc.read_changes(LANDING, format="debezium-json", spark=spark)
events.where("op IS NOT NULL")''' + SHOW_EVENTS),
    ("md", "## Whole transactions only\nWith `complete_transactions=True` a source transaction is applied once its END marker and all its events have landed. The first two files end in the middle of the transaction that renumbers customer 3 and orders 102: its events wait (`held`) while the others apply, so no reader ever sees customer 3 deleted without customer 30."),
    ("code", '''first = lakecdc.apply(FILES[:2], TARGET, format="debezium-json", complete_transactions=True, spark=spark)
print(first.render())
print("held:", {t.source_table: t.held for t in first.tables})
summary = lakecdc.apply(LANDING, TARGET, format="debezium-json", complete_transactions=True, spark=spark)
print(summary.render())
assert all(t.held == 0 for t in summary.tables), "the transaction is complete now"'''),
    ("code", '''customers = lakecdc.read_table(summary.table("public.customers").target, spark=spark).orderBy("id")
customers.select("id", "name", "city", "notes").show(truncate=False)
lakecdc.read_table(summary.table("public.orders").target, spark=spark).orderBy("id").select(
    "id", "customer_id", "amount", "status").show()
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
    ("code", family_setup("dts") + '''
SOURCES = {"avro": "dts-avro", "canal": "canal-json", "shareplex": "shareplex-json"}
KEYS = {"SALES.INVOICES": ["INVOICE_NO"]}  # SharePlex inserts and deletes carry no key names'''),
    ("md", "## DTS Avro, decoded\nWhole rows; customer 3 becoming 30 is one UPDATE whose images hold different keys; the BEGIN/COMMIT records, the heartbeat and the DDL are skipped."),
    ("code", '''events = lakecdc.read_changes(f"{LANDING}/avro", format="dts-avro", spark=spark)
events.where("op IS NOT NULL AND table = 'shop.customers'")''' + SHOW_EVENTS),
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
    lakecdc.read_table(tables[table], spark=spark).select(*columns).orderBy(columns[0]).show()'''),
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
    ("code", family_setup("qlik")),
    ("md", "## Bob's move, as Replicate wrote it\n`columnMask` `05` = columns 1 and 3 (ID, CITY) were logged; NAME and TIER are null in `data` because they were not."),
    ("code", '''import json

message = json.loads((Path(LANDING) / "replicate-0002.json").read_text().splitlines()[0])["message"]
print(json.dumps(message["data"]), message["headers"]["operation"], "columnMask", message["headers"]["columnMask"])'''),
    ("md", "## Decoded change events\nThe metadata messages are skipped (counted); the full load is `R` (an upsert); Bob's move has `ID` and `CITY` only."),
    ("code", '''events = lakecdc.read_changes(LANDING, format="qlik-json", spark=spark)
events.where("op IS NOT NULL AND table = 'shop.customers'")''' + SHOW_EVENTS),
    ("code", '''summary = lakecdc.apply(LANDING, TARGET, format="qlik-json", spark=spark)
print(summary.render())
customers = lakecdc.read_table(summary.table("shop.customers").target, spark=spark).orderBy("ID")
customers.select("ID", "NAME", "CITY", "TIER").show()
lakecdc.read_table(summary.table("shop.orders").target, spark=spark).orderBy("ID").select(
    "ID", "CUSTOMER_ID", "AMOUNT", "STATUS").show()
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
    ("code", SETUP + '''
CONTRACTS = next(str(p) for p in (Path("../data_contracts"), Path("data_contracts")) if p.exists())'''),
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
    ("code", '''import shutil

from deltalake import DeltaTable, write_deltalake

BAD = TARGET + "-bad"
shutil.copytree(TARGET, BAD)
customers = summary.table("QASOURCE.TCUSTMER").target.replace(TARGET, BAD)
write_deltalake(customers, DeltaTable(customers).to_pyarrow_table().slice(0, 1), mode="append")
bad = check_tables(BAD, contracts, spark=spark, data_docs=False)
for r in bad:
    if not r.success:
        print(r.line())
assert any(r.check == "key CUST_CODE unique" and not r.success for r in bad)
print(blocked_tables(BAD)["QASOURCE.TCUSTMER"])'''),
    ("md", "## The results table\nEvery check of every run, queryable like any Delta table (here the failures)."),
    ("code", '''checks = lakecdc.read_table(f"{BAD}/_lakecdc_checks", spark=spark)
checks.where("NOT success").select("source_table", "check", "severity", "unexpected").show(truncate=False)'''),
])
print("written")
