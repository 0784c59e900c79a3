"""Source timestamps read as instants, the same way whatever the session's time zone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F

from lakecdc.spark.conf import conf_value

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Names of the UTC zone a session may give (``spark.sql.session.timeZone``).
UTC_ZONES = frozenset({"UTC", "ETC/UTC", "Z", "GMT", "ETC/GMT", "UCT", "ETC/UCT", "ZULU", "ETC/ZULU",
                       "UNIVERSAL", "ETC/UNIVERSAL", "+00:00", "GMT0", "ETC/GMT0", "ETC/GMT+0", "ETC/GMT-0"})


def session_is_utc(spark: SparkSession) -> bool:
    """Whether ``spark`` reads a time without a zone as UTC (its session time zone is UTC, as in
    lakecdc's own sessions). A cast takes the zone when its DataFrame is made, not when it runs."""
    return (conf_value(spark, "spark.sql.session.timeZone") or "").strip().upper() in UTC_ZONES


def parse_op_ts(text: Column, *, utc_session: bool = False) -> Column:
    """A source timestamp string (``2015-11-05 18:45:36.000000`` or ISO-8601) read as UTC.

    A string without a zone is read as UTC explicitly (``Z`` appended), so a notebook whose
    session time zone differs still reads the same instant; a string with its own zone keeps it.
    With ``utc_session`` (:func:`session_is_utc` of the session making the DataFrame) the string
    is cast as it is: the session reads a time without a zone as UTC already, and the ``Z`` would
    cost a zone lookup per value.
    """
    if utc_session:
        return text.try_cast("timestamp")
    return F.coalesce(F.concat(text, F.lit("Z")).try_cast("timestamp"), text.try_cast("timestamp"))


__all__ = ["UTC_ZONES", "parse_op_ts", "session_is_utc"]
