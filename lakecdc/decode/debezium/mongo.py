"""MongoDB's Debezium events: documents as extended JSON text, updates as ``updateDescription``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakecdc.decode.jsontext import Num, compact_json, plain_text
from lakecdc.decode.rows import Pairs, RecordError

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



__all__ = ["mongo_document", "mongo_update", "mongo_value"]
