"""How Debezium names tables and orders events, per connector.

**Table names**, as the connector names the table in the ``source`` block:

=========================================  ============================================
connector                                  table
=========================================  ============================================
oracle, db2, postgresql (and others)       ``SCHEMA.TABLE`` (``source.schema``, ``source.table``)
sqlserver                                  ``DB.SCHEMA.TABLE``
mysql, mariadb                             ``DB.TABLE`` (``source.db``, ``source.table``)
mongodb                                    ``DB.COLLECTION``
=========================================  ============================================

When the ``source`` block has no table (the seed's Oracle examples), the name comes from the
envelope's schema name (``server1.DEBEZIUM.CUSTOMERS.Envelope``) or the Kafka topic
(``server1.DEBEZIUM.CUSTOMERS``), without the topic prefix (``topic.prefix`` option, else
``source.name``, else the first dotted part). Those names are sanitised by Debezium (characters
outside ``[A-Za-z0-9_]`` became ``_``): the ``source`` block's names are the source's own, so they
win whenever present. A column whose schema carries ``__debezium.source.column.name``
(``column.propagate.source.type``) takes that original name.

**Positions** (``pos``, and ``seq``: the order events are applied in). Numbers are zero-padded to
20 digits and LSNs to 16 hex digits per ``:`` part, so that plain string order is the source's
order; parts are joined with ``|``:

============  ==================================================================================
connector     order
============  ==================================================================================
oracle        ``commit_scn``, ``scn``, ``redo_thread``, ``ssn`` (a snapshot read: its ``scn``,
              sorted after every streamed change committed at that SCN, which the flashback query
              already saw; in RAC the thread separates changes of different redo threads that
              share an SCN, and a ``commit_scn`` written per thread (``scn:thread:...``, comma
              separated) is read for the event's own thread)
db2,          ``commit_lsn``, ``change_lsn``, ``event_serial_no`` (a snapshot read, which has no
sqlserver     ``change_lsn``, sorts after the changes committed at its LSN)
mysql         ``file`` (its number padded), ``pos``, snapshot-before-stream, ``row`` (a snapshot
              position is where the next binlog event starts, so a streamed change at the same
              position is newer)
postgresql    ``lsn`` (a snapshot read after the changes at its LSN)
mongodb       ``source.ts_ms`` (the oplog time) then ``ord``: ``seq`` is ``default_seq(op_ts,
              ord, 0)``
other         ``seq`` is ``default_seq(op_ts, '', 0)``: op_ts alone
============  ==================================================================================

A message whose connector fields are absent or empty (a MySQL ``file`` of ``""``, as in hand-made
test data) falls back to op_ts ordering; a table should not mix the two. The ``sequenceBy`` option
overrides the order: ``op_ts`` (``default_seq(op_ts, pos, 0)``, ``pos`` as above) or a comma list
of ``source`` map names (``source.commit_scn,source.scn,transaction.total_order``,
``kafka.offset``), each normalised as above. ``op_ts`` is ``source.ts_ns`` / ``ts_us`` /
``ts_ms`` (the change's time in the database), else the envelope's processing time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

from pyspark.sql import Column
from pyspark.sql import functions as F

from lakecdc.changes.events import digits, padded_parts, zero_pad
from lakecdc.decode.debezium.settings import Settings
from lakecdc.decode.jsontext import plain_text

_DIGITS = re.compile(r"-?[0-9]+")  # ASCII digits only, as SQL reads them (int() takes others)
_SCHEMA_SUFFIXES = (".Envelope", ".Value", ".Key")


def connector_of(source: Mapping[str, Any]) -> str:
    """``source.connector``, else guessed from the position fields it carries."""
    name = source.get("connector")
    if isinstance(name, str) and name:
        return name.lower()
    if "scn" in source or "commit_scn" in source:
        return "oracle"
    if "change_lsn" in source or "commit_lsn" in source:
        return "db2"
    if "file" in source and "pos" in source:
        return "mysql"
    if "lsn" in source:
        return "postgresql"
    if "collection" in source or "ord" in source:
        return "mongodb"
    return ""


NAMING = {
    "oracle": ("schema", "table"), "db2": ("schema", "table"), "postgresql": ("schema", "table"),
    "sqlserver": ("db", "schema", "table"), "mysql": ("db", "table"), "mariadb": ("db", "table"),
    "mongodb": ("db", "collection"),
}


def text_of(value: Any) -> str | None:
    """A source member as text: None for a missing or empty value, numbers as written."""
    if value is None or value == "":
        return None
    if type(value) is str:
        return value
    return plain_text(value)


def source_table(source: Mapping[str, Any], connector: str, settings: Settings) -> str | None:
    """The table as the ``source`` block names it (see the module docstring), or None."""
    parts = settings.table_name or NAMING.get(connector)
    if parts is None:
        parts = ("schema", "table") if text_of(source.get("schema")) else ("db", "table")
    last = text_of(source.get(parts[-1]))
    if last is None:
        return None
    return ".".join([t for t in [text_of(source.get(p)) for p in parts] if t])


def name_from_topic(name: str | None, settings: Settings, server: str | None = None) -> str | None:
    """``server1.DEBEZIUM.CUSTOMERS[.Envelope]`` as ``DEBEZIUM.CUSTOMERS`` (Debezium-sanitised)."""
    if not name:
        return None
    for suffix in _SCHEMA_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    for prefix in (settings.topic_prefix, server):
        if prefix and name.startswith(prefix + "."):
            return name[len(prefix) + 1 :] or None
    head, dot, rest = name.partition(".")
    return rest if dot and rest else None


def envelope_table(source: Mapping[str, Any], schema_name: str | None, topic: str | None, settings: Settings) -> str | None:
    """The event's table: the ``source`` block's names, else the schema name's, else the topic's."""
    server = text_of(source.get("name"))
    return (source_table(source, connector_of(source), settings) or name_from_topic(schema_name, settings, server)
            or name_from_topic(topic, settings, server))


# -- positions -----------------------------------------------------------------------------------

NUM_WIDTH = 20
LSN_WIDTH = 16
MAX = "~"  # sorts after every digit, letter and '|'
_LSN = re.compile(r"[0-9A-Fa-f]+(?::[0-9A-Fa-f]+)+")
_FILE_NUMBER = re.compile(r"(.*?)([0-9]+)")


def sortable(value: Any) -> str:
    """One position part as fixed-width text: a number (ASCII digits) zero-padded to 20 digits, an
    LSN (``00000025:00000d98:00a2``) to 16 lower-case hex digits per part, other text as it is."""
    if type(value) is str and value.isdigit() and value.isascii():  # the common case, fast
        return value.rjust(NUM_WIDTH, "0")
    text = text_of(value)
    if text is None:
        return ""
    if text.isdigit() and text.isascii():
        return text.rjust(NUM_WIDTH, "0")
    if _LSN.fullmatch(text):
        return ":".join(p.lower().rjust(LSN_WIDTH, "0") for p in text.split(":"))
    return text


def _binlog_file(name: str) -> str:
    m = _FILE_NUMBER.fullmatch(name)
    return f"{m.group(1)}{m.group(2).rjust(NUM_WIDTH, '0')}" if m else name


def _oracle_commit_scn(source: Mapping[str, Any]) -> Any:
    commit = source.get("commit_scn")
    if isinstance(commit, str) and ":" in commit:
        # written per redo thread, "scn:thread:txid,...": the event's thread, else the highest
        thread = str(source.get("redo_thread"))
        entries = [e.split(":") for e in commit.split(",") if e]
        mine = [e[0] for e in entries if len(e) > 1 and e[1] == thread]
        found = mine or sorted((e[0] for e in entries), key=lambda s: s.rjust(NUM_WIDTH, "0"))[-1:]
        return found[0] if found else None
    return commit


def connector_position(source: Mapping[str, Any], connector: str, op: str) -> tuple[str | None, bool]:
    """``(pos, positional)``: the connector's position parts joined by ``|``; ``positional`` is
    False when ``seq`` must be ``default_seq(op_ts, pos, 0)`` (MongoDB, unknown connectors,
    messages without the connector's position fields). A snapshot row is a read whatever its op
    (connectors before 1.x wrote ``c`` with ``snapshot: true``)."""
    read = op == "R" or is_snapshot(source)
    if connector == "oracle":
        scn, commit = text_of(source.get("scn")), text_of(_oracle_commit_scn(source))
        if read and scn:
            return "|".join((sortable(scn), sortable(scn), MAX, MAX)), True
        if commit or scn:
            first = commit or scn
            parts = (first, scn or first, source.get("redo_thread"), source.get("ssn"))
            return "|".join([sortable(p) for p in parts]), True
        return None, False
    if connector in ("db2", "sqlserver"):
        commit, change = text_of(source.get("commit_lsn")), text_of(source.get("change_lsn"))
        if commit is None:
            return None, False
        if change is None:
            return "|".join((sortable(commit), MAX, MAX)), True
        return "|".join((sortable(commit), sortable(change), sortable(source.get("event_serial_no")))), True
    if connector in ("mysql", "mariadb"):
        file, pos = text_of(source.get("file")), source.get("pos")
        if file is None or pos is None:
            return None, False
        phase = "0" if read else "1"
        return "|".join((_binlog_file(file), sortable(pos), phase, sortable(source.get("row", 0)))), True
    if connector == "postgresql":
        lsn = text_of(source.get("lsn"))
        if lsn is None:
            return None, False
        return "|".join((sortable(lsn), "1" if read else "0")), True
    if connector == "mongodb":
        ord_ = text_of(source.get("ord"))
        return (sortable(ord_) if ord_ else None), False
    return None, False


SNAPSHOT_FLAGS = {"true", "last", "first", "incremental", "first_in_data_collection", "last_in_data_collection"}


def is_snapshot(source: Mapping[str, Any]) -> bool:
    """``source.snapshot`` says the row was read by a snapshot (``true``, ``last``, ``incremental``, ...)."""
    flag = source.get("snapshot")
    return flag is True or (isinstance(flag, str) and flag.lower() in SNAPSHOT_FLAGS)


def op_ts_micros(payload: Mapping[str, Any], source: Mapping[str, Any]) -> int | None:
    """The change's time in the database (``source.ts_ns``/``ts_us``/``ts_ms``), else the
    envelope's processing time, in microseconds since 1970."""
    for block in (source, payload):
        for name, per_micro in (("ts_ns", None), ("ts_us", 1), ("ts_ms", 1000)):
            value = block.get(name)
            if value is None or isinstance(value, bool):
                continue
            text = str(value)
            if not _DIGITS.fullmatch(text):
                continue
            n = int(text)
            return n // 1000 if per_micro is None else n * per_micro
    return None





# -- the same rules in SQL, for the lines the SQL routes read ----------------------------------------

#: The connectors the SQL routes read: every one :data:`NAMING` names tables for, but MongoDB.
KNOWN_CONNECTORS = tuple(c for c in NAMING if c != "mongodb")


class Members(Protocol):
    """A parsed envelope's columns as the SQL rules read them (see
    :class:`lakecdc.decode.debezium.sql.Fields`): ``m[name]`` a column of the line (``_conn``:
    its connector, ``_op``: its canonical op), ``m.src(name)`` a member of its source block,
    ``m.has(name)`` whether the block has it, ``m.sortable(name)`` the member's
    :func:`sql_sortable`, ``m.connectors`` the connectors whose SQL is built."""

    connectors: tuple[str, ...]

    def __getitem__(self, name: str) -> Column: ...
    def src(self, name: str) -> Column: ...
    def has(self, name: str) -> Column: ...
    def sortable(self, name: str) -> Column: ...


def sql_pad(c: Column, width: int = NUM_WIDTH) -> Column:
    """``str.rjust(width, "0")``: never cut (``lpad`` would)."""
    return F.when(F.length(c) >= width, c).otherwise(zero_pad(c, width))


def sql_text(c: Column) -> Column:
    """``text_of``: NULL for NULL and the empty string."""
    return F.when(c != "", c)


def sql_sortable(c: Column) -> Column:
    """``sortable`` for texts: digits zero-padded to 20, an LSN per part to 16 lower-case
    hex digits, other text as it is, NULL as the empty string."""
    lsn = padded_parts(F.lower(c), ":", LSN_WIDTH)
    return (
        F.when(c.isNull() | (c == ""), F.lit(""))
        .when(digits(c), sql_pad(c))
        .when(c.rlike("^[0-9A-Fa-f]+(:[0-9A-Fa-f]+)+$"), lsn)
        .otherwise(c)
    )


def sql_joined(*parts: Column) -> Column:
    return F.concat_ws("|", *parts)


def sql_connector(m: Members) -> Column:
    """``connector_of``: the named connector (lower case), else guessed from the members."""
    named = m.src("connector")
    guessed = (
        F.when(m.has("scn") | m.has("commit_scn"), "oracle")
        .when(m.has("change_lsn") | m.has("commit_lsn"), "db2")
        .when(m.has("file") & m.has("pos"), "mysql")
        .when(m.has("lsn"), "postgresql")
        .when(m.has("collection") | m.has("ord"), "mongodb")
        .otherwise("")
    )
    # (lower() maps case by ICU: skipped for the names as connectors write them)
    return F.when(named.isin(*KNOWN_CONNECTORS), named).when(named != "", F.lower(named)).otherwise(guessed)


def sql_table(m: Members, settings: Settings) -> Column:
    """``source_table``: the source block's names joined by dots (NULL without the last)."""

    def join(parts: tuple[str, ...]) -> Column:
        return F.when(sql_text(m.src(parts[-1])).isNotNull(), F.concat_ws(".", *[sql_text(m.src(p)) for p in parts]))

    if settings.table_name:
        return join(settings.table_name)
    connector = m["_conn"]
    default = F.when(sql_text(m.src("schema")).isNotNull(), join(("schema", "table"))).otherwise(join(("db", "table")))
    out = F.when(F.lit(False), F.lit(None).cast("string"))
    for name in m.connectors:
        out = out.when(connector == name, join(NAMING[name]))
    return out.otherwise(default)


def sql_op_ts(m: Members) -> Column:
    """``op_ts_micros``: source ts_ns/ts_us/ts_ms, else the envelope's, in microseconds
    (NULL when the first number found does not fit: the Python reader then says why)."""
    out = F.when(F.lit(False), F.lit(None).cast("bigint"))
    for block in (m.src, m.__getitem__):
        for name, scale in (("ts_ns", None), ("ts_us", 1), ("ts_ms", 1000)):
            v = block(name)
            n = v.try_cast("bigint")
            if scale is None:  # nanoseconds floored to microseconds: a long's division when not negative
                micros = F.when(n >= 0, F.call_function("div", n, F.lit(1000))).otherwise(
                    F.floor(n.cast("decimal(20,0)") / F.lit(1000)).cast("bigint"))
            else:
                micros = F.try_multiply(n, F.lit(scale))
            integer = F.when(v.startswith("-"), digits(F.substring(v, 2, 1 << 20))).otherwise(digits(v))
            out = out.when(integer, micros.cast("bigint"))
    return out


def sql_position(m: Members) -> Column:
    """``connector_position``: ``pos`` when positional, else NULL (MongoDB never comes here).
    Built from the members' sortable texts (:meth:`Members.sortable`; that of an empty text is
    that of NULL, so ``_text`` need not come first)."""
    s, q, connector = m.src, m.sortable, m["_conn"]
    flag = s("snapshot")
    snapshot = F.when(flag == "false", F.lit(False)).otherwise(F.lower(flag).isin(*sorted(SNAPSHOT_FLAGS)))
    read = (m["_op"] == "R") | F.coalesce(snapshot, F.lit(False))
    scn, commit = sql_text(s("scn")), sql_text(s("commit_scn"))
    # sql_sortable(coalesce(commit, scn)) and sql_sortable(coalesce(scn, commit))
    first = F.when(commit.isNotNull(), q("commit_scn")).otherwise(q("scn"))
    then = F.when(scn.isNotNull(), q("scn")).otherwise(q("commit_scn"))
    oracle = (
        F.when(read & scn.isNotNull(), sql_joined(q("scn"), q("scn"), F.lit(MAX), F.lit(MAX)))
        .when(commit.isNotNull() | scn.isNotNull(), sql_joined(first, then, q("redo_thread"), q("ssn")))
    )
    c_lsn, ch_lsn = sql_text(s("commit_lsn")), sql_text(s("change_lsn"))
    db2 = (
        F.when(c_lsn.isNull(), F.lit(None).cast("string"))
        .when(ch_lsn.isNull(), sql_joined(q("commit_lsn"), F.lit(MAX), F.lit(MAX)))
        .otherwise(sql_joined(q("commit_lsn"), q("change_lsn"), q("event_serial_no")))
    )
    file = sql_text(s("file"))
    binlog = F.when(file.rlike("^.*?[0-9]+$"), F.concat(
        F.regexp_extract(file, "^(.*?)([0-9]+)$", 1),
        sql_pad(F.regexp_extract(file, "^(.*?)([0-9]+)$", 2)),
    )).otherwise(file)
    row = F.when(m.has("row"), q("row")).otherwise(F.lit(sortable("0")))
    mysql = F.when(file.isNotNull() & s("pos").isNotNull(), sql_joined(
        binlog, q("pos"), F.when(read, "0").otherwise("1"), row))
    lsn = sql_text(s("lsn"))
    pg = F.when(lsn.isNotNull(), sql_joined(q("lsn"), F.when(read, "1").otherwise("0")))
    pos = F.when(F.lit(False), F.lit(None).cast("string"))
    for names, branch in ((("oracle",), oracle), (("db2", "sqlserver"), db2), (("mysql", "mariadb"), mysql),
                          (("postgresql",), pg)):
        if wanted := [n for n in names if n in m.connectors]:
            pos = pos.when(connector.isin(*wanted), branch)
    return pos


__all__ = [
    "KNOWN_CONNECTORS", "LSN_WIDTH", "MAX", "NAMING", "NUM_WIDTH", "SNAPSHOT_FLAGS", "Members", "connector_of",
    "connector_position", "sql_connector", "sql_joined", "sql_op_ts", "sql_pad", "sql_position", "sql_sortable",
    "sql_table", "sql_text",
    "envelope_table", "is_snapshot", "name_from_topic", "op_ts_micros", "sortable", "source_table", "text_of",
]
