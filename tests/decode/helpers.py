"""What the decoder tests share: the registry of formats, decoding files to events, and an event
as one line of compact text.

``FORMATS`` is the only place the tests name where the registry lives: when it moves, change the
import below and nothing else.

Example::

    events = decode(spark, "canal-json", [path])
    assert [brief(e) for e in events] == ["I db.t 00000000000000000001/0 after={id='1', v='a'}"]
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from pyspark.sql import functions as F

import lakecdc
from lakecdc.decode import DECODERS as _REGISTRY

#: Every registered format name, sorted.
FORMATS: tuple[str, ...] = tuple(sorted(_REGISTRY))


def decode(spark: Any, fmt: str, paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
           **options: str) -> list[Any]:
    """Decode ``paths`` with ``lakecdc.read_changes`` as format ``fmt`` (``options`` are the
    format's options) and return every record, good and bad, in arrival order: by file, then
    record (``_block``, ``_row``), then index inside the message. Each row also has
    ``_op_ts_us``: ``op_ts`` as microseconds since 1970 UTC, whatever the session's time zone."""
    inputs = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    df = lakecdc.read_changes([str(p) for p in inputs], format=fmt, options=options, spark=spark)
    df = df.withColumn("_op_ts_us", F.unix_micros("op_ts"))
    return df.orderBy("_file", "_block", "_row", "idx").collect()


def _image(name: str, image: Mapping[str, Any] | None) -> str | None:
    if image is None:
        return None
    return f"{name}={{{', '.join(f'{k}={image[k]!r}' for k in sorted(image))}}}"


_EPOCH = datetime(1970, 1, 1)


def _utc(micros: int) -> str:
    return f"{_EPOCH + timedelta(microseconds=micros):%Y-%m-%d %H:%M:%S.%f}"


def brief(row: Any, *, detail: bool = False) -> str:
    """One decoded record as compact text, the same for every format.

    * a row change: ``OP table pos/idx [before={...}] [after={...}]`` with the images' columns
      sorted (a missing column is absent, a NULL one ``=None``; an absent image is not shown);
    * a skipped record: ``~ table kind`` (``-`` for a record that names no table);
    * a bad record: ``! table reason``. Nothing else of a bad record is shown (its op and images
      are not part of the contract: they may be NULL or what the decoder could read).

    ``detail`` adds to a row change what else the event says: ``ts=`` its ``op_ts`` (UTC; needs
    the ``_op_ts_us`` of :func:`decode`), ``keys=`` and ``tx=`` (each when given).
    """
    table = row["table"] or "-"
    if row["_error"] is not None:
        return f"! {table} {row['_error']}"
    source = row["source"] or {}
    if source.get("skipped") is not None:
        return f"~ {table} {source['skipped']}"
    parts = [row["op"] or "-", table, f"{row['pos']}/{row['idx']}"]
    parts += [text for name in ("before", "after") if (text := _image(name, row[name])) is not None]
    if detail:
        fields = row.asDict() if hasattr(row, "asDict") else dict(row)
        if fields.get("_op_ts_us") is not None:
            parts.append(f"ts={_utc(fields['_op_ts_us'])}")
        if fields.get("keys"):
            parts.append(f"keys={','.join(fields['keys'])}")
        if fields.get("txid") is not None:
            parts.append(f"tx={fields['txid']}")
    return " ".join(parts)


def briefs(rows: Iterable[Any], *, detail: bool = False) -> list[str]:
    """:func:`brief` of every record, in the given order."""
    return [brief(r, detail=detail) for r in rows]
