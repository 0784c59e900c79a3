"""The options every Debezium decoder reads, and what they become (:class:`Settings`, picklable
for the executors): ``sequenceBy``, ``tableName``, ``unavailable.value.placeholder`` and
``topic.prefix``; the Debezium converter and connector properties that are accepted and change
nothing (:data:`IGNORED_OPTIONS`); the op letters of the envelope (:data:`OPS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lakecdc.decode.kafka.connect_values import placeholder_forms
from lakecdc.decode.spec import Images, Op, OpTable, Option, Ordering
from lakecdc.errors import ConfigError

UNAVAILABLE = "__debezium_unavailable_value"

#: The envelope's ``op`` -> canonical op (``m``, a logical-decoding message, is skipped).
OPS: dict[str, Op] = {"c": "I", "u": "U", "d": "D", "r": "R", "t": "T"}
#: What an unknown op's reason says was expected.
OP_LIST = "c, u, d, r, t"


@dataclass(frozen=True)
class Settings:
    """How records are read (from the decoder's options); picklable for the executors."""

    placeholders: frozenset[str] = frozenset({UNAVAILABLE, "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ=="})
    #: () = the connector's order; ("op_ts",) = default_seq; else names of the source map
    sequence_by: tuple[str, ...] = ()
    #: () = the connector's naming; else parts of ``source`` joined by "."
    table_name: tuple[str, ...] = ()
    topic_prefix: str | None = None


#: The Debezium options every Debezium decoder reads (see :func:`settings_from_options`).
SETTINGS_OPTIONS: dict[str, str] = {
    "sequenceBy": "auto",
    "tableName": "auto",
    "unavailable.value.placeholder": UNAVAILABLE,
    "topic.prefix": "",
}


def settings_from_options(decoder: str, options: Mapping[str, str]) -> Settings:
    """:class:`Settings` from a decoder's options (:data:`SETTINGS_OPTIONS`): ``sequenceBy``
    (``auto``, ``op_ts`` or a comma list of source map names), ``tableName`` (``auto`` or the
    ``source`` parts to join), ``unavailable.value.placeholder``, ``topic.prefix``.

    Raises ConfigError (naming ``decoder``) for an empty name in a list, or ``op_ts`` in a list.
    """
    def names(option: str) -> tuple[str, ...]:
        value = options.get(option, SETTINGS_OPTIONS[option]).strip()
        if value.lower() == "auto":
            return ()
        parts = tuple(p.strip() for p in value.split(","))
        if not all(parts):
            raise ConfigError(f"{decoder}: option {option}={value!r} has an empty name")
        if option == "sequenceBy" and "op_ts" in parts and parts != ("op_ts",):
            raise ConfigError(f"{decoder}: sequenceBy=op_ts stands alone (op_ts, pos, index); got {value!r}")
        if option == "tableName":
            parts = tuple(p for part in parts for p in part.split("."))
        return parts

    placeholder = options.get("unavailable.value.placeholder", UNAVAILABLE)
    return Settings(
        placeholders=placeholder_forms([placeholder]),
        sequence_by=names("sequenceBy"),
        table_name=names("tableName"),
        topic_prefix=options.get("topic.prefix", "").strip() or None,
    )


#: Debezium converter and connector properties that change nothing here: what they change is read
#: per record.
IGNORED_OPTIONS: frozenset[str] = frozenset(
    {
        "schemas.enable", "key.converter.schemas.enable", "value.converter.schemas.enable",
        "decimal.handling.mode", "time.precision.mode", "binary.handling.mode", "tombstones.on.delete",
        "provide.transaction.metadata", "include.schema.changes", "skipped.operations",
        "field.name.adjustment.mode", "schema.name.adjustment.mode", "format",
    }
)


#: Debezium's ops (the rows carry them canonical already: the table tells the letters and the
#: skipped logical-decoding message).
OP_TABLE = OpTable(OPS, skipped={"m": "message"})
#: What the Debezium decoders share of their spec: rows made in Python or in the SQL routes, each
#: with its own ``seq`` (the connector's order) or none (``default_seq``); a schema change keeps
#: its columns as an after image of NULLs (see :mod:`lakecdc.decode.debezium.envelope`).
IMAGES = Images(whole="always", skipped_after=True)
ORDERING = Ordering("given")
#: The options of :func:`~lakecdc.decode.debezium.settings.settings_from_options`.
SETTINGS = (
    Option("sequenceBy", "auto"), Option("tableName", "auto"),
    Option("unavailable.value.placeholder", UNAVAILABLE), Option("topic.prefix", ""),
)


__all__ = ["IGNORED_OPTIONS", "IMAGES", "OPS", "OP_LIST", "OP_TABLE", "ORDERING", "SETTINGS", "SETTINGS_OPTIONS", "UNAVAILABLE", "Settings", "settings_from_options"]
