"""Great Expectations checks from data contracts: quiet on a good table, each one fires on a
crafted bad one; the change-stream checks; results kept in _lakecdc_checks; the CLI's exit code."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

import lakecdc
from lakecdc.cli import main
from lakecdc.contracts import load_contracts
from lakecdc.quality import check_changes, check_tables
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


def test_contract_checks_quiet_on_a_good_table_and_firing_on_a_bad_one(spark, tmp_path, capsys):
    contract_dir = tmp_path / "contracts"
    contract_dir.mkdir()
    (contract_dir / "t.yaml").write_text(CONTRACT)
    contracts = load_contracts(contract_dir)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 1}, keys=["ID"]),
                                     ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b", "N": 2}, keys=["ID"])])
    s = lakecdc.apply(landing, target, contracts=contracts, spark=spark)
    good = by_check(check_tables(str(target), contracts, spark=spark))
    assert all(r.success for r in good.values()), [r.line() for r in good.values() if not r.success]
    assert {"key ID unique", "key column ID not null", "column N exists", "required column V not null",
            "schema matches the contract", "row count reconciles with run 1"} <= set(good)
    assert main(["check", "--target", str(target), "--contract", str(contract_dir)]) == 0

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
    capsys.readouterr()
    assert main(["check", "--target", str(target), "--contract", str(contract_dir)]) == 1
    assert "FAIL S.T: key ID unique" in capsys.readouterr().out
    kept = DeltaTable(str(target / "_lakecdc_checks")).to_pyarrow_table()
    assert kept.num_rows >= 3 * len(good) and set(kept.column("source_table").to_pylist()) == {"S.T"}


def test_change_stream_checks(spark, tmp_path):
    landing = tmp_path / "landing"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1}, keys=["ID"]),
                                     ogg("S.T", "I", "00:00:02", 2, after={"ID": 2})])
    results = by_check(check_changes(lakecdc.read_changes(landing, spark=spark)))
    assert results["op is I/U/D/T/R"].success and results["op_ts not in the future"].success
    assert not results["messages carry their keys"].success and results["messages carry their keys"].unexpected == 1
