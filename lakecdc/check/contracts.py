"""Data contracts (Open Data Contract Standard v3 YAML): declared columns, types and keys.

One YAML file per source table under ``data_contracts/`` (or any directory / file given with
``--contract``), in the ODCS v3 form the ecosystem's tools read::

    apiVersion: v3.1.0
    kind: DataContract
    id: qasource-tcustord
    version: 1.0.0
    status: active
    name: TCUSTORD
    schema:
      - name: TCUSTORD
        physicalName: QASOURCE.TCUSTORD        # the source table, as the change messages name it
        physicalType: table
        properties:
          - {name: CUST_CODE, logicalType: string, physicalType: string, primaryKey: true, primaryKeyPosition: 1, required: true}
          - {name: PRODUCT_PRICE, logicalType: number, physicalType: "decimal(38,2)"}
    customProperties:                          # lakecdc's own section (all optional)
      - {property: lakecdc.pk_update, value: update}            # this table's pk_update
      - {property: lakecdc.tombstone_retention, value: 30d}     # how long its deletes block late events
      - {property: lakecdc.target, value: sales/orders}         # its Delta table (relative to the target root,
                                                                # absolute, or a URI)
      - {property: lakecdc.sequence_by, value: "UPDATED_AT"}    # order its changes by these fields (comma
                                                                # list; see lakecdc.changes.sequence)

``customProperties`` may sit at the top (for every table of the file) or on a schema object (for
that table). A per-table setting given to ``apply`` itself wins over the contract's.

What lakecdc takes from it: the **keys** (``primaryKey`` properties, in ``primaryKeyPosition``
order) for messages that carry none, and each column's **type**: ``physicalType`` when it is a
Spark SQL type (``bigint``, ``decimal(38,2)``, ``timestamp``, ...) or a common database type
(``VARCHAR(30)``, ``NUMBER(10,2)``, ``INTEGER``, ``DATE``), else from ``logicalType`` (string,
integer: bigint, number: decimal(38,9), boolean, date, timestamp; object and array: JSON text).
A declared type wins over inference for every decoder, so a delimited file's text or a Canal
string is typed as the contract says (a value that does not fit is quarantined, never rounded).

**Accepted values and ranges** (checked by ``lakecdc check``, :mod:`lakecdc.check.quality`), per property:

* ``logicalTypeOptions``: ``minimum`` / ``maximum`` (numbers; ISO dates or timestamps for date and
  timestamp columns), ``exclusiveMinimum`` / ``exclusiveMaximum`` (a bound, as in ODCS v3.1, or
  ``true`` to make ``minimum`` / ``maximum`` strict, as in v3.0), ``pattern`` (a regular
  expression searched in the text, as Spark's ``rlike``: anchor it with ``^...$``), ``minLength`` /
  ``maxLength`` (the ODCS v3.1 schema allows each only with a ``logicalType`` it fits). ``unique:
  true`` asks for unique values. Other standard options (``format``, ``multipleOf``, ...) are not
  checked.
  These declare the column: severity ``warn`` by default, like ``required``; the property's own
  ``customProperties: [{property: lakecdc.severity, value: fail}]`` makes them stop merges.
* ``quality``: library rules, ODCS v3.1's ``metric`` (v3.0's ``rule`` too): ``invalidValues`` with
  ``arguments: {validValues: [...]}`` and/or ``{pattern: ...}``, ``nullValues``,
  ``duplicateValues`` (v3.0: ``duplicateCount``), compared with the operators (``mustBe``,
  ``mustBeLessThan``, ``mustBeBetween``, ...) in ``unit`` rows (default) or percent of the rows
  (v3.1 asks for one operator; a v3.0 rule without one: the metric must be 0). On a schema object:
  ``rowCount`` and ``duplicateValues`` with ``arguments: {properties: [...]}``. ``severity``
  ``error`` (also ``fail``, ``critical``) gives ``fail``, ``warning`` (``warn``, ``info``) ``warn``;
  without one a rule is ``fail``: a quality rule is written to be enforced.
* ``quality`` rules of ``type: sql`` run on Spark: the ``query`` names the checked table as
  ``${object}`` (or ``{object}``, ``${table}``; on a property ``${column}`` is the column) and its
  first value is compared with the operators (none: it must be 0)::

      quality:
        - {type: sql, name: no negative prices, query: "SELECT COUNT(*) FROM ${object} WHERE PRICE < 0", mustBe: 0}

* ``quality`` rules of ``type: custom`` with ``engine: greatExpectations`` run as that Great
  Expectations expectation: ``implementation`` names it (``type``) and its ``kwargs``, as a
  mapping or YAML text; on a property, ``column`` defaults to the property::

      quality:
        - type: custom
          engine: greatExpectations
          implementation: {type: expect_column_values_to_be_between, kwargs: {min_value: 0, max_value: 1000}}

* ``text`` rules, ``custom`` rules of other engines and the ``missingValues`` metric are not run:
  ``lakecdc check`` reports each as ``unsupported``, with its name.

**Validated against the published ODCS JSON schema** first (:mod:`lakecdc.check.odcs`): a misspelt
field (``primarykey``) or value (``logicalType: strin``) is an error naming the file, the line,
the path in the document and the schema's message.

Mistakes (a range on a text column, a bound that is not a number, an unknown metric or option)
are :class:`ConfigError` naming the file, line and field.

``lakecdc contract draft`` (or ``infer``) drafts a contract from a Delta table lakecdc wrote (ODCS
v3.1.0, which the schema accepts);
``lakecdc contract check`` compares a table with its contract (missing, extra or differently
typed columns, other keys).
"""

from __future__ import annotations

import datetime as dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pyspark.sql import types as T

from lakecdc.check import odcs
from lakecdc.check.rules import Rule, distinct_checks, property_rules, table_rules
from lakecdc.config.sources import DECLARED, declared
from lakecdc.config.values import SeqField
from lakecdc.config.where import Where
from lakecdc.errors import ConfigError

_DECIMAL = re.compile(r"(?:decimal|numeric|number|dec)\s*\(\s*(\d+)\s*(?:,\s*(-?\d+)\s*)?\)", re.I)
_SIMPLE: dict[str, T.DataType] = {
    "string": T.StringType(), "varchar": T.StringType(), "char": T.StringType(), "varchar2": T.StringType(),
    "nvarchar": T.StringType(), "nvarchar2": T.StringType(), "text": T.StringType(), "clob": T.StringType(),
    "bigint": T.LongType(), "long": T.LongType(), "int": T.LongType(), "integer": T.LongType(),
    "smallint": T.LongType(), "tinyint": T.LongType(), "int64": T.LongType(), "int32": T.LongType(),
    "boolean": T.BooleanType(), "bool": T.BooleanType(),
    "double": T.DoubleType(), "float": T.DoubleType(), "float64": T.DoubleType(), "real": T.DoubleType(),
    "date": T.DateType(), "timestamp": T.TimestampType(), "timestamp_ntz": T.TimestampNTZType(),
    "datetime": T.TimestampNTZType(), "binary": T.BinaryType(),
}
_LOGICAL: dict[str, T.DataType] = {
    "string": T.StringType(), "integer": T.LongType(), "number": T.DecimalType(38, 9),
    "boolean": T.BooleanType(), "date": T.DateType(), "timestamp": T.TimestampType(),
    "object": T.StringType(), "array": T.StringType(),
}


@dataclass(frozen=True)
class Contract:
    """One source table's contract, as lakecdc uses it."""

    source_table: str
    path: str
    columns: tuple[tuple[str, T.DataType], ...]
    keys: tuple[str, ...]
    required: tuple[str, ...] = ()
    #: lakecdc's section (``customProperties``): this table's pk_update, tombstone retention, path
    pk_update: str | None = None
    tombstone_retention: dt.timedelta | None = None
    target: str | None = None
    #: the fields that order its changes (``lakecdc.sequence_by``; () the format's order)
    sequence_by: tuple[SeqField, ...] = ()
    #: accepted values, ranges and quality rules (see the module docstring)
    rules: tuple[Rule, ...] = ()

    @property
    def types(self) -> dict[str, T.DataType]:
        return dict(self.columns)


def spark_type(physical: str | None, logical: str | None) -> T.DataType:
    """The Spark type a property declares (see the module docstring)."""
    if physical:
        text = physical.strip()
        m = _DECIMAL.fullmatch(text)
        if m:
            precision, scale = int(m.group(1)), int(m.group(2) or 0)
            if precision > 38 or scale < 0 or scale > precision:
                return T.StringType()
            return T.LongType() if scale == 0 and precision <= 18 and text.lower().startswith("number") else T.DecimalType(precision, scale)
        base = re.sub(r"\s*\(.*\)$", "", text).lower()
        if base in _SIMPLE:
            return _SIMPLE[base]
        if base.startswith("timestamp") and "zone" in base:
            return T.TimestampType()
    return _LOGICAL.get((logical or "string").lower(), T.StringType())


def load_contract(path: str | Path) -> list[Contract]:
    """The tables one ODCS file declares; a :class:`ConfigError` names the file, line and field."""
    text = Path(path).read_text()
    where = Where(str(path), text)
    try:
        data = yaml.safe_load(text) or {}
    except ValueError as exc:  # a well-formed but impossible value, e.g. the date 2024-13-01
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise where.error((), "expected an ODCS data contract (a mapping with apiVersion, kind, schema)")
    if data.get("kind") not in (None, "DataContract"):
        raise where.error(("kind",), f"{data.get('kind')!r}: expected DataContract")
    api = str(data.get("apiVersion", "v3"))
    if not api.startswith("v3"):
        raise where.error(("apiVersion",), f"{api!r}: lakecdc reads ODCS v3 contracts")
    odcs.validate(data, where)
    objects = data.get("schema")
    if not isinstance(objects, list) or not objects:
        raise where.error(("schema",), "expected a list of schema objects (one per table) with properties")
    out = []
    for i, obj in enumerate(objects):
        at = ("schema", str(i))
        if not isinstance(obj, dict) or not obj.get("name"):
            raise where.error(at, "expected an object with name, physicalName and properties")
        props = obj.get("properties")
        if not isinstance(props, list) or not props:
            raise where.error((*at, "properties"), "expected a list of properties (columns)")
        columns: list[tuple[str, T.DataType]] = []
        keyed: list[tuple[int, str]] = []
        required: list[str] = []
        rules: list[Rule] = []
        for j, prop in enumerate(props):
            pat = (*at, "properties", str(j))
            if not isinstance(prop, dict) or not prop.get("name"):
                raise where.error(pat, "expected a property with a name")
            name = str(prop["name"])
            dtype = spark_type(prop.get("physicalType"), prop.get("logicalType"))
            columns.append((name, dtype))
            rules += property_rules(prop, name, dtype, pat, where)
            if prop.get("primaryKey"):
                position = prop.get("primaryKeyPosition", len(keyed) + 1)
                if not isinstance(position, int):
                    raise where.error((*pat, "primaryKeyPosition"), "expected a whole number")
                keyed.append((position, name))
            if prop.get("required"):
                required.append(name)
        rules += table_rules(obj.get("quality"), {n for n, _ in columns}, (*at, "quality"), where)
        own = {**_lakecdc_section(data.get("customProperties"), (), where),
               **_lakecdc_section(obj.get("customProperties"), (*at,), where)}
        out.append(Contract(
            source_table=str(obj.get("physicalName") or obj["name"]), path=str(path), columns=tuple(columns),
            keys=tuple(n for _, n in sorted(keyed)), required=tuple(required), rules=distinct_checks(rules), **own,
        ))
    return out


_OWN = DECLARED


def _lakecdc_section(props: Any, at: tuple[str, ...], where: Where) -> dict[str, Any]:
    """lakecdc's settings among an ODCS ``customProperties`` list (others' properties are theirs)."""
    if props is None:
        return {}
    here = (*at, "customProperties")
    if not isinstance(props, list):
        raise where.error(here, "expected a list of {property: NAME, value: VALUE}")
    out: dict[str, Any] = {}
    for k, item in enumerate(props):
        pat = (*here, str(k))
        if not isinstance(item, dict) or "property" not in item:
            raise where.error(pat, "expected {property: NAME, value: VALUE}")
        name, value = str(item["property"]), item.get("value")
        if not name.startswith("lakecdc."):
            continue
        if name not in _OWN:
            raise where.error((*pat, "property"), f"{name!r}: lakecdc knows {', '.join(_OWN)}")
        setting, out[setting] = declared(name, value, where, (*pat, "value"))
    return out


def load_contracts(path: str | os.PathLike[str] | None) -> dict[str, Contract]:
    """Every contract in a file or a directory (``*.yaml``, ``*.yml``), by source table."""
    if path is None:
        return {}
    root = Path(path)
    if not root.exists():
        raise ConfigError(f"contract {str(root)!r} does not exist")
    files = sorted([*root.glob("*.yaml"), *root.glob("*.yml")]) if root.is_dir() else [root]
    out: dict[str, Contract] = {}
    for f in files:
        for c in load_contract(f):
            if c.source_table in out:
                raise ConfigError(f"{f}: table {c.source_table!r} is already declared by {out[c.source_table].path}")
            out[c.source_table] = c
    return out


# -- infer and check ---------------------------------------------------------------------------


def _physical(dtype: T.DataType) -> str:
    return dtype.simpleString()


def _logical(dtype: T.DataType) -> str:
    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType)):
        return "integer"
    if isinstance(dtype, (T.DecimalType, T.DoubleType, T.FloatType)):
        return "number"
    if isinstance(dtype, T.BooleanType):
        return "boolean"
    if isinstance(dtype, T.DateType):
        return "date"
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return "timestamp"
    return "string"


def infer_contract(source_table: str, schema: T.StructType, keys: tuple[str, ...]) -> dict[str, Any]:
    """An ODCS v3 contract (as a dict, ``yaml.safe_dump`` it) for a table lakecdc wrote."""
    short = source_table.split(".")[-1]
    props = []
    for f in schema.fields:
        if _bookkeeping(f.name):
            continue
        prop: dict[str, Any] = {"name": f.name, "logicalType": _logical(f.dataType), "physicalType": _physical(f.dataType)}
        if f.name in keys:
            prop.update(primaryKey=True, primaryKeyPosition=keys.index(f.name) + 1, required=True)
        props.append(prop)
    return {
        "apiVersion": "v3.1.0", "kind": "DataContract", "id": re.sub(r"[^a-z0-9]+", "-", source_table.lower()).strip("-"),
        "version": "1.0.0", "status": "draft", "name": short,
        "schema": [{"name": short, "physicalName": source_table, "physicalType": "table", "logicalType": "object",
                    "properties": props}],
    }


def _bookkeeping(column: str) -> bool:
    """lakecdc's own columns: ``_cdc_*`` and a history table's validity columns."""
    return column.startswith("_cdc_") or column in ("__START_AT", "__END_AT")


def check_contract(contract: Contract, schema: T.StructType, keys: tuple[str, ...] | None) -> list[str]:
    """What differs between a Delta table (``schema``, recorded ``keys``) and its contract."""
    problems = []
    actual = {f.name.lower(): f for f in schema.fields if not _bookkeeping(f.name)}
    declared = {n.lower(): (n, t) for n, t in contract.columns}
    for low, (name, dtype) in declared.items():
        if low not in actual:
            problems.append(f"column {name} ({dtype.simpleString()}) is declared but the table has none")
        elif actual[low].dataType != dtype:
            problems.append(f"column {name}: table type {actual[low].dataType.simpleString()}, "
                            f"contract {dtype.simpleString()}")
    for low, f in actual.items():
        if low not in declared:
            problems.append(f"column {f.name} ({f.dataType.simpleString()}) is in the table but not in the contract")
    if keys is not None and [k.lower() for k in keys] != [k.lower() for k in contract.keys]:
        problems.append(f"keys: table {list(keys)}, contract {list(contract.keys)}")
    return problems
