"""Why a record is bad, worded once for every format.

A check is ``(bad, reason)``: a condition that is true for a bad record and the reason (a text, or
a column quoting the offending value). A decoder lists its checks in the order it wants them told
(:attr:`lakecdc.decode.event.Parts.checks`); the record's ``_error`` is the reason of the first
failing one (:func:`first_error`). The builders here give the reasons every format shares, naming
the vendor's members the way its :class:`~lakecdc.decode.spec.Names` says; a reason only one
format has stays a plain ``(bad, reason)`` of its own.
"""

from __future__ import annotations

from typing import TypeAlias

from pyspark.sql import Column
from pyspark.sql import functions as F

from lakecdc.decode.spec import OpTable

Check: TypeAlias = tuple[Column, Column | str]


def first_error(*checks: Check) -> Column:
    """The reason of the first failing check, NULL when all pass (NULL when there are none)."""
    out: Column | None = None
    for bad, reason in checks:
        reason_col = F.lit(reason) if isinstance(reason, str) else reason
        out = F.when(bad, reason_col) if out is None else out.when(bad, reason_col)
    if out is None:
        return F.lit(None).cast("string")
    return out.otherwise(F.lit(None).cast("string"))


def _where(bad: Column, where: Column | None) -> Column:
    return bad if where is None else where & bad


def bad_json(corrupt: Column, wrong_type: str = "") -> Check:
    """The record is not JSON (``corrupt`` not NULL: the reader's corrupt-record column).
    ``wrong_type``: what the members should have been, when a member of the wrong type also
    makes the reader give up the record."""
    reason = "not valid JSON"
    if wrong_type:
        reason += f", or a member of the wrong type (expected {wrong_type})"
    return corrupt.isNotNull(), reason


def missing(value: Column, what: str, *, where: Column | None = None) -> Check:
    """``'<what>' missing or empty``: ``value`` is NULL (give an empty name as NULL, e.g. with
    :func:`blank_as_null`). ``where``: only records for which it holds are checked."""
    return _where(value.isNull(), where), f"'{what}' missing or empty"


def op_missing(text: Column, what: str, *, where: Column | None = None) -> Check:
    """``'<what>' missing``: the record has no op text."""
    return _where(text.isNull(), where), f"'{what}' missing"


def refused(reason: Column) -> Check:
    """The op text is one the format refuses (``reason``: the third value of :meth:`OpTable.sql`)."""
    return reason.isNotNull(), reason


def unknown_op(text: Column, known: Column, ops: OpTable, what: str, *, where: Column | None = None) -> Check:
    """``unknown <what> '<text>' (expected ...)``: ``known`` is false (or NULL): the op table has
    no entry for ``text`` (e.g. ``OpTable.code(text).isNotNull()``)."""
    bad = ~F.coalesce(known, F.lit(False))
    return _where(bad, where), F.format_string(f"unknown {what} '%s' ({_expected(ops)})", text)


def unknown_op_text(text: str, ops: OpTable, what: str) -> str:
    """:func:`unknown_op`'s reason for one text in Python."""
    return f"unknown {what} '{text}' ({_expected(ops)})"


def _expected(ops: OpTable) -> str:
    return f"expected {ops.expected}"


def bad_time(ts: Column, text: Column, what: str, *, where: Column | None = None) -> Check:
    """``'<what>' missing or not a timestamp: '<text>'``: the parsed time ``ts`` is NULL."""
    return _where(ts.isNull(), where), F.format_string(
        f"'{what}' missing or not a timestamp: '%s'", F.coalesce(text, F.lit("")))


def image_missing(bad: Column, member: str, what: str, text: Column, expected: str) -> Check:
    """``'<member>' missing for <what> '<text>' (expected <expected>)``: an op that needs an image
    (``bad``: it has none)."""
    return bad, F.format_string(f"'{member}' missing for {what} '%s' (expected {expected})", text)


def blank_as_null(text: Column) -> Column:
    """``text``, NULL when it is empty or only blanks."""
    return F.when(F.trim(text) != "", text)


__all__ = [
    "Check", "bad_json", "bad_time", "blank_as_null", "first_error", "image_missing", "missing",
    "op_missing", "refused", "unknown_op", "unknown_op_text",
]
