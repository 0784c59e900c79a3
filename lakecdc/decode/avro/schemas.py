"""Avro schemas: fingerprints, schema directories, names, and decoding one datum exactly.

Nothing here knows a vendor's record layout; the vendor modules build on it.

* **Fingerprints.** :func:`parsing_fingerprint` is Avro's 64-bit Rabin fingerprint (CRC-64-AVRO,
  Avro specification "Schema Fingerprints") of a schema's Parsing Canonical Form, computed by
  fastavro and returned as Java's ``SchemaNormalization.parsingFingerprint64`` returns it: a
  *signed* 64-bit number (``"null"`` gives 7195948357588979594), the number GoldenGate writes in
  its generic wrapper's ``schema_fingerprint``.
* **Schema directories.** :func:`load_schema_directory` reads every ``*.avsc`` of a directory.
  A schema belongs to the table named by its record's full name (``namespace.name``: GoldenGate
  writes ``GG.TCUSTORD`` as namespace ``GG``, name ``TCUSTORD``). ``<table>.avsc`` is the current
  version; ``<table>_<timestamp>.avsc`` are older copies (GoldenGate ``versionSchemas=true``).
  :meth:`SchemaDirectory.versions` lists a table's versions newest first: the current file, then
  the timestamped ones by descending file name (GoldenGate's timestamp suffix sorts by time).
* **Names.** :func:`expand_names` writes every named type with its full name, as the Avro
  specification resolves names and references.
* **Exact decoding.** :func:`read_at` decodes one binary-encoded datum and returns where it
  ended, so a caller can demand that a message decodes to exactly its last byte: the test that
  tells which schema version wrote a message.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader
from fastavro.schema import fingerprint as fastavro_fingerprint
from fastavro.schema import to_parsing_canonical_form


def parsing_fingerprint(schema: Any) -> int:
    """Avro's 64-bit parsing fingerprint of ``schema`` (JSON text such as ``'{"type": ...}'`` or
    ``'"int"'``, its parsed JSON, or a primitive type's name) as a signed 64-bit number, Java's ``long``.

    fastavro gives the fingerprint as the hex of its little-endian bytes; Java (and GoldenGate's
    wrapper messages) carry it as a signed ``long`` read from those bytes.
    """
    if isinstance(schema, str) and schema.lstrip()[:1] in ("{", "[", '"'):
        schema = json.loads(schema)
    hex_le = fastavro_fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO")
    return int.from_bytes(bytes.fromhex(hex_le), "little", signed=True)


# -- schema directories --------------------------------------------------------------------------


@dataclass(frozen=True)
class SchemaFile:
    """One ``.avsc`` file of a schema directory."""

    file: str
    table: str
    label: str  # "" for the current ``<table>.avsc``, else the version suffix
    schema: Any
    fingerprint: int

    @property
    def parsed(self) -> dict[str, Any]:
        return _parsed(self.file, self.fingerprint, self.schema)


_PARSED: dict[tuple[str, int], Any] = {}


def _parsed(name: str, fingerprint: int, schema: Any) -> Any:
    key = (name, fingerprint)
    if key not in _PARSED:
        _PARSED[key] = parse_schema(schema, _write_hint=False)
    return _PARSED[key]


def full_name(schema: Any) -> str | None:
    """The full name (``namespace.name``) of a named schema, None for an unnamed one."""
    if not isinstance(schema, dict) or "name" not in schema:
        return None
    name = str(schema["name"])
    namespace = schema.get("namespace")
    return name if "." in name or not namespace else f"{namespace}.{name}"


_PRIMITIVE_NAMES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED_KINDS = frozenset({"record", "error", "enum", "fixed"})


def qualified(name: str, namespace: str | None) -> str:
    """A name as the Avro specification resolves it in ``namespace``: a name with a dot is full
    already; otherwise the namespace (the type's own, else the enclosing one's) comes first."""
    return name if "." in name or not namespace else f"{namespace}.{name}"


def expand_names(schema: Any) -> tuple[Any, dict[str, Any]]:
    """``schema`` (parsed JSON) with every named type's ``name`` its full name (no ``namespace``
    left) and every reference to a named type written with that full name, and the named types by
    full name (Avro specification, "Names": a name without a dot takes the namespace of its own
    ``namespace`` attribute, else of the innermost enclosing named type; a reference without a
    dot is looked up in the enclosing namespace first, then in the null namespace)."""
    named: dict[str, Any] = {}

    def walk(node: Any, namespace: str) -> Any:
        if isinstance(node, list):
            return [walk(b, namespace) for b in node]
        if isinstance(node, str):
            if node in _PRIMITIVE_NAMES or "." in node:
                return node
            inner = qualified(node, namespace)
            return inner if inner in named else node
        if not isinstance(node, dict):
            return node
        kind = node.get("type")
        if kind in _NAMED_KINDS:
            space = node.get("namespace", namespace)
            full = qualified(str(node.get("name", "")), space if isinstance(space, str) else namespace)
            out = {k: v for k, v in node.items() if k != "namespace"}
            out["name"] = full
            named[full] = out  # before its fields: a field may refer to its own record
            if kind in ("record", "error"):
                inner = full.rpartition(".")[0]
                out["fields"] = [{**f, "type": walk(f.get("type"), inner)} if isinstance(f, dict) else f
                                 for f in node.get("fields") or ()]
            return out
        if kind == "array":
            return {**node, "items": walk(node.get("items"), namespace)}
        if kind == "map":
            return {**node, "values": walk(node.get("values"), namespace)}
        if isinstance(kind, (dict, list)) or (isinstance(kind, str) and kind not in _PRIMITIVE_NAMES):
            return {**node, "type": walk(kind, namespace)}
        return node

    return walk(schema, ""), named


@dataclass(frozen=True)
class SchemaDirectory:
    """The schemas of a directory, by table and by fingerprint."""

    path: str
    files: tuple[SchemaFile, ...] = ()
    wrapper: SchemaFile | None = None
    by_table: dict[str, tuple[SchemaFile, ...]] = field(default_factory=dict)
    by_fingerprint: dict[int, SchemaFile] = field(default_factory=dict)

    def versions(self, table: str) -> tuple[SchemaFile, ...]:
        """The table's schema versions, newest first (exact name, else ignoring case)."""
        found = self.by_table.get(table)
        if found is None:
            lower = table.lower()
            found = next((v for t, v in self.by_table.items() if t.lower() == lower), ())
        return found


def load_schema_directory(path: str, *, encoding: str = "utf-8") -> SchemaDirectory:
    """Every ``*.avsc`` of ``path`` (not recursive); ``generic_wrapper.avsc`` kept apart.

    Raises ValueError naming the file when one is not a valid Avro schema.
    """
    files: list[SchemaFile] = []
    wrapper = None
    for p in sorted(Path(path).glob("*.avsc")):
        try:
            schema = json.loads(p.read_text(encoding=encoding))
            parse_schema(schema, _write_hint=False)
            fp = parsing_fingerprint(schema)
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{p}: not a valid Avro schema: {exc}") from exc
        table = full_name(schema) or p.stem
        stem = p.stem
        label = "" if stem == table else stem[len(table) + 1 :] if stem.startswith(table + "_") else stem
        sf = SchemaFile(p.name, table, label, schema, fp)
        if table == "oracle.goldengate.generic_wrapper":
            wrapper = sf
        else:
            files.append(sf)
    by_table: dict[str, list[SchemaFile]] = {}
    for sf in files:
        by_table.setdefault(sf.table, []).append(sf)
    ordered: dict[str, tuple[SchemaFile, ...]] = {}
    for table, group in by_table.items():
        group.sort(key=lambda s: s.label, reverse=True)
        group.sort(key=lambda s: s.label != "")
        seen: set[int] = set()
        unique: list[SchemaFile] = []
        for s in group:
            if s.fingerprint not in seen:
                seen.add(s.fingerprint)
                unique.append(s)
        ordered[table] = tuple(unique)
    by_fp: dict[int, SchemaFile] = {}
    for kept in ordered.values():
        for sf in kept:
            by_fp.setdefault(sf.fingerprint, sf)
    return SchemaDirectory(path, tuple(files), wrapper, ordered, by_fp)


# -- binary decoding -----------------------------------------------------------------------------


class Mismatch(ValueError):
    """Bytes that do not decode (exactly) with a schema."""


def read_at(data: bytes, pos: int, parsed: Any) -> tuple[Any, int]:
    """Decode one datum of ``parsed`` starting at ``data[pos]``; return it and where it ended."""
    bio = io.BytesIO(data)
    bio.seek(pos)
    try:
        value = schemaless_reader(bio, parsed, None)
    except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError...
        raise Mismatch(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__) from None
    return value, bio.tell()


def read_exact(data: bytes, parsed: Any) -> Any:
    """Decode ``data`` as exactly one datum of ``parsed`` (every byte used, none missing)."""
    value, end = read_at(data, 0, parsed)
    if end != len(data):
        raise Mismatch(f"the schema reads {end} of the message's {len(data)} bytes")
    return value


def read_long(data: bytes, pos: int) -> tuple[int, int] | None:
    """An Avro ``long`` (zig-zag varint) at ``pos``: ``(value, end)``, None when cut short."""
    shift = result = 0
    while pos < len(data) and shift < 70:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
    return None


def peek_string(data: bytes, pos: int = 0) -> str | None:
    """The Avro ``string`` at ``pos`` (a GoldenGate message starts with its table name)."""
    got = read_long(data, pos)
    if got is None:
        return None
    n, start = got
    if n < 0 or start + n > len(data):
        return None
    try:
        return data[start : start + n].decode("utf-8")
    except UnicodeDecodeError:
        return None


__all__ = [
    "Mismatch", "SchemaDirectory", "SchemaFile", "expand_names", "full_name", "load_schema_directory",
    "parsing_fingerprint", "peek_string", "qualified", "read_at", "read_exact", "read_long",
]
