"""MySQL column types (Canal's ``mysqlType``, its ``sqlType`` JDBC codes) as lossless Spark types.

Canal writes every value as text; the declared type says what the text holds. The mapping keeps
every value exactly (a value that does not fit goes to the quarantine, never rounded):

===========================================  ===============================================
MySQL type                                   Spark type
===========================================  ===============================================
tinyint .. bigint (also ``tinyint(1)``,      ``bigint``
bool/boolean, year, int unsigned)
bigint unsigned, serial                      ``decimal(20,0)`` (up to 18446744073709551615)
decimal/numeric/fixed/dec(p,s), p <= 38      ``decimal(p,s)`` (``decimal`` alone: (10,0))
decimal(p,s), p > 38                         ``string`` (Spark's decimals stop at 38 digits)
float (``float(p)`` with p > 24: double)     ``float``
double, double precision, real               ``double``
date                                         ``date``
datetime, timestamp                          ``timestamp_ntz``: the wall-clock text as
                                             written. Canal prints TIMESTAMP columns in
                                             its server's time zone and DATETIME has none,
                                             so no UTC instant can be claimed.
everything else (char, varchar, text, enum,  ``string``
set, json, time, bit, binary, blob, geometry)
===========================================  ===============================================

MySQL's zero dates (``0000-00-00``) do not fit ``date``/``timestamp_ntz``: such records are
quarantined; read the table with ``treatAllColumnsAsStrings=true`` to keep them as text.

When ``mysqlType`` does not name a column, its ``sqlType`` (a ``java.sql.Types`` code) decides:
-6/5/4 ``bigint``; -5 ``decimal(20,0)`` (the code does not say whether it is unsigned); 7
``float``; 6/8 ``double``; 91 ``date``; 93 ``timestamp_ntz``; every other code ``string``.
"""

from __future__ import annotations

import re

from pyspark.sql import types as T

_TYPE_RE = re.compile(r"^\s*([A-Za-z]+(?:\s+precision)?)\s*(?:\(([^)]*)\))?\s*(.*)$", re.IGNORECASE)
_INTS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "bool", "boolean", "year"})
_DECIMALS = frozenset({"decimal", "numeric", "fixed", "dec"})
_DOUBLES = frozenset({"double", "double precision", "real"})
_UNSIGNED_BIGINT = T.DecimalType(20, 0)
_MAX_PRECISION = 38

_SQL_TYPES: dict[int, T.DataType] = {
    -6: T.LongType(), 5: T.LongType(), 4: T.LongType(), -5: _UNSIGNED_BIGINT,
    7: T.FloatType(), 6: T.DoubleType(), 8: T.DoubleType(), 91: T.DateType(), 93: T.TimestampNTZType(),
}


def mysql_type(text: str) -> T.DataType:
    """The Spark type for a ``mysqlType`` text such as ``bigint(20) unsigned`` or ``DECIMAL(8, 3)``.

    >>> mysql_type("DECIMAL(8, 3)"), mysql_type("bigint(20) unsigned"), mysql_type("varchar(50)")
    (DecimalType(8,3), DecimalType(20,0), StringType())
    """
    m = _TYPE_RE.match(text or "")
    if not m:
        return T.StringType()
    base = " ".join(m.group(1).lower().split())
    args = [a.strip() for a in (m.group(2) or "").split(",") if a.strip()]
    unsigned = "unsigned" in m.group(3).lower()
    if base == "serial" or (base == "bigint" and unsigned):
        return _UNSIGNED_BIGINT
    if base in _INTS:
        return T.LongType()
    if base in _DECIMALS:
        return _decimal(args)
    if base == "float":
        return T.DoubleType() if len(args) == 1 and args[0].isdigit() and int(args[0]) > 24 else T.FloatType()
    if base in _DOUBLES:
        return T.DoubleType()
    if base == "date":
        return T.DateType()
    if base in ("datetime", "timestamp"):
        return T.TimestampNTZType()
    return T.StringType()


def sql_type(code: str | int | None) -> T.DataType:
    """The Spark type for a ``sqlType`` code (used when ``mysqlType`` lacks the column)."""
    try:
        return _SQL_TYPES.get(int(code), T.StringType())  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return T.StringType()


def _decimal(args: list[str]) -> T.DataType:
    if not all(a.isdigit() for a in args):
        return T.StringType()
    precision = int(args[0]) if args else 10
    scale = int(args[1]) if len(args) > 1 else 0
    if precision > _MAX_PRECISION or scale > precision:
        return T.StringType()
    return T.DecimalType(precision, scale)
