"""Columns the input declares are kept with their declared types, even while every value seen is
NULL; Debezium's semantic types (Kafka Connect schema names) map to the Spark types their values
hold: ``Bits`` as bytes, dates, timestamps, decimals, and text for the rest."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pytest
from deltalake import DeltaTable
from pyspark.sql import types as T

import lakecdc
from lakecdc.changes.columns import widest
from lakecdc.decode.kafka.connect_values import UNTYPED, spark_type

try:
    from tests.debezium_avro_render import length_prefixed, wire
    from tests.helpers import rows
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from debezium_avro_render import length_prefixed, wire  # type: ignore[no-redef]
    from helpers import rows  # type: ignore[no-redef]

TS = 1_700_000_000_000


def _types(path: str | Path) -> dict[str, str]:
    return {f.name: f.type.type for f in DeltaTable(str(path)).schema().fields if not f.name.startswith("_cdc_")}


# -- Debezium semantic types ------------------------------------------------------------------------------

#: (column, Connect type, schema name, parameters) -> the Spark type its values are kept in
SEMANTIC: list[tuple[str, str, str | None, dict[str, str] | None, T.DataType]] = [
    ("bits", "bytes", "io.debezium.data.Bits", {"length": "16"}, T.BinaryType()),
    ("raw", "bytes", None, None, T.BinaryType()),
    ("amount", "bytes", "org.apache.kafka.connect.data.Decimal", {"scale": "2", "connect.decimal.precision": "10"},
     T.DecimalType(10, 2)),
    ("vsd", "struct", "io.debezium.data.VariableScaleDecimal", None, UNTYPED),
    ("day", "int32", "io.debezium.time.Date", None, T.DateType()),
    ("iso_day", "string", "io.debezium.time.IsoDate", None, T.DateType()),
    ("at", "int64", "io.debezium.time.MicroTimestamp", None, T.TimestampType()),
    ("at_ms", "int64", "io.debezium.time.Timestamp", None, T.TimestampType()),
    ("at_zone", "string", "io.debezium.time.ZonedTimestamp", None, T.TimestampType()),
    ("at_ns", "int64", "io.debezium.time.NanoTimestamp", None, T.StringType()),  # nanoseconds kept as text
    ("clock", "int64", "io.debezium.time.MicroTime", None, T.StringType()),  # Spark has no time of day
    ("clock_zone", "string", "io.debezium.time.ZonedTime", None, T.StringType()),
    ("yr", "int32", "io.debezium.time.Year", None, T.IntegerType()),
    ("span", "float64", "io.debezium.time.MicroDuration", None, T.DoubleType()),
    ("doc", "string", "io.debezium.data.Json", None, T.StringType()),
    ("xml", "string", "io.debezium.data.Xml", None, T.StringType()),
    ("uid", "string", "io.debezium.data.Uuid", None, T.StringType()),
    ("kind", "string", "io.debezium.data.Enum", {"allowed": "a,b"}, T.StringType()),
    ("kinds", "string", "io.debezium.data.EnumSet", {"allowed": "a,b"}, T.StringType()),
    ("shape", "struct", "io.debezium.data.geometry.Geometry", None, T.BinaryType()),
]


def test_semantic_types_map_to_the_spark_types_their_values_hold():
    for column, kind, name, params, expected in SEMANTIC:
        field = {"type": kind, "field": column, **({"name": name} if name else {}),
                 **({"parameters": params} if params else {})}
        assert spark_type(field) == expected, column


def test_a_column_declared_without_a_type_gives_way_to_a_typed_declaration():
    assert widest([UNTYPED, T.DecimalType(10, 2)]) == T.DecimalType(10, 2)
    assert widest([UNTYPED]) == UNTYPED and widest([T.LongType(), UNTYPED, T.StringType()]) == T.StringType()


def _field(column: str, kind: str, name: str | None, params: dict[str, str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "optional": True, "field": column}
    if name:
        out["name"] = name
    if params:
        out["parameters"] = params
    if kind == "struct" and name == "io.debezium.data.VariableScaleDecimal":
        out["fields"] = [{"type": "int32", "field": "scale"}, {"type": "bytes", "field": "value"}]
    if kind == "struct" and name and "geometry" in name:
        out["fields"] = [{"type": "bytes", "field": "wkb"}, {"type": "int32", "optional": True, "field": "srid"}]
    return out


COLUMNS = [_field(c, k, n, p) for c, k, n, p, _t in SEMANTIC]
VALUE = {"type": "struct", "name": "srv.shop.t.Value", "optional": True,
         "fields": [{"type": "int32", "field": "id"}, *COLUMNS]}
ENVELOPE = {"type": "struct", "name": "srv.shop.t.Envelope", "fields": [
    {**VALUE, "field": "before"}, {**VALUE, "field": "after"},
    {"type": "struct", "field": "source", "fields": []}, {"type": "string", "field": "op"},
    {"type": "int64", "optional": True, "field": "ts_ms"}]}


def _line(i: int, **values: Any) -> str:
    after = {"id": i, **{c["field"]: None for c in COLUMNS}, **values}
    source = {"connector": "mysql", "db": "shop", "table": "t", "file": "binlog.000001", "pos": 100 + i, "row": 0,
              "ts_ms": TS + i}
    return json.dumps({"schema": ENVELOPE, "payload": {"before": None, "after": after, "source": source, "op": "c",
                                                       "ts_ms": TS + i}})


@pytest.mark.spark
def test_debezium_json_keeps_declared_columns_with_their_semantic_types(spark, tmp_path):
    """Every column the schema declares is a column of the table with the type its semantic type
    says, though all its values are NULL; Bits values are bytes, not base64 text."""
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.json").write_text("\n".join([
        _line(1, bits="AQI=", raw="/w=="), _line(2)]) + "\n")
    s = lakecdc.apply(landing, tmp_path / "lake", format="debezium-json", keys={"shop.t": ["id"]}, spark=spark)
    target = s.table("shop.t").target
    types = _types(target)
    expected = {c: ("string" if t == UNTYPED else t.typeName() if not isinstance(t, T.DecimalType) else t.simpleString())
                for c, _k, _n, _p, t in SEMANTIC}
    assert types == {"id": "integer", **expected}
    one, two = rows(target, "id")
    assert one["bits"] == b"\x01\x02" and one["raw"] == b"\xff"
    assert all(v is None for k, v in two.items() if k != "id")


@pytest.mark.spark
def test_a_variable_scale_decimal_is_typed_from_its_values_once_it_has_some(spark, tmp_path):
    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "a.json").write_text("\n".join([_line(1, vsd={"scale": 3, "value": "MDk="}), _line(2)]) + "\n")
    s = lakecdc.apply(landing, tmp_path / "lake", format="debezium-json", keys={"shop.t": ["id"]}, spark=spark)
    target = s.table("shop.t").target
    assert _types(target)["vsd"] == "decimal(38,3)"
    assert [r["vsd"] for r in rows(target, "id")] == [Decimal("12.345"), None]


@pytest.mark.spark
def test_debezium_avro_keeps_a_declared_column_whose_values_are_all_null(spark, tmp_path):
    """The writer schema declares ``amount`` (a VariableScaleDecimal) and ``flags`` (Bits): kept,
    though no message gives ``amount`` a value; ``flags`` holds the bytes."""
    ns = "dbserver1.inventory.t"
    value = {"type": "record", "name": "Value", "namespace": ns, "fields": [
        {"name": "id", "type": "int"},
        {"name": "amount", "default": None, "type": ["null", {
            "type": "record", "name": "VariableScaleDecimal", "namespace": "io.debezium.data",
            "connect.name": "io.debezium.data.VariableScaleDecimal",
            "fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}]}]},
        {"name": "flags", "default": None, "type": ["null", {
            "type": "bytes", "connect.name": "io.debezium.data.Bits", "connect.parameters": {"length": "12"}}]},
    ]}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql", "fields": [
        {"name": "connector", "type": "string"}, {"name": "name", "type": "string"}, {"name": "ts_ms", "type": "long"},
        {"name": "db", "type": "string"}, {"name": "schema", "type": "string"}, {"name": "table", "type": "string"},
        {"name": "lsn", "type": ["null", "long"], "default": None}]}
    envelope = {"type": "record", "name": "Envelope", "namespace": ns, "fields": [
        {"name": "before", "type": ["null", value], "default": None},
        {"name": "after", "type": ["null", "Value"], "default": None},
        {"name": "source", "type": source}, {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None}]}
    registry = tmp_path / "schemas"
    registry.mkdir()
    (registry / "7.avsc").write_text(json.dumps(envelope))
    parsed = fastavro.parse_schema(envelope)

    def message(i: int, flags: bytes | None) -> bytes:
        src = {"connector": "postgresql", "name": "dbserver1", "ts_ms": TS + i, "db": "shop", "schema": "inventory",
               "table": "t", "lsn": 100 + i}
        return wire(7, parsed, {"before": None, "after": {"id": i, "amount": None, "flags": flags}, "source": src,
                                "op": "c", "ts_ms": TS + i})

    landing = tmp_path / "landing"
    landing.mkdir()
    (landing / "dump.bin").write_bytes(length_prefixed([message(1, b"\x0f\x01"), message(2, None)]))
    s = lakecdc.apply(landing, tmp_path / "lake", format="debezium-avro", keys={"inventory.t": ["id"]},
                      options={"schemaDirectory": str(registry)}, spark=spark)
    target = s.table("inventory.t").target
    assert _types(target) == {"id": "integer", "amount": "string", "flags": "binary"}
    assert rows(target, "id") == [{"id": 1, "amount": None, "flags": b"\x0f\x01"},
                                  {"id": 2, "amount": None, "flags": None}]


# -- the other formats that declare their columns ---------------------------------------------------------

#: the vendored samples, else ../shared/samples
SAMPLE_DIRS = [Path(__file__).parent / "fixtures" / "samples", Path(__file__).resolve().parents[2] / "shared" / "samples"]


@pytest.mark.spark
def test_canal_and_qlik_keep_declared_columns_whose_values_are_all_null(spark, tmp_path):
    """Canal's ``mysqlType`` and a Qlik metadata message declare every column: a column whose
    values are all NULL is a column of the table all the same, with its declared type."""
    canal = {"data": [{"id": "1", "v": None, "d": None}], "old": None, "database": "shop", "table": "t",
             "pkNames": ["id"], "type": "INSERT", "isDdl": False, "es": 1600161894000, "ts": 1600161894771, "id": 58,
             "sql": "", "mysqlType": {"id": "bigint(20)", "v": "varchar(50)", "d": "decimal(10,2)"},
             "sqlType": {"id": -5, "v": 12, "d": 3}}
    (tmp_path / "canal").mkdir()
    (tmp_path / "canal" / "a.json").write_text(json.dumps(canal) + "\n")
    s = lakecdc.apply(tmp_path / "canal", tmp_path / "lake-canal", format="canal-json", spark=spark)
    assert _types(s.table("shop.t").target) == {"id": "long", "v": "string", "d": "decimal(10,2)"}

    found = [d / "qlik-replicate-json" for d in SAMPLE_DIRS if (d / "qlik-replicate-json" / "attunity-metadata-MD.json").exists()]
    if not found:
        pytest.skip("the Qlik samples are not present")
    folder = found[0]
    md = json.loads((folder / "attunity-metadata-MD.json").read_text())
    dt = json.loads((folder / "attunity-data-refresh-DT.json").read_text())
    dt["messageSchemaId"] = md["messageSchemaId"]
    dt["message"]["data"].update(salary=None, to_date=None)
    (tmp_path / "qlik").mkdir()
    (tmp_path / "qlik" / "a.json").write_text(json.dumps(md) + "\n" + json.dumps(dt) + "\n")
    s = lakecdc.apply(tmp_path / "qlik", tmp_path / "lake-qlik", format="qlik-json", spark=spark)
    target = s.table("employees.salaries").target
    assert _types(target) == {"emp_no": "long", "salary": "long", "from_date": "date", "to_date": "date"}
    assert [(r["salary"], r["to_date"]) for r in rows(target)] == [(None, None)]


# -- declared columns that no image of a run holds -------------------------------------------------------


def _ogg_avro_runs(spark: Any, tmp_path: Path, runs: list[list[Any]], **apply: Any) -> list[dict[str, str]]:
    """Apply each run of oracle events as GoldenGate op-modeled Avro (the schema declares ``ID``,
    ``A``, ``B``, ``C``; a column missing from an image is flagged ``C_isMissing``); the table's
    column types after each run."""
    try:
        from tests.ogg_avro_render import encode as avro_encode
        from tests.ogg_avro_render import length_prefixed as avro_framed
        from tests.ogg_avro_render import op_record, op_schema, write_schema_dir
    except ModuleNotFoundError:
        from ogg_avro_render import encode as avro_encode  # type: ignore[no-redef]
        from ogg_avro_render import length_prefixed as avro_framed  # type: ignore[no-redef]
        from ogg_avro_render import op_record, op_schema, write_schema_dir  # type: ignore[no-redef]

    schema = op_schema("GG.T", {"ID": "long", "A": "string", "B": "string", "C": "long"})
    schemas = write_schema_dir(tmp_path / "schemas", {"GG.T": schema})
    landing = tmp_path / "landing"
    landing.mkdir(exist_ok=True)
    out = []
    for n, run in enumerate(runs, start=1):
        (landing / f"run-{n}.bin").write_bytes(avro_framed([avro_encode(schema, op_record(e, schema)) for e in run]))
        s = lakecdc.apply(landing, tmp_path / "lake", format="ogg-avro-op", spark=spark,
                          options={"schemaDirectory": str(schemas)}, **apply)
        out.append(_types(s.table("GG.T").target))
    return out


def _ev(op: str, sec: int, before: dict | None = None, after: dict | None = None) -> Any:
    try:
        from tests.oracle import Event
    except ModuleNotFoundError:
        from oracle import Event  # type: ignore[no-redef]
    return Event("GG.T", op, f"2024-01-01 00:00:{sec:02d}.000000", f"{sec:020d}", 0, before, after, ("ID",))


@pytest.mark.spark
@pytest.mark.parametrize("scd", [1, 2])
def test_a_declared_column_no_image_holds_is_created_and_never_overwritten_by_its_absence(spark, tmp_path, scd):
    """Run 1 never carries ``C`` (missing from every image, as ``C_isMissing``): the table has it,
    typed as declared (bigint), NULL. Run 2 gives row 3 a ``C``; run 3 updates rows without ``C``:
    the value stays, and the other rows stay NULL (missing is not NULL). The target equals the
    oracle told the schema declares ``C``."""
    try:
        from tests.oracle import Oracle, declaring
    except ModuleNotFoundError:
        from oracle import Oracle, declaring  # type: ignore[no-redef]

    runs = [
        [_ev("I", 1, after={"ID": 1, "A": "a", "B": "b"}), _ev("U", 2, {"ID": 2}, {"ID": 2, "A": "x"})],
        [_ev("I", 3, after={"ID": 3, "A": "c", "C": 7})],
        [_ev("U", 4, {"ID": 3}, {"ID": 3, "A": "d"}), _ev("U", 5, {"ID": 1}, {"ID": 1, "B": "e"})],
    ]
    types = _ogg_avro_runs(spark, tmp_path, runs, stored_as_scd_type=scd)
    assert [t.get("C") for t in types] == ["long"] * 3
    target = tmp_path / "lake" / "GG.T"
    oracle = Oracle()
    for run in runs:
        oracle.apply_run(declaring(run, {"GG.T": ["ID", "A", "B", "C"]}))
    want = sorted(oracle.table("GG.T").values(), key=lambda r: r["ID"])
    assert want == [{"ID": 1, "A": "a", "B": "e", "C": None}, {"ID": 2, "A": "x", "B": None, "C": None},
                    {"ID": 3, "A": "d", "B": None, "C": 7}]
    live = [{k: v for k, v in r.items() if not k.startswith("__")} for r in rows(target, "ID")
            if r.get("__END_AT") is None]
    assert live == want


@pytest.mark.spark
def test_a_debezium_column_always_unavailable_is_created_and_keeps_the_value_it_gets(spark, tmp_path):
    """Debezium's unavailable-value placeholder (TOAST) in every image of run 1: ``note`` is
    declared by the schema, so the table has it (NULL); a later value is kept by a later update
    whose ``note`` is unavailable again."""
    try:
        import tests.decode.debezium.test_debezium_avro as dbz
    except ModuleNotFoundError:
        import tests.decode.debezium.test_debezium_avro as dbz  # type: ignore[no-redef]

    registry = dbz.write_registry(tmp_path / "schemas")
    gone = dbz.UNAVAILABLE

    def update(lsn: int, i: int, price: int, note: str) -> bytes:
        return dbz.message("value", dbz.envelope("u", lsn, before=dbz.row(i, note=gone),
                                                 after=dbz.row(i, price=dbz.unscaled(price), note=note)))

    landing = tmp_path / "landing"
    landing.mkdir()
    opts = dict(format="debezium-avro", options={"schemaDirectory": str(registry)}, keys={dbz.TABLE: ["id"]}, spark=spark)
    for n, messages in enumerate([[update(100, 1, 100, gone)], [update(200, 1, 200, "kept")], [update(300, 1, 300, gone)]]):
        (landing / f"run-{n}.bin").write_bytes(length_prefixed(messages))
        s = lakecdc.apply(landing, tmp_path / "lake", **opts)
        target = s.table(dbz.TABLE).target
        (row,) = rows(target, "id")
        assert row["note"] == [None, "kept", "kept"][n] and row["price"] == Decimal(f"{(n + 1) * 100 / 100:.2f}")
    assert _types(target)["note"] == "string"
