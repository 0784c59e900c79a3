"""The values a setting accepts, and one parser for each.

Every parser takes a value as a user writes it (a keyword argument, a flag's text, a YAML scalar)
and returns it in the one form :class:`~lakecdc.config.settings.Settings` keeps; a value it does
not accept raises :class:`BadValue`, which knows the setting, the value and what is accepted, and
is reported from where the value came (``pk_update 'x'``, ``--pk-update 'x'``,
``job.yaml:4: pk_update: 'x'``): see :mod:`lakecdc.config.sources`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lakecdc.config.durations import parse_duration
from lakecdc.errors import ConfigError

#: What a primary-key update becomes (see semantics.md): a delete of the old key and an insert of
#: the new one, an update in place, or a stop of the run.
PkUpdate = Literal["abend", "update", "delete-insert"]
PK_UPDATE_MODES: tuple[str, ...] = get_args(PkUpdate)

#: 1: the table holds the current state of each key; 2: every version (SCD type 2 history).
ScdType = Literal[1, 2]
SCD_TYPES: tuple[int, ...] = get_args(ScdType)

#: The Delta engine a run merges with (``auto``: see :mod:`lakecdc.merge.pick`).
EngineName = Literal["auto", "delta-rs", "delta-spark"]
ENGINES: tuple[str, ...] = get_args(EngineName)

#: The types a ``sequence_by`` field may be compared as, over the column's own.
SEQ_KINDS: tuple[str, ...] = ("int", "ts", "str")


class BadValue(ConfigError):
    """A value a setting does not accept: the setting, the value and what it accepts.

    ``str()`` words it for a keyword argument (``pk_update 'x': use abend, ...``); :meth:`flag`
    for a flag, and :attr:`detail` (without the setting's name) for a YAML key that names it.
    """

    def __init__(self, setting: str, value: Any, accepted: str, *, table: str | None = None,
                 detail: str | None = None) -> None:
        self.setting, self.value, self.accepted, self.table = setting, value, accepted, table
        self.custom = detail
        super().__init__(self._named(setting))

    @property
    def detail(self) -> str:
        """The value and what is accepted, for a place that names the setting already."""
        return self.custom or f"{self.value!r}: use {self.accepted}"

    def _named(self, name: str) -> str:
        where = f" for table {self.table!r}" if self.table is not None else ""
        if self.custom:
            return f"{name}{where}: {self.custom}"
        return f"{name} {self.value!r}{where}: use {self.accepted}"

    def flag(self, flag: str) -> ConfigError:
        """The same mistake, worded for the flag that gave the value."""
        return ConfigError(self._named(flag))

    def for_table(self, table: str) -> BadValue:
        return BadValue(self.setting, self.value, self.accepted, table=table, detail=self.custom)


def name(value: Any, setting: str) -> str:
    """A name such as a format's (checked against its registry where it is used)."""
    if not isinstance(value, str) or not value.strip():
        raise BadValue(setting, value, "a name such as ogg-json")
    return value


def pk_update(value: Any, setting: str = "pk_update") -> PkUpdate:
    if value not in PK_UPDATE_MODES:
        raise BadValue(setting, value, ", ".join(PK_UPDATE_MODES))
    return value


def scd_type(value: Any, setting: str = "stored_as_scd_type") -> ScdType:
    """1 or 2, also written ``"1"`` or ``"2"`` (DLT's ``stored_as_scd_type`` takes both)."""
    if isinstance(value, bool) or str(value).strip() not in ("1", "2"):
        raise BadValue(setting, value, "1 (current state) or 2 (SCD type 2 history)")
    return int(str(value).strip())  # type: ignore[return-value]


def engine(value: Any, setting: str = "engine") -> Any:
    """An engine name, or an engine object (used as it is)."""
    if value is None:
        return "auto"
    if isinstance(value, str) and value not in ENGINES:
        raise BadValue(setting, value, ", ".join(ENGINES))
    return value


def duration(value: Any, setting: str) -> dt.timedelta:
    """A timedelta, or ``7d`` / ``36h`` / ``90m`` / ``45s`` / ``0``."""
    if isinstance(value, dt.timedelta):
        return value
    try:
        if isinstance(value, bool) or value is None:
            raise ConfigError(f"duration {value!r}: expected a number and a unit d/h/m/s, e.g. 7d or 36h")
        return parse_duration(str(value))
    except ConfigError as exc:
        raise BadValue(setting, value, "a duration such as 7d or 36h", detail=str(exc)) from None


def seconds(value: Any, setting: str) -> float:
    """A number of seconds (0 or more), or a duration (``30s``, ``5m``)."""
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
        return float(value)
    accepted = "a number of seconds, 0 or more, or a duration such as 30s"
    if isinstance(value, str):
        try:
            return seconds(float(value), setting)
        except (ValueError, BadValue):
            try:
                return parse_duration(value).total_seconds()
            except ConfigError as exc:
                raise BadValue(setting, value, accepted, detail=str(exc)) from None
    raise BadValue(setting, value, accepted)


def count(value: Any, setting: str, what: str = "tables") -> int:
    """A whole number, 1 or more."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadValue(setting, value, f"a number of {what}, 1 or more")
    return value


def flag(value: Any, setting: str) -> bool:
    if not isinstance(value, bool):
        raise BadValue(setting, value, "true or false")
    return value


def columns(value: Any, setting: str, *, table: str | None = None) -> tuple[str, ...]:
    """``["A", "B"]`` or ``"A,B"`` as column names (none empty)."""
    if isinstance(value, str):
        items: Sequence[Any] = value.split(",")
    elif isinstance(value, Sequence) and not isinstance(value, bytes):
        items = value
    else:
        raise BadValue(setting, value, "a list of column names, or 'A,B'", table=table)
    out = tuple(str(c).strip() for c in items)
    if not out or not all(out):
        raise BadValue(setting, value, "column names, none of them empty", table=table)
    return out


def patterns(value: Any, setting: str) -> tuple[str, ...]:
    """A table name pattern (``QASOURCE.*``, fnmatch) or a list of them."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, Sequence) or not all(isinstance(x, str) and x for x in items):
        raise BadValue(setting, value, "a pattern or a list of patterns such as QASOURCE.*")
    return tuple(items)


def string_map(value: Any, setting: str) -> dict[str, str]:
    """``{name: value}`` with text values (format options, storage options, table paths)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise BadValue(setting, value, "a mapping {NAME: VALUE}")
    return {str(k): str(v) for k, v in value.items()}


@dataclass(frozen=True)
class SeqField:
    """One field of a ``sequence_by`` list: ``op_ts``, ``pos``, ``source.<name>`` or a column."""

    name: str
    kind: str | None = None  # int / ts / str: compare as this type over the column's own

    def __str__(self) -> str:
        return f"{self.name}:{self.kind}" if self.kind else self.name

    @property
    def is_column(self) -> bool:
        return self.name not in ("op_ts", "pos") and not self.name.startswith("source.")


def parse_sequence_by(value: str | Sequence[str], *, what: str = "sequence_by") -> tuple[SeqField, ...]:
    """``"UPDATED_AT, source.scn:int"`` or ``["UPDATED_AT", "source.scn:int"]`` as fields."""
    accepted = "op_ts, pos, source.<name> or a column name, optionally followed by :int, :ts or :str"
    if not isinstance(value, (str, Sequence)):
        raise BadValue(what, value, f"a list of fields: {accepted}")
    items = value.split(",") if isinstance(value, str) else list(value)
    fields: list[SeqField] = []
    for raw in items:
        if isinstance(raw, SeqField):
            fields.append(raw)
            continue
        text = str(raw).strip()
        name, sep, kind = text.rpartition(":") if ":" in text else (text, "", "")
        name = name.strip()
        if not name or (sep and kind not in SEQ_KINDS) or name == "source.":
            raise BadValue(what, value, accepted, detail=f"{raw!r} is not a field; use {accepted}")
        fields.append(SeqField(name, kind or None))
    if not fields:
        raise BadValue(what, value, accepted, detail="empty; give one field or more (e.g. UPDATED_AT)")
    return tuple(fields)


def sequence(value: Any, setting: str = "sequence_by") -> tuple[SeqField, ...]:
    """:func:`parse_sequence_by` as a setting's parser."""
    return parse_sequence_by(value, what=setting)
