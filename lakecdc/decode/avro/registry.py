"""Writer schemas by schema id: a schema directory or schema-registry export, or a schema
registry's REST API, references resolved.

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

**A schema registry** (option ``schema.registry.url``, the Connect converter's property:
one base URL, or several separated by commas, tried in turn): :class:`SchemaRegistryClient`
fetches the writer schema of each id the messages name that no ``schemaDirectory`` holds, over
the Confluent Schema Registry's REST API (Confluent's registry, karapace, Apicurio's
``/apis/ccompat/v7``): ``GET /schemas/ids/<id>`` for the schema and its ``references``, each
reference by ``GET /subjects/<subject>/versions/<version>`` (in turn, then written in as above),
and ``GET /schemas/ids/<id>/versions`` for its subject. This happens in the driver, before the
messages are decoded: :func:`schema_id_batches` lists the ids the input names, the driver fetches
those not known yet and hands the schemas to the executors with the rest of :class:`Registry`
(no executor calls the registry). A schema id names one schema for good, so fetched schemas are
kept for the life of the process. Credentials: ``basic.auth.user.info`` (``USER:PASSWORD``), or
``http://USER:PASSWORD@HOST:PORT`` in the URL (never shown in messages). A registry that does not
answer (or answers with an error other than "not found") is a
:class:`~lakecdc.errors.ConfigError` naming the URL and the id; an id the registry answers it does
not have leaves the messages that name it to the quarantine, with the registry's answer; a
reference it does not have is a ConfigError naming the schema id and the reference.

The error messages name ``debezium-avro``, the format whose option this is (``debezium-json``
reads the same directory for kcat records its Avro deserialiser rendered).
"""

from __future__ import annotations

import base64
import copy
import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastavro import parse_schema

from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    import pyarrow as pa

# -- the schema directory ------------------------------------------------------------------------


@dataclass(frozen=True)
class Registry:
    """Writer schemas by schema id, as ``schemaDirectory`` holds them."""

    path: str
    schemas: dict[int, Any] = field(default_factory=dict)
    subjects: dict[int, str] = field(default_factory=dict)
    #: the schema registry the schemas not in ``path`` come from (``schema.registry.url``, no credentials)
    url: str = ""
    #: ids that registry answered it does not have, with its answer
    missing: dict[int, str] = field(default_factory=dict)

    def label(self, schema_id: int) -> str:
        subject = self.subjects.get(schema_id)
        return f"schema id {schema_id}" + (f" (subject {subject})" if subject else "")

    def with_fetched(self, fetched: Fetched) -> Registry:
        """This registry and the schemas (and ids not found) :class:`SchemaRegistryClient` fetched."""
        return replace(self, schemas={**self.schemas, **fetched.schemas}, subjects={**fetched.subjects, **self.subjects},
                       missing={**self.missing, **fetched.missing})

    def unknown(self, schema_id: int) -> str:
        if schema_id in self.missing:
            return f"schema id {schema_id} is not in the schema registry {self.url}: {self.missing[schema_id]}"
        if not self.path:
            return f"schema id {schema_id} was not fetched from the schema registry {self.url}"
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
    where: Path | str
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
    origin: dict[int, Path | str] = {}
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


# -- a schema registry's REST API ------------------------------------------------------------------


@dataclass(frozen=True)
class Fetched:
    """What :meth:`SchemaRegistryClient.fetch` found: schemas (references written in) and subjects
    by id, and the ids the registry does not have, with its answer."""

    schemas: dict[int, Any] = field(default_factory=dict)
    subjects: dict[int, str] = field(default_factory=dict)
    missing: dict[int, str] = field(default_factory=dict)


class _NotFound(Exception):
    """The registry answered 404: it does not have what was asked for (its message)."""


#: Schemas fetched in this process: (registry URLs, credentials, id) -> (schema, subject). A registry
#: never gives an id to another schema, so they are kept; ids not found are asked again next time.
_FETCHED: dict[tuple[str, str, int], tuple[Any, str | None]] = {}

_ACCEPT = "application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json"


class SchemaRegistryClient:
    """Writer schemas by id from a schema registry's REST API (see the module docstring).

    ``url``: ``schema.registry.url``, one base URL or several separated by commas (each tried in
    turn while one does not answer); ``user_info``: ``USER:PASSWORD`` for HTTP basic
    authentication (else any credentials written in the URL); ``fmt``: the format that names the
    option, for the messages.
    """

    def __init__(self, url: str, user_info: str = "", *, fmt: str = "debezium-avro", timeout: float = 30.0) -> None:
        self.fmt = fmt
        self.timeout = timeout
        self.bases: list[tuple[str, str | None]] = []  # (URL without credentials, Authorization header)
        for raw in url.split(","):
            raw = raw.strip().rstrip("/")
            if not raw:
                continue
            parts = urllib.parse.urlsplit(raw)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"{fmt}: schema.registry.url {self._shown(raw)!r} is not an http(s) URL")
            creds = user_info or (f"{urllib.parse.unquote(parts.username or '')}:{urllib.parse.unquote(parts.password or '')}"
                                  if parts.username else "")
            netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
            bare = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
            self.bases.append((bare, "Basic " + base64.b64encode(creds.encode()).decode() if creds else None))
        if not self.bases:
            raise ConfigError(f"{fmt}: schema.registry.url is empty")
        self.url = ", ".join(b for b, _ in self.bases)

    @staticmethod
    def _shown(raw: str) -> str:
        parts = urllib.parse.urlsplit(raw)
        return raw if parts.password is None else raw.replace(f":{parts.password}@", ":***@")

    def fetch(self, ids: Iterable[int]) -> Fetched:
        """The writer schemas of ``ids``, their references resolved; ids the registry does not
        have go to ``missing``. Raises ConfigError when the registry does not answer, a schema is
        no valid Avro, or a reference is not found."""
        out = Fetched()
        for schema_id in sorted(set(ids)):
            key = (self.url, " ".join(a or "" for _, a in self.bases), schema_id)
            if key not in _FETCHED:
                try:
                    _FETCHED[key] = self._schema(schema_id)
                except _NotFound as nf:
                    out.missing[schema_id] = str(nf)
                    continue
            schema, subject = _FETCHED[key]
            out.schemas[schema_id] = schema
            if subject:
                out.subjects[schema_id] = subject
        return out

    def _schema(self, schema_id: int) -> tuple[Any, str | None]:
        """(schema, subject) of ``schema_id``; :class:`_NotFound` when the registry does not have
        it, or has it as another kind of schema (Protobuf, JSON Schema)."""
        where = f"the schema registry {self.url}"
        doc = self._get(f"/schemas/ids/{schema_id}", schema_id)
        kind = str(doc.get("schemaType") or "AVRO").upper() if isinstance(doc, dict) else "AVRO"
        if kind != "AVRO":
            raise _NotFound(f"it is a {kind} schema, not Avro")
        entry = self._entry(doc, schema_id, where, subject=None, version=None)
        subject = self._subject(schema_id)
        if entry.references:
            entries: list[_Entry] = []
            self._references(entry, entries, where, set())
            schema = _References(self.url, entries).resolve(entry)
        else:
            schema = entry.schema
        try:
            parse_schema(schema, _write_hint=False)
        except Exception as exc:
            raise ConfigError(f"{self.fmt}: schema id {schema_id} from {where} is not a valid Avro schema: {exc}") from None
        return schema, subject

    def _entry(self, doc: Any, schema_id: int, where: str, *, subject: str | None, version: int | None) -> _Entry:
        if not isinstance(doc, dict) or not isinstance(doc.get("schema"), str):
            raise ConfigError(f"{self.fmt}: {where} answered no schema for schema id {schema_id}: {str(doc)[:200]}")
        try:
            schema = json.loads(doc["schema"])
        except ValueError as exc:
            raise ConfigError(f"{self.fmt}: the schema of id {schema_id} from {where} is not JSON: {exc}") from None
        refs = tuple(r for r in doc.get("references") or () if isinstance(r, Mapping))
        return _Entry(schema_id, schema, where, subject, version, refs)

    def _references(self, entry: _Entry, out: list[_Entry], where: str, seen: set[tuple[str, str]]) -> None:
        """Fetches the subject versions ``entry`` references, and theirs, into ``out``."""
        for ref in entry.references:
            subject, version = str(ref.get("subject")), ref.get("version")
            wanted = "latest" if version in (-1, "-1", None) else str(version)
            if (subject, wanted) in seen:
                continue
            seen.add((subject, wanted))
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/{wanted}"
            try:
                doc = self._get(path, entry.schema_id)
            except _NotFound as nf:
                raise ConfigError(
                    f"{self.fmt}: schema id {entry.schema_id} references {ref.get('name')!r} (subject {subject!r}, "
                    f"version {version}), which {where} does not have: {nf}"
                ) from None
            if not isinstance(doc, dict) or not isinstance(doc.get("version"), int):
                raise ConfigError(f"{self.fmt}: {where} answered {path} without a version: {str(doc)[:200]}")
            target = self._entry(doc, int(doc.get("id", -1)), where, subject=subject, version=doc["version"])
            out.append(target)
            self._references(target, out, where, seen)

    def _subject(self, schema_id: int) -> str | None:
        """A subject the schema is registered under (the first the registry lists), if it says."""
        try:
            versions = self._get(f"/schemas/ids/{schema_id}/versions", schema_id, optional=True)
        except _NotFound:
            return None
        subjects = [v.get("subject") for v in versions or () if isinstance(v, dict)]
        return next((s for s in subjects if isinstance(s, str)), None)

    def _get(self, path: str, schema_id: int, *, optional: bool = False) -> Any:
        """The JSON answer of ``GET path`` from the first base URL that answers; :class:`_NotFound`
        for a 404 (or, ``optional``, any client error)."""
        failures: list[str] = []
        for base, auth in self.bases:
            headers = {"Accept": _ACCEPT, **({"Authorization": auth} if auth else {})}
            request = urllib.request.Request(base + path, headers=headers, method="GET")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                    return json.loads(answer.read().decode("utf-8"))
            except urllib.error.HTTPError as e:
                message = _error_message(e)
                if e.code == 404 or (optional and 400 <= e.code < 500):
                    raise _NotFound(f"{e.code} {message}") from None
                failures.append(f"{base}: GET {path} answered {e.code} {message}")
            except (urllib.error.URLError, OSError, ValueError) as e:
                reason = getattr(e, "reason", e)
                failures.append(f"{base}: GET {path} failed: {reason}")
        raise ConfigError(
            f"{self.fmt}: the schema registry did not give schema id {schema_id} (schema.registry.url "
            f"{self.url}): " + "; ".join(failures)
        )


def _error_message(e: urllib.error.HTTPError) -> str:
    """The registry's own message of an error answer (``{"error_code", "message"}``), else its text."""
    try:
        text = e.read().decode("utf-8", "replace")
    except OSError:
        return e.reason or ""
    try:
        doc = json.loads(text)
    except ValueError:
        return text.strip()[:200]
    if isinstance(doc, dict) and doc.get("message"):
        return f"{doc.get('error_code', '')} {doc['message']}".strip()
    return text.strip()[:200]


def schema_id_batches(batches: Iterator[pa.RecordBatch], *, reader: Any, splits: list[Any]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: the schema ids the splits' wire-format messages (values and keys) name,
    plus those ``reader.asked`` records (ids its schemas were asked for while framing a split), as
    one column ``id``. ``reader`` reads a split's messages (``reader.messages(split)``)."""
    import pyarrow as pa

    from lakecdc.decode.files.splits import split_numbers
    from lakecdc.decode.kafka.dumps import WIRE_HEADER

    ids: set[int] = set()
    for i in split_numbers(batches):
        for m in reader.messages(splits[i]):
            for data in (m.data, m.key):
                if data and len(data) >= WIRE_HEADER and data[0] == 0:
                    ids.add(int.from_bytes(data[1:WIRE_HEADER], "big"))
    ids.update(getattr(reader, "asked", ()))
    yield pa.RecordBatch.from_pydict({"id": sorted(ids)}, schema=pa.schema([("id", pa.int64())]))


__all__ = ["Fetched", "Registry", "SchemaRegistryClient", "inline", "load_registry", "pairs_as_key", "qualified_name",
           "schema_id_batches"]
