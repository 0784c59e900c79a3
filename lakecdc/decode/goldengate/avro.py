"""Oracle GoldenGate for Big Data Avro: row-modeled (``avro_row``) and operation-modeled (``avro_op``).

Every message is one operation, an Avro record whose schema GoldenGate writes per table to
``<schemaDirectory>/<CATALOG.SCHEMA.TABLE>.avsc`` (namespace = ``CATALOG.SCHEMA``, name =
``TABLE``). Both formats start with the metadata fields ``table``, ``op_type``, ``op_ts``,
``current_ts``, ``pos``, ``primary_keys`` (array) and ``tokens`` (map), then:

* **row** (``ogg-avro-row``): one nullable field per column. Avro cannot say *missing*, so every
  column is present (a value or NULL). Insert and update carry the after image, delete the
  before image, truncate none (its column fields are all null and are ignored).
* **op** (``ogg-avro-op``): nullable ``before`` and ``after`` records of the table's columns, each
  column ``COL`` followed by a boolean ``COL_isMissing``. ``COL_isMissing`` true: the column is
  missing (left out of the image); false with a value: present; false with null: NULL.

Inputs, told apart per file:

* **Object Container Files** (start with ``Obj\\x01``; GoldenGate's OCF formatter, HDFS): the
  schema is in the file header, every codec of :mod:`lakecdc.decode.avro.containers` is read. Large
  files are split at block boundaries and read in parallel.
* **Files of single messages**, each decoded with the per-table ``.avsc`` of ``schemaDirectory``.
  Framing (lakecdc option ``framing``): ``length-prefixed`` (default: each message preceded by
  its length as 4 bytes big-endian, what a Kafka dump tool writes), ``delimited`` (each message
  followed by GoldenGate's ``lineDelimiter``; implied when ``lineDelimiter`` is set) or ``single``
  (the whole file is one message). ``lineDelimiter`` accepts ``CDATA[...]`` and the Java
  properties escapes ``\\n``, ``\\r``, ``\\t``, ``\\\\``, ``\\uXXXX``. A delimited file is cut where
  a message *decodes* up to a delimiter, so a delimiter byte sequence inside a message does not
  split it; a message that decodes nowhere runs to the next delimiter and is quarantined.
  Empty segments (two delimiters in a row) are skipped.
* **Which schema version.** After a metadata change the table's schema changes and older
  messages must be read with the version that wrote them (GoldenGate ``versionSchemas=true``
  keeps ``<table>_<timestamp>.avsc`` copies). A plain message names its table in its first field,
  so the decoder tries that table's versions newest first (``<table>.avsc``, then the
  timestamped copies by descending name) and takes the first that decodes the message to exactly
  its last byte (to the delimiter, when delimited): an older message lacks the bytes a newer
  schema's added column needs, and a newer message has bytes an older schema leaves over.
* **Generic wrapper** (``wrapMessageInGenericAvroMessage=true``): every message is an
  ``oracle.goldengate.generic_wrapper`` record ``{table_name, schema_fingerprint, payload}``; the
  fingerprint (Avro's 64-bit parsing fingerprint, see :func:`~lakecdc.decode.avro.schemas.
  parsing_fingerprint`) picks the schema version exactly, from the fingerprints of every
  ``.avsc`` of ``schemaDirectory``. An OCF file whose schema is the wrapper is unwrapped too.

Values become exact text as :func:`lakecdc.decode.avro.text.text_converter` describes (double
``17520.0`` stays ``17520.0``, decimals exactly, bytes base64, nested values JSON). Column types
(:meth:`column_types`) come from the schemas: ``long`` bigint, ``int`` int, ``double``/``float``
double, ``boolean``, ``string``, ``decimal(p,s)`` exactly, anything else string (GoldenGate date
strings such as ``1994-09-30:15:33:00`` are Avro strings and stay strings). When several schemas
describe a table, the newest version wins, then OCF headers in file order.

A message that cannot be read (truncated, no schema for its table, decodes with none of the
table's versions, unknown fingerprint, corrupt OCF block) does not stop the batch: its row
carries ``_error``, ``_offset`` and ``_raw`` (the message's bytes, base64), and goes to the
quarantine. ``_offset`` is the byte offset of the message's length prefix (length-prefixed), of
its first byte (delimited, single), or of its OCF block (OCF; ``_row`` numbers the records).

Options are the formatters' property names (without ``gg.handler.<name>.format.``):
``insertOpKey``/``updateOpKey``/``deleteOpKey``/``truncateOpKey`` (I/U/D/T),
``schemaDirectory`` (``./dirdef``), ``wrapMessageInGenericAvroMessage`` (false),
``lineDelimiter`` (none), ``encoding`` of the ``.avsc`` files (UTF-8),
``treatAllColumnsAsStrings`` (false: every column typed as string), and lakecdc's ``framing``,
``maxBlockBytes`` and ``maxBlockRecords`` (an OCF block's limits: :class:`~lakecdc.decode.avro.containers.BlockLimits`).
``pkUpdateHandling`` (abend): a row formatter with ``delete-insert`` writes a key change as a
delete and an insert at the same ``op_ts`` and ``pos``; told so, ``ogg-avro-row`` joins each such
pair into the key change it was (:func:`~lakecdc.decode.goldengate.common.rejoin_split_key_changes`),
applied by ``pk_update`` as for op-modeled formats (with ``update`` or ``abend`` there is nothing
to join; the op format shows key changes itself). ``versionSchemas``, ``iso8601Format``,
``generateSchema`` and ``schemaFilePath`` are accepted: they change how GoldenGate writes, and
the reader copes with each outcome.
"""

from __future__ import annotations

import base64
import codecs
import math
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import IMAGE_TYPE
from lakecdc.decode.avro.containers import (
    DEFAULT_LIMITS,
    LIMIT_OPTIONS,
    BlockLimits,
    is_ocf,
    ocf_records,
    plan_ocf_splits,
    read_ocf_header,
)
from lakecdc.decode.avro.schemas import (
    Mismatch,
    SchemaDirectory,
    full_name,
    load_schema_directory,
    parsing_fingerprint,
    peek_string,
    read_at,
    read_exact,
)
from lakecdc.decode.avro.text import double_text, spark_type, text_converter, text_kind, value_text
from lakecdc.decode.base import Decoder
from lakecdc.decode.checks import first_error
from lakecdc.decode.files.splits import Split, split_bytes, split_numbers, splits_frame
from lakecdc.decode.kafka.dumps import iter_length_prefixed, length_prefixed_splits
from lakecdc.decode.times import parse_op_ts, session_is_utc
from lakecdc.decode.goldengate.common import (
    canonical_events,
    check_pk_update_handling,
    op_column,
    op_keys,
    rejoin_split_key_changes,
    source_map,
)
from lakecdc.errors import ConfigError
from lakecdc.spark.compat import default_parallelism

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

Kind = Literal["row", "op"]
_META = ("table", "op_type", "op_ts", "current_ts", "pos", "primary_keys", "tokens")
WRAPPER_NAME = "oracle.goldengate.generic_wrapper"
WRAPPER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "generic_wrapper",
    "namespace": "oracle.goldengate",
    "fields": [
        {"name": "table_name", "type": "string"},
        {"name": "schema_fingerprint", "type": "long"},
        {"name": "payload", "type": "bytes"},
    ],
}
FRAMINGS = ("length-prefixed", "delimited", "single")
_BATCH_ROWS = 4096
_MAX_TASKS = 256

_STR_MAP = T.MapType(T.StringType(), T.StringType())
DECODED_SCHEMA = T.StructType(
    [T.StructField(f"m_{n}", T.StringType()) for n in _META[:5]]
    + [
        T.StructField("m_primary_keys", T.ArrayType(T.StringType())),
        T.StructField("m_tokens", _STR_MAP),
        T.StructField("m_before", IMAGE_TYPE),
        T.StructField("m_after", IMAGE_TYPE),
        T.StructField("m_schema", T.StringType()),
        T.StructField("_file", T.StringType()),
        T.StructField("_block", T.LongType()),
        T.StructField("_row", T.LongType()),
        T.StructField("_offset", T.LongType()),
        T.StructField("m_raw", T.StringType()),
        T.StructField("m_error", T.StringType()),
    ]
)
_ARROW_MAP = pa.map_(pa.string(), pa.string())
_ARROW_SCHEMA = pa.schema(
    [(f"m_{n}", pa.string()) for n in _META[:5]]
    + [
        ("m_primary_keys", pa.list_(pa.string())),
        ("m_tokens", _ARROW_MAP),
        ("m_before", _ARROW_MAP),
        ("m_after", _ARROW_MAP),
        ("m_schema", pa.string()),
        ("_file", pa.string()),
        ("_block", pa.int64()),
        ("_row", pa.int64()),
        ("_offset", pa.int64()),
        ("m_raw", pa.string()),
        ("m_error", pa.string()),
    ]
)


def unescape(value: str) -> str:
    """Java properties escapes (``\\n``, ``\\r``, ``\\t``, ``\\\\``, ``\\uXXXX``) in an option value."""
    simple = {"n": "\n", "r": "\r", "t": "\t", "f": "\f", "\\": "\\"}

    def one(m: re.Match[str]) -> str:
        text = m.group(0)
        return chr(int(text[2:], 16)) if text[1] == "u" else simple.get(text[1], text[1])

    return re.sub(r"\\u[0-9a-fA-F]{4}|\\.", one, value)


# -- how one schema's records become images ------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The columns of one message schema, with their text converters (and missing flags)."""

    name: str
    columns: tuple[tuple[str, Any, str | None], ...]  # (column, converter, isMissing field)
    types: dict[str, T.DataType]
    error: str | None = None
    kinds: tuple[str | None, ...] = ()  # text_kind of each column (None: use its converter)

    def builder(self) -> Callable[[dict[str, Any], Callable[[Any], None], Callable[[Any], None]], int]:
        """``build(record_or_image, keys.append, values.append) -> entries``: the image's present
        columns (all of them for row records) as text, as :func:`_image` gives them, compiled once
        per layout (plain code per column instead of a loop of converter calls)."""
        cached = _BUILDERS.get(id(self))
        if cached is not None and cached[0] is self:
            return cached[1]
        fn = _compile_builder(self)
        _BUILDERS[id(self)] = (self, fn)
        return fn

    @classmethod
    def of(cls, schema: Any, kind: Kind, name: str) -> Layout:
        fields = schema.get("fields", []) if isinstance(schema, dict) else []
        by_name = {f["name"]: f["type"] for f in fields}
        images = {side: _record_of(by_name.get(side)) for side in ("before", "after")}
        looks_op = any(r is not None for r in images.values())
        if kind == "op":
            record = images["before"] or images["after"]
            if record is None:
                return cls(name, (), {}, f"{name} has no 'before'/'after' records: these are Avro row "
                                         "messages (use format ogg-avro-row)")
            cols = record.get("fields", [])
        else:
            if looks_op:
                return cls(name, (), {}, f"{name} has 'before'/'after' records: these are Avro op "
                                         "messages (use format ogg-avro-op)")
            cols = [f for f in fields if f["name"] not in _META]
        names = {f["name"] for f in cols}
        out = []
        for f in cols:
            n = f["name"]
            if kind == "op" and n.endswith("_isMissing") and n[: -len("_isMissing")] in names:
                continue
            flag = f"{n}_isMissing" if kind == "op" and f"{n}_isMissing" in names else None
            out.append((n, text_converter(f["type"]), flag))
        kept = {c for c, _, _ in out}
        types = {f["name"]: spark_type(f["type"]) for f in cols if f["name"] in kept}
        kinds = tuple(text_kind(f["type"]) for f in cols if f["name"] in kept)
        return cls(name, tuple(out), types, kinds=kinds)


_BUILDERS: dict[int, tuple[Layout, Any]] = {}


def _compile_builder(layout: Layout) -> Any:
    """The source of :meth:`Layout.builder`'s function, compiled (names only enter as ``repr``)."""
    env: dict[str, Any] = {"_dbl": double_text, "_fin": math.isfinite}
    lines = ["def build(img, ka, va):", "    g = img.get", "    n = 0"]
    for i, (col, conv, flag) in enumerate(layout.columns):
        kind = layout.kinds[i] if i < len(layout.kinds) else None
        get = f"g({col!r})"
        if kind == "string":
            value = get
        elif kind == "integer":
            value = f"(None if (v := {get}) is None else str(v))"
        elif kind == "double":
            value = f"(None if (v := {get}) is None else (repr(v) if _fin(v) else _dbl(v)))"
        elif kind == "boolean":
            value = f"(None if (v := {get}) is None else ('true' if v else 'false'))"
        else:
            env[f"_c{i}"] = conv
            value = f"_c{i}({get})"
        body = [f"ka({col!r})", f"va({value})", "n += 1"]
        if flag is None:
            lines += [f"    {b}" for b in body]
        else:
            lines.append(f"    if not g({flag!r}):")
            lines += [f"        {b}" for b in body]
    lines.append("    return n")
    exec(compile("\n".join(lines), f"<image builder of {layout.name}>", "exec"), env)  # noqa: S102
    return env["build"]


def _record_of(avro_type: Any) -> dict[str, Any] | None:
    """The record schema inside ``avro_type`` (a record or a union with one), None otherwise."""
    for branch in avro_type if isinstance(avro_type, list) else [avro_type]:
        if isinstance(branch, dict) and branch.get("type") == "record":
            return branch
    return None


# -- reading in the executors --------------------------------------------------------------------


class _Bad(Exception):
    """A message that cannot be decoded: its table (when known) and why."""

    def __init__(self, table: str | None, reason: str) -> None:
        super().__init__(reason)
        self.table = table
        self.reason = reason


_MAP_NAMES = ("m_tokens", "m_before", "m_after")


class _MapColumn:
    """A ``map<string,string>`` column collected flat (offsets, keys, values, nulls)."""

    __slots__ = ("offsets", "keys", "values", "nulls")

    def __init__(self) -> None:
        self.offsets: list[int] = [0]
        self.keys: list[str] = []
        self.values: list[str | None] = []
        self.nulls: list[bool] = []

    def add(self, pairs: Any) -> None:
        if pairs is None:
            self.nulls.append(True)
        else:
            self.nulls.append(False)
            for k, v in pairs:
                self.keys.append(k)
                self.values.append(v)
        self.offsets.append(len(self.keys))

    def add_image(self, build: Any, img: Any) -> None:
        """An image built by a :meth:`Layout.builder` (NULL when ``img`` is not a record)."""
        if isinstance(img, dict):
            self.nulls.append(False)
            build(img, self.keys.append, self.values.append)
        else:
            self.nulls.append(True)
        self.offsets.append(len(self.keys))

    def array(self) -> pa.Array:
        return pa.MapArray.from_arrays(
            pa.array(self.offsets, pa.int32()), pa.array(self.keys, pa.string()), pa.array(self.values, pa.string()),
            type=_ARROW_MAP, mask=pa.array(self.nulls, pa.bool_()),
        )


class _Rows:
    """Output rows collected column by column, flushed as Arrow batches."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.cols: dict[str, list[Any]] = {n: [] for n in _ARROW_SCHEMA.names if n not in _MAP_NAMES}
        self.maps: dict[str, _MapColumn] = {n: _MapColumn() for n in _MAP_NAMES}

    def __len__(self) -> int:
        return len(self.cols["_row"])

    def add(self, **values: Any) -> None:
        for name, column in self.cols.items():
            column.append(values.get(name))
        for name, m in self.maps.items():
            m.add(values.get(name))

    def flush(self) -> pa.RecordBatch:
        arrays = [
            self.maps[f.name].array() if f.name in _MAP_NAMES else pa.array(self.cols[f.name], f.type)
            for f in _ARROW_SCHEMA
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=_ARROW_SCHEMA)
        self._reset()
        return batch


@dataclass
class AvroReader:
    """Decodes splits of input files to rows of :data:`DECODED_SCHEMA` (runs in executors)."""

    kind: Kind
    framing: str
    delimiter: bytes
    wrapped: bool
    schemas: SchemaDirectory | None
    limits: BlockLimits = DEFAULT_LIMITS
    _layouts: dict[Any, Layout] = field(default_factory=dict, repr=False)

    def __call__(self, batches: Iterator[pa.RecordBatch], *, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
        """``mapInArrow`` body: split numbers (:func:`~lakecdc.decode.files.splits.splits_frame`) to rows."""
        rows = _Rows()
        for i in split_numbers(batches):
            for _ in self._split(splits[i], rows):
                if len(rows) >= _BATCH_ROWS:
                    yield rows.flush()
        if len(rows):
            yield rows.flush()

    # -- per split
    def _split(self, s: Split, rows: _Rows) -> Iterator[None]:
        if s.kind == "bad":
            with open(s.path, "rb") as fh:
                head = fh.read(1 << 16)
            rows.add(_file=s.path, _block=0, _row=0, _offset=0, m_raw=_b64(head), m_error=s.note)
            yield None
        elif s.kind == "ocf":
            yield from self._ocf(s, rows)
        else:
            yield from self._messages(s.path, rows, s.start, s.end, s.first_row)

    def _messages(self, path: str, rows: _Rows, start: int = 0, stop: int | None = None, first_row: int = 0) -> Iterator[None]:
        with open(path, "rb") as fh:
            if self.framing == "length-prefixed":
                for n, frame in enumerate(iter_length_prefixed(fh, start), first_row):
                    if stop is not None and frame.offset >= stop:  # the next split's first message
                        return
                    where = dict(_file=path, _block=0, _row=n, _offset=frame.offset)
                    if frame.error is not None:
                        rows.add(**where, m_raw=_b64(frame.payload), m_error=frame.error)
                    else:
                        self._one(frame.payload, 0, lambda end, p=frame.payload: end == len(p), where, rows)
                    yield None
                return
            data = fh.read()
        if self.framing == "single":
            if data:
                self._one(data, 0, lambda end: end == len(data), dict(_file=path, _block=0, _row=0, _offset=0), rows)
                yield None
            return
        yield from self._delimited(path, data, rows)

    def _delimited(self, path: str, data: bytes, rows: _Rows) -> Iterator[None]:
        delim = self.delimiter
        pos = n = 0
        while pos < len(data):
            if data.startswith(delim, pos):
                pos += len(delim)  # an empty segment
                continue
            where = dict(_file=path, _block=0, _row=n, _offset=pos)
            end = self._one(data, pos, lambda e: e == len(data) or data.startswith(delim, e), where, rows)
            if end is None:
                nxt = data.find(delim, pos)
                end = len(data) if nxt < 0 else nxt
            pos = end + len(delim)
            n += 1
            yield None

    def _one(self, data: bytes, pos: int, fits: Callable[[int], bool], where: dict[str, Any], rows: _Rows) -> int | None:
        """Decode the message at ``data[pos]`` into ``rows``; return where it ended (None: bad).

        A bad message's raw bytes run to the end of ``data``, or to the next delimiter.
        """
        try:
            record, schema_name, layout, end = self._decode(data, pos, fits)
        except _Bad as bad:
            stop = len(data) if self.framing != "delimited" else _next_fit(data, pos, self.delimiter)
            rows.add(**where, m_table=bad.table, m_raw=_b64(data[pos:stop]), m_error=bad.reason)
            return None
        self._emit(record, layout, schema_name, where, _b64(data[pos:end]), rows)
        return end

    def _decode(self, data: bytes, pos: int, fits: Callable[[int], bool]) -> tuple[Any, str, Layout, int]:
        dirs = self.schemas
        assert dirs is not None
        if self.wrapped:
            try:
                wrapper, end = read_at(data, pos, _wrapper_parsed(dirs))
            except Mismatch as exc:
                raise _Bad(None, f"not a generic_wrapper message: {exc}") from None
            if not fits(end):
                raise _Bad(None, f"not a generic_wrapper message: the wrapper schema reads {end - pos} bytes, "
                                 "which is not the whole message")
            record, name, layout = self._unwrap(wrapper)
            return record, name, layout, end
        table = peek_string(data, pos)
        if table is None:
            raise _Bad(None, "does not start with a table name (an Avro string): not a GoldenGate Avro message")
        versions = dirs.versions(table)
        if not versions:
            raise _Bad(table, f"no schema for table '{table}' in schemaDirectory '{dirs.path}' "
                              f"(expected {table}.avsc)")
        errors = []
        for sf in versions:
            try:
                record, end = read_at(data, pos, sf.parsed)
            except Mismatch as exc:
                errors.append(f"{sf.file}: {exc}")
                continue
            if fits(end):
                return record, sf.file, self._layout(sf.fingerprint, sf.schema, sf.file), end
            errors.append(f"{sf.file}: reads {end - pos} bytes, not the whole message")
        raise _Bad(table, f"does not decode with any schema version of table '{table}' "
                          f"(tried newest first) — {'; '.join(errors)}")

    def _unwrap(self, wrapper: dict[str, Any]) -> tuple[Any, str, Layout]:
        dirs = self.schemas
        table, fp = wrapper.get("table_name"), wrapper.get("schema_fingerprint")
        sf = dirs.by_fingerprint.get(fp) if dirs is not None else None
        if sf is None:
            known = ", ".join(f"{v.file}={v.fingerprint}" for v in (dirs.versions(table) if dirs and table else ()))
            where = f"schemaDirectory '{dirs.path}'" if dirs is not None else "the schema directory"
            raise _Bad(table, f"unknown schema_fingerprint {fp} for table '{table}': no .avsc in {where} "
                              f"has it ({'fingerprints of the table: ' + known if known else 'the table has no schema there'})")
        try:
            record = read_exact(wrapper["payload"], sf.parsed)
        except Mismatch as exc:
            raise _Bad(table, f"payload does not decode with {sf.file} (schema_fingerprint {fp}): {exc}") from None
        return record, sf.file, self._layout(sf.fingerprint, sf.schema, sf.file)

    def _ocf(self, split: Split, rows: _Rows) -> Iterator[None]:
        from fastavro import parse_schema

        path, start = split.path, split.start
        with open(path, "rb") as fh:
            header = read_ocf_header(fh)
            wrapped = full_name(header.schema) == WRAPPER_NAME
            parsed = parse_schema(header.schema, _write_hint=False)
            name = f"{os.path.basename(path)} (OCF header)"
            layout = None if wrapped else self._layout(("ocf", path), header.schema, name)
            for row, offset, record, error, data in ocf_records(fh, header, parsed, split):
                where = dict(_file=path, _block=start, _offset=offset, _row=row)
                if error is not None:
                    rows.add(**where, m_raw=_b64(data), m_error=error)
                    yield None
                    continue
                raw = _b64(data)
                if wrapped:
                    try:
                        record, sname, rlayout = self._unwrap(record)
                    except _Bad as bad:
                        rows.add(**where, m_table=bad.table, m_raw=raw, m_error=bad.reason)
                        yield None
                        continue
                else:
                    sname, rlayout = name, layout  # type: ignore[assignment]
                self._emit(record, rlayout, sname, where, raw, rows)
                yield None

    # -- records to rows
    def _layout(self, key: Any, schema: Any, name: str) -> Layout:
        if key not in self._layouts:
            self._layouts[key] = Layout.of(schema, self.kind, name)
        return self._layouts[key]

    def _emit(self, record: Any, layout: Layout, schema_name: str, where: dict[str, Any], raw: str, rows: _Rows) -> None:
        if not isinstance(record, dict):
            rows.add(**where, m_raw=raw, m_error=f"{schema_name}: the message is not a record")
            return
        meta = {f"m_{n}": value_text(record.get(n)) for n in _META[:5]}
        if layout.error is not None:
            rows.add(**where, m_table=meta["m_table"], m_raw=raw, m_error=layout.error)
            return
        keys = record.get("primary_keys")
        tokens = record.get("tokens") or {}
        # the row, appended column by column (what rows.add(**where, **meta, ...) would do)
        cols, maps = rows.cols, rows.maps
        for name, value in where.items():
            cols[name].append(value)
        for name, value in meta.items():
            cols[name].append(value)
        cols["m_primary_keys"].append([str(k) for k in keys] if keys else None)
        cols["m_schema"].append(schema_name)
        cols["m_raw"].append(raw)
        cols["m_error"].append(None)
        maps["m_tokens"].add([(str(k), value_text(v)) for k, v in tokens.items()] if isinstance(tokens, dict) else None)
        build = layout.builder()
        if self.kind == "row":
            maps["m_before"].add(None)
            maps["m_after"].add_image(build, record)
        else:
            maps["m_before"].add_image(build, record.get("before"))
            maps["m_after"].add_image(build, record.get("after"))


def _image(img: Any, layout: Layout) -> list[tuple[str, str | None]] | None:
    """An op-modeled image: present columns only (``COL_isMissing`` true leaves ``COL`` out)."""
    if not isinstance(img, dict):
        return None
    return [(c, conv(img.get(c))) for c, conv, flag in layout.columns if not (flag and img.get(flag))]


def _next_fit(data: bytes, pos: int, delim: bytes) -> int:
    found = data.find(delim, pos)
    return len(data) if found < 0 else found


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


_WRAPPER_PARSED: dict[int, Any] = {}


def _wrapper_parsed(dirs: SchemaDirectory) -> Any:
    """The generic wrapper schema (the directory's ``generic_wrapper.avsc``, else the seed's)."""
    from fastavro import parse_schema

    schema = dirs.wrapper.schema if dirs.wrapper else WRAPPER_SCHEMA
    key = dirs.wrapper.fingerprint if dirs.wrapper else 0
    if key not in _WRAPPER_PARSED:
        _WRAPPER_PARSED[key] = parse_schema(schema, _write_hint=False)
    return _WRAPPER_PARSED[key]


# -- the decoders --------------------------------------------------------------------------------


class OggAvroDecoder(Decoder):
    """GoldenGate Avro messages (row or op modeled) to canonical change events."""

    name: ClassVar[str] = "ogg-avro"
    PYTHON_ROWS: ClassVar[bool] = True  # (see Decoder.PYTHON_ROWS)
    kind: ClassVar[Kind] = "op"
    OPTIONS: ClassVar[dict[str, str]] = {
        "insertOpKey": "I",
        "updateOpKey": "U",
        "deleteOpKey": "D",
        "truncateOpKey": "T",
        "schemaDirectory": "./dirdef",
        "wrapMessageInGenericAvroMessage": "false",
        "lineDelimiter": "",
        "framing": "",
        "encoding": "UTF-8",
        "treatAllColumnsAsStrings": "false",
        "pkUpdateHandling": "abend",
        **LIMIT_OPTIONS,
    }
    IGNORED_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {"versionSchemas", "iso8601Format", "generateSchema", "schemaFilePath", "format"}
    )

    def __init__(self, options: dict[str, str] | None = None) -> None:
        super().__init__(options)
        o = self.options
        try:
            codecs.lookup(o["encoding"])
        except LookupError:
            raise ConfigError(f"{self.name}: encoding {o['encoding']!r} is not known") from None
        self.delimiter = unescape(o["lineDelimiter"]).encode("utf-8")
        framing = o["framing"].strip().lower() or ("delimited" if self.delimiter else "length-prefixed")
        if framing not in FRAMINGS:
            raise ConfigError(f"{self.name}: framing {o['framing']!r} is not one of {', '.join(FRAMINGS)}")
        if framing == "delimited" and not self.delimiter:
            raise ConfigError(f"{self.name}: framing 'delimited' needs lineDelimiter (the bytes after each message)")
        self.framing = framing
        self.wrapped = self.flag("wrapMessageInGenericAvroMessage")
        self.all_strings = self.flag("treatAllColumnsAsStrings")
        check_pk_update_handling(self.name, o["pkUpdateHandling"])
        # a row formatter splits a key change into a delete and an insert: join them again
        self.rejoin = self.kind == "row" and o["pkUpdateHandling"] == "delete-insert"
        self._schemas: SchemaDirectory | None = None
        self.limits = BlockLimits.of(self.name, self.options)

    # -- planning (driver)
    def schema_directory(self, *, required: bool) -> SchemaDirectory | None:
        """The ``schemaDirectory``'s schemas (read once); None when absent and not required."""
        if self._schemas is None:
            path = self.options["schemaDirectory"]
            if not os.path.isdir(path):
                if required:
                    raise ConfigError(
                        f"{self.name}: schemaDirectory {path!r} does not exist; files of single Avro "
                        "messages are decoded with their table's .avsc from it (set schemaDirectory)"
                    )
                return None
            try:
                self._schemas = load_schema_directory(path, encoding=self.options["encoding"])
            except ValueError as exc:
                raise ConfigError(f"{self.name}: {exc}") from None
        return self._schemas

    def plan(self, files: Sequence[str], parallelism: int = 1) -> list[Split]:
        """Splits of the inputs: OCF files by blocks, length-prefixed message files at messages,
        other message files whole; ``.avsc`` files skipped. Splits are about the inputs' size over
        ``parallelism`` (at least 4 MB, at most 128 MB), so the cores share the decoding."""
        paths = [p for p in files if not p.endswith(".avsc")]
        size_of = split_bytes(sum(os.path.getsize(p) for p in paths), parallelism, policy="share")
        out: list[Split] = []
        for path in paths:
            size = os.path.getsize(path)
            if size >= 4 and is_ocf(path):
                try:
                    _header, splits = plan_ocf_splits(path, size_of, self.limits)
                except (ValueError, OSError) as exc:
                    out.append(Split(path, "bad", 0, size, 0, note=f"OCF file header: {exc}"))
                    continue
                out += [Split(path, "ocf", s, s + n, r, limits=self.limits) for s, n, r in splits]
            elif self.framing == "length-prefixed":
                out += [Split(path, "messages", s, e, r) for s, e, r in length_prefixed_splits(path, size_of)]
            else:
                out.append(Split(path, "messages", 0, size, 0))
        return out

    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        splits = self.plan(files, default_parallelism(spark))
        needs_dir = any(s.kind == "messages" for s in splits)
        schemas = self.schema_directory(required=needs_dir)
        reader = AvroReader(self.kind, self.framing, self.delimiter, self.wrapped, schemas, self.limits)
        decoded = splits_frame(spark, splits, reader, DECODED_SCHEMA, max_tasks=_MAX_TASKS)
        events = self._canonical(decoded)
        return rejoin_split_key_changes(events) if self.rejoin else events

    def _canonical(self, p: DataFrame) -> DataFrame:
        o = self.options
        op, expected = op_column(op_keys(self.name, o), F.col("m_op_type"))
        op_ts = parse_op_ts(F.col("m_op_ts"), utc_session=session_is_utc(p.sparkSession))
        checks = [
            (F.col("m_error").isNotNull(), F.col("m_error")),
            (F.coalesce(F.trim("m_table"), F.lit("")) == "", "'table' missing or empty"),
            (F.col("m_op_type").isNull(), "'op_type' missing"),
            (op.isNull(), F.format_string(f"unknown op_type '%s' (expected one of {expected})", "m_op_type")),
            (op_ts.isNull(), F.format_string("'op_ts' missing or not a timestamp: '%s'", F.coalesce("m_op_ts", F.lit("")))),
        ]
        if self.kind == "op":
            checks += [
                ((op == "I") & F.col("m_after").isNull(), f"'after' is null for op_type '{o['insertOpKey']}' (expected a record)"),
                ((op == "U") & F.col("m_after").isNull(), f"'after' is null for op_type '{o['updateOpKey']}' (expected a record)"),
                ((op == "D") & F.col("m_before").isNull(), f"'before' is null for op_type '{o['deleteOpKey']}' (expected a record)"),
            ]
            before, after, before_ops = F.col("m_before"), F.col("m_after"), ("U", "D")
        else:
            # the row image is the after image of an insert or update, the before image of a delete
            before, after, before_ops = F.col("m_after"), F.col("m_after"), ("D",)
        error = first_error(*checks)
        return canonical_events(
            p, op=op, op_ts=op_ts, before=F.when(op.isin(*before_ops), before), after=F.when(op.isin("I", "U"), after),
            source=source_map(F.col("m_current_ts"), F.col("m_tokens"), F.lit("avro_schema"), F.col("m_schema")),
            error=error, extra=("_offset", F.when(error.isNotNull(), F.col("m_raw")).alias("_raw")),
        )

    # -- types
    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Column types from the schema directory (newest version wins), then OCF headers."""
        out: dict[str, dict[str, T.DataType]] = {}
        dirs = self.schema_directory(required=False)
        if dirs is not None:
            for table, versions in dirs.by_table.items():
                for sf in reversed(versions):
                    out.setdefault(table, {}).update(Layout.of(sf.schema, self.kind, sf.file).types)
        for path in files:
            if path.endswith(".avsc") or os.path.getsize(path) < 4 or not is_ocf(path):
                continue
            with open(path, "rb") as fh:
                try:
                    schema = read_ocf_header(fh).schema
                except ValueError:
                    continue  # the file's records are quarantined by read()
            table = full_name(schema)
            if table and table != WRAPPER_NAME:
                out.setdefault(table, {}).update(Layout.of(schema, self.kind, path).types)
        return out


class OggAvroRowDecoder(OggAvroDecoder):
    """GoldenGate ``avro_row``: one nullable field per column; missing reads as NULL."""

    name: ClassVar[str] = "ogg-avro-row"
    kind: ClassVar[Kind] = "row"


class OggAvroOpDecoder(OggAvroDecoder):
    """GoldenGate ``avro_op``: ``before``/``after`` records with ``COL_isMissing`` flags."""

    name: ClassVar[str] = "ogg-avro-op"
    kind: ClassVar[Kind] = "op"


__all__ = ["OggAvroOpDecoder", "OggAvroRowDecoder", "parsing_fingerprint"]
