"""Avro writer schemas as the Kafka Connect schemas they stand for.

:func:`connect_schema` turns an Avro writer schema back into the Kafka Connect schema Confluent's
``AvroData`` made it from (``connect.type``, ``connect.name``, ``connect.parameters``; a plain
Avro ``logicalType`` maps to the Connect type that means the same), and
:func:`without_logical_types` strips Avro's logical types so that fastavro gives raw ints and
bytes, read exactly through the Connect names
(:func:`lakecdc.decode.kafka.connect_values.column_text`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakecdc.decode.avro.registry import qualified_name

_PRIMITIVE = {"null": "null", "boolean": "boolean", "int": "int32", "long": "int64", "float": "float32",
              "double": "float64", "bytes": "bytes", "string": "string"}
#: Avro logical types without ``connect.name``: the Kafka Connect type that reads the same.
_LOGICAL = {
    "decimal": "org.apache.kafka.connect.data.Decimal",
    "date": "org.apache.kafka.connect.data.Date",
    "time-millis": "org.apache.kafka.connect.data.Time",
    "time-micros": "io.debezium.time.MicroTime",
    "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
    "timestamp-micros": "io.debezium.time.MicroTimestamp",
    "timestamp-nanos": "io.debezium.time.NanoTimestamp",
}


class _ToConnect:
    """One Avro schema's types as Kafka Connect schemas (``{"type", "name", "parameters",
    "optional", "fields": [{..., "field": name}]}``), named types resolved."""

    def __init__(self) -> None:
        self.named: dict[str, dict[str, Any]] = {}

    def of(self, avro: Any, namespace: str = "") -> dict[str, Any]:
        if isinstance(avro, list):
            return self._union(avro, namespace)
        if isinstance(avro, str):
            if avro in _PRIMITIVE:
                return {"type": _PRIMITIVE[avro]}
            full = avro if "." in avro else f"{namespace}.{avro}" if namespace else avro
            return self.named.get(full) or self.named.get(avro) or {"type": "unknown"}
        if not isinstance(avro, dict):
            return {"type": "unknown"}
        kind = avro.get("type")
        if isinstance(kind, (list, dict)):
            return self.of(kind, namespace)
        if kind in ("record", "error"):
            return self._record(avro, namespace)
        if kind in ("enum", "fixed"):
            out = self._props(avro, {"type": "string" if kind == "enum" else "bytes"})
            self.named[qualified_name(avro, namespace)] = out
            return out
        if kind == "array":
            return self._props(avro, {"type": "array", "items": self.of(avro.get("items"), namespace)})
        if kind == "map":
            return self._props(avro, {"type": "map", "keys": {"type": "string"}, "values": self.of(avro.get("values"), namespace)})
        if isinstance(kind, str) and kind in _PRIMITIVE:
            return self._props(avro, {"type": _PRIMITIVE[kind]})
        return self.of(kind, namespace) if isinstance(kind, str) else {"type": "unknown"}

    def _union(self, branches: list[Any], namespace: str) -> dict[str, Any]:
        real = [b for b in branches if b != "null" and not (isinstance(b, dict) and b.get("type") == "null")]
        optional = len(real) < len(branches)
        if len(real) == 1:
            return {**self.of(real[0], namespace), "optional": optional}
        return {"type": "union", "optional": optional}

    def _record(self, avro: Mapping[str, Any], namespace: str) -> dict[str, Any]:
        full = qualified_name(avro, namespace)
        out: dict[str, Any] = {"type": "struct", "name": avro.get("connect.name") or full, "fields": []}
        self.named[full] = out
        inner = full.rpartition(".")[0]
        out["fields"] = [{**self.of(f.get("type"), inner), "field": str(f.get("name"))}
                         for f in avro.get("fields") or () if isinstance(f, Mapping)]
        params = avro.get("connect.parameters")
        if isinstance(params, Mapping):
            out["parameters"] = {str(k): str(v) for k, v in params.items()}
        return out

    @staticmethod
    def _props(avro: Mapping[str, Any], out: dict[str, Any]) -> dict[str, Any]:
        """Kafka Connect's type, logical name and parameters from the Avro properties."""
        connect_type = avro.get("connect.type")
        if isinstance(connect_type, str):
            out["type"] = connect_type
        logical = avro.get("logicalType")
        name = avro.get("connect.name") or _LOGICAL.get(logical if isinstance(logical, str) else "")
        raw = avro.get("connect.parameters")
        params = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
        if logical == "decimal":
            params.setdefault("scale", str(avro.get("scale", 0)))
            if not avro.get("connect.name") and "precision" in avro:
                params.setdefault("connect.decimal.precision", str(avro["precision"]))
        if name:
            out["name"] = str(name)
        if params:
            out["parameters"] = params
        return out


def connect_schema(avro: Any) -> dict[str, Any]:
    """The Kafka Connect schema an Avro writer schema stands for (see the module docstring)."""
    return _ToConnect().of(avro)


def without_logical_types(avro: Any) -> Any:
    """``avro`` without ``logicalType``: fastavro then gives raw ints and bytes, read exactly by
    :func:`~lakecdc.decode.kafka.connect_values.column_text` through the Connect names."""
    if isinstance(avro, dict):
        return {k: without_logical_types(v) for k, v in avro.items() if k != "logicalType"}
    if isinstance(avro, list):
        return [without_logical_types(v) for v in avro]
    return avro


__all__ = ["connect_schema", "without_logical_types"]
