"""kcat dumps: ``-K<sep>`` framing, in text (JSON values) and binary (Avro values) form.

kcat writes each record of ``-K<sep>`` as its key, the key separator, its value, then the message
delimiter (``-D``, default newline), with nothing escaped.

* **Text** (JSON values, one record a line): :data:`KEYED_LINE` tells a ``KEY<sep>{...}`` line
  whose key is plain text or a JSON object, as the JSON-source formats stage it
  (:func:`keyed_lines`, :func:`lakecdc.decode.files.staging.stage_keyed_lines`);
  :func:`split_key_value` reads such a line the way ``debezium-json``'s Python reader does, a
  null value (``NULL``, a tombstone) and JSON keys included. (The two tell lines apart
  differently: a JSON-object key the regular expression takes lazily, the reader only where it
  parses; each format keeps its own.)
* **Binary** (:func:`kcat_kv_records`): a binary value may hold the separator or the delimiter
  itself, so a record is not cut at them blindly; each value is measured instead.
"""

from __future__ import annotations

import json
import mmap
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, BinaryIO, NamedTuple

from lakecdc.decode.jsontext import loads
from lakecdc.decode.rows import RecordError
from lakecdc.errors import ConfigError

_PEEK_BYTES = 1 << 16

#: A kcat ``-K<sep>`` line: a key (plain text without braces or quotes, e.g. ``****``, or a JSON
#: object) and one separator (``^``, tab, ``|``, ``:``, ``;`` or ``,``) before the value's object.
KEYED_LINE = re.compile(r'^(?:[^{}\[\]"\r\n]+?|\{[^\r\n]*?\})[\^\t|:;,](?=\s*\{)')


def keyed_lines(path: str) -> bool:
    """Whether ``path`` is a kcat ``-K<sep>`` dump: its first non-blank line is ``KEY<sep>{...}``
    (and not a JSON value by itself)."""
    with open(path, "rb") as fh:
        head = fh.read(_PEEK_BYTES).decode("utf-8", errors="replace")
    first = head.lstrip().split("\n", 1)[0].strip()
    if KEYED_LINE.match(first) is None:
        return False
    try:
        json.loads(first)
    except ValueError:
        return True
    return False


#: Separators of kcat's ``-K<sep>`` key/value dumps recognised without being told.
KV_SEPARATORS = "^\t|:;,"
_KV_SPLIT = re.compile(r"[\^\t|:;,](?=\s*(?:\{|(?:NULL|null)?\s*$))")


def split_key_value(text: str, *, json_key: bool = False) -> tuple[str, str] | None:
    """``(key, value)`` of a kcat ``-K<sep>`` line (``KEY^{...}``): one of :data:`KV_SEPARATORS`
    followed by the value's JSON object, or by nothing (``NULL``: kcat's null value, a tombstone).
    The key is a plain text without braces or quotes (a
    placeholder such as ``****``, an id) or, with ``json_key``, the JSON text before the first
    separator where it parses; None when the line is no such pair."""
    for m in _KV_SPLIT.finditer(text):
        key = text[: m.start()]
        if not json_key:
            if any(c in key for c in '{["') or not key.strip() or key.lstrip().startswith(("//", "/*")):
                return None
            return key, text[m.end():]
        try:
            loads(key)
        except RecordError:
            continue
        return key, text[m.end():]
    return None


# -- binary values ----------------------------------------------------------------------------------

#: Where a binary message starting at a byte offset of an open file may end, most likely first
#: (several when the format has more than one schema); :class:`RecordError` saying why when no
#: message of the format starts there.
Measure = Callable[[BinaryIO, int], Sequence[int]]

#: What kcat writes for a null key or value with ``-Z``.
KCAT_NULL = b"NULL"
#: How far :func:`kcat_kv_records` looks for the next record after one it cannot read.
_RESYNC_TRIES = 4096
#: The most bytes of such a record the quarantine keeps.
_RAW_LIMIT = 1 << 16


def kcat_delimiter(text: str, option: str) -> bytes:
    """A kcat ``-K`` / ``-D`` delimiter as kcat reads it: text in which ``\\n``, ``\\t``,
    ``\\r`` and ``\\xNN`` (a byte in hex) stand for those bytes; ValueError naming ``option``
    when it is empty."""
    out = b""
    for i, part in enumerate(re.split(r"(\\x[0-9a-fA-F]{1,2}|\\[ntr])", text)):
        if i % 2 == 0:
            out += part.encode("utf-8")
        else:
            out += bytes([int(part[2:], 16)]) if part[1] == "x" else {"n": b"\n", "t": b"\t", "r": b"\r"}[part[1]]
    if not out:
        raise ValueError(f"{option} is empty: give the delimiter kcat was given (e.g. '^', '\\t', '\\x1f')")
    return out


#: The options of a kcat ``-K`` dump (:func:`kcat_kv_framing`), with their defaults.
KCAT_KV_OPTIONS = {"keySeparator": "", "messageDelimiter": "\\n"}


def kcat_kv_framing(name: str, framing: str, options: dict[str, str]) -> tuple[bytes, bytes] | None:
    """The key separator and message delimiter of kcat ``-K`` dumps when the decoder reads them
    (``framing=kcat-K``, or ``auto`` with ``keySeparator`` given), else None; ConfigError (naming
    the decoder ``name``) for ``kcat-K`` without a separator or a delimiter that says nothing."""
    given = options.get("keySeparator", "")
    if framing != "kcat-k" and not (framing == "auto" and given):
        return None
    if not given:
        raise ConfigError(f"{name}: framing=kcat-K needs keySeparator, the -K delimiter kcat wrote the dump with "
                          "(e.g. keySeparator=^, or \\t for a tab, \\xNN for a byte)")
    try:
        return (kcat_delimiter(given, "keySeparator"),
                kcat_delimiter(options.get("messageDelimiter") or "\\n", "messageDelimiter"))
    except ValueError as exc:
        raise ConfigError(f"{name}: {exc}") from None


class KcatRecord(NamedTuple):
    """One record of a binary kcat ``-K`` dump: its number and byte offset, its bytes (at most
    64 KiB of a bad one), key and value (None: none, or a tombstone), and why it cannot be read."""

    n: int
    offset: int
    raw: bytes
    key: bytes | None
    value: bytes | None
    error: str | None = None


def kcat_kv_records(path: str, separator: bytes, delimiter: bytes, measure: Measure, *,
                    key_measure: Measure | None = None) -> Iterator[KcatRecord]:
    """The records of a kcat ``-K<separator>`` dump of binary messages.

    kcat writes each record as its key's bytes, the key separator, the value's bytes, then the
    message delimiter (``-D``, default newline), with nothing escaped: a binary value may hold
    the separator or the delimiter itself, so a record is not cut at them blindly. Each value
    is measured instead: ``measure`` reads the message that starts after the separator (an
    Avro datum knows its own length) and the record ends where that message ends, when the
    delimiter (or the end of the file) follows. A key is measured the same way with
    ``key_measure`` when one is given and the key reads as such a message followed by the
    separator; otherwise the key is the text before the first separator (as kcat itself splits
    a line it produces from). An empty value, or kcat's ``NULL`` (``-Z``), is a null value (a
    tombstone); an empty or ``NULL`` key is no key.

    Each record comes as a :class:`KcatRecord` (``n``: its number in the dump).

    A record that cannot be read so (a value that does not read, or does not end at a
    delimiter) cannot tell where it ends: it is one record with ``error`` set (its byte offset
    and why), running to the first place after it where a record reads, or to the end of the
    file.
    """
    sep, delim = separator, delimiter
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        size = len(mm)

        def record(pos: int, strict: bool = False) -> tuple[bytes | None, bytes | None, int]:
            """``(key, value, end)`` of the record at ``pos``; RecordError saying why not (``strict``:
            also when a text key holds the message delimiter, as one does that starts inside a
            record)."""
            key_end = -1
            if key_measure is not None and mm[pos:pos + 1] == b"\0":
                try:
                    key_end = next((e for e in key_measure(fh, pos) if mm[e:e + len(sep)] == sep), -1)
                except RecordError:
                    key_end = -1
            if key_end < 0:
                key_end = mm.find(sep, pos)
                if key_end < 0:
                    raise RecordError(f"no key separator {sep!r} after byte offset {pos}")
                if strict and mm.find(delim, pos, key_end) >= 0:
                    raise RecordError("a text key holding the message delimiter")
            key = mm[pos:key_end]
            found = None if key in (b"", KCAT_NULL) else key
            at = key_end + len(sep)
            for null in (b"", KCAT_NULL):
                stop = at + len(null)
                if mm[at:stop] == null and (stop == size or mm[stop:stop + len(delim)] == delim):
                    return found, None, min(stop + len(delim), size)
            ends = measure(fh, at)
            # kcat ends every record with the delimiter: an end at the end of the file without it
            # (a cut dump) only when no end is followed by the delimiter
            for end in sorted(ends, key=lambda e: mm[e:e + len(delim)] != delim):
                if end == size or mm[end:end + len(delim)] == delim:
                    return found, mm[at:end], min(end + len(delim), size)
            raise RecordError(f"the value at byte offset {at} reads to byte {ends[0] if ends else at}, where no message "
                              f"delimiter {delim!r} follows: not a kcat -K dump with key separator {sep!r} and "
                              f"message delimiter {delim!r}")

        pos = n = 0
        while pos < size:
            try:
                key, value, end = record(pos)
            except RecordError as exc:
                end = _resync(record, mm, pos, delim)
                yield KcatRecord(n, pos, mm[pos:min(end, pos + _RAW_LIMIT)], None, None,
                              f"kcat -K record at byte offset {pos}: {exc}; bytes {pos}..{end} cannot be told apart "
                              "into records (the next record that reads starts there)" if end < size else
                              f"kcat -K record at byte offset {pos}: {exc}; bytes {pos}..{end} (the end of the file) "
                              "cannot be told apart into records")
            else:
                yield KcatRecord(n, pos, mm[pos:end], key, value)
            pos, n = end, n + 1


def _resync(record: Callable[[int, bool], Any], mm: mmap.mmap, pos: int, delim: bytes) -> int:
    """Where the first record that reads starts after a delimiter past ``pos``, its key a message
    or a text without the delimiter (the file's size when none does within :data:`_RESYNC_TRIES`
    delimiters)."""
    at = pos
    for _ in range(_RESYNC_TRIES):
        found = mm.find(delim, at + 1)
        if found < 0:
            break
        at = found
        start = found + len(delim)
        if start >= len(mm):
            break
        try:
            record(start, True)
        except RecordError:
            continue
        return start
    return len(mm)


__all__ = ["KCAT_KV_OPTIONS", "KCAT_NULL", "KEYED_LINE", "KV_SEPARATORS", "KcatRecord", "Measure", "kcat_delimiter",
           "kcat_kv_framing", "kcat_kv_records", "keyed_lines", "split_key_value"]
