"""SharePlex JSON (``shareplex-json``): seed 002's examples, spellings and order, bad records, an oracle round trip."""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lakecdc
from lakecdc.decode import get_decoder
from lakecdc.errors import ConfigError

try:
    from tests.canal_render import key_changes, message_runs, run_rendered_scenario
    from tests.helpers import rows
    from tests.shareplex_render import ddl_message, shareplex_messages
    from tests.test_property import scenarios
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from canal_render import key_changes, message_runs, run_rendered_scenario  # type: ignore[no-redef]
    from helpers import rows  # type: ignore[no-redef]
    from shareplex_render import ddl_message, shareplex_messages  # type: ignore[no-redef]
    from test_property import scenarios  # type: ignore[no-redef]

FIX = Path(__file__).parents[2] / "fixtures" / "shareplex-json"


def decode(spark, paths, **options) -> list:
    df = lakecdc.read_changes([str(p) for p in paths], format="shareplex-json", options=options, spark=spark)
    return df.orderBy("_file", "_row").collect()


def message(op: str, scn: int, seq: int = 1, *, table: str = "S.T", time: str = "2024-01-01T00:00:00",
            data: dict | None = None, key: dict | None = None, trans: str = "1.2.3") -> str:
    body: dict = {"meta": {"time": time, "userid": 84, "op": op, "scn": str(scn), "trans": trans, "seq": seq,
                           "size": 9, "table": table, "idx": f"{seq}/9"}}
    if data is not None:
        body["data"] = data
    if key is not None:
        body["key"] = key
    return json.dumps(body)


def test_options_are_checked():
    assert not get_decoder("shareplex-json").keys_from_key  # key is a before image, no key declaration
    assert get_decoder("shareplex-json", {"keysFromKeyObject": "true"}).keys_from_key
    with pytest.raises(ConfigError, match="unknown option.*known: keysFromKeyObject"):
        get_decoder("shareplex-json", {"keys": "ID"})


def test_seed_examples_decode_as_the_seed_says(spark):
    inserted, updated, bad, deleted = decode(spark, [FIX / "seed-examples.json"])
    assert (inserted["table"], inserted["op"], inserted["after"], inserted["before"]) == (
        "CL_BIZ1.MIO_LOG", "I", {"MIO_LOG_ID": "32539737"}, None)
    assert inserted["op_ts"] == datetime(2017, 6, 16, 14, 24, 34) and inserted["txid"] == "7.0.411499"
    assert inserted["pos"] == "00000014589063118712.0000000007.0000000000.0000411499" and inserted["idx"] == 1
    assert inserted["seq"] == inserted["pos"] + "|000001"
    assert inserted["source"] == {
        "time": "2017-06-16T14:24:34", "userid": "84", "op": "ins", "scn": "14589063118712",
        "rowid": "AAATGpAAIAAItcIAAA", "trans": "7.0.411499", "seq": "1", "size": "11", "table": "CL_BIZ1.MIO_LOG",
        "idx": "1/11", "posttime": "2017-06-16T14:33:52"}
    # the update: data holds the changed column only; key the identifying old values, CNTR_NO among
    # them with its old value: a before image, which declares no primary key
    assert updated["op"] == "U" and updated["keys"] is None
    key = {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None,
           "CNTR_NO": "1171201606syui26"}
    assert updated["before"] == key and updated["after"] == {**key, "CNTR_NO": "1171201606"}
    # the delete as printed has no meta.table (nor scn): quarantined, with its line in the file
    assert bad["_error"] == "'meta.table' missing or empty"
    assert (deleted["op"], deleted["after"], deleted["_error"]) == ("D", None, None)
    assert deleted["before"] == {"MIO_LOG_ID": "32539739", "PLNMIO_REC_ID": "31557806", "POL_CODE": None,
                                 "CNTR_TYPE": None, "CG_NO": None}
    named = decode(spark, [FIX / "seed-examples.json"], keysFromKeyObject="true")
    assert named[1]["keys"] == list(key) and named[1]["after"] == updated["after"]


def test_op_spellings_exact_values_and_scn_order(spark, tmp_path):
    f = tmp_path / "a.json"
    f.write_text("\n".join([
        # numbers keep the digits they were written with (json.dumps would write 12.5 and 1000.0)
        message("INSERT", 300, time="2024-01-01T00:00:09", data={"ID": 1, "AMOUNT": "@", "NAME": "a"}).replace('"@"', "12.50"),
        message("upd", 200, 2, time="2024-01-01T00:00:30Z", data={"AMOUNT": "@"}, key={"ID": 1}).replace('"@"', "1e3"),
        message("del", 200, 1, data={"ID": 2, "AMOUNT": None}),
        message("truncate", 100),
        message("drop_column", 400),
    ]) + "\n")
    got = decode(spark, [f])
    assert [r["op"] for r in got] == ["I", "U", "D", "T", None]
    assert got[0]["after"] == {"ID": "1", "AMOUNT": "12.50", "NAME": "a"}
    assert got[1]["after"] == {"ID": "1", "AMOUNT": "1e3"} and got[1]["before"] == {"ID": "1"}
    assert "NAME" not in got[1]["after"]  # unchanged: missing, not NULL
    assert got[2]["before"] == {"ID": "2", "AMOUNT": None}
    assert got[4]["source"]["skipped"] == "ddl" and got[4]["_error"] is None and got[4]["table"] == "S.T"
    assert got[1]["op_ts"] == datetime(2024, 1, 1, 0, 0, 30)
    # ordered by scn, then trans, then seq; time (later for the update) plays no part
    assert [r["op"] for r in sorted(got[:4], key=lambda r: r["seq"])] == ["T", "D", "U", "I"]


def test_a_meta_member_named_skipped_never_marks_a_change_skipped(spark, tmp_path):
    # source['skipped'] marks a skipped record; a writer's own meta member of that name is left out
    def with_skipped(line: str, value: str | None) -> str:
        body = json.loads(line)
        body["meta"]["skipped"] = value
        return json.dumps(body)

    f = tmp_path / "a.json"
    f.write_text("\n".join([
        with_skipped(message("upd", 10, data={"A": "y"}, key={"ID": 1}), "yes"),
        with_skipped(message("drop column", 11), None),
        message("ins", 12, data={"ID": 2}),
    ]) + "\n")
    changed, ddl, plain = decode(spark, [f])
    assert changed["op"] == "U" and changed["_error"] is None and "skipped" not in changed["source"]
    assert changed["source"]["scn"] == "10" and changed["after"] == {"ID": "1", "A": "y"}
    assert ddl["op"] is None and ddl["source"]["skipped"] == "ddl" and ddl["source"]["scn"] == "11"
    assert "skipped" not in plain["source"] and plain["source"]["op"] == "ins"


def writer_message(op: str, scn: int, *, data: dict | None = None, key: dict | None = None, trans: str = "7.0.411499",
                   reverse: bool = False, extra: dict | None = None) -> str:
    """A message whose ``meta`` has DTS's members in DTS's order (read by position), or reversed."""
    meta = {"time": "2024-01-01T00:00:05", "userid": 84, "op": op, "scn": str(scn), "rowid": "AAATGpAAIAAItcIAAA",
            "trans": trans, "seq": 1, "size": 1, "table": "S.T", "idx": "1/1", "posttime": "2024-01-01T00:00:09"}
    meta = dict(reversed(meta.items())) if reverse else meta
    body: dict = {"meta": {**meta, **(extra or {})}}
    if data is not None:
        body["data"] = data
    if key is not None:
        body["key"] = key
    return json.dumps(body)


@pytest.mark.parametrize("policy", ["EXCEPTION", "LAST_WIN"])
def test_either_map_key_policy_and_any_meta_order_decode_alike(spark, tmp_path, policy):
    """Maps built with a key twice fail (Spark's default) or keep the last value (lakecdc's jobs):
    an update's after image is built either way (a lambda, or map_concat alone). meta's members in
    DTS's order are read by position, in any other order (or with others) by name: same events."""
    from lakecdc.decode.alibaba.shareplex import META_ORDER
    from lakecdc.decode.files.lines import exact_json_strings
    from lakecdc.spark.conf import MAP_KEY_DEDUP, job_conf

    def lines(reverse: bool) -> list[str]:
        return [
            writer_message("ins", 10, data={"ID": 1, "C": "a", "K2": "k"}, reverse=reverse),
            # a key update: ID in data and in key, K2 only in key (kept), C changed
            writer_message("upd", 11, data={"ID": 5, "C": "b"}, key={"ID": 1, "K2": "k"}, reverse=reverse),
            writer_message("upd", 12, data={"C": "c"}, key={"ID": 5, "K2": "k"}, reverse=reverse),
            writer_message("upd", 13, data={"C": "d"}, reverse=reverse),  # no key: after is data
            writer_message("upd", 14, data={"C": "e"}, key={"ID": 5}, trans="1.2", reverse=reverse,
                           extra={"skipped": "x"}),
            # a delete's key adds the columns data lacks
            writer_message("del", 15, data={"ID": 5, "C": "e", "K2": "k"}, key={"ID": 5, "X": "q"},
                           trans="12345678901.0.1", reverse=reverse),
            writer_message("oops", 16, data={"ID": 6}, reverse=reverse),
        ]

    cols = ["table", "op", "op_ts", "pos", "idx", "seq", "txid", "keys", "before", "after", "source", "_error"]
    got = {}
    for reverse in (False, True):
        f = tmp_path / f"{reverse}.json"
        f.write_text("\n".join(lines(reverse)) + "\n")
        with job_conf(spark, {MAP_KEY_DEDUP: policy}), exact_json_strings(spark):
            df = get_decoder("shareplex-json").read(spark, [str(f)], staging=str(tmp_path / "staging"))
            # the lambda only where a key twice would fail
            assert ("map_filter" in df._jdf.queryExecution().optimizedPlan().toString()) == (policy == "EXCEPTION")
            got[reverse] = [{c: r[c] for c in cols} for r in df.orderBy("_row").collect()]
    assert list(json.loads(lines(False)[0])["meta"]) == list(META_ORDER)
    assert got[False] == got[True]
    ins, moved, plain, keyless, odd, deleted, bad = got[False]
    assert moved["op"] == "U" and moved["before"] == {"ID": "1", "K2": "k"}
    assert moved["after"] == {"ID": "5", "C": "b", "K2": "k"} and moved["keys"] is None  # (a before image)
    assert plain["after"] == {"ID": "5", "K2": "k", "C": "c"} and keyless["after"] == {"C": "d"}
    assert keyless["before"] is None and keyless["_error"] is None
    assert "skipped" not in odd["source"] and odd["source"]["scn"] == "14" and odd["_error"] is None
    assert odd["pos"] == "00000000000000000014.0000000001.0000000002" and odd["after"] == {"ID": "5", "C": "e"}
    assert deleted["pos"] == "00000000000000000015.12345678901.0000000000.0000000001"
    assert deleted["before"] == {"ID": "5", "C": "e", "K2": "k", "X": "q"} and deleted["after"] is None
    assert ins["pos"] == "00000000000000000010.0000000007.0000000000.0000411499" and ins["seq"].endswith("|000001")
    assert ins["source"]["rowid"] == "AAATGpAAIAAItcIAAA" and ins["source"]["userid"] == "84"
    assert bad["op"] is None and "unknown meta.op 'oops'" in bad["_error"]


def test_bad_records_are_quarantined_and_the_rest_applies(spark, tmp_path):
    lines = [
        message("ins", 10, data={"ID": 1, "A": "x", "B": 5}),                          # 1 good
        '{"meta": {"op": "ins", "scn": "11"',                                           # 2 not JSON
        json.dumps({"data": {"ID": 9}}),                                                # 3 no meta
        message("merge", 12, data={"ID": 3}),                                           # 4 unknown op
        message("update before", 13, data={"ID": 1}),                                   # 5 split update
        message("ins", 14, table="", data={"ID": 4}),                                   # 6 no table
        message("ins", "abc", data={"ID": 5}),                                          # 7 bad scn
        message("ins", 16, time="yesterday", data={"ID": 6}),                           # 8 bad time
        message("upd", 17, key={"ID": 1}),                                              # 9 no data
        message("upd", 18, data={"A": "y"}, key={"ID": 1}),                             # 10 good: B kept
        message("ins", 19, data={"ID": 7, "A": "z", "B": 6}),                           # 11 good
        message("drop column", 20),                                                     # 12 skipped
    ]
    landing = tmp_path / "landing" / "batch.json"
    landing.parent.mkdir()
    landing.write_text("\n".join(lines) + "\n")
    summary = lakecdc.apply(str(landing.parent), tmp_path / "lake", format="shareplex-json", spark=spark,
                            keys={"S.T": ["ID"]})
    (table,) = summary.tables
    assert (table.source_table, table.events, table.quarantined, table.skipped) == ("S.T", 3, 5, 1)
    assert summary.quarantined_unrouted == 3  # not JSON, no meta, no table
    assert rows(table.target, "ID") == [{"ID": 1, "A": "y", "B": 5}, {"ID": 7, "A": "z", "B": 6}]
    q = DeltaTable(summary.quarantine).to_pyarrow_table().to_pylist()
    assert all(r["file"] == str(landing) for r in q)
    assert sorted((r["line"], r["reason"]) for r in q) == [
        (2, "not valid JSON, or a member of the wrong type (expected 'meta', 'data' and 'key' objects)"),
        (3, "'meta' missing (expected an object)"),
        (4, "unknown meta.op 'merge' (expected one of ins, upd, del, truncate; drop column is skipped)"),
        (5, "meta.op 'update before': an update split into before and after messages cannot be paired "
            "reliably; have SharePlex write whole updates ('upd')"),
        (6, "'meta.table' missing or empty"),
        (7, "'meta.scn' missing or not a number: 'abc' (it orders the changes)"),
        (8, "'meta.time' missing or not a timestamp: 'yesterday'"),
        (9, "'data' missing for meta.op 'upd' (expected the changed columns)"),
    ]
    assert next(r["raw"] for r in q if r["line"] == 4) == lines[3]


# -- an oracle round trip ------------------------------------------------------------------------------------


def run_shareplex(spark, sc, workdir: Path, **kw) -> None:
    messages, message_of = shareplex_messages(sc.events)
    first = sc.specs[0].name
    render = message_runs(messages, message_of, header=lambda _n: [ddl_message(first)])
    run_rendered_scenario(spark, sc, workdir, fmt="shareplex-json", render=render,
                          expect_skipped=lambda _n: {first: 1}, **kw)


def test_transaction_ids_are_padded_part_by_part(spark):
    """Each part of ``meta.trans`` left-padded to 10 characters, longer parts whole, any number of parts."""
    from pyspark.sql import functions as F

    from lakecdc.decode.alibaba.shareplex import transaction_position, with_transaction_position

    ids = ["7.0.411499", "", None, "1..2", "..", ".1", "1.2.", "x", "007", "a.b.c.d.e", "12345678901.007",
           "0000000000012.1", "0000000000.0", "123456789.1234567890.12345678901", "1.2\n", "é.ü€𝄞.1",
           "1.2.3.", ".1.2", "a.b.c.d", "éé.é.ééé"]
    df = spark.createDataFrame([(t,) for t in ids], "t string")
    got = [r[0] for r in df.select(transaction_position(F.col("t"))).collect()]
    assert got == [".".join(p.rjust(10, "0") for p in (t or "").split(".")) for t in ids]
    # the same in projections of its own (the decoder's form)
    staged = [r[0] for r in with_transaction_position(df, "x", F.col("t")).select("x").collect()]
    assert staged == got


def test_renderer_writes_changed_columns_and_keys():
    sc = key_changes()
    messages, _ = shareplex_messages(sc.events)
    moved = json.loads(messages[4].text)
    assert moved["meta"]["op"] == "upd" and moved["key"] == {"ID": 2} and moved["data"] == {"ID": 5, "C1": 20, "C2": None}
    assert json.loads(messages[3].text)["data"] == {"C1": 11, "C2": "a"}  # ID unchanged: only in key
    assert messages[4].events[0].before == {"ID": 2} and messages[4].events[0].idx == 2


def test_key_changes_round_trip(spark, tmp_path):
    run_shareplex(spark, dataclasses.replace(key_changes(), pk_update="update"), tmp_path)


@settings(max_examples=3, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(sc=scenarios(max_events=14, modes=("delete-insert", "abend")))
def test_random_histories_round_trip(spark, tmp_path_factory, sc):
    run_shareplex(spark, sc, tmp_path_factory.mktemp("shareplex"), max_runs=2)


@pytest.mark.spark
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(alphabet="0123456789.xé", max_size=40), min_size=1, max_size=30))
def test_transaction_ids_of_any_shape_are_padded_part_by_part(spark, ids):
    """The three-part fast path and the general path agree with the rule for any text."""
    from pyspark.sql import functions as F

    from lakecdc.decode.alibaba.shareplex import transaction_position, with_transaction_position

    df = spark.createDataFrame([(t,) for t in ids], "t string")
    got = [r[0] for r in df.select(transaction_position(F.col("t"))).collect()]
    assert got == [".".join(p.rjust(10, "0") for p in t.split(".")) for t in ids]
    staged = [r[0] for r in with_transaction_position(df, "x", F.col("t")).select("x").collect()]
    assert staged == got


# -- the DTS document's update example with the table's key given ------------------------------------------

#: the row the DTS document's update example changes, as inserted before it
_MIO_ROW = {"MIO_LOG_ID": "32537893", "PLNMIO_REC_ID": "31557806", "POL_CODE": None, "CNTR_TYPE": None,
            "CNTR_NO": "1171201606syui26", "CG_NO": "G1"}


def _seed_update() -> str:
    """The document's update message (seed 002) as printed, with the meta members it elides."""
    body = json.loads(FIX.joinpath("seed-examples.json").read_text().split("\n}\n")[1] + "\n}")
    assert body["key"]["CNTR_NO"] == "1171201606syui26" and body["data"] == {"CNTR_NO": "1171201606"}
    return json.dumps(body)


@pytest.mark.parametrize(("keys", "pk_update"), [
    (["MIO_LOG_ID"], "delete-insert"),               # CNTR_NO is no key column: an ordinary update
    (["MIO_LOG_ID", "CNTR_NO"], "delete-insert"),    # a key column changed: a primary-key update
    (["MIO_LOG_ID", "CNTR_NO"], "update"),
])
def test_the_dts_documents_update_example_applies_with_keys_given(spark, tmp_path, keys, pk_update):
    """``key`` is the update's before image (five columns, two NULL, the changed CNTR_NO among them),
    not the primary key: with ``--key`` the run applies, as the oracle does; a delete's ``key``
    adds to its ``data``."""
    try:
        from tests.oracle import Event, Oracle
    except ModuleNotFoundError:
        from oracle import Event, Oracle  # type: ignore[no-redef]

    table = "CL_BIZ1.MIO_LOG"
    other = {"MIO_LOG_ID": "1", "PLNMIO_REC_ID": "2", "POL_CODE": None, "CNTR_TYPE": None, "CNTR_NO": "n1",
             "CG_NO": "G2"}
    update = json.loads(_seed_update())
    lines = [message("ins", 14589063110000, table=table, data=_MIO_ROW, trans="7.0.1"),
             message("ins", 14589063110000, 2, table=table, data=other, trans="7.0.1"),
             _seed_update(),
             # a delete whose data leaves out CNTR_NO, which key gives
             message("del", 14589063130000, table=table, data={k: v for k, v in other.items() if k != "CNTR_NO"},
                     key={"MIO_LOG_ID": "1", "CNTR_NO": "n1"})]
    landing = tmp_path / "landing" / "a.json"
    landing.parent.mkdir()
    landing.write_text("\n".join(lines) + "\n")
    summary = lakecdc.apply(str(landing.parent), tmp_path / "lake", format="shareplex-json", spark=spark,
                            keys={table: keys}, pk_update=pk_update)
    assert summary.ok, summary.render()
    (got,) = summary.tables
    assert (got.events, got.quarantined) == (4, 0)

    ks = tuple(keys)
    before = update["key"]
    oracle = Oracle()
    oracle.apply_run([
        Event(table, "I", "0", "1", 1, None, dict(_MIO_ROW), ks),
        Event(table, "I", "0", "1", 2, None, dict(other), ks),
        Event(table, "U", "0", "2", 3, dict(before), {**before, **update["data"]}, ks),
        Event(table, "D", "0", "3", 1, dict(other), None, ks),
    ], pk_update=pk_update)
    want = sorted(oracle.table(table).values(), key=lambda r: r["MIO_LOG_ID"])
    assert [{c: r.get(c) for c in want[0]} for r in rows(got.target, "MIO_LOG_ID")] == want
    assert len(want) == 1 and want[0]["CNTR_NO"] == "1171201606" and want[0]["MIO_LOG_ID"] == "32537893"
    assert want[0]["CG_NO"] == "G1"  # a column neither data nor key names keeps its value
