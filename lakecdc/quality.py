"""Data quality: Great Expectations (1.x) suites from data contracts, run on Spark DataFrames.

For each table with a contract, :func:`check_tables` validates the merged Delta table with a GX
suite generated from the contract, plus two checks GX cannot express:

========================================  ========  ==================================================
check                                     severity  what fails it
========================================  ========  ==================================================
every declared column exists (GX)         fail      a contract column the table lacks
key columns not null (GX)                 fail      a NULL in a key column
key unique (GX, compound when several)    fail      two rows with one key
required columns not null (GX)            warn      a NULL where the contract says ``required``
schema matches the contract               warn      retyped or undeclared columns (``contract check``)
row count reconciles with the last run    fail      rows before + inserted - deleted != rows after
========================================  ========  ==================================================

:func:`check_changes` validates an incoming change stream (``lakecdc.read_changes``): ops valid,
keys present, ``op_ts`` parseable and not in the future.

Results go to the Delta table ``<target>/_lakecdc_checks`` (one row per check and run) and to the
caller; ``lakecdc check`` prints them and exits 1 when a ``fail`` check failed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakecdc.contracts import Contract, check_contract

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from lakecdc.merge.delta_rs import DeltaRsEngine

CHECKS_APP_ID = "lakecdc-checks"


@dataclass(frozen=True)
class CheckResult:
    """One check of one table."""

    source_table: str
    check: str
    severity: str  # "fail" or "warn"
    success: bool
    unexpected: int | None = None
    details: str = ""

    def line(self) -> str:
        mark = "ok  " if self.success else ("FAIL" if self.severity == "fail" else "warn")
        extra = f" ({self.unexpected} unexpected)" if self.unexpected else ""
        detail = f": {self.details}" if self.details and not self.success else ""
        return f"{mark} {self.source_table}: {self.check}{extra}{detail}"


def _gx_suite(name: str, contract: Contract) -> tuple[Any, dict[str, str]]:
    """The GX suite for a merged table, and each expectation's severity by its description."""
    import great_expectations as gx
    import great_expectations.expectations as gxe

    _context()
    suite = gx.ExpectationSuite(name=name)
    severity: dict[str, str] = {}

    def add(expectation: Any, label: str, level: str) -> None:
        expectation.description = label
        suite.add_expectation(expectation)
        severity[label] = level

    for column, _ in contract.columns:
        add(gxe.ExpectColumnToExist(column=column), f"column {column} exists", "fail")
    for column in contract.keys:
        add(gxe.ExpectColumnValuesToNotBeNull(column=column), f"key column {column} not null", "fail")
    if len(contract.keys) == 1:
        add(gxe.ExpectColumnValuesToBeUnique(column=contract.keys[0]), f"key {contract.keys[0]} unique", "fail")
    elif contract.keys:
        add(gxe.ExpectCompoundColumnsToBeUnique(column_list=list(contract.keys)),
            f"key ({', '.join(contract.keys)}) unique", "fail")
    for column in contract.required:
        if column not in contract.keys:
            add(gxe.ExpectColumnValuesToNotBeNull(column=column), f"required column {column} not null", "warn")
    return suite, severity


def _context() -> Any:
    """A fresh in-memory GX context, made the active one (suites need one), without progress bars."""
    import logging

    import great_expectations as gx

    logging.getLogger("great_expectations").setLevel(logging.ERROR)
    ctx = gx.get_context(mode="ephemeral")
    with contextlib.suppress(Exception):  # cosmetic only
        ctx.variables.progress_bars = {"globally": False}  # type: ignore[assignment]
    return ctx


def _validate(df: DataFrame, suite: Any, severity: dict[str, str], table: str) -> list[CheckResult]:
    import great_expectations as gx

    ctx = gx.get_context()
    asset = ctx.data_sources.add_spark("lakecdc").add_dataframe_asset(table)
    batch = asset.add_batch_definition_whole_dataframe("whole").get_batch(batch_parameters={"dataframe": df})
    outcome = batch.validate(ctx.suites.add(suite))
    out = []
    for r in outcome.results:
        label = r.expectation_config.description or r.expectation_config.type
        unexpected = (r.result or {}).get("unexpected_count")
        out.append(CheckResult(table, label, severity.get(label, "fail"), bool(r.success),
                               int(unexpected) if unexpected is not None else None))
    return out


def _reconcile(engine: DeltaRsEngine, target: str, table: str, path: str) -> CheckResult | None:
    """Rows before the table's last merge + inserted - deleted == rows after it."""
    from lakecdc.runs import runs_path

    if not engine.exists(runs_path(target)):
        return None
    runs = engine.read_arrow(runs_path(target)).to_pylist()
    mine = [r for r in runs if r["source_table"] == table and r["delta_version"] is not None
            and r["status"] == "applied" and (r["inserted"] or r["deleted"] or r["updated"])]
    if not mine:
        return None
    last = max(mine, key=lambda r: r["run_id"])
    version = int(last["delta_version"])
    rows_after = _rows_at(engine, path, version)
    rows_before = _rows_at(engine, path, version - 1) if version > 0 else 0
    expected = rows_before + int(last["inserted"]) - int(last["deleted"])
    ok = rows_after == expected
    return CheckResult(table, f"row count reconciles with run {last['run_id']}", "fail", ok,
                       None if ok else abs(rows_after - expected),
                       f"{rows_before} before + {last['inserted']} inserted - {last['deleted']} deleted = "
                       f"{expected}, table holds {rows_after} at version {version}")


def _rows_at(engine: DeltaRsEngine, path: str, version: int) -> int:
    from deltalake import DeltaTable

    table = DeltaTable(path, version=version, storage_options=engine.storage_options or None)
    return sum(int(n) for n in pa.table(table.get_add_actions(flatten=True)).column("num_records").to_pylist())


def check_tables(
    target: str, contracts: dict[str, Contract], *, spark: SparkSession, tables: list[str] | None = None,
    record: bool = True,
) -> list[CheckResult]:
    """Validate each table that has a contract (see the module docstring); keep the results."""
    from lakecdc.merge.delta_rs import DeltaRsEngine
    from lakecdc.state import known_tables, table_path

    engine = DeltaRsEngine()
    known = known_tables(target)
    out: list[CheckResult] = []
    for table in tables or sorted(known):
        contract = contracts.get(table)
        if contract is None:
            out.append(CheckResult(table, "has a data contract", "warn", False, details="no contract: nothing to check"))
            continue
        path = table_path(target, table)
        suite, severity = _gx_suite(f"{table} merged", contract)
        out += _validate(engine.read(spark, path), suite, severity, table)
        drift = check_contract(contract, engine.schema(path), known.get(table))
        out.append(CheckResult(table, "schema matches the contract", "warn", not drift, len(drift) or None, "; ".join(drift)))
        reconciled = _reconcile(engine, target, table, path)
        if reconciled is not None:
            out.append(reconciled)
    if record and out:
        _record(engine, target, out)
    return out


def check_changes(events: DataFrame, *, now: dt.datetime | None = None) -> list[CheckResult]:
    """Validate an incoming change stream (canonical events of ``lakecdc.read_changes``)."""
    import great_expectations as gx
    import great_expectations.expectations as gxe
    from pyspark.sql import functions as F

    rows = events.where(F.col("op").isNotNull() & F.col("_error").isNull())
    _context()
    suite = gx.ExpectationSuite(name="changes")
    severity = {}
    for exp, label, level in (
        (gxe.ExpectColumnValuesToBeInSet(column="op", value_set=["I", "U", "D", "T", "R"]), "op is I/U/D/T/R", "fail"),
        (gxe.ExpectColumnValuesToNotBeNull(column="op_ts"), "op_ts parsed", "fail"),
        (gxe.ExpectColumnValuesToNotBeNull(column="table"), "table named", "fail"),
    ):
        exp.description = label
        suite.add_expectation(exp)
        severity[label] = level
    out = _validate(rows, suite, severity, "changes")
    now = now or dt.datetime.now(dt.timezone.utc)
    stats = rows.agg(
        F.sum(F.when(F.col("op_ts") > F.lit(now), 1).otherwise(0)).alias("future"),
        F.sum(F.when((F.col("op") != "T") & F.col("keys").isNull(), 1).otherwise(0)).alias("keyless"),
    ).first()
    future, keyless = int(stats["future"] or 0), int(stats["keyless"] or 0)
    out.append(CheckResult("changes", "op_ts not in the future", "fail", future == 0, future or None))
    out.append(CheckResult("changes", "messages carry their keys", "warn", keyless == 0, keyless or None,
                           "keys must come from --key or a contract"))
    return out


def _record(engine: DeltaRsEngine, target: str, results: list[CheckResult]) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    rows = [{**asdict(r), "checked_at": now} for r in results]
    schema = pa.schema([("source_table", pa.string()), ("check", pa.string()), ("severity", pa.string()),
                        ("success", pa.bool_()), ("unexpected", pa.int64()), ("details", pa.string()),
                        ("checked_at", pa.timestamp("us", tz="UTC"))])
    version = int(now.timestamp() * 1000)
    engine.append(f"{target}/_lakecdc_checks", pa.Table.from_pylist(rows, schema=schema), version=version,
                  app_id=CHECKS_APP_ID)


def results_json(results: list[CheckResult]) -> str:
    return json.dumps([asdict(r) for r in results], indent=2)
