"""Change files published by other public projects (Apache SeaTunnel, Apache Flink), applied as
they are: the exact tables (values and types), the quarantine and every file's accounting.

The files are vendored byte for byte under ``fixtures/samples`` (``MANIFEST.tsv`` names their
repository, path, commit and licence). They are those projects' test data, so what they expect is
not what lakecdc must do: each test says what the events mean under ``semantics.md``.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import lakecdc

try:
    from tests.helpers import rows
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from helpers import rows  # type: ignore[no-redef]

pytestmark = pytest.mark.spark


def _types(path: str | Path) -> dict[str, str]:
    """A Delta table's source columns and their types (the ``_cdc_`` columns left out)."""
    return {f.name: f.type.type for f in DeltaTable(str(path)).schema().fields if not f.name.startswith("_cdc_")}


def _quarantine(target: Path) -> list[tuple[str, int | None, str | None, str]]:
    """The quarantined records of ``target``: (file name, line, table, reason), in file order."""
    found = DeltaTable(str(target / "_quarantine")).to_pyarrow_table().to_pylist()
    return sorted((Path(r["file"]).name, r["line"], r["source_table"], r["reason"]) for r in found)


def _apply(spark: Any, sample: Any, tmp_path: Path, *files: str, **options: Any) -> lakecdc.RunSummary:
    """Apply the vendored ``files`` (one landing folder) into ``tmp_path / 'lake'``."""
    fmt = {Path(f).parts[0] for f in files}.pop()
    for f in files:
        sample(f)
    return lakecdc.apply(tmp_path / "landing", tmp_path / "lake", format=fmt, spark=spark, **options)


def _accounts(summary: lakecdc.RunSummary) -> dict[str, dict[str, int]]:
    return {Path(f).name: dict(a) for f, a in summary.file_accounts.items()}


#: The products table SeaTunnel's GoldenGate and Debezium files both end with (id, description,
#: weight): the floats the messages carry as doubles, kept exactly as decimals.
SEATUNNEL_PRODUCTS = [
    (101, "Small 2-wheel scooter", Decimal("3.14000010490417500")),
    (102, "12V car battery", Decimal("8.10000038146972700")),
    (103, "12-pack of drill bits with sizes ranging from #40 to #3", Decimal("0.80000001192092900")),
    (104, "12oz carpenter's hammer", Decimal("0.75000000000000000")),
    (105, "14oz carpenter's hammer", Decimal("0.87500000000000000")),
    (106, "18oz carpenter hammer", Decimal("1.00000000000000000")),
    (107, "box of assorted rocks", Decimal("5.09999990463256800")),
    (108, "water resistent black wind breaker", Decimal("0.10000000149011612")),
    (109, "24 inch spare tire", Decimal("22.20000076293945300")),
    (110, "new water resistent white wind breaker", Decimal("0.50000000000000000")),
]


# -- GoldenGate JSON ----------------------------------------------------------------------------------


def test_seatunnel_ogg_json_with_23_digit_positions(spark, tmp_path, sample):
    """SeaTunnel's GoldenGate messages: 23-digit ``pos``, float values written as doubles
    (``3.140000104904175``), ``current_ts`` only on the first one. 111 is inserted, updated and
    deleted (its update's op_ts is earlier than 110's update written before it: another key)."""
    s = _apply(spark, sample, tmp_path, "ogg-json/seatunnel-ogg-23-digit-pos.txt")
    t = s.table("OGG.OGG_TEST")
    assert s.ok and (t.events, t.quarantined, t.skipped) == (16, 0, 0)
    assert _accounts(s) == {"seatunnel-ogg-23-digit-pos.txt": {"applied": 16}}
    assert _types(t.target) == {"id": "long", "name": "string", "description": "string", "weight": "decimal(38,17)"}
    assert [(r["id"], r["description"], r["weight"]) for r in rows(t.target, "id")] == SEATUNNEL_PRODUCTS


# -- Canal JSON ---------------------------------------------------------------------------------------


def test_flink_canal_json_init_rows_and_an_undeclared_column(spark, tmp_path, sample):
    """Flink's Canal file: INIT rows are upserts; ``other`` is in no ``mysqlType`` (a string column,
    set only where a row carries it: 101 keeps ``val1`` through an update that does not carry it);
    106's update sets ``other`` to ``val0``; 111 is inserted and deleted; 102 and 103 deleted; the
    CREATE of ``user02`` is one skipped DDL record."""
    s = _apply(spark, sample, tmp_path, "canal-json/flink-canal-init-extra-column.txt")
    t = s.table("inventory.products2")
    assert s.ok and (t.events, t.quarantined) == (20, 0)
    assert s.table("inventory.user02").skipped_kinds == {"ddl": 1}
    assert _accounts(s) == {"flink-canal-init-extra-column.txt": {"applied": 20, "skipped:ddl": 1}}
    assert _types(t.target) == {"id": "long", "name": "string", "description": "string", "weight": "float",
                                "other": "string"}
    assert [(r["id"], r["description"], r["weight"], r["other"]) for r in rows(t.target, "id")] == [
        (101, "Small 2-wheel scooter", pytest.approx(5.17, rel=1e-7), "val1"),
        (104, "12oz carpenter's hammer", 0.75, None),
        (105, "14oz carpenter's hammer", 0.875, None),
        (106, "18oz carpenter hammer", 1.0, "val0"),
        (107, "box of assorted rocks", pytest.approx(5.1, rel=1e-7), None),
        (108, "water resistent black wind breaker", pytest.approx(0.1, rel=1e-7), None),
        (109, "24 inch spare tire", pytest.approx(22.2, rel=1e-7), None),
        (110, "new water resistent white wind breaker", 0.5, None),
    ]


def test_seatunnel_canal_json_three_tables_and_a_value_its_type_cannot_hold(spark, tmp_path, sample):
    """SeaTunnel's Canal file: ``product`` and ``orders`` change as written; ``project`` declares
    its ``id`` ``int(11)`` but carries ``A101``...``A109``: those nine rows are quarantined with
    that reason (line 16), nothing else of the file is."""
    s = _apply(spark, sample, tmp_path, "canal-json/seatunnel-canal-multitable-ddl.txt")
    assert _accounts(s) == {"seatunnel-canal-multitable-ddl.txt": {"applied": 26, "quarantined": 9, "skipped:ddl": 2}}
    product, orders = s.table("mydb.product"), s.table("mydb.orders")
    assert _types(product.target) == {"id": "long", "name": "string", "description": "string", "weight": "float"}
    assert [(r["id"], r["description"], r["weight"]) for r in rows(product.target, "id")] == [
        (101, "Small 2-wheel scooter", pytest.approx(5.17, rel=1e-7)),
        (104, "12oz carpenter's hammer", 0.75),
        (105, "14oz carpenter's hammer", 0.875),
        (106, "18oz carpenter hammer", 1.0),
        (107, "box of assorted rocks", pytest.approx(5.1, rel=1e-7)),
        (108, "water resistent black wind breaker", pytest.approx(0.1, rel=1e-7)),
        (109, "24 inch spare tire", pytest.approx(22.2, rel=1e-7)),
        (110, "new water resistent white wind breaker", 0.5),
    ]
    assert _types(orders.target) == {"order_number": "long", "order_date": "date", "purchaser": "long",
                                     "quantity": "long", "product_id": "long"}
    assert [(r["order_number"], r["quantity"]) for r in rows(orders.target, "order_number")] == [
        (10001, 3), (10003, 2), (10004, 1)]
    assert (s.table("mydb.orders").skipped_kinds, s.table("mydb.projects").skipped_kinds) == ({"ddl": 1}, {"ddl": 1})
    assert _quarantine(tmp_path / "lake") == [
        ("seatunnel-canal-multitable-ddl.txt", 16, "mydb.project",
         f"column 'id': after value 'A10{i}' does not fit type bigint") for i in range(1, 10)]


def test_seatunnel_canal_json_batch_sharing_es_and_id_applies_in_the_order_written(spark, tmp_path, sample):
    """SeaTunnel's Canal file from a real server: every message has ``es`` 1697788899000 and ``id``
    2. semantics.md: a Canal batch shares es and id, and then the producer's order decides. So
    1101 and 1107 are updated after their insert and 1109 deleted after it."""
    s = _apply(spark, sample, tmp_path, "canal-json/seatunnel-canal-shared-es-id.txt")
    t = s.table("canal_hvygfc.products")
    assert _accounts(s) == {"seatunnel-canal-shared-es-id.txt": {"applied": 12, "skipped:ddl": 3}}
    assert [(r["id"], r["weight"]) for r in rows(t.target, "id")] == [
        (1101, "4.56"), (1102, "8.1"), (1103, "0.8"), (1104, "0.75"), (1105, "0.875"), (1106, "1.0"),
        (1107, "7.88"), (1108, "0.1")]


# -- Debezium JSON ------------------------------------------------------------------------------------


def test_seatunnel_debezium_json_without_schema(spark, tmp_path, sample):
    """SeaTunnel's Debezium 1.1 MySQL envelopes: snapshot creates, updates, 111 created, updated and
    deleted. The messages carry no key record: the key is given."""
    s = _apply(spark, sample, tmp_path, "debezium-json/seatunnel-debezium-mysql-cud.txt",
               keys={"inventory.products": ["id"]})
    t = s.table("inventory.products")
    assert s.ok and (t.events, t.quarantined) == (16, 0)
    assert _accounts(s) == {"seatunnel-debezium-mysql-cud.txt": {"applied": 16}}
    assert _types(t.target) == {"id": "long", "name": "string", "description": "string", "weight": "decimal(38,17)"}
    assert [(r["id"], r["description"], r["weight"]) for r in rows(t.target, "id")] == SEATUNNEL_PRODUCTS


#: The types the Connect schema of SeaTunnel's all-types message gives its columns.
ALLTYPES = {
    "id": "integer", "f_binary": "binary", "f_blob": "binary", "f_long_varbinary": "binary",
    "f_longblob": "binary", "f_tinyblob": "binary", "f_varbinary": "binary", "f_smallint": "short",
    "f_smallint_unsigned": "integer", "f_mediumint": "integer", "f_mediumint_unsigned": "integer",
    "f_int": "integer", "f_int_unsigned": "long", "f_integer": "integer", "f_integer_unsigned": "long",
    "f_bigint": "long", "f_bigint_unsigned": "decimal(38,0)", "f_numeric": "decimal(10,0)",
    "f_decimal": "decimal(10,0)", "f_float": "double", "f_double": "double", "f_double_precision": "double",
    "f_longtext": "string", "f_mediumtext": "string", "f_text": "string", "f_tinytext": "string",
    "f_varchar": "string", "f_date": "date", "f_datetime": "timestamp", "f_timestamp": "timestamp",
    "f_bit1": "boolean", "f_bit64": "binary", "f_char": "string", "f_enum": "string", "f_mediumblob": "binary",
    "f_long_varchar": "string", "f_real": "double", "f_time": "string", "f_tinyint": "short",
    "f_tinyint_unsigned": "short", "f_json": "string", "f_year": "integer",
}


def test_seatunnel_debezium_json_all_mysql_types_with_schema(spark, tmp_path, sample):
    """SeaTunnel's Debezium 1.9 messages with their Connect schema: three snapshot reads of 43
    MySQL columns. The Decimal fields are written as JSON numbers (``123``), not base64 bytes."""
    s = _apply(spark, sample, tmp_path, "debezium-json/seatunnel-debezium-mysql-alltypes-schema.txt",
               keys={"mysql_cdc.mysql_cdc_e2e_source_table": ["id"]})
    t = s.table("mysql_cdc.mysql_cdc_e2e_source_table")
    assert s.ok and (t.events, t.inserted, t.quarantined) == (3, 3, 0)
    assert _accounts(s) == {"seatunnel-debezium-mysql-alltypes-schema.txt": {"applied": 3}}
    assert _types(t.target) == ALLTYPES
    got = rows(t.target, "id")
    assert [(r["id"], r["f_real"], r["f_tinyint_unsigned"], r["f_year"]) for r in got] == [
        (1, 12.345, 255, 2022), (2, 112.345, 22, 2013), (3, 112.345, 22, 2021)]
    first = got[0]
    assert (first["f_numeric"], first["f_decimal"], first["f_bigint_unsigned"]) == (Decimal(123), Decimal(789), Decimal(987654321))
    assert (first["f_bit1"], first["f_bit64"], first["f_varbinary"]) == (True, b"UUUUUUUU", b"Hello world")
    assert first["f_binary"] == b"abct" + bytes(60) and first["f_longblob"] is None
    assert (str(first["f_date"]), first["f_time"], first["f_json"]) == ("2022-04-27", "14:30:00.000000", '{"key": "value"}')
    assert [first[c].isoformat() for c in ("f_datetime", "f_timestamp")] == ["2022-04-27T14:30:00+00:00",
                                                                            "2023-04-27T03:08:40+00:00"]


def test_flink_debezium_postgres_without_old_images(spark, tmp_path, sample):
    """Flink's PostgreSQL file: updates carry no before image (matched by the after image's key);
    the last delete carries neither image: it cannot be applied and is quarantined as such."""
    s = _apply(spark, sample, tmp_path, "debezium-json/flink-debezium-postgres-replica-identity.txt",
               keys={"inventory.products": ["id"]})
    t = s.table("inventory.products")
    assert _accounts(s) == {"flink-debezium-postgres-replica-identity.txt": {"applied": 15, "quarantined": 1}}
    assert _types(t.target) == {"id": "long", "name": "string", "description": "string", "weight": "decimal(38,3)"}
    assert [(r["id"], r["description"], r["weight"]) for r in rows(t.target, "id")] == [
        (101, "Small 2-wheel scooter", Decimal("3.140")),
        (102, "12V car battery", Decimal("8.100")),
        (103, "12-pack of drill bits with sizes ranging from #40 to #3", Decimal("0.800")),
        (104, "12oz carpenter's hammer", Decimal("0.750")),
        (105, "14oz carpenter's hammer", Decimal("0.875")),
        (106, "18oz carpenter hammer", Decimal("1.000")),
        (107, "box of assorted rocks", Decimal("5.100")),
        (108, "water resistent black wind breaker", Decimal("0.100")),
        (109, "24 inch spare tire", Decimal("22.200")),
        (110, "new water resistent white wind breaker", Decimal("0.500")),
        (111, "Big 2-wheel scooter ", Decimal("5.170")),
    ]
    assert _quarantine(tmp_path / "lake") == [
        ("flink-debezium-postgres-replica-identity.txt", 16, "inventory.products",
         "'before' missing for op 'd' and no key record gives the row's key")]
