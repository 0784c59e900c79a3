"""Avro values as the exact text lakecdc keeps in its images, and the Spark types of Avro fields.

* **Text.** :func:`text_converter` renders an Avro value as the exact text lakecdc keeps in its
  images: ``long``/``int`` as digits, ``double`` as the shortest text that reads back to the same
  double (``17520.0``; ``NaN``, ``Infinity``, ``-Infinity``), ``float`` as the shortest text of
  the 32-bit value (``0.1``, not ``0.10000000149011612``), ``boolean`` as ``true``/``false``,
  ``decimal`` exactly in plain notation with its scale (``1.10``), ``bytes``/``fixed`` as base64,
  ``date`` as ``YYYY-MM-DD``, ``time-*`` as ``HH:MM:SS.ffffff``, ``timestamp-*`` (UTC) and
  ``local-timestamp-*`` as ``YYYY-MM-DD HH:MM:SS.ffffff``, ``uuid`` and ``enum`` as their text,
  records, arrays and maps as compact JSON text (inside which decimals, dates and bytes are JSON
  strings as above).
* **Types.** :func:`spark_type`: ``long`` bigint, ``int`` int, ``double``/``float`` double,
  ``boolean``, ``string``, ``decimal(p, s)`` exactly (as string when ``p > 38``); everything else
  (bytes, fixed, enums, dates, times, timestamps, records, arrays, maps, unions of several
  types) string.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
import struct
import uuid
from collections.abc import Callable
from typing import Any

from pyspark.sql import types as T


def _branches(avro_type: Any) -> list[Any]:
    """The non-null branches of a (possibly union) type."""
    if isinstance(avro_type, list):
        return [b for b in avro_type if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
    return [avro_type]


def _base(avro_type: Any) -> tuple[str, dict[str, Any]]:
    """``(type name, attributes)`` of a single (non-union) type."""
    if isinstance(avro_type, dict):
        inner = avro_type.get("type")
        if isinstance(inner, (dict, list)):
            return _base(inner)
        return str(inner), avro_type
    return str(avro_type), {}


def spark_type(avro_type: Any) -> T.DataType:
    """The Spark type of a column declared as ``avro_type`` (see the module docstring)."""
    branches = _branches(avro_type)
    if len(branches) != 1:
        return T.StringType()
    name, attrs = _base(branches[0])
    if attrs.get("logicalType") == "decimal" and name in ("bytes", "fixed"):
        precision, scale = int(attrs.get("precision", 0)), int(attrs.get("scale", 0))
        if 0 < precision <= 38 and 0 <= scale <= precision:
            return T.DecimalType(precision, scale)
        return T.StringType()
    if attrs.get("logicalType"):
        return T.StringType()
    return {
        "long": T.LongType(),
        "int": T.IntegerType(),
        "double": T.DoubleType(),
        "float": T.DoubleType(),
        "boolean": T.BooleanType(),
        "string": T.StringType(),
    }.get(name, T.StringType())


def _double_text(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def _float32_text(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return _double_text(v)
    # the shortest decimal text that reads back to the same 32-bit float
    for digits in range(1, 18):
        text = f"{v:.{digits}g}"
        if struct.unpack("<f", struct.pack("<f", float(text)))[0] == v:
            return repr(float(text))
    return repr(v)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, float):
        return v if math.isfinite(v) else _double_text(v)
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return value_text(v)


def value_text(v: Any) -> str | None:
    """Any decoded Avro value as text, by its Python type (``float`` as a double)."""
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _double_text(v)
    if isinstance(v, str):
        return v
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (bytes, bytearray)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return f"{v:%Y-%m-%d %H:%M:%S.%f}"
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, dt.time):
        return v.replace(tzinfo=None).isoformat(timespec="microseconds")
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(_jsonable(v), ensure_ascii=False, separators=(",", ":"))
    return str(v)


def text_converter(avro_type: Any) -> Callable[[Any], str | None]:
    """The function rendering values of a field declared as ``avro_type`` as exact text."""
    branches = _branches(avro_type)
    if len(branches) == 1:
        name, attrs = _base(branches[0])
        if name == "float" and not attrs.get("logicalType"):
            return lambda v: None if v is None else _float32_text(v)
    return value_text


def text_kind(avro_type: Any) -> str | None:
    """How :func:`text_converter` renders a field declared as ``avro_type``, when it is one of
    the plain cases fastavro decodes to a single Python type: ``"string"`` (the ``str`` itself),
    ``"integer"`` (``int`` as ``str(v)``), ``"double"`` (``float``, see :func:`value_text`),
    ``"boolean"``; None for anything else (use :func:`text_converter`)."""
    branches = _branches(avro_type)
    if len(branches) != 1:
        return None
    name, attrs = _base(branches[0])
    if attrs.get("logicalType"):
        return None
    return {"string": "string", "long": "integer", "int": "integer", "double": "double", "boolean": "boolean"}.get(name)


def double_text(v: float) -> str:
    """A ``double`` as exact text (what :func:`value_text` gives for a ``float``)."""
    return _double_text(v)


__all__ = ["double_text", "spark_type", "text_converter", "text_kind", "value_text"]
