"""Durations, sizes and triggers as written in flags, job files and data contracts.

One parser each, shared by the CLI, job files (:mod:`lakecdc.jobs`), data contracts
(:mod:`lakecdc.check.contracts`) and streams (:mod:`lakecdc.streaming`); a value that does not
parse is a :class:`~lakecdc.errors.ConfigError` saying what was expected.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from lakecdc.errors import ConfigError


def parse_duration(text: str) -> dt.timedelta:
    """``7d``, ``36h``, ``90m``, ``45s`` or ``0`` as a timedelta.

    >>> parse_duration("36h")
    datetime.timedelta(days=1, seconds=43200)
    """
    units = {"d": "days", "h": "hours", "m": "minutes", "s": "seconds"}
    value = text.strip().lower()
    if value == "0":
        return dt.timedelta(0)
    if len(value) < 2 or value[-1] not in units or not value[:-1].replace(".", "", 1).isdigit():
        raise ConfigError(f"duration {text!r}: expected a number and a unit d/h/m/s, e.g. 7d or 36h")
    return dt.timedelta(**{units[value[-1]]: float(value[:-1])})


def parse_size(text: str) -> int:
    """``128MB``, ``1GB``, ``512KB`` or a number of bytes as bytes (binary units).

    >>> parse_size("128MB")
    134217728
    """
    units = {"KB": 2**10, "MB": 2**20, "GB": 2**30, "B": 1}
    value = text.strip().upper().replace("IB", "B")
    for unit, factor in units.items():
        if value.endswith(unit) and value[: -len(unit)].strip().replace(".", "", 1).isdigit():
            return int(float(value[: -len(unit)]) * factor)
    if value.isdigit():
        return int(value)
    raise ConfigError(f"size {text!r}: expected a number with KB, MB or GB, e.g. 128MB")


_UNITS = {"ms": 0.001, "millisecond": 0.001, "s": 1, "sec": 1, "second": 1, "m": 60, "min": 60,
          "minute": 60, "h": 3600, "hour": 3600}


def parse_trigger(trigger: str | dt.timedelta) -> dict[str, Any]:
    """The keyword of ``DataStreamWriter.trigger`` for a lakecdc trigger.

    ``available-now``: every file there now, in one or more batches (``max_files_per_trigger``),
    then stop; ``once``: every file there now in one batch, then stop (Spark deprecates it in
    favour of available-now); ``"10 seconds"``, ``"5 minutes"``, ``"30s"`` or a timedelta: a batch
    every interval, for as long as the query runs.

    >>> parse_trigger("available-now")
    {'availableNow': True}
    >>> parse_trigger("90s")
    {'processingTime': '90000 milliseconds'}
    """
    if isinstance(trigger, dt.timedelta):
        seconds = trigger.total_seconds()
    else:
        text = trigger.strip().lower()
        if text in ("available-now", "available_now", "availablenow"):
            return {"availableNow": True}
        if text == "once":
            return {"once": True}
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([a-z]+)", text)
        unit = m.group(2) if m else ""
        if unit not in _UNITS and unit.endswith("s"):
            unit = unit[:-1]  # seconds, mins, hours
        if not m or unit not in _UNITS:
            raise ConfigError(
                f"trigger {trigger!r}: use available-now, once, or a processing-time interval "
                "such as '10 seconds', '5 minutes' or '30s'"
            )
        seconds = float(m.group(1)) * _UNITS[unit]
    if seconds < 0:
        raise ConfigError(f"trigger {trigger!r}: the interval cannot be negative")
    return {"processingTime": f"{round(seconds * 1000)} milliseconds"}
