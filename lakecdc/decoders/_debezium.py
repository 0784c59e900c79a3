"""The names ``dts-avro`` still takes from here until it moves to ``lakecdc.decode.alibaba``:
the vendor-neutral rows of :mod:`lakecdc.decode.rows`. Delete with that move."""

from lakecdc.decode.rows import Row, failed, skipped

__all__ = ["Row", "failed", "skipped"]
