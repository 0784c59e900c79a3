"""Reading input files as lines and JSON messages, with the columns that say where each came from.

JSON messages are read by Spark's own JSON file source, split across executors, with
``spark.sql.json.enableExactStringParsing`` on (:func:`exact_json_strings`) so that a value read as
a string keeps the exact text of the message (``17520.00`` stays ``17520.00``; a 20-digit decimal
is not rounded through a double). Files that are not one record per line are staged first
(:mod:`lakecdc.decode.files.staging`).

A format whose messages have no fixed member names (GoldenGate's row-modeled JSON: the columns
are members of the message itself) is read *wrapped* (``wrap="m"``): every file is staged with
each record written as ``{"m":<record>}`` on the line it had, so that Spark's file source parses
the whole message as an exact ``map<string, string>`` (``from_json`` would render numbers
through doubles, a variant drops their trailing zeros). ``wrap="m[]"`` writes ``{"m":[<record>]}``:
read as an array, a line holding more than one JSON value (``{...}, "x": 1``, ``{...} {...}``)
is then a corrupt record or an array of more than one element, where the file source reading
the line bare would take its first value and ignore the rest.

Every row carries ``_file`` (the input path, or its staged copy), ``_block`` (start of the split
it was read from) and ``_row`` (an id increasing along the split, over non-blank lines). A
record's line number and raw text are recovered only for bad records, by
:func:`lakecdc.decode.files.reread.locate` reading the file again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from lakecdc.decode.files.staging import staged_documents

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

CORRUPT = "_corrupt_record"
EXACT_STRINGS = "spark.sql.json.enableExactStringParsing"
#: Spark's JSON reader option ``maxStringLen``: Jackson's ``StreamReadConstraints.maxStringLength``,
#: 20,000,000 characters by default, above which a value is read as a corrupt record. A change
#: carries whole LOBs, so the limit is lifted to the longest string Java holds.
MAX_STRING_LEN = 2**31 - 1
#: The JSON reader options every lakecdc read passes (``from_json`` included).
JSON_LIMITS = {"maxStringLen": str(MAX_STRING_LEN)}


def exact_json_strings(spark: SparkSession) -> contextlib.AbstractContextManager[None]:
    """Keep JSON values read as strings exactly as written while the block runs."""
    from lakecdc.spark.conf import job_conf

    return job_conf(spark, {EXACT_STRINGS: "true"})


def _origin(paths: Sequence[str]) -> tuple[Column, Column, Column]:
    """``_file`` (the path as given, not Spark's URI), ``_block`` and ``_row`` of a file source."""
    names = {Path(p).resolve().as_uri(): p for p in paths}
    mapping = F.create_map(*[F.lit(x) for kv in names.items() for x in kv])
    uri = F.input_file_name()
    return (
        F.coalesce(mapping[uri], uri).alias("_file"),
        F.input_file_block_start().alias("_block"),
        F.monotonically_increasing_id().alias("_row"),
    )


def read_json(
    spark: SparkSession, files: Sequence[str], schema: StructType, *, staging: str,
    derived: Mapping[str, Column] | None = None, wrap: str | None = None,
) -> DataFrame:
    """Messages of ``files`` parsed with ``schema`` (plus ``_corrupt_record``) and origin columns.

    ``derived``: columns computed from the parsed members in a projection of their own, next to
    the reader. Meant for expressions with a lambda function (``map_filter``, ``transform``):
    Spark runs them interpreted, and a projection holding one is left out of the generated code
    and copies every row it passes on. Next to the reader it copies the parsed row only; the
    decoder's projections above it stay generated.

    ``wrap``: read every record as the member of that name of ``schema`` (see the module
    docstring).

    Call inside :func:`exact_json_strings`.
    """
    paths = staged_documents(spark, files, staging, wrap=wrap, keyed=True)
    # (a new struct: StructType.add would change the caller's schema in place)
    full = schema if CORRUPT in schema.fieldNames() else StructType([*schema.fields, StructField(CORRUPT, StringType())])
    df = (
        spark.read.schema(full)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("allowSingleQuotes", "false")  # Spark's default takes {'a':'b'}: no JSON, quarantined
        .options(**JSON_LIMITS)
        .json(paths)
    )
    if derived:
        df = df.select("*", *[c.alias(n) for n, c in derived.items()])
    return df.select("*", *_origin(paths))


def read_lines(spark: SparkSession, paths: Sequence[str], prefixes: Sequence[str] = ()) -> DataFrame:
    """Non-blank lines of ``paths`` (read as they are: staged already, or one record per line) as
    ``value`` with the same origin columns as :func:`read_json`.

    ``prefixes``: a line starting with one of them has it cut off its ``value`` and its index in
    ``_head`` (NULL for the other lines), so that a text every line repeats (a Kafka Connect
    schema: :func:`lakecdc.decode.kafka.connect.connect_prefixes`) does not cross to Python with
    each line.
    """
    value = F.col("value")
    extra = []
    if prefixes:
        head, cut = F.lit(None).cast("int"), value
        for i, prefix in reversed(list(enumerate(prefixes))):
            starts = value.startswith(prefix)
            head = F.when(starts, F.lit(i)).otherwise(head)
            # cut by bytes (a substring by characters walks the whole prefix's characters)
            after = F.substring(value.cast("binary"), len(prefix.encode("utf-8")) + 1, 2**31 - 1)
            cut = F.when(starts, after.cast("string")).otherwise(cut)
        value, extra = cut.alias("value"), [head.alias("_head")]
    # blank means JSON whitespace only, as for Spark's JSON reader (row ids must agree)
    lines = spark.read.text(list(paths)).where(F.col("value").rlike("[^ \\t\\r\\n]"))
    return lines.select(value, *_origin(paths), *extra)


def read_text(spark: SparkSession, files: Sequence[str], *, staging: str) -> DataFrame:
    """Non-blank lines of ``files`` (documents staged one per line) as ``value`` with the same
    origin columns as :func:`read_json`."""
    return read_lines(spark, staged_documents(spark, files, staging))


__all__ = ["CORRUPT", "EXACT_STRINGS", "JSON_LIMITS", "MAX_STRING_LEN", "exact_json_strings", "read_json",
           "read_lines", "read_text"]
