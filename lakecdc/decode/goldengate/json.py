"""Oracle GoldenGate for Big Data JSON, operation-modeled (``gg.handler.<name>.format=json``).

One message per operation: ``table``, ``op_type``, ``op_ts``, ``current_ts``, ``pos``, optional
``primary_keys`` and ``tokens``, then a ``before`` and/or ``after`` object (insert: after;
update: both; delete: before; truncate: neither). A column absent from an image is *missing*; a
JSON null is NULL. With ``flatten=true`` the images are spread over top-level members named
``before<delim>COL`` / ``after<delim>COL``. Messages may be one per line or pretty-printed and
concatenated (``prettyPrint=true``, ``jsonDelimiter``).

Options are the formatter's own property names (without ``gg.handler.<name>.format.``):
``insertOpKey``/``updateOpKey``/``deleteOpKey``/``truncateOpKey`` (defaults I/U/D/T),
``beforeObjectName``/``afterObjectName`` (before/after), ``flatten`` (false),
``flattenDelimiter`` (.), ``treatAllColumnsAsStrings`` (false: every column typed as string).
``prettyPrint``, ``jsonDelimiter``, ``includePrimaryKeys``, ``includeTokens``, ``generateSchema``,
``schemaDirectory``, ``versionSchemas``, ``iso8601Format``, ``encoding`` (UTF-8 only),
``omitNullValues`` and ``pkUpdateHandling`` are accepted: the reader detects what they change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes.events import IMAGE_TYPE
from lakecdc.decode.base import Context, Decoder
from lakecdc.decode.checks import bad_time, blank_as_null, image_missing, missing, op_missing, unknown_op
from lakecdc.decode.event import Parts
from lakecdc.decode.files.lines import CORRUPT, JSON_LIMITS, read_json, read_text
from lakecdc.decode.goldengate.common import GG_NAMES, OP_KEY_OPTIONS, op_table, utf8_only, with_tokens
from lakecdc.decode.spec import Option, VendorSpec
from lakecdc.decode.times import parse_op_ts

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_META = ("table", "op_type", "op_ts", "current_ts", "pos")

OGG_JSON = VendorSpec(
    name="ogg-json",
    ops=op_table("ogg-json"),
    names=GG_NAMES,
    options=(
        *OP_KEY_OPTIONS,
        Option("beforeObjectName", "before"),
        Option("afterObjectName", "after"),
        Option("flatten", "false", "flag"),
        Option("flattenDelimiter", "."),
        Option("treatAllColumnsAsStrings", "false", "flag"),
        Option("encoding", "UTF-8"),
    ),
    ignored=frozenset({
        "prettyPrint", "jsonDelimiter", "includePrimaryKeys", "includeTokens", "generateSchema",
        "schemaDirectory", "versionSchemas", "iso8601Format", "omitNullValues", "pkUpdateHandling", "format",
    }),
    lines=True,
)


class OggJsonDecoder(Decoder):
    """GoldenGate JSON op-modeled messages to canonical change events."""

    KAFKA_RECORDS = "values"

    spec = OGG_JSON

    def __init__(self, options: Mapping[str, str] | None = None) -> None:
        super().__init__(options)
        utf8_only(self.name, self.options["encoding"])
        self.ops = self.spec.op_table(self.options)
        self.all_strings = self.flag("treatAllColumnsAsStrings")

    @property
    def image_names(self) -> tuple[str, str]:
        """The members holding the before and after images (``beforeObjectName``, ``afterObjectName``)."""
        return self.options["beforeObjectName"], self.options["afterObjectName"]

    def schema(self) -> T.StructType:
        """The message schema Spark parses with (images as exact-text maps)."""
        before, after = self.image_names
        return T.StructType(
            [T.StructField(n, T.StringType()) for n in _META]
            + [
                T.StructField("primary_keys", T.ArrayType(T.StringType())),
                T.StructField("tokens", T.MapType(T.StringType(), T.StringType())),
                T.StructField(before, IMAGE_TYPE),
                T.StructField(after, IMAGE_TYPE),
            ]
        )

    def variant_images(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        """``table``, ``before``, ``after`` as ``map<string, variant>``: the JSON types, for inference."""
        before, after = self.image_names
        if self.flag("flatten"):
            parsed = self._flat(spark, files, staging=staging, value_type=T.VariantType())
            return parsed.select(F.col("m_table").alias("table"), F.col("m_before").alias("before"), F.col("m_after").alias("after"))
        vmap = T.MapType(T.StringType(), T.VariantType())
        schema = T.StructType([T.StructField("table", T.StringType()), T.StructField(before, vmap), T.StructField(after, vmap)])
        df = read_json(spark, files, schema, staging=staging)
        return df.select("table", F.col(before).alias("before"), F.col(after).alias("after"))

    # -- parsing -------------------------------------------------------------------------------
    def _flat(self, spark: SparkSession, files: Sequence[str], *, staging: str, value_type: T.DataType) -> DataFrame:
        """Flattened messages: the whole object as one map, split by member-name prefix."""
        before, after = self.image_names
        delim = self.options["flattenDelimiter"]
        # A flattened message has no fixed member names, so Spark's JSON reader cannot type it:
        # the records are read as text and parsed to a map of variants (numbers stay exact).
        text = read_text(spark, files, staging=staging)
        m = F.from_json("value", "map<string,variant>", JSON_LIMITS)
        parsed = text.select("*", m.alias("_m"))
        mm = F.col("_m")

        def image(prefix: str) -> Column:
            picked = F.map_filter(mm, lambda k, _v: k.startswith(prefix))
            keyed = F.transform_keys(picked, lambda k, _v: F.substring(k, len(prefix) + 1, 1 << 20))
            if isinstance(value_type, T.StringType):
                return F.transform_values(keyed, lambda _k, v: F.try_variant_get(v, "$", "string"))
            return keyed

        cols: dict[str, Column] = {f"m_{n}": F.try_variant_get(mm[n], "$", "string") for n in _META}
        cols["m_primary_keys"] = F.try_variant_get(mm["primary_keys"], "$", "array<string>")
        cols["m_tokens"] = F.try_variant_get(mm["tokens"], "$", "map<string,string>")
        b, a = image(f"{before}{delim}"), image(f"{after}{delim}")
        cols["m_before"] = F.when(F.size(b) > 0, b)
        cols["m_after"] = F.when(F.size(a) > 0, a)
        cols["m_bad_json"] = mm.isNull()
        cols["m_source"] = with_tokens(cols["m_current_ts"], cols["m_tokens"])
        return parsed.select("_file", "_block", "_row", *[c.alias(n) for n, c in cols.items()])

    def _nested(self, spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
        before, after = self.image_names
        # the lambda function (tokens) next to the reader: the projections above run as generated code
        source = {"m_source": with_tokens(F.col("current_ts"), F.col("tokens"))}
        df = read_json(spark, files, self.schema(), staging=staging, derived=source)
        return df.select(
            "_file", "_block", "_row", "m_source",
            *[F.col(n).alias(f"m_{n}") for n in _META],
            F.col("primary_keys").alias("m_primary_keys"),
            F.col("tokens").alias("m_tokens"),
            F.col(before).alias("m_before"),
            F.col(after).alias("m_after"),
            F.col(CORRUPT).isNotNull().alias("m_bad_json"),
        )

    def parse(self, ctx: Context, inputs: Sequence[str]) -> DataFrame:
        """Messages as ``m_<member>`` columns (images as exact-text maps), with the op (``_op``)
        and the parsed ``op_ts`` (``_op_ts``) in columns of their own."""
        if self.flag("flatten"):
            p = self._flat(ctx.spark, inputs, staging=ctx.staging, value_type=T.StringType())
        else:
            p = self._nested(ctx.spark, inputs, staging=ctx.staging)
        return p.select("*", self.ops.code(F.col("m_op_type")).alias("_op"),
                        parse_op_ts(F.col("m_op_ts"), utc_session=ctx.utc).alias("_op_ts"))

    def parts(self, parsed: DataFrame, ctx: Context) -> Parts:
        before_name, after_name = self.image_names
        op, op_text, op_ts = F.col("_op"), F.col("m_op_type"), F.col("_op_ts")
        names = self.spec.names
        checks = [
            (F.col("m_bad_json"), "not valid JSON"),
            missing(blank_as_null(F.col("m_table")), names.table),
            op_missing(op_text, names.op),
            unknown_op(op_text, op.isNotNull(), self.ops, names.op),
            bad_time(op_ts, F.col("m_op_ts"), names.op_ts),
            image_missing((op == "I") & F.col("m_after").isNull(), after_name, names.op, op_text, "an object"),
            image_missing((op == "U") & F.col("m_after").isNull(), after_name, names.op, op_text, "an object"),
            image_missing((op == "D") & F.col("m_before").isNull(), before_name, names.op, op_text, "an object"),
        ]
        return Parts(
            table=F.col("m_table"), op=op, op_ts=op_ts, pos=F.col("m_pos"), keys=F.col("m_primary_keys"),
            before=F.col("m_before"), after=F.col("m_after"),
            source=F.col("m_source"), checks=checks,
        )


__all__ = ["OGG_JSON", "OggJsonDecoder"]
