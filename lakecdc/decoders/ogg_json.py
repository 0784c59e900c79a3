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

from typing import TYPE_CHECKING, ClassVar

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.changes import IMAGE_TYPE, default_seq
from lakecdc.decoders.base import Decoder, first_error, parse_op_ts
from lakecdc.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_CORRUPT = "_corrupt_record"
_META = ("table", "op_type", "op_ts", "current_ts", "pos")


class OggJsonDecoder(Decoder):
    """GoldenGate JSON op-modeled messages to canonical change events."""

    name: ClassVar[str] = "ogg-json"
    OPTIONS: ClassVar[dict[str, str]] = {
        "insertOpKey": "I",
        "updateOpKey": "U",
        "deleteOpKey": "D",
        "truncateOpKey": "T",
        "beforeObjectName": "before",
        "afterObjectName": "after",
        "flatten": "false",
        "flattenDelimiter": ".",
        "treatAllColumnsAsStrings": "false",
        "encoding": "UTF-8",
    }
    IGNORED_OPTIONS: ClassVar[frozenset[str]] = frozenset(
        {
            "prettyPrint", "jsonDelimiter", "includePrimaryKeys", "includeTokens",
            "generateSchema", "schemaDirectory", "versionSchemas", "iso8601Format",
            "omitNullValues", "pkUpdateHandling", "format",
        }
    )

    def __init__(self, options: dict[str, str] | None = None) -> None:
        super().__init__(options)
        if self.options["encoding"].replace("-", "").upper() not in ("UTF8",):
            raise ConfigError(f"ogg-json: encoding {self.options['encoding']!r} is not supported; use UTF-8")
        self.all_strings = self.flag("treatAllColumnsAsStrings")

    # -- parsing -------------------------------------------------------------------------------
    def _parsed(self, records: DataFrame) -> DataFrame:
        """Records with the message's members as columns ``m_table``, ..., ``m_before``."""
        before, after = self.options["beforeObjectName"], self.options["afterObjectName"]
        opts = {"columnNameOfCorruptRecord": _CORRUPT, "mode": "PERMISSIVE"}
        if self.flag("flatten"):
            # A flattened message is one object: parse it as a map and split it by prefix.
            # (A malformed message parses to NULL.)
            parsed = records.select("*", F.from_json("value", T.MapType(T.StringType(), T.VariantType())).alias("_m"))
            m = F.col("_m")
            delim = self.options["flattenDelimiter"]
            cols: dict[str, Column] = {
                f"m_{name}": F.try_variant_get(m[name], "$", "string") for name in _META
            }
            cols["m_primary_keys"] = F.try_variant_get(m["primary_keys"], "$", "array<string>")
            cols["m_tokens"] = F.try_variant_get(m["tokens"], "$", "map<string,string>")
            cols["m_before"] = _image_from_prefix(m, f"{before}{delim}")
            cols["m_after"] = _image_from_prefix(m, f"{after}{delim}")
            cols["m_bad_json"] = m.isNull()
            return parsed.select("*", *[c.alias(n) for n, c in cols.items()])
        schema = T.StructType(
            [T.StructField(n, T.StringType()) for n in _META]
            + [
                T.StructField("primary_keys", T.ArrayType(T.StringType())),
                T.StructField("tokens", T.MapType(T.StringType(), T.StringType())),
                T.StructField(before, IMAGE_TYPE),
                T.StructField(after, IMAGE_TYPE),
                T.StructField(_CORRUPT, T.StringType()),
            ]
        )
        j = F.col("_j")
        parsed = records.select("*", F.from_json("value", schema, opts).alias("_j"))
        return parsed.select(
            "*",
            *[j[n].alias(f"m_{n}") for n in _META],
            j["primary_keys"].alias("m_primary_keys"),
            j["tokens"].alias("m_tokens"),
            j[before].alias("m_before"),
            j[after].alias("m_after"),
            (j.isNull() | j[_CORRUPT].isNotNull()).alias("m_bad_json"),
        )

    def decode(self, records: DataFrame) -> DataFrame:
        o = self.options
        before_name, after_name = o["beforeObjectName"], o["afterObjectName"]
        p = self._parsed(records)
        op_map = {o["insertOpKey"]: "I", o["updateOpKey"]: "U", o["deleteOpKey"]: "D", o["truncateOpKey"]: "T"}
        op = F.element_at(F.create_map(*[F.lit(x) for kv in op_map.items() for x in kv]), F.col("m_op_type"))
        op_ts = parse_op_ts(F.col("m_op_ts"))
        has_before = F.col("m_before").isNotNull()
        has_after = F.col("m_after").isNotNull()
        if self.flag("flatten"):
            has_before = F.size("m_before") > 0
            has_after = F.size("m_after") > 0
        expected = ", ".join(op_map)
        error = first_error(
            (F.col("m_bad_json"), "not valid JSON"),
            (F.coalesce(F.trim("m_table"), F.lit("")) == "", "'table' missing or empty"),
            (F.col("m_op_type").isNull(), "'op_type' missing"),
            (op.isNull(), F.format_string(f"unknown op_type '%s' (expected one of {expected})", "m_op_type")),
            (op_ts.isNull(), F.format_string("'op_ts' missing or not a timestamp: '%s'", F.coalesce("m_op_ts", F.lit("")))),
            ((op == "I") & ~has_after, f"'{after_name}' missing for op_type '{o['insertOpKey']}' (expected an object)"),
            ((op == "U") & ~has_after, f"'{after_name}' missing for op_type '{o['updateOpKey']}' (expected an object)"),
            ((op == "D") & ~has_before, f"'{before_name}' missing for op_type '{o['deleteOpKey']}' (expected an object)"),
        )
        source = F.map_concat(
            F.create_map(F.lit("current_ts"), F.col("m_current_ts")),
            F.coalesce(
                F.transform_keys("m_tokens", lambda k, _v: F.concat(F.lit("token."), k)),
                F.create_map().cast("map<string,string>"),
            ),
        )
        idx = F.lit(0)
        return p.select(
            F.col("m_table").alias("table"),
            op.alias("op"),
            op_ts.alias("op_ts"),
            F.col("m_pos").alias("pos"),
            idx.alias("idx"),
            default_seq(op_ts, F.col("m_pos"), idx).alias("seq"),
            F.lit(None).cast("string").alias("txid"),
            F.col("m_primary_keys").alias("keys"),
            F.when(op.isin("U", "D"), F.col("m_before")).alias("before"),
            F.when(op.isin("I", "U"), F.col("m_after")).alias("after"),
            source.alias("source"),
            "_file", "_block", "_row", "_line",
            error.alias("_error"),
            # Only bad records keep their text here; see lakecdc.quarantine for the others.
            F.when(error.isNotNull(), F.col("value")).alias("_raw"),
        )


def _image_from_prefix(m: Column, prefix: str) -> Column:
    picked = F.map_filter(m, lambda k, _v: k.startswith(prefix))
    return F.transform_keys(picked, lambda k, _v: F.substring(k, len(prefix) + 1, 1 << 20))
