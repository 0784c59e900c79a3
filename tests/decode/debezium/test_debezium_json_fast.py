"""The fast paths of ``debezium-json`` (msgspec parsing, each Connect schema parsed once, image
readers by position) give exactly what the plain reading gives: numbers as their text, missing vs
NULL, logical types, every layout, errors per record. In-process (no Spark): the executors' code."""

from __future__ import annotations

import base64
import functools
import json
from typing import Any

import pyarrow as pa
import pytest

from lakecdc.decode.debezium.envelope import image_readers
from lakecdc.decode.debezium.json import DebeziumJsonDecoder
from lakecdc.decode.debezium.lines import LineReader, decode_batches
from lakecdc.decode.jsontext import Num, loads, slow_loads
from lakecdc.decode.kafka.connect import ConnectSplitter
from lakecdc.decode.kafka.connect_values import ImageReader, image_pairs
from lakecdc.decode.rows import RecordError

SETTINGS = DebeziumJsonDecoder({}).settings
DECIMAL = "org.apache.kafka.connect.data.Decimal"


def _field(name: str, kind: str, logical: str | None = None, **params: str) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "optional": True, "field": name}
    if logical:
        out["name"] = logical
    if params:
        out["parameters"] = params
    return out


ROW = {"type": "struct", "optional": True, "name": "srv.app.t.Value", "fields": [
    _field("id", "int64"), _field("price", "bytes", DECIMAL, scale="2"), _field("ratio", "float64"),
    _field("note", "string"), _field("ts", "int64", "io.debezium.time.MicroTimestamp"),
    _field("day", "int32", "io.debezium.time.Date"), _field("big", "int64")]}
SCHEMA = {"type": "struct", "name": "srv.app.t.Envelope", "optional": False, "fields": [
    {**ROW, "field": "before"}, {**ROW, "field": "after"},
    {"type": "struct", "field": "source", "optional": False, "fields": []},
    {"type": "string", "field": "op", "optional": False}]}


def _b64(n: int) -> str:
    return base64.b64encode(n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)).decode()


def _payload(op: str, pos: int, before: dict | None, after: dict | None) -> dict[str, Any]:
    source = {"version": "2.7.0.Final", "connector": "postgresql", "name": "srv", "ts_ms": 1_700_000_000_000,
              "db": "shop", "schema": "app", "table": "t", "lsn": pos, "txId": 7}
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_500}


IMAGE = {"id": 1, "price": _b64(-1050), "ratio": 0.1, "note": "é\"\\", "ts": 1_700_000_000_123_456, "day": 19675,
         "big": 123456789012345678901234567890}
PAYLOADS = [
    _payload("c", 10, None, IMAGE),
    _payload("u", 11, {"id": 1}, {**IMAGE, "note": "__debezium_unavailable_value", "price": None}),  # missing, NULL
    _payload("u", 12, None, {"note": "x", "id": 1}),  # members out of schema order
    _payload("d", 13, {"id": 1, "price": "not base64!"}, None),  # a bad Decimal: an error
]


def _texts(lines: list[str]) -> list[Any]:
    reader = LineReader(SETTINGS)
    return reader.read_all([(text, "f.json", i) for i, text in enumerate(lines)])


def test_numbers_keep_their_text_and_bad_json_says_why_as_json_does():
    value = loads('{"a":1.50,"b":123456789012345678901234567890,"c":1e400,"d":[2.0E+1],"e":-7}')
    assert value == {"a": "1.50", "b": 123456789012345678901234567890, "c": "1e400", "d": ["2.0E+1"], "e": -7}
    assert all(type(value[k]) is Num for k in "ac") and type(value["d"][0]) is Num
    assert loads('{"x":NaN}') == slow_loads('{"x":NaN}') == {"x": "NaN"}  # Jackson's token, read by json
    for bad in ('{"a":', "not json", '{"a":1} x'):
        with pytest.raises(RecordError) as fast:
            loads(bad)
        with pytest.raises(RecordError) as slow:
            slow_loads(bad)
        assert str(fast.value) == str(slow.value) and "is not valid JSON" in str(fast.value)


def test_connect_pairs_read_by_their_split_equal_the_whole_parse():
    """The same records as compact ``{"schema","payload"}`` lines (split: schema cached) and with
    the members swapped (parsed whole): identical rows, decimals, times, missing and NULL alike."""
    compact = [json.dumps({"schema": SCHEMA, "payload": p}, separators=(",", ":"), ensure_ascii=False) for p in PAYLOADS]
    swapped = [json.dumps({"payload": p, "schema": SCHEMA}, separators=(",", ":"), ensure_ascii=False) for p in PAYLOADS]
    splitter = ConnectSplitter(functools.partial(image_readers, settings=SETTINGS))
    assert all(splitter.split(line) is not None for line in compact) and len(splitter.schemas) == 1
    assert all(splitter.split(line) is None for line in swapped)
    fast, whole = _texts(compact), _texts(swapped)
    assert fast == whole
    first, second, third, bad = fast
    assert dict(first.after) == {"id": "1", "price": "-10.50", "ratio": "0.1", "note": "é\"\\",
                                 "ts": "2023-11-14T22:13:20.123456Z", "day": "2023-11-14",
                                 "big": "123456789012345678901234567890"}
    assert "note" not in dict(second.after) and dict(second.after)["price"] is None  # missing vs NULL
    assert [c for c, _ in third.after] == ["note", "id"]
    assert bad.op is None and "price" in bad.error and "not base64" in bad.error and bad.table == "app.t"


def test_odd_lines_fall_back_to_the_whole_parse():
    """A '"payload":' inside the schema, spaces, a trailing member, NaN: parsed whole, never split wrong."""
    schema = {"type": "struct", "parameters": {"x": ',"payload":{'}, "fields": []}
    payload = {"op": "c", "source": {"connector": "mysql", "db": "d", "table": "t", "file": "b.1", "pos": 4, "ts_ms": 1},
               "after": {"id": 1}}
    lines = [
        json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")),
        json.dumps({"schema": schema, "payload": payload}),
        json.dumps({"schema": None, "payload": payload}, separators=(",", ":")) + "  ",
        '{"schema":{"type":"struct","fields":[]},"payload":{"op":"c","after":{"x":NaN}},"extra":1}',
    ]
    rows = _texts(lines)
    assert [r.table for r in rows[:3]] == ["d.t"] * 3 and all(dict(r.after) == {"id": "1"} for r in rows[:3])
    assert rows[3].error == "'op' missing: not a Debezium change event (members: schema, payload, extra)"


def test_a_lone_surrogate_fails_its_record_not_the_batch():
    lines = ['{"op":"c","source":{"connector":"mysql","db":"d","table":"t","file":"b.1","pos":4,"ts_ms":1},'
             '"after":{"id":1,"s":"\\ud800"}}',
             '{"op":"c","source":{"connector":"mysql","db":"d","table":"t","file":"b.1","pos":5,"ts_ms":1},'
             '"after":{"id":2}}']
    batch = pa.RecordBatch.from_pydict({"value": lines, "_file": ["f"] * 2, "_block": [0] * 2, "_row": [0, 1]})
    (out,) = list(decode_batches(iter([batch]), settings=SETTINGS))
    rows = out.to_pylist()
    assert "lone surrogate" in rows[0]["x_error"] and rows[0]["x_table"] == "d.t"
    assert rows[1]["x_error"] is None and rows[1]["x_after"] == [("id", "2")]


@pytest.mark.parametrize(
    ("line", "declares"),
    [
        ('{"op":"c","source":{"schema":"BENCH","table":"T"},"after":{"id":1}}', False),
        ('{"op":"c","source":{"schema" : "BENCH"},"after":{"schema":"x"}}', False),
        ('{"schema":{"type":"struct","fields":[]},"payload":{"op":"c"}}', True),
        ('{"schema": {"type":"struct"}, "payload": null}', True),
        ('{"schema":null,"payload":{"op":"c"}}', True),
        ('{"topic":"t","payload":"{\\"schema\\":{\\"type\\":\\"struct\\"},\\"payload\\":{}}"}', True),
        ('{"topic":"t","payload":"{\\"source\\":{\\"schema\\":\\"BENCH\\"}}"}', False),
        ('{"source":{"schema":"S"},"tableChanges":[]}', True),
        ('{"historyRecord":"{}"}', True),
    ],
)
def test_only_lines_that_may_declare_types_are_parsed_for_them(line: str, declares: bool):
    """column_types parses a line only when a ``schema`` member holds no string (or it is a schema
    change): a bare envelope's ``"schema": "BENCH"`` in ``source`` is no Connect schema."""
    from lakecdc.decode.debezium.json import _may_declare

    assert _may_declare(line) is declares


@pytest.mark.parametrize("ordered", [False, True])
def test_image_reader_gives_what_the_plain_image_reading_gives(ordered: bool):
    """The reader of whole images by position (:class:`~lakecdc.decode.kafka.connect_values.ImageReader`)
    against :func:`~lakecdc.decode.kafka.connect_values.image_pairs`, value kind by value kind: NULLs,
    placeholders (missing), values of the wrong JSON type, every field in order or not."""
    fields = {f["field"]: f for f in ROW["fields"]}
    placeholders = frozenset({"__debezium_unavailable_value"})
    reader = ImageReader(fields, placeholders, ordered=ordered)
    samples = {
        "id": [1, None, -7, 12345678901234567890, "12", True, 1.5],
        "price": [_b64(-1050), None, "__debezium_unavailable_value", 17],
        "ratio": [0.25, None, 3, "x"],
        "note": ["a", None, "__debezium_unavailable_value", "", 5, {"k": 1}],
        "ts": [1_700_000_000_123_456, None, "x"],
        "day": [19675, None],
        "big": [2**70, None, "__debezium_unavailable_value"],
    }
    def outcome(read: Any, obj: dict[str, Any]) -> Any:
        try:
            return read(obj, "after")
        except RecordError as exc:  # a value its type does not allow: the same reason either way
            return f"error: {exc}"

    names, errors = list(fields), 0
    for i in range(max(len(v) for v in samples.values())):
        obj = {n: samples[n][i % len(samples[n])] for n in names}
        plain = outcome(lambda o, image: image_pairs(o, fields, placeholders, image), obj)
        assert outcome(reader.pairs, obj) == plain, obj
        errors += isinstance(plain, str)
        if ordered:  # (an ordered reader's objects come in schema order: Avro records)
            continue
        swapped = dict(reversed(list(obj.items())))  # another order: read by name
        assert outcome(reader.pairs, swapped) == outcome(lambda o, image: image_pairs(o, fields, placeholders, image), swapped)
    assert 0 < errors < len(samples["id"])
    one = ImageReader({"id": fields["id"]}, placeholders)
    assert one.pairs({"id": 3}, "after") == [("id", "3")] and one.pairs({"id": None}, "after") == [("id", None)]
