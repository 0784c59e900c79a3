"""What every Python-side reader of the decoders shares: the row of one record, the pairs of an
image, the error of one record, the marker of a value that is not there, and how such rows become
canonical events.

Readers running in Spark's Python workers (``mapInArrow`` bodies, pandas UDFs) turn one record
into one :class:`Row` (the ``x_*`` columns of :data:`ROW_SCHEMA`); a record that cannot be read
raises :class:`RecordError`, whose message becomes the quarantine reason, and never fails the
batch. A decoder then hands those rows to the one projection with :func:`rows_parts`.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import IMAGE_TYPE, default_seq
from lakecdc.decode.checks import Check
from lakecdc.decode.event import Parts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

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


class Row(NamedTuple):
    """One decoded record, as the ``x_*`` columns of :data:`ROW_SCHEMA` (in this order).

    ``op`` is canonical (``I``/``U``/``D``/``T``/``R``), None for a skipped or bad record;
    ``op_ts``: microseconds since 1970; ``seq``: the vendor's own order, None for
    ``default_seq(op_ts, pos, 0)``; ``source`` holds ``("skipped", kind)`` for a skipped record.
    """

    table: str | None = None
    op: str | None = None
    op_ts: int | None = None
    pos: str | None = None
    seq: str | None = None
    txid: str | None = None
    keys: list[str] | None = None
    before: Pairs | None = None
    after: Pairs | None = None
    source: Pairs | None = None
    error: str | None = None


def skipped(kind: str, *, table: str | None = None, extra: Sequence[tuple[str, str | None]] = ()) -> Row:
    """A record that is no row change (a tombstone, a heartbeat, a DDL, ...): counted by the
    pipeline as ``skipped:<kind>`` (per ``table`` when known), never applied, never quarantined.
    ``extra``: more ``source`` entries (Kafka metadata, the DDL text)."""
    return Row(table=table, source=[("skipped", kind), *extra])


def failed(reason: str, *, table: str | None = None) -> Row:
    """A record that cannot be decoded: quarantined with ``reason`` (under ``table`` when known)."""
    return Row(table=table, error=reason)


def rows_parts(rows: DataFrame, *, op_ts: Column | None = None, idx: Column | None = None,
               seq: Column | None = None, ordered: Column | None = None,
               checks: Sequence[Check] = ()) -> Parts:
    """What the :data:`ROW_SCHEMA` rows of ``rows`` are, for :func:`lakecdc.decode.event.project`
    (with ``Ordering("given")``: ``seq`` is the row's own, else ``default_seq(op_ts, pos, idx)``).

    A row's ``x_error`` is its first check, then ``checks``; a skipped row's kind is its
    ``source['skipped']``; a skipped row that names keys and has a time (a schema change naming
    the primary key) is ordered too. A vendor whose rows say some part otherwise (a time as text,
    an index in the transaction) gives that part's column: ``op_ts``, ``idx``, ``seq``,
    ``ordered``. ``raw``: the ``_raw`` column when ``rows`` has one (binary formats).
    """
    ts = F.timestamp_micros(F.col("x_op_ts")) if op_ts is None else op_ts
    pos = F.col("x_pos")
    if seq is None:
        seq = F.coalesce(F.col("x_seq"), default_seq(ts, pos, F.lit(0) if idx is None else idx))
    if ordered is None:
        ordered = F.col("x_keys").isNotNull() & ts.isNotNull()
    error = F.col("x_error")
    source = F.col("x_source")
    return Parts(
        table=F.col("x_table"), op=F.col("x_op"), op_ts=ts, pos=pos, idx=idx, seq=seq,
        txid=F.col("x_txid"), keys=F.col("x_keys"), before=F.col("x_before"), after=F.col("x_after"),
        source=source, skipped=source["skipped"], ordered=ordered,
        checks=[(error.isNotNull(), error), *checks],
        raw=F.col("_raw") if "_raw" in rows.columns else None,
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


__all__ = ["MISSING", "ROW_SCHEMA", "Pairs", "RecordError", "Row", "failed", "gc_paused", "rows_parts", "skipped"]
