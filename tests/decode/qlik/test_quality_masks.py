"""Issue 7, change-stream checks: masks consistent with the table version.

A Qlik Replicate message's ``columnMask``/``changeMask`` (hex, kept in ``source``) may only set
bits of ordinals its table version has; the decoder keeps the version's ordinals as
``source['version_mask']``. The check "masks fit the table version (masks)" (severity ``fail``)
fires on a crafted batch whose masks name a column beyond the version's last ordinal or in a gap
of its ordinals, and stays quiet on masks that fit (also longer ones that only add leading zeros)
and on what the decoder makes of real messages.
"""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import types as T

import lakecdc
from lakecdc.changes.events import EVENT_SCHEMA
from lakecdc.check.quality import check_changes

try:
    from tests.qlik_render import json_envelope
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from qlik_render import json_envelope  # type: ignore[no-redef]

pytestmark = pytest.mark.spark

CHECK = "masks fit the table version (masks)"
ORIGIN = T.StructType([*EVENT_SCHEMA.fields, T.StructField("_file", T.StringType()),
                       T.StructField("_block", T.LongType()), T.StructField("_row", T.LongType()),
                       T.StructField("_error", T.StringType())])
COLUMNS = ("ID", "A", "B", "C")


def event(row: int, version: str, column_mask: str | None, change_mask: str | None = None) -> tuple:
    """A Qlik-like update of Q.M (ID plus the columns ``column_mask`` marks among ``COLUMNS``)."""
    bits = int(column_mask, 16) if column_mask else (1 << len(COLUMNS)) - 1
    present = [c for i, c in enumerate(COLUMNS) if bits >> i & 1]
    image = {c: str(row) for c in present}
    source = {"version_mask": version, "present_columns": ",".join(present)}
    source |= {k: v for k, v in (("columnMask", column_mask), ("changeMask", change_mask)) if v is not None}
    return ("Q.M", "U", dt.datetime(2024, 1, 1), f"{row:05d}", 0, f"{row:05d}", None, ["ID"], image, image, source,
            "q.json", 0, row, None)


def results(spark, events: list[tuple]) -> dict:
    found = check_changes(spark.createDataFrame(events, ORIGIN), record=False)
    return {r.check: r for r in found}


def test_masks_beyond_the_version_fail_and_fitting_masks_pass(spark):
    good = [event(1, "0F", "0F", "02"), event(2, "0F", "000F", "0008"),  # zero-padded: still fits
            event(3, "0F", "03"), event(4, "0B", "0B", "08"),             # version without ordinal 3
            event(5, "0F", None, "01")]
    quiet = results(spark, good)
    assert quiet[CHECK].success and quiet[CHECK].severity == "fail", quiet[CHECK].line()
    bad = [*good,
           event(6, "0F", "1F"),               # ordinal 5: the version has 4 columns
           event(7, "0F", "0F", "0100"),       # changeMask: ordinal 9, a longer mask
           event(8, "0B", "0F"),               # ordinal 3, which this version does not have
           event(9, "0F", "0F", "zz")]         # not a mask at all
    fired = results(spark, bad)[CHECK]
    assert (fired.success, fired.unexpected, fired.severity) == (False, 4, "fail"), fired.line()


def test_decoded_qlik_messages_carry_their_version_and_pass(spark, tmp_path):
    columns = {"ID": ("INT8", 1), "A": ("STRING", 0), "B": ("STRING", 0), "C": ("INT4", 0)}
    metadata = json_envelope("MD", "SID1", {
        "schemaId": "SID1",
        "lineage": {"server": "s", "task": "t", "schema": "Q", "table": "M", "tableVersion": 1,
                    "timestamp": "2024-01-01T00:00:00.000"},
        "tableStructure": {"tableColumns": {n: {"ordinal": i, "type": t, "primaryKeyPosition": k}
                                            for i, (n, (t, k)) in enumerate(columns.items(), 1)}}})
    lines = [metadata]
    for n, (op, mask, change) in enumerate([("INSERT", "0F", "0F"), ("UPDATE", "0B", "02"), ("DELETE", "0F", None)]):
        headers = {"operation": op, "changeSequence": f"{20240101120000000 + n:017d}{n:018d}",
                   "timestamp": "2024-01-01T12:00:00.000", "columnMask": mask, "changeMask": change}
        data = {"ID": 1, "A": f"a{n}", "B": None, "C": n}
        lines.append(json_envelope("DT", "SID1", {"data": data, "beforeData": None, "headers": headers}))
    path = tmp_path / "q.json"
    path.write_text("".join(line + "\n" for line in lines))
    events = lakecdc.read_changes(str(path), format="qlik-json", spark=spark)
    kept = {r["source"]["version_mask"] for r in events.where("op IS NOT NULL").collect()}
    assert kept == {"0F"}
    found = {r.check: r for r in check_changes(events, record=False)}
    assert found[CHECK].success and found["present columns are the image's (masks)"].success, \
        [r.line() for r in found.values()]
