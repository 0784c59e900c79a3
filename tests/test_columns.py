"""Lossless typing: a value that does not fit its column exactly is reported, never rounded."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from lakecdc.changes.columns import typed_sql

pytestmark = pytest.mark.spark

CASES = [
    # (type, text, fits)
    (T.DecimalType(38, 2), "1.23", True),
    (T.DecimalType(38, 2), "1.230", True),
    (T.DecimalType(38, 2), "1.234", False),  # decimal(38,2) vs (38,18) once compared equal here
    (T.DecimalType(38, 2), "1.5E-3", False),
    (T.DecimalType(38, 2), "1.5E3", True),
    (T.DecimalType(38, 2), "-.5", True),
    (T.DecimalType(30, 2), "1234567890123456789012345.67", True),  # 25 integer digits
    (T.DecimalType(30, 2), "12345678901234567890123456789.1", False),  # 29 do not fit
    (T.DecimalType(10, 0), "7", True),
    (T.DecimalType(10, 0), "7.5", False),
    (T.DecimalType(10, 0), "abc", False),
    (T.LongType(), "12", True),
    (T.LongType(), "12.5", False),
    (T.LongType(), "9223372036854775808", False),
    (T.StringType(), "anything", True),
]


def test_values_fit_exactly_or_are_reported(spark):
    df = spark.createDataFrame([(i, text) for i, (_, text, _) in enumerate(CASES)], "i int, x string")
    exprs = []
    for i, (dtype, _, _) in enumerate(CASES):
        _, ok = typed_sql("x", dtype)
        exprs.append(f"CASE WHEN i = {i} THEN {ok or 'true'} END")
    got = {r["i"]: next(v for v in r[1:] if v is not None) for r in df.selectExpr("i", *exprs).collect()}
    assert [got[i] for i in range(len(CASES))] == [fits for _, _, fits in CASES]
