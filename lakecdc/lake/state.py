"""Where a target keeps its tables and the state that protects them from late events.

Under a target root::

    <target>/<table dir>/                one Delta table per source table (visible rows only;
                                         :func:`table_dir` names the directory)
    <target>/_lakecdc/tombstones/<t>/    Delta table: deleted keys (+ seq) and truncate marks
    <target>/_lakecdc/runs/              run manifests (see lakecdc.lake.ledger)
    <target>/_lakecdc/tables/<t>.json    what a later run needs to know of a table before reading
                                         its batch: its source name and key columns
    <target>/_lakecdc/routes.json        source tables whose Delta table lives elsewhere
                                         (``apply(table_paths=...)``): relative, absolute or a URI
    <target>/_quarantine/                Delta table: records that could not be applied

A tombstone remembers a deleted key's seq so that a late update cannot resurrect the row; it
expires after the retention. A truncate mark (``_cdc_kind = 'T'``, keys NULL) is the table's
truncate watermark: nothing older than it applies again.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from lakecdc.errors import ConfigError, LakecdcError
from lakecdc.lake.ledger import Ledger
from lakecdc.lake.refs import CATALOG, catalog_ref, catalog_table_for

if TYPE_CHECKING:
    from lakecdc.lake.store import Store

_UNSAFE = re.compile(r"[^A-Za-z0-9._$-]")
#: a name kept as it is: safe characters only, not hidden (``_``, ``.``), not too long
_KEPT = re.compile(r"[A-Za-z0-9$-][A-Za-z0-9._$-]*")
#: the longest directory name :func:`table_dir` gives (the table's state files add ``.json.tmp``
#: to it; file systems allow 255 bytes)
MAX_DIR_CHARS = 120
_HASH_CHARS = 12


class TableNameClash(LakecdcError):
    """Two source tables found in one directory: that table fails (the others apply)."""


def table_dir(table: str) -> str:
    """The directory name of a source table's Delta table (and of its state files).

    The rule, one directory per source table:

    * a name of ASCII letters, digits and ``. _ $ -`` that starts with none of ``. _`` (those are
      hidden from Delta and Spark) and has at most :data:`MAX_DIR_CHARS` characters is kept as it
      is: ``QASOURCE.TCUSTORD`` -> ``QASOURCE.TCUSTORD``;
    * any other name becomes a readable slug (other characters as ``_``, a ``t`` before a leading
      ``_`` or ``.``, cut to fit) followed by ``~`` and 12 hex digits of the SHA-256 of the name
      (UTF-8): ``a/b`` -> ``a_b~<hash>``, ``ÄÖ`` -> ``__~<hash>``.

    ``~`` is in no kept name, so a slugged name never meets a kept one, and two slugged names meet
    only if their hashes do; each table's directory records its source name, and a run that finds
    another table's name there fails that table with a message instead of merging the two
    (:func:`check_table_owner`). Tables made by lakecdc versions before this rule (slug without
    hash) stay where they are (:func:`table_path`).
    """
    if len(table) <= MAX_DIR_CHARS and _KEPT.fullmatch(table):
        return table
    return _hashed_dir(table)


def _hashed_dir(table: str) -> str:
    digest = hashlib.sha256(table.encode("utf-8", "surrogatepass")).hexdigest()[:_HASH_CHARS]
    return f"{_legacy_dir(table)[: MAX_DIR_CHARS - _HASH_CHARS - 1]}~{digest}"


def _legacy_dir(table: str) -> str:
    """The directory name lakecdc gave a table before :func:`table_dir`'s rule (not one per table:
    ``a/b`` and ``a_b`` shared one)."""
    name = _UNSAFE.sub("_", table)
    return f"t{name}" if name.startswith(("_", ".")) or not name else name


def _recorded_table(target: str, name: str) -> str | None:
    """The source table recorded for directory ``name`` (``_lakecdc/tables/<name>.json``)."""
    path = Path(target) / "_lakecdc" / "tables" / f"{name}.json"
    try:
        return json.loads(path.read_text())["table"]
    except (OSError, ValueError, KeyError, TypeError):  # none (or a name too long to be one)
        return None


def table_dir_in(target: str, table: str) -> str:
    """``table``'s directory name under ``target`` (its Delta table's, unless routed, and its state
    files'): :func:`table_dir`; or the name an earlier lakecdc version gave it, when the table was
    made under that name (recorded as this table's); or, for a table routed elsewhere because
    another table holds its directory, :func:`table_dir`'s slug-and-hash form."""
    new = table_dir(table)
    old = _legacy_dir(table)
    if old != new and len(old) < 250 and _recorded_table(target, new) is None:
        owner = _recorded_table(target, old)
        # the table's own, or shared with the table recorded there (the ledger says this table
        # was applied to it): then check_table_owner says so instead of moving it silently
        if owner == table or (owner is not None and table not in _routes(target)
                              and _ledger_placed(target, table, old)):
            return old
    if _recorded_table(target, new) not in (None, table) and table in _routes(target):
        return _hashed_dir(table)
    return new


def _ledger_placed(target: str, table: str, name: str) -> bool:
    """Whether a run in ``target``'s ledger applied ``table`` to ``<target>/<name>``."""
    where = Path(target).resolve() / name
    try:
        manifests = Ledger(target).manifests()
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return any(t.get("source_table") == table and t.get("status") == "applied" and isinstance(t.get("target"), str)
               and Path(t["target"]).resolve() == where
               for m in manifests for t in ((m.summary or {}).get("tables") or []))


def check_table_owner(target: str, table: str) -> None:
    """Raise :class:`TableNameClash` when ``table``'s directory holds another source table's state
    (two names that share a directory under an earlier lakecdc's rule, or on a file system that
    ignores case)."""
    name = table_dir_in(target, table)
    owner = _recorded_table(target, name)
    if owner is not None and owner != table:
        raise TableNameClash(
            f"table {table!r}: its directory {table_path(target, table)} holds table {owner!r} (two source "
            f"tables there, by an earlier lakecdc's naming rule or a file system that ignores case); "
            f"lakecdc does not merge them: give {table!r} a place of its own (apply(table_paths="
            f"{{{table!r}: '<new dir>'}}), or a job's tables.paths), then run again"
        )


def table_path(target: str, table: str) -> str:
    """Where ``table``'s Delta table lives: ``<target>/<table_dir(table)>``, unless a route says
    otherwise (or the table was made under an earlier lakecdc's name: see :func:`table_dir_in`)."""
    routes = _routes(target)
    route = routes.get(table)
    if route is None and routes.get(CATALOG_PREFIX_ROUTE):
        return catalog_ref(catalog_table_for(routes[CATALOG_PREFIX_ROUTE], table))
    if route is None:
        return str(Path(target) / table_dir_in(target, table))
    if route.startswith(CATALOG) or "://" in route or Path(route).is_absolute():
        return route
    return str(Path(target) / route)


#: the route that puts every source table without a route of its own in a catalog schema
CATALOG_PREFIX_ROUTE = "*catalog*"


def catalog_routes(names: Mapping[str, str | tuple[str, str]] | str) -> dict[str, str]:
    """Routes for :func:`record_table_paths` from :func:`lakecdc.apply`'s ``table_names``: a mapping
    of source table to catalog table name (or ``(name, location)`` for an external table), or one
    ``catalog.schema`` prefix for every table."""
    if isinstance(names, str):
        if not names.strip().strip("."):
            raise ConfigError(f"table_names={names!r}: expected a catalog.schema prefix or a mapping")
        return {CATALOG_PREFIX_ROUTE: names.strip().rstrip(".")}
    out: dict[str, str] = {}
    for table, where in names.items():
        if isinstance(where, (tuple, list)):
            name, location = where
            out[table] = catalog_ref(str(name), str(location))
        else:
            out[table] = catalog_ref(str(where))
    return out


def _routes_file(target: str) -> Path:
    return Path(target) / "_lakecdc" / "routes.json"


def _routes(target: str) -> dict[str, str]:
    path = _routes_file(target)
    return json.loads(path.read_text()) if path.exists() else {}


def record_table_paths(target: str, paths: Mapping[str, str], *, exists: Callable[[str], bool]) -> None:
    """Route source tables to Delta tables elsewhere than ``<target>/<table>`` (see
    :func:`lakecdc.apply`'s ``table_paths``). Recorded under the target, so that every later run,
    ``maintain``, ``status`` and ``check`` find the table; a table that exists keeps its place."""
    routes = _routes(target)
    changed = False
    for table, where in paths.items():
        where = str(where)
        if routes.get(table) == where:
            continue
        if table == CATALOG_PREFIX_ROUTE:
            routes[table] = where
            changed = True
            continue
        now = table_path(target, table)
        if exists(now) and _recorded_table(target, table_dir_in(target, table)) in (None, table):
            raise ConfigError(
                f"table {table!r} already lives at {now}; lakecdc does not move tables: move its "
                f"Delta table to {where} and edit {_routes_file(target)}, or keep its path"
            )
        routes[table] = where
        changed = True
    if changed:
        path = _routes_file(target)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(routes, indent=2, sort_keys=True))
        tmp.replace(path)


def quarantine_path(target: str) -> str:
    """Where ``target`` keeps its quarantine: one Delta table, ``<target>/_quarantine``."""
    return str(Path(target) / "_quarantine")


def tombstone_path(target: str, table: str) -> str:
    return str(Path(target) / "_lakecdc" / "tombstones" / table_dir_in(target, table))


def truncate_watermark(engine: Store, target: str, table: str) -> str | None:
    path = tombstone_path(target, table)
    if not engine.exists(path):
        return None
    marks = engine.read_arrow(path, ["_cdc_seq", "_cdc_kind"])
    marks = marks.filter(pc.equal(marks.column("_cdc_kind"), "T"))
    if marks.num_rows == 0:
        return None
    return pc.max(marks.column("_cdc_seq")).as_py()


def stored_reaches(engine: Store, target: str, table: str, seq: str) -> bool | None:
    """Whether the table or its tombstones hold a seq at or above ``seq`` (None: the engine cannot
    tell without reading the keys). ``seq=""``: whether they hold any seq at all."""
    unknown = False
    for path in (table_path(target, table), tombstone_path(target, table)):
        found = engine.reaches(path, "_cdc_seq", seq)
        if found:
            return True
        unknown = unknown or found is None
    return None if unknown else False


def expire_tombstones(engine: Store, target: str, table: str, retention: dt.timedelta, now: dt.datetime) -> int:
    """Delete tombstones recorded ``retention`` or longer before ``now`` (truncate marks are kept;
    a retention of 0 keeps none, not even this run's). Returns how many."""
    path = tombstone_path(target, table)
    if not engine.exists(path):
        return 0
    cutoff = (now - retention).astimezone(dt.timezone.utc)
    recorded = engine.read_arrow(path, ["_cdc_recorded_at", "_cdc_kind"])
    expired = recorded.filter(pc.and_(pc.equal(recorded.column("_cdc_kind"), "D"),
                                      pc.less_equal(recorded.column("_cdc_recorded_at"), pa.scalar(cutoff, pa.timestamp("us", tz="UTC")))))
    if expired.num_rows == 0:
        return 0
    # a string literal takes the column's own type in both engines (delta-rs refuses a TIMESTAMP
    # literal, nanoseconds without a zone, against this microsecond UTC column)
    stamp = cutoff.replace(tzinfo=None).isoformat(sep="T") + "Z"
    return engine.delete_where(path, f"_cdc_kind = 'D' AND _cdc_recorded_at <= '{stamp}'")


def _info_path(target: str, table: str) -> Path:
    return Path(target) / "_lakecdc" / "tables" / f"{table_dir_in(target, table)}.json"


def write_table_info(target: str, table: str, keys: tuple[str, ...]) -> None:
    """Record ``table``'s source name and key columns (atomically; rewritten only on change)."""
    path = _info_path(target, table)
    text = json.dumps({"table": table, "keys": list(keys)}, sort_keys=True)
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(text)
    tmp.replace(path)


def known_tables(target: str) -> dict[str, tuple[str, ...]]:
    """The tables earlier runs recorded under ``target``, with their key columns."""
    folder = Path(target) / "_lakecdc" / "tables"
    out: dict[str, tuple[str, ...]] = {}
    if folder.is_dir():
        for f in sorted(folder.glob("*.json")):
            info = json.loads(f.read_text())
            out[info["table"]] = tuple(info["keys"])
    return out
