"""The decoder contract's cases, written for every registered format.

Seven cases, each in its own file and its own source table (``CT.<CASE>``), so that one
``lakecdc.apply`` over all of them tells each case's accounting apart by file:

============  ===========================================================  ===========================
case          the file holds                                               its records become
============  ===========================================================  ===========================
empty         nothing                                                      nothing
non-row       one record that is no row change (DDL, heartbeat, ...)       skipped with its kind
unknown-op    an insert, then a record whose operation is no known one     applied 1, quarantined 1
broken        an insert, then a record the format cannot read              applied 1, quarantined 1
missing-key   an insert, then one whose key column is missing              applied 1, quarantined 1
truncate      an insert, then a truncate of the table                      applied 2
duplicate     an insert, an update, and the update again                   applied 2, duplicate 1
============  ===========================================================  ===========================

Every table has the columns ``ID`` (the key) and ``V``. A format writes its records with the
renderers the round-trip tests use (``tests/*_render.py``); what it cannot say is listed in its
:attr:`Writer.cannot` with the reason, and a new format must say both (see ``test_contract.py``).
"""

from __future__ import annotations

import dataclasses
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

try:
    from tests import canal_render, dts_render, ogg_avro_render, ogg_row_render, qlik_render, shareplex_render
    from tests.debezium_avro_render import AvroRenderer
    from tests.debezium_render import Renderer, Style
    from tests.ogg_render import ogg_message
    from tests.ogg_xml_render import render_operation
    from tests.oracle import Event
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    import canal_render  # type: ignore[no-redef]
    import dts_render  # type: ignore[no-redef]
    import ogg_avro_render  # type: ignore[no-redef]
    import ogg_row_render  # type: ignore[no-redef]
    import qlik_render  # type: ignore[no-redef]
    import shareplex_render  # type: ignore[no-redef]
    from debezium_avro_render import AvroRenderer  # type: ignore[no-redef]
    from debezium_render import Renderer, Style  # type: ignore[no-redef]
    from ogg_render import ogg_message  # type: ignore[no-redef]
    from ogg_xml_render import render_operation  # type: ignore[no-redef]
    from oracle import Event  # type: ignore[no-redef]

#: the operation texts the unknown-op cases write (one per format's spelling)
UNKNOWN_OPS = ("'X'", "'x'", "FROBNICATE", "frobnicate")
CASES = ("empty", "non-row", "unknown-op", "broken", "missing-key", "truncate", "duplicate")
KEY, VALUE = "ID", "V"
COLUMNS = (KEY, VALUE)
SCHEMA = "CT"


def table_of(case: str) -> str:
    """The source table of a case: ``CT.UNKNOWN_OP`` for ``unknown-op``."""
    return f"{SCHEMA}.{case.upper().replace('-', '_')}"


def event(table: str, op: str, n: int, *, before: dict[str, Any] | None = None,
          after: dict[str, Any] | None = None) -> Event:
    """The ``n``-th event of a case file (commit time ``n`` seconds past 2024-01-01, position ``n``)."""
    return Event(table, op, f"2024-01-01 00:00:{n:02d}.000000", f"{n:020d}", 0, before, after, (KEY,))


def insert(table: str, n: int = 1, value: str = "a") -> Event:
    return event(table, "I", n, after={KEY: n, VALUE: value})


@dataclass(frozen=True)
class Written:
    """One case as written: its file, its table, and what its records must become
    (``RunSummary.file_accounts`` of the file; ``{}`` when the file has no record)."""

    case: str
    path: Path
    table: str
    expected: dict[str, int]

    @property
    def records(self) -> int:
        return sum(self.expected.values())


@dataclass
class Writer:
    """How one format writes the contract's cases.

    ``records(events)`` encodes events as the format's records (one each, in order; positions
    may depend on the order); ``frame(records)`` makes a file of records; ``unknown_op(event)``
    is the record of ``event`` with an operation the format does not know; ``broken`` a record
    the format cannot read; ``non_row(table)`` a record that is no row change and its skipped
    kind; ``missing_key(table, n)`` the event whose key column is missing (the format's way of
    saying so). ``cannot``: cases the format cannot express, with the reason.
    """

    name: str
    suffix: str
    records: Callable[[Sequence[Event]], list[bytes]]
    unknown_op: Callable[[Event], bytes] | None
    broken: bytes
    non_row: Callable[[str], tuple[bytes, str]] | None
    frame: Callable[[Sequence[bytes]], bytes] = field(default=lambda records: _lines(records))
    missing_key: Callable[[str, int], Event] = field(
        default=lambda table, n: event(table, "I", n, after={VALUE: "no key"}))
    cannot: Mapping[str, str] = field(default_factory=dict)
    #: called once with the case tables and a scratch directory: the options ``apply`` needs
    setup: Callable[[Sequence[str], Path], dict[str, str]] = field(default=lambda tables, scratch: {})

    def write(self, case: str, landing: Path) -> Written:
        """Write ``case`` into ``landing`` (``<case><suffix>``)."""
        table = table_of(case)
        first = insert(table)
        if case == "empty":
            body, expected = b"", {}
        elif case == "non-row":
            assert self.non_row is not None
            record, kind = self.non_row(table)
            body, expected = self.frame([record]), {f"skipped:{kind}": 1}
        elif case == "unknown-op":
            assert self.unknown_op is not None
            body = self.frame([*self.records([first]), self.unknown_op(insert(table, 2, "b"))])
            expected = {"applied": 1, "quarantined": 1}
        elif case == "broken":
            body, expected = self.frame([*self.records([first]), self.broken]), {"applied": 1, "quarantined": 1}
        elif case == "missing-key":
            body = self.frame(self.records([first, self.missing_key(table, 2)]))
            expected = {"applied": 1, "quarantined": 1}
        elif case == "truncate":
            body, expected = self.frame(self.records([first, event(table, "T", 2)])), {"applied": 2}
        elif case == "duplicate":
            update = event(table, "U", 2, before={KEY: 1, VALUE: "a"}, after={KEY: 1, VALUE: "b"})
            once = self.records([first, update])
            body, expected = self.frame([*once, once[-1]]), {"applied": 2, "duplicate_or_late": 1}
        else:
            raise ValueError(f"no contract case {case!r}; cases: {', '.join(CASES)}")
        path = landing / f"{case}{self.suffix}"
        path.write_bytes(body)
        return Written(case, path, table, expected)

    def write_all(self, landing: Path, scratch: Path) -> tuple[list[Written], dict[str, str]]:
        """Every case this format can express, and the options to read them with."""
        landing.mkdir(parents=True, exist_ok=True)
        scratch.mkdir(parents=True, exist_ok=True)
        cases = [c for c in CASES if c not in self.cannot]
        written = [self.write(c, landing) for c in cases]
        return written, self.setup([table_of(c) for c in CASES], scratch)


def _json(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


def _lines(records: Sequence[bytes]) -> bytes:
    return b"".join(r + b"\n" for r in records)


def _length_prefixed(records: Sequence[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(r)) + r for r in records)


#: a JSON record cut short
BROKEN_JSON = b'{"table":"CT.BROKEN","op_type":"I","after":{"ID":'
#: a length-prefixed frame of bytes that decode as no record of any Avro schema here
BROKEN_AVRO = b"\x00\x00\x00\x00\x63\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"
NO_NON_ROW = "GoldenGate writes no record that is not an operation: every message is a row change or a truncate"
CURRENT_TS = "2024-01-02T00:00:00.000000"


# -- GoldenGate ------------------------------------------------------------------------------------


def _ogg_json(events: Sequence[Event]) -> list[bytes]:
    return [_json(ogg_message(e, current_ts=CURRENT_TS)) for e in events]


def _ogg_unknown(e: Event) -> bytes:
    return _json({**ogg_message(e, current_ts=CURRENT_TS), "op_type": "X"})


def _json_row(events: Sequence[Event]) -> list[bytes]:
    return [line.encode() for line in ogg_row_render.render_json_row(events).splitlines()]


def _json_row_unknown(e: Event) -> bytes:
    return _json({**json.loads(_json_row([e])[0]), "op_type": "X"})


def _delimited(events: Sequence[Event]) -> list[bytes]:
    columns = {e.table: list(COLUMNS) for e in events}
    text = ogg_row_render.render_delimited(events, columns, field_delimiter="|")
    return [line.encode() for line in text.splitlines()]


def _delimited_unknown(e: Event) -> bytes:
    return b"X" + _delimited([e])[0][1:]


def _schema_files(tables: Sequence[str], scratch: Path) -> dict[str, str]:
    for table in tables:
        ogg_row_render.write_json_schema(scratch / "dirdef", table, {KEY: "integer", VALUE: "string"})
    return {"schemaDirectory": str(scratch / "dirdef")}


def _xml(events: Sequence[Event]) -> list[bytes]:
    return [render_operation(e, list(COLUMNS), current_ts=CURRENT_TS, variant=0, pretty=False,
                             prolog=False).encode() for e in events]


def _xml_unknown(e: Event) -> bytes:
    return _xml([e])[0].replace(b"type='I'", b"type='X'", 1)


_AVRO_COLUMNS = {KEY: "long", VALUE: "string"}


def _ogg_avro(kind: str) -> Writer:
    schema_of = ogg_avro_render.op_schema if kind == "op" else ogg_avro_render.row_schema
    record_of = ogg_avro_render.op_record if kind == "op" else ogg_avro_render.row_record

    def records(events: Sequence[Event]) -> list[bytes]:
        return [ogg_avro_render.encode(schema_of(e.table, _AVRO_COLUMNS), record_of(e, schema_of(e.table, _AVRO_COLUMNS)))
                for e in events]

    def unknown(e: Event) -> bytes:
        schema = schema_of(e.table, _AVRO_COLUMNS)
        return ogg_avro_render.encode(schema, {**record_of(e, schema), "op_type": "X"})

    def setup(tables: Sequence[str], scratch: Path) -> dict[str, str]:
        ogg_avro_render.write_schema_dir(scratch / "avsc", {t: schema_of(t, _AVRO_COLUMNS) for t in tables})
        return {"schemaDirectory": str(scratch / "avsc")}

    missing = {} if kind == "op" else {
        # a row record holds every column: a missing key column is written as null
        "missing_key": lambda table, n: event(table, "I", n, after={KEY: None, VALUE: "null key"})}
    return Writer(f"ogg-avro-{kind}", ".avro", records, unknown, BROKEN_AVRO, None, frame=_length_prefixed,
                  cannot={"non-row": NO_NON_ROW}, setup=setup, **missing)


# -- Debezium --------------------------------------------------------------------------------------

_DEBEZIUM_KINDS = {KEY: "int", VALUE: "str"}


def _debezium(events: Sequence[Event], *, schema: bool) -> Renderer:
    tables = {e.table for e in events}
    return Renderer(events, {t: _DEBEZIUM_KINDS for t in tables}, Style("mysql", schema=schema, layout="values"),
                    {t: t for t in tables})


def _debezium_json(events: Sequence[Event]) -> list[bytes]:
    r = _debezium(events, schema=False)
    return [_json(r.envelope(e, int(e.pos))) for e in events]


def _debezium_unknown(e: Event) -> bytes:
    return _json({**_debezium([e], schema=False).envelope(e, 1), "op": "x"})


def _debezium_avro_writer() -> Writer:
    """Value messages only (the keys come from ``apply``'s ``keys``), every schema in one registry."""
    shared: dict[str, Any] = {"_ids": {}, "schemas": {}, "subjects": {}, "_parsed": {}}
    last: list[AvroRenderer] = []

    def renderer(events: Sequence[Event]) -> AvroRenderer:
        avro = AvroRenderer(_debezium(events, schema=True), events, {e.table: [KEY] for e in events})
        vars(avro).update(shared)  # schema ids unique across the cases' files
        last[:] = [avro]
        return avro

    def values(events: Sequence[Event], op: str | None = None) -> list[bytes]:
        avro = renderer(events)
        out = []
        for e in events:
            value = avro.base.envelope(e, int(e.pos))
            value = value if op is None else {**value, "op": op}
            out.append(avro.message(avro.envelope_connect(e.table), value, f"{avro.base.topic(e.table)}-value"))
        return out

    def setup(tables: Sequence[str], scratch: Path) -> dict[str, str]:
        return {"schemaDirectory": str(last[0].write_registry(scratch / "registry"))}

    def missing(table: str, n: int) -> Event:
        # Avro cannot leave a field out: the key column holds Debezium's unavailable-value placeholder
        return event(table, "I", n, after={VALUE: "no key"})

    return Writer("debezium-avro", ".bin", values, lambda e: values([e], "x")[0], BROKEN_AVRO,
                  lambda table: (b"", "tombstone"), frame=_length_prefixed, missing_key=missing, setup=setup)


# -- Alibaba ---------------------------------------------------------------------------------------


def _canal(events: Sequence[Event]) -> list[bytes]:
    columns = {e.table: {KEY: "bigint(20)", VALUE: "varchar(16)"} for e in events}
    messages, _ = canal_render.canal_messages(events, columns)
    return [m.text.encode() for m in messages]


def _canal_unknown(e: Event) -> bytes:
    return _json({**json.loads(_canal([e])[0]), "type": "FROBNICATE"})


def _shareplex(events: Sequence[Event]) -> list[bytes]:
    messages, _ = shareplex_render.shareplex_messages(events)
    return [m.text.encode() for m in messages]


def _shareplex_unknown(e: Event) -> bytes:
    body = json.loads(_shareplex([e])[0])
    return _json({**body, "meta": {**body["meta"], "op": "frobnicate"}})


_DTS_FIELDS = [(KEY, 8), (VALUE, 253)]
_DTS_OPS = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}


def _dts_image(image: dict[str, Any] | None) -> list[Any] | None:
    if image is None:
        return None
    return [dts_render.integer(image[KEY]) if KEY in image else "NONE",
            dts_render.character(str(image[VALUE]).encode()) if image.get(VALUE) is not None else None]


def _dts(events: Sequence[Event]) -> list[bytes]:
    return [dts_render.encode(dts_render.record(
        _DTS_OPS[e.op], e.table, _DTS_FIELDS, before=_dts_image(e.before), after=_dts_image(e.after), id=int(e.pos),
        ts=1704067200 + int(e.pos), position=f"{int(e.pos)}@1", tags=dts_render.pk_tag(KEY))) for e in events]


# -- Qlik ------------------------------------------------------------------------------------------


def _qlik_missing(table: str, n: int) -> Event:
    # Replicate writes every column; one it did not capture has its columnMask bit 0
    return event(table, "U", n, before={VALUE: "a"}, after={VALUE: "no key"})


class _OddOperations(qlik_render.Table):
    """A table whose data schema's ``operation`` enum also has a symbol Replicate never writes
    (how an Avro data message can carry an unknown operation)."""

    def data_schema(self) -> dict[str, Any]:
        schema = super().data_schema()
        headers = next(f for f in schema["fields"] if f["name"] == "headers")
        operation = next(h for h in headers["type"]["fields"] if h["name"] == "operation")
        operation["type"]["symbols"] = [*operation["type"]["symbols"], "FROBNICATE"]
        return schema


def _qlik(avro: bool) -> Writer:
    def table_of_qlik(table: str) -> qlik_render.Table:
        return _OddOperations(table, ((KEY, "INT8", 1), (VALUE, "STRING", 0)))

    def messages(events: Sequence[Event]) -> list[Any]:
        tables = {e.table: table_of_qlik(e.table) for e in events}
        return [m for m in qlik_render.render_history(events, tables) if m is not None]

    def encode(m: Any) -> bytes:
        return qlik_render.avro_data(m) if avro else qlik_render.json_data(m).encode()

    def unknown(e: Event) -> bytes:
        m = messages([e])[0]
        return encode(dataclasses.replace(m, body={**m.body, "headers": {**m.body["headers"], "operation": "FROBNICATE"}}))

    def metadata(table: str) -> bytes:
        t = table_of_qlik(table)
        return qlik_render.avro_metadata(t) if avro else qlik_render.json_metadata(t).encode()

    def setup(tables: Sequence[str], scratch: Path) -> dict[str, str]:
        # every table's metadata message outside the landing directory: the data files hold data only
        directory = scratch / "metadata"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "metadata.json").write_text("".join(qlik_render.json_metadata(table_of_qlik(t)) + "\n"
                                                         for t in tables))
        return {"metadataDirectory": str(directory)}

    return Writer("qlik-avro" if avro else "qlik-json", ".avro" if avro else ".json",
                  lambda events: [encode(m) for m in messages(events)], unknown,
                  BROKEN_AVRO if avro else BROKEN_JSON, lambda table: (metadata(table), "metadata"),
                  frame=_length_prefixed if avro else _lines, missing_key=_qlik_missing, setup=setup,
                  cannot={"truncate": "Replicate's data messages have no truncate operation"})


# -- the registry's formats ------------------------------------------------------------------------


def writers() -> dict[str, Writer]:
    """A :class:`Writer` for every format that has contract cases, by format name."""
    gg_json = dict(broken=BROKEN_JSON, non_row=None, cannot={"non-row": NO_NON_ROW})
    out = [
        Writer("ogg-json", ".json", _ogg_json, _ogg_unknown, **gg_json),  # type: ignore[arg-type]
        Writer("ogg-json-row", ".json", _json_row, _json_row_unknown, **gg_json),  # type: ignore[arg-type]
        Writer("ogg-delimited", ".txt", _delimited, _delimited_unknown,
               b"I|CT.BROKEN|2024-01-01 00:00:02.000000|x|00000000000000000002|2", None,
               cannot={"non-row": NO_NON_ROW}, setup=lambda tables, scratch: {
                   "fieldDelimiter": "|", **_schema_files(tables, scratch)}),
        Writer("ogg-xml", ".xml", _xml, _xml_unknown, b"<operation table='CT.BROKEN' type='I' ts=", None,
               cannot={"non-row": NO_NON_ROW}),
        _ogg_avro("op"),
        _ogg_avro("row"),
        Writer("debezium-json", ".json", _debezium_json, _debezium_unknown, BROKEN_JSON, lambda table: (b"null", "tombstone")),
        _debezium_avro_writer(),
        Writer("canal-json", ".json", _canal, _canal_unknown, BROKEN_JSON,
               lambda table: (canal_render.ddl_message(table, 1704067200000).encode(), "ddl")),
        Writer("shareplex-json", ".json", _shareplex, _shareplex_unknown, BROKEN_JSON,
               lambda table: (shareplex_render.ddl_message(table).encode(), "ddl")),
        Writer("dts-avro", ".avro", _dts, None, BROKEN_AVRO,
               lambda table: (dts_render.encode(dts_render.record("HEARTBEAT", None)), "heartbeat"),
               frame=_length_prefixed,
               cannot={"unknown-op": "operation is an Avro enum whose every symbol is a row change or a marker: "
                                     "a value outside it is a broken record",
                       "truncate": "DTS writes no truncate operation"}),
        _qlik(avro=False),
        _qlik(avro=True),
    ]
    return {w.name: w for w in out}
