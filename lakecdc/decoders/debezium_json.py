"""What ``dts-avro`` still takes from here until it moves to ``lakecdc.decode.alibaba``: its
``x_*`` rows as canonical events, through the one projection. Delete with that move."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakecdc.decode.event import project
from lakecdc.decode.rows import rows_parts
from lakecdc.decode.spec import Images, OpTable, Ordering, VendorSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_ROWS = VendorSpec(name="dts-avro", ops=OpTable({}), images=Images(skipped_after=True), ordering=Ordering("given"))


def canonical(parsed: DataFrame, *extra: str) -> DataFrame:
    """``parsed``'s ``x_*`` rows as canonical events (``extra``: ``_offset``, ``_raw`` of binary input)."""
    spec = VendorSpec(name=_ROWS.name, ops=_ROWS.ops, images=_ROWS.images, ordering=_ROWS.ordering, binary=bool(extra))
    return project(parsed, rows_parts(parsed), spec)


__all__ = ["canonical"]
