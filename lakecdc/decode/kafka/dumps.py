"""Files of length-prefixed messages: each message preceded by its length, 4 bytes big-endian.

What ``kafka-console-consumer``-style dumps and GoldenGate's Avro message files hold.
:func:`iter_length_prefixed` streams the messages of a file from a byte offset (a truncated one at
the end comes with its reason); :func:`length_prefixed_splits` cuts a large file at message
boundaries for the executors, reading only the prefixes.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

_PREFIX = struct.Struct(">I")
#: A Confluent wire-format message's header: the magic byte 0 and the 4-byte schema id.
WIRE_HEADER = 5


@dataclass(frozen=True)
class Frame:
    """One message of a file: where it starts, its bytes, and why it is bad (None when whole)."""

    offset: int
    payload: bytes
    error: str | None = None


def iter_length_prefixed(fo: BinaryIO, start: int = 0) -> Iterator[Frame]:
    """Messages each preceded by its length as 4 bytes, big-endian (streamed, not read whole)."""
    fo.seek(start)
    offset = start
    while True:
        head = fo.read(4)
        if not head:
            return
        if len(head) < 4:
            yield Frame(offset, head, f"truncated length prefix: {len(head)} of 4 bytes at the end of the file")
            return
        (n,) = _PREFIX.unpack(head)
        payload = fo.read(n)
        if len(payload) < n:
            yield Frame(offset, payload, f"truncated: the length prefix gives {n} bytes, only {len(payload)} remain")
            return
        yield Frame(offset, payload)
        offset += 4 + n


def length_prefixed_splits(path: str, split_bytes: int, key_ids: frozenset[int] = frozenset()) -> list[tuple[int, int, int]]:
    """``(start, end, first message number)`` of a length-prefixed file cut into about
    ``split_bytes``, at message boundaries (only the prefixes are read).

    Files up to ``split_bytes`` are one split; a split always starts at a length prefix, and the
    last one runs to the end of the file (so a truncated message at the end is in it). ``key_ids``:
    schema ids of Confluent wire-format record keys; a split never starts between a key message
    and the value after it.
    """
    size = os.path.getsize(path)
    if size <= split_bytes:
        return [(0, size, 0)]
    out: list[tuple[int, int, int]] = []
    start = first = pos = n = 0
    after_key = False
    unpack = _PREFIX.unpack_from
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        while pos + 4 <= size:
            if pos - start >= split_bytes and not after_key:
                out.append((start, pos, first))
                start, first = pos, n
            (length,) = unpack(mm, pos)
            body = pos + 4
            after_key = bool(key_ids) and (length >= WIRE_HEADER and body + WIRE_HEADER <= size and mm[body] == 0
                                           and unpack(mm, body + 1)[0] in key_ids)
            pos = body + length
            n += 1
    out.append((start, size, first))
    return out


__all__ = ["WIRE_HEADER", "Frame", "iter_length_prefixed", "length_prefixed_splits"]
