"""Column types: inferred from the data when nothing declares them, and lossless typing of values.

Images hold VARIANT values. A column's Spark type comes, in this order, from the target Delta
table (an existing column keeps its type), then from what the data shows (:func:`infer_types`):

=====================================  ======================================================
values seen (non-null)                 column type
=====================================  ======================================================
only JSON integers                     ``bigint``
any JSON number with a fraction        ``decimal(38, s)``, ``s`` = the largest scale seen, at
                                       least 2 (exact: never through a double)
any number written with an exponent    ``double``
only booleans                          ``boolean``
strings, objects, arrays, a mix, none  ``string`` (objects and arrays as JSON text)
=====================================  ======================================================

Typing a value never rounds or truncates silently: a value that does not fit its column's type
exactly (``12.5`` into ``bigint``, ``1.234`` into ``decimal(38,2)``, ``"abc"`` into ``bigint``)
is reported so that its record goes to the quarantine with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MIN_DECIMAL_SCALE = 2
_DECIMAL_RE = re.compile(r"DECIMAL\((\d+),(\d+)\)")
_EXACT = T.DecimalType(38, 18)


def split_top_level(text: str) -> list[str]:
    """Split ``a: X, b: OBJECT<c: Y, d: Z>`` at the commas that are not nested or quoted."""
    parts, depth, quoted, cur = [], 0, False, []
    for ch in text:
        if ch == "`":
            quoted = not quoted
        elif not quoted and ch in "<(":
            depth += 1
        elif not quoted and ch in ">)":
            depth -= 1
        elif not quoted and depth == 0 and ch == ",":
            parts.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def parse_object_schema(text: str | None) -> dict[str, str]:
    """Spark's ``schema_of_variant_agg`` text ``OBJECT<a: BIGINT, ...>`` as ``{name: type}``."""
    if not text or not text.startswith("OBJECT<"):
        return {}
    out: dict[str, str] = {}
    for part in split_top_level(text[len("OBJECT<") : -1]):
        if part.startswith("`"):
            end = part.index("`", 1)
            while end + 1 < len(part) and part[end + 1] == "`":  # doubled backtick = literal
                end = part.index("`", end + 2)
            name, rest = part[1:end].replace("``", "`"), part[end + 1 :]
        else:
            name, _, rest = part.partition(":")
            rest = ":" + rest
        out[name] = rest.lstrip(":").strip()
    return out


def spark_type_for(variant_type: str, *, fractional: bool) -> T.DataType:
    """The column type for a column whose values Spark described as ``variant_type``."""
    if variant_type in ("BIGINT", "INT", "SMALLINT", "TINYINT"):
        return T.DecimalType(38, MIN_DECIMAL_SCALE) if fractional else T.LongType()
    m = _DECIMAL_RE.fullmatch(variant_type)
    if m:
        scale = int(m.group(2))
        if scale == 0 and not fractional:
            return T.LongType()
        return T.DecimalType(38, max(scale, MIN_DECIMAL_SCALE))
    if variant_type in ("DOUBLE", "FLOAT"):
        return T.DoubleType()
    if variant_type == "BOOLEAN":
        return T.BooleanType()
    return T.StringType()


def infer_types(
    events: DataFrame, columns: Iterable[str], aliases: dict[str, list[str]] | None = None
) -> dict[str, T.DataType]:
    """Infer the types of ``columns`` from the before/after images of ``events`` (one table).

    ``aliases`` maps a column to other spellings of it; their values count for the column.

    Variant values do not keep a number's trailing zeros (``17520.00`` is stored as the decimal
    ``17520``), but they do keep that it was written with a decimal point (a DECIMAL, where
    ``17520`` is a BIGINT): such a column becomes a decimal even when every value seen is whole.
    """
    names = list(columns)
    spellings = {c: [c, *(aliases or {}).get(c, [])] for c in names}
    wanted = [s for c in names for s in spellings[c]]
    if not wanted:
        return {}
    images = events.select(F.explode(F.array("before", "after")).alias("img")).where("img is not null")
    row = images.select(
        F.schema_of_variant_agg(F.to_variant_object(F.map_filter("img", lambda k, _v: k.isin(wanted)))).alias("s"),
        *[
            F.max(
                F.coalesce(F.schema_of_variant(F.col("img")[c]).startswith("DECIMAL"), F.lit(False))
            ).alias(f"frac_{i}")
            for i, c in enumerate(wanted)
        ],
    ).first()
    described = parse_object_schema(row["s"] if row else None)
    per_spelling: dict[str, T.DataType] = {}
    for i, c in enumerate(wanted):
        fractional = bool(row[f"frac_{i}"]) if row else False
        per_spelling[c] = spark_type_for(described.get(c, "VOID"), fractional=fractional)
    return {c: widest([per_spelling[s] for s in spellings[c] if described.get(s, "VOID") != "VOID"]) for c in names}


def widest(types: list[T.DataType]) -> T.DataType:
    """The one type that holds values of all ``types`` exactly (string when none does)."""
    distinct = list(dict.fromkeys(types))
    if not distinct:
        return T.StringType()
    if len(distinct) == 1:
        return distinct[0]
    if all(isinstance(t, (T.LongType, T.DecimalType)) for t in distinct):
        scale = max((t.scale for t in distinct if isinstance(t, T.DecimalType)), default=MIN_DECIMAL_SCALE)
        return T.DecimalType(38, scale)
    return T.StringType()


def sql_string(value: str) -> str:
    """A Python string as a Spark SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def typed_sql(raw: str, dtype: T.DataType) -> tuple[str, str | None]:
    """SQL for ``(typed value, ok)`` of the VARIANT expression ``raw``.

    ``ok`` is None when every value fits (string columns); otherwise it is false exactly when the
    value is not NULL and would change in the conversion (rounding, truncation, a failed parse).
    """
    if isinstance(dtype, T.StringType):
        return f"try_variant_get({raw}, '$', 'string')", None
    value = f"try_variant_get({raw}, '$', '{dtype.simpleString()}')"
    is_null = f"({raw} IS NULL OR is_variant_null({raw}))"
    if isinstance(dtype, (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DecimalType)):
        exact = _EXACT.simpleString()
        ok = f"({is_null} OR coalesce(CAST({value} AS {exact}) = try_variant_get({raw}, '$', '{exact}'), false))"
    else:
        ok = f"({is_null} OR {value} IS NOT NULL)"
    return value, ok
