"""Alibaba DTS Avro ``Record`` s to rows, without Spark: the published schema, and one Record to one
canonical row (:class:`RecordReader`). The format is explained in :mod:`lakecdc.decode.alibaba.dts`.

* :func:`published_schema` / :func:`published_layouts`: the vendored ``Record`` schema
  (``schemas/dts/``), read with every enum as its index (:class:`Layout`), so that an operation a
  newer DTS adds is the record's problem, not the message's;
* :func:`read_record`: one message as exactly one Record;
* :class:`RecordReader`: a Record as a :class:`~lakecdc.decode.rows.Row`, its values as exact text
  (:mod:`lakecdc.decode.alibaba.dts_values`), and the column types its values declare.
"""

from __future__ import annotations

import functools
import io
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema, schemaless_reader
from pyspark.sql import types as T

from lakecdc.decode.alibaba.dts_values import MYSQL_LONG, MYSQL_WIDE, Values
from lakecdc.decode.rows import MISSING, Pairs, RecordError, Row, failed, skipped
from lakecdc.decode.spec import Op, OpTable

SCHEMA_DIR = Path(__file__).parent / "schemas" / "dts"
NAMESPACE = "com.alibaba.dts.formats.avro"

ROW_OPS: dict[str, Op] = {"INSERT": "I", "UPDATE": "U", "DELETE": "D"}
MARKERS = frozenset({"BEGIN", "COMMIT", "ROLLBACK", "ABORT", "HEARTBEAT", "CHECKPOINT", "COMMAND", "FILL",
                     "FINISH", "CONTROL", "RDB", "NOOP"})
#: The ``operation`` s: rows (``INIT``: a snapshot row, when it has row images; else skipped as
#: ``init``), ``DDL`` skipped as ``ddl``, the markers skipped as their name in lower case.
OPS = OpTable({**ROW_OPS, "INIT": "R"}, skipped={"DDL": "ddl", **{m: m.lower() for m in sorted(MARKERS)}},
              expected="INSERT, UPDATE, DELETE, DDL or a marker")
#: MySQL binlog type codes (``dataTypeNumber`` of MySQL sources) typed without a value
_MYSQL_BY_CODE: dict[int, T.DataType] = {
    **{c: T.LongType() for c in MYSQL_LONG}, **{c: T.DecimalType(20, 0) for c in MYSQL_WIDE},
    4: T.DoubleType(), 5: T.DoubleType(), 7: T.TimestampType(), 10: T.DateType(), 14: T.DateType(),
    12: T.TimestampNTZType(), **{c: T.StringType() for c in (11, 15, 245, 247, 248, 249, 250, 251, 252, 253, 254, 255)},
}
_MYSQL_POSITION = re.compile(r"^(\d+)@(\d+)$")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})

# -- the schema ------------------------------------------------------------------------------------------


def _named_files(directory: Path) -> dict[str, Any]:
    return {p.name[: -len(".avsc")]: json.loads(p.read_text(encoding="utf-8")) for p in sorted(directory.glob("*.avsc"))}


def _full(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


class _EnumsAsInts:
    """A (self-contained) schema with every enum read as its index: an ``int``. Avro writes an enum
    as its index, so the bytes read the same; an index the schema has no symbol for is then the
    record's problem, not the message's."""

    def __init__(self) -> None:
        self.enums: dict[str, list[str]] = {}  # short name -> symbols
        self.defined: set[str] = set()

    def walk(self, node: Any, namespace: str) -> Any:
        if isinstance(node, list):
            return [self.walk(b, namespace) for b in node]
        if isinstance(node, str):
            return self._reference(node, namespace)
        if not isinstance(node, dict):
            raise ValueError(f"not an Avro type: {node!r}")
        kind = node.get("type")
        if kind == "enum":
            self.enums[str(node["name"]).rsplit(".", 1)[-1]] = list(node.get("symbols") or [])
            self.defined.add(_full(str(node["name"]), node.get("namespace", namespace)))
            return "int"
        if kind in ("record", "error"):
            full = _full(str(node["name"]), node.get("namespace", namespace))
            self.defined.add(full)
            inner = full.rpartition(".")[0]
            fields = [{**f, "type": self.walk(f["type"], inner)} for f in node.get("fields") or ()]
            return {**node, "fields": fields}
        if kind == "array":
            return {**node, "items": self.walk(node["items"], namespace)}
        if kind == "map":
            return {**node, "values": self.walk(node["values"], namespace)}
        if isinstance(kind, (list, dict)) or (isinstance(kind, str) and kind not in _PRIMITIVES and kind != "fixed"):
            return self.walk(kind, namespace)
        return node

    def _reference(self, name: str, namespace: str) -> Any:
        if name in _PRIMITIVES:
            return name
        full = _full(name, namespace)
        if full.rsplit(".", 1)[-1] in self.enums:
            return "int"
        if full in self.defined or name in self.defined:
            return full if full in self.defined else name
        raise ValueError(f"the schema names the type {name!r}, which is not defined")


@dataclass(frozen=True)
class Layout:
    """One Record schema as read here: fastavro's parsed schema (enums as indexes) and the enums."""

    parsed: Any
    enums: dict[str, list[str]]
    label: str

    def symbol(self, enum: str, index: Any) -> str | None:
        symbols = self.enums.get(enum, [])
        return symbols[index] if isinstance(index, int) and 0 <= index < len(symbols) else None

    @classmethod
    def of(cls, schema: Any, label: str) -> Layout:
        walker = _EnumsAsInts()
        rewritten = walker.walk(schema, "")
        # parsed once with fastavro's hint, so that reading a message does not parse the schema again
        return cls(parse_schema(rewritten), walker.enums, label)


def published_schema(*, born_timestamp: bool = True) -> dict[str, Any]:
    """The vendored ``Record`` schema, each named type written out where it is first used
    (optionally without ``bornTimestamp``, the field later DTS versions added at the end)."""
    files = _named_files(SCHEMA_DIR)
    seen: set[str] = set()

    def inline(node: Any, namespace: str) -> Any:
        if isinstance(node, list):
            return [inline(b, namespace) for b in node]
        if isinstance(node, str):
            full = _full(node, namespace)
            if node in _PRIMITIVES or full in seen or full not in files:
                return node
            seen.add(full)
            return inline(files[full], full.rpartition(".")[0])
        if not isinstance(node, dict):
            return node
        if node.get("type") in ("record", "enum"):
            full = _full(str(node["name"]), node.get("namespace", namespace))
            seen.add(full)
            namespace = full.rpartition(".")[0]
        return {k: (inline(v, namespace) if k in ("type", "items", "values", "fields") else v) for k, v in node.items()}

    out = inline(files[f"{NAMESPACE}.Record"], NAMESPACE)
    if not born_timestamp:
        out = {**out, "fields": [f for f in out["fields"] if f["name"] != "bornTimestamp"]}
    return out


@functools.lru_cache(maxsize=1)
def published_layouts() -> tuple[Layout, Layout]:
    """The published schema, and the one without ``bornTimestamp`` (older DTS), as :class:`Layout` s."""
    return (Layout.of(published_schema(), "the DTS Record schema"),
            Layout.of(published_schema(born_timestamp=False), "the DTS Record schema without bornTimestamp"))


def is_record_schema(schema: Any) -> bool:
    """Whether an OCF header's schema is a DTS ``Record`` (any namespace: older SDKs used
    ``com.alibaba.alidts.formats.avro``)."""
    if not isinstance(schema, dict) or schema.get("type") != "record" or str(schema.get("name", "")).rsplit(".", 1)[-1] != "Record":
        return False
    names = {f.get("name") for f in schema.get("fields") or () if isinstance(f, dict)}
    return {"operation", "objectName", "fields", "beforeImages", "afterImages"} <= names


def read_record(data: bytes, layout: Layout) -> Any:
    """Decode ``data`` as exactly one Record (union branches as ``(name, value)``)."""
    bio = io.BytesIO(data)
    try:
        value = schemaless_reader(bio, layout.parsed, None, return_record_name=True)
    except Exception as exc:  # fastavro raises EOFError, ValueError, IndexError, UnicodeError...
        raise RecordError(f"{layout.label} does not read the message's {len(data)} bytes ({type(exc).__name__}: "
                          f"{exc}): a cut message, or no DTS Record") from None
    if bio.tell() != len(data):
        raise RecordError(f"{layout.label} reads {bio.tell()} of the message's {len(data)} bytes")
    return value


# -- records to rows ------------------------------------------------------------------------------------


def position(source_position: str, record_id: int) -> str:
    """``sourcePosition`` and the record ``id`` as one string whose order is the stream's (see the
    module docstring)."""
    tail = f"/{record_id:020d}" if record_id >= 0 else f"/-{-record_id:019d}"
    text = source_position.strip()
    m = _MYSQL_POSITION.match(text)
    if m:
        return f"{int(m.group(2)):010d}@{int(m.group(1)):020d}{tail}"
    if text.isdigit() and len(text) <= 20:
        return f"{int(text):020d}{tail}"
    return f"{text}{tail}"


@dataclass
class RecordReader:
    """Decodes DTS Records into canonical rows (runs in the executors)."""

    sequence_by: str = "timestamp"
    fraction: str = "auto"
    _values: dict[str, Values] = field(default_factory=dict, repr=False)

    def values(self, source_type: str) -> Values:
        if source_type not in self._values:
            nanos = self.fraction == "nanos" or (self.fraction == "auto" and source_type == "Oracle")
            self._values[source_type] = Values(source_type, nanos)
        return self._values[source_type]

    def row(self, record: Mapping[str, Any], layout: Layout, kafka: Pairs) -> Row:
        """One Record as a canonical row (skipped for non-row operations, failed when bad)."""
        name = layout.symbol("Operation", record.get("operation"))
        object_name = record.get("objectName") or None
        source = _source_pairs(record, layout, name) + list(kafka)
        if name is None:
            known = ", ".join(layout.enums.get("Operation", []))
            return failed(f"unknown operation: enum index {record.get('operation')} (the Record schema's operations "
                          f"are {known}); a newer DTS may have written it", table=object_name)
        op, kind, _refused = OPS.lookup(name)
        if kind == "ddl":
            sql = next((v for v in (record.get("afterImages"), record.get("beforeImages")) if isinstance(v, str)), None)
            extra = [*source, ("sql", sql)] if sql is not None else source
            return skipped("ddl", table=_object_table(object_name), extra=extra)
        if op == "R" and not isinstance(record.get("afterImages"), list):  # INIT without rows
            op, kind = None, name.lower()
        if op is None:
            if kind is not None:
                return skipped(kind, table=_object_table(object_name), extra=source)
            return failed(f"unknown operation '{name}' (expected {OPS.expected})", table=object_name)
        try:
            return self._event(record, layout, op, object_name, source)
        except RecordError as exc:
            return failed(str(exc), table=object_name)
        except Exception as exc:  # one odd record must not fail the batch
            return failed(f"could not read the record: {type(exc).__name__}: {exc}", table=object_name)

    def _event(self, record: Mapping[str, Any], layout: Layout, op: str, table: str | None, source: Pairs) -> Row:
        if not table:
            raise RecordError(f"'objectName' missing for operation {layout.symbol('Operation', record['operation'])} "
                              "(expected db.table)")
        columns = _fields(record)
        values = self.values(layout.symbol("SourceType", (record.get("source") or {}).get("sourceType")) or "OTHER")
        before = self._image(record, "beforeImages", columns, values, layout) if op in ("U", "D") else None
        after = self._image(record, "afterImages", columns, values, layout) if op in ("I", "U", "R") else None
        pos = position(str(record.get("sourcePosition") or ""), int(record.get("id") or 0))
        txid = str(record.get("sourceTxid") or "")
        return Row(
            table=table, op=op, op_ts=int(record["sourceTimestamp"]) * 1_000_000, pos=pos,
            seq=pos if self.sequence_by == "position" else None, txid=txid if txid not in ("", "0") else None,
            keys=primary_key(record.get("tags") or {}), before=before, after=after, source=source,
        )

    @staticmethod
    def _image(record: Mapping[str, Any], name: str, columns: list[tuple[str, int]], values: Values,
               layout: Layout) -> Pairs:
        image = record.get(name)
        if not isinstance(image, list):
            what = "null" if image is None else f"the string {str(image)[:40]!r}"
            raise RecordError(f"'{name}' is {what} for operation {layout.symbol('Operation', record['operation'])} "
                              "(expected an array of values aligned with 'fields')")
        if len(image) != len(columns):
            raise RecordError(f"'{name}' has {len(image)} value(s) but 'fields' names {len(columns)} column(s)")
        pairs: Pairs = []
        for i, ((column, _type_number), item) in enumerate(zip(columns, image, strict=True)):
            try:
                text = item_text(item, values, layout)
            except RecordError as exc:  # the reason names the element only when there is one
                raise RecordError(f"{name}[{i}] (column '{column}'): {exc}") from None
            if text is not MISSING:
                pairs.append((column, text))
        return pairs

    def types(self, record: Mapping[str, Any], layout: Layout, *, by_code: bool = True
              ) -> Iterator[tuple[str, str, T.DataType]]:
        """``(table, column, type)`` of the record's columns with a value (with ``by_code``, also
        those without one in this record, by their MySQL type code: :meth:`code_types`)."""
        name = layout.symbol("Operation", record.get("operation"))
        table = record.get("objectName")
        if (name not in ROW_OPS and name != "INIT") or not table:
            return
        try:
            columns = _fields(record)
        except RecordError:
            return
        source_type = layout.symbol("SourceType", (record.get("source") or {}).get("sourceType")) or "OTHER"
        values = self.values(source_type)
        typed: set[str] = set()
        for image in ("beforeImages", "afterImages"):
            items = record.get(image)
            if not isinstance(items, list) or len(items) != len(columns):
                continue
            for (column, type_number), item in zip(columns, items, strict=True):
                try:
                    _text, dtype = render_item(item, values, type_number, layout, column)
                except RecordError:
                    continue
                if dtype is not None:
                    typed.add(column)
                    yield table, column, dtype
        if by_code:
            for t, column, dtype in self.code_types(record, layout):
                if column not in typed:
                    yield t, column, dtype

    @staticmethod
    def code_types(record: Mapping[str, Any], layout: Layout) -> Iterator[tuple[str, str, T.DataType]]:
        """``(table, column, type)`` by the MySQL type code (``dataTypeNumber``) where it is
        unambiguous: what a column whose values are all NULL gets (MySQL sources only)."""
        name = layout.symbol("Operation", record.get("operation"))
        table = record.get("objectName")
        source_type = layout.symbol("SourceType", (record.get("source") or {}).get("sourceType"))
        if (name not in ROW_OPS and name != "INIT") or not table or source_type != "MySQL":
            return
        try:
            columns = _fields(record)
        except RecordError:
            return
        for column, type_number in columns:
            if type_number in _MYSQL_BY_CODE:
                yield table, column, _MYSQL_BY_CODE[type_number]


@functools.lru_cache(maxsize=64)
def _kind(name: str) -> str:
    """A union branch's short name (``com.alibaba.dts.formats.avro.Integer`` -> ``Integer``)."""
    return name.rsplit(".", 1)[-1]


def item_text(item: Any, values: Values, layout: Layout) -> Any:
    """One image element as text (None: NULL; ``MISSING``: EmptyObject NONE), as
    :func:`render_item` renders it, without its type (the per-value work of the rows)."""
    if item is None:
        return None
    if type(item) is tuple and len(item) == 2:
        kind = _kind(str(item[0]))
        try:
            return values.text(kind, item[1])
        except RecordError as exc:
            raise RecordError(f"{kind} {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise RecordError(f"{kind} value {item[1]!r:.80} cannot be read: {exc}") from None
    if isinstance(item, int) and not isinstance(item, bool):  # EmptyObject, read by its index
        symbol = layout.symbol("EmptyObject", item)
        if symbol == "NULL":
            return None
        if symbol == "NONE":
            return MISSING
        raise RecordError(f"unknown EmptyObject index {item}")
    raise RecordError(f"not a DTS value: {item!r:.60}")


def render_item(item: Any, values: Values, type_number: int, layout: Layout, where: str) -> tuple[Any, T.DataType | None]:
    """One image element (``None``, ``(kind, value)``, or an EmptyObject index) as text and type."""
    if item is None:
        return None, None
    if isinstance(item, int) and not isinstance(item, bool):  # EmptyObject, read by its index
        symbol = layout.symbol("EmptyObject", item)
        if symbol == "NULL":
            return None, None
        if symbol == "NONE":
            return MISSING, None
        raise RecordError(f"{where}: unknown EmptyObject index {item}")
    if not (isinstance(item, tuple) and len(item) == 2):
        raise RecordError(f"{where}: not a DTS value: {item!r:.60}")
    kind = str(item[0]).rsplit(".", 1)[-1]
    try:
        return values.render(kind, item[1], type_number)
    except RecordError as exc:
        raise RecordError(f"{where}: {kind} {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"{where}: {kind} value {item[1]!r:.80} cannot be read: {exc}") from None


def _fields(record: Mapping[str, Any]) -> list[tuple[str, int]]:
    fields = record.get("fields")
    if not isinstance(fields, list):
        what = "null" if fields is None else f"the string {str(fields)[:40]!r}"
        raise RecordError(f"'fields' is {what} (expected the array of the columns' names and dataTypeNumber)")
    return [(str(f["name"]), int(f.get("dataTypeNumber") or 0)) for f in fields]


def primary_key(tags: Mapping[str, str]) -> list[str] | None:
    """The ``PRIMARY`` columns of the ``pk_uk_info`` tag (None without one)."""
    text = tags.get("pk_uk_info")
    if not text:
        return None
    names = _primary_key(text)
    return None if names is None else list(names)


@functools.lru_cache(maxsize=1024)
def _primary_key(text: str) -> tuple[str, ...] | None:
    """The ``PRIMARY`` columns a ``pk_uk_info`` text names (one table's records repeat the text)."""
    try:
        info = json.loads(text)
    except ValueError:
        raise RecordError(f"tag 'pk_uk_info' is not JSON: {text[:60]!r} (expected {{\"PRIMARY\": [\"col\", ...]}})") from None
    names = info.get("PRIMARY") if isinstance(info, dict) else None
    if not isinstance(names, list) or not names:
        return None
    return tuple(str(n) for n in names)


def _object_table(object_name: str | None) -> str | None:
    """The table a non-row record names: ``objectName`` when it is ``db.table``, else None."""
    return object_name if object_name and "." in object_name else None


def _source_pairs(record: Mapping[str, Any], layout: Layout, operation: str | None) -> Pairs:
    src = record.get("source") or {}
    pairs: Pairs = [
        ("id", str(record.get("id"))), ("sourcePosition", record.get("sourcePosition")),
        ("safeSourcePosition", record.get("safeSourcePosition") or None),
        ("sourceTimestamp", str(record.get("sourceTimestamp"))), ("sourceTxid", record.get("sourceTxid") or None),
        ("sourceType", layout.symbol("SourceType", src.get("sourceType"))), ("sourceVersion", src.get("version")),
        ("operation", operation), ("objectName", record.get("objectName")),
    ]
    if record.get("bornTimestamp") is not None:
        pairs.append(("bornTimestamp", str(record["bornTimestamp"])))
    pairs += [(f"tag.{k}", v) for k, v in (record.get("tags") or {}).items()]
    return [(k, v) for k, v in pairs if v is not None]


__all__ = [
    "MARKERS", "NAMESPACE", "OPS", "ROW_OPS", "SCHEMA_DIR", "Layout", "RecordReader", "is_record_schema", "item_text",
    "position", "primary_key", "published_layouts", "published_schema", "read_record", "render_item",
]
