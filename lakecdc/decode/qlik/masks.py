"""Qlik Replicate's ``columnMask`` and ``changeMask``: each rule once, with its Python and its SQL evaluator.

A mask is one hexadecimal number, most significant digit first, whose bit ``ordinal - 1`` stands
for the column of that ordinal (JSON writes hex text, Avro the same number as bytes). A column whose
``columnMask`` bit is 0 was not captured: it is left out of the images (missing, not NULL);
``changeMask`` only names ``source['changed_columns']``. A mask of an odd number of digits has a
leading 0 implied (``B`` is ``0B``), missing high digits are 0, a null or empty mask means every
column; a bit above the version's last ordinal, or a digit that is not hex, makes the message bad.

* Python (the reader of every odd line and of ``qlik-avro``): :func:`parse_mask`,
  :func:`mask_columns`, :func:`masks`, :func:`mask_text`;
* SQL (``qlik-json``'s common lines, :mod:`lakecdc.decode.qlik.sql`): :func:`mask_bits`,
  :func:`mask_readable`, :class:`VersionMasks` (images without the absent columns, the names a
  mask lists), for versions of at most :data:`MAX_ORDINAL` ordinals.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from lakecdc.decode.jsontext import Num, compact_json
from lakecdc.decode.qlik.catalog import BadRecord, TableVersion

_HEX = re.compile(r"[0-9A-Fa-f]+")
_MASKS_KEPT = 4096  # distinct masks remembered per table version
#: Ordinals a mask is decoded for in SQL (15 hex digits: a long); wider versions are Python's.
MAX_ORDINAL = 60
_MASK_DIGITS = 15


# -- Python ------------------------------------------------------------------------------------------


def parse_mask(value: Any, name: str) -> int | None:
    """A ``changeMask``/``columnMask`` as a number; None when absent (null or empty).

    JSON gives hex text (``"00FFFF"``), Avro bytes (``b"\\x00\\xff\\xff"``): both are one number
    written most significant digit (byte) first. Hex text of any length is read: an odd number of
    digits has a leading 0 implied (``"B"`` and ``"0B"`` are the same mask), as missing high digits
    are 0 (``"FF"`` in a 16-column table marks ordinals 1..8).
    """
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big") if value else None
    if not isinstance(value, str) or isinstance(value, Num):
        raise BadRecord(f"'{name}' is not a hex string: {compact_json(value)}")
    text = value.strip()
    if not text:
        return None
    if not _HEX.fullmatch(text):
        raise BadRecord(f"'{name}' '{value}' is not hexadecimal (expected hex digits, e.g. '0B')")
    return int(text, 16)  # any number of digits: an odd count has its leading 0 implied ('B' = '0B')


def mask_text(value: Any) -> str | None:
    """How a mask is shown in ``source``: hex text (Avro bytes as upper-case hex)."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex().upper()
    return None if value is None else str(value)


def mask_columns(mask: int, tv: TableVersion, name: str, raw: Any) -> list[str]:
    """The columns whose bit is set (bit ``ordinal - 1``), in ordinal order.

    A bit above the last ordinal means the message was not written with this version.
    """
    known = tv.mask_names.get(mask)
    if known is not None:
        return known
    if mask >> tv.top_ordinal:
        raise BadRecord(
            f"'{name}' '{mask_text(raw)}' marks ordinal {mask.bit_length()}, but {tv.table} version {tv.version} "
            f"has {len(tv.columns)} column(s): the message was not written with that metadata", tv.table)
    found = [c.name for c in tv.columns if mask >> (c.ordinal - 1) & 1]
    if len(tv.mask_names) < _MASKS_KEPT:
        tv.mask_names[mask] = found
    return found



def masks(h: Mapping[str, Any], tv: TableVersion) -> tuple[list[str] | None, list[str] | None]:
    """(present columns, changed columns) by ``columnMask`` / ``changeMask`` (None: no mask)."""
    out: list[list[str] | None] = []
    for name in ("columnMask", "changeMask"):
        raw = h.get(name)
        try:
            bits = parse_mask(raw, name)
        except BadRecord as exc:
            raise BadRecord(str(exc), tv.table) from None
        out.append(mask_columns(bits, tv, name, raw) if bits is not None else None)
    return out[0], out[1]


# -- SQL ---------------------------------------------------------------------------------------------


def mask_bits(text: Column, top: int) -> tuple[Column, Column]:
    """(the mask as a long, whether it is one SQL reads: hex digits, any number of them (an odd
    count has a leading 0 implied), no bit above ``top``): :func:`parse_mask` and the check of
    :func:`mask_columns` for a version whose last ordinal is ``top`` (at most :data:`MAX_ORDINAL`)."""
    n = F.length(text)
    low = F.when(n > _MASK_DIGITS, F.substring(text, -_MASK_DIGITS, _MASK_DIGITS)).otherwise(text)
    high_zero = F.when(n > _MASK_DIGITS, F.substring(text, 1, 1 << 20).rlike(f"^0*[0-9A-Fa-f]{{{_MASK_DIGITS}}}$"))
    value = F.conv(low, 16, 10).cast("long")
    ok = (
        text.rlike("^[0-9A-Fa-f]+$") & F.coalesce(high_zero, F.lit(True))
        & (F.shiftright(value, top) == 0)
    )
    return value, ok


def mask_readable(text: Column) -> Column:
    """Whether SQL may read a mask's text. The file source gives a JSON number's digits as
    text too, and the Python reader refuses a mask that is no string: a mask whose text could be
    a number (digits, the first not 0; hex masks are written with their leading zeros) goes to
    the Python reader, which tells. (Read as a variant, its type would say: at a fifth of the
    decode's time.)"""
    first = F.substring(text, 1, 1)
    return text.isNull() | ~((first >= "1") & (first <= "9") & text.rlike("^[0-9]+$"))


def _bit(value: Column, ordinal: int) -> Column:
    return (F.shiftright(value, ordinal - 1) % 2) == 1


def _empty() -> Column:
    return F.array().cast("array<string>")


class VersionMasks:
    """The SQL of one table version's masks (its last ordinal at most :data:`MAX_ORDINAL`)."""

    def __init__(self, tv: TableVersion) -> None:
        self.tv = tv
        self.names = [c.name for c in tv.columns]
        self.ordinals = [c.ordinal for c in tv.columns]

    def image(self, image: Column, col: Column) -> Column:
        """``image`` (its keys are this version's names, in order) without the columns whose
        ``columnMask`` bit is 0 (``col`` NULL: no mask, every column present): what
        :func:`masks` keeps in Python."""
        values = F.map_values(image)
        everything = (1 << self.tv.top_ordinal) - 1
        keys = F.concat(*[F.when(_bit(col, o), F.array(F.lit(n))).otherwise(_empty())
                          for n, o in zip(self.names, self.ordinals, strict=True)])
        kept = F.concat(*[F.when(_bit(col, o), F.array(values[i])).otherwise(_empty())
                          for i, o in enumerate(self.ordinals)])
        full = col.isNull() | ((col.bitwiseAND(F.lit(everything))) == F.lit(sum(1 << (o - 1) for o in self.ordinals)))
        return F.when(image.isNull(), image).when(full, image).otherwise(F.map_from_arrays(keys, kept))

    def listed(self, value: Column) -> Column:
        """The names whose bit is set, comma-separated, in ordinal order ('' when none): what
        :func:`mask_columns` lists in Python."""
        return F.concat_ws(",", *[F.when(_bit(value, o), F.lit(n)) for n, o in zip(self.names, self.ordinals, strict=True)])


__all__ = ["MAX_ORDINAL", "VersionMasks", "mask_bits", "mask_columns", "mask_readable", "mask_text", "masks", "parse_mask"]
