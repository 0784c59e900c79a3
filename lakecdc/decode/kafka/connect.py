"""Kafka Connect JSON values: the ``{"schema": ..., "payload": ...}`` envelope, each distinct schema
text parsed once.

With ``schemas.enable=true`` the JSON converter writes every value as its Connect schema and its
payload; the schema text is repeated on every line (about 80% of the bytes of a typical
Debezium line), so parsing it again for every record would cost most of the decoding time.

* :func:`unwrap_connect` tells a parsed envelope from a bare value.
* :class:`ConnectSplitter` reads a compact ``{"schema":...,"payload":...}`` line (what the JSON
  converter writes) as its two texts: the schema text is the key of a small cache of parsed
  schemas with the image readers a format makes from them (given to the splitter as a function),
  so only the payload is parsed per record. A line of any other shape (spaces after the colons,
  the members in another order, more members) is left to the caller, who parses it whole.
* :func:`connect_prefixes` names the distinct schema prefixes of some files' first lines, which
  a reader cuts off its lines before they cross to Python (see :func:`ConnectSplitter.split_cut`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from lakecdc.decode.jsontext import DECODER

_HEAD = '{"schema":'
_MID = ',"payload":'
#: Distinct schema texts kept per reader (a topic has a few versions; many tables: a few dozen).
CACHE_LIMIT = 256

#: What a format makes of one Connect schema to read its payloads (Debezium: the before and after
#: image readers).
Readers = TypeVar("Readers")


def unwrap_connect(value: Any) -> tuple[Any, Mapping[str, Any] | None]:
    """``(payload, schema)`` of a Kafka Connect JSON value (``{"schema", "payload"}``) or a bare one."""
    if isinstance(value, dict) and "payload" in value and "schema" in value and len(value) == 2:
        schema = value["schema"]
        return value["payload"], schema if isinstance(schema, dict) else None
    return value, None


class ConnectSplitter(Generic[Readers]):
    """Reads compact Kafka Connect JSON pairs, parsing each distinct schema text once.

    ``readers``: what is made once per distinct schema (an object schema) and handed back with
    each payload of that schema.
    """

    def __init__(self, readers: Callable[[Mapping[str, Any]], Readers]) -> None:
        self.readers = readers
        self.schemas: dict[str, tuple[Mapping[str, Any] | None, Readers | None]] = {}

    def split(self, text: str) -> tuple[Any, Mapping[str, Any] | None, Readers | None] | None:
        """``(payload, schema, readers)`` of a ``{"schema":...,"payload":...}`` line (``schema``
        None when it is not an object), or None when ``text`` has another shape or the fast
        parse fails (the caller parses it whole then)."""
        if not text.startswith(_HEAD):
            return None
        mid = text.find(_MID)
        if mid < 0:
            return None
        return self.split_payload(text[:mid], text[mid + len(_MID) :])

    def split_cut(self, prefix: str, rest: str) -> tuple[Any, Mapping[str, Any] | None, Readers | None] | None:
        """:meth:`split` of a line a reader cut after ``prefix`` (one of :func:`connect_prefixes`)."""
        return self.split_payload(prefix[: -len(_MID)], rest)

    def split_payload(self, head: str, rest: str) -> tuple[Any, Mapping[str, Any] | None, Readers | None] | None:
        """:meth:`split` of a line in two parts: ``head`` (up to, not including, the first
        ``,"payload":``) and ``rest`` (what follows it)."""
        end = rest.rfind("}")
        if end < 0 or (end + 1 < len(rest) and rest[end + 1 :].strip()):
            return None
        known = self.schemas.get(head)
        try:
            payload = DECODER.decode(rest[:end])
            if known is None:
                known = self._learn(head, DECODER.decode(head[len(_HEAD) :]))
        except Exception:  # a '"payload"' inside the schema, NaN, ...: parse it whole
            return None
        return payload, known[0], known[1]

    def _learn(self, head: str, schema: Any) -> tuple[Mapping[str, Any] | None, Readers | None]:
        if len(self.schemas) >= CACHE_LIMIT:
            self.schemas.clear()
        known = (schema, self.readers(schema)) if isinstance(schema, dict) else (None, None)
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
    (see :func:`lakecdc.decode.files.lines.read_lines`), so the schema is neither copied into
    Arrow nor across to the Python worker again for each record.
    """
    out: list[str] = []
    for first in firsts:
        head = connect_head(first)
        if head is not None and head + _MID not in out and len(out) < limit:
            out.append(head + _MID)
    return out


__all__ = ["CACHE_LIMIT", "ConnectSplitter", "connect_head", "connect_prefixes", "unwrap_connect"]
