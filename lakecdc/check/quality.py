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
accepted values and ranges (GX)           warn      a value outside the property's
                                                    ``logicalTypeOptions`` (range, pattern, length),
                                                    ``enum`` or ``unique``; ``lakecdc.severity`` on
                                                    the property makes them ``fail``
quality rules (GX)                        fail      the contract's ``quality`` rules (``invalidValues``
                                                    / ``validValues``, ``nullValues``,
                                                    ``duplicateValues``, ``rowCount``) beyond their
                                                    limits; their ``severity: warning`` gives ``warn``
``custom`` rules, engine greatExpectations  fail      the expectation the rule's ``implementation``
                                                    names, with its ``kwargs``, fails
``sql`` rules (Spark SQL)                 fail      the query's value (``${object}`` / ``{object}``
                                                    is the table) breaks the rule's operators
other rules (unsupported)                 warn      never: ``text`` rules, other engines' ``custom``
                                                    rules and ``missingValues`` are reported
                                                    ``unsupported`` with their name, never skipped
schema matches the contract               warn      retyped or undeclared columns (``contract check``)
row count reconciles with the last run    fail      rows before + inserted - deleted != rows after
========================================  ========  ==================================================

(:mod:`lakecdc.check.contracts` describes the ODCS fields.) :func:`check_changes` validates an
incoming change stream (``lakecdc.read_changes``):

========================================  ========  ==================================================
op is I/U/D/T/R, op_ts parsed, table      fail      an unknown op, an unparseable ``op_ts``, no table
op_ts not in the future                   fail      a commit time after now
messages carry their keys                 warn      a row event without key columns (neither the
                                                    message nor a contract names them)
seq increases per key within a file       warn      for one table and key, in one input file in file
                                                    order, an event whose ``seq`` is below the one
                                                    before (out-of-order delivery)
seq not repeated per key within a file    warn      ... equal to the one before (a duplicate)
changed columns are present (masks)       warn      only for formats with column masks (Qlik's
                                                    ``source['present_columns']`` /
                                                    ``['changed_columns']``): a changed column the
                                                    mask says was not captured
present columns are the image's (masks)   fail      the row image (after, or before for a delete)
                                                    lacks a column the mask says was captured, or
                                                    has one it says was not
masks fit the table version (masks)       fail      a ``columnMask`` or ``changeMask`` (hex, in
                                                    ``source``) sets a bit the record's table version
                                                    has no column for (beyond its last ordinal, or
                                                    between them): ``source['version_mask']``, the
                                                    version's ordinals, lacks that bit (a mask longer
                                                    than the version only by leading zeros fits)
========================================  ========  ==================================================

**Where results go.** The Delta table ``<target>/_lakecdc_checks`` (one row per check and run),
the caller, and GX Data Docs HTML at ``<target>/_lakecdc/data_docs/index.html`` (a GX file
context under ``<target>/_lakecdc/gx/``; ``data_docs=False`` validates in memory, faster).

**A failed ``fail`` check blocks the table.** :func:`check_tables` writes
``<target>/_lakecdc/blocked/<table>.json`` naming the failed checks, and removes it once they
pass again. :func:`blocked_tables` lists the blocked tables with a one-line reason; the next
merge of a blocked table does not run (``lakecdc.apply`` reports it failed with that reason and
keeps its changes for a later run; the other tables merge). Fix the table and run ``lakecdc
check`` again, or accept it as it is with ``lakecdc check --unblock TABLE`` (:func:`unblock`).
``lakecdc check`` prints the results and exits 1 when a ``fail`` check failed.

Example:
    >>> results = check_tables("lake/", load_contracts("data_contracts/"), spark=spark)  # doctest: +SKIP
    >>> [r.line() for r in results if not r.success]                                     # doctest: +SKIP
    ['FAIL QASOURCE.TCUSTORD: key (CUST_CODE, ORDER_ID) unique (2 unexpected)']
"""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lakecdc.check import gx
from lakecdc.check.contracts import Contract, check_contract
from lakecdc.check.gx import DOCS_DIR, Suite, Validator
from lakecdc.check.rules import SQL_PLACEHOLDERS, Rule, meets
from lakecdc.lake.runs import runs_path
from lakecdc.lake.state import known_tables, table_dir_in, table_path
from lakecdc.merge.delta_rs import DeltaRsEngine

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

CHECKS_APP_ID = "lakecdc-checks"
CHANGES = "changes"


@dataclass(frozen=True)
class CheckResult:
    """One check of one table. An ``unsupported`` check is a contract rule lakecdc cannot run (a
    ``text`` rule, a ``custom`` rule of another engine than Great Expectations, the
    ``missingValues`` metric): reported, not passed (``success`` False, severity ``warn``: it
    blocks nothing), with the reason in ``details``."""

    source_table: str
    check: str
    severity: str  # "fail" or "warn"
    success: bool
    unexpected: int | None = None
    details: str = ""
    unsupported: bool = False

    def line(self) -> str:
        mark = "ok  " if self.success else ("skip" if self.unsupported else "FAIL" if self.severity == "fail" else "warn")
        extra = f" ({self.unexpected} unexpected)" if self.unexpected else ""
        detail = f": {self.details}" if self.details and not self.success else ""
        return f"{mark} {self.source_table}: {self.check}{extra}{detail}"


def table_suite(name: str, contract: Contract) -> Suite:
    """The GX suite for a merged table (see the module docstring)."""
    gx.load()
    import great_expectations.expectations as gxe

    suite = Suite(name)
    for column, _ in contract.columns:
        suite.add(gxe.ExpectColumnToExist(column=column), f"column {column} exists", "fail")
    for column in contract.keys:
        suite.add(gxe.ExpectColumnValuesToNotBeNull(column=column), f"key column {column} not null", "fail")
    if len(contract.keys) == 1:
        suite.add(gxe.ExpectColumnValuesToBeUnique(column=contract.keys[0]), f"key {contract.keys[0]} unique", "fail")
    elif contract.keys:
        suite.add(gxe.ExpectCompoundColumnsToBeUnique(column_list=list(contract.keys)),
                  f"key ({', '.join(contract.keys)}) unique", "fail")
    for column in contract.required:
        if column not in contract.keys:
            suite.add(gxe.ExpectColumnValuesToNotBeNull(column=column), f"required column {column} not null", "warn")
    for rule in contract.rules:
        if rule.kind not in ("sql", "unsupported"):
            suite.add_rule(rule)
    return suite


def _placeholders(query: str, view: str, column: str | None) -> str:
    """A ``sql`` rule's query with the checked table (``${object}``, ``{object}``, ``${table}``,
    ``{table}``) and, for a property's rule, its column (``${column}``, ``{column}``) put in."""
    for mark in SQL_PLACEHOLDERS:
        query = query.replace(mark, view)
    if column is not None:
        quoted = "`" + column.replace("`", "``") + "`"
        query = query.replace("${column}", quoted).replace("{column}", quoted)
    return query


def _sql_results(spark: SparkSession, rows: DataFrame, table: str, rules: list[Rule]) -> list[CheckResult]:
    """Run each ``sql`` rule on Spark over ``rows`` (a temporary view): its query's first value
    compared with the rule's operators (none: it must be 0), as ODCS defines them."""
    if not rules:
        return []
    view = f"lakecdc_check_{uuid.uuid4().hex}"
    rows.createOrReplaceTempView(view)
    out = []
    try:
        for rule in rules:
            query = _placeholders(dict(rule.options)["query"], view, rule.column)
            try:
                first = spark.sql(query).first()
            except Exception as exc:  # Spark's own parse and analysis errors, shown to the user
                message = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                out.append(CheckResult(table, rule.check, rule.severity, False, None,
                                       f"not checked: {rule.where}: {message}"))
                continue
            value = first[0] if first is not None and len(first) else None
            if not isinstance(value, (int, float, Decimal)) or isinstance(value, bool):
                out.append(CheckResult(table, rule.check, rule.severity, False, None,
                                       f"{rule.where}: the query returned {value!r}, not a number"))
                continue
            ok = meets(float(value), rule.limits)
            out.append(CheckResult(table, rule.check, rule.severity, ok, None, f"value {value}"))
    finally:
        spark.catalog.dropTempView(view)
    return out


def _unsupported_results(table: str, rules: list[Rule]) -> list[CheckResult]:
    """The contract's rules lakecdc cannot run, reported (never skipped without a word)."""
    return [CheckResult(table, r.check, "warn", False, None,
                        f"unsupported: {dict(r.options)['why']} ({r.where}, severity {r.severity})", unsupported=True)
            for r in rules if r.kind == "unsupported"]


def _validate(validator: Validator, df: DataFrame, suite: Suite, table: str) -> list[CheckResult]:
    broken = [CheckResult(table, check, severity, False, None, why) for check, severity, why in suite.broken]
    return [CheckResult(table, o.check, o.severity, o.success, o.unexpected, o.details)
            for o in validator.run(df, suite)] + broken


def _reconcile(engine: DeltaRsEngine, target: str, table: str, path: str) -> CheckResult | None:
    """Rows before the table's last merge + inserted - deleted == rows after it."""
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
    record: bool = True, data_docs: bool = True, gx_project: str | os.PathLike[str] | None = None,
    actions: Sequence[Any] = (),
) -> list[CheckResult]:
    """Validate each table that has a contract (see the module docstring).

    With ``record`` (the default) the results are appended to ``<target>/_lakecdc_checks``, each
    checked table is blocked or unblocked (:func:`blocked_tables`) and, with ``data_docs``, the
    Data Docs under ``<target>/_lakecdc/data_docs/`` are updated. ``record=False`` writes nothing.

    ``gx_project``: an existing Great Expectations project (the directory holding ``gx/``) to run
    the suites in, through its checkpoints ``lakecdc <table> merged`` (added to it; nothing of its
    own is removed; its Data Docs sites are rebuilt). ``actions``: GX checkpoint actions (such as
    ``great_expectations.checkpoint.SlackNotificationAction``) run after each table's validation.
    """
    engine = DeltaRsEngine()
    known = known_tables(target)
    validator = Validator(_root(target) if record and data_docs else None, gx_project=gx_project, actions=actions)
    out: list[CheckResult] = []
    for table in tables or sorted(known):
        contract = contracts.get(table)
        if contract is None:
            out.append(CheckResult(table, "has a data contract", "warn", False, details="no contract: nothing to check"))
            continue
        path = table_path(target, table)
        rows = engine.read(spark, path)
        if "__END_AT" in rows.columns:  # a history table: the contract describes its current versions
            rows = rows.where("__END_AT IS NULL")
        mine = _validate(validator, rows, table_suite(f"{table} merged", contract), table)
        mine += _sql_results(spark, rows, table, [r for r in contract.rules if r.kind == "sql"])
        mine += _unsupported_results(table, list(contract.rules))
        drift = check_contract(contract, engine.schema(path), known.get(table))
        mine.append(CheckResult(table, "schema matches the contract", "warn", not drift, len(drift) or None,
                                "; ".join(drift)))
        reconciled = _reconcile(engine, target, table, path)
        if reconciled is not None:
            mine.append(reconciled)
        if record:
            _set_blocked(target, table, [r for r in mine if r.severity == "fail" and not r.success])
        out += mine
    if record and out:
        _record(engine, target, out)
        validator.build_docs()
    return out


@dataclass(frozen=True)
class Totals:
    """What a check found, counted: tables checked and their rules passed, failed (``errors``:
    those of severity ``fail``) and unsupported."""

    tables: int
    passed: int
    failed: int
    errors: int
    unsupported: int

    @classmethod
    def of(cls, results: Sequence[CheckResult]) -> Totals:
        failed = [r for r in results if not r.success and not r.unsupported]
        return cls(tables=len({r.source_table for r in results if r.source_table != CHANGES}),
                   passed=sum(r.success for r in results), failed=len(failed),
                   errors=sum(r.severity == "fail" for r in failed), unsupported=sum(r.unsupported for r in results))

    def line(self) -> str:
        """``2 tables: 30 passed, 1 failed (1 error), 2 unsupported``."""
        return (f"{self.tables} table{'s' if self.tables != 1 else ''}: {self.passed} passed, {self.failed} failed "
                f"({self.errors} error{'s' if self.errors != 1 else ''}), {self.unsupported} unsupported")


# -- the change stream -------------------------------------------------------------------------


def _stream_columns(events: DataFrame, contracts: dict[str, Contract]) -> DataFrame:
    """The events with the derived columns the change-stream suite checks (NULL: not judged)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keyed = {t: list(c.keys) for t, c in contracts.items() if c.keys}
    keys: Column = F.col("keys")
    if keyed:
        declared = F.create_map(*[x for t, k in keyed.items() for x in (F.lit(t), F.array(*map(F.lit, k)))])
        keys = F.coalesce(keys, declared[F.col("table")])
    out = events.withColumn("key_columns", F.when(F.col("op") != "T", keys))
    if {"_file", "_row"} <= set(events.columns):
        values = F.transform(F.col("key_columns"), lambda k: F.coalesce(F.col("after")[k], F.col("before")[k]))
        key = F.array_join(values, "\u0001", "\u0000")
        order = [c for c in ("_block", "_row") if c in events.columns]
        previous = F.lag("seq").over(Window.partitionBy("table", key, "_file").orderBy(*order))
        out = out.withColumn("seq_vs_previous", F.when(F.col("key_columns").isNull() | previous.isNull(), None)
                             .when(F.col("seq") > previous, "higher").when(F.col("seq") == previous, "equal")
                             .otherwise("lower"))
    source = F.col("source")
    image = F.coalesce(F.col("after"), F.col("before"))
    present, changed = F.split(source["present_columns"], ","), F.split(source["changed_columns"], ",")
    out = out.withColumn("changed_columns_present", F.when(
        source["changed_columns"].isNotNull() & image.isNotNull(),
        F.forall(changed, lambda c: F.array_contains(F.coalesce(present, F.map_keys(image)), c))))
    out = out.withColumn("present_columns_are_image", F.when(
        source["present_columns"].isNotNull() & image.isNotNull(),
        F.array_sort(present) == F.array_sort(F.map_keys(image))))
    version = source["version_mask"]
    masks = [source["columnMask"], source["changeMask"]]
    return out.withColumn("masks_fit_version", F.when(
        version.isNotNull() & (masks[0].isNotNull() | masks[1].isNotNull()),
        _mask_within(masks[0], version) & _mask_within(masks[1], version)))


def _mask_within(mask: Column, version: Column) -> Column:
    """Whether the hex mask ``mask`` (NULL: no mask) sets only bits the hex mask ``version`` sets,
    digit by digit (masks of any width: Replicate's are one number over as many bytes as needed)."""
    from pyspark.sql import functions as F

    width = F.greatest(F.length(mask), F.length(version))
    mask_digits, version_digits = (F.split(F.lpad(m, width, "0"), "") for m in (mask, version))
    fits = F.forall(F.zip_with(mask_digits, version_digits, lambda m, v: F.conv(m, 16, 10).cast("int").bitwiseAND(
        F.bitwise_not(F.conv(v, 16, 10).cast("int"))) == 0), lambda ok: ok)
    return mask.isNull() | (mask.rlike("^[0-9A-Fa-f]*$") & version.rlike("^[0-9A-Fa-f]+$") & fits)


def changes_suite(now: dt.datetime, *, ordered: bool, masks: bool) -> Suite:
    """The GX suite for a change stream prepared by :func:`_stream_columns`."""
    gx.load()
    import great_expectations.expectations as gxe

    suite = Suite(CHANGES)
    suite.add(gxe.ExpectColumnValuesToBeInSet(column="op", value_set=["I", "U", "D", "T", "R"]), "op is I/U/D/T/R",
              "fail")
    suite.add(gxe.ExpectColumnValuesToNotBeNull(column="op_ts"), "op_ts parsed", "fail")
    suite.add(gxe.ExpectColumnValuesToNotBeNull(column="table"), "table named", "fail")
    suite.add(gxe.ExpectColumnValuesToBeBetween(column="op_ts", max_value=now), "op_ts not in the future", "fail")
    suite.add(gxe.ExpectColumnValuesToNotBeNull(column="key_columns", row_condition=_not_truncate()),
              "messages carry their keys", "warn")
    if ordered:
        suite.add(gxe.ExpectColumnValuesToNotBeInSet(column="seq_vs_previous", value_set=["lower"]),
                  "seq increases per key within a file", "warn")
        suite.add(gxe.ExpectColumnValuesToNotBeInSet(column="seq_vs_previous", value_set=["equal"]),
                  "seq not repeated per key within a file", "warn")
    if masks:
        suite.add(gxe.ExpectColumnValuesToBeInSet(column="changed_columns_present", value_set=[True]),
                  "changed columns are present (masks)", "warn")
        suite.add(gxe.ExpectColumnValuesToBeInSet(column="present_columns_are_image", value_set=[True]),
                  "present columns are the image's (masks)", "fail")
        suite.add(gxe.ExpectColumnValuesToBeInSet(column="masks_fit_version", value_set=[True]),
                  "masks fit the table version (masks)", "fail")
    return suite


def _not_truncate() -> Any:
    gx.load()
    from great_expectations.expectations.row_conditions import Column as GxColumn

    return GxColumn("op") != "T"


def check_changes(
    events: DataFrame, *, now: dt.datetime | None = None, contracts: dict[str, Contract] | None = None,
    target: str | None = None, record: bool = True, data_docs: bool = True,
    gx_project: str | os.PathLike[str] | None = None, actions: Sequence[Any] = (),
) -> list[CheckResult]:
    """Validate an incoming change stream (canonical events of ``lakecdc.read_changes``).

    ``contracts`` give the keys of tables whose messages carry none. With a ``target`` (and
    ``record``) the results are appended to ``<target>/_lakecdc_checks`` and, with ``data_docs``,
    shown in its Data Docs; they block no table. ``gx_project`` and ``actions`` as for
    :func:`check_tables` (its checkpoint: ``lakecdc changes``).
    """
    from pyspark.sql import functions as F

    rows = events.where(F.col("op").isNotNull() & F.col("_error").isNull())
    prepared = _stream_columns(rows, contracts or {})
    masks = "present_columns_are_image" in prepared.columns and bool(
        prepared.where(F.col("changed_columns_present").isNotNull() | F.col("present_columns_are_image").isNotNull()
                       | F.col("masks_fit_version").isNotNull()).limit(1).count())
    suite = changes_suite(now or dt.datetime.now(dt.timezone.utc), ordered="seq_vs_previous" in prepared.columns,
                          masks=masks)
    validator = Validator(_root(target) if target and record and data_docs else None, gx_project=gx_project,
                          actions=actions)
    out = _validate(validator, prepared, suite, CHANGES)
    for i, r in enumerate(out):
        if r.check == "messages carry their keys" and not r.success:
            out[i] = CheckResult(r.source_table, r.check, r.severity, False, r.unexpected,
                                 "keys must come from --key or a contract")
    if target and record:
        _record(DeltaRsEngine(), target, out)
        validator.build_docs()
    return out


# -- blocked tables ----------------------------------------------------------------------------


def _root(target: str) -> Path:
    return Path(target) / "_lakecdc"


def _blocked_file(target: str, table: str) -> Path:
    return _root(target) / "blocked" / f"{table_dir_in(target, table)}.json"


def _set_blocked(target: str, table: str, failed: list[CheckResult]) -> None:
    path = _blocked_file(target, table)
    if not failed:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"table": table, "checked_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
             "checks": [r.check + (f" ({r.unexpected} unexpected)" if r.unexpected else "") for r in failed]}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    tmp.replace(path)


def blocked_tables(target: str) -> dict[str, str]:
    """The tables whose next merge must not run, each with a one-line reason.

    Example:
        >>> blocked_tables("lake/")                                                    # doctest: +SKIP
        {'S.T': "blocked by data quality since 2024-05-01T10:00:00+00:00: fail check(s) key ID unique (1
        unexpected); fix the table and run 'lakecdc check' again, or accept it with 'lakecdc check
        --target lake/ --unblock S.T'"}
    """
    folder = _root(target) / "blocked"
    out: dict[str, str] = {}
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        state = json.loads(f.read_text())
        table = state["table"]
        out[table] = (f"blocked by data quality since {state['checked_at']}: fail check(s) "
                      f"{'; '.join(state['checks'])}; fix the table and run 'lakecdc check' again, or accept "
                      f"it with 'lakecdc check --target {target} --unblock {table}'")
    return out


def unblock(target: str, table: str) -> bool:
    """Accept ``table`` as it is: its next merge runs. False when it was not blocked. Recorded in
    ``_lakecdc_checks`` as the check ``unblocked by hand``."""
    reason = blocked_tables(target).get(table)
    if reason is None:
        return False
    _blocked_file(target, table).unlink()
    _record(DeltaRsEngine(), target, [CheckResult(table, "unblocked by hand", "warn", True, details=reason)])
    return True


def data_docs_index(target: str) -> Path:
    """Where the Data Docs' index page of ``target`` is (it exists once a check wrote docs)."""
    return _root(target) / DOCS_DIR / "index.html"


def _record(engine: DeltaRsEngine, target: str, results: list[CheckResult]) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    rows = [{**asdict(r), "checked_at": now} for r in results]
    schema = pa.schema([("source_table", pa.string()), ("check", pa.string()), ("severity", pa.string()),
                        ("success", pa.bool_()), ("unexpected", pa.int64()), ("details", pa.string()),
                        ("checked_at", pa.timestamp("us", tz="UTC"))])
    path = f"{target}/_lakecdc_checks"
    done = engine.committed_version(path, CHECKS_APP_ID)
    version = max(int(now.timestamp() * 1_000_000), (done or 0) + 1)  # two records in one microsecond stay two
    engine.append(path, pa.Table.from_pylist(rows, schema=schema), version=version, app_id=CHECKS_APP_ID)


def results_json(results: list[CheckResult]) -> str:
    return json.dumps([asdict(r) for r in results], indent=2)
