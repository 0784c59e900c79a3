"""kcat records whose key and value kcat's own Avro deserialiser rendered as JSON.

``kcat -C -s value=avro -s key=avro -r <registry> -J`` decodes each Confluent wire-format message
with the registry's schema and prints the datum in **Avro's JSON encoding** (libserdes, avro-c's
``avro_value_to_json``) inside its ``-J`` record, followed by the schema id::

    {"topic": "server1.INVENTORY.CUSTOMERS", "partition": 0, "offset": 7, ..., "key": {"ID": 1001},
     "key_schema_id": 3, "payload": {"before": null, "after": {"Value": {"ID": 1001, "NAME":
     {"string": "Sally"}, "BALANCE": {"bytes": "\\u0004\\u00d2"}}}, "source": {..., "txId":
     {"string": "06.1.807"}}, "op": "c", "ts_ms": {"long": 1700000000500}, "transaction": null},
     "value_schema_id": 4}

In that encoding a non-null union value is wrapped as ``{"<branch>": value}`` (the branch is the
primitive type's name, or a named type's name: avro-c writes the short name, ``Value``, Java the
full name, ``server1.INVENTORY.CUSTOMERS.Value``; both are read), ``bytes`` and ``fixed`` are
strings of the code points U+0000..U+00FF (one per byte), and Connect's logical types are their
Avro base values (a Decimal is ``bytes``, a MicroTimestamp a ``long``).

A record is read this way when it carries ``value_schema_id``/``key_schema_id``, or when its
value is a union-wrapped envelope (a top-level or ``source`` member wrapped as ``{"long": ...}``,
``{"string": ...}``, ..., or an image wrapped in a record name ending in ``Value``). The result is
the canonical event the JSON converter's form of the same change gives:

* **with the writer schema** (option ``schemaDirectory``, as ``debezium-avro`` reads it: ``<id>.avsc``
  files or a schema-registry export; the record's schema id picks it): the datum is turned back
  into what the Avro decoder gives (unions resolved by the schema, bytes as bytes, floats as
  floats) and read exactly as ``debezium-avro`` reads it (the Connect types from the Avro
  properties: a Decimal scaled, a MicroTimestamp as ISO text, ...). A schema id the directory does
  not hold is a per-record error naming it.
* **without it**: unions are unwrapped by their shape and the values read as schemaless JSON
  (logical types stay their base values, as with ``schemas.enable=false``). A ``bytes`` value
  cannot be read without the schema (it may be a Decimal, which needs its scale): such a record
  is quarantined with a reason saying to give ``schemaDirectory``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from lakecdc.decode.avro.schemas import expand_names
from lakecdc.decode.debezium.avro_reader import Plan
from lakecdc.decode.debezium.envelope import Key, decode_value
from lakecdc.decode.debezium.settings import Settings
from lakecdc.decode.jsontext import compact_json, slow_loads
from lakecdc.decode.rows import Pairs, RecordError, Row

if TYPE_CHECKING:
    from lakecdc.decode.avro.registry import Registry

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_BRANCHES = frozenset({*_PRIMITIVES, "array", "map"})
#: Short record names avro-c writes for Debezium's union branches (a full name has a dot).
_SHORT_NAMES = frozenset({"Value", "Key", "Envelope", "Source", "block"})


def _wrapper(value: Any) -> str | None:
    """The branch name of a union-wrapped value (``{"long": 5}``), else None."""
    if type(value) is dict and len(value) == 1:
        (name,) = value
        return name if name in _BRANCHES or "." in name or name in _SHORT_NAMES else None
    return None


def is_avro_json(record: Mapping[str, Any]) -> bool:
    """A kcat record rendered by kcat's Avro deserialiser (see the module docstring)."""
    if "value_schema_id" in record or "key_schema_id" in record:
        return True
    payload = record.get("payload")
    if type(payload) is not dict:
        return False
    source = payload.get("source")
    members = [*payload.values(), *(source.values() if type(source) is dict else ())]
    for value in members:
        name = _wrapper(value)
        if name in _PRIMITIVES or (name is not None and name.endswith("Value") and type(value[name]) is dict):
            return True
    return False


# -- without the schema ------------------------------------------------------------------------------


def unwrap(value: Any, where: str = "") -> Any:
    """A datum in Avro's JSON encoding with its unions unwrapped by shape (no schema);
    ``where``: the member path, for errors."""
    kind = type(value)
    if kind is dict:
        name = _wrapper(value)
        if name is not None:
            inner = value[name]
            if name == "bytes":
                raise RecordError(
                    f"'{where or 'value'}': an Avro bytes value (a Decimal or a binary column) cannot be read from kcat's "
                    "Avro JSON without the writer schema: set schemaDirectory to the schema-registry export "
                    "holding the record's value_schema_id"
                )
            if name in _BRANCHES or type(inner) is dict:
                return unwrap(inner, where)
        return {k: unwrap(v, f"{where}.{k}" if where else k) for k, v in value.items()}
    if kind is list:
        return [unwrap(v, where) for v in value]
    return value


# -- with the schema ---------------------------------------------------------------------------------


def _branch_name(schema: Any, named: Mapping[str, Any]) -> set[str]:
    """The names a union branch may be written with (``schema`` and ``named`` as
    :func:`~lakecdc.decode.avro.schemas.expand_names` gives them): a primitive's name; a named type's
    full name, as Java writes it, and its short name, as avro-c writes it."""
    if isinstance(schema, str):
        target = named.get(schema)
        return _branch_name(target, named) if target is not None else {schema}
    if isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            full = str(schema.get("name", ""))
            return {full, full.rpartition(".")[2]}
        return _branch_name(kind, named) if isinstance(kind, (str, dict)) else {str(kind)}
    return set()


def _latin1(value: Any, where: str) -> bytes:
    if not isinstance(value, str):
        raise RecordError(f"{where}: expected Avro bytes as a JSON string, found {compact_json(value)[:60]}")
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        raise RecordError(f"{where}: Avro bytes in JSON hold only U+0000..U+00FF, found another character") from None


def datum(schema: Any, value: Any, named: Mapping[str, Any], where: str = "value") -> Any:
    """``value`` (Avro's JSON encoding of ``schema``) as the Avro decoder (fastavro, without
    logical types) gives it: unions resolved, bytes as bytes, records with every field in order."""
    if isinstance(schema, list):
        if value is None:
            return None
        if type(value) is not dict or len(value) != 1:
            raise RecordError(f"{where}: a union value must be null or {{\"<type>\": value}}, found {compact_json(value)[:60]}")
        ((name, inner),) = value.items()
        for branch in schema:
            if name in _branch_name(branch, named):
                return datum(branch, inner, named, where)
        raise RecordError(f"{where}: union branch '{name}' is not in the writer schema")
    if isinstance(schema, str):
        if schema not in _PRIMITIVES:
            target = named.get(schema)
            if target is None:
                raise RecordError(f"{where}: the writer schema names an unknown type '{schema}'")
            return datum(target, value, named, where)
        return _primitive(schema, value, where)
    if not isinstance(schema, dict):
        raise RecordError(f"{where}: the writer schema is not an Avro schema")
    kind = schema.get("type")
    if kind in ("record", "error"):
        if type(value) is not dict:
            raise RecordError(f"{where}: expected a record, found {compact_json(value)[:60]}")
        out = {}
        for f in schema.get("fields") or ():
            name = str(f.get("name"))
            if name in value:
                out[name] = datum(f.get("type"), value[name], named, f"column '{name}'")
            else:
                out[name] = f.get("default")
        return out
    if kind == "array":
        return [datum(schema.get("items"), v, named, where) for v in value or ()]
    if kind == "map":
        return {k: datum(schema.get("values"), v, named, where) for k, v in (value or {}).items()}
    if kind == "enum":
        return value
    if kind == "fixed":
        return _latin1(value, where)
    return datum(kind, value, named, where)


def _primitive(kind: str, value: Any, where: str) -> Any:
    if value is None:
        return None
    if kind in ("bytes",):
        return _latin1(value, where)
    if kind in ("int", "long"):
        return int(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else value
    if kind in ("float", "double"):
        return float(value) if isinstance(value, (int, str)) and not isinstance(value, bool) else value
    return value


class AvroJson:
    """Reads kcat's Avro-JSON records (one reader per partition: schemas prepared once per id)."""

    def __init__(self, settings: Settings, registry: Registry | None) -> None:
        self.settings = settings
        self.registry = registry
        self._plans: dict[int, tuple[Plan, Any, dict[str, Any]]] = {}

    def _plan(self, schema_id: Any) -> tuple[Plan, Any, dict[str, Any]] | None:
        """``(plan, writer schema, its named types)`` of a schema id; None without a schema
        directory or schema id."""
        reg = self.registry
        if reg is None or not isinstance(schema_id, int) or isinstance(schema_id, bool):
            return None
        known = self._plans.get(schema_id)
        if known is None:
            if schema_id not in reg.schemas:
                raise RecordError(reg.unknown(schema_id))
            schema = reg.schemas[schema_id]
            expanded, named = expand_names(schema)
            plan = Plan.of(schema, reg.label(schema_id), self.settings, reg.topic(schema_id))
            known = self._plans[schema_id] = (plan, expanded, named)
        return known

    def _part(self, raw: Any, schema_id: Any, what: str) -> tuple[Any, Mapping[str, Any] | None, Plan | None]:
        if isinstance(raw, str):  # kcat's JSON verbatim is an object; text would be JSON in a string
            raw = slow_loads(raw, what)
        known = self._plan(schema_id)
        if known is None:
            return unwrap(raw), None, None
        plan, schema, named = known
        value = plan.adapt(datum(schema, raw, named))
        return value, plan.connect, plan

    def row(self, record: Mapping[str, Any], kafka: Pairs, topic: str | None) -> Row:
        key = None
        raw_key = record.get("key")
        if raw_key is not None:
            kafka.append(("kafka.key", raw_key if isinstance(raw_key, str) else compact_json(raw_key)))
            try:
                key_value, key_schema, _ = self._part(raw_key, record.get("key_schema_id"), "kcat key")
            except RecordError:
                key_value, key_schema = None, None  # a key that cannot be read names no columns
            if isinstance(key_value, dict):
                key = Key(key_value, key_schema, compact_json(key_value))
        payload, schema, plan = self._part(record.get("payload"), record.get("value_schema_id"), "kcat payload")
        topic = topic or (plan.topic if plan else None)
        return decode_value(payload, schema, key=key, kafka=kafka, topic=topic, settings=self.settings,
                            parse=slow_loads, images=plan.images if plan else None)


__all__ = [
    "AvroJson", "datum", "is_avro_json", "unwrap",
]
