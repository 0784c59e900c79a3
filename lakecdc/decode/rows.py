"""What every Python-side reader of the decoders shares: the pairs of an image, the error of one
record, and the marker of a value that is not there.

Readers running in Spark's Python workers (``mapInArrow`` bodies, pandas UDFs) turn one record
into one row; a record that cannot be read raises :class:`RecordError`, whose message becomes the
quarantine reason, and never fails the batch.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator
from typing import Any

from pyspark.sql import types as T

from lakecdc.changes.events import IMAGE_TYPE

#: An image (or a source map) as ``(name, text)`` pairs, in the order the record gives them.
Pairs = list[tuple[str, str | None]]


class RecordError(Exception):
    """A record that cannot be decoded; the message is the quarantine reason."""


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


#: A column value that is not there (an unavailable-value placeholder, a masked column): left out
#: of its image, where NULL is kept as a NULL value.
MISSING: Any = _Missing()

#: The rows Python readers return, one per record (``x_op_ts``: microseconds since 1970): the origin
#: columns, then the canonical row's parts.
ROW_SCHEMA = T.StructType(
    [
        T.StructField("_file", T.StringType()),
        T.StructField("_block", T.LongType()),
        T.StructField("_row", T.LongType()),
        T.StructField("x_table", T.StringType()),
        T.StructField("x_op", T.StringType()),
        T.StructField("x_op_ts", T.LongType()),
        T.StructField("x_pos", T.StringType()),
        T.StructField("x_seq", T.StringType()),
        T.StructField("x_txid", T.StringType()),
        T.StructField("x_keys", T.ArrayType(T.StringType())),
        T.StructField("x_before", IMAGE_TYPE),
        T.StructField("x_after", IMAGE_TYPE),
        T.StructField("x_source", T.MapType(T.StringType(), T.StringType())),
        T.StructField("x_error", T.StringType()),
    ]
)


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off meanwhile (a ``mapInArrow`` body decoding one batch).

    Decoding allocates millions of small acyclic objects (freed by reference counting) while a
    batch of rows is held; the collector's passes over them cost about a third of the decoding
    (measured on the Debezium benchmark, JSON and Avro alike). Keep it off only while a batch is
    built, not while Spark holds the generator suspended.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


__all__ = ["MISSING", "ROW_SCHEMA", "Pairs", "RecordError", "gc_paused"]
