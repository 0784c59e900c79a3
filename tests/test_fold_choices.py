"""The fold's cheaper plans give the per-column fold's answer: whole images, one input file.

A batch whose after images hold every column needs no per-column fold (each key's newest image is
its upsert), and a batch read from one file needs no per-file bookkeeping (its totals are the
file's counts). Both are plan choices only: on random histories (inserts, whole and partial
updates, deletes, replayed copies, ties) the net actions and the counts must equal the general
fold's, and ``_partial`` must name exactly the keys whose images were not whole.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from lakecdc.consolidate.files import late_by_file
from lakecdc.consolidate.fold import Layout, drop_stale, fold, widen
from lakecdc.decode.event import event_schema

pytestmark = pytest.mark.spark

COLUMNS = ("ID", "A", "B")
LAYOUT = Layout(columns=COLUMNS, types=(T.LongType(), T.StringType(), T.LongType()), keys=("ID",))
EXAMPLES = int(os.environ.get("LAKECDC_PROPERTY_EXAMPLES", "25"))
T0 = dt.datetime(2024, 1, 1)

#: one event: (op, key, seq step, value of A or None, value of B or None, whole image?, file, copy?)
EVENTS = st.lists(
    st.tuples(
        st.sampled_from("IUUD"), st.integers(1, 4), st.integers(0, 2),
        st.one_of(st.none(), st.text("xyz", max_size=2)), st.one_of(st.none(), st.integers(0, 9)),
        st.booleans(), st.sampled_from(["f1", "f2"]), st.booleans(),
    ),
    min_size=1, max_size=14,
)


def _rows(events: list[tuple], *, all_whole: bool, one_file: bool) -> list[dict]:
    rows, seq = [], 0
    for n, (op, key, step, a, b, whole, file, copy) in enumerate(events):
        seq += step
        image = {"ID": str(key), "A": a, "B": None if b is None else str(b)}
        if op == "U" and not (whole or all_whole):
            image = {"ID": str(key), "A": a}  # a partial update: B not carried
        row = {
            "table": "S.T", "op": op, "op_ts": T0 + dt.timedelta(seconds=seq), "pos": f"{seq:06d}", "idx": 0,
            "seq": f"{seq:06d}", "txid": None, "keys": ["ID"],
            "before": {"ID": str(key)} if op in "UD" else None, "after": None if op == "D" else image,
            "source": None, "_file": "f1" if one_file else file, "_block": 0, "_row": n, "_error": None,
        }
        rows.append(row)
        if copy:  # a replayed copy, read right after it
            rows.append({**row, "_row": n + 1000})
    return rows


def _net(spark, rows: list[dict], **choices):
    events = spark.createDataFrame(rows, event_schema(binary=False))
    wide = drop_stale(widen(events, LAYOUT), LAYOUT, None, None)
    return fold(wide, LAYOUT, **choices).toArrow().sort_by("k0")


def _same(a, b) -> None:
    common = [c for c in a.column_names if c in b.column_names and c != "_by_file"]
    assert a.select(common).to_pylist() == b.select(common).to_pylist()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS, all_whole=st.booleans())
def test_whole_images_fold_as_the_per_column_fold_or_say_which_keys_were_partial(spark, events, all_whole) -> None:
    """With whole images the cheaper fold's actions equal the per-column fold's; where a key's
    images were not whole it says so (``_partial``), and only there may its answer differ."""
    rows = _rows(events, all_whole=all_whole, one_file=False)
    general = _net(spark, rows)
    cheap = _net(spark, rows, whole=True)
    partial = set(cheap.filter(cheap.column("_partial")).column("k0").to_pylist())
    if all_whole:
        assert partial == set()
    keep = [k not in partial for k in cheap.column("k0").to_pylist()]
    _same(general.filter(keep), cheap.filter(keep))
    # only a key with an update that lacked B can be partial
    assert partial <= {k for op, k, _s, _a, _b, whole, _f, _c in events if op == "U" and not whole}

@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS)
def test_one_file_counts_as_the_per_file_bookkeeping(spark, events) -> None:
    """Read from one file, the fold without per-file windows gives the same actions, and its totals
    give that file's events and duplicate or late events as the per-file bookkeeping does."""
    rows = _rows(events, all_whole=False, one_file=True)
    general = _net(spark, rows)
    cheap = _net(spark, rows, one_file=True)
    _same(general, cheap)
    assert pc.all(pc.is_null(cheap.column("_by_file"))).as_py()
    assert late_by_file(cheap, "f1") == late_by_file(general)
