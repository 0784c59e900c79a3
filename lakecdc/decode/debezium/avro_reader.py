"""Reading Debezium's Avro in the executors: :class:`Plan`, how the records of one writer schema
are read, and :class:`Reader`, which decodes the splits of ``debezium-avro`` input (Confluent
wire-format messages, kcat dumps, OCF files with their ``.keys.avro``) into canonical rows through
:func:`lakecdc.decode.debezium.envelope.decode_value` (see :mod:`lakecdc.decode.debezium.avro`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

from fastavro import parse_schema, schemaless_reader

from lakecdc.decode.avro.connect import connect_schema, without_logical_types
from lakecdc.decode.avro.containers import ocf_records, read_ocf_header
from lakecdc.decode.avro.registry import Registry, pairs_as_key
from lakecdc.decode.avro.schemas import Mismatch, read_at
from lakecdc.decode.avro.text import text_converter
from lakecdc.decode.debezium.envelope import (
    Images,
    Key,
    decode_value,
    image_readers,
    non_row_reason,
    parse_json,
    same_table,
    schema_change_types,
)
from lakecdc.decode.debezium.rules import envelope_table, name_from_topic
from lakecdc.decode.debezium.settings import Settings
from lakecdc.decode.files.splits import Split
from lakecdc.decode.jsontext import Num, compact_json
from lakecdc.decode.kafka.connect_values import column_name, image_fields, spark_type
from lakecdc.decode.kafka.dumps import WIRE_HEADER
from lakecdc.decode.kafka.records import Message, Out, read_messages
from lakecdc.decode.rows import Pairs, RecordError, Row, failed, skipped


@dataclass(frozen=True)
class Plan:
    """How the records of one writer schema are read."""

    label: str  # "schema id 42 (subject ...)", "the header of x.avro": for messages
    parsed: Any  # fastavro's parsed schema, logical types removed
    connect: dict[str, Any]
    name: str | None  # the record's Connect (else Avro full) name
    role: str  # "value", "key" (pairs with the next value) or "other-key"
    floats: tuple[tuple[str, str, Callable[[float], str | None]], ...]  # (image, column, text)
    images: Images  # the before/after readers, made once
    topic: str | None = None

    @classmethod
    def of(cls, schema: Any, label: str, settings: Settings, topic: str | None = None) -> Plan:
        connect = connect_schema(schema)
        name = connect.get("name") if connect.get("type") == "struct" else None
        role = "value"
        if isinstance(name, str) and name.endswith("Key") and not any(
                f.get("field") == "op" for f in connect.get("fields") or ()):
            role = "key" if pairs_as_key(name) else "other-key"
        floats = []
        for image in ("before", "after"):
            for column, f in (image_fields(connect, image) or {}).items():
                if f.get("type") in ("float32", "float64") and not f.get("name"):
                    floats.append((image, column, text_converter("float" if f["type"] == "float32" else "double")))
        parsed = parse_schema(without_logical_types(schema))
        images = image_readers(connect, settings, ordered=True)
        return cls(label, parsed, connect, name, role, tuple(floats), images, topic)

    def adapt(self, record: Any) -> Any:
        """Float columns as exact number text (the rest :func:`column_text` reads as it is)."""
        if self.floats and isinstance(record, dict):
            for image, column, text in self.floats:
                values = record.get(image)
                if isinstance(values, dict) and isinstance(values.get(column), float):
                    values[column] = Num(text(values[column]))
        return record

    def declared(self, table: str) -> Iterator[tuple[str, str, str]]:
        """``(table, column, Spark type JSON)`` of the envelope's image columns."""
        for image in ("before", "after"):
            for name, f in (image_fields(self.connect, image) or {}).items():
                dtype = spark_type(f)
                if dtype is not None:
                    yield table, column_name(name, f), dtype.json()


# -- reading in the executors --------------------------------------------------------------------


class _Bad(RecordError):
    """A message that cannot be decoded, with the table its schema names (when it names one)."""

    def __init__(self, reason: str, table: str | None = None) -> None:
        super().__init__(reason)
        self.table = table

@dataclass
class Reader:
    """Decodes :class:`Split` s into canonical rows (runs in the executors)."""

    settings: Settings
    registry: Registry | None
    _plans: dict[Any, Plan] = field(default_factory=dict, repr=False)
    #: Avro-sanitised table names (from record names and topics) -> the source block's names
    _tables: dict[str, str] = field(default_factory=dict, repr=False)
    _seen: set[tuple[str | None, str | None, str]] = field(default_factory=set, repr=False)

    # -- schemas
    def by_id(self, schema_id: int) -> Plan:
        plan = self._plans.get(schema_id)
        if plan is None:
            reg = self.registry
            if reg is None or schema_id not in reg.schemas:
                raise _Bad(reg.unknown(schema_id) if reg else f"schema id {schema_id}: no schemaDirectory given")
            plan = self._plans[schema_id] = Plan.of(reg.schemas[schema_id], reg.label(schema_id), self.settings,
                                                     reg.topic(schema_id))
        return plan

    def by_schema(self, key: Any, schema: Any, label: str) -> Plan:
        if key not in self._plans:
            self._plans[key] = Plan.of(schema, label, self.settings)
        return self._plans[key]

    def message(self, data: bytes) -> tuple[Plan, Any]:
        """A wire-format message's schema and datum; :class:`_Bad` when it cannot be read."""
        n = len(data)
        if data[0] != 0:
            raise _Bad(f"wrong magic byte 0x{data[0]:02x}: a Confluent wire-format message starts with 0x00, "
                       "then the 4-byte schema id")
        if n < WIRE_HEADER:
            raise _Bad(f"truncated: {n} byte(s), a Confluent wire-format message has at least {WIRE_HEADER} "
                       "(magic byte and schema id)")
        plan = self.by_id(int.from_bytes(data[1:WIRE_HEADER], "big"))
        try:
            value, end = read_at(data, WIRE_HEADER, plan.parsed)
        except Mismatch as exc:
            raise _Bad(f"{plan.label} does not read the message: {exc}", self._hint(plan)) from None
        if end != n:
            raise _Bad(f"{plan.label} reads {end - WIRE_HEADER} of the message's {n - WIRE_HEADER} body bytes",
                       self._hint(plan))
        return plan, value

    def _hint(self, plan: Plan) -> str | None:
        return self.source_name(name_from_topic(plan.name, self.settings) or name_from_topic(plan.topic, self.settings))

    def source_name(self, table: str | None) -> str | None:
        """The source's own name of a table named after a (sanitised) record name or topic, as
        the envelopes read so far name it."""
        return self._tables.get(table, table) if table else table

    def _learn(self, plan: Plan, topic: str | None, row: Row) -> Row:
        """Remember the source's name of the envelope's table; name a skipped row by it."""
        if row.op is not None and row.table:
            seen = (plan.name, topic, row.table)
            if seen not in self._seen:
                self._seen.add(seen)
                for name in (plan.name, topic or plan.topic):
                    hint = name_from_topic(name, self.settings)
                    if hint and hint != row.table:
                        self._tables[hint] = row.table
        elif row.table:
            row = row._replace(table=self.source_name(row.table))
        return row

    def key_of(self, data: bytes | None) -> Key | None:
        """The key a kcat record's key bytes give (None when they are no wire-format key)."""
        if not data:
            return None
        try:
            plan, value = self.message(data)
        except RecordError:
            return None
        return Key(value, plan.connect, compact_json(value)) if isinstance(value, dict) and plan.role != "value" else None

    def table_of(self, plan: Plan, value: Any, topic: str | None) -> str | None:
        """The table an envelope record names (None for other records)."""
        if plan.role != "value" or not isinstance(value, dict) or "op" not in value:
            return None
        source = value.get("source")
        return envelope_table(source, plan.name, topic or plan.topic, self.settings) if isinstance(source, dict) else None

    # -- records to rows
    def value_row(self, plan: Plan, value: Any, key: Key | None, kafka: Pairs, topic: str | None) -> Row:
        try:
            row = decode_value(plan.adapt(value), plan.connect, key=key, kafka=kafka, topic=topic or plan.topic,
                               settings=self.settings, parse=parse_json, images=plan.images)
            return self._learn(plan, topic, row)
        except RecordError as exc:
            return failed(str(exc))
        except Exception as exc:  # one odd record must not fail the batch
            return failed(f"could not read the record: {type(exc).__name__}: {exc}")

    def rows(self, split: Split) -> Iterator[Out]:
        if split.kind == "bad":
            with open(split.path, "rb") as fh:
                yield Out(0, 0, failed(split.note or "unreadable file"), fh.read(1 << 16))
        elif split.kind == "ocf":
            yield from self._ocf_rows(split)
        else:
            yield from self._message_rows(split)

    def _message_rows(self, split: Split) -> Iterator[Out]:
        held: tuple[Out, Key] | None = None  # a key message, out when the next message is read
        for m in self.messages(split):
            pending, held = held, None
            out, key_row = self._message_row(m, pending[1] if pending else None)
            if pending is not None:
                first = pending[0]
                if key_row is True and out.value.table:  # counted under its value's table
                    first = first._replace(value=first.value._replace(table=out.value.table))
                yield first
            if isinstance(key_row, Key):
                held = (out, key_row)
            else:
                yield out
        if held is not None:
            yield held[0]

    def _message_row(self, m: Message, pending: Key | None) -> tuple[Out, Key | bool | None]:
        """The row of one message, and: the :class:`Key` it is (held for the next message), or
        whether it took ``pending``."""
        if m.error is not None:
            return Out(m.row, m.offset, failed(m.error), m.raw), None
        kafka = list(m.kafka or [])
        key = self.key_of(m.key) if m.key is not None else None
        if not m.data:
            if key is None and pending is not None:
                key = pending
            value = decode_value(None, None, key=key, kafka=kafka, topic=m.topic, settings=self.settings, parse=parse_json)
            value = value._replace(table=self.source_name(value.table))
            return Out(m.row, m.offset, value, m.raw), pending is not None and key is pending
        try:
            plan, record = self.message(m.data)
        except _Bad as bad:
            return Out(m.row, m.offset, failed(self._where(m, str(bad)), table=bad.table), m.raw), None
        kafka.append(("avro.schema_id", str(int.from_bytes(m.data[1:WIRE_HEADER], "big"))))
        if plan.role == "key" and isinstance(record, dict):
            found = Key(record, plan.connect, compact_json(record))
            hint = self.source_name(name_from_topic(plan.name, self.settings))
            return Out(m.row, m.offset, skipped("key", table=hint, extra=[("key", found.text)]), m.raw), found
        if plan.role != "value":
            reason = non_row_reason(record, plan.name) if isinstance(record, dict) else None
            return Out(m.row, m.offset, skipped(reason or "key", extra=kafka), m.raw), None
        took = False
        if key is None and pending is not None and same_table(pending, plan.connect):
            key, took = pending, True
        value = self.value_row(plan, record, key, kafka, m.topic)
        if value.error is not None:
            value = value._replace(error=self._where(m, value.error))
        return Out(m.row, m.offset, value, m.raw), took

    @staticmethod
    def _where(m: Message, reason: str) -> str:
        return f"line {m.row + 1}: {reason}" if isinstance(m.raw, str) else reason

    # -- message files
    def messages(self, split: Split) -> Iterator[Message]:
        return read_messages(split, self.measure, key_measure=self.measure)

    def measure(self, fh: BinaryIO, pos: int) -> tuple[int]:
        """Where the wire-format message at byte ``pos`` of ``fh`` ends (its schema reads its
        datum); :class:`_Bad` when none starts there (a kcat ``-K`` dump's values and keys)."""
        fh.seek(pos)
        head = fh.read(WIRE_HEADER)
        if len(head) < WIRE_HEADER or head[0] != 0:
            raise _Bad("not a Confluent wire-format message (magic byte 0x00, then the 4-byte schema id)")
        plan = self.by_id(int.from_bytes(head[1:], "big"))
        try:
            schemaless_reader(fh, plan.parsed, None)
        except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError...
            raise _Bad(f"{plan.label} does not read the message: {type(exc).__name__}: {exc}") from None
        return (fh.tell(),)

    # -- object container files
    def _ocf_rows(self, split: Split) -> Iterator[Out]:
        with open(split.path, "rb") as fh:
            header = read_ocf_header(fh)
            plan = self.by_schema(("ocf", split.path), header.schema, f"the header of {os.path.basename(split.path)}")
            keys = self._ocf_keys(split.keys) if split.keys else None
            for row, offset, record, error, raw in self.ocf_records(fh, header, plan, split):
                key = next(keys, None) if keys is not None else None
                if error is not None:
                    keys = None  # a bad block's records are not counted: the keys no longer line up
                    yield Out(row, offset, failed(error), raw)
                elif record is None:
                    value = decode_value(None, None, key=key, kafka=[], topic=None, settings=self.settings,
                                         parse=parse_json)
                    table = self.source_name(value.table) or self._hint(plan)  # the file's table
                    yield Out(row, offset, value._replace(table=table), None)
                else:
                    value = self.value_row(plan, record, key, [], None)
                    yield Out(row, offset, value, raw if value.error is not None else None)

    def ocf_records(self, fh: Any, header: Any, plan: Plan, split: Split) -> Iterator[tuple[int, int, Any, str | None, bytes]]:
        """``(row, block offset, record, error, raw)`` of the split's records."""
        return ocf_records(fh, header, plan.parsed, split)

    def _ocf_keys(self, path: str) -> Iterator[Key | None]:
        """The keys of a sink's ``.keys.avro`` file, one per record (None for a null key)."""
        with open(path, "rb") as fh:
            try:
                header = read_ocf_header(fh)
            except ValueError:
                return
            plan = self.by_schema(("ocf", path), header.schema, f"the header of {os.path.basename(path)}")
            whole = Split(path, "ocf", header.length, os.path.getsize(path))
            for _row, _offset, record, error, _raw in self.ocf_records(fh, header, plan, whole):
                if error is not None:
                    return
                yield Key(record, plan.connect, compact_json(record)) if isinstance(record, dict) else None

    # -- declared types
    def types(self, split: Split) -> Iterator[tuple[str, str, str]]:
        """The declared column types of the tables in the split: one record per envelope schema
        read, and every schema-change record's columns (see :mod:`lakecdc.decode.debezium.ddl`)."""
        if split.kind == "bad":
            return
        if split.kind == "ocf":
            yield from self._ocf_types(split)
            return
        done: set[int] = set()
        for m in self.messages(split):
            data = m.data
            if m.error is not None or not data or len(data) < WIRE_HEADER or data[0] != 0:
                continue
            schema_id = int.from_bytes(data[1:WIRE_HEADER], "big")
            if schema_id in done:
                continue
            try:
                plan, record = self.message(data)
            except RecordError:
                done.add(schema_id)
                continue
            if self._schema_change(plan, record):
                yield from schema_change_types(record, self.settings)
                continue
            table = self.table_of(plan, record, m.topic)
            if table or not (isinstance(record, dict) and "op" in record):
                done.add(schema_id)
            if table:
                yield from plan.declared(table)

    def _ocf_types(self, split: Split) -> Iterator[tuple[str, str, str]]:
        with open(split.path, "rb") as fh:
            header = read_ocf_header(fh)
            plan = self.by_schema(("ocf", split.path), header.schema, split.path)
            for _row, _offset, record, _error, _raw in self.ocf_records(fh, header, plan, split):
                if self._schema_change(plan, record):
                    yield from schema_change_types(record, self.settings)
                    continue
                table = self.table_of(plan, record, None)
                if table:
                    yield from plan.declared(table)
                    return

    @staticmethod
    def _schema_change(plan: Plan, record: Any) -> bool:
        return (plan.role == "value" and isinstance(record, dict) and "op" not in record
                and non_row_reason(record, plan.name) == "schema change")


__all__ = ["Plan", "Reader"]
