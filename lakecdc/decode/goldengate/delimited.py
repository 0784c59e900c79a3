"""Oracle GoldenGate for Big Data delimited text (``gg.handler.<name>.format=delimitedtext``).

A row formatter (seed 000, 13.2): one record per operation, fields separated by
``fieldDelimiter`` (default ASCII 001, Hive's), records ended by ``lineDelimiter`` (newline).
First the metadata fields, always in this order, each one only when its option includes it::

    op_type | table | op_ts | current_ts | pos | tokens | values...
    (includeOpType, includeTableName, includeOpTimestamp, includeCurrentTimestamp,
     includePosition: default true; includeTokens: default false)

then the column values in table order, or ``name|value`` pairs with ``includeColumnNames=true``.
The seed's insert (13.2.2.1, ``|`` as the field delimiter, ``includeTokens=true``)::

    I|GG.TCUSTORD|2013-06-02 22:14:36.000000|2015-09-18T13:23:01.612001|00000000000000001444|R=AADPkvAAEAAEqL2AAA|WILL|1994-09-30:15:33:00|CAR|144|17520.00|3|100

A value is one of three states: a value (its text, kept exactly), NULL (written as
``nullValueRepresentation``, default ``NULL``) or missing, i.e. not logged (written as
``missingValueRepresentation``, default the empty string). A missing column is not a key of the
image at all, so it never overwrites the target. (Hence, with the defaults, an empty string value
and the text ``NULL`` cannot be told from missing and NULL: that is the format's own limit.)
Tokens are ``key=value`` pairs joined by ``,`` (``keyValueDelimiter``, ``keyValuePairDelimiter``)
and become ``source['token.<key>']``; ``current_ts`` becomes ``source['current_ts']``.

Row-modeled: insert and update carry the row after the operation (canonical ``after``), delete
the row before it (``before``), truncate the table name only (its values, all missing, are
ignored). Primary-key updates were decided by the *formatter* (``pkUpdateHandling``): ``abend``
stopped it; ``update`` wrote one update holding the new key only, and since a row-modeled record
has no before image nothing in it can reveal that the key changed (the old row stays in the
target); ``delete-insert`` wrote a delete of the before image then an insert of the after image,
both at the update's ``op_ts`` and ``pos``. Told ``pkUpdateHandling=delete-insert``, lakecdc
joins each such pair into the key change it was
(:func:`~lakecdc.decode.goldengate.common.rejoin_split_key_changes`; needs ``includePosition``),
applied by ``pk_update`` as for op-modeled formats; with the other values records are read as
they are.

Column names. With ``includeColumnNames=true`` they come from each record. Otherwise values are
positional and the names come from table metadata, given by either

* ``schemaDirectory`` / ``schemaFile``: GoldenGate JSON schemas ``<table>.schema.json`` (seed
  13.3.5; the JSON formatter writes them, op- or row-modeled form), matched by their ``title``;
  ``*.schema.json`` files among the inputs or beside them are used the same way (and not read as
  data); or
* ``columns``: ``TABLE=COL1,COL2,...`` entries separated by ``;``, e.g.
  ``columns=GG.TCUSTORD=CUST_CODE,ORDER_DATE,PRODUCT_CODE,ORDER_ID,PRODUCT_PRICE,PRODUCT_AMOUNT,TRANSACTION_ID``.
  This option overrides schema files for the tables it names.

Metadata changes (13.2.7): new columns are appended at the end, so records written after the
change have more values. With names in the records that just works. Positionally, every known
layout of a table is a candidate: each schema file of the table (``versionSchemas=true`` keeps
one per version) and each ``columns`` entry for it (repeat the table to give older layouts). A
record takes the layout with exactly as many columns as it has values (the newest such layout
when several have that count; newest = latest modification time, then name, and for ``columns``
the later entry). A record whose value count matches no layout is a bad record: its reason names
the table, both counts and where the names came from, and it goes to the quarantine.

Options are the formatter's property names (without ``gg.handler.<name>.format.``) with the
seed's defaults (13.2.5): ``includeColumnNames`` (false), ``includeOpTimestamp``,
``includeCurrentTimestamp``, ``includeOpType``, ``includeTableName``, ``includePosition`` (true),
``includeTokens`` (false; the handler's property, also read here), ``insertOpKey``/``updateOpKey``/
``deleteOpKey``/``truncateOpKey`` (I/U/D/T), ``encoding`` (UTF-8; another Python-known encoding
is re-encoded while staging), ``fieldDelimiter`` (ASCII 001), ``lineDelimiter`` (newline),
``keyValueDelimiter`` (``=``), ``keyValuePairDelimiter`` (``,``), ``nullValueRepresentation``
(``NULL``), ``missingValueRepresentation`` (empty), ``pkUpdateHandling`` (abend; above),
``iso8601Format`` (accepted; it changes only ``current_ts``'s text). Values may be wrapped as
``CDATA[...]`` and may use Java properties escapes (``\\u0001``, ``\\n``, ``\\t``), as in the
seed's sample configuration ``fieldDelimiter=CDATA[\\u0001]``. lakecdc's own options:
``schemaDirectory``, ``schemaFile``, ``columns`` (above) and ``table`` (the table name when
``includeTableName=false``). Without ``includeOpType`` a record cannot say whether it is an
insert or a delete: every record is read as an upsert (op ``R``). Without ``includeOpTimestamp``
the order is the position alone, without both it is the order of arrival.

Reading. Records are the lines of :func:`~lakecdc.decode.files.lines.read_text`, split with
Spark's ``split`` on the literal delimiter. A file whose ``lineDelimiter`` is not a newline (or
whose encoding is not UTF-8) is first staged one record per line, each record written as a JSON
string so that a record holding a raw newline still fits one line, with a ``.lines.json``
sidecar that maps it back to the original line (the line its first character is on); the
quarantine's raw text of such a record is that JSON string. Types: the schema files' declared
types (see :mod:`lakecdc.decode.goldengate.json_row`), else strings. GoldenGate date texts
(``1994-09-30:15:33:00``) stay strings.
"""

from __future__ import annotations

import codecs
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import default_seq
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.event import Parts
from lakecdc.decode.files.lines import JSON_LIMITS, read_text
from lakecdc.decode.files.staging import detect_layout, stage, text_records
from lakecdc.decode.goldengate.common import (
    GG_NAMES,
    OP_KEY_OPTIONS,
    PK_UPDATE_OPTION,
    ROW_IMAGES,
    first_duplicate,
    java_unescape,
    op_table,
    rejoin_split_key_changes,
    with_tokens,
)
from lakecdc.decode.goldengate.schemas import (
    SCHEMA_OPTIONS,
    TableSchema,
    data_files,
    declared_types,
    table_schemas,
)
from lakecdc.decode.spec import Images, Option, Ordering, VendorSpec
from lakecdc.decode.times import parse_op_ts
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: (option, field) of the metadata fields, in the order the formatter writes them.
META_FIELDS = (
    ("includeOpType", "op_type"),
    ("includeTableName", "table"),
    ("includeOpTimestamp", "op_ts"),
    ("includeCurrentTimestamp", "current_ts"),
    ("includePosition", "pos"),
    ("includeTokens", "tokens"),
)
#: Options whose values are delimiters or representations (CDATA and Java escapes allowed).
TEXT_OPTIONS = (
    "fieldDelimiter", "lineDelimiter", "keyValueDelimiter", "keyValuePairDelimiter",
    "nullValueRepresentation", "missingValueRepresentation",
)
_NEWLINES = ("\n", "\r\n")  # what both Spark's line reader and locate() split on
_EPOCH = dt.datetime(1970, 1, 1)


OGG_DELIMITED = VendorSpec(
    name="ogg-delimited",
    ops=op_table("ogg-delimited"),
    # without includeOpType every record is an upsert (R)
    images=Images(before=ROW_IMAGES.before, after=frozenset({"I", "U", "R"}), single=True),
    # op_ts (the epoch when the records carry none), pos, 0
    ordering=Ordering("given"),
    names=GG_NAMES,
    options=(
        Option("includeColumnNames", "false", "flag"),
        Option("includeOpTimestamp", "true", "flag"),
        Option("includeCurrentTimestamp", "true", "flag"),
        Option("includeOpType", "true", "flag"),
        Option("includeTableName", "true", "flag"),
        Option("includePosition", "true", "flag"),
        Option("includeTokens", "false", "flag"),
        *OP_KEY_OPTIONS,
        Option("encoding", "UTF-8"),
        Option("fieldDelimiter", "\u0001"),
        Option("lineDelimiter", "\n"),
        Option("keyValueDelimiter", "="),
        Option("keyValuePairDelimiter", ","),
        PK_UPDATE_OPTION,
        Option("nullValueRepresentation", "NULL"),
        Option("missingValueRepresentation", ""),
        Option("iso8601Format", "true", "flag"),
        # lakecdc's own: where positional column names come from, and the table name
        *SCHEMA_OPTIONS,
        Option("columns", ""),
        Option("table", ""),
    ),
    # the seed's sample configuration (13.2.6) misspells keyValuePairDelimiter; GoldenGate
    # ignores the misspelt property (the default stays), and so does lakecdc
    ignored=frozenset({"format", "kevValuePairDelimiter"}),
)


def regex_literal(text: str) -> str:
    """A Java regular expression matching ``text`` literally (for Spark's ``split``)."""
    return "".join(c if c.isascii() and c.isalnum() else f"\\x{{{ord(c):x}}}" for c in text)


#: Characters Java's ``String.split`` reads as a regular expression when alone.
_JAVA_META = ".$|()[{^?*+\\"


def split_pattern(text: str) -> str:
    """:func:`regex_literal` of ``text`` as Spark's ``split`` should get it: Spark splits with
    Java's ``String.split``, which compiles the pattern for every value unless it is one plain
    character, or a backslash and one non-alphanumeric character (its fast path). A one-character
    delimiter (ASCII 001, ``|``, ``,``, tab) is given so; a longer one as a regular expression."""
    if len(text) == 1 and ord(text) < 0xD800:
        return "\\" + text if text in _JAVA_META else text
    return regex_literal(text)


def parse_columns_option(text: str) -> dict[str, list[tuple[str, ...]]]:
    """``T1=A,B;T2=C`` as ``{"T1": [("A", "B")], "T2": [("C",)]}`` (a repeated table: older first)."""
    out: dict[str, list[tuple[str, ...]]] = {}
    for entry in (e.strip() for e in text.split(";")):
        if not entry:
            continue
        table, sep, cols = entry.partition("=")
        names = tuple(c.strip() for c in cols.split(","))
        if not sep or not table.strip() or not all(names):
            raise ConfigError(f"ogg-delimited: columns entry {entry!r}: expected TABLE=COL1,COL2,...")
        out.setdefault(table.strip(), []).append(names)
    return out


@dataclass(frozen=True)
class ColumnLayouts:
    """The known column lists per table, by number of columns, and where they came from."""

    by_count: Mapping[str, Mapping[int, tuple[str, ...]]]
    origin: Mapping[str, str]

    def expected(self, table: str) -> str:
        counts = sorted(self.by_count[table])
        return " or ".join(str(n) for n in counts)


def stage_records(path: str, staging: str, *, line_delimiter: str, encoding: str) -> str:
    """Write the records of ``path`` one per line, each as a JSON string; return the staged path.

    Blank records (whitespace only) are skipped, as blank lines are. A sidecar
    ``<staged>.lines.json`` holds each record's original line (where its first non-blank
    character is), which :func:`~lakecdc.decode.files.reread.locate` reports.
    """
    return stage(path, staging, text_records(line_delimiter, encoding))


class OggDelimitedDecoder(Decoder):
    """GoldenGate delimited text records to canonical change events."""

    spec = OGG_DELIMITED

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        o = self.options
        for name in TEXT_OPTIONS:
            o[name] = java_unescape(o[name])
        for name in ("fieldDelimiter", "lineDelimiter", "keyValueDelimiter", "keyValuePairDelimiter"):
            if not o[name]:
                raise ConfigError(f"{self.name}: {name} must not be empty")
        if o["nullValueRepresentation"] == o["missingValueRepresentation"]:
            raise ConfigError(
                f"{self.name}: nullValueRepresentation and missingValueRepresentation are both "
                f"{o['nullValueRepresentation']!r}: NULL and missing could not be told apart"
            )
        try:
            self.encoding = codecs.lookup(o["encoding"]).name
        except LookupError:
            raise ConfigError(f"{self.name}: unknown encoding {o['encoding']!r}") from None
        self.meta = [fld for opt, fld in META_FIELDS if self.flag(opt)]
        self.with_names = self.flag("includeColumnNames")
        if "table" not in self.meta and not o["table"].strip():
            raise ConfigError(
                f"{self.name}: includeTableName=false: the records do not name their table; give it "
                f"with the option table=SCHEMA.TABLE"
            )
        self.ops = self.spec.op_table(o)
        self.declared_columns = parse_columns_option(o["columns"])

    # -- column names and types ----------------------------------------------------------------
    def layouts(self, files: Sequence[str]) -> ColumnLayouts:
        """The column lists per table from schema files and the ``columns`` option."""
        by_count: dict[str, dict[int, tuple[str, ...]]] = {}
        origin: dict[str, str] = {}
        for table, versions in self._schemas(files).items():
            by_count[table] = {len(s.columns): s.columns for s in versions}
            paths = [s.path for s in versions]
            origin[table] = f"schema file{'s' if len(paths) > 1 else ''} {', '.join(paths)}"
        for table, lists in self.declared_columns.items():
            by_count[table] = {len(cols): cols for cols in lists}
            origin[table] = "option columns"
        return ColumnLayouts(by_count=by_count, origin=origin)

    def _schemas(self, files: Sequence[str]) -> dict[str, list[TableSchema]]:
        return table_schemas(self.options, files)

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Column types declared by the tables' ``.schema.json`` files (none without schemas)."""
        return declared_types(self._schemas(files))

    # -- reading -------------------------------------------------------------------------------
    def _needs_staging(self, path: str) -> bool:
        if self.options["lineDelimiter"] not in _NEWLINES or self.encoding != "utf-8":
            return True
        # read_text would take a file starting with an unparsable '{' for pretty-printed JSON
        return detect_layout(path) == "documents"

    def records(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """One row per record: ``value`` (the record's text) and the origin columns."""
        staged: list[str] = []
        paths: list[str] = []
        for f in files:
            if self._needs_staging(f):
                staged.append(stage_records(f, staging, line_delimiter=self.options["lineDelimiter"],
                                            encoding=self.encoding))
                paths.append(staged[-1])
            else:
                paths.append(f)
        lines = read_text(spark, paths, staging=staging)
        if not staged:
            return lines
        unwrapped = F.from_json(F.concat(F.lit('{"r":'), F.col("value"), F.lit("}")), "r string", JSON_LIMITS)["r"]
        return lines.withColumn("value", F.when(F.col("_file").isin(staged), unwrapped).otherwise(F.col("value")))

    def _tokens(self, text: Column) -> tuple[Column, Column]:
        """The tokens field as a map, and the first key that appears twice (NULL when none)."""
        o = self.options
        pairs = F.split(text, split_pattern(o["keyValuePairDelimiter"]), -1)
        kv = F.transform(pairs, lambda p: F.split(p, split_pattern(o["keyValueDelimiter"]), 2))
        keys = F.transform(kv, lambda a: F.try_element_at(a, F.lit(1)))
        values = F.transform(kv, lambda a: F.try_element_at(a, F.lit(2)))
        dup = F.when(text != "", first_duplicate(keys))
        empty = F.create_map().cast("map<string,string>")
        tokens = F.when(F.coalesce(text, F.lit("")) == "", empty).when(dup.isNull(), F.map_from_arrays(keys, values))
        return tokens, dup

    @property
    def appendable(self) -> bool:
        return self.options["lineDelimiter"] == "\n"

    def inputs(self, files: Sequence[str]) -> list[str]:
        """The record files (``*.schema.json`` files are schemas, not data)."""
        return data_files(files)

    def prepare(self, ctx: Context, inputs: Sequence[str]) -> Context:
        """The tables' column layouts (none needed with ``includeColumnNames=true``), from the
        schema files named by the options, among ``ctx.files`` or beside them."""
        return ctx if self.with_names else replace(ctx, state=self.layouts(ctx.files))

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """Records split into fields: the metadata fields in ``_m_<field>`` columns, the op
        (``_op``), ``_op_ts``, the values after the metadata (``_rest``, ``_n_values``), then the
        column names and values and why they do not fit (``_names``, ``_values``, ``_shape``)."""
        o = self.options
        fields = F.split("value", split_pattern(o["fieldDelimiter"]), -1)
        p = self.records(ctx.spark, inputs, staging=ctx.staging).select("_file", "_block", "_row", fields.alias("_f"))
        f = F.col("_f")
        n_meta = len(self.meta)
        meta = {name: F.try_element_at(f, F.lit(i + 1)) for i, name in enumerate(self.meta)}
        n_values = F.size(f) - n_meta
        op = self.ops.code(meta["op_type"]) if "op_type" in meta else F.lit("R")
        op_ts = parse_op_ts(meta["op_ts"], utc_session=ctx.utc) if "op_ts" in meta else F.lit(None).cast("timestamp")
        p = p.select(
            "*", *[c.alias(f"_m_{name}") for name, c in meta.items()],
            meta.get("table", F.lit(o["table"].strip())).alias("_table"), op.alias("_op"), op_ts.alias("_op_ts"),
            n_values.alias("_n_values"), F.slice(f, n_meta + 1, F.greatest(n_values, F.lit(0))).alias("_rest"),
        )
        names, values, shape = self._columns(ctx, F.col("_table"), F.col("_rest"), F.col("_n_values"))
        derived = [names.alias("_names"), values.alias("_values"), shape.alias("_shape")]
        if "tokens" in meta:
            tokens, dup = self._tokens(F.col("_m_tokens"))
            derived += [tokens.alias("_tokens"), dup.alias("_dup_token")]
        return p.select("*", *derived)

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        n_meta = len(self.meta)
        op, op_ts, table, shape = F.col("_op"), F.col("_op_ts"), F.col("_table"), F.col("_shape")
        has_image = op.isin("I", "U", "D", "R")
        checks: list[tuple[Column, Column | str]] = [
            (F.col("_n_values") < 0, F.format_string(
                f"the record has %d field(s), fewer than the {n_meta} metadata fields the options include "
                f"({', '.join(self.meta)}); check fieldDelimiter", F.size("_f"))),
            (F.coalesce(F.trim(table), F.lit("")) == "", "table name missing or empty"),
        ]
        if "op_type" in self.meta:
            checks.append((op.isNull(), F.format_string(
                f"unknown op_type '%s' (expected {self.ops.expected})", F.col("_m_op_type"))))
        if "op_ts" in self.meta:
            checks.append((op_ts.isNull(), F.format_string("op_ts is not a timestamp: '%s'", F.col("_m_op_ts"))))
        if "tokens" in self.meta:
            checks.append((F.col("_dup_token").isNotNull(), F.format_string(
                "token '%s' appears more than once in the tokens field", F.col("_dup_token"))))
        checks.append((has_image & shape.isNotNull(), shape))
        pos = F.col("_m_pos") if "pos" in self.meta else F.lit(None).cast("string")
        current_ts = F.col("_m_current_ts") if "current_ts" in self.meta else F.lit(None).cast("string")
        # the image only where it fits (a map of names and values of different lengths cannot be made)
        image = F.when(has_image & shape.isNull(), self._image(F.col("_names"), F.col("_values")))
        return Parts(
            table=table, op=op, op_ts=op_ts, pos=pos,
            seq=default_seq(F.coalesce(op_ts, F.lit(_EPOCH)), pos, F.lit(0)),
            after=image,
            source=with_tokens(current_ts, F.col("_tokens") if "tokens" in self.meta else None),
            checks=checks,
        )

    def finish(self, events: DataFrame, ctx: Context) -> DataFrame:
        """With ``pkUpdateHandling=delete-insert``, split key changes joined again."""
        if self.options["pkUpdateHandling"] == "delete-insert":
            return rejoin_split_key_changes(events)
        return events

    def _columns(self, ctx: Context, table: Column, rest: Column, n_values: Column) -> tuple[Column, Column, Column]:
        """Column names and values of a record, and why they do not fit (NULL when they do)."""
        if self.with_names:
            names = F.filter(rest, lambda _x, i: i % 2 == 0)
            values = F.filter(rest, lambda _x, i: i % 2 == 1)
            dup = first_duplicate(names)
            error = (
                F.when(n_values % 2 != 0, F.format_string(
                    "%d fields follow the metadata, but with includeColumnNames=true names and values come "
                    "in pairs; check fieldDelimiter and the include* options", n_values))
                .when(dup.isNotNull(), F.format_string("column '%s' appears more than once", dup))
            )
            return names, values, error
        layouts = ctx.state
        assert isinstance(layouts, ColumnLayouts)
        by_key = {f"{t}\u0000{n}": cols for t, counts in layouts.by_count.items() for n, cols in counts.items()}
        lookup = F.create_map(*[x for k, cols in by_key.items() for x in (F.lit(k), F.array(*[F.lit(c) for c in cols]))])
        if not by_key:
            lookup = F.create_map().cast("map<string,array<string>>")
        names = F.element_at(lookup, F.concat(table, F.lit("\u0000"), n_values.cast("string")))

        def text_map(values: Mapping[str, str]) -> Column:
            if not values:
                return F.create_map().cast("map<string,string>")
            return F.create_map(*[F.lit(x) for kv in values.items() for x in kv])

        expected = text_map({t: layouts.expected(t) for t in layouts.by_count})
        origin = text_map(dict(layouts.origin))
        error = (
            F.when(~F.coalesce(F.map_contains_key(expected, table), F.lit(False)), F.format_string(
                "no column names known for table '%s' (includeColumnNames=false): give the formatter's "
                "<table>.schema.json with schemaDirectory=DIR, or columns=%s=COL1,COL2,...", table, table))
            .when(names.isNull(), F.format_string(
                "the record has %d column value(s) but table '%s' has %s column(s) (from %s); check "
                "fieldDelimiter and the include* options, or give the table's newer schema",
                n_values, table, expected[table], origin[table]))
        )
        return names, rest, error

    def _image(self, names: Column, values: Column) -> Column:
        """``map(name -> value)`` without missing columns, NULL representation as NULL."""
        o = self.options
        missing, null_rep = o["missingValueRepresentation"], o["nullValueRepresentation"]
        zipped = F.map_from_arrays(names, values)
        present = F.map_filter(zipped, lambda _k, v: v != F.lit(missing))
        return F.transform_values(present, lambda _k, v: F.when(v != F.lit(null_rep), v))


__all__ = [
    "OGG_DELIMITED", "ColumnLayouts", "OggDelimitedDecoder", "parse_columns_option", "regex_literal",
    "split_pattern", "stage_records",
]
