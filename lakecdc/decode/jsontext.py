"""Exact JSON text: parsing that keeps every number as written, and writing values back.

* :func:`loads` parses with `msgspec <https://jcristharif.com/msgspec/>`_ (several times faster
  than ``json``), keeping the exactness the decoders need: a number with a fraction or exponent
  keeps its text (``float_hook=Num``: ``3.140`` stays ``3.140``), an integer is a Python ``int``
  (exact at any size). On anything msgspec refuses (invalid JSON, the ``NaN``/``Infinity`` tokens
  Jackson may write, lone surrogates, deep nesting) it falls back to :func:`slow_loads` (the
  ``json`` module: the same values, the same error message).
* :func:`slow_loads` parses with the ``json`` module, every number (integers too) as :class:`Num`.
* :func:`compact_json`, :func:`plain_text` and :func:`json_image` write values back, numbers as
  they were read.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import msgspec

from lakecdc.decode.rows import Pairs, RecordError


class Num(str):
    """A JSON number's exact text (``3.140`` stays ``3.140``)."""

    __slots__ = ()


#: The msgspec decoder :func:`loads` uses (exposed for readers that parse parts of a line).
DECODER = msgspec.json.Decoder(float_hook=Num)


def slow_loads(text: str | bytes, what: str = "record") -> Any:
    """JSON with every number kept as its exact text (:class:`Num`), by the ``json`` module;
    :class:`~lakecdc.decode.rows.RecordError` naming ``what`` for text that is no JSON."""
    try:
        return json.loads(text, parse_int=Num, parse_float=Num, parse_constant=Num)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise RecordError(f"{what} is nested too deeply") from None


def loads(text: str | bytes, what: str = "record") -> Any:
    """JSON with exact numbers (fractions as :class:`Num` text, integers as ``int``); raises
    :class:`~lakecdc.decode.rows.RecordError` (the ``json`` module's message) for text that is no JSON."""
    try:
        return DECODER.decode(text)
    except Exception:  # msgspec refuses it: json says why (or reads NaN, lone surrogates)
        return slow_loads(text, what)


def compact_json(value: Any) -> str:
    """``value`` as compact JSON, numbers written as they were read (:class:`Num`)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, Num):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (bytes, bytearray)):
        return json.dumps(base64.b64encode(value).decode("ascii"))
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k), ensure_ascii=False)}:{compact_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(compact_json(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def plain_text(value: Any) -> str | None:
    """A scalar as text (strings as they are, numbers as written, booleans ``true``/``false``);
    objects and arrays as compact JSON."""
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return Num(repr(value) if isinstance(value, float) else str(value))
    return compact_json(value)


def json_image(pairs: Pairs | None) -> str | None:
    """An image as a JSON object, numbers (:class:`Num`) as numbers (for type inference)."""
    if pairs is None:
        return None
    parts = []
    for k, v in pairs:
        value = "null" if v is None else (str(v) if isinstance(v, Num) else json.dumps(v, ensure_ascii=False))
        parts.append(f"{json.dumps(k, ensure_ascii=False)}:{value}")
    return "{" + ",".join(parts) + "}"


__all__ = ["DECODER", "Num", "compact_json", "json_image", "loads", "plain_text", "slow_loads"]
