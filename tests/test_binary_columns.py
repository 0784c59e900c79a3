"""Binary columns end up as Delta ``binary`` columns holding the exact bytes.

Images carry bytes as base64 text (lakecdc.changes.columns); a column its decoder declares binary is
typed by decoding it: DTS ``BinaryObject`` values and ``Character`` values of the ``binary``
character set (MySQL BINARY/VARBINARY), Qlik Replicate ``BYTES``/``BLOB`` columns (hex digits in
its JSON). Bytes that are not valid UTF-8, a NUL, an empty value and NULL all survive an insert
and a later update.
"""

from __future__ import annotations

import json

import pytest
from deltalake import DeltaTable
from pyspark.sql import types as T

import lakecdc
from lakecdc.changes.columns import typed_sql

try:
    from tests.dts_render import binary, character, encode, integer, length_prefixed, pk_tag, record
    from tests.helpers import rows
    from tests.qlik_render import json_envelope
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from dts_render import binary, character, encode, integer, length_prefixed, pk_tag, record  # type: ignore[no-redef]
    from helpers import rows  # type: ignore[no-redef]
    from qlik_render import json_envelope  # type: ignore[no-redef]

RAW = b"\x00\xff\xfe\x80 binary\x00"


def delta_types(path: str) -> dict[str, str]:
    return {f.name: str(f.type.type) for f in DeltaTable(path).schema().fields if not f.name.startswith("_cdc_")}


def test_typed_sql_decodes_base64_and_refuses_other_text(spark):
    value, ok = typed_sql("v", T.BinaryType())
    got = spark.sql(f"SELECT {value} AS b, {ok} AS ok FROM VALUES ('AP8='), ('not base64!'), (NULL) AS t(v)").collect()
    assert [(r["b"], r["ok"]) for r in got] == [(bytearray(b"\x00\xff"), True), (None, False), (None, True)]


@pytest.mark.spark
def test_dts_binary_values_are_bytes_in_the_table(spark, tmp_path):
    fields = [("id", 3), ("blob", 252), ("code", 254)]  # BLOB; BINARY(4): a Character of charset binary
    first = record("INSERT", "shop.files", fields, tags=pk_tag("id"), id=1,
                   after=[integer(1), binary(RAW), character(b"\x01\x02\x03\xff", "binary")])
    second = record("INSERT", "shop.files", fields, tags=pk_tag("id"), id=2,
                    after=[integer(2), binary(b""), None])
    third = record("UPDATE", "shop.files", fields, tags=pk_tag("id"), id=3, position="72470@78",
                   before=[integer(1), binary(RAW), character(b"\x01\x02\x03\xff", "binary")],
                   after=[integer(1), binary(RAW[::-1]), character(b"\x00\x00\x00\x00", "binary")])
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "1.bin").write_bytes(length_prefixed([encode(first), encode(second)]))
    s = lakecdc.apply(str(landing / "1.bin"), tmp_path / "lake", format="dts-avro", spark=spark)
    t = s.table("shop.files")
    assert (t.events, t.quarantined) == (2, 0)
    assert delta_types(t.target) == {"id": "long", "blob": "binary", "code": "binary"}
    assert rows(t.target, "id") == [{"id": 1, "blob": RAW, "code": b"\x01\x02\x03\xff"},
                                    {"id": 2, "blob": b"", "code": None}]
    (landing / "2.bin").write_bytes(length_prefixed([encode(third)]))
    s = lakecdc.apply([str(landing / "1.bin"), str(landing / "2.bin")], tmp_path / "lake", format="dts-avro",
                      spark=spark)
    assert rows(t.target, "id") == [{"id": 1, "blob": RAW[::-1], "code": b"\x00\x00\x00\x00"},
                                    {"id": 2, "blob": b"", "code": None}]


def _qlik_metadata() -> str:
    columns = {"ID": ("INT8", 1), "PAYLOAD": ("BYTES", 0), "DOC": ("BLOB", 0), "NAME": ("STRING", 0)}
    return json_envelope("MD", "SID1", {
        "schemaId": "SID1",
        "lineage": {"server": "s", "task": "t", "schema": "APP", "table": "FILES", "tableVersion": 1,
                    "timestamp": "2024-01-01T00:00:00.000"},
        "tableStructure": {"tableColumns": {
            name: {"ordinal": i, "type": kind, "length": 16, "precision": 0, "scale": 0, "primaryKeyPosition": key}
            for i, (name, (kind, key)) in enumerate(columns.items(), 1)}}})


def _qlik_data(n: int, op: str, data: dict, before: dict | None = None, mask: str = "0F") -> str:
    headers = {"operation": op, "changeSequence": f"2024010112000000000000000000000000{n}",
               "timestamp": "2024-01-01T12:00:00.000", "transactionId": "AB", "changeMask": mask, "columnMask": mask,
               "transactionEventCounter": 1}
    return json_envelope("DT", "SID1", {"data": data, "beforeData": before, "headers": headers})


@pytest.mark.spark
def test_qlik_bytes_and_blob_columns_are_bytes_in_the_table(spark, tmp_path):
    lines = [
        _qlik_metadata(),
        _qlik_data(1, "INSERT", {"ID": 1, "PAYLOAD": RAW.hex().upper(), "DOC": "cafe00ff", "NAME": "a"}),
        _qlik_data(2, "INSERT", {"ID": 2, "PAYLOAD": "", "DOC": None, "NAME": "b"}),
        # an update that did not capture DOC (columnMask 0B: ordinals 1, 2, 4): DOC keeps its bytes
        _qlik_data(3, "UPDATE", {"ID": 1, "PAYLOAD": "00", "DOC": None, "NAME": "c"},
                   {"ID": 1, "PAYLOAD": RAW.hex(), "DOC": None, "NAME": "a"}, mask="0B"),
        _qlik_data(4, "INSERT", {"ID": 3, "PAYLOAD": "not hex", "DOC": None, "NAME": "d"}),  # quarantined
    ]
    path = tmp_path / "landing" / "files.json"
    path.parent.mkdir()
    path.write_text("".join(line + "\n" for line in lines))
    s = lakecdc.apply(str(path), tmp_path / "lake", format="qlik-json", spark=spark)
    t = s.table("APP.FILES")
    assert (t.events, t.quarantined) == (3, 1)
    assert delta_types(t.target) == {"ID": "long", "PAYLOAD": "binary", "DOC": "binary", "NAME": "string"}
    assert rows(t.target, "ID") == [{"ID": 1, "PAYLOAD": b"\x00", "DOC": b"\xca\xfe\x00\xff", "NAME": "c"},
                                    {"ID": 2, "PAYLOAD": b"", "DOC": None, "NAME": "b"}]
    (reason,) = [r["reason"] for r in DeltaTable(s.quarantine).to_pyarrow_table().to_pylist()]
    assert "'data.PAYLOAD' (BYTES) 'not hex' is not hexadecimal" in reason, reason
    assert json.loads(lines[0])["message"]["tableStructure"]["tableColumns"]["DOC"]["type"] == "BLOB"
