"""Reading what lakecdc reads and writes, without applying anything: change files decoded into
canonical events (:func:`read_changes`), a Delta table it wrote (:func:`read_table`)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from pyspark.sql import functions as F

from lakecdc.changes.sequence import resequence
from lakecdc.check.contracts import Contract, load_contracts
from lakecdc.config import arguments as A
from lakecdc.config.settings import EVERY_TABLE, Settings
from lakecdc.decode import get_decoder
from lakecdc.decode.files.lines import EXACT_STRINGS
from lakecdc.errors import ConfigError, LakecdcError
from lakecdc.lake.ledger import list_inputs
from lakecdc.merge.delta_rs import DeltaRsEngine
from lakecdc.spark.compat import delta_spark_available
from lakecdc.spark.session import get_spark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def read_table(
    path: str | os.PathLike[str], *, version: int | None = None, spark: SparkSession | None = None,
) -> DataFrame:
    """A Delta table lakecdc wrote, as a Spark DataFrame, optionally as of an older ``version``.

    Uses Delta's own reader when its JVM classes are there (Databricks), else reads the files
    the Delta log lists (delta-rs): the same rows either way, no Delta jars needed.

    Example:
        >>> s = lakecdc.apply("landing/", "lake/", format="ogg-json")                   # doctest: +SKIP
        >>> lakecdc.read_table(s.table("QASOURCE.TCUSTORD").target, version=1).show()   # doctest: +SKIP
    """
    path = A.path("read_table", "path", path, "'lake/QASOURCE.TCUSTORD'")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int) or version < 0):
        raise ConfigError(f"read_table(version={version!r}): expected a table version, 0 or more (or None: the latest)")
    spark = A.session("read_table", spark) or get_spark()
    if delta_spark_available(spark):
        reader = spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        return reader.load(str(path))
    return DeltaRsEngine().read(spark, str(path), version)


def read_changes(
    inputs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    format: str | None = None,
    options: Mapping[str, str] | None = None,
    spark: SparkSession | None = None,
    sequence_by: Sequence[str] | str | Mapping[str, Sequence[str] | str] | None = None,
    contracts: str | os.PathLike[str] | Mapping[str, Contract] | None = None,
) -> DataFrame:
    """Decode change files into ops-style canonical events (good and bad records alike).

    ``format`` is required (a registered name, as for :func:`lakecdc.apply`).

    ``_error`` is NULL for good records and holds the reason for bad ones.

    ``sequence_by`` (as for :func:`apply`) rebuilds ``seq`` from those fields; a column is
    compared by the type the input declares (Avro schemas, ...) or the ``contracts`` give, else as
    text: suffix it ``:int`` or ``:ts`` to compare as a number or a time. An event without a value
    gets an ``_error`` naming the field. (Also a contract's ``lakecdc.sequence_by`` applies.)

    Example:
        >>> ev = lakecdc.read_changes("landing/", format="ogg-json")     # doctest: +SKIP
        >>> ev.groupBy("table", "op").count().show()                      # doctest: +SKIP
    """
    asked = Settings.build(format=format, options=options, sequence_by=sequence_by, contracts=contracts)
    fmt = asked.required_format()
    raw = A.paths("read_changes", "inputs", inputs)
    spark = A.session("read_changes", spark) or get_spark()
    files = list_inputs(raw)
    if not files:
        raise LakecdcError(f"no input files under {', '.join(map(str, raw))}")
    staging = tempfile.mkdtemp(prefix="lakecdc-staging-")
    spark.conf.set(EXACT_STRINGS, "true")
    decoder = get_decoder(fmt, options)
    events = decoder.read(spark, files, staging=staging)
    loaded = contracts if isinstance(contracts, Mapping) else load_contracts(contracts)
    default = asked.sequence_by.get(EVERY_TABLE, ())
    by_table = {**{t: c.sequence_by for t, c in loaded.items() if c.sequence_by},
                **{t: f for t, f in asked.sequence_by.items() if t != EVERY_TABLE}}
    if not default and not by_table:
        return events
    declared = dict(decoder.column_types(spark, files, staging=staging))
    for table, contract in loaded.items():
        declared[table] = {**declared.get(table, {}), **contract.types}
    tables = sorted(by_table) if not default else sorted(
        r[0] for r in events.where(F.col("table").isNotNull()).select("table").distinct().collect()
    )
    for table in tables:
        fields = by_table.get(table) or default
        types = {c: t for c, t in declared.get(table, {}).items() if t.typeName() != "void"}  # (declared untyped)
        events = resequence(events, table, fields, types).drop("_unordered")
    return events
