"""Qlik Replicate messages as Python values: JSON and Avro envelopes, bare messages, kcat records.

The reading half of :mod:`lakecdc.decoders.qlik` (which explains the format): a message becomes a
:class:`~lakecdc.decoders._qlik.TableVersion` (metadata), a
:class:`~lakecdc.decoders._qlik.DataMessage` (values already exact text) or None (a tombstone), and
then one :class:`~lakecdc.decoders._qlik.Row`. Runs in the executors; the driver uses it for the
files of ``metadataDirectory``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fastavro import parse_schema

from lakecdc.decode.avro.schemas import Mismatch, read_exact
from lakecdc.decode.avro.text import text_converter
from lakecdc.decode.files.splits import Split
from lakecdc.decode.files.staging import split_documents
from lakecdc.decode.jsontext import compact_json, slow_loads
from lakecdc.decode.kafka.records import KCAT_MEMBERS, Message, kafka_pairs, kcat_part, read_messages
from lakecdc.decode.rows import RecordError
from lakecdc.decoders._qlik import (
    BadRecord,
    Catalog,
    DataMessage,
    Pairs,
    Row,
    TableVersion,
    data_row,
    failed,
    metadata_row,
    named_table,
    parse_metadata,
    skipped,
    text_image,
)
from lakecdc.errors import ConfigError

Decoded = TableVersion | DataMessage | None
_ENVELOPE = parse_schema({
    "type": "record", "name": "MessageEnvelope", "fields": [
        {"name": "magic", "type": {"type": "fixed", "name": "Magic", "size": 5}},
        {"name": "type", "type": "string"},
        {"name": "headers", "type": ["null", {"type": "map", "values": "string"}]},
        {"name": "messageSchemaId", "type": ["null", "string"]},
        {"name": "messageSchema", "type": ["null", "string"]},
        {"name": "message", "type": "bytes"},
    ],
})


# -- messages as Python values ------------------------------------------------------------------------


def unwrap(value: Any, *, topic: str | None = None, key: str | None = None, extra: Pairs | None = None) -> Decoded:
    """A parsed JSON message (envelope or bare): its metadata, its data message, or None (tombstone)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise BadRecord(f"not a Qlik Replicate message (expected a JSON object): {compact_json(value)[:60]}")
    if "magic" in value:
        if value.get("magic") != "atMSG":
            raise BadRecord(f"'magic' is {compact_json(value.get('magic'))}, not \"atMSG\" (Replicate's envelope)")
        kind, body = value.get("type"), value.get("message")
        if isinstance(body, str):
            body = slow_loads(body, "'message'")
        if kind == "MD":
            return parse_metadata(body, value.get("messageSchemaId"))
        if kind == "DT":
            return data_message(body, value.get("messageSchemaId"), topic=topic, key=key, extra=extra)
        raise BadRecord(f"envelope 'type' {compact_json(kind)} is neither DT (data) nor MD (metadata)")
    if "lineage" in value or "tableStructure" in value:
        return parse_metadata(value)
    if "headers" in value and ("data" in value or "beforeData" in value):
        return data_message(value, None, topic=topic, key=key, extra=extra)
    raise BadRecord("not a Qlik Replicate message: expected an envelope (magic 'atMSG'), a data message "
                    "(data, beforeData, headers) or a metadata message (lineage, tableStructure)")


def data_message(body: Any, schema_id: Any, *, topic: str | None, key: str | None, extra: Pairs | None) -> DataMessage:
    if not isinstance(body, Mapping):
        raise BadRecord(f"data message: 'message' is not an object: {compact_json(body)[:60]}")
    headers = body.get("headers")
    if not isinstance(headers, Mapping):
        raise BadRecord("data message: 'headers' missing (expected operation, changeSequence, timestamp, ...)")
    sid = None if schema_id is None else str(schema_id).strip() or None
    return DataMessage(headers, text_image(body.get("data"), "data"), text_image(body.get("beforeData"), "beforeData"),
                       schema_id=sid, named_table=named_table(body), topic=topic, key=key, extra=list(extra or []),
                       hex_bytes=True)


def json_value(text: str) -> tuple[Decoded, Pairs, str | None, str | None]:
    """One line: ``(decoded message, kafka pairs, topic, key)`` (a kcat record's payload unwrapped)."""
    record = slow_loads(text)
    if not (isinstance(record, dict) and all(k in record for k in KCAT_MEMBERS)):
        return unwrap(record), [], None, None
    for part in ("key_error", "payload_error"):
        if record.get(part):
            raise BadRecord(f"kcat could not read the record: {part} '{record[part]}'")
    kafka = kafka_pairs(record)
    topic = record.get("topic") if isinstance(record.get("topic"), str) else None
    raw_key = record.get("key")
    key = None if raw_key is None else (raw_key if isinstance(raw_key, str) else compact_json(raw_key))
    if key is not None:
        kafka.append(("kafka.key", key))
    payload = kcat_part(record.get("payload"), "kcat payload")
    return unwrap(payload, topic=topic, key=key, extra=kafka), kafka, topic, key


def to_row(decoded: Decoded, catalog: Catalog, *, topic: str | None = None, key: str | None = None,
           kafka: Pairs | None = None) -> Row:
    if decoded is None:
        table = catalog.table_name(DataMessage({}, None, None, topic=topic, key=key))
        return skipped("tombstone", table, kafka)
    if isinstance(decoded, TableVersion):
        return metadata_row(decoded, kafka)
    return data_row(decoded, catalog)


def guarded(read: Any) -> Row:
    """``read()``'s row; a failed row with the reason when the record cannot be decoded."""
    try:
        return read()
    except BadRecord as exc:
        return failed(str(exc), exc.table)
    except RecordError as exc:
        return failed(str(exc))
    except Exception as exc:  # one odd record must not fail the batch
        return failed(f"could not read the record: {type(exc).__name__}: {exc}")


def json_row(text: str, catalog: Catalog) -> Row:
    def read() -> Row:
        decoded, kafka, topic, key = json_value(text)
        return to_row(decoded, catalog, topic=topic, key=key, kafka=kafka)

    return guarded(read)


class AvroReader:
    """Envelopes to messages, with the parsed schemas cached (one per executor task)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._schemas: dict[str, Any] = {}
        self._data: dict[str, tuple[Any, dict[str, Any]]] = {}

    def envelope(self, payload: bytes) -> dict[str, Any]:
        try:
            env = read_exact(payload, _ENVELOPE)
        except Mismatch as exc:
            raise BadRecord(f"not a Replicate envelope (Avro record MessageEnvelope): {exc}") from None
        if env["magic"] != b"atMSG":
            raise BadRecord(f"envelope magic {env['magic']!r} is not b'atMSG'")
        return env

    def value(self, payload: bytes | None, *, topic: str | None = None, key: str | None = None,
              extra: Pairs | None = None) -> Decoded:
        if not payload:
            return None
        env = self.envelope(payload)
        if env["type"] == "MD":
            return self.metadata(env)
        if env["type"] != "DT":
            raise BadRecord(f"envelope 'type' '{env['type']}' is neither DT (data) nor MD (metadata)")
        sid = (env["messageSchemaId"] or "").strip()
        hint = DataMessage({}, None, None, topic=topic, key=key)
        if not sid:
            raise BadRecord("DT envelope without messageSchemaId: its bytes cannot be read without the dataSchema "
                            "of its metadata message", self.catalog.table_name(hint))
        tv = self.catalog.version_for(DataMessage({}, None, None, schema_id=sid, topic=topic, key=key))
        parsed, converters = self.data_schema(tv)
        try:
            record = read_exact(env["message"], parsed)
        except Mismatch as exc:
            raise BadRecord(f"the dataSchema of {tv.table} version {tv.version} does not read the message: {exc}",
                            tv.table) from None
        if not isinstance(record, dict) or not isinstance(record.get("headers"), dict):
            raise BadRecord(f"the dataSchema of {tv.table} version {tv.version} has no 'headers' record", tv.table)
        return DataMessage(record["headers"], _avro_image(record.get("data"), converters),
                           _avro_image(record.get("beforeData"), converters), schema_id=sid, topic=topic, key=key,
                           extra=list(extra or []))

    def metadata(self, env: Mapping[str, Any]) -> TableVersion:
        text = env["messageSchema"]
        if not text:
            raise BadRecord("MD envelope without messageSchema: lakecdc reads metadata messages by their own schema")
        parsed = self._schemas.get(text)
        if parsed is None:
            try:
                parsed = self._schemas[text] = parse_schema(json.loads(text))
            except Exception as exc:
                raise BadRecord(f"MD envelope: messageSchema is not an Avro schema: {exc}") from None
        try:
            body = read_exact(env["message"], parsed)
        except Mismatch as exc:
            raise BadRecord(f"MD envelope: its messageSchema does not read the message: {exc}") from None
        return parse_metadata(body, env["messageSchemaId"])

    def data_schema(self, tv: TableVersion) -> tuple[Any, dict[str, Any]]:
        key = tv.digest()
        if key not in self._data:
            if not tv.data_schema:
                raise BadRecord(f"the metadata of {tv.table} version {tv.version} has no dataSchema to read "
                                "Avro data messages with", tv.table)
            try:
                schema = json.loads(tv.data_schema)
                self._data[key] = (parse_schema(schema), _converters(schema))
            except Exception as exc:
                raise BadRecord(f"the dataSchema of {tv.table} version {tv.version} is not an Avro schema: {exc}",
                                tv.table) from None
        return self._data[key]


def _converters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """Text converters of the columns of a dataSchema's ``data`` record, by column name."""
    for f in schema.get("fields", []):
        if f.get("name") != "data":
            continue
        branches = f["type"] if isinstance(f["type"], list) else [f["type"]]
        for b in branches:
            if isinstance(b, dict) and b.get("type") == "record":
                return {c["name"]: text_converter(c["type"]) for c in b.get("fields", [])}
    return {}


def _avro_image(values: Any, converters: Mapping[str, Any]) -> dict[str, str | None] | None:
    if values is None:
        return None
    out: dict[str, str | None] = {}
    for k, v in values.items():
        conv = converters.get(k)
        text = conv(v) if conv is not None else (None if v is None else str(v))
        out[k] = text
    return out


def avro_row(m: Message, reader: AvroReader) -> Row:
    def read() -> Row:
        key = m.key.decode("utf-8", "replace") if m.key else None
        kafka = list(m.kafka or [])
        decoded = reader.value(m.data, topic=m.topic, key=key, extra=kafka)
        return to_row(decoded, reader.catalog, topic=m.topic, key=key, kafka=kafka)

    if m.error is not None:
        return failed(m.error)
    row = guarded(read)
    if row.error is not None and isinstance(m.raw, str):  # a kcat line: say which
        row = row._replace(error=f"line {m.row + 1}: {row.error}")
    return row


def avro_metadata(reader: AvroReader, data: bytes) -> TableVersion | None:
    env = reader.envelope(data)
    return reader.metadata(env) if env["type"] == "MD" else None


# -- the metadata a user keeps ------------------------------------------------------------------------------


def _files_under(path: str) -> list[Path]:
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise ConfigError(f"metadataDirectory {path!r} does not exist")
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def load_metadata_directory(path: str, fmt: str) -> list[TableVersion]:
    """The metadata messages in the files under ``path`` (JSON; for qlik-avro also envelopes)."""
    out: list[TableVersion] = []
    reader = AvroReader(Catalog([]))
    for f in _files_under(path):
        head = f.read_bytes()[:64].lstrip()[:1]
        if head in (b"{", b"["):
            for line, doc in split_documents(f.read_text(encoding="utf-8")):
                try:
                    found = json_value(doc)[0]
                except RecordError as exc:
                    raise ConfigError(f"{fmt}: line {line} of {f} (metadataDirectory): {exc}") from None
                if isinstance(found, TableVersion):
                    out.append(found)
        elif fmt == "qlik-avro":
            kind = "single" if f.read_bytes()[:5] == b"atMSG" else "messages"
            for m in read_messages(Split(str(f), kind, 0, f.stat().st_size, 0)):
                if m.error is None and m.data:
                    try:
                        found = avro_metadata(reader, m.data)
                    except RecordError as exc:
                        raise ConfigError(f"{fmt}: byte offset {m.offset} of {f} (metadataDirectory): {exc}") from None
                    if found is not None:
                        out.append(found)
    return out
