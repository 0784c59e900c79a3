"""Data contracts (ODCS v3): parsing with lines, types, keys and types in apply, infer/check."""

from __future__ import annotations

import re
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
    """A property's physicalType (Spark or database type), else its logicalType, gives its Spark type."""
    assert spark_type(physical, logical) == expected


#: the fields every ODCS contract has (5 lines)
HEAD = "apiVersion: v3.1.0\nkind: DataContract\nid: t\nversion: 1.0.0\nstatus: active\n"


@pytest.mark.parametrize(("body", "message"), [
    ("kind: Table\nschema: []\n", ":1: kind: 'Table': expected DataContract"),
    ("apiVersion: v2.2.2\nschema: []\n", ":1: apiVersion: 'v2.2.2'"),
    (HEAD.replace("v3.1.0", "v3.2.0") + "schema: []\n", ":1: apiVersion: 'v3.2.0': lakecdc validates ODCS v3.0 and v3.1"),
    (HEAD + "schema: []\n", ":6: schema: expected a list"),
    (HEAD + "schema:\n  - name: T\n    properties:\n      - {name: A, primaryKey: true, primaryKeyPosition: first}\n",
     ":9: schema.0.properties.0.primaryKeyPosition: 'first' is not of type 'integer' (ODCS JSON schema v3.1.0)"),
    (HEAD + "schema:\n  - name: T\n    properties: [{name: A}]\ncustomProperties:\n  - {property: lakecdc.pk_update, value: merge}\n",
     ":10: customProperties.0.value: 'merge': use abend, update, delete-insert"),
    (HEAD + "schema:\n  - name: T\n    properties: [{name: A}]\n    customProperties:\n      - {property: lakecdc.colour, value: red}\n",
     ":10: schema.0.customProperties.0.property: 'lakecdc.colour': lakecdc knows"),
])
def test_contract_mistakes_name_file_and_line(tmp_path, body, message):
    """A contract's mistakes, the schema's and lakecdc's own, name the file, line and field."""
    path = tmp_path / "c.yaml"
    path.write_text(body)
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_contract(path)


def test_the_bundled_contracts_declare_the_sample_tables():
    """data_contracts/ declares both sample tables, TCUSTORD's key and its price as the source
    declares it (NUMBER(8,2)), and passes the ODCS schema."""
    contracts = load_contracts(REPO / "data_contracts")
    assert set(contracts) == {"QASOURCE.TCUSTMER", "QASOURCE.TCUSTORD"}
    orders = contracts["QASOURCE.TCUSTORD"]
    assert orders.keys == ("CUST_CODE", "ORDER_DATE", "PRODUCT_CODE", "ORDER_ID")
    assert orders.types["PRODUCT_PRICE"] == T.DecimalType(8, 2)


TYPOS = CONTRACT.replace("version: 1.0.0\n", "version: 1.0.0\ndomain: sales\n")


@pytest.mark.parametrize(("api", "change", "message"), [
    ("v3.0.2", ("primaryKey: true", "primarykey: true"),
     ":11: schema.0.properties.0.primarykey: Unevaluated properties are not allowed ('primarykey' was unexpected) "
     "(ODCS JSON schema v3.0.2-strict)"),
    ("v3.1.0", ("primaryKey: true", "primarykey: true"),
     ":11: schema.0.properties.0.primarykey: Unevaluated properties are not allowed ('primarykey' was unexpected) "
     "(ODCS JSON schema v3.1.0)"),
    ("v3.1.0", ("logicalType: integer", "logicalType: strin"),
     ":11: schema.0.properties.0.logicalType: 'strin' is not one of ['string', 'date', 'timestamp', 'time', "
     "'number', 'integer', 'object', 'array', 'boolean'] (ODCS JSON schema v3.1.0)"),
    ("v3.1.0", ("id: s-orders\n", ""), ":1: (top): 'id' is a required property (ODCS JSON schema v3.1.0)"),
    ("v3.1.0", ("    physicalName: S.ORDERS\n", "    physicalName: S.ORDERS\n    colour: red\n"),
     ":10: schema.0.colour: Unevaluated properties are not allowed ('colour' was unexpected)"),
])
def test_contracts_are_validated_against_the_published_odcs_schema(tmp_path, api, change, message):
    """A misspelt field or value, or a missing one, is rejected with the file, the line, the path
    in the document and the message of the ODCS JSON schema of the contract's apiVersion."""
    good = TYPOS.replace("apiVersion: v3.0.2", f"apiVersion: {api}")
    assert change[0] in good
    path = tmp_path / "c.yaml"
    path.write_text(good)
    assert load_contract(path)[0].keys == ("ID",)
    path.write_text(good.replace(*change))
    with pytest.raises(ConfigError) as caught:
        load_contract(path)
    assert str(caught.value).startswith(f"{path}:") and message in str(caught.value)


def test_the_odcs_schemas_are_bundled_with_the_package():
    """Each apiVersion's schema is package data (lakecdc/check/schemas/, in pyproject's package-data)."""
    from importlib import resources

    from lakecdc.check.odcs import SCHEMAS, schema_for

    assert schema_for("v3.0.2") == SCHEMAS["v3.0"] and schema_for("v3.1.0") == SCHEMAS["v3.1"]
    for name in SCHEMAS.values():
        assert "$defs" in resources.files("lakecdc.check").joinpath("schemas", name).read_text()
    project = (REPO / "pyproject.toml").read_text()
    dependencies = project.split("dependencies = [", 1)[1].split("]", 1)[0]
    package_data = project.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    assert '"jsonschema>=' in dependencies and '"check/schemas/*.json"' in package_data


@pytest.mark.spark
def test_a_contract_keys_and_types_the_table(spark, tmp_path):
    """A contract keys messages that carry no keys and types their columns; a value that does not fit is quarantined."""
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
    """``contract draft`` writes a contract the ODCS schema accepts and the table matches; a
    retyped or extra column is reported by ``contract check``."""
    landing, target = tmp_path / "landing", tmp_path / "lake"
    write_jsonl(landing / "1.json", [ogg("S.T", "I", "00:00:01", 1, after={"ID": 1, "V": "a", "N": 2}, keys=["ID"])])
    lakecdc.apply(landing, target, format="ogg-json", spark=spark)
    out = tmp_path / "contracts"
    assert main(["contract", "draft", "--target", str(target), "--out", str(out)]) == 0
    assert main(["contract", "check", "--target", str(target), "--contract", str(out)]) == 0  # the ODCS schema passes it
    assert "S.T: matches its contract" in capsys.readouterr().out
    text = (out / "S.T.yaml").read_text()
    assert text.startswith("apiVersion: v3.1.0\n")
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
    """customProperties lakecdc.* route the table, set its pk_update and tombstone retention; others' are ignored."""
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
