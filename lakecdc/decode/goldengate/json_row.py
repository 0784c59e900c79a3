"""Oracle GoldenGate for Big Data JSON, row-modeled (``gg.handler.<name>.format=json_row``).

One JSON object per operation (seed 000, 13.3.3 and 13.3.4.3): the metadata members ``table``,
``op_type``, ``op_ts``, ``current_ts``, ``pos``, optional ``primary_keys`` (array of column names,
``includePrimaryKeys=true``) and ``tokens`` (object, ``includeTokens=true``), then **the columns
themselves at the top level**, not inside ``before``/``after``::

    {"table":"QASOURCE.TCUSTORD","op_type":"U","op_ts":"2015-11-05 18:45:39.000000",
     "current_ts":"2016-10-05T11:10:42.350005","pos":"00000000000000004300",
     "CUST_CODE":"BILL","ORDER_DATE":"1995-12-31:15:00:00","PRODUCT_CODE":"CAR",
     "ORDER_ID":765,"PRODUCT_PRICE":14000.00}

A row formatter writes a single image: insert and update carry the row after the operation
(canonical ``after``), delete the row before it (canonical ``before``), truncate only the table.
A column absent from the object is *missing* (not logged), a JSON ``null`` is NULL. Every member
that is not one of the seven metadata names is a column, so a source column cannot be called
``table``, ``op_type``, ``op_ts``, ``current_ts``, ``pos``, ``primary_keys`` or ``tokens`` here (the
formatter would have written two members of the same name; such a record is quarantined).

Primary-key updates (``pkUpdateHandling``, the formatter's setting) are decided by the
*formatter*: with ``abend`` it stopped, with ``update`` it wrote one update carrying the new key
only (a row-modeled update has no before image, so nothing in the message reveals the old key:
the old row stays in the target), with ``delete-insert`` it wrote a delete of the before image
and an insert of the after image at the update's own ``op_ts`` and ``pos``. Told
``pkUpdateHandling=delete-insert``, lakecdc joins each such pair into the key change it was
(:func:`~lakecdc.decode.goldengate.common.rejoin_split_key_changes`), which ``pk_update`` then
applies as for op-modeled JSON (``abend`` fails the batch; ``delete-insert``/``update`` complete
the new row from the before image and the old row). With the other values the records are read
as they are.

Reading. Messages may be one per line or pretty-printed and concatenated (``prettyPrint``,
``jsonDelimiter``; the manual's trailing commas are tolerated). Because column names are not
known in advance, each message is staged as ``{"m":<message>}`` (on the line it had, in Spark's
executors) and read by Spark's JSON file source as one ``map<string, string>``: every value is
the exact text written (a string's content, a number's digits with its trailing zeros,
``17520.00``; an object or array as its JSON text), JSON ``null`` is NULL, an absent member is
missing.

Types. With ``schemaDirectory`` (or ``schemaFile``) naming the formatter's JSON schemas
(``<FULLY_QUALIFIED_TABLE>.schema.json``, seed 13.3.5), :meth:`OggJsonRowDecoder.column_types`
types the columns as the schemas declare them (see :func:`json_schema_type`): ``integer`` ->
``bigint``, ``number`` -> ``decimal(38, 10)`` (GoldenGate writes ``number`` for any Oracle
``NUMBER`` with a scale or without a declared precision; 28 integer and 10 fraction digits hold
every such value exactly that a ``bigint`` or a double would not, and a value with more digits
is quarantined, never rounded), ``boolean`` -> ``boolean``, ``string`` and anything else ->
``string``. GoldenGate writes dates as strings (``1994-09-30:15:33:00``): they stay strings.
Without schemas the types are inferred from the JSON values (:meth:`variant_images`). Schema
files found among the inputs (``*.schema.json``) are used as schemas, never read as data.
With several schema versions of one table (``versionSchemas=true``), the newest file (by
modification time, then name) decides a column's type.

Options are the formatter's property names (without ``gg.handler.<name>.format.``):
``insertOpKey``/``updateOpKey``/``deleteOpKey``/``truncateOpKey`` (I/U/D/T),
``treatAllColumnsAsStrings`` (false), ``encoding`` (UTF-8 only), ``pkUpdateHandling`` (abend;
see above), ``schemaDirectory`` (the formatter's default is ``./dirdef``; lakecdc reads
schemas only when it is given), and lakecdc's ``schemaFile`` (one or more schema files,
comma-separated). Accepted without effect: ``prettyPrint``, ``jsonDelimiter``,
``includePrimaryKeys``, ``includeTokens``, ``generateSchema``, ``versionSchemas``,
``iso8601Format``, ``omitNullValues``, and the op-modeled-only ``flatten``, ``flattenDelimiter``,
``beforeObjectName``, ``afterObjectName``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import EVENT_SCHEMA
from lakecdc.decode.base import Decoder
from lakecdc.decode.checks import first_error
from lakecdc.decode.files.lines import CORRUPT, JSON_LIMITS, read_json, read_text
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

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Members of a row-modeled message that are not columns.
META_MEMBERS = ("table", "op_type", "op_ts", "current_ts", "pos", "primary_keys", "tokens")
SCHEMA_SUFFIX = ".schema.json"
#: ``number`` columns: 28 integer digits and 10 fraction digits, exact.
NUMBER_TYPE = T.DecimalType(38, 10)
_VARIANT_MAP = T.MapType(T.StringType(), T.VariantType())
_TEXT_MAP = T.MapType(T.StringType(), T.StringType())
#: A message read wrapped: the whole object as one map of exact texts.
_WRAPPED = T.StructType([T.StructField("m", _TEXT_MAP)])


# -- GoldenGate JSON schemas (seed 13.3.5), shared with the delimited text decoder ------------------


@dataclass(frozen=True)
class TableSchema:
    """One ``<table>.schema.json``: the table's columns in order and their declared types."""

    table: str
    columns: tuple[str, ...]
    types: Mapping[str, T.DataType] = field(default_factory=dict)
    path: str = ""


def json_schema_type(spec: Mapping[str, Any]) -> T.DataType | None:
    """The Spark type for one column's JSON schema, None when it allows only ``null``.

    Understands ``"type": "string"``, ``"type": ["number", "null"]`` (the seed's form) and
    ``"oneOf"``/``"anyOf"`` lists of such alternatives.
    """
    kinds = _schema_kinds(spec) - {"null"}
    if not kinds:
        return None
    if kinds == {"integer"}:
        return T.LongType()
    if kinds <= {"integer", "number"}:
        return NUMBER_TYPE
    if kinds == {"boolean"}:
        return T.BooleanType()
    return T.StringType()


def _schema_kinds(spec: Mapping[str, Any]) -> set[str]:
    declared = spec.get("type")
    kinds = {declared} if isinstance(declared, str) else {str(k) for k in declared or ()}
    for alt in (*spec.get("oneOf", ()), *spec.get("anyOf", ())):
        if isinstance(alt, Mapping):
            kinds |= _schema_kinds(alt)
    return kinds


def read_table_schema(path: str) -> TableSchema:
    """Parse one GoldenGate JSON schema file (row-modeled or op-modeled form).

    The table is the schema's ``title`` (else the file name without ``.schema.json``); the
    columns are ``definitions.row.properties`` (op-modeled) or the top-level ``properties``
    other than the metadata members (row-modeled), in file order.
    """
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"JSON schema {path}: cannot be read: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"JSON schema {path}: expected an object at the top level")
    name = Path(path).name
    stem = name[: -len(SCHEMA_SUFFIX)] if name.endswith(SCHEMA_SUFFIX) else name
    table = str(doc.get("title") or stem)
    definitions = doc.get("definitions")
    row_def = definitions.get("row") if isinstance(definitions, dict) else None
    row = row_def.get("properties") if isinstance(row_def, dict) else None
    if isinstance(row, dict):
        props = row
    else:
        top = doc.get("properties", {})
        props = {k: v for k, v in top.items() if k not in META_MEMBERS} if isinstance(top, dict) else {}
    types = {}
    for col, spec in props.items():
        dtype = json_schema_type(spec) if isinstance(spec, Mapping) else None
        if dtype is not None:
            types[col] = dtype
    return TableSchema(table=table, columns=tuple(props), types=types, path=str(path))


def schema_files(directory: str, files: str, inputs: Iterable[str]) -> list[str]:
    """Schema files named by the options (a directory, a comma-separated list), found among the
    inputs, or lying beside them (GoldenGate writes ``<table>.schema.json`` next to its data files;
    a later run, whose inputs no longer include the schema files, still finds them there)."""
    out: list[str] = []
    if directory:
        d = Path(directory)
        if not d.is_dir():
            raise ConfigError(f"schemaDirectory {directory!r} is not a directory")
        out += sorted(str(p) for p in d.rglob(f"*{SCHEMA_SUFFIX}"))
    for f in (x.strip() for x in files.split(",")):
        if f:
            if not Path(f).is_file():
                raise ConfigError(f"schemaFile {f!r} does not exist")
            out.append(f)
    inputs = list(inputs)
    out += [f for f in inputs if f.endswith(SCHEMA_SUFFIX)]
    for folder in dict.fromkeys(os.path.dirname(os.path.abspath(f)) for f in inputs if "://" not in f):
        if os.path.isdir(folder):
            out += sorted(str(p) for p in Path(folder).glob(f"*{SCHEMA_SUFFIX}"))
    return list(dict.fromkeys(os.path.abspath(p) for p in out))


def load_table_schemas(paths: Iterable[str]) -> dict[str, list[TableSchema]]:
    """Schemas per table, oldest first (by modification time, then file name)."""
    found: dict[str, list[tuple[float, str, TableSchema]]] = {}
    for p in paths:
        schema = read_table_schema(p)
        found.setdefault(schema.table, []).append((os.path.getmtime(p), os.path.basename(p), schema))
    return {t: [s for *_, s in sorted(v, key=lambda x: (x[0], x[1]))] for t, v in found.items()}


def declared_types(schemas: Mapping[str, list[TableSchema]]) -> dict[str, dict[str, T.DataType]]:
    """Column types per table; a newer schema's type wins over an older one's."""
    out: dict[str, dict[str, T.DataType]] = {}
    for table, versions in schemas.items():
        types: dict[str, T.DataType] = {}
        for s in versions:
            types.update(s.types)
        out[table] = types
    return out


def data_files(files: Sequence[str]) -> list[str]:
    """The inputs that are messages, not ``*.schema.json`` files."""
    return [f for f in files if not f.endswith(SCHEMA_SUFFIX)]


def empty_events(spark: SparkSession) -> DataFrame:
    """No events, with the decoders' output columns (for an input of schema files only)."""
    schema = T.StructType(
        list(EVENT_SCHEMA.fields)
        + [
            T.StructField("_file", T.StringType()),
            T.StructField("_block", T.LongType()),
            T.StructField("_row", T.LongType()),
            T.StructField("_error", T.StringType()),
        ]
    )
    return spark.createDataFrame([], schema)


def first_duplicate(names: Column) -> Column:
    """The first name of an array that appears again later (NULL when all differ)."""
    return F.try_element_at(F.filter(names, lambda k, i: F.array_position(names, k) != i + 1), F.lit(1))


def _first_duplicate_key(m: Column) -> Column:
    """:func:`first_duplicate` of a map's keys, searched only when some key repeats."""
    keys = F.map_keys(m)
    return F.when(F.size(F.array_distinct(keys)) < F.size(keys), first_duplicate(keys))


def _names(text: Column) -> Column:
    """A JSON array of strings (``primary_keys``) as ``array<string>``; NULL when it is not one.

    Written plainly (``["ID","CODE"]``: no escape, no comma or space in a name) its quotes are
    dropped and the rest split at the commas (a one-character split compiles no pattern;
    ``from_json`` alone cost more than the message's other metadata); any other spelling goes
    through ``from_json``."""
    inner = F.substr(text, F.lit(3), F.length(text) - 4)
    bare = F.translate(inner, '"', "")
    quotes = F.length(text) - F.length(F.translate(text, '"', ""))
    parts = F.split(bare, ",")
    plain = (text.startswith('["') & text.endswith('"]') & ~text.contains("\\") & ~text.contains(" ")
             & (F.size(parts) * 2 == quotes))
    return (F.when(text == "[]", F.array().cast("array<string>"))
            .when(plain, parts)
            .otherwise(F.from_json(text, T.ArrayType(T.StringType()), JSON_LIMITS)))


def _op_modeled(m: Column) -> Column:
    """``after`` or ``before`` when that member of a message's map of exact texts is an object
    (else NULL). (A string member whose text starts with ``{`` and ends with ``}`` looks the same:
    a column of that name and content would be taken for op-modeled JSON and quarantined.)"""
    def is_object(text: Column) -> Column:
        return text.startswith("{") & text.endswith("}")

    return F.coalesce(*[F.when(is_object(m[n]), F.lit(n)) for n in ("after", "before")])


# -- the decoder --------------------------------------------------------------------------------------


class OggJsonRowDecoder(Decoder):
    """GoldenGate JSON row-modeled messages to canonical change events."""

    name: ClassVar[str] = "ogg-json-row"
    LINES: ClassVar[bool] = True
    OPTIONS: ClassVar[dict[str, str]] = {
        "insertOpKey": "I",
        "updateOpKey": "U",
        "deleteOpKey": "D",
        "truncateOpKey": "T",
        "treatAllColumnsAsStrings": "false",
        "encoding": "UTF-8",
        "pkUpdateHandling": "abend",
        "schemaDirectory": "",
        "schemaFile": "",
    }
    IGNORED_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {
            "prettyPrint", "jsonDelimiter", "includePrimaryKeys", "includeTokens", "generateSchema",
            "versionSchemas", "iso8601Format", "omitNullValues", "format",
            # op-modeled JSON only (seed 13.3.6): a json_row formatter ignores them
            "flatten", "flattenDelimiter", "beforeObjectName", "afterObjectName",
        }
    )

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        if self.options["encoding"].replace("-", "").upper() != "UTF8":
            raise ConfigError(f"{self.name}: encoding {self.options['encoding']!r} is not supported; use UTF-8")
        check_pk_update_handling(self.name, self.options["pkUpdateHandling"])
        self.op_map = op_keys(self.name, self.options)
        self.all_strings = self.flag("treatAllColumnsAsStrings")

    # -- schemas and types ---------------------------------------------------------------------
    def schemas(self, files: Sequence[str]) -> dict[str, list[TableSchema]]:
        """The JSON schemas per table named by the options or found among ``files``."""
        paths = schema_files(self.options["schemaDirectory"], self.options["schemaFile"], files)
        return load_table_schemas(paths)

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Column types declared by the tables' ``.schema.json`` files (none without schemas)."""
        return declared_types(self.schemas(files))

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before``, ``after`` as ``map<string, variant>``: the JSON types, for inference."""
        data = data_files(files)
        if not data:
            return empty_events(spark).select("table", *[F.lit(None).cast(_VARIANT_MAP).alias(n) for n in ("before", "after")])
        p = self._parse_variants(spark, data, staging=staging)
        op, _ = op_column(self.op_map, F.col("m_op_type"))
        return p.select(
            F.col("m_table").alias("table"),
            F.when(op == "D", F.col("m_columns")).alias("before"),
            F.when(op.isin("I", "U"), F.col("m_columns")).alias("after"),
        )

    # -- parsing -------------------------------------------------------------------------------
    def _parse_variants(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """Each message as ``m_table``, ``m_op_type`` and ``m_columns`` (map of variants: the JSON
        types, for inference)."""
        text = read_text(spark, files, staging=staging)
        mm = F.from_json("value", _VARIANT_MAP, JSON_LIMITS)
        return text.select(
            F.try_variant_get(mm["table"], "$", "string").alias("m_table"),
            F.try_variant_get(mm["op_type"], "$", "string").alias("m_op_type"),
            F.map_filter(mm, lambda k, _v: ~k.isin(*META_MEMBERS)).alias("m_columns"),
        )

    def _parse(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """Each message as ``m_<metadata>`` columns and ``m_columns`` (map of exact texts).

        The message is read wrapped (:func:`~lakecdc.decode.files.lines.read_json`): Spark's file
        source parses it as one ``map<string, string>``, every value the exact text written (a
        string's content, a number's digits as written, an object or array as its JSON text).
        """
        mm = F.col("m")
        columns = F.map_filter(mm, lambda k, _v: ~k.isin(*META_MEMBERS))
        parsed = read_json(spark, files, _WRAPPED, staging=staging, wrap="m", derived={"m_columns": columns})
        cols: dict[str, Column] = {f"m_{n}": mm[n] for n in META_MEMBERS[:5]}
        cols["m_primary_keys"] = _names(mm["primary_keys"])
        cols["m_tokens"] = F.from_json(mm["tokens"], _TEXT_MAP, JSON_LIMITS)
        cols["m_columns"] = F.col("m_columns")
        cols["m_bad_json"] = F.col(CORRUPT).isNotNull() | mm.isNull()
        cols["m_duplicate"] = _first_duplicate_key(mm)
        cols["m_op_modeled"] = _op_modeled(mm)
        return parsed.select("_file", "_block", "_row", *[c.alias(n) for n, c in cols.items()])

    def read(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        data = data_files(files)
        if not data:
            return empty_events(spark)
        p = self._parse(spark, data, staging=staging)
        image = F.col("m_columns")
        op, expected = op_column(self.op_map, F.col("m_op_type"))
        op_ts = parse_op_ts(F.col("m_op_ts"), utc_session=session_is_utc(spark))
        no_columns = op.isin("I", "U", "D") & (F.size("m_columns") == 0)
        error = first_error(
            (F.col("m_bad_json"), "not valid JSON (expected one object per message)"),
            (F.col("m_duplicate").isNotNull(), F.format_string("member '%s' appears more than once", "m_duplicate")),
            (F.coalesce(F.trim("m_table"), F.lit("")) == "", "'table' missing or empty"),
            (F.col("m_op_type").isNull(), "'op_type' missing"),
            (op.isNull(), F.format_string(f"unknown op_type '%s' (expected one of {expected})", "m_op_type")),
            (op_ts.isNull(), F.format_string("'op_ts' missing or not a timestamp: '%s'", F.coalesce("m_op_ts", F.lit("")))),
            (op.isin("I", "U", "D") & F.col("m_op_modeled").isNotNull(), F.format_string(
                "member '%s' is an object: this is op-modeled JSON (format=json); read it with format ogg-json",
                "m_op_modeled")),
            (no_columns, F.format_string(
                "no column members for op_type '%s' (a row-modeled message carries the columns at the top level)",
                "m_op_type")),
        )
        events = canonical_events(
            p, op=op, op_ts=op_ts, before=F.when(op == "D", image), after=F.when(op.isin("I", "U"), image),
            source=source_map(F.col("m_current_ts"), F.col("m_tokens")), error=error,
        )
        if self.options["pkUpdateHandling"] == "delete-insert":
            return rejoin_split_key_changes(events)
        return events
