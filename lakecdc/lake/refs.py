"""How a target's Delta tables are named.

A table is named by a string, its *ref*: a path or URI of a Delta table, or ``catalog:<name>``
for a table in the Spark session's catalog (``catalog:main.sales.orders``), which only the
delta-spark engine can reach (:func:`catalog_name`).
"""

from __future__ import annotations

import hashlib
import re

from lakecdc.errors import ConfigError

#: The prefix of a target ref naming a catalog table instead of a path.
CATALOG = "catalog:"
#: Between a catalog table's name and the location of its files (an external table).
_AT = " LOCATION "
_SLUG = re.compile(r"[^0-9A-Za-z_]")


def catalog_name(ref: str) -> str | None:
    """The catalog table name a ref names (``catalog:main.sales.orders`` -> ``main.sales.orders``),
    or None for a path."""
    return ref[len(CATALOG):].split(_AT, 1)[0] if ref.startswith(CATALOG) else None


def catalog_location(ref: str) -> str | None:
    """Where an external catalog table keeps its files (None: a managed table, or a path)."""
    if not ref.startswith(CATALOG) or _AT not in ref:
        return None
    return ref.split(_AT, 1)[1]


def catalog_ref(name: str, location: str | None = None) -> str:
    """The ref of catalog table ``name`` (external at ``location`` when given)."""
    if not name or not name.strip() or "`" in name or any(c in name for c in "\n\r\t"):
        raise ConfigError(f"catalog table name {name!r}: expected catalog.schema.table (or schema.table)")
    return CATALOG + name.strip() + (_AT + str(location) if location else "")


def catalog_table_for(prefix: str, table: str) -> str:
    """The catalog table a source table gets under a ``catalog.schema`` prefix: its name in lower
    case, ``.`` and other characters outside ``[0-9a-z_]`` as ``_``, and, when characters other
    than ``.`` were replaced, 8 hex digits of its SHA-256 so that no two source tables meet
    (``SRC.ORDERS`` -> ``<prefix>.src_orders``, ``a/b`` -> ``<prefix>.a_b_1b2c3d4e``)."""
    flat = table.replace(".", "_")
    slug = _SLUG.sub("_", flat).lower()
    if _SLUG.search(flat) or not slug:
        slug += "_" + hashlib.sha256(table.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{prefix.rstrip('.')}.{slug}"
