"""``qlik-json`` read by Spark SQL (:mod:`lakecdc.decode.qlik.sql`) gives the events the Python
reader gives, on every kind of line: the lines SQL reads and the odd ones it leaves to Python."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import functions as F

from lakecdc.decode import get_decoder
from lakecdc.decode.files.reread import locate, source_of
from lakecdc.decode.qlik import decoders as qlik
from lakecdc.spark.conf import JOB_CONF, job_conf

try:
    from tests.qlik_render import Table, json_envelope, json_metadata, kcat_lines
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from qlik_render import Table, json_envelope, json_metadata, kcat_lines  # type: ignore[no-redef]

ORDERS = Table("SALES.ORDERS", (("ID", "INT8", 1), ("STATUS", "STRING", 0), ("AMOUNT", "NUMERIC", 0),
                                ("NOTE", "STRING", 0)))
WIDE = Table("S.WIDE", (("C1", "INT8", 1), *((f"C{i}", "INT8", 0) for i in range(2, 71))))
BLOBS = Table("S.BLOBS", (("ID", "INT8", 1), ("B", "BYTES", 0)))
ROW = {"ID": 1, "STATUS": "new", "AMOUNT": "12.50", "NOTE": None}


def _dt(data: object = "row", before: object = None, *, table: Table = ORDERS, sid: object = "id", **headers) -> str:
    head = {"operation": "INSERT", "changeSequence": "20240501000000000000000000000000001",
            "timestamp": "2024-05-01T00:00:00.000", "streamPosition": "p", "transactionId": "T1",
            "changeMask": "0F", "columnMask": "0F", "transactionEventCounter": 1, "transactionLastEvent": True}
    head.update(headers)
    body = {"data": dict(ROW) if data == "row" else data, "beforeData": before,
            "headers": {k: v for k, v in head.items() if v != "-"}}
    return json_envelope("DT", table.schema_id if sid == "id" else sid, body)  # type: ignore[arg-type]


def _lines() -> list[str]:
    wide_row = {f"C{i}": i for i in range(1, 71)}
    plain = [
        _dt(),
        _dt(operation="UPDATE", before=dict(ROW, STATUS="old"), changeMask="02"),
        _dt(operation="UPDATE", before=dict(ROW, STATUS="old"), columnMask="03", changeMask="02"),  # partial
        _dt(operation="UPDATE", before=None, columnMask="05"),
        _dt(operation="DELETE", columnMask="0F", changeMask=None),
        _dt(operation="DELETE", data=None, before=dict(ROW)),
        _dt(operation="REFRESH", changeSequence="", changeMask=None, columnMask=None),
        _dt(columnMask="", changeMask=""),
        _dt(columnMask="00"),                      # nothing present: empty images
        _dt(columnMask="0000000000000000000F"),    # long mask, leading zeros
        _dt(columnMask="01", changeMask="01"),    # short of the columns
        _dt(columnMask="B", changeMask="2"),      # odd numbers of digits: a leading 0 implied
        _dt(operation="UPDATE", before=dict(ROW, STATUS="old"), columnMask="00F", changeMask="A"),
        _dt(columnMask="-", changeMask="-", transactionEventCounter="-"),
        _dt(transactionLastEvent=False, transactionEventCounter="007"),
        _dt(data=dict(ROW, NOTE="é 𝄞 \\ \" / {x} tab\t"), timestamp="2024-05-01 00:00:00"),
        _dt(data=dict(ROW, ID=123456789012345678901234567890, STATUS=True)),
        _dt(changeSequence=20240501000000000000000000000000002, transactionId=""),
        _dt(externalSchemaId="X", streamPosition=""),
    ]
    odd = [
        json_metadata(ORDERS), json_metadata(WIDE), json_metadata(BLOBS),
        _dt(columnMask="3"), _dt(changeMask="0X"), _dt(columnMask="1F"), _dt(columnMask=" 0F"),
        _dt(columnMask=15), _dt(changeMask=True),
        _dt(operation="UPSERT"), _dt(operation="insert"), _dt(operation=" INSERT"),
        _dt(operation="UPDATE", changeSequence=""), _dt(changeSequence="12a"), _dt(transactionEventCounter="x"),
        _dt(transactionEventCounter=1234567890123456789), _dt(timestamp="yesterday"),
        _dt(data=dict(ROW, EXTRA=1)), _dt(data={"STATUS": "s", "ID": 1, "AMOUNT": None, "NOTE": None}),
        _dt(data={"ID": 1, "STATUS": "s"}), _dt(operation="DELETE", data=None), _dt(data=None),
        _dt(data=dict(ROW, AMOUNT=1.50)), _dt(data=dict(ROW, AMOUNT=1e5)), _dt(data=dict(ROW, ID=-0.0)),
        _dt(data=dict(ROW, NOTE={"a": 1})), _dt(data=dict(ROW, NOTE=[1, 2])), _dt(data="text"), _dt(before=[1]),
        _dt(sid="UNKNOWN"), _dt(sid=None), _dt(sid=" " + ORDERS.schema_id),
        _dt(table=WIDE, data=wide_row, columnMask="3F" + "FF" * 8, changeMask="01"),
        _dt(table=BLOBS, data={"ID": 1, "B": "00FF"}, columnMask="03", changeMask="03"),
        _dt(table=BLOBS, data={"ID": 1, "B": "zz"}, columnMask="03", changeMask="03"),
        _dt() + " trailing", _dt() + ',{"x":1}', "[" + _dt() + "]", '{"magic": "atMSG", "type": "DT", "message": {',
        '"just a string"', "42", "null", "{}",
        json_envelope("XX", ORDERS.schema_id, {}), json_envelope("DT", ORDERS.schema_id, "not an object"),  # type: ignore[arg-type]
        json.dumps({"magic": "nope", "type": "DT", "message": {}}),
        json.dumps({"data": ROW, "beforeData": None, "headers": {"operation": "INSERT", "changeSequence": "1"},
                    "schema": "SALES", "table": "ORDERS"}),
        kcat_lines([_dt()], topic="t").strip(),
        _dt().replace('"new"', '"\\u0041"'), _dt().replace('"new"', '"\\u00e9"'),
        _dt().replace('"headers":{', '"headers":{"operation":"DELETE",'),      # a header twice
        _dt().replace('"data":{', '"data":{"ID":5,'),                          # a column twice
        _dt().replace('"columnMask":"0F"', '"columnMask" : 15'),
        _dt().replace('"ID":1,', '"ID": -0,'),
        _dt().replace('"message":{', '"message":{"schema":"X","table":"Y",'),
        _dt().replace('{"magic"', '{"topic":"a","partition":0,"offset":1,"payload":null,"magic"'),
        _dt() + "\r",
        _dt(changeMask="10"), _dt(columnMask="0F", changeMask="05"),   # digits (the first not 0: could be a number)
        _dt(data=dict(ROW, NOTE="a\u0001{b", STATUS="[x]")),         # looks nested, is not: read by Python alike
        _dt().replace('{"magic"', '{"topic":null,"partition":null,"offset":null,"magic"'),  # kcat, every part null
        _dt().replace('{"magic"', '{"topic":"t","magic"'),               # not kcat: offset and partition missing
    ]
    return plain + odd


@pytest.mark.parametrize("split_bytes", [None, 4096])
def test_spark_sql_and_python_give_the_same_events(spark, tmp_path, split_bytes):
    """Both routes, line by line; with small splits, each file is read in several splits and a
    task reads several splits (the Python reader then finds its lines by split and rank)."""
    lines = _lines()
    f = tmp_path / "mixed.json"
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    files = [str(f)]
    if split_bytes:  # small files: their splits share a task
        for i in range(3):
            g = tmp_path / f"small{i}.json"
            g.write_text(lines[i] + "\n", encoding="utf-8")
            files.append(str(g))
    conf = {**JOB_CONF, **({"spark.sql.files.maxPartitionBytes": str(split_bytes), "spark.sql.files.openCostInBytes": "0"}
                           if split_bytes else {})}

    def events(spark_route: bool) -> list[dict]:
        decoder = get_decoder("qlik-json")
        decoder.spark_route = spark_route
        with job_conf(spark, conf):
            df = decoder.read(spark, files, staging=str(tmp_path / f"staging-{spark_route}"))
            # maps as JSON text: their order counts too
            shown = df.select(*[F.to_json(c).alias(c) if c in ("before", "after", "source", "keys") else F.col(c)
                                for c in df.columns])
            # (each route stages the file in its own staging area: compare the file staged)
            return [{**r.asDict(), "_file": source_of(r["_file"])} for r in shown.orderBy("_row").collect()]

    fast, reference = events(True), events(False)
    assert len(reference) == len(lines) + (3 if split_bytes else 0)
    for got, want in zip(fast, reference, strict=True):
        assert got == want
    if split_bytes:  # more splits than tasks: some task read several
        assert len({(r["_file"], r["_block"]) for r in fast}) > len({r["_row"] >> 33 for r in fast}) > 4
        return
    # a lone surrogate: quarantined (the Python reader alone cannot hand such a text to Spark)
    g = tmp_path / "surrogate.json"
    g.write_text(json_metadata(ORDERS) + "\n" + _dt().replace('"new"', '"\\ud800"') + "\n", encoding="utf-8")
    with job_conf(spark):
        (bad,) = get_decoder("qlik-json").read(spark, [str(g)], staging=str(tmp_path / "s")).where("op is null and _error is not null").collect()
    assert bad["_error"].startswith("a string holds a lone surrogate")
    # the common lines were read by SQL, and decoded
    assert sum(r["_error"] is None and r["op"] is not None for r in fast) >= 17


@pytest.mark.parametrize("spark_route", [True, False])
def test_masks_of_an_odd_number_of_digits_decode_to_their_columns(spark, tmp_path, spark_route):
    """A mask of an odd number of hex digits has a leading 0 implied (``B`` = ``0B``), on both routes."""
    f = tmp_path / "odd.json"
    f.write_text("\n".join([
        json_metadata(ORDERS),
        _dt(columnMask="B", changeMask="3"),                                            # ordinals 1, 2, 4
        _dt(operation="UPDATE", before=dict(ROW, STATUS="old"), columnMask="7", changeMask="2"),  # 1, 2, 3
        _dt(columnMask="00F", changeMask="008"),                                        # all; NOTE changed
    ]) + "\n", encoding="utf-8")
    decoder = get_decoder("qlik-json")
    decoder.spark_route = spark_route
    with job_conf(spark):
        got = decoder.read(spark, [str(f)], staging=str(tmp_path / "s")).orderBy("_row").collect()
    assert [(r["op"], r["_error"]) for r in got] == [(None, None), ("I", None), ("U", None), ("I", None)]
    assert got[1]["after"] == {"ID": "1", "STATUS": "new", "NOTE": None}  # AMOUNT (ordinal 3) not present
    assert got[1]["source"]["present_columns"] == "ID,STATUS,NOTE"
    assert got[2]["after"] == {"ID": "1", "STATUS": "new", "AMOUNT": "12.50"}
    assert got[2]["before"] == {"ID": "1", "STATUS": "old", "AMOUNT": "12.50"}
    assert got[2]["source"]["changed_columns"] == "STATUS"
    assert got[3]["source"]["changed_columns"] == "NOTE" and set(got[3]["after"]) == set(ROW)


@pytest.mark.parametrize("chunk", [1 << 24, 4])
def test_only_files_mentioning_metadata_are_read_for_it(tmp_path, monkeypatch, chunk):
    """The byte search that spares a file of data messages its second (text) read: a mark found
    wherever it lies, across the chunks it is read in too."""
    monkeypatch.setattr(qlik, "_SCAN_BYTES", chunk)
    data, meta, kcat = tmp_path / "d.json", tmp_path / "m.json", tmp_path / "k.json"
    data.write_text(_dt() + "\n" + _dt() + "\n")
    meta.write_text(_dt() + "\n" + json_metadata(ORDERS) + "\n")
    kcat.write_text(kcat_lines([_dt()], topic="t"))
    assert [qlik.may_hold_metadata(str(f)) for f in (data, meta, kcat)] == ["", "1", "1"]


def test_pretty_printed_messages_read_as_their_lines_would(spark, tmp_path):
    """Messages pretty-printed and concatenated (staged one per line, each wrapped) decode to the
    events of the same messages one per line; a bad one is found again at its first line."""
    docs = [json.loads(x) for x in (json_metadata(ORDERS), _dt(), _dt(changeMask="0X"),
                                    _dt(operation="UPDATE", before=dict(ROW, STATUS="old"), columnMask="03", changeMask="02"))]
    pretty, flat = tmp_path / "pretty.json", tmp_path / "flat.json"
    pretty.write_text("".join(json.dumps(d, indent=2) + "\n" for d in docs), encoding="utf-8")
    flat.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")

    def events(path):
        with job_conf(spark):
            df = get_decoder("qlik-json").read(spark, [str(path)], staging=str(tmp_path / f"s-{path.stem}"))
            rows = df.select(*[F.to_json(c).alias(c) if c in ("before", "after", "source", "keys") else F.col(c)
                               for c in df.columns]).orderBy("_row").collect()
        return [r.asDict() for r in rows]

    got, want = events(pretty), events(flat)
    origin = ("_file", "_block", "_row")
    assert [{k: v for k, v in r.items() if k not in origin} for r in got] == \
           [{k: v for k, v in r.items() if k not in origin} for r in want]
    assert [r["op"] for r in got] == [None, "I", None, "U"]
    assert "is not hexadecimal" in got[2]["_error"]
    first_line = 1 + sum(json.dumps(d, indent=2).count("\n") + 1 for d in docs[:2])
    assert locate(got[2]["_file"], got[2]["_block"], {got[2]["_row"] - got[0]["_row"]}) == \
        {got[2]["_row"] - got[0]["_row"]: (first_line, json.dumps(docs[2], indent=2).replace("\n", " "))}
