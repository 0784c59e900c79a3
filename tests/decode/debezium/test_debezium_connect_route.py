"""``debezium-json`` with ``schemas.enable=true`` read by Spark (:mod:`lakecdc.decode.debezium.connect_sql`):
the payload of each line whose Connect schema SQL reads is decoded in SQL, Decimals included; every
other line goes to the Python reader with its whole text. Both must give the rows ``reader=python``
gives, whatever the lines hold."""

from __future__ import annotations

import base64
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from lakecdc.decode import get_decoder
from lakecdc.decode.debezium.connect_sql import _beyond, _decimal_stages, connect_file, plan
from lakecdc.decode.files.lines import exact_json_strings
from lakecdc.decode.kafka.connect import connect_prefixes
from lakecdc.decode.kafka.connect_values import decimal_text
from tests.decode.debezium.test_debezium_json_fast import DECIMAL, _field


def _schema(*fields: dict[str, Any], name: str = "srv.app.t") -> dict[str, Any]:
    row = {"type": "struct", "optional": True, "name": f"{name}.Value", "fields": list(fields)}
    source = {"type": "struct", "field": "source", "optional": False, "fields": [_field("lsn", "int64")]}
    return {"type": "struct", "name": f"{name}.Envelope", "optional": False,
            "fields": [{**row, "field": "before"}, {**row, "field": "after"}, source, _field("op", "string")]}


FIELDS = (_field("id", "int64"), _field("price", "bytes", DECIMAL, scale="2", **{"connect.decimal.precision": "10"}),
          _field("qty", "bytes", DECIMAL, scale="0"), _field("note", "string"), _field("ok", "boolean"),
          _field("raw", "bytes"), _field("small", "int16"))
SCHEMA = _schema(*FIELDS)
FLOATING = _schema(*FIELDS, _field("ratio", "float64"), name="srv.app.f")
DATED = _schema(*FIELDS, _field("day", "int32", "io.debezium.time.Date"), name="srv.app.d")


def _b64(n: int, width: int | None = None) -> str:
    size = width or (n.bit_length() + 8) // 8
    return base64.b64encode(n.to_bytes(size, "big", signed=True)).decode()


def _source(pos: int, **extra: Any) -> dict[str, Any]:
    return {"version": "2.7.0.Final", "connector": "postgresql", "name": "srv", "ts_ms": 1_700_000_000_000,
            "db": "shop", "schema": "app", "table": "t", "lsn": pos, "txId": 7, **extra}


def _image(i: int, **values: Any) -> dict[str, Any]:
    base = {"id": i, "price": _b64(-1050), "qty": _b64(7), "note": f"n{i}", "ok": True, "raw": "AAE=", "small": -3}
    return {**base, **values}


def _env(op: str, pos: int, before: Any, after: Any, **extra: Any) -> dict[str, Any]:
    return {"before": before, "after": after, "source": _source(pos), "op": op, "ts_ms": 1_700_000_000_500, **extra}


def _line(schema: Any, payload: Any) -> str:
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":"), ensure_ascii=False)


def _lines() -> list[str]:
    first = _line(SCHEMA, _env("c", 1, None, _image(1)))
    return [
        first,
        _line(SCHEMA, _env("u", 2, _image(1), _image(1, price=_b64(0), qty=_b64(-(2**55)), note=None))),
        _line(SCHEMA, _env("u", 3, _image(1), _image(1, price=_b64(2**55 - 1, 7), qty=None))),   # 7 bytes
        _line(SCHEMA, _env("u", 4, _image(1), _image(1, price=_b64(2**60)))),                    # 8 bytes: Python
        _line(SCHEMA, _env("u", 5, _image(1), _image(1, price=_b64(5, 3), qty=_b64(-1, 1)))),    # leading zeros
        _line(SCHEMA, _env("u", 6, _image(1), _image(1, price="not base64!"))),                  # an error
        _line(SCHEMA, _env("u", 7, _image(1), _image(1, price=""))),                             # empty bytes
        _line(SCHEMA, _env("u", 8, _image(1), _image(1, note="__debezium_unavailable_value"))),  # missing
        _line(SCHEMA, _env("u", 9, _image(1), _image(1, price=base64.b64encode(b"__debezium_unavailable_value")
                                                          .decode()))),
        _line(SCHEMA, _env("u", 10, _image(1), {"id": 1, "note": "partial"})),                  # not every field
        _line(SCHEMA, _env("u", 11, _image(1), dict(reversed(list(_image(1).items()))))),      # another order
        _line(SCHEMA, _env("r", 12, None, _image(2))),
        _line(SCHEMA, _env("d", 13, _image(2), None)),
        _line(SCHEMA, _env("t", 14, None, None)),
        _line(SCHEMA, _env("c", 15, None, _image(3, note="é \" \\ ☃ 𝄞", ok=False),
                           transaction={"id": "tx1", "total_order": 1, "data_collection_order": 1})),
        _line(SCHEMA, None),                                                                     # tombstone
        _line(SCHEMA, _env("c", 16, None, _image(4))) + "}",                                     # text after it
        _line(SCHEMA, _env("c", 17, None, _image(5))) + "  ",                                    # spaces after it
        first[: first.index(',"payload":')] + ',"payload":{"op":}}',                             # no JSON
        _line(SCHEMA, _env("c", 18, None, _image(6)))[:-1] + ',"x":1}',                         # a member after
        _line(DATED, _env("c", 19, None, {**_image(7), "day": 19675})),                          # another schema
        _line(SCHEMA, _env("c", 20, None, {**_image(8), "doc": {"k": 1}})),                      # nested value
        _line(SCHEMA, _env("x", 21, None, _image(9))),                                           # unknown op
        _line(SCHEMA, _env("c", 23, None, _image(11, note="b~c"))).replace("b~c", "b\\ud800c"),  # lone surrogate
        "",
        _line(SCHEMA, _env("c", 22, None, _image(10, id="12a"))),                                # text in int64
    ]


def _normalised(df) -> list[dict[str, Any]]:
    cols = [F.to_json(F.map_entries(c)).alias(c) if c in ("before", "after", "source") else F.col(c) for c in df.columns]
    return sorted((r.asDict() for r in df.select(*cols).collect()), key=lambda r: (r["_file"], r["_row"]))


def _read(spark, paths: list[str], **options: str) -> tuple[list[dict[str, Any]], bool]:
    decoder = get_decoder("debezium-json", options)
    with exact_json_strings(spark):
        rows = _normalised(decoder.read(spark, paths, staging=str(Path(paths[0]).parent / "stg")))
    return rows, decoder.rows_in_python()


def test_which_schemas_sql_reads():
    prefix = connect_prefixes([_line(SCHEMA, _env("c", 1, None, _image(1)))])[0]
    (names, decimals), (after_names, after_decimals) = plan(prefix)
    assert names == after_names == tuple(f["field"] for f in FIELDS)
    assert decimals == after_decimals == {1: 2, 2: 0}
    for other in (FLOATING, DATED, _schema(_field("id", "int64", "io.debezium.time.MicroTimestamp")),
                  _schema(_field("x", "bytes", "io.debezium.data.VariableScaleDecimal")),
                  _schema(_field("a", "array")), _schema(_field("x", "bytes", DECIMAL, scale="19")),
                  _schema({**_field("ID", "int64"), "parameters": {"__debezium.source.column.name": "id"}})):
        assert plan(connect_prefixes([_line(other, _env("c", 1, None, {}))])[0]) is None
    assert connect_file(_line(SCHEMA, _env("c", 1, None, _image(1))))
    assert not connect_file(_line(FLOATING, _env("c", 1, None, _image(1))))
    assert not connect_file(_line({"type": "struct", "name": "srv.app.t.Key", "fields": [_field("id", "int64")]},
                                  {"id": 1}))
    assert not connect_file(json.dumps({"schema": SCHEMA, "payload": _env("c", 1, None, _image(1))}))  # not compact


@pytest.mark.spark
@pytest.mark.parametrize("options", [{}, {"sequenceBy": "op_ts"}])
def test_every_kind_of_line_decodes_as_the_python_reader_decodes_it(spark, tmp_path, options):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    a.write_text("\n".join(_lines()) + "\n", encoding="utf-8")
    b.write_text(_line(SCHEMA, _env("c", 30, None, _image(30))) + "\n", encoding="utf-8")
    floating = _line(FLOATING, _env("c", 40, None, {**_image(40), "ratio": 1.5})).replace('"ratio":1.5', '"ratio":1.50')
    c.write_text(floating + "\n", encoding="utf-8")
    by_spark, python_files = _read(spark, [str(a), str(b)], **options)
    by_python, _ = _read(spark, [str(a), str(b)], reader="python", **options)
    assert not python_files  # both files were read by the SQL route
    assert len(by_spark) == len([x for x in _lines() if x.strip()]) + 1
    # a value of the wrong JSON type is quarantined either way, the reason worded otherwise
    last = max((r for r in by_spark if r["_file"] == str(a)), key=lambda r: r["_row"])
    assert '"12a"' in last["after"] and last["_error"] is None
    python_last = max((r for r in by_python if r["_file"] == str(a)), key=lambda r: r["_row"])
    assert "expected an integer" in python_last["_error"]
    assert [r for r in by_spark if r is not last] == [r for r in by_python if r is not python_last]
    # exact Decimals where SQL read them, and the 8-byte one read by Python
    afters = " ".join(r["after"] or "" for r in by_spark)
    assert '"value":"360287970189639.67"' in afters  # 2**55 - 1, scale 2
    assert '"value":"-36028797018963968"' in afters  # -(2**55), scale 0
    assert '"value":"11529215046068469.76"' in afters  # 2**60: read by Python
    # a file whose schema SQL does not read goes to the Python reader as a whole
    rows, python_files = _read(spark, [str(c)], **options)
    assert python_files and rows == _read(spark, [str(c)], reader="python", **options)[0]
    assert '"value":"1.50"' in rows[0]["after"]


@pytest.mark.spark
# (few examples of many values: each scale in an example is one Spark query)
@settings(max_examples=8, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**55), 2**55 - 1), st.integers(0, 18), st.integers(0, 3)),
                min_size=1, max_size=120))
def test_decimals_in_sql_are_the_python_readers_text(spark, values):
    rows = []
    for n, scale, pad in values:
        width = min(7, (n.bit_length() + 8) // 8 + pad)
        rows.append((_b64(n, width), scale, str(decimal_text(n, scale))))
    df = spark.createDataFrame(rows, "v string, scale int, want string")
    got = []
    for scale in sorted({s for _, s, _ in rows}):
        part = df.where(F.col("scale") == scale).selectExpr("*", f"{_beyond('v')} AS v_x")
        for select in _decimal_stages("v", scale):
            part = part.selectExpr("*", *[f"{sql} AS {name}" for name, sql in select])
        got += part.select("want", "v_t", "v_x").collect()
    assert len(got) == len(rows)
    for want, text, beyond in got:
        assert (text, beyond) == (want, False)
        assert Decimal(text) == Decimal(want)


@pytest.mark.spark
def test_values_sql_cannot_read_are_marked(spark):
    df = spark.createDataFrame([(_b64(2**60),), ("not base64",), ("",), (None,), ("AA=",), ("AQ==",)], "v string")
    # converted only when SQL reads the value
    df = df.selectExpr("*", f"{_beyond('v')} AS v_x").selectExpr("*", "IF(v_x, NULL, v) AS w")
    for select in _decimal_stages("w", 2):
        df = df.selectExpr("*", *[f"{sql} AS {name}" for name, sql in select])
    assert [(r.v_x, r.w_t) for r in df.collect()] == [(True, None)] * 3 + [(False, None), (True, None), (False, "0.01")]


def _stage_lines(df) -> list[int]:
    """Lines of Java per whole-stage-codegen stage of ``df``'s plan."""
    stages = df._jdf.queryExecution().debug().codegenToSeq()
    return [stages.apply(i)._2().count("\n") for i in range(stages.size())]


@pytest.mark.spark
@pytest.mark.parametrize("connector", ["oracle", "db2", "mysql", "postgresql"])
def test_the_generated_code_of_a_decode_stays_small_enough_for_the_jit(spark, tmp_path, connector):
    # Oracle's SQL position, written out per use of each member, and the Connect Decimals' conversion
    # made one stage of 16,500 lines that failed to compile (Spark then ran it operator by operator);
    # at 10,500 lines it compiled and ran at a third of the speed of the same work in two stages.
    source = {"version": "2.7.0.Final", "connector": connector, "name": "srv", "ts_ms": 1_700_000_000_000,
              "db": "shop", "schema": "app", "table": "t", "scn": "10", "commit_scn": "11", "ssn": 0,
              "redo_thread": 1, "commit_lsn": "00000001:00000002:0003", "change_lsn": "00000001:00000002:0004",
              "event_serial_no": 1, "file": "binlog.000003", "pos": 12, "row": 0, "lsn": 99}
    schema = _schema(*FIELDS, _field("total", "bytes", DECIMAL, scale="4"), _field("tax", "bytes", DECIMAL, scale="2"))
    env = {**_env("c", 1, None, _image(1, total=_b64(10), tax=_b64(3))), "source": source}
    with_schema, bare = tmp_path / "with.json", tmp_path / "bare.json"
    with_schema.write_text(_line(schema, env) + "\n", encoding="utf-8")
    bare.write_text(json.dumps(env) + "\n", encoding="utf-8")
    for path in (with_schema, bare):
        decoder = get_decoder("debezium-json", {})
        sizes = _stage_lines(decoder.read(spark, [str(path)], staging=str(tmp_path / "staging")))
        assert not decoder.rows_in_python()  # (SQL reads the file)
        assert 1_000 < max(sizes) < 10_000, (path.name, sizes)
