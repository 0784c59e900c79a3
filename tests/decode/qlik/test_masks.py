"""Qlik's masks have two evaluators (:mod:`lakecdc.decode.qlik.masks`): Python for the odd lines and
``qlik-avro``, SQL for ``qlik-json``'s common lines. For random table versions (ordinals with gaps,
up to the SQL limit) and random mask texts (hex of any length, leading zeros, an odd number of
digits, bits past the last ordinal, digits that are not hex), SQL reads a mask exactly when Python
does, to the same columns, and leaves the same columns out of an image."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from lakecdc.decode.qlik.catalog import BadRecord, Column, TableVersion
from lakecdc.decode.qlik.masks import MAX_ORDINAL, VersionMasks, mask_bits, mask_columns, parse_mask

pytestmark = pytest.mark.spark

HEX = "0123456789ABCDEFabcdef"


@st.composite
def versions(draw) -> TableVersion:
    """A table version of 1 to 12 columns whose ordinals are distinct, with gaps, at most MAX_ORDINAL."""
    ordinals = sorted(draw(st.sets(st.integers(1, MAX_ORDINAL), min_size=1, max_size=12)))
    columns = tuple(Column(f"C{o}", o, "STRING") for o in ordinals)
    return TableVersion("S.T", 1, columns, schema_id="id")


def masks_for(top: int) -> st.SearchStrategy[str]:
    """Mask texts: exact ones of the version's width, short and long ones, with leading zeros,
    and a few with a character that is not hex."""
    exact = st.integers(0, (1 << top) - 1).map(lambda n: f"{n:X}")
    padded = st.tuples(st.integers(0, 20), exact).map(lambda p: "0" * p[0] + p[1])
    anything = st.text(HEX, min_size=1, max_size=20)
    wrong = st.tuples(anything, st.sampled_from("xG-")).map(lambda p: p[0] + p[1])
    return st.one_of(exact, padded, anything, wrong)


def python(text: str, tv: TableVersion) -> list[str] | None:
    """The columns Python's evaluator names; None when it refuses the mask."""
    try:
        bits = parse_mask(text, "columnMask")
        return mask_columns(bits, tv, "columnMask", text) if bits is not None else None
    except BadRecord:
        return None


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_sql_reads_a_mask_exactly_as_python_does(spark, data):
    """Per mask: SQL says it is readable exactly when Python reads it, lists the same columns, and
    keeps the same columns of a whole image (missing ones left out, not NULL)."""
    tv = data.draw(versions())
    texts = data.draw(st.lists(masks_for(tv.top_ordinal), min_size=1, max_size=25))
    image = {c.name: f"v{c.ordinal}" for c in tv.columns}
    # (SQL reads images whose keys are the version's names in ordinal order: the route checks that)
    whole = F.map_from_arrays(F.array(*[F.lit(k) for k in image]), F.array(*[F.lit(v) for v in image.values()]))
    df = spark.createDataFrame([(t,) for t in texts], "m string").select("m", whole.alias("img"))
    sql = VersionMasks(tv)
    value, ok = mask_bits(F.col("m"), tv.top_ordinal)
    rows = df.select("m", ok.alias("ok"), F.when(ok, sql.listed(value)).alias("listed"),
                     F.when(ok, sql.image(F.col("img"), value)).alias("kept")).collect()
    for r in rows:
        want = python(r["m"], tv)
        assert bool(r["ok"]) == (want is not None), r["m"]
        if want is not None:
            assert r["listed"] == ",".join(want), r["m"]
            assert r["kept"] == {k: v for k, v in image.items() if k in want}, r["m"]
