"""The one projection into the canonical event (:func:`lakecdc.decode.event.project`), the op table
(:class:`lakecdc.decode.spec.OpTable`) and the standard reasons (:mod:`lakecdc.decode.checks`)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import EVENT_COLUMNS, default_seq
from lakecdc.decode import checks
from lakecdc.decode.event import Parts, empty_events, event_schema, project, source_map
from lakecdc.decode.spec import Images, Names, OpTable, Option, Ordering, VendorSpec, parse_options
from lakecdc.errors import ConfigError

OPS = OpTable({"INSERT": "I", "UPDATE": "U", "DELETE": "D", "TRUNCATE": "T", "READ": "R"},
              skipped={"HEARTBEAT": "heartbeat", "DDL": "ddl"},
              refused={"UPDATE BEFORE": "op '%s' is half an update"}, normal="upper-trim")
SPEC = VendorSpec(name="test-format", ops=OPS, names=Names(table="tbl", op="kind", op_ts="ts"))
TS = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
IMAGE = T.MapType(T.StringType(), T.StringType())
PARSED = T.StructType([
    T.StructField("name", T.StringType()),
    T.StructField("text", T.StringType()),
    T.StructField("ts", T.TimestampType()),
    T.StructField("pos", T.StringType()),
    T.StructField("i", T.IntegerType()),
    T.StructField("b", IMAGE),
    T.StructField("a", IMAGE),
    T.StructField("src", IMAGE),
    T.StructField("reason", T.StringType()),
    T.StructField("ord", T.BooleanType()),
    T.StructField("raw", T.StringType()),
    T.StructField("_file", T.StringType()),
    T.StructField("_block", T.LongType()),
    T.StructField("_row", T.LongType()),
    T.StructField("_offset", T.LongType()),
])
BEFORE, AFTER = {"id": "1", "v": "old"}, {"id": "1", "v": "new"}


def record(row: int, text: str | None, *, table: str | None = "db.t", reason: str | None = None, idx: int | None = None,
           src: dict | None = None, ordered: bool = False, pos: str | None = "7") -> tuple:
    return ("db.t" if table else None, text, TS, pos, idx, BEFORE, AFTER, src or {"x": "1"}, reason, ordered,
            f"raw{row}", "f.json", 0, row, 100 + row)


def parts(df, *, seq=None, idx=True) -> Parts:
    """Parts of the test records: op and skipped kind from :data:`OPS`, ``reason`` as a check."""
    op, skipped, refusal = OPS.sql(F.col("text"))
    return Parts(
        table=F.col("name"), op=op, op_ts=F.col("ts"), pos=F.col("pos"), idx=F.col("i") if idx else None,
        seq=seq, txid=F.lit("tx"), keys=F.array(F.lit("id")), before=F.col("b"), after=F.col("a"),
        source=F.col("src"), skipped=skipped, ordered=F.col("ord"), raw=F.col("raw"),
        checks=[checks.refused(refusal), (F.col("reason").isNotNull(), F.col("reason"))],
    )


def run(spark, records, spec=SPEC, **kw) -> list:
    df = spark.createDataFrame(records, PARSED)
    return project(df, parts(df, **kw), spec).orderBy("_row").collect()


@pytest.mark.spark
def test_images_kept_only_for_the_ops_the_spec_names(spark):
    """Inserts and reads keep only the after image, deletes only the before image, updates both,
    truncates none (the images the vendor gave are dropped for the other ops)."""
    rows = run(spark, [record(n, t) for n, t in enumerate(("INSERT", "UPDATE", "DELETE", "TRUNCATE", "READ"))])
    assert [(r.op, r.before, r.after) for r in rows] == [
        ("I", None, AFTER), ("U", BEFORE, AFTER), ("D", BEFORE, None), ("T", None, None), ("R", None, AFTER)]


@pytest.mark.spark
def test_images_of_a_narrower_spec_and_single_images(spark):
    """A spec whose images name other ops keeps those; a single-image spec takes the one image
    (``Parts.after``) as a delete's before image."""
    narrow = VendorSpec(name="n", ops=OPS, images=Images(before=frozenset({"D"}), after=frozenset({"I"})))
    rows = run(spark, [record(0, "UPDATE"), record(1, "DELETE"), record(2, "INSERT")], spec=narrow)
    assert [(r.before, r.after) for r in rows] == [(None, None), (BEFORE, None), (None, AFTER)]
    single = VendorSpec(name="s", ops=OPS, images=Images(before=frozenset({"D"}), after=frozenset({"I", "U"}), single=True))
    rows = run(spark, [record(0, "UPDATE"), record(1, "DELETE")], spec=single)
    assert [(r.before, r.after) for r in rows] == [(None, AFTER), (AFTER, None)]


@pytest.mark.spark
def test_a_bad_record_loses_op_and_images_but_keeps_where_it_is(spark):
    """A record with a failing check: ``op`` and both images NULL, ``_error`` the reason; table,
    op_ts, pos, and (its op being known) idx and seq stay, so the quarantine can place it."""
    bad, = run(spark, [record(0, "UPDATE", reason="broken", idx=3)])
    assert (bad.op, bad.before, bad.after, bad._error) == (None, None, None, "broken")
    ts = spark.createDataFrame([(TS,)], "t timestamp").first().t  # (as this session gives it back)
    assert (bad.table, bad.op_ts, bad.pos, bad.idx, bad.txid) == ("db.t", ts, "7", 3, "tx")
    assert bad.seq is not None


@pytest.mark.spark
def test_checks_first_failing_reason_wins(spark):
    """The reasons are told in the order of ``Parts.checks``: a refused op text's reason comes
    before the vendor's own check, and a good record has no ``_error``."""
    refused, good = run(spark, [record(0, "update before", reason="later"), record(1, "INSERT")])
    assert refused._error == "op 'update before' is half an update"
    assert good._error is None and good.op == "I"


@pytest.mark.spark
def test_skipped_records_carry_their_kind_and_no_order(spark):
    """A skipped record: ``source['skipped']`` its kind, no op, idx or seq; a vendor entry named
    ``skipped`` never survives (replaced on a skipped record, removed on an event), the rest of
    the source is kept."""
    rows = run(spark, [record(0, "heartbeat", src={"skipped": "vendor", "x": "1"}),
                       record(1, "INSERT", src={"skipped": "vendor", "x": "2"}),
                       record(2, "DDL")])
    beat, event, ddl = rows
    assert (beat.op, beat.idx, beat.seq, beat.source) == (None, None, None, {"skipped": "heartbeat", "x": "1"})
    assert event.source == {"x": "2"}
    assert ddl.source == {"x": "1", "skipped": "ddl"}


@pytest.mark.spark
def test_ordered_skipped_records_get_idx_and_seq(spark):
    """A skipped record marked ``ordered`` gets ``idx`` 0 and a ``seq`` like an event's."""
    ordered, plain = run(spark, [record(0, "DDL", ordered=True), record(1, "DDL")])
    assert ordered.idx == 0 and ordered.seq is not None
    assert plain.idx is None and plain.seq is None


@pytest.mark.spark
def test_seq_follows_the_spec_ordering(spark):
    """``default`` is :func:`default_seq` of (op_ts, pos, idx) with idx 0 when the vendor gives
    none; ``pos-idx`` is ``<pos>|<idx>`` (pos padded when a width is given); ``given`` is the
    vendor's seq."""
    spec_default = SPEC
    r, = run(spark, [record(0, "INSERT")], spec=spec_default, idx=False)
    expected = spark.range(1).select(default_seq(F.lit(TS), F.lit("7"), F.lit(0)).alias("s")).first().s
    assert (r.idx, r.seq) == (0, expected)
    padded = VendorSpec(name="p", ops=OPS, ordering=Ordering("pos-idx", pos_width=5, idx_width=3))
    r, = run(spark, [record(0, "INSERT", idx=4)], spec=padded)
    assert r.seq == "00007|004"
    plain = VendorSpec(name="p", ops=OPS, ordering=Ordering("pos-idx"))
    r, = run(spark, [record(0, "INSERT", idx=4)], spec=plain)
    assert r.seq == "7|000004"
    given = VendorSpec(name="g", ops=OPS, ordering=Ordering("given"))
    r, = run(spark, [record(0, "INSERT")], spec=given, seq=F.lit("mine"))
    assert r.seq == "mine"


@pytest.mark.spark
def test_output_columns_and_binary_raw_only_when_bad(spark):
    """The output is exactly :func:`event_schema`: the event columns, origin and ``_error``; a
    binary spec adds ``_offset`` and ``_raw``, the raw bytes kept only on a bad record."""
    df = spark.createDataFrame([record(0, "INSERT")], PARSED)
    out = project(df, parts(df), SPEC)
    assert out.schema.simpleString() == event_schema(binary=False).simpleString()  # (names and types)
    assert tuple(out.columns[: len(EVENT_COLUMNS)]) == EVENT_COLUMNS
    binary = VendorSpec(name="b", ops=OPS, binary=True)
    good, bad = run(spark, [record(0, "INSERT"), record(1, "INSERT", reason="no")], spec=binary)
    assert (good._offset, good._raw, bad._offset, bad._raw) == (100, None, 101, "raw1")
    assert empty_events(spark, binary=True).columns == [*EVENT_COLUMNS, "_file", "_block", "_row", "_error", "_offset", "_raw"]
    assert empty_events(spark, binary=False).count() == 0


@pytest.mark.spark
def test_source_map_leaves_null_values_out(spark):
    """:func:`source_map` keeps the pairs with a value, and gives an empty map when none has one."""
    r = spark.range(1).select(
        source_map(("a", F.lit("1")), ("b", F.lit(None).cast("string")), ("c", F.lit(3))).alias("m"),
        source_map(("a", F.lit(None).cast("string"))).alias("none"),
    ).first()
    assert r.m == {"a": "1", "c": "3"}
    assert r.none == {}


# -- the op table --------------------------------------------------------------------------------------


def test_op_table_lookup():
    """A text as written or in its normal form finds its op; skipped texts give their kind,
    refused ones their reason quoting the text as written, unknown texts nothing."""
    assert OPS.lookup("INSERT") == ("I", None, None)
    assert OPS.lookup("  delete ") == ("D", None, None)
    assert OPS.lookup("Heartbeat") == (None, "heartbeat", None)
    assert OPS.lookup("update before") == (None, None, "op 'update before' is half an update")
    assert OPS.lookup("MERGE") == (None, None, None)
    assert OPS.lookup(None) == (None, None, None)
    assert OPS.expected == "one of INSERT, UPDATE, DELETE, TRUNCATE, READ"
    underscore = OpTable({"drop column": "D"}, normal="lower-trim-underscore")
    assert underscore.lookup(" DROP_COLUMN") == ("D", None, None)


def test_op_table_refuses_a_wrong_table():
    """A text listed twice, a text not in its normal form, or an op that is not canonical is a
    mistake in the vendor module, told at import."""
    with pytest.raises(ValueError, match="more than once"):
        OpTable({"A": "I"}, skipped={"A": "x"})
    with pytest.raises(ValueError, match="upper-trim form"):
        OpTable({"insert": "I"}, normal="upper-trim")
    with pytest.raises(ValueError, match="not canonical"):
        OpTable({"A": "X"})  # type: ignore[dict-item]


@pytest.mark.spark
def test_op_table_sql_agrees_with_lookup(spark):
    """The SQL evaluator gives for every text what the Python one gives."""
    texts = ["INSERT", " update ", "truncate", "HEARTBEAT", "ddl", "UPDATE BEFORE", "update before", "nope", None, ""]
    df = spark.createDataFrame([(t,) for t in texts], "text string")
    op, skipped, reason = OPS.sql(F.col("text"))
    got = [(r.op, r.skipped, r.reason) for r in df.select(op.alias("op"), skipped.alias("skipped"),
                                                          reason.alias("reason")).collect()]
    assert got == [OPS.lookup(t) for t in texts]


# -- the standard reasons ------------------------------------------------------------------------------


@pytest.mark.spark
def test_standard_reasons_are_worded_once(spark):
    """Each builder's reason names the vendor's member as :class:`Names` gives it and quotes the
    offending text; ``where`` limits a check to the records it holds for."""
    names = SPEC.names
    row = spark.createDataFrame([("MERGE", "yesterday")], "text string, ts string")
    built = [
        checks.bad_json(F.lit("{"), "'a' an object"),
        checks.missing(F.lit(None).cast("string"), names.table),
        checks.op_missing(F.lit(None).cast("string"), names.op),
        checks.unknown_op(F.col("text"), F.lit(False), OPS, names.op),
        checks.bad_time(F.lit(None).cast("timestamp"), F.col("ts"), names.op_ts),
        checks.image_missing(F.lit(True), "data", names.op, F.col("text"), "the row"),
    ]
    reasons = row.select(*[F.when(bad, F.lit(r) if isinstance(r, str) else r).alias(f"c{n}")
                           for n, (bad, r) in enumerate(built)]).first()
    assert list(reasons) == [
        "not valid JSON, or a member of the wrong type (expected 'a' an object)",
        "'tbl' missing or empty",
        "'kind' missing",
        "unknown kind 'MERGE' (expected one of INSERT, UPDATE, DELETE, TRUNCATE, READ)",
        "'ts' missing or not a timestamp: 'yesterday'",
        "'data' missing for kind 'MERGE' (expected the row)",
    ]
    assert checks.unknown_op_text("MERGE", OPS, names.op) == reasons[3]
    limited = checks.missing(F.lit(None).cast("string"), names.table, where=F.lit(False))
    assert row.select(checks.first_error(limited).alias("e")).first().e is None


def test_options_are_parsed_from_the_spec():
    """Defaults fill what is not given, CDATA wrappers go, and an unknown option, a flag that is
    no boolean or a value outside a choice is a :class:`ConfigError` naming the format."""
    spec = VendorSpec(name="f", ops=OPS, options=(Option("mode", "a", "choice", ("a", "b")), Option("strict", "false", "flag")),
                      ignored=frozenset({"old"}))
    assert spec.parse_options({"mode": "CDATA[b]", "old": "x"}) == {"mode": "b", "strict": "false", "old": "x"}
    with pytest.raises(ConfigError, match="f: unknown option"):
        spec.parse_options({"nope": "1"})
    with pytest.raises(ConfigError, match="strict='maybe' is not true/false"):
        spec.parse_options({"strict": "maybe"})
    with pytest.raises(ConfigError, match="f: mode='c' is not one of a, b"):
        parse_options("f", {"mode": "a"}, frozenset(), {"mode": "c"}, spec.options)


@pytest.mark.spark
def test_skipped_records_keep_their_after_image_only_when_the_spec_says(spark):
    """``Images(skipped_after=True)``: a skipped record keeps the after image the vendor gave it
    (a schema change naming columns); by default it has none; a row event is unaffected."""
    keeps = VendorSpec(name="k", ops=OPS, images=Images(skipped_after=True))
    ddl, insert = run(spark, [record(0, "DDL"), record(1, "INSERT")], spec=keeps)
    assert (ddl.op, ddl.after, insert.after) == (None, AFTER, AFTER)
    ddl, = run(spark, [record(0, "DDL")])
    assert ddl.after is None
