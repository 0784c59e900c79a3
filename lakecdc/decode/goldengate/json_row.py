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

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.checks import Check, bad_time, blank_as_null, missing, op_missing, unknown_op
from lakecdc.decode.event import Parts, empty_events
from lakecdc.decode.files.lines import CORRUPT, JSON_LIMITS, read_json, read_text
from lakecdc.decode.goldengate.common import (
    GG_NAMES,
    OP_KEY_OPTIONS,
    PK_UPDATE_OPTION,
    ROW_IMAGES,
    first_duplicate,
    op_table,
    rejoin_split_key_changes,
    utf8_only,
    with_tokens,
)
from lakecdc.decode.goldengate.schemas import (
    META_MEMBERS,
    SCHEMA_OPTIONS,
    TableSchema,
    data_files,
    declared_types,
    table_schemas,
)
from lakecdc.decode.spec import Option, VendorSpec
from lakecdc.decode.times import parse_op_ts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_VARIANT_MAP = T.MapType(T.StringType(), T.VariantType())
#: A message read wrapped: the whole object as one map of exact texts.
_WRAPPED = T.StructType([T.StructField("m", T.MapType(T.StringType(), T.StringType()))])

OGG_JSON_ROW = VendorSpec(
    name="ogg-json-row",
    ops=op_table("ogg-json-row"),
    images=ROW_IMAGES,
    names=GG_NAMES,
    options=(
        *OP_KEY_OPTIONS,
        Option("treatAllColumnsAsStrings", "false", "flag"),
        Option("encoding", "UTF-8"),
        PK_UPDATE_OPTION,
        *SCHEMA_OPTIONS,
    ),
    ignored=frozenset({
        "prettyPrint", "jsonDelimiter", "includePrimaryKeys", "includeTokens", "generateSchema",
        "versionSchemas", "iso8601Format", "omitNullValues", "format",
        # op-modeled JSON only (seed 13.3.6): a json_row formatter ignores them
        "flatten", "flattenDelimiter", "beforeObjectName", "afterObjectName",
    }),
    lines=True,
)


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


class OggJsonRowDecoder(Decoder):
    """GoldenGate JSON row-modeled messages to canonical change events."""

    spec = OGG_JSON_ROW

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        utf8_only(self.name, self.options["encoding"])
        self.ops = self.spec.op_table(self.options)
        self.all_strings = self.flag("treatAllColumnsAsStrings")

    # -- schemas and types ---------------------------------------------------------------------
    def schemas(self, files: Sequence[str]) -> dict[str, list[TableSchema]]:
        """The JSON schemas per table named by the options or found among ``files``."""
        return table_schemas(self.options, files)

    def column_types(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> dict[str, dict[str, T.DataType]]:
        """Column types declared by the tables' ``.schema.json`` files (none without schemas)."""
        return declared_types(self.schemas(files))

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before``, ``after`` as ``map<string, variant>``: the JSON types, for inference."""
        data = data_files(files)
        if not data:
            return empty_events(spark, binary=False).select(
                "table", *[F.lit(None).cast(_VARIANT_MAP).alias(n) for n in ("before", "after")])
        p = self._parse_variants(spark, data, staging=staging)
        op = self.ops.code(F.col("m_op_type"))
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
        mm = F.from_json("value", "map<string,variant>", JSON_LIMITS)
        return text.select(
            F.try_variant_get(mm["table"], "$", "string").alias("m_table"),
            F.try_variant_get(mm["op_type"], "$", "string").alias("m_op_type"),
            F.map_filter(mm, lambda k, _v: ~k.isin(*META_MEMBERS)).alias("m_columns"),
        )

    def inputs(self, files: Sequence[str]) -> list[str]:
        """The message files (``*.schema.json`` files are schemas, not data)."""
        return data_files(files)

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """Each message as ``m_<metadata>`` columns and ``m_columns`` (map of exact texts), with
        the op (``_op``) and the parsed ``op_ts`` (``_op_ts``).

        The message is read wrapped (:func:`~lakecdc.decode.files.lines.read_json`): Spark's file
        source parses it as one ``map<string, string>``, every value the exact text written (a
        string's content, a number's digits as written, an object or array as its JSON text).
        """
        mm = F.col("m")
        # the expressions with a lambda function next to the reader (see read_json's derived): the
        # projections above them then run as generated code
        derived = {
            "m_columns": F.map_filter(mm, lambda k, _v: ~k.isin(*META_MEMBERS)),
            "m_duplicate": _first_duplicate_key(mm),
            "m_source": with_tokens(mm["current_ts"], F.from_json(mm["tokens"], "map<string,string>", JSON_LIMITS)),
        }
        parsed = read_json(ctx.spark, inputs, _WRAPPED, staging=ctx.staging, wrap="m", derived=derived)
        cols: dict[str, Column] = {f"m_{n}": mm[n] for n in META_MEMBERS[:5]}
        cols["m_primary_keys"] = _names(mm["primary_keys"])
        cols["m_bad_json"] = F.col(CORRUPT).isNotNull() | mm.isNull()
        cols["m_op_modeled"] = _op_modeled(mm)
        p = parsed.select("_file", "_block", "_row", *derived, *[c.alias(n) for n, c in cols.items()])
        return p.select("*", self.ops.code(F.col("m_op_type")).alias("_op"),
                        parse_op_ts(F.col("m_op_ts"), utc_session=ctx.utc).alias("_op_ts"))

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        op, op_text, op_ts = F.col("_op"), F.col("m_op_type"), F.col("_op_ts")
        names = self.spec.names
        row_op = op.isin("I", "U", "D")
        checks: list[Check] = [
            (F.col("m_bad_json"), "not valid JSON (expected one object per message)"),
            (F.col("m_duplicate").isNotNull(), F.format_string("member '%s' appears more than once", "m_duplicate")),
            missing(blank_as_null(F.col("m_table")), names.table),
            op_missing(op_text, names.op),
            unknown_op(op_text, op.isNotNull(), self.ops, names.op),
            bad_time(op_ts, F.col("m_op_ts"), names.op_ts),
            (row_op & F.col("m_op_modeled").isNotNull(), F.format_string(
                "member '%s' is an object: this is op-modeled JSON (format=json); read it with format ogg-json",
                "m_op_modeled")),
            (row_op & (F.size("m_columns") == 0), F.format_string(
                "no column members for op_type '%s' (a row-modeled message carries the columns at the top level)",
                "m_op_type")),
        ]
        return Parts(
            table=F.col("m_table"), op=op, op_ts=op_ts, pos=F.col("m_pos"), keys=F.col("m_primary_keys"),
            after=F.col("m_columns"), source=F.col("m_source"), checks=checks,
        )

    def finish(self, events: DataFrame, ctx: Context) -> DataFrame:
        """With ``pkUpdateHandling=delete-insert``, split key changes joined again."""
        if self.options["pkUpdateHandling"] == "delete-insert":
            return rejoin_split_key_changes(events)
        return events


__all__ = ["OGG_JSON_ROW", "OggJsonRowDecoder"]
