"""``debezium-json`` reading kcat records whose key and value kcat's Avro deserialiser rendered as
JSON (``kcat -C -s key=avro -s value=avro -r <registry> -J``): golden records, with and without
the writer schemas, and a round trip of rendered histories against the oracle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakecdc
from tests.decode.helpers import decode as decode_events

try:
    from tests.debezium_avro_render import AvroRenderer
    from tests.debezium_render import Renderer, Style, as_debezium, decoded_table, kcat_avro_json
    from tests.decode.debezium.test_debezium_avro import IDS, SCHEMAS, TS
    from tests.decode.debezium.test_debezium_json import WRITTEN
    from tests.oracle import Oracle, declaring
    from tests.test_property import assert_counts, assert_targets_match, scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from debezium_avro_render import AvroRenderer  # type: ignore[no-redef]
    from debezium_render import (  # type: ignore[no-redef]
        Renderer,
        Style,
        as_debezium,
        decoded_table,
        kcat_avro_json,
    )
    from oracle import Oracle, declaring  # type: ignore[no-redef]
    from test_debezium_avro import IDS, SCHEMAS, TS  # type: ignore[no-redef]
    from test_debezium_json import WRITTEN  # type: ignore[no-redef]
    from test_property import assert_counts, assert_targets_match, scenarios  # type: ignore[no-redef]

FORMAT = "debezium-json"
TOPIC = "dbserver1.inventory.order_items"

# -- golden records --------------------------------------------------------------------------------
# Written by hand, as kcat 1.7 (libserdes / avro-c) prints them with -J, for the PostgreSQL table
# of tests/test_debezium_avro.py (schema ids 7 = Envelope, 8 = Key, 9 = transaction metadata):
# each value encoded with Avro's JSON encoding of that schema: unions wrapped by the branch's
# name (avro-c: the short name "Value"; the second record uses Java's full names), bytes as one
# U+0000..U+00FF character per byte. price 12.50 is Decimal(10, 2) unscaled 1250 = 0x04e2;
# amount is VariableScaleDecimal scale 3, value 0x3039 = 12345 ("09"); ratio is the float 0.1 as
# avro-c prints a float (as a double: 0.10000000149011612).

SOURCE = {"version": "2.7.0.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": TS,
          "snapshot": {"string": "false"}, "db": "shop", "schema": "inventory", "table": "order-items",
          "txId": {"long": 77}, "lsn": {"long": 1234}}
AFTER = {"id": 1, "price": {"bytes": "\u0004\u00e2"}, "created": {"long": 1_700_000_000_123_456},
         "shipped": {"long": 1_700_000_000_123}, "day": {"int": 19675}, "qty": {"int": 3},
         "ratio": {"float": 0.10000000149011612}, "note": {"string": "é\"x"},
         "zoned": {"string": "2023-11-14T23:13:20+01:00"},
         "amount": {"VariableScaleDecimal": {"scale": 3, "value": "09"}}}
META = {"topic": TOPIC, "partition": 0, "tstype": "create", "ts": TS + 600, "broker": 1}


def _kcat(offset: int, key: Any, payload: Any, **ids: int) -> dict[str, Any]:
    out = {**META, "offset": offset, "key": key}
    if "key_schema_id" in ids:
        out["key_schema_id"] = ids["key_schema_id"]
    out["payload"] = payload
    if "value_schema_id" in ids:
        out["value_schema_id"] = ids["value_schema_id"]
    return out


GOLDEN = [
    _kcat(0, {"id": 1}, {"before": None, "after": {"Value": AFTER}, "source": SOURCE, "op": "c",
                         "ts_ms": {"long": TS + 500}, "transaction": None},
          key_schema_id=IDS["key"], value_schema_id=IDS["value"]),
    _kcat(1, {"id": 1}, {"before": {"dbserver1.inventory.order_items.Value": {**AFTER, "note": None}},
                         "after": {"dbserver1.inventory.order_items.Value": {
                             **AFTER, "note": {"string": "__debezium_unavailable_value"}, "qty": None}},
                         "source": {**SOURCE, "lsn": {"long": 1240}}, "op": "u", "ts_ms": {"long": TS + 501},
                         "transaction": {"event.block": {"id": "77", "total_order": 2, "data_collection_order": 2}}},
          key_schema_id=IDS["key"], value_schema_id=IDS["value"]),
    _kcat(2, {"id": 1}, None, key_schema_id=IDS["key"]),  # a tombstone
    _kcat(3, None, {"status": "END", "id": "77", "ts_ms": TS, "event_count": {"long": 2},
                    "data_collections": {"array": [{"data_collection": "inventory.order-items", "event_count": 2}]}},
          value_schema_id=IDS["tx"]),
    _kcat(4, {"id": 2}, {"before": None, "after": {"Value": {**AFTER, "id": 2}}, "source": SOURCE, "op": "c",
                         "ts_ms": None, "transaction": None}, key_schema_id=IDS["key"], value_schema_id=42),
]


def _decode(spark, path: Path, **options: str) -> list[Any]:
    return decode_events(spark, FORMAT, path, **options)


@pytest.fixture(scope="module")
def golden(tmp_path_factory) -> tuple[Path, Path]:
    work = tmp_path_factory.mktemp("kcat-avro-json")
    registry = work / "schemas"
    registry.mkdir()
    for schema_id, schema in SCHEMAS.items():
        (registry / f"{schema_id}.avsc").write_text(json.dumps(schema))
    path = work / "kcat.json"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in GOLDEN), encoding="utf-8")
    return path, registry


@pytest.mark.spark
def test_kcat_avro_json_with_the_writer_schemas_decodes_as_the_json_converter_form(spark, golden):
    path, registry = golden
    insert, update, tombstone, marker, unknown = _decode(spark, path, schemaDirectory=str(registry))
    expected = {"id": "1", "price": "12.50", "created": "2023-11-14T22:13:20.123456Z",
                "shipped": "2023-11-14T22:13:20.123Z", "day": "2023-11-14", "qty": "3", "ratio": "0.1",
                "note": "é\"x", "zoned": "2023-11-14T22:13:20Z", "amount": "12.345"}
    assert (insert["table"], insert["op"], insert["keys"], insert["_error"]) == ("inventory.order-items", "I", ["id"], None)
    assert insert["after"] == expected and insert["before"] is None
    assert insert["source"]["source.lsn"] == "1234" and insert["source"]["kafka.offset"] == "0"
    assert insert["source"]["kafka.key"] == '{"id":1}' and insert["txid"] == "77"
    # Java's full names read alike; the unavailable placeholder is missing, a null union NULL
    assert update["op"] == "U" and update["before"] == {**expected, "note": None}
    assert update["after"] == {k: v for k, v in {**expected, "qty": None}.items() if k != "note"}
    assert update["source"]["transaction.total_order"] == "2" and update["seq"] > insert["seq"]
    assert tombstone["op"] is None and tombstone["source"]["skipped"] == "tombstone"
    assert marker["source"]["skipped"] == "transaction marker" and marker["source"]["tx.event_count"] == "2"
    assert unknown["op"] is None and "schema id 42 is not in schemaDirectory" in unknown["_error"]


@pytest.mark.spark
def test_kcat_avro_json_without_schemas_unwraps_unions_and_refuses_bytes(spark, golden, tmp_path):
    path, _registry = golden
    insert, update, tombstone, marker, unknown = _decode(spark, path)
    for row in (insert, update, unknown):
        assert row["op"] is None and ".price': an Avro bytes value" in row["_error"]
        assert "set schemaDirectory" in row["_error"]
    assert tombstone["source"]["skipped"] == "tombstone" and marker["source"]["tx.event_count"] == "2"
    # no bytes: read as schemaless JSON (logical types stay their base values)
    plain = {k: v for k, v in AFTER.items() if k not in ("price", "amount")}
    record = _kcat(9, {"id": 1}, {"before": None, "after": {"Value": plain}, "source": SOURCE, "op": "c",
                                  "ts_ms": {"long": TS + 500}, "transaction": None})  # no schema ids: by shape
    (row,) = _decode(spark, _write(tmp_path / "plain.json", record))
    assert row["_error"] is None and row["keys"] == ["id"]
    assert row["after"] == {"id": "1", "created": "1700000000123456", "shipped": "1700000000123", "day": "19675",
                            "qty": "3", "ratio": "0.10000000149011612", "note": "é\"x",
                            "zoned": "2023-11-14T23:13:20+01:00"}


def _write(path: Path, *records: Any) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


# -- round trip ------------------------------------------------------------------------------------------


def _round_trip(spark, workdir: Path, sc, reads: list[bool], style: Style, short_names: bool) -> None:
    """Render Debezium's view of ``sc`` run by run as kcat's Avro JSON; after every run the tables
    equal the oracle's."""
    evs, index = as_debezium(sc.events, style.connector, reads)
    kinds = {decoded_table(style.connector, spec.name): {**{k: "int" if k == "ID" else "str" for k in spec.keys},
                                                         **spec.columns} for spec in sc.specs}
    originals = {decoded_table(style.connector, spec.name): spec.name for spec in sc.specs}
    keys = {decoded_table(style.connector, spec.name): list(spec.keys) for spec in sc.specs}
    avro = AvroRenderer(Renderer(evs, kinds, style, originals), evs, keys)
    landing, registry = workdir / "landing", workdir / "schemas"
    landing.mkdir(parents=True)
    oracle, targets, applied = Oracle(), {}, []
    for number, run in enumerate(sc.runs, start=1):
        run_events = [evs[j] for i in run for j in index[i]]
        path = landing / f"run-{number:04d}.json"
        path.write_text(kcat_avro_json(avro, run_events, short_names=short_names), encoding="utf-8")
        avro.write_registry(registry, export=number % 2 == 0)
        applied.append(str(path))
        expected = oracle.apply_run(declaring(run_events, kinds), pk_update="delete-insert")
        summary = lakecdc.apply(applied, workdir / "lake", format=FORMAT, options={"schemaDirectory": str(registry)},
                                keys=keys, pk_update=sc.pk_update, spark=spark)
        actual = {t.source_table: {f: getattr(t, f) for f in ("target", "events", "duplicate_or_late", "quarantined",
                                                               "inserted", "updated", "deleted", "status", "error")}
                  for t in summary.tables}
        targets.update({t: str(a["target"]) for t, a in actual.items()})
        assert summary.quarantined_unrouted == 0
        assert_counts(number, sc, run_events, expected, actual)
        assert_targets_match(oracle, targets, f"run {number} ({style}, kcat Avro JSON)")


@pytest.mark.spark
def test_round_trip_of_a_written_history_matches_the_oracle(spark, tmp_path):
    """A key change, a truncate, a snapshot read replayed after newer changes, partial images
    (unavailable values), duplicates across runs; Java's full branch names."""
    _round_trip(spark, tmp_path, WRITTEN, [True], Style("oracle", schema=True, layout="kcat"), short_names=False)


@pytest.mark.spark
@settings(max_examples=3, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=10), reads=st.lists(st.booleans(), min_size=10, max_size=10))
def test_round_trip_of_random_histories_matches_the_oracle(spark, tmp_path_factory, sc, reads):
    _round_trip(spark, tmp_path_factory.mktemp("dbzavrojson"), sc, reads, Style("postgresql", schema=True, layout="kcat"),
                short_names=True)


@pytest.mark.spark
def test_union_branches_named_by_full_names_that_inherit_their_namespace(spark, tmp_path):
    """Avro specification, "Names": a record without a namespace of its own takes the enclosing
    record's, so the ``Value`` record inside the ``...order_items.Envelope`` is
    ``dbserver1.inventory.order_items.Value``; Java writes a union branch with that full name, and a
    reference ``"Value"`` is resolved in that namespace too."""
    from tests.decode.debezium.test_debezium_avro import ENVELOPE, VALUE

    value = {k: v for k, v in VALUE.items() if k != "namespace"}  # inherits the Envelope's namespace
    fields = [{**f, "type": ["null", value] if f["name"] == "before" else ["null", "Value"]}
              if f["name"] in ("before", "after") else f for f in ENVELOPE["fields"]]
    registry = tmp_path / "schemas"
    registry.mkdir()
    for schema_id, schema in {**SCHEMAS, IDS["value"]: {**ENVELOPE, "fields": fields}}.items():
        (registry / f"{schema_id}.avsc").write_text(json.dumps(schema))
    full = "dbserver1.inventory.order_items.Value"
    record = _kcat(0, {"id": 1}, {"before": {full: {**AFTER, "note": None}}, "after": {full: AFTER},
                                  "source": SOURCE, "op": "u", "ts_ms": {"long": TS + 500}, "transaction": None},
                   key_schema_id=IDS["key"], value_schema_id=IDS["value"])
    short = _kcat(1, {"id": 1}, {"before": None, "after": {"Value": AFTER}, "source": SOURCE, "op": "c",
                                 "ts_ms": {"long": TS + 500}, "transaction": None},
                  key_schema_id=IDS["key"], value_schema_id=IDS["value"])
    update, insert = _decode(spark, _write(tmp_path / "kcat.json", record, short), schemaDirectory=str(registry))
    assert update["_error"] is None and insert["_error"] is None, (update["_error"], insert["_error"])
    assert update["op"] == "U" and update["after"]["price"] == "12.50" and update["before"]["note"] is None
    assert insert["op"] == "I" and insert["after"]["amount"] == "12.345"


def test_expand_names_resolves_names_as_the_avro_specification_does():
    from lakecdc.decode.avro.schemas import expand_names

    schema = {"type": "record", "name": "Envelope", "namespace": "a.b", "fields": [
        {"name": "x", "type": {"type": "record", "name": "Value", "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "namespace": "", "symbols": ["A"]}},
            {"name": "f", "type": {"type": "fixed", "name": "c.F", "size": 2}},
            {"name": "g", "type": "F"}]}},  # no F in a.b: the null namespace's (none): kept as written
        {"name": "y", "type": ["null", "Value"]},
        {"name": "z", "type": {"type": "array", "items": "a.b.Value"}},
        {"name": "w", "type": "E"}]}
    expanded, named = expand_names(schema)
    assert set(named) == {"a.b.Envelope", "a.b.Value", "E", "c.F"}
    fields = {f["name"]: f["type"] for f in expanded["fields"]}
    assert fields["x"]["name"] == "a.b.Value" and fields["y"] == ["null", "a.b.Value"]
    assert fields["z"]["items"] == "a.b.Value" and fields["w"] == "E"
    inner = {f["name"]: f["type"] for f in fields["x"]["fields"]}
    assert inner["e"]["name"] == "E" and inner["f"]["name"] == "c.F" and inner["g"] == "F"
