"""Data contracts (ODCS v3): parsing with lines, types, keys and types in apply, infer/check."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import types as T

import lakecdc
from lakecdc.check.contracts import load_contract, load_contracts, spark_type
from lakecdc.cli import main
from lakecdc.errors import ConfigError
from tests.helpers import ogg, write_jsonl

REPO = Path(__file__).parent.parent

CONTRACT = """apiVersion: v3.0.2
kind: DataContract
id: s-orders
version: 1.0.0
status: active
schema:
  - name: ORDERS
    physicalName: S.ORDERS
    properties:
      - {name: ID, logicalType: integer, primaryKey: true, primaryKeyPosition: 1}
      - {name: PRICE, logicalType: number, physicalType: "NUMBER(10,2)"}
      - {name: QTY, physicalType: INTEGER}
      - {name: NOTE, physicalType: VARCHAR2(30)}
"""


@pytest.mark.parametrize(("physical", "logical", "expected"), [
    ("decimal(38,2)", None, T.DecimalType(38, 2)),
    ("NUMBER(10,2)", None, T.DecimalType(10, 2)),
    ("NUMBER(10)", None, T.LongType()),
    ("numeric(50,2)", None, T.StringType()),  # wider than Spark's decimals: kept exact as text
    ("VARCHAR(30)", None, T.StringType()),
    ("bigint", None, T.LongType()),
    ("TIMESTAMP WITH TIME ZONE", None, T.TimestampType()),
    ("datetime", None, T.TimestampNTZType()),
    (None, "number", T.DecimalType(38, 9)),
    (None, "date", T.DateType()),
    ("SDO_GEOMETRY", "object", T.StringType()),
    (None, None, T.StringType()),
])
def test_declared_types_map_to_spark_types(physical, logical, expected):
    assert spark_type(physical, logical) == expected


@pytest.mark.parametrize(("body", "message"), [
    ("kind: Table\nschema: []\n", ":1: kind: 'Table': expected DataContract"),
    ("apiVersion: v2.2.2\nschema: []\n", ":1: apiVersion: 'v2.2.2'"),
    ("kind: DataContract\nschema: []\n", ":2: schema: expected a list"),
    ("schema:\n  - name: T\n    properties:\n      - {name: A, primaryKey: true, primaryKeyPosition: first}\n",
     ":4: schema.0.properties.0.primaryKeyPosition: expected a whole number"),
    ("schema:\n  - name: T\n    properties: [{name: A}]\ncustomProperties:\n  - {property: lakecdc.pk_update, value: merge}\n",
     ":5: customProperties.0.value: 'merge': use abend, update, delete-insert"),
    ("schema:\n  - name: T\n    properties: [{name: A}]\n    customProperties:\n      - {property: lakecdc.colour, value: red}\n",
     ":5: schema.0.customProperties.0.property: 'lakecdc.colour': lakecdc knows"),
])
def test_contract_mistakes_name_file_and_line(tmp_path, body, message):
    path = tmp_path / "c.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message.replace("(", "\\(").replace("[", "\\[")):
        load_contract(path)


def test_the_bundled_contracts_declare_the_sample_tables():
    contracts = load_contracts(REPO / "data_contracts")
    assert set(contracts) == {"QASOURCE.TCUSTMER", "QASOURCE.TCUSTORD"}
    orders = contracts["QASOURCE.TCUSTORD"]
    assert orders.keys == ("CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID")
    assert orders.types["PRODUCT_PRICE"] == T.DecimalType(10, 2)


@pytest.mark.spark
def test_a_contract_keys_and_types_the_table(spark, tmp_path):
    contract = tmp_path / "contracts" / "orders.yaml"
    contract.parent.mkdir()
    contract.write_text(CONTRACT)
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [  # no primary_keys in the messages: the contract gives them
        ogg("S.ORDERS", "I", "00:00:01", 1, after={"ID": 1, "PRICE": 12.5, "QTY": "3", "NOTE": 7}),
        ogg("S.ORDERS", "I", "00:00:02", 2, after={"ID": 2, "PRICE": 1.234, "QTY": 1, "NOTE": "x"}),
    ])
    s = lakecdc.apply(landing, target, format="ogg-json", contracts=contract.parent, spark=spark)
    t = s.table("S.ORDERS")
    dt = DeltaTable(t.target)
    types = {f.name: str(f.type) for f in dt.schema().fields}
    assert types["PRICE"] == "PrimitiveType(\"decimal(10,2)\")" and types["QTY"] == "PrimitiveType(\"long\")"
    assert types["NOTE"] == "PrimitiveType(\"string\")"
    rows = dt.to_pyarrow_table().to_pylist()
    assert [(r["ID"], r["PRICE"], r["QTY"], r["NOTE"]) for r in rows] == [(1, Decimal("12.50"), 3, "7")]
    assert t.quarantined == 1  # 1.234 does not fit decimal(10,2): never rounded


@pytest.mark.spark
def test_infer_then_check_and_a_drifted_table(spark, tmp_path, capsys):
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 2}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    out = tmp_path / "contracts"
    assert main(["contract", "infer", "--target", str(target), "--out", str(out)]) == 0
    assert main(["contract", "check", "--target", str(target), "--contract", str(out)]) == 0
    assert "S.T: matches its contract" in capsys.readouterr().out
    text = (out / "S.T.yaml").read_text()
    (out / "S.T.yaml").write_text(text.replace("physicalType: bigint\n    primaryKey", "physicalType: string\n    primaryKey"))
    write_jsonl(landing / "2.json", [ogg("S.T", "I", "00:00:02", 2, after={"ID": 2, "V": "b", "N": 3, "EXTRA": 1}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    assert main(["contract", "check", "--target", str(target), "--contract", str(out)]) == 1
    report = capsys.readouterr().out
    assert "column ID: table type bigint, contract string" in report
    assert "column EXTRA (bigint) is in the table but not in the contract" in report


@pytest.mark.spark
def test_infer_from_change_messages_then_check_the_table_they_build(spark, tmp_path, capsys):
    """``contract infer --changes``: a draft from a sample of messages (types and keys as apply
    would give them), nothing written under any target; the table the messages build matches it."""
    landing, target, out = tmp_path / "landing", tmp_path / "lake", tmp_path / "contracts"
    write_jsonl(landing / "1.json", [
        ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 2}, keys=["ID"]),
        ogg("S.U", "I", "00:00:02", 2, after={"K": "x", "P": 1.5}),
    ])
    assert main(["contract", "infer", "--changes", str(landing), "--format", "ogg-json", "--key", "S.U=K",
                 "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["S.T.yaml", "S.U.yaml"]
    assert not target.exists()
    contracts = load_contracts(out)
    assert contracts["S.T"].keys == ("ID",) and contracts["S.U"].keys == ("K",)
    assert dict(contracts["S.T"].columns)["N"] == T.LongType()
    lakecdc.apply(landing, target, format="ogg-json", keys={"S.U": ["K"]}, spark=spark)
    capsys.readouterr()
    assert main(["contract", "check", "--target", str(target), "--contract", str(out)]) == 0
    assert "S.U: matches its contract" in capsys.readouterr().out
    assert main(["contract", "infer", "--changes", str(landing), "--format", "ogg-json", "--table", "S.X", "--key",
                 "S.U=K"]) == 2
    assert "the change files hold no rows of table 'S.X'" in capsys.readouterr().err


@pytest.mark.spark
def test_a_contracts_lakecdc_section_routes_the_table_and_sets_its_pk_update(spark, tmp_path):
    contract = tmp_path / "contracts" / "orders.yaml"
    contract.parent.mkdir()
    contract.write_text(CONTRACT + (
        "customProperties:\n"
        "  - {property: lakecdc.pk_update, value: update}\n"
        "  - {property: lakecdc.tombstone_retention, value: 30d}\n"
        "  - {property: lakecdc.target, value: sales/orders}\n"
        "  - {property: owner.team, value: sales}\n"   # another tool's property: not lakecdc's business
    ))
    loaded = load_contracts(contract.parent)["S.ORDERS"]
    assert (loaded.pk_update, loaded.tombstone_retention.days, loaded.target) == ("update", 30, "sales/orders")
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.ORDERS", "I", "00:00:01", 1, after={"ID": 1, "PRICE": 1, "QTY": 1, "NOTE": "a"})])
    s = lakecdc.apply(landing, target, format="ogg-json", contracts=contract.parent, spark=spark)
    assert s.table("S.ORDERS").target == str(target.resolve() / "sales" / "orders")
    write_jsonl(landing / "2.json", [
        ogg("S.ORDERS", "U", "00:00:02", 2, before={"ID": 1, "PRICE": 1, "QTY": 1, "NOTE": "a"},
            after={"ID": 2, "PRICE": 1, "QTY": 1, "NOTE": "a"}),
    ])
    t = lakecdc.apply(landing, target, format="ogg-json", contracts=contract.parent, spark=spark).table("S.ORDERS")
    assert (t.inserted, t.updated, t.deleted) == (0, 1, 0)   # pk_update=update (delete-insert would say 1, 0, 1)
    assert [r["ID"] for r in DeltaTable(t.target).to_pyarrow_table().to_pylist()] == [2]
