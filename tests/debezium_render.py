"""Render oracle events as Debezium messages (test-only writer for ``debezium-json``).

Debezium does not show a primary-key change as one update: it emits a delete of the old key, a
tombstone, and a create of the new key carrying the whole new row (seed 001). :func:`as_debezium`
turns a history into that view first (the new row is the one the oracle builds for the update
with ``pk_update='delete-insert'``), renumbers positions by rank (so a connector's SCN / LSN /
binlog position orders events exactly as the oracle's ``(op_ts, pos)`` does), can turn inserts
into snapshot reads (``op: r``), and renames tables as the connector names them. :class:`Renderer`
then writes any run of those events as one of:

* ``values``: one value per line, tombstones as ``null`` (Connect JSON, ``schemas.enable=false``
  unless ``schema``);
* ``key-value``: each value preceded by its key on the line before (a truncate has no key);
* ``kcat``: ``kcat -J`` records (``topic``, ``partition``, ``offset``, ``tstype``, ``ts``,
  ``broker``, ``headers``, ``key``, ``payload`` as JSON text).

With ``schema`` every key and value is ``{"schema": ..., "payload": ...}``; non-key integer
columns are then ``org.apache.kafka.connect.data.Decimal`` (base64 two's complement, scale 0) as
Oracle's ``NUMBER`` is, so the round trip also checks the decimal decoding.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from oracle import Event

Layout = Literal["values", "key-value", "kcat"]
Kinds = dict[str, dict[str, str]]  # table -> column -> "int" | "str"


@dataclass(frozen=True)
class Style:
    connector: Literal["oracle", "db2", "mysql", "postgresql", "sqlserver"] = "oracle"
    schema: bool = True
    layout: Layout = "key-value"
    server: str = "server1"


def parts_of(connector: str, table: str) -> tuple[str | None, str | None, str]:
    """``(db, schema, table)`` of an oracle table name, as the connector's source block has them."""
    names = table.split(".")
    last, second = names[-1], names[-2] if len(names) > 1 else None
    first = names[0] if len(names) > 2 else None
    if connector in ("mysql", "mariadb"):
        return second, None, last
    return first or ("ORCLPDB1" if connector == "oracle" else None), second, last


def decoded_table(connector: str, table: str) -> str:
    """The name ``debezium-json`` gives the table (its connector's naming)."""
    db, schema, name = parts_of(connector, table)
    if connector in ("mysql", "mariadb"):
        return f"{db}.{name}"
    if connector == "sqlserver":
        return ".".join(p for p in (db, schema, name) if p)
    return f"{schema}.{name}"


def as_debezium(events: Sequence[Event], connector: str, reads: Sequence[bool] = ()) -> tuple[list[Event], list[list[int]]]:
    """Debezium's view of a history (in seq order): ``(events, indices)``, ``indices[i]`` being
    the new events of event ``i``. A primary-key update becomes a delete and a create of the new
    key's whole row; ``reads[k]`` turns the k-th insert into a snapshot read; positions are ranks.
    """
    from oracle import Oracle, pk_update_keys

    scratch = Oracle()
    out: list[Event] = []
    index: list[list[int]] = []
    inserts = 0
    for e in events:
        table = decoded_table(connector, e.table)
        made: list[Event] = []
        if e.op == "U" and pk_update_keys(e):
            _, new_key = pk_update_keys(e)
            scratch.apply_run([e], pk_update="delete-insert")
            row = scratch.table(e.table)[new_key]
            made.append(dataclasses.replace(e, table=table, op="D", after=None))
            made.append(dataclasses.replace(e, table=table, op="I", before=None, after=dict(row)))
        else:
            scratch.apply_run([e], pk_update="delete-insert")
            op = e.op
            if op == "I":
                if inserts < len(reads) and reads[inserts]:
                    op = "R"
                inserts += 1
            made.append(dataclasses.replace(e, table=table, op=op))
        index.append([])
        for m in made:
            index[-1].append(len(out))
            out.append(dataclasses.replace(m, pos=f"{len(out) + 1:020d}", idx=0))
    return out, index


def _decimal_b64(n: int) -> str:
    return base64.b64encode(n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)).decode("ascii")


class Renderer:
    """Writes runs of :func:`as_debezium` events in one :class:`Style`.

    ``kinds`` gives each table's column kinds (keys included), for the schemas. Positions come
    from each event's ``pos`` (its rank); a transaction is a run of events sharing ``op_ts``, and
    commits at its last event's rank.
    """

    def __init__(self, events: Sequence[Event], kinds: Kinds, style: Style, originals: dict[str, str]) -> None:
        self.style = style
        self.kinds = kinds  # by decoded table name
        self.originals = originals  # decoded table name -> oracle table name
        # a transaction: events sharing op_ts; a snapshot read stands alone (it is no transaction)
        self.tx: dict[str, int] = {}
        group = 0
        for i, e in enumerate(events):
            if i and (e.op_ts != events[i - 1].op_ts or "R" in (e.op, events[i - 1].op)):
                group += 1
            self.tx[e.pos] = group
        last: dict[int, int] = {}
        for e in events:
            last[self.tx[e.pos]] = int(e.pos)
        self.commit = {e.pos: last[self.tx[e.pos]] for e in events}

    # -- records

    def topic(self, table: str) -> str:
        return f"{self.style.server}.{table}"

    def key_of(self, e: Event) -> dict[str, Any] | None:
        if e.op == "T":
            return None
        keys = e.keys
        if e.op == "D" or (e.op == "U" and e.before is not None and all(k in e.before for k in keys)):
            image = e.before
        else:
            image = e.after
        assert image is not None
        return {k: image[k] for k in keys}

    def _field(self, table: str, column: str, *, key: bool) -> dict[str, Any]:
        kind = self.kinds[table].get(column, "str")
        if kind == "str":
            return {"type": "string", "optional": True, "field": column}
        if self.style.schema and not key:
            return {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
                    "version": 1, "parameters": {"scale": "0"}, "field": column}
        return {"type": "int64", "optional": key is False, "field": column}

    def _value_of(self, table: str, column: str, value: Any, *, key: bool) -> Any:
        if value is None or self.kinds[table].get(column) != "int" or key or not self.style.schema:
            return value
        return _decimal_b64(value)

    def _image(self, table: str, image: dict[str, Any] | None) -> dict[str, Any] | None:
        if image is None:
            return None
        return {c: self._value_of(table, c, v, key=False) for c, v in image.items()}

    def source(self, e: Event) -> dict[str, Any]:
        c = self.style.connector
        db, schema, name = parts_of(c, self.originals[e.table])
        rank = int(e.pos)
        when = datetime.strptime(e.op_ts, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc)
        micros = int(when.timestamp()) * 10**6 + when.microsecond
        read = e.op == "R"
        src: dict[str, Any] = {"version": "2.7.0.Final", "connector": c, "name": self.style.server,
                               "ts_ms": micros // 1000, "ts_us": micros, "ts_ns": micros * 1000,
                               "snapshot": "true" if read else "false", "db": db}
        if c != "mysql":
            src["schema"] = schema
        src["table"] = name
        commit = self.commit[e.pos]
        if c == "oracle":
            src.update({"txId": None if read else f"06.{self.tx[e.pos]}.807", "scn": str(1000 + rank),
                        "commit_scn": None if read else str(1000 + commit), "rs_id": "001234.00012345.0124",
                        "ssn": 0, "redo_thread": 1, "user_name": None if read else "APP"})
        elif c in ("db2", "sqlserver"):
            src.update({"change_lsn": None if read else _lsn(rank), "commit_lsn": _lsn(commit),
                        "event_serial_no": None if read else 1})
        elif c == "mysql":
            src.update({"server_id": 223344, "gtid": None, "file": f"mysql-bin.{1 + rank // 7:06d}",
                        "pos": 4 + (rank % 7) * 1000, "row": 0, "thread": 7, "query": None})
        elif c == "postgresql":
            src.update({"txId": 700 + self.tx[e.pos], "lsn": 10_000 + rank * 10, "xmin": None})
        return src

    def envelope(self, e: Event, total_order: int) -> dict[str, Any]:
        op = {"I": "c", "U": "u", "D": "d", "R": "r", "T": "t"}[e.op]
        src = self.source(e)
        tx = None
        if e.op != "R":
            tx = {"id": str(self.tx[e.pos]), "total_order": total_order, "data_collection_order": total_order}
        return {"before": self._image(e.table, e.before), "after": self._image(e.table, e.after), "source": src,
                "op": op, "ts_ms": src["ts_ms"] + 500, "transaction": tx}

    def value_schema(self, table: str) -> dict[str, Any]:
        row = {"type": "struct", "optional": True, "name": f"{self.topic(table)}.Value",
               "fields": [self._field(table, c, key=False) for c in self.kinds[table]]}
        source = {"type": "struct", "optional": False, "name": f"io.debezium.connector.{self.style.connector}.Source",
                  "field": "source", "fields": [{"type": "string", "optional": True, "field": "table"}]}
        tx = {"type": "struct", "optional": True, "name": "event.block", "field": "transaction",
              "fields": [{"type": "string", "optional": False, "field": "id"},
                         {"type": "int64", "optional": False, "field": "total_order"},
                         {"type": "int64", "optional": False, "field": "data_collection_order"}]}
        return {"type": "struct", "optional": False, "name": f"{self.topic(table)}.Envelope", "version": 1,
                "fields": [{**row, "field": "before"}, {**row, "field": "after"}, source,
                           {"type": "string", "optional": False, "field": "op"},
                           {"type": "int64", "optional": True, "field": "ts_ms"}, tx]}

    def key_schema(self, table: str, key: dict[str, Any]) -> dict[str, Any]:
        fields = [{**self._field(table, c, key=True), "optional": False} for c in key]
        return {"type": "struct", "optional": False, "name": f"{self.topic(table)}.Key", "fields": fields}

    def wrap(self, payload: Any, schema: dict[str, Any] | None) -> Any:
        return {"schema": schema, "payload": payload} if self.style.schema else payload

    def messages(self, e: Event, total_order: int) -> list[tuple[Any, Any]]:
        """``(key, value)`` records of one event (``None`` for a null key or value)."""
        key = self.key_of(e)
        wrapped_key = None if key is None else self.wrap(key, self.key_schema(e.table, key))
        value = self.wrap(self.envelope(e, total_order), self.value_schema(e.table))
        out = [(wrapped_key, value)]
        if e.op == "D":
            out.append((wrapped_key, self.wrap(None, None)))  # the tombstone
        return out

    # -- files

    def render(self, run: Sequence[Event]) -> str:
        lines: list[str] = []
        for e in run:
            for n, (key, value) in enumerate(self.messages(e, int(e.pos))):
                lines += self._lines(e, key, value, offset=2 * int(e.pos) + n)
        return "".join(line + "\n" for line in lines)

    def _lines(self, e: Event, key: Any, value: Any, *, offset: int) -> list[str]:
        dump = _dump
        if self.style.layout == "values":
            return [dump(value)]
        if self.style.layout == "key-value":
            return ([dump(key)] if key is not None else []) + [dump(value)]
        ms = int(datetime.strptime(e.op_ts, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp() * 1000)
        bare = value.get("payload") if self.style.schema and isinstance(value, dict) else value
        record = {"topic": self.topic(e.table), "partition": 0, "offset": offset, "tstype": "create", "ts": ms,
                  "broker": 1, "headers": {"origin": "lakecdc-test"},
                  "key": None if key is None else dump(key),
                  "payload": None if bare is None else dump(value)}
        return [dump(record)]


def _lsn(n: int) -> str:
    return f"{n >> 24:08x}:{(n >> 8) & 0xFFFF:08x}:{n & 0xFF:04x}"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


#: The Kafka Connect schema of a record of Debezium's transaction topic.
MARKER_SCHEMA: dict[str, Any] = {
    "type": "struct", "name": "io.debezium.connector.common.TransactionMetadataValue", "optional": False,
    "fields": [
        {"field": "status", "type": "string", "optional": False},
        {"field": "id", "type": "string", "optional": False},
        {"field": "event_count", "type": "int64", "optional": True},
        {"field": "data_collections", "type": "array", "optional": True,
         "items": {"type": "struct", "name": "io.debezium.connector.common.DataCollection", "optional": False,
                   "fields": [{"field": "data_collection", "type": "string", "optional": False},
                              {"field": "event_count", "type": "int64", "optional": False}]}},
        {"field": "ts_ms", "type": "int64", "optional": False},
    ],
}


class WholeTransactions:
    """Runs of a history cut anywhere, with Debezium's transaction topic in them, and what a
    consumer that applies whole transactions only (``complete_transactions``) applies per run.

    A transaction is a :class:`Renderer` group (events sharing ``op_ts``; snapshot reads are in
    none). Its BEGIN marker goes before the first delivered copy of any of its events, its END
    marker (with ``event_count`` and ``data_collections``) right after the first delivered copy
    of its last event: where Debezium writes it. A transaction applies in the run where its END
    and every one of its events have arrived, with every copy delivered so far; copies delivered
    after that (a consumer restart) are ordinary duplicates.
    """

    def __init__(self, renderer: Renderer, events: Sequence[Event]) -> None:
        self.renderer = renderer
        self.members: dict[str, list[Event]] = {}
        for e in events:
            if e.op != "R":
                self.members.setdefault(self.tx_of(e), []).append(e)
        self.last = {tx: max(int(e.pos) for e in m) for tx, m in self.members.items()}
        self.pending: dict[str, list[Event]] = {}
        self.seen: dict[str, set[str]] = {}
        self.begun: set[str] = set()
        self.ended: set[str] = set()
        self.done: set[str] = set()

    def tx_of(self, e: Event) -> str:
        return str(self.renderer.tx[e.pos])

    def marker(self, tx: str, status: str) -> dict[str, Any]:
        tables: dict[str, int] = {}
        for m in self.members[tx] if status == "END" else ():
            tables[m.table] = tables.get(m.table, 0) + 1
        return {"status": status, "id": tx, "ts_ms": 1_700_000_000_000,
                "event_count": len(self.members[tx]) if status == "END" else None,
                "data_collections": [{"data_collection": t, "event_count": n} for t, n in sorted(tables.items())]
                if status == "END" else None}

    def run(self, deliveries: Sequence[Event]) -> tuple[list[tuple[str, Any]], list[Event]]:
        """One run's records in order (``("event", Event)`` or ``("marker", payload)``) and the
        events a whole-transaction consumer applies in it."""
        items: list[tuple[str, Any]] = []
        ready: list[Event] = []
        for e in deliveries:
            tx = None if e.op == "R" else self.tx_of(e)
            if tx is not None and tx not in self.begun:
                self.begun.add(tx)
                items.append(("marker", self.marker(tx, "BEGIN")))
            items.append(("event", e))
            if tx is None or tx in self.done:
                ready.append(e)
                continue
            self.pending.setdefault(tx, []).append(e)
            self.seen.setdefault(tx, set()).add(e.pos)
            if int(e.pos) == self.last[tx] and tx not in self.ended:
                self.ended.add(tx)
                items.append(("marker", self.marker(tx, "END")))
        for tx in sorted(self.pending):
            if tx in self.ended and len(self.seen[tx]) >= len(self.members[tx]):
                ready += self.pending.pop(tx)
                self.done.add(tx)
        return items, ready

    @property
    def held(self) -> int:
        """Deliveries waiting for their transaction to complete."""
        return sum(len(v) for v in self.pending.values())


# -- kcat's Avro deserialiser: Avro's JSON encoding -----------------------------------------------

_AVRO_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


def _avro_names(schema: Any, namespace: str, out: dict[str, Any]) -> None:
    if isinstance(schema, list):
        for s in schema:
            _avro_names(s, namespace, out)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "enum", "fixed"):
            name = schema["name"]
            ns = schema.get("namespace", namespace)
            full = name if "." in name or not ns else f"{ns}.{name}"
            out[full] = schema
            for f in schema.get("fields", ()):
                _avro_names(f["type"], full.rpartition(".")[0], out)
        elif kind == "array":
            _avro_names(schema["items"], namespace, out)
        elif isinstance(kind, (dict, list)):
            _avro_names(kind, namespace, out)


def _avro_resolve(schema: Any, named: dict[str, Any]) -> Any:
    return named.get(schema, schema) if isinstance(schema, str) else schema


def _avro_kind(schema: Any) -> str:
    kind = schema if isinstance(schema, str) else schema.get("type")
    return kind if isinstance(kind, str) else _avro_kind(kind)


def _avro_branch(branches: list[Any], value: Any, named: dict[str, Any]) -> Any:
    """The union branch fastavro would write ``value`` with."""
    wanted = ("null",) if value is None else ("boolean",) if isinstance(value, bool) else \
        ("long", "int") if isinstance(value, int) else ("double", "float") if isinstance(value, float) else \
        ("bytes", "fixed") if isinstance(value, bytes) else ("string", "enum") if isinstance(value, str) else \
        ("record",) if isinstance(value, dict) else ("array",)
    for kind in wanted:
        for b in branches:
            if _avro_kind(_avro_resolve(b, named)) == kind:
                return b
    raise ValueError(f"no union branch for {value!r}")


def avro_json(schema: Any, value: Any, *, short_names: bool = True, named: dict[str, Any] | None = None) -> Any:
    """``value`` (a datum of the Avro ``schema`` as fastavro writes it) in Avro's JSON encoding,
    as kcat's Avro deserialiser prints it: a non-null union value as ``{"<branch>": value}`` (a
    named branch by its short name as avro-c writes it, or with ``short_names=False`` its full
    name as Java's encoder does), bytes as a string of one U+0000..U+00FF character per byte."""
    if named is None:
        named = {}
        _avro_names(schema, "", named)
    schema = _avro_resolve(schema, named)
    if isinstance(schema, list):
        if value is None:
            return None
        branch = _avro_branch(schema, value, named)
        resolved = _avro_resolve(branch, named)
        kind = _avro_kind(resolved)
        if kind in ("record", "enum", "fixed"):
            full = branch if isinstance(branch, str) and branch not in _AVRO_PRIMITIVES else \
                next(n for n, s in named.items() if s is resolved)
            label = full.rpartition(".")[2] if short_names else full
        else:
            label = kind
        return {label: avro_json(branch, value, short_names=short_names, named=named)}
    kind = _avro_kind(schema)
    if kind == "record":
        return {f["name"]: avro_json(f["type"], value.get(f["name"]), short_names=short_names, named=named)
                for f in schema["fields"]}
    if kind == "array":
        return [avro_json(schema["items"], v, short_names=short_names, named=named) for v in value]
    if kind in ("bytes", "fixed"):
        return value.decode("latin-1")
    return value


def kcat_avro_json(avro: Any, run: Sequence[Event], *, short_names: bool = True) -> str:
    """A run as ``kcat -C -s key=avro -s value=avro -J`` prints it: each record's key and value
    in Avro's JSON encoding (:func:`avro_json`) with ``key_schema_id``/``value_schema_id``.
    ``avro``: a ``debezium_avro_render.AvroRenderer`` (its schemas are registered as it goes)."""
    from debezium_avro_render import datum, envelope_datum

    lines: list[str] = []
    for e in run:
        topic = avro.base.topic(e.table)
        ms = int(datetime.strptime(e.op_ts, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp() * 1000)
        for n, (key, value) in enumerate(avro.records(e, int(e.pos))):
            record: dict[str, Any] = {"topic": topic, "partition": 0, "offset": 2 * int(e.pos) + n, "tstype": "create",
                                      "ts": ms, "broker": 1, "key": None}
            if key is not None:
                connect = avro.key_connect(e.table)
                key_id = avro.register(connect, f"{topic}-key")
                record["key"] = avro_json(avro.schemas[key_id], datum(connect, key), short_names=short_names)
                record["key_schema_id"] = key_id
            record["payload"] = None
            if value is not None:
                connect = avro.envelope_connect(e.table)
                value_id = avro.register(connect, f"{topic}-value")
                record["payload"] = avro_json(avro.schemas[value_id], envelope_datum(connect, value),
                                              short_names=short_names)
                record["value_schema_id"] = value_id
            lines.append(_dump(record))
    return "".join(line + "\n" for line in lines)
