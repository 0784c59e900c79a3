"""Column types: inferred from the data when nothing declares them, and lossless typing of values.

Image values are text. A column's Spark type comes, in this order, from the target Delta
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

**Binary columns.** Image values are text, so bytes travel as **base64** (the one text form of
bytes in lakecdc's images: Debezium's and DTS's own, and what the Avro decoders and the Qlik JSON
decoder, whose messages hold hex digits, render them as). A column typed ``binary`` (declared by
its decoder: DTS ``BinaryObject`` and ``binary`` character sets, Qlik ``BYTES``/``BLOB``; or by a
contract) holds the decoded bytes; text that is not base64 does not fit it.

Typing a value never rounds or truncates silently: a value that does not fit its column's type
exactly (``12.5`` into ``bigint``, ``1.234`` into ``decimal(38,2)``, ``"abc"`` into ``bigint``)
is reported so that its record goes to the quarantine with the reason.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql import types as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MIN_DECIMAL_SCALE = 2
#: The type a decoder's ``column_types`` gives a column its input declares without saying its type
#: (a Debezium ``VariableScaleDecimal``, whose scale varies per value): the column's type is inferred
#: from its values, and while they are all NULL it is a string column, not left out.
DECLARED_UNTYPED = T.NullType()
_DECIMAL_RE = re.compile(r"DECIMAL\((\d+),(\d+)\)")
_EXACT = T.DecimalType(38, 18)


def split_top_level(text: str) -> list[str]:
    """Split ``a: X, b: OBJECT<c: Y, d: Z>`` at the commas that are not nested or quoted."""
    parts: list[str] = []
    cur: list[str] = []
    depth, quoted = 0, False
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
    images: DataFrame, wanted: dict[str, dict[str, list[str]]]
) -> dict[str, dict[str, T.DataType]]:
    """Infer column types per table from ``images`` (``table``, ``before``, ``after`` as maps of
    VARIANT, which keep the JSON type of each value) in one aggregation.

    ``wanted`` maps a table to its new columns, each with its other spellings. A column whose
    values are all NULL gets no type (it is left out until a value shows its type). Variant values do
    not keep a number's trailing zeros (``17520.00`` is the decimal ``17520``) but do keep that it
    was written with a decimal point (a DECIMAL where ``17520`` is a BIGINT): such a column becomes
    a decimal even when every value seen is whole.
    """
    if not wanted:
        return {}
    spellings = {t: {c: [c, *alts] for c, alts in cols.items()} for t, cols in wanted.items()}
    flat = sorted({s for cols in spellings.values() for names in cols.values() for s in names})
    img = F.col("img")
    rows = (
        images.where(F.col("table").isin(list(wanted)))
        .select("table", F.explode(F.array("before", "after")).alias("img"))
        .where(img.isNotNull())
        .groupBy("table")
        .agg(
            F.schema_of_variant_agg(F.to_variant_object(F.map_filter(img, lambda k, _v: k.isin(flat)))).alias("s"),
            *[
                F.max(F.coalesce(F.schema_of_variant(img[c]).startswith("DECIMAL"), F.lit(False))).alias(f"frac_{i}")
                for i, c in enumerate(flat)
            ],
        )
        .collect()
    )
    by_table = {r["table"]: r for r in rows}
    out: dict[str, dict[str, T.DataType]] = {}
    for table, cols in spellings.items():
        row = by_table.get(table)
        described = parse_object_schema(row["s"] if row else None)
        found: dict[str, T.DataType] = {}
        for c, names in cols.items():
            kinds = []
            for name in names:
                if described.get(name, "VOID") == "VOID":
                    continue
                fractional = bool(row[f"frac_{flat.index(name)}"]) if row else False
                kinds.append(spark_type_for(described[name], fractional=fractional))
            if kinds:
                found[c] = widest(kinds)
        out[table] = found
    return out


def widest(types: list[T.DataType]) -> T.DataType:
    """The one type that holds values of all ``types`` exactly (string when none does). ``void``
    (a column declared without a type: :data:`DECLARED_UNTYPED`) gives way to any other type."""
    distinct = [t for t in dict.fromkeys(types) if not isinstance(t, T.NullType)] or list(dict.fromkeys(types))[:1]
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
    """SQL for ``(typed value, ok)`` of the text expression ``raw``.

    ``ok`` is None when every value fits (string columns); otherwise it is false exactly when the
    value is not NULL and would change in the conversion (rounding, truncation, a failed parse).
    """
    if isinstance(dtype, T.StringType):
        return raw, None
    if isinstance(dtype, T.BinaryType):  # bytes travel as base64 text (see the module docstring)
        value = f"try_to_binary({raw}, 'base64')"
        return value, f"({raw} IS NULL OR {value} IS NOT NULL)"
    value = f"try_cast({raw} AS {dtype.simpleString()})"
    if isinstance(dtype, T.DecimalType):
        # fits: the integer digits fit (the cast is not NULL) and nothing is rounded away: plain
        # text has no non-zero digit past the scale; other forms (1.5E3) are compared with their
        # exact value (decimal(38,18): up to 20 integer digits)
        plain = sql_string(rf"^\s*[+-]?[0-9]*(\.[0-9]{{0,{dtype.scale}}}0*)?\s*$")
        exact = _EXACT.simpleString()  # both sides one type: decimal(38,2) = decimal(38,18) would
        # round the right side to decimal(38,2) first, and always agree
        ok = (f"({raw} IS NULL OR ({value} IS NOT NULL AND ({raw} RLIKE {plain} "
              f"OR coalesce(CAST({value} AS {exact}) = try_cast({raw} AS {exact}), false))))")
    else:
        ok = f"({raw} IS NULL OR {value} IS NOT NULL)"
    return value, ok
