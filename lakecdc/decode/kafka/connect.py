"""Fast exact JSON for ``debezium-json``: msgspec parsing, each distinct Connect schema parsed once.

Decoding a Debezium JSON line used to cost most of its time in Python's ``json`` module: with
``schemas.enable=true`` every line repeats the envelope's Kafka Connect schema (about 80% of the
bytes of a typical line), which was parsed again for every record. Two things make it cheap:

* :func:`loads` parses with `msgspec <https://jcristharif.com/msgspec/>`_ (several times faster
  than ``json``), keeping the exactness the decoder needs: a number with a fraction or exponent
  keeps its text (``float_hook=Num``: ``3.140`` stays ``3.140``), an integer is a Python ``int``
  (exact at any size; :func:`~lakecdc.decoders._kafka_connect.column_text` writes it back as its
  digits). On anything msgspec refuses (invalid JSON, the ``NaN``/``Infinity`` tokens Jackson may
  write, lone surrogates, deep nesting) it falls back to
  :func:`~lakecdc.decoders.debezium_json.parse_json` (the ``json`` module: the same values, the
  same error message).
* :class:`ConnectSplitter` reads a compact ``{"schema":...,"payload":...}`` line (what the
  JSON converter writes) as its two texts: the schema text is the key of a small cache of parsed
  schemas with their ``before``/``after`` readers (:func:`~lakecdc.decoders._debezium.image_readers`),
  so only the payload is parsed per record. A line of any other shape (spaces after the colons,
  the members in another order, more members) is parsed whole, as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from lakecdc.decoders._debezium import Images, Settings, image_readers
from lakecdc.decoders._kafka_connect import Num, RecordError

_DECODER = msgspec.json.Decoder(float_hook=Num)
_HEAD = '{"schema":'
_MID = ',"payload":'
#: Distinct schema texts kept per reader (a topic has a few versions; many tables: a few dozen).
CACHE_LIMIT = 256


def slow_loads(text: str | bytes, what: str = "record") -> Any:
    """JSON with every number kept as its exact text (:class:`Num`), by the ``json`` module."""
    try:
        return json.loads(text, parse_int=Num, parse_float=Num, parse_constant=Num)
    except json.JSONDecodeError as exc:
        raise RecordError(f"{what} is not valid JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise RecordError(f"{what} is nested too deeply") from None


def loads(text: str | bytes, what: str = "record") -> Any:
    """JSON with exact numbers (fractions as :class:`Num` text, integers as ``int``); raises
    :class:`RecordError` (the ``json`` module's message) for text that is no JSON."""
    try:
        return _DECODER.decode(text)
    except Exception:  # msgspec refuses it: json says why (or reads NaN, lone surrogates)
        return slow_loads(text, what)


class ConnectSplitter:
    """Reads compact Kafka Connect JSON pairs, parsing each distinct schema text once."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.schemas: dict[str, tuple[Mapping[str, Any] | None, Images | None]] = {}

    def split(self, text: str) -> tuple[Any, Mapping[str, Any] | None, Images | None] | None:
        """``(payload, schema, images)`` of a ``{"schema":...,"payload":...}`` line (``schema``
        None when it is not an object), or None when ``text`` has another shape or the fast
        parse fails (the caller parses it whole then)."""
        if not text.startswith(_HEAD):
            return None
        mid = text.find(_MID)
        if mid < 0:
            return None
        return self.split_payload(text[:mid], text[mid + len(_MID) :])

    def split_cut(self, prefix: str, rest: str) -> tuple[Any, Mapping[str, Any] | None, Images | None] | None:
        """:meth:`split` of a line Spark cut after ``prefix`` (one of :func:`connect_prefixes`)."""
        return self.split_payload(prefix[: -len(_MID)], rest)

    def split_payload(self, head: str, rest: str) -> tuple[Any, Mapping[str, Any] | None, Images | None] | None:
        """:meth:`split` of a line in two parts: ``head`` (up to, not including, the first
        ``,"payload":``) and ``rest`` (what follows it)."""
        end = rest.rfind("}")
        if end < 0 or (end + 1 < len(rest) and rest[end + 1 :].strip()):
            return None
        known = self.schemas.get(head)
        try:
            payload = _DECODER.decode(rest[:end])
            if known is None:
                known = self._learn(head, _DECODER.decode(head[len(_HEAD) :]))
        except Exception:  # a '"payload"' inside the schema, NaN, ...: parse it whole
            return None
        return payload, known[0], known[1]

    def _learn(self, head: str, schema: Any) -> tuple[Mapping[str, Any] | None, Images | None]:
        if len(self.schemas) >= CACHE_LIMIT:
            self.schemas.clear()
        known = (schema, image_readers(schema, self.settings)) if isinstance(schema, dict) else (None, None)
        self.schemas[head] = known
        return known


def connect_head(first: str | None) -> str | None:
    """The schema part of a compact ``{"schema":...,"payload":...}`` line (what :meth:`ConnectSplitter.split`
    keys its cache by), None for a line of another shape."""
    if first is None or not first.startswith(_HEAD) or _MID not in first:
        return None
    return first[: first.find(_MID)]


def connect_prefixes(firsts: Iterable[str | None], limit: int = 16) -> list[str]:
    """The distinct ``head + ',"payload":'`` prefixes of the files' first lines (at most ``limit``).

    With ``schemas.enable=true`` every line repeats its Connect schema: most of its bytes. A line
    that starts with a known prefix is sent to Python as the prefix's index and the text after it
    (see :func:`lakecdc.decoders.debezium_json.DebeziumJsonDecoder.read`), so the schema is neither
    copied into Arrow nor across to the Python worker again for each record.
    """
    out: list[str] = []
    for first in firsts:
        head = connect_head(first)
        if head is not None and head + _MID not in out and len(out) < limit:
            out.append(head + _MID)
    return out

