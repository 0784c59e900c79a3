"""Kafka Connect values as exact canonical text, and the Spark types their schemas declare.

Debezium serialises each column with a Kafka Connect schema: a base type (``int8`` .. ``int64``,
``float32``/``float64``, ``boolean``, ``string``, ``bytes``, ``struct``, ``array``, ``map``) and
often a logical name (``org.apache.kafka.connect.data.Decimal``, ``io.debezium.time.MicroTimestamp``,
...). :func:`column_text` turns one value into the exact text the canonical images carry (decimal
digits, ISO-8601 UTC timestamps), :func:`spark_type` gives the column type its schema declares.
Values may come from JSON (numbers as :class:`Num`, bytes as base64 text) or from Avro (Python
ints, floats and bytes): both are read.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import types as T

from lakecdc.decode.jsontext import Num, compact_json, plain_text
from lakecdc.decode.rows import MISSING, Pairs, RecordError

# -- Kafka Connect logical types -----------------------------------------------------------------

DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
_DATES = {"org.apache.kafka.connect.data.Date", "io.debezium.time.Date"}
_TIMES = {"org.apache.kafka.connect.data.Time": 3, "io.debezium.time.Time": 3,
          "io.debezium.time.MicroTime": 6, "io.debezium.time.NanoTime": 9}
_TIMESTAMPS = {"org.apache.kafka.connect.data.Timestamp": 3, "io.debezium.time.Timestamp": 3,
               "io.debezium.time.MicroTimestamp": 6, "io.debezium.time.NanoTimestamp": 9}
ZONED_TIMESTAMP = "io.debezium.time.ZonedTimestamp"
#: MySQL and PostgreSQL ``BIT(n > 1)``: the bits as bytes (little-endian for MySQL, as Debezium
#: documents it), kept as they are: a ``binary`` column.
BITS = "io.debezium.data.Bits"
#: ``time.precision.mode=isostring``: a date as ISO-8601 text (``2023-03-23``).
ISO_DATE = "io.debezium.time.IsoDate"
#: What :func:`spark_type` gives a column whose type its values decide (VariableScaleDecimal): the
#: column is declared all the same, so it is kept (as a string) while its values are all NULL.
UNTYPED = T.NullType()
_GEOMETRY = {"io.debezium.data.geometry.Geometry", "io.debezium.data.geometry.Point",
             "io.debezium.data.geometry.Geography"}
INT_TYPES = {"int8": T.ByteType(), "int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType()}
_EPOCH = dt.datetime(1970, 1, 1)
_DIGITS = re.compile(r"-?\d+")
_ZONED = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)")


def decimal_text(unscaled: int, scale: int) -> Num:
    """``unscaled * 10**-scale`` written exactly (``decimal_text(-1050, 2) == '-10.50'``)."""
    if scale <= 0:
        return Num(str(unscaled * 10 ** (-scale)))
    sign = "-" if unscaled < 0 else ""
    digits = str(abs(unscaled)).rjust(scale + 1, "0")
    return Num(f"{sign}{digits[:-scale]}.{digits[-scale:]}")


def _bytes_of(value: Any, what: str) -> bytes:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise RecordError(f"{what}: '{value[:60]}' is not base64") from None
    raise RecordError(f"{what}: expected base64 bytes, found {compact_json(value)[:60]}")


def _unscaled(value: Any, what: str) -> int:
    return int.from_bytes(_bytes_of(value, what), "big", signed=True)


def _int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise RecordError(f"{what}: expected a number, found {value}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    raise RecordError(f"{what}: expected an integer, found {compact_json(value)[:60]}")


def _fraction(units: int, digits: int) -> str:
    return f".{units:0{digits}d}" if digits else ""


def _time_text(value: Any, digits: int, what: str) -> str:
    """Time since midnight (ms/us/ns) as ``HH:MM:SS.fff...``; MySQL TIME may be negative or
    beyond 24 hours, written the same way (``-838:59:59.000000``)."""
    n = _int(value, what)
    sign = "-" if n < 0 else ""
    per_second = 10**digits
    seconds, frac = divmod(abs(n), per_second)
    minutes, sec = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    return f"{sign}{hours:02d}:{minute:02d}:{sec:02d}{_fraction(frac, digits)}"


def _timestamp_text(value: Any, digits: int, what: str) -> str:
    """Epoch ms/us/ns as ISO-8601 UTC (``2023-03-23T14:30:05.123456Z``)."""
    n = _int(value, what)
    seconds, frac = divmod(n, 10**digits)
    try:
        moment = _EPOCH + dt.timedelta(seconds=seconds)
    except OverflowError:
        raise RecordError(f"{what}: timestamp {n} is out of range") from None
    if not 1 <= moment.year <= 9999:
        raise RecordError(f"{what}: timestamp {n} is out of range")
    return f"{moment:%Y-%m-%dT%H:%M:%S}{_fraction(frac, digits)}Z"


def _date_text(value: Any, what: str) -> str:
    days = _int(value, what)
    try:
        return (_EPOCH + dt.timedelta(days=days)).date().isoformat()
    except OverflowError:
        raise RecordError(f"{what}: date {days} is out of range") from None


def zoned_to_utc(text: str, what: str) -> str:
    """An ISO-8601 timestamp with an offset as UTC ``...Z``, its fraction digits kept."""
    m = _ZONED.fullmatch(text)
    if not m:
        raise RecordError(f"{what}: '{text[:60]}' is not an ISO-8601 timestamp with a zone")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    if zone == "Z":
        return text
    local = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second))
    sign = 1 if zone[0] == "+" else -1
    zone = zone[1:].replace(":", "")
    utc = local - sign * dt.timedelta(hours=int(zone[:2]), minutes=int(zone[2:]))
    return f"{utc:%Y-%m-%dT%H:%M:%S}{frac or ''}Z"


def placeholder_forms(texts: Sequence[str]) -> frozenset[str]:
    """The placeholder texts and the base64 of their bytes (how a bytes column carries them)."""
    return frozenset({*texts, *(base64.b64encode(t.encode()).decode("ascii") for t in texts)})


def is_placeholder(value: Any, placeholders: frozenset[str]) -> bool:
    """True for an unavailable-value placeholder (see :func:`placeholder_forms`): as text, as raw
    bytes (Avro), or a non-empty list holding only placeholders (an array column)."""
    if isinstance(value, str):
        return value in placeholders
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace") in placeholders
    if isinstance(value, list) and value:
        return all(isinstance(v, str) and v in placeholders for v in value)
    return False


def column_text(value: Any, field: Mapping[str, Any] | None, placeholders: frozenset[str], column: str) -> Any:
    """The exact canonical text of one column value (``None`` for NULL, :data:`MISSING` for the
    unavailable-value placeholder).

    With a schema ``field``: integers and floats as written; booleans ``true``/``false``;
    ``Decimal`` (base64 big-endian two's complement + ``scale``) and ``VariableScaleDecimal``
    (``{scale, value}``) as exact decimal text; ``Date`` as ``YYYY-MM-DD``; ``Time`` /
    ``MicroTime`` / ``NanoTime`` as ``HH:MM:SS`` with 3/6/9 fraction digits; ``Timestamp`` /
    ``MicroTimestamp`` / ``NanoTimestamp`` as ISO-8601 UTC with 3/6/9 fraction digits;
    ``ZonedTimestamp`` converted to UTC (fraction kept); geometries as their WKB in base64; bytes
    as base64; structs, arrays and maps as compact JSON; every other logical type (Json, Uuid,
    Enum, Year, ...) as its value's text. Without a schema: the JSON value's text.
    """
    if value is None:
        return None
    if field is None and (type(value) is str or type(value) is Num):  # the common case, fast
        return MISSING if value in placeholders else value
    if is_placeholder(value, placeholders):
        return MISSING
    what = f"column '{column}'"
    if field is None:
        return plain_text(value)
    name = field.get("name")
    kind = field.get("type")
    if name == DECIMAL:
        if isinstance(value, Num):
            return value
        if type(value) is int:  # a JSON integer (msgspec gives ints, not Num)
            return Num(value)
        scale = _int((field.get("parameters") or {}).get("scale", "0"), f"{what}: Decimal scale")
        return decimal_text(_unscaled(value, f"{what} (Decimal)"), scale)
    if name == VARIABLE_SCALE_DECIMAL:
        if not isinstance(value, dict):
            raise RecordError(f"{what}: VariableScaleDecimal must be an object with scale and value")
        if value.get("value") is None:
            return None
        scale = _int(value.get("scale", 0), f"{what}: VariableScaleDecimal scale")
        return decimal_text(_unscaled(value.get("value"), f"{what} (VariableScaleDecimal)"), scale)
    if name in _DATES:
        return _date_text(value, what)
    if name in _TIMES:
        return _time_text(value, _TIMES[name], what)
    if name in _TIMESTAMPS:
        return _timestamp_text(value, _TIMESTAMPS[name], what)
    if name == ZONED_TIMESTAMP and isinstance(value, str):
        return zoned_to_utc(value, what)
    if name in _GEOMETRY and isinstance(value, dict) and value.get("wkb") is not None:
        wkb = value["wkb"]
        return base64.b64encode(wkb).decode("ascii") if isinstance(wkb, (bytes, bytearray)) else str(wkb)
    if kind in INT_TYPES:
        return Num(str(_int(value, what)))
    if kind == "bytes" and isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    return plain_text(value)


def spark_type(field: Mapping[str, Any]) -> T.DataType | None:
    """The Spark type a schema field declares; None leaves the column to type inference.

    int8..int64: tinyint..bigint; float32/float64: float/double; boolean; Decimal: decimal(p, s)
    with p from ``connect.decimal.precision`` (else 38; a precision or scale above 38 stays a
    string); Date: date; Timestamp, MicroTimestamp, ZonedTimestamp: timestamp (UTC, microseconds);
    NanoTimestamp and every Time type: string (Spark has no nanoseconds and no time of day);
    VariableScaleDecimal: :data:`UNTYPED` (inferred from the values, its scale varies per row; a
    string while they are all NULL); bytes, ``Bits`` and geometries (their WKB): binary (the image
    text is base64, decoded when typed); ``IsoDate``: date; everything else (``Json``, ``Xml``,
    ``Uuid``, ``Enum``, ``EnumSet``, ``ZonedTime``, ``Interval``, ``IsoTime``, ``IsoTimestamp``,
    ...): string. ``Year`` and ``MicroDuration`` take their base type (int, double).
    """
    name = field.get("name")
    kind = field.get("type")
    params = field.get("parameters") or {}
    if name == DECIMAL:
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        if not 0 <= scale <= 38 or precision > 38:
            return T.StringType()
        return T.DecimalType(max(precision, scale, 1), scale)
    if name == VARIABLE_SCALE_DECIMAL:
        return UNTYPED
    if name == BITS:
        return T.BinaryType()
    if name in _DATES or name == ISO_DATE:
        return T.DateType()
    if name in ("org.apache.kafka.connect.data.Timestamp", "io.debezium.time.Timestamp",
                "io.debezium.time.MicroTimestamp", ZONED_TIMESTAMP):
        return T.TimestampType()
    if name in _GEOMETRY:
        return T.BinaryType()
    if name in _TIMESTAMPS or name in _TIMES:
        return T.StringType()
    if kind in INT_TYPES:
        return INT_TYPES[kind]
    if kind == "float32":
        return T.FloatType()
    if kind in ("float64", "double"):
        return T.DoubleType()
    if kind == "float":
        return T.FloatType()
    if kind == "boolean":
        return T.BooleanType()
    if kind == "bytes" and name is None:
        return T.BinaryType()
    return T.StringType()


def column_name(name: str, field: Mapping[str, Any] | None) -> str:
    """The source's own column name (``__debezium.source.column.name``), else the field name."""
    if field:
        original = (field.get("parameters") or {}).get("__debezium.source.column.name")
        if original:
            return str(original)
    return name


def image_fields(schema: Mapping[str, Any] | None, image: str) -> dict[str, Mapping[str, Any]] | None:
    """The ``before``/``after`` struct's fields by name, from an envelope's Connect schema."""
    if schema is None or not isinstance(schema, Mapping):
        return None
    for f in schema.get("fields") or ():
        if isinstance(f, Mapping) and f.get("field") == image and isinstance(f.get("fields"), list):
            return {str(c.get("field")): c for c in f["fields"] if isinstance(c, Mapping)}
    return None


#: Logical names :func:`column_text` reads specially (no fast path in :func:`column_converter`).
SPECIAL = frozenset({DECIMAL, VARIABLE_SCALE_DECIMAL, ZONED_TIMESTAMP, *_DATES, *_TIMES, *_TIMESTAMPS, *_GEOMETRY})

Converter = Callable[[Any], Any]


def column_converter(field: Mapping[str, Any] | None, placeholders: frozenset[str], column: str) -> Converter:
    """A function equal to ``lambda v: column_text(v, field, placeholders, column)``, made once
    per schema field, with fast paths for the common values (integers, plain strings, Decimal
    bytes as Avro gives them); every other value goes through :func:`column_text`."""

    def general(value: Any) -> Any:
        return column_text(value, field, placeholders, column)

    if field is None:
        return general
    name, kind = field.get("name"), field.get("type")
    if name == DECIMAL:
        raw_scale = (field.get("parameters") or {}).get("scale", "0")
        if not _DIGITS.fullmatch(str(raw_scale)):
            return general  # column_text names the bad scale
        scale = int(raw_scale)
        marks = frozenset(p.encode("utf-8") for p in placeholders)

        def decimal(value: Any) -> Any:
            kind = type(value)
            if kind is bytes:
                if value in marks:
                    return MISSING
                return decimal_text(int.from_bytes(value, "big", signed=True), scale)
            if kind is str and value not in placeholders:  # base64, as the JSON converter writes it
                try:
                    raw = binascii.a2b_base64(value, strict_mode=True)
                except (binascii.Error, ValueError):
                    return general(value)  # column_text names what is wrong
                return decimal_text(int.from_bytes(raw, "big", signed=True), scale)
            return general(value)

        return decimal
    if name in SPECIAL:
        return general
    if kind in INT_TYPES:

        def integer(value: Any) -> Any:
            return Num(str(value)) if type(value) is int else general(value)

        return integer
    if kind == "string":

        def string(value: Any) -> Any:
            if type(value) is str:
                return MISSING if value in placeholders else value
            return general(value)

        return string
    return general


class ImageReader:
    """:func:`image_pairs` for one image struct of a schema, its converters made once (for a
    schema that decodes many records: a schema id of the Avro wire format, an OCF file)."""

    def __init__(self, fields: Mapping[str, Mapping[str, Any]], placeholders: frozenset[str], *,
                 ordered: bool = False) -> None:
        self.placeholders = placeholders
        self.columns = {name: (column_name(name, f), column_converter(f, placeholders, name))
                        for name, f in fields.items()}
        #: the objects hold every field, in schema order (records fastavro decodes with the
        #: schema): read by position
        self.ordered = tuple(self.columns.values()) if ordered else None
        #: the field names in schema order: an object whose members are exactly these, in this
        #: order (what the JSON converter writes), is read by position too
        self.names = tuple(self.columns)
        self.by_name = tuple(self.columns.values())

    def pairs(self, obj: Any, image: str) -> Pairs | None:
        """Same as ``image_pairs(obj, fields, placeholders, image)``."""
        if obj is None:
            return None
        if not isinstance(obj, dict):
            raise RecordError(f"'{image}' is not an object: {compact_json(obj)[:80]}")
        ordered = self.ordered
        if ordered is not None and len(obj) == len(ordered):  # by position: every field, in order
            return [(column, text) for (column, convert), value in zip(ordered, obj.values(), strict=True)
                    if (text := None if value is None else convert(value)) is not MISSING]
        if tuple(obj) == self.names:  # every field, in schema order
            return [(column, text) for (column, convert), value in zip(self.by_name, obj.values(), strict=True)
                    if (text := None if value is None else convert(value)) is not MISSING]
        out = []
        columns = self.columns
        for name, value in obj.items():
            found = columns.get(name)
            if value is None:
                column, text = (name, None) if found is None else (found[0], None)
            elif found is None:
                column, text = name, column_text(value, None, self.placeholders, name)
            else:
                column, text = found[0], found[1](value)
            if text is not MISSING:
                out.append((column, text))
        return out


def image_pairs(obj: Any, fields: Mapping[str, Mapping[str, Any]] | None, placeholders: frozenset[str], image: str) -> Pairs | None:
    """An image object as ``[(column, text)]``; unavailable columns left out (missing)."""
    if obj is None:
        return None
    if not isinstance(obj, dict):
        raise RecordError(f"'{image}' is not an object: {compact_json(obj)[:80]}")
    if not fields:
        return _plain_pairs(obj, placeholders)
    out: Pairs = []
    for name, value in obj.items():
        f = fields.get(name) if fields else None
        text = column_text(value, f, placeholders, name)
        if text is not MISSING:
            out.append((column_name(name, f), text))
    return out


def _plain_pairs(obj: dict[str, Any], placeholders: frozenset[str]) -> Pairs:
    """``image_pairs`` without a schema: strings and integers (the common values) inline, every
    other value through :func:`column_text`."""
    out: Pairs = []
    append = out.append
    for name, value in obj.items():
        kind = type(value)
        if value is None:
            append((name, None))
        elif kind is str or kind is Num:
            if value not in placeholders:
                append((name, value))
        elif kind is int:
            append((name, Num(value)))
        else:
            text = column_text(value, None, placeholders, name)
            if text is not MISSING:
                append((name, text))
    return out
