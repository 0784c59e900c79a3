"""lakecdc: change streams from GoldenGate, Debezium, DTS and Qlik, merged exactly once into Delta.

The data's path, package by package: :mod:`lakecdc.decode` (vendor formats to canonical
events), :mod:`lakecdc.changes` (the canonical event, ops- and rows-style), :mod:`lakecdc.consolidate`
(one net action per key, or SCD type 2 versions), :mod:`lakecdc.merge` (each table prepared and
MERGEd exactly once, two Delta engines), :mod:`lakecdc.maintenance` (compaction, Z-order, vacuum,
checkpoints) and :mod:`lakecdc.check` (data contracts, Great Expectations); :mod:`lakecdc.run` runs
them exactly once per input (:func:`apply`; :mod:`lakecdc.streaming`: the same as a Structured
Streaming query over a landing directory).

A wrong argument or setting is a :class:`ConfigError` (a ``ValueError``) that names it, what was
given and what to give, raised before anything starts.

Example (a notebook with a ``spark`` session)::

    import lakecdc
    summary = lakecdc.apply("landing/", "lake/", format="ogg-json",
                            keys={"QASOURCE.TCUSTORD": ["CUST_CODE", "ORDER_ID"]}, spark=spark)
    print(summary.render())

    # `format` is required (no format is assumed); the other settings have defaults.
    # Settings built once, reused by many runs (keyword arguments override them per run):
    orders = lakecdc.Settings(format="debezium-json", keys={"APP.ORDERS": ["ID"]}, pk_update="update")
    lakecdc.apply("landing/", "lake/", settings=orders, spark=spark)
"""

# first: a missing or unsupported PySpark is refused in one line before any module needs it
from lakecdc.spark.versions import PYSPARK as _PYSPARK  # noqa: F401

# isort: split
from lakecdc.changes.events import to_ops, to_rows
from lakecdc.config.settings import Settings
from lakecdc.errors import (
    CommitConflict,
    ConfigError,
    DecodeError,
    InputChangedError,
    InputNotFoundError,
    LakecdcError,
    MissingKeyError,
    PrimaryKeyUpdateError,
    UnknownFormatError,
)
from lakecdc.lake.lease import TargetBusy
from lakecdc.lake.summary import RunSummary, TableSummary
from lakecdc.maintenance.doctor import TargetDamaged
from lakecdc.maintenance.maintain import MaintenanceReport, maintain
from lakecdc.run.apply import apply
from lakecdc.run.kafka import Kafka
from lakecdc.run.read import read_changes, read_table
from lakecdc.spark.session import get_spark
from lakecdc.streaming import BatchFailed, ChangeStream, StreamBatch, foreach_batch, stream

__version__ = "0.1.0"

__all__ = [
    "BatchFailed",
    "ChangeStream",
    "CommitConflict",
    "ConfigError",
    "DecodeError",
    "InputChangedError",
    "InputNotFoundError",
    "Kafka",
    "LakecdcError",
    "MaintenanceReport",
    "MissingKeyError",
    "PrimaryKeyUpdateError",
    "RunSummary",
    "Settings",
    "StreamBatch",
    "TableSummary",
    "TargetBusy",
    "TargetDamaged",
    "UnknownFormatError",
    "apply",
    "foreach_batch",
    "get_spark",
    "maintain",
    "read_changes",
    "read_table",
    "stream",
    "to_ops",
    "to_rows",
]
