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

**Values** (``before``/``after`` map texts) follow the Kafka Connect schema when the message has
one: see :mod:`lakecdc.decode.kafka.connect_values`. A column whose value is the connector's
*unavailable value placeholder* (PostgreSQL TOAST: ``__debezium_unavailable_value``, also as the
base64 of its bytes, or a list holding only it) is **missing**: it is not a key of the image map,
so the table keeps what it has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lakecdc.decode.debezium.ddl import declared_rows, history, member_map, order_of, table_changes, table_of
from lakecdc.decode.debezium.mongo import mongo_document, mongo_update, mongo_value
from lakecdc.decode.debezium.rules import (
    connector_of,
    connector_position,
    envelope_table,
    name_from_topic,
    op_ts_micros,
    sortable,
    text_of,
)
from lakecdc.decode.debezium.settings import OP_LIST, OPS, Settings
from lakecdc.decode.jsontext import compact_json, plain_text, slow_loads
from lakecdc.decode.kafka.connect_values import (
    ImageReader,
    column_name,
    column_text,
    image_fields,
    image_pairs,
)
from lakecdc.decode.rows import MISSING, Pairs, RecordError, Row, failed, skipped


def parse_json(text: str, what: str = "record") -> Any:
    """JSON with every number kept as its exact text (:class:`~lakecdc.decode.jsontext.Num`)."""
    return slow_loads(text, what)


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
    ``position``) that the pipeline adds to the table: see :mod:`lakecdc.decode.debezium.ddl`."""
    record = history(payload)
    changes = table_changes(payload)
    source = member_map(payload, "source")
    ddl = text_of(record.get("ddl"))
    first = changes[0] if changes else None
    table = table_of(first.ident, connector_of(source)) if first and not settings.table_name else None
    row = skipped("schema change", table=table, extra=[("ddl", ddl), *extra])
    if first is None or not table:
        return row
    if first.kind != "DROP" and first.columns:
        row = row._replace(after=[(c.name, None) for c in first.columns])
    ts = text_of(source.get("ts_ms", payload.get("ts_ms")))  # numbers arrive as exact text (Num)
    if first.keys and ts is not None and ts.isdigit():
        row = row._replace(keys=list(first.keys), op_ts=int(ts) * 1000, pos="")
    return row


def schema_change_types(payload: Mapping[str, Any], settings: Settings) -> Iterator[tuple[str, str, str]]:
    """The declared-types rows (:func:`~lakecdc.decode.debezium.ddl.declared_rows`) of a
    schema-change record, ordered by the connector's position, then the time (none with the
    ``tableName`` option: the record names no table then)."""
    if settings.table_name:
        return
    source = member_map(payload, "source")
    connector = connector_of(source)
    pos, _positional = connector_position(source, connector, "I")
    order = order_of(pos, op_ts_micros(payload, source))
    yield from declared_rows(table_changes(payload), connector, order)


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


def same_table(key: Key, schema: Mapping[str, Any] | None) -> bool:
    """A key belongs to the next value unless both schemas name different tables (the part
    before ``.Key`` / ``.Envelope``; seed 001's own key and value differ in the schema part)."""
    value_name = schema.get("name") if isinstance(schema, Mapping) else None
    key_name = key.schema_name
    if not value_name or not key_name:
        return True
    return key_name.rsplit(".", 2)[-2:-1] == value_name.rsplit(".", 2)[-2:-1]


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
    if not isinstance(op_text, str) or op_text not in OPS:
        raise RecordError(f"unknown op '{plain_text(op_text)}' (expected one of {OP_LIST})")
    op = OPS[op_text]
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
    txid = text_of(tx.get("id")) if tx is not None and isinstance(tx, Mapping) else None
    txid = txid or text_of(source.get("txId"))
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


__all__ = [
    "Images", "Key", "decode_value", "image_readers", "key_columns", "looks_like_key", "non_row_reason",
    "parse_json", "same_table", "schema_change", "schema_change_types", "transaction_marker",
]
