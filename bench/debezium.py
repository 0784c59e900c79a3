"""Debezium decode throughput: ``debezium-json`` (with and without schema) and ``debezium-avro``
beside the parse floor of each encoding (issue 4, Benchmark).

    python -m bench.debezium --events 1000000 --keys 200000 [--formats a,b] [--repeat R] [--warmup W]
        [--workdir DIR] [--seed S] [--write-results]

The workload of :mod:`bench.generate` (``events.json``, GoldenGate op-modeled JSON) is converted
once (in a subprocess, cached under ``<workload>/formats/<encoding>/`` with a ``manifest.json``)
into what Debezium's Oracle connector would have written for the same changes:

=========================  =====================================================================
encoding                   what is written
=========================  =====================================================================
``debezium-json-schema``   the Kafka Connect JSON converter with ``schemas.enable=true`` (the
                           verbose case): ``{"schema": <the envelope's Connect schema>, "payload":
                           <the envelope>}`` per line; decimals as Connect ``Decimal`` (base64
                           two's complement, scale 2, with their precision)
``debezium-json``          ``schemas.enable=false``: the envelope alone per line;
                           ``decimal.handling.mode=string`` (``"17520.00"``)
``debezium-avro``          Confluent's Avro converter: wire-format messages (magic byte, schema
                           id, Avro body), each preceded by its length (4 bytes, big-endian), as
                           a topic dump holds them; the schema in ``schemas/1.avsc``; decimals
                           as Avro ``bytes`` + ``decimal`` with Connect's properties
=========================  =====================================================================

The envelope: ``op`` (``c``/``u``/``d``), ``before``/``after``, ``source`` (connector ``oracle``,
``db`` ``ORCLPDB1``, ``schema`` ``BENCH``, ``table`` ``ORDERS``, ``ts_ms``/``ts_us``/``ts_ns`` from
``op_ts``, ``scn`` = ``commit_scn`` = the GoldenGate ``pos`` as a number, ``ssn`` 0,
``redo_thread`` 1, ``txId``), ``ts_ms`` (``current_ts``), ``transaction`` null. Debezium writes
whole rows: an update's after image is the whole new row (the GoldenGate before image, complete in
this workload, overlaid with the partial after image), so the same changes apply to the same table.
Integers are ``int64``, the ``YYYY-MM-DD`` dates and the text ``string``.

Then, in one Python process with one Spark session (``local[2]``), per encoding: **lakecdc**
(``get_decoder(format, options).read(...)`` to Spark's ``noop`` sink, every column evaluated,
rows and ``_error`` counted in the same pass: exactly the workload's events, none bad; the
helpers of :mod:`bench.decode`) and its **floor**: ``pyarrow.json.read_json`` with an explicit
schema of the envelope (the ``schema`` member of the verbose case is skipped, not parsed into
values: the floor is the cheapest honest parse of the records' values) for JSON, ``fastavro``'s
``schemaless_reader`` per message (after the 5-byte header; one thread) for Avro. ratio = floor
seconds / lakecdc seconds; the target is >= 0.33 (within 3x).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.json as pj
from pyspark.sql import SparkSession

from bench.decode import MB, Floor, Outcome, details_markdown, lakecdc_decode, table_markdown, timed
from bench.formats import Encoded, encoded_dir
from bench.generate import SOURCE_SCHEMA, Workload, workload_dir
from bench.run import (
    REPO,
    OtherLoad,
    ensure_workload,
    machine_markdown,
    start_spark,
    warmup_file,
    workload_markdown,
    write_results,
)

HEADING = "Debezium decode throughput"
#: Bumped whenever an encoding's bytes change, so that cached encodings are rebuilt.
VERSION = 1
SERVER = "bench"
TOPIC = f"{SERVER}.BENCH.ORDERS"
SCHEMA_ID = 1
DECIMALS = {f.name: f.type for f in SOURCE_SCHEMA if pa.types.is_decimal(f.type)}
COLUMNS = tuple(SOURCE_SCHEMA.names)
_FLUSH = 1 << 22

# -- the Debezium view of one GoldenGate event ------------------------------------------------------


def _micros(op_ts: str) -> int:
    """``2024-01-01 00:00:00.001000`` (UTC) as microseconds since 1970."""
    when = dt.datetime.strptime(op_ts, "%Y-%m-%d %H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp()) * 1_000_000 + when.microsecond


def _current_ms(current_ts: str) -> int:
    when = dt.datetime.strptime(current_ts, "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
    return int(when.timestamp()) * 1000 + when.microsecond // 1000


def envelope(message: dict[str, Any]) -> dict[str, Any]:
    """The Debezium envelope of one GoldenGate op-modeled message (values as Python: ints,
    Decimals, strings); an update's after image is the whole new row."""
    op = {"I": "c", "U": "u", "D": "d"}[message["op_type"]]
    before, after = message.get("before"), message.get("after")
    if op == "u":
        after = {**before, **after}
    micros = _micros(message["op_ts"])
    scn = str(int(message["pos"]))
    source = {
        "version": "2.7.0.Final", "connector": "oracle", "name": SERVER, "ts_ms": micros // 1000, "snapshot": "false",
        "db": "ORCLPDB1", "sequence": None, "ts_us": micros, "ts_ns": micros * 1000, "schema": "BENCH",
        "table": "ORDERS", "txId": f"0a.{scn}.1", "scn": scn, "commit_scn": scn, "lcr_position": None,
        "rs_id": None, "ssn": 0, "redo_thread": 1, "user_name": "BENCH",
    }
    return {"before": before, "after": after, "source": source, "op": op,
            "ts_ms": _current_ms(message["current_ts"]), "ts_us": None, "ts_ns": None, "transaction": None}


def _unscaled(value: Decimal, scale: int) -> int:
    return int(value.scaleb(scale))


def _decimal_bytes(value: Decimal, scale: int) -> bytes:
    n = _unscaled(value, scale)
    return n.to_bytes((n.bit_length() + 8) // 8, "big", signed=True)


def _image(image: dict[str, Any] | None, decimal: Callable[[Decimal, pa.Decimal128Type], Any]) -> dict[str, Any] | None:
    if image is None:
        return None
    return {c: (decimal(Decimal(v), DECIMALS[c]) if c in DECIMALS and v is not None else v) for c, v in image.items()}


def _with_images(env: dict[str, Any], decimal: Callable[[Decimal, pa.Decimal128Type], Any]) -> dict[str, Any]:
    return {**env, "before": _image(env["before"], decimal), "after": _image(env["after"], decimal)}


# -- Kafka Connect schema (JSON converter) -----------------------------------------------------------

_SOURCE_FIELDS = (
    ("version", "string", False), ("connector", "string", False), ("name", "string", False),
    ("ts_ms", "int64", False), ("snapshot", "string", True), ("db", "string", False), ("sequence", "string", True),
    ("ts_us", "int64", True), ("ts_ns", "int64", True), ("schema", "string", False), ("table", "string", False),
    ("txId", "string", True), ("scn", "string", True), ("commit_scn", "string", True), ("lcr_position", "string", True),
    ("rs_id", "string", True), ("ssn", "int64", True), ("redo_thread", "int32", True), ("user_name", "string", True),
)


def _column_field(f: pa.Field) -> dict[str, Any]:
    if pa.types.is_decimal(f.type):
        return {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                "parameters": {"scale": str(f.type.scale), "connect.decimal.precision": str(f.type.precision)},
                "field": f.name}
    kind = "int64" if pa.types.is_integer(f.type) else "string"
    return {"type": kind, "optional": f.name != "ID", "field": f.name}


def connect_schema() -> dict[str, Any]:
    """The envelope's Kafka Connect schema, as Debezium's Oracle connector declares it."""
    row = {"type": "struct", "fields": [_column_field(f) for f in SOURCE_SCHEMA], "optional": True,
           "name": f"{TOPIC}.Value"}
    source = {"type": "struct", "optional": False, "name": "io.debezium.connector.oracle.Source", "field": "source",
              "fields": [{"type": t, "optional": o, "field": n} for n, t, o in _SOURCE_FIELDS]}
    tx = {"type": "struct", "optional": True, "name": "event.block", "version": 1, "field": "transaction",
          "fields": [{"type": "string", "optional": False, "field": "id"},
                     {"type": "int64", "optional": False, "field": "total_order"},
                     {"type": "int64", "optional": False, "field": "data_collection_order"}]}
    return {"type": "struct", "optional": False, "name": f"{TOPIC}.Envelope", "version": 2, "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, source,
        {"type": "string", "optional": False, "field": "op"},
        {"type": "int64", "optional": True, "field": "ts_ms"}, {"type": "int64", "optional": True, "field": "ts_us"},
        {"type": "int64", "optional": True, "field": "ts_ns"}, tx]}


# -- Avro schema (Confluent's AvroConverter) ------------------------------------------------------


def _avro_column(f: pa.Field) -> dict[str, Any]:
    if pa.types.is_decimal(f.type):
        t: Any = {"type": "bytes", "scale": f.type.scale, "precision": f.type.precision, "connect.version": 1,
                  "connect.parameters": {"scale": str(f.type.scale), "connect.decimal.precision": str(f.type.precision)},
                  "connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}
    else:
        t = "long" if pa.types.is_integer(f.type) else "string"
    if f.name == "ID":
        return {"name": f.name, "type": t}
    return {"name": f.name, "type": ["null", t], "default": None}


def avro_schema() -> dict[str, Any]:
    """The envelope as Confluent's ``AvroData`` registers it (``after`` refers to ``Value`` by name)."""
    value = {"type": "record", "name": "Value", "namespace": TOPIC, "connect.name": f"{TOPIC}.Value",
             "fields": [_avro_column(f) for f in SOURCE_SCHEMA]}
    prim = {"string": "string", "int64": "long", "int32": "int"}
    source = {"type": "record", "name": "Source", "namespace": "io.debezium.connector.oracle",
              "connect.name": "io.debezium.connector.oracle.Source",
              "fields": [{"name": n, "type": ["null", prim[t]], "default": None} if o else {"name": n, "type": prim[t]}
                         for n, t, o in _SOURCE_FIELDS]}
    block = {"type": "record", "name": "block", "namespace": "event", "connect.version": 1, "connect.name": "event.block",
             "fields": [{"name": "id", "type": "string"}, {"name": "total_order", "type": "long"},
                        {"name": "data_collection_order", "type": "long"}]}
    return {"type": "record", "name": "Envelope", "namespace": TOPIC, "connect.version": 2,
            "connect.name": f"{TOPIC}.Envelope", "fields": [
                {"name": "before", "type": ["null", value], "default": None},
                {"name": "after", "type": ["null", f"{TOPIC}.Value"], "default": None},
                {"name": "source", "type": source}, {"name": "op", "type": "string"},
                {"name": "ts_ms", "type": ["null", "long"], "default": None},
                {"name": "ts_us", "type": ["null", "long"], "default": None},
                {"name": "ts_ns", "type": ["null", "long"], "default": None},
                {"name": "transaction", "type": ["null", block], "default": None}]}


# -- converting ---------------------------------------------------------------------------------------


def _gg_messages(events_json: Path) -> Iterator[dict[str, Any]]:
    with events_json.open(encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line, parse_float=Decimal)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _b64_decimal(value: Decimal, dtype: pa.Decimal128Type) -> str:
    return base64.b64encode(_decimal_bytes(value, dtype.scale)).decode("ascii")


def _text_decimal(value: Decimal, dtype: pa.Decimal128Type) -> str:
    return f"{value:.{dtype.scale}f}"


def _bytes_decimal(value: Decimal, dtype: pa.Decimal128Type) -> bytes:
    return _decimal_bytes(value, dtype.scale)


def build_json_schema(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    head = '{"schema":' + _dump(connect_schema()) + ',"payload":'
    with (out / "events.json").open("w", encoding="utf-8") as fh:
        for message in _gg_messages(events_json):
            fh.write(head + _dump(_with_images(envelope(message), _b64_decimal)) + "}\n")
    return ["events.json"], {}


def build_json(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    with (out / "events.json").open("w", encoding="utf-8") as fh:
        for message in _gg_messages(events_json):
            fh.write(_dump(_with_images(envelope(message), _text_decimal)) + "\n")
    return ["events.json"], {}


def build_avro(events_json: Path, out: Path) -> tuple[list[str], dict[str, str]]:
    schema = avro_schema()
    (out / "schemas").mkdir()
    (out / "schemas" / f"{SCHEMA_ID}.avsc").write_text(json.dumps(schema, indent=1) + "\n")
    parsed = fastavro.parse_schema(schema)
    header = b"\0" + struct.pack(">I", SCHEMA_ID)
    buffer = io.BytesIO()
    with (out / "events.bin").open("wb") as fh:
        for message in _gg_messages(events_json):
            start = buffer.tell()
            buffer.write(b"\0\0\0\0" + header)
            fastavro.schemaless_writer(buffer, parsed, _with_images(envelope(message), _bytes_decimal))
            end = buffer.tell()
            buffer.seek(start)
            buffer.write(struct.pack(">I", end - start - 4))
            buffer.seek(end)
            if end >= _FLUSH:
                fh.write(buffer.getbuffer())
                buffer = io.BytesIO()
        fh.write(buffer.getbuffer())
    return ["events.bin"], {"schemaDirectory": "schemas"}


@dataclass(frozen=True)
class Encoding:
    name: str
    decoder: str
    description: str
    build: Callable[[Path, Path], tuple[list[str], dict[str, str]]]


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding("debezium-json-schema", "debezium-json",
                 "Connect JSON with schema (schemas.enable=true), one message per line", build_json_schema),
        Encoding("debezium-json", "debezium-json",
                 "Connect JSON without schema, decimal.handling.mode=string, one message per line", build_json),
        Encoding("debezium-avro", "debezium-avro",
                 "Confluent Avro wire format, length-prefixed messages, schema id 1 in schemas/", build_avro),
    )
}


def _stamp(workload: Workload) -> dict[str, int]:
    stat = workload.events_json.stat()
    return {"version": VERSION, "source_bytes": stat.st_size, "source_mtime_ns": stat.st_mtime_ns}


def load(workload: Workload, name: str) -> Encoded | None:
    """The cached encoding ``name`` of ``workload``, None when absent or stale."""
    directory = encoded_dir(workload, name)
    manifest_path = directory / "manifest.json"
    if not manifest_path.exists():
        return None
    manifest = json.loads(manifest_path.read_text())
    if any(manifest.get(k) != v for k, v in _stamp(workload).items()):
        return None
    encoding = ENCODINGS[name]
    options = {k: str(directory / v) if k == "schemaDirectory" else v for k, v in manifest["options"].items()}
    return Encoded(name=name, decoder=encoding.decoder, description=encoding.description, directory=directory,
                   files=tuple(directory / f for f in manifest["files"]), options=options,
                   events=manifest["events"], seconds=manifest["seconds"])


def encode(workload: Workload, names: list[str], *, say: Callable[[str], None] = print) -> list[Encoded]:
    """The encodings ``names`` of ``workload``, built (and cached) when absent or stale."""
    out = []
    for name in names:
        cached = load(workload, name)
        if cached is None:
            directory = encoded_dir(workload, name)
            staging = directory.with_name(directory.name + ".partial")
            shutil.rmtree(staging, ignore_errors=True)
            staging.mkdir(parents=True)
            started = time.perf_counter()
            files, options = ENCODINGS[name].build(workload.events_json, staging)
            seconds = time.perf_counter() - started
            manifest = {**_stamp(workload), "format": name, "decoder": ENCODINGS[name].decoder, "files": files,
                        "options": options, "events": workload.events, "seconds": round(seconds, 2)}
            (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
            shutil.rmtree(directory, ignore_errors=True)
            os.replace(staging, directory)
            cached = load(workload, name)
            assert cached is not None
            say(f"  {name}: {cached.bytes / MB:,.1f} MB in {seconds:.1f} s ({directory})")
        out.append(cached)
    return out


# -- floors -------------------------------------------------------------------------------------------


def arrow_envelope() -> pa.Schema:
    """The envelope's Arrow schema for pyarrow's JSON reader (decimals as text: base64 or digits)."""
    row = pa.struct([(f.name, pa.string() if pa.types.is_decimal(f.type) else f.type) for f in SOURCE_SCHEMA])
    prim = {"string": pa.string(), "int64": pa.int64(), "int32": pa.int32()}
    source = pa.struct([(n, prim[t]) for n, t, _o in _SOURCE_FIELDS])
    tx = pa.struct([("id", pa.string()), ("total_order", pa.int64()), ("data_collection_order", pa.int64())])
    return pa.schema([("before", row), ("after", row), ("source", source), ("op", pa.string()), ("ts_ms", pa.int64()),
                      ("ts_us", pa.int64()), ("ts_ns", pa.int64()), ("transaction", tx)])


def floor_json(schema: pa.Schema, payload: bool) -> Callable[[Encoded], int]:
    """pyarrow's JSON reader, explicit schema; ``payload``: the envelope is the ``payload`` member
    (the ``schema`` member skipped)."""
    explicit = pa.schema([("payload", pa.struct(list(schema)))]) if payload else schema

    def parse(encoded: Encoded) -> int:
        return sum(
            pj.read_json(
                path,
                read_options=pj.ReadOptions(use_threads=True, block_size=1 << 24),
                parse_options=pj.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="ignore"),
            ).num_rows
            for path in encoded.files
        )

    return parse


def floor_avro_wire(encoded: Encoded) -> int:
    """fastavro's ``schemaless_reader`` per length-prefixed wire-format message (after the magic
    byte and schema id), one thread."""
    schema = fastavro.parse_schema(json.loads((Path(encoded.options["schemaDirectory"]) / f"{SCHEMA_ID}.avsc").read_text()))
    rows = 0
    for path in encoded.files:
        data = Path(path).read_bytes()
        pos = 0
        while pos < len(data):
            (n,) = struct.unpack_from(">I", data, pos)
            fastavro.schemaless_reader(io.BytesIO(data[pos + 9 : pos + 4 + n]), schema, None)
            pos += 4 + n
            rows += 1
    return rows


_JSON = "pyarrow.json.read_json, explicit schema, 2 threads"
FLOORS: dict[str, list[Floor]] = {
    "debezium-json-schema": [Floor(_JSON + " (the `schema` member skipped)", floor_json(arrow_envelope(), payload=True))],
    "debezium-json": [Floor(_JSON, floor_json(arrow_envelope(), payload=False))],
    "debezium-avro": [Floor("fastavro.schemaless_reader per length-prefixed message, 1 thread", floor_avro_wire)],
}


# -- measuring ---------------------------------------------------------------------------------------


def measure(spark: SparkSession, encoded: Encoded, scratch: Path, warmup: int, repeat: int) -> Outcome:
    files = [str(f) for f in encoded.files]

    def decode() -> int:
        decoded = lakecdc_decode(spark, encoded.decoder, files, encoded.options, scratch / encoded.name)
        if decoded.errors:
            raise AssertionError(f"{encoded.name}: lakecdc marked {decoded.errors:,} of {decoded.rows:,} events bad, "
                                 "e.g. " + "; ".join(decoded.sample_errors))
        return decoded.rows

    print(f"\n== {encoded.name}: {encoded.description}; {encoded.bytes / MB:,.1f} MB in {len(files)} file(s)")
    lakecdc = timed(f"lakecdc {encoded.decoder}", decode, encoded.events, warmup, repeat)
    floors = {
        floor.name: timed(f"floor ({floor.name})", lambda floor=floor: floor.run(encoded), encoded.events, warmup, repeat)
        for floor in FLOORS[encoded.name]
    }
    return Outcome(encoded, lakecdc, floors)


def ensure_encodings(workload: Workload, workdir: Path, seed: int, names: list[str]) -> list[Encoded]:
    """The encodings, converted by a subprocess first when any is absent (keeping this process lean)."""
    missing = [n for n in names if load(workload, n) is None]
    if missing:
        command = [sys.executable, "-m", "bench.debezium", "--convert-only", "--events", str(workload.events),
                   "--keys", str(workload.keys), "--seed", str(seed), "--workdir", str(workdir),
                   "--formats", ",".join(missing)]
        subprocess.run(command, check=True, cwd=REPO)
    loaded = [load(workload, n) for n in names]
    if any(e is None for e in loaded):
        raise RuntimeError("bench.debezium did not produce every encoding")
    return loaded  # type: ignore[return-value]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument("--formats", default=",".join(ENCODINGS), help="comma-separated encodings, in order")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs per contender; the median is reported")
    parser.add_argument("--warmup", type=int, default=1, help="untimed runs per contender before the timed ones")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--write-results", action="store_true", help="record the table in bench/RESULTS.md")
    parser.add_argument("--convert-only", action="store_true", help="only build the encodings (cached)")
    args = parser.parse_args(argv)
    unknown = set(args.formats.split(",")) - set(ENCODINGS)
    if unknown:
        parser.error(f"unknown formats {sorted(unknown)}; choose from {list(ENCODINGS)}")
    if args.repeat < 1 or args.warmup < 0:
        parser.error("--repeat must be at least 1 and --warmup at least 0")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    names = args.formats.split(",")
    args.workdir.mkdir(parents=True, exist_ok=True)
    if args.convert_only:
        workload = Workload(workload_dir(args.workdir, args.events, args.keys, args.seed), args.events, args.keys)
        if not workload.exists():
            raise SystemExit(f"no workload at {workload.directory}: generate it first (python -m bench.generate)")
        encode(workload, names)
        return
    pa.set_cpu_count(2)  # the 2 cores Spark's local[2] gets
    workload = ensure_workload(args.workdir, args.events, args.keys, args.seed)
    encodings = ensure_encodings(workload, args.workdir, args.seed, names)

    started = time.perf_counter()
    spark = start_spark()
    startup = time.perf_counter() - started
    scratch = args.workdir / "decode-staging"
    started = time.perf_counter()
    first = lakecdc_decode(spark, "ogg-json", [str(warmup_file(workload, args.workdir))], {}, scratch / "warmup")
    first_job = time.perf_counter() - started
    spark_line = (
        f"Spark start-up (fresh JVM): {startup:.1f} s; first job (lakecdc decoding {first.rows:,} events of "
        f"events.json to the noop sink): {first_job:.1f} s. Neither is included below."
    )
    print(spark_line)
    machine = machine_markdown(spark)
    command = "python -m bench.debezium " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"\nWorkload: {workload_markdown(workload)}")
    with OtherLoad() as other:
        outcomes = [measure(spark, e, scratch, args.warmup, args.repeat) for e in encodings]
    table = table_markdown(outcomes)
    details = details_markdown(outcomes)
    load_line = f"Other work took {other.share:.0%} of the machine's CPU time meanwhile."
    print(f"\n{table}\n\n{details}\n\n{load_line}")
    if args.write_results:
        when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        runs = f"median of {args.repeat} timed runs" if args.repeat > 1 else "one timed run"
        runs += f" after {args.warmup} warm-up run{'s' if args.warmup != 1 else ''} per contender"
        write_results(
            HEADING,
            f"Measured {when}, {runs}, with `{command}`. The workload's events converted to what Debezium's "
            f"Oracle connector writes (bench/debezium.py); every lakecdc run decoded exactly {workload.events:,} "
            f"events, none with `_error`; ratio = floor seconds / lakecdc seconds, target >= 0.33 (within 3x).\n\n"
            f"- Machine: {machine}.\n- Workload: {workload_markdown(workload)}.\n- {spark_line}\n- {load_line}\n\n"
            f"{table}\n\n{details}\n",
        )
    spark.stop()


if __name__ == "__main__":
    main()
