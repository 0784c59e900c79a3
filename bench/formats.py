"""The benchmark workload's ``events.json`` written in every GoldenGate format lakecdc decodes.

    python -m bench.formats --events N --keys K [--formats a,b] [--workdir DIR] [--seed S]

Each *encoding* is one format in one container, cached under
``<workdir>/<workload>/formats/<encoding>/`` with a ``manifest.json`` naming the decoder, its
options and the data files (written last: a directory without it is rebuilt):

============================  ==========================================================================
encoding                      what GoldenGate for Big Data would have written
============================  ==========================================================================
``ogg-json``                  ``format=json`` (op-modeled): ``events.json`` itself (a hard link)
``ogg-json-row``              ``format=json_row``: metadata members, then the image's columns at the
                              top level; ``BENCH.ORDERS.schema.json`` (row-modeled) in ``dirdef/``
``ogg-delimited``             ``format=delimitedtext`` with the seed's defaults: fields separated by
                              ASCII 001, ``op_type``, ``table``, ``op_ts``, ``current_ts``, ``pos``,
                              then the values by position (NULL as ``NULL``, missing as the empty
                              string); column names from ``dirdef/BENCH.ORDERS.schema.json``
``ogg-avro-op``               ``format=avro_op``: binary messages each preceded by its length (4 bytes,
                              big-endian), as a Kafka topic dump holds them; ``dirdef/BENCH.ORDERS.avsc``
``ogg-avro-op-ocf``           ``format=avro_op_ocf`` (HDFS handler): one object container file,
                              deflate, 64,000-byte sync interval (Java's default)
``ogg-avro-row``              ``format=avro_row``, length-prefixed messages as ``ogg-avro-op``
``ogg-avro-row-ocf``          ``format=avro_row_ocf``, one object container file as above
``ogg-xml``                   ``format=xml``: one ``<operation>`` document per event as in the seed
                              (13.5: one ``col`` per column, values in CDATA, pretty-printed), no prolog
                              (``includeProlog=false``, the default)
============================  ==========================================================================

**Same information.** Every encoding carries every event of ``events.json`` in the same order
with the same ``op_type``, ``op_ts``, ``current_ts``, ``pos`` and column values. Op-modeled
encodings (JSON, Avro op, XML) carry both images exactly: a column absent from a partial update's
after image stays *missing* (absent member; ``COL_isMissing: true``; no ``<after>`` element), a
NULL stays NULL (``null``; a null union branch with ``COL_isMissing: false``;
``<after isNull='true'/>``). Row-modeled encodings carry one image per operation by nature (the
after image of an insert or update, the before image of a delete; an update's before image is
not written): JSON row and delimited text still tell *missing* from NULL (absent member; empty
field vs ``NULL``), Avro row cannot (every column field is a value or null), so a partial update's
missing columns are written as null there, as GoldenGate does.

**Types.** Avro columns follow GoldenGate's default mapping (the seed's 13.4 schemas): ``ID`` and
the integers ``long``, the 2-place decimals ``double`` (``17520.00`` is written as the double
17520.0; every such value up to 10^10 survives the round trip), dates and text ``string``; all
nullable. JSON schemas declare ``integer``, ``number`` and ``string``. XML and delimited text carry
the exact text of ``events.json`` (``17520.00``).

Conversion reads ``events.json`` once with pyarrow's JSON reader (typed values) and once as lines
(to tell missing columns from NULL by their member names), then builds each encoding with polars
string expressions (text formats, 250,000 events per chunk) or fastavro (Avro).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import polars as pl
import pyarrow as pa
import pyarrow.json as pj

from bench.generate import KEY, SOURCE_SCHEMA, TABLE, Workload, workload_dir
from bench.peers import arrow_event_schema

#: Bumped whenever an encoding's bytes change, so that cached encodings are rebuilt.
VERSION = 2
CHUNK = 250_000
FIELD_DELIMITER = "\x01"
NULL_TEXT = "NULL"
MISSING_TEXT = ""
SIDES = (("b", "before"), ("a", "after"))
AVRO_SYNC_INTERVAL = 64_000
AVRO_CODEC = "deflate"
COLUMNS = tuple(SOURCE_SCHEMA.names)

# -- what each encoding is -------------------------------------------------------------------------


@dataclass(frozen=True)
class Encoding:
    """One format in one container: how it is built and which decoder reads it."""

    name: str
    decoder: str
    description: str
    #: writes the files into a directory, returns their names and the decoder's options (paths in
    #: them relative to the directory); None for ``ogg-json``, which is ``events.json`` itself
    build: Callable[[Source, Path], tuple[list[str], dict[str, str]]] | None


@dataclass(frozen=True)
class Encoded:
    """One cached encoding of a workload: the files, and the decoder with its options."""

    name: str
    decoder: str
    description: str
    directory: Path
    files: tuple[Path, ...]
    options: dict[str, str]
    events: int
    seconds: float  # time the conversion took

    @property
    def bytes(self) -> int:
        return sum(f.stat().st_size for f in self.files)


def encoded_dir(workload: Workload, name: str) -> Path:
    return workload.directory / "formats" / name


# -- the source events, read once ------------------------------------------------------------------


@dataclass
class Source:
    """The events of ``events.json`` column by column.

    ``frame`` holds, per event: ``line`` (the JSON text), ``op``, ``op_ts``, ``current_ts``,
    ``pos``, and for each side ``s`` in ``b`` (before) and ``a`` (after): ``has_s`` (the image
    exists) and for each column ``C``: ``s_C`` (the typed value: int64, float64 for decimals,
    string), ``s_C_text`` (the value's exact text in ``events.json``; NULL for JSON null) and
    ``s_C_present`` (the column is a member of the image; false when missing or no image).
    """

    frame: pl.DataFrame

    @property
    def events(self) -> int:
        return self.frame.height

    def chunks(self) -> Iterator[pl.DataFrame]:
        for start in range(0, self.frame.height, CHUNK):
            yield self.frame.slice(start, CHUNK)


def _member(column: str) -> list[str]:
    # A member name inside a JSON string value would be written with escaped quotes (\"ID\":), so a
    # quote-name-quote-colon after '{' or ',' can only be a member of the image object itself.
    return [f'{{"{column}":', f',"{column}":']


def load_source(events_json: Path) -> Source:
    """Read ``events.json`` (one GoldenGate op-modeled message per line) into a :class:`Source`."""
    table = pj.read_json(
        events_json,
        read_options=pj.ReadOptions(use_threads=True, block_size=1 << 24),
        parse_options=pj.ParseOptions(explicit_schema=arrow_event_schema()),
    )
    # \x1f never occurs raw in JSON text (control characters are escaped), so each line is one field
    lines = pl.read_csv(
        events_json, has_header=False, separator="\x1f", quote_char=None, schema={"line": pl.String}
    )["line"]
    if lines.len() != table.num_rows:
        raise ValueError(f"{events_json}: {lines.len()} lines but {table.num_rows} messages")
    line = pl.col("line")
    before_tail = line.str.split_exact(',"before":', 1).struct.field("field_1")
    segments = {
        "b": before_tail.str.split_exact(',"after":', 1).struct.field("field_0"),
        "a": line.str.split_exact(',"after":', 1).struct.field("field_1"),
    }
    data: dict[str, Any] = {
        "line": lines,
        "op": pl.from_arrow(table.column("op_type")),
        "op_ts": pl.from_arrow(table.column("op_ts")),
        "current_ts": pl.from_arrow(table.column("current_ts")),
        "pos": pl.from_arrow(table.column("pos")),
    }
    for side, image in SIDES:
        struct_column = table.column(image).combine_chunks()
        data[f"has_{side}"] = pl.from_arrow(struct_column.is_valid())
        for field in SOURCE_SCHEMA:
            values = struct_column.field(field.name)
            text = values.cast(pa.string())
            # decimal -> double through the text: pyarrow's direct cast is not correctly rounded
            # (97.57 would become 97.57000000000001)
            typed = text.cast(pa.float64()) if pa.types.is_decimal(field.type) else values
            data[f"{side}_{field.name}"] = pl.from_arrow(typed)
            data[f"{side}_{field.name}_text"] = pl.from_arrow(text)
    frame = pl.DataFrame(data)
    present = {
        f"{side}_{column}_present": pl.any_horizontal(
            *(segment.str.contains(m, literal=True) for m in _member(column))
        ).fill_null(False)
        for side, segment in segments.items()
        for column in COLUMNS
    }
    frame = frame.with_columns(**present)
    _check_source(frame, events_json)
    return Source(frame)


def _check_source(frame: pl.DataFrame, path: Path) -> None:
    ops = set(frame["op"].unique().to_list())
    if not ops <= {"I", "U", "D"}:
        raise ValueError(f"{path}: op types {sorted(ops)}; the converter handles I, U and D only")
    for side, _ in SIDES:
        # a value where the member is absent would mean the missing-column detection is wrong
        stray = frame.select(
            pl.any_horizontal(
                *(pl.col(f"{side}_{c}").is_not_null() & ~pl.col(f"{side}_{c}_present") for c in COLUMNS)
            ).sum()
        ).item()
        if stray:
            raise AssertionError(f"{path}: {stray} events have values for columns found missing")
        keyless = frame.filter(pl.col(f"has_{side}") & ~pl.col(f"{side}_{KEY}_present")).height
        if keyless:
            raise AssertionError(f"{path}: {keyless} {side} images without {KEY}")


# -- text formats ------------------------------------------------------------------------------------


def _write_lines(frame: pl.DataFrame, line: pl.Expr, handle: Any) -> None:
    frame.select(line.alias("out")).write_csv(handle, include_header=False, quote_style="never")


def _row_image(column: str) -> tuple[pl.Expr, pl.Expr]:
    """The single image a row formatter writes (after for I/U, before for D): text and presence."""
    is_delete = pl.col("op") == "D"
    text = pl.when(is_delete).then(pl.col(f"b_{column}_text")).otherwise(pl.col(f"a_{column}_text"))
    present = pl.when(is_delete).then(pl.col(f"b_{column}_present")).otherwise(pl.col(f"a_{column}_present"))
    return text, present


def json_schema_document() -> dict[str, Any]:
    """GoldenGate's JSON schema of ``BENCH.ORDERS`` (seed 13.3.5), row-modeled form."""
    def kind(t: pa.DataType) -> str:
        return "integer" if pa.types.is_integer(t) else "number" if pa.types.is_decimal(t) else "string"

    props: dict[str, Any] = {
        "table": {"description": "The fully qualified table name", "type": "string"},
        "op_type": {"description": "The operation type", "type": "string"},
        "op_ts": {"description": "The operation timestamp", "type": "string"},
        "current_ts": {"description": "The current processing timestamp", "type": "string"},
        "pos": {"description": "The position of the operation in the data source", "type": "string"},
        "primary_keys": {"description": "Array of the primary key column names.", "type": "array",
                         "items": {"type": "string"}, "minItems": 0, "uniqueItems": True},
        "tokens": {"$ref": "#/definitions/tokens"},
    }
    props.update({f.name: {"type": [kind(f.type), "null"]} for f in SOURCE_SCHEMA})
    return {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "title": TABLE,
        "description": f"JSON schema for table {TABLE}",
        "definitions": {"tokens": {"type": "object", "description": "Token keys and values are free form key value pairs.",
                                   "properties": {}, "additionalProperties": True}},
        "type": "object",
        "properties": props,
        "required": ["table", "op_type", "op_ts", "current_ts", "pos"],
        "additionalProperties": False,
    }


def _write_json_schema(directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{TABLE}.schema.json"
    path.write_text(json.dumps(json_schema_document(), indent=4) + "\n")
    return path


def build_json_row(source: Source, out: Path) -> tuple[list[str], dict[str, str]]:
    """Row-modeled JSON by cutting each op-modeled line: its metadata members, then the members of
    the one image the row formatter writes (values byte for byte as in ``events.json``)."""
    line = pl.col("line")
    header = (
        line.str.split_exact(',"before":', 1).struct.field("field_0")
        .str.split_exact(',"after":', 1).struct.field("field_0")
    )
    before_tail = line.str.split_exact(',"before":', 1).struct.field("field_1")  # {...}} for a delete
    after_tail = line.str.split_exact(',"after":', 1).struct.field("field_1")  # {...}} for I and U
    image = pl.when(pl.col("op") == "D").then(before_tail).otherwise(after_tail)
    # '{"ID":1,...}}' -> '"ID":1,...}': the image's members and the message's closing brace
    row = pl.concat_str([header, pl.lit(","), image.str.slice(1, image.str.len_chars() - 2)])
    _write_json_schema(out / "dirdef")
    with (out / "events.json").open("wb") as handle:
        for chunk in source.chunks():
            _write_lines(chunk, row, handle)
    return ["events.json"], {"schemaDirectory": "dirdef"}


def build_delimited(source: Source, out: Path) -> tuple[list[str], dict[str, str]]:
    """GoldenGate delimited text with the seed's defaults (ASCII 001, positional values)."""
    fields: list[pl.Expr] = [pl.col("op"), pl.lit(TABLE), pl.col("op_ts"), pl.col("current_ts"), pl.col("pos")]
    unwritable: list[pl.Expr] = []
    for column in COLUMNS:
        text, present = _row_image(column)
        fields.append(
            pl.when(~present).then(pl.lit(MISSING_TEXT)).when(text.is_null()).then(pl.lit(NULL_TEXT)).otherwise(text)
        )
        unwritable.append(
            present & text.is_not_null()
            & (text.str.contains(FIELD_DELIMITER, literal=True) | text.str.contains("\n", literal=True)
               | text.is_in([NULL_TEXT, MISSING_TEXT]))
        )
    record = pl.concat_str(fields, separator=FIELD_DELIMITER)
    _write_json_schema(out / "dirdef")
    with (out / "events.txt").open("wb") as handle:
        for chunk in source.chunks():
            bad = chunk.select(pl.any_horizontal(*unwritable).sum()).item()
            if bad:
                raise ValueError(f"{bad} events hold values delimited text cannot carry with these delimiters")
            _write_lines(chunk, record, handle)
    return ["events.txt"], {"schemaDirectory": "dirdef"}


def _cdata(text: pl.Expr) -> pl.Expr:
    return pl.concat_str([pl.lit("<![CDATA["), text.str.replace_all("]]>", "]]]]><![CDATA[>", literal=True), pl.lit("]]>")])


def build_xml(source: Source, out: Path) -> tuple[list[str], dict[str, str]]:
    """GoldenGate XML operations, pretty-printed like the seed's (13.5.2), one per event."""
    parts: list[pl.Expr] = [
        pl.lit(f"<operation table='{TABLE}' type='"), pl.col("op"), pl.lit("' ts='"), pl.col("op_ts"),
        pl.lit("' current_ts='"), pl.col("current_ts"), pl.lit("' pos='"), pl.col("pos"),
        pl.lit(f"' numCols='{len(COLUMNS)}'>\n"),
    ]
    for index, column in enumerate(COLUMNS):
        elements = []
        for side, tag in SIDES:
            text, present = pl.col(f"{side}_{column}_text"), pl.col(f"{side}_{column}_present")
            elements.append(
                pl.when(~present).then(pl.lit(""))
                .when(text.is_null()).then(pl.lit(f"   <{tag} isNull='true'/>\n"))
                .otherwise(pl.concat_str([pl.lit(f"   <{tag}>"), _cdata(text), pl.lit(f"</{tag}>\n")]))
            )
        neither = ~pl.col(f"b_{column}_present") & ~pl.col(f"a_{column}_present")
        body = pl.when(neither).then(pl.lit("   <missing/>\n")).otherwise(pl.concat_str(elements))
        parts += [pl.lit(f" <col name='{column}' index='{index}'>\n"), body, pl.lit(" </col>\n")]
    parts.append(pl.lit("</operation>"))
    document = pl.concat_str(parts)
    with (out / "events.xml").open("wb") as handle:
        for chunk in source.chunks():
            _write_lines(chunk, document, handle)
    return ["events.xml"], {}


# -- Avro --------------------------------------------------------------------------------------------

_AVRO_META: list[dict[str, Any]] = [
    {"name": "table", "type": "string"},
    {"name": "op_type", "type": "string"},
    {"name": "op_ts", "type": "string"},
    {"name": "current_ts", "type": "string"},
    {"name": "pos", "type": "string"},
    {"name": "primary_keys", "type": {"type": "array", "items": "string"}},
    {"name": "tokens", "type": {"type": "map", "values": "string"}, "default": {}},
]


def _avro_type(arrow_type: pa.DataType) -> str:
    if pa.types.is_integer(arrow_type):
        return "long"
    if pa.types.is_decimal(arrow_type):
        return "double"
    return "string"


def avro_schema(kind: str) -> dict[str, Any]:
    """GoldenGate's ``avro_op`` (``kind='op'``) or ``avro_row`` schema of ``BENCH.ORDERS``."""
    namespace, _, name = TABLE.rpartition(".")
    columns: list[dict[str, Any]] = []
    for f in SOURCE_SCHEMA:
        columns.append({"name": f.name, "type": ["null", _avro_type(f.type)], "default": None})
        if kind == "op":
            columns.append({"name": f"{f.name}_isMissing", "type": "boolean"})
    if kind == "row":
        fields = [*_AVRO_META, *columns]
    else:
        record = {"type": "record", "name": "columns", "fields": columns}
        fields = [
            *_AVRO_META,
            {"name": "before", "type": ["null", record], "default": None},
            {"name": "after", "type": ["null", "columns"], "default": None},
        ]
    return {"type": "record", "name": name, "namespace": namespace, "fields": fields}


def _avro_records(source: Source, kind: str) -> Iterator[dict[str, Any]]:
    """The events as the records GoldenGate's Avro formatter writes (fastavro's dict form)."""
    meta = [
        pl.lit(TABLE).alias("table"), pl.col("op").alias("op_type"), "op_ts", "current_ts", "pos",
        pl.lit([KEY]).alias("primary_keys"),
    ]
    if kind == "op":
        images = []
        for side, tag in SIDES:
            fields: dict[str, pl.Expr] = {}
            for column in COLUMNS:
                present = pl.col(f"{side}_{column}_present")
                fields[column] = pl.when(present).then(pl.col(f"{side}_{column}"))
                fields[f"{column}_isMissing"] = ~present
            images.append(pl.when(pl.col(f"has_{side}")).then(pl.struct(**fields)).alias(tag))
        columns = [*meta, *images]
    else:
        is_delete = pl.col("op") == "D"
        columns = [
            *meta,
            *(
                # a missing column cannot be said in avro_row: it is written as null
                pl.when(is_delete).then(pl.col(f"b_{c}")).otherwise(pl.col(f"a_{c}")).alias(c)
                for c in COLUMNS
            ),
        ]
    for chunk in source.chunks():
        yield from chunk.select(columns).iter_rows(named=True)


def _write_avsc(directory: Path, schema: dict[str, Any]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{TABLE}.avsc").write_text(json.dumps(schema, indent=2) + "\n")


def _build_avro(kind: str, container: str) -> Callable[[Source, Path], tuple[list[str], dict[str, str]]]:
    def build(source: Source, out: Path) -> tuple[list[str], dict[str, str]]:
        schema = avro_schema(kind)
        _write_avsc(out / "dirdef", schema)
        parsed = fastavro.parse_schema(schema)
        records = _avro_records(source, kind)
        if container == "ocf":
            with (out / "events.avro").open("wb") as handle:
                fastavro.writer(handle, parsed, records, codec=AVRO_CODEC, sync_interval=AVRO_SYNC_INTERVAL)
            return ["events.avro"], {"schemaDirectory": "dirdef"}
        buffer = io.BytesIO()
        with (out / "events.bin").open("wb") as handle:
            for number, record in enumerate(records, start=1):
                start = buffer.tell()
                buffer.write(b"\0\0\0\0")
                fastavro.schemaless_writer(buffer, parsed, record)
                end = buffer.tell()
                buffer.seek(start)
                buffer.write(struct.pack(">I", end - start - 4))
                buffer.seek(end)
                if number % CHUNK == 0:
                    handle.write(buffer.getbuffer())
                    buffer = io.BytesIO()
            handle.write(buffer.getbuffer())
        return ["events.bin"], {"schemaDirectory": "dirdef", "framing": "length-prefixed"}

    return build


ENCODINGS: dict[str, Encoding] = {
    e.name: e
    for e in (
        Encoding("ogg-json", "ogg-json", "op-modeled JSON, one message per line (events.json itself)", None),
        Encoding("ogg-json-row", "ogg-json-row", "row-modeled JSON, one message per line", build_json_row),
        Encoding("ogg-delimited", "ogg-delimited",
                 "delimited text, ASCII 001, positional values, names from the JSON schema", build_delimited),
        Encoding("ogg-avro-op", "ogg-avro-op", "Avro op messages, length-prefixed", _build_avro("op", "length-prefixed")),
        Encoding("ogg-avro-op-ocf", "ogg-avro-op", "Avro op, one object container file (deflate)", _build_avro("op", "ocf")),
        Encoding("ogg-avro-row", "ogg-avro-row", "Avro row messages, length-prefixed", _build_avro("row", "length-prefixed")),
        Encoding("ogg-avro-row-ocf", "ogg-avro-row", "Avro row, one object container file (deflate)", _build_avro("row", "ocf")),
        Encoding("ogg-xml", "ogg-xml", "XML operations, pretty-printed, values in CDATA, no prolog", build_xml),
    )
}


# -- the cache ---------------------------------------------------------------------------------------


def _source_stamp(workload: Workload) -> dict[str, int]:
    stat = workload.events_json.stat()
    return {"version": VERSION, "source_bytes": stat.st_size, "source_mtime_ns": stat.st_mtime_ns}


def load(workload: Workload, name: str) -> Encoded | None:
    """The cached encoding ``name`` of ``workload``, None when absent or stale."""
    directory = encoded_dir(workload, name)
    manifest_path = directory / "manifest.json"
    if not manifest_path.exists():
        return None
    manifest = json.loads(manifest_path.read_text())
    if any(manifest.get(k) != v for k, v in _source_stamp(workload).items()):
        return None
    encoding = ENCODINGS[name]
    options = {k: str(directory / v) if k == "schemaDirectory" else v for k, v in manifest["options"].items()}
    return Encoded(
        name=name, decoder=encoding.decoder, description=encoding.description, directory=directory,
        files=tuple(directory / f for f in manifest["files"]), options=options, events=manifest["events"],
        seconds=manifest["seconds"],
    )


def encode(workload: Workload, names: list[str], *, source: Source | None = None, say: Callable[[str], None] = print) -> list[Encoded]:
    """The encodings ``names`` of ``workload``, built (and cached) when absent or stale."""
    out = []
    for name in names:
        cached = load(workload, name)
        if cached is not None:
            out.append(cached)
            continue
        directory = encoded_dir(workload, name)
        staging = directory.with_name(directory.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        started = time.perf_counter()
        build = ENCODINGS[name].build
        if build is None:
            target = staging / "events.json"
            try:
                os.link(workload.events_json, target)
            except OSError:
                shutil.copyfile(workload.events_json, target)
            files, options, events = ["events.json"], {}, workload.events
        else:
            if source is None:
                loading = time.perf_counter()
                source = load_source(workload.events_json)
                say(f"  read {workload.events_json} for conversion in {time.perf_counter() - loading:.1f} s")
            files, options = build(source, staging)
            events = source.events
        seconds = time.perf_counter() - started
        manifest = {**_source_stamp(workload), "format": name, "decoder": ENCODINGS[name].decoder,
                    "files": files, "options": options, "events": events, "seconds": round(seconds, 2)}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(directory, ignore_errors=True)
        os.replace(staging, directory)
        built = load(workload, name)
        assert built is not None
        say(f"  {name}: {built.bytes / 1e6:,.1f} MB in {seconds:.1f} s ({directory})")
        out.append(built)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lakecdc-bench"))
    parser.add_argument("--formats", default=",".join(ENCODINGS), help="comma-separated encodings")
    args = parser.parse_args(argv)
    names = args.formats.split(",")
    unknown = set(names) - set(ENCODINGS)
    if unknown:
        parser.error(f"unknown formats {sorted(unknown)}; choose from {list(ENCODINGS)}")
    workload = Workload(workload_dir(args.workdir, args.events, args.keys, args.seed), args.events, args.keys)
    if not workload.exists():
        parser.error(f"no workload at {workload.directory}: generate it first (python -m bench.generate)")
    pa.set_cpu_count(2)
    encode(workload, names)


if __name__ == "__main__":
    main()
