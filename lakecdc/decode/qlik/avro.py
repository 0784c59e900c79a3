"""Qlik Replicate's Avro envelopes (``qlik-avro``) to rows, and the metadata a user keeps
(``metadataDirectory``: JSON, or Avro envelopes).

Replicate's Avro output is the same envelope as its JSON one, as an Avro record
``MessageEnvelope`` written raw: an ``MD`` envelope embeds the schema of its message, a ``DT``
envelope names the ``schemaId`` of its metadata message, whose ``dataSchema`` reads the message
bytes (see :mod:`lakecdc.decode.qlik.decoders`).
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
from lakecdc.decode.kafka.records import Message, read_messages
from lakecdc.decode.qlik.catalog import BadRecord, Catalog, DataMessage, TableVersion, parse_metadata
from lakecdc.decode.qlik.messages import Decoded, Row, failed, guarded, json_value, to_row
from lakecdc.decode.rows import Pairs, RecordError
from lakecdc.errors import ConfigError

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


__all__ = ["AvroReader", "avro_metadata", "avro_row", "load_metadata_directory"]
