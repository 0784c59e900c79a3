"""``debezium-json`` files of bare envelopes are decoded by Spark (:mod:`lakecdc.decode.debezium.sql`);
every line it does not read itself goes to the Python reader. Both routes must give the same rows
as ``reader=python`` (the Python reader for the whole file), whatever the lines hold."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from lakecdc.decode import get_decoder
from lakecdc.decode.debezium.sql import Shape, shape_of, spark_file
from lakecdc.decode.files.lines import exact_json_strings
from lakecdc.errors import ConfigError


def _source(connector: str, **extra: Any) -> dict[str, Any]:
    base = {"version": "2.7.0.Final", "connector": connector, "name": "srv", "ts_ms": 1_700_000_000_000,
            "snapshot": "false", "db": "shop", "table": "T"}
    return {**base, **extra}


def _env(op: str, source: dict[str, Any], before: Any = None, after: Any = None, **extra: Any) -> dict[str, Any]:
    return {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1_700_000_000_500, **extra}


ORACLE = _source("oracle", schema="APP", scn="2122185", commit_scn="2122190", ssn=3, redo_thread=1, txId="0a.1.2")
MYSQL = _source("mysql", file="mysql-bin.000012", pos=4711, row=2)
PG = _source("postgresql", schema="public", lsn=33227720, txId=7)
DB2 = _source("db2", schema="DB2INST1", commit_lsn="00000000:00000d98:0000000000000001", change_lsn="00000025:00000d98:00a2",
              event_serial_no=1)
SQLSERVER = _source("sqlserver", schema="dbo", commit_lsn="00000025:00000d98:00a2", change_lsn=None)

LINES: list[str] = [
    json.dumps(_env("c", ORACLE, after={"ID": 1, "PRICE": 17520.00, "NOTE": "a", "ON": True, "N": None})),
    '{"before":null,"after":{"ID":2,"PRICE":1.50},"source":' + json.dumps(MYSQL) + ',"op":"r","ts_ms":1}',
    json.dumps(_env("u", PG, before={"ID": 1}, after={"ID": 1, "NOTE": "__debezium_unavailable_value"})),  # placeholder
    json.dumps(_env("u", DB2, before={"ID": 3, "V": "x"}, after={"ID": 3, "V": "y"},
                    transaction={"id": "tx9", "total_order": 1, "data_collection_order": 1})),
    json.dumps(_env("d", SQLSERVER, before={"ID": 4})),
    json.dumps(_env("t", _source("postgresql", schema="public", lsn=5))),
    "null",                                                                       # tombstone
    json.dumps({"status": "BEGIN", "id": "tx9", "ts_ms": 1, "event_count": None, "data_collections": None}),
    json.dumps({"ts_ms": 1_700_000_000_000}),                                     # heartbeat
    json.dumps(_env("m", MYSQL)),                                                 # a logical message
    json.dumps(_env("x", MYSQL, after={"ID": 9})),                                # unknown op
    json.dumps(_env("c", MYSQL)),                                                 # no after image
    json.dumps(_env("c", {"connector": "mysql"}, after={"ID": 10})),              # no table
    json.dumps(_env("c", _source("mongodb", collection="T"), after=json.dumps({"_id": 1, "v": 2}))),
    json.dumps(_env("c", _source("oracle", schema="APP", commit_scn="10:1:ab,12:2:cd", redo_thread=2), after={"ID": 11})),
    '{"before": null, "after": {"ID": 12}',                                       # not JSON
    json.dumps(_env("c", MYSQL, after={"ID": 13, "TAGS": ["a", "b"], "DOC": {"k": 1}})),
    json.dumps(_env("c", _source("", schema="S", table="T", lsn=9), after={"ID": 14})),
    json.dumps(_env("c", {**MYSQL, "ts_ms": None, "ts_ns": 1_700_000_000_123_456_789}, after={"ID": 15})),
    json.dumps(_env("c", {**ORACLE, "snapshot": "last"}, after={"ID": 16})),
    "",
    json.dumps(_env("c", {**MYSQL, "file": "binlog", "row": None}, after={"ID": 17, "V": "\u00e9 \\ \""})),
    # digits other than ASCII's are text in a position, as SQL reads them
    json.dumps(_env("c", {**ORACLE, "scn": "\u0661\u0662", "commit_scn": "\u00b2"}, after={"ID": 18})),
    json.dumps(_env("c", {**MYSQL, "file": "binlog.\u0663", "pos": "\u0664"}, after={"ID": 19})),
    # a lone surrogate escape (Spark's parser writes "?", the Python reader fails the record) in a
    # value, the source block (a value, a name), the transaction block's names and the envelope's
    # time; a "?" of its own; a surrogate pair
    json.dumps(_env("c", MYSQL, after={"ID": 20, "V": "b\ud800c"})),
    json.dumps(_env("c", {**MYSQL, "file": "bin\udbff"}, after={"ID": 21})),
    json.dumps(_env("c", {**MYSQL, "x\udc00": 1}, after={"ID": 22})),
    json.dumps(_env("c", MYSQL, after={"ID": 23}, transaction={"id": "t1", "\ud800": 1})),
    json.dumps(_env("c", MYSQL, after={"ID": 24}, ts_ms="1\ud800")),
    json.dumps(_env("c", MYSQL, after={"ID": 25, "V": "why?", "W?": "x"})),
    json.dumps(_env("c", MYSQL, after={"ID": 26, "V": "\U0001F600"})),
]


def _normalised(df) -> list[dict[str, Any]]:
    cols = [F.to_json(F.map_entries(c)).alias(c) if c in ("before", "after", "source") else F.col(c) for c in df.columns]
    return sorted((r.asDict() for r in df.select(*cols).collect()), key=lambda r: (r["_file"], r["_row"]))


def _read(spark, path: Path, **options: str) -> list[dict[str, Any]]:
    with exact_json_strings(spark):
        return _normalised(get_decoder("debezium-json", options).read(spark, [str(path)], staging=str(path.parent / "stg")))


@pytest.mark.spark
@pytest.mark.parametrize("options", [{}, {"sequenceBy": "op_ts"}, {"sequenceBy": "source.pos,ts_ms"},
                                     {"tableName": "db.table"}])
@pytest.mark.parametrize("first", [ORACLE, MYSQL, PG, DB2, SQLSERVER], ids=lambda s: s["connector"])
def test_every_kind_of_line_decodes_as_the_python_reader_decodes_it(spark, tmp_path, options, first):
    """The first line's connector is the one SQL is built for; the other connectors' lines go to
    the Python reader."""
    lines = [json.dumps(_env("c", first, after={"ID": 100})), *LINES]
    path = tmp_path / "topic.json"
    path.write_text("\n".join(lines) + "\n")
    assert spark_file(lines[0])
    by_spark, by_python = _read(spark, path, reader="spark", **options), _read(spark, path, reader="python", **options)
    assert len(by_spark) == len([x for x in lines if x.strip()])
    assert by_spark == by_python


def test_the_shape_of_files_names_their_connectors_when_sql_reads_them_all():
    oracle, mysql = shape_of([ORACLE]), shape_of([MYSQL, {"file": "b.1", "pos": 4}, {**MYSQL, "connector": "MySQL"}])
    assert oracle == Shape(tuple(ORACLE), ("oracle",)) and mysql.connectors == ("mysql",)
    assert shape_of([ORACLE, SQLSERVER]).connectors == ("oracle", "sqlserver")
    # a connector SQL does not read, or none named or guessed: every connector's SQL is built
    assert shape_of([ORACLE, _source("mongodb", collection="T")]) == Shape(tuple(ORACLE), ())
    assert shape_of([ORACLE, None]).connectors == () and shape_of([]) == Shape()


@pytest.mark.spark
def test_lines_read_again_from_a_later_split_are_the_right_ones(spark, tmp_path):
    """A file of several splits: the lines Spark keeps no text of are read again from the file
    by their index within their split."""
    envelope = json.dumps(_env("c", MYSQL, after={"ID": 1, "PAD": "x" * 400}))
    lines = []
    for i in range(6000):
        lines.append(envelope if i % 97 else json.dumps({"status": "END", "id": f"tx{i}", "ts_ms": i, "event_count": 1,
                                                         "data_collections": []}))
    path = tmp_path / "big.json"
    path.write_text("\n".join(lines) + "\n")
    small = {"spark.sql.files.maxPartitionBytes": str(256 * 1024)}
    old = {k: spark.conf.get(k) for k in small}
    try:
        for k, v in small.items():
            spark.conf.set(k, v)
        by_spark, by_python = _read(spark, path, reader="spark"), _read(spark, path, reader="python")
    finally:
        for k, v in old.items():
            spark.conf.set(k, v)
    assert len({r["_block"] for r in by_spark}) > 3
    assert by_spark == by_python
    markers = [r for r in by_spark if r["op"] is None]
    assert len(markers) == len(range(0, 6000, 97)) and all('"tx.status","value":"END"' in r["source"] for r in markers)


def test_which_files_spark_reads_and_the_reader_option():
    assert spark_file(json.dumps(_env("c", MYSQL, after={"ID": 1})))
    assert not spark_file(json.dumps({"schema": {}, "payload": _env("c", MYSQL, after={"ID": 1})}))
    assert not spark_file(json.dumps({"topic": "t", "partition": 0, "offset": 1, "payload": "{}"}))
    assert not spark_file(json.dumps({"ID": 1}))  # a key first: key and value lines alternate
    assert not spark_file("null") and not spark_file(None) and not spark_file("{not json")
    with pytest.raises(ConfigError, match="reader"):
        get_decoder("debezium-json", {"reader": "jvm"})


@pytest.mark.spark
def test_bad_lines_are_quarantined_with_file_line_and_reason_and_the_rest_applies(spark, tmp_path):
    from deltalake import DeltaTable

    import lakecdc
    from lakecdc.lake.state import quarantine_path

    def run(reader: str) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
        landing, target = tmp_path / reader / "landing", tmp_path / reader / "lake"
        landing.mkdir(parents=True)
        good = [_env("c", MYSQL, after={"ID": i, "V": str(i)}) for i in (1, 2)]
        lines = [json.dumps(good[0]), '{"before": null, "after": {"ID": 3}', json.dumps(_env("x", MYSQL, after={"ID": 4})),
                 json.dumps(_env("c", MYSQL)), json.dumps(good[1])]
        (landing / "t.json").write_text("\n".join(lines) + "\n")
        s = lakecdc.apply(landing, target, format="debezium-json", options={"reader": reader}, keys={"shop.T": ["ID"]},
                          spark=spark)
        got = sorted(DeltaTable(s.table("shop.T").target).to_pyarrow_table().to_pylist(), key=lambda r: r["ID"])
        q = DeltaTable(quarantine_path(str(target))).to_pyarrow_table().to_pylist()
        return got, sorted((r["line"], r["reason"]) for r in q)

    by_spark, by_python = run("spark"), run("python")
    assert [r["ID"] for r in by_spark[0]] == [1, 2]
    assert [line for line, _ in by_spark[1]] == [2, 3, 4]
    assert "unknown op 'x'" in by_spark[1][1][1] and "'after' missing" in by_spark[1][2][1]
    assert by_spark == by_python


@pytest.mark.spark
def test_small_files_sharing_a_partition_and_blocks_in_other_layouts(spark, tmp_path):
    """Small files are packed several to a partition (the UDF must tell their splits apart to find
    a line again), and a source block whose members differ from the first file's (another
    connector, the same members in another order) is looked up by name: both as the Python reader."""
    reordered = {k: ORACLE[k] for k in reversed(ORACLE)}
    paths = []
    for n, source in enumerate([ORACLE, MYSQL, reordered, PG]):
        lines = [json.dumps(_env("c", source, after={"ID": n * 100 + i})) if i % 3 != 1 else LINES[7] for i in range(10)]
        path = tmp_path / f"part-{n}.json"
        path.write_text("\n".join(lines) + "\n")
        paths.append(str(path))

    def read(**options: str):
        with exact_json_strings(spark):
            df = get_decoder("debezium-json", options).read(spark, paths, staging=str(tmp_path / "stg"))
            return df.rdd.getNumPartitions(), _normalised(df)

    packed = {"spark.sql.files.minPartitionNum": "1"}  # (else each small file gets a core)
    old = {k: spark.conf.get(k, None) for k in packed}
    try:
        for k, v in packed.items():
            spark.conf.set(k, v)
        (partitions, by_spark), (_, by_python) = read(reader="spark"), read(reader="python")
    finally:
        for k, v in old.items():
            spark.conf.unset(k) if v is None else spark.conf.set(k, v)
    assert all(spark_file(Path(p).read_text().splitlines()[0]) for p in paths) and partitions < len(paths)
    assert by_spark == by_python
    assert sum(r["op"] == "I" for r in by_spark) == 4 * 7 and sum(r["op"] is None for r in by_spark) == 4 * 3
    assert {r["table"] for r in by_spark if r["op"]} == {"APP.T", "shop.T", "public.T"}


@pytest.mark.spark
def test_positions_are_sortable_as_the_python_reader_writes_them(spark):
    """LSNs of any number of parts, upper or lower case, digits and other text (no lambda in SQL)."""
    from lakecdc.decode.debezium.rules import sortable
    from lakecdc.decode.debezium.rules import sql_sortable as _sortable

    texts = ["00000025:00000d98:00a2", "25:D98:A2", "1:2", "0:1:2:3", "ABCDEF0123456789ABCD:1:2", "4711", "", None,
             "mysql-bin.000012", "12345678901234567890123"]
    df = spark.createDataFrame([(t,) for t in texts], "t string")
    assert [r[0] for r in df.select(_sortable(F.col("t"))).collect()] == [sortable(t) for t in texts]


@pytest.mark.spark
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.one_of(st.none(), st.text(alphabet="0123456789+- a\u0661", max_size=22),
                                st.integers(min_value=-(2**64), max_value=2**64).map(str)), min_size=1, max_size=30),
       most=st.sampled_from([None, 1, 9, 20]))
def test_digit_texts_are_told_without_a_regular_expression_as_with_one(spark, texts, most):
    """Spark's own rendering of a long decides the common case; every other text is matched."""
    from lakecdc.changes.events import digits

    df = spark.createDataFrame([(t,) for t in texts], "t string")
    got = [r[0] for r in df.select(digits(F.col("t"), most)).collect()]
    pattern = "[0-9]+" if most is None else f"[0-9]{{1,{most}}}"
    assert got == [None if t is None else re.fullmatch(pattern, t) is not None for t in texts]
