"""Reading input files into raw records (one JSON document, line or message per row).

Two layouts are told apart per file by its first bytes:

* **lines**: one record per line (JSON lines, delimited text). Read by Spark's own text source,
  split across executors; the line number of a record is worked out only when it is needed for
  an error report (:func:`resolve_lines`).
* **documents**: pretty-printed or concatenated JSON objects (GoldenGate ``prettyPrint=true``,
  ``jsonDelimiter``). Each file is read whole by one executor task and split into objects by a
  small scanner that knows JSON strings, so it also reports exact line numbers.

Every record row carries ``_file`` (the path as given), ``_block`` (the byte offset of the split
it was read from), ``_row`` (an id increasing along the split) and ``_line`` (1-based line of the
record's first character, NULL until resolved for the lines layout).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import pyarrow as pa
from pyspark.sql import functions as F
from pyspark.sql import types as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Layout = Literal["lines", "documents"]

RECORD_SCHEMA = T.StructType(
    [
        T.StructField("_file", T.StringType()),
        T.StructField("_block", T.LongType()),
        T.StructField("_row", T.LongType()),
        T.StructField("_line", T.LongType()),
        T.StructField("value", T.StringType()),
    ]
)
_PEEK_BYTES = 1 << 16


def detect_layout(path: str) -> Layout:
    """``documents`` when the file's first record is a JSON object spread over several lines."""
    with open(path, "rb") as fh:
        head = fh.read(_PEEK_BYTES).decode("utf-8", errors="replace")
    stripped = head.lstrip()
    if not stripped.startswith("{"):
        return "lines"
    first_line = stripped.split("\n", 1)[0].strip()
    try:
        json.loads(first_line)
    except ValueError:
        return "documents"
    return "lines"


def _uri_to_path(files: Sequence[str]) -> dict[str, str]:
    return {Path(f).resolve().as_uri(): f for f in files}


def read_records(spark: SparkSession, files: Sequence[str]) -> DataFrame:
    """All records of ``files`` as a DataFrame with :data:`RECORD_SCHEMA` (blank lines included)."""
    line_files = [f for f in files if detect_layout(f) == "lines"]
    doc_files = [f for f in files if f not in set(line_files)]
    parts: list[DataFrame] = []
    if line_files:
        names = _uri_to_path(line_files)
        mapping = F.create_map(*[F.lit(x) for kv in names.items() for x in kv])
        uri = F.input_file_name()
        lines = spark.read.text(line_files).select(
            F.coalesce(mapping[uri], uri).alias("_file"),
            F.input_file_block_start().alias("_block"),
            F.monotonically_increasing_id().alias("_row"),
            F.lit(None).cast("long").alias("_line"),
            F.col("value"),
        )
        parts.append(lines)
    if doc_files:
        names = _uri_to_path(doc_files)
        whole = spark.read.text(doc_files, wholetext=True).select(
            F.input_file_name().alias("uri"), F.col("value")
        )
        parts.append(whole.mapInArrow(_split_documents_batches(names), RECORD_SCHEMA))
    if not parts:
        return spark.createDataFrame([], RECORD_SCHEMA)
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def _split_documents_batches(names: dict[str, str]):  # type: ignore[no-untyped-def]
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for uri, text in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                path = names.get(uri, uri)
                rows = list(split_documents(text or ""))
                yield pa.RecordBatch.from_pydict(
                    {
                        "_file": [path] * len(rows),
                        "_block": [0] * len(rows),
                        "_row": [i for i, _ in enumerate(rows)],
                        "_line": [line for line, _ in rows],
                        "value": [doc for _, doc in rows],
                    },
                    schema=pa.schema(
                        [("_file", pa.string()), ("_block", pa.int64()), ("_row", pa.int64()),
                         ("_line", pa.int64()), ("value", pa.string())]
                    ),
                )

    return run


def split_documents(text: str) -> Iterator[tuple[int, str]]:
    """Split concatenated JSON objects; yield ``(line, text)`` per object.

    Whitespace and delimiters between objects (``,``, ``;``, a ``jsonDelimiter``) are skipped.
    A trailing comma before ``}`` or ``]`` (as in the GoldenGate manual's own examples) is
    dropped. Text that does not start an object is yielded up to the end of its line, so the
    caller reports it as a bad record instead of losing it.
    """
    i, n, line = 0, len(text), 1
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            i += 1
            continue
        if ch.isspace() or ch in ",;":
            i += 1
            continue
        if ch != "{":
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield line, text[i:end]
            i = end
            continue
        start_line = line
        out: list[str] = []
        depth, in_str, esc = 0, False, False
        while i < n:
            ch = text[i]
            if ch == "\n":
                line += 1
            if in_str:
                if esc:
                    esc = False
                elif ch == "\\":
                    esc = True
                elif ch == '"':
                    in_str = False
                out.append(ch)
            elif ch == '"':
                in_str = True
                out.append(ch)
            elif ch in "{[":
                depth += 1
                out.append(ch)
            elif ch in "}]":
                _drop_trailing_comma(out)
                depth -= 1
                out.append(ch)
                if depth == 0:
                    i += 1
                    break
            else:
                out.append(ch)
            i += 1
        yield start_line, "".join(out)


def _drop_trailing_comma(out: list[str]) -> None:
    j = len(out) - 1
    while j >= 0 and out[j].isspace():
        j -= 1
    if j >= 0 and out[j] == ",":
        del out[j]


def resolve_lines(spark: SparkSession, records: DataFrame, bad: DataFrame) -> DataFrame:
    """Fill ``_line`` of the ``bad`` records that came from the lines layout.

    A record's line is the number of newlines before its split (counted on the driver, only for
    splits holding a bad record) plus its rank inside the split. ``records`` must be the same
    (cached) DataFrame the bad ones were taken from, so that ``_row`` ids agree.
    """
    need = bad.where(F.col("_line").isNull()).select("_file", "_block").distinct().collect()
    if not need:
        return bad
    first_rows = (
        records.where(F.col("_line").isNull())
        .groupBy("_file", "_block")
        .agg(F.min("_row").alias("_first_row"))
    )
    base = spark.createDataFrame(
        [(r["_file"], r["_block"], _newlines_before(r["_file"], r["_block"])) for r in need],
        "_file string, _block long, _lines_before long",
    )
    resolved = (
        bad.join(first_rows, ["_file", "_block"], "left")
        .join(base, ["_file", "_block"], "left")
        .withColumn(
            "_line",
            F.coalesce(
                F.col("_line"), F.col("_lines_before") + F.col("_row") - F.col("_first_row") + 1
            ),
        )
        .drop("_first_row", "_lines_before")
    )
    return resolved


def _newlines_before(path: str, offset: int) -> int:
    count = 0
    with open(path, "rb") as fh:
        remaining = offset
        while remaining > 0:
            chunk = fh.read(min(remaining, 1 << 22))
            if not chunk:
                break
            count += chunk.count(b"\n")
            remaining -= len(chunk)
    return count
