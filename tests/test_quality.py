"""Great Expectations checks from data contracts: quiet on a good table, each one fires on a
crafted bad one; accepted values, ranges and quality rules from the contract; the change-stream
checks (seq order, masks); results kept in _lakecdc_checks and as Data Docs; a failed `fail`
check blocks its table (and only it) until a check passes or --unblock; the CLI's exit code."""

from __future__ import annotations

import datetime as dt
import re
from typing import Literal

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pyspark.sql import types as T

import lakecdc
from lakecdc.changes.events import EVENT_SCHEMA
from lakecdc.check import gx
from lakecdc.check.contracts import load_contract, load_contracts
from lakecdc.check.quality import blocked_tables, check_changes, check_tables, data_docs_index
from lakecdc.cli import main
from lakecdc.errors import ConfigError
from tests.helpers import ogg, write_jsonl

pytestmark = pytest.mark.spark

CONTRACT = """apiVersion: v3.0.2
kind: DataContract
id: s-t
version: 1.0.0
status: active
schema:
  - name: T
    physicalName: S.T
    properties:
      - {name: ID, physicalType: bigint, primaryKey: true, primaryKeyPosition: 1}
      - {name: V, physicalType: string, required: true}
      - {name: N, physicalType: bigint}
"""


def by_check(results):
    return {r.check: r for r in results}


def test_contract_checks_quiet_on_a_good_table_and_firing_on_a_bad_one(spark, tmp_path, capsys, monkeypatch):
    """The contract's checks pass on a good table and fire on crafted damage; blocking, --unblock and the Data Docs kept."""
    monkeypatch.setattr(gx, "DOCS_KEEP", 2)
    contract_dir = tmp_path / "contracts"
    contract_dir.mkdir()
    (contract_dir / "t.yaml").write_text(CONTRACT)
    contracts = load_contracts(contract_dir)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 1}, keys=["ID"]),
                                     ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b", "N": 2}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    good = by_check(check_tables(str(target), contracts, spark=spark))
    assert all(r.success for r in good.values()), [r.line() for r in good.values() if not r.success]
    assert {"key ID unique", "key column ID not null", "column N exists", "required column V not null",
            "schema matches the contract", "row count reconciles with run 1"} <= set(good)
    assert blocked_tables(str(target)) == {}
    index = data_docs_index(str(target))
    assert index == target / "_lakecdc" / "data_docs" / "index.html" and "S.T merged" in index.read_text()
    assert main(["check", "--target", str(target), "--contract", str(contract_dir)]) == 0
    assert f"Data Docs: {index.resolve()}" in capsys.readouterr().out

    # crafted damage, written behind lakecdc's back: a duplicate key, a NULL key, a NULL required value
    path = s.table("S.T").target
    rows = DeltaTable(path).to_pyarrow_table()
    extra = pa.Table.from_pylist([{**rows.to_pylist()[0], "V": None}, {**rows.to_pylist()[0], "ID": None}],
                                 schema=rows.schema)
    write_deltalake(path, extra, mode="append")
    bad = by_check(check_tables(str(target), contracts, spark=spark))
    assert not bad["key ID unique"].success and not bad["key column ID not null"].success
    assert bad["required column V not null"].unexpected == 1 and bad["required column V not null"].severity == "warn"
    assert bad["schema matches the contract"].success
    reason = blocked_tables(str(target))["S.T"]
    assert "key ID unique (2 unexpected)" in reason and "key column ID not null (1 unexpected)" in reason
    assert f"lakecdc check --target {target} --unblock S.T" in reason and "required column" not in reason

    capsys.readouterr()
    assert main(["check", "--target", str(target), "--unblock", "S.T"]) == 0  # accepted as it is
    assert "S.T: unblocked" in capsys.readouterr().out and blocked_tables(str(target)) == {}
    assert main(["check", "--target", str(target), "--unblock", "S.T"]) == 0
    assert "S.T: was not blocked" in capsys.readouterr().out
    assert main(["check", "--target", str(target), "--contract", str(contract_dir)]) == 1
    assert "FAIL S.T: key ID unique" in capsys.readouterr().out
    assert set(blocked_tables(str(target))) == {"S.T"}  # blocked again: still bad

    DeltaTable(path).delete("ID IS NULL OR V IS NULL")  # repaired: the fail checks pass, the block goes
    repaired = check_tables(str(target), contracts, spark=spark)
    assert all(r.success for r in repaired) and blocked_tables(str(target)) == {}

    kept = DeltaTable(str(target / "_lakecdc_checks")).to_pyarrow_table().to_pylist()
    assert len(kept) >= 5 * len(good) and {r["source_table"] for r in kept} == {"S.T"}
    assert [r["check"] for r in kept].count("unblocked by hand") == 1
    stored = target / "_lakecdc" / "gx" / "uncommitted" / "validations" / "S" / "T merged"
    assert len(list(stored.glob("*/*"))) == 2  # only the newest DOCS_KEEP results stay for the docs
    pages = target / "_lakecdc" / "data_docs" / "validations" / "S" / "T merged"
    assert len(list(pages.glob("*/*"))) == 2


RULES = """apiVersion: v3.1.0
kind: DataContract
id: rules
version: 1.0.0
status: active
schema:
  - name: R
    physicalName: S.R
    quality:
      - {metric: rowCount, mustBeLessThan: 4, severity: warning}
      - {metric: duplicateValues, mustBe: 0, arguments: {properties: [CODE, QTY]}}
    properties:
      - {name: ID, physicalType: bigint, primaryKey: true, primaryKeyPosition: 1}
      - name: QTY
        logicalType: integer
        physicalType: bigint
        logicalTypeOptions: {minimum: 0, exclusiveMaximum: 100}
        customProperties: [{property: lakecdc.severity, value: error}]
      - name: PRICE
        logicalType: number
        physicalType: decimal(10,2)
        logicalTypeOptions: {exclusiveMinimum: 0}
      - name: DAY
        logicalType: date
        logicalTypeOptions: {minimum: 2024-01-01, maximum: "2024-12-31"}
      - name: CODE
        logicalType: string
        physicalType: string
        logicalTypeOptions: {pattern: "^[A-Z]{2}[0-9]+$", minLength: 3, maxLength: 5}
      - name: STATUS
        physicalType: string
        quality:
          - {type: library, metric: invalidValues, mustBe: 0, arguments: {validValues: [NEW, DONE]}, severity: warning}
      - name: UNIT
        physicalType: string
        quality:
          - {metric: invalidValues, mustBe: 0, arguments: {validValues: [kg, lb]}, severity: warning}
          - metric: invalidValues
            arguments: {validValues: [kg, lb, t]}
            mustBeLessThan: 20
            unit: percent
      - name: NOTE
        physicalType: string
        unique: true
        quality:
          - {metric: nullValues, mustBeLessOrEqualTo: 1, severity: warning}
  - name: G
    physicalName: S.G
    properties:
      - {name: ID, physicalType: bigint, primaryKey: true, primaryKeyPosition: 1}
      - name: QTY
        logicalType: integer
        physicalType: bigint
        logicalTypeOptions: {minimum: 0}
      - name: C
        physicalType: string
        quality: [{metric: invalidValues, mustBe: 0, arguments: {pattern: "^[a-z]+$"}}]
"""
GOOD = [
    {"ID": 1, "QTY": 0, "PRICE": "1.50", "DAY": "2024-01-01", "CODE": "AB1", "STATUS": "NEW", "UNIT": "kg", "NOTE": "x"},
    {"ID": 2, "QTY": 99, "PRICE": "0.01", "DAY": "2024-12-31", "CODE": "CD123", "STATUS": "DONE", "UNIT": "lb",
     "NOTE": None},
    {"ID": 3, "QTY": 5, "PRICE": "3", "DAY": "2024-06-01", "CODE": "EF12", "STATUS": None, "UNIT": "lb", "NOTE": "y"},
]
#: each bad row breaks some rules; together they break every one
BAD = [
    {"ID": 1, "QTY": 100, "PRICE": "0", "DAY": "2023-12-31", "CODE": "ab1", "STATUS": "OLD", "UNIT": "t", "NOTE": "x"},
    {"ID": 2, "QTY": -1, "PRICE": "1", "DAY": "2025-01-01", "CODE": "AB", "STATUS": "NEW", "UNIT": "oz", "NOTE": None},
    {"ID": 3, "QTY": 5, "PRICE": "1", "DAY": "2024-06-01", "CODE": "EF12", "STATUS": "NEW", "UNIT": "kg", "NOTE": "x"},
    {"ID": 4, "QTY": 5, "PRICE": "1", "DAY": "2024-06-01", "CODE": "EF12", "STATUS": "NEW", "UNIT": "t",
     "NOTE": None},
]
RULE_SEVERITY = {
    "QTY in [0, 100)": "fail",  # lakecdc.severity: error on the property
    "PRICE > 0": "warn", "DAY in [2024-01-01, 2024-12-31]": "warn", "CODE matches ^[A-Z]{2}[0-9]+$": "warn",
    "CODE length in [3, 5]": "warn", "STATUS in {NEW, DONE}: rows breaking it = 0": "warn",
    "UNIT in {kg, lb}: rows breaking it = 0": "warn",
    "UNIT in {kg, lb, t}: rows breaking it < 20%": "fail", "NOTE unique": "warn",
    "NOTE not null: rows breaking it <= 1": "warn", "row count < 4": "warn",
    "(CODE, QTY) unique: rows breaking it = 0": "fail",
}


def test_accepted_values_ranges_and_quality_rules_from_the_contract(spark, tmp_path):
    """Every range, pattern, length and library quality rule passes on good rows and fires on bad ones, with its severity."""
    (tmp_path / "c.yaml").write_text(RULES)
    contracts = load_contracts(tmp_path / "c.yaml")
    assert {r.check: r.severity for r in contracts["S.R"].rules} == RULE_SEVERITY
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.R", "I", f"00:00:0{i}", i, after=row) for i, row in enumerate(GOOD, 1)]
                + [ogg("S.G", "I", "00:00:05", 5, after={"ID": 1, "QTY": 3, "C": "abc"})])
    lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    assert DeltaTable(str(target / "S.R")).schema().to_arrow().field("DAY").type == pa.date32()
    cache = spark._jsparkSession.sharedState().cacheManager()
    was_empty = cache.isEmpty()
    good = by_check(check_tables(str(target), contracts, spark=spark, data_docs=False))
    assert cache.isEmpty() or not was_empty  # the batches GX cached are released
    assert set(RULE_SEVERITY) | {"C matches ^[a-z]+$: rows breaking it = 0", "QTY >= 0"} <= set(good)
    assert all(r.success for r in good.values()), [r.line() for r in good.values() if not r.success]

    write_jsonl(landing / "2.json", [ogg("S.R", "U" if i <= 3 else "I", f"00:01:0{i}", 10 + i, after=row)
                                     for i, row in enumerate(BAD, 1)])
    lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    results = check_tables(str(target), contracts, spark=spark, data_docs=False)
    bad = {r.check: r for r in results if r.source_table == "S.R"}
    fired = {check for check in RULE_SEVERITY if not bad[check].success}
    assert fired == set(RULE_SEVERITY), [bad[c].line() for c in set(RULE_SEVERITY) - fired]
    assert bad["QTY in [0, 100)"].unexpected == 2 and "e.g. 100, -1" in bad["QTY in [0, 100)"].details
    assert bad["UNIT in {kg, lb, t}: rows breaking it < 20%"].details.startswith("25.00% of 4 rows")
    assert "observed 4" in bad["row count < 4"].details
    assert all(r.success for r in results if r.source_table == "S.G")
    reason = blocked_tables(str(target))  # only S.R is blocked, by its fail rules only
    assert set(reason) == {"S.R"} and "QTY in [0, 100) (2 unexpected)" in reason["S.R"]
    assert "STATUS" not in reason["S.R"] and not (target / "_lakecdc" / "data_docs").exists()


@pytest.mark.parametrize(("body", "message"), [
    ("      - {name: A, logicalType: string, logicalTypeOptions: {minimum: 1}}\n",
     ":9: schema.0.properties.0.logicalTypeOptions.minimum: Additional properties are not allowed ('minimum' was "
     "unexpected) (ODCS JSON schema v3.1.0)"),
    ("      - name: A\n        logicalType: integer\n        physicalType: string\n        logicalTypeOptions: {minimum: 1}\n",
     ":12: schema.0.properties.0.logicalTypeOptions.minimum: a range applies to number, integer, date and timestamp "
     "columns, not string"),
    ("      - {name: A, logicalType: integer, logicalTypeOptions: {maximum: ten}}\n",
     ":9: schema.0.properties.0.logicalTypeOptions.maximum: 'ten' is not of type 'number'"),
    ("      - name: A\n        logicalType: string\n        logicalTypeOptions:\n          pattern: '^[a-z'\n",
     ":12: schema.0.properties.0.logicalTypeOptions.pattern: '^[a-z' is not a valid regular expression"),
    ("      - name: A\n        logicalType: integer\n        logicalTypeOptions: {maximun: 3}\n",
     ":11: schema.0.properties.0.logicalTypeOptions.maximun: Additional properties are not allowed"),
    ("      - name: A\n        logicalType: date\n        logicalTypeOptions: {minimum: '2024-13-01'}\n",
     ":11: schema.0.properties.0.logicalTypeOptions.minimum: '2024-13-01': expected a date"),
    ("      - name: A\n        logicalType: integer\n        logicalTypeOptions: {minimum: 5, maximum: 1}\n",
     ":11: schema.0.properties.0.logicalTypeOptions: no value fits between 5 and 1"),
    ("      - name: A\n        quality:\n          - {metric: nullValues, mustBe: 0, severity: fatal}\n",
     ":11: schema.0.properties.0.quality.0.severity: 'fatal': use error or warning"),
    ("      - name: A\n        quality:\n          - {metric: averageValue, mustBe: 0}\n",
     ":11: schema.0.properties.0.quality.0.metric: 'averageValue' is not one of ['nullValues', 'missingValues', "
     "'invalidValues', 'duplicateValues', 'rowCount']"),
    ("      - name: A\n        quality:\n          - {metric: nullValues}\n",
     ":11: schema.0.properties.0.quality.0: needs one of mustBe, mustNotBe, mustBeGreaterThan"),
    ("      - name: A\n        quality:\n          - metric: invalidValues\n            mustBe: 0\n"
     "            arguments: {validValues: []}\n",
     ":13: schema.0.properties.0.quality.0.arguments.validValues: expected a list of the accepted values"),
    ("      - name: A\n        quality:\n          - {metric: nullValues, mustBeBetween: [5]}\n",
     ":11: schema.0.properties.0.quality.0.mustBeBetween: [5] is too short"),
    ("      - name: A\n        customProperties: [{property: lakecdc.pk_update, value: update}]\n",
     ":10: schema.0.properties.0.customProperties.0.property: 'lakecdc.pk_update': a property's lakecdc section"),
    ("      - name: A\n    quality:\n      - {metric: duplicateValues, mustBe: 0, arguments: {properties: [B]}}\n",
     ":11: schema.0.quality.0.arguments.properties: B: not a property of the table"),
    ("      - name: A\n    quality:\n      - {type: sql, mustBe: 0}\n",
     ":11: schema.0.quality.0: 'query' is a required property"),
    ("      - name: A\n    quality:\n      - {type: custom, engine: greatExpectations, implementation: {kwargs: {}}}\n",
     ":11: schema.0.quality.0.implementation: None: expected the name of a Great Expectations expectation"),
], ids=["range-on-text", "range-on-text-physical", "bound-not-number", "bad-regex", "unknown-option", "bad-date",
        "empty-range", "unknown-severity", "unknown-metric", "no-operator", "empty-values", "bad-between",
        "own-section", "unknown-column", "sql-without-query", "custom-without-expectation"])
def test_rule_mistakes_name_file_and_line(tmp_path, body, message):
    """A rule's mistake, found by the ODCS schema or by lakecdc, names the file, line and field."""
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: v3.1.0\nkind: DataContract\nid: t\nversion: 1.0.0\nstatus: active\nschema:\n"
                    "  - name: T\n    properties:\n" + body)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_contract(path)


ORIGIN = T.StructType([*EVENT_SCHEMA.fields, T.StructField("_file", T.StringType()),
                       T.StructField("_block", T.LongType()), T.StructField("_row", T.LongType()),
                       T.StructField("_error", T.StringType())])


def qlik(row: int, op: str, image: dict, present: str | None, changed: str | None) -> tuple:
    """A Qlik-like event (masks decoded into ``source``) of table Q.M, keyed by ID."""
    source = {k: v for k, v in (("present_columns", present), ("changed_columns", changed)) if v is not None}
    before, after = (image, None) if op == "D" else (None, image)
    return ("Q.M", op, dt.datetime(2024, 1, 1), f"{row:05d}", 0, f"{row:05d}", None, ["ID"], before, after, source,
            "q.json", 0, row, None)


def test_change_stream_checks(spark, tmp_path):
    """The change-stream checks pass on a good stream and fire on out-of-order, duplicate, keyless and mask-breaking events."""
    landing, bad_landing, target = tmp_path / "landing", tmp_path / "bad", tmp_path / "lake"
    contract = tmp_path / "t.yaml"
    contract.write_text(CONTRACT)
    contracts = load_contracts(contract)  # keys S.T's messages that carry none
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1}, keys=["ID"]),
                                     ogg("S.T", "U", "00:00:02", 2, after={"ID": 1, "V": "b"}),
                                     ogg("S.T", "I", "00:00:01", 1, after={"ID": 2}, keys=["ID"])])
    write_jsonl(landing / "2.json", [ogg("S.T", "U", "00:00:00", 0, after={"ID": 1, "V": "c"}, keys=["ID"])])
    write_jsonl(bad_landing / "1.json", [
        ogg("S.T", "I", "00:00:05", 5, after={"ID": 1}, keys=["ID"]),
        ogg("S.T", "U", "00:00:04", 4, after={"ID": 1, "V": "b"}),          # out of order inside the file
        ogg("S.T", "U", "00:00:04", 4, after={"ID": 1, "V": "b"}),          # a duplicate
        ogg("X.Y", "I", "00:00:06", 6, after={"A": 1}),                     # no keys, no contract
        {**ogg("S.T", "I", "00:00:07", 7, after={"ID": 9}), "op_ts": "2999-01-01 00:00:00.000000"},
    ])
    masks_good = [qlik(1, "I", {"ID": "1", "A": "x", "B": None}, "ID,A,B", None),
                  qlik(2, "U", {"ID": "1", "A": "y"}, "ID,A", "A"),
                  qlik(3, "U", {"ID": "1", "A": "z", "B": "w"}, None, "A,B"),   # no columnMask: all present
                  qlik(4, "D", {"ID": "1", "A": "z"}, "ID,A", None)]
    masks_bad = [qlik(1, "U", {"ID": "2", "A": "y"}, "ID,A", "B"),              # changed but not captured
                 qlik(2, "U", {"ID": "2", "A": "y"}, "ID,A,B", "A"),            # captured B missing from the image
                 qlik(3, "D", {"ID": "2"}, "ID,A", None)]
    columns = ORIGIN.fieldNames()

    def stream(path, masks):
        decoded = lakecdc.read_changes(path, format="ogg-json", spark=spark).select(*columns)
        return decoded.unionByName(spark.createDataFrame(masks, ORIGIN)) if masks else decoded

    plain = by_check(check_changes(stream(landing, None), contracts=contracts, record=False))
    assert not any("masks" in check for check in plain)  # GoldenGate has no masks: not checked
    good = by_check(check_changes(stream(landing, masks_good), contracts=contracts, target=str(target)))
    assert {"op is I/U/D/T/R", "op_ts not in the future", "messages carry their keys",
            "seq increases per key within a file", "seq not repeated per key within a file",
            "changed columns are present (masks)", "present columns are the image's (masks)"} <= set(good)
    assert all(r.success for r in good.values()), [r.line() for r in good.values() if not r.success]
    assert "changes" in data_docs_index(str(target)).read_text()

    bad = by_check(check_changes(stream(bad_landing, masks_bad), contracts=contracts, target=str(target)))
    assert (bad["seq increases per key within a file"].unexpected, bad["seq increases per key within a file"].severity) \
        == (1, "warn")
    assert bad["seq not repeated per key within a file"].unexpected == 1
    assert bad["op_ts not in the future"].unexpected == 1 and bad["op_ts not in the future"].severity == "fail"
    assert bad["messages carry their keys"].unexpected == 1 and "contract" in bad["messages carry their keys"].details
    assert bad["changed columns are present (masks)"].unexpected == 1
    assert bad["present columns are the image's (masks)"].unexpected == 2
    assert bad["op is I/U/D/T/R"].success and blocked_tables(str(target)) == {}  # the stream blocks no table
    kept = DeltaTable(str(target / "_lakecdc_checks")).to_pyarrow_table().to_pylist()
    assert {r["source_table"] for r in kept} == {"changes"} and len(kept) == len(good) + len(bad)


def test_a_failed_check_stops_that_tables_next_merge_only(spark, tmp_path):
    """Issue 7: a 'fail' expectation stops the next merge of its table; other tables keep merging;
    the held-back changes apply, exactly once, when the table is unblocked."""
    contract_dir = tmp_path / "contracts"
    contract_dir.mkdir()
    (contract_dir / "t.yaml").write_text(CONTRACT)
    contracts = load_contracts(contract_dir)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 1}, keys=["ID"]),
                                     ogg("S.U", "I", "00:00:02", 2, after={"ID": 1, "V": "a"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    path = s.table("S.T").target
    dup = DeltaTable(path).to_pyarrow_table()
    write_deltalake(path, dup, mode="append")        # a duplicated key written behind lakecdc's back
    check_tables(str(target), contracts, spark=spark, data_docs=False)
    assert set(blocked_tables(str(target))) == {"S.T"}
    write_jsonl(landing / "2.json", [ogg("S.T", "I", "00:00:03", 3, after={"ID": 2, "V": "b", "N": 2}, keys=["ID"]),
                                     ogg("S.U", "I", "00:00:04", 4, after={"ID": 2, "V": "b"}, keys=["ID"])])
    s = lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    assert s.table("S.T").status == "failed" and "blocked by data quality" in (s.table("S.T").error or "")
    assert s.table("S.U").status == "applied" and s.table("S.U").inserted == 1
    assert sorted(r["ID"] for r in DeltaTable(path).to_pyarrow_table().to_pylist()) == [1, 1]
    DeltaTable(path).delete("_cdc_seq IS NOT NULL")   # repaired by hand: reload what the source holds
    write_deltalake(path, dup, mode="append")
    assert main(["check", "--target", str(target), "--unblock", "S.T"]) == 0
    s = lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)   # the unfinished run resumes
    assert s.ok and s.table("S.T").inserted == 1 and s.table("S.U").status == "skipped"
    assert sorted(r["ID"] for r in DeltaTable(path).to_pyarrow_table().to_pylist()) == [1, 2]


def test_a_history_tables_current_versions_are_what_the_contract_describes(spark, tmp_path):
    """A history (SCD2) table is checked on its current versions: one row per key."""
    contract_dir = tmp_path / "contracts"
    contract_dir.mkdir()
    (contract_dir / "t.yaml").write_text(CONTRACT)
    contracts = load_contracts(contract_dir)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 1}, keys=["ID"]),
        ogg("S.T", "U", "00:00:02", 2, before={"ID": 1}, after={"ID": 1, "V": "b"}, keys=["ID"]),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, stored_as_scd_type=2, spark=spark)
    assert len(DeltaTable(s.table("S.T").target).to_pyarrow_table()) == 2    # two versions of key 1
    results = by_check(check_tables(str(target), contracts, spark=spark, data_docs=False))
    assert results["key ID unique"].success and results["schema matches the contract"].success


def test_great_expectations_that_cannot_import_is_an_import_error_not_an_exit(monkeypatch):
    """From PySpark 4.3 GX's import of pyspark.sql.connect exits the process (status 0!) when the
    Spark Connect client packages are missing: lakecdc turns that into an ImportError naming them."""
    import importlib.abc
    import sys

    from lakecdc.check import gx

    class Exits(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):  # noqa: ANN001
            if name == "great_expectations":
                raise SystemExit(0)
            return None

    for name in [n for n in sys.modules if n == "great_expectations" or n.startswith("great_expectations.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [Exits(), *sys.meta_path])
    with pytest.raises(ImportError, match=r"lakecdc\[quality\]"):
        gx.load()
    assert "great_expectations" not in sys.modules


OTHER_RULES = """apiVersion: v3.1.0
kind: DataContract
id: s-p
version: 1.0.0
status: active
schema:
  - name: P
    physicalName: S.P
    quality:
      - {type: sql, name: no negative prices, query: "SELECT COUNT(*) FROM ${object} WHERE PRICE < 0", mustBe: 0,
         severity: error}
      - type: custom
        engine: greatExpectations
        implementation: |
          type: expect_table_row_count_to_be_between
          kwargs: {min_value: 1, max_value: 10}
      - {type: text, name: prices reviewed, description: Prices are reviewed by finance every month.}
      - {type: custom, engine: soda, name: soda freshness, implementation: "freshness(UPDATED) < 1d"}
    properties:
      - {name: ID, logicalType: integer, physicalType: bigint, primaryKey: true, primaryKeyPosition: 1}
      - name: PRICE
        logicalType: number
        physicalType: decimal(10,2)
        quality:
          - {type: sql, query: "SELECT MAX(${column}) FROM {object}", mustBeLessThan: 100, severity: warning}
          - type: custom
            engine: greatExpectations
            severity: warning
            implementation: {type: expect_column_values_to_be_between, kwargs: {min_value: 0, max_value: 50}}
          - {metric: missingValues, mustBe: 0, arguments: {missingValues: [-1]}}
      - name: NOTE
        logicalType: string
        quality:
          - type: custom
            engine: greatExpectations
            name: an expectation GX does not have
            severity: warning
            implementation: {type: expect_column_values_to_be_purple}
"""
OTHER_CHECKS = {
    "no negative prices: value = 0": ("fail", True, False),
    "expect_table_row_count_to_be_between(min_value=1, max_value=10)": ("fail", True, True),
    "prices reviewed": ("warn", False, False),
    "soda freshness": ("warn", False, False),
    "PRICE sql SELECT MAX(${column}) FROM {object}: value < 100": ("warn", True, False),
    "PRICE expect_column_values_to_be_between(min_value=0, max_value=50)": ("warn", True, False),
    "PRICE metric missingValues": ("warn", False, False),
    "NOTE an expectation GX does not have": ("warn", False, False),
}


def test_sql_and_custom_rules_run_and_the_others_are_reported_unsupported(spark, tmp_path, capsys):
    """``type: sql`` rules run on Spark (``${object}``/``{object}`` the table, ``${column}`` the
    property) and are judged by their operators; ``custom`` rules of engine greatExpectations run
    as the expectation they name (a property's gets its column); text, other engines' rules and
    ``missingValues`` are reported unsupported by name; an unknown expectation is a failed check
    naming the contract line. ``lakecdc check`` ends with the totals and exits 1 only for a failed
    rule of severity error."""
    contract = tmp_path / "p.yaml"
    contract.write_text(OTHER_RULES)
    contracts = load_contracts(contract)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.P", "I", "00:00:01", 1, after={"ID": 1, "PRICE": "9.50", "NOTE": "a"}),
                                     ogg("S.P", "I", "00:00:02", 2, after={"ID": 2, "PRICE": "20", "NOTE": "b"})])
    lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    good = by_check(check_tables(str(target), contracts, spark=spark, data_docs=False))
    for check, (severity, success, _) in OTHER_CHECKS.items():
        assert (good[check].severity, good[check].success) == (severity, success), good[check].line()
    assert good["no negative prices: value = 0"].details == "value 0"
    assert good["prices reviewed"].unsupported
    assert good["prices reviewed"].details.startswith("unsupported: a text rule is read by people")
    assert "engine 'soda'" in good["soda freshness"].details
    broken = good["NOTE an expectation GX does not have"]
    line = max(n for n, text in enumerate(OTHER_RULES.splitlines(), 1) if text == "          - type: custom")
    assert broken.details.startswith(f"not checked: {contract}:{line}: ")
    assert "expect_column_values_to_be_purple" in broken.details
    assert main(["check", "--target", str(target), "--contract", str(contract), "--no-data-docs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "skip S.P: prices reviewed: unsupported: a text rule is read by people, not run " \
           f"({contract}:17, severity fail)" in out
    passed = sum(r.success for r in good.values())
    assert out[-1] == f"1 table: {passed} passed, 1 failed (0 errors), 3 unsupported"

    write_jsonl(landing / "2.json", [ogg("S.P", "U", "00:01:00", 3, after={"ID": 1, "PRICE": "-1", "NOTE": "a"}),
                                     ogg("S.P", "U", "00:01:01", 4, after={"ID": 2, "PRICE": "120", "NOTE": "b"})])
    lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    bad = by_check(check_tables(str(target), contracts, spark=spark, data_docs=False))
    fired = {c for c, (_, success, _) in OTHER_CHECKS.items() if success and not bad[c].success}
    assert fired == {c for c, (_, success, still) in OTHER_CHECKS.items() if success and not still}
    assert bad["no negative prices: value = 0"].details == "value 1"
    assert bad["PRICE expect_column_values_to_be_between(min_value=0, max_value=50)"].unexpected == 2
    reason = blocked_tables(str(target))["S.P"]  # blocked by its failed error rules, not by its warnings
    assert "no negative prices" in reason and "PRICE expect" not in reason and "PRICE sql" not in reason
    assert main(["check", "--target", str(target), "--contract", str(contract), "--no-data-docs"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == f"1 table: {passed - 3} passed, 4 failed (1 error), 3 unsupported"


def test_severity_is_great_expectations_own_field(spark):
    """Each expectation carries its severity in GX's ``severity`` field (critical for fail, warning
    for warn), not in ``meta``; a custom rule's expectation gets its property's column."""
    from lakecdc.check.quality import table_suite

    contract = tmp_contract(OTHER_RULES)
    suite = table_suite("S.P merged", contract)
    by_name = {e.description: e for e in suite.expectations}
    custom = by_name["PRICE expect_column_values_to_be_between(min_value=0, max_value=50)"]
    assert str(getattr(by_name["key column ID not null"].severity, "value", "")) == "critical"
    assert str(getattr(custom.severity, "value", "")) == "warning" and custom.column == "PRICE"
    assert all("lakecdc_severity" not in (e.meta or {}) for e in suite.expectations)


def tmp_contract(text: str):
    """The one table ``text`` declares (loaded from a temporary file)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.yaml"
        path.write_text(text)
        return load_contract(path)[0]


def test_an_existing_gx_project_runs_lakecdcs_checkpoints_with_its_actions(spark, tmp_path, capsys):
    """``--gx-project DIR``: the suites run through GX Checkpoints in that project; the project's
    own suite stays, the action it attached to lakecdc's checkpoint stays and runs (its Data Docs
    are built), the results are stored there. API ``actions`` run after each validation."""
    import great_expectations as gxlib
    from great_expectations.checkpoint import UpdateDataDocsAction, ValidationAction

    project = tmp_path / "project"
    context = gxlib.get_context(mode="file", project_root_dir=str(project))
    context.suites.add(gxlib.ExpectationSuite(name="theirs"))
    contract = tmp_path / "t.yaml"
    contract.write_text(CONTRACT)
    contracts = load_contracts(contract)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 1}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", contracts=contracts, spark=spark)
    assert main(["check", "--target", str(target), "--contract", str(contract), "--gx-project", str(project)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("1 table: ")
    # the project's owner attaches an action to lakecdc's checkpoint; the next check keeps and runs it
    context = gxlib.get_context(mode="file", project_root_dir=str(project))
    checkpoint = context.checkpoints.get("lakecdc S.T merged")
    assert [d.name for d in checkpoint.validation_definitions] == ["S.T merged"]
    checkpoint.actions = [UpdateDataDocsAction(name="their docs")]
    checkpoint.save()
    seen = []

    class Recorder(ValidationAction):
        type: Literal["lakecdc_test_recorder"] = "lakecdc_test_recorder"

        def run(self, checkpoint_result, action_context=None):  # noqa: ANN001
            seen.append(checkpoint_result.success)
            return {}

    results = check_tables(str(target), contracts, spark=spark, gx_project=project / "gx",
                           actions=[Recorder(name="recorder")])
    assert all(r.success for r in results) and seen == [True]
    context = gxlib.get_context(mode="file", project_root_dir=str(project))
    assert {"theirs", "S.T merged"} <= {s.name for s in context.suites.all()}
    assert "their docs" in [a.name for a in context.checkpoints.get("lakecdc S.T merged").actions]
    assert (project / "gx" / "uncommitted" / "data_docs" / "local_site" / "index.html").exists()
    assert list((project / "gx" / "uncommitted" / "validations").rglob("*.json"))
    assert main(["check", "--target", str(target), "--contract", str(contract), "--gx-project",
                 str(tmp_path / "landing")]) == 2
    assert "is not a Great Expectations project" in capsys.readouterr().err


def test_the_quick_start_table_passes_its_bundled_contract(spark, tmp_path, monkeypatch, capsys):
    """The README's quick start (the sample applied with jobs/sample/apply.yaml), then ``lakecdc
    check`` with data_contracts/: every check passes, the schema matches (PRODUCT_PRICE as the
    source declares it, decimal(8,2)), and the totals say so."""
    from pathlib import Path

    monkeypatch.chdir(Path(__file__).parent.parent)
    target = tmp_path / "lake"
    assert main(["apply", "--format", "ogg-json", "--input", "jobs/sample/landing", "--target", str(target),
                 "--config", "jobs/sample/apply.yaml"]) == 0
    price = DeltaTable(str(target / "QASOURCE.TCUSTORD")).schema().to_arrow().field("PRODUCT_PRICE").type
    assert price == pa.decimal128(8, 2)
    capsys.readouterr()
    assert main(["check", "--target", str(target), "--contract", "data_contracts", "--no-data-docs"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line for line in out[:-1] if not line.startswith("ok   ")] == []
    assert out[-1].startswith("2 tables: ") and out[-1].endswith(" passed, 0 failed (0 errors), 0 unsupported")
