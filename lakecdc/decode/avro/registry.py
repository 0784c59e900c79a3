"""Writer schemas by schema id: a schema directory or schema-registry export, references resolved.

**The schema directory** (option ``schemaDirectory``, a directory or one JSON file) maps the
schema id of each Confluent wire-format message to its writer schema: ``<id>.avsc`` files (the
schema whose id is the file name), and schema-registry exports: ``*.json`` files each holding
what ``curl $REGISTRY/subjects/<subject>/versions/<version>`` returns (``{"subject", "version",
"id", "schema": "<the schema as JSON text>", "references": [...]}``), a list of such objects
(``curl $REGISTRY/schemas``), or ``{"schema": ...}`` as ``/schemas/ids/<id>`` returns it, in a file
named ``<id>.json``. Non-Avro entries (``schemaType`` JSON/PROTOBUF) are skipped.

**References.** A registered schema may use named types registered under other subjects: its
``references`` list ``{"name": "io.debezium.connector.oracle.Source", "subject": "...",
"version": 1}`` (``version`` ``-1`` or ``"latest"``: the subject's highest version in the export).
Each is looked up by subject and version among the entries of the same directory or export,
resolved in turn (references of references; a cycle is an error), and written into the schema
where the name is first used, so that fastavro and :func:`connect_schema` read one self-contained
schema. A reference the export does not hold is a :class:`~lakecdc.errors.ConfigError` naming the
schema id, the reference and the versions of that subject the directory does hold.

The error messages name ``debezium-avro``, the format whose option this is (``debezium-json``
reads the same directory for kcat records its Avro deserialiser rendered).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema

from lakecdc.errors import ConfigError

# -- the schema directory ------------------------------------------------------------------------


@dataclass(frozen=True)
class Registry:
    """Writer schemas by schema id, as ``schemaDirectory`` holds them."""

    path: str
    schemas: dict[int, Any] = field(default_factory=dict)
    subjects: dict[int, str] = field(default_factory=dict)

    def label(self, schema_id: int) -> str:
        subject = self.subjects.get(schema_id)
        return f"schema id {schema_id}" + (f" (subject {subject})" if subject else "")

    def unknown(self, schema_id: int) -> str:
        ids = sorted(self.schemas)
        known = ", ".join(map(str, ids[:10])) + (", ..." if len(ids) > 10 else "")
        return (f"schema id {schema_id} is not in schemaDirectory '{self.path}' "
                f"({'ids ' + known if ids else 'which holds no schema'}); export it from the schema registry")

    def topic(self, schema_id: int) -> str | None:
        """The topic of a ``<topic>-value`` / ``<topic>-key`` subject (TopicNameStrategy)."""
        subject = self.subjects.get(schema_id) or ""
        for suffix in ("-value", "-key"):
            if subject.endswith(suffix):
                return subject[: -len(suffix)]
        return None

    def key_ids(self) -> frozenset[int]:
        """Ids of record-key schemas (records named ``*.Key``)."""
        return frozenset(i for i, s in self.schemas.items() if pairs_as_key(_record_name(s)))


def _record_name(schema: Any) -> str | None:
    """The Connect name (else the Avro full name) of a record schema, else None."""
    if isinstance(schema, list):
        named = [b for b in schema if isinstance(b, dict)]
        return _record_name(named[0]) if len(named) == 1 else None
    if not isinstance(schema, dict) or schema.get("type") not in ("record", "error"):
        return None
    return schema.get("connect.name") or qualified_name(schema, "")


def pairs_as_key(name: str | None) -> bool:
    """Whether a record of this Connect (or Avro full) name is a record key (``*.Key``)."""
    return bool(name) and name.endswith(".Key")  # type: ignore[union-attr]


def _schema_id(text: str, where: Path) -> int:
    if not text.isdigit():
        raise ConfigError(f"debezium-avro: {where}: name the file by its schema id (e.g. 42.avsc), "
                          "or export the registry's {\"id\", \"schema\"} objects as .json")
    return int(text)


@dataclass(frozen=True)
class _Entry:
    """One schema of a schema file, as exported."""

    schema_id: int
    schema: Any
    where: Path
    subject: str | None = None
    version: int | None = None
    references: tuple[Mapping[str, Any], ...] = ()


def _entries(path: Path) -> Iterator[_Entry]:
    """The schemas of one schema file (see the module docstring)."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise ConfigError(f"debezium-avro: {path}: not a JSON schema file: {exc}") from None
    if path.suffix == ".avsc":
        yield _Entry(_schema_id(path.stem, path), doc, path)
        return
    items = doc if isinstance(doc, list) and all(isinstance(d, dict) and "schema" in d for d in doc) else [doc]
    for item in items:
        if not (isinstance(item, dict) and "schema" in item):
            yield _Entry(_schema_id(path.stem, path), item, path)  # the schema itself, in <id>.json
            continue
        if str(item.get("schemaType", "AVRO")).upper() != "AVRO":
            continue
        raw_id = item.get("id")
        schema_id = raw_id if isinstance(raw_id, int) and raw_id >= 0 else _schema_id(path.stem, path)
        schema = item["schema"]
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except ValueError as exc:
                raise ConfigError(f"debezium-avro: {path}: the 'schema' of id {schema_id} is not JSON: {exc}") from None
        subject, version = item.get("subject"), item.get("version")
        refs = item.get("references") or ()
        yield _Entry(schema_id, schema, path, subject if isinstance(subject, str) else None,
                     version if isinstance(version, int) else None,
                     tuple(r for r in refs if isinstance(r, Mapping)))


def load_registry(path: str) -> Registry:
    """The schemas of ``path`` (a directory of ``.avsc``/``.json`` files, or one ``.json`` file),
    their references resolved.

    Raises ConfigError naming the file for a file that is no schema, a file name that is no id,
    one id given two different schemas, or a reference the directory does not hold.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted([*p.glob("*.avsc"), *p.glob("*.json")])
    elif p.is_file():
        files = [p]
    else:
        raise ConfigError(f"debezium-avro: schemaDirectory {path!r} does not exist")
    entries = [e for f in files for e in _entries(f)]
    refs = _References(str(p), entries)
    schemas: dict[int, Any] = {}
    subjects: dict[int, str] = {}
    origin: dict[int, Path] = {}
    for e in entries:
        schema = refs.resolve(e) if e.references else e.schema
        try:
            parse_schema(schema, _write_hint=False)
        except Exception as exc:
            raise ConfigError(f"debezium-avro: {e.where}: schema id {e.schema_id} is not a valid Avro schema: {exc}") from None
        if e.schema_id in schemas and _canonical(schemas[e.schema_id]) != _canonical(schema):
            raise ConfigError(f"debezium-avro: {e.where}: schema id {e.schema_id} differs from the one in "
                              f"{origin[e.schema_id]}")
        schemas[e.schema_id], origin[e.schema_id] = schema, e.where
        if e.subject:
            subjects.setdefault(e.schema_id, e.subject)
    return Registry(str(p), schemas, subjects)


# -- references ------------------------------------------------------------------------------------

_AVRO_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = ("record", "error", "enum", "fixed")


class _References:
    """Resolves schema references against the entries of one schema directory."""

    def __init__(self, path: str, entries: list[_Entry]) -> None:
        self.path = path
        self.by_subject: dict[tuple[str, int], _Entry] = {
            (e.subject, e.version): e for e in entries if e.subject and e.version is not None
        }

    def resolve(self, entry: _Entry, chain: tuple[tuple[str, int], ...] = ()) -> Any:
        """``entry``'s schema with each referenced type written in where it is first used."""
        named: dict[str, Any] = {}
        for ref in entry.references:
            target = self._find(entry, ref)
            key = (str(target.subject), int(target.version or 0))
            if key in chain:
                raise ConfigError(f"debezium-avro: {entry.where}: schema id {entry.schema_id}: its references "
                                  f"form a cycle through subject {key[0]!r} version {key[1]}")
            schema = self.resolve(target, (*chain, key)) if target.references else target.schema
            for name in (ref.get("name"), _full_name(schema)):
                if isinstance(name, str) and name:
                    named[name] = schema
        return inline(entry.schema, named)

    def _find(self, entry: _Entry, ref: Mapping[str, Any]) -> _Entry:
        subject, version = ref.get("subject"), ref.get("version")
        held = sorted(v for s, v in self.by_subject if s == subject)
        wanted = held[-1] if version in (-1, "latest", None) and held else version
        hit = self.by_subject.get((str(subject), wanted)) if isinstance(wanted, int) else None
        if hit is not None:
            return hit
        holds = f"it holds versions {', '.join(map(str, held))} of that subject" if held else "it holds no version of that subject"
        raise ConfigError(
            f"debezium-avro: {entry.where}: schema id {entry.schema_id} references {ref.get('name')!r} "
            f"(subject {subject!r}, version {version}), which schemaDirectory '{self.path}' does not hold ({holds}); "
            f"export it too: curl $REGISTRY/subjects/{subject}/versions/{version}"
        )


def _full_name(schema: Any) -> str | None:
    if isinstance(schema, dict) and schema.get("type") in _NAMED:
        return qualified_name(schema, "")
    return None


def inline(schema: Any, named: Mapping[str, Any]) -> Any:
    """``schema`` with the first use of each name in ``named`` replaced by that type's definition
    (later uses stay names, as Avro wants: a type is defined once, then named)."""
    defined: set[str] = set()

    def walk(node: Any, ns: str) -> Any:
        if isinstance(node, str):
            if node in _AVRO_PRIMITIVES:
                return node
            full = node if "." in node else f"{ns}.{node}" if ns else node
            ref = None if full in defined or node in defined else named.get(full, named.get(node))
            return node if ref is None else walk(_absolute(copy.deepcopy(ref)), "")
        if isinstance(node, list):
            return [walk(b, ns) for b in node]
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind in _NAMED:
            full = qualified_name(node, ns)
            defined.add(full)
            if kind not in ("record", "error"):
                return node
            inner = full.rpartition(".")[0]
            return {**node, "fields": [{**f, "type": walk(f.get("type"), inner)} if isinstance(f, dict) else f
                                       for f in node.get("fields") or ()]}
        if kind == "array":
            return {**node, "items": walk(node.get("items"), ns)}
        if kind == "map":
            return {**node, "values": walk(node.get("values"), ns)}
        if isinstance(kind, (list, dict)) or (isinstance(kind, str) and kind not in _AVRO_PRIMITIVES):
            return {**node, "type": walk(kind, ns)}
        return node

    return walk(schema, "")


def _absolute(schema: Any) -> Any:
    """A named type spelt so that it keeps its own namespace wherever it is written."""
    if isinstance(schema, dict) and schema.get("type") in _NAMED and "." not in str(schema.get("name", "")) \
            and "namespace" not in schema:
        return {**schema, "namespace": ""}
    return schema


def _canonical(schema: Any) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def qualified_name(schema: Mapping[str, Any], namespace: str) -> str:
    """A named schema's full name, its own namespace first, else ``namespace``."""
    name = str(schema.get("name", ""))
    if "." in name:
        return name
    ns = schema.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


__all__ = ["Registry", "inline", "load_registry", "pairs_as_key", "qualified_name"]
