"""Splits: one task's share of the input files, and the DataFrame that hands them to the executors.

The binary formats (Avro containers, Kafka message dumps) are read by Python in Spark's
executors: the driver plans the splits (reading only headers and length prefixes), then
:func:`splits_frame` makes one partition per split, without a shuffle, and a ``mapInArrow`` body
reads each split it is given (by its number in the plan).

* :class:`Split`: a file, what kind of input it is, the byte range and the number of its first
  record; a file that cannot be planned is one ``bad`` split whose ``note`` says why.
* :func:`split_bytes`: how large a split should be for a read of ``total`` bytes on ``cores``.
* :func:`kind_of`: how a Kafka message file is framed, from its first bytes and the ``framing``
  option.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import types as T

#: Upper bound of one task's share of a large file (OCF: cut at blocks; messages: at messages).
SPLIT_BYTES = 128 << 20
#: Splits are cut to spread a read over the cores, but not smaller than this.
MIN_SPLIT = 4 << 20


@dataclass(frozen=True)
class Split:
    """One task's share of the input."""

    path: str
    kind: str  # "ocf" | "messages" | "single" | "kcat" | "kcat-k" | "bad"
    start: int = 0
    end: int = 0
    first_row: int = 0
    keys: str | None = None  # an OCF file's keys file
    note: str | None = None
    limits: Any = None  # an OCF file's block limits (lakecdc.decode.avro.containers.BlockLimits); None: the defaults
    separator: bytes = b""  # a kcat -K dump's key delimiter
    delimiter: bytes = b"\n"  # a kcat -K dump's message delimiter (-D)


def split_bytes(total: int, cores: int, *, policy: Literal["rounds", "share", "ceil"] = "rounds") -> int:
    """The size to cut a read of ``total`` bytes into for ``cores`` cores, between
    :data:`MIN_SPLIT` and :data:`SPLIT_BYTES`.

    ``rounds`` (debezium-avro, dts-avro): a multiple of the cores' count of splits. ``share``
    (ogg-avro): the total over the cores, plus one byte. ``ceil`` (qlik-avro): the total over the
    cores, rounded up. (The three differ by a byte or by a round of splits; each format keeps the
    cut it had, since a cut moves the ``_block`` its records report.)
    """
    cores = max(cores, 1)
    if policy == "rounds":
        n = -(-total // (cores * SPLIT_BYTES)) or 1
        return max(MIN_SPLIT, -(-total // (cores * n)))
    share = total // cores + 1 if policy == "share" else -(-total // cores)
    return min(SPLIT_BYTES, max(MIN_SPLIT, share))


def first_byte(path: str) -> bytes:
    """The first byte of ``path`` that is not whitespace (within its first 64 bytes)."""
    with open(path, "rb") as fh:
        return fh.read(64).lstrip()[:1]


def kind_of(path: str, framing: str, *, kcat_kv: bool = False) -> str:
    """The split kind of a Kafka message file read with the ``framing`` option: as the option
    says (``length-prefixed``: ``messages``), else (``auto``) a kcat ``-J`` dump when it starts
    with ``{``, a kcat ``-K`` dump when the decoder was given its separator (``kcat_kv``), else
    length-prefixed messages."""
    if framing != "auto":
        return "messages" if framing == "length-prefixed" else framing
    if first_byte(path) == b"{":
        return "kcat"
    return "kcat-k" if kcat_kv else "messages"


def split_numbers(batches: Iterator[pa.RecordBatch]) -> Iterator[int]:
    """The split numbers (``id``) of a :func:`splits_frame` partition, in order."""
    for batch in batches:
        yield from batch.column("id").to_pylist()


def splits_frame(spark: SparkSession, splits: Sequence[Split], body: Callable[..., Iterator[pa.RecordBatch]],
                 schema: T.StructType | str, *, max_tasks: int | None = None, **kwargs: Any) -> DataFrame:
    """``body(batches, splits=splits, **kwargs)`` run over the split numbers, one partition per
    split (at most ``max_tasks`` partitions), made without a shuffle (adaptive execution would
    coalesce the partitions of a small shuffle into one task)."""
    n = len(splits)
    parts = max(n, 1) if max_tasks is None else max(min(n, max_tasks), 1)
    ids = spark.range(0, n, 1, numPartitions=parts)
    return ids.mapInArrow(functools.partial(body, splits=list(splits), **kwargs), schema)


__all__ = ["MIN_SPLIT", "SPLIT_BYTES", "Split", "first_byte", "kind_of", "split_bytes", "split_numbers", "splits_frame"]
