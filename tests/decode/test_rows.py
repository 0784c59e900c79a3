"""The Python-row readers' rows (:mod:`lakecdc.decode.rows`) through the one projection:
:func:`~lakecdc.decode.rows.rows_parts` and the row constructors."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from lakecdc.changes.events import default_seq
from lakecdc.decode.event import project
from lakecdc.decode.rows import ROW_SCHEMA, Row, failed, rows_parts, skipped
from lakecdc.decode.spec import OpTable, Ordering, VendorSpec

SPEC = VendorSpec(name="rows-test", ops=OpTable({"c": "I"}), ordering=Ordering("given"))
MAPS = ("before", "after", "source")
TS = 1_714_564_800_000_000  # 2024-05-01 12:00 UTC, in microseconds


def events(spark, rows: list[Row]) -> list:
    records = [("f.json", 0, n, *(dict(v) if isinstance(v, list) and f in MAPS else v for f, v in zip(Row._fields, r)))
               for n, r in enumerate(rows)]
    df = spark.createDataFrame(records, ROW_SCHEMA)
    return project(df, rows_parts(df), SPEC).orderBy("_row").collect()


def test_constructors_fill_only_what_they_are_given():
    """``skipped`` puts its kind first in ``source`` (then ``extra``), ``failed`` only the reason
    and table; every other part is None."""
    assert skipped("tombstone", table="db.t", extra=[("key", "1")]) == Row(
        table="db.t", source=[("skipped", "tombstone"), ("key", "1")])
    assert failed("broken", table="db.t") == Row(table="db.t", error="broken")


@pytest.mark.spark
def test_rows_become_events_seq_given_or_default(spark):
    """A row with its own ``seq`` keeps it; one without gets ``default_seq(op_ts, pos, 0)``; both
    have idx 0, their op, images and source as the row gave them."""
    given = Row(table="db.t", op="I", op_ts=TS, pos="p1", seq="0001|2", keys=["id"],
                after=[("id", "1")], source=[("source.x", "1")])
    default = given._replace(op="U", seq=None, before=[("id", "1")])
    first, second = events(spark, [given, default])
    assert (first.op, first.seq, first.idx, first.after, first.source) == ("I", "0001|2", 0, {"id": "1"}, {"source.x": "1"})
    assert first.keys == ["id"] and first.table == "db.t" and first._error is None
    expected = spark.range(1).select(default_seq(F.timestamp_micros(F.lit(TS)), F.lit("p1"), F.lit(0)).alias("s")).first().s
    assert (second.op, second.seq, second.before, second.after) == ("U", expected, {"id": "1"}, {"id": "1"})


@pytest.mark.spark
def test_skipped_and_failed_rows(spark):
    """A skipped row: no op, its kind in ``source['skipped']``, no seq unless it names keys with a
    time (then ordered, as a schema change naming the key); a failed row: ``_error`` its reason,
    no op, its table kept."""
    beat, ddl, bad = events(spark, [
        skipped("heartbeat", extra=[("kafka.offset", "7")]),
        skipped("schema change", table="db.t")._replace(keys=["id"], op_ts=TS, pos=""),
        failed("'op' missing", table="db.t"),
    ])
    assert (beat.op, beat.seq, beat.table, beat.source) == (None, None, None, {"skipped": "heartbeat", "kafka.offset": "7"})
    assert (ddl.op, ddl.source["skipped"], ddl.keys) == (None, "schema change", ["id"]) and ddl.seq is not None
    assert (bad.op, bad.table, bad._error, bad.seq) == (None, "db.t", "'op' missing", None)
