"""GoldenGate's JSON schema files (``<FULLY_QUALIFIED_TABLE>.schema.json``, seed 13.3.5): the
column names and declared types of the row formats (``ogg-json-row``, ``ogg-delimited``).

A JSON formatter writes one schema per table (op-modeled or row-modeled form); with
``versionSchemas=true`` one per version. lakecdc reads them from ``schemaDirectory``, from
``schemaFile`` (a comma-separated list), from among the inputs (``*.schema.json`` is never read
as data) and from beside the inputs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import types as T

from lakecdc.decode.spec import Option
from lakecdc.errors import ConfigError

#: Members of a row-modeled message that are not columns.
META_MEMBERS = ("table", "op_type", "op_ts", "current_ts", "pos", "primary_keys", "tokens")
SCHEMA_SUFFIX = ".schema.json"
#: ``number`` columns: 28 integer digits and 10 fraction digits, exact.
NUMBER_TYPE = T.DecimalType(38, 10)
#: lakecdc's options naming schema files: a directory of them, a comma-separated list.
SCHEMA_OPTIONS = (Option("schemaDirectory", ""), Option("schemaFile", ""))


@dataclass(frozen=True)
class TableSchema:
    """One ``<table>.schema.json``: the table's columns in order and their declared types."""

    table: str
    columns: tuple[str, ...]
    types: Mapping[str, T.DataType] = field(default_factory=dict)
    path: str = ""


def json_schema_type(spec: Mapping[str, Any]) -> T.DataType | None:
    """The Spark type for one column's JSON schema, None when it allows only ``null``.

    Understands ``"type": "string"``, ``"type": ["number", "null"]`` (the seed's form) and
    ``"oneOf"``/``"anyOf"`` lists of such alternatives.
    """
    kinds = _schema_kinds(spec) - {"null"}
    if not kinds:
        return None
    if kinds == {"integer"}:
        return T.LongType()
    if kinds <= {"integer", "number"}:
        return NUMBER_TYPE
    if kinds == {"boolean"}:
        return T.BooleanType()
    return T.StringType()


def _schema_kinds(spec: Mapping[str, Any]) -> set[str]:
    declared = spec.get("type")
    kinds = {declared} if isinstance(declared, str) else {str(k) for k in declared or ()}
    for alt in (*spec.get("oneOf", ()), *spec.get("anyOf", ())):
        if isinstance(alt, Mapping):
            kinds |= _schema_kinds(alt)
    return kinds


def read_table_schema(path: str) -> TableSchema:
    """Parse one GoldenGate JSON schema file (row-modeled or op-modeled form).

    The table is the schema's ``title`` (else the file name without ``.schema.json``); the
    columns are ``definitions.row.properties`` (op-modeled) or the top-level ``properties``
    other than the metadata members (row-modeled), in file order.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"JSON schema {path}: cannot be read: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"JSON schema {path}: expected an object at the top level")
    name = Path(path).name
    stem = name[: -len(SCHEMA_SUFFIX)] if name.endswith(SCHEMA_SUFFIX) else name
    table = str(doc.get("title") or stem)
    definitions = doc.get("definitions")
    row_def = definitions.get("row") if isinstance(definitions, dict) else None
    row = row_def.get("properties") if isinstance(row_def, dict) else None
    if isinstance(row, dict):
        props = row
    else:
        top = doc.get("properties", {})
        props = {k: v for k, v in top.items() if k not in META_MEMBERS} if isinstance(top, dict) else {}
    types = {}
    for col, spec in props.items():
        dtype = json_schema_type(spec) if isinstance(spec, Mapping) else None
        if dtype is not None:
            types[col] = dtype
    return TableSchema(table=table, columns=tuple(props), types=types, path=str(path))


def schema_files(directory: str, files: str, inputs: Iterable[str]) -> list[str]:
    """Schema files named by the options (a directory, a comma-separated list), found among the
    inputs, or lying beside them (GoldenGate writes ``<table>.schema.json`` next to its data files;
    a later run, whose inputs no longer include the schema files, still finds them there)."""
    out: list[str] = []
    if directory:
        d = Path(directory)
        if not d.is_dir():
            raise ConfigError(f"schemaDirectory {directory!r} is not a directory")
        out += sorted(str(p) for p in d.rglob(f"*{SCHEMA_SUFFIX}"))
    for f in (x.strip() for x in files.split(",")):
        if f:
            if not Path(f).is_file():
                raise ConfigError(f"schemaFile {f!r} does not exist")
            out.append(f)
    inputs = list(inputs)
    out += [f for f in inputs if f.endswith(SCHEMA_SUFFIX)]
    for folder in dict.fromkeys(os.path.dirname(os.path.abspath(f)) for f in inputs if "://" not in f):
        if os.path.isdir(folder):
            out += sorted(str(p) for p in Path(folder).glob(f"*{SCHEMA_SUFFIX}"))
    return list(dict.fromkeys(os.path.abspath(p) for p in out))


def load_table_schemas(paths: Iterable[str]) -> dict[str, list[TableSchema]]:
    """Schemas per table, oldest first (by modification time, then file name)."""
    found: dict[str, list[tuple[float, str, TableSchema]]] = {}
    for p in paths:
        schema = read_table_schema(p)
        found.setdefault(schema.table, []).append((os.path.getmtime(p), os.path.basename(p), schema))
    return {t: [s for *_, s in sorted(v, key=lambda x: (x[0], x[1]))] for t, v in found.items()}


def declared_types(schemas: Mapping[str, list[TableSchema]]) -> dict[str, dict[str, T.DataType]]:
    """Column types per table; a newer schema's type wins over an older one's."""
    out: dict[str, dict[str, T.DataType]] = {}
    for table, versions in schemas.items():
        types: dict[str, T.DataType] = {}
        for s in versions:
            types.update(s.types)
        out[table] = types
    return out


def data_files(files: Sequence[str]) -> list[str]:
    """The inputs that are messages, not ``*.schema.json`` files."""
    return [f for f in files if not f.endswith(SCHEMA_SUFFIX)]


def table_schemas(options: Mapping[str, str], files: Iterable[str]) -> dict[str, list[TableSchema]]:
    """The schemas per table (oldest first) that the options (:data:`SCHEMA_OPTIONS`) name or
    that lie among or beside ``files``."""
    return load_table_schemas(schema_files(options["schemaDirectory"], options["schemaFile"], files))


__all__ = [
    "META_MEMBERS", "NUMBER_TYPE", "SCHEMA_OPTIONS", "SCHEMA_SUFFIX", "TableSchema", "data_files",
    "declared_types", "json_schema_type", "load_table_schemas", "read_table_schema", "schema_files",
    "table_schemas",
]
