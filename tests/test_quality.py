"""Great Expectations checks from data contracts: quiet on a good table, each one fires on a
crafted bad one; accepted values, ranges and quality rules from the contract; the change-stream
checks (seq order, masks); results kept in _lakecdc_checks and as Data Docs; a failed `fail`
check blocks its table (and only it) until a check passes or --unblock; the CLI's exit code."""

from __future__ import annotations

import datetime as dt
import re

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
schema:
  - name: R
    physicalName: S.R
    quality:
      - {metric: rowCount, mustBeLessThan: 4, severity: warning}
      - {metric: duplicateValues, mustBe: 0, arguments: {properties: [CODE, QTY]}}
    properties:
      - {name: ID, physicalType: bigint, primaryKey: true, primaryKeyPosition: 1}
      - name: QTY
        physicalType: bigint
        logicalTypeOptions: {minimum: 0, exclusiveMaximum: 100}
        customProperties: [{property: lakecdc.severity, value: error}]
      - name: PRICE
        physicalType: decimal(10,2)
        logicalTypeOptions: {exclusiveMinimum: 0}
      - name: DAY
        logicalType: date
        logicalTypeOptions: {minimum: 2024-01-01, maximum: "2024-12-31"}
      - name: CODE
        physicalType: string
        logicalTypeOptions: {pattern: "^[A-Z]{2}[0-9]+$", minLength: 3, maxLength: 5}
      - name: STATUS
        physicalType: string
        quality:
          - {type: library, rule: validValues, validValues: [NEW, DONE], severity: warning}
      - name: UNIT
        physicalType: string
        enum: [{value: kg}, {value: lb}]
        quality:
          - metric: invalidValues
            arguments: {validValues: [kg, lb, t]}
            mustBeLessThan: 20
            unit: percent
      - name: NOTE
        physicalType: string
        unique: true
        quality:
          - {metric: nullValues, mustBeLessOrEqualTo: 1, severity: warning}
          - {type: sql, query: "SELECT 1"}
  - name: G
    physicalName: S.G
    properties:
      - {name: ID, physicalType: bigint, primaryKey: true, primaryKeyPosition: 1}
      - name: QTY
        physicalType: bigint
        logicalTypeOptions: {minimum: 0}
      - name: C
        physicalType: string
        quality: [{metric: invalidValues, arguments: {pattern: "^[a-z]+$"}}]
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
    "CODE length in [3, 5]": "warn", "STATUS in {NEW, DONE}": "warn", "UNIT in {kg, lb}": "warn",
    "UNIT in {kg, lb, t}: rows breaking it < 20%": "fail", "NOTE unique": "warn",
    "NOTE not null: rows breaking it <= 1": "warn", "row count < 4": "warn",
    "(CODE, QTY) unique: rows breaking it = 0": "fail",
}


def test_accepted_values_ranges_and_quality_rules_from_the_contract(spark, tmp_path):
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
    assert set(RULE_SEVERITY) | {"C matches ^[a-z]+$", "QTY >= 0"} <= set(good)
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
    ("      - {name: A, physicalType: string, logicalTypeOptions: {minimum: 1}}\n",
     ":6: schema.0.properties.0.logicalTypeOptions.minimum: a range applies to number"),
    ("      - {name: A, physicalType: bigint, logicalTypeOptions: {maximum: ten}}\n",
     ":6: schema.0.properties.0.logicalTypeOptions.maximum: 'ten': expected a number"),
    ("      - {name: A, physicalType: bigint, logicalTypeOptions: {pattern: '^[0-9]+$'}}\n",
     ":6: schema.0.properties.0.logicalTypeOptions.pattern: applies to string columns"),
    ("      - name: A\n        logicalTypeOptions:\n          pattern: '^[a-z'\n",
     ":8: schema.0.properties.0.logicalTypeOptions.pattern: '^[a-z' is not a valid regular expression"),
    ("      - name: A\n        logicalTypeOptions: {maximun: 3}\n",
     ":7: schema.0.properties.0.logicalTypeOptions.maximun: not an ODCS logicalTypeOptions key"),
    ("      - name: A\n        physicalType: date\n        logicalTypeOptions: {minimum: '2024-13-01'}\n",
     ":8: schema.0.properties.0.logicalTypeOptions.minimum: '2024-13-01': expected a date"),
    ("      - name: A\n        quality:\n          - {metric: nullValues, severity: fatal}\n",
     ":8: schema.0.properties.0.quality.0.severity: 'fatal': use error or warning"),
    ("      - name: A\n        quality:\n          - {metric: averageValue}\n",
     ":8: schema.0.properties.0.quality.0.metric: 'averageValue': lakecdc knows the ODCS metrics"),
    ("      - name: A\n        quality:\n          - metric: invalidValues\n            arguments: {validValues: []}\n",
     ":9: schema.0.properties.0.quality.0.arguments.validValues: expected a list of the accepted values"),
    ("      - name: A\n        quality:\n          - {metric: nullValues, mustBeBetween: [5]}\n",
     ":8: schema.0.properties.0.quality.0.mustBeBetween: [5]: expected [LOW, HIGH]"),
    ("      - name: A\n        customProperties: [{property: lakecdc.pk_update, value: update}]\n",
     ":7: schema.0.properties.0.customProperties.0.property: 'lakecdc.pk_update': a property's lakecdc section"),
    ("      - name: A\n    quality:\n      - {metric: duplicateValues, arguments: {properties: [B]}}\n",
     ":8: schema.0.quality.0.arguments.properties: B: not a property of the table"),
], ids=["range-on-text", "bound-not-number", "pattern-on-number", "bad-regex", "unknown-option", "bad-date",
        "unknown-severity", "unknown-metric", "empty-values", "bad-between", "own-section", "unknown-column"])
def test_rule_mistakes_name_file_and_line(tmp_path, body, message):
    path = tmp_path / "c.yaml"
    path.write_text("apiVersion: v3.1.0\nkind: DataContract\nschema:\n  - name: T\n    properties:\n" + body)
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
