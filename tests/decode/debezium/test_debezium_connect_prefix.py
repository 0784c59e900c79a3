"""``debezium-json`` with ``schemas.enable=true``: every line repeats its Connect schema, so Spark
cuts a file's first-line schema off each line that starts with it, and Python reads the rest
(:func:`~lakecdc.decode.kafka.connect.connect_prefixes`). Cut or not, every line must give
the same row and the same declared types: whatever the lines hold (another schema, a tombstone, a
bad payload, text after the object, a comment block, a key line before its value)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from lakecdc.decode import get_decoder
from lakecdc.decode.debezium.ddl import merge_declared
from lakecdc.decode.debezium.json import type_batches
from lakecdc.decode.debezium.lines import LineReader, decode_batches
from lakecdc.decode.files.lines import read_lines
from lakecdc.decode.files.staging import first_record
from lakecdc.decode.kafka.connect import connect_prefixes
from lakecdc.decode.kafka.records import TYPES_SCHEMA
from lakecdc.decode.rows import ROW_SCHEMA
from tests.decode.debezium.test_debezium_json_fast import IMAGE, PAYLOADS, ROW, SCHEMA, SETTINGS, _payload

OTHER = {**SCHEMA, "name": "srv.app.u.Envelope",
         "fields": [{**ROW, "field": "before", "name": "srv.app.u.Value"}, {**ROW, "field": "after", "name": "srv.app.u.Value"},
                    *SCHEMA["fields"][2:]]}
KEY_SCHEMA = {"type": "struct", "name": "srv.app.t.Key", "optional": False,
              "fields": [{"type": "int64", "optional": False, "field": "id"}]}


def _line(schema: Any, payload: Any) -> str:
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":"), ensure_ascii=False)


def _lines() -> list[str]:
    first = _line(SCHEMA, PAYLOADS[0])
    return [
        first,
        *[_line(SCHEMA, p) for p in PAYLOADS[1:]],                       # update, partial, bad Decimal
        _line(SCHEMA, None),                                             # tombstone with schema
        _line(OTHER, _payload("c", 20, None, IMAGE)),                    # another schema: read whole
        _line(SCHEMA, _payload("c", 21, None, IMAGE)) + " x",            # text after the object
        first[: first.index(',"payload":')] + ',"payload":{"op":}}',     # the payload is no JSON
        "/*",                                                            # a comment block ...
        _line(SCHEMA, _payload("c", 22, None, IMAGE)),                   # ... holding a cut line
        "*/",
        "",
        _line(KEY_SCHEMA, {"id": 1}),                                    # a key line ...
        _line(SCHEMA, _payload("d", 23, {"id": 1}, None)),               # ... lends its key to this value
        _line(SCHEMA, {**_payload("u", 24, {"id": 1}, {**IMAGE, "note": "é ☃ 𝄞"}), "ts_ms": 5}),
    ]


@pytest.fixture
def landing(tmp_path: Path) -> list[str]:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("\n".join(_lines()) + "\n", encoding="utf-8")
    b.write_text(_line(OTHER, _payload("c", 30, None, IMAGE)) + "\n" + _lines()[0] + "\n", encoding="utf-8")
    return [str(a), str(b)]


def _rows(df) -> list[dict[str, Any]]:
    return sorted((r.asDict(recursive=True) for r in df.collect()), key=lambda r: (r["_file"], r["_row"]))


@pytest.mark.spark
def test_cut_lines_decode_as_whole_lines(spark, landing):
    prefixes = connect_prefixes(first_record(p) for p in landing)
    assert len(prefixes) == 2  # one per distinct first-line schema
    cut = read_lines(spark, landing, prefixes)
    heads = [r["_head"] for r in cut.orderBy("_file", "_row").collect()]
    assert heads.count(0) == 11 and heads.count(1) == 2  # the other lines reach Python whole
    body = functools.partial(decode_batches, settings=SETTINGS, prefixes=prefixes)
    by_cut = _rows(cut.mapInArrow(body, ROW_SCHEMA))
    whole = _rows(read_lines(spark, landing).mapInArrow(functools.partial(decode_batches, settings=SETTINGS),
                                                            ROW_SCHEMA))
    assert by_cut == whole
    assert len(by_cut) == len([x for x in _lines() if x.strip()]) + 2
    first = by_cut[0]
    assert first["x_error"] is None and dict(first["x_after"])["price"] == "-10.50"
    errors = [r["x_error"] for r in by_cut if r["x_error"]]
    assert any("price" in e for e in errors) and any("not valid JSON" in e for e in errors)
    assert any("trailing" in e or "not valid JSON" in e for e in errors if "price" not in e)
    deleted = [r for r in by_cut if r["x_op"] == "D" and r["x_error"] is None]
    assert deleted and deleted[-1]["x_keys"] == ["id"]  # the key line's columns
    # the cut reached Python: a cut line's text holds no schema
    texts = [r["value"] for r in cut.where(F.col("_head").isNotNull()).collect()]
    assert all(t.startswith(("{", "null")) and '"fields"' not in t for t in texts)


@pytest.mark.spark
def test_declared_types_are_the_same_cut_or_whole(spark, landing):
    decoder = get_decoder("debezium-json", {})
    types = decoder.column_types(spark, landing, staging=str(Path(landing[0]).parent / "_s"))
    whole = read_lines(spark, landing).mapInArrow(functools.partial(type_batches, settings=SETTINGS),
                                                      TYPES_SCHEMA)
    assert types == merge_declared(whole.distinct().collect())
    assert set(types) == {"app.t"} and str(types["app.t"]["price"]) == "DecimalType(38,2)", types


def test_a_cut_line_in_an_open_comment_block_is_read_whole():
    line = _line(SCHEMA, PAYLOADS[0])
    (prefix,) = connect_prefixes([line])
    rest = line[len(prefix):]
    reader = LineReader(SETTINGS, None, [prefix])
    rows = reader.read_all([("/*", "f", 0, None), (rest, "f", 1, 0), ("*/", "f", 2, None), (rest, "f", 3, 0)])
    plain = LineReader(SETTINGS).read_all([("/*", "f", 0), (line, "f", 1), ("*/", "f", 2), (line, "f", 3)])
    assert rows == plain
    assert [dict(r.source or []).get("skipped") for r in rows[:3]] == ["comment"] * 3
    assert rows[3].op == "I" and rows[3].error is None


@pytest.mark.spark
@pytest.mark.parametrize("small", [True, False], ids=["small-run", "big-run"])
@pytest.mark.parametrize("schemas", [True, False])
def test_apply_caches_the_events_only_when_python_decoded_them_or_the_run_is_small(
    spark, tmp_path, monkeypatch, schemas, small,
):
    """Records decoded in Python are cached for the run (not decoded again to fold them), those
    Spark decodes are not (parsing again is cheaper), unless the run is small (its input at most
    ``SMALL_RUN_BYTES``: then every format is cached, Spark's per-query work being most of the
    time); the cache is gone after the run."""
    import lakecdc
    from lakecdc.run import apply as run_apply

    if not small:
        monkeypatch.setattr(run_apply, "SMALL_RUN_BYTES", 0)

    landing = tmp_path / "in"
    landing.mkdir()
    image = {**IMAGE, "big": 5}  # (IMAGE's 30 digits fit no bigint: quarantined)
    payloads = [_payload("c", 10, None, image), _payload("u", 11, {"id": 1}, {**image, "note": "n"})]
    lines = [_line(SCHEMA, p) if schemas else json.dumps(p) for p in payloads]
    (landing / "a.json").write_text("\n".join(lines) + "\n", encoding="utf-8")

    def persisted() -> set[int]:  # (ids: the cleaner may drop an earlier test's cached RDD meanwhile)
        return set(spark.sparkContext._jsc.getPersistentRDDs().keySet())

    before, during = persisted(), []

    def progress(message: str) -> None:
        if message.endswith("consolidating"):
            during.append(len(persisted() - before))

    summary = lakecdc.apply([str(landing)], str(tmp_path / "lake"), format="debezium-json", keys={"app.t": "id"},
                            spark=spark, progress=progress)
    assert [(t.source_table, t.inserted) for t in summary.tables] == [("app.t", 1)]
    assert during == [1 if schemas or small else 0]
    assert not persisted() - before
