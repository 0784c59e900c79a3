"""GoldenGate Avro records as rows: how a message schema's records become images (:class:`Layout`,
with an image builder compiled per schema) and the reader that decodes the splits of the input
files in Spark's executors (:class:`AvroReader`).

The rows are :data:`lakecdc.decode.rows.ROW_SCHEMA`'s, with ``x_op`` the canonical op of the
message's ``op_type`` (NULL when the op table has no such text), plus the texts the decoder checks
and parses in SQL (``x_op_text``, ``x_op_ts_text``) and the binary formats' ``_offset`` and ``_raw``.
``x_source`` holds ``current_ts``, ``avro_schema`` (the schema file or OCF header that decoded
the message) and every token as ``token.<name>``.
"""

from __future__ import annotations

import base64
import functools
import math
import operator
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pyarrow as pa
from fastavro import parse_schema
from pyspark.sql import types as T

from lakecdc.decode.avro.containers import DEFAULT_LIMITS, BlockLimits, ocf_records, read_ocf_header
from lakecdc.decode.avro.schemas import Mismatch, SchemaDirectory, full_name, peek_string, read_at, read_exact
from lakecdc.decode.avro.text import double_text, spark_type, text_converter, text_kind, value_text
from lakecdc.decode.files.splits import Split, split_numbers
from lakecdc.decode.kafka.dumps import iter_length_prefixed
from lakecdc.decode.kafka.records import kcat_messages
from lakecdc.decode.rows import ROW_SCHEMA, RecordError

Kind = Literal["row", "op"]
#: The metadata fields every GoldenGate Avro message starts with.
META = ("table", "op_type", "op_ts", "current_ts", "pos", "primary_keys", "tokens")
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
_BATCH_ROWS = 4096
_EXTRA = (("x_op_text", T.StringType()), ("x_op_ts_text", T.StringType()), ("_offset", T.LongType()),
          ("_raw", T.StringType()))
#: The reader's rows (see the module docstring).
DECODED_SCHEMA = T.StructType([*ROW_SCHEMA.fields, *[T.StructField(n, t) for n, t in _EXTRA]])
_ARROW_MAP = pa.map_(pa.string(), pa.string())
_ARROW_TYPES = {T.StringType(): pa.string(), T.LongType(): pa.int64(), T.ArrayType(T.StringType()): pa.list_(pa.string())}
_ARROW_SCHEMA = pa.schema([
    (f.name, _ARROW_MAP if isinstance(f.dataType, T.MapType) else _ARROW_TYPES[f.dataType]) for f in DECODED_SCHEMA.fields
])
_MAP_NAMES = ("x_before", "x_after", "x_source")
#: Columns the reader leaves NULL (GoldenGate has no transaction id; op_ts is parsed in SQL).
_NULL_NAMES = ("x_op_ts", "x_seq", "x_txid")


#: ``build(record_or_image, keys.append, values.append) -> entries`` (see :meth:`Layout.builder`).
ImageBuilder = Callable[[dict[str, Any], Callable[[Any], None], Callable[[Any], None]], int]


# -- how one schema's records become images ------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """The columns of one message schema, with their text converters (and missing flags)."""

    name: str
    columns: tuple[tuple[str, Any, str | None], ...]  # (column, converter, isMissing field)
    types: dict[str, T.DataType]
    error: str | None = None
    kinds: tuple[str | None, ...] = ()  # text_kind of each column (None: use its converter)

    def builder(self) -> ImageBuilder:
        """``build(record_or_image, keys.append, values.append) -> entries``: the image's present
        columns (all of them for row records; an op image leaves out a column whose
        ``COL_isMissing`` is true) as text, compiled once
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
            cols = [f for f in fields if f["name"] not in META]
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


class BadMessage(RecordError):
    """A message that cannot be decoded: its table (when known) and why."""

    def __init__(self, table: str | None, reason: str) -> None:
        super().__init__(reason)
        self.table = table
        self.reason = reason


class _MapColumn:
    """A ``map<string,string>`` column collected flat (offsets, keys, values, nulls)."""

    __slots__ = ("offsets", "keys", "values", "nulls")

    def __init__(self) -> None:
        self.offsets: list[int] = [0]
        self.keys: list[str] = []
        self.values: list[str | None] = []
        self.nulls: list[bool] = []

    def add(self, pairs: Sequence[tuple[str, str | None]] | None) -> None:
        if pairs is None:
            self.nulls.append(True)
        else:
            self.nulls.append(False)
            for k, v in pairs:
                self.keys.append(k)
                self.values.append(v)
        self.offsets.append(len(self.keys))

    def add_image(self, build: ImageBuilder, img: Any) -> None:
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
        skip = {*_MAP_NAMES, *_NULL_NAMES}
        self.cols: dict[str, list[Any]] = {n: [] for n in _ARROW_SCHEMA.names if n not in skip}
        self.maps: dict[str, _MapColumn] = {n: _MapColumn() for n in _MAP_NAMES}

    def __len__(self) -> int:
        return len(self.cols["_row"])

    def add(self, **values: Any) -> None:
        for name, column in self.cols.items():
            column.append(values.get(name))
        for name, m in self.maps.items():
            m.add(values.get(name))

    def flush(self) -> pa.RecordBatch:
        n = len(self)
        arrays = [
            self.maps[f.name].array() if f.name in _MAP_NAMES
            else pa.nulls(n, f.type) if f.name in _NULL_NAMES
            else pa.array(self.cols[f.name], f.type)
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
    #: The op table (``op_type`` text -> canonical op).
    ops: Mapping[str, str] = field(default_factory=dict)
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
            rows.add(_file=s.path, _block=0, _row=0, _offset=0, _raw=_b64(head), x_error=s.note)
            yield None
        elif s.kind == "ocf":
            yield from self._ocf(s, rows)
        elif s.kind == "kcat":
            yield from self._kcat(s, rows)
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
                        rows.add(**where, _raw=_b64(frame.payload), x_error=frame.error)
                    else:
                        self._one(frame.payload, 0, functools.partial(operator.eq, len(frame.payload)), where, rows)
                    yield None
                return
            data = fh.read()
        if self.framing == "single":
            if data:
                self._one(data, 0, lambda end: end == len(data), dict(_file=path, _block=0, _row=0, _offset=0), rows)
                yield None
            return
        yield from self._delimited(path, data, rows)

    def _kcat(self, split: Split, rows: _Rows) -> Iterator[None]:
        """A kcat ``-J`` dump: each line's base64 payload is one message (``_offset``: the line's)."""
        for m in kcat_messages(split):
            where = dict(_file=split.path, _block=0, _row=m.row, _offset=m.offset)
            if m.error is not None or not m.data:
                raw = m.raw.encode("utf-8") if isinstance(m.raw, str) else m.raw
                reason = m.error or f"line {m.row + 1}: a record without a value (a tombstone) carries no operation"
                rows.add(**where, _raw=_b64(raw), x_error=reason)
            else:
                self._one(m.data, 0, functools.partial(operator.eq, len(m.data)), where, rows)
            yield None

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
        except BadMessage as bad:
            stop = len(data) if self.framing != "delimited" else _next_fit(data, pos, self.delimiter)
            rows.add(**where, x_table=bad.table, _raw=_b64(data[pos:stop]), x_error=bad.reason)
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
                raise BadMessage(None, f"not a generic_wrapper message: {exc}") from None
            if not fits(end):
                raise BadMessage(None, f"not a generic_wrapper message: the wrapper schema reads {end - pos} bytes, "
                                 "which is not the whole message")
            record, name, layout = self._unwrap(wrapper)
            return record, name, layout, end
        table = peek_string(data, pos)
        if table is None:
            raise BadMessage(None, "does not start with a table name (an Avro string): not a GoldenGate Avro message")
        versions = dirs.versions(table)
        if not versions:
            raise BadMessage(table, f"no schema for table '{table}' in schemaDirectory '{dirs.path}' "
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
        raise BadMessage(table, f"does not decode with any schema version of table '{table}' "
                          f"(tried newest first) — {'; '.join(errors)}")

    def _unwrap(self, wrapper: dict[str, Any]) -> tuple[Any, str, Layout]:
        dirs = self.schemas
        table, fp = wrapper.get("table_name"), wrapper.get("schema_fingerprint")
        sf = dirs.by_fingerprint.get(fp) if dirs is not None and isinstance(fp, int) else None
        if sf is None:
            known = ", ".join(f"{v.file}={v.fingerprint}" for v in (dirs.versions(table) if dirs and table else ()))
            where = f"schemaDirectory '{dirs.path}'" if dirs is not None else "the schema directory"
            raise BadMessage(table, f"unknown schema_fingerprint {fp} for table '{table}': no .avsc in {where} "
                              f"has it ({'fingerprints of the table: ' + known if known else 'the table has no schema there'})")
        try:
            record = read_exact(wrapper["payload"], sf.parsed)
        except Mismatch as exc:
            raise BadMessage(table, f"payload does not decode with {sf.file} (schema_fingerprint {fp}): {exc}") from None
        return record, sf.file, self._layout(sf.fingerprint, sf.schema, sf.file)

    def _ocf(self, split: Split, rows: _Rows) -> Iterator[None]:
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
                    rows.add(**where, _raw=_b64(data), x_error=error)
                    yield None
                    continue
                raw = _b64(data)
                if wrapped:
                    try:
                        record, sname, rlayout = self._unwrap(record)
                    except BadMessage as bad:
                        rows.add(**where, x_table=bad.table, _raw=raw, x_error=bad.reason)
                        yield None
                        continue
                else:
                    assert layout is not None
                    sname, rlayout = name, layout
                self._emit(record, rlayout, sname, where, raw, rows)
                yield None

    # -- records to rows
    def _layout(self, key: Any, schema: Any, name: str) -> Layout:
        if key not in self._layouts:
            self._layouts[key] = Layout.of(schema, self.kind, name)
        return self._layouts[key]

    def _emit(self, record: Any, layout: Layout, schema_name: str, where: dict[str, Any], raw: str, rows: _Rows) -> None:
        if not isinstance(record, dict):
            rows.add(**where, _raw=raw, x_error=f"{schema_name}: the message is not a record")
            return
        table = value_text(record.get("table"))
        if layout.error is not None:
            rows.add(**where, x_table=table, _raw=raw, x_error=layout.error)
            return
        op_text = value_text(record.get("op_type"))
        keys = record.get("primary_keys")
        tokens = record.get("tokens") or {}
        source = [("current_ts", value_text(record.get("current_ts"))), ("avro_schema", schema_name)]
        if isinstance(tokens, dict):
            source += [(f"token.{k}", value_text(v)) for k, v in tokens.items()]
        # the row, appended column by column (what rows.add(**where, ...) would do)
        cols, maps = rows.cols, rows.maps
        for name, value in where.items():
            cols[name].append(value)
        cols["x_table"].append(table)
        cols["x_op"].append(None if op_text is None else self.ops.get(op_text))
        cols["x_op_text"].append(op_text)
        cols["x_op_ts_text"].append(value_text(record.get("op_ts")))
        cols["x_pos"].append(value_text(record.get("pos")))
        cols["x_keys"].append([str(k) for k in keys] if keys else None)
        cols["_raw"].append(raw)
        cols["x_error"].append(None)
        maps["x_source"].add(source)
        build = layout.builder()
        if self.kind == "row":
            maps["x_before"].add(None)
            maps["x_after"].add_image(build, record)
        else:
            maps["x_before"].add_image(build, record.get("before"))
            maps["x_after"].add_image(build, record.get("after"))


def _next_fit(data: bytes, pos: int, delim: bytes) -> int:
    found = data.find(delim, pos)
    return len(data) if found < 0 else found


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


_WRAPPER_PARSED: dict[int, Any] = {}


def _wrapper_parsed(dirs: SchemaDirectory) -> Any:
    """The generic wrapper schema (the directory's ``generic_wrapper.avsc``, else the seed's)."""
    schema = dirs.wrapper.schema if dirs.wrapper else WRAPPER_SCHEMA
    key = dirs.wrapper.fingerprint if dirs.wrapper else 0
    if key not in _WRAPPER_PARSED:
        _WRAPPER_PARSED[key] = parse_schema(schema, _write_hint=False)
    return _WRAPPER_PARSED[key]


__all__ = ["DECODED_SCHEMA", "META", "WRAPPER_NAME", "WRAPPER_SCHEMA", "AvroReader", "BadMessage", "Kind", "Layout"]
