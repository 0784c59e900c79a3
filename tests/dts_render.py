"""Write Alibaba DTS Avro ``Record`` s for the tests, and render oracle histories as DTS would.

Records are written with fastavro through the published schema as Alibaba's own Python demo loads
it (``fastavro.schema.load_schema`` resolving the named types by file name), not through the
decoder's code. Values use fastavro's union notation: ``(full record name, value)``; an
EmptyObject is its symbol (``"NULL"``/``"NONE"``).

A history (``test_property.Scenario.events``, in seq order) becomes what DTS writes for a MySQL
source (:class:`DtsHistory`): whole rows (DTS cannot say "this column was not logged", so a partial
update of the history is rendered with every column, from a simulation of the source table), a key
change as an UPDATE whose images hold different keys, a truncate as a DDL record (DTS has no
truncate operation: it is skipped, so the oracle is not told either), ``sourceTimestamp`` in
seconds and ``sourcePosition`` as ``offset@file`` over several binlog files. The oracle is fed what
the records say (:attr:`DtsHistory.views`): full images, op_ts cut to the second, pos as the
decoder documents it. Each run is written in one of the framings (length-prefixed, kcat, OCF)
after a heartbeat, with BEGIN markers, all skipped records.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import struct
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import load_schema

try:
    from tests.oracle import Event
    from tests.scenario_driver import Rendered, drive
except ModuleNotFoundError:  # tests/ is on sys.path, not the repository root
    from oracle import Event  # type: ignore[no-redef]
    from scenario_driver import Rendered, drive  # type: ignore[no-redef]

SCHEMA_DIR = Path(__file__).resolve().parents[1] / "lakecdc" / "decode" / "alibaba" / "schemas" / "dts"
NS = "com.alibaba.dts.formats.avro."
SCHEMA = load_schema(str(SCHEMA_DIR / f"{NS}Record.avsc"))
#: the same schema without ``bornTimestamp`` (older DTS versions end after ``afterImages``)
_CANONICAL = json.loads(fastavro.schema.to_parsing_canonical_form(SCHEMA))
LEGACY_SCHEMA = fastavro.parse_schema(
    {**_CANONICAL, "fields": [f for f in _CANONICAL["fields"] if f["name"] != "bornTimestamp"]})

# -- values -------------------------------------------------------------------------------------------------


def integer(value: int | str, precision: int = 8) -> tuple[str, dict[str, Any]]:
    return (f"{NS}Integer", {"precision": precision, "value": str(value)})


def character(text: str | bytes, charset: str = "utf8mb4") -> tuple[str, dict[str, Any]]:
    data = text if isinstance(text, bytes) else text.encode("utf-8" if charset.startswith("utf8") else charset)
    return (f"{NS}Character", {"charset": charset, "value": data})


def decimal(value: str, precision: int, scale: int) -> tuple[str, dict[str, Any]]:
    return (f"{NS}Decimal", {"value": value, "precision": precision, "scale": scale})


def floating(value: float) -> tuple[str, dict[str, Any]]:
    return (f"{NS}Float", {"value": value, "precision": 0, "scale": 0})


def timestamp(seconds: int, micros: int = 0) -> tuple[str, dict[str, Any]]:
    return (f"{NS}Timestamp", {"timestamp": seconds, "millis": micros})


def date_time(**pieces: int) -> tuple[str, dict[str, Any]]:
    return (f"{NS}DateTime", {k: pieces.get(k) for k in ("year", "month", "day", "hour", "minute", "second", "millis")})


def zoned(zone: str, **pieces: int) -> tuple[str, dict[str, Any]]:
    return (f"{NS}TimestampWithTimeZone", {"value": date_time(**pieces)[1], "timezone": zone})


def binary(data: bytes, kind: str = "BLOB") -> tuple[str, dict[str, Any]]:
    return (f"{NS}BinaryObject", {"type": kind, "value": data})


def text_object(text: str, kind: str = "JSON") -> tuple[str, dict[str, Any]]:
    return (f"{NS}TextObject", {"type": kind, "value": text})


def wkb(data: bytes) -> tuple[str, dict[str, Any]]:
    return (f"{NS}BinaryGeometry", {"type": "POINT", "value": data})


def wkt(text: str) -> tuple[str, dict[str, Any]]:
    return (f"{NS}TextGeometry", {"type": "POINT", "value": text})


# -- records and files -----------------------------------------------------------------------------------


def record(operation: str, object_name: str | None, fields: Sequence[tuple[str, int]] = (), *,
           before: Sequence[Any] | str | None = None, after: Sequence[Any] | str | None = None, id: int = 1,
           ts: int = 1696984408, position: str = "72469@78", tags: Mapping[str, str] | None = None,
           source_type: str = "MySQL", txid: str = "0", born: int | None = None) -> dict[str, Any]:
    """One Record (``fields`` as ``(name, dataTypeNumber)``; ``born``: None for ``ts``)."""
    return {
        "version": 0, "id": id, "sourceTimestamp": ts, "sourcePosition": position, "safeSourcePosition": position,
        "sourceTxid": txid, "source": {"sourceType": source_type, "version": "8.0.28"}, "operation": operation,
        "objectName": object_name, "processTimestamps": None, "tags": dict(tags or {}),
        "fields": [{"name": n, "dataTypeNumber": t} for n, t in fields] if fields else None,
        "beforeImages": list(before) if isinstance(before, (list, tuple)) else before,
        "afterImages": list(after) if isinstance(after, (list, tuple)) else after,
        "bornTimestamp": ts if born is None else born,
    }


def encode(rec: Mapping[str, Any], *, legacy: bool = False) -> bytes:
    """A Record's plain Avro binary datum (what DTS writes as the Kafka value)."""
    out = io.BytesIO()
    if legacy:
        fastavro.schemaless_writer(out, LEGACY_SCHEMA, {k: v for k, v in rec.items() if k != "bornTimestamp"})
    else:
        fastavro.schemaless_writer(out, SCHEMA, dict(rec))
    return out.getvalue()


def length_prefixed(messages: Sequence[bytes]) -> bytes:
    return b"".join(struct.pack(">I", len(m)) + m for m in messages)


def kcat(messages: Sequence[bytes | None], topic: str = "cn_hangzhou_dts_topic") -> str:
    """kcat ``-J`` lines (payload base64; None: a null value)."""
    lines = []
    for offset, m in enumerate(messages):
        lines.append(json.dumps({
            "topic": topic, "partition": 0, "offset": offset, "tstype": "create", "ts": 1696984408050,
            "broker": 1, "key": None, "payload": None if m is None else base64.b64encode(m).decode("ascii")}))
    return "".join(line + "\n" for line in lines)


def ocf(records: Sequence[Mapping[str, Any]]) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, SCHEMA, [dict(r) for r in records])
    return out.getvalue()


def pk_tag(*columns: str) -> dict[str, str]:
    return {"pk_uk_info": json.dumps({"PRIMARY": list(columns)}, separators=(",", ":"))}


# -- oracle histories -----------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1)
FRAMINGS = ("length-prefixed", "kcat", "ocf")


def dts_position(file: int, offset: int, record_id: int) -> str:
    """The decoder's documented ``pos`` of ``offset@file`` and the record id."""
    return f"{file:010d}@{offset:020d}/{record_id:020d}"


@dataclasses.dataclass
class DtsHistory:
    """A scenario's history as DTS records (one per event) and the events the oracle is given."""

    records: list[dict[str, Any]]
    views: list[Event | None]  # None: nothing the oracle applies (a truncate's DDL)

    @classmethod
    def of(cls, sc: Any) -> DtsHistory:
        specs = {spec.name: spec for spec in sc.specs}
        state: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {name: {} for name in specs}
        records: list[dict[str, Any]] = []
        views: list[Event | None] = []
        for i, e in enumerate(sc.events):
            spec = specs[e.table]
            columns = [*spec.keys, *spec.columns]
            seconds = int((datetime.strptime(e.op_ts, "%Y-%m-%d %H:%M:%S.%f") - _EPOCH).total_seconds())
            file, offset, rid = 78 + i // 4, 4 + 250 * (3 - i % 4), 1_700_000 + i  # offsets fall inside a file
            common = dict(id=rid, ts=seconds, position=f"{offset}@{file}",
                          tags=pk_tag(*spec.keys) if sc.primary_keys else {})
            if e.op == "T":
                state[e.table].clear()
                records.append(record("DDL", e.table, after=f"TRUNCATE TABLE {e.table}", **common))
                views.append(None)
                continue
            before, after = _full_images(e, spec, columns, state[e.table])
            fields = [(c, 3 if c == "ID" else 253 if c == "CODE" else 8 if spec.columns.get(c) == "int" else 253)
                      for c in columns]
            op = {"I": "INSERT", "U": "UPDATE", "D": "DELETE"}[e.op]
            records.append(record(op, e.table, fields, before=_values(before, spec, columns, i),
                                  after=_values(after, spec, columns, i), **common))
            when = f"{_EPOCH + timedelta(seconds=seconds):%Y-%m-%d %H:%M:%S}.000000"
            views.append(dataclasses.replace(e, op_ts=when, pos=dts_position(file, offset, rid), idx=0,
                                             before=before, after=after))
        return cls(records, views)

    def render(self, run: Sequence[int], number: int) -> tuple[bytes | str, str, list[Event], int]:
        """``(file content, suffix, the events the oracle applies, skipped markers without a table)``."""
        framing = FRAMINGS[(number - 1) % len(FRAMINGS)]
        heartbeat = record("HEARTBEAT", None, id=1, ts=1704067200, position="4@78")
        recs = [heartbeat]
        for k, i in enumerate(run):
            if k % 3 == 0:
                recs.append(record("BEGIN", None, id=1, ts=self.records[i]["sourceTimestamp"], position="4@78"))
            recs.append(self.records[i])
        seen = [v for i in run if (v := self.views[i]) is not None]
        markers = 1 + -(-len(run) // 3)
        if framing == "ocf":
            return ocf(recs), ".avro", seen, markers
        messages = [encode(r) for r in recs]
        if framing == "kcat":
            return kcat(messages), ".json", seen, markers
        return length_prefixed(messages), ".bin", seen, markers


def _full_images(e: Event, spec: Any, columns: list[str], rows: dict[tuple[Any, ...], dict[str, Any]]
                 ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The whole rows DTS writes for ``e`` (``rows``: the simulated source table, updated)."""
    empty = dict.fromkeys(columns)

    def key(image: Mapping[str, Any] | None) -> tuple[Any, ...] | None:
        return tuple(image[k] for k in spec.keys) if image and all(k in image for k in spec.keys) else None

    if e.op == "I":
        after = {**empty, **(e.after or {})}
        rows[key(after)] = after  # type: ignore[index]
        return None, after
    old = key(e.before) or key(e.after)
    before = {**empty, **rows.pop(old, {}), **(e.before or {})}  # type: ignore[arg-type]
    if e.op == "D":
        return before, None
    after = {**before, **(e.after or {})}
    rows[key(after)] = after  # type: ignore[index]
    return before, after


def _values(image: Mapping[str, Any] | None, spec: Any, columns: list[str], salt: int) -> list[Any] | None:
    """An image as DTS values: integers, utf8mb4 characters; NULL as a null element or, every other
    column, as EmptyObject NULL."""
    if image is None:
        return None
    out: list[Any] = []
    for n, c in enumerate(columns):
        v = image[c]
        if v is None:
            out.append(None if (n + salt) % 2 else "NULL")
        elif isinstance(v, int):
            out.append(integer(v))
        else:
            out.append(character(v))
    return out


# -- driving lakecdc -------------------------------------------------------------------------------------


def run_dts_scenario(spark: Any, sc: Any, workdir: Path, *, max_runs: int = 3) -> None:
    """:func:`scenario_driver.drive` over DTS runs (framings in turn); after every run the skipped
    records are checked too: heartbeats and BEGIN markers without a table, truncates per table."""
    history = DtsHistory.of(sc)
    markers_of: dict[int, int] = {}

    def rendered(run: list[int], number: int) -> Rendered:
        content, suffix, seen, markers_of[number] = history.render(run, number)
        return Rendered(content, suffix, seen, shown=f"{FRAMINGS[(number - 1) % len(FRAMINGS)]}: {seen}")

    def skipped_as_marked(number: int, run: list[int], summary: Any) -> None:
        truncates: dict[str, int] = {}
        for i in run:
            if history.views[i] is None:
                truncates[sc.events[i].table] = truncates.get(sc.events[i].table, 0) + 1
        assert (summary.skipped_unrouted, summary.quarantined_unrouted) == (markers_of[number], 0), f"run {number}"
        assert {t.source_table: t.skipped for t in summary.tables if t.skipped} == truncates, f"run {number}"

    drive(spark, sc, workdir, fmt="dts-avro", render=rendered, max_runs=max_runs, check=skipped_as_marked)


__all__ = ["DtsHistory", "encode", "kcat", "length_prefixed", "ocf", "record", "run_dts_scenario"]
