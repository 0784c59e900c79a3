"""The values of DTS Avro images as exact text and Spark types (see :mod:`lakecdc.decode.alibaba.dts`).

Each element of ``beforeImages``/``afterImages`` is one of the ``Record`` schema's value records
(Integer, Character, Decimal, Float, Timestamp, DateTime, TimestampWithTimeZone, BinaryGeometry,
TextGeometry, BinaryObject, TextObject) or an EmptyObject. :class:`Values` renders one of them, for
one source type, as the text lakecdc keeps in its images and the Spark type that holds it exactly;
:func:`codec_of` maps the character set names MySQL, Oracle and PostgreSQL use to Python codecs.

>>> datetime_text({"year": 2023, "month": 10, "day": 11, "hour": 8, "minute": 3, "second": 9})
('2023-10-11T08:03:09', 'timestamp')
>>> codec_of("utf8mb4"), codec_of("ZHS16GBK"), codec_of("latin1")
('utf-8', 'gbk', 'cp1252')
"""

from __future__ import annotations

import base64
import codecs
import datetime as dt
import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

from lakecdc.decode.avro.text import double_text
from lakecdc.decode.rows import RecordError

#: MySQL binlog type codes (``dataTypeNumber`` of MySQL sources) of integers that fit a bigint:
#: TINYINT, SMALLINT, INT, MEDIUMINT, YEAR; BIGINT and BIT may not (unsigned, 64 bits)
MYSQL_LONG = frozenset({1, 2, 3, 9, 13})
MYSQL_WIDE = frozenset({8, 16})
_STRING = T.StringType()
_BINARY = T.BinaryType()
_EPOCH = dt.datetime(1970, 1, 1)
_OFFSET = re.compile(r"^(?:GMT|UTC)?([+-])(\d{1,2})(?::?(\d{2}))?$")


# -- character sets ---------------------------------------------------------------------------------

#: Character set names of MySQL, Oracle and PostgreSQL -> Python codecs (lower case keys). MySQL's
#: ``latin1`` is Windows-1252; ``binary`` is handled apart (base64).
CHARSETS: dict[str, str] = {
    "utf8": "utf-8", "utf8mb3": "utf-8", "utf8mb4": "utf-8", "al32utf8": "utf-8", "unicode": "utf-8",
    "latin1": "cp1252", "ascii": "ascii", "us7ascii": "ascii", "sql_ascii": "ascii",
    "gbk": "gbk", "gb2312": "gb2312", "gb18030": "gb18030", "big5": "big5", "big5hkscs": "big5hkscs",
    "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be", "al16utf16": "utf-16-be",
    "sjis": "shift_jis", "cp932": "cp932", "ujis": "euc_jp", "eucjpms": "euc_jp", "euckr": "euc_kr",
    "latin2": "iso8859_2", "latin5": "iso8859_9", "latin7": "iso8859_13", "greek": "iso8859_7", "hebrew": "iso8859_8",
    "koi8r": "koi8_r", "koi8u": "koi8_u", "tis620": "tis_620", "macroman": "mac_roman", "macce": "mac_latin2",
    "cp1250": "cp1250", "cp1251": "cp1251", "cp1256": "cp1256", "cp1257": "cp1257", "cp850": "cp850",
    "cp852": "cp852", "cp866": "cp866",
    "zhs16gbk": "gbk", "zhs32gb18030": "gb18030", "zht16big5": "big5", "zht16mswin950": "cp950",
    "zht16hkscs": "big5hkscs", "we8iso8859p1": "latin-1", "we8iso8859p15": "iso8859_15", "we8mswin1252": "cp1252",
    "ee8iso8859p2": "iso8859_2", "ee8mswin1250": "cp1250", "cl8mswin1251": "cp1251", "cl8iso8859p5": "iso8859_5",
    "el8iso8859p7": "iso8859_7", "iw8iso8859p8": "iso8859_8", "ar8mswin1256": "cp1256", "ja16sjis": "shift_jis",
    "ja16euc": "euc_jp", "ko16mswin949": "cp949", "ko16ksc5601": "euc_kr", "th8tisascii": "tis_620",
    "euc_cn": "gb2312", "euc_jp": "euc_jp", "euc_kr": "euc_kr", "win1252": "cp1252", "win1251": "cp1251",
}
#: PostgreSQL's LATIN1 is ISO-8859-1 (MySQL's is Windows-1252)
_POSTGRES_CHARSETS = {"latin1": "latin-1"}


@functools.lru_cache(maxsize=256)
def codec_of(charset: str, source_type: str = "MySQL") -> str | None:
    """The Python codec for a DTS ``Character.charset`` (None when unknown; ``binary`` for bytes)."""
    name = charset.strip().lower()
    if name == "binary":
        return "binary"
    if source_type == "PostgreSQL" and name in _POSTGRES_CHARSETS:
        return _POSTGRES_CHARSETS[name]
    if name in CHARSETS:
        return CHARSETS[name]
    try:
        return codecs.lookup(name).name
    except LookupError:
        return None


# -- values --------------------------------------------------------------------------------------------


class ValueProblem(RecordError):
    """A column value that cannot be rendered (the message names only the value's problem)."""


@dataclass(frozen=True)
class Values:
    """Renders the image values of one source type as exact text, with their Spark type."""

    source_type: str = "MySQL"
    nanos: bool = False  # DateTime.millis holds nanoseconds (Oracle), else microseconds

    def render(self, kind: str, value: Any, type_number: int) -> tuple[Any, T.DataType | None]:
        """``(text or None or MISSING, Spark type or None)`` of one union member."""
        if kind == "Integer":
            return str(value["value"]), self._integer_type(type_number)
        if kind == "Decimal":
            return str(value["value"]), _decimal_type(value.get("precision"), value.get("scale"))
        if kind == "Float":
            return double_text(float(value["value"])), T.DoubleType()
        if kind == "Character":
            return self._character(value), (_BINARY if _is_binary(value) else _STRING)
        if kind in ("TextObject", "TextGeometry"):
            return str(value["value"]), _STRING
        if kind == "BinaryObject":
            return base64.b64encode(bytes(value["value"])).decode("ascii"), _BINARY
        if kind == "BinaryGeometry":  # WKB, kept as base64 text like Debezium's geometries
            return base64.b64encode(bytes(value["value"])).decode("ascii"), _STRING
        if kind == "Timestamp":
            return _timestamp_text(value["timestamp"], value.get("millis")), T.TimestampType()
        if kind == "DateTime":
            return self._datetime(value)
        if kind == "TimestampWithTimeZone":
            return self._zoned(value)
        raise ValueProblem("is not a DTS value kind")

    def text(self, kind: str, value: Any) -> Any:
        """The text (or None) of one union member: :meth:`render` without the type, for the rows
        (types are asked for once per input, text once per value)."""
        if kind == "Character":
            return self._character(value)
        if kind == "Integer" or kind == "Decimal":
            return str(value["value"])
        if kind == "DateTime":
            return datetime_text(value, nanos=self.nanos)[0]
        if kind == "Float":
            return double_text(float(value["value"]))
        if kind in ("TextObject", "TextGeometry"):
            return str(value["value"])
        if kind in ("BinaryObject", "BinaryGeometry"):
            return base64.b64encode(bytes(value["value"])).decode("ascii")
        if kind == "Timestamp":
            return _timestamp_text(value["timestamp"], value.get("millis"))
        if kind == "TimestampWithTimeZone":
            return self._zoned(value)[0]
        raise ValueProblem("is not a DTS value kind")

    def _integer_type(self, type_number: int) -> T.DataType:
        if self.source_type != "MySQL":
            return T.DecimalType(38, 0)
        return T.LongType() if type_number in MYSQL_LONG else T.DecimalType(20, 0)

    def _character(self, value: Mapping[str, Any]) -> str:
        charset = str(value.get("charset") or "")
        codec = codec_of(charset, self.source_type)
        data = bytes(value["value"])
        if codec is None:
            raise ValueProblem(f"charset '{charset}' is unknown (expected a MySQL, Oracle or PostgreSQL character set "
                              "such as utf8mb4, gbk, latin1, AL32UTF8, or a Python codec name)")
        if codec == "binary":
            return base64.b64encode(data).decode("ascii")
        try:
            return data.decode(codec)
        except UnicodeDecodeError as exc:
            raise ValueProblem(f"bytes {data[exc.start:exc.start + 4]!r} at byte {exc.start} are not valid in charset "
                              f"'{charset}' (Python codec {codec})") from None

    def _datetime(self, value: Mapping[str, Any]) -> tuple[str | None, T.DataType | None]:
        text, shape = datetime_text(value, nanos=self.nanos)
        if text is None:
            return None, None
        if shape in ("timestamp", "date") and _sub_micro(value, self.nanos):
            return text, _STRING
        return text, {"timestamp": T.TimestampNTZType(), "date": T.DateType(), "year": T.LongType()}.get(shape, _STRING)

    def _zoned(self, value: Mapping[str, Any]) -> tuple[str, T.DataType]:
        local = value.get("value") or {}
        text, shape = datetime_text(local, nanos=self.nanos)
        if text is None or shape != "timestamp":
            raise ValueProblem(f"without a date and time: {dict(local)}")
        zone = str(value.get("timezone") or "")
        offset = zone_offset(zone, local)
        return f"{text}{offset}", (_STRING if _sub_micro(local, self.nanos) else T.TimestampType())


def _is_binary(value: Mapping[str, Any]) -> bool:
    """A ``Character`` of the ``binary`` character set (MySQL BINARY/VARBINARY): bytes, not text."""
    return str(value.get("charset") or "").strip().lower() == "binary"


def _decimal_type(precision: Any, scale: Any) -> T.DataType:
    if isinstance(precision, int) and isinstance(scale, int) and 0 < precision <= 38 and 0 <= scale <= precision:
        return T.DecimalType(precision, scale)
    return _STRING


def _timestamp_text(seconds: int, micros: int | None) -> str:
    try:
        when = _EPOCH + dt.timedelta(seconds=seconds, microseconds=micros or 0)
    except OverflowError:
        raise ValueProblem(f"{seconds} seconds and {micros or 0} microseconds since 1970 are out of range") from None
    frac = f".{when.microsecond:06d}" if when.microsecond else ""
    return f"{when.year:04d}-{when:%m-%dT%H:%M:%S}{frac}Z"


def _fraction(frac: int | None, *, nanos: bool) -> str:
    if not frac:
        return ""
    frac = abs(frac)
    if frac >= (10**9 if nanos else 10**6):
        raise ValueProblem(f"millis {frac} is not a fraction of a second in {'nanoseconds' if nanos else 'microseconds'}")
    digits = f"{frac:09d}" if nanos else f"{frac:06d}"
    return "." + (digits[:6] if nanos and digits.endswith("000") else digits)


def _sub_micro(value: Mapping[str, Any], nanos: bool) -> bool:
    frac = value.get("millis")
    return nanos and isinstance(frac, int) and frac % 1000 != 0


def _clock(h: int, mi: int | None, s: int | None) -> str:
    return f"{abs(h):02d}:{abs(mi or 0):02d}:{abs(s or 0):02d}"


def datetime_text(value: Mapping[str, Any], *, nanos: bool = False) -> tuple[str | None, str]:
    """A DTS ``DateTime`` as ISO text of the pieces present, and its shape: ``timestamp``
    (``2023-10-11T08:33:28.123456``), ``date``, ``time`` (``-838:59:59``), ``year`` or ``other``."""
    get = value.get
    y, mo, d, h, mi, s, frac = get("year"), get("month"), get("day"), get("hour"), get("minute"), get("second"), get("millis")
    fraction = _fraction(frac, nanos=nanos)
    if y is not None and mo is not None and d is not None:  # DATE and DATETIME first: the common ones
        date = f"{'-' if y < 0 else ''}{abs(y):04d}-{abs(mo):02d}-{abs(d):02d}"
        return (date, "date") if h is None else (f"{date}T{_clock(h, mi, s)}{fraction}", "timestamp")
    if y is None and mo is None and d is None and h is None and mi is None and s is None and frac is None:
        return None, "null"
    if h is not None:
        negative = any(isinstance(v, int) and v < 0 for v in (h, mi, s, frac))
        return f"{'-' if negative else ''}{_clock(h, mi, s)}{fraction}", "time"
    if y is not None and mo is None and d is None:
        return str(y), "year"
    if y is not None and mo is not None:  # Oracle INTERVAL YEAR TO MONTH
        return f"{'-' if y < 0 or mo < 0 else ''}{abs(y)}-{abs(mo)}", "other"
    return json.dumps({k: v for k, v in value.items() if v is not None}, sort_keys=True), "other"


def zone_offset(zone: str, local: Mapping[str, Any]) -> str:
    """A ``TimestampWithTimeZone.timezone`` (``+08:00``, ``GMT+8``, ``UTC``, ``Asia/Shanghai``) as an
    ISO offset (``+08:00``, ``Z``) at the wall-clock time ``local``."""
    name = zone.strip()
    if name.upper() in ("UTC", "GMT", "Z", "+00:00"):
        return "Z"
    m = _OFFSET.match(name)
    if m:
        return f"{m.group(1)}{int(m.group(2)):02d}:{m.group(3) or '00'}"
    try:
        from zoneinfo import ZoneInfo

        info = ZoneInfo(name)
        when = dt.datetime(int(local["year"]), int(local["month"]), int(local["day"]), int(local.get("hour") or 0),
                           int(local.get("minute") or 0), int(local.get("second") or 0), tzinfo=info)
    except Exception:
        raise ValueProblem(f"time zone {zone!r} is neither an offset (+08:00) nor a known region (Asia/Shanghai)") from None
    offset = when.utcoffset() or dt.timedelta(0)
    minutes = int(offset.total_seconds()) // 60
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


__all__ = ["CHARSETS", "MYSQL_LONG", "MYSQL_WIDE", "ValueProblem", "Values", "codec_of", "datetime_text", "zone_offset"]
