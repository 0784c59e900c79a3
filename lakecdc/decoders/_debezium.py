"""Debezium change events, whatever their serialisation: envelope to canonical event.

Shared by ``debezium-json`` (and the ``debezium-avro`` decoder to come): the caller parses a
Kafka record into Python values (a value payload, its Kafka Connect schema when it has one, the
record's key and Kafka metadata) and :func:`decode_value` turns it into one canonical row.

**The envelope** (seeds 001 and 004): ``op`` (``c`` create, ``u`` update, ``d`` delete, ``r``
snapshot read, ``t`` truncate), ``before``, ``after``, ``source``, ``ts_ms`` (when the connector
processed the event), ``transaction`` (``id``, ``total_order``, ``data_collection_order``). Ops
map to ``I``/``U``/``D``/``R``/``T``; a read is an upsert ordered like any other event, so a
snapshot row never overrides a newer streamed change (see the positions below).

**Records that are not row changes are skipped, not errors**: a tombstone (a null value, sent
after each delete for log compaction and between the delete and the create of a primary-key
change), a heartbeat (``{"ts_ms": ...}``), a transaction BEGIN/END marker (``status``, ``id``,
``event_count``, ``data_collections``), a schema change (``ddl``, ``tableChanges``,
``historyRecord`` or ``databaseName`` without ``op``), a logical-decoding message (``op: m``) and a
record key read on its own. Each still gives one output row (``op`` and ``_error`` NULL) whose
``source['skipped']`` names the reason, so that the pipeline can count it. ``table`` is NULL for
heartbeats, markers and schema changes; for a tombstone, message or key it is the table the Kafka
topic or the key's schema name gives (Debezium's sanitised name, see below), when one does.

**Table names**, as the connector names the table in the ``source`` block:

=========================================  ============================================
connector                                  table
=========================================  ============================================
oracle, db2, postgresql (and others)       ``SCHEMA.TABLE`` (``source.schema``, ``source.table``)
sqlserver                                  ``DB.SCHEMA.TABLE``
mysql, mariadb                             ``DB.TABLE`` (``source.db``, ``source.table``)
mongodb                                    ``DB.COLLECTION``
=========================================  ============================================

When the ``source`` block has no table (the seed's Oracle examples), the name comes from the
envelope's schema name (``server1.DEBEZIUM.CUSTOMERS.Envelope``) or the Kafka topic
(``server1.DEBEZIUM.CUSTOMERS``), without the topic prefix (``topic.prefix`` option, else
``source.name``, else the first dotted part). Those names are sanitised by Debezium (characters
outside ``[A-Za-z0-9_]`` became ``_``): the ``source`` block's names are the source's own, so they
win whenever present. A column whose schema carries ``__debezium.source.column.name``
(``column.propagate.source.type``) takes that original name.

**Positions** (``pos``, and ``seq``: the order events are applied in). Numbers are zero-padded to
20 digits and LSNs to 16 hex digits per ``:`` part, so that plain string order is the source's
order; parts are joined with ``|``:

============  ==================================================================================
connector     order
============  ==================================================================================
oracle        ``commit_scn``, ``scn``, ``redo_thread``, ``ssn`` (a snapshot read: its ``scn``,
              sorted after every streamed change committed at that SCN, which the flashback query
              already saw; in RAC the thread separates changes of different redo threads that
              share an SCN, and a ``commit_scn`` written per thread (``scn:thread:...``, comma
              separated) is read for the event's own thread)
db2,          ``commit_lsn``, ``change_lsn``, ``event_serial_no`` (a snapshot read, which has no
sqlserver     ``change_lsn``, sorts after the changes committed at its LSN)
mysql         ``file`` (its number padded), ``pos``, snapshot-before-stream, ``row`` (a snapshot
              position is where the next binlog event starts, so a streamed change at the same
              position is newer)
postgresql    ``lsn`` (a snapshot read after the changes at its LSN)
mongodb       ``source.ts_ms`` (the oplog time) then ``ord``: ``seq`` is ``default_seq(op_ts,
              ord, 0)``
other         ``seq`` is ``default_seq(op_ts, '', 0)``: op_ts alone
============  ==================================================================================

A message whose connector fields are absent or empty (a MySQL ``file`` of ``""``, as in hand-made
test data) falls back to op_ts ordering; a table should not mix the two. The ``sequenceBy`` option
overrides the order: ``op_ts`` (``default_seq(op_ts, pos, 0)``, ``pos`` as above) or a comma list
of ``source`` map names (``source.commit_scn,source.scn,transaction.total_order``,
``kafka.offset``), each normalised as above. ``op_ts`` is ``source.ts_ns`` / ``ts_us`` /
``ts_ms`` (the change's time in the database), else the envelope's processing time.

**Values** (``before``/``after`` map texts) follow the Kafka Connect schema when the message has
one: see :mod:`lakecdc.decode.kafka.connect_values`. A column whose value is the connector's
*unavailable value placeholder* (PostgreSQL TOAST: ``__debezium_unavailable_value``, also as the
base64 of its bytes, or a list holding only it) is **missing**: it is not a key of the image map,
so the table keeps what it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakecdc.decode.jsontext import Num, compact_json, plain_text
from lakecdc.decode.kafka.connect_values import (
    ImageReader,
    column_name,
    column_text,
    image_fields,
    image_pairs,
    placeholder_forms,
)
from lakecdc.decode.rows import MISSING, Pairs, RecordError, Row, failed, skipped
from lakecdc.decoders._debezium_ddl import declared_rows, history, order_of, table_changes, table_of
from lakecdc.errors import ConfigError

#: Debezium's default ``unavailable.value.placeholder``.
UNAVAILABLE = "__debezium_unavailable_value"

_DIGITS = re.compile(r"-?[0-9]+")  # ASCII digits only, as SQL reads them (int() takes others)

OPS: dict[str, str] = {"c": "I", "u": "U", "d": "D", "r": "R", "t": "T"}
_OP_LIST = "c, u, d, r, t"


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


@dataclass(frozen=True)
class Key:
    """A record key as read (its columns are worked out with the value: :func:`key_columns`)."""

    payload: dict[str, Any]
    schema: Mapping[str, Any] | None
    text: str

    @property
    def schema_name(self) -> str | None:
        return self.schema.get("name") if isinstance(self.schema, Mapping) else None


def transaction_marker(payload: Mapping[str, Any], extra: Sequence[tuple[str, str | None]] = ()) -> Row:
    """A BEGIN/END record of the transaction topic: skipped, with what
    :mod:`lakecdc.changes.transactions` needs to tell a complete transaction (``txid``, ``tx.status``,
    ``tx.event_count`` and, per table, ``tx.data_collections``)."""
    count = payload.get("event_count")
    collections = payload.get("data_collections")
    marker = skipped("transaction marker", extra=[
        ("tx.status", str(payload.get("status"))),
        ("tx.event_count", None if count is None else str(count)),
        ("tx.data_collections", None if collections is None else json.dumps(collections, separators=(",", ":"))),
        *extra,
    ])
    return marker._replace(txid=str(payload.get("id")))


def schema_change(payload: Mapping[str, Any], settings: Settings, extra: Sequence[tuple[str, str | None]] = ()) -> Row:
    """A schema-change record: skipped (no row change), named by its first table change (its
    ``id``'s last parts, as data events name tables), with its key columns
    (``primaryKeyColumnNames``) ordered by ``source.ts_ms``, so that a run holding the DDL and then
    rows without key lines knows the keys, and its columns as an ``after`` image of NULLs (by
    ``position``) that the pipeline adds to the table: see :mod:`lakecdc.decoders._debezium_ddl`."""
    record = history(payload)
    changes = table_changes(payload)
    source = payload.get("source") if isinstance(payload.get("source"), Mapping) else {}
    ddl = _text(record.get("ddl"))
    first = changes[0] if changes else None
    table = table_of(first.ident, connector_of(source)) if first and not settings.table_name else None
    row = skipped("schema change", table=table, extra=[("ddl", ddl), *extra])
    if first is None or not table:
        return row
    if first.kind != "DROP" and first.columns:
        row = row._replace(after=[(c.name, None) for c in first.columns])
    ts = _text(source.get("ts_ms", payload.get("ts_ms")))  # numbers arrive as exact text (Num)
    if first.keys and ts is not None and ts.isdigit():
        row = row._replace(keys=list(first.keys), op_ts=int(ts) * 1000, pos="")
    return row


def schema_change_types(payload: Mapping[str, Any], settings: Settings) -> Iterator[tuple[str, str, str]]:
    """The declared-types rows (:func:`~lakecdc.decoders._debezium_ddl.declared_rows`) of a
    schema-change record, ordered by the connector's position, then the time (none with the
    ``tableName`` option: the record names no table then)."""
    if settings.table_name:
        return
    source = payload.get("source") if isinstance(payload.get("source"), Mapping) else {}
    connector = connector_of(source)
    pos, _positional = connector_position(source, connector, "I")
    order = order_of(pos, op_ts_micros(payload, source))
    yield from declared_rows(table_changes(payload), connector, order)


# -- MongoDB -------------------------------------------------------------------------------------

_EJSON_NUMBERS = ("$numberLong", "$numberInt", "$numberDouble", "$numberDecimal")


def mongo_value(value: Any) -> str | None:
    """A document field as text: numbers (also ``{"$numberLong": ...}``) as numbers, strings as
    they are, other objects (``$oid``, ``$date``, sub-documents) and arrays as compact JSON."""
    if isinstance(value, dict) and len(value) == 1:
        (k, v), = value.items()
        if k in _EJSON_NUMBERS and isinstance(v, (str, int, float)):
            return Num(str(v))
    return plain_text(value)


def mongo_document(text: Any, what: str, parse: Any) -> Pairs | None:
    """A MongoDB ``before``/``after`` (extended JSON text) as ``[(field, text)]``."""
    if text is None:
        return None
    doc = parse(text, what) if isinstance(text, str) else text
    if not isinstance(doc, dict):
        raise RecordError(f"'{what}' is not a document: {compact_json(doc)[:80]}")
    return [(str(k), mongo_value(v)) for k, v in doc.items()]


def mongo_update(payload: Mapping[str, Any], kcols: Pairs | None, parse: Any) -> Pairs:
    """An update without ``after``: the ``_id`` from the key, ``updateDescription.updatedFields``
    as present columns and ``removedFields`` as NULL (top-level fields only)."""
    desc = payload.get("updateDescription")
    if not isinstance(desc, Mapping):
        raise RecordError("'after' missing for op 'u' (expected a document or 'updateDescription')")
    updated = desc.get("updatedFields")
    fields = parse(updated, "updateDescription.updatedFields") if isinstance(updated, str) else (updated or {})
    removed = desc.get("removedFields") or []
    names = [*fields, *removed]
    nested = [n for n in names if "." in str(n)]
    if nested:
        raise RecordError(
            f"update of nested field '{nested[0]}' cannot be applied to a column; "
            "configure the connector with capture.mode=change_streams_update_full"
        )
    out: Pairs = list(kcols or [])
    out += [(str(k), mongo_value(v)) for k, v in fields.items()]
    out += [(str(k), None) for k in removed]
    return out


# -- names ---------------------------------------------------------------------------------------

_SCHEMA_SUFFIXES = (".Envelope", ".Value", ".Key")


def connector_of(source: Mapping[str, Any]) -> str:
    """``source.connector``, else guessed from the position fields it carries."""
    name = source.get("connector")
    if isinstance(name, str) and name:
        return name.lower()
    if "scn" in source or "commit_scn" in source:
        return "oracle"
    if "change_lsn" in source or "commit_lsn" in source:
        return "db2"
    if "file" in source and "pos" in source:
        return "mysql"
    if "lsn" in source:
        return "postgresql"
    if "collection" in source or "ord" in source:
        return "mongodb"
    return ""


_NAMING = {
    "oracle": ("schema", "table"), "db2": ("schema", "table"), "postgresql": ("schema", "table"),
    "sqlserver": ("db", "schema", "table"), "mysql": ("db", "table"), "mariadb": ("db", "table"),
    "mongodb": ("db", "collection"),
}


def _text(value: Any) -> str | None:
    if value is None or value == "":
        return None
    if type(value) is str:
        return value
    return plain_text(value)


def source_table(source: Mapping[str, Any], connector: str, settings: Settings) -> str | None:
    """The table as the ``source`` block names it (see the module docstring), or None."""
    parts = settings.table_name or _NAMING.get(connector)
    if parts is None:
        parts = ("schema", "table") if _text(source.get("schema")) else ("db", "table")
    last = _text(source.get(parts[-1]))
    if last is None:
        return None
    return ".".join([t for t in [_text(source.get(p)) for p in parts] if t])


def name_from_topic(name: str | None, settings: Settings, server: str | None = None) -> str | None:
    """``server1.DEBEZIUM.CUSTOMERS[.Envelope]`` as ``DEBEZIUM.CUSTOMERS`` (Debezium-sanitised)."""
    if not name:
        return None
    for suffix in _SCHEMA_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    for prefix in (settings.topic_prefix, server):
        if prefix and name.startswith(prefix + "."):
            return name[len(prefix) + 1 :] or None
    head, dot, rest = name.partition(".")
    return rest if dot and rest else None


def envelope_table(source: Mapping[str, Any], schema_name: str | None, topic: str | None, settings: Settings) -> str | None:
    """The event's table: the ``source`` block's names, else the schema name's, else the topic's."""
    server = _text(source.get("name"))
    return (source_table(source, connector_of(source), settings) or name_from_topic(schema_name, settings, server)
            or name_from_topic(topic, settings, server))


# -- positions -----------------------------------------------------------------------------------

_NUM_WIDTH = 20
_LSN_WIDTH = 16
_MAX = "~"  # sorts after every digit, letter and '|'
_LSN = re.compile(r"[0-9A-Fa-f]+(?::[0-9A-Fa-f]+)+")
_FILE_NUMBER = re.compile(r"(.*?)([0-9]+)")


def sortable(value: Any) -> str:
    """One position part as fixed-width text: a number (ASCII digits) zero-padded to 20 digits, an
    LSN (``00000025:00000d98:00a2``) to 16 lower-case hex digits per part, other text as it is."""
    if type(value) is str and value.isdigit() and value.isascii():  # the common case, fast
        return value.rjust(_NUM_WIDTH, "0")
    text = _text(value)
    if text is None:
        return ""
    if text.isdigit() and text.isascii():
        return text.rjust(_NUM_WIDTH, "0")
    if _LSN.fullmatch(text):
        return ":".join(p.lower().rjust(_LSN_WIDTH, "0") for p in text.split(":"))
    return text


def _binlog_file(name: str) -> str:
    m = _FILE_NUMBER.fullmatch(name)
    return f"{m.group(1)}{m.group(2).rjust(_NUM_WIDTH, '0')}" if m else name


def _oracle_commit_scn(source: Mapping[str, Any]) -> Any:
    commit = source.get("commit_scn")
    if isinstance(commit, str) and ":" in commit:
        # written per redo thread, "scn:thread:txid,...": the event's thread, else the highest
        thread = str(source.get("redo_thread"))
        entries = [e.split(":") for e in commit.split(",") if e]
        mine = [e[0] for e in entries if len(e) > 1 and e[1] == thread]
        found = mine or sorted((e[0] for e in entries), key=lambda s: s.rjust(_NUM_WIDTH, "0"))[-1:]
        return found[0] if found else None
    return commit


def connector_position(source: Mapping[str, Any], connector: str, op: str) -> tuple[str | None, bool]:
    """``(pos, positional)``: the connector's position parts joined by ``|``; ``positional`` is
    False when ``seq`` must be ``default_seq(op_ts, pos, 0)`` (MongoDB, unknown connectors,
    messages without the connector's position fields). A snapshot row is a read whatever its op
    (connectors before 1.x wrote ``c`` with ``snapshot: true``)."""
    read = op == "R" or is_snapshot(source)
    if connector == "oracle":
        scn, commit = _text(source.get("scn")), _text(_oracle_commit_scn(source))
        if read and scn:
            return "|".join((sortable(scn), sortable(scn), _MAX, _MAX)), True
        if commit or scn:
            first = commit or scn
            parts = (first, scn or first, source.get("redo_thread"), source.get("ssn"))
            return "|".join([sortable(p) for p in parts]), True
        return None, False
    if connector in ("db2", "sqlserver"):
        commit, change = _text(source.get("commit_lsn")), _text(source.get("change_lsn"))
        if commit is None:
            return None, False
        if change is None:
            return "|".join((sortable(commit), _MAX, _MAX)), True
        return "|".join((sortable(commit), sortable(change), sortable(source.get("event_serial_no")))), True
    if connector in ("mysql", "mariadb"):
        file, pos = _text(source.get("file")), source.get("pos")
        if file is None or pos is None:
            return None, False
        phase = "0" if read else "1"
        return "|".join((_binlog_file(file), sortable(pos), phase, sortable(source.get("row", 0)))), True
    if connector == "postgresql":
        lsn = _text(source.get("lsn"))
        if lsn is None:
            return None, False
        return "|".join((sortable(lsn), "1" if read else "0")), True
    if connector == "mongodb":
        ord_ = _text(source.get("ord"))
        return (sortable(ord_) if ord_ else None), False
    return None, False


_SNAPSHOT_FLAGS = {"true", "last", "first", "incremental", "first_in_data_collection", "last_in_data_collection"}


def is_snapshot(source: Mapping[str, Any]) -> bool:
    """``source.snapshot`` says the row was read by a snapshot (``true``, ``last``, ``incremental``, ...)."""
    flag = source.get("snapshot")
    return flag is True or (isinstance(flag, str) and flag.lower() in _SNAPSHOT_FLAGS)


def op_ts_micros(payload: Mapping[str, Any], source: Mapping[str, Any]) -> int | None:
    """The change's time in the database (``source.ts_ns``/``ts_us``/``ts_ms``), else the
    envelope's processing time, in microseconds since 1970."""
    for block in (source, payload):
        for name, per_micro in (("ts_ns", None), ("ts_us", 1), ("ts_ms", 1000)):
            value = block.get(name)
            if value is None or isinstance(value, bool):
                continue
            text = str(value)
            if not _DIGITS.fullmatch(text):
                continue
            n = int(text)
            return n // 1000 if per_micro is None else n * per_micro
    return None


# -- the envelope --------------------------------------------------------------------------------

_NON_ROW_MEMBERS = ("ddl", "tableChanges", "historyRecord")


def non_row_reason(payload: Mapping[str, Any], schema_name: str | None) -> str | None:
    """Why a value that is not an envelope is skipped, or None when it is none of the known
    non-row records."""
    if payload.get("status") in ("BEGIN", "END") and "id" in payload:
        return "transaction marker"
    if any(m in payload for m in _NON_ROW_MEMBERS) or (schema_name or "").endswith(("SchemaChangeValue", "SchemaChangeKey")):
        return "schema change"
    if "databaseName" in payload and "op" not in payload:
        return "schema change"
    if set(payload) == {"ts_ms"} or (schema_name or "").endswith("Heartbeat"):
        return "heartbeat"
    if set(payload) == {"serverName"} or (schema_name or "").endswith("ServerNameKey"):
        return "heartbeat"
    return None


def looks_like_key(payload: Any, schema_name: str | None) -> bool:
    """A record key: schema named ``*.Key``, or (no schema) a flat object of scalars."""
    if not isinstance(payload, dict):
        return False
    if schema_name:
        return schema_name.endswith(".Key")
    if "op" in payload or not payload or "__op" in payload or "__deleted" in payload:
        return False
    return all(not isinstance(v, (dict, list)) for v in payload.values())


def key_columns(key: Key | None, connector: str, settings: Settings, parse: Any) -> Pairs | None:
    """The key's columns and values; MongoDB's key ``id`` (the ``_id`` as extended JSON text) is
    the document's ``_id``."""
    if key is None or not key.payload:
        return None
    payload = key.payload
    if connector == "mongodb" and set(payload) == {"id"}:
        raw = payload["id"]
        return [("_id", mongo_value(parse(raw, "key id") if isinstance(raw, str) else raw))]
    schema = key.schema if isinstance(key.schema, Mapping) else {}
    fields = {str(f.get("field")): f for f in (schema.get("fields") or ()) if isinstance(f, Mapping)}
    out: Pairs = []
    for name, value in payload.items():
        f = fields.get(name)
        text = column_text(value, f, settings.placeholders, name)
        out.append((column_name(name, f), None if text is MISSING else text))
    return out


#: ``source.<member>`` per member name of the source blocks seen (made once: a hot path)
_SOURCE_NAMES: dict[str, str] = {}


def _source_name(member: str) -> str:
    name = f"source.{member}"
    if len(_SOURCE_NAMES) < 4096:
        _SOURCE_NAMES[member] = name
    return name


def _source_pairs(payload: Mapping[str, Any], source: Mapping[str, Any], kafka: Pairs) -> Pairs:
    names = _SOURCE_NAMES
    out: Pairs = [(names.get(k) or _source_name(k), v if v is None or type(v) is str else _source_text(v))
                  for k, v in source.items()]
    for name in ("ts_ms", "ts_us", "ts_ns"):
        if payload.get(name) is not None:
            out.append((name, _source_text(payload[name])))
    tx = payload.get("transaction")
    if tx is not None and isinstance(tx, Mapping):  # (None first: an ABC check is slow)
        out += [(f"transaction.{k}", _source_text(v)) for k, v in tx.items()]
    out += kafka
    return out


def _source_text(value: Any) -> str | None:
    if value is None:
        return None
    kind = type(value)
    if kind is str:
        return value
    if kind is int:
        return str(value)
    return str(plain_text(value))


def _lookup_order(pairs: Pairs, names: Sequence[str]) -> str:
    found = dict(pairs)
    return "|".join(sortable(found.get(n)) for n in names)


#: The ``before`` and ``after`` readers of one envelope schema (None: the schema declares none).
Images = tuple[ImageReader | None, ImageReader | None]


def image_readers(schema: Mapping[str, Any] | None, settings: Settings, *, ordered: bool = False) -> Images:
    """The :class:`~lakecdc.decode.kafka.connect_values.ImageReader` of the envelope schema's
    ``before`` and ``after`` structs, for :func:`decode_value`'s ``images`` (``ordered``: the
    images hold every field in schema order, as Avro records do)."""
    out = []
    for image in ("before", "after"):
        fields = image_fields(schema, image)
        out.append(ImageReader(fields, settings.placeholders, ordered=ordered) if fields else None)
    return out[0], out[1]


def decode_value(
    payload: Any,
    schema: Mapping[str, Any] | None,
    *,
    key: Key | None,
    kafka: Pairs,
    topic: str | None,
    settings: Settings,
    parse: Any,
    images: Images | None = None,
) -> Row:
    """One Kafka record value (the envelope, or a non-row record) as a canonical :class:`Row`.

    ``parse(text, what)`` parses embedded JSON (MongoDB documents) with exact numbers, raising
    :class:`RecordError`. A bad envelope gives a row with ``error`` (and its table when known);
    a value that is no Debezium record at all raises :class:`RecordError`. ``images``: the
    ``before``/``after`` readers of ``schema`` made once (:func:`image_readers`), for a caller
    that decodes many records of one schema object.
    """
    schema_name = schema.get("name") if schema is not None and isinstance(schema, Mapping) else None

    def hint() -> str | None:
        return name_from_topic(topic, settings) or name_from_topic(key.schema_name if key else None, settings)

    if payload is None:
        extra: Pairs = [("key", key.text)] if key else []
        return skipped("tombstone", table=hint(), extra=extra + kafka)
    if not isinstance(payload, dict):
        raise RecordError(f"not a Debezium record: expected a JSON object, found {compact_json(payload)[:60]}")
    if "op" not in payload:
        reason = non_row_reason(payload, schema_name)
        if reason == "transaction marker":  # kept for complete_transactions (lakecdc.changes.transactions)
            return transaction_marker(payload, kafka)
        if reason == "schema change":
            return schema_change(payload, settings, kafka)
        if reason is not None:  # no table's record: their topics name none
            return skipped(reason, extra=kafka)
        if "__op" in payload or "__deleted" in payload:
            raise RecordError("a flattened record (ExtractNewRecordState: '__op'/'__deleted') is not a Debezium "
                              "envelope; read the topic before the unwrap transform")
        members = ", ".join(list(payload)[:8])
        raise RecordError(f"'op' missing: not a Debezium change event (members: {members})")
    op_text = payload.get("op")
    if op_text == "m":
        return skipped("message", table=hint(), extra=kafka)
    source = payload.get("source")
    table = envelope_table(source, schema_name, topic, settings) if isinstance(source, dict) else None
    try:
        return _envelope(payload, schema, source, table, key=key, kafka=kafka, settings=settings, parse=parse,
                         images=images)
    except RecordError as exc:  # quarantined under its table when the record names one
        return failed(str(exc), table=table)


def _envelope(
    payload: Mapping[str, Any], schema: Mapping[str, Any] | None, source: Any, table: str | None, *,
    key: Key | None, kafka: Pairs, settings: Settings, parse: Any, images: Images | None = None,
) -> Row:
    op_text = payload.get("op")
    op = OPS.get(op_text) if isinstance(op_text, str) else None
    if op is None:
        raise RecordError(f"unknown op '{plain_text(op_text)}' (expected one of {_OP_LIST})")
    if not isinstance(source, dict):
        raise RecordError(f"'source' missing for op '{op_text}' (expected an object)")
    if not table:
        raise RecordError("table unknown: 'source' names no table and no schema name or topic gives one")
    connector = connector_of(source)
    op_ts = op_ts_micros(payload, source)
    if op_ts is None:
        raise RecordError("'source.ts_ms' missing or not a number (and no envelope 'ts_ms')")

    kcols = key_columns(key, connector, settings, parse)
    before, after = _images(payload, schema, op, op_text, kcols, connector, settings, parse, images)
    pairs = _source_pairs(payload, source, kafka)
    pos, positional = connector_position(source, connector, op)
    if settings.sequence_by == ("op_ts",):
        seq = None
    elif settings.sequence_by:
        pos = _lookup_order(pairs, settings.sequence_by)
        seq = pos
    else:
        seq = pos if positional else None
    tx = payload.get("transaction")
    txid = _text(tx.get("id")) if tx is not None and isinstance(tx, Mapping) else None
    txid = txid or _text(source.get("txId"))
    keys = _key_names(kcols, after or before)
    return Row(table=table, op=op, op_ts=op_ts, pos=pos, seq=seq, txid=txid, keys=keys,
               before=before, after=after, source=pairs)


def _key_names(kcols: Pairs | None, image: Pairs | None) -> list[str] | None:
    """The key's column names, spelled as the image spells them."""
    if not kcols:
        return None
    names = [n for n, _ in kcols]
    if not image:
        return names
    spelled = {c for c, _ in image}
    by_lower = {c.lower(): c for c in spelled}
    return [n if n in spelled else by_lower.get(n.lower(), n) for n in names]


def _images(
    payload: Mapping[str, Any], schema: Mapping[str, Any] | None, op: str, op_text: str, kcols: Pairs | None,
    connector: str, settings: Settings, parse: Any, images: Images | None = None,
) -> tuple[Pairs | None, Pairs | None]:
    """The before and after images the op carries (insert/read: after; update: both; delete:
    before, else the key's columns; truncate: none), checked."""
    if op == "T":
        return None, None
    raw_before, raw_after = payload.get("before"), payload.get("after")
    if connector == "mongodb" or isinstance(raw_after, str) or isinstance(raw_before, str):
        before = mongo_document(raw_before, "before", parse)
        after = mongo_document(raw_after, "after", parse)
        if op == "U" and after is None:
            after = mongo_update(payload, kcols, parse)
    elif images is not None:
        read_before, read_after = images
        before = (read_before.pairs(raw_before, "before") if read_before
                  else image_pairs(raw_before, None, settings.placeholders, "before"))
        after = (read_after.pairs(raw_after, "after") if read_after
                 else image_pairs(raw_after, None, settings.placeholders, "after"))
    else:
        before = image_pairs(raw_before, image_fields(schema, "before"), settings.placeholders, "before")
        after = image_pairs(raw_after, image_fields(schema, "after"), settings.placeholders, "after")
    if op in ("I", "R", "U") and after is None:
        raise RecordError(f"'after' missing for op '{op_text}' (expected an object)")
    if op == "D" and before is None:
        if not kcols:
            raise RecordError("'before' missing for op 'd' and no key record gives the row's key")
        before = list(kcols)
    if op in ("I", "R"):
        return None, after
    if op == "D":
        return before, None
    return before, after
