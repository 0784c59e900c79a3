"""Types in every GoldenGate format (issue 3, item 6): decimals exact, date strings as strings.

One insert per format carries ``AMT = 12345678901234567.89`` (a double would store
``12345678901234568``) and the two GoldenGate date spellings ``1994-09-30:15:33:00`` and
``2013-06-02 22:14:36.000000``. The documented defaults: a number with a fraction becomes an
exact decimal (inferred ``decimal(38, s)`` for JSON, ``decimal(38, 10)`` for a schema's
``number``, the Avro schema's ``decimal(p, s)``), never a double; XML carries text, so ``AMT``
is the exact string; GoldenGate date strings stay strings in every format.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from deltalake import DeltaTable

import lakecdc

try:
    from tests.helpers import rows
    from tests.ogg_avro_render import encode, length_prefixed, op_record, op_schema, write_schema_dir
    from tests.ogg_row_render import render_delimited, write_json_schema
    from tests.ogg_xml_render import write_xml_run
    from tests.oracle import Event
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows  # type: ignore[no-redef]
    from ogg_avro_render import (  # type: ignore[no-redef]
        encode,
        length_prefixed,
        op_record,
        op_schema,
        write_schema_dir,
    )
    from ogg_row_render import render_delimited, write_json_schema  # type: ignore[no-redef]
    from ogg_xml_render import write_xml_run  # type: ignore[no-redef]
    from oracle import Event  # type: ignore[no-redef]

pytestmark = pytest.mark.spark

TABLE = "GG.ORDERS"
AMT = "12345678901234567.89"
D1, D2 = "1994-09-30:15:33:00", "2013-06-02 22:14:36.000000"
assert Decimal(float(AMT)) != Decimal(AMT)  # the value a float would corrupt
ROW = {"ID": 1, "AMT": AMT, "D1": D1, "D2": D2}
META = {"table": TABLE, "op_type": "I", "op_ts": "2020-01-01 00:00:00.000000",
        "current_ts": "2020-01-01T00:00:01.000000", "pos": "00000000000000000001"}


def _event(row: dict) -> Event:
    return Event(TABLE, "I", META["op_ts"], META["pos"], 0, None, row, ("ID",))


def _json_number(doc: dict) -> str:
    """JSON text with AMT written as a number literal (json.dumps would go through a float)."""
    return json.dumps(doc).replace(f'"{AMT}"', AMT) + "\n"


def _ogg_json(d: Path) -> tuple[Path, dict[str, str]]:
    f = d / "a.json"
    f.write_text(_json_number({**META, "after": ROW}))
    return f, {}


def _json_row(d: Path) -> tuple[Path, dict[str, str]]:
    f = d / "a.json"
    f.write_text(_json_number({**META, **ROW}))
    return f, {}


def _json_row_schema(d: Path) -> tuple[Path, dict[str, str]]:
    f, _ = _json_row(d)
    write_json_schema(d.parent / "dirdef", TABLE, {"ID": "integer", "AMT": "number", "D1": "string", "D2": "string"})
    return f, {"schemaDirectory": str(d.parent / "dirdef")}


def _delimited(d: Path) -> tuple[Path, dict[str, str]]:
    f = d / "a.txt"
    f.write_text(render_delimited([_event(ROW)], {TABLE: list(ROW)}, field_delimiter="|"))
    write_json_schema(d.parent / "dirdef", TABLE, {"ID": "integer", "AMT": "number", "D1": "string", "D2": "string"})
    return f, {"fieldDelimiter": "|", "schemaDirectory": str(d.parent / "dirdef")}


def _xml(d: Path) -> tuple[Path, dict[str, str]]:
    return write_xml_run([_event(ROW)], d / "a.xml"), {}


def _avro_op(d: Path) -> tuple[Path, dict[str, str]]:
    schema = op_schema(TABLE, {"ID": "long", "AMT": {"type": "bytes", "logicalType": "decimal", "precision": 19,
                                                     "scale": 2}, "D1": "string", "D2": "string"})
    dirdef = write_schema_dir(d.parent / "dirdef", {TABLE: schema})
    f = d / "a.bin"
    f.write_bytes(length_prefixed([encode(schema, op_record(_event({**ROW, "AMT": Decimal(AMT)}), schema))]))
    return f, {"schemaDirectory": str(dirdef)}


# format, writer, the AMT column's Delta type, its value
CASES = {
    "ogg-json": ("ogg-json", _ogg_json, "decimal(38,2)", Decimal(AMT)),
    "ogg-json-row": ("ogg-json-row", _json_row, "decimal(38,2)", Decimal(AMT)),
    "ogg-json-row-schema": ("ogg-json-row", _json_row_schema, "decimal(38,10)", Decimal(AMT)),
    "ogg-delimited": ("ogg-delimited", _delimited, "decimal(38,10)", Decimal(AMT)),
    "ogg-xml": ("ogg-xml", _xml, "string", AMT),
    "ogg-avro-op": ("ogg-avro-op", _avro_op, "decimal(19,2)", Decimal(AMT)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_decimals_are_exact_and_date_strings_stay_strings(spark, tmp_path, case):
    fmt, write, amt_type, amt = CASES[case]
    landing = tmp_path / "landing"
    landing.mkdir()
    f, options = write(landing)
    s = lakecdc.apply(f, tmp_path / "lake", format=fmt, keys={TABLE: ["ID"]}, options=options, spark=spark)
    t = s.table(TABLE)
    assert (t.inserted, t.quarantined) == (1, 0)
    types = {fld.name: fld.type.type for fld in DeltaTable(t.target).schema().fields}
    assert (types["AMT"], types["D1"], types["D2"]) == (amt_type, "string", "string")
    (row,) = rows(t.target)
    assert row["AMT"] == amt and str(row["AMT"]).startswith("12345678901234567.89")
    assert (row["D1"], row["D2"]) == (D1, D2)
