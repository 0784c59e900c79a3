"""Qlik Replicate table versions: what metadata (``MD``) messages say, and how a data message finds its own.

* :class:`TableVersion`: what a metadata message says about one version of a table (columns with
  ordinals and types, primary-key positions, the Avro ``dataSchema``), serialisable to one
  canonical JSON text (kept as a file per version in the decoder's state directory:
  :func:`load_state`, :func:`write_state`).
* :class:`Catalog`: every known version, by ``schemaId`` and by ``(table, version)``; finds the
  version a data (``DT``) message was written with, or says why it cannot (never guessed).
* :func:`spark_type`: a metadata column's Spark type.

The format itself is explained in :mod:`lakecdc.decode.qlik.decoders`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pyspark.sql import types as T

from lakecdc.decode.jsontext import compact_json
from lakecdc.decode.rows import Pairs, RecordError
from lakecdc.errors import ConfigError

_DIGITS = re.compile(r"[0-9]+")
#: column types whose values are bytes (JSON: hex digits; Avro: ``bytes``), typed binary
BINARY_TYPES = frozenset({"BYTES", "BLOB"})


class BadRecord(RecordError):
    """A record that cannot be decoded, with the table it belongs to when that is known."""

    def __init__(self, reason: str, table: str | None = None) -> None:
        super().__init__(reason)
        self.table = table



# -- metadata ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    """One column of a metadata message's ``tableStructure.tableColumns``."""

    name: str
    ordinal: int
    type: str
    length: int = 0
    precision: int = 0
    scale: int = 0
    key_position: int = 0
    nullable: bool | None = None


@dataclass(frozen=True)
class TableVersion:
    """One version of a table as its metadata message describes it."""

    table: str  # ``schema.table`` (just ``table`` when the lineage has no schema)
    version: int
    columns: tuple[Column, ...]  # by ordinal
    schema_id: str | None = None
    envelope_id: str | None = None  # the MD envelope's messageSchemaId, when it differs
    timestamp: str | None = None
    data_schema: str | None = None
    lineage: tuple[tuple[str, str], ...] = ()  # server, task, schema, table as written

    @cached_property
    def names(self) -> frozenset[str]:
        return frozenset(c.name for c in self.columns)

    @cached_property
    def keys(self) -> tuple[str, ...]:
        """Primary-key (or unique-index) columns in key position order."""
        return tuple(c.name for c in sorted((c for c in self.columns if c.key_position > 0), key=lambda c: c.key_position))

    @cached_property
    def top_ordinal(self) -> int:
        return max(c.ordinal for c in self.columns)

    @cached_property
    def mask_names(self) -> dict[int, list[str]]:
        """Masks met so far and their columns (:func:`lakecdc.decode.qlik.masks.mask_columns`; a version's messages repeat
        a few masks)."""
        return {}

    @cached_property
    def binary_columns(self) -> frozenset[str]:
        """Columns of a binary type (:data:`BINARY_TYPES`)."""
        return frozenset(c.name for c in self.columns if c.type in BINARY_TYPES)

    @cached_property
    def ordinal_mask(self) -> str:
        """The ordinals this version has, as a mask in hex (``0FFF`` for ordinals 1..12): what a
        ``columnMask``/``changeMask`` of its messages may set (``source['version_mask']``)."""
        bits = sum(1 << (c.ordinal - 1) for c in self.columns)
        return f"{bits:0{-(-bits.bit_length() // 8) * 2}X}"

    @property
    def layout(self) -> tuple[tuple[tuple[str, int], ...], tuple[str, ...]]:
        """What decoding a data message depends on: ordinals and keys."""
        return tuple((c.name, c.ordinal) for c in self.columns), self.keys

    def to_json(self) -> str:
        """Canonical JSON text (sorted members): equal versions give equal text."""
        body = {
            "table": self.table, "version": self.version, "schemaId": self.schema_id, "envelopeId": self.envelope_id,
            "timestamp": self.timestamp, "dataSchema": self.data_schema, "lineage": dict(self.lineage),
            "columns": [c.__dict__ for c in self.columns],
        }
        return json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> TableVersion:
        body = json.loads(text)
        return cls(
            table=body["table"], version=int(body["version"]), schema_id=body.get("schemaId"),
            envelope_id=body.get("envelopeId"), timestamp=body.get("timestamp"), data_schema=body.get("dataSchema"),
            lineage=tuple(sorted((body.get("lineage") or {}).items())),
            columns=tuple(Column(**c) for c in body["columns"]),
        )

    @cached_property
    def _digest(self) -> str:
        return hashlib.sha1(self.to_json().encode()).hexdigest()

    def digest(self) -> str:
        """SHA-1 of :meth:`to_json`: equal for equal versions."""
        return self._digest

    def sort_key(self) -> tuple[str, int, str, str]:
        return (self.table, self.version, self.timestamp or "", self.digest())


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _int(value: Any, what: str, default: int | None = None) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not _DIGITS.fullmatch(str(value).lstrip("-")):
        raise BadRecord(f"metadata message: {what} is not a whole number: {compact_json(value)}")
    return int(value)


def parse_metadata(body: Any, envelope_id: Any = None) -> TableVersion:
    """A metadata message's body (``schemaId``, ``lineage``, ``tableStructure``, ``dataSchema``)."""
    if not isinstance(body, Mapping):
        raise BadRecord("metadata message: the message is not an object")
    lineage = body.get("lineage")
    if not isinstance(lineage, Mapping):
        raise BadRecord("metadata message: 'lineage' missing (expected server, task, schema, table, tableVersion)")
    name = lineage.get("table")
    if not isinstance(name, str) or not name.strip():
        raise BadRecord("metadata message: 'lineage.table' missing or empty")
    schema = lineage.get("schema")
    table = f"{schema}.{name}" if isinstance(schema, str) and schema.strip() else name
    version = _int(lineage.get("tableVersion"), "'lineage.tableVersion'")
    structure = body.get("tableStructure")
    raw_columns = structure.get("tableColumns") if isinstance(structure, Mapping) else None
    if not isinstance(raw_columns, Mapping) or not raw_columns:
        raise BadRecord(f"metadata message of {table}: 'tableStructure.tableColumns' missing or empty", table)
    columns = [_column(col, spec, table) for col, spec in raw_columns.items()]
    ordinals = [c.ordinal for c in columns]
    if len(set(ordinals)) != len(ordinals) or min(ordinals) < 1:
        raise BadRecord(f"metadata message of {table}: column ordinals {sorted(ordinals)} are not distinct positive numbers", table)
    data_schema = body.get("dataSchema")
    if data_schema is not None and not isinstance(data_schema, str):
        data_schema = compact_json(data_schema)
    schema_id, env = _text(body.get("schemaId")), _text(envelope_id)
    return TableVersion(
        table=table, version=version, columns=tuple(sorted(columns, key=lambda c: c.ordinal)),
        schema_id=schema_id or None, envelope_id=env if env and env != schema_id else None,
        timestamp=_text(lineage.get("timestamp")), data_schema=data_schema or None,
        lineage=tuple(sorted((k, str(v)) for k, v in lineage.items() if k in ("server", "task", "schema", "table") and v is not None)),
    )


def _column(name: str, spec: Any, table: str) -> Column:
    if not isinstance(spec, Mapping):
        raise BadRecord(f"metadata message of {table}: column '{name}' is not an object", table)
    nullable = spec.get("nullable")
    return Column(
        name=name, ordinal=_int(spec.get("ordinal"), f"column '{name}' ordinal"),
        type=str(spec.get("type") or "").strip().upper(),
        length=_int(spec.get("length"), f"column '{name}' length", 0),
        precision=_int(spec.get("precision"), f"column '{name}' precision", 0),
        scale=_int(spec.get("scale"), f"column '{name}' scale", 0),
        key_position=_int(spec.get("primaryKeyPosition"), f"column '{name}' primaryKeyPosition", 0),
        nullable=nullable if isinstance(nullable, bool) else None,
    )

# -- spark types -----------------------------------------------------------------------------------


def spark_type(column: Column) -> T.DataType:
    """The Spark type of a column of a metadata message (see the mapping in :mod:`lakecdc.decode.qlik.decoders`)."""
    kind = column.type
    if kind in ("INT1", "INT2", "INT4", "INT8", "UINT1", "UINT2", "UINT4"):
        return T.LongType()
    if kind == "UINT8":
        return T.DecimalType(20, 0)
    if kind in ("NUMERIC", "DECIMAL"):
        p, s = column.precision, column.scale
        if 0 <= s <= 38 and 0 < p <= 38 and s <= p:
            return T.DecimalType(p, s)
        if p <= 0 and 0 <= s <= 38:  # no declared precision: the widest exact decimal of its scale
            return T.DecimalType(38, s)
        return T.StringType()  # more than 38 digits: exact text
    if kind in BINARY_TYPES:
        return T.BinaryType()
    return {
        "REAL4": T.FloatType(), "REAL8": T.DoubleType(), "BOOLEAN": T.BooleanType(),
        "DATE": T.DateType(), "DATETIME": T.TimestampNTZType(),
    }.get(kind, T.StringType())


# -- finding a data message's table version -------------------------------------------------------


@dataclass(frozen=True)
class DataMessage:
    """A data message's parts, values already text (``None`` for NULL)."""

    headers: Mapping[str, Any]
    data: Mapping[str, str | None] | None
    before: Mapping[str, str | None] | None
    schema_id: str | None = None  # the envelope's messageSchemaId
    named_table: str | None = None  # the message's own schema/table members
    topic: str | None = None
    key: str | None = None  # the Kafka key as text
    extra: Pairs = field(default_factory=list)  # kafka.* pairs
    hex_bytes: bool = False  # binary values are hex digits (JSON), not base64 already (Avro)

    def columns(self) -> frozenset[str]:
        return frozenset({*(self.data or {}), *(self.before or {})})


class Catalog:
    """Every known table version, and how data messages name theirs (see :mod:`lakecdc.decode.qlik.decoders`)."""

    def __init__(self, versions: Iterable[TableVersion], *, topic_tables: Mapping[str, str] | None = None,
                 default_table: str | None = None) -> None:
        self.versions = sorted(set(versions), key=TableVersion.sort_key)
        self.by_id: dict[str, TableVersion] = {}
        self.by_table: dict[str, dict[int, TableVersion]] = {}
        for v in self.versions:  # later (newer timestamp) definitions of one id or version win
            for ident in (v.schema_id, v.envelope_id):
                if ident:
                    self.by_id[ident] = v
            self.by_table.setdefault(v.table, {})[v.version] = v
        bare: dict[str, set[str]] = {}
        for t in self.by_table:
            bare.setdefault(t.rsplit(".", 1)[-1], set()).add(t)
        self.bare = {k: next(iter(v)) for k, v in bare.items() if len(v) == 1}
        self.topic_tables = dict(topic_tables or {})
        self.default_table = default_table

    def hint(self, m: DataMessage) -> str | None:
        """The table a message belongs to, as far as it can be told (for error reports)."""
        found = self.by_id.get(m.schema_id) if m.schema_id else None
        return found.table if found is not None else self.table_name(m)

    def table_name(self, m: DataMessage) -> str | None:
        """The table a message without a schema id names: its own members, then ``topicTables``,
        then a topic (or ``schema+table`` Kafka key) naming a known table, then ``table``."""
        if m.named_table:
            return m.named_table
        if m.topic and m.topic in self.topic_tables:
            return self.topic_tables[m.topic]
        for name in (m.topic, m.key.replace("+", ".", 1) if m.key and "+" in m.key else None):
            if name and name in self.by_table:
                return name
            if name and name in self.bare:
                return self.bare[name]
        return self.default_table

    def version_for(self, m: DataMessage) -> TableVersion:
        """The version a data message was written with; :class:`BadRecord` when it is not known."""
        hint = self.table_name(m)
        if m.schema_id:
            found = self.by_id.get(m.schema_id)
            if found is None:
                raise BadRecord(
                    f"messageSchemaId '{m.schema_id}' names no metadata message lakecdc knows, so its table and "
                    "version are unknown: give the MD message with that schemaId in the input, in an earlier run "
                    "into this target, or in metadataDirectory (the message is not decoded by guess)", hint)
            return found
        external = m.headers.get("externalSchemaId")
        if isinstance(external, str) and external in self.by_id:
            return self.by_id[external]
        if hint is None:
            raise BadRecord(
                "the data message names no table: no messageSchemaId (Replicate's envelope), no known "
                "externalSchemaId, no 'schema'/'table' members and no Kafka topic naming a known table; map "
                "topics with the option topicTables=TOPIC=SCHEMA.TABLE or name the table with table=SCHEMA.TABLE")
        versions = self.by_table.get(hint)
        if not versions:
            raise BadRecord(
                f"no metadata message known for table {hint} (no version of it): give its MD message in the input, "
                "in an earlier run into this target, or in metadataDirectory", hint)
        cols = m.columns()
        fits = [v for v in versions.values() if v.names == cols]
        known = ", ".join(str(n) for n in sorted(versions))
        if not fits:
            raise BadRecord(
                f"table {hint}: the message's version has no metadata (no known version, of {known}, has its "
                f"columns {', '.join(sorted(cols)) or 'none'}); the message names no version (no messageSchemaId)", hint)
        if len({v.layout for v in fits}) > 1:
            raise BadRecord(
                f"table {hint}: versions {', '.join(str(v.version) for v in fits)} have the message's columns but "
                "different ordinals or keys, and the message names no version (no messageSchemaId): have "
                "Replicate wrap messages in its envelope or include the externalSchemaId header", hint)
        return max(fits, key=lambda v: v.version)



def parse_topic_tables(text: str, fmt: str) -> dict[str, str]:
    """``topicTables`` (``topic=SCHEMA.TABLE,topic2=SCHEMA.TABLE2``) as a dict."""
    out: dict[str, str] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        topic, sep, table = part.partition("=")
        if not sep or not topic.strip() or not table.strip():
            raise ConfigError(f"{fmt}: topicTables entry {part!r} is not TOPIC=SCHEMA.TABLE")
        out[topic.strip()] = table.strip()
    return out



# -- what a target keeps across runs -------------------------------------------------------------------


def state_file_name(tv: TableVersion) -> str:
    """``<table>.v<version>.<digest>.json``: one file per distinct metadata (same content, same name)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", tv.table)[:100]
    return f"{safe}.v{tv.version}.{tv.digest()[:16]}.json"


def load_state(directory: str | None) -> list[TableVersion]:
    """The table versions kept in ``directory`` by earlier runs (none when it does not exist)."""
    if not directory or not Path(directory).is_dir():
        return []
    return [TableVersion.from_json(p.read_text(encoding="utf-8")) for p in sorted(Path(directory).glob("*.json"))]


def write_state(directory: str | None, versions: Iterable[TableVersion]) -> None:
    """Keep ``versions`` in ``directory``: idempotent (a file is written once, atomically)."""
    if not directory:
        return
    root = Path(directory)
    for tv in versions:
        path = root / state_file_name(tv)
        if path.exists():
            continue
        root.mkdir(parents=True, exist_ok=True)
        tmp = root / f".{path.name}.{os.getpid()}.tmp"
        tmp.write_text(tv.to_json(), encoding="utf-8")
        os.replace(tmp, path)


__all__ = [
    "BINARY_TYPES", "BadRecord", "Catalog", "Column", "DataMessage", "TableVersion", "load_state", "parse_metadata",
    "parse_topic_tables", "spark_type", "state_file_name", "write_state",
]
