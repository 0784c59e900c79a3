"""Qlik Replicate messages to rows, without Spark: JSON envelopes and bare messages, kcat records,
metadata and data messages.

A message becomes a :class:`~lakecdc.decode.qlik.catalog.TableVersion` (metadata), a
:class:`~lakecdc.decode.qlik.catalog.DataMessage` (values already exact text) or None (a
tombstone), and then one :class:`Row` (:func:`to_row`): :func:`metadata_row` or
:func:`data_row`. Runs in the executors (the driver reads the files of ``metadataDirectory``
with it). The format is explained in :mod:`lakecdc.decode.qlik.decoders`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from lakecdc.decode.jsontext import compact_json, plain_text, slow_loads
from lakecdc.decode.kafka.records import KCAT_MEMBERS, kafka_pairs, kcat_part
from lakecdc.decode.qlik.catalog import BadRecord, Catalog, DataMessage, TableVersion, parse_metadata
from lakecdc.decode.qlik.masks import mask_text, masks
from lakecdc.decode.rows import Pairs, RecordError
from lakecdc.decode.spec import Op, OpTable

#: ``headers.operation`` -> canonical op (REFRESH: a row of the full load, an upsert).
OPERATIONS: dict[str, Op] = {"REFRESH": "R", "INSERT": "I", "UPDATE": "U", "DELETE": "D"}
#: The op table (``operation`` is also read trimmed and in capitals).
OPS = OpTable(OPERATIONS, normal="upper-trim", expected="REFRESH, INSERT, UPDATE or DELETE")
_DIGITS = re.compile(r"[0-9]+")
_COUNTER = re.compile(r"[0-9]{1,18}")
#: headers copied into ``source`` as text, in this order
HEADER_NAMES = ("operation", "changeSequence", "timestamp", "streamPosition", "transactionId",
                "transactionEventCounter", "transactionLastEvent", "externalSchemaId", "changeMask", "columnMask")


class Row(NamedTuple):
    """One decoded record (``before``/``after``/``source`` as key-value pairs)."""

    table: str | None
    op: str | None
    ts: str | None  # headers.timestamp as written (parsed in Spark)
    pos: str | None  # changeSequence
    counter: str | None  # transactionEventCounter as digits
    seq: str | None  # only for metadata rows (data rows get theirs in Spark)
    txid: str | None
    keys: list[str] | None
    before: Pairs | None
    after: Pairs | None
    source: Pairs
    error: str | None


def failed(reason: str, table: str | None = None, source: Pairs | None = None) -> Row:
    """A record that cannot be decoded (``reason``: the quarantine's), of ``table`` when known."""
    return Row(table, None, None, None, None, None, None, None, None, None, source or [], reason)


def skipped(reason: str, table: str | None = None, extra: Pairs | None = None) -> Row:
    """A record that is no row change (``reason``: its kind), counted, never applied."""
    return Row(table, None, None, None, None, None, None, None, None, None, [("skipped", reason), *(extra or [])], None)


# -- metadata messages -------------------------------------------------------------------------------


def metadata_seq(tv: TableVersion) -> str:
    """A metadata row's seq: its lineage timestamp's digits in changeSequence form (whose first 17
    digits are a time), so that of two versions' keys in one run the newer one's count."""
    digits = re.sub(r"[^0-9]", "", tv.timestamp or "")[:35]
    return f"{digits.ljust(35, '0')}|{'0' * 10}"


def metadata_row(tv: TableVersion, extra: Pairs | None = None) -> Row:
    """A metadata message: a skipped record whose keys are the table's (schema information)."""
    source: Pairs = [("skipped", "metadata"), ("table_version", str(tv.version)), ("schema_id", tv.schema_id)]
    source += [(f"lineage.{k}", v) for k, v in tv.lineage if k in ("server", "task")]
    source += [("lineage.timestamp", tv.timestamp), *(extra or [])]
    return Row(tv.table, None, None, None, None, metadata_seq(tv), None, list(tv.keys) or None, None, None,
               [(k, v) for k, v in source if v is not None], None)


# -- data messages -----------------------------------------------------------------------------------


def header_text(value: Any) -> str | None:
    """A header's value as text (a mask's bytes as hex, a number as written)."""
    if type(value) is str:  # the common case, first
        return value
    if isinstance(value, (bytes, bytearray)):
        return mask_text(value)
    text = plain_text(value)
    return None if text is None else str(text)


def _image(values: Mapping[str, str | None] | None, present: frozenset[str] | None) -> Pairs | None:
    if values is None:
        return None
    return [(k, v) for k, v in values.items() if present is None or k in present]


def data_row(m: DataMessage, catalog: Catalog) -> Row:
    """The canonical row of one data message (:class:`BadRecord` when it cannot be decoded)."""
    h = m.headers
    operation = h.get("operation")
    op = OPS.lookup(operation)[0] if isinstance(operation, str) else None
    if op is None:
        raise BadRecord(f"unknown headers.operation {compact_json(operation)} (expected {OPS.expected})", catalog.hint(m))
    tv = catalog.version_for(m)
    for image, values in (("data", m.data), ("beforeData", m.before)):
        extra = sorted(set(values) - tv.names) if values and not tv.names.issuperset(values) else None
        if extra:
            raise BadRecord(f"'{image}' has column(s) {', '.join(extra)} that {tv.table} version {tv.version} "
                            "does not have: the message was not written with that metadata", tv.table)
    sequence = header_text(h.get("changeSequence")) or ""
    if sequence and not _DIGITS.fullmatch(sequence):
        raise BadRecord(f"headers.changeSequence '{sequence}' is not a number (it orders the changes)", tv.table)
    if not sequence and op != "R":
        raise BadRecord(f"headers.changeSequence missing for operation {operation} (it orders the changes)", tv.table)
    counter = header_text(h.get("transactionEventCounter"))
    if counter is not None and not _COUNTER.fullmatch(counter):
        raise BadRecord(f"headers.transactionEventCounter '{counter}' is not a whole number", tv.table)
    present, changed = masks(h, tv)
    keep = frozenset(present) if present is not None else None
    data, before_data = m.data, m.before
    if m.hex_bytes and tv.binary_columns:
        data, before_data = _hex_to_base64(data, tv, "data"), _hex_to_base64(before_data, tv, "beforeData")
    before, after = _images(op, operation, _image(data, keep), _image(before_data, keep), tv.table)
    source: Pairs = [(name, header_text(h.get(name))) for name in HEADER_NAMES if name in h]
    source += [("changed_columns", ",".join(changed) if changed is not None else None),
               ("present_columns", ",".join(present) if present is not None else None),
               ("version_mask", tv.ordinal_mask if present is not None or changed is not None else None),
               ("table_version", str(tv.version)), ("schema_id", tv.schema_id),
               ("messageSchemaId", m.schema_id), *m.extra]
    txid = header_text(h.get("transactionId")) or None
    return Row(tv.table, op, header_text(h.get("timestamp")) or None, sequence or None, counter, None, txid,
               list(tv.keys) or None, before, after, [(k, v) for k, v in source if v not in (None, "")], None)


def _hex_to_base64(values: Mapping[str, str | None] | None, tv: TableVersion, image: str) -> Mapping[str, str | None] | None:
    """``values`` with the binary columns' hex digits (how Replicate's JSON writes bytes) as base64
    (how lakecdc's images carry bytes, :mod:`lakecdc.changes.columns`)."""
    if values is None:
        return None
    out = dict(values)
    for column in tv.binary_columns:
        text = out.get(column)
        if text is None:
            continue
        try:
            out[column] = base64.b64encode(bytes.fromhex(text)).decode("ascii")
        except ValueError:
            raise BadRecord(f"'{image}.{column}' ({next(c.type for c in tv.columns if c.name == column)}) "
                            f"'{text[:40]}' is not hexadecimal (Replicate writes bytes as hex digits in JSON)",
                            tv.table) from None
    return out


def _images(op: str, operation: Any, data: Pairs | None, before: Pairs | None, table: str) -> tuple[Pairs | None, Pairs | None]:
    """(before, after): a delete's row is in ``data`` (``beforeData`` when ``data`` is null)."""
    if op == "D":
        row = data if data is not None else before
        if row is None:
            raise BadRecord("'data' and 'beforeData' both missing for operation DELETE (expected the deleted row)", table)
        return row, None
    if data is None:
        raise BadRecord(f"'data' missing for operation {operation} (expected the row)", table)
    return (before if op == "U" else None), data


def text_image(values: Any, name: str) -> dict[str, str | None] | None:
    """A JSON ``data``/``beforeData`` object as text values (numbers exactly as written)."""
    if values is None:
        return None
    if not isinstance(values, Mapping):
        raise BadRecord(f"'{name}' is not an object: {compact_json(values)[:80]}")
    out: dict[str, str | None] = {}
    for k, v in values.items():
        if type(v) is not str and v is not None:  # numbers, booleans, objects: their exact text
            text = plain_text(v)
            v = None if text is None else str(text)
        out[k] = v
    return out


def named_table(message: Mapping[str, Any]) -> str | None:
    """``schema.table`` from a data message's own ``schema``/``table`` members (seed 003 lists them)."""
    table = message.get("table")
    if not isinstance(table, str) or not table.strip():
        return None
    schema = message.get("schema")
    return f"{schema}.{table}" if isinstance(schema, str) and schema.strip() else table


# -- messages as Python values ------------------------------------------------------------------------

#: What a message is: a table version (metadata), a data message, or None (a tombstone).
Decoded = TableVersion | DataMessage | None


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
    """A JSON data message's body (``data``, ``beforeData``, ``headers``), values as exact text."""
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
    """The row of a message: a tombstone (None) is skipped, metadata a skipped row with keys."""
    if decoded is None:
        table = catalog.table_name(DataMessage({}, None, None, topic=topic, key=key))
        return skipped("tombstone", table, kafka)
    if isinstance(decoded, TableVersion):
        return metadata_row(decoded, kafka)
    return data_row(decoded, catalog)


def guarded(read: Callable[[], Row]) -> Row:
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
    """The row of one JSON line (a failed row when it cannot be decoded)."""
    def read() -> Row:
        decoded, kafka, topic, key = json_value(text)
        return to_row(decoded, catalog, topic=topic, key=key, kafka=kafka)

    return guarded(read)


__all__ = [
    "HEADER_NAMES", "OPERATIONS", "OPS", "Decoded", "Row", "data_message", "data_row", "failed", "guarded", "header_text",
    "json_row", "json_value", "metadata_row", "metadata_seq", "named_table", "skipped", "text_image", "to_row", "unwrap",
]
