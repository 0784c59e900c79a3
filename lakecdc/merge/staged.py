"""A large delta-rs batch's net actions staged as Parquet and streamed into the merge.

delta-rs merges Arrow from the driver. A batch's net actions (one row per changed key, with a
value and a "set" flag per column) are collected there by default: fastest for the batches most
runs apply, but the driver then holds the whole batch twice (Spark's collected result and the
Arrow table). A run whose input reaches :data:`STAGED_FOLD_BYTES` has Spark write the fold's
output as Parquet next to the run's other staging files instead; the totals and per-file counts are
summed by Spark over those files, and delta-rs reads them as a stream of record batches
(``streamed_exec=True``, its target files still pruned by the key-range literals in the merge
predicate). The driver's memory then no longer grows with the batch.

Staging needs the Spark workers and the driver to share a file system: a local session
(``local[...]``, not a Spark Connect one) and a local target. Elsewhere the batch is collected as
before.

Timestamps and dates are staged as numbers (microseconds, days since 1970), so that the staged
files mean the same whatever the session's Parquet settings (INT96, calendar rebasing); nested
columns holding them are not staged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import functions as F
from pyspark.sql import types as T

from lakecdc.merge.arrow_types import to_arrow_type
from lakecdc.spark.compat import is_spark_connect
from lakecdc.spark.conf import env_bytes

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

#: Input bytes from which a delta-rs run stages its tables' net actions instead of collecting
#: them. Measured on GoldenGate JSON (bench/RESULTS.md, "delta-rs: net actions collected or
#: staged"): 20,000,000 events (10 GB) took the same time either way and peaked 4.3 GiB lower
#: staged; 5,000,000 (2.5 GB) were 10% slower staged and no smaller; 1,000,000 25% slower.
#: ``LAKECDC_STAGED_FOLD_BYTES`` overrides it (0: always, -1: never).
STAGED_FOLD_BYTES = 4 << 30
#: Rows per record batch delta-rs reads from the staged files.
BATCH_ROWS = 65_536


def staged_fold_bytes() -> int:
    return env_bytes("LAKECDC_STAGED_FOLD_BYTES", STAGED_FOLD_BYTES, "0: always, -1: never")


def stage_root(spark: SparkSession, engine_name: str, staging: str, input_bytes: int) -> str | None:
    """Where a run's tables stage their net actions (under the run's ``staging`` directory), or
    None when they are collected: another engine, a small run, or workers that may not share the
    driver's file system."""
    limit = staged_fold_bytes()
    if engine_name != "delta-rs" or limit < 0 or input_bytes < limit or ":" in Path(staging).parts[0]:
        return None
    if is_spark_connect(spark):  # (the server's file system need not be this process's)
        return None
    try:
        master = spark.conf.get("spark.master") or ""
    except Exception:  # noqa: BLE001 - a session that does not say
        return None
    return str(Path(staging) / "fold") if master.startswith("local") else None


def table_dir(root: str, table: str) -> str:
    """The directory of one table's staged actions (tables are prepared concurrently)."""
    return str(Path(root) / hashlib.sha1(table.encode()).hexdigest()[:16])


def _as_number(dtype: T.DataType) -> bool:
    return isinstance(dtype, (T.TimestampType, T.DateType))


def _nested_time(dtype: T.DataType) -> bool:
    if isinstance(dtype, T.ArrayType):
        return _as_number(dtype.elementType) or _nested_time(dtype.elementType)
    if isinstance(dtype, T.MapType):
        return any(_as_number(t) or _nested_time(t) for t in (dtype.keyType, dtype.valueType))
    if isinstance(dtype, T.StructType):
        return any(_as_number(f.dataType) or _nested_time(f.dataType) for f in dtype.fields)
    return False


def can_stage(df: DataFrame) -> bool:
    """Whether ``df``'s columns stage faithfully (no timestamp or date inside a nested column)."""
    return not any(_nested_time(f.dataType) for f in df.schema.fields)


def stage(df: DataFrame, directory: str) -> DataFrame:
    """Write ``df`` to ``directory`` (replacing what was there) and return it read back from there,
    with its own column types."""
    schema = df.schema
    df.select(*_times(schema, F.unix_micros, F.unix_date)).write.mode("overwrite").parquet(directory)
    return df.sparkSession.read.parquet(directory).select(*_times(schema, F.timestamp_micros, F.date_from_unix_date))


def _times(schema: T.StructType, timestamps: Callable[[Column], Column], dates: Callable[[Column], Column]) -> list[Column]:
    """``schema``'s columns, its timestamps through ``timestamps`` and its dates through ``dates``."""
    out = []
    for f in schema.fields:
        col = F.col(f"`{f.name}`")
        if isinstance(f.dataType, T.TimestampType):
            col = timestamps(col)
        elif isinstance(f.dataType, T.DateType):
            col = dates(col)
        out.append(col.alias(f.name))
    return out


def reader(directory: str, schema: T.StructType) -> pa.RecordBatchReader:
    """The staged net actions that apply (``_action`` set), ``schema``'s columns, as a stream of
    Arrow record batches typed as a collected batch would be."""
    want = pa.schema([pa.field(f.name, to_arrow_type(f.dataType)) for f in schema.fields])
    files = ds.dataset(directory, format="parquet")
    scanner = files.scanner(columns=list(want.names), filter=pc.field("_action").is_valid(), batch_size=BATCH_ROWS)

    def batches():  # noqa: ANN202
        for batch in scanner.to_batches():
            if batch.num_rows:
                yield batch.cast(want)

    return pa.RecordBatchReader.from_batches(want, batches())
